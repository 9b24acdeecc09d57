//! Offload policies: which flows the NIC holds, and when they move.
//!
//! A policy sees what a real one on a SmartNIC host sees — sampled headers of
//! hardware-forwarded packets, every packet software forwards, each core's ring occupancy at
//! every arrival, the hardware counters it polls — and acts through [`NicControl`]: installs
//! and evictions by flow, queued and applied as the NIC's update budget allows, counter reads
//! at the NIC's read rate. What it computes costs host time: every hook returns or charges
//! the work it did, and the simulator runs that work on the same cores that forward packets,
//! as Elixir counts cores (§5.3).
//!
//! Policies: [`upcall`] (psf, offload-all, gigaflow: install on upcalls, measure nothing),
//! [`elixir`] (sampled large-flow replacement plus queue-triggered bursty offload), and
//! Elixir's baselines on the same exact-match table: [`tfo`] (multi-time-scale heavy
//! hitters with limited churn, a reconstruction), [`lfp`] (first-packet prediction with a
//! C4.5 tree, [`c45`], and periodic replacement) and [`rebalance`] (Open vSwitch's offload-rebalance).

pub mod budget;
pub mod c45;
pub mod elixir;
pub mod lfp;
pub mod params;
pub mod rebalance;
pub mod tfo;
pub mod upcall;

use serde::Serialize;

use crate::cost_model::CostModel;
use crate::invalid_param::{CarriesInvalidParam, InvalidParam};
use crate::measure::{FlowId, KeySpec};
use crate::nic::{NicConfig, NicScheme};
use crate::packet::FlowKey;
use crate::switch::Switch;
use crate::tuple_space::EntryId;

pub use budget::{NicBudget, NicUpdates};
pub use params::{Param, ParamKind, ParamValue, PolicyParams, PolicyRegistration};

/// Every policy the fronts offer, in the order they list them: one line per policy.
pub const POLICIES: &[&PolicyRegistration] = &[
    &upcall::PSF,
    &upcall::OFFLOAD_ALL,
    &upcall::GIGAFLOW,
    &elixir::REGISTRATION,
    &tfo::REGISTRATION,
    &lfp::REGISTRATION,
    &rebalance::REGISTRATION,
];

/// The registered policy called `name`.
pub fn registration(name: &str) -> Option<&'static PolicyRegistration> {
    POLICIES.iter().copied().find(|r| r.name == name)
}

/// Why a policy cannot run as configured.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PolicyConfigError {
    /// A parameter out of range, named as registered.
    #[error(transparent)]
    Param(#[from] InvalidParam),
    /// The configuration as a whole cannot work.
    #[error("{0}")]
    Invalid(String),
    /// The sketch could not be sized.
    #[error(transparent)]
    Sketch(#[from] crate::measure::ConfigError),
}

impl PolicyConfigError {
    /// `param` is out of range: `message` says how.
    pub(crate) fn param(param: &'static str, message: impl Into<String>) -> PolicyConfigError {
        PolicyConfigError::Param(InvalidParam::new(param, message))
    }
}

impl CarriesInvalidParam for PolicyConfigError {
    fn invalid_param(&self) -> Option<InvalidParam> {
        match self {
            PolicyConfigError::Param(p) => Some(p.clone()),
            PolicyConfigError::Sketch(e) => e.invalid_param(),
            PolicyConfigError::Invalid(_) => None,
        }
    }
}

/// The machine a policy runs on, as far as a policy needs to know it.
#[derive(Clone, Copy, Debug, Default)]
pub struct PolicyMachine {
    /// Each core's receive ring, packets.
    pub ring: usize,
    /// The NIC's update and counter-read limits.
    pub limits: NicUpdates,
    /// What the host's work costs (a policy's own work, such as identifying a flow, takes
    /// host time).
    pub costs: CostModel,
    /// Whether one flow's packets reach several cores (so a ring's overflow does not say
    /// which flow filled it).
    pub spreads_flows: bool,
}

/// A policy's configuration, which names, checks, prepares and builds the policy (as
/// quinn-proto's `ControllerFactory`): nothing outside the policy's own file branches on
/// which policy it is. Experiments hold it as a [`PolicyConfig`].
pub trait PolicyFactory: std::fmt::Debug + Send + Sync {
    /// Name in reports.
    fn name(&self) -> &'static str;
    /// Share of NIC-forwarded packets the policy has sampled to the host (0: none).
    fn sample_rate(&self) -> f64 {
        0.0
    }
    /// Checks the parameters on `machine`.
    fn check(&self, machine: &PolicyMachine) -> Result<(), PolicyConfigError>;
    /// What the policy learns from the input before the run (LFP trains its tree), if it
    /// learns anything.
    fn trainer(&self) -> Option<Box<dyn PolicyTrainer>> {
        None
    }
    /// The policy, on `machine`.
    fn build(&self, machine: &PolicyMachine) -> Result<Box<dyn OffloadPolicy>, PolicyConfigError>;
    /// Why `run`'s figures may mean less than they seem for this policy (a run shorter than
    /// its windows, packets it learned from measured as if new), one sentence each; other
    /// parameters named between backticks, as in [`crate::invalid_param::InvalidParam`].
    fn caveats(&self, _run: &RunSpan) -> Vec<String> {
        Vec::new()
    }
}

/// How long a simulation ran, for a policy to say whether its figures can mean anything.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunSpan {
    /// Simulated time from the first arrival to the last, warm-up included, ns.
    pub simulated_ns: u64,
    /// The same stretch of the input as recorded (before any rescaling to a rate), ns.
    pub input_ns: u64,
    /// The warm-up, in the input's time as recorded, ns.
    pub warmup_input_ns: u64,
}

/// What a policy's configuration is held as: shared by every run of a search.
pub type PolicyConfig = std::sync::Arc<dyn PolicyFactory>;

/// A policy learning from the input before the run: it sees the packets recorded before
/// [`PolicyTrainer::until_ns`] (timestamps as recorded), then gives the configuration of the
/// trained policy.
pub trait PolicyTrainer {
    /// Packets recorded before this time are shown to it, ns.
    fn until_ns(&self) -> u64;
    /// One packet of `bytes` bytes.
    fn observe(&mut self, key: &FlowKey, bytes: u32);
    /// The configuration of the trained policy.
    fn finish(self: Box<Self>) -> Result<PolicyConfig, PolicyConfigError>;
}

/// A packet a policy sees: forwarded by software, or a sampled header of one the NIC forwarded.
#[derive(Clone, Copy, Debug)]
pub struct Seen<'a> {
    /// Its headers.
    pub key: &'a FlowKey,
    /// Its flow under the policy's key, if it has one (`None`: the packet lacks a key field).
    pub flow: Option<FlowId>,
    /// Its flow's number in the input, when the input numbers flows (a `.hyf` trace,
    /// generated gateway traffic; see [`crate::nic::Arrival::flow`]): every packet of one
    /// number has one key, so per-flow state can be found by it in an array, not by hashing
    /// `flow`.
    pub number: Option<u32>,
    /// Bytes on the wire.
    pub bytes: u32,
    /// The core handling it (receive-side scaling keeps a flow on one core).
    pub core: usize,
    /// When software handles it, ns.
    pub now_ns: u64,
}

/// What a policy did over a run (key names are an interface: `hyflow sim --json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PolicyReport {
    /// Host work the policy charged (measurement, sorting, installs), ms of one core.
    pub work_ms: f64,
    /// NIC installs the policy made (beyond those of upcalls).
    pub installs: u64,
    /// Installs the NIC refused when they came to be applied (area full, already held,
    /// controller flow).
    pub installs_refused: u64,
    /// Entries the policy removed.
    pub removals: u64,
    /// Hardware counter values read.
    pub counter_reads: u64,
    /// Longest the queue of changes waiting for the update budget grew.
    pub update_queue_peak: usize,
    /// Figures of this policy's own (Elixir's `replacements`, `burst_triggers`, ...), among
    /// the report's keys in `--json`; each policy documents its own.
    #[serde(flatten)]
    pub figures: PolicyFigures,
    /// The policy's own account of those figures, one line for a summary (as the
    /// `get_debug` of Open vSwitch's offload providers): what a front prints without knowing
    /// which policy ran.
    #[serde(skip)]
    pub summary: Option<String>,
}

impl PolicyReport {
    /// The policy's own report with what the budget saw of its changes and `work_ns` of host
    /// work in all.
    pub fn with_budget(self, b: budget::BudgetStats, work_ns: f64) -> PolicyReport {
        PolicyReport {
            work_ms: (work_ns / 1e4).round() / 100.0,
            installs: b.installs,
            installs_refused: b.installs_refused,
            removals: b.removals,
            counter_reads: b.counter_reads,
            update_queue_peak: b.queue_peak,
            ..self
        }
    }
}

/// Counts a policy reports beyond the common ones, by name, in the order it gives them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyFigures(pub Vec<(&'static str, u64)>);

impl Serialize for PolicyFigures {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

/// What the NIC holds and when it changes (`Send`: the live switch runs it behind its engine
/// lock, on whichever thread holds it). The simulator calls [`OffloadPolicy::tick`] at
/// every arrival, [`OffloadPolicy::on_ring`] for every host-bound one, and
/// [`OffloadPolicy::on_software`] / [`OffloadPolicy::on_sample`] when a core handles a packet
/// or a sampled header; the work the hooks return is charged to that core.
pub trait OffloadPolicy: Send {
    /// Name in reports.
    fn name(&self) -> &'static str;
    /// The NIC the policy manages (`None`: the NIC forwards nothing).
    fn nic(&self) -> Option<NicConfig>;
    /// The fields the policy identifies flows by (the exact-match table's key); `None` if it
    /// does not look at flows.
    fn flow_key(&self) -> Option<KeySpec> {
        None
    }
    /// Share of NIC-forwarded packets whose headers the NIC samples to the host for this
    /// policy.
    fn sample_rate(&self) -> f64 {
        0.0
    }
    /// Whether an upcall handled now may install its translation in the NIC (OVS offload).
    fn install_on_upcall(&mut self, _now_ns: u64) -> bool {
        false
    }
    /// Host work an upcall adds when it offers its translation to the NIC, ns.
    fn install_ns(&self, _costs: &CostModel) -> f64 {
        0.0
    }
    /// The ring occupancy the policy reacts to (a queue threshold), if any: the simulator
    /// logs its crossings, to tell when bursts were detected.
    fn ring_watch(&self) -> Option<u64> {
        None
    }
    /// Time passes: called at every arrival, before the NIC looks the packet up.
    fn tick(&mut self, _nic: &mut NicControl) {}
    /// A host-bound packet (or sampled header) joined `core`'s ring, which now holds
    /// `occupancy` packets.
    fn on_ring(&mut self, _core: usize, _occupancy: u64, _nic: &mut NicControl) {}
    /// Software forwarded a packet: the policy's per-packet work, ns.
    fn on_software(&mut self, _pkt: Seen, _nic: &mut NicControl) -> f64 {
        0.0
    }
    /// A sampled header of a NIC-forwarded packet reached software: the policy's work, ns
    /// (the header's own sketch update, `sample_ns`, is charged apart).
    fn on_sample(&mut self, _pkt: Seen, _nic: &mut NicControl) -> f64 {
        0.0
    }
    /// What it did.
    fn report(&self) -> PolicyReport {
        PolicyReport::default()
    }
    /// Zeroes the counts its report gives (a warm-up ended: reports cover what follows),
    /// keeping every state it decides on.
    fn restart_counts(&mut self);
}

impl<T: OffloadPolicy + ?Sized> OffloadPolicy for Box<T> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn nic(&self) -> Option<NicConfig> {
        (**self).nic()
    }
    fn flow_key(&self) -> Option<KeySpec> {
        (**self).flow_key()
    }
    fn sample_rate(&self) -> f64 {
        (**self).sample_rate()
    }
    fn install_on_upcall(&mut self, now_ns: u64) -> bool {
        (**self).install_on_upcall(now_ns)
    }
    fn install_ns(&self, costs: &CostModel) -> f64 {
        (**self).install_ns(costs)
    }
    fn ring_watch(&self) -> Option<u64> {
        (**self).ring_watch()
    }
    #[inline]
    fn tick(&mut self, nic: &mut NicControl) {
        (**self).tick(nic)
    }
    fn on_ring(&mut self, core: usize, occupancy: u64, nic: &mut NicControl) {
        (**self).on_ring(core, occupancy, nic)
    }
    fn on_software(&mut self, pkt: Seen, nic: &mut NicControl) -> f64 {
        (**self).on_software(pkt, nic)
    }
    fn on_sample(&mut self, pkt: Seen, nic: &mut NicControl) -> f64 {
        (**self).on_sample(pkt, nic)
    }
    fn report(&self) -> PolicyReport {
        (**self).report()
    }
    fn restart_counts(&mut self) {
        (**self).restart_counts()
    }
}

/// A periodic deadline over trace time: the first falls one period after the first time it
/// is asked about; missed ones are skipped, not replayed.
#[derive(Clone, Copy, Debug)]
pub struct Every {
    period_ns: u64,
    next_ns: Option<u64>,
}

impl Every {
    /// Every `period_ns` (at least 1).
    pub fn new(period_ns: u64) -> Every {
        Every { period_ns: period_ns.max(1), next_ns: None }
    }

    /// Whether a deadline has passed at `now_ns` (then the next is set after `now_ns`).
    #[inline]
    pub fn due(&mut self, now_ns: u64) -> bool {
        let next = *self.next_ns.get_or_insert(now_ns + self.period_ns);
        if now_ns < next {
            return false;
        }
        self.next_ns = Some(next + (now_ns - next) / self.period_ns * self.period_ns + self.period_ns);
        true
    }
}

/// A real NIC in front of the engine (the live XDP tier), whose entries count the frames
/// they forward on their own: the engine's copies of those counts are only as fresh as the
/// last read, so a policy's poll reads through to it.
pub trait HardwareCounters {
    /// Reads the NIC's counters of the engine's NIC entries `entries` ((table, id)) and
    /// credits what they counted since their last read to the engine.
    fn refresh(&mut self, switch: &mut Switch, entries: &[(u8, EntryId)]);
}

/// A policy's hands on the NIC at one instant: installs and evictions by flow (queued behind
/// the update budget), counter polls (within the read rate), background work.
pub struct NicControl<'a> {
    switch: &'a mut Switch,
    budget: &'a mut NicBudget,
    costs: &'a CostModel,
    now_ns: u64,
    /// The real NIC whose counters a poll reads, if there is one.
    hardware: Option<&'a mut dyn HardwareCounters>,
}

impl<'a> NicControl<'a> {
    /// Control of `switch`'s NIC at `now_ns`, within `budget`.
    pub fn new(switch: &'a mut Switch, budget: &'a mut NicBudget, costs: &'a CostModel, now_ns: u64) -> Self {
        NicControl { switch, budget, costs, now_ns, hardware: None }
    }

    /// Control of a switch whose NIC entries a real NIC carries out: polls read their
    /// counters from `hardware`.
    pub fn with_hardware(mut self, hardware: &'a mut dyn HardwareCounters) -> Self {
        self.hardware = Some(hardware);
        self
    }

    /// Now, ns.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// The cost model (to price the policy's own work).
    pub fn costs(&self) -> &CostModel {
        self.costs
    }

    /// The switch (read-only: the NIC changes through this control).
    pub fn switch(&self) -> &Switch {
        self.switch
    }

    fn nic(&self) -> Option<&dyn NicScheme> {
        self.switch.nic()
    }

    /// Whether the NIC holds `flow`, or an install of it is queued.
    pub fn holds(&self, flow: FlowId) -> bool {
        self.budget.install_queued(flow) || self.switch.nic_find(flow).is_some()
    }

    /// The area holding `flow`, or the one its waiting install is for.
    pub(crate) fn area_of(&self, flow: FlowId) -> Option<u8> {
        self.switch.nic_find(flow).map(|(area, _)| area).or_else(|| self.budget.queued_area(flow))
    }

    /// Entries the NIC holds in `area`.
    pub(crate) fn area_len(&self, area: u8) -> usize {
        self.nic().map_or(0, |n| n.area_len(area))
    }

    /// Capacity of `area`.
    pub(crate) fn area_capacity(&self, area: u8) -> usize {
        self.nic().map_or(0, |n| n.area_capacity(area))
    }

    /// Whether `area` can take another install: entries held plus installs queued for it
    /// below its capacity.
    pub(crate) fn has_room(&self, area: u8) -> bool {
        self.area_len(area) + self.budget.installs_queued(area) < self.area_capacity(area)
    }

    /// Installs and removals waiting for the update budget.
    pub fn queued(&self) -> usize {
        self.budget.queued()
    }

    /// Urgent installs and removals waiting for the update budget.
    pub fn queued_urgent(&self) -> usize {
        self.budget.queued_urgent()
    }

    /// Queues an install of `key`'s flow (`flow`) into `area`; false if the NIC holds it or
    /// an install is already queued.
    pub fn offload(&mut self, key: &FlowKey, flow: FlowId, area: u8) -> bool {
        self.queue_offload(key, flow, area, false)
    }

    /// Like [`offload`](Self::offload), ahead of every change not urgent.
    pub(crate) fn offload_urgent(&mut self, key: &FlowKey, flow: FlowId, area: u8) -> bool {
        self.queue_offload(key, flow, area, true)
    }

    fn queue_offload(&mut self, key: &FlowKey, flow: FlowId, area: u8, urgent: bool) -> bool {
        if self.holds(flow) {
            return false;
        }
        self.budget.queue_install(*key, flow, area, urgent);
        true
    }

    /// Queues the removal of `flow`'s entry (or cancels its waiting install).
    pub fn evict(&mut self, flow: FlowId) {
        self.budget.queue_removal(flow, false);
    }

    /// Like [`evict`](Self::evict), ahead of every change not urgent.
    pub(crate) fn evict_urgent(&mut self, flow: FlowId) {
        self.budget.queue_removal(flow, true);
    }

    /// Reads the hardware counters of `area`'s entries, as many as the read rate allows now,
    /// resuming where the last poll of the area stopped: (flow, packets since install).
    pub(crate) fn poll(&mut self, area: u8, out: &mut Vec<(FlowId, u64)>) {
        out.clear();
        let Some(nic) = self.switch.nic() else { return };
        self.budget.read(area, self.now_ns, |all| nic.area_flows(area, all), out);
        if let Some(hardware) = &mut self.hardware {
            // The entries read are the ones the read budget chose; their counts are the NIC's.
            let entries: Vec<(u8, EntryId)> =
                out.iter().filter_map(|&(f, _)| self.switch.nic_find(f)).collect();
            hardware.refresh(self.switch, &entries);
            let Some(nic) = self.switch.nic() else { return };
            let mut now: Vec<(FlowId, u64)> = Vec::with_capacity(nic.area_len(area));
            nic.area_flows(area, &mut now);
            let now: hashbrown::HashMap<FlowId, u64> = now.into_iter().collect();
            for (flow, packets) in out.iter_mut() {
                *packets = now.get(flow).copied().unwrap_or(*packets);
            }
        }
    }

    /// A periodic re-choice of `area`'s flows by score (TFO's bins, LFP's replacement
    /// windows): of the `scored` flows, those the NIC does not hold, best first (ties by flow
    /// id), fill the free entries, then each replaces the weakest held flow while
    /// `replaces(its score, the held flow's)`, at most `max_swaps` swaps. `key_of` gives a
    /// flow's packet to install it with. Returns (fills, swaps).
    pub(crate) fn rechoose(
        &mut self,
        area: u8,
        scored: impl Iterator<Item = (FlowId, f64)>,
        key_of: impl Fn(FlowId) -> FlowKey,
        max_swaps: usize,
        replaces: impl Fn(f64, f64) -> bool,
    ) -> (u64, u64) {
        let mut held: Vec<(f64, FlowId)> = Vec::new();
        let mut waiting: Vec<(f64, FlowId)> = Vec::new();
        for (f, score) in scored {
            if self.holds(f) {
                held.push((score, f))
            } else {
                waiting.push((score, f))
            }
        }
        waiting.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        held.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut weakest = held.iter();
        let (mut fills, mut swaps) = (0u64, 0usize);
        for &(score, flow) in &waiting {
            let key = key_of(flow);
            if self.has_room(area) {
                fills += self.offload(&key, flow, area) as u64;
                continue;
            }
            if swaps >= max_swaps {
                break;
            }
            match weakest.next() {
                Some(&(held_score, victim)) if replaces(score, held_score) => {
                    self.evict(victim);
                    self.offload(&key, flow, area);
                    swaps += 1;
                }
                _ => break,
            }
        }
        (fills, swaps as u64)
    }

    /// Charges `ns` of host work the policy did outside any packet (sorting, rebuilding).
    pub fn charge(&mut self, ns: f64) {
        self.budget.charge(ns);
    }

    /// Applies queued installs and removals as far as the update budget allows now.
    pub fn apply(&mut self) {
        self.budget.apply(self.switch, self.costs, self.now_ns);
    }

    /// Like [`apply`](Self::apply), asking `more` before each change after the first (see
    /// [`NicBudget::apply_while`]).
    pub fn apply_while(&mut self, more: &mut dyn FnMut() -> bool) {
        self.budget.apply_while(self.switch, self.costs, self.now_ns, more);
    }
}
