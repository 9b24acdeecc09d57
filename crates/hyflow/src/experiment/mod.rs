//! Experiments as the CLI and the Python package run them: a [`Workload`] (rules, updates,
//! packets) and a plain config struct in, a typed result out. Orchestration lives here —
//! reading the input, applying updates on schedule, rate rescaling, the duration cut, the
//! capacity searches, summary assembly — so that every front only maps its arguments to a
//! config and prints what comes back.
//!
//! Runs are deterministic: the same workload and config give the same result on any machine.
//! The one exception is opt-in ([`replay::ReplayConfig::time_host`]): host wall-clock timings,
//! reported apart from the deterministic figures.

pub mod replay;
pub mod sim;

use std::path::Path;

use crate::gen::builtin;
use crate::input::{Input, InputError};
use crate::openflow::update::{read_updates_file, Update};
use crate::openflow::{read_flow_file, FlowFileError, Rule};
use crate::sim::SimConfigError;
use crate::switch::SwitchConfigError;

pub use crate::input::Progress;

/// What an experiment forwards: the rules, the rule updates, and the packets.
#[derive(Clone, Debug)]
pub struct Workload {
    /// The pipeline's rules.
    pub rules: Vec<Rule>,
    /// Rule updates, applied on schedule.
    pub updates: Vec<Update>,
    /// The packets.
    pub input: Input,
}

impl Workload {
    /// The built-in workload: the 7-table L2/L3/ACL pipeline of `examples/l2l3acl.flows`,
    /// 200,000 generated packets of 2,000 Zipf-distributed flows arriving on `in_port`
    /// (default 1), 10% of the rules updated per second.
    pub fn builtin(in_port: Option<u32>) -> Workload {
        let rules = builtin::rules();
        let updates = builtin::updates(&rules);
        Workload {
            rules,
            updates,
            input: Input::Generated { traffic: builtin::TRAFFIC, in_port: in_port.unwrap_or(1) },
        }
    }

    /// A flow file and a capture, with an updates file or none (see [`Input::Capture`] for
    /// `in_port`).
    pub fn from_files(
        flows: &Path,
        trace: &Path,
        updates: Option<&Path>,
        in_port: Option<u32>,
    ) -> Result<Workload, ExperimentError> {
        let rules = read_flow_file(flows)?;
        let updates = updates.map(read_updates_file).transpose()?.unwrap_or_default();
        Ok(Workload { rules, updates, input: Input::Capture { path: trace.to_path_buf(), in_port } })
    }

    /// Replaces the updates with those of an updates file.
    pub fn with_updates_file(mut self, path: &Path) -> Result<Workload, ExperimentError> {
        self.updates = read_updates_file(path)?;
        Ok(self)
    }
}

/// Why an experiment cannot run. Messages name the offending option as the CLI spells it.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// A flow or updates file is malformed (file, line, column, token).
    #[error(transparent)]
    Flows(#[from] FlowFileError),
    /// The packets cannot be read.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The switch cannot be built as configured.
    #[error(transparent)]
    Switch(#[from] SwitchConfigError),
    /// The simulated machine cannot be built as configured.
    #[error(transparent)]
    Machine(#[from] SimConfigError),
    /// A parameter out of range.
    #[error("{0}")]
    Invalid(String),
    /// The input cannot answer the question asked.
    #[error("{0}")]
    Unanswerable(String),
    /// A consumer of per-packet results failed (e.g. writing `--decisions`).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
