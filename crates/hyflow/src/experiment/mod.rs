//! Experiments as the CLI and the Python package run them: a [`Workload`] (rules, updates,
//! packets) and a plain config struct in, a typed result out. Orchestration lives here —
//! reading the input, applying updates on schedule, rate rescaling, the duration cut, the
//! capacity searches, summary assembly — so that every front only maps its arguments to a
//! config and prints what comes back.
//!
//! Runs are deterministic: the same workload and config give the same result on any machine.
//! The one exception is opt-in ([`replay::ReplayConfig::time_host`]): host wall-clock timings,
//! reported apart from the deterministic figures.

pub mod bursts;
pub mod calibrate;
pub mod kvs_calibrate;
pub mod replay;
pub mod sim;
pub mod topk;
mod workload;

use crate::input::InputError;
use crate::openflow::FlowFileError;
use crate::switch::SwitchConfigError;
use crate::timing::SimConfigError;

use crate::invalid_param::{CarriesInvalidParam, InvalidParam};

pub use crate::input::Progress;
pub use workload::Workload;

/// Why an experiment cannot run. A parameter out of range is named the engine's way
/// ([`CarriesInvalidParam`]); fronts respell it.
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
    /// A detector cannot be built as configured.
    #[error(transparent)]
    Detector(#[from] crate::measure::ConfigError),
    /// The simulated machine cannot be built as configured.
    #[error(transparent)]
    Machine(#[from] SimConfigError),
    /// A parameter out of range.
    #[error(transparent)]
    Param(#[from] InvalidParam),
    /// The configuration as a whole cannot work.
    #[error("{0}")]
    Invalid(String),
    /// The offload policy cannot run as configured.
    #[error(transparent)]
    Policy(crate::offload::PolicyConfigError),
    /// The input cannot answer the question asked.
    #[error("{0}")]
    Unanswerable(String),
    /// A consumer of per-packet results failed (e.g. writing `--decisions`).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The caller asked the run to stop (its progress callback broke off: Ctrl-C in Python).
    #[error("interrupted before the input's end")]
    Interrupted,
    /// A search's probe run elsewhere (a Ray task) failed, or could not be run: its message.
    #[error("{0}")]
    Remote(String),
}

/// What a run's progress callback gets (packets so far, how far the input was read) and
/// answers: go on, or stop the run, which then ends in [`ExperimentError::Interrupted`].
pub type OnProgress<'a> = &'a mut dyn FnMut(u64, Progress) -> std::ops::ControlFlow<()>;

/// The progress callback of a run nobody watches.
pub fn unwatched(_: u64, _: Progress) -> std::ops::ControlFlow<()> {
    std::ops::ControlFlow::Continue(())
}

impl CarriesInvalidParam for ExperimentError {
    fn invalid_param(&self) -> Option<InvalidParam> {
        match self {
            ExperimentError::Param(p) => Some(p.clone()),
            ExperimentError::Switch(e) => e.invalid_param(),
            ExperimentError::Detector(e) => e.invalid_param(),
            ExperimentError::Machine(e) => e.invalid_param(),
            ExperimentError::Policy(e) => e.invalid_param(),
            ExperimentError::Flows(_)
            | ExperimentError::Input(_)
            | ExperimentError::Invalid(_)
            | ExperimentError::Unanswerable(_)
            | ExperimentError::Io(_)
            | ExperimentError::Interrupted
            | ExperimentError::Remote(_) => None,
        }
    }
}
