//! `pack` end to end on the demo tree and generated trees.

mod common;

use common::*;
use kpack::elf::{self, ElfContent};
use kpack::kpack::archive::Archive;
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `pack` with one archive per family: these tests check the family layout
/// (`tests/trust.rs` and `tests/per_target.rs` cover the per-target default).
fn pack(args: &[&str]) -> std::process::Output {
    kpack(&[&["pack"], args, &["--archive-per", "family"]].concat())
}

/// Every entry of a tree: path → (kind, bytes or link target, mode, mtime).
fn snapshot(root: &Path) -> BTreeMap<String, (String, Vec<u8>, u32, i64)> {
    let mut m = BTreeMap::new();
    for e in walkdir(root) {
        let rel = e.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        let meta = std::fs::symlink_metadata(&e).unwrap();
        let (kind, content) = if meta.file_type().is_symlink() {
            (
                "link".to_string(),
                std::fs::read_link(&e)
                    .unwrap()
                    .to_string_lossy()
                    .as_bytes()
                    .to_vec(),
            )
        } else if meta.is_dir() {
            ("dir".to_string(), vec![])
        } else if !meta.is_file() {
            ("special".to_string(), vec![])
        } else {
            ("file".to_string(), std::fs::read(&e).unwrap())
        };
        let mtime = if kind == "link" { 0 } else { meta.mtime() };
        m.insert(rel, (kind, content, meta.mode() & 0o7777, mtime));
    }
    m
}

fn walkdir(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            out.push(p.clone());
            if std::fs::symlink_metadata(&p).unwrap().is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Code objects of a fat binary: (key, arch) → bytes.
fn code_objects(path: &Path, rel: &str) -> BTreeMap<(String, String), Vec<u8>> {
    let data = std::fs::read(path).unwrap();
    let aligned = elf::AlignedBytes::copy_of(&data);
    let ElfContent::Fat(fat) = elf::inspect(aligned.as_slice()).unwrap() else {
        panic!("{rel}")
    };
    let span = fat.fatbin.unwrap();
    let sec = &data[span.offset as usize..(span.offset + span.size) as usize];
    let mut m = BTreeMap::new();
    for b in &fat.bundles {
        let un = b.uncompressed(sec, 1 << 30).unwrap();
        for (e, bytes) in b.code_objects(&un).unwrap() {
            m.insert(
                (format!("{rel}#{}", b.index), e.id.arch().unwrap()),
                bytes.to_vec(),
            );
        }
    }
    m
}

/// A tree holding the demo plus hard links, an empty directory and a fifo.
fn rich_tree(dir: &Path) -> PathBuf {
    let t = copy_demo(dir);
    std::fs::hard_link(t.join("lib/librdc.so"), t.join("lib/zz-librdc-hardlink.so")).unwrap();
    std::fs::hard_link(t.join("include/vadd.h"), t.join("include/vadd-copy.h")).unwrap();
    std::fs::create_dir_all(t.join("share/empty/nested")).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(t.join("share/pipe"))
            .status()
            .unwrap()
            .success()
    );
    t
}

#[test]
fn combined_pack_round_trips_every_code_object() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = rich_tree(tmp.path());
    let before = snapshot(&tree);
    let out = tmp.path().join("out");
    let o = pack(&[
        tree.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--group",
        "demo",
        "--family",
        "gfx90X",
        "--family",
        "gfx103X",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("verify: sound"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("share/pipe: special file (fifo) skipped"),
        "{}",
        stderr(&o)
    );
    assert_eq!(snapshot(&tree), before, "the input tree is never modified");

    let a90 = Archive::open(&out.join(".kpack/demo_gfx90X.kpack")).unwrap();
    let a103 = Archive::open(&out.join(".kpack/demo_gfx103X.kpack")).unwrap();
    assert_eq!(
        a90.index.meta.gfx_arches,
        vec!["gfx900", "gfx906", "gfx908", "gfx90a:xnack+"]
    );
    assert_eq!(a103.index.meta.gfx_arches, vec!["gfx1030"]);
    let mut n = 0;
    for rel in [
        "bin/vadd_app",
        "bin/legacy_app",
        "lib/libvadd.so.1.0",
        "lib/librdc.so",
        "lib/libzkern.so",
    ] {
        for ((key, arch), bytes) in code_objects(&tree.join(rel), rel) {
            let a = if arch.starts_with("gfx103") {
                &a103
            } else {
                &a90
            };
            let e = a
                .entry(&key, &arch)
                .unwrap_or_else(|| panic!("{key} @ {arch} not archived"));
            assert_eq!(&*a.kernel(e).unwrap(), &bytes[..], "{key} @ {arch}");
            assert_eq!(
                e.metadata.get("target"),
                Some(format!("hipv4-amdgcn-amd-amdhsa--{arch}").as_str())
            );
            n += 1;
        }
    }
    assert_eq!(
        n as usize,
        a90.index.kernels.len() + a103.index.kernels.len()
    );
    // Packed executables run; packed libraries load.
    for exe in ["bin/vadd_app", "bin/legacy_app"] {
        let o = Command::new(out.join(exe)).output().unwrap();
        assert!(o.status.success(), "{exe}");
    }
    // Copies are faithful: bytes, modes, mtimes, links.
    let after = snapshot(&out);
    for (rel, (kind, content, mode, mtime)) in &before {
        if rel == "share/pipe" {
            assert!(!after.contains_key(rel));
            continue;
        }
        let got = after.get(rel).unwrap_or_else(|| panic!("{rel} missing"));
        assert_eq!(&got.0, kind, "{rel}");
        assert_eq!(got.2, *mode, "{rel} mode");
        if kind != "link" {
            assert_eq!(got.3, *mtime, "{rel} mtime");
        }
        let packed = [
            "bin/vadd_app",
            "bin/legacy_app",
            "lib/libvadd.so.1.0",
            "lib/librdc.so",
            "lib/zz-librdc-hardlink.so",
            "lib/libzkern.so",
        ];
        if !packed.contains(&rel.as_str()) {
            assert_eq!(&got.1, content, "{rel} content");
        }
    }
    let ino = |p: &str| std::fs::metadata(out.join(p)).unwrap().ino();
    assert_eq!(
        ino("lib/librdc.so"),
        ino("lib/zz-librdc-hardlink.so"),
        "hard links stay hard links"
    );
    assert_eq!(ino("include/vadd.h"), ino("include/vadd-copy.h"));
    assert!(out.join("share/empty/nested").is_dir());
    // The standalone verify agrees.
    let o = kpack(&["verify", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stdout(&o));
}

#[test]
fn output_is_identical_across_thread_counts_and_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = rich_tree(tmp.path());
    let mut snaps = Vec::new();
    for (i, j) in ["1", "2", "2"].iter().enumerate() {
        let out = tmp.path().join(format!("out{i}"));
        let o = pack(&[
            tree.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--group",
            "demo",
            "--family",
            "gfx90X",
            "--family",
            "gfx103X",
            "-j",
            j,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        snaps.push(
            snapshot(&out)
                .into_iter()
                .map(|(k, v)| (k, (v.0, v.1, v.2)))
                .collect::<BTreeMap<_, _>>(),
        );
    }
    assert!(snaps[0] == snaps[1], "-j1 and -j2 differ");
    assert!(snaps[1] == snaps[2], "two runs differ");
}

#[test]
fn split_layout_gives_generic_tree_and_family_overlays() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("split");
    let o = pack(&[
        demo().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--group",
        "demo",
        "--family",
        "gfx90X",
        "--family",
        "gfx103X",
        "--layout",
        "split",
    ]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(out.join("generic/bin/vadd_app").is_file());
    assert!(
        !out.join("generic/lib/rocblas/library/TensileLibrary_gfx90a.dat")
            .exists(),
        "no arch DB files in generic"
    );
    assert!(
        out.join("generic/lib/rocblas/library/TensileLibrary.dat")
            .exists(),
        "arch-independent DB files stay generic"
    );
    assert!(out.join("gfx90X/.kpack/demo_gfx90X.kpack").is_file());
    assert!(
        out.join("gfx90X/lib/rocblas/library/TensileLibrary_gfx90a.dat")
            .is_file()
    );
    assert!(out.join("gfx90X/share/miopen/db/gfx90a.tn.model").is_file());
    assert!(out.join("gfx103X/.kpack/demo_gfx103X.kpack").is_file());
    // generic + one overlay = a working install for that family.
    let merged = tmp.path().join("merged");
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(out.join("generic"))
            .arg(&merged)
            .status()
            .unwrap()
            .success()
    );
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", out.join("gfx90X").display()))
            .arg(&merged)
            .status()
            .unwrap()
            .success()
    );
    // generic + the gfx90X overlay only: the gfx103X archive is not installed, which
    // the ledger (split layout) says is a note, not a fault.
    let o = kpack(&["verify", merged.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("demo_gfx103X.kpack: not installed"),
        "{}",
        stdout(&o)
    );
    assert!(
        Command::new(merged.join("bin/vadd_app"))
            .status()
            .unwrap()
            .success()
    );
    let o = kpack(&["verify", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stdout(&o));
}

#[test]
fn unassigned_archs_stop_before_writing_or_are_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = pack(&[
        demo().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--group",
        "demo",
        "--family",
        "gfx103X",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("gfx900") && e.contains("gfx90a:xnack+") && e.contains("--unassigned drop"),
        "{e}"
    );
    assert!(!out.exists());
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "no temporary left"
    );
    let o = pack(&[
        demo().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--group",
        "demo",
        "--family",
        "gfx103X",
        "--unassigned",
        "drop",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("dropped (not selected by --family, --target or --all): gfx900"),
        "{}",
        stdout(&o)
    );
    let a = Archive::open(&out.join(".kpack/demo_gfx103X.kpack")).unwrap();
    assert!(a.index.kernels.iter().all(|k| &*k.arch == "gfx1030"));
}

#[test]
fn output_guards() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = rich_tree(tmp.path());
    let inside = tree.join("packed");
    let o = pack(&[
        tree.to_str().unwrap(),
        "-o",
        inside.to_str().unwrap(),
        "--group",
        "g",
        "--family",
        "gfx90X",
        "--family",
        "gfx103X",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is inside the input"), "{}", stderr(&o));
    let out = tmp.path().join("full");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep.txt"), "x").unwrap();
    let args = [
        tree.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--group",
        "g",
        "--family",
        "gfx90X",
        "--family",
        "gfx103X",
    ];
    // A directory a pack did not write is never replaced, --force or not (#14.9).
    for extra in [&[][..], &["--force"][..]] {
        let o = pack(&[&args[..], extra].concat());
        assert_eq!(o.status.code(), Some(2));
        assert!(
            stderr(&o).contains("not a previous pack's output"),
            "{}",
            stderr(&o)
        );
        assert!(out.join("keep.txt").exists());
    }
    // A previous pack's output (it has a ledger) needs --force, and is replaced.
    std::fs::remove_dir_all(&out).unwrap();
    assert!(pack(&args).status.success());
    std::fs::write(out.join("stale.txt"), "x").unwrap();
    let o = pack(&args);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("pass --force"), "{}", stderr(&o));
    let o = pack(&[&args[..], &["--force"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!out.join("stale.txt").exists());
    assert!(out.join(".kpack/g_gfx90X.kpack").exists());
    let o = pack(&[
        tree.to_str().unwrap(),
        "-o",
        "/tmp/x",
        "--group",
        "a/b",
        "--family",
        "gfx90X",
    ]);
    assert!(stderr(&o).contains("group name"));
    let o = pack(&[
        tree.to_str().unwrap(),
        "-o",
        "/tmp/x",
        "--group",
        "g",
        "--family",
        "gfx90X",
        "--family",
        "x=gfx906",
    ]);
    assert!(stderr(&o).contains("both"), "{}", stderr(&o));
}

#[test]
fn dry_run_writes_nothing_and_reports_the_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = pack(&[
        demo().to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--group",
        "demo",
        "--family",
        "gfx90X",
        "--dry-run",
        "--json",
    ]);
    // The real run would stop on gfx1030 (--unassigned error): so does the dry run
    // (#14.6), after printing the plan.
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("gfx1030"), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "kpack-tui.pack-plan/2");
    assert_eq!(v["units"][0]["name"], "gfx90X");
    assert!(v["units"][0]["code_objects"].as_u64().unwrap() >= 10);
    assert!(
        v["units"][0]["estimated_bytes"].as_u64().unwrap()
            < v["units"][0]["raw_bytes"].as_u64().unwrap()
    );
    assert!(v["unassigned"]["gfx1030"].as_u64().unwrap() > 0);
    assert!(!out.exists());
}

/// A tree big enough that a pack takes a while: many copies of the fixtures.
fn many_binaries(dir: &Path, n: usize) -> PathBuf {
    let t = dir.join("many");
    std::fs::create_dir_all(t.join("lib")).unwrap();
    std::fs::create_dir_all(t.join("bin")).unwrap();
    for i in 0..n {
        std::fs::copy(
            fixtures().join("libvadd.so"),
            t.join(format!("lib/libv{i:03}.so")),
        )
        .unwrap();
        std::fs::copy(fixtures().join("app_pie"), t.join(format!("bin/app{i:03}"))).unwrap();
        std::fs::copy(
            fixtures().join("libzkern.so"),
            t.join(format!("lib/libz{i:03}.so")),
        )
        .unwrap();
    }
    t
}

#[test]
fn a_kill_at_any_point_leaves_no_partial_output() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = many_binaries(tmp.path(), 60);
    let out = tmp.path().join("out");
    let exe = env!("CARGO_BIN_EXE_kpack-tui");
    let args = [
        "pack",
        tree.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--group",
        "g",
        "--family",
        "gfx90X",
        "--family",
        "gfx103X",
        "-j",
        "2",
    ];
    // Time a full run, then kill at points spread over it (several seeds).
    let t = std::time::Instant::now();
    assert!(
        Command::new(exe)
            .args(args)
            .output()
            .unwrap()
            .status
            .success()
    );
    let full = t.elapsed();
    std::fs::remove_dir_all(&out).unwrap();
    let mut seed = 0x2545_F491u64;
    for _ in 0..6 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let at = full.mul_f64((seed % 1000) as f64 / 1000.0);
        let mut child = Command::new(exe)
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(at);
        let _ = child.kill();
        let _ = child.wait();
        if out.exists() {
            let o = kpack(&["verify", out.to_str().unwrap()]);
            assert!(
                o.status.success(),
                "killed after {at:?}: OUT exists but does not verify: {}",
                stdout(&o)
            );
            std::fs::remove_dir_all(&out).unwrap();
        }
    }
    // The next run cleans up what killed runs left.
    let o = Command::new(exe).args(args).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let left: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("kpack-tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::Permissions::from_mode(0o644);
}

/// #29 item 6: a library whose `.hip_fatbin` spans no whole page cannot shrink; the
/// growth note says so instead of "keeps 13720 of 10880 bytes". Built here with
/// clang-19 (one small compressed bundle).
#[test]
fn a_binary_that_cannot_shrink_is_explained() {
    if tool("clang++-19").is_none() || tool("ld.lld-19").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("t");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/src/mix.hip");
    let obj = tmp.path().join("tiny.o");
    let cc = Command::new("clang++-19")
        .args(["-x", "hip", "--rocm-path=/usr"])
        .arg("--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")
        .args(["-O2", "-g0", "-fPIC", "--offload-compress", "-DTU=1"])
        .arg("--offload-arch=gfx900")
        .arg("-c")
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .unwrap();
    assert!(cc.status.success(), "{}", stderr(&cc));
    let lib = tree.join("lib/libtiny.so");
    let ld = Command::new("clang++-19")
        .args(["-fuse-ld=lld-19", "-shared", "-Wl,--build-id=none"])
        .arg(&obj)
        .args(["-L/usr/lib/x86_64-linux-gnu", "-lamdhip64", "-o"])
        .arg(&lib)
        .output()
        .unwrap();
    assert!(ld.status.success(), "{}", stderr(&ld));
    let fat = std::fs::metadata(&lib).unwrap().len();
    let out = tmp.path().join("o");
    let o = pack(&[
        tree.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--group",
        "g",
        "--all",
        "--long",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let host = std::fs::metadata(out.join("lib/libtiny.so")).unwrap().len();
    assert!(host > fat, "{host} vs {fat}");
    let want = format!(
        "the host-only file is {host} bytes, {} more than the fat binary ({fat}): its \
         .hip_fatbin spans no whole page to remove",
        host - fat
    );
    assert!(stdout(&o).contains(&want), "{}", stdout(&o));
    assert!(!stdout(&o).contains("keeps"), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("sound (1 code object proved reachable with its recorded hash)"),
        "{}",
        stdout(&o)
    );
}
