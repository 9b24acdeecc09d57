//! Renderings of a [`Traversal`]: text like `ovs-appctl ofproto/trace`, and JSON.

use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use super::action::format_actions;
use super::datapath::format_dp_actions;
use super::pipeline::Pipeline;
use super::traversal::{Output, Traversal};
use crate::packet::format::{format_match, format_packet, packet_fields};
use crate::packet::FlowKey;

/// A packet as a JSON object of every key field (ovs-ofctl names and notation).
pub fn packet_json(key: &FlowKey) -> Value {
    let mut m = Map::new();
    for (name, value) in packet_fields(key) {
        m.insert(name.to_string(), Value::String(value));
    }
    Value::Object(m)
}

/// `outputs` as `hyflow trace --json` and `hyflow replay --decisions` write them.
pub fn outputs_json(outputs: &[Output]) -> Value {
    Value::Array(outputs.iter().map(|o| json!({"port": o.port, "packet": packet_json(&o.packet)})).collect())
}

/// One packet's trace as a JSON object.
pub fn trace_json(tr: &Traversal, p: &Pipeline) -> Value {
    let tables: Vec<Value> = tr
        .steps
        .iter()
        .filter_map(|s| {
            let r = p.rule(s.rule?)?;
            Some(json!({"table": s.table, "priority": r.priority, "cookie": format!("{:#x}", r.cookie)}))
        })
        .collect();
    let misses: Vec<u8> = tr.steps.iter().filter(|s| s.rule.is_none()).map(|s| s.table).collect();
    json!({
        "packet": format_packet(&tr.entry),
        "megaflow": format_match(&tr.megaflow.value, &tr.megaflow.mask),
        "datapath_actions": format_dp_actions(&tr.dp_actions, &tr.entry),
        "outputs": outputs_json(&tr.outputs),
        "drop": tr.is_drop(),
        "drop_reason": tr.drop_reason.map(|r| r.name()),
        "tables": tables,
        "table_misses": misses,
        "ttl_exceeded": tr.ttl_exceeded,
    })
}

/// One packet's trace as text, in the shape of `ovs-appctl ofproto/trace`.
pub fn trace_text(tr: &Traversal, p: &Pipeline) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Flow: {}\n", format_packet(&tr.entry));
    for s in &tr.steps {
        let indent = "    ".repeat(s.depth as usize);
        match s.rule.and_then(|r| p.rule(r)) {
            Some(r) => {
                let m = r.matcher.to_string();
                let _ = writeln!(
                    out,
                    "{indent}{:>2}. {}{}priority {}, cookie {:#x}",
                    s.table,
                    m,
                    if m.is_empty() { "" } else { ", " },
                    r.priority,
                    r.cookie
                );
                let _ = writeln!(out, "{indent}    {}", format_actions(&r.actions));
            }
            None => {
                let _ = writeln!(out, "{indent}{:>2}. No match.", s.table);
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
    let _ = writeln!(out, "\nFinal flow: {}", format_packet(&tr.final_flow));
    let _ = writeln!(out, "Megaflow: {}", format_match(&tr.megaflow.value, &tr.megaflow.mask));
    let _ = writeln!(out, "Datapath actions: {}", format_dp_actions(&tr.dp_actions, &tr.entry));
    out
}
