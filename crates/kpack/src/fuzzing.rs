//! Entry points for the fuzz targets (`fuzz/`) and the corpus replay test
//! (`tests/fuzz_replay.rs`). Each takes arbitrary bytes and must never panic; where a
//! parse succeeds it also checks properties that must hold for any input.

#![allow(clippy::panic)] // Property failures must crash the fuzzer.

use crate::bundle;
use crate::elf;
use crate::kpack::Marker;
use crate::kpack::archive;
use crate::scan;

/// Offload bundle and CCOB walk; a successful walk's code objects are in range.
pub fn bundle_walk(data: &[u8]) {
    if let Ok(bundles) = bundle::walk_section(data) {
        for b in &bundles {
            assert!(b.offset + b.stored_size <= data.len() as u64);
            if let Ok(un) = b.uncompressed(data, 1 << 24) {
                assert_eq!(un.len() as u64, b.uncompressed_size);
                let _ = b.code_objects(&un);
            }
        }
    }
}

/// ELF fat-binary reader (and static archives).
pub fn elf_inspect(data: &[u8]) {
    let data = elf::AlignedBytes::copy_of(data);
    let data = data.as_slice();
    if let Ok(elf::ElfContent::Fat(fat)) = elf::inspect(data) {
        for w in &fat.wrappers {
            if let Some(b) = w.bundle {
                assert!(b < fat.bundles.len());
            }
        }
    }
    let _ = elf::inspect_static_archive(data);
}

/// Whole-file classification, as the scan does it.
pub fn classify(data: &[u8]) {
    let data = elf::AlignedBytes::copy_of(data);
    let mut r = scan::FileReport::for_bytes("fuzz", data.as_slice().len() as u64);
    scan::classify_bytes(&mut r, data.as_slice(), false);
    scan::find_embedded(&mut r, data.as_slice(), false, &|_, _| {});
}

/// The embedded-code finder: over any bytes, what it finds lies inside them, in
/// order, without overlapping, each object reading back as what it claims.
pub fn embedded(data: &[u8]) {
    let whole = vec![("file".to_string(), 0, data.len() as u64)];
    for ranges in [crate::embedded::data_ranges(data), whole] {
        let (found, _) = crate::embedded::find(data, &ranges);
        let mut end = 0u64;
        for e in &found {
            assert!(e.offset >= end && e.offset + e.size <= data.len() as u64);
            end = e.offset + e.size.max(1);
            assert!(!e.targets.is_empty());
        }
    }
    let _ = crate::embedded::find_in_archive(data);
}

/// `.kpack` reader: index, then every kernel decodes or errors; verify never panics.
pub fn kpack_reader(data: &[u8]) {
    if let Ok(idx) = archive::parse_index(data) {
        for k in &idx.kernels {
            assert!(k.offset + k.compressed_size <= data.len() as u64);
        }
        if let Ok(a) =
            archive::Archive::from_bytes(std::path::Path::new("fuzz.kpack"), data.to_vec())
        {
            let _ = a.verify();
        }
    }
}

/// Marker decoding; a decoded marker re-encodes to something that decodes equal.
pub fn marker(data: &[u8]) {
    if let Ok(m) = Marker::decode(data) {
        assert_eq!(Marker::decode(&m.encode()).ok(), Some(m));
    }
}

/// Host-only rewrite: parse, plan and verify; a successful rewrite re-parses as a
/// host-only binary whose wrappers all say HIPK.
pub fn rewrite(data: &[u8]) {
    let marker = Marker {
        kpack_search_paths: vec!["../.kpack/fuzz_@GFXARCH@.kpack".into()],
        kernel_name: "lib/fuzz.so".into(),
    };
    // The loader's view of any bytes: faults or nothing, never a panic; the image
    // the rewrite returns always reaches its marker.
    let _ = elf::loaded::loaded_view(data);
    if let Ok(r) = elf::rewrite::plan_rewrite(data, &marker) {
        assert!(
            elf::loaded::loaded_view(&r.bytes)
                .is_ok_and(|v| v.is_some_and(|v| v.faults.is_empty()))
        );
        let out = elf::AlignedBytes::copy_of(&r.bytes);
        match elf::inspect(out.as_slice()) {
            Ok(elf::ElfContent::Fat(fat)) => {
                assert!(fat.host_only);
                assert!(
                    fat.wrappers
                        .iter()
                        .all(|w| w.magic == elf::WrapperMagic::Hipk)
                );
            }
            other => panic!("rewritten image is not a host-only binary: {other:?}"),
        }
        // A second rewrite must refuse.
        assert!(elf::rewrite::plan_rewrite(&r.bytes, &marker).is_err());
        // Re-pointing it (as a re-pack does) keeps a host-only binary whose marker
        // decodes to the new one.
        let other = Marker {
            kpack_search_paths: vec!["../.kpack/a.kpack".into(), "../.kpack/b.kpack".into()],
            kernel_name: "lib/other.so".into(),
        };
        let again = elf::remark::replace_marker(&r.bytes, &other)
            .unwrap_or_else(|e| panic!("a fresh rewrite cannot be re-pointed: {e}"));
        let again = elf::AlignedBytes::copy_of(&again);
        match elf::inspect(again.as_slice()) {
            Ok(elf::ElfContent::Fat(fat)) => {
                assert!(fat.host_only);
                assert_eq!(fat.marker.as_ref(), Some(&other));
            }
            other => panic!("re-pointed image is not a host-only binary: {other:?}"),
        }
    } else {
        // Arbitrary images: replacing a marker errors or yields a sound image.
        if let Ok(out) = elf::remark::replace_marker(data, &marker) {
            let before = elf::rewrite::structural_faults(data);
            assert!(
                elf::rewrite::structural_faults(&out)
                    .iter()
                    .all(|f| before.contains(f))
            );
        }
    }
}

/// The pack ledger's reader: arbitrary bytes parse or give an error naming the file.
pub fn ledger(data: &[u8]) {
    let p = std::path::Path::new("fuzz-ledger.json");
    match crate::kpack::ledger::Ledger::parse(p, data) {
        Ok(l) => {
            let again = crate::kpack::ledger::Ledger::parse(p, &l.to_json());
            assert_eq!(again.ok(), Some(l));
        }
        Err(e) => assert!(e.to_string().starts_with("fuzz-ledger.json: ")),
    }
}

/// Ninja log / phc trace parser, analysis and export; feeding the bytes in two pieces
/// gives the same trace as feeding them at once.
pub fn ninja_log(data: &[u8]) {
    let t = crate::trace::parse(data);
    for b in &t.builds {
        let a = crate::trace::analysis::analyse(b);
        assert!(a.peak_parallelism <= b.jobs.len());
        let lanes = crate::trace::analysis::lanes(&b.jobs);
        assert_eq!(lanes.len(), b.jobs.len());
        for j in &b.jobs {
            // Every accessor reads inside the build's text; steps name their object.
            let name = b.name(j);
            let _ = (b.hash(j), b.label(j), b.names(j).count());
            if let Some(o) = b.object(j) {
                assert!(name.starts_with(o));
            }
            if let Some(arch) = b.arch(j) {
                assert!(name.ends_with(arch));
            }
        }
    }
    let _ = crate::trace::chrome::export(&t);
    let mid = data.len() / 2;
    let mut p = crate::trace::TraceParser::new();
    p.feed(&data[..mid]);
    p.feed(&data[mid..]);
    p.finish();
    assert_eq!(p.trace().builds, t.builds);
}

/// phc's readers: the driver's `-###` output (plan, target matching) and a command
/// line (analysis, device and host lines). The input's first line is the command
/// line (split on spaces), the rest the probe output.
pub fn phc(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (cmd, probe) = text.split_once('\n').unwrap_or((&text, ""));
    let argv: Vec<String> = cmd.split(' ').map(str::to_string).collect();
    if let Ok(line) = crate::phc::args::analyse(&argv) {
        assert!(line.archs.len() >= 2);
        let out = std::path::Path::new("/t/x.out");
        let d = crate::phc::args::device_args(&line, &line.archs[0], &[], out);
        assert!(d.iter().any(|a| a == "--offload-device-only"));
        let h = crate::phc::args::host_args(&line, Some(out), &[]);
        assert!(h.iter().any(|a| a == "--offload-host-only"));
        let r = crate::phc::args::host_args(&line, None, &[]);
        assert!(r.iter().any(|a| a == "--offload-host-only"));
        assert!(!r.iter().any(|a| a == "-fcuda-include-gpubinary"));
        if let Ok(plan) = crate::phc::probe::read_plan(probe, |_| true)
            && let Ok(order) = crate::phc::probe::match_targets(&plan.targets, &line.archs)
        {
            assert_eq!(order.len(), line.archs.len() + 1);
            assert_eq!(order.iter().filter(|o| o.is_none()).count(), 1);
        }
    }
    let _ = crate::phc::args::clang_hash_cuid("/x", &[], &argv);
    let _ = crate::phc::probe::read_plan(probe, |_| true);
    let _ = crate::phc::jobserver::advertised(cmd);
    let _ = crate::phc::jobserver::local_slots(cmd, 4, 2);
    // A hipcc-cmd line: words never contain a blank unless it was quoted or escaped.
    if let Some(words) = crate::phc::probe::shell_words(cmd)
        && !cmd.contains(['\'', '"', '\\'])
    {
        assert!(words.iter().all(|w| !w.contains([' ', '\t'])));
        assert_eq!(
            words,
            cmd.split([' ', '\t'])
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
        );
    }
    let _ = crate::phc::probe::hipcc_command(probe);
}

/// Text inputs of the artifact workflow: `artifact_manifest.txt`, the combine
/// configuration, and paths through the kernel-database handlers.
pub fn artifact_texts(data: &[u8]) {
    use crate::artifacts::manifest::{manifest_text, parse_manifest};
    if let Ok(m) = parse_manifest(data) {
        for p in &m {
            assert!(!p.starts_with('/') && !p.contains('\\'));
            assert!(p.split('/').all(|c| !c.is_empty() && c != "." && c != ".."));
        }
        assert_eq!(parse_manifest(manifest_text(&m).as_bytes()), Ok(m));
    }
    if let Ok(c) = crate::artifacts::combine::CombineConfig::parse(data) {
        assert!(!c.groups.is_empty() && !c.primary_shard.is_empty());
        assert!(
            c.groups.iter().all(|g| !g.architectures.is_empty()
                && g.architectures.iter().all(|a| a.starts_with("gfx")))
        );
    }
    if let Ok(text) = std::str::from_utf8(data) {
        for line in text.lines() {
            if let Some(f) = crate::kerneldb::classify(line) {
                assert!(f.arch.starts_with("gfx"), "{line}: {f:?}");
                assert_eq!(crate::kerneldb::base_arch(&f.arch), f.arch);
            }
            let _ = crate::artifacts::combine::parse_artifact_name(line);
        }
    }
}

/// `normalize`: an image is left alone, refused, or repaired into one that needs
/// no further repair: compliant, or with no table to check (a moved segment mapped
/// back in an image without an interpreter, as a shared library is, is not
/// applicable after, as it was not before).
pub fn normalize(data: &[u8]) {
    use crate::elf::normalize::{PhdrState, check, normalize, plan_normalize};
    let Ok(Some(plan)) = plan_normalize(data) else {
        return;
    };
    assert!(plan.target >= data.len() as u64 && plan.end <= data.len() as u64);
    if plan.len() > 64 << 20 {
        return; // the hole is bounded; do not spend the fuzzer's memory on it
    }
    if let Ok(Some(out)) = normalize(data) {
        let after = check(&out).ok();
        assert!(
            matches!(after, Some(PhdrState::Compliant | PhdrState::NotApplicable)),
            "{after:?}"
        );
        assert_eq!(plan_normalize(&out).ok(), Some(None));
    }
}

/// The code-object reader: any bytes give kernels or an error, never a panic; every
/// kernel read is bounded by the input.
pub fn codeobj(data: &[u8]) {
    if let Ok(info) = crate::codeobj::read(data) {
        for k in &info.kernels {
            assert!(k.name.len() <= data.len());
        }
    }
}

/// The zip reader and wheel identity: any bytes give members or an error, never a
/// panic; members accepted lie inside the input, do not overlap, have safe names,
/// and reading one never yields more than it declared.
pub fn wheel(data: &[u8]) {
    let Ok(idx) = crate::zip::read_index(data) else {
        return;
    };
    for m in &idx.members {
        assert!(m.data_offset + m.compressed_size <= data.len() as u64);
        assert!(crate::zip::read::check_name(&m.name).is_ok());
        let mut r = m.reader(data);
        let mut buf = [0u8; 4096];
        let mut total = 0u64;
        while let Ok(n) = std::io::Read::read(&mut r, &mut buf) {
            if n == 0 {
                break;
            }
            total += n as u64;
            assert!(total <= m.size);
        }
    }
    let _ = crate::wheel::identity(data, &idx);
}

/// RECORD read as CSV: any text gives rows, never a panic; rows written back with
/// [`crate::wheel::metadata::record`] read back the same.
pub fn record(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let rows = crate::wheel::metadata::parse_record(&text);
    let files: Vec<(String, [u8; 32], u64)> = rows
        .iter()
        .filter_map(|r| r.first())
        .filter(|p| !p.is_empty() && p.as_str() != "R")
        .map(|p| (p.clone(), [0u8; 32], 1))
        .collect();
    let again = crate::wheel::metadata::parse_record(&crate::wheel::metadata::record(&files, "R"));
    for (p, ..) in &files {
        assert!(again.iter().any(|r| r.first() == Some(p)), "{p:?} lost");
    }
}

/// The PE host-only rewrite: any bytes are rewritten into an image that checks, or
/// refused; a rewritten image is never rewritten again, and re-pointing it (as a
/// re-pack does) gives an image that checks. Replacing the marker of arbitrary bytes
/// errors or gives an image that checks.
pub fn pe_rewrite(data: &[u8]) {
    use crate::coff::rewrite::{plan_rewrite, replace_marker, verify_rewritten};
    let m = crate::kpack::Marker {
        kernel_name: "fuzz".into(),
        kpack_search_paths: vec![".kpack/f_@GFXARCH@.kpack".into()],
    };
    let other = crate::kpack::Marker {
        kernel_name: "fuzz/other".into(),
        kpack_search_paths: vec!["../.kpack/a.kpack".into(), "../.kpack/b.kpack".into()],
    };
    let _ = crate::coff::loaded::loaded_faults(data);
    if let Ok(r) = plan_rewrite(data, &m) {
        assert!(verify_rewritten(&r.bytes).is_empty());
        assert!(
            crate::coff::loaded::loaded_faults(&r.bytes)
                .is_ok_and(|f| f.is_some_and(|f| f.is_empty()))
        );
        assert!(plan_rewrite(&r.bytes, &m).is_err());
        let again = replace_marker(&r.bytes, &other)
            .unwrap_or_else(|e| panic!("a fresh rewrite cannot be re-pointed: {e}"));
        assert!(verify_rewritten(&again).is_empty());
    }
    if let Ok(out) = replace_marker(data, &other) {
        assert!(verify_rewritten(&out).is_empty());
    }
    let _ = verify_rewritten(data);
}
