//! Replaying a workload through the switch: where every packet was handled.

use super::{ExperimentError, Progress, Workload};
use crate::host_time::WallClock;
use crate::input::PacketSource;
use crate::invalid_param::InvalidParam;
use crate::openflow::report::OutputRecords;
use crate::openflow::traversal::Output;
use crate::replay_report::{ReplayReport, SteadyShares};
use crate::switch::{Layer, Switch, SwitchConfig};
use crate::timing::switch_datapath::SimDecision;
use crate::update_schedule::Replay;

/// How to replay.
#[derive(Clone, Debug, Default)]
pub struct ReplayConfig {
    /// The switch's layers.
    pub switch: SwitchConfig,
    /// Measure host wall-clock timings (NIC install and revalidation time). They appear in
    /// the report's timing fields and nowhere else; leave off for a fully deterministic report.
    pub time_host: bool,
    /// Also count where packets went from this trace time on (the report's `steady`); the
    /// main figures count from the first packet, warm-up included.
    pub warmup_ns: Option<u64>,
}

/// One packet's fate, handed to the caller as the replay goes.
#[derive(Clone, Copy, Debug)]
pub struct PacketDecision<'a> {
    /// Index of the packet in the input (0-based).
    pub index: u64,
    /// The layer that decided.
    pub layer: Layer,
    /// The copies that left.
    pub outputs: &'a [Output],
    /// How far the input has been read.
    pub progress: Progress,
}

/// One packet's fate, as `hyflow replay --decisions` writes it (one JSON line each).
#[derive(Clone, Debug, serde::Serialize)]
pub struct DecisionRecord<'a> {
    /// Index of the packet in the input.
    pub i: u64,
    /// When it was decided, ns of trace time (`sim` only: software decides after a queue).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t_ns: Option<u64>,
    /// The layer that decided (`lost`: dropped at a full ring, in `sim`).
    pub layer: &'static str,
    /// The copies that left.
    pub outputs: OutputRecords<'a>,
    /// Whether none left.
    pub drop: bool,
}

impl<'a> DecisionRecord<'a> {
    /// Packet `index`, decided by `layer`, leaving as `outputs`.
    pub fn new(index: u64, layer: Layer, outputs: &'a [Output]) -> DecisionRecord<'a> {
        DecisionRecord {
            i: index,
            t_ns: None,
            layer: layer.name(),
            outputs: OutputRecords(outputs),
            drop: outputs.is_empty(),
        }
    }
}

impl<'a> From<&'a SimDecision> for DecisionRecord<'a> {
    fn from(d: &'a SimDecision) -> DecisionRecord<'a> {
        DecisionRecord {
            i: d.index,
            t_ns: Some(d.t_ns),
            layer: d.layer.map_or("lost", Layer::name),
            outputs: OutputRecords(&d.outputs),
            drop: d.outputs.is_empty(),
        }
    }
}

/// What a replay produced.
pub struct ReplayOutcome {
    /// Where packets were handled.
    pub report: ReplayReport,
    /// The switch at the end (rules and their counters, caches).
    pub switch: Switch,
}

/// Replays `workload` through a switch configured by `config`, calling `on_packet` after each
/// packet (an error from it stops the replay and is returned).
pub fn run(
    workload: &Workload,
    config: &ReplayConfig,
    on_packet: &mut dyn FnMut(&PacketDecision) -> std::io::Result<()>,
) -> Result<ReplayOutcome, ExperimentError> {
    let mut switch = Switch::new(workload.pipeline(), config.switch.clone())?;
    if config.time_host {
        switch.time_host(Box::new(WallClock::default()));
    }
    let mut source = PacketSource::open(&workload.input, &workload.rules)?;
    let mut replay = Replay::new(switch, workload.updates.clone());
    let mut outputs = Vec::new();
    let mut index = 0;
    let mut steady = [0u64; 4];
    while let Some(p) = source.next_packet()? {
        let layer = replay.packet(p.ts_ns, &p.key, p.bytes as u64, &mut outputs);
        if config.warmup_ns.is_some_and(|w| p.ts_ns >= w) {
            steady[layer as usize] += 1;
        }
        on_packet(&PacketDecision { index, layer, outputs: &outputs, progress: source.progress() })?;
        index += 1;
    }
    let (switch, elapsed_ns) = replay.finish();
    if let Some(w) = config.warmup_ns.filter(|&w| w > elapsed_ns) {
        return Err(ExperimentError::Param(InvalidParam::new(
            "warmup",
            format!(
                "{} s is past the input's end ({:.3} s of trace): give less than that",
                w as f64 / 1e9,
                elapsed_ns as f64 / 1e9
            ),
        )));
    }
    let mut report = ReplayReport::new(&switch, source.malformed(), source.snaplen_truncated(), elapsed_ns);
    report.steady = config.warmup_ns.map(|w| SteadyShares::new(w, steady));
    report.capture_cut = source.cut().cloned();
    Ok(ReplayOutcome { report, switch })
}
