//! No file imports itself back: for every crate of the workspace, the graph
//! whose nodes are its source files and whose edges are the paths a file
//! names into another (`use crate::…`, `super::…`, `self::…`, a child
//! module's items, `#[serde(with = "crate::…")]`) has no cycle. A cycle
//! means two files can only be understood (and changed) together; the fix
//! is to move what both need into a file below them. A `mod` declaration
//! alone is structure, not a use: it only tells which file a module is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit_mut::{self, VisitMut};

/// A module path inside one crate (`[]` is the crate root).
type ModPath = Vec<String>;

/// One crate's modules: where each lives, and what each file names.
struct Crate {
    name: String,
    files: BTreeMap<ModPath, PathBuf>,
    /// Per module, the names its `use` items bring in, each with the path
    /// it was imported from (to see through re-exports).
    imports: BTreeMap<ModPath, BTreeMap<String, Vec<String>>>,
    /// Every path a module names, with the module it is named in.
    uses: Vec<(ModPath, Vec<String>)>,
}

fn parse(file: &Path) -> syn::File {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// The `#[path = "..."]` of a module declaration, if any.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Walks the module tree from `file` (module `at`), whose out-of-line
/// children live in `dir`.
fn collect_modules(krate: &mut Crate, file: &Path, at: ModPath, dir: &Path) {
    krate.files.insert(at.clone(), file.to_path_buf());
    let ast = parse(file);
    let mut visitor = Names {
        stack: at.clone(),
        uses: Vec::new(),
        imports: BTreeMap::new(),
        declared: Vec::new(),
        dir: dir.to_path_buf(),
        dirs: Vec::new(),
        inline: Vec::new(),
    };
    let mut ast = ast;
    visitor.visit_file_mut(&mut ast);
    krate.uses.extend(visitor.uses);
    for m in visitor.inline {
        krate.files.insert(m, file.to_path_buf());
    }
    for (m, names) in visitor.imports {
        krate.imports.entry(m).or_default().extend(names);
    }
    for (child, child_dir, explicit) in visitor.declared {
        let name = child.last().unwrap().clone();
        let file = match explicit {
            Some(p) => child_dir.join(p),
            None if child_dir.join(format!("{name}.rs")).is_file() => {
                child_dir.join(format!("{name}.rs"))
            }
            None => child_dir.join(&name).join("mod.rs"),
        };
        assert!(
            file.is_file(),
            "module {child:?}: no file {}",
            file.display()
        );
        // A mod.rs (or a #[path] file) keeps its children beside it; a.rs
        // keeps them in a/.
        let grand = if file.file_name().is_some_and(|f| f == "mod.rs") {
            file.parent().unwrap().to_path_buf()
        } else {
            child_dir.join(&name)
        };
        collect_modules(krate, &file, child, &grand);
    }
}

/// Gathers, for one file, the paths it names and the modules it declares.
struct Names {
    /// The module being walked (inline modules push their name).
    stack: ModPath,
    uses: Vec<(ModPath, Vec<String>)>,
    imports: BTreeMap<ModPath, BTreeMap<String, Vec<String>>>,
    /// Out-of-line modules: path, the directory their file is in, `#[path]`.
    declared: Vec<(ModPath, PathBuf, Option<String>)>,
    /// The directory out-of-line children of the current module live in.
    dir: PathBuf,
    dirs: Vec<PathBuf>,
    /// Modules written inline (`mod tests { ... }`): they are this file.
    inline: Vec<ModPath>,
}

impl Names {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut path = prefix.clone();
                let name = n.ident.to_string();
                if name != "self" {
                    path.push(name.clone());
                }
                let key = if name == "self" {
                    prefix.last().cloned().unwrap_or_default()
                } else {
                    name
                };
                self.import(key, path);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                self.import(r.rename.to_string(), path);
            }
            syn::UseTree::Glob(_) => self.uses.push((self.stack.clone(), prefix.clone())),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn import(&mut self, name: String, path: Vec<String>) {
        self.uses.push((self.stack.clone(), path.clone()));
        self.imports
            .entry(self.stack.clone())
            .or_default()
            .insert(name, path);
    }
}

impl VisitMut for Names {
    fn visit_item_mod_mut(&mut self, m: &mut syn::ItemMod) {
        let name = m.ident.to_string();
        let mut child = self.stack.clone();
        child.push(name.clone());
        if m.content.is_none() {
            self.declared
                .push((child, self.dir.clone(), path_attr(&m.attrs)));
            return;
        }
        self.inline.push(child);
        self.stack.push(name.clone());
        self.dirs.push(self.dir.clone());
        self.dir = self.dir.join(&name);
        visit_mut::visit_item_mod_mut(self, m);
        self.dir = self.dirs.pop().unwrap();
        self.stack.pop();
    }

    fn visit_item_use_mut(&mut self, u: &mut syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path_mut(&mut self, p: &mut syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 {
            self.uses.push((self.stack.clone(), segments));
        }
        visit_mut::visit_path_mut(self, p);
    }

    /// `#[serde(with = "crate::summary_json")]` names a module in a string.
    fn visit_attribute_mut(&mut self, a: &mut syn::Attribute) {
        let text = quote::ToTokens::to_token_stream(&a.meta).to_string();
        for start in ["\"crate::", "\"super::", "\"self::"] {
            let mut rest = text.as_str();
            while let Some(i) = rest.find(start) {
                let tail = &rest[i + 1..];
                // The token text escapes the string's quotes (`\"`).
                let end = tail.find(['"', '\\']).unwrap_or(tail.len());
                let segments: Vec<String> = tail[..end].split("::").map(str::to_string).collect();
                self.uses.push((self.stack.clone(), segments));
                rest = &tail[end..];
            }
        }
    }
}

impl Crate {
    fn load(name: &str, root: &Path) -> Crate {
        let mut krate = Crate {
            name: name.to_string(),
            files: BTreeMap::new(),
            imports: BTreeMap::new(),
            uses: Vec::new(),
        };
        collect_modules(&mut krate, root, Vec::new(), root.parent().unwrap());
        krate
    }

    /// The module `path` (named in module `from`) leads to, seen through
    /// re-exports; `None` when it leaves the crate.
    fn target(&self, from: &ModPath, path: &[String], depth: u32) -> Option<ModPath> {
        let (mut at, rest): (ModPath, &[String]) = match path.first()?.as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "self" => (from.clone(), &path[1..]),
            "super" => {
                let mut at = from.clone();
                let mut i = 0;
                while path.get(i).is_some_and(|s| s == "super") {
                    at.pop();
                    i += 1;
                }
                (at, &path[i..])
            }
            first => {
                let mut child = from.clone();
                child.push(first.to_string());
                if !self.files.contains_key(&child) {
                    return None;
                }
                (from.clone(), path)
            }
        };
        let mut rest = rest;
        while let Some(seg) = rest.first() {
            let mut next = at.clone();
            next.push(seg.clone());
            if !self.files.contains_key(&next) {
                break;
            }
            at = next;
            rest = &rest[1..];
        }
        // An item the module re-exports lives where it was imported from.
        if let (Some(item), true) = (rest.first(), depth < 8) {
            if let Some(source) = self.imports.get(&at).and_then(|m| m.get(item)) {
                if let Some(t) = self.target(&at, source, depth + 1) {
                    return Some(t);
                }
            }
        }
        Some(at)
    }

    /// File -> file edges, each with one path that makes it.
    fn edges(&self) -> BTreeMap<PathBuf, BTreeMap<PathBuf, String>> {
        let mut edges: BTreeMap<PathBuf, BTreeMap<PathBuf, String>> = BTreeMap::new();
        for (from, path) in &self.uses {
            let Some(to) = self.target(from, path, 0) else {
                continue;
            };
            let (a, b) = (&self.files[from], &self.files[&to]);
            if a != b {
                edges
                    .entry(a.clone())
                    .or_default()
                    .entry(b.clone())
                    .or_insert_with(|| path.join("::"));
            }
        }
        edges
    }
}

/// Every cycle's files, one per strongly connected component, as
/// `a -> b -> a` with the path that makes each step.
fn cycles(edges: &BTreeMap<PathBuf, BTreeMap<PathBuf, String>>) -> Vec<String> {
    let nodes: BTreeSet<&PathBuf> = edges
        .iter()
        .flat_map(|(a, bs)| std::iter::once(a).chain(bs.keys()))
        .collect();
    let reach = |from: &PathBuf| -> BTreeMap<PathBuf, PathBuf> {
        // Breadth-first: each reached node with the node it was reached from.
        let mut seen: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([from.clone()]);
        while let Some(n) = queue.pop_front() {
            for m in edges.get(&n).into_iter().flat_map(|e| e.keys()) {
                if !seen.contains_key(m) {
                    seen.insert(m.clone(), n.clone());
                    queue.push_back(m.clone());
                }
            }
        }
        seen
    };
    let mut reported: BTreeSet<PathBuf> = BTreeSet::new();
    let mut out = Vec::new();
    for n in nodes {
        if reported.contains(n) {
            continue;
        }
        let back = reach(n);
        if !back.contains_key(n) {
            continue;
        }
        // The shortest way round, walked back from `n` to `n`.
        let mut ring = vec![n.clone()];
        let mut at = back[n].clone();
        while &at != n {
            ring.push(at.clone());
            at = back[&at].clone();
        }
        ring.push(n.clone());
        ring.reverse();
        let component: Vec<PathBuf> = reach(n)
            .into_keys()
            .filter(|m| reach(m).contains_key(n))
            .collect();
        let steps: Vec<String> = ring
            .windows(2)
            .map(|w| format!("{} --[{}]--> ", w[0].display(), edges[&w[0]][&w[1]]))
            .collect();
        // Breaking this ring may leave others among the same files: name
        // them all, so one run shows the whole knot.
        let others: Vec<String> = component
            .iter()
            .filter(|m| !ring.contains(m))
            .map(|m| m.display().to_string())
            .collect();
        let knot = if others.is_empty() {
            String::new()
        } else {
            format!(" (in one knot with {})", others.join(", "))
        };
        reported.extend(component);
        out.push(format!("{}{}{knot}", steps.concat(), n.display()));
    }
    out
}

/// The workspace's crates: each member's library and binary roots.
fn crates() -> Vec<(String, PathBuf)> {
    let repo = testkit::repo();
    let manifest = std::fs::read_to_string(repo.join("Cargo.toml")).unwrap();
    let members = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("a members list");
    let mut dirs: Vec<String> = members
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    dirs.push(".".into());
    let mut roots = Vec::new();
    for d in dirs {
        for root in ["src/lib.rs", "src/main.rs"] {
            let file = repo.join(&d).join(root);
            if file.is_file() {
                roots.push((format!("{d}/{root}"), file));
            }
        }
    }
    roots
}

#[test]
fn no_source_file_imports_itself_back_in_any_crate() {
    let roots = crates();
    assert!(roots.len() >= 12, "found only {roots:?}");
    let mut found = Vec::new();
    let mut files = 0;
    for (name, root) in &roots {
        let krate = Crate::load(name, root);
        files += krate.files.len();
        for c in cycles(&krate.edges()) {
            found.push(format!("{}: {c}", krate.name));
        }
    }
    assert!(files > 100, "walked only {files} files");
    assert!(
        found.is_empty(),
        "{} import cycle(s) between source files:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The walker sees each kind of edge, so a cycle made of any is caught.
#[test]
fn the_graph_sees_crate_super_child_and_reexport_paths() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("m")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "mod a;\nmod m;\nmod s;\npub use s::Shared;\n",
    )
    .unwrap();
    // a -> m/inner (crate path), m/inner -> m (super), m -> m/inner (child
    // module path), s -> a (re-export seen through lib.rs), a -> s.
    std::fs::write(
        src.join("a.rs"),
        "use crate::m::inner::f;\npub fn g() { crate::Shared::h(); }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("m/mod.rs"),
        "pub mod inner;\npub fn top() { inner::f(); }\n",
    )
    .unwrap();
    std::fs::write(src.join("m/inner.rs"), "pub fn f() { super::top(); }\n").unwrap();
    std::fs::write(
        src.join("s.rs"),
        "#[derive(serde::Serialize)]\npub struct Shared { #[serde(with = \"crate::a\")] x: u8 }\n",
    )
    .unwrap();
    let krate = Crate::load("t", &src.join("lib.rs"));
    let edges = krate.edges();
    let has = |a: &str, b: &str| {
        edges
            .get(&src.join(a))
            .is_some_and(|e| e.contains_key(&src.join(b)))
    };
    assert!(has("a.rs", "m/inner.rs"), "{edges:?}");
    assert!(has("m/inner.rs", "m/mod.rs"), "{edges:?}");
    assert!(has("m/mod.rs", "m/inner.rs"), "{edges:?}");
    assert!(has("a.rs", "s.rs"), "re-export not followed: {edges:?}");
    assert!(has("s.rs", "a.rs"), "attribute path missed: {edges:?}");
    let found = cycles(&edges);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found
            .iter()
            .any(|c| c.contains("inner.rs --[super::top]-->")),
        "{found:?}"
    );
}

/// A knot holding more than one ring is named whole (the shortest ring, then
/// every other file in it), so one run shows all that must be untangled.
#[test]
fn a_knot_is_reported_once_with_every_file_in_it() {
    let mut edges: BTreeMap<PathBuf, BTreeMap<PathBuf, String>> = BTreeMap::new();
    let mut edge = |a: &str, b: &str| {
        edges
            .entry(PathBuf::from(a))
            .or_default()
            .insert(PathBuf::from(b), format!("crate::{b}"));
    };
    // a -> b -> a and b -> c -> a: one knot of three files; d only leads in.
    edge("a.rs", "b.rs");
    edge("b.rs", "a.rs");
    edge("b.rs", "c.rs");
    edge("c.rs", "a.rs");
    edge("d.rs", "a.rs");
    let found = cycles(&edges);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("a.rs --[crate::b.rs]--> b.rs --[crate::a.rs]--> a.rs")
            && found[0].ends_with("(in one knot with c.rs)"),
        "{found:?}"
    );
}
