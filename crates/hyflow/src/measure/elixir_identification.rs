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
use crate::flow_number_table::FlowNumberTable;

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
///
/// Flows live in flat arrays under a dense index each, their counts stamped with the window
/// they belong to: a packet costs one hash (its flow's index; none when the input numbers its
/// flows, whose numbers lead to the index through an array) and touches 24 bytes of counts, a
/// flow moving between count lists is found by index, and a window's end clears nothing but
/// the lists. (Maps keyed by flow, each entry carrying its representative, cost a host-bound
/// packet two hashed lookups into entries of hundreds of bytes, and cleared and refilled
/// both maps every window: Elixir's software path took 430 instructions a host packet besides
/// identification, 220 now.) At a window's end, once the arrays hold more than twice the last
/// window's flows and 4,096 more, only the last window's flows are kept: memory
/// follows the flows of the last few windows, not every flow ever seen.
#[derive(Clone, Debug)]
pub struct BurstCounters<R = ()> {
    window_ns: u64,
    started_ns: Option<u64>,
    /// Windows ended since the first packet: counts stamped with it are the window under way's.
    window: u64,
    /// Each flow's index in the arrays.
    index_of: HashMap<FlowId, u32>,
    /// By the input's flow number, the index of that input flow's flow.
    by_input_number: FlowNumberTable<u32>,
    /// By index: the flow, its counts and its representative.
    flows: Vec<FlowId>,
    counts: Vec<Counted>,
    reps: Vec<R>,
    /// Flows counted in the window under way.
    current: usize,
    /// The indices of the flows of the last complete window.
    last: Vec<u32>,
    /// The window under way's flows by packet count, up to [`DENSE_COUNTS`] (index 0 unused).
    by_count: Vec<Vec<u32>>,
    /// The highest count of `by_count` holding a flow, or that had one in this window.
    top_count: usize,
    /// Flows with more than [`DENSE_COUNTS`] packets in the window under way.
    above: Vec<u32>,
    /// [`SPARE_FLOWS`] (lowered by tests, to compact small sets too).
    spare_flows: usize,
}

/// Counts kept as lists, one per count: a flow past this many packets in one window moves to
/// the unsorted `above`, which holds at most the window's packets ÷ this many flows.
const DENSE_COUNTS: usize = 4096;

/// Flows the arrays may hold beyond twice the last window's before they are compacted.
const SPARE_FLOWS: usize = 4096;

/// An input flow number whose flow's index is not known yet.
const NO_INDEX: u32 = u32::MAX;

/// A flow's packets in the window it was last counted in, its slot in its count's list there,
/// and its packets in the window before that one.
#[derive(Clone, Copy, Debug)]
struct Counted {
    window: u64,
    packets: u32,
    slot: u32,
    before: u32,
}

impl<R: Copy> BurstCounters<R> {
    /// Counters reset every `window_ns` of trace time.
    pub fn new(window_ns: u64) -> BurstCounters<R> {
        BurstCounters {
            window_ns: window_ns.max(1),
            started_ns: None,
            window: 0,
            index_of: HashMap::new(),
            by_input_number: FlowNumberTable::new(NO_INDEX),
            flows: Vec::new(),
            counts: Vec::new(),
            reps: Vec::new(),
            current: 0,
            last: Vec::new(),
            by_count: vec![Vec::new()],
            top_count: 0,
            above: Vec::new(),
            spare_flows: SPARE_FLOWS,
        }
    }

    fn roll(&mut self, now_ns: u64) {
        let start = *self.started_ns.get_or_insert(now_ns);
        if now_ns >= start + self.window_ns {
            let windows = (now_ns - start) / self.window_ns;
            // The window under way's flows are all in its lists.
            self.last.clear();
            if windows == 1 {
                self.last.extend(self.by_count[1..=self.top_count].iter().flatten());
                self.last.extend_from_slice(&self.above);
            }
            for list in &mut self.by_count[..=self.top_count] {
                list.clear();
            }
            self.top_count = 0;
            self.above.clear();
            self.current = 0;
            self.window += windows;
            self.started_ns = Some(start + windows * self.window_ns);
            if self.flows.len() > 2 * self.last.len() + self.spare_flows {
                self.compact();
            }
        }
    }

    /// Keeps only the last window's flows (the window under way has none yet), indexed anew.
    fn compact(&mut self) {
        self.index_of = HashMap::with_capacity(self.last.len());
        self.by_input_number.forget_all();
        let mut flows = Vec::with_capacity(self.last.len());
        let mut counts = Vec::with_capacity(self.last.len());
        let mut reps = Vec::with_capacity(self.last.len());
        for (new, old) in self.last.iter_mut().enumerate() {
            let i = *old as usize;
            self.index_of.insert(self.flows[i], new as u32);
            flows.push(self.flows[i]);
            counts.push(self.counts[i]);
            reps.push(self.reps[i]);
            *old = new as u32;
        }
        (self.flows, self.counts, self.reps) = (flows, counts, reps);
    }

    /// The packets of flow `i` in the window under way and in the last complete one.
    fn packets(&self, i: usize) -> (u32, u32) {
        let c = &self.counts[i];
        if c.window == self.window {
            (c.packets, c.before)
        } else if c.window.wrapping_add(1) == self.window {
            (0, c.packets)
        } else {
            (0, 0)
        }
    }

    /// Counts a packet of `flow` at `now_ns` (non-decreasing); `rep` makes its representative
    /// if the flow is new to the window (only then: it may copy a whole packet key).
    /// `input_number` is the packet's flow number in the input, if the input numbers flows
    /// (every packet of one number is of one flow): the flow is then found by it in an array,
    /// without hashing `flow`.
    #[inline]
    pub fn count(&mut self, flow: FlowId, input_number: Option<u32>, now_ns: u64, rep: impl FnOnce() -> R) {
        self.roll(now_ns);
        let window = self.window;
        let known = self.by_input_number.get(input_number);
        let found = known.or_else(|| self.index_of.get(&flow).copied());
        if known.is_none() {
            self.by_input_number.remember(input_number, found.unwrap_or(self.flows.len() as u32));
        }
        let i = match found {
            Some(i) => {
                debug_assert_eq!(self.flows[i as usize], flow, "one flow per input number");
                i as usize
            }
            None => {
                let i = self.flows.len();
                self.index_of.insert(flow, i as u32);
                self.flows.push(flow);
                // Stamped two windows back: nothing in this window or the last.
                self.counts.push(Counted { window: window.wrapping_sub(2), packets: 0, slot: 0, before: 0 });
                self.reps.push(rep());
                self.start_window(i, window);
                return self.counted(i, 0);
            }
        };
        if self.counts[i].window != window {
            self.reps[i] = rep();
            self.start_window(i, window);
        }
        let was = self.counts[i].packets as usize;
        self.counted(i, was);
    }

    /// Flow `i`'s first packet of the window under way: its last window's count kept if that
    /// was the one before.
    fn start_window(&mut self, i: usize, window: u64) {
        let c = &mut self.counts[i];
        c.before = if c.window.wrapping_add(1) == window { c.packets } else { 0 };
        c.window = window;
        c.packets = 0;
        self.current += 1;
    }

    /// Moves flow `i`, which had `was` packets in the window under way, up one count.
    fn counted(&mut self, i: usize, was: usize) {
        let c = &mut self.counts[i];
        c.packets = c.packets.saturating_add(1);
        let now = was + 1;
        if now > DENSE_COUNTS + 1 {
            // Already in `above`, where it stays.
            return;
        }
        let slot = c.slot as usize;
        if now == DENSE_COUNTS + 1 {
            c.slot = self.above.len() as u32;
            self.above.push(i as u32);
        } else {
            if self.by_count.len() <= now {
                self.by_count.push(Vec::new());
            }
            c.slot = self.by_count[now].len() as u32;
            self.by_count[now].push(i as u32);
            self.top_count = self.top_count.max(now);
        }
        if was > 0 {
            let list = &mut self.by_count[was];
            list.swap_remove(slot);
            if let Some(&moved) = list.get(slot) {
                self.counts[moved as usize].slot = slot as u32;
            }
        }
    }

    /// Flows counted in the window under way and the last complete one.
    pub fn flows(&self) -> usize {
        self.current + self.last.len()
    }

    /// Packets per second of `flow` at `now_ns`: its count in the window under way, or in
    /// the last complete one if that is larger (a burst that just ended still counts).
    pub fn rate(&mut self, flow: FlowId, now_ns: u64) -> f64 {
        self.roll(now_ns);
        let (now, last) = self.index_of.get(&flow).map_or((0, 0), |&i| self.packets(i as usize));
        now.max(last) as f64 * 1e9 / self.window_ns as f64
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
        let (flows, reps) = (&self.flows, &self.reps);
        // Any flow above the lists outranks every flow in them.
        let mut best: Option<(usize, u32)> = None;
        for &i in &self.above {
            let (n, f) = (self.counts[i as usize].packets as usize, flows[i as usize]);
            if best.is_none_or(|(m, g)| n > m || (n == m && f < flows[g as usize]))
                && keep(f, &reps[i as usize])
            {
                best = Some((n, i));
            }
        }
        let (count, i) = best.or_else(|| {
            (1..=self.top_count).rev().find_map(|n| {
                let mut best: Option<u32> = None;
                for &i in &self.by_count[n] {
                    let f = flows[i as usize];
                    if best.is_none_or(|g| f < flows[g as usize]) && keep(f, &reps[i as usize]) {
                        best = Some(i);
                    }
                }
                best.map(|i| (n, i))
            })
        })?;
        let elapsed = now_ns.saturating_sub(self.started_ns.unwrap_or(now_ns)).max(min_span_ns).max(1);
        Some((flows[i as usize], count as f64 * 1e9 / elapsed as f64, reps[i as usize]))
    }

    /// The `n` flows with the highest rates at `now_ns`, highest first (ties by flow), with
    /// their representatives.
    pub fn top(&mut self, n: usize, now_ns: u64) -> Vec<(FlowId, f64, R)> {
        self.roll(now_ns);
        // The window under way's flows (in its lists), and the last window's not among them.
        let current = self.by_count[1..=self.top_count].iter().flatten().chain(&self.above);
        let last_only = self.last.iter().filter(|&&i| self.packets(i as usize).0 == 0);
        let mut all: Vec<(FlowId, u32, R)> = current
            .chain(last_only)
            .map(|&i| {
                let (now, last) = self.packets(i as usize);
                (self.flows[i as usize], now.max(last), self.reps[i as usize])
            })
            .collect();
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(n);
        let per_s = 1e9 / self.window_ns as f64;
        all.into_iter().map(|(f, c, r)| (f, c as f64 * per_s, r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The counters as maps keyed by flow, each window's cleared at its end: what
    /// [`BurstCounters`] must answer.
    #[derive(Default)]
    struct Model {
        started: Option<u64>,
        now: HashMap<FlowId, (u32, u32)>,
        last: HashMap<FlowId, (u32, u32)>,
    }

    impl Model {
        fn roll(&mut self, t: u64) {
            let start = *self.started.get_or_insert(t);
            if t >= start + WINDOW {
                let windows = (t - start) / WINDOW;
                self.last = std::mem::take(&mut self.now);
                if windows > 1 {
                    self.last.clear();
                }
                self.started = Some(start + windows * WINDOW);
            }
        }

        fn top(&self) -> Vec<(FlowId, f64, u32)> {
            let per_s = 1e9 / WINDOW as f64;
            let last = |f: &FlowId| self.last.get(f).map_or(0, |c| c.0);
            let mut all: Vec<(FlowId, u32, u32)> =
                self.now.iter().map(|(f, c)| (*f, c.0.max(last(f)), c.1)).collect();
            all.extend(
                self.last.iter().filter(|(f, _)| !self.now.contains_key(*f)).map(|(f, c)| (*f, c.0, c.1)),
            );
            all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            all.into_iter().map(|(f, c, r)| (f, c as f64 * per_s, r)).collect()
        }
    }

    const WINDOW: u64 = 1_000;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Over random streams crossing one or several window ends (between packets, or when
        /// asked), with compaction at every chance or at the default threshold, and flows
        /// found by input number or by hash, the counters' rates, top flows (with their
        /// representatives), flow counts and fastest flow of the window equal the maps'.
        #[test]
        fn dense_counters_answer_as_maps_keyed_by_flow(
            packets in proptest::collection::vec(
                (0u128..40, prop_oneof![9 => 0u64..300, 1 => 900u64..3_500], 0u32..4, 0u64..1_500),
                1..400,
            ),
            spare in prop_oneof![Just(0usize), Just(SPARE_FLOWS)],
            numbered in 0u32..3,
        ) {
            let mut b: BurstCounters<u32> = BurstCounters::new(WINDOW);
            b.spare_flows = spare;
            let mut m = Model::default();
            let mut t = 0;
            for (i, &(f, gap, rep, later)) in packets.iter().enumerate() {
                t += gap;
                let flow = FlowId::from_u128(f);
                // Input numbers: none, or two per flow (keys differing outside the flow's
                // fields), on every packet or on some.
                let number = match numbered {
                    0 => None,
                    1 => Some(f as u32 * 2 + (i % 2) as u32),
                    _ => (i % 3 != 0).then_some(f as u32 * 2 + (i % 2) as u32),
                };
                b.count(flow, number, t, || rep);
                m.roll(t);
                m.now.entry(flow).or_insert((0, rep)).0 += 1;
                if i % 7 == 0 {
                    // Asked later than the packet: the question may end windows itself.
                    t += later;
                    m.roll(t);
                    let probe = FlowId::from_u128((i as u128 * 13) % 40);
                    let want = m.now.get(&probe).map_or(0, |c| c.0).max(m.last.get(&probe).map_or(0, |c| c.0));
                    prop_assert_eq!(b.rate(probe, t), want as f64 * 1e9 / WINDOW as f64);
                    prop_assert_eq!(b.top(usize::MAX, t), m.top());
                    prop_assert_eq!(b.flows(), m.now.len() + m.last.len());
                    let fastest = m
                        .now
                        .iter()
                        .max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.0.cmp(a.0)))
                        .map(|(f, &(_, r))| (*f, r));
                    prop_assert_eq!(b.fastest_in_window(t, 1, |_, _| true).map(|(f, _, r)| (f, r)), fastest);
                }
            }
        }
    }
}
