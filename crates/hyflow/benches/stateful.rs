//! What groups and learning cost. (1) The slow path through an `all` group of three buckets
//! against the same three outputs written inline (the baseline). (2) Megaflow-cache hits on an
//! L2 switch: `NORMAL` (every hit learns its source MAC again, by re-translation) against the
//! same forwarding written as one flow per destination MAC (the baseline, nothing to learn).
//! (3) Megaflow-cache hits through a stateful firewall: `ct(table=1)` then, in the second
//! pass, established connections forwarded (two cached passes and two trips through the
//! connection tracker per packet) against the same forwarding without conntrack.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hyflow::openflow::group::{parse_groups, Groups, SwitchPorts};
use hyflow::openflow::names::LOCAL_PORT;
use hyflow::openflow::normal::MacTable;
use hyflow::openflow::parser::parse_flows_named;
use hyflow::openflow::{parse_flows, parse_packet, Names, Pipeline, Traversal};
use hyflow::packet::FlowKey;
use hyflow::switch::{MicroflowConfig, Switch, SwitchConfig};

const BATCH: usize = 1024;
const HOSTS: u64 = 64;

/// Host `h`'s MAC and port (8 hosts per port).
fn host(h: u64) -> (String, u64) {
    (format!("00:00:00:00:{:02x}:{:02x}", h >> 8, h & 0xff), 1 + h % 8)
}

/// `BATCH` packets between random hosts (a fixed sequence).
fn packets() -> Vec<FlowKey> {
    let mut seed = 3u64;
    (0..BATCH)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let (src, dst) = ((seed >> 33) % HOSTS, (seed >> 45) % HOSTS);
            let ((smac, port), (dmac, _)) = (host(src), host(dst));
            parse_packet(&format!(
                "in_port={port},dl_src={smac},dl_dst={dmac},ip,nw_src=10.0.0.1,nw_dst=10.0.0.2"
            ))
            .unwrap()
        })
        .collect()
}

fn bench_groups(c: &mut Criterion) {
    let mut names = Names::new();
    let (groups, _) = parse_groups(
        "group_id=1,type=all,bucket=mod_dl_dst:00:00:00:00:00:09,output:2,bucket=output:3,bucket=output:4",
        "g",
        &mut names,
    )
    .unwrap();
    let rules = parse_flows_named("actions=group:1", "f", &mut names).unwrap();
    let grouped = Pipeline::of_switch(rules, groups, SwitchPorts::default(), MacTable::default());
    let inline = Pipeline::from_rules(
        parse_flows(
            "actions=mod_dl_dst:00:00:00:00:00:09,output:2,mod_dl_dst:00:00:00:00:00:00,output:3,output:4",
            "f",
        )
        .unwrap(),
    );
    let packets = packets();
    let mut group = c.benchmark_group("stateful");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(20);
    for (name, p) in [("slow_path/all_group_3_buckets", &grouped), ("slow_path/same_outputs_inline", &inline)]
    {
        group.bench_function(name, |b| {
            let mut tr = Traversal::new();
            b.iter(|| {
                let mut n = 0;
                for k in &packets {
                    p.process(black_box(k), &mut tr);
                    n += tr.outputs.len();
                }
                n
            })
        });
    }
    group.finish();
}

fn bench_normal(c: &mut Criterion) {
    let ports = SwitchPorts::new((1..=8).chain([LOCAL_PORT]), []);
    let config = SwitchConfig { nic: None, microflow: None::<MicroflowConfig>, ..SwitchConfig::default() };
    let switch = |flows: &str| {
        let rules = parse_flows(flows, "f").unwrap();
        let p = Pipeline::of_switch(rules, Groups::new(), ports.clone(), MacTable::default());
        Switch::new(p, config.clone()).unwrap()
    };
    let per_mac: String =
        (0..HOSTS).map(host).map(|(mac, port)| format!("dl_dst={mac} actions=output:{port}\n")).collect();
    let packets = packets();
    let mut group = c.benchmark_group("stateful");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(20);
    for (name, flows) in
        [("megaflow_hits/normal", "actions=NORMAL"), ("megaflow_hits/flow_per_mac", per_mac.as_str())]
    {
        // Warm: every host learned, every megaflow installed.
        let warm: Vec<FlowKey> = packets.iter().cycle().take(4 * BATCH).copied().collect();
        bench_hits(&mut group, name, switch(flows), &warm, &packets);
    }
    group.finish();
}

/// Packets of 64 established TCP connections, both directions, after their handshakes.
fn connections() -> (Vec<FlowKey>, Vec<FlowKey>) {
    let conn = |c: u64, flags: u16, reply: bool| {
        let (a, b, sp) = (format!("10.0.0.{}", 1 + c % 32), format!("10.1.0.{}", 1 + c / 32), 1000 + c);
        let text = if reply {
            format!("in_port=2,tcp,nw_src={b},nw_dst={a},tp_src=80,tp_dst={sp},tcp_flags={flags}")
        } else {
            format!("in_port=1,tcp,nw_src={a},nw_dst={b},tp_src={sp},tp_dst=80,tcp_flags={flags}")
        };
        parse_packet(&text).unwrap()
    };
    let handshakes =
        (0..HOSTS).flat_map(|c| [conn(c, 0x02, false), conn(c, 0x12, true), conn(c, 0x10, false)]).collect();
    let mut seed = 5u64;
    let traffic = (0..BATCH)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            conn((seed >> 33) % HOSTS, 0x10, (seed >> 50) & 1 == 1)
        })
        .collect();
    (handshakes, traffic)
}

fn bench_conntrack(c: &mut Criterion) {
    let config = SwitchConfig { nic: None, microflow: None::<MicroflowConfig>, ..SwitchConfig::default() };
    let firewall = "table=0,priority=10,ip,ct_state=-trk actions=ct(table=1,zone=1)\n\
        table=1,priority=10,ip,ct_state=+trk+new,in_port=1 actions=ct(commit,zone=1),output:2\n\
        table=1,priority=10,ip,ct_state=+trk+est,in_port=1 actions=output:2\n\
        table=1,priority=10,ip,ct_state=+trk+est,in_port=2 actions=output:1\n\
        table=1,priority=1 actions=drop";
    let stateless = "table=0,priority=10,ip,in_port=1 actions=output:2\n\
        table=0,priority=10,ip,in_port=2 actions=output:1";
    let (handshakes, traffic) = connections();
    let mut group = c.benchmark_group("stateful");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(20);
    for (name, flows) in
        [("megaflow_hits/conntrack_firewall", firewall), ("megaflow_hits/stateless", stateless)]
    {
        let sw = Switch::new(Pipeline::from_rules(parse_flows(flows, "f").unwrap()), config.clone()).unwrap();
        // Warm: every connection established, every megaflow installed.
        let warm: Vec<FlowKey> = handshakes.iter().chain(&traffic).copied().collect();
        bench_hits(&mut group, name, sw, &warm, &traffic);
    }
    group.finish();
}

/// Runs `warm` through `sw` (one packet per ns), then times `packets` through it.
fn bench_hits(
    group: &mut criterion::BenchmarkGroup<criterion::measurement::WallTime>,
    name: &str,
    mut sw: Switch,
    warm: &[FlowKey],
    packets: &[FlowKey],
) {
    let mut outputs = Vec::new();
    for (i, k) in warm.iter().enumerate() {
        sw.process(k, 64, i as u64, &mut outputs);
    }
    let mut now = warm.len() as u64 + BATCH as u64;
    group.bench_function(name, |b| {
        b.iter(|| {
            let mut n = 0;
            for k in packets {
                now += 1;
                sw.process(black_box(k), 64, now, &mut outputs);
                n += outputs.len();
            }
            n
        })
    });
}

criterion_group!(benches, bench_groups, bench_normal, bench_conntrack);
criterion_main!(benches);
