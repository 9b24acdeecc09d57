//! Streaming reader for pcap and pcapng traces.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use flate2::bufread::MultiGzDecoder;

use pcap_file::pcap::PcapParser;
use pcap_file::{Endianness, TsResolution};

use super::error::TraceError;
use super::{LinkType, TraceFormat, TracePacket, MAX_BLOCK_LEN, MAX_PACKET_LEN, MAX_SNAPLEN_LIMIT};

/// Initial buffer size; the buffer only grows if a single record is larger.
const INITIAL_BUF: usize = 256 * 1024;

const PCAP_FILE_HEADER_LEN: usize = 24;
const PCAP_RECORD_HEADER_LEN: usize = 16;
/// Block type, block length and trailing block length.
const BLOCK_OVERHEAD: usize = 12;
/// Fixed part of an Enhanced Packet Block body.
const EPB_FIXED_LEN: usize = 20;
/// Fixed part of a Simple Packet Block body.
const SPB_FIXED_LEN: usize = 4;
/// Fixed part of an Interface Description Block body.
const IDB_FIXED_LEN: usize = 8;
/// Fixed part of a Section Header Block body: byte-order magic, versions, section length.
const SHB_FIXED_LEN: usize = 16;
/// Option codes.
const OPT_ENDOFOPT: u16 = 0;
const IF_TSRESOL: u16 = 9;
const IF_TSOFFSET: u16 = 14;

const PCAP_MAGIC_US_BE: u32 = 0xA1B2_C3D4;
const PCAP_MAGIC_NS_BE: u32 = 0xA1B2_3C4D;
const PCAP_MAGIC_US_LE: u32 = 0xD4C3_B2A1;
const PCAP_MAGIC_NS_LE: u32 = 0x4D3C_B2A1;

const SHB_TYPE: u32 = 0x0A0D_0D0A;
const IDB_TYPE: u32 = 1;
const SPB_TYPE: u32 = 3;
const EPB_TYPE: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;

/// Reads packets one at a time from a pcap or pcapng trace.
///
/// Why it exists rather than using pcap-file's own readers:
///
/// * it reads fixed-size chunks into one reusable buffer and hands out packets that borrow it,
///   so replaying a trace neither loads the file into memory nor allocates per packet;
/// * every error names the file and the byte offset (see [`TraceError`]);
/// * record lengths are bounded ([`MAX_PACKET_LEN`], [`MAX_BLOCK_LEN`]) so a damaged length
///   field is reported instead of making the reader buffer the rest of the file;
/// * pcapng timestamps are scaled correctly. pcap-file 2.0.0 returns the raw 64-bit
///   Enhanced Packet Block timestamp as `Duration::from_nanos(raw)` although `raw` is in
///   units of the interface's `if_tsresol` (microseconds unless stated). This reader decodes
///   the timestamp itself and applies `if_tsresol` (power of 10, or of 2 when the high bit is
///   set) and `if_tsoffset` (seconds, read as signed as in the current pcapng draft);
/// * pcap records whose original length exceeds the snapshot length (normal for captures taken
///   with a small snaplen) are accepted, whereas pcap-file's `PcapParser::next_packet`
///   rejects them; hence `next_raw_packet` is used.
///
/// After an error, or once the end is reached, `next_packet` returns `Ok(None)`: the position
/// of the next record is unknown after corruption, so there is nothing sensible to resume.
pub struct TraceReader<R = CaptureBytes> {
    input: Input<R>,
    state: State,
    packets_read: u64,
    done: bool,
}

/// A capture's bytes, wherever they come from: a file, a gzip-compressed file, standard input.
pub type CaptureBytes = Box<dyn Read + Send>;

/// Standard input can be read once: a second reader would see nothing and report an empty
/// capture instead of saying why.
static STDIN_TAKEN: AtomicBool = AtomicBool::new(false);

/// The name standard input goes by in messages.
pub const STDIN_NAME: &str = "standard input";

/// How a capture at `path` is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureSource {
    /// A file, as it is.
    File,
    /// A gzip-compressed file (`.gz`), decompressed as it is read.
    Gzip,
    /// Standard input (`-`).
    Stdin,
}

impl CaptureSource {
    /// How `path` is read: `-` is standard input, a name ending in `.gz` is decompressed.
    pub fn of(path: &Path) -> CaptureSource {
        if path == Path::new("-") {
            CaptureSource::Stdin
        } else if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gz")) {
            CaptureSource::Gzip
        } else {
            CaptureSource::File
        }
    }
}

/// A gzip stream cut short (a partial copy) ends where it was cut: the capture reader then
/// finds the record it cut and says so, as for an uncompressed capture, instead of an I/O
/// error about the compression.
struct GzipToItsCut<R>(MultiGzDecoder<R>);

impl<R: io::BufRead> Read for GzipToItsCut<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.0.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
            other => other,
        }
    }
}

impl TraceReader<CaptureBytes> {
    /// Opens a capture ([`CaptureSource::of`] says how) and reads its file header (or first
    /// section header) to detect the format. The path as displayed is the file's name in
    /// errors; standard input, readable once, is refused a second time.
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        let name = path.display().to_string();
        let open =
            |name: &str| File::open(path).map_err(|cause| TraceError::Open { file: name.to_string(), cause });
        let (bytes, name): (CaptureBytes, String) = match CaptureSource::of(path) {
            CaptureSource::Stdin => {
                if STDIN_TAKEN.swap(true, Ordering::SeqCst) {
                    let cause = io::Error::other(
                        "it was read already, and this run reads its input again (a rate to rescale \
                         to, a search, a policy trained first): give a file",
                    );
                    return Err(TraceError::Open { file: STDIN_NAME.to_string(), cause });
                }
                (Box::new(io::stdin()), STDIN_NAME.to_string())
            }
            CaptureSource::Gzip => {
                let file = open(&name)?;
                (Box::new(GzipToItsCut(MultiGzDecoder::new(BufReader::new(file)))), name)
            }
            CaptureSource::File => (Box::new(open(&name)?), name),
        };
        Self::new(bytes, name)
    }
}

impl<R: Read> TraceReader<R> {
    /// Reads a trace from any byte stream (a pipe, a decompressor, an in-memory buffer).
    /// `name` is only used in error messages. The file header is read immediately so that
    /// a wrong file is reported before any packet is expected.
    pub fn new(reader: R, name: String) -> Result<Self, TraceError> {
        let mut input =
            Input { src: reader, name, data: vec![0; INITIAL_BUF], start: 0, end: 0, base: 0, eof: false };

        if !input.ensure(4)? {
            return Err(input.truncated(0, "file header", 4, input.len(), false));
        }
        let magic = be32(input.avail());
        let state = match magic {
            PCAP_MAGIC_US_BE | PCAP_MAGIC_NS_BE | PCAP_MAGIC_US_LE | PCAP_MAGIC_NS_LE => {
                State::Pcap(PcapState::read_header(&mut input)?)
            }
            SHB_TYPE => State::PcapNg(PcapNgState::read_header(&mut input)?),
            _ => return Err(TraceError::NotATrace { file: input.name, magic }),
        };
        Ok(TraceReader { input, state, packets_read: 0, done: false })
    }

    /// Returns the next packet, `Ok(None)` at a clean end of file, or an error.
    ///
    /// A file that ends inside a record yields every complete packet first and then
    /// [`TraceError::Truncated`]. The packet borrows the reader's buffer until the next call.
    pub fn next_packet(&mut self) -> Result<Option<TracePacket<'_>>, TraceError> {
        if self.done {
            return Ok(None);
        }
        let result = match &mut self.state {
            State::Pcap(st) => st.next(&mut self.input),
            State::PcapNg(st) => st.next(&mut self.input),
        };
        match result {
            Ok(Some(m)) => {
                self.packets_read += 1;
                Ok(Some(TracePacket {
                    ts_ns: m.ts_ns,
                    interface: m.interface,
                    link: m.link,
                    orig_len: m.orig_len,
                    data: &self.input.data[m.data_start..m.data_start + m.data_len],
                    offset: m.offset,
                }))
            }
            Ok(None) => {
                self.done = true;
                Ok(None)
            }
            Err(e) => {
                self.done = true;
                Err(e)
            }
        }
    }

    /// Number of packets delivered so far; useful for progress reports and for telling the
    /// user how much of a truncated trace was usable.
    pub fn packets_read(&self) -> u64 {
        self.packets_read
    }

    /// The detected container format.
    pub fn format(&self) -> TraceFormat {
        match self.state {
            State::Pcap(_) => TraceFormat::Pcap,
            State::PcapNg(_) => TraceFormat::PcapNg,
        }
    }

    /// The file name used in error messages.
    pub fn name(&self) -> &str {
        &self.input.name
    }
}

impl<R> std::fmt::Debug for TraceReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader")
            .field("name", &self.input.name)
            .field("offset", &self.input.offset())
            .field("packets_read", &self.packets_read)
            .finish_non_exhaustive()
    }
}

/// Everything about a packet except its bytes, which are referenced by position in the buffer
/// so the borrow of the buffer can start after all mutation is done.
struct Meta {
    ts_ns: u64,
    interface: u32,
    link: LinkType,
    orig_len: u32,
    data_start: usize,
    data_len: usize,
    offset: u64,
}

/// The byte source plus a refillable window over it.
///
/// `data[start..end]` holds unconsumed bytes; `base` is the absolute file offset of `data[0]`.
struct Input<R> {
    src: R,
    name: String,
    data: Vec<u8>,
    start: usize,
    end: usize,
    base: u64,
    eof: bool,
}

impl<R: Read> Input<R> {
    /// Makes at least `need` unconsumed bytes available, reading more as required. Returns
    /// `false` if the source ends first (whatever was available stays available).
    fn ensure(&mut self, need: usize) -> Result<bool, TraceError> {
        if self.end - self.start >= need {
            return Ok(true);
        }
        if self.start == self.end {
            // Empty: restart at the front for free.
            self.base += self.start as u64;
            self.start = 0;
            self.end = 0;
        }
        if self.start + need > self.data.len() {
            // Move the partial record to the front, then grow if it still does not fit.
            self.data.copy_within(self.start..self.end, 0);
            self.base += self.start as u64;
            self.end -= self.start;
            self.start = 0;
            if need > self.data.len() {
                self.data.resize(need, 0);
            }
        }
        while self.end - self.start < need && !self.eof {
            // `start + need <= data.len()` and `end < start + need`, so there is room.
            match self.src.read(&mut self.data[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(cause) => {
                    return Err(TraceError::Io {
                        file: self.name.clone(),
                        offset: self.base + self.end as u64,
                        cause,
                    })
                }
            }
        }
        Ok(self.end - self.start >= need)
    }
}

impl<R> Input<R> {
    fn avail(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    fn len(&self) -> usize {
        self.end - self.start
    }

    /// Absolute file offset of the first unconsumed byte.
    fn offset(&self) -> u64 {
        self.base + self.start as u64
    }

    fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.len());
        self.start += n;
    }

    fn truncated(
        &self,
        offset: u64,
        what: &'static str,
        needed: usize,
        present: usize,
        declared: bool,
    ) -> TraceError {
        TraceError::Truncated {
            file: self.name.clone(),
            offset,
            what,
            needed: needed as u64,
            present: present as u64,
            declared,
        }
    }

    fn corrupt(&self, offset: u64, what: &'static str, reason: impl ToString) -> TraceError {
        TraceError::Corrupt { file: self.name.clone(), offset, what, reason: reason.to_string() }
    }
}

enum State {
    Pcap(PcapState),
    PcapNg(PcapNgState),
}

struct PcapState {
    parser: PcapParser,
    big_endian: bool,
    link: LinkType,
    /// Nanoseconds per unit of the timestamp fraction field (1000 or 1).
    frac_ns: u64,
    /// Largest acceptable captured length.
    limit: u32,
}

impl PcapState {
    fn read_header<R: Read>(input: &mut Input<R>) -> Result<Self, TraceError> {
        if !input.ensure(PCAP_FILE_HEADER_LEN)? {
            return Err(input.truncated(0, "pcap file header", PCAP_FILE_HEADER_LEN, input.len(), false));
        }
        let (_, parser) = PcapParser::new(&input.avail()[..PCAP_FILE_HEADER_LEN])
            .map_err(|e| input.corrupt(0, "pcap file header", e))?;
        let header = parser.header();
        input.consume(PCAP_FILE_HEADER_LEN);
        Ok(PcapState {
            big_endian: header.endianness == Endianness::Big,
            // The upper 16 bits of the link type field carry FCS information, not the type.
            link: LinkType::from_linktype(u32::from(header.datalink) & 0xFFFF),
            frac_ns: match header.ts_resolution {
                TsResolution::MicroSecond => 1000,
                TsResolution::NanoSecond => 1,
            },
            limit: capture_limit(header.snaplen),
            parser,
        })
    }

    fn next<R: Read>(&mut self, input: &mut Input<R>) -> Result<Option<Meta>, TraceError> {
        let offset = input.offset();
        if !input.ensure(PCAP_RECORD_HEADER_LEN)? {
            if input.len() == 0 {
                return Ok(None);
            }
            return Err(input.truncated(
                offset,
                "packet record header",
                PCAP_RECORD_HEADER_LEN,
                input.len(),
                false,
            ));
        }
        let incl_len = read32(&input.avail()[8..12], self.big_endian);
        if incl_len > self.limit {
            return Err(input.corrupt(
                offset,
                "packet record",
                format!("captured length {incl_len} exceeds the limit of {} bytes", self.limit),
            ));
        }
        let total = PCAP_RECORD_HEADER_LEN + incl_len as usize;
        if !input.ensure(total)? {
            return Err(input.truncated(
                offset,
                "packet record",
                incl_len as usize,
                input.len() - PCAP_RECORD_HEADER_LEN,
                true,
            ));
        }
        let (_, raw) = self
            .parser
            .next_raw_packet(&input.avail()[..total])
            .map_err(|e| input.corrupt(offset, "packet record", e))?;
        let meta = Meta {
            ts_ns: u64::from(raw.ts_sec) * 1_000_000_000 + u64::from(raw.ts_frac) * self.frac_ns,
            interface: 0,
            link: self.link,
            orig_len: raw.orig_len,
            data_start: input.start + PCAP_RECORD_HEADER_LEN,
            data_len: incl_len as usize,
            offset,
        };
        input.consume(total);
        Ok(Some(meta))
    }
}

/// What the reader needs to know about one pcapng interface.
#[derive(Debug, Clone, Copy)]
struct Interface {
    link: LinkType,
    snaplen: u32,
    limit: u32,
    /// Timestamp units per second (saturated; `if_tsresol` can describe more than fits).
    units_per_sec: u128,
    /// `if_tsoffset`, seconds added to every timestamp.
    offset_secs: i64,
}

impl Interface {
    /// An Interface Description Block's body: link type (16 bits), reserved (16), snapshot
    /// length (32), then options, of which `if_tsresol` (9) and `if_tsoffset` (14) matter.
    fn from_body(body: &[u8], big_endian: bool) -> Self {
        let linktype = read16(body, big_endian);
        let snaplen = read32(&body[4..8], big_endian);
        let mut tsresol = None;
        let mut tsoffset = None;
        for (code, value) in options(&body[8..], big_endian) {
            match (code, value.len()) {
                (IF_TSRESOL, 1..) => {
                    tsresol.get_or_insert(value[0]);
                }
                (IF_TSOFFSET, 8..) => {
                    let bytes: [u8; 8] = value[..8].try_into().expect("8 bytes");
                    let v = if big_endian { i64::from_be_bytes(bytes) } else { i64::from_le_bytes(bytes) };
                    tsoffset.get_or_insert(v);
                }
                _ => {}
            }
        }
        Interface {
            link: LinkType::from_linktype(u32::from(linktype)),
            snaplen,
            limit: capture_limit(snaplen),
            units_per_sec: units_per_sec(tsresol.unwrap_or(6)),
            offset_secs: tsoffset.unwrap_or(0),
        }
    }

    /// Converts a raw Enhanced Packet Block timestamp to nanoseconds since the epoch,
    /// clamped to the `u64` range.
    fn ts_ns(&self, raw: u64) -> u64 {
        let raw = u128::from(raw);
        let ns = match self.units_per_sec {
            1_000_000_000 => raw,
            1_000_000 => raw * 1000,
            units => raw * 1_000_000_000 / units,
        };
        // raw < 2^64, so ns < 2^94 and fits in i128, as does offset * 10^9.
        let ns = ns as i128 + i128::from(self.offset_secs) * 1_000_000_000;
        ns.clamp(0, i128::from(u64::MAX)) as u64
    }
}

/// Timestamp units per second for an `if_tsresol` value: 10^v, or 2^(v & 0x7f) if the
/// high bit is set.
fn units_per_sec(tsresol: u8) -> u128 {
    if tsresol & 0x80 != 0 {
        1u128 << (tsresol & 0x7f)
    } else {
        10u128.saturating_pow(u32::from(tsresol))
    }
}

struct PcapNgState {
    /// The current section's byte order.
    big_endian: bool,
    /// Interfaces of the current section, in description order.
    interfaces: Vec<Interface>,
    /// File-wide index of the current section's interface 0.
    first_interface: u32,
    /// Timestamp of the last packet, used for Simple Packet Blocks which carry none.
    last_ts_ns: u64,
}

impl PcapNgState {
    fn read_header<R: Read>(input: &mut Input<R>) -> Result<Self, TraceError> {
        const WHAT: &str = "pcapng section header block";
        let total = block_len(input, WHAT, None)?;
        let big_endian = section_header(input, 0, &input.avail()[..total])?;
        input.consume(total);
        Ok(PcapNgState { big_endian, interfaces: Vec::new(), first_interface: 0, last_ts_ns: 0 })
    }

    /// Blocks are read as libpcap and Wireshark read them: options are walked leniently
    /// (an option list without its end-of-options marker, or cut short, simply ends), and
    /// blocks of types hyflow does not use (statistics, name resolution, custom, ...) are
    /// skipped. A block whose lengths disagree, or a packet block that does not fit, is
    /// damage: reported with its offset after every packet before it.
    fn next<R: Read>(&mut self, input: &mut Input<R>) -> Result<Option<Meta>, TraceError> {
        loop {
            let offset = input.offset();
            if input.len() == 0 && !input.ensure(1)? {
                return Ok(None);
            }
            let total = block_len(input, "pcapng block", Some(self.big_endian))?;
            let block = &input.avail()[..total];
            let head_type = be32(block);
            let big_endian =
                if head_type == SHB_TYPE { section_header(input, offset, block)? } else { self.big_endian };
            let block_type = read32(block, big_endian);
            let body = &block[8..total - 4];
            let meta = match block_type {
                SHB_TYPE => {
                    self.big_endian = big_endian;
                    let count = u32::try_from(self.interfaces.len()).unwrap_or(u32::MAX);
                    self.first_interface = self.first_interface.saturating_add(count);
                    self.interfaces.clear();
                    None
                }
                IDB_TYPE => {
                    require_fixed(input, offset, "interface description block", body, IDB_FIXED_LEN)?;
                    self.interfaces.push(Interface::from_body(body, big_endian));
                    None
                }
                EPB_TYPE => Some(self.enhanced(input, offset, body, big_endian)?),
                SPB_TYPE => Some(self.simple(input, offset, body, big_endian)?),
                _ => None,
            };
            input.consume(total);
            if let Some(meta) = meta {
                self.last_ts_ns = meta.ts_ns;
                return Ok(Some(meta));
            }
        }
    }

    fn enhanced<R>(
        &self,
        input: &Input<R>,
        offset: u64,
        body: &[u8],
        big_endian: bool,
    ) -> Result<Meta, TraceError> {
        const WHAT: &str = "enhanced packet block";
        require_fixed(input, offset, WHAT, body, EPB_FIXED_LEN)?;
        let local_id = read32(&body[0..4], big_endian);
        let ts_raw =
            (u64::from(read32(&body[4..8], big_endian)) << 32) | u64::from(read32(&body[8..12], big_endian));
        let cap_len = read32(&body[12..16], big_endian);
        let orig_len = read32(&body[16..20], big_endian);
        let interface = self.interface(input, offset, WHAT, local_id)?;
        let room = body.len() - EPB_FIXED_LEN;
        if cap_len as usize > room {
            return Err(input.corrupt(
                offset,
                WHAT,
                format!("captured length {cap_len} exceeds the {room} bytes of packet data"),
            ));
        }
        if cap_len > interface.limit {
            return Err(input.corrupt(
                offset,
                WHAT,
                format!("captured length {cap_len} exceeds the limit of {} bytes", interface.limit),
            ));
        }
        Ok(Meta {
            ts_ns: interface.ts_ns(ts_raw),
            interface: self.first_interface.saturating_add(local_id),
            link: interface.link,
            orig_len,
            data_start: input.start + 8 + EPB_FIXED_LEN,
            data_len: cap_len as usize,
            offset,
        })
    }

    /// Simple Packet Blocks belong to interface 0 and have no timestamp; they get the
    /// timestamp of the previous packet so replay order and pacing are preserved.
    fn simple<R>(
        &self,
        input: &Input<R>,
        offset: u64,
        body: &[u8],
        big_endian: bool,
    ) -> Result<Meta, TraceError> {
        const WHAT: &str = "simple packet block";
        require_fixed(input, offset, WHAT, body, SPB_FIXED_LEN)?;
        let interface = self.interface(input, offset, WHAT, 0)?;
        let orig_len = read32(&body[0..4], big_endian);
        // The captured length is implicit: the original length, cut to the snapshot length
        // and to the data present (which includes padding).
        let mut cap_len = (orig_len as usize).min(body.len() - SPB_FIXED_LEN);
        if interface.snaplen != 0 {
            cap_len = cap_len.min(interface.snaplen as usize);
        }
        if cap_len > interface.limit as usize {
            return Err(input.corrupt(
                offset,
                WHAT,
                format!("captured length {cap_len} exceeds the limit of {} bytes", interface.limit),
            ));
        }
        Ok(Meta {
            ts_ns: self.last_ts_ns,
            interface: self.first_interface,
            link: interface.link,
            orig_len,
            data_start: input.start + 8 + SPB_FIXED_LEN,
            data_len: cap_len,
            offset,
        })
    }

    fn interface<R>(
        &self,
        input: &Input<R>,
        offset: u64,
        what: &'static str,
        local_id: u32,
    ) -> Result<Interface, TraceError> {
        self.interfaces.get(local_id as usize).copied().ok_or_else(|| {
            input.corrupt(
                offset,
                what,
                format!(
                    "interface {local_id} is not described in this section ({} interfaces)",
                    self.interfaces.len()
                ),
            )
        })
    }
}

/// Reads the header of the pcapng block at the current position, validates its length and
/// makes the whole block available. `big_endian` is the current section's byte order (`None`
/// before the first section header); a section header's own byte-order magic always wins.
fn block_len<R: Read>(
    input: &mut Input<R>,
    what: &'static str,
    big_endian: Option<bool>,
) -> Result<usize, TraceError> {
    let offset = input.offset();
    if !input.ensure(BLOCK_OVERHEAD)? {
        return Err(input.truncated(offset, what, BLOCK_OVERHEAD, input.len(), false));
    }
    let head = &input.avail()[..BLOCK_OVERHEAD];
    let block_type = be32(head); // SHB_TYPE reads the same in both byte orders.
    let big_endian = match (block_type, big_endian) {
        (SHB_TYPE, _) | (_, None) => match be32(&head[8..12]) {
            BYTE_ORDER_MAGIC => true,
            m if m == BYTE_ORDER_MAGIC.swap_bytes() => false,
            m => {
                return Err(input.corrupt(
                    offset,
                    "pcapng section header block",
                    format!("invalid byte-order magic 0x{m:08x}"),
                ))
            }
        },
        (_, Some(big_endian)) => big_endian,
    };
    let len = read32(&head[4..8], big_endian);
    let what = block_name(read32(head, big_endian));
    let problem = if len < BLOCK_OVERHEAD as u32 {
        Some(format!("block length {len} is smaller than {BLOCK_OVERHEAD}"))
    } else if !len.is_multiple_of(4) {
        Some(format!("block length {len} is not a multiple of 4"))
    } else if len > MAX_BLOCK_LEN {
        Some(format!("block length {len} exceeds the limit of {MAX_BLOCK_LEN} bytes"))
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(input.corrupt(offset, what, problem));
    }
    let total = len as usize;
    if !input.ensure(total)? {
        return Err(input.truncated(offset, what, total, input.len(), true));
    }
    let trailer = read32(&input.avail()[total - 4..total], big_endian);
    if trailer != len {
        return Err(input.corrupt(
            offset,
            what,
            format!("trailing block length {trailer} differs from the leading {len}"),
        ));
    }
    Ok(total)
}

/// A Section Header Block (the whole block, at `offset`): its byte order, from the byte-order
/// magic [`block_len`] checked, and its major version, which must be 1 (libpcap refuses
/// others: their layout is unknown). The section length and options are not needed.
fn section_header<R>(input: &Input<R>, offset: u64, block: &[u8]) -> Result<bool, TraceError> {
    const WHAT: &str = "pcapng section header block";
    require_fixed(input, offset, WHAT, &block[8..block.len() - 4], SHB_FIXED_LEN)?;
    let big_endian = be32(&block[8..12]) == BYTE_ORDER_MAGIC;
    let major = read16(&block[12..14], big_endian);
    if major != 1 {
        return Err(input.corrupt(offset, WHAT, format!("pcapng version {major} is not supported (only 1)")));
    }
    Ok(big_endian)
}

/// The options of a block (code, value), up to the end-of-options marker, the end of the
/// data, or an option that does not fit, whichever comes first.
fn options(mut data: &[u8], big_endian: bool) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let code = read16(data.get(..4)?, big_endian);
        let len = read16(&data[2..4], big_endian) as usize;
        if code == OPT_ENDOFOPT {
            return None;
        }
        let value = data.get(4..4 + len)?;
        data = data.get(4 + len.next_multiple_of(4)..).unwrap_or_default();
        Some((code, value))
    })
}

fn block_name(block_type: u32) -> &'static str {
    match block_type {
        SHB_TYPE => "pcapng section header block",
        IDB_TYPE => "interface description block",
        SPB_TYPE => "simple packet block",
        EPB_TYPE => "enhanced packet block",
        _ => "pcapng block",
    }
}

/// Largest captured length accepted for a given snapshot length (see [`MAX_PACKET_LEN`]).
fn capture_limit(snaplen: u32) -> u32 {
    snaplen.clamp(MAX_PACKET_LEN, MAX_SNAPLEN_LIMIT)
}

/// Reads a big-endian u32 from the first four bytes (callers check the length).
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Reads a u16 in the given byte order from the first two bytes.
fn read16(b: &[u8], big_endian: bool) -> u16 {
    let bytes = [b[0], b[1]];
    if big_endian {
        u16::from_be_bytes(bytes)
    } else {
        u16::from_le_bytes(bytes)
    }
}

/// Reads a u32 in the given byte order from the first four bytes.
fn read32(b: &[u8], big_endian: bool) -> u32 {
    let bytes = [b[0], b[1], b[2], b[3]];
    if big_endian {
        u32::from_be_bytes(bytes)
    } else {
        u32::from_le_bytes(bytes)
    }
}

/// A packet block's body must at least hold its fixed fields.
fn require_fixed<R>(
    input: &Input<R>,
    offset: u64,
    what: &'static str,
    body: &[u8],
    min: usize,
) -> Result<(), TraceError> {
    if body.len() < min {
        return Err(input.corrupt(offset, what, format!("body of {} bytes is too short", body.len())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::io::Cursor;
    use std::time::Duration;

    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::{
        InterfaceDescriptionBlock, InterfaceDescriptionOption,
    };
    use pcap_file::pcapng::blocks::interface_statistics::InterfaceStatisticsBlock;
    use pcap_file::pcapng::blocks::section_header::SectionHeaderBlock;
    use pcap_file::pcapng::blocks::simple_packet::SimplePacketBlock;
    use pcap_file::pcapng::PcapNgWriter;
    use pcap_file::DataLink;
    use proptest::prelude::*;

    use super::*;

    /// An owned copy of a packet, for comparisons.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Owned {
        ts_ns: u64,
        interface: u32,
        link: LinkType,
        orig_len: u32,
        data: Vec<u8>,
        offset: u64,
    }

    /// Reads everything; returns the packets and the terminating error, if any.
    fn read_all<R: Read>(mut r: TraceReader<R>) -> (Vec<Owned>, Option<TraceError>) {
        let mut out = Vec::new();
        loop {
            match r.next_packet() {
                Ok(Some(p)) => out.push(Owned {
                    ts_ns: p.ts_ns,
                    interface: p.interface,
                    link: p.link,
                    orig_len: p.orig_len,
                    data: p.data.to_vec(),
                    offset: p.offset,
                }),
                Ok(None) => break,
                Err(e) => {
                    assert_eq!(r.packets_read(), out.len() as u64);
                    // Fused after an error.
                    assert!(matches!(r.next_packet(), Ok(None)));
                    return (out, Some(e));
                }
            }
        }
        assert_eq!(r.packets_read(), out.len() as u64);
        assert!(matches!(r.next_packet(), Ok(None)));
        (out, None)
    }

    fn read_bytes(bytes: &[u8], name: &str) -> Result<(Vec<Owned>, Option<TraceError>), TraceError> {
        Ok(read_all(TraceReader::new(Cursor::new(bytes.to_vec()), name.into())?))
    }

    /// Builds a classic pcap file by hand: (ts_sec, ts_frac, data, orig_len) records.
    fn pcap_bytes(
        big_endian: bool,
        nanos: bool,
        linktype: u32,
        snaplen: u32,
        records: &[(u32, u32, Vec<u8>, u32)],
    ) -> Vec<u8> {
        let w32 = |v: &mut Vec<u8>, x: u32| {
            v.extend_from_slice(&if big_endian { x.to_be_bytes() } else { x.to_le_bytes() })
        };
        let w16 = |v: &mut Vec<u8>, x: u16| {
            v.extend_from_slice(&if big_endian { x.to_be_bytes() } else { x.to_le_bytes() })
        };
        let mut v = Vec::new();
        w32(&mut v, if nanos { PCAP_MAGIC_NS_BE } else { PCAP_MAGIC_US_BE });
        w16(&mut v, 2);
        w16(&mut v, 4);
        w32(&mut v, 0);
        w32(&mut v, 0);
        w32(&mut v, snaplen);
        w32(&mut v, linktype);
        for (sec, frac, data, orig) in records {
            w32(&mut v, *sec);
            w32(&mut v, *frac);
            w32(&mut v, data.len() as u32);
            w32(&mut v, *orig);
            v.extend_from_slice(data);
        }
        v
    }

    fn payload(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
    }

    fn three_record_pcap() -> Vec<u8> {
        pcap_bytes(
            false,
            true,
            1,
            65535,
            &[(10, 1, payload(100, 1), 100), (11, 2, payload(200, 2), 200), (12, 3, payload(300, 3), 300)],
        )
    }

    #[test]
    fn big_endian_pcap_microseconds() {
        let bytes = pcap_bytes(
            true,
            false,
            1,
            96,
            &[(1_600_000_000, 999_999, payload(60, 9), 60), (1_600_000_001, 5, payload(96, 1), 1514)],
        );
        let (pkts, err) = read_bytes(&bytes, "be.pcap").unwrap();
        assert!(err.is_none());
        assert_eq!(pkts.len(), 2);
        assert_eq!(pkts[0].ts_ns, 1_600_000_000_999_999_000);
        assert_eq!(pkts[0].data, payload(60, 9));
        assert_eq!(pkts[0].offset, 24);
        assert_eq!(pkts[0].link, LinkType::Ethernet);
        // orig_len > snaplen is normal for snaplen-limited captures and must be accepted.
        assert_eq!(pkts[1].ts_ns, 1_600_000_001_000_005_000);
        assert_eq!(pkts[1].orig_len, 1514);
        assert_eq!(pkts[1].data.len(), 96);
        assert_eq!(pkts[1].offset, 24 + 16 + 60);
        assert_eq!(pkts[1].interface, 0);
    }

    #[test]
    fn big_endian_pcap_nanoseconds_raw_ip() {
        for linktype in [12, 14, 101, 228, 229] {
            let bytes = pcap_bytes(true, true, linktype, 65535, &[(7, 123_456_789, payload(20, 0), 20)]);
            let r = TraceReader::new(Cursor::new(bytes), "be.pcap".into()).unwrap();
            assert_eq!(r.format(), TraceFormat::Pcap);
            let (pkts, err) = read_all(r);
            assert!(err.is_none());
            assert_eq!(pkts[0].ts_ns, 7_123_456_789);
            assert_eq!(pkts[0].link, LinkType::RawIp);
        }
        let bytes = pcap_bytes(false, true, 0x0400_0071, 65535, &[(0, 0, vec![1], 1)]);
        let (pkts, _) = read_bytes(&bytes, "x").unwrap();
        // FCS bits in the upper half are not part of the link type (113 = LINUX_SLL).
        assert_eq!(pkts[0].link, LinkType::LinuxSll);
    }

    #[test]
    fn header_only_files_have_no_packets() {
        let (pkts, err) = read_bytes(&pcap_bytes(false, false, 1, 65535, &[]), "h.pcap").unwrap();
        assert!(pkts.is_empty() && err.is_none());

        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        let shb_only = w.get_ref().clone();
        w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::ETHERNET, 0)).unwrap();
        for bytes in [shb_only, w.into_inner()] {
            let r = TraceReader::new(Cursor::new(bytes), "h.pcapng".into()).unwrap();
            assert_eq!(r.format(), TraceFormat::PcapNg);
            let (pkts, err) = read_all(r);
            assert!(pkts.is_empty() && err.is_none());
        }
    }

    #[test]
    fn garbage_magic_is_reported_at_byte_zero() {
        let e = read_bytes(b"\x12\x34\x56\x78 and then some text", "garbage.pcap").unwrap_err();
        assert_eq!(e.to_string(), "garbage.pcap: byte 0: not a pcap or pcapng file (magic 0x12345678)");

        let e = read_bytes(b"", "empty.pcap").unwrap_err();
        assert_eq!(e.to_string(), "empty.pcap: byte 0: truncated file header (4 bytes needed, 0 present)");
        let e = read_bytes(&three_record_pcap()[..20], "short.pcap").unwrap_err();
        assert!(matches!(e, TraceError::Truncated { offset: 0, needed: 24, present: 20, .. }), "{e}");
    }

    #[test]
    fn truncated_pcap_delivers_complete_packets_first() {
        let full = three_record_pcap();
        let third = 24 + 116 + 216;
        // Cut in the middle of the third packet's data.
        let (pkts, err) = read_bytes(&full[..third + 16 + 150], "trace.pcap").unwrap();
        assert_eq!(pkts.len(), 2);
        assert_eq!(pkts[1].data, payload(200, 2));
        let err = err.unwrap();
        assert!(
            matches!(err, TraceError::Truncated { offset, needed: 300, present: 150, declared: true, .. } if offset == third as u64),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "trace.pcap: byte 356: truncated packet record (header says 300 bytes, 150 present)"
        );

        // Cut inside the third record header.
        let (pkts, err) = read_bytes(&full[..third + 10], "trace.pcap").unwrap();
        assert_eq!(pkts.len(), 2);
        assert_eq!(
            err.unwrap().to_string(),
            "trace.pcap: byte 356: truncated packet record header (16 bytes needed, 10 present)"
        );

        // Cut exactly at a record boundary is a clean end.
        let (pkts, err) = read_bytes(&full[..third], "trace.pcap").unwrap();
        assert_eq!(pkts.len(), 2);
        assert!(err.is_none());
    }

    #[test]
    fn corrupt_pcap_record_length() {
        let mut bytes = three_record_pcap();
        let second = 24 + 116;
        bytes[second + 8..second + 12].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        let (pkts, err) = read_bytes(&bytes, "bad.pcap").unwrap();
        assert_eq!(pkts.len(), 1);
        let err = err.unwrap();
        assert_eq!(err.offset(), Some(second as u64));
        assert_eq!(
            err.to_string(),
            "bad.pcap: byte 140: corrupt packet record: captured length 4294967280 exceeds the \
             limit of 262144 bytes"
        );
    }

    #[test]
    fn large_snaplen_allows_large_packets() {
        let big = payload(600_000, 5);
        let bytes =
            pcap_bytes(false, true, 1, 1 << 20, &[(1, 0, big.clone(), 600_000), (2, 0, vec![1, 2], 2)]);
        let (pkts, err) = read_bytes(&bytes, "big.pcap").unwrap();
        assert!(err.is_none());
        assert_eq!(pkts.len(), 2);
        assert_eq!(pkts[0].data, big);
        assert_eq!(pkts[1].data, vec![1, 2]);
        // ...but not beyond the snaplen-derived limit.
        let bytes = pcap_bytes(false, true, 1, 65535, &[(1, 0, big, 600_000)]);
        let (_, err) = read_bytes(&bytes, "big.pcap").unwrap();
        assert!(matches!(err, Some(TraceError::Corrupt { offset: 24, .. })));
    }

    /// A reader that hands out data in small, irregular pieces and sometimes fails with
    /// `Interrupted`, to exercise buffer refills and compaction.
    struct Trickle {
        data: Vec<u8>,
        pos: usize,
        calls: usize,
        fail_at: Option<usize>,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.calls += 1;
            if self.calls.is_multiple_of(5) {
                return Err(io::ErrorKind::Interrupted.into());
            }
            if Some(self.pos) == self.fail_at {
                return Err(io::Error::other("disk on fire"));
            }
            let mut n = (self.calls * 7919) % 4001 + 1;
            n = n.min(buf.len()).min(self.data.len() - self.pos);
            if let Some(f) = self.fail_at {
                n = n.min(f - self.pos);
            }
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    fn trickle(data: Vec<u8>) -> Trickle {
        Trickle { data, pos: 0, calls: 0, fail_at: None }
    }

    #[test]
    fn small_reads_give_identical_results() {
        let mut records = Vec::new();
        for i in 0..400u32 {
            let len = (i as usize * 997) % 9000;
            records.push((i, i * 3, payload(len, i as u8), len as u32));
        }
        records.push((9, 9, payload(300_000, 1), 300_000)); // larger than the initial buffer
        let bytes = pcap_bytes(false, true, 1, 400_000, &records);
        let whole = read_bytes(&bytes, "t").unwrap();
        let pieces = read_all(TraceReader::new(trickle(bytes.clone()), "t".into()).unwrap());
        assert_eq!(whole.0.len(), records.len());
        assert!(whole.1.is_none() && pieces.1.is_none());
        assert_eq!(whole.0, pieces.0);

        let ng = two_section_pcapng();
        let whole = read_bytes(&ng, "t").unwrap();
        let pieces = read_all(TraceReader::new(trickle(ng), "t".into()).unwrap());
        assert_eq!(whole.0, pieces.0);
    }

    #[test]
    fn read_errors_name_file_and_offset() {
        let bytes = three_record_pcap();
        let src = Trickle { data: bytes, pos: 0, calls: 0, fail_at: Some(300) };
        let (pkts, err) = read_all(TraceReader::new(src, "flaky.pcap".into()).unwrap());
        assert_eq!(pkts.len(), 1);
        let err = err.unwrap();
        assert!(matches!(err, TraceError::Io { offset: 300, .. }), "{err:?}");
        assert!(err.to_string().starts_with("flaky.pcap: byte 300: I/O error: "));

        let e = TraceReader::open(Path::new("/nonexistent/trace.pcap")).unwrap_err();
        assert!(e.to_string().starts_with("/nonexistent/trace.pcap: cannot open: "), "{e}");
    }

    fn idb(
        linktype: DataLink,
        snaplen: u32,
        options: Vec<InterfaceDescriptionOption<'static>>,
    ) -> InterfaceDescriptionBlock<'static> {
        InterfaceDescriptionBlock { linktype, snaplen, options }
    }

    /// pcap-file stores the raw EPB timestamp units in `Duration::from_nanos(raw)`.
    fn epb(interface_id: u32, raw_ts: u64, data: &[u8], original_len: u32) -> EnhancedPacketBlock<'_> {
        EnhancedPacketBlock {
            interface_id,
            timestamp: Duration::from_nanos(raw_ts),
            original_len,
            data: Cow::Borrowed(data),
            options: vec![],
        }
    }

    /// Little-endian section with interfaces at µs and ns resolution, then a big-endian
    /// section with a binary resolution, a time offset and a Simple Packet Block.
    fn two_section_pcapng() -> Vec<u8> {
        let mut w = PcapNgWriter::with_endianness(Vec::new(), Endianness::Little).unwrap();
        w.write_pcapng_block(idb(DataLink::ETHERNET, 0, vec![InterfaceDescriptionOption::IfTsResol(6)]))
            .unwrap();
        w.write_pcapng_block(idb(
            DataLink::RAW,
            0,
            vec![InterfaceDescriptionOption::IfName("ns0".into()), InterfaceDescriptionOption::IfTsResol(9)],
        ))
        .unwrap();
        let a = payload(60, 1);
        let b = payload(41, 2);
        let c = payload(1514, 3);
        w.write_pcapng_block(epb(0, 1_700_000_000_123_456, &a, 60)).unwrap();
        w.write_pcapng_block(epb(1, 1_700_000_000_987_654_321, &b, 41)).unwrap();
        w.write_pcapng_block(InterfaceStatisticsBlock { interface_id: 0, timestamp: 5, options: vec![] })
            .unwrap();
        w.write_pcapng_block(epb(0, 1_700_000_001_000_001, &c, 1514)).unwrap();

        let shb = SectionHeaderBlock { endianness: Endianness::Big, ..Default::default() };
        w.write_pcapng_block(shb).unwrap();
        w.write_pcapng_block(idb(
            DataLink::ETHERNET,
            0,
            vec![
                InterfaceDescriptionOption::IfTsResol(0x80 | 10),
                InterfaceDescriptionOption::IfTsOffset(100),
            ],
        ))
        .unwrap();
        w.write_pcapng_block(idb(DataLink::ETHERNET, 64, vec![])).unwrap();
        let d = payload(70, 4);
        w.write_pcapng_block(epb(0, 1024 * 5 + 512, &d, 70)).unwrap();
        let e = payload(5, 5);
        w.write_pcapng_block(SimplePacketBlock { original_len: 5, data: Cow::Borrowed(&e) }).unwrap();
        let f = payload(64, 6);
        w.write_pcapng_block(epb(1, 42, &f, 1514)).unwrap();
        w.into_inner()
    }

    #[test]
    fn pcapng_sections_interfaces_and_resolutions() {
        let bytes = two_section_pcapng();
        let (pkts, err) = read_bytes(&bytes, "two.pcapng").unwrap();
        assert!(err.is_none(), "{err:?}");
        let summary: Vec<_> =
            pkts.iter().map(|p| (p.interface, p.ts_ns, p.link, p.orig_len, p.data.clone())).collect();
        assert_eq!(
            summary,
            vec![
                (0, 1_700_000_000_123_456_000, LinkType::Ethernet, 60, payload(60, 1)),
                (1, 1_700_000_000_987_654_321, LinkType::RawIp, 41, payload(41, 2)),
                (0, 1_700_000_001_000_001_000, LinkType::Ethernet, 1514, payload(1514, 3)),
                (2, 105_500_000_000, LinkType::Ethernet, 70, payload(70, 4)),
                // Simple packet: interface 0 of its section, previous timestamp, no padding.
                (2, 105_500_000_000, LinkType::Ethernet, 5, payload(5, 5)),
                (3, 42_000, LinkType::Ethernet, 1514, payload(64, 6)),
            ]
        );
        // Offsets point at the packet blocks, in the section's byte order.
        for (i, p) in pkts.iter().enumerate() {
            let head: [u8; 4] = bytes[p.offset as usize..p.offset as usize + 4].try_into().unwrap();
            let ty = if i < 3 { u32::from_le_bytes(head) } else { u32::from_be_bytes(head) };
            assert_eq!(ty, if i == 4 { SPB_TYPE } else { EPB_TYPE }, "packet {i}");
        }
    }

    #[test]
    fn truncated_pcapng_delivers_complete_packets_first() {
        let bytes = two_section_pcapng();
        let (pkts, _) = read_bytes(&bytes, "t").unwrap();
        let last = pkts.last().unwrap().offset as usize;
        let (got, err) = read_bytes(&bytes[..last + 30], "cut.pcapng").unwrap();
        assert_eq!(got, pkts[..pkts.len() - 1]);
        let err = err.unwrap();
        let total = bytes.len() - last;
        assert!(
            matches!(err, TraceError::Truncated { offset, needed, present: 30, declared: true, what: "enhanced packet block", .. }
                if offset == last as u64 && needed == total as u64),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!("cut.pcapng: byte {last}: truncated enhanced packet block (header says {total} bytes, 30 present)")
        );
    }

    /// Every prefix of a valid file yields exactly the packets whose records are complete,
    /// and ends cleanly exactly at record boundaries.
    #[test]
    fn every_prefix_behaves() {
        for bytes in [three_record_pcap(), two_section_pcapng()] {
            let (all, _) = read_bytes(&bytes, "t").unwrap();
            let pcap = bytes[0] != 0x0A;
            let ends: Vec<u64> = all
                .iter()
                .map(|p| {
                    let at = p.offset as usize;
                    if pcap {
                        p.offset + 16 + p.data.len() as u64
                    } else {
                        // Block length in either byte order; the wrong one is huge.
                        let len: [u8; 4] = bytes[at + 4..at + 8].try_into().unwrap();
                        p.offset + u64::from(u32::from_le_bytes(len).min(u32::from_be_bytes(len)))
                    }
                })
                .collect();
            for cut in 0..=bytes.len() {
                let Ok((pkts, err)) = read_bytes(&bytes[..cut], "t") else {
                    assert!(cut < all[0].offset as usize);
                    continue;
                };
                let complete = ends.iter().filter(|&&e| e <= cut as u64).count();
                assert_eq!(pkts, all[..complete], "cut {cut}");
                if let Some(e) = &err {
                    assert!(matches!(e, TraceError::Truncated { .. }), "cut {cut}: {e}");
                }
                if pcap {
                    let boundary = cut == 24 || ends.contains(&(cut as u64));
                    assert_eq!(err.is_none(), boundary, "cut {cut}");
                }
            }
        }
    }

    /// Appends a raw block in little-endian order.
    fn raw_block(v: &mut Vec<u8>, block_type: u32, len: u32, body: &[u8], trailer: u32) {
        v.extend_from_slice(&block_type.to_le_bytes());
        v.extend_from_slice(&len.to_le_bytes());
        v.extend_from_slice(body);
        v.extend_from_slice(&trailer.to_le_bytes());
    }

    fn le_section_with_interface() -> Vec<u8> {
        let mut w = PcapNgWriter::with_endianness(Vec::new(), Endianness::Little).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock::new(DataLink::ETHERNET, 0)).unwrap();
        w.into_inner()
    }

    /// Read as libpcap and Wireshark read them: a section header whose options lack the
    /// end-of-options marker (tcpdump's ospf-sr.pcapng), an interface whose option list is
    /// cut inside an option, and blocks of unknown types are all fine.
    #[test]
    fn lenient_pcapng_options_and_blocks() {
        let mut v = Vec::new();
        // Section header: magic, version 1.0, section length -1, one comment option (code 1,
        // 4 bytes) and no end-of-options.
        let mut shb = vec![0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0];
        shb.extend_from_slice(&[0xff; 8]);
        shb.extend_from_slice(&[1, 0, 4, 0, b'o', b's', b'p', b'f']);
        raw_block(&mut v, SHB_TYPE, 12 + shb.len() as u32, &shb, 12 + shb.len() as u32);
        // Interface: Ethernet, snaplen 0, if_tsresol 9 (ns), then an option claiming 200 bytes.
        let mut idb = vec![1, 0, 0, 0, 0, 0, 0, 0];
        idb.extend_from_slice(&[9, 0, 1, 0, 9, 0, 0, 0]);
        idb.extend_from_slice(&[2, 0, 200, 0]);
        raw_block(&mut v, IDB_TYPE, 12 + idb.len() as u32, &idb, 12 + idb.len() as u32);
        // A custom block (type 0xBAD) and a name-resolution block (4) to skip.
        raw_block(&mut v, 0xBAD, 16, &[0; 4], 16);
        raw_block(&mut v, 4, 16, &[0; 4], 16);
        // One packet: interface 0, timestamp 1,500 ns, 4 bytes.
        let mut epb = vec![0, 0, 0, 0, 0, 0, 0, 0, 0xdc, 0x05, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0];
        epb.extend_from_slice(&[1, 2, 3, 4]);
        raw_block(&mut v, EPB_TYPE, 12 + epb.len() as u32, &epb, 12 + epb.len() as u32);
        let (pkts, err) = read_bytes(&v, "lenient.pcapng").unwrap();
        assert!(err.is_none(), "{err:?}");
        assert_eq!(pkts.len(), 1);
        assert_eq!((pkts[0].ts_ns, pkts[0].data.as_slice()), (1_500, &[1u8, 2, 3, 4][..]));
        // Version 2 is refused by name.
        v[12] = 2;
        let e = read_bytes(&v, "v2.pcapng").unwrap_err().to_string();
        assert!(e.contains("pcapng version 2 is not supported"), "{e}");
    }

    #[test]
    fn corrupt_pcapng_blocks() {
        let base = le_section_with_interface();
        let at = base.len() as u64;
        let body = [0u8; 24];
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                {
                    let mut v = base.clone();
                    raw_block(&mut v, 6, 38, &body, 38);
                    v
                },
                "not a multiple of 4",
            ),
            (
                {
                    let mut v = base.clone();
                    raw_block(&mut v, 6, 8, &[], 8);
                    v
                },
                "smaller than 12",
            ),
            (
                {
                    let mut v = base.clone();
                    raw_block(&mut v, 6, 0x7FFF_FFF0, &[], 0);
                    v
                },
                "exceeds the limit",
            ),
            (
                {
                    let mut v = base.clone();
                    raw_block(&mut v, 6, 36, &body, 40);
                    v
                },
                "trailing block length 40 differs from the leading 36",
            ),
            (
                {
                    let mut v = base.clone();
                    let mut b = body;
                    b[0] = 7; // interface 7
                    raw_block(&mut v, 6, 36, &b, 36);
                    v
                },
                "interface 7 is not described in this section (1 interfaces)",
            ),
            (
                {
                    let mut v = base.clone();
                    let mut b = body;
                    b[12] = 200; // captured length 200 > 4 bytes present
                    raw_block(&mut v, 6, 36, &b, 36);
                    v
                },
                "captured length 200 exceeds the 4 bytes of packet data",
            ),
            (
                {
                    let mut v = base.clone();
                    raw_block(&mut v, 6, 12, &[], 12);
                    v
                },
                "too short",
            ),
        ];
        for (bytes, expected) in cases {
            let (pkts, err) = read_bytes(&bytes, "bad.pcapng").unwrap();
            assert!(pkts.is_empty());
            let err = err.unwrap();
            assert!(matches!(err, TraceError::Corrupt { .. }), "{err:?}");
            assert_eq!(err.offset(), Some(at));
            let msg = err.to_string();
            assert!(msg.starts_with(&format!("bad.pcapng: byte {at}: corrupt ")), "{msg}");
            assert!(msg.contains(expected), "{msg} does not contain {expected}");
        }

        // Packets before any interface description.
        let mut v = Vec::new();
        PcapNgWriter::with_endianness(&mut v, Endianness::Little).unwrap();
        raw_block(&mut v, 3, 16, &[1, 0, 0, 0], 16);
        let (_, err) = read_bytes(&v, "bad.pcapng").unwrap();
        assert!(err.unwrap().to_string().contains("interface 0 is not described"));

        // Bad byte-order magic in the first section header.
        let mut v = le_section_with_interface();
        v[8] ^= 0xFF;
        let e = read_bytes(&v, "bad.pcapng").unwrap_err();
        assert!(
            e.to_string().starts_with(
                "bad.pcapng: byte 0: corrupt pcapng section header block: invalid byte-order magic"
            ),
            "{e}"
        );
    }

    #[test]
    fn unknown_blocks_are_skipped() {
        let mut v = le_section_with_interface();
        raw_block(&mut v, 0x0BAD, 20, &[9; 8], 20);
        let mut body = vec![0u8; 20];
        body[12] = 3;
        body[16] = 3;
        body.extend_from_slice(&[0xAA, 0xBB, 0xCC, 0]);
        raw_block(&mut v, 6, 12 + body.len() as u32, &body, 12 + body.len() as u32);
        let (pkts, err) = read_bytes(&v, "u.pcapng").unwrap();
        assert!(err.is_none());
        assert_eq!(pkts.len(), 1);
        assert_eq!(pkts[0].data, vec![0xAA, 0xBB, 0xCC]);
        assert_eq!(pkts[0].offset, v.len() as u64 - 36);
    }

    #[test]
    fn timestamp_resolution_conversion() {
        assert_eq!(units_per_sec(0), 1);
        assert_eq!(units_per_sec(6), 1_000_000);
        assert_eq!(units_per_sec(9), 1_000_000_000);
        assert_eq!(units_per_sec(0x80 | 10), 1024);
        assert_eq!(units_per_sec(0xFF), 1 << 127);
        assert_eq!(units_per_sec(127), u128::MAX);
        let iface = |resol: u8, offset_secs: i64| Interface {
            link: LinkType::Ethernet,
            snaplen: 0,
            limit: MAX_PACKET_LEN,
            units_per_sec: units_per_sec(resol),
            offset_secs,
        };
        assert_eq!(iface(6, 0).ts_ns(1_500_000), 1_500_000_000);
        assert_eq!(iface(9, 0).ts_ns(u64::MAX), u64::MAX);
        assert_eq!(iface(3, 0).ts_ns(1_234), 1_234_000_000);
        assert_eq!(iface(0x80 | 1, 0).ts_ns(3), 1_500_000_000);
        assert_eq!(iface(0, 0).ts_ns(u64::MAX), u64::MAX); // clamped
        assert_eq!(iface(6, -10).ts_ns(1_000_000), 0); // clamped
        assert_eq!(iface(6, 5).ts_ns(1), 5_000_001_000);
        assert_eq!(iface(127, 0).ts_ns(u64::MAX), 0);
        assert_eq!(iface(0xFF, i64::MAX).ts_ns(u64::MAX), u64::MAX);
    }

    /// The pcap reader relies on pcap-file's `DataLink` round-tripping every 16-bit value.
    #[test]
    fn datalink_numbers_round_trip() {
        for n in 0..=0xFFFFu32 {
            assert_eq!(u32::from(DataLink::from(n)), n);
        }
    }

    /// Runs a reader over arbitrary bytes; it must terminate without panicking.
    fn exercise(bytes: &[u8]) {
        if let Ok(mut r) = TraceReader::new(Cursor::new(bytes), "fuzz".into()) {
            let mut n = 0u64;
            while let Ok(Some(p)) = r.next_packet() {
                assert!(p.offset < bytes.len() as u64);
                assert!(p.data.len() < bytes.len());
                n += 1;
                assert!(n <= bytes.len() as u64);
            }
        }
    }

    #[test]
    fn bit_flips_never_panic() {
        for base in [three_record_pcap(), two_section_pcapng()] {
            for byte in 0..base.len().min(2000) {
                for bit in [0, 3, 7] {
                    let mut v = base.clone();
                    v[byte] ^= 1 << bit;
                    exercise(&v);
                }
            }
        }
    }

    fn magic_prefix() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(vec![]),
            Just(vec![0xA1, 0xB2, 0xC3, 0xD4]),
            Just(vec![0x4D, 0x3C, 0xB2, 0xA1]),
            Just(vec![0x0A, 0x0D, 0x0D, 0x0A]),
            Just(le_section_with_interface()),
            Just(pcap_bytes(false, true, 1, 65535, &[])),
        ]
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(prefix in magic_prefix(), tail in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut bytes = prefix;
            bytes.extend_from_slice(&tail);
            exercise(&bytes);
        }

        #[test]
        fn mutated_files_never_panic(
            pcapng in any::<bool>(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut bytes = if pcapng { two_section_pcapng() } else { three_record_pcap() };
            for (at, value) in flips {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
            let keep = cut.index(bytes.len() + 1);
            bytes.truncate(keep.max(bytes.len() / 2));
            exercise(&bytes);
        }
    }
}
