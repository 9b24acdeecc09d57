//! With feature `afxdp`, compiles the XDP programs (bpf/port.bpf.c, the switch's; bpf/kvs.bpf.c,
//! `hyflow kvs`'s; bpf/storm.bpf.c, `hyflow storm`'s) with clang into OUT_DIR, where
//! `afxdp.rs`, `kvs_server.rs` and `storm_server.rs` embed them; and bpf/meta_probe.bpf.c, which
//! `xdp_meta.rs` loads to learn whether the kernel lets them write metadata.

use std::path::PathBuf;
use std::process::Command;

/// The programs, by source name.
const PROGRAMS: [&str; 4] = ["port", "kvs", "storm", "meta_probe"];

fn main() {
    for p in PROGRAMS {
        println!("cargo:rerun-if-changed=bpf/{p}.bpf.c");
    }
    println!("cargo:rerun-if-changed=bpf/memcached_key.h");
    println!("cargo:rerun-if-changed=bpf/storm_tuple.h");
    if std::env::var_os("CARGO_FEATURE_AFXDP").is_none() {
        return;
    }
    for p in PROGRAMS {
        compile(p);
    }
}

fn compile(name: &str) {
    let source = format!("bpf/{name}.bpf.c");
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join(format!("{name}.bpf.o"));
    // The kernel headers include <asm/types.h>, which Debian keeps under the multiarch
    // directory a `-target bpf` compile does not search by itself.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".to_string());
    let multiarch = format!("-I/usr/include/{arch}-linux-gnu");
    let status = Command::new(std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string()))
        .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror", &multiarch, "-c", &source, "-o"])
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("clang failed on {source} ({s}); it needs libbpf's headers (Debian: libbpf-dev)"),
        Err(e) => panic!(
            "feature afxdp compiles XDP programs with clang, which could not run ({e}): install clang and \
             libbpf-dev (Debian), or build without --features afxdp (AF_PACKET only)"
        ),
    }
}
