//! The one interpreter of datapath actions, as Open vSwitch's `lib/odp-execute.c`.
//!
//! [`execute`] walks an action list once, in order, and does to the packet what every
//! datapath does the same way (masked `set`s, VLAN push and pop, `ct_clear`, `hash`,
//! `clone`'s copy). What only a particular datapath can do — send a copy out, look a
//! connection up, recirculate — it hands to a [`Datapath`] (OVS's `dp_execute_cb`). The
//! packet is anything that can carry those rewrites ([`DpPacket`]): a flow key for the model
//! (outputs are keys as they leave), real frame bytes for a live switch (rewrites with their
//! checksum updates), each a backend of the same walk rather than a second interpreter.
//!
//! Backends here: [`Outputs`] (what leaves, with no connection tracker: a NIC entry or a
//! cache replaying a decision that does not track), [`HeadersOnly`] (the packet as the
//! actions leave it, outputs ignored); the switch adds its own with the connection tracker
//! and the recirculation queue.

use super::dp_actions::{CtExec, DpAction};
use super::ovs_hash::symmetric_l3l4_hash;
use super::traversal::Output;
use crate::packet::field::{id, FieldId};
use crate::packet::{FlowKey, FlowMask};

/// A packet the executor rewrites: what every datapath action does to headers.
pub trait DpPacket: Clone {
    /// Sets the `mask` bits of `field` to those of `value`.
    fn set_masked(&mut self, field: FieldId, value: u128, mask: u128);
    /// Removes the outer VLAN tag.
    fn pop_vlan(&mut self);
    /// Pushes an outer VLAN tag.
    fn push_vlan(&mut self, tpid: u16, tci: u16);
    /// Clears the connection tracker's fields (`ct_clear`).
    fn ct_clear(&mut self);
    /// Sets `dp_hash` to OVS's symmetric L3/L4 hash of the packet with `basis`.
    fn hash(&mut self, basis: u32);
}

impl DpPacket for FlowKey {
    #[inline]
    fn set_masked(&mut self, field: FieldId, value: u128, mask: u128) {
        FlowKey::set_masked(self, field, value, mask);
    }

    #[inline]
    fn pop_vlan(&mut self) {
        self.set_vlan_tpid(self.vlan_tpid2());
        self.set_vlan_tci(self.vlan_tci2());
        self.set_vlan_tpid2(0);
        self.set_vlan_tci2(0);
    }

    #[inline]
    fn push_vlan(&mut self, tpid: u16, tci: u16) {
        self.set_vlan_tpid2(self.vlan_tpid());
        self.set_vlan_tci2(self.vlan_tci());
        self.set_vlan_tpid(tpid);
        self.set_vlan_tci(tci);
    }

    #[inline]
    fn ct_clear(&mut self) {
        self.clear_conntrack();
    }

    #[inline]
    fn hash(&mut self, basis: u32) {
        self.set(id::DP_HASH, symmetric_l3l4_hash(self, basis) as u128);
    }
}

/// A flow key rewritten copy-on-write: the packet a cached decision runs on. Most decisions
/// only output, and copying the 184-byte key for each hit would be most of the work of
/// serving it; a decision that rewrites copies it at its first rewrite.
#[derive(Clone, Debug)]
pub struct CowKey<'a> {
    original: &'a FlowKey,
    rewritten: Option<FlowKey>,
}

impl<'a> CowKey<'a> {
    /// `key`, not copied yet.
    #[inline]
    pub fn new(key: &'a FlowKey) -> Self {
        CowKey { original: key, rewritten: None }
    }

    /// The packet as the actions have left it so far.
    #[inline]
    pub fn key(&self) -> &FlowKey {
        self.rewritten.as_ref().unwrap_or(self.original)
    }

    /// The packet, to rewrite: copied first if it is still the original.
    #[inline]
    pub fn make_mut(&mut self) -> &mut FlowKey {
        // Copied once: later rewrites find the copy.
        let original = self.original;
        match &mut self.rewritten {
            Some(key) => key,
            empty => empty.insert(*original),
        }
    }
}

impl DpPacket for CowKey<'_> {
    #[inline]
    fn set_masked(&mut self, field: FieldId, value: u128, mask: u128) {
        self.make_mut().set_masked(field, value, mask);
    }

    #[inline]
    fn pop_vlan(&mut self) {
        DpPacket::pop_vlan(self.make_mut());
    }

    #[inline]
    fn push_vlan(&mut self, tpid: u16, tci: u16) {
        DpPacket::push_vlan(self.make_mut(), tpid, tci);
    }

    #[inline]
    fn ct_clear(&mut self) {
        self.make_mut().clear_conntrack();
    }

    #[inline]
    fn hash(&mut self, basis: u32) {
        DpPacket::hash(self.make_mut(), basis);
    }
}

/// What only the datapath running the actions can do (OVS's `dp_execute_cb`).
pub trait Datapath<P: DpPacket> {
    /// A copy of `packet` as it is now leaves on `port`.
    fn output(&mut self, port: u32, packet: &P);
    /// `ct(...)`: look the connection up, commit, NAT; fills the packet's `ct_*` fields.
    fn ct(&mut self, ct: &CtExec, packet: &mut P);
    /// A copy of `packet` as it is now goes through the datapath again with `recirc_id`.
    fn recirc(&mut self, recirc_id: u32, packet: &P);
}

/// Runs `actions` on `packet` once, in order, calling `datapath` for outputs, connection
/// tracking and recirculation; leaves `packet` as the actions leave it (a `clone`'s body runs
/// on a copy and changes nothing after it).
#[inline]
pub fn execute<P: DpPacket, D: Datapath<P>>(actions: &[DpAction], packet: &mut P, datapath: &mut D) {
    let mut i = 0;
    while i < actions.len() {
        let a = &actions[i];
        i += 1;
        match *a {
            DpAction::Set { field, value, mask, .. } => packet.set_masked(field, value, mask),
            DpAction::PopVlan => packet.pop_vlan(),
            DpAction::PushVlan { tpid, tci } => packet.push_vlan(tpid, tci),
            DpAction::Output(port) => datapath.output(port, packet),
            DpAction::Ct(ref ct) => datapath.ct(ct, packet),
            DpAction::CtClear => packet.ct_clear(),
            DpAction::Hash(basis) => packet.hash(basis),
            DpAction::Clone(len) => {
                let body = &actions[i..i + len as usize];
                execute(body, &mut packet.clone(), datapath);
                i += len as usize;
            }
            DpAction::Recirc(recirc_id) => datapath.recirc(recirc_id, packet),
        }
    }
}

/// The copies that leave, as flow keys (no datapath metadata: [`FlowMask::leaving`]), with no
/// connection tracker: `ct` and recirculation do nothing. What a NIC entry or a cache replays
/// for a decision that does not track connections.
pub struct Outputs<'a>(pub &'a mut Vec<Output>);

impl Datapath<FlowKey> for Outputs<'_> {
    #[inline]
    fn output(&mut self, port: u32, packet: &FlowKey) {
        self.0.push(Output { port, packet: packet.masked(FlowMask::leaving()) });
    }

    fn ct(&mut self, _: &CtExec, _: &mut FlowKey) {}

    fn recirc(&mut self, _: u32, _: &FlowKey) {}
}

/// Nothing leaves: the executor only rewrites the packet (what it is after the actions).
pub struct HeadersOnly;

impl<P: DpPacket> Datapath<P> for HeadersOnly {
    fn output(&mut self, _: u32, _: &P) {}

    fn ct(&mut self, _: &CtExec, _: &mut P) {}

    fn recirc(&mut self, _: u32, _: &P) {}
}

/// Appends to `outputs` the copies `actions` send out of `packet`, with no connection
/// tracker (see [`Outputs`]): every packet a megaflow covers gets the slow path's outputs.
pub fn outputs_of(actions: &[DpAction], packet: &FlowKey, outputs: &mut Vec<Output>) {
    execute(actions, &mut { *packet }, &mut Outputs(outputs));
}

/// `packet` as `actions` leave it, outputs ignored.
pub(crate) fn apply_headers(actions: &[DpAction], packet: &mut FlowKey) {
    execute(actions, packet, &mut HeadersOnly);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::field::proto;

    fn key() -> FlowKey {
        let mut k = FlowKey::default();
        k.set(id::DL_TYPE, proto::ETH_IPV4 as u128);
        k.set(id::NW_PROTO, proto::IP_TCP as u128);
        k.set(id::NW_SRC, 0x0a00_0001);
        k
    }

    /// A datapath that records every call, in order.
    #[derive(Default)]
    struct Recorder(Vec<String>);

    impl Datapath<FlowKey> for Recorder {
        fn output(&mut self, port: u32, p: &FlowKey) {
            self.0.push(format!("out{port}:{:x}", p.get(id::NW_SRC)));
        }
        fn ct(&mut self, ct: &CtExec, p: &mut FlowKey) {
            self.0.push(format!("ct{}", ct.zone));
            p.set(id::CT_ZONE, ct.zone as u128);
        }
        fn recirc(&mut self, recirc_id: u32, p: &FlowKey) {
            self.0.push(format!("recirc{recirc_id}:{:x}", p.get(id::CT_ZONE)));
        }
    }

    fn set_src(v: u128) -> DpAction {
        DpAction::Set { field: id::NW_SRC, value: v, mask: u32::MAX as u128, opens: true }
    }

    #[test]
    fn one_walk_in_order_with_clones_isolated() {
        let ct = CtExec { commit: false, force: false, zone: 7, mark: None, label: None, nat: None };
        let actions = [
            set_src(2),
            DpAction::Output(1),
            DpAction::Clone(2),
            set_src(3),
            DpAction::Output(2),
            DpAction::Output(3),
            DpAction::Ct(ct),
            DpAction::Recirc(5),
        ];
        let mut k = key();
        let mut dp = Recorder::default();
        execute(&actions, &mut k, &mut dp);
        assert_eq!(dp.0, ["out1:2", "out2:3", "out3:2", "ct7", "recirc5:7"]);
        // The packet is as the actions left it, the clone's rewrite not among them.
        assert_eq!(k.get(id::NW_SRC), 2);
        assert_eq!(k.get(id::CT_ZONE), 7);
    }

    impl Datapath<CowKey<'_>> for Recorder {
        fn output(&mut self, port: u32, p: &CowKey<'_>) {
            Datapath::<FlowKey>::output(self, port, p.key());
        }
        fn ct(&mut self, ct: &CtExec, p: &mut CowKey<'_>) {
            Datapath::<FlowKey>::ct(self, ct, p.make_mut());
        }
        fn recirc(&mut self, recirc_id: u32, p: &CowKey<'_>) {
            Datapath::<FlowKey>::recirc(self, recirc_id, p.key());
        }
    }

    /// A copy-on-write packet gives every call and the final packet a copied key gives; it
    /// copies the original only when an action rewrites it, and never changes the original.
    #[test]
    fn copy_on_write_runs_as_a_copy_would() {
        let ct = CtExec { commit: false, force: false, zone: 7, mark: None, label: None, nat: None };
        let lists: [&[DpAction]; 5] = [
            &[DpAction::Output(1), DpAction::Output(2)],
            &[DpAction::Output(1), set_src(2), DpAction::Output(3)],
            &[DpAction::Clone(2), set_src(3), DpAction::Output(2), DpAction::Output(4)],
            &[DpAction::Ct(ct), DpAction::Recirc(5)],
            &[
                DpAction::PushVlan { tpid: proto::ETH_VLAN, tci: 0x1005 },
                DpAction::Hash(1),
                DpAction::CtClear,
            ],
        ];
        for (i, actions) in lists.iter().enumerate() {
            let original = key();
            let (mut copied, mut on_copy) = (original, Recorder::default());
            execute(actions, &mut copied, &mut on_copy);
            let (mut cow, mut on_cow) = (CowKey::new(&original), Recorder::default());
            execute(actions, &mut cow, &mut on_cow);
            assert_eq!(on_cow.0, on_copy.0, "list {i}");
            assert_eq!(*cow.key(), copied, "list {i}");
            // Outputs alone, or a rewrite only inside a clone, leave the original uncopied.
            assert_eq!(cow.rewritten.is_some(), i == 1 || i == 3 || i == 4, "list {i}");
            assert_eq!(original, key());
        }
    }

    #[test]
    fn vlans_push_and_pop_as_a_stack() {
        let mut k = key();
        let actions = [
            DpAction::PushVlan { tpid: proto::ETH_VLAN, tci: 0x1005 },
            DpAction::PushVlan { tpid: 0x88a8, tci: 0x1006 },
            DpAction::PopVlan,
        ];
        apply_headers(&actions, &mut k);
        assert_eq!((k.vlan_tpid(), k.vlan_tci()), (proto::ETH_VLAN, 0x1005));
        assert_eq!(k.vlan_tci2(), 0);
    }

    #[test]
    fn outputs_leave_without_datapath_metadata() {
        let mut k = key();
        k.set_recirc_id(9);
        let mut out = Vec::new();
        outputs_of(&[DpAction::Output(4)], &k, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].packet.recirc_id(), 0);
        assert_eq!(out[0].packet.get(id::NW_SRC), 0x0a00_0001);
    }
}
