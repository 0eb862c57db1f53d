//! Hostile inputs and outputs, round 2 (issue #27): outputs that are, or lie inside,
//! their input, reached directly, through a symlink or through `..` in a path that does
//! not exist yet. Each is refused before anything is written, and the input is left
//! byte for byte as it was.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

fn refused(args: &[&str], says: &str) {
    let o = kpack(args);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{args:?}: {}{}",
        stdout(&o),
        stderr(&o)
    );
    assert!(
        stderr(&o).contains(says),
        "{args:?}: expected {says:?} in {}",
        stderr(&o)
    );
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Item 4: pack's output-inside-input guard sees through a symlink and `..` in an
/// OUT that does not exist yet.
#[test]
fn pack_never_writes_into_its_input_through_a_symlink_or_dotdot() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = copy_demo(tmp.path());
    let before = tree_hashes(&tree);
    std::os::unix::fs::symlink(&tree, tmp.path().join("link")).unwrap();
    let pack = |out: &Path| {
        refused(
            &["pack", s(&tree), "-o", s(out), "--group", "g", "--all"],
            "is inside the input",
        )
    };
    pack(&tmp.path().join("link/new/out"));
    pack(&tmp.path().join("nowhere/../tree/out"));
    pack(&tree.join("a/b/../../c"));
    refused(
        &[
            "pack",
            s(&tree.join("lib")),
            "-o",
            s(&tmp.path().join("link")),
            "--group",
            "g",
            "--all",
        ],
        "holds the input",
    );
    assert_eq!(tree_hashes(&tree), before, "the input is untouched");
    assert!(!tree.join("new").exists() && !tree.join("out").exists() && !tree.join("c").exists());
}

/// Item 5: an output that is the input itself (by path, through a symlink, or a hard
/// link to it) is refused: rewrite, extract, split.
#[test]
fn an_output_that_is_the_input_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let bin = t.join("libvadd.so");
    std::fs::copy(fixtures().join("libvadd.so"), &bin).unwrap();
    std::fs::hard_link(&bin, t.join("second.so")).unwrap();
    std::os::unix::fs::symlink(&bin, t.join("alias.so")).unwrap();
    let fat = std::fs::read(&bin).unwrap();
    for out in ["libvadd.so", "second.so", "alias.so"] {
        refused(
            &[
                "rewrite",
                s(&bin),
                "-o",
                s(&t.join(out)),
                "--kernel-name",
                "lib/libvadd.so",
                "--search-path",
                "x.kpack",
            ],
            "is the input",
        );
    }
    assert_eq!(
        std::fs::read(&bin).unwrap(),
        fat,
        "the fat binary is untouched"
    );

    // extract A.kpack K T -o A.kpack
    let packed = t.join("packed");
    let o = pack_rocm(&demo(), &packed, &["--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let archive = std::fs::read_dir(packed.join(".kpack"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "kpack"))
        .unwrap();
    let bytes = std::fs::read(&archive).unwrap();
    let l = ledger(&packed);
    let b = &l.binaries[0];
    let key = format!("{}#{}", b.kernel_name, b.kernels[0].bundle);
    refused(
        &[
            "extract",
            s(&archive),
            &key,
            &b.kernels[0].target,
            "-o",
            s(&archive),
        ],
        "is the input",
    );
    // Extracting next to the archive is fine; onto it is not.
    let o = kpack(&[
        "extract",
        s(&archive),
        "--all",
        "-o",
        s(&packed.join(".kpack")),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(&archive).unwrap(),
        bytes,
        "the archive is untouched"
    );

    // split ART -o ART, and into ART
    let art = fixture_artifact(t);
    let before = tree_hashes(&art);
    for out in [art.clone(), art.join("out")] {
        refused(
            &[
                "split",
                s(&art),
                "-o",
                s(&out),
                "--artifact-prefix",
                "blas_lib",
            ],
            "the input",
        );
    }
    assert_eq!(tree_hashes(&art), before, "the artifact is untouched");
}

/// Item 3: `extract --all` into an OUT that already holds a symlink where a kernel's
/// directory would go is refused before anything is created or written, inside OUT
/// or where the symlink points.
#[test]
fn extract_all_never_follows_a_symlink_inside_its_output() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let packed = t.join("packed");
    let o = pack_rocm(&demo(), &packed, &["--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let archive = packed.join(".kpack/rocm_gfx906.kpack");
    let out = t.join("out");
    let outside = t.join("outside");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    // bin/… keys come first in the archive, lib/… ones after: the refusal must
    // come before the first write.
    std::os::unix::fs::symlink(&outside, out.join("lib")).unwrap();
    refused(
        &["extract", s(&archive), "--all", "-o", s(&out)],
        "is a symlink",
    );
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing outside"
    );
    let inside: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(inside, ["lib"], "nothing but the symlink in OUT");
    // A file where a directory would go is refused the same way.
    std::fs::remove_file(out.join("lib")).unwrap();
    std::fs::write(out.join("lib"), b"x").unwrap();
    refused(
        &["extract", s(&archive), "--all", "-o", s(&out)],
        "is not a directory",
    );
}

/// Item 2: `combine --config` puts several artifacts into one output; a symlink in
/// one (`stage/evil` → outside) and a file under that path in another must not
/// write through the link: refused, nothing outside.
#[test]
fn combine_never_writes_through_one_artifacts_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let art = fixture_artifact(t);
    let (s1, s2) = (t.join("shards/s1"), t.join("shards/s2"));
    split_shard(&art, &s1, "gfx900");
    split_shard(&art, &s2, "gfx906");
    let outside = t.join("outside");
    std::fs::create_dir(&outside).unwrap();
    let a900 = s1.join("blas_lib_gfx900").join(BLAS_PREFIX);
    let a906 = s2.join("blas_lib_gfx906").join(BLAS_PREFIX);
    std::fs::create_dir_all(&a900).unwrap();
    std::fs::create_dir_all(a906.join("evil")).unwrap();
    std::os::unix::fs::symlink(&outside, a900.join("evil")).unwrap();
    std::fs::write(a906.join("evil/pwn.txt"), b"written through the link").unwrap();
    let cfg = t.join("groups.json");
    std::fs::write(
        &cfg,
        r#"{"primary_shard":"s1","architecture_groups":{
            "gfx90X":{"architectures":["gfx900","gfx906"]}}}"#,
    )
    .unwrap();
    let out = t.join("combined");
    let o = kpack(&[
        "combine",
        s(&s1),
        s(&s2),
        "-o",
        s(&out),
        "--config",
        s(&cfg),
    ]);
    assert!(!o.status.success(), "{}", stdout(&o));
    assert!(stderr(&o).contains("is a symlink"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing outside"
    );
    assert!(!out.exists(), "no output");
}

/// Item 6: a manifest prefix whose path passes through a symlink (`art/x` → a
/// directory elsewhere) is refused: split never packages what lies outside the
/// artifact.
#[test]
fn split_never_follows_a_symlinked_prefix_out_of_the_artifact() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let art = fixture_artifact(t);
    let elsewhere = t.join("elsewhere/stage/lib");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::copy(
        fixtures().join("libvadd.so"),
        elsewhere.join("libsecret.so"),
    )
    .unwrap();
    std::os::unix::fs::symlink(t.join("elsewhere"), art.join("x")).unwrap();
    std::fs::write(
        art.join("artifact_manifest.txt"),
        format!("{BLAS_PREFIX}\nx/stage\n"),
    )
    .unwrap();
    let out = t.join("out");
    refused(
        &[
            "split",
            s(&art),
            "-o",
            s(&out),
            "--artifact-prefix",
            "blas_lib",
        ],
        "does not stay inside the artifact",
    );
    assert!(!out.exists());
}

/// Item 6, the race: a file swapped for a symlink (to a file outside the tree) after
/// the scan is not followed. The swap is made while the pack is under way (on its
/// first progress line, 3000 binaries before the swapped file at -j 1), so it lands
/// between the scan and the copy however loaded the machine is.
#[test]
fn pack_does_not_follow_a_file_swapped_for_a_symlink_after_the_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = many_binaries(tmp.path());
    std::fs::write(tree.join("zzz.txt"), b"an ordinary file\n").unwrap();
    let secret = tmp.path().join("secret.txt");
    std::fs::write(&secret, b"outside the tree\n").unwrap();
    let out = tmp.path().join("out");
    let (mut child, mut err, seen) = pack_under_way(&tree, &out);
    std::fs::remove_file(tree.join("zzz.txt")).unwrap();
    std::os::unix::fs::symlink(&secret, tree.join("zzz.txt")).unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let status = child.wait().unwrap();
    let text = format!("{seen}{rest}");
    assert_eq!(status.code(), Some(2), "{text}");
    assert!(
        text.contains("no longer the regular file the scan saw"),
        "{text}"
    );
    assert!(!out.exists(), "no output");
}

/// Item 6, the rest: a directory on a file's path swapped for a symlink to a
/// directory outside the tree after the scan. `O_NOFOLLOW` guards only the last
/// component; the file opened must be the inode the scan read.
#[test]
fn pack_does_not_follow_a_directory_swapped_for_a_symlink_after_the_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = many_binaries(tmp.path());
    std::fs::create_dir_all(tree.join("zz")).unwrap();
    std::fs::write(tree.join("zz/data.txt"), b"inside\n").unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("data.txt"), b"outside the tree\n").unwrap();
    let out = tmp.path().join("out");
    let (mut child, mut err, seen) = pack_under_way(&tree, &out);
    std::fs::rename(tree.join("zz"), tmp.path().join("zz-moved")).unwrap();
    std::os::unix::fs::symlink(&outside, tree.join("zz")).unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let status = child.wait().unwrap();
    let text = format!("{seen}{rest}");
    assert_eq!(status.code(), Some(2), "{text}");
    assert!(
        text.contains("zz/data.txt: no longer the regular file the scan saw (another file now)"),
        "{text}"
    );
    assert!(!out.exists(), "no output");
}

/// Item 13: a TOC key (or arch) longer than 65535 bytes is listed, not a panic
/// ("Formatting argument out of range", exit 101): the archive listing and `kernels`.
#[test]
fn keys_longer_than_any_column_do_not_panic() {
    use kpack::kpack::archive::{ArchiveMeta, ArchiveWriter, Scheme};
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("long.kpack");
    let meta = ArchiveMeta {
        group_name: "g".into(),
        gfx_arch_family: "gfx906".into(),
        gfx_arches: vec!["gfx906".into()],
    };
    let w = ArchiveWriter::create(&p, meta, Scheme::ZstdPerKernel, 3).unwrap();
    let key = format!("lib/{}.so#0", "k".repeat(70_000));
    let co = std::fs::read(fixtures().join("vadd-gfx90a.co")).unwrap();
    w.add(&key, "gfx906", &co).unwrap();
    w.finish().unwrap();
    for args in [
        &[s(&p), "--no-tui"][..],
        &["kernels", s(&p), "--no-tui"][..],
    ] {
        let o = kpack(args);
        assert_ne!(o.status.code(), Some(101), "{args:?}: {}", stderr(&o));
        assert!(o.status.code().is_some(), "{args:?}: killed");
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    }
}

/// Item 11: a FIFO given as PATH is named and refused (or reported as a special
/// file), never opened for a blocking read: each command ends on its own.
#[test]
fn a_fifo_as_path_never_blocks() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("pipe");
    let ok = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(ok.success());
    let f = s(&fifo);
    let out = tmp.path().join("o");
    let o = s(&out);
    for args in [
        &[f, "--no-tui"][..],
        &["scan", f, "--no-tui"],
        &["preview", f, "--no-tui"],
        &[
            "rewrite",
            f,
            "-o",
            o,
            "--kernel-name",
            "x",
            "--search-path",
            "y",
        ],
        &["extract", f, "--all", "-o", o],
        &["trace", f, "--no-tui"],
        &["verify", f],
    ] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kpack-tui"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // A generous deadline: each of these ends in milliseconds; a blocked open
        // never ends (nothing writes to the FIFO).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{args:?} blocked on the FIFO");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let o = child.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(status.code().is_some_and(|c| c != 101), "{args:?}: {text}");
        assert!(
            text.contains("FIFO") || text.contains("fifo") || text.contains("not a regular file"),
            "{args:?} does not say what it is: {text}"
        );
    }
}

/// Item 16 (in part): `pack --force` replaces only a previous pack's output. A
/// directory holding an empty (or foreign) file named like the ledger is left alone.
#[test]
fn force_needs_a_ledger_that_proves_a_previous_pack() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir_all(out.join(".kpack")).unwrap();
    std::fs::write(out.join("precious.txt"), b"keep me").unwrap();
    for ledger in [
        &b""[..],
        b"{\"schema\":\"kpack-tui.ledger/1\"}",
        b"not json",
    ] {
        std::fs::write(out.join(".kpack/kpack-tui-ledger.json"), ledger).unwrap();
        let o = pack_rocm(&demo(), &out, &["--all", "--force"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("is not a previous pack's output"),
            "{}",
            stderr(&o)
        );
        assert_eq!(std::fs::read(out.join("precious.txt")).unwrap(), b"keep me");
    }
    // A real previous pack is replaced.
    let prev = tmp.path().join("prev");
    assert!(pack_rocm(&demo(), &prev, &["--all"]).status.success());
    let o = pack_rocm(&demo(), &prev, &["--all", "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Items 16 and 24: what interrupted runs and odd outputs leave is handled before any
/// work: an OUT that is a dangling symlink or under a file is named at once; a stray
/// file named like a dead run's stage is removed (it blocked every pack); a previous
/// output that a killed `--force` run had moved aside is put back, never lost.
#[test]
fn leftovers_of_killed_runs_and_odd_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    // A pid no process has: above the largest pid_max Linux allows.
    let dead = 4_194_305u32;
    let link = t.join("dangling");
    std::os::unix::fs::symlink(t.join("nowhere"), &link).unwrap();
    let o = pack_rocm(&demo(), &link, &["--all"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("is a symlink that points nowhere"),
        "{}",
        stderr(&o)
    );
    std::fs::write(t.join("file"), b"x").unwrap();
    let o = pack_rocm(&demo(), &t.join("file/out"), &["--all"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is not a directory"), "{}", stderr(&o));
    assert!(
        !stderr(&o).contains("packed"),
        "refused before packing: {}",
        stderr(&o)
    );

    let out = t.join("out");
    let stray = t.join(format!(".out.kpack-tmp-{dead}"));
    std::fs::write(&stray, b"not a directory").unwrap();
    let o = pack_rocm(&demo(), &out, &["--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stray.exists());

    // Killed between the two renames of --force: OUT absent, the old one aside.
    let aside = t.join(format!(".out.kpack-tmp-{dead}-old"));
    std::fs::rename(&out, &aside).unwrap();
    let before = tree_hashes(&aside);
    let o = pack_rocm(&demo(), &out, &["--all"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("restoring"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("holds a previous pack"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        tree_hashes(&out),
        before,
        "the previous output is back, whole"
    );
    assert!(!aside.exists());
    let o = pack_rocm(&demo(), &out, &["--all", "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Item 22: temporaries a killed run left (a half-written `normalize` repair in the
/// install tree, stages of split, combine and wheel split in their output) are
/// removed by the next run; those of a live process are not touched.
#[test]
fn the_next_run_removes_what_a_killed_one_left() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let dead = 4_194_305u32;
    let me = std::process::id();
    // normalize, in the tree it walks.
    let tree = t.join("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::copy(fixtures().join("app_pie"), tree.join("app")).unwrap();
    let stale = tree.join(format!(".kpack-tui-normalize-{dead}-abc"));
    let live = tree.join(format!(".kpack-tui-normalize-{me}-abc"));
    std::fs::write(&stale, b"half a binary").unwrap();
    std::fs::write(&live, b"someone's repair").unwrap();
    let o = kpack(&["normalize", s(&tree)]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(!stale.exists() && live.exists());
    assert!(
        stderr(&o).contains("left by an interrupted run"),
        "{}",
        stderr(&o)
    );
    // split's stage in its output.
    let art = fixture_artifact(t);
    let out = t.join("out");
    std::fs::create_dir(&out).unwrap();
    let stage = out.join(format!(".kpack-tui-split-{dead}-xyz"));
    std::fs::create_dir_all(stage.join("blas_lib_generic")).unwrap();
    let o = kpack(&[
        "split",
        s(&art),
        "-o",
        s(&out),
        "--artifact-prefix",
        "blas_lib",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stage.exists(), "the stale stage is gone");
    assert!(
        stderr(&o).contains("left by an interrupted run"),
        "{}",
        stderr(&o)
    );
}

/// Item 21: a fat binary whose `.hip_fatbin` cannot be read (a section size past the
/// end of the file, a section table out of range, a bundle claiming 2^31 entries) is
/// a named finding for `kernels` (exit 1, never "0 kernels", exit 0), its device
/// bytes are not made up from the lying size, and `extract --all` refuses it.
#[test]
fn damaged_device_code_is_never_zero_kernels() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let mut d = std::fs::read(fixtures().join("libvadd.so")).unwrap();
    let lay = kpack::elf::rewrite::parse_layout(&d).unwrap();
    let i = lay
        .sections
        .iter()
        .position(|x| x.name == ".hip_fatbin")
        .unwrap();
    let at = lay.e_shoff as usize + i * 64 + 32;
    d[at..at + 8].copy_from_slice(&0x7fff_ffff_ffffu64.to_le_bytes());
    let lying = t.join("lying.so");
    std::fs::write(&lying, &d).unwrap();
    let mut b = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    b.extend_from_slice(&0x8000_0000u64.to_le_bytes());
    b.resize(96, 0);
    let many = t.join("many.hipfb");
    std::fs::write(&many, &b).unwrap();
    for (f, says) in [
        (&lying, "passes the end of the file"),
        (&many, "entry count 2147483648"),
    ] {
        let o = kpack(&["kernels", s(f), "--no-tui"]);
        assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
        assert!(stderr(&o).contains(says), "{}", stderr(&o));
        let o = kpack(&["extract", s(f), "--all", "-o", s(&t.join("x"))]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(!t.join("x").exists());
    }
    let o = kpack(&["scan", s(&lying), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // No device bytes made up from the lying size (0 is left out of the file row).
    assert!(
        j["files"][0]["fatbin_bytes"].as_u64().unwrap_or(0) == 0,
        "{j}"
    );
    assert_eq!(j["totals"]["fatbin_bytes"], 0, "{j}");
}

/// Item 9: a wheel's symlink member is checked against the 4 KiB bound before it is
/// inflated: a 1 MB wheel whose "symlink" inflates to 1 GiB is a named problem under
/// an 800 MB address-space limit (it took the whole GiB, and aborted under a limit).
#[test]
fn a_symlink_member_bomb_is_never_inflated() {
    if tool("python3").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let whl = tmp.path().join("bomb-1.0-py3-none-any.whl");
    let make = r#"
import sys, zipfile
zi = zipfile.ZipInfo("pkg/evil-link", date_time=(2026, 1, 1, 0, 0, 0))
zi.create_system = 3
zi.external_attr = 0o120777 << 16
zi.compress_type = zipfile.ZIP_DEFLATED
with zipfile.ZipFile(sys.argv[1], "w") as z:
    with z.open(zi, "w", force_zip64=True) as f:
        chunk = bytes(1 << 24)
        for _ in range(64):
            f.write(chunk)
    z.writestr("pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
    z.writestr("pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
    z.writestr("pkg-1.0.dist-info/RECORD", "")
"#;
    let o = std::process::Command::new("python3")
        .args(["-c", make])
        .arg(&whl)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::metadata(&whl).unwrap().len() < 4 << 20);
    for cmd in ["scan", "kernels"] {
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -v 800000; exec \"$0\" {cmd} \"$1\" --no-tui"
            ))
            .arg(env!("CARGO_BIN_EXE_kpack-tui"))
            .arg(&whl)
            .output()
            .unwrap();
        let text = format!("{}{}", stdout(&o), stderr(&o));
        assert!(
            o.status.code().is_some(),
            "{cmd}: killed by a signal: {text}"
        );
        assert!(
            text.contains("symlink member with a target over 4 KiB"),
            "{cmd}: {text}"
        );
    }
}

/// Item 8: `original_size` is not trusted for memory. An archive of a few hundred KB
/// whose three frames each really decode to 512 MiB (zeros) is verified, and a packed
/// tree's hash check made, by streaming: under an 800 MB address-space limit `verify`
/// answers (sound: the frames are what they say), where decoding each into a buffer
/// of its declared size took 1.5 GB.
#[test]
fn frames_that_decode_to_gigabytes_are_verified_in_bounded_memory() {
    use std::io::Write;
    let tmp = tempfile::tempdir().unwrap();
    const SIZE: u64 = 512 << 20;
    let frame = {
        let mut e = zstd::stream::Encoder::new(Vec::new(), 1).unwrap();
        e.include_contentsize(true).unwrap();
        e.set_pledged_src_size(Some(SIZE)).unwrap();
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..SIZE >> 20 {
            e.write_all(&chunk).unwrap();
        }
        e.finish().unwrap()
    };
    let mut f = vec![0u8; 64];
    f[..4].copy_from_slice(b"KPAK");
    f[4..8].copy_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&3u32.to_le_bytes());
    for _ in 0..3 {
        f.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        f.extend_from_slice(&frame);
    }
    let zstd_size = f.len() as u64 - 64;
    let entry = |o: u64| serde_json::json!({"gfx900": {"type": "hsaco", "ordinal": o, "original_size": SIZE}});
    let toc = serde_json::json!({"group_name": "g", "gfx_arch_family": "gfx900",
        "gfx_arches": ["gfx900"], "compression_scheme": "zstd-per-kernel",
        "toc": {"lib/a.so#0": entry(0), "lib/a.so#1": entry(1), "lib/a.so#2": entry(2)},
        "zstd_offset": 64, "zstd_size": zstd_size});
    let toc_offset = f.len() as u64;
    f[8..16].copy_from_slice(&toc_offset.to_le_bytes());
    f.extend_from_slice(&rmp_serde::to_vec_named(&toc).unwrap());
    let a = tmp.path().join("bomb.kpack");
    std::fs::write(&a, &f).unwrap();
    assert!(f.len() < 1 << 20, "{}", f.len());
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 800000; exec \"$0\" verify \"$1\" --no-tui")
        .arg(env!("CARGO_BIN_EXE_kpack-tui"))
        .arg(&a)
        .output()
        .unwrap();
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("sound"), "{text}");
}

/// Item 24: a directory nested past what the file system can name (2,100 levels:
/// paths over 4,096 bytes) is named as unreadable, with its path shortened and no
/// `--copy-damaged` advice (which cannot copy it either); nothing is written.
#[test]
fn a_tree_nested_past_path_max_is_refused_as_unreadable() {
    let Some(py) = tool("python3") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("t");
    std::fs::create_dir(&tree).unwrap();
    let deep = r#"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
for _ in range(2100):
    os.mkdir("d", dir_fd=fd)
    nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = nfd
os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
"#;
    let o = std::process::Command::new(py)
        .args(["-c", deep])
        .arg(&tree)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = tmp.path().join("out");
    let o = kpack(&[
        "pack",
        tree.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--group",
        "g",
        "--all",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("path(s) of the tree cannot be read"), "{e}");
    assert!(e.contains("File name too long"), "{e}");
    assert!(!e.contains("--copy-damaged"), "{e}");
    assert!(e.lines().all(|l| l.len() < 600), "{e}");
    assert!(!out.exists());
}

/// #27 item 12: a file that shrinks while it is mapped (another process truncates
/// it) faulted with SIGBUS, exit 135 and no word. The fault is now named: the file,
/// what happened, status 2; a pack it stops leaves no output, and the next pack
/// removes its stage. (The suite's hook truncates the test's own copy right after it
/// is mapped: the worst moment, without a race.)
#[test]
fn an_input_that_shrinks_while_mapped_is_named_instead_of_a_bare_sigbus() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    for f in ["libvadd.so", "libzkern.so"] {
        std::fs::copy(fixtures().join(f), tree.join("lib").join(f)).unwrap();
    }
    let victim = tree.join("lib/libzkern.so");
    // `half`: the file is cut to half its length, not to nothing.
    let run = |hook: &str, half: bool, args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_kpack-tui"));
        c.args(args).env("KPACK_TUI_TEST_SHRINK_MAPPED", hook);
        if half {
            c.env("KPACK_TUI_TEST_SHRINK_HALF", "1");
        }
        c.output().unwrap()
    };
    let said = format!(
        "kpack-tui: error: {}: the file changed while being read (it shrank while mapped); \
         nothing was written",
        victim.display()
    );
    // Scan: the file given alone.
    let v = victim.to_str().unwrap();
    let o = run(v, false, &["scan", v, "--no-tui"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(stderr(&o).contains(&said), "{}", stderr(&o));
    // Shrunk to half: the scan reads its headers with positioned reads, which a
    // shrink makes fail as a malformed ELF; the change is still what is said.
    std::fs::copy(fixtures().join("libzkern.so"), &victim).unwrap();
    let o = run(v, true, &["scan", v, "--no-tui"]);
    let whole = std::fs::metadata(fixtures().join("libzkern.so"))
        .unwrap()
        .len();
    assert_eq!(std::fs::metadata(&victim).unwrap().len(), whole / 2);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(stderr(&o).contains(&said), "{}", stderr(&o));
    assert!(!stdout(&o).contains("malformed"), "{}", stdout(&o));
    // Pack: shrunk when the pack maps it (after the scan mapped it once).
    std::fs::copy(fixtures().join("libzkern.so"), &victim).unwrap();
    let out = tmp.path().join("out");
    let (t, o_) = (tree.to_str().unwrap(), out.to_str().unwrap());
    let pack = ["pack", t, "-o", o_, "--group", "g", "--all", "-j", "1"];
    let o = run(&format!("{v}@2"), false, &pack);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&said), "{}", stderr(&o));
    assert!(!out.exists());
    // Shrunk to half when the pack maps it: the pack reads code objects with
    // positioned reads too, and says the same.
    std::fs::copy(fixtures().join("libzkern.so"), &victim).unwrap();
    let o = run(&format!("{v}@2"), true, &pack);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&said), "{}", stderr(&o));
    assert!(!out.exists());
    std::fs::copy(fixtures().join("libzkern.so"), &victim).unwrap();
    let o = kpack(&["pack", t, "-o", o_, "--group", "g", "--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("left by an interrupted run"),
        "{}",
        stderr(&o)
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("kpack-tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// #27 item 14, the loss: a file whose name is not UTF-8 beside one spelled with
/// U+FFFD was silently dropped by pack and split (the sibling copied twice, "verify:
/// sound"). Such a name is now said and the tree refused, nothing written, instead of
/// being addressed by a spelling that names another file.
#[test]
fn names_that_are_not_utf8_are_packed_and_split_under_their_own_bytes() {
    use std::os::unix::ffi::OsStrExt;
    let os = |b: &[u8]| std::ffi::OsStr::from_bytes(b).to_owned();
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    // Two names whose lossy spellings are the same file, and a directory that is
    // not UTF-8 either: each must come out under its own bytes.
    let raw = tree.join("lib").join(os(b"libv\xff.so"));
    std::fs::copy(fixtures().join("libvadd.so"), &raw).unwrap();
    std::fs::copy(
        fixtures().join("libzkern.so"),
        tree.join("lib/libv\u{fffd}.so"),
    )
    .unwrap();
    let odd_dir = tree.join(os(b"share\xfe"));
    std::fs::create_dir_all(&odd_dir).unwrap();
    std::fs::write(odd_dir.join(os(b"notes\x80.txt")), b"plain").unwrap();
    std::os::unix::fs::symlink(os(b"libv\xff.so"), tree.join("lib/libv.so")).unwrap();
    let before = tree_hashes(&tree);
    let t = tree.to_str().unwrap();
    let o = kpack(&["scan", t, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let kinds: std::collections::BTreeMap<String, String> = j["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().into(),
                f["kind"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(kinds["lib/libv\\xff.so"], "fat_binary", "{kinds:?}");
    assert_eq!(kinds["lib/libv\u{fffd}.so"], "fat_binary", "{kinds:?}");
    assert_eq!(kinds["share\\xfe/notes\\x80.txt"], "opaque", "{kinds:?}");
    let out = tmp.path().join("out");
    let o = kpack(&["pack", t, "-o", s(&out), "--group", "g", "--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(tree_hashes(&tree), before, "the input changed");
    let o = kpack(&["verify", s(&out)]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    // Each binary under its own name, host-only, naming itself exactly.
    for name in [os(b"libv\xff.so"), os("libv\u{fffd}.so".as_bytes())] {
        let p = out.join("lib").join(&name);
        let r = kpack::scan::inspect_file(&p, "x", p.metadata().unwrap().len(), 0);
        assert_eq!(r.kind, kpack::scan::FileKind::HostOnlyBinary, "{name:?}");
        let want = kpack::relpath::encode(Path::new("lib").join(&name).as_path()).unwrap();
        assert_eq!(r.marker.as_ref().unwrap().kernel_name, want);
    }
    assert_eq!(
        std::fs::read(out.join(os(b"share\xfe")).join(os(b"notes\x80.txt"))).unwrap(),
        b"plain"
    );
    assert_eq!(
        std::fs::read_link(out.join("lib/libv.so")).unwrap(),
        Path::new(&os(b"libv\xff.so"))
    );
    // extract --all writes the kernel under the binary's own bytes.
    let x = tmp.path().join("x");
    let o = kpack(&[
        "extract",
        s(&out.join(".kpack/g_gfx900.kpack")),
        "--all",
        "-o",
        s(&x),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        x.join("lib")
            .join(os(b"libv\xff.so#0"))
            .join("gfx900.hsaco")
            .is_file()
    );
    // The ledger names them by their exact spelling.
    let l = ledger(&out);
    assert!(l.binaries.iter().any(|b| b.path == "lib/libv\\xff.so"));
    // A valid name that reads like the escaped spelling is refused, not confused.
    std::fs::write(tree.join("lib/libv\\xff.txt"), b"x").unwrap();
    let out2 = tmp.path().join("out2");
    let o = kpack(&["pack", t, "-o", s(&out2), "--group", "g", "--all"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("could name another file"),
        "{}",
        stderr(&o)
    );
    assert!(!out2.exists());
    std::fs::remove_file(tree.join("lib/libv\\xff.txt")).unwrap();
    // split: the same tree as an artifact's prefix.
    let art = tmp.path().join("art");
    std::fs::create_dir_all(&art).unwrap();
    std::fs::rename(&tree, art.join("stage")).unwrap();
    std::fs::write(art.join("artifact_manifest.txt"), "stage\n").unwrap();
    let split = tmp.path().join("split");
    let o = kpack(&[
        "split",
        art.to_str().unwrap(),
        "-o",
        split.to_str().unwrap(),
        "--artifact-prefix",
        "x",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let g = split.join("x_generic/stage");
    for name in [os(b"libv\xff.so"), os("libv\u{fffd}.so".as_bytes())] {
        let p = g.join("lib").join(&name);
        let r = kpack::scan::inspect_file(&p, "x", p.metadata().unwrap().len(), 0);
        assert_eq!(r.kind, kpack::scan::FileKind::HostOnlyBinary, "{name:?}");
    }
    assert!(
        g.join(os(b"share\xfe"))
            .join(os(b"notes\x80.txt"))
            .is_file()
    );
}
