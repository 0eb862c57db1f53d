//! Checks of a rewritten image: structural faults, and the result against its input.

use super::{ElfLayout, PHENT, Section, Segment, parse_layout, rd_u32, rd_u64};
use crate::elf::{FATBIN_SECTION, MAGIC_HIPK, WRAPPER_SECTION, WRAPPER_SIZE};
use crate::kpack::marker::{MARKER_SECTION, Marker};
use object::elf;

/// Structural checks of an ELF image (shared by the rewrite's before/after comparison).
pub fn structural_faults(data: &[u8]) -> Vec<String> {
    let mut f = Vec::new();
    let lay = match parse_layout(data) {
        Ok(l) => l,
        Err(e) => return vec![e.to_string()],
    };
    let len = data.len() as u64;
    let loads: Vec<&Segment> = lay
        .segments
        .iter()
        .filter(|p| p.p_type == elf::PT_LOAD)
        .collect();
    for (i, p) in loads.iter().enumerate() {
        if p.p_offset % lay.page != p.p_vaddr % lay.page {
            f.push(format!(
                "LOAD {i} at {:#x}: offset {:#x} not congruent with its address modulo the {:#x} page",
                p.p_vaddr, p.p_offset, lay.page
            ));
        }
        if p.p_align > 1 && (p.p_vaddr.wrapping_sub(p.p_offset)) % p.p_align != 0 {
            f.push(format!(
                "LOAD {i} at {:#x}: offset/address not congruent modulo p_align {:#x}",
                p.p_vaddr, p.p_align
            ));
        }
        if p.p_filesz > p.p_memsz {
            f.push(format!("LOAD {i} at {:#x}: filesz > memsz", p.p_vaddr));
        }
        if p.p_filesz > 0 && p.file_end() > len {
            f.push(format!(
                "LOAD {i} at {:#x}: file bytes pass the end of the file",
                p.p_vaddr
            ));
        }
    }
    for w in loads.windows(2) {
        if w[1].p_vaddr < w[0].p_vaddr {
            f.push(format!(
                "LOAD segments not sorted by address ({:#x} after {:#x})",
                w[1].p_vaddr, w[0].p_vaddr
            ));
        }
        if w[1].p_vaddr < w[0].mem_end() {
            f.push(format!(
                "LOAD segments overlap in memory at {:#x}",
                w[1].p_vaddr
            ));
        }
    }
    for (i, a) in loads.iter().enumerate() {
        for b in loads.iter().skip(i + 1) {
            if a.p_filesz > 0
                && b.p_filesz > 0
                && a.p_offset < b.file_end()
                && b.p_offset < a.file_end()
            {
                f.push(format!(
                    "LOAD segments at {:#x} and {:#x} share file bytes",
                    a.p_vaddr, b.p_vaddr
                ));
            }
            if a.p_offset == b.p_offset && (a.p_filesz == 0 || b.p_filesz == 0) {
                f.push(format!(
                    "LOAD segments at {:#x} and {:#x} share file offset {:#x} (NOBITS collision)",
                    a.p_vaddr, b.p_vaddr, a.p_offset
                ));
            }
        }
    }
    if let Some(ph) = lay.segments.iter().find(|p| p.p_type == elf::PT_PHDR) {
        if ph.p_offset != lay.e_phoff {
            f.push("PT_PHDR does not describe the program header table's offset".into());
        }
        if ph.p_filesz < (lay.segments.len() as u64).saturating_mul(PHENT) {
            f.push("PT_PHDR is smaller than the program header table".into());
        }
        if !loads.iter().any(|l| {
            l.p_offset <= ph.p_offset
                && ph.file_end() <= l.file_end()
                && ph.p_vaddr.wrapping_sub(l.p_vaddr) == ph.p_offset - l.p_offset
        }) {
            f.push("no PT_LOAD maps the program header table where PT_PHDR says".into());
        }
    }
    for s in lay
        .sections
        .iter()
        .filter(|s| s.alloc() && s.sh_type != elf::SHT_NULL)
    {
        if s.file_size() > 0 {
            let inside = loads.iter().any(|l| {
                l.p_offset <= s.sh_offset
                    && s.sh_offset + s.sh_size <= l.file_end()
                    && s.sh_addr.wrapping_sub(l.p_vaddr) == s.sh_offset - l.p_offset
            });
            if !inside {
                f.push(format!(
                    "section {} is not mapped by a PT_LOAD as its address says",
                    s.name
                ));
            }
        } else if s.sh_size > 0
            && !loads
                .iter()
                .any(|l| l.p_vaddr <= s.sh_addr && s.sh_addr + s.sh_size <= l.mem_end())
        {
            f.push(format!(
                "NOBITS section {} is not inside a PT_LOAD's memory",
                s.name
            ));
        }
        if s.file_size() > 0 && s.sh_offset.saturating_add(s.file_size()) > len {
            f.push(format!("section {} passes the end of the file", s.name));
        }
    }
    f
}

fn flags_of_load(lay: &ElfLayout, s: &Section) -> Option<u32> {
    lay.segments
        .iter()
        .filter(|p| p.p_type == elf::PT_LOAD)
        .find(|p| p.p_vaddr <= s.sh_addr && s.sh_addr + s.sh_size.max(1) <= p.mem_end())
        .map(|p| p.p_flags)
}

/// Check a rewritten image against its input: no structural problem the input did
/// not have, every alloc section mapped with the same permissions as before (but
/// `.hip_fatbin`), wrappers HIPK pointing at the marker with co_indexes covering
/// every bundle, no relocation into `.hip_fatbin`. Returns the faults.
pub fn verify_rewritten(
    input: &[u8],
    output: &[u8],
    marker: &Marker,
    n_bundles: usize,
    moved: Option<(std::ops::Range<u64>, u64)>,
) -> Vec<String> {
    verify_rewritten_releasing(input, output, marker, n_bundles, moved, &|_, _| {})
}

/// How many bytes of a section are compared before their pages may be released:
/// one folio ([`crate::fsutil::FAULT_SPAN`]). (At 8 MiB, the check of a host part
/// written by pack held up to 8 MiB of input and 8 MiB of output: packing an 8 GiB
/// tree, 13 MiB of mapped input and output were resident at once, 6 MiB at 2 MiB.)
const COMPARE_CHUNK: usize = crate::fsutil::FAULT_SPAN;

/// Whether `x` and `y` are equal, compared chunk by chunk; `done` is told each
/// compared pair of ranges (offsets in `input`, `output`).
fn same_content(
    (input, x): (&[u8], std::ops::Range<usize>),
    (output, y): (&[u8], std::ops::Range<usize>),
    done: &dyn Compared,
) -> bool {
    let (Some(a), Some(b)) = (input.get(x.clone()), output.get(y.clone())) else {
        return false;
    };
    if a.len() != b.len() {
        return false;
    }
    if let Some(files) = done.files() {
        return same_in_files(files, x, y);
    }
    let mut at = 0;
    for (p, q) in a.chunks(COMPARE_CHUNK).zip(b.chunks(COMPARE_CHUNK)) {
        let same = p == q;
        done.done(
            x.start + at..x.start + at + p.len(),
            y.start + at..y.start + at + q.len(),
        );
        if !same {
            return false;
        }
        at += p.len();
    }
    true
}

/// Whether `x` of the input file and `y` of the output file hold the same bytes,
/// read with positioned reads of `fsutil::READ_PIECE` (a read that fails is a
/// difference).
fn same_in_files(
    (input, output): (&std::fs::File, &std::fs::File),
    x: std::ops::Range<usize>,
    y: std::ops::Range<usize>,
) -> bool {
    use std::os::unix::fs::FileExt;
    let n = x.len().min(crate::fsutil::READ_PIECE);
    let (mut a, mut b) = (vec![0u8; n], vec![0u8; n]);
    let mut at = 0;
    while at < x.len() {
        let n = (x.len() - at).min(crate::fsutil::READ_PIECE);
        let read = input
            .read_exact_at(&mut a[..n], (x.start + at) as u64)
            .is_ok()
            && output
                .read_exact_at(&mut b[..n], (y.start + at) as u64)
                .is_ok();
        if !read || a[..n] != b[..n] {
            return false;
        }
        at += n;
    }
    true
}

/// How the contents of input and output sections are compared: through the slices
/// given, each range compared told to `done` (so that the caller can release its
/// pages), or, when both lie in files, with positioned reads of the files, so that
/// nothing of them is mapped.
pub trait Compared {
    /// Ranges of input and output whose contents were compared.
    fn done(&self, input: std::ops::Range<usize>, output: std::ops::Range<usize>);

    /// The input and output files to read instead of the slices.
    fn files(&self) -> Option<(&std::fs::File, &std::fs::File)> {
        None
    }
}

/// A function told what was compared: the slices are compared.
impl<F: Fn(std::ops::Range<usize>, std::ops::Range<usize>)> Compared for F {
    fn done(&self, input: std::ops::Range<usize>, output: std::ops::Range<usize>) {
        self(input, output)
    }
}

/// [`verify_rewritten`] of read-only file maps: `done` is told the ranges of input
/// and output whose contents were compared, so that their pages can leave the
/// resident set while a large section is checked, or reads them from the files
/// ([`Compared`]).
pub fn verify_rewritten_releasing(
    input: &[u8],
    output: &[u8],
    marker: &Marker,
    n_bundles: usize,
    moved: Option<(std::ops::Range<u64>, u64)>,
    done: &dyn Compared,
) -> Vec<String> {
    // Sections the rewrite moved (input addresses, and by how much).
    let addr_after = |a: u64| match &moved {
        Some((r, dv)) if r.contains(&a) => a.wrapping_add(*dv),
        _ => a,
    };
    let before = structural_faults(input);
    let mut faults: Vec<String> = structural_faults(output)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    let (Ok(a), Ok(b)) = (parse_layout(input), parse_layout(output)) else {
        faults.push("cannot parse the rewritten headers".into());
        return faults;
    };
    for s in a
        .sections
        .iter()
        .filter(|s| s.alloc() && s.name != FATBIN_SECTION && s.sh_size > 0)
    {
        let Some(t) = b
            .sections
            .iter()
            .find(|t| t.name == s.name && t.sh_addr == addr_after(s.sh_addr))
        else {
            faults.push(format!("section {} disappeared", s.name));
            continue;
        };
        let (was, is) = (flags_of_load(&a, s), flags_of_load(&b, t));
        // Data that shared one R+X segment with the code (aarch64's and ppc64le's GNU
        // ld lay text, tables and `.eh_frame` out so) may lose execute permission
        // when it moves beside the marker or ends up in the tail piece.
        let not_code = s.sh_flags & u64::from(elf::SHF_EXECINSTR) == 0;
        let lost_only_x = not_code && was.zip(is).is_some_and(|(w, i)| w & !elf::PF_X == i);
        if was != is && !lost_only_x {
            faults.push(format!("section {} changed segment permissions", s.name));
        }
        if t.sh_type != s.sh_type || t.sh_size != s.sh_size {
            faults.push(format!("section {} changed type or size", s.name));
        }
        if s.file_size() > 0 {
            let (ra, rb) = (
                s.sh_offset as usize..(s.sh_offset + s.sh_size) as usize,
                t.sh_offset as usize..(t.sh_offset + t.sh_size) as usize,
            );
            let edited = s.name == WRAPPER_SECTION
                || s.sh_type == elf::SHT_RELA
                || (moved.is_some() && matches!(s.sh_type, elf::SHT_DYNAMIC | elf::SHT_DYNSYM));
            let same = if edited {
                input.get(ra).is_some() && output.get(rb).is_some()
            } else {
                same_content((input, ra), (output, rb), done)
            };
            if !same {
                faults.push(format!("section {} changed content", s.name));
            }
        }
    }
    let Some(m) = b.sections.iter().find(|s| s.name == MARKER_SECTION) else {
        faults.push("no marker section".into());
        return faults;
    };
    match output
        .get(m.sh_offset as usize..(m.sh_offset + m.sh_size) as usize)
        .map(Marker::decode)
    {
        Some(Ok(got)) if &got == marker => {}
        _ => faults.push("marker section does not decode to the marker".into()),
    }
    if b.vaddr_to_offset(m.sh_addr) != Some(m.sh_offset) {
        faults.push("marker is not mapped at its address".into());
    }
    let Some(seg) = b.sections.iter().find(|s| s.name == WRAPPER_SECTION) else {
        faults.push("no wrapper section".into());
        return faults;
    };
    let mut seen = vec![false; n_bundles];
    let words = output
        .get(seg.sh_offset as usize..(seg.sh_offset + seg.sh_size) as usize)
        .unwrap_or_default();
    for (i, w) in words.chunks_exact(WRAPPER_SIZE).enumerate() {
        if rd_u32(w, 0) != MAGIC_HIPK {
            faults.push(format!("wrapper {i} is not HIPK"));
        }
        if rd_u64(w, 8) != m.sh_addr {
            faults.push(format!("wrapper {i} does not point at the marker"));
        }
        match seen.get_mut(rd_u32(w, 16) as usize) {
            Some(s) => *s = true,
            None => faults.push(format!(
                "wrapper {i}: co_index {} is not a bundle",
                rd_u32(w, 16)
            )),
        }
    }
    if let Some(k) = seen.iter().position(|s| !s) {
        faults.push(format!("bundle {k} is referenced by no wrapper"));
    }
    let fb = b.sections.iter().find(|s| s.name == FATBIN_SECTION);
    let relative = b.machine.map(|m| m.relative());
    for s in b.sections.iter().filter(|s| s.sh_type == elf::SHT_RELA) {
        let Some(r) = output.get(s.sh_offset as usize..(s.sh_offset + s.sh_size) as usize) else {
            continue;
        };
        for e in r.chunks_exact(24) {
            let (off, typ, add) = (rd_u64(e, 0), rd_u32(e, 8), rd_u64(e, 16));
            if Some(typ) == relative {
                if let Some(fb) = fb
                    && (fb.sh_addr..fb.sh_addr + fb.sh_size).contains(&add)
                {
                    faults.push(format!(
                        "relocation at {off:#x} still points into {FATBIN_SECTION}"
                    ));
                }
                if (seg.sh_addr..seg.sh_addr + seg.sh_size).contains(&off)
                    && (off - seg.sh_addr) % 24 == 8
                    && add != m.sh_addr
                {
                    faults.push(format!(
                        "wrapper relocation at {off:#x} does not point at the marker"
                    ));
                }
            }
        }
    }
    faults
}
