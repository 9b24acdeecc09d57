//! Open vSwitch 4.0 as the oracle: pipelines traced through `ovs-vswitchd`, packet for packet.
//!
//! For every case: outputs and rewritten headers equal OVS's; every probe (a packet one field
//! away) that falls inside hyflow's megaflow gets exactly what the base packet's datapath
//! actions give it (soundness); and hyflow's megaflows are no narrower than OVS's overall.

use hyflow::openflow::execute::outputs_of as execute;
use hyflow::openflow::parser::{parse_flow_spec, SpecKind};
use hyflow::openflow::traversal::Output;
use hyflow::openflow::{parse_flows, parse_packet, Pipeline, Traversal};
use hyflow::packet::field::id;
use hyflow::packet::FlowKey;
use serde_json::Value;

/// The header fields OVS's vectors record, read the way `ovsvec.py` compares them.
fn state(k: &FlowKey) -> [u64; 13] {
    let tagged = k.has_vlan();
    let ipv4 = k.dl_type() == 0x0800;
    let l4 = ipv4 && matches!(k.nw_proto(), 1 | 6 | 17 | 132);
    [
        k.dl_src(),
        k.dl_dst(),
        k.dl_type() as u64,
        if tagged { (k.vlan_tci() & 0xfff) as u64 } else { 0 },
        if tagged { (k.vlan_tci() >> 13) as u64 } else { 0 },
        tagged as u64,
        if ipv4 { k.nw_src() as u64 } else { 0 },
        if ipv4 { k.nw_dst() as u64 } else { 0 },
        if ipv4 { k.nw_proto() as u64 } else { 0 },
        if ipv4 { (k.nw_tos() & 0xfc) as u64 } else { 0 },
        if ipv4 { k.nw_ttl() as u64 } else { 0 },
        if l4 { k.tp_src() as u64 } else { 0 },
        if l4 { k.tp_dst() as u64 } else { 0 },
    ]
}

fn expected_state(p: &Value) -> [u64; 13] {
    let g = |f: &str| p[f].as_u64().unwrap_or_else(|| panic!("vector field {f}"));
    let tagged = g("vlan_present") == 1;
    let ipv4 = g("dl_type") == 0x0800;
    let l4 = ipv4 && matches!(g("nw_proto"), 1 | 6 | 17 | 132);
    let z = |c: bool, v: u64| if c { v } else { 0 };
    [
        g("dl_src"),
        g("dl_dst"),
        g("dl_type"),
        z(tagged, g("vlan_vid")),
        z(tagged, g("vlan_pcp")),
        tagged as u64,
        z(ipv4, g("nw_src")),
        z(ipv4, g("nw_dst")),
        z(ipv4, g("nw_proto")),
        z(ipv4, g("nw_tos") & 0xfc),
        z(ipv4, g("nw_ttl")),
        z(l4, g("tp_src")),
        z(l4, g("tp_dst")),
    ]
}

fn outputs_agree(got: &[Output], want: &Value) -> bool {
    let want = want.as_array().expect("outputs array");
    got.len() == want.len()
        && got.iter().zip(want).all(|(g, w)| {
            g.port as u64 == w["port"].as_u64().unwrap() && state(&g.packet) == expected_state(&w["packet"])
        })
}

/// Exact bits of an OVS megaflow line, counted as `ovsvec.py` does (in_port excluded).
fn ovs_megaflow_bits(line: &str) -> u32 {
    let kept: Vec<&str> = line
        .split(',')
        .filter(|t| {
            let name = t.split('=').next().unwrap();
            !matches!(name, "recirc_id" | "eth" | "nw_frag" | "in_port" | "metadata")
                && !name.starts_with("reg")
        })
        .collect();
    let m = parse_flow_spec(&kept.join(","), SpecKind::Selector).expect("OVS megaflow parses").rule.matcher();
    let mut mask = m.mask;
    mask.set(id::NW_TOS, mask.get(id::NW_TOS) & 0xfc);
    mask.exact_bits()
}

fn hyflow_megaflow_bits(tr: &Traversal) -> u32 {
    let mut mask = tr.megaflow.mask;
    mask.set(id::IN_PORT, 0);
    mask.set(id::RECIRC_ID, 0);
    mask.set(id::NW_FRAG, 0);
    // Tag presence and TPIDs are structure in a datapath key (OVS prints neither).
    mask.set(id::VLAN_TCI, mask.get(id::VLAN_TCI) & !0x1000);
    for f in [id::VLAN_TPID, id::VLAN_TCI2, id::VLAN_TPID2] {
        mask.set(f, 0);
    }
    mask.exact_bits()
}

#[test]
fn open_vswitch_sample_vectors() {
    let data: Value =
        serde_json::from_str(include_str!("data/ovs-vectors-sample.json")).expect("vector file is JSON");
    let (mut total, mut agree, mut inside, mut unsound) = (0, 0, 0, 0);
    let (mut bits_ovs, mut bits_hyflow) = (0u64, 0u64);
    let mut tr = Traversal::new();
    let mut probe_tr = Traversal::new();
    let mut replay = Vec::new();
    for (ci, case) in data["cases"].as_array().unwrap().iter().enumerate() {
        let flows: Vec<&str> =
            case["flows"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        let pipeline = Pipeline::from_rules(parse_flows(&flows.join("\n"), "vector").expect("flows parse"));
        for p in case["packets"].as_array().unwrap() {
            let base = parse_packet(p["packet"].as_str().unwrap()).unwrap();
            pipeline.process(&base, &mut tr);
            total += 1;
            if outputs_agree(&tr.outputs, &p["outputs"]) {
                agree += 1;
            } else {
                eprintln!("case {ci}: {} -> {:?}", p["packet"], tr.outputs);
            }
            bits_ovs += ovs_megaflow_bits(p["megaflow"].as_str().unwrap()) as u64;
            bits_hyflow += hyflow_megaflow_bits(&tr) as u64;
            for q in p["probes"].as_array().unwrap() {
                let probe = parse_packet(q["packet"].as_str().unwrap()).unwrap();
                pipeline.process(&probe, &mut probe_tr);
                total += 1;
                agree += outputs_agree(&probe_tr.outputs, &q["outputs"]) as usize;
                if tr.megaflow.matches(&probe) {
                    inside += 1;
                    replay.clear();
                    execute(&tr.dp_actions, &probe, &mut replay);
                    if !outputs_agree(&replay, &q["outputs"]) {
                        unsound += 1;
                        eprintln!("case {ci}: probe {} inside {} unsound", q["packet"], tr.megaflow);
                    }
                }
            }
        }
    }
    let ratio = bits_hyflow as f64 / bits_ovs as f64;
    eprintln!("agreement {agree}/{total}; {inside} probes inside megaflows, {unsound} unsound; exact-bit ratio {ratio:.3}");
    assert_eq!(agree, total, "every packet and probe forwarded as OVS does");
    assert_eq!(unsound, 0, "megaflows are sound");
    assert!(inside > 100, "the probes exercise megaflows");
    // 0.996 on the committed vectors: hyflow pins no more bits than OVS over all of them.
    assert!(ratio <= 1.0, "megaflows as wide as OVS's (ratio {ratio:.3})");
}
