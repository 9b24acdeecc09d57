//! A worker's tuple queue for `hyflow storm`'s software demultiplexer: one producer (the
//! demultiplexer thread), one consumer (the worker), fixed slots, no allocation and no lock —
//! FlexStorm's per-worker queue, which FlexNIC's variant replaces with one the NIC fills.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes of a tuple's data a slot holds.
pub const MAX_DATA: usize = 240;

/// A tuple in a queue.
#[derive(Clone, Copy)]
pub struct Tuple {
    /// When the XDP program handed its frame over (CLOCK_MONOTONIC ns; 0: not known).
    pub received_ns: u64,
    /// Bytes of `data` in use.
    pub len: u16,
    /// Its data.
    pub data: [u8; MAX_DATA],
}

impl Tuple {
    /// Its data.
    pub fn data(&self) -> &[u8] {
        &self.data[..self.len as usize]
    }
}

/// Index counters on cache lines of their own, so that the producer's and the consumer's
/// writes do not bounce one line between their cores.
#[repr(align(128))]
struct Index(AtomicUsize);

/// The queue.
pub struct TupleQueue {
    slots: Box<[UnsafeCell<Tuple>]>,
    mask: usize,
    head: Index,
    tail: Index,
}

// SAFETY: a slot is written only by the producer while it is free (between tail and head +
// capacity) and read only by the consumer once published (head advanced with Release, read
// with Acquire); each index is written by one side only.
unsafe impl Sync for TupleQueue {}
// SAFETY: as above.
unsafe impl Send for TupleQueue {}

impl TupleQueue {
    /// A queue of `capacity` slots (rounded up to a power of two).
    pub fn new(capacity: usize) -> TupleQueue {
        let n = capacity.next_power_of_two().max(2);
        TupleQueue {
            slots: (0..n)
                .map(|_| UnsafeCell::new(Tuple { received_ns: 0, len: 0, data: [0; MAX_DATA] }))
                .collect(),
            mask: n - 1,
            head: Index(AtomicUsize::new(0)),
            tail: Index(AtomicUsize::new(0)),
        }
    }

    /// Appends a tuple (producer only); false if the queue is full or the data too long.
    pub fn push(&self, received_ns: u64, data: &[u8]) -> bool {
        if data.len() > MAX_DATA {
            return false;
        }
        let head = self.head.0.load(Ordering::Relaxed);
        if head - self.tail.0.load(Ordering::Acquire) > self.mask {
            return false;
        }
        // SAFETY: the slot is free (see the type's Sync argument); only this producer writes it.
        let slot = unsafe { &mut *self.slots[head & self.mask].get() };
        slot.received_ns = received_ns;
        slot.len = data.len() as u16;
        slot.data[..data.len()].copy_from_slice(data);
        self.head.0.store(head + 1, Ordering::Release);
        true
    }

    /// Takes the oldest tuple (consumer only), handing it to `take`; false if empty.
    pub fn pop(&self, take: impl FnOnce(&Tuple)) -> bool {
        let tail = self.tail.0.load(Ordering::Relaxed);
        if tail == self.head.0.load(Ordering::Acquire) {
            return false;
        }
        // SAFETY: published by the producer (head past it); only this consumer reads it.
        take(unsafe { &*self.slots[tail & self.mask].get() });
        self.tail.0.store(tail + 1, Ordering::Release);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_producer_and_a_consumer_see_every_tuple_in_order() {
        let q = TupleQueue::new(64);
        let n = 200_000u64;
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut i = 0u64;
                while i < n {
                    if q.push(i, &i.to_be_bytes()) {
                        i += 1;
                    }
                }
            });
            let mut next = 0u64;
            while next < n {
                q.pop(|t| {
                    assert_eq!(t.received_ns, next);
                    assert_eq!(t.data(), next.to_be_bytes());
                    next += 1;
                });
            }
        });
        assert!(!q.pop(|_| {}));
    }

    #[test]
    fn a_full_queue_refuses() {
        let q = TupleQueue::new(4);
        for i in 0..4 {
            assert!(q.push(i, b"x"));
        }
        assert!(!q.push(9, b"x"));
        assert!(!q.push(0, &[0; MAX_DATA + 1]));
    }
}
