//! Gigaflow on the NIC (issue 4): LTM lookups through 4 tagged stages against the single
//! Megaflow stage, both filled from the same Pipebench workload; and partitioning + rule
//! generation per upcall against the slow-path translation that precedes it.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use hyflow::decision::CachedHit;
use hyflow::decision::DecisionTables;
use hyflow::nic::gigaflow::{Gigaflow, GigaflowConfig};
use hyflow::nic::{Arrival, MegaflowOffload, NicScheme, Upcall};
use hyflow::openflow::execute::outputs_of;
use hyflow::openflow::{parse_flows, Pipeline, Traversal};
use hyflow::packet::{parse_frame, FlowKey, LinkKind};
use hyflow::workload::flow_arrivals::FlowArrivals;
use hyflow::workload::pipebench::{pipebench, Locality, PipebenchConfig};
use hyflow::workload::pipelines;

const BATCH: usize = 1024;

/// A Pipebench workload: the pipeline, the trace's packets, and the distinct flows in order
/// of first appearance.
fn workload(kind: &str) -> (Pipeline, Vec<FlowKey>, Vec<FlowKey>) {
    let template = pipelines::by_name(kind).expect("known template");
    let config = PipebenchConfig {
        rules: 10_000,
        headers: 100_000,
        locality: Locality::High,
        popularity: 1.0,
        seed: 1,
    };
    let workload = pipebench(template, &config).expect("valid workload");
    let mut packets = Vec::with_capacity(200_000);
    let slots = FlowArrivals::new(200_000, 20_000, 100_000.0, 1).expect("valid timing");
    workload
        .fold(slots, |p| {
            let mut k = FlowKey::default();
            parse_frame(&p.frame, LinkKind::Ethernet, 1, &mut k).expect("generated frames parse");
            packets.push(k);
            Ok(())
        })
        .expect("in memory");
    let pipeline = Pipeline::from_rules(parse_flows(&workload.flows, kind).expect("generated rules parse"));
    let mut seen = hashbrown::HashSet::new();
    let flows = packets.iter().filter(|k| seen.insert(**k)).copied().collect();
    (pipeline, packets, flows)
}

/// The slow-path traversal of each flow, recorded for Gigaflow.
fn traversals(pipeline: &mut Pipeline, flows: &[FlowKey]) -> Vec<Traversal> {
    flows
        .iter()
        .map(|k| {
            let mut tr = Traversal::new();
            tr.record_segments = true;
            pipeline.process(k, &mut tr);
            tr
        })
        .collect()
}

fn stream<'a>(queries: &'a [FlowKey], cursor: &mut usize) -> &'a [FlowKey] {
    if *cursor + BATCH > queries.len() {
        *cursor = 0;
    }
    let s = &queries[*cursor..*cursor + BATCH];
    *cursor += BATCH;
    s
}

fn bench_ltm(c: &mut Criterion) {
    let mut group = c.benchmark_group("ltm");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(20);
    for kind in ["ofd", "psc"] {
        let (mut pipeline, packets, flows) = workload(kind);
        let trs = traversals(&mut pipeline, &flows);
        let mut tables = DecisionTables::new();
        let mut gf = Gigaflow::new(GigaflowConfig::default(), 0).expect("default config");
        let mut mf =
            MegaflowOffload::new(hyflow::nic::DEFAULT_OFFLOAD_ENTRIES, hyflow::nic::DEFAULT_OFFLOAD_MASKS, 0)
                .expect("default config");
        let mut installed = Vec::new();
        for (tr, k) in trs.iter().zip(&flows) {
            let decision = tables.intern(tr);
            let upcall = Upcall { key: k, traversal: tr, decision, now_ns: 0 };
            gf.install(upcall, &mut tables, &mut installed);
            mf.install(upcall, &mut tables, &mut installed);
            tables.release(decision);
        }
        let mut hit = CachedHit::default();
        let mut outputs = Vec::new();
        let at = |key| Arrival { key, bytes: 64, now_ns: 0, flow: None };
        let gf_hits = packets.iter().filter(|k| gf.lookup(at(k), &mut hit)).count();
        let mf_hits = packets.iter().filter(|k| mf.lookup(at(k), &mut hit)).count();
        println!(
            "{kind}: {} flows; gigaflow {} entries, {} masks, {} groups, hit rate {:.3}; megaflow {} entries, \
             {} masks, {} groups, hit rate {:.3}",
            flows.len(),
            gf.len(),
            gf.stages.iter().map(|s| s.space().n_masks()).sum::<usize>(),
            gf.stages.iter().map(|s| s.space().n_groups()).sum::<usize>(),
            gf_hits as f64 / packets.len() as f64,
            mf.table.space().len(),
            mf.table.space().n_masks(),
            mf.table.space().n_groups(),
            mf_hits as f64 / packets.len() as f64,
        );
        let mut cursor = 0;
        group.bench_function(BenchmarkId::new("gigaflow_4x8K", kind), |b| {
            b.iter(|| {
                let mut hits = 0u32;
                for k in stream(&packets, &mut cursor) {
                    hits += gf.lookup(at(black_box(k)), &mut hit) as u32;
                }
                hits
            })
        });
        let mut cursor = 0;
        group.bench_function(BenchmarkId::new("megaflow_32K", kind), |b| {
            b.iter(|| {
                let mut hits = 0u32;
                for k in stream(&packets, &mut cursor) {
                    // The outputs a hit makes, as Gigaflow's chain makes them in its lookup.
                    if mf.lookup(at(black_box(k)), &mut hit) {
                        hits += 1;
                        outputs.clear();
                        let actions = hit.actions.expect("one entry holds the decision");
                        outputs_of(tables.actions().get(actions), k, &mut outputs);
                    }
                }
                hits
            })
        });
    }
    group.finish();
}

/// Installing every flow's traversal into an empty NIC large enough to refuse nothing:
/// walking the chain, partitioning and generating the entries. The baseline is the
/// translation each upcall already pays.
fn bench_partition(c: &mut Criterion) {
    let mut group = c.benchmark_group("partition");
    group.sample_size(10);
    for kind in ["ofd", "psc", "ols", "ant", "otl"] {
        let (mut pipeline, _, flows) = workload(kind);
        let trs = traversals(&mut pipeline, &flows);
        group.throughput(Throughput::Elements(trs.len() as u64));
        let config = GigaflowConfig { entries: 1 << 20, max_masks: 1 << 20, ..GigaflowConfig::default() };
        group.bench_function(BenchmarkId::new("gigaflow_dp_install", kind), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut gf = Gigaflow::new(config, 0).expect("valid config");
                    let mut tables = DecisionTables::new();
                    let mut installed = Vec::new();
                    let started = Instant::now();
                    for (tr, k) in trs.iter().zip(&flows) {
                        let decision = hyflow::decision::Decision { actions: 0, path: 0 };
                        installed.clear();
                        let upcall = Upcall { key: k, traversal: tr, decision, now_ns: 0 };
                        gf.install(upcall, &mut tables, &mut installed);
                        black_box(&installed);
                    }
                    total += started.elapsed();
                }
                total
            })
        });
        let mut tr = Traversal::new();
        tr.record_segments = true;
        group.bench_function(BenchmarkId::new("translation", kind), |b| {
            b.iter(|| {
                for k in &flows {
                    pipeline.process(black_box(k), &mut tr);
                }
                tr.steps.len()
            })
        });
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_ltm(&mut c);
    bench_partition(&mut c);
    c.final_summary();
}
