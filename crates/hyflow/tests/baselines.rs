//! Elixir's baselines on the exact-match table: TFO selects multi-time-scale heavy hitters
//! with limited churn; OVS offload-rebalance fills the table, then swaps slow offloaded flows
//! for faster software ones every round, at most `max_swaps` per round.

use hyflow::cost_model::CostModel;
use hyflow::measure::{FlowId, KeySpec};
use hyflow::nic::exact_match::ExactMatch;
use hyflow::offload::rebalance::{OvsRebalance, OvsRebalanceConfig};
use hyflow::offload::tfo::{Tfo, TfoConfig};
use hyflow::offload::{NicUpdates, OffloadPolicy};
use hyflow::openflow::{parse_flows, parse_packet, Pipeline};
use hyflow::packet::FlowKey;
use hyflow::switch::SwitchConfig;
use hyflow::timing::switch_datapath::SwitchDatapath;
use hyflow::timing::{SimConfig, SimPacket, Simulator};

const S: u64 = 1_000_000_000;

fn key(i: u32) -> FlowKey {
    parse_packet(&format!(
        "udp,in_port=1,nw_src=10.1.{}.{},nw_dst=10.2.0.1,tp_src=7,tp_dst=9",
        i >> 8,
        i & 255
    ))
    .unwrap()
}

fn flow(i: u32) -> FlowId {
    KeySpec::five_tuple().flow_id(&key(i)).unwrap()
}

fn simulator<P: OffloadPolicy>(policy: P) -> Simulator<SwitchDatapath<P>> {
    let rules = Pipeline::from_rules(parse_flows("priority=1,ip actions=output:2", "t").unwrap());
    let limits = NicUpdates { per_second: 0.0, latency_ns: 0, counter_reads_per_second: 0.0 };
    let sample_hw = policy.sample_rate();
    let base = SwitchConfig { nic: None, ..SwitchConfig::default() };
    let dp = SwitchDatapath::new(rules, base, policy, CostModel::default(), Vec::new(), limits).unwrap();
    Simulator::new(SimConfig { cores: 1, nic_latency_ns: 0, sample_hw, ..SimConfig::default() }, dp).unwrap()
}

/// Sends flows at the given packets per second for `seconds` from `from`, interleaved.
fn send<P: OffloadPolicy>(
    sim: &mut Simulator<SwitchDatapath<P>>,
    from: u64,
    seconds: u64,
    rates: &[(u32, u64)],
) {
    let total: u64 = rates.iter().map(|r| r.1).sum();
    let gap = S / total;
    let mut schedule: Vec<u32> = Vec::new();
    for &(f, r) in rates {
        schedule.extend(std::iter::repeat_n(f, r as usize));
    }
    // Spread each flow over the second (a deterministic interleave).
    schedule.sort_by_key(|f| (*f as u64 * 2_654_435_761) % 1_000);
    for s in 0..seconds {
        for (n, &f) in schedule.iter().enumerate() {
            sim.arrive(
                from + s * S + n as u64 * gap,
                &SimPacket { key: key(f), bytes: 64, index: 0, flow: None },
            );
        }
    }
}

fn held<P: OffloadPolicy>(sim: &Simulator<SwitchDatapath<P>>, f: u32) -> bool {
    sim.datapath().switch().nic_as::<ExactMatch>().unwrap().find(flow(f)).is_some()
}

#[test]
fn tfo_offloads_lasting_heavy_hitters_and_limits_churn() {
    let config = TfoConfig { entries: 4, sample_rate: 1.0, max_changes: 1, ..TfoConfig::default() };
    let mut sim = simulator(Tfo::new(config));
    // Four heavy flows for 5 s among 20 light ones: they fill the table.
    let mut rates: Vec<(u32, u64)> = (0..4).map(|f| (f, 2_000)).collect();
    rates.extend((10..30).map(|f| (f, 20)));
    send(&mut sim, 0, 5, &rates);
    for f in 0..4 {
        assert!(held(&sim, f), "heavy flow {f} offloaded");
    }
    // Flows 0 and 1 stop and flows 4 and 5 take over: at most one swap per bin, and a flow
    // heavy for one bin only (flow 6) does not displace anything.
    let mut rates: Vec<(u32, u64)> = vec![(2, 2_000), (3, 2_000), (4, 2_000), (5, 2_000)];
    rates.extend((10..30).map(|f| (f, 20)));
    send(&mut sim, 5 * S, 1, &rates);
    send(&mut sim, 6 * S, 1, &[(6, 2_500), (2, 2_000), (3, 2_000), (4, 2_000), (5, 2_000)]);
    send(&mut sim, 7 * S, 1, &rates);
    let swaps_after_three_bins = sim.datapath().policy().stats().swaps;
    assert!(swaps_after_three_bins <= 3, "one swap per bin at most: {swaps_after_three_bins}");
    send(&mut sim, 8 * S, 40, &rates);
    for f in 2..6 {
        assert!(held(&sim, f), "flow {f}, heavy for 40 s, is offloaded");
    }
    assert!(!held(&sim, 6), "a one-bin burst did not stay");
    let (_, dp) = sim.finish();
    let stats = dp.policy().stats();
    assert!(stats.swaps >= 2 && stats.swaps <= stats.bins, "{stats:?}");
}

#[test]
fn ovs_rebalance_swaps_slow_offloaded_flows_for_faster_software_ones() {
    let config = OvsRebalanceConfig { entries: 3, max_swaps: 2, ..OvsRebalanceConfig::default() };
    let mut sim = simulator(OvsRebalance::new(config));
    // Three slow flows arrive first and fill the table.
    send(&mut sim, 0, 1, &[(0, 10), (1, 10), (2, 10)]);
    for f in 0..3 {
        assert!(held(&sim, f));
    }
    // Three fast flows come; the slow ones keep trickling. Rounds run every 3 s: at most two
    // swaps in the first.
    send(&mut sim, S, 2, &[(0, 10), (1, 10), (2, 10), (5, 3_000), (6, 2_000), (7, 1_000)]);
    send(&mut sim, 3 * S, 1, &[(0, 10), (1, 10), (2, 10), (5, 3_000), (6, 2_000), (7, 1_000)]);
    let s = sim.datapath().policy().stats();
    assert_eq!((s.rounds, s.swaps), (1, 2), "{s:?}");
    assert!(held(&sim, 5) && held(&sim, 6), "the two fastest swapped in first");
    send(&mut sim, 4 * S, 3, &[(0, 10), (1, 10), (2, 10), (5, 3_000), (6, 2_000), (7, 1_000)]);
    for f in 5..8 {
        assert!(held(&sim, f), "fast flow {f} offloaded by the second round");
    }
    assert_eq!(sim.datapath().policy().stats().swaps, 3, "no swap once the fast flows are in");
}
