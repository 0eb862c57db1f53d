//! The `--json` contract: every command's output carries `"schema":
//! "kpack-tui.<command>/<version>"`, the version its schema file names, and validates
//! against `docs/schema/<command>.schema.json`
//! (objects with fixed keys reject unknown ones, so an undocumented field fails here).
//! Outputs come from real runs on the demo, the fixtures, damaged and packed trees.

mod common;

use common::*;
use std::path::Path;

fn schema_json(name: &str) -> serde_json::Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("docs/schema/{name}.schema.json"));
    serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap()
}

fn schema(name: &str) -> jsonschema::Validator {
    jsonschema::validator_for(&schema_json(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn check(name: &str, what: &str, bytes: &[u8]) {
    let v: serde_json::Value = serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {}", String::from_utf8_lossy(bytes)));
    let id = schema_json(name)["properties"]["schema"]["const"].clone();
    assert!(
        id.as_str()
            .is_some_and(|s| s.starts_with(&format!("kpack-tui.{name}/"))),
        "{name}: schema id {id}"
    );
    assert_eq!(v["schema"], id, "{what}");
    let errors: Vec<String> = schema(name)
        .iter_errors(&v)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what} against {name}: {errors:#?}");
}

fn json(name: &str, args: &[&str]) {
    let o = kpack(&[args, &["--json"]].concat());
    assert!(!o.stdout.is_empty(), "{args:?}: {}", stderr(&o));
    check(name, &format!("{args:?}"), &o.stdout);
}

#[test]
fn every_json_output_follows_its_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let t = |p: &str| tmp.path().join(p).to_string_lossy().into_owned();
    let demo = demo().to_string_lossy().into_owned();
    let fx = fixtures().parent().unwrap().to_string_lossy().into_owned();
    let bin = |f: &str| fixtures().join(f).to_string_lossy().into_owned();
    // A damaged copy of the demo.
    let dmg = copy_demo(tmp.path());
    let lib = dmg.join("lib/libvadd.so.1.0");
    let b = std::fs::read(&lib).unwrap();
    std::fs::write(&lib, &b[..b.len() / 2]).unwrap();
    let dmg = dmg.to_string_lossy().into_owned();

    for p in [
        &demo,
        &fx,
        &dmg,
        &bin("libkern.a"),
        &bin("kfat.dll"),
        &bin("librdc.so"),
    ] {
        json("scan", &[p]);
    }
    // A wheel, and a tree holding one.
    if let Some(whl) = fixture_wheel(tmp.path()) {
        json("scan", &[whl.to_str().unwrap()]);
        json("scan", &[tmp.path().to_str().unwrap()]);
        json(
            "wheel-split",
            &[
                "wheel",
                "split",
                whl.to_str().unwrap(),
                "-o",
                &t("wheels"),
                "--device-package-prefix",
                "amd-torch-device",
                "--overlay-root",
                "torch",
            ],
        );
    }
    let fams = [
        "--group",
        "rocm",
        "--family",
        "gfx90X,gfx103X",
        "--unassigned",
        "drop",
    ];
    json(
        "pack",
        &[&["pack", &demo, "-o", &t("p1")], &fams[..]].concat(),
    );
    json(
        "pack",
        &[&["pack", &fx, "-o", &t("p2")], &fams[..]].concat(),
    );
    json(
        "pack",
        &[
            &["pack", &demo, "-o", &t("p3"), "--layout", "split"],
            &fams[..],
        ]
        .concat(),
    );
    json(
        "pack",
        &[&["pack", &t("p1"), "-o", &t("p4")], &fams[..]].concat(),
    );
    json(
        "pack",
        &[&["pack", &dmg, "-o", &t("p5"), "--copy-damaged"], &fams[..]].concat(),
    );
    json(
        "pack-plan",
        &[
            "pack",
            &demo,
            "-o",
            &t("x"),
            "--group",
            "g",
            "--family",
            "gfx90X,gfx125X",
            "--dry-run",
        ],
    );
    json(
        "pack-plan",
        &[&["pack", &t("p1"), "-o", &t("x"), "--dry-run"], &fams[..]].concat(),
    );
    json("scan", &[&t("p1")]);
    json("archive", &[&t("p1/.kpack/rocm_gfx900.kpack")]);
    let reference = shared().join("fixtures/reference-kpack/test_zstd.kpack");
    if reference.exists() {
        json("archive", &[&reference.to_string_lossy()]);
        json("verify-archive", &["verify", &reference.to_string_lossy()]);
    }
    json(
        "verify-archive",
        &["verify", &t("p1/.kpack/rocm_gfx900.kpack")],
    );
    std::fs::write(t("bad.kpack"), b"KPAK\x01\0\0\0garbage").unwrap();
    json("verify-archive", &["verify", &t("bad.kpack")]);
    for p in ["p1", "p2", "p3", "p5"] {
        json("verify-tree", &["verify", &t(p)]);
    }
    std::fs::remove_file(t("p1/.kpack/rocm_gfx1030.kpack")).unwrap();
    json("verify-tree", &["verify", &t("p1")]);
    json("verify-tree", &["verify", &fx]);
    json(
        "verify-device",
        &[
            "verify",
            &t("p2"),
            "--device",
            "gfx900",
            "--device",
            "gfx90a:xnack-",
        ],
    );
    for f in ["libvadd.so", "app_nopie", "app_pie"] {
        json("preview", &["preview", &bin(f)]);
    }
    for f in ["libkpe.dll", "kpe.exe", "libkpez.dll"] {
        json("preview-pe", &["preview", &bin(f)]);
    }
    let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/traces");
    for f in ["phc-make-j2.trace", "hipcc-2obj-4arch.trace"] {
        json("trace", &["trace", &traces.join(f).to_string_lossy()]);
    }
    // split (with a missing prefix and DB handlers), combine (groups, a preferred
    // difference), normalize (a stripped executable, before and after).
    let art = fixture_artifact(&tmp.path().join("artifact"));
    let art = art.to_string_lossy().into_owned();
    let sp = ["--artifact-prefix", "blas_lib", "--split-databases", "all"];
    json(
        "split",
        &[
            &["split", &art, "-o", &t("s1")],
            &sp[..],
            &["--gpu-targets", "gfx900"],
        ]
        .concat(),
    );
    json(
        "split",
        &[
            &["split", &art, "-o", &t("s2")],
            &sp[..],
            &["--gpu-targets", "gfx906,gfx1030,gfx90a"],
        ]
        .concat(),
    );
    // The record of what a shard left to the others, and its target artifacts'
    // ledgers (kernel-database files and host hashes included).
    check(
        "split-left",
        "s1",
        &std::fs::read(tmp.path().join("s1/.kpack-tui-split-blas_lib.json")).unwrap(),
    );
    for (shard, unit) in [("s1", "gfx900"), ("s2", "gfx90a"), ("s2", "gfx1030")] {
        let art_dir = tmp.path().join(shard).join(format!("blas_lib_{unit}"));
        let ledger = walkdir::WalkDir::new(&art_dir)
            .into_iter()
            .map(|e| e.unwrap().into_path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("kpack-tui-ledger-"))
            })
            .unwrap_or_else(|| panic!("no ledger in {}", art_dir.display()));
        check(
            "ledger",
            &ledger.display().to_string(),
            &std::fs::read(&ledger).unwrap(),
        );
    }
    json("combine", &["combine", &t("s1"), &t("s2"), "-o", &t("c1")]);
    std::fs::write(
        t("groups.json"),
        r#"{"primary_shard":"s1","architecture_groups":{"all":{"architectures":["gfx900","gfx906","gfx908"]}}}"#,
    )
    .unwrap();
    std::fs::write(
        tmp.path()
            .join("s2/blas_lib_generic")
            .join(BLAS_PREFIX)
            .join("lib/rocblas/library/TensileLibrary.dat"),
        "other\n",
    )
    .unwrap();
    json(
        "combine",
        &[
            "combine",
            &t("s1"),
            &t("s2"),
            "-o",
            &t("c2"),
            "--config",
            &t("groups.json"),
            "--prefer",
            "s2",
        ],
    );
    if let Some(strip) = tool("llvm-strip-15") {
        assert!(
            std::process::Command::new(strip)
                .arg(t("p2/bin/app_pie"))
                .status()
                .unwrap()
                .success()
        );
        json("normalize", &["normalize", "--check", &t("p2")]);
        json("normalize", &["normalize", &t("p2")]);
    }
    json("diff", &["diff", &demo, &t("p1")]);
    json("diff", &["diff", &bin("libvadd.so"), &bin("libkernels.so")]);
    json("kernels", &["kernels", &fx]);
    json("kernels", &["kernels", &t("p2")]);
    json("kernels", &["find-kernel", "scale", &fx]);
    // The ledger is a document of its own, with its schema.
    for p in ["p2", "p4", "p5"] {
        let l = std::fs::read(tmp.path().join(p).join(".kpack/kpack-tui-ledger.json")).unwrap();
        check("ledger", p, &l);
    }
    let l = std::fs::read(tmp.path().join("p3/generic/.kpack/kpack-tui-ledger.json")).unwrap();
    check("ledger", "p3", &l);
}

#[test]
fn schemas_reject_what_they_should() {
    // An unknown field and a wrong type are both caught: the schemas are a contract.
    let v = schema("verify-tree");
    let ok = serde_json::json!({"schema": "kpack-tui.verify-tree/1", "path": "x", "kind": "tree",
        "sound": true, "faults": [], "notes": [], "ledger": null, "proved": 0, "unproven": []});
    assert!(
        v.is_valid(&ok),
        "{:?}",
        v.iter_errors(&ok)
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
    );
    let mut extra = ok.clone();
    extra["surprise"] = serde_json::json!(1);
    assert!(!v.is_valid(&extra));
    let mut wrong = ok.clone();
    wrong["proved"] = serde_json::json!("many");
    assert!(!v.is_valid(&wrong));
}

/// Every `kpack-tui.<name>/<version>` id the source writes has its schema file, and
/// that file names the same version (the README promises a schema for every `--json`).
#[test]
fn every_schema_id_in_the_source_has_a_schema_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let id = regex::Regex::new(r#""kpack-tui\.([a-z-]+)/([0-9]+)""#).unwrap();
    let mut ids = std::collections::BTreeSet::new();
    let sources = [root.join("src"), root.join("crates/kpack/src")];
    for e in sources.iter().flat_map(walkdir::WalkDir::new) {
        let e = e.unwrap();
        if e.path().extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).unwrap();
        for c in id.captures_iter(&text) {
            ids.insert((c[1].to_string(), c[2].to_string()));
        }
    }
    assert!(ids.len() >= 18, "{ids:?}");
    let mut missing = Vec::new();
    for (name, version) in &ids {
        let p = root.join(format!("docs/schema/{name}.schema.json"));
        let Ok(bytes) = std::fs::read(&p) else {
            missing.push(format!("{name}: no {}", p.display()));
            continue;
        };
        let s: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let want = format!("kpack-tui.{name}/{version}");
        if s["properties"]["schema"]["const"] != want.as_str() {
            missing.push(format!(
                "{name}: the schema file names {}",
                s["properties"]["schema"]["const"]
            ));
        }
    }
    assert!(missing.is_empty(), "{missing:#?}");
}

/// The committed schemas are generated from the types that write the documents
/// (`kpack-tui --generate schemas docs/schema`, schemars): a field added to a report
/// without regenerating them fails here, and the validation above then checks real
/// outputs against what the types say.
#[test]
fn the_committed_schemas_are_the_generated_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let o = kpack(&["--generate", "schemas", tmp.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let names = |d: &Path| -> std::collections::BTreeSet<String> {
        std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".schema.json"))
            .collect()
    };
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema");
    assert_eq!(
        names(tmp.path()),
        names(&committed),
        "run `kpack-tui --generate schemas docs/schema`"
    );
    for n in names(tmp.path()) {
        let made = std::fs::read_to_string(tmp.path().join(&n)).unwrap();
        let kept = std::fs::read_to_string(committed.join(&n)).unwrap();
        assert!(
            made == kept,
            "{n} differs from what the types generate: run `kpack-tui --generate schemas docs/schema`"
        );
    }
    // Without a directory it says what it needs.
    let o = kpack(&["--generate", "schemas"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("give it as PATH"), "{}", stderr(&o));
}
