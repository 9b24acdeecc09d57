//! AF_PACKET port I/O: a TPACKET_V3 receive ring mapped into the process, frames sent with
//! `send` past the qdisc. The fallback where XDP cannot attach (an old kernel, no
//! `CAP_BPF`), and `--io afpacket`.
//!
//! Two things the kernel does to frames before a packet socket sees them are undone here,
//! so that the switch sees the frame that arrived on the wire as AF_XDP would: the VLAN tag
//! the receive path strips into metadata is put back into the bytes, and the copies of the
//! switch's own transmissions are not delivered at all (`PACKET_IGNORE_OUTGOING`).

use std::ffi::CString;
use std::io;
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{fence, Ordering};

use anyhow::{bail, Context, Result};

use crate::port_io::{PortIo, RxBatch, SendRefused};

/// Size of one ring block: a block is handed over whole, so it bounds how many frames one
/// wake-up delivers (256 KiB hold about 150 full-size frames or 2,700 small ones).
const BLOCK_SIZE: usize = 1 << 18;
/// Blocks in the ring: 4 MiB per port.
const BLOCK_COUNT: usize = 16;
/// The frame size the ring is declared with (TPACKET_V3 packs frames of any size into a
/// block; this only sets the count the kernel checks).
const FRAME_SIZE: usize = 2048;
/// Milliseconds after which the kernel hands over a block that is not full: the latency a
/// lone frame waits at most before the switch sees it (1 is the least the kernel takes).
const BLOCK_TIMEOUT_MS: u32 = 1;

const ETH_P_ALL: u16 = 0x0003;
/// `TPACKET_V3` of `enum tpacket_versions` (linux/if_packet.h).
const TPACKET_V3: libc::c_int = 2;
const ETH_P_8021Q: u16 = 0x8100;

/// A port's AF_PACKET socket with its receive ring.
pub struct AfPacket {
    fd: OwnedFd,
    ring: NonNull<u8>,
    /// Current block, and where its next frame is while frames of it are left.
    block: usize,
    in_block: Option<(u32, usize)>,
    /// Where an outgoing frame is built before `send` copies it.
    tx: Vec<u8>,
    /// Drops the kernel reported so far (reading its counter resets it).
    dropped: u64,
    /// Whether the socket receives (a switch port) or only sends (`hyflow send`).
    receives: bool,
}

// The ring is only touched through `&mut self`.
unsafe impl Send for AfPacket {}

fn os_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn set_option<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T, what: &str) -> io::Result<()> {
    // SAFETY: `value` is a live T of the size passed.
    let r = unsafe {
        libc::setsockopt(fd, level, name, value as *const T as *const libc::c_void, size_of::<T>() as u32)
    };
    if r < 0 {
        return Err(os_error(what));
    }
    Ok(())
}

impl AfPacket {
    /// Opens a packet socket on interface `ifindex` (named `name` in errors) whose frames are
    /// at most `max_frame` bytes, receiving every frame (promiscuous) into its ring.
    pub fn open(name: &str, ifindex: u32, max_frame: usize) -> Result<AfPacket> {
        Self::open_as(name, ifindex, max_frame, true)
    }

    /// A socket that only sends (`hyflow send`): it binds to no protocol, so the kernel
    /// delivers it nothing, and its ring stays empty.
    pub fn open_tx(name: &str, ifindex: u32, max_frame: usize) -> Result<AfPacket> {
        Self::open_as(name, ifindex, max_frame, false)
    }

    fn open_as(name: &str, ifindex: u32, max_frame: usize, receive: bool) -> Result<AfPacket> {
        // Protocol 0 until bound: a socket created with ETH_P_ALL would receive from every
        // interface until `bind` narrows it.
        // SAFETY: plain syscall.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EPERM) {
                bail!("{name}: AF_PACKET sockets need CAP_NET_RAW (run hyflow switch as root)");
            }
            bail!("{name}: AF_PACKET socket: {e}");
        }
        // SAFETY: `raw` is a new descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let s = fd.as_raw_fd();
        set_option(s, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V3, "PACKET_VERSION")
            .with_context(|| name.to_string())?;
        let req = libc::tpacket_req3 {
            tp_block_size: BLOCK_SIZE as u32,
            tp_block_nr: BLOCK_COUNT as u32,
            tp_frame_size: FRAME_SIZE as u32,
            tp_frame_nr: (BLOCK_SIZE / FRAME_SIZE * BLOCK_COUNT) as u32,
            tp_retire_blk_tov: BLOCK_TIMEOUT_MS,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        set_option(s, libc::SOL_PACKET, libc::PACKET_RX_RING, &req, "PACKET_RX_RING")
            .with_context(|| name.to_string())?;
        // SAFETY: maps the ring the kernel just made for this socket.
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                BLOCK_SIZE * BLOCK_COUNT,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED,
                s,
                0,
            )
        };
        if ring == libc::MAP_FAILED {
            return Err(os_error("mmap of the receive ring")).with_context(|| name.to_string());
        }
        let ring = NonNull::new(ring as *mut u8).expect("mmap gives a non-null mapping");
        let port = AfPacket {
            fd,
            ring,
            block: 0,
            in_block: None,
            tx: vec![0; max_frame + 8],
            dropped: 0,
            receives: receive,
        };
        // The switch's own transmissions are not frames that arrived.
        set_option(s, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1i32, "PACKET_IGNORE_OUTGOING")
            .with_context(|| name.to_string())?;
        set_option(s, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &1i32, "PACKET_QDISC_BYPASS")
            .with_context(|| name.to_string())?;
        // SAFETY: a zeroed sockaddr_ll is valid; the fields that matter are set below.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = if receive { ETH_P_ALL.to_be() } else { 0 };
        addr.sll_ifindex = ifindex as i32;
        // SAFETY: `addr` is a sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                s,
                &addr as *const libc::sockaddr_ll as *const libc::sockaddr,
                size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            return Err(os_error("bind")).with_context(|| name.to_string());
        }
        if !receive {
            return Ok(port);
        }
        // Every frame, whatever its destination MAC: a switch port is promiscuous. The
        // membership ends with the socket.
        // SAFETY: a zeroed packet_mreq is valid.
        let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
        mreq.mr_ifindex = ifindex as i32;
        mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
        set_option(s, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq, "promiscuous mode")
            .with_context(|| name.to_string())?;
        Ok(port)
    }

    fn block_ptr(&self, block: usize) -> *mut u8 {
        // SAFETY: within the mapping (block < BLOCK_COUNT).
        unsafe { self.ring.as_ptr().add(block * BLOCK_SIZE) }
    }

    /// Gives the current block back to the kernel and moves to the next.
    fn release_block(&mut self) {
        let desc = self.block_ptr(self.block) as *mut libc::tpacket_block_desc;
        fence(Ordering::Release);
        // SAFETY: the descriptor heads the block, which we own until this store.
        unsafe {
            std::ptr::addr_of_mut!((*desc).hdr.bh1.block_status).write_volatile(libc::TP_STATUS_KERNEL)
        };
        self.block = (self.block + 1) % BLOCK_COUNT;
        self.in_block = None;
    }
}

impl Drop for AfPacket {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `open`; nothing refers to it after drop.
        unsafe { libc::munmap(self.ring.as_ptr() as *mut libc::c_void, BLOCK_SIZE * BLOCK_COUNT) };
    }
}

impl PortIo for AfPacket {
    fn describe(&self) -> String {
        if self.receives { "afpacket (TPACKET_V3 receive ring)" } else { "afpacket (send, past the qdisc)" }
            .to_string()
    }

    fn receive(&mut self, _queue: usize, batch: &mut RxBatch) -> io::Result<usize> {
        let before = batch.len();
        while batch.has_room() {
            let block = self.block_ptr(self.block);
            let desc = block as *const libc::tpacket_block_desc;
            let (left, offset) = match self.in_block {
                Some(state) => state,
                None => {
                    // SAFETY: the descriptor heads the block; the kernel publishes it with
                    // the status, read before anything else in the block.
                    let status = unsafe { std::ptr::addr_of!((*desc).hdr.bh1.block_status).read_volatile() };
                    if status & libc::TP_STATUS_USER == 0 {
                        break;
                    }
                    fence(Ordering::Acquire);
                    // SAFETY: as above, the block is ours now.
                    let (n, first) =
                        unsafe { ((*desc).hdr.bh1.num_pkts, (*desc).hdr.bh1.offset_to_first_pkt as usize) };
                    if n == 0 {
                        self.release_block();
                        continue;
                    }
                    (n, first)
                }
            };
            // SAFETY: `offset` is the kernel's offset of a frame header inside the block.
            let hdr = unsafe { &*(block.add(offset) as *const libc::tpacket3_hdr) };
            // SAFETY: the frame's bytes lie in the block at tp_mac, tp_snaplen long.
            let bytes = unsafe {
                std::slice::from_raw_parts(block.add(offset + hdr.tp_mac as usize), hdr.tp_snaplen as usize)
            };
            let tag = (hdr.tp_status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
                let tpid = if hdr.tp_status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                    hdr.hv1.tp_vlan_tpid
                } else {
                    ETH_P_8021Q
                };
                (tpid, hdr.hv1.tp_vlan_tci as u16)
            });
            batch.push_with(|slot| copy_frame(bytes, tag, slot));
            let next = offset + hdr.tp_next_offset as usize;
            if left == 1 {
                self.release_block();
            } else {
                self.in_block = Some((left - 1, next));
            }
        }
        Ok(batch.len() - before)
    }

    fn send_with(
        &mut self,
        build: &mut dyn FnMut(&mut [u8]) -> Option<Range<usize>>,
    ) -> Result<(), SendRefused> {
        let Some(range) = build(&mut self.tx) else { return Ok(()) };
        let frame = &self.tx[range];
        // SAFETY: sends `frame`'s bytes on our bound socket.
        let r = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if r >= 0 {
            return Ok(());
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::ENETDOWN | libc::ENXIO | libc::ENODEV) => Err(SendRefused::Down),
            _ => Err(SendRefused::Full),
        }
    }

    fn flush(&mut self) {}

    fn rx_fds(&self) -> Vec<RawFd> {
        vec![self.fd.as_raw_fd()]
    }

    fn rx_dropped(&mut self) -> u64 {
        // SAFETY: a zeroed tpacket_stats_v3 is valid; getsockopt fills it.
        let mut stats: libc::tpacket_stats_v3 = unsafe { std::mem::zeroed() };
        let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `stats` is `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                &mut stats as *mut libc::tpacket_stats_v3 as *mut libc::c_void,
                &mut len,
            )
        };
        if r == 0 {
            self.dropped += stats.tp_drops as u64;
        }
        self.dropped
    }
}

/// Copies a received frame into `slot`, putting back the VLAN tag the kernel stripped
/// (`tag`: TPID and TCI) right after the MAC addresses; returns the length (cut to the slot).
fn copy_frame(bytes: &[u8], tag: Option<(u16, u16)>, slot: &mut [u8]) -> usize {
    match tag {
        Some((tpid, tci)) if bytes.len() >= 12 && slot.len() >= 16 => {
            slot[..12].copy_from_slice(&bytes[..12]);
            slot[12..14].copy_from_slice(&tpid.to_be_bytes());
            slot[14..16].copy_from_slice(&tci.to_be_bytes());
            let rest = (bytes.len() - 12).min(slot.len() - 16);
            slot[16..16 + rest].copy_from_slice(&bytes[12..12 + rest]);
            16 + rest
        }
        _ => {
            let n = bytes.len().min(slot.len());
            slot[..n].copy_from_slice(&bytes[..n]);
            n
        }
    }
}

/// The interface index of `name`, or an error naming it.
pub fn ifindex(name: &str) -> Result<u32> {
    let c = CString::new(name).with_context(|| format!("interface name {name:?}"))?;
    // SAFETY: `c` is a valid C string.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        bail!("{name}: no such interface (the ports file names Linux interfaces)");
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stripped_tag_goes_back_after_the_macs() {
        let frame: Vec<u8> = (0..20).collect();
        let mut slot = [0u8; 64];
        let n = copy_frame(&frame, Some((0x8100, 0x2005)), &mut slot);
        assert_eq!(n, 24);
        assert_eq!(&slot[..12], &frame[..12]);
        assert_eq!(&slot[12..16], &[0x81, 0x00, 0x20, 0x05]);
        assert_eq!(&slot[16..24], &frame[12..]);
        assert_eq!(copy_frame(&frame, None, &mut slot), 20);
        // A slot too short cuts the frame, never panics.
        let mut short = [0u8; 18];
        assert_eq!(copy_frame(&frame, Some((0x8100, 1)), &mut short), 18);
        assert_eq!(copy_frame(&frame[..4], Some((0x8100, 1)), &mut short), 4);
    }
}
