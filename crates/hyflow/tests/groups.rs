//! Group tables (`group:N`) as Open vSwitch runs them: buckets as action sets on copies of
//! the packet, fast-failover liveness, select-group hashing, and the megaflows they leave.

mod common;

use hyflow::openflow::dp_actions::format_dp_actions;
use hyflow::openflow::group::{parse_groups, SwitchPorts};
use hyflow::openflow::names::LOCAL_PORT;
use hyflow::openflow::normal::MacTable;
use hyflow::openflow::parser::parse_flows_named;
use hyflow::openflow::{parse_packet, Names, Pipeline, Traversal};
use hyflow::packet::format::format_match;

/// A pipeline of `flows` using `groups`, on ports 1..5 and LOCAL with `down` down.
fn pipeline(groups: &str, flows: &str, down: &[u32]) -> Pipeline {
    let mut names = Names::new();
    let (groups, _) = parse_groups(groups, "groups", &mut names).unwrap();
    let rules = parse_flows_named(flows, "flows", &mut names).unwrap();
    let ports = SwitchPorts::new([1, 2, 3, 4, 5, LOCAL_PORT], down.iter().copied());
    Pipeline::of_switch(rules, groups, ports, MacTable::default())
}

/// Datapath actions as OVS prints them for its dummy datapath (LOCAL is datapath port 100).
fn dp_actions(p: &Pipeline, packet: &str, tr: &mut Traversal) -> String {
    let k = parse_packet(packet).unwrap();
    p.process(&k, tr);
    let s = format_dp_actions(&tr.dp_actions, &k);
    s.split(',').map(|a| if a == LOCAL_PORT.to_string() { "100" } else { a }).collect::<Vec<_>>().join(",")
}

/// OVS's datapath actions without its `userspace(...)` actions (packet-ins), and how many
/// there were.
fn without_userspace(actions: &str) -> (String, usize) {
    let (mut kept, mut removed, mut depth, mut start) = (Vec::new(), 0, 0, 0);
    let bytes = actions.as_bytes();
    for i in 0..=bytes.len() {
        match bytes.get(i) {
            Some(b'(') => depth += 1,
            Some(b')') => depth -= 1,
            Some(b',') if depth > 0 => {}
            Some(b',') | None => {
                let a = &actions[start..i];
                if a.starts_with("userspace(") {
                    removed += 1;
                } else {
                    kept.push(a);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    let kept = if kept.is_empty() { "drop".to_string() } else { kept.join(",") };
    (kept, removed)
}

/// Open vSwitch's own answers (`tests/data/ovs-groups.json`, made with
/// `scripts/ovs_group_vectors.py` against OVS 4.0.90): 60 random group tables (all, indirect,
/// fast failover watching ports and groups with some links down, select hashing random fields
/// under masks, weights and bases) used by two-table pipelines, 12 packets each. Every packet
/// gets OVS's datapath actions exactly — bucket choice, action-set order, the rollback of each
/// bucket's rewrites — and OVS's megaflow.
#[test]
fn open_vswitch_group_vectors() {
    let data = common::ovs_fixture("ovs-groups.json");
    let (mut packets, mut actions_equal, mut megaflows_equal) = (0, 0, 0);
    let mut tr = Traversal::new();
    for case in data["cases"].as_array().unwrap() {
        let lines = |k: &str| -> String {
            case[k].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect::<Vec<_>>().join("\n")
        };
        let down: Vec<u32> =
            case["ports_down"].as_array().unwrap().iter().map(|p| p.as_u64().unwrap() as u32).collect();
        let p = pipeline(&lines("groups"), &lines("flows"), &down);
        for t in case["packets"].as_array().unwrap() {
            let packet = t["packet"].as_str().unwrap();
            packets += 1;
            let got = dp_actions(&p, packet, &mut tr);
            // A TTL expiry is a packet-in (OVS: a userspace action; hyflow counts it).
            let (want, to_controller) = without_userspace(t["dp_actions"].as_str().unwrap());
            assert_eq!(tr.to_controller as usize, to_controller, "{packet}");
            if got != want {
                eprintln!("{packet}: hyflow {got}, OVS {want}\n{}\n{}", lines("groups"), lines("flows"));
                continue;
            }
            actions_equal += 1;
            let megaflow = format_match(&tr.megaflow.value, &tr.megaflow.mask);
            let same = common::megaflow_tokens(&megaflow)
                == common::megaflow_tokens(t["megaflow"].as_str().unwrap());
            if !same {
                eprintln!("{packet}: megaflow hyflow {megaflow}, OVS {}", t["megaflow"]);
            }
            megaflows_equal += same as usize;
        }
    }
    eprintln!("{packets} packets: {actions_equal} datapath actions and {megaflows_equal} megaflows as OVS's");
    assert_eq!(packets, 720);
    assert_eq!(actions_equal, packets);
    assert_eq!(megaflows_equal, packets);
}

/// The random pipelines of the differential tests (`replay_differential`, `properties`,
/// `policy_differential`) use `common::GROUPS` and `learn`: enough of their packets go through
/// a group, some through each kind, and enough learn flows, for those tests to check groups and
/// learning behind every cache.
/// Recirculation ids as a sequence: hyflow and OVS give them out in different orders (OVS's
/// also count what earlier cases used).
fn without_recirc_ids(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split("recirc(").enumerate() {
        if i > 0 {
            out.push_str("recirc(N");
            out.push_str(&part[part.find(')').unwrap_or(part.len())..]);
        } else {
            out.push_str(part);
        }
    }
    out
}

/// Open vSwitch's own answers on its default select method, `dp_hash`
/// (`tests/data/ovs-dp-hash.json`, made with `scripts/ovs_dp_hash_vectors.py` against OVS
/// 4.0.90): 25 random pipelines reaching select groups without a method, directly or through
/// resubmits, with actions around the group in every list, some after a `ct(table=1)` pass;
/// 12 packets each (TCP, UDP, ICMP, IPv6, ARP, some tagged), *received* by the userspace
/// datapath, which hashed them itself. Every packet takes OVS's passes with OVS's datapath
/// actions: a pass ends in `hash(sym_l4(0)),recirc(..)` (or, for weights 256 hash values
/// cannot share out, picks in one pass), the datapath's `dp_hash` is hyflow's bit for bit, and
/// the next pass resumes the frozen actions — with OVS's megaflow where `ofproto/trace` can
/// give it (a hash pass right after the first).
#[test]
fn open_vswitch_dp_hash_vectors() {
    use hyflow::openflow::passes::trace_passes;
    let data = common::ovs_fixture("ovs-dp-hash.json");
    let (mut packets, mut hashed, mut after_ct, mut megaflows) = (0, 0, 0, 0);
    let mut passes = Vec::new();
    for case in data["cases"].as_array().unwrap() {
        let lines = |k: &str| -> String {
            case[k].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect::<Vec<_>>().join("\n")
        };
        let p = pipeline(&lines("groups"), &lines("flows"), &[]);
        for t in case["packets"].as_array().unwrap() {
            let packet = t["packet"].as_str().unwrap();
            let want = t["passes"].as_array().unwrap();
            packets += 1;
            trace_passes(&p, &parse_packet(packet).unwrap(), &[], &mut passes);
            let context = format!("{packet}\n{}\n{}", lines("groups"), lines("flows"));
            assert_eq!(passes.len(), want.len(), "passes of {context}");
            for (i, (got, w)) in passes.iter().zip(want).enumerate() {
                let actions = format_dp_actions(&got.tr.dp_actions, &got.tr.entry);
                assert_eq!(
                    without_recirc_ids(&actions),
                    without_recirc_ids(w["dp_actions"].as_str().unwrap()),
                    "pass {i} of {context}"
                );
                let dp_hash = got.thaw.and_then(|t| t.dp_hash);
                assert_eq!(
                    dp_hash,
                    w["dp_hash"].as_u64().map(|h| h as u32),
                    "dp_hash of pass {i} of {context}"
                );
                hashed += dp_hash.is_some() as usize;
                after_ct += (dp_hash.is_some() && i > 1) as usize;
                if let Some(m) = w["megaflow"].as_str() {
                    let megaflow = format_match(&got.tr.megaflow.value, &got.tr.megaflow.mask);
                    let tokens = |m: &str| {
                        common::megaflow_tokens(m)
                            .into_iter()
                            .filter(|t| !t.starts_with("recirc_id="))
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(tokens(&megaflow), tokens(m), "megaflow of pass {i} of {context}");
                    megaflows += 1;
                }
            }
        }
    }
    eprintln!("{packets} packets, {hashed} passes after a dp_hash ({after_ct} after ct), {megaflows} megaflows: all as Open vSwitch");
    assert_eq!((packets, hashed, after_ct, megaflows), (300, 274, 69, 205));
}

#[test]
fn random_pipelines_exercise_every_group() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let config = Config { cases: 500, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    use std::cell::{Cell, RefCell};
    let (packets, through, learning) = (Cell::new(0u32), Cell::new(0u32), Cell::new(0u32));
    let by_group = RefCell::new([0u32; 6]);
    let tr = RefCell::new(Traversal::new());
    runner
        .run(
            &(common::arb_pipeline(10), prop::collection::vec(common::arb_packet(), 1..10)),
            |(lines, keys)| {
                let p = common::pipeline_of(&lines.join("\n"));
                let used: Vec<usize> =
                    (1..=6).filter(|g| lines.iter().any(|l| l.contains(&format!("group:{g}")))).collect();
                let mut tr = tr.borrow_mut();
                for k in &keys {
                    p.process(k, &mut tr);
                    packets.set(packets.get() + 1);
                    learning.set(learning.get() + !tr.learned.is_empty() as u32);
                    if tr.ran_on_copy {
                        through.set(through.get() + 1);
                        used.iter().for_each(|&g| by_group.borrow_mut()[g - 1] += 1);
                    }
                }
                Ok(())
            },
        )
        .unwrap();
    let (packets, through, by_group) = (packets.get(), through.get(), by_group.into_inner());
    // They learn flows too (`replay_differential` checks every layer learns as the slow path).
    assert!(learning.get() * 30 >= packets, "only {} of {packets} packets learned a flow", learning.get());
    eprintln!("{through} of {packets} packets through a group; per group (pipelines using it): {by_group:?}");
    assert!(through * 20 >= packets, "only {through} of {packets} packets went through a group");
    assert!(by_group.iter().all(|&n| n >= 50), "some group is rarely used: {by_group:?}");
}

/// A flow naming a group that does not exist, and a group file naming one, are errors with
/// file, line, column and token.
#[test]
fn missing_groups_are_located_errors() {
    let mut names = Names::new();
    parse_groups("group_id=1,type=all,bucket=output:1", "groups", &mut names).unwrap();
    let e = parse_flows_named("priority=1 actions=output:2\nin_port=1 actions=group:7", "flows", &mut names)
        .unwrap_err();
    assert_eq!(e.to_string(), "flows:2:19: group 7 does not exist (at 'group:7')");
    let e = parse_flows_named("actions=group:1", "flows", &mut Names::new()).unwrap_err();
    assert!(e.to_string().contains("give a groups file"), "{e}");
    let e = parse_groups("group_id=1,type=ff,bucket=watch_group:3,output:1", "groups", &mut Names::new())
        .unwrap_err();
    assert_eq!(e.to_string(), "groups:1:39: group 3 does not exist (at '3')");
    let e = parse_groups(
        "group_id=1,type=all,bucket=output:1\ngroup_id=1,type=all,bucket=output:2",
        "g",
        &mut Names::new(),
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "g:2:1: group 1 is defined twice (at 'group_id=1')");
}

/// Group files and `learn` actions never panic, whatever is done to them: thousands of valid
/// lines with random characters inserted, deleted or replaced (syntax characters weighted up)
/// load or fail with an error.
#[test]
fn mangled_groups_and_learn_actions_fail_cleanly() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    const SEEDS: [&str; 5] = [
        "group_id=1,type=all,bucket=output:1,output:2,bucket=mod_nw_src:9.9.9.9,output:3",
        "group_id=2,type=select,selection_method=hash,fields(ip_src=255.255.0.0,tcp_dst),selection_method_param=9,\
         bucket=bucket_id:0,weight:100,actions=output:1,bucket=watch_port:2,actions=group:1",
        "group_id=3,type=ff,bucket=watch_port:4,output:4,bucket=watch_group:2,group:2",
        "actions=learn(table=1,hard_timeout=60,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],\
         output:NXM_OF_IN_PORT[]),NORMAL",
        "ip actions=learn(table=2,eth_type=0x800,NXM_OF_IP_DST[]=NXM_OF_IP_SRC[],load:5->NXM_NX_REG1[],\
         load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15])",
    ];
    let chars: Vec<char> = "=,:()[]._->/ 0123456789abcxyzTL\"".chars().collect();
    let edit = (any::<prop::sample::Index>(), 0u8..3, prop::sample::select(chars));
    let strategy = (prop::sample::select(SEEDS.to_vec()), prop::collection::vec(edit, 1..6));
    let config = Config { cases: 5_000, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    runner
        .run(&strategy, |(seed, edits)| {
            let mut s: Vec<char> = seed.chars().collect();
            for (at, kind, c) in edits {
                let i = at.index(s.len() + 1);
                match kind {
                    0 => s.insert(i, c),
                    1 if i < s.len() => {
                        s.remove(i);
                    }
                    _ if i < s.len() => s[i] = c,
                    _ => s.push(c),
                }
            }
            let text: String = s.into_iter().collect();
            let mut names = Names::new();
            let _ = parse_groups(&format!("group_id=1,type=all,bucket=output:1\n{text}"), "g", &mut names);
            let _ = parse_flows_named(&text, "f", &mut names);
            Ok(())
        })
        .unwrap();
}
