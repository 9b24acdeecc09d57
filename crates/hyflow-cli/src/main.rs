//! `hyflow`: the command-line front of the hyflow engine. Thin by design: argument parsing,
//! file handling and printing; every decision is made in the `hyflow` library.

use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use hyflow::input::PacketSource;
use hyflow::openflow::report::{trace_text, TraceRecord};
use hyflow::openflow::{parse_packet, read_flow_file, Pipeline, Traversal};
use hyflow::packet::FlowKey;

mod parse_pcap;
mod plot;
mod replay;
mod sim;
mod topk;

#[derive(Parser)]
#[command(
    name = "hyflow",
    version,
    about = "A virtual switch split between a SmartNIC model and host software"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Trace packets through an OpenFlow pipeline, like `ovs-appctl ofproto/trace`: tables and
    /// rules visited, the megaflow, the datapath actions, and each output.
    Trace(TraceArgs),
    /// Replay a trace through the whole cache hierarchy (NIC megaflow offload, FlowShadow
    /// microflow cache, megaflow cache, slow path) with optional rule updates, and report per
    /// layer where packets were handled. With no --flows/--trace, runs the built-in workload
    /// (examples/l2l3acl.flows with generated traffic and updates).
    Replay(Box<ReplayArgs>),
    /// Generate workloads: traffic for a flow table, or rule-update streams.
    #[command(subcommand)]
    Gen(GenCommand),
    /// Real-time large flows: at every block boundary, the top-k flows of the sliding window
    /// ending there, by FastKeeper or a baseline detector (counts are packets in the window).
    Topk(topk::TopkArgs),
    /// Timing: a discrete-event simulation of the NIC, the host's receive rings and cores over
    /// trace time, with a calibrated cost model: latency (HDR percentiles), ring occupancy,
    /// loss, core utilisation; searches for the fewest cores or the highest rate without loss.
    Sim(Box<sim::SimArgs>),
    /// Measure hyflow's software path on this machine and write the cost model `sim` uses.
    Calibrate(sim::CalibrateArgs),
    /// Evaluate detectors against exact answers.
    #[command(subcommand)]
    Eval(EvalCommand),
    /// Print the flow of every packet of a capture in ovs-ofctl match notation, as
    /// `ovs-ofctl parse-pcap` does (Open vSwitch's flow extraction); VXLAN packets show the
    /// inner frame's fields plus tun_id, as the rest of hyflow sees them.
    ParsePcap(parse_pcap::ParsePcapArgs),
}

#[derive(Subcommand)]
enum EvalCommand {
    /// Precision and relative error of top-k detectors against the exact sliding-window
    /// top-k of a trace, for each algorithm x memory x k.
    Topk(topk::EvalTopkArgs),
}

/// Workload and cache options shared by `replay` and `sim`.
#[derive(Args)]
struct SwitchArgs {
    /// Flow file in `ovs-ofctl add-flows` syntax.
    #[arg(long, value_name = "FILE", requires = "trace")]
    flows: Option<PathBuf>,
    /// pcap/pcapng trace to replay, or `gen:gateway[,KEY=VALUE...]` for cloud-gateway traffic
    /// streamed in process (keys: flows, bursty, rate, duration, top-share, head, churn, seed,
    /// in-port; through examples/gateway.flows unless --flows is given). With it, `sim` also
    /// reports how the generated bursts fared: already in the NIC, moved in during the burst
    /// and how soon, and (elixir) how soon the flow's core's ring reached K.
    #[arg(long, value_name = "FILE|gen:gateway,...")]
    trace: Option<PathBuf>,
    /// Rule updates: `<seconds|#N> add|modify|modify-strict|delete|delete-strict <flow spec>` per line.
    #[arg(long, value_name = "FILE")]
    updates: Option<PathBuf>,
    /// Input port of trace packets (pcapng: interface i arrives on port i+1 when not given).
    #[arg(long, value_name = "PORT")]
    in_port: Option<u32>,
    /// Every packet through the slow path (the reference for the caches).
    #[arg(long)]
    no_cache: bool,
    /// No NIC (`sim` takes --policy psf instead).
    #[arg(long)]
    no_nic: bool,
    /// NIC caching scheme: megaflow (one stage of whole traversals, OVS offload) or gigaflow
    /// (sub-traversals in --nic-tables tagged stages, Longest Traversal Match).
    /// Default megaflow; `sim` takes --policy instead.
    #[arg(long, value_enum)]
    nic: Option<NicArg>,
    /// Defaults of a published setup; options given explicitly override them.
    /// `gigaflow-paper`: the Gigaflow artifact's evaluation (docs/gigaflow-paper-setup.md) —
    /// 63 usable masks per NIC table for both schemes, 8,000 entries per Gigaflow stage and
    /// 32,000 for Megaflow, no idle expiry (fill-only tables: a full table refuses, nothing is
    /// evicted), whole mappings, no microflow cache (EMC/SMC disabled); `replay`'s hit rates are cumulative
    /// from the first packet, as the artifact counted them.
    #[arg(long, value_enum)]
    preset: Option<PresetArg>,
    /// NIC entries: in total for megaflow (default 32768), per stage for gigaflow (default 8192);
    /// 32000 and 8000 with --preset gigaflow-paper.
    #[arg(long, value_name = "N")]
    nic_entries: Option<usize>,
    /// Distinct masks per NIC stage (default 512; 63 with --preset gigaflow-paper).
    #[arg(long, value_name = "N")]
    nic_masks: Option<usize>,
    /// Gigaflow stages (K).
    #[arg(long, value_name = "K", default_value_t = hyflow::nic::gigaflow::DEFAULT_TABLES)]
    nic_tables: usize,
    /// Gigaflow partitioning: dp (disjoint partitioning), random, one-to-one.
    #[arg(long, value_enum, default_value = "dp")]
    partition: PartitionArg,
    /// Gigaflow installs: partial (the pieces that fit; later traversals may complete the
    /// chain; the default) or whole (all of a traversal's pieces or none, as the Gigaflow
    /// artifact; the default with --preset gigaflow-paper).
    #[arg(long, value_enum, value_name = "HOW")]
    mappings: Option<MappingsArg>,
    /// No microflow cache (the default with --preset gigaflow-paper).
    #[arg(long)]
    no_microflow: bool,
    /// Microflow cache entries.
    #[arg(long, value_name = "N", default_value_t = hyflow::switch::DEFAULT_MICROFLOW_ENTRIES)]
    microflow_entries: usize,
    /// Entries per microflow bucket: 1 (direct replacement), 2 or 4 (pseudo-LRU).
    #[arg(long, value_name = "W", default_value_t = 1)]
    microflow_ways: usize,
    /// No software megaflow cache.
    #[arg(long)]
    no_megaflow: bool,
    /// Software megaflow cache entries.
    #[arg(long, value_name = "N", default_value_t = hyflow::switch::DEFAULT_MEGAFLOW_ENTRIES)]
    megaflow_entries: usize,
    /// How the microflow cache stays consistent with rule updates.
    #[arg(long, value_enum, default_value = "action")]
    consistency: ConsistencyArg,
    /// Seconds of trace time without a hit after which NIC and megaflow entries expire
    /// (0 = never; default 10).
    #[arg(long, value_name = "SECONDS")]
    max_idle: Option<f64>,
    /// Seconds between a rule update and the revalidator acting on NIC and megaflow entries.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    revalidation_delay: f64,
}

#[derive(Args)]
struct ReplayArgs {
    #[command(flatten)]
    switch: SwitchArgs,
    /// Write the report as one JSON object to FILE (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write one JSON line per packet: {"i", "layer", "outputs", "drop"}.
    #[arg(long, value_name = "FILE")]
    decisions: Option<PathBuf>,
    /// Print per-rule packet and byte counters, like `ovs-ofctl dump-flows`.
    #[arg(long)]
    rule_stats: bool,
    /// Also report where packets went from SECONDS of trace time on (the steady state); the
    /// main figures count from the first packet, the cold start included (as the Gigaflow
    /// artifact counted its hit rates).
    #[arg(long, value_name = "SECONDS")]
    warmup: Option<f64>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum PresetArg {
    /// The Gigaflow artifact's evaluation setup.
    GigaflowPaper,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum MappingsArg {
    /// Install the pieces that fit.
    Partial,
    /// Install all of a traversal's pieces or none.
    Whole,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum NicArg {
    /// One ternary stage of megaflows, offloaded while there is room (OVS).
    Megaflow,
    /// Gigaflow: sub-traversals in K tagged stages.
    Gigaflow,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum PartitionArg {
    /// The paper's disjoint partitioning (dynamic program).
    Dp,
    /// Random cuts.
    Random,
    /// One lookup per stage.
    OneToOne,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ConsistencyArg {
    /// Signature Table: eager removal of a changed rule's microflows (strong).
    Signature,
    /// Cookie Table: rule states checked on every hit (weak).
    Cookie,
    /// Action Table time stamps checked on every hit (weak).
    Action,
}

#[derive(Subcommand)]
enum GenCommand {
    /// A pcap trace whose flows exercise the rules of a flow file: Zipf flow sizes, Poisson
    /// arrivals, 64/576/1500-byte frames; deterministic for a seed.
    Traffic(GenTrafficArgs),
    /// A rule-update stream for a flow file (modify-strict 60%, delete-strict 20%, add 20%).
    Updates(GenUpdatesArgs),
    /// Traffic whose large flows change over time, with bursts (for `hyflow topk`): random
    /// IPv4 flows with Zipf rates, periodic churn of the top 10%, and bursts of 20-80x a
    /// flow's average rate, mostly shorter than a second; deterministic for a seed.
    Dynamic(GenDynamicArgs),
    /// A Pipebench-style workload for one of Gigaflow's reference pipelines: DIR/flows.txt
    /// (ClassBench-like tuples mapped onto the pipeline's traversals), DIR/traffic.txt (the
    /// header pool: --headers fixed headers, high or low pipeline-aware locality) and
    /// DIR/trace.pcap (64-byte packets whose flows, numbered by first appearance, take pool
    /// headers modulo its size, timed by a CAIDA-like model or a capture); deterministic for
    /// a seed.
    Pipeline(GenPipelineArgs),
    /// Cloud-gateway traffic (Elixir §2.1 and §5.1) as a pcap, for examples/gateway.flows: the
    /// top 10% of flows carry ~91% of the packets, the large set churns, bursty flows peak at
    /// 20-80x their average, a few dozen at once; `--trace gen:gateway,...` streams the same
    /// traffic without a file.
    Gateway(GenGatewayArgs),
}

#[derive(Args)]
struct GenGatewayArgs {
    /// Output pcap.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Steady flows.
    #[arg(long, value_name = "N", default_value_t = 500_000)]
    flows_count: usize,
    /// Bursty flows.
    #[arg(long, value_name = "N", default_value_t = 300)]
    bursty: usize,
    /// Mean packets per second.
    #[arg(long, value_name = "PPS", default_value_t = 56e6)]
    rate: f64,
    /// Seconds of traffic.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    duration: f64,
    /// Share of the steady packets carried by the top 10% of steady flows.
    #[arg(long, value_name = "SHARE", default_value_t = 0.91)]
    top_share: f64,
    /// Zipf–Mandelbrot offset of the steady flows' ranks, as a share of the flows: flattens
    /// the largest flows (0 = pure Zipf, whose largest flow carries over 10% of the packets).
    #[arg(long, value_name = "SHARE", default_value_t = 0.001)]
    head: f64,
    /// Seconds between churns of the large flows.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    churn: f64,
    /// RNG seed.
    #[arg(long, value_name = "X", default_value_t = 1)]
    seed: u64,
}

#[derive(Args)]
struct GenPipelineArgs {
    /// Pipeline template: ofd, psc, ols, ant or otl.
    #[arg(long, value_name = "KIND")]
    kind: String,
    /// ClassBench-like tuples to map onto the pipeline (rules before range expansion).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    rules: usize,
    /// Header pool lines (DIR/traffic.txt): the trace's distinct headers at most.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    headers: usize,
    /// high: pool headers combine popular values of each table group independently;
    /// low: each pool header follows one tuple, with its own host bits and ports.
    #[arg(long, value_enum, default_value = "high")]
    locality: LocalityArg,
    /// Zipf exponent of tuple popularity (high locality).
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    zipf: f64,
    /// Output directory (created if needed).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Take the trace's timing and flows from this capture (pcap/pcapng) instead of the
    /// CAIDA-like model: each packet keeps its time and gets the pool header of its 5-tuple's
    /// order of first appearance, modulo the pool size.
    #[arg(long, value_name = "PCAP", conflicts_with_all = ["flows_count", "packets", "rate"])]
    locality_from: Option<PathBuf>,
    /// Flows starting in the trace (about; CAIDA-like model).
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    flows_count: usize,
    /// Packets in the trace (CAIDA-like model).
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    packets: usize,
    /// Mean packets per second (CAIDA-like model).
    #[arg(long, value_name = "PPS", default_value_t = 100_000.0)]
    rate: f64,
    /// RNG seed.
    #[arg(long, value_name = "X", default_value_t = 1)]
    seed: u64,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LocalityArg {
    /// Headers share popular per-table values in new combinations (sub-traversals).
    High,
    /// Headers share values only as their tuples do.
    Low,
}

#[derive(Args)]
struct GenTrafficArgs {
    /// Flow file the traffic should exercise.
    #[arg(long, value_name = "FILE")]
    flows: PathBuf,
    /// Output pcap.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Distinct flows.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    flows_count: usize,
    /// Packets.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    packets: usize,
    /// Zipf exponent of flow popularity.
    #[arg(long, value_name = "S", default_value_t = 1.1)]
    zipf: f64,
    /// Mean packets per second.
    #[arg(long, value_name = "PPS", default_value_t = 100_000.0)]
    rate: f64,
    /// RNG seed.
    #[arg(long, value_name = "X", default_value_t = 1)]
    seed: u64,
}

#[derive(Args)]
struct GenDynamicArgs {
    /// Output pcap.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Make the flows exercise this flow table's rules (as `gen traffic` does) instead of
    /// random IPv4 flows: bursty traffic for `hyflow sim`.
    #[arg(long, value_name = "FILE")]
    flows: Option<PathBuf>,
    /// Distinct flows.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    flows_count: usize,
    /// Packets.
    #[arg(long, value_name = "N", default_value_t = 600_000)]
    packets: usize,
    /// Zipf exponent of flow rates.
    #[arg(long, value_name = "S", default_value_t = 1.2)]
    zipf: f64,
    /// Mean packets per second.
    #[arg(long, value_name = "PPS", default_value_t = 20_000.0)]
    rate: f64,
    /// Seconds between churns of the large flows.
    #[arg(long, value_name = "SECONDS", default_value_t = 3.0)]
    churn_period: f64,
    /// Share of the top 10% of flows replaced at each churn.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.15)]
    churn_fraction: f64,
    /// Bursts over the trace.
    #[arg(long, value_name = "N", default_value_t = 60)]
    bursts: usize,
    /// RNG seed.
    #[arg(long, value_name = "X", default_value_t = 1)]
    seed: u64,
}

#[derive(Args)]
struct GenUpdatesArgs {
    /// Flow file to update.
    #[arg(long, value_name = "FILE")]
    flows: PathBuf,
    /// Output updates file.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Fraction of the rules updated per second (FlowShadow used 0.1).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.1)]
    rate: f64,
    /// Seconds the stream covers.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    seconds: f64,
    /// RNG seed.
    #[arg(long, value_name = "X", default_value_t = 1)]
    seed: u64,
}

#[derive(Args)]
struct TraceArgs {
    /// Flow file in `ovs-ofctl add-flows` syntax.
    #[arg(long, value_name = "FILE")]
    flows: PathBuf,
    /// A packet as a match-style string, e.g.
    /// `in_port=1,dl_src=00:00:00:00:00:01,dl_type=0x0800,nw_src=10.0.0.1,nw_proto=6,tp_dst=80`
    /// (absent fields are zero).
    #[arg(value_name = "PACKET", conflicts_with_all = ["packets", "pcap"])]
    packet: Option<String>,
    /// File with one packet string per line (blank lines and `#` comments skipped).
    #[arg(long, value_name = "FILE", conflicts_with = "pcap")]
    packets: Option<PathBuf>,
    /// Take the packet from a pcap/pcapng trace (see --index).
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// 0-based index of the packet in --pcap.
    #[arg(long, default_value_t = 0, requires = "pcap")]
    index: u64,
    /// Input port for --pcap packets (pcapng interface i arrives on port i+1 when not given).
    #[arg(long, value_name = "PORT", requires = "pcap")]
    in_port: Option<u32>,
    /// Print one JSON object per packet instead of text.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = Cli::from_arg_matches(&negative_numbers_are_values(Cli::command()).get_matches())
        .unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Trace(args) => run_trace(args),
        Command::Replay(args) => replay::run(*args),
        Command::Gen(GenCommand::Traffic(args)) => replay::gen_traffic(args),
        Command::Gen(GenCommand::Updates(args)) => replay::gen_updates(args),
        Command::Gen(GenCommand::Dynamic(args)) => replay::gen_dynamic(args),
        Command::Gen(GenCommand::Gateway(args)) => replay::gen_gateway(args),
        Command::Gen(GenCommand::Pipeline(args)) => replay::gen_pipeline(args),
        Command::Topk(args) => topk::run(args),
        Command::Sim(args) => sim::run(*args),
        Command::Calibrate(args) => sim::run_calibrate(args),
        Command::Eval(EvalCommand::Topk(args)) => topk::eval(args),
        Command::ParsePcap(args) => parse_pcap::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hyflow: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `--rate -1` is the value -1 (to be refused with its range), not an unknown option `-1`:
/// on every subcommand, as clap sets it per command.
fn negative_numbers_are_values(cmd: clap::Command) -> clap::Command {
    cmd.allow_negative_numbers(true).mut_subcommands(negative_numbers_are_values)
}

/// Rust ignores SIGPIPE, so a write to a closed pipe (`hyflow replay | head`) fails, and
/// `println!` panics on it. A command-line tool should end there as `cat` does: killed by the
/// signal, quietly, with the shell's conventional status 141.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn load_pipeline(path: &Path) -> Result<Pipeline> {
    let rules = read_flow_file(path)?;
    Ok(Pipeline::from_rules(rules))
}

fn packet_from_pcap(path: &Path, index: u64, in_port: Option<u32>) -> Result<FlowKey> {
    let mut source = PacketSource::capture(path, in_port)?;
    let Some(p) = source.nth_packet(index)? else {
        bail!("{}: has {} packets, no packet at index {index}", path.display(), source.packets());
    };
    if let Some(reason) = p.malformed {
        eprintln!("hyflow: warning: packet {index} is malformed ({reason}); tracing what was parsed");
    }
    Ok(p.key)
}

fn packets_from_file(path: &Path) -> Result<Vec<FlowKey>> {
    let file = std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("{}: cannot read", path.display()))?;
        let Some(body) = hyflow::openflow::parser::strip_comment(&line) else { continue };
        let key = parse_packet(body).map_err(|e| {
            anyhow!("{}:{}:{}: {} (at '{}')", path.display(), n + 1, e.column, e.message, e.token)
        })?;
        out.push(key);
    }
    Ok(out)
}

fn run_trace(args: TraceArgs) -> Result<()> {
    let pipeline = load_pipeline(&args.flows)?;
    let packets = if let Some(p) = &args.packet {
        vec![parse_packet(p).map_err(|e| anyhow!("packet:{}: {} (at '{}')", e.column, e.message, e.token))?]
    } else if let Some(f) = &args.packets {
        packets_from_file(f)?
    } else if let Some(f) = &args.pcap {
        vec![packet_from_pcap(f, args.index, args.in_port)?]
    } else {
        bail!("give a PACKET, --packets FILE or --pcap FILE");
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut tr = Traversal::new();
    for (i, pkt) in packets.iter().enumerate() {
        pipeline.process(pkt, &mut tr);
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&TraceRecord::new(&tr, &pipeline))?)?;
        } else {
            if i > 0 {
                writeln!(out)?;
            }
            write!(out, "{}", trace_text(&tr, &pipeline))?;
        }
    }
    out.flush()?;
    Ok(())
}
