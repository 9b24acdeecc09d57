//! The datapath's connection tracker: what a datapath `ct(...)` action does to a packet,
//! modelled on Open vSwitch's userspace conntrack (`lib/conntrack.c`, `conntrack-tcp.c`,
//! `conntrack-other.c`, `conntrack-icmp.c`), deterministically: time is passed in.
//!
//! Modelled: connections per zone, keyed by their original and reply tuples (IPv4 and IPv6;
//! TCP, UDP, SCTP and other protocols by ports, ICMP echo by type); `commit` creates them
//! (`force` ends one found in the reply direction first); the states OVS derives
//! (`new`, `est`, `rpl`, `inv`, `trk`, `snat`, `dnat`); TCP peer states driven by the flags
//! (SYN, SYN+ACK, ACK, FIN, RST, invalid combinations) and reopening after close; the default
//! timeouts of the userspace datapath per protocol state; mark and label set by `exec`; source
//! and destination NAT with address and port ranges, replies translated back; the original
//! tuple in `ct_nw_*`/`ct_tp_*`.
//!
//! **Hardware offload** (when the NIC tracks connections, [`HwOffload`]): as Linux's flow
//! table under tc's `ct` action (what OVS's hardware offload and ConnectX-class NICs use), a
//! connection is offloaded once it is established — TCP when both peers are (after the
//! handshake's ACK), UDP once both directions were seen; ICMP and other protocols never —
//! while the NIC's connection table has room; from then on the NIC tracks its packets, except
//! TCP SYN, FIN and RST segments, which go to software (a FIN or RST ends the offload). A
//! connection that ends or times out leaves the table.
//!
//! **ICMP errors** relate to the connection of the packet they carry (`rel`, and `rpl` in its
//! reply direction; the connection is not updated; a carried packet of no connection makes
//! the error invalid), when the caller gives the carried packet's tuple
//! ([`EmbeddedTuple::of_icmp_error`], read from the frame: a flow key does not hold it): the
//! live switch does; a replay, which works from keys, sees errors as invalid. An error of a
//! connection with NAT is not translated (OVS translates both its addresses and the carried
//! packet's, which a key cannot express).
//!
//! Not modelled, because a flow key does not carry what they need: TCP sequence and window
//! checks (no sequence numbers: any flag-valid segment is in window), fragments (later
//! fragments are invalid), application-layer gateways (`alg=` is refused when read). NAT picks its address
//! and port from the range by a hash of the original tuple (OVS's choice also depends on its
//! hash seed and on what is in use), moving on while the reply tuple is taken.

use hashbrown::HashMap;

use crate::openflow::ct::{Nat, NatKind};
use crate::openflow::dp_actions::CtExec;
use crate::packet::ct_state::{DNAT, EST, INV, NEW, REL, RPL, SNAT, TRK};
use crate::packet::field::{id, proto};
use crate::packet::parse::FrameLayout;
use crate::packet::FlowKey;

const S: u64 = 1_000_000_000;

/// Timeouts of the userspace datapath's default policy (`ct_dpif_netdev_tp_def`), ns.
mod timeout {
    use super::S;
    pub(super) const TCP_FIRST_PACKET: u64 = 30 * S;
    pub(super) const TCP_OPENING: u64 = 30 * S;
    pub(super) const TCP_ESTABLISHED: u64 = 24 * 3600 * S;
    pub(super) const TCP_CLOSING: u64 = 15 * 60 * S;
    pub(super) const TCP_FIN_WAIT: u64 = 45 * S;
    pub(super) const TCP_CLOSED: u64 = 30 * S;
    pub(super) const OTHER_FIRST: u64 = 60 * S;
    pub(super) const OTHER_MULTIPLE: u64 = 60 * S;
    pub(super) const OTHER_BIDIR: u64 = 30 * S;
    pub(super) const ICMP_FIRST: u64 = 60 * S;
    pub(super) const ICMP_REPLY: u64 = 30 * S;
}

const TCP_FIN: u16 = 0x01;
const TCP_SYN: u16 = 0x02;
const TCP_RST: u16 = 0x04;
const TCP_PSH: u16 = 0x08;
const TCP_ACK: u16 = 0x10;
const TCP_URG: u16 = 0x20;

/// One direction of a connection: what identifies its packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Tuple {
    src: u128,
    dst: u128,
    /// Ports; ICMP: type and code.
    sport: u16,
    dport: u16,
    proto: u8,
}

impl Tuple {
    /// The tuple of the other direction (ICMP echo keeps its type and code: both directions
    /// are keyed by the request's).
    fn reversed(self) -> Tuple {
        let (sport, dport) = match self.proto {
            proto::IP_ICMP | proto::IP_ICMPV6 => (self.sport, self.dport),
            _ => (self.dport, self.sport),
        };
        Tuple { src: self.dst, dst: self.src, sport, dport, proto: self.proto }
    }
}

/// The tuple of the packet an ICMP error carries (its IP header and the first bytes of its
/// transport header), which relates the error to that packet's connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbeddedTuple {
    src: u128,
    dst: u128,
    sport: u16,
    dport: u16,
    proto: u8,
}

impl EmbeddedTuple {
    /// The carried packet's tuple, if `frame` (parsed to `key`, headers at `layout`) is an
    /// ICMP or ICMPv6 error carrying an IP header of the same version (OVS
    /// `extract_l4_icmp`/`extract_l4_icmp6`: destination unreachable, source quench,
    /// redirect, time exceeded, parameter problem; ICMPv6 1–4).
    pub fn of_icmp_error(frame: &[u8], layout: &FrameLayout, key: &FlowKey) -> Option<EmbeddedTuple> {
        let v4 = key.dl_type() == proto::ETH_IPV4;
        let error = matches!(
            (v4, key.nw_proto(), key.tp_src()),
            (true, proto::IP_ICMP, 3 | 4 | 5 | 11 | 12) | (false, proto::IP_ICMPV6, 1..=4)
        );
        if !error || key.nw_frag() & proto::FRAG_LATER != 0 {
            return None;
        }
        let inner = frame.get(layout.l4? + 8..layout.l3_end.min(frame.len()))?;
        let be = |at: usize, n: usize| {
            inner.get(at..at + n).map(|b| b.iter().fold(0u128, |a, &x| a << 8 | x as u128))
        };
        let (src, dst, proto, l4) = if v4 {
            let ihl = (*inner.first()? as usize & 0x0f) * 4;
            (be(12, 4)?, be(16, 4)?, *inner.get(9)?, ihl.max(20))
        } else {
            (be(8, 16)?, be(24, 16)?, *inner.get(6)?, 40)
        };
        let (sport, dport) = match proto {
            proto::IP_TCP | proto::IP_UDP | proto::IP_SCTP => (be(l4, 2)? as u16, be(l4 + 2, 2)? as u16),
            proto::IP_ICMP | proto::IP_ICMPV6 => {
                (echo_request(*inner.get(l4)? as u16), *inner.get(l4 + 1)? as u16)
            }
            _ => (0, 0),
        };
        Some(EmbeddedTuple { src, dst, sport, dport, proto })
    }
}

/// A TCP peer's state (OVS `CT_DPIF_TCPS_*`, the ones its update logic distinguishes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TcpPeer {
    Closed,
    SynSent,
    Established,
    Closing,
    FinWait2,
    TimeWait,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ProtoState {
    /// Originator's and responder's peer states.
    Tcp([TcpPeer; 2]),
    /// UDP, SCTP and other protocols: first packet, several one way, both ways.
    Other(u8),
    /// ICMP echo: request seen, reply seen.
    Icmp(bool),
}

/// What a packet did to a connection (OVS `ct_update_res`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Update {
    Valid,
    Invalid,
    /// A new connection replaces a closed one.
    New,
    /// Still new (a retransmitted SYN, a second one-way packet).
    ValidNew,
}

#[derive(Clone, Debug)]
struct Conn {
    zone: u16,
    orig: Tuple,
    /// What the reply packets carry (the reversed original, translated by NAT).
    reply: Tuple,
    state: ProtoState,
    mark: u32,
    label: u128,
    nat: Option<NatKind>,
    expires_ns: u64,
    /// When the NIC started tracking it (offloaded), if it does.
    offloaded_ns: Option<u64>,
}

impl Conn {
    /// Whether the NIC's table may hold the connection (Linux `tcf_ct_flow_table_process_conn`):
    /// TCP while both peers are established (not opening, not closing), UDP once both
    /// directions were seen; nothing else (ICMP, other protocols stay in software).
    fn offloadable(&self) -> bool {
        match self.state {
            ProtoState::Tcp(peers) => peers == [TcpPeer::Established; 2],
            ProtoState::Other(st) => self.orig.proto == proto::IP_UDP && st == 2,
            ProtoState::Icmp(_) => false,
        }
    }
}

/// The NIC's connection table, when the NIC tracks connections (see the module's notes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HwOffload {
    /// Connections it holds at most.
    pub entries: usize,
    /// From the offload decision to the first packet the NIC tracks.
    pub latency_ns: u64,
}

/// Counters of the connection tracker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ConntrackStats {
    /// Packets through `ct`.
    pub packets: u64,
    /// Of those, tracked as invalid.
    pub invalid: u64,
    /// Connections committed.
    pub committed: u64,
    /// Connections that timed out.
    pub expired: u64,
    /// Packets whose addresses or ports NAT rewrote.
    pub translated: u64,
    /// Connections offloaded to the NIC's connection table.
    pub offloaded: u64,
    /// Established connections not offloaded because the NIC's table was full.
    pub offload_full: u64,
    /// ICMP errors related to a connection by the packet they carry.
    pub related: u64,
}

/// The connection tracker: zones of connections.
#[derive(Debug, Default)]
pub struct Conntrack {
    /// Both tuples of every connection → its slot and whether the tuple is the reply's.
    index: HashMap<(u16, Tuple), (usize, bool)>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    live: usize,
    stats: ConntrackStats,
    /// The NIC's connection table, if the NIC tracks connections.
    hw: Option<HwOffload>,
    /// Connections the NIC's table holds.
    hw_held: usize,
    /// The packet the current ICMP error carries, when the caller read it from the frame.
    embedded: Option<EmbeddedTuple>,
}

impl Conntrack {
    /// An empty tracker.
    pub fn new() -> Conntrack {
        Conntrack::default()
    }

    /// A tracker whose connections are offloaded to a NIC with this connection table.
    pub(crate) fn with_offload(hw: HwOffload) -> Conntrack {
        Conntrack { hw: Some(hw), ..Conntrack::default() }
    }

    /// Connections the NIC's table holds.
    pub fn offloaded(&self) -> usize {
        self.hw_held
    }

    /// Whether the NIC tracks the packet `k` in datapath action `ct` at `now_ns`: its
    /// connection is offloaded (and active) and it is not a TCP SYN, FIN or RST segment.
    pub fn in_hardware(&self, ct: &CtExec, k: &FlowKey, now_ns: u64) -> bool {
        if k.is_ip()
            && k.nw_proto() == proto::IP_TCP
            && k.get(id::TCP_FLAGS) as u16 & (TCP_SYN | TCP_FIN | TCP_RST) != 0
        {
            return false;
        }
        let Some(tuple) = tuple_of(k) else { return false };
        let state = if k.get(id::CT_ZONE) as u16 != ct.zone { 0 } else { k.ct_state() };
        let slot = carried(k, ct.zone, state)
            .and_then(|orig| self.index.get(&(ct.zone, orig)))
            .or_else(|| self.index.get(&(ct.zone, tuple)))
            .map(|&(slot, _)| slot);
        let conn = slot.and_then(|s| self.conns[s].as_ref());
        conn.is_some_and(|c| c.expires_ns > now_ns && c.offloaded_ns.is_some_and(|t| t <= now_ns))
    }

    /// Connections held (some may have timed out without being swept yet).
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Counters so far.
    pub fn stats(&self) -> ConntrackStats {
        self.stats
    }

    /// Removes the connections timed out at `now_ns`, in slot order.
    pub fn sweep(&mut self, now_ns: u64) {
        for slot in 0..self.conns.len() {
            if self.conns[slot].as_ref().is_some_and(|c| c.expires_ns <= now_ns) {
                self.remove(slot);
                self.stats.expired += 1;
            }
        }
    }

    fn remove(&mut self, slot: usize) {
        if let Some(c) = self.conns[slot].take() {
            self.index.remove(&(c.zone, c.orig));
            self.index.remove(&(c.zone, c.reply));
            self.free.push(slot);
            self.live -= 1;
            self.hw_held -= c.offloaded_ns.is_some() as usize;
        }
    }

    /// After packet `k` of the connection in `slot` was tracked as `state`: offloads the
    /// connection once the NIC can track it, while the NIC's table has room, and ends the
    /// offload of one it no longer can (a TCP FIN or RST began closing it).
    fn offload(&mut self, slot: usize, state: u8, now_ns: u64) {
        let Some(hw) = self.hw else { return };
        let Some(conn) = self.conns[slot].as_mut() else { return };
        if !conn.offloadable() {
            if conn.offloaded_ns.take().is_some() {
                self.hw_held -= 1;
            }
        } else if state & EST != 0 && state & INV == 0 && conn.offloaded_ns.is_none() {
            if self.hw_held < hw.entries {
                conn.offloaded_ns = Some(now_ns.saturating_add(hw.latency_ns));
                self.hw_held += 1;
                self.stats.offloaded += 1;
            } else {
                self.stats.offload_full += 1;
            }
        }
    }

    /// The live connection a tuple belongs to, and whether the tuple is its reply direction.
    fn find(&mut self, zone: u16, t: &Tuple, now_ns: u64) -> Option<(usize, bool)> {
        let &(slot, reply) = self.index.get(&(zone, *t))?;
        if self.conns[slot].as_ref().is_some_and(|c| c.expires_ns <= now_ns) {
            self.remove(slot);
            self.stats.expired += 1;
            return None;
        }
        Some((slot, reply))
    }

    /// Runs datapath action `ct` on packet `k` at `now_ns` (OVS `process_one`): sets its
    /// `ct_*` fields, and rewrites its addresses and ports if NAT applies.
    pub fn execute(&mut self, ct: &CtExec, k: &mut FlowKey, now_ns: u64) {
        self.stats.packets += 1;
        // OVS resets the state when the packet enters another zone.
        let mut state =
            if k.ct_state() != 0 && k.get(id::CT_ZONE) as u16 != ct.zone { 0 } else { k.ct_state() };
        let Some(tuple) = tuple_of(k) else {
            let related = self.embedded.and_then(|e| self.related(ct, k, &e, now_ns));
            if related.is_none() {
                self.write(k, ct.zone, INV | TRK, None);
                self.stats.invalid += 1;
            }
            return;
        };
        // The connection the packet already belongs to in this zone (OVS keeps it with the
        // packet, `md.conn`): after NAT the packet's own tuple is neither direction's.
        let mut found = match self.cached(k, ct.zone, state, &tuple, now_ns) {
            Some(hit) => Some(hit),
            None => self.find(ct.zone, &tuple, now_ns),
        };
        if let (true, Some((_, true))) = (ct.force, found) {
            let slot = found.take().expect("matched").0;
            self.remove(slot);
        }
        let mut create = false;
        if let Some((slot, reply)) = found {
            let conn = self.conns[slot].as_mut().expect("indexed connections live");
            match update(conn, k, reply, now_ns) {
                Update::Valid => {
                    state = (state | EST) & !NEW;
                    if reply {
                        state |= RPL;
                    }
                }
                Update::Invalid => state = INV,
                Update::ValidNew => state |= NEW,
                Update::New => {
                    self.remove(slot);
                    found = None;
                    create = true;
                }
            }
            if ct.nat.is_some() && !create {
                self.apply_nat(slot, reply, k, &mut state);
            }
        } else {
            create = true;
        }
        if create {
            if !valid_new(k, &tuple) {
                state = INV;
            } else {
                state = NEW;
                if ct.commit {
                    let slot = self.commit(ct, &tuple, now_ns);
                    found = Some((slot, false));
                    if ct.nat.is_some_and(|n| n.kind.is_some()) {
                        self.apply_nat(slot, false, k, &mut state);
                    }
                }
            }
        }
        let slot = found.map(|(s, _)| s);
        if let Some(s) = slot {
            let conn = self.conns[s].as_mut().expect("live");
            if let Some((v, m)) = ct.mark {
                conn.mark = (conn.mark & !m) | (v & m);
            }
            if let Some((v, m)) = ct.label {
                conn.label = (conn.label & !m) | (v & m);
            }
        }
        if state & INV != 0 {
            self.stats.invalid += 1;
        }
        if let Some(s) = slot {
            self.offload(s, state, now_ns);
        }
        let orig = match slot {
            Some(s) => self.conns[s].as_ref().map(|c| (c.orig, c.mark, c.label)),
            None => Some((tuple, 0, 0)),
        };
        self.write(k, ct.zone, state | TRK, orig);
    }

    /// Sets the packet the next packets' ICMP error carries (`None`: none, or not read).
    pub(crate) fn set_embedded(&mut self, embedded: Option<EmbeddedTuple>) {
        self.embedded = embedded;
    }

    /// `ct` on ICMP error `k` carrying a packet of tuple `e` (OVS `process_one` with
    /// `icmp_related`): `rel` (and `rpl`) if the carried packet, sent to the error's source,
    /// belongs to a connection; `None` otherwise (the error is invalid).
    fn related(&mut self, ct: &CtExec, k: &mut FlowKey, e: &EmbeddedTuple, now_ns: u64) -> Option<()> {
        let outer_dst = if k.dl_type() == proto::ETH_IPV4 { k.get(id::NW_DST) } else { k.get(id::IPV6_DST) };
        if e.src != outer_dst {
            return None;
        }
        let carried = Tuple { src: e.src, dst: e.dst, sport: e.sport, dport: e.dport, proto: e.proto };
        // The error travels against the carried packet: its tuple is the carried one reversed.
        let (slot, reply) = self.find(ct.zone, &carried.reversed(), now_ns)?;
        let state = if reply { REL | RPL } else { REL };
        let conn = self.conns[slot].as_ref().map(|c| (c.orig, c.mark, c.label));
        self.stats.related += 1;
        self.write(k, ct.zone, state | TRK, conn);
        Some(())
    }

    /// The connection a packet tracked in `zone` carries from an earlier `ct` (its original
    /// tuple is in the `ct_*` fields), and whether the packet goes in its reply direction.
    /// IPv4 only: the key does not hold IPv6 original tuples.
    fn cached(
        &mut self,
        k: &FlowKey,
        zone: u16,
        state: u8,
        tuple: &Tuple,
        now_ns: u64,
    ) -> Option<(usize, bool)> {
        let orig = carried(k, zone, state)?;
        let (slot, _) = self.find(zone, &orig, now_ns)?;
        let conn = self.conns[slot].as_ref()?;
        let reply = *tuple == conn.reply || *tuple == conn.orig.reversed();
        Some((slot, reply))
    }

    /// OVS `write_ct_md`: state, zone, mark, label and the original tuple.
    fn write(&self, k: &mut FlowKey, zone: u16, state: u8, conn: Option<(Tuple, u32, u128)>) {
        k.set_ct_state(state);
        k.set(id::CT_ZONE, zone as u128);
        let (t, mark, label) = conn.unwrap_or((Tuple { src: 0, dst: 0, sport: 0, dport: 0, proto: 0 }, 0, 0));
        k.set(id::CT_MARK, mark as u128);
        k.set(id::CT_LABEL, label);
        let v4 = k.dl_type() == proto::ETH_IPV4;
        k.set(id::CT_NW_SRC, if v4 { t.src } else { 0 });
        k.set(id::CT_NW_DST, if v4 { t.dst } else { 0 });
        k.set(id::CT_NW_PROTO, t.proto as u128);
        k.set(id::CT_TP_SRC, t.sport as u128);
        k.set(id::CT_TP_DST, t.dport as u128);
    }

    /// Creates a connection for `tuple` (committed by `ct`), choosing its NAT.
    fn commit(&mut self, ct: &CtExec, tuple: &Tuple, now_ns: u64) -> usize {
        let (state, expiry) = match tuple.proto {
            proto::IP_TCP => {
                (ProtoState::Tcp([TcpPeer::SynSent, TcpPeer::Closed]), timeout::TCP_FIRST_PACKET)
            }
            proto::IP_ICMP | proto::IP_ICMPV6 => (ProtoState::Icmp(false), timeout::ICMP_FIRST),
            _ => (ProtoState::Other(0), timeout::OTHER_FIRST),
        };
        let nat = ct.nat.and_then(|n| n.kind.map(|kind| (kind, n)));
        let mut reply = tuple.reversed();
        if let Some((kind, n)) = nat {
            reply = self.free_reply(ct.zone, tuple, kind, &n);
        }
        let conn = Conn {
            zone: ct.zone,
            orig: *tuple,
            reply,
            state,
            mark: 0,
            label: 0,
            nat: nat.map(|(kind, _)| kind),
            expires_ns: now_ns.saturating_add(expiry),
            offloaded_ns: None,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.conns[s] = Some(conn);
                s
            }
            None => {
                self.conns.push(Some(conn));
                self.conns.len() - 1
            }
        };
        self.index.insert((ct.zone, *tuple), (slot, false));
        self.index.insert((ct.zone, reply), (slot, true));
        self.live += 1;
        self.stats.committed += 1;
        slot
    }

    /// The reply tuple of `orig` translated within `nat`'s ranges: the candidate a hash of the
    /// original tuple picks, then the next ones while that reply tuple is taken.
    fn free_reply(&self, zone: u16, orig: &Tuple, kind: NatKind, nat: &Nat) -> Tuple {
        let base = orig.reversed();
        let (addr_lo, addr_hi) = nat.addrs.map_or_else(
            || {
                let a = if kind == NatKind::Src { orig.src } else { orig.dst };
                (a, a)
            },
            |(lo, hi)| (lo as u128, hi as u128),
        );
        let own_port = if kind == NatKind::Src { orig.sport } else { orig.dport };
        let ports_apply = matches!(orig.proto, proto::IP_TCP | proto::IP_UDP | proto::IP_SCTP);
        let (port_lo, port_hi) = match nat.ports {
            Some(r) if ports_apply => r,
            _ => (own_port, own_port),
        };
        let n_addr = (addr_hi - addr_lo + 1).min(u64::MAX as u128) as u64;
        let n_port = (port_hi - port_lo) as u64 + 1;
        let mut bytes = [0u8; 37];
        bytes[..16].copy_from_slice(&orig.src.to_be_bytes());
        bytes[16..32].copy_from_slice(&orig.dst.to_be_bytes());
        bytes[32..34].copy_from_slice(&orig.sport.to_be_bytes());
        bytes[34..36].copy_from_slice(&orig.dport.to_be_bytes());
        bytes[36] = orig.proto;
        let h = xxhash_rust::xxh3::xxh3_64(&bytes);
        let total = n_addr.saturating_mul(n_port);
        let mut candidate = base;
        for i in 0..total.min(65_536) {
            let pick = (h.wrapping_add(i)) % total;
            let (a, p) = (addr_lo + (pick / n_port) as u128, port_lo + (pick % n_port) as u16);
            candidate = base;
            match kind {
                // Replies come back to the translated source.
                NatKind::Src => {
                    candidate.dst = a;
                    candidate.dport = p;
                }
                // Replies come from the translated destination.
                NatKind::Dst => {
                    candidate.src = a;
                    candidate.sport = p;
                }
            }
            if !self.index.contains_key(&(zone, candidate)) {
                break;
            }
        }
        candidate
    }

    /// Translates a packet of the connection in `slot` (OVS `handle_nat`): the original
    /// direction to the chosen address and port, replies back.
    fn apply_nat(&mut self, slot: usize, reply: bool, k: &mut FlowKey, state: &mut u8) {
        let conn = self.conns[slot].as_ref().expect("live");
        let Some(kind) = conn.nat else { return };
        let ports = matches!(conn.orig.proto, proto::IP_TCP | proto::IP_UDP | proto::IP_SCTP);
        let (src_f, dst_f) = if k.dl_type() == proto::ETH_IPV6 {
            (id::IPV6_SRC, id::IPV6_DST)
        } else {
            (id::NW_SRC, id::NW_DST)
        };
        let (translated_src, now) = match (kind, reply) {
            // Original direction: SNAT rewrites the source, DNAT the destination, to what the
            // replies carry back.
            (NatKind::Src, false) => (true, (conn.reply.dst, conn.reply.dport)),
            (NatKind::Dst, false) => (false, (conn.reply.src, conn.reply.sport)),
            // Replies: undo, towards the original endpoints.
            (NatKind::Src, true) => (false, (conn.orig.src, conn.orig.sport)),
            (NatKind::Dst, true) => (true, (conn.orig.dst, conn.orig.dport)),
        };
        let (addr_f, port_f) = if translated_src { (src_f, id::TP_SRC) } else { (dst_f, id::TP_DST) };
        k.set(addr_f, now.0);
        if ports {
            k.set(port_f, now.1 as u128);
        }
        *state |= if translated_src { SNAT } else { DNAT };
        self.stats.translated += 1;
    }
}

/// The original tuple of the connection a packet tracked in `zone` carries in its `ct_*`
/// fields (IPv4 only: the key does not hold IPv6 original tuples).
fn carried(k: &FlowKey, zone: u16, state: u8) -> Option<Tuple> {
    let tracked = state & TRK != 0 && state & INV == 0 && k.get(id::CT_ZONE) as u16 == zone;
    if !tracked || k.dl_type() != proto::ETH_IPV4 || k.get(id::CT_NW_PROTO) == 0 {
        return None;
    }
    Some(Tuple {
        src: k.get(id::CT_NW_SRC),
        dst: k.get(id::CT_NW_DST),
        sport: k.get(id::CT_TP_SRC) as u16,
        dport: k.get(id::CT_TP_DST) as u16,
        proto: k.get(id::CT_NW_PROTO) as u8,
    })
}

/// The tuple of a packet conntrack can track, if it can.
fn tuple_of(k: &FlowKey) -> Option<Tuple> {
    if !k.is_ip() || k.nw_frag() & proto::FRAG_LATER != 0 {
        return None;
    }
    let (src, dst) = if k.dl_type() == proto::ETH_IPV4 {
        (k.get(id::NW_SRC), k.get(id::NW_DST))
    } else {
        (k.get(id::IPV6_SRC), k.get(id::IPV6_DST))
    };
    let p = k.nw_proto();
    let (sport, dport) = match p {
        proto::IP_TCP | proto::IP_UDP | proto::IP_SCTP => (k.tp_src(), k.tp_dst()),
        // Echo only: an error's connection is in the inner header a key does not have.
        proto::IP_ICMP | proto::IP_ICMPV6 => match (k.tp_src(), k.tp_dst()) {
            (t @ (0 | 8 | 128 | 129), c) => (echo_request(t), c),
            _ => return None,
        },
        _ => (0, 0),
    };
    Some(Tuple { src, dst, sport, dport, proto: p })
}

/// Echo request and reply share a tuple up to direction: both keyed by the request's type.
fn echo_request(t: u16) -> u16 {
    match t {
        0 => 8,
        129 => 128,
        t => t,
    }
}

/// Whether a packet may start a connection (OVS `valid_new`).
fn valid_new(k: &FlowKey, t: &Tuple) -> bool {
    match t.proto {
        proto::IP_TCP => {
            let flags = k.get(id::TCP_FLAGS) as u16;
            !tcp_invalid_flags(flags) && flags & (TCP_SYN | TCP_ACK) != TCP_SYN | TCP_ACK
        }
        // Only a request starts an echo connection.
        proto::IP_ICMP => k.tp_src() == 8,
        proto::IP_ICMPV6 => k.tp_src() == 128,
        _ => true,
    }
}

/// OVS `tcp_invalid_flags`.
fn tcp_invalid_flags(flags: u16) -> bool {
    if flags & TCP_SYN != 0 {
        if flags & (TCP_RST | TCP_FIN) != 0 {
            return true;
        }
    } else if flags & (TCP_ACK | TCP_RST) == 0 {
        return true;
    }
    flags & TCP_ACK == 0 && flags & (TCP_FIN | TCP_PSH | TCP_URG) != 0
}

/// OVS `conn_update` for a packet of `conn` (`reply`: in the reply direction).
fn update(conn: &mut Conn, k: &FlowKey, reply: bool, now_ns: u64) -> Update {
    let (result, expiry) = match &mut conn.state {
        ProtoState::Tcp(peers) => {
            let flags = k.get(id::TCP_FLAGS) as u16;
            if tcp_invalid_flags(flags) {
                return Update::Invalid;
            }
            let (s, d) = if reply { (1, 0) } else { (0, 1) };
            if flags & (TCP_SYN | TCP_ACK) == TCP_SYN {
                if peers[d] >= TcpPeer::FinWait2 && peers[s] >= TcpPeer::FinWait2 {
                    return Update::New;
                } else if peers[s] <= TcpPeer::SynSent {
                    peers[s] = TcpPeer::SynSent;
                    conn.expires_ns = now_ns.saturating_add(timeout::TCP_FIRST_PACKET);
                    return Update::ValidNew;
                }
            }
            if flags & TCP_SYN != 0 && peers[s] < TcpPeer::SynSent {
                peers[s] = TcpPeer::SynSent;
            }
            if flags & TCP_FIN != 0 && peers[s] < TcpPeer::Closing {
                peers[s] = TcpPeer::Closing;
            }
            if flags & TCP_ACK != 0 {
                if peers[d] == TcpPeer::SynSent {
                    peers[d] = TcpPeer::Established;
                } else if peers[d] == TcpPeer::Closing {
                    peers[d] = TcpPeer::FinWait2;
                }
            }
            if flags & TCP_RST != 0 {
                peers[s] = TcpPeer::TimeWait;
                peers[d] = TcpPeer::TimeWait;
            }
            let (a, b) = (peers[s], peers[d]);
            let t = if a >= TcpPeer::FinWait2 && b >= TcpPeer::FinWait2 {
                timeout::TCP_CLOSED
            } else if a >= TcpPeer::Closing && b >= TcpPeer::Closing {
                timeout::TCP_FIN_WAIT
            } else if a < TcpPeer::Established || b < TcpPeer::Established {
                timeout::TCP_OPENING
            } else if a >= TcpPeer::Closing || b >= TcpPeer::Closing {
                timeout::TCP_CLOSING
            } else {
                timeout::TCP_ESTABLISHED
            };
            (Update::Valid, t)
        }
        ProtoState::Other(st) => {
            // OVS other_conn_update: first, multiple (one way), bidirectional.
            if reply && *st != 2 {
                *st = 2;
                (Update::Valid, timeout::OTHER_BIDIR)
            } else if *st == 0 {
                *st = 1;
                (Update::ValidNew, timeout::OTHER_MULTIPLE)
            } else {
                (Update::Valid, if *st == 2 { timeout::OTHER_BIDIR } else { timeout::OTHER_MULTIPLE })
            }
        }
        ProtoState::Icmp(replied) => {
            *replied |= reply;
            (Update::Valid, if *replied { timeout::ICMP_REPLY } else { timeout::ICMP_FIRST })
        }
    };
    conn.expires_ns = now_ns.saturating_add(expiry);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::parse_packet;
    use crate::packet::ct_state;

    fn ct(commit: bool, zone: u16) -> CtExec {
        CtExec { commit, force: false, zone, mark: None, label: None, nat: None }
    }

    fn tcp(src: &str, dst: &str, sport: u16, dport: u16, flags: u16) -> FlowKey {
        let mut k =
            parse_packet(&format!("tcp,nw_src={src},nw_dst={dst},tp_src={sport},tp_dst={dport}")).unwrap();
        k.set(id::TCP_FLAGS, flags as u128);
        k
    }

    /// Runs `ct` on a copy of `k` and returns the state it leaves.
    fn state(t: &mut Conntrack, ct: &CtExec, k: &FlowKey, now_s: u64) -> String {
        let mut k = *k;
        t.execute(ct, &mut k, now_s * S);
        ct_state::format_exact(k.ct_state())
    }

    /// An ICMP error frame from `src` to `dst` (type 3, code 3) carrying the start of a UDP
    /// datagram `inner_src:sport` → `inner_dst:dport`.
    fn port_unreachable(src: [u8; 4], dst: [u8; 4], inner: ([u8; 4], [u8; 4], u16, u16)) -> Vec<u8> {
        let mut f = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x08, 0x00];
        let (is, id_, sport, dport) = inner;
        let mut ip = vec![0x45, 0, 0, 56, 0, 0, 0, 0, 64, 1, 0, 0];
        ip.extend(src);
        ip.extend(dst);
        f.extend(ip);
        f.extend([3, 3, 0, 0, 0, 0, 0, 0]);
        let mut carried = vec![0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0];
        carried.extend(is);
        carried.extend(id_);
        carried.extend(sport.to_be_bytes());
        carried.extend(dport.to_be_bytes());
        carried.extend([0, 8, 0, 0]);
        f.extend(carried);
        f
    }

    #[test]
    fn an_icmp_error_relates_to_the_connection_of_the_packet_it_carries() {
        use crate::packet::parse::parse_frame_with_layout;
        let mut t = Conntrack::new();
        let query = parse_packet("udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=1000,tp_dst=53").unwrap();
        assert_eq!(state(&mut t, &ct(true, 0), &query, 0), "new|trk");
        let error_of = |frame: &[u8]| {
            let (mut k, mut layout) = (FlowKey::default(), FrameLayout::default());
            parse_frame_with_layout(frame, 1, &mut k, &mut layout).unwrap();
            (k, EmbeddedTuple::of_icmp_error(frame, &layout, &k))
        };
        // The server's error about the query: related, in the reply direction.
        let (k, e) = error_of(&port_unreachable(
            [10, 0, 0, 2],
            [10, 0, 0, 1],
            ([10, 0, 0, 1], [10, 0, 0, 2], 1000, 53),
        ));
        assert_eq!(
            e,
            Some(EmbeddedTuple { src: 0x0a00_0001, dst: 0x0a00_0002, sport: 1000, dport: 53, proto: 17 })
        );
        t.set_embedded(e);
        assert_eq!(state(&mut t, &ct(false, 0), &k, 1), "rel|rpl|trk");
        // A router's error about it: related too (the carried packet was sent to the error's
        // destination's peer, not by the error's source).
        let (k, e) = error_of(&port_unreachable(
            [10, 9, 9, 9],
            [10, 0, 0, 1],
            ([10, 0, 0, 1], [10, 0, 0, 2], 1000, 53),
        ));
        t.set_embedded(e);
        assert_eq!(state(&mut t, &ct(false, 0), &k, 1), "rel|rpl|trk");
        // Carrying a packet of no connection, or one its destination never sent: invalid.
        for inner in [([10, 0, 0, 1], [10, 0, 0, 2], 1001, 53), ([10, 0, 0, 7], [10, 0, 0, 2], 1000, 53)] {
            let (k, e) = error_of(&port_unreachable([10, 0, 0, 2], [10, 0, 0, 1], inner));
            t.set_embedded(e);
            assert_eq!(state(&mut t, &ct(false, 0), &k, 1), "inv|trk");
        }
        // Without the carried packet (a replay's keys), an error stays invalid; the
        // connection was never updated by the errors.
        t.set_embedded(None);
        assert_eq!(state(&mut t, &ct(false, 0), &k, 1), "inv|trk");
        assert_eq!(state(&mut t, &ct(false, 0), &query, 1), "new|trk");
        assert_eq!(t.stats().related, 2);
        // An echo request is no error: nothing is read from it.
        let echo = parse_packet("icmp,nw_src=10.0.0.1,nw_dst=10.0.0.2,icmp_type=8").unwrap();
        let layout = FrameLayout { l4: Some(34), l3_end: 64, ..FrameLayout::default() };
        assert_eq!(EmbeddedTuple::of_icmp_error(&[0; 64], &layout, &echo), None);
    }

    #[test]
    fn a_tcp_handshake_goes_new_then_established() {
        let mut t = Conntrack::new();
        let syn = tcp("10.0.0.1", "10.0.0.2", 1000, 80, TCP_SYN);
        let synack = tcp("10.0.0.2", "10.0.0.1", 80, 1000, TCP_SYN | TCP_ACK);
        let ack = tcp("10.0.0.1", "10.0.0.2", 1000, 80, TCP_ACK);
        // Not committed: new every time, nothing held.
        assert_eq!(state(&mut t, &ct(false, 0), &syn, 0), "new|trk");
        assert_eq!(state(&mut t, &ct(false, 0), &syn, 0), "new|trk");
        assert!(t.is_empty());
        assert_eq!(state(&mut t, &ct(true, 0), &syn, 0), "new|trk");
        // A retransmitted SYN is still new; the reply establishes, in the reply direction.
        assert_eq!(state(&mut t, &ct(false, 0), &syn, 1), "new|trk");
        assert_eq!(state(&mut t, &ct(false, 0), &synack, 1), "est|rpl|trk");
        assert_eq!(state(&mut t, &ct(false, 0), &ack, 1), "est|trk");
        // Other zones do not know it; a SYN+ACK cannot start a connection.
        assert_eq!(state(&mut t, &ct(false, 7), &ack, 1), "new|trk");
        assert_eq!(state(&mut t, &ct(true, 7), &synack, 1), "inv|trk");
        // Invalid flag combinations are invalid.
        assert_eq!(state(&mut t, &ct(false, 0), &tcp("10.0.0.1", "10.0.0.2", 1000, 80, 0), 1), "inv|trk");
        assert_eq!(t.len(), 1);
        let mut k = ack;
        t.execute(&ct(false, 0), &mut k, S);
        assert_eq!(
            (k.get(id::CT_NW_SRC), k.get(id::CT_TP_DST), k.get(id::CT_NW_PROTO)),
            (0x0a00_0001, 80, 6),
            "the original tuple"
        );
    }

    #[test]
    fn the_nic_tracks_established_connections_while_its_table_has_room() {
        let hw = HwOffload { entries: 1, latency_ns: S / 10 };
        let mut t = Conntrack::with_offload(hw);
        let (c, z) = (ct(true, 0), ct(false, 0));
        let syn = tcp("10.0.0.1", "10.0.0.2", 1000, 80, TCP_SYN);
        let synack = tcp("10.0.0.2", "10.0.0.1", 80, 1000, TCP_SYN | TCP_ACK);
        let ack = tcp("10.0.0.1", "10.0.0.2", 1000, 80, TCP_ACK);
        let data = tcp("10.0.0.2", "10.0.0.1", 80, 1000, TCP_ACK | TCP_PSH);
        let fin = tcp("10.0.0.1", "10.0.0.2", 1000, 80, TCP_ACK | TCP_FIN);
        state(&mut t, &c, &syn, 0);
        state(&mut t, &z, &synack, 0);
        // The reply alone does not establish the originator's peer: not offloaded yet.
        assert_eq!(t.offloaded(), 0);
        assert!(!t.in_hardware(&z, &ack, 0));
        assert_eq!(state(&mut t, &z, &ack, 1), "est|trk");
        assert_eq!(t.offloaded(), 1);
        // From the offload's latency on, both directions; never a SYN, FIN or RST.
        assert!(!t.in_hardware(&z, &data, S));
        assert!(t.in_hardware(&z, &data, 2 * S) && t.in_hardware(&z, &ack, 2 * S));
        assert!(!t.in_hardware(&z, &fin, 2 * S) && !t.in_hardware(&ct(false, 3), &data, 2 * S));
        // A second connection finds the table full.
        let (syn2, synack2) =
            (tcp("10.0.0.3", "10.0.0.2", 1, 80, TCP_SYN), tcp("10.0.0.2", "10.0.0.3", 80, 1, 0x12));
        state(&mut t, &c, &syn2, 2);
        state(&mut t, &z, &synack2, 2);
        state(&mut t, &z, &tcp("10.0.0.3", "10.0.0.2", 1, 80, TCP_ACK), 2);
        assert_eq!((t.offloaded(), t.stats().offload_full), (1, 1));
        // The FIN, in software, ends the first offload; its slot goes to the next that asks.
        state(&mut t, &z, &fin, 3);
        assert!(!t.in_hardware(&z, &data, 4 * S));
        assert_eq!(t.offloaded(), 0);
        state(&mut t, &z, &tcp("10.0.0.2", "10.0.0.3", 80, 1, TCP_ACK), 4);
        assert_eq!((t.offloaded(), t.stats().offloaded), (1, 2));
        // UDP once both directions were seen; ICMP never.
        let mut u = Conntrack::with_offload(HwOffload { entries: 8, latency_ns: 0 });
        let udp = |a: &str, b: &str, p: u16, q: u16| {
            parse_packet(&format!("udp,nw_src={a},nw_dst={b},tp_src={p},tp_dst={q}")).unwrap()
        };
        state(&mut u, &c, &udp("10.0.0.1", "10.0.0.2", 5000, 53), 0);
        state(&mut u, &z, &udp("10.0.0.1", "10.0.0.2", 5000, 53), 0);
        assert_eq!(u.offloaded(), 0);
        state(&mut u, &z, &udp("10.0.0.2", "10.0.0.1", 53, 5000), 0);
        assert!(u.in_hardware(&z, &udp("10.0.0.1", "10.0.0.2", 5000, 53), 0));
        let ping = parse_packet("icmp,nw_src=10.0.0.1,nw_dst=10.0.0.2,icmp_type=8").unwrap();
        let pong = parse_packet("icmp,nw_src=10.0.0.2,nw_dst=10.0.0.1,icmp_type=0").unwrap();
        state(&mut u, &c, &ping, 0);
        assert_eq!(state(&mut u, &z, &pong, 0), "est|rpl|trk");
        assert!(!u.in_hardware(&z, &ping, 0));
        assert_eq!(u.offloaded(), 1);
        // Timing out frees the table.
        u.sweep(3600 * S);
        assert_eq!((u.offloaded(), u.len()), (0, 0));
    }

    #[test]
    fn connections_time_out_as_the_userspace_datapath_does() {
        let mut t = Conntrack::new();
        let syn = tcp("10.0.0.1", "10.0.0.2", 1000, 80, TCP_SYN);
        t.execute(&ct(true, 0), &mut syn.clone(), 0);
        // A half-open connection lasts 30 s.
        assert_eq!(
            state(&mut t, &ct(false, 0), &tcp("10.0.0.1", "10.0.0.2", 1000, 80, TCP_ACK), 29),
            "est|trk"
        );
        assert_eq!(
            state(&mut t, &ct(false, 0), &tcp("10.0.0.1", "10.0.0.2", 1000, 80, TCP_ACK), 70),
            "new|trk"
        );
        assert_eq!(t.stats().expired, 1);
        // UDP: new twice one way (first, multiple), established both ways, 30 s after a reply.
        let out = parse_packet("udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=5000,tp_dst=53").unwrap();
        let back = parse_packet("udp,nw_src=10.0.0.2,nw_dst=10.0.0.1,tp_src=53,tp_dst=5000").unwrap();
        assert_eq!(state(&mut t, &ct(true, 0), &out, 100), "new|trk");
        assert_eq!(state(&mut t, &ct(false, 0), &out, 101), "new|trk");
        assert_eq!(state(&mut t, &ct(false, 0), &out, 102), "est|trk");
        assert_eq!(state(&mut t, &ct(false, 0), &back, 103), "est|rpl|trk");
        t.sweep(132 * S);
        assert_eq!(t.len(), 1, "30 s after the reply");
        t.sweep(134 * S);
        assert!(t.is_empty());
    }

    #[test]
    fn nat_translates_new_connections_and_their_replies() {
        let mut t = Conntrack::new();
        let nat = Nat {
            kind: Some(NatKind::Dst),
            addrs: Some((0x0a08_0005, 0x0a08_0005)),
            ports: Some((8080, 8080)),
            ..Nat::default()
        };
        let commit = CtExec { nat: Some(nat), mark: Some((7, 0xff)), ..ct(true, 3) };
        let mut k = tcp("10.0.0.1", "10.96.0.10", 1000, 80, TCP_SYN);
        t.execute(&commit, &mut k, 0);
        assert_eq!(ct_state::format_exact(k.ct_state()), "new|trk|dnat");
        assert_eq!((k.nw_dst(), k.tp_dst()), (0x0a08_0005, 8080), "to the backend");
        assert_eq!(k.get(id::CT_MARK), 7);
        // The backend's reply, un-NATed by a bare nat: back from the service address.
        let mut reply = tcp("10.8.0.5", "10.0.0.1", 8080, 1000, TCP_SYN | TCP_ACK);
        let unnat = CtExec { nat: Some(Nat::default()), ..ct(false, 3) };
        t.execute(&unnat, &mut reply, S);
        assert_eq!(ct_state::format_exact(reply.ct_state()), "est|rpl|trk|snat");
        assert_eq!((reply.nw_src(), reply.tp_src()), (0x0a60_000a, 80));
        assert_eq!(reply.get(id::CT_MARK), 7);
        // Without nat in the ct action nothing is rewritten.
        let mut plain = tcp("10.0.0.1", "10.96.0.10", 1000, 80, TCP_ACK);
        t.execute(&ct(false, 3), &mut plain, S);
        assert_eq!((plain.nw_dst(), plain.ct_state() & ct_state::DNAT), (0x0a60_000a, 0));
        assert_eq!(t.stats().translated, 2);
    }

    #[test]
    fn source_nat_picks_free_ports_in_its_range() {
        let mut t = Conntrack::new();
        let nat = Nat {
            kind: Some(NatKind::Src),
            addrs: Some((0x0a09_0001, 0x0a09_0001)),
            ports: Some((2000, 2001)),
            ..Nat::default()
        };
        let commit = CtExec { nat: Some(nat), ..ct(true, 0) };
        let mut ports = Vec::new();
        for sport in [1000, 1001] {
            let mut k =
                parse_packet(&format!("udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src={sport},tp_dst=53"))
                    .unwrap();
            t.execute(&commit, &mut k, 0);
            assert_eq!(k.nw_src(), 0x0a09_0001);
            ports.push(k.tp_src());
        }
        ports.sort();
        assert_eq!(ports, vec![2000, 2001], "two connections, two ports");
    }

    #[test]
    fn force_restarts_a_connection_seen_from_the_other_side() {
        let mut t = Conntrack::new();
        let a = parse_packet("udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=5000,tp_dst=53").unwrap();
        let b = parse_packet("udp,nw_src=10.0.0.2,nw_dst=10.0.0.1,tp_src=53,tp_dst=5000").unwrap();
        t.execute(&ct(true, 0), &mut a.clone(), 0);
        let force = CtExec { force: true, ..ct(true, 0) };
        assert_eq!(state(&mut t, &force, &b, 1), "new|trk");
        assert_eq!(state(&mut t, &ct(false, 0), &a, 1), "est|rpl|trk", "now the other way round");
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn what_cannot_be_tracked_is_invalid() {
        let mut t = Conntrack::new();
        for p in ["arp", "icmp,icmp_type=3,icmp_code=1", "ip,nw_frag=later"] {
            assert_eq!(state(&mut t, &ct(true, 0), &parse_packet(p).unwrap(), 0), "inv|trk", "{p}");
        }
        let echo = parse_packet("icmp,nw_src=10.0.0.1,nw_dst=10.0.0.2,icmp_type=8").unwrap();
        let reply = parse_packet("icmp,nw_src=10.0.0.2,nw_dst=10.0.0.1,icmp_type=0").unwrap();
        assert_eq!(state(&mut t, &ct(false, 0), &reply, 0), "inv|trk", "a reply starts nothing");
        assert_eq!(state(&mut t, &ct(true, 0), &echo, 0), "new|trk");
        assert_eq!(state(&mut t, &ct(false, 0), &reply, 0), "est|rpl|trk");
        assert_eq!(t.stats().invalid, 4);
    }

    #[test]
    fn a_second_commit_after_nat_updates_the_connection_the_packet_belongs_to() {
        // Antrea's EndpointDNAT, then its IngressRule commit in the same zone: one connection,
        // whose reply is un-NATed (OVS keeps the connection with the packet).
        let mut t = Conntrack::new();
        let nat = Nat { kind: Some(NatKind::Dst), addrs: Some((0x0a00_0002, 0x0a00_0002)), ..Nat::default() };
        let mut k = tcp("10.0.0.1", "10.0.0.100", 1000, 80, TCP_SYN);
        t.execute(&CtExec { nat: Some(nat), ..ct(true, 1) }, &mut k, 0);
        t.execute(&CtExec { label: Some((3, 0xffff_ffff)), ..ct(true, 1) }, &mut k, 0);
        assert_eq!((t.len(), k.nw_dst(), k.get(id::CT_LABEL)), (1, 0x0a00_0002, 3));
        let mut reply = tcp("10.0.0.2", "10.0.0.1", 80, 1000, TCP_SYN | TCP_ACK);
        t.execute(&CtExec { nat: Some(Nat::default()), ..ct(false, 1) }, &mut reply, S);
        assert_eq!(ct_state::format_exact(reply.ct_state()), "est|rpl|trk|snat");
        assert_eq!((reply.nw_src(), reply.get(id::CT_LABEL)), (0x0a00_0064, 3));
    }
}
