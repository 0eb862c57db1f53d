//! The later phases of the rewrite, once [`super::checks`] has said what goes: the
//! new program headers ([`split_segments`]), where the table, the moved block and
//! the marker go ([`Place::choose`]), then the output [`Image`]: wrappers patched,
//! the new segment appended, section headers and the headers written.

use super::checks::{Cut, Relocs, Site, Target};
use super::image::Image;
use super::layout::{PHDRS_SECTION, PHENT, SHENT, Section, Segment, range, wr_u16, wr_u32, wr_u64};
use super::room::{self, Room};
use super::{PhdrLayout, Result, RewriteError, WrapperChange, round_up};
use crate::elf::machine::MIN_PAGE;
use crate::elf::{MAGIC_HIPK, WRAPPER_SIZE};
use crate::kpack::marker::MARKER_SECTION;
use object::elf;

/// Zero padding an executable's moved program-header table may need beyond the
/// removed bytes (which stay in its address space): more means segments that reach
/// far past the file, and a padded output of that size is refused, not built.
const MAX_EXTRA_PADDING: u64 = 1 << 30;

/// The program headers with the device code's `PT_LOAD` split around the removed
/// pages, and every later offset shifted.
pub(super) fn split_segments(site: &Site, cut: &Cut) -> Vec<Segment> {
    let page = site.page();
    let mut segs: Vec<Segment> = Vec::with_capacity(site.lay.segments.len() + 4);
    for (i, p) in site.lay.segments.iter().enumerate() {
        if i == cut.t_index && cut.removed > 0 {
            split_device_segment(site, cut, &mut segs);
            continue;
        }
        let mut q = *p;
        q.p_offset = cut.shift(q.p_offset);
        if q.p_type == elf::PT_LOAD
            && q.p_align > page
            && (q.p_vaddr.wrapping_sub(q.p_offset)) % q.p_align != 0
        {
            // Removing whole pages keeps page congruence, not larger alignments.
            q.p_align = page;
        }
        segs.push(q);
    }
    segs
}

/// The pieces of the `PT_LOAD` that held the device code: head, prefix, hole (no
/// file bytes) and tail, or the head ending in zero-filled memory.
fn split_device_segment(site: &Site, cut: &Cut, segs: &mut Vec<Segment>) {
    let (lay, page, fb_idx) = (&site.lay, site.page(), site.fb_idx);
    let Cut {
        t,
        v,
        s,
        o,
        a,
        a_off,
        removed,
        ..
    } = *cut;
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
            && (t.p_offset..merged_end).contains(&cut.shift(x.sh_offset))
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
}

/// Where the grown program-header table, the moved block and the marker go.
pub(super) struct Place {
    /// The page size the file is laid out for.
    pub page: u64,
    /// Program headers in the output.
    pub n_phdr: u64,
    /// Whether the table stays at `e_phoff` (it had room, or room was made).
    pub fits_in_place: bool,
    /// The block that moves beside the marker to make that room.
    pub room: Option<Room>,
    /// Bytes of table in the new segment (0 when it stays).
    pub table_bytes: u64,
    /// An executable's load bias, and whether its moved table is padded to where
    /// the kernel looks for it.
    pub bias: u64,
    pub normalise: bool,
    /// The new segment's address.
    pub new_vaddr: u64,
    /// Where the moved block goes in the output, and how long it is.
    pub block_at: Option<u64>,
    pub block_len: u64,
    pub block_gap: u64,
    pub marker_vaddr: u64,
}

impl Place {
    /// Choose, for `n_segs` program headers besides the new segment's.
    pub fn choose(
        site: &Site,
        relocs: &Relocs,
        cut: &Cut,
        phdrs: PhdrLayout,
        n_segs: usize,
    ) -> Result<Self> {
        let (data, lay, page) = (site.data, &site.lay, site.page());
        let mut new_vaddr = round_up(lay.load_end(), page);
        let n_phdr = n_segs as u64 + 1;
        let fits = table_fits(site, cut, n_phdr);
        let room = (!fits && phdrs == PhdrLayout::InPlace)
            .then(|| make_room(site, relocs, cut, n_phdr))
            .flatten();
        let fits_in_place = fits || room.is_some();
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
        let base_len = data.len() as u64 - cut.removed;
        if normalise {
            let off = round_up(base_len, page);
            new_vaddr = new_vaddr.max(off + bias);
            let padding = (new_vaddr - bias).saturating_sub(off);
            if padding > cut.removed.saturating_add(MAX_EXTRA_PADDING) {
                return Err(RewriteError::Refused(format!(
                    "its segments reach {padding:#x} bytes past the end of the file: the \
                     moved program-header table would need that much zero padding"
                )));
            }
        }
        // With a moved block, the new segment sits at the end of the file without page
        // padding (its address is chosen congruent to its offset): zeros, the block at
        // its offset modulo 64 (every section alignment it holds), then the marker, last
        // as re-pointing expects (remark.rs). At least one zero byte comes first:
        // llvm-objcopy 15 takes a segment that starts where an earlier program header
        // (PT_INTERP of a moved `.interp`) starts for that one's child, and misplaces it.
        let block_at = room.as_ref().map(|r| {
            new_vaddr = round_up(lay.load_end(), page) + base_len % page;
            let pad = (r.start % 64 + 64 - base_len % 64) % 64;
            base_len + if pad == 0 { 64 } else { pad }
        });
        let block_len = room.as_ref().map_or(0, Room::len);
        let block_gap = block_at.map_or(0, |g| g - base_len);
        Ok(Place {
            page,
            n_phdr,
            fits_in_place,
            room,
            table_bytes,
            bias,
            normalise,
            new_vaddr,
            block_at,
            block_len,
            block_gap,
            marker_vaddr: new_vaddr + table_bytes + block_gap + block_len,
        })
    }

    /// How far the moved block's addresses move (input to output).
    pub fn block_shift(&self, r: &Room, new_off: u64) -> u64 {
        let g = self.block_at.unwrap_or(new_off);
        (self.new_vaddr + (g - new_off)).wrapping_sub(r.vaddr)
    }
}

/// Whether `n_phdr` program headers fit where the table is: up to the first
/// content after it, inside the `PT_LOAD` that maps it, before the cut.
fn table_fits(site: &Site, cut: &Cut, n_phdr: u64) -> bool {
    let lay = &site.lay;
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
        .unwrap_or(site.data.len() as u64);
    let covering_load = lay
        .segments
        .iter()
        .find(|p| p.p_type == elf::PT_LOAD && p.p_offset <= phoff && phoff < p.file_end());
    phoff + n_phdr * PHENT <= next_content
        && covering_load.is_some_and(|p| phoff + n_phdr * PHENT <= p.file_end())
        && phoff < cut.range.start
}

/// No room for the table: the block that follows it moves into the marker's
/// segment (room.rs), so the table grows in place and strip/objcopy keep the
/// layout. `None` when nothing can move.
fn make_room(site: &Site, relocs: &Relocs, cut: &Cut, n_phdr: u64) -> Option<Room> {
    let (data, lay) = (site.data, &site.lay);
    let dynamic_range = lay
        .sections
        .iter()
        .find(|s| s.sh_type == elf::SHT_DYNAMIC && !s.nobits())
        .and_then(|s| range(data, s.sh_offset, s.sh_size, ".dynamic").ok());
    let relative = site.relative();
    room::find_room(lay, data.len() as u64, n_phdr, cut.range.start).filter(|r| {
        let dyn_ok = dynamic_range
            .clone()
            .is_none_or(|d| !room::dynamic_blocks_move(data, d, r));
        // A relocated pointer into the block would dangle.
        let rela_ok = !relocs
            .slots
            .values()
            .any(|x| x.r_type == relative && r.holds_vaddr(x.addend as u64));
        dyn_ok && rela_ok
    })
}

/// Point every wrapper at the marker: magic `HIPK`, the pointer (and its RELA
/// relocation, made relative), the co_index.
pub(super) fn patch_wrappers(
    out: &mut Image,
    site: &Site,
    relocs: &Relocs,
    cut: &Cut,
    targets: &[Target],
    marker_vaddr: u64,
) -> Vec<WrapperChange> {
    let at = |off: usize| cut.shift(off as u64) as usize;
    let relative = site.relative();
    let mut changes = Vec::with_capacity(targets.len());
    for (i, t) in targets.iter().enumerate() {
        let w = site.seg_range.start + i * WRAPPER_SIZE;
        out.put(at(w), &MAGIC_HIPK.to_le_bytes());
        out.put(at(w + 8), &marker_vaddr.to_le_bytes());
        out.put(at(w + 16), &t.co_index.to_le_bytes());
        if let Some(r) = relocs.slots.get(&t.slot_vaddr) {
            out.put(at(r.entry_offset + 8), &u64::from(relative).to_le_bytes());
            out.put(at(r.entry_offset + 16), &marker_vaddr.to_le_bytes());
        }
        changes.push(WrapperChange {
            index: i,
            old_pointer: t.pointer,
            new_pointer: marker_vaddr,
            co_index: t.co_index,
            via: t.via,
        });
    }
    changes
}

/// Where the new segment's parts landed in the output.
pub(super) struct Appended {
    /// Zeros added so that an executable's moved table is where the kernel looks.
    pub phdr_padding: u64,
    /// The new segment's file offset, and the marker's.
    pub new_off: u64,
    pub marker_off: u64,
}

/// Append the new segment: padding, room for a moved table, the moved block, the
/// marker.
pub(super) fn append_segment(out: &mut Image, place: &Place, marker: &[u8]) -> Appended {
    let block = place
        .room
        .as_ref()
        .map(|r| out.read(r.start as usize..r.end as usize));
    if block.is_none() {
        out.grow_to(round_up(out.len() as u64, place.page) as usize);
    }
    let before_pad = out.len() as u64;
    if place.normalise {
        out.grow_to((place.new_vaddr - place.bias) as usize);
    }
    let phdr_padding = out.len() as u64 - before_pad;
    let new_off = out.len() as u64;
    out.grow_to(out.len() + place.table_bytes as usize);
    if let (Some(b), Some(g)) = (&block, place.block_at) {
        out.grow_to(g as usize);
        out.extend_from_slice(b);
    }
    let marker_off = out.len() as u64;
    out.extend_from_slice(marker);
    Appended {
        phdr_padding,
        new_off,
        marker_off,
    }
}

/// Add the new segment after the last `PT_LOAD` and make `PT_PHDR` describe the
/// table where it now is. Returns `e_phoff`.
pub(super) fn final_segments(
    segs: &mut Vec<Segment>,
    site: &Site,
    place: &Place,
    app: &Appended,
    marker_len: u64,
) -> u64 {
    let last_load = segs
        .iter()
        .rposition(|p| p.p_type == elf::PT_LOAD)
        .unwrap_or(segs.len() - 1);
    let size = place.table_bytes + place.block_gap + place.block_len + marker_len;
    let new_load = Segment {
        p_type: elf::PT_LOAD,
        p_flags: elf::PF_R,
        p_offset: app.new_off,
        p_vaddr: place.new_vaddr,
        p_paddr: place.new_vaddr,
        p_filesz: size,
        p_memsz: size,
        p_align: place.page,
    };
    segs.insert(last_load + 1, new_load);
    for p in segs.iter_mut().filter(|p| p.p_type == elf::PT_PHDR) {
        if !place.fits_in_place {
            p.p_offset = app.new_off;
            p.p_vaddr = place.new_vaddr;
            p.p_paddr = place.new_vaddr;
        }
        p.p_filesz = place.n_phdr * PHENT;
        p.p_memsz = place.n_phdr * PHENT;
    }
    if place.fits_in_place {
        site.lay.e_phoff
    } else {
        app.new_off
    }
}

/// The section headers of the output: offsets shifted, `.hip_fatbin` NOBITS, the
/// moved block's sections where they went, the new names and sections appended
/// (the section-name table is rewritten at the end of `out`). Returns them and
/// `e_shstrndx`.
pub(super) fn final_sections(
    out: &mut Image,
    site: &Site,
    cut: &Cut,
    place: &Place,
    app: &Appended,
    segs: &mut [Segment],
    marker_len: u64,
) -> Result<(Vec<Section>, u16)> {
    let lay = &site.lay;
    let mut sections = lay.sections.clone();
    for (i, sec) in sections.iter_mut().enumerate() {
        // Every section, empty and NOBITS ones too: tools match them to segments by offset.
        if i != site.fb_idx && sec.sh_type != elf::SHT_NULL {
            sec.sh_offset = cut.shift(sec.sh_offset);
        }
    }
    if cut.removed > 0 {
        sections[site.fb_idx].sh_type = elf::SHT_NOBITS;
        place_hole(site, cut, segs, &mut sections);
    }
    if let Some(r) = &place.room {
        move_block(out, site, place, app, r, segs, &mut sections);
    }
    append_names(out, site, place, app, &mut sections, marker_len)?;
    let mut e_shstrndx = lay.e_shstrndx;
    if let Some(r) = &place.room {
        e_shstrndx = room::renumber(out, &mut sections, &r.sections, usize::from(lay.e_shstrndx))
            .ok_or_else(|| {
            RewriteError::Refused(
                "section groups or extended section indices: the sections after the \
                     program headers cannot be renumbered"
                    .into(),
            )
        })?;
    }
    Ok((sections, e_shstrndx))
}

/// The hole has no file bytes, so its offset only has to be page-congruent. Tools
/// (eu-elflint) place NOBITS sections in segments by offset over p_memsz: choose
/// an offset whose range holds no other NOBITS section and no other segment.
fn place_hole(site: &Site, cut: &Cut, segs: &mut [Segment], sections: &mut [Section]) {
    let fb_idx = site.fb_idx;
    let hole_i = segs
        .iter()
        .position(|p| p.p_type == elf::PT_LOAD && p.p_vaddr == cut.a && p.p_filesz == 0);
    let Some(hi) = hole_i else {
        return;
    };
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
        c += site.page();
    }
    segs[hi].p_offset = c;
    if cut.v == cut.a {
        sections[fb_idx].sh_offset = c;
    }
}

/// The moved block's sections and non-`PT_LOAD` program headers at their new
/// offsets and addresses, and the dynamic tags and symbols that name them.
fn move_block(
    out: &mut Image,
    site: &Site,
    place: &Place,
    app: &Appended,
    r: &Room,
    segs: &mut [Segment],
    sections: &mut [Section],
) {
    let lay = &site.lay;
    let g = place.block_at.unwrap_or(app.new_off);
    let dv = place.block_shift(r, app.new_off);
    for &i in &r.sections {
        sections[i].sh_offset = g + (lay.sections[i].sh_offset - r.start);
        sections[i].sh_addr = lay.sections[i].sh_addr.wrapping_add(dv);
    }
    for q in segs.iter_mut().filter(|q| {
        q.p_type != elf::PT_LOAD && q.p_offset >= r.start && q.file_end() <= r.end && q.p_filesz > 0
    }) {
        q.p_offset = g + (q.p_offset - r.start);
        q.p_vaddr = q.p_vaddr.wrapping_add(dv);
        q.p_paddr = q.p_paddr.wrapping_add(dv);
    }
    for s in sections.iter() {
        let Some(end) = s
            .sh_offset
            .checked_add(s.file_size())
            .filter(|&e| e <= out.len() as u64)
        else {
            continue;
        };
        let rg = s.sh_offset as usize..end as usize;
        match s.sh_type {
            elf::SHT_DYNAMIC => room::move_dynamic_tags(out.edit(rg.clone()), 0..rg.len(), r, dv),
            elf::SHT_SYMTAB | elf::SHT_DYNSYM => {
                room::move_symbols(out.edit(rg.clone()), 0..rg.len(), &r.sections, dv)
            }
            _ => {}
        }
    }
}

/// The section-name table with the new names, appended to `out`, and the headers
/// of the moved table (when it moved) and of the marker.
fn append_names(
    out: &mut Image,
    site: &Site,
    place: &Place,
    app: &Appended,
    sections: &mut Vec<Section>,
    marker_len: u64,
) -> Result<()> {
    let (data, lay) = (site.data, &site.lay);
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
    let new_section =
        |sh_name: u32, name: &str, addr: u64, offset: u64, size: u64, align: u64| Section {
            name: name.into(),
            sh_name,
            sh_type: elf::SHT_PROGBITS,
            sh_flags: u64::from(elf::SHF_ALLOC),
            sh_addr: addr,
            sh_offset: offset,
            sh_size: size,
            sh_link: 0,
            sh_info: 0,
            sh_addralign: align,
            sh_entsize: 0,
        };
    if place.table_bytes > 0 {
        sections.push(new_section(
            phdrs_name,
            PHDRS_SECTION,
            place.new_vaddr,
            app.new_off,
            place.table_bytes,
            8,
        ));
    }
    sections.push(new_section(
        marker_name,
        MARKER_SECTION,
        place.marker_vaddr,
        app.marker_off,
        marker_len,
        1,
    ));
    Ok(())
}

/// Append the section headers, and write the program headers at `e_phoff` and the
/// ELF header's table fields.
pub(super) fn write_headers(
    out: &mut Image,
    segs: &[Segment],
    sections: &[Section],
    e_phoff: u64,
    e_shstrndx: u16,
) {
    out.grow_to(round_up(out.len() as u64, 8) as usize);
    let e_shoff = out.len() as u64;
    for sec in sections {
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
    let table = out.edit(e_phoff as usize..(e_phoff + segs.len() as u64 * PHENT) as usize);
    for (i, p) in segs.iter().enumerate() {
        let at = i * PHENT as usize;
        wr_u32(table, at, p.p_type);
        wr_u32(table, at + 4, p.p_flags);
        wr_u64(table, at + 8, p.p_offset);
        wr_u64(table, at + 16, p.p_vaddr);
        wr_u64(table, at + 24, p.p_paddr);
        wr_u64(table, at + 32, p.p_filesz);
        wr_u64(table, at + 40, p.p_memsz);
        wr_u64(table, at + 48, p.p_align);
    }
    let header = out.edit(0..64);
    wr_u64(header, 32, e_phoff);
    wr_u64(header, 40, e_shoff);
    wr_u16(header, 56, segs.len() as u16);
    wr_u16(header, 60, sections.len() as u16);
    wr_u16(header, 62, e_shstrndx);
}
