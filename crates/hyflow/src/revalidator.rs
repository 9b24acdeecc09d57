//! The revalidator: keeps the wildcard caches (NIC schemes and the software megaflow cache)
//! consistent with the rules, as Open vSwitch's revalidator threads do, and ages idle entries.
//!
//! **What it owns.** The queue of pending verdicts, the idle-sweep clock, the counter of
//! entry generations and the [`DependencyIndex`]: from each lookup outcome (a rule, or a
//! table's miss) to the cached entries whose decision depends on it — FlowShadow's Signature
//! Table applied to wildcard entries. A rule update therefore touches only the entries that
//! depend on what it changed: its cost grows with those, not with the size of the caches.
//!
//! **Entry version.** Every cached wildcard entry carries one [`EntryVersion`](crate::revalidation::EntryVersion): the
//! generation under which its dependencies were indexed (bumped when they change, so index
//! records naming an earlier occupant of the slot or an earlier path are recognised and
//! dropped) and the pending verdict, non-zero while the entry is known outdated. When a NIC
//! entry starts forwarding is hardware's business: the tuple space keeps its activation time.
//!
//! **Verdicts.** An affected entry is re-translated by its cache ([`Revalidate::retranslate`]):
//! kept (with its possibly new rule path) when it still decides the same for everything it
//! covers, evicted otherwise. With a revalidation delay the verdict is queued and applied when
//! due; meanwhile the entry is stale, and a later update re-translates it again (the path a
//! queued keep would give it is not on the entry yet), the newer verdict superseding the older.
//!
//! Entries are visited in a fixed order — cache, then table, then entry id — so results do not
//! depend on the order of the index.

use std::collections::VecDeque;

use crate::decision::{DecisionTables, OutcomeMap};
use crate::host_time::HostClock;
use crate::openflow::LookupRef;
use crate::revalidation::{Removal, Retranslation, Revalidate, Translator};
use crate::tuple_space::EntryId;

/// How often idle entries are swept (OVS's revalidator wakes about this often).
pub(crate) const SWEEP_INTERVAL_NS: u64 = 500_000_000;

/// The wildcard caches the revalidator looks after.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum CacheId {
    /// The NIC scheme's tables.
    Nic = 0,
    /// The software megaflow cache.
    Megaflow = 1,
}

/// An entry of a cache: cache, table (a NIC stage; 0 for single-table caches), id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct EntryAt {
    /// The cache.
    pub cache: CacheId,
    /// Its table.
    pub table: u8,
    /// The entry.
    pub id: EntryId,
}

/// The caches of one switch, lent to the revalidator.
pub(crate) struct Caches<'a> {
    /// The NIC scheme's entries, if there is a NIC.
    pub nic: Option<&'a mut (dyn Revalidate + 'a)>,
    /// The software megaflow cache, if any.
    pub megaflow: Option<&'a mut (dyn Revalidate + 'a)>,
}

impl<'a> Caches<'a> {
    fn get(&mut self, cache: CacheId) -> Option<&mut (dyn Revalidate + 'a)> {
        match cache {
            CacheId::Nic => self.nic.as_deref_mut(),
            CacheId::Megaflow => self.megaflow.as_deref_mut(),
        }
    }

    fn get_ref(&self, cache: CacheId) -> Option<&(dyn Revalidate + 'a)> {
        match cache {
            CacheId::Nic => self.nic.as_deref(),
            CacheId::Megaflow => self.megaflow.as_deref(),
        }
    }
}

/// One index record: an entry, under the generation it was indexed with.
#[derive(Clone, Copy, Debug)]
struct Record {
    at: EntryAt,
    generation: u64,
}

/// The entries depending on one outcome. Records of removed entries or of older generations
/// are dropped lazily: when the list has doubled since its last compaction, and whenever an
/// update reads it.
#[derive(Clone, Debug, Default)]
struct Dependents {
    records: Vec<Record>,
    compacted_len: usize,
}

/// Lookup outcome → entries that depend on it.
#[derive(Default)]
pub struct DependencyIndex {
    by_outcome: OutcomeMap<Dependents>,
}

fn valid(caches: &Caches, r: &Record) -> bool {
    caches
        .get_ref(r.at.cache)
        .and_then(|c| c.version(r.at.table as usize, r.at.id))
        .is_some_and(|v| v.generation == r.generation)
}

impl DependencyIndex {
    fn add(&mut self, o: LookupRef, r: Record, caches: &Caches) {
        let d = self.by_outcome.get_mut(o);
        if d.records.len() >= (2 * d.compacted_len).max(16) {
            d.records.retain(|r| valid(caches, r));
            d.compacted_len = d.records.len();
        }
        d.records.push(r);
    }

    /// Appends the live entries depending on `o`, dropping dead records on the way.
    fn collect(&mut self, o: LookupRef, caches: &Caches, out: &mut Vec<EntryAt>) {
        let d = self.by_outcome.get_mut(o);
        d.records.retain(|r| valid(caches, r));
        d.compacted_len = d.records.len();
        out.extend(d.records.iter().map(|r| r.at));
    }
}

/// A verdict waiting for the revalidation delay.
#[derive(Clone, Copy, Debug)]
struct Pending {
    due_ns: u64,
    at: EntryAt,
    seq: u64,
    verdict: Retranslation,
}

/// What revalidating after one update did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UpdateOutcome {
    /// Entries re-translated.
    pub retranslated: u64,
    /// Host nanoseconds spent on NIC entries (0 without a clock).
    pub nic_host_ns: u64,
}

/// The revalidator of one switch.
pub(crate) struct Revalidator {
    delay_ns: u64,
    max_idle_ns: u64,
    pending: VecDeque<Pending>,
    next_seq: u64,
    next_generation: u64,
    index: DependencyIndex,
    /// Scratch (reused: no allocation per update).
    affected: Vec<EntryAt>,
    ids: Vec<EntryId>,
    deps: Vec<LookupRef>,
}

impl Revalidator {
    /// Verdicts take effect `delay_ns` after the update; entries idle for more than
    /// `max_idle_ns` (0: never) expire.
    pub(crate) fn new(delay_ns: u64, max_idle_ns: u64) -> Revalidator {
        Revalidator {
            delay_ns,
            max_idle_ns,
            pending: VecDeque::new(),
            next_seq: 1,
            next_generation: 1,
            index: DependencyIndex::default(),
            affected: Vec::new(),
            ids: Vec::new(),
            deps: Vec::new(),
        }
    }

    /// Indexes a newly installed (or newly re-pathed) entry under its current dependencies.
    pub(crate) fn track(&mut self, at: EntryAt, caches: &mut Caches, tables: &DecisionTables) {
        let generation = self.next_generation;
        let Some(cache) = caches.get(at.cache) else { return };
        let Some((version, _)) = cache.slot(at.table as usize, at.id) else { return };
        self.next_generation += 1;
        version.generation = generation;
        self.deps.clear();
        cache.dependencies(at.table as usize, at.id, tables, &mut self.deps);
        let record = Record { at, generation };
        for &o in &self.deps {
            self.index.add(o, record, caches);
        }
    }

    /// After a rule update that changed `changed` (sorted, deduplicated): re-translates every
    /// entry depending on a changed outcome, and every entry whose verdict is still pending,
    /// and applies or queues the verdicts. With a `clock`, the host time spent on NIC entries
    /// is measured.
    pub(crate) fn on_update(
        &mut self,
        changed: &[LookupRef],
        now_ns: u64,
        caches: &mut Caches,
        with: &mut Translator,
        clock: Option<&dyn HostClock>,
    ) -> UpdateOutcome {
        let mut affected = std::mem::take(&mut self.affected);
        affected.clear();
        for &o in changed {
            self.index.collect(o, caches, &mut affected);
        }
        // An entry awaiting a verdict is re-translated again: the path that verdict would give
        // it is not on the entry yet, so this update's changes may touch it unseen.
        for p in &self.pending {
            let current = caches.get_ref(p.at.cache).and_then(|c| c.version(p.at.table as usize, p.at.id));
            if current.is_some_and(|v| v.pending == p.seq) {
                affected.push(p.at);
            }
        }
        affected.sort_unstable();
        affected.dedup();
        debug_assert!(self.index_agrees_with_a_scan(changed, caches, with.tables, &affected));
        let (mut retranslated, mut nic_host_ns) = (0, 0);
        for &at in &affected {
            let started = clock.filter(|_| at.cache == CacheId::Nic).map(|c| c.now_ns());
            retranslated += self.revalidate_entry(at, now_ns, caches, with) as u64;
            if let (Some(t0), Some(c)) = (started, clock) {
                nic_host_ns += c.now_ns().saturating_sub(t0);
            }
        }
        self.affected = affected;
        UpdateOutcome { retranslated, nic_host_ns }
    }

    /// Whether `affected` holds exactly the entries a scan of every cache finds depending on
    /// `changed` or awaiting a verdict (checked in debug builds on every update).
    fn index_agrees_with_a_scan(
        &self,
        changed: &[LookupRef],
        caches: &Caches,
        tables: &DecisionTables,
        affected: &[EntryAt],
    ) -> bool {
        let mut scan = Vec::new();
        let (mut ids, mut deps) = (Vec::new(), Vec::new());
        for cache in [CacheId::Nic, CacheId::Megaflow] {
            let Some(c) = caches.get_ref(cache) else { continue };
            for table in 0..c.tables() {
                ids.clear();
                c.ids(table, &mut ids);
                for &id in &ids {
                    deps.clear();
                    c.dependencies(table, id, tables, &mut deps);
                    let pending = c.version(table, id).is_some_and(|v| v.is_pending());
                    if pending || deps.iter().any(|o| changed.binary_search(o).is_ok()) {
                        scan.push(EntryAt { cache, table: table as u8, id });
                    }
                }
            }
        }
        scan == affected
    }

    /// Re-translates one entry and applies or queues the verdict; false if the entry is gone.
    fn revalidate_entry(
        &mut self,
        at: EntryAt,
        now_ns: u64,
        caches: &mut Caches,
        with: &mut Translator,
    ) -> bool {
        let Some(cache) = caches.get(at.cache) else { return false };
        let Some((version, path)) = cache.slot(at.table as usize, at.id) else { return false };
        let (old_path, was_pending) = (*path, version.is_pending());
        let verdict = cache.retranslate(at.table as usize, at.id, with);
        let tables = &mut *with.tables;
        // Unchanged and nothing pending: nothing to do. With a verdict pending, the keep is
        // scheduled so that it supersedes that (possibly evicting) one.
        if verdict == Retranslation::Keep(old_path) && !was_pending {
            tables.release_path(old_path);
            return true;
        }
        self.schedule(at, verdict, now_ns, caches, tables);
        true
    }

    /// Applies a verdict now, or queues it for the revalidation delay (the entry is stale
    /// meanwhile).
    fn schedule(
        &mut self,
        at: EntryAt,
        verdict: Retranslation,
        now_ns: u64,
        caches: &mut Caches,
        tables: &mut DecisionTables,
    ) {
        if self.delay_ns == 0 {
            self.apply(at, verdict, caches, tables);
            return;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some((version, _)) = caches.get(at.cache).and_then(|c| c.slot(at.table as usize, at.id)) {
            version.pending = seq;
        }
        self.pending.push_back(Pending { due_ns: now_ns.saturating_add(self.delay_ns), at, seq, verdict });
    }

    fn apply(
        &mut self,
        at: EntryAt,
        verdict: Retranslation,
        caches: &mut Caches,
        tables: &mut DecisionTables,
    ) {
        let Some(cache) = caches.get(at.cache) else {
            if let Retranslation::Keep(path) = verdict {
                tables.release_path(path);
            }
            return;
        };
        match verdict {
            Retranslation::Evict => {
                cache.remove(at.table as usize, at.id, tables, Removal::Revalidated);
            }
            Retranslation::Keep(path) => match cache.slot(at.table as usize, at.id) {
                Some((version, p)) => {
                    version.pending = 0;
                    let old = std::mem::replace(p, path);
                    tables.release_path(old);
                    if old != path {
                        self.track(at, caches, tables);
                    }
                }
                None => tables.release_path(path),
            },
        }
    }

    /// Whether a pending verdict falls due at or before `now_ns` (the per-packet check).
    #[inline]
    pub(crate) fn verdicts_due(&self, now_ns: u64) -> bool {
        self.pending.front().is_some_and(|p| p.due_ns <= now_ns)
    }

    /// When the next pending verdict falls due, if one is pending.
    pub(crate) fn next_verdict_ns(&self) -> Option<u64> {
        self.pending.front().map(|p| p.due_ns)
    }

    /// How often the owner should call [`Revalidator::sweep`]: OVS's revalidator interval,
    /// or `max-idle` if that is shorter.
    pub(crate) fn sweep_interval_ns(&self) -> u64 {
        SWEEP_INTERVAL_NS.min(self.max_idle_ns.max(1))
    }

    /// Applies the verdicts due at `now_ns`, in the order they were reached.
    pub(crate) fn apply_due(&mut self, now_ns: u64, caches: &mut Caches, tables: &mut DecisionTables) {
        while let Some(p) = self.pending.front().copied() {
            if p.due_ns > now_ns {
                break;
            }
            self.pending.pop_front();
            let current = caches.get_ref(p.at.cache).and_then(|c| c.version(p.at.table as usize, p.at.id));
            if current.is_some_and(|v| v.pending == p.seq) {
                self.apply(p.at, p.verdict, caches, tables);
            } else if let Retranslation::Keep(path) = p.verdict {
                // Superseded by a newer verdict, or the entry is gone.
                tables.release_path(path);
            }
        }
    }

    /// Removes entries idle for more than `max-idle`.
    pub(crate) fn sweep(&mut self, now_ns: u64, caches: &mut Caches, tables: &mut DecisionTables) {
        if self.max_idle_ns == 0 {
            return;
        }
        let cutoff = now_ns.saturating_sub(self.max_idle_ns);
        let mut ids = std::mem::take(&mut self.ids);
        for cache in [CacheId::Nic, CacheId::Megaflow] {
            let Some(c) = caches.get(cache) else { continue };
            for table in 0..c.tables() {
                ids.clear();
                c.idle(table, cutoff, &mut ids);
                for &id in &ids {
                    c.remove(table, id, tables, Removal::Expired);
                }
            }
        }
        self.ids = ids;
    }
}

#[cfg(test)]
mod tests {
    use crate::experiment::replay::{run, ReplayConfig};
    use crate::experiment::Workload;
    use crate::input::Input;
    use crate::nic::gigaflow::GigaflowConfig;
    use crate::nic::NicConfig;
    use crate::openflow::update::parse_updates;
    use crate::switch::SwitchConfig;
    use crate::workload::{builtin, generate_updates, TrafficConfig, UpdatesConfig};

    /// The built-in pipeline under a dense update stream (twice its rules per second), with
    /// each NIC scheme, with and without a revalidation delay, with idle expiry: every update
    /// re-translates exactly the entries a scan of the caches finds depending on it (asserted
    /// inside the revalidator in debug builds), and the replay agrees with the slow path on
    /// every packet but the stale ones.
    #[test]
    fn the_index_finds_what_a_scan_finds() {
        let rules = builtin::rules();
        let lines = generate_updates(&rules, &UpdatesConfig { rate: 2.0, seconds: 1.0, seed: 7 }).unwrap();
        let updates = parse_updates(&lines.join("\n"), "dense").unwrap();
        let traffic = TrafficConfig { flows: 500, packets: 20_000, zipf: 1.1, rate: 20_000.0, seed: 3 };
        let workload = Workload {
            rules,
            groups: Default::default(),
            ports: Default::default(),
            macs: Default::default(),
            prefixes: Default::default(),
            updates,
            input: Input::Generated { traffic, in_port: 1 },
        };
        let mut want = Vec::new();
        let config = ReplayConfig { switch: SwitchConfig::no_cache(), time_host: false, warmup_ns: None };
        run(&workload, &config, &mut |d| {
            want.push(d.outputs.to_vec());
            Ok(())
        })
        .unwrap();
        let mut checked = 0;
        for nic in [NicConfig::default(), NicConfig::new(GigaflowConfig::default())] {
            for delay_ns in [0, 20_000_000] {
                let switch = SwitchConfig {
                    nic: Some(nic.clone()),
                    revalidation_delay_ns: delay_ns,
                    max_idle_ns: 300_000_000,
                    ..SwitchConfig::default()
                };
                let mut wrong = 0;
                let outcome =
                    run(&workload, &ReplayConfig { switch, time_host: false, warmup_ns: None }, &mut |d| {
                        wrong += (d.outputs != want[d.index as usize].as_slice()) as u64;
                        Ok(())
                    })
                    .unwrap();
                let r = &outcome.report;
                assert!(
                    r.updates > 50 && r.retranslations > 100,
                    "{} updates, {} re-translated",
                    r.updates,
                    r.retranslations
                );
                assert!(r.nic_revalidated + r.megaflow_revalidated > 0, "some entries evicted");
                assert_eq!(wrong, r.stale_wrong, "only stale decisions may differ from the slow path");
                if delay_ns == 0 {
                    assert_eq!(r.stale, 0);
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 4);
    }
}
