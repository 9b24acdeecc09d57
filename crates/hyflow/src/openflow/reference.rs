//! Brute-force references the fast structures are tested against. Obviously right, slow.

use super::action::conjunctions;
use super::pipeline::Pipeline;
use super::rule::{Match, Rule, RuleId};
use crate::packet::field::id;
use crate::packet::FlowKey;

/// The rule a linear scan of `table` picks for `key`: highest priority, then first added;
/// with conjunctive matches resolved as Open vSwitch resolves them
/// ([`conjunctive_lookup`]) when the table has clauses of conjunctions.
pub fn linear_lookup(p: &Pipeline, table: u8, key: &FlowKey) -> Option<RuleId> {
    let in_table = || p.rules().filter(move |(_, r)| r.table == table);
    if in_table().any(|(_, r)| !conjunctions(&r.actions).is_empty()) {
        return conjunctive_lookup(p, table, key);
    }
    in_table()
        .filter(|(_, r)| r.matcher().matches(key))
        .max_by(|a, b| rank(p, a).cmp(&rank(p, b)))
        .map(|(id, _)| id)
}

/// Precedence: priority, then the rule added first.
fn rank(p: &Pipeline, (id, r): &(RuleId, &Rule)) -> (u16, std::cmp::Reverse<u64>) {
    (r.priority, std::cmp::Reverse(p.seq(*id)))
}

/// Open vSwitch's conjunctive matching (`classifier_lookup__`, `ovs-fields(7)`), by scanning:
///
/// 1. The rules matching `key` fall into groups of identical matches; each group shows its
///    best rule. A shown rule whose actions are `conjunction(...)` is soft, any other hard.
/// 2. From the highest soft priority above the best hard rule down: if, among the soft rules
///    shown at that priority, every clause of a conjunction `id` is present (counting only
///    conjunctions of at most as many clauses as there are such rules), the best rule matching
///    `key` with `conj_id=id` is the answer, if there is one (that second lookup sees only
///    each group's best rule, and skips it if soft). Otherwise
///    each of those groups shows its next rule (a hard one there competes with the best hard
///    rule), and lower priorities are tried. What remains is the best hard rule.
///
/// Soft rules are taken in the order the classifier visits their masks (highest priority of
/// the mask first, then its earliest rule): it decides which of two conjunctions completing
/// at the same priority is tried first.
pub fn conjunctive_lookup(p: &Pipeline, table: u8, key: &FlowKey) -> Option<RuleId> {
    let rules: Vec<(RuleId, &Rule)> = p.rules().filter(|(_, r)| r.table == table).collect();
    let soft = |r: &Rule| !conjunctions(&r.actions).is_empty();
    // Groups of identical matches, each best first, in the classifier's mask order.
    let mut groups: Vec<(Match, Vec<(RuleId, &Rule)>)> = Vec::new();
    for &(id, r) in rules.iter().filter(|(_, r)| r.matcher().matches(key)) {
        match groups.iter_mut().find(|(m, _)| *m == r.matcher()) {
            Some((_, g)) => g.push((id, r)),
            None => groups.push((r.matcher(), vec![(id, r)])),
        }
    }
    for (_, g) in &mut groups {
        g.sort_by_key(|a| std::cmp::Reverse(rank(p, a)));
    }
    let mask_rank = |m: &Match| {
        let top =
            rules.iter().filter(|(_, r)| r.matcher().mask == m.mask).map(|(id, r)| rank(p, &(*id, *r))).max();
        std::cmp::Reverse(top)
    };
    groups.sort_by_key(|(m, _)| mask_rank(m));
    let mut shown: Vec<usize> = vec![0; groups.len()];
    // The best hard rule the groups show first; one a group falls back to replaces it only
    // with a strictly higher priority (at equal priority the one found first stays, as OVS).
    let mut hard: Option<(RuleId, &Rule)> = None;
    for (_, g) in &groups {
        let head = g[0];
        if !soft(head.1) && hard.is_none_or(|h| rank(p, &head) > rank(p, &h)) {
            hard = Some(head);
        }
    }
    loop {
        let hard_pri = hard.map(|(_, r)| r.priority as i32).unwrap_or(-1);
        let heads: Vec<usize> = (0..groups.len())
            .filter(|&gi| {
                groups[gi].1.get(shown[gi]).is_some_and(|(_, r)| soft(r) && r.priority as i32 > hard_pri)
            })
            .collect();
        let Some(top) = heads.iter().map(|&gi| groups[gi].1[shown[gi]].1.priority).max() else {
            return hard.map(|(id, _)| id);
        };
        let at_top: Vec<usize> =
            heads.into_iter().filter(|&gi| groups[gi].1[shown[gi]].1.priority == top).collect();
        let mut seen: Vec<(u32, Vec<bool>)> = Vec::new();
        for &gi in &at_top {
            for c in conjunctions(&groups[gi].1[shown[gi]].1.actions) {
                if c.n_clauses as usize > at_top.len() {
                    continue;
                }
                let slot = match seen.iter().position(|(i, _)| *i == c.id) {
                    Some(s) => s,
                    None => {
                        seen.push((c.id, vec![false; c.n_clauses as usize]));
                        seen.len() - 1
                    }
                };
                if let Some(b) = seen[slot].1.get_mut(c.clause as usize) {
                    *b = true;
                }
                if seen[slot].1.iter().all(|&b| b) {
                    let mut with_id = *key;
                    with_id.set(id::CONJ_ID, c.id as u128);
                    // The second lookup sees each group's best rule only, and skips it if soft.
                    let mut heads: Vec<(RuleId, &Rule)> = Vec::new();
                    for &(id, r) in rules.iter().filter(|(_, r)| r.matcher().matches(&with_id)) {
                        match heads.iter_mut().find(|(_, h)| h.matcher() == r.matcher()) {
                            Some(h) if rank(p, &(id, r)) > rank(p, h) => *h = (id, r),
                            Some(_) => {}
                            None => heads.push((id, r)),
                        }
                    }
                    let found = heads
                        .into_iter()
                        .filter(|(_, r)| !soft(r))
                        .max_by(|a, b| rank(p, a).cmp(&rank(p, b)));
                    if let Some((id, _)) = found {
                        return Some(id);
                    }
                    break;
                }
            }
        }
        for gi in at_top {
            shown[gi] += 1;
            if let Some(&(id, r)) = groups[gi].1.get(shown[gi]) {
                if !soft(r) && hard.is_none_or(|(_, h)| r.priority > h.priority) {
                    hard = Some((id, r));
                }
            }
        }
    }
}
