//! Elixir (§3): two replacement processes over an exact-match NIC table cut into a large-flow
//! area and a bursty area.
//!
//! **Periodic large-flow replacement** (§3.2, Algorithm 1). The NIC samples a share r of the
//! packets it forwards to the host (headers only); software samples its own packets at the
//! same rate, so both sides are ranked on equal terms. Samples feed [`ElixirLarge`]: N = ⌈L/T⌉
//! count-min arrays over sub-windows of the replacement window T (the oldest cleared at each
//! T; one array when L ≤ T), a min-heap of the largest flows and a Bloom filter of the
//! offloaded set. Every T the heap's flows become the large set: those the Bloom filter says
//! were not in the last set are installed in the large-flow area (a false positive leaves a
//! flow out until it drops from the set and comes back, as in the paper, which compares the
//! identified flows with the filter, §3.2; so does an entry the NIC lost to revalidation after
//! a rule update, or an install it refused), those that left it are evicted, and rebuilding the heap
//! costs the host k·log2(k) sketch-update costs for the k flows (22 ms for 50,000 with the
//! built-in costs; Elixir's implementation took about 10 ms, §4), or `heap_rebuild_ns`.
//!
//! **Event-driven bursty replacement** (§3.3, Algorithm 2). Software counts every packet it
//! forwards per flow over a short window (`burst_window_ns`), reset every window. When a
//! packet finds its core's ring at K or more, Elixir polls the bursty area's hardware counters
//! (within the NIC's read rate) and moves the software flow with the highest rate *on that
//! core* into the bursty area: into a free entry, or in place of the entry with the lowest
//! rate when the software flow's is higher. Rates are over the window under way: software's
//! count since the reset, hardware's since its counter was last read (at every window's end,
//! as far as the read rate allows), each over at least [`RECHECK_NS`] so that a packet or two
//! just after a reset or an install is no high rate. Choosing on the overflowing core is hyflow's reading of
//! Algorithm 2 for a multi-core host (the paper's queue is one ring): receive-side scaling
//! keeps a flow on one core, so only that core's flows can be filling its ring, and a faster
//! flow elsewhere would take the entry without relieving it. When steering sprays every
//! flow over the cores (`sim --steer spray`), the fastest software flow anywhere is chosen.
//! The two processes are independent (§3.3), so a move's changes are urgent: they go to the
//! NIC ahead of any queued large-flow replacement, and one move is in flight at a time: the
//! next check waits until the last change has had time to reach hardware (the urgent changes
//! drained at the update rate, plus the update latency),
//! and at least [`RECHECK_NS`] (1 ms) — the ring stays above K for a while after the right
//! flow has moved. Software keeps its counters in a heap, so a check costs the host a heap
//! lookup (log2 of the flows counted), not a sort.
//!
//! **K** = ring capacity − (t_identification + t_offloading) × NIC rate (the PFC-headroom
//! rule of §3.3). t_identification is the host work of one check as it is charged: comparing
//! each of the bursty area's counters (their reading is immediate while the read budget
//! lasts; it holds a second's worth) and a lookup in software's heap of counters, sized as
//! the large area, one `sample_ns` per counter and per heap level — 3.2 µs with the built-in
//! costs for 100 + 50,000 entries; t_offloading is the NIC's update latency; the NIC rate is
//! the packet rate the NIC can deliver into a ring (100 GbE of 64-byte frames by default).
//! With Elixir's 65,536-packet ring and 67 µs this gives 55,089, close to the 51k the paper
//! set on its ConnectX-5.
//!
//! A flow that is both large and bursty stays in whichever area took it first (§3.1).

use hashbrown::{HashMap, HashSet};

use std::sync::Arc;

use super::params::{
    check_sample_rate, Param, ParamKind, PolicyParams, PolicyRegistration, DEFAULT_BURSTY_ENTRIES,
    DEFAULT_LARGE_ENTRIES, EXACT_TABLE, REPLACEMENT_WINDOW,
};
use super::{
    Every, NicControl, OffloadPolicy, PolicyConfig, PolicyConfigError, PolicyFactory, PolicyFigures,
    PolicyMachine, PolicyReport, RunSpan, Seen,
};
use crate::cost_model::CostModel;
use crate::measure::elixir_identification::{BurstCounters, ElixirLarge};
use crate::measure::{Detector, DetectorConfig, FlowId, KeySpec, Sampler};
use crate::nic::exact_match::ExactMatchConfig;
use crate::nic::NicConfig;
use crate::packet::FlowKey;

/// Large-flow area.
pub const LARGE_AREA: u8 = 0;
/// Bursty area.
pub const BURSTY_AREA: u8 = 1;

/// Shortest time between two bursty-flow checks when the ring stays above K.
pub const RECHECK_NS: u64 = 1_000_000;

/// 100 GbE of minimal frames: 64 bytes plus 20 of preamble and gap per packet.
pub(crate) const NIC_LINE_RATE_PPS: f64 = 100e9 / (84.0 * 8.0);

/// Elixir's parameters (defaults: the paper's, §5.1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ElixirConfig {
    /// Entries of the large-flow area.
    pub large_entries: usize,
    /// Entries of the bursty area.
    pub bursty_entries: usize,
    /// Fields a flow is keyed by.
    pub key: KeySpec,
    /// Share r of packets sampled for large-flow identification, in (0, 1].
    pub sample_rate: f64,
    /// Identification window L, ns.
    pub identification_window_ns: u64,
    /// Replacement window T, ns.
    pub replacement_window_ns: u64,
    /// Window of the bursty-flow counters, ns.
    pub burst_window_ns: u64,
    /// Queue threshold K, packets; `None`: from the headroom rule.
    pub queue_threshold: Option<u64>,
    /// Packets per second the NIC can deliver into a ring (the headroom rule's rate).
    pub nic_rate_pps: f64,
    /// Host work of one heap rebuild, ns; `None`: k·log2(k) heap operations for the k flows
    /// of the large area, each costing a sketch update (`sample_ns`) — 22 ms for 50,000 with
    /// the built-in costs (Elixir measured about 10 ms), and scaled with a slower host's costs.
    pub heap_rebuild_ns: Option<u64>,
    /// Counters per row of each sub-window array.
    pub sketch_width: usize,
    /// Seed of hashes and sampling.
    pub seed: u64,
}

impl Default for ElixirConfig {
    fn default() -> Self {
        ElixirConfig {
            large_entries: DEFAULT_LARGE_ENTRIES,
            bursty_entries: DEFAULT_BURSTY_ENTRIES,
            key: KeySpec::five_tuple(),
            sample_rate: 0.2,
            identification_window_ns: 30_000_000_000,
            replacement_window_ns: 10_000_000_000,
            burst_window_ns: 1_000_000_000,
            queue_threshold: None,
            nic_rate_pps: NIC_LINE_RATE_PPS,
            heap_rebuild_ns: None,
            sketch_width: 1 << 18,
            seed: 1,
        }
    }
}

/// `elixir`.
pub(crate) const REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: "elixir",
    about: "Elixir: an exact-match table of large-entries + bursty-entries flows filled by sampled \
            large-flow replacement plus queue-triggered bursty offload; its work runs on the forwarding cores",
    params: &[
        EXACT_TABLE[0],
        EXACT_TABLE[1],
        EXACT_TABLE[2],
        Param {
            name: "identification-window",
            value_name: "SECONDS",
            help: "Identification window L, seconds: large flows are ranked over it [default: 30]",
            kind: ParamKind::Number,
        },
        REPLACEMENT_WINDOW,
        Param {
            name: "burst-window",
            value_name: "SECONDS",
            help: "Window of the per-flow counters that rank bursty flows, seconds [default: 1]",
            kind: ParamKind::Number,
        },
        Param {
            name: "queue-threshold",
            value_name: "PACKETS",
            help: "Queue threshold K, packets: a ring this full triggers a bursty-flow check [default: ring − \
                   (identification time + NIC update latency) × nic-rate; the identification time is a \
                   check's host work, a sketch-update cost per bursty counter and per heap level]",
            kind: ParamKind::Count,
        },
        Param {
            name: "nic-rate",
            value_name: "PPS",
            help: "Packets/s the NIC can deliver into a ring, for K's headroom [default: 148.8 M, 100 GbE of \
                   64-byte frames]",
            kind: ParamKind::Number,
        },
        Param {
            name: "heap-rebuild",
            value_name: "MS",
            help: "Host work of rebuilding the large-flow heap at each replacement, ms [default: k·log2 k sketch \
                   updates (`sample_ns`) for the k large-flow entries: 22 ms for 50,000 with the built-in costs; \
                   Elixir measured about 10]",
            kind: ParamKind::Number,
        },
    ],
    upcall_nic: None,
    configure,
};

fn configure(p: &PolicyParams) -> Result<PolicyConfig, PolicyConfigError> {
    let d = ElixirConfig::default();
    let heap_rebuild_ns = match p.number("heap-rebuild") {
        None => None,
        Some(ms) if ms.is_finite() && ms >= 0.0 => Some((ms * 1e6).round() as u64),
        Some(ms) => {
            return Err(PolicyConfigError::param("heap-rebuild", format!("must be ≥ 0 ms, not {ms}")))
        }
    };
    Ok(Arc::new(ElixirConfig {
        large_entries: p.count("large-entries").map_or(d.large_entries, |n| n as usize),
        bursty_entries: p.count("bursty-entries").map_or(d.bursty_entries, |n| n as usize),
        key: p.flow_key()?,
        sample_rate: p.sample_rate.unwrap_or(d.sample_rate),
        identification_window_ns: p.seconds_ns("identification-window", d.identification_window_ns)?,
        replacement_window_ns: p.seconds_ns(REPLACEMENT_WINDOW.name, d.replacement_window_ns)?,
        burst_window_ns: p.seconds_ns("burst-window", d.burst_window_ns)?,
        queue_threshold: p.count("queue-threshold"),
        nic_rate_pps: p.number("nic-rate").unwrap_or(NIC_LINE_RATE_PPS),
        heap_rebuild_ns,
        ..d
    }))
}

impl PolicyFactory for ElixirConfig {
    fn name(&self) -> &'static str {
        REGISTRATION.name
    }

    fn sample_rate(&self) -> f64 {
        self.sample_rate
    }

    fn check(&self, machine: &PolicyMachine) -> Result<(), PolicyConfigError> {
        self.check()?;
        self.threshold(machine.ring, self.headroom_ns(machine)).map(|_| ())
    }

    fn caveats(&self, run: &RunSpan) -> Vec<String> {
        let s = |ns: u64| ns as f64 / 1e9;
        if run.simulated_ns < self.replacement_window_ns {
            vec![format!(
                "elixir made no large-flow replacement: the run lasts {:.3} s of simulated time, less than \
                 `replacement-window` ({} s); only bursty flows reached the NIC (give a longer input or a shorter window)",
                s(run.simulated_ns),
                s(self.replacement_window_ns)
            )]
        } else if run.simulated_ns < self.identification_window_ns {
            vec![format!(
                "elixir identified large flows over less than one `identification-window` ({} s): the run lasts \
                 {:.3} s of simulated time",
                s(self.identification_window_ns),
                s(run.simulated_ns)
            )]
        } else {
            Vec::new()
        }
    }

    fn build(&self, machine: &PolicyMachine) -> Result<Box<dyn OffloadPolicy>, PolicyConfigError> {
        Ok(Box::new(Elixir::new(*self, machine)?))
    }
}

impl ElixirConfig {
    /// N = ⌈L/T⌉ sub-window arrays (one when L ≤ T: the window grows to T).
    pub fn arrays(&self) -> usize {
        self.identification_window_ns.div_ceil(self.replacement_window_ns.max(1)).max(1) as usize
    }

    /// t_identification: the host work of one bursty-flow check, ns — a `sample_ns` per
    /// bursty-area counter compared and per level of software's heap (sized as the large
    /// area).
    pub fn identification_ns(&self, costs: &CostModel) -> f64 {
        let heap_levels = (self.large_entries.max(2) as f64).log2().ceil();
        (self.bursty_entries as f64 + heap_levels) * costs.sample_ns
    }

    /// t_identification + t_offloading on `machine`, ns: from a ring's crossing of K to the
    /// moved flow's first packet forwarded by the NIC.
    pub fn headroom_ns(&self, machine: &PolicyMachine) -> u64 {
        (self.identification_ns(&machine.costs) + machine.limits.latency_ns as f64).ceil() as u64
    }

    /// K for a ring of `ring` packets when a move reaches hardware `headroom_ns` after the
    /// ring crosses K (t_identification + t_offloading): ring − headroom × NIC rate, or the
    /// threshold given. Checked: in 1..=ring.
    pub fn threshold(&self, ring: usize, headroom_ns: u64) -> Result<u64, PolicyConfigError> {
        if let Some(k) = self.queue_threshold {
            if k == 0 || k > ring as u64 {
                return Err(PolicyConfigError::param(
                    "queue-threshold",
                    format!("must be in 1..={ring} (the ring's capacity), not {k}"),
                ));
            }
            return Ok(k);
        }
        let headroom = (headroom_ns as f64 / 1e9 * self.nic_rate_pps).ceil();
        let k = ring as f64 - headroom;
        if k < 1.0 {
            return Err(PolicyConfigError::param(
                "queue-threshold",
                format!(
                    "is needed: the queue threshold K = ring {ring} − {headroom_ns} ns × {:.0} pkt/s = {k:.0} \
                     is not positive; give a larger `ring`, a lower `nic-rate`, or K itself",
                    self.nic_rate_pps
                ),
            ));
        }
        Ok(k as u64)
    }

    /// Checks every parameter.
    pub fn check(&self) -> Result<(), PolicyConfigError> {
        let bad = |param, m: String| Err(PolicyConfigError::param(param, m));
        if self.large_entries == 0 {
            return bad("large-entries", "must be at least 1".to_string());
        }
        if self.bursty_entries == 0 {
            return bad("bursty-entries", "must be at least 1 for elixir".to_string());
        }
        check_sample_rate(self.sample_rate)?;
        if self.identification_window_ns == 0 {
            return bad("identification-window", "must be a positive time".to_string());
        }
        if self.replacement_window_ns == 0 {
            return bad("replacement-window", "must be a positive time".to_string());
        }
        if self.burst_window_ns == 0 {
            return bad("burst-window", "must be a positive time".to_string());
        }
        if !(self.nic_rate_pps.is_finite() && self.nic_rate_pps > 0.0) {
            return bad("nic-rate", format!("must be a positive packet rate, not {}", self.nic_rate_pps));
        }
        if self.sketch_width == 0 {
            return Err(PolicyConfigError::Invalid(
                "the sketch needs at least one counter per row".to_string(),
            ));
        }
        Ok(())
    }

    fn detector(&self) -> DetectorConfig {
        let arrays = self.arrays();
        let fixed = ElixirLarge::fixed_bytes(self.large_entries, self.key.bits());
        DetectorConfig {
            k: self.large_entries,
            memory: fixed + arrays * crate::measure::elixir_identification::ROWS * 4 * self.sketch_width,
            blocks: arrays,
            sample: self.sample_rate,
            seed: self.seed,
            key_bits: self.key.bits(),
        }
    }
}

/// What Elixir did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ElixirStats {
    /// Large-flow replacements.
    pub replacements: u64,
    /// Flows the Bloom filter said were new to the large set.
    pub large_new: u64,
    /// Flows of the large set offloaded (new to it, and not already held by the bursty
    /// process).
    pub large_offloads: u64,
    /// Flows that left the large set, evicted.
    pub large_evictions: u64,
    /// Ring crossings of K acted on.
    pub burst_triggers: u64,
    /// Flows moved into the bursty area.
    pub bursty_offloads: u64,
    /// Of those, in place of a slower entry.
    pub bursty_replacements: u64,
}

/// The Elixir policy.
pub struct Elixir {
    config: ElixirConfig,
    k: u64,
    t_offloading_ns: u64,
    /// t_identification, charged at each bursty-flow check, ns.
    identification_ns: f64,
    /// One flow's packets reach every core: the fastest software flow anywhere is the
    /// candidate, not only the overflowing core's.
    spreads_flows: bool,
    update_gap_ns: f64,
    large: ElixirLarge,
    /// Software's own sampling of the packets it forwards.
    sampler: Sampler,
    /// A packet of every flow the heap holds, to install it with.
    reps: HashMap<FlowId, FlowKey>,
    replacements: Every,
    /// Software flows' counters, with a packet to install each with and its core.
    bursts: BurstCounters<(FlowKey, usize)>,
    /// Bursty-area counters per entry: (packets, ns) when last read — at install (0) or at a
    /// burst window's end — so that a rate is over the window under way, as software's.
    hw_window: HashMap<FlowId, (u64, u64)>,
    hw_windows: Every,
    hold_until_ns: u64,
    polled: Vec<(FlowId, u64)>,
    stats: ElixirStats,
}

impl Elixir {
    /// Elixir on `machine`: its rings, its NIC's update latency and rate (0: unlimited), and
    /// its host's costs.
    pub fn new(config: ElixirConfig, machine: &PolicyMachine) -> Result<Elixir, PolicyConfigError> {
        config.check()?;
        let k = config.threshold(machine.ring, config.headroom_ns(machine))?;
        let large = ElixirLarge::new(&config.detector())?;
        let updates_per_second = machine.limits.per_second;
        Ok(Elixir {
            k,
            t_offloading_ns: machine.limits.latency_ns,
            identification_ns: config.identification_ns(&machine.costs),
            spreads_flows: machine.spreads_flows,
            update_gap_ns: if updates_per_second > 0.0 { 1e9 / updates_per_second } else { 0.0 },
            large,
            sampler: Sampler::new(config.sample_rate, config.seed ^ 0x5eed_e11c),
            reps: HashMap::new(),
            replacements: Every::new(config.replacement_window_ns),
            bursts: BurstCounters::new(config.burst_window_ns),
            hw_window: HashMap::new(),
            hw_windows: Every::new(config.burst_window_ns),
            hold_until_ns: 0,
            polled: Vec::new(),
            stats: ElixirStats::default(),
            config,
        })
    }

    /// What it did.
    pub fn stats(&self) -> ElixirStats {
        self.stats
    }

    /// The large-flow identifier.
    pub fn large(&self) -> &ElixirLarge {
        &self.large
    }

    /// A sampled packet (from hardware or software) counts towards the large set.
    fn identify(&mut self, flow: FlowId, key: &FlowKey) {
        let hash = flow.hash(self.large.hash_seed());
        self.large.insert(flow, hash);
        if self.large.in_heap(flow, hash) {
            self.reps.entry(flow).or_insert_with(|| *key);
        }
    }

    /// Algorithm 1, lines 20–28.
    fn replace(&mut self, nic: &mut NicControl) {
        self.large.end_block();
        self.stats.replacements += 1;
        self.stats.large_new += self.large.replacement().offload.len() as u64;
        for &flow in &self.large.replacement().evict {
            // A flow the bursty process holds stays where it is (§3.1); one whose install still
            // waits is cancelled.
            if nic.area_of(flow) == Some(LARGE_AREA) {
                nic.evict(flow);
                self.stats.large_evictions += 1;
            }
        }
        for &flow in &self.large.replacement().offload {
            // New to the set, as the Bloom filter says.
            if let Some(key) = self.reps.get(&flow) {
                if nic.offload(key, flow, LARGE_AREA) {
                    self.stats.large_offloads += 1;
                }
            }
        }
        // Only the large set's representatives are kept, in place: copying tens of thousands
        // of packet keys into a new map held a live switch's engine for tens of milliseconds.
        let chosen: HashSet<FlowId> = self.large.large_set().collect();
        self.reps.retain(|flow, _| chosen.contains(flow));
        let k = self.config.large_entries as f64;
        let rebuild =
            self.config.heap_rebuild_ns.map_or(k * k.log2().max(1.0) * nic.costs().sample_ns, |ns| ns as f64);
        nic.charge(rebuild);
    }

    /// Reads the bursty area's counters at the end of a burst window (as far as the read
    /// rate allows: an entry not read keeps its old window).
    fn roll_hw_window(&mut self, nic: &mut NicControl) {
        if nic.area_len(BURSTY_AREA) == 0 {
            return;
        }
        nic.poll(BURSTY_AREA, &mut self.polled);
        let now = nic.now_ns();
        for &(f, packets) in &self.polled {
            self.hw_window.insert(f, (packets, now));
        }
    }

    /// Algorithm 2: `core`'s ring reached K.
    fn burst(&mut self, core: usize, nic: &mut NicControl) {
        let now = nic.now_ns();
        self.stats.burst_triggers += 1;
        // The next check comes after this one's change has reached hardware, or after a
        // re-check interval if it changed nothing (the ring stays above K while it drains).
        self.hold_until_ns = now + self.t_offloading_ns.max(RECHECK_NS);
        self.move_fastest(core, nic, now);
        let drain = nic.queued_urgent() as f64 * self.update_gap_ns;
        self.hold_until_ns = self.hold_until_ns.max(now + drain as u64 + self.t_offloading_ns);
    }

    /// Algorithm 2, lines 2–8: `core`'s fastest software flow into the bursty area, in place
    /// of its slowest entry if the area is full and that entry is slower.
    fn move_fastest(&mut self, core: usize, nic: &mut NicControl, now: u64) {
        // Comparing the bursty area's counters and finding the fastest software flow (software
        // keeps its counters in a heap): t_identification, as K allowed for.
        nic.charge(self.identification_ns);
        let spread = self.spreads_flows;
        let fastest =
            self.bursts.fastest_in_window(now, RECHECK_NS, |f, r| (spread || r.1 == core) && !nic.holds(f));
        let Some((flow, rate, (key, _))) = fastest else { return };
        let room = nic.has_room(BURSTY_AREA);
        if !room {
            nic.poll(BURSTY_AREA, &mut self.polled);
            let mut slowest: Option<(FlowId, f64)> = None;
            for &(f, packets) in &self.polled {
                let (base, since) = self.hw_window.get(&f).copied().unwrap_or((0, 0));
                let span = now.saturating_sub(since).max(RECHECK_NS);
                let r = packets.saturating_sub(base) as f64 * 1e9 / span as f64;
                if slowest.is_none_or(|s| r < s.1) {
                    slowest = Some((f, r));
                }
            }
            let Some((victim, victim_rate)) = slowest else { return };
            if rate <= victim_rate {
                return;
            }
            nic.evict_urgent(victim);
            self.hw_window.remove(&victim);
            self.stats.bursty_replacements += 1;
        }
        if nic.offload_urgent(&key, flow, BURSTY_AREA) {
            self.hw_window.insert(flow, (0, now));
            self.stats.bursty_offloads += 1;
        }
    }
}

impl OffloadPolicy for Elixir {
    fn name(&self) -> &'static str {
        "elixir"
    }

    fn nic(&self) -> Option<NicConfig> {
        Some(NicConfig::new(ExactMatchConfig {
            areas: [self.config.large_entries, self.config.bursty_entries],
            key: self.config.key,
            expire_idle: false,
        }))
    }

    fn flow_key(&self) -> Option<KeySpec> {
        Some(self.config.key)
    }

    fn sample_rate(&self) -> f64 {
        self.config.sample_rate
    }

    fn tick(&mut self, nic: &mut NicControl) {
        let now = nic.now_ns();
        if self.hw_windows.due(now) {
            self.roll_hw_window(nic);
        }
        if self.replacements.due(now) {
            self.replace(nic);
        }
    }

    fn on_ring(&mut self, core: usize, occupancy: u64, nic: &mut NicControl) {
        if occupancy >= self.k && nic.now_ns() >= self.hold_until_ns {
            self.burst(core, nic);
        }
    }

    /// Counting the packet for bursts, and sampling it for the large set.
    fn on_software(&mut self, pkt: Seen, nic: &mut NicControl) -> f64 {
        let Some(flow) = pkt.flow else { return 0.0 };
        self.bursts.count(flow, pkt.number, pkt.now_ns, || (*pkt.key, pkt.core));
        let mut work = nic.costs().sample_ns;
        if self.sampler.keep() {
            self.identify(flow, pkt.key);
            work += nic.costs().sample_ns;
        }
        work
    }

    fn on_sample(&mut self, pkt: Seen, _nic: &mut NicControl) -> f64 {
        if let Some(flow) = pkt.flow {
            self.identify(flow, pkt.key);
        }
        0.0
    }

    fn ring_watch(&self) -> Option<u64> {
        Some(self.k)
    }

    /// `replacements`: large-flow replacements (every T); `burst_triggers`: ring crossings
    /// of K that triggered a bursty-flow check; `bursty_offloads`: flows moved into the
    /// bursty area; `queue_threshold`: K, packets.
    fn restart_counts(&mut self) {
        self.stats = ElixirStats::default();
    }

    fn report(&self) -> PolicyReport {
        let s = &self.stats;
        PolicyReport {
            figures: PolicyFigures(vec![
                ("replacements", s.replacements),
                ("burst_triggers", s.burst_triggers),
                ("bursty_offloads", s.bursty_offloads),
                ("queue_threshold", self.k),
            ]),
            summary: Some(format!(
                "K = {}; {} large-flow replacements, {} ring crossings of K, {} flows moved into the bursty area",
                self.k, s.replacements, s.burst_triggers, s.bursty_offloads
            )),
            ..PolicyReport::default()
        }
    }
}
