//! Real hosts talking through `hyflow switch` running the conntrack firewall of
//! `examples/firewall` (root: the test makes network namespaces and veth pairs and removes
//! them, even when it fails): an HTTP request the firewall allows gets its page, a TCP
//! connection it blocks never opens, a UDP datagram to a closed port comes back as an ICMP
//! error related to its connection, a ping is answered; the switch's port counters equal
//! what the hosts' interfaces sent and received. On AF_XDP (when built with it) and AF_PACKET.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

mod live_support;
use live_support::{io_modes, ok, root_or_skip};
use std::time::{Duration, Instant};

/// Three namespaces (switch, client, server), removed when dropped.
struct Hosts {
    sw: String,
    cli: String,
    srv: String,
    children: Vec<Child>,
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in [&self.sw, &self.cli, &self.srv] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

const CLIENT: &str = "10.77.0.1";
const SERVER: &str = "10.77.0.2";

impl Hosts {
    fn new(tag: &str) -> Hosts {
        let id = format!("hyh{}{tag}", std::process::id() % 100_000);
        let h = Hosts {
            sw: format!("{id}sw"),
            cli: format!("{id}cli"),
            srv: format!("{id}srv"),
            children: vec![],
        };
        for ns in [&h.sw, &h.cli, &h.srv] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
            ok(&["ip", "netns", "add", ns]);
            ok(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        for (ns, port, addr) in [(&h.cli, "cli", CLIENT), (&h.srv, "srv", SERVER)] {
            ok(&[
                "ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", &h.sw,
            ]);
            for (n, dev) in [(ns, "eth0"), (&h.sw, port)] {
                ok(&[
                    "ip",
                    "netns",
                    "exec",
                    n,
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{dev}.disable_ipv6=1"),
                ]);
                ok(&["ip", "-n", n, "link", "set", dev, "up"]);
            }
            ok(&["ip", "-n", ns, "addr", "add", &format!("{addr}/24"), "dev", "eth0"]);
            // A veth hands its frames over with the transport checksum left for a NIC to fill
            // in; nothing fills it in on the way through a userspace switch (as with Open
            // vSwitch's AF_XDP ports, whose documentation gives the same command).
            ok(&["ip", "netns", "exec", ns, "ethtool", "-K", "eth0", "tx", "off"]);
        }
        h
    }

    fn exec(&self, ns: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]).args(args);
        c
    }

    /// Interface eth0's counters in `ns`: (rx packets, tx packets).
    fn counters(&self, ns: &str) -> (u64, u64) {
        let json = ok(&["ip", "-n", ns, "-s", "-j", "link", "show", "eth0"]);
        let v: serde_json::Value = serde_json::from_str(&json).expect("ip -j gives JSON");
        let stats = &v[0]["stats64"];
        (stats["rx"]["packets"].as_u64().expect("rx"), stats["tx"]["packets"].as_u64().expect("tx"))
    }
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/firewall").join(name)
}

/// What the client sees: the page, whether port 8080 opened, the UDP error, the ping.
const CLIENT_SCRIPT: &str = r#"
import json, socket, struct, sys, urllib.request
server = sys.argv[1]
out = {}
try:
    out["http"] = urllib.request.urlopen("http://%s/page.txt" % server, timeout=5).read().decode()
except Exception as e:
    out["http"] = "error: %r" % e
s = socket.socket(); s.settimeout(1.5)
try:
    s.connect((server, 8080)); out["tcp8080"] = "open"
except socket.timeout:
    out["tcp8080"] = "timeout"
except OSError as e:
    out["tcp8080"] = "error: %r" % e
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(1.5); u.connect((server, 9))
u.send(b"hello")
try:
    u.recv(100); out["udp9"] = "answered"
except ConnectionRefusedError:
    out["udp9"] = "refused"
except socket.timeout:
    out["udp9"] = "timeout"
def checksum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF
echo = struct.pack("!BBHHH", 8, 0, 0, 0x4879, 1) + b"hyflow-ping"
echo = echo[:2] + struct.pack("!H", checksum(echo + b"\0")) + echo[4:]
p = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); p.settimeout(2)
p.sendto(echo, (server, 0))
out["ping"] = "timeout"
try:
    while True:
        data, addr = p.recvfrom(200)
        icmp = data[(data[0] & 15) * 4:]
        if addr[0] == server and icmp[0] == 0 and icmp[4:6] == b"\x48\x79":
            out["ping"] = "answered"
            break
except socket.timeout:
    pass
print(json.dumps(out))
"#;

/// A TCP server on 8080 that the firewall must keep unreachable.
const LISTENER: &str = r#"
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 8080)); s.listen()
while True:
    c, _ = s.accept(); c.close()
"#;

fn firewall_on(io: &str, tag: &str) {
    let mut h = Hosts::new(tag);
    let dir = std::env::temp_dir().join(format!("hyflow-live-hosts-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token = format!("hyflow firewall page {}", std::process::id());
    std::fs::write(dir.join("page.txt"), &token).unwrap();
    let sock = dir.join("ctl.sock");
    let flows = example("firewall.flows");
    let ports = example("ports.txt");
    let mut switch = h
        .exec(&h.sw, &[env!("CARGO_BIN_EXE_hyflow"), "switch", "--io", io])
        .args([
            "--flows".as_ref(),
            flows.as_os_str(),
            "--ports".as_ref(),
            ports.as_os_str(),
            "--ctl".as_ref(),
            sock.as_os_str(),
        ])
        .stdout(Stdio::piped())
        // Not a pipe nobody reads: a switch that fails at length would block on it.
        .stderr(Stdio::inherit())
        .spawn()
        .expect("hyflow switch starts");
    let mut ready = String::new();
    BufReader::new(switch.stdout.as_mut().unwrap()).read_line(&mut ready).unwrap();
    assert_eq!(ready.trim(), "ready", "the switch said {ready:?}");
    let http = h
        .exec(&h.srv, &["python3", "-m", "http.server", "80", "--bind", SERVER, "--directory"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    h.children.push(http);
    let listener =
        h.exec(&h.srv, &["python3", "-c", LISTENER, SERVER]).stderr(Stdio::null()).spawn().unwrap();
    h.children.push(listener);
    // Both servers listening before the client starts.
    let t0 = Instant::now();
    while !ok(&["ip", "netns", "exec", &h.srv, "ss", "-ltn"]).contains(":8080")
        || !ok(&["ip", "netns", "exec", &h.srv, "ss", "-ltn"]).contains(":80 ")
    {
        assert!(t0.elapsed() < Duration::from_secs(10), "the servers never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = h.exec(&h.cli, &["python3", "-c", CLIENT_SCRIPT, SERVER]).output().unwrap();
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("client: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(seen["http"], token.as_str(), "{io}: the allowed HTTP request");
    assert_eq!(seen["tcp8080"], "timeout", "{io}: the blocked connection");
    assert_eq!(seen["udp9"], "refused", "{io}: the ICMP error related to the UDP flow");
    assert_eq!(seen["ping"], "answered", "{io}: the ping");

    // Let the last frames through, then compare the switch's counters with the hosts'.
    std::thread::sleep(Duration::from_millis(300));
    let show = Command::new(env!("CARGO_BIN_EXE_hyflow"))
        .args(["ctl".as_ref(), sock.as_os_str(), "show".as_ref(), "--json".as_ref()])
        .output()
        .unwrap();
    assert!(show.status.success(), "{}", String::from_utf8_lossy(&show.stderr));
    let show: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    let port = |n: u64| show["ports"].as_array().unwrap().iter().find(|p| p["port"] == n).cloned().unwrap();
    let (cli_rx, cli_tx) = h.counters(&h.cli);
    let (srv_rx, srv_tx) = h.counters(&h.srv);
    for (n, counter, host_saw, what) in [
        (1, "rx_packets", cli_tx, "what the client sent is what port 1 received"),
        (2, "rx_packets", srv_tx, "what the server sent is what port 2 received"),
        (1, "tx_packets", cli_rx, "what port 1 sent is what the client received"),
        (2, "tx_packets", srv_rx, "what port 2 sent is what the server received"),
    ] {
        assert_eq!(port(n)[counter].as_u64(), Some(host_saw), "{io}: {what}");
    }
    let conntrack = &show["recirculation"]["conntrack"];
    assert!(conntrack["related"].as_u64() >= Some(1), "{io}: {conntrack}");
    assert_eq!(show["live_drops"]["tx_ring_full"], 0);

    // SAFETY: signals our own child.
    unsafe { libc::kill(switch.id() as i32, libc::SIGTERM) };
    let status = switch.wait().unwrap();
    assert!(status.success(), "{io}: the switch ended with {status}");
    assert!(!ok(&["ip", "-n", &h.sw, "link", "show"]).contains("xdp"), "{io}: XDP left attached");
    eprintln!(
        "{io}: firewall on real hosts: HTTP allowed, 8080 blocked, ICMP error related, ping answered; \
         counters equal on both ports ({cli_tx} + {srv_tx} frames in)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn real_hosts_talk_through_the_firewall() {
    let ios = io_modes();
    if !root_or_skip(ios.len(), "live firewall tests (one per packet I/O)") {
        return;
    }
    for (i, io) in ios.iter().enumerate() {
        firewall_on(io, &i.to_string());
    }
    eprintln!("checked the firewall on {} packet I/O(s): {ios:?}", ios.len());
}
