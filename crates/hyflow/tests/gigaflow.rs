//! Gigaflow end to end: sub-traversals split where the pipeline's header fields are disjoint,
//! registers set before a split reach the tables after it as NIC state, and packets that
//! combine sub-traversals of different flows are forwarded in hardware exactly as the slow
//! path forwards them.

use hyflow::nic::gigaflow::{Gigaflow, GigaflowConfig};
use hyflow::nic::paper_setup;
use hyflow::openflow::traversal::Output;
use hyflow::openflow::update::parse_updates;
use hyflow::openflow::{parse_flows, parse_packet, Pipeline};
use hyflow::packet::FlowKey;
use hyflow::switch::{Layer, NicConfig, Switch, SwitchConfig};
use hyflow::update_schedule::Replay;

/// Port classification sets reg0 in table 0; routing (1) and a port filter (2) follow;
/// table 3 forwards on reg0 alone. Coupling (header fields shared, as the artifact counts
/// them) cuts between routing (`nw_dst`) and the port filter (`nw_proto`, `tp_dst`): table 0
/// (ingress port only) joins routing, table 3 (a register only) joins the filter.
const FLOWS: &str = "\
table=0,priority=10,in_port=1 actions=load:1->NXM_NX_REG0[],goto_table:1
table=0,priority=10,in_port=2 actions=load:2->NXM_NX_REG0[],goto_table:1
table=1,priority=10,ip,nw_dst=10.0.0.0/16 actions=goto_table:2
table=1,priority=10,ip,nw_dst=10.1.0.0/16 actions=mod_dl_src:02:00:00:00:00:01,goto_table:2
table=2,priority=10,tcp,tp_dst=80 actions=goto_table:3
table=2,priority=10,tcp,tp_dst=443 actions=mod_tp_dst:8443,goto_table:3
table=3,priority=10,reg0=1 actions=output:5
table=3,priority=10,reg0=2 actions=output:6
";

fn pkt(port: u32, dst: &str, tp: u16) -> FlowKey {
    parse_packet(&format!("in_port={port},tcp,nw_src=192.168.0.9,nw_dst={dst},tp_src=999,tp_dst={tp}"))
        .unwrap()
}

fn run(config: SwitchConfig, packets: &[FlowKey], updates: &str) -> (Vec<(Layer, Vec<Output>)>, Switch) {
    let p = Pipeline::from_rules(parse_flows(FLOWS, "flows").unwrap());
    let mut r = Replay::new(Switch::new(p, config).unwrap(), parse_updates(updates, "updates").unwrap());
    let mut out = Vec::new();
    let decisions = packets
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let layer = r.packet(i as u64 * 1000, k, 100, &mut out);
            (layer, out.clone())
        })
        .collect();
    (decisions, r.finish().0)
}

fn gigaflow_only() -> SwitchConfig {
    SwitchConfig { nic: Some(NicConfig::new(GigaflowConfig::default())), ..SwitchConfig::no_cache() }
}

#[test]
fn a_register_set_before_the_split_reaches_the_table_after_it() {
    let a = pkt(1, "10.0.3.4", 80);
    let b = pkt(1, "10.1.5.6", 443);
    // Never seen whole: each combines the routing of one and the port filter of the other.
    let c = pkt(1, "10.0.7.7", 443);
    let d = pkt(1, "10.1.8.8", 80);
    // Port 2 marks reg0=2: a new classification, then a flow that reuses it.
    let e = pkt(2, "10.0.3.5", 80);
    let f = pkt(2, "10.0.9.9", 80);
    let packets = [a, b, a, b, c, d, e, f];
    let (reference, _) = run(SwitchConfig::no_cache(), &packets, "");
    let (got, sw) = run(gigaflow_only(), &packets, "");
    for (i, (want, got)) in reference.iter().zip(&got).enumerate() {
        assert_eq!(want.1, got.1, "packet {i}");
    }
    let layers: Vec<Layer> = got.iter().map(|d| d.0).collect();
    use Layer::{Nic, SlowPath};
    assert_eq!(layers, [SlowPath, SlowPath, Nic, Nic, Nic, Nic, SlowPath, Nic], "c and d are cross products");
    assert_eq!((got[4].1[0].port, got[5].1[0].port), (5, 5), "c and d keep port 1's reg0 through the split");
    assert_eq!(got[7].1[0].port, 6, "f keeps port 2's reg0 through the split");
    let g = sw.nic_as::<Gigaflow>().unwrap();
    let per_stage: Vec<usize> = g.stages.iter().map(|s| s.space().len()).collect();
    assert_eq!(per_stage, [3, 3, 0, 0], "two sub-traversals: ingress and routing, filter and forwarding");
    assert_eq!(g.coverage(), 9.0, "3 x 3 tag-linked chains");
    // The artifact's estimate: the three upcalls made one mapping (the same two pieces'
    // points, lengths and wildcards), which installed 3 entries in each stage: 3 x 3.
    assert_eq!(g.coverage_estimate(), 9.0, "the artifact's estimate");
    // Per-rule counters are exact whichever layer forwarded.
    let (_, reference_sw) = run(SwitchConfig::no_cache(), &packets, "");
    for (id, _) in reference_sw.pipeline().rules() {
        assert_eq!(reference_sw.pipeline().stats(id), sw.pipeline().stats(id), "rule {id}");
    }
}

#[test]
fn a_rule_update_behind_a_split_revalidates_only_what_it_touches() {
    let a = pkt(1, "10.0.3.4", 80);
    let b = pkt(2, "10.1.5.6", 443);
    let c = pkt(1, "10.1.7.7", 443);
    let packets = [a, b, c, c, a, b, c];
    // Before packet 3, port 1's traffic is re-marked: only table 0's entry for port 1 changes.
    let updates =
        "#3 modify-strict table=0,priority=10,in_port=1 actions=load:2->NXM_NX_REG0[],goto_table:1\n";
    let (reference, _) = run(SwitchConfig::no_cache(), &packets, updates);
    let (got, sw) = run(gigaflow_only(), &packets, updates);
    for (i, (want, got)) in reference.iter().zip(&got).enumerate() {
        assert_eq!(want.1, got.1, "packet {i}");
    }
    assert_eq!(got[3].1[0].port, 6, "after the update port 1 carries reg0=2");
    let g = sw.nic_as::<Gigaflow>().unwrap();
    assert_eq!(g.stages[0].stats.revalidated, 2, "only port 1's classifications were evicted");
    assert_eq!(g.stages[1].stats.revalidated, 0, "the filter's entries do not depend on table 0");
}

/// Every reference pipeline, generated small with both localities and replayed with Gigaflow
/// (each partitioning, few entries so that stages fill and entries expire) under a stream of
/// rule updates (half the rules per second), forwards every packet exactly as the slow path
/// does, and leaves the same per-rule counters.
#[test]
fn the_reference_pipelines_forward_like_the_slow_path() {
    use hyflow::nic::gigaflow::Partition;
    use hyflow::packet::parse_frame;
    use hyflow::workload::flow_arrivals::FlowArrivals;
    use hyflow::workload::pipebench::{pipebench, Locality, PipebenchConfig};
    use hyflow::workload::pipelines::ALL;
    for template in ALL {
        for locality in [Locality::High, Locality::Low] {
            let config = PipebenchConfig { rules: 150, headers: 600, locality, popularity: 1.0, seed: 7 };
            let workload = pipebench(template, &config).unwrap();
            let mut frames = Vec::new();
            let slots = FlowArrivals::new(3000, 300, 1000.0, 7).unwrap();
            workload
                .fold(slots, |p| {
                    frames.push((p.ts_ns, p.frame));
                    Ok(())
                })
                .unwrap();
            let rules = parse_flows(&workload.flows, template.name).unwrap();
            let seconds = frames.last().map_or(1.0, |f| f.0 as f64 / 1e9);
            let update_lines = hyflow::workload::generate_updates(
                &rules,
                &hyflow::workload::UpdatesConfig { rate: 0.5, seconds, seed: 3 },
            )
            .unwrap();
            let updates = update_lines.join("\n");
            let keys: Vec<(u64, FlowKey)> = frames
                .iter()
                .map(|(ts, f)| {
                    let mut k = FlowKey::default();
                    parse_frame(f, hyflow::packet::LinkKind::Ethernet, 1, &mut k).unwrap();
                    (*ts, k)
                })
                .collect();
            let run = |config: SwitchConfig| {
                let sw = Switch::new(Pipeline::from_rules(rules.clone()), config).unwrap();
                let mut r = Replay::new(sw, parse_updates(&updates, "updates").unwrap());
                let mut out = Vec::new();
                let decisions: Vec<(Layer, Vec<Output>)> = keys
                    .iter()
                    .map(|(ts, k)| {
                        let layer = r.packet(*ts, k, 100, &mut out);
                        (layer, out.clone())
                    })
                    .collect();
                let sw = r.finish().0;
                let counters: Vec<_> = sw.pipeline().rules().map(|(id, _)| sw.pipeline().stats(id)).collect();
                (decisions, counters, sw.stats().updates)
            };
            let (reference, reference_counters, updates_applied) = run(SwitchConfig::no_cache());
            assert!(updates_applied > 10, "{}: {updates_applied} updates", template.name);
            // hyflow's setup (entries expire when idle) and the artifact's (no expiry, 63 masks
            // per stage), with few entries so that stages fill.
            let setups = [("expiring", 512, 300_000_000, false), ("artifact", paper_setup::MASKS, 0, true)];
            for partition in [Partition::Disjoint, Partition::Random, Partition::OneToOne] {
                for (setup, max_masks, max_idle_ns, whole_mappings) in setups {
                    let gf = GigaflowConfig {
                        entries: 64,
                        max_masks,
                        partition,
                        whole_mappings,
                        ..GigaflowConfig::default()
                    };
                    let config = SwitchConfig {
                        nic: Some(NicConfig::new(gf)),
                        max_idle_ns,
                        ..SwitchConfig::no_cache()
                    };
                    let (got, counters, _) = run(config);
                    let what = format!("{} {locality:?} {partition:?} {setup}", template.name);
                    for (i, (want, got)) in reference.iter().zip(&got).enumerate() {
                        assert_eq!(want.1, got.1, "{what}: packet {i}");
                    }
                    assert_eq!(reference_counters, counters, "{what}: rule counters");
                    let hits = got.iter().filter(|d| d.0 == Layer::Nic).count();
                    assert!(hits > 0, "{what}: the NIC serves some packets");
                }
            }
        }
    }
}

/// With whole mappings (the artifact's), a traversal one of whose pieces a stage refuses for
/// its mask limit installs nothing; with partial ones, the pieces that fit stay installed.
#[test]
fn a_whole_mapping_is_installed_all_or_none() {
    // A port range in table 2 gives the filter's piece a mask of its own.
    let flows = format!("{FLOWS}table=2,priority=5,tcp,tp_dst=0x1000/0xf000 actions=goto_table:3\n");
    let a = pkt(1, "10.0.3.4", 80);
    // Routing like a's (same mask, new entry), filter through the range (a new mask).
    let h = pkt(1, "10.1.5.5", 0x1234);
    for (whole_mappings, stage0) in [(false, 2), (true, 1)] {
        let gf = GigaflowConfig {
            tables: 2,
            entries: 64,
            max_masks: 1,
            whole_mappings,
            ..GigaflowConfig::default()
        };
        let config = SwitchConfig { nic: Some(NicConfig::new(gf)), ..SwitchConfig::no_cache() };
        let p = Pipeline::from_rules(parse_flows(&flows, "flows").unwrap());
        let reference = Pipeline::from_rules(parse_flows(&flows, "flows").unwrap());
        let mut sw = Switch::new(p, config).unwrap();
        let mut out = Vec::new();
        for (i, k) in [a, h, h].iter().enumerate() {
            sw.process(k, 100, i as u64 * 1000, &mut out);
            let mut tr = hyflow::openflow::Traversal::new();
            reference.process(k, &mut tr);
            assert_eq!(out, tr.outputs, "packet {i} as the slow path forwards it");
        }
        let g = sw.nic_as::<Gigaflow>().unwrap();
        let per_stage: Vec<usize> = g.stages.iter().map(|s| s.space().len()).collect();
        assert_eq!(per_stage, [stage0, 1], "whole mappings {whole_mappings}");
        assert_eq!(g.stages[1].stats.refused_masks, 2, "h's filter piece, refused twice");
    }
}

/// A rule changed and changed back within the revalidation delay: the second check keeps
/// the entries, and its verdict supersedes the eviction the first one scheduled.
#[test]
fn a_reverted_update_cancels_its_pending_eviction() {
    let a = pkt(1, "10.0.3.4", 80);
    let updates = "\
#1 modify-strict table=3,priority=10,reg0=1 actions=output:7
#2 modify-strict table=3,priority=10,reg0=1 actions=output:5
";
    for nic in [gigaflow_only().nic, SwitchConfig::default().nic] {
        // Packets every µs; the first check's eviction falls due at 2.5 µs, the second
        // check's keep at 3.5 µs.
        let config =
            SwitchConfig { nic: nic.clone(), revalidation_delay_ns: 1_500, ..SwitchConfig::no_cache() };
        let (decisions, _) = run(config, &[a, a, a, a, a, a], updates);
        let layers: Vec<Layer> = decisions.iter().map(|d| d.0).collect();
        assert_eq!(layers[3..], [Layer::Nic; 3], "{nic:?}: the entries were never evicted");
    }
}
