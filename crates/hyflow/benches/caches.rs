//! The software fast path and the whole switch, each against a baseline measured in the same
//! run:
//! - microflow cache hit lookups at 4K/64K/1M entries vs a `hashbrown` map keyed by the flow
//!   key (its own hasher, and with hyflow's precomputed key hash);
//! - megaflow cache lookups at 1/8/32 masks vs a linear scan of the same megaflows;
//! - end-to-end replay of the built-in workload (parse + NIC + caches + slow path) vs the
//!   same replay with every packet through the slow path.
//!
//! Bytes per cached microflow are measured with a counting allocator and written to
//! `target/criterion/cache_memory.json` for `scripts/bench_table.py`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use hashbrown::{HashMap, HashTable};
use hyflow::cache::{CachedFlow, Consistency, MegaflowCache, MicroflowCache};
use hyflow::decision::{Decision, DecisionTables};
use hyflow::openflow::dp_actions::DpAction;
use hyflow::openflow::{LookupRef, Match, Pipeline};
use hyflow::packet::hash::hash_key;
use hyflow::packet::{FlowKey, LinkKind};
use hyflow::switch::{Switch, SwitchConfig};
use hyflow::update_schedule::Replay;
use hyflow::workload::{builtin, generate};

#[path = "workload.rs"]
mod workload;

/// Counts live heap bytes, so memory per entry is what was really allocated.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Heap bytes `build` leaves allocated (in what it returns).
fn heap_bytes<T>(build: impl FnOnce() -> T) -> (T, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    let t = build();
    (t, LIVE.load(Ordering::Relaxed).saturating_sub(before))
}

const BATCH: usize = 1024;

fn one_decision(tables: &mut DecisionTables) -> Decision {
    let actions = tables.intern_actions(&[DpAction::Output(2)]);
    let path = tables.intern_outcomes(&[LookupRef::rule(0), LookupRef::rule(7)]);
    Decision { actions, path }
}

/// Distinct random TCP keys.
fn distinct_keys(n: usize, seed: u64) -> Vec<FlowKey> {
    let mut rng = workload::Rng::new(seed);
    let mut seen = hashbrown::HashSet::with_capacity(n);
    let mut keys = Vec::with_capacity(n);
    while keys.len() < n {
        let k = workload::random_packet(&mut rng);
        if seen.insert(k) {
            keys.push(k);
        }
    }
    keys
}

fn shuffle<T>(v: &mut [T], rng: &mut workload::Rng) {
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i as u64 + 1) as usize);
    }
}

/// Runs `lookup` over the next `BATCH` queries of a stream that cycles through `queries`.
fn stream<'a>(queries: &'a [FlowKey], cursor: &mut usize) -> &'a [FlowKey] {
    if *cursor + BATCH > queries.len() {
        *cursor = 0;
    }
    let s = &queries[*cursor..*cursor + BATCH];
    *cursor += BATCH;
    s
}

fn bench_microflow(c: &mut Criterion, memory: &mut Vec<serde_json::Value>) {
    let mut group = c.benchmark_group("microflow");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(20);
    for &(label, n) in &[("4K", 4096usize), ("64K", 65_536), ("1M", 1 << 20)] {
        let keys = distinct_keys(n, 5);
        for ways in [1usize, 4] {
            let mut tables = DecisionTables::new();
            let d = one_decision(&mut tables);
            let (mut cache, bytes) = heap_bytes(|| {
                let mut c = MicroflowCache::new(n, ways, Consistency::Action).expect("valid shape");
                for k in &keys {
                    c.insert(k, hash_key(k), d, 0, &mut tables);
                }
                c
            });
            // Query only what stayed cached (signature collisions evict in a full cache), in
            // random order over the whole working set: every lookup is a hit.
            let mut queries: Vec<FlowKey> = keys
                .iter()
                .filter(|k| cache.lookup(k, hash_key(k), &mut tables).is_some())
                .copied()
                .collect();
            shuffle(&mut queries, &mut workload::Rng::new(9));
            memory.push(serde_json::json!({
                "structure": format!("microflow_{ways}way"), "entries": label,
                "cached": cache.len(), "bytes_per_entry": bytes as f64 / cache.len() as f64,
            }));
            let mut cursor = 0;
            group.bench_function(BenchmarkId::new(format!("flowshadow_{ways}way"), label), |b| {
                b.iter(|| {
                    let mut hits = 0u32;
                    for k in stream(&queries, &mut cursor) {
                        hits += cache.lookup(black_box(k), hash_key(k), &mut tables).is_some() as u32;
                    }
                    hits
                })
            });
            let mut cursor = 0;
            let (mut hashes, mut out) = (vec![0u64; BATCH], vec![None; BATCH]);
            group.bench_function(BenchmarkId::new(format!("flowshadow_{ways}way_batch"), label), |b| {
                b.iter(|| {
                    let batch = stream(&queries, &mut cursor);
                    for (h, k) in hashes.iter_mut().zip(batch) {
                        *h = hash_key(black_box(k));
                    }
                    cache.lookup_batch(batch, &hashes, &mut out, &mut tables);
                    out.iter().filter(|d| d.is_some()).count()
                })
            });
            if ways != 1 {
                continue;
            }
            // Baselines over the same keys and the same query stream.
            let (map, bytes) = heap_bytes(|| {
                let mut m: HashMap<FlowKey, Decision> = HashMap::with_capacity(n);
                m.extend(keys.iter().map(|k| (*k, d)));
                m
            });
            memory.push(serde_json::json!({
                "structure": "hashbrown_map", "entries": label,
                "cached": map.len(), "bytes_per_entry": bytes as f64 / map.len() as f64,
            }));
            let mut cursor = 0;
            group.bench_function(BenchmarkId::new("hashbrown_map", label), |b| {
                b.iter(|| {
                    let mut hits = 0u32;
                    for k in stream(&queries, &mut cursor) {
                        hits += map.get(black_box(k)).is_some() as u32;
                    }
                    hits
                })
            });
            let mut table: HashTable<(FlowKey, Decision)> = HashTable::with_capacity(n);
            for k in &keys {
                table.insert_unique(hash_key(k), (*k, d), |(k, _)| hash_key(k));
            }
            let mut cursor = 0;
            group.bench_function(BenchmarkId::new("hashbrown_table_keyhash", label), |b| {
                b.iter(|| {
                    let mut hits = 0u32;
                    for k in stream(&queries, &mut cursor) {
                        let k = black_box(k);
                        hits += table.find(hash_key(k), |(e, _)| e == k).is_some() as u32;
                    }
                    hits
                })
            });
        }
    }
    group.finish();
}

fn bench_megaflow(c: &mut Criterion) {
    let mut group = c.benchmark_group("megaflow");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(20);
    for &n_masks in &[1usize, 8, 32] {
        let (matches, packets) = workload::megaflow_workload(10_000, n_masks, 13);
        let mut tables = DecisionTables::new();
        let decision = one_decision(&mut tables);
        let mut cache = MegaflowCache::megaflow_cache(matches.len()).expect("non-empty");
        let mut installed: Vec<Match> = Vec::new();
        for (m, p) in matches.iter().zip(&packets) {
            if cache.install(m, 0, 0, CachedFlow::new(*p, decision), 0).is_ok() {
                installed.push(*m);
            }
        }
        assert_eq!(cache.space().n_masks(), n_masks);
        let mut queries = packets.clone();
        shuffle(&mut queries, &mut workload::Rng::new(3));
        let id = format!("{n_masks}masks");
        let mut cursor = 0;
        let mut now = 0u64;
        group.bench_function(BenchmarkId::new("tuple_space", &id), |b| {
            b.iter(|| {
                let mut hits = 0u32;
                for k in stream(&queries, &mut cursor) {
                    now += 1;
                    hits += cache.lookup(black_box(k), 0, 64, now).is_some() as u32;
                }
                hits
            })
        });
        let mut cursor = 0;
        group.bench_function(BenchmarkId::new("linear_scan", &id), |b| {
            b.iter(|| {
                let mut hits = 0u32;
                for k in stream(&queries, &mut cursor) {
                    hits += installed.iter().any(|m| m.matches(black_box(k))) as u32;
                }
                hits
            })
        });
    }
    group.finish();
}

fn bench_replay(c: &mut Criterion) {
    let rules = builtin::rules();
    let updates = builtin::updates(&rules);
    // Frames back to back in one buffer, as a trace reader's buffer holds them.
    let (mut bytes, mut frames) = (Vec::new(), Vec::with_capacity(builtin::TRAFFIC.packets));
    generate(&rules, &builtin::TRAFFIC, |p| {
        frames.push((p.ts_ns, bytes.len()..bytes.len() + p.frame.len()));
        bytes.extend_from_slice(&p.frame);
        Ok(())
    })
    .expect("built-in traffic generates")
    .expect("in memory");
    let mut group = c.benchmark_group("replay");
    group.throughput(Throughput::Elements(frames.len() as u64));
    group.sample_size(10);
    let configs = [
        ("builtin_default", SwitchConfig::default()),
        ("builtin_no_nic", SwitchConfig { nic: None, ..SwitchConfig::default() }),
        ("builtin_no_cache", SwitchConfig::no_cache()),
    ];
    for (name, config) in configs {
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let sw = Switch::new(Pipeline::from_rules(rules.clone()), config.clone())
                        .expect("valid config");
                    (Replay::new(sw, updates.clone()), Vec::new())
                },
                |(mut replay, mut outputs)| {
                    let mut key = FlowKey::default();
                    for (ts, range) in &frames {
                        let frame = &bytes[range.clone()];
                        let len = frame.len() as u64 + 4;
                        black_box(hyflow::input::parse(black_box(frame), LinkKind::Ethernet, 1, &mut key));
                        replay.packet(*ts, &key, len, &mut outputs);
                    }
                    // Returned, so that freeing the switch is not timed.
                    replay.finish().0
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let mut memory = Vec::new();
    bench_microflow(&mut c, &mut memory);
    bench_megaflow(&mut c);
    bench_replay(&mut c);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/criterion/cache_memory.json");
    if std::fs::create_dir_all(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/criterion")).is_ok() {
        let _ = std::fs::write(path, serde_json::to_string_pretty(&memory).expect("plain JSON"));
    }
    for m in &memory {
        println!("memory: {m}");
    }
    c.final_summary();
}
