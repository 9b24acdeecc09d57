//! `hyflow replay`: the workload through the switch, the report printed.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use hyflow::experiment::replay::DecisionRecord;
use hyflow_commands::replay::{builtin_banner, rule_stats, write_dumps, ReplayArgs};
use hyflow_commands::report::write_report;
use hyflow_commands::run_record::RunRecord;
use hyflow_commands::switch::workload;
use hyflow_commands::{capture_cut_warning, create};

use crate::progress::Progress;

pub fn run(r: ReplayArgs) -> Result<()> {
    let config = r.config()?;
    let workload = workload(&r.switch)?;
    // With a machine-readable output on stdout, the human text goes to stderr.
    let stdout_taken = [&r.json, &r.decisions, &r.dump_megaflows, &r.dump_nic]
        .iter()
        .any(|p| p.as_deref() == Some(Path::new("-")));
    let mut human: Box<dyn Write> =
        if stdout_taken { Box::new(std::io::stderr()) } else { Box::new(std::io::stdout().lock()) };
    if r.builtin() {
        writeln!(human, "{}\n", builtin_banner(&workload))?;
    }
    let mut log = r.decisions.as_deref().map(create).transpose()?;
    let progress = Progress::new("replay");
    let outcome = hyflow::experiment::replay::run(&workload, &config, &mut |d| {
        progress.tick(d.index + 1, d.progress);
        match &mut log {
            Some(out) => {
                serde_json::to_writer(&mut *out, &DecisionRecord::new(d.index, d.layer, d.outputs))?;
                writeln!(out)
            }
            None => Ok(()),
        }
    })?;
    progress.finish();
    if let Some(mut out) = log {
        out.flush()?;
    }
    if let Some(cut) = &outcome.report.capture_cut {
        eprintln!("hyflow: warning: {}", capture_cut_warning(cut));
    }
    write!(human, "{}", outcome.report.text())?;
    if r.rule_stats {
        writeln!(human, "\n{}", rule_stats(outcome.switch.pipeline()))?;
    }
    human.flush()?;
    write_dumps(&r, &outcome.switch, &outcome.report)?;
    if let Some(path) = &r.report {
        write_report(path, &RunRecord::of_replay(crate::setup_args(), &outcome)?)?;
    }
    if let Some(p) = &r.json {
        let mut out = create(p)?;
        writeln!(out, "{}", serde_json::to_string(&outcome.report)?)?;
        out.flush()?;
    }
    Ok(())
}
