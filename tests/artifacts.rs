//! `split` and `combine` on artifact directories built from the real fixture
//! binaries: the layout of ROCm's build, markers and keys, filters, refusals, and
//! the installed (flattened) result checked by running it and by `verify --device`.

mod common;

use common::*;
use kpack::kpack::archive::Archive;
use kpack::scan::{self, FileKind};
use std::path::{Path, PathBuf};

fn split(art: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let base = [
        "split",
        art.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--artifact-prefix",
        "blas_lib",
        "--split-databases",
        "rocblas",
    ];
    kpack(&[&base[..], extra].concat())
}

fn split_ok(art: &Path, out: &Path, extra: &[&str]) {
    let o = split(art, out, extra);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
}

fn archive(out: &Path, target: &str, prefix: &str) -> Archive {
    Archive::open(
        &out.join(format!("blas_lib_{target}"))
            .join(prefix)
            .join(format!(".kpack/blas_lib_{target}.kpack")),
    )
    .unwrap()
}

#[test]
fn split_lays_out_artifacts_as_the_rocm_build_does() {
    let tmp = tempfile::tempdir().unwrap();
    let art = fixture_artifact(tmp.path());
    let before = tree_hashes(&art);
    let out = tmp.path().join("out");
    let o = split(&art, &out, &["--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("missing/stage"), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["schema"], "kpack-tui.split/2");
    assert_eq!(j["missing_prefixes"][0], "missing/stage");
    assert_eq!(tree_hashes(&art), before, "the input is never modified");

    // One artifact per target ID, plus generic; a processor's feature variants
    // (gfx90a's Tensile file, gfx90a:xnack+ code) share the processor's artifact.
    let names: Vec<String> = artifact_dirs(&out)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "blas_lib_generic",
            "blas_lib_gfx1030",
            "blas_lib_gfx900",
            "blas_lib_gfx906",
            "blas_lib_gfx90a"
        ]
    );
    let manifest =
        |a: &str| std::fs::read_to_string(out.join(a).join("artifact_manifest.txt")).unwrap();
    assert_eq!(
        manifest("blas_lib_generic"),
        format!("{BLAS_PREFIX}\n{RAND_PREFIX}\n"),
        "processed prefixes in manifest order; the missing one left out"
    );
    assert_eq!(
        manifest("blas_lib_gfx1030"),
        format!("{BLAS_PREFIX}\n{RAND_PREFIX}\n")
    );
    assert_eq!(manifest("blas_lib_gfx90a"), format!("{BLAS_PREFIX}\n"));

    // Archives under the first prefix that contributed kernels; one target each;
    // keys carry the stage prefix; metadata names entry ID and prefix.
    let original = fat_code_objects(&art.join(BLAS_PREFIX));
    let a = archive(&out, "gfx900", BLAS_PREFIX);
    assert_eq!(a.index.meta.gfx_arches, ["gfx900"]);
    assert_eq!(a.index.meta.group_name, "blas_lib");
    assert_eq!(a.index.compression_scheme.name(), "zstd-per-kernel");
    let keys: Vec<&str> = a.index.kernels.iter().map(|k| &*k.key).collect();
    assert!(
        keys.contains(&format!("{BLAS_PREFIX}/lib/libvadd.so#0").as_str()),
        "{keys:?}"
    );
    assert!(
        keys.contains(&format!("{RAND_PREFIX}/bin/app#1").as_str()),
        "{keys:?}"
    );
    let k = a
        .index
        .kernels
        .iter()
        .find(|k| *k.key == format!("{BLAS_PREFIX}/lib/libvadd.so#0"))
        .unwrap();
    assert_eq!(k.metadata.get("source_prefix").unwrap(), BLAS_PREFIX);
    assert!(k.metadata.get("target").unwrap().ends_with("--gfx900"));
    assert_eq!(
        *a.kernel(k).unwrap(),
        original[&("lib/libvadd.so".to_string(), 0, "gfx900".to_string())][..],
        "byte-exact"
    );
    let x = archive(&out, "gfx90a", BLAS_PREFIX);
    assert_eq!(x.index.meta.gfx_arches, ["gfx90a:xnack+"]);
    // gfx1030 kernels come only from the rocRAND prefix.
    archive(&out, "gfx1030", RAND_PREFIX);

    // Database files of an arch go to its artifact, arch-independent ones stay.
    let lib = "lib/rocblas/library";
    assert!(
        out.join(format!(
            "blas_lib_gfx90a/{BLAS_PREFIX}/{lib}/TensileLibrary_gfx90a.dat"
        ))
        .is_file()
    );
    assert!(
        out.join(format!(
            "blas_lib_generic/{BLAS_PREFIX}/{lib}/TensileLibrary.dat"
        ))
        .is_file()
    );
    assert!(
        !out.join(format!(
            "blas_lib_generic/{BLAS_PREFIX}/{lib}/TensileLibrary_gfx90a.dat"
        ))
        .exists()
    );

    // Host-only binaries with the one marker pattern, relative to their prefix;
    // symlinks kept with their text.
    let g = out.join("blas_lib_generic");
    let lib_so = g.join(BLAS_PREFIX).join("lib/libvadd.so");
    let r = scan::inspect_file(
        &lib_so,
        "lib/libvadd.so",
        std::fs::metadata(&lib_so).unwrap().len(),
        0,
    );
    assert_eq!(r.kind, FileKind::HostOnlyBinary);
    let m = r.marker.as_ref().unwrap();
    assert_eq!(m.kpack_search_paths, ["../.kpack/blas_lib_@GFXARCH@.kpack"]);
    assert_eq!(m.kernel_name, format!("{BLAS_PREFIX}/lib/libvadd.so"));
    assert_eq!(
        std::fs::read_link(g.join(RAND_PREFIX).join("lib/libzkern.so.1")).unwrap(),
        PathBuf::from("libzkern.so")
    );
    if let Some(elflint) = tool("eu-elflint") {
        let o = std::process::Command::new(elflint)
            .args(["--gnu-ld", lib_so.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    }

    // Installed (flattened): the executable runs, every binary finds its kernels
    // on a device all of them support, and verify proves the archives.
    let root = tmp.path().join("root");
    flatten(&artifact_dirs(&out), &root);
    let run = std::process::Command::new(root.join("bin/app"))
        .env("LD_LIBRARY_PATH", root.join("lib"))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let o = kpack(&[
        "verify",
        root.to_str().unwrap(),
        "--device",
        "gfx900",
        "--no-tui",
    ]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let o = kpack(&[
        "verify",
        root.to_str().unwrap(),
        "--device",
        "gfx1030",
        "--no-tui",
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "libvadd.so has no gfx1030 code: {}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("lib/libvadd.so"), "{}", stdout(&o));
}

#[test]
fn gpu_targets_filter_code_objects_and_databases_and_refuse_an_empty_match() {
    let tmp = tempfile::tempdir().unwrap();
    let art = fixture_artifact(tmp.path());
    let out = tmp.path().join("out");
    // Features are ignored in the filter: gfx90a:xnack+ keeps gfx90a's code and data.
    let o = split(
        &art,
        &out,
        &["--gpu-targets", "gfx90a:xnack+,gfx906", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // What is left to other shards is named, code object by code object.
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let left: Vec<&str> = j["left_to_other_shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert_eq!(
        left.len() as u64,
        j["skipped_code_objects"].as_u64().unwrap() + j["skipped_databases"].as_u64().unwrap()
    );
    assert!(
        left.contains(&format!("{RAND_PREFIX}/lib/libzkern.so: bundle #0 for gfx1030").as_str()),
        "{left:?}"
    );
    assert!(
        left.contains(&format!("{BLAS_PREFIX}/lib/libvadd.so: bundle #0 for gfx900").as_str()),
        "{left:?}"
    );
    assert!(
        left.contains(&format!("{BLAS_PREFIX}/lib/rocblas/library/TensileLibrary_gfx1030.dat: database file for gfx1030").as_str()),
        "{left:?}"
    );
    let o = split(&art, &tmp.path().join("text"), &["--gpu-targets", "gfx906"]);
    assert!(
        stdout(&o).contains(&format!(
            "  {RAND_PREFIX}/lib/libzkern.so: bundle #0 for gfx1030"
        )),
        "{}",
        stdout(&o)
    );
    let names: Vec<String> = artifact_dirs(&out)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["blas_lib_generic", "blas_lib_gfx906", "blas_lib_gfx90a"]
    );
    // Filtered database files are in no artifact (their shard emits them).
    let g = out
        .join("blas_lib_generic")
        .join(BLAS_PREFIX)
        .join("lib/rocblas/library");
    assert!(!g.join("TensileLibrary_gfx1030.dat").exists());
    // Keys of kept targets keep their bundle index: app#1 is gfx906's second TU.
    let a = archive(&out, "gfx906", RAND_PREFIX);
    let keys: Vec<&str> = a.index.kernels.iter().map(|k| &*k.key).collect();
    assert_eq!(
        keys,
        [
            format!("{RAND_PREFIX}/bin/app#0"),
            format!("{RAND_PREFIX}/bin/app#1")
        ]
    );

    let none = tmp.path().join("none");
    let o = split(&art, &none, &["--gpu-targets", "gfx1100"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no device code objects matched --gpu-targets"),
        "{}",
        stderr(&o)
    );
    assert!(!none.join("blas_lib_generic").exists(), "nothing written");
}

#[test]
fn split_output_does_not_depend_on_threads_and_is_never_merged_silently() {
    let tmp = tempfile::tempdir().unwrap();
    let art = fixture_artifact(tmp.path());
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    split_ok(&art, &a, &["-j", "1"]);
    split_ok(&art, &b, &["-j", "2"]);
    let strip = |m: std::collections::BTreeMap<String, (Vec<u8>, u32, i64)>| {
        m.into_iter().map(|(k, v)| (k, v.0)).collect::<Vec<_>>()
    };
    assert_eq!(strip(tree_hashes(&a)), strip(tree_hashes(&b)));
    let o = split(&art, &a, &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    split_ok(&art, &a, &["--force"]);
    assert!(
        std::fs::read_dir(&a).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with('.')),
        "no staging directory left"
    );
}

#[test]
fn split_refuses_bad_input_with_the_file_and_rule() {
    let tmp = tempfile::tempdir().unwrap();
    let art = fixture_artifact(tmp.path());
    let out = tmp.path().join("out");
    let err = |art: &Path, extra: &[&str]| {
        let o = split(art, &out, extra);
        assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
        assert!(
            !out.exists() || artifact_dirs(&out).is_empty(),
            "nothing written"
        );
        stderr(&o)
    };
    assert!(err(&tmp.path().join("nope"), &[]).contains("does not exist"));
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(err(&empty, &[]).contains("empty: no artifact_manifest.txt in it"));
    std::fs::write(art.join("artifact_manifest.txt"), "../escape\n").unwrap();
    let e = err(&art, &[]);
    assert!(
        e.contains("artifact_manifest.txt") && e.contains("'..'"),
        "{e}"
    );
    std::fs::write(
        art.join("artifact_manifest.txt"),
        format!("{BLAS_PREFIX}\n"),
    )
    .unwrap();
    assert!(err(&art, &["--split-databases", "tensile"]).contains("unknown database handler"));
    let o = kpack(&[
        "split",
        art.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--artifact-prefix",
        "a/b",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("artifact prefix"), "{}", stderr(&o));
    // A truncated fat binary: named, nothing written.
    let so = art.join(BLAS_PREFIX).join("lib/libvadd.so");
    let data = std::fs::read(&so).unwrap();
    std::fs::write(&so, &data[..data.len() / 2]).unwrap();
    let e = err(&art, &[]);
    assert!(e.contains("lib/libvadd.so"), "{e}");
}

fn combine(shards: &[PathBuf], out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["combine".to_string()];
    args.extend(shards.iter().map(|s| s.to_str().unwrap().to_string()));
    args.extend(["-o".into(), out.to_str().unwrap().into()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    kpack(&args)
}

#[test]
fn combine_proves_the_shards_fit_and_refuses_differences() {
    let tmp = tempfile::tempdir().unwrap();
    let art = fixture_artifact(tmp.path());
    let shards: Vec<PathBuf> = [("s1", "gfx900"), ("s2", "gfx906,gfx90a"), ("s3", "gfx1030")]
        .iter()
        .map(|(n, t)| {
            let s = tmp.path().join("shards").join(n);
            split_ok(&art, &s, &["--gpu-targets", t]);
            s
        })
        .collect();
    let out = tmp.path().join("combined");
    let o = combine(&shards, &out, &["--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["schema"], "kpack-tui.combine/2");
    assert_eq!(j["archives"], 4);
    // The combination equals one split of everything.
    let whole = tmp.path().join("whole");
    split_ok(&art, &whole, &[]);
    let strip = |m: std::collections::BTreeMap<String, (Vec<u8>, u32, i64)>| {
        m.into_iter().map(|(k, v)| (k, v.0)).collect::<Vec<_>>()
    };
    assert_eq!(strip(tree_hashes(&out)), strip(tree_hashes(&whole)));

    // Groups from the reference's configuration.
    let cfg = tmp.path().join("groups.json");
    std::fs::write(
        &cfg,
        r#"{"primary_shard":"s1","architecture_groups":{
            "gfx90X":{"architectures":["gfx900","gfx906","gfx90a","gfx90a:xnack+","gfx908"]},
            "gfx103X":{"architectures":["gfx1030"]}}}"#,
    )
    .unwrap();
    let grouped = tmp.path().join("grouped");
    let o = combine(&shards, &grouped, &["--config", cfg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("no shard delivered gfx908"),
        "{}",
        stdout(&o)
    );
    let g90 = grouped.join("blas_lib_gfx90X");
    for t in ["gfx900", "gfx906", "gfx90a"] {
        let p = [BLAS_PREFIX, RAND_PREFIX]
            .iter()
            .map(|p| g90.join(p).join(format!(".kpack/blas_lib_{t}.kpack")))
            .find(|p| p.is_file());
        assert!(p.is_some(), "{t} in the gfx90X output");
    }
    assert!(
        g90.join(BLAS_PREFIX)
            .join("lib/rocblas/library/TensileLibrary_gfx90a.dat")
            .is_file()
    );

    // A generic file that differs: listed with its offset, refused, nothing written.
    let dat = shards[1]
        .join("blas_lib_generic")
        .join(BLAS_PREFIX)
        .join("lib/rocblas/library/TensileLibrary.dat");
    std::fs::write(&dat, "tensile indeX\n").unwrap();
    let bad = tmp.path().join("bad");
    let o = combine(&shards, &bad, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("TensileLibrary.dat in s2: content differs (first difference at byte 12)"),
        "{}",
        stderr(&o)
    );
    assert!(!bad.exists());
    let o = combine(&shards, &bad, &["--prefer", "s1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(
            bad.join("blas_lib_generic")
                .join(BLAS_PREFIX)
                .join("lib/rocblas/library/TensileLibrary.dat")
        )
        .unwrap(),
        "tensile index\n"
    );
    std::fs::write(&dat, "tensile index\n").unwrap();

    // One target from two shards with different bytes: refused.
    let twice = tmp.path().join("shards/s4");
    split_ok(&art, &twice, &["--gpu-targets", "gfx1030", "--level", "9"]);
    let o = combine(&[shards[2].clone(), twice], &tmp.path().join("x"), &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("blas_lib_gfx1030/") && stderr(&o).contains("in s4"),
        "{}",
        stderr(&o)
    );

    // Shards of another artifact prefix have no common generic part.
    let other = tmp.path().join("shards/o1");
    let o = kpack(&[
        "split",
        art.to_str().unwrap(),
        "-o",
        other.to_str().unwrap(),
        "--artifact-prefix",
        "rand_lib",
    ]);
    assert!(o.status.success());
    let o = combine(&[shards[0].clone(), other], &tmp.path().join("y"), &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("generic artifact missing"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_second_name_of_a_fat_binary_is_split_as_a_copy_would_be() {
    // The same artifact twice: once with a second name (hard link) of the fat
    // library and of a database file, once with copies there. The split streams the
    // scan and keeps the first name's report for the later ones: the outputs must be
    // the same bytes.
    let tmp = tempfile::tempdir().unwrap();
    let (linked, copied) = (tmp.path().join("l"), tmp.path().join("c"));
    for (dir, link) in [(&linked, true), (&copied, false)] {
        std::fs::create_dir_all(dir).unwrap();
        let art = fixture_artifact(dir);
        let blas = art.join(BLAS_PREFIX);
        let pairs = [
            ("lib/libvadd.so", "lib/zz-libvadd.so"),
            (
                "lib/rocblas/library/TensileLibrary_gfx90a.dat",
                "lib/rocblas/library/zz/TensileLibrary_gfx90a.dat",
            ),
        ];
        for (first, second) in pairs {
            let to = blas.join(second);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            if link {
                std::fs::hard_link(blas.join(first), &to).unwrap();
            } else {
                std::fs::copy(blas.join(first), &to).unwrap();
            }
        }
        split_ok(&art, &dir.join("out"), &[]);
    }
    let strip = |m: std::collections::BTreeMap<String, (Vec<u8>, u32, i64)>| {
        m.into_iter().map(|(k, v)| (k, v.0)).collect::<Vec<_>>()
    };
    let (l, c) = (
        strip(tree_hashes(&linked.join("out"))),
        strip(tree_hashes(&copied.join("out"))),
    );
    assert_eq!(l, c);
    // And the second name was split, not copied whole: host-only in the generic
    // artifact, its database in the processor's.
    let generic = linked.join("out/blas_lib_generic").join(BLAS_PREFIX);
    let r = scan::scan(&generic, &Default::default(), &kpack::event::NoEvents).unwrap();
    let kind = |p: &str| r.files.iter().find(|f| f.path == p).map(|f| f.kind);
    assert_eq!(kind("lib/zz-libvadd.so"), Some(FileKind::HostOnlyBinary));
    assert!(
        linked
            .join("out/blas_lib_gfx90a")
            .join(BLAS_PREFIX)
            .join("lib/rocblas/library/zz/TensileLibrary_gfx90a.dat")
            .is_file()
    );
}
