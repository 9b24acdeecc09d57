//! `hyflow sim --plot DIR`: the simulation's time series and latency distribution as PNG and
//! SVG charts. Text uses the bundled DejaVu Sans Mono (assets/, its licence beside it), so
//! the charts render the same on any machine.

use std::path::Path;

use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use hyflow::sim::Metrics;

const FONT: &[u8] = include_bytes!("../assets/DejaVuSansMono.ttf");
const SIZE: (u32, u32) = (900, 480);

/// A line of a chart: name, colour, points.
type Series<'a> = (&'a str, RGBColor, Vec<(f64, f64)>);

fn chart<DB: DrawingBackend>(
    area: DrawingArea<DB, Shift>,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    legend: SeriesLabelPosition,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let x_max = series.iter().flat_map(|s| s.2.iter().map(|p| p.0)).fold(0.0f64, f64::max).max(1e-9);
    // A legend in the upper right gets headroom above the data, so that it hides none.
    let headroom = if matches!(legend, SeriesLabelPosition::UpperRight) { 1.3 } else { 1.05 };
    let y_max =
        series.iter().flat_map(|s| s.2.iter().map(|p| p.1)).fold(0.0f64, f64::max).max(1e-9) * headroom;
    let mut c = ChartBuilder::on(&area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(|e| anyhow!("{e}"))?;
    c.configure_mesh().x_desc(x_label).y_desc(y_label).draw().map_err(|e| anyhow!("{e}"))?;
    for (name, color, points) in series {
        let color = *color;
        c.draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))
            .map_err(|e| anyhow!("{e}"))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    c.configure_series_labels()
        .position(legend)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    area.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}

/// Time series fill the width: their legend goes above the data.
const TIME_SERIES_LEGEND: SeriesLabelPosition = SeriesLabelPosition::UpperRight;
/// A latency CDF rises at the left and stays at 1, leaving the lower right empty.
const CDF_LEGEND: SeriesLabelPosition = SeriesLabelPosition::LowerRight;

fn both(
    dir: &Path,
    name: &str,
    (title, x, y): (&str, &str, &str),
    series: &[Series],
    legend: SeriesLabelPosition,
) -> Result<()> {
    let png = dir.join(format!("{name}.png"));
    chart(BitMapBackend::new(&png, SIZE).into_drawing_area(), title, x, y, series, legend.clone())
        .with_context(|| format!("{}: cannot draw", png.display()))?;
    let svg = dir.join(format!("{name}.svg"));
    chart(SVGBackend::new(&svg, SIZE).into_drawing_area(), title, x, y, series, legend)
        .with_context(|| format!("{}: cannot draw", svg.display()))?;
    Ok(())
}

/// The cumulative distribution of a latency histogram, in µs.
fn cdf(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let total = h.len() as f64;
    let mut seen = 0u64;
    let mut points = vec![(0.0, 0.0)];
    for v in h.iter_recorded() {
        seen += v.count_since_last_iteration();
        points.push((v.value_iterated_to() as f64 / 1e3, seen as f64 / total));
    }
    points
}

/// Writes `rate`, `ring` and `latency_cdf` charts (PNG and SVG) to `dir`.
pub fn write_plots(dir: &Path, m: &Metrics, interval_ns: u64, policy: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    let per_s = 1e9 / interval_ns as f64;
    let t = |i: usize| (i as u64 * interval_ns) as f64 / 1e9;
    let col = |f: fn(&hyflow::sim::Interval) -> u64, scale: f64| -> Vec<(f64, f64)> {
        m.complete_intervals(interval_ns)
            .iter()
            .enumerate()
            .map(|(i, iv)| (t(i), f(iv) as f64 * scale))
            .collect()
    };
    let mpps = per_s / 1e6;
    both(
        dir,
        "rate",
        (&format!("Packet rate over time ({policy})"), "time (s)", "Mpps"),
        &[
            ("software (served)", RED, col(|iv| iv.served, mpps)),
            ("to host (offered)", MAGENTA, col(|iv| iv.sw, mpps)),
            ("hardware", BLUE, col(|iv| iv.hw, mpps)),
        ],
        TIME_SERIES_LEGEND,
    )?;
    both(
        dir,
        "ring",
        (&format!("Largest ring occupancy per interval ({policy})"), "time (s)", "packets"),
        &[("ring occupancy", RED, col(|iv| iv.ring_max, 1.0)), ("lost", BLACK, col(|iv| iv.lost, 1.0))],
        TIME_SERIES_LEGEND,
    )?;
    both(
        dir,
        "latency_cdf",
        (&format!("Latency CDF ({policy})"), "latency (µs)", "fraction of packets"),
        &[
            ("all", BLACK, cdf(&m.latency)),
            ("software", RED, cdf(&m.latency_sw)),
            ("hardware", BLUE, cdf(&m.latency_hw)),
        ],
        CDF_LEGEND,
    )?;
    Ok(())
}
