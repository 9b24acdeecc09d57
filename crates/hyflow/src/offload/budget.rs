//! The NIC's limits as a policy meets them: table updates per second and their latency,
//! counter reads per second. Installs and removals a policy asks for wait in FIFO queues and
//! are applied as update tokens come — urgent changes (an event-driven process's, which runs
//! beside a periodic one and must not wait for its thousands of changes, Elixir §3.3) before
//! the rest; counter polls read what the read tokens allow.

use std::collections::VecDeque;

use hashbrown::{HashMap, HashSet};

use crate::cost_model::CostModel;
use crate::measure::FlowId;
use crate::packet::FlowKey;
use crate::switch::Switch;

/// Limits on the NIC's table updates (Elixir §2.2: a P4 switch takes about 2,000 updates/s;
/// §5.2: a ConnectX-5 applies a replacement in about 67 µs) and on reading its per-entry
/// counters (about 20,000 entries/s on a ConnectX-5).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NicUpdates {
    /// Table updates per second (0 = unlimited).
    pub per_second: f64,
    /// Time from an install to the first packet the entry forwards, ns.
    pub latency_ns: u64,
    /// Entry counters software can read per second (0 = unlimited).
    pub counter_reads_per_second: f64,
}

impl Default for NicUpdates {
    fn default() -> Self {
        NicUpdates { per_second: 2_000.0, latency_ns: 67_000, counter_reads_per_second: 20_000.0 }
    }
}

/// A token bucket over simulated time: `per_second` operations, bursts up to one second's.
#[derive(Clone, Copy, Debug)]
pub struct RateLimit {
    per_second: f64,
    tokens: f64,
    filled_ns: u64,
}

impl RateLimit {
    /// A bucket refilling at `per_second` (≤ 0: unlimited), holding one token at first.
    pub fn new(per_second: f64) -> RateLimit {
        RateLimit { per_second, tokens: 1.0, filled_ns: 0 }
    }

    fn unlimited(&self) -> bool {
        self.per_second <= 0.0
    }

    /// Tokens available at `now_ns` (whole operations allowed).
    pub fn available(&mut self, now_ns: u64) -> u64 {
        if self.unlimited() {
            return u64::MAX;
        }
        let dt = now_ns.saturating_sub(self.filled_ns) as f64 / 1e9;
        self.tokens = (self.tokens + dt * self.per_second).min(self.per_second.max(1.0));
        self.filled_ns = self.filled_ns.max(now_ns);
        self.tokens.max(0.0) as u64
    }

    /// Spends `n` operations (the bucket may go into debt: an upcall's installs are atomic).
    pub fn spend(&mut self, n: u64) {
        if !self.unlimited() {
            self.tokens -= n as f64;
        }
    }
}

/// A queued change to the NIC. Removals are rarer than installs and the queue short, so the
/// key stays inline (no allocation per install) at the cost of removals' slack.
#[derive(Clone, Copy, Debug)]
#[allow(clippy::large_enum_variant)]
enum Op {
    Install { key: FlowKey, flow: FlowId, area: u8 },
    Remove { flow: FlowId },
}

/// What happened to the changes policies asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BudgetStats {
    /// Installs applied.
    pub installs: u64,
    /// Installs the NIC refused when applied (area full, controller flow, already held).
    pub installs_refused: u64,
    /// Waiting installs cancelled by an eviction of the same flow.
    pub installs_cancelled: u64,
    /// Removals applied.
    pub removals: u64,
    /// Counter values read.
    pub counter_reads: u64,
    /// Longest the queue grew.
    pub queue_peak: usize,
}

/// The update and read budgets, the queue of changes, and the host work policies charged.
pub struct NicBudget {
    /// Updates: shared by upcall installs and policy changes.
    pub updates: RateLimit,
    reads: RateLimit,
    /// Urgent changes, applied before any of `queue`.
    urgent: VecDeque<Op>,
    queue: VecDeque<Op>,
    /// Flows with an install waiting, and its area.
    queued_installs: HashMap<FlowId, u8>,
    /// Flows whose waiting install was cancelled by an eviction before it was applied.
    cancelled: HashSet<FlowId>,
    /// Installs waiting, per area.
    queued_per_area: [usize; crate::nic::exact_match::MAX_AREAS],
    /// Where the next poll of each area resumes (slot order).
    poll_cursor: [usize; crate::nic::exact_match::MAX_AREAS],
    scratch: Vec<(FlowId, u64)>,
    /// Host work charged and not yet handed to the simulator, ns.
    work_ns: f64,
    /// All host work charged, ns.
    work_total_ns: f64,
    stats: BudgetStats,
}

impl NicBudget {
    /// Budgets of `limits`.
    pub fn new(limits: NicUpdates) -> NicBudget {
        NicBudget {
            updates: RateLimit::new(limits.per_second),
            reads: RateLimit::new(limits.counter_reads_per_second),
            urgent: VecDeque::new(),
            queue: VecDeque::new(),
            queued_installs: HashMap::new(),
            cancelled: HashSet::new(),
            queued_per_area: [0; crate::nic::exact_match::MAX_AREAS],
            poll_cursor: [0; crate::nic::exact_match::MAX_AREAS],
            scratch: Vec::new(),
            work_ns: 0.0,
            work_total_ns: 0.0,
            stats: BudgetStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> BudgetStats {
        self.stats
    }

    /// Zeroes the counters and the work total (a warm-up ended), the queue's peak restarting
    /// from what waits now; what waits stays queued.
    pub(crate) fn restart_counts(&mut self) {
        self.stats = BudgetStats { queue_peak: self.queued(), ..BudgetStats::default() };
        self.work_total_ns = 0.0;
    }

    /// Changes waiting.
    pub fn queued(&self) -> usize {
        self.urgent.len() + self.queue.len()
    }

    /// Urgent changes waiting.
    pub fn queued_urgent(&self) -> usize {
        self.urgent.len()
    }

    fn push(&mut self, op: Op, urgent: bool) {
        if urgent {
            self.urgent.push_back(op);
        } else {
            self.queue.push_back(op);
        }
        self.stats.queue_peak = self.stats.queue_peak.max(self.queued());
    }

    /// The area an install of `flow` waits for, if one does.
    pub(crate) fn queued_area(&self, flow: FlowId) -> Option<u8> {
        self.queued_installs.get(&flow).copied()
    }

    /// Whether an install of `flow` waits in the queue.
    pub(crate) fn install_queued(&self, flow: FlowId) -> bool {
        self.queued_installs.contains_key(&flow)
    }

    /// Installs into `area` waiting in the queue.
    pub(crate) fn installs_queued(&self, area: u8) -> usize {
        self.queued_per_area.get(area as usize).copied().unwrap_or(0)
    }

    pub(super) fn queue_install(&mut self, key: FlowKey, flow: FlowId, area: u8, urgent: bool) {
        self.queued_installs.insert(flow, area);
        if let Some(n) = self.queued_per_area.get_mut(area as usize) {
            *n += 1;
        }
        self.push(Op::Install { key, flow, area }, urgent);
    }

    /// Evicting a flow whose install still waits cancels the install instead (the policy
    /// changed its mind before the NIC saw it).
    pub(super) fn queue_removal(&mut self, flow: FlowId, urgent: bool) {
        if let Some(area) = self.queued_installs.remove(&flow) {
            if let Some(n) = self.queued_per_area.get_mut(area as usize) {
                *n -= 1;
            }
            self.cancelled.insert(flow);
            self.stats.installs_cancelled += 1;
            return;
        }
        self.push(Op::Remove { flow }, urgent);
    }

    /// Charges host work, ns.
    pub fn charge(&mut self, ns: f64) {
        self.work_ns += ns;
        self.work_total_ns += ns;
    }

    /// Takes the work charged since the last call, whole ns (the fraction carries over).
    /// Asked after every packet: most have charged nothing, and return before the `floor`
    /// (a libm call).
    #[inline]
    pub(crate) fn take_work(&mut self) -> u64 {
        if self.work_ns < 1.0 {
            return 0;
        }
        let whole = self.work_ns.floor();
        self.work_ns -= whole;
        whole as u64
    }

    /// All host work charged so far, ns.
    pub(crate) fn work_total_ns(&self) -> f64 {
        self.work_total_ns
    }

    /// Applies queued changes while update tokens last at `now_ns`. An install costs the host
    /// a slow-path translation (`upcall_ns`: the policy asks for a flow, software computes
    /// the entry) and the NIC's write (`nic_write_ns`); a removal the write.
    #[inline]
    pub fn apply(&mut self, switch: &mut Switch, costs: &CostModel, now_ns: u64) {
        self.apply_while(switch, costs, now_ns, &mut || true);
    }

    /// Like [`apply`](Self::apply), but asks `more` before each change after the first and
    /// stops when it says no: a live switch bounds the translations one hold of its engine
    /// makes (a policy's replacement may queue thousands), as `sim` runs that work in
    /// slices beside the packets; what is left waits for the next call.
    #[inline]
    pub fn apply_while(
        &mut self,
        switch: &mut Switch,
        costs: &CostModel,
        now_ns: u64,
        more: &mut dyn FnMut() -> bool,
    ) {
        if !self.urgent.is_empty() || !self.queue.is_empty() {
            self.apply_queued(switch, costs, now_ns, more);
        }
    }

    fn apply_queued(
        &mut self,
        switch: &mut Switch,
        costs: &CostModel,
        now_ns: u64,
        more: &mut dyn FnMut() -> bool,
    ) {
        let mut tokens = self.updates.available(now_ns);
        let mut first = true;
        while tokens > 0 && (std::mem::take(&mut first) || more()) {
            let Some(op) = self.urgent.pop_front().or_else(|| self.queue.pop_front()) else { break };
            match op {
                Op::Install { key, flow, area } => {
                    if self.cancelled.remove(&flow) {
                        continue;
                    }
                    self.queued_installs.remove(&flow);
                    if let Some(n) = self.queued_per_area.get_mut(area as usize) {
                        *n -= 1;
                    }
                    // A full area refuses before software translates anything.
                    let full = switch.nic().is_some_and(|n| n.area_len(area) >= n.area_capacity(area));
                    if full {
                        self.stats.installs_refused += 1;
                        continue;
                    }
                    self.charge(costs.upcall_ns);
                    match switch.nic_offload(&key, area, now_ns) {
                        Ok(_) => {
                            self.stats.installs += 1;
                            self.charge(costs.nic_write_ns);
                        }
                        Err(_) => {
                            self.stats.installs_refused += 1;
                            continue;
                        }
                    }
                }
                Op::Remove { flow } => {
                    let Some((table, id)) = switch.nic_find(flow) else { continue };
                    switch.nic_remove(table, id, now_ns);
                    self.stats.removals += 1;
                    self.charge(costs.nic_write_ns);
                }
            }
            self.updates.spend(1);
            tokens -= 1;
        }
    }

    /// Reads counters of one area at `now_ns`: `fill` appends them all (flow, packets) in slot
    /// order; `out` gets as many as the read tokens allow, round-robin from the last stop.
    pub(super) fn read(
        &mut self,
        area: u8,
        now_ns: u64,
        fill: impl FnOnce(&mut Vec<(FlowId, u64)>),
        out: &mut Vec<(FlowId, u64)>,
    ) {
        self.scratch.clear();
        fill(&mut self.scratch);
        let all = &self.scratch;
        if all.is_empty() {
            return;
        }
        let budget = self.reads.available(now_ns).min(all.len() as u64) as usize;
        let cursor = &mut self.poll_cursor[area as usize];
        let start = *cursor % all.len();
        out.extend((0..budget).map(|k| all[(start + k) % all.len()]));
        *cursor = start + budget;
        self.reads.spend(budget as u64);
        self.stats.counter_reads += budget as u64;
    }
}
