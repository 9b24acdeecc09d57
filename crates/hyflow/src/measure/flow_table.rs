//! A fixed-capacity hash table from flow ids to small values, for the counter-based
//! detectors (Lossy Counting, WCSS).
//!
//! A detector's table is charged to its byte budget, so it is allocated once at the size the
//! budget allows and never grows: general hash maps allocate in powers of two (spending as
//! little as half of a budget) and may grow when deletions leave tombstones. Open addressing
//! with linear probing, at most 80% full, and backward-shift deletion (no tombstones); each
//! slot keeps 32 bits of the flow's hash (never 0: 0 marks an empty slot), so probes rarely
//! compare ids, and its id packed at the key's width.

use super::flow_id::{PackedIds, FLOW_ID_BYTES};
use super::FlowId;

/// A table of at most `max_len` flows, each with a `V`.
#[derive(Clone, Debug)]
pub(crate) struct FlowTable<V> {
    tags: Vec<u32>,
    ids: PackedIds,
    values: Vec<V>,
    len: usize,
    max_len: usize,
}

impl<V: Copy + Default> FlowTable<V> {
    /// A table for `max_len` flows (at least 1) whose ids take `key_bits` bits.
    pub(crate) fn new(max_len: usize, key_bits: u32) -> FlowTable<V> {
        let max_len = max_len.max(1);
        let slots = Self::slots(max_len);
        FlowTable {
            tags: vec![0; slots],
            ids: PackedIds::new(slots, key_bits),
            values: vec![V::default(); slots],
            len: 0,
            max_len,
        }
    }

    fn slots(max_len: usize) -> usize {
        max_len + max_len.div_ceil(4) + 1
    }

    /// Bytes a table for `max_len` flows of `key_bits`-bit ids holds.
    pub(crate) fn bytes_for(max_len: usize, key_bits: u32) -> usize {
        let slots = Self::slots(max_len.max(1));
        slots * (4 + std::mem::size_of::<V>()) + PackedIds::bytes_for(slots, key_bits)
    }

    /// Bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.tags.len() * 4 + self.values.len() * std::mem::size_of::<V>() + self.ids.memory_bytes()
    }

    /// Flows held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether another flow fits.
    pub(crate) fn is_full(&self) -> bool {
        self.len == self.max_len
    }

    fn tag(hash: u64) -> u32 {
        hash as u32 | 1
    }

    fn home(&self, tag: u32) -> usize {
        home(tag, self.tags.len())
    }

    fn next(&self, i: usize) -> usize {
        next(i, self.tags.len())
    }

    fn find(&self, flow: FlowId, hash: u64) -> Option<usize> {
        self.find_packed(&self.ids.pack(flow), hash)
    }

    fn find_packed(&self, packed: &[u8; FLOW_ID_BYTES], hash: u64) -> Option<usize> {
        let tag = Self::tag(hash);
        let mut i = self.home(tag);
        loop {
            match self.tags[i] {
                0 => return None,
                t if t == tag && self.ids.holds(i, packed) => return Some(i),
                _ => i = self.next(i),
            }
        }
    }

    /// The value of `flow` (`hash`: its 64-bit hash), if held.
    pub(crate) fn get(&self, flow: FlowId, hash: u64) -> Option<V> {
        self.find(flow, hash).map(|i| self.values[i])
    }

    /// The value of `flow`, if held, to change.
    pub(crate) fn get_mut(&mut self, flow: FlowId, hash: u64) -> Option<&mut V> {
        self.find(flow, hash).map(|i| &mut self.values[i])
    }

    /// The value of `flow`, inserted as `V::default()` if absent; `None` if absent and the
    /// table is full.
    pub(crate) fn entry(&mut self, flow: FlowId, hash: u64) -> Option<&mut V> {
        let tag = Self::tag(hash);
        let packed = self.ids.pack(flow);
        let mut i = self.home(tag);
        loop {
            match self.tags[i] {
                0 => {
                    if self.is_full() {
                        return None;
                    }
                    self.tags[i] = tag;
                    self.ids.set(i, flow);
                    self.values[i] = V::default();
                    self.len += 1;
                    return Some(&mut self.values[i]);
                }
                t if t == tag && self.ids.holds(i, &packed) => return Some(&mut self.values[i]),
                _ => i = self.next(i),
            }
        }
    }

    /// Removes `flow`, if held.
    pub(crate) fn remove(&mut self, flow: FlowId, hash: u64) {
        if let Some(i) = self.find(flow, hash) {
            self.remove_at(i);
        }
    }

    /// Empties slot `i`, shifting later entries of its probe run back.
    fn remove_at(&mut self, mut i: usize) {
        let n = self.tags.len();
        let mut j = i;
        loop {
            j = self.next(j);
            let t = self.tags[j];
            if t == 0 {
                break;
            }
            if fills_hole(i, j, self.home(t), n) {
                self.tags[i] = t;
                self.ids.copy(j, i);
                self.values[i] = self.values[j];
                i = j;
            }
        }
        self.tags[i] = 0;
        self.len -= 1;
    }

    /// Keeps only the flows for which `keep` holds.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(FlowId, &V) -> bool) {
        let mut i = 0;
        while i < self.tags.len() {
            // A removal may shift a later entry into slot i: look at it again.
            if self.tags[i] != 0 && !keep(self.ids.get(i), &self.values[i]) {
                self.remove_at(i);
            } else {
                i += 1;
            }
        }
    }

    /// Forgets every flow.
    pub(crate) fn clear(&mut self) {
        self.tags.fill(0);
        self.len = 0;
    }

    /// The flows held with their values, in table order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (FlowId, V)> + '_ {
        (0..self.tags.len()).filter(|&i| self.tags[i] != 0).map(|i| (self.ids.get(i), self.values[i]))
    }
}

/// Where a probe for a 32-bit tag starts in a table of `len` slots (multiply-shift).
pub(crate) fn home(tag: u32, len: usize) -> usize {
    ((tag as u64 * len as u64) >> 32) as usize
}

/// The slot after `i` in a table of `len`, wrapping.
pub(crate) fn next(i: usize, len: usize) -> usize {
    if i + 1 == len {
        0
    } else {
        i + 1
    }
}

/// Backward-shift deletion: whether the entry at `j`, whose probe starts at `home`, may move
/// into the hole at `i` (its home is not in (i, j], cyclically, in a table of `n`).
pub(crate) fn fills_hole(i: usize, j: usize, home: usize, n: usize) -> bool {
    (j + n - home) % n >= (j + n - i) % n
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// Against a std HashMap under random inserts, increments, removals and pruning,
        /// with hashes that collide often (8 distinct values) and ids as wide as IPv6 keys
        /// (bytes at both ends of a 300-bit id).
        #[test]
        fn behaves_as_a_bounded_map(ops in proptest::collection::vec((0u8..4, 0u64..40), 1..400), max in 1usize..30) {
            let mut table = FlowTable::<u32>::new(max, 300);
            let mut model: HashMap<u64, u32> = HashMap::new();
            let hash = |f: u64| (f % 8).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let wide = |f: u64| {
                let mut bytes = [0u8; 38];
                bytes[0] = f as u8;
                bytes[37] = (f * 7) as u8;
                FlowId::from_le_bytes(&bytes)
            };
            for (op, f) in ops {
                let id = wide(f);
                match op {
                    0 | 1 => {
                        let full = model.len() == max && !model.contains_key(&f);
                        match table.entry(id, hash(f)) {
                            Some(v) => { *v += 1; *model.entry(f).or_default() += 1; }
                            None => prop_assert!(full),
                        }
                    }
                    2 => { table.remove(id, hash(f)); model.remove(&f); }
                    _ => { table.retain(|g, v| !(g.to_le_bytes()[0] as u64 + *v as u64).is_multiple_of(3)); model.retain(|g, v| !(g + *v as u64).is_multiple_of(3)); }
                }
                prop_assert_eq!(table.len(), model.len());
                for (g, v) in &model {
                    prop_assert_eq!(table.get(wide(*g), hash(*g)), Some(*v));
                }
                prop_assert_eq!(table.iter().count(), model.len());
            }
        }
    }
}
