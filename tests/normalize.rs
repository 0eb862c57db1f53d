//! Packed executables after the tools packaging runs on them. Ours keep their program
//! headers in place, so `llvm-strip` leaves them compliant; the reference transform's
//! layout (a relocated table, produced here with `PhdrLayout::Reference`) is what
//! `normalize` exists for: `llvm-strip` moves its table away from where EL8 kernels
//! look (normalize puts it back), GNU `strip` re-lays it out beyond repair (verify
//! and normalize say so). tests/toolchain.rs runs every packaging tool on our layout.

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

/// Replace binaries of a packed tree by their host-only rewrite in the reference
/// transform's layout (program headers moved into a new trailing segment), with the
/// same marker: what ROCm's own tools ship.
fn with_reference_layout(packed: &Path, input: &Path, files: &[&str]) {
    use kpack::elf::rewrite::{PhdrLayout, plan_rewrite_with};
    for f in files {
        let report = kpack::scan::scan(
            &packed.join(f),
            &kpack::scan::ScanOptions::default(),
            &kpack::event::NoEvents,
        )
        .unwrap();
        let marker = report.files[0].marker.clone().expect("a packed binary");
        let fat = std::fs::read(input.join(f)).unwrap();
        let r = plan_rewrite_with(&fat, &marker, PhdrLayout::Reference).unwrap();
        assert!(r.plan.phdr_relocated, "{f}");
        std::fs::write(packed.join(f), &r.bytes).unwrap();
    }
}

#[test]
fn packed_executables_keep_the_el8_rule_through_llvm_strip() {
    let tmp = tempfile::tempdir().unwrap();
    let out = packed(tmp.path());
    let root = out.to_str().unwrap();
    for exe in ["bin/vadd_app", "bin/legacy_app"] {
        if !strip_with("llvm-strip-15", &out.join(exe)) {
            return;
        }
    }
    let o = kpack(&["normalize", "--check", root]);
    assert!(o.status.success(), "{}", stdout(&o));
    let o = kpack(&["verify", root, "--no-tui"]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(runs(&out, "bin/vadd_app") && runs(&out, "bin/legacy_app"));
}

#[test]
fn llvm_strip_breaks_the_el8_rule_of_the_reference_layout_and_normalize_repairs_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = packed(tmp.path());
    let root = out.to_str().unwrap();
    with_reference_layout(&out, &demo(), &["bin/vadd_app", "bin/legacy_app"]);
    let o = kpack(&["verify", root, "--no-tui"]);
    assert!(o.status.success(), "{}", stdout(&o));
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

/// GNU strip re-lays out the reference layout's trailing segment (BFD places a
/// segment holding the program headers right after the previous one), so the
/// wrappers point at other bytes: verify and normalize --check name both binaries.
/// normalize maps a library's segment back where its sections are (MOVED, then
/// FIXED); an executable, whose program headers moved with it, is left alone
/// (DAMAGED: re-pack from the unstripped tree).
#[test]
fn gnu_strip_damage_to_the_reference_layout_is_reported_and_libraries_repaired() {
    let tmp = tempfile::tempdir().unwrap();
    let out = packed(tmp.path());
    let files = ["bin/legacy_app", "lib/librdc.so"];
    with_reference_layout(&out, &demo(), &files);
    let root = out.to_str().unwrap();
    for f in files {
        if !strip_with("strip", &out.join(f)) {
            return;
        }
    }
    let o = kpack(&["verify", root, "--no-tui"]);
    assert_eq!(o.status.code(), Some(1));
    for f in files {
        assert!(
            stdout(&o).contains(&format!("{f}: wrapper #0")),
            "{}",
            stdout(&o)
        );
    }
    assert!(
        stdout(&o).contains("re-laid out by GNU strip"),
        "{}",
        stdout(&o)
    );
    let before = tree_hashes(&out);
    let o = kpack(&["normalize", "--check", root]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("MOVED "), "{}", stdout(&o));
    assert!(stdout(&o).contains("lib/librdc.so"), "{}", stdout(&o));
    assert!(stdout(&o).contains("DAMAGED "), "{}", stdout(&o));
    assert!(stdout(&o).contains("bin/legacy_app"), "{}", stdout(&o));
    assert_eq!(tree_hashes(&out), before, "--check writes nothing");
    let exe_before = std::fs::read(out.join("bin/legacy_app")).unwrap();
    let o = kpack(&["normalize", root]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains(&format!("FIXED {}", out.join("lib/librdc.so").display())),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains("fixed 1; 1 could not be fixed"),
        "{}",
        stdout(&o)
    );
    assert_eq!(
        std::fs::read(out.join("bin/legacy_app")).unwrap(),
        exe_before,
        "left as it is"
    );
    // The library is whole again: only the executable is still a fault.
    let o = kpack(&["verify", root, "--no-tui"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(!stdout(&o).contains("lib/librdc.so"), "{}", stdout(&o));
    let data = std::fs::read(out.join("lib/librdc.so")).unwrap();
    let view = kpack::elf::loaded::loaded_view(&data).unwrap().unwrap();
    assert!(view.faults.is_empty(), "{:?}", view.faults);
    if let Some(e) = tool("eu-elflint") {
        let o = Command::new(e)
            .arg("--gnu-ld")
            .arg(out.join("lib/librdc.so"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(!text.contains("segment"), "{text}");
    }
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

/// A repair keeps what an in-place rewrite keeps: owner and group, the mode with its
/// set-id bits, extended attributes; a file with hard links is refused with a reason
/// (a rename would split them) and left as it was.
#[test]
fn a_repair_keeps_owner_mode_and_attributes_and_refuses_hard_links() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let tmp = tempfile::tempdir().unwrap();
    let out = packed(tmp.path());
    let (exe, linked) = ("bin/vadd_app", "bin/legacy_app");
    with_reference_layout(&out, &demo(), &[exe, linked]);
    for f in [exe, linked] {
        if !strip_with("llvm-strip-15", &out.join(f)) {
            return;
        }
    }
    let root_user = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let path = out.join(exe);
    if root_user {
        std::os::unix::fs::chown(&path, Some(1234), Some(5678)).unwrap();
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let attr = xattr::set(&path, "user.kpack-test", b"kept").is_ok();
    if !attr {
        eprintln!("note: this filesystem takes no user xattrs; the attribute part is not checked");
    }
    // A file capability (what `setcap cap_net_bind_service+ep` writes: a VFS
    // revision-2 header with the effective flag, then permitted/inheritable words).
    // A chown after it would clear it, as the kernel does for set-id bits.
    let mut cap = 0x0200_0001u32.to_le_bytes().to_vec();
    for word in [1u32 << 10, 0, 0, 0] {
        cap.extend_from_slice(&word.to_le_bytes());
    }
    let caps = root_user && xattr::set(&path, "security.capability", &cap).is_ok();
    if !caps {
        eprintln!("note: not root or no security xattrs here; the capability part is not checked");
    }
    std::fs::hard_link(out.join(linked), tmp.path().join("second-name")).unwrap();
    let linked_before = std::fs::read(out.join(linked)).unwrap();

    let o = kpack(&["normalize", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains(&format!("FIXED {}", path.display())),
        "{}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("has 2 hard links, which a repair would split; left as it was"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(out.join(linked)).unwrap(), linked_before);
    let m = std::fs::metadata(&path).unwrap();
    assert_eq!(m.permissions().mode() & 0o7777, 0o4755);
    if root_user {
        assert_eq!((m.uid(), m.gid()), (1234, 5678));
    } else {
        eprintln!("note: not root; the owner part is not checked");
    }
    if attr {
        assert_eq!(
            xattr::get(&path, "user.kpack-test").unwrap().as_deref(),
            Some(&b"kept"[..])
        );
    }
    if caps {
        assert_eq!(
            xattr::get(&path, "security.capability").unwrap(),
            Some(cap),
            "the file capability survives the repair"
        );
    }
    assert!(
        !in_ci() || (root_user && caps),
        "CI runs as root: owner and capabilities must be checked"
    );
    let data = std::fs::read(&path).unwrap();
    assert_eq!(
        kpack::elf::normalize::check(&data).unwrap(),
        kpack::elf::normalize::PhdrState::Compliant
    );
}

/// Issue #27 item 18: `normalize --check ROOT` with ROOT a symlink (as /opt/rocm
/// usually is) checks the tree behind it; a check that found no ELF file at all is an
/// error, not "0 non-compliant", exit 0.
#[test]
fn a_symlinked_root_is_followed_and_checking_nothing_is_no_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let out = packed(tmp.path());
    with_reference_layout(&out, &demo(), &["bin/vadd_app"]);
    if !strip_with("llvm-strip-15", &out.join("bin/vadd_app")) {
        return;
    }
    let link = tmp.path().join("rocm");
    std::os::unix::fs::symlink(&out, &link).unwrap();
    let o = kpack(&["normalize", "--check", link.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("NONCOMPLIANT"), "{}", stdout(&o));
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("README"), "no binaries here").unwrap();
    let o = kpack(&["normalize", "--check", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(stderr(&o).contains("nothing was checked"), "{}", stderr(&o));
}
