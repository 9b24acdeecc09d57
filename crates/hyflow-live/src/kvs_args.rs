//! `hyflow kvs`'s options.

use clap::{Args, ValueEnum};

use crate::args::XdpModeArg;

/// How requests reach a core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SteerMode {
    /// By the request's addresses and ports (RSS, the paper's baseline): any core may get any
    /// key, so the cores share one store under its buckets' locks.
    Flow,
    /// By the key's hash (FlexNIC's key-based steering): each core owns a partition of the
    /// keys, and its requests come to it.
    Key,
}

impl SteerMode {
    /// Its name as the option spells it.
    pub fn name(self) -> &'static str {
        match self {
            SteerMode::Flow => "flow",
            SteerMode::Key => "key",
        }
    }
}

/// What `hyflow kvs` and `hyflow storm` take alike.
#[derive(Args, Debug)]
pub struct AppOptions {
    /// How the XDP program attaches: native (in the driver), generic, or auto — native when
    /// the driver has it, except where the program sends frames back out of a veth
    /// (`hyflow storm --demux nic`'s acknowledgements): a frame sent back out of a veth in
    /// native mode reaches the peer only if the peer has an XDP program or GRO on.
    #[arg(long, value_enum, value_name = "MODE", default_value = "auto")]
    pub xdp_mode: XdpModeArg,
    /// Measure the XDP program's run time per frame (the kernel's BPF statistics, on while
    /// the server runs: two clock reads per frame) — the NIC's share of the work, which on a
    /// veth runs on the sending CPU.
    #[arg(long)]
    pub xdp_stats: bool,
    /// The report at exit as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Options of `hyflow kvs`.
#[derive(Args, Debug)]
pub struct KvsArgs {
    /// The interface to serve on (root: an XDP program attaches to it). The server answers
    /// memcached's UDP requests sent to the interface's IPv4 address and --port; every other
    /// frame goes on to the kernel — except IP fragments of UDP datagrams to the address,
    /// which the cores put together (a request longer than a frame comes so; a datagram for
    /// another port is then dropped and counted), and frames longer than an AF_XDP buffer
    /// holds (3,840 bytes: only past an MTU of 3,822), dropped and counted.
    #[arg(long, value_name = "IF")]
    pub iface: String,
    /// Serving cores (threads pinned to the CPUs the process may use), each with an AF_XDP
    /// socket on every receive queue.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub cores: u32,
    /// How the XDP program picks a request's core: `key` hashes the memcached key (ASCII:
    /// the command's first key; binary: the key) and sends it to the core owning its
    /// partition; `flow` hashes addresses and ports, and the cores share one store.
    #[arg(long, value_enum, default_value = "key", value_name = "MODE")]
    pub steer: SteerMode,
    /// Reuse the key hash the XDP program computed (FlexNIC's special packet header, in the
    /// frame's XDP metadata) instead of hashing the key again in software; one request in 64
    /// is checked against software's hash and differences are reported.
    #[arg(long)]
    pub nic_hash: bool,
    /// MiB of item log, split over the partitions (one per core with --steer key).
    #[arg(long = "memory", default_value_t = 256, value_name = "MIB")]
    pub memory_mib: usize,
    /// UDP port to serve.
    #[arg(long, default_value_t = hyflow::kvs::memcached::PORT)]
    pub port: u16,
    /// Options every application server has.
    #[command(flatten)]
    pub app: AppOptions,
}
