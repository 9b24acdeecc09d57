//! `hyflow kvs` (feature `afxdp`): FlexKVS (FlexNIC §3) served from AF_XDP queues. The XDP
//! program `bpf/kvs.bpf.c` takes the memcached datagrams sent to the interface's address and
//! steers each to a core's socket — by key (FlexNIC's key-based steering: the core owning the
//! key's partition) or by flow (the paper's RSS baseline, one shared store) — and passes every
//! other frame to the kernel; each core answers its requests from the engine's store
//! (`hyflow::kvs`) on sockets of its own (`app_sockets`: a receive and a transmit ring per
//! core, replies written over the request's buffer), so that cores share nothing on the way
//! but the store — and, once per round, the queue's buffer recycling.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use aya::maps::{Array, XskMap};
use aya::Ebpf;
use hdrhistogram::Histogram;
use serde::Serialize;

use hyflow::kvs::memcached::{FrameHeader, Malformed, MAX_REPLY_CHUNK};
use hyflow::kvs::service::{serve_datagram, ServeTime, ServiceStats};
use hyflow::kvs::store::{Store, StoreConfig, StoreStats};
use hyflow::kvs::{owner, STEER_SLOTS};
use hyflow::packet::reassembly::{FragmentDrop, Reassembler, ReassemblyStats};

use crate::app_sockets::{AppSockets, CoreSockets, Request};
use crate::interfaces::Interface;
use crate::kvs_args::{KvsArgs, SteerMode};
use crate::udp_reply::{self, FrameDrop, Received};

/// The program, compiled from bpf/kvs.bpf.c by the build.
static PROGRAM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kvs.bpf.o"));

/// Datagrams each core puts together from fragments at a time (64 KiB each, allocated at
/// start).
const REASSEMBLY_SLOTS: usize = 16;
/// How long a core waits for a datagram's fragments (a request's fragments come back to back;
/// Linux waits 30 s, which under load would only hold slots for datagrams that never finish).
const REASSEMBLY_TIMEOUT_NS: u64 = 1_000_000_000;
/// How long an idle core sleeps on its sockets before looking at the stop flag again.
const IDLE_POLL_MS: i32 = 20;

/// `struct kvs_config` of the program.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct BpfKvsConfig {
    addr: u32,
    port: u32,
    cores: u32,
    steer_key: u32,
    hash_keys: u32,
    max_frame: u32,
}

// SAFETY: six u32, no padding.
unsafe impl aya::Pod for BpfKvsConfig {}

/// What one core did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CoreReport {
    /// Requests it served, by outcome.
    pub service: ServiceStats,
    /// Frames it could not read as UDP/IPv4 datagrams, by [`FrameDrop::ALL`]'s order.
    pub frame_drops: [u64; 5],
    /// Requests that came as IP fragments: fragments, datagrams put together, drops.
    pub reassembly: ReassemblyStats,
    /// Reply datagrams sent.
    pub replies: u64,
    /// Reply datagrams the transmit ring had no room for, or no buffer (dropped, as a full
    /// NIC queue drops).
    pub replies_dropped: u64,
    /// Frames the kernel dropped before this core took them (its receive ring full, or no
    /// buffer on the queue's fill ring).
    pub rx_dropped: u64,
    /// Processing cycles per request (see [`Cycles`]).
    pub cycles: Cycles,
    /// Nanoseconds of the core spent in rounds that received requests (the batch's receive,
    /// every request, the flush; idle polls left out): the core's whole time per request,
    /// which `calibrate --kvs --kvs-report` takes.
    pub busy_ns: u64,
}

/// Cycles a core spent per request, as FlexNIC's Table 2 measures them: from the request's
/// frame in the core's hands to its reply's frames written (the frame's parse, the
/// request's, the store, the reply's frames and checksums). Time-stamp counter ticks on
/// x86-64 (elsewhere nanoseconds). Shared by a batch's requests and not in it: the batch's
/// receive, handing its replies to the transmit ring and waking the kernel, recycling
/// buffers.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Cycles {
    /// Requests measured.
    pub requests: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Mean.
    pub mean: f64,
}

impl CoreReport {
    fn drop_frame(&mut self, why: FrameDrop) {
        self.frame_drops[why.index()] += 1;
    }
}

impl Cycles {
    fn of(h: &Histogram<u64>) -> Cycles {
        Cycles {
            requests: h.len(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            mean: h.mean(),
        }
    }
}

/// What the server did, printed when it stops.
#[derive(Debug, Serialize)]
pub struct KvsReport {
    /// Seconds it served.
    pub seconds: f64,
    /// `flow` or `key`.
    pub steer: &'static str,
    /// Whether cores reused the NIC's key hash.
    pub nic_hash: bool,
    /// All cores' requests, by outcome.
    pub service: ServiceStats,
    /// Malformed requests by reason (names as [`Malformed::name`]).
    pub malformed: Vec<(&'static str, u64)>,
    /// Each core's figures.
    pub cores: Vec<CoreReport>,
    /// Cycles per request over all cores.
    pub cycles: Cycles,
    /// What the XDP program did: requests steered by key, by flow, frames passed to the kernel.
    pub xdp: XdpCounts,
    /// Frames the kernel dropped before a core took them (a receive ring full, or no buffer
    /// on a fill ring).
    pub rx_dropped: u64,
    /// Requests that came as IP fragments, all cores': fragments, datagrams put together.
    pub fragments: ReassemblyStats,
    /// Fragments dropped and datagrams given up, by reason (names as [`FragmentDrop::name`]).
    pub fragment_drops: Vec<(&'static str, u64)>,
    /// The store's partitions (one with flow steering, one per core with key steering).
    pub partitions: Vec<StoreStats>,
}

/// The XDP program's counters.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct XdpCounts {
    /// Requests steered by their key's hash.
    pub by_key: u64,
    /// Requests steered by their flow (flow steering, or no key the program could read).
    pub by_flow: u64,
    /// Frames passed to the kernel (not memcached requests to this server).
    pub passed: u64,
    /// IP fragments of UDP datagrams to the server's address, steered by datagram.
    pub fragments: u64,
    /// Frames dropped as longer than the sockets' buffers hold.
    pub too_long: u64,
    /// The program's runs and mean time per run (`--xdp-stats`).
    pub runs: Option<crate::app_program::ProgramRuns>,
    /// Whether the program hands its key hash to software in front of each request (not
    /// where the kernel refuses it the metadata: see [`crate::xdp_meta`]).
    pub key_hash_to_software: bool,
}

/// Runs `hyflow kvs` until SIGINT or SIGTERM, then prints its report.
pub fn run(a: KvsArgs) -> Result<()> {
    let may_load_bpf = crate::interfaces::check_privileges()?;
    if !may_load_bpf {
        bail!("hyflow kvs loads an XDP program: it needs CAP_BPF (or CAP_SYS_ADMIN)");
    }
    if a.cores == 0 || a.cores > 64 {
        bail!("--cores must be 1 to 64, not {}", a.cores);
    }
    if a.memory_mib == 0 {
        bail!("--memory must be at least 1 MiB");
    }
    let iface = Interface::lookup(&a.iface, 1)?;
    let addr = crate::interfaces::ipv4_of(&a.iface)?;
    let mac = crate::interfaces::mac_of(&a.iface)?;
    let cores = a.cores as usize;
    let partitions = match a.steer {
        SteerMode::Flow => 1,
        SteerMode::Key => cores,
    };
    let bytes = a.memory_mib << 20;
    let stores: Arc<Vec<Store>> = Arc::new(
        (0..partitions)
            .map(|_| Store::new(StoreConfig::new(bytes / partitions, cores)))
            .collect::<Result<_, _>>()?,
    );
    let _claim = iface.claim()?;
    let mut ebpf = crate::xdp_meta::loader().load(PROGRAM).context("loading the XDP program")?;
    let mut io = AppSockets::open(&iface, iface.max_frame(), a.cores).context(iface.name.clone())?;
    let config = BpfKvsConfig {
        addr: u32::from_ne_bytes(addr.octets()),
        port: a.port as u32,
        cores: a.cores,
        steer_key: (a.steer == SteerMode::Key) as u32,
        hash_keys: (a.steer == SteerMode::Key || a.nic_hash) as u32,
        max_frame: io.max_frame() as u32,
    };
    Array::try_from(ebpf.map_mut("config").ok_or_else(|| anyhow!("no config map"))?)?
        .set(0, config, 0)
        .context("the config map")?;
    {
        let mut table: Array<_, u32> =
            Array::try_from(ebpf.map_mut("steer_table").ok_or_else(|| anyhow!("no steer_table map"))?)?;
        for slot in 0..STEER_SLOTS as u32 {
            // The slot's keys live in partition `owner`: its core gets them.
            table.set(slot, owner(slot, cores) as u32, 0).context("the steering table")?;
        }
    }
    let fds = io.fds().to_vec();
    {
        let mut xsks = XskMap::try_from(ebpf.map_mut("xsks").ok_or_else(|| anyhow!("no xsks map"))?)?;
        for (slot, fd) in fds.iter().enumerate() {
            // SAFETY: the sockets live until after the program is dropped (below).
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(*fd) };
            xsks.set(slot as u32, fd, 0).context("registering a socket")?;
        }
    }
    let native = crate::app_program::attach(&mut ebpf, "hyflow_kvs", &iface, a.app.xdp_mode)?;
    let run_stats = if a.app.xdp_stats { Some(crate::app_program::RunStats::enable()?) } else { None };
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    let start = Instant::now();
    let cpus = crate::forwarder::allowed_cpus();
    let threads: Vec<_> = io
        .take_cores()
        .into_iter()
        .enumerate()
        .map(|(c, sockets)| {
            let (stores, stop) = (Arc::clone(&stores), Arc::clone(&stop));
            let cpu = (!cpus.is_empty()).then(|| cpus[c % cpus.len()]);
            let core = Core { index: c, mac, port: a.port, nic_hash: a.nic_hash, start };
            std::thread::Builder::new()
                .name(format!("kvs-core{c}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        crate::forwarder::pin_to(cpu);
                    }
                    core.run(sockets, &stores, &stop)
                })
                .context("starting a core")
        })
        .collect::<Result<_>>()?;
    println!(
        "hyflow kvs: memcached on {addr}:{} ({}, {} XDP, {}), {cores} core(s), {} steering{}; ready",
        a.port,
        a.iface,
        if native { "native" } else { "generic" },
        if io.zero_copy() { "zero-copy" } else { "copy mode" },
        a.steer.name(),
        if a.nic_hash { " with the NIC's key hash" } else { "" }
    );
    use std::io::Write;
    std::io::stdout().flush().ok();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let joined: Vec<(CoreReport, Histogram<u64>, CoreSockets)> = threads
        .into_iter()
        .map(|t| t.join().map_err(|_| anyhow!("a core panicked")))
        .collect::<Result<_>>()?;
    let mut all_cycles = Histogram::<u64>::new(3).expect("3 significant digits");
    for (_, h, _) in &joined {
        all_cycles.add(h).expect("same bounds");
    }
    let (reports, sockets): (Vec<CoreReport>, Vec<CoreSockets>) =
        joined.into_iter().map(|(r, _, s)| (r, s)).unzip();
    let xdp = xdp_counts(&ebpf, run_stats.is_some())?;
    let rx_dropped = reports.iter().map(|r| r.rx_dropped).sum();
    drop(ebpf);
    // The sockets close after the program that redirects to them is gone.
    drop(sockets);
    drop(io);
    let mut service = ServiceStats::default();
    let mut fragments = ReassemblyStats::default();
    for r in &reports {
        service.add(&r.service);
        fragments.add(&r.reassembly);
    }
    let report = KvsReport {
        seconds: start.elapsed().as_secs_f64(),
        steer: a.steer.name(),
        nic_hash: a.nic_hash,
        service,
        malformed: Malformed::ALL.iter().zip(service.malformed).map(|(m, n)| (m.name(), n)).collect(),
        cores: reports,
        cycles: Cycles::of(&all_cycles),
        xdp,
        rx_dropped,
        fragment_drops: FragmentDrop::ALL.iter().zip(fragments.dropped).map(|(d, n)| (d.name(), n)).collect(),
        fragments,
        partitions: stores.iter().map(Store::stats).collect(),
    };
    eprintln!("hyflow kvs: stopped by a signal; detached");
    crate::app_program::print_report(a.app.json, &report, text_report)
}

fn xdp_counts(ebpf: &Ebpf, run_stats: bool) -> Result<XdpCounts> {
    let sums = crate::app_program::per_cpu_sums(ebpf, "stats", 5)?;
    let runs = if run_stats { Some(crate::app_program::runs(ebpf, "hyflow_kvs")?) } else { None };
    Ok(XdpCounts {
        by_key: sums[0],
        by_flow: sums[1],
        passed: sums[2],
        fragments: sums[3],
        too_long: sums[4],
        runs,
        key_hash_to_software: crate::xdp_meta::allowed(),
    })
}

/// One serving core: what it answers with.
struct Core {
    index: usize,
    mac: [u8; 6],
    /// The server's UDP port (a reassembled datagram may be for another).
    port: u16,
    nic_hash: bool,
    start: Instant,
}

/// What a core keeps while it serves a round: its report, its cycles, its reply buffer.
struct Serving<'a> {
    core: &'a Core,
    stores: &'a [Store],
    time: ServeTime,
    report: CoreReport,
    cycles: Histogram<u64>,
    reply: Vec<u8>,
    ip_id: u16,
    /// Requests that came as IP fragments, put together.
    reassembly: Reassembler,
    /// The round's time for the reassembler (ns since the server started).
    now_ns: u64,
}

impl Serving<'_> {
    /// Answers one request: parsed and served from the frame, the reply's datagrams written
    /// over it (and into free buffers past the first).
    fn answer(&mut self, request: &mut Request<'_>) {
        let t0 = crate::tsc::ticks();
        let (peer, id) = {
            let udp = match udp_reply::parse(request.frame()) {
                Ok(Received::Datagram(d)) => Ok(d),
                Ok(Received::Fragment(fragment, mac)) => match self.reassembly.add(self.now_ns, fragment) {
                    Ok(Some(segment)) => {
                        udp_reply::udp_of(mac, (fragment.key.src, fragment.key.dst), segment)
                    }
                    // Counted by the reassembler.
                    Ok(None) | Err(_) => return,
                },
                Err(why) => Err(why),
            };
            let udp = match udp {
                Ok(d) if d.peer.dst_port == self.core.port => d,
                Ok(_) => return self.report.drop_frame(FrameDrop::OtherPort),
                Err(why) => return self.report.drop_frame(why),
            };
            let hash = if self.core.nic_hash { request.key_hash() } else { None };
            let served = serve_datagram(
                self.stores,
                self.core.index,
                udp.payload,
                hash,
                self.time,
                &mut self.reply,
                &mut self.report.service,
            );
            let Some(id) = served else { return };
            (udp.peer, id)
        };
        let datagrams = self.reply.len().div_ceil(MAX_REPLY_CHUNK);
        for (seq, chunk) in self.reply.chunks(MAX_REPLY_CHUNK).enumerate() {
            let mut header = [0u8; 8];
            FrameHeader::write(&mut header, id, seq as u16, datagrams as u16);
            self.ip_id = self.ip_id.wrapping_add(1);
            let (mac, ip_id) = (self.core.mac, self.ip_id);
            match request.reply(|buf| udp_reply::write_reply(buf, &peer, mac, ip_id, &[&header, chunk])) {
                true => self.report.replies += 1,
                false => self.report.replies_dropped += 1,
            }
        }
        self.cycles.record(crate::tsc::ticks().wrapping_sub(t0).max(1)).ok();
    }
}

impl Core {
    fn run(
        self,
        mut sockets: CoreSockets,
        stores: &[Store],
        stop: &AtomicBool,
    ) -> (CoreReport, Histogram<u64>, CoreSockets) {
        let mut s = Serving {
            core: &self,
            stores,
            time: Core::serve_time(Duration::ZERO),
            report: CoreReport::default(),
            cycles: Histogram::<u64>::new(3).expect("3 significant digits"),
            reply: Vec::with_capacity(2048),
            ip_id: (self.index as u16) << 12,
            reassembly: Reassembler::new(REASSEMBLY_SLOTS, REASSEMBLY_TIMEOUT_NS),
            now_ns: 0,
        };
        let mut pollfds: Vec<libc::pollfd> = sockets
            .fds()
            .into_iter()
            .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
            .collect();
        while !stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            let since_start = self.start.elapsed();
            s.time = Core::serve_time(since_start);
            s.now_ns = since_start.as_nanos() as u64;
            let served = sockets.serve(&mut |request| s.answer(request));
            if served == 0 {
                sockets.recycle_all();
                // SAFETY: `pollfds` holds this core's open sockets.
                unsafe { libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, IDLE_POLL_MS) };
                continue;
            }
            let refused = sockets.flush();
            s.report.replies -= refused;
            s.report.replies_dropped += refused;
            s.report.busy_ns += started.elapsed().as_nanos() as u64;
        }
        s.report.rx_dropped = sockets.kernel_drops();
        s.report.reassembly = s.reassembly.stats();
        s.report.cycles = Cycles::of(&s.cycles);
        (s.report, s.cycles, sockets)
    }

    /// The store's clock `since_start` after the server started (one clock read per round
    /// serves both it and the reassembler).
    fn serve_time(since_start: Duration) -> ServeTime {
        ServeTime {
            server_s: since_start.as_secs() as u32 + 1,
            unix_s: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        }
    }
}

fn text_report(r: &KvsReport) -> String {
    let s = &r.service;
    let mut out = format!(
        "kvs: {:.1} s, {} steering{}: {} requests ({:.0}/s), {} get keys ({} hits), {} stores ({} stored), {} deletes ({} found), {} malformed, {} short datagrams\n",
        r.seconds,
        r.steer,
        if r.nic_hash { " with the NIC's hash" } else { "" },
        s.requests,
        s.requests as f64 / r.seconds.max(1e-9),
        s.get_keys,
        s.get_hits,
        s.stores,
        s.stored,
        s.deletes,
        s.deleted,
        s.malformed_total(),
        s.short_datagrams,
    );
    let malformed: Vec<String> =
        r.malformed.iter().filter(|(_, n)| *n > 0).map(|(m, n)| format!("{m} {n}")).collect();
    if !malformed.is_empty() {
        out += &format!("  malformed: {}\n", malformed.join(", "));
    }
    out += &format!(
        "  cycles per request: median {}, p90 {}, p99 {}, mean {:.0} ({} requests)\n",
        r.cycles.p50, r.cycles.p90, r.cycles.p99, r.cycles.mean, r.cycles.requests
    );
    for (i, c) in r.cores.iter().enumerate() {
        out += &format!(
            "  core {i}: {} requests, {} replies ({} dropped), {} frames not served (not UDP/IPv4, another port), cycles median {} p90 {}\n",
            c.service.requests,
            c.replies,
            c.replies_dropped,
            c.frame_drops.iter().sum::<u64>(),
            c.cycles.p50,
            c.cycles.p90
        );
    }
    out += &format!(
        "  xdp: {} steered by key, {} by flow, {} fragments by datagram, {} passed to the kernel, {} too long for the sockets' buffers; {} dropped by the kernel (rings full)\n",
        r.xdp.by_key, r.xdp.by_flow, r.xdp.fragments, r.xdp.passed, r.xdp.too_long, r.rx_dropped
    );
    if r.fragments.fragments > 0 {
        let dropped: Vec<String> =
            r.fragment_drops.iter().filter(|(_, n)| *n > 0).map(|(m, n)| format!("{m} {n}")).collect();
        out += &format!(
            "  fragments: {} received, {} requests put together{}\n",
            r.fragments.fragments,
            r.fragments.datagrams,
            if dropped.is_empty() { String::new() } else { format!("; dropped: {}", dropped.join(", ")) }
        );
    }
    if let Some(runs) = r.xdp.runs {
        out += &format!("  xdp program: {} runs, {:.0} ns each\n", runs.runs, runs.ns_per_run);
    }
    if s.nic_hash_checked > 0 {
        out += &format!("  NIC hash: {} checked, {} different\n", s.nic_hash_checked, s.nic_hash_mismatched);
    }
    for (i, p) in r.partitions.iter().enumerate() {
        out += &format!(
            "  partition {i}: {} evicted, {} segments reclaimed, {} expired, {} overflow buckets\n",
            p.evicted, p.reclaimed, p.expired, p.overflow_buckets
        );
    }
    out
}
