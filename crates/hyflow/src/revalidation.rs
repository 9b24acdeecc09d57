//! The revalidation contract: what a cache of wildcard entries (the megaflow cache, each NIC
//! scheme's tables) promises so that the revalidator can keep it consistent with the rules —
//! each entry's [`EntryVersion`], its dependencies, re-translation under the current rules
//! ([`Translator`]) and removal with a reason. It sits below the caches and NIC schemes that
//! implement it; the engine that drives it (`revalidator`) sits above them.

use crate::decision::interner::ItemRef;
use crate::decision::DecisionTables;
use crate::openflow::{LookupRef, Pipeline, Traversal};
use crate::tuple_space::{EntryId, FlowTableStats};

/// Where a cached wildcard entry stands with respect to rule updates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntryVersion {
    /// Generation under which the entry's dependencies were indexed (0: not indexed).
    pub generation: u64,
    /// Non-zero while a revalidation verdict on the entry is pending: that verdict's number.
    /// The entry is then known outdated, and every packet it forwards is stale.
    pub pending: u64,
}

impl EntryVersion {
    /// Whether a verdict on the entry is pending.
    #[inline]
    pub(crate) fn is_pending(&self) -> bool {
        self.pending != 0
    }
}

/// The outcome of re-translating an entry under the current rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retranslation {
    /// Same decision for everything it covers, needing no bit it ignores: keep it, with this
    /// rule path (a reference the caller now owns).
    Keep(ItemRef),
    /// Remove it.
    Evict,
}

/// Why an entry is removed (each is counted in its table's stats).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// Revalidation found it outdated.
    Revalidated,
    /// Idle longer than `max-idle`.
    Expired,
    /// An offload policy took its flow out of the NIC.
    Replaced,
}

impl Removal {
    /// Books the removal in a table's counters.
    pub fn count(self, stats: &mut FlowTableStats) {
        match self {
            Removal::Revalidated => stats.revalidated += 1,
            Removal::Expired => stats.expired += 1,
            Removal::Replaced => stats.replaced += 1,
        }
    }
}

/// What the revalidator needs from a cache of wildcard entries.
pub trait Revalidate {
    /// Tables it has (entries are addressed by table and id).
    fn tables(&self) -> usize;
    /// The version and rule path of a live entry.
    fn slot(&mut self, table: usize, id: EntryId) -> Option<(&mut EntryVersion, &mut ItemRef)>;
    /// The version of a live entry.
    fn version(&self, table: usize, id: EntryId) -> Option<EntryVersion>;
    /// Appends the lookup outcomes whose change may alter what the entry decides.
    fn dependencies(&self, table: usize, id: EntryId, tables: &DecisionTables, out: &mut Vec<LookupRef>);
    /// Re-translates a live entry under the current rules.
    fn retranslate(&mut self, table: usize, id: EntryId, with: &mut Translator) -> Retranslation;
    /// Removes an entry, releasing what it holds and counting `why`; false if it was gone.
    fn remove(&mut self, table: usize, id: EntryId, tables: &mut DecisionTables, why: Removal) -> bool;
    /// Appends the ids of the table's entries without a hit since before `cutoff_ns`, in id order.
    fn idle(&self, table: usize, cutoff_ns: u64, out: &mut Vec<EntryId>);
    /// Appends the ids of all the table's entries, in id order.
    fn ids(&self, table: usize, out: &mut Vec<EntryId>);
}

/// What re-translating an entry needs: the rules, the decision tables (a kept entry's new
/// path is interned there) and a traversal to reuse.
pub struct Translator<'a> {
    /// The rules now.
    pub pipeline: &'a Pipeline,
    /// Action and path tables.
    pub tables: &'a mut DecisionTables,
    /// Scratch traversal.
    pub tr: &'a mut Traversal,
}
