//! `tdg checkpoint sites`: one plain run lists every marked site with its
//! call count and per-call times (no CRIU involved).
mod common;

use common::*;

#[test]
fn every_marked_site_is_listed_with_its_calls_and_times() {
    let _serial = exclusive();
    let ws = Workspace::new("sites");
    let exe = ws.build("datasens.c", "datasens", &[]);
    let r = checkpoint::list_sites(&os_args(&[&exe, &"tiny", &ws.out_file()]), None)
        .unwrap_or_else(|e| panic!("{e}"));
    eprint!("{}", r.render_text());
    let names: Vec<&str> = r.sites.iter().map(|s| s.site.as_str()).collect();
    assert_eq!(names, ["empty", "short"]);
    // datasens makes 12 calls of each (CALLS).
    assert!(r
        .sites
        .iter()
        .all(|s| s.calls == 12 && s.slowest.len() == 3));
    let (empty, short) = (&r.sites[0], &r.sites[1]);
    // The ~200 ns chain is timed as such, the empty region as (nearly) nothing.
    assert!(
        short.ns.median > 3.0 * empty.ns.median.max(10.0),
        "empty {:?}, short {:?}",
        empty.ns,
        short.ns
    );
    // The pointer chase's calls are microseconds each, and the total adds up.
    let r = checkpoint::list_sites(&os_args(&[&exe, &"search", &ws.out_file()]), None).unwrap();
    let search = &r.sites[0];
    assert_eq!((search.site.as_str(), search.calls), ("search", 12));
    assert!(search.ns.min > 1000.0, "{:?}", search.ns);
    assert!(search.total_ns >= 12.0 * search.ns.min);
}

#[test]
fn a_program_without_markers_gets_one_clear_error() {
    let e = checkpoint::list_sites(&os_args(&[&"/bin/true"]), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("wrote no site census") && e.contains("tdg_region_begin"),
        "{e}"
    );
    assert!(!e.contains('\n'));
}
