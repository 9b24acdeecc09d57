//! Frame parsing: bytes on the wire to a [`FlowKey`], as OVS's `flow_extract` does.
//!
//! Parsing never fails outright: like OVS, it fills the key as far as the headers go and
//! reports *why* it stopped early, so callers can count malformed packets per reason while
//! still forwarding them on what was parsed.

use etherparse::{Ethernet2HeaderSlice, Ipv4HeaderSlice, Ipv6HeaderSlice, SingleVlanHeaderSlice};

use super::field::{id, proto};
use super::key::FlowKey;

/// How a trace's frames start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    /// Ethernet II frames.
    Ethernet,
    /// Bare IPv4 or IPv6 packets (no link header); the version nibble decides.
    RawIp,
}

/// Why a frame could not be parsed completely. Each is counted separately.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Malformed {
    /// Shorter than an Ethernet header.
    TruncatedEthernet,
    /// A VLAN tag was cut off.
    TruncatedVlan,
    /// More than two VLAN tags (OVS parses two).
    TooManyVlans,
    /// IPv4 header cut off or invalid (version, IHL).
    BadIpv4,
    /// IPv6 header or an extension header cut off or invalid.
    BadIpv6,
    /// Raw-IP frame whose version nibble is neither 4 nor 6.
    BadIpVersion,
    /// ARP packet shorter than its Ethernet/IPv4 body.
    TruncatedArp,
    /// TCP/UDP/SCTP/ICMP header cut off.
    TruncatedL4,
    /// VXLAN header cut off or inner frame malformed.
    BadVxlan,
}

impl Malformed {
    /// Short stable name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Malformed::TruncatedEthernet => "truncated_ethernet",
            Malformed::TruncatedVlan => "truncated_vlan",
            Malformed::TooManyVlans => "too_many_vlans",
            Malformed::BadIpv4 => "bad_ipv4",
            Malformed::BadIpv6 => "bad_ipv6",
            Malformed::BadIpVersion => "bad_ip_version",
            Malformed::TruncatedArp => "truncated_arp",
            Malformed::TruncatedL4 => "truncated_l4",
            Malformed::BadVxlan => "bad_vxlan",
        }
    }
}

/// The UDP port VXLAN arrives on (IANA).
pub const VXLAN_PORT: u16 = 4789;

/// Parses `frame` into `key` (reset first); `in_port` is where it arrived.
///
/// On `Err` the key still holds every header parsed before the problem.
pub fn parse_frame(frame: &[u8], link: LinkKind, in_port: u32, key: &mut FlowKey) -> Result<(), Malformed> {
    *key = FlowKey::default();
    key.set_in_port(in_port);
    match link {
        LinkKind::Ethernet => parse_ethernet(frame, key, true),
        LinkKind::RawIp => match frame.first().map(|b| b >> 4) {
            Some(4) => {
                key.set_dl_type(proto::ETH_IPV4);
                parse_ipv4(frame, key, true)
            }
            Some(6) => {
                key.set_dl_type(proto::ETH_IPV6);
                parse_ipv6(frame, key, true)
            }
            _ => Err(Malformed::BadIpVersion),
        },
    }
}

fn parse_ethernet(frame: &[u8], key: &mut FlowKey, allow_vxlan: bool) -> Result<(), Malformed> {
    let eth = Ethernet2HeaderSlice::from_slice(frame).map_err(|_| Malformed::TruncatedEthernet)?;
    key.set_dl_dst(mac(eth.destination()));
    key.set_dl_src(mac(eth.source()));
    let mut ether_type = eth.ether_type().0;
    let mut rest = &frame[eth.slice().len()..];
    let mut tags = 0;
    while matches!(ether_type, proto::ETH_VLAN | proto::ETH_QINQ) {
        let tag = SingleVlanHeaderSlice::from_slice(rest).map_err(|_| Malformed::TruncatedVlan)?;
        let tci = u16::from_be_bytes([tag.slice()[0], tag.slice()[1]]) | proto::VLAN_CFI;
        match tags {
            0 => {
                key.set_vlan_tpid(ether_type);
                key.set_vlan_tci(tci);
            }
            1 => {
                key.set_vlan_tpid2(ether_type);
                key.set_vlan_tci2(tci);
            }
            _ => return Err(Malformed::TooManyVlans),
        }
        tags += 1;
        ether_type = tag.ether_type().0;
        rest = &rest[tag.slice().len()..];
    }
    if ether_type < 0x0600 {
        // 802.3 length field: LLC/SNAP with a zero OUI carries an EtherType; anything else is
        // OVS's FLOW_DL_TYPE_NONE.
        match rest.get(..8) {
            Some([0xaa, 0xaa, 0x03, 0, 0, 0, hi, lo]) => {
                ether_type = u16::from_be_bytes([*hi, *lo]);
                rest = &rest[8..];
            }
            _ => {
                key.set_dl_type(proto::ETH_NONE);
                return Ok(());
            }
        }
    }
    key.set_dl_type(ether_type);
    match ether_type {
        proto::ETH_IPV4 => parse_ipv4(rest, key, allow_vxlan),
        proto::ETH_IPV6 => parse_ipv6(rest, key, allow_vxlan),
        proto::ETH_ARP | proto::ETH_RARP => parse_arp(rest, key),
        _ => Ok(()),
    }
}

fn mac(b: [u8; 6]) -> u64 {
    u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
}

fn parse_ipv4(data: &[u8], key: &mut FlowKey, allow_vxlan: bool) -> Result<(), Malformed> {
    let ip = Ipv4HeaderSlice::from_slice(data).map_err(|_| Malformed::BadIpv4)?;
    // OVS's ipv4_sanity_check: a header or total length that does not fit leaves no L3 fields.
    let total = ip.total_len() as usize;
    if total < ip.slice().len() || total > data.len() {
        return Err(Malformed::BadIpv4);
    }
    key.set_nw_src(u32::from_be_bytes(ip.source()));
    key.set_nw_dst(u32::from_be_bytes(ip.destination()));
    let nw_proto = ip.protocol().0;
    key.set_nw_proto(nw_proto);
    key.set_nw_tos(data[1]);
    key.set_nw_ttl(ip.ttl());
    let offset = ip.fragments_offset().value();
    key.set_nw_frag(frag_bits(ip.more_fragments(), offset));
    if offset != 0 {
        return Ok(());
    }
    // Trailing padding beyond total_len is not transport header.
    parse_l4(nw_proto, &data[ip.slice().len()..total], key, allow_vxlan)
}

/// `nw_frag` for a fragment with the MF flag and offset given.
fn frag_bits(more: bool, offset: u16) -> u8 {
    match (more, offset) {
        (false, 0) => 0,
        (true, 0) => proto::FRAG_ANY,
        _ => proto::FRAG_ANY | proto::FRAG_LATER,
    }
}

fn parse_ipv6(data: &[u8], key: &mut FlowKey, allow_vxlan: bool) -> Result<(), Malformed> {
    let ip = Ipv6HeaderSlice::from_slice(data).map_err(|_| Malformed::BadIpv6)?;
    key.set(id::IPV6_SRC, u128::from_be_bytes(ip.source()));
    key.set(id::IPV6_DST, u128::from_be_bytes(ip.destination()));
    key.set(id::IPV6_LABEL, ip.flow_label().value() as u128);
    key.set_nw_tos(ip.traffic_class());
    key.set_nw_ttl(ip.hop_limit());
    let mut next = ip.next_header().0;
    let mut rest = &data[ip.slice().len()..];
    let mut frag = 0u8;
    // Walk extension headers to the upper-layer protocol, noting fragmentation.
    loop {
        match next {
            0 | 43 | 60 => {
                let hdr = rest.get(..2).ok_or(Malformed::BadIpv6)?;
                let len = (hdr[1] as usize + 1) * 8;
                next = hdr[0];
                rest = rest.get(len..).ok_or(Malformed::BadIpv6)?;
            }
            51 => {
                let hdr = rest.get(..2).ok_or(Malformed::BadIpv6)?;
                let len = (hdr[1] as usize + 2) * 4;
                next = hdr[0];
                rest = rest.get(len..).ok_or(Malformed::BadIpv6)?;
            }
            44 => {
                let hdr = rest.get(..8).ok_or(Malformed::BadIpv6)?;
                let off_flags = u16::from_be_bytes([hdr[2], hdr[3]]);
                frag = frag_bits(off_flags & 1 != 0, off_flags >> 3);
                if frag & proto::FRAG_LATER != 0 {
                    // A later fragment's payload is not headers: OVS stops at the fragment header.
                    key.set_nw_proto(44);
                    key.set_nw_frag(frag);
                    return Ok(());
                }
                next = hdr[0];
                rest = &rest[8..];
            }
            _ => break,
        }
    }
    key.set_nw_proto(next);
    key.set_nw_frag(frag);
    parse_l4(next, rest, key, allow_vxlan)
}

fn parse_arp(data: &[u8], key: &mut FlowKey) -> Result<(), Malformed> {
    // Ethernet/IPv4 ARP only, as OVS: htype 1, ptype 0x0800, hlen 6, plen 4.
    let body = data.get(..28).ok_or(Malformed::TruncatedArp)?;
    let op = u16::from_be_bytes([body[6], body[7]]);
    let is_eth_ipv4 = body[0..2] == [0, 1] && body[2..4] == [8, 0] && body[4] == 6 && body[5] == 4;
    if !is_eth_ipv4 {
        return Ok(());
    }
    if op <= 0xff {
        key.set(id::ARP_OP, op as u128);
    }
    let six = |b: &[u8]| mac([b[0], b[1], b[2], b[3], b[4], b[5]]) as u128;
    key.set(id::ARP_SHA, six(&body[8..14]));
    key.set(id::ARP_SPA, u32::from_be_bytes([body[14], body[15], body[16], body[17]]) as u128);
    key.set(id::ARP_THA, six(&body[18..24]));
    key.set(id::ARP_TPA, u32::from_be_bytes([body[24], body[25], body[26], body[27]]) as u128);
    Ok(())
}

fn parse_l4(nw_proto: u8, data: &[u8], key: &mut FlowKey, allow_vxlan: bool) -> Result<(), Malformed> {
    let be16 = |b: &[u8], i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
    match nw_proto {
        proto::IP_TCP => {
            let h = data.get(..20).ok_or(Malformed::TruncatedL4)?;
            key.set_tp_src(be16(h, 0));
            key.set_tp_dst(be16(h, 2));
            // 12 flag bits: NS from the data-offset byte, then CWR..FIN.
            let flags = ((h[12] as u16 & 0x01) << 8) | h[13] as u16;
            key.set(id::TCP_FLAGS, flags as u128);
        }
        proto::IP_UDP => {
            let h = data.get(..8).ok_or(Malformed::TruncatedL4)?;
            let dport = be16(h, 2);
            key.set_tp_src(be16(h, 0));
            key.set_tp_dst(dport);
            if allow_vxlan && dport == VXLAN_PORT {
                return parse_vxlan(&data[8..], key);
            }
        }
        proto::IP_SCTP => {
            let h = data.get(..12).ok_or(Malformed::TruncatedL4)?;
            key.set_tp_src(be16(h, 0));
            key.set_tp_dst(be16(h, 2));
        }
        proto::IP_ICMP | proto::IP_ICMPV6 => {
            let h = data.get(..8).ok_or(Malformed::TruncatedL4)?;
            key.set_tp_src(h[0] as u16);
            key.set_tp_dst(h[1] as u16);
        }
        _ => {}
    }
    Ok(())
}

/// VXLAN (RFC 7348): the VNI becomes `tun_id` and the inner frame becomes the packet, as
/// when OVS receives on a VXLAN tunnel port. Nested VXLAN is not decapsulated again.
fn parse_vxlan(data: &[u8], key: &mut FlowKey) -> Result<(), Malformed> {
    let h = data.get(..8).ok_or(Malformed::BadVxlan)?;
    if h[0] & 0x08 == 0 {
        return Err(Malformed::BadVxlan);
    }
    let vni = u32::from_be_bytes([0, h[4], h[5], h[6]]);
    let in_port = key.in_port();
    *key = FlowKey::default();
    key.set_in_port(in_port);
    key.set_tun_id(vni as u64);
    parse_ethernet(&data[8..], key, false).map_err(|_| Malformed::BadVxlan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn build_tcp(vlan: Option<u16>) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let mut out = Vec::new();
        match vlan {
            Some(v) => b
                .single_vlan(etherparse::VlanId::try_new(v).unwrap())
                .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
                .tcp(1000, 80, 1, 1000)
                .syn()
                .write(&mut out, b"hello")
                .unwrap(),
            None => b
                .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
                .tcp(1000, 80, 1, 1000)
                .syn()
                .write(&mut out, b"hello")
                .unwrap(),
        }
        out
    }

    #[test]
    fn tcp_over_ipv4_over_vlan() {
        let mut k = FlowKey::default();
        parse_frame(&build_tcp(Some(7)), LinkKind::Ethernet, 3, &mut k).unwrap();
        assert_eq!(k.in_port(), 3);
        assert_eq!(k.dl_src(), 0x0200_0000_0001);
        assert_eq!(k.vlan_tci(), 0x1007);
        assert_eq!(k.dl_type(), 0x0800);
        assert_eq!((k.nw_src(), k.nw_dst(), k.nw_proto(), k.nw_ttl()), (0x0a00_0001, 0x0a00_0002, 6, 64));
        assert_eq!((k.tp_src(), k.tp_dst()), (1000, 80));
        assert_eq!(k.get(id::TCP_FLAGS), 0x002);
    }

    #[test]
    fn truncation_keeps_what_was_parsed() {
        let frame = build_tcp(None);
        let mut k = FlowKey::default();
        // IPv4 total length beyond the data: like OVS, no L3 fields at all.
        assert_eq!(parse_frame(&frame[..40], LinkKind::Ethernet, 1, &mut k), Err(Malformed::BadIpv4));
        assert_eq!((k.dl_type(), k.nw_dst()), (0x0800, 0));
        // A consistent IP header over a cut TCP header: L3 kept, L4 reported.
        let mut short = frame[..44].to_vec();
        short[16..18].copy_from_slice(&30u16.to_be_bytes());
        assert_eq!(parse_frame(&short, LinkKind::Ethernet, 1, &mut k), Err(Malformed::TruncatedL4));
        assert_eq!(k.nw_dst(), 0x0a00_0002);
        assert_eq!(parse_frame(&frame[..20], LinkKind::Ethernet, 1, &mut k), Err(Malformed::BadIpv4));
        assert_eq!(
            parse_frame(&frame[..5], LinkKind::Ethernet, 1, &mut k),
            Err(Malformed::TruncatedEthernet)
        );
    }

    #[test]
    fn llc_snap_and_plain_802_3() {
        let mut f = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x00, 0x40];
        f.extend_from_slice(&[0x42, 0x42, 0x03, 0, 0, 0, 0, 0]);
        let mut k = FlowKey::default();
        parse_frame(&f, LinkKind::Ethernet, 1, &mut k).unwrap();
        assert_eq!(k.dl_type(), proto::ETH_NONE);
        f[14..22].copy_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x88, 0xcc]);
        parse_frame(&f, LinkKind::Ethernet, 1, &mut k).unwrap();
        assert_eq!(k.dl_type(), 0x88cc);
    }

    #[test]
    fn raw_ip_and_udp_and_icmp() {
        let mut out = Vec::new();
        PacketBuilder::ipv6([0; 16], [1; 16], 7).udp(53, 5353).write(&mut out, b"x").unwrap();
        let mut k = FlowKey::default();
        parse_frame(&out, LinkKind::RawIp, 1, &mut k).unwrap();
        assert_eq!(k.dl_type(), 0x86dd);
        assert_eq!((k.nw_proto(), k.tp_src(), k.tp_dst(), k.nw_ttl()), (17, 53, 5353, 7));
        let mut out = Vec::new();
        PacketBuilder::ipv4([1, 1, 1, 1], [2, 2, 2, 2], 9)
            .icmpv4_echo_request(1, 1)
            .write(&mut out, b"")
            .unwrap();
        parse_frame(&out, LinkKind::RawIp, 1, &mut k).unwrap();
        assert_eq!((k.nw_proto(), k.get(id::ICMP_TYPE), k.get(id::ICMP_CODE)), (1, 8, 0));
    }

    #[test]
    fn vxlan_decapsulates_into_tun_id() {
        let inner = build_tcp(None);
        let mut vx = vec![0x08, 0, 0, 0, 0, 0, 42, 0];
        vx.extend_from_slice(&inner);
        let mut out = Vec::new();
        PacketBuilder::ethernet2([0; 6], [1; 6])
            .ipv4([192, 168, 0, 1], [192, 168, 0, 2], 64)
            .udp(5555, VXLAN_PORT)
            .write(&mut out, &vx)
            .unwrap();
        let mut k = FlowKey::default();
        parse_frame(&out, LinkKind::Ethernet, 5, &mut k).unwrap();
        assert_eq!(k.tun_id(), 42);
        assert_eq!(k.in_port(), 5);
        assert_eq!((k.nw_src(), k.tp_dst()), (0x0a00_0001, 80));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 3000, ..Default::default() })]

        /// Random bytes, and valid frames cut or bit-flipped anywhere, never panic.
        #[test]
        fn arbitrary_bytes_never_panic(
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            cut in 0usize..120,
            flip in (0usize..120, 0u8..8),
        ) {
            let mut k = FlowKey::default();
            let _ = parse_frame(&junk, LinkKind::Ethernet, 1, &mut k);
            let _ = parse_frame(&junk, LinkKind::RawIp, 1, &mut k);
            for vlan in [None, Some(7)] {
                let mut f = build_tcp(vlan);
                let _ = parse_frame(&f[..cut.min(f.len())], LinkKind::Ethernet, 1, &mut k);
                let i = flip.0 % f.len();
                f[i] ^= 1 << flip.1;
                let _ = parse_frame(&f, LinkKind::Ethernet, 1, &mut k);
            }
        }
    }

    #[test]
    fn arp_fields() {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x08, 0x06]);
        f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&[2, 0, 0, 0, 0, 9, 10, 0, 0, 9, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1]);
        let mut k = FlowKey::default();
        parse_frame(&f, LinkKind::Ethernet, 1, &mut k).unwrap();
        assert_eq!(k.get(id::ARP_OP), 1);
        assert_eq!(k.get(id::ARP_SPA), 0x0a00_0009);
        assert_eq!(k.get(id::ARP_TPA), 0x0a00_0001);
        assert_eq!(k.get(id::ARP_SHA), 0x0200_0000_0009);
        assert_eq!(parse_frame(&f[..30], LinkKind::Ethernet, 1, &mut k), Err(Malformed::TruncatedArp));
    }
}
