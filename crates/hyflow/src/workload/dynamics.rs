//! Traffic whose large flows change over time, with bursts: the real-time dynamics FastKeeper
//! (§II-A) measured in an operator network, for evaluating real-time top-k detection.
//!
//! Model, deterministic for a seed:
//! * **Base rates.** Flow sizes are Zipf(`zipf`) over a random ranking of the flows; packets
//!   arrive as a Poisson process of `rate` packets/s.
//! * **Churn.** Every `churn_period` seconds, `churn_fraction` of the current top 10% of flows
//!   (by rate) trade their rates with flows drawn uniformly from the rest, so at least that
//!   share of the large flows stops being large (FastKeeper Fig. 1: ≥ 13% per window).
//! * **Bursts.** `bursts` bursts start at uniform times on flows drawn from the top 10% of the
//!   base ranking. A burst multiplies its flow's rate by its burst ratio (peak / average):
//!   uniform in [20, 80], so most are above 30 (Fig. 2b). It lasts 0.1–0.9 s nine times in
//!   ten, 1–2 s otherwise (most bursts are shorter than a second). The extra packets are
//!   taken from the base traffic, so the total rate stays `rate` (at most 90% of it bursts).

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp};

use super::traffic::{check, frame_len, GenPacket, TrafficConfig, TrafficError};
use crate::packet::build::build_frame;
use crate::packet::FlowKey;

/// How the traffic changes over time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DynamicsConfig {
    /// Seconds between churns of the large flows.
    pub churn_period: f64,
    /// Share of the top 10% replaced at each churn.
    pub churn_fraction: f64,
    /// Bursts over the whole trace.
    pub bursts: usize,
}

impl Default for DynamicsConfig {
    fn default() -> Self {
        DynamicsConfig { churn_period: 3.0, churn_fraction: 0.15, bursts: 60 }
    }
}

#[derive(Clone, Copy, Debug)]
struct Burst {
    flow: usize,
    start: f64,
    end: f64,
    /// Packets per second added while it lasts.
    extra: f64,
}

/// Weighted choice by binary search over cumulative weights.
fn cumulative(weights: &[f64]) -> Vec<f64> {
    let mut acc = 0.0;
    weights
        .iter()
        .map(|w| {
            acc += w;
            acc
        })
        .collect()
}

fn pick(cum: &[f64], rng: &mut StdRng) -> usize {
    let x = rng.random::<f64>() * cum[cum.len() - 1];
    cum.partition_point(|&c| c <= x).min(cum.len() - 1)
}

/// Generates `traffic.packets` packets over `keys` with the given dynamics; `GenPacket::flow`
/// is the index into `keys`.
pub fn generate_dynamic(
    keys: &[FlowKey],
    traffic: &TrafficConfig,
    dynamics: &DynamicsConfig,
    mut sink: impl FnMut(GenPacket) -> std::io::Result<()>,
) -> Result<std::io::Result<()>, TrafficError> {
    let n = keys.len();
    check(&TrafficConfig { flows: n, ..*traffic })?;
    if traffic.packets == 0 {
        return Err(TrafficError::param("packets", "must be at least 1"));
    }
    let period_ok = dynamics.churn_period > 0.0 && dynamics.churn_period.is_finite();
    if !period_ok || !(0.0..=1.0).contains(&dynamics.churn_fraction) {
        return Err(TrafficError::param("churn-period", "must be positive and `churn-fraction` in [0, 1]"));
    }
    // Each burst is a crowd of packets over a fraction of a second, and every packet looks at
    // the bursts under way: more bursts than one per 100 packets is no longer bursts.
    let max_bursts = (traffic.packets / 100).max(1);
    if dynamics.bursts > max_bursts {
        return Err(TrafficError::param(
            "bursts",
            format!(
                "{}: at most {max_bursts} for {} packets (one per 100 packets)",
                dynamics.bursts, traffic.packets
            ),
        ));
    }
    let mut rng = StdRng::seed_from_u64(traffic.seed ^ 0x6479_6e61_6d69_6373);
    let mut weights: Vec<f64> = (0..n).map(|i| 1.0 / ((i + 1) as f64).powf(traffic.zipf)).collect();
    for i in (1..n).rev() {
        weights.swap(i, rng.random_range(0..=i));
    }
    let total: f64 = weights.iter().sum();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_unstable_by(|&a, &b| weights[b].total_cmp(&weights[a]));
    let top = (n / 10).max(1);
    let seconds = traffic.packets as f64 / traffic.rate;
    let mut bursts: Vec<Burst> = (0..dynamics.bursts)
        .map(|_| {
            let flow = order[rng.random_range(0..top)];
            let start = rng.random::<f64>() * seconds;
            let length = if rng.random_range(0..10) < 9 {
                rng.random_range(0.1..0.9)
            } else {
                rng.random_range(1.0..2.0)
            };
            let ratio = rng.random_range(20.0..80.0);
            let mean = weights[flow] / total * traffic.rate;
            Burst { flow, start, end: start + length, extra: (ratio - 1.0) * mean }
        })
        .collect();
    bursts.sort_unstable_by(|a, b| a.start.total_cmp(&b.start));
    let gap = Exp::new(traffic.rate)
        .map_err(|_| TrafficError::param("rate", "is out of the distribution's range"))?;
    let mut cum = cumulative(&weights);
    let mut epoch = 0u64;
    let (mut next_burst, mut active): (usize, Vec<Burst>) = (0, Vec::new());
    let mut t = 0.0f64;
    for i in 0..traffic.packets {
        if i > 0 {
            t += gap.sample(&mut rng);
        }
        let e = (t / dynamics.churn_period) as u64;
        while epoch < e {
            epoch += 1;
            order.sort_unstable_by(|&a, &b| weights[b].total_cmp(&weights[a]));
            let swaps = (dynamics.churn_fraction * top as f64).round() as usize;
            for &large in order.iter().take(top).filter(|_| n > top).take(swaps) {
                let other = order[rng.random_range(top..n)];
                weights.swap(large, other);
            }
            cum = cumulative(&weights);
        }
        while next_burst < bursts.len() && bursts[next_burst].start <= t {
            active.push(bursts[next_burst]);
            next_burst += 1;
        }
        active.retain(|b| b.end > t);
        let extra: f64 = active.iter().map(|b| b.extra).sum();
        let burst_share = (extra / traffic.rate).min(0.9);
        let flow = if !active.is_empty() && rng.random::<f64>() < burst_share {
            let mut x = rng.random::<f64>() * extra;
            active
                .iter()
                .find(|b| {
                    x -= b.extra;
                    x < 0.0
                })
                .unwrap_or(&active[active.len() - 1])
                .flow
        } else {
            pick(&cum, &mut rng)
        };
        let frame = build_frame(&keys[flow], frame_len(&mut rng) - 4);
        if let Err(err) = sink(GenPacket { ts_ns: (t * 1e9) as u64, flow, frame }) {
            return Ok(Err(err));
        }
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::traffic::random_flows;

    fn run(seed: u64, churn_fraction: f64) -> Vec<(u64, usize)> {
        let keys = random_flows(2000, 3).unwrap();
        let traffic = TrafficConfig { flows: 2000, packets: 200_000, zipf: 1.2, rate: 20_000.0, seed };
        let dynamics = DynamicsConfig { churn_fraction, ..DynamicsConfig::default() };
        let mut out = Vec::new();
        generate_dynamic(&keys, &traffic, &dynamics, |p| {
            out.push((p.ts_ns, p.flow));
            Ok(())
        })
        .unwrap()
        .unwrap();
        out
    }

    fn per_second(pkts: &[(u64, usize)]) -> Vec<std::collections::HashMap<usize, u32>> {
        let seconds = (pkts.last().unwrap().0 / 1_000_000_000 + 1) as usize;
        let mut per_second = vec![std::collections::HashMap::<usize, u32>::new(); seconds];
        for &(ts, f) in pkts {
            *per_second[(ts / 1_000_000_000) as usize].entry(f).or_insert(0) += 1;
        }
        per_second
    }

    /// Share of the top 10% (200 flows) of second 1 no longer in the top 10% at second 7.
    fn turnover(per_second: &[std::collections::HashMap<usize, u32>]) -> f64 {
        let top = |s: usize| -> std::collections::HashSet<usize> {
            let mut v: Vec<_> = per_second[s].iter().collect();
            v.sort_unstable_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            v.into_iter().take(200).map(|(f, _)| *f).collect()
        };
        let (a, b) = (top(1), top(7));
        a.difference(&b).count() as f64 / a.len() as f64
    }

    /// Large flows turn over between windows at least at the churn rate, well above what
    /// sampling noise alone gives (the same traffic without churn), and some flow's
    /// one-second peak is 10x its average.
    #[test]
    fn large_flows_churn_and_burst() {
        let pkts = run(5, 0.15);
        assert_eq!(pkts, run(5, 0.15), "deterministic");
        let per_second = per_second(&pkts);
        let seconds = per_second.len();
        let (changed, noise) = (turnover(&per_second), turnover(&self::tests::per_second(&run(5, 0.0))));
        assert!(changed >= 0.13 && changed >= noise + 0.1, "turnover {changed}, without churn {noise}");
        let mut total = std::collections::HashMap::<usize, u32>::new();
        for s in &per_second {
            for (f, c) in s {
                *total.entry(*f).or_insert(0) += c;
            }
        }
        let bursty = total.iter().filter(|(f, t)| {
            let mean = **t as f64 / seconds as f64;
            let peak = per_second.iter().map(|s| s.get(f).copied().unwrap_or(0)).max().unwrap() as f64;
            **t > 50 && peak >= 10.0 * mean
        });
        assert!(bursty.count() >= 5, "bursts stand out against their flow's average");
    }
}
