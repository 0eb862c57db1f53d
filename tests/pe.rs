//! PE/COFF host-only rewrite on real HIP images built for Windows by clang-19 and
//! lld-link-19 (`scripts/make-fixtures.sh` step 13): a DLL with plain bundles, one
//! with a compressed bundle, and an EXE. Checked by our verifier, by llvm-readobj-19
//! (headers, sections, base relocations parse without a warning), and by reading
//! the wrappers and the marker back, and by the Windows loader itself (Wine).

mod common;

use common::*;
use kpack::coff::rewrite::{self, parse_layout, verify_rewritten};
use kpack::kpack::Marker;
use std::process::Command;

const IMAGES: [&str; 3] = ["libkpe.dll", "libkpez.dll", "kpe.exe"];

fn rewrite_cli(input: &std::path::Path, out: &std::path::Path) -> std::process::Output {
    kpack(&[
        "rewrite",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--search-path",
        ".kpack/kpe_@GFXARCH@.kpack",
        "--kernel-name",
        "bin/image",
    ])
}

#[test]
fn real_pe_images_rewrite_host_only_and_check() {
    let tmp = tempfile::tempdir().unwrap();
    for name in IMAGES {
        let input = fixtures().join(name);
        let before = std::fs::read(&input).unwrap();
        let out = tmp.path().join(format!("host-{name}"));
        let o = rewrite_cli(&input, &out);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        assert_eq!(std::fs::read(&input).unwrap(), before, "input untouched");
        let d = std::fs::read(&out).unwrap();
        assert!(d.len() < before.len(), "{name}: device bytes removed");
        assert_eq!(verify_rewritten(&d), Vec::<String>::new(), "{name}");
        // The layout: .hip_fat zero-paged, .kpackrf holding the marker.
        let l = parse_layout(&d).unwrap();
        let (_, fat) = l.section(".hip_fat").unwrap();
        assert_eq!(fat.size_of_raw_data, 0);
        assert!(fat.virtual_size > 0);
        let (_, m) = l.section(".kpackrf").unwrap();
        let mo = m.pointer_to_raw_data as usize;
        let marker = Marker::decode(&d[mo..mo + m.virtual_size as usize]).unwrap();
        assert_eq!(marker.kernel_name, "bin/image");
        assert_eq!(marker.kpack_search_paths, [".kpack/kpe_@GFXARCH@.kpack"]);
        // Each wrapper: HIPK, the marker's address, co_index 0 (one TU).
        let (_, w) = l.section(".hipFatB").unwrap();
        let wo = w.pointer_to_raw_data as usize;
        assert_eq!(&d[wo..wo + 4], &kpack::elf::MAGIC_HIPK.to_le_bytes());
        let ptr = u64::from_le_bytes(d[wo + 8..wo + 16].try_into().unwrap());
        assert_eq!(ptr, l.image_base + m.virtual_address as u64);
        assert_eq!(
            u64::from_le_bytes(d[wo + 16..wo + 24].try_into().unwrap()),
            0
        );
        // Our scan calls it host-only.
        let o = kpack(&["--no-tui", "--json", out.to_str().unwrap()]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["files"][0]["kind"], "host_only_binary", "{name}");
        // An independent reader: llvm-readobj parses every header and relocation.
        if let Some(readobj) = tool("llvm-readobj-19") {
            let o = Command::new(readobj)
                .args(["--file-headers", "--sections", "--coff-basereloc"])
                .arg(&out)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&o.stdout).into_owned()
                + &String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "{name}: {text}");
            assert!(!text.to_lowercase().contains("warning"), "{name}: {text}");
            assert!(text.contains(".kpackrf"), "{text}");
            // The wrapper's DIR64 relocation is kept (the loader moves the pointer).
            let slot = format!("Address: 0x{:X}", w.virtual_address + 8);
            assert!(
                text.contains(&slot),
                "{name}: no relocation at {slot}:\n{text}"
            );
        }
        // A second rewrite is refused (exit 1, nothing written).
        let again = tmp.path().join(format!("again-{name}"));
        let o = rewrite_cli(&out, &again);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains("already host-only"), "{}", stderr(&o));
        assert!(!again.exists());
    }
}

/// Re-pointing a host-only image (what a re-pack does): the marker is replaced in
/// place, the image checks, and pointing it back gives the first rewrite's bytes.
#[test]
fn host_only_images_are_re_pointed_in_place() {
    let m = Marker {
        kpack_search_paths: vec!["../.kpack/g_@GFXARCH@.kpack".into()],
        kernel_name: "bin/x".into(),
    };
    let long = Marker {
        kpack_search_paths: (0..40)
            .map(|i| format!("../../some/longer/place/{i}/g_@GFXARCH@.kpack"))
            .collect(),
        kernel_name: "bin/a/much/longer/kernel/name".into(),
    };
    for n in IMAGES {
        let fat = std::fs::read(fixtures().join(n)).unwrap();
        assert!(
            rewrite::replace_marker(&fat, &m).is_err(),
            "{n}: not host-only"
        );
        let first = rewrite::plan_rewrite(&fat, &m).unwrap().bytes;
        assert_eq!(rewrite::replace_marker(&first, &m).unwrap(), first, "{n}");
        let moved = rewrite::replace_marker(&first, &long).unwrap();
        assert_eq!(verify_rewritten(&moved), Vec::<String>::new(), "{n}");
        assert!(
            moved.len() > first.len(),
            "{n}: the longer marker needs more room"
        );
        let l = parse_layout(&moved).unwrap();
        let (_, s) = l.section(".kpackrf").unwrap();
        let at = s.pointer_to_raw_data as usize;
        let got = Marker::decode(&moved[at..at + s.virtual_size as usize]).unwrap();
        assert_eq!(got, long, "{n}");
        assert_eq!(rewrite::replace_marker(&moved, &m).unwrap(), first, "{n}");
    }
}

#[test]
fn bad_pe_images_are_refused_with_a_reason() {
    let d = std::fs::read(fixtures().join("libkpe.dll")).unwrap();
    let m = Marker {
        kernel_name: "x".into(),
        kpack_search_paths: vec!["y".into()],
    };
    let err = |bytes: &[u8]| rewrite::plan_rewrite(bytes, &m).unwrap_err().to_string();
    // Truncated: every prefix fails cleanly.
    for cut in [0x3c, 0x80, 0x200, 0x1000, d.len() / 2, d.len() - 1] {
        assert!(
            rewrite::plan_rewrite(&d[..cut], &m).is_err(),
            "cut at {cut}"
        );
    }
    // .hip_fat without .hipFatB (the wrapper section renamed).
    let l = parse_layout(&d).unwrap();
    let (wi, _) = l.section(".hipFatB").unwrap();
    let mut x = d.clone();
    x[l.table + wi * 40..l.table + wi * 40 + 8].copy_from_slice(b".hipFatX");
    assert!(err(&x).contains(".hip_fat without .hipFatB"), "{}", err(&x));
    // A section claiming raw data past the end of the file.
    let (fi, _) = l.section(".hip_fat").unwrap();
    let mut x = d.clone();
    x[l.table + fi * 40 + 16..l.table + fi * 40 + 20]
        .copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    assert!(err(&x).contains("past the end of the file"), "{}", err(&x));
    // A wrapper whose pointer is not a bundle's start.
    let (_, w) = l.section(".hipFatB").unwrap();
    let mut x = d.clone();
    let po = w.pointer_to_raw_data as usize + 8;
    let p = u64::from_le_bytes(x[po..po + 8].try_into().unwrap()) + 16;
    x[po..po + 8].copy_from_slice(&p.to_le_bytes());
    assert!(err(&x).contains("not the start of a bundle"), "{}", err(&x));
    // Not PE32+.
    let mut x = d.clone();
    let opt = l.opt;
    x[opt..opt + 2].copy_from_slice(&0x10bu16.to_le_bytes());
    assert!(err(&x).contains("32-bit"), "{}", err(&x));
}

/// Wine, the Windows loader: a small test EXE (tests/fixtures/src/pe_loadcheck.c, no
/// C runtime, kernel32 through an import library made by llvm-dlltool-19) loads each
/// rewritten DLL with LoadLibraryA, walks its `.hipFatB` wrappers after the loader
/// applied the base relocations, and prints magic, reserved1 and the first bytes the
/// pointer reaches: HIPK, the bundle index and the marker. The rewritten EXE starts.
#[test]
fn rewritten_images_load_under_wine() {
    let wine = std::path::Path::new("/usr/lib/wine/wine64");
    if !wine.exists() {
        assert!(!in_ci(), "wine64 is required in CI (see .ci/run)");
        eprintln!("note: wine64 not installed; skipping the loader test");
        return;
    }
    let (Some(clang), Some(lld), Some(dlltool)) = (
        tool("clang-19"),
        tool("lld-link-19"),
        tool("llvm-dlltool-19"),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let src = fixtures().parent().unwrap().join("src");
    let run = |c: &mut Command| {
        let o = c.output().unwrap();
        assert!(
            o.status.success(),
            "{c:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o
    };
    run(Command::new(dlltool)
        .args(["-m", "i386:x86-64", "-d"])
        .arg(src.join("pe_kernel32.def"))
        .arg("-l")
        .arg(dir.join("kernel32.lib")));
    run(Command::new(clang)
        .args(["--target=x86_64-pc-windows-msvc", "-O1", "-c"])
        .arg(src.join("pe_loadcheck.c"))
        .arg("-o")
        .arg(dir.join("loadcheck.obj")));
    run(Command::new(lld)
        .args([
            "/subsystem:console",
            "/entry:loadcheck_main",
            "/nodefaultlib",
            "/Brepro",
        ])
        .arg(dir.join("loadcheck.obj"))
        .arg(dir.join("kernel32.lib"))
        .arg(format!("/out:{}", dir.join("loadcheck.exe").display())));
    let wine_run = |exe: &std::path::Path| {
        Command::new(wine)
            .arg(exe)
            .current_dir(dir)
            .env("WINEPREFIX", dir.join("prefix"))
            .env("WINEDEBUG", "-all")
            .env_remove("DISPLAY")
            .output()
            .unwrap()
    };
    for name in ["libkpe.dll", "libkpez.dll"] {
        let o = rewrite_cli(&fixtures().join(name), &dir.join("image.dll"));
        assert!(o.status.success(), "{}", stderr(&o));
        let o = wine_run(&dir.join("loadcheck.exe"));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{name}: {text}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let marker = Marker {
            kernel_name: "bin/image".into(),
            kpack_search_paths: vec![".kpack/kpe_@GFXARCH@.kpack".into()],
        }
        .encode();
        let first: String = marker[..8].iter().map(|b| format!("{b:02x}")).collect();
        assert!(
            text.contains(&format!(
                "wrapper magic HIPK reserved1 0000 points at {first}"
            )),
            "{name}: {text}"
        );
    }
    // A DLL from a pack's output loads the same way.
    let tree = dir.join("tree/bin");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::copy(fixtures().join("libkpe.dll"), tree.join("libkpe.dll")).unwrap();
    let packed = dir.join("packed");
    let o = kpack(&[
        "pack",
        dir.join("tree").to_str().unwrap(),
        "-o",
        packed.to_str().unwrap(),
        "--group",
        "g",
        "--family",
        "gfx90X,gfx103X",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::copy(packed.join("bin/libkpe.dll"), dir.join("image.dll")).unwrap();
    let o = wine_run(&dir.join("loadcheck.exe"));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("wrapper magic HIPK reserved1 0000 points at 82"),
        "{text}"
    );
    // The original, for contrast: the loader sees HIPF and the bundle.
    std::fs::copy(fixtures().join("libkpe.dll"), dir.join("image.dll")).unwrap();
    let text = String::from_utf8_lossy(&wine_run(&dir.join("loadcheck.exe")).stdout).into_owned();
    assert!(text.contains("points at 5f5f434c414e475f"), "{text}"); // "__CLANG_"
    // The rewritten EXE starts and exits 0.
    let exe = dir.join("host-kpe.exe");
    assert!(
        rewrite_cli(&fixtures().join("kpe.exe"), &exe)
            .status
            .success()
    );
    let o = wine_run(&exe);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// #20 part 2: a tree holding Windows images packs like an ELF tree (per-target
/// archives, `@GFXARCH@` markers), verifies kernel by kernel, answers per device, and
/// its kernels, extraction and the wheel split read PE images too.
#[test]
fn windows_images_pack_verify_and_split_like_elf_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("bin")).unwrap();
    for n in IMAGES {
        std::fs::copy(fixtures().join(n), tree.join("bin").join(n)).unwrap();
    }
    let out = tmp.path().join("out");
    let o = kpack(&[
        "pack",
        tree.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--group",
        "g",
        "--family",
        "gfx90X,gfx103X",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for t in ["gfx900", "gfx1030"] {
        assert!(out.join(format!(".kpack/g_{t}.kpack")).is_file(), "{t}");
    }
    for n in IMAGES {
        let d = std::fs::read(out.join("bin").join(n)).unwrap();
        assert_eq!(verify_rewritten(&d), Vec::<String>::new(), "{n}");
        let l = parse_layout(&d).unwrap();
        let (_, m) = l.section(".kpackrf").unwrap();
        let mo = m.pointer_to_raw_data as usize;
        let marker = Marker::decode(&d[mo..mo + m.virtual_size as usize]).unwrap();
        assert_eq!(marker.kpack_search_paths, ["../.kpack/g_@GFXARCH@.kpack"]);
        assert_eq!(marker.kernel_name, format!("bin/{n}"));
    }
    let o = kpack(&["verify", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stdout(&o));
    for device in ["gfx900", "gfx1030"] {
        let o = kpack(&["verify", out.to_str().unwrap(), "--device", device]);
        assert!(o.status.success(), "{device}: {}", stdout(&o));
    }
    // Re-packing the packed tree under another group re-points the host-only
    // images at the new archives (their marker replaced in place) and verifies.
    let again = tmp.path().join("again");
    let o = kpack(&[
        "pack",
        out.to_str().unwrap(),
        "-o",
        again.to_str().unwrap(),
        "--group",
        "h",
        "--family",
        "gfx90X,gfx103X",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for n in IMAGES {
        let d = std::fs::read(again.join("bin").join(n)).unwrap();
        assert_eq!(verify_rewritten(&d), Vec::<String>::new(), "{n}");
        let l = parse_layout(&d).unwrap();
        let (_, m) = l.section(".kpackrf").unwrap();
        let mo = m.pointer_to_raw_data as usize;
        let marker = Marker::decode(&d[mo..mo + m.virtual_size as usize]).unwrap();
        assert_eq!(marker.kpack_search_paths, ["../.kpack/h_@GFXARCH@.kpack"]);
    }
    let o = kpack(&["verify", again.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stdout(&o));
    // Every kernel of the images is in the archives, byte for byte (extract from
    // the fat image vs the archive entry).
    for n in IMAGES {
        for t in ["gfx900", "gfx1030"] {
            let x = tmp.path().join(format!("{n}-{t}.co"));
            let o = kpack(&[
                "extract",
                fixtures().join(n).to_str().unwrap(),
                "--target",
                t,
                "-o",
                x.to_str().unwrap(),
            ]);
            assert!(o.status.success(), "{}", stderr(&o));
            let a = kpack::kpack::Archive::open(&out.join(format!(".kpack/g_{t}.kpack"))).unwrap();
            let e = a.entry(&format!("bin/{n}#0"), t).unwrap();
            assert_eq!(
                a.kernel(e).unwrap().as_ref(),
                std::fs::read(&x).unwrap().as_slice()
            );
        }
    }
    // kernels reads the image's code objects.
    let o = kpack(&[
        "kernels",
        fixtures().join("libkpez.dll").to_str().unwrap(),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["kernels"].as_array().unwrap().len(), 4, "{v}");
    // A wheel carrying a Windows extension module splits too.
    let Some(py) = tool("python3") else { return };
    let whl = tmp.path().join("pkg-1.0-cp311-cp311-win_amd64.whl");
    let o = Command::new(py)
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-test-wheel.py"))
        .arg(&whl)
        .args([
            "--name",
            "pkg",
            "--version",
            "1.0",
            "--tag",
            "cp311-cp311-win_amd64",
        ])
        .arg(format!(
            "pkg/lib/libkpe.dll={}",
            fixtures().join("libkpe.dll").display()
        ))
        .output()
        .unwrap();
    assert!(o.status.success());
    let dist = tmp.path().join("dist");
    let o = kpack(&[
        "wheel",
        "split",
        whl.to_str().unwrap(),
        "-o",
        dist.to_str().unwrap(),
        "--device-package-prefix",
        "pkg-device",
        "--overlay-root",
        "pkg",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let host = kpack::wheel::Wheel::open(&dist.join(whl.file_name().unwrap())).unwrap();
    let m = host.member("pkg/lib/libkpe.dll").unwrap();
    let dll = m.read_all(host.bytes()).unwrap();
    assert_eq!(verify_rewritten(&dll), Vec::<String>::new());
    assert!(
        dist.join("pkg_device_gfx900-1.0-cp311-cp311-win_amd64.whl")
            .is_file()
    );
    assert!(
        dist.join("pkg_device_gfx1030-1.0-cp311-cp311-win_amd64.whl")
            .is_file()
    );
}
