//! The system C toolchain as tdg uses it: find a compiler, compile a set of
//! sources into an executable or object, run a program and say in one line
//! how it ended (exit code or the signal that killed it).

pub mod build_cache;
mod compiler;
mod error;
mod process;

pub use build_cache::{BuildCache, Compiled};
pub use compiler::{render_command, CCompiler, CompileJob, CompilerKind};
pub use error::{io_context, limit_text, ToolchainError};

use std::ffi::OsString;
use std::path::Path;

/// The link-time address of the function or object `name` in the ELF file
/// `path`, from its symbol table (`None`: no such defined symbol, or not an
/// ELF file). A position-independent executable is loaded at a page-aligned
/// base, so the address modulo the page size holds at run time too.
pub fn symbol_address(path: &Path, name: &str) -> Result<Option<u64>, ToolchainError> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(path)?;
    let Ok(file) = object::File::parse(&*data) else {
        return Ok(None);
    };
    Ok(file
        .symbols()
        .find(|s| s.is_definition() && s.name() == Ok(name))
        .map(|s| s.address()))
}

/// Where the function `name` starts within the `.text` section of the
/// relocatable object `path` (`None`: not defined there, or defined in
/// another section, which the linker may move away from the object's
/// `.text`).
pub fn offset_in_text(path: &Path, name: &str) -> Result<Option<u64>, ToolchainError> {
    use object::{Object, ObjectSection, ObjectSymbol};
    let data = std::fs::read(path)?;
    let Ok(file) = object::File::parse(&*data) else {
        return Ok(None);
    };
    let Some(symbol) = file
        .symbols()
        .find(|s| s.is_definition() && s.name() == Ok(name))
    else {
        return Ok(None);
    };
    let in_text = symbol
        .section_index()
        .and_then(|i| file.section_by_index(i).ok())
        .is_some_and(|s| s.name() == Ok(".text"));
    Ok(in_text.then(|| symbol.address()))
}

pub use process::{
    die_with_tdg, run, run_with_deadline, signal_name, tie_to_tdg, time_limit_secs,
    wait_or_kill_group, Deadline, Finished, RunOutput, MAX_TIME_LIMIT,
};

/// The `LD_PRELOAD` value that puts `shim` first, ahead of whatever this
/// process's own `LD_PRELOAD` already holds (kept, not replaced).
pub fn ld_preload_with(shim: &std::path::Path) -> OsString {
    let mut value = OsString::from(shim);
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        value.push(":");
        value.push(existing);
    }
    value
}

/// Scratch directories are private (0700) with unpredictable names; they
/// live in `fsguard` with tdg's other rules for touching the filesystem.
pub use fsguard::{scratch_dir, ScratchDir};

/// Convenience for building argument lists.
pub fn os(s: impl Into<OsString>) -> OsString {
    s.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::{Duration, Instant};

    fn cc() -> CCompiler {
        CCompiler::find(None).expect("a C compiler is installed")
    }

    #[test]
    fn compiles_and_runs_a_program() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("p.c");
        std::fs::write(
            &src,
            "#include <stdio.h>\nint main(void){printf(\"%d\\n\", V);return 0;}\n",
        )
        .unwrap();
        let exe = dir.path().join("p");
        cc().compile(&CompileJob {
            sources: vec![src],
            output: exe.clone(),
            cflags: vec!["-O2".into()],
            defines: vec![("V".into(), Some("42".into()))],
            ..Default::default()
        })
        .unwrap();
        let out = run(&mut Command::new(&exe), Some(Duration::from_secs(10))).unwrap();
        assert_eq!(out.stdout.trim(), "42");
    }

    #[test]
    fn crash_is_reported_with_signal_and_last_words() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("crash.c");
        std::fs::write(
            &src,
            "#include <stdio.h>\n#include <signal.h>\nint main(void){fprintf(stderr,\"calling kernel\\n\");raise(SIGSEGV);return 0;}\n",
        )
        .unwrap();
        let exe = dir.path().join("crash");
        cc().compile(&CompileJob {
            sources: vec![src],
            output: exe.clone(),
            ..Default::default()
        })
        .unwrap();
        let err = run(&mut Command::new(&exe), None).unwrap_err();
        match &err {
            ToolchainError::Crashed { signal, .. } => assert_eq!(*signal, libc::SIGSEGV),
            other => panic!("expected a crash, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(
            msg.contains("SIGSEGV") && msg.contains("calling kernel"),
            "{msg}"
        );
    }

    #[test]
    fn timeout_kills_the_child() {
        let err = run(
            Command::new("sleep").arg("5"),
            Some(Duration::from_millis(100)),
        )
        .unwrap_err();
        assert!(matches!(err, ToolchainError::TimedOut { .. }));
    }

    /// A program that started others (a shell's background job, here) is
    /// killed with all of them, and the message says so with the limit.
    #[test]
    fn timeout_kills_everything_the_program_started_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("grandchild");
        let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
        let started = Instant::now();
        let err = run(
            Command::new("sh").arg("-c").arg(&script),
            Some(Duration::from_millis(300)),
        )
        .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the wait outlived the limit"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("within 300 ms")
                && msg.contains("process group")
                && msg.contains("--timeout"),
            "{msg}"
        );
        let grandchild: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while testkit::alive(grandchild) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !testkit::alive(grandchild),
            "the shell's child {grandchild} outlived the timeout"
        );
    }
}
