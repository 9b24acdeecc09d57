//! CAIDA-like packet timing: which flow each packet of a trace belongs to and when it
//! arrives, with flows numbered in order of first appearance — the shape of the locality and
//! timing files the Gigaflow artifact's traffic generator replays (`docs/gigaflow-paper-setup.md`
//! §5), made by a model instead of read from CAIDA.
//!
//! **Model** (deterministic for a seed):
//! - **Flow arrivals**: a Poisson process at `flows / duration` flows per second, where
//!   `duration = packets / rate`. It starts one `duration` before the trace does, and only
//!   packets from time 0 on are kept, so the trace opens in steady state (long flows already
//!   running) rather than ramping up from an empty network.
//! - **Flow sizes**: Pareto with tail index [`TAIL_INDEX`] (heavy-tailed, as Internet flow
//!   sizes are: a few elephants carry much of the traffic) and mean `packets / flows`,
//!   rounded up to whole packets and capped at `packets`. Flows arriving at `flows / duration`
//!   with this mean size make the aggregate rate `rate`.
//! - **Bursts**: a flow sends its packets in trains of a geometric number of packets (mean
//!   [`MEAN_TRAIN`]) [`TRAIN_GAP_NS`] apart; trains are separated by exponential idle gaps
//!   (mean [`MEAN_IDLE_NS`], shortened for a flow of n packets so that it lasts at most about
//!   `duration`: mean `min(50 ms, duration × 8 / n)`). Mice live for milliseconds; elephants
//!   send faster and span the trace, so the rate holds (a flow outlasting the trace would
//!   carry its packets past the end).
//! - **Numbering**: a packet's `flow` is its flow's rank of first appearance in the kept
//!   packets (0, 1, 2, …), as the artifact's locality file numbers 5-tuples.
//!
//! The trace ends after `packets` packets.
//!
//! [`crate::input::CaptureSlots`] takes the same from a user's capture instead: its timestamps, and its
//! 5-tuples numbered in order of first appearance (as the artifact's `pcap-file-analyzer`
//! numbered CAIDA's).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp, Geometric};

use super::traffic::TrafficError;

/// Pareto tail index of flow sizes.
pub const TAIL_INDEX: f64 = 1.2;
/// Mean packets per train.
pub const MEAN_TRAIN: f64 = 8.0;
/// Gap between the packets of a train (a 64-byte packet at 10 Gb/s takes 67 ns; hosts pace
/// trains more loosely).
pub const TRAIN_GAP_NS: u64 = 10_000;
/// Mean idle gap between a flow's trains.
pub const MEAN_IDLE_NS: f64 = 50e6;

/// The model's shape: flow sizes, trains, idle gaps. [`Default`] is the model the Gigaflow
/// workloads use (the constants above, no mice, no pauses).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowArrivalsConfig {
    /// Pareto tail index of the sizes of flows that are not mice (> 1).
    pub tail_index: f64,
    /// Mean packets per train (≥ 1).
    pub mean_train: f64,
    /// Gap between the packets of a train.
    pub train_gap_ns: u64,
    /// Mean idle gap between a flow's trains.
    pub mean_idle_ns: f64,
    /// Share of flows that are mice of 1 to `mice_max` packets (uniform); the others' Pareto
    /// mean is raised so that the mean flow size stays `packets / flows`.
    pub mice_share: f64,
    /// Largest mouse.
    pub mice_max: u64,
    /// Share of the gaps between trains that are long pauses (think time, keep-alives)
    /// instead of idle gaps.
    pub pause_share: f64,
    /// Mean pause.
    pub mean_pause_ns: f64,
}

impl Default for FlowArrivalsConfig {
    fn default() -> FlowArrivalsConfig {
        FlowArrivalsConfig {
            tail_index: TAIL_INDEX,
            mean_train: MEAN_TRAIN,
            train_gap_ns: TRAIN_GAP_NS,
            mean_idle_ns: MEAN_IDLE_NS,
            mice_share: 0.0,
            mice_max: 2,
            pause_share: 0.0,
            mean_pause_ns: 0.0,
        }
    }
}

impl FlowArrivalsConfig {
    /// A backbone link as FlowShadow's Backbone-1 trace (CAIDA equinix-chicago, 5 minutes,
    /// 2.92 M flows) shows it through a microflow cache. What the paper publishes: the flow
    /// count, and hit rates of 67.59% at 1K entries, 94.22% (direct) and 95.9% (PLRU) at
    /// 100K and about 97.22% at 10M, whence about 36 packets per flow. Its sizes and gaps are
    /// not published, so the shape is fitted: half the flows are mice of 1–2 packets (as on
    /// the paper's campus traces, 66% of flows at most 2 packets), trains of 3 packets 200 µs
    /// apart set the small caches' hit rate, idle gaps of 100 ms between trains the direct-
    /// mapped conflicts at 100K, and one gap in ten being a pause of 10 s the misses that
    /// associativity cannot save. All four points were used to fit it, so matching them shows
    /// what kind of trace gives the paper's figure with hyflow's cache, not a prediction
    /// (BENCHMARKS.md, microflow hit rate).
    pub const BACKBONE: FlowArrivalsConfig = FlowArrivalsConfig {
        tail_index: TAIL_INDEX,
        mean_train: 3.0,
        train_gap_ns: 200_000,
        mean_idle_ns: 100e6,
        mice_share: 0.5,
        mice_max: 2,
        pause_share: 0.1,
        mean_pause_ns: 10e9,
    };
}

/// One packet's place in the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketSlot {
    /// Nanoseconds since the trace began.
    pub ts_ns: u64,
    /// The packet's flow, in order of first appearance.
    pub flow: usize,
}

/// A flow still sending.
#[derive(Clone, Copy, Debug)]
struct Active {
    /// Packets left, this one included.
    left: u64,
    /// Packets left in the current train, this one included.
    train_left: u64,
    /// Mean idle gap between its trains (ns).
    idle_ns: f64,
    /// Mean pause between its trains (ns).
    pause_ns: f64,
    /// Its rank of first appearance in the kept packets (`u32::MAX`: none kept yet).
    rank: u32,
}

/// The packets of the model, in time order.
pub struct FlowArrivals {
    rng: StdRng,
    packets: usize,
    emitted: usize,
    /// Next flow arrival (ns, from the start of the warm-up).
    next_arrival: f64,
    arrival_gap: Exp<f64>,
    /// Idle gaps of mean 1, scaled per flow.
    idle_gap: Exp<f64>,
    train: Geometric,
    /// Pareto x_m of the flows that are not mice.
    size_scale: f64,
    config: FlowArrivalsConfig,
    /// Pending packets: (time since the start of the warm-up, flow number).
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    flows: Vec<Active>,
    /// Ranks given so far.
    ranked: u32,
    /// Length of the warm-up (ns): packets before it are not kept. Also the trace's expected
    /// duration.
    warmup_ns: u64,
}

impl FlowArrivals {
    /// `packets` packets of about `flows` flows at a mean `rate` packets per second, shaped
    /// as [`FlowArrivalsConfig::default`].
    pub fn new(packets: usize, flows: usize, rate: f64, seed: u64) -> Result<FlowArrivals, TrafficError> {
        FlowArrivals::with_config(packets, flows, rate, seed, FlowArrivalsConfig::default())
    }

    /// The same, shaped by `config`.
    pub fn with_config(
        packets: usize,
        flows: usize,
        rate: f64,
        seed: u64,
        config: FlowArrivalsConfig,
    ) -> Result<FlowArrivals, TrafficError> {
        if packets == 0 {
            return Err(TrafficError::param("packets", "must be at least 1"));
        }
        if flows == 0 || flows > packets {
            return Err(TrafficError::param("flows-count", "must be between 1 and `packets`"));
        }
        if !(rate.is_finite() && rate > 0.0) {
            return Err(TrafficError::param("rate", "must be a positive number of packets per second"));
        }
        let c = &config;
        let finite =
            [c.tail_index, c.mean_train, c.mean_idle_ns, c.mice_share, c.pause_share, c.mean_pause_ns];
        if finite.iter().any(|v| !v.is_finite())
            || c.tail_index <= 1.0
            || c.mean_train < 1.0
            || c.mean_idle_ns < 0.0
            || c.mean_pause_ns < 0.0
            || !(0.0..1.0).contains(&c.mice_share)
            || !(0.0..=1.0).contains(&c.pause_share)
            || c.mice_max == 0
        {
            return Err(TrafficError::param(
                "timing",
                format!(
                    "{c:?} is out of range (tail index > 1, mean train ≥ 1, gaps ≥ 0, mice share in \
                     [0, 1), pause share in [0, 1], mice_max ≥ 1)"
                ),
            ));
        }
        let duration_ns = packets as f64 / rate * 1e9;
        let mean_size = packets as f64 / flows as f64;
        // The flows that are not mice make up the rest of the mean.
        let mouse = (1.0 + c.mice_max as f64) / 2.0;
        let mean_large = (mean_size - c.mice_share * mouse) / (1.0 - c.mice_share);
        if mean_large < 1.0 {
            return Err(TrafficError::param(
                "flows-count",
                format!(
                    "leaves {mean_large:.2} packets per flow beside the mice: fewer flows, or more packets"
                ),
            ));
        }
        let bad = TrafficError::param("flows-count", "gives a flow-size model out of range");
        Ok(FlowArrivals {
            rng: StdRng::seed_from_u64(seed ^ 0x6172_7269_7661_6c73),
            packets,
            emitted: 0,
            next_arrival: 0.0,
            arrival_gap: Exp::new(flows as f64 / duration_ns).map_err(|_| bad.clone())?,
            idle_gap: Exp::new(1.0).map_err(|_| bad.clone())?,
            train: Geometric::new(1.0 / c.mean_train).map_err(|_| bad.clone())?,
            // Pareto(x_m, α) has mean x_m α / (α - 1).
            size_scale: mean_large * (c.tail_index - 1.0) / c.tail_index,
            config,
            heap: BinaryHeap::new(),
            flows: Vec::new(),
            ranked: 0,
            warmup_ns: duration_ns as u64,
        })
    }

    /// Starts the next flow: its first packet is due at its arrival.
    fn start_flow(&mut self) {
        let c = self.config;
        let size = if c.mice_share > 0.0 && self.rng.random_range(0.0..1.0) < c.mice_share {
            self.rng.random_range(1..=c.mice_max)
        } else {
            let u: f64 = self.rng.random_range(f64::EPSILON..1.0);
            (self.size_scale / u.powf(1.0 / c.tail_index)).ceil().clamp(1.0, self.packets as f64) as u64
        };
        let n = self.flows.len() as u32;
        let train_left = (self.train.sample(&mut self.rng) + 1).min(size);
        // A flow of n packets waits n / train times between trains: scaled down, idle gaps
        // and pauses alike, so that it lasts at most about the trace.
        let mean_gap = (1.0 - c.pause_share) * c.mean_idle_ns + c.pause_share * c.mean_pause_ns;
        let longest = self.warmup_ns as f64 * c.mean_train / size as f64;
        let (idle_ns, pause_ns) = if c.pause_share == 0.0 {
            // Without pauses, exactly as the model always did.
            (c.mean_idle_ns.min(longest), 0.0)
        } else {
            let scale = if mean_gap > longest { longest / mean_gap } else { 1.0 };
            (c.mean_idle_ns * scale, c.mean_pause_ns * scale)
        };
        self.flows.push(Active { left: size, train_left, idle_ns, pause_ns, rank: u32::MAX });
        self.heap.push(Reverse((self.next_arrival as u64, n)));
        self.next_arrival += self.arrival_gap.sample(&mut self.rng);
    }

    /// The next packet in time, warm-up included.
    fn next_any(&mut self) -> (u64, u32) {
        // Every flow that arrives before the earliest pending packet is started first.
        while self.heap.peek().is_none_or(|Reverse((t, _))| self.next_arrival <= *t as f64) {
            self.start_flow();
        }
        let Reverse((t, n)) = self.heap.pop().expect("a flow was just started");
        let f = &mut self.flows[n as usize];
        f.left -= 1;
        f.train_left -= 1;
        if f.left > 0 {
            let c = &self.config;
            let gap = if f.train_left > 0 {
                c.train_gap_ns
            } else {
                f.train_left = (self.train.sample(&mut self.rng) + 1).min(f.left);
                let pause = c.pause_share > 0.0 && self.rng.random_range(0.0..1.0) < c.pause_share;
                let mean = if pause { f.pause_ns } else { f.idle_ns };
                c.train_gap_ns + (mean * self.idle_gap.sample(&mut self.rng)) as u64
            };
            self.heap.push(Reverse((t + gap, n)));
        }
        (t, n)
    }
}

impl Iterator for FlowArrivals {
    type Item = PacketSlot;

    fn next(&mut self) -> Option<PacketSlot> {
        if self.emitted >= self.packets {
            return None;
        }
        loop {
            let (t, n) = self.next_any();
            if t < self.warmup_ns {
                continue;
            }
            let rank = &mut self.flows[n as usize].rank;
            if *rank == u32::MAX {
                *rank = self.ranked;
                self.ranked += 1;
            }
            self.emitted += 1;
            return Some(PacketSlot { ts_ns: t - self.warmup_ns, flow: *rank as usize });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_gives_its_rate_heavy_tailed_flows_in_first_appearance_order() {
        let (packets, flows, rate) = (200_000, 20_000, 50_000.0);
        let slots: Vec<PacketSlot> = FlowArrivals::new(packets, flows, rate, 7).unwrap().collect();
        assert_eq!(slots.len(), packets);
        assert_eq!(slots, FlowArrivals::new(packets, flows, rate, 7).unwrap().collect::<Vec<_>>(), "seeded");
        assert!(slots.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns), "in time order");
        // Flows are numbered by first appearance.
        let mut seen = 0;
        for s in &slots {
            assert!(s.flow <= seen, "flow {} before flow {seen}", s.flow);
            seen = seen.max(s.flow + 1);
        }
        // Rate: steady from the start (warm-up discarded), within 15%.
        let span = slots.last().unwrap().ts_ns as f64 / 1e9;
        let got = packets as f64 / span;
        assert!((rate * 0.85..rate * 1.15).contains(&got), "rate {got}");
        let first_half = slots.iter().filter(|s| (s.ts_ns as f64) < span * 0.5e9).count() as f64;
        assert!((0.4..0.6).contains(&(first_half / packets as f64)), "first half {first_half}");
        // Heavy tail: the top 1% of flows carry a large share, many flows are mice.
        let mut sizes = vec![0usize; seen];
        slots.iter().for_each(|s| sizes[s.flow] += 1);
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        let top: usize = sizes[..seen / 100].iter().sum();
        assert!(top * 5 > packets, "top 1% of {seen} flows carry {top} packets");
        assert!(sizes.iter().filter(|&&n| n <= 3).count() * 3 > seen, "mice");
        assert!((flows / 2..flows * 2).contains(&seen), "{seen} flows");
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(FlowArrivals::new(0, 1, 1.0, 1).is_err());
        assert!(FlowArrivals::new(10, 11, 1.0, 1).is_err());
        assert!(FlowArrivals::new(10, 1, 0.0, 1).is_err());
        let with = |config| FlowArrivals::with_config(1000, 10, 1.0, 1, config).err().map(|e| e.to_string());
        let bad = FlowArrivalsConfig { tail_index: 1.0, ..FlowArrivalsConfig::default() };
        assert!(with(bad).unwrap().contains("tail index > 1"));
        let bad = FlowArrivalsConfig { pause_share: f64::NAN, ..FlowArrivalsConfig::BACKBONE };
        assert!(with(bad).unwrap().contains("out of range"));
        // At 1.2 packets per flow, half the flows being mice of 1.5 on average leave the rest
        // fewer than one each.
        let e = FlowArrivals::with_config(12, 10, 1.0, 1, FlowArrivalsConfig::BACKBONE).err().unwrap();
        assert!(e.to_string().contains("packets per flow beside the mice"), "{e}");
    }

    /// The backbone shape gives what it was built for: about half the flows mice, a heavy
    /// tail, flows' first packets about `flows / packets` of the trace, and packets of a flow
    /// close together (most gaps within a flow are a train's 200 µs).
    #[test]
    fn the_backbone_shape_has_mice_a_heavy_tail_and_trains() {
        let (packets, flows, rate) = (400_000, 10_000, 4_000.0);
        let slots: Vec<PacketSlot> =
            FlowArrivals::with_config(packets, flows, rate, 3, FlowArrivalsConfig::BACKBONE)
                .unwrap()
                .collect();
        assert_eq!(slots.len(), packets);
        let seen = slots.iter().map(|s| s.flow + 1).max().unwrap();
        assert!((flows..flows * 3 / 2).contains(&seen), "{seen} flows");
        let mut sizes = vec![0usize; seen];
        let mut last = vec![u64::MAX; seen];
        let mut train_gaps = 0;
        for s in &slots {
            sizes[s.flow] += 1;
            if last[s.flow] != u64::MAX && s.ts_ns - last[s.flow] == 200_000 {
                train_gaps += 1;
            }
            last[s.flow] = s.ts_ns;
        }
        let mice = sizes.iter().filter(|&&n| n <= 2).count() as f64 / seen as f64;
        assert!((0.4..0.65).contains(&mice), "{mice} of the flows are mice");
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        let top: usize = sizes[..seen / 100].iter().sum();
        assert!(top * 10 > packets * 3, "the top 1% of flows carry {top} of {packets} packets");
        // Trains of 3 on average: two gaps in three are within a train.
        let gaps = packets - seen;
        assert!(train_gaps * 2 > gaps, "{train_gaps} of {gaps} gaps within trains");
    }
}
