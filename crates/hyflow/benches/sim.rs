//! The timing simulation's own speed: simulated packets per second on one core on the
//! built-in workload (offload-all, 1 core, parsed packets in memory), against the same
//! packets and rule updates through the switch alone (`Replay::packet`, no rings, no
//! clock): the price of the event-driven machinery on top of forwarding. And Elixir in steady
//! state on gateway traffic (2 M packets in memory, about 92% NIC hits, 20% of those sampled),
//! the issue-13 case whose target is 20 M simulated packets/s.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput};
use hyflow::cost_model::CostModel;
use hyflow::offload::upcall::UpcallOffload;
use hyflow::offload::{NicUpdates, PolicyMachine};
use hyflow::openflow::Pipeline;
use hyflow::packet::{parse_frame, FlowKey, LinkKind};
use hyflow::switch::{Switch, SwitchConfig};
use hyflow::timing::switch_datapath::SwitchDatapath;
use hyflow::timing::{SimConfig, SimPacket, Simulator};
use hyflow::update_schedule::Replay;
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
        packets.push((p.ts_ns, SimPacket { key, bytes: p.frame.len() as u32 + 4, index, flow: None }));
        Ok(())
    })
    .expect("built-in traffic generates")
    .expect("in memory");
    let policy = UpcallOffload::OffloadAll(hyflow::nic::NicConfig::default());
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
                    config.clone(),
                    policy.clone(),
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
                let sw =
                    Switch::new(Pipeline::from_rules(rules.clone()), config.clone()).expect("valid config");
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
    gateway(&mut c);
    c.final_summary();
}

/// Elixir in steady state on gateway traffic at 2 Mpps: 20,000 steady flows and 100 bursty
/// ones, a large area of 4,000 entries (the top 20%), windows scaled down 100× (L = 0.3 s,
/// T = 0.1 s) and the NIC update cap up as much (100,000/s), so that 2 s of warm-up (in the
/// setup, not timed) reach the steady state a paper-scale run reaches after 20 s. The timed
/// part is the next second: 2 M packets, about 92% NIC hits, 20% of those sampled to the host.
fn gateway(c: &mut Criterion) {
    use hyflow::offload::elixir::{Elixir, ElixirConfig};
    use hyflow::workload::gateway::{Gateway, GatewayConfig};
    const WARMUP_NS: u64 = 2_000_000_000;
    let traffic = GatewayConfig {
        flows: 20_000,
        bursty_flows: 100,
        rate: 2e6,
        duration_ns: WARMUP_NS + 1_000_000_000,
        ..GatewayConfig::elixir_scale()
    };
    let g = Gateway::new(traffic).expect("valid traffic");
    let keys = g.keys().to_vec();
    let packets: Vec<(u64, SimPacket)> = g
        .enumerate()
        .map(|(i, p)| {
            (
                p.ts_ns,
                SimPacket { key: keys[p.flow as usize], bytes: p.bytes, index: i as u64, flow: Some(p.flow) },
            )
        })
        .collect();
    let split = packets.partition_point(|(t, _)| *t < packets[0].0 + WARMUP_NS);
    let (warmup, timed) = packets.split_at(split);
    let rules = hyflow::openflow::parse_flows(hyflow::workload::GATEWAY_FLOWS, "gateway").expect("parses");
    let config = ElixirConfig {
        large_entries: 4_000,
        bursty_entries: 20,
        identification_window_ns: 300_000_000,
        replacement_window_ns: 100_000_000,
        ..ElixirConfig::default()
    };
    let limits = NicUpdates { per_second: 100_000.0, ..NicUpdates::default() };
    // Metrics count the timed second only.
    let machine = SimConfig { sample_hw: config.sample_rate, warmup_ns: WARMUP_NS, ..SimConfig::default() };
    let warmed = || {
        let policy =
            Elixir::new(config, &PolicyMachine { ring: machine.ring, limits, ..PolicyMachine::default() })
                .expect("valid");
        let pipeline = Pipeline::from_rules(rules.clone());
        let base = SwitchConfig { nic: None, ..SwitchConfig::default() };
        let dp = SwitchDatapath::new(pipeline, base, policy, CostModel::default(), Vec::new(), limits)
            .expect("valid config");
        let mut sim = Simulator::new(machine.clone(), dp).expect("valid machine");
        for (t, p) in warmup {
            sim.arrive(*t, p);
        }
        sim
    };
    let (metrics, _) = {
        let mut sim = warmed();
        for (t, p) in timed {
            sim.arrive(*t, p);
        }
        sim.finish()
    };
    let hw_share = metrics.hw as f64 / metrics.packets.max(1) as f64;
    eprintln!("sim/gateway_elixir_1core: {:.1}% of the timed packets are NIC hits", hw_share * 100.0);
    let mut group = c.benchmark_group("sim");
    group.throughput(Throughput::Elements(timed.len() as u64));
    group.sample_size(10);
    group.bench_function("gateway_elixir_1core", |b| {
        b.iter_batched(
            warmed,
            |mut sim| {
                for (t, p) in timed {
                    sim.arrive(*t, black_box(p));
                }
                sim.finish()
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}
