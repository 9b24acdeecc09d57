//! AF_XDP port I/O (feature `afxdp`), as Open vSwitch's `netdev-afxdp.c`: an XDP program on
//! each port redirects every frame of receive queue Q to the AF_XDP socket bound to Q, whose
//! UMEM holds the frames; the switch copies each out of the UMEM and gives the buffer back
//! to the fill ring at once, and builds outgoing frames in UMEM buffers of its own that the
//! transmit ring hands to the kernel.
//!
//! With steering (`--steer`), queue Q has one socket per core, all bound to Q on Q's UMEM
//! (`XDP_SHARED_UMEM`: one fill and one completion ring, a receive ring each), and the
//! program picks the socket by the frame's hashed fields: FlexNIC's steering to a core, on a
//! NIC with fewer queues than cores (a veth has one). The sockets of a queue share its fill
//! ring, which the port's lock already serializes.
//!
//! One copy of the program serves every port ([`XdpProgram`]); with the NIC tier on it is
//! also the switch's first match-action stage (`xdp_tier`).
//!
//! The program is attached through a bpf link (`bpf_link_create`) owned by this process: when
//! the process ends, however it ends (`kill -9` included), the kernel closes the link and the
//! program leaves the interface. Zero-copy is asked for first and copy mode taken when the
//! driver refuses it (veth always does); native (driver) XDP first, generic XDP after.

use std::io;
use std::num::NonZeroU32;
use std::ops::Range;
use std::os::fd::RawFd;
use std::ptr::NonNull;

use anyhow::{anyhow, Context, Result};
use aya::maps::{Array, DevMap, HashMap as AyaHashMap, XskMap};
use aya::programs::{Xdp, XdpMode};
use aya::Ebpf;
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig};

use crate::args::XdpModeArg;
use crate::forwarder::LivePort;
use crate::interfaces::Interface;
use crate::port_io::{PortIo, RxBatch, SendRefused};
use crate::steering::Steering;
use crate::XdpSetup;

/// The XDP program, compiled from bpf/port.bpf.c by the build.
static PROGRAM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/port.bpf.o"));

/// Ring sizes (descriptors). A queue's UMEM has [`RING`] receive buffers per socket (always
/// on the fill ring or being copied out: steered sockets share the fill ring, and one core
/// far behind must not leave the others' frames without buffers) and [`RING`] for sending.
/// The receive buffers absorb a burst while the loop is busy: what the kernel counts as
/// "fill ring empty" is the switch that far behind.
const RING: u32 = crate::port_io::RX_RING;
/// `struct stamp` of the program: the XDP metadata in front of a frame for software, a magic
/// word and when the program handed the frame over (CLOCK_MONOTONIC ns).
const STAMP_BYTES: usize = 16;
/// Its magic word ("hyflowts"): a frame without it carries no stamp.
const STAMP_MAGIC: u64 = 0x6879_666c_6f77_7473;
/// The magic word of `struct kvs_meta` of `bpf/kvs.bpf.c` ("hyflowkh"), the same size as a
/// stamp: the key's hash and whether there is one.
const KEY_MAGIC: u64 = 0x6879_666c_6f77_6b68;
/// Wake-ups of the transmit ring per flush at most: enough to drain a round's frames 32 at a
/// time, bounded so that a stuck interface cannot hold the loop.
const MAX_WAKES: u32 = 16;

/// How a port's program and sockets came up, for the line the switch prints.
#[derive(Clone, Copy)]
struct Mode {
    driver: bool,
    zero_copy: bool,
}

/// An anonymous mapping a UMEM lives on, unmapped when dropped (after the sockets using it:
/// holders declare it last).
pub(crate) struct UmemArea {
    ptr: NonNull<u8>,
    len: usize,
}

// The area's bytes are only reached through buffers their holder owns at the time (received
// and not given back, or free): never by two threads at once.
unsafe impl Send for UmemArea {}
unsafe impl Sync for UmemArea {}

impl UmemArea {
    /// Maps `len` bytes, page-aligned and populated.
    pub(crate) fn map(len: usize) -> Result<UmemArea> {
        // SAFETY: an anonymous private mapping, page-aligned as the UMEM needs.
        let area = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if area == libc::MAP_FAILED {
            return Err(io::Error::last_os_error()).context("UMEM mapping");
        }
        let ptr = NonNull::new(area as *mut u8).expect("mmap gives a non-null mapping");
        Ok(UmemArea { ptr, len })
    }

    /// The first byte.
    pub(crate) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }
}

impl Drop for UmemArea {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `UmemArea::map`; the kernel keeps its own reference to
        // pages a socket still uses.
        unsafe { libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len) };
    }
}

/// A queue's UMEM and the sockets bound to it: the fill and completion rings, and per socket a
/// receive ring and, where asked, a transmit ring.
pub(crate) struct BoundQueue {
    /// Kept alive for the rings and the sockets (dropping it closes them).
    pub umem: Umem,
    pub device: DeviceQueue,
    /// Receive rings, the first socket's first (each knows its socket's descriptor).
    pub rx: Vec<RingRx>,
    /// Transmit rings: the first socket's only, or every socket's.
    pub tx: Vec<RingTx>,
}

/// Ring sizes of a queue's UMEM (descriptors) and its buffers' size.
pub(crate) struct QueueShape {
    pub frame_size: u32,
    pub fill: u32,
    pub complete: u32,
    /// Whether every socket has a transmit ring (or the first one only).
    pub tx_per_socket: bool,
}

/// Makes `sockets` sockets (at least one) on queue `queue` of `iface` over `area`, all bound
/// to one UMEM (`XDP_SHARED_UMEM`: one fill and one completion ring, a receive ring each),
/// zero-copy or copy mode. The fill ring is left empty.
pub(crate) fn bind_queue(
    area: &UmemArea,
    (iface, queue): (&Interface, u32),
    shape: &QueueShape,
    zero_copy: bool,
    sockets: u32,
) -> Result<BoundQueue> {
    let config = UmemConfig {
        fill_size: shape.fill,
        complete_size: shape.complete,
        frame_size: shape.frame_size,
        headroom: 0,
        flags: 0,
    };
    // SAFETY: the area is page-aligned and outlives the UMEM (its holders declare it last).
    let umem = unsafe { Umem::new(config, NonNull::slice_from_raw_parts(area.ptr, area.len)) }
        .map_err(errno("AF_XDP socket"))?;
    let mut info = IfInfo::invalid();
    info.from_ifindex(iface.ifindex).map_err(errno("interface"))?;
    info.set_queue(queue);
    let socket = Socket::with_shared(&info, &umem).map_err(errno("AF_XDP socket"))?;
    let device = umem.fq_cq(&socket).map_err(errno("fill and completion rings"))?;
    let copy_flag = if zero_copy { SocketConfig::XDP_BIND_ZEROCOPY } else { SocketConfig::XDP_BIND_COPY };
    let user = umem
        .rx_tx(
            &socket,
            &SocketConfig {
                rx_size: NonZeroU32::new(RING),
                tx_size: NonZeroU32::new(RING),
                bind_flags: SocketConfig::XDP_BIND_NEED_WAKEUP | copy_flag,
            },
        )
        .map_err(errno("receive and transmit rings"))?;
    let mut rx = vec![user.map_rx().map_err(errno("receive ring"))?];
    let mut tx = vec![user.map_tx().map_err(errno("transmit ring"))?];
    umem.bind(&user).map_err(errno(if zero_copy { "zero-copy bind" } else { "bind" }))?;
    for _ in 1..sockets {
        // Bound to the same queue on the same UMEM: it shares the first socket's fill and
        // completion rings, and inherits its mode (the kernel takes no flags for it).
        let socket = Socket::new(&info).map_err(errno("AF_XDP socket"))?;
        let tx_size = if shape.tx_per_socket { NonZeroU32::new(RING) } else { None };
        let config = SocketConfig { rx_size: NonZeroU32::new(RING), tx_size, bind_flags: 0 };
        let user = umem.rx_tx(&socket, &config).map_err(errno("a steered socket's rings"))?;
        rx.push(user.map_rx().map_err(errno("receive ring"))?);
        if shape.tx_per_socket {
            tx.push(user.map_tx().map_err(errno("transmit ring"))?);
        }
        umem.bind(&user).map_err(errno("binding a steered socket to the queue's UMEM"))?;
    }
    Ok(BoundQueue { umem, device, rx, tx })
}

/// Buffers of `max_frame`-byte frames: aligned chunks are a power of two, with XDP's 256
/// bytes of headroom before the frame.
pub(crate) fn frame_size_for(max_frame: usize) -> u32 {
    if max_frame + 256 <= 2048 {
        2048
    } else {
        4096
    }
}

/// Hands the kernel what transmit ring `tx` holds: in copy mode each wake-up sends at most a
/// small batch (the kernel's TX_BATCH_SIZE, 32), so it wakes the ring until it is drained or
/// stops draining, at most [`MAX_WAKES`] times.
pub(crate) fn drain_tx(tx: &RingTx) {
    let mut pending = tx.pending();
    for _ in 0..MAX_WAKES {
        if pending == 0 || !tx.needs_wakeup() {
            break;
        }
        tx.wake();
        let now = tx.pending();
        if now == pending {
            break;
        }
        pending = now;
    }
}

/// Puts `buffers` back on `device`'s fill ring, every one: a reservation on the ring can come
/// back shorter than asked (it trusts a stale view of the kernel's progress until that view
/// says the ring is full), and a buffer not put back is one fewer the kernel can receive
/// into, for good. What the ring cannot take now (it always can when it holds every buffer
/// the kernel may have: the kernel took as many as are given back) stays in `buffers` for the
/// next call.
pub(crate) fn give_back(device: &mut DeviceQueue, buffers: &mut Vec<u64>) {
    let mut done = 0;
    while done < buffers.len() {
        let mut fill = device.fill((buffers.len() - done) as u32);
        let n = fill.insert(buffers[done..].iter().copied()) as usize;
        fill.commit();
        if n == 0 {
            break;
        }
        done += n;
    }
    buffers.drain(..done);
}

/// What an XDP program left in front of a frame for software (its metadata, which AF_XDP
/// copies before the frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameMeta {
    /// Nothing, or nothing of ours.
    None,
    /// When the switch's program handed the frame over (CLOCK_MONOTONIC ns).
    Stamp(u64),
    /// The key hash `hyflow kvs`'s program computed.
    KeyHash(u32),
}

/// Reads the metadata in front of the frame at `addr` (`offset` bytes into its buffer) and
/// rubs it out: a later frame in this buffer that the program could not stamp must not read
/// this one's.
///
/// # Safety
/// The buffer holding `addr` is the caller's (received and not given back).
pub(crate) unsafe fn take_meta(area: &UmemArea, addr: u64, offset: usize) -> FrameMeta {
    if offset < STAMP_BYTES {
        return FrameMeta::None;
    }
    // SAFETY: the stamp's bytes are the buffer's, before the frame (its headroom), the
    // caller's until the buffer goes back.
    let stamp = unsafe {
        std::slice::from_raw_parts_mut(area.ptr().as_ptr().add(addr as usize - STAMP_BYTES), STAMP_BYTES)
    };
    let word = |s: &[u8], i: usize| u64::from_ne_bytes(s[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    let meta = match word(stamp, 0) {
        STAMP_MAGIC => FrameMeta::Stamp(word(stamp, 1)),
        KEY_MAGIC if stamp[12..16] != [0; 4] => {
            FrameMeta::KeyHash(u32::from_ne_bytes(stamp[8..12].try_into().expect("4 bytes")))
        }
        _ => FrameMeta::None,
    };
    stamp[..8].fill(0);
    meta
}

/// One receive queue's sockets: its UMEM, its fill and completion rings, the first socket's
/// transmit ring, and a receive ring per socket (one, or one per steered core).
struct XskQueue {
    frame_size: u64,
    /// Kept alive for the rings and the socket (dropping it closes them).
    _umem: Umem,
    device: DeviceQueue,
    /// Receive rings, the first socket's first (each knows its socket's descriptor).
    rx: Vec<RingRx>,
    tx: RingTx,
    /// UMEM addresses of sending buffers not in the kernel's hands.
    tx_free: Vec<u64>,
    /// Frames put on the transmit ring since the last wake-up.
    tx_queued: u32,
    /// Receive buffers to give back to the fill ring (those of the last batch).
    refill: Vec<u64>,
    /// Declared last: unmapped after the sockets close.
    area: UmemArea,
}

// The UMEM area and rings are only touched through `&mut self`.
unsafe impl Send for XskQueue {}

pub(crate) fn errno(what: &str) -> impl Fn(xdpilone::Errno) -> anyhow::Error + '_ {
    move |e| anyhow!("{what}: {e}")
}

impl XskQueue {
    /// `sockets` sockets (at least one) on queue `queue` of `iface`, zero-copy or copy mode.
    fn open(
        iface: &Interface,
        queue: u32,
        max_frame: usize,
        zero_copy: bool,
        sockets: u32,
    ) -> Result<XskQueue> {
        let frame_size = frame_size_for(max_frame);
        let receiving = RING * sockets;
        let area = UmemArea::map(((receiving + RING) * frame_size) as usize)?;
        let shape = QueueShape {
            frame_size,
            fill: receiving.next_power_of_two(),
            complete: RING,
            tx_per_socket: false,
        };
        let BoundQueue { umem, mut device, rx, tx } =
            bind_queue(&area, (iface, queue), &shape, zero_copy, sockets)?;
        let filled = {
            let mut fill = device.fill(receiving);
            let n = fill.insert((0..receiving).map(|i| i as u64 * frame_size as u64));
            fill.commit();
            n
        };
        if filled != receiving {
            return Err(anyhow!("the fill ring took {filled} of {receiving} buffers"));
        }
        let tx_free = (receiving..receiving + RING).map(|i| i as u64 * frame_size as u64).collect();
        Ok(XskQueue {
            frame_size: frame_size as u64,
            _umem: umem,
            device,
            rx,
            tx: tx.into_iter().next().expect("the first socket's"),
            tx_free,
            tx_queued: 0,
            refill: Vec::with_capacity(2 * crate::port_io::BATCH),
            area,
        })
    }

    /// The UMEM bytes of buffer `addr` (a buffer's start, or any address inside it).
    fn buffer(&mut self, addr: u64) -> &mut [u8] {
        let start = addr - addr % self.frame_size;
        // SAFETY: `start` is a buffer of the area, `frame_size` long; the kernel does not
        // touch a buffer while it is in our hands (received and not refilled, or free).
        unsafe {
            std::slice::from_raw_parts_mut(
                self.area.ptr().as_ptr().add(start as usize),
                self.frame_size as usize,
            )
        }
    }

    /// Frames the kernel dropped for the queue's sockets: a receive ring full, or no buffer
    /// on the fill ring (`XDP_STATISTICS`: `rx_ring_full`, `rx_dropped`).
    fn kernel_drops(&self) -> u64 {
        self.rx.iter().map(|r| socket_drops(r.as_raw_fd())).sum()
    }

    /// Puts the receive buffers copied out back on the fill ring ([`give_back`]).
    fn give_back(&mut self) {
        give_back(&mut self.device, &mut self.refill);
    }

    /// Takes back the sending buffers the kernel is done with.
    fn reclaim(&mut self) {
        let mut done = self.device.complete(RING);
        while let Some(addr) = done.read() {
            self.tx_free.push(addr - addr % self.frame_size);
        }
        done.release();
    }
}

/// Frames the kernel dropped for socket `fd` (`XDP_STATISTICS`: `rx_ring_full`, and
/// `rx_dropped`, which counts the frames that found the fill ring empty).
pub(crate) fn socket_drops(fd: RawFd) -> u64 {
    /// `struct xdp_statistics` (linux/if_xdp.h).
    #[repr(C)]
    #[derive(Default)]
    struct XdpStatistics {
        rx_dropped: u64,
        rx_invalid_descs: u64,
        tx_invalid_descs: u64,
        rx_ring_full: u64,
        rx_fill_ring_empty_descs: u64,
        tx_ring_empty_descs: u64,
    }
    const SOL_XDP: libc::c_int = 283;
    const XDP_STATISTICS: libc::c_int = 7;
    let mut stats = XdpStatistics::default();
    let mut len = size_of::<XdpStatistics>() as libc::socklen_t;
    // SAFETY: `stats` is `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            SOL_XDP,
            XDP_STATISTICS,
            &mut stats as *mut XdpStatistics as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return 0;
    }
    // A frame that found the fill ring empty is counted in rx_dropped too.
    stats.rx_dropped + stats.rx_ring_full
}

/// A port's AF_XDP sockets: per receive queue, one, or one per steered core.
pub struct AfXdp {
    queues: Vec<XskQueue>,
    /// Sockets per receive queue: the cores steered to (1 without steering). Socket `s` of
    /// [`PortIo::rx_fds`] is socket `s % sockets` of queue `s / sockets`.
    sockets: u32,
    mode: Mode,
    /// Whether it only sends (`hyflow send`): no program steers frames to it.
    transmit_only: bool,
}

/// The XDP program on every port of the switch, with its maps: one copy serves them all (the
/// NIC tier's tables are the switch's, not a port's). Dropping it detaches it everywhere.
pub struct XdpProgram {
    /// The program, its maps and its links.
    pub ebpf: Ebpf,
}

impl XdpProgram {
    /// Loads the program with a flow table of `flow_entries` entries.
    fn load(flow_entries: u32) -> Result<XdpProgram> {
        let mut ebpf = crate::xdp_meta::loader()
            .map_max_entries("flows", flow_entries.max(1))
            .map_max_entries("counters", flow_entries.max(1))
            .load(PROGRAM)
            .context("loading the XDP program")?;
        let program: &mut Xdp = ebpf
            .program_mut("hyflow_port")
            .ok_or_else(|| anyhow!("the XDP program has no hyflow_port"))?
            .try_into()?;
        program.load().context("the kernel refused the XDP program (CAP_BPF and CAP_NET_ADMIN needed)")?;
        Ok(XdpProgram { ebpf })
    }

    /// Spreads each queue's frames for software over `s.cores` sockets by the hash of
    /// `s.mask`'s bits.
    fn steer(&mut self, s: &Steering) -> Result<()> {
        let mut map: Array<_, BpfSteering> =
            Array::try_from(self.ebpf.map_mut("steering").ok_or_else(|| anyhow!("no steering map"))?)?;
        let memcached_port = s.memcached_port.map_or(0, u32::from);
        let storm_port = s.storm_port.map_or(0, u32::from);
        map.set(0, BpfSteering { cores: s.cores, memcached_port, mask: s.mask, storm_port, pad: 0 }, 0)
            .context("the steering map")
    }

    /// Makes `iface` port `index` of the program: its sockets, its number, where its outputs go.
    fn register(&mut self, index: u32, iface: &Interface, queues: &[XskQueue]) -> Result<()> {
        let info = PortInfo { index, number: iface.port };
        if iface.ifindex < PORT_ARRAY {
            let mut ports: Array<_, PortInfo> =
                Array::try_from(self.ebpf.map_mut("ports").ok_or_else(|| anyhow!("no ports map"))?)?;
            ports.set(iface.ifindex, info, 0).context("the ports map")?;
        } else {
            let large = self.ebpf.map_mut("ports_by_large_index").ok_or_else(|| anyhow!("no ports map"))?;
            let mut ports: AyaHashMap<_, u32, PortInfo> = AyaHashMap::try_from(large)?;
            ports.insert(iface.ifindex, info, 0).context("the ports map")?;
        }
        let mut out =
            DevMap::try_from(self.ebpf.map_mut("out_ports").ok_or_else(|| anyhow!("no out_ports map"))?)?;
        out.set(index, iface.ifindex, None, 0).context("the out_ports map")?;
        let mut xsks = XskMap::try_from(self.ebpf.map_mut("xsks").ok_or_else(|| anyhow!("no xsks map"))?)?;
        for (s, fd) in queues.iter().flat_map(|q| q.rx.iter().map(RingRx::as_raw_fd)).enumerate() {
            // SAFETY: the descriptor is open for as long as the port's sockets live, and the
            // switch drops them before the program.
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
            xsks.set(index * MAX_QUEUES + s as u32, fd, 0).context("registering the socket in the XSKMAP")?;
        }
        Ok(())
    }

    /// Attaches the program to `iface`: native XDP if `native` is asked for and the driver
    /// has it (required: `native_only`), generic otherwise; returns whether native.
    fn attach(&mut self, iface: &Interface, native: bool, native_only: bool) -> Result<bool> {
        let program: &mut Xdp = self.ebpf.program_mut("hyflow_port").expect("loaded").try_into()?;
        if native {
            match program.attach_to_if_index(iface.ifindex, XdpMode::Driver) {
                Ok(_) => return Ok(true),
                Err(e) if native_only => return Err(anyhow!("attaching native XDP: {e}")),
                Err(_) => {}
            }
        }
        program.attach_to_if_index(iface.ifindex, XdpMode::Skb).map_err(|e| match &e {
            aya::programs::ProgramError::SyscallError(s)
                if s.io_error.raw_os_error() == Some(libc::EBUSY) =>
            {
                anyhow!("{} already has an XDP program (another switch on this port?)", iface.name)
            }
            _ => anyhow!("attaching XDP: {e}"),
        })?;
        Ok(false)
    }
}

/// `struct port_info` of the program.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct PortInfo {
    index: u32,
    number: u32,
}

// SAFETY: two u32, no padding.
unsafe impl aya::Pod for PortInfo {}

/// `struct steering` of the program.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct BpfSteering {
    cores: u32,
    memcached_port: u32,
    mask: [u64; 9],
    storm_port: u32,
    pad: u32,
}

// SAFETY: two u32, nine u64, two u32: no padding.
unsafe impl aya::Pod for BpfSteering {}

/// Interface indexes below this are found in the program's `ports` array, the others in a
/// hash (its `PORT_ARRAY`).
const PORT_ARRAY: u32 = 65536;

/// Receive queues per port the program's `xsks` has room for (its `MAX_QUEUES`).
const MAX_QUEUES: u32 = 64;

impl AfXdp {
    /// Opens `sockets` sockets per receive queue of `iface` (at most [`MAX_QUEUES`] in all).
    fn open(iface: &Interface, max_frame: usize, sockets: u32) -> Result<AfXdp> {
        let queues_used = iface.rx_queues.min(MAX_QUEUES / sockets);
        if sockets > 1 && queues_used < iface.rx_queues {
            return Err(anyhow!(
                "{} receive queues × {sockets} steered cores is more sockets than the program's {MAX_QUEUES} per port",
                iface.rx_queues
            ));
        }
        let mut queues = Vec::new();
        let mut zero_copy = true;
        for q in 0..queues_used {
            let queue = match XskQueue::open(iface, q, max_frame, zero_copy, sockets) {
                Ok(s) => s,
                Err(_) if zero_copy => {
                    zero_copy = false;
                    XskQueue::open(iface, q, max_frame, false, sockets)?
                }
                Err(e) => return Err(e),
            };
            queues.push(queue);
        }
        Ok(AfXdp { queues, sockets, mode: Mode { driver: false, zero_copy }, transmit_only: false })
    }

    /// `sockets` sockets on every receive queue of `iface`, on one UMEM per queue, for a
    /// program other than the switch's to redirect frames to (`hyflow kvs`): socket `s` of
    /// [`PortIo::rx_fds`] is socket `s % sockets` of queue `s / sockets`.
    pub fn open_sockets(iface: &Interface, max_frame: usize, sockets: u32) -> Result<AfXdp> {
        AfXdp::open(iface, max_frame, sockets)
    }

    /// A socket on queue 0 of `iface` that only sends (`hyflow send`): no program steers
    /// frames to it, so it receives nothing and the interface's traffic is left alone.
    pub fn open_tx(iface: &Interface, max_frame: usize) -> Result<AfXdp> {
        // The kernel releases a closed socket's queue a moment after the close: a sender
        // started right after another may find the queue busy for that moment.
        let mut tries = 0;
        let (queue, zero_copy) = loop {
            let opened = match XskQueue::open(iface, 0, max_frame, true, 1) {
                Ok(q) => Ok((q, true)),
                Err(_) => XskQueue::open(iface, 0, max_frame, false, 1).map(|q| (q, false)),
            };
            match opened {
                Err(e) if tries < 20 && format!("{e}").contains("busy") => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                other => break other?,
            }
        };
        Ok(AfXdp {
            queues: vec![queue],
            sockets: 1,
            mode: Mode { driver: true, zero_copy },
            transmit_only: true,
        })
    }
}

impl PortIo for AfXdp {
    fn describe(&self) -> String {
        let copy = if self.mode.zero_copy { "zero-copy" } else { "copy mode" };
        match self.transmit_only {
            false => format!("afxdp ({} XDP, {copy})", if self.mode.driver { "native" } else { "generic" }),
            true => format!("afxdp ({copy}, transmit only)"),
        }
    }

    fn receive(&mut self, socket: usize, batch: &mut RxBatch) -> io::Result<usize> {
        let before = batch.len();
        let sockets = self.sockets as usize;
        let q = &mut self.queues[socket / sockets];
        let rx = &mut q.rx[socket % sockets];
        let room = crate::port_io::BATCH - batch.len();
        batch.waiting = batch.waiting.max(rx.available());
        let mut got = rx.receive(room as u32);
        while let Some(XdpDesc { addr, len, .. }) = got.read() {
            let start = addr - addr % q.frame_size;
            let offset = (addr - start) as usize;
            // SAFETY: as `XskQueue::buffer`: the buffer is ours until refilled.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    q.area.ptr().as_ptr().add(addr as usize),
                    (len as usize).min(q.frame_size as usize - offset),
                )
            };
            batch.push_with(|slot| {
                let n = bytes.len().min(slot.len());
                slot[..n].copy_from_slice(&bytes[..n]);
                n
            });
            // SAFETY: the buffer is ours until refilled.
            match unsafe { take_meta(&q.area, addr, offset) } {
                FrameMeta::Stamp(handed_ns) => batch.stamp_last(handed_ns),
                FrameMeta::KeyHash(hash) => batch.key_hash_last(hash),
                FrameMeta::None => {}
            }
            q.refill.push(start);
        }
        got.release();
        drop(got);
        q.give_back();
        if q.device.needs_wakeup() {
            q.device.wake();
        }
        Ok(batch.len() - before)
    }

    fn send_with(
        &mut self,
        build: &mut dyn FnMut(&mut [u8]) -> Option<Range<usize>>,
    ) -> Result<(), SendRefused> {
        let q = &mut self.queues[0];
        if q.tx_free.is_empty() {
            q.reclaim();
        }
        let Some(addr) = q.tx_free.pop() else { return Err(SendRefused::Full) };
        let Some(range) = build(q.buffer(addr)) else {
            q.tx_free.push(addr);
            return Ok(());
        };
        let desc = XdpDesc { addr: addr + range.start as u64, len: range.len() as u32, options: 0 };
        let mut ring = q.tx.transmit(1);
        if !ring.insert_once(desc) {
            drop(ring);
            q.tx_free.push(addr);
            return Err(SendRefused::Full);
        }
        ring.commit();
        q.tx_queued += 1;
        Ok(())
    }

    fn flush(&mut self) {
        for q in &mut self.queues {
            if q.tx_queued > 0 {
                drain_tx(&q.tx);
            }
            q.tx_queued = 0;
            q.reclaim();
        }
    }

    fn rx_dropped(&mut self) -> u64 {
        self.queues.iter().map(|q| q.kernel_drops()).sum()
    }

    fn rx_fds(&self) -> Vec<RawFd> {
        self.queues.iter().flat_map(|q| q.rx.iter().map(RingRx::as_raw_fd)).collect()
    }
}

/// Opens every interface on AF_XDP under one XDP program whose flow table has
/// `flow_entries` entries, attached as `mode` asks (`nic_tier`: the program's tables forward
/// frames), with a socket per steered core on each queue (`steering`); returns the ports, how
/// frames move, and the program (to drop after the ports).
pub fn open(
    interfaces: &[Interface],
    max_frame: usize,
    flow_entries: u32,
    XdpSetup { mode, nic_tier, steering }: XdpSetup<'_>,
) -> Result<(Vec<LivePort>, String, XdpProgram)> {
    // A frame redirected into a veth in native mode reaches the peer only if the peer runs
    // NAPI (an XDP program or GRO on it); generic mode sends it as any frame.
    let native = match mode {
        XdpModeArg::Native => true,
        XdpModeArg::Generic => false,
        XdpModeArg::Auto => !(nic_tier && interfaces.iter().any(|i| i.veth)),
    };
    let mut program = XdpProgram::load(flow_entries)?;
    let sockets = steering.map_or(1, |s| s.cores);
    if let Some(s) = steering {
        program.steer(s)?;
    }
    let mut ports = Vec::new();
    for (index, i) in interfaces.iter().enumerate() {
        let mut io = AfXdp::open(i, max_frame, sockets).with_context(|| i.name.clone())?;
        program.register(index as u32, i, &io.queues).with_context(|| i.name.clone())?;
        io.mode.driver =
            program.attach(i, native, mode == XdpModeArg::Native).with_context(|| i.name.clone())?;
        ports.push(LivePort::new(i, Box::new(io)));
    }
    let io = ports[0].io.lock().expect("port lock").describe();
    Ok((ports, io, program))
}
