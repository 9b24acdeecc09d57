//! The vSwitch end to end: NIC → microflow cache → megaflow cache → slow path, with installs
//! and revalidation flowing back.
//!
//! [`Switch::process`] forwards one packet and says which layer decided; every layer executes
//! the same composed datapath actions the slow path would and credits the same rules.
//! [`Switch::apply_update`] changes the rules: the microflow cache follows its FlowShadow
//! consistency mode, and the [`Revalidator`] re-translates the NIC and megaflow entries that
//! depend on a changed outcome. The NIC is any [`NicScheme`]; the switch never asks which.

use crate::cache::interner::ItemRef;
use crate::cache::microflow::MicroflowConfigError;
use crate::cache::table::{Refused, TableConfigError};
use crate::cache::{CachedFlow, Consistency, DecisionTables, MegaflowCache, MicroflowCache};
use crate::conntrack::{Conntrack, HwOffload};
use crate::host_time::{HostClock, HostTimings};
use crate::measure::FlowId;
use crate::nic::{Arrival, NicHit, NicReport, NicScheme, Upcall};
use crate::openflow::datapath::{apply_headers, execute, uses_conntrack, DpAction};
use crate::openflow::parser::FlowSpec;
use crate::openflow::rule::RuleId;
use crate::openflow::traversal::Output;
use crate::openflow::update::{self, Command};
use crate::openflow::{LookupRef, Pipeline, Traversal};
use crate::packet::hash::hash_key;
use crate::packet::FlowKey;
use crate::revalidator::{CacheId, Caches, EntryAt, Removal, Revalidator, Translator, SWEEP_INTERVAL_NS};
use crate::tuple_space::EntryId;

pub use crate::nic::NicConfig;

/// Default software megaflow cache size (OVS's default `flow-limit`).
pub const DEFAULT_MEGAFLOW_ENTRIES: usize = 200_000;
/// Default microflow cache size.
pub const DEFAULT_MICROFLOW_ENTRIES: usize = 65_536;
/// Default `max-idle`: 10 s, as OVS.
pub const DEFAULT_MAX_IDLE_NS: u64 = 10_000_000_000;

/// The microflow cache's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MicroflowConfig {
    /// Entries.
    pub entries: usize,
    /// Entries per bucket: 1 (direct replacement), 2 or 4 (pseudo-LRU).
    pub ways: usize,
}

/// Connection tracking in the NIC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NicConntrack {
    /// None: a decision through `ct` stays in software, as without hardware offload of `ct`.
    #[default]
    Off,
    /// As tc's `ct` offload does it (Linux's flow table, ConnectX-class NICs): the NIC tracks
    /// the connections software saw established, at most `entries` of them, each from
    /// [`SwitchConfig::nic_update_latency_ns`] after software offloaded it (see
    /// [`crate::conntrack`]); a packet whose connection it does not hold (new, closing, or
    /// left out) goes to software from the pass that tracks it.
    Established {
        /// Connections the NIC's table holds at most.
        entries: usize,
    },
    /// Every connection, from its first packet: an upper bound (the NIC's table is the
    /// software's).
    All,
}

impl NicConntrack {
    /// Whether the NIC tracks connections at all.
    pub fn is_on(self) -> bool {
        self != NicConntrack::Off
    }
}

/// Which layers exist and how they behave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchConfig {
    /// The NIC, or none.
    pub nic: Option<NicConfig>,
    /// Time from a NIC install to the first packet the entry forwards (0: at once).
    pub nic_update_latency_ns: u64,
    /// Whether, and how, the NIC tracks connections: decisions through `ct` may then be
    /// offloaded, and a packet whose first pass the NIC decided makes its recirculated passes
    /// in the NIC while it holds them.
    pub nic_conntrack: NicConntrack,
    /// The microflow cache, or none.
    pub microflow: Option<MicroflowConfig>,
    /// Megaflow cache entries, or none.
    pub megaflow: Option<usize>,
    /// Microflow cache consistency mechanism.
    pub consistency: Consistency,
    /// Idle time after which NIC and megaflow entries expire (0 = never).
    pub max_idle_ns: u64,
    /// Time between a rule update and the revalidator acting on it.
    pub revalidation_delay_ns: u64,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            nic: Some(NicConfig::default()),
            nic_update_latency_ns: 0,
            nic_conntrack: NicConntrack::Off,
            microflow: Some(MicroflowConfig { entries: DEFAULT_MICROFLOW_ENTRIES, ways: 1 }),
            megaflow: Some(DEFAULT_MEGAFLOW_ENTRIES),
            consistency: Consistency::default(),
            max_idle_ns: DEFAULT_MAX_IDLE_NS,
            revalidation_delay_ns: 0,
        }
    }
}

impl SwitchConfig {
    /// Every packet through the slow path: the reference the caches are checked against.
    pub fn no_cache() -> SwitchConfig {
        SwitchConfig { nic: None, microflow: None, megaflow: None, ..SwitchConfig::default() }
    }
}

/// Why a switch cannot be built as configured.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SwitchConfigError {
    /// Bad microflow cache shape.
    #[error(transparent)]
    Microflow(#[from] MicroflowConfigError),
    /// Bad NIC table shape.
    #[error(transparent)]
    Nic(#[from] TableConfigError),
    /// Zero megaflow entries with the cache on.
    #[error("the megaflow cache needs at least one entry (turn it off instead)")]
    Megaflow,
}

/// The layer that decided a packet's fate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layer {
    /// A NIC entry, in hardware.
    Nic,
    /// The FlowShadow microflow cache.
    Microflow,
    /// The software megaflow cache.
    Megaflow,
    /// An upcall to the OpenFlow pipeline.
    SlowPath,
}

impl Layer {
    /// Name as `--decisions` writes it.
    pub fn name(self) -> &'static str {
        match self {
            Layer::Nic => "nic",
            Layer::Microflow => "microflow",
            Layer::Megaflow => "megaflow",
            Layer::SlowPath => "slowpath",
        }
    }
}

/// Counters of the whole switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchStats {
    /// Packets processed.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Decided by the NIC.
    pub nic_hits: u64,
    /// Decided by the microflow cache (these four count packets by their first pass; see
    /// `by_pass` for recirculated ones).
    pub microflow_hits: u64,
    /// Decided by the megaflow cache.
    pub megaflow_hits: u64,
    /// Sent to the slow path.
    pub upcalls: u64,
    /// Forwarded by an entry known outdated whose revalidation was still pending.
    pub stale: u64,
    /// Of those, packets whose outputs differed from what the slow path decided then.
    pub stale_wrong: u64,
    /// Packets that needed the slow path for a controller action (`dec_ttl` at TTL ≤ 1).
    pub controller: u64,
    /// Packets that stayed in the slow path for a rewrite OVS's datapath cannot do (ARP
    /// fields, ICMP type and code).
    pub slow_actions: u64,
    /// Rule updates applied.
    pub updates: u64,
    /// Rules added, modified or deleted by them.
    pub rules_changed: u64,
    /// Entries re-translated by revalidation.
    pub retranslations: u64,
    /// Upcalls whose translation was offered to the NIC for installation.
    pub nic_offers: u64,
    /// Flows `learn` actions installed or changed.
    pub learned: u64,
    /// Rules deleted because their idle or hard timeout passed.
    pub rules_expired: u64,
    /// Changes of the MAC table `NORMAL` uses (new, moved, evicted or expired MACs).
    pub mac_changes: u64,
    /// Passes after a packet's first: clones `ct(table=N)` recirculated.
    pub recirculations: u64,
    /// Recirculations dropped at the datapath's depth limit ([`MAX_RECIRC_DEPTH`]).
    pub recirc_too_deep: u64,
    /// NIC hits (first passes and later ones) that went to software because the NIC's
    /// connection table did not hold a connection the decision tracks
    /// ([`NicConntrack::Established`]).
    pub nic_conntrack_misses: u64,
    /// Where each pass was decided, by pass: the first, the second, the third, later ones.
    pub by_pass: [PassStats; 4],
}

/// Where the passes of one depth were decided.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PassStats {
    /// By the NIC.
    pub nic: u64,
    /// By the microflow cache.
    pub microflow: u64,
    /// By the megaflow cache.
    pub megaflow: u64,
    /// By the slow path.
    pub upcalls: u64,
}

impl PassStats {
    /// Passes counted.
    pub fn total(&self) -> u64 {
        self.nic + self.microflow + self.megaflow + self.upcalls
    }

    fn count(&mut self, layer: Layer) {
        match layer {
            Layer::Nic => self.nic += 1,
            Layer::Microflow => self.microflow += 1,
            Layer::Megaflow => self.megaflow += 1,
            Layer::SlowPath => self.upcalls += 1,
        }
    }
}

/// Recirculations a packet may go through (OVS userspace datapath `MAX_RECIRC_DEPTH`).
pub const MAX_RECIRC_DEPTH: u32 = 6;

/// Whether an upcall may install its decision in the NIC (a NIC accepts a bounded number of
/// table updates per second, so a timing model may refuse).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offload {
    /// Install while the NIC has room.
    Allowed,
    /// Leave the NIC as it is.
    Refused,
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
    tr: Traversal,
    /// Scratch, reused across packets and updates.
    changed: Vec<LookupRef>,
    hit: NicHit,
    installed: Vec<(u8, EntryId)>,
    new_entries: Vec<EntryAt>,
    stats: SwitchStats,
    clock: Option<Box<dyn HostClock>>,
    host: HostTimings,
    /// When idle MACs are next expired (OVS runs its MAC table's aging every second).
    next_mac_aging_ns: u64,
    /// When flow expiry is next checked.
    next_expiry_ns: u64,
    /// Rules found expired (reused).
    expired: Vec<RuleId>,
    /// The datapath's connection tracker.
    conntrack: Conntrack,
    /// Clones waiting for their next pass, with their depth.
    recirc_queue: Vec<(FlowKey, u32)>,
    /// The pass (1, 2, ...) each recirculation id was first seen at, by id.
    recirc_pass: Vec<u8>,
    /// Where the last packet's recirculated passes were decided, in order.
    last_passes: Vec<Layer>,
}

impl Switch {
    /// A switch forwarding with `pipeline`.
    pub fn new(mut pipeline: Pipeline, config: SwitchConfig) -> Result<Switch, SwitchConfigError> {
        // The rules given were installed when the run starts.
        pipeline.stamp_changes(0);
        let nic = config.nic.map(|n| n.build(config.nic_update_latency_ns)).transpose()?;
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
        Ok(Switch {
            pipeline,
            config,
            tables: DecisionTables::new(),
            nic,
            microflow,
            megaflow,
            revalidator: Revalidator::new(config.revalidation_delay_ns, config.max_idle_ns),
            epoch: 0,
            tr,
            changed: Vec::new(),
            hit: NicHit::default(),
            installed: Vec::new(),
            new_entries: Vec::new(),
            stats: SwitchStats::default(),
            clock: None,
            host: HostTimings::default(),
            next_mac_aging_ns: 0,
            next_expiry_ns: 0,
            expired: Vec::new(),
            conntrack: match config.nic_conntrack {
                NicConntrack::Established { entries } => {
                    Conntrack::with_offload(HwOffload { entries, latency_ns: config.nic_update_latency_ns })
                }
                _ => Conntrack::new(),
            },
            recirc_queue: Vec::new(),
            recirc_pass: Vec::new(),
            last_passes: Vec::new(),
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

    /// Whether NIC hits build the copies that leave (default: yes). A caller that only counts
    /// where packets go (the timing simulation without `--decisions`) turns them off, which
    /// saves executing the actions of every hardware packet; stale hits still build them.
    pub fn set_nic_outputs(&mut self, wanted: bool) {
        self.hit.skip_outputs = !wanted;
    }

    /// Switch-wide counters.
    pub fn stats(&self) -> SwitchStats {
        self.stats
    }

    /// The connection tracker.
    pub fn conntrack(&self) -> &Conntrack {
        &self.conntrack
    }

    /// Where the recirculated passes of the last packet [`Switch::process_nic`] or
    /// [`Switch::process_host`] handled were decided, in order (empty if it did not
    /// recirculate): each one in software costs the host a lookup.
    pub fn last_passes(&self) -> &[Layer] {
        &self.last_passes
    }

    /// Megaflow entries held now by the pass they serve: the first, the second, the third,
    /// later ones (the figure OVS operators watch per recirculation).
    pub fn megaflows_by_pass(&self) -> [usize; 4] {
        let mut out = [0; 4];
        if let Some(m) = &self.megaflow {
            for id in m.space().ids() {
                let e = m.space().entry(id).expect("listed entries live");
                let recirc = e.data.rep.recirc_id() as usize;
                let pass =
                    if recirc == 0 { 0 } else { self.recirc_pass.get(recirc).copied().unwrap_or(3) as usize };
                out[pass.min(3)] += 1;
            }
        }
        out
    }

    /// The NIC scheme, if configured.
    pub fn nic(&self) -> Option<&dyn NicScheme> {
        self.nic.as_deref()
    }

    /// The NIC scheme as its concrete type, if it is a `T`.
    pub fn nic_as<T: NicScheme + 'static>(&self) -> Option<&T> {
        self.nic.as_ref()?.as_any().downcast_ref()
    }

    /// The NIC's occupancy and counters (with its scheme's own figures), if configured.
    pub fn nic_report(&self) -> Option<NicReport> {
        self.nic.as_ref().map(|n| n.report())
    }

    /// NIC entries installed so far.
    pub fn nic_installs(&self) -> u64 {
        self.nic.as_ref().map_or(0, |n| n.installs())
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
    pub fn decision_tables(&self) -> (usize, usize) {
        (self.tables.actions.len(), self.tables.paths.len())
    }

    /// Forwards one packet of `bytes` bytes arriving at `now_ns` (non-decreasing), replacing
    /// `outputs` with the copies that leave; returns the layer that decided.
    pub fn process(&mut self, key: &FlowKey, bytes: u64, now_ns: u64, outputs: &mut Vec<Output>) -> Layer {
        if self.process_nic(key, bytes, now_ns, outputs) {
            Layer::Nic
        } else {
            self.process_host(key, bytes, now_ns, Offload::Allowed, outputs)
        }
    }

    /// Runs the passes the last decision's clones wait for, appending their outputs: each a
    /// lookup in software (microflow, megaflow, slow path) of the clone as conntrack left it.
    /// With `in_nic` (the first pass was the NIC's, which tracks connections), each pass is
    /// looked up in the NIC first; a pass it misses goes to software, and so do the later ones.
    fn recirculate(&mut self, bytes: u64, now_ns: u64, outputs: &mut Vec<Output>, mut in_nic: bool) {
        // In the order the clones were made, as OVS's datapath runs them.
        let mut next = 0;
        while next < self.recirc_queue.len() {
            let (key, depth) = self.recirc_queue[next];
            next += 1;
            if depth > MAX_RECIRC_DEPTH {
                self.stats.recirc_too_deep += 1;
                continue;
            }
            self.stats.recirculations += 1;
            let id = key.recirc_id() as usize;
            if self.recirc_pass.len() <= id {
                self.recirc_pass.resize(id + 1, 0);
            }
            if self.recirc_pass[id] == 0 {
                self.recirc_pass[id] = depth.min(255) as u8;
            }
            let layer = if in_nic && self.nic_pass(&key, depth, bytes, now_ns, outputs) {
                Layer::Nic
            } else {
                in_nic = false;
                // A NIC that tracks connections takes later passes' decisions too.
                let offload =
                    if self.config.nic_conntrack.is_on() { Offload::Allowed } else { Offload::Refused };
                self.lookup_host(&key, depth, bytes, now_ns, offload, outputs)
            };
            self.stats.by_pass[(depth as usize).min(3)].count(layer);
            self.last_passes.push(layer);
        }
        self.recirc_queue.clear();
    }

    /// The NIC part of [`Switch::process`]: counts the packet and, if the NIC forwards it,
    /// fills `outputs` and returns true. A packet it misses must then go to
    /// [`Switch::process_host`] (at the same or a later time: host software may serve it
    /// after a queue).
    pub fn process_nic(&mut self, key: &FlowKey, bytes: u64, now_ns: u64, outputs: &mut Vec<Output>) -> bool {
        outputs.clear();
        self.last_passes.clear();
        self.advance(now_ns);
        self.stats.packets += 1;
        self.stats.bytes += bytes;
        let Some(nic) = &mut self.nic else { return false };
        if !nic.lookup(Arrival { key, bytes, now_ns }, &self.tables, &mut self.hit) {
            return false;
        }
        if !self.hardware_tracks(key, now_ns) {
            return false;
        }
        // The hit's outputs become the caller's; the caller's buffer is reused for the next.
        std::mem::swap(outputs, &mut self.hit.outputs);
        let conntracked = self.hit.actions.filter(|&a| self.tables.tracks(a));
        let mut stateful = false;
        for &path in &self.hit.paths {
            self.pipeline.credit(self.tables.path_rules(path), bytes, now_ns);
            stateful |= self.tables.stateful(path);
        }
        self.stats.nic_hits += 1;
        self.stats.by_pass[0].nic += 1;
        if let Some(actions) = conntracked {
            // Hardware connection tracking: the actions run with the tracker, the clones
            // recirculate in the NIC while it holds their passes.
            outputs.clear();
            let list = self.tables.actions.get(actions);
            Self::run(&mut self.conntrack, &mut self.recirc_queue, list, key, 0, now_ns, outputs);
        }
        // What this pass learns is learned before the next pass, as after an upcall.
        if self.hit.stale {
            let cached = conntracked.map(|a| self.tables.actions.get(a).to_vec());
            self.count_stale(key, outputs, cached.as_deref(), now_ns);
        } else if stateful {
            self.learn_again(key, now_ns);
        }
        if conntracked.is_some() {
            self.recirculate(bytes, now_ns, outputs, true);
        }
        true
    }

    /// The host part of [`Switch::process`] for a packet the NIC missed (already counted by
    /// [`Switch::process_nic`]): microflow cache, megaflow cache, slow path; returns the
    /// layer that decided. `now_ns` is when software handles it; an upcall installs in the
    /// NIC only if `offload` allows.
    pub fn process_host(
        &mut self,
        key: &FlowKey,
        bytes: u64,
        now_ns: u64,
        offload: Offload,
        outputs: &mut Vec<Output>,
    ) -> Layer {
        outputs.clear();
        self.advance(now_ns);
        self.last_passes.clear();
        let layer = self.lookup_host(key, 0, bytes, now_ns, offload, outputs);
        self.stats.by_pass[0].count(layer);
        self.recirculate(bytes, now_ns, outputs, false);
        layer
    }

    /// A recirculated pass in a NIC that tracks connections: if it holds the pass, its outputs
    /// are appended, its clones queued, and true returned.
    fn nic_pass(
        &mut self,
        key: &FlowKey,
        depth: u32,
        bytes: u64,
        now_ns: u64,
        outputs: &mut Vec<Output>,
    ) -> bool {
        let Some(nic) = &mut self.nic else { return false };
        if !nic.lookup(Arrival { key, bytes, now_ns }, &self.tables, &mut self.hit) {
            return false;
        }
        if !self.hardware_tracks(key, now_ns) {
            return false;
        }
        let mut stateful = false;
        for &path in &self.hit.paths {
            self.pipeline.credit(self.tables.path_rules(path), bytes, now_ns);
            stateful |= self.tables.stateful(path);
        }
        let first = outputs.len();
        match self.hit.actions {
            Some(a) => self.run_cached(a, key, depth, now_ns, outputs),
            None => outputs.append(&mut self.hit.outputs),
        }
        if self.hit.stale {
            // Judged as a stale first pass is: by its datapath actions when it tracks.
            let cached = self.hit.actions.filter(|&a| self.tables.tracks(a));
            let cached = cached.map(|a| self.tables.actions.get(a).to_vec());
            let pass_outputs = outputs[first..].to_vec();
            self.count_stale(key, &pass_outputs, cached.as_deref(), now_ns);
        } else if stateful {
            self.learn_again(key, now_ns);
        }
        true
    }

    /// Whether the NIC can carry out the decision it just found for `key` (in `self.hit`): it
    /// always can, unless the decision goes through `ct` and the NIC tracks only the
    /// connections it holds ([`NicConntrack::Established`]) and does not hold one the decision
    /// looks up — then the packet goes to software, counted in
    /// [`SwitchStats::nic_conntrack_misses`]. A second `ct` in the same pass is asked about
    /// with the packet as the first found it.
    fn hardware_tracks(&mut self, key: &FlowKey, now_ns: u64) -> bool {
        let (NicConntrack::Established { .. }, Some(a)) = (self.config.nic_conntrack, self.hit.actions)
        else {
            return true;
        };
        let list = self.tables.actions.get(a);
        let mut k = *key;
        let mut start = 0;
        for (i, action) in list.iter().enumerate() {
            if let DpAction::Ct(ct) = action {
                apply_headers(&list[start..i], &mut k);
                start = i;
                if !self.conntrack.in_hardware(ct, &k, now_ns) {
                    self.stats.nic_conntrack_misses += 1;
                    return false;
                }
            }
        }
        true
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
                self.run_cached(d.actions, key, depth, now_ns, outputs);
                self.pipeline.credit(self.tables.rules(d), bytes, now_ns);
                if self.tables.stateful(d.path) {
                    self.learn_again(key, now_ns);
                }
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
                self.run_cached(d.actions, key, depth, now_ns, outputs);
                self.pipeline.credit(self.tables.rules(d), bytes, now_ns);
                if stale {
                    let cached =
                        self.tables.tracks(d.actions).then(|| self.tables.actions.get(d.actions).to_vec());
                    self.count_stale(key, outputs, cached.as_deref(), now_ns);
                } else if self.tables.stateful(d.path) {
                    self.learn_again(key, now_ns);
                }
                return Layer::Megaflow;
            }
        }
        self.upcall(key, hash, depth, bytes, now_ns, offload, outputs);
        Layer::SlowPath
    }

    /// [`Switch::run`] for a cached decision's action list, whose use of the connection tracker
    /// was found when it was interned.
    fn run_cached(
        &mut self,
        actions: ItemRef,
        key: &FlowKey,
        depth: u32,
        now_ns: u64,
        outputs: &mut Vec<Output>,
    ) {
        let list = self.tables.actions.get(actions);
        if self.tables.tracks(actions) {
            Self::run(&mut self.conntrack, &mut self.recirc_queue, list, key, depth, now_ns, outputs);
        } else {
            execute(list, key, outputs);
        }
    }

    /// Executes a decision's datapath actions on `key`, appending the copies that leave: with
    /// the connection tracker and recirculation when the actions use them.
    fn run(
        conntrack: &mut Conntrack,
        queue: &mut Vec<(FlowKey, u32)>,
        actions: &[DpAction],
        key: &FlowKey,
        depth: u32,
        now_ns: u64,
        outputs: &mut Vec<Output>,
    ) {
        if !uses_conntrack(actions) {
            execute(actions, key, outputs);
            return;
        }
        let mut k = *key;
        let (mut start, mut i) = (0, 0);
        while i < actions.len() {
            let a = &actions[i];
            i += 1;
            match a {
                DpAction::Ct(ct) => {
                    execute(&actions[start..i - 1], &k, outputs);
                    apply_headers(&actions[start..i - 1], &mut k);
                    conntrack.execute(ct, &mut k, now_ns);
                    start = i;
                }
                DpAction::Recirc(id) => {
                    execute(&actions[start..i - 1], &k, outputs);
                    apply_headers(&actions[start..i - 1], &mut k);
                    let mut clone = k;
                    clone.set_recirc_id(*id);
                    queue.push((clone, depth + 1));
                    start = i;
                }
                DpAction::Clone(len) => {
                    // The body runs on a copy, with the tracker; the packet goes on as it was.
                    execute(&actions[start..i - 1], &k, outputs);
                    apply_headers(&actions[start..i - 1], &mut k);
                    let body = &actions[i..i + *len as usize];
                    Self::run(conntrack, queue, body, &k, depth, now_ns, outputs);
                    i += *len as usize;
                    start = i;
                }
                _ => {}
            }
        }
        execute(&actions[start..], &k, outputs);
    }

    /// A cached decision that learns (flows or MACs) or uses the MAC table was served: learn
    /// as the slow path would (OVS re-runs `learn` and MAC learning from the datapath flow's
    /// statistics), so that learning does not depend on which layer served the packet.
    fn learn_again(&mut self, key: &FlowKey, now_ns: u64) {
        self.pipeline.process(key, &mut self.tr);
        self.install_learned(now_ns);
    }

    /// Applies what the last translation learned — MACs, then flows (`modify-flows --strict`,
    /// adding when absent, as OVS installs learned flows) — and revalidates what they change.
    fn install_learned(&mut self, now_ns: u64) {
        if !self.tr.is_stateful() {
            return;
        }
        // Revalidation translates with `self.tr`: take what it learned first.
        let mut learned = std::mem::take(&mut self.tr.learned);
        let mut macs = std::mem::take(&mut self.tr.mac_learned);
        if self.pipeline.learn_macs(&macs, now_ns) {
            self.mac_table_changed(now_ns);
        }
        macs.clear();
        self.tr.mac_learned = macs;
        for rule in &learned {
            let table = self.pipeline.table(rule.table);
            let id = table.find_exact(&rule.matcher, rule.priority);
            let current = id.and_then(|id| self.pipeline.rule(id));
            if current.is_some_and(|r| r.actions == rule.actions && r.cookie == rule.cookie) {
                // Learning it again refreshes it: its hard timeout restarts, as in OVS.
                self.pipeline.touch(id.expect("found"));
                continue;
            }
            let spec = FlowSpec {
                rule: rule.clone(),
                table_given: true,
                priority_given: true,
                cookie_mask: 0,
                cookie_set: true,
            };
            self.changed.clear();
            update::apply(&mut self.pipeline, Command::ModifyStrict, &spec, &mut self.changed);
            self.stats.learned += 1;
            self.revalidate_changed(now_ns);
        }
        learned.clear();
        self.tr.learned = learned;
        self.pipeline.stamp_changes(now_ns);
    }

    /// A packet an outdated entry forwarded: counted, and compared with the slow path. It
    /// learns what the slow path learns now (the outdated entry may not know it learns), so
    /// that the flows learned do not depend on revalidation timing.
    ///
    /// A decision through the connection tracker is compared by its datapath actions
    /// (`conntracked`): its outputs depend on connection state that executing it again would
    /// change.
    fn count_stale(
        &mut self,
        key: &FlowKey,
        outputs: &[Output],
        conntracked: Option<&[DpAction]>,
        now_ns: u64,
    ) {
        self.stats.stale += 1;
        self.pipeline.process(key, &mut self.tr);
        let wrong = match conntracked {
            Some(actions) => self.tr.dp_actions != actions,
            None => self.tr.outputs != outputs,
        };
        if wrong {
            self.stats.stale_wrong += 1;
        }
        self.install_learned(now_ns);
    }

    #[allow(clippy::too_many_arguments)]
    fn upcall(
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
            Self::run(
                &mut self.conntrack,
                &mut self.recirc_queue,
                &self.tr.dp_actions,
                key,
                depth,
                now_ns,
                outputs,
            );
        } else {
            outputs.extend_from_slice(&self.tr.outputs);
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
        self.installed.clear();
        // The NIC has no connection tracker: such decisions stay in software.
        let offload = if self.tr.uses_conntrack() && !self.config.nic_conntrack.is_on() {
            Offload::Refused
        } else {
            offload
        };
        if let (Some(nic), Offload::Allowed) = (&mut self.nic, offload) {
            self.stats.nic_offers += 1;
            let started = self.clock.as_ref().map(|c| c.now_ns());
            let upcall = Upcall { key, traversal: &self.tr, decision, now_ns };
            nic.install(upcall, &mut self.tables, &mut self.installed);
            if let (Some(t0), Some(c)) = (started, &self.clock) {
                self.host.nic_install_ns += c.now_ns().saturating_sub(t0);
                self.host.nic_install_upcalls += 1;
            }
        }
        self.new_entries.clear();
        self.new_entries.extend(self.installed.iter().map(|&(table, id)| EntryAt {
            cache: CacheId::Nic,
            table,
            id,
        }));
        if let Some(megaflow) = &mut self.megaflow {
            let flow = CachedFlow::new(*key, decision);
            if let Ok(id) = megaflow.install(&self.tr.megaflow, 0, 0, flow, now_ns) {
                self.tables.acquire(decision);
                self.new_entries.push(EntryAt { cache: CacheId::Megaflow, table: 0, id });
            }
        }
        let mut caches = Caches { nic: self.nic.as_deref_mut(), megaflow: self.megaflow.as_mut() };
        for &at in &self.new_entries {
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
    pub fn nic_offload(&mut self, key: &FlowKey, area: u8, now_ns: u64) -> Result<(u8, EntryId), Refused> {
        self.advance(now_ns);
        let Some(nic) = &mut self.nic else { return Err(Refused::Unsupported) };
        self.pipeline.process(key, &mut self.tr);
        if self.tr.slow_path_only() || (self.tr.uses_conntrack() && !self.config.nic_conntrack.is_on()) {
            // A controller action never leaves the slow path; the NIC has no connection
            // tracker.
            return Err(Refused::NotAFlow);
        }
        let decision = self.tables.intern(&self.tr);
        let upcall = Upcall { key, traversal: &self.tr, decision, now_ns };
        let placed = nic.install_flow(upcall, area, &mut self.tables);
        if let Ok(id) = placed {
            let mut caches = Caches { nic: self.nic.as_deref_mut(), megaflow: self.megaflow.as_mut() };
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
    pub fn nic_remove(&mut self, table: u8, id: EntryId, now_ns: u64) -> bool {
        self.advance(now_ns);
        let Some(nic) = &mut self.nic else { return false };
        nic.entries_mut().remove(table as usize, id, &mut self.tables, Removal::Replaced)
    }

    /// Where the NIC holds `flow`'s entry, for schemes keyed by flow.
    pub fn nic_find(&self, flow: FlowId) -> Option<(u8, EntryId)> {
        self.nic.as_ref()?.find_flow(flow)
    }

    /// Applies a rule update at `now_ns`; returns the number of rules added, modified or
    /// deleted.
    pub fn apply_update(&mut self, command: Command, spec: &FlowSpec, now_ns: u64) -> usize {
        self.advance(now_ns);
        self.changed.clear();
        let n = update::apply(&mut self.pipeline, command, spec, &mut self.changed);
        self.pipeline.stamp_changes(now_ns);
        self.stats.updates += 1;
        self.stats.rules_changed += n as u64;
        self.revalidate_changed(now_ns);
        n
    }

    /// Revalidates every decision that used the MAC table.
    fn mac_table_changed(&mut self, now_ns: u64) {
        self.stats.mac_changes += 1;
        self.changed.clear();
        self.changed.push(LookupRef::STATEFUL);
        self.revalidate_changed(now_ns);
    }

    /// Tells every cache that the lookup outcomes in `self.changed` may have changed.
    fn revalidate_changed(&mut self, now_ns: u64) {
        if self.changed.is_empty() {
            return;
        }
        self.changed.sort_unstable();
        self.changed.dedup();
        self.epoch += 1;
        if let Some(microflow) = &mut self.microflow {
            microflow.on_update(&self.changed, self.epoch, &mut self.tables);
        }
        let mut caches = Caches { nic: self.nic.as_deref_mut(), megaflow: self.megaflow.as_mut() };
        let mut with = Translator { pipeline: &self.pipeline, tables: &mut self.tables, tr: &mut self.tr };
        let outcome =
            self.revalidator.on_update(&self.changed, now_ns, &mut caches, &mut with, self.clock.as_deref());
        self.stats.retranslations += outcome.retranslated;
        self.host.nic_revalidation_ns += outcome.nic_host_ns;
    }

    /// Brings the revalidator and the idle sweeper up to `now_ns`.
    #[inline]
    /// Deletes the rules whose idle or hard timeout has passed, as OVS does after each of its
    /// revalidator's dumps, and revalidates what they decided.
    fn expire_rules(&mut self, now_ns: u64) {
        let mut expired = std::mem::take(&mut self.expired);
        expired.clear();
        self.pipeline.expired(now_ns, &mut expired);
        if !expired.is_empty() {
            self.changed.clear();
            for &id in &expired {
                update::delete(&mut self.pipeline, id, &mut self.changed);
            }
            self.stats.rules_expired += expired.len() as u64;
            self.revalidate_changed(now_ns);
        }
        self.expired = expired;
    }

    fn advance(&mut self, now_ns: u64) {
        let mut caches = Caches { nic: self.nic.as_deref_mut(), megaflow: self.megaflow.as_mut() };
        self.revalidator.advance(now_ns, &mut caches, &mut self.tables);
        if now_ns >= self.next_expiry_ns {
            self.next_expiry_ns = now_ns.saturating_add(SWEEP_INTERVAL_NS);
            self.expire_rules(now_ns);
        }
        if now_ns >= self.next_mac_aging_ns {
            self.next_mac_aging_ns = now_ns.saturating_add(1_000_000_000);
            if self.pipeline.expire_macs(now_ns) {
                self.mac_table_changed(now_ns);
            }
            if !self.conntrack.is_empty() {
                self.conntrack.sweep(now_ns);
            }
        }
    }
}
