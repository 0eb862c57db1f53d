//! One archive per target ID, the shape ROCm ships (issue #15, part 1): archives
//! `.kpack/<group>_<target>.kpack` holding exactly one target, markers with one
//! `@GFXARCH@` pattern, so host binaries do not change with the selection.

mod common;

use common::*;
use kpack::kpack::archive::Archive;
use std::path::Path;

fn pack(tree: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    pack_rocm(tree, out, extra)
}

#[test]
fn one_archive_per_target_and_one_marker_pattern() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = pack(&demo(), &out, &["--family", "gfx90X,gfx103X"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut names: Vec<String> = std::fs::read_dir(out.join(".kpack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".kpack"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "rocm_gfx1030.kpack",
            "rocm_gfx900.kpack",
            "rocm_gfx906.kpack",
            "rocm_gfx908.kpack",
            // gfx90a's variants (xnack+ code, a plain gfx90a Tensile file) share
            // the processor's archive.
            "rocm_gfx90a.kpack"
        ]
    );
    for n in &names {
        let a = Archive::open(&out.join(".kpack").join(n)).unwrap();
        let unit = n.trim_start_matches("rocm_").trim_end_matches(".kpack");
        let arches: std::collections::BTreeSet<&str> =
            a.index.kernels.iter().map(|k| &*k.arch).collect();
        let listed: std::collections::BTreeSet<&str> =
            a.index.meta.gfx_arches.iter().map(String::as_str).collect();
        assert_eq!(listed, arches, "{n}");
        assert!(
            arches.iter().all(|t| t.split(':').next() == Some(unit)),
            "{n}"
        );
    }
    // Every host-only binary: one pattern, "../" per directory level.
    let v: serde_json::Value =
        serde_json::from_slice(&kpack(&[out.to_str().unwrap(), "--json"]).stdout).unwrap();
    let mut seen = 0;
    for f in v["files"].as_array().unwrap() {
        if f["kind"] != "host_only_binary" {
            continue;
        }
        let path = f["path"].as_str().unwrap();
        let up = "../".repeat(path.matches('/').count());
        assert_eq!(
            f["marker"]["kpack_search_paths"],
            serde_json::json!([format!("{up}.kpack/rocm_@GFXARCH@.kpack")]),
            "{path}"
        );
        seen += 1;
    }
    assert_eq!(seen, 5);
    assert_eq!(
        kpack(&["verify", out.to_str().unwrap()]).status.code(),
        Some(0)
    );
}

#[test]
fn host_binaries_do_not_change_with_the_selection() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    assert!(pack(&demo(), &a, &["--family", "gfx90X"]).status.success());
    assert!(pack(&demo(), &b, &["--all"]).status.success());
    for bin in [
        "bin/vadd_app",
        "bin/legacy_app",
        "lib/libzkern.so",
        "lib/librdc.so",
    ] {
        assert_eq!(
            std::fs::read(a.join(bin)).unwrap(),
            std::fs::read(b.join(bin)).unwrap(),
            "{bin}"
        );
    }
    // Per family, they do change (their markers list the family archives).
    let c = tmp.path().join("c");
    assert!(
        pack(
            &demo(),
            &c,
            &["--family", "gfx90X", "--archive-per", "family"]
        )
        .status
        .success()
    );
    assert_ne!(
        std::fs::read(a.join("lib/libzkern.so")).unwrap(),
        std::fs::read(c.join("lib/libzkern.so")).unwrap()
    );
}

#[test]
fn targets_processors_and_all() {
    let tmp = tempfile::tempdir().unwrap();
    let exact = tmp.path().join("exact");
    let o = pack(&demo(), &exact, &["--target", "gfx90a:xnack+,gfx1030"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(exact.join(".kpack/rocm_gfx90a:xnack+.kpack").exists());
    assert!(exact.join(".kpack/rocm_gfx1030.kpack").exists());
    assert!(!exact.join(".kpack/rocm_gfx900.kpack").exists());
    let l = ledger(&exact);
    assert!(l.dropped.iter().any(|d| d.target == "gfx900"));
    // --all keeps everything; nothing is dropped even under --unassigned error.
    let all = tmp.path().join("all");
    let o = kpack(&[
        "pack",
        demo().to_str().unwrap(),
        "-o",
        all.to_str().unwrap(),
        "--group",
        "rocm",
        "--all",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(ledger(&all).dropped.is_empty());
    // Unknown names are refused with the list of known ones.
    let o = pack(&demo(), &tmp.path().join("x"), &["--target", "gfx9999"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown target(s) gfx9999; known: gfx900"),
        "{}",
        stderr(&o)
    );
    // Nothing selected at all.
    let o = kpack(&[
        "pack",
        demo().to_str().unwrap(),
        "-o",
        "/tmp/never",
        "--group",
        "g",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn verify_answers_for_one_device() {
    // `verify TREE --device ISA`: would a process on this GPU find its kernels?
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    assert!(pack(&demo(), &out, &["--all"]).status.success());
    let run = |isa: &str| {
        let o = kpack(&["verify", out.to_str().unwrap(), "--device", isa, "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (o.status.code().unwrap(), v)
    };
    // An xnack+ device with sramecc takes the gfx90a:xnack+ archive (feature subsets).
    let (code, v) = run("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack+");
    assert_eq!(code, 1, "the other binaries have no gfx90a code");
    assert_eq!(v["schema"], "kpack-tui.verify-device/1");
    let d = &v["devices"][0];
    assert_eq!(d["device"], "gfx90a:sramecc+:xnack+");
    let found = d["found"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{d}");
    assert_eq!(found[0]["path"], "lib/libvadd.so.1.0");
    assert_eq!(found[0]["archive"], ".kpack/rocm_gfx90a.kpack");
    assert_eq!(found[0]["target"], "gfx90a:xnack+");
    // An xnack- device never takes xnack+ code: nothing to load at all.
    let (code, v) = run("gfx90a:xnack-");
    assert_eq!(code, 1);
    assert!(v["devices"][0]["found"].as_array().unwrap().is_empty());
    assert!(
        v["devices"][0]["missing"]
            .to_string()
            .contains("no reachable archive has code for a target the device accepts")
    );
    // A tree whose every binary has gfx900 code: a gfx900 device finds everything.
    let tree = tmp.path().join("g900");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    for f in ["libvadd.so", "librdc.so"] {
        std::fs::copy(fixtures().join(f), tree.join("lib").join(f)).unwrap();
    }
    let packed = tmp.path().join("g900-packed");
    assert!(
        pack(&tree, &packed, &["--target", "gfx900"])
            .status
            .success()
    );
    let o = kpack(&["verify", packed.to_str().unwrap(), "--device", "gfx900"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("every bundle of every binary loads"));
}
