//! Every committed seed through its target, in the ordinary test suite: the
//! inputs that once crashed a reader (`seeds/TARGET/regress-*`) stay fixed,
//! and the seeds made from files tdg wrote (`real-*`, and the example specs)
//! are still accepted, so they keep reaching the code behind each reader.

use std::path::Path;

#[test]
fn every_target_has_seeds_and_runs_them_cleanly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    for (name, target) in fuzz::TARGETS {
        let dir = root.join(name);
        let mut seeds: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        seeds.sort();
        assert!(!seeds.is_empty(), "{} has no seeds", dir.display());
        let mut real = 0;
        for seed in seeds {
            let data = std::fs::read(&seed).unwrap();
            let accepted = std::panic::catch_unwind(|| target(&data))
                .unwrap_or_else(|_| panic!("{name} panicked on {}", seed.display()));
            let file = seed.file_name().unwrap().to_string_lossy().into_owned();
            if file.starts_with("real-") || name == &"spec" {
                assert!(
                    accepted,
                    "{name} refused {}, a file tdg wrote: if its format changed on purpose, \
                     replace the seed with the same file written by this tdg",
                    seed.display()
                );
                real += 1;
            }
        }
        assert!(
            real > 0,
            "{} has no seed made from a real file",
            dir.display()
        );
    }
}

#[test]
fn every_target_has_a_binary() {
    let manifest = include_str!("../Cargo.toml");
    for (name, _) in fuzz::TARGETS {
        assert!(
            manifest.contains(&format!(
                "name = \"{name}\"\npath = \"fuzz_targets/{name}.rs\""
            )),
            "fuzz/Cargo.toml has no binary for {name}"
        );
        let body = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz_targets")
            .join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&body).unwrap();
        assert!(
            text.contains(&format!("fuzz::{name}(data)")),
            "{}",
            body.display()
        );
    }
}
