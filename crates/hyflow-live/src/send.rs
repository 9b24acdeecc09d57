//! `hyflow send`: a capture (or generated gateway traffic) put on an interface at a rate,
//! through the same packet I/O the switch uses — the traffic source of the live tests and
//! benchmarks.
//!
//! Frames are sent as captured (a frame the capture cut to its snapshot length is padded with
//! zeros to its length on the wire); gateway traffic is built from its flow keys, each frame
//! its packet's length. Pacing keeps each packet's send time on the schedule the rate gives
//! (sleeping when ahead by more than a batch, spinning otherwise); a full transmit ring is
//! waited for, never dropped, and the waits are counted.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;

use hyflow::capture::LinkType;
use hyflow::capture::TraceReader;
use hyflow::packet::build::build_frame_into;
use hyflow::workload::gateway::{Gateway, GatewayConfig};

use crate::args::IoArg;
use crate::interfaces::Interface;
use crate::port_io::{PortIo, SendRefused};

/// Frames queued between two hand-overs to the kernel.
const FLUSH_EVERY: u64 = 32;
/// How long a full transmit ring is waited for before the interface is taken as stuck.
const STUCK_AFTER: Duration = Duration::from_secs(2);

/// `hyflow send`'s options.
#[derive(Args)]
pub struct SendArgs {
    /// The interface to send on.
    #[arg(long, value_name = "IF")]
    pub iface: String,
    /// A pcap/pcapng capture (`.gz` too; Ethernet frames), or `gen:gateway[,KEY=VALUE...]`
    /// (see `hyflow replay --help`).
    #[arg(long, value_name = "FILE|gen:gateway,...")]
    pub trace: PathBuf,
    /// Packets per second [default: as fast as the interface takes them].
    #[arg(long, value_name = "PPS")]
    pub rate: Option<f64>,
    /// How many times to send the trace.
    #[arg(long = "loop", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub loops: u64,
    /// Packet I/O: afxdp or afpacket [default: afxdp where it opens, else afpacket].
    #[arg(long, value_enum, value_name = "IO")]
    pub io: Option<IoArg>,
}

/// Where the frames come from.
enum Frames {
    Capture(TraceReader),
    Gateway(Box<Gateway>, Vec<u8>),
}

impl Frames {
    fn open(trace: &std::path::Path) -> Result<Frames> {
        let text = trace.to_string_lossy();
        if let Some(config) = GatewayConfig::parse(&text) {
            let config = config.map_err(|e| anyhow!("--trace: {e}"))?;
            let gateway = Gateway::new(config).map_err(|e| anyhow!("--trace: {e}"))?;
            return Ok(Frames::Gateway(Box::new(gateway), Vec::with_capacity(2048)));
        }
        Ok(Frames::Capture(TraceReader::open(trace).with_context(|| trace.display().to_string())?))
    }

    /// Calls `send` with the next frame and its length on the wire; false at the end.
    fn next(&mut self, send: &mut dyn FnMut(&[u8], usize) -> Result<()>) -> Result<bool> {
        match self {
            Frames::Capture(reader) => {
                let Some(p) = reader.next_packet()? else { return Ok(false) };
                let link = p.link;
                if link != LinkType::Ethernet {
                    bail!("{}: only Ethernet captures can be sent (this one is {link:?})", reader.name());
                }
                send(p.data, p.orig_len as usize)?;
            }
            Frames::Gateway(gateway, buf) => {
                let Some(p) = gateway.next() else { return Ok(false) };
                build_frame_into(gateway.key(p.flow), p.bytes as usize, buf);
                send(buf, buf.len())?;
            }
        }
        Ok(true)
    }
}

/// What a run sent.
struct Sent {
    packets: u64,
    bytes: u64,
    ring_full_waits: u64,
}

/// Runs `hyflow send`; prints what it sent.
pub fn run(a: SendArgs) -> Result<()> {
    if let Some(r) = a.rate {
        if !(r.is_finite() && r > 0.0) {
            bail!("--rate must be a positive number of packets per second, not {r}");
        }
    }
    if hyflow::columnar::is_columnar(&a.trace) {
        bail!(
            "{}: a .hyf trace holds flow keys, not frames: send the capture it was converted from",
            a.trace.display()
        );
    }
    crate::interfaces::check_privileges()?;
    let iface = Interface::lookup(&a.iface, 0)?;
    let max_frame = iface.max_frame();
    let afpacket = || -> Result<Box<dyn PortIo>> {
        Ok(Box::new(crate::afpacket::AfPacket::open_tx(&iface.name, iface.ifindex, max_frame)?))
    };
    let mut io = match a.io {
        Some(IoArg::Afpacket) => afpacket()?,
        Some(IoArg::Afxdp) => crate::open_tx_afxdp(&iface, max_frame)?,
        None => crate::open_tx_afxdp(&iface, max_frame).or_else(|e| {
            eprintln!("hyflow send: AF_XDP unavailable ({e:#}); using AF_PACKET");
            afpacket()
        })?,
    };
    let start = Instant::now();
    let mut sent = Sent { packets: 0, bytes: 0, ring_full_waits: 0 };
    let interval = a.rate.map(|r| 1e9 / r);
    for _ in 0..a.loops {
        let mut frames = Frames::open(&a.trace)?;
        while frames.next(&mut |frame, wire_len| {
            if let Some(ns) = interval {
                pace(start, (sent.packets as f64 * ns) as u64, &mut *io);
            }
            let len = wire_len.clamp(frame.len(), max_frame);
            send_one(&mut *io, frame, len, &mut sent)?;
            sent.packets += 1;
            sent.bytes += len as u64;
            if sent.packets.is_multiple_of(FLUSH_EVERY) {
                io.flush();
            }
            Ok(())
        })? {}
    }
    io.flush();
    let secs = start.elapsed().as_secs_f64();
    println!(
        "sent {} packets ({} bytes) on {} in {:.3} s: {:.0} packets/s, {:.3} Gbit/s; {} waits on a full ring; io {}",
        sent.packets,
        sent.bytes,
        a.iface,
        secs,
        sent.packets as f64 / secs.max(1e-9),
        sent.bytes as f64 * 8.0 / secs.max(1e-9) / 1e9,
        sent.ring_full_waits,
        io.describe()
    );
    Ok(())
}

/// Waits until `due_ns` after `start`: sleeps while well ahead (the frames queued so far
/// handed to the kernel first), spins the last stretch.
fn pace(start: Instant, due_ns: u64, io: &mut dyn PortIo) {
    let due = start + Duration::from_nanos(due_ns);
    let now = Instant::now();
    if due > now + Duration::from_micros(200) {
        io.flush();
        std::thread::sleep(due - now - Duration::from_micros(100));
    }
    while Instant::now() < due {
        std::hint::spin_loop();
    }
}

/// Sends one frame of `len` bytes (the captured bytes, zeros after them), waiting while the
/// ring is full.
fn send_one(io: &mut dyn PortIo, frame: &[u8], len: usize, sent: &mut Sent) -> Result<()> {
    let mut waiting_since = None;
    loop {
        let result = io.send_with(&mut |buf| {
            let len = len.min(buf.len());
            let n = frame.len().min(len);
            buf[..n].copy_from_slice(&frame[..n]);
            buf[n..len].fill(0);
            Some(0..len)
        });
        match result {
            Ok(()) => return Ok(()),
            Err(SendRefused::Down) => bail!("the interface went down or away"),
            Err(SendRefused::Full) => {
                sent.ring_full_waits += 1;
                io.flush();
                let since = *waiting_since.get_or_insert_with(Instant::now);
                if since.elapsed() > STUCK_AFTER {
                    bail!("the interface has taken nothing for {} s", STUCK_AFTER.as_secs());
                }
                std::thread::yield_now();
            }
        }
    }
}
