//! `sim`'s options and their meaning: the [`SimExperiment`] they describe, the capacity
//! search they ask for, the summary as text and the time series as CSV.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};

use crate::switch::{gigaflow_nic, megaflow_nic, switch_config, SwitchArgs};
use hyflow::cost_model::CostModel;
use hyflow::experiment::sim::{Search, SimExperiment, SimSummary};
use hyflow::measure::KeySpec;
use hyflow::offload::elixir::{ElixirConfig, NIC_LINE_RATE_PPS};
use hyflow::offload::lfp::LfpConfig;
use hyflow::offload::rebalance::OvsRebalanceConfig;
use hyflow::offload::tfo::TfoConfig;
use hyflow::offload::upcall::UpcallOffload;
use hyflow::offload::{NicUpdates, PolicyConfig};
use hyflow::sim::{Metrics, SimConfig, Steering};

/// What the NIC holds during a simulation.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// Nothing: pure software forwarding.
    Psf,
    /// Every new megaflow while there is room, as OVS offload.
    OffloadAll,
    /// Sub-traversals in --nic-tables stages.
    Gigaflow,
    /// Elixir: sampled large-flow replacement plus queue-triggered bursty offload.
    Elixir,
    /// TFO: multi-time-scale heavy hitters with limited churn (a reconstruction).
    Tfo,
    /// LFP: first-packet prediction with a decision tree trained on a prefix.
    Lfp,
    /// Open vSwitch's offload-rebalance: every 3 s, swap slow offloaded flows for faster ones.
    OvsRebalance,
}

impl PolicyArg {
    /// Whether the policy fills an exact-match table (sized by --large-entries + --bursty-entries).
    fn exact_match(self) -> bool {
        matches!(self, PolicyArg::Elixir | PolicyArg::Tfo | PolicyArg::Lfp | PolicyArg::OvsRebalance)
    }

    /// Whether the NIC samples packets for it.
    fn samples(self) -> bool {
        matches!(self, PolicyArg::Elixir | PolicyArg::Tfo)
    }
}

/// Parameters of measurement-driven policies (defaults: Elixir's, §5.1).
#[derive(Args)]
#[command(next_help_heading = "Measurement-driven policies (elixir, tfo, lfp, ovs-rebalance)")]
pub struct PolicyArgs {
    /// Entries of the exact-match table's large-flow area [default: 50000]; tfo, lfp and
    /// ovs-rebalance get one table of --large-entries + --bursty-entries.
    #[arg(long, value_name = "N")]
    pub large_entries: Option<usize>,
    /// Entries of the bursty area, whose counters software polls [default: 100].
    #[arg(long, value_name = "N")]
    pub bursty_entries: Option<usize>,
    /// lfp: seconds of the input (as recorded) its tree is trained on, before the run
    /// [default: 10].
    #[arg(long, value_name = "SECONDS")]
    pub lfp_train: Option<f64>,
    /// Fields the exact-match table keys flows by: 5tuple (IPv4), 5tuple46 (IPv4 and IPv6)
    /// or comma-separated field names [default: 5tuple].
    #[arg(long, value_name = "FIELDS")]
    pub flow_key: Option<String>,
    /// Identification window L, seconds: large flows are ranked over it [default: 30].
    #[arg(long, value_name = "SECONDS")]
    pub identification_window: Option<f64>,
    /// Replacement window T, seconds: the large set is replaced every T; L is cut into
    /// ⌈L/T⌉ sub-window arrays [default: 10].
    #[arg(long, value_name = "SECONDS")]
    pub replacement_window: Option<f64>,
    /// Window of the per-flow counters that rank bursty flows, seconds [default: 1].
    #[arg(long, value_name = "SECONDS")]
    pub burst_window: Option<f64>,
    /// Queue threshold K, packets: a ring this full triggers a bursty-flow check [default:
    /// ring − NIC update latency × --nic-rate].
    #[arg(long, value_name = "PACKETS")]
    pub queue_threshold: Option<u64>,
    /// Packets/s the NIC can deliver into a ring, for K's headroom [default: 148.8 M,
    /// 100 GbE of 64-byte frames].
    #[arg(long, value_name = "PPS")]
    pub nic_rate: Option<f64>,
    /// Host work of rebuilding the large-flow heap at each replacement, ms [default: k·log2 k
    /// sketch updates (`sample_ns`) for the k large-flow entries: 22 ms for 50,000 with the
    /// built-in costs; Elixir measured about 10].
    #[arg(long, value_name = "MS")]
    pub heap_rebuild: Option<f64>,
}

impl PolicyArgs {
    /// The options given that `policy` does not take, by name.
    fn misplaced(&self, policy: PolicyArg) -> Vec<&'static str> {
        let mut v = Vec::new();
        let mut note = |set: bool, name: &'static str, applies: bool| {
            if set && !applies {
                v.push(name)
            }
        };
        let exact = policy.exact_match();
        note(self.large_entries.is_some(), "--large-entries", exact);
        note(self.bursty_entries.is_some(), "--bursty-entries", exact);
        note(self.flow_key.is_some(), "--flow-key", exact);
        note(self.lfp_train.is_some(), "--lfp-train", policy == PolicyArg::Lfp);
        let elixir = policy == PolicyArg::Elixir;
        note(self.identification_window.is_some(), "--identification-window", elixir);
        note(self.replacement_window.is_some(), "--replacement-window", elixir);
        note(self.burst_window.is_some(), "--burst-window", elixir);
        note(self.queue_threshold.is_some(), "--queue-threshold", elixir);
        note(self.nic_rate.is_some(), "--nic-rate", elixir);
        note(self.heap_rebuild.is_some(), "--heap-rebuild", elixir);
        v
    }

    /// The exact-match table of tfo, lfp and ovs-rebalance: Elixir's two areas together.
    fn table(&self) -> usize {
        let d = ElixirConfig::default();
        self.large_entries.unwrap_or(d.large_entries) + self.bursty_entries.unwrap_or(d.bursty_entries)
    }

    fn key(&self) -> Result<KeySpec> {
        match &self.flow_key {
            None => Ok(KeySpec::five_tuple()),
            Some(text) => KeySpec::parse(text).map_err(|e| anyhow!("--flow-key: {e}")),
        }
    }

    fn lfp(&self) -> Result<LfpConfig> {
        let train_ns = match self.lfp_train {
            None => LfpConfig::default().train_ns,
            Some(s) if s.is_finite() && s > 0.0 => (s * 1e9).round().max(1.0) as u64,
            Some(s) => bail!("--lfp-train must be a positive number of seconds, not {s}"),
        };
        Ok(LfpConfig { entries: self.table(), key: self.key()?, train_ns, ..LfpConfig::default() })
    }

    fn elixir(&self, sample_rate: Option<f64>) -> Result<ElixirConfig> {
        let d = ElixirConfig::default();
        let seconds = |flag: &str, v: Option<f64>, default: u64| -> Result<u64> {
            match v {
                None => Ok(default),
                Some(s) if s.is_finite() && s > 0.0 && s * 1e9 >= 1.0 => Ok((s * 1e9).round() as u64),
                Some(s) => bail!("{flag} must be a positive number of seconds, not {s}"),
            }
        };
        let heap_rebuild_ns = match self.heap_rebuild {
            None => None,
            Some(ms) if ms.is_finite() && ms >= 0.0 => Some((ms * 1e6).round() as u64),
            Some(ms) => bail!("--heap-rebuild must be ≥ 0 ms, not {ms}"),
        };
        let key = self.key()?;
        Ok(ElixirConfig {
            large_entries: self.large_entries.unwrap_or(d.large_entries),
            bursty_entries: self.bursty_entries.unwrap_or(d.bursty_entries),
            key,
            sample_rate: sample_rate.unwrap_or(d.sample_rate),
            identification_window_ns: seconds(
                "--identification-window",
                self.identification_window,
                d.identification_window_ns,
            )?,
            replacement_window_ns: seconds(
                "--replacement-window",
                self.replacement_window,
                d.replacement_window_ns,
            )?,
            burst_window_ns: seconds("--burst-window", self.burst_window, d.burst_window_ns)?,
            queue_threshold: self.queue_threshold,
            nic_rate_pps: self.nic_rate.unwrap_or(NIC_LINE_RATE_PPS),
            heap_rebuild_ns,
            ..d
        })
    }
}

/// A capacity search.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FindArg {
    /// The fewest cores with no loss at the rate.
    MinCores,
    /// The highest rate with no loss on --cores (bisection to 1%).
    MaxRate,
}

#[derive(Args)]
pub struct SimArgs {
    #[command(flatten)]
    pub switch: SwitchArgs,
    /// What the NIC holds: psf (nothing: pure software forwarding), offload-all (every new
    /// megaflow while there is room, as OVS offload), gigaflow (sub-traversals in
    /// --nic-tables stages; each upcall also costs Gigaflow's install work), elixir (an
    /// exact-match table of --large-entries + --bursty-entries flows filled by Elixir's
    /// measurement; its work runs on the forwarding cores), and Elixir's baselines on an
    /// exact-match table of the same total size: tfo (multi-time-scale heavy hitters, limited
    /// churn; a reconstruction), lfp (first-packet prediction by a decision tree trained on
    /// the first --lfp-train seconds), ovs-rebalance (OVS offload-rebalance: fill while there
    /// is room, swap slow for fast flows every 3 s). Replaces --nic/--no-nic;
    /// --nic-entries, --nic-masks, --nic-tables and --partition size the megaflow and
    /// Gigaflow NICs.
    #[arg(long, value_enum, default_value = "offload-all", value_name = "POLICY")]
    pub policy: PolicyArg,
    /// Host cores, each with its own receive ring.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub cores: usize,
    /// Receive ring capacity per core, packets.
    #[arg(long, default_value_t = 65_536, value_name = "N")]
    pub ring: usize,
    /// Replay at this average rate (packets/s), rescaling the trace's timestamps.
    #[arg(long, value_name = "PPS")]
    pub rate: Option<f64>,
    /// Stop after this many seconds of (rescaled) trace time.
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Simulate this many seconds of the input (as recorded; rescaled with --rate) before
    /// measuring: packets arriving earlier are forwarded (policies learn, the NIC fills) but
    /// counted in no figure [default: 0].
    #[arg(long, value_name = "SECONDS")]
    pub warmup: Option<f64>,
    /// Cost model file (JSON, as `hyflow calibrate` writes); default: the built-in calibration.
    #[arg(long, value_name = "FILE")]
    pub costs: Option<PathBuf>,
    /// NIC latency, µs: hits leave after it, misses reach the rings after it.
    #[arg(long, default_value_t = 2.0, value_name = "US")]
    pub nic_latency: f64,
    /// Steering of host-bound packets: rss (5-tuple) or comma-separated fields to hash.
    #[arg(long, default_value = "rss", value_name = "FIELDS")]
    pub steer: String,
    /// NIC table updates per second (0 = unlimited).
    #[arg(long, default_value_t = 2_000.0, value_name = "N")]
    pub nic_updates: f64,
    /// NIC entry counters software can read per second (0 = unlimited; Elixir: ~20,000 on a
    /// ConnectX-5).
    #[arg(long, default_value_t = 20_000.0, value_name = "N")]
    pub nic_counter_reads: f64,
    /// µs from a NIC install to the first packet the entry forwards (Elixir: ~67 µs on a
    /// ConnectX-5).
    #[arg(long, default_value_t = 67.0, value_name = "US")]
    pub nic_update_latency: f64,
    /// NIC forwarding stalls this many µs per table update (throughput lost to frequent
    /// updates); hardware packets arriving meanwhile wait.
    #[arg(long, default_value_t = 0.0, value_name = "US")]
    pub update_stall: f64,
    /// Fraction of hardware-forwarded packets whose header the NIC also sends to the host
    /// for measurement (each costs the host a sketch update, `sample_ns`): the sampling rate r of elixir
    /// and tfo [default: 0.2 for them, 0 otherwise].
    #[arg(long, visible_alias = "sample-hw", value_name = "R")]
    pub sample_rate: Option<f64>,
    /// Write plots to DIR (PNG and SVG): software and hardware packet rate over time, ring
    /// occupancy over time, latency CDF.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Search instead of one run: min-cores (fewest cores with no loss at the rate) or
    /// max-rate (highest rate with no loss on --cores, bisection to 1%).
    #[arg(long, value_enum, value_name = "WHAT")]
    pub find: Option<FindArg>,
    /// Upper bound of the searches: cores for min-cores.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub max_cores: usize,
    /// Threads the searches run probes on: the probes the search would make next under each
    /// outcome run at once; the answer is the same for any number [default: the machine's
    /// cores].
    #[arg(long, value_name = "N")]
    pub search_threads: Option<usize>,
    /// Summary as one JSON object to FILE (`-` for stdout); nothing host-dependent in it.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Every packet's fate to FILE (`-` for stdout), one JSON line each in input order, as
    /// `replay --decisions` writes it plus `t_ns`, when it was decided (arrival for the NIC,
    /// service for software); a packet dropped at a full ring has layer `lost`. One run: not
    /// with --find.
    #[arg(long, value_name = "FILE", conflicts_with = "find")]
    pub decisions: Option<PathBuf>,
    /// Time series as CSV: per interval, software/hardware packet rates, losses, ring maximum
    /// (complete intervals only: the one under way at the last arrival is left out).
    #[arg(long, value_name = "FILE")]
    pub timeseries: Option<PathBuf>,
    /// Time-series interval, ms [default: sized to the run — 1 or 5 × 10^k µs, giving 200 to
    /// 1,000 intervals].
    #[arg(long, value_name = "MS")]
    pub interval: Option<f64>,
    /// Last: clap puts every later option under this group's heading.
    #[command(flatten)]
    pub policy_args: PolicyArgs,
}

/// The summary as the CLI prints it.
pub fn summary_text(s: &SimSummary) -> String {
    let mut out = Vec::new();
    write_summary(&mut out, s).expect("writing to memory");
    String::from_utf8(out).expect("the summary is text")
}

/// Writes the summary as the CLI prints it.
pub fn write_summary(out: &mut dyn Write, s: &SimSummary) -> std::io::Result<()> {
    let m = &s.metrics;
    let l = &m.latency_us;
    writeln!(
        out,
        "{} packets at {} pkt/s, policy {}: {:.1}% in hardware; lost {} ({:.3}%)",
        m.packets,
        m.rate_pps,
        s.policy,
        m.hw_share * 100.0,
        m.lost,
        m.loss_rate * 100.0
    )?;
    writeln!(out, "latency µs: mean {} p50 {} p99 {} p99.9 {} max {}", l.mean, l.p50, l.p99, l.p999, l.max)?;
    writeln!(out, "  software path: mean {} p99 {}", m.latency_sw_us.mean, m.latency_sw_us.p99)?;
    writeln!(out, "ring occupancy: mean {} p99 {} max {}", m.ring.mean, m.ring.p99, m.ring.max)?;
    writeln!(out, "cores {} utilisation {:?}", m.cores, m.core_utilisation)?;
    if !m.steady {
        writeln!(
        out,

            "warning: the host was still catching up when the input ended (rings emptied {:.3} ms after the \
             last arrival, over {:.0}% of the input's span): these figures describe a transient, not a rate the \
             host sustains; use a longer input or a lower rate",
            m.drain_ms,
            hyflow::sim::STEADY_DRAIN_SHARE * 100.0
        )?;
    }
    writeln!(
        out,

        "host: {} microflow hits, {} megaflow hits, {} upcalls; NIC installs {} ({} refused for the update cap)",
        s.host.microflow_hits, s.host.megaflow_hits, s.host.upcalls, s.nic.installs, s.nic.installs_refused_rate_cap
    )?;
    if s.host.continued_from_nic > 0 {
        writeln!(
            out,
            "  and the later passes of {} packets the NIC took but could not finish (a connection not in its \
             table, or a pass it holds no entry for)",
            s.host.continued_from_nic
        )?;
    }
    writeln!(out, "NIC: {} entries at the end, {} at most", s.nic.entries, s.nic.entries_peak)?;
    if s.nic.installs_refused_rate_cap > 0 {
        writeln!(
        out,

            "  it holds fewer than `replay` would: {} upcalls found the NIC's update budget ({}/s) spent, and \
             their megaflows stay in software (by default OVS never retries a refused offload)",
            s.nic.installs_refused_rate_cap, s.nic.updates_per_s_cap
        )?;
    }
    let p = &s.policy_report;
    if let (Some(k), Some(repl), Some(trig), Some(bursty)) =
        (p.queue_threshold, p.replacements, p.burst_triggers, p.bursty_offloads)
    {
        writeln!(
        out,

            "{}: K = {k}; {repl} large-flow replacements, {trig} ring crossings of K, {bursty} flows moved into \
             the bursty area",
            s.policy
        )?;
    }
    if p.installs + p.removals + p.counter_reads > 0 || p.work_ms > 0.0 {
        writeln!(
        out,

            "policy: {} installs ({} refused by the NIC), {} removals, {} counters read, update queue peak {}; \
             host work {} ms (on the forwarding cores)",
            p.installs, p.installs_refused, p.removals, p.counter_reads, p.update_queue_peak, p.work_ms
        )?;
    }
    if let Some(b) = &s.bursts {
        let ms = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.2}"));
        write!(
            out,
            "bursts (the generator's, started and ended while measuring): {}; {} already in the NIC at their \
             start, {} moved into it during the burst (mean {} ms after it began)",
            b.bursts,
            b.held_at_start,
            b.offloaded,
            ms(b.offload_ms_mean)
        )?;
        match (b.overloaded, b.overloaded_offloaded) {
            (Some(o), Some(oo)) => writeln!(
                out,
                "; {o} filled their core's ring to K (detected a mean {} ms after they began), {oo} of them \
                 moved into the NIC",
                ms(b.detection_ms_mean)
            )?,
            _ => writeln!(out)?,
        }
    }
    if let Some(c) = s.min_cores {
        writeln!(out, "min cores without loss: {c}")?;
    }
    if let Some(r) = s.max_rate_pps {
        writeln!(out, "max rate without loss: {r} pkt/s")?;
    }
    Ok(())
}

/// Writes the time series as CSV to `path` (`-`: stdout): complete intervals only.
pub fn write_series(path: &Path, m: &Metrics) -> Result<()> {
    let interval_ns = m.interval_ns;
    let mut out = crate::create(path)?;
    writeln!(out, "t_s,sw_pps,hw_pps,served_pps,lost,ring_max")?;
    let per_s = 1e9 / interval_ns as f64;
    for (i, iv) in m.complete_intervals().iter().enumerate() {
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

/// Most points of a time series sized to the run.
pub const SERIES_POINTS: usize = 1_000;

impl SimArgs {
    /// The search the options ask for, if any.
    pub fn search(&self) -> Option<Search> {
        self.find.map(|f| match f {
            FindArg::MinCores => Search::MinCores { max_cores: self.max_cores },
            FindArg::MaxRate => Search::MaxRate,
        })
    }

    /// The experiment the options describe; `series` records the time series (for --timeseries,
    /// --plot or a front that returns it).
    pub fn experiment(&self, series: bool) -> Result<SimExperiment> {
        let a = self;
        if a.switch.nic.is_some() || a.switch.no_nic {
            bail!("--nic and --no-nic do not apply to sim: --policy says what the NIC holds");
        }
        let base = switch_config(&a.switch)?;
        if let Some(flag) = a.policy_args.misplaced(a.policy).first() {
            bail!(
                "{flag} does not apply to --policy {}",
                a.policy.to_possible_value().expect("named").get_name()
            );
        }
        let policy = match a.policy {
            PolicyArg::Psf => PolicyConfig::Upcall(UpcallOffload::Psf),
            PolicyArg::OffloadAll => {
                let (entries, max_masks) = megaflow_nic(&a.switch);
                PolicyConfig::Upcall(UpcallOffload::OffloadAll { entries, max_masks })
            }
            PolicyArg::Gigaflow => PolicyConfig::Upcall(UpcallOffload::Gigaflow(gigaflow_nic(&a.switch))),
            PolicyArg::Elixir => PolicyConfig::Elixir(a.policy_args.elixir(a.sample_rate)?),
            PolicyArg::Tfo => PolicyConfig::Tfo(TfoConfig {
                entries: a.policy_args.table(),
                key: a.policy_args.key()?,
                sample_rate: a.sample_rate.unwrap_or(TfoConfig::default().sample_rate),
                max_changes: a.policy_args.table().div_ceil(100),
                ..TfoConfig::default()
            }),
            PolicyArg::Lfp => PolicyConfig::Lfp(a.policy_args.lfp()?),
            PolicyArg::OvsRebalance => PolicyConfig::OvsRebalance(OvsRebalanceConfig {
                entries: a.policy_args.table(),
                key: a.policy_args.key()?,
                ..OvsRebalanceConfig::default()
            }),
        };
        if let Some(r) = a.sample_rate {
            let in_range = r.is_finite() && r > 0.0 && r <= 1.0;
            let off = r == 0.0 && !a.policy.samples();
            if !(in_range || off) {
                bail!("--sample-rate must be in (0, 1], not {r}");
            }
        }
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
        // A given interval is kept; otherwise the series starts at 1 µs and grows with the run.
        let (interval_ns, series_points) = match a.interval {
            Some(ms) if ms.is_finite() && ms > 0.0 => (((ms * 1e6) as u64).max(1), 0),
            Some(ms) => bail!("--interval must be a positive number of milliseconds, not {ms}"),
            None => (1_000, SERIES_POINTS),
        };
        let costs = match &a.costs {
            Some(p) => {
                let text =
                    std::fs::read_to_string(p).with_context(|| format!("{}: cannot read", p.display()))?;
                CostModel::from_json(&text).map_err(|e| anyhow!("{}: {e}", p.display()))?
            }
            None => CostModel::default(),
        };
        let steering = match a.steer.as_str() {
            "rss" => Steering::Rss,
            fields => Steering::Fields(KeySpec::parse(fields).map_err(|e| anyhow!("--steer: {e}"))?),
        };
        let exp = SimExperiment {
            switch: base,
            policy,
            costs,
            machine: SimConfig {
                cores: a.cores,
                ring: a.ring,
                nic_latency_ns: (non_negative("--nic-latency", a.nic_latency, "µs")? * 1e3) as u64,
                steering,
                interval_ns: if series { interval_ns } else { 0 },
                series_points,
                sample_hw: a.sample_rate.unwrap_or(0.0),
                update_stall_ns: (non_negative("--update-stall", a.update_stall, "µs")? * 1e3) as u64,
                seed: 1,
                warmup_ns: match a.warmup {
                    None => 0,
                    Some(s) if s.is_finite() && s >= 0.0 => (s * 1e9).round() as u64,
                    Some(s) => bail!("--warmup must be ≥ 0 seconds, not {s}"),
                },
                // The policy's queue threshold, set per run.
                ring_watch: 0,
            },
            limits: NicUpdates {
                per_second: a.nic_updates,
                latency_ns: (non_negative("--nic-update-latency", a.nic_update_latency, "µs")? * 1e3) as u64,
                counter_reads_per_second: a.nic_counter_reads,
            },
            rate_pps: a.rate,
            duration_ns,
            search_threads: match a.search_threads {
                Some(0) => bail!("--search-threads must be at least 1"),
                Some(n) => n,
                None => std::thread::available_parallelism().map_or(1, |n| n.get()),
            },
        };
        Ok(exp)
    }
}
