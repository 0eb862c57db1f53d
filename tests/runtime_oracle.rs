//! Interop with the reference C++ runtime (`../shared/oracles/rocm-kpack-runtime`, what
//! the HIP runtime links to load device code): every kernel of packed fixture trees
//! loads through its public API, byte-exact against the code objects of the original
//! fat binaries. The runtime is built here with its own script; `tests/oracle/
//! load_all.cpp` calls it as CLR does (wrapper pointer → marker, binary path, the
//! bundle index from `reserved1`, the device ISA).

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Build the runtime and the driver once per target directory; `None` (skip with a
/// note) outside CI when the build tools are missing. The tests of this file run in
/// parallel: one builds, the others wait (two cmake runs in one directory collide).
fn driver() -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_driver).clone()
}

fn build_driver() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kpack-oracle");
    let script = shared().join("oracles/rocm-kpack-runtime/build.sh");
    for t in ["cmake", "c++"] {
        tool(t)?;
    }
    for h in ["/usr/include/msgpack.hpp", "/usr/include/zstd.h"] {
        if !Path::new(h).exists() {
            assert!(!in_ci(), "{h} is required in CI (see .ci/run)");
            eprintln!("note: {h} missing; skipping the reference-runtime test");
            return None;
        }
    }
    let o = Command::new("bash")
        .arg(&script)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "building the reference runtime failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8(o.stdout).unwrap();
    let mut lines = text.lines();
    let (inc, lib) = (lines.next().unwrap(), lines.next().unwrap());
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/load_all.cpp");
    let exe = dir.join("load_all");
    let fresh = |p: &Path| p.metadata().and_then(|m| m.modified()).ok();
    if fresh(&exe) < fresh(&src) {
        let o = Command::new("c++")
            .args(["-std=c++17", "-O1", "-DROCM_KPACK_STATIC", "-I", inc])
            .arg(&src)
            .arg(lib)
            .args(["-lzstd", "-lpthread", "-o"])
            .arg(&exe)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    Some(exe)
}

/// Load every kernel the ledger of `root` promises through the runtime and compare
/// with `original` (path, bundle, target → bytes). Returns the number loaded.
fn load_all(exe: &Path, root: &Path, original: &BTreeMap<(String, u32, String), Vec<u8>>) -> usize {
    let l = ledger(root);
    let mut n = 0;
    for b in &l.binaries {
        let targets: Vec<String> = {
            let mut t: Vec<String> = b.kernels.iter().map(|k| k.target.to_string()).collect();
            t.sort();
            t.dedup();
            t
        };
        if targets.is_empty() {
            continue;
        }
        // PE images (packed like ELF ones) are loaded by the Windows loader under
        // Wine in tests/pe.rs; this driver reads ELF.
        if std::fs::read(root.join(kpack::relpath::to_path(&b.path)))
            .is_ok_and(|d| d.starts_with(b"MZ"))
        {
            continue;
        }
        let out = tempfile::tempdir().unwrap();
        // The device ISA as HSA names it.
        let isas: Vec<String> = targets
            .iter()
            .map(|t| format!("amdgcn-amd-amdhsa--{t}"))
            .collect();
        let o = Command::new(exe)
            .arg(root.join(kpack::relpath::to_path(&b.path)))
            .arg(out.path())
            .args(&isas)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}: {text}", b.path);
        for k in &b.kernels {
            let i = targets.iter().position(|t| **t == *k.target).unwrap();
            let got = std::fs::read(out.path().join(format!("{}_{i}.co", k.bundle)))
                .unwrap_or_else(|e| panic!("{} #{} {}: {e}\n{text}", b.path, k.bundle, k.target));
            let want = &original[&(b.path.clone(), k.bundle, k.target.to_string())];
            assert!(
                got == *want,
                "{} #{} {}: the runtime loaded different bytes",
                b.path,
                k.bundle,
                k.target
            );
            n += 1;
        }
    }
    n
}

fn pack(tree: &Path, out: &Path, families: &str) {
    pack_with(tree, out, families, &[]);
}

fn pack_with(tree: &Path, out: &Path, families: &str, extra: &[&str]) {
    let o = pack_rocm(tree, out, &[&["--family", families][..], extra].concat());
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn every_kernel_of_packed_trees_loads_byte_exact_through_the_reference_runtime() {
    let Some(exe) = driver() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let original = fat_code_objects(&demo());
    // Combined family archives: uncompressed and CCOB bundles, multi-TU binaries,
    // executables and libraries, a feature-flagged target.
    let packed = tmp.path().join("packed");
    pack(&demo(), &packed, "gfx90X,gfx103X");
    let n = load_all(&exe, &packed, &original);
    let promised: usize = ledger(&packed)
        .binaries
        .iter()
        .map(|b| b.kernels.len())
        .sum();
    assert_eq!(n, promised);
    assert!(n >= 16, "{n}");
    // Re-packed from the packed tree under other families: still byte-exact.
    let regrouped = tmp.path().join("regrouped");
    pack(
        &packed,
        &regrouped,
        "vega=gfx900,gfx906,gfx908,gfx90a,gfx1030",
    );
    assert_eq!(load_all(&exe, &regrouped, &original), n);
    // zstd 19 with a kernel-sized window, and raw (scheme none) archives.
    for (name, extra) in [
        ("max", ["--level", "max"]),
        ("raw", ["--compression", "none"]),
    ] {
        let out = tmp.path().join(name);
        pack_with(&demo(), &out, "gfx90X,gfx103X", &extra);
        assert_eq!(load_all(&exe, &out, &original), n, "{name}");
    }
    // The fixture binaries (PIE and non-PIE executables, RDC library).
    let fx = tmp.path().join("fixtures");
    let fx_tree = fixtures().parent().unwrap().to_path_buf();
    pack(&fx_tree, &fx, "gfx90X,gfx103X");
    let fx_original = fat_code_objects(&fx_tree);
    assert!(load_all(&exe, &fx, &fx_original) >= 8);
}

#[test]
fn binaries_whose_names_are_not_utf8_load_every_kernel_after_a_pack() {
    use std::os::unix::ffi::OsStrExt;
    let Some(exe) = driver() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    let odd = tree.join(std::ffi::OsStr::from_bytes(b"lib\xfe"));
    std::fs::create_dir_all(&odd).unwrap();
    // Two names with one lossy spelling, each a different library.
    std::fs::copy(
        fixtures().join("libvadd.so"),
        odd.join(std::ffi::OsStr::from_bytes(b"libv\xff.so")),
    )
    .unwrap();
    std::fs::copy(fixtures().join("libzkern.so"), odd.join("libv\u{fffd}.so")).unwrap();
    let original = fat_code_objects(&tree);
    let names: std::collections::BTreeSet<&str> =
        original.keys().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let packed = tmp.path().join("packed");
    pack(&tree, &packed, "gfx90X,gfx103X");
    let n = load_all(&exe, &packed, &original);
    let promised: usize = ledger(&packed)
        .binaries
        .iter()
        .map(|b| b.kernels.len())
        .sum();
    assert_eq!(n, promised);
    let loaded: std::collections::BTreeSet<&str> = ledger(&packed)
        .binaries
        .iter()
        .filter(|b| !b.kernels.is_empty())
        .map(|b| names.get(b.path.as_str()).copied().unwrap_or("?"))
        .collect();
    assert_eq!(loaded, names);
}

/// Load every kernel in `expected` ((path, bundle, target) → bytes, paths relative
/// to `root`) through the runtime, byte-exact. Returns the number loaded.
fn load_expected(
    exe: &Path,
    root: &Path,
    expected: &BTreeMap<(String, u32, String), Vec<u8>>,
) -> usize {
    let mut by_path: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
    for (p, _, t) in expected.keys() {
        let v = by_path.entry(p.as_str()).or_default();
        if !v.contains(&t) {
            v.push(t);
        }
    }
    let mut n = 0;
    for (path, targets) in by_path {
        let out = tempfile::tempdir().unwrap();
        let o = Command::new(exe)
            .arg(root.join(path))
            .arg(out.path())
            .args(targets.iter().map(|t| format!("amdgcn-amd-amdhsa--{t}")))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{path}: {text}");
        for ((p, co, t), want) in expected.iter().filter(|(k, _)| k.0 == path) {
            let i = targets.iter().position(|x| *x == t).unwrap();
            let got = std::fs::read(out.path().join(format!("{co}_{i}.co")))
                .unwrap_or_else(|e| panic!("{p} #{co} {t}: {e}\n{text}"));
            assert!(
                got == *want,
                "{p} #{co} {t}: the runtime loaded different bytes"
            );
            n += 1;
        }
    }
    n
}

/// The map-reduce of ROCm's build, end to end: the same HIP sources built on three
/// "machines" for disjoint targets, each shard split, the shards combined, the
/// result installed, and every kernel of every target loaded by the runtime.
#[test]
fn three_shards_split_and_combined_load_every_kernel_through_the_reference_runtime() {
    let Some(exe) = driver() else { return };
    if tool("hipcc").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-shard.sh");
    let prefix = "kpack/test/stage";
    let mut expected = BTreeMap::new();
    let mut shards = Vec::new();
    for (name, targets) in [
        ("gfx90X", &["gfx900", "gfx906"][..]),
        ("gfx908", &["gfx908", "gfx90a:xnack+"][..]),
        ("gfx103X", &["gfx1030"][..]),
    ] {
        let art = tmp.path().join("build").join(name);
        let o = Command::new("bash")
            .arg(&script)
            .arg(&art)
            .args(targets)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        for ((p, co, t), bytes) in fat_code_objects(&art.join(prefix)) {
            expected.insert((p, co, t), bytes);
        }
        let shard = tmp.path().join("shards").join(name);
        let o = kpack(&[
            "split",
            art.to_str().unwrap(),
            "-o",
            shard.to_str().unwrap(),
            "--artifact-prefix",
            "test_lib",
            "--gpu-targets",
            &targets.join(","),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        shards.push(shard);
    }
    let out = tmp.path().join("combined");
    let mut args = vec!["combine".to_string()];
    args.extend(shards.iter().map(|s| s.display().to_string()));
    args.extend(["-o".to_string(), out.display().to_string()]);
    let o = kpack(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let root = tmp.path().join("root");
    flatten(&artifact_dirs(&out), &root);
    let n = load_expected(&exe, &root, &expected);
    // 2 binaries × 2 TUs × 5 targets.
    assert_eq!(n, 20);
    for device in ["gfx900", "gfx906", "gfx908", "gfx90a:xnack+", "gfx1030"] {
        let o = kpack(&[
            "verify",
            root.to_str().unwrap(),
            "--device",
            device,
            "--no-tui",
        ]);
        assert!(o.status.success(), "{device}: {}", stdout(&o));
    }
    let run = Command::new(root.join("bin/app"))
        .env("LD_LIBRARY_PATH", root.join("lib"))
        .output()
        .unwrap();
    assert!(run.status.success());
}

/// Issue #16's proof with stock pip: split the fixture wheel, install
/// `torch[device-gfx90a]` into a fresh venv, `pip check`, find the archives next to
/// the package, `verify --device` from the installed location, load every gfx90a
/// kernel byte-exact through the reference runtime, then uninstall the device wheel
/// and see only its archives go while the host package still imports and loads.
#[test]
fn split_wheels_install_with_pip_and_every_kernel_loads_from_site_packages() {
    let Some(exe) = driver() else { return };
    if tool("python3").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(whl) = fixture_wheel(tmp.path()) else {
        return;
    };
    let dist = tmp.path().join("dist");
    let o = split_wheel(&whl, &dist, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    if bootstrap_wheel(&dist).is_none() {
        return;
    }
    let venv = tmp.path().join("venv");
    let o = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "venv: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let pip = |args: &[&str]| {
        let o = Command::new(venv.join("bin/pip"))
            .args(["--disable-pip-version-check", "--no-input"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "pip {args:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    pip(&[
        "install",
        "--no-index",
        "--find-links",
        dist.to_str().unwrap(),
        "torch[device-gfx90a]",
    ]);
    pip(&["check"]);
    let sp = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("site-packages");
    let pkg = sp.join("torch");
    let mut kp: Vec<String> = std::fs::read_dir(pkg.join(".kpack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    kp.sort();
    assert_eq!(kp, ["torch_gfx90a.kpack"]);
    for device in ["gfx90a:xnack+", "gfx90a:sramecc+:xnack+"] {
        let o = kpack(&[
            "verify",
            pkg.to_str().unwrap(),
            "--device",
            device,
            "--no-tui",
        ]);
        assert!(o.status.success(), "{device}: {}{}", stdout(&o), stderr(&o));
    }
    // A device without the wheel's targets finds nothing: verify says so.
    let o = kpack(&[
        "verify",
        pkg.to_str().unwrap(),
        "--device",
        "gfx1030",
        "--no-tui",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    // Every gfx90a kernel of the original binaries, from site-packages.
    let mut expected = BTreeMap::new();
    for ((p, co, t), bytes) in fat_code_objects(&fixtures()) {
        if ["libkernels.so", "libkernels_z.so"].contains(&p.as_str()) && t.starts_with("gfx90a") {
            expected.insert((format!("lib/{p}"), co, t), bytes);
        }
    }
    assert_eq!(load_expected(&exe, &pkg, &expected), 2);
    // Uninstall the device wheel: its archives go, the host stays and loads.
    pip(&["uninstall", "-y", "amd-torch-device-gfx90a"]);
    assert!(!pkg.join(".kpack/torch_gfx90a.kpack").exists());
    assert!(pkg.join("lib/libkernels.so").exists());
    let o = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import ctypes, os, torch; d = os.path.dirname(torch.__file__); \
             ctypes.CDLL(os.path.join(d, 'lib/libplain.so')); \
             ctypes.CDLL(os.path.join(d, 'lib/libkernels.so')); print('loaded')",
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("loaded"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    pip(&["check"]);
}

/// `tests/xmix`: one library of 60 TUs, 50 for plain gfx90a and 10 for
/// gfx90a:xnack- and gfx90a:xnack+ (`scripts/make-xnack-mix.sh`).
fn xmix() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/xmix")
}

/// Every gfx90a device ISA HSA can report: each of sramecc and xnack set, cleared
/// or left out.
const GFX90A_DEVICES: [&str; 9] = [
    "gfx90a",
    "gfx90a:xnack-",
    "gfx90a:xnack+",
    "gfx90a:sramecc-",
    "gfx90a:sramecc+",
    "gfx90a:sramecc-:xnack-",
    "gfx90a:sramecc-:xnack+",
    "gfx90a:sramecc+:xnack-",
    "gfx90a:sramecc+:xnack+",
];

/// The targets a device ISA accepts, most specific first (`kpack-formats.md` §4.5:
/// feature subsets by a descending bitmask), written here from the spec.
fn accepted(isa: &str) -> Vec<String> {
    let mut parts = isa.split(':');
    let p = parts.next().unwrap();
    let f: Vec<&str> = parts.collect();
    let n = f.len();
    (0..1u32 << n)
        .rev()
        .map(|mask| {
            let mut t = p.to_string();
            for (j, x) in f.iter().enumerate() {
                if mask & (1 << (n - 1 - j)) != 0 {
                    t = format!("{t}:{x}");
                }
            }
            t
        })
        .collect()
}

/// Load every bundle of `binary` (relative to `root`) on every gfx90a device through
/// the reference runtime (the first-match loader: it never falls through), and
/// check each against the code object of the original the device should get: the
/// bundle's code for the first target the device accepts. A device with no code it
/// can run must fail. Returns the loads checked.
fn load_on_every_device(
    exe: &Path,
    root: &Path,
    binary: &str,
    original: &BTreeMap<(String, u32, String), Vec<u8>>,
    original_path: &str,
) -> usize {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(exe)
        .arg(root.join(binary))
        .arg(out.path())
        .args(GFX90A_DEVICES.map(|d| format!("amdgcn-amd-amdhsa--{d}")))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let bundles: std::collections::BTreeSet<u32> = original
        .keys()
        .filter(|(p, _, _)| p == original_path)
        .map(|(_, co, _)| *co)
        .collect();
    let mut n = 0;
    for co in bundles {
        for (i, d) in GFX90A_DEVICES.iter().enumerate() {
            let want = accepted(d)
                .into_iter()
                .find_map(|t| original.get(&(original_path.to_string(), co, t)));
            let got = std::fs::read(out.path().join(format!("{co}_{i}.co")));
            match want {
                Some(w) => {
                    let got =
                        got.unwrap_or_else(|_| panic!("{binary} #{co} on {d}: not loaded\n{text}"));
                    assert!(
                        got == *w,
                        "{binary} #{co} on {d}: other bytes than the original's"
                    );
                }
                None => {
                    assert!(
                        got.is_err(),
                        "{binary} #{co} on {d}: loaded code it cannot run"
                    );
                    assert!(text.contains(&format!("co {co} isa amdgcn-amd-amdhsa--{d} error")));
                }
            }
            n += 1;
        }
    }
    n
}

/// ROCm 7.14's gfx90a regression, as our own pack used to write it: a library mixing
/// plain gfx90a TUs with xnack-specific ones. Every layout pack writes (one archive
/// per target ID, per family, the split overlays installed) resolves every bundle
/// on every gfx90a device through the strictest loader, byte-exact; the archive set
/// of ROCm 7.14 (a small xnack- overlay beside the complete archive) fails verify
/// naming the loader, the devices and the archive that shadows the other.
#[test]
fn a_library_mixing_xnack_and_plain_tus_loads_on_every_gfx90a_device() {
    let Some(exe) = driver() else { return };
    let original = fat_code_objects(&xmix());
    // The input is the shape of the regression (what the bundler put there).
    let per_bundle = |co: u32| -> Vec<String> {
        original
            .keys()
            .filter(|(_, c, _)| *c == co)
            .map(|(_, _, t)| t.clone())
            .collect()
    };
    assert_eq!(original.len(), 70);
    assert_eq!(per_bundle(0), ["gfx90a"]);
    assert_eq!(per_bundle(59), ["gfx90a:xnack+", "gfx90a:xnack-"]);
    let tmp = tempfile::tempdir().unwrap();
    let lib = "lib/libxmix.so";
    for (name, extra) in [
        ("per-target", &["--all"][..]),
        (
            "per-family",
            &["--archive-per", "family", "--family", "gfx90X"][..],
        ),
        ("split", &["--all", "--layout", "split"][..]),
    ] {
        let out = tmp.path().join(name);
        let o = pack_rocm(&xmix(), &out, extra);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let root = if name == "split" {
            // Installed as a package manager would: the generic tree and every
            // overlay copied into one prefix.
            let root = tmp.path().join("split-installed");
            for part in artifact_dirs(&out) {
                std::fs::create_dir_all(&root).unwrap();
                let ok = Command::new("cp")
                    .arg("-a")
                    .arg(format!("{}/.", part.display()))
                    .arg(&root)
                    .status()
                    .unwrap()
                    .success();
                assert!(ok);
            }
            root
        } else {
            out.clone()
        };
        let kp: Vec<String> = std::fs::read_dir(root.join(".kpack"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".kpack"))
            .collect();
        assert_eq!(
            kp.len(),
            1,
            "{name}: one archive holds gfx90a's variants: {kp:?}"
        );
        let o = kpack(&["verify", root.to_str().unwrap(), "--no-tui"]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stdout(&o));
        assert_eq!(
            load_on_every_device(&exe, &root, lib, &original, lib),
            60 * GFX90A_DEVICES.len(),
            "{name}"
        );
    }
    // `split` (ROCm's CI matrix), its artifacts installed by flattening.
    let art = tmp.path().join("art");
    let stage = art.join("mix/stage");
    std::fs::create_dir_all(stage.join("lib")).unwrap();
    std::fs::copy(xmix().join(lib), stage.join(lib)).unwrap();
    std::fs::write(art.join("artifact_manifest.txt"), "mix/stage\n").unwrap();
    let split_out = tmp.path().join("split-art");
    let o = kpack(&[
        "split",
        art.to_str().unwrap(),
        "-o",
        split_out.to_str().unwrap(),
        "--artifact-prefix",
        "mix_lib",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let names: Vec<String> = artifact_dirs(&split_out)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["mix_lib_generic", "mix_lib_gfx90a"]);
    let flat = tmp.path().join("split-flat");
    flatten(&artifact_dirs(&split_out), &flat);
    let o = kpack(&["verify", flat.to_str().unwrap(), "--no-tui"]);
    assert_eq!(o.status.code(), Some(0), "split: {}", stdout(&o));
    assert_eq!(
        load_on_every_device(&exe, &flat, lib, &original, lib),
        60 * GFX90A_DEVICES.len(),
        "split"
    );
    // `wheel split`, host and device wheels unpacked into one site-packages.
    if let Some(py) = tool("python3") {
        let whl = tmp.path().join("torch-1.0-py3-none-any.whl");
        let o = Command::new(&py)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-test-wheel.py"))
            .arg(&whl)
            .args(["--name", "torch", "--version", "1.0"])
            .arg(format!(
                "torch/lib/libxmix.so@755={}",
                xmix().join(lib).display()
            ))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let dist = tmp.path().join("dist");
        let o = split_wheel(&whl, &dist, &[]);
        assert!(o.status.success(), "{}", stderr(&o));
        let site = tmp.path().join("site");
        for w in std::fs::read_dir(&dist).unwrap() {
            let w = w.unwrap().path();
            let ok = Command::new(&py)
                .args(["-m", "zipfile", "-e"])
                .arg(&w)
                .arg(&site)
                .status()
                .unwrap()
                .success();
            assert!(ok, "{}", w.display());
        }
        let pkg = site.join("torch");
        let kp: Vec<String> = std::fs::read_dir(pkg.join(".kpack"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(kp, ["torch_gfx90a.kpack"]);
        assert_eq!(
            load_on_every_device(&exe, &pkg, lib, &original, lib),
            60 * GFX90A_DEVICES.len(),
            "wheel split"
        );
    } else {
        assert!(!in_ci(), "python3 is required in CI");
        eprintln!("note: python3 missing; the wheel-split part is skipped");
    }
    // ROCm 7.14's archive set: the complete archive plus an overlay holding only the
    // xnack- kernels, as a per-target pack of them writes it.
    let shipped = tmp.path().join("per-target");
    let overlay = tmp.path().join("overlay");
    let o = pack_rocm(&xmix(), &overlay, &["--target", "gfx90a:xnack-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::copy(
        overlay.join(".kpack/rocm_gfx90a:xnack-.kpack"),
        shipped.join(".kpack/rocm_gfx90a:xnack-.kpack"),
    )
    .unwrap();
    // The reference runtime misses the 50 plain bundles on an xnack- device...
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(&exe)
        .arg(shipped.join(lib))
        .arg(out.path())
        .arg("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(text.matches(" error 5").count(), 50, "{text}");
    // ...and verify says so, naming the loader, the devices and the shadowing archive.
    let o = kpack(&["verify", shipped.to_str().unwrap(), "--no-tui"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let text = stdout(&o);
    assert!(
        text.contains(
            "lib/libxmix.so: 50 bundles (#0-#49) on gfx90a:xnack-, gfx90a:sramecc+:xnack-, \
             gfx90a:sramecc-:xnack-: first-match loaders (ROCm up to 7.14 and the reference \
             runtime): .kpack/rocm_gfx90a:xnack-.kpack lists gfx90a:xnack- but lacks them, and \
             shadows .kpack/rocm_gfx90a.kpack, which has them"
        ),
        "{text}"
    );
    assert!(text.contains(".kpack/rocm_gfx90a:xnack-.kpack: not in the ledger, and it shadows"));
    let o = kpack(&[
        "verify",
        shipped.to_str().unwrap(),
        "--device",
        "gfx90a:sramecc+:xnack-",
        "--no-tui",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("50 of 60 bundles would not load"),
        "{}",
        stdout(&o)
    );
    // The newest loader falls through: narrowed to it, verify passes.
    let o = kpack(&[
        "verify",
        shipped.to_str().unwrap(),
        "--loader",
        "fall-through",
        "--no-tui",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

/// #32: code objects larger than one compression chunk (`ENCODE_CHUNK`, 256 KiB) are
/// compressed chunk by chunk, the cancel looked at between chunks; the archives stay
/// one frame per code object, byte for byte the same with one worker and with two at
/// levels 1, 3, 19 and max, and every code object loads byte-exact through the
/// reference runtime (expected bytes read from the fat input by the bundle reader).
#[test]
fn chunked_compression_is_deterministic_and_loads_at_every_level() {
    let Some(exe) = driver() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // One generated shared library (`examples/gen_tree --single`: real linked, its
    // code objects made from the fixtures' machine code) of 8 MB in one bundle.
    let gen_tree = Path::new(env!("CARGO_BIN_EXE_kpack-tui"))
        .with_file_name("examples")
        .join("gen_tree");
    assert!(gen_tree.is_file(), "{} is missing", gen_tree.display());
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    let o = Command::new(&gen_tree)
        .arg("--single")
        .arg(tree.join("lib/libbig.so"))
        .args(["--tus", "1", "--size-mb", "8", "--seed", "3"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let original = fat_code_objects(&tree);
    let chunk = kpack::kpack::archive::ENCODE_CHUNK;
    let big = original.values().filter(|b| b.len() > 2 * chunk).count();
    assert!(big >= 4, "{big} code objects span more than two chunks");
    let archives = |root: &Path| -> BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(root.join(".kpack"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "kpack"))
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read(&p).unwrap())
            })
            .collect()
    };
    for level in ["1", "3", "19", "max"] {
        let one = tmp.path().join(format!("j1-{level}"));
        let two = tmp.path().join(format!("j2-{level}"));
        pack_with(
            &tree,
            &one,
            "gfx90X,gfx103X",
            &["--level", level, "-j", "1"],
        );
        pack_with(
            &tree,
            &two,
            "gfx90X,gfx103X",
            &["--level", level, "-j", "2"],
        );
        let (a, b) = (archives(&one), archives(&two));
        assert!(!a.is_empty(), "level {level}: no archive");
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            b.keys().collect::<Vec<_>>(),
            "level {level}"
        );
        for (name, bytes) in &a {
            assert!(
                *bytes == b[name],
                "level {level}: {name} differs between -j1 and -j2"
            );
        }
        let promised: usize = ledger(&one).binaries.iter().map(|b| b.kernels.len()).sum();
        assert!(promised >= 4, "level {level}: {promised}");
        assert_eq!(load_all(&exe, &one, &original), promised, "level {level}");
    }
}
