//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The committed fixture binaries.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bin")
}

/// The bundled demo tree.
pub fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo")
}

/// The shared reference material (`../shared` from the project root).
pub fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared")
}

/// Whether we run in CI, where every external tool must be present.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// Path of an external tool, or `None` (a test failure in CI, a skip note elsewhere).
pub fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            !in_ci(),
            "{name} is required in CI (see .ci/run) but is not installed"
        );
        eprintln!("note: {name} not installed; skipping the part of this test that needs it");
    }
    found
}

/// Run the kpack-tui binary under GNU time: its output (time's line removed from
/// stderr) and its peak RSS in KiB. `None` where GNU time is missing (a failure in CI).
#[allow(dead_code)]
pub fn kpack_peak_rss(args: &[&str]) -> Option<(Output, u64)> {
    let time = tool("time")?;
    let mut o = Command::new(time)
        .args(["-f", "%M"])
        .arg(env!("CARGO_BIN_EXE_kpack-tui"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let (rest, last) = err
        .trim_end()
        .rsplit_once('\n')
        .unwrap_or(("", err.trim_end()));
    let rss = last
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no peak RSS from GNU time: {err}"));
    o.stderr = rest.as_bytes().to_vec();
    eprintln!("kpack-tui {}: peak RSS {rss} KiB", args.join(" "));
    Some((o, rss))
}

/// Run the kpack-tui binary.
pub fn kpack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kpack-tui"))
        .args(args)
        .env_remove("KPACK_NO_TUI")
        .output()
        .expect("run kpack-tui")
}

/// Stdout as a string.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Stderr as a string.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A copy of the demo tree (`cp -a`, so modes, times and links are kept) at `dir/tree`.
pub fn copy_demo(dir: &Path) -> PathBuf {
    let t = dir.join("tree");
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(demo())
            .arg(&t)
            .status()
            .unwrap()
            .success()
    );
    t
}

/// path → (bytes or link target, mode, mtime) of every entry of a tree (fifos and
/// other special files by metadata only): compared before and after an operation to
/// prove the input was not modified.
pub fn tree_hashes(root: &Path) -> std::collections::BTreeMap<String, (Vec<u8>, u32, i64)> {
    use std::os::unix::fs::MetadataExt;
    let mut m = std::collections::BTreeMap::new();
    for e in walkdir::WalkDir::new(root).follow_links(false) {
        let e = e.unwrap();
        let meta = e.path().symlink_metadata().unwrap();
        let bytes = if meta.file_type().is_symlink() {
            std::fs::read_link(e.path())
                .unwrap()
                .as_os_str()
                .as_encoded_bytes()
                .to_vec()
        } else if meta.is_file() {
            std::fs::read(e.path()).unwrap()
        } else {
            Vec::new()
        };
        // Exact names: two that differ in bytes that are not UTF-8 stay two.
        let rel = kpack::relpath::encode(e.path().strip_prefix(root).unwrap()).unwrap();
        m.insert(rel, (bytes, meta.mode(), meta.mtime()));
    }
    m
}

/// Every code object of the fat binaries (executables and shared libraries) of a
/// tree, read through kpack's bundle reader: (path, bundle index, target) → bytes.
pub fn fat_code_objects(tree: &Path) -> std::collections::BTreeMap<(String, u32, String), Vec<u8>> {
    use kpack::elf::{self, ElfContent};
    use kpack::scan::{self, FileKind, ScanOptions};
    let report = scan::scan(tree, &ScanOptions::default(), &kpack::event::NoEvents).unwrap();
    let mut m = std::collections::BTreeMap::new();
    for f in report.files.iter().filter(|f| {
        f.kind == FileKind::FatBinary && f.hard_link_of.is_none() && f.container.is_none()
    }) {
        let data = std::fs::read(tree.join(kpack::relpath::to_path(&f.path))).unwrap();
        let Ok(ElfContent::Fat(fat)) = elf::inspect(&data) else {
            continue;
        };
        let Some(span) = fat.fatbin else { continue };
        let sec = &data[span.offset as usize..(span.offset + span.size) as usize];
        for b in &fat.bundles {
            let un = b.uncompressed(sec, 1 << 34).unwrap();
            for (e, bytes) in b.code_objects(&un).unwrap() {
                if let Some(arch) = e.id.arch() {
                    m.insert((f.path.clone(), b.index as u32, arch), bytes.to_vec());
                }
            }
        }
    }
    m
}

/// The ledger of a packed tree (combined layout).
pub fn ledger(root: &Path) -> kpack::kpack::ledger::Ledger {
    kpack::kpack::ledger::Ledger::read(root)
        .unwrap()
        .expect("a ledger")
        .1
}

/// Run kpack-tui with extra environment.
pub fn kpack_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kpack-tui"));
    c.args(args).env_remove("KPACK_NO_TUI");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run kpack-tui")
}

/// `kpack-tui pack TREE -o OUT --group rocm --unassigned drop ARGS...`: the pack the
/// trust, per-target and runtime tests share (they add the selection in ARGS).
pub fn pack_rocm(tree: &Path, out: &Path, args: &[&str]) -> Output {
    let base = [
        "pack",
        tree.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--group",
        "rocm",
        "--unassigned",
        "drop",
    ];
    kpack(&[&base[..], args].concat())
}

/// A ROCm-build-like artifact directory at `dir/art` from the fixture binaries: two
/// stage prefixes (a rocBLAS-like one with Tensile files, a rocRAND-like one with a
/// CCOB library, its symlink and an executable) and a listed prefix that is missing.
pub fn fixture_artifact(dir: &Path) -> PathBuf {
    let art = dir.join("art");
    let blas = art.join(BLAS_PREFIX);
    let rand = art.join(RAND_PREFIX);
    let lib = blas.join("lib/rocblas/library");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::create_dir_all(rand.join("lib")).unwrap();
    std::fs::create_dir_all(rand.join("bin")).unwrap();
    let fx = fixtures();
    std::fs::copy(fx.join("libvadd.so"), blas.join("lib/libvadd.so")).unwrap();
    std::fs::write(lib.join("TensileLibrary_gfx90a.dat"), "tensile gfx90a\n").unwrap();
    std::fs::write(lib.join("TensileLibrary_gfx1030.dat"), "tensile gfx1030\n").unwrap();
    std::fs::write(lib.join("TensileLibrary.dat"), "tensile index\n").unwrap();
    std::fs::copy(fx.join("libzkern.so"), rand.join("lib/libzkern.so")).unwrap();
    std::os::unix::fs::symlink("libzkern.so", rand.join("lib/libzkern.so.1")).unwrap();
    std::fs::copy(fx.join("app_pie"), rand.join("bin/app")).unwrap();
    std::fs::write(
        art.join("artifact_manifest.txt"),
        format!("{BLAS_PREFIX}\n{RAND_PREFIX}\nmissing/stage\n"),
    )
    .unwrap();
    art
}

/// The stage prefixes of [`fixture_artifact`].
pub const BLAS_PREFIX: &str = "math-libs/BLAS/rocBLAS/stage";
/// See [`BLAS_PREFIX`].
pub const RAND_PREFIX: &str = "math-libs/rocRAND/stage";

/// Install split artifacts as the ROCm build does: each artifact's prefixes (from
/// its manifest) copied into one root, generic first.
pub fn flatten(artifacts: &[PathBuf], root: &Path) {
    std::fs::create_dir_all(root).unwrap();
    let mut sorted = artifacts.to_vec();
    sorted.sort_by_key(|a| !a.to_string_lossy().ends_with("_generic"));
    for a in sorted {
        let m = std::fs::read_to_string(a.join("artifact_manifest.txt")).unwrap();
        for p in m.lines() {
            let src = a.join(p);
            if !src.is_dir() {
                continue;
            }
            let ok = Command::new("cp")
                .arg("-a")
                .arg(format!("{}/.", src.display()))
                .arg(root)
                .status()
                .unwrap()
                .success();
            assert!(ok, "cp {}", src.display());
        }
    }
}

/// The artifact directories of a split or combine output.
pub fn artifact_dirs(out: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    v.sort();
    v
}

/// A fat test wheel built by Python's zipfile (`scripts/make-test-wheel.py`) from the
/// fixtures: a hipcc `.so` (gfx900, gfx90a; stored), a clang-19 CCOB `.so`
/// (gfx1030, gfx90a:xnack+), a plain `.so`, a data file, an executable script
/// (mode 0751) and a 0640 file. `None` (skip) without python3 outside CI.
pub fn fixture_wheel(dir: &Path) -> Option<PathBuf> {
    let py = tool("python3")?;
    let f = fixtures();
    let out = dir.join("torch-2.10.0+rocm7.1-cp311-cp311-linux_x86_64.whl");
    let member = |name: &str, src: &str| format!("{name}={}", f.join(src).display());
    let o = std::process::Command::new(py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-test-wheel.py"))
        .arg(&out)
        .args(["--name", "torch", "--version", "2.10.0+rocm7.1"])
        .args(["--tag", "cp311-cp311-linux_x86_64"])
        .args(["--stored", "torch/lib/libkernels.so"])
        .arg("torch/__init__.py=text:import os\n")
        .arg(member("torch/lib/libkernels.so@755", "libkernels.so"))
        .arg(member("torch/lib/libkernels_z.so@755", "libkernels_z.so"))
        .arg(member("torch/lib/libplain.so@755", "libplain.so"))
        .arg("torch/share/data.txt@640=text:hello\n")
        .arg("torch/bin/run.sh@751=text:#!/bin/sh\necho hi\n")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    Some(out)
}

/// `wheel split` of a wheel with the reference's torch options.
pub fn split_wheel(wheel: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "wheel",
        "split",
        wheel.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--device-package-prefix",
        "amd-torch-device",
        "--overlay-root",
        "torch/",
    ];
    args.extend_from_slice(extra);
    kpack(&args)
}

/// A tree of 3000 copies of a fixture library under `lib/` at `dir/tree`: big enough
/// that a debug-build pack at `-j 1` runs for seconds past its first progress line.
pub fn many_binaries(dir: &Path) -> PathBuf {
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    let lib = std::fs::read(fixtures().join("libvadd.so")).unwrap();
    for i in 0..3000 {
        std::fs::write(tree.join(format!("lib/libv{i}.so")), &lib).unwrap();
    }
    tree
}

/// A running pack of `tree` into `out` at `-j 1`, returned once it printed its first
/// `packing:` progress line (so it is past the scan and under way, however loaded the
/// machine is), with its stderr so far and the rest of it still to read. The caller
/// waits for the child (it is returned); a panic on the way kills the test anyway.
#[allow(clippy::zombie_processes)]
pub fn pack_under_way(
    tree: &Path,
    out: &Path,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStderr>,
    String,
) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kpack-tui"))
        .args(["pack", tree.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .args(["--group", "g", "--family", "gfx90X", "-j", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            let status = child.wait().unwrap();
            panic!("the pack ended ({status}) before any progress line: {seen}");
        }
        seen.push_str(&line);
        if line.starts_with("packing:") {
            return (child, err, seen);
        }
    }
}

/// `split ART -o OUT --artifact-prefix blas_lib EXTRA...`, which must succeed.
pub fn split_blas(art: &Path, out: &Path, extra: &[&str]) {
    let base = [
        "split",
        art.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--artifact-prefix",
        "blas_lib",
    ];
    let o = kpack(&[&base[..], extra].concat());
    assert!(o.status.success(), "{}", stderr(&o));
}

/// [`split_blas`] with `--gpu-targets TARGETS`: one shard of ROCm's build matrix.
pub fn split_shard(art: &Path, out: &Path, targets: &str) {
    split_blas(art, out, &["--gpu-targets", targets]);
}

/// Check a `--json` document against its committed schema (`docs/schema/NAME.schema.json`).
pub fn validate_json(name: &str, v: &serde_json::Value) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("docs/schema/{name}.schema.json"));
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&s).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{name}: {errors:#?}");
}

/// The (path, target, name) of every row of a `kernels --json` document, sorted.
pub fn kernel_rows(j: &serde_json::Value) -> Vec<(String, String, String)> {
    let mut rows: Vec<(String, String, String)> = j["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["path"].as_str().unwrap().to_string(),
                k["target"].as_str().unwrap().to_string(),
                k["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    rows.sort();
    rows
}

/// The rocm-bootstrap wheel the host wheel requires: from `$KPACK_WHEELHOUSE`
/// (`.ci/run` downloads it there), else downloaded with pip; `None` (skip) outside
/// CI when neither works.
pub fn bootstrap_wheel(dir: &Path) -> Option<()> {
    if let Some(house) = std::env::var_os("KPACK_WHEELHOUSE") {
        for e in std::fs::read_dir(&house).unwrap() {
            let p = e.unwrap().path();
            if p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("rocm_bootstrap-0.3.0")
            {
                std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
                return Some(());
            }
        }
    }
    let o = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "rocm-bootstrap==0.3.0",
            "-d",
        ])
        .arg(dir)
        .output()
        .ok()?;
    if !o.status.success() {
        assert!(
            !in_ci(),
            "rocm-bootstrap==0.3.0: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        eprintln!("note: rocm-bootstrap not available; skipping the pip test");
        return None;
    }
    Some(())
}

/// After a cancelled or failed run in `dir` (which held only the input `tree`):
/// nothing else is there, no output and no staging directory.
pub fn assert_only_tree_left(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "tree")
        .collect();
    assert!(left.is_empty(), "staging left behind: {left:?}");
}
