//! Synthetic rule sets and packets for the benchmarks (deterministic for a seed).

#![allow(dead_code)]

use hyflow::openflow::{parse_flows, Match, Rule};
use hyflow::packet::FlowKey;

/// SplitMix64: tiny, seeded, good enough to draw benchmark rules.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

fn ip(v: u32) -> String {
    std::net::Ipv4Addr::from(v).to_string()
}

/// Mask shapes: each is a set of fields with fixed prefix lengths, so `n_masks` shapes give
/// exactly `n_masks` subtables.
fn shape_fields(shape: usize, rng: &mut Rng, pkt: &FlowKey) -> String {
    let dst_len = [32u32, 24, 16, 8, 28, 20, 12, 30][shape % 8];
    let src_len = [0u32, 32, 24, 16][(shape / 8) % 4];
    let with_port = shape.is_multiple_of(3);
    let mut m = format!("tcp,nw_dst={}/{dst_len}", ip(pkt.nw_dst()));
    if src_len > 0 {
        m.push_str(&format!(",nw_src={}/{src_len}", ip(pkt.nw_src())));
    }
    if with_port {
        m.push_str(&format!(",tp_dst={}", pkt.tp_dst()));
    }
    if shape >= 32 {
        m.push_str(&format!(",in_port={}", 1 + rng.below(4)));
    }
    m
}

/// A random TCP packet from a pool of addresses.
pub fn random_packet(rng: &mut Rng) -> FlowKey {
    let mut k = FlowKey::default();
    k.set_in_port(1 + rng.below(4) as u32);
    k.set_dl_src(0x0200_0000_0000 | rng.below(1 << 16));
    k.set_dl_dst(0x0200_0000_0000 | rng.below(1 << 16));
    k.set_dl_type(0x0800);
    k.set_nw_src(0x0a00_0000 | rng.below(1 << 24) as u32);
    k.set_nw_dst(0x0a00_0000 | rng.below(1 << 24) as u32);
    k.set_nw_proto(6);
    k.set_nw_ttl(64);
    k.set_tp_src(1024 + rng.below(60000) as u16);
    k.set_tp_dst([80u16, 443, 22, 53, 8080][rng.below(5) as usize]);
    k
}

/// `n_rules` rules in one table over `n_masks` mask shapes, and packets of which about
/// half hit a rule (drawn from rule values) and half are random.
pub fn classifier_workload(
    n_rules: usize,
    n_masks: usize,
    n_packets: usize,
    seed: u64,
) -> (Vec<Rule>, Vec<FlowKey>) {
    let mut rng = Rng::new(seed);
    let mut text = String::new();
    let mut seeds = Vec::new();
    for i in 0..n_rules {
        let pkt = random_packet(&mut rng);
        let m = shape_fields(i % n_masks, &mut rng, &pkt);
        let prio = 1 + rng.below(1000);
        text.push_str(&format!("priority={prio},{m} actions=output:{}\n", 1 + rng.below(8)));
        seeds.push(pkt);
    }
    let rules = parse_flows(&text, "bench").expect("bench rules parse");
    let packets =
        (0..n_packets)
            .map(|i| {
                if i % 2 == 0 {
                    seeds[rng.below(seeds.len() as u64) as usize]
                } else {
                    random_packet(&mut rng)
                }
            })
            .collect();
    (rules, packets)
}

/// A 7-table L2/L3/ACL vSwitch pipeline with about `n_rules` rules, and packets that walk it:
/// 0 port classification, 1 VLAN, 2 L2 (MAC+VLAN → port), 3 L3 routes (prefixes),
/// 4 ACL (5-tuple with prefixes and port ranges), 5 QoS (DSCP), 6 egress.
pub fn l2l3acl_workload(n_rules: usize, n_packets: usize, seed: u64) -> (Vec<Rule>, Vec<FlowKey>) {
    let mut rng = Rng::new(seed);
    let mut t = String::new();
    let per = n_rules.saturating_sub(120) / 3;
    for port in 1..=16u32 {
        t.push_str(&format!(
            "table=0,priority=100,in_port={port} actions=load:{}->NXM_NX_REG0[],goto_table:1\n",
            1 + port % 4
        ));
    }
    t.push_str("table=0,priority=0 actions=drop\n");
    for tenant in 1..=4u32 {
        t.push_str(&format!(
            "table=1,priority=100,reg0={tenant},vlan_tci=0x0000/0x1000 actions=push_vlan:0x8100,mod_vlan_vid:{},goto_table:2\n",
            tenant * 10
        ));
    }
    t.push_str("table=1,priority=0 actions=drop\n");
    let mut macs = Vec::new();
    for i in 0..per {
        let mac = 0x0200_0000_0000u64 | (i as u64);
        macs.push(mac);
        let b = mac.to_be_bytes();
        t.push_str(&format!(
            "table=2,priority=100,dl_vlan={},dl_dst={:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} actions=load:{}->NXM_NX_REG1[],goto_table:3\n",
            10 * (1 + i % 4),
            b[2], b[3], b[4], b[5], b[6], b[7],
            1 + i % 16
        ));
    }
    t.push_str("table=2,priority=0 actions=goto_table:3\n");
    let mut routes = Vec::new();
    for _ in 0..per {
        let len = [8u32, 16, 20, 24, 24, 24, 28, 32][rng.below(8) as usize];
        let net = (0x0a00_0000 | rng.below(1 << 24) as u32) & (u32::MAX << (32 - len));
        routes.push(net);
        t.push_str(&format!(
            "table=3,priority={len},ip,nw_dst={}/{len} actions=dec_ttl,mod_dl_src:02:00:00:00:ff:fe,goto_table:4\n",
            ip(net)
        ));
    }
    t.push_str("table=3,priority=0 actions=goto_table:4\n");
    for _ in 0..per {
        let src_len = [8u32, 16, 24][rng.below(3) as usize];
        let src = (0x0a00_0000 | rng.below(1 << 24) as u32) & (u32::MAX << (32 - src_len));
        let port = [22u16, 80, 443, 53, 8080, 3306][rng.below(6) as usize];
        let verdict = if rng.below(4) == 0 { "drop".to_string() } else { "goto_table:5".to_string() };
        t.push_str(&format!(
            "table=4,priority={},tcp,nw_src={}/{src_len},tp_dst={port} actions={verdict}\n",
            100 + rng.below(100),
            ip(src)
        ));
    }
    t.push_str(
        "table=4,priority=1,tcp,tp_dst=0x8000/0x8000 actions=drop\ntable=4,priority=0 actions=goto_table:5\n",
    );
    for dscp in 0..64u32 {
        t.push_str(&format!(
            "table=5,priority=100,ip,ip_dscp={dscp} actions=mod_nw_tos:{},goto_table:6\n",
            (dscp % 8) * 4
        ));
    }
    t.push_str("table=5,priority=0 actions=goto_table:6\n");
    for port in 1..=16u32 {
        t.push_str(&format!("table=6,priority=100,reg1={port} actions=pop_vlan,output:{port}\n"));
    }
    t.push_str("table=6,priority=0 actions=drop\n");
    let rules = parse_flows(&t, "bench").expect("bench pipeline parses");
    let packets = (0..n_packets)
        .map(|_| {
            let mut k = random_packet(&mut rng);
            k.set_in_port(1 + rng.below(16) as u32);
            k.set_dl_dst(macs[rng.below(macs.len() as u64) as usize]);
            let r = routes[rng.below(routes.len() as u64) as usize];
            k.set_nw_dst(r | (rng.below(256) as u32 & 0xff));
            k.set_nw_tos((rng.below(64) as u8) << 2);
            k
        })
        .collect();
    (rules, packets)
}

/// `n_entries` megaflows over exactly `n_masks` masks, and for each the packet it was made
/// from. Like real megaflows they are disjoint: every mask pins `in_port` and entries of mask
/// `s` come from port `s + 1`.
pub fn megaflow_workload(n_entries: usize, n_masks: usize, seed: u64) -> (Vec<Match>, Vec<FlowKey>) {
    let mut rng = Rng::new(seed);
    let mut text = String::new();
    let mut packets = Vec::with_capacity(n_entries);
    for i in 0..n_entries {
        let shape = i % n_masks;
        let mut pkt = random_packet(&mut rng);
        pkt.set_in_port(shape as u32 + 1);
        let dst_len = [32u32, 24, 16, 8, 28, 20, 12, 30][shape % 8];
        let src_len = [0u32, 32, 24, 16][(shape / 8) % 4];
        text.push_str(&format!("in_port={},tcp,nw_dst={}/{dst_len}", shape + 1, ip(pkt.nw_dst())));
        if src_len > 0 {
            text.push_str(&format!(",nw_src={}/{src_len}", ip(pkt.nw_src())));
        }
        text.push_str(&format!(",tp_dst={} actions=drop\n", pkt.tp_dst()));
        packets.push(pkt);
    }
    let rules = parse_flows(&text, "bench").expect("bench megaflows parse");
    (rules.into_iter().map(|r| r.matcher()).collect(), packets)
}
