//! `hyflow topk` and `hyflow eval topk`: real-time large flows of a trace, and how well each
//! detector finds them against the exact sliding-window answer.

use std::io::{BufWriter, Write};

use anyhow::Result;
use hyflow::experiment::topk::topk;
use hyflow_commands::capture_cut_warning;
use hyflow_commands::topk::{capture, summary_notes, write_report, EvalTopkArgs, TopkArgs};

use crate::progress::Progress;

pub fn run(a: TopkArgs) -> Result<()> {
    let config = a.config()?;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let progress = Progress::new("topk");
    let summary =
        topk(&capture(&a.trace, a.strict), &config, &mut |n, at| progress.watch(n, at), &mut |r| {
            write_report(&mut out, a.json, r)
        })?;
    progress.finish();
    out.flush()?;
    if let Some(cut) = &summary.capture_cut {
        eprintln!("hyflow: warning: {}", capture_cut_warning(cut));
    }
    for note in summary_notes(&summary, &config) {
        eprintln!("hyflow topk: {note}");
    }
    Ok(())
}

pub fn eval(a: EvalTopkArgs) -> Result<()> {
    let config = a.config()?;
    let progress = Progress::new("eval topk");
    let outcome = hyflow::experiment::topk::eval(&capture(&a.trace, a.strict), &config, &mut |n, at| {
        progress.watch(n, at)
    })?;
    progress.finish();
    if let Some(cut) = &outcome.capture_cut {
        eprintln!("hyflow: warning: {}", capture_cut_warning(cut));
    }
    let rows = outcome.rows;
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    if a.csv {
        writeln!(out, "algo,memory_bytes,memory_used,k,precision,are,windows")?;
    } else if !a.json {
        writeln!(out, "| algo | memory | used B | k | precision | ARE | windows |")?;
        writeln!(out, "|---|---|---|---|---|---|---|")?;
    }
    for r in &rows {
        if let Some(w) = &r.warning {
            eprintln!("hyflow eval topk: {} at {} B, k = {}: {w}", r.algo, r.memory_bytes, r.k);
        }
        if a.json {
            writeln!(out, "{}", serde_json::to_string(r)?)?;
            continue;
        }
        match (r.memory_used, r.precision, r.are, r.windows) {
            (Some(used), Some(p), Some(are), Some(windows)) if a.csv => {
                writeln!(out, "{},{},{used},{},{p:.4},{are:.4},{windows}", r.algo, r.memory_bytes, r.k)?
            }
            (Some(used), Some(p), Some(are), Some(windows)) => writeln!(
                out,
                "| {} | {} KB | {used} | {} | {p:.3} | {are:.3} | {windows} |",
                r.algo,
                r.memory_bytes / 1024,
                r.k
            )?,
            (Some(used), None, None, Some(windows)) if a.csv => {
                writeln!(out, "{},{},{used},{},,,{windows}", r.algo, r.memory_bytes, r.k)?
            }
            (Some(used), None, None, Some(windows)) => writeln!(
                out,
                "| {} | {} KB | {used} | {} | no full window | | {windows} |",
                r.algo,
                r.memory_bytes / 1024,
                r.k
            )?,
            _ if a.csv => writeln!(out, "{},{},,{},,,", r.algo, r.memory_bytes, r.k)?,
            _ => writeln!(
                out,
                "| {} | {} KB | — | {} | does not fit | | |",
                r.algo,
                r.memory_bytes / 1024,
                r.k
            )?,
        }
    }
    out.flush()?;
    Ok(())
}
