//! What the forwarding loop asks of a port's packet I/O, whichever kernel interface carries
//! it (AF_XDP or AF_PACKET): receive a batch of frames, send frames built in place, and a
//! descriptor to sleep on.

use std::io;
use std::ops::Range;
use std::os::fd::RawFd;

/// Frames received per batch at most (OVS's `NETDEV_MAX_BURST` is 32; a batch of 64 halves
/// the per-batch work — one clock read, one flush per port — at rates where it matters).
pub const BATCH: usize = 64;
/// Frames each AF_XDP receive ring holds (the ring an offload policy's queue threshold is
/// measured against).
pub const RX_RING: u32 = 4096;

/// Frames received in one batch, copied out of the kernel's ring so that each ring slot goes
/// back at once: the rest of the batch's work (the engine, output frames) never holds a slot
/// the kernel could be filling. Allocated once; receiving allocates nothing.
pub struct RxBatch {
    /// Most frames the receive ring held when the batch was taken from it (the batch
    /// included): the occupancy an offload policy's queue trigger watches. 0 where the I/O
    /// cannot tell.
    pub waiting: u32,
    buf: Vec<u8>,
    slot: usize,
    lens: [usize; BATCH],
    /// When the XDP program handed each frame to software (CLOCK_MONOTONIC ns; 0: not known,
    /// as on AF_PACKET).
    handed_ns: [u64; BATCH],
    /// The key hash the XDP program of `hyflow kvs` wrote in front of each frame, if any.
    key_hash: [Option<u32>; BATCH],
    n: usize,
}

impl RxBatch {
    /// A batch whose frames are at most `max_frame` bytes.
    pub fn new(max_frame: usize) -> RxBatch {
        RxBatch {
            waiting: 0,
            buf: vec![0; max_frame * BATCH],
            slot: max_frame,
            lens: [0; BATCH],
            handed_ns: [0; BATCH],
            key_hash: [None; BATCH],
            n: 0,
        }
    }

    /// Empties the batch.
    pub fn clear(&mut self) {
        self.n = 0;
        self.waiting = 0;
    }

    /// Frames in the batch.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether the batch holds no frame.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Whether the batch has room for another frame.
    pub fn has_room(&self) -> bool {
        self.n < BATCH
    }

    /// Frame `i`.
    pub fn frame(&self, i: usize) -> &[u8] {
        &self.buf[i * self.slot..i * self.slot + self.lens[i]]
    }

    /// Appends a frame written by `write` into a slot of the batch's frame size (it returns
    /// the length written); false if the batch is full.
    pub fn push_with(&mut self, write: impl FnOnce(&mut [u8]) -> usize) -> bool {
        if !self.has_room() {
            return false;
        }
        let at = self.n * self.slot;
        let len = write(&mut self.buf[at..at + self.slot]);
        self.lens[self.n] = len.min(self.slot);
        self.handed_ns[self.n] = 0;
        self.key_hash[self.n] = None;
        self.n += 1;
        true
    }

    /// Says when the last frame pushed was handed to software (CLOCK_MONOTONIC ns).
    pub fn stamp_last(&mut self, handed_ns: u64) {
        if let Some(i) = self.n.checked_sub(1) {
            self.handed_ns[i] = handed_ns;
        }
    }

    /// Says which key hash the XDP program computed for the last frame pushed.
    pub fn key_hash_last(&mut self, hash: u32) {
        if let Some(i) = self.n.checked_sub(1) {
            self.key_hash[i] = Some(hash);
        }
    }

    /// The key hash the XDP program computed for frame `i`, if it did.
    pub fn key_hash(&self, i: usize) -> Option<u32> {
        self.key_hash[i]
    }

    /// When frame `i` was handed to software, if the I/O knows (CLOCK_MONOTONIC ns).
    pub fn handed_ns(&self, i: usize) -> Option<u64> {
        Some(self.handed_ns[i]).filter(|&t| t != 0)
    }
}

/// Why a frame was not handed to a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendRefused {
    /// The transmit ring (or socket buffer) is full: the frame is dropped, as a NIC's full
    /// queue drops it.
    Full,
    /// The interface is gone or down.
    Down,
}

/// A port's packet I/O. The switch's cores share a port (each polls the receive queues it
/// was given, any of them sends), each holding the port's lock while it calls in.
pub trait PortIo: Send {
    /// How frames move, for the line the switch prints at start (`afxdp native copy`).
    fn describe(&self) -> String;
    /// Moves the frames waiting on receive queue `queue` (an index of [`PortIo::rx_fds`])
    /// into `batch`, as many as it has room for; returns how many. An error means the
    /// interface cannot receive any more (gone, down).
    fn receive(&mut self, queue: usize, batch: &mut RxBatch) -> io::Result<usize>;
    /// Sends one frame that `build` writes into a transmit buffer (it returns the part of the
    /// buffer holding the frame, or `None` to send nothing). Frames may wait for
    /// [`PortIo::flush`].
    fn send_with(
        &mut self,
        build: &mut dyn FnMut(&mut [u8]) -> Option<Range<usize>>,
    ) -> Result<(), SendRefused>;
    /// Hands the kernel the frames sent since the last flush.
    fn flush(&mut self);
    /// Frames the kernel dropped before the switch could receive them (its receive ring was
    /// full), since the port opened.
    fn rx_dropped(&mut self) -> u64;
    /// The descriptors that become readable when frames arrive, one per receive queue, in
    /// queue order.
    fn rx_fds(&self) -> Vec<RawFd>;
}
