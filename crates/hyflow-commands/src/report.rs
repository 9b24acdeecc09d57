//! The report of one run or several, as one self-contained HTML file (`hyflow report`,
//! `replay/sim --report FILE.html`, `_repr_html_` in Python): every chart is inline SVG and
//! the style is in the page, so it opens anywhere without a network.
//!
//! For each run: its setup (the options given), its key figures, where packets were handled
//! (the share of each layer, and of losses), what was forwarded and dropped with every port's
//! counters, its charts ([`plot::charts`]: rates by tier over time, each core's ring, the
//! NIC's entries and installs, latency CDFs) and the flows the NIC and the megaflow cache held
//! most packets for. Several runs also get a comparison: their figures side by side and their
//! latency CDFs on one chart.
//!
//! Figures carry `data-key` (their key in the run's `--json`, `/`-separated when nested) and
//! `data-value` (the value there, unformatted), charts `data-chart`: what tests and scripts
//! read, whatever the page shows.

use std::fmt::Write as _;
use std::path::Path;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::Value;

use crate::plot;
use crate::run_record::RunRecord;

/// A figure shown for a run: its key in the summary and its name on the page.
struct Figure {
    key: &'static str,
    name: &'static str,
    kind: Kind,
}

#[derive(Clone, Copy)]
enum Kind {
    Count,
    Share,
    Micros,
}

const fn fig(key: &'static str, name: &'static str, kind: Kind) -> Figure {
    Figure { key, name, kind }
}

const REPLAY_FIGURES: &[Figure] = &[
    fig("packets", "packets", Kind::Count),
    fig("nic_hit_rate", "NIC hits", Kind::Share),
    fig("microflow_hit_rate", "microflow hits", Kind::Share),
    fig("megaflow_hit_rate", "megaflow hits", Kind::Share),
    fig("upcall_rate", "upcalls", Kind::Share),
    fig("forwarded", "forwarded", Kind::Count),
    fig("dropped", "dropped", Kind::Count),
    fig("nic_entries", "NIC entries (peak)", Kind::Count),
    fig("nic_installs", "NIC installs", Kind::Count),
    fig("megaflow_entries", "megaflows (peak)", Kind::Count),
    fig("stale_wrong", "stale decisions with wrong outputs", Kind::Count),
];

const SIM_FIGURES: &[Figure] = &[
    fig("packets", "packets", Kind::Count),
    fig("hw_share", "in hardware", Kind::Share),
    fig("loss_rate", "lost", Kind::Share),
    fig("latency_us/p50", "latency p50", Kind::Micros),
    fig("latency_us/p99", "latency p99", Kind::Micros),
    fig("latency_us/p999", "latency p99.9", Kind::Micros),
    fig("cores", "cores", Kind::Count),
    fig("ring/max", "ring occupancy (max)", Kind::Count),
    fig("nic/installs", "NIC installs", Kind::Count),
    fig("nic/entries_peak", "NIC entries (peak)", Kind::Count),
    fig("forwarded", "forwarded", Kind::Count),
    fig("dropped", "dropped by the pipeline", Kind::Count),
];

fn figures(record: &RunRecord) -> &'static [Figure] {
    if record.command == "sim" {
        SIM_FIGURES
    } else {
        REPLAY_FIGURES
    }
}

/// The value at `key` (`/`-separated) of a summary.
fn at<'a>(summary: &'a Value, key: &str) -> Option<&'a Value> {
    key.split('/').try_fold(summary, |v, k| v.get(k))
}

fn count_of(summary: &Value, key: &str) -> u64 {
    at(summary, key).and_then(Value::as_u64).unwrap_or(0)
}

/// A figure as the page shows it.
fn shown(v: &Value, kind: Kind) -> String {
    match (kind, v.as_f64()) {
        (Kind::Share, Some(x)) => format!("{:.2}%", x * 100.0),
        (Kind::Micros, Some(x)) => format!("{x} µs"),
        (Kind::Count, Some(_)) => group_digits(&v.to_string()),
        _ => v.to_string(),
    }
}

/// `1234567` as `1,234,567`.
fn group_digits(digits: &str) -> String {
    let n = digits.len();
    let mut out = String::with_capacity(n + n / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (n - i).is_multiple_of(3) && c.is_ascii_digit() {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Where packets were handled, in order: (layer, packets).
fn shares(record: &RunRecord) -> Vec<(&'static str, u64)> {
    let s = &record.summary;
    if record.command == "sim" {
        vec![
            ("nic", count_of(s, "hw_packets")),
            ("microflow", count_of(s, "host/microflow_hits")),
            ("megaflow", count_of(s, "host/megaflow_hits")),
            ("slowpath", count_of(s, "host/upcalls")),
            ("lost", count_of(s, "lost")),
        ]
    } else {
        vec![
            ("nic", count_of(s, "nic_hits")),
            ("microflow", count_of(s, "microflow_hits")),
            ("megaflow", count_of(s, "megaflow_hits")),
            ("slowpath", count_of(s, "upcalls")),
        ]
    }
}

const STYLE: &str = r#"
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1000px; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
h3 { font-size: 1.05em; margin-top: 1.5em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .9em; }
td, th { border: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, td.code { font-family: ui-monospace, monospace; font-size: .85em; word-break: break-all; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(180px, 1fr)); gap: .5em; }
.figure { border: 1px solid #ddd; border-radius: 4px; padding: .4em .6em; }
.figure .name { color: #666; font-size: .8em; } .figure .value { font-size: 1.2em; font-variant-numeric: tabular-nums; }
.bar { display: flex; height: 1.6em; border: 1px solid #999; border-radius: 3px; overflow: hidden; }
.bar span { display: block; height: 100%; }
.legend span { display: inline-block; margin-right: 1.2em; font-size: .85em; }
.legend i { display: inline-block; width: .9em; height: .9em; margin-right: .3em; vertical-align: -.1em; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; } figcaption { color: #555; font-size: .85em; }
.note { color: #a33; font-size: .9em; }
"#;

const LAYER_COLORS: [(&str, &str); 5] = [
    ("nic", "#2b6cb0"),
    ("microflow", "#38a169"),
    ("megaflow", "#d69e2e"),
    ("slowpath", "#c53030"),
    ("lost", "#1a202c"),
];

fn color_of(layer: &str) -> &'static str {
    LAYER_COLORS.iter().find(|(l, _)| *l == layer).map_or("#999", |(_, c)| c)
}

/// The report of `records` as an HTML document.
pub fn html(records: &[RunRecord]) -> Result<String> {
    plot::register_font();
    let mut out = String::new();
    let title = match records {
        [one] => format!("hyflow report: {}", one.label),
        many => format!("hyflow report: {} runs", many.len()),
    };
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n<p>hyflow {}; {} run{}.</p>\n",
        escape(&title),
        escape(&title),
        env!("CARGO_PKG_VERSION"),
        records.len(),
        if records.len() == 1 { "" } else { "s" }
    );
    if records.len() > 1 {
        comparison(&mut out, records)?;
    }
    for (i, r) in records.iter().enumerate() {
        run_section(&mut out, i, r)?;
    }
    out.push_str("</body></html>\n");
    Ok(out)
}

fn comparison(out: &mut String, records: &[RunRecord]) -> Result<()> {
    out.push_str("<section id=\"comparison\"><h2>Comparison</h2>\n<table class=\"comparison\" data-chart=\"comparison\"><tr><th>figure</th>");
    for r in records {
        let _ = write!(out, "<th>{}</th>", escape(&r.label));
    }
    out.push_str("</tr>\n");
    // The figures of the first run's command, for every run that has them.
    for f in figures(&records[0]) {
        let _ = write!(out, "<tr><td>{}</td>", f.name);
        for (i, r) in records.iter().enumerate() {
            match at(&r.summary, f.key) {
                Some(v) => {
                    let _ = write!(
                        out,
                        "<td class=\"num\" data-run=\"{i}\" data-key=\"{}\" data-value=\"{}\">{}</td>",
                        f.key,
                        escape(&v.to_string()),
                        shown(v, f.kind)
                    );
                }
                None => out.push_str("<td class=\"num\">—</td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    for (i, r) in records.iter().enumerate() {
        let _ = write!(out, "<h3>{}</h3>", escape(&r.label));
        share_bar(out, i, r);
    }
    if let Some(c) = plot::compared_cdfs(records) {
        figure(out, None, &c)?;
    }
    out.push_str("</section>\n");
    Ok(())
}

fn share_bar(out: &mut String, run: usize, r: &RunRecord) {
    let shares = shares(r);
    let total: u64 = shares.iter().map(|s| s.1).sum();
    let _ = write!(out, "<div class=\"bar\" data-chart=\"shares\" data-run=\"{run}\">");
    for (layer, n) in &shares {
        let share = if total == 0 { 0.0 } else { *n as f64 / total as f64 };
        let _ = write!(
            out,
            "<span data-layer=\"{layer}\" data-packets=\"{n}\" style=\"width:{:.4}%;background:{}\" title=\"{layer}: {n} packets ({:.2}%)\"></span>",
            share * 100.0,
            color_of(layer),
            share * 100.0
        );
    }
    out.push_str("</div><div class=\"legend\">");
    for (layer, n) in &shares {
        let share = if total == 0 { 0.0 } else { *n as f64 / total as f64 };
        let _ = write!(
            out,
            "<span><i style=\"background:{}\"></i>{layer} {:.2}% ({})</span>",
            color_of(layer),
            share * 100.0,
            group_digits(&n.to_string())
        );
    }
    out.push_str("</div>\n");
}

fn figure(out: &mut String, run: Option<usize>, c: &plot::Chart) -> Result<()> {
    let svg = plot::svg(c)?;
    let run = run.map_or(String::new(), |i| format!(" data-run=\"{i}\""));
    // The SVG document's own XML declaration does not belong inside HTML.
    let svg = svg.trim_start_matches(|ch| ch != '<').trim_start();
    let svg = if svg.starts_with("<?xml") { svg.split_once("?>").map_or(svg, |(_, rest)| rest) } else { svg };
    let _ = writeln!(
        out,
        "<figure data-chart=\"{}\"{run}>{svg}<figcaption>{}</figcaption></figure>",
        c.name,
        escape(&c.caption)
    );
    Ok(())
}

fn run_section(out: &mut String, i: usize, r: &RunRecord) -> Result<()> {
    let _ = writeln!(
        out,
        "<section class=\"run\" data-run=\"{i}\" data-command=\"{}\"><h2>{}</h2>",
        r.command,
        escape(&r.label)
    );
    out.push_str("<h3>Setup</h3>");
    if r.setup.is_empty() {
        out.push_str("<p>The defaults (the built-in workload when no input is named).</p>");
    } else {
        let _ = write!(out, "<p><code>hyflow {} {}</code></p>", r.command, escape(&r.setup.join(" ")));
    }
    if let Some(warnings) = r.summary.get("warnings").and_then(Value::as_array) {
        for w in warnings.iter().filter_map(Value::as_str) {
            let _ = write!(out, "<p class=\"note\">warning: {}</p>", escape(&crate::warning_text(w)));
        }
    }
    out.push_str("<h3>Figures</h3><div class=\"figures\">");
    for f in figures(r) {
        if let Some(v) = at(&r.summary, f.key) {
            let _ = write!(
                out,
                "<div class=\"figure\"><div class=\"name\">{}</div><div class=\"value\" data-run=\"{i}\" data-key=\"{}\" data-value=\"{}\">{}</div></div>",
                f.name,
                f.key,
                escape(&v.to_string()),
                shown(v, f.kind)
            );
        }
    }
    out.push_str("</div>\n<h3>Where packets were handled</h3>");
    share_bar(out, i, r);
    ports_table(out, i, r);
    let charts = plot::charts(r);
    if charts.is_empty() {
        out.push_str("<p>No time series or latency distribution: this is a <code>replay</code> (no time model) or a bare <code>--json</code> summary (a run record from <code>--report FILE.json</code> keeps them).</p>");
    }
    for c in &charts {
        figure(out, Some(i), c)?;
    }
    top_flows(out, i, r);
    out.push_str("</section>\n");
    Ok(())
}

fn ports_table(out: &mut String, i: usize, r: &RunRecord) {
    let Some(ports) = r.summary.get("ports").and_then(Value::as_array) else { return };
    let _ = write!(
        out,
        "<h3>Ports</h3><table class=\"ports\" data-chart=\"ports\" data-run=\"{i}\"><tr><th>port</th><th class=\"num\">rx packets</th><th class=\"num\">rx bytes</th><th class=\"num\">tx packets</th><th class=\"num\">tx bytes</th></tr>"
    );
    for p in ports {
        out.push_str("<tr>");
        let _ = write!(out, "<td>{}</td>", p.get("port").map_or(String::new(), |v| v.to_string()));
        for key in ["rx_packets", "rx_bytes", "tx_packets", "tx_bytes"] {
            let v = p.get(key).and_then(Value::as_u64).unwrap_or(0);
            let _ = write!(
                out,
                "<td class=\"num\" data-field=\"{key}\" data-value=\"{v}\">{}</td>",
                group_digits(&v.to_string())
            );
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>\n");
}

fn top_flows(out: &mut String, i: usize, r: &RunRecord) {
    if r.top_flows.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<h3>Busiest cached flows at the end</h3><table class=\"top-flows\" data-chart=\"top-flows\" data-run=\"{i}\"><tr><th>layer</th><th>match</th><th class=\"num\">packets</th><th class=\"num\">bytes</th><th>actions</th></tr>"
    );
    for f in &r.top_flows {
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"code\">{}</td><td class=\"num\" data-value=\"{}\">{}</td><td class=\"num\">{}</td><td class=\"code\">{}</td></tr>",
            f.layer,
            escape(&f.matcher),
            f.packets,
            group_digits(&f.packets.to_string()),
            group_digits(&f.bytes.to_string()),
            escape(&f.actions)
        );
    }
    out.push_str("</table>\n");
}

#[derive(Args)]
pub struct ReportArgs {
    /// Run records (`replay/sim --report FILE.json`) or `--json` summaries of replay or sim,
    /// in the order to show them.
    #[arg(value_name = "RUN.json", required = true)]
    pub runs: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// `hyflow report`: writes the page and says what it holds.
pub fn run(args: &ReportArgs) -> Result<String> {
    let records = args.runs.iter().map(|p| RunRecord::read(p)).collect::<Result<Vec<_>>>()?;
    let page = html(&records)?;
    std::fs::write(&args.out, page).with_context(|| format!("{}: cannot write", args.out.display()))?;
    Ok(format!(
        "wrote the report of {} run{} to {}",
        records.len(),
        if records.len() == 1 { "" } else { "s" },
        args.out.display()
    ))
}

/// Writes `record` to `path`: the record as JSON for a `.json` path (for `hyflow report` to
/// draw later, beside others), the HTML report otherwise.
pub fn write_report(path: &Path, record: &RunRecord) -> Result<()> {
    let text = if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
        serde_json::to_string(record)? + "\n"
    } else {
        html(std::slice::from_ref(record))?
    };
    std::fs::write(path, text).with_context(|| format!("{}: cannot write", path.display()))
}
