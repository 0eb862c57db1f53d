//! `.kpack` archives: the reference archives, our own equivalents, the CLI
//! (inspect, --json, extract, verify) and corruption classes.

mod common;

use common::*;
use kpack::kpack::archive::{Archive, ArchiveMeta, ArchiveWriter, Scheme};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The kernels of the reference archives, as their README describes them.
fn noop_kernels() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let cat = |a: &[u8], b: Vec<u8>| [a.to_vec(), b].concat();
    vec![
        (
            "lib/libtest.so#0",
            "gfx900",
            cat(b"KERNEL1_GFX900_DATA", vec![0; 100]),
        ),
        (
            "lib/libtest.so#0",
            "gfx906",
            cat(b"KERNEL2_GFX906_DATA", vec![0; 200]),
        ),
        (
            "bin/testapp#0",
            "gfx900",
            cat(b"KERNEL3_APP_GFX900", vec![0xff; 150]),
        ),
    ]
}

fn zstd_kernels() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let cat = |parts: &[&[u8]]| parts.concat();
    vec![
        (
            "lib/libhip.so#0",
            "gfx1100",
            cat(&[b"HIP_KERNEL_GFX1100_", &[b'A'; 500], &[b'B'; 500]]),
        ),
        (
            "lib/libhip.so#0",
            "gfx1101",
            cat(&[b"HIP_KERNEL_GFX1101_", &[b'X'; 300], &[b'Y'; 300]]),
        ),
        (
            "bin/hiptest#0",
            "gfx1100",
            cat(&[b"TEST_APP_KERNEL___", &[0x42; 1000]]),
        ),
    ]
}

fn check_contents(a: &Archive, kernels: &[(&str, &str, Vec<u8>)]) {
    assert_eq!(a.index.kernels.len(), kernels.len());
    for (k, arch, data) in kernels {
        let e = a
            .entry(k, arch)
            .unwrap_or_else(|| panic!("{k} @ {arch} missing"));
        assert_eq!(&*a.kernel(e).unwrap(), &data[..], "{k} @ {arch}");
    }
    assert!(a.verify().is_empty(), "{:?}", a.verify());
}

/// Our own archive with the same content as a reference one.
fn ours(
    dir: &Path,
    name: &str,
    family: &str,
    arches: &[&str],
    scheme: Scheme,
    kernels: &[(&str, &str, Vec<u8>)],
) -> PathBuf {
    let p = dir.join(name);
    let meta = ArchiveMeta {
        group_name: "test".into(),
        gfx_arch_family: family.into(),
        gfx_arches: arches.iter().map(|s| s.to_string()).collect(),
    };
    let w = ArchiveWriter::create(&p, meta, scheme, 3).unwrap();
    for (k, a, d) in kernels {
        w.add(k, a, d).unwrap();
    }
    w.finish().unwrap();
    p
}

#[test]
fn reference_archives_read_correctly() {
    let dir = shared().join("fixtures/reference-kpack");
    if !dir.exists() {
        assert!(!in_ci(), "../shared/fixtures/reference-kpack is missing");
        return;
    }
    let noop = Archive::open(&dir.join("test_noop.kpack")).unwrap();
    assert_eq!(noop.index.meta.group_name, "test");
    assert_eq!(noop.index.meta.gfx_arch_family, "gfx900X");
    assert_eq!(noop.index.meta.gfx_arches, vec!["gfx900", "gfx906"]);
    assert_eq!(noop.index.compression_scheme, Scheme::None);
    assert_eq!(noop.index.toc_offset, 0x23a);
    check_contents(&noop, &noop_kernels());
    let z = Archive::open(&dir.join("test_zstd.kpack")).unwrap();
    assert_eq!(z.index.meta.gfx_arches, vec!["gfx1100", "gfx1101"]);
    assert_eq!(z.index.compression_scheme, Scheme::ZstdPerKernel);
    check_contents(&z, &zstd_kernels());
    // The reference writer's frames carry no checksum, and verify says what that
    // means; our own archives carry one.
    assert!(!z.checksummed() && !noop.checksummed());
    for name in ["test_zstd.kpack", "test_noop.kpack"] {
        let o = kpack(&["verify", dir.join(name).to_str().unwrap()]);
        assert!(o.status.success());
        assert!(
            stdout(&o).contains("note: its code objects carry no checksum"),
            "{}",
            stdout(&o)
        );
    }
}

#[test]
fn our_equivalents_of_the_reference_archives() {
    let d = tempfile::tempdir().unwrap();
    let n = ours(
        d.path(),
        "noop.kpack",
        "gfx900X",
        &["gfx900", "gfx906"],
        Scheme::None,
        &noop_kernels(),
    );
    let a = Archive::open(&n).unwrap();
    check_contents(&a, &noop_kernels());
    // Header layout of the worked example: magic, version 1, blobs from 0x40 back to back.
    let bytes = std::fs::read(&n).unwrap();
    assert_eq!(&bytes[..8], b"KPAK\x01\x00\x00\x00");
    assert!(bytes[16..0x40].iter().all(|&b| b == 0));
    let offs: Vec<u64> = {
        let mut v: Vec<_> = a.index.kernels.iter().map(|k| k.offset).collect();
        v.sort();
        v
    };
    assert_eq!(offs, vec![0x40, 0x40 + 168, 0x40 + 168 + 119]);
    // Same TOC size as the reference writer's (same keys, same encodings).
    let refp = shared().join("fixtures/reference-kpack/test_noop.kpack");
    if refp.exists() {
        let r = std::fs::read(refp).unwrap();
        assert_eq!(bytes.len(), r.len(), "our TOC encodes like the reference");
    }
    let z = ours(
        d.path(),
        "z.kpack",
        "gfx110X",
        &["gfx1100", "gfx1101"],
        Scheme::ZstdPerKernel,
        &zstd_kernels(),
    );
    check_contents(&Archive::open(&z).unwrap(), &zstd_kernels());
}

fn sample(dir: &Path) -> PathBuf {
    ours(
        dir,
        "s.kpack",
        "gfx110X",
        &["gfx1100", "gfx1101"],
        Scheme::ZstdPerKernel,
        &zstd_kernels(),
    )
}

#[test]
fn cli_inspect_text_and_json() {
    let d = tempfile::tempdir().unwrap();
    let p = sample(d.path());
    let o = kpack(&[p.to_str().unwrap(), "--no-tui"]);
    assert!(o.status.success());
    let t = stdout(&o);
    for s in [
        "group     test",
        "family    gfx110X",
        "zstd-per-kernel",
        "lib/libhip.so#0",
        "3 code objects",
    ] {
        assert!(t.contains(s), "{s:?} missing in\n{t}");
    }
    let o = kpack(&[p.to_str().unwrap(), "--no-tui", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["group_name"], "test");
    assert_eq!(v["gfx_arch_family"], "gfx110X");
    assert_eq!(v["gfx_arches"], serde_json::json!(["gfx1100", "gfx1101"]));
    assert_eq!(v["compression_scheme"], "zstd-per-kernel");
    let k = v["code_objects"].as_array().unwrap();
    assert_eq!(k.len(), 3);
    assert_eq!(k[0]["key"], "bin/hiptest#0");
    assert_eq!(k[0]["arch"], "gfx1100");
    assert_eq!(k[0]["raw_size"], 1018);
    assert!(k[0]["stored_size"].as_u64().unwrap() < 100);
}

#[test]
fn cli_extract_one_and_all() {
    let d = tempfile::tempdir().unwrap();
    let p = sample(d.path());
    let out = d.path().join("one.hsaco");
    let o = kpack(&[
        "extract",
        p.to_str().unwrap(),
        "./lib/libhip.so#0",
        "gfx1101",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&out).unwrap(), zstd_kernels()[1].2);
    let o = kpack(&[
        "extract",
        p.to_str().unwrap(),
        "lib/nope#0",
        "gfx1101",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("the closest:") && stderr(&o).contains("lib/libhip.so#0 gfx1101"),
        "lists the closest keys: {}",
        stderr(&o)
    );
    let all = d.path().join("all");
    let o = kpack(&[
        "extract",
        p.to_str().unwrap(),
        "--all",
        "-o",
        all.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (k, a, data) in zstd_kernels() {
        let (path, tu) = k.rsplit_once('#').unwrap();
        let f = all.join(format!("{path}#{tu}")).join(format!("{a}.hsaco"));
        assert_eq!(std::fs::read(&f).unwrap(), data, "{}", f.display());
    }
}

/// Patch bytes of a file in place: replace the first occurrence of `from` by `to`.
fn patch(bytes: &mut [u8], from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    let at = bytes.windows(from.len()).position(|w| w == from).unwrap();
    bytes[at..at + to.len()].copy_from_slice(to);
}

#[test]
fn extract_refuses_keys_that_escape() {
    let d = tempfile::tempdir().unwrap();
    for (safe, evil) in [
        ("aa/evil#0", "../evil#0"),
        ("/etc/evil#0", "/etc/evil#0"),
        ("abc/x#0", "abc\0x#0"),
    ] {
        let safe_key = if safe.starts_with('/') {
            "zetc/evil#0"
        } else {
            safe
        };
        let p = ours(
            d.path(),
            "e.kpack",
            "f",
            &["gfx900"],
            Scheme::None,
            &[(safe_key, "gfx900", b"data".to_vec())],
        );
        let mut b = std::fs::read(&p).unwrap();
        patch(&mut b, safe_key.as_bytes(), evil.as_bytes());
        std::fs::write(&p, &b).unwrap();
        let out = d.path().join("out");
        let o = kpack(&[
            "extract",
            p.to_str().unwrap(),
            "--all",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{evil:?}");
        assert!(stderr(&o).contains("refusing"), "{}", stderr(&o));
        assert!(!out.exists(), "nothing written for {evil:?}");
        assert!(!d.path().join("evil").exists());
        // verify names the fault too.
        let o = kpack(&["verify", p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{evil:?}: {}", stdout(&o));
    }
}

#[test]
fn verify_catches_each_corruption_class() {
    let d = tempfile::tempdir().unwrap();
    let good = std::fs::read(sample(d.path())).unwrap();
    let p = d.path().join("bad.kpack");
    let run = |bytes: &[u8]| {
        std::fs::write(&p, bytes).unwrap();
        let o = kpack(&["verify", p.to_str().unwrap()]);
        (o.status.code(), stdout(&o))
    };
    assert_eq!(run(&good).0, Some(0));
    let toc = u64::from_le_bytes(good[8..16].try_into().unwrap()) as usize;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "bad magic",
            {
                let mut b = good.clone();
                b[1] = b'Q';
                b
            },
            "bad magic",
        ),
        (
            "version",
            {
                let mut b = good.clone();
                b[4] = 2;
                b
            },
            "version 2",
        ),
        (
            "toc past end",
            {
                let mut b = good.clone();
                b[8..16].copy_from_slice(&9999u64.to_le_bytes());
                b
            },
            "outside the file",
        ),
        ("truncated", good[..good.len() - 10].to_vec(), "MessagePack"),
        (
            "frame corrupt",
            {
                let mut b = good.clone();
                for x in &mut b[0x48..0x50] {
                    *x ^= 0xff;
                }
                b
            },
            "zstd",
        ),
        (
            "frame past blob",
            {
                let mut b = good.clone();
                b[0x44..0x48].copy_from_slice(&5000u32.to_le_bytes());
                b
            },
            "run past",
        ),
        (
            "garbage toc",
            {
                let mut b = good.clone();
                b[toc] = 0xc1;
                b
            },
            "MessagePack",
        ),
        (
            "wrong size",
            {
                let mut b = good.clone();
                patch(
                    &mut b,
                    b"\xadoriginal_size\xcd\x03\xfa",
                    b"\xadoriginal_size\xcd\x03\xf9",
                );
                b
            },
            "original_size",
        ),
        (
            "arch not listed",
            {
                let mut b = good.clone();
                patch(&mut b, b"\xa7gfx1101", b"\xa7gfx1102");
                b
            },
            "gfx_arches",
        ),
    ];
    for (name, bytes, needle) in cases {
        let (code, out) = run(&bytes);
        assert_eq!(code, Some(1), "{name}: {out}");
        assert!(out.contains(needle), "{name}: wanted {needle:?} in {out}");
    }
    let o = kpack(&["verify", "/nonexistent.kpack"]);
    assert_eq!(o.status.code(), Some(2));
}
