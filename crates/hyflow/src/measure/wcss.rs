//! WCSS, Window Compact Space-Saving (Ben-Basat, Einziger, Friedman, Kassner, INFOCOM'16):
//! heavy hitters over a sliding window.
//!
//! Time is cut into frames of one window. Within a frame a Space-Saving summary y of m
//! counters counts flows; each time a flow's count crosses a multiple of the quantum q, an
//! *overflow* is recorded in the current block. Overflows of the blocks still in the window
//! are summed per flow (B), so a flow's window estimate is q·(its overflows in the window)
//! plus what it has counted since its last overflow. When a block leaves the window its
//! overflows are forgotten; at a frame's end y restarts. q = (packets in the last window) /
//! m, so a window produces about m overflows (the paper's W / k with k = m blocks).
//!
//! Memory: y, B and a ring of overflow records sized for 2m records; overflows beyond it
//! are not recorded (counted in [`Wcss::dropped`]).

use std::collections::VecDeque;

use super::flow_id::PackedIds;
use super::flow_table::FlowTable;
use super::heap::TopHeap;
use super::{keep_top, Algo, ConfigError, Detector, DetectorConfig, FlowId};

/// WCSS.
pub struct Wcss {
    k: usize,
    blocks: usize,
    y: TopHeap,
    /// Packet-equivalents of each flow's overflows in the window.
    b: FlowTable<u64>,
    /// Overflow records, oldest first: (flow, quantum it stood for).
    ring: Records,
    /// Records per block still in the window, oldest first.
    per_block: VecDeque<usize>,
    quantum: u64,
    m: usize,
    /// Packets in the current frame's blocks, per block (to size the next quantum).
    packets: VecDeque<u64>,
    block_in_frame: usize,
    seed: u64,
    /// Overflows not recorded for lack of room.
    pub dropped: u64,
}

fn bytes_for(m: usize, blocks: usize, key_bits: u32) -> usize {
    TopHeap::bytes_for_key(m, key_bits)
        + FlowTable::<u64>::bytes_for(2 * m, key_bits)
        + Records::bytes_for(2 * m, key_bits)
        + 2 * blocks * 8
}

/// A fixed-capacity queue of overflow records (flow, quantum), ids packed at the key's width.
struct Records {
    ids: PackedIds,
    quanta: Vec<u32>,
    head: usize,
    len: usize,
}

impl Records {
    fn new(capacity: usize, key_bits: u32) -> Records {
        Records { ids: PackedIds::new(capacity, key_bits), quanta: vec![0; capacity], head: 0, len: 0 }
    }

    fn bytes_for(capacity: usize, key_bits: u32) -> usize {
        PackedIds::bytes_for(capacity, key_bits) + capacity * 4
    }

    fn memory_bytes(&self) -> usize {
        self.ids.memory_bytes() + self.quanta.len() * 4
    }

    /// Appends a record, or returns false if the queue is full.
    fn push(&mut self, flow: FlowId, quantum: u32) -> bool {
        if self.len == self.quanta.len() {
            return false;
        }
        let slot = (self.head + self.len) % self.quanta.len();
        self.ids.set(slot, flow);
        self.quanta[slot] = quantum;
        self.len += 1;
        true
    }

    /// Removes the oldest record.
    fn pop(&mut self) -> Option<(FlowId, u32)> {
        if self.len == 0 {
            return None;
        }
        let record = (self.ids.get(self.head), self.quanta[self.head]);
        self.head = (self.head + 1) % self.quanta.len();
        self.len -= 1;
        Some(record)
    }
}

/// A per-block queue holding one 0, with room for a window of `blocks` blocks.
fn one_zero<T: Default>(blocks: usize) -> VecDeque<T> {
    let mut q = VecDeque::with_capacity(blocks);
    q.push_back(T::default());
    q
}

impl Wcss {
    /// Sized from `config.memory`: the most counters m whose structures fit (at least k).
    pub fn new(config: &DetectorConfig) -> Result<Wcss, ConfigError> {
        let m = config.entries(Algo::Wcss, |m| bytes_for(m, config.blocks, config.key_bits))?;
        Ok(Wcss {
            k: config.k,
            blocks: config.blocks,
            y: TopHeap::new(m, config.key_bits),
            b: FlowTable::new(2 * m, config.key_bits),
            ring: Records::new(2 * m, config.key_bits),
            per_block: one_zero(config.blocks),
            // No overflows until a first block has shown the rate.
            quantum: u64::MAX,
            m,
            packets: one_zero(config.blocks),
            block_in_frame: 0,
            seed: config.seed,
            dropped: 0,
        })
    }

    fn window_estimate(&self, flow: FlowId, hash: u64) -> u64 {
        let residual = match (self.y.get(flow, hash), self.quantum) {
            (Some(c), u64::MAX) => c,
            (Some(c), q) => c % q,
            (None, _) => 0,
        };
        self.b.get(flow, hash).unwrap_or(0) + residual
    }
}

impl Detector for Wcss {
    #[inline]
    fn insert(&mut self, flow: FlowId, hash: u128) {
        let h = hash as u64;
        let count = self.y.count_one(flow, h);
        *self.packets.back_mut().expect("a current block") += 1;
        if self.quantum != u64::MAX && count.is_multiple_of(self.quantum) {
            if self.ring.push(flow, self.quantum as u32) {
                *self.per_block.back_mut().expect("a current block") += 1;
                // At most 2m records, so at most 2m flows: there is room.
                if let Some(b) = self.b.entry(flow, h) {
                    *b += self.quantum;
                }
            } else {
                self.dropped += 1;
            }
        }
    }

    fn top(&mut self, out: &mut Vec<(FlowId, u64)>) {
        let mut candidates = Vec::new();
        self.y.sorted(&mut candidates);
        candidates.extend(self.b.iter().map(|(f, _)| (f, 0)));
        candidates.sort_unstable_by_key(|e| e.0);
        candidates.dedup_by_key(|e| e.0);
        out.clear();
        out.extend(
            candidates.into_iter().map(|(f, _)| (f, self.window_estimate(f, f.hash(self.seed) as u64))),
        );
        out.retain(|e| e.1 > 0);
        keep_top(out, self.k);
    }

    fn estimate(&self, flow: FlowId, hash: u128) -> u64 {
        self.window_estimate(flow, hash as u64)
    }

    fn end_block(&mut self) {
        if self.packets.len() == self.blocks {
            self.packets.pop_front();
        }
        let recent: u64 = self.packets.iter().sum();
        let window_packets = recent * self.blocks as u64 / self.packets.len().max(1) as u64;
        let quantum = (window_packets / self.m as u64).max(1);
        if self.quantum == u64::MAX {
            // The first block has shown the rate: overflows start, and what y counted so far
            // is credited to the block that closes, as one record per flow.
            self.quantum = quantum;
            let mut counted = Vec::new();
            self.y.sorted(&mut counted);
            for (flow, c) in counted {
                let whole = c / quantum * quantum;
                if whole > 0 && self.ring.push(flow, whole.min(u32::MAX as u64) as u32) {
                    *self.per_block.back_mut().expect("a current block") += 1;
                    if let Some(b) = self.b.entry(flow, flow.hash(self.seed) as u64) {
                        *b += whole;
                    }
                }
            }
        }
        if self.per_block.len() == self.blocks {
            let expired = self.per_block.pop_front().unwrap_or(0);
            for (flow, q) in std::iter::from_fn(|| self.ring.pop()).take(expired) {
                let h = flow.hash(self.seed) as u64;
                if let Some(b) = self.b.get_mut(flow, h) {
                    *b -= q as u64;
                    if *b == 0 {
                        self.b.remove(flow, h);
                    }
                }
            }
        }
        self.per_block.push_back(0);
        self.packets.push_back(0);
        self.block_in_frame += 1;
        if self.block_in_frame == self.blocks {
            // A new frame: y restarts with a quantum sized to the last window's traffic.
            self.block_in_frame = 0;
            self.y.clear();
            self.quantum = quantum;
        }
    }

    fn memory_bytes(&self) -> usize {
        self.y.memory_bytes()
            + self.b.memory_bytes()
            + self.ring.memory_bytes()
            + (self.per_block.capacity() + self.packets.capacity()) * 8
    }
    fn held(&self) -> usize {
        // A flow that overflowed is in both.
        let seed = self.seed;
        self.y.len() + self.b.iter().filter(|&(f, _)| self.y.get(f, f.hash(seed) as u64).is_none()).count()
    }

    fn hash_seed(&self) -> u64 {
        self.seed
    }
}
