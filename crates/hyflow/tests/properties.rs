//! Property tests on thousands of random pipelines:
//! (a) the classifier agrees with a brute-force scan, with and without wildcard tracking, also
//!     after rule removals, and every packet inside a lookup's wildcards gets the same rule;
//! (b) megaflows are sound: every packet inside one gets exactly the outputs the slow path
//!     gives it, when the megaflow's datapath actions are applied to it, whichever prefix
//!     tries the tables keep.

mod common;

use common::{arb_packet, arb_pipeline, probe_inside};
use hyflow::openflow::execute::outputs_of as execute;
use hyflow::openflow::reference::linear_lookup;
use hyflow::openflow::{Pipeline, Traversal};
use hyflow::packet::FlowMask;
use std::cell::Cell;

use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("HYFLOW_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000)
}

fn build(lines: &[String]) -> Pipeline {
    common::pipeline_of(&lines.join("\n"))
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn classifier_stays_right_after_removals(
        lines in arb_pipeline(30),
        removals in prop::collection::vec(any::<prop::sample::Index>(), 1..12),
        packets in prop::collection::vec(arb_packet(), 1..6),
    ) {
        let mut p = build(&lines);
        for r in removals {
            let ids: Vec<_> = p.rules().map(|(id, _)| id).collect();
            if ids.is_empty() {
                break;
            }
            p.remove(ids[r.index(ids.len())]);
        }
        for pkt in &packets {
            for t in 0..4u8 {
                let want = linear_lookup(&p, t, pkt);
                prop_assert_eq!(p.table(t).lookup(pkt).map(|e| e.rule), want);
                let mut wc = FlowMask::CATCHALL;
                prop_assert_eq!(p.table(t).lookup_wc(pkt, &mut wc).map(|e| e.rule), want);
            }
        }
    }
}

/// Also counts the probes inside a lookup's wildcards (a probe made canonical may leave them,
/// and is then skipped): most must be checked.
#[test]
fn classifier_equals_linear_scan() {
    let (lookups, probes) = (Cell::new(0u64), Cell::new(0u64));
    proptest!(config(), |(
        lines in arb_pipeline(40),
        packets in prop::collection::vec(arb_packet(), 1..8),
        bits in prop::collection::vec(any::<u64>(), 4),
    )| {
        let p = build(&lines);
        let mut batch = vec![None; packets.len()];
        for t in 0..4u8 {
            p.table(t).lookup_batch(&packets, &mut batch);
            for (pkt, got) in packets.iter().zip(&batch) {
                prop_assert_eq!(got.map(|e| e.rule), linear_lookup(&p, t, pkt));
            }
        }
        for pkt in &packets {
            for t in 0..4u8 {
                lookups.set(lookups.get() + 1);
                let want = linear_lookup(&p, t, pkt);
                let cls = p.table(t);
                prop_assert_eq!(cls.lookup(pkt).map(|e| e.rule), want);
                let mut wc = FlowMask::CATCHALL;
                prop_assert_eq!(cls.lookup_wc(pkt, &mut wc).map(|e| e.rule), want);
                // Any packet agreeing on the bits the lookup needed gets the same rule.
                let probe = probe_inside(pkt, &wc, &bits);
                if probe.matches(pkt, &wc) {
                    probes.set(probes.get() + 1);
                    prop_assert_eq!(linear_lookup(&p, t, &probe), want, "probe {:?} inside {:?}", probe, wc);
                }
            }
        }
    });
    let (lookups, probes) = (lookups.get(), probes.get());
    assert!(probes * 2 >= lookups, "only {probes} of {lookups} probes fell inside the wildcards");
}

/// Also counts the probes inside a megaflow (a probe made canonical may leave it, and is then
/// skipped): most must be checked.
#[test]
fn megaflows_are_sound() {
    let (tried, probes) = (Cell::new(0u64), Cell::new(0u64));
    proptest!(config(), |(
        lines in arb_pipeline(25),
        packets in prop::collection::vec(arb_packet(), 1..6),
        bits in prop::collection::vec(any::<u64>(), 1..6),
        prefixes in prop::sample::select(&["ip_dst,ip_src", "none", "ip_src,ip_dst", "ip_dst", "ipv6_dst,ip_src"][..]),
    )| {
        let mut p = build(&lines);
        p.set_prefix_tries(prefixes.parse().unwrap());
        let mut tr = Traversal::new();
        let mut probe_tr = Traversal::new();
        let mut replay = Vec::new();
        for pkt in &packets {
            p.process(pkt, &mut tr);
            // The composed datapath actions reproduce the slow path on the packet itself.
            replay.clear();
            execute(&tr.dp_actions, pkt, &mut replay);
            prop_assert_eq!(replay.len(), tr.outputs.len());
            for (a, b) in replay.iter().zip(&tr.outputs) {
                prop_assert!(a.port == b.port && a.packet.same_packet(&b.packet));
            }
            prop_assert!(tr.megaflow.matches(pkt));
            for i in 0..bits.len() {
                let probe = probe_inside(pkt, &tr.megaflow.mask, &bits[i..]);
                tried.set(tried.get() + 1);
                if !tr.megaflow.matches(&probe) {
                    continue;
                }
                probes.set(probes.get() + 1);
                p.process(&probe, &mut probe_tr);
                replay.clear();
                execute(&tr.dp_actions, &probe, &mut replay);
                prop_assert_eq!(replay.len(), probe_tr.outputs.len(), "probe {:?} in {}", probe, tr.megaflow);
                for (a, b) in replay.iter().zip(&probe_tr.outputs) {
                    prop_assert!(a.port == b.port && a.packet.same_packet(&b.packet),
                        "probe {:?} in megaflow {}: cached {:?} vs slow path {:?}", probe, tr.megaflow, a, b);
                }
            }
        }
    });
    let (tried, probes) = (tried.get(), probes.get());
    assert!(probes * 2 >= tried, "only {probes} of {tried} probes fell inside the megaflow");
}
