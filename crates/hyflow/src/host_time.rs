//! The engine's edge with the host's wall clock — the only module that reads it.
//!
//! Everything hyflow decides or simulates runs on time passed in by the caller (trace time),
//! so the same inputs give the same results anywhere. Some figures are about the machine
//! running hyflow instead: how long installing a Gigaflow traversal or revalidating NIC
//! entries took it, and the cost model's calibration. Those are read from a [`HostClock`]
//! that the caller hands in (none by default, and then nothing is timed), kept in
//! [`HostTimings`] apart from the deterministic counters, and never feed back into a decision.

use std::time::Instant;

/// A source of host time, in nanoseconds from an arbitrary origin.
pub trait HostClock: Send {
    /// Now.
    fn now_ns(&self) -> u64;
}

/// The host's monotonic wall clock.
pub(crate) struct WallClock {
    origin: Instant,
}

impl Default for WallClock {
    fn default() -> Self {
        WallClock { origin: Instant::now() }
    }
}

impl HostClock for WallClock {
    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

/// Host time spent by a switch on work whose duration is a property of the host machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostTimings {
    /// Upcalls whose NIC install was timed.
    pub nic_install_upcalls: u64,
    /// Nanoseconds spent on those installs (partitioning, rule generation, table writes).
    pub nic_install_ns: u64,
    /// Nanoseconds spent revalidating NIC entries after rule updates.
    pub nic_revalidation_ns: u64,
}

impl HostTimings {
    /// Mean µs per timed NIC install (0 when none was timed).
    pub(crate) fn install_us_per_upcall(&self) -> f64 {
        if self.nic_install_upcalls == 0 {
            0.0
        } else {
            self.nic_install_ns as f64 / self.nic_install_upcalls as f64 / 1e3
        }
    }

    /// Milliseconds of NIC revalidation.
    pub(crate) fn nic_revalidation_ms(&self) -> f64 {
        self.nic_revalidation_ns as f64 / 1e6
    }
}

/// Times `f` over `rounds` runs and returns the best mean per item (ns), the usual way to
/// read through a noisy host (cost-model calibration).
pub(crate) fn best_per_item(rounds: usize, items: usize, mut f: impl FnMut()) -> f64 {
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as f64 / items as f64
        })
        .fold(f64::INFINITY, f64::min)
}
