//! `hyflow storm`'s and `hyflow storm-load`'s options.

use clap::{Args, ValueEnum};

/// FlexStorm's default DCCP port for tuples.
pub const PORT: u16 = 4444;

/// Who demultiplexes tuples to the workers and acknowledges them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Demux {
    /// The XDP program (FlexNIC §4.1): each tuple into its worker's queue, its ACK sent back
    /// from the NIC.
    Nic,
    /// A demultiplexer thread (the paper's baseline): every tuple to its AF_XDP socket, which
    /// acknowledges it and moves it to its worker's queue.
    Software,
}

impl Demux {
    /// Its name as the option spells it.
    pub fn name(self) -> &'static str {
        match self {
            Demux::Nic => "nic",
            Demux::Software => "software",
        }
    }
}

/// Options of `hyflow storm`.
#[derive(Args, Debug)]
pub struct StormArgs {
    /// The interface to serve on (root: an XDP program attaches to it). Tuples are DCCP-Data
    /// packets to its IPv4 address and --port; every other frame goes on to the kernel.
    #[arg(long, value_name = "IF")]
    pub iface: String,
    /// Counting workers (threads), 1 to 8: worker w counts the tuples whose header names w.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub workers: u16,
    /// Who demultiplexes and acknowledges tuples.
    #[arg(long, value_enum, default_value = "nic")]
    pub demux: Demux,
    /// DCCP port of the tuples.
    #[arg(long, default_value_t = PORT)]
    pub port: u16,
    /// Milliseconds of the counters' sliding window (8 slots).
    #[arg(long, default_value_t = 8000)]
    pub window_ms: u64,
    /// Milliseconds between the counters' emissions to the ranker.
    #[arg(long, default_value_t = 1000)]
    pub emit_ms: u64,
    /// Users in the ranking reported.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Options every application server has.
    #[command(flatten)]
    pub app: crate::kvs_args::AppOptions,
}

/// Options of `hyflow storm-load`.
#[derive(Args, Debug)]
pub struct StormLoadArgs {
    /// Where to write the tuple frames (pcap), for `hyflow send` to put on the wire.
    #[arg(long, value_name = "FILE")]
    pub frames: std::path::PathBuf,
    /// Tuples.
    #[arg(long, default_value_t = 100_000)]
    pub count: u64,
    /// The server's IPv4 address.
    #[arg(long, value_name = "IP")]
    pub server: std::net::Ipv4Addr,
    /// Its DCCP port.
    #[arg(long, default_value_t = PORT)]
    pub port: u16,
    /// The tuples' source address (its MAC is 02:00:00:00:00:01, which no interface has: the
    /// acknowledgements are dropped by the sender's kernel at once).
    #[arg(long, default_value = "10.254.0.2", value_name = "IP")]
    pub source: std::net::Ipv4Addr,
    /// Connections (source ports), each with its own sequence numbers.
    #[arg(long, default_value_t = 4)]
    pub connections: u16,
    /// Distinct users.
    #[arg(long, default_value_t = 100_000)]
    pub users: u64,
    /// Zipf exponent of how much each user tweets.
    #[arg(long, default_value_t = 1.0)]
    pub zipf: f64,
    /// Counting workers the tuples are dealt to (by user name).
    #[arg(long, default_value_t = 2)]
    pub workers: u16,
    /// Seed of the stream.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}
