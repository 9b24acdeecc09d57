//! Workload generators: traffic that exercises a flow table, and rule-update streams.

pub mod builtin;
pub mod traffic;
pub mod updates;

pub use traffic::{generate, make_flows, GenPacket, TrafficConfig, TrafficError};
pub use updates::{generate_updates, UpdatesConfig};
