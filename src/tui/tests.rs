//! Screens rendered into ratatui's TestBackend, snapshotted with insta, on the demo
//! tree; key handling driven with synthetic keys.

use super::app::{App, AppEvent, View};
use super::ui;
use super::widgets::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::path::{Path, PathBuf};

/// Pack settings for the demo: group `demo`, these families, into `out`.
fn demo_settings(out: &Path, families: &[&str]) -> super::app::PackSettings {
    super::app::PackSettings {
        group: "demo".into(),
        selection: super::app::Selection {
            families: families.iter().map(|f| f.to_string()).collect(),
            targets: vec![],
        },
        split: false,
        per_family: false,
        output: out.display().to_string(),
        level: 3,
        wheel: false,
        overlay: String::new(),
        force: false,
        // These tests pack subsets of the demo on purpose.
        unassigned: kpack::pack::Unassigned::Drop,
        copy_damaged: false,
    }
}

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo")
}

/// Answer the plan requests the app made, as the event loop's worker would.
/// (A plan that arrives for an older selection makes the app ask again: answered too.)
fn plan_now(app: &mut App) {
    while let Some(i) = app
        .requests
        .iter()
        .position(|r| matches!(r, super::app::Request::Plan(_)))
    {
        let super::app::Request::Plan(sel) = app.requests.remove(i) else {
            unreachable!()
        };
        let p = super::plan(&demo(), &sel);
        app.update(AppEvent::Plan(sel, Box::new(p)));
    }
}

fn key(app: &mut App, code: KeyCode) {
    app.update(AppEvent::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

/// An app on the demo tree with the scan done (the root shown relative, so
/// snapshots do not depend on where the checkout is).
fn scanned() -> App {
    let mut app = App::new(PathBuf::from("assets/demo"), None);
    let r = kpack::scan::scan(
        &demo(),
        &kpack::scan::ScanOptions {
            threads: 1,
            ..Default::default()
        },
        &kpack::event::NoEvents,
    )
    .map_err(|e| e.to_string());
    app.update(AppEvent::ScanDone(Box::new(r)));
    app
}

fn render(app: &App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app, Theme { color: false }))
        .unwrap();
    t
}

fn select(app: &mut App, name: &str) {
    for _ in 0..200 {
        let rows = app.rows();
        let tree = app.tree.as_ref().unwrap();
        if tree.nodes[rows[app.explorer.selected].node].name == name {
            return;
        }
        key(app, KeyCode::Down);
    }
    panic!("{name} not reachable");
}

#[test]
fn explorer_at_both_sizes() {
    let mut app = scanned();
    select(&mut app, "librdc.so");
    insta::assert_snapshot!("explorer_80x24", render(&app, 80, 24).backend());
    insta::assert_snapshot!("explorer_160x48", render(&app, 160, 48).backend());
}

#[test]
fn detail_shows_sections_and_segments_read_in_the_background() {
    let mut app = scanned();
    select(&mut app, "librdc.so");
    assert!(
        app.requests
            .contains(&super::app::Request::Layout("lib/librdc.so".into())),
        "{:?}",
        app.requests
    );
    let n = app.requests.len();
    key(&mut app, KeyCode::Char('s'));
    key(&mut app, KeyCode::Char('s'));
    key(&mut app, KeyCode::Char('s'));
    assert_eq!(
        app.requests
            .iter()
            .filter(|r| matches!(r, super::app::Request::Layout(p) if p == "lib/librdc.so"))
            .count(),
        1,
        "asked once ({n} requests before)"
    );
    let bytes = std::fs::read(demo().join("lib/librdc.so")).unwrap();
    let layout = kpack::elf::rewrite::parse_layout(&bytes).map_err(|e| e.to_string());
    app.update(AppEvent::Layout("lib/librdc.so".into(), Box::new(layout)));
    let screen = format!("{:?}", render(&app, 160, 48).backend());
    assert!(
        screen.contains("segments (") && screen.contains("LOAD"),
        "{screen}"
    );
    assert!(screen.contains(".hip_fatbin"), "{screen}");
    insta::assert_snapshot!("explorer_layout_160x48", render(&app, 160, 48).backend());
}

#[test]
fn the_tree_fills_in_while_the_scan_runs() {
    let full = kpack::scan::scan(
        &demo(),
        &kpack::scan::ScanOptions {
            threads: 1,
            ..Default::default()
        },
        &kpack::event::NoEvents,
    )
    .unwrap();
    let mut app = App::new(PathBuf::from("assets/demo"), None);
    app.update(AppEvent::ScanProgress(6, 19));
    // The first entries arrive: a partial tree, usable at once.
    let some: Vec<_> = full
        .files
        .iter()
        .filter(|f| f.path.starts_with("lib/"))
        .cloned()
        .collect();
    let report = kpack::scan::partial_report("assets/demo", some);
    let tree = super::tree::Tree::build(&report);
    app.update(AppEvent::Partial(Box::new((report, tree))));
    assert!(app.partial);
    let screen = format!("{:?}", render(&app, 80, 24).backend());
    assert!(screen.contains("scanning 6/19"), "{screen}");
    let partial_screen = render(&app, 80, 24).backend().clone();
    select(&mut app, "librdc.so");
    // Open a folder, then the rest arrives: the folder stays open, the selection stays.
    let rows_before = app.rows().len();
    app.update(AppEvent::ScanDone(Box::new(Ok(full))));
    assert!(!app.partial);
    let rows = app.rows();
    let tree = app.tree.as_ref().unwrap();
    assert_eq!(
        tree.nodes[rows[app.explorer.selected].node].name,
        "librdc.so"
    );
    assert!(rows.len() > rows_before, "new entries shown");
    insta::assert_snapshot!("explorer_partial_80x24", partial_screen);
}

/// P while the scan runs: the dialog's selection grows with the scan, Enter waits
/// for its end (a pack started on the partial preselection would refuse, or with
/// F4 drop, the targets the rest of the tree has), then takes every target.
#[test]
fn the_pack_dialog_follows_the_scan_and_waits_for_it() {
    let full = kpack::scan::scan(
        &demo(),
        &kpack::scan::ScanOptions::default(),
        &kpack::event::NoEvents,
    )
    .unwrap();
    // A binary without code for some family of the tree: the first report holds it.
    let family_of = |a: &str| {
        kpack::family::PRESETS
            .iter()
            .position(|(n, _)| kpack::family::Family::parse(n).is_ok_and(|f| f.contains(a)))
    };
    let first = full
        .files
        .iter()
        .filter(|f| !f.bundles.is_empty())
        .find(|f| {
            let one = kpack::scan::partial_report("assets/demo", vec![(*f).clone()]);
            let have: Vec<_> = one.archs.keys().map(|a| family_of(a)).collect();
            full.archs.keys().any(|a| !have.contains(&family_of(a)))
        })
        .cloned()
        .expect("a binary without code for one of the demo's families");
    let report = kpack::scan::partial_report("assets/demo", vec![first]);
    let mut app = App::new(PathBuf::from("assets/demo"), None);
    let tree = super::tree::Tree::build(&report);
    app.update(AppEvent::Partial(Box::new((report, tree))));
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('P'));
    let text = format!("{:?}", render(&app, 120, 30).backend());
    assert!(text.contains("scanning: it can still grow"), "{text}");
    let partial = app.families.selection();
    assert!(full.archs.keys().any(|a| !partial.takes(a)), "{partial:?}");
    key(&mut app, KeyCode::Enter);
    assert!(
        matches!(app.packing.run, Some(super::app::PackState::Confirm { .. }))
            && app.requests.is_empty(),
        "no pack on a partial selection"
    );
    assert!(
        app.packing
            .note
            .as_deref()
            .unwrap()
            .contains("still running")
    );
    app.update(AppEvent::ScanDone(Box::new(Ok(full.clone()))));
    let Some(super::app::PackState::Confirm { settings, .. }) = &app.packing.run else {
        panic!("the dialog stays open")
    };
    for a in full.archs.keys() {
        assert!(settings.selection.takes(a), "{a} is taken: {settings:?}");
    }
    assert_eq!(settings.selection, app.families.selection());
    key(&mut app, KeyCode::Enter);
    assert!(
        app.requests.iter().any(
            |r| matches!(r, super::Request::Pack(s) if s.selection == app.families.selection())
        ),
        "the pack starts with the whole selection"
    );
}

#[test]
fn single_targets_are_packed_on_their_own() {
    let mut app = scanned();
    key(&mut app, KeyCode::Char('2'));
    // Every processor, and every feature-flagged target ID after its processor.
    let rows: Vec<&str> = app
        .families
        .singles
        .iter()
        .map(|(p, _)| p.as_str())
        .collect();
    assert_eq!(
        rows,
        [
            "gfx900",
            "gfx906",
            "gfx908",
            "gfx90a",
            "gfx90a:xnack+",
            "gfx1030"
        ]
    );
    // gfx90X off, then gfx906 and gfx90a:xnack+ alone.
    key(&mut app, KeyCode::Char(' '));
    for t in ["gfx906", "gfx90a:xnack+"] {
        let at = kpack::family::PRESETS.len()
            + app
                .families
                .singles
                .iter()
                .position(|(p, _)| p == t)
                .unwrap();
        while app.families.cursor > at {
            key(&mut app, KeyCode::Up);
        }
        while app.families.cursor < at {
            key(&mut app, KeyCode::Down);
        }
        key(&mut app, KeyCode::Char(' '));
    }
    let sel = app.families.selection();
    assert_eq!(sel.families, ["gfx103X"]);
    assert_eq!(sel.targets, ["gfx906", "gfx90a:xnack+"]);
    // The core plans exactly those targets: one archive each, nothing of gfx900.
    let plan = super::plan(&demo(), &sel).unwrap();
    let units: Vec<&str> = plan.units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(units, ["gfx906", "gfx90a:xnack+", "gfx1030"]);
    plan_now(&mut app);
    insta::assert_snapshot!("families_targets_80x24", render(&app, 80, 24).backend());
    // A single inside a selected preset is not packed on its own.
    key(&mut app, KeyCode::Home);
    for _ in 0..40 {
        key(&mut app, KeyCode::Up);
    }
    key(&mut app, KeyCode::Char(' ')); // gfx90X on again
    assert_eq!(app.families.selection().families, ["gfx90X", "gfx103X"]);
    assert!(app.families.selection().targets.is_empty());
    assert_eq!(app.families.covered_by("gfx906"), Some("gfx90X"));
    plan_now(&mut app);
    insta::assert_snapshot!("families_singles_80x24", render(&app, 80, 24).backend());
}

#[test]
fn scanning_gauge() {
    let mut app = App::new(PathBuf::from("assets/demo"), None);
    app.update(AppEvent::ScanProgress(7, 19));
    insta::assert_snapshot!("scanning_80x24", render(&app, 80, 24).backend());
    // Trial 32: without colours the filled part is reverse video, under the label
    // too; the rest is not.
    let t = render(&app, 80, 24);
    let buf = t.backend().buffer();
    let inner = 78usize;
    let filled = (7.0f64 / 19.0 * inner as f64).round() as u16;
    for x in 1..=inner as u16 {
        let rev = buf[(x, 2)]
            .modifier
            .contains(ratatui::style::Modifier::REVERSED);
        assert_eq!(rev, x <= filled, "column {x} of {filled} filled");
    }
}

#[test]
fn families_view() {
    let mut app = scanned();
    key(&mut app, KeyCode::Char('2'));
    assert_eq!(app.view, View::Families);
    // gfx90X and gfx103X have code in the demo: preselected.
    assert!(app.families.presets[0] && app.families.presets[4]);
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Char(' '));
    assert!(app.families.presets[1]);
    plan_now(&mut app);
    insta::assert_snapshot!("families_80x24", render(&app, 80, 24).backend());
    insta::assert_snapshot!("families_160x48", render(&app, 160, 48).backend());
}

#[test]
fn preview_view_shows_the_core_plan() {
    let mut app = scanned();
    select(&mut app, "vadd_app");
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.view, View::Preview);
    let req = app.requests.pop().expect("a preview request");
    let super::app::Request::Preview { path: rel, group } = req else {
        panic!("not a preview request")
    };
    assert_eq!(rel, "bin/vadd_app");
    // The marker shown names the pack dialog's default group (trial 36: it said
    // "preview", a group no pack uses).
    assert_eq!(group, "rocm");
    let data = std::fs::read(demo().join(&rel)).unwrap();
    let marker = kpack::kpack::Marker {
        kernel_name: rel.clone(),
        kpack_search_paths: vec!["../.kpack/x.kpack".into()],
    };
    let plan = kpack::fatbin::plan_host_only(&data, &marker).map_err(|e| e.to_string());
    app.update(AppEvent::Preview(rel, Box::new(plan)));
    let t = render(&app, 160, 48);
    let text = format!("{}", t.backend());
    assert!(text.contains("wrapper 1: HIPF -> HIPK"), "{text}");
    insta::assert_snapshot!("preview_80x24", render(&app, 80, 24).backend());
    insta::assert_snapshot!("preview_160x48", t.backend());
}

#[test]
fn help_overlay_and_filter() {
    let mut app = scanned();
    key(&mut app, KeyCode::Char('?'));
    assert!(app.help);
    insta::assert_snapshot!("help_80x24", render(&app, 80, 24).backend());
    key(&mut app, KeyCode::Esc);
    assert!(!app.help);
    key(&mut app, KeyCode::Char('/'));
    for c in "rdc".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    key(&mut app, KeyCode::Enter);
    let names: Vec<String> = app
        .rows()
        .iter()
        .map(|r| app.tree.as_ref().unwrap().nodes[r.node].name.clone())
        .collect();
    assert_eq!(names, vec!["lib", "librdc.so"]);
    insta::assert_snapshot!("filter_80x24", render(&app, 80, 24).backend());
    // Trial 30: Esc clears the filter and stays on the entry selected, opening the
    // folders it is in (rocblas/library is closed without the filter).
    let name = |app: &App| {
        app.tree.as_ref().unwrap().nodes[app.rows()[app.explorer.selected].node]
            .name
            .clone()
    };
    key(&mut app, KeyCode::Char('/'));
    key(&mut app, KeyCode::Backspace);
    key(&mut app, KeyCode::Backspace);
    key(&mut app, KeyCode::Backspace);
    for c in "Kernels.so-000-gfx900".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    key(&mut app, KeyCode::Enter);
    select(&mut app, "Kernels.so-000-gfx900.hsaco");
    key(&mut app, KeyCode::Esc);
    assert!(app.explorer.filter.is_empty());
    assert_eq!(name(&app), "Kernels.so-000-gfx900.hsaco");
    assert!(app.rows().len() > 3, "the whole tree shows again");
    // The same from the prompt, while typing.
    select(&mut app, "librdc.so");
    key(&mut app, KeyCode::Char('/'));
    key(&mut app, KeyCode::Char('r'));
    key(&mut app, KeyCode::Esc);
    assert!(app.explorer.filter.is_empty());
}

#[test]
fn inspector_extract_and_verify_requests() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/kpack/zstd.kpack");
    let a = kpack::kpack::Archive::open(&p).unwrap();
    let first = (
        a.index.kernels[0].key.to_string(),
        a.index.kernels[0].arch.to_string(),
    );
    let mut app = App::new(PathBuf::from("zstd.kpack"), Some(a.index.clone()));
    use super::app::{ArchiveAt, Request};
    let at = ArchiveAt::File(PathBuf::from("zstd.kpack"));
    // x asks where, with a default in the current directory; typing edits it.
    key(&mut app, KeyCode::Char('x'));
    let screen = format!("{}", render(&app, 100, 24).backend());
    assert!(screen.contains("zstd.kpack.extracted"), "{screen}");
    app.update(AppEvent::Key(KeyEvent::new(
        KeyCode::Char('u'),
        KeyModifiers::CONTROL,
    )));
    for c in "out-1".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Char('X'));
    key(&mut app, KeyCode::Esc); // cancelled: nothing asked
    key(&mut app, KeyCode::Char('X'));
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Char('v'));
    assert_eq!(
        app.requests,
        vec![
            Request::Extract(
                at.clone(),
                Some(vec![first.clone()]),
                PathBuf::from("out-1")
            ),
            Request::Extract(at.clone(), None, PathBuf::from("zstd.kpack.extracted")),
            Request::VerifyArchive(at)
        ]
    );
    assert_eq!(app.inspector.status.as_deref(), Some("verifying…"));
    app.update(AppEvent::ArchiveDone(Ok("verify: sound".into())));
    let screen = format!("{:?}", render(&app, 80, 24).backend());
    assert!(screen.contains("verify: sound"), "{screen}");
    // What the background thread does for `x`: the core's extract, one file.
    let dir = tempfile::tempdir().unwrap();
    let n = a
        .extract_to(dir.path(), |k| *k.key == *first.0 && *k.arch == *first.1)
        .unwrap();
    assert_eq!(n, 1);
    let dest = kpack::kpack::archive::extract_path(dir.path(), &a.index.kernels[0]).unwrap();
    assert_eq!(
        std::fs::read(dest).unwrap(),
        a.kernel(&a.index.kernels[0]).unwrap().as_ref()
    );
    assert_eq!(
        super::widgets::middle_cut("torch/lib/libtorch_hip.so#3", 15),
        "torch…_hip.so#3"
    );
}

/// Issue #19 item 8: Enter on a `.kpack` in the explorer opens it in the inspector.
#[test]
fn enter_on_an_archive_opens_the_inspector() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("p");
    let settings = demo_settings(&out, &["gfx90X"]);
    let (tx, _rx) = std::sync::mpsc::channel();
    super::run_pack(&demo(), &settings, &tx, &kpack::event::CancelToken::new()).unwrap();
    let mut app2 = App::new(out.clone(), None);
    let r = kpack::scan::scan(
        &out,
        &kpack::scan::ScanOptions::default(),
        &kpack::event::NoEvents,
    )
    .map_err(|e| e.to_string());
    app2.update(AppEvent::ScanDone(Box::new(r)));
    key(&mut app2, KeyCode::Right);
    select(&mut app2, "demo_gfx900.kpack");
    key(&mut app2, KeyCode::Enter);
    let Some(super::app::Request::OpenArchive(rel)) = app2.requests.pop() else {
        panic!("no open request: {:?}", app2.requests);
    };
    assert_eq!(rel, ".kpack/demo_gfx900.kpack");
    let idx = kpack::kpack::Archive::open(&out.join(&rel)).unwrap().index;
    app2.update(AppEvent::ArchiveOpened(rel, Box::new(Ok(idx))));
    assert_eq!(app2.view, View::Inspector);
    let screen = format!("{}", render(&app2, 120, 24).backend());
    assert!(
        screen.contains("key (binary#TU)") && screen.contains("gfx900"),
        "{screen}"
    );
}

#[test]
fn inspector_on_an_archive() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/kpack/zstd.kpack");
    let a = kpack::kpack::Archive::open(&p).unwrap();
    let app = App::new(PathBuf::from("zstd.kpack"), Some(a.index));
    assert_eq!(app.view, View::Inspector);
    insta::assert_snapshot!("inspector_80x24", render(&app, 80, 24).backend());
    insta::assert_snapshot!("inspector_160x48", render(&app, 160, 48).backend());
}

#[test]
fn tiny_terminals_never_panic() {
    let mut app = scanned();
    for v in ['1', '2', '3'] {
        key(&mut app, KeyCode::Char(v));
        for (w, h) in [(1, 1), (0, 0), (2, 3), (40, 5), (10, 40)] {
            render(&app, w, h);
        }
    }
    key(&mut app, KeyCode::Char('?'));
    render(&app, 1, 1);
    render(&app, 12, 4);
    // Below the smallest layout the screen says so (trial 37: at 40x12 names were
    // cut to 2 characters without a word); at the smallest, the views are drawn.
    let screen = format!("{}", render(&app, 40, 12).backend());
    assert!(
        screen.contains("terminal 40x12 is too small") && screen.contains("needs 50x12"),
        "{screen}"
    );
    let screen = format!("{}", render(&app, 50, 12).backend());
    assert!(!screen.contains("too small"), "{screen}");
    key(&mut app, KeyCode::Esc); // the help may cover a 12-line screen
    let screen = format!("{}", render(&app, 50, 12).backend());
    assert!(screen.contains("kpack-tui"), "{screen}");
}

#[test]
fn keys_move_collapse_sort_and_quit() {
    let mut app = scanned();
    let n = app.rows().len();
    key(&mut app, KeyCode::End);
    assert_eq!(app.explorer.selected, n - 1);
    key(&mut app, KeyCode::Home);
    assert_eq!(app.explorer.selected, 0);
    // The first row is an open folder: ← closes it.
    key(&mut app, KeyCode::Left);
    assert!(app.rows().len() < n);
    key(&mut app, KeyCode::Right);
    assert_eq!(app.rows().len(), n);
    key(&mut app, KeyCode::Char('s'));
    assert_eq!(app.explorer.sort, super::tree::Sort::Name);
    key(&mut app, KeyCode::Tab);
    assert_eq!(app.view, View::Families);
    key(&mut app, KeyCode::BackTab);
    assert_eq!(app.view, View::Explorer);
    key(&mut app, KeyCode::Char('q'));
    assert!(app.quit);
}

#[test]
fn families_view_shows_the_core_pack_plan() {
    let mut app = scanned();
    // The demo is small: the view asks for the exact plan by itself (#30 item 7),
    // and shows no guess meanwhile.
    key(&mut app, KeyCode::Char('2'));
    assert!(app.families.planning);
    let text = format!("{}", render(&app, 160, 48).backend());
    assert!(!text.contains("a guess"), "{text}");
    assert!(text.contains("computing the pack plan"), "{text}");
    let Some(super::app::Request::Plan(names)) = app.requests.pop() else {
        panic!("no plan request")
    };
    assert_eq!(names.families, vec!["gfx90X", "gfx103X"]);
    // The same computation `pack --dry-run` does, run here synchronously.
    let plan = super::plan(&demo(), &names);
    let expected = plan
        .as_ref()
        .unwrap()
        .units
        .iter()
        .map(|f| f.code_objects)
        .collect::<Vec<_>>();
    app.update(AppEvent::Plan(names.clone(), Box::new(plan)));
    assert!(!app.families.planning);
    assert!(app.requests.is_empty(), "{:?}", app.requests.len());
    let text = format!("{}", render(&app, 160, 48).backend());
    assert!(
        text.contains("pack plan (every code object compressed: exact)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{:>4} code objects", expected[0])),
        "{text}"
    );
}

#[test]
fn pack_dialog_live_panes_cancel_and_result() {
    use kpack::pack::{PackEvent, Phase};
    let mut app = scanned();
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('P'));
    assert_eq!(app.view, View::Pack);
    // Typing edits the group; it does not trigger shortcuts (q would quit).
    key(&mut app, KeyCode::Backspace);
    key(&mut app, KeyCode::Char('q'));
    assert!(!app.quit);
    insta::assert_snapshot!("pack_confirm_80x24", render(&app, 80, 24).backend());
    key(&mut app, KeyCode::Enter);
    let Some(super::app::Request::Pack(s)) = app.requests.pop() else {
        panic!("no pack request")
    };
    assert_eq!(s.group, "rocq");
    assert_eq!(s.selection.families, vec!["gfx90X", "gfx103X"]);
    for e in [
        PackEvent::Started {
            files: 19,
            bytes: 257_000,
        },
        PackEvent::Phase {
            worker: 0,
            path: "bin/vadd_app".into(),
            phase: Phase::Compress,
            bytes: 20_000,
        },
        PackEvent::Phase {
            worker: 1,
            path: "lib/librdc.so".into(),
            phase: Phase::Rewrite,
            bytes: 30_000,
        },
        PackEvent::FileDone {
            path: "include/vadd.h".into(),
            bytes_in: 164,
            bytes_out: 164,
        },
        PackEvent::Family {
            family: "gfx90X".into(),
            code_objects: 4,
            stored: 6000,
        },
        PackEvent::Warning("share/pipe: special file (fifo) skipped".into()),
    ] {
        app.update(AppEvent::Pack(e));
    }
    let t = format!("{}", render(&app, 160, 48).backend());
    for s in [
        "worker 0: compress bin/vadd_app",
        "worker 1: rewrite  lib/librdc.so",
        "gfx90X              4 code objects",
        "warnings (1)",
        "1 / 19 files",
    ] {
        assert!(t.contains(s), "{s:?} missing:\n{t}");
    }
    // q asks first; another key goes on; q twice quits (the loop then cancels and
    // waits for the pack).
    key(&mut app, KeyCode::Char('q'));
    assert!(app.quit_asked && !app.quit);
    let t = format!("{}", render(&app, 120, 24).backend());
    assert!(t.contains("q again (or y) cancels it"), "{t}");
    key(&mut app, KeyCode::Char('x'));
    assert!(!app.quit_asked && !app.quit);
    key(&mut app, KeyCode::Esc);
    assert!(app.packing.cancel, "Esc asks the core to cancel");
    // Said at once, until the pack ends (#30 item 3).
    let t = format!("{}", render(&app, 100, 24).backend());
    assert!(t.contains("cancelling… removing what was staged"), "{t}");
    app.update(AppEvent::PackDone(Box::new(Err("cancelled".into()))));
    assert!(!app.packing.cancelling);
    let t = format!("{}", render(&app, 80, 24).backend());
    assert!(t.contains("pack cancelled: nothing was written"), "{t}");
    assert!(!t.contains("pack failed"), "{t}");
}

/// Issue #19 item 2: packing into a previous pack's output asks before replacing
/// it (y replaces, as --force; n goes back to the dialog); q twice during a pack quits.
#[test]
fn pack_into_a_previous_output_asks_and_q_twice_quits() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("p");
    let mut settings = demo_settings(&out, &["gfx90X"]);
    let (tx, _rx) = std::sync::mpsc::channel();
    super::run_pack(&demo(), &settings, &tx, &kpack::event::CancelToken::new()).unwrap();
    // Without force the core refuses; the dialog asks instead.
    assert!(super::run_pack(&demo(), &settings, &tx, &kpack::event::CancelToken::new()).is_err());
    let mut app = scanned();
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('P'));
    if let Some(super::app::PackState::Confirm { settings: s, .. }) = &mut app.packing.run {
        s.output = out.display().to_string();
    }
    key(&mut app, KeyCode::Enter);
    assert!(matches!(
        app.packing.run,
        Some(super::app::PackState::Replace(_))
    ));
    let t = format!("{}", render(&app, 100, 24).backend());
    assert!(t.contains("Replace the previous output?"), "{t}");
    key(&mut app, KeyCode::Char('n'));
    assert!(matches!(
        app.packing.run,
        Some(super::app::PackState::Confirm { .. })
    ));
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Char('y'));
    let Some(super::app::Request::Pack(s)) = app.requests.pop() else {
        panic!("no pack request")
    };
    assert!(s.force);
    settings.force = true;
    assert!(super::run_pack(&demo(), &settings, &tx, &kpack::event::CancelToken::new()).is_ok());
    assert!(app.packing());
    key(&mut app, KeyCode::Char('q'));
    key(&mut app, KeyCode::Char('q'));
    assert!(app.quit);
}

#[test]
fn pack_result_screen_from_a_real_pack() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("packed");
    let settings = demo_settings(&out, &["gfx90X", "gfx103X"]);
    let (tx, _rx) = std::sync::mpsc::channel();
    let r = super::run_pack(&demo(), &settings, &tx, &kpack::event::CancelToken::new());
    let mut app = scanned();
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('P'));
    app.update(AppEvent::PackDone(Box::new(r)));
    let t = format!("{}", render(&app, 120, 30).backend());
    assert!(t.contains("verify: sound"), "{t}");
    // One archive per target (the default); a processor's variants share one.
    assert!(
        t.contains(".kpack/demo_gfx900.kpack: 6 code objects"),
        "{t}"
    );
    assert!(
        t.contains(".kpack/demo_gfx90a.kpack: 1 code object,"),
        "{t}"
    );
}

// ---- the trace timeline ----

mod timeline_views {
    use super::super::timeline::{self, Timeline, TimelineEvent};
    use super::super::widgets::Theme;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use std::path::{Path, PathBuf};

    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/traces/hipcc-2obj-4arch.trace")
    }

    fn open() -> Timeline {
        let t = kpack::trace::parse(&std::fs::read(fixture()).unwrap());
        Timeline::new(PathBuf::from("hipcc-2obj-4arch.trace"), t, false)
    }

    fn key(t: &mut Timeline, c: KeyCode) {
        t.update(TimelineEvent::Key(KeyEvent::new(c, KeyModifiers::NONE)));
    }

    fn render(t: &Timeline, w: u16, h: u16) -> Terminal<TestBackend> {
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        term.draw(|f| super::super::timeline_draw::draw(f, t, Theme { color: false }))
            .unwrap();
        term
    }

    /// Issue #19 item 16: durations read as h/m/s, labels keep the directory, `/`
    /// finds jobs by name and `t` narrows to one target.
    #[test]
    fn durations_labels_search_and_target_filter() {
        assert_eq!(timeline::dur(100_171 * 60_000 + 34_000), "69 d 13 h");
        assert_eq!(timeline::dur(2 * 3_600_000 + 5 * 60_000), "2 h 05 m");
        assert_eq!(timeline::dur(150_000), "2 m 30 s");
        assert_eq!(timeline::dur(340), "340 ms");
        let mut t = open();
        // Search: every matching job, n steps through them.
        key(&mut t, KeyCode::Char('/'));
        for c in "vadd".chars() {
            key(&mut t, KeyCode::Char(c));
        }
        key(&mut t, KeyCode::Enter);
        let b = t.current().clone();
        let first = t.selected.unwrap();
        assert!(
            b.label(&b.jobs[first]).contains("vadd"),
            "{}",
            b.label(&b.jobs[first])
        );
        let n = t.find.count(&b);
        assert!(n >= 2 && n < b.jobs.len(), "{n}");
        key(&mut t, KeyCode::Char('n'));
        let second = t.selected.unwrap();
        assert_ne!(first, second);
        assert!(b.label(&b.jobs[second]).contains("vadd"));
        let screen = format!("{}", render(&t, 120, 30).backend());
        assert!(
            screen.contains("\"vadd\" ·") && screen.contains("match(es)"),
            "{screen}"
        );
        // Target: only that arch's device compiles match.
        key(&mut t, KeyCode::Esc);
        assert!(!t.find.active());
        key(&mut t, KeyCode::Char('t'));
        let target = t.find.target.clone().unwrap();
        assert_eq!(target, "gfx900");
        for j in b.jobs.iter().filter(|j| t.find.matches(&b, j)) {
            assert_eq!(b.arch(j), Some("gfx900"));
        }
        assert!(t.find.count(&b) >= 1);
        let screen = format!("{}", render(&t, 120, 30).backend());
        assert!(screen.contains("target gfx900"), "{screen}");
    }

    #[test]
    fn static_timeline_at_both_sizes() {
        let mut t = open();
        assert_eq!(
            t.model.lanes.len(),
            8,
            "8 device compiles overlap at the start"
        );
        key(&mut t, KeyCode::Tab);
        assert_eq!(t.selected, Some(0));
        insta::assert_snapshot!("timeline_80x24", render(&t, 80, 24).backend());
        insta::assert_snapshot!("timeline_160x48", render(&t, 160, 48).backend());
        // Nothing panics in a tiny window.
        render(&t, 1, 1);
        render(&t, 20, 6);
    }

    #[test]
    fn zoom_pan_and_lanes() {
        let mut t = open();
        let span = t.view_span;
        key(&mut t, KeyCode::Char('+'));
        assert!((t.view_span - span / 2.0).abs() < 1e-6);
        key(&mut t, KeyCode::Right);
        assert!(t.view_start > 0.0);
        key(&mut t, KeyCode::Char('0'));
        assert_eq!(t.view_start, 0.0);
        key(&mut t, KeyCode::Down);
        let first = t.selected.unwrap();
        key(&mut t, KeyCode::Down);
        let second = t.selected.unwrap();
        assert_eq!(t.model.lane_of[second], t.model.lane_of[first] + 1);
        key(&mut t, KeyCode::Enter);
        let j = &t.current().jobs[second];
        assert!(
            t.view_span < (j.end - j.start) as f64 * 2.0,
            "zoomed to the job"
        );
        key(&mut t, KeyCode::Char('?'));
        insta::assert_snapshot!("timeline_help", render(&t, 80, 24).backend());
    }

    #[test]
    fn mid_replay() {
        let mut t = open();
        key(&mut t, KeyCode::Char(' '));
        assert!(t.replay.unwrap().playing);
        key(&mut t, KeyCode::Char('>')); // 20×
        t.update(TimelineEvent::Tick(100)); // 2 s of build time
        let r = t.replay.unwrap();
        assert_eq!(r.pos as i64, 2000);
        let (running, done, total) = t.counters();
        assert_eq!(
            (running, done, total),
            (8, 0, 13),
            "all device compiles still running at 2 s"
        );
        key(&mut t, KeyCode::Char(' ')); // pause
        t.update(TimelineEvent::Tick(1000));
        assert_eq!(t.replay.unwrap().pos as i64, 2000, "paused");
        insta::assert_snapshot!("timeline_replay_80x24", render(&t, 80, 24).backend());
        // Play to the end: it stops there.
        key(&mut t, KeyCode::Char(' '));
        t.update(TimelineEvent::Tick(100_000));
        let r = t.replay.unwrap();
        assert!(!r.playing && r.pos as i64 == t.model.wall);
        assert_eq!(t.counters(), (0, 13, 13));
    }

    #[test]
    fn a_real_phc_make_j2_trace() {
        let p =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/traces/phc-make-j2.trace");
        let tr = kpack::trace::parse(&std::fs::read(p).unwrap());
        assert_eq!(tr.diagnostic_count, 0);
        let mut t = Timeline::new(PathBuf::from("phc-make-j2.trace"), tr, false);
        assert_eq!(t.current().jobs.len(), 18);
        assert_eq!(t.model.analysis.peak_parallelism, 2, "make -j2: two slots");
        assert_eq!(t.model.lanes.len(), 2);
        key(&mut t, KeyCode::Tab);
        insta::assert_snapshot!("timeline_phc_make_j2_160x48", render(&t, 160, 48).backend());
    }

    /// Trials 27 and 31: `!` lists the trace's bad lines with their numbers (the
    /// header only counted them); `t` moves the selection off a job it hides; `s`
    /// shows the summary under the lanes below 90 columns.
    #[test]
    fn bad_lines_narrowing_and_the_summary_on_a_narrow_terminal() {
        let text = std::fs::read_to_string(fixture()).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        // Bad lines at known places (1-based numbers after insertion).
        lines.insert(5, "not a trace line".into());
        lines.insert(8, "1\t2".into());
        let bad: Vec<u64> = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| *l == "not a trace line" || *l == "1\t2")
            .map(|(i, _)| i as u64 + 1)
            .collect();
        assert_eq!(bad.len(), 2);
        let tr = kpack::trace::parse(format!("{}\n", lines.join("\n")).as_bytes());
        assert_eq!(tr.diagnostic_count, 2);
        let mut t = Timeline::new(PathBuf::from("bad.trace"), tr, false);
        let screen = format!("{}", render(&t, 120, 30).backend());
        assert!(
            screen.contains("2 bad lines skipped (! lists them)"),
            "{screen}"
        );
        key(&mut t, KeyCode::Char('!'));
        let screen = format!("{}", render(&t, 120, 30).backend());
        for n in &bad {
            assert!(
                screen.contains(&format!("line {n}: ")),
                "line {n}:\n{screen}"
            );
        }
        key(&mut t, KeyCode::Esc);
        assert!(!t.log.open);

        // Select a gfx906 job, then narrow to the first target (gfx900): the
        // selection moves to a gfx900 job.
        while t
            .selected
            .is_none_or(|i| t.current().arch(&t.current().jobs[i]) != Some("gfx906"))
        {
            key(&mut t, KeyCode::Tab);
        }
        key(&mut t, KeyCode::Char('t'));
        let target = t.find.target.clone().expect("a target");
        let b = t.current();
        let sel = t.selected.expect("a job selected");
        assert_eq!(b.arch(&b.jobs[sel]), Some(target.as_str()));

        // 80 columns: the summary is under the lanes; s hides it.
        let screen = format!("{}", render(&t, 80, 24).backend());
        assert!(screen.contains("Summary"), "{screen}");
        key(&mut t, KeyCode::Char('s'));
        let screen = format!("{}", render(&t, 80, 24).backend());
        assert!(!screen.contains("Summary"), "{screen}");
    }

    /// The same step again a minute later (a rebuild).
    fn rebuilt(line: &str) -> String {
        let f: Vec<&str> = line.split('\t').collect();
        let t = |i: usize| f[i].parse::<i64>().unwrap() + 60_000;
        format!("{}\t{}\t{}\t{}\t{}\n", t(0), t(1), t(2), f[3], f[4])
    }

    #[test]
    fn follow_a_growing_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("live.trace");
        let text = std::fs::read_to_string(fixture()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut f = kpack::trace::follow::Follower::new(&p);
        let mut t = Timeline::new(
            PathBuf::from("live.trace"),
            kpack::trace::Trace::default(),
            true,
        );
        // Half the lines, the last one cut mid-way (the writer is mid-write).
        let half = lines.len() / 2;
        let mut part = lines[..half].join("\n");
        part.push('\n');
        part.push_str(&lines[half][..10]);
        std::fs::write(&p, &part).unwrap();
        let u = f.poll().unwrap().unwrap();
        t.update(TimelineEvent::Update(Box::new(u.trace), u.restarted));
        let n1 = t.current().jobs.len();
        assert!(n1 > 0 && n1 < 13);
        insta::assert_snapshot!("timeline_follow_partial", render(&t, 80, 24).backend());
        // The rest arrives.
        let mut rest = lines[half][10..].to_string();
        rest.push('\n');
        for l in &lines[half + 1..] {
            rest.push_str(l);
            rest.push('\n');
        }
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(rest.as_bytes())
            .unwrap();
        let u = f.poll().unwrap().unwrap();
        t.update(TimelineEvent::Update(Box::new(u.trace), u.restarted));
        assert_eq!(t.current().jobs.len(), 13);
        // A rebuild appends the same outputs again: a new build, shown at once.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(rebuilt(lines.last().unwrap()).as_bytes())
            .unwrap();
        let u = f.poll().unwrap().unwrap();
        t.update(TimelineEvent::Update(Box::new(u.trace), u.restarted));
        assert_eq!(t.trace.builds.len(), 2);
        assert_eq!(t.build, 1, "the new build is shown");
        assert_eq!(t.follow.as_ref().unwrap().restarts, 1);
        insta::assert_snapshot!("timeline_follow_new_build", render(&t, 80, 24).backend());
    }
}

#[test]
fn pack_dialog_chooses_archives_per_target_or_family() {
    let mut app = scanned();
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('P'));
    let t = format!("{}", render(&app, 120, 30).backend());
    assert!(
        t.contains("one per target (markers: <group>_@GFXARCH@.kpack)"),
        "{t}"
    );
    key(&mut app, KeyCode::F(3));
    let t = format!("{}", render(&app, 120, 30).backend());
    assert!(t.contains("one per family"), "{t}");
    // The setting reaches the core: a real pack writes family archives.
    let tmp = tempfile::tempdir().unwrap();
    let settings = super::app::PackSettings {
        group: "demo".into(),
        selection: super::app::Selection {
            families: vec!["gfx90X".into(), "gfx103X".into()],
            targets: vec![],
        },
        split: false,
        per_family: true,
        output: tmp.path().join("p").display().to_string(),
        level: 3,
        wheel: false,
        overlay: String::new(),
        force: false,
        unassigned: kpack::pack::Unassigned::Drop,
        copy_damaged: false,
    };
    let (tx, _rx) = std::sync::mpsc::channel();
    let r = super::run_pack(&demo(), &settings, &tx, &kpack::event::CancelToken::new()).unwrap();
    let names: Vec<&str> = r.archives.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(
        names,
        [".kpack/demo_gfx90X.kpack", ".kpack/demo_gfx103X.kpack"]
    );
}

#[test]
fn kernels_view_lists_the_kernels_of_the_selection() {
    let mut app = scanned();
    select(&mut app, "libzkern.so");
    app.update(AppEvent::Key(KeyEvent::new(
        KeyCode::Char('K'),
        KeyModifiers::SHIFT,
    )));
    assert_eq!(app.view, View::Kernels);
    assert!(
        app.requests
            .contains(&super::app::Request::Kernels("lib/libzkern.so".into()))
    );
    assert!(app.kernels.loading);
    // The background read, as the loop would deliver it (a fixture with spills).
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bin/libkernels.so");
    let mut r = kpack::kernels::list_kernels(&lib, &Default::default()).unwrap();
    r.root = PathBuf::from("libkernels.so");
    app.update(AppEvent::Kernels(
        "lib/libkernels.so".into(),
        Box::new(Ok(r)),
    ));
    assert!(!app.kernels.loading);
    insta::assert_snapshot!("kernels_80x24", render(&app, 80, 24).backend());
    // Sorted by code size; `s` sorts by VGPRs next; the cursor moves.
    key(&mut app, KeyCode::Char('s'));
    assert_eq!(app.kernels.sort, kpack::kernels::SortBy::Vgpr);
    key(&mut app, KeyCode::Down);
    assert_eq!(app.kernels.cursor, 1);
    insta::assert_snapshot!("kernels_160x48", render(&app, 160, 48).backend());
    // With colours, a spilling kernel's spills are red and its scratch yellow; the
    // columns beside them are not coloured.
    let mut t = Terminal::new(TestBackend::new(160, 48)).unwrap();
    t.draw(|f| ui::draw(f, &app, Theme { color: true }))
        .unwrap();
    let buf = t.backend().buffer();
    let screen = format!("{}", t.backend());
    let (y, line) = screen
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("49!"))
        .expect("a spilling row");
    let col = |needle: &str| {
        line.find(needle)
            .map(|b| line[..b].chars().count() - 1)
            .unwrap() as u16
    };
    let x = col("49!");
    assert_eq!(
        buf[(x, y as u16)].fg,
        ratatui::style::Color::LightRed,
        "{line}"
    );
    let header = screen.lines().find(|l| l.contains("scratch")).unwrap();
    let hx = header
        .find("lds")
        .map(|b| header[..b].chars().count() - 1)
        .unwrap() as u16;
    assert_ne!(
        buf[(hx + 2, y as u16)].fg,
        ratatui::style::Color::Yellow,
        "lds is not coloured"
    );
}

/// #29 item 1: embedded device code is shown per target in the architectures view
/// (apart from what a pack moves) and in the detail of its binary.
#[test]
fn embedded_code_is_shown_apart_from_packable_code() {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bin");
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("lib")).unwrap();
    for f in ["libembed.so", "libvadd.so"] {
        std::fs::copy(fx.join(f), tmp.path().join("lib").join(f)).unwrap();
    }
    let mut app = App::new(tmp.path().to_path_buf(), None);
    let r = kpack::scan::scan(tmp.path(), &Default::default(), &kpack::event::NoEvents)
        .map_err(|e| e.to_string());
    app.update(AppEvent::ScanDone(Box::new(r)));
    key(&mut app, KeyCode::Char('2'));
    let screen = format!("{:?}", render(&app, 120, 40).backend());
    assert!(
        screen.contains("embedded in binaries' data (loaded by them, not packable):"),
        "{screen}"
    );
    assert!(screen.contains("  gfx90a:xnack+  8.77 KiB"), "{screen}");
    key(&mut app, KeyCode::Char('1'));
    select(&mut app, "libembed.so");
    let screen = format!("{:?}", render(&app, 120, 40).backend());
    assert!(screen.contains("embedded: 2 in its data"), "{screen}");
    assert!(screen.contains(".aot_kernels[0]"), "{screen}");
}

/// #29 item 3: K on a static archive lists its members' kernels (it said 0).
#[test]
fn kernels_of_a_static_archive_are_its_members_kernels() {
    let mut app = scanned();
    select(&mut app, "libkern.a");
    app.update(AppEvent::Key(KeyEvent::new(
        KeyCode::Char('K'),
        KeyModifiers::SHIFT,
    )));
    assert!(
        app.requests
            .contains(&super::app::Request::Kernels("lib/libkern.a".into()))
    );
    // What the background read delivers for that request.
    let r =
        kpack::kernels::list_kernels(&demo().join("lib/libkern.a"), &Default::default()).unwrap();
    assert_eq!(r.kernels.len(), 6);
    app.update(AppEvent::Kernels("lib/libkern.a".into(), Box::new(Ok(r))));
    let screen = format!("{:?}", render(&app, 120, 20).backend());
    assert!(screen.contains("6 kernels in 4 code objects"), "{screen}");
    assert!(screen.contains("libkern.a(saxpy"), "{screen}");
    assert!(screen.contains("libkern.a(vadd_"), "{screen}");
}

#[test]
fn kernels_are_found_by_name_and_read_from_the_inspector() {
    // An archive of real code objects (the fixture's, unbundled).
    let dir = tempfile::tempdir().unwrap();
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bin/libkernels.so");
    let cos = kpack::kernels::unbundle(&std::fs::read(&lib).unwrap()).unwrap();
    let path = dir.path().join("k.kpack");
    let w = kpack::kpack::archive::ArchiveWriter::create(
        &path,
        kpack::kpack::archive::ArchiveMeta {
            group_name: "t".into(),
            gfx_arch_family: "all".into(),
            gfx_arches: cos.iter().map(|c| c.target.clone()).collect(),
        },
        kpack::kpack::Scheme::ZstdPerKernel,
        3,
    )
    .unwrap();
    for c in &cos {
        w.add("lib/libkernels.so#0", &c.target, &c.bytes).unwrap();
    }
    w.finish().unwrap();
    let a = kpack::kpack::Archive::open(&path).unwrap();
    let mut app = App::new(path.clone(), Some(a.index.clone()));
    key(&mut app, KeyCode::Down); // the second entry
    app.update(AppEvent::Key(KeyEvent::new(
        KeyCode::Char('K'),
        KeyModifiers::SHIFT,
    )));
    assert_eq!(app.view, View::Kernels);
    assert_eq!(
        app.requests,
        vec![super::app::Request::Kernels(String::new())]
    );
    let second = (
        a.index.kernels[1].key.to_string(),
        a.index.kernels[1].arch.to_string(),
    );
    assert_eq!(app.kernels.entry.as_ref(), Some(&second));
    let r = kpack::kernels::list_kernels(&path, &Default::default()).unwrap();
    assert_eq!(r.kernels.len(), 10);
    app.update(AppEvent::Kernels(String::new(), Box::new(Ok(r))));
    // Only the selected code object's kernels; `a` shows the whole archive.
    assert_eq!(app.kernels.rows().len(), 5);
    assert!(app.kernels.rows().iter().all(|k| k.target == second.1));
    key(&mut app, KeyCode::Char('a'));
    assert_eq!(app.kernels.rows().len(), 10);
    // `/` finds by name (demangled too); Esc clears.
    key(&mut app, KeyCode::Char('/'));
    for c in "scale<".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.kernels.rows().len(), 4);
    let screen = format!("{:?}", render(&app, 100, 30).backend());
    assert!(screen.contains("matching \"scale<\""), "{screen}");
    key(&mut app, KeyCode::Char('/'));
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.kernels.rows().len(), 10);
}

/// Two small trees from the fixtures: a renamed version, a library replaced by one
/// for other targets, one removed.
fn diff_report() -> kpack::diff::DiffReport {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bin");
    let tmp = tempfile::tempdir().unwrap();
    let (old, new) = (tmp.path().join("old"), tmp.path().join("new"));
    for d in [&old, &new] {
        std::fs::create_dir_all(d.join("lib")).unwrap();
    }
    std::fs::copy(fx.join("libvadd.so"), old.join("lib/libvadd.so.1.0")).unwrap();
    std::fs::copy(fx.join("libvadd.so"), new.join("lib/libvadd.so.1.1")).unwrap();
    std::fs::copy(fx.join("libkernels.so"), old.join("lib/libk.so")).unwrap();
    std::fs::copy(fx.join("libkernels_z.so"), new.join("lib/libk.so")).unwrap();
    std::fs::copy(fx.join("libzkern.so"), old.join("lib/libgone.so")).unwrap();
    let opts = kpack::diff::DiffOptions {
        kernels: true,
        threads: 1,
        ..Default::default()
    };
    let mut r = kpack::diff::diff(&old, &new, &opts).unwrap();
    r.old = PathBuf::from("old");
    r.new = PathBuf::from("new");
    r
}

#[test]
fn diff_view_tables_filter_and_sort() {
    use super::diffview::{DiffView, Section, draw};
    let mut v = DiffView::new(diff_report());
    let render = |v: &DiffView, w, h| {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| draw(f, v, Theme { color: false })).unwrap();
        t
    };
    insta::assert_snapshot!("diff_targets_80x24", render(&v, 80, 24).backend());
    let k = |v: &mut DiffView, c| v.key(KeyEvent::new(c, KeyModifiers::NONE));
    k(&mut v, KeyCode::Tab);
    assert_eq!(v.section, Section::Files);
    insta::assert_snapshot!("diff_files_160x48", render(&v, 160, 48).backend());
    k(&mut v, KeyCode::Tab);
    assert_eq!(v.section, Section::Kernels);
    k(&mut v, KeyCode::Char('/'));
    for c in "spill".chars() {
        k(&mut v, KeyCode::Char(c));
    }
    k(&mut v, KeyCode::Enter);
    let screen = format!("{:?}", render(&v, 160, 48).backend());
    assert!(
        screen.contains("spill_heavy") && !screen.contains("tile_sum"),
        "{screen}"
    );
    k(&mut v, KeyCode::Esc);
    k(&mut v, KeyCode::Char('s'));
    insta::assert_snapshot!("diff_kernels_160x48", render(&v, 160, 48).backend());
    k(&mut v, KeyCode::End);
    assert!(v.cursor > 5);
    k(&mut v, KeyCode::Char('q'));
    assert!(v.quit);
}

#[test]
fn left_goes_to_the_parent_first_and_collapses_on_the_next_press() {
    let mut app = scanned();
    select(&mut app, "librdc.so");
    let parent = {
        let rows = app.rows();
        let tree = app.tree.as_ref().unwrap();
        tree.nodes[rows[app.explorer.selected].node].parent.unwrap()
    };
    key(&mut app, KeyCode::Char('h'));
    let rows = app.rows();
    assert_eq!(rows[app.explorer.selected].node, parent, "on the parent");
    assert!(app.explorer.expanded.contains(&parent), "still open");
    key(&mut app, KeyCode::Char('h'));
    assert!(
        !app.explorer.expanded.contains(&parent),
        "closed on the second press"
    );
}

#[test]
fn a_target_inside_a_selected_preset_is_not_toggled_in_secret() {
    let mut app = scanned();
    key(&mut app, KeyCode::Char('2'));
    // gfx90X is selected (the demo has its code): gfx906 is packed with it.
    let at = kpack::family::PRESETS.len()
        + app
            .families
            .singles
            .iter()
            .position(|(p, _)| p == "gfx906")
            .unwrap();
    while app.families.cursor < at {
        key(&mut app, KeyCode::Down);
    }
    key(&mut app, KeyCode::Char(' '));
    assert!(
        !app.families
            .singles
            .iter()
            .any(|(p, on)| p == "gfx906" && *on),
        "no hidden choice"
    );
    assert!(app.families.selection().targets.is_empty());
    let note = app.families.note.clone().unwrap();
    assert!(note.contains("gfx906 is packed with gfx90X"), "{note}");
    let screen = format!("{:?}", render(&app, 120, 30).backend());
    assert!(screen.contains("deselect gfx90X"), "{screen}");
}

/// A wheel written with our zip writer from the fixtures (torch/lib: a hipcc and a
/// clang-19 CCOB library), with a RECORD that matches (wheel split checks it).
fn fixture_wheel(dir: &Path) -> PathBuf {
    use kpack::wheel::metadata::{record, sha256};
    use kpack::zip::write::{ZipWriter, stored};
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bin");
    let path = dir.join("torch-1.0-py3-none-any.whl");
    let mut members: Vec<(String, Vec<u8>, u32)> = ["libkernels.so", "libkernels_z.so"]
        .iter()
        .map(|lib| {
            (
                format!("torch/lib/{lib}"),
                std::fs::read(fx.join(lib)).unwrap(),
                0o755,
            )
        })
        .collect();
    members.push(("torch/__init__.py".into(), Vec::new(), 0o644));
    members.push((
        "torch-1.0.dist-info/METADATA".into(),
        b"Metadata-Version: 2.1\nName: torch\nVersion: 1.0\n".to_vec(),
        0o644,
    ));
    members.push((
        "torch-1.0.dist-info/WHEEL".into(),
        b"Wheel-Version: 1.0\nTag: py3-none-any\n".to_vec(),
        0o644,
    ));
    let rec_name = "torch-1.0.dist-info/RECORD";
    let listed: Vec<(String, [u8; 32], u64)> = members
        .iter()
        .map(|(n, d, _)| (n.clone(), sha256(d), d.len() as u64))
        .collect();
    members.push((
        rec_name.into(),
        record(&listed, rec_name).into_bytes(),
        0o644,
    ));
    let mut w = ZipWriter::new(std::fs::File::create(&path).unwrap());
    for (name, data, mode) in &members {
        w.add_bytes(name, *mode, stored(data), data).unwrap();
    }
    w.finish().unwrap();
    path
}

#[test]
fn a_wheel_is_split_from_the_families_view() {
    let tmp = tempfile::tempdir().unwrap();
    let whl = fixture_wheel(tmp.path());
    let mut app = App::new(PathBuf::from("torch-1.0-py3-none-any.whl"), None);
    let r = kpack::scan::scan(
        &whl,
        &kpack::scan::ScanOptions::default(),
        &kpack::event::NoEvents,
    )
    .map_err(|e| e.to_string());
    app.update(AppEvent::ScanDone(Box::new(r)));
    key(&mut app, KeyCode::Char('2'));
    let screen = format!("{:?}", render(&app, 120, 30).backend());
    assert!(screen.contains("projected wheels"), "{screen}");
    assert!(screen.contains("torch-device-gfx90a"), "{screen}");
    assert!(screen.contains("P split the wheel"), "{screen}");
    key(&mut app, KeyCode::Char('P'));
    insta::assert_snapshot!(
        "wheel_split_confirm_100x30",
        render(&app, 100, 30).backend()
    );
    key(&mut app, KeyCode::Enter);
    let Some(super::app::Request::Pack(s)) = app.requests.pop() else {
        panic!("no split request");
    };
    assert!(s.wheel);
    assert_eq!(s.overlay, "torch");
    assert_eq!(s.group, "torch-device");
    assert_eq!(
        s.selection.targets,
        ["gfx1030", "gfx900", "gfx90a", "gfx90a:xnack+"]
    );
    // The result screen lists the wheels the core wrote.
    let mut opts = kpack::wheel_split::WheelSplitOptions::new(&s.group, &s.overlay);
    opts.targets = Some(s.selection.targets.clone());
    let out = tmp.path().join("out");
    let report =
        kpack::wheel_split::split_wheel(&whl, &out, &opts, &kpack::event::NoEvents).unwrap();
    app.update(AppEvent::WheelDone(Box::new(Ok(report))));
    let screen = format!("{:?}", render(&app, 120, 30).backend());
    assert!(screen.contains("wheels written"), "{screen}");
    assert!(
        screen.contains("torch_device_gfx90a-1.0-py3-none-any.whl"),
        "{screen}"
    );
    assert!(screen.contains("(gfx90a gfx90a:xnack+)"), "{screen}");
    // #30 trial 9: in a short terminal the install line still shows (it comes before
    // the list), and the list scrolls to its last wheel.
    let screen = format!("{}", render(&app, 80, 12).backend());
    assert!(
        screen.contains("install: pip install --find-links"),
        "{screen}"
    );
    assert!(screen.contains("more below"), "{screen}");
    assert!(!screen.contains("torch_device_gfx90a-1.0"), "{screen}");
    for _ in 0..10 {
        key(&mut app, KeyCode::Down);
    }
    let screen = format!("{}", render(&app, 80, 12).backend());
    assert!(screen.contains("torch_device_gfx90a-1.0"), "{screen}");
}

#[test]
fn diff_view_drills_from_file_to_target_to_kernels_and_back() {
    use super::diffview::{DiffView, Section, draw};
    let mut v = DiffView::new(diff_report());
    let render = |v: &DiffView, w, h| {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| draw(f, v, Theme { color: false })).unwrap();
        format!("{:?}", t.backend())
    };
    let k = |v: &mut DiffView, c| v.key(KeyEvent::new(c, KeyModifiers::NONE));
    k(&mut v, KeyCode::Tab);
    assert_eq!(v.section, Section::Files);
    // Enter on lib/libk.so (rows are largest change first, as in the report): the
    // file's targets, old and new (gfx900/gfx90a before, gfx1030 and gfx90a:xnack+
    // after).
    let libk = v
        .report
        .files
        .iter()
        .find(|f| f.path == "lib/libk.so")
        .unwrap()
        .clone();
    v.cursor = v
        .report
        .files
        .iter()
        .position(|x| x.path == "lib/libk.so")
        .unwrap();
    k(&mut v, KeyCode::Enter);
    assert_eq!(
        v.scope,
        [super::diffview::Scope::File("lib/libk.so".into())]
    );
    let screen = render(&v, 160, 48);
    assert!(screen.contains("lib/libk.so"), "{screen}");
    for t in &libk.targets {
        assert!(screen.contains(&*t.target), "{}: {screen}", t.target);
    }
    assert!(libk.targets.len() >= 4, "{:?}", libk.targets);
    insta::assert_snapshot!("diff_file_targets_120x24", {
        let mut t = Terminal::new(TestBackend::new(120, 24)).unwrap();
        t.draw(|f| draw(f, &v, Theme { color: false })).unwrap();
        t.backend().clone()
    });
    // Enter on a target: that file's kernels of that target only.
    k(&mut v, KeyCode::Enter);
    assert_eq!(v.scope.len(), 2);
    let screen = render(&v, 160, 48);
    let target = match &v.scope[1] {
        super::diffview::Scope::Target(t) => t.clone(),
        s => panic!("{s:?}"),
    };
    let want: Vec<&kpack::diff::KernelDelta> = v
        .report
        .kernels
        .iter()
        .filter(|x| x.binary == "lib/libk.so" && x.target == target)
        .collect();
    assert!(!want.is_empty());
    for x in &want {
        assert!(
            screen.contains(x.demangled.as_deref().unwrap_or(&x.name)),
            "{screen}"
        );
    }
    let others = v
        .report
        .kernels
        .iter()
        .filter(|x| x.target != target)
        .count();
    assert!(others > 0);
    assert!(screen.matches(&format!("{target} ")).count() >= want.len());
    // Back up twice, then the help overlay.
    k(&mut v, KeyCode::Backspace);
    assert_eq!(v.scope.len(), 1);
    k(&mut v, KeyCode::Esc);
    assert!(v.scope.is_empty());
    k(&mut v, KeyCode::Char('?'));
    let screen = render(&v, 100, 30);
    assert!(screen.contains("back up one level"), "{screen}");
    k(&mut v, KeyCode::Char('x'));
    assert!(!v.help);
    // From the targets table, Enter lists a target's kernels over every file.
    k(&mut v, KeyCode::BackTab);
    assert_eq!(v.section, Section::Targets);
    k(&mut v, KeyCode::Enter);
    assert!(matches!(
        v.scope.as_slice(),
        [super::diffview::Scope::Target(_)]
    ));
}

/// Issue #19 item 1: the dialog's text fields edit like text (`-` and `+` are
/// characters, Ctrl-U clears, the cursor moves), the level has its own field, and
/// edits are kept when the dialog is opened again.
#[test]
fn pack_dialog_fields_edit_like_text_and_are_kept() {
    use super::app::PackState;
    let mut app = scanned();
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char(' ')); // a family, so Enter could start
    key(&mut app, KeyCode::Char('P'));
    let ctrl = |app: &mut App, c| {
        app.update(AppEvent::Key(KeyEvent::new(
            KeyCode::Char(c),
            KeyModifiers::CONTROL,
        )))
    };
    // Group: clear it, type one with - and +.
    ctrl(&mut app, 'u');
    for c in "my-group+x".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    // Output: Ctrl-U, a path with '-', then insert in the middle.
    key(&mut app, KeyCode::Down);
    ctrl(&mut app, 'u');
    for c in "out/demo-tui".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    for _ in 0..4 {
        key(&mut app, KeyCode::Left);
    }
    for c in "-packed".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    // Level: its own field, + and ← change it.
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Char('+'));
    key(&mut app, KeyCode::Char('+'));
    key(&mut app, KeyCode::Left);
    let Some(PackState::Confirm { settings, .. }) = &app.packing.run else {
        panic!("dialog closed")
    };
    assert_eq!(settings.group, "my-group+x");
    assert_eq!(settings.output, "out/demo-packed-tui");
    assert_eq!(settings.level, kpack::kpack::archive::DEFAULT_LEVEL + 1);
    let screen = format!("{:?}", render(&app, 100, 24).backend());
    assert!(screen.contains("out/demo-packed-tui"), "{screen}");
    assert!(screen.contains("- 4 +"), "{screen}");
    // Esc and P again: the edits are still there.
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Char('P'));
    let Some(PackState::Confirm { settings, .. }) = &app.packing.run else {
        panic!("dialog closed")
    };
    assert_eq!(settings.output, "out/demo-packed-tui");
    assert_eq!(settings.group, "my-group+x");
}

/// Issue #19 item 11: a damaged file is marked in the tree ('!') and counted in the
/// header; its detail lists the problem.
#[test]
fn damaged_files_are_marked_and_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("t");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    let lib = std::fs::read(demo().join("lib/libvadd.so.1.0")).unwrap();
    std::fs::write(tree.join("lib/libcut.so"), &lib[..lib.len() / 2]).unwrap();
    std::fs::write(tree.join("lib/libok.so"), &lib).unwrap();
    let mut app = App::new(PathBuf::from("t"), None);
    let r = kpack::scan::scan(
        &tree,
        &kpack::scan::ScanOptions::default(),
        &kpack::event::NoEvents,
    )
    .map_err(|e| e.to_string());
    app.update(AppEvent::ScanDone(Box::new(r)));
    key(&mut app, KeyCode::Right);
    select(&mut app, "libcut.so");
    let screen = format!("{:?}", render(&app, 120, 24).backend());
    assert!(screen.contains("! 1 damaged"), "{screen}");
    assert!(screen.contains("! libcut.so"), "{screen}");
    assert!(!screen.contains("! libok.so"), "{screen}");
    assert!(
        screen.lines().any(|l| l.contains("! ") && l.contains("│!")),
        "{screen}"
    );
}

/// Issue #19 item 7: the help is sized to its content (nothing cut at 160 columns),
/// says how many views there are, and lists the current view's keys only.
#[test]
fn help_fits_its_content_and_the_view() {
    let mut app = scanned();
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('?'));
    let screen = format!("{:?}", render(&app, 160, 48).backend());
    assert!(
        screen.contains("pack the tree with these families"),
        "{screen}"
    );
    assert!(
        screen.contains(&format!("1-{}", app.views.len())),
        "{screen}"
    );
    assert!(
        !screen.contains("rewrite preview of a fat binary"),
        "{screen}"
    );
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Char('1'));
    key(&mut app, KeyCode::Char('?'));
    let screen = format!("{:?}", render(&app, 160, 48).backend());
    assert!(
        screen.contains("rewrite preview of a fat binary"),
        "{screen}"
    );
    assert!(
        !screen.contains("pack the tree with these families"),
        "{screen}"
    );
}

/// Issue #19 item 14: at 80×24 the footer keeps `? help` and `q quit` (the view's
/// hints give way, ending in …) and segment rows are cut, not wrapped.
#[test]
fn at_80x24_the_essential_keys_show_and_tables_do_not_wrap() {
    let mut app = scanned();
    select(&mut app, "librdc.so");
    let bytes = std::fs::read(demo().join("lib/librdc.so")).unwrap();
    let layout = kpack::elf::rewrite::parse_layout(&bytes).map_err(|e| e.to_string());
    app.update(AppEvent::Layout("lib/librdc.so".into(), Box::new(layout)));
    for view in ['1', '2', '4'] {
        key(&mut app, KeyCode::Char(view));
        let t = render(&app, 80, 24);
        let screen = format!("{}", t.backend());
        let last = screen
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap()
            .to_string();
        assert!(last.contains("? help · q quit"), "view {view}: {last}");
    }
    key(&mut app, KeyCode::Char('1'));
    let screen = format!("{}", render(&app, 80, 40).backend());
    let rows: Vec<&str> = screen.lines().filter(|l| l.contains("LOAD")).collect();
    assert!(rows.len() >= 3, "{screen}");
    for l in rows {
        assert!(l.contains("off 0x"), "a segment row wrapped: {l}");
    }
}

/// Issue #19 item 12: a kernel-database folder shows the device code of its files
/// (apart from the binaries'); a plain ELF library is a host ELF, not opaque.
#[test]
fn database_device_code_and_host_elfs_are_named() {
    let mut app = scanned();
    select(&mut app, "rocblas");
    let screen = format!("{}", render(&app, 160, 48).backend());
    assert!(screen.contains("kernel-database device code"), "{screen}");
    // And per target in the architectures view, apart from the binaries' code.
    key(&mut app, KeyCode::Char('2'));
    let screen = format!("{}", render(&app, 160, 48).backend());
    assert!(screen.contains("+810 B DB"), "{screen}");
    assert!(
        screen.contains("gfx90a           10.39 KiB in kernel DBs only"),
        "{screen}"
    );
    key(&mut app, KeyCode::Char('1'));
    let tmp = tempfile::tempdir().unwrap();
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bin");
    std::fs::copy(fx.join("libplain.so"), tmp.path().join("libplain.so")).unwrap();
    let mut app = App::new(PathBuf::from("t"), None);
    let r = kpack::scan::scan(
        tmp.path(),
        &kpack::scan::ScanOptions::default(),
        &kpack::event::NoEvents,
    )
    .map_err(|e| e.to_string());
    app.update(AppEvent::ScanDone(Box::new(r)));
    select(&mut app, "libplain.so");
    let screen = format!("{}", render(&app, 120, 24).backend());
    assert!(screen.contains("host ELF (shared library)"), "{screen}");
}

/// Issue #19 item 9: names with numbers sort as numbers, targets by processor
/// number, and every sort reverses with `S`.
#[test]
fn sorts_read_naturally_and_reverse() {
    let tmp = tempfile::tempdir().unwrap();
    for n in ["libk_14.so", "libk_4.so", "libk_2.so"] {
        std::fs::write(tmp.path().join(n), b"x").unwrap();
    }
    let mut app = App::new(PathBuf::from("t"), None);
    let r = kpack::scan::scan(
        tmp.path(),
        &kpack::scan::ScanOptions::default(),
        &kpack::event::NoEvents,
    )
    .map_err(|e| e.to_string());
    app.update(AppEvent::ScanDone(Box::new(r)));
    let names = |app: &App| -> Vec<String> {
        app.rows()
            .iter()
            .map(|r| app.tree.as_ref().unwrap().nodes[r.node].name.clone())
            .collect()
    };
    key(&mut app, KeyCode::Char('s')); // by name
    assert_eq!(names(&app), ["libk_2.so", "libk_4.so", "libk_14.so"]);
    key(&mut app, KeyCode::Char('S'));
    assert_eq!(names(&app), ["libk_14.so", "libk_4.so", "libk_2.so"]);
    // Kernels by target: gfx900 before gfx1030; S reverses.
    let mut app = scanned();
    key(&mut app, KeyCode::Char('4'));
    let report = kpack::kernels::list_kernels(&demo(), &Default::default()).unwrap();
    app.update(AppEvent::Kernels(String::new(), Box::new(Ok(report))));
    while app.kernels.sort != kpack::kernels::SortBy::Target {
        key(&mut app, KeyCode::Char('s'));
    }
    let targets = |app: &App| -> Vec<String> {
        app.kernels
            .rows()
            .iter()
            .map(|k| k.target.clone())
            .collect()
    };
    let t = targets(&app);
    let first_1030 = t.iter().position(|x| x == "gfx1030").unwrap();
    let last_900 = t.iter().rposition(|x| x == "gfx900").unwrap();
    assert!(last_900 < first_1030, "{t:?}");
    key(&mut app, KeyCode::Char('S'));
    let mut r = targets(&app);
    r.reverse();
    assert_eq!(r, t);
}

/// Issue #19 item 10: the filter matches a target or a class as well as paths, and
/// the header shows the matching files' totals.
#[test]
fn the_filter_matches_targets_and_classes_with_totals() {
    let mut app = scanned();
    let filter = |app: &mut App, text: &str| {
        key(app, KeyCode::Esc);
        key(app, KeyCode::Char('/'));
        for c in text.chars() {
            key(app, KeyCode::Char(c));
        }
        key(app, KeyCode::Enter);
    };
    let files = |app: &App| -> Vec<String> {
        let tree = app.tree.as_ref().unwrap();
        app.rows()
            .iter()
            .filter_map(|r| tree.nodes[r.node].file.map(|_| tree.path(r.node)))
            .collect()
    };
    filter(&mut app, "gfx1030");
    let hits = files(&app);
    let report = app.report.as_ref().unwrap();
    let want: Vec<String> = report
        .files
        .iter()
        .filter(|f| {
            f.all_bundles()
                .any(|b| b.targets.iter().any(|t| &*t.arch == "gfx1030"))
        })
        .map(|f| f.path.clone())
        .collect();
    assert!(!want.is_empty());
    for w in &want {
        assert!(hits.contains(w), "{w} not shown: {hits:?}");
    }
    let screen = format!("{}", render(&app, 120, 24).backend());
    assert!(
        screen.contains(&format!(
            "matching: {} ",
            crate::text::count(hits.len() as u64, "entry", "entries")
        )),
        "{screen}"
    );
    filter(&mut app, "kernel_database");
    let report = app.report.as_ref().unwrap();
    let dbs = report
        .files
        .iter()
        .filter(|f| f.kind == kpack::scan::FileKind::KernelDatabase)
        .count();
    assert_eq!(files(&app).len(), dbs);
}

fn mouse(app: &mut App, kind: ratatui::crossterm::event::MouseEventKind, column: u16, row: u16) {
    app.update(AppEvent::Mouse(ratatui::crossterm::event::MouseEvent {
        kind,
        column,
        row,
        modifiers: KeyModifiers::NONE,
    }));
}

/// Issue #19 items 4 and 5: panes that overflow scroll (keys and the wheel over
/// them), say so, and stop at their end; clicks select the row under the pointer in
/// the explorer, the architectures and kernels views, and tabs switch views.
#[test]
fn panes_scroll_to_their_end_and_the_mouse_hits_what_it_points_at() {
    use ratatui::crossterm::event::{MouseButton, MouseEventKind};
    let mut app = scanned();
    // The preview of a binary: longer than 24 rows.
    select(&mut app, "vadd_app");
    let bytes = std::fs::read(demo().join("bin/vadd_app")).unwrap();
    let marker = kpack::kpack::Marker {
        kernel_name: "bin/vadd_app".into(),
        kpack_search_paths: vec!["../.kpack/x.kpack".into()],
    };
    let plan = kpack::elf::rewrite::plan_rewrite(&bytes, &marker)
        .unwrap()
        .plan;
    let plan = kpack::fatbin::Plan::Elf(Box::new(plan));
    app.update(AppEvent::Preview("bin/vadd_app".into(), Box::new(Ok(plan))));
    app.view = View::Preview;
    let screen = format!("{}", render(&app, 80, 24).backend());
    assert!(screen.contains("more below"), "{screen}");
    key(&mut app, KeyCode::End);
    let max = app.drawn.side_max.get();
    assert!(max > 0);
    assert_eq!(app.side_scroll, max);
    for _ in 0..5 {
        key(&mut app, KeyCode::Char('j'));
        key(&mut app, KeyCode::PageDown);
    }
    assert_eq!(app.side_scroll, max, "stops at the end");
    let screen = format!("{}", render(&app, 80, 24).backend());
    assert!(screen.contains(" end "), "{screen}");
    key(&mut app, KeyCode::Char('g'));
    assert_eq!(app.side_scroll, 0);

    // The explorer: a click selects the row under the pointer (not the one above).
    key(&mut app, KeyCode::Char('1'));
    let t = render(&app, 100, 30);
    let list = app.drawn.list.get();
    let screen = format!("{}", t.backend());
    let row_of = |name: &str| -> u16 {
        screen
            .lines()
            .position(|l| l.contains(name))
            .unwrap_or_else(|| panic!("{name} not on screen:\n{screen}")) as u16
    };
    let y = row_of("librdc.so");
    assert!(y >= list.y);
    mouse(&mut app, MouseEventKind::Down(MouseButton::Left), 5, y);
    let selected = |app: &App| {
        app.tree.as_ref().unwrap().nodes[app.rows()[app.explorer.selected].node]
            .name
            .clone()
    };
    assert_eq!(selected(&app), "librdc.so");
    // Its detail overflows at 100x14 once the layout is read: Shift-↓ and the wheel
    // over the detail scroll it, up to its end.
    let layout =
        kpack::elf::rewrite::parse_layout(&std::fs::read(demo().join("lib/librdc.so")).unwrap())
            .map_err(|e| e.to_string());
    app.update(AppEvent::Layout("lib/librdc.so".into(), Box::new(layout)));
    render(&app, 100, 14);
    let side = app.drawn.side.get();
    assert!(app.drawn.side_max.get() > 0);
    app.update(AppEvent::Key(KeyEvent::new(
        KeyCode::Down,
        KeyModifiers::SHIFT,
    )));
    assert_eq!(app.side_scroll, 1);
    for _ in 0..50 {
        mouse(&mut app, MouseEventKind::ScrollDown, side.x + 2, side.y + 2);
    }
    assert_eq!(app.side_scroll, app.drawn.side_max.get());
    assert_eq!(selected(&app), "librdc.so", "the tree did not move");
    // Trial 18: with the detail focused by a click, the wheel over the list moves
    // the list, and a click on a tab leaves the focus behind.
    mouse(
        &mut app,
        MouseEventKind::Down(MouseButton::Left),
        side.x + 2,
        side.y + 2,
    );
    assert!(app.side_focus);
    let list = app.drawn.list.get();
    mouse(&mut app, MouseEventKind::ScrollUp, list.x + 2, list.y + 1);
    assert_ne!(
        selected(&app),
        "librdc.so",
        "the list moved under the wheel"
    );
    mouse(&mut app, MouseEventKind::ScrollDown, list.x + 2, list.y + 1);
    assert_eq!(selected(&app), "librdc.so");

    // A click on a tab switches view; a click in the families list picks that row.
    let t = format!("{}", render(&app, 100, 30).backend());
    let x = t.lines().next().unwrap().find("2:Architectures").unwrap() as u16;
    mouse(&mut app, MouseEventKind::Down(MouseButton::Left), x + 2, 0);
    assert_eq!(app.view, View::Families);
    assert!(!app.side_focus, "the focus stayed in the Explorer");
    render(&app, 100, 30);
    let list = app.drawn.list.get();
    mouse(
        &mut app,
        MouseEventKind::Down(MouseButton::Left),
        list.x + 1,
        list.y + 2,
    );
    assert_eq!(app.families.cursor, 2);
}

/// Issue #19 item 5, trials 18 and 19: `w` (or → on a file) moves the focus into the
/// side pane (the arrows then scroll it, to its end), and `w`/←/Esc back to the
/// list. The focus shows in the border (thick), not over the pane's title. Tab
/// always switches view, whatever the row, and the focus does not follow.
#[test]
fn w_focuses_the_detail_and_tab_always_switches_view() {
    let mut app = scanned();
    select(&mut app, "librdc.so");
    let layout =
        kpack::elf::rewrite::parse_layout(&std::fs::read(demo().join("lib/librdc.so")).unwrap())
            .map_err(|e| e.to_string());
    app.update(AppEvent::Layout("lib/librdc.so".into(), Box::new(layout)));
    render(&app, 100, 14);
    assert!(app.drawn.side_max.get() > 0);
    let sel = app.explorer.selected;
    key(&mut app, KeyCode::Char('w'));
    assert!(app.side_focus);
    assert_eq!(app.view, View::Explorer);
    let screen = format!("{}", render(&app, 100, 14).backend());
    assert!(
        screen.contains("┏ detail "),
        "thick border, title kept:\n{screen}"
    );
    assert!(screen.contains("back to the list"), "{screen}");
    for _ in 0..100 {
        key(&mut app, KeyCode::Down);
    }
    assert_eq!(
        app.side_scroll,
        app.drawn.side_max.get(),
        "scrolled to the end"
    );
    assert_eq!(app.explorer.selected, sel, "the tree did not move");
    key(&mut app, KeyCode::Esc);
    assert!(!app.side_focus);
    let screen = format!("{}", render(&app, 100, 14).backend());
    assert!(screen.contains("┌ detail "), "{screen}");
    key(&mut app, KeyCode::Right);
    assert!(app.side_focus, "→ on a file goes into its detail");
    key(&mut app, KeyCode::Left);
    assert!(!app.side_focus);
    key(&mut app, KeyCode::Down);
    assert_ne!(app.explorer.selected, sel);

    // One Tab reaches the next view from a file whose detail overflows, and the
    // focus stays behind.
    key(&mut app, KeyCode::Up);
    render(&app, 100, 14);
    key(&mut app, KeyCode::Char('w'));
    key(&mut app, KeyCode::Tab);
    assert_eq!(app.view, View::Families);
    assert!(!app.side_focus, "focus does not leak into the next view");
    key(&mut app, KeyCode::Char('1'));
    assert_eq!(app.view, View::Explorer);
    assert!(!app.side_focus);
}

/// Issue #19 item 9: the inspector lists bundle indices in number order (`#2`
/// before `#10`) and targets by processor number.
#[test]
fn the_inspector_sorts_keys_and_targets_naturally() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("n.kpack");
    let w = kpack::kpack::ArchiveWriter::create(
        &path,
        kpack::kpack::ArchiveMeta {
            group_name: "n".into(),
            gfx_arch_family: "all".into(),
            gfx_arches: vec!["gfx900".into(), "gfx1030".into()],
        },
        kpack::kpack::Scheme::ZstdPerKernel,
        3,
    )
    .unwrap();
    for k in ["lib/a.so#10", "lib/a.so#2", "lib/a.so#1"] {
        for t in ["gfx1030", "gfx900"] {
            w.add(k, t, b"code").unwrap();
        }
    }
    w.finish().unwrap();
    let a = kpack::kpack::Archive::open(&path).unwrap();
    let app = App::new(PathBuf::from("n.kpack"), Some(a.index));
    let shown: Vec<(String, String)> = app
        .inspector
        .index
        .as_ref()
        .unwrap()
        .kernels
        .iter()
        .map(|k| (k.key.to_string(), k.arch.to_string()))
        .collect();
    let want: Vec<(String, String)> = ["lib/a.so#1", "lib/a.so#2", "lib/a.so#10"]
        .iter()
        .flat_map(|k| ["gfx900", "gfx1030"].map(|t| (k.to_string(), t.to_string())))
        .collect();
    assert_eq!(shown, want);
}

/// Issue #19 item 4: in the diff view a click selects the row under the pointer, a
/// second click on it drills in, the wheel moves.
#[test]
fn the_diff_view_answers_the_mouse() {
    use super::diffview::{DiffView, Section, draw};
    use ratatui::crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let mut v = DiffView::new(diff_report());
    v.key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    assert_eq!(v.section, Section::Files);
    let mut t = Terminal::new(TestBackend::new(120, 30)).unwrap();
    t.draw(|f| draw(f, &v, Theme { color: false })).unwrap();
    let (r, _) = v.drawn.get();
    let click = |v: &mut DiffView, row: u16| {
        v.mouse(MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column: r.x + 2,
            row,
            modifiers: KeyModifiers::NONE,
        })
    };
    click(&mut v, r.y + 1);
    assert_eq!(v.cursor, 1);
    click(&mut v, r.y + 1);
    assert_eq!(v.scope.len(), 1, "a second click drills in");
}

/// Issue #19 item 20: the README's screen of the explorer is what the explorer draws
/// (80×14, lib/librdc.so selected).
#[test]
fn the_readme_screen_is_what_the_explorer_draws() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let start = readme.find(" kpack-tui  1:Explorer").unwrap();
    let block: Vec<&str> = readme[start..]
        .lines()
        .take_while(|l| *l != "```")
        .collect();
    let mut app = scanned();
    select(&mut app, "librdc.so");
    // As in a terminal, the binary's sections and segments have been read.
    let layout =
        kpack::elf::rewrite::parse_layout(&std::fs::read(demo().join("lib/librdc.so")).unwrap())
            .map_err(|e| e.to_string());
    app.update(AppEvent::Layout("lib/librdc.so".into(), Box::new(layout)));
    let screen = format!("{}", render(&app, 80, block.len() as u16).backend());
    let drawn: Vec<String> = screen
        .lines()
        .map(|l| l.trim_matches('"').trim_end().to_string())
        .collect();
    let want: Vec<String> = block.iter().map(|l| l.trim_end().to_string()).collect();
    assert_eq!(drawn, want, "regenerate the README screen");
}

/// #30 item 1: a packed tree's targets are the code in its archives. The packed demo
/// shows gfx1030 (whose code is only in `.kpack/demo_gfx1030.kpack` now), preselects
/// gfx103X, and the default re-pack keeps gfx1030's kernels instead of dropping them.
#[test]
fn a_packed_trees_archived_targets_are_shown_preselected_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let packed = tmp.path().join("packed");
    let (tx, _rx) = std::sync::mpsc::channel();
    let r = super::run_pack(
        &demo(),
        &demo_settings(&packed, &["gfx90X", "gfx103X"]),
        &tx,
        &kpack::event::CancelToken::new(),
    );
    assert!(r.is_ok(), "{r:?}");
    let mut app = App::new(packed.clone(), None);
    let report = kpack::scan::scan(
        &packed,
        &kpack::scan::ScanOptions::default(),
        &kpack::event::NoEvents,
    )
    .map_err(|e| e.to_string());
    app.update(AppEvent::ScanDone(Box::new(report)));
    let archs: Vec<String> = app.report.as_ref().unwrap().archs.keys().cloned().collect();
    assert!(archs.contains(&"gfx1030".to_string()), "{archs:?}");
    assert!(
        app.families.presets[0] && app.families.presets[4],
        "gfx90X and gfx103X preselected"
    );
    key(&mut app, KeyCode::Char('2'));
    let screen = format!("{}", render(&app, 120, 30).backend());
    assert!(screen.contains("gfx1030"), "{screen}");
    // The default re-pack, with what the view preselected: nothing dropped.
    let again = tmp.path().join("again");
    let mut s = demo_settings(&again, &[]);
    s.selection = app.families.selection();
    let r = super::run_pack(&packed, &s, &tx, &kpack::event::CancelToken::new()).unwrap();
    let l = kpack::kpack::ledger::Ledger::read(&again)
        .unwrap()
        .unwrap()
        .1;
    assert!(l.dropped.is_empty(), "{:?}", l.dropped);
    let kept: std::collections::BTreeSet<&str> = l
        .binaries
        .iter()
        .flat_map(|b| b.kernels.iter().map(|k| &*k.target))
        .collect();
    assert!(kept.contains("gfx1030"), "{kept:?}");
    assert!(
        r.verified && r.verify_faults.is_empty(),
        "{:?}",
        r.verify_faults
    );
}

/// #30 (trial 20, 29, 26, 10, 14, 17): drill-downs go back with Esc or Backspace,
/// Enter on a row without a preview says why (a static archive: copied unchanged),
/// any key closes the help, Esc clears a Kernels search kept with Enter, and Tab into
/// the Kernels view lists the tree as its digit does.
#[test]
fn drill_downs_go_back_and_keys_that_do_nothing_say_why() {
    let mut app = scanned();
    // K from the Explorer, Esc back.
    select(&mut app, "librdc.so");
    app.update(AppEvent::Key(KeyEvent::new(
        KeyCode::Char('K'),
        KeyModifiers::SHIFT,
    )));
    assert_eq!(app.view, View::Kernels);
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.view, View::Explorer);
    // Enter on a fat binary: its preview; Backspace back.
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.view, View::Preview);
    key(&mut app, KeyCode::Backspace);
    assert_eq!(app.view, View::Explorer);
    // Enter on a static archive: no preview, and the footer says why.
    key(&mut app, KeyCode::Home);
    select(&mut app, "libkern.a");
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.view, View::Explorer);
    let screen = format!("{}", render(&app, 160, 24).backend());
    assert!(
        screen.contains("lib/libkern.a: a static archive: pack copies it unchanged"),
        "{screen}"
    );
    // Its detail says what it is and names its members (trial 26).
    let screen = format!("{}", render(&app, 160, 48).backend());
    assert!(screen.contains("fat_binary (static archive)"), "{screen}");
    assert!(screen.contains("member saxpy_b.o"), "{screen}");
    // The next key clears the note.
    key(&mut app, KeyCode::Down);
    let screen = format!("{}", render(&app, 160, 24).backend());
    assert!(
        !screen.contains("a static archive: pack copies"),
        "{screen}"
    );
    // A symlink says what it points to.
    select(&mut app, "libvadd.so");
    key(&mut app, KeyCode::Enter);
    assert!(
        app.explorer
            .note
            .as_deref()
            .is_some_and(|n| n.contains("a symlink to libvadd.so.1")),
        "{:?}",
        app.explorer.note
    );
    // Any key closes the help, and does nothing else.
    key(&mut app, KeyCode::Char('?'));
    assert!(app.help);
    let before = app.explorer.selected;
    key(&mut app, KeyCode::Down);
    assert!(!app.help);
    assert_eq!(app.explorer.selected, before);
    // Tab into the Kernels view asks for the tree's kernels, as its digit does.
    app.requests.clear();
    app.kernels.report = None;
    app.kernels.loading = false; // K's read above never answered in this test
    while app.view != View::Kernels {
        key(&mut app, KeyCode::Tab);
    }
    assert!(
        app.requests
            .contains(&super::app::Request::Kernels(String::new())),
        "{:?}",
        app.requests
    );
    // A search kept with Enter is cleared by Esc; the next Esc goes nowhere (Tab
    // is no drill-down).
    key(&mut app, KeyCode::Char('/'));
    key(&mut app, KeyCode::Char('v'));
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.kernels.filter, "v");
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.kernels.filter, "");
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.view, View::Kernels);
}

/// #30 (trial 11, 13): in the pack dialog the footer offers no key the fields
/// swallow, and Enter with an empty group says what is missing instead of nothing.
#[test]
fn the_pack_dialog_says_why_enter_did_not_start() {
    let mut app = scanned();
    key(&mut app, KeyCode::Char('2'));
    app.update(AppEvent::Key(KeyEvent::new(
        KeyCode::Char('P'),
        KeyModifiers::SHIFT,
    )));
    assert_eq!(app.view, View::Pack);
    let screen = format!("{}", render(&app, 160, 30).backend());
    assert!(!screen.contains("? help · q quit"), "{screen}");
    // Empty the group (the first field), then Enter.
    for _ in 0..40 {
        key(&mut app, KeyCode::Backspace);
    }
    key(&mut app, KeyCode::Enter);
    assert!(matches!(
        app.packing.run,
        Some(super::app::PackState::Confirm { .. })
    ));
    let screen = format!("{}", render(&app, 160, 30).backend());
    assert!(
        screen.contains("the group is empty: type its name"),
        "{screen}"
    );
}

/// #30 item 5 (trial 6): the rewrite preview of a fat binary inside a wheel reads the
/// member from the zip ("not an ELF file" before): the plan is the one of the same
/// library outside the wheel.
#[test]
fn the_preview_of_a_wheel_member_reads_it_from_the_zip() {
    let tmp = tempfile::tempdir().unwrap();
    let whl = fixture_wheel(tmp.path());
    let marker = kpack::kpack::Marker {
        kernel_name: "torch/lib/libkernels.so".into(),
        kpack_search_paths: vec!["../../.kpack/preview_@GFXARCH@.kpack".into()],
    };
    let got = super::preview_plan(&whl, "torch/lib/libkernels.so", &marker).unwrap();
    let lib = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bin/libkernels.so"),
    )
    .unwrap();
    let want = kpack::elf::rewrite::plan_rewrite(&lib, &marker)
        .unwrap()
        .plan;
    let kpack::fatbin::Plan::Elf(got) = got else {
        panic!("an ELF plan: {got:?}")
    };
    assert_eq!(format!("{got:?}"), format!("{want:?}"));
    let e = super::preview_plan(&whl, "torch/lib/nothere.so", &marker).unwrap_err();
    assert!(e.contains("not a member"), "{e}");
}

/// #30 item 5 for PE images, #28 item 2: the TUI's rewrite preview of a DLL is the
/// PE plan the CLI's `preview` prints (it said "not an ELF file"), drawn in the pane.
#[test]
fn the_preview_of_a_dll_is_the_pe_plan() {
    let dll = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bin/libkpe.dll");
    let marker = kpack::kpack::Marker {
        kernel_name: "libkpe.dll".into(),
        kpack_search_paths: vec![".kpack/preview_@GFXARCH@.kpack".into()],
    };
    let got = super::preview_plan(&dll, "libkpe.dll", &marker).unwrap();
    let want = kpack::coff::rewrite::plan_rewrite(&std::fs::read(&dll).unwrap(), &marker)
        .unwrap()
        .plan;
    let kpack::fatbin::Plan::Pe(p) = &got else {
        panic!("a PE plan: {got:?}")
    };
    assert_eq!(format!("{p:?}"), format!("{want:?}"));
    let mut app = scanned();
    app.update(AppEvent::Preview("libkpe.dll".into(), Box::new(Ok(got))));
    app.view = View::Preview;
    let t = render(&app, 160, 48);
    let text = format!("{}", t.backend());
    assert!(text.contains("of .hip_fat raw data removed"), "{text}");
    assert!(text.contains("marker: section .kpackrf at RVA"), "{text}");
    assert!(text.contains("wrapper 0 at RVA"), "{text}");
}

/// #30 item 2 and trial 12: the dialog packs with the CLI's safe default (code for
/// targets not selected stops the pack), F4 drops it instead and F5 copies damaged
/// binaries; a refusal says which key to press and Enter goes back to the dialog.
#[test]
fn the_dialog_stops_on_unselected_code_by_default_and_f4_drops_it() {
    let tmp = tempfile::tempdir().unwrap();
    let mut app = scanned();
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('P'));
    if let Some(super::app::PackState::Confirm { settings: s, .. }) = &mut app.packing.run {
        assert_eq!(s.unassigned, kpack::pack::Unassigned::Error);
        assert!(!s.copy_damaged);
        s.output = tmp.path().join("out").display().to_string();
        // One family of the two the demo needs.
        s.selection.families = vec!["gfx103X".into()];
    }
    let t = format!("{}", render(&app, 100, 30).backend());
    assert!(
        t.contains("stop: code for targets not selected stops the pack (F4: drop it)"),
        "{t}"
    );
    assert!(
        t.contains("stop the pack (F5: copy them as they are)"),
        "{t}"
    );
    // What the selection leaves out is listed, per target, before Enter.
    assert!(
        t.contains(
            "left out   gfx900 (9), gfx906 (5), gfx908 (2), gfx90a:xnack+ (2) (code objects)"
        ) && t.contains("pack stops"),
        "{t}"
    );
    key(&mut app, KeyCode::Enter);
    let Some(super::app::Request::Pack(s)) = app.requests.pop() else {
        panic!("no pack request")
    };
    // The real pack refuses: the demo has gfx9 code, which nothing selects; the
    // advice names the dialog's key, not a CLI flag.
    let (tx, _rx) = std::sync::mpsc::channel();
    let e = super::run_pack(&demo(), &s, &tx, &kpack::event::CancelToken::new()).unwrap_err();
    assert!(e.contains("press F4 in the dialog to drop them"), "{e}");
    assert!(!e.contains("--unassigned"), "{e}");
    assert!(!tmp.path().join("out").exists());
    app.update(AppEvent::PackDone(Box::new(Err(e))));
    let t = format!("{}", render(&app, 100, 30).backend());
    assert!(t.contains("Enter or Esc: back to the dialog"), "{t}");
    key(&mut app, KeyCode::Enter);
    assert!(matches!(
        app.packing.run,
        Some(super::app::PackState::Confirm { .. })
    ));
    key(&mut app, KeyCode::F(4));
    key(&mut app, KeyCode::F(5));
    let t = format!("{}", render(&app, 100, 30).backend());
    assert!(
        t.contains("drop: code for targets not selected is left out and reported"),
        "{t}"
    );
    assert!(t.contains("copied with their device code (F5)"), "{t}");
    assert!(
        t.contains("gfx90a:xnack+ (2) (code objects):") && t.contains("│dropped"),
        "{t}"
    );
    assert!(!t.contains("pack stops"), "{t}");
    key(&mut app, KeyCode::Enter);
    let Some(super::app::Request::Pack(s)) = app.requests.pop() else {
        panic!("no pack request")
    };
    assert_eq!(s.unassigned, kpack::pack::Unassigned::Drop);
    assert!(s.copy_damaged);
    let r = super::run_pack(&demo(), &s, &tx, &kpack::event::CancelToken::new()).unwrap();
    assert!(
        !r.plan.unassigned.is_empty(),
        "the dropped targets are reported"
    );
}

/// The inner text of the box whose top border starts with `┌{title}`, its lines
/// joined and every blank and border removed (wrapping moves words between lines).
fn boxed_text(screen: &str, title: &str) -> String {
    let lines: Vec<Vec<char>> = screen
        .lines()
        .map(|l| l.trim_matches('"').chars().collect())
        .collect();
    let top = format!("┌{title}");
    let (row, col) = lines
        .iter()
        .enumerate()
        .find_map(|(i, l)| {
            let s: String = l.iter().collect();
            s.find(&top).map(|b| (i, s[..b].chars().count()))
        })
        .unwrap_or_else(|| panic!("no box {title:?}:\n{screen}"));
    let right = col
        + lines[row][col..]
            .iter()
            .position(|c| *c == '┐')
            .expect("box top ends");
    lines[row + 1..]
        .iter()
        .take_while(|l| l.get(col) != Some(&'└'))
        .flat_map(|l| l[col + 1..right.min(l.len())].to_vec())
        .filter(|c| !c.is_whitespace())
        .collect()
}

/// Trials 27 and 28: every problem of the scan and of the operations run is in the
/// log (`!`), whole; the tab bar counts them; Enter on a damaged archive says why
/// where it was pressed; an archive that cannot be read opens the UI with the reason
/// instead of failing before it.
#[test]
fn the_message_log_shows_every_problem_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("t");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    let fat = std::fs::read(demo().join("lib/libvadd.so.1.0")).unwrap();
    std::fs::write(tree.join("lib/trunc.so"), &fat[..fat.len() / 2]).unwrap();
    std::fs::write(tree.join("lib/ok.so"), &fat).unwrap();
    let kp =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/kpack/zstd.kpack"))
            .unwrap();
    std::fs::write(tree.join("bad.kpack"), &kp[..kp.len() - 7]).unwrap();
    let report = kpack::scan::scan(
        &tree,
        &kpack::scan::ScanOptions {
            threads: 1,
            ..Default::default()
        },
        &kpack::event::NoEvents,
    )
    .unwrap();
    // What the scan itself says is wrong: the two damaged files at least.
    let expected: Vec<(String, String)> = report
        .diagnostics
        .iter()
        .map(|d| (d.path.clone(), d.message.clone()))
        .collect();
    assert!(
        expected.iter().any(|d| d.0 == "bad.kpack")
            && expected.iter().any(|d| d.0 == "lib/trunc.so"),
        "{expected:?}"
    );
    let mut app = App::new(tree.clone(), None);
    app.update(AppEvent::ScanDone(Box::new(Ok(report))));
    let screen = format!("{}", render(&app, 100, 30).backend());
    let count = format!("!{}", expected.len());
    assert!(screen.lines().next().unwrap().contains(&count), "{screen}");

    // Enter on the damaged archive: the reader's error, where Enter was pressed.
    select(&mut app, "bad.kpack");
    app.requests.clear();
    key(&mut app, KeyCode::Enter);
    assert_eq!(
        app.requests,
        vec![super::app::Request::OpenArchive("bad.kpack".into())]
    );
    let err = kpack::kpack::Archive::open(&tree.join("bad.kpack"))
        .map(|a| a.index)
        .map_err(|e| e.to_string());
    let why = err.clone().unwrap_err();
    app.update(AppEvent::ArchiveOpened("bad.kpack".into(), Box::new(err)));
    assert_eq!(app.view, View::Explorer);
    let screen = format!("{}", render(&app, 200, 30).backend());
    assert!(screen.contains("! lists every message"), "{screen}");

    // `!` lists them all, whole, at 80 columns too (wrapped, not cut).
    key(&mut app, KeyCode::Char('!'));
    assert!(app.log.open);
    let screen = format!("{}", render(&app, 80, 40).backend());
    let text = boxed_text(&screen, " messages:");
    let squash = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    for (path, msg) in &expected {
        assert!(
            text.contains(&squash(&format!("{path}: {msg}"))),
            "{msg}\n{screen}"
        );
    }
    assert!(text.contains(&squash(&why)), "{why}\n{screen}");
    // It scrolls, and Esc closes it without doing anything else.
    let view = app.view;
    key(&mut app, KeyCode::Esc);
    assert!(!app.log.open);
    assert_eq!(app.view, view);

    // A .kpack that cannot be read opens the UI on the reason.
    let mut broken = App::unreadable_archive(tree.join("bad.kpack"), why.clone());
    let screen = format!("{}", render(&broken, 100, 20).backend());
    assert!(screen.contains("cannot be read"), "{screen}");
    assert!(squash(&screen).contains(&squash(&why)[..20]), "{screen}");
    key(&mut broken, KeyCode::Char('q'));
    assert!(broken.quit);
}

/// Trial 23: a name too long for its column is cut in the middle, so the end that
/// tells rows apart stays; the tab bar keeps the opened path's last component.
#[test]
fn long_names_keep_their_end() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp
        .path()
        .join("a-rather-long-install-prefix-for-a-rocm-tree");
    std::fs::create_dir_all(&root).unwrap();
    for t in ["gfx900", "gfx906"] {
        std::fs::write(
            root.join(format!(
                "TensileLibrary_Type_SS_Contraction_l_Ailk_Bljk_Cijk_Dijk_{t}.dat"
            )),
            b"x",
        )
        .unwrap();
    }
    let r = kpack::scan::scan(&root, &Default::default(), &kpack::event::NoEvents)
        .map_err(|e| e.to_string());
    let mut app = App::new(root.clone(), None);
    app.update(AppEvent::ScanDone(Box::new(r)));
    let screen = format!("{}", render(&app, 80, 24).backend());
    for t in ["gfx900.dat", "gfx906.dat"] {
        assert!(screen.contains(t), "{t}:\n{screen}");
    }
    assert!(screen.contains("…"), "{screen}");
    let screen = format!("{}", render(&app, 120, 24).backend());
    let top = screen.lines().next().unwrap();
    assert!(top.contains("…") && top.contains("rocm-tree"), "{top}");
}

/// Features 1 and 5 of the trial: `y` puts the selected item's text on the
/// clipboard, `Y` the view's table as TSV, `E` asks for the CSV export; each says so.
#[test]
fn copy_and_export_take_what_is_selected_and_shown() {
    let mut app = scanned();
    select(&mut app, "librdc.so");
    key(&mut app, KeyCode::Char('y'));
    assert_eq!(
        app.copy.take().as_deref(),
        Some("assets/demo/lib/librdc.so")
    );
    let screen = format!("{}", render(&app, 120, 24).backend());
    assert!(screen.contains("copied the path"), "{screen}");
    // The Explorer's table is every row it lists, with the scan's sizes.
    key(&mut app, KeyCode::Char('Y'));
    let tsv = app.copy.take().unwrap();
    let lines: Vec<&str> = tsv.lines().collect();
    assert_eq!(lines[0], "path\tclass\tbytes\tdevice_raw");
    assert_eq!(lines.len(), app.rows().len() + 1);
    let report = app.report.as_ref().unwrap();
    let rdc = report
        .files
        .iter()
        .find(|f| f.path == "lib/librdc.so")
        .unwrap();
    assert!(
        lines.contains(
            &format!(
                "lib/librdc.so\tfat_binary\t{}\t{}",
                rdc.size,
                rdc.device_raw()
            )
            .as_str()
        ),
        "{tsv}"
    );
    // The Kernels view: the selected kernel's name, and `kernels --csv`'s rows.
    let kr = kpack::kernels::list_kernels(&demo(), &Default::default()).unwrap();
    app.update(AppEvent::Kernels(String::new(), Box::new(Ok(kr.clone()))));
    app.view = View::Kernels;
    key(&mut app, KeyCode::Char('y'));
    let name = app.copy.take().unwrap();
    assert_eq!(name, app.kernels.rows()[0].kernel.display_name());
    app.requests.clear();
    key(&mut app, KeyCode::Char('E'));
    let Some(super::app::Request::Export {
        name,
        ext: "csv",
        text: csv,
    }) = app.requests.pop()
    else {
        panic!("no export asked")
    };
    assert_eq!(name, "kernels");
    let mut rows: Vec<&str> = csv.lines().skip(1).collect();
    let mut want: Vec<String> = kr
        .kernels
        .iter()
        .map(|r| crate::text::kernel_csv_row(r))
        .collect();
    rows.sort();
    want.sort();
    assert_eq!(rows, want);
    assert_eq!(csv.lines().next(), Some(crate::text::KERNEL_CSV_COLUMNS));
    // J: the same table as a kpack-tui.table/1 document, valid against its schema,
    // a row object per CSV row with the same values.
    key(&mut app, KeyCode::Char('J'));
    let Some(super::app::Request::Export {
        name: "kernels",
        ext: "json",
        text,
    }) = app.requests.pop()
    else {
        panic!("no JSON export asked")
    };
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let schema: serde_json::Value = serde_json::from_slice(
        &std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema/table.schema.json"))
            .unwrap(),
    )
    .unwrap();
    let v = jsonschema::validator_for(&schema).unwrap();
    assert!(v.is_valid(&doc), "{doc}");
    let columns: Vec<&str> = doc["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(columns.join(","), crate::text::KERNEL_CSV_COLUMNS);
    let table = app.table().unwrap();
    assert_eq!(doc["rows"].as_array().unwrap().len(), table.rows.len());
    for (row, want) in doc["rows"].as_array().unwrap().iter().zip(&table.rows) {
        let got: Vec<&str> = columns.iter().map(|c| row[*c].as_str().unwrap()).collect();
        assert_eq!(&got, want);
    }
    // The Preview has no table: said, not silently ignored.
    app.view = View::Preview;
    key(&mut app, KeyCode::Char('Y'));
    assert!(app.copy.is_none());
    assert_eq!(app.flash.as_deref(), Some("no table in this view to copy"));
}

/// `E` never overwrites: a taken name gives way to the next, and what is written is
/// the CSV whole.
#[test]
fn export_picks_a_new_name_and_writes_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kpack-kernels.csv"), "mine\n").unwrap();
    let p = super::export_file(dir.path(), ("kernels", "csv"), "a,b\n1,2\n").unwrap();
    assert_eq!(p, dir.path().join("kpack-kernels-2.csv"));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "a,b\n1,2\n");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("kpack-kernels.csv")).unwrap(),
        "mine\n"
    );
    let p = super::export_file(dir.path(), ("kernels", "csv"), "x\n").unwrap();
    assert_eq!(p, dir.path().join("kpack-kernels-3.csv"));
    // Nothing staged is left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
}

/// Trial 38: a family's name filters by its targets (`/gfx90X` listed 0 entries);
/// the files it keeps are exactly those with code for one of them.
#[test]
fn a_family_name_filters_by_its_targets() {
    let mut app = scanned();
    key(&mut app, KeyCode::Char('/'));
    for c in "gfx90X".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    key(&mut app, KeyCode::Enter);
    let fam = kpack::family::Family::parse("gfx90X").unwrap();
    let report = app.report.as_ref().unwrap();
    let want: std::collections::BTreeSet<String> = report
        .files
        .iter()
        .filter(|f| {
            f.all_bundles()
                .flat_map(|b| &b.targets)
                .any(|t| fam.contains(&t.arch))
                || f.arch.as_deref().is_some_and(|a| fam.contains(a))
        })
        .map(|f| f.path.clone())
        .collect();
    assert!(!want.is_empty());
    let tree = app.tree.as_ref().unwrap();
    let shown: std::collections::BTreeSet<String> = app
        .rows()
        .iter()
        .filter(|r| tree.nodes[r.node].file.is_some())
        .map(|r| tree.path(r.node))
        .collect();
    assert_eq!(shown, want);
}

/// Daily-user features 3 and 8: Enter on a kernel selects its file in the Explorer
/// and Esc comes back; `+`/`-` open and close every folder; `n` goes to the next
/// damaged file.
#[test]
fn jump_from_a_kernel_open_all_and_next_damaged() {
    let mut app = scanned();
    let kr = kpack::kernels::list_kernels(&demo(), &Default::default()).unwrap();
    app.update(AppEvent::Kernels(String::new(), Box::new(Ok(kr))));
    key(&mut app, KeyCode::Char('4'));
    assert_eq!(app.view, View::Kernels);
    key(&mut app, KeyCode::Down);
    let want = app.kernels.rows()[app.kernels.cursor].path.clone();
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.view, View::Explorer);
    let tree = app.tree.as_ref().unwrap();
    assert_eq!(tree.path(app.rows()[app.explorer.selected].node), want);
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.view, View::Kernels, "Esc comes back");

    key(&mut app, KeyCode::Char('1'));
    key(&mut app, KeyCode::Char('+'));
    let tree = app.tree.as_ref().unwrap();
    let files = tree.nodes.iter().filter(|n| n.file.is_some()).count();
    let shown = app
        .rows()
        .iter()
        .filter(|r| tree.nodes[r.node].file.is_some())
        .count();
    assert_eq!(shown, files, "every file shows with every folder open");
    key(&mut app, KeyCode::Char('-'));
    let tree = app.tree.as_ref().unwrap();
    assert!(
        app.rows()
            .iter()
            .all(|r| tree.nodes[r.node].parent == Some(0))
    );

    // A damaged file in a closed folder is found.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::write(root.join("ok.txt"), b"x").unwrap();
    let fat = std::fs::read(demo().join("lib/libvadd.so.1.0")).unwrap();
    std::fs::write(root.join("a/b/trunc.so"), &fat[..fat.len() / 2]).unwrap();
    let r = kpack::scan::scan(&root, &Default::default(), &kpack::event::NoEvents)
        .map_err(|e| e.to_string());
    let mut app = App::new(root, None);
    app.update(AppEvent::ScanDone(Box::new(r)));
    key(&mut app, KeyCode::Char('-'));
    key(&mut app, KeyCode::Char('n'));
    let tree = app.tree.as_ref().unwrap();
    assert_eq!(
        tree.path(app.rows()[app.explorer.selected].node),
        "a/b/trunc.so"
    );
}

/// `V` pages what the view shows; `e` edits only plain files of a tree on disk.
#[test]
fn pager_and_editor_get_what_is_shown() {
    use super::external::Open;
    let mut app = scanned();
    select(&mut app, "librdc.so");
    // A binary: its detail as text, never the binary itself.
    let Some(Open::Text(t)) = app.page() else {
        panic!("no text")
    };
    assert!(t.starts_with("lib/librdc.so"), "{t}");
    key(&mut app, KeyCode::Char('e'));
    assert!(app.external.is_none());
    assert!(app.flash.as_deref().unwrap().contains("not a text file"));
    // A plain file: itself, for both.
    assert!(app.reveal("include/vadd.h"));
    assert_eq!(
        app.page(),
        Some(Open::File(PathBuf::from("assets/demo/include/vadd.h")))
    );
    key(&mut app, KeyCode::Char('e'));
    let ext = app.external.take().expect("the editor asked for");
    assert_eq!(ext.var, "EDITOR");
    // The message log when it is open.
    key(&mut app, KeyCode::Char('!'));
    key(&mut app, KeyCode::Char('V'));
    let ext = app.external.take().expect("the pager asked for");
    assert_eq!(ext.var, "PAGER");
    assert!(matches!(ext.what, Open::Text(_)));
}

/// Feature 11: Space marks inspector rows; `x` extracts exactly the marked code
/// objects (through the same background work as a run), `u` clears the marks.
#[test]
fn marked_rows_are_what_x_extracts() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/kpack/zstd.kpack");
    let a = kpack::kpack::Archive::open(&p).unwrap();
    let mut app = App::new(p.clone(), Some(a.index.clone()));
    key(&mut app, KeyCode::Char(' ')); // row 0, then on to row 1
    key(&mut app, KeyCode::Down); // row 2
    key(&mut app, KeyCode::Char(' '));
    let screen = format!("{}", render(&app, 100, 24).backend());
    assert_eq!(screen.matches("* ").count(), 2, "{screen}");
    let want: Vec<(String, String)> = [0, 2]
        .iter()
        .map(|&i| {
            (
                app.inspector.index.as_ref().unwrap().kernels[i]
                    .key
                    .to_string(),
                app.inspector.index.as_ref().unwrap().kernels[i]
                    .arch
                    .to_string(),
            )
        })
        .collect();
    key(&mut app, KeyCode::Char('x'));
    let screen = format!("{}", render(&app, 100, 24).backend());
    assert!(
        screen.contains("Extract the 2 marked code objects"),
        "{screen}"
    );
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    app.inspector.extract.as_mut().unwrap().1 = dest.display().to_string();
    key(&mut app, KeyCode::Enter);
    let req = app.requests.pop().expect("an extract");
    let super::app::Request::Extract(_, Some(which), _) = &req else {
        panic!("{req:?}")
    };
    assert_eq!(which, &want);
    let (tx, rx) = std::sync::mpsc::channel();
    super::start(req, &p, &tx, &kpack::event::CancelToken::new());
    let ev = rx.recv_timeout(std::time::Duration::from_secs(60)).unwrap();
    let super::app::AppEvent::ArchiveDone(Ok(msg)) = ev else {
        panic!("{ev:?}")
    };
    assert!(msg.starts_with("extracted 2 code object(s)"), "{msg}");
    let files = walk(&dest);
    assert_eq!(files.len(), 2, "{files:?}");
    key(&mut app, KeyCode::Char('u'));
    assert!(app.inspector.marks.is_empty());
}

fn walk(d: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Feature 8 and 3: `z` jumps to the best match of a few letters (the footer shows
/// where it would go), `[` and `]` walk back and forth through the places jumped
/// from.
#[test]
fn z_jumps_by_letters_and_brackets_walk_the_jumps() {
    let mut app = scanned();
    let name = |app: &App| {
        let tree = app.tree.as_ref().unwrap();
        tree.path(app.rows()[app.explorer.selected].node)
    };
    let start = name(&app);
    key(&mut app, KeyCode::Char('z'));
    for c in "k900hs".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    let screen = format!("{}", render(&app, 160, 24).backend());
    assert!(
        screen.contains("→ lib/rocblas/library/Kernels.so-000-gfx900.hsaco"),
        "{screen}"
    );
    key(&mut app, KeyCode::Enter);
    assert_eq!(
        name(&app),
        "lib/rocblas/library/Kernels.so-000-gfx900.hsaco"
    );
    key(&mut app, KeyCode::Char('z'));
    for c in "readme".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    key(&mut app, KeyCode::Enter);
    assert_eq!(name(&app), "share/doc/demo/README.txt");
    key(&mut app, KeyCode::Char('['));
    assert_eq!(
        name(&app),
        "lib/rocblas/library/Kernels.so-000-gfx900.hsaco"
    );
    key(&mut app, KeyCode::Char('['));
    assert_eq!(name(&app), start);
    key(&mut app, KeyCode::Char(']'));
    assert_eq!(
        name(&app),
        "lib/rocblas/library/Kernels.so-000-gfx900.hsaco"
    );
    key(&mut app, KeyCode::Char(']'));
    assert_eq!(name(&app), "share/doc/demo/README.txt");
    key(&mut app, KeyCode::Char(']'));
    assert_eq!(app.flash.as_deref(), Some("no later place"));
    // No match: said, the selection stays.
    key(&mut app, KeyCode::Char('z'));
    key(&mut app, KeyCode::Char('#'));
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.flash.as_deref(), Some("no path matches"));
    assert_eq!(name(&app), "share/doc/demo/README.txt");
}

/// #30 (marking rows for a batch action): Space marks kernels in the Kernels view,
/// `x` extracts the code objects holding them (through the background work of a
/// run), each holding its kernel; `u` clears the marks, and without marks `x` takes
/// the selected kernel's code object.
#[test]
fn marked_kernels_are_what_x_extracts() {
    let mut app = scanned();
    key(&mut app, KeyCode::Char('K'));
    let r = kpack::kernels::list_kernels(&demo(), &Default::default()).unwrap();
    app.update(AppEvent::Kernels(String::new(), Box::new(Ok(r))));
    app.view = View::Kernels;
    key(&mut app, KeyCode::Char(' ')); // row 0, then on to row 1
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Down); // row 3
    key(&mut app, KeyCode::Char(' '));
    let rows = app.kernels.rows();
    let marked: Vec<(kpack::kernels::CodeObjectRef, String)> = [0, 3]
        .iter()
        .map(|&i| (rows[i].code_object(), rows[i].kernel.name.clone()))
        .collect();
    let screen = format!("{}", render(&app, 120, 30).backend());
    assert!(screen.contains("2 marked"), "{screen}");
    assert_eq!(
        screen.matches("│* ").count() + screen.matches(" * ").count(),
        2,
        "{screen}"
    );
    key(&mut app, KeyCode::Char('x'));
    let screen = format!("{}", render(&app, 120, 30).backend());
    assert!(
        screen.contains("holding the 2 marked kernel(s)"),
        "{screen}"
    );
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out");
    app.kernels.extract.as_mut().unwrap().1 = dest.display().to_string();
    key(&mut app, KeyCode::Enter);
    let req = app.requests.pop().expect("an extract");
    let super::app::Request::ExtractCodeObjects { wanted, .. } = &req else {
        panic!("{req:?}")
    };
    let want: std::collections::BTreeSet<_> = marked.iter().map(|(c, _)| c.clone()).collect();
    assert_eq!(wanted, &want);
    let (tx, rx) = std::sync::mpsc::channel();
    super::start(req, &demo(), &tx, &kpack::event::CancelToken::new());
    let ev = rx.recv_timeout(std::time::Duration::from_secs(60)).unwrap();
    app.update(ev);
    let log = app.log.entries.last().unwrap().text.clone();
    assert!(
        log.starts_with(&format!("extracted {} code object", want.len())),
        "{log}"
    );
    for (c, name) in &marked {
        let f = kpack::kernels::destination(&dest, c).unwrap();
        let bytes = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let info = kpack::codeobj::read(&bytes).unwrap();
        assert!(
            info.kernels.iter().any(|k| &k.name == name),
            "{name} in {}",
            f.display()
        );
    }
    assert_eq!(walk(&dest).len(), want.len());
    key(&mut app, KeyCode::Char('u'));
    assert!(app.kernels.marks.is_empty());
    key(&mut app, KeyCode::Char('x'));
    let Some((one, _, _)) = &app.kernels.extract else {
        panic!("no prompt")
    };
    assert_eq!(one.len(), 1);
    key(&mut app, KeyCode::Esc);
    assert!(
        app.kernels.extract.is_none()
            && app
                .requests
                .iter()
                .all(|r| !matches!(r, super::app::Request::ExtractCodeObjects { .. }))
    );
}
