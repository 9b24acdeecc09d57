//! Renderings of a [`Traversal`]: text like `ovs-appctl ofproto/trace`, and JSON.

use std::fmt::Write as _;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use super::action::format_actions;
use super::dp_actions::format_dp_actions;
use super::named_text::{quoted, with_names};
use super::names::Names;
use super::passes::{Pass, MAX_RECIRCULATIONS};
use super::pipeline::Pipeline;
use super::traversal::{Output, Traversal};
use crate::packet::ct_state;
use crate::packet::format::{format_match, format_packet, packet_fields};
use crate::packet::FlowKey;

/// A packet as an object of every key field (ovs-ofctl names and notation).
#[derive(Clone, Copy, Debug)]
pub struct PacketFields<'a>(pub &'a FlowKey);

impl Serialize for PacketFields<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        for (name, value) in packet_fields(self.0) {
            map.serialize_entry(name, &value)?;
        }
        map.end()
    }
}

/// One copy leaving the switch, as `hyflow trace --json` and `hyflow replay --decisions`
/// write it.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct OutputRecord<'a> {
    /// Port it leaves on.
    pub port: u32,
    /// The packet as it leaves.
    pub packet: PacketFields<'a>,
}

/// The copies that leave, serialized as a list of [`OutputRecord`]s (built one at a time).
#[derive(Clone, Copy, Debug)]
pub struct OutputRecords<'a>(pub &'a [Output]);

impl Serialize for OutputRecords<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for o in self.0 {
            seq.serialize_element(&OutputRecord { port: o.port, packet: PacketFields(&o.packet) })?;
        }
        seq.end()
    }
}

/// A rule a traversal hit.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RuleHit {
    /// Its table.
    pub table: u8,
    /// Its priority.
    pub priority: u16,
    /// Its cookie, in hex.
    pub cookie: String,
}

/// One packet's trace, as `hyflow trace --json` writes it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TraceRecord<'a> {
    /// The packet, in ovs-ofctl notation.
    pub packet: String,
    /// Its megaflow.
    pub megaflow: String,
    /// Composed datapath actions.
    pub datapath_actions: String,
    /// The copies that leave.
    pub outputs: OutputRecords<'a>,
    /// Whether nothing leaves.
    pub drop: bool,
    /// Why translation stopped, if it did.
    pub drop_reason: Option<&'static str>,
    /// Rules hit, in lookup order.
    pub tables: Vec<RuleHit>,
    /// Tables missed, in lookup order.
    pub table_misses: Vec<u8>,
    /// Times `dec_ttl` found TTL ≤ 1 (sent to the controller).
    pub ttl_exceeded: u32,
    /// Copies sent to the controller (`controller` actions and TTL expiries).
    pub to_controller: u32,
    /// Group buckets taken, in order (`group N bucket B`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub buckets: Vec<String>,
    /// Flows `learn` actions would install (`table=..,priority=.. MATCH actions=..`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub learned_flows: Vec<String>,
    /// MACs `NORMAL` would learn (`MAC on port P, VLAN V`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub learned_macs: Vec<String>,
    /// For a recirculated pass: the id it resumed (hex, as the datapath prints it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recirc_id: Option<String>,
    /// For a recirculated pass: the connection state it resumed with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ct_state: Option<String>,
    /// The passes recirculation started after this one (first pass only), in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recirculations: Vec<TraceRecord<'a>>,
    /// Whether recirculations were left unfollowed at the limit (first pass only).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub recirculation_limit: bool,
}

impl<'a> TraceRecord<'a> {
    /// The record of traversal `tr` through `p`.
    pub fn new(tr: &'a Traversal, p: &Pipeline) -> TraceRecord<'a> {
        let tables = tr
            .steps
            .iter()
            .filter_map(|s| {
                let r = p.rule(s.rule?)?;
                Some(RuleHit { table: s.table, priority: r.priority, cookie: format!("{:#x}", r.cookie) })
            })
            .collect();
        TraceRecord {
            packet: format_packet(&tr.entry),
            megaflow: format_match(&tr.megaflow.value, &tr.megaflow.mask),
            datapath_actions: format_dp_actions(&tr.dp_actions, &tr.entry),
            outputs: OutputRecords(&tr.outputs),
            drop: tr.is_drop(),
            drop_reason: tr.drop_reason.map(|r| r.name()),
            tables,
            table_misses: tr.steps.iter().filter(|s| s.rule.is_none()).map(|s| s.table).collect(),
            ttl_exceeded: tr.ttl_exceeded,
            to_controller: tr.to_controller,
            buckets: tr.buckets.iter().map(|(g, b)| format!("group {g} bucket {b}")).collect(),
            learned_flows: tr.learned.iter().map(|r| r.to_string()).collect(),
            learned_macs: tr.mac_learned.iter().map(mac_text).collect(),
            recirc_id: None,
            ct_state: None,
            recirculations: Vec::new(),
            recirculation_limit: false,
        }
    }

    /// The record of a packet's passes (see [`trace_passes`](super::passes::trace_passes)):
    /// the first, holding the others.
    pub fn of_passes(passes: &'a [Pass], p: &Pipeline, limit_reached: bool) -> TraceRecord<'a> {
        let record = |pass: &'a Pass| {
            let mut r = TraceRecord::new(&pass.tr, p);
            if let Some(t) = &pass.thaw {
                r.recirc_id = Some(format!("{:#x}", t.recirc_id));
                r.ct_state = Some(ct_state::format_exact(t.ct_state));
            }
            r
        };
        let mut first = record(&passes[0]);
        first.recirculations = passes[1..].iter().map(record).collect();
        first.recirculation_limit = limit_reached;
        first
    }
}

/// A MAC `NORMAL` learns, as the trace says it.
fn mac_text(l: &super::normal::MacLearn) -> String {
    let mac = crate::packet::format::format_value(crate::packet::field::id::DL_SRC, l.mac as u128);
    format!("{mac} on port {}, VLAN {}", l.port, l.vlan)
}

/// One packet's trace as text, in the shape of `ovs-appctl ofproto/trace`; with `names`, the
/// rules' ports and tables by name (as `ovs-ofctl --names`), a table's name after its number.
pub(crate) fn trace_text(tr: &Traversal, p: &Pipeline, names: Option<&Names>) -> String {
    let named = |text: String| names.map_or_else(|| text.clone(), |n| with_names(&text, n));
    let table_of = |t: u8| match names.and_then(|n| n.table_name(t)) {
        Some(name) => format!("{t:>2}. {}:", quoted(name)),
        None => format!("{t:>2}."),
    };
    let mut out = String::new();
    let _ = writeln!(out, "Flow: {}\n", format_packet(&tr.entry));
    for s in &tr.steps {
        let indent = "    ".repeat(s.depth as usize);
        match s.rule.and_then(|r| p.rule(r)) {
            Some(r) => {
                let m = named(r.matcher().to_string());
                let _ = writeln!(
                    out,
                    "{indent}{} {}{}priority {}, cookie {:#x}",
                    table_of(s.table),
                    m,
                    if m.is_empty() { "" } else { ", " },
                    r.priority,
                    r.cookie
                );
                let _ = writeln!(out, "{indent}    {}", named(format_actions(&r.actions)));
            }
            None => {
                let _ = writeln!(out, "{indent}{} No match.", table_of(s.table));
                let _ = writeln!(out, "{indent}    drop");
            }
        }
    }
    if let Some(reason) = tr.drop_reason {
        let _ = writeln!(out, "\nTranslation error: {} (packet dropped)", reason.name());
    }
    if tr.ttl_exceeded > 0 {
        let _ = writeln!(out, "\nTTL exceeded {} time(s): sent to controller", tr.ttl_exceeded);
    }
    let explicit = tr.to_controller - tr.ttl_exceeded;
    if explicit > 0 {
        let _ = writeln!(out, "\nSent to the controller {explicit} time(s) (controller action; the flow stays in the slow path)");
    }
    if !tr.buckets.is_empty() {
        let taken: Vec<String> = tr.buckets.iter().map(|(g, b)| format!("group {g} bucket {b}")).collect();
        let _ = writeln!(out, "\nGroup buckets taken: {}", taken.join(", "));
    }
    for r in &tr.learned {
        let _ = writeln!(out, "\nLearns flow: {r}");
    }
    for l in &tr.mac_learned {
        let _ = writeln!(out, "\nLearns MAC: {}", mac_text(l));
    }
    let _ = writeln!(out, "\nFinal flow: {}", format_packet(&tr.final_flow));
    let _ = writeln!(out, "Megaflow: {}", format_match(&tr.megaflow.value, &tr.megaflow.mask));
    let _ = writeln!(out, "Datapath actions: {}", format_dp_actions(&tr.dp_actions, &tr.entry));
    if tr.slow_action {
        let _ = writeln!(
            out,
            "This flow is handled by the userspace slow path because it:\n  - Uses action(s) not supported by datapath."
        );
    }
    out
}

/// A packet's passes as text, as `ovs-appctl ofproto/trace` prints them: each recirculated
/// pass after a banner saying which id it resumes and with which connection state.
pub fn passes_text(passes: &[Pass], p: &Pipeline, limit_reached: bool, names: Option<&Names>) -> String {
    let rule = "=".repeat(79);
    let mut out = String::new();
    for pass in passes {
        if let Some(t) = &pass.thaw {
            let how = if let Some(h) = t.dp_hash {
                format!(
                    "resume with dp_hash={h:#x}, the datapath's hash (ofproto/trace stops before this pass)"
                )
            } else if t.default_state {
                "resume conntrack with default ct_state=trk|new (use --ct-next to customize)".to_string()
            } else {
                format!("resume conntrack with ct_state={}", ct_state::format_exact(t.ct_state))
            };
            let _ = writeln!(out, "\n{rule}\nrecirc({:#x}) - {how}", t.recirc_id);
            if let Some(before) = &t.before_nat {
                let _ = writeln!(out, "Replacing src/dst IP/ports to simulate NAT:");
                let _ = writeln!(out, " Initial flow: {}", format_packet(before));
                let _ = writeln!(out, " Modified flow: {}", format_packet(&pass.tr.entry));
            }
            let _ = writeln!(out, "{rule}\n");
        }
        out.push_str(&trace_text(&pass.tr, p, names));
    }
    if limit_reached {
        let _ = writeln!(
            out,
            "\n{rule}\nTrace reached the recirculation limit ({MAX_RECIRCULATIONS}): stopping here."
        );
    }
    out
}
