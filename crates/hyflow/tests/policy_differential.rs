//! Soundness under every offload policy: on random pipelines, bursty packet sequences and rule
//! updates, simulated with each policy, every packet the NIC forwards leaves exactly as the
//! uncached slow path would send it at that moment (its arrival), and every packet software
//! handles leaves as the slow path sends it when software handles it.
//!
//! 250 scenarios by default (`HYFLOW_POLICY_CASES=N` for more), each under offload-all,
//! Gigaflow, Elixir (small areas, millisecond windows, a low queue threshold, so that
//! large-flow replacement and bursty offload both act within a few hundred packets), TFO,
//! LFP (its tree trained on the scenario) and OVS offload-rebalance, all with tiny tables.

mod common;

use common::{arb_packet, arb_pipeline, arb_rule};
use hyflow::cost_model::CostModel;
use hyflow::measure::KeySpec;
use hyflow::nic::gigaflow::GigaflowConfig;
use hyflow::nic::{MegaflowOffloadConfig, NicConfig};
use hyflow::offload::c45::C45Params;
use hyflow::offload::elixir::ElixirConfig;
use hyflow::offload::lfp::LfpConfig;
use hyflow::offload::rebalance::OvsRebalanceConfig;
use hyflow::offload::tfo::TfoConfig;
use hyflow::offload::upcall::UpcallOffload;
use hyflow::offload::{NicUpdates, PolicyConfig, PolicyMachine};
use hyflow::openflow::traversal::Output;
use hyflow::packet::FlowKey;
use hyflow::switch::{Layer, Switch, SwitchConfig};
use hyflow::timing::switch_datapath::{SimDecision, SwitchDatapath};
use hyflow::timing::{SimConfig, SimPacket, Simulator};
use hyflow::update_schedule::Replay;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use std::cell::RefCell;
use std::sync::Arc;

fn cases() -> u32 {
    std::env::var("HYFLOW_POLICY_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(250)
}

const RING: usize = 16;

fn policies() -> Vec<PolicyConfig> {
    let policies: Vec<PolicyConfig> = vec![
        Arc::new(UpcallOffload::OffloadAll(NicConfig::new(MegaflowOffloadConfig {
            entries: 6,
            max_masks: 4,
        }))),
        Arc::new(UpcallOffload::Gigaflow(NicConfig::new(GigaflowConfig {
            tables: 2,
            entries: 6,
            ..GigaflowConfig::default()
        }))),
        Arc::new(ElixirConfig {
            large_entries: 4,
            bursty_entries: 2,
            key: KeySpec::five_tuple(),
            sample_rate: 1.0,
            identification_window_ns: 400_000,
            replacement_window_ns: 200_000,
            burst_window_ns: 100_000,
            queue_threshold: Some(4),
            heap_rebuild_ns: Some(1_000),
            sketch_width: 256,
            ..ElixirConfig::default()
        }),
        Arc::new(ElixirConfig {
            large_entries: 3,
            bursty_entries: 1,
            key: KeySpec::parse("nw_dst").unwrap(),
            sample_rate: 1.0,
            identification_window_ns: 100_000,
            replacement_window_ns: 200_000,
            burst_window_ns: 50_000,
            queue_threshold: Some(2),
            heap_rebuild_ns: Some(0),
            sketch_width: 64,
            ..ElixirConfig::default()
        }),
        Arc::new(TfoConfig {
            entries: 4,
            sample_rate: 1.0,
            bin_ns: 100_000,
            max_changes: 2,
            ..TfoConfig::default()
        }),
        Arc::new(LfpConfig {
            entries: 4,
            large_share: 0.5,
            tree: C45Params { min_leaf: 1, ..C45Params::default() },
            ..LfpConfig::default()
        }),
        Arc::new(OvsRebalanceConfig {
            entries: 3,
            interval_ns: 150_000,
            max_swaps: 2,
            ..OvsRebalanceConfig::default()
        }),
    ];
    policies
}

/// The policy as a run builds it: a policy that learns before the run (LFP) trained on the
/// scenario's own packets (every flow, so that some are large); `None` if it cannot learn
/// from them (fewer than two flows).
fn prepared(packets: &[(u64, FlowKey)], policy: &PolicyConfig) -> Option<PolicyConfig> {
    let Some(mut trainer) = policy.trainer() else { return Some(policy.clone()) };
    for (_, k) in packets {
        trainer.observe(k, 64);
    }
    trainer.finish().ok()
}

/// Arrival times: packets in clumps (several at one instant, so rings fill and bursts
/// trigger) separated by gaps of tens of µs.
fn times(gaps: &[u8]) -> Vec<u64> {
    let mut t = 0;
    gaps.iter()
        .map(|&g| {
            if g >= 128 {
                t += (g as u64 - 128) * 1_000;
            }
            t
        })
        .collect()
}

/// Every packet's decision under `policy`; `flows` numbers the packets' flows as a `.hyf`
/// trace does (the same number, the same key), which NIC schemes may use to skip hashing.
fn simulate(
    lines: &[String],
    updates: &str,
    packets: &[(u64, FlowKey)],
    policy: &PolicyConfig,
    flows: Option<&[u32]>,
) -> Vec<SimDecision> {
    let Some(policy) = prepared(packets, policy) else {
        // Fewer than two flows: nothing to learn, nothing to check.
        return (0..packets.len() as u64)
            .map(|index| SimDecision { index, t_ns: 0, layer: None, outputs: Vec::new() })
            .collect();
    };
    let pipeline = common::pipeline_of(&lines.join("\n"));
    let ups = common::updates_of(updates);
    let limits = NicUpdates { per_second: 50_000.0, latency_ns: 2_000, counter_reads_per_second: 100_000.0 };
    let base = SwitchConfig { max_idle_ns: 300_000, ..SwitchConfig::default() };
    let dp = SwitchDatapath::new(
        pipeline,
        base,
        policy.build(&PolicyMachine { ring: RING, limits, ..PolicyMachine::default() }).unwrap(),
        CostModel::default(),
        ups,
        limits,
    )
    .unwrap();
    let machine = SimConfig {
        cores: 1,
        ring: RING,
        nic_latency_ns: 0,
        sample_hw: policy.sample_rate(),
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(machine, dp).unwrap();
    sim.datapath_mut().record_decisions();
    for (i, (t, k)) in packets.iter().enumerate() {
        sim.arrive(*t, &SimPacket { key: *k, bytes: 64, index: i as u64, flow: flows.map(|f| f[i]) });
    }
    sim.run_to_end();
    let mut out = Vec::new();
    sim.datapath_mut()
        .take_decisions(true, |d| -> Result<(), ()> {
            out.push(d);
            Ok(())
        })
        .unwrap();
    out
}

/// The uncached slow path's outputs for each packet at its arrival, and at every later time
/// at which an update changed the rules (to check software decisions made after a queue).
fn reference(lines: &[String], updates: &str, packets: &[(u64, FlowKey)]) -> Vec<Vec<Output>> {
    let pipeline = common::pipeline_of(&lines.join("\n"));
    let ups = common::updates_of(updates);
    let mut r = Replay::new(Switch::new(pipeline, SwitchConfig::no_cache()).unwrap(), ups);
    let mut outputs = Vec::new();
    packets
        .iter()
        .map(|(t, k)| {
            r.packet(*t, k, 64, &mut outputs);
            outputs.clone()
        })
        .collect()
}

/// Decisions checked and skipped over all scenarios, by policy.
#[derive(Default)]
struct Checked {
    /// Per policy, by its place in [`policies`]: NIC decisions compared, software decisions compared, software decisions
    /// skipped (served after an update that came after their arrival).
    by_policy: Vec<(&'static str, u64, u64, u64)>,
}

impl Checked {
    /// Counts for the `index`-th policy of [`policies`].
    fn count(&mut self, index: usize, policy: &'static str, nic: u64, software: u64, skipped: u64) {
        if self.by_policy.len() <= index {
            self.by_policy.resize(index + 1, ("", 0, 0, 0));
        }
        let c = &mut self.by_policy[index];
        *c = (policy, c.1 + nic, c.2 + software, c.3 + skipped);
    }
}

#[test]
fn nic_decisions_equal_the_slow_path_under_every_policy() {
    let mut runner = TestRunner::new(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let checked = RefCell::new(Checked::default());
    let strategy = (
        arb_pipeline(10),
        prop::collection::vec(arb_packet(), 1..8),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 40..160),
        prop::collection::vec(
            (0usize..160, (0u8..4).prop_flat_map(|t| arb_rule(t, 4)), any::<prop::sample::Index>(), 0u8..3),
            0..5,
        ),
    );
    runner
        .run(&strategy, |(lines, pool, picks, gens)| {
            // Software serves packets after a queue, so flows and MACs would be learned later than
            // the in-order reference learns them: learning is checked by `replay_differential`.
            let lines: Vec<String> = lines.iter().map(|l| common::without_state(l)).collect();
            let gens: Vec<_> =
                gens.into_iter().map(|(p, r, v, k)| (p, common::without_state(&r), v, k)).collect();
            let gaps: Vec<u8> = picks.iter().map(|p| p.1).collect();
            let packets: Vec<(u64, FlowKey)> =
                times(&gaps).into_iter().zip(picks.iter().map(|p| *p.0.get(&pool))).collect();
            let mut updates = String::new();
            for (pos, rule, victim, kind) in &gens {
                let target = victim.get(&lines);
                let (matcher, _) = target.split_once(" actions=").unwrap();
                let line = match kind {
                    0 => format!("add {rule}"),
                    1 => format!("modify-strict {matcher} actions=output:9"),
                    _ => format!("delete-strict {matcher}"),
                };
                updates.push_str(&format!("#{pos} {line}\n"));
            }
            let want = reference(&lines, &updates, &packets);
            // Indices after which the rules changed: a software decision for a packet that waited
            // across one is checked against the rules in force when it was served.
            let update_at: Vec<usize> = gens.iter().map(|g| g.0).collect();
            // Flows numbered by their place in the pool, as a trace's flow index numbers them.
            let numbered: Vec<u32> = picks.iter().map(|p| p.0.index(pool.len()) as u32).collect();
            for (index, policy) in policies().into_iter().enumerate() {
                let got = simulate(&lines, &updates, &packets, &policy, None);
                prop_assert_eq!(
                    &got,
                    &simulate(&lines, &updates, &packets, &policy, Some(&numbered)),
                    "{}: numbered flows decided otherwise",
                    policy.name()
                );
                let (mut nic, mut software, mut skipped) = (0, 0, 0);
                prop_assert_eq!(got.len(), packets.len(), "{}: one decision per packet", policy.name());
                for d in &got {
                    let i = d.index as usize;
                    match d.layer {
                        Some(Layer::Nic) => {
                            prop_assert_eq!(
                                &d.outputs,
                                &want[i],
                                "{}: packet {} via the NIC\nflows:\n{}\nupdates:\n{}",
                                policy.name(),
                                i,
                                lines.join("\n"),
                                updates
                            );
                            nic += 1;
                        }
                        Some(_) => {
                            // Served later: only comparable if no update came between.
                            let served_after = packets.iter().take_while(|p| p.0 <= d.t_ns).count();
                            if update_at.iter().any(|&u| u > i && u <= served_after) {
                                skipped += 1;
                            } else {
                                prop_assert_eq!(
                                    &d.outputs,
                                    &want[i],
                                    "{}: packet {} in software",
                                    policy.name(),
                                    i
                                );
                                software += 1;
                            }
                        }
                        None => {}
                    }
                }
                checked.borrow_mut().count(index, policy.name(), nic, software, skipped);
            }
            Ok(())
        })
        .unwrap();
    // Every policy had decisions of both kinds checked, and few were left unchecked.
    let checked = checked.into_inner();
    assert_eq!(checked.by_policy.len(), policies().len());
    for (policy, nic, software, skipped) in checked.by_policy {
        println!("{policy}: {nic} NIC and {software} software decisions checked, {skipped} skipped");
        assert!(nic > 0 && software > 0, "{policy}: {nic} NIC and {software} software decisions checked");
        assert!(skipped * 10 < software, "{policy}: {skipped} skipped against {software} checked");
    }
}

/// The scenarios above do reach the NIC under every policy, Elixir's areas included.
#[test]
fn every_policy_forwards_in_hardware_on_a_repetitive_sequence() {
    let lines: Vec<String> = ["priority=10,ip,nw_dst=10.0.0.0/8 actions=output:2", "priority=0 actions=drop"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let pool: Vec<FlowKey> = (0..6u32)
        .map(|i| {
            hyflow::openflow::parse_packet(&format!(
                "udp,nw_src=10.9.0.{i},nw_dst=10.0.0.{i},tp_src=5,tp_dst=53"
            ))
            .unwrap()
        })
        .collect();
    let packets: Vec<(u64, FlowKey)> =
        (0..3_000u64).map(|n| (n / 4 * 5_000, pool[(n % 7 % 6) as usize])).collect();
    let numbered: Vec<u32> = (0..3_000u32).map(|n| n % 7 % 6).collect();
    let want = reference(&lines, "", &packets);
    for policy in policies() {
        let got = simulate(&lines, "", &packets, &policy, None);
        assert_eq!(
            got,
            simulate(&lines, "", &packets, &policy, Some(&numbered)),
            "{}: numbered",
            policy.name()
        );
        let nic: Vec<&SimDecision> = got.iter().filter(|d| d.layer == Some(Layer::Nic)).collect();
        assert!(nic.len() > 1_000, "{}: {} NIC decisions", policy.name(), nic.len());
        assert!(nic.iter().all(|d| d.outputs == want[d.index as usize]), "{}", policy.name());
    }
}
