//! `tdg report`'s inputs: any file named on its command line, recognised
//! by its content (a tune log, a `.tdgp` profile, or one of the JSON
//! documents tdg and Google Benchmark write: runs, checkpoint timings,
//! auto-delay and in-app reports, probe results) and laid out as the page.

use std::path::Path;

/// One file given to `tdg report`: read through `report::load`, the same
/// function the command uses, and its page rendered.
pub fn report_input(data: &[u8]) -> bool {
    let dir = crate::fixtures::fresh_dir("report");
    let path = dir.join("input");
    std::fs::write(&path, data).expect("scratch write");
    let Ok(input) = report::load(Path::new(&path)) else {
        return false;
    };
    let _ = report::title(std::slice::from_ref(&input));
    let opts = report::PageOptions {
        title: "fuzz".into(),
        reload_s: None,
        generated: "fuzz".into(),
    };
    let _ = report::render(std::slice::from_ref(&input), &opts);
    true
}
