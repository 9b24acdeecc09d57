//! The top-k min-heap every sketch keeps beside its counters (FastKeeper Algorithm 3,
//! HeavyKeeper, Count-Min + heap, Elixir Algorithm 1).
//!
//! The root is the smallest of the k flows kept, so admitting a larger flow is O(log k). A
//! flow's position is found through a hash table of slot numbers keyed by the flow hash the
//! caller already computed, so the per-packet "is it in the heap?" test costs one probe and
//! no allocation. Storage is fixed at k entries; [`TopHeap::memory_bytes`] reports it.

use hashbrown::HashTable;

use super::FlowId;

#[derive(Clone, Copy, Debug)]
struct Slot {
    flow: FlowId,
    hash: u64,
    /// Counts saturate at u32::MAX (4 billion packets in one window).
    count: u32,
    /// Position of this slot in `order`.
    pos: u32,
}

/// A min-heap of at most `k` flows by count, indexed by flow.
#[derive(Clone, Debug)]
pub struct TopHeap {
    k: usize,
    slots: Vec<Slot>,
    /// Heap order: slot numbers, smallest count first.
    order: Vec<u32>,
    index: HashTable<u32>,
}

impl Default for TopHeap {
    /// A heap for one flow that allocates nothing until used (a placeholder while a
    /// detector's heap is borrowed out).
    fn default() -> Self {
        TopHeap { k: 1, slots: Vec::new(), order: Vec::new(), index: HashTable::new() }
    }
}

impl TopHeap {
    /// An empty heap for `k` flows (at least 1).
    pub fn new(k: usize) -> TopHeap {
        let k = k.max(1);
        TopHeap {
            k,
            slots: Vec::with_capacity(k),
            order: Vec::with_capacity(k),
            // Twice k: at most half full, so deletions' tombstones are cleared by rehashing
            // in place and the table never grows beyond what `memory_bytes` reports.
            index: HashTable::with_capacity(2 * k),
        }
    }

    /// Bytes held: slots, heap order and index, at their reserved sizes.
    pub fn memory_bytes(&self) -> usize {
        self.k * (std::mem::size_of::<Slot>() + 4) + self.index.allocation_size()
    }

    /// Bytes [`TopHeap::new`] would hold for `k` flows.
    pub fn bytes_for(k: usize) -> usize {
        TopHeap::new(k).memory_bytes()
    }

    /// Flows held.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether no flow is held.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The smallest count held, or 0 while the heap has room.
    pub fn admission(&self) -> u64 {
        if self.order.len() < self.k {
            0
        } else {
            self.slots[self.order[0] as usize].count as u64
        }
    }

    fn find(&self, flow: FlowId, hash: u64) -> Option<u32> {
        let slots = &self.slots;
        self.index.find(hash, |&s| slots[s as usize].flow == flow).copied()
    }

    /// The count held for `flow`, if it is in the heap.
    pub fn get(&self, flow: FlowId, hash: u64) -> Option<u64> {
        self.find(flow, hash).map(|s| self.slots[s as usize].count as u64)
    }

    /// Offers `flow` with its current estimate: updates it if held; otherwise admits it if the
    /// heap has room or `count` exceeds the smallest held, which is evicted and returned.
    #[inline]
    pub fn offer(&mut self, flow: FlowId, hash: u64, count: u64) -> Option<FlowId> {
        let count = count.min(u32::MAX as u64) as u32;
        if let Some(s) = self.find(flow, hash) {
            let slot = &mut self.slots[s as usize];
            let up = count < slot.count;
            slot.count = count;
            let pos = slot.pos as usize;
            if up {
                self.sift_up(pos);
            } else {
                self.sift_down(pos);
            }
            return None;
        }
        if self.order.len() < self.k {
            let s = self.slots.len() as u32;
            self.slots.push(Slot { flow, hash, count, pos: self.order.len() as u32 });
            self.order.push(s);
            self.insert_index(s, hash);
            self.sift_up(self.order.len() - 1);
            None
        } else if count > self.slots[self.order[0] as usize].count {
            let s = self.order[0];
            let old = self.slots[s as usize];
            if let Ok(e) = self.index.find_entry(old.hash, |&x| x == s) {
                e.remove();
            }
            self.slots[s as usize] = Slot { flow, hash, count, pos: 0 };
            self.insert_index(s, hash);
            self.sift_down(0);
            Some(old.flow)
        } else {
            None
        }
    }

    /// For heaps whose held counts may lag (lower bounds, refreshed lazily): before `count`
    /// challenges the smallest, brings the smallest up to date with `estimate` until it is
    /// current — so that a flow is only evicted for one that truly outranks it.
    pub fn settle(&mut self, count: u64, mut estimate: impl FnMut(FlowId, u64) -> u64) {
        for _ in 0..self.k {
            if self.order.len() < self.k {
                return;
            }
            let s = self.order[0] as usize;
            let held = self.slots[s].count as u64;
            if held >= count {
                return;
            }
            let now = estimate(self.slots[s].flow, self.slots[s].hash).min(u32::MAX as u64);
            if now <= held {
                return;
            }
            self.slots[s].count = now as u32;
            self.sift_down(0);
        }
    }

    fn insert_index(&mut self, s: u32, hash: u64) {
        let slots = &self.slots;
        self.index.insert_unique(hash, s, |&x| slots[x as usize].hash);
    }

    /// Replaces every held count by `estimate(flow, hash)` and restores heap order (done at
    /// window boundaries, when counts of flows not seen lately have gone stale).
    pub fn refresh(&mut self, mut estimate: impl FnMut(FlowId, u64) -> u64) {
        for s in &mut self.slots {
            s.count = estimate(s.flow, s.hash).min(u32::MAX as u64) as u32;
        }
        for pos in (0..self.order.len() / 2).rev() {
            self.sift_down(pos);
        }
    }

    /// Forgets every flow.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.order.clear();
        self.index.clear();
    }

    /// The flows held with their counts, largest first (ties by flow id), into `out`.
    pub fn sorted(&self, out: &mut Vec<(FlowId, u64)>) {
        out.clear();
        out.extend(self.slots.iter().map(|s| (s.flow, s.count as u64)));
        out.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    }

    fn key(&self, pos: usize) -> u32 {
        self.slots[self.order[pos] as usize].count
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.order.swap(a, b);
        self.slots[self.order[a] as usize].pos = a as u32;
        self.slots[self.order[b] as usize].pos = b as u32;
    }

    fn sift_up(&mut self, mut pos: usize) {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if self.key(pos) >= self.key(parent) {
                break;
            }
            self.swap(pos, parent);
            pos = parent;
        }
    }

    fn sift_down(&mut self, mut pos: usize) {
        let n = self.order.len();
        loop {
            let (l, r) = (2 * pos + 1, 2 * pos + 2);
            let mut smallest = pos;
            if l < n && self.key(l) < self.key(smallest) {
                smallest = l;
            }
            if r < n && self.key(r) < self.key(smallest) {
                smallest = r;
            }
            if smallest == pos {
                break;
            }
            self.swap(pos, smallest);
            pos = smallest;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn id(n: u64) -> FlowId {
        FlowId([0, n])
    }

    proptest! {
        /// Offering counts that only grow (as sketch estimates do within a window), the heap
        /// holds the k flows with the largest last offers.
        #[test]
        fn keeps_the_k_largest(offers in proptest::collection::vec((0u64..30, 1u64..5), 1..300), k in 1usize..8) {
            let mut heap = TopHeap::new(k);
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
                prop_assert_eq!(truth[&f.0[1]], *c, "held counts are current");
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

    #[test]
    fn refresh_reorders_and_evicts_the_new_smallest() {
        let mut heap = TopHeap::new(2);
        heap.offer(id(1), 1, 10);
        heap.offer(id(2), 2, 20);
        heap.offer(id(3), 3, 5);
        assert_eq!(heap.get(id(3), 3), None, "5 does not beat 10");
        heap.refresh(|f, _| if f == id(2) { 1 } else { 10 });
        heap.offer(id(3), 3, 5);
        let mut out = Vec::new();
        heap.sorted(&mut out);
        assert_eq!(out, [(id(1), 10), (id(3), 5)]);
        assert!(heap.memory_bytes() >= 2 * 40);
    }
}
