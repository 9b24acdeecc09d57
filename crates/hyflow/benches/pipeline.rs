//! Full traversal + megaflow generation per second on a 7-table L2/L3/ACL pipeline with 10k
//! rules, against the same traversal with brute-force table lookups (the baseline).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hyflow::openflow::reference::linear_lookup;
use hyflow::openflow::{Pipeline, Traversal};

#[path = "workload.rs"]
mod workload;

const BATCH: usize = 1024;

fn bench_pipeline(c: &mut Criterion) {
    let (rules, packets) = workload::l2l3acl_workload(10_000, BATCH, 11);
    let pipeline = Pipeline::from_rules(rules);
    let mut group = c.benchmark_group("pipeline");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(20);
    group.bench_function("traversal_megaflow/7tables_10k_rules", |b| {
        let mut tr = Traversal::new();
        b.iter(|| {
            let mut outputs = 0usize;
            for p in &packets {
                pipeline.process(black_box(p), &mut tr);
                outputs += tr.outputs.len();
                black_box(&tr.megaflow);
            }
            outputs
        })
    });
    // Baseline: the lookups alone, each table scanned linearly along the same path.
    let mut tr = Traversal::new();
    let paths: Vec<Vec<(u8, hyflow::packet::FlowKey)>> = packets
        .iter()
        .map(|p| {
            pipeline.process(p, &mut tr);
            tr.steps.iter().map(|s| (s.table, s.flow)).collect()
        })
        .collect();
    group.bench_function("linear_lookups_same_path/7tables_10k_rules", |b| {
        b.iter(|| {
            let mut hits = 0usize;
            for path in &paths {
                for (t, k) in path {
                    hits += linear_lookup(&pipeline, *t, black_box(k)).is_some() as usize;
                }
            }
            hits
        })
    });
    group.finish();
}

criterion_group!(benches, bench_pipeline);
criterion_main!(benches);
