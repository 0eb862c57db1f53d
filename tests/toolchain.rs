//! Packed binaries survive the packaging toolchain (issue #25).
//!
//! Release pipelines run `strip`, `objcopy`, `eu-strip` and `patchelf` on
//! what `pack` writes. For each tool step, on every host-only ELF of a packed demo and
//! fixture tree: the step runs, `verify` (which reads each binary as the loader maps
//! it) says sound, `readelf` reports no problem, and every kernel loads byte-exact in
//! a live process: libraries are `dlopen`ed and executables run, with a stand-in
//! `libamdhip64.so.5` (`tests/oracle/hip_stub.cpp`) whose `__hipRegisterFatBinary`
//! follows the wrapper's pointer in memory to the marker and loads the bundle through
//! the reference runtime, as CLR does. A binary broken by hand (the marker's segment
//! moved, what GNU strip did to the previous layout) is caught by `verify`, exit 1.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The stand-in HIP runtime and the dlopen driver, built once per target directory.
fn stub() -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            for t in ["c++", "cc"] {
                tool(t)?;
            }
            for h in ["/usr/include/msgpack.hpp", "/usr/include/zstd.h"] {
                if !Path::new(h).exists() {
                    assert!(!in_ci(), "{h} is required in CI (see .ci/run)");
                    eprintln!("note: {h} missing; skipping the live-load checks");
                    return None;
                }
            }
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kpack-hipstub");
            std::fs::create_dir_all(&dir).unwrap();
            let rt = shared().join("oracles/rocm-kpack-runtime/runtime");
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle");
            let map = dir.join("hip.map");
            std::fs::write(&map, "hip_4.2 { global: *; };\n").unwrap();
            let mut cmd = Command::new("c++");
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
            for e in std::fs::read_dir(rt.join("src")).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_some_and(|x| x == "cpp") {
                    cmd.arg(p);
                }
            }
            let o = cmd
                .arg(src.join("hip_stub.cpp"))
                .arg(format!("-Wl,--version-script={}", map.display()))
                .args(["-Wl,-soname,libamdhip64.so.5", "-o"])
                .arg(dir.join("libamdhip64.so.5"))
                .args(["-lzstd", "-ldl"])
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let o = Command::new("cc")
                .arg(src.join("dlopen_all.c"))
                .arg("-o")
                .arg(dir.join("dlopen_all"))
                .arg("-ldl")
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            Some(dir)
        })
        .clone()
}

/// A packed copy of the demo tree and of the fixtures, with the code objects of
/// their fat inputs: (packed root, input root, (path, bundle, target) → bytes).
/// (path, bundle, target) → code-object bytes.
type CodeObjects = BTreeMap<(String, u32, String), Vec<u8>>;
type Packed = (PathBuf, PathBuf, CodeObjects);

fn packed(tmp: &Path) -> Vec<Packed> {
    let mut out = Vec::new();
    for (name, tree) in [
        ("demo", demo()),
        ("fixtures", fixtures().parent().unwrap().to_path_buf()),
    ] {
        let p = tmp.join(name);
        let o = pack_rocm(&tree, &p, &["--all"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let original = fat_code_objects(&tree);
        out.push((p, tree, original));
    }
    out
}

/// The host-only ELF binaries of a packed tree (from its ledger).
fn host_elves(root: &Path) -> Vec<String> {
    ledger(root)
        .binaries
        .iter()
        .map(|b| b.path.clone())
        .filter(|p| std::fs::read(root.join(p)).is_ok_and(|d| d.starts_with(b"\x7fELF")))
        .collect()
}

/// eu-elflint's complaints, without section numbers and addresses (the host-only
/// binary numbers its sections differently, and tools place things elsewhere).
///
/// One complaint is a heuristic of eu-elflint's, checked here instead of trusted:
/// it attributes a `NOBITS` section to the first `PT_LOAD` whose *file offsets*
/// cover its `sh_offset`. After GNU strip compacts a host-only binary, lld's
/// `.relro_padding` (zero-filled, in the RW segment by address) can land inside the
/// offset range of the segment that ends with the zero-filled device range, and is
/// then reported "not fully contained". Such a line is dropped when the loader maps
/// the section's whole address range through one `PT_LOAD` (what matters at run
/// time); any other is kept.
fn elflint(path: &Path) -> std::collections::BTreeSet<String> {
    let o = Command::new("eu-elflint")
        .arg("--gnu-ld")
        .arg(path)
        .output()
        .unwrap();
    let number = regex::Regex::new(r"\[\s*\d+\]").unwrap();
    let address = regex::Regex::new(r"0x[0-9a-f]+").unwrap();
    let contained =
        regex::Regex::new(r"^section \[\s*\d+\] '([^']+)' not fully contained in segment").unwrap();
    let data = std::fs::read(path).unwrap();
    let lay = kpack::elf::rewrite::parse_layout(&data).unwrap();
    let mapped_by_address = |name: &str| {
        lay.sections.iter().any(|s| {
            s.name == name
                && s.sh_type == 8
                && lay.segments.iter().any(|p| {
                    p.p_type == 1
                        && s.sh_addr >= p.p_vaddr
                        && s.sh_addr + s.sh_size <= p.p_vaddr + p.p_memsz
                })
        })
    };
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty() && *l != "No errors")
        .filter(|l| {
            contained
                .captures(l)
                .is_none_or(|c| !mapped_by_address(&c[1]))
        })
        .map(|l| {
            address
                .replace_all(&number.replace_all(l, "[N]"), "0xN")
                .into_owned()
        })
        .collect()
}

fn is_executable(path: &Path) -> bool {
    let d = std::fs::read(path).unwrap();
    // An executable has PT_INTERP (program header type 3).
    let phoff = u64::from_le_bytes(d[32..40].try_into().unwrap()) as usize;
    let phnum = u16::from_le_bytes(d[56..58].try_into().unwrap()) as usize;
    (0..phnum).any(|i| d[phoff + i * 56..phoff + i * 56 + 4] == [3, 0, 0, 0])
}

fn run(cmd: &[&str], dir: &Path) {
    let o = Command::new(cmd[0])
        .args(&cmd[1..])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}: {}",
        cmd.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// RPM's `find-debuginfo -m` on a build root, as rpmbuild runs it: eu-strip with the
/// debug info split into `usr/lib/debug`, then a `.gnu_debugdata` MiniDebugInfo
/// section added to each binary with GNU objcopy (the Fedora and RHEL default).
fn find_debuginfo(root: &Path, scratch: &Path) {
    let build = scratch.join("rpm-build");
    std::fs::create_dir_all(&build).unwrap();
    let o = Command::new("find-debuginfo")
        .arg("-m")
        .arg(&build)
        .current_dir(&build)
        .env("RPM_BUILD_ROOT", root)
        .env("RPM_BUILD_DIR", &build)
        .env("RPM_PACKAGE_NAME", "demo")
        .env("RPM_PACKAGE_VERSION", "1")
        .env("RPM_PACKAGE_RELEASE", "1")
        .env("RPM_ARCH", "x86_64")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "find-debuginfo: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// One pipeline step on one file (`F`: the binary, `D`: a scratch file outside the tree).
fn step(name: &str, exe: bool, f: &str, d: &str) -> Vec<Vec<String>> {
    let s = |v: &[&str]| {
        v.iter()
            .map(|x| x.replace("{F}", f).replace("{D}", d))
            .collect::<Vec<String>>()
    };
    match name {
        "strip --strip-debug" => vec![s(&["strip", "--strip-debug", "{F}"])],
        "strip --strip-unneeded" => vec![s(&["strip", "--strip-unneeded", "{F}"])],
        "dh_strip" if exe => vec![s(&[
            "strip",
            "--remove-section=.comment",
            "--remove-section=.note",
            "{F}",
        ])],
        "dh_strip" => vec![s(&[
            "strip",
            "--remove-section=.comment",
            "--remove-section=.note",
            "--strip-unneeded",
            "{F}",
        ])],
        "debug split" => vec![
            s(&["objcopy", "--only-keep-debug", "{F}", "{D}"]),
            s(&["strip", "--strip-debug", "{F}"]),
            s(&["objcopy", "--add-gnu-debuglink={D}", "{F}"]),
        ],
        "eu-strip" => vec![s(&["eu-strip", "--remove-comment", "-f", "{D}", "{F}"])],
        "llvm-strip" => vec![s(&["llvm-strip-19", "{F}"])],
        "llvm-objcopy --strip-debug" => vec![s(&["llvm-objcopy-19", "--strip-debug", "{F}"])],
        "patchelf --set-rpath" => vec![s(&["patchelf", "--set-rpath", "/opt/rocm/lib", "{F}"])],
        "patchelf --add-needed" => vec![s(&["patchelf", "--add-needed", "libz.so.1", "{F}"])],
        _ => unreachable!("{name}"),
    }
}

// `chrpath -r` has its own test (chrpath_keeps_a_packed_binary_loadable): it only
// rewrites, in place and never longer, an RPATH the linker wrote, which none of these
// binaries has; and it cannot read one that patchelf added (it looks the string up
// in the `.dynstr` section, which patchelf moves), not even on the fat input.
const STEPS: [&str; 11] = [
    "strip --strip-debug",
    "strip --strip-unneeded",
    "dh_strip",
    "debug split",
    "eu-strip",
    "find-debuginfo -m",
    "llvm-strip",
    "llvm-objcopy --strip-debug",
    "patchelf --set-rpath",
    "patchelf --add-needed",
    "none",
];

/// Load every host-only binary of `root` in a live process and compare each code
/// object with the fat input's. Returns how many were loaded.
fn load_live(stub: &Path, root: &Path, original: &CodeObjects, what: &str) -> usize {
    let mut n = 0;
    for path in host_elves(root) {
        let want: CodeObjects = original
            .iter()
            .filter(|(k, _)| k.0 == path)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut targets: Vec<&str> = want.keys().map(|k| k.2.as_str()).collect();
        targets.sort();
        targets.dedup();
        let isas: Vec<String> = targets
            .iter()
            .map(|t| format!("amdgcn-amd-amdhsa--{t}"))
            .collect();
        let out = tempfile::tempdir().unwrap();
        let file = root.join(&path);
        let mut cmd = if is_executable(&file) {
            Command::new(&file)
        } else {
            let mut c = Command::new(stub.join("dlopen_all"));
            c.arg(&file);
            c
        };
        let libdir = file.parent().unwrap();
        let o = cmd
            .env(
                "LD_LIBRARY_PATH",
                format!("{}:{}", stub.display(), libdir.display()),
            )
            .env("KPACK_STUB_ISAS", isas.join(","))
            .env("KPACK_STUB_OUT", out.path())
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success(),
            "{what}: {path} did not load in a live process ({:?}): {log}",
            o.status
        );
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        for ((_, bundle, target), bytes) in &want {
            let i = targets.iter().position(|t| t == target).unwrap();
            let got = std::fs::read(out.path().join(format!("{name}_{bundle}_{i}.co")))
                .unwrap_or_else(|_| panic!("{what}: {path} #{bundle} {target} not loaded: {log}"));
            assert!(
                got == **bytes,
                "{what}: {path} #{bundle} {target}: the live process loaded other bytes"
            );
            n += 1;
        }
    }
    n
}

#[test]
fn every_kernel_loads_after_every_packaging_tool() {
    let needed = [
        "strip",
        "objcopy",
        "readelf",
        "eu-strip",
        "llvm-strip-19",
        "llvm-objcopy-19",
        "patchelf",
        "eu-elflint",
        "find-debuginfo",
        "xz",
    ];
    if needed.iter().any(|t| tool(t).is_none()) {
        return;
    }
    let Some(stub) = stub() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let trees = packed(tmp.path());
    let mut loaded = BTreeMap::new();
    for name in STEPS {
        for (i, (root, input, original)) in trees.iter().enumerate() {
            // The packed tree and, for comparison, the fat input, each through the
            // same step: eu-elflint may say nothing about a host-only result that it
            // does not say about the fat binary after that step.
            let copy = tmp.path().join(format!("step-{i}"));
            let fat = tmp.path().join(format!("fat-{i}"));
            for (from, to) in [(root, &copy), (input, &fat)] {
                let _ = std::fs::remove_dir_all(to);
                run(
                    &["cp", "-a", from.to_str().unwrap(), to.to_str().unwrap()],
                    tmp.path(),
                );
            }
            let elves = host_elves(&copy);
            assert!(!elves.is_empty());
            if name == "find-debuginfo -m" {
                for tree in [&copy, &fat] {
                    find_debuginfo(tree, tmp.path());
                }
                for p in &elves {
                    let o = Command::new("readelf")
                        .arg("-SW")
                        .arg(copy.join(p))
                        .output()
                        .unwrap();
                    let text = String::from_utf8_lossy(&o.stdout);
                    assert!(
                        text.contains(".gnu_debugdata"),
                        "{p}: no MiniDebugInfo added"
                    );
                }
            } else if name != "none" {
                for p in &elves {
                    for tree in [&copy, &fat] {
                        let f = tree.join(p);
                        let d = tmp.path().join("scratch.debug");
                        let _ = std::fs::remove_file(&d);
                        let (tf, td) = (f.to_str().unwrap(), d.to_str().unwrap());
                        for cmd in step(name, is_executable(&f), tf, td) {
                            let argv: Vec<&str> = cmd.iter().map(String::as_str).collect();
                            let o = Command::new(argv[0]).args(&argv[1..]).output().unwrap();
                            let err = String::from_utf8_lossy(&o.stderr);
                            assert!(o.status.success(), "{name}: {p}: {err}");
                            // BFD warns when it moves a section it cannot place.
                            assert!(!err.contains("adjusted to"), "{name}: {p}: {err}");
                        }
                    }
                }
            }
            for p in &elves {
                let f = copy.join(p);
                let (ours, theirs) = (elflint(&f), elflint(&fat.join(p)));
                let new: Vec<&String> = ours.iter().filter(|l| !theirs.contains(*l)).collect();
                assert!(new.is_empty(), "{name}: eu-elflint on {p}: {new:?}");
                let o = Command::new("readelf")
                    .args(["-lW"])
                    .arg(&f)
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&o.stderr);
                assert!(text.trim().is_empty(), "{name}: readelf on {p}: {text}");
            }
            let o = kpack(&["verify", copy.to_str().unwrap()]);
            assert!(
                o.status.success(),
                "{name}: verify: {}{}",
                stdout(&o),
                stderr(&o)
            );
            let n = load_live(&stub, &copy, original, name);
            *loaded.entry(i).or_insert(0) += n;
            let promised: usize = ledger(&copy)
                .binaries
                .iter()
                .filter(|b| elves.contains(&b.path))
                .map(|b| b.kernels.len())
                .sum();
            assert!(
                n >= promised,
                "{name}: {n} code objects loaded, the pack archived {promised}"
            );
        }
    }
    // 11 steps over every host-only binary of both trees.
    assert!(loaded[&0] >= 11 * 16, "{loaded:?}");
}

/// The marker's segment moved by hand (what GNU strip did to the earlier layout):
/// the section headers still look right, verify reads the loaded image and fails.
#[test]
fn a_moved_marker_segment_is_caught_by_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("p");
    let o = pack_rocm(&demo(), &root, &["--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lib = root.join("lib/librdc.so");
    let mut d = std::fs::read(&lib).unwrap();
    let phoff = u64::from_le_bytes(d[32..40].try_into().unwrap()) as usize;
    let phnum = u16::from_le_bytes(d[56..58].try_into().unwrap()) as usize;
    // The last PT_LOAD maps the marker; move its address down by 0x100.
    let last = (0..phnum)
        .rev()
        .find(|i| d[phoff + i * 56..phoff + i * 56 + 4] == [1, 0, 0, 0])
        .unwrap();
    let at = phoff + last * 56 + 16;
    let v = u64::from_le_bytes(d[at..at + 8].try_into().unwrap());
    d[at..at + 8].copy_from_slice(&(v - 0x100).to_le_bytes());
    std::fs::write(&lib, &d).unwrap();
    let o = kpack(&["verify", root.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let text = stdout(&o);
    assert!(text.contains("lib/librdc.so: wrapper #0"), "{text}");
    assert!(text.contains("no marker at"), "{text}");
}

/// Executables are never larger than the fat binaries they replace (no EL8 padding),
/// and keep their program headers where EL8 kernels look.
#[test]
fn host_only_executables_are_smaller_than_their_fat_input() {
    let tmp = tempfile::tempdir().unwrap();
    for (tree, exes) in [
        (demo(), vec!["bin/vadd_app", "bin/legacy_app"]),
        (
            fixtures().parent().unwrap().to_path_buf(),
            vec!["bin/app_pie", "bin/app_nopie"],
        ),
    ] {
        let out = tmp.path().join(tree.file_name().unwrap());
        let o = pack_rocm(&tree, &out, &["--all"]);
        assert!(o.status.success(), "{}", stderr(&o));
        for e in exes {
            let fat = std::fs::metadata(tree.join(e)).unwrap().len();
            let thin = std::fs::read(out.join(e)).unwrap();
            assert!(
                (thin.len() as u64) < fat,
                "{e}: {fat} -> {} bytes",
                thin.len()
            );
            let phoff = u64::from_le_bytes(thin[32..40].try_into().unwrap());
            assert_eq!(
                phoff, 64,
                "{e}: the program headers stay after the ELF header"
            );
        }
        let o = kpack(&["normalize", "--check", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    }
}

/// docs/packaging.md's pipelines, run as written on a copy of the demo tree (as
/// `build/install`): each exits 0, ends with `verify` saying sound, and every kernel
/// of what it ships loads byte-exact in a live process.
#[test]
fn the_packaging_guide_runs_as_written() {
    if ["strip", "eu-strip", "patchelf"]
        .iter()
        .any(|t| tool(t).is_none())
    {
        return;
    }
    let Some(stub) = stub() else { return };
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/packaging.md"))
            .unwrap();
    let original = fat_code_objects(&demo());
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_kpack-tui")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for (heading, shipped) in [
        ("### Debian", "debian/pkg"),
        ("### RPM", "buildroot"),
        ("### Wheels and conda", "stage"),
    ] {
        let after = &page[page.find(heading).unwrap_or_else(|| panic!("{heading}"))..];
        let start = after.find("```sh\n").unwrap() + 6;
        let script = &after[start..start + after[start..].find("```").unwrap()];
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("build")).unwrap();
        run(
            &[
                "cp",
                "-a",
                demo().to_str().unwrap(),
                tmp.path().join("build/install").to_str().unwrap(),
            ],
            tmp.path(),
        );
        let o = Command::new("bash")
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(tmp.path())
            .env("PATH", &path)
            .env("KPACK_NO_TUI", "1")
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{heading}: {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            out.lines()
                .last()
                .is_some_and(|l| l.starts_with(&format!("{shipped}: sound"))),
            "{heading}: {out}"
        );
        let n = load_live(&stub, &tmp.path().join(shipped), &original, heading);
        assert!(n >= 16, "{heading}: {n}");
        ran += 1;
    }
    assert_eq!(ran, 3);
}

/// `chrpath -r` rewrites an RPATH or RUNPATH the linker wrote (in place, never longer): a
/// library and an executable are built here with hipcc and `-Wl,-rpath`, packed,
/// given a shorter RPATH by chrpath, and every kernel still loads in a live process.
#[test]
fn chrpath_keeps_a_packed_binary_loadable() {
    if ["hipcc", "chrpath", "c++", "eu-elflint"]
        .iter()
        .any(|t| tool(t).is_none())
    {
        return;
    }
    let Some(stub) = stub() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let src = fixtures().parent().unwrap().join("src");
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    std::fs::create_dir_all(tree.join("bin")).unwrap();
    let hip = |args: &[&str]| {
        let o = Command::new("hipcc")
            .args(["-O2", "-g0", "-fPIC", "-Wl,--build-id=none"])
            .args(args)
            .current_dir(tmp.path())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "hipcc {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let s = |f: &str| src.join(f).to_str().unwrap().to_string();
    hip(&[
        "-c",
        "--offload-arch=gfx906",
        &s("vadd.hip"),
        "-o",
        "vadd.o",
    ]);
    hip(&[
        "-c",
        "--offload-arch=gfx906",
        &s("saxpy.hip"),
        "-o",
        "saxpy.o",
    ]);
    let o = Command::new("c++")
        .args(["-O2", "-g0", "-fPIC", "-c", &s("main.cpp"), "-o", "main.o"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(o.status.success());
    let lib = tree.join("lib/librpath.so");
    let exe = tree.join("bin/app_rpath");
    hip(&[
        "-shared",
        "vadd.o",
        "-Wl,-rpath,/opt/rocm/lib64",
        "-o",
        lib.to_str().unwrap(),
    ]);
    hip(&[
        "-pie",
        "main.o",
        "vadd.o",
        "saxpy.o",
        "-Wl,-rpath,/opt/rocm/lib64",
        "-o",
        exe.to_str().unwrap(),
    ]);
    let original = fat_code_objects(&tree);
    assert!(original.len() >= 3, "{original:?}");
    let packed = tmp.path().join("packed");
    let o = pack_rocm(&tree, &packed, &["--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let fat = tmp.path().join("fat");
    run(
        &["cp", "-a", tree.to_str().unwrap(), fat.to_str().unwrap()],
        tmp.path(),
    );
    for p in ["lib/librpath.so", "bin/app_rpath"] {
        for root in [&packed, &fat] {
            let o = Command::new("chrpath")
                .args(["-r", "/opt/amd/lib"])
                .arg(root.join(p))
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "chrpath {p}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        let o = Command::new("chrpath")
            .arg("-l")
            .arg(packed.join(p))
            .output()
            .unwrap();
        assert!(stdout(&o).contains("PATH=/opt/amd/lib"), "{}", stdout(&o));
        let (ours, theirs) = (elflint(&packed.join(p)), elflint(&fat.join(p)));
        let new: Vec<&String> = ours.iter().filter(|l| !theirs.contains(*l)).collect();
        assert!(new.is_empty(), "chrpath: eu-elflint on {p}: {new:?}");
    }
    let o = kpack(&["verify", packed.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stdout(&o));
    assert_eq!(
        load_live(&stub, &packed, &original, "chrpath -r"),
        original.len()
    );
}
