//! The vSwitch end to end: NIC → microflow cache → megaflow cache → slow path, with installs
//! and revalidation flowing back.
//!
//! **Contract.** [`Switch::process`] forwards one packet and says which layer decided; every
//! layer gives the outputs the slow path would and credits the same rules (see
//! `docs/ARCHITECTURE.md`, "Invariants of the switch").
//!
//! **Design.** This file dispatches between layers and nothing else: each pass is looked up
//! in the NIC, then in software (`lookup_host`); a hit on any cached layer goes through one
//! path (`serve_hit`: credit the rules, run the decision's datapath actions through the one
//! interpreter, judge a stale entry, learn again), a miss through the upcall (`upcall.rs`:
//! translate, install, offload). Rule changes — updates, learned flows, expiry — and the
//! revalidation they trigger are in `updates.rs`; the clocks that run without packets in one
//! table (`timers.rs`). The NIC is any [`NicScheme`]; the switch never asks which.

mod action_execution;
mod config;
mod nic_mirror;
mod port_counters;
mod stats;
mod timers;
mod upcall;
mod updates;

pub use config::{
    MicroflowConfig, NicConntrack, SwitchConfig, SwitchConfigError, DEFAULT_MAX_IDLE_NS,
    DEFAULT_MEGAFLOW_ENTRIES, DEFAULT_MICROFLOW_ENTRIES,
};
pub use nic_mirror::NicEntry;
pub(crate) use port_counters::ports_since;
pub use port_counters::{PortCount, PortStats};
pub use stats::{Layer, PassStats, SwitchStats};

use crate::cache::dump::DumpedFlow;
use crate::cache::{MegaflowCache, MicroflowCache};
use crate::conntrack::{Conntrack, EmbeddedTuple, HwOffload};
use crate::decision::interner::ItemRef;
use crate::decision::{CachedHit, DecisionTables};
use crate::host_time::{HostClock, HostTimings};
use crate::nic::{Arrival, NicReport, NicScheme};
use crate::openflow::execute::{execute, CowKey};
use crate::openflow::rule::RuleId;
use crate::openflow::traversal::Output;
use crate::openflow::{LookupRef, Pipeline, Traversal};
use crate::packet::hash::hash_key;
use crate::packet::FlowKey;
use crate::revalidation::Revalidate;
use crate::revalidator::{Caches, EntryAt, Revalidator, SWEEP_INTERVAL_NS};
use crate::tuple_space::EntryId;
use action_execution::{HardwareCheck, Tracked};
use port_counters::PortCounters;
use timers::{Timer, TimerTable};

pub use crate::nic::NicConfig;

/// Recirculations a packet may go through (OVS userspace datapath `MAX_RECIRC_DEPTH`).
pub const MAX_RECIRC_DEPTH: u32 = 6;

/// How often `NORMAL`'s MAC table ages and the connection tracker sweeps (OVS: every second).
const AGING_INTERVAL_NS: u64 = 1_000_000_000;

/// Whether an upcall may install its decision in the NIC (a NIC accepts a bounded number of
/// table updates per second, so a timing model may refuse).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Offload {
    /// Install while the NIC has room.
    Allowed,
    /// Leave the NIC as it is.
    Refused,
}

/// A packet's recirculated passes: the clones waiting, and where passes were decided.
#[derive(Default)]
struct Recirculation {
    /// Clones waiting for their next pass, with their depth.
    queue: Vec<(FlowKey, u32)>,
    /// The pass (1, 2, ...) each recirculation id was first seen at, by id.
    pass_of_id: Vec<u8>,
    /// Where the last packet's recirculated passes were decided, in order.
    last_passes: Vec<Layer>,
}

/// Scratch reused across packets and updates, so the warm per-packet path allocates nothing.
#[derive(Default)]
struct Scratch {
    /// Lookup outcomes an update or learning may have changed.
    changed: Vec<LookupRef>,
    /// NIC entries an install made.
    installed: Vec<(u8, EntryId)>,
    /// Entries an install made, for the revalidator's index.
    new_entries: Vec<EntryAt>,
    /// Rules found expired.
    expired: Vec<RuleId>,
}

/// The switch: pipeline plus caches.
pub struct Switch {
    pipeline: Pipeline,
    config: SwitchConfig,
    tables: DecisionTables,
    nic: Option<Box<dyn NicScheme>>,
    microflow: Option<MicroflowCache>,
    megaflow: Option<MegaflowCache>,
    revalidator: Revalidator,
    /// Rule updates applied so far; microflow entries are stamped with it.
    epoch: u64,
    /// The slow path's traversal, reused.
    tr: Traversal,
    /// The cached decision of the pass being served, reused.
    hit: CachedHit,
    /// Whether callers want the copies that leave (see [`Switch::set_outputs_wanted`]).
    outputs_wanted: bool,
    stats: SwitchStats,
    /// Per-port counters, and whether the packet being decided has left.
    ports: PortCounters,
    clock: Option<Box<dyn HostClock>>,
    host: HostTimings,
    timers: TimerTable,
    /// The datapath's connection tracker.
    conntrack: Conntrack,
    recirc: Recirculation,
    scratch: Scratch,
}

impl Switch {
    /// A switch forwarding with `pipeline`.
    pub fn new(mut pipeline: Pipeline, config: SwitchConfig) -> Result<Switch, SwitchConfigError> {
        // The rules given were installed when the run starts.
        pipeline.stamp_changes(0);
        let nic = config.nic.as_ref().map(|n| n.build(config.nic_update_latency_ns)).transpose()?;
        let microflow = config
            .microflow
            .map(|m| MicroflowCache::new(m.entries, m.ways, config.consistency))
            .transpose()?;
        let megaflow = match config.megaflow {
            Some(0) => return Err(SwitchConfigError::Megaflow),
            Some(n) => Some(MegaflowCache::megaflow_cache(n)?),
            None => None,
        };
        let mut tr = Traversal::new();
        tr.record_segments = nic.as_ref().is_some_and(|n| n.needs_segments());
        // The idle sweep first runs one interval in; rule expiry, MAC aging and the
        // connection sweep at the first packet.
        let timers = TimerTable::new(|t| if t == Timer::IdleSweep { SWEEP_INTERVAL_NS } else { 0 });
        let revalidator = Revalidator::new(config.revalidation_delay_ns, config.max_idle_ns);
        let conntrack = match config.nic_conntrack {
            NicConntrack::Established { entries } => {
                Conntrack::with_offload(HwOffload { entries, latency_ns: config.nic_update_latency_ns })
            }
            _ => Conntrack::new(),
        };
        Ok(Switch {
            pipeline,
            config,
            tables: DecisionTables::new(),
            nic,
            microflow,
            megaflow,
            revalidator,
            epoch: 0,
            tr,
            hit: CachedHit::default(),
            outputs_wanted: true,
            stats: SwitchStats::default(),
            ports: PortCounters::default(),
            clock: None,
            host: HostTimings::default(),
            timers,
            conntrack,
            recirc: Recirculation::default(),
            scratch: Scratch::default(),
        })
    }

    /// Times NIC installs and revalidation on `clock` from now on (host figures, reported in
    /// [`Switch::host_timings`], never part of a decision).
    pub fn time_host(&mut self, clock: Box<dyn HostClock>) {
        self.clock = Some(clock);
    }

    /// Host time spent so far, if a clock was given.
    pub fn host_timings(&self) -> HostTimings {
        self.host
    }

    /// The rules (and their counters).
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The configuration.
    pub fn config(&self) -> &SwitchConfig {
        &self.config
    }

    /// Whether cached decisions build the copies that leave (default: yes). A caller that only
    /// counts where packets go (the timing simulation without `--decisions`) turns them off,
    /// which saves executing the actions of every cached hit; hits that go through the
    /// connection tracker or recirculate, and stale ones (checked against the slow path),
    /// still run them.
    pub(crate) fn set_outputs_wanted(&mut self, wanted: bool) {
        self.outputs_wanted = wanted;
    }

    /// Switch-wide counters.
    pub fn stats(&self) -> SwitchStats {
        self.stats
    }

    /// Every port's packets and bytes in and out so far, in port order (ports with none left
    /// out), as `ovs-ofctl dump-ports` counts them.
    pub fn port_stats(&self) -> Vec<PortStats> {
        self.ports.ports()
    }

    /// The connection tracker.
    pub fn conntrack(&self) -> &Conntrack {
        &self.conntrack
    }

    /// Where the recirculated passes of the last packet [`Switch::process_nic`] or
    /// [`Switch::process_host`] handled were decided, in order (empty if it did not
    /// recirculate): each one in software costs the host a lookup.
    pub(crate) fn last_passes(&self) -> &[Layer] {
        &self.recirc.last_passes
    }

    /// Megaflow entries held now by the pass they serve: the first, the second, the third,
    /// later ones (the figure OVS operators watch per recirculation).
    pub(crate) fn megaflows_by_pass(&self) -> [usize; 4] {
        let mut out = [0; 4];
        if let Some(m) = &self.megaflow {
            for id in m.space().ids() {
                let e = m.space().entry(id).expect("listed entries live");
                let recirc = e.data.rep.recirc_id() as usize;
                let pass = if recirc == 0 {
                    0
                } else {
                    self.recirc.pass_of_id.get(recirc).copied().unwrap_or(3) as usize
                };
                out[pass.min(3)] += 1;
            }
        }
        out
    }

    /// The NIC scheme, if configured.
    pub fn nic(&self) -> Option<&dyn NicScheme> {
        self.nic.as_deref()
    }

    /// The NIC scheme as its concrete type, if it is a `T` (for tests and tools that know
    /// which scheme they configured; the engine itself never asks).
    pub fn nic_as<T: NicScheme + 'static>(&self) -> Option<&T> {
        self.nic.as_ref()?.as_any().downcast_ref()
    }

    /// The NIC's occupancy and counters (with its scheme's own figures), if configured.
    pub(crate) fn nic_report(&self) -> Option<NicReport> {
        self.nic.as_ref().map(|n| n.report())
    }

    /// NIC entries installed so far.
    pub fn nic_installs(&self) -> u64 {
        self.nic.as_ref().map_or(0, |n| n.installs())
    }

    /// The NIC's peak of entries held restarts from what it holds now (a warm-up ended).
    pub(crate) fn restart_nic_peak(&mut self) {
        if let Some(n) = self.nic.as_mut() {
            n.restart_peak();
        }
    }

    /// The megaflow cache's entries (empty without one), as `ovs-appctl dpctl/dump-flows`
    /// lists them.
    pub fn megaflow_dump(&self) -> Vec<DumpedFlow> {
        let mut out = Vec::new();
        if let Some(m) = &self.megaflow {
            m.dump(&self.tables, None, &mut out);
        }
        out
    }

    /// The NIC's entries (empty without one), as `ovs-appctl dpctl/dump-flows type=offloaded`
    /// lists them.
    pub fn nic_dump(&self) -> Vec<DumpedFlow> {
        let mut out = Vec::new();
        if let Some(n) = &self.nic {
            n.dump(&self.tables, &mut out);
        }
        out
    }

    /// The microflow cache, if configured.
    pub fn microflow(&self) -> Option<&MicroflowCache> {
        self.microflow.as_ref()
    }

    /// The megaflow cache, if configured.
    pub fn megaflow(&self) -> Option<&MegaflowCache> {
        self.megaflow.as_ref()
    }

    /// Distinct action lists and rule paths referenced by cached entries.
    pub(crate) fn decision_tables(&self) -> (usize, usize) {
        (self.tables.actions().len(), self.tables.paths().len())
    }

    /// When the switch next has work of its own to do (idle sweep, rule expiry, MAC aging,
    /// connection sweep, a revalidation verdict falling due), trace time in ns: a driver
    /// without packets (a live switch) calls [`Switch::advance`] then.
    pub fn next_deadline_ns(&self) -> u64 {
        self.timers.earliest().min(self.revalidator.next_verdict_ns().unwrap_or(u64::MAX))
    }

    /// [`Switch::process`] for an ICMP error whose carried packet's tuple the caller read
    /// from the frame (`embedded`), which relates the error to that packet's connection in
    /// every `ct` on its way.
    pub fn process_embedded(
        &mut self,
        key: &FlowKey,
        embedded: Option<EmbeddedTuple>,
        bytes: u64,
        now_ns: u64,
        outputs: &mut Vec<Output>,
    ) -> Layer {
        self.conntrack.set_embedded(embedded);
        let layer = self.process(key, bytes, now_ns, outputs);
        self.conntrack.set_embedded(None);
        layer
    }

    /// Forwards one packet of `bytes` bytes arriving at `now_ns` (non-decreasing), replacing
    /// `outputs` with the copies that leave; returns the layer that decided.
    pub fn process(&mut self, key: &FlowKey, bytes: u64, now_ns: u64, outputs: &mut Vec<Output>) -> Layer {
        if self.process_nic(key, None, bytes, now_ns, outputs) {
            Layer::Nic
        } else {
            // Same time: the switch has advanced, and a miss left no output or pass behind.
            self.first_host_pass(key, bytes, now_ns, Offload::Allowed, outputs)
        }
    }

    /// The NIC part of [`Switch::process`]: counts the packet and, if the NIC forwards it,
    /// fills `outputs` and returns true. A packet it misses must then go to
    /// [`Switch::process_host`] (at the same or a later time: host software may serve it
    /// after a queue). `flow` is the packet's flow number in its trace, if the input numbers
    /// flows ([`Arrival::flow`]).
    pub(crate) fn process_nic(
        &mut self,
        key: &FlowKey,
        flow: Option<u32>,
        bytes: u64,
        now_ns: u64,
        outputs: &mut Vec<Output>,
    ) -> bool {
        self.arrive(key, bytes, now_ns, outputs);
        if !self.nic_lookup(key, flow, bytes, now_ns) {
            return false;
        }
        self.stats.nic_hits += 1;
        self.stats.by_pass[0].nic += 1;
        self.serve_hit(key, 0, bytes, now_ns, outputs);
        // Hardware connection tracking: the clones recirculate in the NIC while it holds
        // their passes.
        if !self.recirc.queue.is_empty() {
            self.recirculate(bytes, now_ns, outputs, true);
        }
        self.count_fate(Layer::Nic);
        true
    }

    /// A new packet arrives at `now_ns`: the switch advanced to then, the packet counted
    /// (switch, port), `outputs` and the last packet's passes cleared.
    #[inline]
    fn arrive(&mut self, key: &FlowKey, bytes: u64, now_ns: u64, outputs: &mut Vec<Output>) {
        outputs.clear();
        self.recirc.last_passes.clear();
        self.advance(now_ns);
        self.stats.packets += 1;
        self.stats.bytes += bytes;
        self.ports.arrived(key, bytes);
    }

    /// The host part of [`Switch::process`] for a packet the NIC missed (already counted by
    /// [`Switch::process_nic`]): microflow cache, megaflow cache, slow path; returns the
    /// layer that decided. `now_ns` is when software handles it; an upcall installs in the
    /// NIC only if `offload` allows.
    pub(crate) fn process_host(
        &mut self,
        key: &FlowKey,
        bytes: u64,
        now_ns: u64,
        offload: Offload,
        outputs: &mut Vec<Output>,
    ) -> Layer {
        outputs.clear();
        self.advance(now_ns);
        self.recirc.last_passes.clear();
        self.ports.resume(key);
        self.first_host_pass(key, bytes, now_ns, offload, outputs)
    }

    /// A packet's first pass in software and the passes it recirculates, on a switch already
    /// advanced to `now_ns`.
    #[inline]
    fn first_host_pass(
        &mut self,
        key: &FlowKey,
        bytes: u64,
        now_ns: u64,
        offload: Offload,
        outputs: &mut Vec<Output>,
    ) -> Layer {
        let layer = self.lookup_host(key, 0, bytes, now_ns, offload, outputs);
        self.stats.by_pass[0].count(layer);
        if !self.recirc.queue.is_empty() {
            self.recirculate(bytes, now_ns, outputs, false);
        }
        self.count_fate(layer);
        layer
    }

    /// Counts the packet just decided (its first pass by `layer`) as forwarded if any copy
    /// left, as dropped otherwise.
    #[inline]
    fn count_fate(&mut self, layer: Layer) {
        if self.ports.forwarded_now() {
            self.stats.forwarded += 1;
        } else {
            self.stats.dropped += 1;
            self.stats.dropped_by_layer.count(layer);
        }
    }

    /// Runs the passes the last decision's clones wait for, appending their outputs: each a
    /// lookup in software (microflow, megaflow, slow path) of the clone as conntrack left it.
    /// With `in_nic` (the first pass was the NIC's, which tracks connections), each pass is
    /// looked up in the NIC first; a pass it misses goes to software, and so do the later ones.
    fn recirculate(&mut self, bytes: u64, now_ns: u64, outputs: &mut Vec<Output>, mut in_nic: bool) {
        // In the order the clones were made, as OVS's datapath runs them.
        let mut next = 0;
        while next < self.recirc.queue.len() {
            let (key, depth) = self.recirc.queue[next];
            next += 1;
            if depth > MAX_RECIRC_DEPTH {
                self.stats.recirc_too_deep += 1;
                continue;
            }
            self.stats.recirculations += 1;
            let id = key.recirc_id() as usize;
            let pass_of_id = &mut self.recirc.pass_of_id;
            if pass_of_id.len() <= id {
                pass_of_id.resize(id + 1, 0);
            }
            if pass_of_id[id] == 0 {
                pass_of_id[id] = depth.min(255) as u8;
            }
            let layer = if in_nic && self.nic_lookup(&key, None, bytes, now_ns) {
                self.serve_hit(&key, depth, bytes, now_ns, outputs);
                Layer::Nic
            } else {
                in_nic = false;
                // A NIC that tracks connections takes later passes' decisions too.
                let offload =
                    if self.config.nic_conntrack.is_on() { Offload::Allowed } else { Offload::Refused };
                self.lookup_host(&key, depth, bytes, now_ns, offload, outputs)
            };
            self.stats.by_pass[(depth as usize).min(3)].count(layer);
            self.recirc.last_passes.push(layer);
        }
        self.recirc.queue.clear();
    }

    /// Looks a pass up in the NIC: true when an entry decides it (in `self.hit`) and the NIC
    /// can carry the decision out.
    #[inline]
    fn nic_lookup(&mut self, key: &FlowKey, flow: Option<u32>, bytes: u64, now_ns: u64) -> bool {
        let Some(nic) = &mut self.nic else { return false };
        if !self.config.nic_capability.takes(key) {
            return false;
        }
        nic.lookup(Arrival { key, bytes, now_ns, flow }, &mut self.hit) && self.hardware_tracks(key, now_ns)
    }

    /// Whether the NIC can carry out the decision it just found for `key` (in `self.hit`): it
    /// always can, unless the decision goes through `ct` and the NIC tracks only the
    /// connections it holds ([`NicConntrack::Established`]) and does not hold one the decision
    /// looks up — then the packet goes to software, counted in
    /// [`SwitchStats::nic_conntrack_misses`].
    fn hardware_tracks(&mut self, key: &FlowKey, now_ns: u64) -> bool {
        let (NicConntrack::Established { .. }, Some(a)) = (self.config.nic_conntrack, self.hit.actions)
        else {
            return true;
        };
        if !self.tables.tracks(a) {
            return true;
        }
        let mut check = HardwareCheck { conntrack: &self.conntrack, now_ns, holds: true };
        execute(self.tables.actions().get(a), &mut key.clone(), &mut check);
        if !check.holds {
            self.stats.nic_conntrack_misses += 1;
        }
        check.holds
    }

    /// One pass in software (the packet's first, or a recirculated clone's at `depth`):
    /// microflow cache, megaflow cache, slow path; appends the outputs, queues the clones
    /// its decision recirculates.
    fn lookup_host(
        &mut self,
        key: &FlowKey,
        depth: u32,
        bytes: u64,
        now_ns: u64,
        offload: Offload,
        outputs: &mut Vec<Output>,
    ) -> Layer {
        let hash = hash_key(key);
        if let Some(microflow) = &mut self.microflow {
            if let Some(d) = microflow.lookup(key, hash, &mut self.tables) {
                // Layers count packets by their first pass; `by_pass` counts every pass.
                self.stats.microflow_hits += (depth == 0) as u64;
                self.hit.set(d, false);
                self.serve_hit(key, depth, bytes, now_ns, outputs);
                return Layer::Microflow;
            }
        }
        if let Some(megaflow) = &mut self.megaflow {
            if let Some(id) = megaflow.lookup(key, 0, bytes, now_ns) {
                let e = &megaflow.space().entry(id).expect("hit entries live").data;
                let (d, stale) = (e.decision, e.version.is_pending());
                // Only a current decision may seed the microflow cache.
                if let (Some(microflow), false) = (&mut self.microflow, stale) {
                    microflow.insert(key, hash, d, self.epoch, &mut self.tables);
                }
                self.stats.megaflow_hits += (depth == 0) as u64;
                self.hit.set(d, stale);
                self.serve_hit(key, depth, bytes, now_ns, outputs);
                return Layer::Megaflow;
            }
        }
        self.upcall(key, hash, depth, bytes, now_ns, offload, outputs);
        Layer::SlowPath
    }

    /// A pass a cached layer decided (the decision in `self.hit`), the same for every layer:
    /// credits its rules, appends its outputs (running its datapath actions, with the
    /// connection tracker and recirculation), judges it against the slow path if an entry
    /// awaiting a verdict made it, and otherwise learns again if it learns.
    #[inline]
    fn serve_hit(&mut self, key: &FlowKey, depth: u32, bytes: u64, now_ns: u64, outputs: &mut Vec<Output>) {
        let mut stateful = false;
        for &path in &self.hit.paths {
            self.pipeline.credit(self.tables.path_rules(path), bytes, now_ns);
            stateful |= self.tables.stateful(path);
        }
        let first = outputs.len();
        let stale = self.hit.stale;
        match self.hit.actions {
            Some(a) if self.outputs_wanted || stale || self.tables.tracks(a) => {
                self.run_actions(a, key, depth, now_ns, outputs);
                self.ports.left_as(&outputs[first..], bytes);
            }
            Some(a) => self.ports.left_by(self.tables.copy_plan(a), key, bytes),
            // A chain of entries (Gigaflow) built the outputs itself.
            None => {
                self.ports.left_as(&self.hit.outputs, bytes);
                outputs.append(&mut self.hit.outputs);
            }
        }
        // What this pass learns is learned before the next pass, as after an upcall.
        if stale {
            let tracked = self.hit.actions.filter(|&a| self.tables.tracks(a));
            self.count_stale(key, &outputs[first..], tracked, now_ns);
        } else if stateful {
            self.learn_again(key, now_ns);
        }
    }

    /// Runs an interned action list on `key` as the datapath does, appending the copies that
    /// leave and queueing the clones it recirculates.
    fn run_actions(
        &mut self,
        actions: ItemRef,
        key: &FlowKey,
        depth: u32,
        now_ns: u64,
        outputs: &mut Vec<Output>,
    ) {
        let list = self.tables.actions().get(actions);
        let mut datapath = Tracked::new(&mut self.conntrack, &mut self.recirc.queue, depth, now_ns, outputs);
        execute(list, &mut CowKey::new(key), &mut datapath);
    }

    /// A packet an outdated entry forwarded: counted, and compared with the slow path. It
    /// learns what the slow path learns now (the outdated entry may not know it learns), so
    /// that the flows learned do not depend on revalidation timing.
    ///
    /// A decision through the connection tracker (`tracked`) is compared by its datapath
    /// actions: its outputs depend on connection state that executing it again would change.
    fn count_stale(&mut self, key: &FlowKey, outputs: &[Output], tracked: Option<ItemRef>, now_ns: u64) {
        self.stats.stale += 1;
        self.pipeline.process(key, &mut self.tr);
        let wrong = match tracked {
            Some(actions) => self.tr.dp_actions[..] != *self.tables.actions().get(actions),
            None => self.tr.outputs != outputs,
        };
        if wrong {
            self.stats.stale_wrong += 1;
        }
        self.install_learned(now_ns);
    }

    /// Brings the revalidator's verdicts and the switch's timers up to `now_ns`; called
    /// before every packet and change (the per-packet cost is two comparisons).
    #[inline]
    pub fn advance(&mut self, now_ns: u64) {
        if self.revalidator.verdicts_due(now_ns) {
            let mut caches = caches(&mut self.nic, &mut self.megaflow);
            self.revalidator.apply_due(now_ns, &mut caches, &mut self.tables);
        }
        if self.timers.any_due(now_ns) {
            self.fire_timers(now_ns);
        }
    }

    /// Runs the timers due at `now_ns`, in [`Timer::ALL`]'s order, each set again one period
    /// after now.
    fn fire_timers(&mut self, now_ns: u64) {
        for timer in Timer::ALL {
            if !self.timers.due(timer, now_ns) {
                continue;
            }
            let period = match timer {
                Timer::IdleSweep => self.revalidator.sweep_interval_ns(),
                Timer::RuleExpiry => SWEEP_INTERVAL_NS,
                Timer::MacAging | Timer::ConntrackSweep => AGING_INTERVAL_NS,
            };
            self.timers.set(timer, now_ns.saturating_add(period));
            match timer {
                Timer::IdleSweep => {
                    let mut caches = caches(&mut self.nic, &mut self.megaflow);
                    self.revalidator.sweep(now_ns, &mut caches, &mut self.tables);
                }
                Timer::RuleExpiry => self.expire_rules(now_ns),
                Timer::MacAging => {
                    if self.pipeline.expire_macs(now_ns) {
                        self.mac_table_changed(now_ns);
                    }
                }
                Timer::ConntrackSweep => {
                    if !self.conntrack.is_empty() {
                        self.conntrack.sweep(now_ns);
                    }
                }
            }
        }
    }
}

/// A switch's wildcard caches, lent to the revalidator.
fn caches<'a>(
    nic: &'a mut Option<Box<dyn NicScheme>>,
    megaflow: &'a mut Option<MegaflowCache>,
) -> Caches<'a> {
    Caches {
        nic: nic.as_deref_mut().map(|n| n.entries_mut()),
        megaflow: megaflow.as_mut().map(|m| m as &mut dyn Revalidate),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::update::parse_updates;
    use crate::openflow::{parse_flows, parse_packet};

    /// The driver's wake-up time: the earliest timer, or a revalidation verdict due sooner.
    #[test]
    fn next_deadline_is_the_earliest_timer_or_verdict() {
        let rules = parse_flows("priority=1,actions=output:2", "t").unwrap();
        let config = SwitchConfig { revalidation_delay_ns: 1_000, ..SwitchConfig::default() };
        let mut sw = Switch::new(Pipeline::from_rules(rules), config).unwrap();
        // Rule expiry, MAC aging and the connection sweep run at the first packet.
        assert_eq!(sw.next_deadline_ns(), 0);
        let key = parse_packet("in_port=1,udp").unwrap();
        let mut out = Vec::new();
        sw.process(&key, 64, 10, &mut out);
        assert_eq!(out.len(), 1);
        // Then the idle sweep and rule expiry, every 500 ms.
        assert_eq!(sw.next_deadline_ns(), SWEEP_INTERVAL_NS);
        // An update puts a verdict on the cached entries, due after the delay.
        let update = &parse_updates("0 add priority=2,actions=output:3", "u").unwrap()[0];
        sw.apply_update(update.command, &update.spec, 20);
        assert_eq!(sw.next_deadline_ns(), 1_020);
        sw.advance(1_020);
        assert_eq!(sw.next_deadline_ns(), SWEEP_INTERVAL_NS);
    }
}
