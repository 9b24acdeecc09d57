//! `sim --plot DIR` and `hyflow.sim(plot=DIR)`: the simulation's time series and latency
//! distribution as PNG and SVG charts, drawn to be read right: one quantity per axis, units in
//! every label, step CDFs on a logarithmic latency axis (µs hardware latencies and ms
//! software ones on one chart), and only the complete intervals of a series sized to the run.
//! Text uses the bundled DejaVu Sans Mono (assets/, its licence beside it), so the charts
//! render the same on any machine.

use std::ops::Range;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use hyflow::timing::{Interval, Metrics};

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

fn y_range(series: &[Series], headroom: f64) -> Range<f64> {
    let max = series.iter().flat_map(|s| s.2.iter().map(|p| p.1)).fold(0.0f64, f64::max);
    // Counts: an all-zero series still gets a readable axis of whole numbers.
    0.0..(max * headroom).max(1.0)
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

/// A linear chart of `series` on `area`; the legend (upper right) gets headroom above the data.
fn linear<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    (x_label, y_label): (&str, &str),
    series: &[Series],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let mut c = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(x_range(series), y_range(series, 1.3))
        .map_err(err)?;
    c.configure_mesh().x_desc(x_label).y_desc(y_label).draw().map_err(err)?;
    lines(&mut c, series, SeriesLabelPosition::UpperRight)
}

/// Charts one above the other, sharing the time axis: (title, y label, series) each.
fn stacked<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    x_label: &str,
    panels: &[(String, &str, &[Series])],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    for (panel, (title, y_label, series)) in area.split_evenly((panels.len(), 1)).iter().zip(panels) {
        linear(panel, title, (x_label, y_label), series)?;
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

/// The CDF of a latency histogram (ns) as a step function in µs: flat between recorded
/// values, rising at each; it starts at the smallest latency, not at zero.
fn step_cdf(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let total = h.len() as f64;
    let mut seen = 0u64;
    let mut points = Vec::new();
    for v in h.iter_recorded() {
        let x = h.highest_equivalent(v.value_iterated_to()) as f64 / 1e3;
        points.push((x, seen as f64 / total));
        seen += v.count_since_last_iteration();
        points.push((x, seen as f64 / total));
    }
    points
}

/// Draws `draw` to `DIR/NAME.png` and `DIR/NAME.svg`.
fn both(
    dir: &Path,
    name: &str,
    size: (u32, u32),
    draw: &dyn Fn(&DrawingArea<BitMapBackend, Shift>) -> Result<()>,
    draw_svg: &dyn Fn(&DrawingArea<SVGBackend, Shift>) -> Result<()>,
) -> Result<()> {
    let png = dir.join(format!("{name}.png"));
    let area = BitMapBackend::new(&png, size).into_drawing_area();
    area.fill(&WHITE).map_err(err)?;
    draw(&area)
        .and_then(|_| area.present().map_err(err))
        .with_context(|| format!("{}: cannot draw", png.display()))?;
    let svg = dir.join(format!("{name}.svg"));
    let area = SVGBackend::new(&svg, size).into_drawing_area();
    area.fill(&WHITE).map_err(err)?;
    draw_svg(&area)
        .and_then(|_| area.present().map_err(err))
        .with_context(|| format!("{}: cannot draw", svg.display()))?;
    Ok(())
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

/// Writes `rate`, `ring` and `latency_cdf` charts (PNG and SVG) to `dir`.
pub fn write_plots(dir: &Path, m: &Metrics, policy: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    let intervals = m.complete_intervals();
    let interval_s = m.interval_ns as f64 / 1e9;
    let (t_scale, t_label) = time_unit(intervals.len() as f64 * interval_s);
    let per_s = 1.0 / interval_s;
    let peak = intervals.iter().map(|iv| iv.sw.max(iv.hw).max(iv.served)).max().unwrap_or(0) as f64 * per_s;
    let (r_scale, r_label) = rate_unit(peak);
    // Each value at the middle of its interval.
    let col = |f: fn(&Interval) -> u64, scale: f64| -> Vec<(f64, f64)> {
        intervals
            .iter()
            .enumerate()
            .map(|(i, iv)| ((i as f64 + 0.5) * interval_s * t_scale, f(iv) as f64 * scale))
            .collect()
    };
    let every = if m.interval_ns >= 1_000_000 {
        format!("{} ms", m.interval_ns as f64 / 1e6)
    } else {
        format!("{} µs", m.interval_ns as f64 / 1e3)
    };
    let rates = [
        ("to host (offered)", Pen { color: MAGENTA, width: 7, alpha: 0.3 }, col(|iv| iv.sw, per_s * r_scale)),
        ("host (served)", Pen::solid(RED), col(|iv| iv.served, per_s * r_scale)),
        ("NIC (hardware)", Pen::solid(BLUE), col(|iv| iv.hw, per_s * r_scale)),
    ];
    let title = format!("Packet rate per {every} ({policy})");
    both(dir, "rate", SIZE, &|a| linear(a, &title, (t_label, r_label), &rates), &|a| {
        linear(a, &title, (t_label, r_label), &rates)
    })?;
    let ring = [("largest ring occupancy", Pen::solid(RED), col(|iv| iv.ring_max, 1.0))];
    let lost = [("lost at a full ring", Pen::solid(BLACK), col(|iv| iv.lost, 1.0))];
    let panels = [
        (format!("Ring occupancy per {every} ({policy})"), "packets in the ring", &ring[..]),
        (format!("Packets lost per {every} ({policy})"), "packets lost", &lost[..]),
    ];
    both(dir, "ring", TALL, &|a| stacked(a, t_label, &panels), &|a| stacked(a, t_label, &panels))?;
    let cdfs = [
        ("all", Pen { color: BLACK, width: 7, alpha: 0.25 }, step_cdf(&m.latency)),
        ("software", Pen::solid(RED), step_cdf(&m.latency_sw)),
        ("hardware", Pen::solid(BLUE), step_cdf(&m.latency_hw)),
    ];
    let cdfs: Vec<Series> = cdfs.into_iter().filter(|s| !s.2.is_empty()).collect();
    let title = format!("Latency CDF ({policy})");
    both(dir, "latency_cdf", SIZE, &|a| log_cdf(a, &title, &cdfs), &|a| log_cdf(a, &title, &cdfs))?;
    Ok(())
}
