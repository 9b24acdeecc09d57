//! Megaflow entries: wildcard entries holding a whole traversal's decision, found by tuple
//! space search with subtables ranked by hits, like OVS's dpcls. The software megaflow cache
//! is a [`CacheTable`] of them without a mask limit (installed on upcalls while there is room
//! — OVS's flow limit); OVS-style NIC offload is a [`CacheTable`] of them with one. Both age
//! out after `max-idle` and are revalidated after rule updates in the same way, here.

use super::table::{CacheTable, MatchKind, TableConfig};
use crate::decision::interner::ItemRef;
use crate::decision::{Decision, DecisionTables};
use crate::openflow::LookupRef;
use crate::packet::{FlowKey, FlowMask};
use crate::revalidation::{EntryVersion, Removal, Retranslation, Revalidate, Translator};
use crate::tuple_space::EntryId;

/// What a megaflow entry (software megaflow or NIC entry) holds.
#[derive(Clone, Copy, Debug)]
pub struct CachedFlow {
    /// The packet whose upcall created the entry: revalidation re-translates it.
    pub rep: FlowKey,
    /// What to do and which rules to credit.
    pub decision: Decision,
    /// Its standing with respect to rule updates.
    pub version: EntryVersion,
}

impl CachedFlow {
    /// A new entry for `rep`'s upcall, deciding `decision`.
    pub fn new(rep: FlowKey, decision: Decision) -> CachedFlow {
        CachedFlow { rep, decision, version: EntryVersion::default() }
    }
}

impl CachedFlow {
    /// Re-translates the entry's packet under the current rules: kept if the actions are the
    /// same and the new megaflow needs no bit outside `covered` (the entry's mask), so the
    /// entry still decides the same for every packet it matches.
    pub(crate) fn retranslate(&self, covered: &FlowMask, with: &mut Translator) -> Retranslation {
        let Translator { pipeline, tables, tr } = with;
        pipeline.process(&self.rep, tr);
        let same_actions =
            tr.to_controller == 0 && tables.actions().get(self.decision.actions) == &tr.dp_actions[..];
        if same_actions && tr.megaflow.mask.is_subset_of(covered) {
            Retranslation::Keep(tables.intern_path(tr))
        } else {
            Retranslation::Evict
        }
    }
}

/// The software megaflow cache.
pub type MegaflowCache = CacheTable<CachedFlow>;

impl CacheTable<CachedFlow> {
    /// A software megaflow cache holding at most `capacity` megaflows (no mask limit).
    pub fn megaflow_cache(capacity: usize) -> Result<MegaflowCache, super::table::TableConfigError> {
        CacheTable::new(TableConfig {
            name: "megaflow".to_string(),
            kind: MatchKind::Ternary,
            capacity,
            max_masks: usize::MAX,
            update_latency_ns: 0,
        })
    }
}

impl Revalidate for CacheTable<CachedFlow> {
    fn tables(&self) -> usize {
        1
    }

    fn slot(&mut self, _table: usize, id: EntryId) -> Option<(&mut EntryVersion, &mut ItemRef)> {
        let e = &mut self.parts_mut().0.entry_mut(id)?.data;
        Some((&mut e.version, &mut e.decision.path))
    }

    fn version(&self, _table: usize, id: EntryId) -> Option<EntryVersion> {
        Some(self.space().entry(id)?.data.version)
    }

    fn dependencies(&self, _table: usize, id: EntryId, tables: &DecisionTables, out: &mut Vec<LookupRef>) {
        if let Some(e) = self.space().entry(id) {
            out.extend_from_slice(tables.paths().get(e.data.decision.path));
        }
    }

    /// Re-translates the entry's packet: kept if the actions are the same and the new
    /// megaflow needs no bit the entry ignores.
    fn retranslate(&mut self, _table: usize, id: EntryId, with: &mut Translator) -> Retranslation {
        let space = self.space();
        let (Some(e), Some(old)) = (space.entry(id), space.matcher(id)) else { return Retranslation::Evict };
        e.data.retranslate(&old.mask, with)
    }

    fn remove(&mut self, _table: usize, id: EntryId, tables: &mut DecisionTables, why: Removal) -> bool {
        let (space, stats) = self.parts_mut();
        let Some(e) = space.remove(id) else { return false };
        tables.release(e.data.decision);
        why.count(stats);
        true
    }

    fn idle(&self, _table: usize, cutoff_ns: u64, out: &mut Vec<EntryId>) {
        CacheTable::idle(self, cutoff_ns, out);
    }

    fn ids(&self, _table: usize, out: &mut Vec<EntryId>) {
        out.extend(self.space().ids());
    }
}
