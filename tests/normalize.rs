//! Packed executables after the tools packaging runs on them: `llvm-strip` moves the
//! program headers away from where EL8 kernels look (normalize puts them back),
//! `eu-strip` (rpm's find-debuginfo) keeps them working, GNU `strip` re-lays them out
//! beyond repair (verify says so).

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

fn packed(dir: &Path) -> std::path::PathBuf {
    let out = dir.join("packed");
    let o = pack_rocm(&demo(), &out, &["--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    out
}

fn runs(root: &Path, exe: &str) -> bool {
    Command::new(root.join(exe))
        .env("LD_LIBRARY_PATH", root.join("lib"))
        .output()
        .unwrap()
        .status
        .success()
}

fn strip_with(tool_name: &str, file: &Path) -> bool {
    let Some(t) = tool(tool_name) else {
        return false;
    };
    let o = Command::new(t).arg(file).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    true
}

#[test]
fn llvm_strip_breaks_the_el8_rule_and_normalize_repairs_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = packed(tmp.path());
    let root = out.to_str().unwrap();
    for exe in ["bin/vadd_app", "bin/legacy_app"] {
        if !strip_with("llvm-strip-15", &out.join(exe)) {
            return;
        }
    }
    let o = kpack(&["normalize", "--check", root]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("NONCOMPLIANT"), "{}", stdout(&o));
    assert!(stdout(&o).contains("2 non-compliant"), "{}", stdout(&o));
    let o = kpack(&["verify", root, "--no-tui"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("run kpack-tui normalize"),
        "{}",
        stdout(&o)
    );

    let o = kpack(&["normalize", root, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["schema"], "kpack-tui.normalize/1");
    assert_eq!(j["files"].as_array().unwrap().len(), 2);
    assert!(
        j["files"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["fixed"] == true)
    );
    let o = kpack(&["normalize", "--check", root]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(stdout(&o).contains("0 non-compliant"));
    // Idempotent, and the repaired files are valid and run.
    let before = tree_hashes(&out);
    assert!(kpack(&["normalize", root]).status.success());
    assert_eq!(tree_hashes(&out), before);
    for exe in ["bin/vadd_app", "bin/legacy_app"] {
        assert!(runs(&out, exe), "{exe}");
        let data = std::fs::read(out.join(exe)).unwrap();
        assert_eq!(
            kpack::elf::normalize::check(&data).unwrap(),
            kpack::elf::normalize::PhdrState::Compliant
        );
        if let Some(e) = tool("eu-elflint") {
            let o = Command::new(e)
                .arg("--gnu-ld")
                .arg(out.join(exe))
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{exe}: {}",
                String::from_utf8_lossy(&o.stdout)
            );
        }
    }
    let o = kpack(&["verify", root, "--no-tui"]);
    assert!(o.status.success(), "{}", stdout(&o));
}

#[test]
fn eu_strip_keeps_packed_binaries_loadable() {
    let tmp = tempfile::tempdir().unwrap();
    let out = packed(tmp.path());
    for f in [
        "bin/vadd_app",
        "bin/legacy_app",
        "lib/libvadd.so.1.0",
        "lib/libzkern.so",
    ] {
        if !strip_with("eu-strip", &out.join(f)) {
            return;
        }
    }
    assert!(runs(&out, "bin/vadd_app") && runs(&out, "bin/legacy_app"));
    let o = kpack(&["verify", out.to_str().unwrap(), "--no-tui"]);
    assert!(o.status.success(), "{}", stdout(&o));
}

#[test]
fn gnu_strip_damage_is_reported_and_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let out = packed(tmp.path());
    let exe = out.join("bin/legacy_app");
    if !strip_with("strip", &exe) {
        return;
    }
    let before = std::fs::read(&exe).unwrap();
    let root = out.to_str().unwrap();
    let o = kpack(&["normalize", root]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("DAMAGED") && stdout(&o).contains("legacy_app"),
        "{}",
        stdout(&o)
    );
    assert_eq!(std::fs::read(&exe).unwrap(), before, "left as it is");
    let o = kpack(&["verify", root, "--no-tui"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("bin/legacy_app"), "{}", stdout(&o));
}

#[test]
fn normalize_skips_what_it_need_not_touch_and_names_what_it_cannot_read() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("t");
    std::fs::create_dir(&d).unwrap();
    std::fs::copy(fixtures().join("app_pie"), d.join("fat_app")).unwrap();
    std::fs::write(d.join("notes.txt"), "text").unwrap();
    std::fs::write(d.join("broken"), b"\x7fELF\x02\x01\x01").unwrap();
    let o = kpack(&["normalize", d.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("Scanned 2 ELF file(s); fixed 0."),
        "{}",
        stdout(&o)
    );
    assert!(stderr(&o).contains("broken"), "{}", stderr(&o));
    let o = kpack(&["normalize", tmp.path().join("nope").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
}
