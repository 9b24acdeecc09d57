//! The offload policy running live (`hyflow switch --nic xdp --policy NAME`): the same
//! [`OffloadPolicy`] `sim` drives over trace time, driven here by the live switch's clock,
//! its rings and the NIC tier's counters.
//!
//! What the policy sees, and where it comes from:
//! - **time** — the engine's clock: [`OffloadPolicy::tick`] at every batch the cores decide
//!   and every turn of the main thread, so that periodic work (Elixir's replacement window,
//!   a rebalance round) runs with or without software traffic;
//! - **software packets** — every frame the NIC tier missed, after the engine decided its
//!   batch ([`OffloadPolicy::on_software`]), and whether an upcall may install
//!   ([`OffloadPolicy::install_on_upcall`], within the update budget);
//! - **ring occupancy** — the AF_XDP receive ring's frames waiting when a core takes a
//!   batch ([`OffloadPolicy::on_ring`]): Elixir's queue trigger fires on the real ring;
//! - **sampled headers** — the XDP program's ring buffer of sampled hits (headers only),
//!   drained by the main thread ([`OffloadPolicy::on_sample`]);
//! - **hardware counters** — read from the kernel when the policy polls
//!   ([`hyflow::offload::HardwareCounters`]), within the read budget.
//!
//! What it does goes through [`NicControl`] and the update budget into the engine's NIC
//! scheme, whose journal the NIC tier mirrors into the kernel after every call here. Every
//! hook queues changes; `tick` and `ring` (once per batch, and per turn of the main thread)
//! apply them, at most a work slice ([`WORK_SLICE_NS`]) per hold of the engine. The
//! report's `work_ms` is measured: the wall-clock time the policy's hooks took (with the
//! installs and counter reads they made), where `sim` gives its cost model's price.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

use hyflow::cost_model::CostModel;
use hyflow::measure::KeySpec;
use hyflow::offload::{HardwareCounters, NicBudget, NicControl, NicUpdates, OffloadPolicy, Seen};
use hyflow::packet::FlowKey;
use hyflow::switch::Switch;
use hyflow::timing::WORK_SLICE_NS;

use crate::holds::Holds;

/// The policy's live figures beyond its own report.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct LivePolicyStats {
    /// Sampled headers handed to the policy.
    pub samples: u64,
    /// Times a core's receive ring rose to the policy's queue threshold.
    pub ring_crossings: u64,
    /// When the first crossing happened (engine clock, s), if one did.
    pub first_crossing_s: Option<f64>,
    /// Upcalls the policy would have offloaded but the update budget was spent.
    pub upcalls_capped: u64,
    /// Urgent moves (Elixir's bursty flows) the policy queued when a ring was at the
    /// threshold.
    pub urgent_moves: u64,
    /// From a core's ring reaching the threshold to the move it triggered (µs): p50, p99,
    /// max over the moves.
    pub detection_us: [f64; 3],
    /// How long one call of the policy (a hook, with the changes it made) held the engine,
    /// and so stopped every core that needed it (µs): p50, p99, max over the calls.
    pub hook_us: [f64; 3],
    /// Calls that held the engine 1 ms or more: at 1 Mpps a millisecond is 1,000 frames
    /// queued behind the call.
    pub long_hooks: u64,
    /// Their time in all (ms).
    pub long_hooks_ms: f64,
    /// The longest call of each hook (µs): tick (periodic work), ring, software frame,
    /// sampled header.
    pub longest_us: Longest,
}

/// The longest call of each of the policy's hooks, µs.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Longest {
    /// `tick`: time passing, the periodic work (replacement, rebalance, bin end).
    pub tick: f64,
    /// `on_ring`: a batch taken from a receive ring.
    pub ring: f64,
    /// `on_software`: a batch of frames software forwarded.
    pub software: f64,
    /// `on_sample`: a sampled header.
    pub sample: f64,
}

/// An offload policy, its budgets and what it saw.
pub struct LivePolicy {
    policy: Box<dyn OffloadPolicy>,
    budget: NicBudget,
    costs: CostModel,
    flow_key: Option<KeySpec>,
    ring_watch: Option<u64>,
    /// Per core: since when its ring has been at the threshold (engine clock), if it is.
    above_since: Vec<Option<u64>>,
    /// Ring at the threshold → urgent move queued, ns.
    detection: Histogram<u64>,
    /// Each call's time, ns, and its long ones.
    hooks: Histogram<u64>,
    holds: Holds,
    hook_ns: u64,
    /// Of which handling sampled headers.
    sample_hook_ns: u64,
    stats: LivePolicyStats,
}

impl LivePolicy {
    /// `policy` within `limits`, on a switch of `cores` cores; its work is priced with `costs`.
    pub fn new(
        policy: Box<dyn OffloadPolicy>,
        limits: NicUpdates,
        costs: CostModel,
        cores: usize,
    ) -> LivePolicy {
        LivePolicy {
            flow_key: policy.flow_key(),
            ring_watch: policy.ring_watch(),
            policy,
            budget: NicBudget::new(limits),
            costs,
            above_since: vec![None; cores],
            detection: Histogram::new(3).expect("3 significant figures is valid"),
            hooks: Histogram::new(2).expect("2 significant figures is valid"),
            holds: Holds::default(),
            hook_ns: 0,
            sample_hook_ns: 0,
            stats: LivePolicyStats::default(),
        }
    }

    /// The policy's name.
    pub fn name(&self) -> &'static str {
        self.policy.name()
    }

    /// Share of the NIC tier's hits whose headers the policy wants sampled.
    pub fn sample_rate(&self) -> f64 {
        self.policy.sample_rate()
    }

    /// Runs `f` with the policy and its control of the NIC at `now_ns`; then, if `apply`,
    /// applies the changes queued as far as the update budget allows, for at most
    /// [`WORK_SLICE_NS`] of this hold of the engine (at least one change): a replacement's
    /// thousands of installs, each a translation, are spread over the batches, as `sim` runs
    /// the policy's work in slices of that length beside the packets, instead of stopping
    /// every core until they are done. The time taken is measured.
    fn run<R>(
        &mut self,
        switch: &mut Switch,
        hardware: Option<&mut dyn HardwareCounters>,
        (now_ns, hook, apply): (u64, fn(&mut Longest) -> &mut f64, bool),
        f: impl FnOnce(&mut dyn OffloadPolicy, &mut NicControl) -> R,
    ) -> R {
        let started = Instant::now();
        let mut control = NicControl::new(switch, &mut self.budget, &self.costs, now_ns);
        if let Some(h) = hardware {
            control = control.with_hardware(h);
        }
        let r = f(self.policy.as_mut(), &mut control);
        if apply {
            let until = started + Duration::from_nanos(WORK_SLICE_NS);
            control.apply_while(&mut || Instant::now() < until);
        }
        let took = started.elapsed().as_nanos() as u64;
        self.hook_ns += took;
        let _ = self.hooks.record(took);
        self.holds.record(took);
        let longest = hook(&mut self.stats.longest_us);
        *longest = longest.max(took as f64 / 1e3);
        r
    }

    /// Time passes.
    pub fn tick(&mut self, switch: &mut Switch, hardware: Option<&mut dyn HardwareCounters>, now_ns: u64) {
        self.run(switch, hardware, (now_ns, |l| &mut l.tick, true), |p, nic| p.tick(nic));
    }

    /// `core` took a batch from a receive ring that held `occupancy` frames.
    pub fn ring(
        &mut self,
        switch: &mut Switch,
        hardware: Option<&mut dyn HardwareCounters>,
        (core, occupancy): (usize, u64),
        now_ns: u64,
    ) {
        if let Some(k) = self.ring_watch {
            let since = &mut self.above_since[core];
            match (occupancy >= k, *since) {
                (true, None) => {
                    *since = Some(now_ns);
                    self.stats.ring_crossings += 1;
                    self.stats.first_crossing_s.get_or_insert(now_ns as f64 / 1e9);
                }
                (false, Some(_)) => *since = None,
                _ => {}
            }
        }
        let urgent = self.budget.queued_urgent();
        let queued = self.run(switch, hardware, (now_ns, |l| &mut l.ring, true), |p, nic| {
            p.on_ring(core, occupancy, nic);
            nic.queued_urgent()
        });
        if queued > urgent {
            self.stats.urgent_moves += 1;
            let since = self.above_since[core].unwrap_or(now_ns);
            let _ = self.detection.record(now_ns - since);
        }
    }

    /// Whether an upcall now may install its translation in the NIC: `None` if the policy
    /// does not offload upcalls, else whether the update budget has a token.
    pub fn upcall_may_offload(&mut self, now_ns: u64) -> Option<bool> {
        self.policy.install_on_upcall(now_ns).then(|| self.budget.updates.available(now_ns) > 0)
    }

    /// A frame the engine decided made `installs` NIC entries; `capped`: it was an upcall the
    /// policy would have offloaded but the budget was spent.
    pub fn decided(&mut self, installs: u64, capped: bool) {
        self.budget.updates.spend(installs);
        self.stats.upcalls_capped += capped as u64;
    }

    /// Software forwarded `frames` (each a key and a length) on `core`: one hold of the
    /// policy for a batch, not one per frame (a clock read and a control per frame cost a
    /// tenth of a frame's time).
    pub fn software<'k>(
        &mut self,
        switch: &mut Switch,
        hardware: Option<&mut dyn HardwareCounters>,
        (frames, core): (impl Iterator<Item = (&'k FlowKey, u32)>, usize),
        now_ns: u64,
    ) {
        let Some(spec) = self.flow_key else { return };
        self.run(switch, hardware, (now_ns, |l| &mut l.software, false), |p, nic| {
            for (key, bytes) in frames {
                p.on_software(Seen { key, flow: spec.flow_id(key), number: None, bytes, core, now_ns }, nic);
            }
        });
    }

    /// A sampled header of a frame the NIC tier served.
    pub fn sample(
        &mut self,
        switch: &mut Switch,
        hardware: Option<&mut dyn HardwareCounters>,
        (key, bytes): (&FlowKey, u32),
        now_ns: u64,
    ) {
        self.stats.samples += 1;
        let Some(spec) = self.flow_key else { return };
        let seen = Seen { key, flow: spec.flow_id(key), number: None, bytes, core: 0, now_ns };
        let before = self.hook_ns;
        self.run(switch, hardware, (now_ns, |l| &mut l.sample, false), |p, nic| p.on_sample(seen, nic));
        self.sample_hook_ns += self.hook_ns - before;
    }

    /// The policy's time per sampled header so far (its hook, and the changes it made), ns,
    /// if it had any.
    pub fn sample_ns(&self) -> Option<f64> {
        (self.stats.samples > 0).then(|| self.sample_hook_ns as f64 / self.stats.samples as f64)
    }

    /// What the policy did, as `sim --json` gives it under `policy`, and its live figures.
    pub fn report(&self) -> serde_json::Value {
        let report = self.policy.report().with_budget(self.budget.stats(), self.hook_ns as f64);
        let us = |h: &Histogram<u64>| {
            [0.5, 0.99, 1.0].map(|q| if h.is_empty() { 0.0 } else { h.value_at_quantile(q) as f64 / 1e3 })
        };
        let live = LivePolicyStats {
            detection_us: us(&self.detection),
            hook_us: us(&self.hooks),
            long_hooks: self.holds.long(),
            long_hooks_ms: self.holds.long_ms(),
            ..self.stats
        };
        let mut v = serde_json::to_value(&report).expect("a policy report serializes");
        v["name"] = self.name().into();
        v["ring_watch"] = self.ring_watch.into();
        v["live"] = serde_json::to_value(live).expect("serializes");
        v
    }

    /// What the policy did, in one line.
    pub fn summary(&self) -> String {
        let b = self.budget.stats();
        let own = self.policy.report().summary.map_or(String::new(), |s| format!("; {s}"));
        format!(
            "policy {}: {} installs ({} refused), {} removals, {} counters read, {} samples, {} ring crossings{}, \
             {} urgent moves (p50 {:.0} µs after the ring reached K), {} upcalls not offloaded (--nic-updates \
             spent), {:.1} ms in its hooks (longest {:.0} µs; {} of 1 ms or more){own}",
            self.name(),
            b.installs,
            b.installs_refused,
            b.removals,
            b.counter_reads,
            self.stats.samples,
            self.stats.ring_crossings,
            self.ring_watch.map_or(String::new(), |k| format!(" (K = {k})")),
            self.stats.urgent_moves,
            if self.detection.is_empty() { 0.0 } else { self.detection.value_at_quantile(0.5) as f64 / 1e3 },
            self.stats.upcalls_capped,
            self.hook_ns as f64 / 1e6,
            self.hooks.max() as f64 / 1e3,
            self.holds.long(),
        )
    }
}
