//! OVS hardware offload of megaflows: every new megaflow is installed in one ternary NIC table
//! while it has room (entries and masks), and a hit runs the megaflow's composed actions in
//! hardware. Entries are revalidated and aged exactly as the software megaflow cache's.

use super::{
    paper_setup, Arrival, NicConfig, NicEntryView, NicReport, NicScheme, NicSchemeConfig,
    NicSchemeRegistration, NicSizing, Upcall, DEFAULT_OFFLOAD_ENTRIES, DEFAULT_OFFLOAD_MASKS,
};
use crate::cache::dump::DumpedFlow;
use crate::cache::table::{CacheTable, MatchKind, TableConfig, TableConfigError};
use crate::cache::CachedFlow;
use crate::decision::{CachedHit, DecisionTables};
use crate::revalidation::Revalidate;
use crate::tuple_space::EntryId;

/// `megaflow`.
pub(crate) const REGISTRATION: NicSchemeRegistration = NicSchemeRegistration {
    name: "megaflow",
    about: "One ternary stage of megaflows, offloaded while there is room (OVS)",
    configure: |s: &NicSizing| {
        let default = if s.paper_setup { paper_setup::MEGAFLOW_ENTRIES } else { DEFAULT_OFFLOAD_ENTRIES };
        NicConfig::new(MegaflowOffloadConfig { entries: s.entries.unwrap_or(default), max_masks: s.masks() })
    },
    report_key: None,
};

/// The megaflow offload's one table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MegaflowOffloadConfig {
    /// Entries of the table.
    pub entries: usize,
    /// Distinct masks it supports.
    pub max_masks: usize,
}

impl Default for MegaflowOffloadConfig {
    fn default() -> Self {
        MegaflowOffloadConfig { entries: DEFAULT_OFFLOAD_ENTRIES, max_masks: DEFAULT_OFFLOAD_MASKS }
    }
}

impl NicSchemeConfig for MegaflowOffloadConfig {
    fn name(&self) -> &'static str {
        REGISTRATION.name
    }

    fn build(&self, update_latency_ns: u64) -> Result<Box<dyn NicScheme>, TableConfigError> {
        Ok(Box::new(MegaflowOffload::new(self.entries, self.max_masks, update_latency_ns)?))
    }
}

/// OVS hardware offload of megaflows: one ternary table.
pub struct MegaflowOffload {
    /// The table holding offloaded megaflows.
    pub table: CacheTable<CachedFlow>,
}

impl MegaflowOffload {
    /// A NIC with one ternary table of `entries` entries and `max_masks` masks, applying
    /// installs `update_latency_ns` after they are made.
    pub fn new(
        entries: usize,
        max_masks: usize,
        update_latency_ns: u64,
    ) -> Result<MegaflowOffload, TableConfigError> {
        let config = TableConfig {
            name: "NIC megaflow".to_string(),
            kind: MatchKind::Ternary,
            capacity: entries,
            max_masks,
            update_latency_ns,
        };
        Ok(MegaflowOffload { table: CacheTable::new(config)? })
    }
}

impl NicScheme for MegaflowOffload {
    fn name(&self) -> &'static str {
        REGISTRATION.name
    }

    fn area_len(&self, area: u8) -> usize {
        if area == 0 {
            self.table.space().len()
        } else {
            0
        }
    }

    fn area_capacity(&self, area: u8) -> usize {
        if area == 0 {
            self.table.config().capacity
        } else {
            0
        }
    }

    #[inline]
    fn lookup(&mut self, pkt: Arrival, hit: &mut CachedHit) -> bool {
        let Some(id) = self.table.lookup(pkt.key, 0, pkt.bytes, pkt.now_ns) else { return false };
        let e = &self.table.space().entry(id).expect("hit entries live").data;
        hit.set(e.decision, e.version.is_pending());
        true
    }

    fn install(&mut self, upcall: Upcall, tables: &mut DecisionTables, installed: &mut Vec<(u8, EntryId)>) {
        let flow = CachedFlow::new(*upcall.key, upcall.decision);
        if let Ok(id) = self.table.install(&upcall.traversal.megaflow, 0, 0, flow, upcall.now_ns) {
            tables.acquire(upcall.decision);
            installed.push((0, id));
        }
    }

    fn entries(&self) -> &dyn Revalidate {
        &self.table
    }

    fn entries_mut(&mut self) -> &mut dyn Revalidate {
        &mut self.table
    }

    fn installs(&self) -> u64 {
        self.table.stats.installs
    }

    fn restart_peak(&mut self) {
        self.table.stats.peak = self.table.space().len();
    }

    fn report(&self) -> NicReport {
        NicReport {
            scheme: self.name(),
            entries_now: self.table.space().len(),
            masks_now: self.table.space().n_masks(),
            totals: self.table.stats,
            figures: None,
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn counters(&self, out: &mut Vec<(u8, EntryId, u64)>) {
        let space = self.table.space();
        out.extend(space.ids().filter_map(|id| Some((0, id, space.entry(id)?.stats.packets))));
    }

    fn dump(&self, tables: &DecisionTables, out: &mut Vec<DumpedFlow>) {
        self.table.dump(tables, None, out);
    }

    fn keep_journal(&mut self) -> bool {
        self.table.parts_mut().0.keep_journal();
        true
    }

    fn drain_journal(&mut self, out: &mut Vec<(u8, EntryId)>) {
        self.table.parts_mut().0.drain_journal(|id| out.push((0, id)));
    }

    fn entry_view(&self, table: u8, id: EntryId) -> Option<NicEntryView> {
        if table != 0 {
            return None;
        }
        let space = self.table.space();
        let e = &space.entry(id)?.data;
        let matcher = space.matcher(id)?;
        Some(NicEntryView {
            matcher,
            lookup_mask: matcher.mask,
            rep: e.rep,
            decision: e.decision,
            pending: e.version.is_pending(),
        })
    }

    fn credit_hits(&mut self, table: u8, id: EntryId, packets: u64, bytes: u64, last_hit_ns: u64) -> bool {
        let (space, totals) = self.table.parts_mut();
        let Some(stats) = space.entry_stats_mut(id).filter(|_| table == 0) else { return false };
        stats.packets += packets;
        stats.bytes += bytes;
        stats.last_hit_ns = stats.last_hit_ns.max(last_hit_ns);
        totals.hits += packets;
        true
    }
}
