//! The simulator's application stage for FlexKVS: requests of the workload steered to cores
//! as `hyflow kvs` steers them, each core serving its queue in order, a request's cost the sum
//! of this host's measured parts ([`KvsCosts`], `hyflow calibrate --kvs`), and the two costs
//! steering decides where they arise rather than as averages:
//!
//! * **cache-line transfers**: with one store shared by the cores (flow steering), a request
//!   whose key another core touched last finds the bucket line, its lock and the item in that
//!   core's cache and pays `transfer_ns`; the last core of every key is tracked, so how often
//!   it happens follows from the workload's popularity and the steering, not from a formula;
//! * **lock waits**: a request holds its bucket's lock for the store part of its work; one
//!   arriving while another core holds it waits.
//!
//! With key steering every key has one core (its partition's), so neither arises. Per core,
//! the part that does not depend on the store (`io_ns`: receive, parse, reply, transmit) and
//! the hash (`hash_ns`, unless the NIC computed it) add up with the store's. Not modelled: the
//! PCIe limit the paper hits at 4+ cores, and memory bandwidth.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use super::workload::{KvsWorkload, Op};
use super::{key_hash, owner};
use crate::invalid_param::InvalidParam;

/// Nanoseconds of one core per part of a request, on the host they were measured on.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct KvsCosts {
    /// Everything but the store and the hash: the frame's receive and parse, the reply's frame
    /// and its transmit (from a live run's busy time per request, less the parts below).
    pub io_ns: f64,
    /// Hashing a key in software.
    pub hash_ns: f64,
    /// Serving the request on a store whose lines are in this core's cache (memcached parsing,
    /// the bucket walk, the item's copy, the reply's text).
    pub store_ns: f64,
    /// Extra for a request whose key another core touched last (lines moved between caches).
    pub transfer_ns: f64,
    /// Time-stamp counter ticks per nanosecond (to give cycles as the live server does).
    pub tsc_ghz: f64,
}

impl KvsCosts {
    /// Checks that every cost is a finite number, not negative.
    pub fn check(&self) -> Result<(), InvalidParam> {
        let parts = [self.io_ns, self.hash_ns, self.store_ns, self.transfer_ns, self.tsc_ghz];
        if parts.iter().any(|c| !(c.is_finite() && *c >= 0.0)) || self.tsc_ghz == 0.0 {
            return Err(InvalidParam::new(
                "costs",
                "every cost must be a finite number, 0 or more (tsc_ghz above 0)",
            ));
        }
        Ok(())
    }
}

/// How requests reach cores (as `hyflow kvs --steer`, with or without `--nic-hash`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Steering {
    /// By client (RSS on the 5-tuple): one store shared by the cores.
    Flow,
    /// By key: a partition per core.
    Key,
    /// By key, reusing the NIC's hash.
    KeyNicHash,
}

impl Steering {
    /// Every mode, as the paper compares them.
    pub const ALL: [Steering; 3] = [Steering::Flow, Steering::Key, Steering::KeyNicHash];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Steering::Flow => "flow",
            Steering::Key => "key",
            Steering::KeyNicHash => "key + NIC hash",
        }
    }
}

/// One simulated run.
#[derive(Clone, Copy, Debug)]
pub struct KvsSimConfig {
    /// The workload.
    pub workload: KvsWorkload,
    /// Serving cores.
    pub cores: usize,
    /// Steering.
    pub steering: Steering,
    /// Requests offered per second (Poisson); `None`: all at once (capacity).
    pub rate: Option<f64>,
    /// Requests simulated.
    pub requests: u64,
    /// Client ports the requests come from (flow steering spreads these).
    pub clients: u32,
    /// Requests a core's receive ring holds; more waiting are dropped.
    pub ring: usize,
    /// Seed of the request stream and the arrivals.
    pub seed: u64,
}

/// What a run gives.
#[derive(Clone, Debug, Default, Serialize)]
pub struct KvsSimReport {
    /// Requests served per second (over the time to serve them all).
    pub throughput: f64,
    /// Requests dropped for a full ring.
    pub dropped: u64,
    /// Mean nanoseconds of a core per request (its service time, lock waits included).
    pub ns_per_request: f64,
    /// Mean time-stamp counter ticks of a core per request (`ns_per_request` in the live
    /// server's unit). Only the mean: the model's costs are the measured means, so its
    /// spread would come from lock waits alone.
    pub cycles_per_request: f64,
    /// Share of requests that paid a cache-line transfer.
    pub transfers: f64,
    /// Mean nanoseconds a request waited for its bucket's lock.
    pub lock_wait_ns: f64,
    /// Requests per core, busiest over mean (1: even).
    pub imbalance: f64,
}

/// Buckets of the simulated store's lock table (a power of two; hot keys collide only with
/// themselves at this size, as in the live store).
const BUCKETS: usize = 1 << 20;

/// Runs `config` with `costs`.
pub fn simulate(config: &KvsSimConfig, costs: &KvsCosts) -> Result<KvsSimReport, InvalidParam> {
    costs.check()?;
    if config.cores == 0 || config.cores > 1024 {
        return Err(InvalidParam::new("cores", "must be 1 to 1024"));
    }
    if config.requests == 0 || config.clients == 0 {
        return Err(InvalidParam::new("requests", "requests and clients must be at least 1"));
    }
    if let Some(r) = config.rate {
        if !(r.is_finite() && r > 0.0) {
            return Err(InvalidParam::new("rate", "must be above 0"));
        }
    }
    let w = &config.workload;
    let mut requests = w.requests(config.seed)?;
    let mut rng = StdRng::seed_from_u64(config.seed ^ 0x5eed);
    let n = config.cores;
    let shared = config.steering == Steering::Flow;
    // Per key: the core that touched it last (u16::MAX: none yet).
    let mut last_core = vec![u16::MAX; w.keys as usize];
    let mut lock_free_at = vec![0f64; BUCKETS];
    // Per core: when it is free, and when the requests in its ring finish (to bound it).
    let mut free_at = vec![0f64; n];
    let mut pending: Vec<std::collections::VecDeque<f64>> = vec![Default::default(); n];
    let mut served = vec![0u64; n];
    let mut service_ns = 0f64;
    let (mut dropped, mut transfers, mut lock_wait) = (0u64, 0u64, 0f64);
    let (mut t, mut end) = (0f64, 0f64);
    let mut key = Vec::with_capacity(w.key_bytes);
    for i in 0..config.requests {
        if let Some(rate) = config.rate {
            t += -(1.0 - rng.random::<f64>()).ln() / rate * 1e9;
        }
        let op = requests.next_op();
        let k = match op {
            Op::Get(k) | Op::Set(k) => k,
        };
        key.clear();
        w.key(k, &mut key);
        let hash = key_hash(&key);
        let client = (i % config.clients as u64) as u32;
        let core = match config.steering {
            Steering::Flow => (key_hash(&client.to_be_bytes()) as usize) % n,
            Steering::Key | Steering::KeyNicHash => owner(hash, n),
        };
        // A ring is only tracked when it can fill (not for a capacity run's unbounded one).
        let bounded = config.ring != usize::MAX;
        let q = &mut pending[core];
        while bounded && q.front().is_some_and(|&done| done <= t) {
            q.pop_front();
        }
        if bounded && q.len() >= config.ring {
            dropped += 1;
            continue;
        }
        let start = t.max(free_at[core]);
        let mut cost = costs.io_ns + costs.store_ns;
        if config.steering != Steering::KeyNicHash {
            cost += costs.hash_ns;
        }
        let previous = last_core[k as usize];
        if shared && previous != u16::MAX && previous as usize != core {
            cost += costs.transfer_ns;
            transfers += 1;
        }
        last_core[k as usize] = core as u16;
        // The store part holds the bucket's lock (shared store only: a partition is one
        // core's), after the request's receive and parse.
        let mut begin = start;
        if shared {
            let bucket = (hash as usize >> super::STEER_BITS) & (BUCKETS - 1);
            let store_at = start + costs.io_ns / 2.0;
            let wait = (lock_free_at[bucket] - store_at).max(0.0);
            lock_wait += wait;
            begin += wait;
            lock_free_at[bucket] = store_at + wait + costs.store_ns;
        }
        let done = begin + cost;
        free_at[core] = done;
        if bounded {
            q.push_back(done);
        }
        served[core] += 1;
        service_ns += done - start;
        end = end.max(done);
    }
    let total: u64 = served.iter().sum();
    let mean_ns = if total > 0 { service_ns / total as f64 } else { 0.0 };
    let busiest = served.iter().copied().max().unwrap_or(0) as f64;
    Ok(KvsSimReport {
        throughput: if end > 0.0 { total as f64 / end * 1e9 } else { 0.0 },
        dropped,
        ns_per_request: mean_ns,
        cycles_per_request: mean_ns * costs.tsc_ghz,
        transfers: if total > 0 { transfers as f64 / total as f64 } else { 0.0 },
        lock_wait_ns: if total > 0 { lock_wait / total as f64 } else { 0.0 },
        imbalance: if total > 0 { busiest / (total as f64 / n as f64) } else { 0.0 },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const COSTS: KvsCosts =
        KvsCosts { io_ns: 500.0, hash_ns: 40.0, store_ns: 200.0, transfer_ns: 150.0, tsc_ghz: 2.0 };

    fn run(cores: usize, steering: Steering) -> KvsSimReport {
        let config = KvsSimConfig {
            workload: KvsWorkload::default(),
            cores,
            steering,
            rate: None,
            requests: 200_000,
            clients: 64,
            ring: usize::MAX,
            seed: 1,
        };
        simulate(&config, &COSTS).unwrap()
    }

    #[test]
    fn one_core_costs_the_sum_of_its_parts() {
        let flow = run(1, Steering::Flow);
        assert!((flow.ns_per_request - 740.0).abs() < 1e-6, "{flow:?}");
        assert_eq!(flow.transfers, 0.0);
        let nic = run(1, Steering::KeyNicHash);
        assert!((nic.ns_per_request - 700.0).abs() < 1e-6);
        assert!((nic.throughput - 1e9 / 700.0).abs() / nic.throughput < 1e-3);
    }

    #[test]
    fn key_steering_never_moves_a_line_and_flow_steering_does() {
        let key = run(4, Steering::Key);
        assert_eq!((key.transfers, key.lock_wait_ns), (0.0, 0.0));
        let flow = run(4, Steering::Flow);
        // With 4 cores most requests find their key last touched elsewhere (hot keys are
        // touched by every core).
        assert!(flow.transfers > 0.5 && flow.transfers < 0.8, "{flow:?}");
        assert!(flow.ns_per_request > key.ns_per_request + 0.5 * COSTS.transfer_ns);
        assert!(flow.lock_wait_ns > 0.0, "the hottest key's bucket is contended");
    }

    #[test]
    fn capacity_scales_with_cores_as_far_as_load_is_even() {
        let one = run(1, Steering::KeyNicHash).throughput;
        let four = run(4, Steering::KeyNicHash);
        // Zipf popularity leaves key partitions uneven: the busiest core bounds the rest.
        assert!(four.throughput > 2.5 * one && four.throughput <= 4.0 * one * 1.001, "{one} {four:?}");
        assert!((four.throughput * four.imbalance / 4.0 - one).abs() / one < 0.02);
    }

    #[test]
    fn a_full_ring_drops() {
        let config = KvsSimConfig {
            workload: KvsWorkload::default(),
            cores: 1,
            steering: Steering::Key,
            rate: Some(2e6),
            requests: 50_000,
            clients: 8,
            ring: 64,
            seed: 3,
        };
        let r = simulate(&config, &COSTS).unwrap();
        // 740 ns each: about 1.35 M/s served of 2 M/s offered.
        let share = r.dropped as f64 / 50_000.0;
        assert!((share - (1.0 - 1e9 / 740.0 / 2e6)).abs() < 0.03, "{r:?}");
    }
}
