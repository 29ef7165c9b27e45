//! Restored copies never write into the user's world (real CRIU; root and
//! `scripts/setup`, as in CI): every file the application can write is
//! replaced in the copies by a private one, a file it also reads starts
//! with its content at the checkpoint, what the copies wrote is stated, and
//! every substitution is listed.

mod common;

use checkpoint::capture_info::CaptureInfo;
use checkpoint::substitution::{substitutions, Treatment};
use checkpoint::{capture, time_image, CaptureRequest, Manifest, TimeOptions};
use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

struct Files {
    log: PathBuf,
    err: PathBuf,
    data: PathBuf,
}

fn files(ws: &Workspace) -> Files {
    let data = ws.dir.path().join("data.bin");
    std::fs::write(&data, vec![0u8; 4096]).unwrap();
    Files {
        log: ws.dir.path().join("run.log"),
        err: ws.dir.path().join("err.log"),
        data,
    }
}

/// `logcalls CALLS LOG DATA MODE 2>>ERR` under a shell, as a user would
/// start it, captured at `call` with `delay`.
fn capture_logcalls(
    ws: &Workspace,
    f: &Files,
    calls: u32,
    mode: &str,
    call: u64,
    delay: u64,
) -> PathBuf {
    let exe = ws.build_app(&["logcalls.c"], "logcalls", &[]);
    let image = ws.image(&format!("img-{mode}"));
    let script = format!(
        "exec {} {calls} {} {} {mode} 2>>{}",
        exe.display(),
        f.log.display(),
        f.data.display(),
        f.err.display()
    );
    capture(
        &CaptureRequest {
            command: os_args(&[&"sh", &"-c", &script]),
            image: image.clone(),
            site: Some("step".into()),
            call,
            delay,
            timeout: Some(Duration::from_secs(120)),
            quiet: true,
            preload: None,
        },
        &criu(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    image
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .count()
}

/// The application appends a line per call to its log and (through the
/// shell's `2>>`) to another file; 200 samples add none to either.
#[test]
fn two_hundred_samples_add_no_line_to_the_users_logs() {
    let _serial = exclusive();
    let ws = Workspace::new("logs");
    let f = files(&ws);
    let image = capture_logcalls(&ws, &f, 12, "read", 5, 2);
    assert_eq!(
        (lines(&f.log), lines(&f.err)),
        (12, 12),
        "the application's own run"
    );

    let subs = substitutions(&Manifest::read(&image).unwrap().capture);
    let treated = |p: &Path| {
        subs.iter()
            .find(|s| Path::new(&s.target) == p)
            .unwrap_or_else(|| panic!("{} not listed: {subs:?}", p.display()))
            .treatment
    };
    assert_eq!(treated(&f.log), Treatment::PrivateCopy);
    assert_eq!(treated(&f.err), Treatment::PrivateCopy);
    assert_eq!(treated(&f.data), Treatment::ReadWriteReplaced);

    let r = time_image(&image, &opts(200)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.samples_ns.len(), 200);
    assert_eq!(r.sampling, "fork", "{:?}", r.fallback);
    assert_eq!(
        (lines(&f.log), lines(&f.err)),
        (12, 12),
        "a copy wrote into the user's files"
    );
    // What the copies did is stated: every sample replays calls 3 and 4
    // and times call 5, each appending a 7-byte line to both files.
    for path in [&f.log, &f.err] {
        let e = r
            .files
            .iter()
            .find(|e| Path::new(&e.path) == path)
            .unwrap_or_else(|| panic!("{} not in {:?}", path.display(), r.files));
        assert!(e.appends && e.restores_writing == 1, "{e:?}");
        assert!(e.bytes_added >= 200 * 3 * 7, "{e:?}");
        assert!(
            r.render_text().contains(&format!(
                "appended {} to {}",
                stats::bytes(e.bytes_added),
                path.display()
            )),
            "{}",
            r.render_text()
        );
    }
    // One restore per sample too.
    let r = time_image(
        &image,
        &TimeOptions {
            restore_per_sample: true,
            ..opts(3)
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.samples_ns.len(), 3);
    assert_eq!((lines(&f.log), lines(&f.err)), (12, 12));
}

/// A file the call reads and writes (through its descriptor, or a shared
/// mapping) is never written by the copies, and each copy reads it as it
/// was at the checkpoint: the call's time follows the counter it reads,
/// and agrees with the application's own run of that call, although the
/// application went on counting to 40 afterwards. A fork cannot put the
/// content back for the next sample, so the samples are taken one restore
/// each, saying why.
#[test]
fn a_file_the_call_reads_and_writes_is_private_and_starts_as_at_the_checkpoint() {
    let _serial = exclusive();
    for (mode, why) in [
        ("rewrite", "whose content every fork shares"),
        // the writes through the mapping change the file the descriptor
        // shares too: either is found first
        ("mapped", "share"),
    ] {
        let ws = Workspace::new(&format!("rw-{mode}"));
        let f = files(&ws);
        let image = capture_logcalls(&ws, &f, 40, mode, 8, 2);
        let data = std::fs::read(&f.data).unwrap();
        assert_eq!(
            i64::from_le_bytes(data[..8].try_into().unwrap()),
            40,
            "{mode}: the application's own run"
        );
        let info: CaptureInfo = Manifest::read(&image).unwrap().capture;
        assert!(
            info.seeds
                .iter()
                .any(|s| Path::new(&s.path) == f.data && s.file.is_some()),
            "{mode}: the image keeps the file's content: {:?}",
            info.seeds
        );
        let r = time_image(&image, &opts(4)).unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(
            std::fs::read(&f.data).unwrap(),
            data,
            "{mode}: a copy wrote the file"
        );
        let fallback = r.fallback.clone().unwrap_or_default();
        assert!(fallback.contains(why), "{mode}: {fallback}");
        assert_eq!(r.sampling, "restore");
        // The copies read the counter the application had at call 8 (7),
        // not the file's 40: a call reading 40 would take five times as long.
        // The range tells those apart under any load; the check's own
        // verdict (a 10 % tolerance against one captured call) is a timing
        // comparison, not this test's effect.
        let check = r.captured_call.unwrap();
        assert!(
            (0.5..2.0).contains(&check.median_ratio),
            "{mode}: {check:?} {:?}",
            r.samples_ns
        );
        let e = r
            .files
            .iter()
            .find(|e| Path::new(&e.path) == f.data)
            .unwrap_or_else(|| panic!("{mode}: {:?}", r.files));
        assert!(e.restores_writing >= 4 && !e.appends, "{mode}: {e:?}");
    }
}
