//! Traffic for a flow table: flows whose headers exercise its rules, Zipf-skewed flow sizes,
//! Poisson arrivals, realistic frame sizes. Deterministic for a seed.
//!
//! Model: `flows` flows are made first. Each picks a rule of the flow file uniformly and
//! becomes a packet that satisfies the rule's match on every packet field, with every field
//! the rule leaves open drawn at random (protocol mix 70% TCP, 25% UDP, 5% ICMP over IPv4
//! unless the rule says otherwise; addresses in 10.0.0.0/8 and 2001:db8::/32; well-known
//! destination ports, ephemeral sources). Each packet then belongs to flow `k` with
//! probability ∝ 1/k^s (Zipf, exponent `zipf`), arrives after an exponential gap at mean
//! rate `rate` packets/s, and is 64, 576 or 1500 bytes (CAIDA's trimodal mix, 50/20/30%).
//! Registers, metadata and tunnel ids are pipeline state, not headers, and stay zero.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp, Zipf};

use crate::invalid_param::{CarriesInvalidParam, InvalidParam};
use crate::openflow::Rule;
use crate::packet::build::{build_frame, build_frame_into};
use crate::packet::field::{id, proto};
use crate::packet::{parse_frame, FlowKey, FlowMask, LinkKind};

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrafficConfig {
    /// Distinct flows.
    pub flows: usize,
    /// Packets in the trace.
    pub packets: usize,
    /// Zipf exponent of flow popularity (0 = uniform).
    pub zipf: f64,
    /// Mean packets per second.
    pub rate: f64,
    /// RNG seed.
    pub seed: u64,
}

impl Default for TrafficConfig {
    fn default() -> Self {
        TrafficConfig { flows: 1000, packets: 100_000, zipf: 1.1, rate: 100_000.0, seed: 1 }
    }
}

/// Why traffic cannot be generated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TrafficError {
    /// Nothing to base flows on.
    #[error("the flow table has no rules to generate traffic for")]
    NoRules,
    /// Nothing to base updates on.
    #[error("the flow table has no rules to update")]
    NoRulesToUpdate,
    /// A parameter out of range.
    #[error(transparent)]
    Param(#[from] InvalidParam),
    /// A spec that names no conversation.
    #[error("the spec has no conversations")]
    NoConversations,
}

impl TrafficError {
    /// `param` is out of range: `message` says how.
    pub(crate) fn param(param: &'static str, message: impl Into<String>) -> TrafficError {
        TrafficError::Param(InvalidParam::new(param, message))
    }
}

impl CarriesInvalidParam for TrafficError {
    fn invalid_param(&self) -> Option<InvalidParam> {
        match self {
            TrafficError::Param(p) => Some(p.clone()),
            _ => None,
        }
    }
}

/// One generated packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenPacket {
    /// Nanoseconds since the first packet.
    pub ts_ns: u64,
    /// Flow index (0 = most popular).
    pub flow: usize,
    /// Frame bytes.
    pub frame: Vec<u8>,
}

const DST_PORTS: [u16; 8] = [80, 443, 53, 22, 8080, 123, 25, 3306];

fn random_key(rng: &mut StdRng, dl_type: u16, nw_proto: Option<u8>) -> FlowKey {
    let mut k = FlowKey::default();
    k.set_in_port(1);
    k.set_dl_src(0x0200_0000_0000 | rng.random_range(0..0xffff_ffffu64));
    k.set_dl_dst(0x0200_0000_0000 | rng.random_range(0..0xffff_ffffu64));
    k.set_dl_type(dl_type);
    let ip = matches!(dl_type, proto::ETH_IPV4 | proto::ETH_IPV6);
    if ip {
        let p = nw_proto.unwrap_or_else(|| match rng.random_range(0..100) {
            0..70 => proto::IP_TCP,
            70..95 => proto::IP_UDP,
            _ if dl_type == proto::ETH_IPV6 => proto::IP_ICMPV6,
            _ => proto::IP_ICMP,
        });
        k.set_nw_proto(p);
        k.set_nw_ttl(64);
        match p {
            proto::IP_TCP | proto::IP_UDP | proto::IP_SCTP => {
                k.set_tp_src(rng.random_range(1024..65535));
                k.set_tp_dst(DST_PORTS[rng.random_range(0..DST_PORTS.len())]);
                if p == proto::IP_TCP {
                    k.set(id::TCP_FLAGS, 0x010);
                }
            }
            proto::IP_ICMP | proto::IP_ICMPV6 => k.set_tp_src(8),
            _ => {}
        }
    }
    match dl_type {
        proto::ETH_IPV4 => {
            k.set_nw_src(0x0a00_0000 | rng.random_range(0..0x00ff_ffff));
            k.set_nw_dst(0x0a00_0000 | rng.random_range(0..0x00ff_ffff));
        }
        proto::ETH_IPV6 => {
            let net = 0x2001_0db8u128 << 96;
            k.set(id::IPV6_SRC, net | rng.random_range(0..u64::MAX) as u128);
            k.set(id::IPV6_DST, net | rng.random_range(0..u64::MAX) as u128);
        }
        proto::ETH_ARP => {
            k.set(id::ARP_OP, 1);
            k.set(id::ARP_SHA, k.dl_src() as u128);
            k.set(id::ARP_SPA, 0x0a00_0000 | rng.random_range(0..0x00ff_ffffu32) as u128);
            k.set(id::ARP_TPA, 0x0a00_0000 | rng.random_range(0..0x00ff_ffffu32) as u128);
        }
        _ => {}
    }
    k
}

/// A packet satisfying `rule`'s match on packet fields, the rest random; canonical (what
/// parsing its frame gives back).
fn flow_for_rule(rng: &mut StdRng, rule: &Rule) -> FlowKey {
    let m = &rule.matcher();
    let dl_type = if m.mask.get(id::DL_TYPE) != 0 {
        m.value.dl_type()
    } else {
        match rng.random_range(0..100) {
            0..92 => proto::ETH_IPV4,
            92..97 => proto::ETH_IPV6,
            _ => proto::ETH_ARP,
        }
    };
    let nw_proto = (m.mask.get(id::NW_PROTO) != 0).then(|| m.value.nw_proto());
    let mut k = random_key(rng, dl_type, nw_proto);
    let mut mask = m.mask;
    mask.intersect_with(FlowMask::packet_state());
    mask.set(id::IN_PORT, 0);
    mask.set(id::TUN_ID, 0);
    for i in 0..k.words.len() {
        k.words[i] = (k.words[i] & !mask.words[i]) | (m.value.words[i] & mask.words[i]);
    }
    if k.vlan_tci() & proto::VLAN_CFI != 0 && k.vlan_tpid() == 0 {
        k.set_vlan_tpid(proto::ETH_VLAN);
    }
    // Round trip through bytes so the key is exactly what a parser will see.
    let frame = build_frame(&k, 60);
    let mut canonical = FlowKey::default();
    let _ = parse_frame(&frame, LinkKind::Ethernet, k.in_port(), &mut canonical);
    canonical
}

/// A frame length from CAIDA's trimodal mix: 64, 576 or 1500 bytes (50/20/30%).
pub(crate) fn frame_len(rng: &mut StdRng) -> usize {
    match rng.random_range(0..10) {
        0..5 => 64,
        5..7 => 576,
        _ => 1500,
    }
}

/// `flows` random IPv4 flows (TCP 70%, UDP 25%, ICMP 5%; addresses in 10.0.0.0/8), for
/// workloads that need no flow table (measurement); canonical, deterministic for a seed.
pub fn random_flows(flows: usize, seed: u64) -> Result<Vec<FlowKey>, TrafficError> {
    check_flow_count(flows)?;
    let mut rng = StdRng::seed_from_u64(seed);
    Ok((0..flows)
        .map(|_| {
            let k = random_key(&mut rng, proto::ETH_IPV4, None);
            let frame = build_frame(&k, 60);
            let mut canonical = FlowKey::default();
            let _ = parse_frame(&frame, LinkKind::Ethernet, k.in_port(), &mut canonical);
            canonical
        })
        .collect())
}

/// The flows of a workload: one per flow index, most popular first.
pub fn make_flows(rules: &[Rule], flows: usize, seed: u64) -> Result<Vec<FlowKey>, TrafficError> {
    check_flow_count(flows)?;
    let mut maker = RuleFlows::new(rules, seed)?;
    Ok((0..flows).map(|_| maker.next_key()).collect())
}

/// Flows for a flow table's rules, made one at a time (for traces whose number of flows is
/// known only at the end): the i-th is [`make_flows`]' flow i for the same seed.
pub struct RuleFlows<'a> {
    rules: &'a [Rule],
    rng: StdRng,
}

impl<'a> RuleFlows<'a> {
    /// Flows for `rules`, each for a rule drawn uniformly.
    pub fn new(rules: &'a [Rule], seed: u64) -> Result<RuleFlows<'a>, TrafficError> {
        if rules.is_empty() {
            return Err(TrafficError::NoRules);
        }
        Ok(RuleFlows { rules, rng: StdRng::seed_from_u64(seed) })
    }

    /// The next flow's key.
    pub fn next_key(&mut self) -> FlowKey {
        let rule = &self.rules[self.rng.random_range(0..self.rules.len())];
        flow_for_rule(&mut self.rng, rule)
    }
}

/// Minimum-size frames (60 bytes before the FCS) of flows made for `rules` ([`RuleFlows`]),
/// at the times and of the flows `slots` gives (numbered by first appearance, as
/// [`super::flow_arrivals::FlowArrivals`] numbers them). Minimum-size, so that the long
/// traces such timing is for stay small (what they measure, caches, does not depend on
/// frame sizes).
pub fn generate_timed(
    rules: &[Rule],
    slots: impl Iterator<Item = super::flow_arrivals::PacketSlot>,
    seed: u64,
    mut sink: impl FnMut(GenPacket) -> std::io::Result<()>,
) -> Result<std::io::Result<()>, TrafficError> {
    let mut maker = RuleFlows::new(rules, seed)?;
    let mut keys: Vec<FlowKey> = Vec::new();
    for slot in slots {
        while keys.len() <= slot.flow {
            check_flow_count(keys.len() + 1)?;
            keys.push(maker.next_key());
        }
        let mut frame = Vec::with_capacity(60);
        build_frame_into(&keys[slot.flow], 60, &mut frame);
        if let Err(e) = sink(GenPacket { ts_ns: slot.ts_ns, flow: slot.flow, frame }) {
            return Ok(Err(e));
        }
    }
    Ok(Ok(()))
}

/// Generates a trace, handing each packet to `sink` in time order.
pub fn generate(
    rules: &[Rule],
    config: &TrafficConfig,
    sink: impl FnMut(GenPacket) -> std::io::Result<()>,
) -> Result<std::io::Result<()>, TrafficError> {
    check(config)?;
    let keys = make_flows(rules, config.flows, config.seed)?;
    generate_flows(&keys, config, sink)
}

/// Most distinct flows a generator keeps: every flow's key is held for the whole run.
pub(crate) const MAX_FLOWS: usize = 20_000_000;

fn check_flow_count(flows: usize) -> Result<(), TrafficError> {
    if flows > MAX_FLOWS {
        let bytes = std::mem::size_of::<FlowKey>();
        return Err(TrafficError::param(
            "flows-count",
            format!(
                "{flows}: at most {MAX_FLOWS} (the generator keeps every flow's {bytes}-byte key: {} MiB)",
                (MAX_FLOWS * bytes) >> 20
            ),
        ));
    }
    Ok(())
}

pub(crate) fn check(config: &TrafficConfig) -> Result<(), TrafficError> {
    if config.flows == 0 {
        return Err(TrafficError::param("flows-count", "must be at least 1"));
    }
    check_flow_count(config.flows)?;
    if !(config.rate.is_finite() && config.rate > 0.0) {
        return Err(TrafficError::param("rate", "must be a positive number of packets per second"));
    }
    if !(config.zipf.is_finite() && config.zipf >= 0.0) {
        return Err(TrafficError::param("zipf", "must be a non-negative exponent"));
    }
    Ok(())
}

/// Packets of the given flows (most popular first): Zipf popularity, Poisson arrivals and the
/// trimodal frame sizes of [`generate`]; `config.flows` is ignored (the keys say how many).
pub fn generate_flows(
    keys: &[FlowKey],
    config: &TrafficConfig,
    mut sink: impl FnMut(GenPacket) -> std::io::Result<()>,
) -> Result<std::io::Result<()>, TrafficError> {
    for p in Traffic::new(keys.to_vec(), config)? {
        if let Err(e) = sink(p) {
            return Ok(Err(e));
        }
    }
    Ok(Ok(()))
}

/// The packets [`generate_flows`] produces, one at a time.
pub struct Traffic {
    keys: Vec<FlowKey>,
    rng: StdRng,
    zipf: Zipf<f64>,
    gap: Exp<f64>,
    t: f64,
    i: usize,
    packets: usize,
}

impl Traffic {
    /// `config.packets` packets over `keys` (the flows, most popular first).
    pub fn new(keys: Vec<FlowKey>, config: &TrafficConfig) -> Result<Traffic, TrafficError> {
        check(&TrafficConfig { flows: keys.len(), ..*config })?;
        let rng = StdRng::seed_from_u64(config.seed ^ 0x0074_7261_6666_6963);
        let zipf = Zipf::new(keys.len() as f64, config.zipf)
            .map_err(|_| TrafficError::param("zipf", "is out of the distribution's range"))?;
        let gap = Exp::new(config.rate)
            .map_err(|_| TrafficError::param("rate", "is out of the distribution's range"))?;
        Ok(Traffic { keys, rng, zipf, gap, t: 0.0, i: 0, packets: config.packets })
    }
}

impl Traffic {
    /// The next packet's time (ns since the first) and flow, its frame written into `frame`
    /// (cleared first): what the iterator yields, without a frame allocated per packet.
    pub fn next_into(&mut self, frame: &mut Vec<u8>) -> Option<(u64, usize)> {
        if self.i >= self.packets {
            return None;
        }
        if self.i > 0 {
            self.t += self.gap.sample(&mut self.rng);
        }
        self.i += 1;
        let flow = (self.zipf.sample(&mut self.rng) as usize).clamp(1, self.keys.len()) - 1;
        build_frame_into(&self.keys[flow], frame_len(&mut self.rng) - 4, frame);
        Some(((self.t * 1e9) as u64, flow))
    }
}

impl Iterator for Traffic {
    type Item = GenPacket;

    fn next(&mut self) -> Option<GenPacket> {
        let mut frame = Vec::new();
        let (ts_ns, flow) = self.next_into(&mut frame)?;
        Some(GenPacket { ts_ns, flow, frame })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::{parse_flows, Pipeline, Traversal};

    const FLOWS: &str = "priority=10,tcp,nw_dst=10.1.0.0/16,tp_dst=80 actions=output:2\n\
                         priority=10,udp,tp_dst=53 actions=output:3\n\
                         priority=5,dl_vlan=7 actions=output:4\n\
                         priority=0 actions=drop\n";

    #[test]
    fn flows_hit_the_rules_they_were_made_for_and_runs_repeat() {
        let rules = parse_flows(FLOWS, "t").unwrap();
        let p = Pipeline::from_rules(rules.clone());
        let mut tr = Traversal::new();
        let mut rng = StdRng::seed_from_u64(3);
        for r in &rules {
            for _ in 0..20 {
                let k = flow_for_rule(&mut rng, r);
                assert!(r.matcher().matches(&k), "{r}: {k:?}");
                p.process(&k, &mut tr);
            }
        }
        let cfg = TrafficConfig { flows: 50, packets: 2000, zipf: 1.2, rate: 1000.0, seed: 9 };
        let mut a = Vec::new();
        generate(&rules, &cfg, |p| {
            a.push(p);
            Ok(())
        })
        .unwrap()
        .unwrap();
        let mut b = Vec::new();
        generate(&rules, &cfg, |p| {
            b.push(p);
            Ok(())
        })
        .unwrap()
        .unwrap();
        assert_eq!(a, b, "same seed, same trace");
        assert!(a.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
        // Heavy-tailed: the top flow carries far more than its 1/50 share.
        let top = a.iter().filter(|p| p.flow == 0).count();
        assert!(top > 2000 / 10, "top flow {top} packets");
        let span = a.last().unwrap().ts_ns as f64 / 1e9;
        assert!((1.6..2.4).contains(&span), "2000 packets at 1000/s took {span} s");
        assert_eq!(generate(&[], &cfg, |_| Ok(())).unwrap_err(), TrafficError::NoRules);
    }
}
