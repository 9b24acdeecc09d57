//! What a NIC's match+action hardware can hold: the key words its parser extracts and the
//! actions its stages run. A scheme is offered only entries its NIC can carry out exactly as
//! the engine would; the rest stay in software, as Open vSwitch's tc-flower offload leaves
//! in the software datapath every flow the hardware refuses.
//!
//! [`NicCapability::Model`] is the simulated NIC, which holds whatever its tables have room
//! for. [`NicCapability::Xdp`] is hyflow's XDP tier (`hyflow switch --nic xdp`, the program
//! in `crates/hyflow-live/bpf/port.bpf.c`): its parser computes [`XDP_KEY_WORDS`] of the flow
//! key — bit for bit as `packet::parse` does — for Ethernet and LLC/SNAP frames with up to
//! two VLAN tags carrying IPv4 (with TCP, UDP, SCTP, ICMP or IGMP), ARP or no IP, and hands
//! every other frame (IPv6, a third tag, malformed) to software; its actions are one output or a drop, Ethernet
//! addresses, IPv4 addresses, TOS and TTL, TCP and UDP ports (with Open vSwitch's
//! incremental checksum updates), VLAN pops and pushes, and a tunnel id set (which changes
//! nothing on a frame leaving a plain port).

use crate::openflow::dp_actions::DpAction;
use crate::openflow::rule::Match;
use crate::packet::field::{id, proto, word, FieldId, KEY_WORDS};

/// What the NIC can hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NicCapability {
    /// The simulated NIC: any entry its tables have room for.
    #[default]
    Model,
    /// hyflow's XDP tier.
    Xdp,
}

/// The flow-key words the XDP tier's parser computes, in the order of its key: `in_port`,
/// `dl_dst`·`dl_type`, `dl_src`·`vlan_tci`, the second tag and the TPIDs, the IPv4 (or ARP)
/// addresses, `nw_frag`·`nw_tos`·`nw_ttl`·`nw_proto`, `arp_sha`·`tcp_flags`, `arp_tha`, the
/// transport ports. The parts of these words it leaves zero (`conj_id`, `ipv6_label`, the
/// connection's original ports) are zero in the engine's key of every frame it takes.
pub const XDP_KEY_WORDS: [usize; 9] = [
    word::IN_PORT as usize,
    word::ETH_DST_TYPE as usize,
    word::ETH_SRC_TCI as usize,
    word::VLAN_EXTRA as usize,
    word::NW_ADDRS as usize,
    word::NW_MISC as usize,
    word::ARP_SHA_TCP_FLAGS as usize,
    word::ARP_THA as usize,
    word::PORTS as usize,
];

impl NicCapability {
    /// Whether the NIC can hold an entry matching `m` whose decision runs `actions`
    /// (`stateful`: it learns, so each hit must be translated again, which only software
    /// does).
    pub fn holds(self, m: &Match, actions: &[DpAction], stateful: bool) -> bool {
        match self {
            NicCapability::Model => true,
            NicCapability::Xdp => xdp_holds(m, actions, stateful),
        }
    }
}

impl NicCapability {
    /// Whether the NIC's parser takes a frame parsed to `key` (a first pass) into its
    /// lookup at all: the XDP tier hands IPv6 frames and frames with a third VLAN tag (whose
    /// TPID the engine reads as the EtherType) to software whole, so no entry of it ever sees
    /// one. What a key cannot tell is not told apart: the program also hands over malformed
    /// frames (a cut header, a bad length), which the engine decides on what it parsed.
    #[inline]
    pub fn takes(self, key: &crate::packet::FlowKey) -> bool {
        match self {
            NicCapability::Model => true,
            NicCapability::Xdp => {
                !matches!(key.dl_type(), proto::ETH_IPV6 | proto::ETH_VLAN | proto::ETH_QINQ)
            }
        }
    }
}

/// Whether every bit of `field` is exact in `m`.
fn exact(m: &Match, field: FieldId) -> bool {
    m.mask.get(field) == field.full_mask()
}

/// Whether `m` matches only `field == value`.
fn is(m: &Match, field: FieldId, value: u128) -> bool {
    exact(m, field) && m.value.get(field) == value
}

fn xdp_holds(m: &Match, actions: &[DpAction], stateful: bool) -> bool {
    if stateful {
        return false;
    }
    // The words the parser does not compute are zero in the engine's key of every frame it
    // takes (datapath metadata on a first pass, no tunnel, no IPv6): an entry may ask for
    // zero there, which the tier need not check, and nothing else.
    if (0..KEY_WORDS).any(|w| !XDP_KEY_WORDS.contains(&w) && m.value.words[w] != 0) {
        return false;
    }
    // An entry only for EtherTypes the parser hands to software whole would never be hit.
    let software_only = [proto::ETH_IPV6, proto::ETH_VLAN, proto::ETH_QINQ];
    if software_only.iter().any(|&t| is(m, id::DL_TYPE, t as u128)) {
        return false;
    }
    let ipv4 = is(m, id::DL_TYPE, proto::ETH_IPV4 as u128);
    let tcp_or_udp = ipv4
        && exact(m, id::NW_PROTO)
        && matches!(m.value.get(id::NW_PROTO) as u8, proto::IP_TCP | proto::IP_UDP);
    let mut outputs = 0;
    let mut vlan_changes = false;
    for a in actions {
        let held = match *a {
            DpAction::Output(_) => {
                outputs += 1;
                true
            }
            DpAction::PopVlan | DpAction::PushVlan { .. } => {
                vlan_changes = true;
                true
            }
            DpAction::Set { field, mask, .. } => {
                let full = mask == field.full_mask();
                match field {
                    id::DL_SRC | id::DL_DST => full,
                    id::NW_SRC | id::NW_DST | id::NW_TTL => full && ipv4,
                    // The byte written is constant when the bits the action leaves are exact.
                    id::NW_TOS => ipv4 && (mask | m.mask.get(id::NW_TOS)) & 0xff == 0xff,
                    id::TP_SRC | id::TP_DST => full && tcp_or_udp,
                    id::VLAN_TCI => {
                        vlan_changes = true;
                        true
                    }
                    // The tunnel id is metadata for a tunnel port, and the switch's ports are
                    // plain ports: the frame leaves as it would without it (`frame_rewrite`).
                    id::TUN_ID => true,
                    _ => false,
                }
            }
            DpAction::Ct(_)
            | DpAction::CtClear
            | DpAction::Hash(_)
            | DpAction::Clone(_)
            | DpAction::Recirc(_) => false,
        };
        if !held {
            return false;
        }
    }
    // A changed tag stack is written as pops and pushes worked out from the arriving stack,
    // which must then be the same for every frame the entry matches.
    let stack_known =
        [id::VLAN_TCI, id::VLAN_TPID, id::VLAN_TCI2, id::VLAN_TPID2].iter().all(|&f| exact(m, f));
    outputs <= 1 && (!vlan_changes || stack_known)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::parse_flows;

    fn matching(text: &str) -> Match {
        parse_flows(&format!("{text} actions=drop\n"), "t").unwrap().remove(0).matcher()
    }

    fn set(field: FieldId, value: u128) -> DpAction {
        DpAction::Set { field, value, mask: field.full_mask(), opens: true }
    }

    #[test]
    fn the_model_holds_anything() {
        let m = matching("recirc_id=5,ct_state=+trk");
        assert!(NicCapability::Model.holds(&m, &[DpAction::Recirc(5)], true));
        assert!(NicCapability::Model.takes(&m.value));
    }

    #[test]
    fn xdp_takes_no_ipv6_and_no_third_tag() {
        let key = |dl_type: u16| {
            let mut k = crate::packet::FlowKey::default();
            k.set_dl_type(dl_type);
            k
        };
        assert!(NicCapability::Xdp.takes(&key(proto::ETH_IPV4)));
        assert!(NicCapability::Xdp.takes(&key(proto::ETH_ARP)));
        assert!(NicCapability::Xdp.takes(&key(proto::ETH_NONE)));
        assert!(!NicCapability::Xdp.takes(&key(proto::ETH_IPV6)));
        assert!(!NicCapability::Xdp.takes(&key(proto::ETH_QINQ)), "a third tag");
    }

    #[test]
    fn xdp_holds_what_its_parser_and_actions_cover() {
        let xdp = NicCapability::Xdp;
        let routed = matching("in_port=1,ip,nw_dst=10.0.0.0/8,nw_ttl=64");
        let route = [set(id::DL_DST, 0x0200_0000_0002), set(id::NW_TTL, 63), DpAction::Output(2)];
        assert!(xdp.holds(&routed, &route, false));
        assert!(!xdp.holds(&routed, &route, true), "a decision that learns stays in software");
        // A tunnel id set for the tenant, out of a plain port: the frame is as without it.
        let tenant = [set(id::TUN_ID, 1003), set(id::DL_DST, 2), DpAction::Output(5)];
        assert!(xdp.holds(&matching("in_port=1,tun_id=0,ip"), &tenant, false));
        // Two outputs, conntrack, recirculation: software.
        assert!(!xdp.holds(&routed, &[DpAction::Output(2), DpAction::Output(3)], false));
        assert!(!xdp.holds(&routed, &[DpAction::Recirc(1)], false));
        // A field the parser does not compute, asked to be anything but zero.
        assert!(!xdp.holds(&matching("tun_id=5"), &[DpAction::Output(2)], false));
        assert!(!xdp.holds(&matching("ipv6,ipv6_dst=::1"), &[DpAction::Output(2)], false));
        // IPv6 as such: its frames never reach the lookup.
        assert!(!xdp.holds(&matching("in_port=1,ipv6"), &[DpAction::Output(2)], false));
        assert!(xdp.holds(&matching("recirc_id=0,in_port=1"), &[DpAction::Output(2)], false));
        // Ports only under an exact TCP or UDP match; ICMP type: software.
        let port = [set(id::TP_DST, 80), DpAction::Output(2)];
        assert!(xdp.holds(&matching("tcp,tp_dst=8080"), &port, false));
        assert!(!xdp.holds(&matching("ip"), &port, false));
        assert!(!xdp.holds(&matching("icmp"), &[set(id::TP_SRC, 0), DpAction::Output(2)], false));
        // A tag pushed: only when the arriving stack is exact.
        let push = [DpAction::PushVlan { tpid: 0x8100, tci: 0x1005 }, DpAction::Output(2)];
        assert!(!xdp.holds(&matching("ip"), &push, false));
        let mut untagged = matching("ip,vlan_tci=0");
        for f in [id::VLAN_TPID, id::VLAN_TCI2, id::VLAN_TPID2] {
            untagged.mask.set(f, f.full_mask());
        }
        assert!(xdp.holds(&untagged, &push, false));
        // TOS: constant only when the bits the action leaves are matched.
        let dscp = [DpAction::Set { field: id::NW_TOS, value: 0x20, mask: 0xfc, opens: true }];
        assert!(!xdp.holds(&matching("ip"), &dscp, false));
        assert!(xdp.holds(&matching("ip,nw_ecn=1"), &dscp, false));
    }
}
