//! Connection tracking and recirculation as Open vSwitch translates them: `ct(...)` to the
//! datapath's `ct` and `recirc`, each later pass resuming where its pass froze, with the
//! megaflows each pass leaves (`ofproto/trace --ct-next`, checked pass by pass).

mod common;

use std::collections::HashMap;

use hyflow::openflow::datapath::format_dp_actions;
use hyflow::openflow::parser::parse_flows;
use hyflow::openflow::passes::trace_passes;
use hyflow::openflow::{parse_packet, Pipeline};
use hyflow::packet::ct_state;
use hyflow::packet::format::format_match;

/// Renumbers recirculation ids by first appearance, so that OVS's ids (global to its bridge
/// and never reused at once) and hyflow's compare.
struct Renumber(HashMap<String, usize>);

impl Renumber {
    fn text(&mut self, s: &str) -> String {
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find("recirc") {
            let (head, tail) = rest.split_at(i);
            out.push_str(head);
            let (prefix, after) = if let Some(t) = tail.strip_prefix("recirc_id=") {
                ("recirc_id=", t)
            } else if let Some(t) = tail.strip_prefix("recirc(") {
                ("recirc(", t)
            } else {
                out.push_str("recirc");
                rest = &tail[6..];
                continue;
            };
            let end = after.find([',', ')']).unwrap_or(after.len());
            let id = &after[..end];
            let n = if id == "0" {
                0
            } else {
                let next = self.0.len() + 1;
                *self.0.entry(id.to_string()).or_insert(next)
            };
            out.push_str(&format!("{prefix}#{n}"));
            rest = &after[end..];
        }
        out.push_str(rest);
        out
    }
}

fn ct_next(states: &serde_json::Value) -> Vec<u8> {
    states
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().split(',').map(|f| ct_state::parse(f).unwrap().0).fold(0, |a, b| a | b))
        .collect()
}

#[test]
fn open_vswitch_conntrack_vectors() {
    let data = common::ovs_fixture("ovs-conntrack.json");
    let (mut packets, mut passes_seen, mut recirculated) = (0, 0, 0);
    let mut passes = Vec::new();
    for case in data["cases"].as_array().unwrap() {
        let flows: Vec<&str> =
            case["flows"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        let p = Pipeline::from_rules(parse_flows(&flows.join("\n"), "flows").unwrap());
        for v in case["packets"].as_array().unwrap() {
            let text = v["packet"].as_str().unwrap();
            let k = parse_packet(text).unwrap();
            trace_passes(&p, &k, &ct_next(&v["ct_next"]), &mut passes);
            let want = v["passes"].as_array().unwrap();
            let (mut ours, mut theirs) = (Renumber(HashMap::new()), Renumber(HashMap::new()));
            let got: Vec<(String, Vec<String>)> = passes
                .iter()
                .map(|pass| {
                    let m = format_match(&pass.tr.megaflow.value, &pass.tr.megaflow.mask);
                    (
                        ours.text(&format_dp_actions(&pass.tr.dp_actions, &pass.tr.entry)),
                        common::megaflow_tokens(&ours.text(&m)),
                    )
                })
                .collect();
            let expected: Vec<(String, Vec<String>)> = want
                .iter()
                .map(|w| {
                    (
                        theirs.text(w["dp_actions"].as_str().unwrap()),
                        common::megaflow_tokens(&theirs.text(w["megaflow"].as_str().unwrap())),
                    )
                })
                .collect();
            assert_eq!(got, expected, "{text} --ct-next {:?} through {flows:#?}", v["ct_next"]);
            packets += 1;
            passes_seen += passes.len();
            recirculated += (passes.len() > 1) as usize;
        }
    }
    eprintln!("{packets} packets, {passes_seen} passes, {recirculated} recirculated");
    assert_eq!(packets, 500);
    assert!(recirculated >= 250, "only {recirculated} packets recirculated");
}
