//! `hyflow replay` and `hyflow gen`: files in, the engine's report out.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde_json::json;

use hyflow::cache::Consistency;
use hyflow::gen::{
    builtin, generate, generate_updates, GenPacket, TrafficConfig, TrafficError, UpdatesConfig,
};
use hyflow::nic::gigaflow::{GigaflowConfig, Partition};
use hyflow::openflow::report::outputs_json;
use hyflow::openflow::update::read_updates_file;
use hyflow::openflow::{read_flow_file, Pipeline, Rule};
use hyflow::packet::{parse_frame, FlowKey, LinkKind};
use hyflow::replay::{Replay, ReplayReport};
use hyflow::switch::{Layer, MicroflowConfig, NicConfig, Switch, SwitchConfig};
use hyflow::trace::{LinkType, PcapWriter, TraceReader};

use crate::{
    ConsistencyArg, GenDynamicArgs, GenPipelineArgs, GenTrafficArgs, GenUpdatesArgs, LocalityArg, NicArg,
    PartitionArg, ReplayArgs, SwitchArgs,
};

fn seconds_to_ns(flag: &str, s: f64) -> Result<u64> {
    if !(s.is_finite() && s >= 0.0) {
        bail!("{flag} must be a non-negative number of seconds, not {s}");
    }
    Ok((s * 1e9).round() as u64)
}

/// The NIC layer of kind `kind`, sized by the NIC options.
pub(crate) fn nic_config(a: &SwitchArgs, kind: NicArg) -> NicConfig {
    match kind {
        NicArg::Megaflow => NicConfig::Megaflow {
            entries: a.nic_entries.unwrap_or(hyflow::nic::DEFAULT_MEGAFLOW_ENTRIES),
            max_masks: a.nic_masks,
        },
        NicArg::Gigaflow => NicConfig::Gigaflow(GigaflowConfig {
            tables: a.nic_tables,
            entries: a.nic_entries.unwrap_or(hyflow::nic::gigaflow::DEFAULT_ENTRIES),
            max_masks: a.nic_masks,
            partition: match a.partition {
                PartitionArg::Dp => Partition::Disjoint,
                PartitionArg::Random => Partition::Random,
                PartitionArg::OneToOne => Partition::OneToOne,
            },
            seed: 1,
        }),
    }
}

pub(crate) fn switch_config(a: &SwitchArgs) -> Result<SwitchConfig> {
    let consistency = match a.consistency {
        ConsistencyArg::Signature => Consistency::Signature,
        ConsistencyArg::Cookie => Consistency::Cookie,
        ConsistencyArg::Action => Consistency::Action,
    };
    let config = SwitchConfig {
        nic: (!a.no_nic).then_some(nic_config(a, a.nic)),
        nic_update_latency_ns: 0,
        microflow: (!a.no_microflow)
            .then_some(MicroflowConfig { entries: a.microflow_entries, ways: a.microflow_ways }),
        megaflow: (!a.no_megaflow).then_some(a.megaflow_entries),
        consistency,
        max_idle_ns: seconds_to_ns("--max-idle", a.max_idle)?,
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

/// A progress bar on standard error for long replays; drawn only on a terminal (indicatif
/// hides it otherwise) and updated every [`Progress::EVERY`] packets, off the per-packet path.
/// Reads a trace packet by packet and parses each frame (a malformed one keeps what was
/// parsed; a link type hyflow cannot parse, only its input port). `f` gets the timestamp,
/// the key, the wire length and whether the frame was malformed, and returns false to stop.
/// Shows a progress bar labelled `label` on a terminal. Returns the malformed count.
pub(crate) fn read_trace(
    path: &Path,
    in_port: Option<u32>,
    label: Option<&str>,
    mut f: impl FnMut(u64, &FlowKey, u32, bool) -> Result<bool>,
) -> Result<u64> {
    let mut reader = TraceReader::open(path)?;
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    let progress = label.map(|l| {
        Progress::new(
            size,
            &format!("{{spinner}} {l} {{bytes}}/{{total_bytes}} [{{bar:30}}] {{msg}} {{eta}}"),
        )
    });
    let (mut n, mut malformed) = (0u64, 0u64);
    while let Some(pkt) = reader.next_packet()? {
        n += 1;
        if let Some(p) = &progress {
            p.tick(n, pkt.offset);
        }
        let mut key = FlowKey::default();
        let port = in_port.unwrap_or(pkt.interface + 1);
        let bad = match pkt.link.frame_kind() {
            Some(link) => parse_frame(pkt.data, link, port, &mut key).is_err(),
            None => {
                key.set_in_port(port);
                true
            }
        };
        malformed += bad as u64;
        if !f(pkt.ts_ns, &key, pkt.orig_len, bad)? {
            break;
        }
    }
    if let Some(p) = progress {
        p.finish();
    }
    Ok(malformed)
}

pub(crate) struct Progress {
    bar: indicatif::ProgressBar,
}

impl Progress {
    const EVERY: u64 = 1 << 16;

    /// A bar of `len` units drawn with an indicatif `template` (the default style if the
    /// template does not parse).
    pub(crate) fn new(len: u64, template: &str) -> Progress {
        let bar = indicatif::ProgressBar::new(len);
        if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        Progress { bar }
    }

    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// After `packets` packets, at `position` (bytes or packets, as the bar counts).
    #[inline]
    pub(crate) fn tick(&self, packets: u64, position: u64) {
        if packets.is_multiple_of(Self::EVERY) {
            self.bar.set_message(format!("{packets} packets"));
            self.bar.set_position(position);
        }
    }
}

/// Writes `--decisions` lines.
struct DecisionLog {
    out: Box<dyn Write>,
    index: u64,
}

impl DecisionLog {
    fn record(&mut self, layer: Layer, outputs: &[hyflow::openflow::traversal::Output]) -> Result<()> {
        let line = json!({
            "i": self.index,
            "layer": layer.name(),
            "outputs": outputs_json(outputs),
            "drop": outputs.is_empty(),
        });
        writeln!(self.out, "{line}")?;
        self.index += 1;
        Ok(())
    }
}

/// The rules and updates of a workload: the given files, or the built-in workload's.
pub(crate) fn workload(a: &SwitchArgs) -> Result<(Vec<Rule>, Vec<hyflow::openflow::update::Update>)> {
    let rules = match &a.flows {
        Some(f) => read_flow_file(f)?,
        None => builtin::rules(),
    };
    let updates = match (&a.updates, &a.flows) {
        (Some(u), _) => read_updates_file(u)?,
        (None, None) => builtin::updates(&rules),
        (None, Some(_)) => Vec::new(),
    };
    Ok((rules, updates))
}

pub fn run(r: ReplayArgs) -> Result<()> {
    let a = &r.switch;
    let config = switch_config(a)?;
    let (rules, updates) = workload(a)?;
    let mut switch = Switch::new(Pipeline::from_rules(rules.clone()), config)?;
    switch.time_host(Box::new(hyflow::host_time::WallClock::default()));
    let mut replay = Replay::new(switch, updates);
    let mut log = match &r.decisions {
        Some(p) => Some(DecisionLog { out: create(p)?, index: 0 }),
        None => None,
    };
    let mut outputs = Vec::new();
    match &a.trace {
        Some(path) => {
            let mut reader = TraceReader::open(path)?;
            let size = std::fs::metadata(path).map_or(0, |m| m.len());
            let progress =
                Progress::new(size, "{spinner} replay {bytes}/{total_bytes} [{bar:30}] {msg} {eta}");
            let mut n = 0;
            while let Some(pkt) = reader.next_packet()? {
                n += 1;
                progress.tick(n, pkt.offset);
                let port = a.in_port.unwrap_or(pkt.interface + 1);
                let layer = replay.frame(
                    pkt.ts_ns,
                    pkt.data,
                    pkt.link.frame_kind(),
                    port,
                    pkt.orig_len as u64,
                    &mut outputs,
                );
                if let Some(log) = &mut log {
                    log.record(layer, &outputs)?;
                }
            }
            progress.finish();
        }
        None => {
            println!(
                "built-in workload: {} ({} rules), {} generated packets of {} flows, {}% of rules updated per second\n",
                builtin::FLOWS_NAME,
                rules.len(),
                builtin::TRAFFIC.packets,
                builtin::TRAFFIC.flows,
                builtin::UPDATE_RATE * 100.0
            );
            let port = a.in_port.unwrap_or(1);
            let mut failed = Ok(());
            let progress = Progress::new(
                builtin::TRAFFIC.packets as u64,
                "{spinner} replay {pos}/{len} packets [{bar:30}] {eta}",
            );
            let mut n = 0;
            generate(&rules, &builtin::TRAFFIC, |p| {
                n += 1;
                progress.tick(n, n);
                let layer = replay.frame(
                    p.ts_ns,
                    &p.frame,
                    Some(LinkKind::Ethernet),
                    port,
                    p.frame.len() as u64 + 4,
                    &mut outputs,
                );
                if let Some(log) = &mut log {
                    if let Err(e) = log.record(layer, &outputs) {
                        failed = Err(e);
                        return Err(std::io::Error::other("decision log"));
                    }
                }
                Ok(())
            })??;
            failed?;
            progress.finish();
        }
    }
    if let Some(mut log) = log {
        log.out.flush()?;
    }
    let (switch, malformed, elapsed) = replay.finish();
    let report = ReplayReport::new(&switch, &malformed, elapsed);
    print!("{}", report.text());
    if r.rule_stats {
        println!("\n{}", rule_stats(switch.pipeline()));
    }
    if let Some(p) = &r.json {
        let mut out = create(p)?;
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
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
    use hyflow::gen::dynamics::{generate_dynamic, DynamicsConfig};
    let traffic =
        TrafficConfig { flows: a.flows_count, packets: a.packets, zipf: a.zipf, rate: a.rate, seed: a.seed };
    let dynamics =
        DynamicsConfig { churn_period: a.churn_period, churn_fraction: a.churn_fraction, bursts: a.bursts };
    let keys = match &a.flows {
        Some(f) => hyflow::gen::make_flows(&read_flow_file(f)?, a.flows_count, a.seed)?,
        None => hyflow::gen::random_flows(a.flows_count, a.seed),
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
    use hyflow::gen::pipebench::{pipebench, Locality, PipebenchConfig};
    let names: Vec<&str> = hyflow::gen::pipelines::ALL.iter().map(|t| t.name).collect();
    let Some(template) = hyflow::gen::pipelines::by_name(&a.kind) else {
        bail!("unknown pipeline '{}' (one of: {})", a.kind, names.join(", "));
    };
    let locality = match a.locality {
        LocalityArg::High => Locality::High,
        LocalityArg::Low => Locality::Low,
    };
    let traffic =
        TrafficConfig { flows: a.flows_count, packets: a.packets, zipf: a.zipf, rate: a.rate, seed: a.seed };
    std::fs::create_dir_all(&a.out).with_context(|| format!("{}: cannot create", a.out.display()))?;
    let config = PipebenchConfig { rules: a.rules, locality, traffic };
    let (flows, _) = write_trace(&a.out.join("trace.pcap"), |sink| pipebench(template, &config, sink))?;
    let flows_path = a.out.join("flows.txt");
    std::fs::write(&flows_path, &flows).with_context(|| format!("{}: cannot write", flows_path.display()))?;
    let n_rules = flows.lines().filter(|l| !l.starts_with('#')).count();
    println!(
        "wrote {} ({} rules for {} tuples) and {} packets of {} flows to {}",
        flows_path.display(),
        n_rules,
        a.rules,
        a.packets,
        a.flows_count,
        a.out.join("trace.pcap").display()
    );
    Ok(())
}
