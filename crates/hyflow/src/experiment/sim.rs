//! Timing a workload: one simulation, or a capacity search over simulations.

use serde::Serialize;

use super::bursts::{BurstSummary, BurstTracker};
use super::{unwatched, ExperimentError, OnProgress, Progress, Workload};
use crate::capture::CaptureCut;
use crate::cost_model::CostModel;
use crate::input::PacketSource;
use crate::invalid_param::InvalidParam;
use crate::offload::params::check_sample_rate;
use crate::offload::upcall::UpcallOffload;
use crate::offload::{NicUpdates, PolicyConfig, PolicyMachine, PolicyReport, RunSpan};
use crate::switch::{PortStats, Switch, SwitchConfig};
use crate::timing::search::{fewest_cores_from, parallel, search as bisect, sweep, CoreLoss, MaxRate};
use crate::timing::switch_datapath::{SimDecision, SwitchDatapath};
use crate::timing::{Metrics, MetricsSummary, SimConfig, SimPacket, Simulator, MAX_SERIES_POINTS};

/// Highest rate a max-rate search tries: 1 Gpps, far above what host cores or a NIC
/// forward (the bisection is logarithmic, so a high ceiling costs little).
pub(crate) const MAX_RATE_CEILING_PPS: f64 = 1e9;

/// One simulation's inputs besides the workload.
#[derive(Clone, Debug)]
pub struct SimExperiment {
    /// The host caches (the NIC is the policy's).
    pub switch: SwitchConfig,
    /// What the NIC holds and when it changes.
    pub policy: PolicyConfig,
    /// What host work costs.
    pub costs: CostModel,
    /// The machine: cores, rings, NIC latency, steering, sampling, time series.
    pub machine: SimConfig,
    /// Limits on NIC table updates and counter reads.
    pub limits: NicUpdates,
    /// Replay at this average rate (packets/s), rescaling the input's timestamps.
    pub rate_pps: Option<f64>,
    /// Stop after this much (rescaled) trace time.
    pub duration_ns: Option<u64>,
    /// Threads a capacity search runs its probes on (speculatively: the answer is the same
    /// for any number).
    pub search_threads: usize,
}

impl Default for SimExperiment {
    fn default() -> Self {
        SimExperiment {
            switch: SwitchConfig::default(),
            policy: std::sync::Arc::new(UpcallOffload::OffloadAll(crate::nic::NicConfig::default())),
            costs: CostModel::default(),
            machine: SimConfig::default(),
            limits: NicUpdates::default(),
            rate_pps: None,
            duration_ns: None,
            search_threads: 1,
        }
    }
}

impl SimExperiment {
    /// What the policy knows of the machine.
    pub(crate) fn policy_machine(&self) -> PolicyMachine {
        PolicyMachine {
            ring: self.machine.ring,
            limits: self.limits,
            costs: self.costs,
            spreads_flows: self.machine.steering.spreads_flows(),
        }
    }

    /// Checks every parameter, naming the first one out of range.
    pub fn check(&self) -> Result<(), ExperimentError> {
        let bad = |param, message: String| Err(ExperimentError::Param(InvalidParam::new(param, message)));
        if let Some(r) = self.rate_pps {
            if !(r.is_finite() && r > 0.0 && r <= MAX_RATE_PPS) {
                return bad(
                    "rate",
                    format!(
                        "must be a positive number of packets per second, at most {MAX_RATE_PPS:e}, not {r}"
                    ),
                );
            }
        }
        if self.duration_ns == Some(0) {
            return bad("duration", "must be a positive number of seconds".to_string());
        }
        let l = &self.limits;
        if !(l.per_second.is_finite() && l.per_second >= 0.0) {
            return bad("nic-updates", format!("must be ≥ 0 per second, not {}", l.per_second));
        }
        if !(l.counter_reads_per_second.is_finite() && l.counter_reads_per_second >= 0.0) {
            return bad(
                "nic-counter-reads",
                format!("must be ≥ 0 per second, not {}", l.counter_reads_per_second),
            );
        }
        // 0 is the machine's "no sampling"; any other value is the policies' one range.
        if self.machine.sample_hw != 0.0 {
            check_sample_rate(self.machine.sample_hw)?;
        }
        self.policy.check(&self.policy_machine()).map_err(ExperimentError::Policy)?;
        self.costs.check().map_err(|e| ExperimentError::Invalid(e.to_string()))
    }
}

/// A capacity search. A probe counts as lossless only if it lost nothing *and* the host kept
/// up ([`Metrics::steady`]): on a short input an overloaded host may end with full-but-not-
/// overflowing rings, which says nothing about the rate it sustains.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Search {
    /// The fewest cores (up to `max_cores`) from which every count to the bound is lossless at
    /// the experiment's rate, found by running every count (fewer cores do not always lose
    /// more); also the fewest within `tolerance` (a fraction of the packets offered).
    MinCores {
        /// Upper bound.
        max_cores: usize,
        /// Loss tolerated for the second answer.
        tolerance: f64,
    },
    /// The highest whole rate with no loss on the experiment's cores (bisection to 1%).
    MaxRate,
}

/// One probe of a capacity search: a run on `cores` cores with the input rescaled to
/// `rate_pps` packets/s (`None`: at its own rate).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Probe {
    /// Cores.
    pub cores: usize,
    /// Rate the input is rescaled to.
    pub rate_pps: Option<f64>,
}

/// Runs a search's probes somewhere other than this process's threads: as Ray tasks, each
/// calling [`probe`] on a worker with the same workload and experiment. Runs are
/// deterministic, so a probe's outcome does not depend on where it ran, and a search answers
/// the same on any runner.
pub trait ProbeRunner: Sync {
    /// Probes worth running at once (workers): how many a max-rate search speculates on.
    fn width(&self) -> usize;
    /// Every probe's outcome, in the order of `probes`.
    fn run(&self, probes: &[Probe]) -> Vec<Result<CoreLoss, ExperimentError>>;
}

/// Host-side counts of a simulation, packets (after the warm-up, if any).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HostCounts {
    /// Packets the microflow cache decided.
    pub microflow_hits: u64,
    /// Packets the megaflow cache decided.
    pub megaflow_hits: u64,
    /// Packets the slow path decided.
    pub upcalls: u64,
    /// Packets the NIC took whose later passes host software made (the NIC tracking
    /// connections, but not holding every connection or pass they need).
    pub continued_from_nic: u64,
    /// Microflows replaced by another in their bucket (the cache's capacity at work).
    pub microflow_evictions: u64,
    /// Microflows the consistency mechanism dropped after rule updates.
    pub microflow_invalidated: u64,
}

/// The NIC over a simulation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct NicSummary {
    /// Entries installed (after the warm-up, if any).
    pub installs: u64,
    /// Entries held at the end.
    pub entries: usize,
    /// Most entries held at once.
    pub entries_peak: usize,
    /// Upcalls whose install was refused for the update-rate cap (never retried, as in OVS).
    pub installs_refused_rate_cap: u64,
    /// The cap, updates/s (0 = none).
    pub updates_per_s_cap: f64,
    /// Install-to-forwarding latency, µs.
    pub update_latency_us: f64,
    /// Installs per second of the measured span (of simulated time).
    pub update_rate: f64,
}

/// What `hyflow sim` reports (key names are an interface).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimSummary {
    /// The simulated figures.
    #[serde(flatten)]
    pub metrics: MetricsSummary,
    /// The offload policy.
    pub policy: &'static str,
    /// What the policy did.
    pub policy_report: PolicyReport,
    /// The rate asked for, if the input was rescaled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_target_pps: Option<f64>,
    /// Host-side counts.
    pub host: HostCounts,
    /// The NIC.
    pub nic: NicSummary,
    /// Rule updates applied.
    pub rule_updates: u64,
    /// Malformed frames (forwarded on what was parsed).
    pub malformed: u64,
    /// Packets cut to the capture's snapshot length (read from their headers).
    pub snaplen_truncated: u64,
    /// Where the capture was found cut mid-record, if it was: the figures are over its
    /// complete packets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_cut: Option<CaptureCut>,
    /// Packets forwarded by an entry awaiting a revalidation verdict.
    pub stale: u64,
    /// Packets of which at least one copy left (after the warm-up, if any).
    pub forwarded: u64,
    /// Packets the pipeline dropped: none of their copies left (losses at full rings are
    /// counted apart, in `metrics`).
    pub dropped: u64,
    /// Every port's packets and bytes in and out (after the warm-up, if any), as
    /// `ovs-ofctl dump-ports` counts them; a packet lost at a full ring counts as received.
    pub ports: Vec<PortStats>,
    /// The cost model used.
    pub costs_ns: CostModel,
    /// The answer of a min-cores search: the fewest cores from which every count up to the
    /// search's bound lost nothing; absent (with a warning) when no count is lossless.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_cores: Option<usize>,
    /// The fewest cores from which every count up to the bound lost at most `loss_tolerance`
    /// of its packets (a min-cores search).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_cores_within_tolerance: Option<usize>,
    /// The tolerance of `min_cores_within_tolerance`, a fraction of the packets offered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_tolerance: Option<f64>,
    /// Every core count a min-cores search ran, with what it lost (Elixir's Figure 13).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub loss_by_cores: Vec<CoreLoss>,
    /// The answer of a max-rate search, packets/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rate_pps: Option<f64>,
    /// How the generated bursts fared (gateway traffic only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bursts: Option<BurstSummary>,
    /// Why these figures may mean less than they seem (a run shorter than the policy's
    /// windows, a policy measured on what it learned from, an input squeezed into a moment),
    /// one sentence each; parameters named between backticks, for each front to spell.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Highest rate an input may be rescaled to: 10 G packets per second, 17 times a 400 GbE
/// port's line rate of 64-byte frames; beyond, timestamps collapse to the same nanosecond.
pub const MAX_RATE_PPS: f64 = 1e10;

/// Shortest measured span, simulated, whose figures are more than a cold start when the
/// input was rescaled to a rate.
pub const SHORTEST_MEANINGFUL_RUN_NS: u64 = 1_000_000_000;

/// A simulation's result.
pub struct SimOutcome {
    /// The summary.
    pub summary: SimSummary,
    /// Everything measured (histograms, time series), for plots.
    pub metrics: Metrics,
    /// The switch at the end (its caches and NIC, for dumps and reports).
    pub switch: Switch,
}

/// How often a pass before the run (reading rates, training a policy) asks whether to go on.
const PRE_PASS_CHECK_EVERY: u64 = 1 << 16;

/// Whether a pass before the run may go on after `n` packets: every
/// [`PRE_PASS_CHECK_EVERY`] it reports, as 0 packets simulated, how far the input was read.
fn pre_pass_goes_on(n: u64, source: &PacketSource, progress: OnProgress) -> Result<(), ExperimentError> {
    if n.is_multiple_of(PRE_PASS_CHECK_EVERY) && progress(0, source.progress()).is_break() {
        return Err(ExperimentError::Interrupted);
    }
    Ok(())
}

/// Packets per second of the input as recorded (a first pass over it).
fn natural_rate(workload: &Workload, progress: OnProgress) -> Result<f64, ExperimentError> {
    if let Some(rate) = workload.input.known_rate() {
        return Ok(rate);
    }
    let mut source = PacketSource::open(&workload.input, &workload.rules)?;
    let (mut n, mut last) = (0u64, 0u64);
    while let Some(ts) = source.next_timestamp()? {
        n += 1;
        last = ts;
        pre_pass_goes_on(n, &source, progress)?;
    }
    if n < 2 || last == 0 {
        return Err(ExperimentError::Unanswerable(
            "the input has fewer than two packets with distinct timestamps: no rate to rescale".to_string(),
        ));
    }
    Ok((n - 1) as f64 * 1e9 / last as f64)
}

/// The policy as the runs build it: trained first on the input's opening stretch if it
/// learns before the run (LFP), with timestamps as recorded, before any rescaling.
fn prepare(
    workload: &Workload,
    exp: &SimExperiment,
    progress: OnProgress,
) -> Result<PolicyConfig, ExperimentError> {
    let Some(mut trainer) = exp.policy.trainer() else { return Ok(exp.policy.clone()) };
    let mut source = PacketSource::open(&workload.input, &workload.rules)?;
    let mut n = 0;
    while let Some(p) = source.next_packet()? {
        if p.ts_ns >= trainer.until_ns() {
            break;
        }
        trainer.observe(&p.key, p.bytes);
        n += 1;
        pre_pass_goes_on(n, &source, progress)?;
    }
    trainer.finish().map_err(ExperimentError::Policy)
}

/// Runs one simulation of `workload` (on `cores` cores at `rate` if given, overriding the
/// experiment's), calling `progress` as packets arrive.
fn simulate_at(
    workload: &Workload,
    exp: &SimExperiment,
    cores: usize,
    rate: Option<(f64, f64)>,
    progress: OnProgress,
    mut on_decision: Option<&mut dyn FnMut(SimDecision) -> std::io::Result<()>>,
    policy: &PolicyConfig,
) -> Result<SimOutcome, ExperimentError> {
    let pipeline = workload.pipeline();
    let policy_config = policy;
    let policy = policy_config.build(&exp.policy_machine()).map_err(ExperimentError::Policy)?;
    let datapath = SwitchDatapath::new(
        pipeline,
        exp.switch.clone(),
        policy,
        exp.costs,
        workload.updates.clone(),
        exp.limits,
    )?;
    // A policy that samples sets the NIC's sampling rate.
    let sample_hw = match exp.policy.sample_rate() {
        r if r > 0.0 => r,
        _ => exp.machine.sample_hw,
    };
    let scale = rate.map_or(1.0, |(natural, r)| natural / r);
    // The warm-up is a stretch of the input: rescaled with it.
    let warmup_ns = (exp.machine.warmup_ns as f64 * scale) as u64;
    // Crossings of the policy's queue threshold are logged: when bursts were detected.
    let ring_watch = datapath.policy().ring_watch().unwrap_or(0);
    let machine = SimConfig { cores, sample_hw, warmup_ns, ring_watch, ..exp.machine.clone() };
    let mut sim = Simulator::new(machine, datapath)?;
    if on_decision.is_some() {
        sim.datapath_mut().record_decisions();
    }
    let end = exp.duration_ns.unwrap_or(u64::MAX);
    let mut source = PacketSource::open(&workload.input, &workload.rules)?;
    let mut bursts = BurstTracker::default();
    let mut n = 0;
    let mut first_arrival = None;
    // (simulated, as recorded), ns.
    let mut last_arrival = (0, 0);
    // The input's counts before the packet that ended the warm-up (0 without one).
    let mut input_at_start = None;
    let mut input_so_far = (0, 0);
    while let Some(p) = source.next_packet()? {
        let t = (p.ts_ns as f64 * scale) as u64;
        if t >= end {
            break;
        }
        first_arrival.get_or_insert((t, p.ts_ns));
        last_arrival = (t, p.ts_ns);
        let hit = sim.arrive(t, &SimPacket { key: p.key, bytes: p.bytes, index: n, flow: p.flow });
        if input_at_start.is_none() && sim.measuring() {
            input_at_start = Some(input_so_far);
        }
        if let Some(b) = p.burst {
            bursts.packet(b, t, hit);
        }
        if input_at_start.is_none() {
            input_so_far = (source.malformed().total(), source.snaplen_truncated());
        }
        n += 1;
        if progress(n, source.progress()).is_break() {
            return Err(ExperimentError::Interrupted);
        }
        if let Some(f) = on_decision.as_deref_mut() {
            if n % 1024 == 0 {
                sim.datapath_mut().take_decisions(false, f)?;
            }
        }
    }
    if !sim.measuring() {
        return Err(ExperimentError::Unanswerable(format!(
            "the input ends within the warm-up ({} s of the input as recorded): nothing was measured",
            exp.machine.warmup_ns as f64 / 1e9
        )));
    }
    if let Some(f) = on_decision {
        sim.run_to_end();
        sim.datapath_mut().take_decisions(true, f)?;
    }
    let burst_cores: Option<Vec<Option<usize>>> =
        source.gateway().map(|g| g.burst_log().iter().map(|b| sim.core_of(g.key(b.flow))).collect());
    let (metrics, datapath) = sim.finish();
    if metrics.series_overflow {
        let span_s = metrics.last_ns.saturating_sub(metrics.first_ns) as f64 / 1e9;
        let shortest_ms = span_s * 1e3 / MAX_SERIES_POINTS as f64;
        return Err(ExperimentError::Param(InvalidParam::new(
            "interval",
            format!(
                "{} ms makes more than {MAX_SERIES_POINTS} points over this run's {span_s:.3} s: give at least \
                 {shortest_ms:.6} ms, or none (sized to the run)",
                metrics.interval_ns as f64 / 1e6
            ),
        )));
    }
    let burst_summary = source.gateway().zip(burst_cores).map(|(g, cores)| {
        let first = source.first_ts_ns();
        bursts.summarize(
            g.burst_log(),
            |ns| (ns.saturating_sub(first) as f64 * scale) as u64,
            &cores,
            &metrics.crossings,
            ring_watch > 0,
            (metrics.first_ns, metrics.last_ns),
        )
    });
    let sw = datapath.switch();
    let stats = datapath.stats();
    let nic = sw.nic_report().unwrap_or_default();
    let counts = datapath.switch_counts();
    let installs = counts.nic_installs;
    let (malformed_before, truncated_before) = input_at_start.unwrap_or_default();
    let span_ns = metrics.last_ns.saturating_sub(metrics.first_ns);
    let mut summary = SimSummary {
        metrics: metrics.summary(),
        policy: exp.policy.name(),
        policy_report: datapath.policy_report(),
        rate_target_pps: rate.map(|(_, r)| r),
        host: HostCounts {
            microflow_hits: stats.microflow,
            megaflow_hits: stats.megaflow,
            upcalls: stats.upcalls,
            continued_from_nic: stats.continued,
            microflow_evictions: counts.microflow_evictions,
            microflow_invalidated: counts.microflow_invalidated,
        },
        nic: NicSummary {
            installs,
            entries: nic.entries_now,
            entries_peak: nic.totals.peak,
            installs_refused_rate_cap: stats.installs_capped,
            updates_per_s_cap: exp.limits.per_second,
            update_latency_us: exp.limits.latency_ns as f64 / 1e3,
            update_rate: if span_ns > 0 { installs as f64 * 1e9 / span_ns as f64 } else { 0.0 },
        },
        rule_updates: stats.rule_updates,
        malformed: source.malformed().total() - malformed_before,
        snaplen_truncated: source.snaplen_truncated() - truncated_before,
        capture_cut: source.cut().cloned(),
        stale: counts.stale,
        forwarded: counts.forwarded,
        dropped: counts.dropped,
        ports: counts.ports,
        costs_ns: exp.costs,
        min_cores: None,
        min_cores_within_tolerance: None,
        loss_tolerance: None,
        loss_by_cores: Vec::new(),
        max_rate_pps: None,
        bursts: burst_summary,
        warnings: Vec::new(),
    };
    let first_arrival = first_arrival.unwrap_or_default();
    let run = RunSpan {
        simulated_ns: last_arrival.0.saturating_sub(first_arrival.0),
        input_ns: last_arrival.1.saturating_sub(first_arrival.1),
        warmup_input_ns: exp.machine.warmup_ns,
    };
    summary.warnings = policy_config.caveats(&run);
    let measured_ns = metrics.last_ns.saturating_sub(metrics.first_ns);
    if let (Some((_, r)), true) = (rate, measured_ns < SHORTEST_MEANINGFUL_RUN_NS) {
        summary.warnings.push(format!(
            "the input, rescaled to `rate` {r} packets/s, is measured over {:.3} ms of simulated time: figures \
             from so short a run are mostly its cold start (give a longer input or a lower rate)",
            measured_ns as f64 / 1e6
        ));
    }
    Ok(SimOutcome { summary, metrics, switch: datapath.into_switch() })
}

/// One simulation of `workload` under `exp`, calling `progress` with the packets simulated
/// and how far the input has been read, and `on_decision`, if given, with every packet's
/// decision in input order (an error from it stops the run and is returned).
pub fn simulate(
    workload: &Workload,
    exp: &SimExperiment,
    progress: OnProgress,
    on_decision: Option<&mut dyn FnMut(SimDecision) -> std::io::Result<()>>,
) -> Result<SimOutcome, ExperimentError> {
    exp.check()?;
    let rate = match exp.rate_pps {
        Some(r) => Some((natural_rate(workload, progress)?, r)),
        None => None,
    };
    let prepared = prepare(workload, exp, progress)?;
    simulate_at(workload, exp, exp.machine.cores, rate, progress, on_decision, &prepared)
}

/// One probe of a capacity search, as the search runs it: lost and offered packets of the run
/// on `p.cores` at `p.rate_pps`, and whether the host kept up. A runner elsewhere (a Ray
/// task) calls this with the search's workload and experiment.
pub fn probe(workload: &Workload, exp: &SimExperiment, p: Probe) -> Result<CoreLoss, ExperimentError> {
    exp.check()?;
    let natural = match p.rate_pps {
        Some(_) => Some(natural_rate(workload, &mut unwatched)?),
        None => None,
    };
    let prepared = prepare(workload, exp, &mut unwatched)?;
    run_probe(workload, exp, p, natural, &prepared, &mut unwatched)
}

/// A probe's run, given the input's natural rate (if the probe rescales) and the prepared policy.
fn run_probe(
    workload: &Workload,
    exp: &SimExperiment,
    p: Probe,
    natural: Option<f64>,
    prepared: &PolicyConfig,
    progress: OnProgress,
) -> Result<CoreLoss, ExperimentError> {
    let at = p.rate_pps.zip(natural).map(|(r, n)| (n, r));
    let run = simulate_at(workload, exp, p.cores, at, progress, None, prepared)?;
    Ok(CoreLoss::new(p.cores, run.metrics.lost(), run.metrics.packets, run.metrics.steady()))
}

/// A capacity search: runs simulations until the answer is bracketed, then returns the
/// answering run with the answer in its summary. The probes run on the experiment's
/// `search_threads` threads, or on `runner` if given (the answer is the same); the answering
/// run is made here. Every run here asks `keep_going` as it goes (from the search's threads),
/// and the search ends in [`ExperimentError::Interrupted`] once it answers false.
pub fn search(
    workload: &Workload,
    exp: &SimExperiment,
    what: Search,
    keep_going: &(dyn Fn() -> bool + Sync),
    runner: Option<&dyn ProbeRunner>,
) -> Result<SimOutcome, ExperimentError> {
    let watch = || {
        move |_: u64, _: Progress| {
            if keep_going() {
                std::ops::ControlFlow::Continue(())
            } else {
                std::ops::ControlFlow::Break(())
            }
        }
    };
    exp.check()?;
    if let Search::MinCores { max_cores, tolerance } = what {
        if !(0.0..=1.0).contains(&tolerance) {
            return Err(ExperimentError::Param(InvalidParam::new(
                "loss-tolerance",
                format!("must be a fraction of the packets offered, from 0 to 1, not {tolerance}"),
            )));
        }
        if max_cores == 0 {
            return Err(ExperimentError::Param(InvalidParam::new("max-cores", "must be at least 1")));
        }
    }
    let natural = match (what, exp.rate_pps) {
        (Search::MaxRate, _) | (_, Some(_)) => Some(natural_rate(workload, &mut watch())?),
        _ => None,
    };
    let prepared = prepare(workload, exp, &mut watch())?;
    // A probe is lossless only if it lost nothing and the host kept up: a run that lost
    // nothing only because the input ended before the rings filled was falling behind.
    let local = |p: &Probe| run_probe(workload, exp, *p, natural, &prepared, &mut watch());
    let threads = exp.search_threads.max(1);
    // Probes elsewhere are checked for the interruption between batches.
    let remote = |probes: &[Probe]| -> Vec<Result<CoreLoss, ExperimentError>> {
        let runner = runner.expect("remote batches only with a runner");
        if !keep_going() {
            return probes.iter().map(|_| Err(ExperimentError::Interrupted)).collect();
        }
        let results = runner.run(probes);
        assert_eq!(results.len(), probes.len(), "a probe runner answers every probe it is given");
        results
    };
    let mut swept = Vec::new();
    let (cores, rate) = match what {
        Search::MinCores { max_cores, .. } => {
            let probes: Vec<Probe> =
                (1..=max_cores.max(1)).map(|cores| Probe { cores, rate_pps: exp.rate_pps }).collect();
            swept = match runner {
                None => sweep(&probes, threads, local)?,
                Some(_) => remote(&probes).into_iter().collect::<Result<_, _>>()?,
            };
            // With no lossless count the sweep still answers Fig. 13's question (loss against
            // cores) and maybe the tolerance's: the run reported is then the bound's.
            let found = fewest_cores_from(&swept, CoreLoss::lossless).unwrap_or(max_cores.max(1));
            (found, exp.rate_pps)
        }
        Search::MaxRate => {
            let ceiling = (natural.unwrap_or(0.0) * 10.0).max(MAX_RATE_CEILING_PPS);
            let at = |r: &u64| Probe { cores: exp.machine.cores, rate_pps: Some(*r as f64) };
            let width = runner.map_or(threads, |r| r.width());
            let found = bisect(MaxRate::new(ceiling as u64, 0.01), width, |rates: &[u64]| {
                let outcomes = match runner {
                    None => parallel(rates, threads, |r| local(&at(r))),
                    Some(_) => remote(&rates.iter().map(at).collect::<Vec<_>>()),
                };
                outcomes.into_iter().map(|o| o.map(|l| l.lossless())).collect()
            })?;
            let found = found.ok_or_else(|| {
                ExperimentError::Unanswerable(format!(
                    "loses packets, or falls behind until the input ends, at every rate tried on {} cores",
                    exp.machine.cores
                ))
            })?;
            (exp.machine.cores, Some(found as f64))
        }
    };
    // The answer's own run again (runs are deterministic: it is the probe that answered).
    let at = rate.zip(natural).map(|(r, n)| (n, r));
    let mut run = simulate_at(workload, exp, cores, at, &mut watch(), None, &prepared)?;
    match what {
        Search::MinCores { tolerance, .. } => {
            let s = &mut run.summary;
            s.min_cores = fewest_cores_from(&swept, CoreLoss::lossless);
            if s.min_cores.is_none() {
                s.warnings.push(format!(
                    "no core count up to {cores} (the search's most) is lossless: it loses packets, or falls \
                     behind until the input ends; the figures are those of the run on {cores} cores"
                ));
            }
            s.min_cores_within_tolerance = fewest_cores_from(&swept, |l| l.within(tolerance));
            s.loss_tolerance = Some(tolerance);
            let lossless_below: Vec<String> = swept
                .iter()
                .filter(|l| l.cores < cores && l.lossless())
                .map(|l| l.cores.to_string())
                .collect();
            if let Some(last_bad) = swept.iter().rfind(|l| !l.lossless()) {
                if !lossless_below.is_empty() {
                    let fate = match last_bad.lost {
                        0 => "fall behind".to_string(),
                        n => format!("lose {n} packets"),
                    };
                    s.warnings.push(format!(
                        "loss is not monotone in cores: lossless on {} cores, yet {} cores {fate}; {cores} is the \
                         fewest from which every count up to {} is lossless (the loss by cores has each count)",
                        lossless_below.join(", "),
                        last_bad.cores,
                        swept.last().map_or(cores, |l| l.cores)
                    ));
                }
            }
            s.loss_by_cores = swept;
        }
        Search::MaxRate => run.summary.max_rate_pps = rate,
    }
    Ok(run)
}
