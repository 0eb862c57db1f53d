//! The scan on real fixture binaries, cross-checked with clang-offload-bundler.

mod common;

use common::*;
use kpack::bundle::{self, BundleInfo};
use kpack::elf::{self, ElfContent, WrapperMagic};
use kpack::event::NoEvents;
use kpack::scan::{self, FileKind, ScanOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn scan_dir(p: &Path) -> scan::TreeReport {
    scan::scan(p, &ScanOptions::default(), &NoEvents).unwrap()
}

#[test]
fn fixture_kinds_and_shapes() {
    let r = scan_dir(&fixtures());
    let kinds: BTreeMap<&str, FileKind> =
        r.files.iter().map(|f| (f.path.as_str(), f.kind)).collect();
    assert_eq!(kinds["libvadd.so"], FileKind::FatBinary);
    assert_eq!(kinds["app_pie"], FileKind::FatBinary);
    assert_eq!(kinds["app_nopie"], FileKind::FatBinary);
    assert_eq!(kinds["librdc.so"], FileKind::FatBinary);
    assert_eq!(kinds["libzkern.so"], FileKind::FatBinary);
    assert_eq!(kinds["vadd.o"], FileKind::FatBinary);
    assert_eq!(kinds["libkern.a"], FileKind::FatBinary);
    assert_eq!(kinds["kernels.hipfb"], FileKind::Bundle);
    assert_eq!(kinds["vadd-gfx90a.co"], FileKind::CodeObject);
    assert_eq!(kinds["hostonly"], FileKind::HostOnlyBinary);
    assert_eq!(kinds["kfat.dll"], FileKind::FatBinary);
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);

    let get = |p: &str| r.files.iter().find(|f| f.path == p).unwrap();
    // Two TUs: two bundles, two wrappers pointing at bundles 0 and 1.
    for app in ["app_pie", "app_nopie"] {
        let f = get(app);
        assert_eq!(f.bundles.len(), 2, "{app}");
        let ptr: Vec<_> = f.wrappers.iter().map(|w| (w.magic, w.bundle)).collect();
        assert_eq!(
            ptr,
            vec![(WrapperMagic::Hipf, Some(0)), (WrapperMagic::Hipf, Some(1))],
            "{app}"
        );
    }
    // -fgpu-rdc: one bundle, two wrappers sharing it.
    let rdc = get("librdc.so");
    assert_eq!(rdc.bundles.len(), 1);
    assert_eq!(
        rdc.wrappers.iter().map(|w| w.bundle).collect::<Vec<_>>(),
        vec![Some(0), Some(0)]
    );
    // Feature flags kept.
    let archs: Vec<&str> = get("libvadd.so").bundles[0]
        .targets
        .iter()
        .map(|t| &*t.arch)
        .collect();
    assert_eq!(archs, vec!["gfx900", "gfx90a:xnack+"]);
    assert_eq!(get("vadd-gfx90a.co").arch.as_deref(), Some("gfx90a:xnack+"));
    // Compressed bundles.
    let z = get("libzkern.so");
    assert_eq!(z.bundles.len(), 2);
    for b in &z.bundles {
        assert_eq!(b.compression, bundle::Compression::Zstd);
        assert!(b.stored_size < b.uncompressed_size);
        let sum: u64 = b.targets.iter().map(|t| t.compressed_size).sum();
        assert!(sum <= b.stored_size);
    }
    // Host-only: marker read.
    let h = get("hostonly");
    let m = h.marker.as_ref().unwrap();
    assert_eq!(m.kernel_name, "bin/hostonly");
    assert_eq!(m.kpack_search_paths, vec!["../.kpack/demo_gfx90X.kpack"]);
    assert_eq!(h.wrappers[0].magic, WrapperMagic::Hipk);
    assert_eq!(h.fatbin_bytes, 0);
    // PE DLL (clang-19 + lld-link): its .hip_fat bundle, listed like an ELF one.
    let dll = get("kfat.dll");
    assert_eq!(dll.container, Some(kpack::scan::Container::Pe));
    assert_eq!(dll.bundles.len(), 1);
    let dll_archs: Vec<&str> = dll.bundles[0].targets.iter().map(|t| &*t.arch).collect();
    assert_eq!(dll_archs, vec!["gfx900", "gfx90a:xnack+"]);
    assert_eq!(
        dll.bundles,
        get("kernels.hipfb").bundles,
        "same bundle as the ELF it came from"
    );
    // Archive members.
    let a = get("libkern.a");
    assert_eq!(a.members.len(), 2);
    // Host + device bytes add up for binaries.
    for f in r.files.iter().filter(|f| f.host_bytes.is_some()) {
        assert_eq!(f.host_bytes.unwrap() + f.fatbin_bytes, f.size, "{}", f.path);
    }
}

/// The `.hip_fatbin` of an ELF file (or the whole file for a bundle file), and its bundles.
fn section_and_bundles(path: &Path) -> (Vec<u8>, Vec<BundleInfo>) {
    let data = std::fs::read(path).unwrap();
    if bundle::looks_like_bundle(&data) {
        let b = bundle::walk_section(&data).unwrap();
        return (data, b);
    }
    let ElfContent::Fat(fat) = elf::inspect(&data).unwrap() else {
        panic!("{} is not a fat binary", path.display())
    };
    let span = fat.fatbin.clone().unwrap();
    let sec = data[span.offset as usize..(span.offset + span.size) as usize].to_vec();
    (sec, fat.bundles.clone())
}

/// For every bundle of every fat binary: our entry list equals
/// `clang-offload-bundler -list`, and our code objects equal its `-unbundle` output.
fn cross_check_with_bundler(dir: &Path, names: &[&str]) {
    let Some(bundler) = tool("clang-offload-bundler-19") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for name in names {
        let (sec, bundles) = section_and_bundles(&dir.join(name));
        assert!(!bundles.is_empty(), "{name}");
        for b in &bundles {
            let one = tmp.path().join(format!("{name}.{}.bundle", b.index));
            std::fs::write(
                &one,
                &sec[b.offset as usize..(b.offset + b.stored_size) as usize],
            )
            .unwrap();
            let out = Command::new(&bundler)
                .args(["-list", "-type=o"])
                .arg(format!("-input={}", one.display()))
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{name} bundle {}: {}",
                b.index,
                stderr(&out)
            );
            let theirs: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
            let ours: Vec<String> = b.entries.iter().map(|e| e.id.triple.clone()).collect();
            let mut theirs_sorted = theirs.clone();
            theirs_sorted.sort();
            let mut ours_sorted = ours.clone();
            ours_sorted.sort();
            assert_eq!(
                ours_sorted, theirs_sorted,
                "{name} bundle {} entry list",
                b.index
            );

            let un = b.uncompressed(&sec, 1 << 30).unwrap();
            for (entry, bytes) in b.code_objects(&un).unwrap() {
                let outf = tmp.path().join(format!(
                    "{name}.{}.{}.co",
                    b.index,
                    entry.id.arch().unwrap().replace(':', "_")
                ));
                let st = Command::new(&bundler)
                    .args(["-unbundle", "-type=o"])
                    .arg(format!("-input={}", one.display()))
                    .arg(format!("-targets={}", entry.id.triple))
                    .arg(format!("-output={}", outf.display()))
                    .status()
                    .unwrap();
                assert!(st.success());
                let theirs = std::fs::read(&outf).unwrap();
                assert_eq!(
                    theirs.len(),
                    bytes.len(),
                    "{name} bundle {} {}",
                    b.index,
                    entry.id.triple
                );
                assert!(
                    theirs == bytes,
                    "{name} bundle {} {}: bytes differ",
                    b.index,
                    entry.id.triple
                );
                assert_eq!(entry.size, bytes.len() as u64);
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "only {checked} code objects compared");
}

const FAT: &[&str] = &[
    "libvadd.so",
    "app_pie",
    "app_nopie",
    "librdc.so",
    "libzkern.so",
    "vadd.o",
    "kernels.hipfb",
];

#[test]
fn listings_and_code_objects_match_clang_offload_bundler() {
    cross_check_with_bundler(&fixtures(), FAT);
}

#[test]
fn fresh_fixtures_from_real_compilers_match_the_bundler() {
    // Rebuild the fixtures from source with hipcc and clang-19, then cross-check.
    if tool("hipcc").is_none() || tool("clang++-19").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-fixtures.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "make-fixtures.sh failed:\n{}",
        stderr(&out)
    );
    cross_check_with_bundler(tmp.path(), FAT);
    // The fresh tree classifies like the committed one.
    let fresh = scan_dir(tmp.path());
    let committed = scan_dir(&fixtures());
    let shape = |r: &scan::TreeReport| -> Vec<(String, FileKind, usize, Vec<String>)> {
        r.files
            .iter()
            .map(|f| {
                (
                    f.path.clone(),
                    f.kind,
                    f.all_bundles().count(),
                    f.all_bundles()
                        .flat_map(|b| b.targets.iter().map(|t| t.arch.to_string()))
                        .collect(),
                )
            })
            .collect()
    };
    assert_eq!(shape(&fresh), shape(&committed));
}

#[test]
fn ccob_listing_reads_only_the_prefix_yet_sizes_are_exact() {
    // Sizes from the streamed table equal the sizes of the fully decompressed objects.
    let (sec, bundles) = section_and_bundles(&fixtures().join("libzkern.so"));
    for b in &bundles {
        let un = b.uncompressed(&sec, 1 << 30).unwrap();
        assert_eq!(un.len() as u64, b.uncompressed_size);
        for (e, bytes) in b.code_objects(&un).unwrap() {
            assert_eq!(e.size, bytes.len() as u64);
            assert!(bytes.starts_with(b"\x7fELF"));
        }
    }
}

#[test]
fn demo_tree_has_every_class_and_symlinks_are_not_followed() {
    let r = scan_dir(&demo());
    let kind = |p: &str| r.files.iter().find(|f| f.path == p).map(|f| f.kind);
    assert_eq!(kind("lib/libvadd.so"), Some(FileKind::Symlink));
    assert_eq!(
        r.files
            .iter()
            .find(|f| f.path == "lib/libvadd.so")
            .unwrap()
            .target
            .as_deref(),
        Some("libvadd.so.1")
    );
    assert_eq!(kind("lib/libvadd.so.1.0"), Some(FileKind::FatBinary));
    assert_eq!(
        kind("lib/rocblas/library/TensileLibrary_gfx90a.dat"),
        Some(FileKind::KernelDatabase)
    );
    assert_eq!(kind("share/doc/demo/README.txt"), Some(FileKind::Opaque));
    let db = r
        .files
        .iter()
        .find(|f| f.path == "lib/aotriton.images/amd-gfx90a/flash/attn_fwd.hsaco")
        .unwrap();
    assert_eq!(db.arch.as_deref(), Some("gfx90a"));
    assert_eq!(
        db.database_rule,
        Some(kpack::kerneldb::Rule::AotritonImageDir)
    );
    let miopen = r
        .files
        .iter()
        .find(|f| f.path == "share/miopen/db/gfx90a68.db.txt")
        .unwrap();
    assert_eq!(miopen.arch.as_deref(), Some("gfx90a"), "CU count removed");
    // Arch-independent files next to databases are ordinary files.
    assert_eq!(
        kind("lib/rocblas/library/TensileLibrary.dat"),
        Some(FileKind::Opaque)
    );
    // Symlinked binaries are not counted twice.
    let n_fat = r
        .files
        .iter()
        .filter(|f| f.kind == FileKind::FatBinary)
        .count();
    assert_eq!(r.totals.by_kind[&FileKind::FatBinary].count as usize, n_fat);
    assert!(r.archs["gfx900"] > 0);
}

#[test]
fn single_thread_and_parallel_scans_agree() {
    let a = scan::scan(
        &demo(),
        &ScanOptions {
            threads: 1,
            ..Default::default()
        },
        &NoEvents,
    )
    .unwrap();
    let b = scan::scan(
        &demo(),
        &ScanOptions {
            threads: 2,
            ..Default::default()
        },
        &NoEvents,
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}
