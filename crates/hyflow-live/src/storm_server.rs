//! `hyflow storm` (feature `afxdp`): FlexStorm's counting node (FlexNIC §4, Figure 6) on a
//! real interface. The XDP program `bpf/storm.bpf.c` either demultiplexes each tuple into its
//! worker's queue and acknowledges it from the NIC (`--demux nic`, §4.1), or hands every tuple
//! to a demultiplexer thread over AF_XDP (`--demux software`, the baseline), which
//! acknowledges it and moves it to the worker's queue. Workers count user names over a
//! sliding window (`hyflow::storm::topology`) and emit their counts to the ranker (the main
//! thread), which reports the top n.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use aya::maps::{Array, MapData, RingBuf, XskMap};
use aya::Ebpf;
use hdrhistogram::Histogram;
use serde::Serialize;

use hyflow::storm::dccp::{self, NotATuple, IP_DCCP};
use hyflow::storm::topology::{top_n, Counter, WINDOW_SLOTS};

use crate::afxdp::AfXdp;
use crate::args::XdpModeArg;
use crate::interfaces::Interface;
use crate::pmd::monotonic_ns;
use crate::port_io::{PortIo, RxBatch};
use crate::storm_args::{Demux, StormArgs};
use crate::tuple_queue::TupleQueue;
use crate::udp_reply;

/// The program, compiled from bpf/storm.bpf.c by the build.
static PROGRAM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/storm.bpf.o"));

/// Workers the program has queues for (its `MAX_WORKERS`).
const MAX_WORKERS: u16 = 8;
/// Slots of a worker's software queue.
const QUEUE_SLOTS: usize = 16_384;
/// Tuples a worker takes from a queue before looking at the clock again.
const WORKER_BATCH: usize = 256;

/// `struct storm_config` of the program.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct BpfStormConfig {
    addr: u32,
    port: u32,
    nic: u32,
    workers: u32,
}

// SAFETY: four u32, no padding.
unsafe impl aya::Pod for BpfStormConfig {}

/// A worker's emission to the ranker: its index, and each name's count over its window.
type Emission = (u16, Vec<(Box<[u8]>, u64)>);

/// A DCCP frame read back: the sender's MAC, the addresses (source, destination), the segment.
struct DccpFrame<'a> {
    src_mac: [u8; 6],
    addrs: ([u8; 4], [u8; 4]),
    segment: &'a [u8],
}

/// `struct tuple_record`'s fixed part: reception time, worker, length, padding.
const RECORD_HEADER: usize = 16;

/// Latency percentiles, microseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Percentiles {
    /// Tuples measured.
    pub count: u64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

impl Percentiles {
    fn of_ns(h: &Histogram<u64>) -> Percentiles {
        let us = |v: u64| v as f64 / 1000.0;
        Percentiles {
            count: h.len(),
            p50: us(h.value_at_quantile(0.5)),
            p90: us(h.value_at_quantile(0.9)),
            p99: us(h.value_at_quantile(0.99)),
            max: us(h.max()),
            mean: h.mean() / 1000.0,
        }
    }
}

/// What a worker did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WorkerReport {
    /// Tuples counted.
    pub tuples: u64,
    /// Of them, from the NIC's queue.
    pub from_nic: u64,
    /// Of them, from the software demultiplexer's queue.
    pub from_software: u64,
    /// Tuples whose header named another worker (a bug of the demultiplexer if not 0).
    pub misdelivered: u64,
    /// Input queueing: the tuple's reception (the XDP program's clock) to its worker taking it.
    pub input_us: Percentiles,
    /// Processing: mean nanoseconds a worker spent per tuple (counting it, taking it from
    /// the queue).
    pub processing_ns: f64,
    /// First and last tuple's reception (CLOCK_MONOTONIC ns; 0: none).
    pub first_ns: u64,
    /// Last.
    pub last_ns: u64,
}

/// What the software demultiplexer did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DemuxReport {
    /// Tuples it moved to a worker's queue.
    pub tuples: u64,
    /// Acknowledgements it sent.
    pub acks: u64,
    /// Acknowledgements the transmit ring had no room for.
    pub acks_dropped: u64,
    /// Segments that were no tuple, by [`NotATuple::ALL`]'s order.
    pub not_tuple: [u64; 4],
    /// Frames that were no DCCP over IPv4.
    pub not_dccp: u64,
    /// Tuples for a worker that does not exist.
    pub no_worker: u64,
    /// Tuples dropped for a full worker queue.
    pub queue_full: u64,
    /// Mean nanoseconds the thread spent per frame it was handed (receiving its batch,
    /// parsing, acknowledging, queueing): what a core pays per tuple to demultiplex in
    /// software.
    pub ns_per_frame: f64,
}

/// The XDP program's counters.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct XdpStormCounts {
    /// Tuples it put in a worker's queue.
    pub to_worker: u64,
    /// Acknowledgements it sent.
    pub acked: u64,
    /// Frames it handed to the software demultiplexer.
    pub to_software: u64,
    /// Of them, because the worker's queue was full.
    pub queue_full: u64,
    /// Frames it passed to the kernel.
    pub passed: u64,
    /// Frames for the software demultiplexer the kernel dropped (its receive ring full).
    pub rx_dropped: u64,
    /// The program's runs and mean time per run (`--xdp-stats`).
    pub runs: Option<crate::app_program::ProgramRuns>,
}

/// What `hyflow storm` did, printed when it stops.
#[derive(Debug, Serialize)]
pub struct StormReport {
    /// Seconds it ran.
    pub seconds: f64,
    /// `nic` or `software`.
    pub demux: &'static str,
    /// Tuples counted by all workers.
    pub tuples: u64,
    /// Tuples counted per second between the first tuple's reception and the last one's.
    pub tuples_per_second: f64,
    /// Input queueing over all workers.
    pub input_us: Percentiles,
    /// Each worker.
    pub workers: Vec<WorkerReport>,
    /// The software demultiplexer.
    pub demux_thread: DemuxReport,
    /// The XDP program.
    pub xdp: XdpStormCounts,
    /// The top users over the last window, with their counts.
    pub top: Vec<(String, u64)>,
}

/// Runs `hyflow storm` until SIGINT or SIGTERM, then prints its report.
pub fn run(a: StormArgs) -> Result<()> {
    if !crate::interfaces::check_privileges()? {
        bail!("hyflow storm loads an XDP program: it needs CAP_BPF (or CAP_SYS_ADMIN)");
    }
    if a.workers == 0 || a.workers > MAX_WORKERS {
        bail!("--workers must be 1 to {MAX_WORKERS}, not {}", a.workers);
    }
    if a.window_ms < WINDOW_SLOTS as u64 || a.emit_ms == 0 {
        bail!("--window-ms must be at least {WINDOW_SLOTS} and --emit-ms at least 1");
    }
    let iface = Interface::lookup(&a.iface, 1)?;
    let addr = crate::interfaces::ipv4_of(&a.iface)?;
    let mac = crate::interfaces::mac_of(&a.iface)?;
    let _claim = iface.claim()?;
    let mut ebpf = crate::xdp_meta::loader().load(PROGRAM).context("loading the XDP program")?;
    let config = BpfStormConfig {
        addr: u32::from_ne_bytes(addr.octets()),
        port: a.port as u32,
        nic: (a.demux == Demux::Nic) as u32,
        workers: a.workers as u32,
    };
    Array::try_from(ebpf.map_mut("config").ok_or_else(|| anyhow!("no config map"))?)?
        .set(0, config, 0)
        .context("the config map")?;
    let io = AfXdp::open_sockets(&iface, iface.max_frame(), 1).context(iface.name.clone())?;
    let fds = io.rx_fds();
    {
        let mut xsks = XskMap::try_from(ebpf.map_mut("xsks").ok_or_else(|| anyhow!("no xsks map"))?)?;
        for (q, fd) in fds.iter().enumerate() {
            // SAFETY: the sockets live until after the program is dropped (below).
            let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(*fd) };
            xsks.set(q as u32, fd, 0).context("registering a socket")?;
        }
    }
    let mut rings: Vec<Option<RingBuf<MapData>>> = Vec::new();
    for w in 0..a.workers {
        let name = format!("queue{w}");
        let map = ebpf.take_map(&name).ok_or_else(|| anyhow!("the program has no {name}"))?;
        rings.push(Some(RingBuf::try_from(map).with_context(|| name.clone())?));
    }
    // A frame sent back out of a veth in native mode (XDP_TX: the NIC's acknowledgements)
    // reaches the peer only if the peer has an XDP program or GRO on, which the server
    // cannot see to: auto takes generic mode there, as the switch does.
    let mode = match a.app.xdp_mode {
        XdpModeArg::Auto if a.demux == Demux::Nic && iface.veth => XdpModeArg::Generic,
        m => m,
    };
    let native = crate::app_program::attach(&mut ebpf, "hyflow_storm", &iface, mode)?;
    let run_stats = if a.app.xdp_stats { Some(crate::app_program::RunStats::enable()?) } else { None };
    let queues: Arc<Vec<TupleQueue>> =
        Arc::new((0..a.workers).map(|_| TupleQueue::new(QUEUE_SLOTS)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    let cpus = crate::forwarder::allowed_cpus();
    let cpu = |i: usize| (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
    let (emit_tx, emissions) = mpsc::channel::<Emission>();
    let slot_ns = a.window_ms * 1_000_000 / WINDOW_SLOTS as u64;
    let workers: Vec<_> = (0..a.workers)
        .map(|w| {
            let (queues, stop, emit) = (Arc::clone(&queues), Arc::clone(&stop), emit_tx.clone());
            let ring = rings[w as usize].take();
            let at = cpu(w as usize + 1);
            let emit_ns = a.emit_ms * 1_000_000;
            std::thread::Builder::new()
                .name(format!("storm-worker{w}"))
                .spawn(move || {
                    if let Some(c) = at {
                        crate::forwarder::pin_to(c);
                    }
                    worker(w, ring, &queues[w as usize], (slot_ns, emit_ns), &stop, &emit)
                })
                .context("starting a worker")
        })
        .collect::<Result<_>>()?;
    drop(emit_tx);
    let io = Arc::new(Mutex::new(io));
    let demux = {
        let (io, queues, stop) = (Arc::clone(&io), Arc::clone(&queues), Arc::clone(&stop));
        let at = cpu(0);
        let max_frame = iface.max_frame();
        std::thread::Builder::new()
            .name("storm-demux".into())
            .spawn(move || {
                if let Some(c) = at {
                    crate::forwarder::pin_to(c);
                }
                demultiplex(&io, &queues, fds, (mac, max_frame), &stop)
            })
            .context("starting the demultiplexer")?
    };
    println!(
        "hyflow storm: tuples on {addr} DCCP port {} ({}, {} XDP), {} worker(s), {} demultiplexing; ready",
        a.port,
        a.iface,
        if native { "native" } else { "generic" },
        a.workers,
        a.demux.name()
    );
    use std::io::Write;
    std::io::stdout().flush().ok();
    let start = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let demux_report = demux.join().map_err(|_| anyhow!("the demultiplexer panicked"))?;
    let joined: Vec<(WorkerReport, Histogram<u64>)> = workers
        .into_iter()
        .map(|t| t.join().map_err(|_| anyhow!("a worker panicked")))
        .collect::<Result<_>>()?;
    // The ranker: each worker's last emission (made as it stopped) holds its names' counts
    // over the last window.
    let mut last: Vec<Vec<(Box<[u8]>, u64)>> = vec![Vec::new(); a.workers as usize];
    for (w, e) in emissions.try_iter() {
        last[w as usize] = e;
    }
    let top = top_n(last.into_iter().flatten().collect(), a.top)
        .into_iter()
        .map(|(n, c)| (String::from_utf8_lossy(&n).into_owned(), c))
        .collect();
    let mut xdp = xdp_counts(&ebpf, run_stats.is_some())?;
    xdp.rx_dropped = io.lock().map_err(|_| anyhow!("port lock"))?.rx_dropped();
    drop(ebpf);
    let mut input = Histogram::<u64>::new(3).expect("3 significant digits");
    for (_, h) in &joined {
        input.add(h).expect("same bounds");
    }
    let reports: Vec<WorkerReport> = joined.into_iter().map(|(r, _)| r).collect();
    let tuples: u64 = reports.iter().map(|r| r.tuples).sum();
    let first = reports.iter().filter(|r| r.tuples > 0).map(|r| r.first_ns).min().unwrap_or(0);
    let last_ns = reports.iter().map(|r| r.last_ns).max().unwrap_or(0);
    let span = last_ns.saturating_sub(first) as f64 / 1e9;
    let report = StormReport {
        seconds: start.elapsed().as_secs_f64(),
        demux: a.demux.name(),
        tuples,
        tuples_per_second: if span > 0.0 { tuples as f64 / span } else { 0.0 },
        input_us: Percentiles::of_ns(&input),
        workers: reports,
        demux_thread: demux_report,
        xdp,
        top,
    };
    eprintln!("hyflow storm: stopped by a signal; detached");
    crate::app_program::print_report(a.app.json, &report, text_report)
}

fn xdp_counts(ebpf: &Ebpf, run_stats: bool) -> Result<XdpStormCounts> {
    let s = crate::app_program::per_cpu_sums(ebpf, "stats", 5)?;
    let runs = if run_stats { Some(crate::app_program::runs(ebpf, "hyflow_storm")?) } else { None };
    Ok(XdpStormCounts {
        to_worker: s[0],
        acked: s[1],
        to_software: s[2],
        queue_full: s[3],
        passed: s[4],
        rx_dropped: 0,
        runs,
    })
}

/// A counting worker: takes tuples from the NIC's queue (if any) and the software
/// demultiplexer's, counts them, emits its counts every `emit_ns` and once more when stopped.
fn worker(
    index: u16,
    mut ring: Option<RingBuf<MapData>>,
    queue: &TupleQueue,
    (slot_ns, emit_ns): (u64, u64),
    stop: &AtomicBool,
    emit: &mpsc::Sender<Emission>,
) -> (WorkerReport, Histogram<u64>) {
    let mut counter = Counter::new(slot_ns);
    let mut input = Histogram::<u64>::new(3).expect("3 significant digits");
    let mut r = WorkerReport::default();
    let mut busy_ns = 0u64;
    let mut next_emit = monotonic_ns() + emit_ns;
    fn take(
        (counter, input, r): (&mut Counter, &mut Histogram<u64>, &mut WorkerReport),
        received_ns: u64,
        data: &[u8],
        now: u64,
    ) {
        counter.count(data, now);
        if received_ns > 0 {
            input.record(now.saturating_sub(received_ns).max(1)).ok();
            if r.first_ns == 0 {
                r.first_ns = received_ns;
            }
            r.last_ns = r.last_ns.max(received_ns);
        }
        r.tuples += 1;
    }
    loop {
        let now = monotonic_ns();
        let mut got = 0;
        if let Some(ring) = &mut ring {
            while got < WORKER_BATCH {
                let Some(item) = ring.next() else { break };
                if item.len() >= RECORD_HEADER {
                    let word = |i: usize| u64::from_ne_bytes(item[i..i + 8].try_into().expect("8 bytes"));
                    let received = word(0);
                    let worker = u16::from_ne_bytes([item[8], item[9]]);
                    let len = u16::from_ne_bytes([item[10], item[11]]) as usize;
                    let data = &item[RECORD_HEADER..(RECORD_HEADER + len).min(item.len())];
                    r.misdelivered += (worker != index) as u64;
                    r.from_nic += 1;
                    take((&mut counter, &mut input, &mut r), received, data, now);
                }
                got += 1;
            }
        }
        while got < 2 * WORKER_BATCH
            && queue.pop(|t| {
                r.from_software += 1;
                take((&mut counter, &mut input, &mut r), t.received_ns, t.data(), now);
            })
        {
            got += 1;
        }
        let after = monotonic_ns();
        if got > 0 {
            busy_ns += after - now;
        }
        if after >= next_emit {
            let mut out = Vec::new();
            counter.emit(after, &mut out);
            let _ = emit.send((index, out));
            next_emit = after + emit_ns;
        }
        if got == 0 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            // Sleeping, not spinning: on a host with fewer CPUs than threads (this one), a
            // spinning worker takes the CPU the sender or the demultiplexer needs.
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    let mut out = Vec::new();
    counter.emit(monotonic_ns(), &mut out);
    let _ = emit.send((index, out));
    r.processing_ns = if r.tuples > 0 { busy_ns as f64 / r.tuples as f64 } else { 0.0 };
    r.input_us = Percentiles::of_ns(&input);
    (r, input)
}

/// The software demultiplexer: every tuple the program hands over is moved to its worker's
/// queue and acknowledged (the same segment the NIC crafts, `dccp::write_ack`).
fn demultiplex(
    io: &Mutex<AfXdp>,
    queues: &[TupleQueue],
    fds: Vec<i32>,
    (mac, max_frame): ([u8; 6], usize),
    stop: &AtomicBool,
) -> DemuxReport {
    let mut r = DemuxReport::default();
    let mut batch = RxBatch::new(max_frame);
    let mut ack = Vec::with_capacity(dccp::ACK_HEADER);
    let mut pollfds: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    let mut ip_id = 0u16;
    let (mut busy_ns, mut frames) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let started = monotonic_ns();
        batch.clear();
        {
            let Ok(mut port) = io.lock() else { break };
            for s in 0..fds.len() {
                if port.receive(s, &mut batch).is_err() {
                    return r;
                }
            }
        }
        if batch.is_empty() {
            // SAFETY: `pollfds` holds the demultiplexer's open sockets.
            unsafe { libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, 20) };
            continue;
        }
        let now = monotonic_ns();
        let Ok(mut port) = io.lock() else { break };
        for i in 0..batch.len() {
            let frame = batch.frame(i);
            let Some(DccpFrame { src_mac, addrs: (src, dst), segment }) = dccp_segment(frame) else {
                r.not_dccp += 1;
                continue;
            };
            let tuple = match dccp::parse(segment) {
                Ok(t) => t,
                Err(why) => {
                    r.not_tuple[NotATuple::ALL.iter().position(|&n| n == why).expect("listed")] += 1;
                    continue;
                }
            };
            // A tuple is acknowledged once a worker's queue holds it (at most once: one
            // dropped here is not acknowledged, and the sender may send it again).
            let Some(queue) = queues.get(tuple.worker as usize) else {
                r.no_worker += 1;
                continue;
            };
            if !queue.push(batch.handed_ns(i).unwrap_or(now), tuple.data) {
                r.queue_full += 1;
                continue;
            }
            r.tuples += 1;
            ack.clear();
            dccp::write_ack(&mut ack, (src, dst), &tuple);
            ip_id = ip_id.wrapping_add(1);
            let sent = port.send_with(&mut |buf: &mut [u8]| {
                udp_reply::write_ipv4(buf, (src_mac, mac), (dst, src), IP_DCCP, ip_id, &ack).map(|n| 0..n)
            });
            match sent {
                Ok(()) => r.acks += 1,
                Err(_) => r.acks_dropped += 1,
            }
        }
        port.flush();
        busy_ns += monotonic_ns() - started;
        frames += batch.len() as u64;
    }
    r.ns_per_frame = if frames > 0 { busy_ns as f64 / frames as f64 } else { 0.0 };
    r
}

/// A frame's sender MAC, addresses and DCCP segment, if it is DCCP over IPv4.
fn dccp_segment(frame: &[u8]) -> Option<DccpFrame<'_>> {
    if frame.len() < 34 || frame[12..14] != [0x08, 0x00] || frame[14] >> 4 != 4 || frame[23] != IP_DCCP {
        return None;
    }
    let ihl = (frame[14] & 0x0f) as usize * 4;
    let total = u16::from_be_bytes([frame[16], frame[17]]) as usize;
    if ihl < 20 || total < ihl || 14 + total > frame.len() {
        return None;
    }
    Some(DccpFrame {
        src_mac: frame[6..12].try_into().ok()?,
        addrs: (frame[26..30].try_into().ok()?, frame[30..34].try_into().ok()?),
        segment: &frame[14 + ihl..14 + total],
    })
}

fn text_report(r: &StormReport) -> String {
    let mut out = format!(
        "storm: {} demultiplexing: {} tuples, {:.0} tuples/s; input queueing p50 {:.1} µs p99 {:.1} max {:.1}\n",
        r.demux, r.tuples, r.tuples_per_second, r.input_us.p50, r.input_us.p99, r.input_us.max
    );
    for (i, w) in r.workers.iter().enumerate() {
        out += &format!(
            "  worker {i}: {} tuples ({} from the NIC, {} from software, {} misdelivered), {:.0} ns each\n",
            w.tuples, w.from_nic, w.from_software, w.misdelivered, w.processing_ns
        );
    }
    let d = &r.demux_thread;
    out += &format!(
        "  demultiplexer thread: {} tuples, {} acks ({} dropped), {} not tuples, {} not DCCP, {} for no worker, {} queue full\n",
        d.tuples,
        d.acks,
        d.acks_dropped,
        d.not_tuple.iter().sum::<u64>(),
        d.not_dccp,
        d.no_worker,
        d.queue_full
    );
    if d.ns_per_frame > 0.0 {
        out += &format!("  demultiplexer thread: {:.0} ns per frame\n", d.ns_per_frame);
    }
    if let Some(runs) = r.xdp.runs {
        out += &format!("  xdp program: {} runs, {:.0} ns each\n", runs.runs, runs.ns_per_run);
    }
    out += &format!(
        "  xdp: {} tuples to workers, {} acked, {} to software ({} for a full queue; {} dropped by the kernel, ring full), {} passed to the kernel\n",
        r.xdp.to_worker, r.xdp.acked, r.xdp.to_software, r.xdp.queue_full, r.xdp.rx_dropped, r.xdp.passed
    );
    out += "  top users:";
    for (name, count) in &r.top {
        out += &format!(" {name} {count},");
    }
    out.pop();
    out.push('\n');
    out
}
