//! The switch's backends of the one action interpreter ([`crate::openflow::execute`]): what
//! the datapath itself does with `ct`, `recirc` and `output` in the model.

use crate::conntrack::Conntrack;
use crate::openflow::dp_actions::CtExec;
use crate::openflow::execute::{CowKey, Datapath};
use crate::openflow::traversal::Output;
use crate::packet::{FlowKey, FlowMask};

/// The model's datapath for one pass at `depth`: copies leave as flow keys, `ct` runs the
/// connection tracker (which rewrites NAT'd headers and fills `ct_*`), and each `recirc`
/// queues a clone for its next pass.
pub(super) struct Tracked<'a> {
    conntrack: &'a mut Conntrack,
    recirc_queue: &'a mut Vec<(FlowKey, u32)>,
    depth: u32,
    now_ns: u64,
    outputs: &'a mut Vec<Output>,
}

impl<'a> Tracked<'a> {
    /// The datapath of a pass at `depth` at `now_ns`, appending to `outputs` and queueing
    /// clones on `recirc_queue`.
    #[inline]
    pub(super) fn new(
        conntrack: &'a mut Conntrack,
        recirc_queue: &'a mut Vec<(FlowKey, u32)>,
        depth: u32,
        now_ns: u64,
        outputs: &'a mut Vec<Output>,
    ) -> Tracked<'a> {
        Tracked { conntrack, recirc_queue, depth, now_ns, outputs }
    }
}

impl Datapath<CowKey<'_>> for Tracked<'_> {
    #[inline]
    fn output(&mut self, port: u32, packet: &CowKey<'_>) {
        self.outputs.push(Output { port, packet: packet.key().masked(FlowMask::leaving()) });
    }

    fn ct(&mut self, ct: &CtExec, packet: &mut CowKey<'_>) {
        self.conntrack.execute(ct, packet.make_mut(), self.now_ns);
    }

    fn recirc(&mut self, recirc_id: u32, packet: &CowKey<'_>) {
        let mut clone = *packet.key();
        clone.set_recirc_id(recirc_id);
        self.recirc_queue.push((clone, self.depth + 1));
    }
}

/// Asks, without changing anything, whether a NIC that tracks only the connections it holds
/// can carry out a decision: every `ct` on the packet's way must find its connection in the
/// NIC's table. A `ct` is asked about with the packet as the ones before it left it, their
/// own lookups not applied (the NIC would look each up in its table, which holds the
/// connection as software confirmed it).
pub(super) struct HardwareCheck<'a> {
    pub(super) conntrack: &'a Conntrack,
    pub(super) now_ns: u64,
    /// Whether every `ct` so far found its connection.
    pub(super) holds: bool,
}

impl Datapath<FlowKey> for HardwareCheck<'_> {
    fn output(&mut self, _: u32, _: &FlowKey) {}

    fn ct(&mut self, ct: &CtExec, packet: &mut FlowKey) {
        self.holds = self.holds && self.conntrack.in_hardware(ct, packet, self.now_ns);
    }

    fn recirc(&mut self, _: u32, _: &FlowKey) {}
}
