//! Reference-counted deduplication of slices: FlowShadow's Action Table, and the table of
//! rule paths that lets every cached decision credit the exact rules it stands for.
//!
//! Many cached flows share few distinct action lists (FlowShadow §III-A), so caches store a
//! 4-byte reference instead of the list. An item is freed when its last reference goes.

use std::hash::{BuildHasher, Hash};

use hashbrown::{DefaultHashBuilder, HashTable};

/// Reference to an interned slice.
pub(crate) type ItemRef = u32;

struct Item<E> {
    items: Box<[E]>,
    refs: u32,
    hash: u64,
}

/// Interned slices with reference counts.
pub struct Interner<E> {
    items: Vec<Option<Item<E>>>,
    free: Vec<ItemRef>,
    index: HashTable<ItemRef>,
    hasher: DefaultHashBuilder,
}

impl<E: Hash + Eq + Clone> Default for Interner<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Hash + Eq + Clone> Interner<E> {
    /// An empty table.
    pub fn new() -> Interner<E> {
        Interner {
            items: Vec::new(),
            free: Vec::new(),
            index: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
        }
    }

    /// The reference for `items`, taking one reference on it; `true` when the item is new (or
    /// a freed slot was reused), so per-item side data must be reset.
    pub fn intern(&mut self, items: &[E]) -> (ItemRef, bool) {
        let hash = self.hasher.hash_one(items);
        let slots = &self.items;
        let found =
            self.index.find(hash, |&r| slots[r as usize].as_ref().is_some_and(|it| &*it.items == items));
        if let Some(&r) = found {
            self.items[r as usize].as_mut().expect("indexed items live").refs += 1;
            return (r, false);
        }
        let item = Item { items: items.into(), refs: 1, hash };
        let r = match self.free.pop() {
            Some(r) => {
                self.items[r as usize] = Some(item);
                r
            }
            None => {
                self.items.push(Some(item));
                (self.items.len() - 1) as ItemRef
            }
        };
        let slots = &self.items;
        self.index.insert_unique(hash, r, |&x| slots[x as usize].as_ref().map_or(0, |it| it.hash));
        (r, true)
    }

    /// Takes another reference.
    #[inline]
    pub(crate) fn acquire(&mut self, r: ItemRef) {
        if let Some(it) = self.items.get_mut(r as usize).and_then(|i| i.as_mut()) {
            it.refs += 1;
        }
    }

    /// Drops a reference; the item is freed with its last one.
    pub fn release(&mut self, r: ItemRef) {
        let Some(it) = self.items.get_mut(r as usize).and_then(|i| i.as_mut()) else { return };
        it.refs -= 1;
        if it.refs == 0 {
            let hash = it.hash;
            if let Ok(e) = self.index.find_entry(hash, |&x| x == r) {
                e.remove();
            }
            self.items[r as usize] = None;
            self.free.push(r);
        }
    }

    /// The slice behind a reference (empty if freed).
    #[inline]
    pub fn get(&self, r: ItemRef) -> &[E] {
        self.items.get(r as usize).and_then(|i| i.as_ref()).map_or(&[], |it| &it.items)
    }

    /// Number of live items.
    pub fn len(&self) -> usize {
        self.items.len() - self.free.len()
    }

    /// Whether no item is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Highest reference ever handed out, plus one: the size side tables need.
    pub fn capacity(&self) -> usize {
        self.items.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedups_counts_and_frees() {
        let mut t = Interner::new();
        let (a, new_a) = t.intern(&[1u32, 2, 3]);
        let (b, new_b) = t.intern(&[1u32, 2, 3]);
        assert!(new_a && !new_b && a == b);
        let (c, _) = t.intern(&[4u32]);
        assert_ne!(a, c);
        assert_eq!(t.len(), 2);
        t.release(a);
        assert_eq!(t.get(a), &[1, 2, 3]);
        t.release(a);
        assert!(t.get(a).is_empty());
        assert_eq!(t.len(), 1);
        let (d, new_d) = t.intern(&[9u32, 9]);
        assert!(new_d);
        assert_eq!(d, a, "freed slot reused");
        t.acquire(c);
        t.release(c);
        assert_eq!(t.get(c), &[4]);
    }
}
