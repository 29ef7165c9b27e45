//! Plots as standalone SVG, drawn by plotters: a chart is described as
//! data (title, axes with units, series), and [`Chart::svg`] lays it out.
//! Every chart carries a `<title>` and a `<desc>` (what it shows, in
//! words) for screen readers and for the browser's tooltip, and uses the
//! Okabe-Ito colours with a second cue (marker fill, dash) so it reads in
//! print and for colour-blind readers.

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use std::fmt::Write as _;

/// A chart's plotting area, as the drawing steps take it.
type Plot<'a, 'b, X, Y> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>;

/// A heatmap's axis: one segment per parameter value.
type Segments = plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordi32>;

/// Okabe & Ito's colour-blind-safe palette, darkest first, so the first
/// series print well in grey.
pub const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
];

pub const GREY: RGBColor = RGBColor(120, 120, 120);

/// Text is laid out by the browser; plotters only estimates widths.
const FONT: &str = "sans-serif";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Base-10 logarithmic; values must be positive (others are dropped).
    Log,
}

impl Scale {
    /// The scale for a time axis over `values`: logarithmic when they are
    /// positive and span more than a factor of 4, so both ends stay
    /// readable; linear otherwise.
    pub fn of(values: &[f64]) -> Scale {
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(0.0, f64::max);
        if lo > 0.0 && hi / lo > 4.0 {
            Scale::Log
        } else {
            Scale::Linear
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A filled dot per point.
    Dots,
    /// A hollow ring per point (a second kind of point beside `Dots`).
    Rings,
    /// Points joined by straight lines.
    Line,
    /// A dashed line.
    DashedLine,
    /// A staircase: each value holds until the next point (best so far).
    Steps,
}

/// One series of points.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub mark: Mark,
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
    /// Per point, the (low, high) of its uncertainty: drawn as a bar.
    pub error: Vec<Option<(f64, f64)>>,
}

impl Series {
    pub fn new(
        name: impl Into<String>,
        mark: Mark,
        color: RGBColor,
        points: Vec<(f64, f64)>,
    ) -> Series {
        Series {
            name: name.into(),
            mark,
            color,
            points,
            error: Vec::new(),
        }
    }
}

/// A vertical marker: a size, a chosen delay.
#[derive(Debug, Clone)]
pub struct Rule {
    pub x: f64,
    pub label: String,
    pub color: RGBColor,
    pub dashed: bool,
}

impl Rule {
    /// A measured value's mark: dashed.
    pub fn measured(x: f64, label: impl Into<String>, color: RGBColor) -> Rule {
        Rule {
            x,
            label: label.into(),
            color,
            dashed: true,
        }
    }

    /// A documented value's mark: solid.
    pub fn documented(x: f64, label: impl Into<String>, color: RGBColor) -> Rule {
        Rule {
            x,
            label: label.into(),
            color,
            dashed: false,
        }
    }
}

/// An axis: its label says the quantity and its unit.
#[derive(Debug, Clone)]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
    /// How a tick value is printed (default: a short number).
    pub ticks: Ticks,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ticks {
    Number,
    /// Integer values only (a parameter's values): other ticks unlabelled.
    Integer,
    /// Bytes in binary units (buffer sizes).
    Bytes,
    /// Nanoseconds printed in the axis unit chosen for the data.
    Time(TimeUnit),
}

/// The one unit a time axis is printed in, chosen from its largest value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Ns,
    Us,
    Ms,
    S,
}

impl TimeUnit {
    pub fn for_max(max_ns: f64) -> TimeUnit {
        if max_ns >= 1e9 {
            TimeUnit::S
        } else if max_ns >= 1e6 {
            TimeUnit::Ms
        } else if max_ns >= 1e3 {
            TimeUnit::Us
        } else {
            TimeUnit::Ns
        }
    }
    pub fn symbol(self) -> &'static str {
        match self {
            TimeUnit::Ns => "ns",
            TimeUnit::Us => "µs",
            TimeUnit::Ms => "ms",
            TimeUnit::S => "s",
        }
    }
    pub fn per_ns(self) -> f64 {
        match self {
            TimeUnit::Ns => 1.0,
            TimeUnit::Us => 1e-3,
            TimeUnit::Ms => 1e-6,
            TimeUnit::S => 1e-9,
        }
    }
}

impl Axis {
    pub fn linear(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            scale: Scale::Linear,
            ticks: Ticks::Number,
        }
    }
    pub fn log(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            scale: Scale::Log,
            ticks: Ticks::Number,
        }
    }
    /// A time axis for nanosecond data up to `max_ns`: "what (µs)".
    pub fn time(what: &str, max_ns: f64, scale: Scale) -> Axis {
        let unit = TimeUnit::for_max(max_ns);
        Axis {
            label: format!("{what} ({})", unit.symbol()),
            scale,
            ticks: Ticks::Time(unit),
        }
    }
    /// Integer values on a linear axis (parameter values, counts).
    pub fn integer(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            scale: Scale::Linear,
            ticks: Ticks::Integer,
        }
    }
    pub fn bytes(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            scale: Scale::Log,
            ticks: Ticks::Bytes,
        }
    }

    fn format(&self, v: f64) -> String {
        match self.ticks {
            Ticks::Number => short_number(v),
            Ticks::Integer if (v - v.round()).abs() < 1e-9 => format!("{}", v.round() as i64),
            Ticks::Integer => String::new(),
            Ticks::Bytes => stats::bytes(v.max(0.0).round() as u64).replace(".0 ", " "),
            Ticks::Time(u) => short_number(v * u.per_ns()),
        }
    }
}

fn short_number(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e6).contains(&a) {
        format!("{v:.1e}")
    } else if a >= 100.0 || (v.fract() == 0.0) {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A chart described as data.
#[derive(Debug, Clone)]
pub struct Chart {
    pub title: String,
    /// What the chart shows, in words (the SVG's `<desc>`).
    pub description: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    pub rules: Vec<Rule>,
    pub width: u32,
    pub height: u32,
}

#[derive(Debug, thiserror::Error)]
#[error("drawing the chart `{title}` failed: {why}")]
pub struct ChartError {
    title: String,
    why: String,
}

impl Chart {
    pub fn new(title: impl Into<String>, x: Axis, y: Axis) -> Chart {
        Chart {
            title: title.into(),
            description: String::new(),
            x,
            y,
            series: Vec::new(),
            rules: Vec::new(),
            width: 860,
            height: 420,
        }
    }

    /// `points` joined by a line and marked at each point, under one
    /// legend entry.
    pub fn line_with_dots(
        &mut self,
        name: impl Into<String>,
        color: RGBColor,
        points: Vec<(f64, f64)>,
    ) {
        self.series
            .push(Series::new(name, Mark::Line, color, points.clone()));
        self.series.push(Series::new("", Mark::Dots, color, points));
    }

    /// The points that can be drawn on these axes (finite; positive on a
    /// log axis).
    fn drawable(&self, (x, y): (f64, f64)) -> bool {
        let ok = |v: f64, s: Scale| v.is_finite() && (s == Scale::Linear || v > 0.0);
        ok(x, self.x.scale) && ok(y, self.y.scale)
    }

    /// The axes' ranges over every drawable point, error bar and rule,
    /// padded so no mark sits on the frame.
    fn ranges(&self) -> ((f64, f64), (f64, f64)) {
        let mut xs: Vec<f64> = Vec::new();
        let mut ys: Vec<f64> = Vec::new();
        for s in &self.series {
            for (i, &p) in s.points.iter().enumerate() {
                if !self.drawable(p) {
                    continue;
                }
                xs.push(p.0);
                ys.push(p.1);
                if let Some(Some((lo, hi))) = s.error.get(i) {
                    for v in [*lo, *hi] {
                        if self.drawable((p.0, v)) {
                            ys.push(v);
                        }
                    }
                }
            }
        }
        for r in &self.rules {
            if self.drawable((r.x, 1.0)) {
                xs.push(r.x);
            }
        }
        (pad(&xs, self.x.scale), pad(&ys, self.y.scale))
    }

    /// The chart as a standalone SVG document.
    pub fn svg(&self) -> Result<String, ChartError> {
        let mut buf = String::new();
        let ((x0, x1), (y0, y1)) = self.ranges();
        let drawn = {
            let root =
                SVGBackend::with_string(&mut buf, (self.width, self.height)).into_drawing_area();
            let named: Vec<&Series> = self.series.iter().filter(|s| !s.name.is_empty()).collect();
            // The legend has a strip of its own, so it never hides data.
            let (plot, legend) = if named.is_empty() {
                (root.clone(), None)
            } else {
                let (p, l) = root.split_horizontally(self.width.saturating_sub(LEGEND_WIDTH));
                (p, Some(l))
            };
            // Log axes get their ticks from `log_ticks` (plotters labels
            // only powers of ten, which leaves a narrow range bare).
            let log = |lo: f64, hi: f64, bytes: bool| {
                let (bold, light) = log_ticks(lo, hi, bytes);
                (lo..hi)
                    .log_scale()
                    .with_key_points(bold)
                    .with_light_points(light)
            };
            let bytes_x = self.x.ticks == Ticks::Bytes;
            root.fill(&WHITE)
                .map_err(|e| e.to_string())
                .and_then(|()| match (self.x.scale, self.y.scale) {
                    (Scale::Linear, Scale::Linear) => self.draw(&plot, x0..x1, y0..y1),
                    (Scale::Log, Scale::Linear) => self.draw(&plot, log(x0, x1, bytes_x), y0..y1),
                    (Scale::Linear, Scale::Log) => self.draw(&plot, x0..x1, log(y0, y1, false)),
                    (Scale::Log, Scale::Log) => {
                        self.draw(&plot, log(x0, x1, bytes_x), log(y0, y1, false))
                    }
                })
                .and_then(|()| match &legend {
                    Some(area) => draw_legend(area, &named),
                    None => Ok(()),
                })
                .and_then(|()| root.present().map_err(|e| e.to_string()))
        };
        drawn.map_err(|why| ChartError {
            title: self.title.clone(),
            why,
        })?;
        Ok(accessible(&buf, &self.title, &self.description))
    }

    fn draw<X, Y>(
        &self,
        area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
        x: X,
        y: Y,
    ) -> Result<(), String>
    where
        X: AsRangedCoord<Value = f64>,
        Y: AsRangedCoord<Value = f64>,
        X::CoordDescType: ValueFormatter<f64>,
        Y::CoordDescType: ValueFormatter<f64>,
    {
        let mut chart = ChartBuilder::on(area)
            .caption(&self.title, (FONT, 20))
            .margin(12)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(x, y)
            .map_err(|e| e.to_string())?;
        let xf = |v: &f64| self.x.format(*v);
        let yf = |v: &f64| self.y.format(*v);
        chart
            .configure_mesh()
            .x_desc(self.x.label.as_str())
            .y_desc(self.y.label.as_str())
            .x_label_formatter(&xf)
            .y_label_formatter(&yf)
            .axis_desc_style((FONT, 15))
            .label_style((FONT, 13))
            .max_light_lines(4)
            .x_labels(10)
            .y_labels(8)
            .light_line_style(RGBColor(240, 240, 240))
            .bold_line_style(RGBColor(215, 215, 215))
            .draw()
            .map_err(|e| e.to_string())?;
        let (ylo, yhi) = {
            let r = chart.y_range();
            (r.start, r.end)
        };
        self.draw_rules(&mut chart, ylo, yhi)?;
        for s in &self.series {
            self.draw_series(&mut chart, s)?;
        }
        self.draw_rule_labels(&mut chart, yhi)
    }

    /// Each rule, solid or dashed, across the whole plot.
    fn draw_rules<X, Y>(
        &self,
        chart: &mut Plot<'_, '_, X, Y>,
        ylo: f64,
        yhi: f64,
    ) -> Result<(), String>
    where
        X: Ranged<ValueType = f64>,
        Y: Ranged<ValueType = f64>,
    {
        for rule in &self.rules {
            if !self.drawable((rule.x, 1.0)) {
                continue;
            }
            let style = ShapeStyle {
                color: rule.color.to_rgba(),
                filled: false,
                stroke_width: 2,
            };
            let line = vec![(rule.x, ylo), (rule.x, yhi)];
            let drawn = if rule.dashed {
                chart
                    .draw_series(DashedLineSeries::new(line, 6, 4, style))
                    .map(|_| ())
            } else {
                chart.draw_series(LineSeries::new(line, style)).map(|_| ())
            };
            drawn.map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// One series: its error bars, then its marks on top.
    fn draw_series<X, Y>(&self, chart: &mut Plot<'_, '_, X, Y>, s: &Series) -> Result<(), String>
    where
        X: Ranged<ValueType = f64>,
        Y: Ranged<ValueType = f64>,
    {
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .copied()
            .filter(|&p| self.drawable(p))
            .collect();
        let stroke = ShapeStyle {
            color: s.color.to_rgba(),
            filled: false,
            stroke_width: 2,
        };
        // Error bars first, so the points sit on top.
        for (i, &(px, py)) in s.points.iter().enumerate() {
            if !self.drawable((px, py)) {
                continue;
            }
            if let Some(Some((lo, hi))) = s.error.get(i) {
                if self.drawable((px, *lo)) && self.drawable((px, *hi)) && hi > lo {
                    chart
                        .draw_series(std::iter::once(PathElement::new(
                            vec![(px, *lo), (px, *hi)],
                            ShapeStyle {
                                color: s.color.mix(0.6),
                                filled: false,
                                stroke_width: 1,
                            },
                        )))
                        .map_err(|e| e.to_string())?;
                }
            }
        }
        match s.mark {
            Mark::Dots => chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, s.color.filled())))
                .map(|_| ()),
            Mark::Rings => chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 4, stroke)))
                .map(|_| ()),
            Mark::Line => chart
                .draw_series(LineSeries::new(pts.clone(), stroke))
                .map(|_| ()),
            Mark::DashedLine => chart
                .draw_series(DashedLineSeries::new(pts.clone(), 5, 3, stroke))
                .map(|_| ()),
            Mark::Steps => {
                let mut stair = Vec::with_capacity(pts.len() * 2);
                for (i, &(px, py)) in pts.iter().enumerate() {
                    if i > 0 {
                        stair.push((px, pts[i - 1].1));
                    }
                    stair.push((px, py));
                }
                chart
                    .draw_series(LineSeries::new(stair, stroke))
                    .map(|_| ())
            }
        }
        .map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Rule labels along the top, stacked so neighbours do not overlap,
    /// and turned inward near the right edge.
    fn draw_rule_labels<X, Y>(&self, chart: &mut Plot<'_, '_, X, Y>, yhi: f64) -> Result<(), String>
    where
        X: Ranged<ValueType = f64>,
        Y: Ranged<ValueType = f64>,
    {
        let (plot_x0, plot_x1) = {
            let r = chart.plotting_area().get_pixel_range();
            (r.0.start, r.0.end)
        };
        for (k, rule) in self
            .rules
            .iter()
            .filter(|r| !r.label.is_empty() && self.drawable((r.x, 1.0)))
            .enumerate()
        {
            let (px, _) = chart.backend_coord(&(rule.x, yhi));
            let inward = px > plot_x0 + (plot_x1 - plot_x0) * 2 / 3;
            let anchor = plotters::style::text_anchor::Pos::new(
                if inward {
                    plotters::style::text_anchor::HPos::Right
                } else {
                    plotters::style::text_anchor::HPos::Left
                },
                plotters::style::text_anchor::VPos::Top,
            );
            let dx = if inward { -4 } else { 4 };
            let style = TextStyle::from((FONT, 12).into_font())
                .color(&rule.color)
                .pos(anchor);
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((rule.x, yhi))
                        + Text::new(rule.label.clone(), (dx, 4 + 15 * k as i32), style),
                ))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// Width of the legend's strip at a chart's right.
const LEGEND_WIDTH: u32 = 220;

/// One key per named series: a filled square for dots, a ring's square
/// outline for rings, a bar for lines (never a dot, so a chart's dots are
/// its data points and nothing else).
fn draw_legend(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    named: &[&Series],
) -> Result<(), String> {
    for (i, s) in named.iter().enumerate() {
        let y = 48 + 22 * i as i32;
        let key: Box<dyn Fn() -> Result<(), String>> = match s.mark {
            Mark::Dots | Mark::Rings => Box::new(move || {
                area.draw(&Rectangle::new(
                    [(4, y - 6), (16, y + 6)],
                    ShapeStyle {
                        color: s.color.to_rgba(),
                        filled: s.mark == Mark::Dots,
                        stroke_width: 2,
                    },
                ))
                .map_err(|e| e.to_string())
            }),
            Mark::DashedLine => Box::new(move || {
                for seg in 0..3 {
                    area.draw(&Rectangle::new(
                        [(2 + 7 * seg, y - 1), (6 + 7 * seg, y + 1)],
                        s.color.filled(),
                    ))
                    .map_err(|e| e.to_string())?;
                }
                Ok(())
            }),
            _ => Box::new(move || {
                area.draw(&Rectangle::new([(2, y - 1), (20, y + 1)], s.color.filled()))
                    .map_err(|e| e.to_string())
            }),
        };
        key()?;
        let style =
            TextStyle::from((FONT, 13).into_font()).pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Left,
                plotters::style::text_anchor::VPos::Center,
            ));
        area.draw(&Text::new(shortened(&s.name, 27), (26, y), style))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `s` cut to `n` characters and marked so ("..."), for a chart's title or
/// legend.
pub fn shortened(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}

/// Labelled (bold) and unlabelled (light) ticks of a log axis over
/// `[lo, hi]`: powers of two for sizes, else 1-2-5 (or sparser) steps per
/// decade, about eight labels; a range too narrow for those gets evenly
/// spaced round values.
pub fn log_ticks(lo: f64, hi: f64, bytes: bool) -> (Vec<f64>, Vec<f64>) {
    if !(lo > 0.0 && hi > lo && lo.is_finite() && hi.is_finite()) {
        return (Vec::new(), Vec::new());
    }
    let within = |v: &f64| *v >= lo * (1.0 - 1e-9) && *v <= hi * (1.0 + 1e-9);
    let (bold, light): (Vec<f64>, Vec<f64>) = if bytes {
        let (a, b) = (lo.log2().ceil() as i32, hi.log2().floor() as i32);
        let count = (b - a + 1).max(1);
        let every = ((count + 9) / 10).max(1);
        let all: Vec<i32> = (a..=b).collect();
        (
            all.iter()
                .filter(|e| *e % every == 0)
                .map(|e| 2f64.powi(*e))
                .collect(),
            all.iter()
                .filter(|e| *e % every != 0)
                .map(|e| 2f64.powi(*e))
                .collect(),
        )
    } else {
        let span = (hi / lo).log10();
        let mantissas: &[f64] = if span <= 1.0 {
            &[1.0, 2.0, 3.0, 5.0, 7.0]
        } else if span <= 2.5 {
            &[1.0, 2.0, 5.0]
        } else if span <= 5.0 {
            &[1.0, 3.0]
        } else {
            &[1.0]
        };
        let every = if span > 10.0 { 2 } else { 1 };
        let (d0, d1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
        let mut bold = Vec::new();
        let mut light = Vec::new();
        for d in d0..=d1 {
            let p = 10f64.powi(d);
            for m in 1..10 {
                let v = f64::from(m) * p;
                if mantissas.contains(&f64::from(m)) && d % every == 0 {
                    bold.push(v);
                } else if span <= 3.0 {
                    light.push(v);
                }
            }
        }
        (bold, light)
    };
    let bold: Vec<f64> = bold.into_iter().filter(within).collect();
    let light: Vec<f64> = light.into_iter().filter(within).collect();
    if bold.len() >= 3 {
        return (bold, light);
    }
    // A narrow range: round values evenly spaced.
    let raw = (hi - lo) / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|st| *st >= raw)
        .unwrap_or(10.0 * mag);
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi && out.len() < 20 {
        out.push(v);
        v += step;
    }
    (out, Vec::new())
}

/// `[lo, hi]` of `values` widened by 5 % (in log space on a log axis), or a
/// unit range around a lone value; `(1, 10)` / `(0, 1)` with no values.
fn pad(values: &[f64], scale: Scale) -> (f64, f64) {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    match scale {
        Scale::Linear => {
            if !lo.is_finite() {
                return (0.0, 1.0);
            }
            let span = if hi > lo { hi - lo } else { lo.abs().max(1.0) };
            (lo - 0.05 * span, hi + 0.05 * span)
        }
        Scale::Log => {
            if !lo.is_finite() {
                return (1.0, 10.0);
            }
            let (a, b) = (lo.log10(), hi.log10());
            let span = if b > a { b - a } else { 1.0 };
            (10f64.powf(a - 0.05 * span), 10f64.powf(b + 0.05 * span))
        }
    }
}

/// A heatmap of a value over two discrete parameters: one cell per pair
/// of values, darker for lower (better) values, the value printed in it.
#[derive(Debug, Clone)]
pub struct Heatmap {
    pub title: String,
    pub description: String,
    pub x_label: String,
    pub y_label: String,
    pub x_values: Vec<String>,
    pub y_values: Vec<String>,
    /// `cells[yi][xi]`: the value there, `None` where nothing was measured.
    pub cells: Vec<Vec<Option<f64>>>,
    /// How a cell's value is printed.
    pub cell_text: fn(f64) -> String,
}

impl Heatmap {
    pub fn svg(&self) -> Result<String, ChartError> {
        // Segmented integer coordinates include the range's end: 0..n-1
        // is n cells.
        let nx = self.x_values.len().max(1) as i32;
        let ny = self.y_values.len().max(1) as i32;
        let cell_w = (720 / nx).clamp(24, 90);
        let cell_h = (320 / ny).clamp(18, 44);
        let width = (cell_w * nx + 140) as u32;
        let height = (cell_h * ny + 140) as u32;
        let values: Vec<f64> = self
            .cells
            .iter()
            .flatten()
            .flatten()
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mut buf = String::new();
        let drawn = (|| -> Result<(), String> {
            let root = SVGBackend::with_string(&mut buf, (width, height)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| e.to_string())?;
            let mut chart = ChartBuilder::on(&root)
                .caption(&self.title, (FONT, 18))
                .margin(12)
                .x_label_area_size(48)
                .y_label_area_size(72)
                .build_cartesian_2d((0..nx - 1).into_segmented(), (0..ny - 1).into_segmented())
                .map_err(|e| e.to_string())?;
            let label = |vals: &[String], v: &SegmentValue<i32>| match v {
                SegmentValue::CenterOf(i) => vals.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            };
            let xl = |v: &SegmentValue<i32>| label(&self.x_values, v);
            let yl = |v: &SegmentValue<i32>| label(&self.y_values, v);
            chart
                .configure_mesh()
                .disable_mesh()
                .x_desc(self.x_label.as_str())
                .y_desc(self.y_label.as_str())
                .x_labels(nx as usize)
                .y_labels(ny as usize)
                .x_label_formatter(&xl)
                .y_label_formatter(&yl)
                .axis_desc_style((FONT, 15))
                .label_style((FONT, 13))
                .draw()
                .map_err(|e| e.to_string())?;
            for (yi, row) in self.cells.iter().enumerate() {
                for (xi, cell) in row.iter().enumerate() {
                    self.draw_cell(&mut chart, (xi, yi), *cell, (lo, hi))?;
                }
            }
            root.present().map_err(|e| e.to_string())?;
            Ok(())
        })();
        drawn.map_err(|why| ChartError {
            title: self.title.clone(),
            why,
        })?;
        Ok(accessible(&buf, &self.title, &self.description))
    }

    /// One cell: its shade (none where nothing was measured), its border
    /// and its value, printed in a colour that reads on the shade.
    fn draw_cell(
        &self,
        chart: &mut Plot<'_, '_, Segments, Segments>,
        (xi, yi): (usize, usize),
        cell: Option<f64>,
        (lo, hi): (f64, f64),
    ) -> Result<(), String> {
        let (xi, yi) = (xi as i32, yi as i32);
        let corners = [
            (SegmentValue::Exact(xi), SegmentValue::Exact(yi + 1)),
            (SegmentValue::Exact(xi + 1), SegmentValue::Exact(yi)),
        ];
        let (fill, text) = match cell {
            Some(v) if v.is_finite() => {
                // 0 = best (darkest) .. 1 = worst, on a log scale:
                // times differ by factors.
                let t = if hi > lo {
                    (v / lo).ln() / (hi / lo).ln()
                } else {
                    0.0
                };
                (shade(t), Some((self.cell_text)(v)))
            }
            _ => (RGBColor(255, 255, 255), None),
        };
        chart
            .draw_series(std::iter::once(Rectangle::new(
                corners.clone(),
                fill.filled(),
            )))
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                corners,
                ShapeStyle {
                    color: RGBColor(200, 200, 200).to_rgba(),
                    filled: false,
                    stroke_width: 1,
                },
            )))
            .map_err(|e| e.to_string())?;
        let text_color = if fill.0 as u32 + fill.1 as u32 + fill.2 as u32 > 400 {
            BLACK
        } else {
            WHITE
        };
        let text = text.unwrap_or_else(|| "-".into());
        chart
            .draw_series(std::iter::once(Text::new(
                text,
                (SegmentValue::CenterOf(xi), SegmentValue::CenterOf(yi)),
                TextStyle::from((FONT, 12).into_font())
                    .color(&text_color)
                    .pos(plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Center,
                        plotters::style::text_anchor::VPos::Center,
                    )),
            )))
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// Dark blue for the best cells fading to a light yellow for the worst:
/// light-to-dark in one hue family stays ordered when printed in grey.
fn shade(t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0);
    let (a, b) = ((8.0, 48.0, 107.0), (255.0, 247.0, 188.0));
    let mix = |p: f64, q: f64| (p + (q - p) * t).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Adds `role="img"`, `<title>` and `<desc>` to plotters' SVG, and lets
/// the page scale it (the viewBox keeps its proportions).
fn accessible(svg: &str, title: &str, description: &str) -> String {
    let Some(end) = svg.find('>') else {
        return svg.to_string();
    };
    let mut out = String::with_capacity(svg.len() + 256);
    out.push_str(&svg[..end]);
    out.push_str(r#" role="img" font-family="sans-serif""#);
    out.push('>');
    let _ = write!(
        out,
        "\n<title>{}</title>\n<desc>{}</desc>",
        escape(title),
        escape(description)
    );
    out.push_str(&svg[end + 1..]);
    out
}

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
