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
