//! The SmartNIC model: a sequence of match+action [`Stage`]s (FlexNIC's RMT pipeline). A
//! packet that matches runs the entry's actions in hardware; one that misses goes to the host.
//!
//! Stages are generic over what an entry carries, and schemes (policies deciding what to
//! install where) sit on top. This scheme is OVS-style megaflow offload: one ternary
//! stage, every new megaflow offloaded while there is room. Gigaflow's K tagged stages,
//! Elixir's exact-match areas and FlexNIC's steering are further schemes over the same stages.

pub mod gigaflow;
pub mod stage;

pub use stage::{MatchKind, Refused, Stage, StageConfig, StageConfigError};

use crate::cache::CachedFlow;

/// Default capacity of the megaflow-offload stage (the Gigaflow paper's Megaflow baseline).
pub const DEFAULT_MEGAFLOW_ENTRIES: usize = 32_768;
/// Default mask limit of the megaflow-offload stage.
pub const DEFAULT_MEGAFLOW_MASKS: usize = 512;

/// OVS hardware offload of megaflows: one ternary stage.
pub struct MegaflowOffload {
    /// The stage holding offloaded megaflows.
    pub stage: Stage<CachedFlow>,
}

impl MegaflowOffload {
    /// A NIC with one ternary stage of `entries` entries and `max_masks` masks.
    pub fn new(entries: usize, max_masks: usize) -> Result<MegaflowOffload, StageConfigError> {
        let config = StageConfig {
            name: "megaflow".to_string(),
            kind: MatchKind::Ternary,
            capacity: entries,
            max_masks,
        };
        Ok(MegaflowOffload { stage: Stage::new(config)? })
    }
}
