//! `hyflow sim` and `hyflow calibrate`: what forwarding a workload costs in time, cores, loss.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;

use hyflow::experiment::calibrate::calibrate;
use hyflow::experiment::replay::DecisionRecord;
use hyflow::experiment::sim::{probe, search, simulate, ProbeRunner};
use hyflow::timing::switch_datapath::SimDecision;
use hyflow_commands::create;
use hyflow_commands::plot::write_plots;
use hyflow_commands::report::write_report;
use hyflow_commands::run_record::RunRecord;
use hyflow_commands::sim::{write_series, write_summary, BackendArg, SimArgs};
use hyflow_commands::switch::workload;
use hyflow_commands::{capture_cut_warning, warning_text};

use crate::progress::Progress;
use crate::ray_probes::RayProbes;

#[derive(Args)]
pub struct CalibrateArgs {
    /// Write the measured cost model here (JSON).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Instead of timing the engine on the built-in workload, fit the costs of a running
    /// `hyflow switch` (its --ctl socket) from the rounds its cores forwarded: each layer's
    /// whole cost per frame on this host, AF_XDP receive, rewrite and send included (a sketch
    /// update, `sample_ns`, scaled from the built-in calibration as the frames are), so that
    /// `sim --costs` prices software as that switch spends it. Send representative traffic
    /// through the switch first.
    #[arg(long, value_name = "SOCKET")]
    pub live: Option<PathBuf>,
    /// Instead: FlexKVS's costs for `hyflow kvs-sim` — the store and the hash timed on this
    /// machine with the paper's workload, a line moved between cores timed with two threads
    /// on one store against two on partitions, and the rest of a request (its frames) from
    /// REPORT, the `hyflow kvs --cores 1 --json` report of a loaded run.
    #[arg(long, value_name = "REPORT", conflicts_with = "live")]
    pub kvs: Option<PathBuf>,
}

pub fn run_calibrate(a: CalibrateArgs) -> Result<()> {
    if let Some(report) = &a.kvs {
        return crate::kvs_sim::calibrate(report, &a.out);
    }
    let costs = match &a.live {
        None => calibrate(),
        Some(socket) => {
            let text = hyflow_live::control::request(socket, hyflow_live::args::CtlCommand::Costs)?;
            let fitted: serde_json::Value =
                serde_json::from_str(&text).with_context(|| format!("the switch's answer: {text}"))?;
            println!(
                "fitted from {} rounds (frames: {} microflow, {} megaflow, {} upcalls; R² {:.3})",
                fitted["rounds"],
                fitted["frames"][0],
                fitted["frames"][1],
                fitted["frames"][2],
                fitted["r_squared"].as_f64().unwrap_or(0.0)
            );
            let layers = ["microflow", "megaflow", "upcall"];
            for (layer, cost) in layers.iter().zip(fitted["per_frame_ns"].as_array().into_iter().flatten()) {
                if cost.as_f64() == Some(0.0) {
                    eprintln!(
                        "hyflow calibrate: warning: the {layer} layer's cost came out as 0: too few rounds tell it \
                         apart; send more traffic of the kind `sim` will model through the switch"
                    );
                }
            }
            hyflow::cost_model::CostModel::from_json(&fitted["cost_model"].to_string())
                .map_err(|e| anyhow::anyhow!("the switch's cost model: {e}"))?
        }
    };
    costs.check()?;
    let text = serde_json::to_string_pretty(&costs)?;
    std::fs::write(&a.out, format!("{text}\n"))
        .with_context(|| format!("{}: cannot write", a.out.display()))?;
    for (name, v) in costs.entries() {
        println!("{name:>18} {v:>10.1}");
    }
    println!("wrote {}", a.out.display());
    Ok(())
}

pub fn run(a: SimArgs) -> Result<()> {
    let exp = a.experiment(a.timeseries.is_some() || a.plot.is_some() || a.report.is_some())?;
    let workload = workload(&a.switch)?;
    if let Some(p) = a.probe() {
        // A Ray task's probe: its loss alone, on stdout, however the search writes its outputs.
        println!("{}", serde_json::to_string(&probe(&workload, &exp, p)?)?);
        return Ok(());
    }
    let outcome = match a.search() {
        None => {
            let progress = Progress::new("sim");
            let mut log = a.decisions.as_deref().map(create).transpose()?;
            let mut write = |d: SimDecision| -> std::io::Result<()> {
                let out = log.as_mut().expect("decisions are recorded only with a log");
                serde_json::to_writer(&mut *out, &DecisionRecord::from(&d))?;
                writeln!(out)
            };
            let on_decision: Option<&mut dyn FnMut(SimDecision) -> std::io::Result<()>> =
                if a.decisions.is_some() { Some(&mut write) } else { None };
            let outcome = simulate(&workload, &exp, &mut |n, at| progress.watch(n, at), on_decision)?;
            if let Some(mut out) = log {
                out.flush()?;
            }
            progress.finish();
            outcome
        }
        Some(what) => {
            let ray = match a.backend {
                BackendArg::Local => None,
                BackendArg::Ray => {
                    // The tasks run `sim` on the search's own options (`hyflow sim ...`), sent
                    // as text.
                    let argv = std::env::args_os()
                        .skip(2)
                        .map(|a| a.into_string())
                        .collect::<Result<Vec<String>, _>>()
                        .map_err(|a| {
                            anyhow::anyhow!("--backend ray sends the options as text: {a:?} is not UTF-8")
                        })?;
                    Some(RayProbes::start(argv, a.ray_address.as_deref(), a.search_threads)?)
                }
            };
            search(&workload, &exp, what, &|| true, ray.as_ref().map(|r| r as &dyn ProbeRunner))?
        }
    };
    if let Some(cut) = &outcome.summary.capture_cut {
        eprintln!("hyflow: warning: {}", capture_cut_warning(cut));
    }
    for w in &outcome.summary.warnings {
        eprintln!("hyflow: warning: {}", warning_text(w));
    }
    // With a machine-readable output on stdout, the human text goes to stderr.
    let stdout_taken =
        [&a.json, &a.decisions, &a.timeseries].iter().any(|p| p.as_deref() == Some(Path::new("-")));
    if stdout_taken {
        write_summary(&mut std::io::stderr().lock(), &outcome.summary)?;
    } else {
        write_summary(&mut std::io::stdout().lock(), &outcome.summary)?;
    }
    if let Some(p) = &a.json {
        let mut out = create(p)?;
        writeln!(out, "{}", serde_json::to_string(&outcome.summary)?)?;
        out.flush()?;
    }
    if let Some(p) = &a.timeseries {
        write_series(p, &outcome.metrics)?;
    }
    if a.plot.is_some() || a.report.is_some() {
        let record = RunRecord::of_sim(crate::setup_args(), &outcome, &exp)?;
        if let Some(dir) = &a.plot {
            write_plots(dir, &record)?;
        }
        if let Some(path) = &a.report {
            write_report(path, &record)?;
        }
    }
    Ok(())
}
