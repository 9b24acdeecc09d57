//! The forwarding loop: frames in from every port, the engine's decision for each, frames
//! out — OVS's PMD loop (`dpif-netdev.c`: poll each receive queue for a batch, process it,
//! flush the output batches), over hyflow's [`Switch`].
//!
//! The engine stays deterministic and I/O-free: the loop reads the monotonic clock once per
//! round of batches and passes it in, parses each frame as Open vSwitch's `flow_extract`
//! does ([`parse_frame_with_layout`]), asks [`Switch::process`] for the copies that leave (as flow keys,
//! the same answer `replay` gives for that packet), and writes each copy onto the frame
//! ([`write_leaving`]): only the fields the datapath actions changed, checksums updated as
//! Open vSwitch updates them. Rule updates and questions from the control socket are
//! carried out between two rounds, so an update's revalidation is done before any frame of
//! the next round is looked up. Nothing here allocates per frame.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use serde::Serialize;

use hyflow::cache::dump::dump_text;
use hyflow::conntrack::EmbeddedTuple;
use hyflow::openflow::traversal::Output;
use hyflow::packet::frame_rewrite::write_leaving;
use hyflow::packet::malformed_counts::MalformedCounts;
use hyflow::packet::parse::{parse_frame_with_layout, FrameLayout};
use hyflow::packet::FlowKey;
use hyflow::replay_report::{ports_text, ReplayReport};
use hyflow::switch::Switch;
use hyflow_commands::replay::rule_stats;

use crate::control::{Pending, Request};
use crate::interfaces::{link_state, LinkState};
use crate::port_io::{PortIo, RxBatch, SendRefused};

/// Longest the loop sleeps without looking at its timers and the stop flag (ms).
const MAX_SLEEP_MS: u64 = 100;
/// How long the loop keeps polling the rings after the last frame before it sleeps (ns):
/// under load frames come in bursts a few tens of microseconds apart, and a burst that finds
/// the loop asleep waits for a wake-up (tens of microseconds, more on a busy host) while the
/// rings fill (Open vSwitch's PMDs never sleep; this one sleeps once traffic pauses).
const SPIN_NS: u64 = 200_000;
/// How often the loop looks whether an interface went down, came back or disappeared (ns).
const LINK_CHECK_NS: u64 = 1_000_000_000;

/// Waiting for `fd` to be readable.
fn poll_in(fd: std::os::fd::RawFd) -> libc::pollfd {
    libc::pollfd { fd, events: libc::POLLIN, revents: 0 }
}

/// A port of the running switch: its interface and its I/O.
pub struct LivePort {
    /// The interface's name (the ports file's name for the port).
    pub name: String,
    /// The OpenFlow port number.
    pub number: u32,
    /// The interface's index when the switch attached (a new interface of the same name is
    /// not this port).
    pub ifindex: u32,
    /// Its packet I/O.
    pub io: Box<dyn PortIo>,
    /// Whether it receives and sends: false while its interface is down, and for good once
    /// the interface is gone.
    pub up: bool,
    /// Whether the interface was deleted.
    pub gone: bool,
}

impl LivePort {
    /// Interface `interface`'s port, moving frames through `io`; up until found otherwise.
    pub fn new(interface: &crate::interfaces::Interface, io: Box<dyn PortIo>) -> LivePort {
        LivePort {
            name: interface.name.clone(),
            number: interface.port,
            ifindex: interface.ifindex,
            io,
            up: true,
            gone: false,
        }
    }
}

/// Copies the pipeline sent that did not leave, by reason (what the engine's port counters
/// cannot know: they count what the decision sent).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct LiveDrops {
    /// Sent to a port number no interface of the switch carries (LOCAL, a port the ports
    /// file does not list).
    pub no_such_port: u64,
    /// The output port's transmit ring was full.
    pub tx_ring_full: u64,
    /// The output port's interface was gone or down.
    pub port_down: u64,
    /// Longer than the transmit buffer once tags were pushed.
    pub too_long: u64,
}

/// The forwarding loop's state: the engine, the ports, the scratch every frame reuses.
pub struct Forwarder {
    switch: Switch,
    ports: Vec<LivePort>,
    batch: RxBatch,
    key: FlowKey,
    layout: FrameLayout,
    outputs: Vec<Output>,
    malformed: MalformedCounts,
    drops: LiveDrops,
    start: Instant,
    io: String,
    next_link_check: u64,
}

/// Why the loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// SIGINT or SIGTERM.
    Signal,
    /// `hyflow ctl ... stop`.
    Stopped,
}

impl Forwarder {
    /// A loop over `ports` (frames at most `max_frame` bytes) through `switch`; `io` says how
    /// frames move, for reports.
    pub fn new(switch: Switch, ports: Vec<LivePort>, max_frame: usize, io: String) -> Forwarder {
        Forwarder {
            switch,
            ports,
            batch: RxBatch::new(max_frame),
            key: FlowKey::default(),
            layout: FrameLayout::default(),
            outputs: Vec::with_capacity(16),
            malformed: MalformedCounts::default(),
            drops: LiveDrops::default(),
            start: Instant::now(),
            io,
            next_link_check: LINK_CHECK_NS,
        }
    }

    /// Nanoseconds since the switch started: the engine's clock.
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Forwards until `stop` is set (the signal handler also writes to `wake`) or a `stop`
    /// request arrives; control requests come on `requests`, each announced on `wake`.
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        requests: &mpsc::Receiver<Pending>,
        mut wake: &UnixStream,
    ) -> Ended {
        // Every port's descriptors, each with its port, then the wake-up socket's.
        let mut polled: Vec<(libc::pollfd, Option<usize>)> = Vec::new();
        for (i, p) in self.ports.iter().enumerate() {
            polled.extend(p.io.rx_fds().into_iter().map(|fd| (poll_in(fd), Some(i))));
        }
        polled.push((poll_in(wake.as_raw_fd()), None));
        let (mut fds, fd_port): (Vec<libc::pollfd>, Vec<Option<usize>>) = polled.into_iter().unzip();
        let mut last_frame = 0;
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ended::Signal;
            }
            while let Ok(p) = requests.try_recv() {
                let stopping = matches!(p.request, Request::Stop);
                let answer = self.carry_out(p.request);
                let _ = p.reply.send(answer);
                if stopping {
                    return Ended::Stopped;
                }
            }
            let now = self.now_ns();
            let mut received = 0;
            for i in 0..self.ports.len() {
                if self.ports[i].up {
                    received += self.forward_batch(i, now);
                }
            }
            for p in &mut self.ports {
                p.io.flush();
            }
            if now >= self.next_link_check {
                self.check_links();
                self.next_link_check = now + LINK_CHECK_NS;
            }
            if received > 0 {
                last_frame = now;
                continue;
            }
            if now.saturating_sub(last_frame) < SPIN_NS {
                std::hint::spin_loop();
                continue;
            }
            // Idle: the switch's own deadlines, then sleep until a frame, a request, a
            // signal or the next deadline.
            let deadline = self.switch.next_deadline_ns();
            if deadline <= now {
                self.switch.advance(now);
            }
            let wait_ms = (deadline.saturating_sub(now).div_ceil(1_000_000)).clamp(1, MAX_SLEEP_MS);
            for (fd, port) in fds.iter_mut().zip(&fd_port) {
                // A port that is down is not polled (its descriptor may report errors forever).
                fd.events = if port.is_none_or(|i| self.ports[i].up) { libc::POLLIN } else { 0 };
            }
            // SAFETY: `fds` is a live array of pollfd of the length passed.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait_ms as i32) };
            if fds.last().is_some_and(|fd| fd.revents != 0) {
                let mut drain = [0u8; 64];
                while matches!(wake.read(&mut drain), Ok(n) if n > 0) {}
            }
        }
    }

    /// Receives one batch on port `i` and forwards each frame; returns how many arrived.
    fn forward_batch(&mut self, i: usize, now: u64) -> usize {
        self.batch.clear();
        if let Err(e) = self.ports[i].io.receive(&mut self.batch) {
            self.port_lost(i, &e.to_string());
            return 0;
        }
        let Forwarder { switch, ports, batch, key, layout, outputs, malformed, drops, .. } = self;
        for f in 0..batch.len() {
            let frame = batch.frame(f);
            // A frame that does not parse completely goes through the pipeline on what was
            // parsed, as in Open vSwitch; the reason is counted.
            if let Err(m) = parse_frame_with_layout(frame, ports[i].number, key, layout) {
                malformed.count(m.name());
            }
            // An ICMP error relates to its connection by the packet it carries, which only
            // the frame holds.
            let embedded = EmbeddedTuple::of_icmp_error(frame, layout, key);
            switch.process_embedded(key, embedded, frame.len() as u64, now, outputs);
            for out in outputs.iter() {
                let Some(port) = ports.iter_mut().find(|p| p.number == out.port) else {
                    drops.no_such_port += 1;
                    continue;
                };
                if !port.up {
                    drops.port_down += 1;
                    continue;
                }
                let mut fits = true;
                let sent = port.io.send_with(&mut |buf| {
                    let written = write_leaving(frame, layout, key, &out.packet, buf);
                    fits = written.is_ok();
                    written.ok()
                });
                match sent {
                    Ok(()) if !fits => drops.too_long += 1,
                    Ok(()) => {}
                    Err(SendRefused::Full) => drops.tx_ring_full += 1,
                    Err(SendRefused::Down) => drops.port_down += 1,
                }
            }
        }
        batch.len()
    }

    /// Port `i` stopped working: said once, and the others go on.
    fn port_lost(&mut self, i: usize, why: &str) {
        let p = &mut self.ports[i];
        if p.up {
            p.up = false;
            eprintln!(
                "hyflow: port {} ({}) stopped: {why}; the other ports keep forwarding",
                p.number, p.name
            );
        }
    }

    /// Follows each interface's state: a port whose interface went down stops until it comes
    /// back up; one whose interface was deleted stops for good. Each change is said once.
    fn check_links(&mut self) {
        for i in 0..self.ports.len() {
            let p = &self.ports[i];
            if p.gone {
                continue;
            }
            match link_state(&p.name, p.ifindex) {
                LinkState::Gone => {
                    self.port_lost(i, "the interface was deleted");
                    self.ports[i].gone = true;
                }
                LinkState::Down => self.port_lost(i, "the interface went down"),
                LinkState::Up if !p.up => {
                    let p = &mut self.ports[i];
                    p.up = true;
                    eprintln!("hyflow: port {} ({}) is up again", p.number, p.name);
                }
                LinkState::Up => {}
            }
        }
    }

    /// Carries out a control request between two batches.
    fn carry_out(&mut self, request: Request) -> Result<String, String> {
        let now = self.now_ns();
        match request {
            Request::Show { json: true } => {
                Ok(serde_json::to_string_pretty(&self.show_json(now)).expect("serializes"))
            }
            Request::Show { json: false } => Ok(self.report_text(now)),
            Request::DumpFlows => Ok(rule_stats(self.switch.pipeline())),
            Request::DumpMegaflows => Ok(dump_text(&self.switch.megaflow_dump(), now)),
            Request::DumpPorts => Ok(ports_text(&self.switch.port_stats())),
            Request::Update(updates) => {
                let mut changed = 0;
                for (command, spec) in &updates {
                    changed += self.switch.apply_update(*command, spec, now);
                }
                Ok(format!("{changed} rule(s) changed\n"))
            }
            Request::Stop => Ok("stopping\n".to_string()),
        }
    }

    /// The engine's report of everything forwarded so far.
    fn report(&self, now: u64) -> ReplayReport {
        ReplayReport::new(&self.switch, &self.malformed, 0, now)
    }

    /// `show --json`: the report's keys, and the live switch's own.
    fn show_json(&mut self, now: u64) -> serde_json::Value {
        let mut v = serde_json::to_value(self.report(now)).expect("a report serializes");
        let interfaces: Vec<_> = self
            .ports
            .iter_mut()
            .map(|p| {
                let dropped = p.io.rx_dropped();
                serde_json::json!({ "name": p.name, "port": p.number, "up": p.up, "gone": p.gone, "rx_dropped": dropped })
            })
            .collect();
        let extra = serde_json::json!({
            "uptime_seconds": now as f64 / 1e9,
            "io": self.io,
            "interfaces": interfaces,
            "live_drops": self.drops,
        });
        if let (Some(map), serde_json::Value::Object(extra)) = (v.as_object_mut(), extra) {
            map.extend(extra);
        }
        v
    }

    /// The report as text: uptime and I/O, the replay report (layers, ports), live drops.
    fn report_text(&mut self, now: u64) -> String {
        let d = self.drops;
        let received_not: Vec<String> =
            self.ports.iter_mut().map(|p| format!("{} {}", p.io.rx_dropped(), p.name)).collect();
        format!(
            "hyflow switch: up {:.3} s, io {}\n\n{}\nnot received (dropped by the kernel, receive ring full): {}\n\
             not sent: {} to no such port, {} on a full ring, {} on a port down, {} too long\n",
            now as f64 / 1e9,
            self.io,
            self.report(now).text(),
            received_not.join(", "),
            d.no_such_port,
            d.tx_ring_full,
            d.port_down,
            d.too_long
        )
    }

    /// The report printed when the switch ends: as `show`, and every rule's counters.
    pub fn final_report(&mut self) -> String {
        let now = self.now_ns();
        format!("{}\n{}", self.report_text(now), rule_stats(self.switch.pipeline()))
    }

    /// Announces that the switch forwards: one line `ready` on standard output.
    pub fn say_ready(&self) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "ready");
        let _ = out.flush();
    }
}
