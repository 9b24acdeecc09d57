//! Workload generators: traffic that exercises a flow table, and rule-update streams.

pub mod builtin;
pub mod dynamics;
pub mod pipebench;
pub mod pipelines;
pub mod traffic;
pub mod updates;

pub use traffic::{
    generate, generate_flows, make_flows, random_flows, GenPacket, Traffic, TrafficConfig, TrafficError,
};
pub use updates::{generate_updates, UpdatesConfig};
