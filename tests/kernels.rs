//! The code-object reader against LLVM's tools on every code object of the real
//! fixtures (hipcc and clang-19 builds, plain and compressed bundles): metadata
//! fields against `llvm-readelf-19 --notes`, code sizes against `llvm-nm-19
//! --print-size`, demangled names against `llvm-cxxfilt-19`; code objects unbundled
//! by `clang-offload-bundler-19`.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Per kernel name, the scalar fields of the `amdhsa.kernels` list in the YAML that
/// `llvm-readelf --notes` prints (keys at the kernel's own indentation only).
fn readelf_kernels(co: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    let o = Command::new("llvm-readelf-19")
        .arg("--notes")
        .arg(co)
        .output()
        .unwrap();
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    let mut out = BTreeMap::new();
    let mut cur: Option<BTreeMap<String, String>> = None;
    let mut in_kernels = false;
    let mut flush = |cur: &mut Option<BTreeMap<String, String>>| {
        if let Some(k) = cur.take() {
            out.insert(k[".name"].clone(), k);
        }
    };
    for line in text.lines() {
        if line.starts_with("amdhsa.kernels:") {
            in_kernels = true;
            continue;
        }
        if !in_kernels {
            continue;
        }
        if !line.starts_with(' ') {
            in_kernels = false;
            flush(&mut cur);
            continue;
        }
        let field = if let Some(rest) = line.strip_prefix("  - ") {
            flush(&mut cur);
            cur = Some(BTreeMap::new());
            rest
        } else if let Some(rest) = line.strip_prefix("    ") {
            if rest.starts_with(' ') || rest.starts_with('-') {
                continue; // nested (.args, .language_version)
            }
            rest
        } else {
            continue;
        };
        if let Some((k, v)) = field.split_once(':') {
            let v = v.trim().trim_matches('\'').to_string();
            if !v.is_empty() {
                cur.as_mut().unwrap().insert(k.to_string(), v);
            }
        }
    }
    flush(&mut cur);
    out
}

fn nm_sizes(co: &Path) -> BTreeMap<String, u64> {
    let o = Command::new("llvm-nm-19")
        .arg("--print-size")
        .arg(co)
        .output()
        .unwrap();
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && (f[2] == "T" || f[2] == "t"))
                .then(|| (f[3].to_string(), u64::from_str_radix(f[1], 16).unwrap()))
        })
        .collect()
}

fn cxxfilt(name: &str) -> String {
    let o = Command::new("llvm-cxxfilt-19").arg(name).output().unwrap();
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

/// Unbundle every device code object of a fat binary with the real bundler.
fn unbundle(bin: &Path, dir: &Path) -> Vec<(String, std::path::PathBuf)> {
    let fb = dir.join("fatbin");
    if std::fs::read(bin)
        .unwrap()
        .starts_with(b"__CLANG_OFFLOAD_BUNDLE__")
    {
        std::fs::copy(bin, &fb).unwrap();
    } else {
        assert!(
            Command::new("objcopy")
                .args(["-O", "binary", "--only-section=.hip_fatbin"])
                .arg(bin)
                .arg(&fb)
                .status()
                .unwrap()
                .success()
        );
    }
    let o = Command::new("clang-offload-bundler-19")
        .args(["-list", "-type=o"])
        .arg(format!("-input={}", fb.display()))
        .output()
        .unwrap();
    let mut out = Vec::new();
    for t in String::from_utf8(o.stdout).unwrap().lines() {
        let Some((_, arch)) = t.split_once("--") else {
            continue;
        };
        if t.starts_with("host") || arch.is_empty() {
            continue;
        }
        let co = dir.join(format!("{}.co", arch.replace(':', "_")));
        let s = Command::new("clang-offload-bundler-19")
            .args(["-unbundle", "-type=o"])
            .arg(format!("-input={}", fb.display()))
            .arg(format!("-targets={t}"))
            .arg(format!("-output={}", co.display()))
            .status()
            .unwrap();
        assert!(s.success());
        out.push((arch.to_string(), co));
    }
    out
}

#[test]
fn metadata_sizes_and_names_match_llvm_on_every_fixture_code_object() {
    for t in [
        "llvm-readelf-19",
        "llvm-nm-19",
        "llvm-cxxfilt-19",
        "clang-offload-bundler-19",
        "objcopy",
    ] {
        if tool(t).is_none() {
            return;
        }
    }
    let mut checked = 0;
    let mut spilled = false;
    let mut lds = false;
    let mut versions = std::collections::BTreeSet::new();
    for bin in [
        "libkernels.so",
        "libkernels_z.so",
        "libvadd.so",
        "libzkern.so",
        "app_pie",
        "v6-gfx1030.hipfb",
    ] {
        let dir = tempfile::tempdir().unwrap();
        for (arch, co) in unbundle(&fixtures().join(bin), dir.path()) {
            let data = std::fs::read(&co).unwrap();
            let info = kpack::codeobj::read(&data).unwrap();
            versions.extend(info.version);
            assert_eq!(info.target.as_deref(), Some(arch.as_str()), "{bin} {arch}");
            let want = readelf_kernels(&co);
            let sizes = nm_sizes(&co);
            assert_eq!(info.kernels.len(), want.len(), "{bin} {arch}");
            for k in &info.kernels {
                let w = &want[&k.name];
                let field = |f: &str, got: Option<u64>| {
                    assert_eq!(
                        got.map(|v| v.to_string()),
                        w.get(f).cloned(),
                        "{bin} {arch} {} {f}",
                        k.name
                    );
                };
                field(".vgpr_count", k.vgpr);
                field(".sgpr_count", k.sgpr);
                field(".agpr_count", k.agpr);
                field(".vgpr_spill_count", k.vgpr_spills);
                field(".sgpr_spill_count", k.sgpr_spills);
                field(".group_segment_fixed_size", k.lds);
                field(".private_segment_fixed_size", k.scratch);
                field(".kernarg_segment_size", k.kernarg_size);
                field(".wavefront_size", k.wavefront_size);
                field(".max_flat_workgroup_size", k.max_flat_workgroup_size);
                assert_eq!(k.symbol.as_deref(), w.get(".symbol").map(String::as_str));
                assert_eq!(
                    k.code_size,
                    sizes.get(&k.name).copied(),
                    "{bin} {arch} {}",
                    k.name
                );
                assert_eq!(k.display_name(), cxxfilt(&k.name), "{bin} {}", k.name);
                spilled |= k.vgpr_spills.unwrap_or(0) > 0;
                lds |= k.lds.unwrap_or(0) > 0;
                checked += 1;
            }
        }
    }
    assert!(checked >= 26, "{checked}");
    assert_eq!(
        versions.into_iter().collect::<Vec<_>>(),
        [4, 5, 6],
        "code-object versions 4 (hipcc), 5 (clang 19), 6 (clang 19, -mcode-object-version=6)"
    );
    assert!(
        spilled && lds,
        "the fixtures hold a spilling kernel and an LDS kernel"
    );
}

#[test]
fn kernels_and_find_kernel_on_trees_archives_and_host_only_binaries() {
    let fx = fixtures();
    let o = kpack(&[
        "kernels",
        fx.join("libkernels.so").to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["schema"], "kpack-tui.kernels/1");
    assert_eq!(j["kernels"].as_array().unwrap().len(), 10);
    // Sorted by code size, largest first; spills shown.
    let first = &j["kernels"][0];
    assert_eq!(first["name"], "_Z11spill_heavyPKfPf");
    assert!(first["vgpr_spills"].as_u64().unwrap() > 0);

    // Packed: the archives hold the same kernels, and a host-only binary given
    // alone follows its marker to them.
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    std::fs::copy(fx.join("libkernels_z.so"), tree.join("lib/libk.so")).unwrap();
    let out = tmp.path().join("packed");
    let o = pack_rocm(&tree, &out, &["--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let count = |p: &Path, extra: &[&str]| -> usize {
        let o = kpack(&[&["kernels", p.to_str().unwrap(), "--json"][..], extra].concat());
        assert!(o.status.success(), "{}", stderr(&o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        j["kernels"].as_array().unwrap().len()
    };
    assert_eq!(count(&tree, &[]), 10);
    assert_eq!(count(&out, &[]), 10, "read from the archives");
    assert_eq!(
        count(&out.join("lib/libk.so"), &[]),
        10,
        "through the marker"
    );
    assert_eq!(
        count(&out, &["--target", "gfx90a"]),
        5,
        "a processor takes its variants"
    );
    assert_eq!(count(&out, &["--target", "gfx1030"]), 5);

    let o = kpack(&["find-kernel", "scale<double>", fx.to_str().unwrap()]);
    assert!(o.status.success());
    let text = stdout(&o);
    assert!(text.contains("4 kernels matching"), "{text}");
    assert!(
        text.contains("libkernels.so#0") && text.contains("libkernels_z.so#0"),
        "{text}"
    );
    let o = kpack(&[
        "find-kernel",
        "^_Z8tile",
        fx.to_str().unwrap(),
        "--regex",
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["kernels"].as_array().unwrap().len(), 4);
    let o = kpack(&["find-kernel", "no_such_kernel", fx.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let o = kpack(&["find-kernel", "(", fx.to_str().unwrap(), "--regex"]);
    assert_eq!(o.status.code(), Some(2));

    // CSV: a header and one quoted row per kernel.
    let o = kpack(&[
        "kernels",
        fx.join("libkernels.so").to_str().unwrap(),
        "--csv",
    ]);
    let csv = stdout(&o);
    assert!(csv.starts_with("path,key,bundle,target,"));
    assert_eq!(csv.lines().count(), 11);
    assert!(
        csv.contains("\"void scale<float>(float*, float, int)\""),
        "{csv}"
    );
}

#[test]
fn extract_from_fat_binaries_is_byte_identical_to_the_bundler() {
    if tool("clang-offload-bundler-19").is_none() || tool("objcopy").is_none() {
        return;
    }
    let mut n = 0;
    for bin in [
        "libkernels.so",
        "libkernels_z.so",
        "libvadd.so",
        "libzkern.so",
        "app_pie",
        "app_nopie",
        "librdc.so",
    ] {
        let dir = tempfile::tempdir().unwrap();
        for (arch, co) in unbundle(&fixtures().join(bin), dir.path()) {
            let ours = dir.path().join("ours.co");
            let o = kpack(&[
                "extract",
                fixtures().join(bin).to_str().unwrap(),
                "--target",
                &arch,
                "-o",
                ours.to_str().unwrap(),
            ]);
            assert!(o.status.success(), "{bin} {arch}: {}", stderr(&o));
            assert!(
                std::fs::read(&ours).unwrap() == std::fs::read(&co).unwrap(),
                "{bin} {arch}: differs from clang-offload-bundler-19 --unbundle"
            );
            n += 1;
        }
    }
    // libzkern.so holds two CCOB bundles in one section, which the bundler cannot
    // list (it reads the section as one compressed bundle): 6 binaries x 2 targets.
    assert!(n >= 12, "{n}");
    // --all: every bundle; a wrong target names what there is.
    let tmp = tempfile::tempdir().unwrap();
    let o = kpack(&[
        "extract",
        fixtures().join("app_pie").to_str().unwrap(),
        "--all",
        "-o",
        tmp.path().to_str().unwrap(),
    ]);
    assert!(o.status.success());
    for (b, t) in [(0, "gfx900"), (0, "gfx906"), (1, "gfx900"), (1, "gfx906")] {
        assert!(tmp.path().join(format!("app_pie#{b}/{t}.hsaco")).is_file());
    }
    let o = kpack(&[
        "extract",
        fixtures().join("app_pie").to_str().unwrap(),
        "--target",
        "gfx1100",
        "-o",
        tmp.path().join("x").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--bundle 1: gfx900 gfx906"),
        "{}",
        stderr(&o)
    );
    let o = kpack(&[
        "extract",
        fixtures().join("hostonly").to_str().unwrap(),
        "--target",
        "gfx900",
        "-o",
        tmp.path().join("x").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!tmp.path().join("x").exists());
}

#[test]
fn the_cache_gives_what_a_fresh_read_gives() {
    let fx = fixtures();
    let fresh = kpack::kernels::list_kernels(&fx, &Default::default()).unwrap();
    let opts = kpack::kernels::KernelsOptions {
        cache: true,
        ..Default::default()
    };
    let first = kpack::kernels::list_kernels(&fx, &opts).unwrap();
    let again = kpack::kernels::list_kernels(&fx.join("libkernels.so"), &opts).unwrap();
    assert_eq!(first.kernels, fresh.kernels);
    assert_eq!(
        again.kernels.iter().map(|k| &k.kernel).collect::<Vec<_>>(),
        fresh
            .kernels
            .iter()
            .filter(|k| k.path == "libkernels.so")
            .map(|k| &k.kernel)
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_wheel_is_read_member_by_member_and_other_zips_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let whl = tmp.path().join("t-1.0-py3-none-any.whl");
    std::fs::write(&whl, b"PK\x03\x04 not a zip really").unwrap();
    let o = kpack(&["kernels", whl.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a zip archive"), "{}", stderr(&o));
    let o = kpack(&["diff", whl.to_str().unwrap(), whl.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a zip archive"), "{}", stderr(&o));
    // A zip not named .whl is refused, not read as 0 kernels.
    let zip = tmp.path().join("t.zip");
    std::fs::write(&zip, b"PK\x03\x04 some zip").unwrap();
    for args in [
        vec!["kernels", zip.to_str().unwrap()],
        vec!["diff", zip.to_str().unwrap(), zip.to_str().unwrap()],
    ] {
        let o = kpack(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains("not read as a wheel"), "{}", stderr(&o));
    }
    // A real wheel: the kernels of its members are those of the fixture files.
    let Some(whl) = fixture_wheel(tmp.path()) else {
        return;
    };
    let rows = |p: &Path| -> Vec<(String, String, String)> {
        let o = kpack(&["kernels", p.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut r: Vec<_> = v["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| {
                let path = k["path"].as_str().unwrap();
                let file = path.rsplit('/').next().unwrap().to_string();
                (
                    file,
                    k["target"].as_str().unwrap().to_string(),
                    k["name"].to_string(),
                )
            })
            .filter(|(f, ..)| f == "libkernels.so" || f == "libkernels_z.so")
            .collect();
        r.sort();
        r
    };
    let from_wheel = rows(&whl);
    assert!(from_wheel.len() >= 10, "{from_wheel:?}");
    assert_eq!(from_wheel, rows(&fixtures()));
}

/// Compressed bundles are decoded in a second pass, largest first, by whichever
/// worker is idle: the rows must not depend on that. The fixtures directory holds
/// plain, multi-bundle (-fgpu-rdc, several TUs) and CCOB binaries side by side.
#[test]
fn kernels_output_does_not_depend_on_the_thread_count() {
    let dir = fixtures();
    let dir = dir.to_str().unwrap();
    let run = |j: &str| {
        let o = kpack(&["kernels", dir, "--json", "-j", j]);
        assert!(
            o.status.success() || o.status.code() == Some(1),
            "{}",
            stderr(&o)
        );
        o.stdout
    };
    let one = run("1");
    let v: serde_json::Value = serde_json::from_slice(&one).unwrap();
    // The compressed fixtures are in it (so the second pass ran).
    let kernels = v["kernels"].as_array().unwrap();
    assert!(
        kernels.iter().any(|k| k["path"] == "libzkern.so")
            && kernels.iter().any(|k| k["path"] == "libkernels_z.so"),
        "no kernels of the CCOB fixtures"
    );
    for j in ["2", "4", "7"] {
        assert!(run(j) == one, "-j {j} differs from -j 1");
    }
}

/// #29 item 3: a static archive's kernels are its members' kernels. Expected from the
/// input: the members `ar x` writes, each unbundled by clang-offload-bundler, each
/// code object's kernels as llvm-readelf lists them.
#[test]
fn a_static_archive_lists_the_kernels_of_its_members() {
    let lib = demo().join("lib/libkern.a");
    let o = kpack(&["kernels", lib.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let got = kernel_rows(&j);
    assert!(!got.is_empty(), "no kernels in {}", lib.display());
    if tool("ar").is_none()
        || tool("clang-offload-bundler-19").is_none()
        || tool("llvm-readelf-19").is_none()
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let members = tmp.path().join("members");
    std::fs::create_dir(&members).unwrap();
    let s = Command::new("ar")
        .arg("x")
        .arg(&lib)
        .current_dir(&members)
        .status()
        .unwrap();
    assert!(s.success());
    let listed = Command::new("ar").arg("t").arg(&lib).output().unwrap();
    let mut want = Vec::new();
    for m in String::from_utf8(listed.stdout).unwrap().lines() {
        let dir = tmp.path().join(format!("{m}.d"));
        std::fs::create_dir(&dir).unwrap();
        for (arch, co) in unbundle(&members.join(m), &dir) {
            for name in readelf_kernels(&co).keys() {
                want.push((format!("libkern.a({m})"), arch.clone(), name.clone()));
            }
        }
    }
    want.sort();
    assert_eq!(got, want);
    // find-kernel finds them there, named as binutils names members.
    let o = kpack(&["find-kernel", "saxpy", demo().to_str().unwrap()]);
    assert!(
        stdout(&o).contains("lib/libkern.a(saxpy_b.o)#0"),
        "{}",
        stdout(&o)
    );
}

fn json_of(args: &[&str]) -> serde_json::Value {
    let o = kpack(&[args, &["--json"]].concat());
    assert!(!o.stdout.is_empty(), "{args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// #29: a thin archive (`ar rcT`) stores only the names of its members, relative to
/// its directory. Given alone, `kernels` reads the files they name, equal to what the
/// bundler and llvm-readelf find in them; in a tree, the members are files of the tree,
/// counted and listed once, under their own paths; members it cannot reach are said.
#[test]
fn a_thin_archive_lists_the_kernels_of_the_files_it_names() {
    for t in ["ar", "clang-offload-bundler-19", "llvm-readelf-19"] {
        assert!(tool(t).is_some(), "{t} is needed (.ci/run installs it)");
    }
    let tmp = tempfile::tempdir().unwrap();
    let (obj, lib) = (tmp.path().join("obj"), tmp.path().join("lib"));
    std::fs::create_dir(&obj).unwrap();
    std::fs::create_dir(&lib).unwrap();
    let run = |dir: &Path, args: &[&str]| {
        let o = Command::new("ar")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "ar {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    run(&obj, &["x", demo().join("lib/libkern.a").to_str().unwrap()]);
    run(
        &lib,
        &["rcT", "libthin.a", "../obj/saxpy_b.o", "../obj/vadd_b.o"],
    );
    let thin = lib.join("libthin.a");
    assert!(std::fs::read(&thin).unwrap().starts_with(b"!<thin>\n"));
    // Alone: every member's kernels, as the tools see the files `ar t` names.
    validate_json("scan", &json_of(&["scan", thin.to_str().unwrap()]));
    let got = kernel_rows(&json_of(&["kernels", thin.to_str().unwrap()]));
    let mut want = Vec::new();
    let work = tempfile::tempdir().unwrap();
    for m in run(&lib, &["t", "libthin.a"]).lines() {
        let dir = work.path().join(format!("{}.d", want.len()));
        std::fs::create_dir(&dir).unwrap();
        for (arch, co) in unbundle(&lib.join(m), &dir) {
            for name in readelf_kernels(&co).keys() {
                want.push((format!("libthin.a({m})"), arch.clone(), name.clone()));
            }
        }
    }
    want.sort();
    assert!(!want.is_empty());
    assert_eq!(got, want);
    // In a tree: the archive lists its members as the tree's files, the totals and the
    // kernels are the objects' own, once.
    let tree = json_of(&["scan", tmp.path().to_str().unwrap()]);
    validate_json("scan", &tree);
    let objs = json_of(&["scan", obj.to_str().unwrap()]);
    assert_eq!(tree["arch_totals"], objs["arch_totals"]);
    let f = tree["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "lib/libthin.a")
        .unwrap();
    assert_eq!(f["kind"], "fat_binary", "{f}");
    let files: Vec<&str> = f["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["file"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["obj/saxpy_b.o", "obj/vadd_b.o"]);
    let in_tree = kernel_rows(&json_of(&["kernels", tmp.path().to_str().unwrap()]));
    let of_objs = kernel_rows(&json_of(&["kernels", obj.to_str().unwrap()]));
    assert_eq!(in_tree.len(), of_objs.len(), "{in_tree:?}");
    // The directory of the archive alone: its members lie outside, said, not read.
    let o = kpack(&["scan", lib.to_str().unwrap(), "--no-tui"]);
    assert!(
        stdout(&o).contains("thin archive members outside the scanned directory not read"),
        "{}",
        stdout(&o)
    );
    // A member gone: named.
    std::fs::remove_file(obj.join("vadd_b.o")).unwrap();
    let o = kpack(&["scan", tmp.path().to_str().unwrap(), "--no-tui"]);
    assert!(
        stdout(&o)
            .contains("thin archive member \"../obj/vadd_b.o\": names a file that is not there"),
        "{}",
        stdout(&o)
    );
}

/// #29 item 2: a host-only binary whose section-header table sits at an odd offset
/// (as the reference transform writes them) is read like any other: readelf accepts
/// it, and so does kpack-tui, in scan and in kernels (through its marker).
#[test]
fn a_section_header_table_at_an_odd_offset_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let packed = tmp.path().join("packed");
    let o = pack_rocm(&demo(), &packed, &["--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lib = packed.join("lib/librdc.so");
    let before = stdout(&kpack(&["kernels", lib.to_str().unwrap(), "--json"]));
    let mut d = std::fs::read(&lib).unwrap();
    let shoff = u64::from_le_bytes(d[0x28..0x30].try_into().unwrap()) as usize;
    let shnum = u16::from_le_bytes(d[0x3c..0x3e].try_into().unwrap()) as usize;
    let table = d[shoff..shoff + shnum * 64].to_vec();
    d.push(0);
    let odd = d.len();
    assert!(odd % 2 == 1);
    d.extend_from_slice(&table);
    d[0x28..0x30].copy_from_slice(&(odd as u64).to_le_bytes());
    std::fs::write(&lib, &d).unwrap();
    if let Some(readelf) = tool("readelf") {
        let o = Command::new(readelf).arg("-S").arg(&lib).output().unwrap();
        assert!(o.status.success() && o.stderr.is_empty(), "{}", stderr(&o));
        assert!(stdout(&o).contains(&format!("starting at offset {odd:#x}")));
    }
    let o = kpack(&[lib.to_str().unwrap(), "--no-tui", "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["files"][0]["kind"], "host_only_binary", "{j}");
    assert!(j["diagnostics"].as_array().unwrap().is_empty(), "{j}");
    let after = stdout(&kpack(&["kernels", lib.to_str().unwrap(), "--json"]));
    assert_eq!(before, after);
    assert!(before.contains("\"kernels\""));
    // Alone, away from its archives: said, not a silent "0 kernels".
    let alone = tmp.path().join("librdc.so");
    std::fs::copy(&lib, &alone).unwrap();
    let o = kpack(&["kernels", alone.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("marker reaches no archive here"),
        "{}",
        stderr(&o)
    );
}

/// The TUI's `x` on marked kernels (#30): `extract_code_objects` writes each chosen
/// code object to `<binary>#<bundle>/<target>.hsaco`, byte for byte what
/// clang-offload-bundler unbundles; from the packed tree (the code now in `.kpack`
/// archives) it writes the same files with the same bytes; a chosen code object the
/// tree does not hold writes nothing.
#[test]
fn chosen_code_objects_are_extracted_as_the_bundler_sees_them_from_fat_and_packed_trees() {
    use kpack::kernels::{CodeObjectRef, extract_code_objects, list_kernels};
    if tool("clang-offload-bundler-19").is_none() || tool("objcopy").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = copy_demo(tmp.path());
    let packed = tmp.path().join("packed");
    let o = pack_rocm(&tree, &packed, &["--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ids = |root: &Path, binary: &str| -> std::collections::BTreeSet<CodeObjectRef> {
        let r = list_kernels(root, &Default::default()).unwrap();
        r.objects
            .iter()
            .map(|o| o.id())
            .filter(|i| i.binary == binary)
            .collect()
    };
    let files = |d: &Path| -> BTreeMap<String, Vec<u8>> {
        walkdir::WalkDir::new(d)
            .into_iter()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_file())
            .map(|e| {
                let rel = e.path().strip_prefix(d).unwrap().display().to_string();
                (rel, std::fs::read(e.path()).unwrap())
            })
            .collect()
    };
    let bin = "lib/libvadd.so.1.0";
    let (fat_ids, packed_ids) = (ids(&tree, bin), ids(&packed, bin));
    assert_eq!(fat_ids.len(), 2, "{fat_ids:?}");
    assert!(
        packed_ids.iter().all(|i| i.path.starts_with(".kpack/")),
        "{packed_ids:?}"
    );
    let (a, b) = (tmp.path().join("from-fat"), tmp.path().join("from-packed"));
    assert_eq!(extract_code_objects(&tree, &fat_ids, &a).unwrap(), 2);
    assert_eq!(extract_code_objects(&packed, &packed_ids, &b).unwrap(), 2);
    let (fa, fb) = (files(&a), files(&b));
    assert_eq!(fa, fb, "the same files from the fat and the packed tree");
    let dir = tempfile::tempdir().unwrap();
    let seen = unbundle(&tree.join(bin), dir.path());
    assert_eq!(seen.len(), 2);
    for (arch, co) in seen {
        let ours = fa
            .get(&format!("{bin}#0/{arch}.hsaco"))
            .unwrap_or_else(|| panic!("{arch}: {:?}", fa.keys()));
        assert!(
            *ours == std::fs::read(&co).unwrap(),
            "{arch}: differs from clang-offload-bundler-19 --unbundle"
        );
    }
    // Something the tree does not hold (a target it has no code for): refused,
    // nothing written.
    let mut gone = fat_ids.clone();
    let mut extra = gone.iter().next().unwrap().clone();
    extra.target = "gfx1100".into();
    gone.insert(extra);
    let c = tmp.path().join("none");
    let e = extract_code_objects(&tree, &gone, &c)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not found") && e.contains("gfx1100"), "{e}");
    assert!(!c.exists());
}

/// `kernels` writes its rows out as it reads them and reads them back in order (a
/// tree of any size is listed in the same memory): for every sort, in JSON, the
/// document equals the whole report the library lists, sorted. The demo tree holds
/// archives, host-only binaries, a static archive, embedded code objects and
/// kernel databases besides the fixtures' plain, multi-bundle and CCOB binaries.
#[test]
fn the_streamed_listing_is_the_whole_report_for_every_sort() {
    use kpack::kernels::{SortBy, list_kernels, sort_rows};
    let sorts = [
        ("size", SortBy::Size),
        ("vgpr", SortBy::Vgpr),
        ("sgpr", SortBy::Sgpr),
        ("lds", SortBy::Lds),
        ("scratch", SortBy::Scratch),
        ("spills", SortBy::Spills),
        ("name", SortBy::Name),
        ("target", SortBy::Target),
    ];
    for root in [fixtures(), demo()] {
        let whole = list_kernels(&root, &Default::default()).unwrap();
        assert!(whole.kernels.len() >= 10, "{}", root.display());
        // The summary the text listing prints is counted as the rows are spooled.
        let spooled =
            kpack::kernels::list_kernels_spooled(&root, &Default::default(), SortBy::Size).unwrap();
        let k = whole.kernels.iter().map(|r| &r.kernel);
        assert_eq!(
            (
                spooled.len(),
                spooled.code_objects,
                spooled.code_bytes,
                spooled.spilling
            ),
            (
                whole.kernels.len(),
                whole.code_objects,
                k.clone().filter_map(|k| k.code_size).sum::<u64>(),
                k.filter(|k| k.spills().unwrap_or(0) > 0).count() as u64
            ),
            "{}",
            root.display()
        );
        for (arg, by) in sorts {
            let mut want = whole.clone();
            sort_rows(&mut want.kernels, by);
            let mut want = serde_json::to_value(&want).unwrap();
            want.as_object_mut()
                .unwrap()
                .insert("schema".into(), "kpack-tui.kernels/1".into());
            let o = kpack(&["kernels", root.to_str().unwrap(), "--json", "--sort", arg]);
            assert!(o.status.code().is_some_and(|c| c <= 1), "{}", stderr(&o));
            let got: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert!(
                got == want,
                "{} --sort {arg}: the streamed rows differ",
                root.display()
            );
        }
    }
}
