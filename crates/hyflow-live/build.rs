//! With feature `afxdp`, compiles the XDP program (bpf/port.bpf.c) with clang into
//! OUT_DIR, where `afxdp.rs` embeds it.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=bpf/port.bpf.c");
    if std::env::var_os("CARGO_FEATURE_AFXDP").is_none() {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("port.bpf.o");
    // The kernel headers include <asm/types.h>, which Debian keeps under the multiarch
    // directory a `-target bpf` compile does not search by itself.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".to_string());
    let multiarch = format!("-I/usr/include/{arch}-linux-gnu");
    let status = Command::new(std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string()))
        .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror", &multiarch, "-c", "bpf/port.bpf.c", "-o"])
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            panic!("clang failed on bpf/port.bpf.c ({s}); it needs libbpf's headers (Debian: libbpf-dev)")
        }
        Err(e) => panic!(
            "feature afxdp compiles an XDP program with clang, which could not run ({e}): install clang and \
             libbpf-dev (Debian), or build without --features afxdp (AF_PACKET only)"
        ),
    }
}
