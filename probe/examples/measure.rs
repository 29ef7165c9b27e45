//! Runs the probe without the `tdg` binary and prints the table; handy when
//! working on the probe alone: `cargo run --release -p probe --example measure [JSON]`
//! (JSON: also write the result there).
fn main() {
    let t0 = std::time::Instant::now();
    let r = probe::measure(&probe::ProbeOptions::default(), &mut |s| {
        eprintln!("probe: {:.1}s {s}", t0.elapsed().as_secs_f64())
    })
    .unwrap_or_else(|e| {
        eprintln!("probe: error: {e}");
        std::process::exit(1)
    });
    if let Some(json) = std::env::args().nth(1) {
        std::fs::write(&json, serde_json::to_string_pretty(&r).unwrap()).expect("write json");
    }
    print!("{}", probe::render::table(&r));
}
