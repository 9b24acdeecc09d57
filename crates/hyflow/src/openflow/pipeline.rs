//! The multi-table OpenFlow pipeline: the slow path every cache is checked against.
//!
//! [`Pipeline::process`] runs one packet through the tables with Open vSwitch's semantics
//! (`ofproto/ofproto-dpif-xlate.c`): `goto_table` forward only, `resubmit` anywhere with
//! OVS's depth and count limits, `set_field` un-wildcarding what it writes, lazy commit of
//! header rewrites at each output, output to the input port skipped, table miss ends the path.
//! It fills a reusable [`Traversal`] with every lookup, the megaflow and the datapath actions.

use super::action::{action_for_port, conjunctions, Action};
use super::action_pool::ActionPool;
use super::classifier::{Classifier, ClsEntry};
use super::ct::{Ct, CtZone};
use super::dp_actions::{
    commit, drop_uncommittable, needs_slow_path, reversible, unwrap_trailing_clone, CtExec, DpAction,
    VlanFate,
};
use super::expiry::RuleTimers;
use super::group::{GroupKind, Groups, Selection, SwitchPorts};
use super::names::LOCAL_PORT;
use super::normal::{is_multicast, is_reserved, MacLearn, MacTable};
use super::prefixes::PrefixTries;
use super::recirc::{Frozen, FrozenList, RecircIds};
use super::rule::{Match, Rule, RuleId};
use super::traversal::{
    DropReason, Fork, Frame, Interval, List, LookupPoint, Output, OutputMark, PointRec, Resume, Step,
    Traversal,
};
use crate::packet::ct_state;
use crate::packet::field::{id, proto, word, FieldId};
use crate::packet::{FlowKey, FlowMask};
use std::sync::{Arc, Mutex};

/// OpenFlow tables 0..=254.
pub(crate) const N_TABLES: usize = 255;
/// OVS `MAX_DEPTH`: nesting of resubmits that go back to the same or an earlier table.
pub const MAX_DEPTH: u32 = 64;
/// OVS `MAX_RESUBMITS`: table lookups (resubmit and goto_table) per packet.
pub const MAX_RESUBMITS: u32 = 4096;

/// Packet and byte counters of one rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleStats {
    /// Packets that hit the rule.
    pub packets: u64,
    /// Bytes of those packets.
    pub bytes: u64,
    /// When it was last hit (or added), ns: what its idle timeout counts from.
    pub used_ns: u64,
}

/// All tables and their rules.
pub struct Pipeline {
    tables: Vec<Classifier>,
    rules: Vec<Option<Rule>>,
    /// The installed rules' action lists, each distinct list once.
    action_pool: ActionPool,
    seqs: Vec<u64>,
    stats: Vec<RuleStats>,
    timers: RuleTimers,
    next_seq: u64,
    n_rules: usize,
    groups: Groups,
    ports: SwitchPorts,
    macs: MacTable,
    /// Frozen states of `ct(table=N)` passes by id: given out during translation, as OVS's
    /// `recirc_alloc_id_ctx` does (equal states share an id, so translation stays a function
    /// of the packet and the rules), behind a lock so that translation can take `&self`.
    recirc: Mutex<RecircIds>,
}

impl Default for Pipeline {
    fn default() -> Self {
        Self::new()
    }
}

/// A pipeline being loaded with many rules at once (a flow file's, while it is still being
/// parsed): the prefix tries are built once, bottom-up from the sorted prefixes, when the load
/// finishes, where a million insertions one by one each walked the trie from its root.
/// Nothing looks up a loading pipeline.
pub struct PipelineLoad(Pipeline);

impl PipelineLoad {
    /// An empty load with room for `n` rules (a guess: more may be added).
    pub fn with_capacity(n: usize) -> PipelineLoad {
        let mut p = Pipeline::new();
        // Reserved, the arena needs no slack nor a copy while it grows.
        p.rules.reserve_exact(n);
        p.seqs.reserve_exact(n);
        p.stats.reserve_exact(n);
        p.tables.iter_mut().for_each(Classifier::defer_tries);
        PipelineLoad(p)
    }

    /// Adds a rule, as [`Pipeline::add`].
    pub fn add(&mut self, rule: Rule) -> RuleId {
        self.0.add(rule)
    }

    /// The rules added so far, in id order.
    pub fn rules(&self) -> impl Iterator<Item = &Rule> + Clone {
        self.0.rules.iter().flatten()
    }

    /// The pipeline, with the groups and ports its rules refer to and the MAC table `NORMAL`
    /// starts with.
    pub fn finish(self, groups: Groups, ports: SwitchPorts, macs: MacTable) -> Pipeline {
        let mut p = self.0;
        p.tables.iter_mut().for_each(Classifier::flush_tries);
        p.groups = groups;
        p.ports = ports;
        p.macs = macs;
        p
    }
}

impl Pipeline {
    /// An empty pipeline: every packet misses table 0 and is dropped.
    pub fn new() -> Pipeline {
        Pipeline {
            tables: (0..N_TABLES).map(|_| Classifier::new()).collect(),
            rules: Vec::new(),
            action_pool: ActionPool::default(),
            seqs: Vec::new(),
            stats: Vec::new(),
            timers: RuleTimers::default(),
            next_seq: 0,
            n_rules: 0,
            groups: Groups::new(),
            ports: SwitchPorts::default(),
            macs: MacTable::default(),
            recirc: Mutex::new(RecircIds::default()),
        }
    }

    /// The frozen state a recirculation id stands for.
    pub fn frozen(&self, recirc_id: u32) -> Option<Arc<Frozen>> {
        self.recirc.lock().expect("recirculation ids").state(recirc_id).cloned()
    }

    /// Sets every table's prefix tries (OVS's `Flow_Table` `prefixes`, here one setting for
    /// all tables): which address fields' tries lookups use to keep megaflows wide.
    pub fn set_prefix_tries(&mut self, prefixes: PrefixTries) {
        for t in &mut self.tables {
            t.set_prefix_tries(prefixes);
        }
    }

    /// The MAC table.
    pub fn macs(&self) -> &MacTable {
        &self.macs
    }

    /// Applies MACs a translation learned at `now_ns`; returns whether forwarding may change.
    pub(crate) fn learn_macs(&mut self, learned: &[MacLearn], now_ns: u64) -> bool {
        learned.iter().fold(false, |changed, &l| self.macs.learn(l, now_ns) | changed)
    }

    /// Expires idle MACs at `now_ns`; returns whether any was.
    pub(crate) fn expire_macs(&mut self, now_ns: u64) -> bool {
        self.macs.expire(now_ns)
    }

    /// The slow path of a switch: `rules` (added in order) with the groups and ports they refer
    /// to and the MAC table `NORMAL` starts with.
    pub fn of_switch(
        rules: impl IntoIterator<Item = Rule>,
        groups: Groups,
        ports: SwitchPorts,
        macs: MacTable,
    ) -> Pipeline {
        let rules = rules.into_iter();
        let mut load = PipelineLoad::with_capacity(rules.size_hint().0);
        for r in rules {
            load.add(r);
        }
        load.finish(groups, ports, macs)
    }

    /// A pipeline holding `rules`, added in order.
    pub fn from_rules(rules: impl IntoIterator<Item = Rule>) -> Pipeline {
        Pipeline::of_switch(rules, Groups::new(), SwitchPorts::default(), MacTable::default())
    }

    /// Adds a rule; a rule with the same table, match and priority is replaced (its counters
    /// reset), as `ovs-ofctl add-flow` does. Returns the new rule's id.
    pub fn add(&mut self, mut rule: Rule) -> RuleId {
        let matcher = rule.matcher();
        let id = self.rules.len() as RuleId;
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Err(old) = self.classify(id, &rule, &matcher, seq) {
            self.remove(old);
            self.classify(id, &rule, &matcher, seq).expect("the rule it replaces is gone");
        }
        self.timers.added(id, &rule);
        self.action_pool.take(&mut rule.actions);
        self.rules.push(Some(rule));
        self.seqs.push(seq);
        self.stats.push(RuleStats::default());
        self.n_rules += 1;
        id
    }

    /// Enters rule `id` in its table's classifier: a soft rule if it is a clause of
    /// conjunctions. The error is the rule with the same match and priority already there.
    fn classify(&mut self, id: RuleId, rule: &Rule, matcher: &Match, seq: u64) -> Result<(), RuleId> {
        let conj = conjunctions(&rule.actions);
        let entry = ClsEntry { rule: id, priority: rule.priority, seq, soft: !conj.is_empty() };
        let table = &mut self.tables[rule.table as usize];
        if conj.is_empty() {
            table.insert(matcher, entry)
        } else {
            table.insert_soft(matcher, entry, &conj)
        }
    }

    /// Removes a rule; returns it if it was installed.
    pub fn remove(&mut self, id: RuleId) -> Option<Rule> {
        let rule = self.rules.get_mut(id as usize)?.take()?;
        self.tables[rule.table as usize].remove(&rule.matcher(), id);
        self.timers.removed(id);
        self.action_pool.give_back(&rule.actions);
        self.n_rules -= 1;
        Some(rule)
    }

    /// Replaces a rule's actions (and cookie), keeping its counters, as `ovs-ofctl mod-flows`.
    /// Returns whether the rule is installed.
    pub fn modify(&mut self, id: RuleId, actions: &[Action], cookie: Option<u64>) -> bool {
        let Some(rule) = self.rules.get_mut(id as usize).and_then(|r| r.as_mut()) else { return false };
        let reclassify = conjunctions(&rule.actions) != conjunctions(actions);
        self.action_pool.give_back(&rule.actions);
        rule.actions = actions.into();
        self.action_pool.take(&mut rule.actions);
        self.timers.modified(id);
        if let Some(c) = cookie {
            rule.cookie = c;
        }
        if reclassify {
            // Becoming (or ceasing to be) a clause, or of other conjunctions: same place in
            // the table's order, new role.
            let (rule, matcher) = (rule.clone(), rule.matcher());
            self.tables[rule.table as usize].remove(&matcher, id);
            self.classify(id, &rule, &matcher, self.seqs[id as usize]).expect("the rule was just removed");
        }
        true
    }

    /// The rule with this id, if installed.
    pub fn rule(&self, id: RuleId) -> Option<&Rule> {
        self.rules.get(id as usize).and_then(|r| r.as_ref())
    }

    /// Installed rules with their ids, in id order.
    pub fn rules(&self) -> impl Iterator<Item = (RuleId, &Rule)> {
        self.rules.iter().enumerate().filter_map(|(i, r)| r.as_ref().map(|r| (i as RuleId, r)))
    }

    /// Number of installed rules.
    pub fn len(&self) -> usize {
        self.n_rules
    }

    /// Whether no rule is installed.
    pub fn is_empty(&self) -> bool {
        self.n_rules == 0
    }

    /// The classifier of one table.
    pub fn table(&self, t: u8) -> &Classifier {
        &self.tables[t as usize]
    }

    /// Insertion sequence number of a rule (ties between equal priorities go to the lower).
    pub fn seq(&self, id: RuleId) -> u64 {
        self.seqs[id as usize]
    }

    /// Counters of a rule.
    pub fn stats(&self, id: RuleId) -> RuleStats {
        self.stats.get(id as usize).copied().unwrap_or_default()
    }

    /// Credits one packet of `bytes`, seen at `now_ns`, to every rule it hit (once per hit).
    pub fn credit(&mut self, rules: impl IntoIterator<Item = RuleId>, bytes: u64, now_ns: u64) {
        self.credit_n(rules, 1, bytes, now_ns);
    }

    /// Credits `packets` packets of `bytes` in all, the last at `now_ns`, to each of `rules`
    /// (hits a NIC counted on its own, read in one go).
    #[inline]
    pub fn credit_n(
        &mut self,
        rules: impl IntoIterator<Item = RuleId>,
        packets: u64,
        bytes: u64,
        now_ns: u64,
    ) {
        for r in rules {
            if let Some(s) = self.stats.get_mut(r as usize) {
                s.packets += packets;
                s.bytes += bytes;
                s.used_ns = s.used_ns.max(now_ns);
            }
        }
    }

    /// Refreshes rule `id` as if modified (a `learn` action learning it again): its hard
    /// timeout restarts at the next [`Pipeline::stamp_changes`].
    pub fn touch(&mut self, id: RuleId) {
        self.timers.modified(id);
    }

    /// The rules added or modified since the last call were, at `now_ns` (their hard
    /// timeouts count from then; see [`super::expiry`]).
    pub fn stamp_changes(&mut self, now_ns: u64) {
        let stats = &mut self.stats;
        self.timers.stamp(now_ns, stats.len() as RuleId, |id| stats[id as usize].used_ns = now_ns);
    }

    /// Appends to `out` the rules whose idle or hard timeout has passed at `now_ns`, in id
    /// order (none if no rule has a timeout).
    pub fn expired(&self, now_ns: u64, out: &mut Vec<RuleId>) {
        if self.timers.any() {
            self.timers.expired(now_ns, |id| Some((self.rule(id)?, self.stats(id).used_ns)), out);
        }
    }

    /// Runs `packet` through the pipeline from table 0, filling `tr`.
    ///
    /// A packet with a `recirc_id` is a later pass: translation thaws the state the id stands
    /// for (the table to resume at, the pipeline metadata) and starts there, as OVS's upcall
    /// of a recirculated packet does; an unknown id drops the packet.
    pub fn process(&self, packet: &FlowKey, tr: &mut Traversal) {
        tr.reset(packet);
        let thawed = match packet.recirc_id() {
            0 => None,
            id => Some(self.frozen(id)),
        };
        let mut x = Xlate::new(self, packet, tr, usize::MAX);
        x.init_wc();
        match &thawed {
            None => x.lookup(None, 0, false),
            Some(Some(frozen)) => x.thaw(frozen),
            Some(None) => x.tr.drop_reason = Some(DropReason::NoRecirculationContext),
        }
        x.execute();
        x.finish();
    }

    /// Translates from the middle of a traversal: `state` arriving at lookup `point`, for at
    /// most `max_lookups` lookups. If another lookup was due, translation stops before it and
    /// `tr.stopped_at` holds its point, `tr.final_flow` the flow there; outputs and steps
    /// cover what ran. This is how a Gigaflow sub-traversal is re-translated (revalidation)
    /// and checked. The lookup count starts from zero: callers bound traversal lengths so
    /// that OVS's 4,096-lookup limit cannot be what differs.
    pub fn run_from(&self, point: &LookupPoint, state: &FlowKey, max_lookups: usize, tr: &mut Traversal) {
        tr.reset(state);
        let mut x = Xlate::new(self, state, tr, max_lookups);
        x.depth = point.depth;
        // Rebuild the stack: each list to resume, then one empty frame standing for the
        // finished lists above it whose nesting still counts until the hit rule is done.
        let (mut below_depth, mut below_table) = (0, 0);
        for r in &point.continuation {
            x.tr.frames.push(Frame {
                list: List::Rule(r.rule),
                pc: r.pc as usize,
                old_table: below_table,
                deepens: r.depth - below_depth.min(r.depth),
            });
            below_depth = r.depth;
            below_table = self.rule(r.rule).map_or(0, |rule| rule.table);
        }
        if point.depth > below_depth {
            x.tr.frames.push(Frame {
                list: List::Rule(RuleId::MAX),
                pc: 0,
                old_table: below_table,
                deepens: point.depth - below_depth,
            });
        }
        x.table = below_table;
        x.init_wc();
        x.lookup_with(point.in_port, point.table, point.counted, point.deepens);
        x.execute();
        x.finish();
    }
}

/// Appends the continuation of `frames` to `out`: the lists with actions left to run, each
/// with the nesting it runs at.
fn continuation(p: &Pipeline, frames: &[Frame], out: &mut Vec<Resume>) {
    let mut depth = 0;
    for f in frames {
        depth += f.deepens;
        // Bucket frames have no continuation: a traversal through a group is never cut.
        if let List::Rule(rule) = f.list {
            if p.rule(rule).is_some_and(|r| f.pc < r.actions.len()) {
                out.push(Resume { rule, pc: f.pc as u32, depth });
            }
        }
    }
}

/// Translation state for one packet (OVS's `xlate_ctx`).
struct Xlate<'a> {
    p: &'a Pipeline,
    flow: FlowKey,
    /// Header state already committed to the datapath actions.
    base: FlowKey,
    tr: &'a mut Traversal,
    /// Backward resubmit nesting (OVS `depth`).
    depth: u32,
    resubmits: u32,
    table: u8,
    /// A push or pop changed the VLAN stack: tags are no longer the packet's own.
    vlan_rebuilt: bool,
    /// Lookups allowed before translation stops (see [`Pipeline::run_from`]).
    budget: usize,
    /// The packet is in the connection tracker's view: `ct_clear` has something to clear
    /// (OVS `conntracked`).
    conntracked: bool,
    /// This pass resumed a frozen one (its metadata came from the recirculation id).
    thawed: bool,
    /// The frozen state whose action lists this pass resumed.
    frozen: Option<&'a Frozen>,
    /// `clone` bodies being run (their nesting).
    clone_depth: u32,
    /// Frames when the innermost running `clone` body began (0 outside any).
    clone_floor: usize,
    /// Whether the body action running now is its body's last.
    clone_last: bool,
}

impl<'a> Xlate<'a> {
    fn new(p: &'a Pipeline, flow: &FlowKey, tr: &'a mut Traversal, budget: usize) -> Xlate<'a> {
        Xlate {
            p,
            flow: *flow,
            base: *flow,
            tr,
            depth: 0,
            resubmits: 0,
            table: 0,
            vlan_rebuilt: false,
            budget,
            conntracked: flow.ct_state() & ct_state::TRK != 0,
            thawed: false,
            frozen: None,
            clone_depth: 0,
            clone_floor: 0,
            clone_last: false,
        }
    }

    /// Starts a later pass from its frozen state: metadata restored, then a lookup in the
    /// table `ct(table=N)` named, or the frozen action lists resumed, innermost on top.
    fn thaw(&mut self, frozen: &'a Frozen) {
        frozen.thaw_into(&mut self.flow);
        self.tr.stack.extend_from_slice(&frozen.stack);
        self.thawed = true;
        self.conntracked = frozen.conntracked;
        if !frozen.conntracked {
            self.flow.clear_conntrack();
        }
        if frozen.lists.is_empty() {
            return self.lookup(None, frozen.table, false);
        }
        self.frozen = Some(frozen);
        let mut old_table = 0;
        for (i, l) in frozen.lists.iter().enumerate() {
            self.tr.frames.push(Frame { list: List::Frozen(i as u16), pc: 0, old_table, deepens: 0 });
            old_table = l.table;
        }
        self.table = old_table;
    }

    /// Un-wildcards bits an action examined, in the megaflow and (when recording) in the
    /// current interval.
    fn read(&mut self, f: FieldId, mask: u128) {
        self.tr.wc.unwildcard(f, mask);
        self.read_for_segments(f, mask);
    }

    /// Notes bits a sub-traversal entry must match although a megaflow need not (a megaflow
    /// always pins them by other means). Bits this interval's actions already wrote are not
    /// noted: their value here comes from the entry's own rewrite, not from the packet.
    fn read_for_segments(&mut self, f: FieldId, mask: u128) {
        if let Some(i) = self.tr.intervals.last_mut() {
            i.read.unwildcard(f, mask & !i.written.get(f));
        }
    }

    /// Un-wildcards, in the megaflow only, bits an action overwrites without its outcome
    /// depending on them. OVS pins them because its datapath `set` is computed against the
    /// packet's old value; a sub-traversal entry rewrites them unconditionally, so it need not
    /// match them (Gigaflow entries stay as wide as their lookups allow).
    fn overwritten(&mut self, f: FieldId, mask: u128) {
        self.tr.wc.unwildcard(f, mask);
    }

    /// Notes bits an action wrote (when recording).
    fn wrote(&mut self, f: FieldId, mask: u128) {
        if let Some(i) = self.tr.intervals.last_mut() {
            i.written.unwildcard(f, mask);
        }
    }

    fn init_wc(&mut self) {
        let wc = &mut self.tr.wc;
        // OVS xlate_wc_init: these are always examined; a megaflow belongs to one pass.
        wc.unwildcard_all(id::RECIRC_ID);
        wc.unwildcard_all(id::IN_PORT);
        wc.unwildcard_all(id::DL_TYPE);
        if self.flow.is_ip() {
            wc.unwildcard_all(id::NW_FRAG);
        }
    }

    /// Looks the packet up in `table` (as if it came from `in_port`, when given); a hit pushes
    /// the rule's actions as a new frame. `counted` is false only for the initial table-0
    /// lookup, which OVS does not count.
    fn lookup(&mut self, in_port: Option<u32>, table: u8, counted: bool) {
        let deepens = counted && table <= self.table;
        self.lookup_with(in_port, table, counted, deepens)
    }

    fn lookup_with(&mut self, in_port: Option<u32>, table: u8, counted: bool, deepens: bool) {
        if self.tr.steps.len() >= self.budget {
            let mut point =
                LookupPoint { table, in_port, depth: self.depth, deepens, counted, continuation: Vec::new() };
            continuation(self.p, &self.tr.frames, &mut point.continuation);
            self.tr.stopped_at = Some(point);
            self.tr.frames.clear();
            return;
        }
        if counted && self.out_of_resources() {
            return;
        }
        let old_in_port = self.flow.in_port();
        if self.tr.record_segments {
            let tr = &mut *self.tr;
            let start = tr.resumes.len() as u32;
            continuation(self.p, &tr.frames, &mut tr.resumes);
            tr.points.push(PointRec {
                in_port,
                flow_in_port: old_in_port,
                depth: self.depth,
                deepens,
                counted,
                resumes: (start, tr.resumes.len() as u32),
            });
            tr.intervals.push(Interval::default());
        }
        self.flow.set_in_port(in_port.unwrap_or(old_in_port));
        // The lookup writes the bits it needs straight into its step record.
        let depth = self.tr.frames.len() as u16;
        self.tr.steps.push(Step { table, depth, rule: None, flow: self.flow, mask: FlowMask::CATCHALL });
        let tr = &mut *self.tr;
        let step = tr.steps.last_mut().expect("just pushed");
        let hit =
            self.p.tables[table as usize].lookup_wc_in(&step.flow, &mut step.mask, &mut tr.lookup_scratch);
        step.rule = hit.map(|e| e.rule);
        tr.wc.union_with(&step.mask);
        self.flow.set_in_port(old_in_port);
        if let Some(e) = hit {
            self.resubmits += counted as u32;
            self.depth += deepens as u32;
            self.tr.frames.push(Frame {
                list: List::Rule(e.rule),
                pc: 0,
                old_table: self.table,
                deepens: deepens as u32,
            });
            self.table = table;
        }
    }

    /// Leaves the innermost action list, back to the table that called it.
    fn pop_frame(&mut self) {
        if let Some(f) = self.tr.frames.pop() {
            self.depth -= f.deepens;
            self.table = f.old_table;
            if let List::Bucket { .. } = f.list {
                self.flow = self.tr.saved_flows.pop().expect("a bucket frame saved the flow");
            }
        }
    }

    /// OVS `xlate_resubmit_resource_check`: whether a lookup or group would pass OVS's depth
    /// or lookup limit, which drops the packet (the reason is recorded).
    fn out_of_resources(&mut self) -> bool {
        let reason = if self.depth >= MAX_DEPTH {
            DropReason::RecursionTooDeep
        } else if self.resubmits >= MAX_RESUBMITS {
            DropReason::TooManyResubmits
        } else {
            return false;
        };
        self.tr.drop_reason = Some(reason);
        true
    }

    /// OVS `xlate_group_action`: the resubmit limits apply, then the group's buckets run
    /// (a group that does not exist ends the action list; loading flows refuses them).
    fn group(&mut self, id: u32) -> bool {
        if self.out_of_resources() {
            return true;
        }
        // Buckets restore the flow when they end: no sub-traversal can express that.
        self.tr.ran_on_copy = true;
        let p = self.p;
        let Some(g) = p.groups.get(id) else { return false };
        match g.kind {
            GroupKind::All => self.tr.frames.push(Frame {
                list: List::Buckets { group: id, next: 0 },
                pc: 0,
                old_table: self.table,
                deepens: 0,
            }),
            GroupKind::Indirect => {
                if !g.buckets.is_empty() {
                    self.enter_bucket(id, 0);
                }
            }
            GroupKind::Select | GroupKind::FastFailover => {
                // Whether the packet has a dp_hash at all is not matched, as in OVS: its
                // recirculation id implies it (`Frozen::hashed`).
                if let Selection::DpHash { basis, .. } = g.selection {
                    let in_bucket = self.tr.frames.iter().any(|f| matches!(f.list, List::Bucket { .. }));
                    if self.flow.get(id::DP_HASH) == 0 && !in_bucket && self.clone_depth == 0 {
                        self.freeze_for_hash(basis);
                        return true;
                    }
                }
                if let Some(b) = p.groups.pick(g, &self.flow, &mut self.tr.wc, &p.ports) {
                    self.enter_bucket(id, b as u16);
                }
            }
        }
        true
    }

    /// A select group's `dp_hash` method without a hash yet (OVS `pick_dp_hash_select_group`):
    /// this pass ends with the datapath hashing the packet and recirculating it; the next
    /// resumes with the group action and whatever each enclosing action list had left.
    fn freeze_for_hash(&mut self, basis: u32) {
        let frames = &self.tr.frames;
        let mut lists: Vec<FrozenList> = Vec::with_capacity(frames.len());
        for (i, f) in frames.iter().enumerate() {
            let table = frames.get(i + 1).map_or(self.table, |inner| inner.old_table);
            let actions: &[Action] = match f.list {
                List::Rule(r) => self.p.rule(r).map_or(&[], |rule| &rule.actions),
                List::Frozen(j) => self.frozen.map_or(&[], |fz| &fz.lists[j as usize].actions),
                List::Bucket { .. } | List::Buckets { .. } => unreachable!("no freeze inside a bucket"),
            };
            // The innermost list resumes at the group action itself, as OVS freezes it.
            let innermost = i + 1 == frames.len();
            let from = if innermost { f.pc - 1 } else { f.pc };
            if innermost || from < actions.len() {
                lists.push(FrozenList { actions: actions[from.min(actions.len())..].into(), table });
            }
        }
        let frozen = Frozen::resuming(&self.flow, lists.into(), &self.tr.stack, self.conntracked);
        let id = self.p.recirc.lock().expect("recirculation ids").id_of(&frozen);
        self.commit_headers();
        self.tr.dp_actions.push(DpAction::Hash(basis));
        self.tr.dp_actions.push(DpAction::Recirc(id));
        // OVS ctx->exit: nothing more runs in this pass.
        self.tr.frames.clear();
    }

    /// Whether no action follows the one running now (OVS's `is_last_action`): none left in
    /// any action list it was reached through — up to the innermost `clone` body, whose own
    /// last action counts as last, as OVS translates bodies.
    fn nothing_follows(&self) -> bool {
        let p = self.p;
        let left = |f: &Frame| match f.list {
            List::Rule(r) => p.rule(r).map_or(0, |rule| rule.actions.len().saturating_sub(f.pc)),
            List::Frozen(i) => {
                self.frozen.map_or(0, |fz| fz.lists[i as usize].actions.len().saturating_sub(f.pc))
            }
            List::Bucket { group, bucket } => p
                .groups
                .get(group)
                .map_or(0, |g| g.buckets[bucket as usize].executed.len().saturating_sub(f.pc)),
            List::Buckets { group, next } => {
                p.groups.get(group).map_or(0, |g| g.buckets.len().saturating_sub(next as usize))
            }
        };
        let frames_done = self.tr.frames[self.clone_floor..].iter().all(|f| left(f) == 0);
        frames_done && (self.clone_depth == 0 || self.clone_last)
    }

    /// `clone(...)` (OVS `clone_xlate_actions`): the body runs on a copy of the packet and
    /// the pipeline state, restored after it. Its datapath actions are wrapped in the
    /// datapath's `clone` only when something follows and they cannot be undone by later
    /// rewrites (`ct`, `ct_clear`, `hash`); otherwise they stay inline and the rewrites after
    /// put the packet back, as OVS does.
    fn clone_actions(&mut self, body: &'a [Action]) {
        // Nesting is bounded by the resubmit limits in OVS; here the Rust stack also must be.
        if self.clone_depth >= MAX_DEPTH {
            self.tr.drop_reason = Some(DropReason::RecursionTooDeep);
            return;
        }
        self.tr.ran_on_copy = true;
        let last = self.nothing_follows();
        if !last {
            self.commit_headers();
        }
        let (flow, conntracked, base) = (self.flow, self.conntracked, self.base);
        let stack_mark = self.tr.saved_stacks.len();
        let tr = &mut *self.tr;
        tr.saved_stacks.extend_from_slice(&tr.stack);
        let body_start = self.tr.dp_actions.len();
        let (outer_floor, outer_last) = (self.clone_floor, self.clone_last);
        self.clone_floor = self.tr.frames.len();
        self.clone_depth += 1;
        for (i, a) in body.iter().enumerate() {
            self.clone_last = i + 1 == body.len();
            if !self.step(a) {
                break;
            }
            self.execute_down_to(self.clone_floor);
            // A translation limit ended everything.
            if self.tr.drop_reason.is_some() {
                break;
            }
        }
        self.clone_depth -= 1;
        (self.clone_floor, self.clone_last) = (outer_floor, outer_last);
        let body_len = self.tr.dp_actions.len() - body_start;
        if !last && !reversible(&self.tr.dp_actions[body_start..]) {
            self.tr.dp_actions.insert(body_start, DpAction::Clone(body_len as u32));
            self.base = base;
        }
        (self.flow, self.conntracked) = (flow, conntracked);
        let tr = &mut *self.tr;
        tr.stack.clear();
        tr.stack.extend_from_slice(&tr.saved_stacks[stack_mark..]);
        tr.saved_stacks.truncate(stack_mark);
    }

    /// OVS `xlate_normal` on trunk ports without bonds, mirrors or multicast snooping (see
    /// [`super::normal`]).
    fn normal(&mut self) {
        let p = self.p;
        self.tr.uses_mac_table = true;
        self.read(id::DL_SRC, u128::MAX);
        self.read(id::DL_DST, u128::MAX);
        self.read(id::VLAN_TCI, 0x0fff | proto::VLAN_CFI as u128);
        let in_port = self.flow.in_port();
        if !p.ports.contains(in_port) {
            return; // no input bundle
        }
        let vlan = if self.flow.has_vlan() { self.flow.vlan_tci() & 0x0fff } else { 0 };
        let (src, dst) = (self.flow.get(id::DL_SRC) as u64, self.flow.get(id::DL_DST) as u64);
        if is_reserved(dst) {
            return;
        }
        // OVS is_gratuitous_arp looks at these (only bonds act on the answer).
        if self.flow.dl_type() == proto::ETH_ARP && dst == 0xffff_ffff_ffff {
            self.read(id::NW_PROTO, u128::MAX);
            if self.flow.nw_proto() == 1 {
                self.read(id::ARP_SPA, u128::MAX);
                self.read(id::ARP_TPA, u128::MAX);
            }
        }
        if !is_multicast(src) {
            self.tr.mac_learned.push(MacLearn { vlan, mac: src, port: in_port });
        }
        // What this translation learned counts already, as in OVS, which learns first.
        let learned = |mac| self.tr.mac_learned.iter().rev().find(|l| l.vlan == vlan && l.mac == mac);
        let port =
            if is_multicast(dst) { None } else { learned(dst).map(|l| l.port).or(p.macs.lookup(vlan, dst)) };
        match port {
            Some(port) if port == in_port => {} // learned on the input port: dropped
            Some(port) if p.ports.contains(port) => self.output(port),
            Some(_) => {} // learned on a port gone since
            None => {
                // Flood in OVS's bundle order: the bridge's own port first.
                let local = p.ports.contains(LOCAL_PORT).then_some(LOCAL_PORT);
                let others = p.ports.all().iter().copied().filter(|&q| q != LOCAL_PORT);
                for q in local.into_iter().chain(others) {
                    if q != in_port {
                        self.output(q);
                    }
                }
            }
        }
    }

    /// Starts a bucket (OVS `xlate_group_bucket`): one level deeper, on a copy of the flow.
    fn enter_bucket(&mut self, group: u32, bucket: u16) {
        if let Some(b) = self.p.groups.get(group).and_then(|g| g.buckets.get(bucket as usize)) {
            self.tr.buckets.push((group, b.id));
        }
        self.tr.saved_flows.push(self.flow);
        self.depth += 1;
        self.tr.frames.push(Frame {
            list: List::Bucket { group, bucket },
            pc: 0,
            old_table: self.table,
            deepens: 1,
        });
    }

    /// Un-wildcards what a prerequisite check looked at and returns whether it holds.
    fn prereq_ok(&mut self, f: FieldId) -> bool {
        use crate::packet::field::Prereq;
        let p = f.def().prereq;
        match p {
            Prereq::Vlan => self.read(id::VLAN_TCI, proto::VLAN_CFI as u128),
            Prereq::Ct => self.read(id::CT_STATE, crate::packet::ct_state::VALID_BITS as u128),
            // OVS is_ip_proto: the protocol is looked at only in an IP packet.
            Prereq::L4Ports | Prereq::Tcp | Prereq::Udp | Prereq::Sctp | Prereq::Icmp | Prereq::Icmpv6
                if self.flow.is_ip() =>
            {
                self.read(id::NW_PROTO, u128::MAX)
            }
            _ => {}
        }
        self.flow.prereq_ok(p)
    }

    /// Runs action lists until the frame stack is empty or a translation limit is hit.
    fn execute(&mut self) {
        self.execute_down_to(0);
    }

    /// Runs action lists until `floor` frames are left (those below belong to whoever called),
    /// or a translation limit drops the packet.
    fn execute_down_to(&mut self, floor: usize) {
        while self.tr.frames.len() > floor {
            if self.tr.drop_reason.is_some() {
                self.tr.frames.clear();
                return;
            }
            let top = self.tr.frames.last_mut().expect("above the floor");
            let p = self.p;
            let actions: &'a [Action] = match top.list {
                // A rule since deleted (a resumed continuation) has nothing left to run.
                List::Rule(r) => p.rule(r).map_or(&[], |rule| &rule.actions),
                List::Frozen(i) => self.frozen.map_or(&[], |f| &f.lists[i as usize].actions),
                List::Bucket { group, bucket } => {
                    p.groups.get(group).map_or(&[], |g| &g.buckets[bucket as usize].executed)
                }
                List::Buckets { group, next } => {
                    if (next as usize) < p.groups.get(group).map_or(0, |g| g.buckets.len()) {
                        top.list = List::Buckets { group, next: next + 1 };
                        self.enter_bucket(group, next);
                    } else {
                        self.pop_frame();
                    }
                    continue;
                }
            };
            let Some(a) = actions.get(top.pc) else {
                self.pop_frame();
                continue;
            };
            top.pc += 1;
            if !self.step(a) {
                self.pop_frame();
            }
        }
    }

    /// Runs one action; false when it ends its action list (OVS returns from
    /// `do_xlate_actions`: a group that does not exist, `dec_ttl` at TTL 1).
    fn step(&mut self, a: &'a Action) -> bool {
        match *a {
            Action::Output(_)
            | Action::OutputInPort
            | Action::Flood
            | Action::All
            | Action::Normal
            | Action::Controller => self.send_to_port(a),
            Action::OutputReg(src) => {
                // OVS xlate_output_reg_action: the port number the bits hold, if it is one.
                self.read(src.field, src.mask());
                let port = (self.flow.get(src.field) & src.mask()) >> src.offset;
                if let Some(to) = u32::try_from(port).ok().and_then(action_for_port) {
                    self.send_to_port(&to);
                }
            }
            Action::Group(g) => return self.group(g),
            Action::Learn(ref l) => {
                // OVS learn_mask: the learned flow is made of these bits.
                for f in l.read_bits() {
                    self.read(f.field, f.mask());
                }
                self.tr.learned.push(l.flow_for(&self.flow));
            }
            Action::GotoTable(t) => self.lookup(None, t, true),
            Action::Resubmit { in_port, table } => self.lookup(in_port, table.unwrap_or(self.table), true),
            Action::SetField { field, value, mask } => {
                if self.prereq_ok(field) {
                    // OVS mf_set_mask_l3_prereqs: an L3 rewrite pins the protocol, which
                    // decides whether the datapath can rewrite the header at all.
                    if is_l3_rewrite(field, &self.flow) {
                        self.read(id::NW_PROTO, u128::MAX);
                    }
                    self.overwritten(field, mask);
                    self.wrote(field, mask);
                    self.flow.set_masked(field, value, mask);
                }
            }
            Action::Move { src, dst } => {
                let src_ok = self.prereq_ok(src.field);
                if src_ok && self.prereq_ok(dst.field) {
                    self.read(src.field, src.mask());
                    self.overwritten(dst.field, dst.mask());
                    self.wrote(dst.field, dst.mask());
                    let bits = (self.flow.get(src.field) & src.mask()) >> src.offset;
                    self.flow.set_masked(dst.field, bits << dst.offset, dst.mask());
                }
            }
            Action::StackPush(src) => {
                self.read(src.field, src.mask());
                self.tr.uses_stack = true;
                self.tr.stack.push((self.flow.get(src.field) & src.mask()) >> src.offset);
            }
            Action::StackPop(dst) => {
                self.tr.uses_stack = true;
                if let Some(v) = self.tr.stack.pop() {
                    self.overwritten(dst.field, dst.mask());
                    self.wrote(dst.field, dst.mask());
                    self.flow.set_masked(
                        dst.field,
                        v.checked_shl(dst.offset as u32).unwrap_or(0),
                        dst.mask(),
                    );
                }
            }
            Action::WriteMetadata { value, mask } => {
                self.wrote(id::METADATA, mask as u128);
                self.flow.set_masked(id::METADATA, value as u128, mask as u128);
            }
            Action::PushVlan(tpid) => {
                self.vlan_rebuilt = true;
                self.vlan_stack_rewritten();
                // OVS flow_push_vlan_uninit: existing tags become part of the key.
                if self.flow.has_vlan() {
                    self.tr.wc.unwildcard_all(id::VLAN_TCI);
                    self.tr.wc.unwildcard_all(id::VLAN_TPID);
                }
                self.flow.set_vlan_tpid2(self.flow.vlan_tpid());
                self.flow.set_vlan_tci2(self.flow.vlan_tci());
                self.flow.set_vlan_tpid(tpid);
                self.flow.set_vlan_tci(proto::VLAN_CFI);
            }
            Action::PopVlan => {
                self.vlan_rebuilt = true;
                self.vlan_stack_rewritten();
                if self.flow.vlan_tci2() & proto::VLAN_CFI != 0 {
                    self.tr.wc.unwildcard_all(id::VLAN_TCI2);
                    self.tr.wc.unwildcard_all(id::VLAN_TPID2);
                }
                self.flow.set_vlan_tpid(self.flow.vlan_tpid2());
                self.flow.set_vlan_tci(self.flow.vlan_tci2());
                self.flow.set_vlan_tpid2(0);
                self.flow.set_vlan_tci2(0);
            }
            Action::SetVlanVid { vid, push_if_needed } => self.set_tci_bits(0x0fff, vid, push_if_needed),
            Action::SetVlanPcp { pcp, push_if_needed } => {
                self.set_tci_bits(0xe000, (pcp as u16) << 13, push_if_needed)
            }
            Action::Ct(ref ct) => self.conntrack(ct),
            Action::Clone(ref body) => self.clone_actions(body),
            Action::CtClear => {
                if self.conntracked {
                    self.conntracked = false;
                    self.flow.clear_conntrack();
                    self.tr.dp_actions.push(DpAction::CtClear);
                }
            }
            // No effect on forwarding (meters: rate limits are not modelled); a clause of a
            // conjunction is never the rule a lookup returns.
            Action::Note(_) | Action::Meter(_) | Action::Sample(_) | Action::Conjunction(_) => {}
            Action::DecTtl => {
                // As OVS, whatever the packet.
                self.read(id::NW_TTL, u128::MAX);
                self.read(id::NW_PROTO, u128::MAX);
                if self.flow.is_ip() {
                    let ttl = self.flow.nw_ttl();
                    if ttl > 1 {
                        self.wrote(id::NW_TTL, u128::MAX);
                        self.flow.set_nw_ttl(ttl - 1);
                    } else {
                        // To the controller; OVS stops this action list (not the caller's).
                        self.tr.ttl_exceeded += 1;
                        self.tr.to_controller += 1;
                        return false;
                    }
                }
            }
        }
        true
    }

    /// An output to a port or a reserved port (`output:N`, `in_port`, `FLOOD`, `ALL`,
    /// `NORMAL`, `CONTROLLER`).
    fn send_to_port(&mut self, a: &Action) {
        match *a {
            Action::Output(port) => {
                // Whether the port is the input port decides (megaflows pin in_port always).
                self.read_for_segments(id::IN_PORT, u128::MAX);
                if port != self.flow.in_port() {
                    self.output(port);
                }
            }
            Action::OutputInPort => {
                self.read_for_segments(id::IN_PORT, u128::MAX);
                self.output(self.flow.in_port())
            }
            Action::Flood | Action::All => {
                // Every port but the input port, in port order (OVS's order is that of its
                // hash map of ports, which depends on its history).
                self.read_for_segments(id::IN_PORT, u128::MAX);
                let in_port = self.flow.in_port();
                for &port in self.p.ports.all() {
                    if port != in_port {
                        self.output(port);
                    }
                }
            }
            Action::Normal => self.normal(),
            Action::Controller => self.tr.to_controller += 1,
            _ => unreachable!("only outputs go to ports"),
        }
    }

    /// `mod_vlan_vid`/`mod_vlan_pcp`: the `bits` of the outer tag's TCI become `value`, if the
    /// packet has a tag, or gets one (`push_if_needed`: OpenFlow 1.0's `set_vlan_*`).
    fn set_tci_bits(&mut self, bits: u16, value: u16, push_if_needed: bool) {
        // Whether a tag exists decides; the bits are overwritten or unused.
        self.read(id::VLAN_TCI, proto::VLAN_CFI as u128);
        self.overwritten(id::VLAN_TCI, bits as u128);
        if self.flow.has_vlan() || push_if_needed {
            self.wrote(id::VLAN_TCI, (bits | proto::VLAN_CFI) as u128);
            self.read_for_segments(id::VLAN_TPID, u128::MAX);
            if self.flow.vlan_tpid() == 0 {
                self.wrote(id::VLAN_TPID, u128::MAX);
                self.flow.set_vlan_tpid(proto::ETH_VLAN);
            }
            let tci = (self.flow.vlan_tci() & !bits) | value | proto::VLAN_CFI;
            self.flow.set_vlan_tci(tci);
        }
    }

    /// A push or pop moves whole tags: a sub-traversal entry must know both tags exactly to
    /// reproduce the stack for every packet it matches.
    fn vlan_stack_rewritten(&mut self) {
        for f in [id::VLAN_TCI, id::VLAN_TPID, id::VLAN_TCI2, id::VLAN_TPID2] {
            self.read_for_segments(f, u128::MAX);
            self.wrote(f, u128::MAX);
        }
    }

    fn output(&mut self, port: u32) {
        if let Some(i) = self.tr.intervals.last() {
            let mut written = i.written;
            drop_uncommittable(&self.flow, &mut written);
            let step = self.tr.steps.len() as u32 - 1;
            self.tr.output_marks.push(OutputMark { step, written });
        }
        self.commit_headers();
        self.tr.dp_actions.push(DpAction::Output(port));
        // What leaves is what the datapath actions made of the packet (registers and metadata
        // are pipeline state and do not leave with it).
        self.tr.outputs.push(Output { port, packet: self.base.masked(FlowMask::leaving()) });
    }

    /// `ct(...)` (OVS `compose_conntrack_action`): header rewrites so far are committed, the
    /// `exec` actions set the mark and label the datapath action carries, a `table` freezes
    /// the pipeline for the clone's next pass, and this pass goes on untracked.
    fn conntrack(&mut self, ct: &Ct) {
        let zone = match ct.zone {
            CtZone::Imm(z) => z,
            CtZone::Field(s) => {
                // A frozen field's value is implied by the recirculation id already.
                if !(self.thawed && s.field.def().word <= word::IN_PORT) {
                    self.read(s.field, s.mask());
                }
                ((self.flow.get(s.field) & s.mask()) >> s.offset) as u16
            }
        };
        self.commit_headers();
        let (mark_wc, label_wc) = (self.tr.wc.get(id::CT_MARK), self.tr.wc.get(id::CT_LABEL));
        self.tr.wc.set(id::CT_MARK, 0);
        self.tr.wc.set(id::CT_LABEL, 0);
        for a in &ct.exec {
            match *a {
                Action::SetField { field, value, mask } => {
                    self.tr.wc.unwildcard(field, mask);
                    self.flow.set_masked(field, value, mask);
                }
                Action::Move { src, dst } => {
                    self.read(src.field, src.mask());
                    self.tr.wc.unwildcard(dst.field, dst.mask());
                    let bits = (self.flow.get(src.field) & src.mask()) >> src.offset;
                    self.flow.set_masked(dst.field, bits << dst.offset, dst.mask());
                }
                _ => unreachable!("the parser admits only sets of ct_mark and ct_label in exec"),
            }
        }
        let masked = |f: FieldId, wc: &FlowMask, flow: &FlowKey| {
            let m = wc.get(f);
            (m != 0).then(|| (flow.get(f) & m, m))
        };
        let mark = masked(id::CT_MARK, &self.tr.wc, &self.flow).map(|(v, m)| (v as u32, m as u32));
        let label = masked(id::CT_LABEL, &self.tr.wc, &self.flow);
        self.tr.wc.set(id::CT_MARK, mark_wc);
        self.tr.wc.set(id::CT_LABEL, label_wc);
        self.tr.dp_actions.push(DpAction::Ct(CtExec {
            commit: ct.commit,
            force: ct.force,
            zone,
            mark,
            label,
            nat: ct.nat,
        }));
        if let Some(table) = ct.table {
            let frozen = Frozen::of(&self.flow, table, &self.tr.stack);
            let id = self.p.recirc.lock().expect("recirculation ids").id_of(&frozen);
            self.tr.dp_actions.push(DpAction::Recirc(id));
            let mut flow = self.flow;
            flow.set(id::CT_ZONE, zone as u128);
            self.tr.forks.push(Fork { recirc_id: id, flow, nat: ct.nat });
        }
        // The ct_* fields exist only in the pass that recirculation starts.
        self.flow.clear_conntrack();
        self.conntracked = false;
    }

    /// Commits the header rewrites so far to the datapath actions (OVS
    /// `xlate_commit_actions`), pinning what the datapath's rewrites depend on.
    fn commit_headers(&mut self) {
        let n_before = self.tr.dp_actions.len();
        let fate = commit(&mut self.base, &self.flow, &self.tr.wc, &mut self.tr.dp_actions);
        if needs_slow_path(&self.tr.dp_actions[n_before..], &self.flow) {
            self.tr.slow_action = true;
            // An ICMP set is unmasked: type and code both pinned (OVS put_icmp_key).
            if self.flow.is_ip() && matches!(self.flow.nw_proto(), proto::IP_ICMP | proto::IP_ICMPV6) {
                self.tr.wc.unwildcard(id::TP_SRC, 0xff);
                self.tr.wc.unwildcard(id::TP_DST, 0xff);
            }
        }
        // An IP header rewrite in the datapath carries the (unwritable) protocol, so the
        // megaflow must pin it, as OVS's commit of set(ipv4(..)) does.
        let ip_set = self.tr.dp_actions[n_before..].iter().any(|a| {
            matches!(a, DpAction::Set { field: f, .. } if matches!(*f, id::NW_SRC | id::NW_DST | id::NW_TOS | id::NW_TTL | id::IPV6_SRC | id::IPV6_DST | id::IPV6_LABEL))
        });
        if ip_set && self.flow.is_ip() {
            self.tr.wc.unwildcard_all(id::NW_PROTO);
        }
        // Popping a tag means the datapath must rebuild the original exactly. Keeping one
        // after the pipeline rebuilt the stack (pop/push) relied on it equalling the rebuilt
        // tag, which only the whole tag decides.
        for (i, (tci, tpid)) in
            [(id::VLAN_TCI, id::VLAN_TPID), (id::VLAN_TCI2, id::VLAN_TPID2)].into_iter().enumerate()
        {
            if fate[i] == VlanFate::Popped || (fate[i] == VlanFate::Kept && self.vlan_rebuilt) {
                self.tr.wc.unwildcard_all(tci);
                self.tr.wc.unwildcard_all(tpid);
            }
        }
    }

    /// OVS `xlate_wc_finish`, plus dropping mask bits of headers the packet does not have.
    fn finish(&mut self) {
        if self.tr.drop_reason.is_some() {
            self.tr.dp_actions.clear();
            self.tr.outputs.clear();
        }
        unwrap_trailing_clone(&mut self.tr.dp_actions);
        let tr = &mut *self.tr;
        tr.final_flow = self.flow;
        // Metadata and registers are pipeline state, not packet state.
        tr.wc.intersect_with(FlowMask::packet_state());
        normalize_mask(&tr.entry, &mut tr.wc);
        tr.megaflow = Match::new(tr.entry, tr.wc);
    }
}

/// Whether writing `f` is an L3 rewrite whose datapath action depends on the protocol (OVS
/// `mf_set_mask_l3_prereqs`): IP address, label, TOS and TTL fields of an IP packet, ARP
/// fields of an ARP packet.
fn is_l3_rewrite(f: FieldId, k: &FlowKey) -> bool {
    let ip = [
        id::NW_SRC,
        id::NW_DST,
        id::IPV6_SRC,
        id::IPV6_DST,
        id::IPV6_LABEL,
        id::NW_TOS,
        id::IP_DSCP,
        id::NW_ECN,
        id::NW_TTL,
    ];
    let arp = [id::ARP_OP, id::ARP_SHA, id::ARP_THA, id::ARP_SPA, id::ARP_TPA];
    (k.is_ip() && ip.contains(&f)) || (k.dl_type() == proto::ETH_ARP && arp.contains(&f))
}

/// Makes a megaflow mask canonical for a packet: VLAN presence, outer and inner, always exact
/// (a datapath key has the tag or not), and no exact bits on headers the packet does not have, whenever what
/// decides their existence (`dl_type`, `nw_proto`) is itself exact. Sound because such fields
/// read as zero for every packet the megaflow covers.
pub fn normalize_mask(entry: &FlowKey, wc: &mut FlowMask) {
    let cfi = proto::VLAN_CFI as u128;
    let tci_mask = wc.get(id::VLAN_TCI);
    if entry.has_vlan() {
        // A tag's TPID is the frame's outer EtherType, which a datapath key always holds
        // exactly; whether an inner tag follows is structure too (a later pop exposes it).
        wc.set(id::VLAN_TCI, tci_mask | cfi);
        wc.unwildcard_all(id::VLAN_TPID);
        if entry.vlan_tci2() & proto::VLAN_CFI != 0 {
            wc.unwildcard(id::VLAN_TCI2, cfi);
            wc.unwildcard_all(id::VLAN_TPID2);
        } else {
            wc.set(id::VLAN_TCI2, cfi);
            wc.set(id::VLAN_TPID2, 0);
        }
    } else {
        wc.set(id::VLAN_TCI, cfi);
        wc.set(id::VLAN_TPID, 0);
        wc.set(id::VLAN_TCI2, 0);
        wc.set(id::VLAN_TPID2, 0);
    }
    let dl = entry.dl_type();
    let ipv4 = dl == proto::ETH_IPV4;
    let ipv6 = dl == proto::ETH_IPV6;
    let arp = dl == proto::ETH_ARP;
    if !(ipv4 || arp) {
        wc.set(id::NW_SRC, 0);
        wc.set(id::NW_DST, 0);
    }
    if !ipv6 {
        wc.set(id::IPV6_SRC, 0);
        wc.set(id::IPV6_DST, 0);
        wc.set(id::IPV6_LABEL, 0);
    }
    if !(ipv4 || ipv6) {
        // `dec_ttl` pins the TTL and protocol of any packet, as in OVS (both read as zero
        // outside IP, or the ARP opcode): they stay.
        wc.set(id::NW_TOS, 0);
        wc.set(id::NW_FRAG, 0);
    } else {
        wc.set(id::NW_FRAG, 3);
    }
    if !arp {
        wc.set(id::ARP_SHA, 0);
        wc.set(id::ARP_THA, 0);
    }
    let proto_exact = wc.get(id::NW_PROTO) == 0xff;
    let nw = entry.nw_proto();
    let l4_known = (ipv4 || ipv6) && proto_exact;
    if !(ipv4 || ipv6)
        || (l4_known
            && !matches!(
                nw,
                proto::IP_TCP | proto::IP_UDP | proto::IP_SCTP | proto::IP_ICMP | proto::IP_ICMPV6
            ))
    {
        wc.set(id::TP_SRC, 0);
        wc.set(id::TP_DST, 0);
    }
    if l4_known && matches!(nw, proto::IP_ICMP | proto::IP_ICMPV6) {
        wc.set(id::TP_SRC, wc.get(id::TP_SRC) & 0xff);
        wc.set(id::TP_DST, wc.get(id::TP_DST) & 0xff);
    }
    if !(ipv4 || ipv6) || (l4_known && nw != proto::IP_TCP) {
        wc.set(id::TCP_FLAGS, 0);
    }
    if entry.nw_frag() & proto::FRAG_LATER != 0 {
        wc.set(id::TP_SRC, 0);
        wc.set(id::TP_DST, 0);
    }
}
