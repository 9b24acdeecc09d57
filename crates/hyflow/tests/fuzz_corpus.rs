//! The fuzz corpus (`fuzz/corpus/<target>/`: the seeds, what the fuzzing campaigns kept, and
//! every input that once crashed) replayed through the fuzz targets' own code on stable Rust,
//! so a fixed crash stays fixed without nightly or cargo-fuzz.

use std::path::PathBuf;

#[allow(dead_code)]
#[path = "../../../fuzz/fuzz_targets/targets.rs"]
mod targets;

fn replay(target: &str, run: fn(&[u8])) -> usize {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut inputs = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        run(&std::fs::read(&path).unwrap());
        inputs += 1;
    }
    inputs
}

#[test]
fn the_fuzz_corpus_replays_without_a_panic() {
    let counts = [
        ("trace_reader", replay("trace_reader", targets::trace_reader)),
        ("frame_parser", replay("frame_parser", targets::frame_parser)),
        ("flow_file", replay("flow_file", targets::flow_file)),
        ("updates_file", replay("updates_file", targets::updates_file)),
        ("packet_string", replay("packet_string", targets::packet_string)),
        ("group_file", replay("group_file", targets::group_file)),
    ];
    for (target, n) in counts {
        assert!(n >= 5, "{target}: only {n} inputs replayed");
    }
}
