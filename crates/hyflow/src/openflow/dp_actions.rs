//! Datapath actions: what a megaflow does, composed from the pipeline's OpenFlow actions.
//!
//! As in OVS, header rewrites are *committed* lazily — only when the packet is output — so the
//! composed list says exactly which header fields differ at each output, followed by VLAN
//! pops/pushes and the output itself.

use std::fmt::Write as _;

use super::ct::Nat;
use crate::packet::field::{id, proto, FieldId};
use crate::packet::format::format_value;
use crate::packet::{FlowKey, FlowMask};

/// One datapath action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DpAction {
    /// Set the `mask` bits of a header field to `value` (OVS's masked set: only the bits the
    /// pipeline examined or wrote, so untouched bits such as ECN pass through).
    Set {
        /// Field written.
        field: FieldId,
        /// New value (under `mask`).
        value: u128,
        /// Bits written.
        mask: u128,
        /// Whether it begins a datapath `set(header(...))`: a commit sets each header once,
        /// with every field it changes, and two commits set it twice, as OVS prints them.
        opens: bool,
    },
    /// Remove the outer VLAN tag.
    PopVlan,
    /// Add an outer VLAN tag.
    PushVlan {
        /// Tag protocol id (0x8100 or 0x88a8).
        tpid: u16,
        /// Tag control information (PCP, VID; CFI set).
        tci: u16,
    },
    /// Send to a port.
    Output(u32),
    /// Through the connection tracker (`ct(...)`): look the connection up in `zone`, commit
    /// it, set its mark and label, apply NAT; the packet's `ct_*` fields get its state.
    Ct(CtExec),
    /// Leave the connection tracker's view: `ct_state` and the other `ct_*` fields cleared.
    CtClear,
    /// Set `dp_hash` to the packet's symmetric L3/L4 hash with this basis (OVS
    /// `hash(sym_l4(basis))`), for the next pass's select group.
    Hash(u32),
    /// `clone(...)`: the next this many actions run on a copy of the packet; the packet
    /// after them is as before them.
    Clone(u32),
    /// Recirculate a clone of the packet as it is now with this `recirc_id`: another pass
    /// through the datapath, resuming the pipeline where it froze.
    Recirc(u32),
}

/// What a datapath `ct` action does (OVS `OVS_ACTION_ATTR_CT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CtExec {
    /// Create (or update) the connection.
    pub commit: bool,
    /// With `commit`: a connection found in the reply direction ends, a new one starts.
    pub force: bool,
    /// Zone.
    pub zone: u16,
    /// Set the connection's mark: (value, mask).
    pub mark: Option<(u32, u32)>,
    /// Set the connection's label: (value, mask).
    pub label: Option<(u128, u128)>,
    /// Address translation.
    pub nat: Option<Nat>,
}

impl std::fmt::Display for CtExec {
    /// As the datapath prints it: `ct(commit,zone=5,mark=0x7/0xffffffff,nat(dst=10.0.0.1))`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if self.commit {
            parts.push(if self.force { "force_commit" } else { "commit" }.into());
        }
        if self.zone != 0 {
            parts.push(format!("zone={}", self.zone));
        }
        if let Some((v, m)) = self.mark {
            parts.push(format!("mark={}/{}", c_hex(v as u128), c_hex(m as u128)));
        }
        if let Some((v, m)) = self.label {
            let text = if m == u128::MAX { c_hex(v) } else { format!("{}/{}", c_hex(v), c_hex(m)) };
            parts.push(format!("label={text}"));
        }
        if let Some(nat) = &self.nat {
            parts.push(nat.to_string());
        }
        if parts.is_empty() {
            write!(f, "ct")
        } else {
            write!(f, "ct({})", parts.join(","))
        }
    }
}

/// C's `%#x`: hex with `0x`, but `0` for zero.
fn c_hex(v: u128) -> String {
    if v == 0 {
        "0".to_string()
    } else {
        format!("{v:#x}")
    }
}

/// The header a set action rewrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Header {
    Tunnel,
    Eth,
    Ipv4,
    Ipv6,
    Arp,
    L4,
}

impl Header {
    /// Headers in OVS's commit order, each with the fields a set action on it may carry.
    const COMMIT_ORDER: [(Header, &'static [FieldId]); 6] = [
        (Header::Tunnel, &[id::TUN_ID]),
        (Header::Eth, &[id::DL_SRC, id::DL_DST]),
        (Header::Ipv4, &[id::NW_SRC, id::NW_DST, id::NW_TOS, id::NW_TTL]),
        (Header::Ipv6, &[id::IPV6_SRC, id::IPV6_DST, id::IPV6_LABEL, id::NW_TOS, id::NW_TTL]),
        (Header::Arp, &[id::ARP_SPA, id::ARP_TPA, id::ARP_OP, id::ARP_SHA, id::ARP_THA]),
        (Header::L4, &[id::TP_SRC, id::TP_DST]),
    ];

    /// Whether the packet has this header.
    fn present(self, k: &FlowKey) -> bool {
        match self {
            Header::Tunnel | Header::Eth => true,
            // OVS commit_set_nw_action: a zero protocol (ARP: opcode) means no L3 header to
            // rewrite, whatever the EtherType says.
            Header::Ipv4 => k.dl_type() == proto::ETH_IPV4 && k.nw_proto() != 0,
            Header::Ipv6 => k.dl_type() == proto::ETH_IPV6 && k.nw_proto() != 0,
            Header::Arp => matches!(k.dl_type(), proto::ETH_ARP | proto::ETH_RARP) && k.nw_proto() != 0,
            Header::L4 => k.is_ip() && k.nw_frag() & proto::FRAG_LATER == 0,
        }
    }

    /// The header a field's set belongs to, for a packet shaped like `k`.
    fn of(f: FieldId, k: &FlowKey) -> Header {
        Header::COMMIT_ORDER
            .iter()
            .find(|(h, fields)| fields.contains(&f) && h.present(k))
            .map_or(Header::Eth, |(h, _)| *h)
    }

    /// Name as `ofproto/trace` prints it (`set(ipv4(..))`, `set(tcp(..))`).
    fn name(self, k: &FlowKey) -> &'static str {
        match self {
            Header::Tunnel => "tunnel",
            Header::Eth => "eth",
            Header::Ipv4 => "ipv4",
            Header::Ipv6 => "ipv6",
            Header::Arp => "arp",
            Header::L4 => match k.nw_proto() {
                proto::IP_TCP => "tcp",
                proto::IP_UDP => "udp",
                proto::IP_SCTP => "sctp",
                proto::IP_ICMP => "icmp",
                proto::IP_ICMPV6 => "icmpv6",
                _ => "l4",
            },
        }
    }
}

/// Whether the packet is ICMP over IPv4 or ICMPv6 over IPv6 (its type and code are the
/// transport fields).
fn is_icmp(k: &FlowKey) -> bool {
    matches!(
        (k.dl_type(), k.nw_proto()),
        (proto::ETH_IPV4, proto::IP_ICMP) | (proto::ETH_IPV6, proto::IP_ICMPV6)
    )
}

/// Whether datapath actions rewrite a header OVS's datapath cannot (ARP, ICMP type and code:
/// `commit_set_arp_action` and `commit_set_icmp_action` return `SLOW_ACTION`), which keeps the
/// flow in the slow path.
pub(crate) fn needs_slow_path(actions: &[DpAction], k: &FlowKey) -> bool {
    actions.iter().any(|a| match *a {
        DpAction::Set { field, .. } => {
            let h = Header::of(field, k);
            h == Header::Arp || (h == Header::L4 && is_icmp(k))
        }
        _ => false,
    })
}

/// Clears from `written` the bits of header fields no datapath action can rewrite on a packet
/// shaped like `k` (an L3 header with a zero protocol): written in the flow, they leave as
/// they came.
pub(crate) fn drop_uncommittable(k: &FlowKey, written: &mut FlowMask) {
    let mut keep = FlowMask::CATCHALL;
    for (header, fields) in Header::COMMIT_ORDER {
        if header.present(k) {
            fields.iter().for_each(|&f| keep.unwildcard_all(f));
        }
    }
    for (_, fields) in Header::COMMIT_ORDER {
        for &f in fields {
            written.set(f, written.get(f) & keep.get(f));
        }
    }
}

/// Appends the actions that turn `base` into `flow`, and makes `base` equal `flow` on the
/// committed fields; `wc` (the bits examined so far, which include every bit written) masks
/// each set. Returns, per VLAN header index of `base`, whether it was popped (OVS un-wildcards
/// the tags it pops, since the push must recreate them exactly) or kept because it equals the
/// flow's tag (a comparison that read the whole tag).
pub fn commit(base: &mut FlowKey, flow: &FlowKey, wc: &FlowMask, out: &mut Vec<DpAction>) -> [VlanFate; 2] {
    for (header, fields) in Header::COMMIT_ORDER {
        if !header.present(flow) {
            continue;
        }
        if header == Header::L4 && is_icmp(flow) {
            // OVS commit_set_icmp_action: an unmasked set of type and code together.
            if fields.iter().any(|&f| base.get(f) != flow.get(f)) {
                for (i, &f) in fields.iter().enumerate() {
                    out.push(DpAction::Set {
                        field: f,
                        value: flow.get(f) & 0xff,
                        mask: 0xff,
                        opens: i == 0,
                    });
                    base.set(f, flow.get(f));
                }
            }
            continue;
        }
        let mut opens = true;
        for &f in fields {
            let v = flow.get(f);
            if base.get(f) != v {
                let mask = wc.get(f) | (base.get(f) ^ v);
                out.push(DpAction::Set { field: f, value: v & mask, mask, opens });
                opens = false;
                base.set(f, v);
            }
        }
    }
    commit_vlans(base, flow, out)
}

fn vlan_stack(k: &FlowKey) -> ([(u16, u16); 2], usize) {
    let tags = [(k.vlan_tpid(), k.vlan_tci()), (k.vlan_tpid2(), k.vlan_tci2())];
    let n = tags.iter().take_while(|t| t.1 & proto::VLAN_CFI != 0).count();
    (tags, n)
}

/// What committing did to one VLAN tag of the committed state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VlanFate {
    /// No tag there.
    Absent,
    /// Kept: it equals the flow's tag at that depth.
    Kept,
    /// Popped.
    Popped,
}

fn commit_vlans(base: &mut FlowKey, flow: &FlowKey, out: &mut Vec<DpAction>) -> [VlanFate; 2] {
    let (b, mut bn) = vlan_stack(base);
    let (f, mut fn_) = vlan_stack(flow);
    let mut fate = [VlanFate::Absent; 2];
    // Keep the common inner tags; pop the rest of base and push the rest of flow.
    while bn > 0 && fn_ > 0 && b[bn - 1] == f[fn_ - 1] {
        fate[bn - 1] = VlanFate::Kept;
        bn -= 1;
        fn_ -= 1;
    }
    for p in fate.iter_mut().take(bn) {
        out.push(DpAction::PopVlan);
        *p = VlanFate::Popped;
    }
    for i in (0..fn_).rev() {
        out.push(DpAction::PushVlan { tpid: f[i].0, tci: f[i].1 });
    }
    base.set_vlan_tpid(flow.vlan_tpid());
    base.set_vlan_tci(flow.vlan_tci());
    base.set_vlan_tpid2(flow.vlan_tpid2());
    base.set_vlan_tci2(flow.vlan_tci2());
    fate
}

/// Whether datapath actions go through the connection tracker or recirculate: their outputs
/// then depend on connection state, and only a datapath with a tracker can run them.
pub(crate) fn uses_conntrack(actions: &[DpAction]) -> bool {
    actions.iter().any(|a| matches!(a, DpAction::Ct(_) | DpAction::CtClear | DpAction::Recirc(_)))
}

/// OVS `xlate_tweak_odp_actions`: a datapath `clone` that ends the actions isolates nothing
/// from what follows, so its actions take its place (once: a clone it ends in stays).
pub(crate) fn unwrap_trailing_clone(actions: &mut Vec<DpAction>) {
    let mut i = 0;
    let mut last = None;
    while i < actions.len() {
        last = Some(i);
        if let DpAction::Clone(len) = actions[i] {
            i += len as usize;
        }
        i += 1;
    }
    if let Some(j) = last.filter(|&j| matches!(actions[j], DpAction::Clone(_))) {
        actions.remove(j);
    }
}

/// OVS `odp_actions_are_reversible`: whether later rewrites can undo what `actions` did to
/// the packet — not if they track it or clear its tracking or hash it; a datapath `clone`
/// already isolates what it holds.
pub(crate) fn reversible(actions: &[DpAction]) -> bool {
    let mut i = 0;
    while i < actions.len() {
        match actions[i] {
            DpAction::Ct(_) | DpAction::CtClear | DpAction::Hash(_) => return false,
            DpAction::Clone(len) => i += len as usize,
            _ => {}
        }
        i += 1;
    }
    true
}

/// Writes datapath actions like `ovs-appctl ofproto/trace` (`drop` when empty).
pub fn format_dp_actions(actions: &[DpAction], entry: &FlowKey) -> String {
    if actions.is_empty() {
        return "drop".to_string();
    }
    let mut out = String::new();
    let mut i = 0;
    while i < actions.len() {
        if !out.is_empty() {
            out.push(',');
        }
        match actions[i] {
            DpAction::Output(p) => {
                let _ = write!(out, "{p}");
            }
            DpAction::PopVlan => {
                out.push_str("pop_vlan");
            }
            DpAction::Ct(ct) => {
                let _ = write!(out, "{ct}");
            }
            DpAction::CtClear => {
                out.push_str("ct_clear");
            }
            DpAction::Hash(basis) => {
                let _ = write!(out, "hash(sym_l4({basis}))");
            }
            DpAction::Clone(len) => {
                let body = &actions[i + 1..i + 1 + len as usize];
                let _ = write!(out, "clone({})", format_dp_actions(body, entry));
                i += 1 + len as usize;
                continue;
            }
            DpAction::Recirc(id) => {
                let _ = write!(out, "recirc({id:#x})");
            }
            DpAction::PushVlan { tpid, tci } => {
                if tpid != proto::ETH_VLAN {
                    let _ = write!(out, "push_vlan(tpid=0x{tpid:04x},vid={},pcp={})", tci & 0xfff, tci >> 13);
                } else {
                    let _ = write!(out, "push_vlan(vid={},pcp={})", tci & 0xfff, tci >> 13);
                }
            }
            DpAction::Set { field: first, .. } => {
                // Group consecutive sets of one header: set(ipv4(src=..,ttl=..)).
                let group = Header::of(first, entry);
                let mut parts = Vec::new();
                while let Some(&DpAction::Set { field, value, mask, opens }) = actions.get(i) {
                    if Header::of(field, entry) != group || (opens && !parts.is_empty()) {
                        break;
                    }
                    let icmp = group == Header::L4 && is_icmp(entry);
                    let text = if mask == field.full_mask() || icmp {
                        dp_value(field, value)
                    } else {
                        format!("{}/{}", dp_value(field, value), dp_value(field, mask))
                    };
                    let name = match field {
                        id::TP_SRC if icmp => "type",
                        id::TP_DST if icmp => "code",
                        _ => dp_name(field),
                    };
                    parts.push(format!("{name}={text}"));
                    i += 1;
                }
                let _ = write!(out, "set({}({}))", group.name(entry), parts.join(","));
                continue;
            }
        }
        i += 1;
    }
    out
}

fn dp_name(f: FieldId) -> &'static str {
    match f {
        id::TUN_ID => "tun_id",
        id::DL_SRC | id::NW_SRC | id::IPV6_SRC | id::TP_SRC => "src",
        id::DL_DST | id::NW_DST | id::IPV6_DST | id::TP_DST => "dst",
        id::NW_TOS => "tos",
        id::NW_TTL => "ttl",
        id::IPV6_LABEL => "label",
        id::ARP_SPA => "sip",
        id::ARP_TPA => "tip",
        id::ARP_OP => "op",
        id::ARP_SHA => "sha",
        id::ARP_THA => "tha",
        _ => f.def().name,
    }
}

fn dp_value(f: FieldId, v: u128) -> String {
    match f {
        // C's `%#x`, as OVS prints it: no prefix on zero.
        id::NW_TOS if v == 0 => "0".to_string(),
        id::NW_TOS => format!("0x{v:x}"),
        _ => format_value(f, v),
    }
}
