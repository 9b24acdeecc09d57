//! Lossy Counting (Manku and Motwani): counts with a per-entry error bound, pruned at every
//! bucket boundary.
//!
//! The stream is cut into buckets of ⌈1/ε⌉ packets; a new flow enters with error Δ = the
//! current bucket − 1, and at each bucket boundary entries with f + Δ ≤ the current bucket
//! are dropped. Memory bounds the table at m entries: ε = 1/m, and when the table is full
//! the bucket counter is advanced (pruning harder) until an entry frees up — the usual way
//! to run it in fixed memory. Counts are since the start: here it restarts every window.

use super::flow_table::FlowTable;
use super::{keep_top, Algo, ConfigError, Detector, DetectorConfig, FlowId, Tumbling};

#[derive(Clone, Copy, Debug, Default)]
struct Counted {
    f: u32,
    delta: u32,
}

/// Lossy Counting.
pub(crate) struct LossyCounting {
    k: usize,
    table: FlowTable<Counted>,
    bucket_width: u64,
    bucket: u32,
    seen: u64,
    window: Tumbling,
    seed: u64,
}

impl LossyCounting {
    /// Sized from `config.memory`: the most entries m whose table fits (at least k); the
    /// bucket width is m.
    pub(crate) fn new(config: &DetectorConfig) -> Result<LossyCounting, ConfigError> {
        let m = config.entries(Algo::Lossy, |m| FlowTable::<Counted>::bytes_for(m, config.key_bits))?;
        Ok(LossyCounting {
            k: config.k,
            table: FlowTable::new(m, config.key_bits),
            bucket_width: m as u64,
            bucket: 1,
            seen: 0,
            window: Tumbling::new(config.blocks),
            seed: config.seed,
        })
    }

    fn prune(&mut self) {
        let b = self.bucket;
        self.table.retain(|_, c| c.f + c.delta > b);
    }
}

impl Detector for LossyCounting {
    #[inline]
    fn insert(&mut self, flow: FlowId, hash: u128) {
        let h = hash as u64;
        if let Some(c) = self.table.get_mut(flow, h) {
            c.f += 1;
        } else {
            while self.table.is_full() {
                self.bucket += 1;
                self.prune();
            }
            if let Some(c) = self.table.entry(flow, h) {
                *c = Counted { f: 1, delta: self.bucket - 1 };
            }
        }
        self.seen += 1;
        if self.seen.is_multiple_of(self.bucket_width) {
            self.prune();
            self.bucket += 1;
        }
    }

    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        out.clear();
        out.extend(self.table.iter().map(|(f, c)| (f, c.f as u64)));
        keep_top(out, self.k);
    }

    fn estimate(&self, flow: FlowId, hash: u128) -> u64 {
        self.table.get(flow, hash as u64).map_or(0, |c| c.f as u64)
    }

    fn end_block(&mut self) {
        if self.window.end_block() {
            self.table.clear();
            self.bucket = 1;
            self.seen = 0;
        }
    }

    fn memory_bytes(&self) -> usize {
        self.table.memory_bytes()
    }
    fn held(&self) -> usize {
        self.table.len()
    }

    fn hash_seed(&self) -> u64 {
        self.seed
    }
}
