//! The C host library, embedded in tdg so users need not know cargo's target
//! directory: `tdg checkpoint lib -o DIR` writes it out, and tests build
//! applications against it through `toolchain`.

use crate::error::guard_err;
use crate::error::Result;
use std::path::{Path, PathBuf};

pub const HEADER_NAME: &str = "tdg_checkpoint.h";
pub const SOURCE_NAME: &str = "tdg_checkpoint.c";
pub const HEADER: &str = include_str!("../c/tdg_checkpoint.h");
pub const SOURCE: &str = include_str!("../c/tdg_checkpoint.c");

/// `ns=<wall> cpu_ns=<cpu>`, as the host library writes it.
pub fn parse_result(text: &str) -> Option<(u64, u64)> {
    text.lines().find_map(|l| {
        let mut wall = None;
        let mut cpu = None;
        for field in l.split_whitespace() {
            if let Some(v) = field.strip_prefix("ns=") {
                wall = v.parse().ok();
            } else if let Some(v) = field.strip_prefix("cpu_ns=") {
                cpu = v.parse().ok();
            }
        }
        Some((wall?, cpu?))
    })
}

#[derive(Debug, Clone)]
pub struct HostLibrary {
    pub dir: PathBuf,
    pub header: PathBuf,
    pub source: PathBuf,
}

/// What the host library's directory is to the guard.
pub const LIBRARY_DIR: fsguard::Purpose = fsguard::Purpose {
    what: "checkpoint host library",
    option: "-o",
};

/// Write the header and source (with the timing header they include) into `dir` (created if needed; refused when
/// it is a directory tdg did not make, whose files it would replace).
pub fn write_host_library(dir: &Path) -> Result<HostLibrary> {
    fsguard::OwnedDir::open(dir, LIBRARY_DIR).map_err(guard_err)?;
    let lib = HostLibrary::in_dir(dir);
    fsguard::write_atomic(&lib.header, HEADER.as_bytes()).map_err(guard_err)?;
    fsguard::write_atomic(&lib.source, SOURCE.as_bytes()).map_err(guard_err)?;
    c_timing::write_header(dir).map_err(guard_err)?;
    Ok(lib)
}

impl HostLibrary {
    /// The library's files as [`write_host_library`] lays them out in `dir`
    /// (`tdg checkpoint lib -o DIR` writes the same).
    pub fn in_dir(dir: &Path) -> HostLibrary {
        HostLibrary {
            dir: dir.to_path_buf(),
            header: dir.join(HEADER_NAME),
            source: dir.join(SOURCE_NAME),
        }
    }

    /// The library compiled into an object in its directory, through
    /// `cache` when given. Its source includes only its own two headers,
    /// and its flags are its own: the object is one cache entry wherever
    /// the library is written, and every application and region shim built
    /// with it links that entry instead of compiling the library's 3000
    /// lines again.
    pub fn object(
        &self,
        cc: &toolchain::CCompiler,
        cache: Option<&toolchain::BuildCache>,
    ) -> Result<PathBuf> {
        let object = self.dir.join("tdg_checkpoint.o");
        cc.compile_object(
            &toolchain::CompileJob {
                sources: vec![self.source.clone()],
                output: object.clone(),
                // tdg's own runtimes' flags, whatever the application's:
                // position-independent, so the one object links into
                // executables and into the region shim alike.
                cflags: instrument::runtime::cflags(),
                include_dirs: vec![self.dir.clone()],
                object_only: true,
                ..Default::default()
            },
            cache,
        )?;
        Ok(object)
    }
}

/// Compile application sources with `cflags` and link them with the host
/// library's object (through `cache` when given).
pub fn build_with_host_library(
    cc: &toolchain::CCompiler,
    lib: &HostLibrary,
    sources: &[PathBuf],
    output: &Path,
    cflags: &[&str],
    cache: Option<&toolchain::BuildCache>,
) -> Result<()> {
    let mut all = sources.to_vec();
    all.push(lib.object(cc, cache)?);
    cc.compile(&toolchain::CompileJob {
        sources: all,
        output: output.to_path_buf(),
        cflags: cflags.iter().map(|s| s.to_string()).collect(),
        include_dirs: vec![lib.dir.clone()],
        ..Default::default()
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_library_reads_the_names_tdg_sets() {
        for name in crate::env::ALL {
            assert!(
                SOURCE.contains(&format!("\"{name}\"")),
                "tdg_checkpoint.c does not read {name}"
            );
        }
        assert!(SOURCE.contains(crate::capture_info::CAPTURE_INFO_FILE));
        assert!(SOURCE.contains(crate::capture_info::DUMP_LOG_FILE));
    }

    #[test]
    fn library_compiles_warning_free() {
        let dir = tempfile::tempdir().unwrap();
        let lib = write_host_library(dir.path()).unwrap();
        let cc = toolchain::CCompiler::find(None).unwrap();
        let obj = dir.path().join("tdg_checkpoint.o");
        cc.compile(&toolchain::CompileJob {
            sources: vec![lib.source.clone()],
            output: obj.clone(),
            cflags: ["-O2", "-Wall", "-Wextra", "-Werror", "-std=c99"]
                .map(String::from)
                .to_vec(),
            include_dirs: vec![lib.dir.clone()],
            object_only: true,
            ..Default::default()
        })
        .unwrap();
        assert!(obj.is_file());
    }
}
