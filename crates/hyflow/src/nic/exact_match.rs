//! An exact-match flow table: the hardware table of Elixir's prototypes (rte_flow rules on a
//! ConnectX-5, exact tables on a Tofino switch). Entries are keyed by a flow — the fields of a
//! [`KeySpec`], the 5-tuple by default — and hold the decision software computed for it. An
//! offload policy decides which flows it holds ([`crate::offload`]); the table only enforces
//! what hardware would: the capacity of each area, install latency, per-entry counters.
//!
//! **Areas.** The table is cut into disjoint areas with their own capacities (Elixir §3.1: a
//! large-flow area and a small bursty area whose entries software polls). A flow is held in at
//! most one area. Entries are addressed as (area, slot) — the revalidator's (table, id).
//!
//! **Soundness.** An entry must forward only packets that get its decision. Its match is the
//! flow's key fields exact *and* every bit of the megaflow its packet's translation produced
//! (a subset of that megaflow, so sound by the megaflow's soundness); a lookup finds the entry
//! by the packet's flow id in a hash index and then checks the packet against that match. A
//! packet of the flow that differs where the decision depends on it (another TTL, another
//! VLAN) misses and goes to software. Entries are revalidated after rule updates like every
//! other NIC entry: kept only if the flow's packet still translates to the same actions with a
//! megaflow inside the entry's match.
//!
//! **Lifetime.** Entries leave when their policy removes them, when revalidation finds them
//! outdated, and — only if configured (OVS's `max-idle`) — when idle: a policy that manages
//! the table itself (Elixir, TFO, LFP) keeps them until it replaces them.

use hashbrown::HashMap;

use super::{Arrival, NicConfig, NicEntryView, NicReport, NicScheme, NicSchemeConfig, Upcall};
use crate::cache::dump::DumpedFlow;
use crate::cache::table::{Refused, TableConfigError};
use crate::cache::CachedFlow;
use crate::decision::interner::ItemRef;
use crate::decision::{CachedHit, DecisionTables};
use crate::flow_number_table::FlowNumberTable;
use crate::measure::{FlowId, KeySpec};
use crate::openflow::dp_actions::format_dp_actions;
use crate::openflow::{LookupRef, Match};
use crate::packet::field::id;
use crate::packet::FlowKey;
use crate::revalidation::{EntryVersion, Removal, Retranslation, Revalidate, Translator};
use crate::tuple_space::{EntryId, EntryStats, FlowTableStats};

/// Most areas a table is cut into.
pub(crate) const MAX_AREAS: usize = 2;

/// Shape of an exact-match table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExactMatchConfig {
    /// Entries of each area (0: no such area; the first must hold at least one).
    pub areas: [usize; MAX_AREAS],
    /// The fields a flow is keyed by.
    pub key: KeySpec,
    /// Whether entries idle longer than `max-idle` expire (OVS); otherwise only the policy or
    /// revalidation removes them.
    pub expire_idle: bool,
}

impl ExactMatchConfig {
    /// One area of `entries` keyed by `key`: the single table of the baselines (TFO, LFP,
    /// OVS rebalance), as a NIC config.
    pub(crate) fn one_area(entries: usize, key: KeySpec, expire_idle: bool) -> NicConfig {
        NicConfig::new(ExactMatchConfig { areas: [entries, 0], key, expire_idle })
    }
}

impl NicSchemeConfig for ExactMatchConfig {
    fn name(&self) -> &'static str {
        NAME
    }

    fn build(&self, update_latency_ns: u64) -> Result<Box<dyn NicScheme>, TableConfigError> {
        Ok(Box::new(ExactMatch::new(*self, update_latency_ns)?))
    }
}

/// The scheme's name in reports.
const NAME: &str = "exact-match";

/// Most key words an entry's match may have bits in for a lookup to compare it inline.
const INLINE_WORDS: usize = 8;

/// The words of a match where its mask has bits, packed next to the entry's counters: a
/// lookup compares these few words instead of three whole keys (552 bytes in nine cache
/// lines). A match with bits in more words is compared whole.
#[derive(Clone, Copy, Debug)]
struct PackedMatch {
    /// Words used; `None`: more than [`INLINE_WORDS`].
    len: Option<u8>,
    word: [u8; INLINE_WORDS],
    mask: [u64; INLINE_WORDS],
    value: [u64; INLINE_WORDS],
}

impl PackedMatch {
    fn new(m: &Match) -> PackedMatch {
        let mut p = PackedMatch {
            len: Some(0),
            word: [0; INLINE_WORDS],
            mask: [0; INLINE_WORDS],
            value: [0; INLINE_WORDS],
        };
        for (i, &mask) in m.mask.words.iter().enumerate().filter(|(_, w)| **w != 0) {
            let Some(n) = p.len.filter(|&n| (n as usize) < INLINE_WORDS) else {
                p.len = None;
                break;
            };
            let n = n as usize;
            (p.word[n], p.mask[n], p.value[n]) = (i as u8, mask, m.value.words[i]);
            p.len = Some(n as u8 + 1);
        }
        p
    }

    #[inline]
    fn matches(&self, key: &FlowKey, whole: &Match) -> bool {
        match self.len {
            Some(n) => (0..n as usize)
                .all(|i| (key.words[self.word[i] as usize] ^ self.value[i]) & self.mask[i] == 0),
            None => key.matches(&whole.value, &whole.mask),
        }
    }
}

/// One entry: a flow, its sound match, its decision and its hardware counters. What a lookup
/// reads comes first.
#[derive(Clone, Debug)]
#[repr(C)]
struct ExactEntry {
    /// The first time a lookup sees it (install time plus the NIC's update latency).
    active_ns: u64,
    packets: u64,
    bytes: u64,
    last_hit_ns: u64,
    packed: PackedMatch,
    cached: CachedFlow,
    flow: FlowId,
    /// The whole match (kept out of the lookup's cache lines).
    matcher: Box<Match>,
}

/// One area: a slab of slots with a free list.
#[derive(Clone, Debug, Default)]
struct Area {
    capacity: usize,
    slots: Vec<Option<ExactEntry>>,
    /// Per slot, bumped whenever its entry leaves: a [`FlowHint`] to the slot holds while its
    /// generation is the slot's (an entry's match never changes while it lives).
    generations: Vec<u64>,
    free: Vec<u32>,
    len: usize,
}

/// Where a numbered trace flow's packets last hit: its key matched the entry in (`area`,
/// `slot`) while that slot was at `generation` (0: no hint). Keys of a numbered flow never
/// change, so the same entry still matches them, and it was active then, so it is now.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct FlowHint {
    generation: u64,
    slot: u32,
    area: u8,
}

/// The exact-match NIC table.
pub struct ExactMatch {
    config: ExactMatchConfig,
    areas: Vec<Area>,
    /// Flow id → (area, slot).
    index: HashMap<FlowId, (u8, u32)>,
    /// Per trace flow number ([`Arrival::flow`]), its last hit: a lookup that finds a valid
    /// hint reads one array and the entry instead of building the flow id, hashing it and
    /// probing the index.
    hints: FlowNumberTable<FlowHint>,
    update_latency_ns: u64,
    stats: FlowTableStats,
    /// Entries installed, changed or removed since a mirror last asked (`None`: no mirror).
    journal: Option<Vec<(u8, EntryId)>>,
}

impl ExactMatch {
    /// An empty table of `config`'s areas, applying installs `update_latency_ns` after they
    /// are made.
    pub fn new(config: ExactMatchConfig, update_latency_ns: u64) -> Result<ExactMatch, TableConfigError> {
        if config.areas[0] == 0 {
            return Err(TableConfigError::Empty("NIC exact-match".to_string()));
        }
        let areas = config
            .areas
            .iter()
            .take_while(|&&c| c > 0)
            .map(|&capacity| Area { capacity, ..Area::default() })
            .collect();
        Ok(ExactMatch {
            config,
            areas,
            index: HashMap::new(),
            hints: FlowNumberTable::new(FlowHint::default()),
            update_latency_ns,
            stats: FlowTableStats::default(),
            journal: None,
        })
    }

    /// Notes that entry (`area`, `slot`) was installed, changed or removed, for a mirror.
    fn journal(&mut self, area: usize, slot: EntryId) {
        if let Some(j) = &mut self.journal {
            j.push((area as u8, slot));
        }
    }

    /// Its shape.
    pub fn config(&self) -> &ExactMatchConfig {
        &self.config
    }

    /// Entries held in `area`.
    pub fn len(&self, area: u8) -> usize {
        self.areas.get(area as usize).map_or(0, |a| a.len)
    }

    /// Capacity of `area`.
    pub fn capacity(&self, area: u8) -> usize {
        self.areas.get(area as usize).map_or(0, |a| a.capacity)
    }

    /// Where `flow`'s entry is, if the table holds it.
    pub fn find(&self, flow: FlowId) -> Option<(u8, EntryId)> {
        self.index.get(&flow).copied()
    }

    /// Appends (flow, packets) of every entry of `area`, in slot order.
    pub fn flows(&self, area: u8, out: &mut Vec<(FlowId, u64)>) {
        if let Some(a) = self.areas.get(area as usize) {
            out.extend(a.slots.iter().flatten().map(|e| (e.flow, e.packets)));
        }
    }

    fn entry(&self, area: usize, slot: EntryId) -> Option<&ExactEntry> {
        self.areas.get(area)?.slots.get(slot as usize)?.as_ref()
    }

    /// Entry (`area`, `slot`) to change: journaled for a mirror.
    fn entry_mut(&mut self, area: usize, slot: EntryId) -> Option<&mut ExactEntry> {
        self.journal(area, slot);
        self.areas.get_mut(area)?.slots.get_mut(slot as usize)?.as_mut()
    }

    /// Installs the decision of `upcall` for its packet's flow in `area`.
    fn place(&mut self, upcall: &Upcall, area: u8, tables: &mut DecisionTables) -> Result<EntryId, Refused> {
        let flow = self.config.key.flow_id(upcall.key).ok_or(Refused::NotAFlow)?;
        if self.index.contains_key(&flow) {
            return Err(Refused::Duplicate);
        }
        let Some(a) = self.areas.get_mut(area as usize) else { return Err(Refused::NoArea) };
        if a.len >= a.capacity {
            self.stats.refused += 1;
            return Err(Refused::Full);
        }
        let mut mask = upcall.traversal.megaflow.mask;
        mask.union_with(&self.config.key.mask());
        // The flow's fields mean what they mean only with the EtherType they were read under
        // (an ARP frame keeps its addresses and opcode where an IPv4 one keeps its addresses
        // and protocol): the engine's lookup checks it through the flow id, a hardware table
        // finding the entry by those fields alone must match it.
        mask.unwildcard_all(id::DL_TYPE);
        let matcher = Box::new(Match::new(*upcall.key, mask));
        let entry = ExactEntry {
            flow,
            packed: PackedMatch::new(&matcher),
            matcher,
            cached: CachedFlow::new(*upcall.key, upcall.decision),
            packets: 0,
            bytes: 0,
            last_hit_ns: upcall.now_ns,
            active_ns: upcall.now_ns + self.update_latency_ns,
        };
        let slot = match a.free.pop() {
            Some(s) => {
                a.slots[s as usize] = Some(entry);
                s
            }
            None => {
                a.slots.push(Some(entry));
                a.generations.push(1);
                (a.slots.len() - 1) as u32
            }
        };
        a.len += 1;
        tables.acquire(upcall.decision);
        self.index.insert(flow, (area, slot));
        self.journal(area as usize, slot);
        self.stats.installs += 1;
        let held: usize = self.areas.iter().map(|a| a.len).sum();
        self.stats.peak = self.stats.peak.max(held);
        Ok(slot)
    }
}

impl NicScheme for ExactMatch {
    fn name(&self) -> &'static str {
        NAME
    }

    fn area_len(&self, area: u8) -> usize {
        self.len(area)
    }

    fn area_capacity(&self, area: u8) -> usize {
        self.capacity(area)
    }

    fn area_flows(&self, area: u8, out: &mut Vec<(FlowId, u64)>) {
        self.flows(area, out);
    }

    #[inline]
    fn lookup(&mut self, pkt: Arrival, hit: &mut CachedHit) -> bool {
        let hinted = self.hints.get(pkt.flow).and_then(|h| {
            let a = &self.areas[h.area as usize];
            (a.generations[h.slot as usize] == h.generation).then_some((h.area, h.slot))
        });
        let found =
            hinted.or_else(|| self.config.key.flow_id(pkt.key).and_then(|f| self.index.get(&f).copied()));
        let Some((area, slot)) = found else {
            self.stats.misses += 1;
            return false;
        };
        let a = &mut self.areas[area as usize];
        let e = a.slots[slot as usize].as_mut().expect("indexed slots are live");
        if hinted.is_none() {
            if pkt.now_ns < e.active_ns || !e.packed.matches(pkt.key, &e.matcher) {
                self.stats.misses += 1;
                return false;
            }
            // Remembered once matched and active: both hold for this flow's later packets.
            self.hints.remember(pkt.flow, FlowHint { generation: a.generations[slot as usize], slot, area });
        }
        e.packets += 1;
        e.bytes += pkt.bytes;
        e.last_hit_ns = pkt.now_ns;
        self.stats.hits += 1;
        hit.set(e.cached.decision, e.cached.version.is_pending());
        true
    }

    /// An upcall offered to the table goes to the first area (a policy that offloads on
    /// upcalls, as OVS does).
    fn install(&mut self, upcall: Upcall, tables: &mut DecisionTables, installed: &mut Vec<(u8, EntryId)>) {
        if let Ok(slot) = self.place(&upcall, 0, tables) {
            installed.push((0, slot));
        }
    }

    fn install_flow(
        &mut self,
        upcall: Upcall,
        area: u8,
        tables: &mut DecisionTables,
    ) -> Result<EntryId, Refused> {
        self.place(&upcall, area, tables)
    }

    fn find_flow(&self, flow: FlowId) -> Option<(u8, EntryId)> {
        self.find(flow)
    }

    fn entries(&self) -> &dyn Revalidate {
        self
    }

    fn entries_mut(&mut self) -> &mut dyn Revalidate {
        self
    }

    fn installs(&self) -> u64 {
        self.stats.installs
    }

    fn restart_peak(&mut self) {
        self.stats.peak = self.areas.iter().map(|a| a.len).sum();
    }

    fn report(&self) -> NicReport {
        NicReport {
            scheme: self.name(),
            entries_now: self.areas.iter().map(|a| a.len).sum(),
            masks_now: 1,
            totals: self.stats,
            figures: None,
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn counters(&self, out: &mut Vec<(u8, EntryId, u64)>) {
        for (a, area) in self.areas.iter().enumerate() {
            let live = area.slots.iter().enumerate().filter_map(|(s, e)| Some((s, e.as_ref()?)));
            out.extend(live.map(|(s, e)| (a as u8, s as EntryId, e.packets)));
        }
    }

    fn dump(&self, tables: &DecisionTables, out: &mut Vec<DumpedFlow>) {
        let several = self.areas.len() > 1;
        for (a, area) in self.areas.iter().enumerate() {
            out.extend(area.slots.iter().flatten().map(|e| DumpedFlow {
                table: several.then_some(a as u8),
                tag: None,
                matcher: *e.matcher,
                stats: EntryStats { packets: e.packets, bytes: e.bytes, last_hit_ns: e.last_hit_ns },
                actions: format_dp_actions(tables.actions().get(e.cached.decision.actions), &e.cached.rep),
            }));
        }
    }

    fn keep_journal(&mut self) -> bool {
        self.journal.get_or_insert_with(Vec::new);
        true
    }

    fn drain_journal(&mut self, out: &mut Vec<(u8, EntryId)>) {
        if let Some(j) = &mut self.journal {
            out.append(j);
        }
    }

    /// A hardware table finds the entry by the flow's fields and then checks the rest of its
    /// match, as [`NicScheme::lookup`] does.
    fn entry_view(&self, table: u8, id: EntryId) -> Option<NicEntryView> {
        let e = self.entry(table as usize, id)?;
        let mut lookup_mask = self.config.key.mask();
        lookup_mask.intersect_with(&e.matcher.mask);
        Some(NicEntryView {
            matcher: *e.matcher,
            lookup_mask,
            rep: e.cached.rep,
            decision: e.cached.decision,
            pending: e.cached.version.is_pending(),
        })
    }

    fn credit_hits(&mut self, table: u8, id: EntryId, packets: u64, bytes: u64, last_hit_ns: u64) -> bool {
        let Some(e) = self.areas.get_mut(table as usize).and_then(|a| a.slots.get_mut(id as usize)?.as_mut())
        else {
            return false;
        };
        e.packets += packets;
        e.bytes += bytes;
        e.last_hit_ns = e.last_hit_ns.max(last_hit_ns);
        self.stats.hits += packets;
        true
    }
}

impl Revalidate for ExactMatch {
    fn tables(&self) -> usize {
        self.areas.len()
    }

    fn slot(&mut self, table: usize, id: EntryId) -> Option<(&mut EntryVersion, &mut ItemRef)> {
        let e = &mut self.entry_mut(table, id)?.cached;
        Some((&mut e.version, &mut e.decision.path))
    }

    fn version(&self, table: usize, id: EntryId) -> Option<EntryVersion> {
        Some(self.entry(table, id)?.cached.version)
    }

    fn dependencies(&self, table: usize, id: EntryId, tables: &DecisionTables, out: &mut Vec<LookupRef>) {
        if let Some(e) = self.entry(table, id) {
            out.extend_from_slice(tables.paths().get(e.cached.decision.path));
        }
    }

    fn retranslate(&mut self, table: usize, id: EntryId, with: &mut Translator) -> Retranslation {
        match self.entry(table, id) {
            Some(e) => e.cached.retranslate(&e.matcher.mask, with),
            None => Retranslation::Evict,
        }
    }

    fn remove(&mut self, table: usize, id: EntryId, tables: &mut DecisionTables, why: Removal) -> bool {
        let Some(area) = self.areas.get_mut(table) else { return false };
        let Some(e) = area.slots.get_mut(id as usize).and_then(Option::take) else { return false };
        // Hints to this slot no longer hold.
        area.generations[id as usize] += 1;
        area.free.push(id);
        area.len -= 1;
        self.index.remove(&e.flow);
        tables.release(e.cached.decision);
        why.count(&mut self.stats);
        self.journal(table, id);
        true
    }

    fn idle(&self, table: usize, cutoff_ns: u64, out: &mut Vec<EntryId>) {
        if !self.config.expire_idle {
            return;
        }
        if let Some(a) = self.areas.get(table) {
            let idle = a.slots.iter().enumerate().filter_map(|(s, e)| Some((s, e.as_ref()?)));
            out.extend(idle.filter(|(_, e)| e.last_hit_ns < cutoff_ns).map(|(s, _)| s as EntryId));
        }
    }

    fn ids(&self, table: usize, out: &mut Vec<EntryId>) {
        if let Some(a) = self.areas.get(table) {
            out.extend(a.slots.iter().enumerate().filter(|(_, e)| e.is_some()).map(|(s, _)| s as EntryId));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{FlowMask, KEY_WORDS};
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    /// The packed comparison agrees with the whole-key one, for masks with bits in few words
    /// (compared inline) and in many (compared whole).
    #[test]
    fn packed_match_agrees_with_whole_key_compare() {
        let mut rng = StdRng::seed_from_u64(7);
        let (mut inline, mut whole) = (0, 0);
        for _ in 0..5_000 {
            let words = rng.random_range(0..=KEY_WORDS);
            let mut mask = FlowMask::default();
            for _ in 0..words {
                mask.words[rng.random_range(0..KEY_WORDS)] = rng.random::<u64>() | 1;
            }
            let mut value = FlowKey::default();
            value.words.iter_mut().for_each(|w| *w = rng.random());
            let m = Match::new(value, mask);
            let packed = PackedMatch::new(&m);
            match packed.len {
                Some(_) => inline += 1,
                None => whole += 1,
            }
            // The rule's own key matches; a key differing in one random bit may not.
            let mut key = value;
            assert!(packed.matches(&key, &m));
            let w = rng.random_range(0..KEY_WORDS);
            key.words[w] ^= 1 << rng.random_range(0..64);
            assert_eq!(packed.matches(&key, &m), key.matches(&m.value, &m.mask));
        }
        assert!(inline > 1_000 && whole > 1_000, "{inline} inline, {whole} whole");
    }
}
