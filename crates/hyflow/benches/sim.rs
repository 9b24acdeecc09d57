//! The timing simulation's own speed: simulated packets per second on one core on the
//! built-in workload (offload-all, 1 core, parsed packets in memory), against the same
//! packets and rule updates through the switch alone (`Replay::packet`, no rings, no
//! clock): the price of the event-driven machinery on top of forwarding.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput};
use hyflow::offload::upcall::UpcallOffload;
use hyflow::offload::NicUpdates;
use hyflow::openflow::Pipeline;
use hyflow::packet::{parse_frame, FlowKey, LinkKind};
use hyflow::replay::Replay;
use hyflow::sim::costs::CostModel;
use hyflow::sim::datapath::SwitchDatapath;
use hyflow::sim::{SimConfig, SimPacket, Simulator};
use hyflow::switch::{Switch, SwitchConfig};
use hyflow::workload::{builtin, generate};

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let rules = builtin::rules();
    let updates = builtin::updates(&rules);
    let mut packets = Vec::new();
    generate(&rules, &builtin::TRAFFIC, |p| {
        let mut key = FlowKey::default();
        let _ = parse_frame(&p.frame, LinkKind::Ethernet, 1, &mut key);
        let index = packets.len() as u64;
        packets.push((p.ts_ns, SimPacket { key, bytes: p.frame.len() as u32 + 4, index }));
        Ok(())
    })
    .expect("built-in traffic generates")
    .expect("in memory");
    let policy = UpcallOffload::OffloadAll {
        entries: hyflow::nic::DEFAULT_MEGAFLOW_ENTRIES,
        max_masks: hyflow::nic::DEFAULT_MEGAFLOW_MASKS,
    };
    let config = SwitchConfig::default();
    let mut group = c.benchmark_group("sim");
    group.throughput(Throughput::Elements(packets.len() as u64));
    group.sample_size(10);
    group.bench_function("builtin_offload_all_1core", |b| {
        b.iter_batched(
            || {
                let pipeline = Pipeline::from_rules(rules.clone());
                // No update cap, so that the switch does the same work as below.
                let limits = NicUpdates { per_second: 0.0, ..NicUpdates::default() };
                let dp = SwitchDatapath::new(
                    pipeline,
                    config,
                    policy,
                    CostModel::default(),
                    updates.clone(),
                    limits,
                )
                .expect("valid config");
                Simulator::new(SimConfig::default(), dp).expect("valid machine")
            },
            |mut sim| {
                for (t, p) in &packets {
                    sim.arrive(*t, black_box(p));
                }
                sim.finish()
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("builtin_switch_only", |b| {
        b.iter_batched(
            || {
                let sw = Switch::new(Pipeline::from_rules(rules.clone()), config).expect("valid config");
                (Replay::new(sw, updates.clone()), Vec::new())
            },
            |(mut replay, mut out)| {
                for (t, p) in &packets {
                    replay.packet(*t, black_box(&p.key), p.bytes as u64, &mut out);
                }
                replay.finish().0
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
    c.final_summary();
}
