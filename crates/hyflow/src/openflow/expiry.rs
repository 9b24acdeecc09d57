//! Flow expiry: rules' `idle_timeout` and `hard_timeout`, as Open vSwitch enforces them
//! (`ofproto-dpif.c` `rule_expire`).
//!
//! A rule with a hard timeout expires once more than that many seconds passed since it was
//! added or last modified (a `modify` restarts it, and so does a `learn` action learning the
//! same flow again); one with an idle timeout, once no packet hit it for more than that many
//! seconds (counting from its addition). The switch asks which rules expired as often as
//! OVS's revalidator dumps its flows, and deletes them as a `delete-strict` would.
//!
//! Rule changes are stamped with the time after the fact (`RuleTimers::stamp`): the
//! pipeline's edits stay free of time, and the switch, which has it, stamps them. When a rule
//! was last hit is kept with its counters, which every hit writes anyway.

use std::collections::BTreeMap;

use super::rule::{Rule, RuleId};

/// When each rule that can expire was last modified, and which rules changed since the last
/// stamp. (When a rule was last hit is in its counters,
/// [`super::pipeline::RuleStats::used_ns`], written with them.) Nothing here grows with rules
/// that have no timeout: a million-rule table without timeouts keeps no per-rule times.
#[derive(Clone, Debug, Default)]
pub(crate) struct RuleTimers {
    /// Installed rules with a timeout, with when each was added or last modified, ns.
    expirable: BTreeMap<RuleId, u64>,
    /// The first rule id added since the last stamp: ids are given in order, so the rules
    /// added since are this one up to the next id.
    first_unstamped: RuleId,
    /// Rules modified since the last stamp.
    modified: Vec<RuleId>,
}

impl RuleTimers {
    /// Rule `id`, the next id, was added.
    pub(crate) fn added(&mut self, id: RuleId, rule: &Rule) {
        if rule.idle_timeout > 0 || rule.hard_timeout > 0 {
            self.expirable.insert(id, 0);
        }
    }

    /// Rule `id` was modified: its hard timeout restarts.
    pub(crate) fn modified(&mut self, id: RuleId) {
        if self.expirable.contains_key(&id) {
            self.modified.push(id);
        }
    }

    /// Rule `id` was removed.
    pub(crate) fn removed(&mut self, id: RuleId) {
        self.expirable.remove(&id);
    }

    /// The additions (ids below `next_id` not stamped yet) and modifications since the last
    /// stamp happened at `now_ns`; `added` is told each rule added (its idle time counts from
    /// then).
    pub(crate) fn stamp(&mut self, now_ns: u64, next_id: RuleId, mut added: impl FnMut(RuleId)) {
        for id in self.first_unstamped..next_id {
            added(id);
        }
        for (_, modified) in self.expirable.range_mut(self.first_unstamped..next_id) {
            *modified = now_ns;
        }
        self.first_unstamped = next_id;
        for id in self.modified.drain(..) {
            if let Some(modified) = self.expirable.get_mut(&id) {
                *modified = now_ns;
            }
        }
    }

    /// Appends to `out` the rules expired at `now_ns`, in id order; `rule` gives an id's rule
    /// and when it was last hit.
    pub(crate) fn expired<'a>(
        &self,
        now_ns: u64,
        rule: impl Fn(RuleId) -> Option<(&'a Rule, u64)>,
        out: &mut Vec<RuleId>,
    ) {
        const S: u64 = 1_000_000_000;
        for (&id, &modified) in &self.expirable {
            let Some((r, used)) = rule(id) else { continue };
            let hard = r.hard_timeout > 0 && now_ns > modified + r.hard_timeout as u64 * S;
            let idle = r.idle_timeout > 0 && now_ns > used + r.idle_timeout as u64 * S;
            if hard || idle {
                out.push(id);
            }
        }
    }

    /// Whether any installed rule has a timeout.
    pub(crate) fn any(&self) -> bool {
        !self.expirable.is_empty()
    }
}
