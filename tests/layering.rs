//! The library's top-level modules import one another one way only: no circle
//! (`scan` reads wheels, `wheel_split` uses `scan`; never both ways). Read from the
//! sources: every `crate::<module>` path outside comments and test modules is an
//! edge, and the graph must have no strongly connected component of two or more.
//! The same holds for the TUI's modules (`super::<module>` paths inside `src/tui`):
//! the widgets know no view and not the app, the views know the app, `ui` draws them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const SRC: &str = "crates/kpack/src";

/// The text of `path` without its line comments and its test module (which may
/// import anything).
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]")
            && lines
                .get(i + 1)
                .is_some_and(|n| n.trim_start().starts_with("mod "))
        {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The modules named as `crate::<name>` in `code`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    code.match_indices("crate::")
        .filter(|(i, _)| {
            // Not `kpack_crate::` or similar: the byte before is no identifier.
            *i == 0
                || !code.as_bytes()[i - 1].is_ascii_alphanumeric() && code.as_bytes()[i - 1] != b'_'
        })
        .map(|(i, m)| {
            code[i + m.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .filter(|n| !n.is_empty() && n.chars().next().is_some_and(|c| c.is_ascii_lowercase()))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Top-level module → the top-level modules it imports.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(SRC);
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&root).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" {
            continue;
        }
        let deps = crate_paths(&code_of(&f));
        let e = g.entry(module.clone()).or_default();
        e.extend(deps.into_iter().filter(|d| *d != module));
    }
    g
}

/// The sibling modules named in `code` of a module of `src/tui`: `super::<name>`,
/// each name of `super::{a, b::c}`, and `crate::tui::<name>`.
fn sibling_paths(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for prefix in ["super::", "crate::tui::"] {
        for (i, m) in code.match_indices(prefix) {
            let rest = &code[i + m.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                out.extend(group.split(',').map(|p| ident(p.trim())));
            } else {
                out.insert(ident(rest));
            }
        }
    }
    out.retain(|n| !n.is_empty() && n.chars().next().is_some_and(|c| c.is_ascii_lowercase()));
    out
}

/// The TUI's modules → the sibling modules each imports (its test module and the
/// `mod.rs` that declares them all left out).
fn tui_graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tui");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .filter(|f| f.parent() == Some(root.as_path()))
        .map(|f| f.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|m| m != "mod" && m != "tests")
        .collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for m in &modules {
        let deps = sibling_paths(&code_of(&root.join(format!("{m}.rs"))));
        g.entry(m.clone())
            .or_default()
            .extend(deps.into_iter().filter(|d| d != m && modules.contains(d)));
    }
    g
}

/// The circles of `g`, each shown with its edges inside the circle.
fn shown_circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    circles(g)
        .iter()
        .map(|c| {
            let edges: Vec<String> = c
                .iter()
                .map(|m| {
                    let inside: Vec<&str> = g[m]
                        .iter()
                        .filter(|d| c.contains(d))
                        .map(String::as_str)
                        .collect();
                    format!("{m} -> {}", inside.join(", "))
                })
                .collect();
            edges.join("; ")
        })
        .collect()
}

/// The strongly connected components of two or more modules (Tarjan).
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        if let Some(ws) = t.g.get(v) {
            for w in ws {
                let w = w.as_str();
                if !t.index.contains_key(w) {
                    visit(t, w);
                    let lw = t.low[w];
                    let lv = t.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if t.on.contains(w) {
                    let iw = t.index[w];
                    let lv = t.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
        }
        if t.low[v] == t.index[v] {
            let mut c = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                c.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort();
                t.out.push(c);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn the_library_modules_import_one_way() {
    let g = graph();
    // The reader saw the library: the known layers are there.
    for (m, d) in [("scan", "wheel"), ("wheel_split", "scan"), ("pack", "scan")] {
        assert!(g[m].contains(d), "{m} should import {d}: {:?}", g[m]);
    }
    let shown = shown_circles(&g);
    assert!(shown.is_empty(), "import circles: {shown:#?}");
}

#[test]
fn the_tui_modules_import_one_way() {
    let g = tui_graph();
    // The reader saw the TUI: the views import the app and the widgets, `ui` the views.
    for (m, d) in [
        ("explorerview", "app"),
        ("explorerview", "widgets"),
        ("ui", "kernelsview"),
        ("app", "widgets"),
    ] {
        assert!(g[m].contains(d), "{m} should import {d}: {:?}", g[m]);
    }
    assert!(
        g["widgets"].is_empty(),
        "the widgets import no other module of the TUI: {:?}",
        g["widgets"]
    );
    let shown = shown_circles(&g);
    assert!(shown.is_empty(), "import circles in src/tui: {shown:#?}");
}

#[test]
fn the_circle_finder_finds_a_circle() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let edge = |g: &mut BTreeMap<String, BTreeSet<String>>, a: &str, b: &str| {
        g.entry(a.into()).or_default().insert(b.into());
    };
    edge(&mut g, "scan", "wheel");
    edge(&mut g, "wheel", "pack");
    edge(&mut g, "pack", "scan");
    edge(&mut g, "pack", "zip");
    assert_eq!(circles(&g), vec![vec!["pack", "scan", "wheel"]]);
    assert_eq!(
        crate_paths("use crate::scan::X; // crate::b\nfoo_crate::c; crate::Error; crate::zip"),
        ["b", "scan", "zip"].map(String::from).into_iter().collect()
    );
    assert_eq!(
        sibling_paths(
            "use super::app::{App, View};\nuse super::{tree, widgets::Theme};\nsuper::Foo; crate::tui::ui::draw"
        ),
        ["app", "tree", "ui", "widgets"]
            .map(String::from)
            .into_iter()
            .collect()
    );
}

/// Whether `code` names the type `App` (a word of its own, not `AppEvent`).
fn names_app(code: &str) -> bool {
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    code.match_indices("App")
        .any(|(i, _)| (i == 0 || !ident(b[i - 1])) && b.get(i + 3).is_none_or(|c| !ident(*c)))
}

#[test]
fn the_views_draw_from_their_own_state() {
    // Each view is handed what it draws (its state, the scan, the side pane) by
    // `ui`, never the whole App: a view cannot reach another's state by accident.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tui");
    let mut views: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("view.rs"))
        .collect();
    views.extend(
        [
            "inspector.rs",
            "help.rs",
            "wheelsplit.rs",
            "widgets.rs",
            "detail.rs",
        ]
        .map(String::from),
    );
    assert!(views.len() >= 10, "the views: {views:?}");
    let taking: Vec<&String> = views
        .iter()
        .filter(|v| names_app(&code_of(&root.join(v))))
        .collect();
    assert!(taking.is_empty(), "views that name App: {taking:?}");
    assert!(names_app("fn f(app: &App)") && !names_app("AppEvent MyApp"));
}
