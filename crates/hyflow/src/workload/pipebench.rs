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
//! **Header pool** (the artifact's `ruleset.traffic`, `docs/gigaflow-paper-setup.md` §5):
//! `headers` IPv4 headers (default 100,000: the paper's "100K unique flows"), fixed for the
//! whole trace. Low locality: line i takes every part from one tuple — tuple i for the first
//! `rules` lines, then uniformly drawn ones — with its own host bits and ports (inside the
//! tuple's prefixes and ranges, at random), so lines share rule-relevant values only as
//! their tuples do: about `rules` distinct decisions, which whole-traversal caching handles
//! as well as any. High locality: each tuple's values are made concrete once, so every line
//! drawing a tuple carries exactly its values (they recur, and sub-traversals are shared);
//! line i picks a
//! traversal (that of a tuple drawn with Zipf(`popularity`) over all tuples), then draws one
//! tuple per *value group* of that traversal, independently, with Zipf(`popularity`) over the
//! traversal's tuples, and takes each group's parts from its tuple: popular per-table values
//! recur across many lines, in new combinations — what sub-traversal caching exploits and
//! whole-traversal caching cannot. Value groups: parts one of the traversal's tables matches
//! together are drawn together (a rule matches its tuple's values only together: OLS's port
//! security couples the source MAC with the source IP), and the L3/L4 parts always form one
//! group (ACLs match them as one tuple). So PSC's routed traversal has two groups (MACs and
//! VLAN; addresses, protocol and ports), OLS's three or fewer (source MAC with L3/L4,
//! destination MAC, ...).
//!
//! **Trace** ([`Pipebench::fold`]): packets take their flow and time from a source numbered
//! in order of first appearance — the CAIDA-like model of [`super::flow_arrivals`] or a
//! user's capture — and flow f gets the header of pool line `f mod headers`, as the artifact's
//! generator folds CAIDA's 5-tuples onto `ruleset.traffic`. Packets are 64 bytes, as the
//! artifact's are. All of it is deterministic for a seed.

use std::fmt::Write as _;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Zipf};

use super::flow_arrivals::PacketSlot;
use super::traffic::{GenPacket, TrafficError};
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
    /// Pool headers combine popular values of each value group independently.
    High,
    /// Each pool header follows its own tuple.
    Low,
}

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PipebenchConfig {
    /// Tuples (rules before range expansion, per traversal table).
    pub rules: usize,
    /// Header pool lines.
    pub headers: usize,
    /// Locality.
    pub locality: Locality,
    /// Zipf exponent of tuple popularity (high locality).
    pub popularity: f64,
    /// RNG seed.
    pub seed: u64,
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
        return Err(TrafficError::param("rules", "must be at least 1"));
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

/// Every part, in `Part` order.
const PARTS: [Part; 11] = [
    Part::InPort,
    Part::DlSrc,
    Part::DlDst,
    Part::RouterMac,
    Part::Vlan,
    Part::NwSrc,
    Part::NwDst,
    Part::Proto,
    Part::TpSrc,
    Part::TpDst,
    Part::Dscp,
];

/// The value groups of a traversal: per part, the group it is drawn with. Parts one of the
/// tables the traversal looks up examines together are coupled (a rule matches their values
/// only as its tuple has them together: OLS's port security matches the source MAC with the
/// source IP) — a table passed through its miss rule too, since its lookup still examines
/// every field its rules match, and in a sequential template every table between the
/// traversal's first and last. The L3/L4 parts are always one group (ACLs match them as one
/// tuple), a router MAC is the destination MAC field, and the ingress port, the same for
/// every packet, couples nothing.
fn value_groups(template: &Template, traversal: &TraversalSpec) -> [usize; PARTS.len()] {
    let mut group: [usize; PARTS.len()] = std::array::from_fn(|i| i);
    fn root(group: &mut [usize], mut i: usize) -> usize {
        while group[i] != i {
            group[i] = group[group[i]];
            i = group[i];
        }
        i
    }
    let join = |group: &mut [usize], a: Part, b: Part| {
        let (ra, rb) = (root(group, a as usize), root(group, b as usize));
        group[ra.max(rb)] = ra.min(rb);
    };
    for p in [Part::NwDst, Part::Proto, Part::TpSrc, Part::TpDst, Part::Dscp] {
        join(&mut group, Part::NwSrc, p);
    }
    join(&mut group, Part::DlDst, Part::RouterMac);
    let steps = traversal.steps();
    let looked_up: Vec<&TableSpec> = match (template.sequential, steps.first(), steps.last()) {
        (true, Some(first), Some(last)) => {
            template.tables.iter().filter(|t| (first.table..=last.table).contains(&t.id)).collect()
        }
        _ => steps.iter().filter_map(|s| template.tables.iter().find(|t| t.id == s.table)).collect(),
    };
    for table in looked_up {
        let mut parts = table.parts.iter().copied().filter(|&p| p != Part::InPort);
        if let Some(first) = parts.next() {
            parts.for_each(|p| join(&mut group, first, p));
        }
    }
    std::array::from_fn(|i| root(&mut group, i))
}

/// A tuple's L3/L4 values made concrete, once: host bits of its prefixes and ports inside its
/// ranges, at random — so every header drawing the tuple carries exactly the same values.
#[derive(Clone, Copy, Debug)]
struct Concrete {
    nw_src: u32,
    nw_dst: u32,
    proto: u8,
    tp_src: u16,
    tp_dst: u16,
}

fn concrete(rng: &mut StdRng, t: &Tuple) -> Concrete {
    let host = |rng: &mut StdRng, (a, len): (u32, u8)| {
        if len >= 32 {
            a
        } else {
            a | (rng.random_range(0..=u32::MAX) >> len)
        }
    };
    let proto = if t.proto == 0 { proto::IP_TCP } else { t.proto };
    let l4 = matches!(proto, proto::IP_TCP | proto::IP_UDP);
    Concrete {
        nw_src: host(rng, t.nw_src),
        nw_dst: host(rng, t.nw_dst),
        proto,
        tp_src: if l4 { rng.random_range(t.tp_src.0..=t.tp_src.1) } else { 8 },
        tp_dst: if l4 { rng.random_range(t.tp_dst.0..=t.tp_dst.1) } else { 0 },
    }
}

/// A header with each part's value from the tuple `source` gives for it (index into
/// `tuples` and `concrete`); canonical (what parsing its frame gives back).
fn header(routed: bool, tuples: &[Tuple], concrete: &[Concrete], source: impl Fn(Part) -> usize) -> FlowKey {
    let mut k = FlowKey::default();
    k.set_in_port(1);
    k.set_dl_src(tuples[source(Part::DlSrc)].dl_src);
    k.set_dl_dst(if routed {
        tuples[source(Part::RouterMac)].router_mac
    } else {
        tuples[source(Part::DlDst)].dl_dst
    });
    k.set_vlan_tpid(proto::ETH_VLAN);
    k.set_vlan_tci(proto::VLAN_CFI | tuples[source(Part::Vlan)].vlan);
    k.set_dl_type(proto::ETH_IPV4);
    // The L3/L4 parts are one group: one tuple.
    let l3 = source(Part::NwSrc);
    let c = &concrete[l3];
    k.set_nw_src(c.nw_src);
    k.set_nw_dst(c.nw_dst);
    k.set_nw_proto(c.proto);
    k.set_nw_ttl(64);
    k.set_nw_tos(tuples[l3].dscp << 2);
    k.set_tp_src(c.tp_src);
    if matches!(c.proto, proto::IP_TCP | proto::IP_UDP) {
        k.set_tp_dst(c.tp_dst);
        if c.proto == proto::IP_TCP {
            k.set(crate::packet::field::id::TCP_FLAGS, 0x010);
        }
    }
    let frame = crate::packet::build::build_frame(&k, FRAME_LEN);
    let mut canonical = FlowKey::default();
    let _ = parse_frame(&frame, LinkKind::Ethernet, 1, &mut canonical);
    canonical
}

/// Frame bytes of every packet, FCS excluded: 64-byte packets on the wire, as the artifact's
/// traffic generator sends.
pub(crate) const FRAME_LEN: usize = 60;

/// The header pool: `config.headers` headers, as the artifact's `ruleset.traffic` (see the
/// module notes for how locality shapes it).
fn header_pool(
    template: &Template,
    tuples: &[Tuple],
    config: &PipebenchConfig,
) -> Result<Vec<FlowKey>, TrafficError> {
    let mut rng = StdRng::seed_from_u64(config.seed ^ 0x666c_6f77_7321);
    let routed = routed(template);
    if config.headers == 0 {
        return Err(TrafficError::param("headers", "must be at least 1"));
    }
    if config.locality == Locality::Low {
        // Every tuple first, then uniformly drawn ones; each line its own host bits and ports
        // (a line that repeats one is drawn again, from any tuple).
        return Ok(distinct_lines(config.headers, &mut rng, |rng, i| {
            let t = if i < tuples.len() { i } else { rng.random_range(0..tuples.len()) };
            let c = [concrete(rng, &tuples[t])];
            header(routed[tuples[t].traversal], &tuples[t..=t], &c, |_| 0)
        }));
    }
    let concrete: Vec<Concrete> = tuples.iter().map(|t| concrete(&mut rng, t)).collect();
    let bad = TrafficError::param("zipf", "must be a non-negative exponent");
    let popularity = |n: usize| Zipf::new(n as f64, config.popularity).map_err(|_| bad.clone());
    let all = popularity(tuples.len())?;
    let mut on: Vec<Vec<usize>> = vec![Vec::new(); template.traversals.len()];
    tuples.iter().enumerate().for_each(|(i, t)| on[t.traversal].push(i));
    let per_traversal: Vec<Option<Zipf<f64>>> = on
        .iter()
        .map(|ids| (!ids.is_empty()).then(|| popularity(ids.len())).transpose())
        .collect::<Result<_, _>>()?;
    let groups: Vec<_> = template.traversals.iter().map(|tr| value_groups(template, tr)).collect();
    let draw = |rng: &mut StdRng, z: &Zipf<f64>, n: usize| (z.sample(rng) as usize).clamp(1, n) - 1;
    Ok(distinct_lines(config.headers, &mut rng, |rng, _| {
        let t = tuples[draw(rng, &all, tuples.len())].traversal;
        let (ids, zipf) = (&on[t], per_traversal[t].as_ref().expect("a drawn tuple's traversal has tuples"));
        // One tuple per value group, drawn by popularity among the traversal's tuples.
        let mut by_group = [0usize; PARTS.len()];
        for (part, &g) in groups[t].iter().enumerate() {
            if g == part {
                by_group[g] = ids[draw(rng, zipf, ids.len())];
            }
        }
        header(routed[t], tuples, &concrete, |p: Part| by_group[groups[t][p as usize]])
    }))
}

/// `headers` lines from `line(rng, i)`, distinct as Pipebench's and ClassBench's mapper's
/// are: a line that repeats an earlier one is drawn again (as line `usize::MAX`, "any"), up to
/// [`DISTINCT_TRIES`] times. In high locality values keep recurring per group; whole headers
/// do not, so that distinct flows carry distinct headers.
fn distinct_lines(
    headers: usize,
    rng: &mut StdRng,
    mut line: impl FnMut(&mut StdRng, usize) -> FlowKey,
) -> Vec<FlowKey> {
    let mut seen = std::collections::HashSet::with_capacity(headers);
    (0..headers)
        .map(|i| {
            let mut k = line(rng, i);
            for _ in 1..DISTINCT_TRIES {
                if !seen.contains(&k) {
                    break;
                }
                k = line(rng, usize::MAX);
            }
            seen.insert(k);
            k
        })
        .collect()
}

/// Draws a line gets before a repeat is kept (a pool larger than the headers its tuples
/// allow).
const DISTINCT_TRIES: usize = 64;

/// The pool as text: one line per header, numbered as the trace's flows are folded onto them.
fn pool_text(template: &Template, pool: &[FlowKey], locality: Locality) -> String {
    let mut out = format!(
        "# {}: header pool ({} lines, {locality:?} locality; hyflow gen pipeline)\n\
         # line eth_src eth_dst vlan ip_proto ip_src ip_dst tp_src tp_dst dscp\n",
        template.name,
        pool.len()
    );
    for (i, k) in pool.iter().enumerate() {
        let _ = writeln!(
            out,
            "{i} {} {} {} {} {} {} {} {} {}",
            mac(k.dl_src()),
            mac(k.dl_dst()),
            k.vlan_tci() & 0x0fff,
            k.nw_proto(),
            ip(k.nw_src()),
            ip(k.nw_dst()),
            k.tp_src(),
            k.tp_dst(),
            k.nw_tos() >> 2
        );
    }
    out
}

/// A Pipebench workload: the rules, the header pool, and the pool as `traffic.txt`.
#[derive(Clone, Debug)]
pub struct Pipebench {
    /// The flow file's text.
    pub flows: String,
    /// The header pool, line by line.
    pub pool: Vec<FlowKey>,
    /// The pool as `traffic.txt`.
    pub traffic: String,
}

impl Pipebench {
    /// The trace: each packet of `slots` takes the pool header of line `flow mod pool size`
    /// (flows numbered in order of first appearance, as the artifact's traffic generator
    /// folds CAIDA's 5-tuples onto `ruleset.traffic`), at the slot's time, as a 64-byte
    /// packet. Returns the packets written.
    pub fn fold(
        &self,
        slots: impl Iterator<Item = PacketSlot>,
        mut sink: impl FnMut(GenPacket) -> std::io::Result<()>,
    ) -> std::io::Result<u64> {
        let frames: Vec<Vec<u8>> =
            self.pool.iter().map(|k| crate::packet::build::build_frame(k, FRAME_LEN)).collect();
        let mut n = 0;
        for slot in slots {
            let line = slot.flow % frames.len();
            sink(GenPacket { ts_ns: slot.ts_ns, flow: slot.flow, frame: frames[line].clone() })?;
            n += 1;
        }
        Ok(n)
    }
}

/// The rules and header pool of a Pipebench workload for `template`.
pub fn pipebench(template: &Template, config: &PipebenchConfig) -> Result<Pipebench, TrafficError> {
    let tuples = tuples(template, config.rules, config.seed)?;
    let flows = rules_text(template, &tuples);
    let pool = header_pool(template, &tuples, config)?;
    let traffic = pool_text(template, &pool, config.locality);
    Ok(Pipebench { flows, pool, traffic })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coupled_parts_are_drawn_together() {
        use crate::workload::pipelines::{OLS, PSC};
        let groups = |t: &Template, name: &str| {
            value_groups(t, t.traversals.iter().find(|tr| tr.name == name).expect("known traversal"))
        };
        let psc = groups(&PSC, "routed IPv4");
        let same = |g: &[usize; 11], a: Part, b: Part| g[a as usize] == g[b as usize];
        assert!(same(&psc, Part::DlSrc, Part::Vlan) && same(&psc, Part::DlSrc, Part::RouterMac));
        assert!(same(&psc, Part::NwSrc, Part::TpDst) && !same(&psc, Part::DlSrc, Part::NwSrc));
        // OLS's port security matches the source MAC with the source IP.
        let ols = groups(&OLS, "unicast to a known MAC, no ACL or LB");
        assert!(same(&ols, Part::DlSrc, Part::NwSrc) && !same(&ols, Part::DlDst, Part::NwSrc));
    }

    #[test]
    fn high_locality_pools_recombine_popular_values() {
        use crate::workload::pipelines::PSC;
        let distinct = |locality, f: fn(&FlowKey) -> u128| {
            let config = PipebenchConfig { rules: 2000, headers: 2000, locality, popularity: 1.0, seed: 3 };
            let w = pipebench(&PSC, &config).unwrap();
            assert_eq!(w.pool.len(), 2000);
            let mut v: Vec<u128> = w.pool.iter().map(f).collect();
            v.sort_unstable();
            v.dedup();
            v.len()
        };
        let l2 = |k: &FlowKey| (k.dl_src() as u128) << 16 | k.vlan_tci() as u128;
        let l3 = |k: &FlowKey| (k.nw_src() as u128) << 32 | k.nw_dst() as u128;
        let both = |k: &FlowKey| {
            ((k.dl_src() as u128) << 16 | k.vlan_tci() as u128) << 64
                | (k.nw_src() as u128) << 32
                | k.nw_dst() as u128
        };
        // Low: every line its own tuple's values. High: popular values recur per group, in
        // combinations that are mostly new.
        assert!(distinct(Locality::Low, l2) > 1500 && distinct(Locality::Low, l3) > 1900);
        let (h2, h3, hb) =
            (distinct(Locality::High, l2), distinct(Locality::High, l3), distinct(Locality::High, both));
        assert!(h2 < 1300 && h3 < 1000, "high locality: {h2} L2 and {h3} L3 values");
        assert!(2 * hb > 3 * h2.max(h3), "{hb} combinations of {h2} L2 and {h3} L3 values");
    }

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
