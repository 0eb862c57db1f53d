//! #29 item 1: device code embedded outside `.hip_fatbin` (a code object in .rodata,
//! a bundle in a section of its own, loaded with hipModuleLoadData: the fixture
//! `libembed.so` and its static archive, scripts/make-embedded.sh). Expected values
//! come from the input: the symbols the assembler put around each blob (nm and
//! readelf), llvm-readelf's notes of each code object, clang-offload-bundler's
//! listing of the bundle.

mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

fn run(cmd: &str, args: &[&str]) -> String {
    let o = Command::new(cmd).args(args).output().unwrap();
    assert!(o.status.success(), "{cmd} {args:?}: {}", stderr(&o));
    stdout(&o)
}

/// File offset and size of each blob, from its start and end symbols.
fn blobs(lib: &Path) -> BTreeMap<String, (u64, u64)> {
    let lib = lib.to_str().unwrap();
    // section name -> (addr, offset)
    let mut sections = Vec::new();
    for l in run("readelf", &["-S", "-W", lib]).lines() {
        let Some(rest) = l.split_once(']').map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 4 && f[1] == "PROGBITS" {
            let addr = u64::from_str_radix(f[2], 16).unwrap();
            let off = u64::from_str_radix(f[3], 16).unwrap();
            let size = u64::from_str_radix(f[4], 16).unwrap();
            sections.push((addr, off, size));
        }
    }
    let mut sym = BTreeMap::new();
    for l in run("nm", &[lib]).lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 3 && f[2].starts_with("embed_") && f[2] != "embed_load_all" {
            sym.insert(f[2].to_string(), u64::from_str_radix(f[0], 16).unwrap());
        }
    }
    let file_off = |a: u64| {
        let (sa, so, _) = sections
            .iter()
            .find(|(sa, _, sz)| a >= *sa && a < sa + sz)
            .unwrap();
        a - sa + so
    };
    let mut out = BTreeMap::new();
    for name in ["embed_co_vadd", "embed_bundle"] {
        let (a, b) = (sym[name], sym[&format!("{name}_end")]);
        out.insert(name.to_string(), (file_off(a), b - a));
    }
    out
}

fn note_kernels(co: &Path) -> BTreeSet<String> {
    run("llvm-readelf-19", &["--notes", co.to_str().unwrap()])
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix(".name:")
                .map(|n| n.trim().to_string())
        })
        .collect()
}

#[test]
fn embedded_code_objects_and_bundles_are_found_where_the_symbols_say() {
    let lib = fixtures().join("libembed.so");
    let o = kpack(&[lib.to_str().unwrap(), "--no-tui", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = &j["files"][0];
    assert_eq!(f["kind"], "embedded_code");
    let emb = f["embedded"].as_array().unwrap();
    assert_eq!(emb.len(), 2, "{f}");
    if tool("nm").is_none() || tool("readelf").is_none() {
        return;
    }
    let b = blobs(&lib);
    let (co_off, co_size) = b["embed_co_vadd"];
    assert_eq!(emb[0]["section"], ".rodata");
    assert_eq!(emb[0]["format"], "code_object");
    assert_eq!(emb[0]["offset"], co_off);
    assert_eq!(emb[0]["stored_size"], co_size);
    let (b_off, b_size) = b["embed_bundle"];
    assert_eq!(emb[1]["section"], ".aot_kernels");
    assert_eq!(emb[1]["format"], "bundle");
    assert_eq!(emb[1]["offset"], b_off);
    // The bundle's own size: its table's extent, within the blob (padding after).
    let size = emb[1]["stored_size"].as_u64().unwrap();
    assert!(size <= b_size && size + 16 > b_size, "{size} vs {b_size}");
    // The per-target totals count them as embedded, not as packable code.
    let t = &j["arch_totals"];
    assert_eq!(t["gfx90a:xnack+"]["raw"], 0);
    assert_eq!(t["gfx90a:xnack+"]["embedded_code_objects"], 2);
    validate_json("scan", &j);

    // Their kernels: llvm-readelf's notes of the bytes at the symbols, and of the
    // code objects clang-offload-bundler unbundles from the bundle.
    let (Some(_), Some(bundler)) = (tool("llvm-readelf-19"), tool("clang-offload-bundler-19"))
    else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let data = std::fs::read(&lib).unwrap();
    let co = tmp.path().join("co");
    std::fs::write(&co, &data[co_off as usize..(co_off + co_size) as usize]).unwrap();
    let flags = run("llvm-readelf-19", &["-h", co.to_str().unwrap()]);
    assert!(flags.contains("gfx90a, xnack+"), "{flags}");
    assert_eq!(emb[0]["targets"][0]["arch"], "gfx90a:xnack+");
    let bun = tmp.path().join("bundle");
    std::fs::write(&bun, &data[b_off as usize..(b_off + b_size) as usize]).unwrap();
    let listed = run(
        bundler.to_str().unwrap(),
        &["--list", "--type=o", &format!("--input={}", bun.display())],
    );
    let mut want: BTreeSet<(String, String, String)> = note_kernels(&co)
        .into_iter()
        .map(|k| ("libembed.so@.rodata[0]".into(), "gfx90a:xnack+".into(), k))
        .collect();
    for triple in listed.lines().filter(|l| l.contains("amdgcn")) {
        let arch = triple.rsplit("--").next().unwrap().to_string();
        let out = tmp.path().join(format!("{}.co", arch.replace(':', "_")));
        run(
            bundler.to_str().unwrap(),
            &[
                "--unbundle",
                "--type=o",
                &format!("--input={}", bun.display()),
                &format!("--targets={triple}"),
                &format!("--output={}", out.display()),
            ],
        );
        for k in note_kernels(&out) {
            want.insert(("libembed.so@.aot_kernels[0]".into(), arch.clone(), k));
        }
    }
    let o = kpack(&["kernels", lib.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let got: BTreeSet<(String, String, String)> = kernel_rows(&j).into_iter().collect();
    assert_eq!(got, want);
    validate_json("kernels", &j);
}

#[test]
fn pack_leaves_embedded_code_in_place_and_says_so_and_diff_counts_it() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("t");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    for f in ["libembed.so", "libembed.a", "libvadd.so"] {
        std::fs::copy(fixtures().join(f), tree.join("lib").join(f)).unwrap();
    }
    let out = tmp.path().join("o");
    let o = pack_rocm(&tree, &out, &["--all"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for f in ["libembed.so", "libembed.a"] {
        assert!(
            stderr(&o).contains(&format!(
                "lib/{f}: 2 device-code objects embedded in its data (gfx900, gfx90a:xnack+) \
                 stay in place"
            )),
            "{}",
            stderr(&o)
        );
        assert_eq!(
            std::fs::read(tree.join("lib").join(f)).unwrap(),
            std::fs::read(out.join("lib").join(f)).unwrap(),
            "{f} changed"
        );
    }
    // Static archive members: found in each member's data.
    let o = kpack(&["kernels", tree.join("lib/libembed.a").to_str().unwrap()]);
    assert!(
        stdout(&o).contains("libembed.a(embed.o)@.rodata[0]"),
        "{}",
        stdout(&o)
    );
    // A build that lost the library lost its embedded kernels, and diff says which.
    std::fs::remove_file(tree.join("lib/libembed.so")).unwrap();
    let o = kpack(&[
        "diff",
        out.to_str().unwrap(),
        tree.to_str().unwrap(),
        "--by",
        "kernel",
        "--top",
        "0",
    ]);
    assert!(
        stdout(&o).contains("lib/libembed.so@.rodata[0]"),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains("lib/libembed.so@.aot_kernels[0]"),
        "{}",
        stdout(&o)
    );
}

/// `--deep`: a blob in a file no section table describes is found too.
#[test]
fn deep_finds_device_code_in_any_file() {
    let tmp = tempfile::tempdir().unwrap();
    let blob = tmp.path().join("weights.bin");
    let co = std::fs::read(fixtures().join("vadd-gfx90a.co")).unwrap();
    let mut d = vec![0xa5u8; 1001];
    d.extend_from_slice(&co);
    d.extend_from_slice(&[0x5a; 77]);
    std::fs::write(&blob, &d).unwrap();
    let o = kpack(&["scan", tmp.path().to_str().unwrap(), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["files"][0]["kind"], "opaque");
    let o = kpack(&["scan", tmp.path().to_str().unwrap(), "--json", "--deep"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = &j["files"][0];
    assert_eq!(f["kind"], "embedded_code", "{f}");
    assert_eq!(f["embedded"][0]["offset"], 1001);
    assert_eq!(f["embedded"][0]["stored_size"], co.len() as u64);
}

/// The (target, name) of every kernel `kernels --json` lists for a file.
fn kernel_set(p: &Path) -> BTreeSet<(String, String)> {
    let o = kpack(&["kernels", p.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    kernel_rows(&j)
        .into_iter()
        .map(|(_, t, n)| (t, n))
        .collect()
}

/// #29 "tolerant, not lax": layouts the loaders and binutils accept are read. A
/// library whose section headers are gone (`llvm-objcopy --strip-sections`; ld.so
/// loads it, HIP registers its code through the segments) has its bundles found in
/// its loaded segments, listed, and named as not packable; an object with more
/// sections than `e_shnum` holds (extended numbering, SHN_XINDEX) is read in full.
#[test]
fn binaries_without_section_headers_or_with_extended_numbering_are_read() {
    for t in ["llvm-objcopy-19", "readelf", "as"] {
        assert!(tool(t).is_some(), "{t} is needed (.ci/run installs it)");
    }
    let tmp = tempfile::tempdir().unwrap();
    let lib = fixtures().join("libvadd.so");
    let bare = tmp.path().join("libbare.so");
    run(
        "llvm-objcopy-19",
        &[
            "--strip-sections",
            lib.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    let h = run("readelf", &["-h", bare.to_str().unwrap()]);
    assert!(h.contains("Number of section headers:         0"), "{h}");
    let o = kpack(&["scan", bare.to_str().unwrap(), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    validate_json("scan", &j);
    let f = &j["files"][0];
    assert_eq!(f["kind"], "embedded_code", "{f}");
    assert!(
        f["embedded"][0]["section"]
            .as_str()
            .unwrap()
            .starts_with("PT_LOAD["),
        "{f}"
    );
    let problems = f["problems"].to_string();
    assert!(problems.contains("no section headers"), "{problems}");
    // The same kernels as the library with its headers.
    let want = kernel_set(&lib);
    assert!(!want.is_empty());
    assert_eq!(kernel_set(&bare), want);

    // 66,000 sections: e_shnum 0, the count in section 0 (readelf: "0 (660..)").
    let s = tmp.path().join("many.s");
    let mut asm = format!(
        ".section .hip_fatbin,\"a\",@progbits\n.p2align 12\nfb:\n.incbin \"{}\"\n\
         .section .hipFatBinSegment,\"aw\",@progbits\n.p2align 3\n\
         .long 0x48495046\n.long 1\n.quad fb\n.quad 0\n",
        fixtures().join("kernels.hipfb").display()
    );
    for i in 0..66_000 {
        asm.push_str(&format!(".section .s{i},\"a\",@progbits\n.byte 0\n"));
    }
    std::fs::write(&s, asm).unwrap();
    let obj = tmp.path().join("many.o");
    run("as", &["-o", obj.to_str().unwrap(), s.to_str().unwrap()]);
    let h = run("readelf", &["-h", obj.to_str().unwrap()]);
    assert!(
        h.contains("Number of section headers:         0 (660"),
        "{h}"
    );
    let o = kpack(&["scan", obj.to_str().unwrap(), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = &j["files"][0];
    assert_eq!(f["kind"], "fat_binary", "{f}");
    let targets: Vec<&str> = f["bundles"][0]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["arch"].as_str().unwrap())
        .collect();
    // What the bundler lists in the bundle incbin'd into .hip_fatbin.
    if let Some(bundler) = tool("clang-offload-bundler-19") {
        let listed = run(
            bundler.to_str().unwrap(),
            &[
                "--list",
                "--type=o",
                &format!("--input={}", fixtures().join("kernels.hipfb").display()),
            ],
        );
        let mut want: Vec<String> = listed
            .lines()
            .filter(|l| l.contains("amdgcn"))
            .map(|l| l.rsplit("--").next().unwrap().to_string())
            .collect();
        let mut got: Vec<String> = targets.iter().map(|s| s.to_string()).collect();
        want.sort();
        got.sort();
        assert_eq!(got, want);
    }
    let k = kernel_set(&obj);
    assert!(!k.is_empty());
}

/// #29: PE images are searched like ELF ones: a DLL linked by lld-link-19 with a code
/// object in `.rdata` and an offload bundle in a section of its own (as Windows AOT
/// kernel libraries ship them) lists both, byte for byte where the linker put them,
/// with the kernels llvm-readelf reads in the blobs.
#[test]
fn a_dll_with_device_code_in_its_data_lists_it() {
    for t in ["clang-19", "lld-link-19", "llvm-readelf-19"] {
        assert!(tool(t).is_some(), "{t} is needed (.ci/run installs it)");
    }
    let tmp = tempfile::tempdir().unwrap();
    let (co, bundle) = (
        fixtures().join("vadd-gfx90a.co"),
        fixtures().join("kernels.hipfb"),
    );
    let asm = format!(
        ".section .rdata,\"dr\"\n.p2align 4\n.globl co_blob\nco_blob:\n.incbin \"{}\"\n\
         .section .aotk,\"dr\"\n.p2align 4\n.globl bundle_blob\nbundle_blob:\n.incbin \"{}\"\n",
        co.display(),
        bundle.display()
    );
    std::fs::write(tmp.path().join("blobs.s"), asm).unwrap();
    std::fs::write(
        tmp.path().join("dll.c"),
        "int __declspec(dllexport) kpack_embed(void) { return 7; }\n",
    )
    .unwrap();
    let cc = |src: &str, obj: &str| {
        let o = Command::new("clang-19")
            .args(["--target=x86_64-pc-windows-msvc", "-c", src, "-o", obj])
            .current_dir(tmp.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    cc("blobs.s", "blobs.obj");
    cc("dll.c", "dll.obj");
    let o = Command::new("lld-link-19")
        .args([
            "/dll",
            "/noentry",
            "/Brepro",
            "dll.obj",
            "blobs.obj",
            "/out:libembed.dll",
        ])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dll = tmp.path().join("libembed.dll");
    let o = kpack(&["scan", dll.to_str().unwrap(), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    validate_json("scan", &j);
    let f = &j["files"][0];
    assert_eq!(f["kind"], "embedded_code", "{f}");
    assert_eq!(f["container"], "pe", "{f}");
    let emb = f["embedded"].as_array().unwrap();
    assert_eq!(emb.len(), 2, "{f}");
    let data = std::fs::read(&dll).unwrap();
    let at = |e: &serde_json::Value| {
        let off = e["offset"].as_u64().unwrap() as usize;
        let n = e["stored_size"].as_u64().unwrap() as usize;
        data[off..off + n].to_vec()
    };
    assert_eq!(emb[0]["section"], ".rdata");
    assert_eq!(emb[0]["format"], "code_object");
    assert_eq!(at(&emb[0]), std::fs::read(&co).unwrap());
    assert_eq!(emb[1]["section"], ".aotk");
    assert_eq!(emb[1]["format"], "bundle");
    let b = std::fs::read(&bundle).unwrap();
    assert_eq!(at(&emb[1]), b[..at(&emb[1]).len()]);
    // Kernels: llvm-readelf's notes of the code object.
    let got: BTreeSet<String> = kernel_rows(&{
        let o = kpack(&["kernels", dll.to_str().unwrap(), "--json"]);
        serde_json::from_slice(&o.stdout).unwrap()
    })
    .into_iter()
    .filter(|(p, _, _)| p == "libembed.dll@.rdata[0]")
    .map(|(_, _, n)| n)
    .collect();
    assert_eq!(got, note_kernels(&co));
}

/// #29 item 1, where it was seen: embedded device code inside a wheel's member is
/// found when the wheel is read in place, and `kernels` lists it (the same rows as
/// the library outside the wheel, named by its member path).
#[test]
fn embedded_code_in_a_wheel_member_is_found() {
    let Some(py) = tool("python3") else {
        panic!("python3 is needed (.ci/run installs it)");
    };
    let tmp = tempfile::tempdir().unwrap();
    let whl = tmp.path().join("aot-1.0-py3-none-linux_x86_64.whl");
    let o = Command::new(py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-test-wheel.py"))
        .arg(&whl)
        .args([
            "--name",
            "aot",
            "--version",
            "1.0",
            "--tag",
            "py3-none-linux_x86_64",
        ])
        .arg(format!(
            "aot/libembed.so@755={}",
            fixtures().join("libembed.so").display()
        ))
        .arg(format!(
            "aot/libvadd.so@755={}",
            fixtures().join("libvadd.so").display()
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = kpack(&["scan", whl.to_str().unwrap(), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    validate_json("scan", &j);
    let f = j["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "aot/libembed.so")
        .unwrap();
    assert_eq!(f["kind"], "embedded_code", "{f}");
    assert_eq!(f["embedded"].as_array().unwrap().len(), 2, "{f}");
    let o = kpack(&["kernels", whl.to_str().unwrap(), "--json"]);
    let in_wheel: BTreeSet<(String, String, String)> =
        kernel_rows(&serde_json::from_slice(&o.stdout).unwrap())
            .into_iter()
            .filter(|(p, _, _)| p.starts_with("aot/libembed.so"))
            .collect();
    let o = kpack(&[
        "kernels",
        fixtures().join("libembed.so").to_str().unwrap(),
        "--json",
    ]);
    let alone: BTreeSet<(String, String, String)> =
        kernel_rows(&serde_json::from_slice(&o.stdout).unwrap())
            .into_iter()
            .map(|(p, t, n)| (format!("aot/{p}"), t, n))
            .collect();
    assert!(!alone.is_empty());
    assert_eq!(in_wheel, alone);
    // wheel split leaves it in the host wheel as it was, and says so once.
    let out = tmp.path().join("dist");
    let o = kpack(&[
        "wheel",
        "split",
        whl.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--device-package-prefix",
        "aot-device",
        "--overlay-root",
        "aot",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = "aot/libembed.so: 2 device-code objects embedded in its data";
    assert_eq!(stderr(&o).matches(said).count(), 1, "{}", stderr(&o));
    let host = out.join(whl.file_name().unwrap());
    let unzip = |w: &Path| {
        let o = Command::new("python3")
            .args(["-c", "import sys,zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read('aot/libembed.so'))"])
            .arg(w)
            .output()
            .unwrap();
        assert!(o.status.success());
        o.stdout
    };
    assert_eq!(
        unzip(&host),
        std::fs::read(fixtures().join("libembed.so")).unwrap()
    );
}
