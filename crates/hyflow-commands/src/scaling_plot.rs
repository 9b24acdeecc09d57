//! A chart of throughput against cores: a model's lines and measured points on one chart
//! (`hyflow kvs-sim --plot`, drawn as FlexNIC's Figure 4 is: cores across, requests per second
//! up, a line per steering mode). PNG or SVG by the file's extension, with the bundled font.

use std::path::Path;

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;

/// Colours of the lines, in order.
const COLORS: [RGBColor; 4] = [RED, BLUE, RGBColor(0, 150, 0), MAGENTA];

/// A named series of (cores, value) points.
pub type Series = (String, Vec<(f64, f64)>);

/// Draws `lines` (the model) and `points` (measurements; a point's series shares the colour
/// of the line whose name is the longest its name starts with, and is drawn as circles if
/// its name says `capacity`, crosses otherwise) to `path`.
pub fn write_scaling_chart(
    path: &Path,
    title: &str,
    y_label: &str,
    lines: &[Series],
    points: &[Series],
) -> Result<()> {
    crate::plot::register_font();
    let size = (900, 540);
    match path.extension().and_then(|e| e.to_str()) {
        Some("svg") => {
            let area = SVGBackend::new(path, size).into_drawing_area();
            draw(&area, title, y_label, lines, points)?;
            area.present().map_err(|e| anyhow!("{e}"))
        }
        Some("png") => {
            let area = BitMapBackend::new(path, size).into_drawing_area();
            draw(&area, title, y_label, lines, points)?;
            area.present().map_err(|e| anyhow!("{e}"))
        }
        _ => Err(anyhow!("{}: the chart is written as .png or .svg", path.display())),
    }
    .with_context(|| format!("{}: cannot draw", path.display()))
}

fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    y_label: &str,
    lines: &[Series],
    points: &[Series],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{e}");
    area.fill(&WHITE).map_err(err)?;
    let all = lines.iter().chain(points).flat_map(|s| s.1.iter());
    let (max_x, max_y) = all.fold((1.0f64, 0.0f64), |(x, y), p| (x.max(p.0), y.max(p.1)));
    let mut c = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.5..max_x + 0.5, 0.0..max_y * 1.15)
        .map_err(err)?;
    c.configure_mesh()
        .x_desc("cores")
        .y_desc(y_label)
        .x_labels(max_x as usize + 1)
        .x_label_formatter(&|x| if (x.fract()).abs() < 1e-9 { format!("{x:.0}") } else { String::new() })
        .draw()
        .map_err(err)?;
    let color_of = |name: &str| {
        let line =
            lines.iter().enumerate().filter(|(_, l)| name.starts_with(&l.0)).max_by_key(|(_, l)| l.0.len());
        line.map_or(BLACK, |(i, _)| COLORS[i % COLORS.len()])
    };
    for (i, (name, pts)) in lines.iter().enumerate() {
        let style = COLORS[i % COLORS.len()].stroke_width(2);
        c.draw_series(LineSeries::new(pts.iter().copied(), style))
            .map_err(err)?
            .label(format!("{name} (model)"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    for (name, pts) in points {
        let color = color_of(name);
        if name.contains("capacity") {
            c.draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 6, color.stroke_width(2))))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| Circle::new((x + 10, y), 5, color.stroke_width(2)));
        } else {
            c.draw_series(pts.iter().map(|&(x, y)| Cross::new((x, y), 7, color.stroke_width(2))))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| Cross::new((x + 10, y), 6, color.stroke_width(2)));
        }
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}
