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
