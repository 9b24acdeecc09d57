//! The running switch: the state its threads share, and the main thread.
//!
//! The threads are Open vSwitch's: poll-mode cores ([`crate::pmd`], one per `--cores`) move
//! frames, and the main thread carries out control requests, runs the engine's timers when
//! no frame does, and follows the interfaces' link state. The engine — rules and their
//! counters, caches, MAC table, connection tracker — is one [`Switch`] behind one lock,
//! taken once per batch: the parse of each frame, its rewriting and all packet I/O run on
//! the cores in parallel, and every decision is the one a single switch would make in the
//! order the batches took the lock.
//!
//! The engine stays deterministic and I/O-free: the cores read the monotonic clock under the
//! engine's lock and pass it in. A rule update first waits for every core's round in flight
//! to end (the round lock, taken for writing) so that when `hyflow ctl` returns, no frame
//! decided by the old rules is still to leave, and no cache entry the update outdated
//! forwards another.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex, RwLock};
use std::time::Instant;

use hdrhistogram::Histogram;
use serde::Serialize;

use hyflow::cache::dump::dump_text;
use hyflow::offload::HardwareCounters;
use hyflow::packet::malformed_counts::MalformedCounts;
use hyflow::packet::FlowKey;
use hyflow::replay_report::{ports_text, ReplayReport};
use hyflow::switch::Switch;
use hyflow::timing::LatencySummary;
use hyflow_commands::replay::rule_stats;

use crate::control::{Pending, Request};
use crate::cost_fit::CostFit;
use crate::holds::Holds;
use crate::interfaces::{link_state, LinkState};
use crate::live_policy::LivePolicy;
use crate::nic_tier::NicTier;
use crate::pmd::{Core, RxQueue};
use crate::port_io::PortIo;
use crate::steering::Steering;

/// Longest a thread sleeps without looking at the halt flag and its timers (ms).
pub(crate) const MAX_SLEEP_MS: u64 = 100;
/// How often the main thread reads the NIC tier's counters (ns): Open vSwitch's revalidators
/// dump the datapath's flow statistics about as often.
const COUNTER_READ_NS: u64 = 1_000_000_000;
/// New NIC entries the main thread writes into the NIC tier per hold of the engine's lock: a
/// policy's replacement of thousands of flows at once would otherwise hold the cores' frames
/// that long (each write is a system call); the rest go in at its next turn, their frames
/// decided in software meanwhile.
pub(crate) const MAIN_INSTALLS: usize = 256;
/// New NIC entries a core writes after its batch: as many as a batch's upcalls make, so
/// that a batch never pays for a whole policy replacement.
pub(crate) const CORE_INSTALLS: usize = 64;
/// Sampled headers the main thread hands the policy per hold of the engine's lock.
const SAMPLES_PER_HOLD: u64 = 1024;
/// How often the main thread drains the sampled headers, at least (ms): the XDP program does
/// not wake it per sample, which would cost the host more than the sample itself.
const SAMPLE_DRAIN_MS: u64 = 10;
/// How often the main thread looks whether an interface went down, came back or
/// disappeared (ns).
const LINK_CHECK_NS: u64 = 1_000_000_000;

/// A port of the running switch: its interface and its I/O, shared by the cores.
pub struct LivePort {
    /// The interface's name (the ports file's name for the port).
    pub name: String,
    /// The OpenFlow port number.
    pub number: u32,
    /// The interface's index when the switch attached (a new interface of the same name is
    /// not this port).
    pub ifindex: u32,
    /// Its packet I/O; a core holds the lock while it receives, sends or flushes.
    pub io: Mutex<Box<dyn PortIo>>,
    /// Whether it receives and sends: false while its interface is down, and for good once
    /// the interface is gone.
    pub up: AtomicBool,
    /// Whether the interface was deleted.
    pub gone: AtomicBool,
}

impl LivePort {
    /// Interface `interface`'s port, moving frames through `io`; up until found otherwise.
    pub fn new(interface: &crate::interfaces::Interface, io: Box<dyn PortIo>) -> LivePort {
        LivePort {
            name: interface.name.clone(),
            number: interface.port,
            ifindex: interface.ifindex,
            io: Mutex::new(io),
            up: AtomicBool::new(true),
            gone: AtomicBool::new(false),
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

impl LiveDrops {
    fn add(&mut self, o: &LiveDrops) {
        self.no_such_port += o.no_such_port;
        self.tx_ring_full += o.tx_ring_full;
        self.port_down += o.port_down;
        self.too_long += o.too_long;
    }
}

/// What the engine's lock guards: the switch, the NIC tier mirroring its NIC entries, and
/// the counts the cores merge into it.
pub struct Engine {
    /// The engine.
    pub switch: Switch,
    /// The NIC tier in front of it (`--nic xdp`), if any: frames come to the engine only
    /// when it missed them, and every change of the engine's NIC entries goes to it.
    pub nic: Option<Box<dyn NicTier>>,
    /// The offload policy deciding what the NIC tier holds (with a NIC tier), with its
    /// update and counter-read budgets.
    pub policy: Option<LivePolicy>,
    malformed: MalformedCounts,
    drops: LiveDrops,
}

impl Engine {
    /// Adds a core's counts since its last merge, and empties them.
    pub(crate) fn merge(&mut self, malformed: &mut MalformedCounts, drops: &mut LiveDrops) {
        if !malformed.by_reason.is_empty() {
            self.malformed.add(malformed);
            malformed.by_reason.clear();
        }
        self.drops.add(drops);
        *drops = LiveDrops::default();
    }

    /// The NIC tier's counters, for a policy's polls.
    fn hardware(nic: &mut Option<Box<dyn NicTier>>) -> Option<&mut dyn HardwareCounters> {
        nic.as_deref_mut().map(|n| n as &mut dyn HardwareCounters)
    }

    /// Time passes for the policy.
    pub(crate) fn policy_tick(&mut self, now_ns: u64) {
        if let Some(p) = &mut self.policy {
            p.tick(&mut self.switch, Self::hardware(&mut self.nic), now_ns);
        }
    }

    /// `core` took a batch from a receive ring that held `occupancy` frames.
    pub(crate) fn policy_ring(&mut self, core: usize, occupancy: u64, now_ns: u64) {
        if let Some(p) = &mut self.policy {
            p.ring(&mut self.switch, Self::hardware(&mut self.nic), (core, occupancy), now_ns);
        }
    }

    /// Software forwarded `frames` (key, length) on `core`.
    pub(crate) fn policy_software<'k>(
        &mut self,
        frames: impl Iterator<Item = (&'k FlowKey, u32)>,
        core: usize,
        now_ns: u64,
    ) {
        if let Some(p) = &mut self.policy {
            p.software(&mut self.switch, Self::hardware(&mut self.nic), (frames, core), now_ns);
        }
    }

    /// Hands the policy up to [`SAMPLES_PER_HOLD`] sampled headers waiting in the NIC tier;
    /// true if that many were (more may wait).
    fn policy_samples(&mut self, now_ns: u64) -> bool {
        let (Some(nic), Some(policy)) = (&mut self.nic, &mut self.policy) else { return false };
        let switch = &mut self.switch;
        let n = nic.drain_samples(SAMPLES_PER_HOLD, &mut |key, bytes| {
            policy.sample(switch, None, (key, bytes), now_ns)
        });
        n == SAMPLES_PER_HOLD
    }

    /// Brings the NIC tier's tables in line with the engine's NIC entries, changed at
    /// `now_ns` (the engine's clock), writing at most `max_installs` new ones; true if new
    /// entries wait for the next call.
    pub(crate) fn sync_nic(&mut self, now_ns: u64, max_installs: usize) -> bool {
        self.nic.as_mut().is_some_and(|nic| nic.sync(&mut self.switch, now_ns, max_installs))
    }

    /// Credits the frames the NIC tier served since the last read: read from every entry
    /// (`all`: for a report), or a part of the periodic pass; true if the pass goes on.
    fn read_nic_counters(&mut self, all: bool) -> bool {
        self.nic.as_mut().is_some_and(|nic| nic.read_counters(&mut self.switch, all))
    }
}

/// Where a core runs: its queues and the CPU it is pinned to.
#[derive(Clone, Debug, Serialize)]
pub struct CorePlan {
    /// The receive queues it polls.
    #[serde(skip)]
    pub queues: Vec<RxQueue>,
    /// The CPU it is pinned to (none: wherever the scheduler puts it).
    pub cpu: Option<usize>,
}

/// A core's counters, as Open vSwitch's `dpif-netdev/pmd-stats-show` gives them.
pub struct CoreStats {
    /// Frames received.
    pub packets: AtomicU64,
    /// Time spent in rounds that received frames (receiving, deciding, sending, and the
    /// kernel's work inside the sends), idle polling left out (ns).
    pub processing_ns: AtomicU64,
    /// Of which holding the engine's lock (ns): the part of the work no second core can
    /// share, so with N cores the switch forwards at most processing ÷ engine times what
    /// one core does.
    pub engine_ns: AtomicU64,
    /// Of which waiting for the engine's lock while another core held it (ns).
    pub engine_wait_ns: AtomicU64,
    /// Its rounds, for fitting the per-frame costs (`hyflow calibrate --live`).
    pub fit: Mutex<CostFit>,
    /// Its holds of the engine (a batch's decisions).
    pub holds: Holds,
    /// Each frame's time from the XDP program's hand-off to its copies on the transmit rings
    /// (ns): the time in the receive ring and the core, `sim`'s software latency.
    pub latency: Mutex<Histogram<u64>>,
}

impl Default for CoreStats {
    fn default() -> CoreStats {
        CoreStats {
            packets: AtomicU64::new(0),
            processing_ns: AtomicU64::new(0),
            engine_ns: AtomicU64::new(0),
            engine_wait_ns: AtomicU64::new(0),
            fit: Mutex::new(CostFit::default()),
            holds: Holds::default(),
            // 1 ns to a minute, 3 significant figures: recording never allocates.
            latency: Mutex::new(Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")),
        }
    }
}

/// What the switch's threads share.
pub struct Shared {
    /// The engine, taken once per batch.
    pub engine: Mutex<Engine>,
    /// Held for reading by each core from its first receive of a round to its last flush;
    /// for writing by a rule update.
    pub rounds: RwLock<()>,
    /// The ports, in the order of the ports file.
    pub ports: Vec<LivePort>,
    /// Set when the switch stops: the cores end their round and return.
    pub halt: AtomicBool,
    /// Each core's counters.
    pub core_stats: Vec<CoreStats>,
    /// The main thread's holds of the engine (timers, counter reads, the policy's periodic
    /// work and samples, syncs of the NIC tier, control requests aside).
    pub main_holds: Holds,
    start: Instant,
}

impl Shared {
    /// Nanoseconds since the switch started: the engine's clock.
    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// The index of the port numbered `number`.
    pub fn port_index(&self, number: u32) -> Option<usize> {
        self.ports.iter().position(|p| p.number == number)
    }

    /// Port `i` stopped working: said once, and the others go on.
    pub fn port_lost(&self, i: usize, why: &str) {
        let p = &self.ports[i];
        if p.up.swap(false, Ordering::Relaxed) {
            eprintln!(
                "hyflow: port {} ({}) stopped: {why}; the other ports keep forwarding",
                p.number, p.name
            );
        }
    }

    /// Follows each interface's state: a port whose interface went down stops until it comes
    /// back up; one whose interface was deleted stops for good. Each change is said once.
    fn check_links(&self) {
        for (i, p) in self.ports.iter().enumerate() {
            if p.gone.load(Ordering::Relaxed) {
                continue;
            }
            match link_state(&p.name, p.ifindex) {
                LinkState::Gone => {
                    self.port_lost(i, "the interface was deleted");
                    p.gone.store(true, Ordering::Relaxed);
                }
                LinkState::Down => self.port_lost(i, "the interface went down"),
                LinkState::Up => {
                    if !p.up.swap(true, Ordering::Relaxed) {
                        eprintln!("hyflow: port {} ({}) is up again", p.number, p.name);
                    }
                }
            }
        }
    }
}

/// Why the switch stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// SIGINT or SIGTERM.
    Signal,
    /// `hyflow ctl ... stop`.
    Stopped,
}

/// The switch: its shared state, its cores' plan, and what the main thread keeps.
pub struct Forwarder {
    shared: Shared,
    plans: Vec<CorePlan>,
    /// `--steer`: each queue's frames spread over the cores by the program's hash.
    steering: Option<Steering>,
    max_frame: usize,
    io: String,
}

impl Forwarder {
    /// A switch over `ports` (frames at most `max_frame` bytes) through `switch` behind the
    /// NIC tier `nic` with its install budget, with a core per plan; `io` says how frames move, for reports; the
    /// engine's clock reads 0 at `start`.
    pub fn new(
        switch: Switch,
        (nic, policy): (Option<Box<dyn NicTier>>, Option<LivePolicy>),
        ports: Vec<LivePort>,
        (plans, steering): (Vec<CorePlan>, Option<Steering>),
        max_frame: usize,
        io: String,
        start: Instant,
    ) -> Forwarder {
        let shared = Shared {
            engine: Mutex::new(Engine {
                switch,
                nic,
                policy,
                malformed: MalformedCounts::default(),
                drops: LiveDrops::default(),
            }),
            rounds: RwLock::new(()),
            ports,
            halt: AtomicBool::new(false),
            core_stats: plans.iter().map(|_| CoreStats::default()).collect(),
            main_holds: Holds::default(),
            start,
        };
        Forwarder { shared, plans, steering, max_frame, io }
    }

    /// Starts the cores, prints `ready`, and carries out control requests (announced on
    /// `wake`, which the signal handlers also write to) until `stop` is set or a `stop`
    /// request arrives; the cores have ended when it returns.
    pub fn run(&self, stop: &AtomicBool, requests: &mpsc::Receiver<Pending>, mut wake: &UnixStream) -> Ended {
        let shared = &self.shared;
        std::thread::scope(|scope| {
            for (id, plan) in self.plans.iter().enumerate() {
                let core = Core::new(id, plan.queues.clone(), self.max_frame, shared.ports.len());
                let cpu = plan.cpu;
                std::thread::Builder::new()
                    .name(format!("hyflow-core{id}"))
                    .spawn_scoped(scope, move || {
                        if let Some(cpu) = cpu {
                            pin_to(cpu);
                        }
                        core.run(shared)
                    })
                    .expect("spawning a core thread");
            }
            say_ready();
            let ended = self.main_loop(stop, requests, &mut wake);
            shared.halt.store(true, Ordering::Relaxed);
            ended
        })
    }

    /// The main thread's loop: requests, the engine's timers while no frame runs them, link
    /// state.
    fn main_loop(
        &self,
        stop: &AtomicBool,
        requests: &mpsc::Receiver<Pending>,
        wake: &mut &UnixStream,
    ) -> Ended {
        let shared = &self.shared;
        let mut next_link_check = LINK_CHECK_NS;
        let mut next_counter_read = COUNTER_READ_NS;
        // A periodic read's pass is under way (a part per turn).
        let mut reading = false;
        let sampling = shared.engine.lock().expect("engine lock").nic.as_ref().is_some_and(|n| n.samples());
        let max_sleep_ms = if sampling { SAMPLE_DRAIN_MS } else { MAX_SLEEP_MS };
        let mut wake_fd = [libc::pollfd { fd: wake.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
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
            // The NIC tier's counters (before the deadlines: its hits keep entries from
            // expiring idle), then the switch's own deadlines (expiry, aging, sweeps), which
            // frames also run, and what they changed in the NIC tier.
            let (deadline, work_waiting) = {
                let mut engine = shared.engine.lock().expect("engine lock");
                let now = shared.now_ns();
                let held_from = now;
                if now >= next_counter_read || reading {
                    reading = engine.read_nic_counters(false);
                    if !reading {
                        next_counter_read = now + COUNTER_READ_NS;
                    }
                }
                // The policy: sampled headers (a bounded number per hold of the lock, so that
                // the cores never wait long for it), then its periodic work, then what it
                // changed.
                let more_samples = engine.policy_samples(now);
                let now = shared.now_ns();
                engine.policy_tick(now);
                let mut more_installs = engine.sync_nic(now, MAIN_INSTALLS);
                if engine.switch.next_deadline_ns() <= now {
                    engine.switch.advance(now);
                    more_installs = engine.sync_nic(now, MAIN_INSTALLS);
                }
                let answer = (
                    engine.switch.next_deadline_ns().min(next_counter_read),
                    more_samples || more_installs || reading,
                );
                drop(engine);
                shared.main_holds.record(shared.now_ns() - held_from);
                answer
            };
            let now = shared.now_ns();
            if now >= next_link_check {
                shared.check_links();
                next_link_check = now + LINK_CHECK_NS;
            }
            if work_waiting {
                // Let the cores take the lock, then go on with the samples and installs.
                std::thread::yield_now();
                continue;
            }
            let until = deadline.min(next_link_check);
            let wait_ms = until.saturating_sub(now).div_ceil(1_000_000).clamp(1, max_sleep_ms);
            // SAFETY: `wake_fd` is a live array of one pollfd.
            unsafe { libc::poll(wake_fd.as_mut_ptr(), 1, wait_ms as i32) };
            if wake_fd[0].revents != 0 {
                let mut drain = [0u8; 64];
                while matches!(wake.read(&mut drain), Ok(n) if n > 0) {}
            }
        }
    }

    /// Carries out a control request; an update returns once no frame decided by the old
    /// rules is left to send.
    fn carry_out(&self, request: Request) -> Result<String, String> {
        let shared = &self.shared;
        match request {
            Request::Show { json: true } => {
                Ok(serde_json::to_string_pretty(&self.show_json()).expect("serializes"))
            }
            Request::Show { json: false } => Ok(self.report_text()),
            Request::DumpFlows => {
                Ok(rule_stats(shared.engine.lock().expect("engine lock").switch.pipeline()))
            }
            Request::DumpMegaflows => {
                let engine = shared.engine.lock().expect("engine lock");
                Ok(dump_text(&engine.switch.megaflow_dump(), shared.now_ns()))
            }
            Request::DumpNic => {
                let mut engine = shared.engine.lock().expect("engine lock");
                engine.read_nic_counters(true);
                let Some(nic) = &engine.nic else {
                    return Err("the switch runs without a NIC tier (--nic none)".to_string());
                };
                let held: Vec<_> =
                    engine.switch.nic_dump().into_iter().filter(|f| nic.holds(&f.matcher)).collect();
                Ok(dump_text(&held, shared.now_ns()))
            }
            Request::Costs => {
                let mut fit = CostFit::default();
                for c in &shared.core_stats {
                    fit.merge(&c.fit.lock().expect("fit lock"));
                }
                let engine = shared.engine.lock().expect("engine lock");
                let sample_hook_ns = engine.policy.as_ref().and_then(LivePolicy::sample_ns);
                let write_ns = engine.nic.as_ref().and_then(|n| n.write_ns());
                let fitted = fit.fit(sample_hook_ns, write_ns)?;
                Ok(serde_json::to_string_pretty(&fitted).expect("serializes"))
            }
            Request::DumpPorts => {
                Ok(ports_text(&shared.engine.lock().expect("engine lock").switch.port_stats()))
            }
            Request::Update(updates) => {
                let _quiet = shared.rounds.write().expect("round lock");
                let mut engine = shared.engine.lock().expect("engine lock");
                let now = shared.now_ns();
                let mut changed = 0;
                for (command, spec) in &updates {
                    changed += engine.switch.apply_update(*command, spec, now);
                }
                // The NIC tier's entries the update outdated leave the kernel now too.
                engine.sync_nic(now, MAIN_INSTALLS);
                Ok(format!("{changed} rule(s) changed\n"))
            }
            Request::Stop => Ok("stopping\n".to_string()),
        }
    }

    /// The engine's report of everything forwarded so far, and the live drops.
    fn report(&self) -> (ReplayReport, LiveDrops, f64) {
        let mut engine = self.shared.engine.lock().expect("engine lock");
        engine.read_nic_counters(true);
        let now = self.shared.now_ns();
        (ReplayReport::new(&engine.switch, &engine.malformed, 0, now), engine.drops, now as f64 / 1e9)
    }

    /// Frames each port's kernel side dropped before the switch received them.
    fn rx_dropped(&self) -> Vec<u64> {
        self.shared.ports.iter().map(|p| p.io.lock().expect("port lock").rx_dropped()).collect()
    }

    /// `show --json`: the report's keys, and the live switch's own.
    fn show_json(&self) -> serde_json::Value {
        let (report, drops, uptime) = self.report();
        let mut v = serde_json::to_value(report).expect("a report serializes");
        let interfaces: Vec<_> = self
            .shared
            .ports
            .iter()
            .zip(self.rx_dropped())
            .map(|(p, dropped)| {
                serde_json::json!({
                    "name": p.name, "port": p.number, "up": p.up.load(Ordering::Relaxed),
                    "gone": p.gone.load(Ordering::Relaxed), "rx_dropped": dropped,
                })
            })
            .collect();
        let cores: Vec<_> = self
            .plans
            .iter()
            .zip(&self.shared.core_stats)
            .enumerate()
            .map(|(id, (plan, stats))| {
                let packets = stats.packets.load(Ordering::Relaxed);
                serde_json::json!({
                    "core": id, "cpu": plan.cpu, "queues": self.queue_names(plan),
                    "packets": packets,
                    "processing_ns": stats.processing_ns.load(Ordering::Relaxed),
                    "engine_ns": stats.engine_ns.load(Ordering::Relaxed),
                    "engine_wait_ns": stats.engine_wait_ns.load(Ordering::Relaxed),
                    "engine_holds": stats.holds.json(),
                })
            })
            .collect();
        let nic_tier = {
            let engine = self.shared.engine.lock().expect("engine lock");
            engine.nic.as_ref().map(|n| n.report())
        };
        let policy = self.shared.engine.lock().expect("engine lock").policy.as_ref().map(LivePolicy::report);
        // Whether frames reach software stamped by the XDP program (their latency measured):
        // only through AF_XDP, and only where the kernel lets the program write metadata.
        #[cfg(feature = "afxdp")]
        let stamped = self.io.starts_with("afxdp") && crate::xdp_meta::allowed();
        #[cfg(not(feature = "afxdp"))]
        let stamped = false;
        let extra = serde_json::json!({
            "uptime_seconds": uptime,
            "latency_sw_us": self.latency(),
            "xdp_stamps": stamped,
            "nic_tier": nic_tier,
            "policy": policy,
            "io": self.io,
            "interfaces": interfaces,
            "cores": cores,
            "main_engine_holds": self.shared.main_holds.json(),
            "steer": self.steering.as_ref().map(|s| serde_json::json!({"fields": s.fields, "cores": s.cores})),
            "live_drops": drops,
        });
        if let (Some(map), serde_json::Value::Object(extra)) = (v.as_object_mut(), extra) {
            map.extend(extra);
        }
        v
    }

    /// Software's latency over every core (frames the XDP program stamped).
    fn latency(&self) -> LatencySummary {
        let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
        for c in &self.shared.core_stats {
            let _ = all.add(&*c.latency.lock().expect("latency lock"));
        }
        LatencySummary::of(&all)
    }

    /// A core's queues as `port/queue` names (with steering, a core's share of each queue:
    /// its socket `queue × cores + core` is named by the queue).
    fn queue_names(&self, plan: &CorePlan) -> Vec<String> {
        let sockets = self.steering.as_ref().map_or(1, |s| s.cores as usize);
        plan.queues
            .iter()
            .map(|q| format!("{}/{}", self.shared.ports[q.port].name, q.queue / sockets))
            .collect()
    }

    /// The cores in one line each: queues, CPU, frames received, processing time per frame.
    fn cores_text(&self) -> String {
        let mut text = String::new();
        for (id, (plan, stats)) in self.plans.iter().zip(&self.shared.core_stats).enumerate() {
            let cpu = plan.cpu.map_or("unpinned".to_string(), |c| format!("CPU {c}"));
            let packets = stats.packets.load(Ordering::Relaxed);
            let ns = stats.processing_ns.load(Ordering::Relaxed);
            let per = |ns: u64| ns as f64 / packets.max(1) as f64;
            text.push_str(&format!(
                "  core {id} ({cpu}) on {}: {packets} received, {:.3} s processing, per frame {:.0} ns \
                 ({:.0} in the engine, {:.0} waiting for it)\n",
                self.queue_names(plan).join(", "),
                ns as f64 / 1e9,
                per(ns),
                per(stats.engine_ns.load(Ordering::Relaxed)),
                per(stats.engine_wait_ns.load(Ordering::Relaxed)),
            ));
        }
        text
    }

    /// The report as text: uptime and I/O, the replay report (layers, ports), live drops.
    fn report_text(&self) -> String {
        let (report, d, uptime) = self.report();
        let nic_tier = {
            let engine = self.shared.engine.lock().expect("engine lock");
            let policy = engine.policy.as_ref().map_or(String::new(), |p| format!("{}\n", p.summary()));
            engine.nic.as_ref().map_or(String::new(), |n| format!("{}\n{policy}", n.summary()))
        };
        let received_not: Vec<String> =
            self.shared.ports.iter().zip(self.rx_dropped()).map(|(p, n)| format!("{n} {}", p.name)).collect();
        let steered = self.steering.as_ref().map_or(String::new(), |s| {
            format!(", steered by {} (each queue's frames hashed over the cores)", s.fields.join(","))
        });
        let l = self.latency();
        let latency = match l.count {
            0 => String::new(),
            n => format!(
                "  software latency (XDP hand-off to transmit ring, {n} frames): p50 {:.1} µs, p99 {:.1}, \
                 p99.9 {:.1}, max {:.1}\n",
                l.p50, l.p99, l.p999, l.max
            ),
        };
        format!(
            "hyflow switch: up {uptime:.3} s, io {}, {} core(s){steered}\n{}{latency}{nic_tier}\n{}\nnot received (dropped by the kernel, receive ring full): {}\n\
             not sent: {} to no such port, {} on a full ring, {} on a port down, {} too long\n",
            self.io,
            self.plans.len(),
            self.cores_text(),
            report.text(),
            received_not.join(", "),
            d.no_such_port,
            d.tx_ring_full,
            d.port_down,
            d.too_long
        )
    }

    /// The report printed when the switch ends: as `show`, and every rule's counters.
    pub fn final_report(&self) -> String {
        let rules = rule_stats(self.shared.engine.lock().expect("engine lock").switch.pipeline());
        format!("{}\n{rules}", self.report_text())
    }
}

/// Announces that the switch forwards: one line `ready` on standard output.
fn say_ready() {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
}

/// Pins the calling thread to `cpu` (a PMD thread stays on its core: its caches stay warm
/// and nothing else's work lands between two batches).
pub(crate) fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET adds `cpu` (below CPU_SETSIZE,
    // as every CPU of the affinity mask it came from is).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
            eprintln!(
                "hyflow switch: could not pin a core to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

/// The CPUs this process may run on, in order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
}
