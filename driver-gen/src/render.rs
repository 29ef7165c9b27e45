//! Driver model -> C files through the handlebars templates in `templates/`
//! (embedded at build time; a directory given at run time overrides any of
//! them, so drivers can be reshaped without rebuilding tdg).

use handlebars::{handlebars_helper, Handlebars};
use std::path::{Path, PathBuf};

use crate::model::DriverModel;

/// What the templates read: the model (whose derived flags, such as
/// `flush.any_operand_flushed`, are decided once when it is built) and the
/// sampling defaults every driver is built with.
#[derive(serde::Serialize)]
struct DriverView<'a> {
    #[serde(flatten)]
    model: &'a DriverModel,
    sampling: SamplingDefaults,
}

/// When a driver stops taking samples, unless its flags say otherwise.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SamplingDefaults {
    /// Samples are spread over at least this much wall time: this kind of
    /// machine alternates between a fast and a slow state for stretches of
    /// milliseconds to seconds, and a minimum over a fraction of a
    /// millisecond is whichever state that moment offered.
    pub min_time_ms: u32,
    /// Sampling stops here even if the figure has not settled; the result
    /// is then marked unstable. With set-up and verification a default
    /// driver process stays under half a second.
    pub max_time_ms: u32,
    /// The estimator over the first and the second half of the samples must
    /// agree within this relative difference (per cent).
    pub tolerance_pct: f64,
}

/// The defaults every generated driver is built with.
pub const SAMPLING: SamplingDefaults = SamplingDefaults {
    min_time_ms: 100,
    max_time_ms: 250,
    tolerance_pct: 0.5,
};

impl<'a> DriverView<'a> {
    fn of(model: &'a DriverModel) -> Self {
        DriverView {
            model,
            sampling: SAMPLING,
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
