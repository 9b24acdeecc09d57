//! The switch as the simulation's datapath: NIC lookups at arrival, host software at service,
//! priced by a cost model, with an offload policy deciding what the NIC holds within the
//! NIC's update and counter-read budgets.

use hashbrown::HashMap;

use crate::flow_number_table::FlowNumberTable;
use crate::measure::{FlowId, KeySpec};
use crate::offload::{NicBudget, NicControl, NicUpdates, OffloadPolicy, PolicyReport, Seen};
use crate::openflow::traversal::Output;
use crate::openflow::update::Update;
use crate::openflow::Pipeline;
use crate::switch::{ports_since, Layer, Offload, PortStats, Switch, SwitchConfig, SwitchConfigError};
use crate::update_schedule::Schedule;

use super::{Datapath, SimPacket};
use crate::cost_model::CostModel;

/// Counters of the datapath beyond the switch's own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DatapathStats {
    /// Host packets per layer.
    pub microflow: u64,
    /// Megaflow hits.
    pub megaflow: u64,
    /// Upcalls.
    pub upcalls: u64,
    /// Upcalls whose NIC install was refused for the update-rate cap.
    pub installs_capped: u64,
    /// Rule updates applied.
    pub rule_updates: u64,
    /// Packets the NIC took whose later passes host software made (the NIC tracking
    /// connections, but not holding every connection or pass they need): they wait for a
    /// core like misses.
    pub continued: u64,
}

/// A packet the NIC took, waiting for a core to make its later passes.
#[derive(Debug)]
struct Continued {
    /// Those passes' service time.
    service_ns: u64,
    /// Its outputs (kept only when decisions are recorded).
    outputs: Vec<Output>,
}

/// One packet's fate in a simulation: decided at `t_ns` by `layer`, or lost (`None`).
#[derive(Clone, Debug, PartialEq)]
pub struct SimDecision {
    /// Index of the packet in the input.
    pub index: u64,
    /// When it was decided (arrival for the NIC, service for software), ns.
    pub t_ns: u64,
    /// The layer that decided; `None`: dropped at a full ring.
    pub layer: Option<Layer>,
    /// The copies that left.
    pub outputs: Vec<Output>,
}

/// Decisions made out of input order (software serves a packet after its queue), handed out
/// in input order: at most the packets in flight wait here.
#[derive(Default)]
struct DecisionLog {
    waiting: std::collections::BTreeMap<u64, SimDecision>,
    next: u64,
}

/// The switch, priced.
pub struct SwitchDatapath<P> {
    switch: Switch,
    policy: P,
    /// The policy's flow key, computed once per packet it sees (once per flow number).
    flow_key: Option<KeySpec>,
    /// By flow number, the policy's flow of the number's key once found (`Some(None)`: the
    /// key lacks a field): a numbered packet's flow is read, not extracted again.
    numbered_flows: FlowNumberTable<Option<Option<FlowId>>>,
    costs: CostModel,
    updates: Schedule,
    arrivals: u64,
    budget: NicBudget,
    /// Host work the policy did inside packets' service, ns.
    policy_packet_work_ns: f64,
    outputs: Vec<Output>,
    decisions: Option<DecisionLog>,
    stats: DatapathStats,
    /// The switch's counts when measuring started, subtracted from what it reports.
    switch_at_start: SwitchCounts,
    /// Packets the NIC took whose later passes wait for a core, by input index.
    continued: HashMap<u64, Continued>,
}

/// The switch's counts a simulation reports, over the measured window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchCounts {
    /// NIC entries installed.
    pub nic_installs: u64,
    /// Packets forwarded by an entry awaiting a revalidation verdict.
    pub stale: u64,
    /// Packets of which at least one copy left.
    pub forwarded: u64,
    /// Packets of which none left (the pipeline dropped them; ring losses are apart).
    pub dropped: u64,
    /// Microflows replaced by another in their bucket.
    pub microflow_evictions: u64,
    /// Microflows the consistency mechanism dropped.
    pub microflow_invalidated: u64,
    /// Every port's counters.
    pub ports: Vec<PortStats>,
}

impl SwitchCounts {
    /// The switch's counts now, since it started.
    fn of(switch: &Switch) -> SwitchCounts {
        let s = switch.stats();
        let m = switch.microflow().map(|m| m.stats()).unwrap_or_default();
        SwitchCounts {
            nic_installs: switch.nic_installs(),
            stale: s.stale,
            forwarded: s.forwarded,
            dropped: s.dropped,
            microflow_evictions: m.evictions,
            microflow_invalidated: m.invalidated + m.removed,
            ports: switch.port_stats(),
        }
    }

    /// These counts less `earlier`'s.
    fn since(self, earlier: &SwitchCounts) -> SwitchCounts {
        SwitchCounts {
            nic_installs: self.nic_installs - earlier.nic_installs,
            stale: self.stale - earlier.stale,
            forwarded: self.forwarded - earlier.forwarded,
            dropped: self.dropped - earlier.dropped,
            microflow_evictions: self.microflow_evictions - earlier.microflow_evictions,
            microflow_invalidated: self.microflow_invalidated - earlier.microflow_invalidated,
            ports: ports_since(&self.ports, &earlier.ports),
        }
    }
}

impl<P: OffloadPolicy> SwitchDatapath<P> {
    /// A switch forwarding with `pipeline`, its caches as in `base`, its NIC the one `policy`
    /// manages (installs applying after `limits.latency_ns`); `updates` apply at their times
    /// (or before their packet index).
    pub fn new(
        pipeline: Pipeline,
        base: SwitchConfig,
        policy: P,
        costs: CostModel,
        updates: Vec<Update>,
        limits: NicUpdates,
    ) -> Result<Self, SwitchConfigError> {
        let config = SwitchConfig { nic: policy.nic(), nic_update_latency_ns: limits.latency_ns, ..base };
        let mut switch = Switch::new(pipeline, config)?;
        // Nobody looks at a hardware packet's outputs unless decisions are recorded.
        switch.set_outputs_wanted(false);
        Ok(SwitchDatapath {
            switch,
            flow_key: policy.flow_key(),
            numbered_flows: FlowNumberTable::new(None),
            policy,
            costs,
            updates: Schedule::new(updates),
            arrivals: 0,
            budget: NicBudget::new(limits),
            policy_packet_work_ns: 0.0,
            outputs: Vec::new(),
            decisions: None,
            stats: DatapathStats::default(),
            switch_at_start: SwitchCounts::default(),
            continued: HashMap::new(),
        })
    }

    /// The switch.
    pub fn switch(&self) -> &Switch {
        &self.switch
    }

    /// The switch, the run over.
    pub fn into_switch(self) -> Switch {
        self.switch
    }

    /// The policy.
    pub fn policy(&self) -> &P {
        &self.policy
    }

    /// The NIC budgets and what policies did with them.
    pub fn budget(&self) -> &NicBudget {
        &self.budget
    }

    /// Counters since measuring started (NIC installs are the switch's:
    /// [`SwitchDatapath::switch_counts`]).
    pub fn stats(&self) -> DatapathStats {
        self.stats
    }

    /// The switch's counts since measuring started.
    pub fn switch_counts(&self) -> SwitchCounts {
        SwitchCounts::of(&self.switch).since(&self.switch_at_start)
    }

    /// What the policy did, with all the host work it charged.
    pub fn policy_report(&self) -> PolicyReport {
        let work_ns = self.budget.work_total_ns() + self.policy_packet_work_ns;
        self.policy.report().with_budget(self.budget.stats(), work_ns)
    }

    /// Records every packet's decision from now on (see [`SwitchDatapath::take_decisions`]).
    pub fn record_decisions(&mut self) {
        self.decisions = Some(DecisionLog::default());
        self.switch.set_outputs_wanted(true);
    }

    /// Hands `f` the decisions recorded so far, in input order, as far as no earlier packet
    /// is still undecided; with `all`, every one (at the end of the input).
    /// Stops at the first error `f` returns.
    pub fn take_decisions<E>(
        &mut self,
        all: bool,
        mut f: impl FnMut(SimDecision) -> Result<(), E>,
    ) -> Result<(), E> {
        let Some(log) = &mut self.decisions else { return Ok(()) };
        while let Some(entry) = log.waiting.first_entry() {
            if !all && *entry.key() != log.next {
                break;
            }
            let d = entry.remove();
            log.next = d.index + 1;
            f(d)?;
        }
        Ok(())
    }

    #[inline]
    fn record(&mut self, pkt: &SimPacket, t_ns: u64, layer: Option<Layer>) {
        if let Some(log) = &mut self.decisions {
            let outputs = if layer.is_some() { self.outputs.clone() } else { Vec::new() };
            log.waiting.insert(pkt.index, SimDecision { index: pkt.index, t_ns, layer, outputs });
        }
    }

    fn apply_updates(&mut self, now_ns: u64) {
        while let Some(u) = self.updates.next_due(Some(self.arrivals), now_ns) {
            self.switch.apply_update(u.command, &u.spec, now_ns);
            self.stats.rule_updates += 1;
        }
    }

    /// The policy's flow of `pkt` under `key_fields`: remembered by flow number for a
    /// numbered packet (every packet of a number has the same key), extracted otherwise.
    #[inline]
    fn policy_flow(&mut self, key_fields: KeySpec, pkt: &SimPacket) -> Option<FlowId> {
        if let Some(flow) = self.numbered_flows.get(pkt.flow).flatten() {
            return flow;
        }
        let flow = key_fields.flow_id(&pkt.key);
        self.numbered_flows.remember(pkt.flow, Some(flow));
        flow
    }

    /// Runs `f` with the policy and its control of the NIC at `now_ns`.
    #[inline]
    fn with_policy<R>(&mut self, now_ns: u64, f: impl FnOnce(&mut P, &mut NicControl) -> R) -> R {
        let mut nic = NicControl::new(&mut self.switch, &mut self.budget, &self.costs, now_ns);
        f(&mut self.policy, &mut nic)
    }
}

impl<P: OffloadPolicy> Datapath for SwitchDatapath<P> {
    #[inline]
    fn nic(&mut self, t_ns: u64, pkt: &SimPacket) -> bool {
        self.apply_updates(t_ns);
        self.arrivals += 1;
        self.with_policy(t_ns, |policy, nic| {
            policy.tick(nic);
            nic.apply();
        });
        let hit = self.switch.process_nic(&pkt.key, pkt.flow, pkt.bytes as u64, t_ns, &mut self.outputs);
        // A packet whose later passes went to software (the NIC tracking connections, but not
        // holding every connection or pass they need) waits for a core like a miss; that core
        // only does those passes.
        let software = self.switch.last_passes().iter().filter(|&&l| l != Layer::Nic);
        let software_ns: u64 = software.map(|&l| self.costs.service_ns(l)).sum();
        if hit && software_ns > 0 {
            let outputs = if self.decisions.is_some() { self.outputs.clone() } else { Vec::new() };
            self.continued.insert(pkt.index, Continued { service_ns: software_ns, outputs });
            return false;
        }
        if hit {
            self.record(pkt, t_ns, Some(Layer::Nic));
        }
        hit
    }

    fn lost(&mut self, t_ns: u64, pkt: &SimPacket) {
        self.continued.remove(&pkt.index);
        self.record(pkt, t_ns, None);
    }

    /// Every count restarts; every state (tables, caches, the policy's knowledge, changes
    /// waiting for the budget) carries on.
    fn start_measuring(&mut self, _t_ns: u64) {
        self.stats = DatapathStats::default();
        self.switch_at_start = SwitchCounts::of(&self.switch);
        self.switch.restart_nic_peak();
        self.budget.restart_counts();
        self.policy_packet_work_ns = 0.0;
        self.policy.restart_counts();
    }

    fn sample(&mut self, t_ns: u64, core: usize, pkt: &SimPacket) -> u64 {
        self.apply_updates(t_ns);
        let flow = self.flow_key.and_then(|k| self.policy_flow(k, pkt));
        let seen = Seen { key: &pkt.key, flow, number: pkt.flow, bytes: pkt.bytes, core, now_ns: t_ns };
        let work = self.with_policy(t_ns, |policy, nic| policy.on_sample(seen, nic));
        self.policy_packet_work_ns += work;
        // A sampled header arrives truncated, in batches, and goes straight to the sketch: it
        // costs a sketch update, not a packet's receive and parse.
        (self.costs.sample_ns + work).round() as u64
    }

    fn enqueued(&mut self, t_ns: u64, core: usize, occupancy: u64) {
        self.with_policy(t_ns, |policy, nic| {
            policy.on_ring(core, occupancy, nic);
            nic.apply();
        });
    }

    fn take_work(&mut self) -> u64 {
        self.budget.take_work()
    }

    fn nic_updates(&self) -> u64 {
        self.switch.nic_installs()
    }

    fn nic_entries(&self) -> u64 {
        let Some(nic) = self.switch.nic() else { return 0 };
        (0..nic.entries().tables()).map(|area| nic.area_len(area as u8) as u64).sum()
    }

    fn host(&mut self, t_ns: u64, core: usize, pkt: &SimPacket) -> u64 {
        self.apply_updates(t_ns);
        // Most host packets continue nothing: no hash of the index for them.
        let continued = if self.continued.is_empty() { None } else { self.continued.remove(&pkt.index) };
        if let Some(c) = continued {
            self.outputs = c.outputs;
            self.record(pkt, t_ns, Some(Layer::Nic));
            self.stats.continued += 1;
            return c.service_ns;
        }
        let wants = self.switch.nic().is_some() && self.policy.install_on_upcall(t_ns);
        let capped = wants && self.budget.updates.available(t_ns) == 0;
        let offload = if wants && !capped { Offload::Allowed } else { Offload::Refused };
        let (before, offers) = (self.switch.nic_installs(), self.switch.stats().nic_offers);
        let layer = self.switch.process_host(&pkt.key, pkt.bytes as u64, t_ns, offload, &mut self.outputs);
        let installed = self.switch.nic_installs() - before;
        self.budget.updates.spend(installed);
        self.record(pkt, t_ns, Some(layer));
        // Each entry the upcall wrote into the NIC costs the host the driver's write.
        let mut extra_ns = installed as f64 * self.costs.nic_write_ns;
        match layer {
            Layer::Microflow => self.stats.microflow += 1,
            Layer::Megaflow => self.stats.megaflow += 1,
            Layer::SlowPath => {
                self.stats.upcalls += 1;
                self.stats.installs_capped += capped as u64;
                // Controller flows never reach the NIC: only an offered upcall pays.
                if self.switch.stats().nic_offers > offers {
                    extra_ns += self.policy.install_ns(&self.costs);
                }
            }
            Layer::Nic => {}
        }
        if let Some(key_fields) = self.flow_key {
            let flow = self.policy_flow(key_fields, pkt);
            let seen = Seen { key: &pkt.key, flow, number: pkt.flow, bytes: pkt.bytes, core, now_ns: t_ns };
            let work = self.with_policy(t_ns, |policy, nic| policy.on_software(seen, nic));
            self.policy_packet_work_ns += work;
            extra_ns += work;
        }
        // Every recirculated pass is another lookup in software, priced as its layer (the
        // connection tracker's own work is not priced apart).
        let passes_ns: u64 = self.switch.last_passes().iter().map(|&l| self.costs.service_ns(l)).sum();
        self.costs.service_ns(layer) + passes_ns + extra_ns.round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::{MegaflowOffloadConfig, NicConfig};
    use crate::offload::upcall::UpcallOffload;
    use crate::openflow::{parse_flows, parse_packet, Pipeline};

    fn datapath(limits: NicUpdates) -> SwitchDatapath<UpcallOffload> {
        // One /32 rule per destination: every packet below needs its own megaflow.
        let text: String = (0..10_000u32)
            .map(|i| format!("priority=1,ip,nw_dst=10.0.{}.{} actions=output:2\n", i / 250, i % 250))
            .collect();
        let rules = parse_flows(&text, "t").unwrap();
        let policy = UpcallOffload::OffloadAll(NicConfig::new(MegaflowOffloadConfig {
            entries: 100_000,
            max_masks: 16,
        }));
        let base = SwitchConfig { microflow: None, megaflow: None, ..SwitchConfig::default() };
        let pipeline = Pipeline::from_rules(rules);
        SwitchDatapath::new(pipeline, base, policy, CostModel::default(), Vec::new(), limits).unwrap()
    }

    /// Each entry an upcall writes into the NIC costs the host `nic_write_ns`; an upcall the
    /// update cap keeps out of the NIC writes nothing and pays nothing more.
    #[test]
    fn nic_writes_are_charged_to_the_upcalls_that_make_them() {
        // A rule per destination: the two packets below need a megaflow each.
        let text = "priority=1,ip,nw_dst=10.0.0.1 actions=output:2\npriority=1,ip,nw_dst=10.0.0.2 actions=output:2\n";
        let rules = parse_flows(text, "t").unwrap();
        let costs = CostModel { nic_write_ns: 5_000.0, ..CostModel::default() };
        let upcall = costs.service_ns(Layer::SlowPath);
        let base = SwitchConfig { microflow: None, megaflow: None, ..SwitchConfig::default() };
        let policy =
            UpcallOffload::OffloadAll(NicConfig::new(MegaflowOffloadConfig { entries: 10, max_masks: 10 }));
        let limits = NicUpdates { per_second: 1.0, latency_ns: 0, counter_reads_per_second: 0.0 };
        let mut dp =
            SwitchDatapath::new(Pipeline::from_rules(rules), base, policy, costs, Vec::new(), limits)
                .unwrap();
        assert_eq!(dp.host(0, 0, &packet(1)), upcall + 5_000);
        assert_eq!(dp.host(1, 0, &packet(2)), upcall, "capped: nothing written");
        // With the bucket refilled, the second destination's entry is written and paid for.
        assert_eq!(dp.host(2_000_000_000, 0, &packet(2)), upcall + 5_000);
    }

    /// An upcall offered to a Gigaflow NIC costs its install work on top of the upcall; one
    /// whose install the update cap refuses, a controller flow (never offered), or one under
    /// OVS-style offload does not.
    #[test]
    fn gigaflow_install_work_is_charged_to_upcalls_offered_to_it() {
        let text =
            "priority=1,ip actions=output:2\npriority=2,ip,nw_dst=10.0.0.99 actions=dec_ttl,output:2\n";
        let rules = parse_flows(text, "t").unwrap();
        let costs = CostModel::default();
        let upcall = costs.service_ns(Layer::SlowPath);
        let base = SwitchConfig { microflow: None, megaflow: None, ..SwitchConfig::default() };
        for (policy, extra) in [
            (
                UpcallOffload::Gigaflow(NicConfig::new(crate::nic::gigaflow::GigaflowConfig::default())),
                costs.gigaflow_install_ns,
            ),
            (
                UpcallOffload::OffloadAll(NicConfig::new(MegaflowOffloadConfig {
                    entries: 10,
                    max_masks: 10,
                })),
                0.0,
            ),
        ] {
            let limits = NicUpdates { per_second: 1.0, latency_ns: 0, counter_reads_per_second: 0.0 };
            let pipeline = Pipeline::from_rules(rules.clone());
            let mut dp =
                SwitchDatapath::new(pipeline, base.clone(), policy.clone(), costs, Vec::new(), limits)
                    .unwrap();
            assert_eq!(dp.host(0, 0, &packet(99)), upcall, "{}: TTL 0 goes to the controller", policy.name());
            assert_eq!(dp.host(0, 0, &packet(1)), upcall + extra.round() as u64, "{}", policy.name());
            // The bucket's one token is spent: the next upcall may not install.
            assert_eq!(dp.host(1, 0, &packet(2)), upcall, "{}: capped", policy.name());
        }
    }

    fn packet(i: u32) -> SimPacket {
        let key = parse_packet(&format!("udp,nw_src=1.1.1.1,nw_dst=10.0.{}.{}", i / 250, i % 250)).unwrap();
        SimPacket { key, bytes: 64, index: i as u64, flow: None }
    }

    #[test]
    fn nic_updates_are_rate_limited() {
        let mut dp =
            datapath(NicUpdates { per_second: 1_000.0, latency_ns: 0, counter_reads_per_second: 20_000.0 });
        // 10,000 upcalls within 1 s: at most the bucket's 1,000 plus what refills.
        for i in 0..10_000u32 {
            let t = i as u64 * 100_000;
            let pkt = packet(i);
            assert!(!dp.nic(t, &pkt));
            let service = dp.host(t, 0, &pkt);
            assert_eq!(service, CostModel::default().service_ns(Layer::SlowPath));
        }
        let s = dp.stats();
        let installs = dp.switch().nic_installs();
        assert!(installs <= 1_001 + 1, "{installs} installs in 1 s");
        assert!(installs >= 990, "{installs} installs");
        assert_eq!(s.installs_capped + installs, s.upcalls);
    }
}
