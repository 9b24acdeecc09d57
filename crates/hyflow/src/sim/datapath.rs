//! The switch as the simulation's datapath: NIC lookups at arrival, host software at service,
//! priced by a cost model, with an offload policy deciding what the NIC holds and the NIC's
//! table-update rate capped.

use crate::nic::gigaflow::GigaflowConfig;
use crate::openflow::traversal::Output;
use crate::openflow::update::Update;
use crate::openflow::Pipeline;
use crate::replay::Schedule;
use crate::switch::{Layer, NicConfig, Offload, Switch, SwitchConfig, SwitchConfigError};

use super::costs::CostModel;
use super::{Datapath, SimPacket};

/// What the NIC holds and when it changes: the extension point for offload policies. The
/// simulator asks [`OffloadPolicy::install_on_upcall`] before software handles a missed
/// packet and calls [`OffloadPolicy::tick`] at every arrival, so a policy that observes
/// measurements (Elixir, TFO, LFP) can install and evict NIC entries over time.
pub trait OffloadPolicy {
    /// Name in reports.
    fn name(&self) -> &'static str;
    /// The NIC layer the policy manages (`None`: the NIC forwards nothing).
    fn nic(&self) -> Option<NicConfig>;
    /// Whether an upcall handled now may install its entry in the NIC.
    fn install_on_upcall(&mut self, now_ns: u64) -> bool;
    /// Periodic work at `now_ns` (measurement, replacement).
    fn tick(&mut self, now_ns: u64, switch: &mut Switch);
    /// Host work an upcall adds when it offers its translation to the NIC, ns.
    fn install_ns(&self, _costs: &CostModel) -> f64 {
        0.0
    }
}

/// The policies available without measurement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Policy {
    /// Pure software forwarding: the NIC forwards nothing (Elixir's PSF baseline).
    Psf,
    /// Every new megaflow offloaded while the NIC has room, as OVS hardware offload does.
    OffloadAll {
        /// NIC entries.
        entries: usize,
        /// Distinct masks.
        max_masks: usize,
    },
    /// Gigaflow sub-traversal caching in K NIC tables.
    Gigaflow(GigaflowConfig),
}

impl OffloadPolicy for Policy {
    fn name(&self) -> &'static str {
        match self {
            Policy::Psf => "psf",
            Policy::OffloadAll { .. } => "offload-all",
            Policy::Gigaflow(_) => "gigaflow",
        }
    }

    fn nic(&self) -> Option<NicConfig> {
        match *self {
            Policy::Psf => None,
            Policy::OffloadAll { entries, max_masks } => Some(NicConfig::Megaflow { entries, max_masks }),
            Policy::Gigaflow(g) => Some(NicConfig::Gigaflow(g)),
        }
    }

    fn install_on_upcall(&mut self, _now_ns: u64) -> bool {
        !matches!(self, Policy::Psf)
    }

    fn tick(&mut self, _now_ns: u64, _switch: &mut Switch) {}

    /// Gigaflow partitions each offered traversal and generates its entries; offloading a
    /// megaflow as it is costs what `upcall_ns` already counts.
    fn install_ns(&self, costs: &CostModel) -> f64 {
        match self {
            Policy::Gigaflow(_) => costs.gigaflow_install_ns,
            Policy::Psf | Policy::OffloadAll { .. } => 0.0,
        }
    }
}

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
struct RateLimit {
    per_second: f64,
    tokens: f64,
    filled_ns: u64,
}

impl RateLimit {
    fn new(per_second: f64) -> RateLimit {
        RateLimit { per_second, tokens: 1.0, filled_ns: 0 }
    }

    fn unlimited(&self) -> bool {
        self.per_second <= 0.0
    }

    /// Tokens available at `now_ns` (whole operations allowed).
    fn available(&mut self, now_ns: u64) -> u64 {
        if self.unlimited() {
            return u64::MAX;
        }
        let dt = now_ns.saturating_sub(self.filled_ns) as f64 / 1e9;
        self.tokens = (self.tokens + dt * self.per_second).min(self.per_second.max(1.0));
        self.filled_ns = self.filled_ns.max(now_ns);
        self.tokens.max(0.0) as u64
    }

    /// Spends `n` operations (the bucket may go into debt: an upcall's installs are atomic).
    fn spend(&mut self, n: u64) {
        if !self.unlimited() {
            self.tokens -= n as f64;
        }
    }
}

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
}

/// The switch, priced.
pub struct SwitchDatapath<P> {
    switch: Switch,
    policy: P,
    costs: CostModel,
    updates: Schedule,
    arrivals: u64,
    updates_limit: RateLimit,
    reads_limit: RateLimit,
    /// Where the next counter poll resumes: (table, entry id).
    poll_cursor: (u8, u32),
    outputs: Vec<Output>,
    /// Scratch for counter polls.
    counters: Vec<(u8, u32, u64)>,
    stats: DatapathStats,
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
        let switch = Switch::new(pipeline, config)?;
        Ok(SwitchDatapath {
            switch,
            policy,
            costs,
            updates: Schedule::new(updates),
            arrivals: 0,
            updates_limit: RateLimit::new(limits.per_second),
            reads_limit: RateLimit::new(limits.counter_reads_per_second),
            poll_cursor: (0, 0),
            outputs: Vec::new(),
            counters: Vec::new(),
            stats: DatapathStats::default(),
        })
    }

    /// The switch.
    pub fn switch(&self) -> &Switch {
        &self.switch
    }

    /// Counters (NIC installs are the switch's: [`Switch::nic_installs`]).
    pub fn stats(&self) -> DatapathStats {
        self.stats
    }

    fn apply_updates(&mut self, now_ns: u64) {
        while let Some(u) = self.updates.next_due(Some(self.arrivals), now_ns) {
            self.switch.apply_update(u.command, &u.spec, now_ns);
            self.stats.rule_updates += 1;
        }
    }

    /// Reads the packet counters of up to `max` NIC entries, as far as the counter-read rate
    /// allows at `now_ns`, resuming where the last poll stopped (what a policy that watches
    /// hardware flows, such as Elixir's bursty area, does): (table, entry id, packets).
    pub fn poll_counters(&mut self, now_ns: u64, max: usize, out: &mut Vec<(u8, u32, u64)>) {
        out.clear();
        let Some(nic) = self.switch.nic() else { return };
        let budget = (self.reads_limit.available(now_ns).min(max as u64)) as usize;
        self.counters.clear();
        nic.counters(&mut self.counters);
        let all = &self.counters;
        if all.is_empty() {
            return;
        }
        let start = all.partition_point(|&(t, id, _)| (t, id) < self.poll_cursor);
        out.extend((0..budget.min(all.len())).map(|k| all[(start + k) % all.len()]));
        if let Some(&(t, id, _)) = out.last() {
            self.poll_cursor = (t, id + 1);
        }
        self.reads_limit.spend(out.len() as u64);
    }
}

impl<P: OffloadPolicy> Datapath for SwitchDatapath<P> {
    fn nic(&mut self, t_ns: u64, pkt: &SimPacket) -> bool {
        self.apply_updates(t_ns);
        self.arrivals += 1;
        self.policy.tick(t_ns, &mut self.switch);
        self.switch.process_nic(&pkt.key, pkt.bytes as u64, t_ns, &mut self.outputs)
    }

    fn sample(&mut self, t_ns: u64, _pkt: &SimPacket) -> u64 {
        self.apply_updates(t_ns);
        (self.costs.rx_ns + self.costs.sample_ns).round() as u64
    }

    fn nic_updates(&self) -> u64 {
        self.switch.nic_installs()
    }

    fn host(&mut self, t_ns: u64, pkt: &SimPacket) -> u64 {
        self.apply_updates(t_ns);
        let capped = self.updates_limit.available(t_ns) == 0;
        let has_nic = self.switch.nic().is_some();
        let offload = if has_nic && self.policy.install_on_upcall(t_ns) && !capped {
            Offload::Allowed
        } else {
            Offload::Refused
        };
        let (before, offers) = (self.switch.nic_installs(), self.switch.stats().nic_offers);
        let layer = self.switch.process_host(&pkt.key, pkt.bytes as u64, t_ns, offload, &mut self.outputs);
        self.updates_limit.spend(self.switch.nic_installs() - before);
        let mut install_ns = 0.0;
        match layer {
            Layer::Microflow => self.stats.microflow += 1,
            Layer::Megaflow => self.stats.megaflow += 1,
            Layer::SlowPath => {
                self.stats.upcalls += 1;
                self.stats.installs_capped += (capped && has_nic) as u64;
                // Controller flows never reach the NIC: only an offered upcall pays.
                if self.switch.stats().nic_offers > offers {
                    install_ns = self.policy.install_ns(&self.costs);
                }
            }
            Layer::Nic => {}
        }
        self.costs.service_ns(layer) + install_ns.round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::{parse_flows, parse_packet, Pipeline};

    fn datapath(limits: NicUpdates) -> SwitchDatapath<Policy> {
        // One /32 rule per destination: every packet below needs its own megaflow.
        let text: String = (0..10_000u32)
            .map(|i| format!("priority=1,ip,nw_dst=10.0.{}.{} actions=output:2\n", i / 250, i % 250))
            .collect();
        let rules = parse_flows(&text, "t").unwrap();
        let policy = Policy::OffloadAll { entries: 100_000, max_masks: 16 };
        let base = SwitchConfig { microflow: None, megaflow: None, ..SwitchConfig::default() };
        let pipeline = Pipeline::from_rules(rules);
        SwitchDatapath::new(pipeline, base, policy, CostModel::default(), Vec::new(), limits).unwrap()
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
            (Policy::Gigaflow(crate::nic::gigaflow::GigaflowConfig::default()), costs.gigaflow_install_ns),
            (Policy::OffloadAll { entries: 10, max_masks: 10 }, 0.0),
        ] {
            let limits = NicUpdates { per_second: 1.0, latency_ns: 0, counter_reads_per_second: 0.0 };
            let pipeline = Pipeline::from_rules(rules.clone());
            let mut dp = SwitchDatapath::new(pipeline, base, policy, costs, Vec::new(), limits).unwrap();
            assert_eq!(dp.host(0, &packet(99)), upcall, "{}: TTL 0 goes to the controller", policy.name());
            assert_eq!(dp.host(0, &packet(1)), upcall + extra.round() as u64, "{}", policy.name());
            // The bucket's one token is spent: the next upcall may not install.
            assert_eq!(dp.host(1, &packet(2)), upcall, "{}: capped", policy.name());
        }
    }

    fn packet(i: u32) -> SimPacket {
        let key = parse_packet(&format!("udp,nw_src=1.1.1.1,nw_dst=10.0.{}.{}", i / 250, i % 250)).unwrap();
        SimPacket { key, bytes: 64 }
    }

    #[test]
    fn nic_updates_and_counter_reads_are_rate_limited() {
        let mut dp =
            datapath(NicUpdates { per_second: 1_000.0, latency_ns: 0, counter_reads_per_second: 20_000.0 });
        // 10,000 upcalls within 1 s: at most the bucket's 1,000 plus what refills.
        for i in 0..10_000u32 {
            let t = i as u64 * 100_000;
            let pkt = packet(i);
            assert!(!dp.nic(t, &pkt));
            let service = dp.host(t, &pkt);
            assert_eq!(service, CostModel::default().service_ns(Layer::SlowPath));
        }
        let s = dp.stats();
        let installs = dp.switch().nic_installs();
        assert!(installs <= 1_001 + 1, "{installs} installs in 1 s");
        assert!(installs >= 990, "{installs} installs");
        assert_eq!(s.installs_capped + installs, s.upcalls);
        // Counters: 20,000 entries/s, bursts of one second's worth at most.
        let mut out = Vec::new();
        dp.poll_counters(1_000_000_000, usize::MAX, &mut out);
        assert_eq!(out.len() as u64, installs, "the whole table fits the first second's budget");
        let mut reads = out.len();
        for _ in 0..30 {
            dp.poll_counters(1_000_000_000, usize::MAX, &mut out);
            reads += out.len();
        }
        assert_eq!(reads, 20_000, "one second's worth at one instant");
        dp.poll_counters(1_000_000_000 + 10_000_000, usize::MAX, &mut out);
        assert_eq!(out.len(), 200, "10 ms later, 200 more");
    }
}
