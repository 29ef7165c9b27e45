//! spec-lang knows nothing of C compilers, machines or processes: it is the
//! language alone. Its dependencies say so; this test keeps them saying so
//! (docs/ARCHITECTURE.md, first invariant).

#[test]
fn spec_lang_depends_on_no_tdg_crate_and_nothing_system_level() {
    let manifest = include_str!("../Cargo.toml");
    let deps: Vec<&str> = manifest
        .split("\n[")
        .find(|section| section.starts_with("dependencies]"))
        .expect("a [dependencies] section")
        .lines()
        .skip(1)
        .filter_map(|l| l.split(['.', '=', ' ']).next())
        .filter(|name| !name.is_empty() && !name.starts_with('#'))
        .collect();
    let allowed = ["pest", "pest_derive", "serde", "strsim"];
    for d in &deps {
        assert!(
            allowed.contains(d),
            "spec-lang gained the dependency `{d}`; the language crate must not know about compilers, machines or processes (see docs/ARCHITECTURE.md)"
        );
    }
    assert!(deps.contains(&"pest"), "parsed no dependencies: {deps:?}");
}
