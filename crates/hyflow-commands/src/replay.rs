//! `replay`'s options and their meaning: the [`ReplayConfig`], the built-in workload's
//! banner and the per-rule counters as `ovs-ofctl dump-flows` prints them.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use std::io::Write;

use hyflow::cache::dump::dump_text;
use hyflow::experiment::replay::ReplayConfig;
use hyflow::experiment::Workload;
use hyflow::openflow::{Pipeline, Rule};
use hyflow::replay_report::ReplayReport;
use hyflow::switch::Switch;
use hyflow::workload::builtin;

use crate::switch::{seconds_to_ns, switch_config, SwitchArgs};

#[derive(Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub switch: SwitchArgs,
    /// Write the report as one JSON object to FILE (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write one JSON line per packet: {"i", "layer", "outputs", "drop"}.
    #[arg(long, value_name = "FILE")]
    pub decisions: Option<PathBuf>,
    /// Print per-rule packet and byte counters, like `ovs-ofctl dump-flows`.
    #[arg(long)]
    pub rule_stats: bool,
    /// Also report where packets went from SECONDS of trace time on (the steady state); the
    /// main figures count from the first packet, the cold start included (as the Gigaflow
    /// artifact counted its hit rates).
    #[arg(long, value_name = "SECONDS")]
    pub warmup: Option<f64>,
    /// Write the megaflow cache's entries at the end to FILE (`-` for stdout), one line each
    /// as `ovs-appctl dpctl/dump-flows` lists datapath flows: match (in flow-file syntax, as
    /// `ofproto/trace`'s Megaflow line), packets, bytes, used (s before the trace's end),
    /// datapath actions.
    #[arg(long, value_name = "FILE")]
    pub dump_megaflows: Option<PathBuf>,
    /// Write the NIC's entries at the end to FILE (`-` for stdout), as
    /// `ovs-appctl dpctl/dump-flows type=offloaded` lists the flows in hardware; with several
    /// tables (Gigaflow's stages, exact-match areas) each line starts with `table=N`; a
    /// Gigaflow entry's with `table=N,tag=T` (its lookup tag), and its actions end with the
    /// tag it passes on (`next:T`).
    #[arg(long, value_name = "FILE")]
    pub dump_nic: Option<PathBuf>,
    /// Write the run's report to FILE: a self-contained HTML page (setup, figures, where
    /// packets were handled, ports, busiest flows), or with a `.json` name the run record
    /// that `hyflow report` draws beside others.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

impl ReplayArgs {
    /// The replay these options describe (host timings on, as the CLI reports them).
    pub fn config(&self) -> Result<ReplayConfig> {
        let warmup_ns = self.warmup.map(|s| seconds_to_ns("--warmup", s)).transpose()?;
        Ok(ReplayConfig { switch: switch_config(&self.switch)?, time_host: true, warmup_ns })
    }

    /// Whether the options name no files: the built-in workload runs.
    pub fn builtin(&self) -> bool {
        self.switch.flows.is_none() && self.switch.trace.is_none()
    }
}

/// What the built-in workload is, in one line (printed before its report).
pub fn builtin_banner(workload: &Workload) -> String {
    format!(
        "built-in workload: {} ({} rules), {} generated packets of {} flows, {}% of rules updated per second",
        builtin::FLOWS_NAME,
        workload.rules.len(),
        builtin::TRAFFIC.packets,
        builtin::TRAFFIC.flows,
        builtin::UPDATE_RATE * 100.0
    )
}

/// The replayed switch's megaflows and NIC entries written where `args` asks.
pub fn write_dumps(args: &ReplayArgs, switch: &Switch, report: &ReplayReport) -> Result<()> {
    let now_ns = (report.trace_seconds * 1e9).round() as u64;
    for (path, flows) in [(&args.dump_megaflows, switch.megaflow_dump()), (&args.dump_nic, switch.nic_dump())]
    {
        if let Some(path) = path {
            let mut out = crate::create(path)?;
            out.write_all(dump_text(&flows, now_ns).as_bytes())?;
            out.flush()?;
        }
    }
    Ok(())
}

/// Rules in `ovs-ofctl dump-flows` order: by table, then priority (highest first), then age.
pub fn rules_in_dump_order(p: &Pipeline) -> Vec<(u32, &Rule)> {
    let mut rules: Vec<(u32, &Rule)> = p.rules().collect();
    rules.sort_by_key(|(id, r)| (r.table, std::cmp::Reverse(r.priority), *id));
    rules
}

/// Per-rule counters in the shape of `ovs-ofctl dump-flows`.
pub fn rule_stats(p: &Pipeline) -> String {
    let mut out = String::new();
    for (id, r) in rules_in_dump_order(p) {
        let s = p.stats(id);
        let m = r.matcher().to_string();
        let sep = if m.is_empty() { "" } else { "," };
        out.push_str(&format!(
            " cookie={:#x}, table={}, n_packets={}, n_bytes={}, priority={}{sep}{m} actions={}\n",
            r.cookie,
            r.table,
            s.packets,
            s.bytes,
            r.priority,
            hyflow::openflow::action::format_actions(&r.actions)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--rule-stats` prints what `ovs-ofctl dump-flows` prints, and, like a dump, it loads
    /// back as the same rules.
    #[test]
    fn rule_stats_load_back() {
        let rules = hyflow::workload::builtin::rules();
        let text = rule_stats(&Pipeline::from_rules(rules.clone()));
        let again = hyflow::openflow::parse_flows(&text, "rule-stats").unwrap();
        let shown = |rs: &[Rule]| {
            let mut v: Vec<String> = rs.iter().map(|r| r.to_string()).collect();
            v.sort();
            v
        };
        assert_eq!(shown(&again), shown(&rules));
        assert_eq!(again.len(), 38);
    }
}
