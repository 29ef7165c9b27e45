//! The facts every crate's tests repeat, written once: the section timing
//! tests hold, where the repository and its provisioned `.deps` are,
//! whether a program is installed, pinning to one CPU, and a compiler that
//! logs its calls. A dev-dependency only (`publish = false`).

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// The section is one lock for the whole machine: a timing test must not
/// share the machine with another test binary's compiles or restores (two
/// checkouts' suites, or `cargo test` beside `scripts/test`) any more than
/// with its own binary's. An advisory `flock` on one file: exclusive for
/// [`exclusive`], shared for [`shared`]. Every hold opens the file anew, so
/// threads of one binary exclude each other as processes do; the
/// descriptor is close-on-exec, so no program a test starts keeps it.
/// `TDG_TEST_SECTION_LOCK` names another file (the default is in the
/// temporary directory, where every checkout on the machine finds it).
fn section_file() -> File {
    let path = std::env::var_os("TDG_TEST_SECTION_LOCK")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("tdg-test-section.lock"));
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o666)
        // A link planted at the path is refused, never followed.
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .unwrap_or_else(|e| {
            panic!(
                "testkit: cannot open the test section's lock {}: {e} (remove it if it is not a plain file, \
                 or set TDG_TEST_SECTION_LOCK to another path)",
                path.display()
            )
        })
}

/// Held by every test that times something, uses CRIU, or spins CPUs: such
/// tests run one at a time, and never beside a test holding [`shared`], in
/// any test binary on the machine. On this machine's two cores a neighbour
/// shares the L3 and the memory bandwidth, which is what the timings
/// measure: another cache test beside a flush sweep warms or evicts what
/// the sweep measures, and a load test's spinning threads would land inside
/// another test's measurements. Nothing else heavy runs meanwhile, so the
/// suite's time is at least the sum of these sections:
/// `TDG_TEST_SECTION_LOG` measures it ([`Held`]).
pub fn exclusive() -> Held {
    let asked = now();
    let file = section_file();
    file.lock()
        .unwrap_or_else(|e| panic!("testkit: cannot lock the test section: {e}"));
    Held::new(file, "exclusive", asked)
}

/// Held by tests that do not time but load the machine (compiles, driver
/// runs, profiled programs): they run beside each other, never beside an
/// [`exclusive`] one. A failed test's hold ends with it (the lock is the
/// open file's, released when its guard drops during the unwind).
pub fn shared() -> Held {
    let asked = now();
    let file = section_file();
    file.lock_shared()
        .unwrap_or_else(|e| panic!("testkit: cannot lock the test section: {e}"));
    Held::new(file, "shared", asked)
}

/// A test's hold on the section. With `TDG_TEST_SECTION_LOG=FILE` set, its
/// release appends one line to FILE: the kind, the test binary, when the
/// section was asked for, got and released (seconds since the epoch) and
/// the test's name, tab-separated; `scripts/test-sections FILE` adds them
/// up per binary and lists the longest holds.
pub struct Held {
    /// Locked as the kind says; closing it releases the lock.
    _lock: File,
    kind: &'static str,
    asked: f64,
    got: f64,
}

impl Held {
    fn new(lock: File, kind: &'static str, asked: f64) -> Self {
        Held {
            _lock: lock,
            kind,
            asked,
            got: now(),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(path) = std::env::var_os("TDG_TEST_SECTION_LOG") else {
            return;
        };
        let binary = std::env::current_exe()
            .ok()
            .and_then(|e| e.file_name().map(|f| f.to_string_lossy().into_owned()))
            .unwrap_or_default();
        let test = std::thread::current().name().unwrap_or("?").to_string();
        let line = format!(
            "{}\t{binary}\t{:.3}\t{:.3}\t{:.3}\t{test}\n",
            self.kind,
            self.asked,
            self.got,
            now()
        );
        // One write of a short line to a file opened for appending: lines
        // from test binaries run at once do not interleave.
        let written = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            eprintln!("testkit: cannot log to {}: {e}", path.to_string_lossy());
        }
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The workspace root (this crate sits one level below it).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit sits inside the workspace")
        .to_path_buf()
}

/// What scripts/setup provisions (CRIU, zlib, bzip2 sources, the tuners'
/// Python): `$TDG_DEPS`, or the repository's `.deps`.
pub fn deps_dir() -> PathBuf {
    std::env::var_os("TDG_DEPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".deps"))
}

/// Whether `program --version` runs and succeeds (an optional compiler).
pub fn have(program: &str) -> bool {
    std::process::Command::new(program)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// CPUs this process may run on, from /proc/self/status (e.g. "0-1,4").
pub fn usable_cpus() -> Vec<i32> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    let mut out = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<i32>().unwrap()..=b.parse::<i32>().unwrap()),
            None => out.push(part.parse().unwrap()),
        }
    }
    out
}

/// Pins the calling thread, and so every process it starts from now on
/// (plain runs, captured applications, criu and the copies it restores), to
/// one CPU. Unpinned, the runs of one comparison land on either vCPU of a
/// shared machine, whose speeds can differ by a large factor at times
/// (each vCPU's host core has its own neighbours), so a median of a few
/// runs would flip between the two speeds.
pub fn pin_to_one_cpu() {
    // SAFETY: plain libc calls on a zeroed cpu_set_t owned by this frame.
    unsafe {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size, &mut allowed) != 0 {
            return;
        }
        let Some(cpu) = (0..libc::CPU_SETSIZE as usize)
            .rev()
            .find(|&c| libc::CPU_ISSET(c, &allowed))
        else {
            return;
        };
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        libc::sched_setaffinity(0, size, &one);
    }
}

/// Whether process `pid` still runs: its /proc entry is there and it is not
/// a zombie (a zombie is dead; only its parent's wait is missing).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

/// The names in directory `dir`, sorted: what a test compares to show
/// that nothing was added to or lost from a directory.
pub fn entry_names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A C compiler that logs every call: a script in `dir` that appends its
/// arguments, one line per call, to a log beside it and runs `cc` with
/// them. Give its path where a compiler is asked for (`--cc`, `cc:`), and
/// [`LoggedCompiler::calls`] says what really ran, so a test can count
/// compiles (a cache hit is a compile that is not there).
pub struct LoggedCompiler {
    pub path: PathBuf,
    log: PathBuf,
}

impl LoggedCompiler {
    pub fn new(dir: &std::path::Path) -> LoggedCompiler {
        use std::os::unix::fs::PermissionsExt;
        let log = dir.join("cc.log");
        let path = dir.join("cc-logged");
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec cc \"$@\"\n",
                log.display()
            ),
        )
        .expect("testkit: cannot write the logging compiler");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .expect("testkit: cannot make the logging compiler executable");
        LoggedCompiler { path, log }
    }

    /// The path as a string, as `--cc` and the `cc` options take it.
    pub fn program(&self) -> String {
        self.path.display().to_string()
    }

    /// Each call's arguments, in order.
    pub fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The calls since the last `take` (the log starts again empty).
    pub fn take(&self) -> Vec<String> {
        let calls = self.calls();
        let _ = std::fs::remove_file(&self.log);
        calls
    }
}

#[cfg(test)]
mod tests {
    use super::repo;

    /// Whether Rust source `text` has a documentation code example, which
    /// rustdoc compiles and runs as a doctest (a ```text block is prose).
    fn has_doc_example(text: &str) -> bool {
        let mut in_block = false;
        for line in text.lines().map(str::trim_start) {
            let Some(doc) = line
                .strip_prefix("///")
                .or_else(|| line.strip_prefix("//!"))
            else {
                continue;
            };
            let Some(info) = doc.trim().strip_prefix("```") else {
                continue;
            };
            if !in_block && info.trim() != "text" {
                return true;
            }
            in_block = !in_block;
        }
        false
    }

    fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// `doctest = false` saves every `cargo test` seconds of rustdoc per
    /// crate, and is right only while the crate's documentation has no
    /// code example: one added there would otherwise never run.
    #[test]
    fn doctests_are_off_only_where_there_are_none() {
        let mut off = 0;
        for e in std::fs::read_dir(repo()).unwrap().flatten() {
            let manifest = e.path().join("Cargo.toml");
            let Ok(text) = std::fs::read_to_string(&manifest) else {
                continue;
            };
            if !text.contains("\ndoctest = false") {
                continue;
            }
            off += 1;
            let mut files = Vec::new();
            rust_files(&e.path().join("src"), &mut files);
            for f in files {
                assert!(
                    !has_doc_example(&std::fs::read_to_string(&f).unwrap()),
                    "{} has a documentation example, which `doctest = false` in {} keeps from running: remove that line",
                    f.display(),
                    manifest.display()
                );
            }
        }
        assert!(
            off > 0,
            "no crate turns doctests off: the check checks nothing"
        );
        assert!(has_doc_example("//! ```\n//! f();\n//! ```\n"));
        assert!(!has_doc_example("//! ```text\n//! a b\n//! ```\n"));
    }
}
