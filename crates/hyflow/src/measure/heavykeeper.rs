//! HeavyKeeper (Yang et al.): count-with-exponential-decay for top-k elephant flows.
//!
//! d rows of w buckets {fingerprint, count}. A packet of the bucket's flow increments it; a
//! packet of another flow decays it by one with probability b^−count (b = 1.08), and takes
//! the bucket when it reaches zero, so large flows hold their buckets and small ones pass
//! through. The estimate is the largest count among buckets holding the flow. Counts are
//! since the start: here it restarts every window (see [`super`]).

use super::heap::TopHeap;
use super::{bucket_of, fingerprint, Algo, ConfigError, Detector, DetectorConfig, FlowId, Sampler, Tumbling};

/// Rows (d).
pub const ROWS: usize = 3;
/// Decay base b.
pub(crate) const DECAY_BASE: f64 = 1.08;

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    fp: u32,
    count: u32,
}

/// Decay thresholds: a u64 draw below entry c decays a count of c (probability b^−c; counts
/// beyond the table never decay). Shared with the sliding variant.
pub(crate) fn decay_thresholds() -> Vec<u64> {
    (0..1024).map(|c| (DECAY_BASE.powi(-c) * u64::MAX as f64) as u64).collect()
}

/// HeavyKeeper + heap.
pub struct HeavyKeeper {
    w: usize,
    buckets: Vec<Bucket>,
    /// Decay thresholds: a u64 draw below `decay[c]` decays a count of c (b^−c; 0 beyond).
    decay: Vec<u64>,
    rng: Sampler,
    heap: TopHeap,
    window: Tumbling,
    seed: u64,
}

impl HeavyKeeper {
    /// Sized from `config.memory`.
    pub fn new(config: &DetectorConfig) -> Result<HeavyKeeper, ConfigError> {
        let w = config.width(Algo::HeavyKeeper, ROWS, std::mem::size_of::<Bucket>())?;
        let decay = decay_thresholds();
        Ok(HeavyKeeper {
            w,
            buckets: vec![Bucket::default(); ROWS * w],
            decay,
            // Only its draws are used (rate 1: keep() would always say yes).
            rng: Sampler::new(1.0, config.seed ^ 0x0068_6561_7679),
            heap: TopHeap::new(config.k, config.key_bits),
            window: Tumbling::new(config.blocks),
            seed: config.seed,
        })
    }
}

impl Detector for HeavyKeeper {
    #[inline]
    fn insert(&mut self, flow: FlowId, hash: u128) {
        let fp = fingerprint(hash);
        let mut est = 0u32;
        for j in 0..ROWS {
            let b = &mut self.buckets[j * self.w + bucket_of(hash, j, self.w)];
            if b.fp == fp {
                b.count += 1;
                est = est.max(b.count);
            } else if b.count == 0 {
                *b = Bucket { fp, count: 1 };
                est = est.max(1);
            } else {
                let threshold = self.decay.get(b.count as usize).copied().unwrap_or(0);
                if self.rng.draw() < threshold {
                    b.count -= 1;
                    if b.count == 0 {
                        *b = Bucket { fp, count: 1 };
                        est = est.max(1);
                    }
                }
            }
        }
        if est > 0 {
            self.heap.offer(flow, hash as u64, est as u64);
        }
    }

    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        self.heap.sorted(out);
    }

    fn estimate(&self, _flow: FlowId, hash: u128) -> u64 {
        let fp = fingerprint(hash);
        (0..ROWS)
            .map(|j| self.buckets[j * self.w + bucket_of(hash, j, self.w)])
            .filter(|b| b.fp == fp)
            .map(|b| b.count as u64)
            .max()
            .unwrap_or(0)
    }

    fn end_block(&mut self) {
        if self.window.end_block() {
            self.buckets.fill(Bucket::default());
            self.heap.clear();
        }
    }

    fn memory_bytes(&self) -> usize {
        self.buckets.len() * std::mem::size_of::<Bucket>() + self.heap.memory_bytes()
    }
    fn held(&self) -> usize {
        self.heap.len()
    }

    fn hash_seed(&self) -> u64 {
        self.seed
    }
}
