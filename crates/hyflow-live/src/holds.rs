//! How long a thread held the switch's engine at a time: every other core waits that long for
//! it, and its receive ring fills meanwhile (at 1 Mpps a millisecond is 1,000 frames). Kept
//! for each core, the main thread and the offload policy's calls.

use std::sync::atomic::{AtomicU64, Ordering};

/// A hold of at least this long is counted apart (ns).
const LONG_NS: u64 = 1_000_000;

/// The longest hold, and the holds of 1 ms or more: how many and their time in all.
#[derive(Default)]
pub struct Holds {
    longest_ns: AtomicU64,
    long: AtomicU64,
    long_ns: AtomicU64,
}

impl Holds {
    /// A hold of `ns`.
    pub fn record(&self, ns: u64) {
        self.longest_ns.fetch_max(ns, Ordering::Relaxed);
        if ns >= LONG_NS {
            self.long.fetch_add(1, Ordering::Relaxed);
            self.long_ns.fetch_add(ns, Ordering::Relaxed);
        }
    }

    /// Holds of 1 ms or more.
    pub fn long(&self) -> u64 {
        self.long.load(Ordering::Relaxed)
    }

    /// Their time in all, ms.
    pub fn long_ms(&self) -> f64 {
        self.long_ns.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// As `show --json` gives it: the longest (µs), and the holds of 1 ms or more (count, ms).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "longest_us": self.longest_ns.load(Ordering::Relaxed) as f64 / 1e3,
            "long": self.long(),
            "long_ms": self.long_ms(),
        })
    }
}
