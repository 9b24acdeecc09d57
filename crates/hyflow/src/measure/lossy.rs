//! Lossy Counting (Manku and Motwani): counts with a per-entry error bound, pruned at every
//! bucket boundary.
//!
//! The stream is cut into buckets of ⌈1/ε⌉ packets; a new flow enters with error Δ = the
//! current bucket − 1, and at each bucket boundary entries with f + Δ ≤ the current bucket
//! are dropped. Memory bounds the table at m entries: ε = 1/m, and when the table is full
//! the bucket counter is advanced (pruning harder) until an entry frees up — the usual way
//! to run it in fixed memory. Counts are since the start: here it restarts every window.

use hashbrown::HashMap;

use super::{keep_top, Algo, ConfigError, Detector, DetectorConfig, FlowId, Tumbling};

#[derive(Clone, Copy, Debug)]
struct Counted {
    f: u32,
    delta: u32,
}

/// Lossy Counting.
pub struct LossyCounting {
    k: usize,
    capacity: usize,
    table: HashMap<FlowId, Counted>,
    bucket_width: u64,
    bucket: u32,
    seen: u64,
    window: Tumbling,
    seed: u64,
}

impl LossyCounting {
    /// Sized from `config.memory`: the most entries m whose table fits (at least k). The
    /// table is allocated for 2m so that it is never more than half full: the tombstones
    /// pruning leaves are then cleared in place instead of growing the table.
    pub fn new(config: &DetectorConfig) -> Result<LossyCounting, ConfigError> {
        let bytes = |m: usize| HashMap::<FlowId, Counted>::with_capacity(2 * m).allocation_size();
        let lo = config.entries(Algo::Lossy, bytes)?;
        let table = HashMap::with_capacity(2 * lo);
        let capacity = table.capacity() / 2;
        Ok(LossyCounting {
            k: config.k,
            capacity,
            table,
            bucket_width: capacity as u64,
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
    fn insert(&mut self, flow: FlowId, _hash: u128) {
        if let Some(c) = self.table.get_mut(&flow) {
            c.f += 1;
        } else {
            while self.table.len() >= self.capacity {
                self.bucket += 1;
                self.prune();
            }
            self.table.insert(flow, Counted { f: 1, delta: self.bucket - 1 });
        }
        self.seen += 1;
        if self.seen.is_multiple_of(self.bucket_width) {
            self.prune();
            self.bucket += 1;
        }
    }

    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        out.clear();
        out.extend(self.table.iter().map(|(f, c)| (*f, c.f as u64)));
        keep_top(out, self.k);
    }

    fn estimate(&self, flow: FlowId, _hash: u128) -> u64 {
        self.table.get(&flow).map_or(0, |c| c.f as u64)
    }

    fn end_block(&mut self) {
        if self.window.end_block() {
            self.table.clear();
            self.bucket = 1;
            self.seen = 0;
        }
    }

    fn memory_bytes(&self) -> usize {
        self.table.allocation_size()
    }

    fn hash_seed(&self) -> u64 {
        self.seed
    }
}
