//! `gen`'s options and generators: each writes its files and returns the line saying what it
//! wrote.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;

use hyflow::capture::{LinkType, PcapWriter};
use hyflow::input::{write_columnar, Input, PacketSource};
use hyflow::workload::gateway::GatewayConfig;
use hyflow::workload::{generate, generate_updates, GenPacket, TrafficConfig, TrafficError, UpdatesConfig};

use crate::create;
use crate::names::NameArgs;

#[derive(Args)]
pub struct GenGatewayArgs {
    /// Output pcap, or a `.hyf` columnar trace when the name ends in .hyf (see `hyflow convert`).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Steady flows (Elixir's scale: 500000).
    #[arg(long, value_name = "N", default_value_t = GatewayConfig::default().flows)]
    pub flows_count: usize,
    /// Bursty flows (Elixir's scale: 300).
    #[arg(long, value_name = "N", default_value_t = GatewayConfig::default().bursty_flows)]
    pub bursty: usize,
    /// Mean packets per second (Elixir's scale: 56e6).
    #[arg(long, value_name = "PPS", default_value_t = GatewayConfig::default().rate)]
    pub rate: f64,
    /// Seconds of traffic (Elixir's scale: 60, 3.36 G packets).
    #[arg(long, value_name = "SECONDS", default_value_t = GatewayConfig::default().duration_ns as f64 / 1e9)]
    pub duration: f64,
    /// Share of the steady packets carried by the top 10% of steady flows.
    #[arg(long, value_name = "SHARE", default_value_t = GatewayConfig::default().top_share)]
    pub top_share: f64,
    /// Zipf–Mandelbrot offset of the steady flows' ranks, as a share of the flows: flattens
    /// the largest flows (0 = pure Zipf, whose largest flow carries over 10% of the packets).
    #[arg(long, value_name = "SHARE", default_value_t = GatewayConfig::default().head)]
    pub head: f64,
    /// Seconds between churns of the large flows (Elixir's scale: 10).
    #[arg(long, value_name = "SECONDS", default_value_t = GatewayConfig::default().churn_period_ns as f64 / 1e9)]
    pub churn: f64,
    /// RNG seed.
    #[arg(long, value_name = "X", default_value_t = 1)]
    pub seed: u64,
    /// Bytes of each packet written, as `tcpdump -s`: its wire length stays in the record, so
    /// replay and sim read the same traffic (0: whole frames, five times the file).
    #[arg(long, value_name = "BYTES", default_value_t = 128)]
    pub snaplen: usize,
}

#[derive(Args)]
pub struct GenPipelineArgs {
    /// Pipeline template: ofd, psc, ols, ant or otl.
    #[arg(long, value_name = "KIND")]
    pub kind: String,
    /// ClassBench-like tuples to map onto the pipeline (rules before range expansion).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub rules: usize,
    /// Header pool lines (DIR/traffic.txt): the trace's distinct headers at most.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub headers: usize,
    /// high: pool headers combine popular values of each table group independently;
    /// low: each pool header follows one tuple, with its own host bits and ports.
    #[arg(long, value_enum, default_value = "high")]
    pub locality: LocalityArg,
    /// Zipf exponent of tuple popularity (high locality).
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    pub zipf: f64,
    /// Output directory (created if needed).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Take the trace's timing and flows from this capture (pcap/pcapng) instead of the
    /// CAIDA-like model: each packet keeps its time and gets the pool header of its 5-tuple's
    /// order of first appearance, modulo the pool size.
    #[arg(long, value_name = "PCAP", conflicts_with_all = ["flows_count", "packets", "rate"])]
    pub locality_from: Option<PathBuf>,
    /// Flows starting in the trace (about; CAIDA-like model).
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub flows_count: usize,
    /// Packets in the trace (CAIDA-like model).
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub packets: usize,
    /// Mean packets per second (CAIDA-like model).
    #[arg(long, value_name = "PPS", default_value_t = 100_000.0)]
    pub rate: f64,
    /// RNG seed.
    #[arg(long, value_name = "X", default_value_t = 1)]
    pub seed: u64,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum LocalityArg {
    /// Headers share popular per-table values in new combinations (sub-traversals).
    High,
    /// Headers share values only as their tuples do.
    Low,
}

/// How `gen traffic` times packets and picks their flows.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TimingArg {
    /// Every packet picks its flow independently by Zipf popularity (`--zipf`); Poisson
    /// arrivals; CAIDA's trimodal frame sizes.
    Zipf,
    /// Flows arrive, send heavy-tailed numbers of packets in trains and end (the model `gen
    /// pipeline` uses); minimum-size frames.
    Caida,
    /// The same model shaped as FlowShadow's backbone trace: half the flows mice, trains of
    /// 3 packets 200 µs apart, idle gaps of 100 ms, one gap in ten a 10 s pause (fitted to
    /// the paper's microflow hit rates; see BENCHMARKS.md); minimum-size frames.
    Backbone,
}

#[derive(Args)]
pub struct GenTrafficArgs {
    /// Flow file the traffic should exercise.
    #[arg(long, value_name = "FILE")]
    pub flows: PathBuf,
    #[command(flatten)]
    pub names: NameArgs,
    /// Output pcap, or a `.hyf` columnar trace when the name ends in .hyf (see `hyflow convert`).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Distinct flows (zipf timing: the flows packets pick from, not all of which may be
    /// picked; caida and backbone: flows starting over the trace, and some more appear, which
    /// were running when it starts).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub flows_count: usize,
    /// Packets.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub packets: usize,
    /// How packets are timed and pick their flows.
    #[arg(long, value_enum, default_value = "zipf")]
    pub timing: TimingArg,
    /// Zipf exponent of flow popularity [default: 1.1] (zipf timing only).
    #[arg(long, value_name = "S")]
    pub zipf: Option<f64>,
    /// Mean packets per second.
    #[arg(long, value_name = "PPS", default_value_t = 100_000.0)]
    pub rate: f64,
    /// RNG seed.
    #[arg(long, value_name = "X", default_value_t = 1)]
    pub seed: u64,
}

#[derive(Args)]
pub struct GenConversationsArgs {
    /// Flow file the conversations go through (its replies are built from where first packets
    /// leave).
    #[arg(long, value_name = "FILE")]
    pub flows: PathBuf,
    #[command(flatten)]
    pub names: NameArgs,
    /// Conversations: per line `[weight=W] PACKET`, the first packet of a kind of conversation
    /// as a packet string (`in_port=pod1,tcp,nw_src=..,nw_dst=..,tp_dst=80`; its source port
    /// varies per conversation).
    #[arg(long, value_name = "FILE")]
    pub spec: PathBuf,
    /// Output pcapng (interface i is port i+1, as `replay --trace` reads it back), or a `.hyf` columnar
    /// trace of it when the name ends in .hyf.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Conversations to generate (at most 200000).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub conversations: usize,
    /// Mean conversations started per second (Poisson).
    #[arg(long, value_name = "CPS", default_value_t = 1000.0)]
    pub rate: f64,
    /// Data packets each way per conversation (TCP segments, UDP requests, ICMP echoes).
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub exchanges: u32,
    /// Round-trip time between the ends, in microseconds.
    #[arg(long, value_name = "US", default_value_t = 200)]
    pub rtt_us: u64,
    /// RNG seed.
    #[arg(long, value_name = "X", default_value_t = 1)]
    pub seed: u64,
}

#[derive(Args)]
pub struct GenDynamicArgs {
    /// Output pcap, or a `.hyf` columnar trace when the name ends in .hyf (see `hyflow convert`).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Make the flows exercise this flow table's rules (as `gen traffic` does) instead of
    /// random IPv4 flows: bursty traffic for `hyflow sim`.
    #[arg(long, value_name = "FILE")]
    pub flows: Option<PathBuf>,
    #[command(flatten)]
    pub names: NameArgs,
    /// Distinct flows.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub flows_count: usize,
    /// Packets.
    #[arg(long, value_name = "N", default_value_t = 600_000)]
    pub packets: usize,
    /// Zipf exponent of flow rates.
    #[arg(long, value_name = "S", default_value_t = 1.2)]
    pub zipf: f64,
    /// Mean packets per second.
    #[arg(long, value_name = "PPS", default_value_t = 20_000.0)]
    pub rate: f64,
    /// Seconds between churns of the large flows.
    #[arg(long, value_name = "SECONDS", default_value_t = 3.0)]
    pub churn_period: f64,
    /// Share of the top 10% of flows replaced at each churn.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.15)]
    pub churn_fraction: f64,
    /// Bursts over the trace.
    #[arg(long, value_name = "N", default_value_t = 60)]
    pub bursts: usize,
    /// RNG seed.
    #[arg(long, value_name = "X", default_value_t = 1)]
    pub seed: u64,
}

#[derive(Args)]
pub struct GenUpdatesArgs {
    /// Flow file to update.
    #[arg(long, value_name = "FILE")]
    pub flows: PathBuf,
    #[command(flatten)]
    pub names: NameArgs,
    /// Output updates file.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Fraction of the rules updated per second (FlowShadow used 0.1).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.1)]
    pub rate: f64,
    /// Seconds the stream covers.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub seconds: f64,
    /// RNG seed.
    #[arg(long, value_name = "X", default_value_t = 1)]
    pub seed: u64,
}

/// Whether `path` names a `.hyf` columnar trace (by its extension).
fn is_columnar_name(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "hyf")
}

/// Runs `write` (a generator writing a capture to the path it is given) and, when `out` names
/// a `.hyf`, converts that capture into it: the trace then holds exactly what reading the
/// capture gives. The capture is a temporary file beside `out`, removed afterwards.
fn to_capture_or_columnar(out: &Path, write: impl FnOnce(&Path) -> Result<String>) -> Result<String> {
    if !is_columnar_name(out) {
        return write(out);
    }
    let capture = out.with_extension("hyf-capture.pcapng");
    let result = write(&capture).and_then(|said| {
        let input = Input::Capture { path: capture.clone(), in_port: None, strict: true };
        let done = write_columnar(&mut PacketSource::open(&input, &[])?, out)?;
        let said = said.replace(&capture.display().to_string(), &out.display().to_string());
        Ok(format!("{said} ({} distinct flow keys)", done.flows))
    });
    let _ = std::fs::remove_file(&capture);
    result
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

pub fn traffic(a: GenTrafficArgs) -> Result<String> {
    let out = a.out.clone();
    to_capture_or_columnar(&out, |path| traffic_into(a, path))
}

fn traffic_into(a: GenTrafficArgs, out: &Path) -> Result<String> {
    use hyflow::workload::flow_arrivals::{FlowArrivals, FlowArrivalsConfig};
    use hyflow::workload::traffic::generate_timed;
    let rules = a.names.read_flows(&a.flows)?.rules;
    let shape = match a.timing {
        TimingArg::Zipf => None,
        TimingArg::Caida => Some(FlowArrivalsConfig::default()),
        TimingArg::Backbone => Some(FlowArrivalsConfig::BACKBONE),
    };
    let Some(shape) = shape else {
        let zipf = a.zipf.unwrap_or(1.1);
        let config =
            TrafficConfig { flows: a.flows_count, packets: a.packets, zipf, rate: a.rate, seed: a.seed };
        // The inner result only repeats a write error, which `write_trace` already reported.
        let _ = write_trace(out, |sink| generate(&rules, &config, sink))?;
        return Ok(format!("wrote {} packets of {} flows to {}", a.packets, a.flows_count, out.display()));
    };
    if a.zipf.is_some() {
        bail!("--zipf sets the popularity of --timing zipf; with flow arrivals a flow's size sets it");
    }
    let slots = FlowArrivals::with_config(a.packets, a.flows_count, a.rate, a.seed, shape)?;
    let mut flows = 0;
    let _ = write_trace(out, |sink| {
        generate_timed(&rules, slots.inspect(|s| flows = flows.max(s.flow + 1)), a.seed, sink)
    })?;
    Ok(format!("wrote {} packets of {flows} flows to {}", a.packets, out.display()))
}

pub fn dynamic(a: GenDynamicArgs) -> Result<String> {
    let out = a.out.clone();
    to_capture_or_columnar(&out, |path| dynamic_into(a, path))
}

fn dynamic_into(a: GenDynamicArgs, out: &Path) -> Result<String> {
    use hyflow::workload::dynamics::{generate_dynamic, DynamicsConfig};
    let traffic =
        TrafficConfig { flows: a.flows_count, packets: a.packets, zipf: a.zipf, rate: a.rate, seed: a.seed };
    let dynamics =
        DynamicsConfig { churn_period: a.churn_period, churn_fraction: a.churn_fraction, bursts: a.bursts };
    let keys = match &a.flows {
        Some(f) => hyflow::workload::make_flows(&a.names.read_flows(f)?.rules, a.flows_count, a.seed)?,
        None => hyflow::workload::random_flows(a.flows_count, a.seed)?,
    };
    let _ = write_trace(out, |sink| generate_dynamic(&keys, &traffic, &dynamics, sink))?;
    Ok(format!(
        "wrote {} packets of {} flows over {:.1} s to {}",
        a.packets,
        a.flows_count,
        a.packets as f64 / a.rate,
        out.display()
    ))
}

pub fn gateway(a: GenGatewayArgs) -> Result<String> {
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
    if is_columnar_name(&a.out) {
        // The generator's keys as `--trace gen:gateway,...` streams them, with each packet's
        // burst: no frames, so no snapshot length.
        let mut source = PacketSource::open(&Input::Gateway(config), &[])?;
        let done = write_columnar(&mut source, &a.out)?;
        return Ok(format!(
            "wrote {} packets of {} flows ({} bursty, {} bursts; {} distinct flow keys) over {} s to {}",
            done.packets,
            a.flows_count + a.bursty,
            a.bursty,
            source.gateway().map_or(0, |g| g.bursts()),
            done.flows,
            a.duration,
            a.out.display()
        ));
    }
    let mut writer = PcapWriter::create(&a.out, LinkType::Ethernet, true)?;
    let mut n = 0u64;
    while let Some(p) = traffic.next() {
        // The frame check sequence is on the wire but not in the capture.
        let frame = build_frame(traffic.key(p.flow), p.bytes as usize - 4);
        let kept = if a.snaplen == 0 { frame.len() } else { frame.len().min(a.snaplen) };
        writer.write_cut_packet(p.ts_ns, &frame[..kept], frame.len() as u32)?;
        n += 1;
    }
    writer.finish()?;
    Ok(format!(
        "wrote {n} packets of {} flows ({} bursty, {} bursts) over {} s to {}",
        a.flows_count + a.bursty,
        a.bursty,
        traffic.bursts(),
        a.duration,
        a.out.display()
    ))
}

pub fn updates(a: GenUpdatesArgs) -> Result<String> {
    let rules = a.names.read_flows(&a.flows)?.rules;
    let lines = generate_updates(&rules, &UpdatesConfig { rate: a.rate, seconds: a.seconds, seed: a.seed })?;
    let mut out = create(&a.out)?;
    for l in &lines {
        writeln!(out, "{l}")?;
    }
    out.flush()?;
    Ok(format!("wrote {} updates over {} s to {}", lines.len(), a.seconds, a.out.display()))
}

pub fn pipeline(a: GenPipelineArgs) -> Result<String> {
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
        Some(path) => Timing::Capture(path, PacketSource::capture(path, None, true)?),
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
    Ok(format!(
        "wrote {} ({n_rules} rules for {} tuples), {} ({} headers) and {} ({packets} packets of {flows} flows)",
        a.out.join("flows.txt").display(),
        a.rules,
        a.out.join("traffic.txt").display(),
        workload.pool.len(),
        trace.display(),
    ))
}

pub fn conversations(a: GenConversationsArgs) -> Result<String> {
    let out = a.out.clone();
    to_capture_or_columnar(&out, |path| conversations_into(a, path))
}

fn conversations_into(a: GenConversationsArgs, out: &Path) -> Result<String> {
    use hyflow::capture::PortsPcapngWriter;
    use hyflow::switch::{Switch, SwitchConfig};
    use hyflow::workload::conversations::{generate_conversations, parse_spec, ConversationConfig};
    let (pipeline, names) = a.names.load_pipeline(&a.flows)?;
    let spec_name = a.spec.display().to_string();
    let text = std::fs::read_to_string(&a.spec)
        .map_err(|e| anyhow::anyhow!("{spec_name}: cannot read: {}", hyflow::os_reason(&e)))?;
    let kinds = parse_spec(&text, &spec_name, &names)?;
    let mut switch = Switch::new(pipeline, SwitchConfig::no_cache())?;
    let config = ConversationConfig {
        conversations: a.conversations,
        rate: a.rate,
        exchanges: a.exchanges,
        rtt_ns: a.rtt_us.saturating_mul(1000),
        seed: a.seed,
    };
    let made = generate_conversations(&mut switch, &kinds, &config)?;
    let mut writer = PortsPcapngWriter::create(out, made.max_port)?;
    for (i, (ts, key, _)) in made.packets.iter().enumerate() {
        writer.write_packet(*ts, key.in_port(), &made.frame(i))?;
    }
    writer.finish()?;
    let s = made.stats;
    Ok(format!(
        "wrote {} packets of {} conversations ({} answered, {} unanswered) to {}",
        s.packets,
        a.conversations,
        s.answered,
        s.unanswered,
        out.display()
    ))
}
