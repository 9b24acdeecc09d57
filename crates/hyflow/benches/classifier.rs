//! Classifier lookups/s for 1k/10k/100k rules and 1/8/32 masks, against a brute-force scan of
//! the same rules in the same run.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use hyflow::openflow::classifier::{Classifier, ClsEntry};
use hyflow::openflow::rule::Match;
use hyflow::packet::FlowMask;

#[path = "workload.rs"]
mod workload;

const BATCH: usize = 1024;

fn bench_lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("classifier");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(20);
    for &n_rules in &[1_000usize, 10_000, 100_000] {
        for &n_masks in &[1usize, 8, 32] {
            let (rules, packets) = workload::classifier_workload(n_rules, n_masks, BATCH, 7);
            let mut cls = Classifier::new();
            let mut flat: Vec<(Match, u16, u32)> = Vec::new();
            for (i, r) in rules.iter().enumerate() {
                if cls.find_exact(&r.matcher, r.priority).is_none() {
                    cls.insert(
                        &r.matcher,
                        ClsEntry { rule: i as u32, priority: r.priority, seq: i as u64, soft: false },
                    );
                    flat.push((r.matcher, r.priority, i as u32));
                }
            }
            let id = format!("{n_rules}rules/{n_masks}masks");
            group.bench_with_input(BenchmarkId::new("tss_lookup", &id), &packets, |b, pkts| {
                b.iter(|| {
                    let mut hits = 0u32;
                    for p in pkts {
                        hits += cls.lookup(black_box(p)).is_some() as u32;
                    }
                    hits
                })
            });
            group.bench_with_input(BenchmarkId::new("tss_lookup_batch", &id), &packets, |b, pkts| {
                let mut out = vec![None; pkts.len()];
                b.iter(|| {
                    cls.lookup_batch(black_box(pkts), &mut out);
                    out.iter().filter(|e| e.is_some()).count()
                })
            });
            group.bench_with_input(BenchmarkId::new("tss_lookup_wc", &id), &packets, |b, pkts| {
                b.iter(|| {
                    let mut hits = 0u32;
                    for p in pkts {
                        let mut wc = FlowMask::CATCHALL;
                        hits += cls.lookup_wc(black_box(p), &mut wc).is_some() as u32;
                        black_box(&wc);
                    }
                    hits
                })
            });
            if n_rules <= 10_000 {
                group.bench_with_input(BenchmarkId::new("linear_scan", &id), &packets, |b, pkts| {
                    b.iter(|| {
                        let mut hits = 0u32;
                        for p in pkts {
                            let best = flat
                                .iter()
                                .filter(|(m, _, _)| m.matches(black_box(p)))
                                .max_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2)));
                            hits += best.is_some() as u32;
                        }
                        hits
                    })
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench_lookup);
criterion_main!(benches);
