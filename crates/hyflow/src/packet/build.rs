//! Frames from flow keys: the inverse of [`parse_frame`](super::parse_frame), used by the
//! traffic generators so generated traces are real pcap bytes that any tool can read.
//!
//! Builds Ethernet (up to two VLAN tags), IPv4 (with fragment bits and checksum), IPv6, ARP,
//! and TCP/UDP/SCTP/ICMP/ICMPv6 headers, padded with zero payload to the requested size.
//! Tunnel metadata is not encapsulated (a generated packet arrives untunnelled).

use super::field::{id, proto};
use super::FlowKey;

fn put16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn mac_bytes(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

fn ipv4_checksum(header: &[u8]) -> u16 {
    super::checksum::fold(super::checksum::ones_sum(0, header))
}

/// The L4 header for `key` (empty for later fragments and other protocols).
fn l4_header(key: &FlowKey, out: &mut Vec<u8>) {
    if key.nw_frag() & proto::FRAG_LATER != 0 {
        return;
    }
    match key.nw_proto() {
        proto::IP_TCP => {
            put16(out, key.tp_src());
            put16(out, key.tp_dst());
            out.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
            let flags = key.get(id::TCP_FLAGS) as u16 & 0x0fff;
            put16(out, (5 << 12) | flags);
            out.extend_from_slice(&[0x20, 0, 0, 0, 0, 0]);
        }
        proto::IP_UDP | proto::IP_SCTP => {
            put16(out, key.tp_src());
            put16(out, key.tp_dst());
            out.extend_from_slice(&[0, 8, 0, 0]);
            if key.nw_proto() == proto::IP_SCTP {
                out.extend_from_slice(&[0; 4]);
            }
        }
        proto::IP_ICMP | proto::IP_ICMPV6 => {
            out.extend_from_slice(&[key.tp_src() as u8, key.tp_dst() as u8, 0, 0, 0, 0, 0, 0]);
        }
        _ => {}
    }
}

/// A frame carrying `key`'s headers, at least `len` bytes long (60 minimum, as on the wire
/// without FCS).
pub fn build_frame(key: &FlowKey, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len.max(64));
    build_frame_into(key, len, &mut f);
    f
}

/// [`build_frame`] into `f` (cleared first), so that a generator reuses one buffer: nothing
/// is allocated once `f` has grown to the longest frame.
pub fn build_frame_into(key: &FlowKey, len: usize, f: &mut Vec<u8>) {
    f.clear();
    f.extend_from_slice(&mac_bytes(key.dl_dst()));
    f.extend_from_slice(&mac_bytes(key.dl_src()));
    for (tpid, tci) in [(key.vlan_tpid(), key.vlan_tci()), (key.vlan_tpid2(), key.vlan_tci2())] {
        if tci & proto::VLAN_CFI == 0 {
            break;
        }
        put16(f, if tpid == 0 { proto::ETH_VLAN } else { tpid });
        put16(f, tci & !proto::VLAN_CFI);
    }
    let dl = key.dl_type();
    if dl != proto::ETH_NONE {
        put16(f, dl);
    }
    let target = len.max(60);
    match dl {
        proto::ETH_IPV4 => {
            // The L4 header goes in first, after room for the IP header, whose total length
            // depends on it.
            let start = f.len();
            f.resize(start + 20, 0);
            l4_header(key, f);
            let total = (target.saturating_sub(start)).max(f.len() - start) as u16;
            let frag = key.nw_frag();
            let flags_off: u16 = if frag & proto::FRAG_LATER != 0 {
                0x2000 | 185
            } else if frag & proto::FRAG_ANY != 0 {
                0x2000
            } else {
                0
            };
            let ip = &mut f[start..start + 20];
            ip[..2].copy_from_slice(&[0x45, key.nw_tos()]);
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            ip[4..6].copy_from_slice(&0u16.to_be_bytes());
            ip[6..8].copy_from_slice(&flags_off.to_be_bytes());
            ip[8..12].copy_from_slice(&[key.nw_ttl(), key.nw_proto(), 0, 0]);
            ip[12..16].copy_from_slice(&key.nw_src().to_be_bytes());
            ip[16..20].copy_from_slice(&key.nw_dst().to_be_bytes());
            let sum = ipv4_checksum(ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        proto::ETH_IPV6 => {
            let start = f.len();
            f.resize(start + 40, 0);
            l4_header(key, f);
            let payload = (target.saturating_sub(start + 40)).max(f.len() - start - 40) as u16;
            let tc = key.nw_tos() as u32;
            let label = key.get(id::IPV6_LABEL) as u32 & 0xf_ffff;
            let ip = &mut f[start..start + 40];
            ip[..4].copy_from_slice(&((6u32 << 28) | (tc << 20) | label).to_be_bytes());
            ip[4..6].copy_from_slice(&payload.to_be_bytes());
            ip[6..8].copy_from_slice(&[key.nw_proto(), key.nw_ttl()]);
            ip[8..24].copy_from_slice(&(key.get(id::IPV6_SRC)).to_be_bytes());
            ip[24..40].copy_from_slice(&(key.get(id::IPV6_DST)).to_be_bytes());
        }
        proto::ETH_ARP | proto::ETH_RARP => {
            f.extend_from_slice(&[0, 1, 8, 0, 6, 4]);
            put16(f, key.get(id::ARP_OP) as u16);
            f.extend_from_slice(&mac_bytes(key.get(id::ARP_SHA) as u64));
            f.extend_from_slice(&(key.get(id::ARP_SPA) as u32).to_be_bytes());
            f.extend_from_slice(&mac_bytes(key.get(id::ARP_THA) as u64));
            f.extend_from_slice(&(key.get(id::ARP_TPA) as u32).to_be_bytes());
        }
        _ => {}
    }
    if f.len() < target {
        f.resize(target, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::parse_packet;
    use crate::packet::{parse_frame, LinkKind};

    #[test]
    fn frames_parse_back_to_their_keys() {
        for text in [
            "in_port=1,tcp,dl_src=00:00:00:00:00:01,dl_dst=02:00:00:00:00:02,nw_src=10.0.0.1,nw_dst=10.1.2.3,nw_tos=32,nw_ttl=64,tp_src=1000,tp_dst=80,tcp_flags=0x012",
            "in_port=1,udp,dl_vlan=7,dl_vlan_pcp=3,nw_src=10.0.0.1,nw_dst=10.0.0.2,nw_ttl=9,tp_src=53,tp_dst=5353",
            "in_port=1,icmp,nw_src=1.1.1.1,nw_dst=2.2.2.2,nw_ttl=1,icmp_type=8,icmp_code=0",
            "in_port=1,ip,nw_proto=6,nw_frag=later,nw_src=1.1.1.1,nw_dst=2.2.2.2,nw_ttl=4",
            "in_port=1,udp,nw_frag=first,nw_src=1.1.1.1,nw_dst=2.2.2.2,nw_ttl=4,tp_src=1,tp_dst=2",
            "in_port=1,tcp6,ipv6_src=2001:db8::1,ipv6_dst=2001:db8::2,ipv6_label=5,nw_ttl=64,tp_src=1,tp_dst=443",
            "in_port=1,arp,arp_op=1,arp_spa=10.0.0.9,arp_tpa=10.0.0.1,arp_sha=00:00:00:00:00:09",
            "in_port=1,dl_type=0x88cc,dl_src=00:00:00:00:00:01",
        ] {
            let want = parse_packet(text).unwrap();
            for len in [60, 1500] {
                let frame = build_frame(&want, len);
                assert!(frame.len() >= len);
                let mut got = FlowKey::default();
                parse_frame(&frame, LinkKind::Ethernet, 1, &mut got).unwrap();
                assert_eq!(got, want, "{text} at {len} bytes");
            }
        }
    }
}
