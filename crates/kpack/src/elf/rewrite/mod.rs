//! The host-only rewrite of an ELF fat binary (spec §5).
//!
//! A packed binary keeps its host code and loses its device code. The rewrite:
//!
//! 1. adds the `.rocm_kpack_ref` marker (MessagePack `{kpack_search_paths,
//!    kernel_name}`), mapped by one new read-only `PT_LOAD` at a fresh page-aligned
//!    address above every segment; when the program-header table has no room to grow
//!    in place it moves into that same segment (`PT_PHDR` follows it, `PT_INTERP`
//!    data never moves);
//! 2. points every `.hipFatBinSegment` wrapper at the marker (RELA addend for PIE
//!    executables and shared libraries, converting a symbol-based `R_X86_64_64` to
//!    `R_X86_64_RELATIVE` (their aarch64 and ppc64le equivalents on those hosts:
//!    `machine.rs`); the stored pointer for non-PIE executables, never zeroed),
//!    writes magic `HIPK` and stores in the reserved field the index of the bundle the
//!    wrapper pointed to (its co_index; `-fgpu-rdc` wrappers share one);
//! 3. checks that no relocation still targets `.hip_fatbin`;
//! 4. removes the whole pages of `.hip_fatbin` from the file, splitting its `PT_LOAD`
//!    into head / prefix / hole (no file bytes) / tail pieces and marking the section
//!    `SHT_NOBITS`; when the section ends on a page boundary one page is kept so the
//!    hole and the tail never share a file offset;
//! 5. verifies the result before anything is written.
//!
//! Everything happens on an in-memory image: [`plan_rewrite`] computes the output
//! bytes and a [`RewritePlan`] describing them (read back from those bytes), which
//! both the preview and the TUI show; [`apply_rewrite`] writes the same bytes
//! atomically with the input's mode.
//!
//! `layout.rs` reads the program and section headers ([`parse_layout`]), `room.rs`
//! makes room for the program headers in place, `verify.rs` checks an image against
//! its input ([`verify_rewritten`]).

mod layout;
mod room;
mod verify;

pub use layout::{ElfLayout, PHDRS_SECTION, Section, Segment, parse_layout};
pub(crate) use layout::{PHENT, SHENT, range, rd_u32, rd_u64, wr_u64};
pub use verify::{structural_faults, verify_rewritten};

use layout::{wr_u16, wr_u32};

const DT_RELR: u64 = 36;
const SHT_RELR: u32 = 19;

use crate::bundle;
use crate::elf::machine::MIN_PAGE;
use crate::elf::{FATBIN_SECTION, MAGIC_HIPF, MAGIC_HIPK, WRAPPER_SECTION, WRAPPER_SIZE};
use crate::error::FormatError;
use crate::kpack::marker::{MARKER_SECTION, Marker};
use object::elf;
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

/// Why a binary cannot be rewritten.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    /// Not an ELF file.
    #[error("not an ELF file")]
    NotElf,
    /// A valid ELF of a kind the rewrite does not handle.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// No `.hip_fatbin` section.
    #[error("not a fat binary (no .hip_fatbin section)")]
    NotFatBinary,
    /// The device code was already moved out.
    #[error("already host-only ({0})")]
    AlreadyHostOnly(String),
    /// Headers or tables are malformed.
    #[error("malformed ELF: {0}")]
    Malformed(FormatError),
    /// The binary is well-formed, but the rewrite could not be done faithfully.
    #[error("cannot rewrite: {0}")]
    Refused(String),
    /// The computed output failed verification (nothing was written).
    #[error("the rewritten image fails verification: {}", .0.join("; "))]
    VerifyFailed(Vec<String>),
}

pub(crate) type Result<T> = std::result::Result<T, RewriteError>;

fn malformed(offset: u64, what: impl Into<String>) -> RewriteError {
    RewriteError::Malformed(FormatError::new(offset, what.into()))
}

/// What happens to one wrapper.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WrapperChange {
    /// Position in `.hipFatBinSegment`.
    pub index: usize,
    /// Where its pointer pointed (a bundle start in `.hip_fatbin`).
    pub old_pointer: u64,
    /// The marker's address.
    pub new_pointer: u64,
    /// The bundle it pointed to: stored as co_index.
    pub co_index: u32,
    /// How the pointer is set: `rela-relative`, `rela-abs64→relative`, `in-place`.
    pub via: &'static str,
}

/// The rewrite, computed: what changes, and the bytes to write.
#[derive(Debug, Clone, Serialize)]
pub struct RewritePlan {
    /// The host CPU.
    pub machine: crate::elf::machine::HostMachine,
    /// The page size the file is laid out for (whole pages of it are removed).
    pub page: u64,
    /// Input size.
    pub input_size: u64,
    /// Output size.
    pub output_size: u64,
    /// Bytes of `.hip_fatbin` removed from the file (whole pages).
    pub bytes_removed: u64,
    /// Size of `.hip_fatbin`.
    pub fatbin_size: u64,
    /// Number of bundles in `.hip_fatbin`.
    pub bundles: usize,
    /// The marker written.
    pub marker: Marker,
    /// Its encoded size.
    pub marker_size: u64,
    /// Its virtual address.
    pub marker_vaddr: u64,
    /// Whether the program-header table moved into the new segment.
    pub phdr_relocated: bool,
    /// Zero bytes added so that an executable's moved program-header table is mapped
    /// where the kernel looks for it (address = offset + load bias; EL8 kernels).
    pub phdr_padding: u64,
    /// Sections that followed the program-header table and moved beside the marker,
    /// so that the table grows in place (empty when it had room, or was relocated).
    pub moved_sections: Vec<String>,
    /// The wrappers redirected.
    pub wrappers: Vec<WrapperChange>,
    /// Program headers before.
    pub segments_before: Vec<Segment>,
    /// Program headers after.
    pub segments_after: Vec<Segment>,
    /// Sections before.
    pub sections_before: Vec<Section>,
    /// Sections after.
    pub sections_after: Vec<Section>,
}

/// A computed rewrite: the plan and the output bytes.
pub struct Rewritten {
    /// What changes.
    pub plan: RewritePlan,
    /// The output image.
    pub bytes: Vec<u8>,
}

struct RelaSlot {
    /// File offset of the Elf64_Rela entry.
    entry_offset: usize,
    r_type: u32,
    sym: u32,
    addend: i64,
    symtab: u32,
}

fn round_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a).saturating_mul(a)
}

/// Where a grown program-header table goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PhdrLayout {
    /// In place: the sections after the table move beside the marker when it has no
    /// room (what GNU strip and objcopy keep; the default).
    #[default]
    InPlace,
    /// Into the new segment, as the reference transform does (kept to produce that
    /// layout in tests of `normalize` and `verify`; GNU strip breaks it).
    Reference,
}

/// Compute the host-only rewrite of `data` with `marker`. Nothing is written.
pub fn plan_rewrite(data: &[u8], marker: &Marker) -> Result<Rewritten> {
    plan_rewrite_with(data, marker, PhdrLayout::InPlace)
}

/// [`plan_rewrite`] with the program-header table placed as `phdrs` says.
pub fn plan_rewrite_with(data: &[u8], marker: &Marker, phdrs: PhdrLayout) -> Result<Rewritten> {
    let lay = parse_layout(data)?;
    let Some(machine) = lay.machine else {
        return Err(RewriteError::Unsupported(format!(
            "{} host code (only {} fat binaries are rewritten)",
            crate::elf::machine::machine_name(lay.e_machine),
            crate::elf::machine::handled_list()
        )));
    };
    let (relative, abs64, page) = (machine.relative(), machine.abs64(), lay.page);
    let kind_ok = matches!(lay.e_type, elf::ET_EXEC | elf::ET_DYN);
    if !kind_ok {
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
    let bundles = bundle::walk_section(&data[fb_range])
        .map_err(|e| RewriteError::Malformed(e.shifted(fb.sh_offset)))?;
    let seg_range = range(data, seg_sec.sh_offset, seg_sec.sh_size, WRAPPER_SECTION)?;
    let n_wrappers = (seg_sec.sh_size / WRAPPER_SIZE as u64) as usize;
    if n_wrappers == 0 {
        return Err(RewriteError::Refused(format!("{WRAPPER_SECTION} is empty")));
    }

    // Relocation index: slot vaddr -> RELA entry (one pass, hashed).
    let mut relas: HashMap<u64, RelaSlot> = HashMap::new();
    let mut fatbin_refs = Vec::new();
    let fb_lo = fb.sh_addr;
    let fb_hi = fb.sh_addr + fb.sh_size;
    let mut has_rel_or_relr = false;
    for (si, s) in lay.sections.iter().enumerate() {
        if s.sh_type == elf::SHT_REL || s.sh_type == SHT_RELR {
            has_rel_or_relr = true;
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
            let _ = si;
            if slot.r_type == relative && (fb_lo..fb_hi).contains(&(slot.addend as u64)) {
                fatbin_refs.push((r_offset, slot.addend as u64));
            }
            relas.insert(r_offset, slot);
        }
    }
    // DT_RELR in the dynamic section also means packed relocations.
    if let Some((_, dynamic)) = lay
        .sections
        .iter()
        .enumerate()
        .find(|(_, s)| s.sh_type == elf::SHT_DYNAMIC)
        && let Ok(r) = range(data, dynamic.sh_offset, dynamic.file_size(), ".dynamic")
    {
        has_rel_or_relr |= r
            .step_by(16)
            .any(|o| o + 16 <= data.len() && rd_u64(data, o) == DT_RELR);
    }

    let symbol_value = |symtab: u32, sym: u32| -> Option<u64> {
        let t = lay.sections.get(symtab as usize)?;
        let off = t.sh_offset.checked_add(u64::from(sym) * 24)?;
        if off + 24 > t.sh_offset + t.file_size() || off + 24 > data.len() as u64 {
            return None;
        }
        Some(rd_u64(data, off as usize + 8))
    };

    // Where each wrapper points, and so its co_index.
    let mut targets = Vec::with_capacity(n_wrappers);
    for i in 0..n_wrappers {
        let w = seg_range.start + i * WRAPPER_SIZE;
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
        let slot_vaddr = seg_sec.sh_addr + (i * WRAPPER_SIZE) as u64 + 8;
        let (target, via) = if lay.e_type == elf::ET_DYN {
            match relas.get(&slot_vaddr) {
                Some(r) if r.r_type == relative && r.sym == 0 => (r.addend as u64, "rela-relative"),
                Some(r) if r.r_type == abs64 => {
                    let v = symbol_value(r.symtab, r.sym).ok_or_else(|| {
                        RewriteError::Refused(format!(
                            "wrapper {i}: relocation symbol {} cannot be read",
                            r.sym
                        ))
                    })?;
                    (v.wrapping_add(r.addend as u64), "rela-abs64→relative")
                }
                Some(r) => {
                    return Err(RewriteError::Refused(format!(
                        "wrapper {i}: pointer relocated by unsupported type {}",
                        r.r_type
                    )));
                }
                None if has_rel_or_relr => {
                    return Err(RewriteError::Refused(format!(
                        "wrapper {i}: pointer has no RELA relocation and the binary uses packed DT_RELR/REL relocations, which are not supported"
                    )));
                }
                None => {
                    return Err(RewriteError::Refused(format!(
                        "wrapper {i}: pointer at {slot_vaddr:#x} has no relocation in a position-independent binary"
                    )));
                }
            }
        } else {
            (rd_u64(data, w + 8), "in-place")
        };
        let co_index = target
            .checked_sub(fb.sh_addr)
            .and_then(|o| bundles.iter().position(|b| b.offset == o))
            .ok_or_else(|| {
                RewriteError::Refused(format!(
                    "wrapper {i} points at {target:#x}, which is not the start of a bundle in {FATBIN_SECTION} ({:#x}..{fb_hi:#x})",
                    fb.sh_addr
                ))
            })?;
        targets.push((slot_vaddr, co_index as u32, target, via));
    }
    // Relocations into .hip_fatbin other than the wrappers' would dangle.
    let wrapper_slots: Vec<u64> = targets.iter().map(|t| t.0).collect();
    let stray: Vec<String> = fatbin_refs
        .iter()
        .filter(|(off, _)| !wrapper_slots.contains(off))
        .map(|(off, a)| format!("{off:#x} -> {a:#x}"))
        .collect();
    if !stray.is_empty() {
        return Err(RewriteError::Refused(format!(
            "relocations other than the wrappers' point into {FATBIN_SECTION}: {}",
            stray.join(", ")
        )));
    }

    // --- Zero-paging: which file bytes go.
    let (v, s, o) = (fb.sh_addr, fb.sh_size, fb.sh_offset);
    let t_index = lay
        .segments
        .iter()
        .position(|p| p.p_type == elf::PT_LOAD && p.p_vaddr <= v && v + s <= p.p_vaddr + p.p_filesz)
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
    let cut = a_off..a_off + removed;
    if removed > 0 {
        for (i, p) in lay.segments.iter().enumerate() {
            if i != t_index && p.p_filesz > 0 && p.p_offset < cut.end && cut.start < p.file_end() {
                return Err(RewriteError::Refused(format!(
                    "segment {i} ({}) overlaps the bytes of {FATBIN_SECTION}",
                    p.type_name()
                )));
            }
        }
        // A section sharing the removed bytes would name other bytes afterwards
        // (and could reach the marker, which re-pointing needs last).
        for (i, x) in lay.sections.iter().enumerate() {
            if i != fb_idx
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
    }
    let shift = |off: u64| {
        if removed > 0 && off >= cut.end {
            off - removed
        } else {
            off
        }
    };

    // --- New program headers.
    let mut segs: Vec<Segment> = Vec::with_capacity(lay.segments.len() + 4);
    for (i, p) in lay.segments.iter().enumerate() {
        if i == t_index && removed > 0 {
            let mk = |vaddr: u64, offset: u64, filesz: u64, memsz: u64| Segment {
                p_vaddr: vaddr,
                p_paddr: vaddr,
                p_offset: offset,
                p_filesz: filesz,
                p_memsz: memsz,
                ..t
            };
            // Tools (eu-elflint) place NOBITS sections in segments by file offset over
            // p_memsz: the merged segment must not seem to hold another one.
            let merged_end = t.p_offset + (v + s - t.p_vaddr);
            let shadows_nobits = lay.sections.iter().enumerate().any(|(j, x)| {
                j != fb_idx
                    && x.nobits()
                    && x.alloc()
                    && x.sh_size > 0
                    && (t.p_offset..merged_end).contains(&shift(x.sh_offset))
            });
            // On 64 KiB pages a device range that starts inside a page would need a
            // prefix piece, and its NOBITS section would then span two segments (which
            // eu-elflint and BFD reject): the merged shape is the lesser evil there.
            let prefix_needed = v < a && page > MIN_PAGE;
            if t.p_vaddr < v && v - t.p_vaddr <= t.p_filesz && (!shadows_nobits || prefix_needed) {
                // What precedes the device code keeps its bytes; the device range
                // becomes the zero-filled end of the same segment, as `.bss` ends a
                // data segment: a shape every tool lays out again as it was (a
                // segment of its own with no file bytes is re-placed by GNU strip
                // at offset 0, which eu-elflint then rejects).
                segs.push(mk(t.p_vaddr, t.p_offset, v - t.p_vaddr, v + s - t.p_vaddr));
            } else {
                if t.p_vaddr < v {
                    segs.push(mk(
                        t.p_vaddr,
                        t.p_offset,
                        (v - t.p_vaddr).min(t.p_filesz),
                        v - t.p_vaddr,
                    ));
                }
                if v < a {
                    segs.push(mk(v, o, a - v, a - v));
                }
                segs.push(mk(a, a_off, 0, v + s - a));
            }
            if v + s < t.mem_end() && o + s < t.file_end() {
                let mut tail = mk(
                    v + s,
                    o + s - removed,
                    t.file_end() - (o + s),
                    t.mem_end() - (v + s),
                );
                // A tail that holds no code (`.eh_frame` after the device code in the
                // one R+X segment of aarch64's and ppc64le's GNU ld) is not executable.
                let code_in_tail = lay.sections.iter().any(|x| {
                    x.sh_flags & u64::from(elf::SHF_EXECINSTR) != 0
                        && x.sh_size > 0
                        && x.sh_addr < tail.mem_end()
                        && tail.p_vaddr < x.sh_addr + x.sh_size
                });
                if !code_in_tail {
                    tail.p_flags &= !elf::PF_X;
                }
                segs.push(tail);
            } else if v + s < t.mem_end() {
                // Only zero-initialised memory follows: extend the hole over it.
                if let Some(h) = segs.last_mut() {
                    h.p_memsz = t.mem_end() - h.p_vaddr;
                }
            }
            continue;
        }
        let mut q = *p;
        q.p_offset = shift(q.p_offset);
        if q.p_type == elf::PT_LOAD
            && q.p_align > page
            && (q.p_vaddr.wrapping_sub(q.p_offset)) % q.p_align != 0
        {
            // Removing whole pages keeps page congruence, not larger alignments.
            q.p_align = page;
        }
        segs.push(q);
    }
    let last_load = segs
        .iter()
        .rposition(|p| p.p_type == elf::PT_LOAD)
        .unwrap_or(segs.len() - 1);
    let mut new_vaddr = round_up(lay.load_end(), page);
    let marker_bytes = marker.encode();
    let n_phdr = segs.len() as u64 + 1;
    // Room for the table where it is? Up to the first content after it.
    let phoff = lay.e_phoff;
    let next_content = lay
        .sections
        .iter()
        .filter(|s| s.sh_type != elf::SHT_NULL && s.file_size() > 0 && s.sh_offset > phoff)
        .map(|s| s.sh_offset)
        .chain(
            lay.segments
                .iter()
                .filter(|p| p.p_filesz > 0 && p.p_offset > phoff)
                .map(|p| p.p_offset),
        )
        .min()
        .unwrap_or(data.len() as u64);
    let covering_load = lay
        .segments
        .iter()
        .find(|p| p.p_type == elf::PT_LOAD && p.p_offset <= phoff && phoff < p.file_end());
    let mut fits_in_place = phoff + n_phdr * PHENT <= next_content
        && covering_load.is_some_and(|p| phoff + n_phdr * PHENT <= p.file_end())
        && phoff < cut.start;
    // No room: move what follows the table into the marker's segment (room.rs), so
    // the table grows in place and strip/objcopy keep the layout.
    let dynamic_range = lay
        .sections
        .iter()
        .find(|s| s.sh_type == elf::SHT_DYNAMIC && !s.nobits())
        .and_then(|s| range(data, s.sh_offset, s.sh_size, ".dynamic").ok());
    let room = if fits_in_place || phdrs == PhdrLayout::Reference {
        None
    } else {
        room::find_room(&lay, data.len() as u64, n_phdr, cut.start).filter(|r| {
            let dyn_ok = dynamic_range
                .clone()
                .is_none_or(|d| !room::dynamic_blocks_move(data, d, r));
            // A relocated pointer into the block would dangle.
            let rela_ok = !relas
                .values()
                .any(|x| x.r_type == relative && r.holds_vaddr(x.addend as u64));
            dyn_ok && rela_ok
        })
    };
    if room.is_some() {
        fits_in_place = true;
    }
    let table_bytes = if fits_in_place { 0 } else { n_phdr * PHENT };
    // An executable whose table moves gets it where the kernel looks (workflows.md
    // §5): Linux 4.18 (EL8) computes AT_PHDR as the load address + e_phoff, and a
    // directly run binary whose table is elsewhere crashes in ld.so. So the new
    // segment's address is its file offset plus the first segment's address - offset
    // (0 for PIE: p_vaddr == p_offset); the file is zero-padded when it is shorter.
    let bias = lay
        .segments
        .iter()
        .find(|p| p.p_type == elf::PT_LOAD)
        .map_or(0, |p| p.p_vaddr.wrapping_sub(p.p_offset));
    let normalise = !fits_in_place
        && lay.segments.iter().any(|p| p.p_type == elf::PT_INTERP)
        && bias % page == 0
        && bias < 1 << 47;
    if normalise {
        let off = round_up(data.len() as u64 - removed, page);
        new_vaddr = new_vaddr.max(off + bias);
    }

    // With a moved block, the new segment sits at the end of the file without page
    // padding (its address is chosen congruent to its offset): zeros, the block at
    // its offset modulo 64 (every section alignment it holds), then the marker, last
    // as re-pointing expects (remark.rs). At least one zero byte comes first:
    // llvm-objcopy 15 takes a segment that starts where an earlier program header
    // (PT_INTERP of a moved `.interp`) starts for that one's child, and misplaces it.
    let base_len = data.len() as u64 - removed;
    let marker_len = marker_bytes.len() as u64;
    let block_at = room.as_ref().map(|r| {
        new_vaddr = round_up(lay.load_end(), page) + base_len % page;
        let pad = (r.start % 64 + 64 - base_len % 64) % 64;
        base_len + if pad == 0 { 64 } else { pad }
    });
    let block_len = room.as_ref().map_or(0, room::Room::len);
    let block_gap = block_at.map_or(0, |g| g - base_len);

    // --- Output image: the input without the removed pages, then the patches at
    // their shifted offsets (one copy of the bytes kept; removed pages never read).
    let marker_vaddr = new_vaddr + table_bytes + block_gap + block_len;
    let mut out = Vec::with_capacity(data.len() - removed as usize + 3 * page as usize);
    out.extend_from_slice(&data[..cut.start as usize]);
    out.extend_from_slice(&data[cut.end as usize..]);
    let at = |off: usize| shift(off as u64) as usize;
    let mut changes = Vec::with_capacity(n_wrappers);
    for (i, (slot_vaddr, co_index, target, via)) in targets.iter().enumerate() {
        let w = seg_range.start + i * WRAPPER_SIZE;
        wr_u32(&mut out, at(w), MAGIC_HIPK);
        wr_u64(&mut out, at(w + 8), marker_vaddr);
        wr_u32(&mut out, at(w + 16), *co_index);
        if let Some(r) = relas.get(slot_vaddr) {
            wr_u64(&mut out, at(r.entry_offset + 8), u64::from(relative));
            wr_u64(&mut out, at(r.entry_offset + 16), marker_vaddr);
        }
        changes.push(WrapperChange {
            index: i,
            old_pointer: *target,
            new_pointer: marker_vaddr,
            co_index: *co_index,
            via,
        });
    }
    let block = room
        .as_ref()
        .map(|r| out[r.start as usize..r.end as usize].to_vec());
    if block.is_none() {
        out.resize(round_up(out.len() as u64, page) as usize, 0);
    }
    let before_pad = out.len() as u64;
    if normalise {
        out.resize((new_vaddr - bias) as usize, 0);
    }
    let phdr_padding = out.len() as u64 - before_pad;
    let new_off = out.len() as u64;
    out.resize(out.len() + table_bytes as usize, 0);
    if let (Some(b), Some(g)) = (&block, block_at) {
        out.resize(g as usize, 0);
        out.extend_from_slice(b);
    }
    let marker_off = out.len() as u64;
    out.extend_from_slice(&marker_bytes);
    let new_load = Segment {
        p_type: elf::PT_LOAD,
        p_flags: elf::PF_R,
        p_offset: new_off,
        p_vaddr: new_vaddr,
        p_paddr: new_vaddr,
        p_filesz: table_bytes + block_gap + block_len + marker_len,
        p_memsz: table_bytes + block_gap + block_len + marker_len,
        p_align: page,
    };
    segs.insert(last_load + 1, new_load);
    let e_phoff = if fits_in_place { phoff } else { new_off };
    for p in segs.iter_mut().filter(|p| p.p_type == elf::PT_PHDR) {
        if !fits_in_place {
            p.p_offset = new_off;
            p.p_vaddr = new_vaddr;
            p.p_paddr = new_vaddr;
        }
        p.p_filesz = n_phdr * PHENT;
        p.p_memsz = n_phdr * PHENT;
    }
    // Section headers: shifted offsets, .hip_fatbin NOBITS, the marker appended.
    let mut sections = lay.sections.clone();
    for (i, sec) in sections.iter_mut().enumerate() {
        // Every section, empty and NOBITS ones too: tools match them to segments by offset.
        if i != fb_idx && sec.sh_type != elf::SHT_NULL {
            sec.sh_offset = shift(sec.sh_offset);
        }
    }
    if removed > 0 {
        sections[fb_idx].sh_type = elf::SHT_NOBITS;
        // The hole has no file bytes, so its offset only has to be page-congruent. Tools
        // (eu-elflint) place NOBITS sections in segments by offset over p_memsz: choose
        // an offset whose range holds no other NOBITS section and no other segment.
        let hole_i = segs
            .iter()
            .position(|p| p.p_type == elf::PT_LOAD && p.p_vaddr == a && p.p_filesz == 0);
        if let Some(hi) = hole_i {
            let memsz = segs[hi].p_memsz;
            let taken = |c: u64| {
                sections.iter().enumerate().any(|(i, x)| {
                    i != fb_idx
                        && x.nobits()
                        && x.sh_size > 0
                        && (c..c.saturating_add(memsz)).contains(&x.sh_offset)
                }) || segs
                    .iter()
                    .enumerate()
                    .any(|(j, p)| j != hi && p.p_type == elf::PT_LOAD && p.p_offset == c)
            };
            let mut c = segs[hi].p_offset;
            while taken(c) {
                c += page;
            }
            segs[hi].p_offset = c;
            if v == a {
                sections[fb_idx].sh_offset = c;
            }
        }
    }
    if let Some(r) = &room {
        let g = block_at.unwrap_or(new_off);
        let dv = (new_vaddr + (g - new_off)).wrapping_sub(r.vaddr);
        for &i in &r.sections {
            sections[i].sh_offset = g + (lay.sections[i].sh_offset - r.start);
            sections[i].sh_addr = lay.sections[i].sh_addr.wrapping_add(dv);
        }
        for q in segs.iter_mut().filter(|q| {
            q.p_type != elf::PT_LOAD
                && q.p_offset >= r.start
                && q.file_end() <= r.end
                && q.p_filesz > 0
        }) {
            q.p_offset = g + (q.p_offset - r.start);
            q.p_vaddr = q.p_vaddr.wrapping_add(dv);
            q.p_paddr = q.p_paddr.wrapping_add(dv);
        }
        for s in &sections {
            let Ok(rg) = range(&out, s.sh_offset, s.file_size(), &s.name) else {
                continue;
            };
            match s.sh_type {
                elf::SHT_DYNAMIC => room::move_dynamic_tags(&mut out, rg, r, dv),
                elf::SHT_SYMTAB | elf::SHT_DYNSYM => {
                    room::move_symbols(&mut out, rg, &r.sections, dv)
                }
                _ => {}
            }
        }
    }
    let shstr = &lay.sections[usize::from(lay.e_shstrndx)];
    let mut strtab = data[range(data, shstr.sh_offset, shstr.sh_size, ".shstrtab")?].to_vec();
    let marker_name = strtab.len() as u32;
    strtab.extend_from_slice(MARKER_SECTION.as_bytes());
    strtab.push(0);
    let phdrs_name = strtab.len() as u32;
    strtab.extend_from_slice(PHDRS_SECTION.as_bytes());
    strtab.push(0);
    let str_off = out.len() as u64;
    out.extend_from_slice(&strtab);
    let si = usize::from(lay.e_shstrndx);
    sections[si].sh_offset = str_off;
    sections[si].sh_size = strtab.len() as u64;
    if table_bytes > 0 {
        sections.push(Section {
            name: PHDRS_SECTION.into(),
            sh_name: phdrs_name,
            sh_type: elf::SHT_PROGBITS,
            sh_flags: u64::from(elf::SHF_ALLOC),
            sh_addr: new_vaddr,
            sh_offset: new_off,
            sh_size: table_bytes,
            sh_link: 0,
            sh_info: 0,
            sh_addralign: 8,
            sh_entsize: 0,
        });
    }
    sections.push(Section {
        name: MARKER_SECTION.into(),
        sh_name: marker_name,
        sh_type: elf::SHT_PROGBITS,
        sh_flags: u64::from(elf::SHF_ALLOC),
        sh_addr: marker_vaddr,
        sh_offset: marker_off,
        sh_size: marker_bytes.len() as u64,
        sh_link: 0,
        sh_info: 0,
        sh_addralign: 1,
        sh_entsize: 0,
    });
    let mut e_shstrndx = lay.e_shstrndx;
    if let Some(r) = &room {
        e_shstrndx = room::renumber(
            &mut out,
            &mut sections,
            &r.sections,
            usize::from(lay.e_shstrndx),
        )
        .ok_or_else(|| {
            RewriteError::Refused(
                "section groups or extended section indices: the sections after the \
                     program headers cannot be renumbered"
                    .into(),
            )
        })?;
    }
    out.resize(round_up(out.len() as u64, 8) as usize, 0);
    let e_shoff = out.len() as u64;
    for sec in &sections {
        let mut h = [0u8; SHENT as usize];
        wr_u32(&mut h, 0, sec.sh_name);
        wr_u32(&mut h, 4, sec.sh_type);
        wr_u64(&mut h, 8, sec.sh_flags);
        wr_u64(&mut h, 16, sec.sh_addr);
        wr_u64(&mut h, 24, sec.sh_offset);
        wr_u64(&mut h, 32, sec.sh_size);
        wr_u32(&mut h, 40, sec.sh_link);
        wr_u32(&mut h, 44, sec.sh_info);
        wr_u64(&mut h, 48, sec.sh_addralign);
        wr_u64(&mut h, 56, sec.sh_entsize);
        out.extend_from_slice(&h);
    }
    for (i, p) in segs.iter().enumerate() {
        let at = (e_phoff + i as u64 * PHENT) as usize;
        wr_u32(&mut out, at, p.p_type);
        wr_u32(&mut out, at + 4, p.p_flags);
        wr_u64(&mut out, at + 8, p.p_offset);
        wr_u64(&mut out, at + 16, p.p_vaddr);
        wr_u64(&mut out, at + 24, p.p_paddr);
        wr_u64(&mut out, at + 32, p.p_filesz);
        wr_u64(&mut out, at + 40, p.p_memsz);
        wr_u64(&mut out, at + 48, p.p_align);
    }
    wr_u64(&mut out, 32, e_phoff);
    wr_u64(&mut out, 40, e_shoff);
    wr_u16(&mut out, 56, segs.len() as u16);
    wr_u16(&mut out, 60, sections.len() as u16);
    wr_u16(&mut out, 62, e_shstrndx);

    let moved = room.as_ref().zip(block_at).map(|(r, g)| {
        let dv = (new_vaddr + (g - new_off)).wrapping_sub(r.vaddr);
        (r.vaddr..r.vaddr + r.len(), dv)
    });
    let mut faults = verify_rewritten(data, &out, marker, bundles.len(), moved);
    match crate::elf::loaded::loaded_view(&out) {
        Ok(Some(view)) => faults.extend(view.faults),
        Ok(None) => faults.push("no wrapper section in the loaded image".into()),
        Err(e) => faults.push(format!("the loader cannot read it: {e}")),
    }
    if !faults.is_empty() {
        return Err(RewriteError::VerifyFailed(faults));
    }
    let after = parse_layout(&out)?;
    let plan = RewritePlan {
        machine,
        page,
        input_size: data.len() as u64,
        output_size: out.len() as u64,
        bytes_removed: removed,
        fatbin_size: fb.sh_size,
        bundles: bundles.len(),
        marker: marker.clone(),
        marker_size: marker_bytes.len() as u64,
        marker_vaddr,
        phdr_relocated: !fits_in_place,
        phdr_padding,
        moved_sections: room
            .as_ref()
            .map(|r| {
                let mut v: Vec<&Section> = r.sections.iter().map(|&i| &lay.sections[i]).collect();
                v.sort_by_key(|s| s.sh_offset);
                v.iter().map(|s| s.name.clone()).collect()
            })
            .unwrap_or_default(),
        wrappers: changes,
        segments_before: lay.segments.clone(),
        segments_after: after.segments,
        sections_before: lay.sections.clone(),
        sections_after: after.sections,
    };
    Ok(Rewritten { plan, bytes: out })
}

/// Rewrite `input` to `output` atomically (temp file in the output's directory, then
/// rename), with the input's permission bits. Returns the plan.
pub fn apply_rewrite(input: &Path, output: &Path, marker: &Marker) -> crate::Result<RewritePlan> {
    crate::fsutil::check_apart(input, output)?;
    let map = crate::fsutil::map_file(input).map_err(|e| crate::Error::io(input, e))?;
    let data: &[u8] = map.as_deref().unwrap_or_default();
    let rewritten = plan_rewrite(data, marker)
        .map_err(|e| crate::Error::Invalid(format!("{}: {e}", input.display())))?;
    let mode = std::fs::metadata(input)
        .map_err(|e| crate::Error::io(input, e))?
        .permissions();
    crate::fsutil::write_atomic(output, &rewritten.bytes, Some(mode))?;
    Ok(rewritten.plan)
}
