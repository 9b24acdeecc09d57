//! `hyflow switch` on real interfaces, checked byte for byte against the engine.
//!
//! **Contract.** Every frame the switch sends is the frame that arrived, rewritten to what the
//! uncached engine (the slow path, as with `--no-cache`) says leaves for that packet, on the
//! port it says; nothing else leaves; and once `hyflow ctl` has returned from a rule update, no
//! frame is forwarded by a decision the update outdated.
//!
//! **How.** Each test builds a network namespace whose veth ends carry the names the ports file
//! gives, runs `hyflow switch` in it and sends frames from the peers (in the test's own
//! namespace) through raw AF_PACKET sockets. Mostly one at a time: a frame is sent, then the
//! test waits for every copy the oracle expects — or, when it expects none, for a quiet period
//! (and, where decisions depend on the order of frames, for the switch to have counted the
//! frame) — before the next, so the switch sees the frames in the order the oracle saw them,
//! at a few hundred frames a second. Stateless pipelines also get bursts, sent while the switch
//! is paused so that they wait whole in its rings (its batch path). Each frame carries a
//! marker after its last byte (a run id and its sequence number), outside every header and
//! checksum, so each copy that arrives is attributed to the frame it came from; a copy that
//! arrives without it (none should) is matched by its bytes.
//! Before a rule update the test waits until the switch has counted every frame sent.
//!
//! The oracle is the engine in this process with every cache off, fed the same frames in the
//! same order and the same rule updates (and, for ICMP errors, the packet they carry, which the
//! live switch reads from the frame). The bytes expected are computed from its output keys by a
//! small writer of its own ([`expected_frame`]), independent of `frame_rewrite`: the fields that
//! differ are written, the VLAN stack rebuilt, and every checksum the arriving frame had right
//! recomputed from scratch; a checksum it had wrong, or that one packet cannot verify (a first
//! fragment, a routing header with segments left), is the one field not compared. At the end
//! the switch's packet count and connection-tracker counters must equal the oracle's.
//!
//! Tests: the built-in pipeline with generated traffic (updates, a hard timeout, bursts); the
//! Antrea and OVN examples with generated conversations (conntrack, NAT, select groups,
//! NORMAL; updates); the conntrack firewall example with ICMP errors, related and stray; real
//! captures and edge frames through rewrites of every kind, on the default I/O (AF_XDP) and on
//! AF_PACKET; random pipelines. Where `frame_rewrite` follows Open vSwitch's userspace
//! datapath into bytes a from-scratch checksum disagrees with (a later IPv4 fragment's
//! payload, an IPv6 atomic fragment, an all-zero ICMP message) is pinned by its own unit tests,
//! not sent here.
//!
//! Needs root (network namespaces, veth, AF_PACKET): without it each test says it skipped.
//! When a test runs, it prints what it checked and asserts that it checked enough.

mod live_support;

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::{BufRead, BufReader, Read};
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;

use hyflow::capture::{LinkType, TraceReader};
use hyflow::conntrack::EmbeddedTuple;
use hyflow::nic::{MegaflowOffloadConfig, NicCapability, NicConfig};
use hyflow::openflow::traversal::Output;
use hyflow::openflow::update::{parse_command_spec, Command as Update};
use hyflow::openflow::{Names, Pipeline};
use hyflow::packet::field::id;
use hyflow::packet::format::format_flow;
use hyflow::packet::parse::{parse_frame, parse_frame_with_layout, FrameLayout, LinkKind};
use hyflow::packet::{FieldId, FlowKey};
use hyflow::switch::Switch;
use hyflow_commands::names::NameArgs;
use hyflow_commands::switch::{host_config, mac_table, HostArgs};

const BIN: &str = env!("CARGO_BIN_EXE_hyflow");
/// MTU of every veth: room for a full-size frame, its marker and two pushed tags.
const MTU: &str = "1600";
/// The longest frame sent (before its marker).
const MAX_INPUT: usize = 1514;
/// The marker's first bytes; a run id and the frame's sequence number follow.
const MARK: [u8; 4] = *b"HYLT";
const MARK_LEN: usize = 12;
/// Failures collected before a test stops sending.
const MAX_FAILURES: usize = 10;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../hyflow/tests/data/pcap-corpus/captures")
}

/// Whether the tests can run; says so when they cannot.
fn is_root() -> bool {
    live_support::root_or_skip(1, "live test")
}

/// Runs a command that must succeed; its standard output.
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

// ---- Topology: a namespace, its veth ends named as the ports file names them, our peers.

static NEXT_NAMESPACE: AtomicUsize = AtomicUsize::new(0);
static NEXT_PEER: AtomicUsize = AtomicUsize::new(0);

/// A switch port: its number and the peer of its interface, in our namespace.
struct TopoPort {
    number: u32,
    peer: String,
}

/// The namespace and its links, removed when dropped (a panicking test included).
struct Topology {
    ns: String,
    /// This process's count of topologies when it was made: it names the namespace.
    n: usize,
    ports: Vec<TopoPort>,
    /// Files of the test: ports, flows, captures, the control socket.
    dir: PathBuf,
}

impl Topology {
    fn new(ports: &[(String, u32)]) -> Topology {
        let pid = std::process::id();
        let n = NEXT_NAMESPACE.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("hyflow-live-{pid}-{n}"));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let mut topo = Topology { ns: format!("hyl-{pid}-{n}"), n, ports: Vec::new(), dir };
        run("ip", &["netns", "add", &topo.ns]);
        // From here on, Drop removes the namespace, and with its veth ends their peers.
        for key in ["net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf.default.disable_ipv6"] {
            topo.ns_sysctl(key, "1");
        }
        for (name, number) in ports {
            let peer = format!("hl{}x{}", pid % 10000, NEXT_PEER.fetch_add(1, Ordering::Relaxed));
            assert!(name.len() <= 15 && peer.len() <= 15, "interface names are at most 15 bytes");
            run("ip", &["link", "add", &peer, "type", "veth", "peer", "name", name, "netns", &topo.ns]);
            topo.ports.push(TopoPort { number: *number, peer: peer.clone() });
            // Nothing of the kernel's own on these links: no IPv6 (router solicitations, MLD),
            // no ARP answers, no forwarding (ICMP errors) for the frames our peers receive.
            set_sysctl(&format!("net/ipv6/conf/{peer}/disable_ipv6"), "1");
            set_sysctl(&format!("net/ipv4/conf/{peer}/arp_ignore"), "8");
            set_sysctl(&format!("net/ipv4/conf/{peer}/forwarding"), "0");
            topo.ns_sysctl(&format!("net.ipv6.conf.{name}.disable_ipv6"), "1");
            topo.ns_sysctl(&format!("net.ipv4.conf.{name}.arp_ignore"), "8");
            run("ip", &["link", "set", &peer, "mtu", MTU, "up"]);
            // A frame the switch's XDP tier redirects into a veth is received by the peer's
            // NAPI, which a veth runs only with XDP or GRO on.
            run("ethtool", &["-K", &peer, "gro", "on"]);
            run("ip", &["-n", &topo.ns, "link", "set", name, "mtu", MTU, "up"]);
        }
        topo
    }

    fn ns_sysctl(&self, key: &str, value: &str) {
        run("ip", &["netns", "exec", &self.ns, "sysctl", "-qw", &format!("{key}={value}")]);
    }

    /// A file of the test holding `contents`.
    fn file(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, contents).expect("writes a temporary file");
        p
    }

    fn links(&self) -> String {
        run("ip", &["-n", &self.ns, "link", "show"])
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
        for p in &self.ports {
            if Path::new("/sys/class/net").join(&p.peer).exists() {
                let _ = Command::new("ip").args(["link", "del", &p.peer]).output();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Sets a sysctl of the test's own namespace (`path` under /proc/sys).
fn set_sysctl(path: &str, value: &str) {
    let p = Path::new("/proc/sys").join(path);
    std::fs::write(&p, value).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
}

/// `name=number` lines of a ports file.
fn read_ports(path: &Path) -> Vec<(String, u32)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (name, number) = l.split_once('=').unwrap_or_else(|| panic!("ports line {l:?}"));
            (name.trim().to_string(), number.trim().parse().unwrap_or_else(|_| panic!("ports line {l:?}")))
        })
        .collect()
}

/// Ports `p1`..`pN`, numbered 1..N.
fn numbered_ports(n: u32) -> Vec<(String, u32)> {
    (1..=n).map(|i| (format!("p{i}"), i)).collect()
}

// ---- The switch under test.

/// A running `hyflow switch`, killed if the test ends without stopping it.
struct LiveSwitch {
    child: Option<Child>,
    ctl: PathBuf,
    ns: String,
    lines: mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl LiveSwitch {
    /// Starts the switch in the topology's namespace and waits for its `ready`.
    fn start(topo: &Topology, flows: &Path, extra: &[&str]) -> LiveSwitch {
        let ctl = topo.dir.join("ctl.sock");
        let ctl_arg = ctl.to_str().expect("a UTF-8 path").to_string();
        let flows_arg = flows.to_str().expect("a UTF-8 path");
        let mut args =
            vec!["netns", "exec", &topo.ns, BIN, "switch", "--flows", flows_arg, "--ctl", &ctl_arg];
        args.extend_from_slice(extra);
        let mut child = Command::new("ip")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts ip netns exec hyflow switch");
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().expect("piped");
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                sink.lock().expect("stderr sink").push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let switch = LiveSwitch { child: Some(child), ctl, ns: topo.ns.clone(), lines, stderr };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match switch.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) if line.trim() == "ready" => return switch,
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_millis(100));
                    panic!("hyflow switch ended before it was ready: {}", switch.stderr());
                }
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() > deadline => {
                    panic!("hyflow switch not ready after 30 s: {}", switch.stderr())
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr sink").clone()
    }

    /// `hyflow ctl SOCKET args...`, which must succeed; its output.
    fn ctl(&self, args: &[&str]) -> String {
        let out = Command::new(BIN).arg("ctl").arg(&self.ctl).args(args).output().expect("hyflow ctl runs");
        assert!(
            out.status.success(),
            "hyflow ctl {}: {}\nswitch: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            self.stderr()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Sends `signal` to the switch (the process this test started, by its id).
    fn signal(&self, signal: libc::c_int) {
        let child = self.child.as_ref().expect("running");
        // SAFETY: signals the child this test started, by its id.
        let r = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        assert!(r == 0, "kill: {}", std::io::Error::last_os_error());
    }

    fn show(&self) -> serde_json::Value {
        serde_json::from_str(&self.ctl(&["show", "--json"])).expect("show --json is JSON")
    }

    /// Stops the switch with SIGTERM: it must exit 0 with its report, detached from every
    /// interface.
    fn stop(mut self) -> String {
        let mut child = self.child.take().expect("running");
        // SAFETY: signals the child this test started, by its id.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = child.try_wait().expect("waits for the switch") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("hyflow switch did not exit within 20 s of SIGTERM: {}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut report = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            report.push(line);
        }
        assert!(status.success(), "hyflow switch exited with {status}: {}", self.stderr());
        let links = run("ip", &["-n", &self.ns, "link", "show"]);
        assert!(!links.contains("xdp"), "an XDP program is left after the switch ended:\n{links}");
        report.join("\n")
    }
}

impl Drop for LiveSwitch {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// ---- Raw sockets on the peers.

const ETH_P_ALL: u16 = 0x0003;
const SOL_PACKET: libc::c_int = 263;
const PACKET_AUXDATA: libc::c_int = 8;
const PACKET_OUTGOING: u8 = 4;
const TP_STATUS_VLAN_VALID: u32 = 0x10;
const TP_STATUS_VLAN_TPID_VALID: u32 = 0x40;

/// `struct tpacket_auxdata` (linux/if_packet.h).
#[repr(C)]
#[derive(Clone, Copy)]
struct TpacketAuxdata {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
}

/// An AF_PACKET socket bound to a peer: frames sent into the switch's port, and frames the
/// switch sent out of it.
struct PeerSocket {
    fd: OwnedFd,
    name: String,
}

impl PeerSocket {
    fn open(name: &str) -> PeerSocket {
        let c = CString::new(name).expect("an interface name");
        // SAFETY: `c` is a valid C string.
        let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
        assert!(ifindex != 0, "{name}: no such interface");
        // Protocol 0 until bound, so that nothing of other interfaces is queued meanwhile.
        // SAFETY: a plain syscall.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        assert!(raw >= 0, "{name}: AF_PACKET socket: {}", std::io::Error::last_os_error());
        // SAFETY: a new descriptor this socket owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let set = |level, option, value: libc::c_int| {
            // SAFETY: `value` is a c_int of the size passed.
            let r = unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    level,
                    option,
                    &value as *const libc::c_int as *const libc::c_void,
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            assert!(r == 0, "{name}: setsockopt {option}: {}", std::io::Error::last_os_error());
        };
        // The receive path moves a VLAN tag into metadata: have it told, to put it back.
        set(SOL_PACKET, PACKET_AUXDATA, 1);
        set(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20);
        // SAFETY: a zeroed sockaddr_ll is valid; the fields that matter are set below.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = ETH_P_ALL.to_be();
        addr.sll_ifindex = ifindex as i32;
        // SAFETY: `addr` is a sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &addr as *const libc::sockaddr_ll as *const libc::sockaddr,
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        assert!(r == 0, "{name}: bind: {}", std::io::Error::last_os_error());
        PeerSocket { fd, name: name.to_string() }
    }

    fn send(&self, frame: &[u8]) {
        // SAFETY: sends `frame`'s bytes on our bound socket.
        let r =
            unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr() as *const libc::c_void, frame.len(), 0) };
        assert!(r == frame.len() as isize, "{}: send: {}", self.name, std::io::Error::last_os_error());
    }

    /// The next frame that arrived (not one we sent), its VLAN tag put back; `None` when no
    /// frame waits.
    fn receive(&self, buf: &mut [u8]) -> Option<Vec<u8>> {
        loop {
            // SAFETY: zeroed sockaddr_ll and msghdr are valid; the pointers set below outlive
            // the call.
            let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut control = [0u64; 32];
            let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
            // SAFETY: as above.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = &mut addr as *mut libc::sockaddr_ll as *mut libc::c_void;
            msg.msg_namelen = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = size_of_val(&control) as _;
            // SAFETY: `msg` describes live buffers.
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::WouldBlock {
                    return None;
                }
                panic!("{}: recvmsg: {e}", self.name);
            }
            if addr.sll_pkttype == PACKET_OUTGOING {
                continue;
            }
            let bytes = &buf[..(n as usize).min(buf.len())];
            let mut tag = None;
            // SAFETY: walks the control messages the kernel wrote into `control`.
            let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
            while !cmsg.is_null() {
                // SAFETY: `cmsg` points at a control message header within `control`.
                let header = unsafe { &*cmsg };
                if header.cmsg_level == SOL_PACKET && header.cmsg_type == PACKET_AUXDATA {
                    // SAFETY: the kernel wrote a tpacket_auxdata as this message's data.
                    let aux = unsafe { (libc::CMSG_DATA(cmsg) as *const TpacketAuxdata).read_unaligned() };
                    if aux.tp_status & TP_STATUS_VLAN_VALID != 0 {
                        let tpid = if aux.tp_status & TP_STATUS_VLAN_TPID_VALID != 0 {
                            aux.tp_vlan_tpid
                        } else {
                            0x8100
                        };
                        tag = Some((tpid, aux.tp_vlan_tci));
                    }
                }
                // SAFETY: as above.
                cmsg = unsafe { libc::CMSG_NXTHDR(&msg, cmsg) };
            }
            return Some(match tag {
                Some((tpid, tci)) if bytes.len() >= 12 => {
                    let mut f = bytes[..12].to_vec();
                    f.extend_from_slice(&tpid.to_be_bytes());
                    f.extend_from_slice(&tci.to_be_bytes());
                    f.extend_from_slice(&bytes[12..]);
                    f
                }
                _ => bytes.to_vec(),
            });
        }
    }
}

// ---- The oracle: the engine in this process, uncached.

/// The host options, parsed as the CLI parses them.
#[derive(Parser)]
struct HostOptions {
    #[command(flatten)]
    host: HostArgs,
}

/// The uncached engine, fed what the switch is fed.
struct Oracle {
    switch: Switch,
    names: Names,
    start: Instant,
    outputs: Vec<Output>,
}

impl Oracle {
    /// The pipeline as `hyflow switch` loads it (`run_switch`), every cache off.
    fn new(flows: &Path, names: &NameArgs) -> Oracle {
        let oracle = Oracle::with(flows, names, &["--no-cache"], None);
        let config = oracle.switch.config();
        assert!(config.microflow.is_none() && config.megaflow.is_none() && config.nic.is_none());
        oracle
    }

    /// What `replay` predicts for the switch with the XDP tier: its caches, and a megaflow
    /// NIC of the tier's default size that holds what the tier can.
    fn predictor(flows: &Path, names: &NameArgs) -> Oracle {
        let nic = NicConfig::new(MegaflowOffloadConfig { entries: 32_768, max_masks: 16 });
        Oracle::with(flows, names, &[], Some(nic))
    }

    fn with(flows: &Path, names: &NameArgs, options: &[&str], nic: Option<NicConfig>) -> Oracle {
        let loaded = names.read_flows(flows).unwrap_or_else(|e| panic!("{}: {e:#}", flows.display()));
        let host = HostOptions::parse_from([&["hyflow"], options].concat()).host;
        let pipeline = Pipeline::of_switch(
            loaded.rules.iter().cloned(),
            loaded.groups.clone(),
            loaded.ports.clone(),
            mac_table(&host).expect("the MAC table's defaults"),
        );
        let mut config = host_config(&host, false).expect("the options are a configuration");
        if let Some(nic) = nic {
            config.nic = Some(nic);
            config.nic_capability = NicCapability::Xdp;
        }
        let switch = Switch::new(pipeline, config).expect("the switch builds");
        Oracle { switch, names: loaded.names, start: Instant::now(), outputs: Vec::new() }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// The key `frame` parses to on `in_port`, and the copies that leave.
    fn process(&mut self, frame: &[u8], in_port: u32) -> (FlowKey, Vec<Output>) {
        // A frame that does not parse completely goes through on what was parsed, as in the
        // switch; a VXLAN packet is UDP (the switch's ports are no tunnel ports).
        let (mut key, mut layout) = (FlowKey::default(), FrameLayout::default());
        let _ = parse_frame_with_layout(frame, in_port, &mut key, &mut layout);
        let mut captured = FlowKey::default();
        let _ = parse_frame(frame, LinkKind::Ethernet, in_port, &mut captured);
        if captured.tun_id() == 0 {
            assert_eq!(captured, key, "recording the layout changes nothing in the key");
        }
        // An ICMP error relates to its connection by the packet it carries, which the live
        // switch reads from the frame: so does the oracle.
        let embedded = EmbeddedTuple::of_icmp_error(frame, &layout, &key);
        let now = self.now();
        self.switch.process_embedded(&key, embedded, frame.len() as u64, now, &mut self.outputs);
        (key, self.outputs.clone())
    }

    /// Runs the switch's timers due now (rule expiry), as the live switch does when idle.
    fn advance(&mut self) {
        let now = self.now();
        self.switch.advance(now);
    }

    fn update(&mut self, command: Update, text: &str) {
        let spec = parse_command_spec(command, text, &self.names).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        let now = self.now();
        self.switch.apply_update(command, &spec, now);
    }
}

// ---- The reference writer: expected bytes from the oracle's keys.

const ETH_VLAN: u16 = 0x8100;
const ETH_QINQ: u16 = 0x88a8;
const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;
const ETH_ARP: u16 = 0x0806;
const ETH_RARP: u16 = 0x8035;
const IP_ICMP: u8 = 1;
const IP_TCP: u8 = 6;
const IP_UDP: u8 = 17;
const IP_ICMPV6: u8 = 58;
const IP_SCTP: u8 = 132;
const VLAN_PRESENT: u16 = 0x1000;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NetKind {
    Ipv4,
    Ipv6,
    Arp,
}

/// A frame's network and transport headers, as Open vSwitch's `flow_extract` finds them.
#[derive(Clone, Copy, Debug)]
struct Net {
    kind: NetKind,
    /// Start of the network header and end of the IP packet (what follows is padding).
    at: usize,
    end: usize,
    /// The transport protocol (IPv6: the last next header read).
    proto: u8,
    /// Where the transport part starts (in a later fragment, its payload).
    l4: usize,
    /// Whether the transport header is there whole (not in a later fragment, not cut).
    transport: bool,
    /// Whether the transport checksum can be verified in this packet alone: not a fragment,
    /// no routing header with segments left (whose final destination the checksum covers).
    whole: bool,
}

impl Net {
    /// The same headers `by` bytes further (tags pushed or popped before them).
    fn moved(self, by: isize) -> Net {
        let m = |at: usize| at.checked_add_signed(by).expect("a header stays in the frame");
        Net { at: m(self.at), end: m(self.end), l4: m(self.l4), ..self }
    }
}

/// Where a frame's headers are: its VLAN tags (at most two) and network header.
#[derive(Clone, Copy, Debug, Default)]
struct Headers {
    tags: usize,
    net: Option<Net>,
}

fn walk(f: &[u8]) -> Headers {
    let mut h = Headers::default();
    if f.len() < 14 {
        return h;
    }
    let mut ether_type = be16(f, 12);
    let mut at = 14;
    while matches!(ether_type, ETH_VLAN | ETH_QINQ) && h.tags < 2 && f.len() >= at + 4 {
        h.tags += 1;
        ether_type = be16(f, at + 2);
        at += 4;
    }
    if ether_type < 0x0600 {
        // 802.3: LLC/SNAP with a zero OUI carries the EtherType.
        match f.get(at..at + 8) {
            Some(&[0xaa, 0xaa, 0x03, 0, 0, 0, hi, lo]) => {
                ether_type = u16::from_be_bytes([hi, lo]);
                at += 8;
            }
            _ => return h,
        }
    }
    h.net = match ether_type {
        ETH_IPV4 => ipv4_headers(f, at),
        ETH_IPV6 => ipv6_headers(f, at),
        ETH_ARP | ETH_RARP => arp_headers(f, at),
        _ => None,
    };
    h
}

/// Ethernet/IPv4 ARP only, as OVS reads it.
fn arp_headers(f: &[u8], at: usize) -> Option<Net> {
    let arp = f.get(at..at + 28)?;
    (arp[..6] == [0, 1, 8, 0, 6, 4]).then_some(Net {
        kind: NetKind::Arp,
        at,
        end: f.len(),
        proto: 0,
        l4: at + 28,
        transport: false,
        whole: false,
    })
}

/// Whether the fixed header of `proto` is whole between `l4` and `end`, as OVS requires
/// before it reads the transport fields.
fn transport_whole(f: &[u8], proto: u8, l4: usize, end: usize) -> bool {
    let len = end.saturating_sub(l4);
    match proto {
        IP_TCP => len >= 20 && (20..=len).contains(&((f[l4 + 12] >> 4) as usize * 4)),
        IP_SCTP => len >= 12,
        IP_UDP | IP_ICMP | IP_ICMPV6 | 2 => len >= 8,
        _ => false,
    }
}

fn ipv4_headers(f: &[u8], at: usize) -> Option<Net> {
    let h = f.get(at..at + 20)?;
    let ihl = (h[0] & 0x0f) as usize * 4;
    let total = be16(h, 2) as usize;
    if ihl < 20 || ihl > total || at + total > f.len() {
        return None;
    }
    let frag = be16(h, 6);
    let (l4, end, proto) = (at + ihl, at + total, h[9]);
    let later = frag & 0x1fff != 0;
    Some(Net {
        kind: NetKind::Ipv4,
        at,
        end,
        proto,
        l4,
        transport: !later && transport_whole(f, proto, l4, end),
        whole: frag & 0x3fff == 0,
    })
}

fn ipv6_headers(f: &[u8], at: usize) -> Option<Net> {
    let h = f.get(at..at + 40)?;
    let end = at + 40 + be16(h, 4) as usize;
    if end > f.len() {
        return None;
    }
    let mut net =
        Net { kind: NetKind::Ipv6, at, end, proto: h[6], l4: at + 40, transport: false, whole: false };
    let (mut fragment, mut routing) = (false, false);
    while matches!(net.proto, 0 | 43 | 44 | 51 | 60) {
        let Some(e) = f.get(net.l4..net.l4 + 8).filter(|_| net.l4 + 8 <= end) else {
            // A cut extension header: the addresses are known, nothing after them.
            net.proto = 0;
            return Some(net);
        };
        let len = match net.proto {
            51 => (e[1] as usize + 2) * 4,
            44 => 8,
            _ => (e[1] as usize + 1) * 8,
        };
        if net.l4 + len > end {
            net.proto = 0;
            return Some(net);
        }
        routing |= net.proto == 43 && e[3] > 0;
        let offlg = be16(e, 2);
        let header = net.proto;
        net.proto = e[0];
        net.l4 += len;
        if header == 44 && offlg != 0 {
            fragment = true;
            if offlg & 0xfff8 != 0 {
                // A later fragment: its protocol is the fragment header's own.
                net.proto = 44;
                return Some(net);
            }
        }
    }
    net.transport = transport_whole(f, net.proto, net.l4, end);
    net.whole = !fragment && !routing;
    Some(net)
}

fn ones_sum(bytes: &[u8]) -> u16 {
    let mut sum: u64 =
        bytes.chunks(2).map(|w| u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]) as u64).sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// CRC-32C (SCTP), bit by bit.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 };
        }
    }
    !crc
}

/// Where the transport checksum is in the transport header, for the protocols whose checksum
/// a rewrite keeps right (and its length).
fn transport_checksum(n: &Net) -> Option<(usize, usize)> {
    match (n.kind, n.proto) {
        (NetKind::Arp, _) => None,
        (_, IP_TCP) => Some((16, 2)),
        (_, IP_UDP) => Some((6, 2)),
        (NetKind::Ipv4, IP_ICMP) | (NetKind::Ipv6, IP_ICMPV6) => Some((2, 2)),
        (_, IP_SCTP) => Some((8, 4)),
        _ => None,
    }
}

/// The transport checksum `f` should carry over the transport part of `n` (IP pseudo-header
/// but for ICMP; SCTP's CRC-32C as it is on the wire), its field taken as zero.
fn transport_checksum_of(f: &[u8], n: &Net) -> Vec<u8> {
    let (c, len) = transport_checksum(n).expect("a protocol with a checksum");
    let mut seg = f[n.l4..n.end].to_vec();
    seg[c..c + len].fill(0);
    if n.proto == IP_SCTP {
        return crc32c(&seg).to_le_bytes().to_vec();
    }
    let mut data = match n.kind {
        _ if n.proto == IP_ICMP => Vec::new(),
        NetKind::Ipv4 => {
            let mut p = f[n.at + 12..n.at + 20].to_vec();
            p.extend_from_slice(&[0, n.proto]);
            p.extend_from_slice(&(seg.len() as u16).to_be_bytes());
            p
        }
        _ => {
            let mut p = f[n.at + 8..n.at + 40].to_vec();
            p.extend_from_slice(&(seg.len() as u32).to_be_bytes());
            p.extend_from_slice(&[0, 0, 0, n.proto]);
            p
        }
    };
    data.extend_from_slice(&seg);
    let sum = !ones_sum(&data);
    // UDP sends a computed zero as 0xffff (zero means "none").
    let sum = if n.proto == IP_UDP && sum == 0 { 0xffff } else { sum };
    sum.to_be_bytes().to_vec()
}

/// Whether the transport checksum of `f` is right (a zero UDP checksum means none: right).
fn transport_checksum_right(f: &[u8], n: &Net) -> bool {
    let Some((c, len)) = transport_checksum(n) else { return false };
    let field = &f[n.l4 + c..n.l4 + c + len];
    (n.proto == IP_UDP && field == [0, 0]) || field == transport_checksum_of(f, n)
}

fn ipv4_checksum_right(f: &[u8], n: &Net) -> bool {
    let ihl = (f[n.at] & 0x0f) as usize * 4;
    ones_sum(&f[n.at..n.at + ihl]) == 0xffff
}

fn fill_ipv4_checksum(f: &mut [u8], n: &Net) {
    let ihl = (f[n.at] & 0x0f) as usize * 4;
    f[n.at + 10..n.at + 12].fill(0);
    let sum = !ones_sum(&f[n.at..n.at + ihl]);
    f[n.at + 10..n.at + 12].copy_from_slice(&sum.to_be_bytes());
}

/// A key's VLAN tags, outermost first: (TPID, TCI with the "present" bit).
fn tags(k: &FlowKey) -> Vec<(u16, u16)> {
    [(k.vlan_tpid(), k.vlan_tci()), (k.vlan_tpid2(), k.vlan_tci2())]
        .into_iter()
        .take_while(|t| t.1 & VLAN_PRESENT != 0)
        .collect()
}

/// A frame the switch should send: its port, bytes, and the bytes not compared (a checksum
/// the arriving frame had wrong, or that one fragment cannot verify).
#[derive(Clone, Debug)]
struct Expected {
    port: u32,
    bytes: Vec<u8>,
    unchecked: Vec<Range<usize>>,
    /// Checksums recomputed from scratch and compared.
    recomputed: usize,
}

impl Expected {
    fn matches(&self, port: u32, bytes: &[u8]) -> bool {
        port == self.port
            && bytes.len() == self.bytes.len()
            && bytes
                .iter()
                .zip(&self.bytes)
                .enumerate()
                .all(|(i, (a, b))| a == b || self.unchecked.iter().any(|r| r.contains(&i)))
    }
}

/// Writes `value`'s last `bytes.len()` bytes (big-endian) at `at` if `field` differs.
fn write_field(out: &mut [u8], at: usize, len: usize, field: FieldId, arrived: &FlowKey, leaving: &FlowKey) {
    let value = leaving.get(field);
    if value != arrived.get(field) && at + len <= out.len() {
        out[at..at + len].copy_from_slice(&value.to_be_bytes()[16 - len..]);
    }
}

/// The frame that should leave for `frame`, which parsed to `arrived`, when the engine says
/// the packet leaves as `leaving`: the fields that differ written, the VLAN stack rebuilt,
/// every checksum the arriving frame had right recomputed from scratch.
fn expected_frame(frame: &[u8], arrived: &FlowKey, leaving: &FlowKey, port: u32) -> Expected {
    let h = walk(frame);
    let mut out = frame.to_vec();
    if out.len() >= 12 {
        write_field(&mut out, 0, 6, id::DL_DST, arrived, leaving);
        write_field(&mut out, 6, 6, id::DL_SRC, arrived, leaving);
    }
    // VLAN tags: those the two stacks share at the inner end stay as they are (bytes and all),
    // the rest of the arriving stack is popped and the rest of the leaving one pushed, at the
    // outside; a pushed tag goes on the wire without the "present" bit.
    let (a, l) = (tags(arrived), tags(leaving));
    assert_eq!(a.len(), h.tags, "the walk finds the tags the key holds: {}", format_flow(arrived));
    let mut shared = 0;
    while shared < a.len().min(l.len()) && a[a.len() - 1 - shared] == l[l.len() - 1 - shared] {
        shared += 1;
    }
    let (popped, pushed) = (a.len() - shared, &l[..l.len() - shared]);
    if out.len() >= 12 && (popped > 0 || !pushed.is_empty()) {
        let mut rebuilt = out[..12].to_vec();
        for &(tpid, tci) in pushed {
            rebuilt.extend_from_slice(&tpid.to_be_bytes());
            rebuilt.extend_from_slice(&(tci & !VLAN_PRESENT).to_be_bytes());
        }
        rebuilt.extend_from_slice(&out[12 + 4 * popped..]);
        out = rebuilt;
    }
    let shift = 4 * pushed.len() as isize - 4 * popped as isize;
    let mut expected = Expected { port, bytes: Vec::new(), unchecked: Vec::new(), recomputed: 0 };
    if let Some(net) = h.net {
        // Which checksums the arriving frame had right.
        let ip_right = net.kind == NetKind::Ipv4 && ipv4_checksum_right(frame, &net);
        let transport_right = net.transport && net.whole && transport_checksum_right(frame, &net);
        let n = net.moved(shift);
        let write = |out: &mut Vec<u8>, at: usize, len: usize, field: FieldId| {
            write_field(out, at, len, field, arrived, leaving)
        };
        match n.kind {
            NetKind::Ipv4 => {
                write(&mut out, n.at + 1, 1, id::NW_TOS);
                write(&mut out, n.at + 8, 1, id::NW_TTL);
                write(&mut out, n.at + 12, 4, id::NW_SRC);
                write(&mut out, n.at + 16, 4, id::NW_DST);
            }
            NetKind::Ipv6 => {
                let word = u32::from_be_bytes(out[n.at..n.at + 4].try_into().expect("4 bytes"));
                let mut new = word;
                if leaving.nw_tos() != arrived.nw_tos() {
                    new = (new & 0xf00f_ffff) | ((leaving.nw_tos() as u32) << 20);
                }
                if leaving.get(id::IPV6_LABEL) != arrived.get(id::IPV6_LABEL) {
                    new = (new & 0xfff0_0000) | (leaving.get(id::IPV6_LABEL) as u32 & 0x000f_ffff);
                }
                out[n.at..n.at + 4].copy_from_slice(&new.to_be_bytes());
                write(&mut out, n.at + 7, 1, id::NW_TTL);
                write(&mut out, n.at + 8, 16, id::IPV6_SRC);
                write(&mut out, n.at + 24, 16, id::IPV6_DST);
            }
            NetKind::Arp => {
                write(&mut out, n.at + 6, 2, id::ARP_OP);
                write(&mut out, n.at + 8, 6, id::ARP_SHA);
                write(&mut out, n.at + 14, 4, id::ARP_SPA);
                write(&mut out, n.at + 18, 6, id::ARP_THA);
                write(&mut out, n.at + 24, 4, id::ARP_TPA);
            }
        }
        if n.transport {
            match (n.kind, n.proto) {
                (NetKind::Arp, _) => {}
                (_, IP_TCP | IP_UDP | IP_SCTP) => {
                    write(&mut out, n.l4, 2, id::TP_SRC);
                    write(&mut out, n.l4 + 2, 2, id::TP_DST);
                }
                // ICMP type and code are the key's tp_src and tp_dst.
                (NetKind::Ipv4, IP_ICMP) | (NetKind::Ipv6, IP_ICMPV6) => {
                    write(&mut out, n.l4, 1, id::TP_SRC);
                    write(&mut out, n.l4 + 1, 1, id::TP_DST);
                }
                _ => {}
            }
        }
        if n.kind == NetKind::Ipv4 {
            if ip_right {
                fill_ipv4_checksum(&mut out, &n);
                expected.recomputed += 1;
            } else {
                expected.unchecked.push(n.at + 10..n.at + 12);
            }
        }
        if let Some((c, len)) = transport_checksum(&n).filter(|&(c, len)| n.l4 + c + len <= n.end) {
            let field = n.l4 + c..n.l4 + c + len;
            // A zero UDP checksum means none, and stays zero.
            let none = n.proto == IP_UDP && out[field.clone()] == [0, 0];
            if transport_right {
                if !none {
                    let sum = transport_checksum_of(&out, &n);
                    out[field].copy_from_slice(&sum);
                    expected.recomputed += 1;
                }
            } else if n.transport {
                // A checksum the arriving frame had wrong, or one this packet alone cannot
                // verify (a first fragment, a routing header with segments left). A later
                // fragment has no transport header: all its bytes are compared.
                expected.unchecked.push(field);
            }
        }
    }
    expected.bytes = out;
    expected
}

/// Right checksums for a generated frame (the generators leave the transport ones zero): all
/// computed, but a UDP one left zero ("none") when `udp_none`.
fn fill_checksums(frame: &mut [u8], udp_none: bool) {
    let f = frame;
    let Some(n) = walk(f).net else { return };
    if n.transport && n.whole {
        if let Some((c, len)) = transport_checksum(&n) {
            let sum = if n.proto == IP_UDP && udp_none { vec![0, 0] } else { transport_checksum_of(f, &n) };
            f[n.l4 + c..n.l4 + c + len].copy_from_slice(&sum);
        }
    }
    if n.kind == NetKind::Ipv4 {
        fill_ipv4_checksum(f, &n);
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .chunks(32)
        .enumerate()
        .map(|(i, c)| {
            let words: Vec<String> =
                c.chunks(2).map(|w| w.iter().map(|b| format!("{b:02x}")).collect()).collect();
            format!("      {:04x}  {}", i * 32, words.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Offsets where `got` differs from `e` (outside its unchecked bytes), the first few.
fn differences(e: &Expected, got: &[u8]) -> String {
    if got.len() != e.bytes.len() {
        return format!("length {} where {} expected", got.len(), e.bytes.len());
    }
    let at: Vec<String> = (0..got.len())
        .filter(|&i| got[i] != e.bytes[i] && !e.unchecked.iter().any(|r| r.contains(&i)))
        .take(12)
        .map(|i| format!("{i:#x}: {:02x} (expected {:02x})", got[i], e.bytes[i]))
        .collect();
    at.join(", ")
}

// ---- Frames to send.

/// The Ethernet frames of a capture with the pcapng interface each came on; frames of other
/// link types, shorter than a header or longer than `MAX_INPUT` are counted as skipped.
fn read_capture(path: &Path) -> (Vec<(u32, Vec<u8>)>, usize) {
    let mut reader = TraceReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (mut frames, mut skipped) = (Vec::new(), 0);
    while let Ok(Some(p)) = reader.next_packet() {
        if p.link == LinkType::Ethernet && (14..=MAX_INPUT).contains(&p.data.len()) {
            frames.push((p.interface, p.data.to_vec()));
        } else {
            skipped += 1;
        }
    }
    (frames, skipped)
}

/// `hyflow gen traffic` for a flow file: `packets` frames of up to as many flows (each
/// satisfies one rule's match), with right checksums (one UDP frame in four without one),
/// spread over ports 1..=`ports` (a capture has no ports).
fn generated_traffic(dir: &Path, flows: &Path, packets: usize, seed: u64, ports: u32) -> Vec<(u32, Vec<u8>)> {
    let out = dir.join(format!("traffic-{seed}.pcap"));
    let (n, seed_text) = (packets.to_string(), seed.to_string());
    let args = ["gen", "traffic", "--flows", path_str(flows), "--out", path_str(&out), "--packets", &n];
    let seeded = ["--flows-count", &n, "--seed", &seed_text];
    run(BIN, &[&args[..], &seeded[..]].concat());
    let (frames, _) = read_capture(&out);
    assert!(frames.len() >= packets * 9 / 10, "gen traffic wrote {} of {packets} frames", frames.len());
    frames
        .into_iter()
        .enumerate()
        .map(|(i, (_, mut f))| {
            fill_checksums(&mut f, i % 4 == 3);
            (1 + (i as u32 % ports), f)
        })
        .collect()
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

// ---- The harness: send, expect, compare.

/// What a test checked.
#[derive(Default, Debug)]
struct Counts {
    /// Frames sent into the switch.
    frames: u64,
    /// Copies that arrived as expected (port and bytes).
    copies: u64,
    /// Of those, copies whose bytes differ from the frame sent (rewritten).
    rewritten: u64,
    /// Of those, copies that left without the marker, attributed by their bytes.
    unmarked: u64,
    /// Frames the oracle drops, after which nothing arrived.
    drops: u64,
    /// Copies the oracle sends to a port no interface carries (LOCAL): not observable.
    unobservable: u64,
    /// Checksums recomputed from scratch and compared, and left uncompared.
    checksums_recomputed: u64,
    checksums_unchecked: u64,
    /// Rule updates through `hyflow ctl`, applied to the oracle too.
    updates: u64,
    /// Frames that arrived and were not sent by the test.
    foreign: u64,
    /// ICMP errors the connection tracker related to a connection (the switch's count equal
    /// to the oracle's).
    related: u64,
    /// Frames the switch's NIC tier (`--nic xdp`) forwarded or dropped in the kernel.
    nic_hits: u64,
    /// Of those sent alone, the frames replay's engine predicts the tier serves (equal to
    /// what it served, or a failure).
    predicted: u64,
}

impl Counts {
    fn add(&mut self, c: &Counts) {
        self.predicted += c.predicted;
        self.nic_hits += c.nic_hits;
        self.frames += c.frames;
        self.copies += c.copies;
        self.rewritten += c.rewritten;
        self.unmarked += c.unmarked;
        self.drops += c.drops;
        self.unobservable += c.unobservable;
        self.checksums_recomputed += c.checksums_recomputed;
        self.checksums_unchecked += c.checksums_unchecked;
        self.updates += c.updates;
        self.foreign += c.foreign;
        self.related += c.related;
    }
}

/// A frame sent, and what should come of it.
struct Sent {
    in_port: u32,
    frame: Vec<u8>,
    arrived: FlowKey,
    expected: Vec<Expected>,
}

/// A rule update, as `hyflow ctl` takes it.
enum CtlUpdate<'a> {
    AddFlow(&'a str),
    AddFlows(&'a [&'a str]),
    ModFlows { strict: bool, flow: &'a str },
    DelFlows { strict: bool, matches: &'a str },
}

/// A switch on its topology, the oracle, and our sockets on the peers.
struct Live {
    name: String,
    oracle: Oracle,
    /// With the XDP tier at its defaults: what `replay`'s engine predicts the tier serves.
    predictor: Option<Oracle>,
    /// Whether every frame so far was sent alone (then the tier serves exactly what the
    /// predictor says: each install is in the kernel before the next frame).
    sequential: bool,
    peers: BTreeMap<u32, PeerSocket>,
    /// Dropped before the topology: the switch ends before its interfaces go.
    switch: LiveSwitch,
    topo: Topology,
    run_id: u32,
    sent: Vec<Sent>,
    /// How long nothing must arrive after a frame the oracle drops.
    quiet: Duration,
    /// Whether decisions depend on the order of frames (connection tracking, MAC learning):
    /// then a frame the oracle drops is followed by a barrier, so that the next frame cannot
    /// reach the switch before it.
    ordered: bool,
    counts: Counts,
    failures: Vec<String>,
    buf: Vec<u8>,
}

/// The files a pipeline is loaded from.
struct PipelineFiles<'a> {
    flows: &'a Path,
    tables: Option<&'a Path>,
    groups: Option<&'a Path>,
}

impl Live {
    /// Builds the topology of `ports`, runs the switch on `files` (with `extra` options),
    /// opens our sockets and the oracle.
    fn start(
        name: &str,
        ports: &[(String, u32)],
        files: PipelineFiles,
        extra: &[&str],
        ordered: bool,
    ) -> Live {
        let topo = Topology::new(ports);
        let ports_text: String = ports.iter().map(|(n, p)| format!("{n}={p}\n")).collect();
        let ports_file = topo.file("ports.txt", &ports_text);
        let names = NameArgs {
            ports: Some(ports_file.clone()),
            tables: files.tables.map(Path::to_path_buf),
            groups: files.groups.map(Path::to_path_buf),
        };
        let oracle = Oracle::new(files.flows, &names);
        let predictor = (extra.contains(&"xdp")
            && !extra.iter().any(|a| a.starts_with("--nic-") || *a == "--policy"))
        .then(|| Oracle::predictor(files.flows, &names));
        let peers: BTreeMap<u32, PeerSocket> =
            topo.ports.iter().map(|p| (p.number, PeerSocket::open(&p.peer))).collect();
        let mut args = vec!["--ports", path_str(&ports_file)];
        if let Some(t) = files.tables {
            args.extend(["--tables", path_str(t)]);
        }
        if let Some(g) = files.groups {
            args.extend(["--groups", path_str(g)]);
        }
        args.extend_from_slice(extra);
        let switch = LiveSwitch::start(&topo, files.flows, &args);
        let run_id = (std::process::id() << 8) | (topo.n as u32 & 0xff);
        let mut live = Live {
            name: name.to_string(),
            run_id,
            oracle,
            predictor,
            sequential: true,
            peers,
            switch,
            topo,
            sent: Vec::new(),
            // After a frame the oracle drops: long enough to pace the sends and to see most
            // copies that should not be there within their own frame's time (a late one is
            // still caught by its marker).
            quiet: Duration::from_millis(3),
            ordered,
            counts: Counts::default(),
            failures: Vec::new(),
            buf: vec![0; 65536],
        };
        let show = live.switch.show();
        let io = show["io"].as_str().unwrap_or("?").to_string();
        eprintln!("{name}: switch ready, io {io}, ports {}", ports_text.trim().replace('\n', " "));
        if io.starts_with("afxdp") {
            assert!(
                live.topo.links().contains("xdp"),
                "afxdp without an XDP program:\n{}",
                live.topo.links()
            );
        }
        // Anything already waiting was not sent by us.
        for (port, copy) in live.receive(Duration::from_millis(50)) {
            live.foreign(port, &copy);
        }
        live
    }

    /// The io the switch reports.
    fn io(&self) -> String {
        self.switch.show()["io"].as_str().unwrap_or("?").to_string()
    }

    /// Copies that arrive within `wait` (at least one poll), with their port.
    fn receive(&mut self, wait: Duration) -> Vec<(u32, Vec<u8>)> {
        let mut fds: Vec<libc::pollfd> = self
            .peers
            .values()
            .map(|p| libc::pollfd { fd: p.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 })
            .collect();
        let ms = wait.as_millis().clamp(0, 1000) as i32;
        // SAFETY: `fds` is a live array of pollfd of the length passed.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        let mut got = Vec::new();
        for (&port, peer) in &self.peers {
            while let Some(copy) = peer.receive(&mut self.buf) {
                got.push((port, copy));
            }
        }
        got
    }

    fn foreign(&mut self, port: u32, copy: &[u8]) {
        self.counts.foreign += 1;
        if self.counts.foreign <= 3 {
            self.fail(format!("a frame the test did not send arrived on port {port}:\n{}", hex(copy)));
        }
    }

    fn fail(&mut self, what: String) {
        eprintln!("{}: FAILURE: {what}", self.name);
        self.failures.push(what);
        if self.failures.len() >= MAX_FAILURES {
            panic!(
                "{}: {} failures, stopping:\n\n{}",
                self.name,
                self.failures.len(),
                self.failures.join("\n\n")
            );
        }
    }

    /// What was sent as frame `seq`, and what should have come of it.
    fn describe(&self, seq: usize) -> String {
        let s = &self.sent[seq];
        let expected: Vec<String> = s
            .expected
            .iter()
            .map(|e| format!("    port {} (unchecked {:?}):\n{}", e.port, e.unchecked, hex(&e.bytes)))
            .collect();
        format!(
            "frame #{seq} into port {}: {}\n{}\n  expected {} copies{}{}",
            s.in_port,
            format_flow(&s.arrived),
            hex(&s.frame),
            s.expected.len(),
            if expected.is_empty() { "" } else { ":\n" },
            expected.join("\n")
        )
    }

    /// Sends each frame into its port, one at a time, and checks what arrives before the next.
    fn send_frames(&mut self, frames: &[(u32, Vec<u8>)]) {
        for (in_port, frame) in frames {
            let seq = self.prepare(*in_port, frame);
            self.transmit(seq);
            self.check(seq..seq + 1);
            if self.ordered && self.sent[seq].expected.is_empty() {
                self.barrier();
            }
        }
    }

    /// Sends the frames in bursts of `burst`, checking what arrives after each: the switch's
    /// batch path (many frames per receive batch, frames of several ports in one round, many
    /// copies per flush). The switch is paused (SIGSTOP) while a burst is sent, so that the
    /// burst waits whole in its rings. Only for pipelines whose decisions do not depend on the
    /// order of frames, which a burst over several ports does not keep.
    fn send_bursts(&mut self, frames: &[(u32, Vec<u8>)], burst: usize) {
        assert!(!self.ordered, "bursts do not keep the order of frames across ports");
        self.check_prediction();
        self.sequential = false;
        for chunk in frames.chunks(burst) {
            let first = self.sent.len();
            for (in_port, frame) in chunk {
                self.prepare(*in_port, frame);
            }
            self.switch.signal(libc::SIGSTOP);
            for seq in first..self.sent.len() {
                self.transmit(seq);
            }
            std::thread::sleep(Duration::from_millis(20));
            self.switch.signal(libc::SIGCONT);
            self.check(first..self.sent.len());
        }
    }

    /// Marks `frame` with the next sequence number and asks the oracle what should come of
    /// it; returns the sequence number.
    fn prepare(&mut self, in_port: u32, frame: &[u8]) -> usize {
        let seq = self.sent.len();
        let mut frame = frame.to_vec();
        frame.extend_from_slice(&MARK);
        frame.extend_from_slice(&self.run_id.to_be_bytes());
        frame.extend_from_slice(&(seq as u32).to_be_bytes());
        let (arrived, outputs) = self.oracle.process(&frame, in_port);
        if let Some(p) = &mut self.predictor {
            p.process(&frame, in_port);
        }
        let mut expected = Vec::new();
        for out in &outputs {
            if self.peers.contains_key(&out.port) {
                expected.push(expected_frame(&frame, &arrived, &out.packet, out.port));
            } else {
                self.counts.unobservable += 1;
            }
        }
        self.sent.push(Sent { in_port, frame, arrived, expected });
        seq
    }

    fn transmit(&mut self, seq: usize) {
        let s = &self.sent[seq];
        self.peers.get(&s.in_port).unwrap_or_else(|| panic!("no peer for port {}", s.in_port)).send(&s.frame);
        self.counts.frames += 1;
    }

    /// Receives the copies of the frames `seqs` (just sent): every copy expected must arrive
    /// within 2 s, and nothing else — after the last expected copy, or when none is expected,
    /// nothing more for a quiet period (a single frame with copies expected ends at its last).
    fn check(&mut self, seqs: Range<usize>) {
        let mut pending: Vec<Vec<Expected>> = seqs.clone().map(|s| self.sent[s].expected.clone()).collect();
        let mut wrong: Vec<Vec<(u32, Vec<u8>)>> = vec![Vec::new(); seqs.len()];
        let linger = seqs.len() > 1 || pending[0].is_empty();
        let patience = Duration::from_millis(if self.failures.is_empty() { 2000 } else { 300 });
        let start = Instant::now();
        let mut done_at = None;
        loop {
            let now = Instant::now();
            if done_at.is_none() && pending.iter().all(Vec::is_empty) {
                done_at = Some(now);
            }
            let deadline = match done_at {
                Some(_) if !linger => break,
                Some(at) => at + self.quiet,
                None => start + patience,
            };
            if now >= deadline {
                break;
            }
            for (port, copy) in self.receive((deadline - now).min(Duration::from_millis(5))) {
                match self.marker(&copy) {
                    Some(s) if seqs.contains(&s) => {
                        let i = s - seqs.start;
                        match pending[i].iter().position(|e| e.matches(port, &copy)) {
                            Some(j) => {
                                let e = pending[i].swap_remove(j);
                                self.matched(&e, s, false);
                            }
                            None => wrong[i].push((port, copy)),
                        }
                    }
                    Some(s) => {
                        let what = format!(
                            "a copy of frame #{s} arrived on port {port} after its expected copies (while frames #{}..#{} were checked): more copies than expected\n{}\n  got:\n{}",
                            seqs.start,
                            seqs.end - 1,
                            self.describe(s),
                            hex(&copy)
                        );
                        self.fail(what);
                    }
                    // Without our marker: a copy of one of these frames that lost it (none
                    // should), or a frame not ours.
                    None => {
                        let found = pending
                            .iter()
                            .enumerate()
                            .find_map(|(i, p)| p.iter().position(|e| e.matches(port, &copy)).map(|j| (i, j)));
                        match found {
                            Some((i, j)) => {
                                let e = pending[i].swap_remove(j);
                                self.matched(&e, seqs.start + i, true);
                            }
                            None => self.foreign(port, &copy),
                        }
                    }
                }
            }
        }
        for (i, seq) in seqs.enumerate() {
            if self.sent[seq].expected.is_empty() && wrong[i].is_empty() {
                self.counts.drops += 1;
            }
            if pending[i].is_empty() && wrong[i].is_empty() {
                continue;
            }
            let got: Vec<String> = wrong[i]
                .iter()
                .map(|(port, copy)| {
                    let near = pending[i]
                        .iter()
                        .find(|e| e.port == *port)
                        .map(|e| format!(" — differs at {}", differences(e, copy)))
                        .unwrap_or_default();
                    format!("    port {port}{near}:\n{}", hex(copy))
                })
                .collect();
            let missing: Vec<String> = pending[i].iter().map(|e| format!("port {}", e.port)).collect();
            let what = format!(
                "{}\n  missing: [{}]\n  got instead:\n{}",
                self.describe(seq),
                missing.join(", "),
                got.join("\n")
            );
            self.fail(what);
        }
    }

    fn matched(&mut self, e: &Expected, seq: usize, unmarked: bool) {
        self.counts.copies += 1;
        self.counts.rewritten += (e.bytes != self.sent[seq].frame) as u64;
        self.counts.unmarked += unmarked as u64;
        self.counts.checksums_recomputed += e.recomputed as u64;
        self.counts.checksums_unchecked += e.unchecked.len() as u64;
    }

    /// The sequence number of our marker at the end of `copy`.
    fn marker(&self, copy: &[u8]) -> Option<usize> {
        let m = copy.get(copy.len().checked_sub(MARK_LEN)?..)?;
        let run = u32::from_be_bytes(m[4..8].try_into().expect("4 bytes"));
        let seq = u32::from_be_bytes(m[8..12].try_into().expect("4 bytes")) as usize;
        (m[..4] == MARK && run == self.run_id && seq < self.sent.len()).then_some(seq)
    }

    /// Waits until the switch has taken in every frame sent (its packet count), so that a rule
    /// update cannot overtake a frame sent before it.
    fn barrier(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let packets = self.switch.show()["packets"].as_u64().expect("show --json has packets");
            if packets == self.counts.frames {
                return;
            }
            if packets > self.counts.frames || Instant::now() > deadline {
                let what = format!(
                    "the switch counts {packets} packets where the test sent {} frames",
                    self.counts.frames
                );
                self.fail(what);
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Applies an update to the oracle and the predictor.
    fn update_models(&mut self, command: Update, text: &str) {
        self.oracle.update(command, text);
        if let Some(p) = &mut self.predictor {
            p.update(command, text);
        }
    }

    /// Runs the timers due now in the oracle and the predictor, as the switch does when idle.
    fn advance(&mut self) {
        self.oracle.advance();
        if let Some(p) = &mut self.predictor {
            p.advance();
        }
    }

    /// While every frame went alone: the frames the XDP tier served are exactly those the
    /// predictor's NIC serves.
    fn check_prediction(&mut self) {
        if self.predictor.is_none() || !self.sequential {
            return;
        }
        self.barrier();
        let predicted = self.predictor.as_ref().map_or(0, |p| p.switch.stats().nic_hits);
        let live = self.switch.show()["nic_hits"].as_u64().unwrap_or(0);
        eprintln!("{}: NIC tier served {live} frames, the engine predicts {predicted}", self.name);
        self.counts.predicted = predicted;
        if live != predicted {
            self.fail(format!(
                "the XDP tier served {live} frames where replay's engine predicts {predicted}"
            ));
        }
    }

    /// Applies a rule update through `hyflow ctl` and to the oracle; from when it returns,
    /// the frames sent must follow the new rules.
    fn update(&mut self, update: CtlUpdate) {
        self.barrier();
        match update {
            CtlUpdate::AddFlow(flow) => {
                self.switch.ctl(&["add-flow", flow]);
                self.update_models(Update::Add, flow);
            }
            CtlUpdate::AddFlows(lines) => {
                let file = self.topo.file("add.flows", &(lines.join("\n") + "\n"));
                self.switch.ctl(&["add-flows", path_str(&file)]);
                for flow in lines {
                    self.update_models(Update::Add, flow);
                }
            }
            CtlUpdate::ModFlows { strict, flow } => {
                let (args, command): (&[&str], _) = match strict {
                    true => (&["mod-flows", "--strict", flow], Update::ModifyStrict),
                    false => (&["mod-flows", flow], Update::Modify),
                };
                self.switch.ctl(args);
                self.update_models(command, flow);
            }
            CtlUpdate::DelFlows { strict, matches } => {
                let (args, command): (&[&str], _) = match strict {
                    true => (&["del-flows", "--strict", matches], Update::DeleteStrict),
                    false => (&["del-flows", matches], Update::Delete),
                };
                self.switch.ctl(args);
                self.update_models(command, matches);
            }
        }
        self.counts.updates += 1;
    }

    /// Waits for late copies, checks that the switch took in exactly the frames sent, stops
    /// it and returns what was checked (after failing on any failure).
    fn finish(mut self) -> Counts {
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            for (port, copy) in self.receive(Duration::from_millis(20)) {
                match self.marker(&copy) {
                    Some(s) => {
                        let what = format!("a late extra copy of frame #{s} on port {port}:\n{}", hex(&copy));
                        self.fail(what);
                    }
                    None => self.foreign(port, &copy),
                }
            }
        }
        self.barrier();
        // The switch's connection tracker went through what the oracle's did.
        let show = self.switch.show();
        let ct = self.oracle.switch.conntrack().stats();
        let live = &show["recirculation"]["conntrack"];
        for (field, oracle) in [
            ("packets", ct.packets),
            ("invalid", ct.invalid),
            ("committed", ct.committed),
            ("translated", ct.translated),
            ("related", ct.related),
        ] {
            let got = live[field].as_u64().unwrap_or(0);
            if got != oracle {
                let what =
                    format!("the switch's conntrack counts {got} {field} where the oracle's counts {oracle}");
                self.fail(what);
            }
        }
        self.check_prediction();
        self.counts.related = ct.related;
        self.counts.nic_hits = show["nic_hits"].as_u64().unwrap_or(0);
        let Live { name, switch, failures, counts, topo, peers, .. } = self;
        let report = switch.stop();
        drop(peers);
        drop(topo);
        eprintln!("{name}: checked {counts:?}");
        let summary = report.lines().find(|l| l.starts_with("packets ")).unwrap_or("").to_string();
        eprintln!("{name}: switch report: {summary}");
        assert!(failures.is_empty(), "{name}: {} failures:\n\n{}", failures.len(), failures.join("\n\n"));
        assert_eq!(counts.foreign, 0, "{name}: frames the test did not send arrived");
        // The report it printed on SIGTERM counts every frame sent.
        assert!(
            summary.starts_with(&format!("packets {} ", counts.frames)),
            "{name}: the report says {summary:?}"
        );
        counts
    }
}

// ---- Workloads.

/// The built-in pipeline on its ports 1–4 with generated traffic, through the switch's
/// default I/O on two cores (each polling two ports, both sending to all four), with rule
/// updates between passes over the same frames.
#[test]
fn l2l3acl_generated_traffic_with_updates() {
    if !is_root() {
        return;
    }
    let c = l2l3acl("l2l3acl", &["--cores", "2"]);
    assert_eq!(c.nic_hits, 0, "{c:?}");
}

/// The same on two cores steered by the 5-tuple's addresses and ports: each queue's frames
/// spread over both cores' sockets by the XDP program's hash, every frame of a flow on one.
#[test]
fn l2l3acl_steered_over_two_cores() {
    if !is_root() {
        return;
    }
    let c = l2l3acl("l2l3acl-steer", &["--cores", "2", "--steer", "nw_src,nw_dst,tp_src,tp_dst"]);
    assert_eq!(c.nic_hits, 0, "{c:?}");
}

/// A UDP datagram over IPv4 from 10.0.0.1:`sport` to 10.0.0.2:`dport` carrying `payload`
/// (checksum 0: none, as UDP over IPv4 allows).
fn udp_datagram(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0];
    f.extend_from_slice(&((20 + 8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    let mut sum: u32 = f[14..34].chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]]) as u32).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// `--steer memcached.key` (FlexNIC's key-based steering in the switch's XDP program): every
/// memcached request for a key reaches one core whichever client port sent it, in the ASCII
/// and the binary protocol alike; requests for many keys, and other traffic (by addresses and
/// ports), spread over both cores; every frame still the engine's.
#[test]
fn memcached_requests_steered_by_their_key() {
    if !is_root() {
        return;
    }
    let flows = examples().join("l2l3acl.flows");
    let files = PipelineFiles { flows: &flows, tables: None, groups: None };
    let extra = ["--cores", "2", "--steer", "memcached.key"];
    let mut live = Live::start("memcached-steer", &numbered_ports(4), files, &extra, false);
    let get = |sport: u16, key: &str| {
        (1, udp_datagram(sport, 11211, format!("\0\x01\0\0\0\x01\0\0get {key}\r\n").as_bytes()))
    };
    // One key from 40 client ports: one core.
    live.send_frames(&(0..40).map(|i| get(40_000 + i, "alpha")).collect::<Vec<_>>());
    let cores = core_packets(&live.switch.show());
    assert!(cores.iter().filter(|&&n| n == 40).count() == 1 && cores.iter().sum::<u64>() == 40, "{cores:?}");
    let alpha = cores.iter().position(|&n| n == 40).expect("one core");
    // The binary protocol's GET of the same key: the same core.
    let mut bin = vec![0u8, 2, 0, 0, 0, 1, 0, 0, 0x80, 0x00, 0, 5, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0];
    bin.extend_from_slice(&[0; 8]);
    bin.extend_from_slice(b"alpha");
    live.send_frames(&(0..20).map(|i| (1, udp_datagram(41_000 + i, 11211, &bin))).collect::<Vec<_>>());
    let cores = core_packets(&live.switch.show());
    assert_eq!(cores[alpha], 60, "{cores:?}");
    // Many keys from one port, and other traffic from many ports: both cores.
    live.send_frames(&(0..60).map(|i| get(42_000, &format!("key{i}"))).collect::<Vec<_>>());
    let after_keys = core_packets(&live.switch.show());
    assert!(after_keys.iter().zip(&cores).all(|(a, b)| a - b >= 10), "{cores:?} -> {after_keys:?}");
    live.send_frames(
        &(0..60).map(|i| (1, udp_datagram(43_000 + i, 53, b"not memcached"))).collect::<Vec<_>>(),
    );
    let after_other = core_packets(&live.switch.show());
    assert!(
        after_other.iter().zip(&after_keys).all(|(a, b)| a - b >= 10),
        "{after_keys:?} -> {after_other:?}"
    );
    live.finish();
}

/// A FlexStorm tuple for `worker` from DCCP port `sport` (10.0.0.1 to 10.0.0.2, port 4444).
fn storm_tuple(sport: u16, worker: u16) -> Vec<u8> {
    let (src, dst) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let mut segment = Vec::new();
    hyflow::storm::dccp::write_data(&mut segment, (src, dst), (sport, 4444), 1, worker, b"@user");
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0];
    f.extend_from_slice(&((20 + segment.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 64, hyflow::storm::dccp::IP_DCCP, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    let sum = hyflow::packet::checksum::fold(hyflow::packet::checksum::ones_sum(0, &f[14..34]));
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&segment);
    f
}

/// `--steer storm.worker` (FlexStorm's demultiplexing in the switch's XDP program): every
/// tuple for worker w reaches core w mod 2 whichever connection carried it; other frames go
/// by the default fields (addresses and ports).
#[test]
fn storm_tuples_steered_by_their_worker() {
    if !is_root() {
        return;
    }
    let flows = examples().join("l2l3acl.flows");
    let files = PipelineFiles { flows: &flows, tables: None, groups: None };
    let extra = ["--cores", "2", "--steer", "storm.worker"];
    let mut live = Live::start("storm-steer", &numbered_ports(4), files, &extra, false);
    let mut expected = [0u64; 2];
    for worker in [0u16, 1, 2, 5] {
        live.send_frames(&(0..30).map(|i| (1, storm_tuple(50_000 + i, worker))).collect::<Vec<_>>());
        expected[worker as usize % 2] += 30;
        assert_eq!(core_packets(&live.switch.show()), expected, "worker {worker}");
    }
    // Not a tuple (DCCP-Acks for worker 1's connection, tuples to another port): by the
    // other fields — which for DCCP are the addresses alone (Open vSwitch extracts no DCCP
    // ports), so all on one core, whatever their worker field says.
    let mut ack = storm_tuple(50_000, 1);
    ack[34 + 8] = hyflow::storm::dccp::packet_type::ACK << 1 | 1;
    let mut other_port = storm_tuple(50_000, 1);
    other_port[36..38].copy_from_slice(&4445u16.to_be_bytes());
    live.send_frames(
        &(0..40).map(|i| (1, if i % 2 == 0 { ack.clone() } else { other_port.clone() })).collect::<Vec<_>>(),
    );
    let after = core_packets(&live.switch.show());
    let grown: Vec<u64> = after.iter().zip(&expected).map(|(a, b)| a - b).collect();
    assert!(grown.contains(&40) && grown.contains(&0), "{expected:?} -> {after:?}");
    // UDP to port 4444 from many ports: by addresses and ports, both cores.
    live.send_frames(
        &(0..60).map(|i| (1, udp_datagram(52_000 + i, 4444, b"not a tuple"))).collect::<Vec<_>>(),
    );
    let last = core_packets(&live.switch.show());
    assert!(last.iter().zip(&after).all(|(a, b)| a - b >= 10), "{after:?} -> {last:?}");
    live.finish();
}

/// The same through the XDP tier (native XDP; the peers' GRO on for the redirect): the
/// frames of cached flows are forwarded by the XDP program, rewritten in the kernel, and
/// must be byte for byte what the engine sends; every update takes the entries it outdates
/// out of the kernel before `hyflow ctl` returns; while frames go one at a time, the tier
/// serves exactly the frames `replay`'s engine predicts.
#[test]
fn l2l3acl_through_the_xdp_tier() {
    if !is_root() {
        return;
    }
    let c = l2l3acl("l2l3acl-xdp", &["--nic", "xdp", "--xdp-mode", "native"]);
    assert!(c.nic_hits >= 400 && c.predicted >= 100, "{c:?}");
}

/// The same through the XDP tier under each policy that fills an exact-match table live
/// (windows of a second, every software packet sampled, a low queue threshold: so that each
/// decides within the test): every frame still the engine's, through installs, evictions
/// and the updates' revalidation of the kernel's entries.
#[test]
fn l2l3acl_through_the_xdp_tier_under_each_policy() {
    if !is_root() {
        return;
    }
    let table = ["--large-entries", "200", "--bursty-entries", "8"];
    let policies: [(&str, &[&str]); 3] = [
        (
            "elixir",
            &[
                "--replacement-window",
                "1",
                "--identification-window",
                "1",
                "--sample-rate",
                "1",
                "--queue-threshold",
                "16",
            ],
        ),
        ("tfo", &[]),
        ("ovs-rebalance", &[]),
    ];
    for (policy, options) in policies {
        let mut extra = vec!["--nic", "xdp", "--policy", policy];
        extra.extend(table);
        extra.extend(options);
        let c = l2l3acl(&format!("l2l3acl-{policy}"), &extra);
        eprintln!("{policy}: {c:?}");
        assert!(c.nic_hits >= 50, "{policy}: {c:?}");
    }
}

/// The built-in pipeline with generated traffic, `extra` options, every update kind.
fn l2l3acl(name: &str, extra: &[&str]) -> Counts {
    let flows = examples().join("l2l3acl.flows");
    let files = PipelineFiles { flows: &flows, tables: None, groups: None };
    let mut live = Live::start(name, &numbered_ports(4), files, extra, false);
    let frames = generated_traffic(&live.topo.dir, &flows, 300, 11, 4);
    let steered = extra.contains(&"--steer");
    if steered {
        // One flow's frames all land on one core.
        live.send_frames(&vec![frames[0].clone(); 40]);
        let cores = core_packets(&live.switch.show());
        assert!(
            cores.iter().filter(|&&n| n == 40).count() == 1 && cores.iter().sum::<u64>() == 40,
            "{cores:?}"
        );
    }
    live.send_frames(&frames);
    if steered {
        // Many flows' frames spread over both.
        let cores = core_packets(&live.switch.show());
        assert!(cores.len() == 2 && cores.iter().all(|&n| n >= 60), "{cores:?}");
    }
    // The same frames again in bursts: many frames per receive batch and per flush.
    live.send_bursts(&frames, 32);
    // TCP dropped at the first table, UDP redirected: frames whose decisions are cached.
    live.update(CtlUpdate::AddFlow("table=0,priority=250,tcp,actions=drop"));
    live.update(CtlUpdate::AddFlows(&[
        "table=0,priority=250,udp,actions=mod_dl_src:02:00:00:00:00:99,output:4",
    ]));
    live.send_frames(&frames);
    live.update(CtlUpdate::ModFlows {
        strict: true,
        flow: "table=0,priority=250,tcp,actions=dec_ttl,output:3",
    });
    live.send_frames(&frames);
    live.update(CtlUpdate::DelFlows { strict: false, matches: "table=0,udp" });
    live.update(CtlUpdate::DelFlows { strict: true, matches: "table=0,priority=250,tcp" });
    live.send_frames(&frames);
    // A rule with a hard timeout: in force at once, gone 3 s later without a packet to wake
    // the switch (its timers do), and the frames after follow the rules without it.
    let some = &frames[..100];
    live.update(CtlUpdate::AddFlow("table=0,priority=301,hard_timeout=3,ip,actions=mod_nw_tos:4,output:2"));
    let added = Instant::now();
    live.send_frames(some);
    assert!(added.elapsed() < Duration::from_millis(2500), "the frames took too long to fit the rule's life");
    assert!(live.switch.ctl(&["dump-flows"]).contains("priority=301"));
    std::thread::sleep(Duration::from_millis(4300).saturating_sub(added.elapsed()));
    let dump = live.switch.ctl(&["dump-flows"]);
    assert!(!dump.contains("priority=301"), "the rule outlived its hard timeout:\n{dump}");
    live.advance();
    live.send_frames(some);
    // The costs fitted from the rounds forwarded so far, and `calibrate --live` writing them
    // as a costs file `sim` loads.
    let out = live.topo.dir.join("costs.json");
    run(BIN, &["calibrate", "--live", path_str(&live.switch.ctl), "--out", path_str(&out)]);
    let text = std::fs::read_to_string(&out).expect("calibrate --live wrote its file");
    hyflow::cost_model::CostModel::from_json(&text).expect("a costs file sim loads");
    // Every frame software decided is in the fit's rounds, by the layer that decided it (the
    // costs themselves are timings of a few hundred frames here: not checked).
    let fit: serde_json::Value = serde_json::from_str(&live.switch.ctl(&["costs"])).expect("JSON");
    let show = live.switch.show();
    let layers = ["microflow_hits", "megaflow_hits", "upcalls"].map(|k| show[k].as_u64().unwrap());
    let fitted: Vec<u64> = (0..3).map(|i| fit["frames"][i].as_u64().unwrap()).collect();
    assert_eq!(fitted, layers, "{fit}");
    // Every frame software got through AF_XDP carries the XDP program's stamp, where the
    // kernel lets the program write metadata (`xdp_stamps`): each one's latency is measured.
    let latency = &show["latency_sw_us"];
    let measured = latency["count"].as_u64().expect("count");
    let stamped = show["xdp_stamps"].as_bool().expect("xdp_stamps says whether frames are stamped");
    assert!(live.io().starts_with("afxdp") || !stamped, "AF_PACKET frames carry no stamp");
    if stamped {
        assert!(measured == layers.iter().sum::<u64>() && latency["p99"].as_f64() > Some(0.0), "{latency}");
    } else {
        assert_eq!(measured, 0, "frames without a stamp have no latency");
    }
    assert!(fit["rounds"].as_u64().is_some_and(|n| n > 0), "{fit}");
    if extra.contains(&"xdp") && !extra.contains(&"--policy") {
        // What the kernel holds, with its own counters: the frames just sent hit it (a
        // policy may have replaced them all after the idle seconds above).
        let dump = live.switch.ctl(&["dump-nic"]);
        let hit = dump.lines().filter(|l| !l.contains("packets:0,")).count();
        assert!(hit >= 1 && dump.contains("actions:"), "dump-nic:\n{dump}");
    }
    let c = live.finish();
    assert!(c.frames >= 1600 && c.updates == 6, "{c:?}");
    assert!(c.copies >= 400 && c.rewritten >= 400 && c.drops >= 1000, "{c:?}");
    assert!(c.checksums_recomputed >= 800, "{c:?}");
    c
}

/// Frames each core received, from `show --json`.
fn core_packets(show: &serde_json::Value) -> Vec<u64> {
    show["cores"].as_array().expect("cores").iter().map(|c| c["packets"].as_u64().expect("packets")).collect()
}

/// An operator pipeline from `examples/DIR` with `hyflow gen conversations` of its spec, then
/// the same frames again after a rule update and after its removal, on `cores` cores.
fn operator(
    dir: &str,
    flows: &str,
    (tables, groups): (bool, bool),
    cores: &str,
    update: &str,
    strict_match: &str,
) -> Counts {
    let d = examples().join(dir);
    let (flows, tables, groups) =
        (d.join(flows), tables.then(|| d.join("tables.txt")), groups.then(|| d.join("groups.txt")));
    let ports_file = d.join("ports.txt");
    let ports = read_ports(&ports_file);
    let files = PipelineFiles { flows: &flows, tables: tables.as_deref(), groups: groups.as_deref() };
    let mut live = Live::start(dir, &ports, files, &["--cores", cores], true);
    let pcap = live.topo.dir.join("conversations.pcapng");
    let mut args =
        vec!["gen", "conversations", "--flows", path_str(&flows), "--ports", path_str(&ports_file)];
    let (t, g) = (tables.as_deref().map(path_str), groups.as_deref().map(path_str));
    if let Some(t) = t {
        args.extend(["--tables", t]);
    }
    if let Some(g) = g {
        args.extend(["--groups", g]);
    }
    let spec = d.join("conversations.txt");
    args.extend(["--spec", path_str(&spec), "--out", path_str(&pcap), "--conversations", "40"]);
    args.extend(["--exchanges", "2", "--seed", "5"]);
    run(BIN, &args);
    let (frames, skipped) = read_capture(&pcap);
    assert_eq!(skipped, 0);
    let frames: Vec<(u32, Vec<u8>)> = frames
        .into_iter()
        .enumerate()
        .map(|(i, (interface, mut f))| {
            fill_checksums(&mut f, i % 4 == 3);
            (interface + 1, f)
        })
        .collect();
    live.send_frames(&frames);
    live.update(CtlUpdate::AddFlow(update));
    live.send_frames(&frames);
    live.update(CtlUpdate::DelFlows { strict: true, matches: strict_match });
    live.send_frames(&frames);
    live.finish()
}

#[test]
fn antrea_conversations_with_conntrack_and_updates() {
    if !is_root() {
        return;
    }
    // Traffic to the peer Node's Pods (through the tunnel) dropped while the rule is in; the
    // connections' state shared by three cores, each polling some of the five ports.
    let c = operator(
        "antrea",
        "antrea.flows",
        (true, true),
        "3",
        "table=L3Forwarding,priority=500,ip,nw_dst=10.10.1.0/24,actions=drop",
        "table=L3Forwarding,priority=500,ip,nw_dst=10.10.1.0/24",
    );
    assert!(c.frames >= 800 && c.copies >= 600 && c.rewritten >= 450 && c.drops >= 80, "{c:?}");
}

#[test]
fn ovn_conversations_with_conntrack_and_updates() {
    if !is_root() {
        return;
    }
    let c = operator(
        "ovn",
        "ovn.flows",
        (false, false),
        "1",
        "table=0,priority=1000,tcp,tp_dst=22,actions=drop",
        "table=0,priority=1000,tcp,tp_dst=22",
    );
    assert!(c.frames >= 750 && c.copies >= 600 && c.rewritten >= 450 && c.drops >= 60, "{c:?}");
}

/// The headers and 5-tuple (addresses, protocol, ports) of an IPv4 TCP or UDP frame.
type Tuple = ([u8; 4], [u8; 4], u8, u16, u16);

fn ipv4_tuple(f: &[u8]) -> Option<(Net, Tuple)> {
    let n = walk(f)
        .net
        .filter(|n| n.kind == NetKind::Ipv4 && n.transport && matches!(n.proto, IP_TCP | IP_UDP))?;
    let addr = |at: usize| -> [u8; 4] { f[at..at + 4].try_into().expect("4 bytes") };
    Some((n, (addr(n.at + 12), addr(n.at + 16), n.proto, be16(f, n.l4), be16(f, n.l4 + 2))))
}

/// ICMP errors for the first `n` IPv4 TCP and UDP connections of `frames` that have a reply:
/// each goes in where the reply did, with the reply's Ethernet and IP headers, and carries the
/// connection's first packet (its IP header and 8 bytes of transport), as a host or router
/// on the reply's side would send it (destination or port unreachable). With `stray`, the
/// carried packet's destination port is changed, so that it belongs to no connection.
fn icmp_errors(frames: &[(u32, Vec<u8>)], n: usize, stray: bool) -> Vec<(u32, Vec<u8>)> {
    let mut errors = Vec::new();
    let mut seen = Vec::new();
    for (i, (_, request)) in frames.iter().enumerate() {
        let Some((q, (src, dst, proto, sport, dport))) = ipv4_tuple(request) else { continue };
        if seen.contains(&(src, dst, proto, sport, dport)) {
            continue;
        }
        seen.push((src, dst, proto, sport, dport));
        let reply = frames[i + 1..]
            .iter()
            .find(|(_, f)| ipv4_tuple(f).is_some_and(|(_, t)| t == (dst, src, proto, dport, sport)));
        let Some((port, reply)) = reply else { continue };
        let p = walk(reply).net.expect("a reply has IP");
        let mut carried = request[q.at..q.l4 + 8].to_vec();
        if stray {
            let at = q.l4 - q.at + 2;
            carried[at] ^= 0x5a;
        }
        let code = if proto == IP_UDP { 3 } else { 1 };
        let mut icmp = vec![3, code, 0, 0, 0, 0, 0, 0];
        icmp.extend_from_slice(&carried);
        let mut f = reply[..p.l4].to_vec();
        let ihl = p.l4 - p.at;
        f[p.at + 2..p.at + 4].copy_from_slice(&((ihl + icmp.len()) as u16).to_be_bytes());
        f[p.at + 9] = IP_ICMP;
        f.extend_from_slice(&icmp);
        fill_checksums(&mut f, false);
        errors.push((*port, f));
        if errors.len() == n {
            break;
        }
    }
    errors
}

/// The conntrack firewall of `examples/firewall` (NORMAL, MAC learning) with conversations of
/// its own spec, and ICMP errors about them: related ones pass, stray ones (of no connection)
/// are invalid; a rule update stops and restores the related ones.
#[test]
fn firewall_conversations_and_icmp_errors() {
    if !is_root() {
        return;
    }
    let d = examples().join("firewall");
    let (flows, ports_file) = (d.join("firewall.flows"), d.join("ports.txt"));
    let ports = read_ports(&ports_file);
    let files = PipelineFiles { flows: &flows, tables: None, groups: None };
    let mut live = Live::start("firewall", &ports, files, &[], true);
    let host = |h: u8| format!("dl_src=02:00:00:00:77:0{h},nw_src=10.77.0.{h}");
    let to = |h: u8| format!("dl_dst=02:00:00:00:77:0{h},nw_dst=10.77.0.{h}");
    let (cli, srv) =
        (format!("in_port=cli,{},{}", host(1), to(2)), format!("in_port=srv,{},{}", host(2), to(1)));
    let spec = [
        format!("weight=3 {cli},tcp,nw_ttl=64,tp_dst=80"),
        format!("weight=3 {cli},udp,nw_ttl=64,tp_dst=5353"),
        format!("weight=1 {cli},icmp,nw_ttl=64,icmp_type=8"),
        format!("weight=1 {cli},tcp,nw_ttl=64,tp_dst=8080"),
        format!("weight=1 {srv},tcp,nw_ttl=64,tp_dst=22"),
    ];
    let spec = live.topo.file("conversations.txt", &(spec.join("\n") + "\n"));
    let pcap = live.topo.dir.join("conversations.pcapng");
    let args = ["gen", "conversations", "--flows", path_str(&flows), "--ports", path_str(&ports_file)];
    let more =
        ["--spec", path_str(&spec), "--out", path_str(&pcap), "--conversations", "40", "--exchanges", "2"];
    run(BIN, &[&args[..], &more[..], &["--seed", "7"][..]].concat());
    let (frames, _) = read_capture(&pcap);
    let frames: Vec<(u32, Vec<u8>)> = frames
        .into_iter()
        .enumerate()
        .map(|(i, (interface, mut f))| {
            fill_checksums(&mut f, i % 4 == 3);
            (interface + 1, f)
        })
        .collect();
    let errors = [icmp_errors(&frames, 12, false), icmp_errors(&frames, 6, true)].concat();
    assert!(errors.len() >= 12, "{} ICMP errors made", errors.len());
    live.send_frames(&frames);
    live.send_frames(&errors);
    live.update(CtlUpdate::AddFlow("table=1,priority=95,ip,ct_state=+trk+rel,actions=drop"));
    live.send_frames(&errors);
    live.update(CtlUpdate::DelFlows { strict: true, matches: "table=1,priority=95,ip,ct_state=+trk+rel" });
    live.send_frames(&errors);
    live.send_frames(&frames);
    let c = live.finish();
    assert!(c.frames >= 450 && c.copies >= 380 && c.drops >= 40 && c.related >= 30, "{c:?}");
}

/// An Ethernet frame: addresses, VLAN tags (TPID, TCI as on the wire), EtherType, payload.
fn ethernet(tags: &[(u16, u16)], ether_type: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x0b, 0x02, 0, 0, 0, 0, 0x0a];
    for &(tpid, tci) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&ether_type.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An IPv4 packet (checksums are filled in later): `options` words of options, the flags and
/// fragment offset word `frag`.
fn ipv4(proto: u8, options: usize, frag: u16, payload: &[u8]) -> Vec<u8> {
    let ihl = 20 + 4 * options;
    let mut p = vec![0x40 | (ihl / 4) as u8, 0x20];
    p.extend_from_slice(&((ihl + payload.len()) as u16).to_be_bytes());
    p.extend_from_slice(&[0x12, 0x34]);
    p.extend_from_slice(&frag.to_be_bytes());
    p.extend_from_slice(&[64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    p.extend(std::iter::repeat_n(1u8, 4 * options));
    p.extend_from_slice(payload);
    p
}

/// An IPv6 packet: `ext` is extension headers (their first next-header byte is set here).
fn ipv6(proto: u8, ext: &[(u8, Vec<u8>)], payload: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    let next = ext.first().map_or(proto, |e| e.0);
    for (i, (_, h)) in ext.iter().enumerate() {
        let mut h = h.clone();
        h[0] = ext.get(i + 1).map_or(proto, |e| e.0);
        body.extend_from_slice(&h);
    }
    body.extend_from_slice(payload);
    let mut p = vec![0x60, 0x01, 0x23, 0x45];
    p.extend_from_slice(&(body.len() as u16).to_be_bytes());
    p.extend_from_slice(&[next, 64]);
    p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    p.extend_from_slice(&body);
    p
}

fn tcp(options: usize, data: &[u8]) -> Vec<u8> {
    let mut t = vec![0x9c, 0x40, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, (5 + options as u8) << 4, 0x18, 0xff, 0xff];
    t.extend_from_slice(&[0, 0, 0, 0]);
    t.extend(std::iter::repeat_n(1u8, 4 * options));
    t.extend_from_slice(data);
    t
}

fn udp(data: &[u8]) -> Vec<u8> {
    let mut u = vec![0x13, 0x88, 0, 53];
    u.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(data);
    u
}

/// An IPv6 fragment header with its offset and flags word (the next header is set by
/// [`ipv6`]).
fn fragment_header(offlg: u16) -> (u8, Vec<u8>) {
    (44, [vec![0, 0], offlg.to_be_bytes().to_vec(), vec![0, 0, 0, 9]].concat())
}

/// Frames made here for what the captures have little of: tags with the DEI bit, three tags,
/// LLC/SNAP, IPv4 options, fragments (first ones of both IP versions, a later IPv6 one), a
/// hop-by-hop header, TCP options, UDP without a checksum. Checksums right where there are
/// any to fill in.
fn edge_frames() -> Vec<Vec<u8>> {
    let data: Vec<u8> = (0..40).collect();
    let arp = [0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 0x0a, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2];
    let ip_udp = ipv4(IP_UDP, 0, 0, &udp(&data));
    let mut snap = vec![0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00];
    snap.extend_from_slice(&ip_udp);
    let mut frames = vec![
        ethernet(&[(ETH_VLAN, 0x3064)], ETH_IPV4, &ipv4(IP_TCP, 0, 0, &tcp(0, &data))),
        ethernet(&[(ETH_QINQ, 0x1010), (ETH_VLAN, 0x1020)], ETH_IPV4, &ip_udp),
        ethernet(&[(ETH_QINQ, 5), (ETH_VLAN, 6), (ETH_VLAN, 7)], ETH_IPV4, &ip_udp),
        ethernet(&[(ETH_VLAN, 0x0009)], ETH_ARP, &arp),
        ethernet(&[], snap.len() as u16, &snap),
        ethernet(&[], ETH_IPV4, &ipv4(IP_UDP, 2, 0, &udp(&data))),
        ethernet(&[], ETH_IPV4, &ipv4(IP_TCP, 0, 0, &tcp(3, &data))),
        ethernet(&[], ETH_IPV4, &ipv4(IP_TCP, 0, 0x2000, &tcp(0, &data))),
        ethernet(&[], ETH_IPV6, &ipv6(IP_TCP, &[], &tcp(2, &data))),
        ethernet(&[], ETH_IPV6, &ipv6(IP_UDP, &[(0, vec![0, 0, 1, 4, 0, 0, 0, 0])], &udp(&data))),
        ethernet(&[], ETH_IPV6, &ipv6(IP_TCP, &[fragment_header(0x0001)], &tcp(0, &data))),
        ethernet(&[], ETH_IPV6, &ipv6(IP_UDP, &[fragment_header(0x0080)], &data)),
    ];
    for f in &mut frames {
        fill_checksums(f, false);
    }
    let mut none = ethernet(&[(ETH_VLAN, 0x0005)], ETH_IPV4, &ip_udp);
    fill_checksums(&mut none, true);
    frames.push(none);
    frames
}

/// Captures of the corpus: real protocols and real damage (QinQ, IPv6 extension headers and
/// fragments, VXLAN, cut and malformed frames, wrong checksums).
const CORPUS: &[&str] = &[
    "802.1ad_QinQ.pcap",
    "802.1D_spanning_tree.pcap",
    "ipv4_tcp_http_xml.pcap",
    "NHRP_registration.pcap",
    "MSTP_Intra-Region_BPDUs.pcap",
    "dns_udp.pcap",
    "dns_tcp.pcap",
    "ntp.pcap",
    "syslog_udp.pcap",
    "tftp.pcap",
    "whois.pcap",
    "tcp_rst_data.pcap",
    "tcp_rst_data-trunc.pcap",
    "tfo-5c1fa7f9ae91.pcap",
    "accecn_handshake.pcap",
    "mptcp-aa-v1.pcap",
    "icmp-rfc8335.pcap",
    "icmpv6.pcap",
    "icmpv6-ra-pref64.pcap",
    "icmp6-rfc8335.pcap",
    "icmpv6-rfc7112.pcap",
    "ipv6-routing-header.pcap",
    "ipv6-srh-ext-header.pcap",
    "ip6_frag_asan.pcap",
    "ipv6_no_next_header.pcap",
    "dhcpv6-ia-na.pcap",
    "bfd-sbfd.pcap",
    "ipv4_invalid_total_length.pcap",
    "ipv4_invalid_hdr_length.pcap",
    "ipv6_invalid_length.pcap",
    "vrrp-vrrp_print-oobr-2.pcap",
    "IGMP_V2.pcap",
    "PIM-DM_pruning.pcap",
    "arp-too-long-tha.pcap",
    "dhcp-rfc4388.pcap",
    "vxlan.pcap",
    "geneve.pcap",
    "mpls-over-udp.pcap",
    "isup.pcap",
    "dccp_partial_csum_v4_simple.pcap",
    "espudp1.pcap",
    "pptp.pcap",
    "gso-ipv6.pcap",
];

/// The corpus's frames, spread over ports 1–4 (frame i on port 1 + i mod 4), then the
/// [`edge_frames`] into each port.
fn corpus_frames() -> (Vec<(u32, Vec<u8>)>, usize) {
    let (mut frames, mut skipped) = (Vec::new(), 0);
    for name in CORPUS {
        let (f, s) = read_capture(&corpus().join(name));
        frames.extend(f.into_iter().map(|(_, f)| f));
        skipped += s;
    }
    let mut frames: Vec<(u32, Vec<u8>)> =
        frames.into_iter().enumerate().map(|(i, f)| (1 + i as u32 % 4, f)).collect();
    for f in edge_frames() {
        frames.extend((1..=4).map(|port| (port, f.clone())));
    }
    (frames, skipped)
}

/// Rewrites of every kind the switch writes onto frames.
const REWRITES: &str = "\
priority=100,in_port=1,tcp,actions=mod_nw_src:10.9.9.9,mod_tp_dst:99,dec_ttl,output:2
priority=100,in_port=1,udp,actions=mod_nw_dst:10.8.8.8,mod_tp_src:5353,mod_nw_tos:8,output:2,mod_dl_dst:02:00:00:00:00:33,output:3
priority=100,in_port=1,icmp,actions=mod_nw_tos:32,set_field:13->icmp_type,set_field:1->icmp_code,output:3
priority=100,in_port=1,sctp,actions=mod_tp_dst:2905,mod_nw_src:10.6.6.6,output:4
priority=90,in_port=1,ip,actions=mod_nw_src:192.0.2.77,set_field:7->nw_ttl,output:4
priority=95,in_port=1,tcp6,actions=set_field:2001:db8::1:2->ipv6_dst,mod_tp_src:4242,output:3
priority=95,in_port=1,udp6,actions=set_field:2001:db8::99->ipv6_src,mod_tp_dst:547,output:2
priority=95,in_port=1,icmp6,actions=set_field:2001:db8::5->ipv6_dst,set_field:2001:db8::6->ipv6_src,output:4
priority=90,in_port=1,ipv6,actions=set_field:2001:db8::99->ipv6_src,dec_ttl,set_field:0x12345->ipv6_label,mod_nw_tos:16,output:2
priority=80,in_port=1,arp,actions=set_field:2->arp_op,set_field:192.0.2.1->arp_spa,set_field:02:00:00:00:00:44->arp_sha,output:4
priority=10,in_port=1,actions=push_vlan:0x8100,mod_vlan_vid:77,output:2,strip_vlan,mod_dl_src:02:aa:bb:cc:dd:ee,output:3
priority=100,in_port=2,vlan_tci=0x1000/0x1000,actions=mod_vlan_vid:5,mod_vlan_pcp:3,output:1,strip_vlan,output:3
priority=90,in_port=2,ip,actions=push_vlan:0x88a8,mod_vlan_vid:100,push_vlan:0x8100,mod_vlan_vid:200,dec_ttl,output:1
priority=10,in_port=2,actions=strip_vlan,output:1,in_port
priority=20,in_port=3,udp,actions=mod_tp_dst:4789,mod_dl_src:02:00:00:00:00:03,output:4,output:1
priority=30,in_port=3,icmp,actions=set_field:0->icmp_type,output:4
priority=10,in_port=3,actions=mod_dl_dst:02:00:00:00:00:01,mod_dl_src:02:00:00:00:00:03,in_port,output:4
priority=20,in_port=4,tcp,actions=mod_tp_dst:8080,mod_tp_src:1234,mod_nw_dst:10.7.7.7,output:1,output:2
priority=20,in_port=4,ip,actions=push_vlan:0x8100,mod_vlan_vid:9,mod_nw_dst:10.5.5.5,output:2
priority=10,in_port=4,actions=drop
";

/// The corpus's frames through [`REWRITES`] on `io` (`None`: the switch's default), then
/// again after rule updates over every cached decision (`all_updates`: three rounds of them).
fn corpus_rewrites(name: &str, extra: &[&str], all_updates: bool) -> Counts {
    let (frames, skipped) = corpus_frames();
    eprintln!("{name}: {} frames from {} captures, {skipped} skipped", frames.len(), CORPUS.len());
    let flows = std::env::temp_dir().join(format!("hyflow-live-{}-{name}.flows", std::process::id()));
    std::fs::write(&flows, REWRITES).expect("writes the flows");
    let files = PipelineFiles { flows: &flows, tables: None, groups: None };
    let mut live = Live::start(name, &numbered_ports(4), files, extra, false);
    let _ = std::fs::remove_file(&flows);
    if let Some(io) = extra.iter().position(|&a| a == "--io").map(|i| extra[i + 1]) {
        let used = live.io();
        assert!(used.starts_with(io), "{name}: asked for {io}, the switch uses {used}");
    }
    live.send_frames(&frames);
    // Redirect what comes in on port 1 and drop what comes in on port 2.
    live.update(CtlUpdate::AddFlows(&[
        "priority=1000,in_port=1,actions=mod_dl_dst:02:00:00:00:00:55,output:4",
        "priority=1000,in_port=2,actions=drop",
    ]));
    live.send_frames(&frames);
    if all_updates {
        live.update(CtlUpdate::ModFlows { strict: false, flow: "in_port=1,actions=output:3" });
        live.send_frames(&frames);
        live.update(CtlUpdate::DelFlows { strict: false, matches: "in_port=1" });
        live.update(CtlUpdate::DelFlows { strict: true, matches: "priority=1000,in_port=2" });
        live.update(CtlUpdate::AddFlow(
            "priority=100,in_port=1,actions=push_vlan:0x8100,mod_vlan_vid:12,dec_ttl,output:2,output:4",
        ));
        live.send_frames(&frames);
    }
    // The same frames again in bursts: many frames per receive batch (an AF_PACKET ring block
    // holding several) and per flush.
    live.send_bursts(&frames, 32);
    live.finish()
}

#[test]
fn corpus_captures_through_rewrites_with_updates() {
    if !is_root() {
        return;
    }
    let c = corpus_rewrites("corpus", &[], true);
    assert!(c.frames >= 5 * 400 && c.updates == 5, "{c:?}");
    assert!(c.copies >= 2200 && c.rewritten >= 2000 && c.checksums_recomputed >= 2700, "{c:?}");
    assert!(c.drops >= 350 && c.unmarked == 0, "{c:?}");
}

/// The corpus's frames (VLAN tags, ARP, fragments, options, odd lengths) through the XDP
/// tier: its parser must take exactly what the engine's takes, and its rewrites write what
/// the engine writes.
#[test]
fn corpus_captures_through_the_xdp_tier() {
    if !is_root() {
        return;
    }
    let c = corpus_rewrites("corpus-xdp", &["--nic", "xdp"], true);
    assert!(c.frames >= 5 * 400 && c.updates == 5, "{c:?}");
    assert!(c.copies >= 2200 && c.rewritten >= 2000 && c.checksums_recomputed >= 2700, "{c:?}");
    assert!(c.drops >= 350 && c.unmarked == 0 && c.nic_hits >= 300 && c.predicted >= 300, "{c:?}");
}

#[test]
fn corpus_captures_over_af_packet() {
    if !is_root() {
        return;
    }
    let c = corpus_rewrites("corpus-afpacket", &["--io", "afpacket"], false);
    assert!(c.frames >= 3 * 400 && c.updates == 1, "{c:?}");
    assert!(c.copies >= 1200 && c.rewritten >= 1150 && c.checksums_recomputed >= 1450, "{c:?}");
    assert!(c.drops >= 250 && c.unmarked == 0, "{c:?}");
}

/// splitmix64: a small seeded generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A random rule over in_port, dl_type, nw_proto and tp_dst, with random rewrites and outputs.
fn random_rule(rng: &mut Rng, priority: u64) -> String {
    // (match, what it lets actions rewrite: 4 for IPv4, 6 for IPv6, 0 for neither; ports)
    let protos: &[(&str, u8, bool)] = &[
        ("", 0, false),
        ("ip", 4, false),
        ("tcp", 4, true),
        ("udp", 4, true),
        ("icmp", 4, false),
        ("ipv6", 6, false),
        ("tcp6", 6, true),
        ("udp6", 6, true),
        ("arp", 0, false),
    ];
    let &(proto, ip, ports) = rng.pick(protos);
    let mut m = vec![format!("priority={priority}")];
    if rng.chance(50) {
        m.push(format!("in_port={}", 1 + rng.below(4)));
    }
    if !proto.is_empty() {
        m.push(proto.to_string());
    }
    if ports && rng.chance(60) {
        m.push(format!("tp_dst={}", rng.pick(&[22, 53, 80, 123, 443, 8080])));
    }
    let mut actions = Vec::new();
    if rng.chance(8) {
        actions.push("drop".to_string());
    } else {
        for _ in 0..1 + rng.below(5) {
            let mut choices =
                vec!["dl_src", "dl_dst", "push_vlan", "mod_vlan_vid", "strip_vlan", "output", "in_port"];
            match ip {
                4 => choices.extend(["nw_src", "nw_dst", "nw_tos", "dec_ttl"]),
                6 => choices.extend(["ipv6_src", "ipv6_dst", "ipv6_label", "dec_ttl"]),
                _ => {}
            }
            if ports {
                choices.extend(["tp_src", "tp_dst"]);
            }
            let b = rng.below(250);
            actions.push(match *rng.pick(&choices) {
                "dl_src" => format!("mod_dl_src:02:00:00:00:01:{b:02x}"),
                "dl_dst" => format!("mod_dl_dst:02:00:00:00:02:{b:02x}"),
                "push_vlan" => {
                    format!("push_vlan:{},mod_vlan_vid:{}", rng.pick(&["0x8100", "0x88a8"]), 1 + b)
                }
                "mod_vlan_vid" => format!("mod_vlan_vid:{}", 1 + b),
                "strip_vlan" => "strip_vlan".to_string(),
                "output" => format!("output:{}", 1 + rng.below(4)),
                "in_port" => "in_port".to_string(),
                "nw_src" => format!("mod_nw_src:10.{b}.0.1"),
                "nw_dst" => format!("mod_nw_dst:192.168.{b}.2"),
                "nw_tos" => format!("mod_nw_tos:{}", (b % 64) * 4),
                "dec_ttl" => "dec_ttl".to_string(),
                "ipv6_src" => format!("set_field:2001:db8::{b:x}->ipv6_src"),
                "ipv6_dst" => format!("set_field:2001:db8:1::{b:x}->ipv6_dst"),
                "ipv6_label" => format!("set_field:{:#x}->ipv6_label", rng.below(1 << 20)),
                "tp_src" => format!("mod_tp_src:{}", 1000 + b),
                _ => format!("mod_tp_dst:{}", 2000 + b),
            });
        }
        actions.push(format!("output:{}", 1 + rng.below(4)));
    }
    format!("{},actions={}", m.join(","), actions.join(","))
}

#[test]
fn random_pipelines_with_generated_and_captured_traffic() {
    if !is_root() {
        return;
    }
    let (corpus, _) = corpus_frames();
    let mut total = Counts::default();
    for seed in [1u64, 2, 3, 4] {
        let mut rng = Rng(seed * 0x1234_5678);
        let mut rules: Vec<String> = (0..20)
            .map(|_| {
                let priority = 1 + rng.below(200);
                random_rule(&mut rng, priority)
            })
            .collect();
        rules.push(format!("priority=0,actions=output:{}", 1 + rng.below(4)));
        let flows =
            std::env::temp_dir().join(format!("hyflow-live-{}-random-{seed}.flows", std::process::id()));
        std::fs::write(&flows, rules.join("\n") + "\n").expect("writes the flows");
        let files = PipelineFiles { flows: &flows, tables: None, groups: None };
        // Half of them through the XDP tier, one with a tight install and counter-read
        // budget (most upcalls then stay in software; every hit is still counted).
        let (name, extra): (String, &[&str]) = match seed {
            2 => (format!("random-{seed}-xdp"), &["--nic", "xdp"]),
            4 => (
                format!("random-{seed}-xdp-budget"),
                &["--nic", "xdp", "--nic-updates", "40", "--nic-counter-reads", "2"],
            ),
            _ => (format!("random-{seed}"), &[]),
        };
        let mut live = Live::start(&name, &numbered_ports(4), files, extra, false);
        let mut frames = generated_traffic(&live.topo.dir, &flows, 150, seed, 4);
        let _ = std::fs::remove_file(&flows);
        frames.extend((0..60).map(|_| corpus[rng.below(corpus.len() as u64) as usize].clone()));
        live.send_frames(&frames);
        let overriding = random_rule(&mut rng, 5000);
        eprintln!("{name}: update {overriding}");
        live.update(CtlUpdate::AddFlow(&overriding));
        live.send_bursts(&frames, 32);
        total.add(&live.finish());
    }
    eprintln!("random pipelines: {total:?}");
    assert!(total.frames >= 4 * 400 && total.updates == 4, "{total:?}");
    assert!(total.copies >= 1600 && total.rewritten >= 650 && total.drops >= 280, "{total:?}");
    assert!(
        total.checksums_recomputed >= 1900 && total.nic_hits >= 100 && total.predicted >= 20,
        "{total:?}"
    );
}
