//! `hyflow switch` under faults (root: the test makes a network namespace and veth pairs and
//! removes them, even when it fails): a second switch on the same ports is refused; a port
//! deleted under load is reported and the others keep forwarding; `kill -9` mid-traffic
//! leaves no XDP program attached; a control client that goes away mid-request changes
//! nothing; a bad request gets one clear error.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

mod live_support;
use live_support::{io_modes, ok, root_or_skip, run};
use std::time::{Duration, Instant};

const HYFLOW: &str = env!("CARGO_BIN_EXE_hyflow");

/// A namespace with ports p1..p3, their peers outside; removed when dropped.
struct Topology {
    ns: String,
    peers: Vec<String>,
    dir: PathBuf,
    children: Vec<Child>,
}

impl Drop for Topology {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for p in &self.peers {
            let _ = run(&["ip", "link", "del", p]);
        }
        let _ = run(&["ip", "netns", "del", &self.ns]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Topology {
    fn new(tag: &str) -> Topology {
        let id = std::process::id() % 10_000;
        let ns = format!("hyf{id}{tag}");
        let dir = std::env::temp_dir().join(format!("hyflow-live-faults-{id}-{tag}"));
        std::fs::create_dir_all(&dir).unwrap();
        let _ = run(&["ip", "netns", "del", &ns]);
        ok(&["ip", "netns", "add", &ns]);
        let mut t = Topology { ns, peers: vec![], dir, children: vec![] };
        for n in 1..=3 {
            let peer = format!("hf{id}{tag}x{n}");
            let _ = run(&["ip", "link", "del", &peer]);
            ok(&[
                "ip",
                "link",
                "add",
                &peer,
                "type",
                "veth",
                "peer",
                "name",
                &format!("p{n}"),
                "netns",
                &t.ns,
            ]);
            ok(&["sysctl", "-qw", &format!("net.ipv6.conf.{peer}.disable_ipv6=1")]);
            ok(&[
                "ip",
                "netns",
                "exec",
                &t.ns,
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.p{n}.disable_ipv6=1"),
            ]);
            ok(&["ip", "link", "set", &peer, "up"]);
            ok(&["ip", "-n", &t.ns, "link", "set", &format!("p{n}"), "up"]);
            t.peers.push(peer);
        }
        std::fs::write(t.dir.join("ports.txt"), "p1=1\np2=2\np3=3\n").unwrap();
        // Every frame from port 1 goes to ports 2 and 3.
        std::fs::write(t.dir.join("flows.txt"), "priority=1,in_port=1,actions=output:2,output:3\n").unwrap();
        // Traffic for it: a capture of 20,000 generated frames.
        ok(&[
            HYFLOW,
            "gen",
            "traffic",
            "--flows",
            &t.path("flows.txt"),
            "--out",
            &t.path("t.pcap"),
            "--packets",
            "20000",
        ]);
        t
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }

    /// Starts a switch on the ports of `ports.txt` with `extra` options; returns it once it
    /// said `ready`, or its error.
    fn switch(&self, extra: &[&str]) -> Result<Child, String> {
        self.switch_on("ports.txt", extra)
    }

    fn switch_on(&self, ports: &str, extra: &[&str]) -> Result<Child, String> {
        let mut c = Command::new("ip")
            .args(["netns", "exec", &self.ns, HYFLOW, "switch", "--flows", &self.path("flows.txt")])
            .args(["--ports", &self.path(ports)])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(c.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        if line.trim() == "ready" {
            return Ok(c);
        }
        let out = c.wait_with_output().unwrap();
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }

    /// Sends the capture `loops` times from port 1's peer at `rate`, in the background.
    fn traffic(&mut self, rate: u32, loops: u32) {
        let c = Command::new(HYFLOW)
            .args(["send", "--iface", &self.peers[0], "--trace", &self.path("t.pcap")])
            .args(["--rate", &rate.to_string(), "--loop", &loops.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.children.push(c);
    }

    fn ctl(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(HYFLOW).args(["ctl", &self.path("ctl.sock")]).args(args).output().unwrap();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    fn show(&self) -> serde_json::Value {
        serde_json::from_str(&self.ctl(&["show", "--json"]).expect("show answers")).unwrap()
    }

    fn xdp_attached(&self) -> bool {
        ok(&["ip", "-n", &self.ns, "link", "show"]).contains("xdp")
    }
}

fn tx_packets(show: &serde_json::Value, port: u64) -> u64 {
    show["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["port"] == port)
        .map_or(0, |p| p["tx_packets"].as_u64().unwrap())
}

fn faults_on(io: &[&str], tag: &str) {
    let mut t = Topology::new(tag);
    let ctl = t.path("ctl.sock");
    let mut sw = t.switch(&[io, &["--ctl", &ctl]].concat()).expect("the first switch starts");

    // A second switch on the same ports is refused, and the first goes on.
    let second = t.switch(io).expect_err("a second switch on the same ports");
    assert!(second.contains("another hyflow switch already forwards on this interface"), "{second}");

    // Bad requests: one clear error each, nothing changed.
    let err = t.ctl(&["add-flow", "priority=9,ip,nw_dst=1.2.3,actions=drop"]).unwrap_err();
    assert!(err.contains("1.2.3"), "{err}");
    // A client that goes away before its request is complete changes nothing.
    let mut half = UnixStream::connect(t.path("ctl.sock")).unwrap();
    half.write_all(br#"{"command":{"add-flow":{"flow":"priority=99,actions=drop"}}"#).unwrap();
    drop(half);
    std::thread::sleep(Duration::from_millis(100));
    let flows = t.ctl(&["dump-flows"]).unwrap();
    assert_eq!(flows.lines().count(), 1, "{flows}");

    // Traffic, then port 3's interface deleted under load: reported, port 2 keeps getting it.
    t.traffic(20_000, 5);
    std::thread::sleep(Duration::from_millis(1500));
    let before = t.show();
    assert!(tx_packets(&before, 2) > 0 && tx_packets(&before, 3) > 0, "{before}");
    ok(&["ip", "link", "del", &t.peers[2]]);
    t.peers.pop();
    std::thread::sleep(Duration::from_millis(2500));
    let after = t.show();
    let p3 = after["interfaces"].as_array().unwrap().iter().find(|i| i["port"] == 3).unwrap().clone();
    assert_eq!(p3["gone"], true, "{after}");
    assert!(tx_packets(&after, 2) > tx_packets(&before, 2) + 10_000, "port 2 kept forwarding: {after}");

    // kill -9 mid-traffic: no XDP program stays on any interface.
    // SAFETY: signals our own child (ip netns exec runs the switch in its place).
    unsafe { libc::kill(sw.id() as i32, libc::SIGKILL) };
    let _ = sw.wait();
    let t0 = Instant::now();
    while t.xdp_attached() {
        assert!(t0.elapsed() < Duration::from_secs(5), "{io:?}: XDP still attached after kill -9");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The ports left are free again: a new switch starts on them.
    std::fs::write(t.dir.join("ports-left.txt"), "p1=1\np2=2\n").unwrap();
    let mut again = t.switch_on("ports-left.txt", io).expect("a switch starts after the killed one");
    // SAFETY: as above.
    unsafe { libc::kill(again.id() as i32, libc::SIGTERM) };
    assert!(again.wait().unwrap().success());
    eprintln!("{io:?}: second switch refused, bad and cut-off requests harmless, deleted port reported while port 2 kept forwarding, nothing attached after kill -9");
}

#[test]
fn the_switch_survives_faults() {
    let mut setups: Vec<Vec<&str>> = io_modes().into_iter().map(|io| vec!["--io", io]).collect();
    // The NIC tier: the same faults while the kernel forwards most frames itself.
    if setups.iter().any(|s| s[1] == "afxdp") {
        setups.push(vec!["--io", "afxdp", "--nic", "xdp"]);
    }
    if !root_or_skip(setups.len(), "live fault tests (one per packet I/O, and the XDP tier)") {
        return;
    }
    for (i, setup) in setups.iter().enumerate() {
        faults_on(setup, &i.to_string());
    }
    eprintln!("checked faults on {} set-ups: {setups:?}", setups.len());
}
