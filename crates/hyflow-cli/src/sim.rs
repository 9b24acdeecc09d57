//! `hyflow sim` and `hyflow calibrate`: what forwarding a workload costs in time, cores, loss.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde_json::json;

use hyflow::gen::{builtin, generate};
use hyflow::measure::KeySpec;
use hyflow::openflow::update::Update;
use hyflow::openflow::{Pipeline, Rule};
use hyflow::packet::{parse_frame, FlowKey, LinkKind};
use hyflow::sim::costs::{calibrate, CostModel};
use hyflow::sim::datapath::{DatapathStats, NicUpdates, OffloadPolicy, Policy, SwitchDatapath};
use hyflow::sim::search::{max_rate, min_cores};
use hyflow::sim::{Metrics, SimConfig, SimPacket, Simulator, Steering};
use hyflow::switch::{NicConfig, SwitchConfig};
use hyflow::trace::TraceReader;

use crate::replay::{nic_config, read_trace, switch_config, workload, Progress};
use crate::{NicArg, SwitchArgs};

#[derive(Args)]
pub struct SimArgs {
    #[command(flatten)]
    switch: SwitchArgs,
    /// What the NIC holds: psf (nothing: pure software forwarding), offload-all (every new
    /// megaflow while there is room, as OVS offload), gigaflow (sub-traversals in
    /// --nic-tables stages). Replaces --nic/--no-nic; --nic-entries, --nic-masks,
    /// --nic-tables and --partition size the NIC.
    #[arg(long, default_value = "offload-all", value_name = "POLICY")]
    policy: String,
    /// Host cores, each with its own receive ring.
    #[arg(long, default_value_t = 1, value_name = "N")]
    cores: usize,
    /// Receive ring capacity per core, packets.
    #[arg(long, default_value_t = 65_536, value_name = "N")]
    ring: usize,
    /// Replay at this average rate (packets/s), rescaling the trace's timestamps.
    #[arg(long, value_name = "PPS")]
    rate: Option<f64>,
    /// Stop after this many seconds of (rescaled) trace time.
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Cost model file (JSON, as `hyflow calibrate` writes); default: the built-in calibration.
    #[arg(long, value_name = "FILE")]
    costs: Option<PathBuf>,
    /// NIC latency, µs: hits leave after it, misses reach the rings after it.
    #[arg(long, default_value_t = 2.0, value_name = "US")]
    nic_latency: f64,
    /// Steering of host-bound packets: rss (5-tuple) or comma-separated fields to hash.
    #[arg(long, default_value = "rss", value_name = "FIELDS")]
    steer: String,
    /// NIC table updates per second (0 = unlimited).
    #[arg(long, default_value_t = 2_000.0, value_name = "N")]
    nic_updates: f64,
    /// µs from a NIC install to the first packet the entry forwards (Elixir: ~67 µs on a
    /// ConnectX-5).
    #[arg(long, default_value_t = 67.0, value_name = "US")]
    nic_update_latency: f64,
    /// NIC forwarding stalls this many µs per table update (throughput lost to frequent
    /// updates); hardware packets arriving meanwhile wait.
    #[arg(long, default_value_t = 0.0, value_name = "US")]
    update_stall: f64,
    /// Fraction of hardware-forwarded packets whose header is also sent to the host for
    /// measurement (each costs the host rx + sample work).
    #[arg(long, default_value_t = 0.0, value_name = "R")]
    sample_hw: f64,
    /// Write plots to DIR (PNG and SVG): software and hardware packet rate over time, ring
    /// occupancy over time, latency CDF.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// Search instead of one run: min-cores (fewest cores with no loss at the rate) or
    /// max-rate (highest rate with no loss on --cores, bisection to 1%).
    #[arg(long, value_name = "WHAT")]
    find: Option<String>,
    /// Upper bound of the searches: cores for min-cores.
    #[arg(long, default_value_t = 64, value_name = "N")]
    max_cores: usize,
    /// Summary as one JSON object to FILE (`-` for stdout); nothing host-dependent in it.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Time series as CSV: per interval, software/hardware packet rates, losses, ring maximum.
    #[arg(long, value_name = "FILE")]
    timeseries: Option<PathBuf>,
    /// Time-series interval, ms.
    #[arg(long, default_value_t = 10.0, value_name = "MS")]
    interval: f64,
}

#[derive(Args)]
pub struct CalibrateArgs {
    /// Write the measured cost model here (JSON).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

pub fn run_calibrate(a: CalibrateArgs) -> Result<()> {
    let costs = calibrate();
    costs.check()?;
    let text = serde_json::to_string_pretty(&costs)?;
    std::fs::write(&a.out, format!("{text}\n"))
        .with_context(|| format!("{}: cannot write", a.out.display()))?;
    for (name, v) in costs.entries() {
        println!("{name:>18} {v:>10.1}");
    }
    println!("wrote {}", a.out.display());
    Ok(())
}

/// One simulation's inputs, fixed across the runs of a search.
struct Setup {
    rules: Vec<Rule>,
    updates: Vec<Update>,
    switch: SwitchConfig,
    policy: Policy,
    costs: CostModel,
    machine: SimConfig,
    limits: NicUpdates,
    trace: Option<PathBuf>,
    in_port: Option<u32>,
    /// Time scale applied to the input's timestamps for --rate.
    natural_rate: f64,
    duration_ns: Option<u64>,
}

/// Packets of the input, in order, as (ns since the first, packet), until `f` returns false.
/// Returns the malformed frames seen (forwarded on what was parsed, as `replay` does).
fn for_each_input(setup: &Setup, mut f: impl FnMut(u64, SimPacket) -> bool) -> Result<u64> {
    match &setup.trace {
        Some(path) => {
            let mut first = None;
            read_trace(path, setup.in_port, None, |ts, key, bytes, _| {
                let t0 = *first.get_or_insert(ts);
                Ok(f(ts.saturating_sub(t0), SimPacket { key: *key, bytes }))
            })
        }
        None => {
            let port = setup.in_port.unwrap_or(1);
            let mut key = FlowKey::default();
            let mut stopped = false;
            generate(&setup.rules, &builtin::TRAFFIC, |p| {
                if !stopped {
                    let _ = parse_frame(&p.frame, LinkKind::Ethernet, port, &mut key);
                    stopped = !f(p.ts_ns, SimPacket { key, bytes: p.frame.len() as u32 + 4 });
                }
                Ok(())
            })??;
            Ok(0)
        }
    }
}

/// Packets and span of the input (a first pass over timestamps only, for --rate).
fn natural_rate(setup: &Setup) -> Result<f64> {
    let (mut n, mut first, mut last) = (0u64, None, 0u64);
    match &setup.trace {
        Some(path) => {
            let mut reader = TraceReader::open(path)?;
            while let Some(pkt) = reader.next_packet()? {
                n += 1;
                let t0 = *first.get_or_insert(pkt.ts_ns);
                last = pkt.ts_ns.saturating_sub(t0);
            }
        }
        None => {
            for_each_input(setup, |t, _| {
                n += 1;
                last = t;
                true
            })?;
        }
    }
    if n < 2 || last == 0 {
        bail!("the input has fewer than two packets with distinct timestamps: no rate to rescale");
    }
    Ok((n - 1) as f64 * 1e9 / last as f64)
}

/// One deterministic run at `rate` (or the input's own) on `cores`.
fn simulate(setup: &Setup, cores: usize, rate: Option<f64>, progress: bool) -> Result<(Metrics, Stats)> {
    let pipeline = Pipeline::from_rules(setup.rules.clone());
    let datapath = SwitchDatapath::new(
        pipeline,
        setup.switch,
        setup.policy,
        setup.costs,
        setup.updates.clone(),
        setup.limits,
    )?;
    let machine = SimConfig { cores, ..setup.machine.clone() };
    let mut sim = Simulator::new(machine, datapath)?;
    let scale = rate.map_or(1.0, |r| setup.natural_rate / r);
    let bar = progress.then(|| Progress::new(0, "{spinner} sim {pos} packets {msg}"));
    let mut n = 0u64;
    let end = setup.duration_ns.unwrap_or(u64::MAX);
    let malformed = for_each_input(setup, |t, pkt| {
        let t = (t as f64 * scale) as u64;
        if t >= end {
            return false;
        }
        n += 1;
        if let Some(b) = &bar {
            b.tick(n, n);
        }
        sim.arrive(t, pkt);
        true
    })?;
    if let Some(b) = bar {
        b.finish();
    }
    let (metrics, datapath) = sim.finish();
    let sw = datapath.switch();
    let stats = Stats {
        datapath: datapath.stats(),
        nic_installs: sw.nic_installs(),
        stale: sw.stats().stale,
        nic_entries: sw.nic_report().map_or((0, 0), |r| (r.entries_now, r.totals.peak)),
        malformed,
    };
    Ok((metrics, stats))
}

/// Whether a run loses nothing; a run that fails keeps its error in `failed` (the first)
/// and counts as lossy, so that searches stop.
fn lossless(setup: &Setup, cores: usize, rate: Option<f64>, failed: &mut Option<anyhow::Error>) -> bool {
    if failed.is_some() {
        return false;
    }
    match simulate(setup, cores, rate, false) {
        Ok((m, _)) => m.lost() == 0,
        Err(e) => {
            *failed = Some(e);
            false
        }
    }
}

/// Datapath and switch counters for the summary.
struct Stats {
    datapath: DatapathStats,
    nic_installs: u64,
    stale: u64,
    /// NIC entries at the end, and at most.
    nic_entries: (usize, usize),
    malformed: u64,
}

fn summary(setup: &Setup, m: &Metrics, s: &Stats, rate: Option<f64>) -> serde_json::Value {
    let mut v = m.json();
    let obj = v.as_object_mut().expect("an object");
    obj.insert("policy".into(), json!(setup.policy.name()));
    if let Some(r) = rate {
        obj.insert("rate_target_pps".into(), json!(r));
    }
    obj.insert(
        "host".into(),
        json!({
            "microflow_hits": s.datapath.microflow,
            "megaflow_hits": s.datapath.megaflow,
            "upcalls": s.datapath.upcalls,
        }),
    );
    obj.insert(
        "nic".into(),
        json!({
            "installs": s.nic_installs,
            "entries": s.nic_entries.0,
            "entries_peak": s.nic_entries.1,
            "installs_refused_rate_cap": s.datapath.installs_capped,
            "updates_per_s_cap": setup.limits.per_second,
            "update_latency_us": setup.limits.latency_ns as f64 / 1e3,
            "update_rate": if m.last_ns > m.first_ns { s.nic_installs as f64 * 1e9 / (m.last_ns - m.first_ns) as f64 } else { 0.0 },
        }),
    );
    obj.insert("rule_updates".into(), json!(s.datapath.rule_updates));
    obj.insert("malformed".into(), json!(s.malformed));
    obj.insert("stale".into(), json!(s.stale));
    obj.insert("costs_ns".into(), json!(setup.costs));
    v
}

fn print_text(v: &serde_json::Value) {
    let l = &v["latency_us"];
    println!(
        "{} packets at {} pkt/s, policy {}: {:.1}% in hardware; lost {} ({:.3}%)",
        v["packets"],
        v["rate_pps"],
        v["policy"].as_str().unwrap_or(""),
        v["hw_share"].as_f64().unwrap_or(0.0) * 100.0,
        v["lost"],
        v["loss_rate"].as_f64().unwrap_or(0.0) * 100.0
    );
    println!(
        "latency µs: mean {} p50 {} p99 {} p99.9 {} max {}",
        l["mean"], l["p50"], l["p99"], l["p999"], l["max"]
    );
    println!("  software path: mean {} p99 {}", v["latency_sw_us"]["mean"], v["latency_sw_us"]["p99"]);
    println!("ring occupancy: mean {} p99 {} max {}", v["ring"]["mean"], v["ring"]["p99"], v["ring"]["max"]);
    println!("cores {} utilisation {}", v["cores"], v["core_utilisation"]);
    println!(
        "host: {} microflow hits, {} megaflow hits, {} upcalls; NIC installs {} ({} refused for the update cap)",
        v["host"]["microflow_hits"],
        v["host"]["megaflow_hits"],
        v["host"]["upcalls"],
        v["nic"]["installs"],
        v["nic"]["installs_refused_rate_cap"]
    );
}

fn write_series(path: &Path, m: &Metrics, interval_ns: u64) -> Result<()> {
    let mut out = crate::replay::create(path)?;
    writeln!(out, "t_s,sw_pps,hw_pps,served_pps,lost,ring_max")?;
    let per_s = 1e9 / interval_ns as f64;
    for (i, iv) in m.series.iter().enumerate() {
        writeln!(
            out,
            "{:.6},{:.0},{:.0},{:.0},{},{}",
            (i as u64 * interval_ns) as f64 / 1e9,
            iv.sw as f64 * per_s,
            iv.hw as f64 * per_s,
            iv.served as f64 * per_s,
            iv.lost,
            iv.ring_max
        )?;
    }
    out.flush()?;
    Ok(())
}

pub fn run(a: SimArgs) -> Result<()> {
    let base = switch_config(&a.switch)?;
    let policy = match a.policy.as_str() {
        "psf" => Policy::Psf,
        "offload-all" => match nic_config(&a.switch, NicArg::Megaflow) {
            NicConfig::Megaflow { entries, max_masks } => Policy::OffloadAll { entries, max_masks },
            NicConfig::Gigaflow(_) => unreachable!("asked for a megaflow NIC"),
        },
        "gigaflow" => match nic_config(&a.switch, NicArg::Gigaflow) {
            NicConfig::Gigaflow(g) => Policy::Gigaflow(g),
            NicConfig::Megaflow { .. } => unreachable!("asked for a Gigaflow NIC"),
        },
        other => bail!("unknown policy '{other}' (one of: psf, offload-all, gigaflow)"),
    };
    if let Some(r) = a.rate {
        if !(r.is_finite() && r > 0.0) {
            bail!("--rate must be a positive number of packets per second, not {r}");
        }
    }
    let duration_ns = match a.duration {
        Some(d) if !(d.is_finite() && d > 0.0) => {
            bail!("--duration must be a positive number of seconds, not {d}")
        }
        Some(d) => Some((d * 1e9) as u64),
        None => None,
    };
    if !(a.nic_latency.is_finite() && a.nic_latency >= 0.0) {
        bail!("--nic-latency must be ≥ 0 µs, not {}", a.nic_latency);
    }
    if !(a.nic_updates.is_finite() && a.nic_updates >= 0.0) {
        bail!("--nic-updates must be ≥ 0 per second, not {}", a.nic_updates);
    }
    if !(a.nic_update_latency.is_finite() && a.nic_update_latency >= 0.0) {
        bail!("--nic-update-latency must be ≥ 0 µs, not {}", a.nic_update_latency);
    }
    if !(a.update_stall.is_finite() && a.update_stall >= 0.0) {
        bail!("--update-stall must be ≥ 0 µs, not {}", a.update_stall);
    }
    if !(0.0..=1.0).contains(&a.sample_hw) {
        bail!("--sample-hw must be in [0, 1], not {}", a.sample_hw);
    }
    if !(a.interval.is_finite() && a.interval > 0.0) {
        bail!("--interval must be a positive number of milliseconds, not {}", a.interval);
    }
    let costs = match &a.costs {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("{}: cannot read", p.display()))?;
            CostModel::from_json(&text).map_err(|e| anyhow!("{}: {e}", p.display()))?
        }
        None => CostModel::default(),
    };
    let steering = match a.steer.as_str() {
        "rss" => Steering::Rss,
        fields => Steering::Fields(KeySpec::parse(fields).map_err(|e| anyhow!("--steer: {e}"))?),
    };
    let (rules, updates) = workload(&a.switch)?;
    let interval_ns = (a.interval * 1e6) as u64;
    let mut setup = Setup {
        rules,
        updates,
        switch: base,
        policy,
        costs,
        machine: SimConfig {
            cores: a.cores,
            ring: a.ring,
            nic_latency_ns: (a.nic_latency * 1e3) as u64,
            steering,
            interval_ns: if a.timeseries.is_some() || a.plot.is_some() { interval_ns.max(1) } else { 0 },
            sample_hw: a.sample_hw,
            update_stall_ns: (a.update_stall * 1e3) as u64,
            seed: 1,
        },
        limits: NicUpdates {
            per_second: a.nic_updates,
            latency_ns: (a.nic_update_latency * 1e3) as u64,
            ..NicUpdates::default()
        },
        trace: a.switch.trace.clone(),
        in_port: a.switch.in_port,
        natural_rate: 0.0,
        duration_ns,
    };
    let rescale = a.rate.is_some() || a.find.as_deref() == Some("max-rate");
    if rescale {
        setup.natural_rate = natural_rate(&setup)?;
    }
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (value, metrics) = match a.find.as_deref() {
        None => {
            let (m, s) = simulate(&setup, a.cores, a.rate, terminal)?;
            (summary(&setup, &m, &s, a.rate), m)
        }
        Some("min-cores") => {
            let mut failed = None;
            let found = min_cores(a.max_cores, |c| lossless(&setup, c, a.rate, &mut failed));
            if let Some(e) = failed {
                return Err(e);
            }
            let Some(cores) = found else {
                bail!("loses packets even on --max-cores {} cores", a.max_cores);
            };
            let (m, s) = simulate(&setup, cores, a.rate, false)?;
            let mut v = summary(&setup, &m, &s, a.rate);
            v["min_cores"] = json!(cores);
            (v, m)
        }
        Some("max-rate") => {
            // 1 Gpps: far above what host cores or a NIC forward; the bisection is logarithmic.
            let ceiling = (setup.natural_rate * 10.0).max(1e9);
            let mut failed = None;
            let found = max_rate(ceiling, 0.01, |r| lossless(&setup, a.cores, Some(r), &mut failed));
            if let Some(e) = failed {
                return Err(e);
            }
            let Some(rate) = found else {
                bail!("loses packets at every rate tried on {} cores", a.cores);
            };
            let rate = rate.round();
            let (m, s) = simulate(&setup, a.cores, Some(rate), false)?;
            let mut v = summary(&setup, &m, &s, Some(rate));
            v["max_rate_pps"] = json!(rate);
            (v, m)
        }
        Some(other) => bail!("unknown --find '{other}' (min-cores or max-rate)"),
    };
    print_text(&value);
    if let Some(c) = value.get("min_cores") {
        println!("min cores without loss: {c}");
    }
    if let Some(r) = value.get("max_rate_pps") {
        println!("max rate without loss: {r} pkt/s");
    }
    if let Some(p) = &a.json {
        let mut out = crate::replay::create(p)?;
        writeln!(out, "{value}")?;
        out.flush()?;
    }
    if let Some(p) = &a.timeseries {
        write_series(p, &metrics, setup.machine.interval_ns)?;
    }
    if let Some(dir) = &a.plot {
        crate::plot::write_plots(dir, &metrics, setup.machine.interval_ns, setup.policy.name())?;
    }
    Ok(())
}
