//! Sub-traversal rules are sound: on random pipelines (registers, metadata, resubmits with
//! continuations, VLAN push/pop, rewrites, dec_ttl), for every contiguous run of a traversal's
//! lookups, every flow inside the run's rule — re-translated from the rule's lookup point with
//! `Pipeline::run_from` — gets exactly the outputs, next lookup point and flow the rule's
//! effects predict.

mod common;

use common::{arb_packet, arb_pipeline, canonical};
use hyflow::openflow::segment::{segmentable, sub_traversal};
use hyflow::openflow::traversal::LookupPoint;
use hyflow::openflow::{parse_flows, Pipeline, Traversal};
use hyflow::packet::{FlowKey, FlowMask};
use std::cell::Cell;

use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("HYFLOW_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000)
}

/// A flow inside `mask` around `base`: free packet bits from `bits` (kept realistic), free
/// pipeline-state bits too unless the point is the initial one (packets enter with none).
fn probe(base: &FlowKey, mask: &FlowMask, bits: &[u64], initial: bool) -> FlowKey {
    let packet = FlowMask::packet_state();
    let mut k = *base;
    for w in 0..k.words.len() {
        let free = !mask.words[w] & packet.words[w];
        k.words[w] = (k.words[w] & !free) | (bits[w % bits.len()].rotate_left(w as u32 * 7) & free);
    }
    let mut k = canonical_keep_inner_vlan(&k);
    if !initial {
        for w in 0..k.words.len() {
            let free = !mask.words[w] & !packet.words[w];
            k.words[w] = (k.words[w] & !free) | (bits[(w + 1) % bits.len()].rotate_left(w as u32 * 3) & free);
        }
    }
    k.words.iter_mut().zip(&mask.words).zip(&base.words).for_each(|((w, m), b)| *w = (*w & !m) | (b & m));
    k
}

/// `canonical` (absent headers zero), keeping an inner VLAN tag the pipeline may have pushed
/// (a tag, like the outer one, exists only with its CFI bit; an absent one is all zero).
fn canonical_keep_inner_vlan(k: &FlowKey) -> FlowKey {
    let mut c = canonical(*k);
    if k.has_vlan() && k.vlan_tci2() & 0x1000 != 0 {
        c.set_vlan_tci2(k.vlan_tci2());
        c.set_vlan_tpid2(k.vlan_tpid2());
    }
    c
}

/// Also counts what it checked: a traversal that cannot be cut into sub-traversals (OVS
/// limits, controller actions) is skipped, and most must not be.
#[test]
fn every_sub_traversal_rule_is_sound() {
    let (traversals, segments) = (Cell::new(0u64), Cell::new(0u64));
    let config = ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() };
    proptest!(config, |(
        lines in arb_pipeline(12),
        packet in arb_packet(),
        bits in prop::collection::vec(any::<u64>(), 4),
    )| {
        let p = Pipeline::from_rules(parse_flows(&lines.join("\n"), "generated").expect("generated flows parse"));
        let mut tr = Traversal::new();
        tr.record_segments = true;
        p.process(&packet, &mut tr);
        if segmentable(&tr).is_err() {
            return Ok(());
        }
        traversals.set(traversals.get() + 1);
        let n = tr.steps.len();
        let mut again = Traversal::new();
        again.record_segments = true;
        for start in 0..n {
            for len in 1..=(n - start) {
                segments.set(segments.get() + 1);
                let st = sub_traversal(&tr, start, len).expect("segmentable traversal");
                prop_assert!(st.matcher.matches(&tr.state_at(start)), "the rule covers its own flow");
                let flow = probe(&tr.state_at(start), &st.matcher.mask, &bits, st.point == LookupPoint::initial());
                prop_assert!(st.matcher.matches(&flow));
                p.run_from(&st.point, &flow, len, &mut again);
                prop_assert_eq!(again.drop_reason, None);
                prop_assert_eq!(again.ttl_exceeded, 0);
                let mut predicted = Vec::new();
                let exit = st.effects.apply(&flow, &mut predicted);
                prop_assert_eq!(&predicted, &again.outputs, "outputs of lookups {}..{} for {:?}", start, start + len, flow);
                prop_assert_eq!(&st.effects.next, &again.stopped_at, "next point of lookups {}..{}", start, start + len);
                if st.effects.next.is_some() {
                    prop_assert_eq!(exit, again.final_flow, "flow after lookups {}..{}", start, start + len);
                }
                // Re-translating the rule's own flow gives the rule back (what revalidation relies on).
                p.run_from(&st.point, &tr.state_at(start), len, &mut again);
                let redo = sub_traversal(&again, 0, len).expect("segmentable re-translation");
                prop_assert_eq!(&redo.matcher, &st.matcher);
                prop_assert_eq!(&redo.effects, &st.effects);
                prop_assert_eq!(&redo.outcomes, &st.outcomes);
            }
        }
    });
    let (traversals, segments) = (traversals.get(), segments.get());
    assert!(
        traversals * 10 >= cases() as u64 * 9,
        "only {traversals} of {} traversals were segmentable",
        cases()
    );
    assert!(segments >= traversals, "{segments} sub-traversals checked");
}

#[test]
fn a_register_set_early_and_matched_late_is_carried_to_the_later_sub_traversal() {
    let flows = "table=0,priority=10,in_port=1 actions=load:7->NXM_NX_REG0[],goto_table:1\n\
                 table=0,priority=10,in_port=2 actions=load:9->NXM_NX_REG0[],goto_table:1\n\
                 table=1,priority=10,ip,nw_dst=10.0.0.0/8 actions=goto_table:2\n\
                 table=2,priority=10,reg0=7 actions=output:5\n\
                 table=2,priority=10,reg0=9 actions=output:6\n";
    let p = Pipeline::from_rules(parse_flows(flows, "t").unwrap());
    let mut tr = Traversal::new();
    tr.record_segments = true;
    let mut k = FlowKey::default();
    k.set_in_port(1);
    k.set_dl_type(0x0800);
    k.set_nw_dst(0x0a01_0203);
    p.process(&k, &mut tr);
    assert_eq!(tr.steps.len(), 3);
    let tail = sub_traversal(&tr, 2, 1).unwrap();
    assert_eq!(tail.matcher.value.get(hyflow::packet::field::id::REG0), 7, "reg0 is matched at table 2");
    let head = sub_traversal(&tr, 0, 2).unwrap();
    assert_eq!(head.effects.exit.value.get(hyflow::packet::field::id::REG0), 7, "table 0 sets it");
    assert_eq!(head.effects.next.as_ref().map(|p| p.table), Some(2));
    // A packet from port 2 carries reg0=9 into table 2: the tail rule must not match it.
    let mut k2 = k;
    k2.set_in_port(2);
    p.process(&k2, &mut tr);
    assert!(!tail.matcher.matches(&tr.state_at(2)));
}
