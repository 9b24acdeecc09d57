//! Traffic measurement: which flows are large *now* (FastKeeper, Elixir §3.2–3.3).
//!
//! Offload policies put the flows that carry the most traffic in the NIC's small tables, so
//! they need the top-k flows by rate in a recent window, cheaply and continuously. Every
//! detector here implements [`Detector`]; a [`Monitor`] feeds it packets, slides its window
//! and asks for reports; [`exact::ExactWindow`] computes the true answer from the same stream
//! for evaluation.
//!
//! **Windows.** A window of W is cut into blocks of b (W a multiple of b, in trace time or in
//! packets). Block boundaries fall at t0 + n·b, t0 being the first packet's timestamp (or
//! every b packets). The report at boundary t covers the packets with timestamps in
//! [t − W, t); its counts are packets in that window (a rate is count / W). Protocol at each
//! boundary: [`Detector::top`] reports the window that ends there, then
//! [`Detector::end_block`] slides it by one block.
//!
//! **Memory.** Every detector is sized from a byte budget and reports the bytes its counters,
//! fingerprints and heap actually occupy ([`Detector::memory_bytes`]), heap index included.
//!
//! **Sliding vs tumbling.** FastKeeper, its bitmap variant, Sliding HeavyKeeper, Elixir and
//! WCSS slide their windows by design. Count-Min, HeavyKeeper, Space-Saving, Lossy Counting and UnivMon count
//! from a start: here they restart every W (aligned at t0), the usual way to get periodic
//! reports from them, so a report in the middle of their period covers less than W.

pub mod count_min;
pub mod elixir_identification;
pub mod exact;
pub mod fastkeeper;
pub mod flow_id;
pub mod flow_table;
pub mod heap;
pub mod heavykeeper;
pub mod lossy;
pub mod sliding_heavykeeper;
pub mod space_saving;
pub mod univmon;
pub mod wcss;

use fastkeeper::Extensions;
pub use flow_id::{FlowId, KeySpec, KeySpecError};

use crate::invalid_param::{CarriesInvalidParam, InvalidParam};
use crate::packet::FlowKey;

/// A real-time large-flow detector.
pub trait Detector {
    /// Counts one packet of `flow`; `hash` is `flow.hash(seed)` with the seed of the
    /// detector's [`DetectorConfig`] (a [`Monitor`] computes it once per packet).
    fn insert(&mut self, flow: FlowId, hash: u128);
    /// The largest flows of the window ending now (at most k, count > 0), largest first,
    /// with their estimated packet counts, into `out`.
    fn top(&mut self, out: &mut Vec<(FlowId, u64)>);
    /// The estimated packets of `flow` in the window so far (unscaled by sampling).
    fn estimate(&self, flow: FlowId, hash: u128) -> u64;
    /// Closes the current block: the window slides by one block.
    fn end_block(&mut self);
    /// Bytes of state held.
    fn memory_bytes(&self) -> usize;
    /// Flows held as candidates for the report (heap, summary or table entries): when a
    /// report names fewer than k flows, this tells whether the detector saw fewer flows
    /// (held < k) or holds flows whose window estimates are 0.
    fn held(&self) -> usize;
    /// The seed of [`Detector::insert`]'s hashes (its config's): a [`Monitor`] hashes flows
    /// with it, so detectors that re-hash flows they hold agree with it by construction.
    fn hash_seed(&self) -> u64;
}

/// The detectors `hyflow topk` offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algo {
    /// FastKeeper with collision counters (Algorithms 1–3).
    FastKeeper,
    /// FastKeeper with bitmap voting and 16-bit block counters, and hyflow's extensions
    /// ([`fastkeeper::Extension`]).
    FastKeeperBitmap,
    /// FastKeeper with bitmap voting as §III-D and Algorithm 3 publish it.
    FastKeeperPaper,
    /// Ablation: `fastkeeper-bitmap` without one extension.
    FastKeeperBitmapWithout(fastkeeper::Extension),
    /// Ablation: `fastkeeper-paper` with one extension.
    FastKeeperPaperWith(fastkeeper::Extension),
    /// Count-Min sketch + min-heap.
    CountMin,
    /// HeavyKeeper (exponential decay, b = 1.08) + min-heap.
    HeavyKeeper,
    /// Sliding HeavyKeeper (Sliding Sketches, KDD 2020) + min-heap.
    SlidingHeavyKeeper,
    /// Space-Saving (Stream-Summary).
    SpaceSaving,
    /// Elixir's sampled large-flow identifier (sub-window count-min arrays + heap).
    Elixir,
    /// Lossy Counting.
    Lossy,
    /// Window Compact Space-Saving (sliding window).
    Wcss,
    /// UnivMon (level 0's heavy hitters).
    UnivMon,
}

impl Algo {
    /// All, in the order tables list them.
    pub const ALL: [Algo; 11] = [
        Algo::FastKeeperBitmap,
        Algo::FastKeeperPaper,
        Algo::FastKeeper,
        Algo::SlidingHeavyKeeper,
        Algo::Elixir,
        Algo::Wcss,
        Algo::HeavyKeeper,
        Algo::CountMin,
        Algo::UnivMon,
        Algo::SpaceSaving,
        Algo::Lossy,
    ];

    /// The ablation of FastKeeper's extensions: `fastkeeper-bitmap` without each, then
    /// `fastkeeper-paper` with each (accepted by name, not in [`Algo::ALL`]).
    pub const ABLATION: [Algo; 8] = {
        use fastkeeper::Extension::*;
        [
            Algo::FastKeeperBitmapWithout(Guard),
            Algo::FastKeeperBitmapWithout(Burst),
            Algo::FastKeeperBitmapWithout(Weight),
            Algo::FastKeeperBitmapWithout(Refresh),
            Algo::FastKeeperPaperWith(Guard),
            Algo::FastKeeperPaperWith(Burst),
            Algo::FastKeeperPaperWith(Weight),
            Algo::FastKeeperPaperWith(Refresh),
        ]
    };

    /// Command-line name.
    pub fn name(self) -> &'static str {
        use fastkeeper::Extension::*;
        match self {
            Algo::FastKeeper => "fastkeeper",
            Algo::FastKeeperBitmap => "fastkeeper-bitmap",
            Algo::FastKeeperPaper => "fastkeeper-paper",
            Algo::FastKeeperBitmapWithout(Guard) => "fastkeeper-bitmap-no-guard",
            Algo::FastKeeperBitmapWithout(Burst) => "fastkeeper-bitmap-no-burst",
            Algo::FastKeeperBitmapWithout(Weight) => "fastkeeper-bitmap-no-weight",
            Algo::FastKeeperBitmapWithout(Refresh) => "fastkeeper-bitmap-no-refresh",
            Algo::FastKeeperPaperWith(Guard) => "fastkeeper-paper+guard",
            Algo::FastKeeperPaperWith(Burst) => "fastkeeper-paper+burst",
            Algo::FastKeeperPaperWith(Weight) => "fastkeeper-paper+weight",
            Algo::FastKeeperPaperWith(Refresh) => "fastkeeper-paper+refresh",
            Algo::CountMin => "cm",
            Algo::HeavyKeeper => "heavykeeper",
            Algo::SlidingHeavyKeeper => "sl-hk",
            Algo::SpaceSaving => "spacesaving",
            Algo::Elixir => "elixir",
            Algo::Lossy => "lossy",
            Algo::Wcss => "wcss",
            Algo::UnivMon => "univmon",
        }
    }

    /// The algorithm called `name`.
    pub fn from_name(name: &str) -> Option<Algo> {
        Algo::ALL.into_iter().chain(Algo::ABLATION).find(|a| a.name() == name)
    }
}

/// Largest byte budget a detector may be given: detectors allocate it up front.
pub(crate) const MAX_MEMORY: usize = 1 << 30;

/// How a detector is sized and windowed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DetectorConfig {
    /// Flows reported.
    pub k: usize,
    /// Byte budget.
    pub memory: usize,
    /// Blocks per window (W / b).
    pub blocks: usize,
    /// Sampling rate in (0, 1]: the fraction of packets (FastKeeper: of row updates) counted;
    /// estimates are scaled back by 1 / rate.
    pub sample: f64,
    /// Seed of hashes and sampling.
    pub seed: u64,
    /// Bits of the flow key ([`KeySpec::bits`]): detectors store the ids they report packed
    /// at this width, and charge it to the budget.
    pub key_bits: u32,
}

/// Why a detector cannot be built: always a parameter out of range.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigError {
    /// The budget does not hold the heap plus one bucket per row.
    TooSmall {
        /// Algorithm.
        algo: &'static str,
        /// Budget given.
        memory: usize,
        /// Smallest budget that works.
        needed: usize,
        /// k.
        k: usize,
    },
    /// k = 0.
    ZeroK,
    /// A budget beyond what a detector may allocate.
    MemoryTooLarge(usize),
    /// Sampling rate outside (0, 1].
    BadSample(f64),
    /// Window shorter than a block, not a multiple of it, or zero.
    BadWindow(InvalidParam),
}

impl ConfigError {
    /// The parameter at fault and what is wrong with it.
    fn as_param(&self) -> InvalidParam {
        match self {
            ConfigError::TooSmall { algo, memory, needed, k } => InvalidParam::new(
                "memory",
                format!("{memory} B is too small for {algo}: it needs at least {needed} B (k = {k})"),
            ),
            ConfigError::ZeroK => InvalidParam::new("k", "must be at least 1"),
            ConfigError::MemoryTooLarge(memory) => InvalidParam::new(
                "memory",
                format!(
                    "{memory} B: at most {MAX_MEMORY} B (1 GiB; the papers' detectors take 10 KB to 1 MB)"
                ),
            ),
            ConfigError::BadSample(rate) => {
                InvalidParam::new("sample", format!("must be in (0, 1], got {rate}"))
            }
            ConfigError::BadWindow(p) => p.clone(),
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_param().fmt(f)
    }
}

impl std::error::Error for ConfigError {}

impl CarriesInvalidParam for ConfigError {
    fn invalid_param(&self) -> Option<InvalidParam> {
        Some(self.as_param())
    }
}

impl DetectorConfig {
    fn check(&self) -> Result<(), ConfigError> {
        if self.k == 0 {
            return Err(ConfigError::ZeroK);
        }
        if self.memory > MAX_MEMORY {
            return Err(ConfigError::MemoryTooLarge(self.memory));
        }
        if !(self.sample > 0.0 && self.sample <= 1.0) {
            return Err(ConfigError::BadSample(self.sample));
        }
        if self.blocks == 0 {
            return Err(ConfigError::BadWindow(InvalidParam::new("window", "must hold at least one block")));
        }
        Ok(())
    }

    /// Buckets per row for `rows` rows of `bucket` bytes beside a heap of k, or the error
    /// saying how much memory one bucket per row needs.
    fn width(&self, algo: Algo, rows: usize, bucket: usize) -> Result<usize, ConfigError> {
        let fixed = heap::TopHeap::bytes_for_key(self.k, self.key_bits);
        let w = self.memory.saturating_sub(fixed) / (rows * bucket);
        if w == 0 {
            return Err(ConfigError::TooSmall {
                algo: algo.name(),
                memory: self.memory,
                needed: fixed + rows * bucket,
                k: self.k,
            });
        }
        Ok(w)
    }
}

impl DetectorConfig {
    /// The most entries m (at least k) whose structures, `bytes(m)` bytes, fit the budget —
    /// for the counter-based detectors, whose size is a number of entries.
    fn entries(&self, algo: Algo, bytes: impl Fn(usize) -> usize) -> Result<usize, ConfigError> {
        let needed = bytes(self.k);
        if needed > self.memory {
            return Err(ConfigError::TooSmall { algo: algo.name(), memory: self.memory, needed, k: self.k });
        }
        // Every entry takes at least 8 bytes.
        let (mut lo, mut hi) = (self.k, (self.memory / 8).max(self.k) + 1);
        while lo + 1 < hi {
            let mid = lo + (hi - lo) / 2;
            if bytes(mid) <= self.memory {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }
}

/// Keeps the `k` largest of `out` (ties by flow id), largest first.
pub(crate) fn keep_top(out: &mut Vec<(FlowId, u64)>, k: usize) {
    let order = |a: &(FlowId, u64), b: &(FlowId, u64)| b.1.cmp(&a.1).then(a.0.cmp(&b.0));
    if out.len() > k && k > 0 {
        out.select_nth_unstable_by(k - 1, order);
        out.truncate(k);
    }
    out.sort_unstable_by(order);
}

/// Builds a detector. FastKeeper samples its row updates itself; the others are fed a
/// sampled stream ([`Sampled`]) when the rate is below 1.
pub fn build(algo: Algo, config: &DetectorConfig) -> Result<Box<dyn Detector>, ConfigError> {
    config.check()?;
    fn sampled(d: impl Detector + 'static, config: &DetectorConfig) -> Box<dyn Detector> {
        if config.sample < 1.0 {
            Box::new(Sampled::new(d, config.sample, config.seed))
        } else {
            Box::new(d)
        }
    }
    Ok(match algo {
        Algo::FastKeeper => Box::new(fastkeeper::FastKeeper::new(config)?),
        Algo::FastKeeperBitmap => fastkeeper::build_bitmap(config, Extensions::ALL)?,
        Algo::FastKeeperPaper => fastkeeper::build_bitmap(config, Extensions::NONE)?,
        Algo::FastKeeperBitmapWithout(e) => fastkeeper::build_bitmap(config, Extensions::ALL.without(e))?,
        Algo::FastKeeperPaperWith(e) => fastkeeper::build_bitmap(config, Extensions::NONE.with(e))?,
        Algo::CountMin => sampled(count_min::CountMin::new(config)?, config),
        Algo::HeavyKeeper => sampled(heavykeeper::HeavyKeeper::new(config)?, config),
        Algo::SlidingHeavyKeeper => sampled(sliding_heavykeeper::SlidingHeavyKeeper::new(config)?, config),
        Algo::SpaceSaving => sampled(space_saving::SpaceSaving::new(config)?, config),
        Algo::Elixir => sampled(elixir_identification::ElixirLarge::new(config)?, config),
        Algo::Lossy => sampled(lossy::LossyCounting::new(config)?, config),
        Algo::Wcss => sampled(wcss::Wcss::new(config)?, config),
        Algo::UnivMon => sampled(univmon::UnivMon::new(config)?, config),
    })
}

/// A detector fed only a sampled fraction of the packets, its estimates scaled back.
pub struct Sampled<D> {
    inner: D,
    sampler: Sampler,
    scale: f64,
}

impl<D: Detector> Sampled<D> {
    /// `inner` sees each packet with probability `rate`.
    pub(crate) fn new(inner: D, rate: f64, seed: u64) -> Sampled<D> {
        Sampled { inner, sampler: Sampler::new(rate, seed ^ 0x5a5a_5a5a), scale: 1.0 / rate }
    }
}

impl<D: Detector> Detector for Sampled<D> {
    #[inline]
    fn insert(&mut self, flow: FlowId, hash: u128) {
        if self.sampler.keep() {
            self.inner.insert(flow, hash);
        }
    }
    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        self.inner.top(out);
        for e in out.iter_mut() {
            e.1 = (e.1 as f64 * self.scale).round() as u64;
        }
    }
    fn estimate(&self, flow: FlowId, hash: u128) -> u64 {
        self.inner.estimate(flow, hash)
    }
    fn end_block(&mut self) {
        self.inner.end_block()
    }
    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }
    fn held(&self) -> usize {
        self.inner.held()
    }
    fn hash_seed(&self) -> u64 {
        self.inner.hash_seed()
    }
}

/// A detector scored against the exact window at every boundary where the window is full.
pub(crate) struct Scored<D> {
    inner: D,
    exact: exact::ExactWindow,
    k: usize,
    blocks: usize,
    closed: usize,
    /// The accumulated score.
    pub score: exact::Score,
}

impl<D: Detector> Scored<D> {
    /// Scores `inner`'s top-`k` over windows of `blocks` blocks.
    pub(crate) fn new(inner: D, k: usize, blocks: usize) -> Scored<D> {
        Scored {
            inner,
            exact: exact::ExactWindow::new(k, blocks),
            k,
            blocks,
            closed: 0,
            score: Default::default(),
        }
    }

    /// The detector scored.
    pub(crate) fn inner(&self) -> &D {
        &self.inner
    }
}

impl<D: Detector> Detector for Scored<D> {
    #[inline]
    fn insert(&mut self, flow: FlowId, hash: u128) {
        self.exact.insert(flow, hash);
        self.inner.insert(flow, hash);
    }
    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        self.inner.top(out);
        if self.closed + 1 >= self.blocks {
            self.score.add(out, &self.exact, self.k);
        }
    }
    fn estimate(&self, flow: FlowId, hash: u128) -> u64 {
        self.inner.estimate(flow, hash)
    }
    fn end_block(&mut self) {
        self.closed += 1;
        self.exact.end_block();
        self.inner.end_block();
    }
    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }
    fn held(&self) -> usize {
        self.inner.held()
    }
    fn hash_seed(&self) -> u64 {
        self.inner.hash_seed()
    }
}

/// Counts blocks for detectors that restart every window.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tumbling {
    blocks: usize,
    since: usize,
}

impl Tumbling {
    pub(crate) fn new(blocks: usize) -> Tumbling {
        Tumbling { blocks, since: 0 }
    }

    /// Counts a closed block; true when a window has passed and the counts restart.
    pub(crate) fn end_block(&mut self) -> bool {
        self.since += 1;
        if self.since == self.blocks {
            self.since = 0;
            true
        } else {
            false
        }
    }
}

/// A fast seeded generator for per-packet sampling decisions (xorshift64*).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sampler {
    state: u64,
    threshold: u64,
}

impl Sampler {
    /// Keeps a fraction `rate` of what it is asked about.
    pub(crate) fn new(rate: f64, seed: u64) -> Sampler {
        let threshold = if rate >= 1.0 { u64::MAX } else { (rate * u64::MAX as f64) as u64 };
        Sampler { state: seed | 1, threshold }
    }

    /// Whether to count this one.
    #[inline]
    pub(crate) fn keep(&mut self) -> bool {
        self.threshold == u64::MAX || self.draw() < self.threshold
    }

    /// A uniform 64-bit draw.
    #[inline]
    pub(crate) fn draw(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Row `j`'s bucket for a flow hash among `w` (double hashing over the 128-bit hash, reduced
/// by multiply-shift).
#[inline]
pub(crate) fn bucket_of(hash: u128, j: usize, w: usize) -> usize {
    let (h1, h2) = (hash as u64, (hash >> 64) as u64 | 1);
    let h = h1.wrapping_add((j as u64).wrapping_mul(h2)).rotate_left(17 * j as u32);
    ((h as u128 * w as u128) >> 64) as usize
}

/// A 32-bit fingerprint, never 0 (0 marks an empty bucket). 32 bits, not the usual 16: with
/// 16, a mouse sharing a bucket and fingerprint with a heavy flow was reported with the heavy
/// flow's count often enough to show in precision at 20,000 flows per window.
#[inline]
pub(crate) fn fingerprint(hash: u128) -> u32 {
    ((hash >> 96) as u32).max(1)
}

/// Window and block lengths, in nanoseconds of trace time or in packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    /// Trace time.
    Nanos(u64),
    /// Packet count.
    Packets(u64),
}

impl Span {
    /// Parses `5s`, `500ms`, `250us`, `100ns` or `258000pkts`.
    pub fn parse(text: &str) -> Result<Span, String> {
        let t = text.trim();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let v: f64 = num
            .parse()
            .map_err(|_| format!("'{text}': expected a number with a unit (5s, 500ms, 258000pkts)"))?;
        if v <= 0.0 || !v.is_finite() {
            return Err(format!("'{text}': must be positive"));
        }
        let scale = match unit {
            "s" => 1e9,
            "ms" => 1e6,
            "us" => 1e3,
            "ns" => 1.0,
            "pkts" | "p" => {
                if v.fract() != 0.0 {
                    return Err(format!("'{text}': a packet count must be whole"));
                }
                return Ok(Span::Packets(v as u64));
            }
            _ => return Err(format!("'{text}': unknown unit '{unit}' (s, ms, us, ns or pkts)")),
        };
        let ns = (v * scale).round() as u64;
        if ns == 0 {
            return Err(format!("'{text}': shorter than a nanosecond"));
        }
        Ok(Span::Nanos(ns))
    }

    /// Blocks per window, checking that both are in one unit and the window is a whole
    /// number of blocks.
    pub fn blocks(window: Span, block: Span) -> Result<usize, ConfigError> {
        let (w, b) = match (window, block) {
            (Span::Nanos(w), Span::Nanos(b)) | (Span::Packets(w), Span::Packets(b)) => (w, b),
            _ => {
                return Err(ConfigError::BadWindow(InvalidParam::new(
                    "window",
                    "and `block` must both be times or both packet counts",
                )))
            }
        };
        if b > w {
            return Err(ConfigError::BadWindow(InvalidParam::new(
                "block",
                "must not be longer than `window`",
            )));
        }
        if w % b != 0 {
            return Err(ConfigError::BadWindow(InvalidParam::new(
                "window",
                "must be a whole number of blocks",
            )));
        }
        Ok((w / b) as usize)
    }
}

/// A block boundary: when it fell and how many packets came before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Boundary {
    /// Nanoseconds since the first packet (t − t0); with packet windows, the time of the
    /// first packet after the boundary (or of the last packet, at the end).
    pub t_ns: u64,
    /// Packets before the boundary.
    pub packets: u64,
    /// Flows the detector held when it reported ([`Detector::held`]).
    pub held: usize,
}

/// Drives a detector over a packet stream: extracts flow ids, finds block boundaries and
/// collects the reports.
pub struct Monitor<D> {
    detector: D,
    spec: KeySpec,
    block: Span,
    seed: u64,
    /// Packets whose key fields are absent (e.g. non-IP under a 5-tuple key): not counted.
    pub keyless: u64,
    t0: Option<u64>,
    /// Next boundary: ns since t0, or packet count.
    next: u64,
    packets: u64,
    last_t: u64,
    top: Vec<(FlowId, u64)>,
}

impl<D: Detector> Monitor<D> {
    /// A monitor over `detector`, hashing flows with its seed.
    pub fn new(detector: D, spec: KeySpec, block: Span) -> Monitor<D> {
        let seed = detector.hash_seed();
        let first = match block {
            Span::Nanos(b) | Span::Packets(b) => b,
        };
        Monitor {
            detector,
            spec,
            block,
            seed,
            keyless: 0,
            t0: None,
            next: first,
            packets: 0,
            last_t: 0,
            top: Vec::new(),
        }
    }

    /// The detector.
    pub fn detector(&self) -> &D {
        &self.detector
    }

    /// Packets seen.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    fn boundary(&mut self, t_ns: u64, report: &mut impl FnMut(Boundary, &[(FlowId, u64)])) {
        self.detector.top(&mut self.top);
        let at = Boundary { t_ns, packets: self.packets, held: self.detector.held() };
        report(at, &self.top);
        self.detector.end_block();
    }

    /// One packet at `ts_ns` (non-decreasing); reports every boundary it passes first.
    #[inline]
    pub fn packet(&mut self, ts_ns: u64, key: &FlowKey, report: &mut impl FnMut(Boundary, &[(FlowId, u64)])) {
        let flow = self.spec.flow_id(key);
        self.flow(ts_ns, flow, report);
    }

    /// [`Monitor::packet`] for a flow id already extracted (`None`: the packet lacks the key
    /// fields; it still advances time).
    #[inline]
    pub fn flow(
        &mut self,
        ts_ns: u64,
        flow: Option<FlowId>,
        report: &mut impl FnMut(Boundary, &[(FlowId, u64)]),
    ) {
        let t0 = *self.t0.get_or_insert(ts_ns);
        let t = ts_ns.saturating_sub(t0).max(self.last_t);
        self.last_t = t;
        match self.block {
            Span::Nanos(b) => {
                while t >= self.next {
                    self.boundary(self.next, report);
                    self.next += b;
                }
            }
            Span::Packets(b) => {
                if self.packets == self.next {
                    self.boundary(t, report);
                    self.next += b;
                }
            }
        }
        self.packets += 1;
        match flow {
            Some(flow) => self.detector.insert(flow, flow.hash(self.seed)),
            None => self.keyless += 1,
        }
    }

    /// Ends the stream: reports the boundary that closes the last (partial) block.
    pub fn finish(&mut self, report: &mut impl FnMut(Boundary, &[(FlowId, u64)])) {
        if self.t0.is_none() {
            return;
        }
        let t_ns = match self.block {
            Span::Nanos(_) => self.next,
            Span::Packets(_) => self.last_t,
        };
        self.boundary(t_ns, report);
    }
}

impl Detector for Box<dyn Detector> {
    fn insert(&mut self, flow: FlowId, hash: u128) {
        (**self).insert(flow, hash)
    }
    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        (**self).top(out)
    }
    fn estimate(&self, flow: FlowId, hash: u128) -> u64 {
        (**self).estimate(flow, hash)
    }
    fn end_block(&mut self) {
        (**self).end_block()
    }
    fn memory_bytes(&self) -> usize {
        (**self).memory_bytes()
    }
    fn held(&self) -> usize {
        (**self).held()
    }
    fn hash_seed(&self) -> u64 {
        (**self).hash_seed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_parse_and_windows_divide() {
        assert_eq!(Span::parse("5s"), Ok(Span::Nanos(5_000_000_000)));
        assert_eq!(Span::parse("1.5ms"), Ok(Span::Nanos(1_500_000)));
        assert_eq!(Span::parse("258000pkts"), Ok(Span::Packets(258_000)));
        assert!(Span::parse("5").unwrap_err().contains("unknown unit"));
        assert!(Span::parse("0s").unwrap_err().contains("positive"));
        assert!(Span::parse("x").is_err());
        let s = |t| Span::parse(t).unwrap();
        assert_eq!(Span::blocks(s("5s"), s("1s")), Ok(5));
        assert!(
            matches!(Span::blocks(s("1s"), s("5s")), Err(ConfigError::BadWindow(m)) if m.message.contains("longer"))
        );
        assert!(
            matches!(Span::blocks(s("5s"), s("2s")), Err(ConfigError::BadWindow(m)) if m.message.contains("whole"))
        );
        assert!(Span::blocks(s("5s"), s("10pkts")).is_err());
    }

    #[test]
    fn boundaries_fall_at_t0_plus_multiples_of_the_block() {
        struct Log(Vec<u32>, u32);
        impl Detector for Log {
            fn insert(&mut self, _: FlowId, _: u128) {
                self.1 += 1;
            }
            fn top(&mut self, _: &mut Vec<(FlowId, u64)>) {
                self.0.push(self.1);
            }
            fn estimate(&self, _: FlowId, _: u128) -> u64 {
                0
            }
            fn end_block(&mut self) {
                self.1 = 0;
            }
            fn memory_bytes(&self) -> usize {
                0
            }
            fn held(&self) -> usize {
                0
            }
            fn hash_seed(&self) -> u64 {
                1
            }
        }
        let mut m = Monitor::new(Log(Vec::new(), 0), KeySpec::five_tuple(), Span::Nanos(10));
        let mut at = Vec::new();
        let k = crate::openflow::parse_packet("udp,nw_src=1.2.3.4").unwrap();
        for ts in [100, 105, 109, 110, 135, 136] {
            m.packet(ts, &k, &mut |b, _| at.push((b.t_ns, b.packets)));
        }
        m.finish(&mut |b, _| at.push((b.t_ns, b.packets)));
        // Blocks [0,10) [10,20) [20,30) [30,40): an empty block still reports.
        assert_eq!(at, [(10, 3), (20, 4), (30, 4), (40, 6)]);
        assert_eq!(m.detector().0, [3, 1, 0, 2]);
    }
}
