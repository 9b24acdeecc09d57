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
        let actions = self.tables.actions().get(decision.actions);
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
        let actions = self.tables.actions().get(view.decision.actions);
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
        let plan = self.tables.copy_plan(entry.decision.actions);
        if self.ports.credit(&entry.rep, plan, packets, bytes) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::KeySpec;
    use crate::nic::exact_match::ExactMatchConfig;
    use crate::nic::{NicCapability, NicConfig};
    use crate::openflow::update::parse_updates;
    use crate::openflow::{parse_flows, parse_packet, Pipeline};
    use crate::packet::field::id;
    use crate::switch::SwitchConfig;

    /// A switch whose NIC is an exact-match table of two areas, as the XDP tier holds it.
    fn switch() -> Switch {
        let rules = parse_flows(
            "priority=10,udp,actions=dec_ttl,output:2\npriority=5,ipv6,actions=output:3\npriority=1,actions=drop",
            "t",
        )
        .unwrap();
        let table = ExactMatchConfig { areas: [4, 2], key: KeySpec::five_tuple(), expire_idle: false };
        let config = SwitchConfig {
            nic: Some(NicConfig::new(table)),
            nic_capability: NicCapability::Xdp,
            ..SwitchConfig::default()
        };
        Switch::new(Pipeline::from_rules(rules), config).unwrap()
    }

    /// Every install, revalidation and removal of a policy's exact-match entries reaches the
    /// journal; each entry says what a hardware table finds it by (the flow's fields) and what
    /// it checks after (the rest of its match, the EtherType with it); hits a real NIC counted
    /// are credited to the entry; what the XDP tier cannot hold is refused and counted.
    #[test]
    fn exact_match_entries_are_mirrored() {
        let mut sw = switch();
        assert!(sw.keep_nic_journal());
        let udp =
            parse_packet("in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.2,tp_src=5,tp_dst=6,nw_ttl=9").unwrap();
        let (area, id) = sw.nic_offload(&udp, 1, 10).unwrap();
        assert_eq!(area, 1);
        let v6 = parse_packet("in_port=1,udp6,ipv6_src=::1,ipv6_dst=::2,tp_src=5,tp_dst=6").unwrap();
        assert!(sw.nic_offload(&v6, 0, 11).is_err(), "an IPv6 flow is not a 5-tuple (IPv4) flow");
        let mut journal = Vec::new();
        sw.drain_nic_journal(&mut journal);
        // Noted once per change (the install, then the revalidator's first look).
        journal.dedup();
        assert_eq!(journal, vec![(1, id)]);
        journal.clear();

        let e = sw.nic_entry(1, id).expect("installed");
        assert!(e.servable);
        let mut five = KeySpec::five_tuple().mask();
        five.intersect_with(&e.view.matcher.mask);
        assert_eq!(e.view.lookup_mask, five, "found by the 5-tuple");
        assert_eq!(e.view.lookup_mask.get(id::IN_PORT), 0);
        assert_ne!(e.view.matcher.mask.get(id::DL_TYPE), 0, "the EtherType is checked");
        assert_ne!(e.view.matcher.mask.get(id::NW_TTL), 0, "the megaflow's TTL is checked");

        // Hits counted by the real NIC credit the entry (what a policy's poll reads).
        assert!(sw.credit_nic_hits(1, id, 7, 700, 20));
        let mut flows = Vec::new();
        sw.nic().unwrap().area_flows(1, &mut flows);
        assert_eq!(flows.iter().map(|f| f.1).collect::<Vec<_>>(), vec![7]);
        assert_eq!(sw.stats().nic_hits, 7);

        // A rule update revalidates the entry: journaled, and gone once its rule is.
        let update = &parse_updates("0 delete-strict priority=10,udp", "u").unwrap()[0];
        sw.apply_update(update.command, &update.spec, 30);
        sw.advance(10_000_000_000);
        sw.drain_nic_journal(&mut journal);
        assert!(journal.contains(&(1, id)), "{journal:?}");
        assert!(sw.nic_entry(1, id).is_none_or(|e| !e.servable));

        // A flow whose frames the XDP tier never looks up (IPv6: the program hands those to
        // software whole) stays in software, counted.
        let ipv6_rules = parse_flows("priority=1,actions=output:2", "t").unwrap();
        let table =
            ExactMatchConfig { areas: [4, 0], key: KeySpec::parse("5tuple46").unwrap(), expire_idle: false };
        let config = SwitchConfig {
            nic: Some(NicConfig::new(table)),
            nic_capability: NicCapability::Xdp,
            ..SwitchConfig::default()
        };
        let mut sw = Switch::new(Pipeline::from_rules(ipv6_rules), config).unwrap();
        assert!(sw.nic_offload(&v6, 0, 1).is_err());
        assert_eq!(sw.stats().nic_unsupported, 1);
        assert!(sw.nic_offload(&udp, 0, 1).is_ok());
    }
}
