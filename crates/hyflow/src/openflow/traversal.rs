//! The record of one packet's trip through the pipeline, and the megaflow derived from it.
//!
//! Gigaflow (§4.2) caches *sub-traversals* of this record and FlowShadow credits rule counters
//! from it, so it keeps, per table lookup, the flow as the lookup saw it and the wildcard mask
//! that lookup needed. A `Traversal` is reused across packets: no allocation per packet once
//! its vectors have grown.

use super::datapath::DpAction;
use super::rule::{Match, RuleId};
use crate::packet::{FlowKey, FlowMask};

/// One table lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// Table looked up.
    pub table: u8,
    /// Nesting level: 0 for table 0's lookup, +1 inside each goto_table or resubmit.
    pub depth: u16,
    /// Rule matched, `None` on a table miss.
    pub rule: Option<RuleId>,
    /// The flow the lookup saw (after earlier rewrites; `in_port` as given by `resubmit`).
    pub flow: FlowKey,
    /// Bits of `flow` this lookup depended on.
    pub mask: FlowMask,
}

impl Step {
    /// The outcome of this lookup as consistency bookkeeping names it.
    #[inline]
    pub fn outcome(&self) -> LookupRef {
        match self.rule {
            Some(r) => LookupRef::rule(r),
            None => LookupRef::miss(self.table),
        }
    }
}

/// The outcome of one table lookup, a rule or a table's miss, as one `u32`.
///
/// Caches record the outcomes a cached decision depends on; a rule update names the outcomes
/// it may have changed. A table miss needs a name too: adding a rule can turn a miss into a
/// hit. Rule ids are never reused, so a reference to a deleted rule cannot alias a new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LookupRef(u32);

impl LookupRef {
    const MISS: u32 = 1 << 31;

    /// The lookup hit `rule`.
    #[inline]
    pub fn rule(rule: RuleId) -> LookupRef {
        debug_assert!(rule < Self::MISS);
        LookupRef(rule)
    }

    /// The lookup missed `table`.
    #[inline]
    pub fn miss(table: u8) -> LookupRef {
        LookupRef(Self::MISS | table as u32)
    }

    /// The rule hit, if this is not a miss.
    #[inline]
    pub fn as_rule(self) -> Option<RuleId> {
        (self.0 & Self::MISS == 0).then_some(self.0)
    }

    /// The table missed, if this is a miss.
    #[inline]
    pub fn as_miss(self) -> Option<u8> {
        (self.0 & Self::MISS != 0).then_some(self.0 as u8)
    }
}

/// One copy of the packet leaving the switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Output {
    /// Port it leaves on.
    pub port: u32,
    /// Header state as it leaves.
    pub packet: FlowKey,
}

/// Why the pipeline dropped a packet outright (as opposed to simply not outputting it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// More than [`MAX_DEPTH`](super::pipeline::MAX_DEPTH) nested backward resubmits.
    RecursionTooDeep,
    /// More than [`MAX_RESUBMITS`](super::pipeline::MAX_RESUBMITS) table lookups.
    TooManyResubmits,
}

impl DropReason {
    /// Short stable name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::RecursionTooDeep => "recursion_too_deep",
            DropReason::TooManyResubmits => "too_many_resubmits",
        }
    }
}

/// Everything the slow path decided about one packet.
#[derive(Clone, Debug, Default)]
pub struct Traversal {
    /// The packet as it entered.
    pub entry: FlowKey,
    /// Table lookups in order.
    pub steps: Vec<Step>,
    /// Union of every bit examined (lookups and actions), finished into the megaflow mask.
    pub wc: FlowMask,
    /// The megaflow: entry packet under `wc`.
    pub megaflow: Match,
    /// Composed datapath actions.
    pub dp_actions: Vec<DpAction>,
    /// Outputs in order.
    pub outputs: Vec<Output>,
    /// The flow when processing ended (all rewrites applied).
    pub final_flow: FlowKey,
    /// Set when the whole packet was dropped by a translation limit.
    pub drop_reason: Option<DropReason>,
    /// `dec_ttl` on TTL ≤ 1 (packet sent to the controller, action list stopped).
    pub ttl_exceeded: u32,
    /// Execution stack of the slow path, kept here so it is reused across packets.
    pub(crate) frames: Vec<super::pipeline::Frame>,
}

impl Traversal {
    /// An empty record.
    pub fn new() -> Traversal {
        Traversal::default()
    }

    /// Starts a new packet; `megaflow` and `final_flow` are left for `process` to overwrite.
    pub(crate) fn reset(&mut self, entry: &FlowKey) {
        self.entry = *entry;
        self.steps.clear();
        self.frames.clear();
        self.wc = FlowMask::CATCHALL;
        self.dp_actions.clear();
        self.outputs.clear();
        self.drop_reason = None;
        self.ttl_exceeded = 0;
    }

    /// Whether no copy of the packet leaves the switch.
    pub fn is_drop(&self) -> bool {
        self.outputs.is_empty()
    }

    /// Rules hit, in order (a rule hit twice through resubmit appears twice).
    pub fn rules(&self) -> impl Iterator<Item = RuleId> + '_ {
        self.steps.iter().filter_map(|s| s.rule)
    }

    /// Outcome of every lookup, in order: what a cached copy of this decision depends on.
    pub fn outcomes(&self) -> impl Iterator<Item = LookupRef> + '_ {
        self.steps.iter().map(Step::outcome)
    }
}
