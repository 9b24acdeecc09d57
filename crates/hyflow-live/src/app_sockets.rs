//! AF_XDP sockets for an application server (`hyflow kvs`, feature `afxdp`): FlexNIC's
//! per-core queues on a NIC with fewer queues than cores. Each receive queue has a socket per
//! core, all on the queue's one UMEM (`XDP_SHARED_UMEM`), and each socket has its own receive
//! *and* transmit ring, so that a core receives and answers without touching another core's
//! rings. A core answers in the request's own buffer (the reply overwrites the request, as a
//! NIC's descriptor is reused), so nothing is copied out or staged. What the sockets of a
//! queue must share — the fill ring buffers go back on and the completion ring sent buffers
//! come back on — is recycled in bulk once per round under a short lock, which a core skips
//! when another holds it (unless its own backlog grows).
//!
//! Buffers are owned by one party at a time: the kernel (fill ring, a receive or transmit
//! ring, the completion ring), a core (received and not yet sent or given back), or the
//! queue's small free list (for replies longer than one datagram).

use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use anyhow::{anyhow, Result};
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, RingRx, RingTx, Umem};

use crate::afxdp::{
    bind_queue, drain_tx, frame_size_for, give_back, socket_drops, take_meta, BoundQueue, FrameMeta,
    QueueShape, UmemArea,
};
use crate::interfaces::Interface;
use crate::port_io::{BATCH, RX_RING};

/// Bytes the kernel leaves in front of a received frame in its buffer (`XDP_PACKET_HEADROOM`).
const XDP_PACKET_HEADROOM: usize = 256;
/// Buffers per socket beyond what its receive ring holds: room for replies in flight.
const IN_FLIGHT_PER_SOCKET: u32 = RX_RING;
/// Buffers the queue's free list keeps for replies of more than one datagram.
const FREE_TARGET: usize = 256;
/// Buffers a core takes from the free list at a time.
const SPARE_TAKE: usize = 16;
/// Buffers a core may hold back from the fill ring before it waits for the lock.
const BACKLOG: usize = 4 * BATCH;

/// What a queue's sockets share, under its lock.
struct Shared {
    device: DeviceQueue,
    /// Buffers for replies' second and later datagrams.
    free: Vec<u64>,
}

/// One receive queue's UMEM and what its sockets share.
struct Queue {
    frame_size: u64,
    shared: Mutex<Shared>,
    /// Kept alive for the rings (dropping it closes the UMEM).
    _umem: Umem,
    /// Declared last: unmapped after the sockets close.
    area: UmemArea,
}

// The device's rings are touched only under the mutex; the UMEM handle only keeps the UMEM
// alive after setup (nothing calls it); the area as `UmemArea` says.
unsafe impl Send for Shared {}
unsafe impl Send for Queue {}
unsafe impl Sync for Queue {}

/// A port's sockets for an application server: per receive queue, one socket per core.
pub struct AppSockets {
    /// Each core's sockets, one per queue; taken by [`AppSockets::take_cores`].
    cores: Vec<CoreSockets>,
    /// The descriptors the XDP program's `xsks[queue * cores + core]` holds.
    fds: Vec<RawFd>,
    zero_copy: bool,
    max_frame: usize,
}

impl AppSockets {
    /// Opens `cores` sockets on every receive queue of `iface` (zero-copy if the driver has
    /// it, copy mode otherwise).
    pub fn open(iface: &Interface, max_frame: usize, cores: u32) -> Result<AppSockets> {
        let mut zero_copy = true;
        let mut per_core: Vec<Vec<CoreSocket>> = (0..cores).map(|_| Vec::new()).collect();
        let mut fds = Vec::new();
        for q in 0..iface.rx_queues {
            let opened = match open_queue(iface, q, max_frame, zero_copy, cores) {
                Err(_) if zero_copy => {
                    zero_copy = false;
                    open_queue(iface, q, max_frame, false, cores)?
                }
                other => other?,
            };
            for (c, socket) in opened.into_iter().enumerate() {
                fds.push(socket.rx.as_raw_fd());
                per_core[c].push(socket);
            }
        }
        let cores = per_core.into_iter().map(|sockets| CoreSockets { sockets }).collect();
        let max_frame = frame_size_for(max_frame) as usize - XDP_PACKET_HEADROOM;
        Ok(AppSockets { cores, fds, zero_copy, max_frame })
    }

    /// The sockets' descriptors, `queue * cores + core`.
    pub fn fds(&self) -> &[RawFd] {
        &self.fds
    }

    /// The longest frame a socket's buffer holds (the rest of it is XDP's headroom).
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Whether the sockets run zero-copy.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Each core's sockets, to move to its thread.
    pub fn take_cores(&mut self) -> Vec<CoreSockets> {
        std::mem::take(&mut self.cores)
    }
}

fn open_queue(
    iface: &Interface,
    queue: u32,
    max_frame: usize,
    zero_copy: bool,
    cores: u32,
) -> Result<Vec<CoreSocket>> {
    let frame_size = frame_size_for(max_frame);
    let total = (RX_RING + IN_FLIGHT_PER_SOCKET) * cores + FREE_TARGET as u32;
    let area = UmemArea::map(total as usize * frame_size as usize)?;
    // Fill and completion rings hold every buffer: the kernel never waits for room on them.
    let ring = total.next_power_of_two();
    let shape = QueueShape { frame_size, fill: ring, complete: ring, tx_per_socket: true };
    let BoundQueue { umem, mut device, rx, tx } =
        bind_queue(&area, (iface, queue), &shape, zero_copy, cores)?;
    let to_fill = total - FREE_TARGET as u32;
    let mut fill = device.fill(to_fill);
    let filled = fill.insert((0..to_fill).map(|i| i as u64 * frame_size as u64));
    fill.commit();
    drop(fill);
    if filled != to_fill {
        return Err(anyhow!("the fill ring took {filled} of {to_fill} buffers"));
    }
    let free = (to_fill..total).map(|i| i as u64 * frame_size as u64).collect();
    let queue = Arc::new(Queue {
        frame_size: frame_size as u64,
        shared: Mutex::new(Shared { device, free }),
        _umem: umem,
        area,
    });
    Ok(rx
        .into_iter()
        .zip(tx)
        .map(|(rx, tx)| CoreSocket {
            rx,
            tx,
            state: CoreState {
                queue: Arc::clone(&queue),
                sending: Vec::with_capacity(4 * BATCH),
                to_fill: Vec::with_capacity(total as usize),
                spare: Vec::with_capacity(SPARE_TAKE),
            },
        })
        .collect())
}

/// One core's sockets, one per receive queue.
pub struct CoreSockets {
    sockets: Vec<CoreSocket>,
}

impl CoreSockets {
    /// Serves at most a batch from each socket, calling `answer` on each request in turn;
    /// returns how many it served.
    pub fn serve(&mut self, answer: &mut impl FnMut(&mut Request<'_>)) -> usize {
        self.sockets.iter_mut().map(|s| s.serve(answer)).sum()
    }

    /// Hands the replies of the batches served to the kernel and recycles buffers; returns
    /// how many replies the transmit rings had no room for (dropped).
    pub fn flush(&mut self) -> u64 {
        self.sockets.iter_mut().map(CoreSocket::flush).sum()
    }

    /// Recycles buffers even if another core holds a queue's lock (an idle core's last round).
    pub fn recycle_all(&mut self) {
        for s in &mut self.sockets {
            s.state.recycle(true);
        }
    }

    /// Descriptors that become readable when requests arrive.
    pub fn fds(&self) -> Vec<RawFd> {
        self.sockets.iter().map(|s| s.rx.as_raw_fd()).collect()
    }

    /// Frames the kernel dropped for these sockets (a receive ring full, or no buffer on the
    /// fill ring), since they opened.
    pub fn kernel_drops(&self) -> u64 {
        self.sockets.iter().map(|s| socket_drops(s.rx.as_raw_fd())).sum()
    }
}

/// A core's socket on one queue: its own receive and transmit rings.
struct CoreSocket {
    rx: RingRx,
    tx: RingTx,
    state: CoreState,
}

/// What a core's socket keeps besides its rings.
struct CoreState {
    queue: Arc<Queue>,
    /// Replies of this round, for the transmit ring.
    sending: Vec<XdpDesc>,
    /// Buffers to give back to the fill ring: requests with no reply, and sent buffers the
    /// completion ring returned.
    to_fill: Vec<u64>,
    /// Free buffers this core took for replies' later datagrams.
    spare: Vec<u64>,
}

// The rings are this core's alone; the UMEM's bytes are reached only through buffers the
// core owns (see the module's ownership rule).
unsafe impl Send for CoreSocket {}

impl CoreSocket {
    fn serve(&mut self, answer: &mut impl FnMut(&mut Request<'_>)) -> usize {
        let queue = Arc::clone(&self.state.queue);
        let mut got = self.rx.receive(BATCH as u32);
        let mut served = 0;
        while let Some(XdpDesc { addr, len, .. }) = got.read() {
            served += 1;
            let start = addr - addr % queue.frame_size;
            let offset = (addr - start) as usize;
            // SAFETY: the kernel handed this buffer to this core's ring: it is ours until it
            // goes on the transmit ring or back to the fill ring.
            let key_hash = match unsafe { take_meta(&queue.area, addr, offset) } {
                FrameMeta::KeyHash(h) => Some(h),
                _ => None,
            };
            // SAFETY: as above; `start` is a buffer of the area, `frame_size` long.
            let buffer = unsafe {
                std::slice::from_raw_parts_mut(
                    queue.area.ptr().as_ptr().add(start as usize),
                    queue.frame_size as usize,
                )
            };
            let mut request = Request {
                buffer,
                offset,
                len: (len as usize).min(queue.frame_size as usize - offset),
                key_hash,
                in_place: false,
                start,
                core: &mut self.state,
            };
            answer(&mut request);
            if !request.in_place {
                self.state.to_fill.push(start);
            }
        }
        got.release();
        drop(got);
        self.state.recycle(false);
        served
    }

    fn flush(&mut self) -> u64 {
        let state = &mut self.state;
        if state.sending.is_empty() {
            return 0;
        }
        let mut ring = self.tx.transmit(state.sending.len() as u32);
        let sent = ring.insert(state.sending.iter().copied()) as usize;
        ring.commit();
        drop(ring);
        let refused = state.sending.len() - sent;
        for d in &state.sending[sent..] {
            state.to_fill.push(d.addr - d.addr % state.queue.frame_size);
        }
        state.sending.clear();
        drain_tx(&self.tx);
        self.state.recycle(false);
        refused as u64
    }
}

impl CoreState {
    /// Takes the queue's lock — or skips the round if another core holds it and this one's
    /// backlog is small (`force`: never skips) — reaps the completion ring and gives buffers
    /// back to the fill ring.
    fn recycle(&mut self, force: bool) {
        let queue = Arc::clone(&self.queue);
        let mut shared: MutexGuard<'_, Shared> = match queue.shared.try_lock() {
            Ok(g) => g,
            Err(TryLockError::WouldBlock) if !force && self.to_fill.len() < BACKLOG => return,
            Err(TryLockError::WouldBlock) => queue.shared.lock().unwrap_or_else(|e| e.into_inner()),
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
        };
        let Shared { device, free } = &mut *shared;
        let mut done = device.complete(u32::MAX);
        while let Some(addr) = done.read() {
            let start = addr - addr % queue.frame_size;
            if free.len() < FREE_TARGET {
                free.push(start);
            } else {
                self.to_fill.push(start);
            }
        }
        done.release();
        drop(done);
        give_back(&mut shared.device, &mut self.to_fill);
        if self.spare.len() < SPARE_TAKE / 2 {
            let take = SPARE_TAKE.min(shared.free.len());
            let from = shared.free.len() - take;
            self.spare.extend(shared.free.drain(from..));
        }
        if shared.device.needs_wakeup() {
            shared.device.wake();
        }
    }
}

/// A request's frame in a core's hands, and its replies: the first goes in the request's own
/// buffer, later ones in free buffers.
pub struct Request<'a> {
    buffer: &'a mut [u8],
    offset: usize,
    len: usize,
    key_hash: Option<u32>,
    /// Whether the buffer now holds a reply (and goes to the transmit ring).
    in_place: bool,
    start: u64,
    core: &'a mut CoreState,
}

impl Request<'_> {
    /// The frame as received (until the first reply overwrites it).
    pub fn frame(&self) -> &[u8] {
        &self.buffer[self.offset..self.offset + self.len]
    }

    /// The key hash the XDP program wrote in front of the frame, if any.
    pub fn key_hash(&self) -> Option<u32> {
        self.key_hash
    }

    /// Sends a reply frame that `write` writes into a buffer (it returns the frame's length,
    /// or `None` if it does not fit); false if no buffer was free or it did not fit. The
    /// first reply overwrites the request.
    pub fn reply(&mut self, write: impl FnOnce(&mut [u8]) -> Option<usize>) -> bool {
        let frame_size = self.core.queue.frame_size;
        if !self.in_place {
            let Some(n) = write(&mut self.buffer[self.offset..]) else { return false };
            self.in_place = true;
            let addr = self.start + self.offset as u64;
            self.core.sending.push(XdpDesc { addr, len: n as u32, options: 0 });
            return true;
        }
        if self.core.spare.is_empty() {
            self.core.recycle(true);
        }
        let Some(start) = self.core.spare.pop() else { return false };
        let queue = &self.core.queue;
        // SAFETY: a free buffer this core took: nobody else touches it until it is sent.
        let buffer = unsafe {
            std::slice::from_raw_parts_mut(queue.area.ptr().as_ptr().add(start as usize), frame_size as usize)
        };
        let Some(n) = write(buffer) else {
            self.core.spare.push(start);
            return false;
        };
        self.core.sending.push(XdpDesc { addr: start, len: n as u32, options: 0 });
        true
    }
}
