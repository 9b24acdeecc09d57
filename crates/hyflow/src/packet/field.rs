//! The field table: every matchable/settable header or metadata field, declared once.
//!
//! A field is a *view* of bits inside the fixed-layout [`FlowKey`](super::FlowKey): a word, a
//! shift and a width. Several names can view the same bits (`tp_src`, `tcp_src`, `icmp_type`)
//! with different prerequisites, exactly as Open vSwitch's meta-flow does; parsing, printing,
//! masking and prerequisite checks are all driven from [`FIELDS`].

/// How a field's value is written in `ovs-ofctl` syntax.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notation {
    /// Decimal integer (`tp_dst=80`).
    Decimal,
    /// Hexadecimal with `0x` (`dl_type=0x0800`, `metadata=0x1`); fields of up to 16 bits are
    /// zero-padded to their width, wider ones print zero as `0` (C's `%#x`, as OVS).
    Hex,
    /// Colon-separated MAC (`dl_src=00:00:00:00:00:01`).
    Mac,
    /// Dotted IPv4 (`nw_src=10.0.0.1`), prefix masks printed as `/len`.
    Ipv4,
    /// RFC 5952 IPv6 (`ipv6_src=2001:db8::1`).
    Ipv6,
    /// Connection-tracking state flags: `new|trk` exact, `+trk-new` masked (see [`super::ct_state`]).
    CtState,
}

/// What a packet must be for a field to exist in it (OVS's `mf_prereqs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prereq {
    /// Always present.
    None,
    /// An 802.1Q/802.1ad tag is present (VLAN CFI bit set).
    Vlan,
    /// IPv4 or IPv6.
    Ip,
    /// `dl_type=0x0800`.
    Ipv4,
    /// `dl_type=0x86dd`.
    Ipv6,
    /// `dl_type=0x0806`.
    Arp,
    /// IPv4/IPv6 carrying TCP, UDP or SCTP (generic `tp_src`/`tp_dst`).
    L4Ports,
    /// IP with `nw_proto=6`.
    Tcp,
    /// IP with `nw_proto=17`.
    Udp,
    /// IP with `nw_proto=132`.
    Sctp,
    /// IPv4 with `nw_proto=1`.
    Icmp,
    /// IPv6 with `nw_proto=58`.
    Icmpv6,
    /// A valid connection-tracking entry (OVS `MFP_CT_VALID`): decided from `ct_state`, which
    /// [`Prereq::holds`] does not see (see [`valid_in_match`](super::ct_state::valid_in_match)).
    Ct,
}

impl Prereq {
    /// Whether the prerequisite holds given what is known about the packet: `dl_type`,
    /// `nw_proto` and VLAN presence (`None` = not known, e.g. wildcarded in a match), and
    /// whether it is a later IP fragment (which has no transport header). Shared by packets
    /// (everything known) and matches (only the exact fields known), as OVS's `mf_prereqs`.
    #[inline]
    pub fn holds(
        self,
        dl_type: Option<u16>,
        nw_proto: Option<u8>,
        vlan: Option<bool>,
        later_frag: bool,
    ) -> bool {
        let ip = matches!(dl_type, Some(proto::ETH_IPV4 | proto::ETH_IPV6));
        let l4 = ip && !later_frag;
        match self {
            Prereq::None => true,
            Prereq::Vlan => vlan == Some(true),
            Prereq::Ip => ip,
            Prereq::Ipv4 => dl_type == Some(proto::ETH_IPV4),
            Prereq::Ipv6 => dl_type == Some(proto::ETH_IPV6),
            Prereq::Arp => matches!(dl_type, Some(proto::ETH_ARP | proto::ETH_RARP)),
            Prereq::L4Ports => l4 && matches!(nw_proto, Some(proto::IP_TCP | proto::IP_UDP | proto::IP_SCTP)),
            Prereq::Tcp => l4 && nw_proto == Some(proto::IP_TCP),
            Prereq::Udp => l4 && nw_proto == Some(proto::IP_UDP),
            Prereq::Sctp => l4 && nw_proto == Some(proto::IP_SCTP),
            Prereq::Icmp => {
                !later_frag && dl_type == Some(proto::ETH_IPV4) && nw_proto == Some(proto::IP_ICMP)
            }
            Prereq::Icmpv6 => {
                !later_frag && dl_type == Some(proto::ETH_IPV6) && nw_proto == Some(proto::IP_ICMPV6)
            }
            Prereq::Ct => true,
        }
    }
}

/// Lookup stage a key word belongs to, as in OVS's staged classifier (metadata, L2, L3, L4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    /// Pipeline metadata: `in_port`, `metadata`, registers, tunnel id.
    Metadata = 0,
    /// Ethernet and VLAN.
    L2 = 1,
    /// IPv4/IPv6/ARP.
    L3 = 2,
    /// Transport ports.
    L4 = 3,
}

/// Identifies a field: an index into [`FIELDS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldId(pub u8);

/// Static description of one field.
#[derive(Debug)]
pub struct FieldDef {
    /// Canonical `ovs-ofctl` name.
    pub name: &'static str,
    /// Other names accepted on input (OXM/NXM names, older spellings).
    pub aliases: &'static [&'static str],
    /// Key word holding the field (the first of two for 128-bit fields).
    pub word: u8,
    /// Bit offset of the field's least significant bit within `word`.
    pub shift: u8,
    /// Width in bits (at most 64, or exactly 128 spanning `word` and `word + 1`).
    pub bits: u8,
    /// Whether `/mask` is accepted in matches.
    pub maskable: bool,
    /// Prerequisite for matching or setting the field.
    pub prereq: Prereq,
    /// Input/output notation.
    pub notation: Notation,
    /// Packet header state (kept in megaflows) as opposed to pipeline metadata (stripped).
    pub packet: bool,
}

/// Number of 64-bit words in a [`FlowKey`](super::FlowKey).
pub const KEY_WORDS: usize = 28;

/// Key word layout. Stages are contiguous word ranges, as in OVS's `struct flow` segments.
pub mod word {
    /// `metadata` (64 bits).
    pub const METADATA: u8 = 0;
    /// First of eight words holding `reg0`..`reg15` (two per word, even register high).
    pub(crate) const REGS: u8 = 1;
    /// `tun_id` (VXLAN VNI).
    pub const TUN_ID: u8 = 9;
    /// `in_port` (high 32 bits) and `conj_id` (low 32).
    pub const IN_PORT: u8 = 10;
    /// `recirc_id` (high 32) and `ct_mark` (low 32): datapath metadata recirculation and
    /// connection tracking set, in the metadata stage as in OVS's `struct flow`.
    pub(crate) const RECIRC_CT_MARK: u8 = 11;
    /// `ct_state` (bits 56..64), `ct_nw_proto` (48..56), `ct_zone` (32..48) and `dp_hash`
    /// (low 32).
    pub(crate) const CT_STATE_ZONE: u8 = 12;
    /// `ct_label` (two words).
    pub(crate) const CT_LABEL: u8 = 13;
    /// `dl_dst` (high 48) and `dl_type` (low 16).
    pub(crate) const ETH_DST_TYPE: u8 = 15;
    /// `dl_src` (high 48) and outer `vlan_tci` (low 16).
    pub(crate) const ETH_SRC_TCI: u8 = 16;
    /// Outer TPID, inner TCI, inner TPID.
    pub(crate) const VLAN_EXTRA: u8 = 17;
    /// `nw_src` (high 32) and `nw_dst` (low 32); ARP SPA/TPA share them.
    pub(crate) const NW_ADDRS: u8 = 18;
    /// The connection's original `ct_nw_src` (high 32) and `ct_nw_dst` (low 32): L3, as in
    /// OVS's `struct flow`.
    pub(crate) const CT_NW_ADDRS: u8 = 19;
    /// `ipv6_src` (two words).
    pub const IPV6_SRC: u8 = 20;
    /// `ipv6_dst` (two words).
    pub const IPV6_DST: u8 = 22;
    /// `ipv6_label`, `nw_frag`, `nw_tos`, `nw_ttl`, `nw_proto`.
    pub(crate) const NW_MISC: u8 = 24;
    /// `arp_sha` (high 48) and `tcp_flags` (low 16).
    pub(crate) const ARP_SHA_TCP_FLAGS: u8 = 25;
    /// `arp_tha` (high 48).
    pub const ARP_THA: u8 = 26;
    /// `tp_src` (bits 48..64), `tp_dst` (32..48), and the connection's original `ct_tp_src`
    /// (16..32) and `ct_tp_dst` (low 16).
    pub const PORTS: u8 = 27;
}

/// First key word of each stage after metadata: L2, L3, L4.
pub(crate) const STAGE_STARTS: [usize; 3] =
    [word::ETH_DST_TYPE as usize, word::NW_ADDRS as usize, word::PORTS as usize];

/// Stage of a key word.
pub(crate) fn stage_of_word(w: usize) -> Stage {
    if w < STAGE_STARTS[0] {
        Stage::Metadata
    } else if w < STAGE_STARTS[1] {
        Stage::L2
    } else if w < STAGE_STARTS[2] {
        Stage::L3
    } else {
        Stage::L4
    }
}

macro_rules! f {
    ($name:expr, [$($alias:expr),*], $word:expr, $shift:expr, $bits:expr, $maskable:expr,
     $prereq:ident, $notation:ident, $packet:expr) => {
        FieldDef {
            name: $name,
            aliases: &[$($alias),*],
            word: $word,
            shift: $shift,
            bits: $bits,
            maskable: $maskable,
            prereq: Prereq::$prereq,
            notation: Notation::$notation,
            packet: $packet,
        }
    };
}

use word::*;

/// Every field hyflow knows. Lookup by name or alias goes through this table; what is printed
/// for packets is `format::PACKET_FIELDS` (each bit once).
pub static FIELDS: &[FieldDef] = &[
    f!("in_port", ["NXM_OF_IN_PORT", "in_port_oxm"], IN_PORT, 32, 32, false, None, Decimal, true),
    f!("tun_id", ["tunnel_id", "NXM_NX_TUN_ID", "OXM_OF_TUNNEL_ID"], TUN_ID, 0, 64, true, None, Hex, true),
    f!("metadata", ["OXM_OF_METADATA", "NXM_OF_METADATA"], METADATA, 0, 64, true, None, Hex, false),
    f!("reg0", ["NXM_NX_REG0"], REGS, 32, 32, true, None, Hex, false),
    f!("reg1", ["NXM_NX_REG1"], REGS, 0, 32, true, None, Hex, false),
    f!("reg2", ["NXM_NX_REG2"], REGS + 1, 32, 32, true, None, Hex, false),
    f!("reg3", ["NXM_NX_REG3"], REGS + 1, 0, 32, true, None, Hex, false),
    f!("reg4", ["NXM_NX_REG4"], REGS + 2, 32, 32, true, None, Hex, false),
    f!("reg5", ["NXM_NX_REG5"], REGS + 2, 0, 32, true, None, Hex, false),
    f!("reg6", ["NXM_NX_REG6"], REGS + 3, 32, 32, true, None, Hex, false),
    f!("reg7", ["NXM_NX_REG7"], REGS + 3, 0, 32, true, None, Hex, false),
    f!("reg8", ["NXM_NX_REG8"], REGS + 4, 32, 32, true, None, Hex, false),
    f!("reg9", ["NXM_NX_REG9"], REGS + 4, 0, 32, true, None, Hex, false),
    f!("reg10", ["NXM_NX_REG10"], REGS + 5, 32, 32, true, None, Hex, false),
    f!("reg11", ["NXM_NX_REG11"], REGS + 5, 0, 32, true, None, Hex, false),
    f!("reg12", ["NXM_NX_REG12"], REGS + 6, 32, 32, true, None, Hex, false),
    f!("reg13", ["NXM_NX_REG13"], REGS + 6, 0, 32, true, None, Hex, false),
    f!("reg14", ["NXM_NX_REG14"], REGS + 7, 32, 32, true, None, Hex, false),
    f!("reg15", ["NXM_NX_REG15"], REGS + 7, 0, 32, true, None, Hex, false),
    f!("dl_src", ["eth_src", "NXM_OF_ETH_SRC", "OXM_OF_ETH_SRC"], ETH_SRC_TCI, 16, 48, true, None, Mac, true),
    f!(
        "dl_dst",
        ["eth_dst", "NXM_OF_ETH_DST", "OXM_OF_ETH_DST"],
        ETH_DST_TYPE,
        16,
        48,
        true,
        None,
        Mac,
        true
    ),
    f!("vlan_tci", ["NXM_OF_VLAN_TCI"], ETH_SRC_TCI, 0, 16, true, None, Hex, true),
    f!("vlan_tpid", [], VLAN_EXTRA, 48, 16, false, Vlan, Hex, true),
    f!("vlan_tci2", [], VLAN_EXTRA, 32, 16, false, None, Hex, true),
    f!("vlan_tpid2", [], VLAN_EXTRA, 16, 16, false, None, Hex, true),
    f!(
        "dl_type",
        ["eth_type", "NXM_OF_ETH_TYPE", "OXM_OF_ETH_TYPE"],
        ETH_DST_TYPE,
        0,
        16,
        false,
        None,
        Hex,
        true
    ),
    f!(
        "nw_src",
        ["ip_src", "ipv4_src", "NXM_OF_IP_SRC", "OXM_OF_IPV4_SRC"],
        NW_ADDRS,
        32,
        32,
        true,
        Ipv4,
        Ipv4,
        true
    ),
    f!(
        "nw_dst",
        ["ip_dst", "ipv4_dst", "NXM_OF_IP_DST", "OXM_OF_IPV4_DST"],
        NW_ADDRS,
        0,
        32,
        true,
        Ipv4,
        Ipv4,
        true
    ),
    f!("arp_spa", ["NXM_OF_ARP_SPA", "OXM_OF_ARP_SPA"], NW_ADDRS, 32, 32, true, Arp, Ipv4, true),
    f!("arp_tpa", ["NXM_OF_ARP_TPA", "OXM_OF_ARP_TPA"], NW_ADDRS, 0, 32, true, Arp, Ipv4, true),
    f!("ipv6_src", ["NXM_NX_IPV6_SRC", "OXM_OF_IPV6_SRC"], IPV6_SRC, 0, 128, true, Ipv6, Ipv6, true),
    f!("ipv6_dst", ["NXM_NX_IPV6_DST", "OXM_OF_IPV6_DST"], IPV6_DST, 0, 128, true, Ipv6, Ipv6, true),
    f!("ipv6_label", ["NXM_NX_IPV6_LABEL", "OXM_OF_IPV6_FLABEL"], NW_MISC, 32, 20, true, Ipv6, Hex, true),
    f!(
        "nw_proto",
        ["ip_proto", "NXM_OF_IP_PROTO", "OXM_OF_IP_PROTO"],
        NW_MISC,
        0,
        8,
        false,
        Ip,
        Decimal,
        true
    ),
    f!("arp_op", ["NXM_OF_ARP_OP", "OXM_OF_ARP_OP"], NW_MISC, 0, 8, false, Arp, Decimal, true),
    // nw_tos views the whole TOS byte but only its DSCP bits are matchable (OVS semantics).
    f!("nw_tos", ["NXM_OF_IP_TOS"], NW_MISC, 16, 8, false, Ip, Decimal, true),
    f!("ip_dscp", ["OXM_OF_IP_DSCP"], NW_MISC, 18, 6, false, Ip, Decimal, true),
    f!("nw_ecn", ["ip_ecn", "NXM_NX_IP_ECN", "OXM_OF_IP_ECN"], NW_MISC, 16, 2, false, Ip, Decimal, true),
    f!("nw_ttl", ["ip_ttl", "NXM_NX_IP_TTL"], NW_MISC, 8, 8, false, Ip, Decimal, true),
    f!("nw_frag", ["ip_frag", "NXM_NX_IP_FRAG"], NW_MISC, 24, 2, true, Ip, Decimal, true),
    f!("arp_sha", ["NXM_NX_ARP_SHA", "OXM_OF_ARP_SHA"], ARP_SHA_TCP_FLAGS, 16, 48, true, Arp, Mac, true),
    f!("arp_tha", ["NXM_NX_ARP_THA", "OXM_OF_ARP_THA"], ARP_THA, 16, 48, true, Arp, Mac, true),
    f!("tcp_flags", ["NXM_NX_TCP_FLAGS", "OXM_OF_TCP_FLAGS"], ARP_SHA_TCP_FLAGS, 0, 12, true, Tcp, Hex, true),
    f!("tp_src", [], PORTS, 48, 16, true, L4Ports, Decimal, true),
    f!("tp_dst", [], PORTS, 32, 16, true, L4Ports, Decimal, true),
    f!("tcp_src", ["NXM_OF_TCP_SRC", "OXM_OF_TCP_SRC"], PORTS, 48, 16, true, Tcp, Decimal, true),
    f!("tcp_dst", ["NXM_OF_TCP_DST", "OXM_OF_TCP_DST"], PORTS, 32, 16, true, Tcp, Decimal, true),
    f!("udp_src", ["NXM_OF_UDP_SRC", "OXM_OF_UDP_SRC"], PORTS, 48, 16, true, Udp, Decimal, true),
    f!("udp_dst", ["NXM_OF_UDP_DST", "OXM_OF_UDP_DST"], PORTS, 32, 16, true, Udp, Decimal, true),
    f!("sctp_src", ["OXM_OF_SCTP_SRC"], PORTS, 48, 16, true, Sctp, Decimal, true),
    f!("sctp_dst", ["OXM_OF_SCTP_DST"], PORTS, 32, 16, true, Sctp, Decimal, true),
    f!("icmp_type", ["NXM_OF_ICMP_TYPE", "OXM_OF_ICMPV4_TYPE"], PORTS, 48, 8, false, Icmp, Decimal, true),
    f!("icmp_code", ["NXM_OF_ICMP_CODE", "OXM_OF_ICMPV4_CODE"], PORTS, 32, 8, false, Icmp, Decimal, true),
    f!(
        "icmpv6_type",
        ["NXM_NX_ICMPV6_TYPE", "OXM_OF_ICMPV6_TYPE"],
        PORTS,
        48,
        8,
        false,
        Icmpv6,
        Decimal,
        true
    ),
    f!(
        "icmpv6_code",
        ["NXM_NX_ICMPV6_CODE", "OXM_OF_ICMPV6_CODE"],
        PORTS,
        32,
        8,
        false,
        Icmpv6,
        Decimal,
        true
    ),
    // The conjunctive match a lookup found (`conjunction(id,k/n)` flows): set only during the
    // classifier's second lookup, never by a packet; matched exactly, as OVS requires.
    f!("conj_id", [], IN_PORT, 0, 32, false, None, Decimal, false),
    // Datapath metadata of recirculation and connection tracking: set by the datapath
    // between passes (`ct` fills the ct_* fields, `recirc` the id), read-only to OpenFlow,
    // and kept in megaflows.
    f!("recirc_id", ["NXM_NX_RECIRC_ID"], RECIRC_CT_MARK, 32, 32, false, None, Hex, true),
    f!("ct_state", ["NXM_NX_CT_STATE"], CT_STATE_ZONE, 56, 8, true, None, CtState, true),
    f!("ct_zone", ["NXM_NX_CT_ZONE"], CT_STATE_ZONE, 32, 16, false, None, Decimal, true),
    f!("ct_mark", ["NXM_NX_CT_MARK"], RECIRC_CT_MARK, 0, 32, true, None, Hex, true),
    f!("ct_label", ["NXM_NX_CT_LABEL"], CT_LABEL, 0, 128, true, None, Hex, true),
    f!("ct_nw_proto", ["NXM_NX_CT_NW_PROTO"], CT_STATE_ZONE, 48, 8, false, Ct, Decimal, true),
    f!("ct_nw_src", ["NXM_NX_CT_NW_SRC"], CT_NW_ADDRS, 32, 32, true, Ct, Ipv4, true),
    f!("ct_nw_dst", ["NXM_NX_CT_NW_DST"], CT_NW_ADDRS, 0, 32, true, Ct, Ipv4, true),
    f!("ct_tp_src", ["NXM_NX_CT_TP_SRC"], PORTS, 16, 16, true, Ct, Decimal, true),
    f!("ct_tp_dst", ["NXM_NX_CT_TP_DST"], PORTS, 0, 16, true, Ct, Decimal, true),
    // The datapath's hash of the packet, set by its `hash` action before a recirculation
    // (select groups' `dp_hash` method); 0 until then.
    f!("dp_hash", ["NXM_NX_DP_HASH"], CT_STATE_ZONE, 0, 32, true, None, Hex, true),
    // Views of the registers OVN's flows use: xregN = reg(2N):reg(2N+1), xxregN =
    // reg(4N)..reg(4N+3), high register first, as OVS lays them out. Matches print them as
    // the registers, as OVS does.
    f!("xreg0", ["OXM_OF_PKT_REG0"], REGS, 0, 64, true, None, Hex, false),
    f!("xreg1", ["OXM_OF_PKT_REG1"], REGS + 1, 0, 64, true, None, Hex, false),
    f!("xreg2", ["OXM_OF_PKT_REG2"], REGS + 2, 0, 64, true, None, Hex, false),
    f!("xreg3", ["OXM_OF_PKT_REG3"], REGS + 3, 0, 64, true, None, Hex, false),
    f!("xreg4", ["OXM_OF_PKT_REG4"], REGS + 4, 0, 64, true, None, Hex, false),
    f!("xreg5", ["OXM_OF_PKT_REG5"], REGS + 5, 0, 64, true, None, Hex, false),
    f!("xreg6", ["OXM_OF_PKT_REG6"], REGS + 6, 0, 64, true, None, Hex, false),
    f!("xreg7", ["OXM_OF_PKT_REG7"], REGS + 7, 0, 64, true, None, Hex, false),
    f!("xxreg0", ["NXM_NX_XXREG0"], REGS, 0, 128, true, None, Hex, false),
    f!("xxreg1", ["NXM_NX_XXREG1"], REGS + 2, 0, 128, true, None, Hex, false),
    f!("xxreg2", ["NXM_NX_XXREG2"], REGS + 4, 0, 128, true, None, Hex, false),
    f!("xxreg3", ["NXM_NX_XXREG3"], REGS + 6, 0, 128, true, None, Hex, false),
];

impl FieldId {
    /// The field's static description.
    pub fn def(self) -> &'static FieldDef {
        &FIELDS[self.0 as usize]
    }

    /// Finds a field by canonical name or alias (case-sensitive, as ovs-ofctl).
    pub fn from_name(name: &str) -> Option<FieldId> {
        FIELDS.iter().position(|f| f.name == name || f.aliases.contains(&name)).map(|i| FieldId(i as u8))
    }

    /// All-ones value of the field's width.
    pub(crate) fn full_mask(self) -> u128 {
        let bits = self.def().bits as u32;
        if bits == 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        }
    }
}

/// Well-known field ids, resolved once so hot paths never search by name.
pub mod id {
    use super::FieldId;
    macro_rules! ids {
        ($($c:ident = $i:expr),* $(,)?) => { $(
            #[allow(missing_docs)]
            pub const $c: FieldId = FieldId($i);
        )* };
    }
    ids! {
        IN_PORT = 0, TUN_ID = 1, METADATA = 2, REG0 = 3,
        DL_SRC = 19, DL_DST = 20, VLAN_TCI = 21, VLAN_TPID = 22, VLAN_TCI2 = 23, VLAN_TPID2 = 24,
        DL_TYPE = 25, NW_SRC = 26, NW_DST = 27, ARP_SPA = 28, ARP_TPA = 29,
        IPV6_SRC = 30, IPV6_DST = 31, IPV6_LABEL = 32, NW_PROTO = 33, ARP_OP = 34,
        NW_TOS = 35, IP_DSCP = 36, NW_ECN = 37, NW_TTL = 38, NW_FRAG = 39,
        ARP_SHA = 40, ARP_THA = 41, TCP_FLAGS = 42, TP_SRC = 43, TP_DST = 44,
        TCP_SRC = 45, TCP_DST = 46, UDP_SRC = 47, UDP_DST = 48, SCTP_SRC = 49, SCTP_DST = 50,
        ICMP_TYPE = 51, ICMP_CODE = 52, ICMPV6_TYPE = 53, ICMPV6_CODE = 54, CONJ_ID = 55,
        RECIRC_ID = 56, CT_STATE = 57, CT_ZONE = 58, CT_MARK = 59, CT_LABEL = 60,
        CT_NW_PROTO = 61, CT_NW_SRC = 62, CT_NW_DST = 63, CT_TP_SRC = 64, CT_TP_DST = 65,
        DP_HASH = 66,
    }

    /// The datapath's own metadata, in the order OVS prints it: `recirc_id`, `dp_hash`, then
    /// the connection tracker's fields ([`CONNTRACK`]). Megaflows match them; no packet
    /// carries them out.
    pub(crate) const DATAPATH: [FieldId; 11] = [
        RECIRC_ID,
        DP_HASH,
        CT_STATE,
        CT_ZONE,
        CT_MARK,
        CT_LABEL,
        CT_NW_SRC,
        CT_NW_DST,
        CT_NW_PROTO,
        CT_TP_SRC,
        CT_TP_DST,
    ];

    /// The connection tracker's fields: what `ct_clear` clears and a pass after `ct` sees.
    pub(crate) const CONNTRACK: &[FieldId] = DATAPATH.split_at(2).1;

    /// Register `n` (0..16).
    pub const fn reg(n: u8) -> FieldId {
        FieldId(REG0.0 + n)
    }
}

/// EtherTypes and IP protocol numbers used for prerequisites and parsing.
pub mod proto {
    /// IPv4 EtherType.
    pub(crate) const ETH_IPV4: u16 = 0x0800;
    /// IPv6 EtherType.
    pub(crate) const ETH_IPV6: u16 = 0x86dd;
    /// ARP EtherType.
    pub(crate) const ETH_ARP: u16 = 0x0806;
    /// RARP EtherType (same body as ARP).
    pub(crate) const ETH_RARP: u16 = 0x8035;
    /// `dl_type` OVS gives 802.3 frames whose type field is a length (`FLOW_DL_TYPE_NONE`).
    pub(crate) const ETH_NONE: u16 = 0x05ff;
    /// 802.1Q C-tag TPID.
    pub(crate) const ETH_VLAN: u16 = 0x8100;
    /// 802.1ad S-tag TPID.
    pub(crate) const ETH_QINQ: u16 = 0x88a8;
    /// ICMP.
    pub(crate) const IP_ICMP: u8 = 1;
    /// TCP.
    pub(crate) const IP_TCP: u8 = 6;
    /// UDP.
    pub(crate) const IP_UDP: u8 = 17;
    /// ICMPv6.
    pub(crate) const IP_ICMPV6: u8 = 58;
    /// SCTP.
    pub(crate) const IP_SCTP: u8 = 132;
    /// VLAN TCI "present" (CFI) bit, as OVS uses it.
    pub(crate) const VLAN_CFI: u16 = 0x1000;
    /// `nw_frag` bit: packet is a fragment.
    pub(crate) const FRAG_ANY: u8 = 1;
    /// `nw_frag` bit: fragment with non-zero offset.
    pub(crate) const FRAG_LATER: u8 = 2;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_ids_point_at_their_names() {
        let pairs = [
            (id::IN_PORT, "in_port"),
            (id::TUN_ID, "tun_id"),
            (id::METADATA, "metadata"),
            (id::REG0, "reg0"),
            (id::DL_SRC, "dl_src"),
            (id::VLAN_TPID2, "vlan_tpid2"),
            (id::DL_TYPE, "dl_type"),
            (id::ARP_TPA, "arp_tpa"),
            (id::IPV6_LABEL, "ipv6_label"),
            (id::NW_FRAG, "nw_frag"),
            (id::TCP_FLAGS, "tcp_flags"),
            (id::TP_DST, "tp_dst"),
            (id::SCTP_DST, "sctp_dst"),
            (id::ICMPV6_CODE, "icmpv6_code"),
            (id::CONJ_ID, "conj_id"),
            (id::RECIRC_ID, "recirc_id"),
            (id::CT_STATE, "ct_state"),
            (id::CT_LABEL, "ct_label"),
            (id::CT_TP_DST, "ct_tp_dst"),
        ];
        for (id, name) in pairs {
            assert_eq!(id.def().name, name);
        }
        assert_eq!(id::reg(15).def().name, "reg15");
    }

    #[test]
    fn fields_fit_their_words() {
        for f in FIELDS {
            if f.bits == 128 {
                assert_eq!(f.shift, 0, "{}", f.name);
                assert!((f.word as usize) + 1 < KEY_WORDS);
            } else {
                assert!(f.shift as u32 + f.bits as u32 <= 64, "{}", f.name);
                assert!((f.word as usize) < KEY_WORDS);
            }
        }
    }

    #[test]
    fn names_and_aliases_are_unique() {
        let mut all: Vec<&str> =
            FIELDS.iter().flat_map(|f| std::iter::once(f.name).chain(f.aliases.iter().copied())).collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
