//! The page's U test against SciPy's `mannwhitneyu(..., alternative=
//! 'two-sided')`, which Google Benchmark's compare.py calls: small samples
//! without ties (exact distribution), ties (normal approximation with the
//! tie correction), large samples, identical and separated runs.

use std::process::Command;

/// Debian's interpreter: its python3-scipy is what compare.py imports
/// (scripts/setup.d/70-tuners.sh installs both).
const PYTHON: &str = "/usr/bin/python3";

/// A deterministic sample of `n` values around `centre`, rounded to
/// `grain` (a coarse grain makes ties, as a timer's resolution does).
fn sample(seed: u64, n: usize, centre: f64, spread: f64, grain: f64) -> Vec<f64> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            ((centre + spread * (u - 0.5)) / grain).round() * grain
        })
        .collect()
}

#[test]
fn p_values_match_scipy_mannwhitneyu() {
    let _load = testkit::shared();
    assert!(
        std::path::Path::new(PYTHON).is_file(),
        "{PYTHON} is missing: run scripts/setup (step 70-tuners.sh installs python3-scipy)"
    );
    let mut cases: Vec<(Vec<f64>, Vec<f64>)> = vec![
        (vec![1.0, 2.0, 3.0], vec![4.0, 5.0, 6.0]),
        (vec![3.0, 1.0, 2.0], vec![2.5, 0.5]),
        (vec![5.0, 5.0, 5.0], vec![5.0, 5.0]),
    ];
    for (i, &(n1, n2, grain)) in [
        (4, 6, 1e-6),   // exact, no ties
        (7, 8, 1e-6),   // exact, no ties
        (8, 20, 1e-6),  // one side small: exact
        (5, 5, 10.0),   // ties: asymptotic
        (9, 9, 1e-6),   // both large: asymptotic
        (15, 15, 20.0), // tdg's default-sized runs with a timer grain
        (40, 25, 1.0),
    ]
    .iter()
    .enumerate()
    {
        let a = sample(i as u64 * 2 + 1, n1, 1000.0, 200.0, grain);
        let b = sample(i as u64 * 2 + 2, n2, 1060.0, 200.0, grain);
        cases.push((a, b));
    }
    let json = serde_json::to_string(&cases).unwrap();
    let script = "import json, sys\n\
                  from scipy.stats import mannwhitneyu\n\
                  cases = json.loads(sys.stdin.read())\n\
                  print(json.dumps([float(mannwhitneyu(a, b, alternative='two-sided').pvalue) for a, b in cases]))\n";
    let mut child = Command::new(PYTHON)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(json.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "scipy failed");
    let want: Vec<f64> = serde_json::from_slice(&out.stdout).unwrap();
    for ((a, b), want) in cases.iter().zip(&want) {
        let got = report::compare::mann_whitney_p(a, b).unwrap();
        assert!(
            (got - want).abs() <= 1e-9 * want.max(1e-12),
            "n = {} vs {}: tdg {got}, scipy {want}\n{a:?}\n{b:?}",
            a.len(),
            b.len()
        );
    }
}
