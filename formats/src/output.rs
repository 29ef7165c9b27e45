//! Writing a finished document: to stdout, or to `--out FILE` atomically
//! (a temporary file in the same directory renamed over the target), so a
//! tuner or dashboard polling the file never reads half a document and an
//! interrupted run leaves the previous file intact. A link at `FILE` is
//! refused, never followed (fsguard).

use std::io::Write;
use std::path::Path;

/// Writes `text` to `out`, or to stdout when `out` is `None`.
pub fn write_document(out: Option<&Path>, text: &str) -> std::io::Result<()> {
    let Some(path) = out else {
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(text.as_bytes())?;
        return stdout.flush();
    };
    fsguard::write_atomic(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, "old").unwrap();
        write_document(Some(&path), "{\"new\": 1}\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"new\": 1}\n");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "a temporary file was left behind");
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_file() {
        let e = write_document(Some(Path::new("/nonexistent-dir/x.json")), "x").unwrap_err();
        assert!(e.to_string().contains("/nonexistent-dir/x.json"), "{e}");
    }
}
