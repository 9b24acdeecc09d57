//! UnivMon (Liu et al., SIGCOMM'16): one universal sketch, here asked for heavy hitters.
//!
//! L levels of Count Sketch, each with a heap of its heaviest flows; a flow is counted in
//! level j when the first j bits of a second hash are all ones (half the flows per level),
//! which is what lets UnivMon estimate any G-sum (entropy, moments) from the levels' heavy
//! hitters. The top-k question only needs level 0, but the memory is the whole structure's:
//! the budget is split evenly over the levels, as a deployment sized for all of its
//! queries would be. Counts are since the start: here it restarts every window.

use super::heap::TopHeap;
use super::{bucket_of, Algo, ConfigError, Detector, DetectorConfig, FlowId, Tumbling};

/// Levels (L): G-sums down to 1/16 of the flows. More levels only shrink level 0.
pub const LEVELS: usize = 4;
/// Rows per Count Sketch (d).
pub const ROWS: usize = 3;

struct Level {
    counters: Vec<i32>,
    heap: TopHeap,
}

/// UnivMon.
pub struct UnivMon {
    w: usize,
    levels: Vec<Level>,
    window: Tumbling,
    seed: u64,
}

impl UnivMon {
    /// Sized from `config.memory`, split over [`LEVELS`] levels.
    pub fn new(config: &DetectorConfig) -> Result<UnivMon, ConfigError> {
        let heap = TopHeap::bytes_for_key(config.k, config.key_bits);
        let per_level = config.memory / LEVELS;
        let w = per_level.saturating_sub(heap) / (ROWS * 4);
        if w == 0 {
            return Err(ConfigError::TooSmall {
                algo: Algo::UnivMon.name(),
                memory: config.memory,
                needed: LEVELS * (heap + ROWS * 4),
                k: config.k,
            });
        }
        let levels = (0..LEVELS)
            .map(|_| Level { counters: vec![0; ROWS * w], heap: TopHeap::new(config.k, config.key_bits) })
            .collect();
        Ok(UnivMon { w, levels, window: Tumbling::new(config.blocks), seed: config.seed })
    }

    /// Row j's counter index and sign for a flow hash at a level (levels hash differently).
    #[inline]
    fn cell(&self, hash: u128, level: usize, j: usize) -> (usize, i32) {
        let row = level * ROWS + j;
        let sign = if (hash >> (64 + (row % 32))) & 1 == 0 { 1 } else { -1 };
        (j * self.w + bucket_of(hash, row, self.w), sign)
    }

    fn level_estimate(&self, hash: u128, level: usize) -> u64 {
        let mut v = [0i64; ROWS];
        for (j, e) in v.iter_mut().enumerate() {
            let (i, sign) = self.cell(hash, level, j);
            *e = self.levels[level].counters[i] as i64 * sign as i64;
        }
        v.sort_unstable();
        v[ROWS / 2].max(0) as u64
    }

    /// Deepest level the flow reaches: the number of leading one bits of its level hash.
    fn depth(hash: u128) -> usize {
        ((hash as u64).rotate_left(29).leading_ones() as usize).min(LEVELS - 1)
    }
}

impl Detector for UnivMon {
    #[inline]
    fn insert(&mut self, flow: FlowId, hash: u128) {
        for level in 0..=UnivMon::depth(hash) {
            for j in 0..ROWS {
                let (i, sign) = self.cell(hash, level, j);
                let c = &mut self.levels[level].counters[i];
                *c = c.saturating_add(sign);
            }
            let est = self.level_estimate(hash, level);
            self.levels[level].heap.offer(flow, hash as u64, est);
        }
    }

    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        self.levels[0].heap.sorted(out);
        out.retain(|e| e.1 > 0);
    }

    fn estimate(&self, _flow: FlowId, hash: u128) -> u64 {
        self.level_estimate(hash, 0)
    }

    fn end_block(&mut self) {
        if self.window.end_block() {
            for l in &mut self.levels {
                l.counters.fill(0);
                l.heap.clear();
            }
        }
    }

    fn memory_bytes(&self) -> usize {
        self.levels.iter().map(|l| l.counters.len() * 4 + l.heap.memory_bytes()).sum()
    }
    fn held(&self) -> usize {
        self.levels[0].heap.len()
    }

    fn hash_seed(&self) -> u64 {
        self.seed
    }
}
