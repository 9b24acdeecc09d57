//! FlexKVS's store (FlexNIC §3.1): a block-chain hash table and a log-structured item
//! allocator, safe to share between cores.
//!
//! **Hash table.** Buckets are one cache line each: a spin lock, five item hashes and five
//! item references, so that a lookup compares hashes in the line it locked and touches an
//! item only when its hash matches. When a sixth item hashes to a bucket, the fifth slot
//! becomes a link to an overflow bucket (the item it held moves there), and so on: a chain
//! guarded by its head's lock. With key steering each core has a store of its own and its
//! locks stay in its cache; with flow steering the cores share one and contend for them —
//! the cost the paper's key steering removes.
//!
//! **Items** live in a log cut into fixed-size segments. Each writer (a core) appends to its
//! own active segment under a lock only it takes in the common case; a full segment is
//! sealed and a new one taken from a shared pool. An overwritten or deleted item's bytes are
//! counted as freed in its segment's header. When the pool is empty the oldest sealed
//! segment is reclaimed: its items that are still live are evicted (memcached evicts when
//! full; FlexKVS compacts in a background thread, which this store does not have), then it is
//! reused.
//!
//! **Safety.** An item's bytes are written by the one writer holding its segment, before the
//! item is linked into a bucket; they are read only under the bucket's lock, and a segment is
//! reused only after every item of it is unlinked under its bucket's lock. The lock's
//! acquire/release order makes the writes visible to readers, and no reader can hold a
//! reference into a segment being reused. Lock order: a writer's active segment, then the
//! pool, then a bucket.

// The log is raw memory written by one core and read by others under the buckets' locks, and
// a bucket line's cells are guarded by a lock in the same line: what the module's "Safety"
// argues, checked by its concurrency tests.
#![allow(unsafe_code)]

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::hint::spin_loop;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::invalid_param::InvalidParam;

/// Items a bucket line holds.
const SLOTS: usize = 5;
/// A slot's reference is a link to overflow bucket `r & !CHAIN` when this bit is set.
const CHAIN: u64 = 1 << 63;
/// Bytes of an item's header in the log.
const HEADER: usize = 32;
/// Longest key memcached takes.
pub const MAX_KEY: usize = 250;

/// Shape of a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// Bytes of the item log.
    pub memory_bytes: usize,
    /// Bytes of a log segment (the largest item fits in one).
    pub segment_bytes: usize,
    /// Writers (cores) with an active segment each.
    pub writers: usize,
}

impl StoreConfig {
    /// A store of `memory_bytes` for `writers` cores, with 1 MiB segments.
    pub fn new(memory_bytes: usize, writers: usize) -> StoreConfig {
        StoreConfig { memory_bytes, segment_bytes: 1 << 20, writers }
    }

    /// The largest value an item can hold.
    pub fn max_value(&self) -> usize {
        self.segment_bytes - HEADER - MAX_KEY
    }
}

/// One cache line of the hash table. Its cells are touched only under `lock` (a chain's
/// overflow buckets under their head's).
#[repr(C, align(64))]
struct Bucket {
    lock: AtomicU32,
    hashes: UnsafeCell<[u32; SLOTS]>,
    items: UnsafeCell<[u64; SLOTS]>,
}

impl Bucket {
    fn new() -> Bucket {
        Bucket {
            lock: AtomicU32::new(0),
            hashes: UnsafeCell::new([0; SLOTS]),
            items: UnsafeCell::new([0; SLOTS]),
        }
    }
}

/// A segment's bookkeeping (apart from its bytes, so that scanning headers touches no item).
struct SegmentHeader {
    /// Bytes of items overwritten or deleted.
    freed: AtomicU64,
    /// Bytes written, once sealed.
    end: AtomicU64,
}

/// The free and sealed segments.
struct Pool {
    free: Vec<u32>,
    /// Sealed segments, oldest first.
    sealed: VecDeque<u32>,
}

/// A writer's active segment: where its next item goes.
struct Active {
    segment: Option<u32>,
    offset: usize,
}

/// Padded to its own cache lines, so that writers' locks never share one.
#[repr(align(128))]
struct Padded<T>(T);

/// What a conditional store asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetMode {
    /// Always store (`set`).
    Set,
    /// Only if absent (`add`).
    Add,
    /// Only if present (`replace`).
    Replace,
    /// Only if present with this CAS unique (`cas`).
    Cas(u64),
}

/// How a store went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOutcome {
    /// Stored, with this CAS unique.
    Stored(u64),
    /// Not stored: the mode's condition failed (`add` found it, `replace` did not).
    NotStored,
    /// `cas`: present with another CAS unique.
    Exists,
    /// `cas`: absent.
    NotFound,
    /// The value is larger than an item can be.
    TooLarge,
}

/// An item found by [`Store::get`], lent for the reply to be written under its bucket's
/// lock.
#[derive(Clone, Copy, Debug)]
pub struct ItemView<'a> {
    /// memcached's client flags.
    pub flags: u32,
    /// Its CAS unique.
    pub cas: u64,
    /// The value.
    pub value: &'a [u8],
}

/// Counters of a store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreStats {
    /// Live items evicted to reclaim a segment.
    pub evicted: u64,
    /// Segments reclaimed.
    pub reclaimed: u64,
    /// Items found expired (and unlinked) by a lookup.
    pub expired: u64,
    /// Overflow buckets in use.
    pub overflow_buckets: u64,
}

/// The store: hash table and item log.
pub struct Store {
    config: StoreConfig,
    buckets: Box<[Bucket]>,
    bucket_mask: u32,
    /// Overflow buckets; `overflow_used` of them handed out (under the pool lock).
    overflow: Box<[Bucket]>,
    log: *mut u8,
    log_layout: Layout,
    headers: Box<[SegmentHeader]>,
    pool: Mutex<Pool>,
    overflow_used: AtomicU64,
    active: Box<[Padded<Mutex<Active>>]>,
    next_cas: AtomicU64,
    evicted: AtomicU64,
    reclaimed: AtomicU64,
    expired: AtomicU64,
}

// SAFETY: the log and the buckets' cells are reached only under the locks the module's doc
// lists (see "Safety"); everything else is atomics and mutexes.
unsafe impl Send for Store {}
// SAFETY: as above.
unsafe impl Sync for Store {}

impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: allocated in `Store::new` with this layout.
        unsafe { dealloc(self.log, self.log_layout) };
    }
}

/// Holds a bucket chain's lock; releases it when dropped.
struct Locked<'a> {
    store: &'a Store,
    head: &'a Bucket,
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.head.lock.store(0, Ordering::Release);
    }
}

/// Where an item sits in a chain: the bucket and the slot.
#[derive(Clone, Copy)]
struct Place<'a> {
    bucket: &'a Bucket,
    slot: usize,
}

impl<'a> Locked<'a> {
    /// The buckets of the chain, head first.
    fn chain(&self) -> impl Iterator<Item = &'a Bucket> + '_ {
        let store = self.store;
        std::iter::successors(Some(self.head), move |b| {
            // SAFETY: the chain's lock is held.
            let last = unsafe { (*b.items.get())[SLOTS - 1] };
            (last & CHAIN != 0).then(|| &store.overflow[(last & !CHAIN) as usize])
        })
    }

    /// The item slots of the chain (a link slot is not one).
    fn slots(&self) -> impl Iterator<Item = (Place<'a>, u32, u64)> + '_ {
        self.chain().flat_map(|bucket| {
            // SAFETY: the chain's lock is held.
            let (hashes, items) = unsafe { (*bucket.hashes.get(), *bucket.items.get()) };
            (0..SLOTS)
                .filter(move |&s| items[s] & CHAIN == 0)
                .map(move |s| (Place { bucket, slot: s }, hashes[s], items[s]))
        })
    }

    /// The live item of `key` (hash `hash`), if any.
    fn find(&self, hash: u32, key: &[u8]) -> Option<(Place<'a>, u64)> {
        self.slots()
            .find(|&(_, h, r)| r != 0 && h == hash && self.store.item_key(r) == key)
            .map(|(p, _, r)| (p, r))
    }

    fn write(&self, place: Place<'a>, hash: u32, item: u64) {
        // SAFETY: the chain's lock is held.
        unsafe {
            (*place.bucket.hashes.get())[place.slot] = hash;
            (*place.bucket.items.get())[place.slot] = item;
        }
    }

    /// Links `item` (hash `hash`) into a free slot of the chain, growing it if none is free;
    /// false if no overflow bucket is left.
    fn insert(&self, hash: u32, item: u64) -> bool {
        if let Some((place, _, _)) = self.slots().find(|&(_, _, r)| r == 0) {
            self.write(place, hash, item);
            return true;
        }
        let Some(tail) = self.chain().last() else { return false };
        let Some(next) = self.store.take_overflow() else { return false };
        // The tail's last item moves to the new bucket; its slot becomes the link.
        // SAFETY: the chain's lock is held; `next` is fresh (no other chain links it).
        unsafe {
            let moved = ((*tail.hashes.get())[SLOTS - 1], (*tail.items.get())[SLOTS - 1]);
            let fresh = &self.store.overflow[next as usize];
            *fresh.hashes.get() = [moved.0, hash, 0, 0, 0];
            *fresh.items.get() = [moved.1, item, 0, 0, 0];
            (*tail.items.get())[SLOTS - 1] = CHAIN | next as u64;
        }
        true
    }
}

impl Store {
    /// A store shaped by `config`.
    pub fn new(config: StoreConfig) -> Result<Store, InvalidParam> {
        if config.segment_bytes < 4096
            || config.segment_bytes > u32::MAX as usize
            || !config.segment_bytes.is_multiple_of(8)
        {
            return Err(InvalidParam::new("segment-bytes", "must be a multiple of 8 from 4 KiB to 4 GiB"));
        }
        let segments = config.memory_bytes / config.segment_bytes;
        if segments < config.writers + 2 || segments > u32::MAX as usize {
            return Err(InvalidParam::new(
                "memory",
                format!(
                    "must hold at least {} segments of {} bytes (one per core and two more), not {}",
                    config.writers + 2,
                    config.segment_bytes,
                    segments
                ),
            ));
        }
        if config.writers == 0 {
            return Err(InvalidParam::new("cores", "must be at least 1"));
        }
        // About four items of ~100 bytes per bucket line when the log is full.
        let buckets = (config.memory_bytes / 512).next_power_of_two().clamp(1024, 1 << 31);
        let overflow = buckets / 4 + 1024;
        let log_layout = Layout::from_size_align(segments * config.segment_bytes, 4096)
            .map_err(|_| InvalidParam::new("memory", "too large"))?;
        // SAFETY: a non-zero size (at least three segments).
        let log = unsafe { alloc_zeroed(log_layout) };
        if log.is_null() {
            return Err(InvalidParam::new(
                "memory",
                format!("{} bytes could not be allocated", log_layout.size()),
            ));
        }
        Ok(Store {
            config,
            buckets: (0..buckets).map(|_| Bucket::new()).collect(),
            bucket_mask: (buckets - 1) as u32,
            overflow: (0..overflow).map(|_| Bucket::new()).collect(),
            log,
            log_layout,
            headers: (0..segments)
                .map(|_| SegmentHeader { freed: AtomicU64::new(0), end: AtomicU64::new(0) })
                .collect(),
            pool: Mutex::new(Pool { free: (0..segments as u32).rev().collect(), sealed: VecDeque::new() }),
            overflow_used: AtomicU64::new(0),
            active: (0..config.writers)
                .map(|_| Padded(Mutex::new(Active { segment: None, offset: 0 })))
                .collect(),
            next_cas: AtomicU64::new(1),
            evicted: AtomicU64::new(0),
            reclaimed: AtomicU64::new(0),
            expired: AtomicU64::new(0),
        })
    }

    /// Its shape.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Its counters.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            evicted: self.evicted.load(Ordering::Relaxed),
            reclaimed: self.reclaimed.load(Ordering::Relaxed),
            expired: self.expired.load(Ordering::Relaxed),
            overflow_buckets: self.overflow_used.load(Ordering::Relaxed),
        }
    }

    fn lock(&self, hash: u32) -> Locked<'_> {
        // The bits above the steering table's pick the bucket (see the module `kvs`).
        let head = &self.buckets[((hash >> super::STEER_BITS) & self.bucket_mask) as usize];
        while head.lock.compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            while head.lock.load(Ordering::Relaxed) != 0 {
                spin_loop();
            }
        }
        Locked { store: self, head }
    }

    fn take_overflow(&self) -> Option<u32> {
        let n = self.overflow_used.fetch_add(1, Ordering::Relaxed);
        if (n as usize) < self.overflow.len() {
            Some(n as u32)
        } else {
            self.overflow_used.fetch_sub(1, Ordering::Relaxed);
            None
        }
    }

    /// Item reference of offset `offset` in segment `segment` (never 0, never a link).
    fn reference(&self, segment: u32, offset: usize) -> u64 {
        ((segment as u64 + 1) << 32) | offset as u64
    }

    /// The item's bytes from its start: the header, then the key and the value.
    ///
    /// Only for a linked item under its bucket's lock, or one the caller is writing.
    fn item_at(&self, item: u64) -> *mut u8 {
        let segment = (item >> 32) as usize - 1;
        let offset = (item & 0xffff_ffff) as usize;
        // SAFETY: references are made by `reference` within the log.
        unsafe { self.log.add(segment * self.config.segment_bytes + offset) }
    }

    fn header(&self, item: u64) -> ItemHeader {
        // SAFETY: see `item_at`; the header is written before the item is linked.
        unsafe { std::ptr::read_unaligned(self.item_at(item) as *const ItemHeader) }
    }

    fn item_key(&self, item: u64) -> &[u8] {
        let h = self.header(item);
        // SAFETY: the key follows the header, `key_len` bytes, written before linking.
        unsafe { std::slice::from_raw_parts(self.item_at(item).add(HEADER), h.key_len as usize) }
    }

    fn item_value(&self, item: u64) -> &[u8] {
        let h = self.header(item);
        // SAFETY: the value follows the key, `value_len` bytes, written before linking.
        unsafe {
            std::slice::from_raw_parts(
                self.item_at(item).add(HEADER + h.key_len as usize),
                h.value_len as usize,
            )
        }
    }

    /// Counts item `item`'s bytes as freed in its segment.
    fn free(&self, item: u64) {
        let h = self.header(item);
        self.headers[(item >> 32) as usize - 1].freed.fetch_add(h.total as u64, Ordering::Relaxed);
    }

    /// Looks `key` (hash `hash`) up at `now_s` (server seconds): `read` gets the item under
    /// its bucket's lock, for the reply to copy its value out. An expired item is unlinked.
    pub fn get<R>(
        &self,
        key: &[u8],
        hash: u32,
        now_s: u32,
        read: impl FnOnce(ItemView<'_>) -> R,
    ) -> Option<R> {
        let locked = self.lock(hash);
        let (place, item) = locked.find(hash, key)?;
        let h = self.header(item);
        if h.expired(now_s) {
            locked.write(place, 0, 0);
            self.free(item);
            self.expired.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(read(ItemView { flags: h.flags, cas: h.cas, value: self.item_value(item) }))
    }

    /// Deletes `key`; whether it was there (and live).
    pub fn delete(&self, key: &[u8], hash: u32, now_s: u32) -> bool {
        let locked = self.lock(hash);
        let Some((place, item)) = locked.find(hash, key) else { return false };
        let live = !self.header(item).expired(now_s);
        locked.write(place, 0, 0);
        self.free(item);
        live
    }

    /// Stores `value` under `key` (hash `hash`) as `mode` asks, appended by writer `writer`
    /// (its own active segment), with memcached's `flags` and an expiry (`expires_s`, server
    /// seconds; 0: never) at `now_s`.
    #[allow(clippy::too_many_arguments)]
    pub fn set(
        &self,
        writer: usize,
        key: &[u8],
        hash: u32,
        (flags, expires_s): (u32, u32),
        value: &[u8],
        mode: SetMode,
        now_s: u32,
    ) -> SetOutcome {
        debug_assert!(key.len() <= MAX_KEY);
        if value.len() > self.config.max_value() {
            return SetOutcome::TooLarge;
        }
        let total = (HEADER + key.len() + value.len()).next_multiple_of(8);
        let mut active = self.active[writer % self.active.len()].0.lock().unwrap_or_else(|p| p.into_inner());
        let item = self.allocate(&mut active, total);
        let cas = self.next_cas.fetch_add(1, Ordering::Relaxed);
        let header = ItemHeader {
            total: total as u32,
            hash,
            flags,
            value_len: value.len() as u32,
            expires_s,
            key_len: key.len() as u16,
            pad: 0,
            cas,
        };
        // SAFETY: `item` is `total` bytes of the writer's active segment, which no one else
        // writes and no bucket links yet.
        unsafe {
            let at = self.item_at(item);
            std::ptr::write_unaligned(at as *mut ItemHeader, header);
            std::ptr::copy_nonoverlapping(key.as_ptr(), at.add(HEADER), key.len());
            std::ptr::copy_nonoverlapping(value.as_ptr(), at.add(HEADER + key.len()), value.len());
        }
        let locked = self.lock(hash);
        let found = locked.find(hash, key).filter(|&(place, old)| {
            if self.header(old).expired(now_s) {
                locked.write(place, 0, 0);
                self.free(old);
                self.expired.fetch_add(1, Ordering::Relaxed);
                false
            } else {
                true
            }
        });
        let outcome = match (mode, found) {
            (SetMode::Add, Some(_)) | (SetMode::Replace, None) => SetOutcome::NotStored,
            (SetMode::Cas(_), None) => SetOutcome::NotFound,
            (SetMode::Cas(want), Some((_, old))) if self.header(old).cas != want => SetOutcome::Exists,
            (_, Some((place, old))) => {
                locked.write(place, hash, item);
                self.free(old);
                SetOutcome::Stored(cas)
            }
            (_, None) => {
                if !locked.insert(hash, item) {
                    // No overflow bucket left: the chain's last item makes room (an eviction).
                    let last = locked.slots().last().map(|(p, _, r)| (p, r));
                    if let Some((place, old)) = last {
                        locked.write(place, hash, item);
                        self.free(old);
                        self.evicted.fetch_add(1, Ordering::Relaxed);
                    }
                }
                SetOutcome::Stored(cas)
            }
        };
        if !matches!(outcome, SetOutcome::Stored(_)) {
            self.free(item);
        }
        outcome
    }

    /// `total` bytes in the writer's active segment, sealing it and taking another when it
    /// is full (reclaiming the oldest sealed segment when the pool has none).
    fn allocate(&self, active: &mut Active, total: usize) -> u64 {
        if let Some(segment) = active.segment {
            if active.offset + total <= self.config.segment_bytes {
                let item = self.reference(segment, active.offset);
                active.offset += total;
                return item;
            }
        }
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(full) = active.segment.take() {
            self.headers[full as usize].end.store(active.offset as u64, Ordering::Relaxed);
            pool.sealed.push_back(full);
        }
        let segment = match pool.free.pop() {
            Some(s) => s,
            None => {
                let oldest = pool.sealed.pop_front().expect("more segments than writers: one is sealed");
                self.reclaim(oldest);
                oldest
            }
        };
        drop(pool);
        self.headers[segment as usize].freed.store(0, Ordering::Relaxed);
        active.segment = Some(segment);
        active.offset = total;
        self.reference(segment, 0)
    }

    /// Unlinks the items of sealed segment `segment` that are still linked (evictions), so
    /// that it can be reused.
    fn reclaim(&self, segment: u32) {
        let end = self.headers[segment as usize].end.load(Ordering::Relaxed) as usize;
        let mut offset = 0;
        while offset < end {
            let item = self.reference(segment, offset);
            let h = self.header(item);
            let locked = self.lock(h.hash);
            if let Some((place, _, _)) = locked.slots().find(|&(_, _, r)| r == item) {
                locked.write(place, 0, 0);
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
            drop(locked);
            offset += h.total as usize;
        }
        self.reclaimed.fetch_add(1, Ordering::Relaxed);
    }
}

/// An item's header in the log.
#[repr(C)]
#[derive(Clone, Copy)]
struct ItemHeader {
    /// Bytes of the item, header included, a multiple of 8.
    total: u32,
    hash: u32,
    flags: u32,
    value_len: u32,
    /// Server second it expires at (0: never).
    expires_s: u32,
    key_len: u16,
    pad: u16,
    cas: u64,
}

const _: () = assert!(size_of::<ItemHeader>() == HEADER);

impl ItemHeader {
    fn expired(&self, now_s: u32) -> bool {
        self.expires_s != 0 && self.expires_s <= now_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvs::key_hash;
    use std::collections::HashMap;

    fn value_of(store: &Store, key: &[u8]) -> Option<Vec<u8>> {
        store.get(key, key_hash(key), 0, |v| v.value.to_vec())
    }

    fn put(store: &Store, writer: usize, key: &[u8], value: &[u8], mode: SetMode) -> SetOutcome {
        store.set(writer, key, key_hash(key), (0, 0), value, mode, 0)
    }

    #[test]
    fn a_bucket_line_is_one_cache_line() {
        assert_eq!(size_of::<Bucket>(), 64);
    }

    #[test]
    fn keys_sharing_a_bucket_chain_past_five_items() {
        let store = Store::new(StoreConfig::new(8 << 20, 1)).unwrap();
        // Keys whose hashes pick the same bucket: equal in the bits above the steering
        // table's, for the store's bucket mask.
        let mask = store.bucket_mask;
        let target = (key_hash(b"k0") >> crate::kvs::STEER_BITS) & mask;
        let keys: Vec<Vec<u8>> = (0..2_000_000u32)
            .map(|i| format!("k{i}").into_bytes())
            .filter(|k| (key_hash(k) >> crate::kvs::STEER_BITS) & mask == target)
            .take(12)
            .collect();
        assert_eq!(keys.len(), 12);
        for (i, k) in keys.iter().enumerate() {
            assert!(matches!(put(&store, 0, k, &[i as u8; 9], SetMode::Set), SetOutcome::Stored(_)));
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(value_of(&store, k), Some(vec![i as u8; 9]), "{i}");
        }
        assert!(store.stats().overflow_buckets >= 2);
        assert!(store.delete(&keys[3], key_hash(&keys[3]), 0));
        assert_eq!(value_of(&store, &keys[3]), None);
        assert_eq!(value_of(&store, &keys[11]), Some(vec![11; 9]));
    }

    #[test]
    fn modes_follow_memcached() {
        let store = Store::new(StoreConfig::new(8 << 20, 1)).unwrap();
        assert_eq!(put(&store, 0, b"a", b"1", SetMode::Replace), SetOutcome::NotStored);
        assert!(matches!(put(&store, 0, b"a", b"1", SetMode::Add), SetOutcome::Stored(_)));
        assert_eq!(put(&store, 0, b"a", b"2", SetMode::Add), SetOutcome::NotStored);
        let cas = store.get(b"a", key_hash(b"a"), 0, |v| v.cas).unwrap();
        assert_eq!(put(&store, 0, b"a", b"3", SetMode::Cas(cas + 100)), SetOutcome::Exists);
        assert!(matches!(put(&store, 0, b"a", b"3", SetMode::Cas(cas)), SetOutcome::Stored(_)));
        assert_eq!(put(&store, 0, b"b", b"3", SetMode::Cas(cas)), SetOutcome::NotFound);
        assert_eq!(value_of(&store, b"a"), Some(b"3".to_vec()));
        let big = vec![0; store.config().max_value() + 1];
        assert_eq!(put(&store, 0, b"big", &big, SetMode::Set), SetOutcome::TooLarge);
    }

    #[test]
    fn expired_items_are_misses() {
        let store = Store::new(StoreConfig::new(8 << 20, 1)).unwrap();
        store.set(0, b"t", key_hash(b"t"), (7, 10), b"v", SetMode::Set, 0);
        assert_eq!(store.get(b"t", key_hash(b"t"), 9, |v| v.flags), Some(7));
        assert_eq!(store.get(b"t", key_hash(b"t"), 10, |v| v.flags), None);
        assert_eq!(store.stats().expired, 1);
    }

    #[test]
    fn a_full_log_evicts_its_oldest_segment_and_keeps_serving() {
        // Three 4 KiB segments for one writer: a few dozen items fit.
        let config = StoreConfig { memory_bytes: 3 * 4096, segment_bytes: 4096, writers: 1 };
        let store = Store::new(config).unwrap();
        for i in 0..1000u32 {
            let k = format!("key{i}");
            assert!(matches!(put(&store, 0, k.as_bytes(), &[1; 60], SetMode::Set), SetOutcome::Stored(_)));
            // The item just stored is always there.
            assert_eq!(value_of(&store, k.as_bytes()), Some(vec![1; 60]));
        }
        let s = store.stats();
        assert!(s.reclaimed > 10 && s.evicted > 500, "{s:?}");
        // What survives is the newest items: no stale answer for an evicted one.
        let present =
            (0..1000u32).filter(|i| value_of(&store, format!("key{i}").as_bytes()).is_some()).count();
        assert!(present > 0 && present < 200, "{present}");
        assert!(value_of(&store, b"key999").is_some());
    }

    #[test]
    fn concurrent_writers_agree_with_a_reference_map_per_key_owner() {
        // Four threads share one store (flow steering); each owns the keys it writes, so
        // the last value it wrote for each is what every reader must see afterwards.
        let store = Store::new(StoreConfig::new(64 << 20, 4)).unwrap();
        let refs: Vec<HashMap<Vec<u8>, Vec<u8>>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|t| {
                    let store = &store;
                    s.spawn(move || {
                        let mut reference = HashMap::new();
                        let mut x = 0x9e37_79b9u32.wrapping_mul(t + 1);
                        for i in 0..20_000u32 {
                            x ^= x << 13;
                            x ^= x >> 17;
                            x ^= x << 5;
                            let key = format!("t{t}-{}", x % 500).into_bytes();
                            if x.is_multiple_of(10) {
                                store.delete(&key, key_hash(&key), 0);
                                reference.remove(&key);
                            } else {
                                let value = format!("{t}:{i}:{x}").into_bytes();
                                put(store, t as usize, &key, &value, SetMode::Set);
                                reference.insert(key.clone(), value);
                            }
                            // Other threads' keys are read concurrently (answers unchecked
                            // here: they race), which exercises the locks.
                            let other = format!("t{}-{}", (t + 1) % 4, x % 500).into_bytes();
                            let _ = value_of(store, &other);
                            if let Some(v) = reference.get(&key) {
                                assert_eq!(value_of(store, &key).as_ref(), Some(v));
                            }
                        }
                        reference
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (t, reference) in refs.iter().enumerate() {
            for i in 0..500 {
                let key = format!("t{t}-{i}").into_bytes();
                assert_eq!(value_of(&store, &key), reference.get(&key).cloned(), "{t} {i}");
            }
        }
        assert_eq!(store.stats().evicted, 0);
    }
}
