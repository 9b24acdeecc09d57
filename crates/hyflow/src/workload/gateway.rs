//! Cloud-gateway traffic: a model of the traces Elixir measured (§2.1, §5.1), generated as a
//! stream so that minutes at tens of Mpps need no file. Deterministic for a seed.
//!
//! **Flows.** `flows` steady flows and `bursty_flows` bursty ones, all IPv4 (TCP 80%, UDP
//! 20%) from tenant addresses 10.t.x.y (t < 64) to service addresses 198.18.d.h (d < 64, one
//! of 16 service ports), from ephemeral ports, arriving on the uplink: the 5-tuples the
//! gateway pipeline of `examples/gateway.flows` decides on. Flows that start among the top
//! 10%, and bursty flows, go to a bulk-transfer port (443, 1935, 8443, 9092) 70% of the time:
//! first packets carry some signal about flow size, as first-packet predictors assume.
//!
//! **Skew (§5.1: the top 10% of flows carry 91% of the traffic).** Steady flows' rates are
//! Zipf–Mandelbrot over their ranks, (rank + q)^−s with q = `head` × flows, the exponent s
//! found by bisection so that the top 10% of ranks carry `top_share` of the steady packets.
//! A pure Zipf law (q = 0) calibrated to 91% puts 12–15% of all packets on the largest flow:
//! 7–8 Mpps at 56 Mpps, more than a core forwards, where the paper's pure software forwarding
//! needs 11 cores (Fig. 13), so no flow of its trace exceeds a core. The offset flattens the
//! head: with the default 0.001 the largest flow carries 0.1% of 500,000 flows' packets
//! (about 50 kpps at 56 Mpps), 7.5% of 5,000 flows'.
//!
//! **Changing large flows (Fig. 1).** Over every `churn_period_ns`, `churn_fraction` of the top
//! 10% of ranks swap flows with ranks drawn uniformly from the rest — continuously, a hundredth
//! of a period's swaps at a time: those flows stop being large and as many others become
//! large, and the accumulated change grows steadily with time as in Fig. 1.
//!
//! **Bursts (Fig. 2, §2.1).** A bursty flow is quiet except in bursts: it sends at its peak
//! rate (log-uniform over `burst_peak_share` of `rate`) for a duration uniform over
//! `burst_duration_ns`, then stays off for an exponential time of mean (b − 1) × duration,
//! with its burst ratio b (peak over average rate) uniform over `burst_ratio`: 20 to 80 as in
//! Fig. 2a. With the defaults about 300 / 43 ≈ 7 flows burst at once on average, a few dozen
//! at most (Fig. 2b). Peaks reach 10% of `rate` (5.6 Mpps at 56 Mpps, more than half of what a
//! core forwards): RSS pins a flow to one core, so a burst or two overload that core's ring
//! whatever the number of cores — the cost of bursts Elixir measured (Fig. 3b: one bursty
//! flow needed 4 cores where a stable flow of 5× its average rate needed one). On average
//! bursts carry about 17% of the packets. The bursts are scheduled before the first packet
//! (their own random stream), and in every second of the traffic the steady flows send what
//! the bursts leave of `rate`: the input offers `rate` in every whole second, as a replayer
//! at a fixed rate does, and bursts change which flows carry it, not the total (a second whose
//! bursts alone exceed `rate` owes the excess to the next). Small steady flows also
//! have high burst ratios over 1-second windows, as the paper's do: a flow of a few packets
//! a minute peaks at one or two in some second.
//!
//! **Arrivals and sizes.** Packets form a Poisson process whose rate is piecewise constant
//! between events (burst starts and ends, churns, seconds); each goes to a bursty flow in a burst
//! with probability its share of the rate, else to a steady flow by its rank's weight (an
//! alias table: constant time). Sizes follow CAIDA's trimodal mix of 64, 576 and 1500 bytes.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp};

use super::traffic::frame_len;
use crate::packet::build::build_frame;
use crate::packet::field::{id, proto};
use crate::packet::{parse_frame, FlowKey, LinkKind};
use crate::prefetch::prefetch;

/// Steps a churn period is spread over: large flows change continuously, not all at once.
const CHURN_STEPS: u64 = 100;

/// The longest traffic: a day (its per-second steady rates are kept).
const MAX_DURATION_NS: u64 = 86_400 * 1_000_000_000;

/// The most bursts a traffic schedules (they are drawn before the first packet).
const MAX_BURSTS: u64 = 10_000_000;

/// The windows in each of which the traffic offers `rate`: a second, the span of a
/// replayer's rate and of the paper's per-second figures.
const RATE_WINDOW_NS: u64 = 1_000_000_000;

/// The model's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GatewayConfig {
    /// Steady flows.
    pub flows: usize,
    /// Bursty flows.
    pub bursty_flows: usize,
    /// Average packets per second.
    pub rate: f64,
    /// Length of the traffic, ns.
    pub duration_ns: u64,
    /// Share of the steady packets carried by the top 10% of steady flows.
    pub top_share: f64,
    /// Zipf–Mandelbrot offset of the ranks, as a share of `flows` (0: pure Zipf).
    pub head: f64,
    /// Time between churns of the large flows, ns.
    pub churn_period_ns: u64,
    /// Share of the top 10% of ranks that change flows at each churn.
    pub churn_fraction: f64,
    /// Burst ratio (peak over average rate) range of bursty flows.
    pub burst_ratio: (f64, f64),
    /// Burst duration range, ns.
    pub burst_duration_ns: (u64, u64),
    /// Peak rate range of bursty flows, as shares of `rate` (drawn log-uniformly).
    pub burst_peak_share: (f64, f64),
    /// Input port of every packet.
    pub in_port: u32,
    /// RNG seed.
    pub seed: u64,
}

/// The default fits a laptop: 50,000 steady and 300 bursty flows at 500 kpps for 4 s (2 M
/// packets, two seconds to simulate, a handful of bursts), the large set churning every 2 s.
/// The paper's scale is asked for ([`GatewayConfig::elixir_scale`]).
impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            flows: 50_000,
            bursty_flows: 300,
            rate: 500e3,
            duration_ns: 4_000_000_000,
            top_share: 0.91,
            head: 0.001,
            churn_period_ns: 2_000_000_000,
            churn_fraction: 0.2,
            burst_ratio: (20.0, 80.0),
            burst_duration_ns: (200_000_000, 3_000_000_000),
            burst_peak_share: (0.002, 0.1),
            in_port: 1,
            seed: 1,
        }
    }
}

/// The spelling of gateway traffic where a capture is expected (`--trace`).
pub const SPEC_PREFIX: &str = "gen:gateway";

/// The presets `preset=NAME` names: the default, and Elixir's scale.
pub const PRESETS: [&str; 2] = ["laptop", "elixir"];

impl GatewayConfig {
    /// Elixir's cloud gateway (§2.1): 500,000 steady and 300 bursty flows at 56 Mpps for
    /// 60 s: 3.36 G packets, an hour or more to simulate on one core.
    pub fn elixir_scale() -> GatewayConfig {
        GatewayConfig {
            flows: 500_000,
            bursty_flows: 300,
            rate: 56e6,
            duration_ns: 60_000_000_000,
            churn_period_ns: 10_000_000_000,
            ..GatewayConfig::default()
        }
    }

    /// The preset `name` ([`PRESETS`]).
    pub fn preset(name: &str) -> Option<GatewayConfig> {
        match name {
            "laptop" => Some(GatewayConfig::default()),
            "elixir" => Some(GatewayConfig::elixir_scale()),
            _ => None,
        }
    }

    /// Parses `gen:gateway[,KEY=VALUE...]` (keys: preset (laptop, elixir: where the other
    /// keys start, wherever it stands), flows, bursty, rate in packets/s, duration in seconds,
    /// top-share, churn in seconds, seed, in-port, and the bursts' shape — burst-peak (shares
    /// of rate), burst-ratio, burst-duration (seconds) — each `X` or a range `LOW..HIGH`);
    /// `None` if `spec` is not gateway traffic at all.
    pub fn parse(spec: &str) -> Option<Result<GatewayConfig, String>> {
        let rest = spec.strip_prefix(SPEC_PREFIX)?;
        if !(rest.is_empty() || rest.starts_with(',')) {
            return None;
        }
        let items = || rest.split(',').filter(|s| !s.is_empty());
        let preset = items().filter_map(|item| item.strip_prefix("preset=")).next_back();
        let mut c = match preset.map(|name| (name, GatewayConfig::preset(name))) {
            None => GatewayConfig::default(),
            Some((_, Some(c))) => c,
            Some((name, None)) => {
                return Some(Err(format!("preset={name} in {spec}: presets are {}", PRESETS.join(", "))))
            }
        };
        for item in items().filter(|item| !item.starts_with("preset=")) {
            let Some((k, v)) = item.split_once('=') else {
                return Some(Err(format!("'{item}' in {spec}: expected KEY=VALUE")));
            };
            let num = |v: &str| v.parse::<f64>().map_err(|_| format!("{k}={v} in {spec}: not a number"));
            let whole =
                |v: &str| v.parse::<u64>().map_err(|_| format!("{k}={v} in {spec}: not a whole number"));
            let range = |v: &str| -> Result<(f64, f64), String> {
                match v.split_once("..") {
                    Some((lo, hi)) => Ok((num(lo)?, num(hi)?)),
                    None => num(v).map(|x| (x, x)),
                }
            };
            let seconds = |(lo, hi): (f64, f64)| {
                ((lo * 1e9).round().max(0.0) as u64, (hi * 1e9).round().max(0.0) as u64)
            };
            let r = (|| -> Result<(), String> {
                match k {
                    "flows" => c.flows = whole(v)? as usize,
                    "bursty" => c.bursty_flows = whole(v)? as usize,
                    "rate" => c.rate = num(v)?,
                    "duration" => c.duration_ns = (num(v)? * 1e9).round().max(0.0) as u64,
                    "top-share" => c.top_share = num(v)?,
                    "head" => c.head = num(v)?,
                    "churn" => c.churn_period_ns = (num(v)? * 1e9).round().max(0.0) as u64,
                    "seed" => c.seed = whole(v)?,
                    "in-port" => c.in_port = whole(v)? as u32,
                    "burst-peak" => c.burst_peak_share = range(v)?,
                    "burst-ratio" => c.burst_ratio = range(v)?,
                    "burst-duration" => c.burst_duration_ns = seconds(range(v)?),
                    _ => {
                        return Err(format!(
                            "unknown key '{k}' in {spec} (preset, flows, bursty, rate, duration, top-share, head, churn, \
                             seed, in-port, burst-peak, burst-ratio, burst-duration)"
                        ))
                    }
                }
                Ok(())
            })();
            if let Err(e) = r {
                return Some(Err(e));
            }
        }
        Some(c.check().map(|_| c))
    }

    /// Checks every parameter, naming its option.
    pub fn check(&self) -> Result<(), String> {
        if self.flows < 10 {
            return Err(format!("flows must be at least 10, not {}", self.flows));
        }
        let most = super::traffic::MAX_FLOWS;
        if self.flows.saturating_add(self.bursty_flows) > most {
            return Err(format!(
                "flows and bursty flows come to at most {most}, not {}",
                self.flows.saturating_add(self.bursty_flows)
            ));
        }
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(format!("rate must be a positive packet rate, not {}", self.rate));
        }
        if self.duration_ns == 0 || self.duration_ns > MAX_DURATION_NS {
            return Err(format!(
                "duration must be positive and at most {} s, not {} s",
                MAX_DURATION_NS / 1_000_000_000,
                self.duration_ns as f64 / 1e9
            ));
        }
        if !(self.top_share > 0.1 && self.top_share < 1.0) {
            return Err(format!("top-share must be in (0.1, 1), not {}", self.top_share));
        }
        if !(self.head >= 0.0 && self.head <= 1.0) {
            return Err(format!("head must be in [0, 1], not {}", self.head));
        }
        if self.churn_period_ns == 0 || !(0.0..=1.0).contains(&self.churn_fraction) {
            return Err("churn period must be positive and churn fraction in [0, 1]".to_string());
        }
        let (r0, r1) = self.burst_ratio;
        if !(r0 > 1.0 && r0 <= r1 && r1.is_finite()) {
            return Err(format!("burst ratios must satisfy 1 < low ≤ high, not {r0}..{r1}"));
        }
        let (d0, d1) = self.burst_duration_ns;
        if d0 == 0 || d0 > d1 {
            return Err("burst durations must satisfy 0 < low ≤ high".to_string());
        }
        let (p0, p1) = self.burst_peak_share;
        if !(p0 > 0.0 && p0 <= p1 && p1 <= 1.0) {
            return Err(format!("burst peak shares must satisfy 0 < low ≤ high ≤ 1, not {p0}..{p1}"));
        }
        // The schedule is made up front: bound its length (each burst is at least d0 long and
        // its flow then off for (r0 − 1) × the mean duration on average).
        let cycle_ns = (d0 as f64).max(r0 * (d0 + d1) as f64 / 2.0);
        let bursts = self.bursty_flows as f64 * (self.duration_ns as f64 / cycle_ns + 1.0);
        if bursts > MAX_BURSTS as f64 {
            return Err(format!(
                "about {bursts:.0} bursts (more than {MAX_BURSTS}): fewer bursty flows, longer bursts or a shorter \
                 duration"
            ));
        }
        if self.expected_burst_rate() >= self.rate {
            return Err(
                "the bursty flows alone would exceed the average rate: fewer or smaller bursts".to_string()
            );
        }
        Ok(())
    }

    /// Average packet rate of all bursty flows: each sends peak / ratio on average.
    pub(crate) fn expected_burst_rate(&self) -> f64 {
        let (p0, p1) = self.burst_peak_share;
        let mean_peak = if p1 > p0 { (p1 - p0) / (p1 / p0).ln() } else { p0 } * self.rate;
        let (r0, r1) = self.burst_ratio;
        let mean_inv_ratio = if r1 > r0 { (r1 / r0).ln() / (r1 - r0) } else { 1.0 / r0 };
        self.bursty_flows as f64 * mean_peak * mean_inv_ratio
    }
}

/// The exponent s whose weights (rank + `offset`)^−s give the top 10% of `n` ranks `share`
/// of the total.
fn zipf_exponent(n: usize, offset: f64, share: f64) -> f64 {
    let top = (n / 10).max(1);
    let share_at = |s: f64| {
        let w = |k: usize| (k as f64 + offset).powf(-s);
        let head: f64 = (1..=top).map(w).sum();
        head / (head + ((top + 1)..=n).map(w).sum::<f64>())
    };
    let (mut lo, mut hi) = (0.0f64, 8.0f64);
    for _ in 0..50 {
        let mid = (lo + hi) / 2.0;
        if share_at(mid) < share {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// The steady flows' ranks: Walker's alias table over them (constant-time draws from fixed
/// weights), with the flow now at each rank (churn permutes them) kept beside the rank's
/// column, so that a draw reads one 16-byte slot (two when it takes the alias, a heavy rank's,
/// which stays in cache) — at 500,000 flows the table is 8 MB, and three separate arrays cost
/// three cache misses a packet.
struct RankTable {
    slots: Vec<RankSlot>,
}

/// One rank's column of the alias table and the flow at that rank.
#[derive(Clone, Copy)]
struct RankSlot {
    prob: f64,
    alias: u32,
    flow: u32,
}

impl RankTable {
    /// Ranks weighted by `weights`, rank r held by flow r.
    fn new(weights: &[f64]) -> RankTable {
        let n = weights.len();
        let total: f64 = weights.iter().sum();
        let mut prob: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut alias = vec![0u32; n];
        let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| prob[i] < 1.0);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            alias[s] = l as u32;
            prob[l] -= 1.0 - prob[s];
            if prob[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        for i in small.into_iter().chain(large) {
            prob[i] = 1.0;
        }
        let slots = (0..n).map(|i| RankSlot { prob: prob[i], alias: alias[i], flow: i as u32 }).collect();
        RankTable { slots }
    }

    /// A rank drawn by weight, as the draw's random column and coin, to be resolved by
    /// [`RankTable::flow`] (the column's slot is prefetched meanwhile).
    #[inline]
    fn draw(&self, rng: &mut StdRng) -> (u32, f64) {
        let column = rng.random_range(0..self.slots.len());
        let coin = rng.random::<f64>();
        prefetch(&self.slots[column], std::mem::size_of::<RankSlot>());
        (column as u32, coin)
    }

    /// The flow at the rank a draw gave: the column's own, or its alias's.
    #[inline]
    fn flow(&self, (column, coin): (u32, f64)) -> u32 {
        let slot = &self.slots[column as usize];
        if coin < slot.prob {
            slot.flow
        } else {
            self.slots[slot.alias as usize].flow
        }
    }

    fn len(&self) -> usize {
        self.slots.len()
    }

    /// Swaps the flows at ranks `a` and `b`.
    fn swap_flows(&mut self, a: usize, b: usize) {
        let flow_a = self.slots[a].flow;
        self.slots[a].flow = self.slots[b].flow;
        self.slots[b].flow = flow_a;
    }
}

/// One burst as generated: the ground truth a policy's burst handling is judged against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BurstSpan {
    /// The bursty flow ([`Gateway::key`]).
    pub flow: u32,
    /// When it starts and ends, ns since the start of the traffic.
    pub start_ns: u64,
    /// When it ends (it sends nothing from then until its next burst).
    pub end_ns: u64,
    /// Its rate during the burst, packets/s.
    pub peak_pps: f64,
}

/// One packet of gateway traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatewayPacket {
    /// Nanoseconds since the start.
    pub ts_ns: u64,
    /// The flow: steady flows first, then bursty ones ([`Gateway::key`]).
    pub flow: u32,
    /// The burst it belongs to: an index into [`Gateway::burst_log`].
    pub burst: Option<u32>,
    /// Bytes on the wire.
    pub bytes: u32,
}

/// A burst starting or ending (its index in the schedule), a churn, or a new rate window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Churn,
    Start(u32),
    End(u32),
    Window,
}

/// The traffic, one packet at a time.
pub struct Gateway {
    config: GatewayConfig,
    keys: Vec<FlowKey>,
    rng: StdRng,
    /// The steady flows by rank (churn permutes them).
    ranks: RankTable,
    /// Bursting now: indices in `schedule`.
    active: Vec<u32>,
    /// Every burst of the traffic, in start order; the first `started` have begun.
    schedule: Vec<BurstSpan>,
    started: usize,
    active_rate: f64,
    /// The steady flows' rate in each window ([`RATE_WINDOW_NS`]); `window` is the current one.
    steady_rates: Vec<f64>,
    window: usize,
    events: BinaryHeap<Reverse<(u64, Event)>>,
    t_ns: f64,
    /// Swaps owed by the continuous churn (fractions carry over).
    churn_debt: f64,
    /// Packets drawn and not given yet.
    ahead: DrawnAhead,
    /// How many packets it draws ahead, and how many of those have their flows resolved
    /// ([`DRAW_AHEAD`], [`RESOLVE_AHEAD`]; 1 and 1 in tests: nothing ahead).
    draw_ahead: usize,
    resolve_ahead: usize,
    /// Whether a resolved flow's key is fetched ahead: off for a reader that reads a flow's
    /// key only on its first packets.
    fetch_keys_ahead: bool,
    /// The draws have ended (the last packet may not be given yet).
    drawn_all: bool,
    /// Bursts started and bursting as of the last packet given (or of the end, once given).
    given_started: usize,
    given_bursting: usize,
}

/// Packets the generator draws ahead of the one it gives. A steady packet's flow is drawn as
/// a column of the rank table and its coin, the column's slot prefetched; the slot is read,
/// and the flow's key prefetched, once the packet is [`RESOLVE_AHEAD`] from being given. At
/// Elixir's scale both tables are far larger than the CPU's caches (8 MB of ranks, 112 MB of
/// keys), and these two loads, each a cache miss, were most of the generator's cost and the
/// largest part of reading a packet. Drawing ahead changes nothing given: the draws are made
/// in the same order, a churn resolves every packet drawn before it first, and what the model
/// says of its bursts is as of the packets given. Once it has ended it stays ended (drawing
/// one at a time, it would draw more packets if asked again).
const DRAW_AHEAD: usize = 8;
/// See [`DRAW_AHEAD`].
const RESOLVE_AHEAD: usize = 4;

/// A packet drawn ahead.
#[derive(Clone, Copy, Debug)]
struct Drawn {
    ts_ns: u64,
    bytes: u32,
    burst: Option<u32>,
    pick: Pick,
    /// Bursts started, and bursting, when it was drawn.
    started: u32,
    bursting: u32,
}

/// Whose packet a drawn one is.
#[derive(Clone, Copy, Debug)]
enum Pick {
    Flow(u32),
    /// A rank table draw ([`RankTable::draw`]) not resolved yet.
    Rank(u32, f64),
}

/// Packets drawn ahead, oldest first, the first `resolved` with their flows known.
#[derive(Debug)]
struct DrawnAhead {
    slots: [Drawn; DRAW_AHEAD],
    head: usize,
    len: usize,
    resolved: usize,
}

impl DrawnAhead {
    fn new() -> DrawnAhead {
        let empty = Drawn { ts_ns: 0, bytes: 0, burst: None, pick: Pick::Flow(0), started: 0, bursting: 0 };
        DrawnAhead { slots: [empty; DRAW_AHEAD], head: 0, len: 0, resolved: 0 }
    }

    fn push(&mut self, d: Drawn) {
        debug_assert!(self.len < DRAW_AHEAD);
        self.slots[(self.head + self.len) % DRAW_AHEAD] = d;
        self.len += 1;
    }

    /// The oldest.
    fn pop(&mut self) -> Option<Drawn> {
        if self.len == 0 {
            return None;
        }
        let d = self.slots[self.head];
        self.head = (self.head + 1) % DRAW_AHEAD;
        self.len -= 1;
        self.resolved = self.resolved.saturating_sub(1);
        Some(d)
    }

    /// The oldest packet not resolved yet, if it is among the first `within`.
    fn next_unresolved(&mut self, within: usize) -> Option<&mut Drawn> {
        if self.resolved >= within.min(self.len) {
            return None;
        }
        self.resolved += 1;
        Some(&mut self.slots[(self.head + self.resolved - 1) % DRAW_AHEAD])
    }
}

/// Service ports of bulk transfers (HTTPS, RTMP video, alternative HTTPS, Kafka): flows that
/// start large choose them more often, so a flow's first packet says something about its
/// size, as LFP assumes of real traffic.
const BULK_PORTS: [u16; 4] = [443, 1935, 8443, 9092];

/// A gateway 5-tuple, canonical (what parsing its frame gives back); `bulk`: the flow starts
/// among the large ones.
fn gateway_key(rng: &mut StdRng, in_port: u32, bulk: bool) -> FlowKey {
    const SERVICE_PORTS: [u16; 16] =
        [80, 443, 53, 123, 8080, 8443, 22, 3306, 5432, 6379, 9092, 8000, 25, 993, 5060, 1935];
    let mut k = FlowKey::default();
    k.set_in_port(in_port);
    k.set_dl_src(0x0200_0000_0000 | rng.random_range(0..0xffffu64));
    k.set_dl_dst(0x0200_0000_ff00);
    k.set_dl_type(proto::ETH_IPV4);
    let p = if rng.random_range(0..10) < 8 { proto::IP_TCP } else { proto::IP_UDP };
    k.set_nw_proto(p);
    k.set_nw_ttl(64);
    k.set_nw_src(0x0a00_0000 | rng.random_range(0..64u32) << 16 | rng.random_range(0..0xffffu32));
    k.set_nw_dst(0xc612_0000 | rng.random_range(0..64u32) << 8 | rng.random_range(1..255u32));
    k.set_tp_src(rng.random_range(1024..65535));
    let port = if bulk && rng.random_range(0..10) < 7 {
        BULK_PORTS[rng.random_range(0..BULK_PORTS.len())]
    } else {
        SERVICE_PORTS[rng.random_range(0..SERVICE_PORTS.len())]
    };
    k.set_tp_dst(port);
    if p == proto::IP_TCP {
        k.set(id::TCP_FLAGS, 0x010);
    }
    let frame = build_frame(&k, 60);
    let mut canonical = FlowKey::default();
    let _ = parse_frame(&frame, LinkKind::Ethernet, in_port, &mut canonical);
    canonical
}

impl Gateway {
    /// The traffic of `config`.
    pub fn new(config: GatewayConfig) -> Result<Gateway, String> {
        config.check()?;
        let mut rng = StdRng::seed_from_u64(config.seed ^ 0x6761_7465_7761_7921);
        let total = config.flows + config.bursty_flows;
        // Steady flows start ranked by index; bursty ones are bulk transfers too.
        let top = config.flows / 10;
        let keys: Vec<FlowKey> =
            (0..total).map(|f| gateway_key(&mut rng, config.in_port, f < top || f >= config.flows)).collect();
        let offset = config.head * config.flows as f64;
        let s = zipf_exponent(config.flows, offset, config.top_share);
        let weights: Vec<f64> = (1..=config.flows).map(|k| (k as f64 + offset).powf(-s)).collect();
        let schedule = burst_schedule(&config);
        let steady_rates = steady_rates(&config, &schedule);
        let mut events = BinaryHeap::new();
        events.push(Reverse(((config.churn_period_ns / CHURN_STEPS).max(1), Event::Churn)));
        events.push(Reverse((RATE_WINDOW_NS, Event::Window)));
        events
            .extend(schedule.iter().enumerate().map(|(i, b)| Reverse((b.start_ns, Event::Start(i as u32)))));
        Ok(Gateway {
            ranks: RankTable::new(&weights),
            keys,
            rng,
            active: Vec::new(),
            schedule,
            started: 0,
            active_rate: 0.0,
            steady_rates,
            window: 0,
            events,
            t_ns: 0.0,
            churn_debt: 0.0,
            ahead: DrawnAhead::new(),
            draw_ahead: DRAW_AHEAD,
            resolve_ahead: RESOLVE_AHEAD,
            fetch_keys_ahead: true,
            drawn_all: false,
            given_started: 0,
            given_bursting: 0,
            config,
        })
    }

    /// The traffic of `config`, drawn one packet at a time: the same generator drawing
    /// nothing ahead, which the tests hold the lookahead to.
    #[cfg(test)]
    pub(crate) fn drawing_none_ahead(config: GatewayConfig) -> Result<Gateway, String> {
        Ok(Gateway { draw_ahead: 1, resolve_ahead: 1, ..Gateway::new(config)? })
    }

    /// Resolves the flows of the packets drawn ahead up to the first `within`, prefetching
    /// each flow's key.
    #[inline]
    fn resolve(&mut self, within: usize) {
        while let Some(d) = self.ahead.next_unresolved(within) {
            let flow = match d.pick {
                Pick::Flow(f) => f,
                Pick::Rank(column, coin) => self.ranks.flow((column, coin)),
            };
            d.pick = Pick::Flow(flow);
            if self.fetch_keys_ahead {
                prefetch(&self.keys[flow as usize], std::mem::size_of::<FlowKey>());
            }
        }
    }

    /// Stops fetching the keys of packets drawn ahead: for a reader that reads a flow's key
    /// only on its first packets.
    pub fn without_keys_ahead(&mut self) {
        self.fetch_keys_ahead = false;
    }

    /// A flow's packet headers.
    pub fn key(&self, flow: u32) -> &FlowKey {
        &self.keys[flow as usize]
    }

    /// All flows' headers: steady flows first, then bursty ones.
    pub fn keys(&self) -> &[FlowKey] {
        &self.keys
    }

    /// The configuration.
    pub fn config(&self) -> &GatewayConfig {
        &self.config
    }

    /// Bursts started by the last packet given.
    pub fn bursts(&self) -> u64 {
        self.given_started as u64
    }

    /// Every burst started by the last packet given, in start order (one that is under way
    /// already has its end).
    pub fn burst_log(&self) -> &[BurstSpan] {
        &self.schedule[..self.given_started]
    }

    #[cfg(test)]
    /// Flows bursting at the last packet given.
    pub(crate) fn bursting(&self) -> usize {
        self.given_bursting
    }

    fn handle(&mut self, at: u64, event: Event) {
        match event {
            Event::Churn => {
                // Packets drawn before the churn go to the flows ranked as they were then.
                self.resolve(DRAW_AHEAD);
                // One step of a continuous churn: a period's swaps spread over CHURN_STEPS.
                let n = self.ranks.len();
                let top = (n / 10).max(1);
                self.churn_debt += top as f64 * self.config.churn_fraction / CHURN_STEPS as f64;
                while self.churn_debt >= 1.0 {
                    self.churn_debt -= 1.0;
                    let a = self.rng.random_range(0..top);
                    let b = self.rng.random_range(top..n.max(top + 1)).min(n - 1);
                    self.ranks.swap_flows(a, b);
                }
                let step = (self.config.churn_period_ns / CHURN_STEPS).max(1);
                self.events.push(Reverse((at + step, Event::Churn)));
            }
            Event::Start(i) => {
                self.started = i as usize + 1;
                self.active.push(i);
                let span = self.schedule[i as usize];
                self.active_rate += span.peak_pps;
                self.events.push(Reverse((span.end_ns, Event::End(i))));
            }
            Event::End(i) => {
                if let Some(at) = self.active.iter().position(|&a| a == i) {
                    self.active.swap_remove(at);
                }
                // A fresh sum: no rounding left behind by the burst that ended.
                let schedule = &self.schedule;
                self.active_rate = self.active.iter().map(|&a| schedule[a as usize].peak_pps).sum();
            }
            Event::Window => {
                self.window += 1;
                self.events.push(Reverse((at + RATE_WINDOW_NS, Event::Window)));
            }
        }
    }

    /// The steady flows' rate now.
    fn steady_rate(&self) -> f64 {
        self.steady_rates.get(self.window).copied().unwrap_or(0.0)
    }
}

/// Every burst of the traffic, in start order: each bursty flow from a random phase within its
/// first mean cycle, on for a duration uniform over the range, off for an exponential time of
/// mean (b − 1) × the mean duration, so that its average is its peak / b. Its own random
/// stream: the schedule does not depend on the packets drawn.
fn burst_schedule(config: &GatewayConfig) -> Vec<BurstSpan> {
    let mut rng = StdRng::seed_from_u64(config.seed ^ 0x6275_7273_7473_2121);
    let (p0, p1) = config.burst_peak_share;
    let (r0, r1) = config.burst_ratio;
    let (d0, d1) = config.burst_duration_ns;
    let mean_duration = (d0 + d1) as f64 / 2.0;
    let mut schedule = Vec::new();
    for b in 0..config.bursty_flows {
        let flow = (config.flows + b) as u32;
        let peak_pps = config.rate * p0 * (p1 / p0).powf(rng.random::<f64>());
        let ratio = rng.random_range(r0..=r1);
        let mean_off = (ratio - 1.0) * mean_duration;
        let mut start_ns = (rng.random::<f64>() * ratio * mean_duration) as u64;
        while start_ns < config.duration_ns {
            let end_ns = start_ns + rng.random_range(d0..=d1);
            schedule.push(BurstSpan { flow, start_ns, end_ns, peak_pps });
            let off = Exp::new(1.0 / mean_off).map_or(mean_off, |e| e.sample(&mut rng));
            start_ns = end_ns + off as u64;
        }
    }
    schedule.sort_by_key(|b| (b.start_ns, b.flow));
    schedule
}

/// The steady flows' rate in each window: what the window's bursts leave of `rate` (none if
/// they take it all; the excess is owed by the windows after).
fn steady_rates(config: &GatewayConfig, schedule: &[BurstSpan]) -> Vec<f64> {
    let windows = config.duration_ns.div_ceil(RATE_WINDOW_NS) as usize;
    let mut burst_packets = vec![0.0f64; windows];
    for b in schedule {
        let end = b.end_ns.min(config.duration_ns);
        let mut t = b.start_ns;
        while t < end {
            let w = (t / RATE_WINDOW_NS) as usize;
            let until = end.min((w as u64 + 1) * RATE_WINDOW_NS);
            burst_packets[w] += b.peak_pps * (until - t) as f64 / 1e9;
            t = until;
        }
    }
    let mut owed = 0.0;
    (0..windows)
        .map(|w| {
            let from = w as u64 * RATE_WINDOW_NS;
            let seconds = (config.duration_ns.min(from + RATE_WINDOW_NS) - from) as f64 / 1e9;
            let steady = config.rate * seconds - burst_packets[w] - owed;
            owed = (-steady).max(0.0);
            steady.max(0.0) / seconds
        })
        .collect()
}

impl Iterator for Gateway {
    type Item = GatewayPacket;

    fn next(&mut self) -> Option<GatewayPacket> {
        while !self.drawn_all && self.ahead.len < self.draw_ahead {
            match self.draw() {
                Some(d) => self.ahead.push(d),
                None => self.drawn_all = true,
            }
        }
        self.resolve(self.resolve_ahead);
        let Some(d) = self.ahead.pop() else {
            (self.given_started, self.given_bursting) = (self.started, self.active.len());
            return None;
        };
        (self.given_started, self.given_bursting) = (d.started as usize, d.bursting as usize);
        // Resolved above; were it not, resolving now would give the same flow, since a churn
        // resolves every packet drawn before it.
        let flow = match d.pick {
            Pick::Flow(f) => f,
            Pick::Rank(column, coin) => self.ranks.flow((column, coin)),
        };
        Some(GatewayPacket { ts_ns: d.ts_ns, flow, burst: d.burst, bytes: d.bytes })
    }
}

impl Gateway {
    /// The next packet as drawn, its flow perhaps to resolve; `None` at the end.
    fn draw(&mut self) -> Option<Drawn> {
        loop {
            let steady_rate = self.steady_rate();
            let rate = steady_rate + self.active_rate;
            let Some(&Reverse((at, event))) = self.events.peek() else { unreachable!("churn recurs") };
            // Nothing sends until the next event when the bursts took the whole window.
            let t = if rate > 0.0 {
                self.t_ns - (1.0 - self.rng.random::<f64>()).ln() / rate * 1e9
            } else {
                f64::INFINITY
            };
            if t.min(at as f64) >= self.config.duration_ns as f64 {
                return None;
            }
            if t >= at as f64 {
                // The rate changes at the event; the process is memoryless, so draw afresh.
                self.events.pop();
                self.t_ns = self.t_ns.max(at as f64);
                self.handle(at, event);
                continue;
            }
            self.t_ns = t;
            let mut pick = self.rng.random::<f64>() * rate;
            let (pick, burst) = if pick < steady_rate {
                let (column, coin) = self.ranks.draw(&mut self.rng);
                (Pick::Rank(column, coin), None)
            } else {
                pick -= steady_rate;
                let log = &self.schedule;
                let i = self.active.iter().position(|&a| {
                    pick -= log[a as usize].peak_pps;
                    pick < 0.0
                });
                let burst = self.active[i.unwrap_or(self.active.len() - 1)];
                (Pick::Flow(log[burst as usize].flow), Some(burst))
            };
            let bytes = frame_len(&mut self.rng) as u32;
            let (started, bursting) = (self.started as u32, self.active.len() as u32);
            return Some(Drawn { ts_ns: t as u64, bytes, burst, pick, started, bursting });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn small() -> GatewayConfig {
        GatewayConfig {
            flows: 20_000,
            bursty_flows: 100,
            rate: 1e6,
            duration_ns: 20_000_000_000,
            burst_duration_ns: (200_000_000, 2_000_000_000),
            // The paper's shape: its churn period.
            ..GatewayConfig::elixir_scale()
        }
    }

    /// Drawing ahead changes nothing given: at every point (none given, some, the end) the
    /// packets, the burst log and the bursts under way are those of the generator drawing
    /// one packet at a time, over seeds and shapes with many short bursts and churn steps.
    #[test]
    fn drawing_ahead_gives_what_drawing_one_at_a_time_gives() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        let mut runner = TestRunner::new(Config { cases: 200, ..Config::default() });
        let shape = (any::<u64>(), 10usize..300, 1usize..30, 1u64..40, 0u64..4_500, 0.0f64..1.0);
        runner
            .run(&shape, |(seed, flows, bursty, burst_ms, stop, churn)| {
                let config = GatewayConfig {
                    flows,
                    bursty_flows: bursty,
                    rate: 20e3,
                    duration_ns: 200_000_000,
                    churn_period_ns: 20_000_000,
                    churn_fraction: churn,
                    burst_duration_ns: (1_000_000, burst_ms * 1_000_000),
                    seed,
                    ..GatewayConfig::default()
                };
                let mut plain = Gateway::drawing_none_ahead(config).unwrap();
                let mut ahead = Gateway::new(config).unwrap();
                for given in 0..=stop {
                    prop_assert_eq!(ahead.burst_log(), plain.burst_log(), "after {} packets", given);
                    prop_assert_eq!((ahead.bursts(), ahead.bursting()), (plain.bursts(), plain.bursting()));
                    if given == stop {
                        break;
                    }
                    let (want, got) = (plain.next(), ahead.next());
                    prop_assert_eq!(got, want, "packet {}", given);
                    if want.is_none() {
                        prop_assert_eq!(ahead.burst_log(), plain.burst_log(), "at the end");
                        prop_assert_eq!(ahead.next(), None, "the end is the end");
                        break;
                    }
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn the_model_has_the_papers_shape() {
        let config = small();
        let mut g = Gateway::new(config).unwrap();
        let (mut packets, mut most_at_once) = (Vec::new(), 0);
        while let Some(p) = g.next() {
            most_at_once = most_at_once.max(g.bursting());
            packets.push(p);
        }
        assert!(g.bursts() > 30, "{} bursts", g.bursts());
        // The burst log is the ground truth: every packet of a burst is its flow's, within
        // its span, and bursty flows send nothing outside their bursts.
        let log = g.burst_log();
        let (p0, p1) = config.burst_peak_share;
        for span in log {
            assert!(span.start_ns < span.end_ns && (span.flow as usize) >= config.flows, "{span:?}");
            let share = span.peak_pps / config.rate;
            assert!(share >= p0 * 0.999 && share <= p1 * 1.001, "{span:?}");
        }
        for p in &packets {
            match p.burst {
                Some(b) => {
                    let span = log[b as usize];
                    assert_eq!(span.flow, p.flow);
                    assert!((span.start_ns..span.end_ns).contains(&p.ts_ns), "{span:?} {p:?}");
                }
                None => assert!((p.flow as usize) < config.flows, "{p:?}"),
            }
        }
        assert!((2..=20).contains(&most_at_once), "{most_at_once} flows bursting at once");
        let again: Vec<GatewayPacket> = Gateway::new(config).unwrap().collect();
        assert_eq!(packets, again, "deterministic per seed");
        assert!(packets.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
        let n = packets.len() as f64;
        // The rate asked for is offered in every second, bursts or not (Poisson: ±0.1% is 1σ).
        for second in 0..20 {
            let sent = packets.iter().filter(|p| p.ts_ns / 1_000_000_000 == second).count() as f64;
            assert!((sent - 1e6).abs() < 5_000.0, "second {second}: {sent} packets");
        }
        // Skew: the top 10% of flows carry about 91% of the packets.
        let mut per_flow: HashMap<u32, u64> = HashMap::new();
        for p in &packets {
            *per_flow.entry(p.flow).or_default() += 1;
        }
        let mut sizes: Vec<u64> = per_flow.values().copied().collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        let all_flows = 20_100;
        let top: u64 = sizes.iter().take(all_flows / 10).sum();
        let share = top as f64 / n;
        assert!((0.88..0.95).contains(&share), "top 10% share {share}");
        // Large flows change: the top 10% by 1-second windows differ between seconds 5 and 15.
        let top_in = |second: u64| {
            let mut c: HashMap<u32, u64> = HashMap::new();
            for p in packets.iter().filter(|p| p.ts_ns / 1_000_000_000 == second) {
                *c.entry(p.flow).or_default() += 1;
            }
            let mut v: Vec<(u32, u64)> = c.into_iter().collect();
            v.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            v.into_iter().take(200).map(|x| x.0).collect::<std::collections::HashSet<u32>>()
        };
        let (a, b) = (top_in(5), top_in(15));
        let kept = a.intersection(&b).count();
        assert!(kept < 190, "the 200 largest flows of two windows share {kept}");
        // Bursts: bursty flows peak (1-s rate) at 20–80× their average, a few at once.
        let mut peak: HashMap<u32, HashMap<u64, u64>> = HashMap::new();
        for p in packets.iter().filter(|p| p.flow as usize >= config.flows) {
            *peak.entry(p.flow).or_default().entry(p.ts_ns / 1_000_000_000).or_default() += 1;
        }
        let ratios: Vec<f64> = peak
            .values()
            .filter(|s| s.values().sum::<u64>() > 1_000)
            .map(|s| *s.values().max().unwrap() as f64 / (s.values().sum::<u64>() as f64 / 20.0))
            .collect();
        assert!(ratios.len() > 30, "{} bursty flows sent", ratios.len());
        let above = ratios.iter().filter(|&&r| r > 5.0).count();
        assert!(above * 10 >= ratios.len() * 8, "burst ratios {ratios:?}");
    }

    /// A second whose bursts take more than `rate` sends no steady packet and owes the rest
    /// to the next; a partial last window asks a proportional share.
    #[test]
    fn steady_flows_send_what_the_bursts_leave() {
        let config = GatewayConfig { rate: 1000.0, duration_ns: 2_500_000_000, ..GatewayConfig::default() };
        let span = |start_ns, end_ns, peak_pps| BurstSpan { flow: 0, start_ns, end_ns, peak_pps };
        // 1,500 packets in the first second (500 owed), 100 in the second and 50 in the last half.
        let schedule = [span(0, 1_000_000_000, 1500.0), span(1_000_000_000, 2_500_000_000, 100.0)];
        let rates = steady_rates(&config, &schedule);
        assert_eq!(rates.len(), 3);
        assert_eq!(rates[0], 0.0);
        assert!((rates[1] - 400.0).abs() < 1e-9, "{rates:?}");
        assert!((rates[2] - 900.0).abs() < 1e-9, "{rates:?}");
    }

    /// The traffic ends at its duration even when nothing is bursting then (no rate left to
    /// draw a next packet from).
    #[test]
    fn the_traffic_ends_at_its_duration() {
        let config = GatewayConfig {
            flows: 3000,
            bursty_flows: 0,
            rate: 50_000.0,
            duration_ns: 2_000_000_000,
            ..small()
        };
        let n = Gateway::new(config).unwrap().count() as f64;
        assert!((n - 100_000.0).abs() < 1_500.0, "{n} packets");
    }

    #[test]
    fn the_skew_exponent_meets_its_target() {
        for offset in [0.0, 10.0, 500.0] {
            for share in [0.5, 0.8, 0.91] {
                let s = zipf_exponent(10_000, offset, share);
                let w: Vec<f64> = (1..=10_000).map(|k| (k as f64 + offset).powf(-s)).collect();
                let got = w[..1000].iter().sum::<f64>() / w.iter().sum::<f64>();
                assert!((got - share).abs() < 1e-6, "{offset} {share}: {got}");
            }
        }
    }

    /// The default head keeps the largest of the paper's 500,000 flows near 0.1% of the
    /// packets, where pure Zipf would give it over 12%.
    #[test]
    fn the_head_offset_flattens_the_largest_flows() {
        let n = 500_000;
        let largest = |offset: f64| {
            let s = zipf_exponent(n, offset, 0.91);
            let total: f64 = (1..=n).map(|k| (k as f64 + offset).powf(-s)).sum();
            (1.0 + offset).powf(-s) / total
        };
        let flat = largest(GatewayConfig::default().head * n as f64);
        assert!((0.0005..0.002).contains(&flat), "{flat}");
        assert!(largest(0.0) > 0.12, "{}", largest(0.0));
    }

    #[test]
    fn specs_parse_with_defaults_and_clear_errors() {
        assert_eq!(GatewayConfig::parse("trace.pcap"), None);
        assert_eq!(GatewayConfig::parse("gen:gatewayx"), None);
        assert_eq!(GatewayConfig::parse("gen:gateway"), Some(Ok(GatewayConfig::default())));
        let c = GatewayConfig::parse("gen:gateway,flows=1000,rate=2e6,duration=1.5,seed=7").unwrap().unwrap();
        assert_eq!((c.flows, c.rate, c.duration_ns, c.seed), (1000, 2e6, 1_500_000_000, 7));
        let err = |s: &str| GatewayConfig::parse(s).unwrap().unwrap_err();
        assert!(err("gen:gateway,speed=3").contains("unknown key 'speed'"));
        let shaped = GatewayConfig::parse(
            "gen:gateway,bursty=10,burst-peak=0.2,burst-ratio=40..60,burst-duration=0.5..1",
        )
        .unwrap()
        .unwrap();
        assert_eq!(shaped.burst_peak_share, (0.2, 0.2));
        assert_eq!(shaped.burst_ratio, (40.0, 60.0));
        assert_eq!(shaped.burst_duration_ns, (500_000_000, 1_000_000_000));
        assert!(err("gen:gateway,burst-ratio=0.5").contains("burst ratios must satisfy"));
        assert!(err("gen:gateway,burst-peak=0.3..x").contains("burst-peak=0.3..x"));
        // A preset is where the other keys start, wherever it stands.
        let elixir = GatewayConfig::parse("gen:gateway,duration=2,preset=elixir").unwrap().unwrap();
        assert_eq!(elixir, GatewayConfig { duration_ns: 2_000_000_000, ..GatewayConfig::elixir_scale() });
        assert_eq!((elixir.flows, elixir.bursty_flows, elixir.rate), (500_000, 300, 56e6));
        assert_eq!(GatewayConfig::parse("gen:gateway,preset=laptop"), Some(Ok(GatewayConfig::default())));
        assert!(err("gen:gateway,preset=huge").contains("presets are laptop, elixir"));
        assert!(err("gen:gateway,rate=fast").contains("rate=fast"));
        assert!(err("gen:gateway,rate=0").contains("rate must be a positive"));
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(Gateway::new(GatewayConfig { rate: 0.0, ..small() }).is_err());
        assert!(Gateway::new(GatewayConfig { top_share: 1.0, ..small() }).is_err());
        assert!(Gateway::new(GatewayConfig { head: -1.0, ..small() }).is_err());
        assert!(Gateway::new(GatewayConfig { burst_ratio: (0.5, 2.0), ..small() }).is_err());
        let endless = GatewayConfig { duration_ns: 2 * MAX_DURATION_NS, ..small() };
        assert!(endless.check().unwrap_err().contains("at most 86400 s"));
        let flickering = GatewayConfig { burst_duration_ns: (1, 2), burst_ratio: (1.5, 2.0), ..small() };
        assert!(flickering.check().unwrap_err().contains("bursts (more than"));
        let too_bursty = GatewayConfig { bursty_flows: 100_000, ..small() };
        assert!(too_bursty.check().unwrap_err().contains("exceed the average rate"));
    }
}
