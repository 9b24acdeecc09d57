//! Space-Saving (Metwally, Agrawal, El Abbadi): m counters for the m flows seen most.
//!
//! A monitored flow's counter is incremented; an unmonitored one replaces the flow with the
//! smallest counter and inherits that count plus one (an overestimate by at most the
//! minimum). The Stream-Summary is a min-heap indexed by flow ([`TopHeap`]), m as large as
//! the memory allows; the report is its k largest. Counts are since the start: here it
//! restarts every window (see [`super`]).

use super::heap::TopHeap;
use super::{Algo, ConfigError, Detector, DetectorConfig, FlowId, Tumbling};

/// Space-Saving.
pub(crate) struct SpaceSaving {
    k: usize,
    summary: TopHeap,
    window: Tumbling,
    seed: u64,
}

impl SpaceSaving {
    /// Sized from `config.memory`: the most counters whose summary fits (at least k).
    pub(crate) fn new(config: &DetectorConfig) -> Result<SpaceSaving, ConfigError> {
        let lo = config.entries(Algo::SpaceSaving, |m| TopHeap::bytes_for_key(m, config.key_bits))?;
        Ok(SpaceSaving {
            k: config.k,
            summary: TopHeap::new(lo, config.key_bits),
            window: Tumbling::new(config.blocks),
            seed: config.seed,
        })
    }
}

impl Detector for SpaceSaving {
    #[inline]
    fn insert(&mut self, flow: FlowId, hash: u128) {
        self.summary.count_one(flow, hash as u64);
    }

    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        self.summary.sorted(out);
        out.truncate(self.k);
    }

    fn estimate(&self, flow: FlowId, hash: u128) -> u64 {
        self.summary.get(flow, hash as u64).unwrap_or(0)
    }

    fn end_block(&mut self) {
        if self.window.end_block() {
            self.summary.clear();
        }
    }

    fn memory_bytes(&self) -> usize {
        self.summary.memory_bytes()
    }
    fn held(&self) -> usize {
        self.summary.len()
    }

    fn hash_seed(&self) -> u64 {
        self.seed
    }
}
