//! Sub-traversal rules are sound: on random pipelines (registers, metadata, resubmits with
//! continuations, VLAN push/pop, rewrites, dec_ttl), for every contiguous run of a traversal's
//! lookups, every flow inside the run's rule — re-translated from the rule's lookup point with
//! `Pipeline::run_from` — gets exactly the outputs, next lookup point and flow the rule's
//! effects predict; and every rule is minimal: it matches only what its lookups and actions
//! read before the run itself wrote it. Mutated masks (wider or narrower) are caught.

mod common;

use common::{arb_packet, arb_pipeline, canonical};
use hyflow::openflow::pipeline::normalize_mask;
use hyflow::openflow::segment::{segmentable, sub_traversal, SubTraversal};
use hyflow::openflow::traversal::LookupPoint;
use hyflow::openflow::{Pipeline, Traversal};
use hyflow::packet::field::id;
use hyflow::packet::{FlowKey, FlowMask};
use std::cell::Cell;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{TestCaseError, TestRunner};

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

/// Why `st` (lookups `len` from its point) is wrong for `flow`, a flow inside its match, if
/// it is: re-translated from the point, `flow` must get exactly the outputs, next point and
/// flow the rule's effects predict.
fn unsound(p: &Pipeline, st: &SubTraversal, flow: &FlowKey, again: &mut Traversal) -> Option<String> {
    p.run_from(&st.point, flow, st.len, again);
    if again.drop_reason.is_some() || again.ttl_exceeded > 0 {
        return Some(format!("{flow:?} hits a translation limit the rule's flow did not"));
    }
    let mut predicted = Vec::new();
    let exit = st.effects.apply(flow, &mut predicted);
    if predicted != again.outputs {
        return Some(format!("outputs for {flow:?}: predicted {predicted:?}, got {:?}", again.outputs));
    }
    if st.effects.next != again.stopped_at {
        return Some(format!(
            "next point for {flow:?}: predicted {:?}, got {:?}",
            st.effects.next, again.stopped_at
        ));
    }
    if st.effects.next.is_some() && exit != again.final_flow {
        return Some(format!(
            "flow after the run for {flow:?}: predicted {exit:?}, got {:?}",
            again.final_flow
        ));
    }
    None
}

/// The mask a minimal sub-traversal rule for lookups `start..start + len` has, from the
/// traversal's record: `dl_type` (and fragment bits of IP) as every datapath entry, and every
/// bit a lookup or action of the run read *before* an earlier action of the run wrote it —
/// nothing a rewrite only overwrites, nothing the run's own rewrites decide.
fn minimal_mask(tr: &Traversal, start: usize, len: usize) -> FlowMask {
    let entry = tr.state_at(start);
    let mut mask = FlowMask::CATCHALL;
    mask.unwildcard_all(id::DL_TYPE);
    if entry.is_ip() {
        mask.unwildcard_all(id::NW_FRAG);
    }
    let mut written = FlowMask::CATCHALL;
    for k in start..start + len {
        let mut read = tr.steps[k].mask;
        if tr.points[k].in_port.is_some() {
            // A resubmit's input port is the rule's tag, not the packet's.
            read.set(id::IN_PORT, 0);
        }
        read.union_with(&tr.intervals[k].read);
        read.subtract(&written);
        mask.union_with(&read);
        written.union_with(&tr.intervals[k].written);
    }
    if tr.point(start) == LookupPoint::initial() {
        mask.intersect_with(FlowMask::packet_state());
    }
    normalize_mask(&entry, &mut mask);
    mask
}

/// The pipeline of `flows` and the traversal of `packet` through it, recorded for segments.
/// Without `learn` actions: a traversal that learns is never cut (as one through a group).
fn recorded(flows: &str, packet: &FlowKey) -> (Pipeline, Traversal) {
    let flows: Vec<String> = flows.lines().map(common::without_state).collect();
    let p = common::pipeline_of(&flows.join("\n"));
    let mut tr = Traversal::new();
    tr.record_segments = true;
    p.process(packet, &mut tr);
    (p, tr)
}

/// Flows probed per rule.
const PROBES: usize = 6;

/// Every sub-traversal rule of random traversals is minimal and sound for `PROBES` random
/// flows inside it; also counts what it checked: a traversal that cannot be cut into
/// sub-traversals (OVS limits, controller actions) is skipped, and most must not be.
#[test]
fn every_sub_traversal_rule_is_minimal_and_sound() {
    let (traversals, checked) = (Cell::new(0u64), Cell::new(0u64));
    let config = ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() };
    proptest!(config, |(
        lines in arb_pipeline(12),
        packet in arb_packet(),
        bits in prop::collection::vec(any::<u64>(), 4),
    )| {
        let (p, tr) = recorded(&lines.join("\n"), &packet);
        if segmentable(&tr).is_err() {
            return Ok(());
        }
        traversals.set(traversals.get() + 1);
        let n = tr.steps.len();
        let mut again = Traversal::new();
        again.record_segments = true;
        for start in 0..n {
            for len in 1..=(n - start) {
                let st = sub_traversal(&tr, start, len).expect("segmentable traversal");
                prop_assert!(st.matcher.matches(&tr.state_at(start)), "the rule covers its own flow");
                prop_assert_eq!(st.matcher.mask, minimal_mask(&tr, start, len), "mask of lookups {}..{}", start, start + len);
                for probe_no in 0..PROBES {
                    let rotated: Vec<u64> = bits.iter().map(|b| b.rotate_left(17 * probe_no as u32)).collect();
                    let flow = probe(&tr.state_at(start), &st.matcher.mask, &rotated, st.point == LookupPoint::initial());
                    prop_assert!(st.matcher.matches(&flow));
                    if let Some(why) = unsound(&p, &st, &flow, &mut again) {
                        return Err(TestCaseError::fail(format!("lookups {}..{}: {why}", start, start + len)));
                    }
                    checked.set(checked.get() + 1);
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
    let (traversals, checked) = (traversals.get(), checked.get());
    assert!(
        // Traversals through a group (about one in eight) are never cut.
        traversals * 10 >= cases() as u64 * 8,
        "only {traversals} of {} traversals were segmentable",
        cases()
    );
    // At the default 10,000 cases: at least 90,000 (rule, flow) pairs (random draws give
    // 98,000 to 110,000).
    assert!(checked >= 9 * cases() as u64, "only {checked} (rule, flow) pairs checked");
}

/// The two checks above have teeth. A rule whose mask drops a bit a lookup or action read
/// (wider: it covers flows that translate differently) fails the soundness check for some
/// flow that differs from the rule's own in that field (for most such rules: another rule
/// with the same actions may take the flow); a rule that also matches bits the run
/// only overwrote (narrower: what sub-traversal entries did before they were minimal) fails
/// the minimality check, and the generated pipelines give such rules often.
#[test]
fn mutated_rule_masks_are_caught() {
    let (mut widened, mut widened_caught, mut narrowed) = (0u64, 0u64, 0u64);
    let mut runner =
        TestRunner::new(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() });
    let strategy = (arb_pipeline(12), arb_packet(), prop::collection::vec(any::<u64>(), 4));
    let mut again = Traversal::new();
    again.record_segments = true;
    for _ in 0..cases() {
        let (lines, packet, bits) = strategy.new_tree(&mut runner).expect("value").current();
        let (p, tr) = recorded(&lines.join("\n"), &packet);
        if segmentable(&tr).is_err() {
            continue;
        }
        let n = tr.steps.len();
        for start in 0..n {
            for len in 1..=(n - start) {
                let st = sub_traversal(&tr, start, len).expect("segmentable traversal");
                let entry = tr.state_at(start);
                // Wider: forget, one field at a time, the bits the first lookup's hit rule
                // matched (flipping one of them takes the packet off that rule).
                let Some(hit) = tr.steps[start].rule.and_then(|r| p.rule(r)) else { continue };
                for f in [id::NW_SRC, id::NW_DST, id::TP_DST, id::DL_DST, id::VLAN_TCI, id::NW_PROTO] {
                    let read = st.matcher.mask.get(f) & hit.matcher().mask.get(f);
                    if read == 0 || tr.points[start].in_port.is_some() && f == id::IN_PORT {
                        continue;
                    }
                    widened += 1;
                    let mut wide = st.clone();
                    wide.matcher.mask.set(f, st.matcher.mask.get(f) & !read);
                    wide.matcher.value = entry.masked(&wide.matcher.mask);
                    let caught = (0..16u32).any(|i| {
                        let mut flow = entry;
                        let v = entry.get(f)
                            ^ (read
                                & (bits[i as usize % 4].rotate_left(i * 11) as u128
                                    | 1 << read.trailing_zeros()));
                        flow.set(f, v);
                        let flow = canonical_keep_inner_vlan(&flow);
                        wide.matcher.matches(&flow) && unsound(&p, &wide, &flow, &mut again).is_some()
                    });
                    widened_caught += caught as u64;
                }
                // Narrower: also match the bits the run wrote.
                let mut overwritten = FlowMask::CATCHALL;
                for k in start..start + len {
                    overwritten.union_with(&tr.intervals[k].written);
                }
                overwritten.intersect_with(FlowMask::packet_state());
                // The minimality check is an equality with `minimal_mask`: the rule passes it,
                // so what this counts is how often a mask as the entries had it before they
                // were minimal occurs — and would fail it.
                let minimal = minimal_mask(&tr, start, len);
                assert_eq!(st.matcher.mask, minimal);
                let mut narrow = st.matcher.mask;
                narrow.union_with(&overwritten);
                normalize_mask(&entry, &mut narrow);
                narrowed += (narrow != minimal) as u64;
            }
        }
    }
    // About 650 to 800 each at 10,000 cases (traversals through groups and clones, or using
    // the stack, are not cut, so not tried).
    assert!(widened >= 450 && narrowed >= 450, "only {widened} widened and {narrowed} narrowed rules tried");
    assert!(
        // Not all: another rule with the same actions may catch the flipped flow (69% at
        // 10,000 cases).
        widened_caught * 2 >= widened,
        "only {widened_caught} of {widened} widened rules were caught unsound"
    );
}

#[test]
fn a_register_set_early_and_matched_late_is_carried_to_the_later_sub_traversal() {
    let flows = "table=0,priority=10,in_port=1 actions=load:7->NXM_NX_REG0[],goto_table:1\n\
                 table=0,priority=10,in_port=2 actions=load:9->NXM_NX_REG0[],goto_table:1\n\
                 table=1,priority=10,ip,nw_dst=10.0.0.0/8 actions=goto_table:2\n\
                 table=2,priority=10,reg0=7 actions=output:5\n\
                 table=2,priority=10,reg0=9 actions=output:6\n";
    let mut k = FlowKey::default();
    k.set_in_port(1);
    k.set_dl_type(0x0800);
    k.set_nw_dst(0x0a01_0203);
    let (p, mut tr) = recorded(flows, &k);
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

/// PSC's routing step: the entry for the routing lookup and its rewrites matches the
/// destination prefix it routed on, not the MACs and VLAN it replaces — and a later lookup of
/// the same run on a field the run rewrote is decided by the rewrite, not matched.
#[test]
fn rewritten_bits_are_not_matched() {
    let flows = "table=0,priority=10,ip,nw_dst=10.1.0.0/16 actions=mod_dl_src:02:00:00:00:ff:01,mod_dl_dst:02:00:00:00:00:07,mod_vlan_vid:9,goto_table:1\n\
                 table=1,priority=10,dl_dst=02:00:00:00:00:07 actions=output:5\n\
                 table=1,priority=0 actions=drop\n";
    let mut k = FlowKey::default();
    k.set_in_port(1);
    k.set_dl_src(0x0200_0000_0001);
    k.set_dl_dst(0x0200_0000_ff00);
    k.set_vlan_tpid(0x8100);
    k.set_vlan_tci(0x1000 | 3);
    k.set_dl_type(0x0800);
    k.set_nw_dst(0x0a01_0203);
    let (_, tr) = recorded(flows, &k);
    assert_eq!(tr.outputs.len(), 1);
    let routing = sub_traversal(&tr, 0, 1).unwrap();
    let whole = sub_traversal(&tr, 0, 2).unwrap();
    for st in [&routing, &whole] {
        let m = &st.matcher.mask;
        assert_eq!(m.get(id::DL_SRC), 0, "dl_src is only overwritten");
        assert_eq!(m.get(id::DL_DST), 0, "dl_dst is overwritten before table 1 reads it");
        assert_eq!(m.get(id::VLAN_TCI), 0x1000, "only the tag's presence is matched, not its VID");
        assert_eq!(m.get(id::NW_DST) >> 16, 0xffff, "the routed prefix is matched");
    }
    // The megaflow, as OVS's, pins what the datapath rewrites.
    assert_eq!(tr.megaflow.mask.get(id::DL_DST), u64::MAX as u128 >> 16);
    // Table 1 alone (a separate entry) reads the rewritten MAC.
    assert_eq!(sub_traversal(&tr, 1, 1).unwrap().matcher.mask.get(id::DL_DST), u64::MAX as u128 >> 16);
}
