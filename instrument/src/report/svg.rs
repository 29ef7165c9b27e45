//! The per-call timeline plot `tdg profile report --svg` writes.

use super::Report;
use std::fmt::Write as _;

const PALETTE: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

/// Per-call time (log scale) over call index, coloured by context rank;
/// hand-written because a scatter plot is a few dozen lines of SVG and a
/// plotting crate would be the largest dependency of the workspace.
pub fn render_svg(report: &Report) -> String {
    const W: f64 = 900.0;
    const H: f64 = 420.0;
    const L: f64 = 70.0;
    const R: f64 = 180.0;
    const T: f64 = 40.0;
    const B: f64 = 50.0;
    let pts = &report.timeline;
    let max_points = 20_000usize;
    let stride = pts.len().div_ceil(max_points).max(1);
    let lo = pts
        .iter()
        .map(|p| p.0)
        .fold(f64::INFINITY, f64::min)
        .max(0.1);
    let hi = pts
        .iter()
        .map(|p| p.0)
        .fold(0.0f64, f64::max)
        .max(lo * 10.0);
    let (llo, lhi) = (lo.log10().floor(), hi.log10().ceil());
    let n = pts.len().max(2) as f64;
    let x = |i: usize| L + (i as f64) / (n - 1.0) * (W - L - R);
    let y = |ns: f64| {
        let v = ns.max(0.1).log10();
        T + (1.0 - (v - llo) / (lhi - llo)) * (H - T - B)
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let title = if stride > 1 {
        format!(
            "{}: time per call over call index (every {stride}th of {} calls)",
            report.routine,
            pts.len()
        )
    } else {
        format!("{}: time per call over call index", report.routine)
    };
    let _ = writeln!(
        s,
        r#"<text x="{L}" y="22" font-size="14">{}</text>"#,
        xml_escape(&title)
    );
    let _ = writeln!(
        s,
        r#"<line x1="{L}" y1="{0}" x2="{1}" y2="{0}" stroke="black"/><line x1="{L}" y1="{T}" x2="{L}" y2="{0}" stroke="black"/>"#,
        H - B,
        W - R
    );
    let mut e = llo as i32;
    while e as f64 <= lhi {
        let ns = 10f64.powi(e);
        let yy = y(ns);
        let _ = writeln!(
            s,
            r##"<line x1="{L}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - R,
            L - 6.0,
            yy + 4.0,
            stats::ns(ns)
        );
        e += 1;
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">call index (0 .. {})</text>"#,
        (L + W - R) / 2.0,
        H - 15.0,
        pts.len().saturating_sub(1)
    );
    for (i, &(ns, rank)) in pts.iter().enumerate().step_by(stride) {
        let color = PALETTE
            .get(rank.wrapping_sub(1))
            .copied()
            .unwrap_or("#999999");
        let _ = writeln!(
            s,
            r#"<circle cx="{:.1}" cy="{:.1}" r="1.6" fill="{color}"/>"#,
            x(i),
            y(ns)
        );
    }
    for (k, c) in report.contexts.iter().take(PALETTE.len()).enumerate() {
        let ly = T + 10.0 + 18.0 * k as f64;
        let _ = writeln!(
            s,
            r#"<circle cx="{:.1}" cy="{ly:.1}" r="4" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            W - R + 15.0,
            PALETTE[k],
            W - R + 24.0,
            ly + 4.0,
            xml_escape(&truncate(&c.label(), 24))
        );
    }
    if report.contexts.len() > PALETTE.len() {
        let ly = T + 10.0 + 18.0 * PALETTE.len() as f64;
        let _ = writeln!(
            s,
            r##"<circle cx="{:.1}" cy="{ly:.1}" r="4" fill="#999999"/><text x="{:.1}" y="{:.1}">other contexts</text>"##,
            W - R + 15.0,
            W - R + 24.0,
            ly + 4.0
        );
    }
    s.push_str("</svg>\n");
    s
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
