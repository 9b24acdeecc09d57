//! Elixir on the exact-match NIC table: the queue threshold, the decoupled windows, the
//! offloaded set, queue-triggered bursty offload, and the NIC's limits (area capacities,
//! update rate, counter-read rate) never exceeded.

use hyflow::cost_model::CostModel;
use hyflow::measure::{Detector, FlowId, KeySpec};
use hyflow::nic::exact_match::ExactMatch;
use hyflow::offload::elixir::{Elixir, ElixirConfig, BURSTY_AREA, LARGE_AREA};
use hyflow::offload::{NicBudget, NicControl, NicUpdates, OffloadPolicy, PolicyMachine};
use hyflow::openflow::{parse_flows, parse_packet, Pipeline};
use hyflow::packet::FlowKey;
use hyflow::switch::{Switch, SwitchConfig};
use hyflow::timing::switch_datapath::SwitchDatapath;
use hyflow::timing::{SimConfig, SimPacket, Simulator};

const S: u64 = 1_000_000_000;

fn rules() -> Pipeline {
    let text = "priority=1,ip actions=output:2\npriority=5,udp,tp_dst=53 actions=output:3\n";
    Pipeline::from_rules(parse_flows(text, "t").unwrap())
}

/// The packet of UDP flow `i`.
fn key(i: u32) -> FlowKey {
    parse_packet(&format!(
        "udp,in_port=1,nw_src=10.0.{}.{},nw_dst=192.168.0.1,tp_src={},tp_dst=80",
        i >> 8,
        i & 255,
        1000 + i % 50_000
    ))
    .unwrap()
}

fn flow(i: u32) -> FlowId {
    KeySpec::five_tuple().flow_id(&key(i)).unwrap()
}

fn pkt(i: u32) -> SimPacket {
    SimPacket { key: key(i), bytes: 64, index: 0, flow: None }
}

type Sim = Simulator<SwitchDatapath<Elixir>>;

/// Rings of `ring` packets, a NIC applying `per_second` updates (0: unlimited) at once.
fn machine(ring: usize, per_second: f64) -> PolicyMachine {
    PolicyMachine {
        ring,
        limits: NicUpdates { per_second, latency_ns: 0, ..NicUpdates::default() },
        ..PolicyMachine::default()
    }
}

fn simulator(config: ElixirConfig, ring: usize, limits: NicUpdates) -> Sim {
    let policy = Elixir::new(config, &PolicyMachine { ring, limits, ..PolicyMachine::default() }).unwrap();
    let base = SwitchConfig { nic: None, ..SwitchConfig::default() };
    let dp = SwitchDatapath::new(rules(), base, policy, CostModel::default(), Vec::new(), limits).unwrap();
    let machine = SimConfig { cores: 1, ring, nic_latency_ns: 0, ..SimConfig::default() };
    Simulator::new(machine, dp).unwrap()
}

fn table(sim: &Sim) -> &ExactMatch {
    sim.datapath().switch().nic_as::<ExactMatch>().expect("elixir drives an exact-match table")
}

#[test]
fn queue_threshold_follows_the_headroom_rule() {
    // Elixir's ring (65,536), a 67 µs update latency and 100 GbE of 64-byte frames
    // (148.8 Mpps): 9,970.2 packets of headroom, rounded up.
    let c = ElixirConfig::default();
    assert_eq!(c.threshold(65_536, 67_000).unwrap(), 65_536 - 9_971);
    // 10 Mpps for 1 ms: 10,000 packets.
    let c = ElixirConfig { nic_rate_pps: 10e6, ..ElixirConfig::default() };
    assert_eq!(c.threshold(65_536, 1_000_000).unwrap(), 55_536);
    assert!(c.threshold(10_000, 1_000_000).unwrap_err().to_string().contains("is not positive"));
    // The identification time is part of the headroom: 100 bursty counters and a 16-level
    // heap at the built-in 27.4 ns each, 3,178.4 ns, with 67 µs of update latency.
    let machine = PolicyMachine { ring: 65_536, ..PolicyMachine::default() };
    let c = ElixirConfig::default();
    assert!((c.identification_ns(&machine.costs) - 116.0 * 27.4).abs() < 1e-6);
    assert_eq!(c.headroom_ns(&machine), 70_179);
    assert_eq!(
        Elixir::new(c, &machine).unwrap().report().figures.0.last(),
        Some(&("queue_threshold", 65_536 - 10_444))
    );
    // Given: checked against the ring.
    let c = ElixirConfig { queue_threshold: Some(51_000), ..ElixirConfig::default() };
    assert_eq!(c.threshold(65_536, 67_000).unwrap(), 51_000);
    assert!(c
        .threshold(50_000, 67_000)
        .unwrap_err()
        .to_string()
        .contains("`queue-threshold` must be in 1..=50000"));
}

#[test]
fn identification_and_replacement_windows_are_decoupled() {
    let cfg = |l: u64, t: u64| ElixirConfig {
        identification_window_ns: l * S,
        replacement_window_ns: t * S,
        sketch_width: 1024,
        large_entries: 8,
        ..ElixirConfig::default()
    };
    assert_eq!(cfg(30, 10).arrays(), 3);
    assert_eq!(cfg(25, 10).arrays(), 3, "⌈L/T⌉");
    assert_eq!(cfg(10, 10).arrays(), 1);
    assert_eq!(cfg(5, 10).arrays(), 1, "L ≤ T: one array, the window grows to T");

    // N = 3: each T fills one array; at each boundary only the oldest is cleared.
    let mut e = Elixir::new(cfg(30, 10), &machine(65_536, 0.0)).unwrap();
    let large = |e: &Elixir| (0..3).map(|a| e.large().array_load(a)).collect::<Vec<_>>();
    let mut switch = Switch::new(rules(), SwitchConfig { nic: e.nic(), ..SwitchConfig::default() }).unwrap();
    let mut budget = NicBudget::new(NicUpdates { per_second: 0.0, ..NicUpdates::default() });
    let costs = CostModel::default();
    let mut seen_loads = Vec::new();
    for window in 0..5u64 {
        for i in 0..20u32 {
            let t = window * 10 * S + 1 + i as u64;
            let mut nic = NicControl::new(&mut switch, &mut budget, &costs, t);
            e.tick(&mut nic);
            let k = key(window as u32 * 100 + i);
            let seen = hyflow::offload::Seen {
                key: &k,
                flow: KeySpec::five_tuple().flow_id(&k),
                number: None,
                bytes: 64,
                core: 0,
                now_ns: t,
            };
            e.on_sample(seen, &mut nic);
        }
        seen_loads.push((e.large().current_array(), large(&e)));
    }
    for (w, (current, loads)) in seen_loads.iter().enumerate() {
        assert_eq!(*current, w % 3, "window {w} counts into array {}", w % 3);
        // Arrays of the last three windows hold counts; none is cleared before its turn.
        let filled = loads.iter().filter(|&&l| l > 0).count();
        assert_eq!(filled, (w + 1).min(3), "window {w}: {loads:?}");
    }
    // One array when L ≤ T: it is cleared at every boundary.
    let mut e = Elixir::new(cfg(5, 10), &machine(65_536, 0.0)).unwrap();
    assert_eq!(e.large().arrays(), 1);
    let mut nic = NicControl::new(&mut switch, &mut budget, &costs, 1);
    e.tick(&mut nic);
    let k = key(1);
    e.on_sample(
        hyflow::offload::Seen { key: &k, flow: Some(flow(1)), number: None, bytes: 64, core: 0, now_ns: 1 },
        &mut nic,
    );
    assert!(e.large().array_load(0) > 0);
    let mut nic = NicControl::new(&mut switch, &mut budget, &costs, 10 * S + 1);
    e.tick(&mut nic);
    assert_eq!(e.large().array_load(0), 0, "the only array is cleared at the boundary");
}

/// At each replacement the heap's flows are installed in the large-flow area and recorded in
/// the Bloom filter; flows that leave the set are evicted.
#[test]
fn large_flows_are_offloaded_and_remembered_in_the_bloom_filter() {
    let config = ElixirConfig {
        large_entries: 4,
        bursty_entries: 2,
        sample_rate: 1.0,
        identification_window_ns: S,
        replacement_window_ns: S,
        heap_rebuild_ns: Some(0),
        sketch_width: 4096,
        ..ElixirConfig::default()
    };
    let limits = NicUpdates { per_second: 0.0, latency_ns: 0, counter_reads_per_second: 0.0 };
    let mut sim = simulator(config, 65_536, limits);
    // Second 0: flows 0..4 large (100 packets each), flows 10..20 small (2 each).
    let mut t = 0;
    let mut send = |sim: &mut Sim, i: u32, n: u32, from: u64| {
        for j in 0..n {
            t = from + j as u64 * 1_000;
            sim.arrive(t, &pkt(i));
        }
    };
    for i in 0..4 {
        send(&mut sim, i, 100, i as u64 * 200_000);
    }
    for i in 10..20 {
        send(&mut sim, i, 2, 1_000_000 + i as u64 * 10_000);
    }
    // Second 1: the replacement at 1 s installs flows 0..4; flows 4..8 now dominate.
    for i in 4..8 {
        send(&mut sim, i, 200, S + i as u64 * 300_000);
    }
    let t1 = table(&sim);
    for i in 0..4 {
        assert_eq!(t1.find(flow(i)).map(|(a, _)| a), Some(LARGE_AREA), "flow {i} offloaded");
        assert!(sim
            .datapath()
            .policy()
            .large()
            .is_offloaded(flow(i).hash(sim.datapath().policy().large().hash_seed())));
    }
    for i in 10..20 {
        assert_eq!(t1.find(flow(i)), None, "small flow {i} stays in software");
    }
    // Flows 0..4 keep sending through the NIC now (the NIC forwards them: software never sees
    // them, only the samples do — none here: the simulator samples at --sample-rate via the
    // experiment, and this machine samples nothing). At 2 s flows 4..8 replace them.
    send(&mut sim, 9, 1, 2 * S + 1);
    let t2 = table(&sim);
    for i in 4..8 {
        assert_eq!(t2.find(flow(i)).map(|(a, _)| a), Some(LARGE_AREA), "flow {i} offloaded at 2 s");
    }
    for i in 0..4 {
        assert_eq!(t2.find(flow(i)), None, "flow {i} left the large set and was evicted");
    }
    assert_eq!(t2.len(LARGE_AREA), 4);
    let stats = sim.datapath().policy().stats();
    assert_eq!((stats.replacements, stats.large_offloads, stats.large_evictions), (2, 8, 4));
}

/// A burst that fills the ring past K gets its flow moved into the bursty area; with the area
/// full, it displaces the entry with the lowest rate.
#[test]
fn a_burst_crossing_k_is_offloaded_into_the_bursty_area() {
    let config = ElixirConfig {
        large_entries: 10,
        bursty_entries: 2,
        sample_rate: 0.01,
        replacement_window_ns: 1_000 * S,
        identification_window_ns: 1_000 * S,
        queue_threshold: Some(5_000),
        sketch_width: 1024,
        ..ElixirConfig::default()
    };
    let limits = NicUpdates { per_second: 2_000.0, latency_ns: 67_000, counter_reads_per_second: 20_000.0 };
    // A burst reaches K after about 8,000 packets, far more than any background flow sends in
    // a counter window (250).
    let mut sim = simulator(config, 10_000, limits);
    // Background: 20 small flows at 5 kpps in all, for 4 s.
    let mut events: Vec<(u64, u32)> = (0..20_000u64).map(|n| (n * 200_000, 100 + (n % 20) as u32)).collect();
    // Bursts of 20 Mpps for 2 ms: flow 1 at 0.5 s, flow 2 at 1.0 s, flow 3 at 3.5 s. Flow 1
    // keeps a trickle of 10 kpps afterwards; flow 2 stops, so by 3.5 s (its burst two counter
    // windows behind) it is the slowest entry.
    for (flow_no, start) in [(1u32, S / 2), (2, S), (3, 7 * S / 2)] {
        events.extend((0..40_000u64).map(|n| (start + n * 50, flow_no)));
    }
    events.extend((0..35_000u64).map(|n| (S / 2 + 5_000_000 + n * 100_000, 1)));
    events.sort_unstable();
    let mut placed = Vec::new();
    for &(t, f) in &events {
        sim.arrive(t, &pkt(f));
        if placed.len() < 2 && table(&sim).find(flow(placed.len() as u32 + 1)).is_some() {
            placed.push(t);
        }
    }
    let t = table(&sim);
    assert_eq!(
        t.find(flow(1)).map(|(a, _)| a),
        Some(BURSTY_AREA),
        "flow 1 offloaded, then kept: it still sends"
    );
    assert_eq!(t.find(flow(3)).map(|(a, _)| a), Some(BURSTY_AREA), "flow 3 offloaded");
    assert_eq!(t.find(flow(2)), None, "flow 2, idle, was the smallest entry and was displaced");
    let s = sim.datapath().policy().stats();
    assert_eq!(s.bursty_offloads, 3);
    assert_eq!(s.bursty_replacements, 1);
    // Each burst was caught within its first 2 ms.
    assert!(placed[0] < S / 2 + 2_000_000 && placed[1] < S + 2_000_000, "{placed:?}");
    assert!(s.burst_triggers >= 3);
    let (m, dp) = sim.finish();
    assert!(m.ring_peak >= 5_000, "the ring reached K");
    assert!(dp.budget().stats().counter_reads >= 2, "the full area's counters were polled");
}

/// The areas never hold more than their capacity, policy changes never outrun the update
/// rate, and counter polls never outrun the read rate, under a churning Zipf-like load.
#[test]
fn nic_limits_are_never_exceeded() {
    let config = ElixirConfig {
        large_entries: 20,
        bursty_entries: 3,
        sample_rate: 0.5,
        identification_window_ns: S / 5,
        replacement_window_ns: S / 10,
        queue_threshold: Some(200),
        heap_rebuild_ns: Some(100_000),
        sketch_width: 4096,
        ..ElixirConfig::default()
    };
    let (updates_per_s, reads_per_s) = (300.0, 500.0);
    let limits =
        NicUpdates { per_second: updates_per_s, latency_ns: 10_000, counter_reads_per_second: reads_per_s };
    let mut sim = simulator(config, 400, limits);
    let mut state = 7u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut events: Vec<(u64, u32)> = (0..400_000u64)
        .map(|n| {
            let t = n * 2_500;
            // Skewed flows whose popularity rotates every 0.25 s.
            let r = next();
            let phase = (t / (S / 4)) as u32;
            (t, ((r >> 8) % 64).leading_zeros() + phase * 7 + (r % 3) as u32 * 100)
        })
        .collect();
    // Every 50 ms a new flow bursts at 20 Mpps for 1 ms.
    for b in 0..20u64 {
        events.extend((0..20_000u64).map(|n| (b * 50_000_000 + 10_000_000 + n * 50, 500 + b as u32)));
    }
    events.sort_unstable();
    let mut checked = 0;
    for (n, &(t, f)) in events.iter().enumerate() {
        sim.arrive(t, &pkt(f));
        if n % 97 == 0 {
            let tb = table(&sim);
            assert!(tb.len(LARGE_AREA) <= 20 && tb.len(BURSTY_AREA) <= 3);
            let b = sim.datapath().budget().stats();
            let allowed = |rate: f64| 1.0 + rate * t as f64 / 1e9;
            assert!(((b.installs + b.removals) as f64) <= allowed(updates_per_s), "{b:?} at {t} ns");
            assert!((b.counter_reads as f64) <= allowed(reads_per_s), "{b:?} at {t} ns");
            checked += 1;
        }
    }
    assert!(checked > 4_000);
    let (_, dp) = sim.finish();
    let b = dp.budget().stats();
    let p = dp.policy().stats();
    assert!(b.installs > 40 && p.replacements >= 9, "the policy was busy: {b:?} {p:?}");
    assert!(p.burst_triggers > 0, "{p:?}");
}

/// A ring crossing K moves the fastest software flow *of that core* (receive-side scaling
/// keeps a flow on one core: a faster flow elsewhere would not relieve it), and the move's
/// changes overtake a large-flow replacement still waiting for update tokens.
#[test]
fn a_crossing_moves_its_own_cores_flow_ahead_of_queued_replacements() {
    let config = ElixirConfig {
        large_entries: 20,
        bursty_entries: 2,
        queue_threshold: Some(100),
        heap_rebuild_ns: Some(0),
        sketch_width: 1024,
        ..ElixirConfig::default()
    };
    let mut e = Elixir::new(config, &machine(1_000, 1_000.0)).unwrap();
    let mut switch = Switch::new(rules(), SwitchConfig { nic: e.nic(), ..SwitchConfig::default() }).unwrap();
    // One update per ms.
    let mut budget =
        NicBudget::new(NicUpdates { per_second: 1_000.0, latency_ns: 0, counter_reads_per_second: 0.0 });
    let costs = CostModel::default();
    let t0 = 5 * S;
    // Software saw flow 1 (core 0) at 500 packets and flow 2 (core 1) at 100 in this window.
    for (f, core, n) in [(1u32, 0usize, 500u64), (2, 1, 100)] {
        let k = key(f);
        for i in 0..n {
            let mut nic = NicControl::new(&mut switch, &mut budget, &costs, t0 + i);
            let seen = hyflow::offload::Seen {
                key: &k,
                flow: Some(flow(f)),
                number: None,
                bytes: 64,
                core,
                now_ns: t0 + i,
            };
            e.on_software(seen, &mut nic);
        }
    }
    // One token left: a large-flow replacement's installs wait for more.
    assert_eq!(budget.updates.available(t0 + 1_000), 1_000, "a second's worth");
    budget.updates.spend(999);
    let mut nic = NicControl::new(&mut switch, &mut budget, &costs, t0 + 1_000);
    for f in 100..110 {
        assert!(nic.offload(&key(f), flow(f), LARGE_AREA));
    }
    assert_eq!((nic.queued(), nic.queued_urgent()), (10, 0));
    // Core 1's ring crosses K.
    e.on_ring(1, 100, &mut nic);
    assert_eq!((nic.queued(), nic.queued_urgent()), (11, 1));
    nic.apply();
    assert_eq!(e.stats().bursty_offloads, 1);
    let t = switch.nic_as::<ExactMatch>().unwrap();
    assert_eq!(t.find(flow(2)).map(|(a, _)| a), Some(BURSTY_AREA), "core 1's flow took the first token");
    assert_eq!(t.find(flow(1)), None, "core 0's faster flow does not relieve core 1");
    assert_eq!(t.len(LARGE_AREA), 0, "the replacement waits behind the urgent move");
    let mut nic = NicControl::new(&mut switch, &mut budget, &costs, t0 + 1_000 + 10 * 1_000_000);
    nic.apply();
    assert_eq!(nic.queued(), 0);
    assert_eq!(switch.nic_as::<ExactMatch>().unwrap().len(LARGE_AREA), 10);
}
