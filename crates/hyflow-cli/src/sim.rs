//! `hyflow sim` and `hyflow calibrate`: what forwarding a workload costs in time, cores, loss.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};

use crate::replay::{gigaflow_nic, megaflow_nic, switch_config, workload, Progress};
use crate::SwitchArgs;
use hyflow::experiment::sim::{search, simulate, Search, SimExperiment, SimSummary};
use hyflow::measure::KeySpec;
use hyflow::sim::costs::{calibrate, CostModel};
use hyflow::sim::datapath::{NicUpdates, OffloadPolicy, Policy};
use hyflow::sim::{Metrics, SimConfig, Steering};

/// What the NIC holds during a simulation.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PolicyArg {
    /// Nothing: pure software forwarding.
    Psf,
    /// Every new megaflow while there is room, as OVS offload.
    OffloadAll,
    /// Sub-traversals in --nic-tables stages.
    Gigaflow,
}

/// A capacity search.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FindArg {
    /// The fewest cores with no loss at the rate.
    MinCores,
    /// The highest rate with no loss on --cores (bisection to 1%).
    MaxRate,
}

#[derive(Args)]
pub struct SimArgs {
    #[command(flatten)]
    switch: SwitchArgs,
    /// What the NIC holds: psf (nothing: pure software forwarding), offload-all (every new
    /// megaflow while there is room, as OVS offload), gigaflow (sub-traversals in
    /// --nic-tables stages; each upcall also costs Gigaflow's install work). Replaces
    /// --nic/--no-nic; --nic-entries, --nic-masks, --nic-tables and --partition size the NIC.
    #[arg(long, value_enum, default_value = "offload-all", value_name = "POLICY")]
    policy: PolicyArg,
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
    #[arg(long, value_enum, value_name = "WHAT")]
    find: Option<FindArg>,
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

fn print_text(s: &SimSummary) {
    let m = &s.metrics;
    let l = &m.latency_us;
    println!(
        "{} packets at {} pkt/s, policy {}: {:.1}% in hardware; lost {} ({:.3}%)",
        m.packets,
        m.rate_pps,
        s.policy,
        m.hw_share * 100.0,
        m.lost,
        m.loss_rate * 100.0
    );
    println!("latency µs: mean {} p50 {} p99 {} p99.9 {} max {}", l.mean, l.p50, l.p99, l.p999, l.max);
    println!("  software path: mean {} p99 {}", m.latency_sw_us.mean, m.latency_sw_us.p99);
    println!("ring occupancy: mean {} p99 {} max {}", m.ring.mean, m.ring.p99, m.ring.max);
    println!("cores {} utilisation {:?}", m.cores, m.core_utilisation);
    if !m.steady {
        println!(
            "warning: the host was still catching up when the input ended (rings emptied {:.3} ms after the \
             last arrival, over {:.0}% of the input's span): these figures describe a transient, not a rate the \
             host sustains; use a longer input or a lower rate",
            m.drain_ms,
            hyflow::sim::STEADY_DRAIN_SHARE * 100.0
        );
    }
    println!(
        "host: {} microflow hits, {} megaflow hits, {} upcalls; NIC installs {} ({} refused for the update cap)",
        s.host.microflow_hits, s.host.megaflow_hits, s.host.upcalls, s.nic.installs, s.nic.installs_refused_rate_cap
    );
    println!("NIC: {} entries at the end, {} at most", s.nic.entries, s.nic.entries_peak);
    if s.nic.installs_refused_rate_cap > 0 {
        println!(
            "  it holds fewer than `replay` would: {} upcalls found the NIC's update budget ({}/s) spent, and \
             their megaflows stay in software (by default OVS never retries a refused offload)",
            s.nic.installs_refused_rate_cap, s.nic.updates_per_s_cap
        );
    }
    if let Some(c) = s.min_cores {
        println!("min cores without loss: {c}");
    }
    if let Some(r) = s.max_rate_pps {
        println!("max rate without loss: {r} pkt/s");
    }
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
    if a.switch.nic.is_some() || a.switch.no_nic {
        bail!("--nic and --no-nic do not apply to sim: --policy says what the NIC holds");
    }
    let base = switch_config(&a.switch)?;
    let policy = match a.policy {
        PolicyArg::Psf => Policy::Psf,
        PolicyArg::OffloadAll => {
            let (entries, max_masks) = megaflow_nic(&a.switch);
            Policy::OffloadAll { entries, max_masks }
        }
        PolicyArg::Gigaflow => Policy::Gigaflow(gigaflow_nic(&a.switch)),
    };
    let non_negative = |flag: &str, v: f64, unit: &str| {
        if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(anyhow!("{flag} must be ≥ 0 {unit}, not {v}"))
        }
    };
    let duration_ns = match a.duration {
        Some(d) if !(d.is_finite() && d > 0.0) => {
            bail!("--duration must be a positive number of seconds, not {d}")
        }
        Some(d) => Some(((d * 1e9) as u64).max(1)),
        None => None,
    };
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
    let interval_ns = (a.interval * 1e6) as u64;
    let exp = SimExperiment {
        switch: base,
        policy,
        costs,
        machine: SimConfig {
            cores: a.cores,
            ring: a.ring,
            nic_latency_ns: (non_negative("--nic-latency", a.nic_latency, "µs")? * 1e3) as u64,
            steering,
            interval_ns: if a.timeseries.is_some() || a.plot.is_some() { interval_ns.max(1) } else { 0 },
            sample_hw: a.sample_hw,
            update_stall_ns: (non_negative("--update-stall", a.update_stall, "µs")? * 1e3) as u64,
            seed: 1,
        },
        limits: NicUpdates {
            per_second: a.nic_updates,
            latency_ns: (non_negative("--nic-update-latency", a.nic_update_latency, "µs")? * 1e3) as u64,
            ..NicUpdates::default()
        },
        rate_pps: a.rate,
        duration_ns,
    };
    let workload = workload(&a.switch)?;
    let outcome = match a.find {
        None => {
            let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
            let bar = terminal.then(|| Progress::new("sim"));
            let outcome = simulate(&workload, &exp, &mut |n, at| {
                if let Some(b) = &bar {
                    b.tick(n, at);
                }
            })?;
            if let Some(b) = bar {
                b.finish();
            }
            outcome
        }
        Some(FindArg::MinCores) => search(&workload, &exp, Search::MinCores { max_cores: a.max_cores })?,
        Some(FindArg::MaxRate) => search(&workload, &exp, Search::MaxRate)?,
    };
    print_text(&outcome.summary);
    if let Some(p) = &a.json {
        let mut out = crate::replay::create(p)?;
        writeln!(out, "{}", serde_json::to_string(&outcome.summary)?)?;
        out.flush()?;
    }
    if let Some(p) = &a.timeseries {
        write_series(p, &outcome.metrics, exp.machine.interval_ns)?;
    }
    if let Some(dir) = &a.plot {
        crate::plot::write_plots(dir, &outcome.metrics, exp.machine.interval_ns, exp.policy.name())?;
    }
    Ok(())
}
