//! Which rules of equal priority, in different subtables of one classifier, overlap: what a
//! deterministic tie-break has to pay for, and only where it exists.
//!
//! hyflow's classifier answers, among equal-priority rules matching a packet, the one added
//! first; Open vSwitch answers whichever its search meets first. To honour the rule, a lookup
//! that has found its best rule at priority `p` would have to go on searching every subtable
//! that also holds rules at `p` added earlier — on OVS's own benchmark that is most of them,
//! where OVS stops. Yet another rule at `p` can only match the same packet if its match
//! overlaps the best rule's (some packet matches both), and it can only win if it was added
//! earlier. So each rule carries the set of subtables holding an earlier rule of its priority
//! that overlaps it (one bit per subtable, its index modulo 32): a lookup whose best rule
//! has an empty set stops where OVS stops, and otherwise visits, among the subtables whose top
//! priority is `p`, only those in the set.
//!
//! The sets are kept exact (as sets of those bits, each bit with a count of the rules behind
//! it) on insertion and removal by testing a rule against the rules of its priority in other
//! subtables: one pass over them either way. A priority whose rules all live in one subtable
//! needs nothing (rules of one subtable never overlap: one mask, different values); past
//! [`TRACK_LIMIT`] rules at one priority the sets are given up and every rule of that priority
//! gets them all, which is the search before this module existed.

use hashbrown::HashMap;

use super::rule::Match;

/// Rules at one priority beyond which their sets are given up (an insertion tests the new
/// rule against this many at most).
pub(crate) const TRACK_LIMIT: usize = 1024;

/// The set of every subtable: nothing is known.
pub(crate) const EVERY_SUBTABLE: SubtableSet = SubtableSet::MAX;

/// A set of subtables, one bit per subtable index modulo its width: 32 bits keep a classifier
/// bucket at 32 bytes (a million-rule table holds a million buckets); beyond 32 subtables two
/// share a bit, and a lookup may visit one it did not need to.
pub(crate) type SubtableSet = u32;

/// The bit of subtable `si` in a rule's set.
#[inline]
pub(crate) fn subtable_bit(si: u32) -> SubtableSet {
    1 << (si % SubtableSet::BITS)
}

/// Where a rule lives: its subtable and the slot of its match there (at one priority, a slot
/// holds one rule, so a priority and a place name a rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    pub(crate) subtable: u32,
    pub(crate) slot: u32,
}

/// What the ties need to read of the classifier's rules.
pub(crate) trait Rules {
    /// Whether some packet matches both `m` and the match at `at`.
    fn overlaps(&self, m: &Match, at: Place) -> bool;
    /// Every rule of `priority` in subtable `subtable`, as (slot, insertion sequence).
    fn rules_at(&self, subtable: u32, priority: u16, out: &mut Vec<(u32, u64)>);
}

#[derive(Clone, Copy)]
struct Tracked {
    at: Place,
    seq: u64,
    /// Per bit of a [`SubtableSet`], how many earlier rules of this priority in those
    /// subtables overlap this one; saturated at 255, a count stays (its bit then stays set: a
    /// removal can no longer tell whether it was the last).
    counts: [u8; SubtableSet::BITS as usize],
}

impl Tracked {
    fn new(at: Place, seq: u64) -> Tracked {
        Tracked { at, seq, counts: [0; SubtableSet::BITS as usize] }
    }

    /// Subtables holding an earlier rule of this priority that overlaps this one.
    fn earlier(&self) -> SubtableSet {
        self.counts.iter().enumerate().filter(|(_, &c)| c > 0).fold(0, |set, (b, _)| set | 1 << b)
    }

    /// One more earlier overlapping rule in subtable `si`; whether the set changed.
    fn add(&mut self, si: u32) -> bool {
        let c = &mut self.counts[subtable_bit(si).trailing_zeros() as usize];
        *c = c.saturating_add(1);
        *c == 1
    }

    /// One earlier overlapping rule in subtable `si` fewer; whether the set changed.
    fn sub(&mut self, si: u32) -> bool {
        let c = &mut self.counts[subtable_bit(si).trailing_zeros() as usize];
        if *c == u8::MAX {
            return false;
        }
        *c -= 1;
        *c == 0
    }
}

enum AtPriority {
    /// All in one subtable: no rule has a tie.
    OneSubtable { subtable: u32, n: u32 },
    /// In several subtables, each rule with its set.
    Tracked(Vec<Tracked>),
    /// Too many to keep: every rule's set is [`EVERY_SUBTABLE`].
    Untracked { n: u32 },
}

/// The sets of a classifier's rules, by priority.
#[derive(Default)]
pub(crate) struct Ties {
    by_priority: HashMap<u16, AtPriority>,
    /// Lowered by tests, to give priorities up on small tables too.
    limit: Option<usize>,
    scratch: Vec<(u32, u64)>,
}

impl Ties {
    #[cfg(test)]
    pub(crate) fn set_limit(&mut self, limit: usize) {
        self.limit = Some(limit);
    }

    fn limit(&self) -> usize {
        self.limit.unwrap_or(TRACK_LIMIT)
    }

    /// The set of the rule of `priority` at `at`.
    pub(crate) fn earlier(&self, priority: u16, at: Place) -> SubtableSet {
        match self.by_priority.get(&priority) {
            None | Some(AtPriority::OneSubtable { .. }) => 0,
            Some(AtPriority::Untracked { .. }) => EVERY_SUBTABLE,
            Some(AtPriority::Tracked(list)) => {
                list.iter().find(|t| t.at == at).map_or(EVERY_SUBTABLE, Tracked::earlier)
            }
        }
    }

    /// Records a rule of match `m` added at `at` (after it is in its subtable); `changed`
    /// receives every other rule of `priority` whose set changed, with the new set.
    pub(crate) fn insert(
        &mut self,
        rules: &impl Rules,
        m: &Match,
        priority: u16,
        at: Place,
        seq: u64,
        changed: &mut Vec<(Place, SubtableSet)>,
    ) {
        let limit = self.limit();
        let entry = self
            .by_priority
            .entry(priority)
            .or_insert(AtPriority::OneSubtable { subtable: at.subtable, n: 0 });
        if let AtPriority::OneSubtable { subtable, n } = *entry {
            if subtable == at.subtable {
                *entry = AtPriority::OneSubtable { subtable, n: n + 1 };
                return;
            }
            // A second subtable: the first one's rules become tracked, with empty sets (or,
            // too many, every set).
            rules.rules_at(subtable, priority, &mut self.scratch);
            let first = self.scratch.drain(..).map(|(slot, seq)| (Place { subtable, slot }, seq));
            if n as usize >= limit {
                changed.extend(first.map(|(at, _)| (at, EVERY_SUBTABLE)));
                *entry = AtPriority::Untracked { n };
            } else {
                *entry = AtPriority::Tracked(first.map(|(at, seq)| Tracked::new(at, seq)).collect());
            }
        }
        match entry {
            AtPriority::OneSubtable { .. } => unreachable!("made tracked or untracked above"),
            AtPriority::Untracked { n } => *n += 1,
            AtPriority::Tracked(list) if list.len() >= limit => {
                changed.extend(
                    list.iter().filter(|t| t.earlier() != EVERY_SUBTABLE).map(|t| (t.at, EVERY_SUBTABLE)),
                );
                *entry = AtPriority::Untracked { n: list.len() as u32 + 1 };
            }
            AtPriority::Tracked(list) => {
                let mut mine = Tracked::new(at, seq);
                for t in list.iter_mut() {
                    if t.at.subtable == at.subtable || !rules.overlaps(m, t.at) {
                        continue;
                    }
                    if t.seq < seq {
                        mine.add(t.at.subtable);
                    } else if t.add(at.subtable) {
                        changed.push((t.at, t.earlier()));
                    }
                }
                list.push(mine);
            }
        }
    }

    /// Forgets the rule of match `m` and `priority` at `at` (before or after it leaves its
    /// subtable: only the others are read); `changed` as for [`Ties::insert`].
    pub(crate) fn remove(
        &mut self,
        rules: &impl Rules,
        m: &Match,
        priority: u16,
        at: Place,
        changed: &mut Vec<(Place, SubtableSet)>,
    ) {
        let Some(entry) = self.by_priority.get_mut(&priority) else { return };
        let gone = match entry {
            AtPriority::OneSubtable { n, .. } | AtPriority::Untracked { n } => {
                *n -= 1;
                *n == 0
            }
            AtPriority::Tracked(list) => {
                let Some(i) = list.iter().position(|t| t.at == at) else { return };
                let removed = list.swap_remove(i);
                // The later rules it overlapped count one earlier rule fewer in its subtable.
                for t in list.iter_mut() {
                    if t.seq > removed.seq
                        && t.at.subtable != at.subtable
                        && rules.overlaps(m, t.at)
                        && t.sub(at.subtable)
                    {
                        changed.push((t.at, t.earlier()));
                    }
                }
                list.is_empty()
            }
        };
        if gone {
            self.by_priority.remove(&priority);
        }
    }
}
