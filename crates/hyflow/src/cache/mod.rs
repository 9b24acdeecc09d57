//! The host's software fast path: a FlowShadow exact-match microflow cache and a megaflow
//! cache, both holding [`Decision`](crate::decision::Decision)s — references into the Action
//! Table and the rule-path table — so that whichever layer forwards a packet, per-rule
//! counters stay exact; and the bounded wildcard table a NIC stage is built from.

pub mod dump;
pub mod megaflow;
pub mod microflow;
pub mod table;

pub use megaflow::{CachedFlow, MegaflowCache};
pub use microflow::{Consistency, MicroflowCache};
