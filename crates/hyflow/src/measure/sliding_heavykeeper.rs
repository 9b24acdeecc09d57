//! Sliding HeavyKeeper (Sl-HK): HeavyKeeper in the Sliding Sketch framework (Gou et al.,
//! "Sliding Sketches", KDD 2020), the strongest sliding-window baseline for top-k.
//!
//! Each bucket holds a fingerprint and two counters, one per time zone. Packets count in the
//! newest counter; a colliding packet decays the bucket by one with probability b^−(C₀ + C₁)
//! (b = 1.08), taking from the newest nonzero counter first, and takes the bucket when both
//! are zero. A scanning pointer sweeps all d·w buckets once per half window; passing a bucket
//! it shifts the counters (the older one is dropped, the newer becomes the older, the newer
//! restarts at 0), so a bucket's sum covers between half a window and a whole one. This is
//! the authors' Sl-HK code (`sliding-sketch/Sliding-Sketch`, `src/HeavyHitter/Sl_HK/
//! heavykeeper.h`: sweep period N/k with k = 2 fields, shift on pass, decay by the sum from
//! the newest field, fingerprints left to the next colliding flow).
//!
//! Adapted to hyflow's window protocol: the pointer moves with the packets, at the rate of
//! the previous block (a block's share of the sweep is 2/K of the buckets for a window of K
//! blocks), and finishes the block's share at its boundary, so the sweep stays aligned with
//! block boundaries; it scans at the boundary only during the first block, whose rate is not
//! known yet. The authors find heavy hitters by walking every bucket; for top-k reports at
//! every boundary this keeps HeavyKeeper's min-heap, re-estimated from the sketch at each
//! boundary (stale counts would keep rising flows out). d = 3 rows, as hyflow's HeavyKeeper
//! (the authors' demos use 5 or 8); a bucket is 12 B (32-bit fingerprint and counters).
//! One sweep per window instead (the generic framework's period N/(k − 1), covering between
//! one and two windows) measured worse on `dyntrace.py` traces: precision 0.775 against 0.941
//! at 30 KB, k = 100.

use super::heap::TopHeap;
use super::heavykeeper::decay_thresholds;
use super::{bucket_of, fingerprint, Algo, ConfigError, Detector, DetectorConfig, FlowId, Sampler};

/// Rows (d).
pub const ROWS: usize = 3;

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    fp: u32,
    /// The newest time zone's count.
    new: u32,
    /// The previous zone's.
    old: u32,
}

impl Bucket {
    fn count(&self) -> u64 {
        self.new as u64 + self.old as u64
    }
}

/// Sliding HeavyKeeper + heap.
pub(crate) struct SlidingHeavyKeeper {
    w: usize,
    blocks: usize,
    buckets: Vec<Bucket>,
    /// Decay thresholds: a u64 draw below `decay[c]` decays a count of c (b^−c; 0 beyond).
    decay: Vec<u64>,
    rng: Sampler,
    heap: TopHeap,
    /// Buckets scanned since the start (the pointer is this modulo the bucket count).
    scanned: u64,
    /// Blocks closed.
    block: u64,
    /// Packets in the current and in the previous block.
    packets: u64,
    last_packets: u64,
    seed: u64,
}

impl SlidingHeavyKeeper {
    /// Sized from `config.memory`.
    pub(crate) fn new(config: &DetectorConfig) -> Result<SlidingHeavyKeeper, ConfigError> {
        let w = config.width(Algo::SlidingHeavyKeeper, ROWS, std::mem::size_of::<Bucket>())?;
        Ok(SlidingHeavyKeeper {
            w,
            blocks: config.blocks,
            buckets: vec![Bucket::default(); ROWS * w],
            decay: decay_thresholds(),
            rng: Sampler::new(1.0, config.seed ^ 0x736c_686b),
            heap: TopHeap::new(config.k, config.key_bits),
            scanned: 0,
            block: 0,
            packets: 0,
            last_packets: 0,
            seed: config.seed,
        })
    }

    /// Where the pointer stands after `blocks` blocks: two sweeps per window.
    fn pointer_at(&self, blocks: u64) -> u64 {
        blocks * 2 * self.buckets.len() as u64 / self.blocks as u64
    }

    /// Moves the pointer to `to` (buckets scanned since the start), shifting each bucket it
    /// passes.
    fn scan_to(&mut self, to: u64) {
        let n = self.buckets.len() as u64;
        while self.scanned < to {
            let b = &mut self.buckets[(self.scanned % n) as usize];
            b.old = b.new;
            b.new = 0;
            self.scanned += 1;
        }
    }

    fn estimate_fp(&self, fp: u32, hash: u128) -> u64 {
        (0..ROWS)
            .map(|j| self.buckets[j * self.w + bucket_of(hash, j, self.w)])
            .filter(|b| b.fp == fp)
            .map(|b| b.count())
            .max()
            .unwrap_or(0)
    }

    fn refresh_heap(&mut self) {
        let mut heap = std::mem::take(&mut self.heap);
        let seed = self.seed;
        heap.refresh(|flow| {
            let hash = flow.hash(seed);
            self.estimate_fp(fingerprint(hash), hash)
        });
        self.heap = heap;
    }
}

impl Detector for SlidingHeavyKeeper {
    #[inline]
    fn insert(&mut self, flow: FlowId, hash: u128) {
        self.packets += 1;
        if self.last_packets > 0 {
            // This block's share of the sweep, in proportion to its packets so far.
            let (from, to) = (self.pointer_at(self.block), self.pointer_at(self.block + 1));
            let done = self.packets.min(self.last_packets);
            self.scan_to(from + (to - from) * done / self.last_packets);
        }
        let fp = fingerprint(hash);
        let mut est = 0u64;
        for j in 0..ROWS {
            let b = &mut self.buckets[j * self.w + bucket_of(hash, j, self.w)];
            if b.fp == fp {
                b.new += 1;
            } else if b.count() == 0 {
                *b = Bucket { fp, new: 1, old: 0 };
            } else {
                let threshold = self.decay.get(b.count() as usize).copied().unwrap_or(0);
                if self.rng.draw() < threshold {
                    if b.new > 0 {
                        b.new -= 1;
                    } else {
                        b.old -= 1;
                    }
                    if b.count() == 0 {
                        *b = Bucket { fp, new: 1, old: 0 };
                    }
                }
            }
            if b.fp == fp {
                est = est.max(b.count());
            }
        }
        if est > 0 {
            self.heap.offer(flow, hash as u64, est);
        }
    }

    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        self.refresh_heap();
        self.heap.sorted(out);
        out.retain(|e| e.1 > 0);
    }

    fn estimate(&self, _flow: FlowId, hash: u128) -> u64 {
        self.estimate_fp(fingerprint(hash), hash)
    }

    fn end_block(&mut self) {
        self.block += 1;
        self.scan_to(self.pointer_at(self.block));
        self.last_packets = self.packets;
        self.packets = 0;
        self.refresh_heap();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(n: u64) -> FlowId {
        FlowId::from_u128(n as u128)
    }

    #[test]
    fn the_sweep_forgets_a_flow_within_a_window_and_keeps_it_for_half_of_one() {
        let config = DetectorConfig { k: 4, memory: 10_000, blocks: 4, sample: 1.0, seed: 3, key_bits: 104 };
        let mut d = SlidingHeavyKeeper::new(&config).unwrap();
        let f = flow(1);
        for _ in 0..100 {
            d.insert(f, f.hash(3));
        }
        let n = d.buckets.len() as u64;
        let mut out = Vec::new();
        d.top(&mut out);
        assert_eq!(out, [(f, 100)]);
        // Two blocks of a four-block window: one whole sweep, every bucket shifted once.
        d.end_block();
        d.end_block();
        assert_eq!(d.scanned, n);
        d.top(&mut out);
        assert_eq!(out, [(f, 100)], "half a window later the count is in the older zone");
        d.end_block();
        d.end_block();
        assert_eq!(d.scanned, 2 * n);
        d.top(&mut out);
        assert_eq!(out, [], "a whole window later it is gone");
    }

    #[test]
    fn the_pointer_moves_with_the_packets_at_the_last_blocks_rate() {
        let config = DetectorConfig { k: 4, memory: 10_000, blocks: 4, sample: 1.0, seed: 3, key_bits: 104 };
        let mut d = SlidingHeavyKeeper::new(&config).unwrap();
        let n = d.buckets.len() as u64;
        for i in 0..1000 {
            d.insert(flow(i), flow(i).hash(3));
        }
        assert_eq!(d.scanned, 0, "the first block's rate is unknown: no scan yet");
        d.end_block();
        assert_eq!(d.scanned, n / 2);
        for i in 0..500 {
            d.insert(flow(i), flow(i).hash(3));
        }
        assert_eq!(d.scanned, n / 2 + n / 4, "half the last block's packets: half the share");
    }
}
