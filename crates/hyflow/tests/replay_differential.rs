//! Differential tests of the cache hierarchy: on random pipelines, packet sequences and rule
//! update streams, every cache configuration and every FlowShadow consistency mode gives each
//! packet exactly the outputs the uncached slow path gives it at the same moment, and leaves
//! identical per-rule counters. With a revalidation delay, every packet whose outputs differ
//! is one the switch counted as a stale decision with wrong outputs.
//!
//! 1,000 scenarios by default; `HYFLOW_REPLAY_CASES=N` or `--features long-tests` (20,000)
//! for more.

mod common;

use common::{arb_packet, arb_pipeline, arb_rule};
use hyflow::cache::Consistency;
use hyflow::conntrack::ConntrackStats;
use hyflow::measure::KeySpec;
use hyflow::nic::exact_match::ExactMatchConfig;
use hyflow::nic::gigaflow::{GigaflowConfig, Partition};
use hyflow::openflow::traversal::Output;
use hyflow::packet::field::id;
use hyflow::packet::FlowKey;
use hyflow::switch::{Layer, MicroflowConfig, NicConfig, NicConntrack, PortStats, Switch, SwitchConfig};
use hyflow::update_schedule::Replay;
use proptest::prelude::*;

fn cases() -> u32 {
    let default = if cfg!(feature = "long-tests") { 20_000 } else { 1_000 };
    std::env::var("HYFLOW_REPLAY_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One update: before which packet, what kind, a new rule, and which existing rule to target.
type UpdateGen = (usize, u8, String, prop::sample::Index);

fn arb_update() -> impl Strategy<Value = UpdateGen> {
    (0usize..80, 0u8..6, (0u8..4).prop_flat_map(|t| arb_rule(t, 4)), any::<prop::sample::Index>())
}

/// The updates file for a scenario.
fn updates_text(lines: &[String], gens: &[UpdateGen]) -> String {
    let mut out = String::new();
    for (pos, kind, new_rule, victim) in gens {
        let target = victim.get(lines);
        let (matcher, _) = target.split_once(" actions=").expect("generated rules have actions");
        let loose: Vec<&str> = matcher.split(',').filter(|t| !t.starts_with("priority=")).collect();
        let loose = loose.join(",");
        let (_, new_actions) = new_rule.split_once(" actions=").expect("generated rules have actions");
        // The new rule was made for some table; a goto in it may not suit the target's table.
        // Nor a ct action a target that is not IP, or one matching invalid connections (no
        // commit there, as OVS checks).
        let ip = matcher.split(',').any(|t| matches!(t, "ip" | "tcp" | "udp" | "icmp"))
            && !matcher.contains("+inv");
        let new_actions = common::without_state(&format!("actions={new_actions}"));
        let new_actions =
            if ip { new_rule.split_once(" actions=").unwrap().1 } else { &new_actions["actions=".len()..] };
        let kept: Vec<&str> =
            top_level(new_actions).into_iter().filter(|a| !a.starts_with("goto_table")).collect();
        let new_actions = if kept.is_empty() { "drop".to_string() } else { kept.join(",") };
        let line = match kind {
            0 | 1 => format!("add {new_rule}"),
            2 => format!("modify-strict {matcher} actions={new_actions}"),
            3 => format!("modify {loose} actions={new_actions}"),
            4 => format!("delete-strict {matcher}"),
            _ => format!("delete {loose}"),
        };
        out.push_str(&format!("#{pos} {line}\n"));
    }
    out
}

/// An action list's actions (commas inside parentheses kept).
fn top_level(actions: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, b) in actions.bytes().enumerate() {
        match b {
            b'(' => depth += 1,
            b')' => depth -= 1,
            b',' if depth == 0 => {
                out.push(&actions[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&actions[start..]);
    out
}

/// What a replay decided: per packet (layer, outputs), then every rule's counters.
struct Run {
    decisions: Vec<(Layer, Vec<Output>)>,
    counters: Vec<(u64, u64)>,
    stale_wrong: u64,
    recirculations: u64,
    rules_expired: u64,
    conntrack: ConntrackStats,
    /// Connections the NIC's table took, NIC hits it sent to software for want of one, and
    /// second passes the NIC made.
    offloaded: (u64, u64, u64),
    /// Every port's counters and the packets forwarded and dropped.
    ports: (Vec<PortStats>, u64, u64),
}

fn replay(lines: &[String], updates: &str, packets: &[FlowKey], config: SwitchConfig) -> Run {
    replay_spaced(lines, updates, packets, config, 1_000_000)
}

/// [`replay`] with packets `gap_ns` apart.
fn replay_spaced(
    lines: &[String],
    updates: &str,
    packets: &[FlowKey],
    config: SwitchConfig,
    gap_ns: u64,
) -> Run {
    let pipeline = common::pipeline_of(&lines.join("\n"));
    let ups = common::updates_of(updates);
    let mut r = Replay::new(Switch::new(pipeline, config).expect("valid config"), ups);
    let mut outputs = Vec::new();
    let mut decisions = Vec::new();
    for (i, k) in packets.iter().enumerate() {
        let layer = r.packet(i as u64 * gap_ns, k, 64 + i as u64 % 7, &mut outputs);
        decisions.push((layer, outputs.clone()));
    }
    let (sw, _) = r.finish();
    // The switch's port counters say what its decisions did (whichever layer made them).
    let run_ports = (sw.port_stats(), sw.stats().forwarded, sw.stats().dropped);
    assert_eq!(run_ports, ports_of(packets, &decisions), "port counters against the decisions");
    let n_ids = sw.pipeline().rules().map(|(id, _)| id + 1).max().unwrap_or(0) + 200;
    let counters = (0..n_ids).map(|id| sw.pipeline().stats(id)).map(|s| (s.packets, s.bytes)).collect();
    Run {
        decisions,
        counters,
        stale_wrong: sw.stats().stale_wrong,
        recirculations: sw.stats().recirculations,
        rules_expired: sw.stats().rules_expired,
        // What the tracker did to packets; where it ran (offloaded or not) may differ.
        conntrack: ConntrackStats { offloaded: 0, offload_full: 0, ..sw.conntrack().stats() },
        offloaded: (
            sw.conntrack().stats().offloaded,
            sw.stats().nic_conntrack_misses,
            sw.stats().by_pass[1].nic,
        ),
        ports: run_ports,
    }
}

/// The port counters and the forwarded and dropped packets the decisions imply: every packet
/// received on its `in_port` (of the lengths `replay_spaced` gives), every copy sent on its
/// port, 4 bytes longer per VLAN tag it gained.
fn ports_of(packets: &[FlowKey], decisions: &[(Layer, Vec<Output>)]) -> (Vec<PortStats>, u64, u64) {
    let mut by_port = std::collections::BTreeMap::<u32, PortStats>::new();
    let tags = |k: &FlowKey| (k.vlan_tci() & 0x1000 != 0) as i64 + (k.vlan_tci2() & 0x1000 != 0) as i64;
    let (mut forwarded, mut dropped) = (0, 0);
    for (i, (k, (_, outputs))) in packets.iter().zip(decisions).enumerate() {
        let bytes = 64 + i as u64 % 7;
        let rx = by_port.entry(k.in_port()).or_insert(PortStats { port: k.in_port(), ..Default::default() });
        rx.rx_packets += 1;
        rx.rx_bytes += bytes;
        for o in outputs {
            let tx = by_port.entry(o.port).or_insert(PortStats { port: o.port, ..Default::default() });
            tx.tx_packets += 1;
            tx.tx_bytes += (bytes as i64 + 4 * (tags(&o.packet) - tags(k))) as u64;
        }
        if outputs.is_empty() {
            dropped += 1;
        } else {
            forwarded += 1;
        }
    }
    (by_port.into_values().collect(), forwarded, dropped)
}

fn configs() -> Vec<(&'static str, SwitchConfig)> {
    let full = SwitchConfig::default();
    let tiny = SwitchConfig {
        nic: Some(NicConfig::new(hyflow::nic::MegaflowOffloadConfig { entries: 3, max_masks: 2 })),
        microflow: Some(MicroflowConfig { entries: 4, ways: 2 }),
        megaflow: Some(5),
        max_idle_ns: 20_000_000,
        ..full.clone()
    };
    let none = SwitchConfig::no_cache();
    vec![
        ("all layers", full.clone()),
        (
            "all layers, the NIC tracks every connection",
            SwitchConfig { nic_conntrack: NicConntrack::All, ..full.clone() },
        ),
        (
            "all layers, the NIC tracks 3 established connections, 2 ms after software",
            SwitchConfig {
                nic_conntrack: NicConntrack::Established { entries: 3 },
                nic_update_latency_ns: 2_000_000,
                ..full.clone()
            },
        ),
        ("tiny layers, short max-idle", tiny),
        ("nic only", SwitchConfig { nic: full.nic.clone(), ..none.clone() }),
        (
            "microflow only, 4-way",
            SwitchConfig { microflow: Some(MicroflowConfig { entries: 16, ways: 4 }), ..none.clone() },
        ),
        ("megaflow only", SwitchConfig { megaflow: full.megaflow, ..none.clone() }),
        (
            "gigaflow dp, all layers",
            SwitchConfig { nic: Some(NicConfig::new(GigaflowConfig::default())), ..full.clone() },
        ),
        (
            "gigaflow dp, 2 tiny stages, short max-idle, nic only",
            SwitchConfig {
                nic: Some(NicConfig::new(GigaflowConfig {
                    tables: 2,
                    entries: 3,
                    max_masks: 2,
                    ..GigaflowConfig::default()
                })),
                max_idle_ns: 20_000_000,
                ..none.clone()
            },
        ),
        (
            "gigaflow random, nic only",
            SwitchConfig {
                nic: Some(NicConfig::new(GigaflowConfig {
                    partition: Partition::Random,
                    ..GigaflowConfig::default()
                })),
                ..none.clone()
            },
        ),
        (
            "gigaflow one-to-one, 3 stages, nic + microflow",
            SwitchConfig {
                nic: Some(NicConfig::new(GigaflowConfig {
                    tables: 3,
                    partition: Partition::OneToOne,
                    ..GigaflowConfig::default()
                })),
                microflow: Some(MicroflowConfig { entries: 8, ways: 1 }),
                ..none.clone()
            },
        ),
        (
            "exact-match on nw_dst alone (the megaflow's other bits make entries sound), nic only",
            SwitchConfig {
                nic: Some(NicConfig::new(ExactMatchConfig {
                    areas: [3, 2],
                    key: KeySpec::parse("nw_dst").unwrap(),
                    expire_idle: true,
                })),
                max_idle_ns: 20_000_000,
                ..none.clone()
            },
        ),
        (
            "exact-match on the 5-tuple, all layers",
            SwitchConfig {
                nic: Some(NicConfig::new(ExactMatchConfig {
                    areas: [64, 4],
                    key: KeySpec::five_tuple(),
                    expire_idle: false,
                })),
                ..full.clone()
            },
        ),
        (
            "microflow + megaflow, direct",
            SwitchConfig {
                microflow: Some(MicroflowConfig { entries: 8, ways: 1 }),
                megaflow: Some(64),
                ..none.clone()
            },
        ),
    ]
}

/// A packet sequence with repeats (so caches hit) drawn from a small pool.
/// The packets `picks` names from `pool` and from the pool's replies (addresses, ports and
/// MACs swapped, arriving on another port), so that connections see both directions.
fn sequence(pool: &[FlowKey], picks: &[prop::sample::Index]) -> Vec<FlowKey> {
    let replies = pool.iter().map(|k| {
        let mut r = *k;
        for (a, b) in [
            (id::NW_SRC, id::NW_DST),
            (id::TP_SRC, id::TP_DST),
            (id::DL_SRC, id::DL_DST),
            (id::IPV6_SRC, id::IPV6_DST),
        ] {
            r.set(a, k.get(b));
            r.set(b, k.get(a));
        }
        r.set_in_port(k.in_port() % 4 + 1);
        r
    });
    let both: Vec<FlowKey> = pool.iter().copied().chain(replies).collect();
    picks.iter().map(|i| *i.get(&both)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_cache_decides_like_the_slow_path(
        lines in arb_pipeline(10),
        pool in prop::collection::vec(arb_packet(), 1..10),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 20..80),
        gens in prop::collection::vec(arb_update(), 0..6),
    ) {
        let packets = sequence(&pool, &picks);
        let updates = updates_text(&lines, &gens);
        let reference = replay(&lines, &updates, &packets, SwitchConfig::no_cache());
        for (name, config) in configs() {
            for consistency in [Consistency::Signature, Consistency::Cookie, Consistency::Action] {
                let run = replay(&lines, &updates, &packets, SwitchConfig { consistency, ..config.clone() });
                for (i, (want, got)) in reference.decisions.iter().zip(&run.decisions).enumerate() {
                    prop_assert_eq!(&want.1, &got.1, "{} / {:?}: packet {} via {:?}\nflows:\n{}\nupdates:\n{}",
                        name, consistency, i, got.0, lines.join("\n"), updates);
                }
                prop_assert_eq!(&reference.counters, &run.counters, "{} / {:?}: rule counters", name, consistency);
            }
        }
    }

    #[test]
    fn with_a_revalidation_delay_every_difference_is_counted_stale(
        lines in arb_pipeline(10),
        pool in prop::collection::vec(arb_packet(), 1..10),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 20..80),
        gens in prop::collection::vec(arb_update(), 1..6),
        delay_ms in 1u64..30,
    ) {
        // A stale decision through the connection tracker changes connections differently
        // from the reference, and later packets with them: this property is about stale
        // decisions only. Nor does it recirculate: a stale pass is judged by its datapath
        // actions, so another recirculation id is wrong even where the next pass happens to
        // give the same outputs (the dp_hash group 6 becomes the one-pass group 5).
        let stateless = |l: &str| common::without_state(l).replace("group:6", "group:5");
        let lines: Vec<String> = lines.iter().map(|l| stateless(l)).collect();
        let gens: Vec<_> = gens.into_iter().map(|(p, k, r, v)| (p, k, stateless(&r), v)).collect();
        let packets = sequence(&pool, &picks);
        let updates = updates_text(&lines, &gens);
        let reference = replay(&lines, &updates, &packets, SwitchConfig::no_cache());
        for (name, config) in configs() {
            let config = SwitchConfig { revalidation_delay_ns: delay_ms * 1_000_000, ..config };
            let run = replay(&lines, &updates, &packets, config);
            let differing = reference.decisions.iter().zip(&run.decisions).filter(|(a, b)| a.1 != b.1).count();
            prop_assert_eq!(differing as u64, run.stale_wrong, "{}: differences vs stale decisions counted", name);
        }
    }
}

#[test]
fn caches_serve_most_packets_of_a_repetitive_sequence() {
    let lines: Vec<String> = [
        "table=0,priority=10,ip,nw_dst=10.0.0.0/8 actions=goto_table:1",
        "table=0,priority=0 actions=drop",
        "table=1,priority=20,tcp,tp_dst=80 actions=mod_dl_dst:00:00:00:00:00:09,output:2",
        "table=1,priority=5 actions=output:3",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let pool: Vec<FlowKey> = (0..20u32)
        .map(|i| {
            hyflow::openflow::parse_packet(&format!(
                "tcp,nw_dst=10.0.0.{i},tp_dst={},tp_src={}",
                80 + i % 2,
                1000 + i
            ))
            .unwrap()
        })
        .collect();
    let packets: Vec<FlowKey> = (0..2000).map(|i| pool[(i * 7 + i / 3) % 20]).collect();
    let updates = "#500 modify-strict table=1,priority=5 actions=output:4\n#1500 delete-strict table=1,priority=20,tcp,tp_dst=80\n";
    let reference = replay(&lines, updates, &packets, SwitchConfig::no_cache());
    let run = replay(&lines, updates, &packets, SwitchConfig::default());
    assert!(reference.decisions.iter().zip(&run.decisions).all(|(a, b)| a.1 == b.1));
    assert_eq!(reference.counters, run.counters);
    let upcalls = run.decisions.iter().filter(|d| d.0 == Layer::SlowPath).count();
    // Two megaflows per epoch, three epochs; everything else is served by the NIC.
    assert!(upcalls <= 8, "{upcalls} upcalls");
    assert!(run.decisions.iter().filter(|d| d.0 == Layer::Nic).count() > 1900);
}

#[test]
fn revalidation_evicts_an_entry_whose_new_translation_needs_more_bits() {
    // Deleting the tp_dst rule sends the megaflow's packet to a rule on nw_src with the same
    // actions; other packets of the old megaflow (other sources) must not keep output 1.
    let lines: Vec<String> = [
        "priority=20,tcp,tp_dst=80 actions=output:1",
        "priority=10,ip,nw_src=10.0.0.1 actions=output:1",
        "priority=5,ip actions=output:2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let a = hyflow::openflow::parse_packet("tcp,nw_src=10.0.0.1,tp_dst=80").unwrap();
    let b = hyflow::openflow::parse_packet("tcp,nw_src=10.0.0.2,tp_dst=80").unwrap();
    let packets = [a, a, b, b];
    let updates = "#2 delete-strict priority=20,tcp,tp_dst=80\n";
    let reference = replay(&lines, updates, &packets, SwitchConfig::no_cache());
    for (name, config) in configs() {
        let run = replay(&lines, updates, &packets, config);
        assert_eq!(
            reference.decisions.iter().map(|d| &d.1).collect::<Vec<_>>(),
            run.decisions.iter().map(|d| &d.1).collect::<Vec<_>>(),
            "{name}"
        );
    }
}

/// Asserts that `run` gave every packet the outputs `reference` gave it, and left every rule
/// the same counters (`name` says which configuration, the flows and updates how to repeat).
fn assert_decides_alike(name: &str, reference: &Run, run: &Run, lines: &[String], updates: &str) {
    for (i, (want, got)) in reference.decisions.iter().zip(&run.decisions).enumerate() {
        assert_eq!(
            want.1,
            got.1,
            "{name}: packet {i} via {:?}\nflows:\n{}\nupdates:\n{updates}",
            got.0,
            lines.join("\n")
        );
    }
    assert_eq!(reference.counters, run.counters, "{name}: rule counters");
    assert_eq!(reference.ports, run.ports, "{name}: port counters, forwarded and dropped packets");
}

/// 300 random scenarios with packets 60 ms apart over up to 4.8 s, so that rules with idle
/// and hard timeouts (and learned flows with hard timeouts) expire, and every cache
/// configuration forgets what they decided: each packet gets the slow path's outputs, rules
/// the same counters, and the same rules expire; the scenarios do see rules expire.
#[test]
fn rules_expire_alike_in_every_cache() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let strategy = (
        arb_pipeline(10),
        prop::collection::vec(arb_packet(), 1..10),
        prop::collection::vec(any::<prop::sample::Index>(), 20..80),
        prop::collection::vec(arb_update(), 0..6),
    );
    let mut runner = TestRunner::deterministic();
    let (mut expiring, mut expired) = (0, 0);
    for _ in 0..300 {
        let (lines, pool, picks, gens) = strategy.new_tree(&mut runner).expect("strategy").current();
        let packets = sequence(&pool, &picks);
        let updates = updates_text(&lines, &gens);
        let reference = replay_spaced(&lines, &updates, &packets, SwitchConfig::no_cache(), 60_000_000);
        for (name, config) in configs() {
            let run = replay_spaced(&lines, &updates, &packets, config, 60_000_000);
            assert_decides_alike(name, &reference, &run, &lines, &updates);
            assert_eq!(reference.rules_expired, run.rules_expired, "{name}: rules expired");
        }
        expiring += (reference.rules_expired > 0) as usize;
        expired += reference.rules_expired;
    }
    eprintln!("300 scenarios: rules expired in {expiring} ({expired} rules)");
    assert!(expiring >= 150, "rules expired in only {expiring} of 300 scenarios");
}

/// A random pipeline behind a stateful firewall, as real ones are: untracked IP goes through
/// conntrack and recirculates to the next table, new connections are committed (with a mark,
/// and source or destination NAT in some variants), established ones are un-NATed; the
/// random rules decide the rest.
fn with_firewall(mut lines: Vec<String>, variant: u8) -> Vec<String> {
    let ntables = lines
        .iter()
        .filter_map(|l| l.strip_prefix("table=")?.split(',').next()?.parse::<u8>().ok())
        .max()
        .unwrap_or(0)
        + 1;
    let next = 1 % ntables;
    let zone = variant % 3;
    let nat = ["", ",nat(src=10.9.0.1-10.9.0.2:2000-2001)", ",nat(dst=10.8.0.5:8080)", ",nat(dst=10.8.0.5)"]
        [variant as usize % 4];
    lines.push(format!("table=0,priority=500,ip,ct_state=-trk actions=ct(table={next},zone={zone})"));
    lines.push(format!(
        "table={next},priority=450,ip,ct_state=+trk+new actions=ct(commit,zone={zone}{nat},exec(set_field:{variant}->ct_mark)),output:2"
    ));
    lines
        .push(format!("table={next},priority=450,ip,ct_state=+trk+est actions=ct(zone={zone},nat),output:3"));
    if variant >= 4 {
        // Later passes' own rules: a second zone, invalid packets dropped.
        lines.push(format!("table={next},priority=460,ip,ct_state=+trk+inv actions=drop"));
        lines.push(format!(
            "table={next},priority=440,ip,ct_state=+trk+est+rpl,ct_mark={variant} actions=output:4"
        ));
    }
    lines
}

/// 500 random scenarios whose pipelines use the connection tracker: every cache configuration
/// gives each packet the slow path's outputs while connections change state under the caches
/// (new, established, replies, NAT and its reversal, recirculation loops at the depth limit),
/// and the scenarios do exercise all of that.
#[test]
fn connection_tracking_keeps_every_cache_exact() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let strategy = (
        (arb_pipeline(10), 0u8..8).prop_map(|(lines, variant)| with_firewall(lines, variant)),
        prop::collection::vec(arb_packet(), 1..10),
        prop::collection::vec(any::<prop::sample::Index>(), 20..80),
        prop::collection::vec(arb_update(), 0..6),
    );
    let mut runner = TestRunner::deterministic();
    let (mut scenarios, mut recirculating, mut translating, mut established) = (0, 0, 0, 0);
    let mut packets_seen = 0;
    let (mut offloading, mut sent_back, mut in_hardware) = (0, 0, 0);
    while scenarios < 500 {
        let (lines, pool, picks, gens) = strategy.new_tree(&mut runner).expect("strategy").current();
        scenarios += 1;
        let packets = sequence(&pool, &picks);
        let updates = updates_text(&lines, &gens);
        let reference = replay(&lines, &updates, &packets, SwitchConfig::no_cache());
        for (name, config) in configs().into_iter().take(6) {
            let run = replay(&lines, &updates, &packets, config);
            assert_decides_alike(name, &reference, &run, &lines, &updates);
            assert_eq!(reference.conntrack, run.conntrack, "{name}: connection tracker");
            if name.contains("established") {
                offloading += (run.offloaded.0 > 0) as usize;
                sent_back += (run.offloaded.1 > 0) as usize;
                in_hardware += (run.offloaded.2 > 0) as usize;
            }
        }
        packets_seen += packets.len();
        recirculating += (reference.recirculations > 0) as usize;
        translating += (reference.conntrack.translated > 0) as usize;
        established += (reference.conntrack.committed > 0
            && reference.conntrack.packets > reference.conntrack.committed) as usize;
    }
    eprintln!("{scenarios} scenarios, {packets_seen} packets: {recirculating} recirculate, {translating} translate addresses, {established} see committed connections again; the NIC's table took connections in {offloading}, made later passes in {in_hardware}, sent packets back to software in {sent_back}");
    assert!(offloading >= 25, "the NIC's connection table took connections in only {offloading} scenarios");
    assert!(
        in_hardware >= 10,
        "the NIC made later passes of tracked packets in only {in_hardware} scenarios"
    );
    assert!(sent_back >= 100, "the NIC sent packets back to software in only {sent_back} scenarios");
    assert!(recirculating >= 200, "only {recirculating} of 500 scenarios recirculate");
    assert!(translating >= 50, "only {translating} of 500 scenarios use NAT");
    assert!(established >= 100, "only {established} of 500 scenarios revisit connections");
}
