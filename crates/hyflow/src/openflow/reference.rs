//! Brute-force references the fast structures are tested against. Obviously right, slow.

use super::pipeline::Pipeline;
use super::rule::RuleId;
use crate::packet::FlowKey;

/// The rule a linear scan of `table` picks for `key`: highest priority, then first added.
pub fn linear_lookup(p: &Pipeline, table: u8, key: &FlowKey) -> Option<RuleId> {
    p.rules()
        .filter(|(_, r)| r.table == table && r.matcher.matches(key))
        .max_by(|(a, ra), (b, rb)| ra.priority.cmp(&rb.priority).then(p.seq(*b).cmp(&p.seq(*a))))
        .map(|(id, _)| id)
}
