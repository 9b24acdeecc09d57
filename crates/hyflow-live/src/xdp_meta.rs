//! Whether the XDP programs may write metadata in front of the frames they hand to software
//! (the switch's and FlexStorm's timestamp, FlexKVS's key hash): some kernels' verifiers refuse
//! `bpf_xdp_adjust_meta` in every XDP program (seen on 6.18). A tiny program that calls it is
//! loaded once, never attached; where it is refused, every program is loaded with its
//! read-only `hyflow_meta` set to 0, so the verifier prunes the call, and frames arrive without
//! metadata — software then finds no stamp (no latency from the NIC) and hashes keys itself.

use std::sync::OnceLock;

use aya::programs::Xdp;
use aya::EbpfLoader;

static PROBE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/meta_probe.bpf.o"));

/// The values the programs' `hyflow_meta` can take (the loader borrows them).
static WRITE_META: u32 = 1;
static NO_META: u32 = 0;

/// Whether this kernel lets XDP programs call `bpf_xdp_adjust_meta`, probed once; says so on
/// stderr when it does not. A probe that fails for another reason (no privilege) answers yes:
/// the real program's load then fails with its own message.
pub fn allowed() -> bool {
    static ALLOWED: OnceLock<bool> = OnceLock::new();
    *ALLOWED.get_or_init(|| {
        let refused = EbpfLoader::new().load(PROBE).ok().and_then(|mut ebpf| {
            let program: &mut Xdp = ebpf.program_mut("hyflow_meta_probe")?.try_into().ok()?;
            let e = program.load().err()?;
            Some(format!("{e:?}").contains("bpf_xdp_adjust_meta"))
        });
        if refused == Some(true) {
            eprintln!(
                "hyflow: warning: this kernel refuses bpf_xdp_adjust_meta in XDP programs: frames reach software \
                 without the XDP program's timestamp or key hash (no latency measured from the NIC; keys hashed \
                 in software)"
            );
        }
        refused != Some(true)
    })
}

/// A loader for one of the XDP programs, with `hyflow_meta` set as this kernel allows.
pub fn loader() -> EbpfLoader<'static> {
    let mut loader = EbpfLoader::new();
    loader.override_global("hyflow_meta", if allowed() { &WRITE_META } else { &NO_META }, true);
    loader
}
