//! Release gates (issue #26): what `verify --device` proves.

mod common;

use common::*;

/// #26 item 2: `verify --device` decodes every frame it resolves and checks it
/// against the ledger; a flipped byte inside a frame is a fault (the runtime's
/// DECOMPRESSION_FAILED), a tree with nothing to check is no pass, an unknown
/// device is refused.
#[test]
fn verify_device_decodes_what_it_resolves_and_checks_something() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    std::fs::copy(fixtures().join("libvadd.so"), tree.join("lib/libvadd.so")).unwrap();
    let out = tmp.path().join("p");
    let o = pack_rocm(&tree, &out, &["--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let root = out.to_str().unwrap();
    let o = kpack(&["verify", root, "--device", "gfx900"]);
    assert!(o.status.success(), "{}", stdout(&o));
    // One byte in the middle of the gfx900 frame.
    let path = out.join(".kpack/rocm_gfx900.kpack");
    let a = kpack::kpack::Archive::open(&path).unwrap();
    let k = a.index.kernels[0].clone();
    drop(a);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = (k.offset + k.compressed_size / 2) as usize;
    bytes[at] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
    let o = kpack(&["verify", root, "--device", "gfx900"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("does not decode"), "{}", stdout(&o));
    // Nothing to check.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("README"), "text").unwrap();
    let o = kpack(&["verify", empty.to_str().unwrap(), "--device", "gfx906"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("nothing was checked"), "{}", stdout(&o));
    // An unknown device.
    let o = kpack(&["verify", root, "--device", "gfx9999"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("unknown device"), "{}", stderr(&o));
}

/// #26 item 6: `combine` checks the archives of every group it writes, whatever the
/// group is named (a configuration's `dcgpu`, not only `gfx…`): a damaged frame in a
/// shard's archive fails the combine.
#[test]
fn combine_checks_archives_of_groups_with_any_name() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let art = fixture_artifact(t);
    let (s1, s2) = (t.join("shards/s1"), t.join("shards/s2"));
    split_shard(&art, &s1, "gfx900");
    split_shard(&art, &s2, "gfx906");
    let cfg = t.join("groups.json");
    std::fs::write(
        &cfg,
        r#"{"primary_shard":"s1","architecture_groups":{
            "dcgpu":{"architectures":["gfx900","gfx906"]}}}"#,
    )
    .unwrap();
    let combine = |out: &std::path::Path| {
        kpack(&[
            "combine",
            s1.to_str().unwrap(),
            s2.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
        ])
    };
    let o = combine(&t.join("good"));
    assert!(o.status.success(), "{}", stderr(&o));
    // A flipped byte inside a gfx900 frame of shard 1.
    let archive = walkdir::WalkDir::new(s1.join("blas_lib_gfx900"))
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .find(|p| p.extension().is_some_and(|x| x == "kpack"))
        .unwrap();
    let a = kpack::kpack::Archive::open(&archive).unwrap();
    let k = a.index.kernels[0].clone();
    drop(a);
    let mut bytes = std::fs::read(&archive).unwrap();
    let at = (k.offset + k.compressed_size / 2) as usize;
    bytes[at] ^= 0x5a;
    std::fs::write(&archive, &bytes).unwrap();
    let bad = t.join("bad");
    let o = combine(&bad);
    assert!(!o.status.success(), "{}", stdout(&o));
    assert!(stderr(&o).contains("blas_lib_dcgpu"), "{}", stderr(&o));
    assert!(!bad.join("blas_lib_dcgpu").exists());
}

/// #26 item 5: `diff` gates on loss as well as growth. A new build that lost a
/// library, a kernel-database file and a target's code ("14 removed" used to exit 0):
/// `--fail-if-removed` and `--fail-if-shrinks` name each loss, exit 1; without the
/// flags, or with budgets the change stays within, exit 0.
#[test]
fn diff_fails_on_what_a_build_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let old = copy_demo(tmp.path());
    let new = tmp.path().join("new");
    assert!(
        std::process::Command::new("cp")
            .arg("-a")
            .arg(&old)
            .arg(&new)
            .status()
            .unwrap()
            .success()
    );
    std::fs::remove_file(new.join("lib/librdc.so")).unwrap();
    std::fs::remove_file(new.join("lib/rocblas/library/TensileLibrary_gfx90a.dat")).unwrap();
    let (o, n) = (old.to_str().unwrap(), new.to_str().unwrap());
    let plain = kpack(&["diff", o, n, "--no-tui"]);
    assert!(plain.status.success(), "{}", stderr(&plain));
    let o1 = kpack(&[
        "diff",
        o,
        n,
        "--no-tui",
        "--fail-if-removed",
        "libraries,databases,kernels",
    ]);
    assert_eq!(o1.status.code(), Some(1), "{}", stderr(&o1));
    let e = stderr(&o1);
    assert!(e.contains("lost: library lib/librdc.so removed"), "{e}");
    assert!(
        e.contains(
            "lost: kernel-database file lib/rocblas/library/TensileLibrary_gfx90a.dat removed"
        ),
        "{e}"
    );
    assert!(e.contains("lost: kernel "), "{e}");
    // librdc.so held gfx900 and gfx906 code: those targets shrank.
    let o2 = kpack(&["diff", o, n, "--no-tui", "--fail-if-shrinks", "gfx906=2%"]);
    assert_eq!(o2.status.code(), Some(1), "{}", stderr(&o2));
    assert!(
        stderr(&o2).contains("budget exceeded: gfx906 shrank"),
        "{}",
        stderr(&o2)
    );
    let o3 = kpack(&["diff", o, n, "--no-tui", "--fail-if-shrinks", "100%"]);
    assert!(o3.status.success(), "{}", stderr(&o3));
    // Nothing was removed from old to old.
    let o4 = kpack(&[
        "diff",
        o,
        o,
        "--no-tui",
        "--fail-if-removed",
        "targets,files",
    ]);
    assert!(o4.status.success(), "{}", stderr(&o4));
}

/// #26 item 4: a shard's archive overwriting another's (TheRock, early 2026: another
/// shard's small `blas_lib_gfx906` replaced the real one). Plain `verify` on the
/// installed multi-arch tree names, from the ledgers split leaves in each target
/// artifact, the binary that lost its gfx906 code, the devices and the archive, exit
/// 1; with the other build's whole artifact overlaid (its ledger too), the ledger
/// that does not know the install's binaries; the real install is sound.
#[test]
fn plain_verify_catches_a_shards_archive_that_replaced_another() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let art = fixture_artifact(t);
    // A library with gfx906 code beside the executable that has some too.
    std::fs::copy(
        fixtures().join("librdc.so"),
        art.join(BLAS_PREFIX).join("lib/librdc.so"),
    )
    .unwrap();
    let (s1, s2) = (t.join("s1"), t.join("s2"));
    split_shard(&art, &s1, "gfx900");
    split_shard(&art, &s2, "gfx906");
    // Each shard's output verifies where it lies (the artifacts read as flattening
    // them would install them), and so does their combination; what a shard left to
    // the other is named, in a record beside its artifacts (in none of them).
    for (dir, other) in [(&s1, "gfx906"), (&s2, "gfx900")] {
        let o = kpack(&["verify", dir.to_str().unwrap(), "--json"]);
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(o.status.code(), Some(0), "{j}");
        assert_eq!(j["kind"], "artifacts");
        assert!(j["proved"].as_u64().unwrap() >= 3, "{j}");
        let note = j["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .find(|n| n.starts_with(".kpack-tui-split-blas_lib.json: "))
            .unwrap_or_else(|| panic!("{j}"))
            .to_string();
        assert!(
            note.contains("left to the shards building other targets"),
            "{note}"
        );
        assert!(
            note.contains(&format!(
                "{BLAS_PREFIX}/lib/librdc.so: bundle #0 for {other}"
            )),
            "{note}"
        );
    }
    let combined = t.join("combined");
    let o = kpack(&[
        "combine",
        s1.to_str().unwrap(),
        s2.to_str().unwrap(),
        "-o",
        combined.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = kpack(&["verify", combined.to_str().unwrap(), "--no-tui"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let o = kpack(&[
        "verify",
        combined.to_str().unwrap(),
        "--device",
        "gfx900",
        "--no-tui",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let root = t.join("installed");
    flatten(
        &[
            s1.join("blas_lib_generic"),
            s1.join("blas_lib_gfx900"),
            s2.join("blas_lib_gfx906"),
        ],
        &root,
    );
    let o = kpack(&["verify", root.to_str().unwrap(), "--no-tui"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stdout(&o).contains(
            "sound (every code object of the ledger (.kpack/kpack-tui-ledger-blas_lib_gfx900.json, \
             .kpack/kpack-tui-ledger-blas_lib_gfx906.json)"
        ),
        "{}",
        stdout(&o)
    );
    // Another build's shard: only the executable, so its gfx906 archive holds only the
    // executable's kernels.
    let other = t.join("other");
    std::fs::create_dir_all(other.join(RAND_PREFIX).join("bin")).unwrap();
    std::fs::copy(
        fixtures().join("app_pie"),
        other.join(RAND_PREFIX).join("bin/app"),
    )
    .unwrap();
    std::fs::write(
        other.join("artifact_manifest.txt"),
        format!("{RAND_PREFIX}\n"),
    )
    .unwrap();
    let s3 = t.join("s3");
    split_shard(&other, &s3, "gfx906");
    let foreign = walkdir::WalkDir::new(s3.join("blas_lib_gfx906"))
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .find(|p| p.extension().is_some_and(|x| x == "kpack"))
        .unwrap();
    std::fs::copy(&foreign, root.join(".kpack/blas_lib_gfx906.kpack")).unwrap();
    let o = kpack(&["verify", root.to_str().unwrap(), "--no-tui"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains(
            "lib/librdc.so: bundle #0 on every gfx906 device ISA (9): every loader \
             generation: .kpack/blas_lib_gfx906.kpack lists gfx906 but lacks them"
        ),
        "{}",
        stdout(&o)
    );
    // The executable, whose kernels it does hold, is not named.
    assert!(!stdout(&o).contains("bin/app:"), "{}", stdout(&o));
    // The other build's whole artifact overlaid: its ledger came along.
    flatten(&[s3.join("blas_lib_gfx906")], &root);
    let o = kpack(&["verify", root.to_str().unwrap(), "--no-tui"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains(
            ".kpack/kpack-tui-ledger-blas_lib_gfx906.json: ledger of blas_lib that does not \
             know lib/librdc.so, lib/libvadd.so, lib/libzkern.so (which the group's other \
             ledgers list): its artifact comes from another build"
        ),
        "{}",
        stdout(&o)
    );
}

/// #26 item 5, the rocBLAS shape: xnack Tensile files dropped from the gfx90a package
/// (2026). The gfx90a artifact's ledger lists its kernel-database files; an install
/// missing one, or holding a changed one, fails verify naming the file.
#[test]
fn verify_catches_kernel_database_files_gone_from_a_target_package() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let art = fixture_artifact(t);
    let lib = art.join(BLAS_PREFIX).join("lib/rocblas/library");
    std::fs::write(
        lib.join("TensileLibrary_gfx90a-xnack+.dat"),
        "tensile xnack+\n",
    )
    .unwrap();
    std::fs::write(
        lib.join("TensileLibrary_gfx90a-xnack-.dat"),
        "tensile xnack-\n",
    )
    .unwrap();
    let out = t.join("out");
    split_blas(&art, &out, &["--split-databases", "rocblas"]);
    let g90a = out.join("blas_lib_gfx90a").join(BLAS_PREFIX);
    for f in [
        "TensileLibrary_gfx90a-xnack+.dat",
        "TensileLibrary_gfx90a-xnack-.dat",
    ] {
        assert!(g90a.join("lib/rocblas/library").join(f).is_file(), "{f}");
    }
    let root = t.join("installed");
    flatten(&artifact_dirs(&out), &root);
    let o = kpack(&["verify", root.to_str().unwrap(), "--no-tui"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("kernel-database files byte-identical"),
        "{}",
        stdout(&o)
    );
    let xnack = "lib/rocblas/library/TensileLibrary_gfx90a-xnack+.dat";
    std::fs::remove_file(root.join(xnack)).unwrap();
    std::fs::write(
        root.join("lib/rocblas/library/TensileLibrary_gfx90a-xnack-.dat"),
        "tensile xnack- of another build\n",
    )
    .unwrap();
    let o = kpack(&["verify", root.to_str().unwrap(), "--no-tui"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let text = stdout(&o);
    assert!(
        text.contains(&format!(
            "{xnack}: kernel-database file for gfx90a in the ledger is missing from the tree"
        )),
        "{text}"
    );
    assert!(
        text.contains(
            "lib/rocblas/library/TensileLibrary_gfx90a-xnack-.dat: kernel-database file for \
             gfx90a differs from the one the ledger recorded"
        ),
        "{text}"
    );
}
