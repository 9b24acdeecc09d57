//! Cached decisions as every cache and NIC table holds them: two references into the Action
//! Table and the rule-path table, shared by every flow with the same decision (FlowShadow
//! §III-A), and the side tables keyed by lookup outcome that invalidation works through.

pub(crate) mod copy_plan;
pub mod interner;

use copy_plan::CopyPlan;
use interner::{Interner, ItemRef};

use crate::openflow::dp_actions::{uses_conntrack, DpAction};
use crate::openflow::traversal::Output;
use crate::openflow::{LookupRef, RuleId, Traversal};

/// A cached forwarding decision: what to do, and which lookups (rules or misses) it stands
/// for. Two 4-byte references, shared by every flow with the same decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Composed datapath actions, in the Action Table.
    pub actions: ItemRef,
    /// Lookup outcomes, in the path table: rules to credit, what updates must invalidate.
    pub path: ItemRef,
}

/// The decision a cached layer found for a pass — one entry's (a NIC entry, a megaflow, a
/// microflow) or a chain of NIC entries' (Gigaflow) — as the switch serves it, whichever
/// layer found it.
#[derive(Clone, Debug, Default)]
pub struct CachedHit {
    /// The decision's action list, when one entry held all of it: the switch runs it.
    pub actions: Option<ItemRef>,
    /// The copies that leave, when a chain of entries made the decision (it has no single
    /// action list).
    pub outputs: Vec<Output>,
    /// Rule paths of the entries that applied, in order (their rules are credited).
    pub paths: Vec<ItemRef>,
    /// Whether one of them awaits a revalidation verdict (the decision is stale).
    pub stale: bool,
}

impl CachedHit {
    /// One entry's decision.
    #[inline]
    pub fn set(&mut self, decision: Decision, stale: bool) {
        self.actions = Some(decision.actions);
        self.outputs.clear();
        self.paths.clear();
        self.paths.push(decision.path);
        self.stale = stale;
    }
}

/// The Action Table (with FlowShadow's per-action invalidation time stamps) and the path table.
#[derive(Default)]
pub struct DecisionTables {
    /// Deduplicated composed action lists (interned only through
    /// [`DecisionTables::intern_actions`], which keeps the side tables below in step).
    actions: Interner<DpAction>,
    /// Deduplicated lookup-outcome sequences (interned only through
    /// [`DecisionTables::intern_outcomes`], which keeps `path_facts` in step).
    paths: Interner<LookupRef>,
    /// Per action reference: the update epoch at which it was last invalidated (action mode).
    action_invalidated: Vec<u64>,
    /// Per action reference: whether the list goes through the connection tracker or
    /// recirculates ([`uses_conntrack`]), found once when it was interned.
    tracked: Vec<bool>,
    /// Per action reference: where its copies leave ([`CopyPlan`]), found once when it was
    /// interned, so that a hit counts its copies per port without running the list.
    copy_plans: Vec<CopyPlan>,
    /// Per path reference: its rules and whether it is stateful, found once when it was
    /// interned, in one flat array: a hit credits its rules without reaching the path's own
    /// allocation (the dependent load a profile showed as most of a NIC hit's crediting).
    path_facts: Vec<PathFacts>,
    scratch: Vec<LookupRef>,
}

/// Most rules a path's [`PathFacts`] hold inline; a longer path's are read from the path.
const INLINE_RULES: usize = 6;

/// What a hit needs of its path.
#[derive(Clone, Copy, Debug, Default)]
struct PathFacts {
    /// The path's rules in lookup order, when it has at most [`INLINE_RULES`].
    rules: [RuleId; INLINE_RULES],
    /// How many of `rules` hold; `None`: more than fit (read them from the path).
    len: Option<u8>,
    /// Whether the path ends with [`LookupRef::STATEFUL`].
    stateful: bool,
}

impl PathFacts {
    fn of(outcomes: &[LookupRef]) -> PathFacts {
        let mut facts = PathFacts {
            stateful: outcomes.last() == Some(&LookupRef::STATEFUL),
            len: Some(0),
            ..PathFacts::default()
        };
        for (n, r) in outcomes.iter().filter_map(|o| o.as_rule()).enumerate() {
            match facts.rules.get_mut(n) {
                Some(slot) => *slot = r,
                None => {
                    facts.len = None;
                    return facts;
                }
            }
            facts.len = Some(n as u8 + 1);
        }
        facts
    }
}

impl DecisionTables {
    /// Empty tables.
    pub fn new() -> DecisionTables {
        DecisionTables::default()
    }

    /// The decision a slow-path traversal made, holding one reference for the caller.
    pub fn intern(&mut self, tr: &Traversal) -> Decision {
        let actions = self.intern_actions(&tr.dp_actions);
        Decision { actions, path: self.intern_path(tr) }
    }

    /// The reference for an action list, holding one reference for the caller; a new list
    /// gets its side data (invalidation stamp, whether it is tracked, its copy plan).
    pub fn intern_actions(&mut self, list: &[DpAction]) -> ItemRef {
        let (actions, new) = self.actions.intern(list);
        if new {
            let i = actions as usize;
            let capacity = self.actions.capacity();
            self.action_invalidated.resize(capacity, 0);
            self.action_invalidated[i] = 0;
            self.tracked.resize(capacity, false);
            self.tracked[i] = uses_conntrack(list);
            self.copy_plans.resize_with(capacity, CopyPlan::default);
            self.copy_plans[i] = CopyPlan::of(list);
        }
        actions
    }

    /// The Action Table.
    #[inline]
    pub fn actions(&self) -> &Interner<DpAction> {
        &self.actions
    }

    /// Interns a traversal's path alone (revalidation keeps actions but may change the path).
    pub(crate) fn intern_path(&mut self, tr: &Traversal) -> ItemRef {
        let mut outcomes = std::mem::take(&mut self.scratch);
        outcomes.clear();
        outcomes.extend(tr.outcomes());
        let path = self.intern_outcomes(&outcomes);
        self.scratch = outcomes;
        path
    }

    /// The reference for a sequence of lookup outcomes (a path), holding one reference for
    /// the caller; a new path gets its facts (its rules and whether it is stateful).
    pub fn intern_outcomes(&mut self, outcomes: &[LookupRef]) -> ItemRef {
        let (path, new) = self.paths.intern(outcomes);
        if new {
            self.path_facts.resize(self.paths.capacity(), PathFacts::default());
            self.path_facts[path as usize] = PathFacts::of(outcomes);
        }
        path
    }

    /// The path table.
    #[inline]
    pub fn paths(&self) -> &Interner<LookupRef> {
        &self.paths
    }

    /// Drops a reference on a path.
    pub fn release_path(&mut self, path: ItemRef) {
        self.paths.release(path);
    }

    /// Takes another reference on both parts.
    pub(crate) fn acquire(&mut self, d: Decision) {
        self.actions.acquire(d.actions);
        self.paths.acquire(d.path);
    }

    /// Drops a reference on both parts.
    pub fn release(&mut self, d: Decision) {
        self.actions.release(d.actions);
        self.paths.release(d.path);
    }

    /// FlowShadow action-mode invalidation: every flow cached with `actions` before `epoch`
    /// is invalid.
    pub(crate) fn invalidate_action(&mut self, actions: ItemRef, epoch: u64) {
        let i = actions as usize;
        if self.action_invalidated.len() <= i {
            self.action_invalidated.resize(i + 1, 0);
        }
        self.action_invalidated[i] = epoch;
    }

    /// Whether an interned action list goes through the connection tracker or recirculates.
    #[inline]
    pub fn tracks(&self, actions: ItemRef) -> bool {
        self.tracked.get(actions as usize).copied().unwrap_or(false)
    }

    /// Where the copies of an interned list leave, as far as they do not depend on the
    /// connection tracker (meaningful for a list that is not [tracked](Self::tracks): a
    /// tracked one is run instead).
    #[inline]
    pub(crate) fn copy_plan(&self, actions: ItemRef) -> &CopyPlan {
        &self.copy_plans[actions as usize]
    }

    /// Epoch of the last invalidation of an action list (0 = never).
    #[inline]
    pub(crate) fn action_invalidated(&self, actions: ItemRef) -> u64 {
        self.action_invalidated.get(actions as usize).copied().unwrap_or(0)
    }

    /// Whether the decision with this path learns (flows or MACs) or uses what was learned
    /// (it ends with [`LookupRef::STATEFUL`]).
    #[inline]
    pub fn stateful(&self, path: ItemRef) -> bool {
        self.path_facts.get(path as usize).is_some_and(|f| f.stateful)
    }

    /// The rules on an interned path, in lookup order.
    pub(crate) fn path_rules(&self, path: ItemRef) -> impl Iterator<Item = RuleId> + '_ {
        let (inline, spilled): (&[RuleId], &[LookupRef]) = match self.path_facts.get(path as usize) {
            Some(PathFacts { rules, len: Some(n), .. }) => (&rules[..*n as usize], &[]),
            _ => (&[], self.paths.get(path)),
        };
        inline.iter().copied().chain(spilled.iter().filter_map(|o| o.as_rule()))
    }
}

/// A side table indexed by lookup outcome: rules by id (grown on demand), misses by table.
/// FlowShadow's Cookie Table and Signature Table are both of this shape.
pub(crate) struct OutcomeMap<T> {
    rules: Vec<T>,
    misses: Vec<T>,
}

impl<T: Default + Clone> Default for OutcomeMap<T> {
    fn default() -> Self {
        OutcomeMap { rules: Vec::new(), misses: vec![T::default(); 256] }
    }
}

impl<T: Default + Clone> OutcomeMap<T> {
    /// The value for an outcome (default if never set).
    #[inline]
    pub(crate) fn get(&self, o: LookupRef) -> Option<&T> {
        match (o.as_rule(), o.as_miss()) {
            (Some(r), _) => self.rules.get(r as usize),
            (_, Some(t)) => self.misses.get(t as usize),
            _ => None,
        }
    }

    /// The value for an outcome, mutably (created on first use).
    pub(crate) fn get_mut(&mut self, o: LookupRef) -> &mut T {
        match o.as_rule() {
            Some(r) => {
                if self.rules.len() <= r as usize {
                    self.rules.resize(r as usize + 1, T::default());
                }
                &mut self.rules[r as usize]
            }
            None => &mut self.misses[o.as_miss().unwrap_or(0) as usize],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path's rules and statefulness read from its facts are those of its outcomes, for
    /// paths that fit inline and paths that do not, and stay right when a freed reference
    /// is reused for another path.
    #[test]
    fn path_facts_agree_with_the_outcomes() {
        let rule = LookupRef::rule;
        let paths: Vec<Vec<LookupRef>> = vec![
            vec![],
            vec![rule(3)],
            vec![rule(1), LookupRef::miss(2), rule(9), LookupRef::STATEFUL],
            (0..INLINE_RULES as u32).map(rule).collect(),
            (0..INLINE_RULES as u32 + 1).map(rule).chain([LookupRef::miss(0), LookupRef::STATEFUL]).collect(),
        ];
        let mut tables = DecisionTables::new();
        let check = |tables: &DecisionTables, path: ItemRef, outcomes: &[LookupRef]| {
            let want: Vec<RuleId> = outcomes.iter().filter_map(|o| o.as_rule()).collect();
            assert_eq!(tables.path_rules(path).collect::<Vec<_>>(), want, "{outcomes:?}");
            assert_eq!(tables.stateful(path), outcomes.last() == Some(&LookupRef::STATEFUL));
        };
        let refs: Vec<ItemRef> = paths.iter().map(|p| tables.intern_outcomes(p)).collect();
        for (&r, p) in refs.iter().zip(&paths) {
            check(&tables, r, p);
        }
        // The long stateful path's reference, freed, now holds a short stateless one.
        tables.release_path(refs[4]);
        let reused = tables.intern_outcomes(&[rule(42)]);
        assert_eq!(reused, refs[4]);
        check(&tables, reused, &[rule(42)]);
    }
}
