//! Rules: a match, a priority and an action list, installed in one table.

use super::action::{format_actions, Action};
use crate::packet::format::format_match;
use crate::packet::{FlowKey, FlowMask};

/// A wildcard match: `value` is kept pre-masked so equal matches compare equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Match {
    /// Field values (zero wherever `mask` is zero).
    pub value: FlowKey,
    /// Exact bits.
    pub mask: FlowMask,
}

impl Match {
    /// Builds a match, clearing value bits outside the mask.
    pub fn new(value: FlowKey, mask: FlowMask) -> Match {
        Match { value: value.masked(&mask), mask }
    }

    /// Whether a packet satisfies this match.
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        key.matches(&self.value, &self.mask)
    }

    /// Whether some packet satisfies both matches: they agree wherever both are exact.
    pub(crate) fn overlaps(&self, other: &Match) -> bool {
        (0..self.value.words.len()).all(|i| {
            (self.value.words[i] ^ other.value.words[i]) & self.mask.words[i] & other.mask.words[i] == 0
        })
    }

    /// Whether every packet of `self` satisfies `criteria` (OVS `cls_rule_is_loose_match`):
    /// how non-strict `mod-flows`/`del-flows` select rules.
    pub fn within(&self, criteria: &Match) -> bool {
        criteria.mask.is_subset_of(&self.mask) && self.value.masked(&criteria.mask) == criteria.value
    }
}

impl std::fmt::Display for Match {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format_match(&self.value, &self.mask))
    }
}

/// Index of a rule in a [`Pipeline`](super::Pipeline)'s rule arena; stable for the rule's life.
pub type RuleId = u32;

/// One OpenFlow rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Table the rule lives in.
    pub table: u8,
    /// Higher wins.
    pub priority: u16,
    /// Opaque controller cookie.
    pub cookie: u64,
    /// Seconds without a hit before the rule expires (0 = never).
    pub idle_timeout: u16,
    /// Seconds after install, or the last modification, before the rule expires (0 = never).
    pub hard_timeout: u16,
    /// What packets the rule applies to.
    pub matcher: Match,
    /// What it does to them.
    pub actions: Vec<Action>,
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "table={},priority={}", self.table, self.priority)?;
        if self.cookie != 0 {
            write!(f, ",cookie={:#x}", self.cookie)?;
        }
        let m = self.matcher.to_string();
        if !m.is_empty() {
            write!(f, ",{m}")?;
        }
        write!(f, " actions={}", format_actions(&self.actions))
    }
}
