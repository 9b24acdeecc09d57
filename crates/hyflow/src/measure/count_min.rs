//! Count-Min sketch (Cormode and Muthukrishnan) with a top-k min-heap: the classic baseline.
//!
//! d rows of w counters; a packet increments one counter per row and the flow's estimate is
//! the smallest of them (never below the truth). It has no notion of time: here it restarts
//! every window (see [`super`]).

use super::heap::TopHeap;
use super::{bucket_of, Algo, ConfigError, Detector, DetectorConfig, FlowId, Tumbling};

/// Rows (d).
pub const ROWS: usize = 3;

/// Count-Min + heap.
pub struct CountMin {
    w: usize,
    counters: Vec<u32>,
    heap: TopHeap,
    window: Tumbling,
    seed: u64,
}

impl CountMin {
    /// Sized from `config.memory`.
    pub fn new(config: &DetectorConfig) -> Result<CountMin, ConfigError> {
        let w = config.width(Algo::CountMin, ROWS, 4)?;
        Ok(CountMin {
            w,
            counters: vec![0; ROWS * w],
            heap: TopHeap::new(config.k, config.key_bits),
            window: Tumbling::new(config.blocks),
            seed: config.seed,
        })
    }
}

impl Detector for CountMin {
    #[inline]
    fn insert(&mut self, flow: FlowId, hash: u128) {
        let mut est = u32::MAX;
        for j in 0..ROWS {
            let c = &mut self.counters[j * self.w + bucket_of(hash, j, self.w)];
            *c = c.saturating_add(1);
            est = est.min(*c);
        }
        self.heap.offer(flow, hash as u64, est as u64);
    }

    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        self.heap.sorted(out);
    }

    fn estimate(&self, _flow: FlowId, hash: u128) -> u64 {
        (0..ROWS).map(|j| self.counters[j * self.w + bucket_of(hash, j, self.w)] as u64).min().unwrap_or(0)
    }

    fn end_block(&mut self) {
        if self.window.end_block() {
            self.counters.fill(0);
            self.heap.clear();
        }
    }

    fn memory_bytes(&self) -> usize {
        self.counters.len() * 4 + self.heap.memory_bytes()
    }
    fn held(&self) -> usize {
        self.heap.len()
    }

    fn hash_seed(&self) -> u64 {
        self.seed
    }
}
