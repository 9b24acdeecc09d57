//! What the forwarding threads ask of a NIC tier in front of the engine (`--nic xdp`: the
//! XDP program's tables, `xdp_tier`), so that they do not depend on how it is built.

use hyflow::offload::HardwareCounters;
use hyflow::openflow::rule::Match;
use hyflow::packet::FlowKey;
use hyflow::switch::Switch;

/// A NIC tier whose tables mirror the engine's NIC entries; an offload policy's polls read
/// its counters through [`HardwareCounters`].
pub trait NicTier: HardwareCounters + Send {
    /// Brings the tier's tables in line with the engine's NIC entries changed since the last
    /// call; the changes were decided at `decided_ns` on the engine's clock. Every entry the
    /// engine removed or changed leaves the tables; of the new ones at most `max_installs` go
    /// in, the rest at the next call (true: some wait), so that one call never holds the
    /// engine long.
    fn sync(&mut self, switch: &mut Switch, decided_ns: u64, max_installs: usize) -> bool;
    /// Reads the tier's counters and credits the frames it served since the last read: all
    /// of them (`all`, for a report), or a part of a periodic pass, as its read budget and a
    /// bound per call allow; true if the pass has entries left.
    fn read_counters(&mut self, switch: &mut Switch, all: bool) -> bool;
    /// Sends the headers of this share of the frames it serves to software (0: none).
    fn sample(&mut self, rate: f64);
    /// Whether it samples headers: nothing wakes the switch per sample, so the main thread
    /// drains them every few milliseconds.
    fn samples(&self) -> bool;
    /// Hands `seen` the sampled headers waiting (each one's key and its frame's length), at
    /// most `max`; returns how many.
    fn drain_samples(&mut self, max: u64, seen: &mut dyn FnMut(&FlowKey, u32)) -> u64;
    /// Its figures, for `show --json`.
    fn report(&self) -> serde_json::Value;
    /// Its figures in one line, for `show`.
    fn summary(&self) -> String;
    /// Whether its tables hold an entry matching exactly `m`.
    fn holds(&self, m: &Match) -> bool;
    /// The host's mean time per entry written into its tables or taken out (ns), if it wrote
    /// any: `sim`'s `nic_write_ns`.
    fn write_ns(&self) -> Option<f64>;
}
