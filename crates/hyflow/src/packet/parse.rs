//! Frame parsing: bytes on the wire to a [`FlowKey`], exactly as Open vSwitch's
//! `flow_extract` (`miniflow_extract` in lib/flow.c) does, the reference hyflow promises.
//!
//! Parsing never fails outright: like OVS, it fills the key as far as the headers go and
//! reports *why* it stopped early, so callers can count malformed packets per reason while
//! still forwarding them on what was parsed. The headers are read by hand rather than through
//! a validating parser, because OVS validates little and differently: it ignores the IP
//! version nibble, keeps L3 fields while dropping unreadable L4 ones, bounds IPv6 by its
//! payload length, and so on; each such rule is noted where it is applied. Checked against
//! `ovs-ofctl parse-pcap` on tcpdump's test captures (`tests/pcap_corpus.rs`).
//!
//! [`parse_frame_with_layout`] also records where the headers it read lie, as OVS's
//! `dp_packet` offsets, so that a live switch can write the packet's leaving key back onto the
//! frame ([`frame_rewrite`](super::frame_rewrite)) without walking its headers again.

use super::field::{id, proto};
use super::key::FlowKey;

/// How a trace's frames start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    /// Ethernet II / 802.3 frames.
    Ethernet,
    /// Bare IPv4 or IPv6 packets (no link header); the version nibble decides.
    RawIp,
    /// Linux cooked capture v1 (`tcpdump -i any`, LINKTYPE_LINUX_SLL): a 16-byte header with
    /// the protocol in its last two bytes.
    LinuxSll,
    /// Linux cooked capture v2 (LINKTYPE_LINUX_SLL2): a 20-byte header with the protocol
    /// first.
    LinuxSll2,
    /// BSD loopback (LINKTYPE_NULL, LINKTYPE_LOOP): a 4-byte address family, in the capturing
    /// host's byte order for NULL and network order for LOOP (both accepted).
    Null,
}

/// Why a frame could not be parsed completely. Each is counted separately.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Malformed {
    /// Shorter than an Ethernet header (or a cooked/loopback header).
    TruncatedEthernet,
    /// A VLAN tag was cut off (OVS then reads its TPID as the EtherType).
    TruncatedVlan,
    /// More than two VLAN tags (OVS parses two; the third TPID becomes the EtherType).
    TooManyVlans,
    /// IPv4 header cut off or inconsistent (IHL, total length): no L3 fields, as OVS.
    BadIpv4,
    /// IPv6 header cut off or its payload length beyond the bytes present: no L3 fields.
    BadIpv6,
    /// An IPv6 extension header cut off: addresses kept, the rest of L3 left zero, as OVS.
    BadIpv6Extension,
    /// Raw-IP frame whose version nibble is neither 4 nor 6.
    BadIpVersion,
    /// ARP packet shorter than its Ethernet/IPv4 body.
    TruncatedArp,
    /// TCP/UDP/SCTP/ICMP/IGMP header cut off: no L4 fields.
    TruncatedL4,
    /// TCP data offset below 5 words or beyond the segment: no L4 fields, as OVS.
    BadTcpOffset,
    /// VXLAN header cut off or inner frame malformed.
    BadVxlan,
    /// A cooked or loopback header naming a link-layer type or address family hyflow does not
    /// read (Open vSwitch extracts no flow from it either): the key stays empty.
    UnsupportedLinkLayer,
    /// The capture's snapshot length cut the frame inside a header that was on the wire
    /// ([`parse_captured`]): the key holds the headers before it.
    SnaplenCut,
}

impl Malformed {
    /// Every reason, in declaration order (a `.hyf` trace records a reason by its place here).
    pub const ALL: [Malformed; 13] = [
        Malformed::TruncatedEthernet,
        Malformed::TruncatedVlan,
        Malformed::TooManyVlans,
        Malformed::BadIpv4,
        Malformed::BadIpv6,
        Malformed::BadIpv6Extension,
        Malformed::BadIpVersion,
        Malformed::TruncatedArp,
        Malformed::TruncatedL4,
        Malformed::BadTcpOffset,
        Malformed::BadVxlan,
        Malformed::UnsupportedLinkLayer,
        Malformed::SnaplenCut,
    ];

    /// Short stable name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Malformed::TruncatedEthernet => "truncated_ethernet",
            Malformed::TruncatedVlan => "truncated_vlan",
            Malformed::TooManyVlans => "too_many_vlans",
            Malformed::BadIpv4 => "bad_ipv4",
            Malformed::BadIpv6 => "bad_ipv6",
            Malformed::BadIpv6Extension => "bad_ipv6_extension",
            Malformed::BadIpVersion => "bad_ip_version",
            Malformed::TruncatedArp => "truncated_arp",
            Malformed::TruncatedL4 => "truncated_l4",
            Malformed::BadTcpOffset => "bad_tcp_offset",
            Malformed::BadVxlan => "bad_vxlan",
            Malformed::UnsupportedLinkLayer => "unsupported_link_layer",
            Malformed::SnaplenCut => "snaplen_cut_header",
        }
    }
}

/// The UDP port VXLAN arrives on (IANA).
pub(crate) const VXLAN_PORT: u16 = 4789;

/// IGMP's IP protocol number.
const IP_IGMP: u8 = 2;

/// Linux ARPHRD types whose cooked frames carry an EtherType payload as an Ethernet frame
/// would (Ethernet and loopback devices). Frames from other devices (PPP, IP-in-GRE, tun)
/// get no flow, as Open vSwitch's reading of such captures gives none.
const ARPHRD_ETHER: u16 = 1;
const ARPHRD_LOOPBACK: u16 = 772;

/// Address families of BSD loopback headers: IPv4 everywhere, IPv6 as Linux, the BSDs and
/// Darwin number it.
const AF_INET: u32 = 2;
const AF_INET6: [u32; 4] = [10, 24, 28, 30];

fn be16(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

fn be32(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// Parses `frame` into `key` (reset first); `in_port` is where it arrived. The bytes given
/// are the whole packet, as Open vSwitch sees a packet (and as `ovs-ofctl parse-pcap` reads a
/// capture).
///
/// On `Err` the key still holds every header parsed before the problem.
pub fn parse_frame(frame: &[u8], link: LinkKind, in_port: u32, key: &mut FlowKey) -> Result<(), Malformed> {
    parse_cut(frame, 0, link, in_port, key)
}

/// [`parse_frame`] for a captured frame that was `wire_len` bytes on the wire, of which the
/// capture kept `frame.len()` (a snapshot length, the norm for header captures). Lengths are
/// checked against the wire: a packet whose headers were captured parses as the whole packet
/// would; only a cut inside a header is malformed ([`Malformed::SnaplenCut`]).
pub fn parse_captured(
    frame: &[u8],
    wire_len: u32,
    link: LinkKind,
    in_port: u32,
    key: &mut FlowKey,
) -> Result<(), Malformed> {
    let missing = (wire_len as usize).saturating_sub(frame.len());
    parse_cut(frame, missing, link, in_port, key)
}

/// Where the headers a key was read from lie in the bytes [`parse_frame_with_layout`] parsed
/// (offsets from their start): what writing a rewritten key back onto the frame needs, as
/// Open vSwitch's `miniflow_extract` leaves `l3_ofs`, `l4_ofs` and `l2_pad_size` in its
/// `dp_packet` for `odp-execute` to rewrite through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameLayout {
    /// Start of the network header (IPv4, IPv6, Ethernet/IPv4 ARP) when it passed OVS's checks,
    /// that is, when the key holds its fields.
    pub l3: Option<usize>,
    /// End of the network packet: the IPv4 total length or IPv6 payload length (what follows
    /// is Ethernet padding, outside every checksum: OVS's `l2_pad_size`); otherwise the
    /// frame's end.
    pub l3_end: usize,
    /// Start of the transport header, past IPv4 options and the IPv6 extension headers OVS
    /// walks. Set for a later fragment too (its payload's start), as OVS sets `l4_ofs`; unset
    /// when an IPv6 extension header is cut, as OVS leaves it.
    pub l4: Option<usize>,
}

/// [`parse_frame`] of an Ethernet frame as a switch port that is not a tunnel port sees it
/// (the live switch's ports), also telling where the headers lie, for
/// [`frame_rewrite`](super::frame_rewrite). The same walk fills both, so the offsets are
/// those of the fields the key holds.
///
/// A VXLAN packet is a UDP packet here: Open vSwitch decapsulates only what arrives on a
/// VXLAN tunnel port, and forwards it whole from any other ([`parse_frame`] decapsulates,
/// reading a capture as taken behind a tunnel port).
pub fn parse_frame_with_layout(
    frame: &[u8],
    in_port: u32,
    key: &mut FlowKey,
    layout: &mut FrameLayout,
) -> Result<(), Malformed> {
    *key = FlowKey::default();
    key.set_in_port(in_port);
    *layout = FrameLayout { l3: None, l3_end: frame.len(), l4: None };
    let mut recorder = LayoutRecorder { base: frame.as_ptr() as usize, layout };
    parse_ethernet(frame, 0, key, false, &mut recorder)
}

/// What a parse tells about where the headers lie: nothing for [`parse_frame`] (the unit
/// sink's calls compile to nothing, so it runs as before), a [`FrameLayout`] for
/// [`parse_frame_with_layout`]. Every call passes a sub-slice of the bytes parsed.
trait LayoutSink {
    /// The network packet is `packet`, up to its own length.
    fn l3(&mut self, packet: &[u8]);
    /// The transport header starts where `transport` does.
    fn l4(&mut self, transport: &[u8]);
}

impl LayoutSink for () {
    #[inline(always)]
    fn l3(&mut self, _: &[u8]) {}
    #[inline(always)]
    fn l4(&mut self, _: &[u8]) {}
}

/// Offsets into the parsed bytes, found from where the walk's sub-slices start: the walk
/// passes slices, not positions, and every slice it passes lies inside the bytes parsed.
struct LayoutRecorder<'a> {
    base: usize,
    layout: &'a mut FrameLayout,
}

impl LayoutRecorder<'_> {
    fn offset(&self, at: &[u8]) -> usize {
        (at.as_ptr() as usize).wrapping_sub(self.base)
    }
}

impl LayoutSink for LayoutRecorder<'_> {
    fn l3(&mut self, packet: &[u8]) {
        let l3 = self.offset(packet);
        self.layout.l3 = Some(l3);
        self.layout.l3_end = l3 + packet.len();
    }

    fn l4(&mut self, transport: &[u8]) {
        self.layout.l4 = Some(self.offset(transport));
    }
}

/// The error for a header of `need` bytes of which `have` were captured and `missing` more
/// were on the wire after them: cut by the snapshot length, or `short` if it was never there.
fn cut(have: usize, missing: usize, need: usize, short: Malformed) -> Malformed {
    if have + missing >= need {
        Malformed::SnaplenCut
    } else {
        short
    }
}

/// Parsing with `missing` bytes of the frame on the wire but not captured.
fn parse_cut(
    frame: &[u8],
    missing: usize,
    link: LinkKind,
    in_port: u32,
    key: &mut FlowKey,
) -> Result<(), Malformed> {
    *key = FlowKey::default();
    key.set_in_port(in_port);
    let m = missing;
    match link {
        LinkKind::Ethernet => parse_ethernet(frame, m, key, true, &mut ()),
        LinkKind::RawIp => match frame.first().map(|b| b >> 4) {
            Some(4) => {
                key.set_dl_type(proto::ETH_IPV4);
                parse_ipv4(frame, m, key, true, &mut ())
            }
            Some(6) => {
                key.set_dl_type(proto::ETH_IPV6);
                parse_ipv6(frame, m, key, true, &mut ())
            }
            None if m > 0 => Err(Malformed::SnaplenCut),
            _ => Err(Malformed::BadIpVersion),
        },
        LinkKind::LinuxSll => {
            // pkttype(2) hatype(2) halen(2) addr(8) protocol(2).
            let header =
                frame.get(..16).ok_or_else(|| cut(frame.len(), m, 16, Malformed::TruncatedEthernet))?;
            cooked(be16(header, 2), be16(header, 4), &header[6..14], be16(header, 14), &frame[16..], m, key)
        }
        LinkKind::LinuxSll2 => {
            // protocol(2) reserved(2) ifindex(4) hatype(2) pkttype(1) halen(1) addr(8).
            let header =
                frame.get(..20).ok_or_else(|| cut(frame.len(), m, 20, Malformed::TruncatedEthernet))?;
            cooked(be16(header, 8), header[11] as u16, &header[12..20], be16(header, 0), &frame[20..], m, key)
        }
        LinkKind::Null => {
            let header =
                frame.get(..4).ok_or_else(|| cut(frame.len(), m, 4, Malformed::TruncatedEthernet))?;
            let little = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
            // The family is small: whichever byte order makes it so is the writer's.
            let family = if little > 0xffff { little.swap_bytes() } else { little };
            let payload = &frame[4..];
            if family == AF_INET {
                key.set_dl_type(proto::ETH_IPV4);
                parse_ipv4(payload, m, key, true, &mut ())
            } else if AF_INET6.contains(&family) {
                key.set_dl_type(proto::ETH_IPV6);
                parse_ipv6(payload, m, key, true, &mut ())
            } else {
                Err(Malformed::UnsupportedLinkLayer)
            }
        }
    }
}

/// A cooked frame from a device of ARPHRD type `hatype`, whose link-layer address field
/// holds `halen` bytes of `address`, protocol field is `ether_type` and payload `after`. It is
/// read as the Ethernet frame Open vSwitch sees in it: the sender's address (an Ethernet
/// address on these devices) as `dl_src`, no destination, the protocol as EtherType.
fn cooked(
    hatype: u16,
    halen: u16,
    address: &[u8],
    ether_type: u16,
    after: &[u8],
    missing: usize,
    key: &mut FlowKey,
) -> Result<(), Malformed> {
    if !matches!(hatype, ARPHRD_ETHER | ARPHRD_LOOPBACK) {
        return Err(Malformed::UnsupportedLinkLayer);
    }
    if halen >= 6 {
        key.set_dl_src(mac(&address[..6]));
    }
    parse_l2(ether_type, after, missing, key, true, &mut ())
}

fn parse_ethernet(
    frame: &[u8],
    missing: usize,
    key: &mut FlowKey,
    allow_vxlan: bool,
    layout: &mut impl LayoutSink,
) -> Result<(), Malformed> {
    // OVS: shorter than an Ethernet header, nothing is extracted at all.
    if frame.len() < 14 {
        return Err(cut(frame.len(), missing, 14, Malformed::TruncatedEthernet));
    }
    key.set_dl_dst(mac(&frame[0..6]));
    key.set_dl_src(mac(&frame[6..12]));
    parse_l2(be16(frame, 12), &frame[14..], missing, key, allow_vxlan, layout)
}

/// Everything after the MAC addresses, given the first EtherType (or TPID) and the bytes
/// after it: OVS's `parse_vlan`, `parse_ethertype` and the rest of `miniflow_extract`.
fn parse_l2(
    mut ether_type: u16,
    mut rest: &[u8],
    missing: usize,
    key: &mut FlowKey,
    allow_vxlan: bool,
    layout: &mut impl LayoutSink,
) -> Result<(), Malformed> {
    let mut status = Ok(());
    let mut tags = 0;
    while matches!(ether_type, proto::ETH_VLAN | proto::ETH_QINQ) {
        if tags == 2 {
            // OVS parses two tags (its default vlan-limit); the third TPID is the EtherType.
            status = Err(Malformed::TooManyVlans);
            break;
        }
        if rest.len() < 4 {
            // OVS stops at a cut tag and reads its TPID as the EtherType.
            status = Err(cut(rest.len(), missing, 4, Malformed::TruncatedVlan));
            break;
        }
        let tci = be16(rest, 0) | proto::VLAN_CFI;
        if tags == 0 {
            key.set_vlan_tpid(ether_type);
            key.set_vlan_tci(tci);
        } else {
            key.set_vlan_tpid2(ether_type);
            key.set_vlan_tci2(tci);
        }
        tags += 1;
        ether_type = be16(rest, 2);
        rest = &rest[4..];
    }
    if ether_type < 0x0600 {
        // 802.3 length field: LLC/SNAP with a zero OUI carries an EtherType (if it is one);
        // anything else is OVS's FLOW_DL_TYPE_NONE.
        ether_type = match rest.get(..8) {
            Some([0xaa, 0xaa, 0x03, 0, 0, 0, hi, lo]) => {
                let snap = u16::from_be_bytes([*hi, *lo]);
                rest = &rest[8..];
                if snap >= 0x0600 {
                    snap
                } else {
                    proto::ETH_NONE
                }
            }
            _ if status.is_ok() && rest.len() < 8 && rest.len() + missing >= 8 => {
                status = Err(Malformed::SnaplenCut);
                proto::ETH_NONE
            }
            _ => proto::ETH_NONE,
        };
    }
    key.set_dl_type(ether_type);
    status?;
    match ether_type {
        proto::ETH_IPV4 => parse_ipv4(rest, missing, key, allow_vxlan, layout),
        proto::ETH_IPV6 => parse_ipv6(rest, missing, key, allow_vxlan, layout),
        proto::ETH_ARP | proto::ETH_RARP => parse_arp(rest, missing, key, layout),
        _ => Ok(()),
    }
}

fn mac(b: &[u8]) -> u64 {
    u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
}

/// OVS's `ipv4_sanity_check` and IPv4 branch. The version nibble is not looked at (OVS trusts
/// the EtherType); a header or total length that does not fit leaves no L3 fields; bytes past
/// the total length are padding, never transport header.
fn parse_ipv4(
    data: &[u8],
    missing: usize,
    key: &mut FlowKey,
    allow_vxlan: bool,
    layout: &mut impl LayoutSink,
) -> Result<(), Malformed> {
    if data.len() < 20 {
        return Err(cut(data.len(), missing, 20, Malformed::BadIpv4));
    }
    let ihl = (data[0] & 0x0f) as usize * 4;
    let total = be16(data, 2) as usize;
    let wire = data.len() + missing;
    if ihl < 20 || total > wire || ihl > total {
        return Err(Malformed::BadIpv4);
    }
    if data.len() < ihl {
        return Err(Malformed::SnaplenCut);
    }
    key.set_nw_src(be32(data, 12));
    key.set_nw_dst(be32(data, 16));
    let nw_proto = data[9];
    key.set_nw_proto(nw_proto);
    key.set_nw_tos(data[1]);
    key.set_nw_ttl(data[8]);
    let frag_off = be16(data, 6);
    let mut frag = 0;
    if frag_off & 0x3fff != 0 {
        frag = proto::FRAG_ANY;
        if frag_off & 0x1fff != 0 {
            frag |= proto::FRAG_LATER;
        }
    }
    key.set_nw_frag(frag);
    let end = total.min(data.len());
    layout.l3(&data[..end]);
    // OVS sets the transport offset of a later fragment too (its payload's start).
    layout.l4(&data[ihl..end]);
    if frag & proto::FRAG_LATER != 0 {
        return Ok(());
    }
    parse_l4(nw_proto, &data[ihl..end], total - end, key, allow_vxlan)
}

/// OVS's `ipv6_sanity_check`, IPv6 branch and `parse_ipv6_ext_hdrs__`. The payload length
/// bounds everything after the fixed header (a payload length beyond the bytes present leaves
/// no L3 fields; bytes past it are padding); the version nibble is not looked at.
fn parse_ipv6(
    data: &[u8],
    missing: usize,
    key: &mut FlowKey,
    allow_vxlan: bool,
    layout: &mut impl LayoutSink,
) -> Result<(), Malformed> {
    if data.len() < 40 {
        return Err(cut(data.len(), missing, 40, Malformed::BadIpv6));
    }
    let payload_len = be16(data, 4) as usize;
    if 40 + payload_len > data.len() + missing {
        return Err(Malformed::BadIpv6);
    }
    key.set(id::IPV6_SRC, u128::from_be_bytes(data[8..24].try_into().expect("16 bytes")));
    key.set(id::IPV6_DST, u128::from_be_bytes(data[24..40].try_into().expect("16 bytes")));
    let end = (40 + payload_len).min(data.len());
    layout.l3(&data[..end]);
    let mut rest = &data[40..end];
    // Bytes of the payload on the wire past the captured ones.
    let missing = 40 + payload_len - end;
    let mut snaplen_cut = false;
    let mut next = data[6];
    let mut frag = 0u8;
    loop {
        if !matches!(next, 0 | 43 | 60 | 51 | 44) {
            break;
        }
        // OVS: an extension header needs 8 bytes; a cut one leaves only the addresses.
        if rest.len() < 8 {
            return Err(cut(rest.len(), missing, 8, Malformed::BadIpv6Extension));
        }
        let len = match next {
            51 => (rest[1] as usize + 2) * 4,
            44 => 8,
            _ => (rest[1] as usize + 1) * 8,
        };
        let header = next;
        next = rest[0];
        let offlg = be16(rest, 2);
        match rest.get(len..) {
            Some(after) => rest = after,
            // The header after this one is past the capture: L3 is known, L4 is not, and
            // neither is the protocol if that header is another extension header.
            None if rest.len() + missing >= len => {
                snaplen_cut = true;
                if matches!(next, 0 | 43 | 60 | 51 | 44) {
                    next = 0;
                }
                break;
            }
            None => return Err(Malformed::BadIpv6Extension),
        }
        // OVS reads on past the first fragment only: any bit of the offset/flags word (even
        // a reserved one) makes a fragment; an offset makes a later one, whose nw_proto is
        // the fragment header's own number.
        if header == 44 && offlg != 0 {
            frag = proto::FRAG_ANY;
            if offlg & 0xfff8 != 0 {
                frag |= proto::FRAG_LATER;
                next = 44;
                break;
            }
        }
    }
    let flow = be32(data, 0);
    key.set(id::IPV6_LABEL, (flow & 0x000f_ffff) as u128);
    key.set_nw_tos((flow >> 20) as u8);
    key.set_nw_ttl(data[7]);
    key.set_nw_proto(next);
    key.set_nw_frag(frag);
    if frag & proto::FRAG_LATER != 0 {
        // As for IPv4, OVS puts the transport offset at a later fragment's payload.
        layout.l4(rest);
        return Ok(());
    }
    if snaplen_cut {
        return Err(Malformed::SnaplenCut);
    }
    layout.l4(rest);
    parse_l4(next, rest, missing, key, allow_vxlan)
}

fn parse_arp(
    data: &[u8],
    missing: usize,
    key: &mut FlowKey,
    layout: &mut impl LayoutSink,
) -> Result<(), Malformed> {
    // Ethernet/IPv4 ARP only, as OVS: htype 1, ptype 0x0800, hlen 6, plen 4.
    let body = data.get(..28).ok_or_else(|| cut(data.len(), missing, 28, Malformed::TruncatedArp))?;
    let op = be16(body, 6);
    let is_eth_ipv4 = body[0..2] == [0, 1] && body[2..4] == [8, 0] && body[4] == 6 && body[5] == 4;
    if !is_eth_ipv4 {
        return Ok(());
    }
    // OVS keeps the opcode only when it fits its 8-bit field.
    if op <= 0xff {
        key.set(id::ARP_OP, op as u128);
    }
    key.set(id::ARP_SHA, mac(&body[8..14]) as u128);
    key.set(id::ARP_SPA, be32(body, 14) as u128);
    key.set(id::ARP_THA, mac(&body[18..24]) as u128);
    key.set(id::ARP_TPA, be32(body, 24) as u128);
    layout.l3(data);
    Ok(())
}

/// The transport header of a first (or only) fragment, as OVS reads it: each kind needs its
/// fixed header present or contributes nothing.
fn parse_l4(
    nw_proto: u8,
    data: &[u8],
    missing: usize,
    key: &mut FlowKey,
    allow_vxlan: bool,
) -> Result<(), Malformed> {
    let need = match nw_proto {
        proto::IP_TCP => 20,
        proto::IP_SCTP => 12,
        proto::IP_UDP | proto::IP_ICMP => 8,
        // OVS picks the transport parser by protocol number alone, whatever the IP version.
        IP_IGMP | proto::IP_ICMPV6 => 8,
        _ => return Ok(()),
    };
    if data.len() < need {
        return Err(cut(data.len(), missing, need, Malformed::TruncatedL4));
    }
    match nw_proto {
        proto::IP_TCP => {
            // OVS: a data offset below 5 words or beyond the segment gives no TCP fields.
            let offset = (data[12] >> 4) as usize * 4;
            if offset < 20 || offset > data.len() + missing {
                return Err(Malformed::BadTcpOffset);
            }
            key.set_tp_src(be16(data, 0));
            key.set_tp_dst(be16(data, 2));
            // 12 flag bits, as OVS's TCP_FLAGS: the 3 reserved bits, NS, then CWR..FIN.
            key.set(id::TCP_FLAGS, (be16(data, 12) & 0x0fff) as u128);
        }
        proto::IP_UDP => {
            let dport = be16(data, 2);
            key.set_tp_src(be16(data, 0));
            key.set_tp_dst(dport);
            if allow_vxlan && dport == VXLAN_PORT {
                return parse_vxlan(&data[8..], missing, key);
            }
        }
        proto::IP_SCTP => {
            key.set_tp_src(be16(data, 0));
            key.set_tp_dst(be16(data, 2));
        }
        // ICMP, ICMPv6 and IGMP: type and code in the port fields, as OVS keeps them.
        _ => {
            key.set_tp_src(data[0] as u16);
            key.set_tp_dst(data[1] as u16);
        }
    }
    Ok(())
}

/// VXLAN (RFC 7348): the VNI becomes `tun_id` and the inner frame becomes the packet, as
/// when OVS receives on a VXLAN tunnel port. Nested VXLAN is not decapsulated again.
fn parse_vxlan(data: &[u8], missing: usize, key: &mut FlowKey) -> Result<(), Malformed> {
    let h = data.get(..8).ok_or_else(|| cut(data.len(), missing, 8, Malformed::BadVxlan))?;
    if h[0] & 0x08 == 0 {
        return Err(Malformed::BadVxlan);
    }
    let vni = u32::from_be_bytes([0, h[4], h[5], h[6]]);
    let in_port = key.in_port();
    *key = FlowKey::default();
    key.set_in_port(in_port);
    key.set_tun_id(vni as u64);
    parse_ethernet(&data[8..], missing, key, false, &mut ()).map_err(|e| match e {
        Malformed::SnaplenCut => e,
        _ => Malformed::BadVxlan,
    })
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

    /// An Ethernet frame of `ether_type` carrying `payload`.
    fn eth(ether_type: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        f.extend_from_slice(&ether_type.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// An IPv4 packet 10.0.0.1 → 10.0.0.2 of `nw_proto` carrying `l4`.
    fn ipv4(nw_proto: u8, l4: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64).write(&mut out, nw_proto.into(), l4).unwrap();
        out
    }

    /// An IPv6 packet 0::0 → 101::101 with next header `next`, hop limit 9 and `payload`
    /// (by hand: the builder interprets extension headers).
    fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![0x60, 0, 0, 0];
        out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        out.extend_from_slice(&[next, 9]);
        out.extend_from_slice(&[0; 16]);
        out.extend_from_slice(&[1; 16]);
        out.extend_from_slice(payload);
        out
    }

    fn parse(frame: &[u8], link: LinkKind) -> (Result<(), Malformed>, FlowKey) {
        let mut k = FlowKey::default();
        (parse_frame(frame, link, 1, &mut k), k)
    }

    #[test]
    fn igmp_type_and_code_are_the_ports() {
        let (r, k) = parse(&eth(0x0800, &ipv4(2, &[0x11, 0x64, 0, 0, 224, 0, 0, 1])), LinkKind::Ethernet);
        assert_eq!(r, Ok(()));
        assert_eq!((k.nw_proto(), k.tp_src(), k.tp_dst()), (2, 0x11, 0x64));
        let (r, k) = parse(&eth(0x0800, &ipv4(2, &[0x11, 0x64, 0, 0])), LinkKind::Ethernet);
        assert_eq!((r, k.tp_src()), (Err(Malformed::TruncatedL4), 0), "an 8-byte header or nothing");
    }

    /// OVS trusts the EtherType: an IPv4 header whose version nibble says 6 is still IPv4.
    #[test]
    fn the_ip_version_nibble_is_not_checked() {
        let mut ip = ipv4(17, &[0, 53, 0, 54, 0, 8, 0, 0]);
        ip[0] = 0x65;
        let (r, k) = parse(&eth(0x0800, &ip), LinkKind::Ethernet);
        assert_eq!(r, Ok(()));
        assert_eq!((k.nw_src(), k.tp_src(), k.tp_dst()), (0x0a00_0001, 53, 54));
    }

    #[test]
    fn the_ipv6_payload_length_bounds_the_packet() {
        let udp = [0, 53, 0, 54, 0, 8, 0, 0];
        let mut ip = ipv6(17, &udp);
        // Longer than the bytes present: no L3 at all.
        ip[5] = 9;
        let (r, k) = parse(&eth(0x86dd, &ip), LinkKind::Ethernet);
        assert_eq!((r, k.get(id::IPV6_SRC), k.nw_ttl()), (Err(Malformed::BadIpv6), 0, 0));
        // Shorter: the UDP header past it is padding, not transport.
        ip[5] = 4;
        let (r, k) = parse(&eth(0x86dd, &ip), LinkKind::Ethernet);
        assert_eq!((r, k.nw_proto(), k.nw_ttl(), k.tp_src()), (Err(Malformed::TruncatedL4), 17, 9, 0));
    }

    #[test]
    fn ipv6_extension_headers_as_ovs_walks_them() {
        let udp = [0, 53, 0, 54, 0, 8, 0, 0];
        // Hop-by-hop (8 bytes) then UDP.
        let mut hbh = vec![17, 0, 0, 0, 0, 0, 0, 0];
        hbh.extend_from_slice(&udp);
        let (r, k) = parse(&eth(0x86dd, &ipv6(0, &hbh)), LinkKind::Ethernet);
        assert_eq!((r, k.nw_proto(), k.tp_dst()), (Ok(()), 17, 54));
        // Cut inside the extension header: the addresses stay, the rest of L3 does not.
        let (r, k) = parse(&eth(0x86dd, &ipv6(0, &hbh[..6])), LinkKind::Ethernet);
        assert_eq!(r, Err(Malformed::BadIpv6Extension));
        assert_eq!((k.get(id::IPV6_DST) != 0, k.nw_ttl(), k.nw_proto()), (true, 0, 0));
        // A fragment header with only a reserved bit set is a (first) fragment.
        let mut frag = vec![17, 0, 0, 0b0000_0110, 0, 0, 0, 1];
        frag.extend_from_slice(&udp);
        let (_, k) = parse(&eth(0x86dd, &ipv6(44, &frag)), LinkKind::Ethernet);
        assert_eq!((k.nw_frag(), k.nw_proto(), k.tp_src()), (proto::FRAG_ANY, 17, 53));
        // A later fragment: nw_proto is the fragment header's number, no L4.
        frag[2] = 1;
        let (_, k) = parse(&eth(0x86dd, &ipv6(44, &frag)), LinkKind::Ethernet);
        assert_eq!((k.nw_frag(), k.nw_proto(), k.tp_src()), (proto::FRAG_ANY | proto::FRAG_LATER, 44, 0));
    }

    #[test]
    fn tcp_flags_keep_twelve_bits_and_bad_offsets_give_no_l4() {
        let mut tcp = [0u8; 20];
        tcp[..4].copy_from_slice(&[0x04, 0xd2, 0, 80]);
        tcp[12] = 0x5f; // data offset 5, the three reserved bits and NS
        tcp[13] = 0x12; // SYN|ACK
        let (r, k) = parse(&eth(0x0800, &ipv4(6, &tcp)), LinkKind::Ethernet);
        assert_eq!((r, k.get(id::TCP_FLAGS), k.tp_src()), (Ok(()), 0xf12, 1234));
        for offset in [0x40, 0x60] {
            // 4 words (below the minimum) and 6 words (beyond the 20 bytes present).
            tcp[12] = offset;
            let (r, k) = parse(&eth(0x0800, &ipv4(6, &tcp)), LinkKind::Ethernet);
            assert_eq!((r, k.tp_src(), k.get(id::TCP_FLAGS)), (Err(Malformed::BadTcpOffset), 0, 0));
            assert_eq!(k.nw_proto(), 6, "L3 stays");
        }
    }

    #[test]
    fn two_vlan_tags_then_the_tpid_is_the_ethertype() {
        let tag = |tpid: u16, vid: u16| [tpid.to_be_bytes(), vid.to_be_bytes()].concat();
        let mut body = [tag(0x88a8, 10), tag(0x8100, 20), tag(0x8100, 30)].concat();
        body.extend_from_slice(&[0x08, 0x00]);
        body.extend_from_slice(&ipv4(17, &[0; 8]));
        let mut frame = eth(0, &[]);
        frame.truncate(12);
        frame.extend_from_slice(&body);
        let (r, k) = parse(&frame, LinkKind::Ethernet);
        assert_eq!(r, Err(Malformed::TooManyVlans));
        assert_eq!((k.vlan_tci(), k.vlan_tci2(), k.dl_type(), k.nw_src()), (0x100a, 0x1014, 0x8100, 0));
        // A tag cut short: its TPID is the EtherType.
        let (r, k) = parse(&frame[..15], LinkKind::Ethernet);
        assert_eq!((r, k.dl_type(), k.has_vlan()), (Err(Malformed::TruncatedVlan), 0x88a8, false));
    }

    #[test]
    fn every_link_type() {
        let ip = ipv4(17, &[0, 53, 0, 54, 0, 8, 0, 0]);
        // Linux cooked v1 from an Ethernet device: the sender's address is dl_src.
        let mut sll = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 7, 0, 0, 0x08, 0x00];
        sll.extend_from_slice(&ip);
        let (r, k) = parse(&sll, LinkKind::LinuxSll);
        assert_eq!((r, k.dl_src(), k.dl_dst(), k.tp_dst()), (Ok(()), 0x0200_0000_0007, 0, 54));
        // From a PPP device (ARPHRD 512): no flow, as OVS gives none.
        sll[2..4].copy_from_slice(&512u16.to_be_bytes());
        let (r, k) = parse(&sll, LinkKind::LinuxSll);
        assert_eq!((r, k.dl_type()), (Err(Malformed::UnsupportedLinkLayer), 0));
        // Linux cooked v2: protocol first, ARPHRD at 8, address length at 11.
        let mut sll2 = vec![0x08, 0x00, 0, 0, 0, 0, 0, 3, 0, 1, 0, 6, 2, 0, 0, 0, 0, 9, 0, 0];
        sll2.extend_from_slice(&ip);
        let (r, k) = parse(&sll2, LinkKind::LinuxSll2);
        assert_eq!((r, k.dl_src(), k.nw_dst(), k.tp_src()), (Ok(()), 0x0200_0000_0009, 0x0a00_0002, 53));
        // BSD loopback: AF_INET in little-endian (NULL), AF_INET6 = 30 in big-endian (LOOP).
        let (r, k) = parse(&[&2u32.to_le_bytes()[..], &ip].concat(), LinkKind::Null);
        assert_eq!((r, k.dl_type(), k.tp_dst()), (Ok(()), 0x0800, 54));
        let v6 = ipv6(17, &[0, 53, 0, 54, 0, 8, 0, 0]);
        let (r, k) = parse(&[&30u32.to_be_bytes()[..], &v6].concat(), LinkKind::Null);
        assert_eq!((r, k.dl_type(), k.tp_dst()), (Ok(()), 0x86dd, 54));
        let (r, _) = parse(&[&7u32.to_le_bytes()[..], &ip].concat(), LinkKind::Null);
        assert_eq!(r, Err(Malformed::UnsupportedLinkLayer));
        // Raw IP.
        let (r, k) = parse(&v6, LinkKind::RawIp);
        assert_eq!((r, k.dl_type(), k.nw_ttl()), (Ok(()), 0x86dd, 9));
        // Each header cut short.
        for (frame, link) in
            [(&sll[..15], LinkKind::LinuxSll), (&sll2[..19], LinkKind::LinuxSll2), (&ip[..0], LinkKind::Null)]
        {
            assert_eq!(parse(frame, link).0, Err(Malformed::TruncatedEthernet));
        }
    }

    /// Against the wire length, a capture cut after its headers parses as the whole packet;
    /// a cut inside a header is [`Malformed::SnaplenCut`], never the damage OVS would see.
    #[test]
    fn snaplen_cuts_are_read_against_the_wire_length() {
        let mut tcp = [0u8; 20];
        tcp[..4].copy_from_slice(&[0x04, 0xd2, 0, 80]);
        tcp[12] = 0x50;
        let frame = eth(0x0800, &ipv4(6, &[&tcp[..], &[7; 400]].concat()));
        let (_, whole) = parse(&frame, LinkKind::Ethernet);
        let wire = frame.len() as u32;
        let mut k = FlowKey::default();
        for keep in [54, 60, 96] {
            assert_eq!(parse_captured(&frame[..keep], wire, LinkKind::Ethernet, 1, &mut k), Ok(()));
            assert_eq!(k, whole, "cut at {keep}");
            // OVS, seeing only the captured bytes, finds the IPv4 total length too long.
            assert_eq!(parse_frame(&frame[..keep], LinkKind::Ethernet, 1, &mut k), Err(Malformed::BadIpv4));
        }
        // Inside the TCP header: L3 kept, L4 cut; inside the IPv4 header; inside Ethernet.
        for (keep, nw_src) in [(40, 0x0a00_0001), (30, 0), (10, 0)] {
            assert_eq!(
                parse_captured(&frame[..keep], wire, LinkKind::Ethernet, 1, &mut k),
                Err(Malformed::SnaplenCut)
            );
            assert_eq!((k.nw_src(), k.tp_src()), (nw_src, 0), "cut at {keep}");
        }
        // A packet shorter than its own headers on the wire is damage, not a cut.
        assert_eq!(parse_captured(&frame[..40], 40, LinkKind::Ethernet, 1, &mut k), Err(Malformed::BadIpv4));
        // IPv6 with a hop-by-hop header: cut after it, and inside the UDP header after it.
        let mut hbh = vec![17, 0, 0, 0, 0, 0, 0, 0, 0, 53, 0, 54, 0, 8, 0, 0];
        hbh.extend_from_slice(&[0; 100]);
        let v6 = eth(0x86dd, &ipv6(0, &hbh));
        let wire = v6.len() as u32;
        assert_eq!(parse_captured(&v6[..14 + 40 + 16], wire, LinkKind::Ethernet, 1, &mut k), Ok(()));
        assert_eq!((k.nw_proto(), k.tp_dst()), (17, 54));
        assert_eq!(
            parse_captured(&v6[..14 + 40 + 12], wire, LinkKind::Ethernet, 1, &mut k),
            Err(Malformed::SnaplenCut)
        );
        assert_eq!((k.nw_proto(), k.nw_ttl(), k.tp_dst()), (17, 9, 0));
        assert_eq!(
            parse_captured(&v6[..14 + 40 + 4], wire, LinkKind::Ethernet, 1, &mut k),
            Err(Malformed::SnaplenCut)
        );
    }

    /// OVS picks the transport parser by protocol number alone: IGMP over IPv6 and ICMPv6
    /// over IPv4 still give type and code, printed as ports (OVS names them icmp_* only for
    /// ICMP over IPv4 and ICMPv6 over IPv6).
    #[test]
    fn transport_parsers_follow_the_protocol_number_alone() {
        let (r, k) = parse(&eth(0x86dd, &ipv6(2, &[0x11, 0x64, 0, 0, 0, 0, 0, 0])), LinkKind::Ethernet);
        assert_eq!((r, k.tp_src(), k.tp_dst()), (Ok(()), 0x11, 0x64));
        assert!(crate::packet::format::format_flow(&k)
            .ends_with("nw_proto=2,nw_tos=0,nw_ecn=0,nw_ttl=9,nw_frag=no,tp_src=17,tp_dst=100"));
        let (r, k) = parse(&eth(0x0800, &ipv4(58, &[128, 0, 0, 0, 0, 0, 0, 0])), LinkKind::Ethernet);
        assert_eq!((r, k.tp_src()), (Ok(()), 128));
        assert!(crate::packet::format::format_flow(&k).ends_with("tp_src=128,tp_dst=0"));
        let (_, k) = parse(&eth(0x86dd, &ipv6(58, &[128, 0, 0, 0, 0, 0, 0, 0])), LinkKind::Ethernet);
        assert!(crate::packet::format::format_flow(&k).ends_with("icmp_type=128,icmp_code=0"));
    }
}
