//! Conversations: traffic with both directions, for pipelines that track connections.
//!
//! A stateful pipeline (a conntrack firewall, a load balancer's DNAT) treats a packet by the
//! connection it belongs to, so its traffic must have connections: a TCP handshake, data both
//! ways, the close; UDP requests and responses; ICMP echoes. A spec lists the first packet of
//! each kind of conversation (`ovs-ofctl` packet strings, with weights); the generator runs
//! each first packet through the switch (slow path and connection tracker) and builds the
//! reply from what leaves — the forwarded headers turned around, arriving on the port they
//! left by — so a reply to a load-balanced service comes from the endpoint the pipeline chose,
//! with that endpoint's addresses, as on a real node.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::traffic::TrafficError;
use crate::openflow::names::Names;
use crate::openflow::parse_packet_named;
use crate::openflow::traversal::Output;
use crate::packet::build::build_frame;
use crate::packet::field::{id, proto};
use crate::packet::FlowKey;
use crate::switch::Switch;

/// Highest input port a conversation packet may arrive on (pcapng interface `port - 1`).
pub(crate) const MAX_PORT: u32 = 1024;

/// One kind of conversation: its first packet and how often it starts.
#[derive(Clone, Debug, PartialEq)]
pub struct ConversationKind {
    /// Relative frequency.
    pub weight: f64,
    /// The first packet (the client's); its source port varies per conversation.
    pub first: FlowKey,
    /// The spec line, for messages.
    pub line: usize,
}

/// Why a spec cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message} (at '{token}')")]
pub struct SpecLineError {
    /// File name.
    pub file: String,
    /// Line (1-based).
    pub line: usize,
    /// Column (1-based).
    pub column: usize,
    /// The offending text.
    pub token: String,
    /// Why.
    pub message: String,
}

/// Reads a conversations spec: per line `[weight=W] PACKET`, `#` comments and blank lines
/// skipped; ports may be named by `names`.
pub fn parse_spec(text: &str, file: &str, names: &Names) -> Result<Vec<ConversationKind>, SpecLineError> {
    let mut out = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let Some(body) = crate::openflow::parser::strip_comment(raw) else { continue };
        let indent = body.len() - body.trim_start().len();
        let body = body.trim();
        let fail = |column: usize, token: &str, message: String| SpecLineError {
            file: file.to_string(),
            line: n + 1,
            column,
            token: token.to_string(),
            message,
        };
        let (weight, packet, at) = match body.split_once(char::is_whitespace) {
            Some((w, rest)) if w.starts_with("weight=") => {
                let v: f64 = w["weight=".len()..]
                    .parse()
                    .ok()
                    .filter(|v: &f64| v.is_finite() && *v > 0.0)
                    .ok_or_else(|| fail(indent + 1, w, "weight must be a positive number".to_string()))?;
                (v, rest.trim_start(), indent + body.len() - rest.trim_start().len())
            }
            _ => (1.0, body, indent),
        };
        let first =
            parse_packet_named(packet, names).map_err(|e| fail(at + e.column, &e.token, e.message))?;
        if !matches!(first.dl_type(), proto::ETH_IPV4 | proto::ETH_IPV6 | proto::ETH_ARP) {
            return Err(fail(at + 1, packet, "a conversation starts with an IP or ARP packet".to_string()));
        }
        if first.in_port() == 0 || first.in_port() > MAX_PORT {
            return Err(fail(
                at + 1,
                packet,
                format!("in_port must be 1..{MAX_PORT} (a pcapng interface each)"),
            ));
        }
        out.push(ConversationKind { weight, first, line: n + 1 });
    }
    Ok(out)
}

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConversationConfig {
    /// Conversations.
    pub conversations: usize,
    /// Mean conversations started per second (Poisson).
    pub rate: f64,
    /// Data packets each way per conversation (TCP, UDP requests; ICMP echoes).
    pub exchanges: u32,
    /// Round-trip time between the two ends.
    pub rtt_ns: u64,
    /// RNG seed.
    pub seed: u64,
}

impl Default for ConversationConfig {
    fn default() -> Self {
        ConversationConfig { conversations: 1000, rate: 1000.0, exchanges: 4, rtt_ns: 200_000, seed: 1 }
    }
}

/// Most conversations one run generates: the packets are held, sorted by time, before they
/// are written (about 15 packets of 240 bytes per TCP conversation).
pub(crate) const MAX_CONVERSATIONS: usize = 200_000;

/// The generated trace: packets in time order (time, packet, frame length) and counters.
#[derive(Clone, Debug, Default)]
pub struct Conversations {
    /// Packets in time order; each arrives on its key's `in_port`.
    pub packets: Vec<(u64, FlowKey, usize)>,
    /// Highest input port used.
    pub max_port: u32,
    /// Counters.
    pub stats: ConversationStats,
}

impl Conversations {
    /// A packet's frame.
    pub fn frame(&self, i: usize) -> Vec<u8> {
        let (_, k, len) = &self.packets[i];
        build_frame(k, *len)
    }
}

/// What the generator made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConversationStats {
    /// Packets written.
    pub packets: u64,
    /// Conversations the pipeline answered (their first packet left somewhere a reply can come
    /// from).
    pub answered: u64,
    /// Conversations whose first packet the pipeline dropped (or sent nowhere a reply can come
    /// from): only that packet is sent.
    pub unanswered: u64,
}

/// Generates the conversations, in time order, with `switch` (fresh, without caches: the slow
/// path and the connection tracker) deciding where first packets go.
pub fn generate_conversations(
    switch: &mut Switch,
    kinds: &[ConversationKind],
    config: &ConversationConfig,
) -> Result<Conversations, TrafficError> {
    if config.conversations > MAX_CONVERSATIONS {
        return Err(TrafficError::param(
            "conversations",
            format!(
                "{}: at most {MAX_CONVERSATIONS} (their packets are held in memory to be sorted)",
                config.conversations
            ),
        ));
    }
    if kinds.is_empty() {
        return Err(TrafficError::NoConversations);
    }
    if !(config.rate.is_finite() && config.rate > 0.0) {
        return Err(TrafficError::param(
            "rate",
            format!("must be a positive number of conversations per second, not {}", config.rate),
        ));
    }
    let total: f64 = kinds.iter().map(|k| k.weight).sum();
    let mut rng = StdRng::seed_from_u64(config.seed);
    let mut out = Emitter { switch, events: Vec::new(), outputs: Vec::new() };
    let mut stats = ConversationStats::default();
    let mut t = 0.0f64;
    let (rtt, half) = (config.rtt_ns, config.rtt_ns / 2);
    for c in 0..config.conversations {
        t += -(1.0 - rng.random::<f64>()).ln() / config.rate * 1e9;
        let mut pick = rng.random::<f64>() * total;
        let kind = kinds.iter().find(|k| {
            pick -= k.weight;
            pick < 0.0
        });
        let mut first = kind.unwrap_or(&kinds[kinds.len() - 1]).first;
        let ip = first.is_ip();
        if ip && matches!(first.nw_proto(), proto::IP_TCP | proto::IP_UDP | proto::IP_SCTP) {
            first.set_tp_src(32768 + (c % 28_000) as u16);
        }
        let tcp = ip && first.nw_proto() == proto::IP_TCP;
        let mut at = t as u64;
        // Each packet goes through the switch in conversation order, so that the connection
        // tracker sees the handshake before the data; the trace is sorted by time afterwards.
        let flagged = |k: &FlowKey, flags: u16| {
            let mut k = *k;
            if tcp {
                k.set(id::TCP_FLAGS, flags as u128);
            }
            k
        };
        out.send(flagged(&first, 0x002), at, 64);
        let reply = out.outputs.iter().find(|o| (1..=MAX_PORT).contains(&o.port)).map(reply_of);
        let Some(back) = reply.filter(|_| ip) else {
            // Dropped, sent nowhere a reply can come from, or ARP (answered by NORMAL's
            // flooding, if at all): the first packet only.
            stats.unanswered += (reply.is_none()) as u64;
            stats.answered += reply.is_some() as u64;
            continue;
        };
        stats.answered += 1;
        if tcp {
            // SYN → SYN+ACK; data with ACKs; FIN+ACK both ways; the last ACK.
            out.send(flagged(&back, 0x012), at + half, 64);
            at += rtt;
            for _ in 0..config.exchanges {
                out.send(flagged(&first, 0x018), at, 576);
                out.send(flagged(&back, 0x010), at + half, 64);
                at += rtt;
            }
            out.send(flagged(&first, 0x011), at, 64);
            out.send(flagged(&back, 0x011), at + half, 64);
            out.send(flagged(&first, 0x010), at + rtt, 64);
        } else {
            // Requests and responses (UDP), echo requests and replies (ICMP).
            out.send(back, at + half, 128);
            for _ in 1..config.exchanges {
                at += rtt;
                out.send(first, at, 128);
                out.send(back, at + half, 128);
            }
        }
    }
    let mut events = out.events;
    events.sort_by_key(|e| (e.0, e.1));
    stats.packets = events.len() as u64;
    let max_port = events.iter().map(|e| e.2.in_port()).max().unwrap_or(1);
    Ok(Conversations {
        packets: events.into_iter().map(|(ts, _, k, len)| (ts, k, len)).collect(),
        max_port,
        stats,
    })
}

/// Sends packets through the switch and keeps them, with their times, for the trace.
struct Emitter<'a> {
    switch: &'a mut Switch,
    /// (time, sequence, packet, frame length).
    events: Vec<(u64, usize, FlowKey, usize)>,
    /// Where the last packet went.
    outputs: Vec<Output>,
}

impl Emitter<'_> {
    fn send(&mut self, k: FlowKey, ts_ns: u64, len: usize) {
        self.switch.process(&k, len as u64, ts_ns, &mut self.outputs);
        let seq = self.events.len();
        self.events.push((ts_ns, seq, k, len));
    }
}

/// The reply to what left as `o`: headers turned around, arriving on the port it left by,
/// without the pipeline's metadata.
fn reply_of(o: &Output) -> FlowKey {
    let mut r = FlowKey::default();
    let k = &o.packet;
    let copy = |r: &mut FlowKey, to, from| r.set(to, k.get(from));
    for f in [id::DL_TYPE, id::VLAN_TCI, id::VLAN_TPID, id::NW_PROTO, id::NW_TOS, id::NW_TTL, id::IPV6_LABEL]
    {
        copy(&mut r, f, f);
    }
    for (a, b) in [(id::DL_SRC, id::DL_DST), (id::NW_SRC, id::NW_DST), (id::IPV6_SRC, id::IPV6_DST)] {
        copy(&mut r, a, b);
        copy(&mut r, b, a);
    }
    match k.nw_proto() {
        // An echo reply: type 0 (ICMPv6: 129), the request's code.
        p @ (proto::IP_ICMP | proto::IP_ICMPV6) => {
            r.set_tp_src(if p == proto::IP_ICMP { 0 } else { 129 });
            copy(&mut r, id::TP_DST, id::TP_DST);
        }
        _ => {
            copy(&mut r, id::TP_SRC, id::TP_DST);
            copy(&mut r, id::TP_DST, id::TP_SRC);
        }
    }
    r.set_in_port(o.port);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::parse_flows;
    use crate::openflow::Pipeline;
    use crate::switch::SwitchConfig;

    const FLOWS: &str = "table=0,priority=100,ip,ct_state=-trk actions=ct(table=1,zone=1,nat)\n\
        table=1,priority=100,ip,ct_state=+trk+new,in_port=1,nw_dst=10.96.0.1 actions=ct(commit,zone=1,nat(dst=10.8.0.5:8080)),output:2\n\
        table=1,priority=100,ip,ct_state=+trk+est,in_port=1 actions=output:2\n\
        table=1,priority=100,ip,ct_state=+trk+est,in_port=2 actions=output:1\n\
        table=1,priority=1 actions=drop";

    fn generate(spec: &str, conversations: usize) -> Conversations {
        let mut sw =
            Switch::new(Pipeline::from_rules(parse_flows(FLOWS, "f").unwrap()), SwitchConfig::no_cache())
                .unwrap();
        let kinds = parse_spec(spec, "spec", &Names::new()).unwrap();
        let config = ConversationConfig { conversations, ..ConversationConfig::default() };
        generate_conversations(&mut sw, &kinds, &config).unwrap()
    }

    #[test]
    fn replies_come_from_where_the_pipeline_sent_the_first_packet() {
        let c = generate("in_port=1,tcp,nw_src=10.0.0.1,nw_dst=10.96.0.1,tp_dst=80\n", 3);
        // Per conversation: SYN, SYN+ACK, 4 data and 4 ACKs, FIN+ACK both ways, the last ACK.
        assert_eq!(c.packets.len(), 3 * 13);
        assert_eq!((c.stats.answered, c.stats.unanswered), (3, 0));
        let synack = c.packets.iter().map(|p| p.1).find(|k| k.get(id::TCP_FLAGS) == 0x012).unwrap();
        // The endpoint DNAT chose answers, on the port the SYN left by.
        assert_eq!((synack.in_port(), synack.nw_src(), synack.tp_src()), (2, 0x0a08_0005, 8080));
        assert!(c.packets.windows(2).all(|w| w[0].0 <= w[1].0), "time order");
        // Replayed, every packet of a conversation is forwarded: replies go back to port 1.
        let mut sw =
            Switch::new(Pipeline::from_rules(parse_flows(FLOWS, "f").unwrap()), SwitchConfig::default())
                .unwrap();
        let mut outputs = Vec::new();
        for (ts, k, len) in &c.packets {
            sw.process(k, *len as u64, *ts, &mut outputs);
            let want = if k.in_port() == 1 { 2 } else { 1 };
            assert_eq!(outputs.iter().map(|o| o.port).collect::<Vec<_>>(), vec![want], "{k:?}");
        }
        assert_eq!(sw.conntrack().stats().invalid, 0);
    }

    #[test]
    fn dropped_first_packets_are_unanswered_and_specs_say_where_they_are_wrong() {
        // Not to the service, not established: dropped by table 1's default.
        let c = generate("weight=2 in_port=1,udp,nw_src=10.0.0.1,nw_dst=10.0.0.9,tp_dst=53\n", 5);
        assert_eq!((c.stats.answered, c.stats.unanswered, c.packets.len()), (0, 5, 5));
        let err = |spec: &str| parse_spec(spec, "spec", &Names::new()).unwrap_err().to_string();
        assert_eq!(
            err("weight=0 in_port=1,ip\n"),
            "spec:1:1: weight must be a positive number (at 'weight=0')"
        );
        assert!(
            err("\n  in_port=1,ip,nw_dst=10.0.0.999\n").starts_with("spec:2:"),
            "{}",
            err("\n  in_port=1,ip,nw_dst=10.0.0.999\n")
        );
        assert!(err("in_port=0,ip\n").contains("in_port must be 1..1024"));
        assert!(err("in_port=1,dl_type=0x88cc\n").contains("IP or ARP"));
    }
}
