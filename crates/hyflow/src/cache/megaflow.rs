//! The software megaflow cache: wildcard entries found by tuple space search with subtables
//! ranked by hits, like OVS's dpcls. Entries are installed on upcalls while there is room
//! (OVS's flow limit), age out after `max-idle`, and are revalidated after rule updates.

use super::Decision;
use crate::openflow::Match;
use crate::packet::FlowKey;
use crate::tuple_space::{EntryId, FlowTableStats, TupleSpace};

/// What a wildcard cache entry (software megaflow or NIC entry) holds.
#[derive(Clone, Copy, Debug)]
pub struct CachedFlow {
    /// The packet whose upcall created the entry: revalidation re-translates it.
    pub rep: FlowKey,
    /// What to do and which rules to credit.
    pub decision: Decision,
    /// Non-zero while a revalidation verdict on this entry is pending (the revalidator has
    /// not run yet): the entry is known outdated and every packet it forwards is stale.
    pub pending_verdict: u64,
}

/// The megaflow cache.
pub struct MegaflowCache {
    /// Entries.
    pub space: TupleSpace<CachedFlow>,
    capacity: usize,
    /// Counters.
    pub stats: FlowTableStats,
}

impl MegaflowCache {
    /// A cache holding at most `capacity` megaflows.
    pub fn new(capacity: usize) -> MegaflowCache {
        MegaflowCache { space: TupleSpace::new(), capacity, stats: FlowTableStats::default() }
    }

    /// Most entries it may hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The entry matching `key`, counting the hit.
    #[inline]
    pub fn lookup(&mut self, key: &FlowKey, bytes: u64, now_ns: u64) -> Option<EntryId> {
        self.space.lookup_counted(key, 0, bytes, now_ns, &mut self.stats)
    }

    /// Installs a megaflow if there is room and it is not already there; returns whether it
    /// was installed (the caller then owes the entry one decision reference).
    pub fn install(&mut self, m: &Match, flow: CachedFlow, now_ns: u64) -> bool {
        if self.space.find(m, 0).is_some() {
            return false;
        }
        if self.space.len() >= self.capacity {
            self.stats.refused += 1;
            return false;
        }
        self.space.insert(m, 0, 0, flow, now_ns);
        self.stats.installs += 1;
        self.stats.peak = self.stats.peak.max(self.space.len());
        true
    }
}
