//! The top-k min-heap every sketch keeps beside its counters (FastKeeper Algorithm 3,
//! HeavyKeeper, Count-Min + heap, Elixir Algorithm 1) and Space-Saving's Stream-Summary.
//!
//! The root is the smallest of the k flows kept, so admitting a larger flow is O(log k). The
//! heap is charged to the detector's byte budget, so it is laid out as tightly as the papers
//! count it: flat arrays in heap order — each flow's id packed at the key's own width (13 bytes
//! for the IPv4 5-tuple), 32 bits of its hash, its count — and an open-addressing index of heap
//! positions keyed by those 32 bits, at most half full. That is the id + 8 + 8 bytes per flow
//! (29 B for the 5-tuple), where a general hash map of full ids and 64-bit hashes took 49–57 B
//! and, at k = 1,000 in 100 KB, left FastKeeper half its buckets. An index entry keeps the high
//! bits of the hash above the position, so a probe rarely reads an id it does not want. Storage
//! is fixed at k entries; [`TopHeap::memory_bytes`] reports it.

use super::flow_id::PackedIds;
use super::{flow_table, FlowId};

/// A min-heap of at most `k` flows by count, indexed by flow.
#[derive(Clone, Debug)]
pub struct TopHeap {
    k: usize,
    /// Heap order from here on: slot 0 holds the smallest count. Room for k ids; the first
    /// `counts.len()` are held.
    ids: PackedIds,
    tags: Vec<u32>,
    /// Counts saturate at u32::MAX (4 billion packets in one window).
    counts: Vec<u32>,
    /// 0: empty; otherwise the high bits of the flow's tag above `pos_mask`, and its position
    /// + 1 under it.
    index: Vec<u32>,
    pos_mask: u32,
    /// Where [`TopHeap::count_one`] starts looking for the next flow of the smallest count to
    /// replace: the parent of the last one replaced, which is often of the smallest count
    /// still (checked before use: any position of the smallest count will do).
    replace_from: usize,
}

impl Default for TopHeap {
    /// A heap for one flow that allocates nothing until used (a placeholder while a
    /// detector's heap is borrowed out).
    fn default() -> Self {
        TopHeap {
            k: 1,
            ids: PackedIds::new(0, 8),
            tags: Vec::new(),
            counts: Vec::new(),
            index: Vec::new(),
            pos_mask: 1,
            replace_from: 0,
        }
    }
}

impl TopHeap {
    /// An empty heap for `k` flows (at least 1) whose ids take `key_bits` bits.
    pub fn new(k: usize, key_bits: u32) -> TopHeap {
        let k = k.clamp(1, u32::MAX as usize / 2);
        // Positions 1..=k under the mask; the tag's bits above it.
        let pos_mask = (u32::MAX >> (k as u32 + 1).leading_zeros()).max(1);
        TopHeap {
            k,
            ids: PackedIds::new(k, key_bits),
            tags: Vec::with_capacity(k),
            counts: Vec::with_capacity(k),
            index: vec![0; Self::index_len(k)],
            pos_mask,
            replace_from: 0,
        }
    }

    /// Index entries for k flows: at most half full, so a probe for an absent flow (every
    /// packet of a flow not held) ends after about two entries (at 80%, 13: Space-Saving, which
    /// probes its whole summary per packet, ran at a third of the speed).
    fn index_len(k: usize) -> usize {
        2 * k + 1
    }

    /// Bytes held: ids, tags, counts and index, at their reserved sizes.
    pub fn memory_bytes(&self) -> usize {
        self.ids.memory_bytes() + self.k * 8 + Self::index_len(self.k) * 4
    }

    /// Bytes [`TopHeap::new`] would hold for `k` flows whose ids take `key_bits` bits.
    pub fn bytes_for_key(k: usize, key_bits: u32) -> usize {
        let k = k.max(1);
        PackedIds::bytes_for(k, key_bits) + k * 8 + Self::index_len(k) * 4
    }

    /// Flows held.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether no flow is held.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// The smallest count held, or 0 while the heap has room.
    pub(crate) fn admission(&self) -> u64 {
        if self.counts.len() < self.k {
            0
        } else {
            self.counts[0] as u64
        }
    }

    fn id_at(&self, pos: usize) -> FlowId {
        self.ids.get(pos)
    }

    fn home(&self, tag: u32) -> usize {
        flow_table::home(tag, self.index.len())
    }

    fn next(&self, i: usize) -> usize {
        flow_table::next(i, self.index.len())
    }

    fn find(&self, flow: FlowId, hash: u64) -> Option<usize> {
        if self.counts.is_empty() {
            return None;
        }
        let tag = hash as u32;
        let packed = self.ids.pack(flow);
        let mut i = self.home(tag);
        loop {
            let e = self.index[i];
            if e == 0 {
                return None;
            }
            if e & !self.pos_mask == tag & !self.pos_mask {
                let pos = (e & self.pos_mask) as usize - 1;
                if self.ids.holds(pos, &packed) {
                    return Some(pos);
                }
            }
            i = self.next(i);
        }
    }

    /// The index entry pointing at `pos`.
    fn entry_of(&self, pos: usize) -> usize {
        let want = pos as u32 + 1;
        let mut i = self.home(self.tags[pos]);
        while self.index[i] & self.pos_mask != want {
            i = self.next(i);
        }
        i
    }

    fn index_insert(&mut self, pos: usize) {
        let tag = self.tags[pos];
        let mut i = self.home(tag);
        while self.index[i] != 0 {
            i = self.next(i);
        }
        self.index[i] = tag & !self.pos_mask | (pos as u32 + 1);
    }

    /// Removes entry `i`, shifting later entries of the probe run back (no tombstones).
    fn index_remove(&mut self, mut i: usize) {
        let n = self.index.len();
        let mut j = i;
        loop {
            j = self.next(j);
            let e = self.index[j];
            if e == 0 {
                break;
            }
            let home = self.home(self.tags[(e & self.pos_mask) as usize - 1]);
            if flow_table::fills_hole(i, j, home, n) {
                self.index[i] = e;
                i = j;
            }
        }
        self.index[i] = 0;
    }

    /// The count held for `flow`, if it is in the heap.
    pub fn get(&self, flow: FlowId, hash: u64) -> Option<u64> {
        self.find(flow, hash).map(|pos| self.counts[pos] as u64)
    }

    /// Offers `flow` with its current estimate: updates it if held; otherwise admits it if the
    /// heap has room or `count` exceeds the smallest held, which is evicted and returned.
    #[inline]
    pub(crate) fn offer(&mut self, flow: FlowId, hash: u64, count: u64) -> Option<FlowId> {
        let count = count.min(u32::MAX as u64) as u32;
        if let Some(pos) = self.find(flow, hash) {
            if count < self.counts[pos] {
                self.counts[pos] = count;
                self.sift_up(pos);
            } else {
                self.counts[pos] = count;
                self.sift_down(pos);
            }
            return None;
        }
        debug_assert!(self.ids.fits(flow), "{flow:?} is wider than the key");
        let tag = hash as u32;
        if self.counts.len() < self.k {
            self.add_leaf(flow, tag, count);
            None
        } else if count > self.counts[0] {
            // The root leaves; smaller children move up into the hole until the new flow fits.
            let old = self.id_at(0);
            self.index_remove(self.entry_of(0));
            let at = self.hole_down(0, count);
            self.put(at, flow, tag, count);
            self.index_insert(at);
            Some(old)
        } else {
            None
        }
    }

    /// Adds a flow not held to a heap with room, as a new leaf: parents larger than it move
    /// down into the hole it opens.
    fn add_leaf(&mut self, flow: FlowId, tag: u32, count: u32) {
        self.counts.push(count);
        self.tags.push(tag);
        let at = self.hole_up(self.counts.len() - 1, count);
        self.put(at, flow, tag, count);
        self.index_insert(at);
    }

    /// Space-Saving's update for one packet of `flow` (the Stream-Summary step of Metwally,
    /// Agrawal and El Abbadi), returning the flow's count after it: a flow held counts one
    /// more; a new flow takes a free place with count 1, or, the heap full, the place of a flow
    /// of the smallest count with that count plus one (that flow leaves).
    ///
    /// Which of several flows of equal count moves or leaves is the algorithm's free choice:
    /// here the last reached going down from the flow (or, for the smallest count, from
    /// where the last replacement left off) through children of the same count, left first.
    /// Its children all count more, so the count that grew keeps heap order there and at most
    /// two flows move. Going through [`TopHeap::offer`], a grown count sifted down past every
    /// flow tied with it — in Space-Saving most flows are tied at the smallest count, and
    /// every new flow sank some ten levels at a thousand flows, each level moving a flow and
    /// its index entry.
    pub(crate) fn count_one(&mut self, flow: FlowId, hash: u64) -> u64 {
        if let Some(pos) = self.find(flow, hash) {
            let count = self.counts[pos];
            if count == u32::MAX {
                return count as u64;
            }
            let tie = self.last_tie(pos);
            if tie != pos {
                self.swap(pos, tie);
            }
            self.counts[tie] = count + 1;
            return count as u64 + 1;
        }
        debug_assert!(self.ids.fits(flow), "{flow:?} is wider than the key");
        if self.counts.len() < self.k {
            self.add_leaf(flow, hash as u32, 1);
            return 1;
        }
        // The flows of the smallest count are the top of the heap down to where counts grow
        // (heap order): the last one replaced was at its bottom, and its parent, if it still
        // has the smallest count, is a shorter way down than the root. (The hint is a parent
        // of a position below k, and the heap is full here: it is in bounds.)
        let hint = self.replace_from;
        let from = if self.counts[hint] == self.counts[0] { hint } else { 0 };
        let at = self.last_tie(from);
        self.replace_from = at.saturating_sub(1) / 2;
        let count = self.counts[at].saturating_add(1);
        self.index_remove(self.entry_of(at));
        self.put(at, flow, hash as u32, count);
        self.index_insert(at);
        count as u64
    }

    /// The last position reached from `pos` going down through children of the same count,
    /// left first: its children count more (heap order: they count at least as much).
    fn last_tie(&self, mut pos: usize) -> usize {
        let (count, n) = (self.counts[pos], self.counts.len());
        loop {
            let l = 2 * pos + 1;
            if l < n && self.counts[l] == count {
                pos = l;
            } else if l + 1 < n && self.counts[l + 1] == count {
                pos = l + 1;
            } else {
                return pos;
            }
        }
    }

    /// Swaps the flows at `a` and `b`, index entries included.
    fn swap(&mut self, a: usize, b: usize) {
        let (ea, eb) = (self.entry_of(a), self.entry_of(b));
        self.index[ea] = self.index[ea] & !self.pos_mask | (b as u32 + 1);
        self.index[eb] = self.index[eb] & !self.pos_mask | (a as u32 + 1);
        let (fa, fb) = (self.id_at(a), self.id_at(b));
        self.ids.set(a, fb);
        self.ids.set(b, fa);
        self.tags.swap(a, b);
        self.counts.swap(a, b);
    }

    /// For heaps whose held counts may lag (lower bounds, refreshed lazily): before `count`
    /// challenges the smallest, brings the smallest up to date with `estimate` until it is
    /// current — so that a flow is only evicted for one that truly outranks it.
    pub(crate) fn settle(&mut self, count: u64, mut estimate: impl FnMut(FlowId) -> u64) {
        for _ in 0..self.k {
            if self.counts.len() < self.k {
                return;
            }
            let held = self.counts[0] as u64;
            if held >= count {
                return;
            }
            let now = estimate(self.id_at(0)).min(u32::MAX as u64);
            if now <= held {
                return;
            }
            self.counts[0] = now as u32;
            self.sift_down(0);
        }
    }

    /// Replaces every held count by `estimate(flow)` and restores heap order (done at window
    /// boundaries, when counts of flows not seen lately have gone stale).
    pub(crate) fn refresh(&mut self, mut estimate: impl FnMut(FlowId) -> u64) {
        for pos in 0..self.counts.len() {
            self.counts[pos] = estimate(self.id_at(pos)).min(u32::MAX as u64) as u32;
        }
        for pos in (0..self.counts.len() / 2).rev() {
            self.sift_down(pos);
        }
    }

    /// Forgets every flow.
    pub fn clear(&mut self) {
        self.tags.clear();
        self.counts.clear();
        self.index.fill(0);
    }

    /// The flows held with their counts, largest first (ties by flow id), into `out`.
    pub fn sorted(&self, out: &mut Vec<(FlowId, u64)>) {
        out.clear();
        out.extend((0..self.counts.len()).map(|pos| (self.id_at(pos), self.counts[pos] as u64)));
        out.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    }

    /// Writes a flow at `pos` (its index entry is the caller's).
    fn put(&mut self, pos: usize, flow: FlowId, tag: u32, count: u32) {
        self.ids.set(pos, flow);
        self.tags[pos] = tag;
        self.counts[pos] = count;
    }

    /// Moves the flow at `from` to the hole at `to`, its index entry following it.
    fn move_to(&mut self, from: usize, to: usize) {
        let e = self.entry_of(from);
        self.index[e] = self.index[e] & !self.pos_mask | (to as u32 + 1);
        self.counts[to] = self.counts[from];
        self.tags[to] = self.tags[from];
        self.ids.copy(from, to);
    }

    /// From a hole at `pos`, moves parents larger than `count` down into it: the position
    /// where a flow of `count` belongs. Moving the hole rather than swapping the flow along
    /// moves each displaced flow's index entry once, and the flow's own once, at the end.
    fn hole_up(&mut self, mut pos: usize, count: u32) -> usize {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if count >= self.counts[parent] {
                break;
            }
            self.move_to(parent, pos);
            pos = parent;
        }
        pos
    }

    /// From a hole at `pos`, moves the smaller child up into it while it is smaller than
    /// `count`: the position where a flow of `count` belongs (see [`TopHeap::hole_up`]).
    fn hole_down(&mut self, mut pos: usize, count: u32) -> usize {
        let n = self.counts.len();
        loop {
            let (l, r) = (2 * pos + 1, 2 * pos + 2);
            let (mut smallest, mut least) = (pos, count);
            if l < n && self.counts[l] < least {
                (smallest, least) = (l, self.counts[l]);
            }
            if r < n && self.counts[r] < least {
                smallest = r;
            }
            if smallest == pos {
                return pos;
            }
            self.move_to(smallest, pos);
            pos = smallest;
        }
    }

    /// Restores heap order for the flow at `pos` whose count went down.
    #[inline]
    fn sift_up(&mut self, pos: usize) {
        let count = self.counts[pos];
        // Most updates leave the flow where it is: checked inline, lifted out of line.
        if pos > 0 && self.counts[(pos - 1) / 2] > count {
            self.lift(pos, Self::hole_up);
        }
    }

    /// Restores heap order for the flow at `pos` whose count went up.
    #[inline]
    fn sift_down(&mut self, pos: usize) {
        let count = self.counts[pos];
        let n = self.counts.len();
        let (l, r) = (2 * pos + 1, 2 * pos + 2);
        if l < n && self.counts[l] < count || r < n && self.counts[r] < count {
            self.lift(pos, Self::hole_down);
        }
    }

    /// Lifts the flow at `pos` out, leaving a hole that `hole` moves to where its count
    /// belongs, and puts it there with its index entry.
    fn lift(&mut self, pos: usize, hole: fn(&mut TopHeap, usize, u32) -> usize) {
        let (slot, flow, tag, count) =
            (self.entry_of(pos), self.id_at(pos), self.tags[pos], self.counts[pos]);
        let at = hole(self, pos, count);
        self.put(at, flow, tag, count);
        self.index[slot] = self.index[slot] & !self.pos_mask | (at as u32 + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A 300-bit id (an IPv6 key's width) with `n` at both ends.
    fn id(n: u64) -> FlowId {
        let mut bytes = [0u8; 38];
        bytes[..8].copy_from_slice(&n.to_le_bytes());
        bytes[37] = n as u8;
        FlowId::from_le_bytes(&bytes)
    }

    /// A 104-bit id (an IPv4 5-tuple's width) with `n` at both ends.
    fn narrow_id(n: u64) -> FlowId {
        FlowId::from_u128(n as u128 | (n as u128 & 0xff) << 96)
    }

    fn number(f: FlowId) -> u64 {
        u64::from_le_bytes(f.to_le_bytes()[..8].try_into().unwrap())
    }

    /// Whether `heap` is in heap order and holds exactly the flows of `model` (flow number →
    /// count), each found through the index at its position, with one index entry per flow.
    fn holds_the_model(
        heap: &TopHeap,
        model: &std::collections::HashMap<u64, u64>,
        id: fn(u64) -> FlowId,
        hash: impl Fn(u64) -> u64,
    ) -> Result<(), TestCaseError> {
        let n = heap.len();
        prop_assert_eq!(n, model.len());
        for pos in 1..n {
            prop_assert!(heap.counts[(pos - 1) / 2] <= heap.counts[pos], "heap order at {}", pos);
        }
        for pos in 0..n {
            let f = number(heap.id_at(pos));
            prop_assert_eq!(heap.find(id(f), hash(f)), Some(pos));
            prop_assert_eq!(model.get(&f).copied(), Some(heap.counts[pos] as u64));
        }
        prop_assert_eq!(heap.index.iter().filter(|&&e| e != 0).count(), n, "one index entry per flow");
        Ok(())
    }

    proptest! {
        /// Offering counts that only grow (as sketch estimates do within a window), the heap
        /// holds the k flows with the largest last offers.
        #[test]
        fn keeps_the_k_largest(offers in proptest::collection::vec((0u64..120, 1u64..5), 1..600), k in 1usize..40) {
            let mut heap = TopHeap::new(k, 300);
            let mut truth = std::collections::HashMap::new();
            for (f, inc) in offers {
                let c = truth.entry(f).or_insert(0u64);
                *c += inc;
                heap.offer(id(f), f.wrapping_mul(0x9e37_79b9_7f4a_7c15), *c);
            }
            let mut got = Vec::new();
            heap.sorted(&mut got);
            prop_assert_eq!(got.len(), k.min(truth.len()));
            for (f, c) in &got {
                prop_assert_eq!(truth[&number(*f)], *c, "held counts are current");
            }
            // Counts only grow, so the smallest held only grows: whatever was evicted or
            // refused is no larger than it.
            let min = got.iter().map(|g| g.1).min().unwrap();
            for (f, c) in &truth {
                if heap.get(id(*f), f.wrapping_mul(0x9e37_79b9_7f4a_7c15)).is_none() {
                    prop_assert!(*c <= min, "flow {} ({}) outranks the heap's smallest ({})", f, c, min);
                }
            }
            prop_assert_eq!(heap.admission(), if got.len() == k { min } else { 0 });
        }
    }

    proptest! {
        /// Counts going up and down, flows coming and going: after every offer the heap is in
        /// heap order, every flow held is found at its position with its count, the flows held
        /// are those a model holds, and an evicted flow had the smallest count.
        #[test]
        fn heap_order_and_index_hold_under_any_offers(
            offers in proptest::collection::vec((0u64..60, 0u64..50), 1..400),
            k in 1usize..24,
        ) {
            let mut heap = TopHeap::new(k, 300);
            let mut model: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
            let hash = |f: u64| f.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            for (f, count) in offers {
                let evicted = heap.offer(id(f), hash(f), count);
                if model.contains_key(&f) || model.len() < k {
                    prop_assert_eq!(evicted, None);
                    model.insert(f, count);
                } else if let Some(old) = evicted {
                    let min = *model.values().min().unwrap();
                    prop_assert!(count > min);
                    prop_assert_eq!(model.remove(&number(old)), Some(min), "the smallest leaves");
                    model.insert(f, count);
                } else {
                    prop_assert!(count <= *model.values().min().unwrap());
                }
                holds_the_model(&heap, &model, id, hash)?;
            }
        }
    }

    proptest! {
        /// Space-Saving's step against a model of the algorithm: a flow held counts one more,
        /// a new one takes a free place with 1, or replaces a flow of the smallest count (any
        /// of them) with that count plus one; now and then the summary restarts. After every
        /// packet the heap is in heap order and every flow is found at its position with the
        /// model's count.
        #[test]
        fn count_one_is_space_saving(
            packets in proptest::collection::vec(0u64..41, 1..600),
            k in 1usize..20,
            wide in any::<bool>(),
        ) {
            // 300-bit ids, or 104-bit ones (the IPv4 5-tuple's, stored as two words).
            let (key_bits, id): (u32, fn(u64) -> FlowId) = if wide { (300, id) } else { (104, narrow_id) };
            let mut heap = TopHeap::new(k, key_bits);
            let mut model: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
            let hash = |f: u64| f.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            for f in packets {
                if f == 40 {
                    // A window's end: the summary restarts, and where the last replacement
                    // left off means nothing any more.
                    heap.clear();
                    model.clear();
                    continue;
                }
                let got = heap.count_one(id(f), hash(f));
                let want = if let Some(c) = model.get_mut(&f) {
                    *c += 1;
                    *c
                } else if model.len() < k {
                    model.insert(f, 1);
                    1
                } else {
                    let min = *model.values().min().unwrap();
                    let gone: Vec<u64> =
                        model.keys().copied().filter(|&g| heap.get(id(g), hash(g)).is_none()).collect();
                    prop_assert_eq!(gone.len(), 1, "one flow leaves");
                    prop_assert_eq!(model[&gone[0]], min, "a flow of the smallest count leaves");
                    model.remove(&gone[0]);
                    model.insert(f, min + 1);
                    min + 1
                };
                prop_assert_eq!(got, want);
                holds_the_model(&heap, &model, id, hash)?;
            }
        }
    }

    #[test]
    fn refresh_reorders_and_evicts_the_new_smallest() {
        let mut heap = TopHeap::new(2, 300);
        heap.offer(id(1), 1, 10);
        heap.offer(id(2), 2, 20);
        heap.offer(id(3), 3, 5);
        assert_eq!(heap.get(id(3), 3), None, "5 does not beat 10");
        heap.refresh(|f| if f == id(2) { 1 } else { 10 });
        heap.offer(id(3), 3, 5);
        let mut out = Vec::new();
        heap.sorted(&mut out);
        assert_eq!(out, [(id(1), 10), (id(3), 5)]);
        // Two 38-byte ids (300 bits) with tags and counts, and an index of 5 entries.
        assert_eq!(heap.memory_bytes(), 2 * (38 + 8) + 5 * 4);
        assert_eq!(TopHeap::bytes_for_key(2, 104), 2 * (13 + 8) + 5 * 4, "an IPv4 5-tuple: 13 bytes");
    }
}
