//! Where packets come from: a capture file (pcap/pcapng) or generated traffic, parsed to flow
//! keys one at a time, with malformed frames counted by reason. Every command that consumes
//! packets reads them through a [`PacketSource`], so they all see the same packets, the same
//! times and the same malformed counts.
//!
//! A malformed frame is forwarded on what could be parsed, as Open vSwitch does; a frame of a
//! link type hyflow cannot parse ends the read with an error naming the link type. A capture
//! that ends in the middle of a record (a killed `tcpdump`, a partial copy) ends the read
//! after its last complete packet, and the cut is reported ([`PacketSource::cut`]) rather
//! than failing the run, unless the capture is read strictly.

use std::path::{Path, PathBuf};

use crate::capture::{link_type_name, CaptureCut, CaptureSource, TraceError, TraceReader};
use crate::columnar::{is_columnar, ColumnarError, ColumnarReader, ColumnarWriter};
use crate::measure::flow_id::{FlowId, KeySpec};
use crate::openflow::Rule;
use crate::packet::field::id;
use crate::packet::{parse_captured, parse_frame, FlowKey, LinkKind, Malformed, MalformedCounts};
use crate::workload::flow_arrivals::PacketSlot;
use crate::workload::gateway::{Gateway, GatewayConfig};
use crate::workload::{make_flows, Traffic, TrafficConfig, TrafficError};

/// A source of packets.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// A pcap/pcapng capture. Packets arrive on `in_port`, or, when it is `None`, pcapng
    /// interface i on port i + 1 (port 1 for pcap).
    Capture {
        /// The file (`-`: standard input; `.gz`: decompressed as it is read).
        path: PathBuf,
        /// Input port of every packet, if fixed.
        in_port: Option<u32>,
        /// Whether a capture cut mid-record is an error; otherwise its complete packets are
        /// read and the cut reported.
        strict: bool,
    },
    /// Traffic generated for the workload's rules ([`crate::workload::generate`]).
    Generated {
        /// What to generate.
        traffic: TrafficConfig,
        /// Input port of every packet.
        in_port: u32,
    },
    /// Cloud-gateway traffic ([`crate::workload::gateway`]), streamed: no frames are built.
    Gateway(GatewayConfig),
}

impl Input {
    /// The input's average packet rate if known without reading it (generated streams).
    pub(crate) fn known_rate(&self) -> Option<f64> {
        match self {
            Input::Gateway(g) => Some(g.rate),
            Input::Capture { .. } | Input::Generated { .. } => None,
        }
    }
}

/// Why packets cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A packet of a link type hyflow does not parse.
    #[error("{file}: packet at byte {offset}: {} is not supported (hyflow reads Ethernet, Linux cooked SLL and SLL2, raw IPv4/IPv6 and BSD loopback)", link_type_name(*.link))]
    UnsupportedLinkType {
        /// The capture.
        file: String,
        /// Byte offset of the packet's record.
        offset: u64,
        /// Its `LINKTYPE_*` number.
        link: u32,
    },
    /// The capture is unreadable (named by file and byte offset).
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The traffic cannot be generated.
    #[error(transparent)]
    Traffic(#[from] TrafficError),
    /// The gateway model's parameters are out of range.
    #[error("gen:gateway: {0}")]
    Gateway(String),
    /// A `.hyf` trace is unreadable.
    #[error(transparent)]
    Columnar(#[from] ColumnarError),
}

/// Parses a frame into `key`; returns the reason it is malformed, if it is.
pub fn parse(frame: &[u8], link: LinkKind, in_port: u32, key: &mut FlowKey) -> Option<&'static str> {
    parse_frame(frame, link, in_port, key).err().map(Malformed::name)
}

/// One packet of the input.
#[derive(Clone, Copy, Debug)]
pub struct InputPacket {
    /// Nanoseconds since the input's first packet (as recorded: not necessarily monotonic).
    pub ts_ns: u64,
    /// Its headers.
    pub key: FlowKey,
    /// Bytes on the wire.
    pub bytes: u32,
    /// Why the frame is malformed, if it is.
    pub malformed: Option<&'static str>,
    /// The generated burst it belongs to, if any (gateway traffic: an index into
    /// [`Gateway::burst_log`]).
    pub burst: Option<u32>,
    /// Its flow's dense index, when the input numbers its flows (a `.hyf` trace, generated
    /// gateway traffic): per-flow state can then live in arrays.
    pub flow: Option<u32>,
}

/// How far a source has read: units done and in all (bytes of a capture, packets of
/// generated traffic), for progress bars.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Units read.
    pub done: u64,
    /// Units in all (0 if unknown).
    pub total: u64,
    /// Whether the units are bytes (else packets).
    pub bytes: bool,
}

enum Reader {
    Capture {
        reader: Box<TraceReader>,
        in_port: Option<u32>,
        strict: bool,
        /// Bytes to read, for progress (0 when unknown: a pipe or a compressed file).
        size: u64,
        offset: u64,
    },
    /// `frame` is reused from packet to packet.
    Generated {
        traffic: Box<Traffic>,
        in_port: u32,
        total: u64,
        frame: Vec<u8>,
    },
    Gateway {
        traffic: Box<Gateway>,
        total: u64,
    },
    /// A `.hyf` trace: keys parsed once per flow ([`crate::columnar`]).
    Columnar {
        reader: Box<ColumnarReader>,
        in_port: Option<u32>,
    },
}

/// Packets of an [`Input`], one at a time. The current packet is lent, not copied: a flow key
/// is 224 bytes, and copying it per packet is measurable.
pub struct PacketSource {
    reader: Reader,
    current: InputPacket,
    first_ts: Option<u64>,
    packets: u64,
    malformed: MalformedCounts,
    snaplen_truncated: u64,
    /// Where a capture cut mid-record ended the read.
    cut: Option<CaptureCut>,
    /// Whether capture lengths are checked against the wire (the default) or the captured
    /// bytes are taken as the whole packet, as Open vSwitch reads a capture.
    wire_lengths: bool,
}

/// A record cut short by the end of the capture ends a lenient read as its end would, noting
/// where (`cut`, after `packets` complete packets); any other error, or a strict read's cut,
/// is returned. Called on the error path only: the per-packet path stays one match.
fn end_at_cut(
    e: TraceError,
    strict: bool,
    packets: u64,
    cut: &mut Option<CaptureCut>,
) -> Result<(), TraceError> {
    match e {
        TraceError::Truncated { .. } if !strict => {
            let offset = e.offset().unwrap_or(0);
            *cut = Some(CaptureCut { error: e.to_string(), offset, packets });
            Ok(())
        }
        e => Err(e),
    }
}

impl PacketSource {
    /// Opens `input`; generated traffic exercises `rules`.
    pub fn open(input: &Input, rules: &[Rule]) -> Result<PacketSource, InputError> {
        let reader = match input {
            Input::Capture { path, in_port, .. } if is_columnar(path) => {
                Reader::Columnar { reader: Box::new(ColumnarReader::open(path)?), in_port: *in_port }
            }
            Input::Capture { path, in_port, strict } => Reader::Capture {
                reader: Box::new(TraceReader::open(path)?),
                in_port: *in_port,
                strict: *strict,
                size: match CaptureSource::of(path) {
                    CaptureSource::File => std::fs::metadata(path).map_or(0, |m| m.len()),
                    CaptureSource::Gzip | CaptureSource::Stdin => 0,
                },
                offset: 0,
            },
            Input::Generated { traffic, in_port } => {
                let keys = make_flows(rules, traffic.flows, traffic.seed)?;
                Reader::Generated {
                    traffic: Box::new(Traffic::new(keys, traffic)?),
                    in_port: *in_port,
                    total: traffic.packets as u64,
                    frame: Vec::new(),
                }
            }
            Input::Gateway(g) => Reader::Gateway {
                traffic: Box::new(Gateway::new(*g).map_err(InputError::Gateway)?),
                total: (g.rate * g.duration_ns as f64 / 1e9) as u64,
            },
        };
        let current = InputPacket {
            ts_ns: 0,
            key: FlowKey::default(),
            bytes: 0,
            malformed: None,
            burst: None,
            flow: None,
        };
        Ok(PacketSource {
            reader,
            current,
            first_ts: None,
            packets: 0,
            malformed: MalformedCounts::default(),
            snaplen_truncated: 0,
            cut: None,
            wire_lengths: true,
        })
    }

    /// Takes a capture's bytes as the whole packet, as `ovs-ofctl parse-pcap` does: a packet
    /// cut to the snapshot length then fails OVS's length checks.
    pub fn captured_bytes_only(mut self) -> PacketSource {
        self.wire_lengths = false;
        self
    }

    /// The capture at `path`, on `in_port`, read strictly or not (see [`Input::Capture`]).
    pub fn capture(path: &Path, in_port: Option<u32>, strict: bool) -> Result<PacketSource, InputError> {
        PacketSource::open(&Input::Capture { path: path.to_path_buf(), in_port, strict }, &[])
    }

    /// The next packet, or `None` at the end.
    pub fn next_packet(&mut self) -> Result<Option<&InputPacket>, InputError> {
        self.next_packet_with(|_| true)
    }

    /// [`PacketSource::next_packet`] for a caller that remembers, by flow number, what it
    /// derives from a numbered flow's headers (every packet of a number has the same ones):
    /// a numbered packet's key is copied out of its flow's only if `key_wanted(number)`;
    /// otherwise the returned packet's `key` is the previous packet's, and must not be read.
    /// Inputs that do not number their flows parse every packet's key as before. A caller
    /// reading this way should say so first ([`PacketSource::remembering_flows`]).
    pub fn next_packet_with(
        &mut self,
        key_wanted: impl FnOnce(u32) -> bool,
    ) -> Result<Option<&InputPacket>, InputError> {
        let key = &mut self.current.key;
        let (mut burst, mut flow) = (None, None);
        let (ts, bytes, malformed) = match &mut self.reader {
            Reader::Capture { reader, in_port, offset, strict, .. } => {
                let pkt = match reader.next_packet() {
                    Ok(Some(pkt)) => pkt,
                    Ok(None) => return Ok(None),
                    Err(e) => {
                        end_at_cut(e, *strict, self.packets, &mut self.cut)?;
                        return Ok(None);
                    }
                };
                *offset = pkt.offset;
                let port = in_port.unwrap_or(pkt.interface + 1);
                let Some(link) = pkt.link.frame_kind() else {
                    let (offset, link) = (pkt.offset, pkt.link.to_linktype());
                    return Err(InputError::UnsupportedLinkType {
                        file: reader.name().to_string(),
                        offset,
                        link,
                    });
                };
                // A capture cut to a snapshot length still has the headers: read them, with
                // lengths checked against the wire (only a cut inside a header is malformed).
                let wire_len = if self.wire_lengths { pkt.orig_len } else { pkt.data.len() as u32 };
                let bad = parse_captured(pkt.data, wire_len, link, port, key).err().map(Malformed::name);
                if (pkt.data.len() as u64) < u64::from(pkt.orig_len) {
                    self.snaplen_truncated += 1;
                }
                (pkt.ts_ns, pkt.orig_len, bad)
            }
            Reader::Generated { traffic, in_port, frame, .. } => {
                let Some((ts_ns, _)) = traffic.next_into(frame) else { return Ok(None) };
                let bad = parse(frame, LinkKind::Ethernet, *in_port, key);
                // The frame check sequence is on the wire but not in the generated bytes.
                (ts_ns, frame.len() as u32 + 4, bad)
            }
            Reader::Gateway { traffic, .. } => {
                let Some(p) = traffic.next() else { return Ok(None) };
                if key_wanted(p.flow) {
                    *key = *traffic.key(p.flow);
                }
                (burst, flow) = (p.burst, Some(p.flow));
                // As a capture of it records the frame (`gen gateway` writes one): without the
                // frame check sequence, which the generator's wire sizes include.
                (p.ts_ns, p.bytes - 4, None)
            }
            Reader::Columnar { reader, in_port } => {
                let Some(p) = reader.next_packet()? else { return Ok(None) };
                if key_wanted(p.flow) {
                    *key = reader.flows()[p.flow as usize];
                    if let Some(port) = in_port {
                        // As a capture read on that port: the port is the one field it sets.
                        key.set(id::IN_PORT, u128::from(*port));
                    }
                }
                self.snaplen_truncated += u64::from(p.snaplen_cut);
                (burst, flow) = (p.burst, Some(p.flow));
                (p.ts_ns, p.bytes, p.malformed)
            }
        };
        if let Some(reason) = malformed {
            self.malformed.count(reason);
        }
        self.packets += 1;
        let first = *self.first_ts.get_or_insert(ts);
        self.current.ts_ns = ts.saturating_sub(first);
        self.current.bytes = bytes;
        self.current.malformed = malformed;
        self.current.burst = burst;
        self.current.flow = flow;
        Ok(Some(&self.current))
    }

    /// Says that the caller reads packets with [`PacketSource::next_packet_with`] and wants
    /// a numbered flow's key only on its first packets: a `.hyf` and the gateway generator
    /// then stop fetching keys ahead.
    pub fn remembering_flows(&mut self) {
        match &mut self.reader {
            Reader::Columnar { reader, .. } => reader.without_keys_ahead(),
            Reader::Gateway { traffic, .. } => traffic.without_keys_ahead(),
            Reader::Capture { .. } | Reader::Generated { .. } => {}
        }
    }

    /// The flow number of a packet a few after the one just read, when the input knows it
    /// already (a `.hyf`'s chunk in memory): for the caller to fetch its state for that flow
    /// ahead of its packet.
    #[inline]
    pub fn flow_ahead(&self) -> Option<u32> {
        match &self.reader {
            Reader::Columnar { reader, .. } => reader.flow_ahead(),
            _ => None,
        }
    }

    /// The next packet's time (ns since the first packet) without parsing it, or `None` at
    /// the end: a first pass that needs only the timing (rate rescaling) skips the parser.
    pub(crate) fn next_timestamp(&mut self) -> Result<Option<u64>, InputError> {
        let ts = match &mut self.reader {
            Reader::Capture { reader, offset, strict, .. } => match reader.next_packet() {
                Ok(Some(pkt)) => {
                    *offset = pkt.offset;
                    pkt.ts_ns
                }
                Ok(None) => return Ok(None),
                Err(e) => {
                    end_at_cut(e, *strict, self.packets, &mut self.cut)?;
                    return Ok(None);
                }
            },
            Reader::Generated { traffic, frame, .. } => match traffic.next_into(frame) {
                Some((ts_ns, _)) => ts_ns,
                None => return Ok(None),
            },
            Reader::Gateway { traffic, .. } => match traffic.next() {
                Some(p) => p.ts_ns,
                None => return Ok(None),
            },
            Reader::Columnar { reader, .. } => match reader.next_packet()? {
                Some(p) => p.ts_ns,
                None => return Ok(None),
            },
        };
        self.packets += 1;
        let first = *self.first_ts.get_or_insert(ts);
        Ok(Some(ts.saturating_sub(first)))
    }

    /// Reads up to packet `index` (0-based) and returns it, or `None` if the input is shorter.
    pub fn nth_packet(&mut self, index: u64) -> Result<Option<&InputPacket>, InputError> {
        while self.packets < index {
            if self.next_packet()?.is_none() {
                return Ok(None);
            }
        }
        self.next_packet()
    }

    /// The gateway model generating the packets, if it is one (its burst log is the ground
    /// truth of what bursts there were; its times are [`first_ts_ns`](Self::first_ts_ns)
    /// ahead of the packets').
    pub fn gateway(&self) -> Option<&Gateway> {
        match &self.reader {
            Reader::Gateway { traffic, .. } => Some(traffic),
            Reader::Capture { .. } | Reader::Generated { .. } | Reader::Columnar { .. } => None,
        }
    }

    /// The input's time of its first packet (packet times are relative to it).
    pub fn first_ts_ns(&self) -> u64 {
        self.first_ts.unwrap_or(0)
    }

    /// Packets read so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Where the capture was found cut mid-record, ending the read (a lenient read only).
    pub fn cut(&self) -> Option<&CaptureCut> {
        self.cut.as_ref()
    }

    /// Packets of the capture cut to its snapshot length so far (read from their headers).
    pub fn snaplen_truncated(&self) -> u64 {
        self.snaplen_truncated
    }

    /// Malformed packets by reason so far.
    pub fn malformed(&self) -> &MalformedCounts {
        &self.malformed
    }

    /// How far it has read.
    pub fn progress(&self) -> Progress {
        match &self.reader {
            Reader::Capture { size, offset, .. } => Progress { done: *offset, total: *size, bytes: true },
            Reader::Generated { total, .. } | Reader::Gateway { total, .. } => {
                Progress { done: self.packets, total: *total, bytes: false }
            }
            Reader::Columnar { reader, .. } => {
                Progress { done: reader.read(), total: reader.packets(), bytes: false }
            }
        }
    }
}

/// What a conversion wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Converted {
    /// Packets written.
    pub packets: u64,
    /// Distinct flows (keys) among them.
    pub flows: u64,
}

/// Writes every packet `source` gives to the `.hyf` at `out`, with the times its source
/// recorded: reading the trace gives the source's packets, time for time, with the same
/// malformed and snapshot-length counts.
pub fn write_columnar(source: &mut PacketSource, out: &Path) -> Result<Converted, InputError> {
    let mut writer = ColumnarWriter::create(out)?;
    loop {
        let cut_before = source.snaplen_truncated();
        let Some(p) = source.next_packet()? else { break };
        let (ts, key, bytes, malformed, burst) = (p.ts_ns, p.key, p.bytes, p.malformed, p.burst);
        let snaplen_cut = source.snaplen_truncated() > cut_before;
        writer.write(source.first_ts_ns() + ts, &key, bytes, malformed, burst, snaplen_cut)?;
    }
    let (packets, flows) = writer.finish()?;
    Ok(Converted { packets, flows })
}

/// The packets of a capture as slots: each packet's time since the first, and its 5-tuple
/// (protocol, addresses, ports; ports 0 without TCP/UDP/SCTP, as the artifact's analyser
/// keys them) numbered in order of first appearance. Packets without IP addresses (ARP, ...)
/// count as one flow. A read error ends the slots; [`CaptureSlots::finish`] returns it.
pub struct CaptureSlots<'a> {
    source: &'a mut PacketSource,
    five_tuple: KeySpec,
    ids: hashbrown::HashMap<FlowId, usize>,
    error: Option<InputError>,
}

impl<'a> CaptureSlots<'a> {
    /// The slots of `source`'s packets.
    pub fn new(source: &'a mut PacketSource) -> CaptureSlots<'a> {
        CaptureSlots {
            source,
            five_tuple: KeySpec::five_tuple(),
            ids: hashbrown::HashMap::new(),
            error: None,
        }
    }

    /// Distinct 5-tuples so far, and the error that ended the capture early, if one did.
    pub fn finish(self) -> (usize, Option<InputError>) {
        (self.ids.len(), self.error)
    }
}

impl Iterator for CaptureSlots<'_> {
    type Item = PacketSlot;

    fn next(&mut self) -> Option<PacketSlot> {
        match self.source.next_packet() {
            Ok(Some(p)) => {
                let id = self.five_tuple.flow_id(&p.key).unwrap_or_default();
                let next = self.ids.len();
                let flow = *self.ids.entry(id).or_insert(next);
                Some(PacketSlot { ts_ns: p.ts_ns, flow })
            }
            Ok(None) => None,
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::{LinkType, PcapWriter};
    use crate::packet::build::build_frame;
    use crate::packet::field::proto;
    use crate::workload::builtin;

    fn tcp_key(port: u16) -> FlowKey {
        let mut k = FlowKey::default();
        k.set_in_port(7);
        k.set_dl_type(proto::ETH_IPV4);
        k.set_nw_proto(proto::IP_TCP);
        k.set_nw_ttl(64);
        k.set_nw_src(0x0a00_0001);
        k.set_nw_dst(0x0a00_0002);
        k.set_tp_dst(port);
        k
    }

    /// Times are relative to the first packet, the wire length and input port are kept, a
    /// truncated frame is counted by reason and still forwarded on what was parsed, and
    /// `nth_packet` reads up to the packet asked for.
    #[test]
    fn a_capture_reads_packet_by_packet() {
        let path = std::env::temp_dir().join(format!("hyflow-input-{}.pcap", std::process::id()));
        let mut w = PcapWriter::create(&path, LinkType::Ethernet, true).unwrap();
        let good = build_frame(&tcp_key(80), 60);
        w.write_packet(5_000, &good).unwrap();
        w.write_packet(7_500, &good[..20]).unwrap();
        w.write_packet(9_000, &build_frame(&tcp_key(443), 60)).unwrap();
        w.finish().unwrap();
        let mut source = PacketSource::capture(&path, Some(7), true).unwrap();
        let mut seen = Vec::new();
        while let Some(p) = source.next_packet().unwrap() {
            seen.push((p.ts_ns, p.bytes, p.key.in_port(), p.key.tp_dst(), p.malformed));
        }
        assert_eq!(seen[0], (0, good.len() as u32, 7, 80, None));
        assert_eq!((seen[1].0, seen[1].1, seen[1].2), (2_500, 20, 7));
        assert!(seen[1].4.is_some(), "a truncated IPv4 header is malformed");
        assert_eq!((seen[2].0, seen[2].3, seen[2].4), (4_000, 443, None));
        assert_eq!(source.packets(), 3);
        assert_eq!(source.malformed().total(), 1);
        let progress = source.progress();
        assert!(progress.bytes && progress.done > 0 && progress.done <= progress.total);
        let mut again = PacketSource::capture(&path, None, true).unwrap();
        assert_eq!(
            again.nth_packet(2).unwrap().map(|p| (p.ts_ns, p.key.tp_dst(), p.key.in_port())),
            Some((4_000, 443, 1))
        );
        assert!(again.nth_packet(5).unwrap().is_none());
        let mut times = PacketSource::capture(&path, None, true).unwrap();
        let ts: Vec<u64> = std::iter::from_fn(|| times.next_timestamp().unwrap()).collect();
        assert_eq!(ts, [0, 2_500, 4_000], "timestamps alone, the malformed frame included");
        assert_eq!(times.malformed().total(), 0, "nothing parsed, nothing counted");
        let _ = std::fs::remove_file(&path);
    }

    /// A capture cut mid-record (a killed tcpdump): read leniently, its complete packets come
    /// out and the cut is noted with its offset; read strictly, the cut is the error it was.
    /// The same through gzip, whole or itself cut short.
    #[test]
    fn a_capture_cut_mid_record_gives_its_complete_packets() {
        use std::io::Write as _;
        let dir = std::env::temp_dir();
        let whole = dir.join(format!("hyflow-cut-{}.pcap", std::process::id()));
        let mut w = PcapWriter::create(&whole, LinkType::Ethernet, true).unwrap();
        for (t, port) in [(1_000, 80), (2_000, 443), (3_000, 53)] {
            w.write_packet(t, &build_frame(&tcp_key(port), 100)).unwrap();
        }
        w.finish().unwrap();
        let bytes = std::fs::read(&whole).unwrap();
        // 24-byte file header, then records of 16 + 100 bytes: cut the third 30 bytes in.
        let third = 24 + 2 * 116;
        let short = dir.join(format!("hyflow-cut-{}-short.pcap", std::process::id()));
        std::fs::write(&short, &bytes[..third + 30]).unwrap();
        let gzip = |data: &[u8], name: &str| {
            let path = dir.join(format!("hyflow-cut-{}-{name}", std::process::id()));
            let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            z.write_all(data).unwrap();
            let z = z.finish().unwrap();
            (path, z)
        };
        let (gz_whole, z) = gzip(&bytes, "whole.pcap.gz");
        std::fs::write(&gz_whole, &z).unwrap();
        let (gz_cut, z) = gzip(&bytes[..third + 30], "short.pcap.gz");
        std::fs::write(&gz_cut, &z).unwrap();
        let (gz_cut_stream, z) = gzip(&bytes, "stream-short.pcap.gz");
        // The compressed stream itself cut: what a partial copy of a .gz is.
        std::fs::write(&gz_cut_stream, &z[..z.len() * 3 / 4]).unwrap();

        let read = |path: &Path, strict: bool| {
            let mut source = PacketSource::capture(path, None, strict)?;
            let mut ports = Vec::new();
            while let Some(p) = source.next_packet()? {
                ports.push(p.key.tp_dst());
            }
            Ok::<_, InputError>((ports, source.cut().cloned()))
        };
        let (ports, none) = read(&whole, false).unwrap();
        assert_eq!((ports, none), (vec![80, 443, 53], None));
        let (ports, cut) = read(&short, false).unwrap();
        assert_eq!(ports, [80, 443]);
        let cut = cut.expect("the cut is noted");
        assert_eq!((cut.offset, cut.packets), (third as u64, 2));
        assert!(cut.error.contains("truncated packet record"), "{}", cut.error);
        let strict = read(&short, true);
        assert!(matches!(strict, Err(InputError::Trace(TraceError::Truncated { .. }))), "{strict:?}");
        // Compressed: the same packets, the same cut.
        assert_eq!(read(&gz_whole, false).unwrap(), (vec![80, 443, 53], None));
        let (ports, cut) = read(&gz_cut, false).unwrap();
        assert_eq!((ports, cut.map(|c| (c.offset, c.packets))), (vec![80, 443], Some((third as u64, 2))));
        let (ports, cut) = read(&gz_cut_stream, false).unwrap();
        assert!(ports.len() < 3 && cut.is_some(), "a cut gzip stream is a cut capture: {ports:?}");
        // The times alone stop at the cut too.
        let mut times = PacketSource::capture(&gz_cut, None, false).unwrap();
        assert_eq!(std::iter::from_fn(|| times.next_timestamp().unwrap()).count(), 2);
        assert!(times.cut().is_some());
        // Progress of a compressed capture: bytes read, total unknown.
        assert_eq!(times.progress().total, 0);
        for p in [&whole, &short, &gz_whole, &gz_cut, &gz_cut_stream] {
            let _ = std::fs::remove_file(p);
        }
    }

    /// Generated traffic yields exactly the configured packets, on the given port.
    #[test]
    fn generated_traffic_is_a_source_too() {
        let rules = builtin::rules();
        let traffic = crate::workload::TrafficConfig { packets: 1_000, ..builtin::TRAFFIC };
        let mut source = PacketSource::open(&Input::Generated { traffic, in_port: 3 }, &rules).unwrap();
        let mut last = 0;
        while let Some(p) = source.next_packet().unwrap() {
            assert!(p.ts_ns >= last && p.key.in_port() == 3 && p.malformed.is_none());
            last = p.ts_ns;
        }
        assert_eq!(source.packets(), 1_000);
        assert_eq!(source.progress(), Progress { done: 1_000, total: 1_000, bytes: false });
    }
}
