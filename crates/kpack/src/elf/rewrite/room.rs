//! Room for a grown program-header table where it is.
//!
//! Linkers size the table exactly, so the pieces the rewrite adds never fit. The
//! reference moves the table into a new trailing `PT_LOAD`; GNU binutils (`strip`,
//! `objcopy`, so `dh_strip` and RPM's `find-debuginfo`) cannot keep such a table:
//! BFD always lays the segment that holds the table out right after the previous
//! one, so the marker's segment moves away from the address the wrappers point at.
//!
//! Instead, the sections that follow the table in the first `PT_LOAD` (the dynamic
//! symbol and hash tables, version tables, dynamic relocations, `.interp`, notes:
//! things the loader finds through dynamic tags and program headers only) move as
//! one block into the new read-only segment beside the marker, and the table grows
//! in place over their old bytes. Nothing then depends on where the table is: the
//! layout is one every tool has seen before, and `e_phoff` stays where EL8 kernels
//! look for it, so executables need no padding.

use super::layout::{ElfLayout, PHENT, rd_u16, rd_u64, wr_u64};
use super::{DT_RELR, SHT_RELR};
use object::elf;

/// Dynamic tags whose value is the address of a table that may move.
const MOVABLE_TAGS: [u64; 10] = [
    elf::DT_HASH as u64,
    elf::DT_STRTAB as u64,
    elf::DT_SYMTAB as u64,
    elf::DT_RELA as u64,
    elf::DT_JMPREL as u64,
    DT_RELR,
    elf::DT_GNU_HASH as u64,
    elf::DT_VERSYM as u64,
    elf::DT_VERNEED as u64,
    elf::DT_VERDEF as u64,
];
/// `DT_LOPROC`: an address on both machines that define it, ppc64le's
/// `DT_PPC64_GLINK` (its PLT call stubs, in `.text`) and x86-64's `DT_X86_64_PLT`
/// (the IBT PLT); aarch64 defines no tag here.
const DT_PPC64_GLINK: u64 = 0x7000_0000;
/// Dynamic tags whose value is an address that must not lie in the moved block.
const FIXED_TAGS: [u64; 9] = [
    DT_PPC64_GLINK,
    elf::DT_PLTGOT as u64,
    elf::DT_INIT as u64,
    elf::DT_FINI as u64,
    elf::DT_INIT_ARRAY as u64,
    elf::DT_FINI_ARRAY as u64,
    elf::DT_PREINIT_ARRAY as u64,
    elf::DT_REL as u64,
    elf::DT_SYMTAB_SHNDX as u64,
];

/// The block of the first `PT_LOAD` that moves: file range, address, and what is in it.
#[derive(Debug, Clone)]
pub(crate) struct Room {
    /// File offsets `[start, end)` of the block in the input.
    pub start: u64,
    pub end: u64,
    /// The block's address (`start` mapped by the first `PT_LOAD`).
    pub vaddr: u64,
    /// Sections inside the block (indices). Non-`PT_LOAD` program headers in it
    /// (`PT_INTERP`, `PT_NOTE`, `PT_GNU_PROPERTY`) lie wholly inside and move too.
    pub sections: Vec<usize>,
}

impl Room {
    pub(crate) fn len(&self) -> u64 {
        self.end - self.start
    }
    /// Whether an input address lies in the block.
    pub(crate) fn holds_vaddr(&self, a: u64) -> bool {
        a >= self.vaddr && a < self.vaddr + self.len()
    }
}

fn movable(lay: &ElfLayout, i: usize) -> bool {
    let s = &lay.sections[i];
    if !s.alloc() || s.nobits() {
        return false;
    }
    match s.sh_type {
        elf::SHT_HASH
        | elf::SHT_GNU_HASH
        | elf::SHT_DYNSYM
        | elf::SHT_GNU_VERSYM
        | elf::SHT_GNU_VERNEED
        | elf::SHT_GNU_VERDEF
        | elf::SHT_RELA
        | elf::SHT_NOTE
        | SHT_RELR => true,
        // `.dynstr`: the string table the dynamic section links to.
        elf::SHT_STRTAB => lay
            .sections
            .iter()
            .any(|d| d.sh_type == elf::SHT_DYNAMIC && d.sh_link as usize == i),
        elf::SHT_PROGBITS => s.name == ".interp",
        _ => false,
    }
}

/// Find the smallest block after the table that frees room for `n_phdr` entries, or
/// `None` when what follows the table cannot move (the caller relocates the table).
pub(crate) fn find_room(lay: &ElfLayout, data_len: u64, n_phdr: u64, limit: u64) -> Option<Room> {
    let phoff = lay.e_phoff;
    let need_end = phoff.checked_add(n_phdr * PHENT)?;
    let first = lay
        .segments
        .iter()
        .find(|p| p.p_type == elf::PT_LOAD && p.p_offset <= phoff && phoff < p.file_end())?;
    if need_end > first.file_end() {
        return None;
    }
    // Sections with file bytes after the table, in file order.
    let mut after: Vec<usize> = (0..lay.sections.len())
        .filter(|&i| {
            let s = &lay.sections[i];
            s.sh_type != elf::SHT_NULL && s.file_size() > 0 && s.sh_offset >= phoff
        })
        .collect();
    after.sort_by_key(|&i| lay.sections[i].sh_offset);
    let start = *after.first().map(|i| &lay.sections[*i].sh_offset)?;
    let mut end = start;
    let mut sections = Vec::new();
    for &i in &after {
        let s = &lay.sections[i];
        if s.sh_offset >= need_end && s.sh_offset >= end {
            break;
        }
        if !movable(lay, i) || s.sh_offset + s.sh_size > first.file_end() {
            return None;
        }
        sections.push(i);
        end = end.max(s.sh_offset + s.sh_size);
    }
    if sections.is_empty() || end > limit || end > data_len {
        return None;
    }
    // Empty sections sitting in the block move with it (tools place them by offset).
    for (i, s) in lay.sections.iter().enumerate() {
        if s.sh_type != elf::SHT_NULL
            && s.alloc()
            && s.sh_size == 0
            && s.sh_offset > start
            && s.sh_offset < end
            && !sections.contains(&i)
        {
            sections.push(i);
        }
    }
    // Program headers: none may start inside the block unless it lies wholly in it
    // and is of a kind the loader finds by its header.
    for p in &lay.segments {
        if p.p_type == elf::PT_LOAD || p.p_filesz == 0 {
            continue;
        }
        let inside = p.p_offset >= start && p.file_end() <= end;
        let touches = p.p_offset < end && start < p.file_end();
        if !touches {
            continue;
        }
        let kind_ok = matches!(
            p.p_type,
            elf::PT_INTERP | elf::PT_NOTE | elf::PT_GNU_PROPERTY
        );
        if !inside || !kind_ok {
            return None;
        }
    }
    if lay
        .segments
        .iter()
        .any(|p| p.p_type == elf::PT_LOAD && p.p_offset > start && p.p_offset < end)
    {
        return None;
    }
    let vaddr = first.p_vaddr + (start - first.p_offset);
    Some(Room {
        start,
        end,
        vaddr,
        sections,
    })
}

/// Whether the dynamic section refers into the block through anything but a table
/// tag the move updates (then the block cannot move).
pub(crate) fn dynamic_blocks_move(
    data: &[u8],
    dynamic: std::ops::Range<usize>,
    room: &Room,
) -> bool {
    dynamic.step_by(16).any(|o| {
        o + 16 <= data.len()
            && FIXED_TAGS.contains(&rd_u64(data, o))
            && room.holds_vaddr(rd_u64(data, o + 8))
    })
}

/// Re-point the dynamic tags of the moved tables (`dynamic`: the section's bytes in
/// the output).
pub(crate) fn move_dynamic_tags(
    out: &mut [u8],
    dynamic: std::ops::Range<usize>,
    room: &Room,
    dv: u64,
) {
    for o in dynamic.step_by(16) {
        if o + 16 > out.len() {
            break;
        }
        let tag = rd_u64(out, o);
        if tag == elf::DT_NULL as u64 {
            break;
        }
        let v = rd_u64(out, o + 8);
        if MOVABLE_TAGS.contains(&tag) && room.holds_vaddr(v) {
            wr_u64(out, o + 8, v.wrapping_add(dv));
        }
    }
}

/// Move the values of the symbols defined in moved sections (`table`: a symbol
/// table's bytes in the output).
pub(crate) fn move_symbols(
    out: &mut [u8],
    table: std::ops::Range<usize>,
    moved: &[usize],
    dv: u64,
) {
    for o in table.step_by(24) {
        if o + 24 > out.len() {
            break;
        }
        let shndx = usize::from(rd_u16(out, o + 6));
        if shndx != 0 && moved.contains(&shndx) {
            let v = rd_u64(out, o + 8);
            wr_u64(out, o + 8, v.wrapping_add(dv));
        }
    }
}

/// Put the moved sections last in the section-header table (the others keep their
/// order), renumbering every reference: `sh_link`, `sh_info` of relocation sections,
/// `e_shstrndx` and the symbols' `st_shndx`. Tools that walk sections in index order
/// while they mean file order (patchelf 0.14 grows the program-header table over
/// the sections it finds that way) then see what they expect. Returns the new
/// `e_shstrndx`, or `None` when a section type that holds section indices in its
/// contents (groups, extended indices) makes the renumbering unsafe.
pub(crate) fn renumber(
    out: &mut super::Image<'_>,
    sections: &mut Vec<super::layout::Section>,
    moved: &[usize],
    shstrndx: usize,
) -> Option<u16> {
    if sections
        .iter()
        .any(|s| matches!(s.sh_type, elf::SHT_GROUP | elf::SHT_SYMTAB_SHNDX))
    {
        return None;
    }
    let n = sections.len();
    let mut order: Vec<usize> = (0..n).filter(|i| !moved.contains(i)).collect();
    let mut last: Vec<usize> = moved.to_vec();
    last.sort_by_key(|&i| sections[i].sh_offset);
    order.extend(last);
    // BFD (GNU strip, objcopy) reads a string table that no earlier symbol table
    // claimed by first loading every section that links to it, which renumbers the
    // sections of its output; it copies `.dynsym` as raw bytes, so its `st_shndx`
    // values would go stale. A dynamic symbol table kept just before its strings
    // avoids that.
    for &m in moved {
        let link = sections[m].sh_link as usize;
        if sections[m].sh_type == elf::SHT_DYNSYM && link != 0 && !moved.contains(&link) {
            order.retain(|&i| i != m);
            let at = order.iter().position(|&i| i == link).unwrap_or(order.len());
            order.insert(at, m);
        }
    }
    let mut new_index = vec![0usize; n];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let remap = |i: u32| -> u32 {
        match new_index.get(i as usize) {
            Some(&j) if i != 0 => j as u32,
            _ => i,
        }
    };
    let mut renumbered: Vec<super::layout::Section> =
        order.iter().map(|&i| sections[i].clone()).collect();
    for s in &mut renumbered {
        s.sh_link = remap(s.sh_link);
        let info_link = s.sh_flags & u64::from(elf::SHF_INFO_LINK) != 0;
        if matches!(s.sh_type, elf::SHT_REL | elf::SHT_RELA) || info_link {
            s.sh_info = remap(s.sh_info);
        }
    }
    for s in &renumbered {
        if !matches!(s.sh_type, elf::SHT_SYMTAB | elf::SHT_DYNSYM) {
            continue;
        }
        let (start, end) = (s.sh_offset as usize, (s.sh_offset + s.sh_size) as usize);
        if end > out.len() {
            continue;
        }
        let table = out.edit(start..end);
        let n = table.len();
        for o in (0..n).step_by(24).filter(|o| o + 24 <= n) {
            let shndx = u32::from(rd_u16(table, o + 6));
            if shndx != 0 && shndx < u32::from(elf::SHN_LORESERVE) {
                let v = remap(shndx) as u16;
                table[o + 6..o + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
    *sections = renumbered;
    Some(new_index[shstrndx] as u16)
}
