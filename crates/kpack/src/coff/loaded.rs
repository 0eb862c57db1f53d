//! A host-only PE image read the way the Windows loader and CLR read it: sections
//! mapped at their RVAs (raw data up to `SizeOfRawData`, zeros up to `VirtualSize`),
//! each `.hipFatB` wrapper's pointer taken as stored (`ImageBase` + RVA) and moved
//! by the loader through its `IMAGE_REL_BASED_DIR64` entry, and the marker decoded
//! at that address in the mapped image. The ELF counterpart is `elf::loaded`.

use super::rewrite::{PeLayout, dir64_slots, parse_layout};
use super::{MARKER_SECTION, WRAPPER_SECTION};
use crate::elf::MAGIC_HIPK;
use crate::kpack::marker::Marker;

/// `IMAGE_DLLCHARACTERISTICS_DYNAMIC_BASE`: the loader may place the image anywhere.
const DYNAMIC_BASE: u16 = 0x40;
/// The marker is a small MessagePack map; the runtime reads at most this much.
const MARKER_READ: u32 = 64 * 1024;
/// Faults listed for one image at most (a hostile one could make every wrapper one).
const MAX_FAULTS: usize = 64;

/// The bytes at `[rva, rva + len)` as mapped, or `None` where nothing is mapped.
fn read(d: &[u8], l: &PeLayout, rva: u32, len: u32) -> Option<Vec<u8>> {
    let s = l.sections.iter().find(|s| {
        let size = s.virtual_size.max(s.size_of_raw_data);
        rva >= s.virtual_address && rva - s.virtual_address < size
    })?;
    let size = s.virtual_size.max(s.size_of_raw_data);
    let at = rva - s.virtual_address;
    let len = len.min(size - at);
    let mut out = vec![0u8; len as usize];
    let raw = s.size_of_raw_data.min(size);
    if at < raw {
        let n = (raw - at).min(len) as usize;
        let from = s.pointer_to_raw_data as usize + at as usize;
        out[..n].copy_from_slice(d.get(from..from + n)?);
    }
    Some(out)
}

/// Faults of a host-only PE image as the loader maps it (empty: every wrapper
/// reaches the marker). `Ok(None)`: no wrappers, nothing to check.
pub fn loaded_faults(d: &[u8]) -> Result<Option<Vec<String>>, String> {
    let l = parse_layout(d).map_err(|e| e.to_string())?;
    let Some((_, w)) = l.section(WRAPPER_SECTION) else {
        return Ok(None);
    };
    let dll_characteristics = d
        .get(l.opt + 70..l.opt + 72)
        .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
    let slots = dir64_slots(d, &l).map_err(|e| e.to_string())?;
    let promised = l.section(MARKER_SECTION).and_then(|(_, m)| {
        let o = m.pointer_to_raw_data as usize;
        d.get(o..o + m.virtual_size as usize)
            .and_then(|b| Marker::decode(b).ok())
    });
    let mut faults = Vec::new();
    // Wrappers are data the linker wrote: only those with file bytes count (a
    // section's VirtualSize alone can claim millions of zero "wrappers").
    let n = w.virtual_size.min(w.size_of_raw_data) / 24;
    for i in 0..n {
        if faults.len() >= MAX_FAULTS {
            faults.push(format!("… and more (stopped after {MAX_FAULTS})"));
            break;
        }
        // A hostile VirtualAddress near 4 GiB would wrap: past the address space is
        // nothing a loader maps.
        let Some(rva) = w
            .virtual_address
            .checked_add(i * 24)
            .filter(|r| r.checked_add(24).is_some())
        else {
            faults.push(format!(
                "wrapper #{i} lies past the 4 GiB image address space"
            ));
            break;
        };
        let what = format!("wrapper #{i} at RVA {rva:#x}");
        let Some(b) = read(d, &l, rva, 24).filter(|b| b.len() == 24) else {
            faults.push(format!("{what} is not mapped by any section"));
            continue;
        };
        let magic = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if magic != MAGIC_HIPK {
            faults.push(format!(
                "{what}: magic {magic:#010x} in the mapped image, not HIPK"
            ));
        }
        let pointer = u64::from_le_bytes(b[8..16].try_into().unwrap_or_default());
        if dll_characteristics & DYNAMIC_BASE != 0 && !slots.contains(&(rva + 8)) {
            faults.push(format!(
                "{what}: no base relocation moves its pointer, and the image may load \
                 anywhere (DYNAMIC_BASE): the runtime would follow an unrelocated address"
            ));
            continue;
        }
        let target = pointer
            .checked_sub(l.image_base)
            .and_then(|r| u32::try_from(r).ok());
        let found = target
            .and_then(|r| read(d, &l, r, MARKER_READ))
            .and_then(|b| Marker::decode(&b).ok());
        match (found, &promised) {
            (None, _) => faults.push(format!(
                "{what}: no marker at {pointer:#x} in the loaded image"
            )),
            (Some(m), Some(p)) if &m != p => faults.push(format!(
                "{what}: the marker at {pointer:#x} names {:?}, the {MARKER_SECTION} section {:?}",
                m.kernel_name, p.kernel_name
            )),
            _ => {}
        }
    }
    Ok(Some(faults))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/bin");
        std::fs::read(p.join(name)).unwrap()
    }

    fn marker() -> Marker {
        Marker {
            kpack_search_paths: vec!["x_@GFXARCH@.kpack".into()],
            kernel_name: "bin/x".into(),
        }
    }

    #[test]
    fn rewritten_images_reach_their_marker() {
        for name in ["libkpe.dll", "libkpez.dll", "kpe.exe"] {
            let out = super::super::rewrite::plan_rewrite(&fixture(name), &marker())
                .unwrap()
                .bytes;
            let f = loaded_faults(&out).unwrap().unwrap();
            assert!(f.is_empty(), "{name}: {f:?}");
        }
    }

    #[test]
    fn a_pointer_moved_off_the_marker_is_a_fault() {
        let mut out = super::super::rewrite::plan_rewrite(&fixture("libkpe.dll"), &marker())
            .unwrap()
            .bytes;
        let l = parse_layout(&out).unwrap();
        let (_, w) = l.section(WRAPPER_SECTION).unwrap();
        let at = w.pointer_to_raw_data as usize + 8;
        let v = u64::from_le_bytes(out[at..at + 8].try_into().unwrap());
        out[at..at + 8].copy_from_slice(&(v + 0x10).to_le_bytes());
        let f = loaded_faults(&out).unwrap().unwrap();
        assert!(f.iter().any(|x| x.contains("no marker at")), "{f:?}");
    }

    #[test]
    fn fat_images_have_fat_wrappers() {
        let f = loaded_faults(&fixture("libkpe.dll")).unwrap().unwrap();
        assert!(f.iter().any(|x| x.contains("not HIPK")), "{f:?}");
    }
}
