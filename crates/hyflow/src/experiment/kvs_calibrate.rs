//! FlexKVS's costs on this machine ([`KvsCosts`], `hyflow calibrate --kvs`): the parts of a
//! request the store and the hash make, timed on the engine's own store and service with the
//! paper's workload, and the cost of a line moved between cores, timed with two threads on a
//! shared store against two on partitions of their own; the rest of a request's time (its
//! frames) comes from a live server's busy time per request.

use std::sync::Barrier;
use std::time::Instant;

use crate::host_time::best_per_item;
use crate::invalid_param::InvalidParam;
use crate::kvs::model::KvsCosts;
use crate::kvs::service::{serve, ServeTime, ServiceStats};
use crate::kvs::store::{Store, StoreConfig};
use crate::kvs::workload::{KvsWorkload, Op};
use crate::kvs::{key_hash, owner};

/// What a live `hyflow kvs` run measured on one core.
#[derive(Clone, Copy, Debug)]
pub struct LiveKvs {
    /// Nanoseconds of the core per request (busy time over requests).
    pub ns_per_request: f64,
    /// Whether it reused the NIC's hash (then its requests paid no hash).
    pub nic_hash: bool,
}

/// What calibration found, with the figures behind the costs.
#[derive(Clone, Copy, Debug)]
pub struct KvsCalibration {
    /// The costs.
    pub costs: KvsCosts,
    /// Two threads sharing one store: nanoseconds per request.
    pub shared_ns: f64,
    /// Two threads on partitions of their own: nanoseconds per request.
    pub partitioned_ns: f64,
    /// Share of the shared run's requests whose key the other thread touched last.
    pub transfer_share: f64,
}

const REQUESTS: usize = 400_000;
const T: ServeTime = ServeTime { server_s: 1, unix_s: 0 };

/// The workload's requests, as memcached ASCII bytes with their hash and key index.
fn requests(w: &KvsWorkload, seed: u64) -> Result<Vec<(Vec<u8>, u32, u64)>, InvalidParam> {
    let mut stream = w.requests(seed)?;
    let mut key = Vec::new();
    Ok((0..REQUESTS)
        .map(|i| {
            let op = stream.next_op();
            let k = match op {
                Op::Get(k) | Op::Set(k) => k,
            };
            key.clear();
            w.key(k, &mut key);
            let mut body = Vec::new();
            w.request(op, i as u64, &mut body);
            (body, key_hash(&key), k)
        })
        .collect())
}

fn populated(w: &KvsWorkload, writers: usize) -> Store {
    let store = Store::new(StoreConfig::new(256 << 20, writers)).expect("a valid store");
    let mut body = Vec::new();
    let (mut out, mut stats) = (Vec::new(), ServiceStats::default());
    for k in 0..w.keys {
        body.clear();
        w.request(Op::Set(k), 0, &mut body);
        serve(std::slice::from_ref(&store), 0, &body, None, T, &mut out, &mut stats);
    }
    store
}

/// Measures the costs; `tsc_ghz` is the time-stamp counter's rate the live server's cycles
/// are in (measured by the caller, which may read the counter).
pub fn calibrate_kvs(live: LiveKvs, tsc_ghz: f64) -> Result<KvsCalibration, InvalidParam> {
    let w = KvsWorkload::default();
    let reqs = requests(&w, 7)?;
    let mut key = Vec::new();
    let keys: Vec<Vec<u8>> = (0..w.keys.min(100_000))
        .map(|k| {
            key.clear();
            w.key(k, &mut key);
            key.clone()
        })
        .collect();
    let hash_ns = best_per_item(5, keys.len(), || {
        for k in &keys {
            std::hint::black_box(key_hash(std::hint::black_box(k)));
        }
    });
    // One core, its own store, the hash given (the NIC's): the store's part.
    let store = populated(&w, 1);
    let (mut out, mut stats) = (Vec::new(), ServiceStats::default());
    let store_ns = best_per_item(3, reqs.len(), || {
        for (body, hash, _) in &reqs {
            serve(std::slice::from_ref(&store), 0, body, Some(*hash), T, &mut out, &mut stats);
        }
    });
    drop(store);
    // Two threads at once: flow steering's shared store against key steering's partitions.
    let shared_store = populated(&w, 2);
    let shared = two_threads(&reqs, |_, i| i % 2, |_| &shared_store);
    drop(shared_store);
    let parts = [populated(&w, 2), populated(&w, 2)];
    let partitioned = two_threads(&reqs, |hash, _| owner(hash, 2), |t| &parts[t]);
    drop(parts);
    // How often the shared run's requests met a key the other thread touched last.
    let mut last = vec![u8::MAX; w.keys as usize];
    let mut moved = 0u64;
    for (i, (_, _, k)) in reqs.iter().enumerate() {
        let t = (i % 2) as u8;
        moved += (last[*k as usize] != u8::MAX && last[*k as usize] != t) as u64;
        last[*k as usize] = t;
    }
    let transfer_share = moved as f64 / reqs.len() as f64;
    let transfer_ns =
        if transfer_share > 0.0 { ((shared - partitioned) / transfer_share).max(0.0) } else { 0.0 };
    let hash_paid = if live.nic_hash { 0.0 } else { hash_ns };
    let io_ns = (live.ns_per_request - store_ns - hash_paid).max(0.0);
    let costs = KvsCosts { io_ns, hash_ns, store_ns, transfer_ns, tsc_ghz };
    costs.check()?;
    Ok(KvsCalibration { costs, shared_ns: shared, partitioned_ns: partitioned, transfer_share })
}

/// Nanoseconds per request when two threads serve `reqs` together, request `i` going to
/// thread `which(hash, i)` and its store `store(thread)`: the slower thread's wall time over
/// its requests, best of three.
fn two_threads<'a>(
    reqs: &[(Vec<u8>, u32, u64)],
    which: impl Fn(u32, usize) -> usize + Sync,
    store: impl Fn(usize) -> &'a Store + Sync,
) -> f64 {
    (0..3)
        .map(|_| {
            let start = Barrier::new(2);
            let per: Vec<f64> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..2)
                    .map(|t| {
                        let (start, which, store) = (&start, &which, &store);
                        s.spawn(move || {
                            let mine: Vec<&(Vec<u8>, u32, u64)> = reqs
                                .iter()
                                .enumerate()
                                .filter(|(i, r)| which(r.1, *i) == t)
                                .map(|(_, r)| r)
                                .collect();
                            let (mut out, mut stats) = (Vec::new(), ServiceStats::default());
                            let stores = std::slice::from_ref(store(t));
                            start.wait();
                            let began = Instant::now();
                            for (body, hash, _) in &mine {
                                serve(stores, t, body, Some(*hash), T, &mut out, &mut stats);
                            }
                            began.elapsed().as_nanos() as f64 / mine.len().max(1) as f64
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().expect("a calibration thread")).collect()
            });
            per.into_iter().fold(0.0, f64::max)
        })
        .fold(f64::INFINITY, f64::min)
}
