//! `hyflow storm` on a real interface (root, feature afxdp: the test makes a network namespace
//! and a veth pair and removes them, even when it fails): a tweet stream from `storm-load`
//! sent by `hyflow send`, with the XDP program demultiplexing and acknowledging tuples and
//! with the software demultiplexer. Every tuple is acknowledged exactly once with a valid DCCP
//! ACK (parsed from the wire: checksum, type, ports swapped, the tuple's sequence number);
//! every tuple reaches the worker its header names, and the ranking equals the exact top users
//! of the stream; tuples the NIC cannot take (a worker it has no queue for, short sequence
//! numbers) fall to the software demultiplexer, which counts them.
#![cfg(feature = "afxdp")]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

use hyflow::storm::dccp;
use hyflow::storm::workload::TweetStream;

mod live_support;
use live_support::{ok, root_or_skip, AppHost};

const SERVER: [u8; 4] = [10, 93, 0, 1];
const SOURCE: [u8; 4] = [10, 254, 0, 2];
const TUPLES: u64 = 3000;
const CONNECTIONS: u16 = 4;

fn setup(tag: &str) -> AppHost {
    let id = std::process::id() % 100_000;
    let host = AppHost::new(format!("hyst{id}{tag}"), format!("hyst{id}{tag}c"), "st0", "10.93.0.1/24");
    // The acknowledgements go to the tuples' source MAC, which is no interface's: the packet
    // socket below sees them only in promiscuous mode.
    ok(&["ip", "link", "set", &host.host_if, "promisc", "on"]);
    host
}

/// A packet socket on `iface` reading every frame (root).
struct Capture(i32);

impl Capture {
    fn open(iface: &str) -> Capture {
        let index = std::ffi::CString::new(iface).unwrap();
        // SAFETY: plain socket calls on a socket this struct owns.
        unsafe {
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, (libc::ETH_P_ALL as u16).to_be() as i32);
            assert!(fd >= 0, "packet socket");
            let mut addr: libc::sockaddr_ll = std::mem::zeroed();
            addr.sll_family = libc::AF_PACKET as u16;
            addr.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
            addr.sll_ifindex = libc::if_nametoindex(index.as_ptr()) as i32;
            let r = libc::bind(
                fd,
                &addr as *const _ as *const libc::sockaddr,
                size_of::<libc::sockaddr_ll>() as u32,
            );
            assert_eq!(r, 0, "bind");
            let buf: libc::c_int = 16 << 20;
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                &buf as *const _ as *const libc::c_void,
                4,
            );
            let tv = libc::timeval { tv_sec: 0, tv_usec: 200_000 };
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const libc::c_void,
                size_of::<libc::timeval>() as u32,
            );
            Capture(fd)
        }
    }

    /// Frames received until none came for 200 ms, or `wait` passed.
    fn frames(&self, wait: Duration) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 2048];
        let end = Instant::now() + wait;
        let mut quiet_since = Instant::now();
        while Instant::now() < end {
            // SAFETY: reads into `buf`, its length given.
            let n = unsafe { libc::recv(self.0, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
            if n > 0 {
                out.push(buf[..n as usize].to_vec());
                quiet_since = Instant::now();
            } else if quiet_since.elapsed() > Duration::from_millis(600) {
                break;
            }
        }
        out
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        // SAFETY: our socket.
        unsafe { libc::close(self.0) };
    }
}

/// A DCCP frame from the source to the server (for the cases storm-load does not make).
fn frame(segment: &[u8]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 8, 0, 0x45, 0]);
    f.extend_from_slice(&((20 + segment.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 64, dccp::IP_DCCP, 0, 0]);
    f.extend_from_slice(&SOURCE);
    f.extend_from_slice(&SERVER);
    let mut sum: u32 = f[14..34].chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]]) as u32).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f.extend_from_slice(segment);
    f
}

/// Writes a pcap of `frames` (microsecond timestamps).
fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for f in frames {
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    std::fs::write(path, out).unwrap();
}

fn run(demux: &str, tag: &str) {
    let mut setup = setup(tag);
    let dir = std::env::temp_dir().join(format!("hyflow-storm-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tuples = dir.join("tuples.pcap");
    let hyflow = env!("CARGO_BIN_EXE_hyflow");
    ok(&[
        hyflow,
        "storm-load",
        "--frames",
        tuples.to_str().unwrap(),
        "--count",
        &TUPLES.to_string(),
        "--server",
        "10.93.0.1",
        "--workers",
        "2",
        "--users",
        "500",
        "--connections",
        &CONNECTIONS.to_string(),
        "--seed",
        "5",
    ]);
    // Cases the NIC hands to software: a worker it has no queue for, short sequence numbers.
    let mut no_worker = Vec::new();
    dccp::write_data(&mut no_worker, (SOURCE, SERVER), (60_000, 4444), 1, 9, b"nobody");
    let mut short = Vec::new();
    dccp::write_data(&mut short, (SOURCE, SERVER), (60_001, 4444), 1, 0, b"short");
    short[8] &= !1;
    let odd = dir.join("odd.pcap");
    write_pcap(&odd, &[frame(&no_worker), frame(&short)]);
    setup.start(&["storm", "--iface", "st0", "--workers", "2", "--demux", demux, "--top", "10"]);
    let capture = Capture::open(&setup.host_if);
    ok(&[hyflow, "send", "--iface", &setup.host_if, "--trace", tuples.to_str().unwrap(), "--rate", "20000"]);
    ok(&[hyflow, "send", "--iface", &setup.host_if, "--trace", odd.to_str().unwrap()]);
    let frames = capture.frames(Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));
    let report = setup.stop();
    let _ = std::fs::remove_dir_all(&dir);

    // Acknowledgements: one per tuple, each valid.
    let mut acked: HashMap<(u16, u64), u32> = HashMap::new();
    let mut invalid = 0;
    for f in &frames {
        if f.len() < 34 || f[12..14] != [8, 0] || f[23] != dccp::IP_DCCP || f[26..30] != SERVER {
            continue;
        }
        assert_eq!(&f[30..34], &SOURCE, "an ACK goes back to the tuple's source");
        assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 1], "to the tuple's source MAC");
        let ihl = (f[14] & 15) as usize * 4;
        let Some((ports, ack, valid)) = dccp::parse_ack(SERVER, SOURCE, &f[14 + ihl..]) else {
            panic!("a DCCP packet from the server that is no ACK: {:?}", &f[14 + ihl..]);
        };
        invalid += !valid as u32;
        assert_eq!(ports.0, 4444, "ports swapped");
        *acked.entry((ports.1, ack)).or_default() += 1;
    }
    assert_eq!(invalid, 0, "ACKs with a bad DCCP checksum");
    let want: HashSet<(u16, u64)> =
        (0..TUPLES).map(|i| (50_000 + (i % CONNECTIONS as u64) as u16, i / CONNECTIONS as u64 + 1)).collect();
    let got: HashSet<(u16, u64)> = acked.keys().copied().collect();
    assert!(
        got == want,
        "{demux}: {} frames captured, {} tuples acknowledged of {}, {} acknowledgements of no tuple; server: {}",
        frames.len(),
        got.intersection(&want).count(),
        want.len(),
        got.difference(&want).count(),
        report["xdp"]
    );
    assert!(acked.values().all(|&n| n == 1), "a tuple acknowledged twice");

    // Workers: each got exactly its tuples; the ranking is the stream's exact top 10.
    let stream = TweetStream { users: 500, zipf: 1.0, workers: 2 };
    let mut tweets = stream.tweets(5).unwrap();
    let (mut per_worker, mut counts) = ([0u64; 2], BTreeMap::<Vec<u8>, u64>::new());
    let mut name = Vec::new();
    for _ in 0..TUPLES {
        let w = tweets.next(&mut name);
        per_worker[w as usize] += 1;
        *counts.entry(name.clone()).or_default() += 1;
    }
    let workers = report["workers"].as_array().unwrap();
    for (w, r) in workers.iter().enumerate() {
        assert_eq!(r["tuples"].as_u64().unwrap(), per_worker[w], "{demux}: worker {w}: {r}");
        assert_eq!(r["misdelivered"], 0);
        let from = if demux == "nic" { "from_nic" } else { "from_software" };
        assert_eq!(r[from].as_u64().unwrap(), per_worker[w], "{demux}: worker {w}'s queue");
    }
    let mut exact: Vec<(Vec<u8>, u64)> = counts.into_iter().collect();
    exact.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let top: Vec<(String, u64)> = report["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_str().unwrap().to_string(), p[1].as_u64().unwrap()))
        .collect();
    let exact_top: Vec<(String, u64)> =
        exact.iter().take(10).map(|(n, c)| (String::from_utf8_lossy(n).into_owned(), *c)).collect();
    assert_eq!(top, exact_top, "{demux}: the ranking");

    // The odd cases reached the software demultiplexer and were counted, not acknowledged.
    let d = &report["demux_thread"];
    assert_eq!(d["no_worker"], 1, "{d}");
    assert_eq!(d["not_tuple"][1], 1, "short sequence numbers: {d}");
    let xdp = &report["xdp"];
    if demux == "nic" {
        assert_eq!(xdp["to_worker"].as_u64().unwrap(), TUPLES, "{xdp}");
        assert_eq!(xdp["acked"].as_u64().unwrap(), TUPLES, "{xdp}");
        assert_eq!(xdp["to_software"], 2, "{xdp}");
        assert_eq!(d["acks"], 0, "{d}");
    } else {
        assert_eq!(xdp["to_software"].as_u64().unwrap(), TUPLES + 2, "{xdp}");
        assert_eq!(d["acks"].as_u64().unwrap(), TUPLES, "{d}");
    }
}

#[test]
fn nic_demultiplexing_acknowledges_every_tuple() {
    if !root_or_skip(1, "storm tests (NIC demultiplexing)") {
        return;
    }
    run("nic", "n");
}

#[test]
fn software_demultiplexing_acknowledges_every_tuple() {
    if !root_or_skip(1, "storm tests (software demultiplexing)") {
        return;
    }
    run("software", "s");
}
