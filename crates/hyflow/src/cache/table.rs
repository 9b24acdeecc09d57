//! A bounded table of wildcard cache entries: a match kind, a capacity in entries, a limit on
//! distinct masks, and per-entry packet/byte counters and last-hit times. It is one NIC
//! match+action stage (the RMT model FlexNIC builds on) and, without a mask limit, the
//! software megaflow cache. Entries match an exact tag (metadata an earlier stage set,
//! Gigaflow's table tag; 0 where unused) plus masked fields, and rank by priority. Schemes
//! decide what goes into which table; the table only enforces what hardware (or OVS's flow
//! limit) would.

use crate::invalid_param::InvalidParam;
use crate::openflow::Match;
use crate::packet::FlowKey;
use crate::tuple_space::{EntryId, FlowTableStats, TupleSpace};

/// How a table matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchKind {
    /// TCAM-like: entries with different masks, up to the table's mask limit.
    Ternary,
    /// Hash-based exact match: one mask for the whole table.
    Exact,
}

/// Shape of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableConfig {
    /// Name in reports.
    pub name: String,
    /// Match kind.
    pub kind: MatchKind,
    /// Entries it holds.
    pub capacity: usize,
    /// Distinct masks it supports (1 for exact tables).
    pub max_masks: usize,
    /// Time from an install to the first lookup that sees the entry (a NIC applies table
    /// updates after a latency; 0 for software).
    pub update_latency_ns: u64,
}

/// Why an entry was not installed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// An entry with the same match is already there.
    Duplicate,
    /// No free entry.
    Full,
    /// The mask would exceed the table's mask limit.
    Masks,
    /// The packet lacks a field the table keys flows by (exact-match tables).
    NotAFlow,
    /// The table has no such area.
    NoArea,
    /// The scheme is not filled flow by flow.
    Unsupported,
}

/// Why a table cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TableConfigError {
    /// Zero entries or masks.
    #[error("table '{0}' needs at least one entry and one mask (turn it off instead)")]
    Empty(String),
    /// More tables than a scheme can address.
    #[error(transparent)]
    Tables(InvalidParam),
}

/// One bounded table of wildcard entries.
pub struct CacheTable<T> {
    config: TableConfig,
    space: TupleSpace<T>,
    /// Counters.
    pub stats: FlowTableStats,
}

/// Entries a table reserves room for up front (Open vSwitch's default megaflow limit is
/// 200,000): larger tables grow past it as they fill.
const RESERVED_ENTRIES: usize = 1 << 18;

impl<T> CacheTable<T> {
    /// An empty table.
    pub fn new(mut config: TableConfig) -> Result<CacheTable<T>, TableConfigError> {
        if config.capacity == 0 || config.max_masks == 0 {
            return Err(TableConfigError::Empty(config.name));
        }
        if config.kind == MatchKind::Exact {
            config.max_masks = 1;
        }
        let mut space = TupleSpace::with_capacity(config.capacity.min(RESERVED_ENTRIES));
        space.set_activation_delay(config.update_latency_ns);
        Ok(CacheTable { config, space, stats: FlowTableStats::default() })
    }

    /// Its shape.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// Entries (read-only: installs go through [`CacheTable::install`] so limits hold).
    pub fn space(&self) -> &TupleSpace<T> {
        &self.space
    }

    /// Entries and counters, for revalidation and aging by the owner.
    pub(crate) fn parts_mut(&mut self) -> (&mut TupleSpace<T>, &mut FlowTableStats) {
        (&mut self.space, &mut self.stats)
    }

    /// The highest-priority entry with tag `tag` matching `key`, counting the hit on it and
    /// on the table.
    #[inline]
    pub fn lookup(&mut self, key: &FlowKey, tag: u32, bytes: u64, now_ns: u64) -> Option<EntryId> {
        self.space.lookup_counted(key, tag, bytes, now_ns, &mut self.stats)
    }

    /// Appends the ids of entries without a hit since before `cutoff_ns`, in id order.
    pub fn idle(&self, cutoff_ns: u64, out: &mut Vec<EntryId>) {
        let space = &self.space;
        out.extend(
            space.ids().filter(|&id| space.entry(id).is_some_and(|e| e.stats.last_hit_ns < cutoff_ns)),
        );
    }

    /// Whether another entry fits (masks aside).
    pub(crate) fn has_room(&self) -> bool {
        self.space.len() < self.config.capacity
    }

    /// Why an install of match `m` with `tag` would be refused now, if it would (nothing is
    /// counted: an owner planning several installs checks them all first).
    pub(crate) fn admits(&self, m: &Match, tag: u32) -> Result<(), Refused> {
        if self.space.find(m, tag).is_some() {
            Err(Refused::Duplicate)
        } else if self.space.len() >= self.config.capacity {
            Err(Refused::Full)
        } else if !self.space.has_mask(&m.mask) && self.space.n_masks() >= self.config.max_masks {
            Err(Refused::Masks)
        } else {
            Ok(())
        }
    }

    /// Counts a refused install (one [`CacheTable::install`] refused, or one an owner's plan
    /// found [`CacheTable::admits`] would refuse).
    pub(crate) fn count_refusal(&mut self, r: Refused) {
        if r != Refused::Duplicate {
            self.stats.refused += 1;
            self.stats.refused_masks += (r == Refused::Masks) as u64;
        }
    }

    /// Installs an entry if the hardware has room for it.
    pub fn install(
        &mut self,
        m: &Match,
        tag: u32,
        priority: u32,
        data: T,
        now_ns: u64,
    ) -> Result<EntryId, Refused> {
        if let Err(r) = self.admits(m, tag) {
            self.count_refusal(r);
            return Err(r);
        }
        let id = self.space.insert(m, tag, priority, data, now_ns);
        self.stats.installs += 1;
        self.stats.peak = self.stats.peak.max(self.space.len());
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::parse_flows;

    #[test]
    fn enforces_capacity_and_mask_limit() {
        let ms: Vec<Match> = parse_flows("ip,nw_dst=10.0.0.1 actions=drop\nip,nw_dst=10.0.0.2 actions=drop\ntcp actions=drop\nip,nw_dst=10.0.0.3 actions=drop\n", "t")
            .unwrap()
            .into_iter()
            .map(|r| r.matcher())
            .collect();
        let cfg = TableConfig {
            name: "t".into(),
            kind: MatchKind::Ternary,
            capacity: 3,
            max_masks: 1,
            update_latency_ns: 0,
        };
        let mut st = CacheTable::new(cfg).unwrap();
        assert!(st.install(&ms[0], 0, 0, (), 0).is_ok());
        assert_eq!(st.install(&ms[0], 0, 0, (), 0), Err(Refused::Duplicate));
        assert!(st.install(&ms[1], 0, 0, (), 0).is_ok());
        assert_eq!(st.install(&ms[2], 0, 0, (), 0), Err(Refused::Masks));
        assert!(st.install(&ms[3], 0, 0, (), 0).is_ok());
        let cfg = TableConfig {
            name: "t".into(),
            kind: MatchKind::Exact,
            capacity: 2,
            max_masks: 9,
            update_latency_ns: 0,
        };
        let mut ex: CacheTable<()> = CacheTable::new(cfg).unwrap();
        assert_eq!(ex.config().max_masks, 1);
        ex.install(&ms[0], 0, 0, (), 0).unwrap();
        ex.install(&ms[1], 0, 0, (), 0).unwrap();
        assert_eq!(ex.install(&ms[3], 0, 0, (), 0), Err(Refused::Full));
        assert_eq!(ex.stats.refused, 1);
        assert_eq!((st.stats.refused, st.stats.refused_masks), (1, 1), "a duplicate is not a refusal");
        assert_eq!(ex.stats.refused_masks, 0);
        assert!(CacheTable::<()>::new(TableConfig {
            name: "z".into(),
            kind: MatchKind::Exact,
            capacity: 0,
            max_masks: 1,
            update_latency_ns: 0,
        })
        .is_err());
    }
}
