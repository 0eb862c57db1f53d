//! Outputs on hostile disks and hostile neighbours: a read-only file system, a full
//! one, two packs racing for one output, and the input tree untouched by every bad
//! input. The disks are small tmpfs mounts (root only; CI runs as root here).

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

/// A tmpfs mounted at a fresh directory; unmounted on drop.
struct Mount {
    dir: tempfile::TempDir,
}

impl Mount {
    fn new(opts: &str) -> Option<Mount> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            assert!(
                !in_ci(),
                "CI runs as root and must be able to mount a tmpfs"
            );
            eprintln!("note: cannot mount a tmpfs (not root?); skipping");
            return None;
        }
        Some(Mount { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

fn pack_args<'a>(tree: &'a str, out: &'a str) -> Vec<&'a str> {
    vec![
        "pack",
        tree,
        "-o",
        out,
        "--group",
        "g",
        "--family",
        "gfx90X",
        "--family",
        "gfx103X",
        "--unassigned",
        "drop",
    ]
}

#[test]
fn a_read_only_output_is_refused_with_its_name_and_nothing_written() {
    let Some(ro) = Mount::new("ro,size=1m") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let tree = copy_demo(tmp.path());
    let before = tree_hashes(&tree);
    let out = ro.path().join("packed");
    let o = kpack(&pack_args(tree.to_str().unwrap(), out.to_str().unwrap()));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("Read-only file system"), "{err}");
    assert!(
        err.contains(ro.path().to_str().unwrap()),
        "names the place: {err}"
    );
    assert!(std::fs::read_dir(ro.path()).unwrap().next().is_none());
    assert_eq!(tree_hashes(&tree), before, "input untouched");
    // Rewriting one binary into it fails the same way.
    let o = kpack(&[
        "rewrite",
        tree.join("lib/librdc.so").to_str().unwrap(),
        "-o",
        ro.path().join("librdc.so").to_str().unwrap(),
        "--search-path",
        ".kpack/g_@GFXARCH@.kpack",
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("Read-only file system"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_full_disk_fails_cleanly_and_leaves_no_partial_output() {
    // Smaller than the packed demo tree (about 200 KiB).
    let Some(small) = Mount::new("size=96k") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let tree = copy_demo(tmp.path());
    let before = tree_hashes(&tree);
    let out = small.path().join("packed");
    let o = kpack(&pack_args(tree.to_str().unwrap(), out.to_str().unwrap()));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("No space left on device"), "{err}");
    // The full disk is named, not a source file (#27 item 24).
    assert!(err.contains(small.path().to_str().unwrap()), "{err}");
    assert!(!err.contains(tree.to_str().unwrap()), "{err}");
    assert!(!out.exists(), "no output");
    let left: Vec<_> = std::fs::read_dir(small.path()).unwrap().collect();
    assert!(left.is_empty(), "temporary files removed: {left:?}");
    assert_eq!(tree_hashes(&tree), before, "input untouched");
    // An archive extract into the full disk reports the same.
    let packed = tmp.path().join("packed");
    let o = kpack(&pack_args(tree.to_str().unwrap(), packed.to_str().unwrap()));
    assert!(o.status.success(), "{}", stderr(&o));
    let filler = small.path().join("filler");
    std::fs::write(&filler, vec![0u8; 90 * 1024]).unwrap_or_default();
    let o = kpack(&[
        "extract",
        packed.join(".kpack/g_gfx900.kpack").to_str().unwrap(),
        "--all",
        "-o",
        small.path().join("x").to_str().unwrap(),
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("No space left on device"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn two_packs_racing_for_one_output_leave_one_complete_output() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = copy_demo(tmp.path());
    let out = tmp.path().join("packed");
    let args = pack_args(tree.to_str().unwrap(), out.to_str().unwrap());
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_kpack-tui"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    for round in 0..4 {
        let _ = std::fs::remove_dir_all(&out);
        let (a, b) = (spawn(), spawn());
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        let ok = [&a, &b].iter().filter(|o| o.status.success()).count();
        assert!(
            ok >= 1,
            "round {round}: neither finished:\n{}\n{}",
            stderr(&a),
            stderr(&b)
        );
        for o in [&a, &b] {
            if !o.status.success() {
                let e = stderr(o);
                assert!(
                    e.contains(out.to_str().unwrap()) && e.contains("--force"),
                    "round {round}: the loser says why: {e}"
                );
            }
        }
        let v = kpack(&["verify", out.to_str().unwrap()]);
        assert!(v.status.success(), "round {round}: {}", stdout(&v));
        let stray: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "tree" && n != "packed")
            .collect();
        assert!(
            stray.is_empty(),
            "round {round}: temporaries left: {stray:?}"
        );
    }
}

/// `wheel split` onto a read-only disk and onto a full one: exit 2 with the OS
/// error and the place, nothing left behind (not even the staging directory), the
/// input wheel untouched.
#[test]
fn wheel_split_on_read_only_and_full_disks_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(whl) = fixture_wheel(tmp.path()) else {
        return;
    };
    let before = std::fs::read(&whl).unwrap();
    let Some(ro) = Mount::new("ro,size=1m") else {
        return;
    };
    let o = split_wheel(&whl, &ro.path().join("dist"), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Read-only file system"),
        "{}",
        stderr(&o)
    );
    assert!(std::fs::read_dir(ro.path()).unwrap().next().is_none());
    // The split writes about 40 KiB of wheels plus staging: 24 KiB is too little.
    let Some(small) = Mount::new("size=24k") else {
        return;
    };
    let out = small.path().join("dist");
    let o = split_wheel(&whl, &out, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("No space left on device"),
        "{}",
        stderr(&o)
    );
    let left: Vec<_> = std::fs::read_dir(&out)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "nothing left behind: {left:?}");
    assert_eq!(std::fs::read(&whl).unwrap(), before, "input untouched");
}

/// Issue #19 item 2: Ctrl-C during a CLI pack stops it cleanly: exit 130, the
/// staging directory removed, nothing at OUT.
#[test]
fn sigint_during_a_pack_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = many_binaries(tmp.path());

    let out = tmp.path().join("out");
    // The signal goes out on the first progress line of the packing phase: by then
    // the handler is installed (before the scan) and the pack is under way, however
    // slow or loaded the machine is. No sleep.
    let (mut child, mut stderr, seen) = pack_under_way(&tree, &out);
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    let err = format!("{seen}{rest}");
    assert!(
        !status.success(),
        "the pack finished although it was interrupted while packing: {err}"
    );
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("cancelled"), "{err}");
    assert!(!out.exists(), "no output");
    assert_only_tree_left(tmp.path());
}

/// Issue #27 item 10: a member that inflates past what the spill disk can take (a
/// deflate bomb within the ratio bound: 512 MiB from half a megabyte) is a named
/// problem, not a disk filled: the spill directory stays empty.
#[test]
fn a_member_bigger_than_the_spill_disk_is_not_spilled() {
    if tool("python3").is_none() {
        return;
    }
    let Some(disk) = Mount::new("size=64m") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let whl = tmp.path().join("bomb-1.0-py3-none-any.whl");
    let make = r#"
import sys, zipfile
zi = zipfile.ZipInfo("pkg/lib/libx.so", date_time=(2026, 1, 1, 0, 0, 0))
zi.compress_type = zipfile.ZIP_DEFLATED
with zipfile.ZipFile(sys.argv[1], "w") as z:
    with z.open(zi, "w", force_zip64=True) as f:
        f.write(b"\x7fELF\x02\x01\x01" + bytes(9))
        chunk = bytes(1 << 24)
        for _ in range(32):
            f.write(chunk)
    z.writestr("pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
    z.writestr("pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
    z.writestr("pkg-1.0.dist-info/RECORD", "")
"#;
    let o = Command::new("python3")
        .args(["-c", make])
        .arg(&whl)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(env!("CARGO_BIN_EXE_kpack-tui"))
        .args(["scan", whl.to_str().unwrap(), "--no-tui"])
        .env("TMPDIR", disk.path())
        .output()
        .unwrap();
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(o.status.code().is_some(), "{text}");
    assert!(text.contains("cannot be spilled"), "{text}");
    assert_eq!(
        std::fs::read_dir(disk.path()).unwrap().count(),
        0,
        "nothing spilled"
    );
}
