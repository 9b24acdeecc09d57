//! Real-time large flows of an input, and how well each detector finds them against the exact
//! sliding-window answer.

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::{ExperimentError, OnProgress};
use crate::capture::CaptureCut;
use crate::flow_number_table::FlowNumberTable;
use crate::input::{Input, PacketSource};
use crate::measure::{
    build, Algo, Boundary, ConfigError, DetectorConfig, FlowId, KeySpec, Monitor, Scored, Span,
};
use crate::packet::FlowKey;

/// Which flows, how they are measured, and where the window's blocks end.
#[derive(Clone, Debug)]
pub struct TopkConfig {
    /// The detector.
    pub algo: Algo,
    /// Its k, memory, window (in blocks), sampling and seed.
    pub detector: DetectorConfig,
    /// The fields that make a flow.
    pub key: KeySpec,
    /// One block of the sliding window (time or packets).
    pub block: Span,
}

/// A flow's key fields, by name in key order (serialized as a map).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowFields(pub Vec<(&'static str, String)>);

impl Serialize for FlowFields {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            // Numbers as numbers (ports, protocols); addresses and hex values as text.
            match value.parse::<u64>() {
                Ok(n) if n.to_string() == *value => map.serialize_entry(name, &n)?,
                _ => map.serialize_entry(name, value)?,
            }
        }
        map.end()
    }
}

/// One of the top flows at a boundary.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TopFlow {
    /// Its key fields.
    pub key: FlowFields,
    /// Packets in the window.
    pub count: u64,
}

/// The top-k flows of the window ending at a block boundary (one `topk --json` line).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TopkReport {
    /// Seconds since the first packet (with packet windows, the time of the last packet).
    pub t: f64,
    /// Packets seen so far.
    pub packets: u64,
    /// The flows, largest first.
    pub flows: Vec<TopFlow>,
    /// Why there are fewer than k flows; absent when there are k.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub short: Option<Shortfall>,
}

/// Why a report names fewer than k flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Shortfall {
    /// The detector holds only `held` flows, fewer than k: fewer distinct flows came by
    /// since it started counting (or since its last restart, for the tumbling detectors).
    FewerFlowsSeen {
        /// Flows the detector holds.
        held: usize,
    },
    /// The detector holds `held` flows (at least k), but the others' window estimates are 0:
    /// their packets have left the window.
    EstimatesAtZero {
        /// Flows the detector holds.
        held: usize,
    },
}

impl Shortfall {
    /// Why `reported` flows and not k, given the flows the detector held; `None` if there
    /// are k.
    pub fn of(reported: usize, k: usize, held: usize) -> Option<Shortfall> {
        match () {
            _ if reported >= k => None,
            _ if held < k => Some(Shortfall::FewerFlowsSeen { held }),
            _ => Some(Shortfall::EstimatesAtZero { held }),
        }
    }
}

impl std::fmt::Display for Shortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shortfall::FewerFlowsSeen { held } => write!(f, "the detector has seen only {held} flows"),
            Shortfall::EstimatesAtZero { held } => {
                write!(f, "of the {held} flows it holds, the others have no packets left in the window")
            }
        }
    }
}

/// What a top-k run read and used.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TopkSummary {
    /// Packets read.
    pub packets: u64,
    /// Of those, malformed (not counted).
    pub malformed: u64,
    /// Of those, well-formed but without the key's fields (not counted).
    pub keyless: u64,
    /// Of those, IPv6 packets (an IPv4 key skips them).
    pub keyless_ipv6: u64,
    /// Packets cut to the capture's snapshot length (read from their headers, counted).
    pub snaplen_truncated: u64,
    /// Bytes the detector used, at the end of the run.
    pub memory_used: usize,
    /// Where the capture was found cut mid-record, if it was: the run read its complete
    /// packets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_cut: Option<CaptureCut>,
}

/// Each packet of `input` as (ns since the first packet, flow id under `key`; none for a
/// malformed frame or one without the key's fields), reporting progress. Returns what the
/// input held beyond the packets.
fn for_each_flow(
    input: &Input,
    key: &KeySpec,
    progress: OnProgress,
    mut f: impl FnMut(u64, Option<FlowId>),
) -> Result<InputCounts, ExperimentError> {
    let mut source = PacketSource::open(input, &[])?;
    let mut ipv6_keyless = 0;
    // A numbered flow's id is extracted from its headers once: its later packets neither
    // copy the headers out of the input nor extract the id again.
    let mut by_number = FlowNumberTable::new(None);
    source.remembering_flows();
    loop {
        let mut remembered = None;
        let Some(p) = source.next_packet_with(|n| {
            remembered = by_number.get(Some(n)).flatten();
            remembered.is_none()
        })?
        else {
            break;
        };
        let ts_ns = p.ts_ns;
        let flow = if p.malformed.is_some() {
            None
        } else {
            let of = remembered.unwrap_or_else(|| {
                let of = FlowOf::extract(key, &p.key);
                by_number.remember(p.flow, Some(of));
                of
            });
            ipv6_keyless += of.ipv6_keyless as u64;
            of.id
        };
        if let Some(ahead) = source.flow_ahead() {
            by_number.prefetch(ahead);
        }
        f(ts_ns, flow);
        if progress(source.packets(), source.progress()).is_break() {
            return Err(ExperimentError::Interrupted);
        }
    }
    Ok(InputCounts {
        malformed: source.malformed().total(),
        snaplen_truncated: source.snaplen_truncated(),
        ipv6_keyless,
        cut: source.cut().cloned(),
    })
}

/// What a well-formed packet's headers give the top-k monitor: its flow id, or none and
/// whether for being IPv6 (counted apart: the default key is IPv4's 5-tuple).
#[derive(Clone, Copy, Debug, PartialEq)]
struct FlowOf {
    id: Option<FlowId>,
    ipv6_keyless: bool,
}

impl FlowOf {
    fn extract(spec: &KeySpec, key: &FlowKey) -> FlowOf {
        let id = spec.flow_id(key);
        FlowOf { id, ipv6_keyless: id.is_none() && key.dl_type() == crate::packet::field::proto::ETH_IPV6 }
    }
}

/// What an input held beyond its packets' flows.
struct InputCounts {
    malformed: u64,
    snaplen_truncated: u64,
    /// Well-formed IPv6 packets without a flow id.
    ipv6_keyless: u64,
    cut: Option<CaptureCut>,
}

/// Runs the detector over `input`, calling `on_report` at every block boundary (an error from
/// it stops the run and is returned).
pub fn topk(
    input: &Input,
    config: &TopkConfig,
    progress: OnProgress,
    on_report: &mut dyn FnMut(&TopkReport) -> std::io::Result<()>,
) -> Result<TopkSummary, ExperimentError> {
    let detector = build(config.algo, &config.detector)?;
    let mut monitor = Monitor::new(detector, config.key, config.block);
    let mut failed = Ok(());
    let key = &config.key;
    let mut report = |at: Boundary, top: &[(FlowId, u64)]| {
        if failed.is_ok() {
            let flows = top.iter().map(|&(f, count)| TopFlow { key: FlowFields(key.fields_of(f)), count });
            let flows: Vec<TopFlow> = flows.collect();
            let short = Shortfall::of(flows.len(), config.detector.k, at.held);
            let r = TopkReport { t: at.t_ns as f64 / 1e9, packets: at.packets, flows, short };
            failed = on_report(&r);
        }
    };
    let counts = for_each_flow(input, key, progress, |ts, flow| monitor.flow(ts, flow, &mut report))?;
    monitor.finish(&mut report);
    failed?;
    Ok(TopkSummary {
        packets: monitor.packets(),
        malformed: counts.malformed,
        keyless: monitor.keyless - counts.malformed,
        keyless_ipv6: counts.ipv6_keyless,
        snaplen_truncated: counts.snaplen_truncated,
        memory_used: monitor.detector().memory_bytes(),
        capture_cut: counts.cut,
    })
}

/// A grid of detectors to score: every algorithm × memory × k.
#[derive(Clone, Debug)]
pub struct EvalConfig {
    /// Algorithms.
    pub algos: Vec<Algo>,
    /// Memory budgets, bytes.
    pub memories: Vec<usize>,
    /// Values of k.
    pub ks: Vec<usize>,
    /// Blocks per window.
    pub blocks: usize,
    /// One block.
    pub block: Span,
    /// Share of packets each detector counts, (0, 1].
    pub sample: f64,
    /// Seed.
    pub seed: u64,
    /// The fields that make a flow.
    pub key: KeySpec,
}

/// One detector's score (one `eval topk --json` line). A budget too small for the detector is
/// a row with `error` set and no figures.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct EvalRow {
    /// Algorithm.
    pub algo: &'static str,
    /// Memory budget, bytes.
    pub memory_bytes: usize,
    /// Bytes it used, of the budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_used: Option<usize>,
    /// k.
    pub k: usize,
    /// Mean precision over full windows: the share of the reported top-k that is in the
    /// exact top-k (0–1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<f64>,
    /// Mean average relative error of the reported counts (a fraction: 0.1 is 10%).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub are: Option<f64>,
    /// Full windows scored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows: Option<u64>,
    /// Share of packets the detector counted, (0, 1].
    pub sample: f64,
    /// Why it could not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why it ran but has no score (no full window in the trace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// Scores every detector of the grid on `input` against the exact sliding-window top-k.
/// Every configuration is checked before the input is read: a budget too small for one
/// algorithm is a row saying so; any other error stops here.
pub fn eval(
    input: &Input,
    config: &EvalConfig,
    progress: OnProgress,
) -> Result<EvalOutcome, ExperimentError> {
    let mut grid = Vec::new();
    for &algo in &config.algos {
        for &memory in &config.memories {
            for &k in &config.ks {
                let detector = DetectorConfig {
                    k,
                    memory,
                    blocks: config.blocks,
                    sample: config.sample,
                    seed: config.seed,
                    key_bits: config.key.bits(),
                };
                let fits = match build(algo, &detector) {
                    Ok(_) => Ok(()),
                    Err(e @ ConfigError::TooSmall { .. }) => Err(e),
                    Err(e) => return Err(e.into()),
                };
                grid.push((algo, detector, fits));
            }
        }
    }
    // The stream once, as (time, flow id): 32 bytes a packet.
    let mut stream: Vec<(u64, Option<FlowId>)> = Vec::new();
    let counts = for_each_flow(input, &config.key, progress, |ts, flow| stream.push((ts, flow)))?;
    let mut rows = Vec::with_capacity(grid.len());
    for (algo, detector, fits) in grid {
        let mut row = EvalRow {
            algo: algo.name(),
            memory_bytes: detector.memory,
            memory_used: None,
            k: detector.k,
            precision: None,
            are: None,
            windows: None,
            sample: detector.sample,
            error: None,
            warning: None,
        };
        if let Err(e) = fits {
            rows.push(EvalRow { error: Some(e.to_string()), ..row });
            continue;
        }
        let scored = Scored::new(build(algo, &detector)?, detector.k, config.blocks);
        let mut monitor = Monitor::new(scored, config.key, config.block);
        let mut ignore = |_: Boundary, _: &[(FlowId, u64)]| {};
        for &(ts, flow) in &stream {
            monitor.flow(ts, flow, &mut ignore);
        }
        monitor.finish(&mut ignore);
        let scored = monitor.detector();
        row.memory_used = Some(scored.inner().memory_bytes());
        row.windows = Some(scored.score.windows);
        if scored.score.windows == 0 {
            // A precision over no window would read as 0: say why there is none.
            row.warning = Some(format!(
                "no full window: the trace is shorter than one window ({} blocks)",
                config.blocks
            ));
        } else {
            row.precision = Some(scored.score.precision());
            row.are = Some(scored.score.are());
        }
        rows.push(row);
    }
    Ok(EvalOutcome { rows, capture_cut: counts.cut })
}

/// Every detector's score, and where the capture was found cut, if it was (the scores are
/// over its complete packets).
#[derive(Clone, Debug, PartialEq)]
pub struct EvalOutcome {
    /// One row per detector of the grid, in its order.
    pub rows: Vec<EvalRow>,
    /// Where the capture ended mid-record.
    pub capture_cut: Option<CaptureCut>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::gateway::GatewayConfig;

    /// Generated gateway traffic numbers its flows: `for_each_flow` extracts each flow's id
    /// once and copies no key afterwards; the ids must be those of every packet's own key.
    #[test]
    fn numbered_gateway_flows_give_every_packets_own_id() {
        let config = GatewayConfig {
            flows: 500,
            rate: 50_000.0,
            duration_ns: 500_000_000,
            ..GatewayConfig::default()
        };
        let input = Input::Gateway(config);
        let key = KeySpec::five_tuple();
        let mut seen = Vec::new();
        for_each_flow(&input, &key, &mut crate::experiment::unwatched, |ts, flow| seen.push((ts, flow)))
            .unwrap();
        let mut source = PacketSource::open(&input, &[]).unwrap();
        let mut parsed = Vec::new();
        while let Some(p) = source.next_packet().unwrap() {
            assert!(p.flow.is_some(), "gateway packets carry their flow's number");
            parsed.push((p.ts_ns, key.flow_id(&p.key)));
        }
        assert!(parsed.len() > 20_000, "{} packets", parsed.len());
        assert_eq!(seen, parsed);
    }
}
