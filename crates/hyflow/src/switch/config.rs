//! What a switch is built from: which layers exist, their sizes and behaviour, and why a
//! configuration is refused.

use crate::cache::microflow::MicroflowConfigError;
use crate::cache::table::TableConfigError;
use crate::cache::Consistency;
use crate::invalid_param::{CarriesInvalidParam, InvalidParam};
use crate::nic::{NicCapability, NicConfig};

/// Default software megaflow cache size (OVS's default `flow-limit`).
pub const DEFAULT_MEGAFLOW_ENTRIES: usize = 200_000;
/// Default microflow cache size.
pub const DEFAULT_MICROFLOW_ENTRIES: usize = 65_536;
/// Default `max-idle`: 10 s, as OVS.
pub const DEFAULT_MAX_IDLE_NS: u64 = 10_000_000_000;

/// The microflow cache's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MicroflowConfig {
    /// Entries.
    pub entries: usize,
    /// Entries per bucket: 1 (direct replacement), 2 or 4 (pseudo-LRU).
    pub ways: usize,
}

/// Connection tracking in the NIC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NicConntrack {
    /// None: a decision through `ct` stays in software, as without hardware offload of `ct`.
    #[default]
    Off,
    /// As tc's `ct` offload does it (Linux's flow table, ConnectX-class NICs): the NIC tracks
    /// the connections software saw established, at most `entries` of them, each from
    /// [`SwitchConfig::nic_update_latency_ns`] after software offloaded it (see
    /// [`crate::conntrack`]); a packet whose connection it does not hold (new, closing, or
    /// left out) goes to software from the pass that tracks it.
    Established {
        /// Connections the NIC's table holds at most.
        entries: usize,
    },
    /// Every connection, from its first packet: an upper bound (the NIC's table is the
    /// software's).
    All,
}

impl NicConntrack {
    /// Whether the NIC tracks connections at all.
    pub(crate) fn is_on(self) -> bool {
        self != NicConntrack::Off
    }
}

/// Which layers exist and how they behave.
#[derive(Clone, Debug)]
pub struct SwitchConfig {
    /// The NIC, or none.
    pub nic: Option<NicConfig>,
    /// Time from a NIC install to the first packet the entry forwards (0: at once).
    pub nic_update_latency_ns: u64,
    /// Whether, and how, the NIC tracks connections: decisions through `ct` may then be
    /// offloaded, and a packet whose first pass the NIC decided makes its recirculated passes
    /// in the NIC while it holds them.
    pub nic_conntrack: NicConntrack,
    /// What the NIC's hardware can hold: an upcall whose entry it cannot is not offered.
    pub nic_capability: NicCapability,
    /// The microflow cache, or none.
    pub microflow: Option<MicroflowConfig>,
    /// Megaflow cache entries, or none.
    pub megaflow: Option<usize>,
    /// Microflow cache consistency mechanism.
    pub consistency: Consistency,
    /// Idle time after which NIC and megaflow entries expire (0 = never).
    pub max_idle_ns: u64,
    /// Time between a rule update and the revalidator acting on it.
    pub revalidation_delay_ns: u64,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            nic: Some(NicConfig::default()),
            nic_update_latency_ns: 0,
            nic_conntrack: NicConntrack::Off,
            nic_capability: NicCapability::Model,
            microflow: Some(MicroflowConfig { entries: DEFAULT_MICROFLOW_ENTRIES, ways: 1 }),
            megaflow: Some(DEFAULT_MEGAFLOW_ENTRIES),
            consistency: Consistency::default(),
            max_idle_ns: DEFAULT_MAX_IDLE_NS,
            revalidation_delay_ns: 0,
        }
    }
}

impl SwitchConfig {
    /// Every packet through the slow path: the reference the caches are checked against.
    pub fn no_cache() -> SwitchConfig {
        SwitchConfig { nic: None, microflow: None, megaflow: None, ..SwitchConfig::default() }
    }
}

/// Why a switch cannot be built as configured.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SwitchConfigError {
    /// Bad microflow cache shape.
    #[error(transparent)]
    Microflow(#[from] MicroflowConfigError),
    /// Bad NIC table shape.
    #[error(transparent)]
    Nic(#[from] TableConfigError),
    /// Zero megaflow entries with the cache on.
    #[error("`megaflow-entries` must be at least 1 (turn the cache off with `no-megaflow` instead)")]
    Megaflow,
}

impl CarriesInvalidParam for SwitchConfigError {
    fn invalid_param(&self) -> Option<InvalidParam> {
        match self {
            SwitchConfigError::Microflow(MicroflowConfigError::TooLarge(p))
            | SwitchConfigError::Nic(TableConfigError::Tables(p)) => Some(p.clone()),
            SwitchConfigError::Microflow(MicroflowConfigError::Empty) => {
                Some(MicroflowConfigError::empty_param())
            }
            SwitchConfigError::Megaflow => Some(InvalidParam::new(
                "megaflow-entries",
                "must be at least 1 (turn the cache off with `no-megaflow` instead)",
            )),
            _ => None,
        }
    }
}
