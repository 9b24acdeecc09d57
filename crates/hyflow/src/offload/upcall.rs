//! Policies that measure nothing: the NIC holds what upcalls install (or nothing).

use super::OffloadPolicy;
use crate::cost_model::CostModel;
use crate::nic::gigaflow::GigaflowConfig;
use crate::nic::NicConfig;

/// Offload on upcalls, or not at all.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UpcallOffload {
    /// Pure software forwarding: the NIC forwards nothing (Elixir's PSF baseline).
    Psf,
    /// Every new megaflow offloaded while the NIC has room, as OVS hardware offload does.
    OffloadAll {
        /// NIC entries.
        entries: usize,
        /// Distinct masks.
        max_masks: usize,
    },
    /// Gigaflow sub-traversal caching in K NIC tables.
    Gigaflow(GigaflowConfig),
}

impl OffloadPolicy for UpcallOffload {
    fn name(&self) -> &'static str {
        match self {
            UpcallOffload::Psf => "psf",
            UpcallOffload::OffloadAll { .. } => "offload-all",
            UpcallOffload::Gigaflow(_) => "gigaflow",
        }
    }

    fn nic(&self) -> Option<NicConfig> {
        match *self {
            UpcallOffload::Psf => None,
            UpcallOffload::OffloadAll { entries, max_masks } => {
                Some(NicConfig::Megaflow { entries, max_masks })
            }
            UpcallOffload::Gigaflow(g) => Some(NicConfig::Gigaflow(g)),
        }
    }

    fn install_on_upcall(&mut self, _now_ns: u64) -> bool {
        !matches!(self, UpcallOffload::Psf)
    }

    /// Gigaflow partitions each offered traversal and generates its entries; offloading a
    /// megaflow as it is costs what `upcall_ns` already counts.
    fn install_ns(&self, costs: &CostModel) -> f64 {
        match self {
            UpcallOffload::Gigaflow(_) => costs.gigaflow_install_ns,
            UpcallOffload::Psf | UpcallOffload::OffloadAll { .. } => 0.0,
        }
    }
}
