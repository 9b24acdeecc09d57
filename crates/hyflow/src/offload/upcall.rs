//! Policies that measure nothing: the NIC holds what upcalls install (or nothing).

use std::sync::Arc;

use super::{
    OffloadPolicy, PolicyConfig, PolicyConfigError, PolicyFactory, PolicyMachine, PolicyParams,
    PolicyRegistration,
};
use crate::cost_model::CostModel;
use crate::nic::NicConfig;

/// `psf`.
pub(crate) const PSF: PolicyRegistration = PolicyRegistration {
    name: "psf",
    about: "Nothing: pure software forwarding",
    params: &[],
    upcall_nic: None,
    configure: |_| Ok(Arc::new(UpcallOffload::Psf)),
};

/// `offload-all`.
pub(crate) const OFFLOAD_ALL: PolicyRegistration = PolicyRegistration {
    name: "offload-all",
    about: "Every new megaflow while there is room, as OVS offload",
    params: &[],
    upcall_nic: Some("megaflow"),
    configure: |p| match &p.nic {
        Some(nic) if nic.name() == "megaflow" => Ok(Arc::new(UpcallOffload::OffloadAll(nic.clone()))),
        _ => Err(PolicyConfigError::Invalid("offload-all needs a megaflow NIC".to_string())),
    },
};

/// `gigaflow`.
pub(crate) const GIGAFLOW: PolicyRegistration = PolicyRegistration {
    name: "gigaflow",
    about:
        "Sub-traversals cached in the Gigaflow NIC's tables; each upcall also costs Gigaflow's install work",
    params: &[],
    upcall_nic: Some("gigaflow"),
    configure: configure_gigaflow,
};

fn configure_gigaflow(p: &PolicyParams) -> Result<PolicyConfig, PolicyConfigError> {
    match &p.nic {
        Some(nic) if nic.name() == "gigaflow" => Ok(Arc::new(UpcallOffload::Gigaflow(nic.clone()))),
        _ => Err(PolicyConfigError::Invalid("gigaflow needs a Gigaflow NIC".to_string())),
    }
}

/// Offload on upcalls, or not at all.
#[derive(Clone, Debug)]
pub enum UpcallOffload {
    /// Pure software forwarding: the NIC forwards nothing (Elixir's PSF baseline).
    Psf,
    /// Every new megaflow offloaded while the NIC (a megaflow offload) has room, as OVS
    /// hardware offload does.
    OffloadAll(NicConfig),
    /// Gigaflow sub-traversal caching in K NIC tables (a Gigaflow NIC).
    Gigaflow(NicConfig),
}

impl UpcallOffload {
    fn name(&self) -> &'static str {
        match self {
            UpcallOffload::Psf => PSF.name,
            UpcallOffload::OffloadAll(_) => OFFLOAD_ALL.name,
            UpcallOffload::Gigaflow(_) => GIGAFLOW.name,
        }
    }
}

impl PolicyFactory for UpcallOffload {
    fn name(&self) -> &'static str {
        UpcallOffload::name(self)
    }

    fn check(&self, _machine: &PolicyMachine) -> Result<(), PolicyConfigError> {
        Ok(())
    }

    fn build(&self, _machine: &PolicyMachine) -> Result<Box<dyn OffloadPolicy>, PolicyConfigError> {
        Ok(Box::new(self.clone()))
    }
}

impl OffloadPolicy for UpcallOffload {
    fn name(&self) -> &'static str {
        UpcallOffload::name(self)
    }

    /// Nothing to zero: the NIC counts its installs, the budget its refusals.
    fn restart_counts(&mut self) {}

    fn nic(&self) -> Option<NicConfig> {
        match self {
            UpcallOffload::Psf => None,
            UpcallOffload::OffloadAll(nic) | UpcallOffload::Gigaflow(nic) => Some(nic.clone()),
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
            UpcallOffload::Psf | UpcallOffload::OffloadAll(_) => 0.0,
        }
    }
}
