//! `hyflow._hyflow`: the engine's runs for the Python package, which wraps them in
//! `python/hyflow`. Every function takes the command's options as the CLI spells them
//! (`["--microflow-entries=1024"]`, built from keyword arguments by the Python side) and parses
//! them with the CLI's own definitions (`hyflow_commands`), so names, defaults, ranges and error
//! messages are the CLI's. Runs release the GIL. Per-packet and per-row results come back as
//! NumPy arrays that own the engine's vectors (no Python object per row); strings as one UTF-8
//! buffer plus offsets, which the Python side wraps as Arrow arrays without a copy.

use std::path::{Path, PathBuf};

use numpy::{IntoPyArray, PyArray1};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use hyflow::experiment::replay::PacketDecision;
use hyflow::experiment::sim::{search, simulate};
use hyflow::input::PacketSource;
use hyflow::openflow::action::format_actions;
use hyflow::openflow::report::{passes_text, TraceRecord};
use hyflow::openflow::update::{read_updates_file, When};
use hyflow::packet::format::format_flow;
use hyflow::switch::Layer;
use hyflow::timing::switch_datapath::SimDecision;
use hyflow_commands::report::write_report;
use hyflow_commands::run_record::RunRecord;
use hyflow_commands::{gen, replay, sim, switch, topk, trace};

mod probes;
mod watch;
use watch::watched;

create_exception!(
    hyflow._hyflow,
    HyflowError,
    PyException,
    "A run could not start or finish: bad options, unreadable or malformed input. The message \
     is the one the `hyflow` command line prints."
);

/// An error in Python's words: the CLI's message, with the parameters it names spelled as
/// keywords (`nic_entries`, not `--nic-entries`).
fn error(e: anyhow::Error) -> PyErr {
    HyflowError::new_err(python_spelling(&hyflow_commands::error_message_spelled(&e, keyword)))
}

/// An option's name as the keyword argument that sets it.
fn keyword(option: &str) -> String {
    option.trim_start_matches("--").replace('-', "_")
}

/// `text` with every `--option` and `'--option <VALUE>'` it names spelled as a keyword.
fn python_spelling(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("--") {
        let (before, from) = rest.split_at(at);
        let name_len =
            from[2..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).map_or(from.len() - 2, |n| n);
        if name_len == 0 {
            out.push_str(before);
            out.push_str("--");
            rest = &from[2..];
            continue;
        }
        let name = &from[2..2 + name_len];
        let mut after = &from[2 + name_len..];
        // Clap's `'--opt <VALUE>'`: the placeholder goes with the dashes.
        if let Some(tail) = after.strip_prefix(" <").and_then(|t| t.split_once('>').map(|(_, t)| t)) {
            after = tail;
        }
        out.push_str(before);
        out.push_str(&keyword(name));
        rest = after;
    }
    out.push_str(rest);
    out
}

/// `text` as a Python `UserWarning` pointing at the caller's line (`warnings` decides whether
/// it shows): the CLI's text, without its `hyflow: warning: ` prefix.
fn user_warning(py: Python<'_>, text: &str) -> PyResult<()> {
    let message = std::ffi::CString::new(text).unwrap_or_default();
    PyErr::warn(py, &py.get_type::<pyo3::exceptions::PyUserWarning>(), &message, 2)
}

/// The engine's warnings about a run, as Python warnings.
fn warn_all(py: Python<'_>, warnings: &[String]) -> PyResult<()> {
    warnings.iter().try_for_each(|w| user_warning(py, &hyflow_commands::warning_text(w)))
}

/// A capture found cut mid-record (the run read its complete packets), as a Python warning.
fn warn_cut(py: Python<'_>, cut: Option<&hyflow::capture::CaptureCut>) -> PyResult<()> {
    cut.map_or(Ok(()), |cut| user_warning(py, &hyflow_commands::capture_cut_warning(cut)))
}

/// An option parsing error as the CLI prints it, without its `error: ` prefix, usage block
/// and help tip, on one line.
fn parse_error(e: clap::Error) -> PyErr {
    HyflowError::new_err(parse_message(&e))
}

/// Clap's message in Python's words: `invalid value '-1' for '--nic-entries <N>': invalid
/// digit found in string` reads `nic_entries=-1: not a whole number ≥ 0`.
fn parse_message(e: &clap::Error) -> String {
    let text = e.to_string();
    let body = text.split("\n\nUsage:").next().unwrap_or_default();
    let body = body.split("\n\nFor more information").next().unwrap_or_default();
    let line = body.trim_start_matches("error: ").split_whitespace().collect::<Vec<_>>().join(" ");
    let invalid_value = line.strip_prefix("invalid value '").and_then(|rest| {
        let (value, rest) = rest.split_once("' for '--")?;
        let (option, reason) = rest.split_once('\'')?;
        let name = option.split(' ').next()?;
        let reason = reason.trim_start_matches(':').trim();
        let reason = match reason {
            "invalid digit found in string" | "cannot parse integer from empty string" => {
                "not a whole number ≥ 0"
            }
            "number too large to fit in target type" => "too large",
            "invalid float literal" => "not a number",
            other => other,
        };
        // Clap's `0 is not in 1..18446744073709551615`: a lower bound only.
        let at_least = reason
            .split_once(" is not in ")
            .and_then(|(_, range)| range.split_once(".."))
            .filter(|(_, high)| high.parse::<u128>().is_ok_and(|h| h >= u64::MAX as u128))
            .map(|(low, _)| format!("must be ≥ {low}"));
        let reason = at_least.as_deref().unwrap_or(reason);
        Some(format!("{}={value}: {reason}", keyword(name)))
    });
    python_spelling(&invalid_value.unwrap_or(line))
}

fn parse<A: clap::Args + clap::FromArgMatches>(name: &'static str, argv: Vec<String>) -> PyResult<A> {
    hyflow_commands::parse_args::<A>(name, &argv).map_err(parse_error)
}

/// Layer codes of decision columns: `Layer as u8`, and this for a packet lost at a full ring.
const LOST: u8 = 4;

/// Per-packet decisions as columns: index, decision time, layer code, output ports (a list per
/// packet, flattened with offsets).
#[derive(Default)]
struct DecisionColumns {
    i: Vec<u64>,
    t_ns: Vec<u64>,
    layer: Vec<u8>,
    port_offsets: Vec<i64>,
    ports: Vec<u32>,
}

impl DecisionColumns {
    fn new() -> DecisionColumns {
        DecisionColumns { port_offsets: vec![0], ..DecisionColumns::default() }
    }

    fn push(&mut self, i: u64, t_ns: Option<u64>, layer: u8, ports: impl Iterator<Item = u32>) {
        self.i.push(i);
        if let Some(t) = t_ns {
            self.t_ns.push(t);
        }
        self.layer.push(layer);
        self.ports.extend(ports);
        self.port_offsets.push(self.ports.len() as i64);
    }

    fn into_dict<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("i", self.i.into_pyarray(py))?;
        if !self.t_ns.is_empty() {
            d.set_item("t_ns", self.t_ns.into_pyarray(py))?;
        }
        d.set_item("layer", self.layer.into_pyarray(py))?;
        d.set_item("port_offsets", self.port_offsets.into_pyarray(py))?;
        d.set_item("ports", self.ports.into_pyarray(py))?;
        d.set_item("layers", layer_names())?;
        Ok(d)
    }
}

/// Names of the layer codes, in code order.
fn layer_names() -> Vec<&'static str> {
    let mut names: Vec<&str> =
        [Layer::Nic, Layer::Microflow, Layer::Megaflow, Layer::SlowPath].map(Layer::name).to_vec();
    names.push("lost");
    names
}

/// Strings as one UTF-8 buffer and `len + 1` offsets (Arrow's large string layout).
struct StrColumn {
    data: Vec<u8>,
    offsets: Vec<i64>,
}

impl StrColumn {
    fn new() -> StrColumn {
        StrColumn { data: Vec::new(), offsets: vec![0] }
    }

    fn push(&mut self, s: &str) {
        self.data.extend_from_slice(s.as_bytes());
        self.offsets.push(self.data.len() as i64);
    }

    fn into_tuple<'py>(self, py: Python<'py>) -> (Bound<'py, PyArray1<u8>>, Bound<'py, PyArray1<i64>>) {
        (self.data.into_pyarray(py), self.offsets.into_pyarray(py))
    }
}

/// The options of command `command` as JSON: long name, flag or not, value name, default,
/// choices, help. The Python side checks keywords against them and documents them.
#[pyfunction]
fn options(command: &str) -> PyResult<String> {
    use hyflow_commands::options as opts;
    let list = match command {
        "replay" => opts::<replay::ReplayArgs>("replay"),
        "sim" => opts::<sim::SimArgs>("sim"),
        "topk" => opts::<topk::TopkArgs>("topk"),
        "eval_topk" => opts::<topk::EvalTopkArgs>("eval topk"),
        "trace" => opts::<trace::TraceArgs>("trace"),
        "gen_traffic" => opts::<gen::GenTrafficArgs>("gen traffic"),
        "gen_updates" => opts::<gen::GenUpdatesArgs>("gen updates"),
        "gen_dynamic" => opts::<gen::GenDynamicArgs>("gen dynamic"),
        "gen_pipeline" => opts::<gen::GenPipelineArgs>("gen pipeline"),
        "gen_gateway" => opts::<gen::GenGatewayArgs>("gen gateway"),
        "gen_conversations" => opts::<gen::GenConversationsArgs>("gen conversations"),
        other => return Err(HyflowError::new_err(format!("no command '{other}'"))),
    };
    serde_json::to_string(&list).map_err(|e| error(e.into()))
}

/// `hyflow replay`: returns the report (JSON, the CLI's `--json`), its text, the per-rule
/// counters and, when `decisions`, every packet's decision as columns. Ctrl-C stops it;
/// `progress`, if given, is called with `(packets, read, total)` every half second.
#[pyfunction]
#[pyo3(name = "replay", signature = (argv, decisions, progress=None))]
fn run_replay<'py>(
    py: Python<'py>,
    argv: Vec<String>,
    decisions: bool,
    progress: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let setup = argv.clone();
    let args: replay::ReplayArgs = parse("replay", argv)?;
    let (report, text, rules, columns, cut) = watched(py, progress.as_ref(), |watch| -> anyhow::Result<_> {
        let config = args.config()?;
        let workload = switch::workload(&args.switch)?;
        let mut columns = DecisionColumns::new();
        let mut record = |d: &PacketDecision| {
            if decisions {
                columns.push(d.index, None, d.layer as u8, d.outputs.iter().map(|o| o.port));
            }
            watch.progress_io(d.index + 1, d.progress)
        };
        let outcome = hyflow::experiment::replay::run(&workload, &config, &mut record)?;
        replay::write_dumps(&args, &outcome.switch, &outcome.report)?;
        let run = RunRecord::of_replay(setup, &outcome)?;
        if let Some(path) = &args.report {
            write_report(path, &run)?;
        }
        let mut text = String::new();
        if args.builtin() {
            text = format!("{}\n\n", replay::builtin_banner(&workload));
        }
        text.push_str(&outcome.report.text());
        let rules = rule_columns(outcome.switch.pipeline());
        let cut = outcome.report.capture_cut.clone();
        let report = serde_json::to_string(&outcome.report)?;
        Ok(((report, serde_json::to_string(&run)?), text, rules, columns, cut))
    })?
    .map_err(error)?;
    warn_cut(py, cut.as_ref())?;
    let (report, run) = report;
    let d = PyDict::new(py);
    d.set_item("report", report)?;
    d.set_item("record", run)?;
    d.set_item("text", text)?;
    d.set_item("rules", rules.into_dict(py)?)?;
    if decisions {
        d.set_item("decisions", columns.into_dict(py)?)?;
    }
    Ok(d)
}

/// Rules and their counters as columns, in `ovs-ofctl dump-flows` order.
struct RuleColumns {
    table: Vec<u8>,
    priority: Vec<u16>,
    cookie: Vec<u64>,
    matches: StrColumn,
    actions: StrColumn,
    n_packets: Vec<u64>,
    n_bytes: Vec<u64>,
}

fn rule_columns(p: &hyflow::openflow::Pipeline) -> RuleColumns {
    let mut c = RuleColumns {
        table: Vec::new(),
        priority: Vec::new(),
        cookie: Vec::new(),
        matches: StrColumn::new(),
        actions: StrColumn::new(),
        n_packets: Vec::new(),
        n_bytes: Vec::new(),
    };
    for (id, r) in replay::rules_in_dump_order(p) {
        let s = p.stats(id);
        c.table.push(r.table);
        c.priority.push(r.priority);
        c.cookie.push(r.cookie);
        c.matches.push(&r.matcher().to_string());
        c.actions.push(&format_actions(&r.actions));
        c.n_packets.push(s.packets);
        c.n_bytes.push(s.bytes);
    }
    c
}

impl RuleColumns {
    fn into_dict<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("table", self.table.into_pyarray(py))?;
        d.set_item("priority", self.priority.into_pyarray(py))?;
        d.set_item("cookie", self.cookie.into_pyarray(py))?;
        d.set_item("match", self.matches.into_tuple(py))?;
        d.set_item("actions", self.actions.into_tuple(py))?;
        d.set_item("n_packets", self.n_packets.into_pyarray(py))?;
        d.set_item("n_bytes", self.n_bytes.into_pyarray(py))?;
        Ok(d)
    }
}

/// `hyflow sim`: one run or a capacity search. Returns the summary (JSON, the CLI's
/// `--json`), its text, the time series (complete intervals), the latency histograms as
/// (value, count) columns per path and, for one run with `decisions`, every packet's fate.
#[pyfunction]
#[pyo3(name = "sim", signature = (argv, decisions, plot=None, progress=None, probes=None))]
fn run_sim<'py>(
    py: Python<'py>,
    argv: Vec<String>,
    decisions: bool,
    plot: Option<PathBuf>,
    progress: Option<Bound<'py, PyAny>>,
    probes: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let setup = argv.clone();
    let args: sim::SimArgs = parse("sim", argv)?;
    let what = args.search();
    if decisions && what.is_some() {
        return Err(HyflowError::new_err("decisions are recorded for one run, not with find"));
    }
    // `backend="ray"`: the Python side passes the runner of its Ray tasks.
    let remote = match (args.backend, probes) {
        (sim::BackendArg::Ray, Some(run)) => Some(probes::PyProbes::new(&run)?),
        (sim::BackendArg::Ray, None) => {
            return Err(HyflowError::new_err("backend='ray' needs the Ray probe runner (call hyflow.sim)"))
        }
        (sim::BackendArg::Local, _) => None,
    };
    let (summary, text, metrics, columns, cut) =
        watched(py, progress.as_ref(), |watch| -> anyhow::Result<_> {
            let exp = args.experiment(true)?;
            let workload = switch::workload(&args.switch)?;
            let mut columns = DecisionColumns::new();
            let outcome = match what {
                None => {
                    let mut record = |d: SimDecision| -> std::io::Result<()> {
                        let layer = d.layer.map_or(LOST, |l| l as u8);
                        columns.push(d.index, Some(d.t_ns), layer, d.outputs.iter().map(|o| o.port));
                        Ok(())
                    };
                    let on_decision: Option<&mut dyn FnMut(SimDecision) -> std::io::Result<()>> =
                        if decisions { Some(&mut record) } else { None };
                    simulate(&workload, &exp, &mut |n, at| watch.progress(n, at), on_decision)?
                }
                Some(w) => search(
                    &workload,
                    &exp,
                    w,
                    &|| watch.keep_going(),
                    remote.as_ref().map(|r| r as &dyn hyflow::experiment::sim::ProbeRunner),
                )?,
            };
            let run = RunRecord::of_sim(setup, &outcome, &exp)?;
            if let Some(dir) = &plot {
                hyflow_commands::plot::write_plots(dir, &run)?;
            }
            if let Some(path) = &args.report {
                write_report(path, &run)?;
            }
            Ok((
                (serde_json::to_string(&outcome.summary)?, serde_json::to_string(&run)?),
                sim::summary_text(&outcome.summary),
                outcome.metrics,
                columns,
                (outcome.summary.capture_cut.clone(), outcome.summary.warnings.clone()),
            ))
        })?
        .map_err(error)?;
    let (cut, warnings) = cut;
    warn_cut(py, cut.as_ref())?;
    warn_all(py, &warnings)?;
    let (summary, run) = summary;
    let d = PyDict::new(py);
    d.set_item("summary", summary)?;
    d.set_item("record", run)?;
    d.set_item("text", text)?;
    d.set_item("series", series_dict(py, &metrics)?)?;
    let latency = PyDict::new(py);
    for (name, h) in
        [("all", &metrics.latency), ("hardware", &metrics.latency_hw), ("software", &metrics.latency_sw)]
    {
        let (values, counts): (Vec<u64>, Vec<u64>) =
            h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_since_last_iteration())).unzip();
        latency.set_item(name, (values.into_pyarray(py), counts.into_pyarray(py)))?;
    }
    d.set_item("latency_ns", latency)?;
    if decisions {
        d.set_item("decisions", columns.into_dict(py)?)?;
    }
    Ok(d)
}

/// The time series as columns: interval start (s) and per-interval counts.
fn series_dict<'py>(py: Python<'py>, m: &hyflow::timing::Metrics) -> PyResult<Bound<'py, PyDict>> {
    let interval_ns = m.interval_ns;
    let iv = m.complete_intervals();
    let d = PyDict::new(py);
    let col =
        |f: fn(&hyflow::timing::Interval) -> u64| iv.iter().map(f).collect::<Vec<u64>>().into_pyarray(py);
    let t: Vec<f64> = (0..iv.len()).map(|i| (i as u64 * interval_ns) as f64 / 1e9).collect();
    d.set_item("t_s", t.into_pyarray(py))?;
    d.set_item("interval_s", interval_ns as f64 / 1e9)?;
    d.set_item("hw", col(|i| i.hw))?;
    d.set_item("sw", col(|i| i.sw))?;
    d.set_item("served", col(|i| i.served))?;
    d.set_item("lost", col(|i| i.lost))?;
    d.set_item("ring_max", col(|i| i.ring_max))?;
    Ok(d)
}

/// `hyflow topk`: every boundary's top flows as long columns (one row per boundary and rank;
/// key fields as strings, as the CLI's JSON shows them), the summary and its notes.
#[pyfunction]
#[pyo3(name = "topk", signature = (argv, progress=None))]
fn run_topk<'py>(
    py: Python<'py>,
    argv: Vec<String>,
    progress: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let args: topk::TopkArgs = parse("topk", argv)?;
    struct Rows {
        boundary: Vec<u32>,
        t: Vec<f64>,
        packets: Vec<u64>,
        rank: Vec<u32>,
        count: Vec<u64>,
        fields: Vec<(&'static str, StrColumn)>,
        boundaries: Vec<String>,
    }
    let (summary, notes, rows, cut) = watched(py, progress.as_ref(), |watch| -> anyhow::Result<_> {
        let config = args.config()?;
        let names: Vec<&'static str> = config.key.fields().iter().map(|f| f.def().name).collect();
        let mut rows = Rows {
            boundary: Vec::new(),
            t: Vec::new(),
            packets: Vec::new(),
            rank: Vec::new(),
            count: Vec::new(),
            fields: names.iter().map(|&n| (n, StrColumn::new())).collect(),
            boundaries: Vec::new(),
        };
        let summary = hyflow::experiment::topk::topk(
            &topk::capture(&args.trace, args.strict),
            &config,
            &mut |n, at| watch.progress(n, at),
            &mut |r| {
                let b = rows.boundaries.len() as u32;
                // A boundary's own line, without its flows: time, packets, shortfall.
                let mut line = serde_json::to_value(r).map_err(std::io::Error::other)?;
                if let Some(o) = line.as_object_mut() {
                    o.remove("flows");
                }
                rows.boundaries.push(line.to_string());
                for (rank, f) in r.flows.iter().enumerate() {
                    rows.boundary.push(b);
                    rows.t.push(r.t);
                    rows.packets.push(r.packets);
                    rows.rank.push(rank as u32 + 1);
                    rows.count.push(f.count);
                    for ((_, col), (_, v)) in rows.fields.iter_mut().zip(&f.key.0) {
                        col.push(v);
                    }
                }
                Ok(())
            },
        )?;
        let notes = topk::summary_notes(&summary, &config);
        Ok((serde_json::to_string(&summary)?, notes, rows, summary.capture_cut))
    })?
    .map_err(error)?;
    warn_cut(py, cut.as_ref())?;
    let d = PyDict::new(py);
    d.set_item("summary", summary)?;
    d.set_item("notes", notes)?;
    d.set_item("boundaries", rows.boundaries)?;
    let cols = PyDict::new(py);
    cols.set_item("boundary", rows.boundary.into_pyarray(py))?;
    cols.set_item("t", rows.t.into_pyarray(py))?;
    cols.set_item("packets", rows.packets.into_pyarray(py))?;
    cols.set_item("rank", rows.rank.into_pyarray(py))?;
    cols.set_item("count", rows.count.into_pyarray(py))?;
    let fields = PyDict::new(py);
    for (name, col) in rows.fields {
        fields.set_item(name, col.into_tuple(py))?;
    }
    d.set_item("columns", cols)?;
    d.set_item("fields", fields)?;
    Ok(d)
}

/// `hyflow eval topk`: one JSON object per configuration, as `--json` prints them.
#[pyfunction]
#[pyo3(signature = (argv, progress=None))]
fn eval_topk(py: Python<'_>, argv: Vec<String>, progress: Option<Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    let args: topk::EvalTopkArgs = parse("eval topk", argv)?;
    let (rows, cut) = watched(py, progress.as_ref(), |watch| -> anyhow::Result<_> {
        let config = args.config()?;
        let outcome = hyflow::experiment::topk::eval(
            &topk::capture(&args.trace, args.strict),
            &config,
            &mut |n, at| watch.progress(n, at),
        )?;
        let rows: anyhow::Result<Vec<String>> =
            outcome.rows.iter().map(|r| Ok(serde_json::to_string(r)?)).collect();
        Ok((rows?, outcome.capture_cut))
    })?
    .map_err(error)?;
    warn_cut(py, cut.as_ref())?;
    Ok(rows)
}

/// `hyflow trace`: per packet, the JSON record (`--json`) and the text.
#[pyfunction]
#[pyo3(name = "trace")]
fn run_trace(py: Python<'_>, argv: Vec<String>) -> PyResult<Vec<(String, String)>> {
    let args: trace::TraceArgs = parse("trace", argv)?;
    py.detach(|| -> anyhow::Result<_> {
        let mut out = Vec::new();
        args.for_each_trace(|passes, pipeline, names, limit_reached| {
            let record = TraceRecord::of_passes(passes, pipeline, limit_reached);
            out.push((serde_json::to_string(&record)?, passes_text(passes, pipeline, limit_reached, names)));
            Ok(())
        })?;
        Ok(out)
    })
    .map_err(error)
}

/// `hyflow gen KIND`: writes the files and returns the line the CLI prints.
#[pyfunction]
fn generate(py: Python<'_>, kind: &str, argv: Vec<String>) -> PyResult<String> {
    type Run = Box<dyn FnOnce() -> anyhow::Result<String> + Send>;
    let run: Run = match kind {
        "traffic" => {
            let a: gen::GenTrafficArgs = parse("gen traffic", argv)?;
            Box::new(move || gen::traffic(a))
        }
        "updates" => {
            let a: gen::GenUpdatesArgs = parse("gen updates", argv)?;
            Box::new(move || gen::updates(a))
        }
        "dynamic" => {
            let a: gen::GenDynamicArgs = parse("gen dynamic", argv)?;
            Box::new(move || gen::dynamic(a))
        }
        "pipeline" => {
            let a: gen::GenPipelineArgs = parse("gen pipeline", argv)?;
            Box::new(move || gen::pipeline(a))
        }
        "gateway" => {
            let a: gen::GenGatewayArgs = parse("gen gateway", argv)?;
            Box::new(move || gen::gateway(a))
        }
        "conversations" => {
            let a: gen::GenConversationsArgs = parse("gen conversations", argv)?;
            Box::new(move || gen::conversations(a))
        }
        other => return Err(HyflowError::new_err(format!("no generator '{other}'"))),
    };
    py.detach(run).map_err(error)
}

/// A flow file's rules as columns (file order); tables and ports may be named by name files
/// (`--ports`, `--tables`) and by the file's own `table=N(name)`.
#[pyfunction]
#[pyo3(signature = (path, ports=None, tables=None, groups=None))]
fn load_flows<'py>(
    py: Python<'py>,
    path: PathBuf,
    ports: Option<PathBuf>,
    tables: Option<PathBuf>,
    groups: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let names = hyflow_commands::names::NameArgs { ports, tables, groups };
    let rules = py.detach(|| names.read_flows(&path)).map_err(error)?.rules;
    let d = PyDict::new(py);
    let mut matches = StrColumn::new();
    let mut actions = StrColumn::new();
    for r in &rules {
        matches.push(&r.matcher().to_string());
        actions.push(&format_actions(&r.actions));
    }
    d.set_item("table", rules.iter().map(|r| r.table).collect::<Vec<_>>().into_pyarray(py))?;
    d.set_item("priority", rules.iter().map(|r| r.priority).collect::<Vec<_>>().into_pyarray(py))?;
    d.set_item("cookie", rules.iter().map(|r| r.cookie).collect::<Vec<_>>().into_pyarray(py))?;
    d.set_item("idle_timeout", rules.iter().map(|r| r.idle_timeout).collect::<Vec<_>>().into_pyarray(py))?;
    d.set_item("hard_timeout", rules.iter().map(|r| r.hard_timeout).collect::<Vec<_>>().into_pyarray(py))?;
    d.set_item("match", matches.into_tuple(py))?;
    d.set_item("actions", actions.into_tuple(py))?;
    Ok(d)
}

/// An updates file as columns (file order): when (seconds or packet index), command, rule.
#[pyfunction]
fn load_updates<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let updates = py.detach(|| read_updates_file(&path)).map_err(|e| error(e.into()))?;
    let mut at_ns = Vec::new();
    let mut before_packet = Vec::new();
    let mut command = StrColumn::new();
    let mut rule = StrColumn::new();
    for u in &updates {
        // A column holds -1 where the update is timed the other way.
        let (t, i) = match u.when {
            When::At(t) => (t as i64, -1),
            When::BeforePacket(i) => (-1, i as i64),
        };
        at_ns.push(t);
        before_packet.push(i);
        command.push(u.command.name());
        rule.push(&u.spec.rule.to_string());
    }
    let d = PyDict::new(py);
    d.set_item("at_ns", at_ns.into_pyarray(py))?;
    d.set_item("before_packet", before_packet.into_pyarray(py))?;
    d.set_item("command", command.into_tuple(py))?;
    d.set_item("rule", rule.into_tuple(py))?;
    Ok(d)
}

/// A capture's packets as columns: time, wire length, the flow in ovs-ofctl notation (as
/// `hyflow parse-pcap --wire-lengths` prints it), and the malformed reason ("" if none).
#[pyfunction]
#[pyo3(signature = (path, in_port=None))]
fn load_trace<'py>(py: Python<'py>, path: PathBuf, in_port: Option<u32>) -> PyResult<Bound<'py, PyDict>> {
    let (ts, bytes, flow, malformed, fields, cut) = py
        .detach(|| -> anyhow::Result<_> {
            let mut source = PacketSource::capture(Path::new(&path), in_port, false)?;
            let (mut ts, mut bytes, mut flow, mut malformed) =
                (Vec::new(), Vec::new(), StrColumn::new(), StrColumn::new());
            let mut fields = FieldColumns::default();
            while let Some(p) = source.next_packet()? {
                ts.push(p.ts_ns);
                bytes.push(p.bytes);
                let text = format_flow(&p.key);
                fields.push(&text, p.key.in_port());
                flow.push(&text);
                malformed.push(p.malformed.unwrap_or(""));
            }
            Ok((ts, bytes, flow, malformed, fields, source.cut().cloned()))
        })
        .map_err(error)?;
    warn_cut(py, cut.as_ref())?;
    let d = PyDict::new(py);
    d.set_item("ts_ns", ts.into_pyarray(py))?;
    d.set_item("bytes", bytes.into_pyarray(py))?;
    d.set_item("flow", flow.into_tuple(py))?;
    d.set_item("malformed", malformed.into_tuple(py))?;
    let columns = PyDict::new(py);
    for (name, col) in fields.columns {
        columns.set_item(name, col.into_tuple(py))?;
    }
    d.set_item("fields", columns)?;
    Ok(d)
}

/// Every field of flows written as `ovs-ofctl` does (`tcp,in_port=1,dl_src=...,tp_dst=80`), a
/// column each, in the order fields first appear (the leading shorthand as `protocol`); ""
/// where a packet lacks the field.
#[derive(Default)]
struct FieldColumns {
    columns: Vec<(String, StrColumn)>,
    /// Column of each field name.
    index: std::collections::HashMap<String, usize>,
    rows: usize,
    /// The packet's port as text, its buffer reused from packet to packet.
    port_text: String,
}

impl FieldColumns {
    /// One packet's flow, read as arriving on `in_port` (the flow text says `in_port=ANY`, as
    /// `ovs-ofctl parse-pcap` writes a capture's packets).
    fn push(&mut self, flow: &str, in_port: u32) {
        use std::fmt::Write as _;
        let mut port = std::mem::take(&mut self.port_text);
        port.clear();
        let _ = write!(port, "{in_port}");
        for part in flow.split(',') {
            // A bare word is the protocol shorthand `ovs-ofctl` leads with (`tcp`, `arp`).
            let (name, value) = part.split_once('=').unwrap_or(("protocol", part));
            let value = if name == "in_port" { port.as_str() } else { value };
            let i = match self.index.get(name) {
                Some(&i) => i,
                None => {
                    let mut col = StrColumn::new();
                    (0..self.rows).for_each(|_| col.push(""));
                    self.columns.push((name.to_string(), col));
                    self.index.insert(name.to_string(), self.columns.len() - 1);
                    self.columns.len() - 1
                }
            };
            self.columns[i].1.push(value);
        }
        self.port_text = port;
        self.rows += 1;
        // Fields this packet lacks.
        for (_, col) in &mut self.columns {
            if col.offsets.len() - 1 < self.rows {
                col.push("");
            }
        }
    }
}

/// The HTML report of run records (JSON, as runs return them), in order.
#[pyfunction]
fn report_html(py: Python<'_>, records: Vec<String>) -> PyResult<String> {
    py.detach(|| -> anyhow::Result<String> {
        let records = records
            .iter()
            .map(|r| serde_json::from_str::<RunRecord>(r).map_err(anyhow::Error::from))
            .collect::<anyhow::Result<Vec<_>>>()?;
        hyflow_commands::report::html(&records)
    })
    .map_err(error)
}

#[pymodule]
fn _hyflow(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("HyflowError", m.py().get_type::<HyflowError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("REPLAY_WALL_CLOCK_KEY", hyflow::replay_report::WALL_CLOCK_KEY)?;
    m.add_function(wrap_pyfunction!(options, m)?)?;
    m.add_function(wrap_pyfunction!(run_replay, m)?)?;
    m.add_function(wrap_pyfunction!(report_html, m)?)?;
    m.add_function(wrap_pyfunction!(run_sim, m)?)?;
    m.add_function(wrap_pyfunction!(probes::sim_probe, m)?)?;
    m.add_function(wrap_pyfunction!(run_topk, m)?)?;
    m.add_function(wrap_pyfunction!(eval_topk, m)?)?;
    m.add_function(wrap_pyfunction!(run_trace, m)?)?;
    m.add_function(wrap_pyfunction!(generate, m)?)?;
    m.add_function(wrap_pyfunction!(load_flows, m)?)?;
    m.add_function(wrap_pyfunction!(load_updates, m)?)?;
    m.add_function(wrap_pyfunction!(load_trace, m)?)?;
    Ok(())
}
