//! `hyflow kvs` on a real interface (root, feature afxdp: the test makes a network namespace
//! and a veth pair and removes them, even when it fails): memcached clients over UDP from
//! many ports, in the ASCII and binary protocols, against a reference map on every answer —
//! with flow steering (one shared store), key steering, and key steering reusing the NIC's
//! hash; concurrent SETs of the same keys from clients on different cores; malformed
//! requests answered with memcached's errors and counted by reason; requests longer than a
//! frame (IP fragments) put together; the XDP program gone after exit.
#![cfg(feature = "afxdp")]

use std::collections::HashMap;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

mod live_support;
use live_support::{ok, root_or_skip, AppHost};

/// The server's namespace and the clients' addresses.
struct Setup {
    host: AppHost,
    server_ip: String,
    client_ip: String,
}

impl Setup {
    fn new(subnet: u8) -> Setup {
        let id = std::process::id() % 100_000;
        let (server_ip, client_ip) = (format!("10.96.{subnet}.1"), format!("10.96.{subnet}.2"));
        let host = AppHost::new(
            format!("hykv{id}n{subnet}"),
            format!("hykv{id}c{subnet}"),
            "kv0",
            &format!("{server_ip}/24"),
        );
        ok(&["ip", "addr", "add", &format!("{client_ip}/24"), "dev", &host.host_if]);
        Setup { host, server_ip, client_ip }
    }

    fn start(&mut self, args: &[&str]) {
        self.host.start(&[&["kvs", "--iface", "kv0"], args].concat());
    }

    fn stop(&mut self) -> serde_json::Value {
        self.host.stop()
    }

    /// A client on UDP port `port` (0: any): fixed ports make flow steering's spread of the
    /// clients over the cores the same in every run.
    fn client(&self, port: u16) -> Client {
        let socket = UdpSocket::bind(format!("{}:{port}", self.client_ip)).expect("a client socket");
        socket.set_read_timeout(Some(Duration::from_millis(1500))).unwrap();
        socket.connect(format!("{}:11211", self.server_ip)).unwrap();
        Client { socket, id: 0 }
    }

    /// Whether an XDP program is attached to kv0.
    fn xdp_attached(&self) -> bool {
        ok(&["ip", "-n", &self.host.ns, "-d", "link", "show", "kv0"]).contains("xdp")
    }
}

/// A memcached UDP client: one socket (one source port).
struct Client {
    socket: UdpSocket,
    id: u16,
}

impl Client {
    /// Sends `body` after a frame header saying `datagrams`, returns the reply's datagrams
    /// joined in sequence order (None: no answer).
    fn call_with(&mut self, body: &[u8], datagrams: u16) -> Option<Vec<u8>> {
        self.id = self.id.wrapping_add(1);
        let mut req = Vec::with_capacity(8 + body.len());
        req.extend_from_slice(&self.id.to_be_bytes());
        req.extend_from_slice(&0u16.to_be_bytes());
        req.extend_from_slice(&datagrams.to_be_bytes());
        req.extend_from_slice(&[0, 0]);
        req.extend_from_slice(body);
        self.socket.send(&req).expect("send");
        let mut parts: Vec<(u16, Vec<u8>)> = Vec::new();
        let mut buf = [0u8; 2048];
        loop {
            let n = self.socket.recv(&mut buf).ok()?;
            let id = u16::from_be_bytes([buf[0], buf[1]]);
            if id != self.id {
                continue;
            }
            let seq = u16::from_be_bytes([buf[2], buf[3]]);
            let total = u16::from_be_bytes([buf[4], buf[5]]);
            parts.push((seq, buf[8..n].to_vec()));
            if parts.len() == total as usize {
                break;
            }
        }
        parts.sort();
        Some(parts.into_iter().flat_map(|(_, p)| p).collect())
    }

    fn call(&mut self, body: &[u8]) -> Option<Vec<u8>> {
        self.call_with(body, 1)
    }
}

fn set(key: &str, value: &[u8]) -> Vec<u8> {
    [format!("set {key} 0 0 {}\r\n", value.len()).as_bytes(), value, b"\r\n"].concat()
}

fn value_reply(key: &str, value: &[u8]) -> Vec<u8> {
    [format!("VALUE {key} 0 {}\r\n", value.len()).as_bytes(), value, b"\r\nEND\r\n"].concat()
}

/// Eight clients (eight source ports) each with keys of their own, random SET/GET/DELETE,
/// every answer against the client's reference map; then SETs of shared keys from all of
/// them at once, after which every client reads the same value, one that was written.
fn reference_traffic(setup: &Setup) {
    let clients = 8;
    let shared: Vec<String> = (0..20).map(|i| format!("shared-{i}")).collect();
    let written: Vec<HashMap<String, Vec<u8>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let mut client = setup.client(41_000 + c as u16);
                let shared = &shared;
                s.spawn(move || {
                    let mut reference: HashMap<String, Vec<u8>> = HashMap::new();
                    let mut x = 0x2545_f491u64 * (c as u64 + 1);
                    for op in 0..300 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let key = format!("c{c}-{}", x % 40);
                        match x % 10 {
                            0..=4 => {
                                let got = client.call(format!("get {key}\r\n").as_bytes());
                                let want = match reference.get(&key) {
                                    Some(v) => value_reply(&key, v),
                                    None => b"END\r\n".to_vec(),
                                };
                                assert_eq!(got, Some(want), "client {c} op {op}: get {key}");
                            }
                            5 => {
                                let got = client.call(format!("delete {key}\r\n").as_bytes());
                                let want: &[u8] = if reference.remove(&key).is_some() {
                                    b"DELETED\r\n"
                                } else {
                                    b"NOT_FOUND\r\n"
                                };
                                assert_eq!(got.as_deref(), Some(want), "client {c} op {op}: delete {key}");
                            }
                            _ => {
                                // Values up to 1,400 bytes: a request fits in one frame (the
                                // server takes no IP fragments), a reply may not (several
                                // datagrams).
                                let len = (x >> 20) as usize % 1400;
                                let value: Vec<u8> =
                                    (0..len).map(|i| b'a' + ((i as u64 + x) % 26) as u8).collect();
                                let got = client.call(&set(&key, &value));
                                assert_eq!(
                                    got.as_deref(),
                                    Some(b"STORED\r\n".as_slice()),
                                    "client {c} op {op}: set {key}"
                                );
                                reference.insert(key, value);
                            }
                        }
                    }
                    let mut mine = HashMap::new();
                    for (i, key) in shared.iter().enumerate() {
                        let value = format!("from-{c}-{i}").into_bytes();
                        assert_eq!(client.call(&set(key, &value)).as_deref(), Some(b"STORED\r\n".as_slice()));
                        mine.insert(key.clone(), value);
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a client thread")).collect()
    });
    let mut a = setup.client(0);
    let mut b = setup.client(0);
    for key in &shared {
        let first = a.call(format!("get {key}\r\n").as_bytes()).expect("an answer");
        let second = b.call(format!("get {key}\r\n").as_bytes()).expect("an answer");
        assert_eq!(first, second, "{key}: two clients read different values");
        assert!(
            written.iter().any(|w| first == value_reply(key, &w[key])),
            "{key}: {:?} is no value a client wrote",
            String::from_utf8_lossy(&first)
        );
    }
}

fn binary(op: u8, key: &[u8], extras: &[u8], value: &[u8], opaque: u32) -> Vec<u8> {
    let body = extras.len() + key.len() + value.len();
    let mut r = vec![0x80, op];
    r.extend_from_slice(&(key.len() as u16).to_be_bytes());
    r.push(extras.len() as u8);
    r.extend_from_slice(&[0, 0, 0]);
    r.extend_from_slice(&(body as u32).to_be_bytes());
    r.extend_from_slice(&opaque.to_be_bytes());
    r.extend_from_slice(&[0; 8]);
    r.extend_from_slice(extras);
    r.extend_from_slice(key);
    r.extend_from_slice(value);
    r
}

/// The binary protocol: SET, GET, GETK, DELETE, NOOP and an unknown opcode.
fn binary_protocol(setup: &Setup) {
    let mut c = setup.client(0);
    let status = |r: &[u8]| u16::from_be_bytes([r[6], r[7]]);
    let stored = c.call(&binary(0x01, b"bin-key", &[0, 0, 0, 9, 0, 0, 0, 0], b"bin-value", 77)).unwrap();
    assert_eq!((stored[0], stored[1], status(&stored)), (0x81, 0x01, 0));
    assert_eq!(&stored[12..16], &77u32.to_be_bytes());
    let got = c.call(&binary(0x00, b"bin-key", &[], &[], 78)).unwrap();
    assert_eq!(status(&got), 0);
    assert_eq!(&got[24..28], &9u32.to_be_bytes(), "flags");
    assert_eq!(&got[28..], b"bin-value");
    let getk = c.call(&binary(0x0c, b"bin-key", &[], &[], 79)).unwrap();
    assert_eq!(&getk[28..], b"bin-keybin-value");
    // The ASCII protocol sees the same item.
    assert_eq!(c.call(b"get bin-key\r\n").unwrap(), b"VALUE bin-key 9 9\r\nbin-value\r\nEND\r\n");
    assert_eq!(status(&c.call(&binary(0x04, b"bin-key", &[], &[], 80)).unwrap()), 0);
    assert_eq!(status(&c.call(&binary(0x00, b"bin-key", &[], &[], 81)).unwrap()), 1);
    assert_eq!(status(&c.call(&binary(0x0a, b"", &[], &[], 82)).unwrap()), 0);
    assert_eq!(status(&c.call(&binary(0x3f, b"x", &[], &[], 83)).unwrap()), 0x81);
}

/// Malformed requests get memcached's error replies; one without a frame header, none.
fn malformed(setup: &Setup) {
    let mut c = setup.client(0);
    let long = [b"get ".as_slice(), &[b'k'; 251], b"\r\n"].concat();
    let cases: [(&[u8], &[u8]); 5] = [
        (b"get cut-short", b"CLIENT_ERROR bad command line format\r\n"),
        (b"flush_all\r\n", b"ERROR\r\n"),
        (&long, b"CLIENT_ERROR bad command line format\r\n"),
        (b"set k 0 0 5\r\nab\r\n", b"CLIENT_ERROR bad data chunk\r\n"),
        (&binary(0x00, b"k", &[], &[], 1)[..20], b""),
    ];
    for (req, want) in cases.iter().take(4) {
        assert_eq!(c.call(req).as_deref(), Some(*want), "{:?}", String::from_utf8_lossy(req));
    }
    let cut = c.call(cases[4].0).expect("an answer");
    assert_eq!((cut[0], u16::from_be_bytes([cut[6], cut[7]])), (0x81, 4), "a binary header cut short");
    assert_eq!(
        c.call_with(b"get a\r\n", 2).as_deref(),
        Some(b"SERVER_ERROR multi-packet request not supported\r\n".as_slice())
    );
    c.socket.send(b"\x00\x01\x00").unwrap();
    let mut buf = [0u8; 64];
    assert!(c.socket.recv(&mut buf).is_err(), "a datagram without a frame header is not answered");
}

/// Requests too long for one frame (values of 3,000 to 9,000 bytes at MTU 1500: the kernel
/// sends them as IP fragments) stored and read back whole, and a fragmented datagram to
/// another port dropped by the server (the XDP program takes every UDP fragment to the
/// address); returns the datagrams sent as fragments.
fn fragmented(setup: &Setup) -> u64 {
    let mut c = setup.client(0);
    let mut sent = 0;
    for (i, len) in [3000usize, 4500, 9000].into_iter().enumerate() {
        let key = format!("big-{i}");
        let value: Vec<u8> = (0..len).map(|j| b'a' + (j % 26) as u8).collect();
        assert_eq!(c.call(&set(&key, &value)).as_deref(), Some(b"STORED\r\n".as_slice()), "{key}");
        assert_eq!(c.call(format!("get {key}\r\n").as_bytes()), Some(value_reply(&key, &value)), "{key}");
        sent += 1;
    }
    let other = UdpSocket::bind(format!("{}:0", setup.client_ip)).unwrap();
    other.send_to(&[0u8; 3000], format!("{}:11212", setup.server_ip)).unwrap();
    sent + 1
}

fn run_mode(subnet: u8, args: &[&str]) -> serde_json::Value {
    let mut setup = Setup::new(subnet);
    setup.start(args);
    let t = Instant::now();
    reference_traffic(&setup);
    binary_protocol(&setup);
    malformed(&setup);
    let fragmented = fragmented(&setup);
    eprintln!("{args:?}: clients done in {:?}", t.elapsed());
    // The last fragmented datagram has no answer to wait for: give its frames time to land.
    std::thread::sleep(Duration::from_millis(200));
    let report = setup.stop();
    assert_eq!(report["fragments"]["datagrams"], fragmented, "{}", report["fragments"]);
    assert!(!setup.xdp_attached(), "the XDP program left after exit");
    report
}

fn malformed_counts(report: &serde_json::Value) -> HashMap<String, u64> {
    report["malformed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_str().unwrap().to_string(), p[1].as_u64().unwrap()))
        .collect()
}

fn check_common(report: &serde_json::Value) {
    let m = malformed_counts(report);
    assert_eq!(m["truncated"], 2, "{m:?}");
    assert_eq!(m["unknown_command"], 2, "{m:?}");
    assert_eq!(m["key_too_long"], 1, "{m:?}");
    assert_eq!(m["bad_data_chunk"], 1, "{m:?}");
    assert_eq!(m["multi_datagram"], 1, "{m:?}");
    assert_eq!(report["service"]["short_datagrams"], 1);
    // Every request went to a core, and both cores served some.
    let cores = report["cores"].as_array().unwrap();
    assert_eq!(cores.len(), 2);
    for c in cores {
        assert!(c["service"]["requests"].as_u64().unwrap() > 100, "{c}");
        assert_eq!(c["replies_dropped"], 0);
    }
    let xdp = &report["xdp"];
    let steered = xdp["by_key"].as_u64().unwrap() + xdp["by_flow"].as_u64().unwrap();
    let served = report["service"]["requests"].as_u64().unwrap()
        + report["service"]["short_datagrams"].as_u64().unwrap();
    // Every fragmented datagram put together; the one to another port dropped as such.
    let f = &report["fragments"];
    let other_port: u64 = cores.iter().map(|c| c["frame_drops"][4].as_u64().unwrap()).sum();
    assert_eq!(other_port, 1, "{report}");
    assert_eq!(f["fragments"], xdp["fragments"], "{f}");
    // At MTU 1500 (1,480 bytes of IP payload per fragment): 3 + 4 + 7, and 3 for the other port.
    assert_eq!(xdp["fragments"], 17, "{xdp}");
    assert!(f["dropped"].as_array().unwrap().iter().all(|n| n == 0), "{f}");
    assert_eq!(
        steered + f["datagrams"].as_u64().unwrap(),
        served + other_port,
        "every datagram to the port reached a core"
    );
}

#[test]
fn flow_steering_shares_one_store() {
    if !root_or_skip(1, "kvs tests (flow steering)") {
        return;
    }
    let report = run_mode(1, &["--cores", "2", "--steer", "flow"]);
    check_common(&report);
    assert_eq!(report["xdp"]["by_key"], 0);
    assert_eq!(report["partitions"].as_array().unwrap().len(), 1);
}

#[test]
fn key_steering_with_the_nic_hash_partitions_the_keys() {
    if !root_or_skip(1, "kvs tests (key steering)") {
        return;
    }
    let report = run_mode(2, &["--cores", "2", "--steer", "key", "--nic-hash"]);
    check_common(&report);
    // Requests with a key the program reads are steered by it: all but the version-less
    // malformed ones (the 251-byte key, the cut binary header, the bare command).
    assert!(report["xdp"]["by_key"].as_u64().unwrap() > 2500, "{}", report["xdp"]);
    assert!(report["xdp"]["by_flow"].as_u64().unwrap() <= 5, "{}", report["xdp"]);
    assert_eq!(report["partitions"].as_array().unwrap().len(), 2);
    let s = &report["service"];
    // The program's hash reaches software where the kernel lets it write metadata.
    if report["xdp"]["key_hash_to_software"] == true {
        assert!(s["nic_hash_checked"].as_u64().unwrap() > 20, "{s}");
    } else {
        assert_eq!(s["nic_hash_checked"], 0, "{s}");
    }
    assert_eq!(s["nic_hash_mismatched"], 0, "the XDP program and the engine hash keys differently");
}

/// At MTU 9000 a request frame can be longer than a socket's buffer holds (3,840 bytes of a
/// 4 KiB buffer): the XDP program drops it and counts it as such, instead of the kernel
/// losing it as if a ring were full; shorter ones are served.
#[test]
fn frames_longer_than_the_buffers_are_counted() {
    if !root_or_skip(1, "kvs tests (jumbo frames)") {
        return;
    }
    let mut setup = Setup::new(3);
    ok(&["ip", "link", "set", &setup.host.host_if, "mtu", "9000"]);
    ok(&["ip", "-n", &setup.host.ns, "link", "set", "kv0", "mtu", "9000"]);
    setup.start(&["--cores", "1", "--steer", "flow"]);
    let mut c = setup.client(0);
    let fits = vec![b'f'; 3000];
    assert_eq!(c.call(&set("fits", &fits)).as_deref(), Some(b"STORED\r\n".as_slice()));
    assert_eq!(c.call(b"get fits\r\n"), Some(value_reply("fits", &fits)));
    c.socket.send(&[[0, 9, 0, 0, 0, 1, 0, 0].as_slice(), &set("jumbo", &[b'j'; 5000])].concat()).unwrap();
    let mut buf = [0u8; 64];
    assert!(c.socket.recv(&mut buf).is_err(), "a frame longer than the buffers is not answered");
    let report = setup.stop();
    assert_eq!(report["xdp"]["too_long"], 1, "{}", report["xdp"]);
    assert_eq!(report["rx_dropped"], 0);
    assert_eq!(report["service"]["requests"], 2);
}
