//! Rules: a match, a priority and an action list, installed in one table.

use std::sync::Arc;

use super::action::{format_actions, Action};
use crate::packet::field::{FieldId, KEY_WORDS};
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

/// A match stored by the key words its mask touches: a rule matches a few fields, and a
/// dense [`Match`] is 448 bytes, which made a million-rule table cost over a kilobyte per rule.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
struct PackedMatch {
    /// Bit `i` set: word `i` of the mask is not zero.
    present: u32,
    /// (value, mask) of every present word, ascending.
    pairs: Box<[[u64; 2]]>,
}

const _: () = assert!(KEY_WORDS <= 32, "PackedMatch's word set is a u32");

impl PackedMatch {
    fn pack(m: &Match) -> PackedMatch {
        let mut present = 0u32;
        let pairs = (0..KEY_WORDS)
            .filter(|&i| m.mask.words[i] != 0)
            .map(|i| {
                present |= 1 << i;
                [m.value.words[i], m.mask.words[i]]
            })
            .collect();
        PackedMatch { present, pairs }
    }

    /// (value, mask) of key word `i`.
    fn word(&self, i: usize) -> [u64; 2] {
        match self.present >> i & 1 {
            0 => [0, 0],
            _ => self.pairs[(self.present & ((1 << i) - 1)).count_ones() as usize],
        }
    }

    fn unpack(&self) -> Match {
        let mut m = Match::default();
        let mut bits = self.present;
        for &[value, mask] in self.pairs.iter() {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            m.value.words[i] = value;
            m.mask.words[i] = mask;
        }
        m
    }
}

/// A rule's action list, shared: rules with equal actions hold one copy once installed (a
/// [`Pipeline`](super::Pipeline) interns them), and a rule's clone costs no allocation.
pub type Actions = Arc<[Action]>;

/// Index of a rule in a [`Pipeline`](super::Pipeline)'s rule arena; stable for the rule's life.
pub type RuleId = u32;

/// One OpenFlow rule, stored compactly (its match packed, its actions shared): a pipeline
/// holds millions.
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
    /// What packets the rule applies to ([`Rule::matcher`] expands it).
    packed: PackedMatch,
    /// What it does to them.
    pub actions: Actions,
}

impl Rule {
    /// A rule of `table` at `priority` with no cookie and no timeouts.
    pub fn new(table: u8, priority: u16, matcher: &Match, actions: impl Into<Actions>) -> Rule {
        Rule {
            table,
            priority,
            cookie: 0,
            idle_timeout: 0,
            hard_timeout: 0,
            packed: PackedMatch::pack(matcher),
            actions: actions.into(),
        }
    }

    /// What packets the rule applies to.
    pub fn matcher(&self) -> Match {
        self.packed.unpack()
    }

    /// The value the match gives field `f` (of at most 64 bits) exactly, if it does, read
    /// without expanding the match.
    pub fn exact_field(&self, f: FieldId) -> Option<u64> {
        let def = f.def();
        debug_assert!(def.bits <= 64, "{} is wider than a word", def.name);
        let field_mask = (u64::MAX >> (64 - u32::from(def.bits.min(64)))) << def.shift;
        let [value, mask] = self.packed.word(usize::from(def.word));
        (mask & field_mask == field_mask).then_some((value & field_mask) >> def.shift)
    }

    /// Replaces the rule's match.
    pub fn set_matcher(&mut self, matcher: &Match) {
        self.packed = PackedMatch::pack(matcher);
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "table={},priority={}", self.table, self.priority)?;
        if self.cookie != 0 {
            write!(f, ",cookie={:#x}", self.cookie)?;
        }
        let m = self.matcher().to_string();
        if !m.is_empty() {
            write!(f, ",{m}")?;
        }
        write!(f, " actions={}", format_actions(&self.actions))
    }
}

#[cfg(test)]
mod tests {
    use crate::openflow::parser::parse_flows;
    use crate::packet::field::id;

    #[test]
    fn a_packed_match_unpacks_to_itself() {
        let text = "actions=drop\n\
                    in_port=3,actions=drop\n\
                    ip,nw_dst=10.1.2.0/24,actions=drop\n\
                    ipv6,ipv6_src=2001:db8::/33,tcp6,tp_dst=443,actions=drop\n";
        for rule in parse_flows(text, "t").unwrap() {
            let m = rule.matcher();
            let mut again = rule.clone();
            again.set_matcher(&m);
            assert_eq!(again, rule);
            assert_eq!(rule.packed.pairs.len(), rule.packed.present.count_ones() as usize);
            assert_eq!(rule.packed.pairs.len(), m.mask.words.iter().filter(|&&w| w != 0).count());
            assert!(rule.packed.pairs.iter().all(|&[v, k]| v & !k == 0));
        }
    }

    #[test]
    fn exact_fields_read_from_the_packed_match() {
        let text = "in_port=3,ip,nw_dst=10.1.2.0/24,actions=drop
in_port=7,actions=drop
actions=drop
";
        let rules = parse_flows(text, "t").unwrap();
        let get = |f| rules.iter().map(|r| r.exact_field(f)).collect::<Vec<_>>();
        assert_eq!(get(id::IN_PORT), [Some(3), Some(7), None]);
        assert_eq!(get(id::DL_TYPE), [Some(0x0800), None, None]);
        // A prefix is not exact; the field it shares a word with is read apart from it.
        assert_eq!(get(id::NW_DST), [None, None, None]);
        for r in &rules {
            let m = r.matcher();
            let exact = (m.mask.get(id::NW_PROTO) == 0xff).then(|| m.value.get(id::NW_PROTO) as u64);
            assert_eq!(r.exact_field(id::NW_PROTO), exact);
        }
    }
}
