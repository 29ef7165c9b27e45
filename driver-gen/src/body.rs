//! What a run times and what it checks the outputs against. A spec whose
//! routine has a body `{ ... }` runs without `--impl`: the body, written as
//! a C file, is the implementation (bundled specs carry their kernels this
//! way); with `--impl` the body, or `--reference`, is what the outputs are
//! compared with.

use crate::{RunError, RunOptions};
use spec_lang::ast::Spec;
use std::path::{Path, PathBuf};

/// The routine's body as a C file, in a private scratch directory removed
/// when this is dropped.
pub struct BodyImplementation {
    _dir: fsguard::ScratchDir,
    path: PathBuf,
}

impl BodyImplementation {
    /// Writes the body of `spec`'s routine; `None` when it has none.
    pub fn write(spec: &Spec) -> std::io::Result<Option<BodyImplementation>> {
        let Some(text) = crate::render::body_as_implementation(spec) else {
            return Ok(None);
        };
        let dir = fsguard::scratch_dir("tdg-body")?;
        let path = dir.path().join(format!("{}.c", spec.routine.name.name));
        fsguard::write_atomic(&path, text.as_bytes())?;
        Ok(Some(BodyImplementation { _dir: dir, path }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The C file a run builds its driver against.
pub enum Implementation {
    /// The file the caller named (`--impl`).
    Given(PathBuf),
    /// The spec routine's body, kept on disk while this lives.
    Body(BodyImplementation),
}

impl Implementation {
    /// `given` when there is one, else the spec routine's body; a usage
    /// error when there is neither.
    pub fn choose(spec: &Spec, given: Option<&Path>) -> Result<Implementation, RunError> {
        if let Some(path) = given {
            return Ok(Implementation::Given(path.to_path_buf()));
        }
        match BodyImplementation::write(spec).map_err(RunError::Files)? {
            Some(body) => Ok(Implementation::Body(body)),
            None => Err(RunError::NoImplementation {
                routine: spec.routine.name.name.clone(),
            }),
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            Implementation::Given(path) => path,
            Implementation::Body(body) => body.path(),
        }
    }

    /// Settles what `o` verifies against, and the headers a body's
    /// `include=` lines name are looked for in the directory of the spec,
    /// `spec_path`. Checking the body against itself would prove nothing, so
    /// a body run without `o.reference` verifies nothing. Returns the line
    /// that tells the user when the outputs go unchecked.
    pub fn settle(&self, spec: &Spec, spec_path: &Path, o: &mut RunOptions) -> Option<String> {
        let routine = &spec.routine.name.name;
        if let Implementation::Body(_) = self {
            o.header_dir = Some(spec_lang::spec_dir(spec_path).to_path_buf());
            if o.reference.is_none() {
                o.verify = false;
                return Some(format!(
                    "timing the body of `{routine}` in {} as the implementation (no --impl given; nothing to verify against)",
                    spec_path.display()
                ));
            }
            return None;
        }
        let outputs: Vec<String> = spec
            .returns
            .iter()
            .map(|r| format!("`{}`", r.text()))
            .collect();
        (o.verify && o.reference.is_none() && spec.routine.body.is_none() && !outputs.is_empty())
            .then(|| {
                format!(
                    "not verifying {}: the spec gives `{routine}` no body to compare with; pass --reference K.c, a second implementation, to compare the outputs",
                    outputs.join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(src: &str) -> Spec {
        spec_lang::parse(src, "k.spec").expect("the test spec parses")
    }

    const WITH_BODY: &str = "routine=void scale(const int N, double* X) {\n  for (int i = 0; i < N; i++) X[i] *= 2;\n};\ninit={ N=8; X=Vector(double, RANDOM, _, N); };\nreturns(X);\n";
    const WITHOUT_BODY: &str = "routine=void scale(const int N, double* X);\ninit={ N=8; X=Vector(double, RANDOM, _, N); };\nreturns(X);\n";

    #[test]
    fn the_body_is_timed_without_impl_and_verifies_nothing_unless_a_reference_is_given() {
        let s = spec(WITH_BODY);
        let chosen = Implementation::choose(&s, None).unwrap();
        assert!(matches!(chosen, Implementation::Body(_)));
        let written = std::fs::read_to_string(chosen.path()).unwrap();
        assert!(written.contains("scale"), "{written}");
        let mut o = RunOptions::default();
        let note = chosen
            .settle(&s, Path::new("specs/k.spec"), &mut o)
            .unwrap();
        assert!(!o.verify);
        assert_eq!(o.header_dir.as_deref(), Some(Path::new("specs")));
        assert!(
            note.contains("timing the body of `scale` in specs/k.spec"),
            "{note}"
        );

        let mut o = RunOptions {
            reference: Some("other.c".into()),
            ..RunOptions::default()
        };
        assert_eq!(chosen.settle(&s, Path::new("k.spec"), &mut o), None);
        assert!(o.verify);
        assert_eq!(o.header_dir.as_deref(), Some(Path::new(".")));
    }

    #[test]
    fn a_given_file_is_verified_against_the_body_and_without_one_the_user_is_told() {
        let given = Implementation::choose(&spec(WITH_BODY), Some(Path::new("k.c"))).unwrap();
        assert_eq!(given.path(), Path::new("k.c"));
        let mut o = RunOptions::default();
        assert_eq!(
            given.settle(&spec(WITH_BODY), Path::new("k.spec"), &mut o),
            None
        );
        assert!(o.verify && o.header_dir.is_none());

        let s = spec(WITHOUT_BODY);
        let note = given.settle(&s, Path::new("k.spec"), &mut o).unwrap();
        assert!(
            note.starts_with("not verifying `X`: the spec gives `scale` no body"),
            "{note}"
        );
        assert!(
            o.verify,
            "the run still verifies what it can; only the note is new"
        );
        o.verify = false;
        assert_eq!(given.settle(&s, Path::new("k.spec"), &mut o), None);
    }

    #[test]
    fn neither_impl_nor_body_is_a_usage_error_naming_the_routine() {
        let e = Implementation::choose(&spec(WITHOUT_BODY), None)
            .err()
            .unwrap();
        assert_eq!(e.failure(), Some(failure::Failure::Usage));
        assert!(
            e.to_string()
                .starts_with("--impl FILE is required: the C file implementing `scale`"),
            "{e}"
        );
    }
}
