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
        // Its errors go to a file, not a pipe: a switch that fails with more than a pipe
        // holds (a verifier log) would block writing them while the test waits for its
        // "ready" line or its end.
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let errors = self.dir.join(format!("switch-{n}.err"));
        let mut c = Command::new("ip")
            .args(["netns", "exec", &self.ns, HYFLOW, "switch", "--flows", &self.path("flows.txt")])
            .args(["--ports", &self.path(ports)])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&errors).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(c.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        if line.trim() == "ready" {
            return Ok(c);
        }
        c.wait().unwrap();
        Err(std::fs::read_to_string(&errors).unwrap_or_default())
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

    /// The id of the XDP program on the ports (`prog/xdp id N` in `ip link`), if one is.
    fn xdp_program_id(&self) -> Option<u32> {
        let links = ok(&["ip", "-n", &self.ns, "link", "show"]);
        let at = links.find("prog/xdp id ")? + "prog/xdp id ".len();
        links[at..].split_whitespace().next()?.parse().ok()
    }
}

/// The kernel's BPF objects by id, through the bpf(2) system call (root): which maps a
/// program uses, and whether a map still exists.
mod bpf {
    const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
    const BPF_MAP_GET_FD_BY_ID: libc::c_long = 14;
    const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;

    fn bpf(cmd: libc::c_long, attr: &mut [u64; 16]) -> libc::c_long {
        // SAFETY: `attr` is a zero-filled union bpf_attr of 128 bytes, as large as any command
        // here reads or writes.
        unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), 128u32) }
    }

    /// An fd of the object with `id` (`cmd`: the program or map command), if it exists.
    fn fd_by_id(cmd: libc::c_long, id: u32) -> Option<libc::c_int> {
        let mut attr = [0u64; 16];
        attr[0] = id as u64;
        let fd = bpf(cmd, &mut attr);
        (fd >= 0).then_some(fd as libc::c_int)
    }

    /// Whether the map with `id` exists.
    pub fn map_exists(id: u32) -> bool {
        match fd_by_id(BPF_MAP_GET_FD_BY_ID, id) {
            Some(fd) => {
                // SAFETY: an fd this process just opened.
                unsafe { libc::close(fd) };
                true
            }
            None => false,
        }
    }

    /// The ids of the maps program `id` uses (struct bpf_prog_info: nr_map_ids at byte 52,
    /// map_ids at 56).
    pub fn map_ids_of_program(id: u32) -> Vec<u32> {
        let Some(fd) = fd_by_id(BPF_PROG_GET_FD_BY_ID, id) else { return Vec::new() };
        let mut ids = [0u32; 64];
        let mut info = [0u8; 256];
        info[52..56].copy_from_slice(&(ids.len() as u32).to_ne_bytes());
        info[56..64].copy_from_slice(&(ids.as_mut_ptr() as u64).to_ne_bytes());
        let mut attr = [0u64; 16];
        attr[0] = fd as u64 | ((info.len() as u64) << 32);
        attr[1] = info.as_mut_ptr() as u64;
        let r = bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr);
        // SAFETY: the fd opened above.
        unsafe { libc::close(fd) };
        assert!(r == 0, "bpf(BPF_OBJ_GET_INFO_BY_FD): {}", std::io::Error::last_os_error());
        let n = u32::from_ne_bytes(info[52..56].try_into().unwrap()) as usize;
        ids[..n.min(ids.len())].to_vec()
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

    // kill -9 mid-traffic: no XDP program stays on any interface, and none of its maps (the
    // NIC tier's tables, counters, samples, sockets) outlives it.
    let maps = t.xdp_program_id().map(bpf::map_ids_of_program).unwrap_or_default();
    if io.contains(&"afxdp") {
        assert!(maps.len() >= 5, "{io:?}: the program's maps: {maps:?}");
    }
    // SAFETY: signals our own child (ip netns exec runs the switch in its place).
    unsafe { libc::kill(sw.id() as i32, libc::SIGKILL) };
    let _ = sw.wait();
    let t0 = Instant::now();
    while t.xdp_attached() || maps.iter().any(|&m| bpf::map_exists(m)) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{io:?}: XDP still attached, or maps {:?} still exist, after kill -9",
            maps.iter().filter(|&&m| bpf::map_exists(m)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The ports left are free again: a new switch starts on them.
    std::fs::write(t.dir.join("ports-left.txt"), "p1=1\np2=2\n").unwrap();
    let mut again = t.switch_on("ports-left.txt", io).expect("a switch starts after the killed one");
    // SAFETY: as above.
    unsafe { libc::kill(again.id() as i32, libc::SIGTERM) };
    assert!(again.wait().unwrap().success());
    eprintln!("{io:?}: second switch refused, bad and cut-off requests harmless, deleted port reported while port 2 kept forwarding, nothing attached and none of its {} maps left after kill -9", maps.len());
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
