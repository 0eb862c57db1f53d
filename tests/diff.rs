//! `diff` on two trees built from our HIP sources so that they differ in known ways
//! (scripts/make-diff-pair.sh): a target more, a kernel more, a kernel unrolled
//! further, a library removed, a versioned library renamed. Expected figures come
//! from LLVM's tools (bundler, llvm-nm), not from our reader.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn pair() -> Option<PathBuf> {
    tool("hipcc")?;
    tool("clang++-19")?;
    tool("clang-offload-bundler-19")?;
    tool("llvm-nm-19")?;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("diff-pair");
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let _ = std::fs::remove_dir_all(&dir);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-diff-pair.sh");
        let o = Command::new("bash").arg(script).arg(&dir).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    });
    Some(dir)
}

/// The code object of `target` in a shared library, by the real bundler.
fn code_object(lib: &Path, target: &str) -> Vec<u8> {
    let tmp = tempfile::tempdir().unwrap();
    let fb = tmp.path().join("fb");
    assert!(
        Command::new("objcopy")
            .args(["-O", "binary", "--only-section=.hip_fatbin"])
            .arg(lib)
            .arg(&fb)
            .status()
            .unwrap()
            .success()
    );
    unbundle(&fb, target)
}

/// The code object of `target` in a bundle file (plain or CCOB), by the real bundler.
fn unbundle(fb: &Path, target: &str) -> Vec<u8> {
    let tmp = tempfile::tempdir().unwrap();
    let co = tmp.path().join("co");
    assert!(
        Command::new("clang-offload-bundler-19")
            .args(["-unbundle", "-type=o"])
            .arg(format!("-input={}", fb.display()))
            .arg(format!("-targets=hipv4-amdgcn-amd-amdhsa--{target}"))
            .arg(format!("-output={}", co.display()))
            .status()
            .unwrap()
            .success()
    );
    std::fs::read(co).unwrap()
}

fn nm_size(co: &[u8], symbol: &str) -> u64 {
    let tmp = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tmp.path(), co).unwrap();
    let o = Command::new("llvm-nm-19")
        .arg("--print-size")
        .arg(tmp.path())
        .output()
        .unwrap();
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && f[3] == symbol).then(|| u64::from_str_radix(f[1], 16).unwrap())
        })
        .unwrap_or_else(|| panic!("{symbol} not in the code object"))
}

fn json(args: &[&str]) -> (serde_json::Value, Option<i32>, String) {
    let o = kpack(&[args, &["--json"]].concat());
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    (v, o.status.code(), stderr(&o))
}

#[test]
fn known_changes_give_exact_deltas() {
    let Some(dir) = pair() else { return };
    let (old, new) = (dir.join("old"), dir.join("new"));
    let (r, code, _) = json(&["diff", old.to_str().unwrap(), new.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert_eq!(r["schema"], "kpack-tui.diff/2");
    let target = |t: &str| {
        r["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["target"] == t)
            .unwrap()
            .clone()
    };
    // libmulti's two TUs (compressed bundles), from the bundler too.
    let multi = |b: &str, t: &str| {
        let parts = dir.join("parts");
        (unbundle(&parts.join("multi_a.hipfb"), t).len()
            + unbundle(&parts.join(format!("multi_b_{b}.hipfb")), t).len()) as u64
    };
    // One target more in libk: exactly the bundler's gfx1030 code object of libk.so.
    let g1030 = target("gfx1030");
    assert_eq!(g1030["old_raw"], multi("old", "gfx1030"));
    assert_eq!(
        g1030["new_raw"],
        code_object(&new.join("lib/libk.so"), "gfx1030").len() as u64 + multi("new", "gfx1030")
    );
    // gfx900: libk grew, libgone went, libvadd is the same code.
    let size = |lib: &Path, t: &str| code_object(lib, t).len() as u64;
    let g900 = target("gfx900");
    assert_eq!(
        g900["old_raw"].as_u64().unwrap(),
        size(&old.join("lib/libk.so"), "gfx900")
            + size(&old.join("lib/libgone.so"), "gfx900")
            + size(&old.join("lib/libvadd.so.1.0"), "gfx900")
            + multi("old", "gfx900")
    );
    assert_eq!(
        g900["new_raw"].as_u64().unwrap(),
        size(&new.join("lib/libk.so"), "gfx900")
            + size(&new.join("lib/libvadd.so.1.1"), "gfx900")
            + multi("new", "gfx900")
    );
    // Files: removed, renamed (matched as the same library), grown.
    let file = |p: &str| {
        r["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["path"] == p)
            .cloned()
    };
    let gone = file("lib/libgone.so").unwrap();
    assert_eq!(gone["change"], "removed");
    assert_eq!(
        gone["old_size"],
        std::fs::metadata(old.join("lib/libgone.so")).unwrap().len()
    );
    let renamed = file("lib/libvadd.so.1.1").unwrap();
    assert_eq!(renamed["old_path"], "lib/libvadd.so.1.0");
    assert_eq!(renamed["change"], "same");
    assert_eq!(file("lib/libk.so").unwrap()["change"], "grown");
    assert!(
        file("share/doc/README").is_none(),
        "unchanged files are not listed"
    );
    // Kernels: one added in every target, one grown by unrolling, none of the
    // renamed library's (matched across the rename).
    let kernel = |name: &str, t: &str| {
        r["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["name"] == name && k["target"] == t && k["binary"] == "lib/libk.so")
            .cloned()
    };
    let new900 = code_object(&new.join("lib/libk.so"), "gfx900");
    let old900 = code_object(&old.join("lib/libk.so"), "gfx900");
    let added = kernel("_Z12added_kernelPfi", "gfx900").unwrap();
    assert!(added.get("old_size").is_none());
    assert_eq!(added["new_size"], nm_size(&new900, "_Z12added_kernelPfi"));
    let grown = kernel("_Z11spill_heavyPKfPf", "gfx900").unwrap();
    assert_eq!(grown["old_size"], nm_size(&old900, "_Z11spill_heavyPKfPf"));
    assert_eq!(grown["new_size"], nm_size(&new900, "_Z11spill_heavyPKfPf"));
    assert!(grown["new_size"].as_u64() > grown["old_size"].as_u64());
    assert!(
        r["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| !k["binary"].as_str().unwrap().contains("libvadd")),
        "the renamed library's kernels are the same"
    );
    assert!(
        kernel("_Z8tile_sumPKfPf", "gfx900").is_none(),
        "unchanged kernels are not listed"
    );
}

/// libmulti was rebuilt with TU b changed and TU a byte for byte the same (its
/// compressed bundle is decompressed on one side only): the kernel both TUs hold
/// counts TU a's copy on both sides, so it grew rather than appeared.
#[test]
fn a_rebuilt_translation_unit_counts_the_untouched_ones() {
    let Some(dir) = pair() else { return };
    let (old, new) = (dir.join("old"), dir.join("new"));
    let parts = dir.join("parts");
    assert_eq!(
        std::fs::read(parts.join("multi_a.hipfb")).unwrap()[..4],
        *b"CCOB"
    );
    let (r, code, _) = json(&["diff", old.to_str().unwrap(), new.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    let kernels: Vec<&serde_json::Value> = r["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["binary"] == "lib/libmulti.so")
        .collect();
    let sym = "_Z7scale_nILi1EEvPf";
    for t in ["gfx900", "gfx1030"] {
        let a = nm_size(&unbundle(&parts.join("multi_a.hipfb"), t), sym);
        let b = nm_size(&unbundle(&parts.join("multi_b_new.hipfb"), t), sym);
        let k = kernels
            .iter()
            .find(|k| k["name"] == sym && k["target"] == t)
            .unwrap_or_else(|| panic!("{sym} {t} not in {kernels:?}"));
        assert_eq!(k["old_size"], a, "{t}: TU a's copy, on the old side");
        assert_eq!(k["new_size"], a + b, "{t}: TU a's and TU b's");
    }
    // Nothing else of libmulti changed (only_a, only_b are the same).
    assert_eq!(kernels.len(), 2, "{kernels:?}");
}

#[test]
fn the_gate_and_the_csv() {
    let Some(dir) = pair() else { return };
    let (old, new) = (dir.join("old"), dir.join("new"));
    let (o, n) = (old.to_str().unwrap(), new.to_str().unwrap());
    let run = |extra: &[&str]| kpack(&[&["diff", o, n, "--by", "target"][..], extra].concat());
    assert_eq!(run(&["--fail-if-grows", "500%"]).status.code(), Some(0));
    let r = run(&["--fail-if-grows", "50%"]);
    assert_eq!(r.status.code(), Some(1));
    assert!(
        stderr(&r).contains("budget exceeded: device code grew"),
        "{}",
        stderr(&r)
    );
    let r = run(&["--fail-if-grows", "500%", "--fail-if-grows", "gfx1030=1MiB"]);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    let r = run(&["--fail-if-grows", "gfx1030=1%"]);
    assert_eq!(r.status.code(), Some(1), "a new target grows from nothing");
    assert_eq!(
        run(&["--fail-if-grows", "5 parsecs"]).status.code(),
        Some(2)
    );
    // CSV of each table: header and rows.
    let csv = stdout(&kpack(&["diff", o, n, "--csv"]));
    assert!(csv.starts_with(
        "target,old_raw,new_raw,old_stored,new_stored,old_code_objects,new_code_objects\n"
    ));
    assert_eq!(csv.lines().count(), 4, "{csv}");
    let csv = stdout(&kpack(&["diff", o, n, "--csv", "--by", "kernel"]));
    assert!(csv.starts_with("binary,target,name,demangled,old_size,new_size\n"));
    assert!(
        csv.contains("\"spill_heavy(float const*, float*)\""),
        "{csv}"
    );
    let csv = stdout(&kpack(&["diff", o, n, "--csv", "--by", "file"]));
    assert!(
        csv.contains("lib/libvadd.so.1.1,lib/libvadd.so.1.0,same,"),
        "{csv}"
    );
    // A fat tree against its packed form: the same device code.
    let tmp = tempfile::tempdir().unwrap();
    let packed = tmp.path().join("packed");
    assert!(pack_rocm(&new, &packed, &["--all"]).status.success());
    let (r, code, _) = json(&["diff", n, packed.to_str().unwrap(), "--fail-if-grows", "0%"]);
    assert_eq!(code, Some(0));
    assert_eq!(r["old_device_raw"], r["new_device_raw"]);
    assert!(r["kernels"].as_array().unwrap().is_empty());
}

#[test]
fn scan_exports_the_target_table_and_the_file_by_target_matrix() {
    let demo = demo();
    let d = demo.to_str().unwrap();
    let targets = stdout(&kpack(&["scan", d, "--csv", "targets"]));
    let matrix = stdout(&kpack(&["scan", d, "--csv", "matrix"]));
    let mut lines = targets.lines();
    assert_eq!(
        lines.next(),
        Some("target,raw_bytes,stored_bytes,code_objects,kernel_database_bytes")
    );
    let raw: std::collections::BTreeMap<String, u64> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].to_string(), f[1].parse().unwrap())
        })
        .collect();
    // Every column of the matrix adds up to its target's raw bytes.
    let mut rows = matrix.lines();
    let header: Vec<&str> = rows.next().unwrap().split(',').collect();
    assert_eq!(header[0], "path");
    let mut sums = vec![0u64; header.len()];
    let mut files = 0;
    for r in rows {
        files += 1;
        for (i, v) in r.split(',').enumerate().skip(1) {
            sums[i] += v.parse::<u64>().unwrap();
        }
    }
    assert!(files >= 6, "{matrix}");
    for (i, t) in header.iter().enumerate().skip(1) {
        assert_eq!(sums[i], raw[*t], "{t}");
    }
    // The JSON report says the same.
    let j: serde_json::Value =
        serde_json::from_slice(&kpack(&["scan", d, "--json"]).stdout).unwrap();
    for (t, v) in &raw {
        assert_eq!(j["arch_totals"][t]["raw"].as_u64(), Some(*v), "{t}");
    }
}

/// Wheels as sides: the fat wheel against its split host wheel (device code gone
/// from each binary, METADATA grown) and against the gfx90a device wheel (only the
/// gfx90a targets remain, byte for byte).
#[test]
fn wheels_compare_member_by_member() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(whl) = fixture_wheel(tmp.path()) else {
        return;
    };
    let dist = tmp.path().join("dist");
    assert!(split_wheel(&whl, &dist, &[]).status.success());
    let host = dist.join(whl.file_name().unwrap());
    let (r, code, e) = json(&["diff", whl.to_str().unwrap(), host.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{e}");
    for t in r["targets"].as_array().unwrap() {
        assert!(t["old_raw"].as_u64().unwrap() > 0, "{t}");
        assert_eq!(t["new_raw"], 0, "{t}");
    }
    let f = r["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["path"] == "torch/lib/libkernels.so")
        .unwrap()
        .clone();
    assert_eq!(f["change"], "shrunk", "{f}");
    assert_eq!(f["new_device_raw"], 0, "{f}");
    let dev = dist.join("amd_torch_device_gfx90a-2.10.0+rocm7.1-cp311-cp311-linux_x86_64.whl");
    let (r, _, e) = json(&[
        "diff",
        whl.to_str().unwrap(),
        dev.to_str().unwrap(),
        "--by",
        "target",
    ]);
    let t = |n: &str| {
        r["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["target"] == n)
            .unwrap()
            .clone()
    };
    for n in ["gfx90a", "gfx90a:xnack+"] {
        assert_eq!(t(n)["old_raw"], t(n)["new_raw"], "{n}: {e}");
    }
    assert_eq!(t("gfx900")["new_raw"], 0);
}

/// `kpack-tui OLD NEW` is `kpack-tui diff OLD NEW`.
#[test]
fn two_paths_compare_like_diff() {
    let Some(dir) = pair() else { return };
    let (old, new) = (dir.join("old"), dir.join("new"));
    let (a, code, e) = json(&["--no-tui", old.to_str().unwrap(), new.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{e}");
    let (b, _, _) = json(&["diff", old.to_str().unwrap(), new.to_str().unwrap()]);
    assert_eq!(a, b);
}
