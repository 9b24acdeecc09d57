//! The options of `hyflow switch` and `hyflow ctl`, and their help.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use hyflow_commands::names::{NameArgs, PrefixArgs};
use hyflow_commands::sim::{policy_names, PolicyOptions};
use hyflow_commands::switch::HostArgs;

/// `hyflow switch`'s options.
#[derive(Args)]
pub struct SwitchArgs {
    /// Flow file in `ovs-ofctl add-flows` syntax: the pipeline every frame goes through.
    #[arg(long, value_name = "FILE")]
    pub flows: PathBuf,
    #[command(flatten)]
    pub names: NameArgs,
    #[command(flatten)]
    pub prefixes: PrefixArgs,
    /// Control socket (a Unix socket, mode 0600) that `hyflow ctl SOCKET ...` talks to:
    /// counters, rule updates, cache dumps, stop.
    #[arg(long, value_name = "SOCKET")]
    pub ctl: Option<PathBuf>,
    /// Packet I/O: afxdp (an XDP program steers each port's frames to AF_XDP sockets;
    /// zero-copy where the driver allows, copy mode on veth) or afpacket (TPACKET_V3 rings).
    /// Default: afxdp, falling back to afpacket when XDP cannot attach; the switch says which
    /// at start.
    #[arg(long, value_enum, value_name = "IO")]
    pub io: Option<IoArg>,
    /// Poll-mode cores: threads that each poll their share of the ports' receive queues
    /// (dealt out in turn, as Open vSwitch assigns queues to PMD threads), each pinned to a
    /// CPU of the process's affinity mask when it has enough (run under `taskset` to choose
    /// them). The engine's decisions are taken one batch at a time under one lock; parsing,
    /// rewriting and packet I/O run on every core at once. At most the number of receive
    /// queues (a veth has one unless created with `numrxqueues`), unless --steer spreads each
    /// queue over the cores.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub cores: u16,
    /// Steer each frame software gets to a core by a hash of FIELDS (comma-separated key
    /// fields, e.g. `nw_dst,tp_dst` or the 5-tuple `nw_src,nw_dst,nw_proto,tp_src,tp_dst`),
    /// computed in the XDP program, as FlexNIC steers flows to cores: every receive queue gets
    /// one AF_XDP socket per core (sharing the queue's UMEM), every core polls its socket of
    /// every queue, and all frames of a flow go to one core. Fields the program parses:
    /// Ethernet, VLAN, IPv4, ARP, transport, in_port; a frame it parses in part (IPv6) is
    /// steered by the fields it got. `memcached.key` among them steers memcached requests
    /// (UDP to port 11211) by their key instead — the ASCII command's first key or the binary
    /// request's, hashed as `hyflow kvs` hashes it, FlexNIC's key-based steering: every request
    /// for a key reaches one core, whichever client sent it; `storm.worker` steers FlexStorm
    /// tuples (DCCP-Data to port 4444) by the worker number in their tuple header, worker w to
    /// core w mod cores, as FlexStorm's NIC demultiplexes them. Other frames go by the other
    /// fields (addresses and ports if none). Needs AF_XDP and --cores 2 or more; `show` gives
    /// each core's load.
    #[arg(long, value_name = "FIELDS")]
    pub steer: Option<String>,
    /// The NIC tier in front of the software switch: none (every frame decided in
    /// software), or xdp (the XDP program on every port holds megaflows the engine offloads —
    /// as Open vSwitch's hardware offload does — as far as its parser and actions reach:
    /// Ethernet, up to two VLAN tags, IPv4, ARP, TCP/UDP/ICMP; set Ethernet and IPv4
    /// addresses, TOS, TTL, TCP/UDP ports; VLAN pop and push; one output or a drop — and
    /// forwards their frames in the kernel; everything else comes to software). Needs AF_XDP.
    #[arg(long = "nic", value_enum, value_name = "TIER", default_value = "none")]
    pub nic: NicArg,
    /// Which flows the NIC tier holds, with `--nic xdp`: the policies `sim` models, run with
    /// the switch's clock, its receive rings and the XDP tier's counters. offload-all fills a
    /// tuple space of megaflows (sized by --nic-entries and --nic-masks); elixir, tfo and
    /// ovs-rebalance fill an exact-match table keyed by --flow-key (sized by --large-entries
    /// and --bursty-entries: the kernel finds an entry by the flow's fields, then checks the
    /// rest of its match). Elixir's sampled headers come from the XDP program's ring buffer
    /// (--sample-rate), its bursty trigger from the AF_XDP receive ring (4,096 frames; give
    /// --queue-threshold). gigaflow (K tagged tables) and lfp (trained on the input before
    /// the run) do not run live, and psf has no NIC: they are refused.
    #[arg(long, value_name = "POLICY", default_value = "offload-all", value_parser = policy_names())]
    pub policy: String,
    #[command(flatten)]
    pub policy_options: PolicyOptions,
    /// Share of the XDP tier's hits whose headers (never the frame) the program sends to the
    /// policy through a BPF ring buffer: Elixir's sampling rate r [default: the policy's, 0.2
    /// for elixir and tfo].
    #[arg(long, value_name = "R")]
    pub sample_rate: Option<f64>,
    /// How the XDP program attaches: native (in the driver), generic (on the kernel's
    /// socket buffers: slower, works everywhere), or auto — native first, except with
    /// `--nic xdp` on veth ports: a frame the program redirects into a veth in native mode
    /// is received by the peer only if the peer has an XDP program or GRO on, which the
    /// switch cannot see to.
    #[arg(long, value_enum, value_name = "MODE", default_value = "auto")]
    pub xdp_mode: XdpModeArg,
    /// Entries of the XDP tier's flow table, for offload-all (the exact-match policies size
    /// theirs with --large-entries and --bursty-entries).
    #[arg(long, value_name = "N", default_value_t = 32_768, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub nic_entries: u32,
    /// Entries the engine may install in the XDP tier per second (0: no limit), as `sim`'s
    /// NIC update budget: an upcall that finds it spent is not offloaded, and its flow stays
    /// in software; a policy's installs and evictions wait for it. Removals a rule update
    /// forces are never held back (outdated entries must leave).
    #[arg(long, value_name = "N", default_value_t = 0.0)]
    pub nic_updates: f64,
    /// Entry counters the switch reads from the XDP tier per second (0: all of them every
    /// second), in turn; hits are credited to rules and entries when read (an entry whose hits
    /// are not read in time may expire idle, as with a NIC). A policy's own polls (Elixir's
    /// bursty area, a rebalance round) read through to the kernel within a budget of the
    /// same rate. `show` and the final report read every counter regardless.
    #[arg(long, value_name = "N", default_value_t = 0.0)]
    pub nic_counter_reads: f64,
    /// Distinct masks the XDP tier holds (its lookup goes through each in turn).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub nic_masks: u32,
    #[command(flatten)]
    pub host: HostArgs,
}

/// `--xdp-mode`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum XdpModeArg {
    /// Native where the driver has it, generic otherwise; generic for the XDP tier on veth.
    Auto,
    /// In the driver (fails where the driver has no XDP).
    Native,
    /// On socket buffers.
    Generic,
}

/// `--nic`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum NicArg {
    /// No NIC tier: every frame is decided in software.
    None,
    /// The XDP program's tables.
    Xdp,
}

/// `--io`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IoArg {
    /// AF_XDP sockets behind an XDP redirect program.
    Afxdp,
    /// AF_PACKET sockets with TPACKET_V3 receive rings.
    Afpacket,
}

/// `hyflow ctl`'s options.
#[derive(Args)]
pub struct CtlArgs {
    /// The switch's control socket (its --ctl).
    #[arg(value_name = "SOCKET")]
    pub socket: PathBuf,
    #[command(subcommand)]
    pub command: CtlCommand,
}

/// What `hyflow ctl` asks a running switch, with `ovs-ofctl`'s semantics for rule updates:
/// when the command returns, no frame is forwarded by a cache entry the update outdated
/// (unless the switch runs with --revalidation-delay).
#[derive(Subcommand, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CtlCommand {
    /// Ports (rx/tx packets and bytes, drops), packets by layer, upcalls, installs,
    /// revalidations, uptime.
    Show {
        /// As JSON (the keys of `replay --json`, plus `uptime_seconds`, `io`, `interfaces`,
        /// `live_drops`).
        #[arg(long)]
        json: bool,
    },
    /// Every rule with its counters (as `replay --rule-stats`).
    DumpFlows,
    /// Add one rule (`ovs-ofctl add-flow`).
    AddFlow {
        /// The rule, e.g. `table=0,priority=10,ip,nw_dst=10.0.0.1,actions=output:2`.
        #[arg(value_name = "FLOW", allow_hyphen_values = true)]
        flow: String,
    },
    /// Add the rules of a flow file, one per line (`-`: standard input); all or none.
    AddFlows {
        /// The flow file.
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// New actions for the rules within a match (`ovs-ofctl mod-flows`).
    ModFlows {
        /// Only the rule with exactly this match and priority.
        #[arg(long)]
        strict: bool,
        /// Match and actions.
        #[arg(value_name = "FLOW", allow_hyphen_values = true)]
        flow: String,
    },
    /// Delete the rules within a match (`ovs-ofctl del-flows`); no match: every rule.
    DelFlows {
        /// Only the rule with exactly this match and priority.
        #[arg(long)]
        strict: bool,
        /// The match.
        #[arg(value_name = "MATCH", allow_hyphen_values = true)]
        matches: Option<String>,
    },
    /// The software megaflow cache's entries (`ovs-appctl dpctl/dump-flows` lines).
    DumpMegaflows,
    /// The entries the NIC tier holds in the kernel (`ovs-appctl dpctl/dump-flows
    /// type=offloaded` lines: match, packets, bytes, used, actions), its counters read first.
    DumpNic,
    /// Every port's counters (`ovs-ofctl dump-ports`).
    DumpPorts,
    /// This host's per-frame costs by layer (microflow, megaflow, upcall), fitted from the
    /// rounds the cores forwarded so far, I/O included, as JSON: the fit and the cost model
    /// `sim --costs` takes (`hyflow calibrate --live SOCKET` writes it to a file).
    Costs,
    /// Stop the switch: it detaches, prints its report and exits 0.
    Stop,
}
