//! Messages that say what happened (issue #29 item 6).

mod common;

use common::*;

/// A tree with no selected device code says "nothing to pack", not "LARGER".
#[test]
fn a_tree_with_nothing_to_pack_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("t");
    std::fs::create_dir(&tree).unwrap();
    std::fs::write(tree.join("a.txt"), "text\n").unwrap();
    let o = pack_rocm(&tree, &tmp.path().join("o"), &["--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("nothing to pack"), "{}", stdout(&o));
    assert!(!stdout(&o).contains("LARGER"), "{}", stdout(&o));
}

/// An `extract` miss lists what the binary has, one line per bundle, not one line of
/// every bundle/target pair.
#[test]
fn an_extract_miss_lists_the_bundles_line_by_line() {
    let tmp = tempfile::tempdir().unwrap();
    let o = kpack(&[
        "extract",
        fixtures().join("app_pie").to_str().unwrap(),
        "--target",
        "gfx1100",
        "-o",
        tmp.path().join("x.co").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("no code object for gfx1100 in bundle 0; it has:\n"),
        "{e}"
    );
    assert!(
        e.contains("\n  --bundle 0: gfx900 gfx906\n  --bundle 1: gfx900 gfx906"),
        "{e}"
    );
}

/// `pack` without a selection names every way to select (it said `--family` was
/// required although `--target` and `--all` work), and what a `--target` pack leaves
/// out is "not selected", not "no family".
#[test]
fn pack_names_every_way_to_select() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o");
    let o = kpack(&[
        "pack",
        demo().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--group",
        "g",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("choose what to pack: --family, --target or --all"),
        "{}",
        stderr(&o)
    );
    let o = pack_rocm(&demo(), &out, &["--target", "gfx900", "--long"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("dropped (not selected by --family, --target or --all): gfx1030"),
        "{}",
        stdout(&o)
    );
}

/// `wheel split` of a wheel with no fat binaries names the wheel once and leaves no
/// empty output directory behind.
#[test]
fn a_wheel_with_nothing_to_split_names_it_once_and_leaves_nothing() {
    if tool("python3").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let whl = tmp.path().join("plain-1.0-py3-none-any.whl");
    let o = std::process::Command::new("python3")
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-test-wheel.py"))
        .arg(&whl)
        .args(["--name", "plain", "--version", "1.0"])
        .arg(format!(
            "plain/lib/libp.so={}",
            fixtures().join("libplain.so").display()
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = tmp.path().join("out");
    let o = kpack(&[
        "wheel",
        "split",
        whl.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--device-package-prefix",
        "amd-plain-device",
        "--overlay-root",
        "plain",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("no fat binaries under 'plain'"), "{e}");
    assert_eq!(e.matches("plain-1.0-py3-none-any.whl").count(), 1, "{e}");
    assert!(!out.exists(), "no empty output directory");
}
