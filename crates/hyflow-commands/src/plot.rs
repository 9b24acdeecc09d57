//! The charts of a run ([`RunRecord`]): `sim --plot DIR` and `hyflow.sim(plot=DIR)` write them
//! as PNG and SVG, and the HTML report (`--report`, `hyflow report`) inlines their SVG. Drawn to
//! be read right: one unit per axis (rates, ring occupancy, losses, NIC entries and installs
//! each on their own), counts as steps over their interval (nothing falls to 0 between points
//! or after the last), whole-number ticks on counts, the rings' capacity drawn on their chart,
//! step CDFs on a logarithmic latency axis (µs hardware latencies and ms software ones on one
//! chart), no legend entry for a line with nothing to show, and only the complete intervals
//! of a series sized to the run. Text uses the bundled DejaVu Sans Mono (assets/, its licence
//! beside it), so the charts render the same on any machine.

use std::ops::Range;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::run_record::{RunRecord, SeriesRecord};

const FONT: &[u8] = include_bytes!("../assets/DejaVuSansMono.ttf");
const SIZE: (u32, u32) = (900, 480);
/// Two stacked panels.
const TALL: (u32, u32) = (900, 640);

/// How a line is drawn.
#[derive(Clone, Copy)]
struct Pen {
    color: RGBColor,
    width: u32,
    /// Opacity: a wide translucent line under a thin one keeps both visible where they agree.
    alpha: f64,
}

impl Pen {
    const fn solid(color: RGBColor) -> Pen {
        Pen { color, width: 2, alpha: 1.0 }
    }
}

/// A line of a chart: name, pen, points.
type Series<'a> = (&'a str, Pen, Vec<(f64, f64)>);

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("{e}")
}

fn y_range(series: &[Series], headroom: f64, floor: f64) -> Range<f64> {
    let max = series.iter().flat_map(|s| s.2.iter().map(|p| p.1)).fold(floor, f64::max);
    // Counts: an all-zero series still gets a readable axis of whole numbers.
    0.0..(max * headroom).max(4.0)
}

fn x_range(series: &[Series]) -> Range<f64> {
    let (lo, hi) = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.0))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)));
    if lo.is_finite() && hi > lo {
        lo..hi
    } else {
        0.0..1.0
    }
}

/// Draws `series` on chart `c`, each with its pen, and their legend at `legend`.
fn lines<'a, DB, X, Y>(
    c: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    series: &[Series],
    legend: SeriesLabelPosition,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (name, pen, points) in series {
        let style = pen.color.mix(pen.alpha).stroke_width(pen.width);
        c.draw_series(LineSeries::new(points.iter().copied(), style))
            .map_err(err)?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    c.configure_series_labels()
        .position(legend)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// What a panel draws: title, y label, its lines, whether the y values are counts (whole
/// ticks), and a horizontal reference line (a ring's capacity) with its name, drawn when the
/// data come within a tenth of it (else it would flatten them; the title gives it then).
struct Panel<'a> {
    title: String,
    y_label: &'a str,
    series: Vec<Series<'a>>,
    counts: bool,
    limit: Option<(&'a str, f64)>,
}

impl<'a> Panel<'a> {
    /// A panel of counts (whole ticks), without a reference line.
    fn of_counts(title: String, y_label: &'a str, series: Vec<Series<'a>>) -> Panel<'a> {
        Panel { title, y_label, series, counts: true, limit: None }
    }
}

/// A linear chart of a panel on `area`; the legend (upper right) gets headroom above the data.
fn linear<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, x_label: &str, panel: &Panel) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let data_max = panel.series.iter().flat_map(|s| s.2.iter().map(|p| p.1)).fold(0.0f64, f64::max);
    let limit = panel.limit.filter(|&(_, v)| data_max >= v / 10.0);
    let y = y_range(&panel.series, 1.3, limit.map_or(0.0, |(_, v)| v));
    let mut c = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 18))
        .margin(12)
        .margin_right(30)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(x_range(&panel.series), y.clone())
        .map_err(err)?;
    let whole = |v: &f64| format!("{:.0}", v);
    let mut mesh = c.configure_mesh();
    mesh.x_desc(x_label).y_desc(panel.y_label);
    if panel.counts {
        // Whole numbers only: as many ticks as there are integers, up to ten.
        mesh.y_labels((y.end.floor() as usize + 1).min(10)).y_label_formatter(&whole);
    }
    mesh.draw().map_err(err)?;
    let mut series: Vec<Series> = panel.series.clone();
    if let Some((name, value)) = limit {
        let xs = x_range(&panel.series);
        let pen = Pen { color: BLACK, width: 1, alpha: 0.6 };
        series.push((name, pen, vec![(xs.start, value), (xs.end, value)]));
    }
    lines(&mut c, &series, SeriesLabelPosition::UpperRight)
}

/// Panels one above the other, sharing the time axis.
fn stacked<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, x_label: &str, panels: &[Panel]) -> Result<()>
where
    DB::ErrorType: 'static,
{
    for (a, panel) in area.split_evenly((panels.len(), 1)).iter().zip(panels) {
        linear(a, x_label, panel)?;
    }
    Ok(())
}

/// Step CDFs on a logarithmic x axis.
fn log_cdf<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, title: &str, series: &[Series]) -> Result<()>
where
    DB::ErrorType: 'static,
{
    // Whole decades, so that the axis has its labels (1, 2, 5, 10, ...) however narrow the data.
    let xs = x_range(series);
    let lo = 10f64.powf(xs.start.max(1e-3).log10().floor());
    let hi = 10f64.powf((xs.end * 1.05).max(lo * 10.0).log10().ceil());
    let mut c = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .margin_right(30)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.05)
        .map_err(err)?;
    c.configure_mesh()
        .x_labels(12)
        .x_label_formatter(&|x| {
            if *x >= 10.0 {
                format!("{x:.0}")
            } else {
                format!("{x:.2}").trim_end_matches('0').trim_end_matches('.').to_string()
            }
        })
        .x_desc("latency (µs, log scale)")
        .y_desc("fraction of packets ≤ latency")
        .draw()
        .map_err(err)?;
    lines(&mut c, series, SeriesLabelPosition::LowerRight)
}

/// Draws `draw` to `DIR/NAME.png` and `DIR/NAME.svg`.
fn both(dir: &Path, chart: &Chart) -> Result<()> {
    let png = dir.join(format!("{}.png", chart.name));
    let area = BitMapBackend::new(&png, chart.size).into_drawing_area();
    area.fill(&WHITE).map_err(err)?;
    chart
        .draw(&area)
        .and_then(|_| area.present().map_err(err))
        .with_context(|| format!("{}: cannot draw", png.display()))?;
    std::fs::write(dir.join(format!("{}.svg", chart.name)), svg(chart)?)
        .with_context(|| format!("{}: cannot write", dir.display()))?;
    Ok(())
}

/// The chart as an SVG document.
pub fn svg(chart: &Chart) -> Result<String> {
    let mut out = String::new();
    {
        let area = SVGBackend::with_string(&mut out, chart.size).into_drawing_area();
        area.fill(&WHITE).map_err(err)?;
        chart.draw(&area)?;
        area.present().map_err(err)?;
    }
    Ok(out)
}

/// Time in seconds or milliseconds, whichever reads better for a run of `span_s`.
fn time_unit(span_s: f64) -> (f64, &'static str) {
    if span_s < 1.0 {
        (1e3, "time (ms)")
    } else {
        (1.0, "time (s)")
    }
}

/// Packets per second in Mpps or kpps, whichever reads better for a peak of `max`.
fn rate_unit(max: f64) -> (f64, &'static str) {
    if max >= 1e6 {
        (1e-6, "packets per second (Mpps)")
    } else {
        (1e-3, "packets per second (kpps)")
    }
}

/// What a chart draws.
enum Body<'a> {
    /// Panels over time, one above the other.
    Panels { x_label: &'a str, panels: Vec<Panel<'a>> },
    /// Step CDFs on a log latency axis.
    Cdf { title: String, series: Vec<Series<'a>> },
}

/// One chart of a run: its file name, size and what it draws (as PNG or SVG).
pub struct Chart<'a> {
    /// File name without extension; also the report's `data-chart`.
    pub name: &'static str,
    /// What it shows, for the report's caption.
    pub caption: String,
    size: (u32, u32),
    body: Body<'a>,
}

impl Chart<'_> {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        match &self.body {
            Body::Panels { x_label, panels } => stacked(area, x_label, panels),
            Body::Cdf { title, series } => log_cdf(area, title, series),
        }
    }
}

/// Counts per interval as steps in time: each value held over its whole interval.
fn steps(series: &SeriesRecord, values: impl Iterator<Item = f64>, t_scale: f64) -> Vec<(f64, f64)> {
    let dt = series.interval_s * t_scale;
    let mut out = Vec::new();
    for (i, v) in values.enumerate() {
        out.push((i as f64 * dt, v));
        out.push((i as f64 * dt + dt, v));
    }
    out
}

/// The lines that have something to show (all if none has: the chart keeps its axes).
fn shown(series: Vec<Series>) -> Vec<Series> {
    let any = |s: &Series| s.2.iter().any(|p| p.1 != 0.0);
    if series.iter().any(any) {
        series.into_iter().filter(any).collect()
    } else {
        series
    }
}

const CORE_COLORS: [RGBColor; 6] =
    [RED, BLUE, RGBColor(0, 150, 0), MAGENTA, RGBColor(230, 140, 0), RGBColor(0, 160, 160)];

/// The charts of `record`: its time series (packet rates by tier, rings per core, the NIC's
/// entries and installs when it held any) if it has one, and its latency CDFs.
pub fn charts(record: &RunRecord) -> Vec<Chart<'_>> {
    let mut out = Vec::new();
    // Titles name the policy (the full setup heads the report and would not fit a title).
    let who = match record.summary.get("policy").and_then(|p| p.as_str()) {
        Some(policy) => format!("policy {policy}"),
        None => record.command.clone(),
    };
    if let Some(s) = record.series.as_ref().filter(|s| !s.nic.is_empty()) {
        let span = s.nic.len() as f64 * s.interval_s;
        let (t_scale, t_label) = time_unit(span);
        let per_s = 1.0 / s.interval_s;
        let peak = s.nic.iter().chain(&s.host_offered).chain(&s.host_served).copied().max().unwrap_or(0);
        let (r_scale, r_label) = rate_unit(peak as f64 * per_s);
        let every = if s.interval_s >= 1e-3 {
            format!("{} ms", s.interval_s * 1e3)
        } else {
            format!("{} µs", s.interval_s * 1e6)
        };
        let rate = |v: &[u64]| steps(s, v.iter().map(|&n| n as f64 * per_s * r_scale), t_scale);
        let count = |v: &[u64]| steps(s, v.iter().map(|&n| n as f64), t_scale);
        let rates = Panel {
            title: format!("Packet rate per {every} ({who})"),
            y_label: r_label,
            series: shown(vec![
                ("to host (offered)", Pen { color: MAGENTA, width: 7, alpha: 0.3 }, rate(&s.host_offered)),
                ("host (served)", Pen::solid(RED), rate(&s.host_served)),
                ("NIC (hardware)", Pen::solid(BLUE), rate(&s.nic)),
                ("lost", Pen::solid(BLACK), rate(&s.lost)),
            ]),
            counts: false,
            limit: None,
        };
        let caption = format!("packets per second through the NIC, to the host and lost, per {every}");
        out.push(chart("rate", caption, SIZE, t_label, vec![rates]));
        let core_line = |i: usize, v: &[u64]| -> Series {
            (
                CORE_NAMES[i.min(CORE_NAMES.len() - 1)],
                Pen::solid(CORE_COLORS[i % CORE_COLORS.len()]),
                count(v),
            )
        };
        let rings = Panel {
            limit: Some(("ring capacity", s.ring_capacity as f64)),
            ..Panel::of_counts(
                format!(
                    "Largest ring occupancy per {every}, by core ({who}; rings hold {})",
                    s.ring_capacity
                ),
                "packets in the ring",
                s.cores.iter().enumerate().map(|(i, c)| core_line(i, &c.ring_max)).collect(),
            )
        };
        let lost = Panel::of_counts(
            format!("Packets lost at a full ring per {every}, by core ({who})"),
            "packets lost",
            s.cores.iter().enumerate().map(|(i, c)| core_line(i, &c.lost)).collect(),
        );
        let caption = format!("each core's ring: its fullest point and its losses, per {every}");
        out.push(chart("ring", caption, TALL, t_label, vec![rings, lost]));
        // A run whose NIC never held anything (software forwarding) has no NIC to chart.
        if s.nic_entries.iter().chain(&s.nic_installs).any(|&n| n > 0) {
            let entries = Panel::of_counts(
                format!("NIC entries held ({who})"),
                "entries",
                vec![("entries", Pen::solid(BLUE), count(&s.nic_entries))],
            );
            let installs = Panel::of_counts(
                format!("NIC installs per {every} ({who})"),
                "installs",
                vec![("installs", Pen::solid(RED), count(&s.nic_installs))],
            );
            let caption =
                format!("the NIC's occupancy at the end of each {every}, and the entries installed in it");
            out.push(chart("nic", caption, TALL, t_label, vec![entries, installs]));
        }
    }
    if !record.latency_cdf.is_empty() {
        let cdfs: Vec<Series> = record
            .latency_cdf
            .iter()
            .map(|c| {
                let pen = match c.path.as_str() {
                    "all" => Pen { color: BLACK, width: 7, alpha: 0.25 },
                    "hardware" => Pen::solid(BLUE),
                    _ => Pen::solid(RED),
                };
                (path_name(&c.path), pen, c.points.clone())
            })
            .collect();
        out.push(cdf_chart("latency_cdf", format!("Latency CDF ({who})"), cdfs));
    }
    out
}

/// Latency CDFs of several runs on one chart, all packets of each (a comparison).
pub fn compared_cdfs<'a>(records: &'a [RunRecord]) -> Option<Chart<'a>> {
    let cdfs: Vec<Series> = records
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let all = r.latency_cdf.iter().find(|c| c.path == "all")?;
            Some((r.label.as_str(), Pen::solid(CORE_COLORS[i % CORE_COLORS.len()]), all.points.clone()))
        })
        .collect();
    (cdfs.len() > 1)
        .then(|| cdf_chart("latency_cdf_compared", "Latency CDF, all packets, by run".to_string(), cdfs))
}

const CORE_NAMES: [&str; 9] =
    ["core 0", "core 1", "core 2", "core 3", "core 4", "core 5", "core 6", "core 7", "cores 8+"];

fn path_name(path: &str) -> &'static str {
    match path {
        "all" => "all",
        "hardware" => "hardware",
        _ => "software",
    }
}

fn chart<'a>(
    name: &'static str,
    caption: String,
    size: (u32, u32),
    x_label: &'a str,
    panels: Vec<Panel<'a>>,
) -> Chart<'a> {
    Chart { name, caption, size, body: Body::Panels { x_label, panels } }
}

fn cdf_chart<'a>(name: &'static str, title: String, series: Vec<Series<'a>>) -> Chart<'a> {
    let caption = "the fraction of packets delivered within each latency (log scale)".to_string();
    Chart { name, caption, size: SIZE, body: Body::Cdf { title, series } }
}

/// Writes the charts of `record` (PNG and SVG) to `dir`: `rate`, `ring`, `nic`,
/// `latency_cdf`.
pub fn write_plots(dir: &Path, record: &RunRecord) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    register_font();
    for c in charts(record) {
        both(dir, &c)?;
    }
    Ok(())
}

/// The bundled font, registered once for every chart.
pub fn register_font() {
    let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
}
