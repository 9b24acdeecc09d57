//! Open vSwitch's `offload-rebalance` (`other_config:offload-rebalance=true`,
//! `ofproto/ofproto-dpif-upcall.c`) on a per-flow exact-match table.
//!
//! OVS offloads a flow when it first meets it while the device has room. When the device is
//! full, every rebalance interval (3 s in OVS) the revalidator ranks offloaded flows by their
//! packet rate over the last interval (from the hardware counters it dumps) and pending
//! software flows by theirs (from software's flow statistics), then swaps the slowest
//! offloaded flow for the fastest pending one, the next slowest for the next fastest, and so
//! on while the pending flow is faster, at most `max_swaps` (1,024) per round. Idle entries
//! expire after `max-idle` as OVS's do.
//!
//! Here software's statistics are exact per-flow counters over the interval; hardware rates
//! come from the counters read at each round, as far as the NIC's read rate allows (reading
//! 50,100 counters at 20,000/s takes 2.5 s, within a 3 s interval). Sorting both lists is
//! charged to the host.

use hashbrown::HashMap;

use std::sync::Arc;

use super::params::{PolicyRegistration, EXACT_TABLE};
use super::{
    Every, NicControl, OffloadPolicy, PolicyConfigError, PolicyFactory, PolicyFigures, PolicyMachine,
    PolicyReport, Seen,
};
use crate::measure::elixir_identification::BurstCounters;
use crate::measure::{FlowId, KeySpec};
use crate::nic::exact_match::ExactMatchConfig;
use crate::nic::NicConfig;
use crate::packet::FlowKey;

/// OVS rebalance's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OvsRebalanceConfig {
    /// NIC entries (Elixir's comparison: its two areas together).
    pub entries: usize,
    /// Fields a flow is keyed by.
    pub key: KeySpec,
    /// Time between rebalance rounds, ns (OVS: 3 s).
    pub interval_ns: u64,
    /// Most swaps per round (OVS: 1,024).
    pub max_swaps: usize,
}

impl Default for OvsRebalanceConfig {
    fn default() -> Self {
        OvsRebalanceConfig {
            entries: 50_100,
            key: KeySpec::five_tuple(),
            interval_ns: 3_000_000_000,
            max_swaps: 1024,
        }
    }
}

/// `ovs-rebalance`.
pub(crate) const REGISTRATION: PolicyRegistration = PolicyRegistration {
    name: "ovs-rebalance",
    about: "Open vSwitch's offload-rebalance on an exact-match table of large-entries + bursty-entries: \
            fill while there is room, every 3 s swap slow offloaded flows for faster ones",
    params: &EXACT_TABLE,
    upcall_nic: None,
    configure: |p| {
        Ok(Arc::new(OvsRebalanceConfig {
            entries: p.exact_table(),
            key: p.flow_key()?,
            ..OvsRebalanceConfig::default()
        }))
    },
};

impl PolicyFactory for OvsRebalanceConfig {
    fn name(&self) -> &'static str {
        REGISTRATION.name
    }

    fn check(&self, _machine: &PolicyMachine) -> Result<(), PolicyConfigError> {
        if self.entries == 0 {
            return Err(PolicyConfigError::Invalid("ovs-rebalance needs a table of at least 1 entry".into()));
        }
        Ok(())
    }

    fn build(&self, _machine: &PolicyMachine) -> Result<Box<dyn OffloadPolicy>, PolicyConfigError> {
        Ok(Box::new(OvsRebalance::new(*self)))
    }
}

/// What the rebalancer did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RebalanceStats {
    /// Rounds run with the table full.
    pub rounds: u64,
    /// Flows offloaded while the table had room.
    pub fills: u64,
    /// Swaps made.
    pub swaps: u64,
}

/// The policy.
pub struct OvsRebalance {
    config: OvsRebalanceConfig,
    software: BurstCounters<FlowKey>,
    /// Hardware counters at their last read: packets, time.
    hw_last: HashMap<FlowId, (u64, u64)>,
    polled: Vec<(FlowId, u64)>,
    rounds: Every,
    stats: RebalanceStats,
}

impl OvsRebalance {
    /// The policy of `config`.
    pub fn new(config: OvsRebalanceConfig) -> OvsRebalance {
        OvsRebalance {
            software: BurstCounters::new(config.interval_ns),
            hw_last: HashMap::new(),
            polled: Vec::new(),
            rounds: Every::new(config.interval_ns),
            stats: RebalanceStats::default(),
            config,
        }
    }

    /// What it did.
    pub fn stats(&self) -> RebalanceStats {
        self.stats
    }

    fn round(&mut self, nic: &mut NicControl) {
        let now = nic.now_ns();
        nic.poll(0, &mut self.polled);
        // Offloaded flows by rate over the time since their counters were last read.
        let mut offloaded: Vec<(FlowId, f64)> = Vec::with_capacity(self.polled.len());
        for &(flow, packets) in &self.polled {
            let (before, at) =
                self.hw_last.get(&flow).copied().unwrap_or((0, now.saturating_sub(self.config.interval_ns)));
            let rate = packets.saturating_sub(before) as f64 * 1e9 / now.saturating_sub(at).max(1) as f64;
            self.hw_last.insert(flow, (packets, now));
            offloaded.push((flow, rate));
        }
        if nic.has_room(0) {
            return;
        }
        self.stats.rounds += 1;
        let pending = self.software.top(self.config.max_swaps + offloaded.len().min(64), now);
        nic.charge(nic.costs().sample_ns * (self.software.flows() + offloaded.len()) as f64);
        offloaded.sort_unstable_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        let mut slowest = offloaded.iter();
        let mut swaps = 0;
        for &(flow, rate, key) in &pending {
            if swaps >= self.config.max_swaps {
                break;
            }
            if nic.holds(flow) {
                continue;
            }
            let Some(&(victim, victim_rate)) = slowest.next() else { break };
            if rate <= victim_rate {
                break;
            }
            nic.evict(victim);
            self.hw_last.remove(&victim);
            nic.offload(&key, flow, 0);
            swaps += 1;
        }
        self.stats.swaps += swaps as u64;
    }
}

impl OffloadPolicy for OvsRebalance {
    fn name(&self) -> &'static str {
        REGISTRATION.name
    }

    fn nic(&self) -> Option<NicConfig> {
        Some(ExactMatchConfig::one_area(self.config.entries, self.config.key, true))
    }

    fn flow_key(&self) -> Option<KeySpec> {
        Some(self.config.key)
    }

    fn tick(&mut self, nic: &mut NicControl) {
        if self.rounds.due(nic.now_ns()) {
            self.round(nic);
        }
    }

    /// Software's flow statistics, and offload on first sight while the table has room.
    fn on_software(&mut self, pkt: Seen, nic: &mut NicControl) -> f64 {
        let Some(flow) = pkt.flow else { return 0.0 };
        self.software.count(flow, pkt.number, pkt.now_ns, || *pkt.key);
        if nic.has_room(0) && nic.offload(pkt.key, flow, 0) {
            self.stats.fills += 1;
        }
        nic.costs().sample_ns
    }

    fn restart_counts(&mut self) {
        self.stats = RebalanceStats::default();
    }

    fn report(&self) -> PolicyReport {
        // `replacements`: rebalance rounds run, each of which may swap entries.
        PolicyReport {
            figures: PolicyFigures(vec![("replacements", self.stats.rounds)]),
            ..PolicyReport::default()
        }
    }
}
