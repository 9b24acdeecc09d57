//! A run as the report draws it ([`RunRecord`]): its setup, its summary (the `--json`
//! object), and — for a simulation — its time series per tier and per core and its latency
//! distributions, plus the flows the caches held most traffic for. `replay/sim --report
//! FILE.json` writes one; `hyflow report` reads them back, so that runs made apart (a policy
//! each, a sweep's points) are drawn side by side.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use hyflow::cache::dump::DumpedFlow;
use hyflow::experiment::replay::ReplayOutcome;
use hyflow::experiment::sim::{SimExperiment, SimOutcome};
use hyflow::switch::Switch;
use hyflow::timing::Metrics;

/// The `format` of the records this version writes.
pub const FORMAT: &str = "hyflow-run/1";

/// Flows the record keeps per cache (the most packets first).
pub const TOP_FLOWS: usize = 10;

/// One run, as the report draws it (key names are an interface: the report reads them back).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    /// [`FORMAT`].
    pub format: String,
    /// `replay` or `sim`.
    pub command: String,
    /// What tells this run apart from others in a comparison (its options, short).
    pub label: String,
    /// The options given, as written (`--policy elixir`), in order.
    pub setup: Vec<String>,
    /// The run's `--json` object.
    pub summary: serde_json::Value,
    /// The time series (`sim`).
    pub series: Option<SeriesRecord>,
    /// Latency CDFs by path (`sim`): `all`, `hardware`, `software`.
    pub latency_cdf: Vec<CdfRecord>,
    /// The flows the NIC and the megaflow cache held most packets for, at the end.
    pub top_flows: Vec<FlowRecord>,
}

/// A simulation's time series: one value per complete interval, interval i starting
/// `i × interval_s` after the first measured arrival.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SeriesRecord {
    /// Interval, s.
    pub interval_s: f64,
    /// Packets the NIC forwarded.
    pub nic: Vec<u64>,
    /// Packets sent to the host's rings (served or lost).
    pub host_offered: Vec<u64>,
    /// Host packets served.
    pub host_served: Vec<u64>,
    /// Packets lost at full rings.
    pub lost: Vec<u64>,
    /// NIC entries held at the interval's end.
    pub nic_entries: Vec<u64>,
    /// NIC entries installed in the interval.
    pub nic_installs: Vec<u64>,
    /// Each ring's capacity, packets.
    pub ring_capacity: u64,
    /// Per core: its ring's largest occupancy and its losses, per interval.
    pub cores: Vec<CoreSeries>,
}

/// One core's ring over the series.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CoreSeries {
    /// Largest occupancy seen at an arrival.
    pub ring_max: Vec<u64>,
    /// Packets lost at its full ring.
    pub lost: Vec<u64>,
}

/// A latency CDF as steps: (latency µs, fraction of packets at or below).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CdfRecord {
    /// `all`, `hardware` or `software`.
    pub path: String,
    /// Packets it counts.
    pub packets: u64,
    /// The steps, rising at each recorded latency.
    pub points: Vec<(f64, f64)>,
}

/// A cached flow among the busiest.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FlowRecord {
    /// `nic` or `megaflow`.
    pub layer: String,
    /// Its match, as the dumps write it.
    #[serde(rename = "match")]
    pub matcher: String,
    /// Packets it forwarded.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Its datapath actions.
    pub actions: String,
}

impl RunRecord {
    /// The record of a replay run with the options `setup`.
    pub fn of_replay(setup: Vec<String>, outcome: &ReplayOutcome) -> Result<RunRecord> {
        let summary = serde_json::to_value(&outcome.report)?;
        Ok(RunRecord::new("replay", setup, summary, &outcome.switch, None))
    }

    /// The record of a simulation of `exp` run with the options `setup`.
    pub fn of_sim(setup: Vec<String>, outcome: &SimOutcome, exp: &SimExperiment) -> Result<RunRecord> {
        let summary = serde_json::to_value(&outcome.summary)?;
        let measured = Some((&outcome.metrics, exp.machine.ring as u64));
        Ok(RunRecord::new("sim", setup, summary, &outcome.switch, measured))
    }

    /// A record of `command` run with `setup`, summarised as `summary`, ending with `switch`
    /// (and, for a simulation, measured as `metrics` with rings of `ring_capacity`).
    fn new(
        command: &str,
        setup: Vec<String>,
        summary: serde_json::Value,
        switch: &Switch,
        metrics: Option<(&Metrics, u64)>,
    ) -> RunRecord {
        let mut top_flows = Vec::new();
        for (layer, flows) in [("nic", switch.nic_dump()), ("megaflow", switch.megaflow_dump())] {
            top_flows.extend(busiest(layer, flows));
        }
        let label = label_of(command, &setup);
        RunRecord {
            format: FORMAT.to_string(),
            command: command.to_string(),
            label,
            setup,
            summary,
            series: metrics.map(|(m, ring)| series_of(m, ring)),
            latency_cdf: metrics.map(|(m, _)| cdfs_of(m)).unwrap_or_default(),
            top_flows,
        }
    }

    /// A record read from `path`: one this module wrote, or a bare `--json` summary of
    /// `replay` or `sim` (drawn without what only a record keeps: series, CDFs, flows).
    pub fn read(path: &Path) -> Result<RunRecord> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("{}: cannot read", path.display()))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        match value.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => serde_json::from_value(value)
                .with_context(|| format!("{}: not a hyflow run record", path.display())),
            Some(other) => bail!("{}: a run record of format {other}, not {FORMAT}", path.display()),
            None => {
                let command = if value.get("policy").is_some() {
                    "sim"
                } else if value.get("nic_hits").is_some() {
                    "replay"
                } else {
                    bail!(
                        "{}: neither a run record (--report FILE.json) nor the --json of replay or sim",
                        path.display()
                    )
                };
                let name = path.file_stem().map_or_else(String::new, |s| s.to_string_lossy().to_string());
                Ok(RunRecord {
                    format: FORMAT.to_string(),
                    command: command.to_string(),
                    label: format!("{command} ({name})"),
                    setup: Vec::new(),
                    summary: value,
                    series: None,
                    latency_cdf: Vec::new(),
                    top_flows: Vec::new(),
                })
            }
        }
    }
}

/// `command` and the options that set it apart, short: `sim --policy elixir --cores 2`, input
/// files by their name (`--trace bursty.pcap`).
fn label_of(command: &str, setup: &[String]) -> String {
    // File options say where inputs are, not what was run: the label leaves them out.
    const FILES: [&str; 10] = [
        "--report",
        "--json",
        "--decisions",
        "--timeseries",
        "--plot",
        "--dump-megaflows",
        "--dump-nic",
        "--ports",
        "--tables",
        "--groups",
    ];
    let mut kept = vec![command.to_string()];
    let mut skip = false;
    for a in setup {
        if skip {
            skip = false;
            continue;
        }
        let name = a.split('=').next().unwrap_or(a);
        if FILES.contains(&name) {
            skip = !a.contains('=');
            continue;
        }
        // An input's file by its name: where it sits says nothing about the run.
        kept.push(match a.rsplit_once('/') {
            Some((_, file)) if !a.starts_with("gen:") => file.to_string(),
            _ => a.clone(),
        });
    }
    kept.join(" ")
}

fn busiest(layer: &str, mut flows: Vec<DumpedFlow>) -> Vec<FlowRecord> {
    flows.sort_by_key(|f| std::cmp::Reverse(f.stats.packets));
    flows.truncate(TOP_FLOWS);
    flows
        .into_iter()
        .map(|f| FlowRecord {
            layer: layer.to_string(),
            matcher: f.match_text(),
            packets: f.stats.packets,
            bytes: f.stats.bytes,
            actions: f.actions,
        })
        .collect()
}

fn series_of(m: &Metrics, ring_capacity: u64) -> SeriesRecord {
    let intervals = m.complete_intervals();
    let interval_s = m.interval_ns as f64 / 1e9;
    let col = |f: fn(&hyflow::timing::Interval) -> u64| intervals.iter().map(f).collect::<Vec<u64>>();
    let cores = (0..m.busy_ns.len())
        .map(|c| CoreSeries {
            ring_max: (0..intervals.len()).map(|i| m.core_interval(i, c).ring_max).collect(),
            lost: (0..intervals.len()).map(|i| m.core_interval(i, c).lost).collect(),
        })
        .collect();
    SeriesRecord {
        interval_s,
        nic: col(|iv| iv.hw),
        host_offered: col(|iv| iv.sw),
        host_served: col(|iv| iv.served),
        lost: col(|iv| iv.lost),
        nic_entries: col(|iv| iv.nic_entries),
        nic_installs: m.nic_installs_by_interval(),
        ring_capacity,
        cores,
    }
}

fn cdfs_of(m: &Metrics) -> Vec<CdfRecord> {
    [("all", &m.latency), ("hardware", &m.latency_hw), ("software", &m.latency_sw)]
        .into_iter()
        .filter(|(_, h)| !h.is_empty())
        .map(|(path, h)| CdfRecord { path: path.to_string(), packets: h.len(), points: step_cdf(h) })
        .collect()
}

/// The CDF of a latency histogram (ns) as a step function in µs: flat between recorded
/// values, rising at each; it starts at the smallest latency, not at zero.
pub fn step_cdf(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let total = h.len() as f64;
    let mut seen = 0u64;
    let mut points = Vec::new();
    for v in h.iter_recorded() {
        let x = h.highest_equivalent(v.value_iterated_to()) as f64 / 1e3;
        points.push((x, seen as f64 / total));
        seen += v.count_since_last_iteration();
        points.push((x, seen as f64 / total));
    }
    points
}
