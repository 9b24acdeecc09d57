//! Random pipelines and packets for property tests, in the spirit of the OVS vector generator:
//! small value domains so that rules overlap and packets hit them.

#![allow(dead_code)]

use hyflow::openflow::group::{parse_groups, SwitchPorts};
use hyflow::openflow::names::LOCAL_PORT;
use hyflow::openflow::normal::MacTable;
use hyflow::openflow::parser::parse_flows_named;
use hyflow::openflow::update::{parse_updates_named, Update};
use hyflow::openflow::{parse_packet, Names, Pipeline};
use hyflow::packet::field::id;
use hyflow::packet::{FlowKey, FlowMask};
use proptest::prelude::*;

/// The groups every random pipeline may use (`group:1`..`group:6`): an all group whose
/// buckets rewrite, output and resubmit; select groups hashing fields (with a zero-weight
/// bucket), by OVS's default hash, and by `dp_hash` (recirculating; weighted, one bucket
/// watching a port that is down, one resubmitting); a fast-failover group whose first watched
/// port is down and whose last bucket watches a group; an indirect group that decrements the
/// TTL.
pub const GROUPS: &str = "\
group_id=1,type=all,bucket=mod_dl_src:00:00:00:00:00:09,output:1,bucket=output:2,output:3,\
bucket=load:2->NXM_NX_REG0[],resubmit(,1)
group_id=2,type=select,selection_method=hash,fields(ip_src,tcp_dst),bucket=output:1,\
bucket=weight:3,mod_nw_tos:32,output:2,bucket=weight:0,output:3
group_id=3,type=ff,bucket=watch_port:5,output:5,bucket=watch_port:4,mod_nw_dst:10.9.9.9,output:4,\
bucket=watch_group:2,group:2
group_id=4,type=indirect,bucket=dec_ttl,mod_vlan_vid:9,output:6
group_id=5,type=select,selection_method=hash,bucket=output:1,bucket=output:2,bucket=output:3
group_id=6,type=select,bucket=weight:50,output:1,bucket=weight:100,mod_dl_dst:00:00:00:00:00:07,output:2,\
bucket=weight:100,watch_port:5,output:5,bucket=weight:100,load:6->NXM_NX_REG1[],resubmit(,1)";

/// The switch of random pipelines: ports 1..6 and LOCAL, port 5 down.
pub fn switch_ports() -> SwitchPorts {
    SwitchPorts::new([1, 2, 3, 4, 5, 6, LOCAL_PORT], [5])
}

/// Names with [`GROUPS`] known.
pub fn names() -> Names {
    let mut names = Names::new();
    parse_groups(GROUPS, "groups", &mut names).expect("test groups parse");
    names
}

/// The pipeline of `flows` with [`GROUPS`] on [`switch_ports`].
pub fn pipeline_of(flows: &str) -> Pipeline {
    let mut names = Names::new();
    let (groups, _) = parse_groups(GROUPS, "groups", &mut names).expect("test groups parse");
    let rules = parse_flows_named(flows, "flows", &mut names).expect("test flows parse");
    Pipeline::of_switch(rules, groups, switch_ports(), MacTable::default())
}

/// Updates text whose rules may use [`GROUPS`].
pub fn updates_of(text: &str) -> Vec<Update> {
    parse_updates_named(text, "updates", &names()).expect("test updates parse")
}

pub const MACS: [&str; 6] = [
    "00:00:00:00:00:01",
    "00:00:00:00:00:02",
    "00:00:00:00:00:03",
    "02:00:00:00:01:01",
    "ff:ff:ff:ff:ff:ff",
    "01:00:5e:00:00:01",
];
const BASES: [[u8; 4]; 4] = [[10, 0, 0, 0], [10, 1, 0, 0], [192, 168, 1, 0], [172, 16, 5, 0]];
const PROTOS: [&str; 6] = ["", "ip", "tcp", "udp", "icmp", "ipv6"];

fn prefix() -> impl Strategy<Value = String> {
    (0..BASES.len(), prop::sample::select(vec![1u32, 8, 16, 24, 25, 28, 30, 32]), any::<u8>()).prop_map(
        |(b, len, host)| {
            let mut a = BASES[b];
            a[3] = host;
            let v = u32::from_be_bytes(a) & if len == 0 { 0 } else { u32::MAX << (32 - len) };
            let ip = std::net::Ipv4Addr::from(v);
            if len == 32 {
                ip.to_string()
            } else {
                format!("{ip}/{len}")
            }
        },
    )
}

fn ipv6_prefix() -> impl Strategy<Value = String> {
    (any::<u8>(), prop::sample::select(vec![16u32, 32, 48, 64, 128]))
        .prop_map(|(x, len)| format!("2001:db8:{x:x}::/{len}"))
}

/// A match for a rule in `table` (ovs-ofctl text, without priority/table).
pub fn arb_match(table: u8) -> impl Strategy<Value = (String, &'static str)> {
    (
        0..PROTOS.len(),
        prop::option::weighted(0.4, 1u32..5),
        prop::option::weighted(0.2, 0..MACS.len()),
        prop::option::weighted(0.2, 0..MACS.len()),
        prop::option::weighted(0.1, prop::sample::select(vec![7u16, 9])),
        prop::option::weighted(0.5, prefix()),
        prop::option::weighted(0.5, prefix()),
        prop::option::weighted(
            0.4,
            prop::sample::select(vec!["80", "443", "53", "0x40/0xfff0", "1000/0xff00"]),
        ),
        prop::option::weighted(0.3, prop::sample::select(vec!["1000", "2000", "0x400/0xfc00"])),
        prop::option::weighted(0.15, prop::sample::select(vec![0u8, 32, 64])),
        prop::option::weighted(0.4, 1u32..4),
        (
            prop::option::weighted(0.5, ipv6_prefix()),
            prop::option::weighted(
                0.3,
                prop::sample::select(vec![
                    "-trk",
                    "+trk",
                    "+trk+new",
                    "+trk+est",
                    "+trk+est+rpl",
                    "+trk-inv",
                    "+trk-new",
                    "+trk+dnat",
                    "+trk+snat",
                ]),
            ),
        ),
    )
        .prop_map(
            move |(p, port, src, dst, vlan, nw_src, nw_dst, tp_dst, tp_src, tos, reg0, (v6, ct))| {
                let proto = PROTOS[p];
                let mut m: Vec<String> = Vec::new();
                if !proto.is_empty() {
                    m.push(proto.to_string());
                }
                if let Some(x) = port {
                    m.push(format!("in_port={x}"));
                }
                if let Some(x) = src {
                    m.push(format!("dl_src={}", MACS[x]));
                }
                if let Some(x) = dst {
                    m.push(format!("dl_dst={}", MACS[x]));
                }
                if let Some(v) = vlan {
                    m.push(format!("dl_vlan={v}"));
                }
                let v4 = matches!(proto, "ip" | "tcp" | "udp" | "icmp");
                if v4 {
                    if let Some(x) = nw_src {
                        m.push(format!("nw_src={x}"));
                    }
                    if let Some(x) = nw_dst {
                        m.push(format!("nw_dst={x}"));
                    }
                    if let Some(t) = tos {
                        m.push(format!("nw_tos={t}"));
                    }
                }
                if proto == "ipv6" {
                    if let Some(x) = v6 {
                        m.push(format!("ipv6_dst={x}"));
                    }
                }
                if matches!(proto, "tcp" | "udp") {
                    if let Some(x) = tp_dst {
                        m.push(format!("tp_dst={x}"));
                    }
                    if let Some(x) = tp_src {
                        m.push(format!("tp_src={x}"));
                    }
                }
                if let (Some(state), true) = (ct, v4) {
                    m.push(format!("ct_state={state}"));
                }
                if let (Some(r), true) = (reg0, table > 0) {
                    m.push(format!("reg0={r}"));
                }
                (m.join(","), proto)
            },
        )
}

fn arb_action(proto: &'static str, table: u8, ntables: u8) -> impl Strategy<Value = String> {
    let l3 = matches!(proto, "ip" | "tcp" | "udp" | "icmp");
    let l4 = matches!(proto, "tcp" | "udp");
    (0u8..30, 0..MACS.len(), prefix(), 1u32..7, 0u8..4, prop::sample::select(vec![0u8, 32, 128])).prop_map(
        move |(kind, mac, ip, port, n, tos)| {
            let ip = ip.split('/').next().unwrap().to_string();
            match kind {
                0 => format!("mod_dl_src:{}", MACS[mac]),
                1 => format!("mod_dl_dst:{}", MACS[mac]),
                2 if l3 => format!("mod_nw_src:{ip}"),
                3 if l3 => format!("mod_nw_dst:{ip}"),
                4 if l3 => format!("mod_nw_tos:{tos}"),
                5 if l4 => format!("mod_tp_dst:{}", [80, 8080, 53, 443][n as usize]),
                6 => "dec_ttl".to_string(),
                7 => format!("load:{n}->NXM_NX_REG0[]"),
                8 => format!("push_vlan:0x8100,mod_vlan_vid:{}", [7, 9, 11, 7][n as usize]),
                9 => "pop_vlan".to_string(),
                10 => format!("mod_vlan_pcp:{}", n),
                11 if ntables > 1 => format!("resubmit(,{})", n % ntables),
                12 => format!("set_field:{}->dl_dst", MACS[mac]),
                13 => "move:NXM_NX_REG0[0..7]->NXM_NX_REG1[8..15]".to_string(),
                14 if table > 0 => format!("resubmit({port},{})", table - 1),
                16 | 17 | 19 => format!("group:{}", 1 + (port + n as u32) % 6),
                18 => ["FLOOD", "ALL", "NORMAL", "NORMAL"][n as usize].to_string(),
                // Flows learned into the pipeline's tables while it runs.
                20 => format!(
                    "learn(table={},priority={},hard_timeout={},NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[])",
                    n % ntables,
                    [5, 100, 300, 32768][n as usize],
                    n % 3
                ),
                21 => format!(
                    "learn(table={},NXM_OF_IN_PORT[],load:NXM_OF_ETH_SRC[0..31]->NXM_NX_REG1[])",
                    (n + 1) % ntables
                ),
                // Connection tracking: recirculation (to any table, so loops meet the depth
                // limit), commits with marks and NAT, clearing.
                22 if l3 => {
                    format!("ct(table={},zone={})", (table + 1 + n) % ntables, [0, 1, 1, 2][n as usize])
                }
                23 if l3 => {
                    format!("ct(commit,zone={},exec(set_field:{}->ct_mark))", [0, 1, 1, 2][n as usize], port)
                }
                24 if l3 => [
                    "ct(commit,nat(src=10.9.0.1-10.9.0.2:2000-2001))",
                    "ct(commit,zone=1,nat(dst=10.8.0.5:8080))",
                    "ct(nat)",
                    "ct(commit,force,zone=1,nat(dst=10.8.0.5))",
                ][n as usize]
                    .to_string(),
                25 if l3 => "ct_clear".to_string(),
                // The translation's stack: pushed fields popped later (maybe in another
                // table, another pass) into registers later tables match, or a header.
                26 => ["push:NXM_NX_REG0[]", "push:NXM_OF_ETH_SRC[]", "push:NXM_OF_IN_PORT[]", "push:NXM_NX_REG1[8..15]"]
                    [n as usize]
                    .to_string(),
                27 => ["pop:NXM_NX_REG1[]", "pop:NXM_NX_REG0[0..15]", "pop:NXM_OF_ETH_DST[]", "pop:NXM_NX_REG0[]"][n as usize]
                    .to_string(),
                // A copy of the packet and pipeline state: rewrites undone after, or the
                // connection tracker, which only the datapath's clone isolates.
                28 => format!("clone(set_field:{}->dl_dst,load:{n}->NXM_NX_REG0[],output:{port})", MACS[mac]),
                29 if l3 && ntables > 1 => {
                    format!("clone(ct(commit,zone={}),mod_nw_tos:{tos},resubmit(,{}))", n % 2, (table + 1) % ntables)
                }
                // A packet-in: such flows stay in the slow path, which the caches must respect.
                15 if n == 0 => "controller".to_string(),
                // To the port a register holds (0..3 after the loads above; 0 sends nothing).
                15 if n == 1 => "output:NXM_NX_REG0[0..15]".to_string(),
                _ => format!("output:{port}"),
            }
        },
    )
}

/// One rule line for `table` of a pipeline with `ntables` tables.
pub fn arb_rule(table: u8, ntables: u8) -> impl Strategy<Value = String> {
    arb_match(table).prop_flat_map(move |(m, proto)| {
        (
            Just(m),
            prop::sample::select(vec![1u16, 10, 100, 100, 200, 300, 32768]),
            prop::collection::vec(arb_action(proto, table, ntables), 0..4),
            prop::option::weighted(0.45, (table + 1)..ntables.max(table + 2)),
            prop::option::weighted(0.1, 1u64..4),
            prop::option::weighted(0.15, (any::<bool>(), 1u16..3)),
        )
            .prop_map(move |(m, prio, mut acts, goto, meta, timeout)| {
                if let Some(w) = meta {
                    acts.push(format!("write_metadata:{w:#x}/0xff"));
                }
                if let (Some(t), true) = (goto, table + 1 < ntables) {
                    acts.push(format!("goto_table:{t}"));
                }
                let acts = if acts.is_empty() { "drop".to_string() } else { acts.join(",") };
                let sep = if m.is_empty() { "" } else { "," };
                // Some rules expire (seconds: the tests that space packets out see it).
                let timeout = match timeout {
                    Some((true, t)) => format!(",idle_timeout={t}"),
                    Some((false, t)) => format!(",hard_timeout={t}"),
                    None => String::new(),
                };
                format!("table={table},priority={prio}{timeout}{sep}{m} actions={acts}")
            })
    })
}

/// A pipeline of 1..=4 tables with up to `max_rules` rules each, plus a low-priority
/// catch-all in some tables (as real pipelines have).
pub fn arb_pipeline(max_rules: usize) -> impl Strategy<Value = Vec<String>> {
    (1u8..5).prop_flat_map(move |ntables| {
        let tables: Vec<_> = (0..ntables)
            .map(|t| {
                (
                    prop::collection::vec(arb_rule(t, ntables), 1..max_rules),
                    any::<bool>(),
                    1u32..7,
                    prop::option::weighted(0.3, arb_conjunctive_rules(t, ntables)),
                )
                    .prop_map(move |(mut rules, catchall, port, conjunctive)| {
                        rules.extend(conjunctive.unwrap_or_default());
                        if catchall {
                            let next = if t + 1 < ntables {
                                format!(",goto_table:{}", t + 1)
                            } else {
                                String::new()
                            };
                            rules.push(format!("table={t},priority=0 actions=output:{port}{next}"));
                        }
                        rules
                    })
            })
            .collect();
        tables.prop_map(|ts| ts.into_iter().flatten().collect::<Vec<_>>())
    })
}

/// A packet built from the same small domains as the rules.
pub fn arb_packet() -> impl Strategy<Value = FlowKey> {
    (
        (
            1u32..5,
            0..MACS.len(),
            0..MACS.len(),
            prop::option::weighted(0.2, (prop::sample::select(vec![7u16, 9, 11]), 0u16..8)),
        ),
        (
            prop::sample::select(vec![0x0800u16, 0x0800, 0x0800, 0x0800, 0x86dd, 0x0806, 0x88cc]),
            prop::sample::select(vec![6u8, 6, 17, 1, 47]),
        ),
        (0..BASES.len(), any::<u8>(), 0..BASES.len(), any::<u8>()),
        (prop::sample::select(vec![0u8, 32, 64, 128]), prop::sample::select(vec![1u8, 2, 9, 64, 128])),
        (
            prop::sample::select(vec![1000u16, 2000, 1025, 40000]),
            prop::sample::select(vec![80u16, 443, 53, 0x45, 1000, 1100, 8080]),
        ),
        any::<u16>(),
    )
        .prop_map(|((port, s, d, vlan), (dl, nw), (bs, hs, bd, hd), (tos, ttl), (sp, dp), v6)| {
            let mut k = FlowKey::default();
            k.set_in_port(port);
            k.set_dl_src(mac(MACS[s]));
            k.set_dl_dst(mac(MACS[d]));
            if let Some((vid, pcp)) = vlan {
                k.set_vlan_tpid(0x8100);
                k.set_vlan_tci(0x1000 | vid | (pcp << 13));
            }
            k.set_dl_type(dl);
            let addr = |b: usize, h: u8| {
                let mut a = BASES[b];
                a[3] = h;
                u32::from_be_bytes(a)
            };
            match dl {
                0x0800 | 0x86dd => {
                    if dl == 0x0800 {
                        k.set_nw_src(addr(bs, hs));
                        k.set_nw_dst(addr(bd, hd));
                    } else {
                        k.set(id::IPV6_SRC, 0x2001_0db8_0000_0000_0000_0000_0000_0001);
                        k.set(id::IPV6_DST, 0x2001_0db8_0000_0000_0000_0000_0000_0000 | ((v6 as u128) << 80));
                    }
                    k.set_nw_proto(nw);
                    k.set_nw_tos(tos);
                    k.set_nw_ttl(ttl);
                    match nw {
                        6 | 17 => {
                            k.set_tp_src(sp);
                            k.set_tp_dst(dp);
                            if nw == 6 {
                                // SYN, SYN+ACK, ACK, FIN+ACK, RST, PSH+ACK, none (invalid).
                                let flags = [0x02u16, 0x12, 0x10, 0x11, 0x04, 0x18, 0][v6 as usize % 7];
                                k.set(id::TCP_FLAGS, flags as u128);
                            }
                        }
                        1 => {
                            k.set_tp_src(8);
                            k.set_tp_dst(0);
                        }
                        _ => {}
                    }
                }
                0x0806 => {
                    k.set(id::ARP_OP, 1);
                    k.set_nw_src(addr(bs, hs));
                    k.set_nw_dst(addr(bd, hd));
                }
                _ => {}
            }
            k
        })
}

pub fn mac(s: &str) -> u64 {
    u64::from_str_radix(&s.replace(':', ""), 16).unwrap()
}

/// Zeroes the fields a parsed packet could not have, so that randomised probes stay realistic.
pub fn canonical(k: FlowKey) -> FlowKey {
    let mut c = FlowKey::default();
    let keep = |c: &mut FlowKey, f| c.set(f, k.get(f));
    for f in [id::IN_PORT, id::TUN_ID, id::DL_SRC, id::DL_DST, id::DL_TYPE] {
        keep(&mut c, f);
    }
    if k.has_vlan() {
        keep(&mut c, id::VLAN_TCI);
        keep(&mut c, id::VLAN_TPID);
    }
    match k.dl_type() {
        0x0800 | 0x86dd => {
            if k.dl_type() == 0x0800 {
                keep(&mut c, id::NW_SRC);
                keep(&mut c, id::NW_DST);
            } else {
                keep(&mut c, id::IPV6_SRC);
                keep(&mut c, id::IPV6_DST);
                keep(&mut c, id::IPV6_LABEL);
            }
            for f in [id::NW_PROTO, id::NW_TOS, id::NW_TTL, id::NW_FRAG] {
                keep(&mut c, f);
            }
            match k.nw_proto() {
                6 | 17 | 132 => {
                    keep(&mut c, id::TP_SRC);
                    keep(&mut c, id::TP_DST);
                    if k.nw_proto() == 6 {
                        keep(&mut c, id::TCP_FLAGS);
                    }
                }
                1 | 58 => {
                    c.set_tp_src(k.tp_src() & 0xff);
                    c.set_tp_dst(k.tp_dst() & 0xff);
                }
                _ => {}
            }
        }
        0x0806 => {
            for f in [id::NW_SRC, id::NW_DST, id::ARP_OP, id::ARP_SHA, id::ARP_THA] {
                keep(&mut c, f);
            }
        }
        _ => {}
    }
    c
}

/// A packet inside `mask` around `base`: wildcarded packet bits drawn from `bits`.
pub fn probe_inside(base: &FlowKey, mask: &FlowMask, bits: &[u64]) -> FlowKey {
    let packet = FlowMask::packet_state();
    let mut k = *base;
    for w in 0..k.words.len() {
        let free = !mask.words[w] & packet.words[w];
        k.words[w] = (k.words[w] & !free) | (bits[w % bits.len()].rotate_left(w as u32 * 7) & free);
    }
    canonical(k)
}

/// Clauses in conjunction `id` (the same wherever the id appears).
fn clauses_of(id: u32) -> u32 {
    [2, 2, 3, 2][id as usize % 4]
}

/// Conjunctive matches for `table`: clause rules (`conjunction(id,k/n)`, ids 1..=3, some
/// rules clauses of two conjunctions) at a few priorities that meet the other rules', and
/// rules matching `conj_id=id` (some ids have none, so that a completed conjunction can lead
/// nowhere and lookups fall back).
pub fn arb_conjunctive_rules(table: u8, ntables: u8) -> impl Strategy<Value = Vec<String>> {
    // Broad matches, so that packets meet several clauses at once.
    let broad = prop::sample::select(vec![
        "",
        "ip",
        "tcp",
        "udp",
        "in_port=1",
        "in_port=2",
        "ip,nw_src=10.0.0.0/8",
        "ip,nw_dst=10.0.0.0/8",
        "ip,nw_src=10.1.0.0/16",
        "ip,nw_dst=192.168.1.0/24",
        "tcp,tp_dst=80",
        "dl_dst=00:00:00:00:00:02",
    ]);
    let clause = (
        prop_oneof![broad.prop_map(|m| (m.to_string(), "")), arb_match(table)],
        // Mostly the id's own priority (a conjunction's clauses share one), now and then another.
        prop::option::weighted(0.15, prop::sample::select(vec![10u16, 100, 200])),
        1u32..4,
        0u32..3,
        prop::option::weighted(0.2, (1u32..4, 0u32..3)),
    )
        .prop_map(move |((m, _), other_prio, id, k, second)| {
            let prio = other_prio.unwrap_or([100, 200, 100, 10][id as usize]);
            let mut acts = vec![format!("conjunction({id},{}/{})", k % clauses_of(id) + 1, clauses_of(id))];
            if let Some((id2, k2)) = second.filter(|(id2, _)| *id2 != id) {
                acts.push(format!("conjunction({id2},{}/{})", k2 % clauses_of(id2) + 1, clauses_of(id2)));
            }
            let sep = if m.is_empty() { "" } else { "," };
            format!("table={table},priority={prio}{sep}{m} actions={}", acts.join(","))
        });
    let target =
        (1u32..4, prop::sample::select(vec![10u16, 100, 300]), arb_action("", table, ntables), 1u32..7)
            .prop_map(move |(id, prio, act, port)| {
                format!("table={table},priority={prio},conj_id={id} actions={act},output:{port}")
            });
    (prop::collection::vec(clause, 0..14), prop::collection::vec(target, 0..5)).prop_map(|(mut a, b)| {
        a.extend(b);
        a
    })
}

/// `line` (a flow, or an update's flow) without its `learn(...)`, `NORMAL`, `ct(...)` and
/// `ct_clear` actions (and clones of `ct`) (`drop` if nothing is left): for tests whose reference cannot follow
/// when a queue lets flows or MACs be learned or connections change state.
pub fn without_state(line: &str) -> String {
    let Some((head, actions)) = line.split_once("actions=") else { return line.to_string() };
    let (mut kept, mut depth, mut start) = (Vec::new(), 0, 0);
    let bytes = actions.as_bytes();
    for i in 0..=bytes.len() {
        match bytes.get(i) {
            Some(b'(') => depth += 1,
            Some(b')') => depth -= 1,
            Some(b',') if depth == 0 => {
                kept.push(&actions[start..i]);
                start = i + 1;
            }
            None => kept.push(&actions[start..]),
            _ => {}
        }
    }
    let stateful = |a: &str| {
        a.starts_with("learn(")
            || a.starts_with("ct(")
            || a == "NORMAL"
            || a == "ct_clear"
            || (a.starts_with("clone(") && a.contains("ct("))
    };
    let kept: Vec<&str> = kept.into_iter().filter(|a| !stateful(a)).collect();
    let acts = if kept.is_empty() || kept == ["drop"] { "drop".to_string() } else { kept.join(",") };
    format!("{head}actions={acts}")
}

/// A JSON fixture of `tests/data` (vectors traced through Open vSwitch).
pub fn ovs_fixture(name: &str) -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A megaflow as a sorted list of its tokens, without what is not flow semantics: the
/// packet type OVS prints (`eth`) and hyflow's explicit VLAN presence
/// (`vlan_tci=0x0000/0x1000`, `vlan_tci=0x1000/0x1000`); LOCAL by number, as hyflow prints it.
pub fn megaflow_tokens(m: &str) -> Vec<String> {
    let mut v: Vec<String> = m
        .split(',')
        .filter(|t| !matches!(*t, "eth" | "vlan_tci=0x0000/0x1000" | "vlan_tci=0x1000/0x1000"))
        .map(|t| t.replace("in_port=LOCAL", "in_port=65534"))
        .collect();
    v.sort();
    v
}

/// Renumbers recirculation ids by first appearance, so that OVS's ids (global to its bridge
/// and never reused at once) and hyflow's compare.
pub struct Renumber(std::collections::HashMap<String, usize>);

impl Renumber {
    pub fn text(&mut self, s: &str) -> String {
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

/// Checks the passes of every packet of a fixture made by `scripts/ovs_ct_vectors.py` or
/// `scripts/ovs_stack_vectors.py` (`ofproto/trace --ct-next`): each pass's datapath actions and
/// megaflow as Open vSwitch's, recirculation ids renumbered. Returns (packets, passes, packets
/// that recirculated).
pub fn check_pass_vectors(fixture: &str) -> (usize, usize, usize) {
    use hyflow::openflow::dp_actions::format_dp_actions;
    use hyflow::openflow::parser::parse_flows;
    use hyflow::openflow::passes::trace_passes;
    use hyflow::packet::format::format_match;
    use std::collections::HashMap;
    let data = ovs_fixture(fixture);
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
                        megaflow_tokens(&ours.text(&m)),
                    )
                })
                .collect();
            let expected: Vec<(String, Vec<String>)> = want
                .iter()
                .map(|w| {
                    (
                        theirs.text(w["dp_actions"].as_str().unwrap()),
                        megaflow_tokens(&theirs.text(w["megaflow"].as_str().unwrap())),
                    )
                })
                .collect();
            assert_eq!(got, expected, "{text} --ct-next {:?} through {flows:#?}", v["ct_next"]);
            packets += 1;
            passes_seen += passes.len();
            recirculated += (passes.len() > 1) as usize;
        }
    }
    (packets, passes_seen, recirculated)
}

/// `--ct-next` states as a fixture lists them (`"trk,est"`).
fn ct_next(states: &serde_json::Value) -> Vec<u8> {
    use hyflow::packet::ct_state;
    states
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().split(',').map(|f| ct_state::parse(f).unwrap().0).fold(0, |a, b| a | b))
        .collect()
}
