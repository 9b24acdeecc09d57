#![no_main]

// Each target uses one of the shared functions.
#[allow(dead_code)]
#[path = "targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::group_file(data));
