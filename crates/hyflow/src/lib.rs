//! hyflow: flow processing split between a SmartNIC model and host software.
//!
//! Data flows one way — trace → NIC pipeline → host rings → software fast path → slow path —
//! and every layer is a pure function of (state, packet, time): time and randomness are
//! passed in, and the only reads of the host's clock are at the edge ([`host_time`], for
//! timings reported apart from results). [`experiment`] runs whole experiments from plain
//! configs; the `hyflow` CLI is a thin front over it. See `docs/ARCHITECTURE.md`.

// No unsafe code but what allows it locally with its reasons: a cache prefetch, and the
// key-value store's log and bucket lines, which cores share under per-bucket locks as FlexKVS
// does (`kvs::store`).
#![deny(unsafe_code)]
// Every public item says what it is; report fields say their unit.
#![warn(missing_docs)]
// A `pub` item is reachable from the crate root: the API is what `lib.rs` exports, nothing hidden
// in a private module.
#![warn(unreachable_pub)]

pub mod cache;
pub mod capture;
pub mod columnar;
pub mod conntrack;
pub mod cost_model;
pub mod decision;
pub mod experiment;
mod flow_number_table;
pub mod host_time;
pub mod input;
pub mod invalid_param;
pub mod kvs;
pub mod measure;
pub mod nic;
pub mod offload;
pub mod openflow;
pub mod packet;
mod prefetch;
pub mod replay_report;
pub mod revalidation;
pub mod revalidator;
pub mod storm;
pub mod switch;
pub mod timing;
pub mod tuple_space;
pub mod update_schedule;
pub mod workload;

/// An I/O error's reason as a person reads it, without Rust's ` (os error N)` suffix: every
/// message about a file names the file and says this once.
pub fn os_reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}
