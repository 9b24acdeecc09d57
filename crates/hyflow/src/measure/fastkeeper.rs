//! FastKeeper (Wang, Li, Wu): top-k real-time large flows with a sliding-window sketch.
//!
//! d rows of w buckets; a bucket keeps a 32-bit fingerprint and one counter per block of
//! the window, so a flow's estimate is its count over the last W/b blocks and old traffic is
//! forgotten block by block. A top-k min-heap holds the flows with the largest estimates
//! ([`TopHeap`]: the ids it reports packed at the key's width, 29 B per flow for the 5-tuple).
//!
//! * [`FastKeeper`] (Algorithms 1–3): bucket-major counters, a collision counter CC and the
//!   window sum SUM; counters of blocks that passed while the bucket was idle are cleared
//!   lazily through the previous-update pointer PUP. A colliding flow takes the bucket when
//!   CC / SUM ≥ λ (λ = 2).
//! * [`FastKeeperBitmap`] (§III-D): the collision counter becomes a per-block balance BC
//!   (+λ for each of the owner's packets, −1 for a colliding flow's, so a block counts as led
//!   when the owner sent more than 1/λ of the colliders' packets, the same bar as the basic
//!   CC / SUM ≥ λ; the paper counts +1) and a bitmap of one bit per block (BC > 0 when the
//!   block closed); a colliding flow takes the bucket when the bitmap holds more zeros than
//!   ones (majority vote), and starts with all ones, as the paper's reset does. Block counters are
//!   saturating 16-bit and the window count is their sum (no SUM field), so a bucket takes
//!   4 + 2 + 2 + 2·K bytes (18 B at K = 5, against 36 B for the basic variant): the same
//!   memory buys twice the buckets, the paper's reason for the bitmap. A counter saturates
//!   at 65,535 packets per block per bucket (a flow above 65 kpps with 1 s blocks): shorten
//!   the block for faster traffic. Counters are bucket-major, not block-major as in the
//!   paper's storage optimisation: closing a block visits every bucket anyway to shift its
//!   bitmap, and one bucket's counters then share a cache line, so an estimate costs one
//!   access per row.
//!
//!   `fastkeeper-paper` is §III-D and Algorithm 3 as published: +1 per owner packet and −1
//!   per colliding one, a bit per closed block (BC > 0), the bucket reset on a majority of
//!   zeros, a heap member's count set by its own packets only. `fastkeeper-bitmap` adds four
//!   [`Extension`]s; each one's effect alone is measured by the ablation variants
//!   (`fastkeeper-bitmap-no-EXT`, `fastkeeper-paper+EXT`: `scripts/topk_bench.py`, the
//!   table in BENCHMARKS.md). On three `dyntrace.py make --seed 1|2|3` traces (5 s window of
//!   1 s blocks), precision at 30 KB, k = 100 / at 100 KB, k = 1,000, averaged:
//!   - as published: 0.648 / 0.804; with every extension: 0.998 / 0.936;
//!   - *refresh* (re-estimate the heap at boundaries) matters most at small k: without it
//!     the heap reports flows that went quiet with the counts they had (0.602 / 0.872);
//!   - *guard* (an owner still among the top k keeps its bucket: the vote is meant to evict
//!     flows that became small, but a flow whose burst filled one block trails every later
//!     block while the burst is still in the window): without it 0.955 / 0.850;
//!   - *burst* (colliders leading the owner by λ times its average block take the bucket
//!     within the block, for bursts shorter than a block, 25–40% of a window's top 20 in
//!     these traces; the vote alone waits ⌈K/2⌉ blocks): without it 0.879 / 0.915;
//!   - *weight* (λ per owner packet instead of 1): without it 0.997 / 0.934, within noise.
//!
//!   Alone on the published design, only refresh helps at k = 100 (0.877) and only guard
//!   and weight at k = 1,000 (0.862, 0.838): the extensions work together.
//!
//! Both sample each row update with probability r (Algorithm 3, line 8) and scale estimates
//! by 1 / r. Readings of the pseudo-code every variant shares: the window holds W/b counters
//! including the block being filled (the paper's extra (K+1)-th counter is that block); a
//! flow's estimate is the largest count among the rows whose fingerprint is its own (the
//! query algorithm's text: Algorithm 3's lines 11–13 omit the check); and a flow enters a
//! full heap when that estimate beats the smallest (line 18 compares the last row's `C`).
//! Basic FastKeeper refreshes its heap from the sketch at every boundary, as the bitmap's
//! refresh extension does.

use super::heap::TopHeap;
use super::{bucket_of, fingerprint, Algo, ConfigError, Detector, DetectorConfig, FlowId, Sampler};
use crate::invalid_param::InvalidParam;

/// Rows (the paper's d).
pub const ROWS: usize = 3;
/// Reset threshold λ on CC / SUM.
pub(crate) const LAMBDA: u64 = 2;

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
            heap: TopHeap::new(config.k, config.key_bits),
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
    fn held(&self) -> usize {
        self.heap.len()
    }

    fn hash_seed(&self) -> u64 {
        self.seed
    }
}

/// Re-estimates the heap's flows from the sketch (`estimate(fingerprint, hash)`): at a
/// boundary for the report, and after the window slides, so that within a block held counts
/// are current and admission compares against true minima.
fn refresh_heap(heap: &mut TopHeap, seed: u64, estimate: impl Fn(u32, u128) -> u64) {
    heap.refresh(|flow| {
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

/// Bitmap flag, kept with [`Extension::Guard`] or [`Extension::Refresh`]: the owner is in
/// the top-k heap, so its packets skip the heap (with refresh: its held count lags and is
/// brought up to date when it is challenged and at boundaries), and the majority vote may
/// not take its bucket while it is still large (with guard).
const IN_HEAP: u16 = 1 << 15;

/// Bitmap flag: zeros hold the majority of the window's closed blocks, so the vote gives the
/// bucket to the next colliding flow. Set when the bitmap shifts at a block's end (once per
/// bucket per block), so that a collision reads a bit instead of counting the bitmap's ones.
const OUTVOTED: u16 = 1 << 14;

/// Most blocks per window: one bitmap bit each, below the two flags.
pub const MAX_BLOCKS: usize = 14;

/// One of hyflow's departures from §III-D's bitmap FastKeeper. `fastkeeper-bitmap` has all
/// of them, `fastkeeper-paper` none; the ablation variants ([`Algo::ABLATION`]) drop one from
/// the first or add one to the second, so that each one's effect can be measured alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extension {
    /// An owner still among the top k keeps its bucket whatever its bitmap says.
    Guard,
    /// Within a block, colliders leading the owner by λ times its average block take the
    /// bucket at once, without waiting ⌈K/2⌉ blocks for the vote.
    Burst,
    /// The balance counts λ per owner packet (a block is led when the owner sent more than
    /// 1/λ of the colliders' packets, the basic variant's CC / SUM ≥ λ bar); the paper counts
    /// +1, so the owner must outnumber the colliders.
    Weight,
    /// The heap's counts are re-estimated from the sketch at every block boundary (and lazily
    /// when challenged, so members' packets skip the heap); the paper's Algorithm 3 updates a
    /// member's count only with its own packets, so a flow that went quiet keeps its count.
    Refresh,
}

impl Extension {
    /// Every extension, in the order the ablation lists them.
    pub const ALL: [Extension; 4] =
        [Extension::Guard, Extension::Burst, Extension::Weight, Extension::Refresh];

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of [`Extension`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extensions(u8);

impl Extensions {
    /// §III-D as published.
    pub const NONE: Extensions = Extensions(0);
    /// hyflow's `fastkeeper-bitmap`.
    pub const ALL: Extensions = Extensions(0b1111);

    /// This set with `e`.
    pub const fn with(self, e: Extension) -> Extensions {
        Extensions(self.0 | e.bit())
    }

    /// This set without `e`.
    pub const fn without(self, e: Extension) -> Extensions {
        Extensions(self.0 & !e.bit())
    }

    /// Whether `e` is in the set.
    #[inline]
    pub fn has(self, e: Extension) -> bool {
        self.0 & e.bit() != 0
    }

    /// The detector with these extensions, for its name in errors (sets outside the
    /// ablation, with two or three extensions, are named as the full variant).
    fn algo(self) -> Algo {
        if self == Extensions::NONE {
            return Algo::FastKeeperPaper;
        }
        for e in Extension::ALL {
            if self == Extensions::NONE.with(e) {
                return Algo::FastKeeperPaperWith(e);
            }
            if self == Extensions::ALL.without(e) {
                return Algo::FastKeeperBitmapWithout(e);
            }
        }
        Algo::FastKeeperBitmap
    }
}

/// A bitmap bucket for a window of `B` blocks: 8 + 2·B bytes (18 at B = 5), one cache line
/// for its whole state. The window's length is a type parameter so that the block counters
/// are a fixed-size array: summing them unrolls, and indexing needs no run-time bounds.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Bucket<const B: usize> {
    /// The owner's fingerprint, low and high half (0: empty).
    fp: [u16; 2],
    /// One bit per closed block, newest lowest, 1 = the owner led it; flags [`IN_HEAP`] and
    /// [`OUTVOTED`] on top.
    bitmap: u16,
    /// This block's balance: λ per owner packet, −1 per colliding one.
    balance: i16,
    /// Saturating block counters, block n in counter n % B.
    counters: [u16; B],
}

impl<const B: usize> Bucket<B> {
    const EMPTY: Bucket<B> = Bucket { fp: [0; 2], bitmap: 0, balance: 0, counters: [0; B] };
    /// One bit per block of the window, all set: the bitmap of a flow that takes a bucket.
    const ALL_ONES: u16 = ((1u32 << B) - 1) as u16;

    #[inline]
    fn owner(&self) -> u32 {
        self.fp[0] as u32 | (self.fp[1] as u32) << 16
    }

    /// The count over the window: the sum of the block counters.
    #[inline]
    fn count(&self) -> u64 {
        self.counters.iter().map(|&c| c as u64).sum()
    }

    /// Whether this block's colliders may take the bucket by a burst: with
    /// [`Extension::Burst`], they lead it by λ · max(1, count / blocks), so at least by λ.
    #[inline]
    fn may_burst(&self, ext: Extensions) -> bool {
        ext.has(Extension::Burst) && self.balance <= -(LAMBDA as i16)
    }

    /// Whether a colliding packet may take the bucket: its owner was outvoted, or may be
    /// burst out. Most collisions may not, and cost the owner only a point of balance.
    #[inline]
    fn may_change_hands(&self, ext: Extensions) -> bool {
        self.bitmap & OUTVOTED != 0 || self.may_burst(ext)
    }

    /// Gives the bucket to the flow of `fp`, with one packet (worth `weight` in the balance)
    /// in block counter `slot` and all ones in its bitmap.
    #[inline]
    fn take(&mut self, fp: u32, slot: usize, weight: i16) {
        *self = Bucket {
            fp: [fp as u16, (fp >> 16) as u16],
            bitmap: Self::ALL_ONES,
            balance: weight,
            ..Self::EMPTY
        };
        self.counters[slot] = 1;
    }
}

/// FastKeeper with bitmap voting, for windows of `B` blocks ([`build_bitmap`] picks `B`).
/// `ALL_EXT` fixes the extensions to [`Extensions::ALL`] at compile time, so that the
/// detector offload policies run tests no flag per packet (read at run time, they cost 343
/// instructions per packet against 315, measured before the rows decided collisions).
pub struct FastKeeperBitmap<const B: usize, const ALL_EXT: bool> {
    ext: Extensions,
    /// What an owner's packet adds to the balance: λ with [`Extension::Weight`], else 1.
    weight: i16,
    w: usize,
    /// Row-major: bucket i of row j at j · w + i.
    buckets: Vec<Bucket<B>>,
    /// The counter of the block being filled (block % B).
    slot: usize,
    heap: TopHeap,
    sampler: Sampler,
    scale: f64,
    seed: u64,
}

/// A bitmap FastKeeper for `config.blocks` blocks per window (1 to [`MAX_BLOCKS`]) with
/// the extensions `ext`.
pub fn build_bitmap(config: &DetectorConfig, ext: Extensions) -> Result<Box<dyn Detector>, ConfigError> {
    macro_rules! by_blocks {
        ($($b:literal)*) => {
            match config.blocks {
                $($b if ext == Extensions::ALL => Ok(Box::new(FastKeeperBitmap::<$b, true>::new(config, ext)?)),
                  $b => Ok(Box::new(FastKeeperBitmap::<$b, false>::new(config, ext)?)),)*
                n => Err(ConfigError::BadWindow(InvalidParam::new(
                    "window",
                    format!("holds at most {MAX_BLOCKS} blocks for fastkeeper-bitmap (one bit per block), got {n}"),
                ))),
            }
        };
    }
    by_blocks!(1 2 3 4 5 6 7 8 9 10 11 12 13 14)
}

/// Bytes of one bitmap bucket for a window of `blocks` blocks (18 B for 5).
pub(crate) fn bitmap_bucket_bytes(blocks: usize) -> usize {
    8 + 2 * blocks
}

impl<const B: usize, const ALL_EXT: bool> FastKeeperBitmap<B, ALL_EXT> {
    /// Sized from `config.memory`, for `config.blocks == B`, with the extensions `ext`
    /// (all of them if `ALL_EXT`).
    pub fn new(
        config: &DetectorConfig,
        ext: Extensions,
    ) -> Result<FastKeeperBitmap<B, ALL_EXT>, ConfigError> {
        debug_assert_eq!(std::mem::size_of::<Bucket<B>>(), bitmap_bucket_bytes(B));
        debug_assert!(!ALL_EXT || ext == Extensions::ALL, "ALL_EXT with {ext:?}");
        if config.blocks != B {
            return Err(ConfigError::BadWindow(InvalidParam::new(
                "window",
                format!("holds {} blocks, not {B}", config.blocks),
            )));
        }
        let w = config.width(ext.algo(), ROWS, bitmap_bucket_bytes(B))?;
        Ok(FastKeeperBitmap {
            ext,
            weight: if ext.has(Extension::Weight) { LAMBDA as i16 } else { 1 },
            w,
            buckets: vec![Bucket::EMPTY; ROWS * w],
            slot: 0,
            heap: TopHeap::new(config.k, config.key_bits),
            sampler: Sampler::new(config.sample, config.seed),
            scale: 1.0 / config.sample,
            seed: config.seed,
        })
    }

    /// The extensions, a constant when `ALL_EXT`.
    #[inline]
    fn ext(&self) -> Extensions {
        if ALL_EXT {
            Extensions::ALL
        } else {
            self.ext
        }
    }

    /// What an owner's packet adds to the balance, a constant when `ALL_EXT`.
    #[inline]
    fn weight(&self) -> i16 {
        if ALL_EXT {
            LAMBDA as i16
        } else {
            self.weight
        }
    }

    fn estimate_fp(&self, fp: u32, hash: u128) -> u64 {
        (0..ROWS)
            .map(|j| &self.buckets[j * self.w + bucket_of(hash, j, self.w)])
            .filter(|b| b.owner() == fp)
            .map(Bucket::count)
            .max()
            .unwrap_or(0)
    }

    fn refresh_heap(&mut self) {
        let mut heap = std::mem::take(&mut self.heap);
        refresh_heap(&mut heap, self.seed, |fp, hash| self.estimate_fp(fp, hash));
        self.heap = heap;
    }

    /// Offers a flow to the heap (with [`Extension::Refresh`], members' held counts brought
    /// up to date first) and keeps the [`IN_HEAP`] flags of the buckets it and an evicted
    /// flow own in step.
    fn admit(&mut self, flow: FlowId, hash: u128, count: u64) {
        let seed = self.seed;
        let mut heap = std::mem::take(&mut self.heap);
        if self.ext().has(Extension::Refresh) {
            heap.settle(count, |f| {
                let h = f.hash(seed);
                self.estimate_fp(fingerprint(h), h)
            });
        }
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
            if b.owner() == fp {
                b.bitmap = if on { b.bitmap | IN_HEAP } else { b.bitmap & !IN_HEAP };
            }
        }
    }

    /// What follows a packet's rows unless its flow is a heap member whose count is kept
    /// fresh: its estimate (the largest count of the buckets it owns, `owned`; `usize::MAX`
    /// where it owns none) offered to the heap. Out of line, so that the rows, which every
    /// packet runs, keep a small frame.
    #[inline(never)]
    fn offer_to_heap(&mut self, flow: &FlowId, hash: u128, owned: &[usize; ROWS]) {
        let ext = self.ext();
        let refresh = ext.has(Extension::Refresh);
        let best = owned.iter().filter(|&&b| b != usize::MAX).map(|&b| self.buckets[b].count()).max();
        if refresh {
            // Estimates only grow within a block: a flow below the heap's smallest is not in
            // it, and need not be looked up.
            if let Some(best) = best.filter(|&c| c > 0 && c >= self.heap.admission()) {
                self.admit(*flow, hash, best);
            }
            return;
        }
        // Algorithm 3: a member's count becomes its estimate now, whatever it is; another
        // flow enters when the heap has room or it beats the smallest (`offer`, one lookup).
        // A flow that owns no bucket counts 0: only a member needs to hear it.
        let best = best.unwrap_or(0);
        if best == 0 && self.heap.get(*flow, hash as u64).is_none() {
            return;
        }
        if ext.has(Extension::Guard) {
            // The guard reads which buckets heap members own.
            self.admit(*flow, hash, best);
        } else {
            self.heap.offer(*flow, hash as u64, best);
        }
    }
}

/// A colliding packet of the flow of `fp` at `bucket`, whose balance it has already taken a
/// point from, and whose owner was outvoted or trails its block by at least λ (what the
/// caller checks first); whether it took the bucket. The owner loses it on a majority of
/// zeros in its bitmap (§III-D), unless it is still among the top k (in the heap, its count
/// at least `admission`, the heap's smallest or 1) and `ext` has [`Extension::Guard`]; with
/// [`Extension::Burst`] it also loses it at once when this block's colliders lead it by λ
/// times its average block.
#[inline(never)]
fn collide<const B: usize>(
    bucket: &mut Bucket<B>,
    fp: u32,
    slot: usize,
    admission: u64,
    ext: Extensions,
    weight: i16,
) -> bool {
    debug_assert!(bucket.may_change_hands(ext), "the caller decides the collisions that cannot take it");
    let guarded = ext.has(Extension::Guard) && bucket.bitmap & IN_HEAP != 0;
    let vote = bucket.bitmap & OUTVOTED != 0;
    let behind = (-(bucket.balance as i64)).max(0) as u64;
    let may_burst = bucket.may_burst(ext);
    // The count is needed only to spare a top-k owner or to see a burst: most collisions
    // (against a large owner that leads its block, or a mouse's majority of zeros) decide
    // without summing the counters.
    if vote && !guarded {
        bucket.take(fp, slot, weight);
        return true;
    }
    let count = bucket.count();
    if guarded && count >= admission {
        return false;
    }
    // behind ≥ λ · max(1, count / blocks), without a division.
    let burst = may_burst && behind * B as u64 >= LAMBDA * count.max(B as u64);
    if vote || burst {
        bucket.take(fp, slot, weight);
    }
    vote || burst
}

impl<const B: usize, const ALL_EXT: bool> Detector for FastKeeperBitmap<B, ALL_EXT> {
    #[inline]
    fn insert(&mut self, flow: FlowId, hash: u128) {
        let fp = fingerprint(hash);
        let slot = self.slot;
        // Always holds (`end_block` wraps it): said once here, so that the rows index their
        // counters without a bounds test each.
        assert!(slot < B);
        let (ext, weight) = (self.ext(), self.weight());
        // Changes only when a flow is admitted, after the rows.
        let admission = self.heap.admission().max(1);
        let mut owned = [usize::MAX; ROWS];
        let mut held = false;
        for (j, owned) in owned.iter_mut().enumerate() {
            let b = j * self.w + bucket_of(hash, j, self.w);
            let sampled = self.sampler.keep();
            let bucket = &mut self.buckets[b];
            let owns = match bucket.owner() {
                o if o == fp => {
                    if sampled {
                        bucket.counters[slot] = bucket.counters[slot].saturating_add(1);
                        bucket.balance = bucket.balance.saturating_add(weight);
                    }
                    true
                }
                _ if !sampled => false,
                0 => {
                    bucket.take(fp, slot, weight);
                    true
                }
                _ => {
                    // Most collisions meet an owner that neither lost its vote nor trails
                    // its block by λ: they only cost the owner a point of balance, decided
                    // here without the call (a third of the packet's instructions before).
                    bucket.balance = bucket.balance.saturating_sub(1);
                    bucket.may_change_hands(ext) && collide(bucket, fp, slot, admission, ext, weight)
                }
            };
            if owns {
                *owned = b;
                held |= bucket.bitmap & IN_HEAP != 0;
            }
        }
        // With refreshed counts, a heap member's packets skip the heap, and need no estimate
        // (most packets: the large flows are the heap's).
        if !(held && ext.has(Extension::Refresh)) {
            self.offer_to_heap(&flow, hash, &owned);
        }
    }

    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        if self.ext().has(Extension::Refresh) {
            self.refresh_heap();
        }
        top_scaled(&self.heap, self.scale, out);
    }

    fn estimate(&self, _flow: FlowId, hash: u128) -> u64 {
        self.estimate_fp(fingerprint(hash), hash)
    }

    fn end_block(&mut self) {
        // The oldest block leaves the window: its counter becomes the new block's.
        self.slot = (self.slot + 1) % B;
        let slot = self.slot;
        for bucket in self.buckets.iter_mut().filter(|b| b.owner() != 0) {
            let led = (bucket.balance > 0) as u16;
            let bitmap = (bucket.bitmap << 1 | led) & Bucket::<B>::ALL_ONES;
            let ones = bitmap.count_ones() as usize;
            let outvoted = if B - ones > ones { OUTVOTED } else { 0 };
            bucket.bitmap = bitmap | outvoted | bucket.bitmap & IN_HEAP;
            bucket.balance = 0;
            bucket.counters[slot] = 0;
        }
        if self.ext().has(Extension::Refresh) {
            self.refresh_heap();
        }
    }

    fn memory_bytes(&self) -> usize {
        self.buckets.len() * std::mem::size_of::<Bucket<B>>() + self.heap.memory_bytes()
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

    const SEED: u64 = 7;

    /// The detector over a 5-block window.
    /// The extensions read at run time, so that one type runs them all.
    type Bitmap5 = FastKeeperBitmap<5, false>;

    fn flow(n: u64) -> FlowId {
        FlowId::from_u128(n as u128)
    }

    /// A bitmap FastKeeper reporting k flows with two buckets per row and a 5-block window.
    fn two_buckets(k: usize) -> Bitmap5 {
        two_buckets_with(k, Extensions::ALL)
    }

    /// The same with the extensions `ext`.
    fn two_buckets_with(k: usize, ext: Extensions) -> Bitmap5 {
        let memory = TopHeap::bytes_for_key(k, 104) + ROWS * 2 * bitmap_bucket_bytes(5);
        let config = DetectorConfig { k, memory, blocks: 5, sample: 1.0, seed: SEED, key_bits: 104 };
        let d = Bitmap5::new(&config, ext).unwrap();
        assert_eq!(d.w, 2);
        d
    }

    /// The paper's balance is +1 per owner packet: an owner that sends as many packets as the
    /// colliders does not lead its block (BC = 0), where the weighted balance (λ = 2) says it
    /// does.
    #[test]
    fn the_papers_balance_counts_one_per_packet() {
        for (ext, led) in [(Extensions::NONE, 0b11110), (Extensions::NONE.with(Extension::Weight), 0b11111)] {
            let mut d = two_buckets_with(1, ext);
            let (a, c) = (1, find(&d, 1, true, 2));
            send(&mut d, a, 3);
            send(&mut d, c, 3);
            d.end_block();
            assert_eq!(bitmap(&d, a), [led; ROWS], "{ext:?}");
        }
    }

    /// As published, the vote evicts an owner even when it is the largest flow there is, and
    /// a burst within a block takes nothing: the colliding flow waits for the vote.
    #[test]
    fn the_papers_vote_has_no_guard_and_no_burst_takeover() {
        let mut d = two_buckets_with(1, Extensions::NONE);
        let a = 1;
        let c = find(&d, a, true, 2);
        send(&mut d, a, 20);
        d.end_block();
        send(&mut d, c, 10);
        assert_eq!(d.estimate(flow(c), flow(c).hash(SEED)), 0, "no burst takeover");
        for _ in 0..2 {
            d.end_block();
            send(&mut d, c, 10);
        }
        // Three blocks led by the colliders (20 packets against none, then 10 each block):
        // zeros hold the majority, and the next colliding packet takes every bucket.
        d.end_block();
        assert_eq!(bitmap(&d, a), [0b11000; ROWS]);
        send(&mut d, c, 1);
        assert_eq!(d.estimate(flow(a), flow(a).hash(SEED)), 0, "a, still the largest flow, lost its buckets");
        assert_eq!(d.estimate(flow(c), flow(c).hash(SEED)), 1);
    }

    /// Algorithm 3 updates a heap member's count only with the member's own packets: a flow
    /// that went quiet is reported with the count it last had, after it has left the window;
    /// the refresh extension reports the window.
    #[test]
    fn the_papers_heap_keeps_the_counts_of_flows_that_went_quiet() {
        for (ext, reported) in [(Extensions::NONE, vec![(flow(1), 9)]), (Extensions::ALL, vec![])] {
            let mut d = two_buckets_with(2, ext);
            send(&mut d, 1, 9);
            for _ in 0..5 {
                d.end_block();
            }
            assert_eq!(d.estimate(flow(1), flow(1).hash(SEED)), 0);
            assert_eq!(top(&mut d), reported, "{ext:?}");
        }
    }

    fn send(d: &mut Bitmap5, n: u64, packets: usize) {
        let f = flow(n);
        for _ in 0..packets {
            d.insert(f, f.hash(SEED));
        }
    }

    fn buckets(d: &Bitmap5, n: u64) -> [usize; ROWS] {
        let h = flow(n).hash(SEED);
        std::array::from_fn(|j| j * d.w + bucket_of(h, j, d.w))
    }

    /// The first flow after `from` whose buckets are (`same`) or share none with (`!same`)
    /// those of flow `of`.
    fn find(d: &Bitmap5, of: u64, same: bool, from: u64) -> u64 {
        let target = buckets(d, of);
        (from..)
            .find(|&n| {
                let b = buckets(d, n);
                if same {
                    b == target
                } else {
                    (0..ROWS).all(|j| b[j] != target[j])
                }
            })
            .unwrap()
    }

    fn bitmap(d: &Bitmap5, n: u64) -> Vec<u16> {
        buckets(d, n).iter().map(|&b| d.buckets[b].bitmap & !(IN_HEAP | OUTVOTED)).collect()
    }

    fn top(d: &mut Bitmap5) -> Vec<(FlowId, u64)> {
        let mut out = Vec::new();
        d.top(&mut out);
        out
    }

    /// Owner `a` sends one packet and the colliding `c` two in each of three blocks: `a`
    /// trails (balance 2 − 2 = 0 is not a lead) without a burst (never behind at all).
    fn trail_three_blocks(d: &mut Bitmap5, a: u64, c: u64) {
        for _ in 0..3 {
            send(d, a, 1);
            send(d, c, 2);
            d.end_block();
        }
        assert!(bitmap(d, a).iter().all(|&b| b == 0b11000), "{:?}", bitmap(d, a));
    }

    #[test]
    fn the_vote_evicts_an_owner_that_left_the_top_k() {
        let mut d = two_buckets(1);
        let (a, heavy) = (1, find(&two_buckets(1), 1, false, 2));
        let c = find(&d, a, true, 2);
        send(&mut d, a, 2);
        send(&mut d, heavy, 50);
        assert_eq!(top(&mut d), [(flow(heavy), 50)], "a is not in the top 1");
        assert_eq!(bitmap(&d, a), [0b11111; ROWS], "a new owner starts with all ones");
        d.end_block();
        trail_three_blocks(&mut d, a, c);
        assert_eq!(d.estimate(flow(a), flow(a).hash(SEED)), 5);
        // Three zeros of five: the next colliding packet takes every bucket, all ones again.
        send(&mut d, c, 1);
        assert_eq!(d.estimate(flow(a), flow(a).hash(SEED)), 0);
        assert_eq!(d.estimate(flow(c), flow(c).hash(SEED)), 1);
        assert_eq!(bitmap(&d, c), [0b11111; ROWS]);
    }

    #[test]
    fn the_vote_keeps_an_owner_still_in_the_top_k() {
        let mut d = two_buckets(1);
        let a = 1;
        let c = find(&d, a, true, 2);
        send(&mut d, a, 2);
        d.end_block();
        trail_three_blocks(&mut d, a, c);
        // A majority of zeros, but a is the largest flow there is: it keeps its buckets until
        // its count falls below the heap's smallest, which its own is.
        send(&mut d, c, 1);
        assert_eq!(top(&mut d), [(flow(a), 5)]);
        for _ in 0..5 {
            d.end_block();
        }
        assert_eq!(top(&mut d), [], "a has left the window");
        send(&mut d, c, 1);
        assert_eq!(top(&mut d), [(flow(c), 1)], "an owner at count 0 is no longer large");
    }

    #[test]
    fn a_burst_takes_a_bucket_within_the_block_unless_its_owner_is_large() {
        let mut d = two_buckets(1);
        let (a, heavy) = (1, find(&two_buckets(1), 1, false, 2));
        let c = find(&d, a, true, 2);
        send(&mut d, a, 5);
        send(&mut d, heavy, 50);
        d.end_block(); // a led: its average block is 1 packet
        send(&mut d, c, 1);
        assert_eq!(d.estimate(flow(c), flow(c).hash(SEED)), 0, "one collision is no burst");
        // λ · average = 2 colliding packets ahead of the owner in this block.
        send(&mut d, c, 1);
        assert_eq!(d.estimate(flow(a), flow(a).hash(SEED)), 0, "a lost every bucket");
        assert_eq!(bitmap(&d, c), [0b11111; ROWS]);

        // The same burst against an owner in the top 1 changes nothing.
        let mut d = two_buckets(1);
        send(&mut d, a, 5);
        d.end_block();
        send(&mut d, c, 10);
        assert_eq!(top(&mut d), [(flow(a), 5)]);
        assert_eq!(d.estimate(flow(c), flow(c).hash(SEED)), 0);
    }

    #[test]
    fn block_counters_saturate_at_16_bits_and_slide_exactly() {
        let mut d = two_buckets(2);
        send(&mut d, 1, 70_000);
        assert_eq!(top(&mut d), [(flow(1), 65_535)]);
        d.end_block();
        send(&mut d, 1, 10);
        assert_eq!(top(&mut d), [(flow(1), 65_545)]);
        for _ in 0..4 {
            d.end_block();
        }
        assert_eq!(top(&mut d), [(flow(1), 10)], "the saturated block left the window");
    }

    #[test]
    fn memory_is_the_budget_less_what_a_bucket_cannot_fill() {
        let config =
            DetectorConfig { k: 1000, memory: 100 * 1024, blocks: 5, sample: 1.0, seed: 1, key_bits: 104 };
        let d = Bitmap5::new(&config, Extensions::ALL).unwrap();
        let used = d.memory_bytes();
        assert!(used <= config.memory && config.memory - used < ROWS * bitmap_bucket_bytes(5));
        // The heap of 1,000 5-tuples takes 29 B per flow, under a third; buckets the rest.
        assert_eq!(d.heap.memory_bytes(), 29_004);
    }

    /// Every window length from 1 to 14 blocks builds its own bucket size and slides
    /// exactly (one flow alone: its estimate is its packets in the last B blocks); 15 is
    /// refused by name.
    #[test]
    fn every_window_length_builds_and_slides_exactly() {
        for blocks in 1..=MAX_BLOCKS {
            let config =
                DetectorConfig { k: 4, memory: 8_192, blocks, sample: 1.0, seed: SEED, key_bits: 104 };
            let mut d = build_bitmap(&config, Extensions::ALL).unwrap();
            assert!(
                d.memory_bytes() <= 8_192 && d.memory_bytes() > 8_192 - ROWS * bitmap_bucket_bytes(blocks)
            );
            let f = flow(9);
            for block in 0..2 * blocks as u64 + 3 {
                for _ in 0..block + 1 {
                    d.insert(f, f.hash(SEED));
                }
                let first = (block + 1).saturating_sub(blocks as u64);
                let window: u64 = (first..=block).map(|b| b + 1).sum();
                assert_eq!(d.estimate(f, f.hash(SEED)), window, "{blocks} blocks, block {block}");
                d.end_block();
            }
        }
        let config =
            DetectorConfig { k: 4, memory: 8_192, blocks: 15, sample: 1.0, seed: SEED, key_bits: 104 };
        let err = build_bitmap(&config, Extensions::NONE).err().unwrap().to_string();
        assert!(
            err.contains("holds at most 14 blocks for fastkeeper-bitmap (one bit per block), got 15"),
            "{err}"
        );
    }
}
