//! The `NORMAL` action as Open vSwitch runs it: MAC learning per VLAN, flooding in bundle
//! order, reserved destinations dropped, and every cache layer learning as the slow path does.

mod common;

use hyflow::openflow::dp_actions::format_dp_actions;
use hyflow::openflow::group::{Groups, SwitchPorts};
use hyflow::openflow::names::LOCAL_PORT;
use hyflow::openflow::normal::MacTable;
use hyflow::openflow::{parse_flows, parse_packet, Pipeline, Traversal};
use hyflow::packet::format::format_match;
use hyflow::switch::{Switch, SwitchConfig};

fn switch(flows: &str, config: SwitchConfig, macs: MacTable) -> Switch {
    let ports = SwitchPorts::new([1, 2, 3, 4, 5, LOCAL_PORT], []);
    let p = Pipeline::of_switch(parse_flows(flows, "flows").unwrap(), Groups::new(), ports, macs);
    Switch::new(p, config).unwrap()
}

/// Open vSwitch's own answers (`tests/data/ovs-normal.json`, made with
/// `scripts/ovs_normal_vectors.py` against OVS 4.0.90): 40 random pipelines around `NORMAL`
/// (VLAN and source-MAC rewrites, outputs before it), 20 packets each from small pools of
/// MACs (broadcast, multicast and reserved destinations, VLANs, ARP), traced with
/// `ofproto/trace -generate`, which learns before the next packet. Every packet gets OVS's
/// datapath actions (flood order included) and megaflow, and the MAC table ends as OVS's.
#[test]
fn open_vswitch_normal_vectors() {
    let data = common::ovs_fixture("ovs-normal.json");
    let (mut packets, mut megaflows_equal) = (0, 0);
    let mut tr = Traversal::new();
    for case in data["cases"].as_array().unwrap() {
        let flows: Vec<&str> =
            case["flows"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
        let mut sw = switch(&flows.join("\n"), SwitchConfig::no_cache(), MacTable::default());
        let mut outputs = Vec::new();
        for (i, t) in case["packets"].as_array().unwrap().iter().enumerate() {
            let packet = t["packet"].as_str().unwrap();
            let k = parse_packet(packet).unwrap();
            sw.pipeline().process(&k, &mut tr);
            let got = format_dp_actions(&tr.dp_actions, &k);
            let got: Vec<String> = got
                .split(',')
                .map(|a| if a == "65534" { "100".to_string() } else { a.to_string() })
                .collect();
            assert_eq!(
                got.join(","),
                t["dp_actions"].as_str().unwrap(),
                "{packet} (packet {i}) through {flows:#?}"
            );
            let megaflow = format_match(&tr.megaflow.value, &tr.megaflow.mask);
            let same = common::megaflow_tokens(&megaflow)
                == common::megaflow_tokens(t["megaflow"].as_str().unwrap());
            if !same {
                eprintln!("{packet}: hyflow {megaflow}, OVS {}", t["megaflow"]);
            }
            megaflows_equal += same as usize;
            sw.process(&k, 64, i as u64 * 1_000, &mut outputs);
            packets += 1;
        }
        // `ovs-appctl fdb/show`: port, VLAN, MAC, age.
        let mut want: Vec<(u32, u16, String)> = case["fdb"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                let f: Vec<&str> = l.as_str().unwrap().split_whitespace().collect();
                let port = if f[0] == "LOCAL" { LOCAL_PORT } else { f[0].parse().unwrap() };
                (port, f[1].parse().unwrap(), f[2].to_string())
            })
            .collect();
        want.sort();
        // Every VLAN and source MAC the packets can carry.
        let mut got: Vec<(u32, u16, String)> = [0u16, 5, 7, 9]
            .into_iter()
            .flat_map(|vlan| (1..=6u64).map(move |m| (vlan, m)))
            .filter_map(|(vlan, m)| {
                let port = sw.pipeline().macs().lookup(vlan, m)?;
                Some((port, vlan, format!("00:00:00:00:00:{m:02x}")))
            })
            .collect();
        assert_eq!(got.len(), sw.pipeline().macs().len(), "only these MACs can be learned");
        got.sort();
        assert_eq!(got, want, "MAC table after {flows:#?}");
    }
    eprintln!("{packets} packets, {megaflows_equal} megaflows as OVS's");
    assert_eq!(packets, 800);
    assert_eq!(megaflows_equal, packets);
}

/// Every layer serves `NORMAL` as the uncached slow path would at that moment, while MACs are
/// learned, move between ports, are evicted from a small table and expire: 5,000 packets of a
/// few hosts, some silent for longer than the aging time.
#[test]
fn every_layer_learns_and_ages_macs_as_the_slow_path() {
    let run = |config: SwitchConfig| {
        let flows = "priority=0 actions=NORMAL\npriority=5,dl_vlan=7 actions=strip_vlan,NORMAL";
        let mut sw = switch(flows, config, MacTable::new(4_000_000_000, 8));
        let (mut seed, mut now) = (7u64, 0u64);
        let mut decisions = Vec::new();
        let mut outputs = Vec::new();
        for _ in 0..5_000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let r = seed >> 33;
            // Dense traffic, with a silence longer than the aging time now and then.
            now += if (seed >> 3) % 500 == 0 { 5_000_000_000 } else { (r % 100) * 1_000_000 };
            // Hosts stay on their port, but for an occasional move.
            let (src, dst) = (1 + r % 7, 1 + (r >> 8) % 8);
            let port = if (r >> 16) % 40 == 0 { 1 + (r >> 20) % 5 } else { 1 + src % 5 };
            let vlan = if (r >> 24) % 5 == 0 { ",dl_vlan=7" } else { "" };
            let dst =
                if dst == 8 { "ff:ff:ff:ff:ff:ff".to_string() } else { format!("00:00:00:00:00:{dst:02x}") };
            let k =
                parse_packet(&format!("in_port={port},dl_src=00:00:00:00:00:{src:02x},dl_dst={dst}{vlan}"))
                    .unwrap();
            let layer = sw.process(&k, 64, now, &mut outputs);
            decisions.push((layer, outputs.clone()));
        }
        (decisions, sw.stats())
    };
    let (want, reference) = run(SwitchConfig::no_cache());
    let (got, cached) = run(SwitchConfig::default());
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(w.1, g.1, "packet {i} via {:?}", g.0);
    }
    assert_eq!(reference.mac_changes, cached.mac_changes, "the same MAC table history");
    assert!(reference.mac_changes > 50, "only {} MAC table changes", reference.mac_changes);
    let hits = cached.nic_hits + cached.microflow_hits + cached.megaflow_hits;
    eprintln!("{} MAC table changes, {hits} cache hits", reference.mac_changes);
    assert!(hits > 2_500, "only {hits} cache hits");
}
