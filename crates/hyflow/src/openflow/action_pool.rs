//! Distinct action lists, each held once: the installed rules' (the pipeline's pool) and a
//! flow file's as it is parsed.
//!
//! A large table repeats a few action lists (a million rules of a routing table output to a
//! handful of ports): a rule shares its list with every rule whose list is equal, so a rule's
//! actions cost a pointer, not an allocation.

use std::sync::{Arc, Mutex};

use hashbrown::{HashMap, HashSet};

use super::rule::Actions;

/// Equal action lists made on several threads (a flow file's parse), held once: every thread
/// then hands out the same list for equal actions, so the pools downstream find each by its
/// address. Each thread keeps a [`LocalLists`] in front of the shared set and takes the lock
/// once per distinct list it meets.
#[derive(Default)]
pub(crate) struct SharedLists(Mutex<HashSet<Actions>>);

/// One thread's view of a [`SharedLists`].
pub(crate) struct LocalLists<'a> {
    shared: &'a SharedLists,
    seen: HashSet<Actions>,
}

impl<'a> LocalLists<'a> {
    pub(crate) fn new(shared: &'a SharedLists) -> Self {
        LocalLists { shared, seen: HashSet::new() }
    }

    /// Points `actions` at the shared list equal to it (entering it if new).
    pub(crate) fn share(&mut self, actions: &mut Actions) {
        let shared = match self.seen.get(actions) {
            Some(list) => list,
            None => {
                // A poisoned lock means another parsing thread panicked: its set is still whole.
                let mut set = self.shared.0.lock().unwrap_or_else(|e| e.into_inner());
                let list = set.get_or_insert_with(actions, |a| a.clone()).clone();
                self.seen.get_or_insert(list)
            }
        };
        if !Arc::ptr_eq(shared, actions) {
            *actions = shared.clone();
        }
    }
}

/// Distinct action lists with the number of installed rules holding each.
#[derive(Default)]
pub(crate) struct ActionPool {
    /// The lists, by content.
    lists: HashSet<Actions>,
    /// Holders of each list, by its address: a list already shared (a flow file's rules come
    /// with their lists shared) is found without hashing its actions.
    holders: HashMap<usize, u32>,
}

/// A list's address, its identity in the pool.
fn address(actions: &Actions) -> usize {
    Arc::as_ptr(actions) as *const () as usize
}

impl ActionPool {
    /// Points `actions` at the pool's equal list (entering it if new), for one more rule.
    pub(crate) fn take(&mut self, actions: &mut Actions) {
        if let Some(n) = self.holders.get_mut(&address(actions)) {
            // The pool's own list already: counting its holder is all (and no atomic
            // reference count moves).
            *n += 1;
            return;
        }
        let shared = self.lists.get_or_insert_with(actions, |a| a.clone());
        if !Arc::ptr_eq(shared, actions) {
            *actions = shared.clone();
        }
        *self.holders.entry(address(actions)).or_default() += 1;
    }

    /// One rule holding `actions` (a list from [`ActionPool::take`]) is gone; the list leaves
    /// the pool with its last holder.
    pub(crate) fn give_back(&mut self, actions: &Actions) {
        let at = address(actions);
        if let Some(n) = self.holders.get_mut(&at) {
            *n -= 1;
            if *n == 0 {
                self.holders.remove(&at);
                self.lists.remove(actions);
            }
        }
    }

    /// Distinct lists held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        debug_assert_eq!(self.lists.len(), self.holders.len());
        self.lists.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::action::Action;

    #[test]
    fn equal_lists_are_held_once_until_their_last_holder_goes() {
        let mut pool = ActionPool::default();
        let a: Actions = vec![Action::Output(2)].into();
        let b: Actions = vec![Action::Output(2)].into();
        let (mut first, mut second) = (a.clone(), b.clone());
        pool.take(&mut first);
        pool.take(&mut second);
        let mut third = second.clone();
        pool.take(&mut third);
        assert!(Arc::ptr_eq(&first, &a) && Arc::ptr_eq(&second, &a) && Arc::ptr_eq(&third, &a));
        assert_eq!(pool.len(), 1);
        pool.take(&mut vec![Action::Flood].into());
        assert_eq!(pool.len(), 2);
        for held in [&first, &second] {
            pool.give_back(held);
            assert_eq!(pool.len(), 2);
        }
        pool.give_back(&third);
        assert_eq!(pool.len(), 1);
        // A list equal to one that left is entered again.
        let mut again = b.clone();
        pool.take(&mut again);
        assert!(Arc::ptr_eq(&again, &b));
        assert_eq!(pool.len(), 2);
    }
}
