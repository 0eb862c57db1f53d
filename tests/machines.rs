//! Host CPUs beyond x86-64 (issue #33): aarch64 and ppc64le fat binaries, packed,
//! rewritten, stripped, split and loaded for real.
//!
//! The fixtures (`tests/cross/<machine>/`, `scripts/make-cross-fixtures.sh`) are built
//! here by clang-19 for an aarch64 or ppc64le host and two GPU targets, linked by the
//! Debian cross toolchains for 64 KiB pages. Each test derives what the code objects
//! must be from the input as the real bundler sees it (the `.hip_fatbin` copied out
//! by llvm-objcopy-19, cut at each `__CLANG_OFFLOAD_BUNDLE__` header, unbundled by
//! clang-offload-bundler-19), then loads what kpack-tui wrote under qemu-user: a
//! dlopen driver (libraries) or the program itself (executables), with
//! `tests/oracle/hip_stub.cpp` and the reference kpack runtime cross-compiled for
//! that machine as `libamdhip64.so.5`. Its `__hipRegisterFatBinary` follows each
//! wrapper's pointer, set by the emulated machine's dynamic loader, to the marker
//! and loads every bundle through the runtime, as CLR does.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

/// One host machine: its name (the fixture directory), GNU triple and emulator.
#[derive(Clone, Copy)]
struct Machine {
    name: &'static str,
    triple: &'static str,
    qemu: &'static str,
}

const MACHINES: [Machine; 2] = [
    Machine {
        name: "aarch64",
        triple: "aarch64-linux-gnu",
        qemu: "qemu-aarch64",
    },
    Machine {
        name: "ppc64le",
        triple: "powerpc64le-linux-gnu",
        qemu: "qemu-ppc64le",
    },
];

/// The GPU targets of each fixture (see the fixture script).
const LIB_TARGETS: [&str; 2] = ["gfx900", "gfx90a:xnack+"];
const APP_TARGETS: [&str; 2] = ["gfx906", "gfx1030"];

impl Machine {
    fn fixture(self, name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/cross")
            .join(self.name)
            .join(name)
    }
    fn tool(self, t: &str) -> String {
        format!("{}-{t}", self.triple)
    }
    /// The cross sysroot (the guest's `/`, and its libstdc++).
    fn sysroot(self) -> PathBuf {
        Path::new("/usr").join(self.triple)
    }
}

/// Whether every tool these tests need is here (in CI they must be: `tool` fails).
fn tools(m: Machine) -> bool {
    let mut ok = true;
    for t in [
        m.qemu.to_string(),
        m.tool("g++"),
        m.tool("gcc"),
        m.tool("strip"),
        "llvm-objcopy-19".into(),
        "llvm-readelf-19".into(),
        "llvm-strip-19".into(),
        "clang-offload-bundler-19".into(),
        "eu-elflint".into(),
    ] {
        ok &= tool(&t).is_some();
    }
    let zstd = Path::new("/usr/lib").join(m.triple).join("libzstd.so");
    if !zstd.exists() {
        assert!(
            !in_ci(),
            "{} is required in CI (see .ci/run)",
            zstd.display()
        );
        eprintln!("note: {} missing; skipping", zstd.display());
        ok = false;
    }
    ok
}

/// The stand-in `libamdhip64.so.5` and the dlopen driver, built for `m` once per
/// target directory: the reference runtime and `tests/oracle/hip_stub.cpp`
/// compiled by the cross g++.
fn stub(m: Machine) -> PathBuf {
    static BUILT: OnceLock<Mutex<BTreeMap<&'static str, PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = built.get(m.name) {
        return d.clone();
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("kpack-hipstub-{}", m.name));
    std::fs::create_dir_all(&dir).unwrap();
    let rt = shared().join("oracles/rocm-kpack-runtime/runtime");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle");
    let map = dir.join("hip.map");
    std::fs::write(&map, "hip_4.2 { global: *; };\n").unwrap();
    let lib = dir.join("libamdhip64.so.5");
    if !lib.exists() {
        let mut cmd = Command::new(m.tool("g++"));
        cmd.args([
            "-std=c++17",
            "-O1",
            "-fPIC",
            "-shared",
            "-DROCM_KPACK_STATIC",
        ])
        .args(["-DMSGPACK_NO_BOOST", "-DMSGPACK_DEFAULT_API_VERSION=3"])
        .arg("-I")
        .arg(rt.join("include"))
        .arg("-I")
        .arg(rt.join("src"));
        let mut sources: Vec<PathBuf> = std::fs::read_dir(rt.join("src"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "cpp"))
            .collect();
        sources.sort();
        let tmp = dir.join("libamdhip64.so.5.tmp");
        let o = cmd
            .args(&sources)
            .arg(src.join("hip_stub.cpp"))
            .arg(format!("-Wl,--version-script={}", map.display()))
            .args(["-Wl,-soname,libamdhip64.so.5", "-o"])
            .arg(&tmp)
            .args(["-lzstd", "-ldl"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::rename(&tmp, &lib).unwrap();
    }
    let o = Command::new(m.tool("gcc"))
        .arg(src.join("dlopen_all.c"))
        .arg("-o")
        .arg(dir.join("dlopen_all"))
        .arg("-ldl")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    built.insert(m.name, dir.clone());
    dir
}

/// (bundle index, target) → code-object bytes.
type CodeObjects = BTreeMap<(u32, String), Vec<u8>>;

/// The code objects of a fat binary as the real bundler sees them.
fn bundler_code_objects(bin: &Path, scratch: &Path) -> CodeObjects {
    let fb = scratch.join("fatbin");
    let o = Command::new("llvm-objcopy-19")
        .args(["-O", "binary", "--only-section=.hip_fatbin"])
        .arg(bin)
        .arg(&fb)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let section = std::fs::read(&fb).unwrap();
    // Each translation unit's bundle starts on a 4 KiB boundary with the header magic.
    let magic = b"__CLANG_OFFLOAD_BUNDLE__";
    let starts: Vec<usize> = (0..section.len())
        .step_by(4096)
        .filter(|&o| section[o..].starts_with(magic))
        .collect();
    let mut out = BTreeMap::new();
    for (index, &start) in starts.iter().enumerate() {
        let end = starts.get(index + 1).copied().unwrap_or(section.len());
        let piece = scratch.join(format!("bundle{index}"));
        std::fs::write(&piece, &section[start..end]).unwrap();
        let o = Command::new("clang-offload-bundler-19")
            .args(["-list", "-type=o"])
            .arg(format!("-input={}", piece.display()))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        for t in stdout(&o).lines() {
            let Some((_, arch)) = t.split_once("--") else {
                continue;
            };
            if t.starts_with("host") || arch.is_empty() {
                continue;
            }
            let co = scratch.join(format!("b{index}-{}.co", arch.replace(':', "_")));
            let o = Command::new("clang-offload-bundler-19")
                .args(["-unbundle", "-type=o"])
                .arg(format!("-input={}", piece.display()))
                .arg(format!("-targets={t}"))
                .arg(format!("-output={}", co.display()))
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", stderr(&o));
            out.insert(
                (index as u32, arch.to_string()),
                std::fs::read(&co).unwrap(),
            );
        }
    }
    assert_eq!(starts.len(), 2, "{}: two bundles", bin.display());
    out
}

/// Load `bin` under the emulator with the stand-in runtime asked for `targets`: a
/// library through the dlopen driver, an executable run directly (it prints its
/// line). Returns what the runtime loaded, and the stub's lines.
fn load(m: Machine, bin: &Path, targets: &[&str], scratch: &Path) -> (CodeObjects, String) {
    let stub = stub(m);
    let out = scratch.join(format!("loaded-{}", rand_name(bin)));
    std::fs::create_dir_all(&out).unwrap();
    let name = bin.file_name().unwrap().to_string_lossy().into_owned();
    let mut cmd = Command::new(m.qemu);
    cmd.arg("-L").arg(m.sysroot());
    let library = name.contains(".so");
    if library {
        cmd.arg(stub.join("dlopen_all")).arg(bin);
    } else {
        cmd.arg(bin);
    }
    let o: Output = cmd
        .env(
            "LD_LIBRARY_PATH",
            format!("{}:{}", stub.display(), m.sysroot().join("lib").display()),
        )
        .env("KPACK_STUB_ISAS", targets.join(","))
        .env("KPACK_STUB_OUT", &out)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(
        o.status.success(),
        "{} {}: {:?}\n{err}",
        m.qemu,
        bin.display(),
        o.status
    );
    if !library {
        assert_eq!(stdout(&o), "kpack fixture app: ok\n", "{}", bin.display());
    }
    let mut got = BTreeMap::new();
    for e in std::fs::read_dir(&out).unwrap() {
        let p = e.unwrap().path();
        let f = p.file_name().unwrap().to_string_lossy().into_owned();
        let rest = f
            .strip_prefix(&format!("{name}_"))
            .unwrap()
            .strip_suffix(".co")
            .unwrap();
        let (co, isa) = rest.split_once('_').unwrap();
        let isa = targets[isa.parse::<usize>().unwrap()];
        got.insert(
            (co.parse().unwrap(), isa.to_string()),
            std::fs::read(&p).unwrap(),
        );
    }
    (got, err)
}

fn rand_name(p: &Path) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        p.file_name().unwrap().to_string_lossy(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A tree of one machine's fixtures: `lib/libbulk.so`, `bin/app_pie`.
fn tree(m: Machine, dir: &Path) -> PathBuf {
    let t = dir.join(format!("tree-{}", m.name));
    std::fs::create_dir_all(t.join("lib")).unwrap();
    std::fs::create_dir_all(t.join("bin")).unwrap();
    std::fs::copy(m.fixture("libbulk.so"), t.join("lib/libbulk.so")).unwrap();
    std::fs::copy(m.fixture("app_pie"), t.join("bin/app_pie")).unwrap();
    t
}

/// Both binaries of a packed tree load every code object byte-exact under qemu.
fn loads_byte_exact(m: Machine, packed: &Path, scratch: &Path, how: &str) {
    for (rel, fixture, targets) in [
        ("lib/libbulk.so", "libbulk.so", LIB_TARGETS),
        ("bin/app_pie", "app_pie", APP_TARGETS),
    ] {
        let want = bundler_code_objects(&m.fixture(fixture), scratch);
        let (got, lines) = load(m, &packed.join(rel), &targets, scratch);
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{} {rel} {how}: loaded code objects\n{lines}",
            m.name
        );
        for (k, bytes) in &want {
            assert!(
                got[k] == *bytes,
                "{} {rel} {how} {k:?}: the runtime loaded other bytes than the bundler unbundles",
                m.name
            );
        }
    }
}

/// The PT_LOADs of a binary as llvm-readelf-19 prints them: (offset, vaddr, align).
fn loads(bin: &Path) -> Vec<(u64, u64, u64)> {
    let o = Command::new("llvm-readelf-19")
        .args(["-lW"])
        .arg(bin)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    stdout(&o)
        .lines()
        .filter(|l| l.trim_start().starts_with("LOAD "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (hex(f[1]), hex(f[2]), hex(f[f.len() - 1]))
        })
        .collect()
}

/// The bytes of the whole 64 KiB pages `.hip_fatbin` covers, from its section
/// header as llvm-readelf-19 prints it: what the rewrite can take out of the file.
fn whole_pages(bin: &Path) -> u64 {
    let o = Command::new("llvm-readelf-19")
        .args(["-SW"])
        .arg(bin)
        .output()
        .unwrap();
    let line = stdout(&o)
        .lines()
        .find(|l| l.contains(".hip_fatbin"))
        .unwrap()
        .to_string();
    let f: Vec<&str> = line.split(']').nth(1).unwrap().split_whitespace().collect();
    let (addr, size) = (
        u64::from_str_radix(f[2], 16).unwrap(),
        u64::from_str_radix(f[4], 16).unwrap(),
    );
    let page = 0x10000;
    ((addr + size) / page * page).saturating_sub(addr.div_ceil(page) * page)
}

fn elflint_clean(bin: &Path) {
    let o = Command::new("eu-elflint")
        .arg("--gnu-ld")
        .arg(bin)
        .output()
        .unwrap();
    assert_eq!(
        stdout(&o).trim(),
        "No errors",
        "eu-elflint {}: {}",
        bin.display(),
        stderr(&o)
    );
}

#[test]
fn packed_trees_of_each_machine_load_byte_exact_under_qemu() {
    for m in MACHINES {
        if !tools(m) {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let input = tree(m, tmp.path());
        // Control: the fat input registers its fat wrappers, and the stub says so.
        let (none, lines) = load(m, &input.join("lib/libbulk.so"), &LIB_TARGETS, tmp.path());
        assert!(
            none.is_empty() && lines.contains("fat magic 48495046"),
            "{lines}"
        );

        let packed = tmp.path().join("packed");
        let o = pack_rocm(&input, &packed, &["--all", "--json"]);
        assert!(o.status.success(), "{}: {}", m.name, stderr(&o));
        let o = kpack(&["verify", packed.to_str().unwrap(), "--no-tui"]);
        assert!(
            o.status.success(),
            "{}: {}{}",
            m.name,
            stdout(&o),
            stderr(&o)
        );
        assert!(stdout(&o).contains("sound"), "{}", stdout(&o));
        loads_byte_exact(m, &packed, tmp.path(), "after pack");

        // The library's device code spans whole 64 KiB pages: two are gone from the
        // file, and every PT_LOAD stays congruent modulo the 64 KiB page.
        let before = std::fs::metadata(input.join("lib/libbulk.so"))
            .unwrap()
            .len();
        let after = std::fs::metadata(packed.join("lib/libbulk.so"))
            .unwrap()
            .len();
        let whole = whole_pages(&input.join("lib/libbulk.so"));
        assert_eq!(whole, 2 * 65536, "{}", m.name);
        // What was added (the marker, its program header, moved tables) is < 4 KiB.
        assert!(
            before - after > whole - 4096,
            "{}: {before} -> {after}",
            m.name
        );
        for bin in ["lib/libbulk.so", "bin/app_pie"] {
            let l = loads(&packed.join(bin));
            assert!(l.len() >= 3, "{l:?}");
            for (off, vaddr, align) in l {
                assert_eq!(align, 0x10000, "{} {bin}", m.name);
                assert_eq!(off % 0x10000, vaddr % 0x10000, "{} {bin}", m.name);
            }
            elflint_clean(&packed.join(bin));
        }
    }
}

#[test]
fn stripped_by_the_cross_binutils_and_llvm_they_still_load() {
    for m in MACHINES {
        if !tools(m) {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let input = tree(m, tmp.path());
        for (strip, args) in [
            (m.tool("strip"), vec!["--strip-all"]),
            (m.tool("strip"), vec!["--strip-debug"]),
            ("llvm-strip-19".to_string(), vec!["--strip-all"]),
        ] {
            let packed = tmp
                .path()
                .join(format!("packed-{}", rand_name(Path::new(&strip))));
            let o = pack_rocm(&input, &packed, &["--all"]);
            assert!(o.status.success(), "{}", stderr(&o));
            for bin in ["lib/libbulk.so", "bin/app_pie"] {
                let o = Command::new(&strip)
                    .args(&args)
                    .arg(packed.join(bin))
                    .output()
                    .unwrap();
                assert!(o.status.success(), "{strip}: {}", stderr(&o));
            }
            let how = format!("after {strip} {}", args.join(" "));
            // The loaded-image check passes as the tool left it, and normalize finds
            // nothing to repair (the in-place table survives every strip).
            let o = kpack(&["verify", packed.to_str().unwrap(), "--no-tui"]);
            assert!(o.status.success(), "{how}: {}{}", stdout(&o), stderr(&o));
            let before = tree_hashes(&packed);
            let n = kpack(&["normalize", packed.to_str().unwrap()]);
            assert!(n.status.success(), "{how}: {}", stderr(&n));
            assert!(stdout(&n).contains("fixed 0"), "{how}: {}", stdout(&n));
            assert_eq!(tree_hashes(&packed), before, "{how}");
            loads_byte_exact(m, &packed, tmp.path(), &how);
            for bin in ["lib/libbulk.so", "bin/app_pie"] {
                for (off, vaddr, _) in loads(&packed.join(bin)) {
                    assert_eq!(off % 0x10000, vaddr % 0x10000, "{} {bin} {how}", m.name);
                }
            }
        }
    }
}

#[test]
fn rewrite_and_preview_of_each_machine() {
    for m in MACHINES {
        if !tools(m) {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let lib = m.fixture("libbulk.so");
        let o = kpack(&["preview", lib.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(j["bytes_removed"], whole_pages(&lib), "{}: {j}", m.name);
        // Named as scan names it (one spelling per machine across every --json).
        let s = kpack(&["scan", lib.to_str().unwrap(), "--json"]);
        let s: serde_json::Value = serde_json::from_slice(&s.stdout).unwrap();
        assert_eq!(j["machine"], s["files"][0]["machine"], "{j}");
        assert_eq!(j["machine"], m.name, "{j}");
        // The executable's device code covers no whole 64 KiB page: nothing is
        // removed, the wrappers still go to the marker.
        let app = m.fixture("app_pie");
        let o = kpack(&["preview", app.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(
            (whole_pages(&app), &j["bytes_removed"]),
            (0, &serde_json::json!(0))
        );
        assert_eq!(j["wrappers"].as_array().unwrap().len(), 2, "{j}");
        let out = tmp.path().join("libbulk.so");
        let o = kpack(&[
            "rewrite",
            lib.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--search-path",
            "../.kpack",
            "--kernel-name",
            "libbulk.so",
        ]);
        assert!(o.status.success(), "{}: {}", m.name, stderr(&o));
        elflint_clean(&out);
        let o = Command::new("llvm-readelf-19")
            .args(["-SW"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            stdout(&o).contains(".rocm_kpack_ref") && stderr(&o).is_empty(),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn kernels_and_diff_read_other_machines() {
    for m in MACHINES {
        if !tools(m) {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let input = tree(m, tmp.path());
        // What the kernels must be: the `.name` of each kernel in each code object's
        // metadata note, as llvm-readelf-19 prints it.
        let mut want = Vec::new();
        for (rel, fixture) in [("bin/app_pie", "app_pie"), ("lib/libbulk.so", "libbulk.so")] {
            let scratch = tmp.path().join(fixture);
            std::fs::create_dir_all(&scratch).unwrap();
            for ((_, target), bytes) in bundler_code_objects(&m.fixture(fixture), &scratch) {
                let co = scratch.join("one.co");
                std::fs::write(&co, bytes).unwrap();
                let o = Command::new("llvm-readelf-19")
                    .arg("--notes")
                    .arg(&co)
                    .output()
                    .unwrap();
                for l in stdout(&o).lines() {
                    if let Some(n) = l.trim().strip_prefix(".name:") {
                        want.push((rel.to_string(), target.clone(), n.trim().to_string()));
                    }
                }
            }
        }
        want.sort();
        assert_eq!(want.len(), 10, "{want:?}");
        let o = kpack(&["kernels", input.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(kernel_rows(&j), want, "{}", m.name);

        let packed = tmp.path().join("packed");
        assert!(pack_rocm(&input, &packed, &["--all"]).status.success());
        // Packed, the same kernels are listed from the archives that hold them.
        let o = kpack(&["kernels", packed.to_str().unwrap(), "--json"]);
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let of = |rows: Vec<(String, String, String)>| {
            let mut v: Vec<(String, String)> = rows.into_iter().map(|(_, t, n)| (t, n)).collect();
            v.sort();
            v
        };
        assert_eq!(of(kernel_rows(&j)), of(want.clone()), "{} packed", m.name);

        let o = kpack(&[
            "diff",
            input.to_str().unwrap(),
            packed.to_str().unwrap(),
            "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let d: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(d["old_device_raw"], d["new_device_raw"], "{d}");
        assert!(d["old_device_raw"].as_u64().unwrap() > 0);
    }
}

/// The reference transform's layout (the table moved into a new trailing segment),
/// stripped by the machine's GNU strip, which moves the marker's segment: `verify`
/// reports it, `normalize` repairs it, and the library loads byte-exact again.
#[test]
fn normalize_repairs_what_the_cross_gnu_strip_did_to_the_reference_layout() {
    use kpack::elf::rewrite::{PhdrLayout, plan_rewrite_with};
    for m in MACHINES {
        if !tools(m) {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let input = tree(m, tmp.path());
        let packed = tmp.path().join("packed");
        assert!(pack_rocm(&input, &packed, &["--all"]).status.success());
        let f = "lib/libbulk.so";
        let report = kpack::scan::scan(
            &packed.join(f),
            &kpack::scan::ScanOptions::default(),
            &kpack::event::NoEvents,
        )
        .unwrap();
        let marker = report.files[0].marker.clone().expect("a packed binary");
        let fat = std::fs::read(input.join(f)).unwrap();
        let r = plan_rewrite_with(&fat, &marker, PhdrLayout::Reference).unwrap();
        assert!(r.plan.phdr_relocated, "{}", m.name);
        std::fs::write(packed.join(f), &r.bytes).unwrap();
        let o = Command::new(m.tool("strip"))
            .arg(packed.join(f))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let root = packed.to_str().unwrap();
        let o = kpack(&["verify", root, "--no-tui"]);
        assert_eq!(o.status.code(), Some(1), "{}: {}", m.name, stdout(&o));
        assert!(
            stdout(&o).contains(&format!("{f}: wrapper #0")),
            "{}",
            stdout(&o)
        );
        let o = kpack(&["normalize", root]);
        assert!(
            stdout(&o).contains(&format!("FIXED {}", packed.join(f).display())),
            "{}: {}{}",
            m.name,
            stdout(&o),
            stderr(&o)
        );
        let o = kpack(&["verify", root, "--no-tui"]);
        assert!(o.status.success(), "{}: {}", m.name, stdout(&o));
        loads_byte_exact(m, &packed, tmp.path(), "after strip and normalize");
        for (off, vaddr, _) in loads(&packed.join(f)) {
            assert_eq!(off % 0x10000, vaddr % 0x10000, "{}", m.name);
        }
    }
}

/// `wheel split` of an aarch64/ppc64le wheel, installed by stock pip for that
/// platform (`--platform`, `--target`) with both device extras: the installed
/// library loads every code object byte-exact under qemu from site-packages.
#[test]
fn a_split_wheel_installed_by_pip_for_the_machine_loads_under_qemu() {
    for m in MACHINES {
        if !tools(m) || tool("python3").is_none() {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let plat = format!("manylinux_2_28_{}", m.name);
        let tag = format!("cp311-cp311-{plat}");
        let whl = tmp.path().join(format!("bulk-1.0-{tag}.whl"));
        let o = Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-test-wheel.py"))
            .arg(&whl)
            .args(["--name", "bulk", "--version", "1.0", "--tag", &tag])
            .arg("bulk/__init__.py=text:")
            .arg(format!(
                "bulk/lib/libbulk.so@755={}",
                m.fixture("libbulk.so").display()
            ))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let dist = tmp.path().join("dist");
        let o = kpack(&[
            "wheel",
            "split",
            whl.to_str().unwrap(),
            "-o",
            dist.to_str().unwrap(),
            "--device-package-prefix",
            "bulk-device",
            "--overlay-root",
            "bulk/",
        ]);
        assert!(o.status.success(), "{}: {}", m.name, stderr(&o));
        assert!(
            stdout(&o).contains("1 binary rewritten host-only"),
            "{}",
            stdout(&o)
        );
        if bootstrap_wheel(&dist).is_none() {
            continue;
        }
        let site = tmp.path().join("site");
        let o = Command::new("python3")
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .args(["--no-index", "--find-links"])
            .arg(&dist)
            .arg("--target")
            .arg(&site)
            .args(["--platform", &plat, "--python-version", "3.11"])
            .args([
                "--implementation",
                "cp",
                "--abi",
                "cp311",
                "--only-binary=:all:",
            ])
            .arg("bulk[device-gfx900,device-gfx90a]")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}: pip: {}", m.name, stderr(&o));
        let want = bundler_code_objects(&m.fixture("libbulk.so"), tmp.path());
        let (got, lines) = load(
            m,
            &site.join("bulk/lib/libbulk.so"),
            &LIB_TARGETS,
            tmp.path(),
        );
        assert_eq!(got, want, "{}: installed by pip\n{lines}", m.name);
    }
}

/// `split` (ROCm's CI matrix) of an artifact holding one machine's binaries: the
/// generic and per-target artifacts, installed as the build does (copied into one
/// root), load every code object under qemu.
#[test]
fn split_artifacts_of_each_machine_install_and_load() {
    for m in MACHINES {
        if !tools(m) {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let art = tmp.path().join("art");
        let stage = art.join("math-libs/bulk/stage");
        let input = tree(m, tmp.path());
        std::fs::create_dir_all(stage.parent().unwrap()).unwrap();
        std::fs::rename(&input, &stage).unwrap();
        std::fs::write(art.join("artifact_manifest.txt"), "math-libs/bulk/stage\n").unwrap();
        let out = tmp.path().join("split");
        let o = kpack(&[
            "split",
            art.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--artifact-prefix",
            "bulk_lib",
        ]);
        assert!(o.status.success(), "{}: {}", m.name, stderr(&o));
        let root = tmp.path().join("root");
        flatten(&artifact_dirs(&out), &root);
        let o = kpack(&["verify", root.to_str().unwrap(), "--no-tui"]);
        assert!(o.status.success(), "{}: {}", m.name, stdout(&o));
        loads_byte_exact(m, &root, tmp.path(), "split and installed");
    }
}

/// Host CPUs the rewrite does not handle are named: a rewrite refuses them, a pack
/// copies them with their device code and says why, and an x86-64 binary whose
/// header says aarch64 is refused by aarch64's relocation numbers, stopping the
/// pack before anything is placed.
#[test]
fn other_host_cpus_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = std::fs::read(MACHINES[0].fixture("libbulk.so")).unwrap();
    let t = tmp.path().join("tree");
    std::fs::create_dir_all(t.join("lib")).unwrap();
    let mut riscv = lib.clone();
    riscv[18..20].copy_from_slice(&243u16.to_le_bytes());
    std::fs::write(t.join("lib/libriscv.so"), &riscv).unwrap();
    let mut be = std::fs::read(MACHINES[1].fixture("libbulk.so")).unwrap();
    be[5] = 2;
    be[18..20].copy_from_slice(&21u16.to_be_bytes());
    std::fs::write(t.join("lib/libbe.so"), &be).unwrap();
    for (f, says) in [
        (
            "lib/libriscv.so",
            "unsupported: RISC-V (machine 243) host code (only x86-64, aarch64, ppc64le fat binaries are rewritten)",
        ),
        (
            "lib/libbe.so",
            "unsupported: big-endian ELF (ppc64): only little-endian x86-64, aarch64, ppc64le fat binaries are rewritten",
        ),
    ] {
        let out = tmp.path().join("one.so");
        let o = kpack(&[
            "rewrite",
            t.join(f).to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--search-path",
            "x",
        ]);
        assert_eq!(o.status.code(), Some(1), "{f}");
        assert!(stderr(&o).contains(says), "{}", stderr(&o));
        assert!(!out.exists());
    }
    let o = kpack(&[
        "scan",
        t.join("lib/libriscv.so").to_str().unwrap(),
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["files"][0]["machine"], "RISC-V (machine 243)");
    validate_json("scan", &j);

    let packed = tmp.path().join("packed");
    let o = pack_rocm(&t, &packed, &["--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "lib/libriscv.so: RISC-V (machine 243) host code: only x86-64, aarch64, ppc64le fat binaries are rewritten; copied with its device code"
        ),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        std::fs::read(packed.join("lib/libriscv.so")).unwrap(),
        riscv
    );

    // x86-64 code that claims to be aarch64: planned, then refused; nothing placed.
    let x = tmp.path().join("x");
    std::fs::create_dir_all(&x).unwrap();
    let mut lie = std::fs::read(fixtures().join("libvadd.so")).unwrap();
    lie[18..20].copy_from_slice(&183u16.to_le_bytes());
    std::fs::write(x.join("libvadd.so"), &lie).unwrap();
    let out = tmp.path().join("xout");
    let o = pack_rocm(&x, &out, &["--all"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("libvadd.so: cannot be rewritten host-only: cannot rewrite: wrapper 0: pointer relocated by unsupported type 8; nothing was written"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
}

/// An aarch64 library linked for 16 KiB pages (`-z max-page-size=16384`, as for
/// Apple-silicon-class kernels), built here from the fixture sources: the rewrite
/// removes whole 16 KiB pages (more than 64 KiB pages would allow), every PT_LOAD
/// stays congruent modulo 16 KiB, and it loads byte-exact under qemu.
#[test]
fn sixteen_kib_pages_on_aarch64_are_kept() {
    let m = MACHINES[0];
    if !tools(m) || tool("clang++-19").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = tmp.path().join("tree/lib/libbulk.so");
    std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
    let mut objects = Vec::new();
    for src in [
        here.join("tests/fixtures/src/vadd.hip"),
        here.join("tests/cross/src/bulk.hip"),
    ] {
        let o = tmp
            .path()
            .join(format!("{}.o", src.file_stem().unwrap().to_string_lossy()));
        let out = Command::new("clang++-19")
            .args([
                "-x",
                "hip",
                "--target=aarch64-linux-gnu",
                "--rocm-path=/usr",
            ])
            .arg("--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")
            .args([
                "-O2",
                "-g0",
                "-fPIC",
                "--offload-arch=gfx900",
                "--offload-arch=gfx90a:xnack+",
                "-c",
            ])
            .arg(&src)
            .arg("-o")
            .arg(&o)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        objects.push(o);
    }
    let out = Command::new(m.tool("gcc"))
        .args([
            "-shared",
            "-Wl,--build-id=none",
            "-Wl,-z,max-page-size=16384",
        ])
        .args(["-Wl,-z,common-page-size=16384"])
        .args(&objects)
        .arg(format!("-L{}", stub(m).display()))
        .arg("-l:libamdhip64.so.5")
        .arg("-o")
        .arg(&lib)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        loads(&lib).iter().all(|l| l.2 == 0x4000),
        "{:?}",
        loads(&lib)
    );

    let o = kpack(&["preview", lib.to_str().unwrap(), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["page"], 16384, "{j}");
    let removed = j["bytes_removed"].as_u64().unwrap();
    assert!(
        removed.is_multiple_of(16384) && removed > whole_pages(&lib),
        "{removed}"
    );

    let packed = tmp.path().join("packed");
    let o = pack_rocm(&tmp.path().join("tree"), &packed, &["--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (off, vaddr, _) in loads(&packed.join("lib/libbulk.so")) {
        assert_eq!(off % 0x4000, vaddr % 0x4000);
    }
    elflint_clean(&packed.join("lib/libbulk.so"));
    let want = bundler_code_objects(&lib, tmp.path());
    let (got, lines) = load(m, &packed.join("lib/libbulk.so"), &LIB_TARGETS, tmp.path());
    assert_eq!(got, want, "{lines}");
}
