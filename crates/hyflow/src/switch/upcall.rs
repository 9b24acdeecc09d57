//! Upcalls and what flows back from them: the slow path translates a pass no cache decided,
//! and its decision is installed in the caches and offered to the NIC; an offload policy
//! places and removes NIC entries flow by flow.

use super::action_execution::Tracked;
use super::{caches, Offload, Switch};
use crate::cache::table::Refused;
use crate::cache::CachedFlow;
use crate::measure::FlowId;
use crate::nic::Upcall;
use crate::openflow::execute::{execute, CowKey};
use crate::openflow::traversal::Output;
use crate::packet::FlowKey;
use crate::revalidation::Removal;
use crate::revalidator::{CacheId, EntryAt};
use crate::tuple_space::EntryId;

impl Switch {
    /// A pass no cache decided: the slow path translates it, its outputs are appended, its
    /// rules credited, and its decision installed in every cache with room.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn upcall(
        &mut self,
        key: &FlowKey,
        hash: u64,
        depth: u32,
        bytes: u64,
        now_ns: u64,
        offload: Offload,
        outputs: &mut Vec<Output>,
    ) {
        self.stats.upcalls += (depth == 0) as u64;
        self.pipeline.process(key, &mut self.tr);
        if self.tr.uses_conntrack() {
            // What leaves depends on the connection tracker: run the actions as the datapath.
            let first = outputs.len();
            let mut datapath =
                Tracked::new(&mut self.conntrack, &mut self.recirc.queue, depth, now_ns, outputs);
            execute(&self.tr.dp_actions, &mut CowKey::new(key), &mut datapath);
            self.ports.left_as(&outputs[first..], bytes);
        } else {
            self.ports.left_as(&self.tr.outputs, bytes);
            if self.outputs_wanted {
                outputs.extend_from_slice(&self.tr.outputs);
            }
        }
        self.pipeline.credit(self.tr.rules(), bytes, now_ns);
        if self.tr.slow_path_only() {
            // A controller action, or a rewrite the datapath cannot do: OVS keeps such flows
            // in the slow path.
            if self.tr.to_controller > 0 {
                self.stats.controller += 1;
            } else {
                self.stats.slow_actions += 1;
            }
        } else if self.nic.is_some() || self.microflow.is_some() || self.megaflow.is_some() {
            self.install(key, hash, now_ns, offload);
        }
        // After the entries: a learned flow that changes this packet's own decision
        // revalidates them, as in OVS, where learning bumps the tables' version.
        self.install_learned(now_ns);
    }

    /// Installs the decision of the translation in `self.tr` in the caches.
    fn install(&mut self, key: &FlowKey, hash: u64, now_ns: u64, offload: Offload) {
        let decision = self.tables.intern(&self.tr);
        self.scratch.installed.clear();
        // The NIC has no connection tracker: such decisions stay in software.
        let offload = if self.tr.uses_conntrack() && !self.config.nic_conntrack.is_on() {
            Offload::Refused
        } else {
            offload
        };
        let offload = match (offload, &self.nic) {
            (Offload::Allowed, Some(_)) if !self.nic_holds(decision) => {
                self.stats.nic_unsupported += 1;
                Offload::Refused
            }
            _ => offload,
        };
        if let (Some(nic), Offload::Allowed) = (&mut self.nic, offload) {
            self.stats.nic_offers += 1;
            let started = self.clock.as_ref().map(|c| c.now_ns());
            let upcall = Upcall { key, traversal: &self.tr, decision, now_ns };
            nic.install(upcall, &mut self.tables, &mut self.scratch.installed);
            if let (Some(t0), Some(c)) = (started, &self.clock) {
                self.host.nic_install_ns += c.now_ns().saturating_sub(t0);
                self.host.nic_install_upcalls += 1;
            }
        }
        self.scratch.new_entries.clear();
        self.scratch.new_entries.extend(self.scratch.installed.iter().map(|&(table, id)| EntryAt {
            cache: CacheId::Nic,
            table,
            id,
        }));
        if let Some(megaflow) = &mut self.megaflow {
            let flow = CachedFlow::new(*key, decision);
            if let Ok(id) = megaflow.install(&self.tr.megaflow, 0, 0, flow, now_ns) {
                self.tables.acquire(decision);
                self.scratch.new_entries.push(EntryAt { cache: CacheId::Megaflow, table: 0, id });
            }
        }
        let mut caches = caches(&mut self.nic, &mut self.megaflow);
        for &at in &self.scratch.new_entries {
            self.revalidator.track(at, &mut caches, &self.tables);
        }
        if let Some(microflow) = &mut self.microflow {
            microflow.insert(key, hash, decision, self.epoch, &mut self.tables);
        }
        self.tables.release(decision);
    }

    /// Offloads the flow of `key` to the NIC's `area` at `now_ns`, for a policy that fills the
    /// NIC flow by flow: translates the packet as an upcall would (crediting no rule: no packet
    /// is forwarded) and installs the decision. Returns the entry's (table, id), or why not.
    pub(crate) fn nic_offload(
        &mut self,
        key: &FlowKey,
        area: u8,
        now_ns: u64,
    ) -> Result<(u8, EntryId), Refused> {
        self.advance(now_ns);
        if self.nic.is_none() {
            return Err(Refused::Unsupported);
        }
        self.pipeline.process(key, &mut self.tr);
        if self.tr.slow_path_only() || (self.tr.uses_conntrack() && !self.config.nic_conntrack.is_on()) {
            // A controller action never leaves the slow path; the NIC has no connection
            // tracker.
            return Err(Refused::NotAFlow);
        }
        let decision = self.tables.intern(&self.tr);
        if !(self.config.nic_capability.takes(key) && self.nic_holds(decision)) {
            // What the NIC's hardware cannot carry out, or whose frames its parser never
            // looks up, stays in software.
            self.stats.nic_unsupported += 1;
            self.tables.release(decision);
            return Err(Refused::Unsupported);
        }
        let upcall = Upcall { key, traversal: &self.tr, decision, now_ns };
        let nic = self.nic.as_mut().expect("checked above");
        let placed = nic.install_flow(upcall, area, &mut self.tables);
        if let Ok(id) = placed {
            let mut caches = caches(&mut self.nic, &mut self.megaflow);
            self.revalidator.track(
                EntryAt { cache: CacheId::Nic, table: area, id },
                &mut caches,
                &self.tables,
            );
        }
        self.tables.release(decision);
        placed.map(|id| (area, id))
    }

    /// Removes a NIC entry an offload policy no longer wants there; false if it was gone.
    pub(crate) fn nic_remove(&mut self, table: u8, id: EntryId, now_ns: u64) -> bool {
        self.advance(now_ns);
        let Some(nic) = &mut self.nic else { return false };
        nic.entries_mut().remove(table as usize, id, &mut self.tables, Removal::Replaced)
    }

    /// Where the NIC holds `flow`'s entry, for schemes keyed by flow.
    pub(crate) fn nic_find(&self, flow: FlowId) -> Option<(u8, EntryId)> {
        self.nic.as_ref()?.find_flow(flow)
    }
}
