//! Memory bounded by the work in flight (#32): readers of a large archive keep only
//! a window of its pages resident, whatever the number of frames they go through.

mod common;
use common::*;
use std::path::Path;

/// An archive of `n` incompressible frames of `each` bytes (random: zstd stores
/// them, so the file holds every byte).
fn write_archive(p: &Path, n: usize, each: usize) -> u64 {
    use kpack::kpack::archive::{ArchiveMeta, ArchiveWriter, Scheme};
    let meta = ArchiveMeta {
        group_name: "g".into(),
        gfx_arch_family: "gfx900".into(),
        gfx_arches: vec!["gfx900".into()],
    };
    let w = ArchiveWriter::create(p, meta, Scheme::ZstdPerKernel, 1).unwrap();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut data = vec![0u8; each];
    for i in 0..n {
        for b in data.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
        }
        w.add(&format!("lib/libbig.so#{i}"), "gfx900", &data)
            .unwrap();
    }
    w.finish().unwrap().file_size
}

#[test]
fn reading_every_frame_of_a_large_archive_keeps_a_window_of_it_resident() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("big.kpack");
    // 160 MiB in 16,384 frames of 10 KiB: pages around each frame read stay mapped
    // unless the reader drops them (the kernel maps up to 64 KiB around a fault):
    // before readers released whole windows, verify peaked at 93 MiB and extract
    // --all at 184 MiB here; now both stay near 57 MiB (a 32 MiB window).
    let bytes = write_archive(&a, 16 << 10, 10 << 10);
    assert!(bytes > 160 << 20, "{bytes}");
    let a = a.to_str().unwrap();
    let Some((o, rss)) = kpack_peak_rss(&["verify", a, "--no-tui"]) else {
        return;
    };
    assert_eq!(o.status.code(), Some(0), "verify: {}", stderr(&o));
    assert!(
        rss < 80 << 10,
        "verify of a {} MiB archive peaked at {} MiB",
        bytes >> 20,
        rss >> 10
    );
    // extract --all reads every frame too (and writes each one out).
    let out = tmp.path().join("out");
    let Some((o, rss)) = kpack_peak_rss(&["extract", a, "--all", "-o", out.to_str().unwrap()])
    else {
        return;
    };
    assert_eq!(o.status.code(), Some(0), "extract --all: {}", stderr(&o));
    assert_eq!(
        std::fs::read_dir(out.join("lib")).unwrap().count(),
        16 << 10
    );
    assert!(
        rss < 80 << 10,
        "extract --all of a {} MiB archive peaked at {} MiB",
        bytes >> 20,
        rss >> 10
    );
}
