//! docs/migrating-from-rocm-kpack.md, run: each reference command's kpack-tui side,
//! in the reference's spelling, on the same fixture input; its output checked against
//! the reference's layout (workflows.md, kpack-formats.md) and against the native
//! spelling, byte for byte (#31 item 2).

mod common;
use common::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ok(o: &Output) {
    assert!(o.status.success(), "{}{}", stdout(o), stderr(o));
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Content and mode of every file (mtimes of written files differ between runs).
fn contents(root: &Path) -> Vec<(String, Vec<u8>, u32)> {
    tree_hashes(root)
        .into_iter()
        .map(|(k, (h, mode, _))| (k, h, mode))
        .collect()
}

/// The processors of the device code in `files`, as clang-offload-bundler lists the
/// bundles objcopy cuts out of their `.hip_fatbin` (the first bundle of each).
fn bundler_processors(files: &[PathBuf]) -> Option<BTreeSet<String>> {
    let bundler = tool("clang-offload-bundler-19")?;
    let objcopy = tool("objcopy")?;
    let tmp = tempfile::tempdir().unwrap();
    let mut out = BTreeSet::new();
    for f in files {
        let sec = tmp.path().join("fatbin");
        let o = Command::new(&objcopy)
            .args(["-O", "binary", "--only-section=.hip_fatbin"])
            .arg(f)
            .arg(&sec)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let o = Command::new(&bundler)
            .args(["--list", "--type=o"])
            .arg(format!("--input={}", sec.display()))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}: {}", f.display(), stderr(&o));
        for triple in stdout(&o).lines().filter(|l| l.contains("amdgcn")) {
            let id = triple.rsplit("--").next().unwrap();
            out.insert(id.split(':').next().unwrap().to_string());
        }
    }
    Some(out)
}

#[test]
fn split_artifacts_spelling_writes_the_reference_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let art = fixture_artifact(tmp.path());
    let theirs = tmp.path().join("theirs");
    let o = kpack(&[
        "split",
        "--artifact-dir",
        s(&art),
        "--artifact-prefix",
        "blas_lib",
        "--output-dir",
        s(&theirs),
        "--split-databases",
        "rocblas",
        "--tmp-dir",
        s(tmp.path()),
        "--verbose",
        "--clang-offload-bundler",
        "/nonexistent/clang-offload-bundler",
    ]);
    ok(&o);
    for flag in ["--tmp-dir", "--verbose", "--clang-offload-bundler"] {
        assert!(
            stderr(&o).contains(&format!("note: {flag} ")),
            "{}",
            stderr(&o)
        );
    }
    let ours = tmp.path().join("ours");
    split_blas(&art, &ours, &["--split-databases", "rocblas"]);
    assert_eq!(contents(&theirs), contents(&ours));

    // workflows §1.8 / formats §3.8: <AP>_generic plus <AP>_<arch> per target, each
    // with its manifest; the archive under the first prefix that contributed kernels.
    let names: BTreeSet<String> = artifact_dirs(&theirs)
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains("blas_lib_generic"), "{names:?}");
    for d in artifact_dirs(&theirs) {
        assert!(d.join("artifact_manifest.txt").is_file(), "{}", d.display());
    }
    // (libzkern.so's section holds two compressed bundles, which the bundler cannot
    // list; the uncompressed binaries' processors are checked.)
    let fat = [
        art.join(BLAS_PREFIX).join("lib/libvadd.so"),
        art.join(RAND_PREFIX).join("bin/app"),
    ];
    if let Some(procs) = bundler_processors(&fat) {
        assert!(procs.len() >= 2, "{procs:?}");
        for p in &procs {
            assert!(names.contains(&format!("blas_lib_{p}")), "{p}: {names:?}");
            let a = theirs.join(format!("blas_lib_{p}"));
            let found = [BLAS_PREFIX, RAND_PREFIX].iter().any(|pre| {
                a.join(pre)
                    .join(format!(".kpack/blas_lib_{p}.kpack"))
                    .is_file()
            });
            assert!(found, "no .kpack/blas_lib_{p}.kpack in {}", a.display());
        }
    }
    // The rocblas handler moved the per-arch Tensile file to its target.
    assert!(
        theirs
            .join("blas_lib_gfx90a")
            .join(BLAS_PREFIX)
            .join("lib/rocblas/library/TensileLibrary_gfx90a.dat")
            .is_file()
    );

    // verify_artifacts --artifacts-dir: the split output verifies.
    let o = kpack(&["verify", "--artifacts-dir", s(&theirs)]);
    ok(&o);
}

#[test]
fn batch_artifact_parent_dir_splits_every_artifact_by_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let art = fixture_artifact(tmp.path());
    let parent = tmp.path().join("artifacts");
    std::fs::create_dir(&parent).unwrap();
    std::fs::rename(&art, parent.join("blas_lib_gfx90X-dcgpu")).unwrap();
    std::fs::create_dir(parent.join("blas_lib_generic")).unwrap();
    std::fs::write(parent.join("blas_lib_generic/artifact_manifest.txt"), "").unwrap();
    std::fs::create_dir(parent.join("notes")).unwrap();
    let theirs = tmp.path().join("theirs");
    let o = kpack(&[
        "split",
        "--batch-artifact-parent-dir",
        s(&parent),
        "--output-dir",
        s(&theirs),
    ]);
    ok(&o);
    assert!(
        stderr(&o).contains("skipped blas_lib_generic"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("skipped notes: no artifact_manifest.txt"),
        "{}",
        stderr(&o)
    );
    let ours = tmp.path().join("ours");
    split_blas(&parent.join("blas_lib_gfx90X-dcgpu"), &ours, &[]);
    assert_eq!(contents(&theirs), contents(&ours));
    // With the prefix too: refused, as by the reference.
    let o = kpack(&[
        "split",
        "--batch-artifact-parent-dir",
        s(&parent),
        "--artifact-prefix",
        "x",
        "-o",
        s(&tmp.path().join("no")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!tmp.path().join("no").exists());
}

#[test]
fn recombine_artifacts_spelling_combines_every_shard_of_the_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let art = fixture_artifact(tmp.path());
    let shards = tmp.path().join("shards");
    for (n, t) in [("s1", "gfx900"), ("s2", "gfx906,gfx90a"), ("s3", "gfx1030")] {
        split_shard(&art, &shards.join(n), t);
    }
    let cfg = tmp.path().join("groups.json");
    std::fs::write(
        &cfg,
        r#"{"primary_shard":"s1","architecture_groups":{
            "gfx90X":{"architectures":["gfx900","gfx906","gfx90a"]},
            "gfx103X":{"display_name":"RDNA2","architectures":["gfx1030"]}}}"#,
    )
    .unwrap();
    let theirs = tmp.path().join("theirs");
    let o = kpack(&[
        "combine",
        "--input-shards-dir",
        s(&shards),
        "--config",
        s(&cfg),
        "--output-dir",
        s(&theirs),
        "--verbose",
    ]);
    ok(&o);
    let ours = tmp.path().join("ours");
    let o = kpack(&[
        "combine",
        s(&shards.join("s1")),
        s(&shards.join("s2")),
        s(&shards.join("s3")),
        "--config",
        s(&cfg),
        "-o",
        s(&ours),
    ]);
    ok(&o);
    assert_eq!(contents(&theirs), contents(&ours));
    // workflows §3.4: one <component>_<group> per group, plus the generic artifact.
    let names: Vec<String> = artifact_dirs(&theirs)
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["blas_lib_generic", "blas_lib_gfx103X", "blas_lib_gfx90X"]
    );
}

#[test]
fn split_python_wheels_spelling_writes_the_same_wheels() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(whl) = fixture_wheel(tmp.path()) else {
        return;
    };
    let theirs = tmp.path().join("theirs");
    let o = kpack(&[
        "wheel",
        "split",
        "--input",
        s(&whl),
        "--output-dir",
        s(&theirs),
        "--device-package-prefix",
        "amd-torch-device",
        "--overlay-root",
        "torch/",
        "--wheel-type",
        "torch-fat",
        "--device-requires-dist",
        "rocm-sdk-device-@GFXARCH@ == 7.1",
        "--compression-level",
        "3",
        "-j",
        "2",
    ]);
    ok(&o);
    let ours = tmp.path().join("ours");
    ok(&split_wheel(
        &whl,
        &ours,
        &[
            "--databases",
            "torch-fat",
            "--device-requires-dist",
            "rocm-sdk-device-@GFXARCH@ == 7.1",
            "--level",
            "3",
        ],
    ));
    assert_eq!(contents(&theirs), contents(&ours));
    // workflows §4: the host wheel keeps the input's file name; one device wheel per
    // bundle key, named after the device package prefix.
    let names: Vec<String> = std::fs::read_dir(&theirs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains(&whl.file_name().unwrap().to_string_lossy().into_owned()));
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("amd_torch_device_gfx90a-2.10.0+rocm7.1-")),
        "{names:?}"
    );
}

#[test]
fn pack_tree_spelling_writes_one_family_archive() {
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp.path().join("theirs");
    let arches = "gfx900,gfx906,gfx908,gfx90a,gfx90a:xnack+,gfx1030";
    let o = kpack(&[
        "pack",
        "--input",
        s(&demo()),
        "--output",
        s(&theirs),
        "--group-name",
        "G",
        "--gfx-arch-family",
        "F",
        "--gfx-arches",
        arches,
        "--max-workers",
        "2",
        "--compression",
        "zstd",
        "--compression-level",
        "3",
        "--clang-offload-bundler",
        "/nonexistent",
    ]);
    ok(&o);
    let ours = tmp.path().join("ours");
    let o = kpack(&[
        "pack",
        s(&demo()),
        "-o",
        s(&ours),
        "--group",
        "G",
        "--family",
        &format!("F={arches}"),
        "--archive-per",
        "family",
    ]);
    ok(&o);
    assert_eq!(contents(&theirs), contents(&ours));
    let archives: Vec<String> = std::fs::read_dir(theirs.join(".kpack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".kpack"))
        .collect();
    assert_eq!(archives, ["G_F.kpack"]);
    // kpack_tool list / extract: the archive lists its family; a key with `./` extracts.
    let o = kpack(&[s(&theirs.join(".kpack/G_F.kpack")), "--no-tui", "--json"]);
    ok(&o);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["group_name"], "G");
    assert_eq!(j["gfx_arch_family"], "F");
    let key = j["code_objects"][0]["key"].as_str().unwrap().to_string();
    let arch = j["code_objects"][0]["arch"].as_str().unwrap().to_string();
    let out = tmp.path().join("k.hsaco");
    let o = kpack(&[
        "extract",
        s(&theirs.join(".kpack/G_F.kpack")),
        &format!("./{key}"),
        &arch,
        "-o",
        s(&out),
    ]);
    ok(&o);
    assert_eq!(&std::fs::read(&out).unwrap()[..4], b"\x7fELF");
}

#[test]
fn normalize_phdr_tree_spelling_checks_and_repairs() {
    let tmp = tempfile::tempdir().unwrap();
    let packed = tmp.path().join("packed");
    ok(&pack_rocm(&demo(), &packed, &["--all"]));
    let o = kpack(&["normalize", "--check", "-v", s(&packed)]);
    ok(&o);
    assert!(stdout(&o).contains("non-compliant."), "{}", stdout(&o));
    assert!(stdout(&o).starts_with("Scanned ") || stdout(&o).contains("\nScanned "));
}

#[test]
fn kpack_binary_and_bulk_unbundle_have_their_equivalents() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = fixtures().join("libvadd.so");
    // kpack_binary INPUT OUTPUT: the ELF transform; ours adds the marker itself.
    let host = tmp.path().join("libvadd.so");
    ok(&kpack(&[
        "rewrite",
        s(&lib),
        "-o",
        s(&host),
        "--search-path",
        ".kpack/x_@GFXARCH@.kpack",
    ]));
    let o = kpack(&[s(&host), "--no-tui", "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["files"][0]["kind"], "host_only_binary", "{j}");
    // bulk_unbundle FILE: every code object of every bundle, one file each.
    let dir = tmp.path().join("unbundled");
    ok(&kpack(&["extract", s(&lib), "--all", "-o", s(&dir)]));
    let mut files: Vec<String> = walkdir::WalkDir::new(&dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.path().strip_prefix(&dir).unwrap().display().to_string())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "libvadd.so#0/gfx900.hsaco",
            "libvadd.so#0/gfx90a:xnack+.hsaco"
        ]
    );
}
