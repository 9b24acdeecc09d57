//! The record of one packet's trip through the pipeline, and the megaflow derived from it.
//!
//! Gigaflow (§4.2) caches *sub-traversals* of this record and FlowShadow credits rule counters
//! from it, so it keeps, per table lookup, the flow as the lookup saw it and the wildcard mask
//! that lookup needed. A `Traversal` is reused across packets: no allocation per packet once
//! its vectors have grown.

use super::dp_actions::DpAction;
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
    pub(crate) fn miss(table: u8) -> LookupRef {
        LookupRef(Self::MISS | table as u32)
    }

    /// Not a lookup: the mark, last on a decision's path, of a decision that learns (`learn`
    /// flows, `NORMAL` MACs) or uses the MAC table: whoever serves it must learn again, and a
    /// change of the MAC table revalidates it. Table 255 does not exist, so no rule update
    /// ever names it.
    pub const STATEFUL: LookupRef = LookupRef(Self::MISS | 255);

    /// The rule hit, if this is not a miss.
    #[inline]
    pub(crate) fn as_rule(self) -> Option<RuleId> {
        (self.0 & Self::MISS == 0).then_some(self.0)
    }

    /// The table missed, if this is a miss.
    #[inline]
    pub(crate) fn as_miss(self) -> Option<u8> {
        (self.0 & Self::MISS != 0).then_some(self.0 as u8)
    }
}

/// One copy of the packet leaving the switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Output {
    /// Port it leaves on.
    pub port: u32,
    /// Header state as it leaves (no datapath metadata: see [`FlowMask::leaving`]).
    pub packet: FlowKey,
}

/// Why the pipeline dropped a packet outright (as opposed to simply not outputting it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// More than [`MAX_DEPTH`](super::pipeline::MAX_DEPTH) nested backward resubmits.
    RecursionTooDeep,
    /// More than [`MAX_RESUBMITS`](super::pipeline::MAX_RESUBMITS) table lookups.
    TooManyResubmits,
    /// A later pass whose `recirc_id` no pass froze.
    NoRecirculationContext,
}

impl DropReason {
    /// Short stable name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::RecursionTooDeep => "recursion_too_deep",
            DropReason::TooManyResubmits => "too_many_resubmits",
            DropReason::NoRecirculationContext => "no_recirculation_context",
        }
    }
}

/// An action list that resumes once the rule hit at a lookup has run: the part of a
/// [`LookupPoint`] that `resubmit` leaves behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Resume {
    /// Rule whose actions resume.
    pub rule: RuleId,
    /// Index of the next action to run.
    pub pc: u32,
    /// Backward-resubmit nesting while it runs (OVS's depth limit applies to it).
    pub depth: u32,
}

/// Where a table lookup happens, with everything besides the flow that decides how
/// translation goes on from it: Gigaflow's table tag, made exact. Two lookups at equal points
/// on equal flows translate identically from there on. For pipelines that only use
/// `goto_table` (a tail call) the continuation is empty and a point is its table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LookupPoint {
    /// Table looked up.
    pub table: u8,
    /// Input port the lookup uses instead of the flow's (`resubmit(port,table)`).
    pub in_port: Option<u32>,
    /// Backward-resubmit nesting before the lookup.
    pub depth: u32,
    /// Whether the lookup is a backward resubmit (adds one to the nesting).
    pub deepens: bool,
    /// Whether it counts towards OVS's limits (every lookup but the first).
    pub counted: bool,
    /// Action lists still to run after the hit rule's own, innermost last. Lists with
    /// nothing left to run are left out.
    pub continuation: Vec<Resume>,
}

impl LookupPoint {
    /// Where every packet starts: table 0, nothing to resume.
    pub fn initial() -> LookupPoint {
        LookupPoint::default()
    }
}

/// How one lookup was reached (recorded for every step; the continuation lives in
/// [`Traversal::resumes`], so recording allocates nothing per packet once warm).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PointRec {
    /// `in_port` override of the lookup.
    pub in_port: Option<u32>,
    /// The flow's own `in_port` at the lookup (what it is outside the lookup).
    pub flow_in_port: u32,
    /// Nesting before the lookup.
    pub depth: u32,
    /// Whether the lookup deepened the nesting.
    pub deepens: bool,
    /// Whether it counted towards the limits.
    pub counted: bool,
    /// Range of [`Traversal::resumes`] holding its continuation.
    pub resumes: (u32, u32),
}

/// What the actions between one lookup and the next did, recorded when
/// [`Traversal::record_segments`] is set (Gigaflow builds sub-traversal entries from it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interval {
    /// Bits the actions examined before writing them (prerequisites, sources, `dec_ttl`'s
    /// TTL, a pushed or popped VLAN stack); not the bits a `set_field` or `move` merely
    /// overwrites.
    pub read: FlowMask,
    /// Bits the actions wrote.
    pub written: FlowMask,
}

/// Where an output happened: in the interval after lookup `step`, with `written` the bits
/// that interval's actions had written by then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputMark {
    /// Index of the step whose interval holds the output.
    pub step: u32,
    /// Bits written in that interval before the output.
    pub written: FlowMask,
}

/// A clone of the packet `ct(table=N)` recirculates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fork {
    /// Its recirculation id.
    pub recirc_id: u32,
    /// The flow when it froze, with the connection's zone, and the mark and label `exec` set.
    pub flow: FlowKey,
    /// The `nat(...)` the connection tracker applies to it.
    pub nat: Option<super::ct::Nat>,
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
    /// Copies sent to the controller: `controller` actions and TTL expiries. A decision with
    /// any stays in the slow path (OVS slow-paths such flows), so no cache holds it.
    pub to_controller: u32,
    /// A header rewrite OVS's datapath cannot do (ARP fields, ICMP type and code): as in OVS,
    /// the decision stays in the slow path.
    pub slow_action: bool,
    /// Flows the `learn` actions made from the packet, in order (installed by the switch, not
    /// by translation, which has no side effects).
    pub learned: Vec<super::rule::Rule>,
    /// MACs `NORMAL` learned, in order (applied by the switch).
    pub mac_learned: Vec<super::normal::MacLearn>,
    /// Whether `NORMAL` ran: the decision depends on the MAC table.
    pub uses_mac_table: bool,
    /// The group buckets that ran, in order: (group id, bucket id).
    pub buckets: Vec<(u32, u32)>,
    /// Clones `ct(table=N)` sent to another pass, in order: what `ofproto/trace` follows.
    pub forks: Vec<Fork>,
    /// Whether `push` or `pop` ran: a sub-traversal entry cannot carry the stack, so such a
    /// traversal is never cut.
    pub uses_stack: bool,
    /// The `push`/`pop` stack, kept here so it is reused across packets.
    pub(crate) stack: Vec<u128>,
    /// The stacks of the running `clone` bodies' callers, restored after each.
    pub(crate) saved_stacks: Vec<u128>,
    /// Whether a group bucket or a `clone` ran. Each acts on a copy of the packet (the flow
    /// is restored after it), which an overlay cannot express: such a traversal is never cut
    /// into sub-traversals.
    pub ran_on_copy: bool,
    /// Execution stack of the slow path, kept here so it is reused across packets.
    pub(crate) frames: Vec<Frame>,
    /// The flow before each running group bucket, restored when it ends.
    pub(crate) saved_flows: Vec<FlowKey>,
    /// The classifier's memory for conjunctive matches, reused across lookups.
    pub(crate) lookup_scratch: super::classifier::LookupScratch,
    /// How each lookup was reached, parallel to `steps`.
    pub points: Vec<PointRec>,
    /// Continuations of `points`.
    pub resumes: Vec<Resume>,
    /// Set to also record `intervals` and `output_marks` (off by default: the fast paths
    /// that only need megaflows do not pay for it).
    pub record_segments: bool,
    /// Per step, what the actions after it did (when recording).
    pub intervals: Vec<Interval>,
    /// Per output, where it happened (when recording).
    pub output_marks: Vec<OutputMark>,
    /// When translation stopped before a lookup because a lookup budget ran out
    /// ([`Pipeline::run_from`](super::Pipeline::run_from)): that lookup's point, with the
    /// flow then in `final_flow`.
    pub stopped_at: Option<LookupPoint>,
}

impl Traversal {
    /// An empty record.
    pub fn new() -> Traversal {
        Traversal::default()
    }

    /// Starts a new packet; `megaflow` and `final_flow` are left for `process` to overwrite.
    pub(crate) fn reset(&mut self, entry: &FlowKey) {
        self.entry = *entry;
        self.forks.clear();
        self.slow_action = false;
        self.steps.clear();
        self.frames.clear();
        self.saved_flows.clear();
        self.ran_on_copy = false;
        self.uses_stack = false;
        self.stack.clear();
        self.saved_stacks.clear();
        self.buckets.clear();
        self.learned.clear();
        self.mac_learned.clear();
        self.uses_mac_table = false;
        self.wc = FlowMask::CATCHALL;
        self.dp_actions.clear();
        self.outputs.clear();
        self.drop_reason = None;
        self.ttl_exceeded = 0;
        self.to_controller = 0;
        self.points.clear();
        self.resumes.clear();
        self.intervals.clear();
        self.output_marks.clear();
        self.stopped_at = None;
    }

    /// The point of lookup `i` (allocates: for building cache entries, not per packet).
    pub fn point(&self, i: usize) -> LookupPoint {
        let (p, s) = (&self.points[i], &self.steps[i]);
        LookupPoint {
            table: s.table,
            in_port: p.in_port,
            depth: p.depth,
            deepens: p.deepens,
            counted: p.counted,
            continuation: self.resumes[p.resumes.0 as usize..p.resumes.1 as usize].to_vec(),
        }
    }

    /// The flow at lookup `i` as the packet carries it (its own `in_port`, not a resubmit's).
    pub fn state_at(&self, i: usize) -> FlowKey {
        let mut k = self.steps[i].flow;
        k.set_in_port(self.points[i].flow_in_port);
        k
    }

    /// Whether no copy of the packet leaves the switch.
    pub fn is_drop(&self) -> bool {
        self.outputs.is_empty()
    }

    /// Rules hit, in order (a rule hit twice through resubmit appears twice).
    pub fn rules(&self) -> impl Iterator<Item = RuleId> + '_ {
        self.steps.iter().filter_map(|s| s.rule)
    }

    /// Outcome of every lookup, in order: what a cached copy of this decision depends on;
    /// then [`LookupRef::STATEFUL`] if it learns or uses the MAC table.
    pub fn outcomes(&self) -> impl Iterator<Item = LookupRef> + '_ {
        self.steps.iter().map(Step::outcome).chain(self.is_stateful().then_some(LookupRef::STATEFUL))
    }

    /// Whether the decision must stay in the slow path (OVS slow-paths it): a copy to the
    /// controller, or a rewrite the datapath cannot do.
    pub fn slow_path_only(&self) -> bool {
        self.to_controller > 0 || self.slow_action
    }

    /// Whether the decision learns (flows or MACs) or depends on the MAC table.
    pub(crate) fn is_stateful(&self) -> bool {
        !self.learned.is_empty() || self.uses_mac_table
    }

    /// Whether the decision goes through the connection tracker or recirculation: it is a
    /// later pass, or its datapath actions track, clear or recirculate.
    pub(crate) fn uses_conntrack(&self) -> bool {
        self.entry.recirc_id() != 0
            || self
                .dp_actions
                .iter()
                .any(|a| matches!(a, DpAction::Ct(_) | DpAction::CtClear | DpAction::Recirc(_)))
    }
}

/// One rule's action list being executed: what a native call frame would hold. Nested
/// `goto_table`/`resubmit` push frames on [`Traversal`]'s reusable stack instead of recursing,
/// so the 4,096 nested lookups OVS's limits allow cannot exhaust the thread's stack.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    pub(super) list: List,
    /// Next action to run.
    pub(super) pc: usize,
    /// Table to return to when the list is done.
    pub(super) old_table: u8,
    /// What entering this frame added to OVS's backward-resubmit depth (0 or 1, more for a
    /// frame that stands for several finished ones in [`Pipeline::run_from`](super::Pipeline::run_from)).
    pub(super) deepens: u32,
}

/// The action list a [`Frame`] runs.
#[derive(Clone, Copy, Debug)]
pub(super) enum List {
    /// A rule's actions.
    Rule(RuleId),
    /// A group bucket's action set; when it is done the flow is restored (each bucket acts on
    /// a copy of the packet).
    Bucket { group: u32, bucket: u16 },
    /// An `all` group: its buckets from `next` on, run one after the other.
    Buckets { group: u32, next: u16 },
    /// Action list `i` of the frozen state this pass resumed.
    Frozen(u16),
}
