//! What a real NIC holding the switch's NIC entries needs from the engine (the live XDP
//! tier: `hyflow switch --nic xdp`). The engine's NIC scheme stays the one place entries are
//! decided — installs, their limits, revalidation, expiry — and the real NIC mirrors it: it
//! reads which entries changed ([`Switch::drain_nic_journal`]) and each one as it is now
//! ([`Switch::nic_entry`]); the frames it forwards on its own never reach the engine, so
//! their counts come back in bulk ([`Switch::credit_nic_hits`]) and credit the entry, the
//! rules of its path and the ports as the engine credits a hit; the frames it misses come to
//! the engine, which then does not look them up in its NIC again
//! ([`Switch::process_missed_embedded`]).

use super::{Layer, Offload, Switch};
use crate::conntrack::EmbeddedTuple;
use crate::decision::Decision;
use crate::nic::NicEntryView;
use crate::openflow::dp_actions::DpAction;
use crate::openflow::traversal::Output;
use crate::packet::FlowKey;
use crate::tuple_space::EntryId;

/// A NIC entry as a real NIC holds it.
#[derive(Clone, Copy, Debug)]
pub struct NicEntry<'a> {
    /// What it matches, the packet that made it, its decision, whether it awaits a verdict.
    pub view: NicEntryView,
    /// Its datapath actions.
    pub actions: &'a [DpAction],
    /// Whether hardware may serve it now: current (no verdict pending) and within what the
    /// NIC can carry out ([`crate::nic::NicCapability`]).
    pub servable: bool,
}

impl Switch {
    /// Whether the NIC's hardware can carry out `decision` for the match the last
    /// translation made (its megaflow).
    pub(super) fn nic_holds(&self, decision: Decision) -> bool {
        let actions = self.tables.actions.get(decision.actions);
        let stateful = self.tables.stateful(decision.path);
        self.config.nic_capability.holds(&self.tr.megaflow, actions, stateful)
    }

    /// Starts journaling the NIC's entry changes for a mirror; false without a NIC, or with
    /// a scheme that cannot be mirrored.
    pub fn keep_nic_journal(&mut self) -> bool {
        self.nic.as_mut().is_some_and(|n| n.keep_journal())
    }

    /// Moves the (table, id) of NIC entries installed, changed or removed since the last
    /// call to `out`.
    pub fn drain_nic_journal(&mut self, out: &mut Vec<(u8, EntryId)>) {
        if let Some(n) = &mut self.nic {
            n.drain_journal(out);
        }
    }

    /// NIC entry `id` of `table` as it is now, if it exists.
    pub fn nic_entry(&self, table: u8, id: EntryId) -> Option<NicEntry<'_>> {
        let view = self.nic.as_ref()?.entry_view(table, id)?;
        let actions = self.tables.actions.get(view.decision.actions);
        let stateful = self.tables.stateful(view.decision.path);
        let servable = !view.pending && self.config.nic_capability.holds(&view.matcher, actions, stateful);
        Some(NicEntry { view, actions, servable })
    }

    /// Keeps `decision`'s interned action list and rule path valid while a mirror holds an
    /// entry made of it: the engine drops its own reference when it removes the entry, and
    /// the mirror still credits the hits it reads afterwards to that path.
    pub fn hold_decision(&mut self, decision: Decision) {
        self.tables.acquire(decision);
    }

    /// Drops a reference taken by [`Switch::hold_decision`].
    pub fn release_decision(&mut self, decision: Decision) {
        self.tables.release(decision);
    }

    /// Credits `packets` frames of `bytes` in all, the last at `last_hit_ns`, that a real NIC
    /// forwarded on its own with entry `id` of `table`: the entry's counters (which keep it
    /// from expiring idle), the packets by layer and by fate, the rules of its path and the
    /// ports, as a hit in the engine's NIC counts. False, and nothing counted, if the entry
    /// is gone: then [`Switch::credit_removed_nic_hits`] with the entry as last seen.
    pub fn credit_nic_hits(
        &mut self,
        table: u8,
        id: EntryId,
        packets: u64,
        bytes: u64,
        last_hit_ns: u64,
    ) -> bool {
        let Some(entry) = self.nic_entry(table, id).map(|e| e.view) else { return false };
        self.credit_hits_of(&entry, packets, bytes, last_hit_ns);
        if let Some(n) = &mut self.nic {
            n.credit_hits(table, id, packets, bytes, last_hit_ns);
        }
        true
    }

    /// [`Switch::credit_nic_hits`] for hits of an entry since removed or changed, as the
    /// mirror last saw it (its decision held with [`Switch::hold_decision`]): counted for the
    /// switch, the rules of that decision and the ports, not for any entry.
    pub fn credit_removed_nic_hits(
        &mut self,
        entry: &NicEntryView,
        packets: u64,
        bytes: u64,
        last_hit_ns: u64,
    ) {
        self.credit_hits_of(entry, packets, bytes, last_hit_ns);
    }

    fn credit_hits_of(&mut self, entry: &NicEntryView, packets: u64, bytes: u64, last_hit_ns: u64) {
        if packets == 0 {
            return;
        }
        self.stats.packets += packets;
        self.stats.bytes += bytes;
        self.stats.nic_hits += packets;
        self.stats.by_pass[0].nic += packets;
        let path = entry.decision.path;
        self.pipeline.credit_n(self.tables.path_rules(path), packets, bytes, last_hit_ns);
        let actions = self.tables.actions.get(entry.decision.actions);
        if self.ports.credit(&entry.rep, actions, packets, bytes) {
            self.stats.forwarded += packets;
        } else {
            self.stats.dropped += packets;
            self.stats.dropped_by_layer.nic += packets;
        }
    }

    /// [`Switch::process_embedded`] for a frame a real NIC missed: counted as arrived, then
    /// looked up in software only (the engine's NIC is what the real one holds, and the
    /// real one missed); an upcall installs in the NIC if `offload` (the NIC's update
    /// budget has room).
    pub fn process_missed_embedded(
        &mut self,
        key: &FlowKey,
        embedded: Option<EmbeddedTuple>,
        bytes: u64,
        now_ns: u64,
        offload: bool,
        outputs: &mut Vec<Output>,
    ) -> Layer {
        self.conntrack.set_embedded(embedded);
        self.arrive(key, bytes, now_ns, outputs);
        let offload = if offload { Offload::Allowed } else { Offload::Refused };
        let layer = self.first_host_pass(key, bytes, now_ns, offload, outputs);
        self.conntrack.set_embedded(None);
        layer
    }
}
