//! What the checkpoint side reads back: the capture record and the image
//! manifest of an image directory (read by `checkpoint time`, `run` and
//! `tune` on a checkpoint), and the site census the host library writes
//! for `checkpoint sites`.

use checkpoint::capture_info::{restore_substitutes, CaptureInfo};
use checkpoint::manifest::{Manifest, MANIFEST_FILE};
use checkpoint::restore::RestorePlan;
use checkpoint::{Criu, CriuVersion};
use std::time::Duration;

/// `tdg-capture.txt`: parsed, and the restore's descriptor substitutes
/// decided from it; what parses survives the manifest's JSON round trip
/// (the manifest embeds it).
pub fn capture_info(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(info) = CaptureInfo::parse(text) else {
        return false;
    };
    for s in restore_substitutes(&info) {
        assert!(!s.app_fds.is_empty());
    }
    let json = serde_json::to_string(&info).expect("capture info serialises");
    let back: CaptureInfo = serde_json::from_str(&json).expect("and reads back");
    assert_eq!(back, info);
    true
}

/// `tdg-manifest.json` in an image directory: read as `checkpoint time`
/// opens an image, checked against the directory (whose image files are
/// missing here, so a manifest naming any is refused), and the restore
/// planned from it with its command line.
pub fn image_manifest(data: &[u8]) -> bool {
    let dir = crate::fixtures::fresh_dir("image");
    std::fs::write(dir.join(MANIFEST_FILE), data).expect("scratch write");
    let Ok(manifest) = Manifest::read(&dir) else {
        return false;
    };
    let _ = manifest.image_bytes();
    let _ = manifest.verify(&dir);
    let criu = Criu {
        path: "/nonexistent/criu".into(),
        version: CriuVersion {
            major: 4,
            minor: 1,
            patch: 1,
        },
        libcriu: None,
    };
    if let Ok(plan) = RestorePlan::new(&dir, &manifest, &criu, Duration::from_secs(1)) {
        let _ = format!("{:?}", plan.command("restore.log"));
    }
    let json = serde_json::to_string(&manifest).expect("a manifest serialises");
    let back: Manifest = serde_json::from_str(&json).expect("and reads back");
    assert_eq!(back, manifest);
    true
}

/// The host library's site census: summarised per site and printed as
/// `checkpoint sites` prints it.
pub fn census(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(report) = checkpoint::sites::parse_census(text) else {
        return false;
    };
    let _ = report.render_text();
    serde_json::to_string(&report).expect("a sites report serialises");
    true
}
