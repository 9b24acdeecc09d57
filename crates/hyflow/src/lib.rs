//! hyflow: flow processing split between a SmartNIC model and host software.
//!
//! Data flows one way — trace → NIC pipeline → host rings → software fast path → slow path —
//! and every layer is a pure function of (state, packet, time). This crate is the I/O-free
//! engine; the `hyflow` CLI is a thin front over it. See `docs/ARCHITECTURE.md`.

pub mod cache;
pub mod experiment;
pub mod host_time;
pub mod input;
pub mod measure;
pub mod nic;
pub mod openflow;
pub mod packet;
pub mod replay;
pub mod revalidator;
pub mod sim;
pub mod switch;
pub mod trace;
pub mod tuple_space;
pub mod workload;
