//! Elixir's measurement (§3.2–3.3): which flows deserve the NIC's table.
//!
//! **Large flows** ([`ElixirLarge`], Algorithm 1): the identification window L is cut into
//! N = ⌈L/T⌉ sub-windows of the replacement window T (here: blocks). Each sub-window has its
//! own d × w count-min array, arranged so that sliding the window clears one contiguous
//! array. A flow's window size is the minimum over rows of its counters summed over the N
//! arrays; a min-heap keeps the largest flows seen since the last replacement. At every
//! replacement (block boundary) the heap's flows are the new large set: flows not in the
//! Bloom filter of offloaded flows are to be offloaded, previously offloaded flows no longer
//! in the set are to be evicted ([`ElixirLarge::replacement`]); then the heap restarts and
//! the oldest array is cleared. Elixir feeds it sampled, truncated hardware traffic: run it
//! with a sampling rate (estimates are scaled back).
//!
//! **Bursty flows** ([`BurstCounters`], §3.3): exact per-flow counters for software flows
//! over a short window (1 s in the paper), reset every window; when the software queue
//! crosses its threshold the policy compares them with the NIC's bursty-area counters.

use hashbrown::{HashMap, HashSet};

use super::flow_id::PackedIds;
use super::heap::TopHeap;
use super::{bucket_of, Algo, ConfigError, Detector, DetectorConfig, FlowId};

/// Rows per sub-window array (d).
pub const ROWS: usize = 3;
/// Bloom filter: bits per flow it holds, and hash functions.
pub(crate) const BLOOM_BITS_PER_FLOW: usize = 10;
const BLOOM_HASHES: usize = 7;

/// The flows a replacement moves between hardware and software.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replacement {
    /// Large software flows to install in the NIC.
    pub offload: Vec<FlowId>,
    /// Offloaded flows no longer large, to hand back to software.
    pub evict: Vec<FlowId>,
}

/// Elixir's large-flow identifier.
pub struct ElixirLarge {
    w: usize,
    arrays: usize,
    /// `arrays` arrays of `ROWS * w` counters; sub-window t in array t % arrays.
    counters: Vec<u32>,
    current: usize,
    heap: TopHeap,
    /// Offloaded flows: the Bloom filter the data path checks, and the list it was built from.
    bloom: Vec<u64>,
    offloaded: PackedIds,
    offloaded_len: usize,
    replacement: Replacement,
    seed: u64,
}

impl ElixirLarge {
    /// Bytes taken before the sub-window arrays, for k flows of `key_bits`-bit ids: the heap,
    /// the Bloom filter of offloaded flows and the offloaded list.
    pub(crate) fn fixed_bytes(k: usize, key_bits: u32) -> usize {
        TopHeap::bytes_for_key(k, key_bits)
            + (k * BLOOM_BITS_PER_FLOW).div_ceil(64) * 8
            + PackedIds::bytes_for(k, key_bits)
    }

    /// Sized from `config.memory` (the heap, the Bloom filter and the offloaded list for k
    /// flows come first; the rest holds the arrays).
    pub fn new(config: &DetectorConfig) -> Result<ElixirLarge, ConfigError> {
        let bloom_words = (config.k * BLOOM_BITS_PER_FLOW).div_ceil(64);
        let fixed = Self::fixed_bytes(config.k, config.key_bits);
        let per_column = config.blocks * ROWS * 4;
        let w = config.memory.saturating_sub(fixed) / per_column;
        if w == 0 {
            return Err(ConfigError::TooSmall {
                algo: Algo::Elixir.name(),
                memory: config.memory,
                needed: fixed + per_column,
                k: config.k,
            });
        }
        Ok(ElixirLarge {
            w,
            arrays: config.blocks,
            counters: vec![0; config.blocks * ROWS * w],
            current: 0,
            heap: TopHeap::new(config.k, config.key_bits),
            bloom: vec![0; bloom_words],
            offloaded: PackedIds::new(config.k, config.key_bits),
            offloaded_len: 0,
            replacement: Replacement::default(),
            seed: config.seed,
        })
    }

    /// What the last replacement decided.
    pub fn replacement(&self) -> &Replacement {
        &self.replacement
    }

    /// The large set chosen at the last replacement, largest first.
    pub(crate) fn large_set(&self) -> impl Iterator<Item = FlowId> + '_ {
        (0..self.offloaded_len).map(|i| self.offloaded.get(i))
    }

    /// Whether `flow` is among the largest seen since the last replacement (in the heap).
    pub(crate) fn in_heap(&self, flow: FlowId, hash: u128) -> bool {
        self.heap.get(flow, hash as u64).is_some()
    }

    /// Sub-window arrays (N = ⌈L/T⌉).
    pub fn arrays(&self) -> usize {
        self.arrays
    }

    /// Counters of the sub-window array `t` (0 ≤ t < N) that are not zero.
    pub fn array_load(&self, t: usize) -> usize {
        self.counters.iter().skip(t).step_by(self.arrays).filter(|&&c| c != 0).count()
    }

    /// The array the current sub-window counts into.
    pub fn current_array(&self) -> usize {
        self.current
    }

    /// Whether the Bloom filter says `flow` is offloaded (false positives possible).
    pub fn is_offloaded(&self, hash: u128) -> bool {
        let bits = self.bloom.len() * 64;
        (0..BLOOM_HASHES).all(|i| {
            let b = bucket_of(hash, 16 + i, bits);
            self.bloom[b / 64] & (1 << (b % 64)) != 0
        })
    }

    /// Where the N sub-window counters of row `j`'s bucket for `hash` start: they are
    /// adjacent (one cache line for N ≤ 16), so an update and a window estimate touch one
    /// line per row, not one per row and array.
    #[inline]
    fn bucket(&self, hash: u128, j: usize) -> usize {
        (j * self.w + bucket_of(hash, j, self.w)) * self.arrays
    }

    fn window_size(&self, hash: u128) -> u64 {
        (0..ROWS)
            .map(|j| {
                let i = self.bucket(hash, j);
                self.counters[i..i + self.arrays].iter().map(|&c| c as u64).sum::<u64>()
            })
            .min()
            .unwrap_or(0)
    }

    /// Algorithm 1, lines 20–24: the heap's flows become the offloaded set.
    fn replace(&mut self) {
        let mut large = Vec::new();
        self.heap.sorted(&mut large);
        let seed = self.seed;
        self.replacement.offload.clear();
        self.replacement.evict.clear();
        for &(flow, _) in &large {
            if !self.is_offloaded(flow.hash(seed)) {
                self.replacement.offload.push(flow);
            }
        }
        // A set, not a scan of `large` per offloaded flow: k is the hardware table's size
        // (tens of thousands), and k² comparisons held a live switch's engine for 100 ms.
        let chosen: HashSet<FlowId> = large.iter().map(|l| l.0).collect();
        for flow in (0..self.offloaded_len).map(|i| self.offloaded.get(i)) {
            if !chosen.contains(&flow) {
                self.replacement.evict.push(flow);
            }
        }
        // The heap holds at most k flows: they fit.
        for (i, &(flow, _)) in large.iter().enumerate() {
            self.offloaded.set(i, flow);
        }
        self.offloaded_len = large.len();
        self.bloom.fill(0);
        let bits = self.bloom.len() * 64;
        for &(flow, _) in &large {
            let hash = flow.hash(seed);
            for i in 0..BLOOM_HASHES {
                let b = bucket_of(hash, 16 + i, bits);
                self.bloom[b / 64] |= 1 << (b % 64);
            }
        }
    }
}

impl Detector for ElixirLarge {
    #[inline]
    fn insert(&mut self, flow: FlowId, hash: u128) {
        for j in 0..ROWS {
            let i = self.bucket(hash, j) + self.current;
            self.counters[i] = self.counters[i].saturating_add(1);
        }
        let size = self.window_size(hash);
        self.heap.offer(flow, hash as u64, size);
    }

    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        self.heap.sorted(out);
    }

    fn estimate(&self, _flow: FlowId, hash: u128) -> u64 {
        self.window_size(hash)
    }

    fn end_block(&mut self) {
        self.replace();
        self.heap.clear();
        self.current = (self.current + 1) % self.arrays;
        if self.arrays == 1 {
            self.counters.fill(0);
        } else {
            self.counters.iter_mut().skip(self.current).step_by(self.arrays).for_each(|c| *c = 0);
        }
    }

    fn memory_bytes(&self) -> usize {
        self.counters.len() * 4
            + self.heap.memory_bytes()
            + self.bloom.len() * 8
            + self.offloaded.memory_bytes()
    }
    fn held(&self) -> usize {
        self.heap.len()
    }

    fn hash_seed(&self) -> u64 {
        self.seed
    }
}

/// Exact per-flow packet counters over a short tumbling window (Elixir §3.3), for the
/// software-forwarded flows that may be bursting. Each flow keeps a representative `R` (the
/// policy's: a packet to offload the flow with) from its window's first packet.
///
/// The window under way is also kept by count (a stream summary: `by_count[n]` lists the
/// flows with `n` packets, each flow knowing its slot), so that the fastest flow is found from
/// the top down when a ring fills, as the paper's heap of software counters finds it, not by a
/// scan of every flow of the window: that scan, under the engine's lock, stopped a live
/// switch's cores for milliseconds per check while the ring it was meant to drain overflowed.
/// Counts above 4,096 (`DENSE_COUNTS`) leave the lists for `above` (few flows can have that many
/// packets in one window), so the lists' size is bounded whatever the rate.
#[derive(Clone, Debug)]
pub struct BurstCounters<R = ()> {
    window_ns: u64,
    started_ns: Option<u64>,
    counts: HashMap<FlowId, Counted<R>>,
    last: HashMap<FlowId, Counted<R>>,
    /// The window under way's flows by packet count, up to [`DENSE_COUNTS`] (index 0 unused).
    by_count: Vec<Vec<FlowId>>,
    /// The highest count of `by_count` holding a flow, or that had one in this window.
    top_count: usize,
    /// Flows with more than [`DENSE_COUNTS`] packets in the window under way.
    above: Vec<FlowId>,
}

/// Counts kept as lists, one per count: a flow past this many packets in one window moves to
/// the unsorted `above`, which holds at most the window's packets ÷ this many flows.
const DENSE_COUNTS: usize = 4096;

/// A flow's packets in a window, its slot in its count's list, and its representative.
#[derive(Clone, Copy, Debug)]
struct Counted<R> {
    packets: u32,
    slot: u32,
    rep: R,
}

impl<R: Copy> BurstCounters<R> {
    /// Counters reset every `window_ns` of trace time.
    pub fn new(window_ns: u64) -> BurstCounters<R> {
        BurstCounters {
            window_ns: window_ns.max(1),
            started_ns: None,
            counts: HashMap::new(),
            last: HashMap::new(),
            by_count: vec![Vec::new()],
            top_count: 0,
            above: Vec::new(),
        }
    }

    fn roll(&mut self, now_ns: u64) {
        let start = *self.started_ns.get_or_insert(now_ns);
        if now_ns >= start + self.window_ns {
            let windows = (now_ns - start) / self.window_ns;
            std::mem::swap(&mut self.last, &mut self.counts);
            if windows > 1 {
                self.last.clear();
            }
            self.counts.clear();
            for list in &mut self.by_count[..=self.top_count] {
                list.clear();
            }
            self.top_count = 0;
            self.above.clear();
            self.started_ns = Some(start + windows * self.window_ns);
        }
    }

    /// Counts a packet of `flow` at `now_ns` (non-decreasing); `rep` makes its representative
    /// if the flow is new to the window (only then: it may copy a whole packet key).
    #[inline]
    pub fn count(&mut self, flow: FlowId, now_ns: u64, rep: impl FnOnce() -> R) {
        self.roll(now_ns);
        let c = self.counts.entry(flow).or_insert_with(|| Counted { packets: 0, slot: 0, rep: rep() });
        let (was, slot) = (c.packets as usize, c.slot as usize);
        c.packets = c.packets.saturating_add(1);
        let now = was + 1;
        if now > DENSE_COUNTS + 1 {
            // Already in `above`, where it stays.
            return;
        }
        if now == DENSE_COUNTS + 1 {
            c.slot = self.above.len() as u32;
            self.above.push(flow);
        } else {
            if self.by_count.len() <= now {
                self.by_count.push(Vec::new());
            }
            c.slot = self.by_count[now].len() as u32;
            self.by_count[now].push(flow);
            self.top_count = self.top_count.max(now);
        }
        if was > 0 {
            let list = &mut self.by_count[was];
            list.swap_remove(slot);
            if let Some(&moved) = list.get(slot) {
                self.counts.get_mut(&moved).expect("a listed flow is counted").slot = slot as u32;
            }
        }
    }

    /// Flows counted in the window under way and the last complete one.
    pub fn flows(&self) -> usize {
        self.counts.len() + self.last.len()
    }

    /// Packets per second of `flow` at `now_ns`: its count in the window under way, or in
    /// the last complete one if that is larger (a burst that just ended still counts).
    pub fn rate(&mut self, flow: FlowId, now_ns: u64) -> f64 {
        self.roll(now_ns);
        let count = |m: &HashMap<FlowId, Counted<R>>| m.get(&flow).map_or(0, |c| c.packets);
        count(&self.counts).max(count(&self.last)) as f64 * 1e9 / self.window_ns as f64
    }

    /// The flow with the most packets in the window under way at `now_ns` among those `keep`
    /// accepts (ties by flow), with its rate over the window so far (at least `min_span_ns`:
    /// one packet just after a reset is no high rate) and its representative. The paper's
    /// event-driven check (§3.3): counters reset every window, so a burst that ended before
    /// the reset no longer outranks the one filling the ring now. Walks the counts from the
    /// top and stops at the first that has a flow `keep` accepts; no allocation; `keep` (a
    /// lookup in the NIC's table, live) is asked only of flows that would beat the best kept
    /// so far.
    pub fn fastest_in_window(
        &mut self,
        now_ns: u64,
        min_span_ns: u64,
        mut keep: impl FnMut(FlowId, &R) -> bool,
    ) -> Option<(FlowId, f64, R)> {
        self.roll(now_ns);
        // Any flow above the lists outranks every flow in them.
        let mut best: Option<(usize, FlowId)> = None;
        for &f in &self.above {
            let n = self.counts[&f].packets as usize;
            if best.is_none_or(|(m, g)| n > m || (n == m && f < g)) && keep(f, &self.counts[&f].rep) {
                best = Some((n, f));
            }
        }
        let (count, flow) = best.or_else(|| {
            (1..=self.top_count).rev().find_map(|n| {
                let mut best: Option<FlowId> = None;
                for &f in &self.by_count[n] {
                    if best.is_none_or(|g| f < g) && keep(f, &self.counts[&f].rep) {
                        best = Some(f);
                    }
                }
                best.map(|f| (n, f))
            })
        })?;
        let elapsed = now_ns.saturating_sub(self.started_ns.unwrap_or(now_ns)).max(min_span_ns).max(1);
        Some((flow, count as f64 * 1e9 / elapsed as f64, self.counts[&flow].rep))
    }

    /// The `n` flows with the highest rates at `now_ns`, highest first (ties by flow), with
    /// their representatives.
    pub fn top(&mut self, n: usize, now_ns: u64) -> Vec<(FlowId, f64, R)> {
        self.roll(now_ns);
        let last = |f: &FlowId| self.last.get(f).map_or(0, |c| c.packets);
        let mut all: Vec<(FlowId, u32, R)> =
            self.counts.iter().map(|(f, c)| (*f, c.packets.max(last(f)), c.rep)).collect();
        all.extend(
            self.last
                .iter()
                .filter(|(f, _)| !self.counts.contains_key(*f))
                .map(|(f, c)| (*f, c.packets, c.rep)),
        );
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(n);
        let per_s = 1e9 / self.window_ns as f64;
        all.into_iter().map(|(f, c, r)| (f, c as f64 * per_s, r)).collect()
    }
}
