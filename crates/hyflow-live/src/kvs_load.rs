//! `hyflow kvs-load`: FlexKVS's workload (FlexNIC §3.3) against a memcached UDP server, from
//! many client ports over the kernel's UDP sockets — open loop at a rate, or closed loop with
//! a number of requests outstanding per client — reporting throughput, loss, GET hits and
//! latency percentiles (each request's send to its reply, matched by the frame header's
//! request id).

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use serde::Serialize;

use hyflow::kvs::workload::{KvsWorkload, Op};

/// Options of `hyflow kvs-load`.
#[derive(Args, Debug)]
pub struct KvsLoadArgs {
    /// The server's IPv4 address.
    #[arg(long, value_name = "IP")]
    pub server: std::net::Ipv4Addr,
    /// Its UDP port.
    #[arg(long, default_value_t = hyflow::kvs::memcached::PORT)]
    pub port: u16,
    /// Keys in the key space.
    #[arg(long, default_value_t = 100_000)]
    pub keys: u64,
    /// Bytes of a key.
    #[arg(long, default_value_t = 32)]
    pub key_bytes: usize,
    /// Bytes of a value.
    #[arg(long, default_value_t = 64)]
    pub value_bytes: usize,
    /// Zipf exponent of key popularity (0: uniform).
    #[arg(long, default_value_t = 0.9)]
    pub zipf: f64,
    /// Share of GETs (the rest are SETs).
    #[arg(long, default_value_t = 0.9)]
    pub get_share: f64,
    /// Client sockets (source ports), dealt over the threads.
    #[arg(long, default_value_t = 16)]
    pub clients: usize,
    /// Sending threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Requests per second in all (open loop); without it, closed loop: --outstanding per
    /// client.
    #[arg(long, value_name = "RPS")]
    pub rate: Option<f64>,
    /// Requests in flight per client in closed loop.
    #[arg(long, default_value_t = 4)]
    pub outstanding: usize,
    /// Seconds measured (after the warm-up).
    #[arg(long, default_value_t = 5.0)]
    pub duration: f64,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// SET every key once before the warm-up, so that GETs hit.
    #[arg(long)]
    pub populate: bool,
    /// A request without a reply after this many milliseconds is lost.
    #[arg(long, default_value_t = 200)]
    pub timeout_ms: u64,
    /// Seed of the request stream.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Write --count request frames to this pcap instead of sending (after --populate, if
    /// given): for `hyflow send` to put on the wire at rates kernel sockets cannot reach.
    /// Their source is --frames-source, from one port per client; their replies go to that
    /// address's MAC, which no interface has, so the sender's kernel drops them at once.
    #[arg(long, value_name = "FILE")]
    pub frames: Option<std::path::PathBuf>,
    /// Requests in --frames.
    #[arg(long, default_value_t = 100_000)]
    pub count: u64,
    /// Source address of --frames' requests.
    #[arg(long, default_value = "10.254.0.2", value_name = "IP")]
    pub frames_source: std::net::Ipv4Addr,
}

/// What a run measured (after the warm-up).
#[derive(Clone, Debug, Default, Serialize)]
pub struct LoadReport {
    /// Seconds measured.
    pub seconds: f64,
    /// Requests sent.
    pub sent: u64,
    /// Replies received in time.
    pub replies: u64,
    /// Requests without a reply in time.
    pub lost: u64,
    /// Replies per second.
    pub throughput: f64,
    /// GETs answered with a value.
    pub get_hits: u64,
    /// GETs answered with none.
    pub get_misses: u64,
    /// SETs answered STORED.
    pub stored: u64,
    /// Replies that were errors.
    pub errors: u64,
    /// Latency percentiles, microseconds: p50, p90, p99, p99.9, max.
    pub latency_us: [f64; 5],
}

/// One client socket and its requests in flight, by request id.
struct Client {
    socket: UdpSocket,
    next_id: u16,
    /// Send time (ns since start) and whether a GET, by request id; `u64::MAX`: none.
    sent_ns: Vec<u64>,
    gets: Vec<bool>,
    /// Ids in flight, oldest first (for timeouts).
    in_flight: VecDeque<u16>,
}

impl Client {
    fn outstanding(&self) -> usize {
        self.in_flight.len()
    }
}

/// Runs `hyflow kvs-load`.
pub fn run(a: KvsLoadArgs) -> Result<()> {
    let workload = KvsWorkload {
        keys: a.keys,
        key_bytes: a.key_bytes,
        value_bytes: a.value_bytes,
        zipf: a.zipf,
        get_share: a.get_share,
    };
    workload.check()?;
    if a.clients == 0 || a.threads == 0 || a.threads > a.clients {
        bail!("--clients and --threads must be at least 1, with no more threads than clients");
    }
    if !(a.duration > 0.0 && a.warmup >= 0.0) {
        bail!("--duration must be above 0 and --warmup 0 or more");
    }
    if let Some(r) = a.rate {
        if !(r.is_finite() && r > 0.0) {
            bail!("--rate must be above 0");
        }
    }
    if a.outstanding == 0 || a.outstanding > 30_000 {
        bail!("--outstanding must be 1 to 30000");
    }
    let server = SocketAddr::from((a.server, a.port));
    if a.populate {
        populate(&workload, server, &a)?;
    }
    if let Some(path) = &a.frames {
        return write_frames(&workload, &a, path);
    }
    let start = Instant::now();
    let reports: Vec<Result<(LoadReport, Histogram<u64>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..a.threads)
            .map(|t| {
                let clients = (t..a.clients).step_by(a.threads).count();
                let a = &a;
                s.spawn(move || load_thread(&workload, server, a, t, clients, start))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a load thread")).collect()
    });
    let mut total = LoadReport::default();
    let mut latency = Histogram::<u64>::new(3).expect("3 significant digits");
    for r in reports {
        let (r, h) = r?;
        total.sent += r.sent;
        total.replies += r.replies;
        total.lost += r.lost;
        total.get_hits += r.get_hits;
        total.get_misses += r.get_misses;
        total.stored += r.stored;
        total.errors += r.errors;
        latency.add(&h).expect("same bounds");
    }
    total.seconds = a.duration;
    total.throughput = total.replies as f64 / a.duration;
    let us = |q: f64| latency.value_at_quantile(q) as f64 / 1000.0;
    total.latency_us = [us(0.5), us(0.9), us(0.99), us(0.999), latency.max() as f64 / 1000.0];
    if a.json {
        println!("{}", serde_json::to_string(&total)?);
    } else {
        println!(
            "kvs-load: {:.0} requests/s ({} sent, {} replies, {} lost) over {:.1} s; GET hits {} misses {}, {} stored, {} errors; latency p50 {:.1} µs p90 {:.1} p99 {:.1} p99.9 {:.1} max {:.1}",
            total.throughput,
            total.sent,
            total.replies,
            total.lost,
            total.seconds,
            total.get_hits,
            total.get_misses,
            total.stored,
            total.errors,
            total.latency_us[0],
            total.latency_us[1],
            total.latency_us[2],
            total.latency_us[3],
            total.latency_us[4],
        );
    }
    Ok(())
}

/// Writes `a.count` requests of the workload as Ethernet frames to `path`.
fn write_frames(workload: &KvsWorkload, a: &KvsLoadArgs, path: &std::path::Path) -> Result<()> {
    use hyflow::capture::{LinkType, PcapWriter};
    let mut requests = workload.requests(a.seed)?;
    let mut out = PcapWriter::create(path, LinkType::Ethernet, true)?;
    let (mut body, mut frame) = (Vec::new(), Vec::new());
    for i in 0..a.count {
        body.clear();
        // The frame header: request id, datagram 0 of 1.
        body.extend_from_slice(&(i as u16).to_be_bytes());
        body.extend_from_slice(&[0, 0, 0, 1, 0, 0]);
        workload.request(requests.next_op(), i, &mut body);
        let port = 40_000 + (i % a.clients as u64) as u16;
        udp_frame(&mut frame, a.frames_source, port, a.server, a.port, &body);
        out.write_packet(i * 1000, &frame)?;
    }
    out.finish()?;
    println!("kvs-load: {} request frames in {}", a.count, path.display());
    Ok(())
}

/// A UDP/IPv4 frame from `src:sport` (MAC 02:00:00:00:00:01, which no interface has) to
/// `dst:dport` (broadcast MAC: the server's XDP program reads frames before any MAC filter).
fn udp_frame(
    out: &mut Vec<u8>,
    src: std::net::Ipv4Addr,
    sport: u16,
    dst: std::net::Ipv4Addr,
    dport: u16,
    payload: &[u8],
) {
    let request = crate::udp_reply::Peer {
        src_mac: [0xff; 6],
        src_ip: dst.octets(),
        dst_ip: src.octets(),
        src_port: dport,
        dst_port: sport,
    };
    // A reply to a request from the server is the request from the client: the same writer.
    out.clear();
    out.resize(crate::udp_reply::REPLY_HEADERS + payload.len(), 0);
    crate::udp_reply::write_reply(out, &request, [2, 0, 0, 0, 0, 1], 0, &[payload]).expect("sized to fit");
}

fn open_client(server: SocketAddr) -> Result<Client> {
    let socket = UdpSocket::bind("0.0.0.0:0").context("a client socket")?;
    socket.connect(server).context("the server's address")?;
    socket.set_nonblocking(true)?;
    Ok(Client {
        socket,
        next_id: 0,
        sent_ns: vec![u64::MAX; 1 << 16],
        gets: vec![false; 1 << 16],
        in_flight: VecDeque::new(),
    })
}

/// Sends `body` with a frame header from `c` at `now_ns`; false if the socket refused it.
fn send(c: &mut Client, body: &[u8], get: bool, now_ns: u64, frame: &mut Vec<u8>) -> bool {
    let id = c.next_id;
    c.next_id = c.next_id.wrapping_add(1);
    frame.clear();
    frame.extend_from_slice(&id.to_be_bytes());
    frame.extend_from_slice(&[0, 0, 0, 1, 0, 0]);
    frame.extend_from_slice(body);
    if c.socket.send(frame).is_err() {
        return false;
    }
    if c.sent_ns[id as usize] != u64::MAX {
        // An id still in flight after 65,536 more requests: long lost.
        c.in_flight.retain(|&i| i != id);
    }
    c.sent_ns[id as usize] = now_ns;
    c.gets[id as usize] = get;
    c.in_flight.push_back(id);
    true
}

fn populate(workload: &KvsWorkload, server: SocketAddr, a: &KvsLoadArgs) -> Result<()> {
    let mut clients: Vec<Client> = (0..a.clients).map(|_| open_client(server)).collect::<Result<_>>()?;
    let start = Instant::now();
    let (mut next, mut done) = (0u64, 0u64);
    let mut pending: Vec<Vec<(u16, u64)>> = vec![Vec::new(); clients.len()];
    let (mut body, mut frame, mut buf) = (Vec::new(), Vec::new(), [0u8; 2048]);
    let timeout = Duration::from_millis(a.timeout_ms);
    while done < workload.keys {
        if start.elapsed() > Duration::from_secs(60) {
            bail!("populating: {done} of {} keys stored in 60 s", workload.keys);
        }
        for (i, c) in clients.iter_mut().enumerate() {
            // Resend what timed out.
            let now = start.elapsed().as_nanos() as u64;
            let stale: Vec<(u16, u64)> = pending[i]
                .iter()
                .copied()
                .filter(|&(id, _)| now.saturating_sub(c.sent_ns[id as usize]) > timeout.as_nanos() as u64)
                .collect();
            for (id, key) in stale {
                pending[i].retain(|&(p, _)| p != id);
                c.sent_ns[id as usize] = u64::MAX;
                body.clear();
                workload.request(Op::Set(key), 0, &mut body);
                let sent_id = c.next_id;
                if send(c, &body, false, now, &mut frame) {
                    pending[i].push((sent_id, key));
                }
            }
            while pending[i].len() < a.outstanding && next < workload.keys {
                body.clear();
                workload.request(Op::Set(next), 0, &mut body);
                let id = c.next_id;
                if !send(c, &body, false, now, &mut frame) {
                    break;
                }
                pending[i].push((id, next));
                next += 1;
            }
            while let Ok(n) = c.socket.recv(&mut buf) {
                if n < 8 {
                    continue;
                }
                let id = u16::from_be_bytes([buf[0], buf[1]]);
                if let Some(at) = pending[i].iter().position(|&(p, _)| p == id) {
                    if buf[8..n].starts_with(b"STORED") {
                        pending[i].swap_remove(at);
                        c.sent_ns[id as usize] = u64::MAX;
                        done += 1;
                    }
                }
            }
        }
    }
    Ok(())
}

fn load_thread(
    workload: &KvsWorkload,
    server: SocketAddr,
    a: &KvsLoadArgs,
    thread: usize,
    clients: usize,
    start: Instant,
) -> Result<(LoadReport, Histogram<u64>)> {
    let mut requests = workload.requests(a.seed.wrapping_add(thread as u64))?;
    let mut cs: Vec<Client> = (0..clients).map(|_| open_client(server)).collect::<Result<_>>()?;
    let mut latency = Histogram::<u64>::new(3).expect("3 significant digits");
    let mut r = LoadReport::default();
    let warm_ns = (a.warmup * 1e9) as u64;
    let end_ns = warm_ns + (a.duration * 1e9) as u64;
    let timeout_ns = a.timeout_ms * 1_000_000;
    let interval_ns = a.rate.map(|rate| (a.threads as f64 * 1e9 / rate) as u64);
    let mut next_send = 0u64;
    let mut turn = 0usize;
    let (mut body, mut frame, mut buf) = (Vec::new(), Vec::new(), [0u8; 2048]);
    let mut version = 0u64;
    loop {
        let now = start.elapsed().as_nanos() as u64;
        if now >= end_ns + timeout_ns {
            break;
        }
        let sending = now < end_ns;
        let measuring = |t: u64| t >= warm_ns && t < end_ns;
        // Send: at the rate (open loop), or to refill each client's window (closed loop).
        match interval_ns {
            Some(interval) => {
                let mut burst = 0;
                while sending && next_send <= now && burst < 64 {
                    let c = &mut cs[turn % clients];
                    turn += 1;
                    let op = requests.next_op();
                    body.clear();
                    version += 1;
                    workload.request(op, version, &mut body);
                    if send(c, &body, matches!(op, Op::Get(_)), now, &mut frame) && measuring(now) {
                        r.sent += 1;
                    }
                    next_send += interval.max(1);
                    burst += 1;
                }
            }
            None => {
                for c in cs.iter_mut() {
                    while sending && c.outstanding() < a.outstanding {
                        let op = requests.next_op();
                        body.clear();
                        version += 1;
                        workload.request(op, version, &mut body);
                        if !send(c, &body, matches!(op, Op::Get(_)), now, &mut frame) {
                            break;
                        }
                        if measuring(now) {
                            r.sent += 1;
                        }
                    }
                }
            }
        }
        // Receive what came back; time out what is too old.
        let now = start.elapsed().as_nanos() as u64;
        for c in cs.iter_mut() {
            loop {
                match c.socket.recv(&mut buf) {
                    Ok(n) if n >= 8 => {
                        let id = u16::from_be_bytes([buf[0], buf[1]]) as usize;
                        let sent = c.sent_ns[id];
                        // Only a reply's first datagram counts (the workload's fit in one).
                        if sent == u64::MAX || buf[2..4] != [0, 0] {
                            continue;
                        }
                        c.sent_ns[id] = u64::MAX;
                        if let Some(at) = c.in_flight.iter().position(|&i| i as usize == id) {
                            c.in_flight.remove(at);
                        }
                        if !measuring(sent) {
                            continue;
                        }
                        r.replies += 1;
                        latency.record((now - sent).max(1)).ok();
                        let reply = &buf[8..n];
                        if reply.starts_with(b"VALUE") {
                            r.get_hits += 1;
                        } else if reply.starts_with(b"END") {
                            r.get_misses += 1;
                        } else if reply.starts_with(b"STORED") {
                            r.stored += 1;
                        } else {
                            r.errors += 1;
                        }
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e).context("receiving"),
                }
            }
            while let Some(&id) = c.in_flight.front() {
                let sent = c.sent_ns[id as usize];
                if sent != u64::MAX && now.saturating_sub(sent) < timeout_ns {
                    break;
                }
                c.in_flight.pop_front();
                if sent != u64::MAX {
                    c.sent_ns[id as usize] = u64::MAX;
                    if measuring(sent) {
                        r.lost += 1;
                    }
                }
            }
        }
        if let Some(interval) = interval_ns {
            // Far from the next send: yield the CPU (the server may share it).
            let now = start.elapsed().as_nanos() as u64;
            if next_send > now + 200_000 && interval > 200_000 {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }
    // What is still in flight after the run is lost.
    for c in &cs {
        for &id in &c.in_flight {
            let sent = c.sent_ns[id as usize];
            if sent != u64::MAX && sent >= warm_ns && sent < end_ns {
                r.lost += 1;
            }
        }
    }
    Ok((r, latency))
}
