//! Pack and verify as a release gate (issue #14): nothing lost on re-pack, every
//! fault found, exit codes and flags CI can build on. Each test reproduces one of
//! the numbered findings.

mod common;

use common::*;
use kpack::kpack::archive::Archive;
use std::path::{Path, PathBuf};

fn pack(args: &[&str]) -> std::process::Output {
    kpack(&[&["pack"], args].concat())
}

/// Pack `tree` into `out` with the demo's families, dropping nothing unexpected.
fn pack_demo_like(tree: &Path, out: &Path, families: &[&str]) -> std::process::Output {
    let args: Vec<&str> = families.iter().flat_map(|f| ["--family", f]).collect();
    pack_rocm(tree, out, &args)
}

/// `pack TREE -o OUT --group rocm --family FAMILIES --unassigned drop EXTRA...`.
fn pack_in(tree: &str, out: &str, families: &str, extra: &[&str]) -> std::process::Output {
    pack_rocm(
        Path::new(tree),
        Path::new(out),
        &[&["--family", families][..], extra].concat(),
    )
}

fn packed_demo(dir: &Path) -> PathBuf {
    let out = dir.join("packed");
    let o = pack_demo_like(&demo(), &out, &["gfx90X", "gfx103X"]);
    assert!(o.status.success(), "{}", stderr(&o));
    out
}

fn verify_json(path: &Path) -> (i32, serde_json::Value) {
    let o = kpack(&["verify", path.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
    (o.status.code().unwrap(), v)
}

/// Every kernel the ledger promises, as (path, bundle, target) → bytes read back
/// through the archives (the test's own lookup: the key in the one archive whose
/// gfx_arches has the target).
fn archived(root: &Path) -> std::collections::BTreeMap<(String, u32, String), Vec<u8>> {
    let l = ledger(root);
    let archives: Vec<Archive> = l
        .archives
        .iter()
        .map(|a| Archive::open(&root.join(&a.path)).unwrap())
        .collect();
    let mut m = std::collections::BTreeMap::new();
    for b in &l.binaries {
        for k in &b.kernels {
            let key = format!("{}#{}", b.kernel_name, k.bundle);
            let a = archives
                .iter()
                .find(|a| a.index.meta.gfx_arches.iter().any(|g| **g == *k.target))
                .unwrap();
            let e = a.entry(&key, &k.target).unwrap();
            m.insert(
                (b.path.clone(), k.bundle, k.target.to_string()),
                a.kernel(e).unwrap().into_owned(),
            );
        }
    }
    m
}

#[test]
fn repacking_a_packed_tree_keeps_every_kernel_byte_for_byte() {
    // #14.1: pack, then pack the output again (same selection, then another one).
    let tmp = tempfile::tempdir().unwrap();
    let first = packed_demo(tmp.path());
    let original = fat_code_objects(&demo());
    let kept: std::collections::BTreeMap<_, _> = original
        .iter()
        .filter(|((p, _, _), _)| ledger(&first).binaries.iter().any(|b| &b.path == p))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(archived(&first), kept);

    let again = tmp.path().join("again");
    let o = pack_demo_like(&first, &again, &["gfx90X,gfx103X"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("repacked archive"), "{}", stdout(&o));
    assert_eq!(archived(&again), kept, "same selection");
    // The input archives are re-read, never replaced by empty ones.
    for a in ["rocm_gfx900", "rocm_gfx1030"] {
        let x = Archive::open(&again.join(format!(".kpack/{a}.kpack"))).unwrap();
        assert!(!x.index.kernels.is_empty(), "{a}");
    }
    assert_eq!(verify_json(&again).0, 0);

    // Re-grouped: other family names and a narrower selection; the kernels of the
    // selected targets are all still there, the rest recorded as dropped.
    let regrouped = tmp.path().join("regrouped");
    let o = pack_demo_like(&again, &regrouped, &["vega=gfx900,gfx906", "rdna2=gfx1030"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let want: std::collections::BTreeMap<_, _> = kept
        .iter()
        .filter(|((_, _, t), _)| ["gfx900", "gfx906", "gfx1030"].contains(&t.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(archived(&regrouped), want);
    let l = ledger(&regrouped);
    assert!(l.dropped.iter().any(|d| d.target == "gfx908"));
    assert!(!regrouped.join(".kpack/rocm_gfx908.kpack").exists());
    assert!(regrouped.join(".kpack/rocm_gfx906.kpack").exists());
    assert_eq!(verify_json(&regrouped).0, 0);
    // The re-pointed executables still run.
    if tool("hipcc").is_some() {
        for exe in ["bin/vadd_app", "bin/legacy_app"] {
            let o = std::process::Command::new(regrouped.join(exe))
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{exe}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
}

#[test]
fn host_only_binaries_whose_archives_are_elsewhere() {
    // #14.2: a tree holding a host-only binary whose archives are not in it packs;
    // the binary is copied as it is, with a warning naming it.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("fx");
    let o = pack_demo_like(fixtures().parent().unwrap(), &out, &["gfx90X"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("bin/hostonly: host-only binary whose archives are not here"));
    assert_eq!(
        std::fs::read(out.join("bin/hostonly")).unwrap(),
        std::fs::read(fixtures().join("hostonly")).unwrap()
    );
    let (code, v) = verify_json(&out);
    assert_eq!(code, 0, "{v}");
    assert!(v["unproven"].to_string().contains("bin/hostonly"), "{v}");

    // With the archives moved away and named by --archives, the kernels come back.
    let first = packed_demo(tmp.path());
    let moved = tmp.path().join("moved-archives");
    std::fs::rename(first.join(".kpack"), &moved).unwrap();
    std::fs::remove_file(moved.join("kpack-tui-ledger.json")).unwrap();
    let back = tmp.path().join("back");
    let o = pack_in(
        first.to_str().unwrap(),
        back.to_str().unwrap(),
        "gfx90X,gfx103X",
        &["--archives", moved.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(ledger(&back).binaries.len(), 5);
    assert_eq!(verify_json(&back).0, 0);
}

#[test]
fn verify_catches_a_deleted_a_swapped_and_a_changed_archive() {
    // #14.3 and #14.4.
    let tmp = tempfile::tempdir().unwrap();
    let good = packed_demo(tmp.path());
    let (code, v) = verify_json(&good);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["schema"], "kpack-tui.verify-tree/1");
    assert_eq!(v["proved"].as_u64().unwrap(), 16);
    let copy = |name: &str| {
        let d = tmp.path().join(name);
        assert!(
            std::process::Command::new("cp")
                .arg("-a")
                .arg(&good)
                .arg(&d)
                .status()
                .unwrap()
                .success()
        );
        d
    };
    let deleted = copy("deleted");
    std::fs::remove_file(deleted.join(".kpack/rocm_gfx1030.kpack")).unwrap();
    let swapped = copy("swapped");
    std::fs::copy(
        swapped.join(".kpack/rocm_gfx900.kpack"),
        swapped.join(".kpack/rocm_gfx1030.kpack"),
    )
    .unwrap();
    let flipped = copy("flipped");
    let a = flipped.join(".kpack/rocm_gfx900.kpack");
    let arch = Archive::open(&a).unwrap();
    // A byte in the middle of the largest kernel's frame.
    let e = arch
        .index
        .kernels
        .iter()
        .max_by_key(|k| k.compressed_size)
        .unwrap()
        .clone();
    drop(arch);
    let mut bytes = std::fs::read(&a).unwrap();
    bytes[(e.offset + e.compressed_size / 2) as usize] ^= 0x20;
    std::fs::write(&a, &bytes).unwrap();
    for (tree, needle) in [
        (
            &deleted,
            "rocm_gfx1030.kpack: archive in the ledger is missing",
        ),
        (&swapped, "replaced by another archive"),
        (
            &flipped,
            &*format!("bundle #{}", e.key.rsplit_once('#').unwrap().1),
        ),
    ] {
        let (code, v) = verify_json(tree);
        assert_eq!(code, 1, "{}: {v}", tree.display());
        assert_eq!(v["sound"], false);
        assert!(v["faults"].to_string().contains(needle), "{v}");
        let text = kpack(&["verify", tree.to_str().unwrap()]);
        assert!(!stdout(&text).contains("sound"), "{}", stdout(&text));
    }
    // The archive alone: the frame checksum finds the changed byte.
    let o = kpack(&["verify", a.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("checksum"), "{}", stdout(&o));
    // extract refuses to write bad bytes, one kernel or all.
    let dir = tmp.path().join("ex");
    let o = kpack(&[
        "extract",
        a.to_str().unwrap(),
        "--all",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!dir.exists());
    let one = tmp.path().join("one.co");
    let o = kpack(&[
        "extract",
        a.to_str().unwrap(),
        &e.key,
        &e.arch,
        "-o",
        one.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!one.exists());
}

#[test]
fn kpack_no_tui_takes_the_usual_boolean_spellings() {
    // #14.5.
    for v in ["1", "true", "yes", "on", "0", "false", "no"] {
        let o = kpack_env(
            &[demo().to_str().unwrap(), "--json"],
            &[("KPACK_NO_TUI", v)],
        );
        assert!(o.status.success(), "KPACK_NO_TUI={v}: {}", stderr(&o));
    }
    let o = kpack_env(&[demo().to_str().unwrap()], &[("KPACK_NO_TUI", "1")]);
    assert!(stdout(&o).contains("Files by class"), "{}", stdout(&o));
}

/// A copy of the demo whose `lib/libvadd.so.1.0` is cut short.
fn damaged_demo(dir: &Path) -> PathBuf {
    let t = copy_demo(dir);
    let f = t.join("lib/libvadd.so.1.0");
    let b = std::fs::read(&f).unwrap();
    std::fs::write(&f, &b[..b.len() * 2 / 3]).unwrap();
    t
}

#[test]
fn damaged_fat_binaries_stop_the_pack_unless_copied_on_purpose() {
    // #14.7.
    let tmp = tempfile::tempdir().unwrap();
    let tree = damaged_demo(tmp.path());
    let out = tmp.path().join("out");
    let base = [
        tree.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--group",
        "rocm",
        "--family",
        "gfx90X,gfx103X",
        "--unassigned",
        "drop",
    ];
    for extra in [&[][..], &["--dry-run"][..], &["--strict"][..]] {
        let o = pack(&[&base[..], extra].concat());
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("damaged"), "{}", stderr(&o));
        assert!(stderr(&o).contains("lib/libvadd.so.1.0:"), "{}", stderr(&o));
        assert!(!out.exists());
    }
    let o = pack(&[&base[..], &["--copy-damaged"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(out.join("lib/libvadd.so.1.0")).unwrap(),
        std::fs::read(tree.join("lib/libvadd.so.1.0")).unwrap()
    );
    // --strict: the copy is a warning, and warnings are fatal.
    let strict = tmp.path().join("strict");
    let o = pack(
        &[
            &base[..2],
            &[strict.to_str().unwrap()],
            &base[3..],
            &["--copy-damaged", "--strict"],
        ]
        .concat(),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!strict.exists());
}

#[test]
fn families_without_kernels_and_unknown_arches() {
    // #14.8.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = pack_demo_like(&demo(), &out, &["gfx90X,gfx103X,gfx125X"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("family gfx125X receives no code object"),
        "{}",
        stderr(&o)
    );
    assert!(!out.join(".kpack/rocm_gfx125X.kpack").exists());
    let l = ledger(&out);
    assert_eq!(l.archives.len(), 5, "one per target");
    // Per family, the empty family gets no archive and no marker path.
    let out = tmp.path().join("per-family");
    let o = pack_in(
        demo().to_str().unwrap(),
        out.to_str().unwrap(),
        "gfx90X,gfx103X,gfx125X",
        &["--archive-per", "family"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!out.join(".kpack/rocm_gfx125X.kpack").exists());
    assert_eq!(ledger(&out).archives.len(), 2);
    let o = kpack(&[out.join("lib/libzkern.so").to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let paths = v["files"][0]["marker"]["kpack_search_paths"].to_string();
    assert!(
        !paths.contains("gfx125X") && paths.contains("gfx103X"),
        "{paths}"
    );
    // With --strict the warning is fatal.
    let o = pack_in(
        demo().to_str().unwrap(),
        tmp.path().join("s").to_str().unwrap(),
        "gfx90X,gfx103X,gfx125X",
        &["--strict"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let o = pack(&[
        demo().to_str().unwrap(),
        "-o",
        tmp.path().join("u").to_str().unwrap(),
        "--group",
        "rocm",
        "--family",
        "mine=gfx9999,banana",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("gfx9999, banana"), "{}", stderr(&o));
    assert!(stderr(&o).contains("known: gfx900"), "{}", stderr(&o));
}

#[test]
fn progress_on_a_pipe_is_whole_lines() {
    // #14.10: a pack that runs for seconds past the first progress line (3000
    // binaries at -j 1), so that there are progress lines to check (#28 item 5: the
    // test passed when nothing was printed).
    let tmp = tempfile::tempdir().unwrap();
    let t = many_binaries(tmp.path());
    let o = kpack_env(
        &[
            "pack",
            t.to_str().unwrap(),
            "-o",
            tmp.path().join("o").to_str().unwrap(),
            "--group",
            "g",
            "--family",
            "gfx90X",
            "-j",
            "1",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(!err.contains('\r') && !err.contains('\x1b'), "{err:?}");
    assert!(err.ends_with('\n'), "{err:?}");
    let progress: Vec<&str> = err.lines().filter(|l| l.starts_with("packing: ")).collect();
    assert!(!progress.is_empty(), "no progress line: {err:?}");
    // Counting lines are whole (stage lines, "packing: renaming into place", too).
    assert!(
        progress
            .iter()
            .any(|l| l.contains(" files, ") && l.contains(" / ")),
        "{progress:?}"
    );
    // And stdout starts on a line of its own.
    assert!(stdout(&o).starts_with("packed "), "{}", stdout(&o));
}

#[test]
fn the_ledger_does_not_disturb_readers_and_force_needs_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = packed_demo(tmp.path());
    let l = ledger(&out);
    assert_eq!(l.schema, "kpack-tui.ledger/1");
    assert_eq!(l.binaries.len(), 5);
    for b in &l.binaries {
        for k in &b.kernels {
            assert_ne!(
                k.sha256,
                Default::default(),
                "a digest, not the placeholder"
            );
        }
    }
    // The scan sees the ledger as an ordinary file beside the archives, and a second
    // pack of the same input gives the same bytes (ledger included).
    let again = tmp.path().join("again");
    let o = pack_demo_like(&demo(), &again, &["gfx90X", "gfx103X"]);
    assert!(o.status.success());
    for f in [".kpack/kpack-tui-ledger.json", ".kpack/rocm_gfx900.kpack"] {
        assert_eq!(
            std::fs::read(out.join(f)).unwrap(),
            std::fs::read(again.join(f)).unwrap(),
            "{f}"
        );
    }
    // Readers: the scan lists the ledger as an opaque file and every archive as an
    // archive; each archive reads and verifies on its own.
    let o = kpack(&["scan", out.to_str().unwrap(), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let kind = |p: &str| {
        j["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == p)
            .map(|f| f["kind"].as_str().unwrap_or_default().to_string())
    };
    assert_eq!(
        kind(".kpack/kpack-tui-ledger.json").as_deref(),
        Some("opaque")
    );
    assert_eq!(kind(".kpack/rocm_gfx900.kpack").as_deref(), Some("kpack"));
    for a in std::fs::read_dir(out.join(".kpack")).unwrap() {
        let a = a.unwrap().path();
        if a.extension().is_some_and(|x| x == "kpack") {
            let o = kpack(&["verify", a.to_str().unwrap()]);
            assert!(o.status.success(), "{}: {}", a.display(), stdout(&o));
        }
    }
    // --force needs the ledger: the same output again is refused without it, and
    // replaced with it.
    let o = pack_demo_like(&demo(), &out, &["gfx90X", "gfx103X"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("pass --force to replace it"),
        "{}",
        stderr(&o)
    );
    let o = pack_rocm(&demo(), &out, &["--family", "gfx90X,gfx103X", "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn growth_is_reported_and_level_max_narrows_it() {
    // #14.11: the CCOB-compressed library grows when packed; pack says so and why.
    let tmp = tempfile::tempdir().unwrap();
    let run = |level: &str, out: &str| -> serde_json::Value {
        let o = pack_in(
            demo().to_str().unwrap(),
            tmp.path().join(out).to_str().unwrap(),
            "gfx90X,gfx103X",
            &["--level", level, "--json"],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let l3 = run("3", "l3");
    let max = run("max", "max");
    let grown = l3["grown"].as_array().unwrap();
    let z = grown
        .iter()
        .find(|g| g["path"] == "lib/libzkern.so")
        .expect("the CCOB library is reported");
    assert!(z["reason"].as_str().unwrap().contains("CCOB"), "{z}");
    assert!(z["bytes_out"].as_u64().unwrap() > z["bytes_in"].as_u64().unwrap());
    let archives = |v: &serde_json::Value| -> u64 {
        v["archives"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["bytes"].as_u64().unwrap())
            .sum()
    };
    assert!(
        archives(&max) < archives(&l3),
        "{} vs {}",
        archives(&max),
        archives(&l3)
    );
    assert_eq!(verify_json(&tmp.path().join("max")).0, 0);
    // The text report says it too.
    let o = pack_in(
        demo().to_str().unwrap(),
        tmp.path().join("text").to_str().unwrap(),
        "gfx90X,gfx103X",
        &["--long"],
    );
    assert!(stdout(&o).contains("lib/libzkern.so: "), "{}", stdout(&o));
}

#[test]
fn dry_run_projection_matches_the_real_output() {
    // #14.11: the projection, the plan and the result agree (exactly, below 32 MiB of
    // device code), on the demo and on a generated tree of many binaries.
    let tmp = tempfile::tempdir().unwrap();
    let many = tmp.path().join("many");
    std::fs::create_dir_all(many.join("lib")).unwrap();
    for (i, f) in [
        "libvadd.so",
        "libzkern.so",
        "app_pie",
        "app_nopie",
        "librdc.so",
    ]
    .iter()
    .cycle()
    .take(40)
    .enumerate()
    {
        std::fs::copy(fixtures().join(f), many.join(format!("lib/{i:02}-{f}"))).unwrap();
    }
    for (n, tree) in [demo(), many].iter().enumerate() {
        let out = tmp.path().join(format!("o{n}"));
        let args = [
            tree.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--group",
            "rocm",
            "--family",
            "gfx90X,gfx103X",
            "--unassigned",
            "drop",
            "--json",
        ];
        let plan: serde_json::Value =
            serde_json::from_slice(&pack(&[&args[..], &["--dry-run"]].concat()).stdout).unwrap();
        let o = pack(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let real: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(plan["projection"], "exact");
        assert_eq!(
            plan["projected_bytes"],
            real["bytes_out"],
            "{}",
            tree.display()
        );
        // Units with an archive, in order, are the archives written.
        let with_archive: Vec<&serde_json::Value> = plan["units"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|u| u.get("archive").is_some())
            .collect();
        let written = real["archives"].as_array().unwrap();
        assert_eq!(with_archive.len(), written.len());
        for (f, a) in with_archive.iter().zip(written) {
            assert_eq!(f["archive"], a["path"]);
            assert_eq!(f["estimated_bytes"], a["bytes"]);
        }
    }
}

#[test]
fn a_ledger_digest_in_upper_case_is_a_named_fault_not_a_missing_ledger() {
    // The ledger's digests are read as 64 lower-case hex digits (held as 32 bytes):
    // one written otherwise makes the ledger unreadable, named with its line, and
    // verify does not pretend the tree has no ledger.
    let tmp = tempfile::tempdir().unwrap();
    let out = packed_demo(tmp.path());
    let path = out.join(".kpack/kpack-tui-ledger.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let l = ledger(&out);
    let hex = l.binaries[0].kernels[0].sha256.to_string();
    assert_eq!(hex.len(), 64);
    std::fs::write(&path, text.replacen(&hex, &hex.to_uppercase(), 1)).unwrap();
    let (code, v) = verify_json(&out);
    assert_eq!(code, 1, "{v}");
    let faults = v["faults"].to_string();
    assert!(faults.contains("kpack-tui-ledger.json"), "{faults}");
    assert!(
        faults.contains("64 lower-case hex digits at line"),
        "{faults}"
    );
    let unproven = v["unproven"].to_string();
    assert!(unproven.contains("the ledger cannot be read"), "{unproven}");
    assert!(!unproven.contains("not packed by kpack-tui"), "{unproven}");
}
