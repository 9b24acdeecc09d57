//! `hyflow`: the command-line front of the hyflow engine. Thin by design: argument parsing,
//! file handling and printing; every decision is made in the `hyflow` library.

// No unsafe code but the one justified block that allows it locally (SIGPIPE's default).
#![deny(unsafe_code)]

use std::io::{BufWriter, Write};
use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use hyflow::openflow::report::{passes_text, TraceRecord};
use hyflow_commands::gen::{
    self, GenConversationsArgs, GenDynamicArgs, GenGatewayArgs, GenPipelineArgs, GenTrafficArgs,
    GenUpdatesArgs,
};
use hyflow_commands::replay::ReplayArgs;
use hyflow_commands::trace::TraceArgs;
use hyflow_commands::{negative_numbers_are_values, topk as topk_options};

mod kvs_sim;
mod parse_pcap;
mod progress;
mod ray_probes;
mod replay;
mod sim;
mod topk;

/// The command's options as given (after `hyflow <command>`), for a run record's setup: text,
/// with bytes that are not UTF-8 replaced (a path's display, not the path).
fn setup_args() -> Vec<String> {
    std::env::args_os().skip(2).map(|a| a.to_string_lossy().into_owned()).collect()
}

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
    /// Generate workloads: traffic for a flow table (traffic), conversations through a
    /// stateful pipeline (conversations), rule-update streams (updates), top-k traffic with
    /// churn and bursts (dynamic), cloud-gateway traffic (gateway), Gigaflow's Pipebench
    /// pipelines with their traffic (pipeline).
    #[command(subcommand)]
    Gen(GenCommand),
    /// Real-time large flows: at every block boundary, the top-k flows of the sliding window
    /// ending there, by FastKeeper or a baseline detector (counts are packets in the window).
    Topk(topk_options::TopkArgs),
    /// Timing: a discrete-event simulation of the NIC, the host's receive rings and cores over
    /// trace time, with a calibrated cost model: latency (HDR percentiles), ring occupancy,
    /// loss, core utilisation; searches for the fewest cores or the highest rate without loss.
    Sim(Box<hyflow_commands::sim::SimArgs>),
    /// Measure hyflow's software path on this machine and write the cost model `sim` uses.
    Calibrate(sim::CalibrateArgs),
    /// Evaluate detectors against exact answers.
    #[command(subcommand)]
    Eval(EvalCommand),
    /// Write a capture (or gen:gateway traffic) as a .hyf columnar trace: per packet its time,
    /// wire length and flow index, per flow its parsed key once. Every command that reads a
    /// capture's packets as flows (--trace, --pcap) reads a .hyf as it reads the capture,
    /// without parsing frames; `send`, which needs frames, refuses one.
    Convert(hyflow_commands::convert::ConvertArgs),
    /// Print the flow of every packet of a capture in ovs-ofctl match notation, as
    /// `ovs-ofctl parse-pcap` does (Open vSwitch's flow extraction); VXLAN packets show the
    /// inner frame's fields plus tun_id, as the rest of hyflow sees them.
    ParsePcap(parse_pcap::ParsePcapArgs),
    /// One HTML page (self-contained: charts inline, no network) of one run or several, from
    /// the run records `replay/sim --report FILE.json` wrote (or their --json summaries):
    /// setup, figures, where packets were handled, ports, charts over time and latency CDFs,
    /// the busiest cached flows, and a side-by-side comparison of several runs.
    Report(hyflow_commands::report::ReportArgs),
    /// Forward real frames between Linux interfaces (root): the ports file's names are
    /// interfaces (veth or physical), each frame goes through the engine `replay` runs
    /// (microflow, megaflow, slow path with groups, NORMAL, learn, conntrack) and leaves
    /// rewritten as Open vSwitch would send it. Prints `ready` once it forwards; SIGINT,
    /// SIGTERM or `hyflow ctl SOCKET stop` detach it and print its report (layers, ports,
    /// rules).
    Switch(Box<hyflow_live::args::SwitchArgs>),
    /// Talk to a running `hyflow switch` through its control socket (--ctl): counters, rule
    /// updates with ovs-ofctl semantics, cache dumps, stop.
    Ctl(hyflow_live::args::CtlArgs),
    /// Put a capture (or gen:gateway traffic) on an interface at a rate, with AF_XDP or
    /// AF_PACKET, and say what was sent (root): the traffic source for `hyflow switch`.
    Send(hyflow_live::send::SendArgs),
    /// Serve memcached's UDP protocol from AF_XDP queues (root): FlexNIC's FlexKVS, with the
    /// XDP program steering each request to a core by its key (or by its flow, the baseline),
    /// a block-chain hash table and a log-structured store; other traffic goes on to the
    /// kernel. Prints `ready` once it serves; SIGINT or SIGTERM stop it and print its report.
    Kvs(hyflow_live::kvs_args::KvsArgs),
    /// Load a memcached UDP server (`hyflow kvs`, or memcached itself) with FlexKVS's workload:
    /// 100,000 keys of 32 bytes, values of 64, Zipf 0.9, 90% GET — from many client ports,
    /// open loop at a rate or closed loop; reports throughput, loss, hits and latency.
    KvsLoad(hyflow_live::kvs_load::KvsLoadArgs),
    /// The simulator's application stage for FlexKVS: the paper's workload steered to 1–6
    /// cores by flow, by key and by key with the NIC's hash, each request priced with this
    /// host's measured costs (`calibrate --kvs`), cache-line transfers and lock waits where the
    /// shared store causes them; prints throughput and cycles per request, draws them against
    /// cores with live points (FlexNIC's Figure 4).
    KvsSim(kvs_sim::KvsSimArgs),
    /// FlexNIC's FlexStorm counting node on an interface (root): tuples (DCCP-Data packets)
    /// demultiplexed to counting workers and acknowledged by the XDP program (`--demux nic`)
    /// or by a demultiplexer thread (`--demux software`, the baseline); workers count user
    /// names over a sliding window, the ranker reports the top n. Prints `ready` once it
    /// serves; SIGINT or SIGTERM stop it and print its report.
    Storm(hyflow_live::storm_args::StormArgs),
    /// Write a tweet-like stream of FlexStorm tuples (Zipf user names, dealt to workers by
    /// name, sequence numbers per connection) as frames for `hyflow send`.
    StormLoad(hyflow_live::storm_args::StormLoadArgs),
}

#[derive(Subcommand)]
enum EvalCommand {
    /// Precision and relative error of top-k detectors against the exact sliding-window
    /// top-k of a trace, for each algorithm x memory x k.
    Topk(topk_options::EvalTopkArgs),
}

#[derive(Subcommand)]
enum GenCommand {
    /// A pcap trace whose flows exercise the rules of a flow file: Zipf popularity with
    /// Poisson arrivals, or flows that arrive, send in trains and end (`--timing`);
    /// deterministic for a seed.
    Traffic(GenTrafficArgs),
    /// Conversations for stateful pipelines, as pcapng with a port per interface: TCP
    /// handshakes, data and closes, UDP requests and responses, ICMP echoes, from a spec of
    /// first packets; replies are built from where the pipeline (with its connection tracker)
    /// sends each first packet, so a service's reply comes from the endpoint it chose.
    Conversations(GenConversationsArgs),
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

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = Cli::from_arg_matches(
        &adjust_shared_options(negative_numbers_are_values(Cli::command())).get_matches(),
    )
    .unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Trace(args) => run_trace(args),
        Command::Replay(args) => replay::run(*args),
        Command::Gen(GenCommand::Traffic(args)) => gen::traffic(args).map(say),
        Command::Gen(GenCommand::Conversations(args)) => gen::conversations(args).map(say),
        Command::Gen(GenCommand::Updates(args)) => gen::updates(args).map(say),
        Command::Gen(GenCommand::Dynamic(args)) => gen::dynamic(args).map(say),
        Command::Gen(GenCommand::Gateway(args)) => gen::gateway(args).map(say),
        Command::Gen(GenCommand::Pipeline(args)) => gen::pipeline(args).map(say),
        Command::Topk(args) => topk::run(args),
        Command::Convert(args) => hyflow_commands::convert::run(args).map(say),
        Command::Sim(args) => sim::run(*args),
        Command::Calibrate(args) => sim::run_calibrate(args),
        Command::Eval(EvalCommand::Topk(args)) => topk::eval(args),
        Command::ParsePcap(args) => parse_pcap::run(args),
        Command::Report(args) => hyflow_commands::report::run(&args).map(say),
        Command::Switch(args) => hyflow_live::run_switch(*args),
        Command::Ctl(args) => hyflow_live::run_ctl(args),
        Command::Send(args) => hyflow_live::send::run(args),
        Command::Kvs(args) => hyflow_live::run_kvs(args),
        Command::KvsLoad(args) => hyflow_live::kvs_load::run(args),
        Command::KvsSim(args) => kvs_sim::run(args),
        Command::Storm(args) => hyflow_live::run_storm(args),
        Command::StormLoad(args) => hyflow_live::storm_load::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hyflow: {}", hyflow_commands::error_message(&e));
            ExitCode::FAILURE
        }
    }
}

/// Shared options some commands take differently: `sim` takes what the NIC holds from
/// `--policy` and refuses `--nic`/`--no-nic`, which it shares with `replay` (its help does not
/// list them); `switch` needs `--ports`, whose names are the interfaces it attaches to.
fn adjust_shared_options(cmd: clap::Command) -> clap::Command {
    cmd.mut_subcommand("sim", |sim| sim.mut_arg("nic", |a| a.hide(true)).mut_arg("no_nic", |a| a.hide(true)))
        .mut_subcommand("switch", |switch| {
            switch.mut_arg("ports", |a| {
                a.required(true).help(
                    "The switch's ports: `interface=number` lines (or `ovs-ofctl show` output), each name a Linux \
                     interface the switch attaches to (veth or physical); flows may name them (`output:p1`)",
                )
            })
        })
}

/// Prints what a generator wrote.
fn say(line: String) {
    println!("{line}");
}

/// Rust ignores SIGPIPE, so a write to a closed pipe (`hyflow replay | head`) fails, and
/// `println!` panics on it. A command-line tool should end there as `cat` does: killed by the
/// signal, quietly, with the shell's conventional status 141.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn run_trace(args: TraceArgs) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut first = true;
    args.for_each_trace(|passes, pipeline, names, limit_reached| {
        if args.json {
            let record = TraceRecord::of_passes(passes, pipeline, limit_reached);
            writeln!(out, "{}", serde_json::to_string(&record)?)?;
        } else {
            if !first {
                writeln!(out)?;
            }
            write!(out, "{}", passes_text(passes, pipeline, limit_reached, names))?;
        }
        first = false;
        Ok(())
    })?;
    out.flush()?;
    Ok(())
}
