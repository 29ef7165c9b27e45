//! The page: one HTML document with its styles and plots inline, so it
//! opens from a file on a machine with no network. Sections are plain
//! HTML (headings, tables, figures with captions); the only script is the
//! watch mode's reload, which keeps the reader's scroll position.

use crate::chart::escape;
use std::fmt::Write as _;

/// A part of the page: one input (or one group of inputs compared).
#[derive(Debug, Clone)]
pub struct Section {
    /// Unique on the page; figures' ids start with it.
    pub id: String,
    /// What kind of input it shows (`campaign`, `profile`, ...).
    pub kind: &'static str,
    pub heading: String,
    pub body: String,
}

/// How the page is put together.
#[derive(Debug, Clone, Default)]
pub struct PageOptions {
    pub title: String,
    /// Reload every this many seconds (`tdg report --watch`).
    pub reload_s: Option<u32>,
    /// When it was generated (ISO 8601) and by what.
    pub generated: String,
}

const STYLE: &str = r#"
:root { color-scheme: light; }
body { font-family: sans-serif; margin: 0 auto; max-width: 1100px; padding: 0 1.2em 3em; color: #111; background: #fff; line-height: 1.4; }
header { border-bottom: 2px solid #0072b2; margin-bottom: 1em; }
h1 { font-size: 1.6em; margin: 0.8em 0 0.2em; }
h2 { font-size: 1.35em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.1em; margin-top: 1.6em; }
p.meta, .note { color: #444; font-size: 0.92em; }
nav ul { padding-left: 1.2em; margin: 0.3em 0 1em; }
figure { margin: 1.2em 0; }
.figure-row { display: flex; flex-wrap: wrap; gap: 0 1.5em; }
.figure-row figure { flex: 0 1 540px; }
figure svg { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #333; margin-top: 0.3em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
caption { text-align: left; padding-bottom: 0.3em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #eef3f8; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.best td { font-weight: bold; background: #f3f8ee; }
tr.failed td { color: #8a1c00; }
details summary { cursor: pointer; margin: 0.6em 0; }
code { font-size: 0.95em; }
.verdict-yes { color: #006b4f; font-weight: bold; }
.verdict-no { color: #555; }
@media print {
  body { max-width: none; }
  details { display: block; }
  figure, table { break-inside: avoid; }
  nav, .reload { display: none; }
}
"#;

/// Scroll position survives the reload, so a reader watching one plot
/// keeps it in view.
const RELOAD: &str = r#"
(function () {
  var key = 'tdg-report-scroll:' + location.pathname;
  var y = sessionStorage.getItem(key);
  if (y !== null) { window.scrollTo(0, parseInt(y, 10)); }
  setTimeout(function () {
    sessionStorage.setItem(key, String(window.scrollY));
    location.reload();
  }, SECONDS * 1000);
})();
"#;

/// The whole page.
pub fn page(opts: &PageOptions, sections: &[Section]) -> String {
    let mut s = String::with_capacity(64 * 1024);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"tdg {}\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        env!("CARGO_PKG_VERSION"),
        escape(&opts.title)
    );
    let _ = write!(
        s,
        "<header>\n<h1>{}</h1>\n<p class=\"meta\">{}</p>\n",
        escape(&opts.title),
        escape(&opts.generated)
    );
    if let Some(secs) = opts.reload_s {
        let _ = writeln!(
            s,
            "<p class=\"meta reload\" id=\"reload\" data-seconds=\"{secs}\">Watching: this page reloads every {secs} s while the campaign runs.</p>"
        );
    }
    if sections.len() > 1 {
        s.push_str("<nav aria-label=\"contents\"><ul>\n");
        for sec in sections {
            let _ = writeln!(
                s,
                "<li><a href=\"#{}\">{}</a></li>",
                sec.id,
                escape(&sec.heading)
            );
        }
        s.push_str("</ul></nav>\n");
    }
    s.push_str("</header>\n<main>\n");
    for sec in sections {
        let _ = write!(
            s,
            "<section id=\"{}\" data-kind=\"{}\">\n<h2>{}</h2>\n{}\n</section>\n",
            sec.id,
            sec.kind,
            escape(&sec.heading),
            sec.body
        );
    }
    s.push_str("</main>\n");
    if let Some(secs) = opts.reload_s {
        let _ = writeln!(
            s,
            "<script>{}</script>",
            RELOAD.replace("SECONDS", &secs.to_string())
        );
    }
    s.push_str("</body>\n</html>\n");
    s
}

/// A figure: the chart's SVG and a caption saying how to read it.
pub fn figure(id: &str, chart: &str, svg: &str, caption: &str) -> String {
    format!(
        "<figure id=\"{id}\" data-chart=\"{chart}\">\n{svg}<figcaption>{}</figcaption>\n</figure>\n",
        escape(caption)
    )
}

/// A cell of a table.
pub enum Cell {
    Text(String),
    /// Right-aligned (numbers).
    Num(String),
    /// Already HTML.
    Html(String),
}

impl Cell {
    pub fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }
    pub fn num(s: impl Into<String>) -> Cell {
        Cell::Num(s.into())
    }
}

/// A table with a header row; `row_class` marks rows (`best`, `failed`).
pub fn table(id: &str, caption: &str, headers: &[&str], rows: &[(Vec<Cell>, &str)]) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<table id=\"{id}\">\n<caption class=\"note\">{}</caption>\n<thead><tr>",
        escape(caption)
    );
    for h in headers {
        let _ = write!(s, "<th scope=\"col\">{}</th>", escape(h));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for (cells, class) in rows {
        if class.is_empty() {
            s.push_str("<tr>");
        } else {
            let _ = write!(s, "<tr class=\"{class}\">");
        }
        for c in cells {
            match c {
                Cell::Text(t) => {
                    let _ = write!(s, "<td>{}</td>", escape(t));
                }
                Cell::Num(t) => {
                    let _ = write!(s, "<td class=\"num\">{}</td>", escape(t));
                }
                Cell::Html(h) => {
                    let _ = write!(s, "<td>{h}</td>");
                }
            }
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table>\n");
    s
}

/// A paragraph of plain text.
pub fn para(text: &str) -> String {
    format!("<p>{}</p>\n", escape(text))
}

/// A note in smaller type.
pub fn note(text: &str) -> String {
    format!("<p class=\"note\">{}</p>\n", escape(text))
}

/// A definition list of (term, value) facts.
pub fn facts(items: &[(&str, String)]) -> String {
    let mut s = String::from("<table class=\"facts\">\n<tbody>\n");
    for (k, v) in items {
        let _ = writeln!(
            s,
            "<tr><th scope=\"row\">{}</th><td>{}</td></tr>",
            escape(k),
            escape(v)
        );
    }
    s.push_str("</tbody>\n</table>\n");
    s
}
