//! Tuple space search over wildcard entries: one hash table per distinct mask.
//!
//! The building block of every wildcard cache in hyflow: the software megaflow cache (OVS's
//! dpcls) and the NIC's ternary stages. Entries carry per-entry packet/byte counters and
//! timestamps, because both OVS's revalidator and a NIC's aging need them.
//!
//! Each entry also has an exact **tag** and a **priority**, the general form of an RMT table
//! entry: Gigaflow's stages match the table tag exactly and prefer the longest sub-traversal.
//! Megaflow caches use tag 0 and one priority for all (their entries never overlap). A lookup
//! returns the highest-priority entry whose tag and masked fields match; among equal
//! priorities, the first found in subtable order.
//!
//! A subtable holds the entries of one (mask, tag) pair, so a lookup only visits subtables
//! of its tag: a Gigaflow stage holds entries for many pipeline points, and a packet at one
//! point must not pay for the masks of the others. The mask limit of a NIC stage still counts
//! distinct masks, whatever their tags. A tag's subtables are searched in order of their
//! highest priority, then of recent hits (re-ranked every [`RANK_INTERVAL`] lookups, as dpcls
//! does with its pvector), and the search stops at the first subtable that cannot hold a
//! better entry — for megaflows, at the first hit.

use hashbrown::{HashMap, HashTable};

use crate::openflow::Match;
use crate::packet::hash::hash_masked;
use crate::packet::{FlowKey, FlowMask, KEY_WORDS};

/// Index of an entry; stable while the entry lives, reused after it is removed.
pub type EntryId = u32;

/// Lookups between re-rankings of the subtables.
pub const RANK_INTERVAL: u32 = 4096;

/// Per-entry counters, as NIC tables and datapath flows keep them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntryStats {
    /// Packets that hit the entry.
    pub packets: u64,
    /// Bytes of those packets.
    pub bytes: u64,
    /// Time of the last hit (or of the install), ns.
    pub last_hit_ns: u64,
}

/// Counters of a wildcard cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowTableStats {
    /// Lookups that hit.
    pub hits: u64,
    /// Lookups that missed.
    pub misses: u64,
    /// Entries installed.
    pub installs: u64,
    /// Installs refused for lack of room (entries or masks).
    pub refused: u64,
    /// Of those, refused because the mask limit was reached (NIC stages).
    pub refused_masks: u64,
    /// Entries removed after `max-idle` without a hit.
    pub expired: u64,
    /// Entries removed by revalidation after rule updates.
    pub revalidated: u64,
    /// Most entries held at once.
    pub peak: usize,
}

/// One cached wildcard entry. Laid out so that a lookup's tag check and the key's first
/// words (always matched) share a cache line.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct Entry<T> {
    /// Exact tag it applies to.
    pub tag: u32,
    /// Rank among matching entries (higher wins).
    pub priority: u32,
    subtable: u32,
    hash: u64,
    /// Match value, pre-masked by its subtable's mask.
    pub value: FlowKey,
    /// Counters.
    pub stats: EntryStats,
    /// What the owner stores with the entry.
    pub data: T,
}

struct Subtable {
    mask: FlowMask,
    tag: u32,
    /// Word indices where `mask` has bits: all that hashing and comparing read.
    words: Vec<u8>,
    map: HashTable<EntryId>,
    hits: u64,
    /// No entry has a higher priority (an upper bound after removals until the next ranking).
    max_priority: u32,
    /// Entries at `max_priority`; 0 means the bound may be loose.
    at_max: u32,
}

/// A set of wildcard entries searched by tuple space search.
pub struct TupleSpace<T> {
    subtables: Vec<Subtable>,
    /// Subtable of each (mask, tag) ever used.
    index: HashMap<(FlowMask, u32), u32>,
    /// Per tag (tags are small dense numbers), its non-empty subtables in search order.
    orders: Vec<Vec<u32>>,
    /// Non-empty subtables per distinct mask.
    mask_use: HashMap<FlowMask, u32>,
    entries: Vec<Option<Entry<T>>>,
    free: Vec<EntryId>,
    len: usize,
    until_rank: u32,
}

impl<T> Default for TupleSpace<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> TupleSpace<T> {
    /// An empty space.
    pub fn new() -> TupleSpace<T> {
        TupleSpace {
            subtables: Vec::new(),
            index: HashMap::new(),
            orders: Vec::new(),
            mask_use: HashMap::new(),
            entries: Vec::new(),
            free: Vec::new(),
            len: 0,
            until_rank: RANK_INTERVAL,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of distinct masks among the entries.
    pub fn n_masks(&self) -> usize {
        self.mask_use.len()
    }

    /// Whether some entry already uses `mask`.
    pub fn has_mask(&self, mask: &FlowMask) -> bool {
        self.mask_use.contains_key(mask)
    }

    fn subtable_for(&mut self, mask: &FlowMask, tag: u32) -> u32 {
        if let Some(&i) = self.index.get(&(*mask, tag)) {
            return i;
        }
        let words = (0..KEY_WORDS as u8).filter(|&i| mask.words[i as usize] != 0).collect();
        self.index.insert((*mask, tag), self.subtables.len() as u32);
        self.subtables.push(Subtable {
            mask: *mask,
            tag,
            words,
            map: HashTable::new(),
            hits: 0,
            max_priority: 0,
            at_max: 0,
        });
        (self.subtables.len() - 1) as u32
    }

    /// The entry with exactly this match and tag, if any.
    pub fn find(&self, m: &Match, tag: u32) -> Option<EntryId> {
        let st = &self.subtables[*self.index.get(&(m.mask, tag))? as usize];
        let h = hash_masked(&m.value, &st.mask, &st.words);
        st.map.find(h, |&id| self.entry(id).is_some_and(|e| e.value == m.value)).copied()
    }

    /// Adds an entry (the caller has checked capacity and that match and tag are new).
    pub fn insert(&mut self, m: &Match, tag: u32, priority: u32, data: T, now_ns: u64) -> EntryId {
        let sti = self.subtable_for(&m.mask, tag);
        let st = &mut self.subtables[sti as usize];
        let hash = hash_masked(&m.value, &st.mask, &st.words);
        let was_empty = st.map.is_empty();
        let raised = was_empty || priority > st.max_priority;
        if raised {
            st.max_priority = priority;
            st.at_max = 1;
        } else if priority == st.max_priority {
            st.at_max += 1;
        }
        let entry = Entry {
            value: m.value,
            stats: EntryStats { last_hit_ns: now_ns, ..EntryStats::default() },
            data,
            tag,
            priority,
            subtable: sti,
            hash,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.entries[id as usize] = Some(entry);
                id
            }
            None => {
                self.entries.push(Some(entry));
                (self.entries.len() - 1) as EntryId
            }
        };
        let entries = &self.entries;
        let st = &mut self.subtables[sti as usize];
        st.map.insert_unique(hash, id, |&i| entries[i as usize].as_ref().map_or(0, |e| e.hash));
        if was_empty {
            *self.mask_use.entry(m.mask).or_insert(0) += 1;
            if self.orders.len() <= tag as usize {
                self.orders.resize_with(tag as usize + 1, Vec::new);
            }
            self.orders[tag as usize].push(sti);
        }
        if raised {
            self.sort_order(tag);
        }
        self.len += 1;
        id
    }

    /// Removes an entry, returning it.
    pub fn remove(&mut self, id: EntryId) -> Option<Entry<T>> {
        let e = self.entries.get_mut(id as usize)?.take()?;
        let st = &mut self.subtables[e.subtable as usize];
        if let Ok(slot) = st.map.find_entry(e.hash, |&i| i == id) {
            slot.remove();
        }
        if e.priority == st.max_priority {
            st.at_max = st.at_max.saturating_sub(1);
        }
        if st.map.is_empty() {
            self.orders[st.tag as usize].retain(|&s| s != e.subtable);
            if let Some(n) = self.mask_use.get_mut(&st.mask) {
                *n -= 1;
                if *n == 0 {
                    self.mask_use.remove(&st.mask);
                }
            }
        }
        self.free.push(id);
        self.len -= 1;
        Some(e)
    }

    /// The entry with this id.
    #[inline]
    pub fn entry(&self, id: EntryId) -> Option<&Entry<T>> {
        self.entries.get(id as usize)?.as_ref()
    }

    /// The entry with this id, mutably.
    #[inline]
    pub fn entry_mut(&mut self, id: EntryId) -> Option<&mut Entry<T>> {
        self.entries.get_mut(id as usize)?.as_mut()
    }

    /// The match of an entry.
    pub fn matcher(&self, id: EntryId) -> Option<Match> {
        let e = self.entry(id)?;
        Some(Match { value: e.value, mask: self.subtables[e.subtable as usize].mask })
    }

    /// Ids of all entries, in id order.
    pub fn ids(&self) -> impl Iterator<Item = EntryId> + '_ {
        self.entries.iter().enumerate().filter(|(_, e)| e.is_some()).map(|(i, _)| i as EntryId)
    }

    /// The highest-priority entry with tag `tag` matching `key` (see the module notes for
    /// ties). Counts a hit of `bytes` at `now_ns` on the entry found.
    #[inline]
    pub fn lookup(&mut self, key: &FlowKey, tag: u32, bytes: u64, now_ns: u64) -> Option<EntryId> {
        self.until_rank -= 1;
        if self.until_rank == 0 {
            self.rank();
        }
        let (id, sti) = self.best(key, tag)?;
        self.subtables[sti as usize].hits += 1;
        let e = self.entries[id as usize].as_mut().expect("indexed entries live");
        e.stats.packets += 1;
        e.stats.bytes += bytes;
        e.stats.last_hit_ns = now_ns;
        Some(id)
    }

    /// What [`TupleSpace::lookup`] would return, without counting anything.
    pub fn peek(&self, key: &FlowKey, tag: u32) -> Option<EntryId> {
        self.best(key, tag).map(|(id, _)| id)
    }

    #[inline]
    fn best(&self, key: &FlowKey, tag: u32) -> Option<(EntryId, u32)> {
        let entries = &self.entries;
        let mut best: Option<(EntryId, u32, u32)> = None;
        for &sti in self.orders.get(tag as usize)? {
            let st = &self.subtables[sti as usize];
            if best.is_some_and(|(_, p, _)| st.max_priority <= p) {
                break;
            }
            let h = hash_masked(key, &st.mask, &st.words);
            let found = st.map.find(h, |&id| {
                let e = entries[id as usize].as_ref().expect("indexed entries live");
                st.words.iter().all(|&w| key.words[w as usize] & st.mask.words[w as usize] == e.value.words[w as usize])
            });
            if let Some(&id) = found {
                let p = entries[id as usize].as_ref().expect("indexed entries live").priority;
                if best.is_none_or(|(_, bp, _)| p > bp) {
                    best = Some((id, p, sti));
                }
                // Later subtables rank no higher than this one's best: nothing can beat it.
                if p >= st.max_priority {
                    break;
                }
            }
        }
        best.map(|(id, _, sti)| (id, sti))
    }

    /// [`TupleSpace::lookup`], also counting the hit or miss in a table's `stats`.
    #[inline]
    pub fn lookup_counted(
        &mut self,
        key: &FlowKey,
        tag: u32,
        bytes: u64,
        now_ns: u64,
        stats: &mut FlowTableStats,
    ) -> Option<EntryId> {
        let hit = self.lookup(key, tag, bytes, now_ns);
        if hit.is_some() {
            stats.hits += 1;
        } else {
            stats.misses += 1;
        }
        hit
    }

    /// Orders subtables by highest priority, then by hits since the last ranking (ties by
    /// creation), then restarts the counts; tightens priority bounds loosened by removals.
    fn rank(&mut self) {
        let entries = &self.entries;
        for st in self.subtables.iter_mut().filter(|st| st.at_max == 0 && !st.map.is_empty()) {
            let prios = st.map.iter().filter_map(|&id| entries[id as usize].as_ref().map(|e| e.priority));
            st.max_priority = prios.clone().max().unwrap_or(0);
            st.at_max = prios.filter(|&p| p == st.max_priority).count() as u32;
        }
        for tag in 0..self.orders.len() {
            self.sort_order(tag as u32);
        }
        for s in &mut self.subtables {
            s.hits = 0;
        }
        self.until_rank = RANK_INTERVAL;
    }

    fn sort_order(&mut self, tag: u32) {
        let subtables = &self.subtables;
        self.orders[tag as usize].sort_by(|&a, &b| {
            let (sa, sb) = (&subtables[a as usize], &subtables[b as usize]);
            sb.max_priority.cmp(&sa.max_priority).then(sb.hits.cmp(&sa.hits)).then(a.cmp(&b))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::parse_flows;

    fn matches(text: &str) -> Vec<Match> {
        parse_flows(text, "t").unwrap().into_iter().map(|r| r.matcher).collect()
    }

    #[test]
    fn insert_lookup_remove_against_linear_scan() {
        let ms = matches(
            "ip,nw_dst=10.0.0.0/8 actions=drop\n\
             ip,nw_dst=10.1.0.0/16 actions=drop\n\
             tcp,tp_dst=80 actions=drop\n\
             ip,nw_dst=11.0.0.0/8 actions=drop\n\
             arp actions=drop\n",
        );
        // Keep only pairwise-disjoint ones for first-match to be unambiguous.
        let mut ts = TupleSpace::new();
        let kept = [ms[0], ms[3], ms[4]];
        let ids: Vec<_> = kept.iter().enumerate().map(|(i, m)| ts.insert(m, 0, 0, i, 0)).collect();
        assert_eq!(ts.n_masks(), 2);
        assert_eq!(ts.find(&kept[1], 0), Some(ids[1]));
        let pkts = matches("ip,nw_dst=10.9.9.9 actions=drop\nip,nw_dst=11.0.0.1 actions=drop\narp actions=drop\nipv6 actions=drop\n");
        for (n, p) in pkts.iter().enumerate() {
            let want = kept.iter().position(|m| m.matches(&p.value));
            let got = ts.lookup(&p.value, 0, 60, n as u64).map(|id| ts.entry(id).unwrap().data);
            assert_eq!(got, want, "packet {n}");
        }
        assert_eq!(ts.entry(ids[0]).unwrap().stats, EntryStats { packets: 1, bytes: 60, last_hit_ns: 0 });
        assert_eq!(ts.remove(ids[2]).map(|e| e.data), Some(2));
        assert_eq!(ts.n_masks(), 1);
        assert_eq!(ts.lookup(&pkts[2].value, 0, 60, 9), None);
        assert!(!ts.has_mask(&kept[2].mask));
        let again = ts.insert(&kept[2], 0, 0, 7, 10);
        assert_eq!(again, ids[2], "freed ids are reused");
        assert_eq!(ts.matcher(again), Some(kept[2]));
        assert_eq!(ts.len(), 3);
        for i in 0..2 * RANK_INTERVAL {
            ts.lookup(&pkts[2].value, 0, 1, i as u64);
        }
        assert_eq!(ts.lookup(&pkts[0].value, 0, 1, 0).map(|id| ts.entry(id).unwrap().data), Some(0));
    }

    #[test]
    fn highest_priority_of_the_tag_wins_and_removal_loosens_nothing() {
        let ms = matches(
            "ip actions=drop\nip,nw_dst=10.0.0.0/8 actions=drop\nip,nw_dst=10.1.0.0/16 actions=drop\n",
        );
        let pkt = matches("ip,nw_dst=10.1.2.3 actions=drop\n")[0].value;
        let mut ts = TupleSpace::new();
        let wide = ts.insert(&ms[0], 5, 1, "wide", 0);
        let mid = ts.insert(&ms[1], 5, 3, "mid", 0);
        let narrow = ts.insert(&ms[2], 5, 2, "narrow", 0);
        let other_tag = ts.insert(&ms[1], 6, 9, "other tag", 0);
        assert_eq!(ts.find(&ms[1], 6), Some(other_tag));
        assert_eq!(ts.lookup(&pkt, 5, 1, 0), Some(mid), "priority 3 beats 2 and 1, whatever the masks");
        assert_eq!(ts.lookup(&pkt, 6, 1, 0), Some(other_tag));
        assert_eq!(ts.lookup(&pkt, 7, 1, 0), None, "tags match exactly");
        ts.remove(mid);
        assert_eq!(ts.lookup(&pkt, 5, 1, 0), Some(narrow));
        ts.remove(narrow);
        for i in 0..RANK_INTERVAL {
            assert_eq!(ts.lookup(&pkt, 5, 1, i as u64), Some(wide));
        }
    }
}
