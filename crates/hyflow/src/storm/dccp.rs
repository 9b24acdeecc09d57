//! FlexStorm's wire format (FlexNIC §4): one tuple per DCCP-Data packet over IPv4 (DCCP with
//! 48-bit sequence numbers, RFC 4340), and the cumulative acknowledgement a receiver answers
//! each with (Figure 7: ports swapped, type ACK, the tuple's sequence number as the
//! acknowledgement, the DCCP checksum, an IP reply).
//!
//! A tuple's payload is FlexStorm's header — the destination worker (2 bytes) and the data's
//! length (2 bytes) — then the data (a tweet's user name, for the top-n topology).

use crate::packet::checksum::{fold, ones_sum};

/// IP protocol number of DCCP.
pub const IP_DCCP: u8 = 33;
/// DCCP's generic header with extended sequence numbers.
pub const DATA_HEADER: usize = 16;
/// A DCCP-Ack: the generic header and the acknowledgement subheader.
pub const ACK_HEADER: usize = 24;
/// FlexStorm's tuple header: worker and length.
pub const TUPLE_HEADER: usize = 4;
/// DCCP packet types.
pub mod packet_type {
    /// DCCP-Data.
    pub const DATA: u8 = 2;
    /// DCCP-Ack.
    pub const ACK: u8 = 3;
    /// DCCP-DataAck.
    pub const DATA_ACK: u8 = 4;
}

/// A tuple packet's DCCP fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TuplePacket<'a> {
    /// Source and destination ports.
    pub ports: (u16, u16),
    /// DCCP type (Data or DataAck).
    pub packet_type: u8,
    /// Its 48-bit sequence number.
    pub seq: u64,
    /// The worker it is for.
    pub worker: u16,
    /// The tuple's data.
    pub data: &'a [u8],
}

/// Why a DCCP segment is not a tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotATuple {
    /// Shorter than its headers.
    Truncated,
    /// Short sequence numbers (X = 0), which FlexStorm does not use.
    ShortSequence,
    /// Not Data or DataAck.
    NotData,
    /// A data length beyond the segment.
    BadLength,
}

impl NotATuple {
    /// Every reason, in report order.
    pub const ALL: [NotATuple; 4] =
        [NotATuple::Truncated, NotATuple::ShortSequence, NotATuple::NotData, NotATuple::BadLength];
}

fn seq48(b: &[u8]) -> u64 {
    b.iter().take(6).fold(0, |s, &x| s << 8 | x as u64)
}

/// Reads a DCCP segment (from its header to the IP packet's end) as a tuple.
pub fn parse(segment: &[u8]) -> Result<TuplePacket<'_>, NotATuple> {
    if segment.len() < DATA_HEADER {
        return Err(NotATuple::Truncated);
    }
    let offset = segment[4] as usize * 4;
    let packet_type = (segment[8] >> 1) & 0x0f;
    if segment[8] & 1 == 0 {
        return Err(NotATuple::ShortSequence);
    }
    if packet_type != packet_type::DATA && packet_type != packet_type::DATA_ACK {
        return Err(NotATuple::NotData);
    }
    if offset < DATA_HEADER || segment.len() < offset + TUPLE_HEADER {
        return Err(NotATuple::Truncated);
    }
    let payload = &segment[offset..];
    let worker = u16::from_be_bytes([payload[0], payload[1]]);
    let len = u16::from_be_bytes([payload[2], payload[3]]) as usize;
    let data = payload.get(TUPLE_HEADER..TUPLE_HEADER + len).ok_or(NotATuple::BadLength)?;
    Ok(TuplePacket {
        ports: (u16::from_be_bytes([segment[0], segment[1]]), u16::from_be_bytes([segment[2], segment[3]])),
        packet_type,
        seq: seq48(&segment[10..16]),
        worker,
        data,
    })
}

/// DCCP's checksum of `segment` (checksum field zero or not: it is skipped) between IPv4
/// addresses `src` and `dst`, covering the whole segment (CsCov = 0).
pub fn checksum(src: [u8; 4], dst: [u8; 4], segment: &[u8]) -> u16 {
    let mut sum = ones_sum(0, &src);
    sum = ones_sum(sum, &dst);
    sum += IP_DCCP as u32 + segment.len() as u32;
    sum = ones_sum(sum, &segment[..6]);
    sum = ones_sum(sum, &segment[8..]);
    fold(sum)
}

/// Writes a DCCP-Data segment carrying `data` for `worker` into `out` (appended).
pub fn write_data(
    out: &mut Vec<u8>,
    (src, dst): ([u8; 4], [u8; 4]),
    ports: (u16, u16),
    seq: u64,
    worker: u16,
    data: &[u8],
) {
    let start = out.len();
    out.extend_from_slice(&ports.0.to_be_bytes());
    out.extend_from_slice(&ports.1.to_be_bytes());
    out.push((DATA_HEADER / 4) as u8);
    out.push(0);
    out.extend_from_slice(&[0, 0]);
    out.push(packet_type::DATA << 1 | 1);
    out.push(0);
    out.extend_from_slice(&seq.to_be_bytes()[2..]);
    out.extend_from_slice(&worker.to_be_bytes());
    out.extend_from_slice(&(data.len() as u16).to_be_bytes());
    out.extend_from_slice(data);
    let c = checksum(src, dst, &out[start..]);
    out[start + 6..start + 8].copy_from_slice(&c.to_be_bytes());
}

/// Writes the acknowledgement of `tuple` (received from `src` at `dst`) into `out`
/// (appended): Figure 7's — ports swapped, type ACK, the tuple's sequence number as the
/// acknowledgement number (and as its own, as the NIC's template leaves it), the checksum for
/// the reply's addresses (`dst` to `src`).
pub fn write_ack(out: &mut Vec<u8>, (src, dst): ([u8; 4], [u8; 4]), tuple: &TuplePacket<'_>) {
    let start = out.len();
    out.extend_from_slice(&tuple.ports.1.to_be_bytes());
    out.extend_from_slice(&tuple.ports.0.to_be_bytes());
    out.push((ACK_HEADER / 4) as u8);
    out.push(0);
    out.extend_from_slice(&[0, 0]);
    out.push(packet_type::ACK << 1 | 1);
    out.push(0);
    out.extend_from_slice(&tuple.seq.to_be_bytes()[2..]);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&tuple.seq.to_be_bytes()[2..]);
    let c = checksum(dst, src, &out[start..]);
    out[start + 6..start + 8].copy_from_slice(&c.to_be_bytes());
}

/// An acknowledgement read back: ports, its acknowledgement number, whether its checksum
/// holds for `src` → `dst` (tests and the load generator check the NIC's).
pub fn parse_ack(src: [u8; 4], dst: [u8; 4], segment: &[u8]) -> Option<((u16, u16), u64, bool)> {
    if segment.len() < ACK_HEADER || (segment[8] >> 1) & 0x0f != packet_type::ACK || segment[8] & 1 == 0 {
        return None;
    }
    if segment[4] as usize * 4 != ACK_HEADER {
        return None;
    }
    let valid = checksum(src, dst, segment) == u16::from_be_bytes([segment[6], segment[7]]);
    Some((
        (u16::from_be_bytes([segment[0], segment[1]]), u16::from_be_bytes([segment[2], segment[3]])),
        seq48(&segment[18..24]),
        valid,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 4] = [10, 0, 0, 1];
    const B: [u8; 4] = [10, 0, 0, 2];

    #[test]
    fn a_tuple_and_its_ack_round_trip() {
        let mut seg = Vec::new();
        write_data(&mut seg, (A, B), (4000, 5001), 0x0102_0304_0506, 3, b"alice");
        let t = parse(&seg).unwrap();
        assert_eq!(
            (t.ports, t.seq, t.worker, t.data),
            ((4000, 5001), 0x0102_0304_0506, 3, b"alice".as_slice())
        );
        assert_eq!(checksum(A, B, &seg), u16::from_be_bytes([seg[6], seg[7]]));
        let mut ack = Vec::new();
        write_ack(&mut ack, (A, B), &t);
        assert_eq!(ack.len(), ACK_HEADER);
        assert_eq!(parse_ack(B, A, &ack), Some(((5001, 4000), 0x0102_0304_0506, true)));
        // Other addresses fail the checksum (swapped ones cannot: the sum commutes).
        assert_eq!(parse_ack(B, [10, 0, 0, 3], &ack).map(|a| a.2), Some(false));
        let mut bad = ack.clone();
        bad[20] ^= 1;
        assert_eq!(parse_ack(B, A, &bad).map(|a| a.2), Some(false));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 3000, ..Default::default() })]

        /// Random bytes, and tuples cut or bit-flipped anywhere, never panic; a segment that
        /// parses yields data inside it.
        #[test]
        fn arbitrary_segments_never_panic(
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120),
            cut in 0usize..60,
            flip in (0usize..60, 0u8..8),
        ) {
            let _ = parse(&junk);
            let _ = parse_ack(A, B, &junk);
            let mut seg = Vec::new();
            write_data(&mut seg, (A, B), (1, 2), 77, 1, b"someone");
            let _ = parse(&seg[..cut.min(seg.len())]);
            let i = flip.0 % seg.len();
            seg[i] ^= 1 << flip.1;
            if let Ok(t) = parse(&seg) {
                proptest::prop_assert!(t.data.len() <= seg.len());
            }
        }
    }

    #[test]
    fn bad_segments_are_named() {
        let mut seg = Vec::new();
        write_data(&mut seg, (A, B), (1, 2), 1, 0, b"x");
        assert_eq!(parse(&seg[..10]), Err(NotATuple::Truncated));
        let mut short = seg.clone();
        short[8] &= !1;
        assert_eq!(parse(&short), Err(NotATuple::ShortSequence));
        let mut ack = seg.clone();
        ack[8] = packet_type::ACK << 1 | 1;
        assert_eq!(parse(&ack), Err(NotATuple::NotData));
        let mut long = seg;
        long[18..20].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(parse(&long), Err(NotATuple::BadLength));
    }
}
