//! OpenFlow actions as the pipeline executes them.
//!
//! The parser lowers every spelling (`mod_nw_src`, `set_field`, `load`, ...) onto this small
//! set, so execution has one code path per behaviour, and each carries OVS's semantics
//! (which fields it un-wildcards, when it is skipped).

pub use super::classifier::Conjunction;
use crate::packet::format::format_value;
use crate::packet::FieldId;

/// A contiguous bit range of a field, as in `NXM_NX_REG0[8..15]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SubField {
    /// The field.
    pub field: FieldId,
    /// First bit (0 = least significant).
    pub offset: u8,
    /// Number of bits.
    pub n_bits: u8,
}

impl SubField {
    /// The bits this sub-field selects, as a mask over the field's value.
    pub fn mask(&self) -> u128 {
        let ones = if self.n_bits >= 128 { u128::MAX } else { (1u128 << self.n_bits) - 1 };
        ones << self.offset
    }
}

impl std::fmt::Display for SubField {
    /// `name[first..last]`, as `move` and `learn` write bits.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[{}..{}]", self.field.def().name, self.offset, self.offset + self.n_bits - 1)
    }
}

/// One action or instruction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Send a copy of the packet as it is now to a port (skipped if it is the input port).
    Output(u32),
    /// Send the packet back out of its input port (`in_port` / `output:in_port`).
    OutputInPort,
    /// `output:FIELD[a..b]`: to the port number the bits hold (`output:NXM_NX_REG1[]`, as
    /// Antrea's Output table does), or to nothing if they hold none.
    OutputReg(SubField),
    /// `FLOOD`: a copy to every port of the switch but the input port (ports marked
    /// `no-flood` are not modelled: every port floods).
    Flood,
    /// `ALL`: a copy to every port of the switch but the input port.
    All,
    /// `NORMAL`: the L2 learning switch (see [`super::normal`]).
    Normal,
    /// `group:N`: run group `N`'s buckets (each on a copy of the packet).
    Group(u32),
    /// `goto_table:N` instruction: continue in a later table (always last).
    GotoTable(u8),
    /// `resubmit([port],[table])`: look up again, optionally as from another port, then
    /// continue with the remaining actions.
    Resubmit {
        /// Input port to look up with; `None` keeps the current one.
        in_port: Option<u32>,
        /// Table to look up in; `None` means the current table.
        table: Option<u8>,
    },
    /// Write `value` into the `mask` bits of `field` if the packet has the field
    /// (`set_field`, `load`, `mod_dl_src`, `mod_nw_src`, `mod_tp_dst`, ...).
    SetField {
        /// Field written.
        field: FieldId,
        /// New value (only bits under `mask` are used).
        value: u128,
        /// Bits written.
        mask: u128,
    },
    /// `move:SRC[a..b]->DST[c..d]`: copy bits between fields.
    Move {
        /// Source bits.
        src: SubField,
        /// Destination bits (same width).
        dst: SubField,
    },
    /// `push:SRC[a..b]`: push the bits onto the translation's stack (OVS's `stack_push`, the
    /// stack frozen across recirculations with the rest of the pipeline state).
    StackPush(SubField),
    /// `pop:DST[a..b]`: pop the stack's top into the bits (its low bits; nothing if the stack
    /// is empty).
    StackPop(SubField),
    /// `clone(ACTIONS)`: run the actions on a copy of the packet and of the pipeline state;
    /// what follows sees them as before (OVS `clone`).
    Clone(Vec<Action>),
    /// `write_metadata:V/M` instruction.
    WriteMetadata {
        /// Value.
        value: u64,
        /// Bits written.
        mask: u64,
    },
    /// `push_vlan:TPID`: new outer tag with VID 0, PCP 0 (as OVS).
    PushVlan(u16),
    /// `pop_vlan` / `strip_vlan`: remove the outer tag.
    PopVlan,
    /// `mod_vlan_vid` / `set_vlan_vid`; `push_if_needed` is OpenFlow 1.0's behaviour of adding a
    /// tag to untagged packets (`mod_vlan_vid`).
    SetVlanVid {
        /// VLAN id (12 bits).
        vid: u16,
        /// Add a tag when there is none.
        push_if_needed: bool,
    },
    /// `mod_vlan_pcp` / `set_vlan_pcp`.
    SetVlanPcp {
        /// Priority code point (3 bits).
        pcp: u8,
        /// Add a tag when there is none.
        push_if_needed: bool,
    },
    /// `dec_ttl`: decrement IP TTL; at TTL ≤ 1 the packet goes to the controller and the
    /// current action list stops.
    DecTtl,
    /// `controller` / `output:CONTROLLER`: a copy to the controller (a packet-in). hyflow has
    /// no controller: the copy is counted, and, as in OVS, the flow stays in the slow path.
    Controller,
    /// `note:HEX`: an annotation, no effect on forwarding (kept as written).
    Note(String),
    /// `meter:N`: rate limiting, not modelled (accepted; the packet passes).
    Meter(u32),
    /// `sample(...)`: sFlow/IPFIX sampling, no effect on forwarding (kept as written).
    Sample(String),
    /// `learn(...)`: install a flow made from the packet (see [`super::learn`]).
    Learn(Box<super::learn::Learn>),
    /// `ct(...)`: through the connection tracker (see [`super::ct`]).
    Ct(Box<super::ct::Ct>),
    /// `ct_clear`: the packet leaves the connection tracker's view (untracked, ct_* cleared).
    CtClear,
    /// `conjunction(id,k/n)`: this rule is clause `k` of `n` of conjunctive match `id` (a
    /// rule with it has only such actions, and notes). It is never executed: the classifier
    /// resolves conjunctions and returns the rule matching `conj_id=id`.
    Conjunction(Conjunction),
}

/// The output a port number stands for (OVS `xlate_output_action`): a port, or one of the
/// reserved ports `IN_PORT`, `FLOOD`, `ALL`, `NORMAL`, `CONTROLLER`, `LOCAL`; `None` for any
/// other number (nothing is sent).
pub(crate) fn action_for_port(port: u32) -> Option<Action> {
    use super::names::{ALL_PORT, CONTROLLER_PORT, FLOOD_PORT, LOCAL_PORT, NORMAL_PORT};
    match port {
        p if p > 0 && p < 0xff00 => Some(Action::Output(p)),
        0xfff8 => Some(Action::OutputInPort),
        FLOOD_PORT => Some(Action::Flood),
        ALL_PORT => Some(Action::All),
        NORMAL_PORT => Some(Action::Normal),
        CONTROLLER_PORT => Some(Action::Controller),
        LOCAL_PORT => Some(Action::Output(LOCAL_PORT)),
        _ => None,
    }
}

/// The conjunctions a rule is a clause of (empty for an ordinary rule).
pub fn conjunctions(actions: &[Action]) -> Vec<Conjunction> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Conjunction(c) => Some(*c),
            _ => None,
        })
        .collect()
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Output(p) => write!(f, "output:{p}"),
            Action::OutputInPort => write!(f, "in_port"),
            Action::OutputReg(src) => write!(f, "output:{src}"),
            Action::Flood => write!(f, "FLOOD"),
            Action::All => write!(f, "ALL"),
            Action::Normal => write!(f, "NORMAL"),
            Action::Group(g) => write!(f, "group:{g}"),
            Action::GotoTable(t) => write!(f, "goto_table:{t}"),
            Action::Resubmit { in_port, table } => {
                let p = in_port.map(|p| p.to_string()).unwrap_or_default();
                let t = table.map(|t| t.to_string()).unwrap_or_default();
                write!(f, "resubmit({p},{t})")
            }
            Action::SetField { field, value, mask }
                if *field == crate::packet::field::id::NW_TOS && *mask == 0xfc =>
            {
                write!(f, "mod_nw_tos:{value}")
            }
            Action::SetField { field, value, mask } => {
                let full = field.full_mask();
                if *mask == full {
                    write!(f, "set_field:{}->{}", format_value(*field, *value), field.def().name)
                } else {
                    write!(
                        f,
                        "set_field:{}/{}->{}",
                        format_value(*field, *value & mask),
                        format_value(*field, *mask),
                        field.def().name
                    )
                }
            }
            Action::Move { src, dst } => write!(f, "move:{src}->{dst}"),
            Action::StackPush(src) => write!(f, "push:{src}"),
            Action::Clone(body) => {
                write!(f, "clone(")?;
                for (i, a) in body.iter().enumerate() {
                    write!(f, "{}{a}", if i > 0 { "," } else { "" })?;
                }
                write!(f, ")")
            }
            Action::StackPop(dst) => write!(f, "pop:{dst}"),
            Action::WriteMetadata { value, mask } => write!(f, "write_metadata:{value:#x}/{mask:#x}"),
            Action::PushVlan(tpid) => write!(f, "push_vlan:{tpid:#06x}"),
            Action::PopVlan => write!(f, "pop_vlan"),
            Action::SetVlanVid { vid, push_if_needed: true } => write!(f, "mod_vlan_vid:{vid}"),
            Action::SetVlanVid { vid, .. } => write!(f, "set_vlan_vid:{vid}"),
            Action::SetVlanPcp { pcp, push_if_needed: true } => write!(f, "mod_vlan_pcp:{pcp}"),
            Action::SetVlanPcp { pcp, .. } => write!(f, "set_vlan_pcp:{pcp}"),
            Action::DecTtl => write!(f, "dec_ttl"),
            Action::Controller => write!(f, "controller"),
            Action::Note(hex) => write!(f, "note:{hex}"),
            Action::Meter(id) => write!(f, "meter:{id}"),
            Action::Sample(args) => write!(f, "sample({args})"),
            Action::Conjunction(c) => write!(f, "conjunction({},{}/{})", c.id, c.clause + 1, c.n_clauses),
            Action::Learn(l) => write!(f, "{l}"),
            Action::Ct(ct) => write!(f, "{ct}"),
            Action::CtClear => write!(f, "ct_clear"),
        }
    }
}

/// Writes an action list as ovs-ofctl would (`drop` when empty).
pub fn format_actions(actions: &[Action]) -> String {
    if actions.is_empty() {
        return "drop".to_string();
    }
    actions.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(",")
}
