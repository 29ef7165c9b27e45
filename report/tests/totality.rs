//! Whatever the data, a page and its charts come out whole: no panic on
//! empty, non-finite, zero or negative values on log axes, a lone point,
//! a campaign with nothing timed; and log axes always carry labels.

use report::chart::{log_ticks, Axis, Chart, Heatmap, Mark, Rule, Scale, Series, PALETTE};
use report::input::{Campaign, Input};

#[test]
fn charts_draw_any_values() {
    let odd = vec![
        (0.0, 0.0),
        (-1.0, 5.0),
        (f64::NAN, 1.0),
        (f64::INFINITY, 2.0),
        (3.0, f64::NEG_INFINITY),
        (1e-300, 1e300),
    ];
    for (xs, ys) in [
        (Scale::Linear, Scale::Linear),
        (Scale::Log, Scale::Log),
        (Scale::Log, Scale::Linear),
    ] {
        for points in [Vec::new(), vec![(2.0, 2.0)], odd.clone()] {
            let mut c = Chart::new(
                "t",
                Axis {
                    scale: xs,
                    ..Axis::bytes("x")
                },
                Axis {
                    scale: ys,
                    ..Axis::linear("y")
                },
            );
            let mut s = Series::new("s", Mark::Dots, PALETTE[0], points.clone());
            s.error = points.iter().map(|_| Some((f64::NAN, 0.0))).collect();
            c.series.push(s);
            c.series
                .push(Series::new("", Mark::Steps, PALETTE[1], points.clone()));
            c.rules.push(Rule {
                x: 0.0,
                label: "zero".into(),
                color: PALETTE[2],
                dashed: true,
            });
            let svg = c
                .svg()
                .unwrap_or_else(|e| panic!("{xs:?} {ys:?} {points:?}: {e}"));
            assert!(
                svg.starts_with("<svg") && svg.contains("<title>t</title>"),
                "{svg}"
            );
        }
    }
    let h = Heatmap {
        title: "h".into(),
        description: String::new(),
        x_label: "a".into(),
        y_label: "b".into(),
        x_values: vec!["1".into()],
        y_values: vec!["2".into()],
        cells: vec![vec![None]],
        cell_text: |v| format!("{v}"),
    };
    assert!(h.svg().unwrap().contains("<title>h</title>"));
}

#[test]
fn log_axes_always_have_labels() {
    // A narrow range (runs of one kernel): round values inside it.
    let (bold, _) = log_ticks(1610.0, 1790.0, false);
    assert!(
        bold.len() >= 3 && bold.iter().all(|v| (1610.0..=1790.0).contains(v)),
        "{bold:?}"
    );
    let (bold, _) = log_ticks(1.0, 100.0, false);
    assert_eq!(bold, vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
    // Sizes at powers of two, at most about ten labels.
    let (bold, light) = log_ticks(4096.0, 64.0 * 1048576.0, true);
    assert!(bold.iter().all(|v| v.log2().fract() == 0.0), "{bold:?}");
    assert!(
        bold.len() <= 11 && bold.len() + light.len() == 15,
        "{bold:?} {light:?}"
    );
    assert_eq!(log_ticks(0.0, 1.0, false), (Vec::new(), Vec::new()));
}

#[test]
fn a_campaign_with_nothing_timed_still_makes_a_page() {
    let evaluation = |n: usize| tune::Evaluation {
        n,
        phase: "model".into(),
        config: config::Config::from_pairs([("NB", 16 * n as i64)]).unwrap(),
        time_ns: None,
        mflops: None,
        error: Some("it did not compile".into()),
        failure: None,
        samples_ns: Vec::new(),
        uncertainty_pct: None,
        elapsed_s: n as f64,
        best_ns: None,
        node: None,
        cpu: None,
        stopped: None,
        split: None,
    };
    for evaluations in [Vec::new(), vec![evaluation(1), evaluation(2)]] {
        let inputs = [Input::Campaign(Campaign {
            path: "c".into(),
            args: None,
            evaluations,
            origin: "a test".into(),
        })];
        let page = report::render(&inputs, &report::PageOptions::default()).unwrap();
        assert!(page.contains("</html>"));
    }
}
