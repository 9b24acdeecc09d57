//! Large-flow detectors on hand-built streams whose answers are known: window sliding, the
//! collision-counter reset, bitmap voting, memory accounting, and every algorithm against
//! the exact sliding-window top-k.

use hyflow::measure::exact::{ExactWindow, Score};
use hyflow::measure::fastkeeper::{FastKeeper, ROWS};
use hyflow::measure::heap::TopHeap;
use hyflow::measure::{build, Algo, ConfigError, Detector, DetectorConfig, FlowId};

const SEED: u64 = 7;

fn flow(n: u64) -> FlowId {
    FlowId::from_u128(n as u128)
}

fn send(d: &mut impl Detector, n: u64, packets: usize) {
    let f = flow(n);
    for _ in 0..packets {
        d.insert(f, f.hash(SEED));
    }
}

fn config(k: usize, memory: usize, blocks: usize) -> DetectorConfig {
    DetectorConfig { k, memory, blocks, sample: 1.0, seed: SEED, key_bits: 104 }
}

fn top(d: &mut impl Detector) -> Vec<(FlowId, u64)> {
    let mut out = Vec::new();
    d.top(&mut out);
    out
}

/// Memory for exactly one bucket per row: every flow collides with every other.
fn one_bucket(bucket: usize, k: usize) -> usize {
    TopHeap::bytes_for_key(k, 104) + ROWS * bucket
}

#[test]
fn fastkeeper_forgets_blocks_that_leave_the_window() {
    for algo in [Algo::FastKeeper, Algo::FastKeeperBitmap] {
        let mut d = build(algo, &config(4, 30_000, 3)).unwrap();
        send(&mut d, 1, 10);
        assert_eq!(top(&mut d), [(flow(1), 10)], "{algo:?} block 0");
        d.end_block();
        send(&mut d, 1, 5);
        send(&mut d, 2, 7);
        assert_eq!(top(&mut d), [(flow(1), 15), (flow(2), 7)], "{algo:?} blocks 0-1");
        d.end_block();
        assert_eq!(top(&mut d), [(flow(1), 15), (flow(2), 7)], "{algo:?} blocks 0-2, 2 empty");
        d.end_block();
        // Window = blocks 1..=3: block 0's 10 packets are gone.
        assert_eq!(top(&mut d), [(flow(2), 7), (flow(1), 5)], "{algo:?} blocks 1-3");
        d.end_block();
        d.end_block();
        assert_eq!(top(&mut d), [], "{algo:?} everything left the window");
    }
}

#[test]
fn collision_counter_hands_the_bucket_over_at_lambda() {
    let bucket = 16 + 4 * 2;
    let mut d = FastKeeper::new(&config(2, one_bucket(bucket, 2), 2)).unwrap();
    send(&mut d, 1, 3);
    // CC reaches 5 < λ·SUM = 6: flow 1 keeps its buckets.
    send(&mut d, 2, 5);
    assert_eq!(top(&mut d), [(flow(1), 3)]);
    // The sixth collision resets every row to flow 2 with one packet.
    send(&mut d, 2, 1);
    assert_eq!(top(&mut d), [(flow(2), 1)]);
}

#[test]
fn memory_is_accounted_and_budgets_too_small_are_refused() {
    for algo in Algo::ALL {
        for memory in [30_000, 100_000, 300_000] {
            let mut d = build(algo, &config(100, memory, 5)).unwrap();
            // Used, the detector holds no more than it said (tables do not grow).
            for n in 0..50_000u64 {
                let f = flow(n % 7_000 + (n % 3) * n);
                d.insert(f, f.hash(SEED));
                if n % 10_000 == 9_999 {
                    d.end_block();
                }
            }
            let used = d.memory_bytes();
            assert!(used <= memory, "{algo:?} uses {used} B of {memory}");
            // Fixed-size tables sized to the budget: all of it is spent, but for less than a
            // bucket or entry (UnivMon's levels halve: up to one bucket per level).
            assert!(used * 100 >= memory * 95, "{algo:?} uses only {used} B of {memory}");
        }
        let err = build(algo, &config(100, 500, 5)).err().unwrap();
        assert!(matches!(err, ConfigError::TooSmall { .. }), "{algo:?}: {err}");
        assert!(err.to_string().contains("too small"));
    }
    assert!(matches!(build(Algo::CountMin, &config(0, 30_000, 5)), Err(ConfigError::ZeroK)));
    let sampled = DetectorConfig { sample: 0.0, ..config(10, 30_000, 5) };
    assert!(matches!(build(Algo::FastKeeper, &sampled), Err(ConfigError::BadSample(_))));
}

/// 8 heavy flows (300–1000 packets per block) among 3,000 one-packet flows, over 8 blocks of
/// a 4-block window; the heavy set changes half-way. Every algorithm finds the heavy flows
/// of the current window once its window is full (the tumbling baselines at the end of
/// their period).
#[test]
fn every_algorithm_finds_known_heavy_flows() {
    let k = 8;
    for algo in Algo::ALL {
        let mut d = build(algo, &config(k, 40_000, 4)).unwrap();
        let mut exact = ExactWindow::new(k, 4);
        let mut score = Score::default();
        let mut mice = 1_000_000;
        for block in 0..8u64 {
            let heavy: Vec<u64> = if block < 4 { (0..8).collect() } else { (100..108).collect() };
            for round in 0..100 {
                for (i, &h) in heavy.iter().enumerate() {
                    let f = flow(h);
                    for _ in 0..(3 + i as u64 % 8) {
                        d.insert(f, f.hash(SEED));
                        exact.insert(f, 0);
                    }
                }
                if round % 3 == 0 {
                    for _ in 0..10 {
                        mice += 1;
                        let f = flow(mice);
                        d.insert(f, f.hash(SEED));
                        exact.insert(f, 0);
                    }
                }
            }
            let report = top(&mut d);
            // Tumbling baselines hold a full window only at the end of their period; the
            // sliding FastKeepers at every boundary once the window has filled, including
            // blocks 4-6 where it mixes the old and the new heavy flows. FastKeeper as
            // published only at the first: its heap keeps the old heavy flows' counts after
            // they stopped (`fastkeeper::tests`).
            let sliding = matches!(algo, Algo::FastKeeper | Algo::FastKeeperBitmap);
            let paper = algo == Algo::FastKeeperPaper;
            if (block % 4 == 3 && !(paper && block > 3)) || (sliding && block >= 3) {
                let mut s = Score::default();
                s.add(&report, &exact, k);
                assert_eq!(s.precision(), 1.0, "{algo:?} block {block}: {report:?}");
                score.add(&report, &exact, k);
            }
            d.end_block();
            exact.end_block();
        }
        let sliding = matches!(algo, Algo::FastKeeper | Algo::FastKeeperBitmap);
        assert_eq!(
            score.windows,
            if sliding {
                5
            } else if algo == Algo::FastKeeperPaper {
                1
            } else {
                2
            }
        );
        if matches!(algo, Algo::FastKeeper | Algo::FastKeeperBitmap | Algo::FastKeeperPaper | Algo::CountMin)
        {
            assert!(score.are() < 0.05, "{algo:?} ARE {}", score.are());
        }
    }
}

#[test]
fn exact_window_slides_and_ranks() {
    let mut e = ExactWindow::new(2, 2);
    send(&mut e, 1, 3);
    send(&mut e, 2, 1);
    e.end_block();
    send(&mut e, 2, 3);
    send(&mut e, 3, 2);
    assert_eq!(top(&mut e), [(flow(2), 4), (flow(1), 3)]);
    assert_eq!(e.kth(2), 3);
    e.end_block();
    assert_eq!(top(&mut e), [(flow(2), 3), (flow(3), 2)]);
    assert_eq!(e.count(flow(1)), 0);
    let mut s = Score::default();
    s.add(&[(flow(2), 3), (flow(1), 9)], &e, 2);
    assert_eq!(s.precision(), 0.5);
    assert_eq!(s.are(), (0.0 + 9.0) / 2.0);
}

#[test]
fn elixir_replaces_the_offloaded_set_at_each_boundary() {
    use hyflow::measure::elixir_identification::{BurstCounters, ElixirLarge, Replacement};
    let mut e = ElixirLarge::new(&config(2, 30_000, 3)).unwrap();
    send(&mut e, 1, 50);
    send(&mut e, 2, 40);
    send(&mut e, 3, 5);
    e.end_block();
    assert_eq!(e.replacement(), &Replacement { offload: vec![flow(1), flow(2)], evict: vec![] });
    assert!(e.is_offloaded(flow(1).hash(SEED)) && e.is_offloaded(flow(2).hash(SEED)));
    // Flow 3 overtakes flow 2 in the window (3 x 60 > 40 + 0).
    send(&mut e, 1, 10);
    send(&mut e, 3, 60);
    e.end_block();
    assert_eq!(e.replacement(), &Replacement { offload: vec![flow(3)], evict: vec![flow(2)] });
    assert!(!e.is_offloaded(flow(2).hash(SEED)));

    let mut b: BurstCounters = BurstCounters::new(1_000_000_000);
    for i in 0..30 {
        b.count(flow(7), None, i * 10_000_000, || ());
    }
    b.count(flow(8), None, 500_000_000, || ());
    assert_eq!(b.rate(flow(7), 900_000_000), 30.0);
    // The next window: the burst that just ended still ranks first.
    assert_eq!(b.top(1, 1_200_000_000), [(flow(7), 30.0, ())]);
    assert_eq!(b.rate(flow(7), 2_500_000_000), 0.0, "two windows later it is forgotten");

    // The event-driven check ranks by the window under way only: a burst that ended before
    // the reset gives way to the flow sending now, and `keep` filters (e.g. by core).
    let mut b: BurstCounters<u32> = BurstCounters::new(1_000_000_000);
    for i in 0..300 {
        b.count(flow(7), None, i * 3_000_000, || 0);
    }
    for i in 0..5 {
        b.count(flow(8), None, 1_000_000_000 + i * 2_000_000, || 0);
        b.count(flow(9), None, 1_000_000_000 + i * 2_000_000, || 1);
        b.count(flow(9), None, 1_000_000_000 + i * 2_000_000 + 1, || 1);
    }
    let now = 1_010_000_000;
    assert_eq!(b.fastest_in_window(now, 0, |_, _| true), Some((flow(9), 1_000.0, 1)), "10 packets in 10 ms");
    assert_eq!(b.fastest_in_window(now, 0, |_, &core| core == 0), Some((flow(8), 500.0, 0)));
    assert_eq!(b.fastest_in_window(now, 0, |f, _| f == flow(7)), None, "flow 7 sent nothing since the reset");
    assert_eq!(
        b.fastest_in_window(now, 100_000_000, |_, _| true),
        Some((flow(9), 100.0, 1)),
        "over 100 ms at least"
    );
}

#[test]
fn wcss_forgets_overflows_that_leave_the_window() {
    use hyflow::measure::wcss::Wcss;
    let mut w = Wcss::new(&config(2, 30_000, 2)).unwrap();
    send(&mut w, 1, 1000);
    w.end_block();
    send(&mut w, 1, 1000);
    send(&mut w, 2, 300);
    let t = top(&mut w);
    assert_eq!(t[0].0, flow(1));
    assert!(t[0].1 >= 1000, "{t:?}");
    w.end_block();
    w.end_block();
    send(&mut w, 2, 10);
    let t = top(&mut w);
    assert_eq!(t[0].0, flow(2), "flow 1's overflows left the window: {t:?}");
    assert_eq!(w.dropped, 0);
}

/// With room for every flow (1 MB for at most 40 flows), the sliding-window detectors must
/// agree with the exact window at every boundary: the counts they report are exact, and a
/// flow that sent in the block just closed is either reported or no larger than every flow
/// reported (the heap only learns of a flow from its packets, so a flow silent since the
/// slide cannot displace one whose count fell). Thousands of random streams, windows and k.
#[test]
fn sliding_detectors_with_room_equal_the_exact_window() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let cases = std::env::var("HYFLOW_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000);
    let stream = proptest::collection::vec(proptest::collection::vec((0u64..40, 1usize..6), 0..30), 1..12);
    let mut runner = TestRunner::new(Config { cases, ..Config::default() });
    runner
        .run(&(stream, 1usize..6, 1usize..8), |(blocks_of_sends, window, k)| {
            for algo in [Algo::FastKeeper, Algo::FastKeeperBitmap] {
                let mut d = build(algo, &config(k, 1 << 20, window)).unwrap();
                let mut exact = ExactWindow::new(k, window);
                for sends in &blocks_of_sends {
                    for &(f, n) in sends {
                        send(&mut d, f, n);
                        send(&mut exact, f, n);
                    }
                    let got = top(&mut d);
                    for (f, c) in &got {
                        prop_assert_eq!(*c, exact.count(*f), "{:?} count of {:?}", algo, f);
                    }
                    let smallest = got.iter().map(|e| e.1).min().unwrap_or(0);
                    for &(f, _) in sends {
                        if !got.iter().any(|e| e.0 == flow(f)) {
                            prop_assert!(
                                got.len() == k && exact.count(flow(f)) <= smallest,
                                "{:?}: active flow {} ({}) left out of {:?}",
                                algo,
                                f,
                                exact.count(flow(f)),
                                got
                            );
                        }
                    }
                    d.end_block();
                    exact.end_block();
                }
            }
            Ok(())
        })
        .unwrap();
}

/// Sends `packets` ((flow, gap ns, representative, repeats)) through `BurstCounters` and,
/// at each of `checks` ((packet index, rejected flows as bits)), holds its fastest flow to
/// what a scan of every flow of the window under way finds: the most packets among the
/// flows kept, ties to the lower flow.
fn burst_counters_agree_with_a_scan(
    packets: &[(u64, u64, u32, u32)],
    checks: &[(usize, u64)],
) -> Result<(), proptest::test_runner::TestCaseError> {
    use hyflow::measure::elixir_identification::BurstCounters;
    const WINDOW: u64 = 1_000_000;
    let mut b: BurstCounters<u32> = BurstCounters::new(WINDOW);
    // The window under way, scanned: flow → (packets, representative).
    let mut scan: std::collections::HashMap<FlowId, (u32, u32)> = Default::default();
    let mut window_start: Option<u64> = None;
    let mut now = 0;
    for (i, &(f, gap, rep, repeats)) in packets.iter().enumerate() {
        now += gap;
        let start = *window_start.get_or_insert(now);
        if now >= start + WINDOW {
            scan.clear();
            window_start = Some(start + (now - start) / WINDOW * WINDOW);
        }
        for _ in 0..repeats {
            b.count(flow(f), None, now, || rep);
            scan.entry(flow(f)).or_insert((0, rep)).0 += 1;
        }
        for &(at, rejected) in checks {
            if at != i {
                continue;
            }
            // Keep the flows whose number is not a bit of `rejected`.
            let keep = |g: FlowId| (0..12).all(|n| rejected & (1 << n) == 0 || flow(n) != g);
            let want = scan
                .iter()
                .filter(|(g, _)| keep(**g))
                .max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.0.cmp(a.0)))
                .map(|(g, (n, r))| (*g, *n, *r));
            let got = b.fastest_in_window(now, 1, |g, _| keep(g));
            proptest::prop_assert_eq!(got.map(|(g, _, r)| (g, r)), want.map(|(g, _, r)| (g, r)));
            if let (Some((_, rate, _)), Some((_, n, _))) = (got, want) {
                let elapsed = (now - window_start.unwrap()).max(1);
                proptest::prop_assert!((rate - n as f64 * 1e9 / elapsed as f64).abs() < 1e-6);
            }
        }
    }
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// The counters kept by count find the flow a scan of every flow finds, over random
    /// streams crossing window boundaries with random filters.
    #[test]
    fn burst_counters_find_what_a_scan_of_every_flow_finds(
        packets in proptest::collection::vec((0u64..12, 0u64..400_000, 0u32..3, 1u32..2), 1..300),
        checks in proptest::collection::vec((0usize..300, 0u64..16), 1..12),
    ) {
        burst_counters_agree_with_a_scan(&packets, &checks)?;
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// The same with flows sending thousands of packets in a window: past the counts kept as
    /// lists (4,096), where flows are ranked apart.
    #[test]
    fn burst_counters_rank_flows_past_the_lists_as_a_scan_does(
        packets in proptest::collection::vec((0u64..4, 0u64..50_000, 0u32..3, 1u32..3000), 1..40),
        checks in proptest::collection::vec((0usize..40, 0u64..16), 1..12),
    ) {
        burst_counters_agree_with_a_scan(&packets, &checks)?;
    }
}
