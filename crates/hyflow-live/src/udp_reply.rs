//! The UDP/IPv4 frames of a datagram server on a raw port (`hyflow kvs`, `hyflow storm`): a
//! request frame read back to its addresses and payload, and a reply frame written to the
//! sender in place, with the IPv4 and UDP checksums a kernel's stack would compute (or any
//! IPv4 packet around a transport segment the caller built, as `storm`'s acknowledgements).

use serde::Serialize;

use hyflow::packet::checksum::{fold, ones_sum};
use hyflow::packet::reassembly::{Fragment, FragmentKey};

/// Bytes of the Ethernet, IPv4 (no options) and UDP headers of a reply.
pub const REPLY_HEADERS: usize = 14 + 20 + 8;

/// A UDP datagram over IPv4 in an Ethernet frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Udp4<'a> {
    /// Who sent it, to which address: what a reply needs.
    pub peer: Peer,
    /// The datagram's payload.
    pub payload: &'a [u8],
}

/// A datagram's sender and the address it was sent to, owned: a reply written over the
/// request's own buffer needs them after the request is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The sender's MAC address.
    pub src_mac: [u8; 6],
    /// The sender's IPv4 address (network order bytes).
    pub src_ip: [u8; 4],
    /// The address it was sent to.
    pub dst_ip: [u8; 4],
    /// The sender's port.
    pub src_port: u16,
    /// The port it was sent to.
    pub dst_port: u16,
}

/// Why a frame the XDP program handed over is not a datagram the server answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameDrop {
    /// Shorter than its headers say.
    Truncated,
    /// Not IPv4 over Ethernet (the program takes nothing else: a frame here is a bug).
    NotIpv4,
    /// Not UDP.
    NotUdp,
    /// A UDP length that disagrees with the IP packet's.
    BadLength,
    /// A datagram put together from fragments that is for another port (the XDP program takes
    /// every UDP fragment to the address: only the first names the port).
    OtherPort,
}

impl FrameDrop {
    /// Every reason, in report order.
    pub const ALL: [FrameDrop; 5] = [
        FrameDrop::Truncated,
        FrameDrop::NotIpv4,
        FrameDrop::NotUdp,
        FrameDrop::BadLength,
        FrameDrop::OtherPort,
    ];

    /// Its place in [`FrameDrop::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A frame a datagram server takes: a whole UDP datagram, or a fragment of one (to put
/// together with [`hyflow::packet::reassembly`], then read with [`udp_of`]).
#[derive(Clone, Copy, Debug)]
pub enum Received<'a> {
    /// A whole datagram.
    Datagram(Udp4<'a>),
    /// A fragment of a UDP datagram, and its sender's MAC address.
    Fragment(Fragment<'a>, [u8; 6]),
}

/// Reads `frame` as a UDP datagram over IPv4, or a fragment of one.
pub fn parse(frame: &[u8]) -> Result<Received<'_>, FrameDrop> {
    if frame.len() < 14 + 20 {
        return Err(FrameDrop::Truncated);
    }
    if frame[12..14] != [0x08, 0x00] || frame[14] >> 4 != 4 {
        return Err(FrameDrop::NotIpv4);
    }
    let ip = &frame[14..];
    let ihl = (ip[0] & 0x0f) as usize * 4;
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    if ihl < 20 || total < ihl || total > ip.len() {
        return Err(FrameDrop::Truncated);
    }
    if ip[9] != 17 {
        return Err(FrameDrop::NotUdp);
    }
    let src_mac: [u8; 6] = frame[6..12].try_into().expect("6 bytes");
    let (src_ip, dst_ip) = (ip[12..16].try_into().expect("4 bytes"), ip[16..20].try_into().expect("4 bytes"));
    let flags = u16::from_be_bytes([ip[6], ip[7]]);
    if flags & 0x3fff != 0 {
        let key =
            FragmentKey { src: src_ip, dst: dst_ip, protocol: 17, id: u16::from_be_bytes([ip[4], ip[5]]) };
        let fragment = Fragment {
            key,
            offset: (flags & 0x1fff) as usize * 8,
            more: flags & 0x2000 != 0,
            data: &ip[ihl..total],
        };
        return Ok(Received::Fragment(fragment, src_mac));
    }
    udp_of(src_mac, (src_ip, dst_ip), &ip[ihl..total]).map(Received::Datagram)
}

/// Reads the UDP datagram `segment` (its header and payload) from `src_ip` to `dst_ip`, sent
/// by `src_mac`.
pub fn udp_of(
    src_mac: [u8; 6],
    (src_ip, dst_ip): ([u8; 4], [u8; 4]),
    segment: &[u8],
) -> Result<Udp4<'_>, FrameDrop> {
    if segment.len() < 8 {
        return Err(FrameDrop::Truncated);
    }
    let len = u16::from_be_bytes([segment[4], segment[5]]) as usize;
    if len < 8 || len > segment.len() {
        return Err(FrameDrop::BadLength);
    }
    Ok(Udp4 {
        peer: Peer {
            src_mac,
            src_ip,
            dst_ip,
            src_port: u16::from_be_bytes([segment[0], segment[1]]),
            dst_port: u16::from_be_bytes([segment[2], segment[3]]),
        },
        payload: &segment[8..len],
    })
}

/// Writes into `buf` an IPv4 packet of protocol `protocol` carrying `segment` (its checksum
/// already in place) from `from` to `to` in an Ethernet frame, with IP identification
/// `ip_id`; returns the frame's length, or `None` if `buf` is too small.
pub fn write_ipv4(
    buf: &mut [u8],
    (to_mac, from_mac): ([u8; 6], [u8; 6]),
    (from, to): ([u8; 4], [u8; 4]),
    protocol: u8,
    ip_id: u16,
    segment: &[u8],
) -> Option<usize> {
    let frame_len = 14 + 20 + segment.len();
    if frame_len > buf.len() || 20 + segment.len() > u16::MAX as usize {
        return None;
    }
    let f = &mut buf[..frame_len];
    f[0..6].copy_from_slice(&to_mac);
    f[6..12].copy_from_slice(&from_mac);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    write_ipv4_header(&mut f[14..34], (from, to), protocol, ip_id, 20 + segment.len());
    f[34..].copy_from_slice(segment);
    Some(frame_len)
}

fn write_ipv4_header(ip: &mut [u8], (from, to): ([u8; 4], [u8; 4]), protocol: u8, ip_id: u16, total: usize) {
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&ip_id.to_be_bytes());
    ip[6..8].copy_from_slice(&[0, 0]);
    ip[8] = 64;
    ip[9] = protocol;
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&from);
    ip[16..20].copy_from_slice(&to);
    let sum = fold(ones_sum(0, ip));
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
}

/// Writes into `buf` the reply to a datagram from `request` from `our_mac`, carrying `parts`
/// (concatenated) as its payload, with IP identification `ip_id`; returns the frame's length,
/// or `None` if `buf` is too small.
pub fn write_reply(
    buf: &mut [u8],
    request: &Peer,
    our_mac: [u8; 6],
    ip_id: u16,
    parts: &[&[u8]],
) -> Option<usize> {
    let payload: usize = parts.iter().map(|p| p.len()).sum();
    let frame_len = REPLY_HEADERS + payload;
    let udp_len = 8 + payload;
    if frame_len > buf.len() || 20 + udp_len > u16::MAX as usize {
        return None;
    }
    let f = &mut buf[..frame_len];
    f[0..6].copy_from_slice(&request.src_mac);
    f[6..12].copy_from_slice(&our_mac);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    write_ipv4_header(&mut f[14..34], (request.dst_ip, request.src_ip), 17, ip_id, 20 + udp_len);
    let mut at = REPLY_HEADERS;
    for p in parts {
        f[at..at + p.len()].copy_from_slice(p);
        at += p.len();
    }
    let udp = &mut f[34..];
    udp[0..2].copy_from_slice(&request.dst_port.to_be_bytes());
    udp[2..4].copy_from_slice(&request.src_port.to_be_bytes());
    udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
    // The pseudo-header: addresses, protocol, UDP length.
    let mut sum = ones_sum(0, &request.dst_ip);
    sum = ones_sum(sum, &request.src_ip);
    sum += 17 + udp_len as u32;
    let udp_sum = match fold(ones_sum(sum, udp)) {
        0 => 0xffff,
        s => s,
    };
    udp[6..8].copy_from_slice(&udp_sum.to_be_bytes());
    Some(frame_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datagram(frame: &[u8]) -> Result<Udp4<'_>, FrameDrop> {
        match parse(frame)? {
            Received::Datagram(d) => Ok(d),
            Received::Fragment(..) => panic!("a fragment"),
        }
    }

    fn request() -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + 5];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[12..14].copy_from_slice(&[8, 0]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&(20u16 + 8 + 5).to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 99, 0, 2]);
        f[30..34].copy_from_slice(&[10, 99, 0, 1]);
        f[34..36].copy_from_slice(&40000u16.to_be_bytes());
        f[36..38].copy_from_slice(&11211u16.to_be_bytes());
        f[38..40].copy_from_slice(&13u16.to_be_bytes());
        f[42..].copy_from_slice(b"hello");
        f
    }

    #[test]
    fn a_reply_goes_back_with_valid_checksums() {
        let req = request();
        let udp = datagram(&req).unwrap();
        assert_eq!((udp.peer.src_port, udp.peer.dst_port, udp.payload), (40000, 11211, b"hello".as_slice()));
        let mut buf = [0u8; 128];
        let n = write_reply(&mut buf, &udp.peer, [2, 0, 0, 0, 0, 1], 7, &[b"ab", b"cde"]).unwrap();
        let back = datagram(&buf[..n]).unwrap();
        assert_eq!((back.peer.src_ip, back.peer.dst_ip), ([10, 99, 0, 1], [10, 99, 0, 2]));
        assert_eq!(
            (back.peer.src_port, back.peer.dst_port, back.payload),
            (11211, 40000, b"abcde".as_slice())
        );
        // Checksums verify: the one's-complement sum over each with its checksum is all ones.
        assert_eq!(fold(ones_sum(0, &buf[14..34])), 0);
        let mut pseudo = ones_sum(0, &buf[26..34]);
        pseudo += 17 + (n - 34) as u32;
        assert_eq!(fold(ones_sum(pseudo, &buf[34..n])), 0);
    }

    #[test]
    fn reasons_index_their_counters() {
        for (i, why) in FrameDrop::ALL.iter().enumerate() {
            assert_eq!(why.index(), i);
        }
    }

    #[test]
    fn bad_frames_are_named() {
        let req = request();
        assert_eq!(datagram(&req[..20]), Err(FrameDrop::Truncated));
        let mut tcp = req.clone();
        tcp[23] = 6;
        assert_eq!(datagram(&tcp), Err(FrameDrop::NotUdp));
        let mut long = req.clone();
        long[38..40].copy_from_slice(&200u16.to_be_bytes());
        assert_eq!(datagram(&long), Err(FrameDrop::BadLength));
        let mut arp = req;
        arp[12..14].copy_from_slice(&[8, 6]);
        assert_eq!(datagram(&arp), Err(FrameDrop::NotIpv4));
    }

    #[test]
    fn fragments_are_read_and_put_together() {
        // A 3,000-byte datagram from the request's sender, cut as a kernel cuts it at MTU 1500.
        let payload: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let mut whole = request();
        whole.truncate(34);
        whole[16..18].copy_from_slice(&(20u16 + 8 + 3000).to_be_bytes());
        let mut udp = vec![0x9c, 0x40, 0x2b, 0xcb];
        udp.extend_from_slice(&(8u16 + 3000).to_be_bytes());
        udp.extend_from_slice(&[0, 0]);
        udp.extend_from_slice(&payload);
        let mut r = hyflow::packet::reassembly::Reassembler::new(2, 1_000_000_000);
        let mut got = None;
        for (i, piece) in udp.chunks(1480).enumerate() {
            let mut f = whole.clone();
            f[16..18].copy_from_slice(&(20 + piece.len() as u16).to_be_bytes());
            f[18..20].copy_from_slice(&99u16.to_be_bytes());
            let more = if (i + 1) * 1480 < udp.len() { 0x2000 } else { 0 };
            f[20..22].copy_from_slice(&(more | (i * 1480 / 8) as u16).to_be_bytes());
            f.extend_from_slice(piece);
            let Ok(Received::Fragment(frag, mac)) = parse(&f) else { panic!("fragment {i}") };
            assert_eq!(
                (frag.offset, frag.more, frag.key.id, mac),
                (i * 1480, more != 0, 99, [2, 0, 0, 0, 0, 2])
            );
            if let Some(seg) = r.add(0, frag).unwrap() {
                let d = udp_of(mac, (frag.key.src, frag.key.dst), seg).unwrap();
                got = Some((d.peer, d.payload.to_vec()));
            }
        }
        let (peer, data) = got.expect("put together");
        assert_eq!((peer.src_port, peer.dst_port, peer.src_ip), (40000, 11211, [10, 99, 0, 2]));
        assert_eq!(data, payload);
    }
}
