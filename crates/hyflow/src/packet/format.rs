//! Reading and writing field values, packets and matches in `ovs-ofctl` notation.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::field::{id, proto, FieldId, Notation, FIELDS};
use super::key::{FlowKey, FlowMask};

/// OVS's names for `nw_frag` value/mask pairs.
const FRAG_NAMES: [(&str, u128, u128); 5] =
    [("no", 0, 3), ("yes", 1, 1), ("first", 1, 3), ("later", 3, 3), ("not_later", 0, 2)];

/// Why a field value could not be read; `in_mask` tells whether the part after `/` is at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueError {
    /// Human-readable reason.
    pub reason: String,
    /// The error is in the mask (after `/`), not the value.
    pub in_mask: bool,
}

fn verr(reason: impl Into<String>, in_mask: bool) -> ValueError {
    ValueError { reason: reason.into(), in_mask }
}

/// Parses an unsigned integer in decimal or `0x` hex.
pub(crate) fn parse_int(s: &str) -> Option<u128> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if h.is_empty() {
            return None;
        }
        u128::from_str_radix(h, 16).ok()
    } else if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse().ok()
    } else {
        None
    }
}

fn parse_mac(s: &str) -> Option<u128> {
    let mut v: u128 = 0;
    let mut n = 0;
    for part in s.split(':') {
        if part.is_empty() || part.len() > 2 {
            return None;
        }
        v = (v << 8) | u8::from_str_radix(part, 16).ok()? as u128;
        n += 1;
    }
    (n == 6).then_some(v)
}

/// Mask of the `len` leading bits of a `bits`-wide field.
pub(crate) fn prefix_mask(bits: u32, len: u32) -> u128 {
    let full = if bits == 128 { u128::MAX } else { (1u128 << bits) - 1 };
    if len == 0 {
        0
    } else {
        full & !full.checked_shr(len).unwrap_or(0)
    }
}

/// Parses `value[/mask]` for `field`. Returns the value and the mask (all ones if absent).
/// The value is not yet ANDed with the mask.
pub(crate) fn parse_field_value(field: FieldId, text: &str) -> Result<(u128, u128), ValueError> {
    let def = field.def();
    let full = field.full_mask();
    if def.notation == Notation::CtState {
        let (v, m) = super::ct_state::parse(text).map_err(|e| verr(e, false))?;
        return Ok((v as u128, m as u128));
    }
    let (vtext, mtext) = match text.split_once('/') {
        Some((v, m)) => (v, Some(m)),
        None => (text, None),
    };
    if field == id::NW_FRAG && mtext.is_none() {
        // OVS's named fragment states: value/mask over the two nw_frag bits.
        let named = FRAG_NAMES.iter().find(|(n, _, _)| *n == vtext).map(|&(_, v, m)| (v, m));
        if let Some((v, m)) = named {
            return Ok((v, m));
        }
    }
    let one = |s: &str, in_mask: bool| -> Result<u128, ValueError> {
        let v = match def.notation {
            Notation::Mac => {
                parse_mac(s).ok_or_else(|| verr(format!("'{s}' is not a MAC address"), in_mask))?
            }
            Notation::Ipv4 => s
                .parse::<Ipv4Addr>()
                .map(|a| u32::from(a) as u128)
                .map_err(|_| verr(format!("'{s}' is not an IPv4 address"), in_mask))?,
            Notation::Ipv6 => s
                .parse::<Ipv6Addr>()
                .map(u128::from)
                .map_err(|_| verr(format!("'{s}' is not an IPv6 address"), in_mask))?,
            Notation::Decimal | Notation::Hex | Notation::CtState => {
                parse_int(s).ok_or_else(|| verr(format!("'{s}' is not a number"), in_mask))?
            }
        };
        if v & !full != 0 {
            return Err(verr(format!("'{s}' does not fit in {} ({} bits)", def.name, def.bits), in_mask));
        }
        Ok(v)
    };
    let value = one(vtext, false)?;
    let mask = match mtext {
        None => full,
        Some(m) => {
            if !def.maskable {
                return Err(verr(format!("{} cannot be masked", def.name), true));
            }
            let prefix_field = matches!(def.notation, Notation::Ipv4 | Notation::Ipv6);
            if prefix_field && !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()) {
                let len: u32 = m.parse().map_err(|_| verr(format!("bad prefix length '{m}'"), true))?;
                if len > def.bits as u32 {
                    return Err(verr(format!("prefix length {len} is longer than {} bits", def.bits), true));
                }
                prefix_mask(def.bits as u32, len)
            } else {
                one(m, true)?
            }
        }
    };
    Ok((value, mask))
}

fn fmt_mac(v: u128) -> String {
    let b = (v as u64).to_be_bytes();
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[2], b[3], b[4], b[5], b[6], b[7])
}

/// Writes one value of `field` in its notation (no mask).
pub(crate) fn format_value(field: FieldId, v: u128) -> String {
    let def = field.def();
    match def.notation {
        Notation::Mac => fmt_mac(v),
        Notation::Ipv4 => Ipv4Addr::from(v as u32).to_string(),
        Notation::Ipv6 => Ipv6Addr::from(v).to_string(),
        Notation::Decimal => v.to_string(),
        Notation::CtState => super::ct_state::format_exact(v as u8),
        Notation::Hex => {
            let digits = (def.bits as usize).div_ceil(4);
            if digits <= 4 {
                format!("0x{v:0digits$x}")
            } else if v == 0 {
                // C's `%#x`, as OVS prints wider fields: no prefix on zero.
                "0".to_string()
            } else {
                format!("0x{v:x}")
            }
        }
    }
}

/// Writes `value/mask` (or just `value` when exact), using prefix notation for CIDR masks.
pub(crate) fn format_masked(field: FieldId, v: u128, m: u128) -> String {
    let def = field.def();
    let full = field.full_mask();
    if m == full {
        return format_value(field, v);
    }
    if def.notation == Notation::CtState {
        return super::ct_state::format_masked(v as u8, m as u8);
    }
    if matches!(def.notation, Notation::Ipv4 | Notation::Ipv6) {
        let len = m.count_ones();
        if prefix_mask(def.bits as u32, len) == m {
            return format!("{}/{}", format_value(field, v), len);
        }
    }
    let mask_text = match def.notation {
        Notation::Decimal => format!("0x{m:x}"),
        _ => format_value(field, m),
    };
    let value_text = match def.notation {
        Notation::Decimal => format!("0x{v:x}"),
        _ => format_value(field, v),
    };
    format!("{value_text}/{mask_text}")
}

/// Fields printed for a packet, in order: each bit of the key appears once.
pub(crate) const PACKET_FIELDS: &[FieldId] = &[
    id::IN_PORT,
    id::TUN_ID,
    id::METADATA,
    id::reg(0),
    id::reg(1),
    id::reg(2),
    id::reg(3),
    id::reg(4),
    id::reg(5),
    id::reg(6),
    id::reg(7),
    id::reg(8),
    id::reg(9),
    id::reg(10),
    id::reg(11),
    id::reg(12),
    id::reg(13),
    id::reg(14),
    id::reg(15),
    id::DL_SRC,
    id::DL_DST,
    id::VLAN_TCI,
    id::VLAN_TPID,
    id::VLAN_TCI2,
    id::VLAN_TPID2,
    id::DL_TYPE,
    id::NW_SRC,
    id::NW_DST,
    id::IPV6_SRC,
    id::IPV6_DST,
    id::IPV6_LABEL,
    id::NW_PROTO,
    id::NW_TOS,
    id::NW_ECN,
    id::NW_TTL,
    id::NW_FRAG,
    id::ARP_SHA,
    id::ARP_THA,
    id::TCP_FLAGS,
    id::TP_SRC,
    id::TP_DST,
];

/// Value of a field as printed in packets: `nw_tos` shows only its DSCP bits, as ovs-ofctl.
pub(crate) fn packet_field_value(key: &FlowKey, f: FieldId) -> u128 {
    let v = key.get(f);
    if f == id::NW_TOS {
        v & 0xfc
    } else {
        v
    }
}

/// Every field of the key as `(name, value)` in ovs-ofctl notation.
pub(crate) fn packet_fields(key: &FlowKey) -> impl Iterator<Item = (&'static str, String)> + '_ {
    PACKET_FIELDS.iter().map(move |&f| (f.def().name, format_value(f, packet_field_value(key, f))))
}

/// A packet as a compact match-style string: only the fields that exist in it, non-zero
/// metadata, and `vlan_tci` only when tagged. `hyflow trace` accepts it back (an inner VLAN
/// tag has no ovs-ofctl field and is not shown).
pub(crate) fn format_packet(key: &FlowKey) -> String {
    let mut exact = FlowMask::CATCHALL;
    exact.unwildcard_all(id::IN_PORT);
    exact.unwildcard_all(id::DL_SRC);
    exact.unwildcard_all(id::DL_DST);
    exact.unwildcard_all(id::DL_TYPE);
    for f in [id::TUN_ID, id::METADATA].into_iter().chain((0..16).map(id::reg)).chain(id::DATAPATH) {
        if key.get(f) != 0 {
            exact.unwildcard_all(f);
        }
    }
    if key.has_vlan() {
        exact.unwildcard_all(id::VLAN_TCI);
    }
    for def_id in (0..FIELDS.len()).map(|i| FieldId(i as u8)) {
        let d = def_id.def();
        let shown_when_set = id::DATAPATH.contains(&def_id);
        if d.packet && d.prereq != super::field::Prereq::None && !shown_when_set && key.prereq_ok(d.prereq) {
            exact.unwildcard(def_id, def_id.full_mask());
        }
    }
    // Only DSCP is matchable in nw_tos; ECN is printed through nw_ecn.
    format_match_opts(key, &exact, false)
}

/// Network Service Header's EtherType.
const ETH_NSH: u16 = 0x894f;
/// MPLS EtherTypes, unicast and multicast.
const ETH_MPLS: u16 = 0x8847;
const ETH_MPLS_MCAST: u16 = 0x8848;

/// TCP flag names in bit order, as Open vSwitch prints `tcp_flags`.
const TCP_FLAG_NAMES: [&str; 12] =
    ["fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns", "[200]", "[400]", "[800]"];

/// A packet's flow as `ovs-ofctl parse-pcap` prints it (OVS's `flow_format` of an exact
/// match): the protocol shorthand, `tun_id` when set, `in_port=ANY` (a capture has no port),
/// the VLAN tags as `dl_vlan`/`dl_vlan_pcp` (and `dl_vlan1`/`dl_vlan_pcp1`, or
/// `vlan_tci1=0x0000`, for the inner one) or `vlan_tci=0x0000`, the Ethernet addresses,
/// `dl_type` when no shorthand names it, then every L3 field of the EtherType and every L4
/// field of the protocol (zero when the header was cut), but no L4 field for a later
/// fragment. Fields hyflow does not model (MPLS labels, NSH, IPv6 neighbour discovery) are
/// not printed.
pub fn format_flow(key: &FlowKey) -> String {
    let mut out: Vec<String> = Vec::new();
    let (dl, nw) = (key.dl_type(), key.nw_proto());
    let later = key.nw_frag() & proto::FRAG_LATER != 0;
    let (ipv4, ipv6) = (dl == proto::ETH_IPV4, dl == proto::ETH_IPV6);
    let shorthand = match (dl, nw) {
        (proto::ETH_IPV4, proto::IP_TCP) => Some("tcp"),
        (proto::ETH_IPV4, proto::IP_UDP) => Some("udp"),
        (proto::ETH_IPV4, proto::IP_SCTP) => Some("sctp"),
        (proto::ETH_IPV4, proto::IP_ICMP) => Some("icmp"),
        (proto::ETH_IPV4, _) => Some("ip"),
        (proto::ETH_IPV6, proto::IP_TCP) => Some("tcp6"),
        (proto::ETH_IPV6, proto::IP_UDP) => Some("udp6"),
        (proto::ETH_IPV6, proto::IP_SCTP) => Some("sctp6"),
        (proto::ETH_IPV6, proto::IP_ICMPV6) => Some("icmp6"),
        (proto::ETH_IPV6, _) => Some("ipv6"),
        (proto::ETH_ARP, _) => Some("arp"),
        (proto::ETH_RARP, _) => Some("rarp"),
        (ETH_MPLS, _) => Some("mpls"),
        (ETH_MPLS_MCAST, _) => Some("mplsm"),
        _ => None,
    };
    let names_proto =
        shorthand.is_some_and(|s| !matches!(s, "ip" | "ipv6" | "arp" | "rarp" | "mpls" | "mplsm"));
    out.extend(shorthand.map(str::to_string));
    if key.tun_id() != 0 {
        out.push(format!("tun_id={:#x}", key.tun_id()));
    }
    out.push("in_port=ANY".to_string());
    if key.has_vlan() {
        let tag = |tci: u16, suffix: &str| {
            format!("dl_vlan{suffix}={},dl_vlan_pcp{suffix}={}", tci & 0xfff, tci >> 13)
        };
        out.push(tag(key.vlan_tci(), ""));
        // OVS shows the inner tag, or its absence, once there is an outer one.
        if key.vlan_tci2() & proto::VLAN_CFI != 0 {
            out.push(tag(key.vlan_tci2(), "1"));
        } else {
            out.push("vlan_tci1=0x0000".to_string());
        }
    } else {
        out.push("vlan_tci=0x0000".to_string());
    }
    let value = |f: FieldId| format!("{}={}", f.def().name, format_value(f, key.get(f)));
    out.push(value(id::DL_SRC));
    out.push(value(id::DL_DST));
    if shorthand.is_none() {
        out.push(format!("dl_type={dl:#06x}"));
    }
    if ipv4 || ipv6 {
        if ipv4 {
            out.extend([id::NW_SRC, id::NW_DST].map(value));
        } else {
            out.extend([id::IPV6_SRC, id::IPV6_DST].map(value));
            out.push(format!("ipv6_label={:#07x}", key.get(id::IPV6_LABEL)));
        }
        if !names_proto {
            out.push(format!("nw_proto={nw}"));
        }
        let tos = key.nw_tos();
        out.push(format!("nw_tos={},nw_ecn={},nw_ttl={}", tos & 0xfc, tos & 3, key.nw_ttl()));
        let frag = match key.nw_frag() {
            0 => "no",
            f if f & proto::FRAG_LATER != 0 => "later",
            _ => "first",
        };
        out.push(format!("nw_frag={frag}"));
        if !later {
            let ports = format!("tp_src={},tp_dst={}", key.tp_src(), key.tp_dst());
            let icmp = format!("icmp_type={},icmp_code={}", key.tp_src(), key.tp_dst());
            match nw {
                proto::IP_TCP => {
                    let flags = key.get(id::TCP_FLAGS) as u16;
                    let names: Vec<&str> =
                        (0..12).filter(|b| flags >> b & 1 != 0).map(|b| TCP_FLAG_NAMES[b]).collect();
                    let flags = if names.is_empty() { "0".to_string() } else { names.join("|") };
                    out.push(format!("{ports},tcp_flags={flags}"));
                }
                // OVS names type and code icmp_* only for ICMP over IPv4 and ICMPv6 over IPv6.
                proto::IP_ICMP if ipv4 => out.push(icmp),
                proto::IP_ICMPV6 if ipv6 => out.push(icmp),
                proto::IP_UDP | proto::IP_SCTP | proto::IP_ICMP | proto::IP_ICMPV6 | 2 => out.push(ports),
                _ => {}
            }
        }
    } else if matches!(dl, proto::ETH_ARP | proto::ETH_RARP) {
        out.extend([id::ARP_SPA, id::ARP_TPA, id::ARP_OP, id::ARP_SHA, id::ARP_THA].map(value));
    } else if dl == ETH_NSH {
        // OVS prints the IP fields of an NSH packet's flow too (its payload may be IP); the
        // NSH fields themselves are not modelled.
        let tos = key.nw_tos();
        out.push(format!(
            "nw_proto={nw},nw_tos={},nw_ecn={},nw_ttl={},nw_frag=no",
            tos & 0xfc,
            tos & 3,
            key.nw_ttl()
        ));
    }
    out.join(",")
}

/// A match (value + mask) in ovs-ofctl syntax, with `ip`/`tcp`/... shorthands, as
/// `ovs-ofctl dump-flows` and `ofproto/trace`'s `Megaflow:` line print them.
pub fn format_match(value: &FlowKey, mask: &FlowMask) -> String {
    format_match_opts(value, mask, true)
}

fn format_match_opts(value: &FlowKey, mask: &FlowMask, shorthand: bool) -> String {
    let mut out = String::new();
    let mut push = |s: &str| {
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(s);
    };
    for f in id::DATAPATH {
        let m = mask.get(f);
        if m != 0 {
            push(&format!("{}={}", f.def().name, format_masked(f, value.get(f) & m, m)));
        }
    }
    let dl_exact = mask.get(id::DL_TYPE) == 0xffff;
    let proto_exact = mask.get(id::NW_PROTO) == 0xff;
    let dl = value.dl_type();
    let nw = value.nw_proto();
    let mut skip_dl = false;
    let mut skip_proto = false;
    if shorthand && dl_exact {
        let name = match (dl, proto_exact.then_some(nw)) {
            (proto::ETH_IPV4, Some(proto::IP_TCP)) => Some(("tcp", true)),
            (proto::ETH_IPV4, Some(proto::IP_UDP)) => Some(("udp", true)),
            (proto::ETH_IPV4, Some(proto::IP_SCTP)) => Some(("sctp", true)),
            (proto::ETH_IPV4, Some(proto::IP_ICMP)) => Some(("icmp", true)),
            (proto::ETH_IPV4, _) => Some(("ip", false)),
            (proto::ETH_IPV6, Some(proto::IP_TCP)) => Some(("tcp6", true)),
            (proto::ETH_IPV6, Some(proto::IP_UDP)) => Some(("udp6", true)),
            (proto::ETH_IPV6, Some(proto::IP_SCTP)) => Some(("sctp6", true)),
            (proto::ETH_IPV6, Some(proto::IP_ICMPV6)) => Some(("icmp6", true)),
            (proto::ETH_IPV6, _) => Some(("ipv6", false)),
            (proto::ETH_ARP, _) => Some(("arp", false)),
            _ => None,
        };
        if let Some((n, covers_proto)) = name {
            push(n);
            skip_dl = true;
            skip_proto = covers_proto;
        }
    }
    let field = |f: FieldId, out_push: &mut dyn FnMut(&str)| {
        let m = mask.get(f);
        if m != 0 {
            let text = format!("{}={}", f.def().name, format_masked(f, value.get(f) & m, m));
            out_push(&text);
        }
    };
    let is_arp = matches!(dl, proto::ETH_ARP | proto::ETH_RARP);
    let l4_icmp = matches!((dl, nw), (proto::ETH_IPV4, proto::IP_ICMP) | (proto::ETH_IPV6, proto::IP_ICMPV6));
    // OVS prints conj_id before the other metadata.
    field(id::CONJ_ID, &mut push);
    field(id::IN_PORT, &mut push);
    field(id::TUN_ID, &mut push);
    field(id::METADATA, &mut push);
    for r in 0..16 {
        field(id::reg(r), &mut push);
    }
    format_vlan(value.vlan_tci(), mask.get(id::VLAN_TCI) as u16, &mut push);
    field(id::DL_SRC, &mut push);
    field(id::DL_DST, &mut push);
    if !skip_dl {
        field(id::DL_TYPE, &mut push);
    }
    if is_arp {
        field(id::ARP_SPA, &mut push);
        field(id::ARP_TPA, &mut push);
        field(id::ARP_OP, &mut push);
        field(id::ARP_SHA, &mut push);
        field(id::ARP_THA, &mut push);
    } else {
        field(id::NW_SRC, &mut push);
        field(id::NW_DST, &mut push);
        field(id::IPV6_SRC, &mut push);
        field(id::IPV6_DST, &mut push);
        field(id::IPV6_LABEL, &mut push);
        if !skip_proto {
            field(id::NW_PROTO, &mut push);
        }
    }
    let tos_mask = mask.get(id::NW_TOS) as u8;
    if tos_mask & 0xfc != 0 {
        let v = value.nw_tos() & tos_mask & 0xfc;
        if tos_mask & 0xfc == 0xfc {
            push(&format!("nw_tos={v}"));
        } else {
            push(&format!("nw_tos=0x{v:x}/0x{:x}", tos_mask & 0xfc));
        }
    }
    if tos_mask & 0x3 != 0 {
        field(id::NW_ECN, &mut push);
    }
    field(id::NW_TTL, &mut push);
    let frag_mask = mask.get(id::NW_FRAG) as u8;
    if frag_mask != 0 {
        let v = value.nw_frag() & frag_mask;
        let name = match FRAG_NAMES.iter().find(|&&(_, fv, fm)| fv == v as u128 && fm == frag_mask as u128) {
            Some((n, _, _)) => n.to_string(),
            None => format!("0x{v:x}/0x{frag_mask:x}"),
        };
        push(&format!("nw_frag={name}"));
    }
    if !is_arp {
        field(id::ARP_SHA, &mut push);
        field(id::ARP_THA, &mut push);
    }
    field(id::TCP_FLAGS, &mut push);
    if l4_icmp {
        let (t, c) = if dl == proto::ETH_IPV4 {
            (id::ICMP_TYPE, id::ICMP_CODE)
        } else {
            (id::ICMPV6_TYPE, id::ICMPV6_CODE)
        };
        field(t, &mut push);
        field(c, &mut push);
    } else {
        field(id::TP_SRC, &mut push);
        field(id::TP_DST, &mut push);
    }
    out
}

/// VLAN TCI in OVS's friendliest form: `dl_vlan=`/`dl_vlan_pcp=` when the mask allows it,
/// `vlan_tci=v/m` otherwise.
fn format_vlan(tci: u16, mask: u16, push: &mut dyn FnMut(&str)) {
    if mask == 0 {
        return;
    }
    let v = tci & mask;
    let vid_m = mask & 0x0fff;
    let pcp_m = mask & 0xe000;
    let cfi = mask & proto::VLAN_CFI != 0;
    let present = v & proto::VLAN_CFI != 0;
    if cfi
        && present
        && (vid_m == 0 || vid_m == 0x0fff)
        && (pcp_m == 0 || pcp_m == 0xe000)
        && (vid_m | pcp_m) != 0
    {
        if vid_m != 0 {
            push(&format!("dl_vlan={}", v & 0x0fff));
        }
        if pcp_m != 0 {
            push(&format!("dl_vlan_pcp={}", v >> 13));
        }
    } else if mask == 0xffff {
        push(&format!("vlan_tci=0x{v:04x}"));
    } else {
        push(&format!("vlan_tci=0x{v:04x}/0x{mask:04x}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_in_each_notation() {
        assert_eq!(parse_field_value(id::NW_SRC, "10.0.0.0/8"), Ok((0x0a00_0000, 0xff00_0000)));
        assert_eq!(parse_field_value(id::NW_SRC, "10.0.0.0/255.0.255.0"), Ok((0x0a00_0000, 0xff00_ff00)));
        assert_eq!(parse_field_value(id::DL_SRC, "00:00:00:00:00:01"), Ok((1, 0xffff_ffff_ffff)));
        assert_eq!(parse_field_value(id::TP_DST, "0x40/0xfff0"), Ok((0x40, 0xfff0)));
        assert_eq!(parse_field_value(id::NW_FRAG, "later"), Ok((3, 3)));
        assert_eq!(parse_field_value(id::IPV6_SRC, "::1/128"), Ok((1, u128::MAX)));
        assert!(parse_field_value(id::NW_SRC, "10.0.0.0/33").unwrap_err().in_mask);
        assert!(parse_field_value(id::TP_DST, "70000").is_err());
        assert!(parse_field_value(id::NW_PROTO, "6/0xff").unwrap_err().in_mask);
        assert!(parse_field_value(id::DL_SRC, "00:00:00:00:01").is_err());
    }

    #[test]
    fn masked_values_print_like_ovs() {
        assert_eq!(format_masked(id::NW_SRC, 0x0a00_0000, 0xff00_0000), "10.0.0.0/8");
        assert_eq!(format_masked(id::TP_DST, 0x40, 0xfff0), "0x40/0xfff0");
        assert_eq!(format_value(id::DL_TYPE, 0x800), "0x0800");
        let mut k = FlowKey::default();
        k.set_vlan_tci(0x1007);
        let mut m = FlowMask::CATCHALL;
        m.set(id::VLAN_TCI, 0x1fff);
        assert_eq!(format_match(&k, &m), "dl_vlan=7");
        m.set(id::VLAN_TCI, 0x1000);
        assert_eq!(format_match(&k, &m), "vlan_tci=0x1000/0x1000");
    }
}
