//! `tdg report` of `scripts/bench-search --json`: the page holds a figure
//! per recorded space with every strategy's curve in it and the table of
//! top-1 % reached; a corrupt file is refused with one line naming it.

use serde_json::json;

fn curves(strategies: &[&str]) -> serde_json::Value {
    let runs = |k: usize| {
        json!({
            "reached_top": 2,
            "seeds": 3,
            "curves": (0..3).map(|s| (1..=10).map(|e| {
                ((e + s + k) as f64 / 14.0).min(1.0)
            }).collect::<Vec<f64>>()).collect::<Vec<_>>()
        })
    };
    let space = |_: &str| {
        strategies
            .iter()
            .enumerate()
            .map(|(k, s)| (s.to_string(), json!({"5": runs(k), "10": runs(k)})))
            .collect::<serde_json::Map<_, _>>()
    };
    json!({
        "kind": "tdg-strategy-curves",
        "spaces": {"dot.t4.json": space("dot"), "sort.t4.json": space("sort")}
    })
}

#[test]
fn the_page_holds_every_strategys_curve_for_every_space() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("curves.json");
    let strategies = ["bayes", "random", "anneal_custom"];
    std::fs::write(&file, curves(&strategies).to_string()).unwrap();
    let page = dir.path().join("page.html");
    let n = report::write_report(std::slice::from_ref(&file), &page, None, "test").unwrap();
    assert_eq!(n, 1);
    let html = std::fs::read_to_string(&page).unwrap();
    let figures: Vec<&str> = html.split("<svg").skip(1).collect();
    assert_eq!(figures.len(), 2, "one figure per space");
    for (fig, space) in figures.iter().zip(["dot.t4.json", "sort.t4.json"]) {
        assert!(fig.contains(space), "{space}");
        for s in strategies {
            assert!(fig.contains(s), "{space}: no curve of {s}");
        }
    }
    // The table: each strategy at each budget, 2 of 3 seeds.
    assert_eq!(html.matches("2/3").count(), 2 * 3 * 2, "{html}");
}

#[test]
fn a_corrupt_curves_file_is_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut bad_fraction = curves(&["bayes"]);
    bad_fraction["spaces"]["dot.t4.json"]["bayes"]["5"]["curves"][0][3] = json!(1.7);
    let mut no_curve = curves(&["bayes"]);
    no_curve["spaces"]["dot.t4.json"]["bayes"]["5"]["curves"] = json!([[]]);
    let mut bad_budget = curves(&["bayes"]);
    bad_budget["spaces"]["dot.t4.json"]["bayes"]["five"] =
        json!({"reached_top": 0, "seeds": 1, "curves": [[0.5]]});
    for (text, why) in [
        (bad_fraction.to_string(), "1.7 is no fraction of the best"),
        (no_curve.to_string(), "an empty curve"),
        (bad_budget.to_string(), "a budget is a whole number"),
        (
            json!({"kind": "tdg-strategy-curves", "spaces": {}}).to_string(),
            "it holds no space's curves",
        ),
        (
            json!({"kind": "tdg-strategy-curves", "spaces": {"a": {"bayes": {"5": {"seeds": 1}}}}})
                .to_string(),
            "not a scripts/bench-search --json file",
        ),
    ] {
        let file = dir.path().join("bad.json");
        std::fs::write(&file, &text).unwrap();
        let e = report::load(&file).err().unwrap().to_string();
        assert!(e.contains(why) && e.contains("bad.json"), "{why}: {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}
