//! Workload generators: what makes the rules, rule updates and packets an experiment
//! forwards ([`crate::experiment::Workload`]) — traffic that exercises a flow table,
//! Pipebench-style pipelines, traffic with churn and bursts, conversations, rule-update
//! streams, the built-in workload.

pub mod builtin;
pub mod conversations;
pub mod dynamics;
pub mod flow_arrivals;
pub mod gateway;
pub mod pipebench;
pub mod pipelines;
pub mod traffic;
pub mod updates;

pub use traffic::{
    generate, generate_flows, make_flows, random_flows, GenPacket, Traffic, TrafficConfig, TrafficError,
};
pub use updates::{generate_updates, UpdatesConfig};

/// The gateway pipeline `gateway` traffic is made for (`examples/gateway.flows`).
pub const GATEWAY_FLOWS: &str = include_str!("gateway.flows");
