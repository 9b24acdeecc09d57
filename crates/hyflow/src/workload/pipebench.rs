//! Pipebench-style workloads (Gigaflow §6.1): a multi-table rule set for a pipeline template
//! and traffic whose flows exercise it, with high or low pipeline-aware locality.
//!
//! **Rules.** `rules` ClassBench-like tuples are drawn (distributions below). Each tuple picks
//! one of the template's traversals uniformly (a traversal that ends in a drop only takes
//! tuples whose prefixes are /16 or longer: a broad deny would shadow the whole pipeline); for every table on that traversal it becomes
//! one rule matching the tuple's parts that table matches (its extra state match and actions
//! from the template), then `goto_table` to the next table on the traversal, or the
//! traversal's terminal action after the last one. Port ranges become masked matches (a
//! range expands into several rules, as in OVS); identical rules are written once, and a
//! rule whose table, priority and match repeat an earlier one replaces it (`ovs-ofctl
//! add-flows` semantics). Every table also gets its template miss rule at priority 0.
//! Priorities: longest-prefix tables rank by total prefix length; other tables rank more
//! specific rules first (prefix bits, exact ports, protocol, MACs), then by tuple order, so
//! that a broad rule does not shadow the rest, as real rule sets order them.
//!
//! **Tuples** (ClassBench ACL-like; shares are this model's, not a seed file's): protocol TCP
//! 70%, UDP 20%, ICMP 5%, any 5%; destination prefix /32 40%, /24 30%, /16 15%, /8 5%,
//! wildcard 10%; source prefix /32 30%, /28 10%, /24 25%, /16 10%, /8 5%, wildcard 20%;
//! destination port exact 65% (a well-known port 80%, else random), wildcard 15%, 1024–65535
//! 10%, 0–1023 5%, an arbitrary range 5%; source port wildcard 80%, 1024–65535 10%, exact
//! 10%. Addresses nest: prefixes are cut from 64 /16 networks of 10.0.0.0/8 so that rules
//! share prefixes as ClassBench's do. MACs come from a pool of 4,096 hosts, VLANs from 64.
//!
//! **Traffic.** `flows` flows; each flow's headers come from tuples, concretised (host bits of
//! a prefix, a port inside a range drawn at random). Low locality: all of a flow's parts from
//! one tuple drawn uniformly, so a flow's L2 values and its L3/L4 values always come
//! together and flows share sub-traversals only as often as they share whole tuples. High
//! locality: the L2 group (MACs, VLAN) and the L3/L4 group (addresses, protocol, ports) come
//! from two tuples drawn independently with Zipf(1.0) popularity over all tuples — popular
//! values recur across many flows in every table, in new combinations, which is what
//! sub-traversal caching exploits and whole-traversal caching cannot. (The L3/L4 group stays
//! together: ACL tables couple all of it.) Packets then follow
//! [`generate_flows`]: Zipf flow sizes, Poisson arrivals, CAIDA's trimodal frame sizes. All
//! of it is deterministic for a seed.

use std::fmt::Write as _;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Zipf};

use super::traffic::{generate_flows, GenPacket, TrafficConfig, TrafficError};
use crate::packet::field::proto;
use crate::packet::{parse_frame, FlowKey, LinkKind};

/// A part of a tuple a table can match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Ingress port.
    InPort,
    /// Source MAC.
    DlSrc,
    /// Destination MAC.
    DlDst,
    /// Destination MAC of a router port (one of 4): packets of a traversal that matches it
    /// carry it instead of their host MAC (routing then rewrites to the host MAC).
    RouterMac,
    /// VLAN id.
    Vlan,
    /// IPv4 source prefix.
    NwSrc,
    /// IPv4 destination prefix.
    NwDst,
    /// IP protocol.
    Proto,
    /// L4 source port range.
    TpSrc,
    /// L4 destination port range.
    TpDst,
    /// DSCP.
    Dscp,
}

/// One table of a template.
#[derive(Clone, Copy, Debug)]
pub struct TableSpec {
    /// OpenFlow table id.
    pub id: u8,
    /// Name in the documentation it models.
    pub name: &'static str,
    /// Tuple parts its rules match.
    pub parts: &'static [Part],
    /// Actions of its priority-0 miss rule (`drop`, `goto_table:N`, ...).
    pub miss: &'static str,
    /// Longest-prefix priorities rather than tuple order.
    pub lpm: bool,
}

/// One step of a traversal: a table, what its rules match besides tuple parts (pipeline
/// state, ovs-ofctl text, may be empty), and what they do before moving on. In `state` and
/// `actions`, `{port}` stands for the tuple's output port, `{mac}` for its host MAC,
/// `{vlan}` for its VLAN and `{vrf}` for its VRF (1–4).
#[derive(Clone, Copy, Debug)]
pub struct StepSpec {
    /// Table.
    pub table: u8,
    /// Extra match, e.g. `reg0={port}`.
    pub state: &'static str,
    /// Actions before the `goto_table`, e.g. `load:{port}->NXM_NX_REG1[]`.
    pub actions: &'static str,
    /// The traversal passes this table through its miss rule: no rule is generated.
    pub miss: bool,
}

/// A class of packets' path through the tables.
#[derive(Clone, Copy, Debug)]
pub struct TraversalSpec {
    /// What traffic takes it.
    pub name: &'static str,
    /// Tables in order, in pieces (traversals of one pipeline share long common runs).
    pub steps: &'static [&'static [StepSpec]],
    /// After the last table: `output` (a port from the tuple) or literal actions.
    pub terminal: &'static str,
}

impl TraversalSpec {
    /// Its steps, pieces joined.
    pub fn steps(&self) -> Vec<StepSpec> {
        self.steps.iter().flat_map(|piece| piece.iter().copied()).collect()
    }
}

/// A pipeline template.
#[derive(Clone, Copy, Debug)]
pub struct Template {
    /// Short name (`psc`, ...).
    pub name: &'static str,
    /// What it models, and from which documentation.
    pub description: &'static str,
    /// Tables.
    pub tables: &'static [TableSpec],
    /// Traversals.
    pub traversals: &'static [TraversalSpec],
    /// Rules continue to the next table in `tables` order (OVN's `next;`), so the tables
    /// between two steps are passed through their miss rules; otherwise rules jump to the
    /// next step's table.
    pub sequential: bool,
}

/// High or low pipeline-aware locality.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locality {
    /// Flows combine popular L2 values with popular L3/L4 values independently.
    High,
    /// Flows follow single uniformly chosen tuples.
    Low,
}

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PipebenchConfig {
    /// Tuples (rules before range expansion, per traversal table).
    pub rules: usize,
    /// Locality.
    pub locality: Locality,
    /// Traffic: flows, packets, Zipf exponent of flow sizes, rate, seed.
    pub traffic: TrafficConfig,
}

/// A ClassBench-like tuple.
#[derive(Clone, Copy, Debug)]
struct Tuple {
    dl_src: u64,
    dl_dst: u64,
    vlan: u16,
    nw_src: (u32, u8),
    nw_dst: (u32, u8),
    /// 0 = any.
    proto: u8,
    tp_src: (u16, u16),
    tp_dst: (u16, u16),
    dscp: u8,
    out_port: u32,
    router_mac: u64,
    traversal: usize,
}

impl Tuple {
    /// `text` with the tuple's placeholders filled in.
    fn fill(&self, text: &str) -> String {
        text.replace("{port}", &self.out_port.to_string())
            .replace("{mac}", &mac(self.dl_dst))
            .replace("{vlan}", &self.vlan.to_string())
            .replace("{vrf}", &(1 + self.vlan % 4).to_string())
    }
}

const WELL_KNOWN: [u16; 10] = [80, 443, 53, 22, 25, 8080, 3306, 123, 161, 6443];

fn pick<T: Copy>(rng: &mut StdRng, table: &[(u32, T)]) -> T {
    let total: u32 = table.iter().map(|(w, _)| w).sum();
    let mut x = rng.random_range(0..total);
    for &(w, v) in table {
        if x < w {
            return v;
        }
        x -= w;
    }
    table[table.len() - 1].1
}

fn prefix(rng: &mut StdRng, len: u8) -> (u32, u8) {
    // 64 /16 networks of 10.0.0.0/8, hosts clustered in a few /24s each: prefixes nest.
    let net = 0x0a00_0000 | (rng.random_range(0..64u32) << 16);
    let addr = net | (rng.random_range(0..16u32) << 8) | rng.random_range(0..256u32);
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len as u32) };
    (addr & mask, len)
}

fn port_range(rng: &mut StdRng, dst: bool) -> (u16, u16) {
    let kind = if dst {
        pick(rng, &[(65, 0u8), (15, 1), (10, 2), (5, 3), (5, 4)])
    } else {
        pick(rng, &[(80, 1u8), (10, 2), (10, 0)])
    };
    match kind {
        0 => {
            let p = if !dst || rng.random_range(0..10) >= 8 {
                rng.random_range(1024..=65535)
            } else {
                WELL_KNOWN[rng.random_range(0..WELL_KNOWN.len())]
            };
            (p, p)
        }
        1 => (0, 65535),
        2 => (1024, 65535),
        3 => (0, 1023),
        _ => {
            let lo = rng.random_range(1024..60000u16);
            (lo, lo + rng.random_range(1..4096))
        }
    }
}

fn tuple(rng: &mut StdRng, traversals: usize) -> Tuple {
    let proto = pick(rng, &[(70, proto::IP_TCP), (20, proto::IP_UDP), (5, proto::IP_ICMP), (5, 0)]);
    let l4 = matches!(proto, proto::IP_TCP | proto::IP_UDP);
    let src_len = pick(rng, &[(30, 32u8), (10, 28), (25, 24), (10, 16), (5, 8), (20, 0)]);
    let dst_len = pick(rng, &[(40, 32u8), (30, 24), (15, 16), (5, 8), (10, 0)]);
    Tuple {
        dl_src: 0x0200_0000_0000 | rng.random_range(0..4096u64),
        dl_dst: 0x0200_0000_0000 | rng.random_range(0..4096u64),
        vlan: rng.random_range(1..=64),
        nw_src: prefix(rng, src_len),
        nw_dst: prefix(rng, dst_len),
        proto,
        tp_src: if l4 { port_range(rng, false) } else { (0, 65535) },
        tp_dst: if l4 { port_range(rng, true) } else { (0, 65535) },
        dscp: pick(rng, &[(70, 0u8), (10, 10), (10, 26), (10, 46)]),
        out_port: rng.random_range(1..=16),
        router_mac: 0x0200_0000_ff00 | rng.random_range(0..4u64),
        traversal: rng.random_range(0..traversals),
    }
}

/// A port range as value/mask pairs (the minimal prefix cover).
fn range_masks(lo: u16, hi: u16) -> Vec<(u16, u16)> {
    let (mut lo, hi) = (lo as u32, hi as u32);
    let mut out = Vec::new();
    while lo <= hi {
        let mut size = if lo == 0 { 1 << 16 } else { 1 << lo.trailing_zeros().min(16) };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        out.push((lo as u16, (!(size - 1) & 0xffff) as u16));
        lo += size;
    }
    out
}

fn ip(v: u32) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::from(v)
}

fn mac(v: u64) -> String {
    let b = v.to_be_bytes();
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[2], b[3], b[4], b[5], b[6], b[7])
}

/// How specific a tuple's rule is on `parts`: prefix bits, 16 per exact port, 8 for a
/// protocol, 48 per exact MAC, 12 per VLAN (at most 208).
fn specificity(parts: &[Part], t: &Tuple) -> usize {
    let exact = |(lo, hi): (u16, u16)| if lo == hi { 16 } else { 0 };
    parts
        .iter()
        .map(|p| match p {
            Part::NwSrc => t.nw_src.1 as usize,
            Part::NwDst => t.nw_dst.1 as usize,
            Part::Proto => 8 * (t.proto != 0) as usize,
            Part::TpSrc => exact(t.tp_src),
            Part::TpDst => exact(t.tp_dst),
            Part::DlSrc | Part::DlDst | Part::RouterMac => 48,
            Part::Vlan => 12,
            Part::InPort | Part::Dscp => 8,
        })
        .sum::<usize>()
        .min(300)
}

/// Match texts for one table's rule from a tuple: one per port-mask combination.
fn matches(parts: &[Part], t: &Tuple) -> Vec<String> {
    let mut base: Vec<String> = Vec::new();
    let l3 = parts.iter().any(|p| {
        matches!(p, Part::NwSrc | Part::NwDst | Part::Proto | Part::TpSrc | Part::TpDst | Part::Dscp)
    });
    let l4 = parts.iter().any(|p| matches!(p, Part::TpSrc | Part::TpDst))
        && matches!(t.proto, proto::IP_TCP | proto::IP_UDP);
    if l4 {
        base.push(if t.proto == proto::IP_TCP { "tcp" } else { "udp" }.to_string());
    } else if parts.contains(&Part::Proto) && t.proto != 0 {
        base.push(format!("ip,nw_proto={}", t.proto));
    } else if l3 {
        base.push("ip".to_string());
    }
    let mut srcs = vec![String::new()];
    let mut dsts = vec![String::new()];
    for p in parts {
        match p {
            Part::InPort => base.push("in_port=1".to_string()),
            Part::DlSrc => base.push(format!("dl_src={}", mac(t.dl_src))),
            Part::DlDst => base.push(format!("dl_dst={}", mac(t.dl_dst))),
            Part::RouterMac => base.push(format!("dl_dst={}", mac(t.router_mac))),
            Part::Vlan => base.push(format!("dl_vlan={}", t.vlan)),
            Part::NwSrc if t.nw_src.1 > 0 => base.push(format!("nw_src={}/{}", ip(t.nw_src.0), t.nw_src.1)),
            Part::NwDst if t.nw_dst.1 > 0 => base.push(format!("nw_dst={}/{}", ip(t.nw_dst.0), t.nw_dst.1)),
            Part::Dscp => base.push(format!("ip_dscp={}", t.dscp)),
            Part::TpSrc if l4 && t.tp_src != (0, 65535) => {
                srcs = range_masks(t.tp_src.0, t.tp_src.1)
                    .iter()
                    .map(|(v, m)| format!(",tp_src={v:#x}/{m:#x}"))
                    .collect()
            }
            Part::TpDst if l4 && t.tp_dst != (0, 65535) => {
                dsts = range_masks(t.tp_dst.0, t.tp_dst.1)
                    .iter()
                    .map(|(v, m)| format!(",tp_dst={v:#x}/{m:#x}"))
                    .collect()
            }
            _ => {}
        }
    }
    let base = base.join(",");
    let mut out = Vec::new();
    for s in &srcs {
        for d in &dsts {
            out.push(format!("{base}{s}{d}"));
        }
    }
    out
}

fn tuples(template: &Template, rules: usize, seed: u64) -> Result<Vec<Tuple>, TrafficError> {
    if rules == 0 {
        return Err(TrafficError::Parameter("--rules must be at least 1"));
    }
    let mut rng = StdRng::seed_from_u64(seed ^ 0x7069_7065_6265_6e63);
    let forwarding: Vec<usize> =
        (0..template.traversals.len()).filter(|&i| template.traversals[i].terminal != "drop").collect();
    Ok((0..rules)
        .map(|_| {
            let mut t = tuple(&mut rng, template.traversals.len());
            // A broad deny would shadow the rest of the pipeline: denies take specific tuples.
            let broad = t.nw_src.1 < 16 || t.nw_dst.1 < 16;
            if broad && template.traversals[t.traversal].terminal == "drop" && !forwarding.is_empty() {
                t.traversal = forwarding[rng.random_range(0..forwarding.len())];
            }
            t
        })
        .collect())
}

fn rules_text(template: &Template, tuples: &[Tuple]) -> String {
    let mut out = format!(
        "# {}: {}\n# {} tuples (hyflow gen pipeline)\n",
        template.name,
        template.description,
        tuples.len()
    );
    let mut seen = hashbrown::HashSet::new();
    let n = tuples.len();
    for (i, t) in tuples.iter().enumerate() {
        let tr = &template.traversals[t.traversal];
        let steps = tr.steps();
        for (k, step) in steps.iter().enumerate() {
            let Some(table) = template.tables.iter().find(|x| x.id == step.table) else { continue };
            if step.miss {
                continue;
            }
            let priority = if table.parts.is_empty() {
                // Matches only pipeline state: one rule serves every tuple.
                1000
            } else if table.lpm {
                let lens = |p: &Part| match p {
                    Part::NwSrc => t.nw_src.1 as usize,
                    Part::NwDst => t.nw_dst.1 as usize,
                    _ => 0,
                };
                100 + table.parts.iter().map(lens).sum::<usize>()
            } else {
                // More specific rules first (as rule sets order them: a broad rule last), then
                // tuple order, within OpenFlow's 16-bit priorities.
                100 + specificity(table.parts, t) * 200 + (n - i) * 199 / n
            };
            let mut actions: Vec<String> = Vec::new();
            if !step.actions.is_empty() {
                actions.push(t.fill(step.actions));
            }
            let next_table = if template.sequential {
                steps
                    .get(k + 1)
                    .and_then(|_| template.tables.iter().find(|x| x.id > step.table))
                    .map(|x| x.id)
            } else {
                steps.get(k + 1).map(|s| s.table)
            };
            match next_table {
                Some(next) => actions.push(format!("goto_table:{next}")),
                None if tr.terminal == "output" => actions.push(format!("output:{}", t.out_port)),
                None => actions.push(t.fill(tr.terminal)),
            }
            let actions = actions.join(",");
            for m in matches(table.parts, t) {
                let mut matcher = m;
                if !step.state.is_empty() {
                    if !matcher.is_empty() {
                        matcher.push(',');
                    }
                    matcher.push_str(&t.fill(step.state));
                }
                let sep = if matcher.is_empty() { "" } else { "," };
                let line =
                    format!("table={},priority={priority}{sep}{matcher} actions={actions}\n", table.id);
                if seen.insert(line.clone()) {
                    out.push_str(&line);
                }
            }
        }
    }
    for table in template.tables {
        let _ = writeln!(out, "table={},priority=0 actions={}", table.id, table.miss);
    }
    out
}

/// Per traversal, whether it goes through a router-MAC table (its packets carry that MAC).
fn routed(template: &Template) -> Vec<bool> {
    template
        .traversals
        .iter()
        .map(|tr| {
            tr.steps().iter().any(|s| {
                !s.miss
                    && template.tables.iter().any(|t| t.id == s.table && t.parts.contains(&Part::RouterMac))
            })
        })
        .collect()
}

/// A packet with the L2 parts of `l2` and the L3/L4 parts of `l3`, prefixes and ranges
/// concretised; canonical (what parsing its frame gives back).
fn packet(routed: &[bool], rng: &mut StdRng, l2: &Tuple, l3: &Tuple) -> FlowKey {
    let mut k = FlowKey::default();
    k.set_in_port(1);
    k.set_dl_src(l2.dl_src);
    k.set_dl_dst(if routed[l2.traversal] { l2.router_mac } else { l2.dl_dst });
    k.set_vlan_tpid(proto::ETH_VLAN);
    k.set_vlan_tci(proto::VLAN_CFI | l2.vlan);
    k.set_dl_type(proto::ETH_IPV4);
    let host = |rng: &mut StdRng, (a, len): (u32, u8)| {
        if len >= 32 {
            a
        } else {
            a | (rng.random_range(0..=u32::MAX) >> len)
        }
    };
    k.set_nw_src(host(rng, l3.nw_src));
    k.set_nw_dst(host(rng, l3.nw_dst));
    let p = if l3.proto == 0 { proto::IP_TCP } else { l3.proto };
    k.set_nw_proto(p);
    k.set_nw_ttl(64);
    k.set_nw_tos(l3.dscp << 2);
    match p {
        proto::IP_TCP | proto::IP_UDP => {
            k.set_tp_src(rng.random_range(l3.tp_src.0..=l3.tp_src.1));
            k.set_tp_dst(rng.random_range(l3.tp_dst.0..=l3.tp_dst.1));
            if p == proto::IP_TCP {
                k.set(crate::packet::field::id::TCP_FLAGS, 0x010);
            }
        }
        _ => k.set_tp_src(8),
    }
    let frame = crate::packet::build::build_frame(&k, 60);
    let mut canonical = FlowKey::default();
    let _ = parse_frame(&frame, LinkKind::Ethernet, 1, &mut canonical);
    canonical
}

/// A Pipebench workload: the flow file's text, and the trace handed to `sink` packet by packet.
pub fn pipebench(
    template: &Template,
    config: &PipebenchConfig,
    sink: impl FnMut(GenPacket) -> std::io::Result<()>,
) -> Result<(String, std::io::Result<()>), TrafficError> {
    let tuples = tuples(template, config.rules, config.traffic.seed)?;
    let text = rules_text(template, &tuples);
    if config.traffic.flows == 0 {
        return Err(TrafficError::Parameter("--flows-count must be at least 1"));
    }
    let mut rng = StdRng::seed_from_u64(config.traffic.seed ^ 0x666c_6f77_7321);
    let routed = routed(template);
    let zipf = Zipf::new(tuples.len() as f64, 1.0).map_err(|_| TrafficError::Parameter("bad popularity"))?;
    let keys: Vec<FlowKey> = (0..config.traffic.flows)
        .map(|_| match config.locality {
            Locality::Low => {
                let t = &tuples[rng.random_range(0..tuples.len())];
                packet(&routed, &mut rng, t, t)
            }
            Locality::High => {
                let mut draw = || tuples[(zipf.sample(&mut rng) as usize).clamp(1, tuples.len()) - 1];
                let (l2, l3) = (draw(), draw());
                packet(&routed, &mut rng, &l2, &l3)
            }
        })
        .collect();
    let written = generate_flows(&keys, &config.traffic, sink)?;
    Ok((text, written))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_become_minimal_prefix_covers() {
        assert_eq!(range_masks(80, 80), vec![(80, 0xffff)]);
        assert_eq!(range_masks(0, 65535), vec![(0, 0)]);
        assert_eq!(range_masks(1024, 65535).len(), 6);
        assert_eq!(range_masks(0, 1023), vec![(0, 0xfc00)]);
        for (lo, hi) in [(1000u16, 1100u16), (3, 17), (40000, 65535)] {
            let cover = range_masks(lo, hi);
            for p in 0..=65535u16 {
                let inside = cover.iter().filter(|(v, m)| p & m == *v).count();
                assert_eq!(inside, (lo..=hi).contains(&p) as usize, "port {p} in {lo}..={hi}");
            }
        }
    }
}
