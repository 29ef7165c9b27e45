//! The OpenMP triad program of specs/apps, unmodified, profiled through the
//! `--wrap` object `tdg instrument` generates: its calls carry the team
//! size they ran with, and contexts split by it.

use crate::support::{json_of, tdg_in as tdg};
use std::process::Command;

#[test]
fn an_openmp_applications_contexts_carry_its_team_size() {
    let _heavy = testkit::shared();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let repo = testkit::repo();
    let spec = repo.join("specs/omp_triad.spec").display().to_string();
    let built = tdg(&["instrument", &spec, "-o", "inst"], d);
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let cc = Command::new("cc")
        .args(["-O2", "-fopenmp", "-DNS=16384", "-o", "app"])
        .arg(repo.join("specs/apps/omp_triad_app.c"))
        .arg(repo.join("specs/omp_triad.c"))
        .args([
            "-Wl,--wrap=omp_triad",
            "inst/tdg_wrap_omp_triad.o",
            "inst/libtdg_instrument.a",
            "-lpthread",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    for team in [2, 1] {
        let profile = format!("t{team}.tdgp");
        let run = crate::support::tdg_command()
            .args(["profile", "-o", &profile, "--", "./app"])
            .env("OMP_NUM_THREADS", team.to_string())
            .current_dir(d)
            .output()
            .unwrap();
        let (out, err) = (
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr),
        );
        assert!(run.status.success(), "{err}");
        assert!(
            out.contains(&format!("threads {team} ")),
            "the program's own line: {out}"
        );
        let rep = json_of(&tdg(&["profile", "report", &profile, "--json"], d));
        let contexts = rep["contexts"].as_array().unwrap();
        assert_eq!(contexts.len(), 1, "one size, one team: {rep}");
        assert_eq!(contexts[0]["threads"], team, "{rep}");
        assert_eq!(
            contexts[0]["callers"], 1,
            "the main thread calls the triad: {rep}"
        );
        assert!(rep["calls"].as_u64().unwrap() >= 1000, "{rep}");
        let derive = tdg(
            &[
                "spec-from-profile",
                &profile,
                "--spec",
                &spec,
                "-o",
                "d.spec",
            ],
            d,
        );
        let said = String::from_utf8_lossy(&derive.stdout);
        assert!(
            derive.status.success(),
            "{}",
            String::from_utf8_lossy(&derive.stderr)
        );
        // The bundled spec times two threads: a one-thread application is
        // pointed out, not silently timed on two.
        assert_eq!(
            said.contains("the application ran with 1"),
            team == 1,
            "{said}"
        );
    }
}
