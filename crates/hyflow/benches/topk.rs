//! Top-k detectors: packets per second on one core over an in-memory stream of flow ids
//! (Zipf 1.1 over 100,000 flows; the window slides every 100,000 packets), each at 30 KB
//! and k = 100, per-packet hashing included. The outside reference is the `heavykeeper`
//! crate at the same memory: its buckets are a 64-bit fingerprint and a 64-bit count.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput};
use hyflow::measure::{build, Algo, DetectorConfig, FlowId};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Zipf};

const PACKETS: usize = 1_000_000;
const BLOCK: usize = 100_000;
const MEMORY: usize = 30 * 1024;
const K: usize = 100;

/// The packets' flows as 5-tuples packed into 16 bytes (104 bits, the width the config
/// declares). Each pass builds its `FlowId` per packet, as a `Monitor` builds it from the
/// packet's key, so that the detectors and the crate read the same 16 bytes per packet (a
/// stream of 48-byte `FlowId`s would charge them three times the memory traffic).
fn stream() -> Vec<u128> {
    let mut rng = StdRng::seed_from_u64(7);
    let zipf = Zipf::new(100_000.0, 1.1).expect("valid Zipf");
    (0..PACKETS).map(|_| 0x0a00_0a01 << 64 | zipf.sample(&mut rng) as u128).collect()
}

fn config() -> DetectorConfig {
    DetectorConfig { k: K, memory: MEMORY, blocks: 5, sample: 1.0, seed: 1, key_bits: 104 }
}

/// One pass of a detector over the stream, per-packet hashing and block ends included: what
/// criterion times, and what `--once` runs under callgrind (`scripts/topk_instructions.sh`
/// counts the instructions inside this function).
#[inline(never)]
fn measured_pass(algo: Algo, flows: &[u128]) -> usize {
    let mut d = build(algo, &config()).expect("fits 30 KB");
    for (i, &id) in flows.iter().enumerate() {
        let f = FlowId::from_u128(black_box(id));
        d.insert(f, f.hash(1));
        if i % BLOCK == BLOCK - 1 {
            d.end_block();
        }
    }
    d.memory_bytes()
}

/// [`measured_pass`] for the `heavykeeper` crate, at the same memory: a bucket is a 64-bit
/// fingerprint and a 64-bit count, and its heap of k ids is charged 48 B per flow.
#[inline(never)]
fn measured_pass_crate(ids: &[u128]) -> usize {
    let (depth, entry) = (3, 16);
    let width = (MEMORY - K * 48) / (depth * entry);
    let mut hk: heavykeeper::TopK<u128> = heavykeeper::TopK::new(K, width, depth, 0.925);
    for id in ids {
        hk.add(black_box(id), 1);
    }
    hk.list().len()
}

const CRATE: &str = "heavykeeper-crate";

fn main() {
    let flows = stream();
    // `--once NAME`: one pass of one detector, for callgrind.
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--once") {
        let name = args.get(i + 1).map(String::as_str).unwrap_or_default();
        let kept = match Algo::from_name(name) {
            Some(algo) => measured_pass(algo, &flows),
            None if name == CRATE => measured_pass_crate(&flows),
            None => panic!("--once takes a detector name or {CRATE}, not {name:?}"),
        };
        println!("{name}: {PACKETS} packets ({kept})");
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("topk");
    group.throughput(Throughput::Elements(PACKETS as u64));
    group.sample_size(10);
    for algo in Algo::ALL {
        group.bench_function(BenchmarkId::new("insert", algo.name()), |b| {
            b.iter(|| measured_pass(algo, &flows))
        });
    }
    group.bench_function(BenchmarkId::new("insert", CRATE), |b| b.iter(|| measured_pass_crate(&flows)));
    group.finish();
    c.final_summary();
}
