//! A capacity search's probes run by Python: `sim(find=..., backend="ray")` hands the engine a
//! callable (`hyflow._ray_search.RayProbes`) that runs a batch of probes as Ray tasks, each
//! calling [`sim_probe`] on a worker, and answers their outcomes.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use hyflow::experiment::sim::{probe, Probe, ProbeRunner};
use hyflow::experiment::ExperimentError;
use hyflow::timing::search::CoreLoss;
use hyflow_commands::{sim, switch};

use crate::{error, parse};

/// The engine's side of a Python probe runner.
pub(crate) struct PyProbes {
    /// Called with a list of `(cores, rate or None)`; returns a list of dicts, each a probe's
    /// [`CoreLoss`] fields or `{"error": message}`.
    run: Py<PyAny>,
    width: usize,
}

impl PyProbes {
    /// The runner `run`, which runs `width` probes at a time.
    pub(crate) fn new(run: &Bound<'_, PyAny>) -> PyResult<PyProbes> {
        let width: usize = run.getattr("width")?.extract()?;
        Ok(PyProbes { run: run.clone().unbind(), width: width.max(1) })
    }
}

/// One probe's outcome from a Python dict.
fn outcome(d: &Bound<'_, PyAny>) -> PyResult<Result<CoreLoss, ExperimentError>> {
    if let Ok(e) = d.get_item("error") {
        return Ok(Err(ExperimentError::Remote(format!("a Ray probe: {}", e.str()?))));
    }
    Ok(Ok(CoreLoss::new(
        d.get_item("cores")?.extract()?,
        d.get_item("lost")?.extract()?,
        d.get_item("offered")?.extract()?,
        d.get_item("steady")?.extract()?,
    )))
}

impl ProbeRunner for PyProbes {
    fn width(&self) -> usize {
        self.width
    }

    fn run(&self, probes: &[Probe]) -> Vec<Result<CoreLoss, ExperimentError>> {
        let asked: Vec<(usize, Option<f64>)> = probes.iter().map(|p| (p.cores, p.rate_pps)).collect();
        let answered = Python::attach(|py| -> PyResult<Vec<Result<CoreLoss, ExperimentError>>> {
            let list = self.run.call1(py, (asked,))?;
            let list = list.bind(py);
            let got = list.len()?;
            if got != probes.len() {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "the probe runner answered {got} of {} probes",
                    probes.len()
                )));
            }
            list.try_iter()?.map(|d| outcome(&d?)).collect()
        });
        answered.unwrap_or_else(|e| {
            let message = format!("the Ray probes failed: {e}");
            probes.iter().map(|_| Err(ExperimentError::Remote(message.clone()))).collect()
        })
    }
}

/// One probe of a `sim` search with options `argv` (the search's own): the run on `cores` at
/// `rate` packets/s (`None`: the search's `rate`), as a dict of its loss. What a Ray task runs.
#[pyfunction]
#[pyo3(signature = (argv, cores, rate=None))]
pub(crate) fn sim_probe<'py>(
    py: Python<'py>,
    argv: Vec<String>,
    cores: usize,
    rate: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let args: sim::SimArgs = parse("sim", argv)?;
    let loss = py
        .detach(|| -> anyhow::Result<CoreLoss> {
            // As `sim` builds the search's experiment (with its time series).
            let exp = args.experiment(true)?;
            let workload = switch::workload(&args.switch)?;
            Ok(probe(&workload, &exp, args.probe_at(cores, rate))?)
        })
        .map_err(error)?;
    let d = PyDict::new(py);
    d.set_item("cores", loss.cores)?;
    d.set_item("lost", loss.lost)?;
    d.set_item("offered", loss.offered)?;
    d.set_item("loss_rate", loss.loss_rate)?;
    d.set_item("steady", loss.steady)?;
    Ok(d)
}
