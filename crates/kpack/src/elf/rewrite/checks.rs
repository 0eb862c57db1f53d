//! The first phases of the rewrite: what the fat binary is made of, checked
//! ([`Site::read`]), its relocations ([`Relocs::index`]), where each wrapper points
//! ([`wrapper_targets`]) and which file bytes go ([`Cut::find`]). Nothing here
//! builds output; every refusal is said before a byte is computed.

use super::layout::{ElfLayout, Section, Segment, range, rd_u32, rd_u64};
use super::{DT_RELR, PointerVia, Result, RewriteError, SHT_RELR, malformed, round_up};
use crate::bundle;
use crate::elf::machine::HostMachine;
use crate::elf::{FATBIN_SECTION, MAGIC_HIPF, MAGIC_HIPK, WRAPPER_SECTION, WRAPPER_SIZE};
use crate::kpack::marker::MARKER_SECTION;
use object::elf;
use std::collections::HashMap;
use std::ops::Range;

/// The parts of a fat binary the rewrite works on, checked to be what it handles.
pub(super) struct Site<'a> {
    pub data: &'a [u8],
    pub lay: ElfLayout,
    pub machine: HostMachine,
    /// `.hip_fatbin`: its index and header.
    pub fb_idx: usize,
    pub fb: Section,
    /// `.hipFatBinSegment`: its header and file bytes.
    pub seg_sec: Section,
    pub seg_range: Range<usize>,
    pub n_wrappers: usize,
    /// Where each bundle of `.hip_fatbin` starts (offsets in the section).
    pub bundle_offsets: Vec<u64>,
}

impl<'a> Site<'a> {
    /// Read and check `data`: a linked ELF of a handled host CPU, with device code
    /// still in `.hip_fatbin` and wrappers that say `HIPF`. Each bundle's bytes
    /// are handed to `release` (offset in `data`, length) once its header is read.
    pub fn read(data: &'a [u8], release: &dyn Fn(usize, usize)) -> Result<Self> {
        let lay = super::parse_layout(data)?;
        let Some(machine) = lay.machine else {
            return Err(RewriteError::Unsupported(format!(
                "{} host code (only {} fat binaries are rewritten)",
                crate::elf::machine::machine_name(lay.e_machine),
                crate::elf::machine::handled_list()
            )));
        };
        if !matches!(lay.e_type, elf::ET_EXEC | elf::ET_DYN) {
            return Err(RewriteError::Unsupported(match lay.e_type {
                elf::ET_REL => {
                    "relocatable object: only linked executables and shared libraries are rewritten"
                        .into()
                }
                t => format!("ELF type {t}"),
            }));
        }
        if lay.sections.is_empty() {
            return Err(RewriteError::Unsupported("no section headers".into()));
        }
        let Some((fb_idx, fb)) = lay.section(FATBIN_SECTION) else {
            return Err(RewriteError::NotFatBinary);
        };
        let fb = fb.clone();
        if fb.nobits() {
            return Err(RewriteError::AlreadyHostOnly(
                ".hip_fatbin is NOBITS".into(),
            ));
        }
        if lay.section(MARKER_SECTION).is_some() {
            return Err(RewriteError::AlreadyHostOnly(
                "it has a .rocm_kpack_ref marker".into(),
            ));
        }
        let Some((_, seg_sec)) = lay.section(WRAPPER_SECTION) else {
            return Err(RewriteError::Refused(format!(
                "no {WRAPPER_SECTION} section"
            )));
        };
        let seg_sec = seg_sec.clone();
        if seg_sec.sh_size % WRAPPER_SIZE as u64 != 0 {
            return Err(RewriteError::Refused(format!(
                "{WRAPPER_SECTION} size {} is not a multiple of {WRAPPER_SIZE}",
                seg_sec.sh_size
            )));
        }
        if seg_sec.nobits() {
            return Err(RewriteError::Refused(format!(
                "{WRAPPER_SECTION} has no file bytes"
            )));
        }
        let fb_range = range(data, fb.sh_offset, fb.sh_size, FATBIN_SECTION)?;
        let at = fb_range.start;
        let bundles = bundle::walk_section_releasing(&data[fb_range], &|o, l| release(at + o, l))
            .map_err(|e| RewriteError::Malformed(e.shifted(fb.sh_offset)))?;
        let seg_range = range(data, seg_sec.sh_offset, seg_sec.sh_size, WRAPPER_SECTION)?;
        let n_wrappers = (seg_sec.sh_size / WRAPPER_SIZE as u64) as usize;
        if n_wrappers == 0 {
            return Err(RewriteError::Refused(format!("{WRAPPER_SECTION} is empty")));
        }
        Ok(Site {
            data,
            lay,
            machine,
            fb_idx,
            fb,
            seg_sec,
            seg_range,
            n_wrappers,
            bundle_offsets: bundles.iter().map(|b| b.offset).collect(),
        })
    }

    /// The page size the file is laid out for.
    pub fn page(&self) -> u64 {
        self.lay.page
    }

    /// The host CPU's `R_*_RELATIVE`.
    pub fn relative(&self) -> u32 {
        self.machine.relative()
    }
}

/// One `Elf64_Rela` entry.
pub(super) struct RelaSlot {
    /// File offset of the entry.
    pub entry_offset: usize,
    pub r_type: u32,
    pub sym: u32,
    pub addend: i64,
    /// The symbol table it indexes (`sh_link`).
    pub symtab: u32,
}

/// The binary's RELA relocations by the address they patch.
pub(super) struct Relocs {
    pub slots: HashMap<u64, RelaSlot>,
    /// Relative relocations into `.hip_fatbin`: (where, what).
    pub fatbin_refs: Vec<(u64, u64)>,
    /// Whether REL or packed (RELR) relocations exist too (not read).
    pub packed: bool,
}

impl Relocs {
    /// Index every RELA section in one pass.
    pub fn index(site: &Site) -> Result<Self> {
        let (data, lay, fb) = (site.data, &site.lay, &site.fb);
        let relative = site.relative();
        let mut slots = HashMap::new();
        let mut fatbin_refs = Vec::new();
        let fatbin = fb.sh_addr..fb.sh_addr + fb.sh_size;
        let mut packed = false;
        for s in &lay.sections {
            if s.sh_type == elf::SHT_REL || s.sh_type == SHT_RELR {
                packed = true;
                continue;
            }
            if s.sh_type != elf::SHT_RELA || s.nobits() {
                continue;
            }
            let r = range(
                data,
                s.sh_offset,
                s.sh_size,
                &format!("relocation section {}", s.name),
            )?;
            if s.sh_size % 24 != 0 {
                return Err(malformed(
                    s.sh_offset,
                    format!("{}: size is not a multiple of 24", s.name),
                ));
            }
            for e in r.step_by(24) {
                let r_offset = rd_u64(data, e);
                let info = rd_u64(data, e + 8);
                let slot = RelaSlot {
                    entry_offset: e,
                    r_type: info as u32,
                    sym: (info >> 32) as u32,
                    addend: rd_u64(data, e + 16) as i64,
                    symtab: s.sh_link,
                };
                if slot.r_type == relative && fatbin.contains(&(slot.addend as u64)) {
                    fatbin_refs.push((r_offset, slot.addend as u64));
                }
                slots.insert(r_offset, slot);
            }
        }
        // DT_RELR in the dynamic section also means packed relocations.
        if let Some(dynamic) = lay.sections.iter().find(|s| s.sh_type == elf::SHT_DYNAMIC)
            && let Ok(r) = range(data, dynamic.sh_offset, dynamic.file_size(), ".dynamic")
        {
            packed |= r
                .step_by(16)
                .any(|o| o + 16 <= data.len() && rd_u64(data, o) == DT_RELR);
        }
        Ok(Relocs {
            slots,
            fatbin_refs,
            packed,
        })
    }
}

/// Where one wrapper points, and how its pointer is set.
pub(super) struct Target {
    /// The address of its pointer.
    pub slot_vaddr: u64,
    /// The bundle it points to.
    pub co_index: u32,
    /// Where it points.
    pub pointer: u64,
    /// How its pointer is set.
    pub via: PointerVia,
}

/// Where every wrapper points (and so its co_index). Relocations into
/// `.hip_fatbin` other than the wrappers' would dangle: they are refused.
pub(super) fn wrapper_targets(site: &Site, relocs: &Relocs) -> Result<Vec<Target>> {
    let targets = (0..site.n_wrappers)
        .map(|i| wrapper_target(site, relocs, i))
        .collect::<Result<Vec<_>>>()?;
    let stray: Vec<String> = relocs
        .fatbin_refs
        .iter()
        .filter(|(off, _)| !targets.iter().any(|t| t.slot_vaddr == *off))
        .map(|(off, a)| format!("{off:#x} -> {a:#x}"))
        .collect();
    if !stray.is_empty() {
        return Err(RewriteError::Refused(format!(
            "relocations other than the wrappers' point into {FATBIN_SECTION}: {}",
            stray.join(", ")
        )));
    }
    Ok(targets)
}

/// Where wrapper `i` points.
fn wrapper_target(site: &Site, relocs: &Relocs, i: usize) -> Result<Target> {
    let (data, fb) = (site.data, &site.fb);
    let w = site.seg_range.start + i * WRAPPER_SIZE;
    let magic = rd_u32(data, w);
    if magic == MAGIC_HIPK {
        return Err(RewriteError::AlreadyHostOnly(format!(
            "wrapper {i} already says HIPK"
        )));
    }
    if magic != MAGIC_HIPF {
        return Err(RewriteError::Refused(format!(
            "wrapper {i} has unknown magic {magic:#010x}"
        )));
    }
    let slot_vaddr = site.seg_sec.sh_addr + (i * WRAPPER_SIZE) as u64 + 8;
    let (pointer, via) = if site.lay.e_type == elf::ET_DYN {
        relocated_pointer(site, relocs, i, slot_vaddr)?
    } else {
        (rd_u64(data, w + 8), PointerVia::InPlace)
    };
    let fb_hi = fb.sh_addr + fb.sh_size;
    let co_index = pointer
        .checked_sub(fb.sh_addr)
        .and_then(|o| site.bundle_offsets.iter().position(|&b| b == o))
        .ok_or_else(|| {
            RewriteError::Refused(format!(
                "wrapper {i} points at {pointer:#x}, which is not the start of a bundle in {FATBIN_SECTION} ({:#x}..{fb_hi:#x})",
                fb.sh_addr
            ))
        })?;
    Ok(Target {
        slot_vaddr,
        co_index: co_index as u32,
        pointer,
        via,
    })
}

/// The pointer of wrapper `i` of a position-independent binary, from its RELA
/// relocation.
fn relocated_pointer(
    site: &Site,
    relocs: &Relocs,
    i: usize,
    slot_vaddr: u64,
) -> Result<(u64, PointerVia)> {
    let (data, lay) = (site.data, &site.lay);
    let symbol_value = |symtab: u32, sym: u32| -> Option<u64> {
        let t = lay.sections.get(symtab as usize)?;
        let off = t.sh_offset.checked_add(u64::from(sym) * 24)?;
        if off + 24 > t.sh_offset + t.file_size() || off + 24 > data.len() as u64 {
            return None;
        }
        Some(rd_u64(data, off as usize + 8))
    };
    match relocs.slots.get(&slot_vaddr) {
        Some(r) if r.r_type == site.relative() && r.sym == 0 => {
            Ok((r.addend as u64, PointerVia::RelaRelative))
        }
        Some(r) if r.r_type == site.machine.abs64() => {
            let v = symbol_value(r.symtab, r.sym).ok_or_else(|| {
                RewriteError::Refused(format!(
                    "wrapper {i}: relocation symbol {} cannot be read",
                    r.sym
                ))
            })?;
            Ok((
                v.wrapping_add(r.addend as u64),
                PointerVia::RelaAbs64ToRelative,
            ))
        }
        Some(r) => Err(RewriteError::Refused(format!(
            "wrapper {i}: pointer relocated by unsupported type {}",
            r.r_type
        ))),
        None if relocs.packed => Err(RewriteError::Refused(format!(
            "wrapper {i}: pointer has no RELA relocation and the binary uses packed DT_RELR/REL relocations, which are not supported"
        ))),
        None => Err(RewriteError::Refused(format!(
            "wrapper {i}: pointer at {slot_vaddr:#x} has no relocation in a position-independent binary"
        ))),
    }
}

/// Which file bytes go: the whole pages of `.hip_fatbin`, inside the `PT_LOAD`
/// that maps it.
#[derive(Clone)]
pub(super) struct Cut {
    /// The segment holding `.hip_fatbin`: its index and header.
    pub t_index: usize,
    pub t: Segment,
    /// `.hip_fatbin`'s address, size and offset.
    pub v: u64,
    pub s: u64,
    pub o: u64,
    /// The first whole page's address and file offset.
    pub a: u64,
    pub a_off: u64,
    /// How many bytes go, and which.
    pub removed: u64,
    pub range: Range<u64>,
}

impl Cut {
    /// Find the bytes to remove, and refuse when a segment or section other than
    /// `.hip_fatbin` shares them.
    pub fn find(site: &Site) -> Result<Self> {
        let (lay, fb, page) = (&site.lay, &site.fb, site.page());
        let (v, s, o) = (fb.sh_addr, fb.sh_size, fb.sh_offset);
        let t_index = lay
            .segments
            .iter()
            .position(|p| {
                p.p_type == elf::PT_LOAD && p.p_vaddr <= v && v + s <= p.p_vaddr + p.p_filesz
            })
            .ok_or_else(|| {
                RewriteError::Refused(format!(
                    "{FATBIN_SECTION} is not inside one PT_LOAD's file bytes"
                ))
            })?;
        let t = lay.segments[t_index];
        if t.p_offset + (v - t.p_vaddr) != o {
            return Err(RewriteError::Refused(format!(
                "{FATBIN_SECTION} offset does not match its segment's mapping"
            )));
        }
        let a = round_up(v, page);
        let e = (v + s) / page * page;
        let mut removed = e.saturating_sub(a);
        if removed > 0 && (v + s) % page == 0 {
            // Keep one page: otherwise the hole and the tail share a file offset.
            removed -= page;
        }
        let a_off = o + (a.min(v + s) - v);
        let cut = Cut {
            t_index,
            t,
            v,
            s,
            o,
            a,
            a_off,
            removed,
            range: a_off..a_off + removed,
        };
        if removed > 0 {
            cut.check_alone(site)?;
        }
        Ok(cut)
    }

    /// No segment but the device code's, and no section but `.hip_fatbin`, has file
    /// bytes in the cut: a section sharing them would name other bytes afterwards
    /// (and could reach the marker, which re-pointing needs last).
    fn check_alone(&self, site: &Site) -> Result<()> {
        let cut = &self.range;
        for (i, p) in site.lay.segments.iter().enumerate() {
            if i != self.t_index
                && p.p_filesz > 0
                && p.p_offset < cut.end
                && cut.start < p.file_end()
            {
                return Err(RewriteError::Refused(format!(
                    "segment {i} ({}) overlaps the bytes of {FATBIN_SECTION}",
                    p.type_name()
                )));
            }
        }
        for (i, x) in site.lay.sections.iter().enumerate() {
            if i != site.fb_idx
                && x.sh_type != elf::SHT_NULL
                && x.file_size() > 0
                && x.sh_offset < cut.end
                && cut.start < x.sh_offset + x.file_size()
            {
                return Err(RewriteError::Refused(format!(
                    "section {} overlaps the bytes of {FATBIN_SECTION}",
                    x.name
                )));
            }
        }
        Ok(())
    }

    /// Where input offset `off` is in the output.
    pub fn shift(&self, off: u64) -> u64 {
        if self.removed > 0 && off >= self.range.end {
            off - self.removed
        } else {
            off
        }
    }
}
