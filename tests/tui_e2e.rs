//! The real binary driven inside tmux: open a tree, find a fat binary, preview its
//! rewrite, pack from the dialog, wait for the result screen, quit; then check the
//! output tree verifies.

mod common;

use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
}

impl Tmux {
    /// A private tmux server running kpack-tui with `args` in a `w`×`h` pane.
    fn start(name: &str, args: &str, w: u16, h: u16) -> Tmux {
        Tmux::start_env(name, "", args, (w, h))
    }

    /// [`Tmux::start`] with `env` (`K=V …`) set for kpack-tui.
    fn start_env(name: &str, env: &str, args: &str, (w, h): (u16, u16)) -> Tmux {
        let tm = Tmux {
            socket: format!("kpack-e2e-{name}-{}", std::process::id()),
        };
        // Nothing is remembered between runs unless the test asks (the user's state
        // file is never touched).
        let state = if env.contains("KPACK_TUI_STATE=") {
            ""
        } else {
            "KPACK_TUI_STATE=off"
        };
        let cmd = format!(
            "TERM=xterm-256color {state} {env} {} {args}; sleep 5",
            env!("CARGO_BIN_EXE_kpack-tui")
        );
        let (w, h) = (w.to_string(), h.to_string());
        tm.run(&["new-session", "-d", "-s", "e2e", "-x", &w, "-y", &h, &cmd]);
        tm
    }

    fn run(&self, args: &[&str]) -> String {
        let o = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
    fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.run(&["send-keys", "-t", "e2e", k]);
            std::thread::sleep(Duration::from_millis(120));
        }
    }
    /// Type text literally (no key-name lookup: '-' and '/' are characters).
    fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-t", "e2e", "-l", text]);
        std::thread::sleep(Duration::from_millis(200));
    }
    fn screen(&self) -> String {
        self.run(&["capture-pane", "-t", "e2e", "-p"])
    }
    fn wait_for(&self, text: &str) -> String {
        let t = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(text) {
                return s;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "timed out waiting for {text:?}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

#[test]
fn explore_preview_pack_and_quit_in_a_real_terminal() {
    if tool("tmux").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = copy_demo(tmp.path());
    let tm = Tmux::start("tree", &tree.display().to_string(), 110, 32);
    tm.wait_for("1:Explorer");
    tm.wait_for("entries");
    // Filter to the PIE executable, select it, preview the rewrite.
    tm.keys(&[
        "/", "v", "a", "d", "d", "_", "a", "p", "p", "Enter", "Down", "Enter",
    ]);
    let s = tm.wait_for("wrapper 1: HIPF -> HIPK");
    assert!(s.contains("rewrite preview"), "{s}");
    // Families: pack with the preselected families into the default output.
    tm.keys(&["2"]);
    tm.wait_for("[x] gfx90X");
    tm.keys(&["P"]);
    tm.wait_for("Pack this tree");
    // Edit the output in the real terminal: Ctrl-U clears, '-' is a character.
    let out = tmp.path().join("tree-packed-tui");
    tm.keys(&["Down", "C-u"]);
    tm.type_text(&out.display().to_string());
    tm.wait_for("tree-packed-tui");
    tm.keys(&["Enter"]);
    let s = tm.wait_for("pack done");
    assert!(s.contains("verify: sound"), "{s}");
    // o: the output in a kpack-tui of its own (its tab bar names it, its binaries
    // are host-only); q there comes back to the result.
    tm.keys(&["o"]);
    // The Explorer's status line is on no pack screen: the new UI is up.
    let s = tm.wait_for("sort: size");
    let top = s.lines().next().unwrap_or("");
    assert!(
        top.contains("tree-packed-tui") && !top.contains("Pack"),
        "{s}"
    );
    assert!(s.contains("H vadd_app"), "host-only in the output:\n{s}");
    tm.keys(&["q"]);
    tm.wait_for("pack done");
    tm.keys(&["q"]);
    let o = kpack(&["verify", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(out.join(".kpack/rocm_gfx900.kpack").is_file());
}

#[test]
fn follow_a_live_trace_and_replay_it() {
    if tool("tmux").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let live = tmp.path().join("live.trace");
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/traces/hipcc-2obj-4arch.trace");
    let text = std::fs::read_to_string(&fixture).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // The build has not written anything yet when the viewer starts.
    let tm = Tmux::start("trace", &format!("{} --follow", live.display()), 120, 30);
    tm.wait_for("following");
    std::fs::write(&live, format!("{}\n", lines[..6].join("\n"))).unwrap();
    tm.wait_for("6 jobs");
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&live)
        .unwrap()
        .write_all(format!("{}\n", lines[6..].join("\n")).as_bytes())
        .unwrap();
    let s = tm.wait_for(&format!("{} jobs", lines.len()));
    assert!(s.contains("Summary") && s.contains("vadd.o"), "{s}");
    // Select a job, replay at 100x to the end.
    tm.keys(&["Tab"]);
    tm.wait_for("device compile for");
    tm.keys(&["Space", ">", ">", ">"]);
    tm.wait_for("100×");
    let s = tm.wait_for(&format!("done {0}/{0}", lines.len()));
    assert!(s.contains("running 0"), "{s}");
    tm.keys(&["?"]);
    tm.wait_for("Timeline keys");
    tm.keys(&["Escape", "q"]);
    // The viewer quits and gives the terminal back.
    let t = Instant::now();
    while tm.screen().contains("following") {
        assert!(t.elapsed() < Duration::from_secs(10), "q did not quit");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Issue #19: in a real terminal at 80×24 and at 160×48, the mouse (SGR clicks and
/// wheel, as a terminal sends them), scrolling to the end of the preview, and the
/// archive inspector opened from the explorer with its extract prompt.
#[test]
fn mouse_scrolling_and_the_inspector_in_a_real_terminal() {
    if tool("tmux").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = copy_demo(tmp.path());
    let packed = tmp.path().join("packed");
    let o = kpack(&[
        "pack",
        tree.to_str().unwrap(),
        "-o",
        packed.to_str().unwrap(),
        "--group",
        "g",
        "--family",
        "gfx90X",
        "--unassigned",
        "drop",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        let tm = Tmux::start(&format!("mouse{w}"), &tree.display().to_string(), w, h);
        tm.wait_for("entries");
        // A click on the second tab (SGR mouse: press and release at column, row).
        let s = tm.screen();
        let x = s.lines().next().unwrap().find("2:Architectures").unwrap() + 3;
        tm.type_text(&format!("\x1b[<0;{x};1M\x1b[<0;{x};1m"));
        tm.wait_for("single targets");
        // Back to the explorer with a click on the first tab.
        let x = tm
            .screen()
            .lines()
            .next()
            .unwrap()
            .find("1:Explorer")
            .unwrap()
            + 3;
        tm.type_text(&format!("\x1b[<0;{x};1M\x1b[<0;{x};1m"));
        tm.wait_for("entries");
        // The preview of a binary scrolls to its end and says so.
        tm.keys(&["/"]);
        tm.type_text("vadd_app");
        tm.keys(&["Enter", "Down", "Enter"]);
        let s = tm.wait_for("rewrite preview");
        if h == 24 {
            assert!(s.contains("more below"), "{s}");
            tm.keys(&["G"]);
            tm.wait_for(" end ");
            // The wheel scrolls back up.
            for _ in 0..20 {
                tm.type_text("\x1b[<64;20;10M");
            }
            tm.wait_for("more below");
        }
        tm.keys(&["q"]);
    }
    // The inspector, opened with Enter on a .kpack of the packed tree.
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        let tm = Tmux::start(&format!("insp{w}"), &packed.display().to_string(), w, h);
        tm.wait_for("entries");
        tm.keys(&["/"]);
        tm.type_text("g_gfx900.kpack");
        tm.keys(&["Enter", "Down", "Enter"]);
        let s = tm.wait_for("key (binary#TU)");
        assert!(s.contains("gfx900"), "{s}");
        tm.keys(&["x"]);
        let s = tm.wait_for("Extract ");
        assert!(s.contains("g_gfx900.kpack.extracted"), "{s}");
        tm.keys(&["Escape", "q"]);
    }
}

/// Trial 28: a `.kpack` that cannot be read opens the UI as a damaged wheel does (the
/// reason in a pane, `!` lists it, q quits with 0) instead of failing before it.
#[test]
fn a_damaged_archive_opens_on_its_reason_in_a_real_terminal() {
    if tool("tmux").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let seed = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/kpack/zstd.kpack"),
    )
    .unwrap();
    let bad = tmp.path().join("bad.kpack");
    std::fs::write(&bad, &seed[..400]).unwrap();
    // What the batch side says of it (exit 1 or 2, the reason on stderr).
    let o = kpack(&["verify", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        let tm = Tmux::start(
            &format!("badkp{w}"),
            &format!("{}; echo EXIT=$?", bad.display()),
            w,
            h,
        );
        let s = tm.wait_for("cannot be read");
        assert!(s.contains("┌ error"), "{s}");
        assert!(s.contains("truncated"), "{s}");
        assert!(s.lines().next().unwrap().contains("!1"), "{s}");
        tm.keys(&["!"]);
        tm.wait_for("messages: 1 error(s)");
        tm.keys(&["Escape"]);
        tm.keys(&["q"]);
        tm.wait_for("EXIT=0");
    }
}

/// `y` reaches the clipboard through the terminal: tmux (with `set-clipboard on`)
/// takes the OSC 52 sequence into its paste buffer, as it would pass it on over ssh.
#[test]
fn y_copies_the_selected_path_through_osc52() {
    if tool("tmux").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = copy_demo(tmp.path());
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        let tm = Tmux::start(&format!("osc52{w}"), &tree.display().to_string(), w, h);
        tm.run(&["set-option", "-g", "set-clipboard", "on"]);
        tm.wait_for("entries");
        tm.keys(&["/"]);
        tm.type_text("librdc");
        tm.keys(&["Enter", "Down", "y"]);
        tm.wait_for("copied the path");
        let want = tree.join("lib/librdc.so").display().to_string();
        let t = Instant::now();
        loop {
            let got = tm.run(&["show-buffer"]);
            if got == want {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(10), "{got:?} != {want:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
        tm.keys(&["q"]);
    }
}

/// `V` hands the terminal to `$PAGER` with what the view shows (here the rewrite
/// preview) and takes it back when the pager exits: first a pager that copies its
/// file (what it got), then the real `less` (the keys reach it, not the UI).
#[test]
fn v_pages_the_preview_and_the_ui_comes_back() {
    if tool("tmux").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = copy_demo(tmp.path());
    let out = tmp.path().join("paged.txt");
    let pager = tmp.path().join("pager.sh");
    std::fs::write(
        &pager,
        format!(
            "#!/bin/sh\ncat \"$1\" > '{}.part' && mv '{0}.part' '{0}'\n",
            out.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&pager, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let tm = Tmux::start_env(
        "pager",
        &format!("PAGER={}", pager.display()),
        &tree.display().to_string(),
        (100, 30),
    );
    tm.wait_for("entries");
    tm.keys(&["/"]);
    tm.type_text("librdc");
    tm.keys(&["Enter", "Down", "Enter"]);
    tm.wait_for("rewrite preview");
    tm.keys(&["V"]);
    let t = Instant::now();
    while !out.exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "the pager never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    let paged = std::fs::read_to_string(&out).unwrap();
    // The text is the plan the CLI prints for the same file and group.
    // The text is the plan the CLI prints for the same file (its group may differ,
    // so the marker's size and line too: the input's size and the wrappers match).
    let cli = kpack(&["preview", tree.join("lib/librdc.so").to_str().unwrap()]);
    assert!(cli.status.success(), "{}", stderr(&cli));
    let cli = String::from_utf8_lossy(&cli.stdout);
    let head = |s: &str| {
        let first = s.lines().next().unwrap_or("");
        let sizes = first.split_once(": ").map_or(first, |p| p.1);
        sizes.split(" -> ").next().unwrap_or("").to_string()
    };
    let wrappers = |s: &str| {
        s.lines()
            .filter(|l| l.trim_start().starts_with("wrapper "))
            .count()
    };
    assert!(paged.contains("marker: kernel_name"), "{paged}");
    assert_eq!(head(&paged), head(&cli), "{paged}\n---\n{cli}");
    assert_eq!(wrappers(&paged), wrappers(&cli));
    assert!(wrappers(&paged) > 0);
    // The UI is back and takes keys.
    tm.wait_for("rewrite preview");
    tm.keys(&["1"]);
    tm.wait_for("sort: size");
    tm.keys(&["q"]);
    drop(tm);

    if tool("less").is_none() {
        return;
    }
    let tm = Tmux::start_env(
        "less",
        "PAGER=less LESS=",
        &tree.display().to_string(),
        (100, 30),
    );
    tm.wait_for("entries");
    tm.keys(&["!"]);
    tm.wait_for("messages:");
    tm.keys(&["V"]);
    // less shows the (empty) log's text file; q leaves less, not the UI.
    tm.wait_for("(END)");
    tm.keys(&["q"]);
    tm.wait_for("messages:");
    tm.keys(&["Escape"]);
    tm.keys(&["q"]);
}

/// Daily-user feature 9: a tree opens again as it was left (view, order, filter,
/// selection), from the state file; `KPACK_TUI_STATE=off` keeps nothing.
#[test]
fn a_tree_opens_again_as_it_was_left() {
    if tool("tmux").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = copy_demo(tmp.path());
    let state = tmp.path().join("state/state.json");
    let env = format!("KPACK_TUI_STATE={}", state.display());
    let tm = Tmux::start_env("state1", &env, &tree.display().to_string(), (100, 30));
    tm.wait_for("sort: size, largest first");
    tm.keys(&["s", "/"]);
    tm.type_text("rdc");
    tm.keys(&["Enter", "Down"]);
    tm.wait_for("sort: name, A→Z · filter \"rdc\"");
    tm.keys(&["q"]);
    let t = Instant::now();
    while !state.exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "no state written");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(tm);
    let tm = Tmux::start_env("state2", &env, &tree.display().to_string(), (100, 30));
    let s = tm.wait_for("sort: name, A→Z · filter \"rdc\"");
    assert!(s.contains("librdc.so"), "{s}");
    tm.keys(&["y"]);
    tm.wait_for("copied the path");
    tm.keys(&["q"]);
    drop(tm);
    // Off: the defaults, and the file is not read.
    let tm = Tmux::start_env(
        "state3",
        "KPACK_TUI_STATE=off",
        &tree.display().to_string(),
        (100, 30),
    );
    tm.wait_for("sort: size, largest first");
    tm.keys(&["q"]);
}

/// A generated install tree of at least `mb` MB (`examples/gen_tree`: real linked
/// fat binaries whose code objects are made from the fixtures' machine code, so they
/// compress like code). `cargo test` builds the examples with the tests.
fn generated_tree(dir: &std::path::Path, mb: u64) -> std::path::PathBuf {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_kpack-tui"));
    let gen_tree = exe.with_file_name("examples").join("gen_tree");
    assert!(
        gen_tree.is_file(),
        "{} is missing: `cargo test` builds it (or `cargo build --example gen_tree`)",
        gen_tree.display()
    );
    let tree = dir.join("tree");
    let o = Command::new(&gen_tree)
        .arg(&tree)
        .args(["--size-mb", &mb.to_string(), "--seed", "7"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes: u64 = walkdir::WalkDir::new(&tree)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(bytes >= mb << 20, "the tree is {bytes} bytes");
    tree
}

/// #30 item 3, the proof: during a pack of a 100 MB tree at the highest level, Esc
/// (at 80×24) and `q q` (at 160×48) return control within a second, and nothing is
/// left behind: no output, no staging directory. After Esc the UI still runs and
/// quits with 0; `q q` exits with the cancelled status, 130.
#[test]
fn a_cancel_during_a_pack_at_the_highest_level_returns_within_a_second() {
    if tool("tmux").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = generated_tree(tmp.path(), 100);
    let before = tree_hashes(&tree);
    for (w, h, quit) in [(80u16, 24u16, false), (160, 48, true)] {
        let out = tmp.path().join(format!("packed-{w}"));
        let tm = Tmux::start(
            &format!("cancel{w}"),
            &format!("{}; echo EXIT=$?", tree.display()),
            w,
            h,
        );
        // The whole tree scanned ("N entries so far" while it runs).
        tm.wait_for("entries · ");
        tm.keys(&["2"]);
        tm.wait_for("[x]");
        tm.keys(&["P"]);
        tm.wait_for("Pack this tree");
        tm.keys(&["Down", "C-u"]);
        tm.type_text(&out.display().to_string());
        tm.keys(&["Down", "End"]);
        tm.wait_for("22 (max");
        tm.keys(&["Enter"]);
        // A worker is compressing a kernel at level 22 (a chunk takes a good part
        // of a second): the moment a cancel has to cut into.
        tm.wait_for(": compress ");
        let (key, text) = if quit {
            tm.keys(&["q"]);
            tm.wait_for("pack is running");
            ("q", "EXIT=")
        } else {
            ("Escape", "pack cancelled")
        };
        let t0 = Instant::now();
        tm.run(&["send-keys", "-t", "e2e", key]);
        let s = loop {
            let s = tm.screen();
            if s.contains(text) {
                break s;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "no {text:?} 30 s after the cancel:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let took = t0.elapsed();
        eprintln!("{w}x{h}: control back {took:?} after the cancel");
        assert!(took < Duration::from_secs(1), "{took:?}:\n{s}");
        if quit {
            assert!(s.contains("EXIT=130"), "{s}");
        } else {
            assert!(s.contains("nothing was written"), "{s}");
            tm.keys(&["q"]);
            tm.wait_for("EXIT=0");
        }
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "tree")
            .collect();
        assert!(left.is_empty(), "{w}x{h}: left behind: {left:?}");
    }
    assert_eq!(tree_hashes(&tree), before, "the input is unchanged");
}

/// The CLI's `preview` of `bin`: its first wrapper line (what the TUI's preview of
/// the same file shows).
fn first_wrapper_line(bin: &std::path::Path) -> String {
    let o = kpack(&["preview", bin.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
        .lines()
        .find(|l| l.trim_start().starts_with("wrapper "))
        .unwrap_or_else(|| panic!("no wrapper line: {}", stdout(&o)))
        .trim()
        .to_string()
}

/// #30 "Must not lose code", items 1, 2, 5, 6 and 7, at 80×24 and 160×48 (item 3 is
/// `a_cancel_during_a_pack_at_the_highest_level_returns_within_a_second`):
/// - 1, 7: a packed tree's Architectures view preselects the targets whose code is
///   only in its archives and shows the exact plan the CLI's `--dry-run` gives; the
///   default re-pack from the dialog drops nothing (its ledger, and every code
///   object of the fat input, by binary, bundle and target, is in the output);
/// - 2: with a family deselected the dialog lists what it leaves out and the pack
///   stops, as the CLI's default does, writing nothing;
/// - 5: the rewrite preview of a fat binary inside a wheel and of a PE DLL shows
///   what the CLI's `preview` prints for the same file;
/// - 6: `K` on a static archive lists as many kernels as `kernels` does.
#[test]
fn the_tui_never_drops_code_silently_in_a_real_terminal() {
    if tool("tmux").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let fat = copy_demo(tmp.path());
    let packed = tmp.path().join("packed");
    let o = pack_rocm(&fat, &packed, &["--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The CLI's exact plan of the preselection (the families with code: gfx90X and
    // gfx103X) for the packed tree: "input X -> projected output (...) Y (…%)".
    let o = kpack(&[
        "pack",
        packed.to_str().unwrap(),
        "-o",
        tmp.path().join("unused").to_str().unwrap(),
        "--group",
        "rocm",
        "--family",
        "gfx90X",
        "--family",
        "gfx103X",
        "--dry-run",
    ]);
    let plan = stdout(&o) + &stderr(&o);
    let line = plan
        .lines()
        .find(|l| l.trim_start().starts_with("input "))
        .unwrap_or_else(|| panic!("{plan}"));
    let input = line.trim_start()["input ".len()..]
        .split(" -> ")
        .next()
        .unwrap();
    let output = line
        .rsplit(") ")
        .next()
        .unwrap()
        .split(" (")
        .next()
        .unwrap();
    let expected_plan = format!("output {output} of {input}");
    let fat_objects: std::collections::BTreeSet<(String, u32, String)> =
        fat_code_objects(&fat).into_keys().collect();
    assert!(fat_objects.iter().any(|(_, _, t)| t == "gfx1030"));
    let whl = fixture_wheel(tmp.path()).unwrap();
    let member = tmp.path().join("libkernels_z.so");
    std::fs::copy(fixtures().join("libkernels_z.so"), &member).unwrap();
    let wheel_wrapper = first_wrapper_line(&member);
    let dll_wrapper = first_wrapper_line(&fixtures().join("libkpe.dll"));
    let o = kpack(&[
        "kernels",
        fat.join("lib/libkern.a").to_str().unwrap(),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let static_kernels = v["kernels"].as_array().unwrap().len();
    assert!(static_kernels > 0);

    for (w, h) in [(80u16, 24u16), (160, 48)] {
        // 1, 7: the packed tree.
        let out = tmp.path().join(format!("again-{w}"));
        let tm = Tmux::start(
            &format!("keep{w}"),
            &format!("{}; echo EXIT=$?", packed.display()),
            w,
            h,
        );
        tm.wait_for("entries · ");
        tm.keys(&["2"]);
        let s = tm.wait_for("pack plan");
        assert!(s.contains("[x] gfx103X") && s.contains("[x] gfx90X"), "{s}");
        let s = tm.wait_for(&expected_plan);
        assert!(s.contains("gfx1030"), "{s}");
        tm.keys(&["P"]);
        let s = tm.wait_for("Pack this tree");
        assert!(s.contains("every target with code is selected"), "{s}");
        tm.keys(&["Down", "C-u"]);
        tm.type_text(&out.display().to_string());
        tm.keys(&["Enter"]);
        let s = tm.wait_for("pack done");
        assert!(!s.contains("dropped"), "{s}");
        tm.keys(&["q"]);
        tm.wait_for("EXIT=0");
        assert!(ledger(&out).dropped.is_empty());
        let kept: std::collections::BTreeSet<(String, u32, String)> =
            kpack::kernels::list_kernels(&out, &Default::default())
                .unwrap()
                .objects
                .iter()
                .map(|o| (o.binary.clone(), o.bundle.unwrap_or(0), o.target.clone()))
                .collect();
        let lost: Vec<_> = fat_objects.difference(&kept).collect();
        assert!(lost.is_empty(), "{w}x{h}: lost {lost:?}");

        // 2: gfx103X deselected on the fat tree: listed as left out, the pack stops.
        let out = tmp.path().join(format!("narrow-{w}"));
        let tm = Tmux::start(
            &format!("stop{w}"),
            &format!("{}; echo EXIT=$?", fat.display()),
            w,
            h,
        );
        tm.wait_for("entries · ");
        tm.keys(&["2"]);
        tm.wait_for("[x] gfx103X");
        tm.keys(&["Down", "Down", "Down", "Down", "Space"]);
        tm.wait_for("[ ] gfx103X");
        tm.keys(&["P"]);
        let s = tm.wait_for("left out");
        assert!(s.contains("gfx1030") && s.contains("the pack stops"), "{s}");
        tm.keys(&["Down", "C-u"]);
        tm.type_text(&out.display().to_string());
        tm.keys(&["Enter"]);
        let s = tm.wait_for("pack failed");
        assert!(s.contains("F4"), "{s}");
        assert!(
            !out.exists(),
            "{w}x{h}: a refused pack wrote {}",
            out.display()
        );
        // 6: K on the static archive.
        tm.keys(&["Escape", "Escape", "1", "/"]);
        tm.type_text("libkern.a");
        tm.keys(&["Enter", "Down", "K"]);
        let s = tm.wait_for("kernels of lib/libkern.a");
        assert!(
            s.contains(&format!("{static_kernels} kernels in ")),
            "{w}x{h}: want {static_kernels} kernels:\n{s}"
        );
        tm.keys(&["q"]);
        tm.wait_for("EXIT=0");

        // 5: the preview of a fat binary inside a wheel, and of a PE DLL.
        let tm = Tmux::start(&format!("whl{w}"), &whl.display().to_string(), w, h);
        tm.wait_for("entries · ");
        tm.keys(&["/"]);
        tm.type_text("libkernels_z");
        // The file is the filtered list's last row, under its folders.
        tm.keys(&["Enter", "G", "Enter"]);
        let s = tm.wait_for("rewrite preview");
        let shown = tm.wait_for("HIPF -> HIPK");
        assert!(
            shown.contains(&wheel_wrapper[..wheel_wrapper.len().min(usize::from(w) - 4)]),
            "{w}x{h}: want {wheel_wrapper:?}:\n{s}"
        );
        let dll = tmp.path().join("libkpe.dll");
        std::fs::copy(fixtures().join("libkpe.dll"), &dll).unwrap();
        let tm = Tmux::start(&format!("dll{w}"), &dll.display().to_string(), w, h);
        tm.wait_for("1 entry · ");
        tm.keys(&["Enter"]);
        let s = tm.wait_for("HIPF -> HIPK");
        assert!(
            s.contains(&dll_wrapper[..dll_wrapper.len().min(usize::from(w) - 4)]),
            "{w}x{h}: want {dll_wrapper:?}:\n{s}"
        );
    }
}

/// #30 item 4: Esc during a wheel split in the TUI (a wheel of a generated 100 MB
/// tree, at the highest level), at 80×24 and 160×48, cancels it within a second,
/// says so, and writes nothing: no wheel, no output directory, no staging; the
/// input wheel unchanged.
#[test]
fn esc_cancels_a_wheel_split_in_a_real_terminal() {
    if tool("tmux").is_none() || tool("python3").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = generated_tree(tmp.path(), 100);
    let whl = tmp.path().join("torch-2.10.0-cp311-cp311-linux_x86_64.whl");
    let o = Command::new("python3")
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-test-wheel.py"))
        .arg(&whl)
        .args(["--name", "torch", "--version", "2.10.0", "--level", "1"])
        .args(["--tag", "cp311-cp311-linux_x86_64"])
        .arg(format!("--tree={}=torch", tree.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::remove_dir_all(&tree).unwrap();
    let before = std::fs::read(&whl).unwrap();
    for size in [(80u16, 24u16), (160, 48)] {
        esc_during_a_wheel_split(tmp.path(), &whl, size);
    }
    assert!(
        std::fs::read(&whl).unwrap() == before,
        "the input wheel is unchanged"
    );
}

/// One run of [`esc_cancels_a_wheel_split_in_a_real_terminal`] in a `w`×`h` pane.
fn esc_during_a_wheel_split(dir: &std::path::Path, whl: &std::path::Path, (w, h): (u16, u16)) {
    let out = dir.join(format!("dist-{w}"));
    let tm = Tmux::start(
        &format!("wheelcancel{w}"),
        &format!("{}; echo EXIT=$?", whl.display()),
        w,
        h,
    );
    tm.wait_for("entries · ");
    tm.keys(&["2"]);
    tm.wait_for("[x]");
    tm.keys(&["P"]);
    tm.wait_for("Split this wheel");
    tm.keys(&["Down", "Down", "C-u"]);
    tm.type_text(&out.display().to_string());
    tm.keys(&["Down", "End"]);
    tm.wait_for("22 (max");
    tm.keys(&["Enter"]);
    tm.wait_for("splitting the wheel");
    tm.wait_for(": compress ");
    let t0 = Instant::now();
    tm.run(&["send-keys", "-t", "e2e", "Escape"]);
    let s = loop {
        let s = tm.screen();
        if s.contains("split cancelled") {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "not cancelled:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = t0.elapsed();
    eprintln!("{w}x{h}: wheel split: control back {took:?} after Esc");
    assert!(took < Duration::from_secs(1), "{w}x{h}: {took:?}:\n{s}");
    assert!(s.contains("nothing was written"), "{s}");
    tm.keys(&["q"]);
    tm.wait_for("EXIT=0");
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".whl"))
        .collect();
    assert!(left.is_empty(), "{w}x{h}: left behind: {left:?}");
}
