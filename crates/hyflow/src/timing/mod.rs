//! Timing: a discrete-event simulation of the NIC, the host's receive rings and its cores.
//!
//! `hyflow replay` says *where* each packet is handled; this says *what it costs*. Packets
//! arrive at their trace times (optionally rescaled to a chosen average rate). The NIC looks
//! each one up on arrival ([`Datapath::nic`]): a hit leaves after a fixed hardware latency. A
//! miss is steered to one of the host cores' receive rings (RSS on the 5-tuple, or a hash of
//! any fields, FlexNIC-style); a full ring drops it. Each core serves its ring in order; a
//! packet's service time is what the host's software path costs for it
//! ([`Datapath::host`]: microflow hit, megaflow hit or upcall, from a [`CostModel`](crate::cost_model::CostModel)),
//! so queueing delay, tail latency and loss come from the arrival process and the costs.
//! Sampled headers cost a core a sketch update. A policy's background work (heap rebuilds,
//! installs) goes to the least busy core, in slices of [`WORK_SLICE_NS`] that alternate in
//! equal shares with waiting packets, as a fair scheduler would share the core between the
//! forwarding loop and the policy's thread. Packets arriving during a warm-up are forwarded
//! but measured in no figure.
//!
//! Determinism: the simulation runs on trace time alone; the same inputs give the same
//! results on any machine. Events at the same instant are ordered: service completions (by
//! core) before arrivals.
//!
//! State: the [`Simulator`] owns the rings (bounded: memory does not grow with the trace),
//! the cores' clocks and the metrics (HDR histograms and, if asked, a time series with one
//! row per interval).

pub mod search;
pub mod switch_datapath;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::flow_number_table::FlowNumberTable;
use crate::invalid_param::{CarriesInvalidParam, InvalidParam};
use crate::measure::KeySpec;
use crate::packet::hash::hash_key;
use crate::packet::FlowKey;
use crate::prefetch::prefetch;

/// A packet as the simulation carries it.
#[derive(Clone, Copy, Debug)]
pub struct SimPacket {
    /// Parsed headers.
    pub key: FlowKey,
    /// Bytes on the wire.
    pub bytes: u32,
    /// Its index in the input (decision records name packets by it).
    pub index: u64,
    /// Its flow's number in the input, if the input numbers flows (see
    /// [`crate::nic::Arrival::flow`]).
    pub flow: Option<u32>,
}

/// What forwards packets: the NIC at arrival, host software at service.
pub trait Datapath {
    /// Looks the packet up in the NIC at arrival time `t_ns`: true if the NIC forwards it.
    fn nic(&mut self, t_ns: u64, pkt: &SimPacket) -> bool;
    /// Host software on `core` handles the packet starting at `t_ns`: returns the service
    /// time, ns.
    fn host(&mut self, t_ns: u64, core: usize, pkt: &SimPacket) -> u64;
    /// Host software on `core` measures a sampled header of a NIC-forwarded packet: service
    /// time, ns.
    fn sample(&mut self, _t_ns: u64, _core: usize, _pkt: &SimPacket) -> u64 {
        0
    }
    /// NIC entries held now (the time series' NIC occupancy).
    fn nic_entries(&self) -> u64 {
        0
    }
    /// NIC table updates made so far (each may stall NIC forwarding).
    fn nic_updates(&self) -> u64 {
        0
    }
    /// A host-bound packet (or sampled header) joined `core`'s ring at `t_ns`, which now holds
    /// `occupancy` packets (what a policy watching the rings sees).
    fn enqueued(&mut self, _t_ns: u64, _core: usize, _occupancy: u64) {}
    /// A packet was dropped at a full ring at `t_ns`.
    fn lost(&mut self, _t_ns: u64, _pkt: &SimPacket) {}
    /// The warm-up ended at `t_ns`: counts the datapath reports cover what follows, as the
    /// simulator's own metrics do.
    fn start_measuring(&mut self, _t_ns: u64) {}
    /// Host work done outside any packet since the last call (a policy's sorting, installs),
    /// ns: the simulator runs it on the least busy core.
    fn take_work(&mut self) -> u64 {
        0
    }
}

/// How host-bound packets are spread over the cores' rings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Steering {
    /// Receive-side scaling on the IPv4/IPv6 5-tuple (non-IP packets by their whole key).
    Rss,
    /// A hash of the given fields (FlexNIC's flexible steering, e.g. on a key field).
    Fields(KeySpec),
    /// Host-bound packets dealt to the cores in turn, whatever their flow: one flow can use
    /// every core (and is reordered). What a forwarder needs for one bursty flow to be helped
    /// by more cores, as Elixir's Fig. 3b measures (4 cores for a flow at a fifth of a stable
    /// flow's average rate); under receive-side scaling a flow has one core.
    Spray,
}

impl Steering {
    /// Whether one flow's packets reach several cores.
    pub fn spreads_flows(&self) -> bool {
        matches!(self, Steering::Spray)
    }
}

/// NIC forwarding stall per table update calibrated to Elixir's Fig. 6a (a ConnectX-5 holding
/// 50,000 entries loses half its throughput at 3,250 updates/s: 0.5 s / 3,250), ns: the
/// fronts' default for [`SimConfig::update_stall_ns`].
pub const FIG6_UPDATE_STALL_NS: u64 = 153_846;
/// Core time lost per table update calibrated to Elixir's Fig. 6b (software throughput −16%
/// at 3,250 updates/s: 0.16 s / 3,250), ns: the fronts' default for
/// [`SimConfig::update_host_ns`].
pub const FIG6_UPDATE_HOST_NS: u64 = 49_231;

/// Shape of the simulated machine.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Host cores, each with its own receive ring.
    pub cores: usize,
    /// Ring capacity, packets.
    pub ring: usize,
    /// Latency of the NIC (a hit leaves after it; a miss reaches the ring after it).
    pub nic_latency_ns: u64,
    /// Steering of host-bound packets.
    pub steering: Steering,
    /// Time-series interval (0 = no time series); with `series_points`, the first one.
    pub interval_ns: u64,
    /// Most intervals the time series keeps (0: no limit). Past it, adjacent intervals merge
    /// and the interval grows — ×5 from 1·10^k ns, ×2 from 5·10^k ns, so that it stays a
    /// round number — and a run of any length gets between a fifth of this and this many
    /// points. With a limit, `interval_ns` must be 1 or 5 × 10^k.
    pub series_points: usize,
    /// Fraction of NIC-forwarded packets whose header (64 bytes) is also sent to the host
    /// for measurement (Elixir's sampling; FlexNIC truncation).
    pub sample_hw: f64,
    /// NIC forwarding stalls this long per table update (Elixir Fig. 6a: frequent updates
    /// cost hardware throughput); packets arriving meanwhile wait.
    pub update_stall_ns: u64,
    /// Every core loses this much time per NIC table update (Elixir Fig. 6b: installing and
    /// removing entries evicts the forwarding loop's cache lines), as background work.
    pub update_host_ns: u64,
    /// Seed of the sampling decisions.
    pub seed: u64,
    /// Time simulated before measuring: everything runs from the first packet, but the
    /// metrics count packets arriving from the first arrival + `warmup_ns` on (a policy that
    /// learns which flows to offload starts with an empty NIC; a steady state comes later).
    pub warmup_ns: u64,
    /// Ring occupancy whose crossings are logged (0: none): each time a core's ring reaches
    /// it from below, [`Metrics::crossings`] records when and which core (what a queue-
    /// triggered policy such as Elixir reacts to, and how soon after a burst begins).
    pub ring_watch: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            cores: 1,
            ring: 65_536,
            nic_latency_ns: 2_000,
            steering: Steering::Rss,
            interval_ns: 0,
            series_points: 0,
            sample_hw: 0.0,
            update_stall_ns: 0,
            update_host_ns: 0,
            seed: 1,
            warmup_ns: 0,
            ring_watch: 0,
        }
    }
}

/// Why a simulation cannot be set up: always a parameter out of range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimConfigError {
    /// No core.
    NoCores,
    /// A ring that holds nothing.
    EmptyRing,
    /// More cores than a host has.
    TooManyCores(usize),
}

impl SimConfigError {
    /// The parameter at fault and what is wrong with it.
    fn as_param(&self) -> InvalidParam {
        match self {
            SimConfigError::NoCores => InvalidParam::new("cores", "must be at least 1"),
            SimConfigError::EmptyRing => InvalidParam::new("ring", "must be at least 1 packet"),
            SimConfigError::TooManyCores(n) => InvalidParam::new(
                "cores",
                format!("{n}: at most {MAX_CORES} (each core's ring is allocated up front)"),
            ),
        }
    }
}

impl std::fmt::Display for SimConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_param().fmt(f)
    }
}

impl std::error::Error for SimConfigError {}

impl CarriesInvalidParam for SimConfigError {
    fn invalid_param(&self) -> Option<InvalidParam> {
        Some(self.as_param())
    }
}

/// Most forwarding cores a simulated host may have.
pub(crate) const MAX_CORES: usize = 256;

#[derive(Clone, Copy, Debug)]
struct Queued {
    arrival: u64,
    pkt: SimPacket,
    /// A sampled header for measurement, not a packet to forward.
    sample: bool,
}

/// What a core is busy with.
#[derive(Clone, Copy, Debug)]
enum Job {
    /// A packet that arrived at this time.
    Packet(u64),
    /// A sampled header.
    Sample,
    /// Background work (a policy's).
    Work,
}

struct Core {
    ring: VecDeque<Queued>,
    serving: Option<Job>,
    /// Background work waiting for the core, ns.
    work_ns: u64,
    /// Packet service owed before the next slice of background work, ns: while both wait,
    /// the core alternates them in equal shares (a fair scheduler between the forwarding
    /// loop and the policy's thread).
    packet_debt_ns: u64,
    busy_ns: u64,
    /// Whether the ring held `ring_watch` or more at its last arrival.
    above_watch: bool,
}

/// One interval of the time series.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interval {
    /// Packets forwarded by the NIC.
    pub hw: u64,
    /// Packets sent to host rings (including dropped ones).
    pub sw: u64,
    /// Packets dropped.
    pub lost: u64,
    /// Largest ring occupancy seen.
    pub ring_max: u64,
    /// Host packets served.
    pub served: u64,
    /// NIC entries held at the interval's last arrival.
    pub nic_entries: u64,
    /// NIC table updates made since the run started, at the interval's last arrival: the
    /// installs of an interval are the difference with the one before
    /// ([`Metrics::nic_installs_at_start`] before the first).
    pub nic_updates_so_far: u64,
}

/// One core's ring over one interval of the time series.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreInterval {
    /// Largest occupancy of its ring seen at an arrival.
    pub ring_max: u64,
    /// Packets lost at its full ring.
    pub lost: u64,
}

/// Everything measured.
pub struct Metrics {
    /// Packets offered.
    pub packets: u64,
    /// Forwarded by the NIC.
    pub hw: u64,
    /// Served by host software.
    pub sw_served: u64,
    /// Dropped at a full ring.
    pub lost_ring_full: u64,
    /// Sampled headers sent to the host, measured, and dropped at a full ring.
    pub samples: u64,
    /// Samples measured.
    pub samples_served: u64,
    /// Samples dropped at a full ring.
    pub samples_lost: u64,
    /// NIC-forwarded packets delayed by a table-update stall.
    pub stalled: u64,
    /// Latency (ns) of every delivered packet, and per path.
    pub latency: Histogram<u64>,
    /// Latency of NIC-forwarded packets.
    pub latency_hw: Histogram<u64>,
    /// Latency of host-forwarded packets.
    pub latency_sw: Histogram<u64>,
    /// Ring occupancy seen by each host-bound arrival.
    pub ring: Histogram<u64>,
    /// Largest ring occupancy seen, exactly (the histogram rounds to 3 significant digits,
    /// which could report more than a ring holds).
    pub ring_peak: u64,
    /// Time series (if an interval was set).
    pub series: Vec<Interval>,
    /// Each core's ring over the same intervals, interval by interval (`cores` entries per
    /// interval): see [`Metrics::core_interval`].
    pub core_series: Vec<CoreInterval>,
    /// NIC table updates made before measuring started (see [`Interval::nic_updates_so_far`]).
    pub nic_installs_at_start: u64,
    /// The series' interval, ns: the configured one, grown if the series was bounded.
    pub interval_ns: u64,
    /// Busy time per core, ns.
    pub busy_ns: Vec<u64>,
    /// Background host work run on the cores (a policy's), ns.
    pub work_ns: u64,
    /// Core time lost to NIC table updates, all cores together, ns.
    pub update_host_ns: u64,
    /// Time of the first and last arrival, ns (trace time after rescaling).
    pub first_ns: u64,
    /// Last arrival.
    pub last_ns: u64,
    /// When the host last finished something (a packet or background work).
    pub end_ns: u64,
    /// Crossings of [`SimConfig::ring_watch`]: (time, core), the first [`MAX_CROSSINGS`].
    pub crossings: Vec<(u64, u32)>,
    /// Whether a fixed interval would have made more than [`MAX_SERIES_POINTS`] points: the
    /// series stops there, and the run's answer is that the interval is too short for it.
    pub series_overflow: bool,
}

/// Most ring-watch crossings logged (a bound on memory when a ring hovers at the mark).
pub const MAX_CROSSINGS: usize = 1 << 20;

/// Most points a time series of a fixed interval holds (48 MB): beyond, no plot or CSV is
/// readable anyway, and memory must not grow with the input.
pub const MAX_SERIES_POINTS: usize = 1_000_000;

/// A flow number not steered yet.
const UNSTEERED: u16 = u16::MAX;

/// An interval hint holding no time.
const NO_INTERVAL: (u64, u64, usize) = (0, 0, 0);

/// Longest stretch of background work a core runs before serving waiting packets again.
pub const WORK_SLICE_NS: u64 = 50_000;

/// Largest share of the input's span the host may still need after the last arrival for a
/// run to count as steady. A stable queue drains in a few service times; a host overloaded by
/// a share ε of its capacity ends with a backlog of about ε × the span, so 1% matches the
/// max-rate search's 1% tolerance.
pub const STEADY_DRAIN_SHARE: f64 = 0.01;

/// Values from 1 ns to about 73 minutes (or that many packets) at 3 significant digits:
/// fixed memory, whatever the trace length; larger values saturate.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 1 << 42, 3).expect("valid bounds")
}

impl Metrics {
    fn new(cores: usize, interval_ns: u64) -> Metrics {
        Metrics {
            packets: 0,
            hw: 0,
            sw_served: 0,
            lost_ring_full: 0,
            samples: 0,
            samples_served: 0,
            samples_lost: 0,
            stalled: 0,
            latency: histogram(),
            latency_hw: histogram(),
            latency_sw: histogram(),
            ring: histogram(),
            ring_peak: 0,
            series: Vec::new(),
            core_series: Vec::new(),
            nic_installs_at_start: 0,
            interval_ns,
            busy_ns: vec![0; cores],
            work_ns: 0,
            update_host_ns: 0,
            first_ns: 0,
            last_ns: 0,
            end_ns: 0,
            crossings: Vec::new(),
            series_overflow: false,
        }
    }

    /// The time series' complete intervals: those that end by the last arrival (the one
    /// under way then has fewer arrivals, and later ones only drain).
    pub fn complete_intervals(&self) -> &[Interval] {
        let n = (self.last_ns.saturating_sub(self.first_ns) / self.interval_ns.max(1)) as usize;
        &self.series[..n.min(self.series.len())]
    }

    /// Core `core`'s ring over interval `i` of the series.
    pub fn core_interval(&self, i: usize, core: usize) -> CoreInterval {
        self.core_series.get(i * self.busy_ns.len() + core).copied().unwrap_or_default()
    }

    /// NIC entries installed in each complete interval.
    pub fn nic_installs_by_interval(&self) -> Vec<u64> {
        let mut before = self.nic_installs_at_start;
        let mut out = Vec::new();
        for iv in self.complete_intervals() {
            // An interval without arrivals kept no count: nothing was installed then.
            let now = iv.nic_updates_so_far.max(before);
            out.push(now - before);
            before = now;
        }
        out
    }

    /// Merges adjacent intervals so that the interval grows to the next round number (×5 from
    /// 1·10^k, ×2 from 5·10^k): counts add up, the ring maximum is the larger, the NIC's
    /// figures are the last interval's.
    fn coarsen(&mut self) {
        let mut leading = self.interval_ns;
        while leading >= 10 && leading.is_multiple_of(10) {
            leading /= 10;
        }
        let factor = if leading == 1 { 5 } else { 2 };
        let merged: Vec<Interval> = self
            .series
            .chunks(factor)
            .map(|c| Interval {
                hw: c.iter().map(|i| i.hw).sum(),
                sw: c.iter().map(|i| i.sw).sum(),
                lost: c.iter().map(|i| i.lost).sum(),
                served: c.iter().map(|i| i.served).sum(),
                ring_max: c.iter().map(|i| i.ring_max).max().unwrap_or(0),
                nic_entries: c.iter().rev().find(|i| i.nic_updates_so_far > 0).map_or(0, |i| i.nic_entries),
                nic_updates_so_far: c.iter().map(|i| i.nic_updates_so_far).max().unwrap_or(0),
            })
            .collect();
        let cores = self.busy_ns.len();
        let mut core_merged = vec![CoreInterval::default(); merged.len() * cores];
        for (i, ci) in self.core_series.iter().enumerate() {
            let m = &mut core_merged[(i / cores / factor) * cores + i % cores];
            m.ring_max = m.ring_max.max(ci.ring_max);
            m.lost += ci.lost;
        }
        self.core_series = core_merged;
        self.series = merged;
        self.interval_ns *= factor as u64;
    }

    /// Packets lost, all causes.
    pub fn lost(&self) -> u64 {
        self.lost_ring_full
    }

    /// Lost / offered.
    pub fn loss_rate(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.lost() as f64 / self.packets as f64
        }
    }

    /// Time the host still needed after the last arrival to empty its rings, ns.
    pub(crate) fn drain_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.last_ns)
    }

    /// Whether the host kept up with the input: it emptied its rings within
    /// [`STEADY_DRAIN_SHARE`] of the input's span after the last arrival. A run that did not
    /// was falling behind when the input ended; that it lost nothing says only that the input
    /// was too short to fill the rings.
    pub fn steady(&self) -> bool {
        let span = self.last_ns.saturating_sub(self.first_ns);
        self.drain_ns() as f64 <= STEADY_DRAIN_SHARE * span as f64
    }

    /// Offered packets per second over the arrivals' span.
    pub fn rate_pps(&self) -> f64 {
        let span = self.last_ns.saturating_sub(self.first_ns);
        if span == 0 {
            0.0
        } else {
            (self.packets.saturating_sub(1)) as f64 * 1e9 / span as f64
        }
    }

    /// The summary: only simulated quantities, nothing from the host machine.
    pub fn summary(&self) -> MetricsSummary {
        let lat = LatencySummary::of;
        let span = self.end_ns.max(self.last_ns).saturating_sub(self.first_ns).max(1);
        MetricsSummary {
            packets: self.packets,
            lost: self.lost(),
            loss_rate: self.loss_rate(),
            lost_by_cause: LossCauses { ring_full: self.lost_ring_full },
            samples: SampleCounts {
                sent: self.samples,
                measured: self.samples_served,
                lost: self.samples_lost,
            },
            nic_stalled_packets: self.stalled,
            update_host_ms: (self.update_host_ns as f64 / 1e4).round() / 100.0,
            rate_pps: self.rate_pps().round(),
            duration_s: (self.last_ns.saturating_sub(self.first_ns)) as f64 / 1e9,
            hw_packets: self.hw,
            sw_packets: self.sw_served,
            hw_share: if self.packets == 0 { 0.0 } else { self.hw as f64 / self.packets as f64 },
            latency_us: lat(&self.latency),
            latency_hw_us: lat(&self.latency_hw),
            latency_sw_us: lat(&self.latency_sw),
            ring_max: self.ring_peak,
            ring: RingSummary {
                mean: if self.ring.is_empty() { 0.0 } else { (self.ring.mean() * 100.0).round() / 100.0 },
                // The histogram's bucket top may lie above the largest value seen.
                p99: self.ring.value_at_quantile(0.99).min(self.ring_peak),
                max: self.ring_peak,
            },
            steady: self.steady(),
            drain_ms: self.drain_ns() as f64 / 1e6,
            cores: self.busy_ns.len(),
            core_utilisation: self
                .busy_ns
                .iter()
                .map(|b| ((*b as f64 / span as f64) * 1e4).round() / 1e4)
                .collect(),
        }
    }
}

/// Latency percentiles, µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Packets measured.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

impl LatencySummary {
    /// The percentiles of `h`, a histogram of nanoseconds (the live switch's too, so that
    /// `show --json` and `sim --json` give latency alike).
    pub fn of(h: &Histogram<u64>) -> LatencySummary {
        let us = |ns: f64| ns.round() / 1e3;
        LatencySummary {
            count: h.len(),
            mean: us(if h.is_empty() { 0.0 } else { h.mean() }),
            p50: us(h.value_at_quantile(0.5) as f64),
            p99: us(h.value_at_quantile(0.99) as f64),
            p999: us(h.value_at_quantile(0.999) as f64),
            max: us(h.max() as f64),
        }
    }
}

/// Packets lost, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LossCauses {
    /// Dropped at a full ring.
    pub ring_full: u64,
}

/// Sampled headers sent to the host for measurement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SampleCounts {
    /// Sent.
    pub sent: u64,
    /// Measured.
    pub measured: u64,
    /// Dropped at a full ring.
    pub lost: u64,
}

/// Ring occupancy seen by host-bound arrivals, packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RingSummary {
    /// Mean.
    pub mean: f64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest.
    pub max: u64,
}

/// What a simulation measured, as `hyflow sim --json` writes it (key names are an interface).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MetricsSummary {
    /// Packets that arrived while measuring.
    pub packets: u64,
    /// Of those, packets lost (host-bound packets that found their core's ring full).
    pub lost: u64,
    /// `lost` / `packets` (0–1).
    pub loss_rate: f64,
    /// Losses by cause.
    pub lost_by_cause: LossCauses,
    /// Sampled headers of hardware packets sent to the host, measured and lost.
    pub samples: SampleCounts,
    /// Hardware packets that waited for a NIC table update to end.
    pub nic_stalled_packets: u64,
    /// Core time lost to NIC table updates (cache contention), all cores together, ms.
    pub update_host_ms: f64,
    /// Packets per second over the measured span.
    pub rate_pps: f64,
    /// Simulated time from the first measured arrival to the last, s.
    pub duration_s: f64,
    /// Packets the NIC forwarded.
    pub hw_packets: u64,
    /// Packets host software forwarded.
    pub sw_packets: u64,
    /// `hw_packets` / `packets` (0–1).
    pub hw_share: f64,
    /// Latency from arrival to departure, every forwarded packet, µs.
    pub latency_us: LatencySummary,
    /// The same, packets the NIC forwarded, µs.
    pub latency_hw_us: LatencySummary,
    /// The same, packets software forwarded, µs.
    pub latency_sw_us: LatencySummary,
    /// Most packets a ring held, packets.
    pub ring_max: u64,
    /// Ring occupancy seen by arriving host-bound packets, packets.
    pub ring: RingSummary,
    /// Whether the host kept up (see [`Metrics::steady`]).
    pub steady: bool,
    /// Time the host needed after the last arrival to empty its rings, ms.
    pub drain_ms: f64,
    /// Host cores simulated.
    pub cores: usize,
    /// Each core's busy time over the measured span (0–1).
    pub core_utilisation: Vec<f64>,
}

/// The simulation: rings, cores, event queue, metrics.
pub struct Simulator<D> {
    config: SimConfig,
    datapath: D,
    cores: Vec<Core>,
    /// Service completions: (time, core).
    events: BinaryHeap<Reverse<(u64, u32)>>,
    metrics: Metrics,
    sampler: crate::measure::Sampler,
    /// The fields steering hashes (the 5-tuple for RSS).
    steer_fields: KeySpec,
    /// NIC forwarding is stalled by table updates until then.
    nic_busy_until: u64,
    /// The core [`Steering::Spray`] gave the last packet.
    spray_next: usize,
    /// Per flow number (see [`SimPacket::flow`]), the core its host-bound packets go to,
    /// [`UNSTEERED`] until its first; cores are at most [`MAX_CORES`].
    core_by_flow: FlowNumberTable<u16>,
    nic_updates_seen: u64,
    /// NIC hits not yet in the latency histograms: (latency, packets).
    hw_latency_run: (u64, u64),
    /// The series interval last found, as (its first ns, one past its last, its index), so
    /// that the packets of one interval (almost every packet asks) skip the division; reset
    /// with the metrics.
    interval_hint: (u64, u64, usize),
    /// When measuring starts (set at the first arrival), and whether it has.
    measure_from_ns: Option<u64>,
    measuring: bool,
    /// Each core's busy time when measuring started.
    busy_at_start: Vec<u64>,
}

impl<D: Datapath> Simulator<D> {
    /// A machine of `config` forwarding with `datapath`.
    pub fn new(config: SimConfig, datapath: D) -> Result<Simulator<D>, SimConfigError> {
        if config.cores == 0 {
            return Err(SimConfigError::NoCores);
        }
        if config.ring == 0 {
            return Err(SimConfigError::EmptyRing);
        }
        if config.cores > MAX_CORES {
            return Err(SimConfigError::TooManyCores(config.cores));
        }
        let cores = (0..config.cores)
            .map(|_| Core {
                ring: VecDeque::with_capacity(config.ring.min(1 << 16)),
                serving: None,
                work_ns: 0,
                packet_debt_ns: 0,
                busy_ns: 0,
                above_watch: false,
            })
            .collect();
        let metrics = Metrics::new(config.cores, config.interval_ns);
        let sampler = crate::measure::Sampler::new(config.sample_hw.clamp(0.0, 1.0), config.seed);
        let steer_fields = match &config.steering {
            Steering::Rss | Steering::Spray => KeySpec::five_tuple(),
            Steering::Fields(spec) => *spec,
        };
        Ok(Simulator {
            steer_fields,
            config,
            datapath,
            cores,
            events: BinaryHeap::new(),
            metrics,
            sampler,
            nic_busy_until: 0,
            nic_updates_seen: 0,
            spray_next: 0,
            core_by_flow: FlowNumberTable::new(UNSTEERED),
            hw_latency_run: (0, 0),
            interval_hint: NO_INTERVAL,
            measure_from_ns: None,
            measuring: false,
            busy_at_start: Vec::new(),
        })
    }

    /// The datapath.
    pub fn datapath(&self) -> &D {
        &self.datapath
    }

    /// The datapath, mutably (to drain what it records while the simulation runs).
    pub fn datapath_mut(&mut self) -> &mut D {
        &mut self.datapath
    }

    /// The time series' interval holding time `t`, made if new (the series coarsened first if
    /// bounded); `None` without a series or past [`MAX_SERIES_POINTS`].
    #[inline]
    fn interval(&mut self, t: u64) -> Option<usize> {
        let (from, to, i) = self.interval_hint;
        if from <= t && t < to {
            return Some(i);
        }
        // Without a series (no `--plot`, the usual run) every packet would miss the hint: a
        // call for each, about 30 instructions a packet on NIC-hit traffic.
        if self.metrics.interval_ns == 0 {
            return None;
        }
        self.find_interval(t)
    }

    /// [`Simulator::interval`] past the interval last found, with a series.
    fn find_interval(&mut self, t: u64) -> Option<usize> {
        // Coarsening below moves every interval's bounds.
        self.interval_hint = NO_INTERVAL;
        let mut i = (t.saturating_sub(self.metrics.first_ns) / self.metrics.interval_ns) as usize;
        while self.config.series_points > 0 && i >= self.config.series_points {
            self.metrics.coarsen();
            i = (t.saturating_sub(self.metrics.first_ns) / self.metrics.interval_ns) as usize;
        }
        if i >= MAX_SERIES_POINTS {
            self.metrics.series_overflow = true;
            return None;
        }
        if self.metrics.series.len() <= i {
            self.metrics.series.resize(i + 1, Interval::default());
            self.metrics.core_series.resize((i + 1) * self.cores.len(), CoreInterval::default());
        }
        // A `t` before the first arrival counts in interval 0 (`saturating_sub`): not hinted.
        if t >= self.metrics.first_ns {
            let from = self.metrics.first_ns + i as u64 * self.metrics.interval_ns;
            self.interval_hint = (from, from.saturating_add(self.metrics.interval_ns), i);
        }
        Some(i)
    }

    /// Records a host-bound arrival at `t` on `core`, its ring then holding `occupancy`
    /// (`lost`: it was full), in the interval's counts and the core's.
    fn record_host_arrival(&mut self, t: u64, core: usize, occupancy: u64, lost: bool) {
        let Some(i) = self.interval(t) else { return };
        let iv = &mut self.metrics.series[i];
        iv.sw += 1;
        iv.lost += lost as u64;
        iv.ring_max = iv.ring_max.max(occupancy);
        let c = &mut self.metrics.core_series[i * self.cores.len() + core];
        c.ring_max = c.ring_max.max(occupancy);
        c.lost += lost as u64;
        self.record_nic(i);
    }

    /// The NIC's occupancy and updates now, at an arrival in interval `i`.
    fn record_nic(&mut self, i: usize) {
        let iv = &mut self.metrics.series[i];
        iv.nic_entries = self.datapath.nic_entries();
        iv.nic_updates_so_far = self.datapath.nic_updates();
    }

    /// The core whose ring receives host-bound packets with these headers; `None` when
    /// steering sprays a flow over every core.
    pub(crate) fn core_of(&self, key: &FlowKey) -> Option<usize> {
        match self.config.steering {
            Steering::Spray => None,
            _ => Some(self.hashed_core(key)),
        }
    }

    /// The core the next host-bound packet with these headers (and this flow number, if
    /// the input numbers flows) goes to.
    fn steer(&mut self, key: &FlowKey, flow: Option<u32>) -> usize {
        if self.config.steering.spreads_flows() {
            self.spray_next = (self.spray_next + 1) % self.cores.len();
            return self.spray_next;
        }
        if self.cores.len() == 1 {
            return 0;
        }
        // A flow number always comes with the same headers, so its core is hashed once.
        if let Some(c) = self.core_by_flow.get(flow) {
            return c as usize;
        }
        let c = self.hashed_core(key);
        self.core_by_flow.remember(flow, c as u16);
        c
    }

    fn hashed_core(&self, key: &FlowKey) -> usize {
        if self.cores.len() == 1 {
            return 0;
        }
        let h = self.steer_fields.flow_id(key).map_or_else(|| hash_key(key), |f| f.hash(0) as u64);
        ((h as u128 * self.cores.len() as u128) >> 64) as usize
    }

    fn start(&mut self, c: usize, t: u64, q: Queued) {
        let service =
            if q.sample { self.datapath.sample(t, c, &q.pkt) } else { self.datapath.host(t, c, &q.pkt) };
        // Table updates the host made stall the NIC.
        let updates = self.datapath.nic_updates();
        let new_updates = updates.saturating_sub(self.nic_updates_seen);
        self.nic_updates_seen = updates;
        if new_updates > 0 && self.config.update_stall_ns > 0 {
            let stall = new_updates * self.config.update_stall_ns;
            self.nic_busy_until = self.nic_busy_until.max(t) + stall;
        }
        if new_updates > 0 && self.config.update_host_ns > 0 {
            self.contend(c, t, new_updates * self.config.update_host_ns);
        }
        let core = &mut self.cores[c];
        core.serving = Some(if q.sample { Job::Sample } else { Job::Packet(q.arrival) });
        core.busy_ns += service;
        core.packet_debt_ns = core.packet_debt_ns.saturating_sub(service);
        self.events.push(Reverse((t + service, c as u32)));
        self.collect_work(t);
    }

    /// Every core loses `ns` to table updates (cache contention), as background work; idle
    /// cores other than `serving` (which is about to serve a packet) start on it at `t`.
    fn contend(&mut self, serving: usize, t: u64, ns: u64) {
        self.metrics.update_host_ns += ns * self.cores.len() as u64;
        for i in 0..self.cores.len() {
            self.cores[i].work_ns += ns;
            if i != serving && self.cores[i].serving.is_none() {
                self.next(i, t);
            }
        }
    }

    /// Hands background work the datapath did to the least busy core (fewest queued, then
    /// idle before busy, then lowest index). Asked after every packet; most did none.
    #[inline]
    fn collect_work(&mut self, t: u64) {
        let work = self.datapath.take_work();
        if work != 0 {
            self.hand_out_work(t, work);
        }
    }

    /// [`Simulator::collect_work`] with `work` ns to hand out.
    fn hand_out_work(&mut self, t: u64, work: u64) {
        self.metrics.work_ns += work;
        let load = |c: &Core| (c.ring.len() as u64 + (c.work_ns > 0) as u64, c.serving.is_some());
        let c = (0..self.cores.len()).min_by_key(|&c| load(&self.cores[c])).expect("at least one core");
        self.cores[c].work_ns += work;
        if self.cores[c].serving.is_none() {
            self.next(c, t);
        }
    }

    fn start_work(&mut self, c: usize, t: u64) {
        let core = &mut self.cores[c];
        let slice = core.work_ns.min(WORK_SLICE_NS);
        core.work_ns -= slice;
        core.packet_debt_ns = slice;
        core.serving = Some(Job::Work);
        core.busy_ns += slice;
        self.events.push(Reverse((t + slice, c as u32)));
    }

    /// The core is free at `t`: a slice of background work if no packet waits or the packets
    /// have had their share since the last slice, else the next packet of its ring.
    fn next(&mut self, c: usize, t: u64) {
        let core = &self.cores[c];
        if core.work_ns > 0 && (core.ring.is_empty() || core.packet_debt_ns == 0) {
            self.start_work(c, t);
        } else if let Some(next) = self.cores[c].ring.pop_front() {
            // The packet after it waited as long, out of cache at a deep ring: its lines load
            // while this one is served.
            if let Some(after) = self.cores[c].ring.front() {
                prefetch(after, std::mem::size_of::<Queued>());
            }
            self.start(c, t, next);
        }
    }

    fn complete(&mut self, c: usize, t: u64) {
        let job = self.cores[c].serving.take().expect("a completing core serves something");
        match job {
            // A host still busy with background work has not caught up either.
            Job::Work => self.metrics.end_ns = self.metrics.end_ns.max(t),
            Job::Sample => self.metrics.samples_served += 1,
            // A packet that arrived during the warm-up is not measured.
            Job::Packet(arrival) if arrival < self.metrics.first_ns => {}
            Job::Packet(arrival) => {
                let latency = t - arrival + self.config.nic_latency_ns;
                self.metrics.latency.saturating_record(latency);
                self.metrics.latency_sw.saturating_record(latency);
                self.metrics.sw_served += 1;
                self.metrics.end_ns = self.metrics.end_ns.max(t);
                if let Some(i) = self.interval(t) {
                    self.metrics.series[i].served += 1;
                }
            }
        }
        self.next(c, t);
    }

    /// Runs every service completion due at or before `t`. Most packets find none due: that
    /// check stays inline, the completions are out of line.
    #[inline]
    fn run_until(&mut self, t: u64) {
        if self.events.peek().is_some_and(|&Reverse((due, _))| due <= t) {
            self.run_due(t);
        }
    }

    /// [`Simulator::run_until`] with a completion due.
    #[inline(never)]
    fn run_due(&mut self, t: u64) {
        while let Some(&Reverse((due, c))) = self.events.peek() {
            if due > t {
                break;
            }
            self.events.pop();
            self.complete(c as usize, due);
        }
    }

    /// A packet arrives at `t_ns` (non-decreasing). It is copied only if it goes to a ring.
    /// Returns whether the NIC forwarded it.
    pub fn arrive(&mut self, t_ns: u64, pkt: &SimPacket) -> bool {
        let from = *self.measure_from_ns.get_or_insert(t_ns.saturating_add(self.config.warmup_ns));
        if !self.measuring && t_ns >= from {
            // Measuring starts: what the warm-up recorded is dropped.
            self.measuring = true;
            self.metrics = Metrics::new(self.cores.len(), self.config.interval_ns);
            self.interval_hint = NO_INTERVAL;
            self.metrics.first_ns = t_ns;
            self.metrics.last_ns = t_ns;
            self.hw_latency_run = (0, 0);
            self.busy_at_start = self.cores.iter().map(|c| c.busy_ns).collect();
            self.datapath.start_measuring(t_ns);
            self.metrics.nic_installs_at_start = self.datapath.nic_updates();
        }
        let t = t_ns.max(self.metrics.last_ns);
        self.metrics.last_ns = t;
        self.metrics.packets += 1;
        self.run_until(t);
        let hit = self.datapath.nic(t, pkt);
        self.collect_work(t);
        if hit {
            let stall = self.nic_busy_until.saturating_sub(t);
            self.metrics.stalled += (stall > 0) as u64;
            let l = self.config.nic_latency_ns + stall;
            self.metrics.hw += 1;
            // Hardware latency is the same for long runs of packets: recorded a run at a time.
            if self.hw_latency_run.0 != l {
                self.flush_hw_latency();
                self.hw_latency_run.0 = l;
            }
            self.hw_latency_run.1 += 1;
            if let Some(i) = self.interval(t) {
                self.metrics.series[i].hw += 1;
                self.record_nic(i);
            }
            if self.config.sample_hw > 0.0 && self.sampler.keep() {
                self.metrics.samples += 1;
                let header = SimPacket { bytes: pkt.bytes.min(64), ..*pkt };
                match self.enqueue(t, Queued { arrival: t, pkt: header, sample: true }) {
                    Ok((c, occupancy)) => self.datapath.enqueued(t, c, occupancy),
                    Err(_) => self.metrics.samples_lost += 1,
                }
                self.collect_work(t);
            }
            return true;
        }
        let (core, occupancy, lost) = match self.enqueue(t, Queued { arrival: t, pkt: *pkt, sample: false }) {
            Ok((c, occupancy)) => {
                self.datapath.enqueued(t, c, occupancy);
                self.collect_work(t);
                (c, occupancy, false)
            }
            Err(c) => {
                self.metrics.lost_ring_full += 1;
                self.datapath.lost(t, pkt);
                (c, self.config.ring as u64, true)
            }
        };
        self.metrics.ring.saturating_record(occupancy);
        self.metrics.ring_peak = self.metrics.ring_peak.max(occupancy);
        self.record_host_arrival(t, core, occupancy, lost);
        false
    }

    /// Puts a packet on its core's ring (or straight into service on an idle core): the core
    /// and its ring's occupancy after, or the core if its ring is full.
    fn enqueue(&mut self, t: u64, q: Queued) -> Result<(usize, u64), usize> {
        let c = self.steer(&q.pkt.key, q.pkt.flow);
        if self.cores[c].serving.is_none() {
            self.cores[c].above_watch = false;
            self.start(c, t, q);
            Ok((c, 0))
        } else if self.cores[c].ring.len() < self.config.ring {
            let core = &mut self.cores[c];
            core.ring.push_back(q);
            let occupancy = core.ring.len() as u64;
            let watch = self.config.ring_watch;
            if watch > 0 {
                let above = occupancy >= watch;
                if above && !core.above_watch && self.metrics.crossings.len() < MAX_CROSSINGS {
                    self.metrics.crossings.push((t, c as u32));
                }
                core.above_watch = above;
            }
            Ok((c, occupancy))
        } else {
            Err(c)
        }
    }

    /// Whether measuring has started (the warm-up is over).
    pub fn measuring(&self) -> bool {
        self.measuring
    }

    /// Serves everything still queued (no more arrivals may follow).
    pub fn run_to_end(&mut self) {
        self.run_until(u64::MAX);
    }

    fn flush_hw_latency(&mut self) {
        let (l, n) = std::mem::take(&mut self.hw_latency_run);
        if n > 0 {
            for h in [&mut self.metrics.latency, &mut self.metrics.latency_hw] {
                // A value above the histogram's range is clamped, as `saturating_record` does.
                let _ = h.record_n(l.min(h.high()), n);
            }
        }
    }

    /// Drains the rings and returns the metrics and the datapath.
    pub fn finish(mut self) -> (Metrics, D) {
        self.run_until(u64::MAX);
        self.flush_hw_latency();
        for (i, (m, c)) in self.metrics.busy_ns.iter_mut().zip(&self.cores).enumerate() {
            *m = c.busy_ns - self.busy_at_start.get(i).copied().unwrap_or(0);
        }
        (self.metrics, self.datapath)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Exp};

    /// Every packet to the host, each taking `service_ns`.
    struct Fixed(u64);
    impl Datapath for Fixed {
        fn nic(&mut self, _: u64, _: &SimPacket) -> bool {
            false
        }
        fn host(&mut self, _: u64, _: usize, _: &SimPacket) -> u64 {
            self.0
        }
    }

    fn pkt() -> SimPacket {
        SimPacket { key: FlowKey::default(), bytes: 64, index: 0, flow: None }
    }

    fn one_core(ring: usize, service: u64) -> Simulator<Fixed> {
        let config = SimConfig { cores: 1, ring, nic_latency_ns: 0, ..SimConfig::default() };
        Simulator::new(config, Fixed(service)).unwrap()
    }

    /// M/D/1: Poisson arrivals at λ, deterministic service D. Mean time in the system is
    /// D + ρD / (2(1 − ρ)) (Pollaczek–Khinchine).
    #[test]
    fn md1_mean_latency_matches_pollaczek_khinchine() {
        for rho in [0.5, 0.8, 0.9] {
            let d = 1_000u64;
            let lambda = rho / d as f64;
            let gap = Exp::new(lambda).unwrap();
            let mut rng = StdRng::seed_from_u64(3);
            let mut sim = one_core(1 << 20, d);
            let mut t = 0.0;
            for _ in 0..400_000 {
                t += gap.sample(&mut rng);
                sim.arrive(t as u64, &pkt());
            }
            let (m, _) = sim.finish();
            let want = d as f64 + rho * d as f64 / (2.0 * (1.0 - rho));
            let got = m.latency.mean();
            assert!((got - want).abs() / want < 0.05, "ρ = {rho}: mean {got} ns, closed form {want} ns");
            assert_eq!(m.lost(), 0);
            let util = m.busy_ns[0] as f64 / (m.end_ns - m.first_ns) as f64;
            assert!((util - rho).abs() < 0.02, "utilisation {util}");
        }
    }

    /// A numbered flow goes to the core its headers hash to, from its first packet and
    /// after its core is remembered; numbers past the table's bound are hashed each time.
    #[test]
    fn numbered_flows_are_steered_as_their_headers_hash() {
        let config = SimConfig { cores: 7, ..SimConfig::default() };
        let mut sim = Simulator::new(config, Fixed(1)).unwrap();
        let key = |n: u64| {
            let mut k = FlowKey::default();
            k.words[crate::packet::field::word::NW_ADDRS as usize] = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            k
        };
        let mut cores = [0usize; 7];
        for round in 0..2 {
            for n in 0..500u32 {
                let k = key(n as u64);
                let want = sim.hashed_core(&k);
                assert_eq!(sim.steer(&k, Some(n)), want, "flow {n}, round {round}");
                cores[want] += round;
            }
        }
        let far = FlowNumberTable::<u16>::limit() as u32;
        assert_eq!(sim.steer(&key(9), Some(far)), sim.hashed_core(&key(9)));
        assert!(sim.core_by_flow.len() <= 500);
        assert!(cores.iter().all(|&c| c > 0), "the flows spread over every core: {cores:?}");
    }

    /// The ring watch logs each rise to the mark once, until the ring drains below it.
    #[test]
    fn ring_watch_logs_each_crossing_once() {
        let config =
            SimConfig { cores: 1, ring: 100, nic_latency_ns: 0, ring_watch: 10, ..SimConfig::default() };
        let mut sim = Simulator::new(config, Fixed(1_000)).unwrap();
        // 30 at once: one in service, the tenth queued crosses; the rest stay above.
        for _ in 0..30 {
            sim.arrive(5, &pkt());
        }
        // Drained by 31 µs; the next 12 at 100 µs cross again.
        for _ in 0..12 {
            sim.arrive(100_000, &pkt());
        }
        // 9 queued: below the mark.
        for _ in 0..10 {
            sim.arrive(200_000, &pkt());
        }
        let (m, _) = sim.finish();
        assert_eq!(m.crossings, [(5, 0), (100_000, 0)]);
    }

    /// A bounded series is the fine series merged: the same counts in coarser round
    /// intervals (1 µs grown to 50 µs for 20 ms of arrivals at most 1,000 points), and within
    /// the bound.
    #[test]
    fn a_bounded_series_merges_the_fine_one() {
        let run = |series_points| {
            let config = SimConfig {
                cores: 3,
                ring: 8,
                nic_latency_ns: 0,
                interval_ns: 1_000,
                series_points,
                ..SimConfig::default()
            };
            let mut sim = Simulator::new(config, Fixed(3_000)).unwrap();
            // Bursts that overflow the rings now and then, over 20 ms, spread over the cores.
            let mut t = 0;
            for i in 0..4_000u64 {
                t += if i % 97 < 40 { 100 } else { 9_000 - (i % 13) * 500 };
                let mut p = pkt();
                p.key.set_tp_src((i % 7) as u16);
                sim.arrive(t, &p);
            }
            sim.finish().0
        };
        // Each interval's ring figures are its cores' together.
        for m in [&run(0), &run(1_000)] {
            for (i, iv) in m.series.iter().enumerate() {
                let cores: Vec<CoreInterval> = (0..3).map(|c| m.core_interval(i, c)).collect();
                assert_eq!(iv.lost, cores.iter().map(|c| c.lost).sum::<u64>());
                assert_eq!(iv.ring_max, cores.iter().map(|c| c.ring_max).max().unwrap());
            }
        }
        let fine = run(0);
        let bounded = run(1_000);
        assert_eq!(fine.interval_ns, 1_000);
        assert_eq!(bounded.interval_ns, 50_000);
        assert!(bounded.series.len() <= 1_000 && bounded.series.len() >= 200);
        let factor = (bounded.interval_ns / fine.interval_ns) as usize;
        for (i, iv) in bounded.series.iter().enumerate() {
            let part =
                &fine.series[(i * factor).min(fine.series.len())..((i + 1) * factor).min(fine.series.len())];
            assert_eq!(iv.hw, part.iter().map(|p| p.hw).sum::<u64>());
            assert_eq!(iv.sw, part.iter().map(|p| p.sw).sum::<u64>());
            assert_eq!(iv.served, part.iter().map(|p| p.served).sum::<u64>());
            assert_eq!(iv.lost, part.iter().map(|p| p.lost).sum::<u64>());
            assert_eq!(iv.ring_max, part.iter().map(|p| p.ring_max).max().unwrap_or(0));
            for c in 0..3 {
                let parts =
                    (i * factor..((i + 1) * factor).min(fine.series.len())).map(|j| fine.core_interval(j, c));
                let (lost, ring_max) = parts.fold((0, 0), |(l, r), p| (l + p.lost, r.max(p.ring_max)));
                assert_eq!(
                    (bounded.core_interval(i, c).lost, bounded.core_interval(i, c).ring_max),
                    (lost, ring_max)
                );
            }
        }
        assert!(fine.lost() > 0, "the bursts overflow the ring");
        assert!(
            (0..3).all(|c| fine.core_series.iter().skip(c).step_by(3).any(|ci| ci.ring_max > 0)),
            "all cores busy"
        );
        assert_eq!(
            bounded.complete_intervals().len(),
            ((bounded.last_ns - bounded.first_ns) / 50_000) as usize
        );
    }

    /// A burst of 100 back-to-back packets into a ring of 10 behind a core that needs 1 µs
    /// each: one in service, ten queued, 89 lost.
    #[test]
    fn a_burst_overflows_the_ring_by_a_known_count() {
        let mut sim = one_core(10, 1_000);
        for _ in 0..100 {
            sim.arrive(0, &pkt());
        }
        // Later arrivals, after the queue drained, all pass.
        for i in 0..5 {
            sim.arrive(1_000_000 + i * 10_000, &pkt());
        }
        let (m, _) = sim.finish();
        assert_eq!(m.lost(), 89);
        assert_eq!(m.sw_served, 16);
        assert_eq!(m.ring.max(), 10);
        // (HDR reports the top of the value's bucket at 3 significant digits.)
        assert!(
            m.latency.equivalent(m.latency.max(), 11_000),
            "the tenth queued packet waits for ten before it"
        );
    }

    /// Occupancy figures never exceed the ring (the histogram alone would report the top of
    /// 4,096's bucket, 4,099).
    #[test]
    fn ring_maxima_are_exact() {
        let mut sim = one_core(4_096, 1_000);
        for _ in 0..5_000 {
            sim.arrive(0, &pkt());
        }
        let (m, _) = sim.finish();
        assert!(m.ring.max() > 4_096, "the histogram rounds up: {}", m.ring.max());
        let s = m.summary();
        assert_eq!((s.ring_max, s.ring.max), (4_096, 4_096));
        assert!(s.ring.p99 <= 4_096);
        assert_eq!(m.lost(), 5_000 - 4_096 - 1);
    }

    /// A core offered 11% more than it serves loses nothing on a short input with a deep ring,
    /// but is not steady: it ends about 11% of the span behind. At 91% load it is.
    #[test]
    fn a_host_falling_behind_is_not_steady() {
        for (gap, steady) in [(900, false), (1_100, true)] {
            let mut sim = one_core(1 << 20, 1_000);
            for i in 0..10_000u64 {
                sim.arrive(i * gap, &pkt());
            }
            let (m, _) = sim.finish();
            assert_eq!(m.lost(), 0);
            assert_eq!(
                m.steady(),
                steady,
                "gap {gap} ns: drained {} ns after the last arrival",
                m.drain_ns()
            );
            assert_eq!(m.summary().steady, steady);
        }
    }

    /// Packets arriving during the warm-up are forwarded but measured in no figure: a burst
    /// that overflows the ring then is not counted, the steady traffic after it is.
    #[test]
    fn the_warm_up_is_simulated_but_not_measured() {
        let config =
            SimConfig { cores: 1, ring: 10, nic_latency_ns: 0, warmup_ns: 1_000_000, ..SimConfig::default() };
        let mut sim = Simulator::new(config, Fixed(1_000)).unwrap();
        for _ in 0..100 {
            sim.arrive(0, &pkt());
        }
        assert!(!sim.measuring());
        for i in 0..50u64 {
            sim.arrive(1_000_000 + i * 10_000, &pkt());
        }
        assert!(sim.measuring());
        let (m, _) = sim.finish();
        assert_eq!((m.packets, m.lost(), m.sw_served), (50, 0, 50), "only the packets after the warm-up");
        assert_eq!(m.latency.len(), 50);
        assert_eq!(m.first_ns, 1_000_000);
        let util = m.busy_ns[0] as f64 / (m.end_ns - m.first_ns) as f64;
        assert!(util < 0.2, "the warm-up's busy time is not counted: {util}");
    }

    #[test]
    fn bad_machines_are_refused() {
        let no_cores = SimConfig { cores: 0, ..SimConfig::default() };
        assert_eq!(Simulator::new(no_cores, Fixed(1)).err(), Some(SimConfigError::NoCores));
        let no_ring = SimConfig { ring: 0, ..SimConfig::default() };
        assert_eq!(Simulator::new(no_ring, Fixed(1)).err(), Some(SimConfigError::EmptyRing));
    }

    /// The NIC forwards everything; every host call makes one NIC table update.
    struct AllHardware {
        updates: u64,
    }
    impl Datapath for AllHardware {
        fn nic(&mut self, _: u64, _: &SimPacket) -> bool {
            true
        }
        fn host(&mut self, _: u64, _: usize, _: &SimPacket) -> u64 {
            1_000
        }
        fn sample(&mut self, _: u64, _: usize, _: &SimPacket) -> u64 {
            self.updates += 1;
            500
        }
        fn nic_updates(&self) -> u64 {
            self.updates
        }
    }

    #[test]
    fn samples_load_the_host_and_updates_stall_the_nic() {
        let config = SimConfig {
            sample_hw: 0.25,
            update_stall_ns: 10_000,
            nic_latency_ns: 1_000,
            ..SimConfig::default()
        };
        let mut sim = Simulator::new(config, AllHardware { updates: 0 }).unwrap();
        for i in 0..40_000u64 {
            sim.arrive(i * 1_000, &pkt());
        }
        let (m, dp) = sim.finish();
        assert_eq!(m.hw, 40_000);
        assert!((m.samples as f64 / 40_000.0 - 0.25).abs() < 0.01, "{} samples", m.samples);
        assert_eq!(m.samples_served + m.samples_lost, m.samples);
        assert_eq!(m.samples_lost, 0, "0.5 µs of work every 4 µs fits one core");
        assert_eq!(m.sw_served, 0, "samples are not forwarded packets");
        assert_eq!(m.latency.len(), 40_000, "latency counts forwarded packets only");
        assert_eq!(dp.updates, m.samples_served);
        // Each measured sample made an update stalling the NIC for 10 µs: with one every
        // 4 µs on average, most hardware packets wait.
        assert!(m.stalled > 30_000, "{} stalled", m.stalled);
        assert!(m.latency_hw.mean() > 2_000.0);
        let busy = m.busy_ns[0];
        assert_eq!(busy, m.samples_served * 500);
    }

    /// Every host packet makes one NIC table update (a datapath installing on every upcall).
    struct UpdatingHost(u64);
    impl Datapath for UpdatingHost {
        fn nic(&mut self, _: u64, _: &SimPacket) -> bool {
            false
        }
        fn host(&mut self, _: u64, _: usize, _: &SimPacket) -> u64 {
            self.0 += 1;
            1_000
        }
        fn nic_updates(&self) -> u64 {
            self.0
        }
    }

    /// Each table update takes `update_host_ns` from every core, idle or not: two cores, one
    /// flow (one busy core), 100 updates of 5 µs each — both cores lose 500 µs, and the busy
    /// one, given a packet every 4 µs that now costs it 6, falls behind (its packets wait tens of
    /// µs, sharing the core equally with the lost time).
    #[test]
    fn table_updates_cost_every_core_their_time() {
        let run = |update_host_ns| {
            let config = SimConfig { cores: 2, nic_latency_ns: 0, update_host_ns, ..SimConfig::default() };
            let mut sim = Simulator::new(config, UpdatingHost(0)).unwrap();
            for i in 0..100u64 {
                sim.arrive(i * 4_000, &pkt());
            }
            sim.finish().0
        };
        let free = run(0);
        let costly = run(5_000);
        assert_eq!(free.update_host_ns, 0);
        assert_eq!(costly.update_host_ns, 2 * 100 * 5_000);
        let busy: u64 = costly.busy_ns.iter().sum();
        assert_eq!(busy, free.busy_ns.iter().sum::<u64>() + 2 * 100 * 5_000);
        assert!(costly.busy_ns.iter().all(|&b| b >= 100 * 5_000), "{:?}", costly.busy_ns);
        assert_eq!(free.latency.max(), 1_000, "unloaded, a packet waits for nothing");
        assert!(costly.latency.max() > 20_000, "{} ns at most", costly.latency.max());
    }

    /// Spraying deals one flow's packets to every core in turn, where RSS keeps them on one:
    /// a flow at 1.5 cores' worth loses packets on any number of cores under RSS and none on
    /// two sprayed.
    #[test]
    fn spraying_spreads_one_flow_over_the_cores() {
        let run = |steering: Steering, cores| {
            let config = SimConfig { cores, ring: 64, nic_latency_ns: 0, steering, ..SimConfig::default() };
            let mut sim = Simulator::new(config, Fixed(1_500)).unwrap();
            for i in 0..10_000u64 {
                sim.arrive(i * 1_000, &pkt());
            }
            sim.finish().0
        };
        for cores in [2, 4] {
            let rss = run(Steering::Rss, cores);
            assert!(rss.lost() > 2_000, "{} lost", rss.lost());
            assert_eq!(rss.busy_ns.iter().filter(|&&b| b > 0).count(), 1);
        }
        let sprayed = run(Steering::Spray, 2);
        assert_eq!(sprayed.lost(), 0);
        assert_eq!(sprayed.busy_ns, vec![5_000 * 1_500, 5_000 * 1_500]);
        assert!(Steering::Spray.spreads_flows() && !Steering::Rss.spreads_flows());
    }
}
