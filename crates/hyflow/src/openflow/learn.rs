//! The `learn` action (`ovs-actions(7)`): a flow installed by the pipeline itself, built from
//! the packet that runs the action (OVS `lib/learn.c`).
//!
//! `learn(table=1,priority=10,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],
//! output:NXM_OF_IN_PORT[])` — the classic MAC-learning flow — installs in table 1 a flow
//! matching the VLAN and, as destination, the packet's source MAC, that outputs to the
//! packet's input port. Each argument is a property (`table`, `priority`, `idle_timeout`,
//! `hard_timeout`, `cookie`) or a spec:
//! - `dst[=src]` / `dst=value`: the learned flow matches `dst` (bits) against the packet's
//!   `src` bits (default: the same bits of `dst`) or a constant;
//! - `load:src->dst` / `load:value->dst`: the learned flow loads them into `dst`;
//! - `output:src`: the learned flow outputs to the port held in `src`.
//!
//! As in OVS, the learned flow is installed with `modify-flows --strict` semantics (actions
//! replaced, counters kept, added if absent), the megaflow of the learning packet holds every
//! source bit read, and the learned flow is installed again whenever a packet takes the
//! learning path, cached or not (OVS re-runs `learn` from the flow statistics of the datapath
//! flows); learning it again restarts its hard timeout, as OVS's learn refresh does (see
//! [`super::expiry`]). Not modelled: `limit`, `result_dst`, `delete_learned` and
//! `fin_*_timeout` (refused).

use super::action::{Action, SubField};
use super::names::Names;
use super::parser::{parse_subfield, satisfied, split_top, SpecError, Tok};
use super::rule::{Match, Rule};
use crate::packet::field::id;
use crate::packet::format::{format_value, parse_field_value, parse_int};
use crate::packet::{FlowKey, FlowMask};

/// What one spec takes from the packet, or the constant it uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LearnSource {
    /// Bits of the learning packet.
    Field(SubField),
    /// A constant (aligned to the destination's bits).
    Value(u128),
}

/// One spec of a `learn` action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LearnSpec {
    /// The learned flow matches `dst` against the source.
    Match {
        /// Bits matched.
        dst: SubField,
        /// Their value.
        src: LearnSource,
    },
    /// The learned flow loads the source into `dst`.
    Load {
        /// Bits written.
        dst: SubField,
        /// Their value.
        src: LearnSource,
    },
    /// The learned flow outputs to the port in `src`.
    Output {
        /// Bits holding the port.
        src: SubField,
    },
}

/// A `learn` action.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Learn {
    /// Table of the learned flow (default 1).
    pub table: u8,
    /// Its priority (default 32768).
    pub priority: u16,
    /// The learned flow's idle timeout, s.
    pub idle_timeout: u16,
    /// The learned flow's hard timeout, s.
    pub hard_timeout: u16,
    /// Its cookie.
    pub cookie: u64,
    /// The specs, in order.
    pub specs: Vec<LearnSpec>,
}

impl std::fmt::Display for Learn {
    /// The action in a form that parses back to it (OVS's shape, hyflow's field names).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "learn(table={}", self.table)?;
        for (name, value, default) in [
            ("priority", self.priority as u64, 32768),
            ("idle_timeout", self.idle_timeout as u64, 0),
            ("hard_timeout", self.hard_timeout as u64, 0),
        ] {
            if value != default {
                write!(f, ",{name}={value}")?;
            }
        }
        if self.cookie != 0 {
            write!(f, ",cookie={:#x}", self.cookie)?;
        }
        for spec in &self.specs {
            match spec {
                LearnSpec::Match { dst, src: LearnSource::Field(src) } if src == dst => write!(f, ",{dst}")?,
                LearnSpec::Match { dst, src: LearnSource::Field(src) } => write!(f, ",{dst}={src}")?,
                LearnSpec::Match { dst, src: LearnSource::Value(v) } if whole(dst) => {
                    write!(f, ",{}={}", dst.field.def().name, format_value(dst.field, *v))?
                }
                LearnSpec::Match { dst, src: LearnSource::Value(v) } => write!(f, ",{dst}={v:#x}")?,
                LearnSpec::Load { dst, src: LearnSource::Field(src) } => write!(f, ",load:{src}->{dst}")?,
                LearnSpec::Load { dst, src: LearnSource::Value(v) } => write!(f, ",load:{v:#x}->{dst}")?,
                LearnSpec::Output { src } => write!(f, ",output:{src}")?,
            }
        }
        write!(f, ")")
    }
}

/// Whether `s` is all of its field (a constant for it is written in the field's notation).
fn whole(s: &SubField) -> bool {
    s.offset == 0 && s.n_bits == s.field.def().bits
}

impl Learn {
    /// The packet bits the learned flow is made of (what OVS `learn_mask` un-wildcards).
    pub(crate) fn read_bits(&self) -> impl Iterator<Item = SubField> + '_ {
        self.specs.iter().filter_map(|s| match *s {
            LearnSpec::Match { src: LearnSource::Field(f), .. }
            | LearnSpec::Load { src: LearnSource::Field(f), .. }
            | LearnSpec::Output { src: f } => Some(f),
            _ => None,
        })
    }

    /// The flow this action learns from `flow` (OVS `learn_execute`).
    pub(crate) fn flow_for(&self, flow: &FlowKey) -> Rule {
        let (mut value, mut mask) = (FlowKey::default(), FlowMask::CATCHALL);
        let mut actions = Vec::new();
        let bits = |src: &LearnSource, dst: &SubField| -> u128 {
            match *src {
                LearnSource::Field(f) => ((flow.get(f.field) & f.mask()) >> f.offset) << dst.offset,
                LearnSource::Value(v) => v << dst.offset,
            }
        };
        for spec in &self.specs {
            match spec {
                LearnSpec::Match { dst, src } => {
                    value.set_masked(dst.field, bits(src, dst), dst.mask());
                    mask.unwildcard(dst.field, dst.mask());
                }
                LearnSpec::Load { dst, src } => actions.push(Action::SetField {
                    field: dst.field,
                    value: bits(src, dst),
                    mask: dst.mask(),
                }),
                LearnSpec::Output { src } => {
                    let port = (flow.get(src.field) & src.mask()) >> src.offset;
                    // OVS: a port number, or IN_PORT, FLOOD, LOCAL, ALL; anything else is dropped.
                    let to = u32::try_from(port).ok().and_then(super::action::action_for_port);
                    actions.extend(to.filter(|a| !matches!(a, Action::Normal | Action::Controller)));
                }
            }
        }
        let mut rule = Rule::new(self.table, self.priority, &Match::new(value, mask), actions);
        rule.cookie = self.cookie;
        rule.idle_timeout = self.idle_timeout;
        rule.hard_timeout = self.hard_timeout;
        rule
    }
}

/// Parses the argument of `learn(...)` (`tok`: the argument's token) of `rule` (none in a
/// group bucket), whose match must guarantee the fields the learned flow is made of.
pub(super) fn parse_learn(tok: &Tok, names: &Names, rule: Option<&Rule>) -> Result<Learn, SpecError> {
    let mut l =
        Learn { table: 1, priority: 32768, idle_timeout: 0, hard_timeout: 0, cookie: 0, specs: Vec::new() };
    for t in split_top(tok.text, tok.offset, b",") {
        let t = Tok { text: t.text.trim(), offset: t.offset + (t.text.len() - t.text.trim_start().len()) };
        let (name, value) = match t.text.split_once('=') {
            Some((n, v)) if !n.contains(':') => (n, Some(v)),
            _ => (t.text, None),
        };
        let vtok = match value {
            Some(_) => t.sub(name.len() + 1, t.text.len()),
            None => t.sub(t.text.len(), t.text.len()),
        };
        let number = |what: &str| -> Result<u128, SpecError> {
            value.and_then(parse_int).ok_or_else(|| vtok.fail(format!("learn: bad {what}")))
        };
        match name {
            "table" => {
                let v = value.unwrap_or("");
                l.table = match parse_int(v) {
                    Some(n) if n < 255 => n as u8,
                    Some(_) => return Err(vtok.fail("learn: table must be 0..254")),
                    None => names.table(v).ok_or_else(|| vtok.fail(format!("unknown table '{v}'")))?,
                };
            }
            "priority" => {
                l.priority = u16::try_from(number("priority")?)
                    .map_err(|_| vtok.fail("learn: priority must be 0..65535"))?
            }
            "idle_timeout" => {
                l.idle_timeout = u16::try_from(number("idle_timeout")?)
                    .map_err(|_| vtok.fail("learn: bad idle_timeout"))?
            }
            "hard_timeout" => {
                l.hard_timeout = u16::try_from(number("hard_timeout")?)
                    .map_err(|_| vtok.fail("learn: bad hard_timeout"))?
            }
            "cookie" => {
                l.cookie = u64::try_from(number("cookie")?).map_err(|_| vtok.fail("learn: bad cookie"))?
            }
            "limit" | "result_dst" | "delete_learned" | "fin_idle_timeout" | "fin_hard_timeout"
            | "send_flow_rem" => {
                if name != "send_flow_rem" {
                    return Err(t.fail(format!("learn: {name} is not supported")));
                }
            }
            _ if t.text.starts_with("load:") => l.specs.push(parse_load(&t.sub(5, t.text.len()))?),
            _ if t.text.starts_with("output:") => {
                let src = parse_subfield(&t.sub(7, t.text.len()))?;
                if src.n_bits > 32 {
                    return Err(t.fail("learn: an output port has at most 32 bits"));
                }
                l.specs.push(LearnSpec::Output { src });
            }
            _ => {
                let dst = parse_subfield(&t.sub(0, name.len()))?;
                let src = match value {
                    None => LearnSource::Field(dst),
                    Some(v) => match parse_subfield(&vtok) {
                        Ok(src) if src.n_bits != dst.n_bits => {
                            return Err(t.fail(format!(
                                "learn: bit widths of {name} ({}) and {v} ({}) differ",
                                dst.n_bits, src.n_bits
                            )))
                        }
                        Ok(src) => LearnSource::Field(src),
                        Err(_) => LearnSource::Value(constant(&vtok, v, &dst)?),
                    },
                };
                l.specs.push(LearnSpec::Match { dst, src });
            }
        }
    }
    check_prerequisites(tok, &l)?;
    if let Some(f) = l.read_bits().find(|f| !satisfied(rule, f.field.def().prereq)) {
        return Err(tok.fail(format!(
            "learn: source field {} lacks correct prerequisites (the flow's match must guarantee it)",
            f.field.def().name
        )));
    }
    Ok(l)
}

/// `load:src->dst` or `load:value->dst`.
fn parse_load(t: &Tok) -> Result<LearnSpec, SpecError> {
    let (s, _) = t.text.split_once("->").ok_or_else(|| t.fail("learn: load needs SRC->DST"))?;
    let dst = parse_subfield(&t.sub(s.len() + 2, t.text.len()))?;
    let stok = t.sub(0, s.len());
    let src = match parse_int(s) {
        Some(v) => {
            if dst.n_bits < 128 && v >> dst.n_bits != 0 {
                return Err(stok.fail(format!("learn: {s} does not fit in {} bits", dst.n_bits)));
            }
            LearnSource::Value(v)
        }
        None => {
            let src = parse_subfield(&stok)?;
            if src.n_bits != dst.n_bits {
                return Err(
                    t.fail(format!("learn: load copies {} bits into {} bits", src.n_bits, dst.n_bits))
                );
            }
            LearnSource::Field(src)
        }
    };
    Ok(LearnSpec::Load { dst, src })
}

/// A constant for `dst`: the field's notation for a whole field, an integer for some bits.
fn constant(tok: &Tok, v: &str, dst: &SubField) -> Result<u128, SpecError> {
    if whole(dst) {
        let (value, mask) = parse_field_value(dst.field, v).map_err(|e| tok.fail(e.reason))?;
        if mask != dst.field.full_mask() {
            return Err(tok.fail("learn: a matched value has no mask"));
        }
        return Ok(value);
    }
    let value =
        parse_int(v).ok_or_else(|| tok.fail(format!("learn: cannot parse '{v}' as a field or a value")))?;
    if value >> dst.n_bits != 0 {
        return Err(tok.fail(format!("learn: value {v} does not fit into {} bits", dst.n_bits)));
    }
    Ok(value)
}

/// A learned flow matching an L3/L4 field must also match what the field needs (`dl_type`,
/// `nw_proto`) with constants: Open vSwitch would not install it otherwise.
fn check_prerequisites(tok: &Tok, l: &Learn) -> Result<(), SpecError> {
    use crate::packet::field::Prereq;
    let constant_of = |f| {
        l.specs.iter().find_map(|s| match s {
            LearnSpec::Match { dst, src: LearnSource::Value(v) }
                if dst.field == f && dst.n_bits == f.def().bits =>
            {
                Some(*v)
            }
            _ => None,
        })
    };
    let dl = constant_of(id::DL_TYPE).map(|v| v as u16);
    let nw = constant_of(id::NW_PROTO).map(|v| v as u8);
    for s in &l.specs {
        if let LearnSpec::Match { dst, .. } = s {
            let p = dst.field.def().prereq;
            if p != Prereq::None && p != Prereq::Vlan && !p.holds(dl, nw, Some(true), false) {
                return Err(tok.fail(format!(
                    "learn: matching {} needs the learned flow to match its prerequisites (eth_type=..., \
                     nw_proto=...) as constants",
                    dst.field.def().name
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::parser::parse_flows;
    use crate::openflow::Pipeline;

    #[test]
    fn the_mac_learning_example_learns_a_forwarding_flow() {
        let rules = parse_flows(
            "table=0 actions=learn(table=1,hard_timeout=60,NXM_OF_VLAN_TCI[0..11],\
             NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,1)",
            "f",
        )
        .unwrap();
        let Action::Learn(l) = &rules[0].actions[0] else { panic!("learn expected") };
        assert_eq!((l.table, l.priority, l.hard_timeout), (1, 32768, 60));
        let p = Pipeline::from_rules(rules);
        let packet = crate::openflow::parse_packet("in_port=3,dl_src=00:00:00:00:00:07,dl_vlan=5").unwrap();
        let mut tr = crate::openflow::Traversal::new();
        p.process(&packet, &mut tr);
        assert_eq!(tr.learned.len(), 1);
        let learned = &tr.learned[0];
        assert_eq!(learned.matcher().to_string(), "vlan_tci=0x0005/0x0fff,dl_dst=00:00:00:00:00:07");
        assert_eq!(learned.actions[..], [Action::Output(3)]);
        // The megaflow holds what the learned flow was made of.
        assert!(tr.megaflow.to_string().contains("dl_src=00:00:00:00:00:07"), "{}", tr.megaflow);
    }

    /// A learn action prints in a form that parses back to it (dumps and `--rule-stats` load
    /// back), whatever spelling it was written in.
    #[test]
    fn learn_actions_print_and_parse_back() {
        for flow in [
            "actions=learn(table=1,hard_timeout=60,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],\
             output:NXM_OF_IN_PORT[])",
            "ip actions=learn(table=2,priority=7,cookie=0x9,eth_type=0x800,NXM_OF_IP_DST[]=NXM_OF_IP_SRC[],\
             load:5->NXM_NX_REG1[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15],NXM_NX_REG2[0..3]=0x5)",
        ] {
            let rule = parse_flows(flow, "f").unwrap().remove(0);
            let printed = rule.to_string();
            let again = parse_flows(&printed, "printed").unwrap().remove(0);
            assert_eq!(again.actions, rule.actions, "{flow}\nprinted as {printed}");
        }
    }

    #[test]
    fn bad_learn_actions_say_where() {
        for (flow, want) in [
            ("actions=learn(tcp_dst=80)", "prerequisites"),
            ("actions=learn(limit=3,NXM_OF_ETH_DST[])", "limit is not supported"),
            ("actions=learn(NXM_OF_ETH_DST[]=NXM_OF_IP_SRC[])", "bit widths"),
            ("actions=learn(load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..3])", "copies 16 bits into 4 bits"),
            ("actions=learn(table=x)", "unknown table 'x'"),
            ("actions=learn(nosuch=1)", "unknown field 'nosuch'"),
        ] {
            let e = parse_flows(flow, "f").expect_err(flow);
            assert!(e.message.contains(want), "{flow}: {}", e.message);
            assert!(e.column > 8, "{flow}: column {}", e.column);
        }
        assert!(parse_flows(
            "actions=learn(eth_type=0x800,nw_proto=6,tcp_dst=80,load:1->NXM_NX_REG0[])",
            "f"
        )
        .is_ok());
        let e =
            parse_flows("actions=learn(eth_type=0x800,NXM_OF_IP_DST[]=NXM_OF_IP_SRC[])", "f").unwrap_err();
        assert!(e.message.contains("source field nw_src lacks correct prerequisites"), "{}", e.message);
        assert!(parse_flows("ip actions=learn(eth_type=0x800,NXM_OF_IP_DST[]=NXM_OF_IP_SRC[])", "f").is_ok());
    }
}
