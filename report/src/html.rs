//! The page: one HTML document with its styles and plots inline, so it
//! opens from a file on a machine with no network. Sections are small
//! typed views (headings, facts, tables, figures with captions, notes) that
//! the templates in `report/templates/` lay out; the only script is the
//! watch mode's reload, which keeps the reader's scroll position.

use crate::chart::escape;
pub use crate::chart::shortened;
use handlebars::Handlebars;
use serde::Serialize;
use std::sync::OnceLock;

/// A part of the page: one input (or one group of inputs compared).
#[derive(Debug, Clone, Serialize)]
pub struct Section {
    /// Unique on the page; figures' ids start with it.
    pub id: String,
    /// What kind of input it shows (`campaign`, `profile`, ...).
    pub kind: &'static str,
    pub heading: String,
    /// What the section shows, in order.
    pub blocks: Vec<Block>,
}

/// One piece of a section, as the page lays it out.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Block {
    /// A sub-heading (`<h3>`), with an anchor when it has an id.
    Heading {
        text: String,
        id: Option<String>,
    },
    /// (term, value) facts.
    Facts(Vec<Fact>),
    Table(Table),
    Figure(Figure),
    /// Figures side by side (and the notes of those not drawn).
    FigureRow {
        blocks: Vec<Block>,
    },
    /// A paragraph of plain text.
    Para(String),
    /// A note in smaller type.
    Note(String),
    /// Blocks folded under a summary line.
    Details {
        summary: String,
        blocks: Vec<Block>,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct Fact {
    pub term: String,
    pub value: String,
}

/// A table with a header row.
#[derive(Debug, Clone, Serialize)]
pub struct Table {
    pub id: String,
    pub caption: String,
    pub headers: Vec<String>,
    pub rows: Vec<Row>,
}

/// A row of a table; `class` marks it (`best`, `failed`) or is empty.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub cells: Vec<Cell>,
    pub class: String,
}

/// A figure: a chart's SVG and a caption saying how to read it.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub id: String,
    /// What kind of chart (the figure's `data-chart`).
    pub chart: String,
    pub svg: String,
    pub caption: String,
}

/// A cell of a table.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub text: String,
    /// Right-aligned (numbers).
    pub num: bool,
    /// `text` is already HTML.
    pub raw: bool,
}

impl Cell {
    pub fn text(s: impl Into<String>) -> Cell {
        Cell {
            text: s.into(),
            num: false,
            raw: false,
        }
    }
    pub fn num(s: impl Into<String>) -> Cell {
        Cell {
            num: true,
            ..Cell::text(s)
        }
    }
    /// Already HTML (a verdict's coloured span).
    pub fn html(s: impl Into<String>) -> Cell {
        Cell {
            raw: true,
            ..Cell::text(s)
        }
    }
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

/// What the page template reads.
#[derive(Serialize)]
struct PageView<'a> {
    version: &'static str,
    title: &'a str,
    generated: &'a str,
    reload_s: Option<u32>,
    /// A table of contents when there is more than one section.
    nav: bool,
    sections: &'a [Section],
}

fn templates() -> &'static Handlebars<'static> {
    static HB: OnceLock<Handlebars<'static>> = OnceLock::new();
    HB.get_or_init(|| {
        let mut hb = Handlebars::new();
        // The page's escaping: the same as its plots' text.
        hb.register_escape_fn(escape);
        for (name, text) in [
            ("page", include_str!("../templates/page.html.hbs")),
            ("blocks", include_str!("../templates/blocks.html.hbs")),
            ("figure", include_str!("../templates/figure.html.hbs")),
            ("style", include_str!("../templates/style.css")),
            ("reload", include_str!("../templates/reload.js")),
        ] {
            hb.register_template_string(name, text)
                .unwrap_or_else(|e| panic!("report template {name}: {e}"));
        }
        hb
    })
}

/// The whole page.
pub fn page(opts: &PageOptions, sections: &[Section]) -> String {
    let view = PageView {
        version: env!("CARGO_PKG_VERSION"),
        title: &opts.title,
        generated: &opts.generated,
        reload_s: opts.reload_s,
        nav: sections.len() > 1,
        sections,
    };
    templates()
        .render("page", &view)
        .unwrap_or_else(|e| panic!("the report page template: {e}"))
}

/// A figure: the chart's SVG and a caption saying how to read it.
pub fn figure(id: &str, chart: &str, svg: &str, caption: &str) -> Block {
    Block::Figure(Figure {
        id: id.into(),
        chart: chart.into(),
        svg: svg.into(),
        caption: caption.into(),
    })
}

/// A table with a header row; `row_class` marks rows (`best`, `failed`).
pub fn table(id: &str, caption: &str, headers: &[&str], rows: Vec<(Vec<Cell>, &str)>) -> Block {
    Block::Table(Table {
        id: id.into(),
        caption: caption.into(),
        headers: headers.iter().map(|h| h.to_string()).collect(),
        rows: rows
            .into_iter()
            .map(|(cells, class)| Row {
                cells,
                class: class.into(),
            })
            .collect(),
    })
}

/// A sub-heading.
pub fn heading(text: impl Into<String>) -> Block {
    Block::Heading {
        text: text.into(),
        id: None,
    }
}

/// A paragraph of plain text.
pub fn para(text: &str) -> Block {
    Block::Para(text.into())
}

/// A note in smaller type.
pub fn note(text: &str) -> Block {
    Block::Note(text.into())
}

/// A definition list of (term, value) facts.
pub fn facts(items: &[(&str, String)]) -> Block {
    Block::Facts(
        items
            .iter()
            .map(|(term, value)| Fact {
                term: term.to_string(),
                value: value.clone(),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(blocks: Vec<Block>) -> Section {
        Section {
            id: "s-1".into(),
            kind: "runs",
            heading: "Runs <a&b>".into(),
            blocks,
        }
    }

    #[test]
    fn text_is_escaped_and_only_an_html_cell_is_not() {
        let page = page(
            &PageOptions::default(),
            &[one(vec![
                facts(&[("n <", "\"x\" & y".into())]),
                table(
                    "t",
                    "a < b",
                    &["h&"],
                    vec![(vec![Cell::num("1<2"), Cell::html("<b>ok</b>")], "best")],
                ),
                note("5 > 4"),
            ])],
        );
        assert!(page.contains("<h2>Runs &lt;a&amp;b&gt;</h2>"), "{page}");
        assert!(
            page.contains("<tr><th scope=\"row\">n &lt;</th><td>&quot;x&quot; &amp; y</td></tr>")
        );
        assert!(page.contains("<caption class=\"note\">a &lt; b</caption>"));
        assert!(page
            .contains("<tr class=\"best\"><td class=\"num\">1&lt;2</td><td><b>ok</b></td></tr>"));
        assert!(page.contains("<p class=\"note\">5 &gt; 4</p>"));
    }

    #[test]
    fn a_watched_page_reloads_and_several_sections_get_contents() {
        let watched = PageOptions {
            reload_s: Some(7),
            ..PageOptions::default()
        };
        let page = page(&watched, &[one(vec![]), one(vec![])]);
        assert!(page.contains("data-seconds=\"7\""), "{page}");
        assert!(page.contains("}, 7 * 1000);"), "{page}");
        assert!(page.contains("<nav aria-label=\"contents\"><ul>\n<li><a href=\"#s-1\">"));
        let still = super::page(&PageOptions::default(), &[one(vec![])]);
        assert!(
            !still.contains("<script>") && !still.contains("<nav"),
            "{still}"
        );
    }

    #[test]
    fn details_and_figure_rows_hold_blocks() {
        let fig = figure("f", "kind", "<svg></svg>", "read it so");
        let page = page(
            &PageOptions::default(),
            &[one(vec![
                Block::FigureRow {
                    blocks: vec![fig.clone(), note("not drawn")],
                },
                Block::Details {
                    summary: "All (2)".into(),
                    blocks: vec![para("inside")],
                },
            ])],
        );
        assert!(page.contains("<div class=\"figure-row\">\n<figure id=\"f\" data-chart=\"kind\">\n<svg></svg><figcaption>read it so</figcaption>\n</figure>\n<p class=\"note\">not drawn</p>\n</div>\n"), "{page}");
        assert!(
            page.contains("<details>\n<summary>All (2)</summary>\n<p>inside</p>\n</details>\n"),
            "{page}"
        );
    }
}
