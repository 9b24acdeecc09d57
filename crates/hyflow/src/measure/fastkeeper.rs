//! FastKeeper (Wang, Li, Wu): top-k real-time large flows with a sliding-window sketch.
//!
//! d rows of w buckets; a bucket keeps a 16-bit fingerprint and one counter per block of the
//! window, so a flow's estimate is its count over the last W/b blocks and old traffic is
//! forgotten block by block. A top-k min-heap holds the flows with the largest estimates.
//!
//! * [`FastKeeper`] (Algorithms 1–3): bucket-major counters, a collision counter CC and the
//!   window sum SUM; counters of blocks that passed while the bucket was idle are cleared
//!   lazily through the previous-update pointer PUP. A colliding flow takes the bucket when
//!   CC / SUM ≥ λ (λ = 2).
//! * [`FastKeeperBitmap`] (§III-D): the collision counter becomes a per-block balance BC
//!   (+1 for the owner's packets, −1 for a colliding flow's) and a bitmap of one bit per
//!   block (BC > 0 when the block closed); a colliding flow takes the bucket when the bitmap
//!   holds more zeros than ones (majority vote). Owner packets weigh λ in BC, so a block
//!   counts as led when the owner sent more than 1/λ of the colliders' packets, the same bar
//!   as the basic CC / SUM ≥ λ. Two additions, where the paper is silent or too slow for
//!   bursts shorter than a block (which its own traces show): a flow that takes a bucket
//!   starts with a bare majority of ones in the oldest positions, so a mouse that happened to
//!   collide last loses it after trailing once; and within a block, colliders that lead by
//!   λ times the owner's average block count take the bucket at once (without this, on
//!   `dyntrace.py` traffic precision at 30 KB fell from 0.91 to 0.84). With the paper's storage optimisation the
//!   counters of one block are one contiguous array per row, so sliding the window clears a
//!   single array.
//!
//! Both sample each row update with probability r (Algorithm 3, line 8) and scale estimates
//! by 1 / r. Departures from the pseudo-code, for consistency with the window definition in
//! [`super`]: the window holds W/b counters including the block being filled (the paper's
//! extra (K+1)-th counter is that block), and heap estimates are refreshed from the sketch
//! at every boundary, before reporting and after sliding, so that flows that went quiet do
//! not keep stale counts that would keep rising flows out of the heap.

use super::heap::TopHeap;
use super::{bucket_of, fingerprint, Algo, ConfigError, Detector, DetectorConfig, FlowId, Sampler};

/// Rows (the paper's d).
pub const ROWS: usize = 3;
/// Reset threshold λ on CC / SUM.
pub const LAMBDA: u64 = 2;

/// Per-bucket state of basic FastKeeper beside its block counters.
#[derive(Clone, Copy, Debug, Default)]
struct Meta {
    fp: u32,
    /// Block of the last update (PUP).
    pup: u32,
    /// Collisions since the owner took the bucket (CC).
    cc: u32,
    /// Count over the window as of block `pup` (SUM).
    sum: u32,
}

/// Basic FastKeeper.
pub struct FastKeeper {
    w: usize,
    blocks: usize,
    meta: Vec<Meta>,
    /// `blocks` counters per bucket, bucket-major; block n lives in slot n % blocks.
    counts: Vec<u32>,
    block: u32,
    heap: TopHeap,
    sampler: Sampler,
    scale: f64,
    seed: u64,
}

impl FastKeeper {
    /// Sized from `config.memory`.
    pub fn new(config: &DetectorConfig) -> Result<FastKeeper, ConfigError> {
        let bucket = std::mem::size_of::<Meta>() + 4 * config.blocks;
        let w = config.width(Algo::FastKeeper, ROWS, bucket)?;
        Ok(FastKeeper {
            w,
            blocks: config.blocks,
            meta: vec![Meta::default(); ROWS * w],
            counts: vec![0; ROWS * w * config.blocks],
            block: 0,
            heap: TopHeap::new(config.k),
            sampler: Sampler::new(config.sample, config.seed),
            scale: 1.0 / config.sample,
            seed: config.seed,
        })
    }

    /// Brings bucket `b` to the current block: clears counters of blocks it missed.
    #[inline]
    fn catch_up(&mut self, b: usize) {
        let m = &mut self.meta[b];
        if m.pup == self.block {
            return;
        }
        let counts = &mut self.counts[b * self.blocks..(b + 1) * self.blocks];
        let missed = (self.block - m.pup) as usize;
        if missed >= self.blocks {
            counts.fill(0);
            m.sum = 0;
        } else {
            for n in m.pup + 1..=self.block {
                let slot = n as usize % self.blocks;
                m.sum -= counts[slot];
                counts[slot] = 0;
            }
        }
        m.pup = self.block;
    }

    /// Bucket `b`'s window count now, without updating it.
    fn window_count(&self, b: usize) -> u64 {
        let m = &self.meta[b];
        let age = (self.block - m.pup) as usize;
        if age >= self.blocks {
            return 0;
        }
        let counts = &self.counts[b * self.blocks..(b + 1) * self.blocks];
        // Blocks pup - blocks + 1 ..= block - blocks have left the window since.
        let expired: u32 = (0..age).map(|i| counts[(m.pup as usize + 1 + i) % self.blocks]).sum();
        (m.sum - expired) as u64
    }

    fn estimate_fp(&self, fp: u32, hash: u128) -> u64 {
        (0..ROWS)
            .map(|j| j * self.w + bucket_of(hash, j, self.w))
            .filter(|&b| self.meta[b].fp == fp)
            .map(|b| self.window_count(b))
            .max()
            .unwrap_or(0)
    }

    /// Re-estimates the heap's flows from the sketch: at a boundary for the report, and after
    /// the window slides, so that within a block held counts are current and admission
    /// compares against true minima.
    fn refresh_heap(&mut self) {
        let mut heap = std::mem::replace(&mut self.heap, TopHeap::new(1));
        heap.refresh(|flow, _| {
            let hash = flow.hash(self.seed);
            self.estimate_fp(fingerprint(hash), hash)
        });
        self.heap = heap;
    }
}

impl Detector for FastKeeper {
    #[inline]
    fn insert(&mut self, flow: FlowId, hash: u128) {
        let fp = fingerprint(hash);
        let slot = self.block as usize % self.blocks;
        let mut best = 0u32;
        for j in 0..ROWS {
            let b = j * self.w + bucket_of(hash, j, self.w);
            if self.sampler.keep() {
                self.catch_up(b);
                let m = &mut self.meta[b];
                let counts = &mut self.counts[b * self.blocks..(b + 1) * self.blocks];
                if m.fp == fp || m.fp == 0 {
                    m.fp = fp;
                    m.sum += 1;
                    counts[slot] += 1;
                } else {
                    m.cc += 1;
                    if m.cc as u64 >= LAMBDA * m.sum as u64 {
                        counts.fill(0);
                        counts[slot] = 1;
                        *m = Meta { fp, pup: self.block, cc: 0, sum: 1 };
                    }
                }
            }
            if self.meta[b].fp == fp {
                best = best.max(self.window_count(b) as u32);
            }
        }
        if best > 0 {
            self.heap.offer(flow, hash as u64, best as u64);
        }
    }

    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        self.refresh_heap();
        top_scaled(&self.heap, self.scale, out);
    }

    fn estimate(&self, _flow: FlowId, hash: u128) -> u64 {
        self.estimate_fp(fingerprint(hash), hash)
    }

    fn end_block(&mut self) {
        self.block += 1;
        self.refresh_heap();
    }

    fn memory_bytes(&self) -> usize {
        self.meta.len() * std::mem::size_of::<Meta>() + self.counts.len() * 4 + self.heap.memory_bytes()
    }
}

/// The heap's flows with count > 0, scaled, largest first.
fn top_scaled(heap: &TopHeap, scale: f64, out: &mut Vec<(FlowId, u64)>) {
    heap.sorted(out);
    out.retain(|e| e.1 > 0);
    if scale != 1.0 {
        for e in out.iter_mut() {
            e.1 = (e.1 as f64 * scale).round() as u64;
        }
    }
}

/// FastKeeper with bitmap voting and block-major counters.
pub struct FastKeeperBitmap {
    w: usize,
    blocks: usize,
    fp: Vec<u32>,
    /// This block's balance: owner packets minus colliding packets.
    bc: Vec<i16>,
    /// One bit per closed block (the last K), newest lowest: 1 = the owner led that block.
    bitmap: Vec<u16>,
    /// Window count per bucket (the sum of its block counters).
    sum: Vec<u32>,
    /// `blocks` arrays of `ROWS * w` counters: block n in array n % blocks.
    counts: Vec<u32>,
    block: u32,
    heap: TopHeap,
    sampler: Sampler,
    scale: f64,
    seed: u64,
}

impl FastKeeperBitmap {
    /// Sized from `config.memory`; at most 16 blocks per window (one bit each).
    pub fn new(config: &DetectorConfig) -> Result<FastKeeperBitmap, ConfigError> {
        if config.blocks > 16 {
            return Err(ConfigError::BadWindow(format!(
                "fastkeeper-bitmap keeps one bit per block: at most 16 blocks per window, got {}",
                config.blocks
            )));
        }
        let bucket = 4 + 2 + 2 + 4 + 4 * config.blocks;
        let w = config.width(Algo::FastKeeperBitmap, ROWS, bucket)?;
        let n = ROWS * w;
        Ok(FastKeeperBitmap {
            w,
            blocks: config.blocks,
            fp: vec![0; n],
            bc: vec![0; n],
            bitmap: vec![0; n],
            sum: vec![0; n],
            counts: vec![0; n * config.blocks],
            block: 0,
            heap: TopHeap::new(config.k),
            sampler: Sampler::new(config.sample, config.seed),
            scale: 1.0 / config.sample,
            seed: config.seed,
        })
    }

    /// One bit per block of the window, all set: a fresh bucket's bitmap.
    fn all_ones(&self) -> u16 {
        ((1u32 << self.blocks) - 1) as u16
    }

    /// The oldest ⌊K/2⌋ + 1 bits set: a flow that has just taken a bucket keeps it until
    /// it trails its colliders in one block, as the first of its credited blocks ages out
    /// (the paper leaves the bitmap after a reset open; all ones would shield a mouse that
    /// happened to collide last for half a window).
    fn bare_majority(&self) -> u16 {
        let zeros = self.blocks - (self.blocks / 2 + 1);
        self.all_ones() & !(((1u32 << zeros) - 1) as u16)
    }

    fn estimate_fp(&self, fp: u32, hash: u128) -> u64 {
        (0..ROWS)
            .map(|j| j * self.w + bucket_of(hash, j, self.w))
            .filter(|&b| self.fp[b] == fp)
            .map(|b| self.sum[b] as u64)
            .max()
            .unwrap_or(0)
    }

    /// Re-estimates the heap's flows from the sketch: at a boundary for the report, and after
    /// the window slides, so that within a block held counts are current and admission
    /// compares against true minima.
    fn refresh_heap(&mut self) {
        let mut heap = std::mem::replace(&mut self.heap, TopHeap::new(1));
        heap.refresh(|flow, _| {
            let hash = flow.hash(self.seed);
            self.estimate_fp(fingerprint(hash), hash)
        });
        self.heap = heap;
    }
}

impl Detector for FastKeeperBitmap {
    #[inline]
    fn insert(&mut self, flow: FlowId, hash: u128) {
        let fp = fingerprint(hash);
        let n = ROWS * self.w;
        let current = (self.block as usize % self.blocks) * n;
        let mut best = 0u32;
        for j in 0..ROWS {
            let b = j * self.w + bucket_of(hash, j, self.w);
            if self.sampler.keep() {
                if self.fp[b] == fp || self.fp[b] == 0 {
                    if self.fp[b] == 0 {
                        self.fp[b] = fp;
                        self.bitmap[b] = self.all_ones();
                    }
                    self.counts[current + b] += 1;
                    self.sum[b] += 1;
                    self.bc[b] = self.bc[b].saturating_add(LAMBDA as i16);
                } else {
                    self.bc[b] = self.bc[b].saturating_sub(1);
                    let ones = self.bitmap[b].count_ones() as usize;
                    let behind = (-(self.bc[b] as i64)).max(0) as u64;
                    let average = (self.sum[b] as u64 / self.blocks as u64).max(1);
                    // Majority vote: the owner trailed in most blocks of the window. Or a
                    // burst: in this block the colliders lead by λ times the owner's
                    // average block.
                    if self.blocks - ones > ones || behind >= LAMBDA * average {
                        for s in 0..self.blocks {
                            self.counts[s * n + b] = 0;
                        }
                        self.fp[b] = fp;
                        self.counts[current + b] = 1;
                        self.sum[b] = 1;
                        self.bc[b] = 1;
                        self.bitmap[b] = self.bare_majority();
                    }
                }
            }
            if self.fp[b] == fp {
                best = best.max(self.sum[b]);
            }
        }
        if best > 0 {
            self.heap.offer(flow, hash as u64, best as u64);
        }
    }

    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        self.refresh_heap();
        top_scaled(&self.heap, self.scale, out);
    }

    fn estimate(&self, _flow: FlowId, hash: u128) -> u64 {
        self.estimate_fp(fingerprint(hash), hash)
    }

    fn end_block(&mut self) {
        let mask = self.all_ones();
        for ((bits, bc), fp) in self.bitmap.iter_mut().zip(&mut self.bc).zip(&self.fp) {
            if *fp != 0 {
                *bits = (*bits << 1 | (*bc > 0) as u16) & mask;
            }
            *bc = 0;
        }
        self.block += 1;
        // The oldest block leaves the window: one contiguous array per row.
        let n = ROWS * self.w;
        let oldest = (self.block as usize % self.blocks) * n;
        let expired = &mut self.counts[oldest..oldest + n];
        for (s, c) in self.sum.iter_mut().zip(expired.iter_mut()) {
            *s -= *c;
            *c = 0;
        }
        self.refresh_heap();
    }

    fn memory_bytes(&self) -> usize {
        self.fp.len() * 4
            + self.bc.len() * 2
            + self.bitmap.len() * 2
            + self.sum.len() * 4
            + self.counts.len() * 4
            + self.heap.memory_bytes()
    }
}
