//! What the live tests share: the root check that says what it skipped, commands run with
//! their failure shown, and the packet I/Os this build can test.

#![allow(dead_code)] // each test file uses the part it needs

use std::process::{Command, Output};

/// Whether the tests can make namespaces and veths; if not, says that `count` `what` were
/// skipped and why.
pub fn root_or_skip(count: usize, what: &str) -> bool {
    // SAFETY: a plain syscall.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped {count} {what}: live tests need root (network namespaces, veth pairs, AF_PACKET)");
    }
    root
}

/// Runs a command, whatever it answers.
pub fn run(args: &[&str]) -> Output {
    Command::new(args[0]).args(&args[1..]).output().expect("the command runs")
}

/// Runs a command that must succeed; returns its standard output.
pub fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The packet I/Os this build of `hyflow switch` has: AF_PACKET, and AF_XDP with the feature.
pub fn io_modes() -> Vec<&'static str> {
    let mut ios = vec!["afpacket"];
    if cfg!(feature = "afxdp") {
        ios.push("afxdp");
    }
    ios
}

/// A namespace holding an application server's end of a veth (`inner`, with an address)
/// whose other end (`host_if`) stays in this namespace: `hyflow kvs` and `hyflow storm`
/// tests. Removed when dropped, with the server.
pub struct AppHost {
    pub ns: String,
    pub host_if: String,
    server: Option<std::process::Child>,
}

impl Drop for AppHost {
    fn drop(&mut self) {
        if let Some(c) = &mut self.server {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("ip").args(["link", "del", &self.host_if]).output();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
    }
}

impl AppHost {
    /// Namespace `ns` with veth end `inner` (address `inner_cidr`), its peer `host_if` here, up.
    pub fn new(ns: String, host_if: String, inner: &str, inner_cidr: &str) -> AppHost {
        let h = AppHost { ns, host_if, server: None };
        let _ = Command::new("ip").args(["link", "del", &h.host_if]).output();
        let _ = Command::new("ip").args(["netns", "del", &h.ns]).output();
        ok(&["ip", "netns", "add", &h.ns]);
        ok(&["ip", "link", "add", &h.host_if, "type", "veth", "peer", "name", inner, "netns", &h.ns]);
        ok(&["ip", "link", "set", &h.host_if, "up"]);
        ok(&["ip", "-n", &h.ns, "addr", "add", inner_cidr, "dev", inner]);
        ok(&["ip", "-n", &h.ns, "link", "set", inner, "up"]);
        h
    }

    /// Starts `hyflow ARGS --json` in the namespace and waits for its `ready` line.
    pub fn start(&mut self, args: &[&str]) {
        use std::io::{BufRead, BufReader};
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.ns, env!("CARGO_BIN_EXE_hyflow")])
            .args(args)
            .arg("--json")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("hyflow runs");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        out.read_line(&mut line).expect("a line");
        assert!(line.contains("ready"), "no ready line: {line:?}");
        // The rest of its output (the report) is read when it stops.
        child.stdout = Some(out.into_inner());
        self.server = Some(child);
    }

    /// Stops the server with SIGTERM; its JSON report.
    pub fn stop(&mut self) -> serde_json::Value {
        let child = self.server.take().expect("started");
        ok(&["kill", "-TERM", &child.id().to_string()]);
        let out = child.wait_with_output().expect("it ends");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(text.lines().last().expect("a report")).expect("a JSON report")
    }
}
