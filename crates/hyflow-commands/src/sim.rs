//! `sim`'s options and their meaning: the [`SimExperiment`] they describe, the capacity
//! search they ask for, the summary as text and the time series as CSV.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::{Arg, ArgMatches, Args, Command, FromArgMatches, ValueEnum};

use crate::switch::{nic_of_scheme, nic_sizing_given, switch_config, SwitchArgs};
use hyflow::cost_model::CostModel;
use hyflow::experiment::sim::{Probe, Search, SimExperiment, SimSummary};
use hyflow::measure::KeySpec;
use hyflow::offload::{registration, NicUpdates, Param, ParamKind, ParamValue, PolicyParams, POLICIES};
use hyflow::timing::{Metrics, SimConfig, Steering};

/// The parameters of every registered policy ([`hyflow::offload::POLICIES`]) as options:
/// each policy declares its own, so a new policy brings its options with it; an option the
/// chosen policy does not declare is refused.
#[derive(Clone, Debug, Default)]
pub struct PolicyOptions {
    /// The values given, by parameter name.
    pub values: Vec<(&'static str, ParamValue)>,
}

/// The registered parameters, each once (policies share some), in registration order.
fn all_params() -> Vec<Param> {
    let mut out: Vec<Param> = Vec::new();
    for r in POLICIES {
        for p in r.params {
            if !out.iter().any(|q| q.name == p.name) {
                out.push(*p);
            }
        }
    }
    out
}

impl Args for PolicyOptions {
    fn augment_args(cmd: Command) -> Command {
        let mut cmd = cmd.next_help_heading("Policy parameters (each for the policies named)");
        for p in all_params() {
            let users: Vec<&str> = POLICIES
                .iter()
                .filter(|r| r.params.iter().any(|q| q.name == p.name))
                .map(|r| r.name)
                .collect();
            let arg = Arg::new(p.name).long(p.name).value_name(p.value_name).help(format!(
                "{} ({})",
                p.help,
                users.join(", ")
            ));
            cmd = cmd.arg(match p.kind {
                ParamKind::Count => arg.value_parser(clap::value_parser!(u64)),
                ParamKind::Number => arg.value_parser(clap::value_parser!(f64)),
                ParamKind::Text => arg.value_parser(clap::value_parser!(String)),
            });
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for PolicyOptions {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut values = Vec::new();
        for p in all_params() {
            let v = match p.kind {
                ParamKind::Count => m.get_one::<u64>(p.name).map(|&n| ParamValue::Count(n)),
                ParamKind::Number => m.get_one::<f64>(p.name).map(|&v| ParamValue::Number(v)),
                ParamKind::Text => m.get_one::<String>(p.name).map(|t| ParamValue::Text(t.clone())),
            };
            values.extend(v.map(|v| (p.name, v)));
        }
        Ok(PolicyOptions { values })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// `--policy`'s values: the registered policies, each with its one line of help.
pub fn policy_names() -> PossibleValuesParser {
    PossibleValuesParser::new(POLICIES.iter().map(|r| PossibleValue::new(r.name).help(r.about)))
}

/// Where a search's probes run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// This process's threads.
    Local,
    /// Ray tasks.
    Ray,
}

/// A capacity search.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FindArg {
    /// The fewest cores from which every count to --max-cores loses nothing at the rate.
    MinCores,
    /// The highest whole rate with no loss on --cores (bisection to 1%).
    MaxRate,
}

#[derive(Args)]
pub struct SimArgs {
    #[command(flatten)]
    pub switch: SwitchArgs,
    /// What the NIC holds: one of the policies below, each with its own parameters (listed under
    /// "Policy parameters"), in place of replay's NIC choice; --nic-entries, --nic-masks, --nic-tables,
    /// --partition and --mappings size the NIC of offload-all and gigaflow and are refused for
    /// policies that bring their own.
    #[arg(long, default_value = "offload-all", value_name = "POLICY", value_parser = policy_names())]
    pub policy: String,
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
    /// counted in no figure; every count (host, NIC, policy, malformed) starts when it ends
    /// [default: 0].
    #[arg(long, value_name = "SECONDS")]
    pub warmup: Option<f64>,
    /// Cost model file (JSON, as `hyflow calibrate` writes); default: the built-in calibration.
    #[arg(long, value_name = "FILE")]
    pub costs: Option<PathBuf>,
    /// NIC latency, µs: hits leave after it, misses reach the rings after it.
    #[arg(long, default_value_t = 2.0, value_name = "US")]
    pub nic_latency: f64,
    /// Steering of host-bound packets: rss (5-tuple), comma-separated fields to hash, or spray
    /// (packets dealt to the cores in turn, so one flow can use every core: Elixir's Fig. 3b
    /// forwarder).
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
    /// NIC forwarding stalls this many µs per table update; hardware packets arriving
    /// meanwhile wait. The default is Elixir's Fig. 6a (a ConnectX-5 holding 50,000 entries
    /// loses half its throughput at 3,250 updates/s: 0.5 s / 3,250); 0 turns it off.
    #[arg(long, default_value_t = UPDATE_STALL_US, value_name = "US")]
    pub update_stall: f64,
    /// Every core loses this many µs per NIC table update (the installs' and removals' cache
    /// contention), as work that competes with forwarding. The default is Elixir's Fig. 6b
    /// (software throughput −16% at 3,250 updates/s: 0.16 s / 3,250); 0 turns it off.
    #[arg(long, default_value_t = UPDATE_HOST_COST_US, value_name = "US")]
    pub update_host_cost: f64,
    /// Fraction of hardware-forwarded packets whose header the NIC also sends to the host
    /// for measurement (each costs the host a sketch update, `sample_ns`): the sampling rate r of elixir
    /// and tfo [default: 0.2 for them, 0 otherwise].
    #[arg(long, visible_alias = "sample-hw", value_name = "R")]
    pub sample_rate: Option<f64>,
    /// Write plots to DIR (PNG and SVG): software and hardware packet rate over time, ring
    /// occupancy over time, latency CDF.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Write the run's report to FILE: a self-contained HTML page (setup, figures, where
    /// packets went, ports, rates and rings per core over time, NIC entries and installs,
    /// latency CDFs, busiest flows), or with a `.json` name the run record that
    /// `hyflow report` draws beside others.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Search instead of one run. min-cores runs every core count up to --max-cores at the
    /// rate (fewer cores do not always lose more: flows are hashed onto cores) and answers the
    /// fewest from which every larger count is lossless, and the fewest within
    /// --loss-tolerance; each count's loss is reported, as Elixir's Figure 13 plots it (also
    /// when no count is lossless: the run shown is then the bound's). max-rate's answer is a rate that was run.
    #[arg(long, value_enum, value_name = "WHAT")]
    pub find: Option<FindArg>,
    /// Upper bound of the searches: cores for min-cores (every count up to it is run).
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub max_cores: usize,
    /// Loss min-cores tolerates for its second answer, a fraction of the packets offered
    /// (0.001: one packet in a thousand).
    #[arg(long, default_value_t = 0.001, value_name = "FRACTION")]
    pub loss_tolerance: f64,
    /// Probes a search runs at once, on threads or with --backend ray as Ray tasks: the
    /// probes the search would make next under each outcome; the answer is the same for any
    /// number [default: the machine's cores; with Ray, the cluster's CPUs].
    #[arg(long, value_name = "N")]
    pub search_threads: Option<usize>,
    /// Where the searches run their probes: on this process's threads, or as Ray tasks, one
    /// per probe, --search-threads at a time, on the cluster at --ray-address or on a local
    /// one started for the search. Ray needs Python 3 with `ray` (`pip install ray`); each
    /// task runs this hyflow binary, which every node must have at the same path, on input
    /// files at the same paths (shared storage). The answer is the same on either; the
    /// answering run is made here.
    #[arg(long, value_enum, default_value_t = BackendArg::Local, value_name = "WHERE", requires = "find")]
    pub backend: BackendArg,
    /// The Ray cluster a search's probes run on with --backend ray (`ray start --head` prints
    /// it; `auto` finds one on this machine) [default: a local cluster of --search-threads
    /// CPUs, started and stopped with the search].
    #[arg(long, value_name = "ADDRESS")]
    pub ray_address: Option<String>,
    /// One probe of a search, for a Ray task (not for people): the run on this many cores
    /// at --probe-rate (default: as the search would), its loss as one JSON line on stdout.
    #[arg(long, hide = true, value_name = "CORES")]
    pub probe_cores: Option<usize>,
    /// The probe's rate, packets/s.
    #[arg(long, hide = true, value_name = "PPS", requires = "probe_cores")]
    pub probe_rate: Option<f64>,
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
    pub policy_options: PolicyOptions,
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
    // The rate asked for and the one measured over the measured span differ by the packets
    // at its edges: both are given, so that an answer (max rate) reads as the one asked for.
    let rate = match s.rate_target_pps {
        Some(target) => format!("{target} pkt/s (measured {})", m.rate_pps),
        None => format!("{} pkt/s", m.rate_pps),
    };
    writeln!(
        out,
        "{} packets in {:.3} s of simulated time at {rate}, policy {}: {:.1}% in hardware; lost {} ({:.3}%)",
        m.packets,
        m.duration_s,
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
            hyflow::timing::STEADY_DRAIN_SHARE * 100.0
        )?;
    }
    writeln!(
        out,

        "host: {} microflow hits, {} megaflow hits, {} upcalls; NIC installs {} ({} refused for the update cap)",
        s.host.microflow_hits, s.host.megaflow_hits, s.host.upcalls, s.nic.installs, s.nic.installs_refused_rate_cap
    )?;
    writeln!(
        out,
        "  microflow evictions {} (bucket full), invalidations {} (rule updates)",
        s.host.microflow_evictions, s.host.microflow_invalidated
    )?;
    writeln!(
        out,
        "forwarded {} packets, dropped {} by the pipeline (and {} lost at full rings)",
        s.forwarded, s.dropped, m.lost
    )?;
    write!(out, "{}", hyflow::replay_report::ports_text(&s.ports))?;
    if s.host.continued_from_nic > 0 {
        writeln!(
            out,
            "  and the later passes of {} packets the NIC took but could not finish (a connection not in its \
             table, or a pass it holds no entry for)",
            s.host.continued_from_nic
        )?;
    }
    writeln!(out, "NIC: {} entries at the end, {} at most", s.nic.entries, s.nic.entries_peak)?;
    if m.nic_stalled_packets > 0 || m.update_host_ms > 0.0 {
        writeln!(
            out,
            "  table updates cost {} hardware packets a wait for the NIC (--update-stall) and the cores {} ms \
             (--update-host-cost)",
            m.nic_stalled_packets, m.update_host_ms
        )?;
    }
    if s.nic.installs_refused_rate_cap > 0 {
        writeln!(
        out,

            "  it holds fewer than `replay` would: {} upcalls found the NIC's update budget ({}/s) spent, and \
             their megaflows stay in software (by default OVS never retries a refused offload)",
            s.nic.installs_refused_rate_cap, s.nic.updates_per_s_cap
        )?;
    }
    let p = &s.policy_report;
    if let Some(line) = &p.summary {
        writeln!(out, "{}: {line}", s.policy)?;
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
    if let Some(f) = s.loss_tolerance {
        let tolerated = match s.min_cores_within_tolerance {
            Some(t) => format!("; within {}% loss: {t}", f * 100.0),
            None => format!("; none within {}% loss either", f * 100.0),
        };
        let bound = s.loss_by_cores.last().map_or(0, |l| l.cores);
        match s.min_cores {
            Some(c) => writeln!(
                out,
                "min cores without loss: {c} (every count from it up to the bound is lossless){tolerated}"
            )?,
            None => writeln!(out, "min cores without loss: none up to {bound}{tolerated}")?,
        }
        let table: Vec<String> = s
            .loss_by_cores
            .iter()
            .map(|l| {
                let behind = if l.steady { "" } else { ", behind" };
                format!("{} {:.4}%{behind}", l.cores, l.loss_rate * 100.0)
            })
            .collect();
        writeln!(out, "loss by cores: {}", table.join(", "))?;
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

/// `--update-stall`'s default, µs (Elixir Fig. 6a).
const UPDATE_STALL_US: f64 = hyflow::timing::FIG6_UPDATE_STALL_NS as f64 / 1e3;
/// `--update-host-cost`'s default, µs (Elixir Fig. 6b).
const UPDATE_HOST_COST_US: f64 = hyflow::timing::FIG6_UPDATE_HOST_NS as f64 / 1e3;

impl SimArgs {
    /// The search the options ask for, if any.
    pub fn search(&self) -> Option<Search> {
        self.find.map(|f| match f {
            FindArg::MinCores => {
                Search::MinCores { max_cores: self.max_cores, tolerance: self.loss_tolerance }
            }
            FindArg::MaxRate => Search::MaxRate,
        })
    }

    /// The one probe --probe-cores asks for (see [`SimArgs::probe_at`]).
    pub fn probe(&self) -> Option<Probe> {
        self.probe_cores.map(|cores| self.probe_at(cores, self.probe_rate))
    }

    /// The probe on `cores` at `rate`, or at --rate as a min-cores search's probes have it.
    pub fn probe_at(&self, cores: usize, rate: Option<f64>) -> Probe {
        Probe { cores, rate_pps: rate.or(self.rate) }
    }

    /// The experiment the options describe; `series` records the time series (for --timeseries,
    /// --plot or a front that returns it).
    pub fn experiment(&self, series: bool) -> Result<SimExperiment> {
        let a = self;
        if a.ray_address.is_some() && a.backend != BackendArg::Ray {
            bail!("--ray-address is where --backend ray runs a search's probes: give --backend ray too");
        }
        if a.switch.nic.scheme.is_some() || a.switch.nic.no_nic {
            bail!("--nic and --no-nic do not apply to sim: --policy says what the NIC holds");
        }
        let base = switch_config(&a.switch)?;
        let registration = registration(&a.policy).ok_or_else(|| anyhow!("no policy {}", a.policy))?;
        if let Some((name, _)) =
            a.policy_options.values.iter().find(|(n, _)| !registration.params.iter().any(|p| p.name == *n))
        {
            bail!("--{name} does not apply to --policy {}", a.policy);
        }
        if registration.upcall_nic.is_none() {
            if let Some(flag) = nic_sizing_given(&a.switch.nic).first() {
                bail!("{flag} does not apply to --policy {}: it brings its own NIC", a.policy);
            }
        }
        let params = PolicyParams {
            values: a.policy_options.values.clone(),
            nic: registration.upcall_nic.map(|scheme| nic_of_scheme(scheme, &a.switch.nic)).transpose()?,
            sample_rate: a.sample_rate,
        };
        let policy = (registration.configure)(&params)?;
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
            "spray" => Steering::Spray,
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
                update_host_ns: (non_negative("--update-host-cost", a.update_host_cost, "µs")? * 1e3) as u64,
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
        exp.check()?;
        Ok(exp)
    }
}
