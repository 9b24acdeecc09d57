//! The `.hyf` trace: packets as columns, made for replaying millions of them.
//!
//! A capture holds frames, which every run parses again, and repeats each flow's headers in
//! every packet. A `.hyf` holds what runs use: per packet its time, its wire length and a
//! dense flow index (flows numbered in order of first appearance), and per flow its parsed
//! key, once. The rare per-packet facts — why a frame was malformed, the generated burst it
//! belongs to, a frame cut by the snapshot length — are notes beside the columns. Reading a
//! `.hyf` gives the packets reading its source gave (`hyflow convert` writes it through the
//! same [`crate::input::PacketSource`], [`crate::input::write_columnar`]), with the flow index as well.
//!
//! Layout, little-endian, every section 8-byte aligned so that a reader may map the file and
//! use the columns in place (`numpy.memmap` at these offsets, say):
//!
//! | section | contents |
//! |---|---|
//! | header, 64 bytes | `HYFTRACE`, version (u32), key words (u32), packets (u64), flows (u64), packets per chunk (u64), flows' offset (u64), notes' offset (u64), notes (u64) |
//! | chunks, from byte 64 | per chunk of up to 65,536 packets: times (u64 ns), wire lengths (u32), flow indices (u32) |
//! | flows | each flow's key: [`KEY_WORDS`] u64 words |
//! | notes | (packet index u64, kind u32, value u32), by packet index: kind 0 malformed (value: the reason, a [`Malformed`] in declaration order), 1 burst (value: its index in the generator's log), 2 cut by the snapshot length |
//!
//! Why not Arrow IPC or Parquet: Arrow IPC fits the access pattern (columns in record
//! batches, mappable), but its Rust crates are a large dependency tree for three numeric
//! columns and one fixed-width binary one; Parquet's encoded, compressed pages cannot be used
//! in place. The layout above is what Arrow's would be for these columns, without the schema.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::packet::field::KEY_WORDS;
use crate::packet::{FlowKey, Malformed};
use crate::prefetch::prefetch;

/// The first bytes of every `.hyf`.
pub const MAGIC: [u8; 8] = *b"HYFTRACE";
const VERSION: u32 = 1;
const HEADER_BYTES: u64 = 64;
/// Packets per chunk: the unit read at a time (1 MiB of columns).
const CHUNK_PACKETS: u64 = 65_536;
/// Bytes of a packet's columns.
const PACKET_BYTES: u64 = 16;
const KEY_BYTES: u64 = KEY_WORDS as u64 * 8;
const NOTE_BYTES: u64 = 16;

/// How many packets ahead the reader fetches a flow's key.
const KEY_PREFETCH_AHEAD: usize = 8;

const NOTE_MALFORMED: u32 = 0;
const NOTE_BURST: u32 = 1;
const NOTE_SNAPLEN_CUT: u32 = 2;

/// Whether the file at `path` is a `.hyf` (begins with [`MAGIC`]). A file that cannot be
/// opened is not, and its reader says why.
pub fn is_columnar(path: &Path) -> bool {
    let mut magic = [0u8; 8];
    // Regular files only: reading a pipe's first bytes would take them from its reader.
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
        && File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok()
        && magic == MAGIC
}

/// Why a `.hyf` cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ColumnarError {
    /// The file cannot be read or written.
    #[error("{file}: {reason}")]
    Io {
        /// The file.
        file: String,
        /// What the system said.
        reason: String,
    },
    /// The file is not a `.hyf` this version reads, or is damaged.
    #[error("{file}: not a valid .hyf trace: {reason}")]
    Invalid {
        /// The file.
        file: String,
        /// What is wrong.
        reason: String,
    },
}

fn io_error(path: &Path, what: &str, e: &std::io::Error) -> ColumnarError {
    ColumnarError::Io {
        file: path.display().to_string(),
        reason: format!("cannot {what}: {}", crate::os_reason(e)),
    }
}

/// One packet as a `.hyf` records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnarPacket {
    /// Its time, ns, as its source gave it.
    pub ts_ns: u64,
    /// Bytes on the wire.
    pub bytes: u32,
    /// Its flow: an index into the file's flows.
    pub flow: u32,
    /// Why its frame was malformed, if it was.
    pub malformed: Option<&'static str>,
    /// The generated burst it belongs to, if any.
    pub burst: Option<u32>,
    /// Whether the capture's snapshot length cut its frame.
    pub snaplen_cut: bool,
}

/// The code of a malformed reason in the notes: its [`Malformed`]'s position.
fn reason_code(reason: &str) -> Option<u32> {
    Malformed::ALL.iter().position(|m| m.name() == reason).map(|i| i as u32)
}

/// Writes a `.hyf`, a packet at a time: the columns go out a chunk at a time, the flows and
/// notes when it finishes.
pub struct ColumnarWriter {
    path: PathBuf,
    out: BufWriter<File>,
    index: hashbrown::HashMap<FlowKey, u32>,
    flows: Vec<FlowKey>,
    ts: Vec<u64>,
    bytes: Vec<u32>,
    flow: Vec<u32>,
    notes: Vec<(u64, u32, u32)>,
    packets: u64,
}

impl ColumnarWriter {
    /// Creates (or truncates) the file.
    pub fn create(path: &Path) -> Result<ColumnarWriter, ColumnarError> {
        let file = File::create(path).map_err(|e| io_error(path, "create", &e))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        // The header is written last, when the counts are known.
        out.write_all(&[0; HEADER_BYTES as usize]).map_err(|e| io_error(path, "write", &e))?;
        Ok(ColumnarWriter {
            path: path.to_path_buf(),
            out,
            index: hashbrown::HashMap::new(),
            flows: Vec::new(),
            ts: Vec::with_capacity(CHUNK_PACKETS as usize),
            bytes: Vec::with_capacity(CHUNK_PACKETS as usize),
            flow: Vec::with_capacity(CHUNK_PACKETS as usize),
            notes: Vec::new(),
            packets: 0,
        })
    }

    /// Adds a packet of `key`; returns its flow index.
    pub fn write(
        &mut self,
        ts_ns: u64,
        key: &FlowKey,
        bytes: u32,
        malformed: Option<&str>,
        burst: Option<u32>,
        snaplen_cut: bool,
    ) -> Result<u32, ColumnarError> {
        let flow = match self.index.get(key) {
            Some(&f) => f,
            None => {
                let f = u32::try_from(self.flows.len()).map_err(|_| ColumnarError::Invalid {
                    file: self.path.display().to_string(),
                    reason: "more than 2^32 flows".into(),
                })?;
                self.index.insert(*key, f);
                self.flows.push(*key);
                f
            }
        };
        if let Some(reason) = malformed {
            let code = reason_code(reason).ok_or_else(|| ColumnarError::Invalid {
                file: self.path.display().to_string(),
                reason: format!("unknown malformed reason {reason}"),
            })?;
            self.notes.push((self.packets, NOTE_MALFORMED, code));
        }
        if let Some(b) = burst {
            self.notes.push((self.packets, NOTE_BURST, b));
        }
        if snaplen_cut {
            self.notes.push((self.packets, NOTE_SNAPLEN_CUT, 0));
        }
        self.ts.push(ts_ns);
        self.bytes.push(bytes);
        self.flow.push(flow);
        self.packets += 1;
        if self.ts.len() as u64 == CHUNK_PACKETS {
            self.write_chunk()?;
        }
        Ok(flow)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), ColumnarError> {
        self.out.write_all(bytes).map_err(|e| io_error(&self.path, "write", &e))
    }

    fn write_chunk(&mut self) -> Result<(), ColumnarError> {
        let (ts, bytes, flow) =
            (std::mem::take(&mut self.ts), std::mem::take(&mut self.bytes), std::mem::take(&mut self.flow));
        for t in &ts {
            self.put(&t.to_le_bytes())?;
        }
        for b in &bytes {
            self.put(&b.to_le_bytes())?;
        }
        for f in &flow {
            self.put(&f.to_le_bytes())?;
        }
        (self.ts, self.bytes, self.flow) = (ts, bytes, flow);
        self.ts.clear();
        self.bytes.clear();
        self.flow.clear();
        Ok(())
    }

    /// Packets written so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Writes the last chunk, the flows, the notes and the header; returns (packets, flows).
    pub fn finish(mut self) -> Result<(u64, u64), ColumnarError> {
        if !self.ts.is_empty() {
            self.write_chunk()?;
        }
        let flows_at = HEADER_BYTES + self.packets * PACKET_BYTES;
        let flows = std::mem::take(&mut self.flows);
        for key in &flows {
            for w in key.words {
                self.put(&w.to_le_bytes())?;
            }
        }
        let notes_at = flows_at + flows.len() as u64 * KEY_BYTES;
        let notes = std::mem::take(&mut self.notes);
        for &(packet, kind, value) in &notes {
            self.put(&packet.to_le_bytes())?;
            self.put(&kind.to_le_bytes())?;
            self.put(&value.to_le_bytes())?;
        }
        let mut header = Vec::with_capacity(HEADER_BYTES as usize);
        header.extend_from_slice(&MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&(KEY_WORDS as u32).to_le_bytes());
        for v in [self.packets, flows.len() as u64, CHUNK_PACKETS, flows_at, notes_at, notes.len() as u64] {
            header.extend_from_slice(&v.to_le_bytes());
        }
        header.resize(HEADER_BYTES as usize, 0);
        let path = self.path.clone();
        let mut file = self.out.into_inner().map_err(|e| io_error(&path, "write", e.error()))?;
        file.seek(SeekFrom::Start(0)).map_err(|e| io_error(&path, "write", &e))?;
        file.write_all(&header).map_err(|e| io_error(&path, "write", &e))?;
        file.sync_data().map_err(|e| io_error(&path, "write", &e))?;
        Ok((self.packets, flows.len() as u64))
    }
}

/// Reads a `.hyf` a chunk at a time; the flows and notes are read when it opens.
pub struct ColumnarReader {
    path: PathBuf,
    file: File,
    flows: Vec<FlowKey>,
    /// (packet, kind, value), by packet.
    notes: Vec<(u64, u32, u32)>,
    next_note: usize,
    packets: u64,
    chunk_packets: u64,
    /// Packets read so far.
    read: u64,
    /// The current chunk's columns, and the next packet's place in them.
    ts: Vec<u64>,
    bytes: Vec<u32>,
    flow: Vec<u32>,
    at: usize,
    raw: Vec<u8>,
    /// Whether keys are fetched ahead: off for a caller that reads a flow's key only on its
    /// first packets (the fetches would be wasted, and they queue behind each other).
    fetch_keys_ahead: bool,
}

impl ColumnarReader {
    /// Opens a `.hyf`, checking its header, flows and notes.
    pub fn open(path: &Path) -> Result<ColumnarReader, ColumnarError> {
        let invalid = |reason: String| ColumnarError::Invalid { file: path.display().to_string(), reason };
        let mut file = File::open(path).map_err(|e| io_error(path, "read", &e))?;
        let size = file.metadata().map_err(|e| io_error(path, "read", &e))?.len();
        let mut header = [0u8; HEADER_BYTES as usize];
        file.read_exact(&mut header).map_err(|_| invalid("shorter than its 64-byte header".into()))?;
        if header[..8] != MAGIC {
            return Err(invalid("it does not begin with HYFTRACE".into()));
        }
        let u32_at = |i: usize| u32::from_le_bytes(header[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(header[i..i + 8].try_into().expect("8 bytes"));
        let (version, key_words) = (u32_at(8), u32_at(12));
        if version != VERSION {
            return Err(invalid(format!("version {version}; this hyflow reads version {VERSION}")));
        }
        if key_words as usize != KEY_WORDS {
            return Err(invalid(format!(
                "keys of {key_words} words; this hyflow's have {KEY_WORDS} (convert the capture again)"
            )));
        }
        let (packets, n_flows, chunk_packets, flows_at, notes_at, n_notes) =
            (u64_at(16), u64_at(24), u64_at(32), u64_at(40), u64_at(48), u64_at(56));
        let expect = |what: &str, at: u64, want: Option<u64>| match want {
            Some(w) if w == at => Ok(()),
            _ => Err(invalid(format!("{what} not where the header says"))),
        };
        expect(
            "the flows are",
            flows_at,
            packets.checked_mul(PACKET_BYTES).and_then(|b| b.checked_add(HEADER_BYTES)),
        )?;
        expect(
            "the notes are",
            notes_at,
            n_flows.checked_mul(KEY_BYTES).and_then(|b| b.checked_add(flows_at)),
        )?;
        expect(
            "the file's end is",
            size,
            n_notes.checked_mul(NOTE_BYTES).and_then(|b| b.checked_add(notes_at)),
        )?;
        if chunk_packets == 0 || chunk_packets > 1 << 24 {
            return Err(invalid(format!("{chunk_packets} packets per chunk")));
        }
        if n_flows > u64::from(u32::MAX) + 1 {
            return Err(invalid(format!("{n_flows} flows")));
        }
        let read_err = |e: std::io::Error| io_error(path, "read", &e);
        file.seek(SeekFrom::Start(flows_at)).map_err(read_err)?;
        let mut raw = vec![0u8; (n_flows * KEY_BYTES) as usize];
        file.read_exact(&mut raw).map_err(read_err)?;
        let flows = raw
            .chunks_exact(KEY_BYTES as usize)
            .map(|k| {
                let mut key = FlowKey::default();
                for (w, b) in key.words.iter_mut().zip(k.chunks_exact(8)) {
                    *w = u64::from_le_bytes(b.try_into().expect("8 bytes"));
                }
                key
            })
            .collect();
        raw = vec![0u8; (n_notes * NOTE_BYTES) as usize];
        file.read_exact(&mut raw).map_err(read_err)?;
        let mut notes = Vec::with_capacity(n_notes as usize);
        for n in raw.chunks_exact(NOTE_BYTES as usize) {
            let packet = u64::from_le_bytes(n[..8].try_into().expect("8 bytes"));
            let kind = u32::from_le_bytes(n[8..12].try_into().expect("4 bytes"));
            let value = u32::from_le_bytes(n[12..].try_into().expect("4 bytes"));
            let ordered = notes.last().is_none_or(|&(p, _, _)| p <= packet);
            let known = match kind {
                NOTE_MALFORMED => (value as usize) < Malformed::ALL.len(),
                NOTE_BURST | NOTE_SNAPLEN_CUT => true,
                _ => false,
            };
            if packet >= packets || !ordered || !known {
                return Err(invalid(format!(
                    "note {} (packet {packet}, kind {kind}) is damaged",
                    notes.len()
                )));
            }
            notes.push((packet, kind, value));
        }
        file.seek(SeekFrom::Start(HEADER_BYTES)).map_err(read_err)?;
        Ok(ColumnarReader {
            path: path.to_path_buf(),
            file,
            flows,
            notes,
            next_note: 0,
            packets,
            chunk_packets,
            read: 0,
            ts: Vec::new(),
            bytes: Vec::new(),
            flow: Vec::new(),
            at: 0,
            raw,
            fetch_keys_ahead: true,
        })
    }

    /// Every flow's key, by flow index.
    pub fn flows(&self) -> &[FlowKey] {
        &self.flows
    }

    /// Stops fetching the keys of packets a few ahead: for a caller that reads a flow's key
    /// only on its first packets.
    pub fn without_keys_ahead(&mut self) {
        self.fetch_keys_ahead = false;
    }

    /// The flow of the packet eight after the next one (as far ahead as keys are fetched),
    /// if it is in the chunk read: for a caller to fetch its own state for that flow ahead.
    pub fn flow_ahead(&self) -> Option<u32> {
        self.flow.get(self.at + KEY_PREFETCH_AHEAD).copied()
    }

    /// Packets in the file.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Packets read so far.
    pub fn read(&self) -> u64 {
        self.read
    }

    /// Reads the next chunk's columns.
    fn load_chunk(&mut self) -> Result<(), ColumnarError> {
        let n = (self.packets - self.read).min(self.chunk_packets) as usize;
        self.raw.resize(n * PACKET_BYTES as usize, 0);
        self.file.read_exact(&mut self.raw).map_err(|e| io_error(&self.path, "read", &e))?;
        let (ts, rest) = self.raw.split_at(n * 8);
        let (bytes, flow) = rest.split_at(n * 4);
        self.ts.clear();
        self.ts.extend(ts.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))));
        self.bytes.clear();
        self.bytes.extend(bytes.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))));
        self.flow.clear();
        self.flow.extend(flow.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))));
        if let Some(i) = self.flow.iter().position(|&f| f as usize >= self.flows.len()) {
            return Err(ColumnarError::Invalid {
                file: self.path.display().to_string(),
                reason: format!(
                    "packet {} has flow {}, of {} flows",
                    self.read + i as u64,
                    self.flow[i],
                    self.flows.len()
                ),
            });
        }
        self.at = 0;
        Ok(())
    }

    /// The next packet, or `None` at the end.
    pub fn next_packet(&mut self) -> Result<Option<ColumnarPacket>, ColumnarError> {
        if self.read == self.packets {
            return Ok(None);
        }
        if self.at == self.ts.len() {
            self.load_chunk()?;
        }
        let i = self.at;
        let mut p = ColumnarPacket {
            ts_ns: self.ts[i],
            bytes: self.bytes[i],
            flow: self.flow[i],
            malformed: None,
            burst: None,
            snaplen_cut: false,
        };
        while let Some(&(packet, kind, value)) = self.notes.get(self.next_note).filter(|n| n.0 == self.read) {
            debug_assert_eq!(packet, self.read);
            match kind {
                NOTE_MALFORMED => p.malformed = Some(Malformed::ALL[value as usize].name()),
                NOTE_BURST => p.burst = Some(value),
                _ => p.snaplen_cut = true,
            }
            self.next_note += 1;
        }
        // Flows are read by index, in no order the CPU can guess: the key a few packets on is
        // fetched now, so that it is in the cache when its packet comes.
        if let Some(&ahead) = self.flow.get(i + KEY_PREFETCH_AHEAD).filter(|_| self.fetch_keys_ahead) {
            prefetch(&self.flows[ahead as usize], std::mem::size_of::<FlowKey>());
        }
        self.at += 1;
        self.read += 1;
        Ok(Some(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::field::id;

    fn temp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("hyflow-columnar-{}-{name}.hyf", std::process::id()))
    }

    fn key(n: u32) -> FlowKey {
        let mut k = FlowKey::default();
        k.set(id::IN_PORT, 1);
        k.set(id::NW_SRC, u128::from(n));
        k
    }

    #[test]
    fn packets_read_back_as_written_across_chunks() {
        let path = temp("roundtrip");
        let mut w = ColumnarWriter::create(&path).unwrap();
        let n = CHUNK_PACKETS + 7;
        for i in 0..n {
            let malformed = (i % 1000 == 3).then_some("truncated_l4");
            let burst = (i % 777 == 5).then_some(i as u32 / 777);
            let f =
                w.write(i * 10, &key(i as u32 % 5), 60 + i as u32 % 3, malformed, burst, i == n - 1).unwrap();
            assert_eq!(f, i as u32 % 5, "flows numbered by first appearance");
        }
        assert_eq!(w.finish().unwrap(), (n, 5));
        assert!(is_columnar(&path));
        let mut r = ColumnarReader::open(&path).unwrap();
        assert_eq!(r.flows().len(), 5);
        assert_eq!(r.flows()[3], key(3));
        for i in 0..n {
            let p = r.next_packet().unwrap().unwrap();
            let want = ColumnarPacket {
                ts_ns: i * 10,
                bytes: 60 + i as u32 % 3,
                flow: i as u32 % 5,
                malformed: (i % 1000 == 3).then_some("truncated_l4"),
                burst: (i % 777 == 5).then_some(i as u32 / 777),
                snaplen_cut: i == n - 1,
            };
            assert_eq!(p, want, "packet {i}");
        }
        assert_eq!(r.next_packet().unwrap(), None);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn damaged_files_are_refused_with_a_reason() {
        let path = temp("damaged");
        let mut w = ColumnarWriter::create(&path).unwrap();
        for i in 0..10 {
            w.write(i, &key(i as u32), 64, None, None, false).unwrap();
        }
        w.finish().unwrap();
        let good = std::fs::read(&path).unwrap();
        let refused = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            ColumnarReader::open(&path).err().map(|e| e.to_string()).unwrap_or_default()
        };
        assert!(refused(&good[..good.len() - 1]).contains("not where the header says"));
        assert!(refused(&good[..30]).contains("64-byte header"));
        let mut v2 = good.clone();
        v2[8] = 2;
        assert!(refused(&v2).contains("version 2"));
        // A flow index past the flows.
        let mut bad_flow = good.clone();
        bad_flow[64 + 10 * 12] = 200;
        std::fs::write(&path, &bad_flow).unwrap();
        let mut r = ColumnarReader::open(&path).unwrap();
        let e = r.next_packet().unwrap_err().to_string();
        assert!(e.contains("packet 0 has flow 200, of 10 flows"), "{e}");
        assert!(!is_columnar(Path::new("/nonexistent.hyf")));
        let _ = std::fs::remove_file(&path);
    }
}
