//! Gigaflow (Zulfiqar et al., ASPLOS '25): sub-traversals of the pipeline cached in K tagged
//! NIC stages with Longest Traversal Match (LTM).
//!
//! **Lookup.** A packet starts with the initial tag and its own headers as NIC state (the
//! pipeline's registers and metadata zero). The stages are visited in order; in each, the
//! highest-priority entry whose tag equals the packet's and whose masked fields match its
//! state applies: its outputs are emitted (held back), its overlay rewrites the state
//! (headers, registers, metadata — pipeline state travels as NIC metadata), and the tag
//! becomes the entry's next tag. A stage without a match is skipped. The packet is a NIC hit
//! when the tag reaches END; otherwise it goes to the host with its original headers and the
//! held-back outputs are dropped. Priority is the sub-traversal's length; between equal
//! lengths the first found in the stage's subtable order wins — both describe the same
//! lookups of the same pipeline from the same point, so they act identically.
//!
//! **Tags** are [`LookupPoint`]s interned to numbers: a table, plus what makes resuming there
//! exact — a `resubmit`'s input port, the nesting, and the action lists still to run after
//! the hit rule (a `resubmit` returns; `goto_table` does not, so goto-only pipelines have
//! plain table tags). A traversal that revisits a table through `resubmit` thus gets
//! different tags for the two visits whenever what follows differs, and never confuses them.
//!
//! **Install.** On an upcall the traversal is walked through the stages as the NIC would
//! walk it, following the entries that already cover it (they are reused, not duplicated);
//! where the walk finds no entry, the rest of the traversal is partitioned over the stages
//! that still have room and the first sub-traversal of the partition is installed, and so on.
//! Partitioning ([`Partition`]): the paper's disjoint partitioning (a dynamic program that
//! maximises the coupling of sub-traversals — header fields shared along each, §4.2.2 — scored as the
//! published artifact scores it, see [`disjoint_partition`]),
//! random cuts, or one lookup per stage.
//!
//! **Soundness.** Entries are [`SubTraversal`]s, each sound for every state it matches (see
//! [`crate::openflow::segment`]), so any chain of them is. Traversals longer than
//! `MAX_RESUBMITS / K` lookups stay in the slow path, so no chain can reach OVS's lookup
//! limit; translation limits and controller actions are never offloaded. Unlike the
//! published artifact, entries are revalidated after rule updates and expire when idle.

use hashbrown::HashMap;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use serde::Serialize;

use super::{
    paper_setup, Arrival, NicConfig, NicReport, NicScheme, NicSchemeConfig, NicSchemeRegistration, NicSizing,
    SchemeFigures, Upcall,
};
use crate::cache::dump::DumpedFlow;
use crate::cache::table::{CacheTable, MatchKind, Refused, TableConfig, TableConfigError};
use crate::decision::interner::{Interner, ItemRef};
use crate::decision::{CachedHit, DecisionTables};
use crate::invalid_param::InvalidParam;
use crate::openflow::pipeline::MAX_RESUBMITS;
use crate::openflow::segment::{segmentable, sub_traversal, Overlay, SegmentEffects, SubTraversal};
use crate::openflow::traversal::{LookupPoint, LookupRef, Output, Traversal};
use crate::packet::field::id;
use crate::packet::format::format_match;
use crate::packet::{FlowKey, FlowMask};
use crate::revalidation::{EntryVersion, Removal, Retranslation, Revalidate, Translator};
use crate::tuple_space::{EntryId, FlowTableStats};

/// Default number of Gigaflow stages (the paper's 4 × 8K configuration).
pub(crate) const DEFAULT_TABLES: usize = 4;
/// Most stages: a stage is addressed by a byte.
pub(crate) const MAX_TABLES: usize = 256;
/// Default entries per stage.
pub(crate) const DEFAULT_ENTRIES: usize = 8192;
/// Default distinct masks per stage.
pub(crate) const DEFAULT_MASKS: usize = 512;
/// The tag every packet starts with.
pub(crate) const INITIAL_TAG: u32 = 0;
/// The tag that means "translation complete".
pub const END_TAG: u32 = u32::MAX;

/// How a traversal is cut into sub-traversals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Partition {
    /// Disjoint partitioning, the paper's dynamic program.
    #[default]
    Disjoint,
    /// Uniformly random cuts (the paper's RND baseline).
    Random,
    /// One lookup per stage, the last available stage taking the rest (the paper's 1-1).
    OneToOne,
}

impl Partition {
    /// Name as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            Partition::Disjoint => "dp",
            Partition::Random => "random",
            Partition::OneToOne => "one-to-one",
        }
    }
}

/// `gigaflow`.
pub(crate) const REGISTRATION: NicSchemeRegistration = NicSchemeRegistration {
    name: "gigaflow",
    about: "Gigaflow: sub-traversals in K tagged stages",
    configure: |s: &NicSizing| {
        let default = if s.paper_setup { paper_setup::GIGAFLOW_ENTRIES } else { DEFAULT_ENTRIES };
        NicConfig::new(GigaflowConfig {
            tables: s.tables.unwrap_or(DEFAULT_TABLES),
            entries: s.entries.unwrap_or(default),
            max_masks: s.masks(),
            partition: s.partition.unwrap_or(Partition::Disjoint),
            seed: 1,
            whole_mappings: s.whole_mappings.unwrap_or(s.paper_setup),
        })
    },
    report_key: Some("gigaflow"),
};

impl NicSchemeConfig for GigaflowConfig {
    fn name(&self) -> &'static str {
        REGISTRATION.name
    }

    fn build(&self, update_latency_ns: u64) -> Result<Box<dyn NicScheme>, TableConfigError> {
        Ok(Box::new(Gigaflow::new(*self, update_latency_ns)?))
    }
}

/// Shape of the Gigaflow NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GigaflowConfig {
    /// Stages (K).
    pub tables: usize,
    /// Entries per stage.
    pub entries: usize,
    /// Distinct masks per stage.
    pub max_masks: usize,
    /// Partitioning scheme.
    pub partition: Partition,
    /// Seed of the random partitioning.
    pub seed: u64,
    /// Install a traversal's sub-traversals all or none: when one stage would refuse its
    /// piece (mask limit), nothing is installed, as the published artifact does. Otherwise
    /// the pieces that fit are installed and later traversals may complete the chain.
    pub whole_mappings: bool,
}

impl Default for GigaflowConfig {
    fn default() -> Self {
        GigaflowConfig {
            tables: DEFAULT_TABLES,
            entries: DEFAULT_ENTRIES,
            max_masks: DEFAULT_MASKS,
            partition: Partition::Disjoint,
            seed: 1,
            whole_mappings: false,
        }
    }
}

/// One step of an entry's effects, interned so that entries with equal effects share them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Emit the packet: the state under this overlay, packet fields only.
    Output(u32, Overlay),
    /// The state for the next stage (always last).
    Exit(Overlay),
}

/// What a Gigaflow entry holds.
#[derive(Clone, Copy, Debug)]
pub struct SubTraversalEntry {
    /// The state its sub-traversal started from: revalidation re-translates it.
    pub rep: FlowKey,
    /// Lookups it covers (also its LTM priority).
    pub len: u32,
    /// Its effects, in [`Gigaflow::effects`].
    pub effects: ItemRef,
    /// Tag after it, or [`END_TAG`].
    pub next: u32,
    /// Its lookup outcomes, in the decision tables' path table (rules to credit).
    pub path: ItemRef,
    /// Its standing with respect to rule updates.
    pub version: EntryVersion,
    /// Upcalls whose traversal it served (installed or reused): sub-traversal sharing.
    pub flows: u32,
}

/// Counters of the Gigaflow NIC beyond the per-stage ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GigaflowStats {
    /// Upcalls offered for installation.
    pub upcalls: u64,
    /// Upcalls after which the NIC holds a complete chain for the packet.
    pub completed: u64,
    /// Upcalls whose traversal was not offloadable (limits, controller, too long).
    pub not_offloadable: u64,
    /// Entries installed.
    pub installed: u64,
    /// Existing entries a new traversal followed instead of installing its own.
    pub reused: u64,
    /// Entries re-translated by revalidation.
    pub retranslated: u64,
    /// Most entries held at once, over all stages.
    pub peak: usize,
}

/// Lookup points by tag.
#[derive(Default)]
struct Tags {
    ids: HashMap<LookupPoint, u32>,
    points: Vec<LookupPoint>,
}

impl Tags {
    fn intern(&mut self, p: &LookupPoint) -> u32 {
        if let Some(&t) = self.ids.get(p) {
            return t;
        }
        let t = self.points.len() as u32;
        self.points.push(p.clone());
        self.ids.insert(p.clone(), t);
        t
    }

    fn get(&self, p: &LookupPoint) -> Option<u32> {
        self.ids.get(p).copied()
    }
}

/// One piece of a mapping as the Gigaflow artifact's coverage estimator tells mappings apart
/// (`gvs` `lib/mapper.c`, `gigaflow_state_add_new_mapping`): the stage it is in, where it
/// starts (its tag: the pipeline table and state), the lookups it covers and its wildcards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct MappingPiece {
    stage: u8,
    tag: u32,
    len: u32,
    mask: FlowMask,
}

/// What the estimator keeps per distinct mapping.
#[derive(Clone, Debug)]
struct MappingOccupancy {
    /// Entries this mapping installed per stage (never decremented, as the artifact's
    /// counters are not).
    installs: Vec<u32>,
    /// Two consecutive pieces examine a header field in common.
    overlap: bool,
}

/// The Gigaflow NIC: K LTM stages.
pub struct Gigaflow {
    /// The stages, visited in order.
    pub stages: Vec<CacheTable<SubTraversalEntry>>,
    /// Effects of entries, deduplicated.
    pub effects: Interner<Effect>,
    tags: Tags,
    config: GigaflowConfig,
    rng: StdRng,
    /// Counters.
    pub stats: GigaflowStats,
    scratch: Vec<Effect>,
    fields: Vec<u8>,
    /// A whole mapping being planned: stage, piece, the state it starts from.
    planned: Vec<(usize, SubTraversal, FlowKey)>,
    /// The distinct mappings upcalls made, for [`Gigaflow::coverage_estimate`].
    mappings: HashMap<Vec<MappingPiece>, MappingOccupancy>,
    /// The pieces of the mapping being offloaded (its key among `mappings`).
    mapping: Vec<MappingPiece>,
    /// What it installed, per stage.
    mapping_installs: Vec<u32>,
}

impl Gigaflow {
    /// A Gigaflow NIC of `config.tables` stages, applying installs `update_latency_ns` after
    /// they are made.
    pub fn new(config: GigaflowConfig, update_latency_ns: u64) -> Result<Gigaflow, TableConfigError> {
        // Stages are addressed by a byte (entry addresses, tags of installs).
        if !(1..=MAX_TABLES).contains(&config.tables) {
            return Err(TableConfigError::Tables(InvalidParam::new(
                "nic-tables",
                format!("must be 1 to {MAX_TABLES} for gigaflow, not {}", config.tables),
            )));
        }
        let stages = (0..config.tables)
            .map(|i| {
                CacheTable::new(TableConfig {
                    name: format!("NIC gigaflow{i}"),
                    kind: MatchKind::Ternary,
                    capacity: config.entries,
                    max_masks: config.max_masks,
                    update_latency_ns,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut tags = Tags::default();
        tags.intern(&LookupPoint::initial());
        Ok(Gigaflow {
            stages,
            effects: Interner::new(),
            tags,
            config,
            rng: StdRng::seed_from_u64(config.seed),
            stats: GigaflowStats::default(),
            scratch: Vec::new(),
            fields: Vec::new(),
            planned: Vec::new(),
            mappings: HashMap::new(),
            mapping: Vec::new(),
            mapping_installs: vec![0; config.tables],
        })
    }

    /// Its shape.
    pub fn config(&self) -> &GigaflowConfig {
        &self.config
    }

    /// Entries in all stages.
    pub fn len(&self) -> usize {
        self.stages.iter().map(|s| s.space().len()).sum()
    }

    /// Whether no stage holds an entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Offloads a slow-path traversal (recorded with `record_segments`): follows the entries
    /// that already cover it and installs sub-traversals where none does, while stages have
    /// room; appends the entries installed. Returns whether the NIC now holds a complete chain
    /// for the packet. Installed entries take their own references on `tables`' path table.
    fn offload(
        &mut self,
        tr: &Traversal,
        tables: &mut DecisionTables,
        now_ns: u64,
        installed: &mut Vec<(u8, EntryId)>,
    ) -> bool {
        self.stats.upcalls += 1;
        let n = tr.steps.len();
        if segmentable(tr).is_err() || n == 0 || n > MAX_RESUBMITS as usize / self.stages.len() {
            self.stats.not_offloadable += 1;
            return false;
        }
        self.fields.clear();
        self.fields.extend((0..n).map(|k| coupling_bits(&lookup_mask(tr, k))));
        self.mapping.clear();
        self.mapping_installs.fill(0);
        let (mut i, mut tag) = (0, INITIAL_TAG);
        for s in 0..self.stages.len() {
            if tag == END_TAG || i >= n {
                break;
            }
            let state = tr.state_at(i);
            if let Some(id) = self.stages[s].space().peek(&state, tag) {
                let e = &mut self.stages[s].parts_mut().0.entry_mut(id).expect("found entries live").data;
                // An entry awaiting a revalidation verdict may be outdated: nothing to build on.
                // (A sound one always agrees with the traversal.)
                let end = i + e.len as usize;
                if e.version.is_pending() || end > n || (end == n) != (e.next == END_TAG) {
                    break;
                }
                e.flows += 1;
                let (len, next) = (e.len, e.next);
                let mask = self.stages[s].space().matcher(id).map_or_else(FlowMask::default, |m| m.mask);
                self.mapping.push(MappingPiece { stage: s as u8, tag, len, mask });
                i = end;
                tag = next;
                self.stats.reused += 1;
                continue;
            }
            if !self.stages[s].has_room() {
                continue;
            }
            let avail = (s..self.stages.len()).filter(|&t| self.stages[t].has_room()).count();
            let fields = std::mem::take(&mut self.fields);
            let len = self.first_segment(&fields[i..n], avail);
            self.fields = fields;
            let Ok(st) = sub_traversal(tr, i, len) else { break };
            if self.config.whole_mappings {
                // Planned now, installed once every piece is known to fit.
                let at = self.tags.intern(&st.point);
                if let Err(r) = self.stages[s].admits(&st.matcher, at) {
                    self.stages[s].count_refusal(r);
                    self.planned.clear();
                    return false;
                }
                i += len;
                tag = st.effects.next.as_ref().map_or(END_TAG, |p| self.tags.intern(p));
                self.planned.push((s, st, state));
                continue;
            }
            match self.install_segment(s, &st, &state, tables, now_ns) {
                Ok((id, next)) => {
                    installed.push((s as u8, id));
                    self.mapping.push(MappingPiece {
                        stage: s as u8,
                        tag,
                        len: len as u32,
                        mask: st.matcher.mask,
                    });
                    self.mapping_installs[s] += 1;
                    i += len;
                    tag = next;
                }
                Err(_) => continue,
            }
        }
        if tag != END_TAG {
            // An incomplete plan serves no packet: a whole mapping installs nothing.
            self.planned.clear();
        }
        for (s, st, state) in std::mem::take(&mut self.planned) {
            // Admitted above, into distinct stages: these installs fit.
            let at = self.tags.intern(&st.point);
            if let Ok((id, _)) = self.install_segment(s, &st, &state, tables, now_ns) {
                installed.push((s as u8, id));
                self.mapping.push(MappingPiece {
                    stage: s as u8,
                    tag: at,
                    len: st.len as u32,
                    mask: st.matcher.mask,
                });
                self.mapping_installs[s] += 1;
            }
        }
        self.count_mapping();
        let complete = tag == END_TAG;
        self.stats.completed += complete as u64;
        complete
    }

    /// Counts the mapping just offloaded ([`Gigaflow::mapping`]) among the distinct ones:
    /// what it installed per stage, and whether consecutive pieces overlap (examine a header
    /// field in common, `flow_wildcards_overlap`'s fields, the first piece against none).
    fn count_mapping(&mut self) {
        if self.mapping.is_empty() {
            return;
        }
        // Whole mappings plan their installs after the pieces they reuse: stage order is the key's.
        self.mapping.sort_unstable_by_key(|p| p.stage);
        let k = self.stages.len();
        // One lookup; the key is copied only for a mapping not seen before.
        let occupancy = self.mappings.entry_ref(self.mapping.as_slice()).or_insert_with(|| {
            let mut previous = 0u8;
            let mut overlap = false;
            for piece in &self.mapping {
                let bits = coupling_bits(&piece.mask);
                overlap |= previous & bits != 0;
                previous = bits;
            }
            MappingOccupancy { installs: vec![0; k], overlap }
        });
        for (total, now) in occupancy.installs.iter_mut().zip(&self.mapping_installs) {
            *total += now;
        }
    }

    fn install_segment(
        &mut self,
        s: usize,
        st: &SubTraversal,
        rep: &FlowKey,
        tables: &mut DecisionTables,
        now_ns: u64,
    ) -> Result<(EntryId, u32), Refused> {
        let tag = self.tags.intern(&st.point);
        let next = st.effects.next.as_ref().map_or(END_TAG, |p| self.tags.intern(p));
        effect_list(&st.effects, &mut self.scratch);
        let (effects, _) = self.effects.intern(&self.scratch);
        let path = tables.intern_outcomes(&st.outcomes);
        let data = SubTraversalEntry {
            rep: *rep,
            len: st.len as u32,
            effects,
            next,
            path,
            version: EntryVersion::default(),
            flows: 1,
        };
        match self.stages[s].install(&st.matcher, tag, st.len as u32, data, now_ns) {
            Ok(id) => {
                self.stats.installed += 1;
                self.stats.peak = self.stats.peak.max(self.len());
                Ok((id, next))
            }
            Err(r) => {
                self.effects.release(effects);
                tables.release_path(path);
                Err(r)
            }
        }
    }

    /// Length of the first sub-traversal when `fields` (coupling bits per remaining lookup)
    /// are cut into at most `avail` pieces.
    fn first_segment(&mut self, fields: &[u8], avail: usize) -> usize {
        let n = fields.len();
        match self.config.partition {
            Partition::Disjoint => disjoint_partition(fields, avail)[0],
            Partition::Random => {
                let pieces = self.rng.random_range(1..=avail.min(n));
                if pieces == 1 {
                    return n;
                }
                // The first cut of `pieces - 1` distinct cuts among the n - 1 gaps.
                let mut cuts: Vec<usize> = (1..n).collect();
                for k in 0..pieces - 1 {
                    let j = self.rng.random_range(k..cuts.len());
                    cuts.swap(k, j);
                }
                cuts[..pieces - 1].iter().copied().min().unwrap_or(n)
            }
            Partition::OneToOne => {
                if avail <= 1 {
                    n
                } else {
                    1
                }
            }
        }
    }

    /// Counters of all stages together (peak: most entries held at once).
    pub(crate) fn totals(&self) -> FlowTableStats {
        let mut t = FlowTableStats::default();
        for s in &self.stages {
            t.hits += s.stats.hits;
            t.misses += s.stats.misses;
            t.installs += s.stats.installs;
            t.refused += s.stats.refused;
            t.refused_masks += s.stats.refused_masks;
            t.expired += s.stats.expired;
            t.revalidated += s.stats.revalidated;
        }
        t.peak = self.stats.peak;
        t
    }

    /// Sub-traversal sharing over the entries held now: mean and largest number of upcalls'
    /// traversals each entry served.
    pub fn sharing(&self) -> (f64, u32) {
        let flows = self
            .stages
            .iter()
            .flat_map(|s| s.space().ids().map(move |id| s.space().entry(id).map_or(0, |e| e.data.flows)));
        let (n, sum, max) =
            flows.fold((0u64, 0u64, 0u32), |(n, sum, max), f| (n + 1, sum + f as u64, max.max(f)));
        (if n == 0 { 0.0 } else { sum as f64 / n as f64 }, max)
    }

    /// Sub-traversal sharing per stage: mean upcalls' traversals served per entry held in it
    /// (0 for an empty stage) — how much the workload's locality lets a stage's entries be
    /// shared.
    pub(crate) fn stage_sharing(&self) -> Vec<f64> {
        self.stages
            .iter()
            .map(|s| {
                let space = s.space();
                let sum: u64 = space.ids().map(|id| space.entry(id).map_or(0, |e| e.data.flows as u64)).sum();
                if space.is_empty() {
                    0.0
                } else {
                    sum as f64 / space.len() as f64
                }
            })
            .collect()
    }

    /// Rule-space coverage: the number of distinct complete chains of entries the NIC can
    /// walk — from the initial tag, through tag-linked entries in increasing stages, to END.
    /// (An upper bound on the distinct traversals it serves: a longer entry can shadow a
    /// chain.) Megaflow's equivalent is its number of entries.
    pub fn coverage(&self) -> f64 {
        // chains[s][tag]: complete chains from `tag` using stages s.. (memoised backwards).
        let k = self.stages.len();
        let mut from: Vec<HashMap<u32, f64>> = vec![HashMap::new(); k + 1];
        for s in (0..k).rev() {
            let mut here: HashMap<u32, f64> = from[s + 1].clone();
            for id in self.stages[s].space().ids() {
                let e = self.stages[s].space().entry(id).expect("listed entries live");
                let tail = if e.data.next == END_TAG {
                    1.0
                } else {
                    from[s + 1].get(&e.data.next).copied().unwrap_or(0.0)
                };
                *here.entry(e.tag).or_insert(0.0) += tail;
            }
            from[s] = here;
        }
        from[0].get(&INITIAL_TAG).copied().unwrap_or(0.0)
    }

    /// Rule-space coverage as the Gigaflow artifact estimates it (`gvs`
    /// `lib/gigaflow-perf.c`, the paper's Table 2): per distinct mapping, the largest product
    /// of the installs of two consecutive stages it uses (empty stages skipped); the largest
    /// single stage's if consecutive pieces overlap (they do not multiply), at least 1; 0 if
    /// no stage holds more than one of its entries; 1 for a mapping of one stage. Summed over
    /// mappings, and at least the upcalls (the artifact reports the upcalls when its estimate
    /// falls below them). Counts only grow: entries since expired or evicted still count.
    pub fn coverage_estimate(&self) -> f64 {
        let sum: f64 = self.mappings.values().map(|m| mapping_coverage(&m.installs, m.overlap)).sum();
        sum.max(self.stats.upcalls as f64)
    }
}

/// One mapping's share of [`Gigaflow::coverage_estimate`], from its installs per stage.
fn mapping_coverage(installs: &[u32], overlap: bool) -> f64 {
    if overlap {
        return installs.iter().copied().max().unwrap_or(0).max(1) as f64;
    }
    if installs.iter().all(|&n| n <= 1) {
        return 0.0;
    }
    let used: Vec<u32> = installs.iter().copied().filter(|&n| n > 0).collect();
    if used.len() == 1 {
        return 1.0;
    }
    used.windows(2).map(|w| w[0] as f64 * w[1] as f64).fold(0.0, f64::max)
}

impl NicScheme for Gigaflow {
    fn name(&self) -> &'static str {
        REGISTRATION.name
    }

    fn area_len(&self, area: u8) -> usize {
        self.stages.get(area as usize).map_or(0, |s| s.space().len())
    }

    fn area_capacity(&self, area: u8) -> usize {
        self.stages.get(area as usize).map_or(0, |s| s.config().capacity)
    }

    fn needs_segments(&self) -> bool {
        true
    }

    /// Runs a packet through the stages (see the module notes). On a miss `outputs` and
    /// `hit` are left empty. Counts hits on the entries that matched.
    fn lookup(&mut self, pkt: Arrival, hit: &mut CachedHit) -> bool {
        hit.outputs.clear();
        hit.paths.clear();
        hit.stale = false;
        hit.actions = None;
        let mut state = *pkt.key;
        let mut tag = INITIAL_TAG;
        for stage in self.stages.iter_mut() {
            let Some(id) = stage.lookup(&state, tag, pkt.bytes, pkt.now_ns) else { continue };
            let e = &stage.space().entry(id).expect("hit entries live").data;
            state = apply(self.effects.get(e.effects), &state, &mut hit.outputs);
            tag = e.next;
            hit.paths.push(e.path);
            hit.stale |= e.version.is_pending();
            if tag == END_TAG {
                return true;
            }
        }
        hit.outputs.clear();
        hit.paths.clear();
        hit.stale = false;
        false
    }

    fn install(&mut self, upcall: Upcall, tables: &mut DecisionTables, installed: &mut Vec<(u8, EntryId)>) {
        self.offload(upcall.traversal, tables, upcall.now_ns, installed);
    }

    fn entries(&self) -> &dyn Revalidate {
        self
    }

    fn entries_mut(&mut self) -> &mut dyn Revalidate {
        self
    }

    fn installs(&self) -> u64 {
        self.stats.installed
    }

    fn restart_peak(&mut self) {
        self.stats.peak = self.len();
        for stage in &mut self.stages {
            stage.stats.peak = stage.space().len();
        }
    }

    fn report(&self) -> NicReport {
        let st = &self.stats;
        let (sharing_mean, sharing_max) = self.sharing();
        let g = GigaflowReport {
            tables: self.stages.len(),
            entries_per_table: self.config.entries,
            partition: self.config.partition.name(),
            stage_entries: self.stages.iter().map(|s| s.space().len()).collect(),
            stage_peak: self.stages.iter().map(|s| s.stats.peak).collect(),
            stage_hits: self.stages.iter().map(|s| s.stats.hits).collect(),
            installed: st.installed,
            reused: st.reused,
            upcalls: st.upcalls,
            completed: st.completed,
            not_offloadable: st.not_offloadable,
            sharing_mean,
            sharing_max,
            stage_sharing: self.stage_sharing(),
            stage_masks: self.stages.iter().map(|s| s.space().n_masks()).collect(),
            stage_refused_masks: self.stages.iter().map(|s| s.stats.refused_masks).collect(),
            coverage: self.coverage(),
            coverage_estimate: self.coverage_estimate(),
            mappings: self.mappings.len(),
            retranslated: st.retranslated,
        };
        NicReport {
            scheme: self.name(),
            entries_now: self.len(),
            masks_now: self.stages.iter().map(|s| s.space().n_masks()).sum(),
            totals: self.totals(),
            figures: Some(SchemeFigures {
                key: "gigaflow",
                json: serde_json::to_value(&g).unwrap_or_default(),
                summary: g.summary(),
            }),
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn counters(&self, out: &mut Vec<(u8, EntryId, u64)>) {
        for (s, stage) in self.stages.iter().enumerate() {
            let space = stage.space();
            out.extend(space.ids().filter_map(|id| Some((s as u8, id, space.entry(id)?.stats.packets))));
        }
    }

    /// Each stage's entries: the entry's tag (`tag=N`, part of the stage's lookup key) before
    /// its match; as actions its effects (fields set, copies sent) and `next:N`, the tag its
    /// state goes on to the next stage with.
    fn dump(&self, _tables: &DecisionTables, out: &mut Vec<DumpedFlow>) {
        for (s, stage) in self.stages.iter().enumerate() {
            let space = stage.space();
            for id in space.ids() {
                let (Some(e), Some(matcher)) = (space.entry(id), space.matcher(id)) else { continue };
                let mut actions = Vec::new();
                for effect in self.effects.get(e.data.effects) {
                    let (overlay, then) = match effect {
                        Effect::Output(port, overlay) => (overlay, port.to_string()),
                        Effect::Exit(_) if e.data.next == END_TAG => continue,
                        Effect::Exit(overlay) => (overlay, format!("next:{}", e.data.next)),
                    };
                    if overlay.mask.words.iter().any(|&w| w != 0) {
                        actions.push(format!("set({})", format_match(&overlay.value, &overlay.mask)));
                    }
                    actions.push(then);
                }
                let actions = if actions.is_empty() { "drop".to_string() } else { actions.join(",") };
                out.push(DumpedFlow {
                    table: Some(s as u8),
                    tag: Some(e.tag),
                    matcher,
                    stats: e.stats,
                    actions,
                });
            }
        }
    }
}

impl Revalidate for Gigaflow {
    fn tables(&self) -> usize {
        self.stages.len()
    }

    fn slot(&mut self, table: usize, id: EntryId) -> Option<(&mut EntryVersion, &mut ItemRef)> {
        let e = &mut self.stages.get_mut(table)?.parts_mut().0.entry_mut(id)?.data;
        Some((&mut e.version, &mut e.path))
    }

    fn version(&self, table: usize, id: EntryId) -> Option<EntryVersion> {
        Some(self.stages.get(table)?.space().entry(id)?.data.version)
    }

    /// The lookups on its path, and the rules whose remaining actions its tag resumes.
    fn dependencies(&self, table: usize, id: EntryId, tables: &DecisionTables, out: &mut Vec<LookupRef>) {
        let Some(e) = self.stages.get(table).and_then(|s| s.space().entry(id)) else { return };
        out.extend_from_slice(tables.paths().get(e.data.path));
        if let Some(p) = self.tags.points.get(e.tag as usize) {
            out.extend(p.continuation.iter().map(|r| LookupRef::rule(r.rule)));
        }
    }

    /// Re-translates the entry under the current rules (Gigaflow §4.3.1: from its tag, on its
    /// parent flow, for its length — or to the end, for an entry that ends translation).
    /// Kept when the effects and next tag are the same and the new rule needs no bit the
    /// entry ignores.
    fn retranslate(&mut self, table: usize, id: EntryId, with: &mut Translator) -> Retranslation {
        let Translator { pipeline, tables, tr } = with;
        self.stats.retranslated += 1;
        let Some(space) = self.stages.get(table).map(|s| s.space()) else { return Retranslation::Evict };
        let Some(e) = space.entry(id) else { return Retranslation::Evict };
        let (data, tag) = (e.data, e.tag);
        let Some(old) = space.matcher(id) else { return Retranslation::Evict };
        let Some(point) = self.tags.points.get(tag as usize) else { return Retranslation::Evict };
        tr.record_segments = true;
        // An entry that ends translation promises only its outputs: re-translate to the end,
        // however many lookups that now takes (its length stays its LTM priority). Any other
        // entry promises the next point after exactly its lookups.
        let ends = data.next == END_TAG;
        let budget = if ends { MAX_RESUBMITS as usize / self.stages.len() + 1 } else { data.len as usize };
        pipeline.run_from(point, &data.rep, budget, tr);
        let ran = tr.steps.len();
        if (ends && tr.stopped_at.is_some()) || (!ends && ran != data.len as usize) {
            return Retranslation::Evict;
        }
        let Ok(st) = sub_traversal(tr, 0, ran) else { return Retranslation::Evict };
        let next = match &st.effects.next {
            None => Some(END_TAG),
            Some(p) => self.tags.get(p),
        };
        if next != Some(data.next)
            || !same_effects(self.effects.get(data.effects), &st.effects)
            || !st.matcher.mask.is_subset_of(&old.mask)
        {
            return Retranslation::Evict;
        }
        Retranslation::Keep(tables.intern_outcomes(&st.outcomes))
    }

    fn remove(&mut self, table: usize, id: EntryId, tables: &mut DecisionTables, why: Removal) -> bool {
        let Some(stage) = self.stages.get_mut(table) else { return false };
        let (space, stats) = stage.parts_mut();
        let Some(e) = space.remove(id) else { return false };
        why.count(stats);
        self.effects.release(e.data.effects);
        tables.release_path(e.data.path);
        true
    }

    fn idle(&self, table: usize, cutoff_ns: u64, out: &mut Vec<EntryId>) {
        if let Some(stage) = self.stages.get(table) {
            stage.idle(cutoff_ns, out);
        }
    }

    fn ids(&self, table: usize, out: &mut Vec<EntryId>) {
        if let Some(stage) = self.stages.get(table) {
            out.extend(stage.space().ids());
        }
    }
}

impl GigaflowReport {
    /// The figures as one line of text.
    pub(crate) fn summary(&self) -> String {
        let list = |v: Vec<String>| v.join(", ");
        format!(
            "gigaflow {}x{} ({}): entries per stage [{}], masks per stage [{}] (installs refused for masks [{}]), {} \
             installed, {} reused, sharing {:.2} flows/entry (max {}; per stage [{}]), coverage {:.0} chains ({:.0} by \
             the artifact's estimate over {} mappings)",
            self.tables,
            self.entries_per_table,
            self.partition,
            list(self.stage_entries.iter().map(|n| n.to_string()).collect()),
            list(self.stage_masks.iter().map(|n| n.to_string()).collect()),
            list(self.stage_refused_masks.iter().map(|n| n.to_string()).collect()),
            self.installed,
            self.reused,
            self.sharing_mean,
            self.sharing_max,
            list(self.stage_sharing.iter().map(|x| format!("{x:.2}")).collect()),
            self.coverage,
            self.coverage_estimate,
            self.mappings,
        )
    }
}

/// Gigaflow's own figures, as `replay --json` reports them under `gigaflow`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct GigaflowReport {
    /// Stages (K).
    pub tables: usize,
    /// Entries per stage.
    pub entries_per_table: usize,
    /// Partitioning scheme.
    pub partition: &'static str,
    /// Entries per stage now.
    pub stage_entries: Vec<usize>,
    /// Most entries per stage.
    pub stage_peak: Vec<usize>,
    /// Hits per stage.
    pub stage_hits: Vec<u64>,
    /// Entries installed.
    pub installed: u64,
    /// Entries a new traversal followed instead of installing its own.
    pub reused: u64,
    /// Upcalls offered for installation.
    pub upcalls: u64,
    /// Upcalls after which the NIC held a complete chain.
    pub completed: u64,
    /// Upcalls not offloadable.
    pub not_offloadable: u64,
    /// Mean upcalls served per entry held.
    pub sharing_mean: f64,
    /// Most upcalls served by one entry.
    pub sharing_max: u32,
    /// Per stage, mean upcalls served per entry held.
    pub stage_sharing: Vec<f64>,
    /// Distinct masks per stage now.
    pub stage_masks: Vec<usize>,
    /// Installs refused per stage because its mask limit was reached.
    pub stage_refused_masks: Vec<u64>,
    /// Distinct complete chains of entries.
    pub coverage: f64,
    /// Coverage as the artifact estimates it ([`Gigaflow::coverage_estimate`]).
    pub coverage_estimate: f64,
    /// Distinct mappings upcalls made.
    pub mappings: usize,
    /// Entries re-translated by revalidation.
    pub retranslated: u64,
}

/// Runs effects on `state`: outputs appended, the state for the next stage returned.
#[inline]
fn apply(effects: &[Effect], state: &FlowKey, outputs: &mut Vec<Output>) -> FlowKey {
    let mut next = *state;
    for e in effects {
        match e {
            Effect::Output(port, ov) => {
                outputs.push(Output { port: *port, packet: ov.apply(state).masked(FlowMask::leaving()) })
            }
            Effect::Exit(ov) => next = ov.apply(state),
        }
    }
    next
}

/// Whether an interned effect list says what `e` says.
fn same_effects(list: &[Effect], e: &SegmentEffects) -> bool {
    let outputs = e.outputs.iter().map(|(p, ov)| Effect::Output(*p, *ov));
    list.iter().copied().eq(outputs.chain(std::iter::once(Effect::Exit(e.exit))))
}

fn effect_list(e: &SegmentEffects, out: &mut Vec<Effect>) {
    out.clear();
    out.extend(e.outputs.iter().map(|(p, ov)| Effect::Output(*p, *ov)));
    out.push(Effect::Exit(e.exit));
}

/// What lookup `k` itself examined (the table's match fields, priority-blocking bits
/// included) — not what the actions after it read or wrote: a table that sets a register
/// and the table that matches it later are disjoint, the register travels as NIC state.
fn lookup_mask(tr: &Traversal, k: usize) -> FlowMask {
    let mut m = tr.steps[k].mask;
    if tr.points[k].in_port.is_some() {
        m.set(id::IN_PORT, 0);
    }
    m
}

/// The coupling classes a lookup's mask touches, one bit each, as the Gigaflow artifact's
/// mapper counts them (`flow_wildcard_to_bits` in gvs `lib/mapper.c`): Ethernet source,
/// Ethernet destination, IP source, IP destination, IP protocol, L4 source port, L4
/// destination port (IPv6 addresses count as IP addresses: hyflow's extension; the artifact
/// looks at IPv4 only). Nothing else couples: a lookup that examines only pipeline state
/// (registers, metadata — conntrack stand-ins), the ingress port, VLAN or `dl_type` joins
/// whichever sub-traversal it falls in, so that pipelines such as OVN's, whose header-matching
/// tables are interleaved with state-only ones, keep their L3/L4 tables together.
fn coupling_bits(mask: &FlowMask) -> u8 {
    const CLASSES: [&[crate::packet::FieldId]; 7] = [
        &[id::DL_SRC],
        &[id::DL_DST],
        &[id::NW_SRC, id::IPV6_SRC],
        &[id::NW_DST, id::IPV6_DST],
        &[id::NW_PROTO],
        &[id::TP_SRC],
        &[id::TP_DST],
    ];
    CLASSES
        .iter()
        .enumerate()
        .filter(|(_, fields)| fields.iter().any(|&f| mask.get(f) != 0))
        .fold(0, |bits, (i, _)| bits | 1 << i)
}

/// How far a coupled run starting at each lookup reaches: `reach[a]` is one past the last
/// lookup of the longest coupled run from `a` (the artifact's `get_coupling`: walking from
/// the first, each lookup either has no coupling bits, follows a run with none yet, or shares
/// a bit with the union of the run so far). Every shorter run from `a` is coupled too.
fn coupled_reach(fields: &[u8]) -> Vec<usize> {
    (0..fields.len())
        .map(|a| {
            let mut run = 0u8;
            for (b, &f) in fields.iter().enumerate().skip(a) {
                if run != 0 && f != 0 && run & f == 0 {
                    return b;
                }
                run |= f;
            }
            fields.len()
        })
        .collect()
}

/// The paper's disjoint partitioning (§4.2.2) as the artifact scores it: cut lookups with
/// coupling bits `fields` into at most `max_pieces` contiguous sub-traversals maximising
/// the summed score of the pieces — a coupled piece of n lookups scores n - 1 (each lookup
/// that joins its run), a piece that is not coupled scores 0; among equal scores the fewest
/// pieces, then the earliest cuts. A traversal with no coupling anywhere thus stays whole
/// (the artifact's fallback to one table). Returns the lengths.
pub fn disjoint_partition(fields: &[u8], max_pieces: usize) -> Vec<usize> {
    let n = fields.len();
    if n == 0 {
        return Vec::new();
    }
    let max_pieces = max_pieces.clamp(1, n);
    let reach = coupled_reach(fields);
    let score = |a: usize, b: usize| if b <= reach[a] { (b - a - 1) as i64 } else { 0 };
    const NONE: i64 = i64::MIN;
    // best[m][j]: best score of the first j lookups in exactly m pieces; cut[m][j]: last cut.
    let mut best = vec![vec![NONE; n + 1]; max_pieces + 1];
    let mut cut = vec![vec![0usize; n + 1]; max_pieces + 1];
    best[0][0] = 0;
    for m in 1..=max_pieces {
        for j in m..=n {
            for i in (m - 1)..j {
                if best[m - 1][i] == NONE {
                    continue;
                }
                let v = best[m - 1][i] + score(i, j);
                if v > best[m][j] {
                    best[m][j] = v;
                    cut[m][j] = i;
                }
            }
        }
    }
    let m = (1..=max_pieces).fold(1, |bm, m| if best[m][n] > best[bm][n] { m } else { bm });
    let mut lens = Vec::with_capacity(m);
    let (mut j, mut m) = (n, m);
    while m > 0 {
        let i = cut[m][j];
        lens.push(j - i);
        j = i;
        m -= 1;
    }
    lens.reverse();
    lens
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The artifact's per-mapping rules, quirks included: consecutive non-empty stages
    /// multiply (the largest pair), overlapping pieces do not, a mapping of single installs
    /// counts nothing and one of a single stage counts one.
    #[test]
    fn a_mappings_coverage_follows_the_artifacts_estimator() {
        assert_eq!(mapping_coverage(&[3, 0, 5, 2], false), 15.0, "3 x 5: empty stages skipped");
        assert_eq!(mapping_coverage(&[3, 0, 5, 2], true), 5.0, "overlap: the largest stage");
        assert_eq!(mapping_coverage(&[0, 0, 0, 0], true), 1.0, "overlap: at least one");
        assert_eq!(mapping_coverage(&[1, 1, 1, 0], false), 0.0, "no stage above one");
        assert_eq!(mapping_coverage(&[0, 40, 0, 0], false), 1.0, "a single stage");
    }

    #[test]
    fn coupling_counts_header_fields_only() {
        let mut m = FlowMask::default();
        m.set(id::REG0, 0xff);
        m.set(id::METADATA, 1);
        m.set(id::IN_PORT, u32::MAX as u128);
        m.set(id::VLAN_TCI, 0xfff);
        m.set(id::DL_TYPE, 0xffff);
        assert_eq!(coupling_bits(&m), 0, "state, port, VLAN and dl_type do not couple");
        m.set(id::NW_SRC, 0xff00_0000);
        m.set(id::IPV6_DST, 1);
        m.set(id::TP_DST, 0xffff);
        assert_eq!(coupling_bits(&m), 0b100_1100);
    }

    #[test]
    fn disjoint_partition_cuts_at_disjoint_boundaries() {
        // eth, eth, ip, ip, tcp: boundaries after lookup 2 and 4 are disjoint.
        let (eth, ip, tcp) = (0b001u8, 0b010, 0b100);
        assert_eq!(disjoint_partition(&[eth, eth, ip, ip, tcp], 4), vec![2, 2, 1]);
        assert_eq!(disjoint_partition(&[eth, eth, ip, ip, tcp], 3), vec![2, 2, 1]);
        // Two pieces: one must cross a boundary; the best keeps the longer coupled run whole.
        assert_eq!(disjoint_partition(&[eth, eth, ip, ip, ip, tcp], 2).iter().sum::<usize>(), 6);
        assert_eq!(disjoint_partition(&[eth, eth, ip, ip, ip, tcp], 2), vec![2, 4]);
        // Coupled all along: one piece, however many are allowed.
        assert_eq!(disjoint_partition(&[eth | ip, ip | tcp, tcp], 4), vec![3]);
        // Empty field sets couple with anything, and a run couples through its union: an
        // empty lookup between two disjoint ones does not join them, a lookup sharing a
        // field with any earlier one of the run does.
        assert_eq!(disjoint_partition(&[eth, 0, eth], 3), vec![3]);
        assert_eq!(disjoint_partition(&[eth, 0, ip], 2), vec![1, 2]);
        assert_eq!(disjoint_partition(&[eth | ip, ip | tcp, eth], 4), vec![3]);
        // Nothing coupled anywhere: the traversal stays whole.
        assert_eq!(disjoint_partition(&[eth, ip, tcp], 4), vec![3]);
        assert_eq!(disjoint_partition(&[eth], 1), vec![1]);
        assert!(disjoint_partition(&[], 4).is_empty());
    }
}
