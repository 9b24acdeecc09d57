//! One OpenFlow table's classifier: tuple space search with OVS-style un-wildcarding.
//!
//! Rules are grouped into *subtables* by mask; a lookup hashes the packet under each subtable's
//! mask, visiting subtables from the highest maximum priority down and stopping as soon as no
//! remaining subtable can beat the best match. When asked for the wildcards a lookup depended on
//! (to build megaflows), it reproduces Open vSwitch's classifier (`lib/classifier.c`):
//!
//! * **staged lookup** — each subtable hashes metadata, L2, L3 and L4 fields in stages and
//!   keeps an index of every stage prefix; a miss at a stage un-wildcards only the stages
//!   examined so far;
//! * **prefix tries** on the fields of [`PrefixTries`] (OVS's `prefixes`: `nw_dst`, `nw_src`
//!   unless set otherwise) — a subtable whose prefix length cannot match the packet is skipped
//!   after un-wildcarding only the address bits the trie needed;
//! * **port prefix tries** — a miss in the final (L4) stage un-wildcards only the leading port
//!   bits that distinguish the packet from the subtable's rules.
//!
//! Ties between equal-priority rules go to the rule added first; a lookup pays for that only
//! where rules of its answer's priority in other subtables overlap it (the `ties` module says how).

use hashbrown::{HashMap, HashTable};

use super::prefixes::{PrefixTries, TRIE_FIELDS};
use super::rule::{Match, RuleId};
use super::ties::{self, Place, SubtableSet, Ties, EVERY_SUBTABLE};
use super::trie::{PrefixTrie, TrieMatch};
use crate::packet::field::{id, stage_of_word, Stage, KEY_WORDS};
use crate::packet::format::prefix_mask;
use crate::packet::{FlowKey, FlowMask};

const N_TRIES: usize = TRIE_FIELDS.len();
const PORTS_WORD: usize = crate::packet::field::word::PORTS as usize;

#[inline]
fn mix(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

#[inline]
fn finish(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

const SEED: u64 = 0x243f_6a88_85a3_08d3;

/// A rule as the classifier knows it: identity plus what decides precedence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClsEntry {
    /// The rule.
    pub rule: RuleId,
    /// Its priority.
    pub priority: u16,
    /// Insertion sequence number: lower wins among equal priorities.
    pub seq: u64,
    /// A clause of conjunctive matches (its actions are `conjunction(...)`): a soft match,
    /// which counts only when every clause of one of its conjunctions matches too.
    pub soft: bool,
}

/// One `conjunction(id,k/n)` action of a soft rule: it is clause `clause` (0-based) of
/// conjunction `id`, which has `n_clauses` clauses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Conjunction {
    /// The conjunction's id (what `conj_id=` flows match).
    pub id: u32,
    /// This clause, 0-based.
    pub clause: u8,
    /// Clauses in all, 2..=64.
    pub n_clauses: u8,
}

impl ClsEntry {
    #[inline]
    fn beats(&self, other: &ClsEntry) -> bool {
        self.priority > other.priority || (self.priority == other.priority && self.seq < other.seq)
    }
}

/// The rules of one masked match. 32 bytes: a million-rule table holds a million buckets, so
/// the key lives in the subtable's arena and rules beyond the best in a side table (a match
/// seldom has rules at several priorities).
struct Bucket {
    hash: u64,
    /// The best rule with this match: all a lookup needs.
    best: ClsEntry,
    /// The subtables holding an earlier rule of `best`'s priority that overlaps it (see
    /// [`ties`]): where a lookup answering `best` must still look.
    earlier: SubtableSet,
    /// Where the masked key is in the subtable's `keys` (`lanes.len()` words from
    /// `slot * lanes.len()`); also what `others` files the bucket's other rules under.
    slot: u32,
}

/// One key word a subtable looks at, with the subtable's mask for it.
#[derive(Clone, Copy)]
struct Lane {
    word: u32,
    mask: u64,
}

struct Subtable {
    mask: FlowMask,
    /// Key words the mask touches, ascending, with their masks.
    lanes: Box<[Lane]>,
    /// End (exclusive, into `lanes`) of each lookup stage; the last stage is the final one.
    stage_ends: Box<[u8]>,
    /// For each stage, bit j set if trie j applies in it.
    stage_tries: Box<[u8]>,
    /// Hashes of every rule's stage prefixes, with reference counts (one table per non-final
    /// stage); keyed by the hash itself, so a probe costs no further hashing.
    indices: Vec<HashTable<(u64, u32)>>,
    buckets: HashTable<Bucket>,
    /// The buckets' masked keys, `lanes.len()` words per slot.
    keys: Vec<u64>,
    /// Slots of removed buckets, reused first.
    free_slots: Vec<u32>,
    /// By bucket slot, the rules after the best of buckets with several, best first.
    others: HashMap<u32, Vec<ClsEntry>>,
    trie_plen: [u8; N_TRIES],
    /// Prefix length of the (tp_src, tp_dst) mask, 0 if ports are not matched.
    ports_mask_len: u8,
    ports_trie: PrefixTrie,
    max_priority: u16,
    /// Lowest sequence number among rules at `max_priority`.
    max_priority_seq: u64,
    n_rules: usize,
}

/// Every rule of bucket `b`, best first, the rules after the best being in `others` (a
/// subtable's): apart from [`Subtable::entries`] so that an insertion holding the bucket
/// mutably can read them.
fn bucket_entries<'a>(
    others: &'a HashMap<u32, Vec<ClsEntry>>,
    b: &Bucket,
) -> impl Iterator<Item = ClsEntry> + 'a {
    std::iter::once(b.best).chain(others.get(&b.slot).into_iter().flatten().copied())
}

/// Whether the key at `slot` of a subtable's `keys` equals, lane by lane, `word(lane)`.
#[inline]
fn key_is(keys: &[u64], lanes: &[Lane], slot: u32, word: impl Fn(&Lane) -> u64) -> bool {
    let at = slot as usize * lanes.len();
    keys[at..at + lanes.len()].iter().zip(lanes).all(|(v, l)| *v == word(l))
}

/// Length of `mask` as a CIDR prefix over a `bits`-wide field, or 0 if it is not one.
fn prefix_len(mask: u128, bits: u32) -> u32 {
    let n = mask.count_ones();
    if mask == prefix_mask(bits, n) {
        n
    } else {
        0
    }
}

impl Subtable {
    fn new(mask: FlowMask) -> Subtable {
        let words: Vec<u8> = (0..KEY_WORDS).filter(|&w| mask.words[w] != 0).map(|w| w as u8).collect();
        // One stage per non-empty segment (metadata, L2, L3, L4), like OVS's index_maps.
        let mut stage_ends = Vec::new();
        let mut stage_of: Vec<Stage> = Vec::new();
        for (i, &w) in words.iter().enumerate() {
            let s = stage_of_word(w as usize);
            if stage_of.last() != Some(&s) {
                if !stage_of.is_empty() {
                    stage_ends.push(i as u8);
                }
                stage_of.push(s);
            }
        }
        stage_ends.push(words.len() as u8);
        let mut trie_plen = [0u8; N_TRIES];
        let mut stage_tries = vec![0u8; stage_ends.len()];
        for (j, f) in TRIE_FIELDS.iter().enumerate() {
            let def = f.def();
            let plen = prefix_len(mask.get(*f), def.bits as u32);
            trie_plen[j] = plen as u8;
            if plen > 0 {
                let s = stage_of_word(def.word as usize);
                if let Some(i) = stage_of.iter().position(|&x| x == s) {
                    stage_tries[i] |= 1 << j;
                }
            }
        }
        let ports = (mask.words[PORTS_WORD] >> 32) as u32;
        let ports_mask_len = if ports == 0 { 0 } else { 32 - ports.trailing_zeros() } as u8;
        let n_stages = stage_ends.len();
        Subtable {
            mask,
            lanes: words.iter().map(|&w| Lane { word: w as u32, mask: mask.words[w as usize] }).collect(),
            stage_ends: stage_ends.into_boxed_slice(),
            stage_tries: stage_tries.into_boxed_slice(),
            indices: (0..n_stages.saturating_sub(1)).map(|_| HashTable::new()).collect(),
            buckets: HashTable::new(),
            keys: Vec::new(),
            free_slots: Vec::new(),
            others: HashMap::new(),
            trie_plen,
            ports_mask_len,
            ports_trie: PrefixTrie::new(32),
            max_priority: 0,
            max_priority_seq: u64::MAX,
            n_rules: 0,
        }
    }

    #[inline]
    fn masked(key: &FlowKey, l: &Lane) -> u64 {
        key.words[l.word as usize] & l.mask
    }

    /// Stage-prefix hashes and the full hash of a key under this subtable's mask.
    fn hashes(&self, key: &FlowKey, out: &mut Vec<u64>) -> u64 {
        let mut h = SEED;
        let mut start = 0;
        for (i, &end) in self.stage_ends.iter().enumerate() {
            for l in &self.lanes[start..end as usize] {
                h = mix(h, Self::masked(key, l));
            }
            start = end as usize;
            if i + 1 < self.stage_ends.len() {
                out.push(finish(h));
            }
        }
        finish(h)
    }

    #[inline]
    fn full_hash(&self, key: &FlowKey) -> u64 {
        let mut h = SEED;
        for l in self.lanes.iter() {
            h = mix(h, Self::masked(key, l));
        }
        finish(h)
    }

    #[inline]
    fn bucket_for(&self, key: &FlowKey, hash: u64) -> Option<&Bucket> {
        let (keys, lanes) = (&self.keys, &self.lanes);
        self.buckets.find(hash, |b| b.hash == hash && key_is(keys, lanes, b.slot, |l| Self::masked(key, l)))
    }

    /// Whether `mask` is this subtable's, checked against the lanes (the mask's non-zero
    /// words): cheaper than hashing the 224-byte mask, and than comparing it to the subtable's
    /// whole mask (measured on a million-rule load, where it was 6% of the time).
    fn has_mask(&self, mask: &FlowMask) -> bool {
        let mut lanes = self.lanes.iter().peekable();
        for (w, &m) in mask.words.iter().enumerate() {
            let ours = lanes.next_if(|l| l.word as usize == w).map_or(0, |l| l.mask);
            if m != ours {
                return false;
            }
        }
        true
    }

    /// Every rule of bucket `b`, best first.
    fn entries<'a>(&'a self, b: &Bucket) -> impl Iterator<Item = ClsEntry> + 'a {
        bucket_entries(&self.others, b)
    }

    /// A slot holding the masked key of `value` (pre-masked) for a new bucket.
    fn new_slot(&mut self, value: &FlowKey) -> u32 {
        let n = self.lanes.len();
        let words = self.lanes.iter().map(|l| value.words[l.word as usize]);
        match self.free_slots.pop() {
            Some(slot) => {
                let at = slot as usize * n;
                for (k, w) in self.keys[at..at + n].iter_mut().zip(words) {
                    *k = w;
                }
                slot
            }
            None => {
                // A subtable without lanes (the catch-all) has one bucket at most: slot 0.
                let slot = self.keys.len().checked_div(n).unwrap_or(0);
                self.keys.extend(words);
                slot as u32
            }
        }
    }

    fn ports_value(&self, key: &FlowKey) -> u128 {
        ((key.words[PORTS_WORD] & self.mask.words[PORTS_WORD]) >> 32) as u128
    }

    fn refresh_max(&mut self) {
        let best = self.buckets.iter().map(|b| b.best).reduce(|a, b| if b.beats(&a) { b } else { a });
        (self.max_priority, self.max_priority_seq) = best.map_or((0, u64::MAX), |e| (e.priority, e.seq));
    }

    /// What a search does at this subtable, the `si`th, when its best rule so far is `best`
    /// (with that rule's [`Bucket::earlier`]). Subtables are visited in (max priority,
    /// earliest rule) order, so once none here can beat `best`, no later one can either; at
    /// `best`'s own priority, only a subtable holding an earlier rule that overlaps `best`
    /// can hold a better match.
    #[inline]
    fn step(&self, si: u32, best: Option<(ClsEntry, SubtableSet)>) -> Step {
        let Some((b, earlier)) = best else { return Step::Search };
        if self.max_priority > b.priority {
            Step::Search
        } else if self.max_priority < b.priority || self.max_priority_seq >= b.seq {
            Step::Stop
        } else if earlier & ties::subtable_bit(si) != 0 {
            Step::Search
        } else {
            Step::Skip
        }
    }

    /// The hash of the key at `slot`: its bucket's hash.
    fn slot_hash(&self, slot: u32) -> u64 {
        let n = self.lanes.len();
        finish(self.keys[slot as usize * n..][..n].iter().fold(SEED, |h, &w| mix(h, w)))
    }

    /// Sets the tied subtables of the rule of `priority` at `slot` if it is its bucket's best.
    fn set_earlier(&mut self, slot: u32, priority: u16, earlier: SubtableSet) {
        let hash = self.slot_hash(slot);
        if let Some(b) = self.buckets.find_mut(hash, |b| b.slot == slot) {
            if b.best.priority == priority {
                b.earlier = earlier;
            }
        }
    }

    /// Folds the mask bits of `lanes[..end]` into `wc`.
    #[inline]
    fn fold(&self, end: usize, wc: &mut FlowMask) {
        for l in &self.lanes[..end] {
            wc.words[l.word as usize] |= l.mask;
        }
    }
}

/// What a lookup does at a subtable.
enum Step {
    /// Search this subtable: it may hold a better match.
    Search,
    /// Go on to the next subtable without searching this one.
    Skip,
    /// No later subtable can hold a better match.
    Stop,
}

/// The classifier's subtables as [`ties`] reads them.
struct SubtableRules<'a>(&'a [Option<Subtable>]);

impl SubtableRules<'_> {
    /// The subtable and masked key words at `at`.
    fn at(&self, at: Place) -> (&Subtable, &[u64]) {
        let st = self.0[at.subtable as usize].as_ref().expect("a tied rule's subtable lives");
        let n = st.lanes.len();
        (st, &st.keys[at.slot as usize * n..][..n])
    }
}

impl ties::Rules for SubtableRules<'_> {
    /// [`Match::overlaps`] against the rule's match as the subtable keeps it (its mask's lanes
    /// and its key words in the arena), without rebuilding a 448-byte match per test.
    fn overlaps(&self, m: &Match, at: Place) -> bool {
        let (st, key) = self.at(at);
        // Both values are pre-masked: they must agree on the bits both masks match.
        st.lanes.iter().zip(key).all(|(l, &v)| {
            let w = l.word as usize;
            m.value.words[w] & l.mask == v & m.mask.words[w]
        })
    }

    fn rules_at(&self, subtable: u32, priority: u16, out: &mut Vec<(u32, u64)>) {
        let st = self.0[subtable as usize].as_ref().expect("a tied rule's subtable lives");
        for b in st.buckets.iter() {
            out.extend(st.entries(b).filter(|e| e.priority == priority).map(|e| (b.slot, e.seq)));
        }
    }
}

/// Reusable memory for resolving conjunctive matches, so that a caller translating many
/// packets (the slow path keeps one in its `Traversal`) allocates nothing once warm.
#[derive(Clone, Debug, Default)]
pub struct LookupScratch {
    /// Soft matches found, with their subtables.
    soft: Vec<(ClsEntry, u32)>,
    /// Clauses seen per conjunction id at the priority being resolved.
    seen: Vec<(u32, u64)>,
}

/// Per-lookup lazily computed trie results.
type TrieCtx = [Option<TrieMatch>; N_TRIES];

/// A table's rules, searchable by packet.
pub struct Classifier {
    subtables: Vec<Option<Subtable>>,
    /// The conjunctions of the soft rules (none in most tables: then lookups skip the
    /// conjunctive-match logic entirely).
    conjunctions: HashMap<RuleId, Box<[Conjunction]>>,
    /// Live subtables by (max priority desc, its earliest rule asc).
    order: Vec<u32>,
    by_mask: HashMap<FlowMask, u32>,
    /// The subtable the last insertion went to: rules loaded in bulk come in runs of one
    /// mask, and a mask is 224 bytes to hash.
    last_inserted: Option<u32>,
    /// A trie for every field that can have one, kept whichever are used, so that changing
    /// `prefixes` needs no rebuild.
    tries: [PrefixTrie; N_TRIES],
    /// The tries lookups use, and `prefixes.set()`.
    prefixes: PrefixTries,
    prefix_set: u8,
    n_rules: usize,
    scratch: Vec<u64>,
    /// Whether prefix insertions are held back (a bulk load, see [`Classifier::defer_tries`]).
    deferring: bool,
    /// Which equal-priority rules of different subtables overlap.
    ties: Ties,
    /// Rules whose tied subtables an insertion or removal changed (kept for its memory).
    tie_changes: Vec<(Place, SubtableSet)>,
}

impl Default for Classifier {
    fn default() -> Self {
        Self::new()
    }
}

impl Classifier {
    /// An empty classifier.
    pub fn new() -> Classifier {
        Classifier {
            subtables: Vec::new(),
            conjunctions: HashMap::new(),
            order: Vec::new(),
            by_mask: HashMap::new(),
            last_inserted: None,
            tries: TRIE_FIELDS.map(|f| PrefixTrie::new(f.def().bits as u32)),
            prefixes: PrefixTries::default(),
            prefix_set: PrefixTries::default().set(),
            n_rules: 0,
            scratch: Vec::new(),
            deferring: false,
            ties: Ties::default(),
            tie_changes: Vec::new(),
        }
    }

    /// Holds back the prefix tries' insertions until [`Classifier::flush_tries`], which makes
    /// them all at once: for loading many rules. Lookups must wait for the flush; a removal
    /// flushes first.
    pub(crate) fn defer_tries(&mut self) {
        self.deferring = true;
    }

    /// Makes the insertions held back since [`Classifier::defer_tries`] (a trie empty until
    /// then is built bottom-up), and stops holding them back.
    pub(crate) fn flush_tries(&mut self) {
        self.deferring = false;
        self.tries.iter_mut().for_each(PrefixTrie::flush);
        self.subtables.iter_mut().flatten().for_each(|st| st.ports_trie.flush());
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.n_rules
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.n_rules == 0
    }

    /// Sets the prefix tries lookups use (OVS's `prefixes`), rules or not.
    pub fn set_prefix_tries(&mut self, prefixes: PrefixTries) {
        self.prefixes = prefixes;
        self.prefix_set = prefixes.set();
    }

    /// The prefix tries lookups use.
    pub fn prefix_tries(&self) -> PrefixTries {
        self.prefixes
    }

    /// Number of distinct masks (subtables).
    pub fn n_masks(&self) -> usize {
        self.order.len()
    }

    fn resort(&mut self) {
        let subtables = &self.subtables;
        self.order.sort_by(|&a, &b| {
            let (a, b) = (subtables[a as usize].as_ref(), subtables[b as usize].as_ref());
            let (a, b) = (
                a.map_or((0, u64::MAX), |s| (s.max_priority, s.max_priority_seq)),
                b.map_or((0, u64::MAX), |s| (s.max_priority, s.max_priority_seq)),
            );
            b.0.cmp(&a.0).then(a.1.cmp(&b.1))
        });
    }

    /// The live subtable of `mask`, if any.
    fn subtable_of(&self, mask: &FlowMask) -> Option<u32> {
        let last = self
            .last_inserted
            .filter(|&si| self.subtables[si as usize].as_ref().is_some_and(|st| st.has_mask(mask)));
        last.or_else(|| self.by_mask.get(mask).copied())
    }

    /// The rule with exactly this match and priority, if any (OpenFlow's identity of a rule).
    pub fn find_exact(&self, m: &Match, priority: u16) -> Option<RuleId> {
        let si = self.subtable_of(&m.mask)?;
        let st = self.subtables[si as usize].as_ref()?;
        let b = st.bucket_for(&m.value, st.full_hash(&m.value))?;
        st.entries(b).find(|e| e.priority == priority).map(|e| e.rule)
    }

    /// Adds a soft rule: a clause of the `conjunctions` (see [`ClsEntry::soft`]); as
    /// [`Classifier::insert`].
    pub(crate) fn insert_soft(
        &mut self,
        m: &Match,
        entry: ClsEntry,
        conjunctions: &[Conjunction],
    ) -> Result<(), RuleId> {
        debug_assert!(entry.soft && !conjunctions.is_empty());
        self.insert(m, entry)?;
        self.conjunctions.insert(entry.rule, conjunctions.into());
        Ok(())
    }

    /// Adds a rule, unless one with the same match and priority is there: then nothing changes
    /// and that rule is the error (the caller replaces it, as OpenFlow's add does). Finding it
    /// is the probe the insertion makes anyway, so a load of a million distinct rules probes
    /// each bucket once.
    pub fn insert(&mut self, m: &Match, entry: ClsEntry) -> Result<(), RuleId> {
        let si = match self.subtable_of(&m.mask) {
            Some(si) => si,
            None => {
                let si = self.subtables.len() as u32;
                self.subtables.push(Some(Subtable::new(m.mask)));
                self.by_mask.insert(m.mask, si);
                self.order.push(si);
                si
            }
        };
        self.last_inserted = Some(si);
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let st = self.subtables[si as usize].as_mut().expect("live subtable");
        let hash = st.hashes(&m.value, &mut scratch);
        let value = &m.value;
        let (keys, lanes) = (&st.keys, &st.lanes);
        let found = st.buckets.find_mut(hash, |b| {
            b.hash == hash && key_is(keys, lanes, b.slot, |l| value.words[l.word as usize])
        });
        if let Some(b) = &found {
            if let Some(e) = bucket_entries(&st.others, b).find(|e| e.priority == entry.priority) {
                self.scratch = scratch;
                return Err(e.rule);
            }
        }
        for (i, &h) in scratch.iter().enumerate() {
            match st.indices[i].find_mut(h, |e| e.0 == h) {
                Some(e) => e.1 += 1,
                None => {
                    st.indices[i].insert_unique(h, (h, 1), |e| e.0);
                }
            }
        }
        // Where the rule went, and whether it is now its bucket's best (`Some`: in a bucket
        // that was there, whose set it must take; `None`: in a new one, whose set starts empty).
        let (slot, best) = match found {
            Some(b) => {
                let others = st.others.entry(b.slot).or_default();
                let best = entry.beats(&b.best);
                if best {
                    others.insert(0, std::mem::replace(&mut b.best, entry));
                } else {
                    let pos = others.iter().position(|e| entry.beats(e)).unwrap_or(others.len());
                    others.insert(pos, entry);
                }
                (b.slot, best.then_some(true))
            }
            None => {
                let slot = st.new_slot(value);
                st.buckets.insert_unique(hash, Bucket { hash, best: entry, earlier: 0, slot }, |b| b.hash);
                (slot, Some(false))
            }
        };
        let add = match self.deferring {
            true => PrefixTrie::defer,
            false => PrefixTrie::insert,
        };
        if st.ports_mask_len > 0 {
            let value = st.ports_value(&m.value);
            add(&mut st.ports_trie, value, st.ports_mask_len as u32);
        }
        for (j, f) in TRIE_FIELDS.iter().enumerate() {
            let plen = st.trie_plen[j];
            if plen > 0 {
                add(&mut self.tries[j], m.value.get(*f), plen as u32);
            }
        }
        st.n_rules += 1;
        let moved = st.n_rules == 1
            || entry.priority > st.max_priority
            || (entry.priority == st.max_priority && entry.seq < st.max_priority_seq);
        if moved {
            st.max_priority = entry.priority;
            st.max_priority_seq = entry.seq;
            self.resort();
        }
        self.n_rules += 1;
        self.scratch = scratch;
        let at = Place { subtable: si, slot };
        let mut changes = std::mem::take(&mut self.tie_changes);
        self.ties.insert(&SubtableRules(&self.subtables), m, entry.priority, at, entry.seq, &mut changes);
        if let Some(displaced) = best {
            let earlier = self.ties.earlier(entry.priority, at);
            // A new bucket's set is already empty (a million-rule load makes a million).
            if displaced || earlier != 0 {
                changes.push((at, earlier));
            }
        }
        self.apply_tie_changes(entry.priority, &mut changes);
        self.tie_changes = changes;
        Ok(())
    }

    /// Gives the bucket bests among `changes` (rules of `priority`) their new tied subtables.
    fn apply_tie_changes(&mut self, priority: u16, changes: &mut Vec<(Place, SubtableSet)>) {
        for (at, earlier) in changes.drain(..) {
            if let Some(st) = self.subtables[at.subtable as usize].as_mut() {
                st.set_earlier(at.slot, priority, earlier);
            }
        }
    }

    /// Removes a rule previously inserted with this match; returns whether it was there.
    pub fn remove(&mut self, m: &Match, rule: RuleId) -> bool {
        if self.deferring {
            // The tries must hold what is removed; the load goes on deferring.
            self.flush_tries();
            self.deferring = true;
        }
        self.conjunctions.remove(&rule);
        let Some(si) = self.subtable_of(&m.mask) else { return false };
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let st = self.subtables[si as usize].as_mut().expect("live subtable");
        let hash = st.hashes(&m.value, &mut scratch);
        let value = &m.value;
        let (keys, lanes) = (&st.keys, &st.lanes);
        let Ok(mut occ) = st.buckets.find_entry(hash, |b| {
            b.hash == hash && key_is(keys, lanes, b.slot, |l| value.words[l.word as usize])
        }) else {
            self.scratch = scratch;
            return false;
        };
        let b = occ.get_mut();
        let slot = b.slot;
        // The removed rule's priority, and its successor's if it was the best.
        let (priority, promoted) = if b.best.rule == rule {
            let priority = b.best.priority;
            match st.others.get_mut(&slot) {
                Some(others) => {
                    b.best = others.remove(0);
                    if others.is_empty() {
                        st.others.remove(&slot);
                    }
                    (priority, Some(b.best.priority))
                }
                None => {
                    occ.remove();
                    st.free_slots.push(slot);
                    (priority, None)
                }
            }
        } else {
            let others = st.others.get_mut(&slot);
            let Some((others, pos)) =
                others.and_then(|o| o.iter().position(|e| e.rule == rule).map(|p| (o, p)))
            else {
                self.scratch = scratch;
                return false;
            };
            let priority = others.remove(pos).priority;
            if others.is_empty() {
                st.others.remove(&slot);
            }
            (priority, None)
        };
        for (i, &h) in scratch.iter().enumerate() {
            if let Ok(mut e) = st.indices[i].find_entry(h, |e| e.0 == h) {
                e.get_mut().1 -= 1;
                if e.get().1 == 0 {
                    e.remove();
                }
            }
        }
        if st.ports_mask_len > 0 {
            st.ports_trie.remove(st.ports_value(&m.value), st.ports_mask_len as u32);
        }
        for (j, f) in TRIE_FIELDS.iter().enumerate() {
            if st.trie_plen[j] > 0 {
                self.tries[j].remove(m.value.get(*f), st.trie_plen[j] as u32);
            }
        }
        st.n_rules -= 1;
        self.n_rules -= 1;
        if st.n_rules == 0 {
            self.subtables[si as usize] = None;
            self.by_mask.remove(&m.mask);
            self.last_inserted = None;
            self.order.retain(|&x| x != si);
        } else {
            st.refresh_max();
            self.resort();
        }
        self.scratch = scratch;
        let at = Place { subtable: si, slot };
        let mut changes = std::mem::take(&mut self.tie_changes);
        self.ties.remove(&SubtableRules(&self.subtables), m, priority, at, &mut changes);
        self.apply_tie_changes(priority, &mut changes);
        if let Some(p) = promoted {
            changes.push((at, self.ties.earlier(p, at)));
            self.apply_tie_changes(p, &mut changes);
        }
        self.tie_changes = changes;
        true
    }

    /// Highest-priority rule matching `key`, without tracking wildcards (the fast path).
    pub fn lookup(&self, key: &FlowKey) -> Option<ClsEntry> {
        if !self.conjunctions.is_empty() {
            let mut unused = FlowMask::CATCHALL;
            return self.lookup_wc(key, &mut unused);
        }
        let mut best: Option<(ClsEntry, SubtableSet)> = None;
        for &si in &self.order {
            let st = self.subtables[si as usize].as_ref().expect("ordered subtables are live");
            match st.step(si, best) {
                Step::Stop => break,
                Step::Skip => continue,
                Step::Search => {}
            }
            let hash = st.full_hash(key);
            if let Some(bucket) = st.bucket_for(key, hash) {
                let e = bucket.best;
                if best.is_none_or(|(b, _)| e.beats(&b)) {
                    best = Some((e, bucket.earlier));
                }
            }
        }
        best.map(|(e, _)| e)
    }

    /// [`lookup`](Self::lookup) for a batch of packets: `out[i]` receives the answer for
    /// `keys[i]`. Visiting each subtable for the whole batch lets the CPU overlap the hash
    /// probes of independent packets, which a packet-at-a-time loop serialises.
    pub fn lookup_batch(&self, keys: &[FlowKey], out: &mut [Option<ClsEntry>]) {
        const CHUNK: usize = 32;
        assert_eq!(keys.len(), out.len(), "one answer slot per packet");
        if !self.conjunctions.is_empty() {
            for (k, o) in keys.iter().zip(out.iter_mut()) {
                *o = self.lookup(k);
            }
            return;
        }
        let mut hashes = [None::<u64>; CHUNK];
        let mut best = [None::<(ClsEntry, SubtableSet)>; CHUNK];
        for (keys, out) in keys.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
            best.fill(None);
            for &si in &self.order {
                let st = self.subtables[si as usize].as_ref().expect("ordered subtables are live");
                for (i, k) in keys.iter().enumerate() {
                    hashes[i] = matches!(st.step(si, best[i]), Step::Search).then(|| st.full_hash(k));
                }
                for (i, k) in keys.iter().enumerate() {
                    let Some(h) = hashes[i] else { continue };
                    if let Some(b) = st.bucket_for(k, h) {
                        if best[i].is_none_or(|(x, _)| b.best.beats(&x)) {
                            best[i] = Some((b.best, b.earlier));
                        }
                    }
                }
            }
            for (o, b) in out.iter_mut().zip(&best) {
                *o = b.map(|(e, _)| e);
            }
        }
    }

    /// Highest-priority rule matching `key`; ORs into `wc` every bit the answer depended on,
    /// exactly as OVS's `classifier_lookup` does, so that every packet agreeing with `key` on
    /// `wc` gets the same answer.
    pub fn lookup_wc(&self, key: &FlowKey, wc: &mut FlowMask) -> Option<ClsEntry> {
        if self.conjunctions.is_empty() {
            self.hard_lookup_wc(key, wc)
        } else {
            self.conjunctive_lookup_wc(key, wc, &mut LookupScratch::default())
        }
    }

    /// [`lookup_wc`](Self::lookup_wc) with memory the caller keeps between lookups.
    pub fn lookup_wc_in(
        &self,
        key: &FlowKey,
        wc: &mut FlowMask,
        scratch: &mut LookupScratch,
    ) -> Option<ClsEntry> {
        if self.conjunctions.is_empty() {
            self.hard_lookup_wc(key, wc)
        } else {
            self.conjunctive_lookup_wc(key, wc, scratch)
        }
    }

    /// The best rule that is not a clause of a conjunction: soft rules are skipped, as OVS's
    /// lookup with conjunctive matches disallowed skips them (the second lookup, on `conj_id`).
    fn hard_lookup_wc(&self, key: &FlowKey, wc: &mut FlowMask) -> Option<ClsEntry> {
        let mut ctx: TrieCtx = [None; N_TRIES];
        let mut best: Option<(ClsEntry, SubtableSet)> = None;
        for &si in &self.order {
            let st = self.subtables[si as usize].as_ref().expect("ordered subtables are live");
            match st.step(si, best) {
                Step::Stop => break,
                Step::Skip => continue,
                Step::Search => {}
            }
            if let Some((e, earlier)) = self.find_wc(st, key, &mut ctx, wc) {
                if !e.soft && best.is_none_or(|(b, _)| e.beats(&b)) {
                    best = Some((e, earlier));
                }
            }
        }
        best.map(|(e, _)| e)
    }

    /// OVS's `classifier_lookup__` with conjunctive matches. Each subtable's best match is a
    /// hard match or a soft one (a clause). Soft matches above the best hard match are
    /// resolved from the highest priority down: if, among those at that priority, every
    /// clause of some conjunction matched, the rule matching `conj_id=id` (looked up again
    /// with `conj_id` set, soft rules skipped) is the answer; otherwise each gives way to the
    /// next rule with an identical match, and lower priorities are tried. Every bit examined,
    /// in both lookups, goes into `wc`, as in OVS.
    fn conjunctive_lookup_wc(
        &self,
        key: &FlowKey,
        wc: &mut FlowMask,
        scratch: &mut LookupScratch,
    ) -> Option<ClsEntry> {
        let mut ctx: TrieCtx = [None; N_TRIES];
        let mut hard: Option<ClsEntry> = None;
        let LookupScratch { soft, seen } = scratch;
        soft.clear();
        for &si in &self.order {
            let st = self.subtables[si as usize].as_ref().expect("ordered subtables are live");
            // Soft matches make the tied subtables of a hard one too narrow a bound: every
            // subtable that may hold an earlier rule is searched.
            if matches!(st.step(si, hard.map(|h| (h, EVERY_SUBTABLE))), Step::Stop) {
                break;
            }
            let Some((e, _)) = self.find_wc(st, key, &mut ctx, wc) else { continue };
            if e.soft {
                if hard.is_none_or(|h| e.priority > h.priority) {
                    soft.push((e, si));
                }
            } else if hard.is_none_or(|h| e.beats(&h)) {
                hard = Some(e);
            }
        }
        loop {
            soft.retain(|(e, _)| hard.is_none_or(|h| e.priority > h.priority));
            let Some(top) = soft.iter().map(|(e, _)| e.priority).max() else { return hard };
            let at_top = soft.iter().filter(|(e, _)| e.priority == top).count();
            // Clauses seen per conjunction id: bit k set for clause k, bits past n preset.
            seen.clear();
            for (e, _) in soft.iter().filter(|(e, _)| e.priority == top) {
                for c in self.conjunctions.get(&e.rule).map_or(&[][..], |c| &c[..]) {
                    if c.n_clauses as usize > at_top {
                        continue;
                    }
                    let slot = match seen.iter().position(|(id, _)| *id == c.id) {
                        Some(i) => i,
                        None => {
                            seen.push((c.id, u64::MAX.checked_shl(c.n_clauses as u32).unwrap_or(0)));
                            seen.len() - 1
                        }
                    };
                    seen[slot].1 |= 1 << c.clause;
                    if seen[slot].1 == u64::MAX {
                        let mut with_id = *key;
                        with_id.set(id::CONJ_ID, c.id as u128);
                        if let Some(r) = self.hard_lookup_wc(&with_id, wc) {
                            return Some(r);
                        }
                        // As OVS: this rule's later conjunctions are not counted.
                        break;
                    }
                }
            }
            // No conjunction completed at this priority: each soft match there gives way to
            // the next rule with the same match, which may be hard.
            for (e, si) in soft.iter_mut().filter(|(e, _)| e.priority == top) {
                let st = self.subtables[*si as usize].as_ref().expect("live subtable");
                let bucket = st.bucket_for(key, st.full_hash(key)).expect("a soft match's bucket");
                let next = st.entries(bucket).skip_while(|x| x.rule != e.rule).nth(1);
                match next {
                    Some(next) if next.soft => *e = next,
                    Some(next) => {
                        // Strictly higher only, as OVS: at equal priority the hard match found
                        // first stays.
                        if hard.is_none_or(|h| next.priority > h.priority) {
                            hard = Some(next);
                        }
                        e.priority = 0;
                        e.soft = false;
                    }
                    None => {
                        e.priority = 0;
                        e.soft = false;
                    }
                }
            }
            soft.retain(|(e, _)| e.soft);
        }
    }

    /// OVS `check_tries`: can a prefix trie prove this subtable cannot match, cheaply?
    fn check_tries(
        &self,
        st: &Subtable,
        stage: usize,
        key: &FlowKey,
        ctx: &mut TrieCtx,
        wc: &mut FlowMask,
    ) -> bool {
        let applicable = st.stage_tries[stage] & self.prefix_set;
        if applicable == 0 {
            return false;
        }
        // In the order configured: the first trie that proves a miss decides the wildcards.
        for &j in self.prefixes.order() {
            let j = j as usize;
            if applicable & 1 << j == 0 {
                continue;
            }
            let field = TRIE_FIELDS[j];
            let def = field.def();
            let m = *ctx[j].get_or_insert_with(|| {
                if key.prereq_ok(def.prereq) {
                    self.tries[j].lookup(key.get(field))
                } else {
                    TrieMatch::ALL
                }
            });
            let plen = st.trie_plen[j] as u32;
            if !m.has_plen(plen) {
                let bits = def.bits as u32;
                // Never un-wildcard more than this subtable would have on its own.
                if bits <= 64 {
                    // One key word: mask the leading `maskbits` bits of the field in place.
                    let ones = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
                    let lead = if m.maskbits == 0 { 0 } else { ones & !(ones >> m.maskbits) };
                    let word = &mut wc.words[def.word as usize];
                    let want = lead << def.shift;
                    if m.maskbits <= plen {
                        *word |= want;
                        return true;
                    }
                    if *word & want == want {
                        return true;
                    }
                } else {
                    let lead = prefix_mask(bits, m.maskbits);
                    if m.maskbits <= plen {
                        wc.unwildcard(field, lead);
                        return true;
                    }
                    if wc.get(field) & lead == lead {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// OVS `find_match_wc` for one subtable: its best matching rule, with the rule's tied
    /// subtables.
    fn find_wc(
        &self,
        st: &Subtable,
        key: &FlowKey,
        ctx: &mut TrieCtx,
        wc: &mut FlowMask,
    ) -> Option<(ClsEntry, SubtableSet)> {
        debug_assert!(!self.deferring, "a lookup before the deferred tries were flushed");
        let mut h = SEED;
        let mut start = 0usize;
        let last = st.stage_ends.len() - 1;
        for (i, index) in st.indices.iter().enumerate() {
            if st.stage_tries[i] & self.prefix_set != 0 && self.check_tries(st, i, key, ctx, wc) {
                st.fold(start, wc);
                return None;
            }
            let end = st.stage_ends[i] as usize;
            for l in &st.lanes[start..end] {
                h = mix(h, Subtable::masked(key, l));
            }
            start = end;
            let sh = finish(h);
            if index.find(sh, |e| e.0 == sh).is_none() {
                st.fold(end, wc);
                return None;
            }
        }
        if st.stage_tries[last] & self.prefix_set != 0 && self.check_tries(st, last, key, ctx, wc) {
            st.fold(start, wc);
            return None;
        }
        for l in &st.lanes[start..] {
            h = mix(h, Subtable::masked(key, l));
        }
        match st.bucket_for(key, finish(h)) {
            Some(b) => {
                st.fold(st.lanes.len(), wc);
                Some((b.best, b.earlier))
            }
            None if st.ports_mask_len > 0 => {
                // Un-wildcard only the leading port bits that tell this packet apart.
                let mbits = st.ports_trie.lookup(st.ports_value(key)).maskbits;
                let ports_mask = (st.mask.words[PORTS_WORD] >> 32) as u32;
                let keep = ports_mask & (prefix_mask(32, mbits) as u32);
                wc.words[PORTS_WORD] |= (keep as u64) << 32;
                st.fold(start, wc);
                None
            }
            None => {
                st.fold(st.lanes.len(), wc);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::parser::{parse_flow_spec, SpecKind};

    fn cls(lines: &[&str]) -> Classifier {
        let mut c = Classifier::new();
        for (i, l) in lines.iter().enumerate() {
            let r = parse_flow_spec(l, SpecKind::Add).unwrap().rule;
            let entry = ClsEntry { rule: i as u32, priority: r.priority, seq: i as u64, soft: false };
            c.insert(&r.matcher(), entry).expect("distinct rules");
        }
        c
    }

    fn pkt(s: &str) -> FlowKey {
        crate::openflow::parser::parse_packet(s).unwrap()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 2_000, failure_persistence: None, ..Default::default()
        })]

        /// Equal-priority rules of many masks overlapping one another, added (with sequence
        /// numbers not in insertion order) and removed at random, with the tie sets kept or
        /// given up at a random size: every packet of the field space gets the model's answer
        /// (highest priority, then lowest sequence number) from every lookup, and every packet
        /// agreeing with it on the wildcards gets the same answer.
        #[test]
        fn equal_priority_overlaps_keep_the_earliest_rule(
            ops in proptest::collection::vec((0u32..16, 0u32..16, 0u16..3, 0u64..1000, 0u8..4), 1..80),
            limit in proptest::prop_oneof![1usize..12, proptest::strategy::Just(ties::TRACK_LIMIT)],
        ) {
            let fields = [id::IN_PORT, id::NW_SRC, id::TP_DST, id::NW_PROTO];
            let values = [[1u128, 2], [0x0a00_0001, 0x0a00_0002], [80, 443], [6, 17]];
            let packet = |bits: u32| {
                let mut k = FlowKey::default();
                for (i, f) in fields.iter().enumerate() {
                    k.set(*f, values[i][(bits >> i) as usize & 1]);
                }
                k
            };
            let rule = |subset: u32, bits: u32| {
                let mut mask = FlowMask::CATCHALL;
                for (i, f) in fields.iter().enumerate() {
                    if subset >> i & 1 == 1 {
                        mask.set(*f, f.full_mask());
                    }
                }
                Match::new(packet(bits), mask)
            };
            let mut c = Classifier::new();
            c.ties.set_limit(limit);
            // (subset, masked bits, priority) -> (rule, seq)
            let mut model: std::collections::BTreeMap<(u32, u32, u16), (u32, u64)> = Default::default();
            for (n, &(subset, bits, priority, seq, op)) in ops.iter().enumerate() {
                let key = (subset, bits & subset, priority);
                let m = rule(subset, bits);
                if op == 0 {
                    if let Some((r, _)) = model.remove(&key) {
                        proptest::prop_assert!(c.remove(&m, r));
                    }
                } else if let std::collections::btree_map::Entry::Vacant(slot) = model.entry(key) {
                    // Distinct sequence numbers, in an order unrelated to the insertions'.
                    let seq = seq * 100 + n as u64;
                    let entry = ClsEntry { rule: n as u32, priority, seq, soft: false };
                    proptest::prop_assert_eq!(c.insert(&m, entry), Ok(()));
                    slot.insert((n as u32, seq));
                }
            }
            let answer = |bits: u32| {
                model
                    .iter()
                    .filter(|((subset, vbits, _), _)| bits & subset == *vbits)
                    .max_by_key(|((_, _, priority), (_, seq))| (*priority, std::cmp::Reverse(*seq)))
                    .map(|(_, (r, _))| *r)
            };
            let keys: Vec<FlowKey> = (0..16).map(packet).collect();
            let mut batch = vec![None; keys.len()];
            c.lookup_batch(&keys, &mut batch);
            for bits in 0..16u32 {
                let want = answer(bits);
                proptest::prop_assert_eq!(c.lookup(&keys[bits as usize]).map(|e| e.rule), want);
                proptest::prop_assert_eq!(batch[bits as usize].map(|e| e.rule), want);
                let mut wc = FlowMask::CATCHALL;
                proptest::prop_assert_eq!(c.lookup_wc(&keys[bits as usize], &mut wc).map(|e| e.rule), want);
                for other in (0..16u32).filter(|&o| keys[o as usize].matches(&keys[bits as usize].masked(&wc), &wc)) {
                    proptest::prop_assert_eq!(answer(other), want, "packet {} shares the wildcards of {}", other, bits);
                }
            }
        }

        /// Buckets keep their best rule apart from the others and their keys in a shared
        /// arena: through any adds and removals of rules sharing three matches at four
        /// priorities (and with a bulk load's deferred tries), every match's lookup is the
        /// model's best and every (match, priority) finds its rule.
        #[test]
        fn buckets_keep_every_rule_of_their_match(
            ops in proptest::collection::vec((0u8..3, 0u16..4, proptest::bool::ANY), 1..60),
            deferred in proptest::bool::ANY,
        ) {
            let matches: Vec<Match> = (0..3)
                .map(|d| parse_flow_spec(&format!("ip,nw_dst=10.0.0.{d} actions=drop"), SpecKind::Add).unwrap().rule.matcher())
                .collect();
            let mut c = Classifier::new();
            if deferred {
                c.defer_tries();
            }
            // (match, priority) -> (rule, seq)
            let mut model = std::collections::BTreeMap::new();
            for (seq, &(m, priority, add)) in ops.iter().enumerate() {
                let key = (m, priority);
                if add {
                    let entry = ClsEntry { rule: seq as u32, priority, seq: seq as u64, soft: false };
                    let inserted = c.insert(&matches[m as usize], entry);
                    match model.get(&key) {
                        // The rule there is the answer, and nothing changed.
                        Some(&(there, _)) => proptest::prop_assert_eq!(inserted, Err(there)),
                        None => {
                            proptest::prop_assert_eq!(inserted, Ok(()));
                            model.insert(key, (seq as u32, seq as u64));
                        }
                    }
                } else {
                    if let Some((rule, _)) = model.remove(&key) {
                        proptest::prop_assert!(c.remove(&matches[m as usize], rule));
                    }
                }
            }
            if deferred {
                c.flush_tries();
            }
            for m in 0..3u8 {
                let want = model
                    .iter()
                    .filter(|((mm, _), _)| *mm == m)
                    .max_by_key(|((_, priority), (_, seq))| (*priority, std::cmp::Reverse(*seq)))
                    .map(|(_, (rule, _))| *rule);
                let packet = pkt(&format!("ip,nw_dst=10.0.0.{m}"));
                proptest::prop_assert_eq!(c.lookup(&packet).map(|e| e.rule), want);
                let mut wc = FlowMask::CATCHALL;
                proptest::prop_assert_eq!(c.lookup_wc(&packet, &mut wc).map(|e| e.rule), want);
                for priority in 0..4 {
                    let found = c.find_exact(&matches[m as usize], priority);
                    proptest::prop_assert_eq!(found, model.get(&(m, priority)).map(|r| r.0));
                }
            }
            proptest::prop_assert_eq!(c.len(), model.len());
        }
    }

    #[test]
    fn priority_then_first_added() {
        let c = cls(&[
            "priority=5,ip actions=drop",
            "priority=9,ip,nw_src=10.0.0.0/8 actions=drop",
            "priority=9,ip,nw_dst=1.1.1.1 actions=drop",
        ]);
        let p = pkt("ip,nw_src=10.1.1.1,nw_dst=1.1.1.1");
        assert_eq!(c.lookup(&p).unwrap().rule, 1);
        let mut wc = FlowMask::CATCHALL;
        assert_eq!(c.lookup_wc(&p, &mut wc).unwrap().rule, 1);
        assert_eq!(c.lookup(&pkt("ip,nw_src=11.1.1.1")).unwrap().rule, 0);
    }

    #[test]
    fn trie_keeps_address_wildcards_narrow() {
        let c = cls(&["priority=10,ip,nw_dst=10.0.0.0/8 actions=drop", "priority=1,ip actions=drop"]);
        let mut wc = FlowMask::CATCHALL;
        let e = c.lookup_wc(&pkt("ip,nw_dst=192.168.1.1"), &mut wc).unwrap();
        assert_eq!(e.rule, 1);
        assert_eq!(wc.get(id::NW_DST), 0x8000_0000, "one bit tells 192/.. from 10/8");
    }

    /// Open vSwitch's default keeps tries for IPv4 addresses only; `prefixes` turns them off,
    /// adds IPv6 ones, and orders them (the first that rules a subtable out sets the bits).
    #[test]
    fn prefixes_choose_the_tries_lookups_use() {
        let wc_of = |lines: &[&str], prefixes: &str, packet: &str| {
            let mut c = cls(lines);
            c.set_prefix_tries(prefixes.parse().unwrap());
            let mut wc = FlowMask::CATCHALL;
            let e = c.lookup_wc(&pkt(packet), &mut wc).map(|e| e.rule);
            (e, wc)
        };
        let v4 = ["priority=10,ip,nw_dst=10.0.0.0/8 actions=drop", "priority=1,ip actions=drop"];
        let p4 = "ip,nw_dst=192.168.1.1";
        let (e, wc) = wc_of(&v4, "none", p4);
        assert_eq!((e, wc.get(id::NW_DST)), (Some(1), 0xff00_0000), "no trie: the subtable's /8");
        let (e, wc) = wc_of(&v4, "ip_src", p4);
        assert_eq!((e, wc.get(id::NW_DST)), (Some(1), 0xff00_0000), "no trie on nw_dst");
        let v6 = ["priority=10,ipv6,ipv6_dst=2001:db8::/32 actions=drop", "priority=1,ipv6 actions=drop"];
        let p6 = "ipv6,ipv6_dst=8001::1";
        let (e, wc) = wc_of(&v6, "ip_dst,ip_src", p6);
        assert_eq!((e, wc.get(id::IPV6_DST)), (Some(1), prefix_mask(128, 32)), "OVS's default: no IPv6 trie");
        let (e, wc) = wc_of(&v6, "ipv6_dst", p6);
        assert_eq!(
            (e, wc.get(id::IPV6_DST)),
            (Some(1), prefix_mask(128, 1)),
            "one bit rules 2001:db8::/32 out"
        );
        // Both addresses rule the subtable out: the trie checked first decides which bits.
        let both =
            ["priority=10,ip,nw_src=10.0.0.0/8,nw_dst=10.0.0.0/8 actions=drop", "priority=1,ip actions=drop"];
        let p = "ip,nw_src=192.0.0.1,nw_dst=192.0.0.1";
        let (_, dst_first) = wc_of(&both, "ip_dst,ip_src", p);
        assert_eq!((dst_first.get(id::NW_DST), dst_first.get(id::NW_SRC)), (0x8000_0000, 0));
        let (_, src_first) = wc_of(&both, "ip_src,ip_dst", p);
        assert_eq!((src_first.get(id::NW_DST), src_first.get(id::NW_SRC)), (0, 0x8000_0000));
    }

    #[test]
    fn ports_trie_unwildcards_leading_port_bits() {
        let c = cls(&["priority=10,tcp,tp_dst=80 actions=drop", "priority=1,ip actions=drop"]);
        let mut wc = FlowMask::CATCHALL;
        c.lookup_wc(&pkt("tcp,tp_dst=0x8000"), &mut wc).unwrap();
        assert_eq!(wc.get(id::TP_DST), 0x8000);
    }

    #[test]
    fn staged_miss_unwildcards_only_examined_stages() {
        let c = cls(&["priority=10,in_port=1,tcp,tp_dst=80 actions=drop"]);
        let mut wc = FlowMask::CATCHALL;
        assert!(c.lookup_wc(&pkt("in_port=2,tcp,tp_dst=80"), &mut wc).is_none());
        assert_eq!(wc.get(id::IN_PORT), 0xffff_ffff);
        assert_eq!(wc.get(id::DL_TYPE), 0);
        assert_eq!(wc.get(id::TP_DST), 0);
    }

    #[test]
    fn remove_restores_lookups() {
        let mut c = cls(&["priority=10,ip,nw_dst=10.0.0.0/8 actions=drop", "priority=1,ip actions=drop"]);
        let r = parse_flow_spec("priority=10,ip,nw_dst=10.0.0.0/8 actions=drop", SpecKind::Add).unwrap().rule;
        assert_eq!(c.find_exact(&r.matcher(), 10), Some(0));
        assert!(c.remove(&r.matcher(), 0));
        assert_eq!(c.lookup(&pkt("ip,nw_dst=10.1.1.1")).unwrap().rule, 1);
        assert_eq!(c.n_masks(), 1);
        let mut wc = FlowMask::CATCHALL;
        c.lookup_wc(&pkt("ip,nw_dst=10.1.1.1"), &mut wc);
        assert_eq!(wc.get(id::NW_DST), 0);
    }
}
