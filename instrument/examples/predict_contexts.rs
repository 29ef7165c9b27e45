//! What `tdg run SPEC --impl IMPL --contexts FILE` computes, runnable on its
//! own (the bench script uses it):
//!
//!     cargo run --release -p instrument --example predict_contexts -- \
//!         SPEC IMPL CONTEXTS [TOP] [warm|flushed]
//!
//! Times the TOP (default 3) highest-ranked contexts with the generated
//! driver, warm (default: the application reuses its buffers) or flushed,
//! and prints calls x driver time beside the measured in-app total.

use instrument::{contexts, drive};
use spec_lang::ast::FlushMethod;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: predict_contexts SPEC IMPL CONTEXTS [TOP] [warm|flushed]");
        return ExitCode::from(2);
    }
    let top: usize = match args.get(3).map(|s| s.parse()) {
        None => 3,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!(
                "predict_contexts: TOP must be a positive integer, got `{}`",
                args[3]
            );
            return ExitCode::from(2);
        }
    };
    let flush = match args.get(4).map(String::as_str) {
        None | Some("warm") => FlushMethod::None,
        Some("flushed") => FlushMethod::Read,
        Some(other) => {
            eprintln!("predict_contexts: cache state must be warm or flushed, got `{other}`");
            return ExitCode::from(2);
        }
    };
    let spec = match spec_lang::load(&args[0]) {
        Ok(s) => s,
        Err(d) => {
            eprintln!("{d}");
            return ExitCode::FAILURE;
        }
    };
    let file = match contexts::ContextsFile::load(&PathBuf::from(&args[2])) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("predict_contexts: {e}");
            return ExitCode::FAILURE;
        }
    };
    let opts = driver_gen::RunOptions {
        flush: Some(flush),
        samples: Some(15),
        verify: false,
        ..Default::default()
    };
    match drive::predict_with_driver(&spec, &PathBuf::from(&args[1]), &opts, &file, top) {
        Ok(p) => {
            print!("{}", contexts::render_prediction(&p));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("predict_contexts: {e}");
            ExitCode::FAILURE
        }
    }
}
