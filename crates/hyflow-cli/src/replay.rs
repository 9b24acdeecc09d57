//! `hyflow replay` and `hyflow gen`: files in, the engine's report out.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};

use hyflow::cache::Consistency;
use hyflow::experiment::replay::{DecisionRecord, ReplayConfig};
use hyflow::experiment::Workload;
use hyflow::nic::gigaflow::{GigaflowConfig, Partition};
use hyflow::nic::paper_setup;
use hyflow::openflow::{read_flow_file, Pipeline, Rule};
use hyflow::switch::{MicroflowConfig, NicConfig, SwitchConfig};
use hyflow::trace::{LinkType, PcapWriter};
use hyflow::workload::gateway::{GatewayConfig, SPEC_PREFIX};
use hyflow::workload::{
    builtin, generate, generate_updates, GenPacket, TrafficConfig, TrafficError, UpdatesConfig,
};

use crate::{
    ConsistencyArg, GenDynamicArgs, GenGatewayArgs, GenPipelineArgs, GenTrafficArgs, GenUpdatesArgs,
    LocalityArg, MappingsArg, NicArg, PartitionArg, PresetArg, ReplayArgs, SwitchArgs,
};

fn seconds_to_ns(flag: &str, s: f64) -> Result<u64> {
    if !(s.is_finite() && s >= 0.0) {
        bail!("{flag} must be a non-negative number of seconds, not {s}");
    }
    Ok((s * 1e9).round() as u64)
}

fn paper(a: &SwitchArgs) -> bool {
    a.preset == Some(PresetArg::GigaflowPaper)
}

/// Distinct masks per NIC stage: given, the preset's, or hyflow's default.
fn nic_masks(a: &SwitchArgs) -> usize {
    let default = if paper(a) { paper_setup::MASKS } else { hyflow::nic::DEFAULT_MEGAFLOW_MASKS };
    a.nic_masks.unwrap_or(default)
}

/// The megaflow-offload NIC the options size: (entries, masks).
pub(crate) fn megaflow_nic(a: &SwitchArgs) -> (usize, usize) {
    let default =
        if paper(a) { paper_setup::MEGAFLOW_ENTRIES } else { hyflow::nic::DEFAULT_MEGAFLOW_ENTRIES };
    (a.nic_entries.unwrap_or(default), nic_masks(a))
}

/// The Gigaflow NIC the options shape.
pub(crate) fn gigaflow_nic(a: &SwitchArgs) -> GigaflowConfig {
    let default =
        if paper(a) { paper_setup::GIGAFLOW_ENTRIES } else { hyflow::nic::gigaflow::DEFAULT_ENTRIES };
    GigaflowConfig {
        tables: a.nic_tables,
        entries: a.nic_entries.unwrap_or(default),
        max_masks: nic_masks(a),
        partition: match a.partition {
            PartitionArg::Dp => Partition::Disjoint,
            PartitionArg::Random => Partition::Random,
            PartitionArg::OneToOne => Partition::OneToOne,
        },
        seed: 1,
        whole_mappings: a.mappings.map_or(paper(a), |m| m == MappingsArg::Whole),
    }
}

pub(crate) fn switch_config(a: &SwitchArgs) -> Result<SwitchConfig> {
    let consistency = match a.consistency {
        ConsistencyArg::Signature => Consistency::Signature,
        ConsistencyArg::Cookie => Consistency::Cookie,
        ConsistencyArg::Action => Consistency::Action,
    };
    let config = SwitchConfig {
        nic: (!a.no_nic).then(|| match a.nic.unwrap_or(NicArg::Megaflow) {
            NicArg::Megaflow => {
                let (entries, max_masks) = megaflow_nic(a);
                NicConfig::Megaflow { entries, max_masks }
            }
            NicArg::Gigaflow => NicConfig::Gigaflow(gigaflow_nic(a)),
        }),
        nic_update_latency_ns: 0,
        microflow: (!a.no_microflow && !paper(a))
            .then_some(MicroflowConfig { entries: a.microflow_entries, ways: a.microflow_ways }),
        megaflow: (!a.no_megaflow).then_some(a.megaflow_entries),
        consistency,
        max_idle_ns: match a.max_idle {
            Some(s) => seconds_to_ns("--max-idle", s)?,
            // The artifact's tables never expire (fill-only).
            None if paper(a) => 0,
            None => hyflow::switch::DEFAULT_MAX_IDLE_NS,
        },
        revalidation_delay_ns: seconds_to_ns("--revalidation-delay", a.revalidation_delay)?,
    };
    Ok(if a.no_cache {
        SwitchConfig { nic: None, microflow: None, megaflow: None, ..config }
    } else {
        config
    })
}

pub(crate) fn create(path: &Path) -> Result<Box<dyn Write>> {
    if path == Path::new("-") {
        return Ok(Box::new(BufWriter::new(std::io::stdout())));
    }
    let f = File::create(path).with_context(|| format!("{}: cannot create", path.display()))?;
    Ok(Box::new(BufWriter::new(f)))
}

/// A progress bar on standard error, drawn only on a terminal (indicatif hides it otherwise)
/// and updated every [`Progress::EVERY`] packets, off the per-packet path.
pub(crate) struct Progress {
    bar: indicatif::ProgressBar,
}

impl Progress {
    const EVERY: u64 = 1 << 16;

    /// A bar labelled `label`, sized on the first update.
    pub(crate) fn new(label: &str) -> Progress {
        let bar = indicatif::ProgressBar::new(0);
        let template = format!("{{spinner}} {label} {{msg}} [{{bar:30}}] {{eta}}");
        if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        Progress { bar }
    }

    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// After `packets` packets, with the input read as far as `at`.
    #[inline]
    pub(crate) fn tick(&self, packets: u64, at: hyflow::input::Progress) {
        if packets.is_multiple_of(Self::EVERY) {
            let unit = if at.bytes { "bytes" } else { "packets" };
            self.bar.set_message(format!("{packets} packets, {} of {} {unit}", at.done, at.total));
            self.bar.set_length(at.total);
            self.bar.set_position(at.done);
        }
    }
}

/// The workload the options name: the given files, or the built-in workload (with
/// `--updates` replacing its update stream when given).
pub(crate) fn workload(a: &SwitchArgs) -> Result<Workload> {
    if let Some(spec) = a.trace.as_ref().and_then(|t| GatewayConfig::parse(&t.to_string_lossy())) {
        let config = spec.map_err(|e| anyhow!("--trace: {e}"))?;
        let config = GatewayConfig { in_port: a.in_port.unwrap_or(config.in_port), ..config };
        let rules = a.flows.as_deref().map(hyflow::openflow::read_flow_file).transpose()?;
        let w = Workload::gateway(config, rules);
        return Ok(match &a.updates {
            Some(u) => w.with_updates_file(u)?,
            None => w,
        });
    }
    if a.trace.is_some() && a.flows.is_none() {
        bail!("--trace needs --flows (the pipeline the capture goes through), unless it is {SPEC_PREFIX}");
    }
    let w = match (&a.flows, &a.trace) {
        (Some(flows), Some(trace)) => Workload::from_files(flows, trace, a.updates.as_deref(), a.in_port)?,
        _ => match &a.updates {
            Some(u) => Workload::builtin(a.in_port).with_updates_file(u)?,
            None => Workload::builtin(a.in_port),
        },
    };
    if let (Some(flows), true) = (&a.flows, w.rules.is_empty()) {
        eprintln!(
            "hyflow: warning: {} has no rules: every packet misses table 0 and is dropped",
            flows.display()
        );
    }
    Ok(w)
}

pub fn run(r: ReplayArgs) -> Result<()> {
    let a = &r.switch;
    let warmup_ns = r.warmup.map(|s| seconds_to_ns("--warmup", s)).transpose()?;
    let config = ReplayConfig { switch: switch_config(a)?, time_host: true, warmup_ns };
    let workload = workload(a)?;
    // With a machine-readable output on stdout, the human text goes to stderr.
    let stdout_taken = [&r.json, &r.decisions].iter().any(|p| p.as_deref() == Some(Path::new("-")));
    let mut human: Box<dyn Write> =
        if stdout_taken { Box::new(std::io::stderr()) } else { Box::new(std::io::stdout().lock()) };
    if a.flows.is_none() && a.trace.is_none() {
        writeln!(
            human,
            "built-in workload: {} ({} rules), {} generated packets of {} flows, {}% of rules updated per second\n",
            builtin::FLOWS_NAME,
            workload.rules.len(),
            builtin::TRAFFIC.packets,
            builtin::TRAFFIC.flows,
            builtin::UPDATE_RATE * 100.0
        )?;
    }
    let mut log = r.decisions.as_deref().map(create).transpose()?;
    let progress = Progress::new("replay");
    let outcome = hyflow::experiment::replay::run(&workload, &config, &mut |d| {
        progress.tick(d.index + 1, d.progress);
        match &mut log {
            Some(out) => {
                serde_json::to_writer(&mut *out, &DecisionRecord::new(d.index, d.layer, d.outputs))?;
                writeln!(out)
            }
            None => Ok(()),
        }
    })?;
    progress.finish();
    if let Some(mut out) = log {
        out.flush()?;
    }
    write!(human, "{}", outcome.report.text())?;
    if r.rule_stats {
        writeln!(human, "\n{}", rule_stats(outcome.switch.pipeline()))?;
    }
    human.flush()?;
    if let Some(p) = &r.json {
        let mut out = create(p)?;
        writeln!(out, "{}", serde_json::to_string(&outcome.report)?)?;
        out.flush()?;
    }
    Ok(())
}

/// Per-rule counters in the shape of `ovs-ofctl dump-flows`.
fn rule_stats(p: &Pipeline) -> String {
    let mut rules: Vec<(u32, &Rule)> = p.rules().collect();
    rules.sort_by_key(|(id, r)| (r.table, std::cmp::Reverse(r.priority), *id));
    let mut out = String::new();
    for (id, r) in rules {
        let s = p.stats(id);
        let m = r.matcher.to_string();
        let sep = if m.is_empty() { "" } else { "," };
        out.push_str(&format!(
            " cookie={:#x}, table={}, n_packets={}, n_bytes={}, priority={}{sep}{m} actions={}\n",
            r.cookie,
            r.table,
            s.packets,
            s.bytes,
            r.priority,
            hyflow::openflow::action::format_actions(&r.actions)
        ));
    }
    out
}

/// Writes the packets `generate` hands its sink to a nanosecond pcap at `path`, and returns
/// what `generate` returns; a write error is reported as such, not as the generator's.
fn write_trace<T>(
    path: &Path,
    generate: impl FnOnce(&mut dyn FnMut(GenPacket) -> std::io::Result<()>) -> Result<T, TrafficError>,
) -> Result<T> {
    let mut writer = PcapWriter::create(path, LinkType::Ethernet, true)?;
    let mut failed = Ok(());
    let out = generate(&mut |p| {
        writer.write_packet(p.ts_ns, &p.frame).map_err(|e| {
            let msg = e.to_string();
            failed = Err(e);
            std::io::Error::other(msg)
        })
    })?;
    failed?;
    writer.finish()?;
    Ok(out)
}

pub fn gen_traffic(a: GenTrafficArgs) -> Result<()> {
    let rules = read_flow_file(&a.flows)?;
    let config =
        TrafficConfig { flows: a.flows_count, packets: a.packets, zipf: a.zipf, rate: a.rate, seed: a.seed };
    // The inner result only repeats a write error, which `write_trace` already reported.
    let _ = write_trace(&a.out, |sink| generate(&rules, &config, sink))?;
    println!("wrote {} packets of {} flows to {}", a.packets, a.flows_count, a.out.display());
    Ok(())
}

pub fn gen_dynamic(a: GenDynamicArgs) -> Result<()> {
    use hyflow::workload::dynamics::{generate_dynamic, DynamicsConfig};
    let traffic =
        TrafficConfig { flows: a.flows_count, packets: a.packets, zipf: a.zipf, rate: a.rate, seed: a.seed };
    let dynamics =
        DynamicsConfig { churn_period: a.churn_period, churn_fraction: a.churn_fraction, bursts: a.bursts };
    let keys = match &a.flows {
        Some(f) => hyflow::workload::make_flows(&read_flow_file(f)?, a.flows_count, a.seed)?,
        None => hyflow::workload::random_flows(a.flows_count, a.seed)?,
    };
    let _ = write_trace(&a.out, |sink| generate_dynamic(&keys, &traffic, &dynamics, sink))?;
    println!(
        "wrote {} packets of {} flows over {:.1} s to {}",
        a.packets,
        a.flows_count,
        a.packets as f64 / a.rate,
        a.out.display()
    );
    Ok(())
}

pub fn gen_gateway(a: GenGatewayArgs) -> Result<()> {
    use hyflow::packet::build::build_frame;
    use hyflow::workload::gateway::Gateway;
    let seconds = |flag: &str, s: f64| -> Result<u64> {
        if s.is_finite() && s > 0.0 {
            Ok((s * 1e9).round().max(1.0) as u64)
        } else {
            bail!("{flag} must be a positive number of seconds, not {s}")
        }
    };
    let config = GatewayConfig {
        flows: a.flows_count,
        bursty_flows: a.bursty,
        rate: a.rate,
        duration_ns: seconds("--duration", a.duration)?,
        top_share: a.top_share,
        head: a.head,
        churn_period_ns: seconds("--churn", a.churn)?,
        seed: a.seed,
        ..GatewayConfig::default()
    };
    let mut traffic = Gateway::new(config).map_err(|e| anyhow!("gen gateway: {e}"))?;
    let mut writer = PcapWriter::create(&a.out, LinkType::Ethernet, true)?;
    let mut n = 0u64;
    while let Some(p) = traffic.next() {
        // The frame check sequence is on the wire but not in the capture.
        writer.write_packet(p.ts_ns, &build_frame(traffic.key(p.flow), p.bytes as usize - 4))?;
        n += 1;
    }
    writer.finish()?;
    println!(
        "wrote {n} packets of {} flows ({} bursty, {} bursts) over {} s to {}",
        a.flows_count + a.bursty,
        a.bursty,
        traffic.bursts(),
        a.duration,
        a.out.display()
    );
    Ok(())
}

pub fn gen_updates(a: GenUpdatesArgs) -> Result<()> {
    let rules = read_flow_file(&a.flows)?;
    let lines = generate_updates(&rules, &UpdatesConfig { rate: a.rate, seconds: a.seconds, seed: a.seed })
        .map_err(anyhow::Error::msg)?;
    let mut out = create(&a.out)?;
    for l in &lines {
        writeln!(out, "{l}")?;
    }
    out.flush()?;
    println!("wrote {} updates over {} s to {}", lines.len(), a.seconds, a.out.display());
    Ok(())
}

pub fn gen_pipeline(a: GenPipelineArgs) -> Result<()> {
    use hyflow::input::{CaptureSlots, PacketSource};
    use hyflow::workload::flow_arrivals::FlowArrivals;
    use hyflow::workload::pipebench::{pipebench, Locality, PipebenchConfig};
    let names: Vec<&str> = hyflow::workload::pipelines::ALL.iter().map(|t| t.name).collect();
    let Some(template) = hyflow::workload::pipelines::by_name(&a.kind) else {
        bail!("unknown pipeline '{}' (one of: {})", a.kind, names.join(", "));
    };
    let locality = match a.locality {
        LocalityArg::High => Locality::High,
        LocalityArg::Low => Locality::Low,
    };
    let config =
        PipebenchConfig { rules: a.rules, headers: a.headers, locality, popularity: a.zipf, seed: a.seed };
    let workload = pipebench(template, &config)?;
    /// Where the trace's flows and times come from.
    enum Timing<'a> {
        Model(FlowArrivals),
        Capture(&'a Path, PacketSource),
    }
    // Every input is checked before anything is written.
    let timing = match &a.locality_from {
        None => Timing::Model(FlowArrivals::new(a.packets, a.flows_count, a.rate, a.seed)?),
        Some(path) => Timing::Capture(path, PacketSource::capture(path, None)?),
    };
    std::fs::create_dir_all(&a.out).with_context(|| format!("{}: cannot create", a.out.display()))?;
    for (name, text) in [("flows.txt", &workload.flows), ("traffic.txt", &workload.traffic)] {
        let path = a.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("{}: cannot write", path.display()))?;
    }
    let trace = a.out.join("trace.pcap");
    let (packets, flows) = match timing {
        Timing::Model(slots) => {
            let mut flows = 0;
            let packets = write_trace(&trace, |sink| {
                Ok(workload.fold(slots.inspect(|s| flows = flows.max(s.flow + 1)), sink))
            })?;
            (packets, flows)
        }
        Timing::Capture(capture, mut source) => {
            let mut slots = CaptureSlots::new(&mut source);
            let packets = write_trace(&trace, |sink| Ok(workload.fold(&mut slots, sink)))?;
            let (flows, error) = slots.finish();
            if let Some(e) = error {
                return Err(e).with_context(|| format!("{}: reading the locality source", capture.display()));
            }
            (packets, flows)
        }
    };
    // The inner result only repeats a write error, which `write_trace` already reported.
    let packets = packets.unwrap_or(0);
    let n_rules = workload.flows.lines().filter(|l| !l.starts_with('#')).count();
    println!(
        "wrote {} ({n_rules} rules for {} tuples), {} ({} headers) and {} ({packets} packets of {flows} flows)",
        a.out.join("flows.txt").display(),
        a.rules,
        a.out.join("traffic.txt").display(),
        workload.pool.len(),
        trace.display(),
    );
    Ok(())
}
