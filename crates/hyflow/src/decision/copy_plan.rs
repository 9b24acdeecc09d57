//! Where an interned action list's copies leave, found once when the list is interned, so
//! that counting a cached hit's copies per port reads a few precomputed (port, tags) pairs
//! instead of running the action list.
//!
//! A list that does not go through the connection tracker sends the same copies out of the
//! same ports whatever the packet's fields; only the copies' lengths depend on the packet,
//! through the VLAN tags it arrives with and those the actions push or pop. So the plan holds,
//! for each of the four ways a pass can carry tags (outer, inner), the ports its copies leave
//! on and the tags each then carries: the per-port counters need nothing else.

use crate::openflow::dp_actions::{CtExec, DpAction};
use crate::openflow::execute::{execute, Datapath, DpPacket};
use crate::packet::field::id;
use crate::packet::{FieldId, FlowKey};

/// A copy an action list sends out: its port, and the VLAN tags it leaves with (0–2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LeavingCopy {
    /// OpenFlow port number.
    pub port: u32,
    /// VLAN tags the copy carries as it leaves.
    pub tags: u8,
}

/// An action list's copies for each arriving tag depth.
#[derive(Clone, Debug, Default)]
pub(crate) struct CopyPlan {
    copies: Box<[LeavingCopy]>,
    /// `copies[starts[d]..starts[d + 1]]` for tag depth `d` ([`TagDepth::index`]).
    starts: [u32; 5],
}

impl CopyPlan {
    /// The plan of `actions`: the copies it sends with the connection tracker and
    /// recirculation left out (whose copies depend on connection state; a list using them
    /// is run, not planned, where its copies matter).
    pub(crate) fn of(actions: &[DpAction]) -> CopyPlan {
        let mut copies = Vec::new();
        let mut starts = [0u32; 5];
        for d in 0..4 {
            let mut depth = TagDepth { outer: d & 1 != 0, inner: d & 2 != 0 };
            execute(actions, &mut depth, &mut Record(&mut copies));
            starts[d + 1] = copies.len() as u32;
        }
        CopyPlan { copies: copies.into(), starts }
    }

    /// The copies a pass with these tags sends out, in the order the actions send them.
    #[inline]
    pub(crate) fn copies(&self, depth: TagDepth) -> &[LeavingCopy] {
        let d = depth.index();
        &self.copies[self.starts[d] as usize..self.starts[d + 1] as usize]
    }
}

/// A packet as far as its length goes: which of its two VLAN tag slots hold a tag.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TagDepth {
    outer: bool,
    inner: bool,
}

impl TagDepth {
    /// The tags `key` carries.
    #[inline]
    pub(crate) fn of(key: &FlowKey) -> TagDepth {
        TagDepth { outer: has_tag(key.vlan_tci() as u128), inner: has_tag(key.vlan_tci2() as u128) }
    }

    /// How many tags (0–2).
    #[inline]
    pub(crate) fn count(self) -> u8 {
        self.outer as u8 + self.inner as u8
    }

    /// Which of the four depths this is, as [`CopyPlan`] indexes them.
    #[inline]
    fn index(self) -> usize {
        self.outer as usize | (self.inner as usize) << 1
    }
}

#[inline]
fn has_tag(tci: u128) -> bool {
    tci & crate::packet::field::proto::VLAN_CFI as u128 != 0
}

impl DpPacket for TagDepth {
    #[inline]
    fn set_masked(&mut self, field: FieldId, value: u128, mask: u128) {
        let cfi = crate::packet::field::proto::VLAN_CFI as u128;
        if mask & cfi != 0 {
            if field == id::VLAN_TCI {
                self.outer = has_tag(value);
            } else if field == id::VLAN_TCI2 {
                self.inner = has_tag(value);
            }
        }
    }

    #[inline]
    fn pop_vlan(&mut self) {
        *self = TagDepth { outer: self.inner, inner: false };
    }

    #[inline]
    fn push_vlan(&mut self, _tpid: u16, tci: u16) {
        *self = TagDepth { outer: has_tag(tci as u128), inner: self.outer };
    }

    #[inline]
    fn ct_clear(&mut self) {}

    #[inline]
    fn hash(&mut self, _basis: u32) {}
}

/// Records the copies an action list sends out.
struct Record<'a>(&'a mut Vec<LeavingCopy>);

impl Datapath<TagDepth> for Record<'_> {
    fn output(&mut self, port: u32, packet: &TagDepth) {
        self.0.push(LeavingCopy { port, tags: packet.count() });
    }

    fn ct(&mut self, _: &CtExec, _: &mut TagDepth) {}

    fn recirc(&mut self, _: u32, _: &TagDepth) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(outer: bool, inner: bool) -> TagDepth {
        TagDepth { outer, inner }
    }

    /// Each depth's copies are those the action list sends from that depth.
    #[test]
    fn a_plan_holds_each_depths_copies() {
        let list = [
            DpAction::Output(1),
            DpAction::PushVlan { tpid: 0x8100, tci: 0x1005 },
            DpAction::Output(2),
            DpAction::Clone(2),
            DpAction::PopVlan,
            DpAction::Output(3),
            DpAction::Output(4),
        ];
        let plan = CopyPlan::of(&list);
        let copy = |port, tags| LeavingCopy { port, tags };
        // The clone's pop leaves the tags of the copy after it (port 4) as pushed.
        assert_eq!(plan.copies(depth(false, false)), [copy(1, 0), copy(2, 1), copy(3, 0), copy(4, 1)]);
        assert_eq!(plan.copies(depth(true, false)), [copy(1, 1), copy(2, 2), copy(3, 1), copy(4, 2)]);
        // Two slots: a push onto two tags keeps two.
        assert_eq!(plan.copies(depth(true, true)), [copy(1, 2), copy(2, 2), copy(3, 1), copy(4, 2)]);
        assert_eq!(plan.copies(depth(false, true)), [copy(1, 1), copy(2, 1), copy(3, 0), copy(4, 1)]);
        assert!(CopyPlan::of(&[]).copies(depth(true, true)).is_empty());
    }
}
