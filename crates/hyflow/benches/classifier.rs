//! Classifier lookups/s for 1k/10k/100k rules and 1/8/32 masks, against a brute-force scan of
//! the same rules in the same run; and a policy written as conjunctive matches against the
//! same policy as the cross product of its dimensions.

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
                let entry = ClsEntry { rule: i as u32, priority: r.priority, seq: i as u64, soft: false };
                if cls.insert(&r.matcher(), entry).is_ok() {
                    flat.push((r.matcher(), r.priority, i as u32));
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

/// An ACL allowing `n` sources × `n` destinations × 10 ports: as conjunctions (2n + 10 clause
/// flows and one `conj_id` flow) and as the cross product (10 n² flows), with a default drop;
/// half the packets are allowed.
fn bench_conjunction(c: &mut Criterion) {
    use hyflow::openflow::{parse_flows, parse_packet, Pipeline};
    let mut group = c.benchmark_group("conjunction");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(20);
    let n = 30;
    let src = |i: usize| format!("10.{}.0.0/16", i);
    let dst = |j: usize| format!("172.16.{}.0/24", j);
    let port = |k: usize| 8000 + k * 7;
    let mut conj = String::from("priority=0 actions=drop\npriority=100,conj_id=1 actions=output:2\n");
    let mut cross = String::from("priority=0 actions=drop\n");
    for i in 0..n {
        conj.push_str(&format!("priority=100,ip,nw_src={} actions=conjunction(1,1/3)\n", src(i)));
        conj.push_str(&format!("priority=100,ip,nw_dst={} actions=conjunction(1,2/3)\n", dst(i)));
    }
    for k in 0..10 {
        conj.push_str(&format!("priority=100,tcp,tp_dst={} actions=conjunction(1,3/3)\n", port(k)));
    }
    for i in 0..n {
        for j in 0..n {
            for k in 0..10 {
                cross.push_str(&format!(
                    "priority=100,tcp,nw_src={},nw_dst={},tp_dst={} actions=output:2\n",
                    src(i),
                    dst(j),
                    port(k)
                ));
            }
        }
    }
    let packets: Vec<_> = (0..BATCH)
        .map(|x| {
            let allowed = x % 2 == 0;
            let (i, j, k) = (x * 7 % n, x * 13 % n, x % 10);
            let d = if allowed { port(k) } else { port(k) + 1 };
            parse_packet(&format!(
                "in_port=1,tcp,nw_src=10.{i}.3.4,nw_dst=172.16.{j}.9,tp_src=999,tp_dst={d}"
            ))
            .unwrap()
        })
        .collect();
    for (name, text) in [("conjunctive", &conj), ("cross_product", &cross)] {
        let p = Pipeline::from_rules(parse_flows(text, name).unwrap());
        let id = format!("{n}x{n}x10/{}rules", p.len());
        // As the slow path looks up: its scratch memory kept between lookups.
        let mut scratch = hyflow::openflow::classifier::LookupScratch::default();
        group.bench_with_input(BenchmarkId::new(name, &id), &packets, |b, pkts| {
            b.iter(|| {
                let mut hits = 0u32;
                for pk in pkts {
                    let mut wc = FlowMask::CATCHALL;
                    let hit = p.table(0).lookup_wc_in(black_box(pk), &mut wc, &mut scratch);
                    hits += hit.is_some_and(|e| e.priority == 100) as u32;
                    black_box(&wc);
                }
                hits
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_lookup, bench_conjunction);
criterion_main!(benches);
