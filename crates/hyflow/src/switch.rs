//! The vSwitch end to end: NIC → microflow cache → megaflow cache → slow path, with installs
//! and revalidation flowing back.
//!
//! [`Switch::process`] forwards one packet and says which layer decided; every layer executes
//! the same composed datapath actions the slow path would and credits the same rules.
//! [`Switch::apply_update`] changes the rules: the microflow cache follows its FlowShadow
//! consistency mode, and NIC and megaflow entries whose path touches a changed outcome are
//! re-translated from the packet that created them (OVS's revalidator). With a revalidation
//! delay the verdicts take effect only after the delay, and every packet an outdated entry
//! forwards in the meantime is counted as stale.

use std::collections::VecDeque;

use crate::cache::interner::ItemRef;
use crate::cache::microflow::MicroflowConfigError;
use crate::cache::{CachedFlow, Consistency, Decision, DecisionTables, MegaflowCache, MicroflowCache};
use crate::nic::gigaflow::{Gigaflow, GigaflowConfig, Revalidation};
use crate::nic::{MegaflowOffload, StageConfigError};
use crate::openflow::datapath::execute;
use crate::openflow::parser::FlowSpec;
use crate::openflow::traversal::Output;
use crate::openflow::update::{self, Command};
use crate::openflow::{LookupRef, Pipeline, Traversal};
use crate::packet::hash::hash_key;
use crate::packet::FlowKey;
use crate::tuple_space::{EntryId, FlowTableStats, TupleSpace};

/// Default software megaflow cache size (OVS's default `flow-limit`).
pub const DEFAULT_MEGAFLOW_ENTRIES: usize = 200_000;
/// Default microflow cache size.
pub const DEFAULT_MICROFLOW_ENTRIES: usize = 65_536;
/// Default `max-idle`: 10 s, as OVS.
pub const DEFAULT_MAX_IDLE_NS: u64 = 10_000_000_000;
/// How often idle entries are swept (OVS's revalidator wakes about this often).
const SWEEP_INTERVAL_NS: u64 = 500_000_000;

/// The NIC's caching scheme and shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NicConfig {
    /// OVS-style megaflow offload: one ternary stage.
    Megaflow {
        /// Entries of the stage.
        entries: usize,
        /// Distinct masks it supports.
        max_masks: usize,
    },
    /// Gigaflow: sub-traversals in K tagged stages.
    Gigaflow(GigaflowConfig),
}

/// The microflow cache's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MicroflowConfig {
    /// Entries.
    pub entries: usize,
    /// Entries per bucket: 1 (direct replacement), 2 or 4 (pseudo-LRU).
    pub ways: usize,
}

/// Which layers exist and how they behave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchConfig {
    /// The NIC, or none.
    pub nic: Option<NicConfig>,
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
            nic: Some(NicConfig::Megaflow {
                entries: crate::nic::DEFAULT_MEGAFLOW_ENTRIES,
                max_masks: crate::nic::DEFAULT_MEGAFLOW_MASKS,
            }),
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
    /// Bad NIC stage shape.
    #[error(transparent)]
    Nic(#[from] StageConfigError),
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
    /// Decided by the microflow cache.
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
    /// Rule updates applied.
    pub updates: u64,
    /// Rules added, modified or deleted by them.
    pub rules_changed: u64,
    /// Entries re-translated by revalidation.
    pub retranslations: u64,
    /// Wall-clock nanoseconds spent revalidating NIC entries (host timing, reported only).
    pub nic_revalidation_ns: u64,
}

/// A revalidation verdict.
#[derive(Clone, Copy, Debug)]
enum Verdict {
    /// The entry's actions or coverage changed: remove it.
    Evict,
    /// Same actions for everything it covers, through other rules: keep with this path.
    Keep(ItemRef),
}

/// Which wildcard table an entry lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Nic,
    Megaflow,
    /// A Gigaflow stage.
    Gigaflow(u8),
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    due_ns: u64,
    place: Place,
    id: EntryId,
    seq: u64,
    verdict: Verdict,
}

/// The switch: pipeline plus caches.
pub struct Switch {
    pipeline: Pipeline,
    config: SwitchConfig,
    tables: DecisionTables,
    nic: Option<MegaflowOffload>,
    gigaflow: Option<Gigaflow>,
    /// Gigaflow entries a NIC hit used (reused per packet).
    used: Vec<(u8, EntryId)>,
    microflow: Option<MicroflowCache>,
    megaflow: Option<MegaflowCache>,
    /// Rule updates applied so far; decisions are stamped with it.
    epoch: u64,
    tr: Traversal,
    changed: Vec<LookupRef>,
    /// Entry ids selected by revalidation or an idle sweep (reused: no allocation per update).
    selected: Vec<EntryId>,
    pending: VecDeque<Pending>,
    verdict_seq: u64,
    next_sweep_ns: u64,
    stats: SwitchStats,
    /// Whether upcalls may install NIC entries now (a timing model caps the NIC's update rate).
    nic_installs: bool,
}

impl Switch {
    /// A switch forwarding with `pipeline`.
    pub fn new(pipeline: Pipeline, config: SwitchConfig) -> Result<Switch, SwitchConfigError> {
        let (nic, gigaflow) = match config.nic {
            Some(NicConfig::Megaflow { entries, max_masks }) => {
                (Some(MegaflowOffload::new(entries, max_masks)?), None)
            }
            Some(NicConfig::Gigaflow(g)) => (None, Some(Gigaflow::new(g)?)),
            None => (None, None),
        };
        let microflow = config
            .microflow
            .map(|m| MicroflowCache::new(m.entries, m.ways, config.consistency))
            .transpose()?;
        let megaflow = match config.megaflow {
            Some(0) => return Err(SwitchConfigError::Megaflow),
            Some(n) => Some(MegaflowCache::new(n)),
            None => None,
        };
        let mut tr = Traversal::new();
        tr.record_segments = gigaflow.is_some();
        Ok(Switch {
            pipeline,
            config,
            tables: DecisionTables::new(),
            nic,
            gigaflow,
            used: Vec::new(),
            microflow,
            megaflow,
            epoch: 0,
            tr,
            changed: Vec::new(),
            selected: Vec::new(),
            pending: VecDeque::new(),
            verdict_seq: 0,
            next_sweep_ns: SWEEP_INTERVAL_NS,
            stats: SwitchStats::default(),
            nic_installs: true,
        })
    }

    /// The rules (and their counters).
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The configuration.
    pub fn config(&self) -> &SwitchConfig {
        &self.config
    }

    /// Switch-wide counters.
    pub fn stats(&self) -> SwitchStats {
        self.stats
    }

    /// The NIC, if configured.
    pub fn nic(&self) -> Option<&MegaflowOffload> {
        self.nic.as_ref()
    }

    /// The Gigaflow NIC, if configured.
    pub fn gigaflow(&self) -> Option<&Gigaflow> {
        self.gigaflow.as_ref()
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
            self.process_host(key, bytes, now_ns, outputs)
        }
    }

    /// Allows or refuses NIC installs by the upcalls that follow (a NIC accepts a bounded
    /// number of table updates per second).
    pub fn set_nic_installs(&mut self, allowed: bool) {
        self.nic_installs = allowed;
    }

    /// Delays every NIC entry installed from now on by `delay_ns` before packets see it (a
    /// NIC applies table updates after a latency).
    pub fn set_nic_install_latency(&mut self, delay_ns: u64) {
        if let Some(nic) = &mut self.nic {
            nic.stage.parts_mut().0.set_activation_delay(delay_ns);
        }
        if let Some(gf) = &mut self.gigaflow {
            for stage in &mut gf.stages {
                stage.parts_mut().0.set_activation_delay(delay_ns);
            }
        }
    }

    /// NIC entries held now and at most so far (megaflow offload or all Gigaflow stages).
    pub fn nic_occupancy(&self) -> (usize, usize) {
        match (&self.nic, &self.gigaflow) {
            (Some(n), _) => (n.stage.space().len(), n.stage.stats.peak),
            (None, Some(g)) => (g.len(), g.stats.peak),
            (None, None) => (0, 0),
        }
    }

    /// Whether the switch has a NIC layer.
    pub fn has_nic(&self) -> bool {
        self.nic.is_some() || self.gigaflow.is_some()
    }

    /// NIC entries installed so far (megaflow offload or Gigaflow).
    pub fn nic_installs(&self) -> u64 {
        self.nic.as_ref().map_or(0, |n| n.stage.stats.installs)
            + self.gigaflow.as_ref().map_or(0, |g| g.stats.installed)
    }

    /// The NIC part of [`Switch::process`]: counts the packet and, if the NIC forwards it,
    /// fills `outputs` and returns true. A packet it misses must then go to
    /// [`Switch::process_host`] (at the same or a later time: host software may serve it
    /// after a queue).
    pub fn process_nic(&mut self, key: &FlowKey, bytes: u64, now_ns: u64, outputs: &mut Vec<Output>) -> bool {
        outputs.clear();
        self.advance(now_ns);
        self.stats.packets += 1;
        self.stats.bytes += bytes;
        if let Some(nic) = &mut self.nic {
            if let Some(id) = nic.stage.lookup(key, 0, bytes, now_ns) {
                let e = &nic.stage.space().entry(id).expect("hit entries live").data;
                let (d, stale) = (e.decision, e.pending_verdict != 0);
                self.stats.nic_hits += 1;
                self.forward(key, bytes, d, stale, outputs);
                return true;
            }
        }
        if let Some(gf) = &mut self.gigaflow {
            if gf.lookup(key, bytes, now_ns, outputs, &mut self.used) {
                let mut stale = false;
                for &(s, id) in &self.used {
                    let e = &gf.stages[s as usize].space().entry(id).expect("hit entries live").data;
                    self.pipeline.credit(self.tables.path_rules(e.path), bytes);
                    stale |= e.pending_verdict != 0;
                }
                self.stats.nic_hits += 1;
                if stale {
                    self.count_stale(key, outputs);
                }
                return true;
            }
        }
        false
    }

    /// The host part of [`Switch::process`] for a packet the NIC missed (already counted by
    /// [`Switch::process_nic`]): microflow cache, megaflow cache, slow path; returns the
    /// layer that decided. `now_ns` is when software handles it.
    pub fn process_host(
        &mut self,
        key: &FlowKey,
        bytes: u64,
        now_ns: u64,
        outputs: &mut Vec<Output>,
    ) -> Layer {
        outputs.clear();
        self.advance(now_ns);
        let hash = hash_key(key);
        if let Some(mf) = &mut self.microflow {
            if let Some(d) = mf.lookup(key, hash, &mut self.tables) {
                self.stats.microflow_hits += 1;
                self.forward(key, bytes, d, false, outputs);
                return Layer::Microflow;
            }
        }
        if let Some(mc) = &mut self.megaflow {
            if let Some(id) = mc.lookup(key, bytes, now_ns) {
                let e = &mc.space.entry(id).expect("hit entries live").data;
                let (d, stale) = (e.decision, e.pending_verdict != 0);
                // Only a current decision may seed the microflow cache.
                if let (Some(mf), false) = (&mut self.microflow, stale) {
                    mf.insert(key, hash, d, self.epoch, &mut self.tables);
                }
                self.stats.megaflow_hits += 1;
                self.forward(key, bytes, d, stale, outputs);
                return Layer::Megaflow;
            }
        }
        self.upcall(key, hash, bytes, now_ns, outputs);
        Layer::SlowPath
    }

    /// Runs a cached decision: its composed actions on the packet, its rules credited.
    fn forward(&mut self, key: &FlowKey, bytes: u64, d: Decision, stale: bool, outputs: &mut Vec<Output>) {
        execute(self.tables.actions.get(d.actions), key, outputs);
        self.pipeline.credit(self.tables.rules(d), bytes);
        if stale {
            self.count_stale(key, outputs);
        }
    }

    /// A packet an outdated entry forwarded: counted, and compared with the slow path.
    fn count_stale(&mut self, key: &FlowKey, outputs: &[Output]) {
        self.stats.stale += 1;
        self.pipeline.process(key, &mut self.tr);
        if self.tr.outputs != outputs {
            self.stats.stale_wrong += 1;
        }
    }

    fn upcall(&mut self, key: &FlowKey, hash: u64, bytes: u64, now_ns: u64, outputs: &mut Vec<Output>) {
        self.stats.upcalls += 1;
        self.pipeline.process(key, &mut self.tr);
        outputs.extend_from_slice(&self.tr.outputs);
        self.pipeline.credit(self.tr.rules(), bytes);
        if self.tr.ttl_exceeded > 0 {
            // A controller action: OVS keeps such flows in the slow path.
            self.stats.controller += 1;
            return;
        }
        if let (Some(gf), true) = (&mut self.gigaflow, self.nic_installs) {
            gf.install(&self.tr, &mut self.tables, now_ns);
        }
        if self.nic.is_none() && self.microflow.is_none() && self.megaflow.is_none() {
            return;
        }
        let d = self.tables.intern(&self.tr);
        let flow = CachedFlow { rep: *key, decision: d, pending_verdict: 0 };
        let m = self.tr.megaflow;
        if let Some(mc) = &mut self.megaflow {
            if mc.install(&m, flow, now_ns) {
                self.tables.acquire(d);
            }
        }
        if let (Some(nic), true) = (&mut self.nic, self.nic_installs) {
            if nic.stage.install(&m, 0, 0, flow, now_ns).is_ok() {
                self.tables.acquire(d);
            }
        }
        if let Some(mf) = &mut self.microflow {
            mf.insert(key, hash, d, self.epoch, &mut self.tables);
        }
        self.tables.release(d);
    }

    /// Applies a rule update at `now_ns`; returns the number of rules added, modified or
    /// deleted.
    pub fn apply_update(&mut self, command: Command, spec: &FlowSpec, now_ns: u64) -> usize {
        self.advance(now_ns);
        self.changed.clear();
        let n = update::apply(&mut self.pipeline, command, spec, &mut self.changed);
        self.stats.updates += 1;
        self.stats.rules_changed += n as u64;
        if self.changed.is_empty() {
            return n;
        }
        self.changed.sort_unstable();
        self.changed.dedup();
        self.epoch += 1;
        if let Some(mf) = &mut self.microflow {
            mf.on_update(&self.changed, self.epoch, &mut self.tables);
        }
        let started = std::time::Instant::now();
        self.revalidate(Place::Nic, now_ns);
        self.revalidate_gigaflow(now_ns);
        self.stats.nic_revalidation_ns += started.elapsed().as_nanos() as u64;
        self.revalidate(Place::Megaflow, now_ns);
        n
    }

    /// Re-translates every Gigaflow entry the update may affect (Gigaflow §4.3.1).
    fn revalidate_gigaflow(&mut self, now_ns: u64) {
        let stages = self.gigaflow.as_ref().map_or(0, |g| g.stages.len());
        for s in 0..stages {
            let mut affected = std::mem::take(&mut self.selected);
            affected.clear();
            if let Some(gf) = &self.gigaflow {
                let space = gf.stages[s].space();
                // An entry awaiting a verdict is re-translated again: the path that verdict would
                // give it is not on the entry yet, so this update's changes may touch it unseen.
                affected.extend(space.ids().filter(|&id| {
                    let e = space.entry(id).expect("listed entries live");
                    e.data.pending_verdict != 0 || gf.affected(&self.tables, e.tag, &e.data, &self.changed)
                }));
            }
            for &id in &affected {
                let Some(gf) = &mut self.gigaflow else { break };
                let data = gf.stages[s].space().entry(id).expect("listed entries live").data;
                let (old_path, pending) = (data.path, data.pending_verdict != 0);
                self.stats.retranslations += 1;
                let verdict = match gf.revalidate(&self.pipeline, s, id, &mut self.tables, &mut self.tr) {
                    // Unchanged and nothing pending: nothing to do. With a verdict pending, the
                    // keep is scheduled so that it supersedes that (possibly evicting) one.
                    Revalidation::Keep(path) if path == old_path && !pending => {
                        self.tables.paths.release(path);
                        continue;
                    }
                    Revalidation::Keep(path) => Verdict::Keep(path),
                    Revalidation::Evict => Verdict::Evict,
                };
                self.schedule_verdict(Place::Gigaflow(s as u8), id, verdict, now_ns);
            }
            self.selected = affected;
        }
    }

    /// Applies a verdict now, or after the revalidation delay (the entry is stale meanwhile).
    fn schedule_verdict(&mut self, place: Place, id: EntryId, verdict: Verdict, now_ns: u64) {
        if self.config.revalidation_delay_ns == 0 {
            self.apply_verdict(place, id, verdict);
            return;
        }
        self.verdict_seq += 1;
        let seq = self.verdict_seq;
        if let Some((pending, _)) = self.verdict_slot(place, id) {
            *pending = seq;
        }
        let due_ns = now_ns + self.config.revalidation_delay_ns;
        self.pending.push_back(Pending { due_ns, place, id, seq, verdict });
    }

    /// The pending-verdict mark and the rule path of an entry, wherever it lives.
    fn verdict_slot(&mut self, place: Place, id: EntryId) -> Option<(&mut u64, &mut ItemRef)> {
        match place {
            Place::Gigaflow(s) => {
                let e = self.gigaflow.as_mut()?.stages.get_mut(s as usize)?.parts_mut().0.entry_mut(id)?;
                Some((&mut e.data.pending_verdict, &mut e.data.path))
            }
            _ => {
                let e = table(&mut self.nic, &mut self.megaflow, place)?.0.entry_mut(id)?;
                Some((&mut e.data.pending_verdict, &mut e.data.decision.path))
            }
        }
    }

    /// Re-translates every entry of `place` whose path touches a changed outcome.
    fn revalidate(&mut self, place: Place, now_ns: u64) {
        let Some((space, _)) = table(&mut self.nic, &mut self.megaflow, place) else { return };
        let tables = &self.tables;
        let changed = &self.changed;
        let mut affected = std::mem::take(&mut self.selected);
        affected.clear();
        // An entry awaiting a verdict is re-translated again: the path that verdict would give
        // it is not on the entry yet, so this update's changes may touch it unseen.
        affected.extend(space.ids().filter(|&id| {
            let data = space.entry(id).expect("listed entries live").data;
            data.pending_verdict != 0
                || tables.paths.get(data.decision.path).iter().any(|o| changed.binary_search(o).is_ok())
        }));
        for &id in &affected {
            let Some((space, _)) = table(&mut self.nic, &mut self.megaflow, place) else { break };
            let flow = space.entry(id).expect("listed entries live").data;
            let old = space.matcher(id).expect("listed entries live");
            self.pipeline.process(&flow.rep, &mut self.tr);
            self.stats.retranslations += 1;
            let same_actions = self.tr.ttl_exceeded == 0
                && self.tables.actions.get(flow.decision.actions) == &self.tr.dp_actions[..];
            // Sound to keep only if the new translation needs no bit the entry ignores.
            let verdict = if same_actions && self.tr.megaflow.mask.is_subset_of(&old.mask) {
                let path = self.tables.intern_path(&self.tr);
                // With a verdict pending, the keep is scheduled to supersede it.
                if path == flow.decision.path && flow.pending_verdict == 0 {
                    self.tables.paths.release(path);
                    continue;
                }
                Verdict::Keep(path)
            } else {
                Verdict::Evict
            };
            self.schedule_verdict(place, id, verdict, now_ns);
        }
        self.selected = affected;
    }

    fn apply_verdict(&mut self, place: Place, id: EntryId, verdict: Verdict) {
        match verdict {
            Verdict::Evict => self.evict(place, id, |stats| stats.revalidated += 1),
            Verdict::Keep(path) => match self.verdict_slot(place, id) {
                Some((pending, p)) => {
                    *pending = 0;
                    let old = std::mem::replace(p, path);
                    self.tables.paths.release(old);
                }
                None => self.tables.paths.release(path),
            },
        }
    }

    /// Removes an entry, releasing what it held; `count` books it in its table's counters.
    fn evict(&mut self, place: Place, id: EntryId, count: impl FnOnce(&mut FlowTableStats)) {
        if let Place::Gigaflow(s) = place {
            let Some(gf) = &mut self.gigaflow else { return };
            let Some(stage) = gf.stages.get_mut(s as usize) else { return };
            let (space, stats) = stage.parts_mut();
            if let Some(e) = space.remove(id) {
                count(stats);
                gf.release(&e.data, &mut self.tables);
            }
            return;
        }
        let Some((space, stats)) = table(&mut self.nic, &mut self.megaflow, place) else { return };
        if let Some(e) = space.remove(id) {
            self.tables.release(e.data.decision);
            count(stats);
        }
    }

    /// Brings the revalidator and the idle sweeper up to `now_ns`.
    fn advance(&mut self, now_ns: u64) {
        while let Some(p) = self.pending.front().copied() {
            if p.due_ns > now_ns {
                break;
            }
            self.pending.pop_front();
            let current = self.verdict_slot(p.place, p.id).filter(|(pending, _)| **pending == p.seq);
            match (current, p.verdict) {
                (Some((pending, _)), _) => {
                    *pending = 0;
                    self.apply_verdict(p.place, p.id, p.verdict);
                }
                // Superseded by a newer verdict, or the entry is gone.
                (None, Verdict::Keep(path)) => self.tables.paths.release(path),
                (None, Verdict::Evict) => {}
            }
        }
        if now_ns >= self.next_sweep_ns {
            self.next_sweep_ns = now_ns + SWEEP_INTERVAL_NS.min(self.config.max_idle_ns.max(1));
            if self.config.max_idle_ns > 0 {
                let stages = self.gigaflow.as_ref().map_or(0, |g| g.stages.len());
                for place in [Place::Nic, Place::Megaflow]
                    .into_iter()
                    .chain((0..stages).map(|s| Place::Gigaflow(s as u8)))
                {
                    self.expire(place, now_ns);
                }
            }
        }
    }

    fn expire(&mut self, place: Place, now_ns: u64) {
        let max_idle = self.config.max_idle_ns;
        let idle =
            |stats: &crate::tuple_space::EntryStats| now_ns.saturating_sub(stats.last_hit_ns) > max_idle;
        let mut selected = std::mem::take(&mut self.selected);
        selected.clear();
        match place {
            Place::Gigaflow(s) => {
                if let Some(stage) = self.gigaflow.as_ref().and_then(|g| g.stages.get(s as usize)) {
                    let space = stage.space();
                    selected.extend(
                        space.ids().filter(|&id| idle(&space.entry(id).expect("listed entries live").stats)),
                    );
                }
            }
            _ => {
                if let Some((space, _)) = table(&mut self.nic, &mut self.megaflow, place) {
                    selected.extend(
                        space.ids().filter(|&id| idle(&space.entry(id).expect("listed entries live").stats)),
                    );
                }
            }
        }
        for &id in &selected {
            self.evict(place, id, |stats| stats.expired += 1);
        }
        self.selected = selected;
    }
}

fn table<'a>(
    nic: &'a mut Option<MegaflowOffload>,
    megaflow: &'a mut Option<MegaflowCache>,
    place: Place,
) -> Option<(&'a mut TupleSpace<CachedFlow>, &'a mut FlowTableStats)> {
    match place {
        Place::Nic => nic.as_mut().map(|n| n.stage.parts_mut()),
        Place::Megaflow => megaflow.as_mut().map(|m| (&mut m.space, &mut m.stats)),
        Place::Gigaflow(_) => None,
    }
}
