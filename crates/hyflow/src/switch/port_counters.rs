//! Per-port packet and byte counters, as `ovs-ofctl dump-ports` shows them, and whether each
//! packet left at all (forwarded) or not (dropped).
//!
//! A port's `rx` counts the packets that arrived on it (their `in_port`); its `tx` counts the
//! copies that left on it, each of the frame's length as it leaves: the length it arrived with,
//! plus 4 bytes for every VLAN tag the actions pushed and less 4 for every one they popped
//! (other rewrites keep the length). Ports are OpenFlow port numbers; counters live in a flat
//! array indexed by port for the usual small numbers, and in a map for the rest (`LOCAL`).
//!
//! Copies are counted where a decision is carried out, whichever layer made it: from the
//! copies built (a slow-path translation, a Gigaflow chain, an executed action list) or, when
//! the caller asked for no copies, from the cached action list's [`CopyPlan`] (its copies'
//! ports and tags, found once when it was interned), so counting runs no actions.

use hashbrown::HashMap;

use crate::decision::copy_plan::{CopyPlan, TagDepth};
use crate::openflow::traversal::Output;
use crate::packet::FlowKey;

/// Ports below this are counted in the flat array.
const FLAT_PORTS: u32 = 4096;

/// Bytes a VLAN tag adds to a frame.
const VLAN_TAG_BYTES: i64 = 4;

/// Packets and bytes one way through one port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCount {
    /// Packets.
    pub packets: u64,
    /// Their bytes on the wire.
    pub bytes: u64,
}

impl PortCount {
    #[inline]
    fn add(&mut self, bytes: u64) {
        self.add_n(1, bytes);
    }

    #[inline]
    fn add_n(&mut self, packets: u64, bytes: u64) {
        self.packets += packets;
        self.bytes += bytes;
    }
}

/// One port's counters, as `ovs-ofctl dump-ports` prints them (key names are an interface).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PortStats {
    /// OpenFlow port number.
    pub port: u32,
    /// Packets that arrived on it.
    pub rx_packets: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Copies that left on it.
    pub tx_packets: u64,
    /// Their bytes as they left.
    pub tx_bytes: u64,
}

/// Counters of every port seen, both ways.
#[derive(Clone, Debug, Default)]
pub(crate) struct PortCounters {
    /// `[rx, tx]` by port, for ports below [`FLAT_PORTS`].
    flat: Vec<[PortCount; 2]>,
    /// The same for larger port numbers.
    large: HashMap<u32, [PortCount; 2]>,
    /// Copies the packet being decided sent out so far.
    copies_now: u32,
    /// VLAN tags the packet being decided arrived with (a recirculated pass may carry
    /// others: a copy's length is against the frame that arrived).
    tags_in: u8,
}

impl PortCounters {
    #[inline(always)]
    fn slot(&mut self, port: u32) -> &mut [PortCount; 2] {
        let i = port as usize;
        if i < self.flat.len() {
            return &mut self.flat[i];
        }
        self.new_slot(port)
    }

    /// A port not seen yet (or a large number): out of the per-packet path.
    #[cold]
    #[inline(never)]
    fn new_slot(&mut self, port: u32) -> &mut [PortCount; 2] {
        if port < FLAT_PORTS {
            let i = port as usize;
            self.flat.resize(i + 1, [PortCount::default(); 2]);
            &mut self.flat[i]
        } else {
            self.large.entry(port).or_default()
        }
    }

    /// A packet `key` of `bytes` arrived: a new packet starts being decided.
    #[inline]
    pub(crate) fn arrived(&mut self, key: &FlowKey, bytes: u64) {
        self.slot(key.in_port())[0].add(bytes);
        self.resume(key);
    }

    /// Packet `key` resumes being decided (in software, after the NIC missed it): none of its
    /// copies left yet.
    #[inline]
    pub(crate) fn resume(&mut self, key: &FlowKey) {
        self.copies_now = 0;
        self.tags_in = tags(key);
    }

    /// Whether the packet being decided sent any copy out so far.
    #[inline]
    pub(crate) fn forwarded_now(&self) -> bool {
        self.copies_now > 0
    }

    #[inline]
    fn left(&mut self, port: u32, bytes: u64) {
        self.slot(port)[1].add(bytes);
        self.copies_now += 1;
    }

    /// Counts `packets` frames of `bytes` in all that arrived as `pass` and left as the
    /// action list of `plan` (which must not track connections) sends them, counted
    /// elsewhere (a NIC's own counters) and credited in one go; returns whether they left.
    pub(crate) fn credit(&mut self, pass: &FlowKey, plan: &CopyPlan, packets: u64, bytes: u64) -> bool {
        self.slot(pass.in_port())[0].add_n(packets, bytes);
        let depth = TagDepth::of(pass);
        let copies = plan.copies(depth);
        for c in copies {
            let bytes = wire_bytes_of(packets, bytes, depth.count(), c.tags);
            self.slot(c.port)[1].add_n(packets, bytes);
        }
        self.copies_now = copies.len() as u32;
        !copies.is_empty()
    }

    /// Counts `copies` of the packet being decided, a frame of `bytes`.
    #[inline]
    pub(crate) fn left_as(&mut self, copies: &[Output], bytes: u64) {
        let tags_in = self.tags_in;
        for c in copies {
            self.left(c.port, wire_bytes(bytes, tags_in, tags(&c.packet)));
        }
    }

    /// Counts the copies the action list of `plan` sends out of a pass `pass` of the packet
    /// being decided, a frame of `bytes`, without building them or running the list (it
    /// must not track connections: its copies do not depend on state).
    #[inline]
    pub(crate) fn left_by(&mut self, plan: &CopyPlan, pass: &FlowKey, bytes: u64) {
        let tags_in = self.tags_in;
        for c in plan.copies(TagDepth::of(pass)) {
            self.left(c.port, wire_bytes(bytes, tags_in, c.tags));
        }
    }

    /// Every port seen, in port order.
    pub(crate) fn ports(&self) -> Vec<PortStats> {
        let flat = self.flat.iter().enumerate().map(|(p, c)| (p as u32, *c));
        let mut large: Vec<(u32, [PortCount; 2])> = self.large.iter().map(|(&p, &c)| (p, c)).collect();
        large.sort_unstable_by_key(|&(p, _)| p);
        flat.chain(large)
            .filter(|(_, [rx, tx])| rx.packets > 0 || tx.packets > 0)
            .map(|(port, [rx, tx])| PortStats {
                port,
                rx_packets: rx.packets,
                rx_bytes: rx.bytes,
                tx_packets: tx.packets,
                tx_bytes: tx.bytes,
            })
            .collect()
    }
}

/// The counters of `now` less those of `then` (an earlier reading of the same switch), ports
/// with nothing left out.
pub(crate) fn ports_since(now: &[PortStats], then: &[PortStats]) -> Vec<PortStats> {
    now.iter()
        .filter_map(|p| {
            let t = then.iter().find(|t| t.port == p.port).copied().unwrap_or_default();
            let d = PortStats {
                port: p.port,
                rx_packets: p.rx_packets - t.rx_packets,
                rx_bytes: p.rx_bytes - t.rx_bytes,
                tx_packets: p.tx_packets - t.tx_packets,
                tx_bytes: p.tx_bytes - t.tx_bytes,
            };
            (d.rx_packets > 0 || d.tx_packets > 0).then_some(d)
        })
        .collect()
}

/// VLAN tags a key carries (0–2).
#[inline]
fn tags(key: &FlowKey) -> u8 {
    TagDepth::of(key).count()
}

#[inline]
fn wire_bytes(bytes: u64, tags_in: u8, tags_out: u8) -> u64 {
    wire_bytes_of(1, bytes, tags_in, tags_out)
}

/// The bytes of `packets` frames of `bytes` in all, each with its tags changed so.
#[inline]
fn wire_bytes_of(packets: u64, bytes: u64, tags_in: u8, tags_out: u8) -> u64 {
    let delta = (tags_out as i64 - tags_in as i64) * VLAN_TAG_BYTES * packets as i64;
    (bytes as i64 + delta).max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::dp_actions::DpAction;
    use crate::openflow::execute::{execute, Outputs};
    use crate::packet::field::id;

    fn tagged(vid: u16) -> FlowKey {
        let mut k = FlowKey::default();
        k.set_vlan_tci(crate::packet::field::proto::VLAN_CFI | vid);
        k
    }

    /// Counting without building the copies gives what counting the copies built gives.
    #[test]
    fn counting_by_actions_equals_counting_the_copies() {
        let lists: Vec<Vec<DpAction>> = vec![
            vec![],
            vec![DpAction::Output(1)],
            vec![DpAction::PushVlan { tpid: 0x8100, tci: 0x1005 }, DpAction::Output(2), DpAction::Output(3)],
            vec![DpAction::Output(1), DpAction::PopVlan, DpAction::Output(2)],
            vec![DpAction::Clone(2), DpAction::PopVlan, DpAction::Output(4), DpAction::Output(5)],
            vec![
                DpAction::Set { field: id::VLAN_TCI, value: 0, mask: 0xffff, opens: true },
                DpAction::Output(6),
            ],
        ];
        for entry in [FlowKey::default(), tagged(5)] {
            for list in &lists {
                let mut built = Vec::new();
                execute(list, &mut entry.clone(), &mut Outputs(&mut built));
                let mut by_copies = PortCounters::default();
                by_copies.arrived(&entry, 100);
                by_copies.left_as(&built, 100);
                let mut by_actions = PortCounters::default();
                by_actions.arrived(&entry, 100);
                by_actions.left_by(&CopyPlan::of(list), &entry, 100);
                assert_eq!(by_copies.ports(), by_actions.ports(), "{list:?} on {entry:?}");
                assert_eq!(by_actions.forwarded_now(), !built.is_empty());
                // Three such frames credited in one go count as three counted one by one.
                let mut by_credit = PortCounters::default();
                let left = by_credit.credit(&entry, &CopyPlan::of(list), 3, 300);
                for _ in 0..2 {
                    by_copies.arrived(&entry, 100);
                    by_copies.left_as(&built, 100);
                }
                assert_eq!(by_credit.ports(), by_copies.ports(), "{list:?} on {entry:?}, credited");
                assert_eq!(left, !built.is_empty());
            }
        }
    }

    #[test]
    fn pushed_tags_add_four_bytes_and_large_ports_count() {
        let mut c = PortCounters::default();
        let mut local = FlowKey::default();
        local.set_in_port(0xfffe);
        c.arrived(&local, 60);
        c.left_by(
            &CopyPlan::of(&[DpAction::PushVlan { tpid: 0x8100, tci: 0x1001 }, DpAction::Output(1)]),
            &FlowKey::default(),
            60,
        );
        let ports = c.ports();
        assert_eq!(
            ports,
            vec![
                PortStats { port: 1, rx_packets: 0, rx_bytes: 0, tx_packets: 1, tx_bytes: 64 },
                PortStats { port: 0xfffe, rx_packets: 1, rx_bytes: 60, tx_packets: 0, tx_bytes: 0 },
            ]
        );
        let since = ports_since(&ports, &[ports[0]]);
        assert_eq!(since, vec![ports[1]]);
    }
}
