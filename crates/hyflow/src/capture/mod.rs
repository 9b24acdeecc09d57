//! Capture files: reading them packet by packet, and writing the traces hyflow generates.
//!
//! * [`TraceReader`] streams packets out of classic pcap and pcapng files without loading the
//!   whole file into memory, so multi-gigabyte captures can be replayed
//!   ([`crate::input::PacketSource`] parses what it reads).
//! * [`PcapWriter`] writes classic pcap, the format every tool can read (`hyflow gen`).
//! * [`TraceError`] names the file and the byte offset of every problem, so that a broken
//!   capture can be inspected with a hex viewer instead of being guessed at.
//!
//! Byte-level parsing is delegated to the `pcap-file` crate (`PcapParser`, `PcapNgParser`);
//! this module adds chunked buffering, bounds on record sizes, offsets in errors and
//! correct pcapng timestamp scaling (see [`TraceReader`]).

mod error;
mod reader;
mod writer;

pub use self::error::TraceError;
pub use self::reader::{CaptureBytes, CaptureSource, TraceReader, STDIN_NAME};
pub use self::writer::{PcapWriter, PortsPcapngWriter};

/// Largest captured packet length accepted when the file's snapshot length does not allow more.
///
/// This is libpcap's `MAXIMUM_SNAPLEN`. A record claiming to carry more than this (and more than
/// the file's snapshot length) is treated as corrupt: in practice such lengths come from damaged
/// headers, and bounding them keeps a damaged file from making the reader buffer gigabytes.
pub const MAX_PACKET_LEN: u32 = 256 * 1024;

/// Hard upper bound on the captured length of one packet, even if the file's snapshot length
/// claims more; protects the reader's memory use against absurd snapshot lengths.
pub const MAX_SNAPLEN_LIMIT: u32 = 16 * 1024 * 1024;

/// Largest pcapng block accepted. Larger block lengths are reported as corruption for the same
/// reason as [`MAX_SNAPLEN_LIMIT`]; it leaves room for a maximal packet plus options.
pub const MAX_BLOCK_LEN: u32 = 32 * 1024 * 1024;

/// The container format of a trace file, as detected from its magic number.
///
/// Exposed so callers can report what they are replaying and decide whether per-interface
/// information (only meaningful for pcapng) is worth looking at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// Classic libpcap format (either byte order, microsecond or nanosecond timestamps).
    Pcap,
    /// pcapng (possibly several sections and interfaces).
    PcapNg,
}

/// The link-layer framing of a packet's bytes.
///
/// Every link type hyflow parses has a variant; every other one is kept as its number, so that
/// a packet of it is refused with a message naming it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// `LINKTYPE_ETHERNET` (1): an Ethernet II / 802.3 header comes first.
    Ethernet,
    /// Raw IPv4 or IPv6 without any link-layer header: `LINKTYPE_RAW` (101), `LINKTYPE_IPV4`
    /// (228), `LINKTYPE_IPV6` (229), and the historical `DLT_RAW` values 12 and 14 that old
    /// captures still carry.
    RawIp,
    /// `LINKTYPE_LINUX_SLL` (113), what `tcpdump -i any` writes.
    LinuxSll,
    /// `LINKTYPE_LINUX_SLL2` (276).
    LinuxSll2,
    /// BSD loopback: `LINKTYPE_NULL` (0) and `LINKTYPE_LOOP` (108).
    Null,
    /// Any other `LINKTYPE_*` value, unchanged.
    Other(u32),
}

impl LinkType {
    /// Maps a `LINKTYPE_*` number from a pcap header or pcapng interface description.
    pub fn from_linktype(value: u32) -> LinkType {
        match value {
            1 => LinkType::Ethernet,
            12 | 14 | 101 | 228 | 229 => LinkType::RawIp,
            113 => LinkType::LinuxSll,
            276 => LinkType::LinuxSll2,
            0 | 108 => LinkType::Null,
            other => LinkType::Other(other),
        }
    }

    /// How frames of this link type are parsed, or `None` if hyflow cannot parse them.
    pub fn frame_kind(self) -> Option<crate::packet::LinkKind> {
        use crate::packet::LinkKind;
        match self {
            LinkType::Ethernet => Some(LinkKind::Ethernet),
            LinkType::RawIp => Some(LinkKind::RawIp),
            LinkType::LinuxSll => Some(LinkKind::LinuxSll),
            LinkType::LinuxSll2 => Some(LinkKind::LinuxSll2),
            LinkType::Null => Some(LinkKind::Null),
            LinkType::Other(_) => None,
        }
    }

    /// The `LINKTYPE_*` number written to files: 1 for Ethernet, 101 (`LINKTYPE_RAW`, which
    /// carries both IPv4 and IPv6) for raw IP, 0 for BSD loopback.
    pub(crate) fn to_linktype(self) -> u32 {
        match self {
            LinkType::Ethernet => 1,
            LinkType::RawIp => 101,
            LinkType::LinuxSll => 113,
            LinkType::LinuxSll2 => 276,
            LinkType::Null => 0,
            LinkType::Other(value) => value,
        }
    }
}

/// The name of a `LINKTYPE_*` number hyflow does not read, for error messages (the common
/// ones by name, as tcpdump lists them).
pub(crate) fn link_type_name(value: u32) -> String {
    let name = match value {
        6 => "IEEE 802.5 Token Ring",
        9 => "PPP",
        10 => "FDDI",
        50 => "PPP in HDLC framing",
        104 => "Cisco HDLC",
        105 => "IEEE 802.11",
        127 => "IEEE 802.11 with radiotap",
        147..=162 => "user-defined (DLT_USER)",
        187 => "Bluetooth HCI",
        195 => "IEEE 802.15.4",
        220 => "USB (Linux, memory-mapped)",
        249 => "netlink",
        _ => return format!("link type {value}"),
    };
    format!("link type {value} ({name})")
}

/// One packet from a trace, borrowing the reader's buffer.
///
/// Borrowing keeps the per-packet path free of allocation and copying; call `.data.to_vec()`
/// if the bytes must outlive the next call to [`TraceReader::next_packet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TracePacket<'a> {
    /// Capture time in nanoseconds since the Unix epoch, already scaled from the file's
    /// resolution (pcap µs/ns magic, pcapng `if_tsresol` and `if_tsoffset`).
    pub ts_ns: u64,
    /// Interface the packet was captured on. Always 0 for pcap. For pcapng this is a file-wide
    /// index: interfaces are numbered in the order their description blocks appear, continuing
    /// across sections (as Wireshark does), so interfaces of different sections never collide.
    pub interface: u32,
    /// Framing of `data`.
    pub link: LinkType,
    /// Length of the packet on the wire; larger than `data.len()` when the capture was cut
    /// to a snapshot length.
    pub orig_len: u32,
    /// The captured bytes, starting with the link-layer header.
    pub data: &'a [u8],
    /// Absolute byte offset of the packet's record (pcap record header or pcapng block) in
    /// the file, for diagnostics.
    pub offset: u64,
}

/// A capture that ends in the middle of a record: every complete packet before the cut was
/// read.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CaptureCut {
    /// What the reader found: the capture, the byte offset of the record cut short (in the
    /// decompressed bytes of a `.gz`), and how much of it is there.
    pub error: String,
    /// Byte offset of the record cut short.
    pub offset: u64,
    /// Complete packets read before it.
    pub packets: u64,
}
