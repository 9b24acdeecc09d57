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

use std::collections::BTreeSet;

use super::rule::{Rule, RuleId};

/// When each rule was last modified, and which rules can expire. (When a rule was last hit
/// is in its counters, [`super::pipeline::RuleStats::used_ns`], written with them.)
#[derive(Clone, Debug, Default)]
pub(crate) struct RuleTimers {
    /// Per rule id: when it was added or last modified, ns.
    modified: Vec<u64>,
    /// Rules added (true) or modified (false) since the last stamp.
    unstamped: Vec<(RuleId, bool)>,
    /// Installed rules with a timeout.
    expirable: BTreeSet<RuleId>,
}

impl RuleTimers {
    /// Rule `id` was added.
    pub(crate) fn added(&mut self, id: RuleId, rule: &Rule) {
        if self.modified.len() <= id as usize {
            self.modified.resize(id as usize + 1, 0);
        }
        self.unstamped.push((id, true));
        if rule.idle_timeout > 0 || rule.hard_timeout > 0 {
            self.expirable.insert(id);
        }
    }

    /// Rule `id` was modified: its hard timeout restarts.
    pub(crate) fn modified(&mut self, id: RuleId) {
        self.unstamped.push((id, false));
    }

    /// Rule `id` was removed.
    pub(crate) fn removed(&mut self, id: RuleId) {
        self.expirable.remove(&id);
    }

    /// The additions and modifications since the last stamp happened at `now_ns`; `added` is
    /// told each rule added (its idle time counts from then).
    pub(crate) fn stamp(&mut self, now_ns: u64, mut added: impl FnMut(RuleId)) {
        for (id, is_added) in self.unstamped.drain(..) {
            self.modified[id as usize] = now_ns;
            if is_added {
                added(id);
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
        for &id in &self.expirable {
            let (Some((r, used)), Some(&modified)) = (rule(id), self.modified.get(id as usize)) else {
                continue;
            };
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
