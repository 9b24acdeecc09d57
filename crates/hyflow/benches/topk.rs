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

fn stream() -> Vec<FlowId> {
    let mut rng = StdRng::seed_from_u64(7);
    let zipf = Zipf::new(100_000.0, 1.1).expect("valid Zipf");
    // Ids within the 104 bits of the 5-tuple the config declares (heaps store ids packed).
    (0..PACKETS).map(|_| FlowId::from_u128(0x0a00_0a01 << 64 | zipf.sample(&mut rng) as u128)).collect()
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let flows = stream();
    let mut group = c.benchmark_group("topk");
    group.throughput(Throughput::Elements(PACKETS as u64));
    group.sample_size(10);
    let config = DetectorConfig { k: K, memory: MEMORY, blocks: 5, sample: 1.0, seed: 1, key_bits: 104 };
    for algo in Algo::ALL {
        group.bench_function(BenchmarkId::new("insert", algo.name()), |b| {
            b.iter(|| {
                let mut d = build(algo, &config).expect("fits 30 KB");
                for (i, &f) in flows.iter().enumerate() {
                    d.insert(black_box(f), f.hash(1));
                    if i % BLOCK == BLOCK - 1 {
                        d.end_block();
                    }
                }
                d.memory_bytes()
            })
        });
    }
    let (depth, entry) = (3, 16);
    let width = (MEMORY - K * 48) / (depth * entry);
    group.bench_function(BenchmarkId::new("insert", "heavykeeper-crate"), |b| {
        b.iter(|| {
            let mut hk: heavykeeper::TopK<FlowId> = heavykeeper::TopK::new(K, width, depth, 0.925);
            for &f in &flows {
                hk.add(&black_box(f), 1);
            }
            hk.list().len()
        })
    });
    group.finish();
    c.final_summary();
}
