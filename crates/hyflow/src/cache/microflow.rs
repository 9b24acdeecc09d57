//! FlowShadow's exact-match microflow cache (Wang et al., §III).
//!
//! A 32-bit signature of the packet's key picks a bucket of 1, 2 or 4 entries; a signature
//! hit is confirmed against the full key kept with the entry. Associated data is a
//! [`Decision`]: a reference into the Action Table and one into the path table, which names
//! the rules whose counters the packet credits. Replacement is direct for 1-entry buckets and
//! tree pseudo-LRU for 2 and 4.
//!
//! Three ways to stay consistent with rule updates (§III-B), chosen by [`Consistency`]:
//! - `Signature`: a Signature Table from each lookup outcome (rule or table miss) to the
//!   entries that depend on it; an update removes them all at once (strong, bursty).
//! - `Cookie`: a Cookie Table of the epoch each outcome last changed; a hit is valid only if
//!   no outcome on its path changed after the entry was cached (weak, checks per hit).
//! - `Action`: the Cookie Table maps each outcome to the action lists it contributed to; an
//!   update stamps those Action Table entries invalid, and a hit is valid only if it was
//!   cached after its action list's stamp (weak, one check per hit).
//!
//! FlowShadow keys its tables by the controller's cookie; cookies are not unique in practice
//! (`ovs-ofctl` defaults them to 0), so hyflow keys them by the rule's id, which is what the
//! paper uses the cookie for, plus one pseudo-rule per table for table misses, which an
//! added rule can turn into hits.

use crate::decision::{Decision, DecisionTables, OutcomeMap};
use crate::invalid_param::InvalidParam;
use crate::openflow::LookupRef;
use crate::packet::FlowKey;
use crate::prefetch::prefetch;

/// Packets per [`MicroflowCache::lookup_batch`] round (OVS's `NETDEV_MAX_BURST`).
pub const BATCH: usize = 32;

/// How the microflow cache stays consistent with rule updates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Consistency {
    /// Signature Table, eager removal.
    Signature,
    /// Cookie Table of rule states, checked on every hit.
    Cookie,
    /// Action Table time stamps, checked on every hit.
    #[default]
    Action,
}

impl Consistency {
    /// Name as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            Consistency::Signature => "signature",
            Consistency::Cookie => "cookie",
            Consistency::Action => "action",
        }
    }
}

/// Counters of the microflow cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MicroflowStats {
    /// Lookups that returned a valid entry.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Entries written.
    pub inserts: u64,
    /// Valid entries overwritten by a new one.
    pub evictions: u64,
    /// Entries found invalid on lookup and dropped (cookie and action modes).
    pub invalidated: u64,
    /// Entries removed by updates through the Signature Table (signature mode).
    pub removed: u64,
    /// Most entries held at once.
    pub peak: usize,
}

/// What a hit reads besides the signature: the full key and the decision, exactly three
/// cache lines when aligned.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Slot {
    key: FlowKey,
    decision: Decision,
}

/// Per-slot bookkeeping, kept apart so a bucket's signatures share one cache line.
#[derive(Clone, Copy, Default)]
struct Meta {
    /// 0 marks an empty slot (real signatures are forced odd).
    sig: u32,
    /// Bumped whenever the slot's content changes, so Signature Table entries can go stale.
    gen: u32,
    /// Update epoch at which the decision was known current.
    stamp: u64,
}

/// The FlowShadow microflow cache.
pub struct MicroflowCache {
    ways: usize,
    bucket_mask: usize,
    meta: Vec<Meta>,
    slots: Vec<Slot>,
    /// Tree pseudo-LRU bits per bucket.
    plru: Vec<u8>,
    consistency: Consistency,
    /// Signature mode: outcome → (slot, generation) of dependent entries.
    signature_table: OutcomeMap<Vec<(u32, u32)>>,
    /// Cookie mode: outcome → epoch of its last change.
    changed_at: OutcomeMap<u64>,
    /// Action mode: outcome → action lists cached with it on their path.
    outcome_actions: OutcomeMap<Vec<u32>>,
    len: usize,
    stats: MicroflowStats,
}

impl MicroflowConfigError {
    /// [`MicroflowConfigError::Empty`] as the parameter it is about.
    pub(crate) fn empty_param() -> InvalidParam {
        InvalidParam::new(
            "microflow-entries",
            "must be at least 1 (turn the cache off with `no-microflow` instead)",
        )
    }
}

/// Why a microflow cache cannot be built as asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MicroflowConfigError {
    /// Zero entries with the cache on (a parameter out of range: `microflow-entries`).
    #[error("`microflow-entries` must be at least 1 (turn the cache off with `no-microflow` instead)")]
    Empty,
    /// Unsupported associativity.
    #[error("microflow buckets hold 1, 2 or 4 entries, not {0}")]
    Ways(usize),
    /// More entries than the memory a cache may take.
    #[error(transparent)]
    TooLarge(InvalidParam),
}

/// Most bytes the microflow cache may allocate (it allocates every slot up front): 4 GiB, a
/// cache 100 times OVS's 8,192-entry EMC per core on a host of 64 cores and more.
pub(crate) const MAX_CACHE_BYTES: usize = 4 << 30;

impl MicroflowCache {
    /// A cache of about `entries` entries (rounded up to a power-of-two number of buckets)
    /// in buckets of `ways` entries.
    pub fn new(
        entries: usize,
        ways: usize,
        consistency: Consistency,
    ) -> Result<MicroflowCache, MicroflowConfigError> {
        if entries == 0 {
            return Err(MicroflowConfigError::Empty);
        }
        if !matches!(ways, 1 | 2 | 4) {
            return Err(MicroflowConfigError::Ways(ways));
        }
        // Slots, their metadata and a pseudo-LRU byte per bucket, for a power-of-two number
        // of buckets.
        let per_entry = std::mem::size_of::<Meta>() + std::mem::size_of::<Slot>() + 1;
        let max_buckets = 1usize << (MAX_CACHE_BYTES / per_entry / ways).ilog2();
        let buckets = entries.div_ceil(ways).checked_next_power_of_two().unwrap_or(usize::MAX);
        if buckets > max_buckets {
            let bytes = buckets.saturating_mul(ways).saturating_mul(per_entry);
            return Err(MicroflowConfigError::TooLarge(InvalidParam::new(
                "microflow-entries",
                format!(
                    "{entries} would take {} MiB (entries rounded up to a power of two); at most {} entries fit \
                     the {} MiB a cache may take",
                    bytes >> 20,
                    max_buckets * ways,
                    MAX_CACHE_BYTES >> 20
                ),
            )));
        }
        let n = buckets * ways;
        let empty = Slot { key: FlowKey::default(), decision: Decision { actions: 0, path: 0 } };
        Ok(MicroflowCache {
            ways,
            bucket_mask: buckets - 1,
            meta: vec![Meta::default(); n],
            slots: vec![empty; n],
            plru: vec![0; buckets],
            consistency,
            signature_table: OutcomeMap::default(),
            changed_at: OutcomeMap::default(),
            outcome_actions: OutcomeMap::default(),
            len: 0,
            stats: MicroflowStats::default(),
        })
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Occupied slots.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no slot is occupied.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Counters.
    pub fn stats(&self) -> MicroflowStats {
        self.stats
    }

    /// Bytes the slots take: full key and decision, signature, generation, stamp and the
    /// buckets' PLRU bits (Signature Table references come on top in signature mode), so
    /// reports can say what a cache of this size costs in memory.
    pub(crate) fn slot_bytes(&self) -> usize {
        self.slots.len() * (std::mem::size_of::<Slot>() + std::mem::size_of::<Meta>()) + self.plru.len()
    }

    #[inline]
    fn locate(&self, hash: u64) -> (u32, usize) {
        // FlowShadow: a 32-bit signature from the fields, then the signature hashed to a bucket.
        let sig = (hash >> 32) as u32 | 1;
        let bucket = (sig.wrapping_mul(0x9e37_79b1) >> 7) as usize & self.bucket_mask;
        (sig, bucket * self.ways)
    }

    /// Looks up a packet whose key hashes to `hash`; a hit returns a decision valid under
    /// the current rules. Invalid entries found on the way are dropped.
    #[inline]
    pub fn lookup(&mut self, key: &FlowKey, hash: u64, tables: &mut DecisionTables) -> Option<Decision> {
        let (sig, base) = self.locate(hash);
        for w in 0..self.ways {
            let i = base + w;
            if self.meta[i].sig != sig || self.slots[i].key != *key {
                continue;
            }
            let (decision, stamp) = (self.slots[i].decision, self.meta[i].stamp);
            let valid = match self.consistency {
                Consistency::Signature => true,
                Consistency::Cookie => tables
                    .paths()
                    .get(decision.path)
                    .iter()
                    .all(|&o| self.changed_at.get(o).copied().unwrap_or(0) <= stamp),
                Consistency::Action => tables.action_invalidated(decision.actions) <= stamp,
            };
            if valid {
                self.touch(base, w);
                self.stats.hits += 1;
                return Some(decision);
            }
            self.clear(i, tables);
            self.stats.invalidated += 1;
            break;
        }
        self.stats.misses += 1;
        None
    }

    /// [`MicroflowCache::lookup`] for a batch of packets, `out[j]` for `keys[j]`, after
    /// [`MicroflowCache::prefetch`]. Results are those of `lookup` in order.
    pub fn lookup_batch(
        &mut self,
        keys: &[FlowKey],
        hashes: &[u64],
        out: &mut [Option<Decision>],
        tables: &mut DecisionTables,
    ) {
        assert!(keys.len() == hashes.len() && keys.len() == out.len(), "batch slices differ in length");
        for ((keys, hashes), out) in keys.chunks(BATCH).zip(hashes.chunks(BATCH)).zip(out.chunks_mut(BATCH)) {
            self.prefetch(hashes);
            for ((key, &h), o) in keys.iter().zip(hashes).zip(out.iter_mut()) {
                *o = self.lookup(key, h, tables);
            }
        }
    }

    /// Brings into the CPU's cache what looking up packets of these `hashes` (at most
    /// [`BATCH`]) will read: first every bucket's signatures and then every candidate slot,
    /// so that the cache misses of a whole batch overlap instead of queueing one behind the
    /// other (OVS's EMC and DPDK's hash tables do the same).
    pub fn prefetch(&self, hashes: &[u64]) {
        let mut bases = [0usize; BATCH];
        for (base, &h) in bases.iter_mut().zip(hashes) {
            *base = self.locate(h).1;
            prefetch(&self.meta[*base], std::mem::size_of::<Meta>() * self.ways);
            if self.ways == 1 {
                prefetch(&self.slots[*base], std::mem::size_of::<Slot>());
            }
        }
        if self.ways > 1 {
            for (&base, &h) in bases.iter().zip(hashes) {
                let sig = self.locate(h).0;
                if let Some(w) = (0..self.ways).find(|&w| self.meta[base + w].sig == sig) {
                    prefetch(&self.slots[base + w], std::mem::size_of::<Slot>());
                }
            }
        }
    }

    /// Caches `decision` for `key`, known current at update `epoch`; takes its own reference.
    pub fn insert(
        &mut self,
        key: &FlowKey,
        hash: u64,
        decision: Decision,
        epoch: u64,
        tables: &mut DecisionTables,
    ) {
        let (sig, base) = self.locate(hash);
        let w = (0..self.ways)
            .find(|&w| self.meta[base + w].sig == sig && self.slots[base + w].key == *key)
            .or_else(|| (0..self.ways).find(|&w| self.meta[base + w].sig == 0))
            .unwrap_or_else(|| self.victim(base));
        let i = base + w;
        if self.meta[i].sig != 0 {
            self.clear(i, tables);
            self.stats.evictions += 1;
        }
        tables.acquire(decision);
        self.meta[i].sig = sig;
        self.meta[i].stamp = epoch;
        self.slots[i] = Slot { key: *key, decision };
        self.len += 1;
        self.stats.peak = self.stats.peak.max(self.len);
        self.stats.inserts += 1;
        self.touch(base, w);
        match self.consistency {
            Consistency::Signature => {
                let gen = self.meta[i].gen;
                for &o in tables.paths().get(decision.path) {
                    let deps = self.signature_table.get_mut(o);
                    if deps.len() >= 64 && deps.len().is_power_of_two() {
                        // Drop references to entries since overwritten (amortised O(1)).
                        let meta = &self.meta;
                        deps.retain(|&(s, g)| meta[s as usize].sig != 0 && meta[s as usize].gen == g);
                    }
                    deps.push((i as u32, gen));
                }
            }
            Consistency::Action => {
                for &o in tables.paths().get(decision.path) {
                    let acts = self.outcome_actions.get_mut(o);
                    if !acts.contains(&decision.actions) {
                        acts.push(decision.actions);
                    }
                }
            }
            Consistency::Cookie => {}
        }
    }

    /// Tells the cache that update `epoch` changed these lookup outcomes.
    pub(crate) fn on_update(&mut self, changed: &[LookupRef], epoch: u64, tables: &mut DecisionTables) {
        for &o in changed {
            match self.consistency {
                Consistency::Signature => {
                    let deps = std::mem::take(self.signature_table.get_mut(o));
                    for (s, g) in deps {
                        let m = self.meta[s as usize];
                        if m.sig != 0 && m.gen == g {
                            self.clear(s as usize, tables);
                            self.stats.removed += 1;
                        }
                    }
                }
                Consistency::Cookie => *self.changed_at.get_mut(o) = epoch,
                Consistency::Action => {
                    for a in std::mem::take(self.outcome_actions.get_mut(o)) {
                        tables.invalidate_action(a, epoch);
                    }
                }
            }
        }
    }

    fn clear(&mut self, i: usize, tables: &mut DecisionTables) {
        tables.release(self.slots[i].decision);
        self.meta[i].sig = 0;
        self.meta[i].gen = self.meta[i].gen.wrapping_add(1);
        self.len -= 1;
    }

    /// Marks way `w` of the bucket at `base` most recently used.
    #[inline]
    fn touch(&mut self, base: usize, w: usize) {
        let b = &mut self.plru[base / self.ways];
        match self.ways {
            2 => *b = (w ^ 1) as u8,
            4 => {
                // bit 0: victim side (0 left, 1 right); bit 1: victim in left; bit 2: in right.
                let side = (w >> 1) as u8;
                *b = (*b & !1) | (side ^ 1);
                let bit = 1 + side;
                *b = (*b & !(1 << bit)) | ((((w & 1) ^ 1) as u8) << bit);
            }
            _ => {}
        }
    }

    fn victim(&self, base: usize) -> usize {
        let b = self.plru[base / self.ways];
        match self.ways {
            2 => b as usize & 1,
            4 => {
                let side = (b & 1) as usize;
                side * 2 + ((b >> (1 + side)) & 1) as usize
            }
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::dp_actions::DpAction;

    fn decision(tables: &mut DecisionTables, port: u32, path: &[LookupRef]) -> Decision {
        let actions = tables.intern_actions(&[DpAction::Output(port)]);
        let p = tables.intern_outcomes(path);
        Decision { actions, path: p }
    }

    fn key(n: u64) -> FlowKey {
        let mut k = FlowKey::default();
        k.words[crate::packet::field::word::NW_ADDRS as usize] = n;
        k
    }

    #[test]
    fn plru_evicts_least_recently_used_of_four() {
        let mut c = MicroflowCache::new(4, 4, Consistency::Signature).unwrap();
        let mut t = DecisionTables::new();
        let d = decision(&mut t, 1, &[LookupRef::rule(0)]);
        // One bucket: every key collides.
        for n in 0..4 {
            c.insert(&key(n), n, d, 0, &mut t);
        }
        assert_eq!(c.len(), 4);
        c.lookup(&key(0), 0, &mut t).unwrap();
        c.lookup(&key(2), 2, &mut t).unwrap();
        c.insert(&key(9), 9, d, 0, &mut t);
        // Key 1 or 3 went (the untouched pair members), not 0 or 2.
        assert!(c.lookup(&key(0), 0, &mut t).is_some() && c.lookup(&key(2), 2, &mut t).is_some());
        assert_eq!([1, 3].iter().filter(|&&n| c.lookup(&key(n), n, &mut t).is_some()).count(), 1);
        assert_eq!(c.stats().evictions, 1);
    }

    #[test]
    fn every_mode_drops_entries_of_changed_outcomes_only() {
        for mode in [Consistency::Signature, Consistency::Cookie, Consistency::Action] {
            let mut c = MicroflowCache::new(1024, 1, mode).unwrap();
            let mut t = DecisionTables::new();
            let via_r1 = decision(&mut t, 1, &[LookupRef::rule(1), LookupRef::miss(3)]);
            let via_r2 = decision(&mut t, 2, &[LookupRef::rule(2)]);
            let hashes: Vec<u64> = (0..2).map(|n| crate::packet::hash::hash_key(&key(n))).collect();
            c.insert(&key(0), hashes[0], via_r1, 0, &mut t);
            c.insert(&key(1), hashes[1], via_r2, 0, &mut t);
            c.on_update(&[LookupRef::miss(3)], 1, &mut t);
            assert_eq!(c.lookup(&key(0), hashes[0], &mut t), None, "{mode:?}");
            assert_eq!(c.lookup(&key(1), hashes[1], &mut t), Some(via_r2), "{mode:?}");
            // Cached again after the update: valid.
            c.insert(&key(0), hashes[0], via_r1, 1, &mut t);
            assert_eq!(c.lookup(&key(0), hashes[0], &mut t), Some(via_r1), "{mode:?}");
            assert_eq!(c.len(), 2);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 2000, failure_persistence: None, ..Default::default() })]

        /// The batched lookup is the scalar lookup, result for result and side effect for side
        /// effect (PLRU state, invalidations, counters), whatever the shape and mode.
        #[test]
        fn batch_lookup_equals_scalar_lookups(
            ways in proptest::sample::select(vec![1usize, 2, 4]),
            mode in proptest::sample::select(vec![Consistency::Signature, Consistency::Cookie, Consistency::Action]),
            inserts in proptest::collection::vec((0u64..48, 0u32..3), 1..80),
            changed in proptest::collection::vec(0u32..3, 0..3),
            queries in proptest::collection::vec(0u64..64, 1..100),
        ) {
            let h = |n: u64| crate::packet::hash::hash_key(&key(n));
            let mut a = MicroflowCache::new(16, ways, mode).unwrap();
            let mut b = MicroflowCache::new(16, ways, mode).unwrap();
            let (mut ta, mut tb) = (DecisionTables::new(), DecisionTables::new());
            // Interned in the same order, the decisions are the same references in both tables.
            let ds: Vec<Decision> = (0..3).map(|r| decision(&mut ta, r + 1, &[LookupRef::rule(r)])).collect();
            for r in 0..3 {
                decision(&mut tb, r + 1, &[LookupRef::rule(r)]);
            }
            for &(n, r) in &inserts {
                a.insert(&key(n), h(n), ds[r as usize], 0, &mut ta);
                b.insert(&key(n), h(n), ds[r as usize], 0, &mut tb);
            }
            let changed: Vec<LookupRef> = changed.iter().map(|&r| LookupRef::rule(r)).collect();
            a.on_update(&changed, 1, &mut ta);
            b.on_update(&changed, 1, &mut tb);
            let keys: Vec<FlowKey> = queries.iter().map(|&n| key(n)).collect();
            let hashes: Vec<u64> = queries.iter().map(|&n| h(n)).collect();
            let mut batched = vec![None; keys.len()];
            a.lookup_batch(&keys, &hashes, &mut batched, &mut ta);
            let scalar: Vec<Option<Decision>> =
                keys.iter().zip(&hashes).map(|(k, &h)| b.lookup(k, h, &mut tb)).collect();
            proptest::prop_assert_eq!(&batched, &scalar);
            proptest::prop_assert_eq!(a.stats(), b.stats());
            proptest::prop_assert_eq!(&a.plru, &b.plru);
        }
    }

    #[test]
    fn bad_configs_are_refused() {
        assert_eq!(MicroflowCache::new(0, 1, Consistency::Action).err(), Some(MicroflowConfigError::Empty));
        assert_eq!(MicroflowCache::new(8, 3, Consistency::Action).err(), Some(MicroflowConfigError::Ways(3)));
    }
}
