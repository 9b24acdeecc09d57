//! FastKeeper (Wang, Li, Wu): top-k real-time large flows with a sliding-window sketch.
//!
//! d rows of w buckets; a bucket keeps a 32-bit fingerprint and one counter per block of
//! the window, so a flow's estimate is its count over the last W/b blocks and old traffic is
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

    fn refresh_heap(&mut self) {
        let mut heap = std::mem::take(&mut self.heap);
        refresh_heap(&mut heap, self.seed, |fp, hash| self.estimate_fp(fp, hash));
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

    fn hash_seed(&self) -> u64 {
        self.seed
    }
}

/// Re-estimates the heap's flows from the sketch (`estimate(fingerprint, hash)`): at a
/// boundary for the report, and after the window slides, so that within a block held counts
/// are current and admission compares against true minima.
fn refresh_heap(heap: &mut TopHeap, seed: u64, estimate: impl Fn(u32, u128) -> u64) {
    heap.refresh(|flow, _| {
        let hash = flow.hash(seed);
        estimate(fingerprint(hash), hash)
    });
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

/// Per-bucket state of bitmap FastKeeper beside its block counters: what every packet
/// touches, in one 12-byte record.
#[derive(Clone, Copy, Debug, Default)]
struct BitmapBucket {
    fp: u32,
    /// Window count (the sum of its block counters).
    sum: u32,
    /// This block's balance: λ per owner packet, −1 per colliding packet.
    bc: i16,
    /// One bit per closed block (the last K), newest lowest: 1 = the owner led that block.
    /// The top bit is [`IN_HEAP`].
    bitmap: u16,
}

/// Bitmap flag: the owner is in the top-k heap, so its packets skip the heap (its held
/// count lags and is brought up to date when it is challenged and at boundaries).
const IN_HEAP: u16 = 1 << 15;

/// FastKeeper with bitmap voting and block-major counters.
pub struct FastKeeperBitmap {
    w: usize,
    blocks: usize,
    buckets: Vec<BitmapBucket>,
    /// `blocks` arrays of `ROWS * w` counters: block n in array n % blocks.
    counts: Vec<u32>,
    /// Offset of the current block's array in `counts`.
    current: usize,
    block: u32,
    heap: TopHeap,
    sampler: Sampler,
    scale: f64,
    seed: u64,
}

impl FastKeeperBitmap {
    /// Sized from `config.memory`; at most 15 blocks per window (one bit each).
    pub fn new(config: &DetectorConfig) -> Result<FastKeeperBitmap, ConfigError> {
        if config.blocks > 15 {
            return Err(ConfigError::BadWindow(format!(
                "fastkeeper-bitmap keeps one bit per block: at most 15 blocks per window, got {}",
                config.blocks
            )));
        }
        let bucket = std::mem::size_of::<BitmapBucket>() + 4 * config.blocks;
        let w = config.width(Algo::FastKeeperBitmap, ROWS, bucket)?;
        let n = ROWS * w;
        Ok(FastKeeperBitmap {
            w,
            blocks: config.blocks,
            buckets: vec![BitmapBucket::default(); n],
            counts: vec![0; n * config.blocks],
            current: 0,
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
            .map(|j| self.buckets[j * self.w + bucket_of(hash, j, self.w)])
            .filter(|b| b.fp == fp)
            .map(|b| b.sum as u64)
            .max()
            .unwrap_or(0)
    }

    fn refresh_heap(&mut self) {
        let mut heap = std::mem::take(&mut self.heap);
        refresh_heap(&mut heap, self.seed, |fp, hash| self.estimate_fp(fp, hash));
        self.heap = heap;
    }

    /// Offers a flow to the heap (members' held counts brought up to date first) and keeps
    /// the [`IN_HEAP`] flags of the buckets it and an evicted flow own in step.
    fn admit(&mut self, flow: FlowId, hash: u128, count: u64) {
        let seed = self.seed;
        let mut heap = std::mem::take(&mut self.heap);
        heap.settle(count, |f, _| {
            let h = f.hash(seed);
            self.estimate_fp(fingerprint(h), h)
        });
        let evicted = heap.offer(flow, hash as u64, count);
        let admitted = heap.get(flow, hash as u64).is_some();
        self.heap = heap;
        if admitted {
            self.flag(hash, true);
        }
        if let Some(e) = evicted {
            self.flag(e.hash(seed), false);
        }
    }

    /// Sets or clears [`IN_HEAP`] on the buckets the flow of `hash` owns.
    fn flag(&mut self, hash: u128, on: bool) {
        let fp = fingerprint(hash);
        for j in 0..ROWS {
            let b = &mut self.buckets[j * self.w + bucket_of(hash, j, self.w)];
            if b.fp == fp {
                b.bitmap = if on { b.bitmap | IN_HEAP } else { b.bitmap & !IN_HEAP };
            }
        }
    }

    /// A colliding packet at bucket `b`: the owner loses the bucket on a majority of zeros,
    /// or when this block's colliders lead by λ times its average block.
    #[inline]
    fn collide(&mut self, b: usize, fp: u32) {
        let (blocks, majority) = (self.blocks, self.bare_majority());
        let bucket = &mut self.buckets[b];
        bucket.bc = bucket.bc.saturating_sub(1);
        let ones = (bucket.bitmap & !IN_HEAP).count_ones() as usize;
        let behind = (-(bucket.bc as i64)).max(0) as u64;
        // behind ≥ λ · max(1, sum / blocks), without a division.
        if blocks - ones > ones || behind * blocks as u64 >= LAMBDA * (bucket.sum as u64).max(blocks as u64) {
            *bucket = BitmapBucket { fp, sum: 1, bc: LAMBDA as i16, bitmap: majority };
            let n = ROWS * self.w;
            for s in 0..blocks {
                self.counts[s * n + b] = 0;
            }
            self.counts[self.current + b] = 1;
        }
    }
}

impl Detector for FastKeeperBitmap {
    #[inline]
    fn insert(&mut self, flow: FlowId, hash: u128) {
        let fp = fingerprint(hash);
        let fresh = self.all_ones();
        let (mut best, mut held) = (0u32, false);
        for j in 0..ROWS {
            let b = j * self.w + bucket_of(hash, j, self.w);
            if self.sampler.keep() {
                let bucket = &mut self.buckets[b];
                if bucket.fp == fp {
                    bucket.sum += 1;
                    bucket.bc = bucket.bc.saturating_add(LAMBDA as i16);
                    self.counts[self.current + b] += 1;
                } else if bucket.fp == 0 {
                    *bucket = BitmapBucket { fp, sum: 1, bc: LAMBDA as i16, bitmap: fresh };
                    self.counts[self.current + b] += 1;
                } else {
                    self.collide(b, fp);
                }
            }
            let bucket = &self.buckets[b];
            if bucket.fp == fp {
                best = best.max(bucket.sum);
                held |= bucket.bitmap & IN_HEAP != 0;
            }
        }
        // Estimates only grow within a block: a flow below the heap's smallest is not in
        // it, and need not be looked up.
        if best > 0 && !held && best as u64 >= self.heap.admission() {
            self.admit(flow, hash, best as u64);
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
        for bucket in self.buckets.iter_mut().filter(|b| b.fp != 0) {
            let flag = bucket.bitmap & IN_HEAP;
            bucket.bitmap = (bucket.bitmap << 1 | (bucket.bc > 0) as u16) & mask | flag;
            bucket.bc = 0;
        }
        self.block += 1;
        // The oldest block leaves the window: one contiguous array per row.
        let n = ROWS * self.w;
        self.current = (self.block as usize % self.blocks) * n;
        let expired = &mut self.counts[self.current..self.current + n];
        for (bucket, c) in self.buckets.iter_mut().zip(expired.iter_mut()) {
            bucket.sum -= *c;
            *c = 0;
        }
        self.refresh_heap();
    }

    fn memory_bytes(&self) -> usize {
        self.buckets.len() * std::mem::size_of::<BitmapBucket>()
            + self.counts.len() * 4
            + self.heap.memory_bytes()
    }

    fn hash_seed(&self) -> u64 {
        self.seed
    }
}
