//! A host-only binary read the way the dynamic loader and CLR read it.
//!
//! Section headers say where a tool *meant* things to be; the loader only looks at
//! program headers and dynamic tags. After `pack`, release pipelines run `strip`,
//! `objcopy` and `patchelf`, which may move the segment that maps the marker while
//! the section header of `.rocm_kpack_ref` still looks right. So this check:
//!
//! 1. maps the `PT_LOAD`s as `ld.so` would (file bytes up to `p_filesz`, zeros up to
//!    `p_memsz`, nothing elsewhere);
//! 2. reads every `.hipFatBinSegment` wrapper at its address in that image (the HIP
//!    constructor passes the address, so the section's `sh_addr` is the contract);
//! 3. works out the pointer at wrapper + 8 as the loader sets it: the addend of the
//!    `R_X86_64_RELATIVE` (or the symbol of an `R_X86_64_64`; their aarch64 and
//!    ppc64le equivalents on those hosts, `machine.rs`) found through
//!    `DT_RELA`, a `DT_RELR` entry, or the stored value of a non-PIE executable;
//! 4. decodes the marker at that address *in the mapped image* and compares it with
//!    the one the section header shows.
//!
//! Any wrapper whose pointer does not reach a well-formed marker is a fault, with
//! what moved.

use super::machine::HostMachine;
use super::rewrite::{ElfLayout, Section, Segment, parse_layout};
use super::{MAGIC_HIPK, WRAPPER_SECTION, WRAPPER_SIZE};
use crate::kpack::marker::{MARKER_SECTION, Marker};
use object::elf;

const DT_RELR: u64 = 36;
const DT_RELRSZ: u64 = 35;
/// The marker is a small MessagePack map; the runtime reads at most this much.
const MARKER_READ: u64 = 64 * 1024;
/// Faults listed for one binary at most (a hostile one could make every wrapper one).
const MAX_FAULTS: usize = 64;

/// The mapped image: `PT_LOAD`s over the file.
struct Image<'a> {
    data: &'a [u8],
    loads: Vec<Segment>,
}

impl Image<'_> {
    /// The bytes at `[vaddr, vaddr + len)` as a process sees them, or `None` when
    /// some of them are not mapped (the process would fault).
    fn read(&self, vaddr: u64, len: u64) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(len.min(MARKER_READ) as usize);
        let mut at = vaddr;
        let end = vaddr.checked_add(len)?;
        while at < end {
            let p = self
                .loads
                .iter()
                .find(|p| at >= p.p_vaddr && at < p.p_vaddr.saturating_add(p.p_memsz))?;
            let seg_end = end.min(p.p_vaddr + p.p_memsz);
            let file_end = p.p_vaddr + p.p_filesz;
            if at < file_end {
                let stop = seg_end.min(file_end);
                let off = p.p_offset + (at - p.p_vaddr);
                let bytes = self.data.get(off as usize..(off + (stop - at)) as usize)?;
                out.extend_from_slice(bytes);
                at = stop;
            }
            if at < seg_end {
                out.resize(out.len() + (seg_end - at) as usize, 0);
                at = seg_end;
            }
        }
        Some(out)
    }

    fn u64_at(&self, vaddr: u64) -> Option<u64> {
        let b = self.read(vaddr, 8)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }

    /// How many bytes from `vaddr` to the end of the segment that maps it.
    fn mapped_from(&self, vaddr: u64) -> u64 {
        self.loads
            .iter()
            .find(|p| vaddr >= p.p_vaddr && vaddr < p.p_vaddr.saturating_add(p.p_memsz))
            .map_or(0, |p| p.p_vaddr + p.p_memsz - vaddr)
    }

    /// The address a file offset is mapped at, if some `PT_LOAD` maps it.
    fn vaddr_of_offset(&self, off: u64) -> Option<(u64, &Segment)> {
        self.loads
            .iter()
            .find(|p| off >= p.p_offset && off < p.p_offset.saturating_add(p.p_filesz))
            .map(|p| (p.p_vaddr + (off - p.p_offset), p))
    }
}

/// How the loader sets a wrapper's pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PointerSource {
    /// A relative relocation or a resolved absolute one: base + this value.
    Relocated(u64),
    /// The stored value, used as it is (non-PIE executables, `DT_RELR` slots).
    Stored(u64),
    /// A position-independent image with no relocation for the slot.
    Missing,
    /// A relocation the loader would resolve through a symbol we cannot see.
    Unresolved(String),
}

/// The dynamic relocations that write one address, as the loader finds them.
struct Dynamic {
    rela: Vec<(u64, u32, u32, i64)>,
    relr: Vec<u64>,
    symtab: Option<u64>,
}

fn dynamic(img: &Image<'_>, layout: &ElfLayout) -> Result<Dynamic, String> {
    let mut d = Dynamic {
        rela: Vec::new(),
        relr: Vec::new(),
        symtab: None,
    };
    let Some(dynseg) = layout.segments.iter().find(|p| p.p_type == elf::PT_DYNAMIC) else {
        return Ok(d);
    };
    let tags = img
        .read(dynseg.p_vaddr, dynseg.p_memsz.min(1 << 20))
        .ok_or_else(|| {
            format!(
                "PT_DYNAMIC at {:#x} is not mapped by any PT_LOAD",
                dynseg.p_vaddr
            )
        })?;
    let tag = |t: u64| {
        tags.chunks_exact(16)
            .map(|c| {
                (
                    u64::from_le_bytes(c[..8].try_into().unwrap_or_default()),
                    u64::from_le_bytes(c[8..].try_into().unwrap_or_default()),
                )
            })
            .take_while(|(k, _)| *k != 0)
            .find(|(k, _)| *k == t)
            .map(|(_, v)| v)
    };
    d.symtab = tag(u64::from(elf::DT_SYMTAB));
    for (addr_tag, size_tag) in [
        (elf::DT_RELA, elf::DT_RELASZ),
        (elf::DT_JMPREL, elf::DT_PLTRELSZ),
    ] {
        let (Some(at), Some(size)) = (tag(u64::from(addr_tag)), tag(u64::from(size_tag))) else {
            continue;
        };
        let table = img
            .read(at, size.min(1 << 30))
            .ok_or_else(|| format!("relocation table at {at:#x} is not mapped"))?;
        for r in table.chunks_exact(24) {
            let off = u64::from_le_bytes(r[..8].try_into().unwrap_or_default());
            let info = u64::from_le_bytes(r[8..16].try_into().unwrap_or_default());
            let addend = i64::from_le_bytes(r[16..].try_into().unwrap_or_default());
            d.rela.push((
                off,
                (info & 0xffff_ffff) as u32,
                (info >> 32) as u32,
                addend,
            ));
        }
    }
    if let (Some(at), Some(size)) = (tag(DT_RELR), tag(DT_RELRSZ)) {
        let table = img
            .read(at, size.min(1 << 30))
            .ok_or_else(|| format!("DT_RELR table at {at:#x} is not mapped"))?;
        let mut base = 0u64;
        for w in table.chunks_exact(8) {
            let e = u64::from_le_bytes(w.try_into().unwrap_or_default());
            if e & 1 == 0 {
                d.relr.push(e);
                base = e.wrapping_add(8);
            } else {
                for bit in 1..64 {
                    if e >> bit & 1 == 1 {
                        d.relr.push(base.wrapping_add((bit - 1) * 8));
                    }
                }
                base = base.wrapping_add(63 * 8);
            }
        }
    }
    Ok(d)
}

fn pointer_source(
    img: &Image<'_>,
    layout: &ElfLayout,
    machine: HostMachine,
    dynm: &Dynamic,
    slot: u64,
) -> PointerSource {
    if let Some(&(_, ty, sym, addend)) = dynm.rela.iter().rev().find(|r| r.0 == slot) {
        return match ty {
            t if t == machine.relative() => PointerSource::Relocated(addend as u64),
            t if t == machine.abs64() => {
                let value = dynm.symtab.and_then(|s| {
                    let at = s.checked_add(u64::from(sym) * 24)?;
                    let shndx = img.read(at + 6, 2)?;
                    if shndx == [0, 0] {
                        return None;
                    }
                    img.u64_at(at + 8)
                });
                match value {
                    Some(v) => PointerSource::Relocated(v.wrapping_add(addend as u64)),
                    None => PointerSource::Unresolved(format!(
                        "{} against undefined symbol #{sym}",
                        machine.relocation_name(t).unwrap_or("absolute relocation")
                    )),
                }
            }
            t => PointerSource::Unresolved(format!("relocation type {t}")),
        };
    }
    let stored = img.u64_at(slot).unwrap_or(0);
    if dynm.relr.contains(&slot) || layout.e_type == elf::ET_EXEC {
        PointerSource::Stored(stored)
    } else {
        PointerSource::Missing
    }
}

/// One wrapper as the runtime sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedWrapper {
    /// Position in `.hipFatBinSegment`.
    pub index: usize,
    /// The wrapper's address.
    pub vaddr: u64,
    /// The address the runtime follows (`None`: the loader would not set one).
    pub pointer: Option<u64>,
    /// The marker read at `pointer` in the mapped image.
    pub marker: Option<Marker>,
}

/// The loader's view of a host-only binary: each wrapper and what it reaches, and
/// every way in which that differs from what the section headers promise.
#[derive(Debug, Clone, Default)]
pub struct LoadedView {
    /// Wrappers in order.
    pub wrappers: Vec<LoadedWrapper>,
    /// Faults (non-empty: the runtime would not find this binary's kernels).
    pub faults: Vec<String>,
}

fn where_marker_went(img: &Image<'_>, marker: &Section, pointer: u64) -> String {
    match img.vaddr_of_offset(marker.sh_offset) {
        Some((at, p)) if at != marker.sh_addr => format!(
            "the {MARKER_SECTION} bytes (file offset {:#x}) are mapped at {at:#x} by the PT_LOAD \
             at {:#x}, the wrapper points at {pointer:#x}: re-laid out by GNU strip or objcopy?",
            marker.sh_offset, p.p_vaddr
        ),
        Some(_) => format!("the wrapper points at {pointer:#x}, not at {MARKER_SECTION}"),
        None => format!(
            "no PT_LOAD maps the {MARKER_SECTION} bytes (file offset {:#x}) any more; the \
             wrapper points at {pointer:#x}",
            marker.sh_offset
        ),
    }
}

/// Read a host-only ELF binary as the loader maps it. `Ok(None)`: not a binary with
/// HIP wrappers (nothing to check).
pub fn loaded_view(data: &[u8]) -> Result<Option<LoadedView>, String> {
    let layout = parse_layout(data).map_err(|e| e.to_string())?;
    let Some(wsec) = layout.sections.iter().find(|s| s.name == WRAPPER_SECTION) else {
        return Ok(None);
    };
    // Another host CPU has relocation numbers of its own; the rewrite refuses it, so
    // no marker of ours is in such a binary.
    let Some(machine) = layout.machine else {
        return Ok(None);
    };
    let img = Image {
        data,
        loads: layout
            .segments
            .iter()
            .filter(|p| p.p_type == elf::PT_LOAD)
            .copied()
            .collect(),
    };
    let mut view = LoadedView::default();
    let dynm = match dynamic(&img, &layout) {
        Ok(d) => d,
        Err(e) => {
            view.faults.push(e);
            return Ok(Some(view));
        }
    };
    let marker_sec = layout.sections.iter().find(|s| s.name == MARKER_SECTION);
    let promised = marker_sec.and_then(|s| {
        let r = data.get(s.sh_offset as usize..s.sh_offset.saturating_add(s.sh_size) as usize)?;
        Marker::decode(r).ok()
    });
    // Wrappers are data the linker wrote: only those with file bytes count.
    let count = (wsec.file_size().min(data.len() as u64) / WRAPPER_SIZE as u64) as usize;
    for index in 0..count {
        if view.faults.len() >= MAX_FAULTS {
            view.faults
                .push(format!("… and more (stopped after {MAX_FAULTS})"));
            break;
        }
        let vaddr = wsec.sh_addr + (index * WRAPPER_SIZE) as u64;
        let mut w = LoadedWrapper {
            index,
            vaddr,
            pointer: None,
            marker: None,
        };
        let what = format!("wrapper #{index} at {vaddr:#x}");
        let Some(bytes) = img.read(vaddr, WRAPPER_SIZE as u64) else {
            view.faults
                .push(format!("{what} is not mapped by any PT_LOAD"));
            view.wrappers.push(w);
            continue;
        };
        let magic = u32::from_le_bytes(bytes[..4].try_into().unwrap_or_default());
        if magic != MAGIC_HIPK {
            view.faults.push(format!(
                "{what}: magic {magic:#010x} in the mapped image, not HIPK (the runtime \
                 would not look for an archive)"
            ));
        }
        let pointer = match pointer_source(&img, &layout, machine, &dynm, vaddr + 8) {
            PointerSource::Relocated(p) | PointerSource::Stored(p) => p,
            PointerSource::Missing => {
                view.faults.push(format!(
                    "{what}: no dynamic relocation sets its pointer (the runtime would read \
                     an unrelocated address)"
                ));
                view.wrappers.push(w);
                continue;
            }
            PointerSource::Unresolved(why) => {
                view.faults
                    .push(format!("{what}: its pointer is set by {why}"));
                view.wrappers.push(w);
                continue;
            }
        };
        w.pointer = Some(pointer);
        let avail = img.mapped_from(pointer).min(MARKER_READ);
        let found = img
            .read(pointer, avail)
            .filter(|b| !b.is_empty())
            .and_then(|b| Marker::decode(&b).ok());
        match (&found, &promised, marker_sec) {
            (None, _, Some(sec)) => view.faults.push(format!(
                "{what}: no marker at {pointer:#x} in the loaded image; {}",
                where_marker_went(&img, sec, pointer)
            )),
            (None, _, None) => view.faults.push(format!(
                "{what}: no marker at {pointer:#x} in the loaded image"
            )),
            (Some(m), Some(p), Some(sec)) if m != p => view.faults.push(format!(
                "{what}: the marker at {pointer:#x} names {:?}, the {MARKER_SECTION} section \
                 {:?}; {}",
                m.kernel_name,
                p.kernel_name,
                where_marker_went(&img, sec, pointer)
            )),
            _ => {}
        }
        w.marker = found;
        view.wrappers.push(w);
    }
    Ok(Some(view))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/bin");
        std::fs::read(p.join(name)).unwrap()
    }

    fn rewritten(name: &str) -> Vec<u8> {
        let data = fixture(name);
        let marker = Marker {
            kpack_search_paths: vec!["x_@GFXARCH@.kpack".into()],
            kernel_name: "lib/x".into(),
        };
        super::super::rewrite::plan_rewrite(&data, &marker)
            .unwrap()
            .bytes
    }

    #[test]
    fn a_rewritten_binary_reaches_its_marker_through_every_wrapper() {
        for name in ["libvadd.so", "librdc.so", "app_pie", "app_nopie"] {
            let out = rewritten(name);
            let v = loaded_view(&out).unwrap().unwrap();
            assert!(v.faults.is_empty(), "{name}: {:?}", v.faults);
            assert!(!v.wrappers.is_empty(), "{name}");
            for w in &v.wrappers {
                assert_eq!(
                    w.marker.as_ref().map(|m| m.kernel_name.as_str()),
                    Some("lib/x"),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn a_moved_marker_segment_is_a_fault_naming_what_moved() {
        let mut out = rewritten("libvadd.so");
        let layout = parse_layout(&out).unwrap();
        let sec = layout
            .sections
            .iter()
            .find(|s| s.name == MARKER_SECTION)
            .unwrap()
            .clone();
        // Move the PT_LOAD that maps the marker down by 0x100 in address (as GNU
        // strip does when it re-lays out that segment), keeping the section header.
        let (i, _) = layout
            .segments
            .iter()
            .enumerate()
            .find(|(_, p)| {
                p.p_type == elf::PT_LOAD
                    && sec.sh_offset >= p.p_offset
                    && sec.sh_offset < p.p_offset + p.p_filesz
            })
            .unwrap();
        let at = layout.e_phoff as usize + i * 56 + 16;
        let v = u64::from_le_bytes(out[at..at + 8].try_into().unwrap());
        out[at..at + 8].copy_from_slice(&(v - 0x100).to_le_bytes());
        let view = loaded_view(&out).unwrap().unwrap();
        assert!(!view.faults.is_empty());
        assert!(
            view.faults[0].contains("re-laid out by GNU strip"),
            "{:?}",
            view.faults
        );
    }

    #[test]
    fn a_fat_binary_has_fat_wrappers_not_markers() {
        let v = loaded_view(&fixture("libvadd.so")).unwrap().unwrap();
        assert!(
            v.faults.iter().any(|f| f.contains("not HIPK")),
            "{:?}",
            v.faults
        );
    }

    #[test]
    fn no_wrappers_nothing_to_check() {
        assert!(loaded_view(&fixture("libplain.so")).unwrap().is_none());
    }
}
