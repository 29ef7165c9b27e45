//! Generated interposers, committed: `tests/golden/` holds what the
//! templates in `instrument/c/` render for two specs (the profiling shim and
//! `--wrap` object for `cblas_dgemm`, and a region shim declaring every kind
//! of output), so a template or view change shows up in review as a diff of
//! the C a user gets.
//!
//! After an intended change: `TDG_BLESS=1 cargo test -p instrument --test interposer_golden`.

use instrument::interpose::{self, InterposerKind};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Outputs of every shape: a count with checked arithmetic and a NULL
/// check through member paths, a member itself, an array member, a
/// parameter's block counted by a member, and the call's result.
const REGION_SPEC: &str = "include=\"typedef struct cfg { int n; long m; } cfg;\";\ninclude=\"typedef struct node { struct node* next; cfg c; cfg* pc; unsigned* ptr; int origin; double arr[4]; } node;\";\nroutine=int walk(node* s, const int k, double* x);\nreturns(s->ptr[s->c.n * k + s->pc->m], s->origin, s->next->ptr[s->next->c.n], s->arr[4], x[s->c.n], walk);\n";

#[test]
fn generated_interposers_match_the_committed_ones() {
    let dgemm_src =
        std::fs::read_to_string(repo().join("instrument/examples/blas/cblas_dgemm.spec")).unwrap();
    let dgemm = spec_lang::check_source(&dgemm_src, "cblas_dgemm.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
        .unwrap();
    let region = spec_lang::check_source(REGION_SPEC, "walk.spec", &[])
        .and_then(|c| c.for_use(spec_lang::Use::Checkpoint))
        .unwrap();
    let generated = [
        (
            "cblas_dgemm-preload.c",
            interpose::generate(&dgemm, InterposerKind::Preload).unwrap(),
        ),
        (
            "cblas_dgemm-wrap.c",
            interpose::generate(&dgemm, InterposerKind::Wrap).unwrap(),
        ),
        (
            "walk-region.c",
            interpose::generate_region_shim(&region).unwrap(),
        ),
    ];
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    if std::env::var_os("TDG_BLESS").is_some_and(|v| v != "0") {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in &generated {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }
    let stale: Vec<&str> = generated
        .iter()
        .filter(|(name, text)| std::fs::read_to_string(dir.join(name)).unwrap_or_default() != *text)
        .map(|(name, _)| *name)
        .collect();
    assert!(
        stale.is_empty(),
        "generated interposers differ from instrument/tests/golden: {stale:?}; if the change is intended, refresh with `TDG_BLESS=1 cargo test -p instrument --test interposer_golden` and review the diff"
    );
}
