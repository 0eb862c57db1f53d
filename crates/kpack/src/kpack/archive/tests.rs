//! Tests of the archive: round trips, hostile inputs, determinism.

use super::*;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn meta() -> ArchiveMeta {
    ArchiveMeta {
        group_name: "test".into(),
        gfx_arch_family: "gfx90X".into(),
        gfx_arches: vec!["gfx900".into(), "gfx90a:xnack+".into()],
    }
}

fn write(dir: &Path, scheme: Scheme, kernels: &[(&str, &str, Vec<u8>)]) -> PathBuf {
    let p = dir.join("a.kpack");
    let w = ArchiveWriter::create(&p, meta(), scheme, 3).unwrap();
    for (k, a, d) in kernels {
        w.add(k, a, d).unwrap();
    }
    w.finish().unwrap();
    p
}

fn sample() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    vec![
        ("lib/libx.so#1", "gfx900", vec![1u8; 5000]),
        ("lib/libx.so#0", "gfx90a:xnack+", b"hello".repeat(300)),
        (
            "bin/app#0",
            "gfx900",
            (0..=255u8).cycle().take(3000).collect(),
        ),
        ("lib/libx.so#0", "gfx900", vec![]),
    ]
}

#[test]
fn round_trip_both_schemes_with_sorted_dense_ordinals() {
    for scheme in [Scheme::None, Scheme::ZstdPerKernel] {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), scheme, &sample());
        let a = Archive::open(&p).unwrap();
        assert_eq!(a.index.meta, meta());
        assert_eq!(a.index.compression_scheme, scheme);
        let keys: Vec<(&str, &str, u32)> = a
            .index
            .kernels
            .iter()
            .map(|k| (&*k.key, &*k.arch, k.ordinal))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("bin/app#0", "gfx900", 0),
                ("lib/libx.so#0", "gfx900", 1),
                ("lib/libx.so#0", "gfx90a:xnack+", 2),
                ("lib/libx.so#1", "gfx900", 3)
            ]
        );
        for (k, ar, data) in sample() {
            let e = a.entry(k, ar).unwrap();
            assert_eq!(&*a.kernel(e).unwrap(), &data[..]);
        }
        assert!(a.entry("lib/libx.so#2", "gfx900").is_none());
        assert_eq!(a.verify(), Vec::<String>::new());
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644
        );
        // Only spool files could be left behind: none are.
        let left: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }
}

#[test]
fn output_does_not_depend_on_insertion_order() {
    let d = tempfile::tempdir().unwrap();
    let mut s = sample();
    let a = std::fs::read(write(d.path(), Scheme::ZstdPerKernel, &s)).unwrap();
    s.reverse();
    let b = std::fs::read(write(d.path(), Scheme::ZstdPerKernel, &s)).unwrap();
    assert_eq!(a, b);
}

#[test]
fn duplicate_kernel_is_rejected() {
    let d = tempfile::tempdir().unwrap();
    let w = ArchiveWriter::create(&d.path().join("x.kpack"), meta(), Scheme::None, 3).unwrap();
    w.add("a#0", "gfx900", b"x").unwrap();
    assert!(
        w.add("a#0", "gfx900", b"y")
            .unwrap_err()
            .to_string()
            .contains("twice")
    );
    assert!(
        w.add("a", "gfx900", b"y")
            .unwrap_err()
            .to_string()
            .contains("#<TU index>")
    );
    assert!(
        w.add("../a#0", "gfx900", b"y")
            .unwrap_err()
            .to_string()
            .contains("..")
    );
    assert!(w.add("b#0", "gfx/900", b"y").is_err());
    assert_eq!(
        w.add("bin\\x#0", "gfx900", b"y")
            .map(|_| w.progress().0)
            .unwrap(),
        2
    );
}

#[test]
fn empty_archive_is_valid() {
    for scheme in [Scheme::None, Scheme::ZstdPerKernel] {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), scheme, &[]);
        let a = Archive::open(&p).unwrap();
        assert!(a.index.kernels.is_empty());
        assert!(a.verify().is_empty());
    }
}

#[test]
fn higher_levels_are_not_larger_and_compressible_data_shrinks() {
    let d = tempfile::tempdir().unwrap();
    let data = b"ABCDEFGH".repeat(20_000);
    let sizes: Vec<u64> = [1, 19]
        .iter()
        .map(|&lvl| {
            let p = d.path().join(format!("l{lvl}.kpack"));
            let w = ArchiveWriter::create(&p, meta(), Scheme::ZstdPerKernel, lvl).unwrap();
            w.add("k#0", "gfx900", &data).unwrap();
            w.finish().unwrap().file_size
        })
        .collect();
    assert!(sizes[1] <= sizes[0]);
    assert!(sizes[0] * 5 < data.len() as u64);
}

#[test]
fn path_safety() {
    assert!(safe_relative_path("lib/a.so#0").is_ok());
    let esc = |s: &str| s.to_string();
    for (bad, why) in [
        ("../x#0", UnsafePath::Escapes(esc("../x"))),
        ("/etc/passwd#0", UnsafePath::Absolute),
        ("a/../../b#0", UnsafePath::Escapes(esc("a/../../b"))),
        ("a\0b#0", UnsafePath::Nul),
        ("a//b#0", UnsafePath::EmptyComponent(esc("a//b"))),
        ("#0", UnsafePath::Empty),
        ("a\\b#0", UnsafePath::Backslash),
        ("./a#0", UnsafePath::EmptyComponent(esc("./a"))),
        // Escaped spellings are checked as the bytes they stand for.
        (
            "\\x2e\\x2e/x\\xff#0",
            UnsafePath::Escapes(esc("\\x2e\\x2e/x\\xff")),
        ),
        ("a\\x00\\xff#0", UnsafePath::Nul),
        ("\\x2fetc\\xff#0", UnsafePath::Absolute),
        ("a\\\\b\\xff#0", UnsafePath::Backslash),
    ] {
        assert_eq!(safe_relative_path(bad), Err(why), "{bad:?}");
    }
    assert_eq!(
        safe_arch("gfx/90a"),
        Err(UnsafePath::Arch("gfx/90a".into()))
    );
    assert_eq!(safe_arch(".."), Err(UnsafePath::Arch("..".into())));
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let p = safe_relative_path("lib/v\\xff.so#0").unwrap();
        assert_eq!(p.as_os_str().as_bytes(), b"lib/v\xff.so");
    }
}

#[test]
fn corrupt_headers_and_tocs_are_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    let good = std::fs::read(write(d.path(), Scheme::ZstdPerKernel, &sample())).unwrap();
    let check = |bytes: &[u8], needle: &str| {
        let e = parse_index(bytes).unwrap_err();
        assert!(e.to_string().contains(needle), "{e} (wanted {needle:?})");
    };
    check(b"", "empty");
    check(&good[..8], "truncated header");
    let mut b = good.clone();
    b[0] = b'X';
    check(&b, "bad magic");
    let mut b = good.clone();
    b[4] = 99;
    check(&b, "version 99");
    let mut b = good.clone();
    b[8..16].copy_from_slice(&(good.len() as u64 + 5).to_le_bytes());
    check(&b, "outside the file");
    let mut b = good.clone();
    let toc = u64::from_le_bytes(good[8..16].try_into().unwrap()) as usize;
    b[toc] = 0xc1; // never-used msgpack byte
    check(&b, "MessagePack");
    let mut b = good.clone();
    b[toc] = 0x93; // array, not map
    check(&b, "TOC is an array, expected a map");
    // Frame count above the bound.
    let mut b = good.clone();
    b[0x40..0x44].copy_from_slice(&2_000_000u32.to_le_bytes());
    check(&b, "bound");
    // Frame length past the blob.
    let mut b = good.clone();
    b[0x44..0x48].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    check(&b, "run past");
    // Every truncation: an error, never a panic.
    for n in 0..good.len() {
        let _ = parse_index(&good[..n]);
    }
}

fn toc_bytes(v: serde_json::Value) -> Vec<u8> {
    let toc = rmp_serde::to_vec_named(&v).unwrap();
    let mut f = Vec::new();
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&0x44u64.to_le_bytes());
    f.resize(0x40, 0);
    f.extend_from_slice(b"DATA");
    f.extend_from_slice(&toc);
    f
}

#[test]
fn toc_field_rules() {
    let base = |toc: serde_json::Value, scheme: &str| {
        serde_json::json!({"group_name": "g", "gfx_arch_family": "f", "gfx_arches": ["gfx900"],
            "compression_scheme": scheme, "toc": toc, "blobs": [{"offset": 0x40, "size": 4}],
            "zstd_offset": 0x40, "zstd_size": 4})
    };
    let ok = toc_bytes(base(
        serde_json::json!({"a#0": {"gfx900": {"type": "hsaco", "ordinal": 0}}}),
        "none",
    ));
    let idx = parse_index(&ok).unwrap();
    assert_eq!(idx.kernels[0].size, 4);
    let e = |v| parse_index(&toc_bytes(v)).unwrap_err().to_string();
    assert!(
        e(base(
            serde_json::json!({"a#0": {"gfx900": {"ordinal": 5}}}),
            "none"
        ))
        .contains("out of range")
    );
    assert!(
        e(base(
            serde_json::json!({"a#0": {"gfx900": {"ordinal": -1}}}),
            "none"
        ))
        .contains("negative")
    );
    assert!(
        e(base(
            serde_json::json!({"a#0": {"gfx900": {"ordinal": 0}}}),
            "lz4"
        ))
        .contains("unknown compression_scheme")
    );
    assert!(
        e(base(
            serde_json::json!({"a#0": {"gfx900": {"ordinal": 0}}}),
            "zstd-per-kernel"
        ))
        .contains("bound")
    );
    assert!(
        e(base(
            serde_json::json!({"a#0": {"gfx900": {"type": "elf", "ordinal": 0}}}),
            "none"
        ))
        .contains("hsaco")
    );
    assert!(e(serde_json::json!({"group_name": "g"})).contains("no gfx_arch_family"));
    assert!(e(serde_json::json!({"group_name": 3, "gfx_arch_family": "f", "gfx_arches": [], "toc": {}})).contains("group_name is an integer, expected a string"));
}

#[test]
fn zstd_frame_larger_than_original_size_is_caught() {
    let frame = encode_kernel(&[7u8; 10_000], Scheme::ZstdPerKernel, 3).unwrap();
    assert!(
        decompress_frame(&frame, 100)
            .unwrap_err()
            .what
            .contains("more than")
    );
    assert!(
        decompress_frame(&frame, 20_000)
            .unwrap_err()
            .what
            .contains("decodes to")
    );
    assert_eq!(decompress_frame(&frame, 10_000).unwrap().len(), 10_000);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn random_kernel_sets_round_trip(
        set in proptest::collection::btree_map(
            ("[a-z]{1,6}(/[a-z]{1,6}){0,2}#[0-9]", prop_oneof!["gfx900", "gfx90a:xnack\\+", "gfx1100"]),
            proptest::collection::vec(any::<u8>(), 0..2000),
            0..12),
        zstd in any::<bool>(),
    ) {
        let scheme = if zstd { Scheme::ZstdPerKernel } else { Scheme::None };
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("p.kpack");
        let w = ArchiveWriter::create(&p, meta(), scheme, 1).unwrap();
        for ((k, a), data) in &set {
            w.add(k, a, data).unwrap();
        }
        w.finish().unwrap();
        let ar = Archive::open(&p).unwrap();
        prop_assert_eq!(ar.index.kernels.len(), set.len());
        for ((k, a), data) in &set {
            let e = ar.entry(k, a).unwrap();
            prop_assert_eq!(&*ar.kernel(e).unwrap(), &data[..]);
        }
    }
}

/// An archive of scheme `none` whose TOC body (the `toc` map) is written by
/// `toc_map`, with `blobs` 2-byte blobs at 0x40: for TOCs JSON cannot express
/// (repeated keys) or would take long to build.
fn raw_archive(toc_map: impl FnOnce(&mut Vec<u8>), blobs: u64) -> Vec<u8> {
    use rmp::encode::{write_array_len, write_map_len, write_str, write_uint};
    let mut toc = Vec::new();
    write_map_len(&mut toc, 6).unwrap();
    for (k, v) in [("group_name", "g"), ("gfx_arch_family", "f")] {
        write_str(&mut toc, k).unwrap();
        write_str(&mut toc, v).unwrap();
    }
    write_str(&mut toc, "gfx_arches").unwrap();
    write_array_len(&mut toc, 1).unwrap();
    write_str(&mut toc, "gfx900").unwrap();
    write_str(&mut toc, "compression_scheme").unwrap();
    write_str(&mut toc, "none").unwrap();
    write_str(&mut toc, "toc").unwrap();
    toc_map(&mut toc);
    write_str(&mut toc, "blobs").unwrap();
    write_array_len(&mut toc, blobs as u32).unwrap();
    for b in 0..blobs {
        write_map_len(&mut toc, 2).unwrap();
        write_str(&mut toc, "offset").unwrap();
        write_uint(&mut toc, 0x40 + 2 * b).unwrap();
        write_str(&mut toc, "size").unwrap();
        write_uint(&mut toc, 2).unwrap();
    }
    let mut f = Vec::new();
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&(0x40 + 2 * blobs.max(2)).to_le_bytes());
    f.resize(0x40, 0);
    f.resize(0x40 + 2 * blobs.max(2) as usize, b'A');
    f.extend_from_slice(&toc);
    f
}

/// Issue #27 item 19: the same (key, arch) twice in the TOC (a MessagePack map may
/// repeat a key) with different bytes is refused: which one a reader returns would
/// depend on the reader.
#[test]
fn a_key_twice_in_the_toc_is_refused() {
    use rmp::encode::{write_map_len, write_str, write_uint};
    let f = raw_archive(
        |toc| {
            write_map_len(toc, 2).unwrap();
            for ordinal in [0u64, 1] {
                write_str(toc, "a#0").unwrap();
                write_map_len(toc, 1).unwrap();
                write_str(toc, "gfx900").unwrap();
                write_map_len(toc, 1).unwrap();
                write_str(toc, "ordinal").unwrap();
                write_uint(toc, ordinal).unwrap();
            }
        },
        2,
    );
    let e = parse_index(&f).unwrap_err().to_string();
    assert!(e.contains("toc[\"a#0\"][\"gfx900\"] appears twice"), "{e}");
}

/// Issue #27 item 7: a TOC holding one huge key under thousands of targets would
/// have every entry carry a copy of it (a 1 MB archive took 2 GB): refused at open,
/// before anything is multiplied.
#[test]
fn a_key_repeated_under_thousands_of_targets_is_refused() {
    use rmp::encode::{write_map_len, write_str, write_uint};
    let f = raw_archive(
        |toc| {
            write_map_len(toc, 1).unwrap();
            write_str(toc, &format!("{}#0", "k".repeat(100_000))).unwrap();
            write_map_len(toc, 5000).unwrap();
            for i in 0..5000 {
                write_str(toc, &format!("gfx{i}")).unwrap();
                write_map_len(toc, 1).unwrap();
                write_str(toc, "ordinal").unwrap();
                write_uint(toc, 0).unwrap();
            }
        },
        1,
    );
    assert!(f.len() < 300_000);
    let e = parse_index(&f).unwrap_err().to_string();
    assert!(e.contains("TOC keys add up to"), "{e}");
}

#[test]
fn aliases_share_a_frame_and_are_told_from_conflicting_ordinals() {
    for scheme in [Scheme::None, Scheme::ZstdPerKernel] {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.kpack");
        let w = ArchiveWriter::create(&p, meta(), scheme, 3)
            .unwrap()
            .resolving();
        w.add("lib/a.so#0", "gfx90a", b"plain".as_slice()).unwrap();
        w.add("lib/a.so#1", "gfx90a:xnack-", b"minus".as_slice())
            .unwrap();
        w.add("lib/a.so#1", "gfx90a:xnack+", b"plus".as_slice())
            .unwrap();
        // An alias of a kernel never added is refused at finish.
        let bad = ArchiveWriter::create(&d.path().join("b.kpack"), meta(), scheme, 3).unwrap();
        bad.alias("lib/a.so#0", "gfx90a:xnack-", "gfx90a").unwrap();
        assert!(
            bad.finish()
                .unwrap_err()
                .to_string()
                .contains("holds no code object")
        );
        let s = w.finish().unwrap();
        assert_eq!(s.code_objects, 3, "aliases are no kernels of their own");
        let a = Archive::open(&p).unwrap();
        assert!(a.verify().is_empty(), "{:?}", a.verify());
        // The plain frame listed again under both variants, same ordinal and bytes.
        let plain = a.entry("lib/a.so#0", "gfx90a").unwrap();
        for t in ["gfx90a:xnack-", "gfx90a:xnack+"] {
            let e = a.entry("lib/a.so#0", t).unwrap();
            assert_eq!(e.ordinal, plain.ordinal);
            assert_eq!(e.alias_of.as_deref(), Some("gfx90a"));
            assert_eq!(a.kernel(e).unwrap().as_ref(), b"plain");
        }
        assert!(plain.alias_of.is_none());
        assert!(
            a.index
                .meta
                .gfx_arches
                .contains(&"gfx90a:xnack-".to_string())
        );
    }
    // Two keys on one ordinal, or a frame under a target its code cannot run under,
    // are no alias: verify says so.
    for toc in [
        serde_json::json!({"a#0": {"gfx900": {"type": "hsaco", "ordinal": 0}},
                           "b#0": {"gfx900": {"type": "hsaco", "ordinal": 0}}}),
        serde_json::json!({"a#0": {"gfx90a:xnack+": {"type": "hsaco", "ordinal": 0},
                                   "gfx90a:xnack-": {"type": "hsaco", "ordinal": 0}}}),
    ] {
        let file = toc_bytes(
            serde_json::json!({"group_name": "g", "gfx_arch_family": "f",
            "gfx_arches": ["gfx900", "gfx90a:xnack+", "gfx90a:xnack-"],
            "compression_scheme": "none", "toc": toc,
            "blobs": [{"offset": 0x40, "size": 4}]}),
        );
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c.kpack");
        std::fs::write(&p, &file).unwrap();
        let a = Archive::open(&p).unwrap();
        assert!(a.index.kernels.iter().all(|k| !k.is_alias()));
        assert!(
            a.verify().iter().any(|f| f.contains("used twice")),
            "{:?}",
            a.verify()
        );
    }
}

/// #32 / #30 item 3: a cancel is seen inside a kernel's compression, every
/// [`ENCODE_CHUNK`] bytes, not only between kernels (one 50 MB kernel at level max
/// took a minute to notice); the frame does not depend on whether anyone asked, and
/// a context left with an unfinished frame compresses the next kernel cleanly.
#[test]
fn a_cancel_lands_within_one_chunk_of_a_kernel() {
    let data: Vec<u8> = (0..4 * ENCODE_CHUNK)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let looks = std::cell::Cell::new(0);
    let stopped = encode_kernel_until(&data, Scheme::ZstdPerKernel, 19, &|| {
        looks.set(looks.get() + 1);
        looks.get() > 1
    })
    .unwrap();
    assert!(stopped.is_none());
    assert_eq!(looks.get(), 2, "stopped at the second chunk");
    let a = encode_kernel(&data, Scheme::ZstdPerKernel, 19).unwrap();
    let b = encode_kernel_until(&data, Scheme::ZstdPerKernel, 19, &|| false)
        .unwrap()
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(zstd::decode_all(&a[..]).unwrap(), data);
    // A writer whose token is cancelled refuses to add, saying so.
    let d = tempfile::tempdir().unwrap();
    let cancel = crate::event::CancelToken::new();
    let w = ArchiveWriter::create(&d.path().join("a.kpack"), meta(), Scheme::ZstdPerKernel, 3)
        .unwrap()
        .cancelled_by(cancel.clone());
    w.add("lib/a.so#0", "gfx900", &data).unwrap();
    cancel.cancel();
    assert!(matches!(
        w.add("lib/a.so#1", "gfx900", &data),
        Err(crate::Error::Cancelled)
    ));
}

/// `--level max` is zstd's highest level with long-distance matching and a window
/// fitted to the kernel, never larger than a default decoder accepts (#28 item 6: it
/// was level 19): its frames name a window of at most 2^27 and decode with zstd's
/// default limits. (On code objects of a few MiB levels 19-22 give frames within
/// bytes of each other once the window fits; the difference is the guarantee.)
#[test]
fn level_max_is_the_real_maximum_within_the_readers_window() {
    use crate::kpack::archive::write::encode_kernel;
    // 3 MiB: a 64 KiB block of pseudo-random bytes repeated with small changes, the
    // shape of many similar kernels in one code object.
    let block = crate::testdata::noise(64 << 10);
    let mut data = Vec::new();
    for i in 0..48u8 {
        let mut b = block.clone();
        b[usize::from(i) * 97] ^= i;
        data.extend_from_slice(&b);
    }
    let max = encode_kernel(&data, Scheme::ZstdPerKernel, LEVEL_MAX).unwrap();
    let l3 = encode_kernel(&data, Scheme::ZstdPerKernel, 3).unwrap();
    assert!(max.len() < l3.len(), "{} vs {}", max.len(), l3.len());
    let mut d = zstd::bulk::Decompressor::new().unwrap();
    assert_eq!(d.decompress(&max, data.len()).unwrap(), data);
    // The frame header's window: fitted to the 3 MiB kernel (2^22 ≥ 3 MiB), within 2^27.
    let params = zstd::zstd_safe::get_frame_content_size(&max).unwrap();
    assert_eq!(params, Some(data.len() as u64));
    let desc = max[4];
    let single_segment = desc & 0x20 != 0;
    if !single_segment {
        let window_log = 10 + u32::from(max[5] >> 3);
        assert!((22..=MAX_WINDOW_LOG).contains(&window_log), "{window_log}");
    }
    assert_eq!(LEVEL_MAX, zstd::zstd_safe::max_c_level());
}

#[test]
fn the_writer_refuses_with_typed_errors_naming_the_archive() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("w.kpack");
    let w = ArchiveWriter::create(&p, meta(), Scheme::ZstdPerKernel, 3).unwrap();
    let refused = |r: crate::Result<u64>| match r {
        Err(crate::Error::Archive { path, error }) => {
            assert_eq!(path, p);
            error
        }
        other => panic!("not an archive refusal: {other:?}"),
    };
    assert_eq!(
        refused(w.add("lib/a.so", "gfx90a", b"x".as_slice())),
        WriteError::KeyWithoutTu("lib/a.so".into())
    );
    assert!(matches!(
        refused(w.add("../a.so#0", "gfx90a", b"x".as_slice())),
        WriteError::UnsafeKey { .. }
    ));
    assert_eq!(
        refused(w.add("lib/a.so#0", "gfx/90a", b"x".as_slice())),
        WriteError::NotTargetId("gfx/90a".into())
    );
    w.add("lib/a.so#0", "gfx90a", b"x".as_slice()).unwrap();
    assert_eq!(
        refused(w.add("lib/a.so#0", "gfx90a", b"y".as_slice())),
        WriteError::AddedTwice {
            key: "lib/a.so#0".into(),
            arch: "gfx90a".into()
        }
    );
    // The message a user sees names the archive, then the problem.
    let e = w.add("lib/a.so#0", "gfx90a", b"y".as_slice()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: code object lib/a.so#0 @ gfx90a added twice",
            p.display()
        )
    );
}

/// A frame is held in pieces of at most one chunk while it waits for the spool: the
/// pieces are the whole frame, in order, for a kernel compressing to several chunks,
/// to less than one, and to nothing at all (stored as is).
#[test]
fn a_compressed_kernel_is_held_in_chunks_that_are_the_frame() {
    use crate::kpack::archive::write::encode_chunked;
    // Barely compressible: the frame spans several chunks.
    let data = crate::testdata::noise(5 * ENCODE_CHUNK + 7);
    for (bytes, scheme) in [
        (&data[..], Scheme::ZstdPerKernel),
        (&data[..1000], Scheme::ZstdPerKernel),
        (&data[..], Scheme::None),
        (&[][..], Scheme::None),
    ] {
        let c = encode_chunked(bytes, scheme, 3, &|| false)
            .unwrap()
            .unwrap();
        assert!(c.0.iter().all(|p| !p.is_empty() && p.len() <= ENCODE_CHUNK));
        assert!(c.0.iter().rev().skip(1).all(|p| p.len() == ENCODE_CHUNK));
        let whole = c.0.concat();
        assert_eq!(c.len(), whole.len() as u64);
        match scheme {
            Scheme::ZstdPerKernel => {
                assert_eq!(zstd::decode_all(&whole[..]).unwrap(), bytes);
                if bytes.len() > 4 * ENCODE_CHUNK {
                    assert!(c.0.len() > 4, "{} pieces", c.0.len());
                }
            }
            Scheme::None => assert_eq!(whole, bytes),
        }
    }
}

/// A kernel read from a stream that hands on odd-sized reads compresses to the
/// same frame as the same bytes at hand (the encoder sees the same pieces), at a
/// plain level and at one whose window fits the kernel; what the caller is shown is
/// the kernel; a reader that ends early is an error, not a short frame.
#[test]
fn a_kernel_read_as_a_stream_makes_the_same_frame() {
    use crate::kpack::archive::write::{Source, encode_source};
    /// Reads of at most 1000 bytes.
    struct Dribble<'a>(&'a [u8]);
    impl std::io::Read for Dribble<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.0.len()).min(1000);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let data: Vec<u8> = (0..3 * ENCODE_CHUNK + 4321)
        .map(|i| ((i / 3) as u8) ^ ((i >> 11) as u8))
        .collect();
    for (level, scheme) in [
        (3, Scheme::ZstdPerKernel),
        (LEVEL_FIT_WINDOW, Scheme::ZstdPerKernel),
        (3, Scheme::None),
    ] {
        let at_hand = encode_source(Source::Bytes(&data), scheme, level, &|| false, &mut |_| {})
            .unwrap()
            .unwrap();
        let mut seen = Vec::new();
        let mut r = Dribble(&data);
        let n = data.len() as u64;
        let streamed = encode_source(
            Source::Reader(&mut r, n),
            scheme,
            level,
            &|| false,
            &mut |p| seen.extend_from_slice(p),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            streamed.0.concat(),
            at_hand.0.concat(),
            "level {level} {scheme:?}"
        );
        assert_eq!(seen, data);
        let mut short = Dribble(&data[..1000]);
        assert!(
            encode_source(
                Source::Reader(&mut short, n),
                scheme,
                level,
                &|| false,
                &mut |_| {}
            )
            .is_err()
        );
    }
}
