//! A poll-mode core: one thread polling the receive queues it was given, as an Open vSwitch
//! PMD thread does (`dpif-netdev.c`'s `pmd_thread_main`: poll each receive queue for a batch,
//! process it, flush the output batches).
//!
//! A batch goes through three steps, and only the middle one holds the engine:
//! 1. receive up to [`BATCH`] frames and parse each as Open vSwitch's `flow_extract` does
//!    ([`parse_frame_with_layout`]), keeping its header offsets;
//! 2. under the engine's lock, ask [`hyflow::switch::Switch::process_embedded`] for the
//!    copies that leave (as flow keys: the answer `replay` gives), with the clock read under
//!    the same lock so that the engine's time never goes back across cores;
//! 3. write each copy onto its frame ([`write_leaving`]) straight into the output port's
//!    transmit buffer, holding that port's lock while consecutive copies go to it.
//!
//! A core holds the switch's round lock for reading from its first receive to its last
//! flush, so that a rule update (which takes it for writing) returns only once every frame
//! decided by the old rules has left. Nothing here allocates per frame.

use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use hyflow::conntrack::EmbeddedTuple;
use hyflow::openflow::traversal::Output;
use hyflow::packet::frame_rewrite::write_leaving;
use hyflow::packet::malformed_counts::MalformedCounts;
use hyflow::packet::parse::{parse_frame_with_layout, FrameLayout};
use hyflow::packet::FlowKey;
use hyflow::switch::Layer;

use crate::forwarder::{LiveDrops, Shared, CORE_INSTALLS, MAX_SLEEP_MS};
use crate::port_io::{PortIo, RxBatch, SendRefused, BATCH};

/// How long a core keeps polling its queues after the last frame before it sleeps (ns):
/// under load frames come in bursts a few tens of microseconds apart, and a burst that finds
/// the core asleep waits for a wake-up (tens of microseconds, more on a busy host) while the
/// rings fill (Open vSwitch's PMDs never sleep; these sleep once traffic pauses).
const SPIN_NS: u64 = 200_000;

/// A receive queue a core polls: port index and queue index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxQueue {
    /// Index of the port in the switch's port list.
    pub port: usize,
    /// The port's receive queue.
    pub queue: usize,
}

/// Deals `queues` out to `cores` cores in turn (Open vSwitch's round-robin assignment of
/// receive queues to PMD threads); a core may get none when there are fewer queues.
pub fn assign(queues: &[RxQueue], cores: usize) -> Vec<Vec<RxQueue>> {
    let mut per_core = vec![Vec::new(); cores];
    for (i, q) in queues.iter().enumerate() {
        per_core[i % cores].push(*q);
    }
    per_core
}

/// One core's state: its queues and the scratch every batch reuses.
pub struct Core {
    id: usize,
    queues: Vec<RxQueue>,
    batch: RxBatch,
    keys: Vec<FlowKey>,
    layouts: Vec<FrameLayout>,
    embedded: Vec<Option<EmbeddedTuple>>,
    /// The copies that leave, per frame of the batch (each vector reused: filled in place
    /// by the engine, never moved).
    leaving: Vec<Vec<Output>>,
    /// Ports sent to in this round (flushed at its end).
    sent_to: Vec<bool>,
    /// This round's frames by the layer that decided them (microflow, megaflow, upcall), and
    /// its time waiting for the engine's lock: a sample of the per-frame cost fit.
    round_layers: [u32; 3],
    round_wait_ns: u64,
    /// Of its time, bringing the NIC tier's tables in line (left out of the fit, as the wait).
    round_sync_ns: u64,
    /// Counts not yet merged into the switch's (merged under the engine lock).
    malformed: MalformedCounts,
    drops: LiveDrops,
}

impl Core {
    /// Core `id` polling `queues`, frames at most `max_frame` bytes, for a switch of `ports`
    /// ports.
    pub fn new(id: usize, queues: Vec<RxQueue>, max_frame: usize, ports: usize) -> Core {
        Core {
            id,
            queues,
            batch: RxBatch::new(max_frame),
            keys: vec![FlowKey::default(); BATCH],
            layouts: vec![FrameLayout::default(); BATCH],
            embedded: vec![None; BATCH],
            leaving: (0..BATCH).map(|_| Vec::with_capacity(4)).collect(),
            sent_to: vec![false; ports],
            round_layers: [0; 3],
            round_wait_ns: 0,
            round_sync_ns: 0,
            malformed: MalformedCounts::default(),
            drops: LiveDrops::default(),
        }
    }

    /// Forwards until the switch halts; merges its last counts before it returns.
    pub fn run(mut self, shared: &Shared) {
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(self.queues.len());
        for q in &self.queues {
            let fd: RawFd = shared.ports[q.port].io.lock().expect("port lock").rx_fds()[q.queue];
            fds.push(libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
        }
        let mut last_frame = shared.now_ns();
        // When the last round ended: a round that received frames counts from there to its
        // own end as processing time (Open vSwitch's "processing cycles"; rounds that found
        // nothing are idle polling, left out, as OVS leaves them out).
        let mut round_start = last_frame;
        while !shared.halt.load(Ordering::Relaxed) {
            let received = {
                let _round = shared.rounds.read().expect("round lock");
                let mut received = 0;
                for i in 0..self.queues.len() {
                    let q = self.queues[i];
                    if shared.ports[q.port].up.load(Ordering::Relaxed) {
                        received += self.forward_batch(shared, q);
                    }
                }
                self.flush(shared);
                received
            };
            let now = shared.now_ns();
            let stats = &shared.core_stats[self.id];
            let (layers, wait) = (
                std::mem::take(&mut self.round_layers),
                std::mem::take(&mut self.round_wait_ns) + std::mem::take(&mut self.round_sync_ns),
            );
            if received > 0 {
                stats.packets.fetch_add(received as u64, Ordering::Relaxed);
                stats.processing_ns.fetch_add(now - round_start, Ordering::Relaxed);
                if layers != [0; 3] {
                    let ns = (now - round_start).saturating_sub(wait);
                    stats.fit.lock().expect("fit lock").add(layers, ns);
                }
                (last_frame, round_start) = (now, now);
                continue;
            }
            round_start = now;
            if now.saturating_sub(last_frame) < SPIN_NS {
                std::hint::spin_loop();
                continue;
            }
            // Idle: sleep until a frame or a bounded while (the switch's deadlines and
            // control requests are the main thread's).
            for (fd, q) in fds.iter_mut().zip(&self.queues) {
                // A port that is down is not polled (its descriptor may report errors forever).
                let up = shared.ports[q.port].up.load(Ordering::Relaxed);
                fd.events = if up { libc::POLLIN } else { 0 };
            }
            // SAFETY: `fds` is a live array of pollfd of the length passed.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, MAX_SLEEP_MS as i32) };
            round_start = shared.now_ns();
        }
        let mut engine = shared.engine.lock().expect("engine lock");
        engine.merge(&mut self.malformed, &mut self.drops);
    }

    /// Receives one batch on `q` and forwards each frame; returns how many arrived.
    fn forward_batch(&mut self, shared: &Shared, q: RxQueue) -> usize {
        self.batch.clear();
        let received = shared.ports[q.port].io.lock().expect("port lock").receive(q.queue, &mut self.batch);
        if let Err(e) = received {
            shared.port_lost(q.port, &e.to_string());
            return 0;
        }
        let n = self.batch.len();
        if n == 0 {
            return 0;
        }
        let in_port = shared.ports[q.port].number;
        for f in 0..n {
            let frame = self.batch.frame(f);
            // A frame that does not parse completely goes through the pipeline on what was
            // parsed, as in Open vSwitch; the reason is counted.
            if let Err(m) = parse_frame_with_layout(frame, in_port, &mut self.keys[f], &mut self.layouts[f]) {
                self.malformed.count(m.name());
            }
            // An ICMP error relates to its connection by the packet it carries, which only
            // the frame holds.
            self.embedded[f] = EmbeddedTuple::of_icmp_error(frame, &self.layouts[f], &self.keys[f]);
        }
        self.decide(shared, n);
        self.transmit(shared, n);
        self.record_latency(shared, n);
        n
    }

    /// Records each stamped frame's time from the XDP program's hand-off to now, its copies
    /// on the transmit rings: one clock read and one uncontended lock per batch.
    fn record_latency(&self, shared: &Shared, n: usize) {
        let mut stamped = (0..n).filter_map(|f| self.batch.handed_ns(f)).peekable();
        if stamped.peek().is_none() {
            return;
        }
        let now = monotonic_ns();
        let mut latency = shared.core_stats[self.id].latency.lock().expect("latency lock");
        for handed in stamped {
            latency.saturating_record(now.saturating_sub(handed).max(1));
        }
    }

    /// The engine's decision for each of the batch's `n` frames (the copies that leave), under
    /// its lock.
    fn decide(&mut self, shared: &Shared, n: usize) {
        let asked = shared.now_ns();
        let mut engine = shared.engine.lock().expect("engine lock");
        let now = shared.now_ns();
        engine.merge(&mut self.malformed, &mut self.drops);
        // With a NIC tier, these frames are the ones it missed: the engine does not look
        // them up in its NIC again.
        let missed = engine.nic.is_some();
        if missed {
            engine.policy_tick(now);
            engine.policy_ring(self.id, self.batch.waiting as u64, now);
        }
        let mut installs = engine.switch.nic_installs();
        for f in 0..n {
            let bytes = self.batch.frame(f).len() as u64;
            let (key, embedded, out) = (&self.keys[f], self.embedded[f], &mut self.leaving[f]);
            if !missed {
                let layer = engine.switch.process_embedded(key, embedded, bytes, now, out);
                count_layer(&mut self.round_layers, layer);
                continue;
            }
            let may = engine.policy.as_mut().and_then(|p| p.upcall_may_offload(now));
            let offload = may == Some(true);
            let layer = engine.switch.process_missed_embedded(key, embedded, bytes, now, offload, out);
            count_layer(&mut self.round_layers, layer);
            let after = engine.switch.nic_installs();
            if let Some(p) = &mut engine.policy {
                p.decided(after - installs, may == Some(false) && layer == Layer::SlowPath);
            }
            installs = after;
        }
        if missed {
            let batch = &self.batch;
            let frames = self.keys[..n].iter().enumerate().map(|(f, key)| (key, batch.frame(f).len() as u32));
            engine.policy_software(frames, self.id, now);
        }
        // What the batch's upcalls installed (or evicted) reaches the NIC tier before the
        // next batch. Its time is the tier's table writes, measured apart (`nic_write_ns`):
        // the round's per-frame fit leaves it out.
        let syncing = shared.now_ns();
        engine.sync_nic(now, CORE_INSTALLS);
        self.round_sync_ns += shared.now_ns() - syncing;
        drop(engine);
        let stats = &shared.core_stats[self.id];
        self.round_wait_ns += now - asked;
        stats.engine_wait_ns.fetch_add(now - asked, Ordering::Relaxed);
        let held = shared.now_ns() - now;
        stats.engine_ns.fetch_add(held, Ordering::Relaxed);
        stats.holds.record(held);
    }

    /// Writes every copy of the batch onto its output port, in order, holding a port's lock
    /// while consecutive copies go to it.
    fn transmit(&mut self, shared: &Shared, n: usize) {
        let mut held: Option<(usize, MutexGuard<'_, Box<dyn PortIo>>)> = None;
        let copies =
            self.leaving[..n].iter().enumerate().flat_map(|(f, outs)| outs.iter().map(move |o| (f, o)));
        for (f, out) in copies {
            let Some(p) = shared.port_index(out.port) else {
                self.drops.no_such_port += 1;
                continue;
            };
            if !shared.ports[p].up.load(Ordering::Relaxed) {
                self.drops.port_down += 1;
                continue;
            }
            if held.as_ref().is_none_or(|(at, _)| *at != p) {
                // Let go of the last port before taking the next: a core never holds two, so
                // two cores sending crosswise cannot wait on each other.
                drop(held.take());
                held = Some((p, shared.ports[p].io.lock().expect("port lock")));
            }
            let io = &mut held.as_mut().expect("just taken").1;
            self.sent_to[p] = true;
            let (frame, layout, key) = (self.batch.frame(f), &self.layouts[f], &self.keys[f]);
            let mut fits = true;
            let sent = io.send_with(&mut |buf| {
                let written = write_leaving(frame, layout, key, &out.packet, buf);
                fits = written.is_ok();
                written.ok()
            });
            match sent {
                Ok(()) if !fits => self.drops.too_long += 1,
                Ok(()) => {}
                Err(SendRefused::Full) => self.drops.tx_ring_full += 1,
                Err(SendRefused::Down) => self.drops.port_down += 1,
            }
        }
    }

    /// Hands the kernel what this round sent on each port.
    fn flush(&mut self, shared: &Shared) {
        for (p, sent) in self.sent_to.iter_mut().enumerate() {
            if std::mem::take(sent) {
                shared.ports[p].io.lock().expect("port lock").flush();
            }
        }
    }
}

/// CLOCK_MONOTONIC, ns: the clock the XDP program stamps frames with (`bpf_ktime_get_ns`).
pub(crate) fn monotonic_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Counts a frame the engine decided in `layer` into a round's frames by layer (microflow,
/// megaflow, upcall).
fn count_layer(layers: &mut [u32; 3], layer: Layer) {
    match layer {
        Layer::Microflow => layers[0] += 1,
        Layer::Megaflow => layers[1] += 1,
        Layer::SlowPath => layers[2] += 1,
        Layer::Nic => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(port: usize, queue: usize) -> RxQueue {
        RxQueue { port, queue }
    }

    #[test]
    fn queues_are_dealt_out_in_turn() {
        let queues = [q(0, 0), q(0, 1), q(1, 0), q(2, 0), q(2, 1)];
        assert_eq!(assign(&queues, 2), vec![vec![q(0, 0), q(1, 0), q(2, 1)], vec![q(0, 1), q(2, 0)]]);
        assert_eq!(assign(&queues, 1), vec![queues.to_vec()]);
        assert_eq!(assign(&queues[..1], 3), vec![vec![q(0, 0)], vec![], vec![]]);
    }
}
