//! Candidate implementations for restored copies: built as a position-
//! independent shared object that a copy dlopen()s, and verified against the
//! application's own code on the image's data.

use crate::error::{io_err, CheckpointError, Result};
use crate::restore::{Candidate, OutputLayout};
use std::path::{Path, PathBuf};

/// How to build one candidate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CandidateSource {
    /// The C file implementing the routine (same name and signature as the
    /// function the application passes to TDG_ROUTINE).
    pub implementation: PathBuf,
    /// More C files linked into the same shared object.
    pub extra: Vec<PathBuf>,
    pub cflags: Vec<String>,
    /// `-D NAME=VALUE` (the tuned parameters among them).
    pub defines: Vec<(String, String)>,
    /// C compiler (None: $CC, cc, gcc, clang).
    pub cc: Option<String>,
}

/// Build `source` into `dir/<name>.so`.
///
/// `-fPIC -shared` so the copy can load it anywhere; `-Wl,-Bsymbolic` so the
/// candidate's calls to its own functions (a recursive sort calling itself)
/// bind to the candidate, not to the application's exported function of the
/// same name. Undefined symbols are allowed here and resolved at dlopen
/// against the application, which exports them when linked with -rdynamic.
pub fn build_candidate(source: &CandidateSource, dir: &Path, name: &str) -> Result<Candidate> {
    for f in std::iter::once(&source.implementation).chain(&source.extra) {
        if !f.is_file() {
            return Err(CheckpointError::InvalidRequest(format!(
                "{}: no such file; pass the C file that implements the routine",
                f.display()
            )));
        }
    }
    let cc = toolchain::CCompiler::find(source.cc.as_deref())?;
    let output = dir.join(format!("{name}.so"));
    let mut cflags = source.cflags.clone();
    cflags.extend(["-fPIC", "-shared", "-Wl,-Bsymbolic"].map(String::from));
    let include_dirs = source
        .implementation
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| vec![p.to_path_buf()])
        .unwrap_or_default();
    let job = toolchain::CompileJob {
        sources: std::iter::once(source.implementation.clone())
            .chain(source.extra.iter().cloned())
            .collect(),
        output: output.clone(),
        cflags,
        defines: source
            .defines
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect(),
        include_dirs,
        ..Default::default()
    };
    cc.compile(&job).map_err(|e| match e {
        // The compiler's own diagnostics, verbatim, as `tdg run` shows them.
        toolchain::ToolchainError::BuildFailed { stderr, .. } => CheckpointError::CandidateBuild {
            file: source.implementation.clone(),
            stderr,
        },
        other => other.into(),
    })?;
    // The copy needs an absolute path: it runs with the original's cwd.
    Ok(Candidate {
        shared_object: output
            .canonicalize()
            .map_err(io_err(format!("cannot resolve {}", output.display())))?,
        source: source.implementation.clone(),
    })
}

/// Where a candidate's outputs first differ from the original's.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Mismatch {
    pub output: usize,
    pub element: u64,
    pub original: String,
    pub candidate: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "output {} element {}: original {}, candidate {}",
            self.output, self.element, self.original, self.candidate
        )
    }
}

/// Compare two copies' outputs element by element: integers and bytes
/// exactly, floating point within `tolerance` relative to the original's
/// magnitude (absolute near zero), like a driver's verification.
pub fn compare_outputs(
    layout: &[OutputLayout],
    original: &[u8],
    candidate: &[u8],
    tolerance: f64,
) -> Option<Mismatch> {
    let mut at = 0usize;
    for (i, o) in layout.iter().enumerate() {
        let size = o.elem_size as usize;
        for e in 0..o.count {
            let (a, b) = (original.get(at..at + size), candidate.get(at..at + size));
            at += size;
            let (Some(a), Some(b)) = (a, b) else {
                return Some(Mismatch {
                    output: i,
                    element: e,
                    original: "(missing)".into(),
                    candidate: "(missing)".into(),
                });
            };
            if !element_equal(a, b, o.kind, tolerance) {
                return Some(Mismatch {
                    output: i,
                    element: e,
                    original: render_element(a, o.kind),
                    candidate: render_element(b, o.kind),
                });
            }
        }
    }
    None
}

const KIND_SIGNED: u32 = 1;
const KIND_UNSIGNED: u32 = 2;
const KIND_FLOAT: u32 = 3;

fn as_float(bytes: &[u8]) -> Option<f64> {
    match bytes.len() {
        4 => Some(f32::from_ne_bytes(bytes.try_into().ok()?) as f64),
        8 => Some(f64::from_ne_bytes(bytes.try_into().ok()?)),
        _ => None,
    }
}

fn element_equal(a: &[u8], b: &[u8], kind: u32, tolerance: f64) -> bool {
    if a == b {
        return true;
    }
    match (kind, as_float(a), as_float(b)) {
        (KIND_FLOAT, Some(x), Some(y)) => {
            if x.is_nan() || y.is_nan() {
                return x.is_nan() && y.is_nan();
            }
            (x - y).abs() <= tolerance * x.abs().max(1.0)
        }
        _ => false,
    }
}

fn render_element(bytes: &[u8], kind: u32) -> String {
    let int = |signed: bool| -> Option<String> {
        let mut buf = [0u8; 8];
        if bytes.len() > 8 {
            return None;
        }
        buf[..bytes.len()].copy_from_slice(bytes);
        let u = u64::from_le_bytes(buf);
        if signed {
            let shift = 64 - 8 * bytes.len() as u32;
            Some((((u << shift) as i64) >> shift).to_string())
        } else {
            Some(u.to_string())
        }
    };
    let text = match kind {
        KIND_SIGNED => int(true),
        KIND_UNSIGNED => int(false),
        KIND_FLOAT => as_float(bytes).map(|x| format!("{x:e}")),
        _ => None,
    };
    text.unwrap_or_else(|| bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn longs(v: &[i64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn first_differing_element_is_named() {
        let layout = [OutputLayout {
            count: 4,
            elem_size: 8,
            kind: KIND_SIGNED,
        }];
        let a = longs(&[1, 2, 3, 4]);
        assert_eq!(compare_outputs(&layout, &a, &a, 0.0), None);
        let m = compare_outputs(&layout, &a, &longs(&[1, 2, -7, 4]), 0.0).unwrap();
        assert_eq!((m.output, m.element), (0, 2));
        assert_eq!((m.original.as_str(), m.candidate.as_str()), ("3", "-7"));
    }

    #[test]
    fn floats_compare_within_the_tolerance() {
        let layout = [OutputLayout {
            count: 2,
            elem_size: 8,
            kind: KIND_FLOAT,
        }];
        let f = |v: &[f64]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
        let a = f(&[1.0, 100.0]);
        assert_eq!(
            compare_outputs(&layout, &a, &f(&[1.0, 100.0 + 1e-9]), 1e-9),
            None
        );
        let m = compare_outputs(&layout, &a, &f(&[1.0, 100.1]), 1e-6).unwrap();
        assert_eq!(m.element, 1);
        // A truncated outputs file is a mismatch, not a panic.
        assert!(compare_outputs(&layout, &a, &a[..8], 1e-6).is_some());
    }
}
