//! The exact sliding-window top-k: the reference every detector is scored against.
//!
//! Per-block count maps and their running sum over the window; at a boundary the window's
//! flows are ranked exactly. Memory grows with the flows in the window, which is the point of
//! the sketches; this one is only for evaluation.

use hashbrown::HashMap;

use super::{keep_top, Detector, FlowId};

/// Exact counts over the last `blocks` blocks.
pub struct ExactWindow {
    k: usize,
    /// Ring of per-block counts; the current block is `current`.
    blocks: Vec<HashMap<FlowId, u32>>,
    current: usize,
    window: HashMap<FlowId, u64>,
}

impl ExactWindow {
    /// Reports the top `k` over windows of `blocks` blocks.
    pub fn new(k: usize, blocks: usize) -> ExactWindow {
        ExactWindow { k, blocks: vec![HashMap::new(); blocks.max(1)], current: 0, window: HashMap::new() }
    }

    /// True packets of `flow` in the window.
    pub fn count(&self, flow: FlowId) -> u64 {
        self.window.get(&flow).copied().unwrap_or(0)
    }

    /// Distinct flows in the window.
    pub fn flows(&self) -> usize {
        self.window.len()
    }

    /// The k-th largest true count (0 if fewer than k flows).
    pub fn kth(&self, k: usize) -> u64 {
        if k == 0 || self.window.len() < k {
            return 0;
        }
        let mut counts: Vec<u64> = self.window.values().copied().collect();
        let (_, kth, _) = counts.select_nth_unstable_by(k - 1, |a, b| b.cmp(a));
        *kth
    }
}

impl Detector for ExactWindow {
    fn insert(&mut self, flow: FlowId, _hash: u128) {
        *self.blocks[self.current].entry(flow).or_insert(0) += 1;
        *self.window.entry(flow).or_insert(0) += 1;
    }

    /// The k largest, ties by flow id.
    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        out.clear();
        out.extend(self.window.iter().map(|(f, c)| (*f, *c)));
        keep_top(out, self.k);
    }

    fn estimate(&self, flow: FlowId, _hash: u128) -> u64 {
        self.count(flow)
    }

    fn end_block(&mut self) {
        self.current = (self.current + 1) % self.blocks.len();
        let expiring = &mut self.blocks[self.current];
        for (flow, c) in expiring.drain() {
            if let hashbrown::hash_map::Entry::Occupied(mut e) = self.window.entry(flow) {
                *e.get_mut() -= c as u64;
                if *e.get() == 0 {
                    e.remove();
                }
            }
        }
    }

    fn memory_bytes(&self) -> usize {
        self.window.allocation_size() + self.blocks.iter().map(|b| b.allocation_size()).sum::<usize>()
    }

    fn held(&self) -> usize {
        self.window.len()
    }

    /// Exact counts need no hashing: any seed.
    fn hash_seed(&self) -> u64 {
        0
    }
}

/// Precision and relative error of reports against the exact window, accumulated over
/// boundaries (FastKeeper §IV-B).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Score {
    /// Boundaries scored: full windows with at least k flows.
    pub windows: u64,
    precision_sum: f64,
    are_sum: f64,
    reported: u64,
}

impl Score {
    /// Scores one report: a reported flow is correct if its true count is at least the k-th
    /// largest true count (ties count as correct); precision = correct / k (= recall). The
    /// relative error of each reported count is |estimate − true| / max(true, 1).
    pub fn add(&mut self, report: &[(FlowId, u64)], exact: &ExactWindow, k: usize) {
        if exact.flows() < k {
            return;
        }
        let kth = exact.kth(k);
        let mut seen = hashbrown::HashSet::new();
        let mut correct = 0;
        for &(flow, est) in report.iter().take(k) {
            if !seen.insert(flow) {
                continue;
            }
            let truth = exact.count(flow);
            correct += (truth >= kth) as u64;
            self.are_sum += (est as f64 - truth as f64).abs() / truth.max(1) as f64;
            self.reported += 1;
        }
        self.precision_sum += correct as f64 / k as f64;
        self.windows += 1;
    }

    /// Mean precision over the windows scored.
    pub fn precision(&self) -> f64 {
        if self.windows == 0 {
            0.0
        } else {
            self.precision_sum / self.windows as f64
        }
    }

    /// Mean relative error over all reported flows.
    pub fn are(&self) -> f64 {
        if self.reported == 0 {
            0.0
        } else {
            self.are_sum / self.reported as f64
        }
    }
}
