//! Classic pcap writer.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use pcap_file::pcap::PcapHeader;
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};

use super::error::TraceError;
use super::{LinkType, MAX_PACKET_LEN};

/// Size of the file header written by [`PcapWriter`].
const FILE_HEADER_LEN: u64 = 24;
/// Size of a pcap record header.
const RECORD_HEADER_LEN: usize = 16;

/// Writes packets to a classic (libpcap) capture file.
///
/// Classic pcap is chosen over pcapng because every tool reads it and the simulator's output
/// has a single link type and interface per file. The file is little-endian (the byte order
/// of every machine we run on, so no byte swapping) and uses nanosecond timestamps by default
/// so that simulated timing is not rounded; microsecond files can be requested for old tools.
/// The snapshot length is [`MAX_PACKET_LEN`].
///
/// Output is buffered: call [`finish`](Self::finish) (or [`flush`](Self::flush)) to see write
/// errors; dropping the writer flushes but silently ignores failures.
#[derive(Debug)]
pub struct PcapWriter<W: Write = BufWriter<File>> {
    out: W,
    name: String,
    nanos: bool,
    offset: u64,
    packets: u64,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (or truncates) `path` and writes the pcap file header.
    ///
    /// `nanos` selects the nanosecond magic (`0xa1b23c4d`); otherwise timestamps are stored in
    /// microseconds and their sub-microsecond part is dropped.
    pub fn create(path: &Path, link: LinkType, nanos: bool) -> Result<Self, TraceError> {
        let name = path.display().to_string();
        let file = File::create(path).map_err(|cause| TraceError::Open { file: name.clone(), cause })?;
        Self::new(BufWriter::with_capacity(256 * 1024, file), name, link, nanos)
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the pcap file header to any writer (a socket, a `Vec<u8>` in tests);
    /// `name` is only used in error messages.
    pub fn new(mut out: W, name: String, link: LinkType, nanos: bool) -> Result<Self, TraceError> {
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: MAX_PACKET_LEN,
            datalink: DataLink::from(link.to_linktype()),
            ts_resolution: if nanos { TsResolution::NanoSecond } else { TsResolution::MicroSecond },
            endianness: Endianness::Little,
        };
        header.write_to(&mut out).map_err(|e| TraceError::Io {
            file: name.clone(),
            offset: 0,
            cause: pcap_to_io(e),
        })?;
        Ok(PcapWriter { out, name, nanos, offset: FILE_HEADER_LEN, packets: 0 })
    }

    /// Appends one packet captured at `ts_ns` nanoseconds since the Unix epoch.
    ///
    /// The original length is recorded as `data.len()`. Fails without writing anything if the
    /// packet is longer than the snapshot length or the timestamp does not fit pcap's 32-bit
    /// seconds field (after 2106-02-07).
    pub fn write_packet(&mut self, ts_ns: u64, data: &[u8]) -> Result<(), TraceError> {
        self.write_cut_packet(ts_ns, data, data.len() as u32)
    }

    /// Appends the first bytes of a packet of `wire_len` bytes (`data`, at most all of them),
    /// as `tcpdump -s` writes a packet longer than its snapshot length: readers take its
    /// length from the record.
    pub fn write_cut_packet(&mut self, ts_ns: u64, data: &[u8], wire_len: u32) -> Result<(), TraceError> {
        let secs = ts_ns / 1_000_000_000;
        let secs = u32::try_from(secs).map_err(|_| {
            self.unwritable(format!("timestamp {ts_ns} ns is beyond the 32-bit seconds field of pcap"))
        })?;
        let mut frac = (ts_ns % 1_000_000_000) as u32;
        if !self.nanos {
            frac /= 1000;
        }
        let len = match u32::try_from(data.len()) {
            Ok(len) if len <= MAX_PACKET_LEN => len,
            _ => {
                return Err(self.unwritable(format!(
                    "packet of {} bytes exceeds the snapshot length {MAX_PACKET_LEN}",
                    data.len()
                )))
            }
        };

        let mut header = [0u8; RECORD_HEADER_LEN];
        header[0..4].copy_from_slice(&secs.to_le_bytes());
        header[4..8].copy_from_slice(&frac.to_le_bytes());
        header[8..12].copy_from_slice(&len.to_le_bytes());
        header[12..16].copy_from_slice(&wire_len.max(len).to_le_bytes());

        let result = self.out.write_all(&header).and_then(|()| self.out.write_all(data));
        result.map_err(|cause| TraceError::Io { file: self.name.clone(), offset: self.offset, cause })?;
        self.offset += (RECORD_HEADER_LEN + data.len()) as u64;
        self.packets += 1;
        Ok(())
    }

    #[cfg(test)]
    /// Number of packets written so far.
    pub(crate) fn packets_written(&self) -> u64 {
        self.packets
    }

    #[cfg(test)]
    /// Number of bytes written so far, file header included.
    pub(crate) fn bytes_written(&self) -> u64 {
        self.offset
    }

    /// Pushes buffered data to the underlying writer, so that a reader (or a crash) sees
    /// every packet written so far.
    pub fn flush(&mut self) -> Result<(), TraceError> {
        self.out.flush().map_err(|cause| TraceError::Io {
            file: self.name.clone(),
            offset: self.offset,
            cause,
        })
    }

    /// Flushes and returns the underlying writer; the way to end a trace and see any error.
    pub fn finish(mut self) -> Result<W, TraceError> {
        self.flush()?;
        Ok(self.out)
    }

    fn unwritable(&self, reason: String) -> TraceError {
        TraceError::Unwritable { file: self.name.clone(), offset: self.offset, reason }
    }
}

/// pcap-file wraps I/O errors in its own type; unwrap them so callers see the OS error.
fn pcap_to_io(e: PcapError) -> io::Error {
    match e {
        PcapError::IoError(e) => e,
        other => io::Error::other(other.to_string()),
    }
}

/// Writes Ethernet packets arriving on several switch ports as pcapng, one interface per
/// port: interface `i` is port `i + 1`, as hyflow reads pcapng back (`replay --trace`), with
/// nanosecond timestamps (`if_tsresol` 9).
pub struct PortsPcapngWriter {
    out: pcap_file::pcapng::PcapNgWriter<BufWriter<File>>,
    name: String,
    /// Bytes written so far (where a failed write was).
    offset: u64,
}

impl PortsPcapngWriter {
    /// Creates (or truncates) `path` with interfaces for ports `1..=ports`.
    pub fn create(path: &Path, ports: u32) -> Result<Self, TraceError> {
        use pcap_file::pcapng::blocks::interface_description::{
            InterfaceDescriptionBlock, InterfaceDescriptionOption,
        };
        let name = path.display().to_string();
        let file = File::create(path).map_err(|cause| TraceError::Open { file: name.clone(), cause })?;
        let fail = |e: PcapError, offset: u64| TraceError::Io {
            file: name.clone(),
            offset,
            cause: io::Error::other(e.to_string()),
        };
        let mut out = pcap_file::pcapng::PcapNgWriter::new(BufWriter::with_capacity(256 * 1024, file))
            .map_err(|e| fail(e, 0))?;
        // The section header PcapNgWriter::new writes has no options: 28 bytes.
        let mut offset = 28;
        for port in 1..=ports.max(1) {
            let idb = InterfaceDescriptionBlock {
                linktype: DataLink::ETHERNET,
                snaplen: MAX_PACKET_LEN,
                options: vec![
                    InterfaceDescriptionOption::IfName(format!("port{port}").into()),
                    InterfaceDescriptionOption::IfTsResol(9),
                ],
            };
            offset += out.write_pcapng_block(idb).map_err(|e| fail(e, offset))? as u64;
        }
        Ok(PortsPcapngWriter { out, name, offset })
    }

    /// Writes one frame arriving on `port` at `ts_ns`.
    pub fn write_packet(&mut self, ts_ns: u64, port: u32, data: &[u8]) -> Result<(), TraceError> {
        use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
        let epb = EnhancedPacketBlock {
            interface_id: port.saturating_sub(1),
            timestamp: std::time::Duration::from_nanos(ts_ns),
            original_len: data.len() as u32,
            data: std::borrow::Cow::Borrowed(data),
            options: Vec::new(),
        };
        let n = self.out.write_pcapng_block(epb).map_err(|e| TraceError::Io {
            file: self.name.clone(),
            offset: self.offset,
            cause: io::Error::other(e.to_string()),
        })?;
        self.offset += n as u64;
        Ok(())
    }

    /// Flushes; reports a failure to write.
    pub fn finish(self) -> Result<(), TraceError> {
        let (name, offset) = (self.name, self.offset);
        self.out.into_inner().flush().map_err(|cause| TraceError::Io { file: name, offset, cause })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{TraceFormat, TraceReader};
    use super::*;

    fn read_all(bytes: Vec<u8>) -> Vec<(u64, u32, LinkType, Vec<u8>)> {
        let mut r = TraceReader::new(io::Cursor::new(bytes), "mem".into()).unwrap();
        assert_eq!(r.format(), TraceFormat::Pcap);
        let mut out = Vec::new();
        while let Some(p) = r.next_packet().unwrap() {
            out.push((p.ts_ns, p.orig_len, p.link, p.data.to_vec()));
        }
        out
    }

    fn sample_packets(n: usize, micro: bool) -> Vec<(u64, Vec<u8>)> {
        (0..n)
            .map(|i| {
                let mut ts = 1_700_000_000_123_456_789u64 + i as u64 * 1_234_567;
                if micro {
                    ts -= ts % 1000;
                }
                let data = (0..(i * 37 % 1500)).map(|b| (b * 7 + i) as u8).collect();
                (ts, data)
            })
            .collect()
    }

    #[test]
    fn header_layout_is_little_endian() {
        let w = PcapWriter::new(Vec::new(), "mem".into(), LinkType::Ethernet, true).unwrap();
        let bytes = w.finish().unwrap();
        assert_eq!(bytes.len(), 24);
        assert_eq!(&bytes[0..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(&bytes[4..8], &[2, 0, 4, 0]);
        assert_eq!(u32::from_le_bytes(bytes[16..20].try_into().unwrap()), MAX_PACKET_LEN);
        assert_eq!(u32::from_le_bytes(bytes[20..24].try_into().unwrap()), 1);

        let w = PcapWriter::new(Vec::new(), "mem".into(), LinkType::RawIp, false).unwrap();
        let bytes = w.finish().unwrap();
        assert_eq!(&bytes[0..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(u32::from_le_bytes(bytes[20..24].try_into().unwrap()), 101);
    }

    #[test]
    fn round_trip_nanoseconds() {
        let packets = sample_packets(200, false);
        let mut w = PcapWriter::new(Vec::new(), "mem".into(), LinkType::Ethernet, true).unwrap();
        for (ts, data) in &packets {
            w.write_packet(*ts, data).unwrap();
        }
        assert_eq!(w.packets_written(), 200);
        let expected_len = w.bytes_written();
        let bytes = w.finish().unwrap();
        assert_eq!(bytes.len() as u64, expected_len);
        let got = read_all(bytes);
        assert_eq!(got.len(), packets.len());
        for ((ts, orig, link, data), (ets, edata)) in got.iter().zip(&packets) {
            assert_eq!(ts, ets);
            assert_eq!(data, edata);
            assert_eq!(*orig as usize, edata.len());
            assert_eq!(*link, LinkType::Ethernet);
        }
    }

    #[test]
    fn round_trip_microseconds() {
        let packets = sample_packets(100, true);
        let mut w = PcapWriter::new(Vec::new(), "mem".into(), LinkType::RawIp, false).unwrap();
        for (ts, data) in &packets {
            w.write_packet(*ts, data).unwrap();
        }
        let got = read_all(w.finish().unwrap());
        let expected: Vec<_> =
            packets.iter().map(|(ts, d)| (*ts, d.len() as u32, LinkType::RawIp, d.clone())).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn microseconds_drop_sub_microsecond_part() {
        let mut w = PcapWriter::new(Vec::new(), "mem".into(), LinkType::Ethernet, false).unwrap();
        w.write_packet(5_000_001_999, b"abc").unwrap();
        let got = read_all(w.finish().unwrap());
        assert_eq!(got[0].0, 5_000_001_000);
    }

    #[test]
    fn round_trip_through_a_file() {
        let path = std::env::temp_dir().join(format!("tracework-rt-{}.pcap", std::process::id()));
        let packets = sample_packets(50, false);
        let mut w = PcapWriter::create(&path, LinkType::Ethernet, true).unwrap();
        for (ts, data) in &packets {
            w.write_packet(*ts, data).unwrap();
        }
        w.finish().unwrap();

        let mut r = TraceReader::open(&path).unwrap();
        let mut n = 0;
        while let Some(p) = r.next_packet().unwrap() {
            assert_eq!((p.ts_ns, p.data), (packets[n].0, &packets[n].1[..]));
            assert_eq!(p.interface, 0);
            n += 1;
        }
        assert_eq!(n, packets.len());
        assert_eq!(r.packets_read(), packets.len() as u64);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn refuses_unrepresentable_packets() {
        let mut w = PcapWriter::new(Vec::new(), "out.pcap".into(), LinkType::Ethernet, true).unwrap();
        w.write_packet(1, b"ok").unwrap();
        let e = w.write_packet((u32::MAX as u64 + 1) * 1_000_000_000, b"x").unwrap_err();
        assert!(matches!(e, TraceError::Unwritable { offset: 42, .. }), "{e}");
        assert!(e.to_string().starts_with("out.pcap: byte 42: cannot write packet: "));
        let big = vec![0u8; MAX_PACKET_LEN as usize + 1];
        assert!(matches!(w.write_packet(1, &big), Err(TraceError::Unwritable { .. })));
        // Nothing was written for the refused packets.
        assert_eq!(w.packets_written(), 1);
        assert_eq!(w.finish().unwrap().len(), 42);
    }

    #[test]
    fn create_in_missing_directory_names_the_path() {
        let path = Path::new("/nonexistent-tracework-dir/out.pcap");
        let e = PcapWriter::create(path, LinkType::Ethernet, true).unwrap_err();
        assert!(matches!(e, TraceError::Open { .. }));
        assert!(e.to_string().starts_with("/nonexistent-tracework-dir/out.pcap: cannot open"));
    }

    #[test]
    fn pcapng_interfaces_are_ports() {
        let path = std::env::temp_dir().join(format!("hyflow-ports-{}.pcapng", std::process::id()));
        let mut w = PortsPcapngWriter::create(&path, 3).unwrap();
        w.write_packet(1_500, 3, &[0u8; 60]).unwrap();
        w.write_packet(2_000_000_007, 1, &[1u8; 64]).unwrap();
        w.finish().unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let mut r = super::super::TraceReader::new(std::io::BufReader::new(file), "p".into()).unwrap();
        let mut got = Vec::new();
        while let Some(p) = r.next_packet().unwrap() {
            got.push((p.ts_ns, p.interface, p.data.len()));
        }
        std::fs::remove_file(&path).ok();
        assert_eq!(got, vec![(1_500, 2, 60), (2_000_000_007, 0, 64)]);
    }
}
