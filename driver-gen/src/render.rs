//! Driver model -> C files through the handlebars templates in `templates/`
//! (embedded at build time; a directory given at run time overrides any of
//! them, so drivers can be reshaped without rebuilding tdg).

use handlebars::{handlebars_helper, Handlebars};
use std::path::{Path, PathBuf};

use crate::model::{
    CacheState, CallText, DriverModel, FlopPlan, FlushPlan, MacroDefault, OperandModel,
    OverflowGuard, RoutineModel, SamplingPlan, ScalarKind, ScalarModel, Storage, TimingPlan,
    VerifyPlan,
};
use serde::Serialize;
use spec_lang::ast::Selection;
use spec_lang::vocabulary::Keyword;

/// What the templates read, and the only thing serialised for them: the
/// model's plain data, with its enums spelled (keyword and C constant) and
/// the booleans `{{#if}}` needs. The model holds the decisions (typed);
/// this view only lays them out.
#[derive(Serialize)]
struct DriverView<'a> {
    routine: &'a RoutineModel,
    includes: &'a [String],
    macros: &'a [MacroDefault],
    scalars: Vec<ScalarView<'a>>,
    operands: Vec<OperandView<'a>>,
    flush: FlushView<'a>,
    timing: TimingView<'a>,
    /// Where the driver's option defaults read the budget.
    sampling: &'a SamplingPlan,
    guard: &'a OverflowGuard,
    verify: &'a Option<VerifyPlan>,
    flop: &'a Option<FlopPlan>,
    calls: &'a CallText,
    per_call_scalars: bool,
    json_version: u32,
}

#[derive(Serialize)]
struct ScalarView<'a> {
    #[serde(flatten)]
    scalar: &'a ScalarModel,
    is_range: bool,
    is_random: bool,
}

#[derive(Serialize)]
struct OperandView<'a> {
    #[serde(flatten)]
    operand: &'a OperandModel,
    warm: bool,
    flushed: bool,
    is_static: bool,
    row_pointers: bool,
}

#[derive(Serialize)]
struct FlushView<'a> {
    #[serde(flatten)]
    plan: &'a FlushPlan,
    method: &'static str,
    method_c: &'static str,
}

#[derive(Serialize)]
struct TimingView<'a> {
    #[serde(flatten)]
    plan: &'a TimingPlan,
    method: &'static str,
    method_c: &'static str,
    selection: &'static str,
    selection_median: bool,
}

impl<'a> DriverView<'a> {
    fn of(m: &'a DriverModel) -> Self {
        DriverView {
            routine: &m.routine,
            includes: &m.includes,
            macros: &m.macros,
            scalars: m
                .scalars
                .iter()
                .map(|s| ScalarView {
                    scalar: s,
                    is_range: matches!(s.kind, ScalarKind::Range { .. }),
                    is_random: matches!(s.kind, ScalarKind::Random { .. }),
                })
                .collect(),
            operands: m
                .operands
                .iter()
                .map(|o| OperandView {
                    operand: o,
                    warm: o.cache == CacheState::Warm,
                    flushed: o.flushed(),
                    is_static: o.storage == Storage::Static,
                    row_pointers: o.storage == Storage::RowPointers,
                })
                .collect(),
            flush: FlushView {
                plan: &m.flush,
                method: m.flush.method.spelling(),
                method_c: m.flush.method.c_name(),
            },
            timing: TimingView {
                plan: &m.timing,
                method: m.timing.method.spelling(),
                method_c: m.timing.method.c_name(),
                selection: m.timing.selection.spelling(),
                selection_median: m.timing.selection == Selection::Median,
            },
            sampling: &m.timing.sampling,
            guard: &m.guard,
            verify: &m.verify,
            flop: &m.flop,
            calls: &m.calls,
            per_call_scalars: m.per_call_scalars,
            json_version: m.json_version,
        }
    }
}

/// (template file, output file, embedded text)
const TEMPLATES: &[(&str, &str, &str)] = &[
    (
        "driver.c.hbs",
        "driver.c",
        include_str!("../../templates/driver.c.hbs"),
    ),
    (
        "tdg_runtime.h.hbs",
        "tdg_runtime.h",
        include_str!("../../templates/tdg_runtime.h.hbs"),
    ),
    (
        "tdg_runtime.c.hbs",
        "tdg_runtime.c",
        include_str!("../../templates/tdg_runtime.c.hbs"),
    ),
    (
        "Makefile.hbs",
        "Makefile",
        include_str!("../../templates/Makefile.hbs"),
    ),
];

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("cannot read template {path}: {source}; check --templates (it must hold {names})")]
    ReadTemplate {
        path: PathBuf,
        names: String,
        #[source]
        source: std::io::Error,
    },
    #[error("template {name} does not parse: {message}")]
    Parse { name: String, message: String },
    #[error("template {name} failed to render: {message}")]
    Render { name: String, message: String },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The rendered files of one driver.
#[derive(Debug, Clone)]
pub struct GeneratedDriver {
    /// (file name, contents): driver.c, tdg_runtime.h, tdg_runtime.c, Makefile.
    pub files: Vec<(String, String)>,
}

impl GeneratedDriver {
    pub fn file(&self, name: &str) -> Option<&str> {
        self.files
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c.as_str())
    }

    pub fn write_to(&self, dir: &Path) -> Result<Vec<PathBuf>, RenderError> {
        std::fs::create_dir_all(dir).map_err(|source| RenderError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut out = Vec::new();
        for (name, text) in &self.files {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|source| RenderError::Write {
                path: path.clone(),
                source,
            })?;
            out.push(path);
        }
        Ok(out)
    }
}

handlebars_helper!(contains: |list: array, item: str| list.iter().any(|v| v.as_str() == Some(item)));

/// Renders every template for `model`. With `templates_dir`, a template
/// present there replaces the embedded one of the same name.
pub fn render(
    model: &DriverModel,
    templates_dir: Option<&Path>,
) -> Result<GeneratedDriver, RenderError> {
    let mut hb = Handlebars::new();
    hb.register_escape_fn(handlebars::no_escape);
    hb.set_strict_mode(true);
    hb.register_helper("contains", Box::new(contains));
    let names = TEMPLATES.iter().map(|t| t.0).collect::<Vec<_>>().join(", ");
    for (tpl, _, embedded) in TEMPLATES {
        let text = match templates_dir {
            Some(dir) if dir.join(tpl).exists() => {
                let path = dir.join(tpl);
                std::fs::read_to_string(&path).map_err(|source| RenderError::ReadTemplate {
                    path,
                    names: names.clone(),
                    source,
                })?
            }
            Some(dir) if !dir.is_dir() => {
                return Err(RenderError::ReadTemplate {
                    path: dir.to_path_buf(),
                    names,
                    source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
                })
            }
            _ => embedded.to_string(),
        };
        hb.register_template_string(tpl, text)
            .map_err(|e| RenderError::Parse {
                name: tpl.to_string(),
                message: e.to_string(),
            })?;
    }
    let view = DriverView::of(model);
    let mut files = Vec::new();
    for (tpl, out, _) in TEMPLATES {
        let text = hb.render(tpl, &view).map_err(|e| RenderError::Render {
            name: tpl.to_string(),
            message: e.to_string(),
        })?;
        files.push((out.to_string(), text));
    }
    Ok(GeneratedDriver { files })
}
