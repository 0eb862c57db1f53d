//! Re-pointing a host-only binary: its `.rocm_kpack_ref` marker replaced by another
//! (used when a packed tree is packed again under another selection, so the binary
//! names the new archives).
//!
//! Only the layout the host-only rewrite produces is handled: the marker is the tail
//! of the last `PT_LOAD` (highest address, file size = memory size), and what follows
//! it in the file is not loaded (`.shstrtab`, section headers, maybe other non-alloc
//! sections). The marker keeps its address, so the wrappers and their relocations
//! stay as they are; the marker's segment and section grow or shrink, and the file
//! tail moves by the difference (keeping its alignment modulo 16). Anything else (a
//! binary re-laid out by `strip` or `patchelf`, a marker in the middle of the file)
//! is refused rather than guessed at.

use super::rewrite::{
    PHENT, Result, RewriteError, SHENT, parse_layout, range, rd_u64, structural_faults, wr_u64,
};
use crate::kpack::marker::{MARKER_SECTION, Marker};
use object::elf;

/// The binary with `marker` in place of its current marker; the input bytes when
/// the marker is already the same. The result is checked before it is returned.
pub fn replace_marker(data: &[u8], marker: &Marker) -> Result<Vec<u8>> {
    let lay = parse_layout(data)?;
    let Some((mi, ms)) = lay.section(MARKER_SECTION) else {
        return Err(RewriteError::Refused(
            "no .rocm_kpack_ref marker (not a host-only binary)".into(),
        ));
    };
    let old = ms.clone();
    if old.nobits() || old.sh_size == 0 {
        return Err(RewriteError::Refused(
            "the .rocm_kpack_ref section has no file bytes".into(),
        ));
    }
    let old_range = range(data, old.sh_offset, old.sh_size, MARKER_SECTION)?;
    let new = marker.encode();
    if data[old_range.clone()] == new[..] {
        return Ok(data.to_vec());
    }
    let old_end = old_range.end as u64;
    let refuse = |why: &str| {
        Err(RewriteError::Refused(format!(
            "cannot replace the marker: {why} (only the layout kpack writes is handled)"
        )))
    };
    let Some(si) = lay.segments.iter().position(|p| {
        p.p_type == elf::PT_LOAD && p.p_offset <= old.sh_offset && old_end <= p.file_end()
    }) else {
        return refuse("no PT_LOAD maps the marker");
    };
    let seg = lay.segments[si];
    if seg.file_end() != old_end || seg.p_memsz != seg.p_filesz || seg.mem_end() != lay.load_end() {
        return refuse("the marker is not the end of the last loaded segment");
    }
    if lay
        .segments
        .iter()
        .enumerate()
        .any(|(i, p)| i != si && p.p_filesz > 0 && p.file_end() > old_end)
    {
        return refuse("a segment's bytes follow the marker");
    }
    for (i, s) in lay.sections.iter().enumerate() {
        if i == mi || s.file_size() == 0 || s.sh_type == elf::SHT_NULL {
            continue;
        }
        if s.sh_offset >= old_end && s.alloc() {
            return refuse(&format!("loaded section {} follows the marker", s.name));
        }
        if s.sh_offset < old_end && s.sh_offset + s.file_size() > old.sh_offset {
            return refuse(&format!("section {} overlaps the marker", s.name));
        }
    }
    if lay.e_shoff < old_end || (lay.e_phoff >= old_end && !lay.segments.is_empty()) {
        return refuse("the header tables are not where kpack puts them");
    }
    // The tail keeps its alignment modulo 16 (no non-alloc section needs more).
    let new_end = old.sh_offset + new.len() as u64;
    let pad = (old_end as i128 - new_end as i128).rem_euclid(16) as u64;
    let tail_new = new_end + pad;
    let shift = tail_new as i128 - old_end as i128;
    let moved = |off: u64| (off as i128 + shift) as u64;
    let mut out = Vec::with_capacity(data.len() + new.len() + 16);
    out.extend_from_slice(&data[..old.sh_offset as usize]);
    out.extend_from_slice(&new);
    out.resize(tail_new as usize, 0);
    out.extend_from_slice(&data[old_end as usize..]);
    let e_shoff = moved(lay.e_shoff);
    wr_u64(&mut out, 40, e_shoff);
    for (i, s) in lay.sections.iter().enumerate() {
        let h = (e_shoff + i as u64 * SHENT) as usize;
        if i == mi {
            wr_u64(&mut out, h + 32, new.len() as u64);
        } else if i != 0 && s.sh_offset >= old_end {
            // Whatever its type (a NULL-typed string table still names the others).
            wr_u64(&mut out, h + 24, moved(s.sh_offset));
        }
    }
    let grow = new.len() as i128 - old.sh_size as i128;
    let p = (lay.e_phoff + si as u64 * PHENT) as usize;
    for field in [p + 32, p + 40] {
        let v = rd_u64(&out, field) as i128 + grow;
        wr_u64(&mut out, field, v as u64);
    }
    // Checks: no new structural fault, the marker decodes back, nothing else moved
    // in memory.
    let before = structural_faults(data);
    let mut faults: Vec<String> = structural_faults(&out)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    let after = parse_layout(&out)?;
    match after.section(MARKER_SECTION) {
        Some((_, s)) if s.sh_addr == old.sh_addr => {
            let r = range(&out, s.sh_offset, s.sh_size, MARKER_SECTION)?;
            if Marker::decode(&out[r]).ok().as_ref() != Some(marker) {
                faults.push("the new marker does not decode back".into());
            }
        }
        _ => faults.push("the marker moved or vanished".into()),
    }
    for (a, b) in lay.segments.iter().zip(&after.segments) {
        if a.p_vaddr != b.p_vaddr || (a.p_type == elf::PT_LOAD && a.p_offset != b.p_offset) {
            faults.push("a segment moved".into());
        }
    }
    if !faults.is_empty() {
        return Err(RewriteError::VerifyFailed(faults));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!(
            "{}/../../tests/fixtures/bin/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    fn host_only(name: &str) -> Vec<u8> {
        let m = Marker {
            kpack_search_paths: vec!["../.kpack/a.kpack".into()],
            kernel_name: "lib/x".into(),
        };
        super::super::rewrite::plan_rewrite(&fixture(name), &m)
            .unwrap()
            .bytes
    }

    fn marker_of(data: &[u8]) -> Marker {
        let lay = parse_layout(data).unwrap();
        let (_, s) = lay.section(MARKER_SECTION).unwrap();
        Marker::decode(&data[range(data, s.sh_offset, s.sh_size, "m").unwrap()]).unwrap()
    }

    #[test]
    fn markers_grow_shrink_and_stay_valid() {
        for name in ["libvadd.so", "app_pie", "app_nopie", "librdc.so"] {
            let base = host_only(name);
            for paths in [
                vec!["../.kpack/rocm_@GFXARCH@.kpack".to_string()],
                (0..40)
                    .map(|i| format!("../.kpack/g_fam{i}.kpack"))
                    .collect(),
                vec!["a".to_string()],
            ] {
                let m = Marker {
                    kpack_search_paths: paths,
                    kernel_name: "lib/x".into(),
                };
                let out = replace_marker(&base, &m).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(marker_of(&out), m, "{name}");
                assert!(structural_faults(&out).is_empty(), "{name}");
                // Same marker again: the bytes come back unchanged.
                assert_eq!(replace_marker(&out, &m).unwrap(), out);
            }
        }
    }

    #[test]
    fn fat_binaries_are_refused() {
        let m = Marker {
            kpack_search_paths: vec!["a".into()],
            kernel_name: "x".into(),
        };
        assert!(matches!(
            replace_marker(&fixture("libvadd.so"), &m),
            Err(RewriteError::Refused(_))
        ));
        assert!(replace_marker(b"not an elf", &m).is_err());
    }
}
