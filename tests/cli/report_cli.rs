//! `tdg report`, `tdg tune --report` and `tdg report --watch`: every kind
//! of page made from real inputs (a tuning campaign, a profiled program, the
//! probe, CRIU checkpoints, driver runs), opened in a real headless Chromium
//! (Debian's, scripts/setup.d/80-chromium.sh), which must log nothing to
//! its console; what the page shows is read back from the DOM the browser
//! built: the points each plot draws, its axes' labels, the rows of its
//! tables, and compare.py's p-values.

use crate::formats_support::support;
use crate::support::{stderr, tdg_command, tdg_in};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use testkit::repo;

const CHROMIUM: &str = "chromium";

/// The DOM Chromium built for `page` (scripts run), and every message its
/// console printed. Network lookups fail at once, so a page that tried to
/// fetch anything would log the failed load.
fn render(page: &Path) -> (String, Vec<String>) {
    assert!(
        testkit::have(CHROMIUM),
        "{CHROMIUM} is missing: run scripts/setup (step 80-chromium.sh installs Debian's chromium)"
    );
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "chromium failed: {}", stderr(&out));
    let console = stderr(&out)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(String::from)
        .collect();
    (String::from_utf8_lossy(&out.stdout).into_owned(), console)
}

/// Renders `page`, asserts a clean console and a page that fetches nothing.
fn dom_of(page: &Path) -> String {
    let (dom, console) = render(page);
    assert!(
        console.is_empty(),
        "{}: console: {console:#?}",
        page.display()
    );
    assert!(dom.contains("</main>"), "not rendered: {dom}");
    for fetch in [
        "src=\"http",
        "href=\"http",
        "<link",
        "<script src",
        "<iframe",
        "<img",
    ] {
        assert!(
            !dom.contains(fetch),
            "{}: the page loads something ({fetch})",
            page.display()
        );
    }
    dom
}

/// The element that starts at the first `marker` and ends at the next
/// `</tag>` (figures and tables do not nest on these pages).
fn element<'a>(dom: &'a str, marker: &str, tag: &str) -> &'a str {
    let start = dom
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in the page"));
    let end = dom[start..]
        .find(&format!("</{tag}>"))
        .unwrap_or_else(|| panic!("{marker} is not closed"));
    &dom[start..start + end]
}

/// Every element of the figure whose `data-chart` is `chart`.
fn figures<'a>(dom: &'a str, chart: &str) -> Vec<&'a str> {
    let marker = format!("data-chart=\"{chart}\"");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = dom[from..].find(&marker) {
        let start = from + at;
        let end = start + dom[start..].find("</figure>").expect("figure closed");
        out.push(&dom[start..end]);
        from = end;
    }
    out
}

fn circles(svg: &str) -> usize {
    svg.matches("<circle").count()
}

/// The text of every `<text>` element (axis labels, tick labels, titles).
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

fn has_text(svg: &str, want: &str) -> bool {
    texts(svg).iter().any(|t| t == want)
}

/// Rows of a table's body.
fn body_rows(table: &str) -> usize {
    let body = &table[table.find("<tbody>").expect("tbody")..];
    body.matches("<tr").count()
}

/// The unit a time axis with data up to `max_ns` is printed in.
fn unit(max_ns: f64) -> &'static str {
    if max_ns >= 1e9 {
        "s"
    } else if max_ns >= 1e6 {
        "ms"
    } else if max_ns >= 1e3 {
        "µs"
    } else {
        "ns"
    }
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}", stderr(o));
}

fn log_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Evaluations in the "every evaluation" table of a campaign page.
fn evaluations_shown(page: &str) -> Option<usize> {
    let at = page.find("id=\"campaign-1-all\"")?;
    let table = &page[at..at + page[at..].find("</table>")?];
    Some(body_rows(table))
}

#[test]
fn campaign_page_is_written_by_tune_kept_current_by_watch_and_shows_every_evaluation() {
    let _alone = testkit::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Two of the twelve configurations do not compile: the page lists them.
    let kernel = d.join("gemm.c");
    std::fs::write(
        &kernel,
        format!(
            "#if NB == 64 && NU == 1\n#error \"NB=64 with NU=1 is refused, to show a failed configuration\"\n#endif\n{}",
            std::fs::read_to_string(repo().join("specs/blocked_gemm.c")).unwrap()
        ),
    )
    .unwrap();
    let campaign = d.join("gemm.campaign");
    let final_page = d.join("final.html");
    let watched = d.join("watched.html");
    let mut tune = tdg_command()
        .current_dir(d)
        .arg("tune")
        .arg(repo().join("specs/blocked_gemm.spec"))
        .arg("--impl")
        .arg(&kernel)
        .args([
            "--param",
            "NB=16,32,64",
            "--param",
            "MU=1,4",
            "--param",
            "NU=1,2",
            "--exhaustive",
        ])
        .args([
            "-D",
            "MS=64",
            "-D",
            "NS=64",
            "-D",
            "KS=64",
            "--samples",
            "5",
        ])
        .arg("--campaign")
        .arg(&campaign)
        .arg("--report")
        .arg(&final_page)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut watch = tdg_command()
        .current_dir(d)
        .args(["report", "--interval", "1", "-o"])
        .arg(&watched)
        .arg("--watch")
        .arg(&campaign)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // While the campaign runs, the watched page shows it growing.
    let mut seen: Vec<usize> = Vec::new();
    let mut mid_run = None;
    let tuned = loop {
        if let Some(status) = tune.try_wait().unwrap() {
            break status;
        }
        if let Some(n) = std::fs::read_to_string(&watched)
            .ok()
            .as_deref()
            .and_then(evaluations_shown)
        {
            if !seen.contains(&n) {
                seen.push(n);
                if n > 0 && mid_run.is_none() {
                    let copy = d.join("mid-run.html");
                    std::fs::copy(&watched, &copy).unwrap();
                    mid_run = Some(copy);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let tune_out = tune.wait_with_output().unwrap();
    assert!(tuned.success(), "{}", stderr(&tune_out));
    let lines = log_lines(&campaign.join("tune.jsonl"));
    // The finalists re-timed side by side at the end are shown apart from
    // the search's evaluations.
    let (retimed, log): (Vec<serde_json::Value>, Vec<serde_json::Value>) =
        lines.into_iter().partition(|e| e["phase"] == "final");
    assert_eq!(log.len(), 12);
    let timed: Vec<&serde_json::Value> = log.iter().filter(|e| e["time_ns"].is_f64()).collect();
    let failed = log.len() - timed.len();
    assert_eq!(failed, 2, "{log:?}");
    // The watched page catches up with the end of the campaign, and Ctrl-C
    // leaves the final page without its reload.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&watched)
        .ok()
        .as_deref()
        .and_then(evaluations_shown)
        != Some(12)
    {
        assert!(
            Instant::now() < deadline,
            "the watched page never showed all 12 evaluations"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        seen.iter().any(|&n| 0 < n && n < 12),
        "the watched page was never seen mid-campaign: {seen:?}"
    );
    let mid_run = mid_run.expect("a page mid-campaign");
    let mid = std::fs::read_to_string(&mid_run).unwrap();
    assert!(
        mid.contains("<script>") && mid.contains("location.reload()"),
        "the page reloads itself while watching"
    );
    unsafe {
        libc::kill(watch.id() as i32, libc::SIGINT);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = watch.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "tdg report --watch did not stop on Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let watch_out = watch.wait_with_output().unwrap();
    assert!(status.success(), "{}", stderr(&watch_out));
    let last = std::fs::read_to_string(&watched).unwrap();
    assert!(!last.contains("<script"), "the final page does not reload");
    assert_eq!(evaluations_shown(&last), Some(12));

    // The page mid-run runs its reload script without a console message.
    let mid_dom = dom_of(&mid_run);
    assert!(mid_dom.contains("id=\"reload\""), "says it reloads");

    // The page `tune --report` wrote, as the browser shows it.
    let dom = dom_of(&final_page);
    let max = timed
        .iter()
        .map(|e| e["time_ns"].as_f64().unwrap())
        .fold(0.0, f64::max);
    let evals = figures(&dom, "evaluations");
    assert_eq!(evals.len(), 1);
    assert_eq!(
        circles(evals[0]),
        timed.len(),
        "one point per timed evaluation"
    );
    assert!(
        has_text(evals[0], "evaluation (in the order timed)"),
        "{:?}",
        texts(evals[0])
    );
    assert!(
        has_text(evals[0], &format!("time per call ({})", unit(max))),
        "{:?}",
        texts(evals[0])
    );
    assert!(evals[0].contains("<title>Time per call of every evaluation</title>"));
    let best = figures(&dom, "best-over-time");
    assert_eq!(best.len(), 1);
    assert!(
        has_text(best[0], "wall time since the search started (s)"),
        "{:?}",
        texts(best[0])
    );
    // One plot per parameter, each with every timed evaluation.
    let params = figures(&dom, "parameter");
    assert_eq!(params.len(), 3);
    for (p, fig) in ["NB", "MU", "NU"].iter().zip(&params) {
        assert!(
            has_text(fig, &format!("{p} (compiled with -D{p}=value)")),
            "{:?}",
            texts(fig)
        );
        // The best-per-value line is a polyline: the dots are the evaluations.
        assert_eq!(circles(fig), timed.len());
    }
    let heat = figures(&dom, "heatmap");
    assert_eq!(
        heat.len(),
        1,
        "a heatmap for the two parameters that matter most"
    );
    let failed_table = element(&dom, "id=\"campaign-1-failed\"", "table");
    assert_eq!(body_rows(failed_table), 2);
    assert!(
        failed_table.contains("NB=64 with NU=1 is refused"),
        "the reason is shown"
    );
    assert_eq!(evaluations_shown(&dom), Some(12));
    if !retimed.is_empty() {
        let table = element(&dom, "id=\"campaign-1-retimed\"", "table");
        assert_eq!(
            body_rows(table),
            retimed.len(),
            "every finalist's re-timing"
        );
    }
}

/// A program with three call contexts, profiled through the markers.
fn profiled_program(d: &Path) -> PathBuf {
    ok(&tdg_in(&["instrument", "--runtime-only", "-o", "rt"], d));
    std::fs::write(
        d.join("app.c"),
        r#"#include "tdg_instrument.h"
static volatile double sink;
static double poly(const double *c, int n, double x) { double r = 0; for (int i = n - 1; i >= 0; i--) r = r * x + c[i]; return r; }
int main(void) {
    double c[256] = {1};
    for (int k = 0; k < 600; k++) { int n = k % 3 == 0 ? 256 : (k % 3 == 1 ? 64 : 8); TDG_PROFILE("poly", "n:i", sink = poly(c, n, 0.5), n); }
    return 0;
}
"#,
    )
    .unwrap();
    let cc = Command::new("cc")
        .args([
            "-O2",
            "-Irt",
            "app.c",
            "rt/libtdg_instrument.a",
            "-lpthread",
            "-o",
            "app",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    ok(&cc);
    ok(&tdg_in(&["profile", "-o", "poly.tdgp", "--", "./app"], d));
    d.join("poly.tdgp")
}

#[test]
fn profile_page_shows_every_call_each_context_and_early_against_late() {
    let _heavy = testkit::shared();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let profile = profiled_program(d);
    let o = tdg_in(&["profile", "report", "--json", "poly.tdgp"], d);
    ok(&o);
    let rep: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let contexts = rep["contexts"].as_array().unwrap().len();
    let calls = rep["calls"].as_u64().unwrap() as usize;
    assert_eq!((contexts, calls), (3, 600));
    ok(&tdg_in(&["report", "poly.tdgp", "-o", "profile.html"], d));
    let dom = dom_of(&d.join("profile.html"));
    assert!(dom.contains(&format!(
        "Profile {}",
        profile.file_name().unwrap().to_string_lossy()
    )));
    let table = element(&dom, "id=\"profile-1-r1-contexts\"", "table");
    assert_eq!(body_rows(table), contexts);
    let timeline = figures(&dom, "timeline");
    assert_eq!(timeline.len(), 1);
    assert_eq!(circles(timeline[0]), calls, "every call is a point");
    assert!(
        has_text(timeline[0], "call index (0 .. 599)"),
        "{:?}",
        texts(timeline[0])
    );
    let per_context = figures(&dom, "context-timeline");
    assert_eq!(per_context.len(), contexts);
    for fig in &per_context {
        assert_eq!(circles(fig), calls / contexts, "each context's 200 calls");
        assert!(
            has_text(fig, "call of this context (1 .. 200)"),
            "{:?}",
            texts(fig)
        );
    }
    let early_late = figures(&dom, "early-late");
    assert_eq!(early_late.len(), 1);
    assert_eq!(
        circles(early_late[0]),
        2 * contexts,
        "an early and a late median per context"
    );
    assert!(has_text(early_late[0], "context rank (1 = most time)"));

    // `tdg profile report --svg` writes the same timeline as a file.
    ok(&tdg_in(
        &["profile", "report", "poly.tdgp", "--svg", "poly.svg"],
        d,
    ));
    let svg = std::fs::read_to_string(d.join("poly.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("role=\"img\""),
        "{svg}"
    );
    assert_eq!(circles(&svg), calls);
}

#[test]
fn probe_page_marks_every_level_beside_the_documented_size() {
    let _alone = testkit::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The suite's probe (scripts/test measures it into TDG_CACHE_DIR);
    // without one, measure it here.
    let cached = std::env::var_os("TDG_CACHE_DIR").map(|c| PathBuf::from(c).join("probe.json"));
    let probe = match cached.filter(|p| p.is_file()) {
        Some(p) => p,
        None => {
            eprintln!("no cached probe: measuring one");
            let o = tdg_command()
                .env("TDG_CACHE_DIR", d)
                .args(["probe"])
                .output()
                .unwrap();
            ok(&o);
            d.join("probe.json")
        }
    };
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&probe).unwrap()).unwrap();
    let out = d.join("probe.html");
    let o = tdg_command()
        .arg("report")
        .arg(&probe)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    ok(&o);
    let dom = dom_of(&out);
    let latency = figures(&dom, "latency");
    assert_eq!(latency.len(), 1);
    let points = result["cache_curve"].as_array().unwrap().len();
    assert_eq!(
        circles(latency[0]),
        points,
        "one dot per buffer size measured"
    );
    assert!(has_text(latency[0], "buffer size (bytes, log scale)"));
    assert!(has_text(latency[0], "time per access (ns, log scale)"));
    let caches = result["caches"].as_array().unwrap();
    for c in caches {
        let level = c["level"].as_u64().unwrap();
        assert!(
            texts(latency[0])
                .iter()
                .any(|t| t.starts_with(&format!("L{level} "))),
            "level {level} is marked: {:?}",
            texts(latency[0])
        );
    }
    let table = element(&dom, "id=\"probe-1-caches\"", "table");
    assert_eq!(body_rows(table), caches.len());
    if let Some(doc) = caches[0]["documented_bytes"].as_u64() {
        assert!(
            table.contains(&stats_bytes(doc)),
            "documented L1 {doc} shown: {table}"
        );
    }

    // The CPU values, when the probe measured them: one row per operation
    // and width, one dot per measured latency and one ring per documented.
    if let Some(cpu) = result.get("cpu").filter(|c| !c.is_null()) {
        let fp = cpu["fp"].as_array().unwrap();
        let documented = fp
            .iter()
            .filter(|t| t["documented_latency_cycles"]["value"].is_number())
            .count();
        assert_eq!(
            body_rows(element(&dom, "id=\"probe-1-fp\"", "table")),
            fp.len()
        );
        let latency = figures(&dom, "fp-latency");
        assert_eq!(latency.len(), 1);
        assert_eq!(circles(latency[0]), fp.len() + documented);
        assert!(has_text(latency[0], "latency (core cycles)"));
    } else {
        eprintln!("skipped: the probe record has no CPU values to check");
    }

    // `tdg probe --svg` writes the same plot.
    let svg = d.join("probe.svg");
    let o = tdg_command()
        .env("TDG_CACHE_DIR", probe.parent().unwrap())
        .args(["probe", "--svg"])
        .arg(&svg)
        .output()
        .unwrap();
    ok(&o);
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(
        plot.starts_with("<svg") && plot.contains("<title>Access latency against buffer size"),
        "{plot}"
    );
    assert_eq!(circles(&plot), points);
}

/// stats::bytes as the page prints sizes.
fn stats_bytes(b: u64) -> String {
    if b >= 1 << 20 {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    } else if b >= 1 << 10 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else {
        format!("{b} B")
    }
}

/// `tdg run` of specs/dot.spec with `kernel`, x and y in cache.
fn dot_run(kernel: &Path, out: &Path, format: &str) {
    let o = tdg_command()
        .arg("run")
        .arg(repo().join("specs/dot.spec"))
        .arg("--impl")
        .arg(kernel)
        .args([
            "-D",
            "NS=4096",
            "--flush",
            "none",
            "--samples",
            "15",
            "--format",
            format,
            "--out",
        ])
        .arg(out)
        .output()
        .unwrap();
    ok(&o);
}

/// compare.py's printed U-test p-value (4 decimals) for `new` against `old`.
fn compare_py_pvalue(old: &Path, new: &Path, dump: &Path) -> String {
    let o = Command::new("/usr/bin/python3")
        .arg("/usr/share/benchmark/compare.py")
        .args(["--no-color", "-a", "-d"])
        .arg(dump)
        .arg("benchmarks")
        .args([old, new])
        .output()
        .unwrap();
    assert!(o.status.success(), "compare.py failed: {}", stderr(&o));
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(dump).unwrap()).unwrap();
    let row = rows
        .iter()
        .find(|r| r["name"] == "ddot/NS:4096")
        .expect("the repetitions' row");
    format!("{:.4}", row["utest"]["time_pvalue"].as_f64().unwrap())
}

#[test]
fn runs_page_compares_files_with_compare_pys_statistics() {
    let _alone = testkit::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let first = d.join("first.json");
    let again = d.join("again.json");
    let kahan = d.join("kahan.json");
    let plain = d.join("plain.json");
    dot_run(&repo().join("specs/dot.c"), &first, "gbench");
    dot_run(&repo().join("specs/dot.c"), &again, "gbench");
    dot_run(&support("ddot_kahan.c"), &kahan, "gbench");
    dot_run(&repo().join("specs/dot.c"), &plain, "json");
    let out = d.join("runs.html");
    let o = tdg_command()
        .arg("report")
        .args([&first, &again, &kahan, &plain])
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    ok(&o);
    let dom = dom_of(&out);
    let samples = figures(&dom, "run-samples");
    assert_eq!(samples.len(), 1);
    assert_eq!(circles(samples[0]), 4 * 15, "every sample of the four runs");
    assert!(has_text(samples[0], "run (numbered as in the table below)"));
    assert_eq!(
        body_rows(element(&dom, "id=\"runs-1-summary\"", "table")),
        4
    );
    // Each later file against the first, as compare.py computes it.
    let cmp = element(&dom, "id=\"runs-1-compare\"", "table");
    assert_eq!(
        body_rows(cmp),
        3,
        "again, kahan and the plain run each against the first"
    );
    for (file, n) in [(&again, 1), (&kahan, 2)] {
        let want = compare_py_pvalue(&first, file, &d.join(format!("cmp{n}.json")));
        let row = cmp
            .split("<tr")
            .find(|r| r.contains(&file.display().to_string()))
            .unwrap_or_else(|| panic!("no row for {}", file.display()));
        assert!(
            row.contains(&format!(">{want}<")),
            "compare.py's p-value {want} for {}: {row}",
            file.display()
        );
    }
    let kahan_row = cmp.split("<tr").find(|r| r.contains("kahan.json")).unwrap();
    assert!(
        kahan_row.contains("verdict-yes"),
        "the Kahan sum is slower, significantly: {kahan_row}"
    );
}

/// `tdg checkpoint lib` and the checkpoint tests' application.
fn checkpoint_app(d: &Path) -> PathBuf {
    let apps = repo().join("checkpoint/tests/apps");
    let lib = d.join("hostlib");
    ok(&tdg_command()
        .args(["checkpoint", "lib", "-o"])
        .arg(&lib)
        .output()
        .unwrap());
    let exe = d.join("datasens");
    let cc = Command::new("cc")
        .args(["-O2", "-I"])
        .arg(&lib)
        .arg(apps.join("datasens.c"))
        .arg(apps.join("isort.c"))
        .arg(lib.join("tdg_checkpoint.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    ok(&cc);
    exe
}

#[test]
fn checkpoint_page_shows_samples_against_the_application_and_the_delay_sweep() {
    let _alone = testkit::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let exe = checkpoint_app(d);
    let img = PathBuf::from(format!("/dev/shm/tdg-report-{}", std::process::id()));
    let out_file = d.join("out.txt");
    let run = |args: &[&dyn AsRef<std::ffi::OsStr>], json: &Path| {
        let o = tdg_command().args(args).output().unwrap();
        ok(&o);
        std::fs::write(json, &o.stdout).unwrap();
    };
    let sweep = d.join("sweep.json");
    run(
        &[
            &"checkpoint",
            &"capture",
            &"--site",
            &"search",
            &"--call",
            &"8",
            &"--auto-delay",
            &"--max-delay",
            &"4",
            &"--samples",
            &"5",
            &"--inapp-runs",
            &"5",
            &"--threshold",
            &"0.2",
            &"--json",
            &"-o",
            &img,
            &"--",
            &exe,
            &"search",
            &out_file,
        ],
        &sweep,
    );
    let timing = d.join("time.json");
    run(
        &[&"checkpoint", &"time", &img, &"-r", &"7", &"--json"],
        &timing,
    );
    let inapp = d.join("inapp.json");
    run(
        &[
            &"checkpoint",
            &"inapp",
            &"--site",
            &"search",
            &"--call",
            &"8",
            &"--runs",
            &"7",
            &"--json",
            &"--",
            &exe,
            &"search",
            &out_file,
        ],
        &inapp,
    );
    let page = d.join("checkpoint.html");
    let o = tdg_command()
        .arg("report")
        .args([&sweep, &timing, &inapp])
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&img);
    ok(&o);
    let dom = dom_of(&page);
    let samples = figures(&dom, "checkpoint-samples");
    assert_eq!(samples.len(), 1);
    assert_eq!(
        circles(samples[0]),
        7 + 7,
        "the restored copies' samples and the plain runs'"
    );
    assert!(has_text(
        samples[0],
        "sample (restored copy, or plain run of the application)"
    ));
    let sweep_v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&sweep).unwrap()).unwrap();
    let rows = sweep_v["rows"].as_array().unwrap().len();
    let delay = figures(&dom, "delay-sweep");
    assert_eq!(delay.len(), 1);
    assert_eq!(circles(delay[0]), rows, "one median per delay tried");
    assert!(has_text(
        delay[0],
        "delay (calls replayed before the timed one)"
    ));
    assert!(
        has_text(delay[0], &format!("chosen: {}", sweep_v["chosen"])),
        "{:?}",
        texts(delay[0])
    );
    assert_eq!(
        body_rows(element(&dom, "id=\"checkpoint-1-timings\"", "table")),
        2
    );
    // The checkpoint's samples also stand beside any runs given.
    assert!(dom.contains("data-kind=\"runs\"") || !dom.contains("id=\"runs-"));
}

#[test]
fn bad_inputs_and_a_file_tdg_did_not_write_get_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("junk.json"), "{\"what\": 1}").unwrap();
    std::fs::write(d.join("notes.html"), "<p>my notes</p>").unwrap();
    std::fs::write(d.join("bad.jsonl"), "{\"n\": 1}\n{\"n\": 2}\n").unwrap();
    for (args, want) in [
        (vec!["report", "missing.json"], "missing.json"),
        (
            vec!["report", "junk.json"],
            "not a campaign directory, tune log, profile",
        ),
        (vec!["report", "bad.jsonl"], "line 1: not a tune log entry"),
        (vec!["report", "."], "not a tdg campaign"),
    ] {
        let o = tdg_in(&args, d);
        assert!(!o.status.success(), "{args:?}");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("tdg: error:") && err.contains(want),
            "{args:?}: {err}"
        );
    }
    // A tune log of one evaluation makes a page; it is not written over
    // someone's file.
    std::fs::write(
        d.join("one.jsonl"),
        "{\"n\":1,\"phase\":\"model\",\"config\":{\"NB\":16},\"time_ns\":1000.0,\"mflops\":null,\"error\":null,\"elapsed_s\":0.5,\"best_ns\":1000.0}\n",
    )
    .unwrap();
    let o = tdg_in(&["report", "one.jsonl", "-o", "notes.html"], d);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("not a page tdg report wrote"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(d.join("notes.html")).unwrap(),
        "<p>my notes</p>"
    );
    ok(&tdg_in(&["report", "one.jsonl", "-o", "one.html"], d));
    ok(&tdg_in(&["report", "one.jsonl", "-o", "one.html"], d));
}
