//! Host-only rewrite of a PE/COFF fat binary (PE32+ DLL or EXE), the PE version of
//! the ELF transform (`kpack-formats.md` §5.10): a `.kpackrf` section holds the
//! marker; the `.hipFatB` wrappers become `HIPK` with the pointer at the marker
//! (`ImageBase + RVA`, the existing DIR64 base relocation applies the load delta) and
//! `reserved1` = the bundle each pointed to; `.hip_fat` keeps its virtual size but
//! loses all its raw data (the loader zero-fills it), later sections move down in the
//! file; `SizeOfImage`, `SizeOfInitializedData`, the section count and the checksum
//! (when set) are updated. [`verify_rewritten`] checks the result, and runs after
//! every rewrite.
//!
//! Refused, with the reason: 32-bit images, a `.hip_fat` without `.hipFatB` (or the
//! reverse), an image already rewritten, signed images (the signature would break),
//! data after the last section (an overlay), no room in the headers for one more
//! section, wrappers not pointing at a bundle, base relocations in `.hip_fat` or
//! pointers other than the wrappers into it.

use super::{FATBIN_SECTION, MARKER_SECTION, WRAPPER_SECTION};
use crate::bundle;
use crate::kpack::Marker;
use serde::Serialize;

use crate::elf::{MAGIC_HIPF, MAGIC_HIPK};
const SCN_CNT_INITIALIZED_DATA: u32 = 0x40;
const SCN_MEM_READ: u32 = 0x4000_0000;
mod phases;

const DIR_SECURITY: usize = 4;
const DIR_BASERELOC: usize = 5;
const DIR_DEBUG: usize = 6;

/// Why a PE image is not rewritten.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeRewriteError {
    /// Malformed: what and where.
    #[error("malformed PE image: {0}")]
    Malformed(String),
    /// Valid, but not something this rewrite handles.
    #[error("{0}")]
    Refused(String),
}

type R<T> = std::result::Result<T, PeRewriteError>;

fn bad(s: impl Into<String>) -> PeRewriteError {
    PeRewriteError::Malformed(s.into())
}
fn refuse(s: impl Into<String>) -> PeRewriteError {
    PeRewriteError::Refused(s.into())
}

fn u16_at(d: &[u8], o: usize) -> R<u16> {
    d.get(o..o + 2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .ok_or_else(|| {
            bad(format!(
                "header field at {o:#x} is past the end of the file"
            ))
        })
}
fn u32_at(d: &[u8], o: usize) -> R<u32> {
    d.get(o..o + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| {
            bad(format!(
                "header field at {o:#x} is past the end of the file"
            ))
        })
}
fn u64_at(d: &[u8], o: usize) -> R<u64> {
    d.get(o..o + 8)
        .map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        })
        .ok_or_else(|| bad(format!("field at {o:#x} is past the end of the file")))
}
fn put_u16(d: &mut [u8], o: usize, v: u16) {
    d[o..o + 2].copy_from_slice(&v.to_le_bytes());
}
fn put_u32(d: &mut [u8], o: usize, v: u32) {
    d[o..o + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(d: &mut [u8], o: usize, v: u64) {
    d[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

/// One section header.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PeSection {
    /// Name (up to 8 bytes).
    pub name: String,
    /// Bytes in memory.
    pub virtual_size: u32,
    /// RVA.
    pub virtual_address: u32,
    /// Bytes in the file.
    pub size_of_raw_data: u32,
    /// File offset.
    pub pointer_to_raw_data: u32,
    /// Flags.
    pub characteristics: u32,
}

/// The parts of a PE32+ image the rewrite reads and changes.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PeLayout {
    /// File offset of the COFF header.
    pub coff: usize,
    /// File offset of the optional header.
    pub opt: usize,
    /// File offset of the section table.
    pub table: usize,
    /// Preferred load address.
    pub image_base: u64,
    /// Section alignment in memory.
    pub section_alignment: u32,
    /// Section alignment in the file.
    pub file_alignment: u32,
    /// `SizeOfImage`.
    pub size_of_image: u32,
    /// `SizeOfHeaders`.
    pub size_of_headers: u32,
    /// `CheckSum`.
    pub checksum: u32,
    /// Data directories (RVA, size).
    pub dirs: Vec<(u32, u32)>,
    /// Sections, in table order.
    pub sections: Vec<PeSection>,
}

impl PeLayout {
    /// The section named `name`.
    pub fn section(&self, name: &str) -> Option<(usize, &PeSection)> {
        self.sections
            .iter()
            .enumerate()
            .find(|(_, s)| s.name == name)
    }

    /// File offset of an RVA (inside a section's raw data), if any.
    pub fn offset_of(&self, rva: u32) -> Option<usize> {
        self.sections.iter().find_map(|s| {
            let end = s.virtual_address.checked_add(s.size_of_raw_data)?;
            (rva >= s.virtual_address && rva < end)
                .then(|| s.pointer_to_raw_data as usize + (rva - s.virtual_address) as usize)
        })
    }
}

/// Parse the headers of a PE32+ image.
pub fn parse_layout(d: &[u8]) -> R<PeLayout> {
    if !d.starts_with(b"MZ") {
        return Err(bad("no MZ header"));
    }
    let lfanew = u32_at(d, 0x3c)? as usize;
    if !(0x40..=(1 << 20)).contains(&lfanew) || d.get(lfanew..lfanew + 4) != Some(b"PE\0\0") {
        return Err(bad(format!("no PE signature at e_lfanew {lfanew:#x}")));
    }
    let coff = lfanew + 4;
    let nsec = u16_at(d, coff + 2)? as usize;
    let opt_size = u16_at(d, coff + 16)? as usize;
    let opt = coff + 20;
    match u16_at(d, opt)? {
        0x20b => {}
        0x10b => return Err(refuse("32-bit (PE32) images are not supported, only PE32+")),
        m => return Err(bad(format!("optional header magic {m:#x}"))),
    }
    if opt_size < 112 {
        return Err(bad(format!(
            "optional header of {opt_size} bytes is too short"
        )));
    }
    let ndirs = (u32_at(d, opt + 108)? as usize)
        .min((opt_size - 112) / 8)
        .min(16);
    let mut dirs = Vec::with_capacity(ndirs);
    for i in 0..ndirs {
        dirs.push((u32_at(d, opt + 112 + i * 8)?, u32_at(d, opt + 116 + i * 8)?));
    }
    let table = opt + opt_size;
    if nsec > 96 || table + nsec * 40 > d.len() {
        return Err(bad(format!("{nsec} sections do not fit in the file")));
    }
    let mut sections = Vec::with_capacity(nsec);
    for i in 0..nsec {
        let o = table + i * 40;
        let raw_name = &d[o..o + 8];
        let name =
            String::from_utf8_lossy(raw_name.split(|&b| b == 0).next().unwrap_or(&[])).into_owned();
        sections.push(PeSection {
            name,
            virtual_size: u32_at(d, o + 8)?,
            virtual_address: u32_at(d, o + 12)?,
            size_of_raw_data: u32_at(d, o + 16)?,
            pointer_to_raw_data: u32_at(d, o + 20)?,
            characteristics: u32_at(d, o + 36)?,
        });
    }
    let l = PeLayout {
        coff,
        opt,
        table,
        image_base: u64_at(d, opt + 24)?,
        section_alignment: u32_at(d, opt + 32)?,
        file_alignment: u32_at(d, opt + 36)?,
        size_of_image: u32_at(d, opt + 56)?,
        size_of_headers: u32_at(d, opt + 60)?,
        checksum: u32_at(d, opt + 64)?,
        dirs,
        sections,
    };
    // The PE format's rules: FileAlignment a power of two from 512 to 64 KiB (or equal
    // to a smaller SectionAlignment), SectionAlignment a power of two no smaller. The
    // output is sized by these, so a hostile value must not get through.
    let (fa, sa) = (l.file_alignment, l.section_alignment);
    if !fa.is_power_of_two()
        || !sa.is_power_of_two()
        || fa > 0x1_0000
        || sa < fa
        || fa < 512 && fa != sa
    {
        return Err(bad(format!(
            "alignments {:#x} (file) and {:#x} (sections) are not valid",
            l.file_alignment, l.section_alignment
        )));
    }
    for s in &l.sections {
        if s.size_of_raw_data > 0
            && (s.pointer_to_raw_data as u64 + s.size_of_raw_data as u64) > d.len() as u64
        {
            return Err(bad(format!(
                "section {} claims {} bytes at {:#x}, past the end of the file",
                s.name, s.size_of_raw_data, s.pointer_to_raw_data
            )));
        }
    }
    Ok(l)
}

/// The PE checksum (the image's 16-bit folded sum plus its length), with the
/// checksum field itself counted as zero.
pub fn checksum(d: &[u8], checksum_at: usize) -> u32 {
    let mut sum: u64 = 0;
    let mut i = 0;
    while i + 1 < d.len() {
        let w = if i == checksum_at || i == checksum_at + 2 {
            0
        } else {
            u16::from_le_bytes([d[i], d[i + 1]]) as u64
        };
        sum += w;
        sum = (sum & 0xffff) + (sum >> 16);
        i += 2;
    }
    if d.len() % 2 == 1 {
        sum += d[d.len() - 1] as u64;
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum = (sum & 0xffff) + (sum >> 16);
    (sum as u32).wrapping_add(d.len() as u32)
}

/// Base relocation entries of DIR64 type: the RVAs of the 8-byte slots they patch.
pub fn dir64_slots(d: &[u8], l: &PeLayout) -> R<Vec<u32>> {
    let Some(&(rva, size)) = l.dirs.get(DIR_BASERELOC) else {
        return Ok(Vec::new());
    };
    if size == 0 {
        return Ok(Vec::new());
    }
    let start = l.offset_of(rva).ok_or_else(|| {
        bad(format!(
            "base relocations at RVA {rva:#x} are in no section"
        ))
    })?;
    let end = start + size as usize;
    if end > d.len() {
        return Err(bad("base relocations run past the end of the file"));
    }
    let mut out = Vec::new();
    let mut o = start;
    while o + 8 <= end {
        let page = u32_at(d, o)?;
        let block = u32_at(d, o + 4)? as usize;
        if block < 8 || o + block > end {
            return Err(bad(format!(
                "base relocation block at {o:#x} of {block} bytes"
            )));
        }
        for e in (o + 8..o + block).step_by(2) {
            let v = u16_at(d, e)?;
            match v >> 12 {
                0 => {}
                10 => out.push(page.wrapping_add((v & 0xfff) as u32)),
                t => {
                    return Err(refuse(format!(
                        "base relocation type {t} is not handled (only DIR64)"
                    )));
                }
            }
        }
        o += block;
    }
    if out.iter().any(|&r| r >= l.size_of_image) {
        return Err(bad("a base relocation points outside the image"));
    }
    Ok(out)
}

/// What a PE rewrite does.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PeRewritePlan {
    /// Input size.
    pub input_size: u64,
    /// Output size.
    pub output_size: u64,
    /// Raw bytes of `.hip_fat` removed.
    pub removed: u64,
    /// RVA of the new `.kpackrf` section.
    pub marker_rva: u32,
    /// File offset of its data.
    pub marker_offset: u32,
    /// Marker bytes.
    pub marker_len: u32,
    /// Each wrapper: its RVA and the bundle index it pointed to.
    pub wrappers: Vec<(u32, u32)>,
    /// The marker.
    pub marker: Marker,
}

/// A rewritten image.
#[derive(Debug, Clone)]
pub struct PeRewritten {
    /// The plan.
    pub plan: PeRewritePlan,
    /// The bytes.
    pub bytes: Vec<u8>,
}

fn align(v: u64, a: u32) -> u64 {
    v.div_ceil(a as u64) * a as u64
}

/// Plan and produce the host-only image (checked by [`verify_rewritten`]).
pub fn plan_rewrite(d: &[u8], marker: &Marker) -> R<PeRewritten> {
    let site = phases::Site::read(d)?;
    let wrappers = site.wrappers()?;
    site.check_relocations(&wrappers)?;
    // The new layout: .hip_fat loses its raw data, later raw data moves down.
    let moved = phases::Moved::new(&site, marker.encode())?;
    let mut out = moved.image(&site)?;
    moved.patch(&site, &wrappers, &mut out)?;
    let plan = PeRewritePlan {
        input_size: d.len() as u64,
        output_size: out.len() as u64,
        removed: moved.removed,
        marker_rva: moved.m_rva,
        marker_offset: moved.m_off,
        marker_len: moved.m_len,
        wrappers,
        marker: marker.clone(),
    };
    let faults = verify_rewritten(&out);
    if !faults.is_empty() {
        return Err(bad(format!(
            "the rewritten image does not check: {}",
            faults.join("; ")
        )));
    }
    // As the Windows loader will map it: every wrapper reaches the marker (a wrapper
    // whose pointer no base relocation moves, in an image that may load anywhere,
    // reaches nothing once relocated, fat or host-only).
    match super::loaded::loaded_faults(&out) {
        Ok(Some(f)) if f.is_empty() => {}
        Ok(Some(f)) => return Err(refuse(format!("as loaded: {}", f.join("; ")))),
        Ok(None) => return Err(refuse("no wrapper section in the loaded image")),
        Err(e) => return Err(bad(format!("the loader cannot read it: {e}"))),
    }
    Ok(PeRewritten { plan, bytes: out })
}

/// A host-only image pointed at other archives: the `.kpackrf` marker replaced in
/// place (same RVA, so the wrappers stay right), its raw size re-aligned, the file
/// cut after it, `SizeOfImage` and the checksum updated. Only the layout
/// [`plan_rewrite`] writes is handled: the marker last in the file and in memory.
pub fn replace_marker(d: &[u8], marker: &Marker) -> R<Vec<u8>> {
    let l = parse_layout(d)?;
    let Some((mi, m)) = l.section(MARKER_SECTION) else {
        return Err(refuse(format!(
            "no {MARKER_SECTION} section (not a host-only image)"
        )));
    };
    let new = marker.encode();
    let (m_off, m_rva) = (m.pointer_to_raw_data as usize, m.virtual_address);
    if d.get(m_off..m_off + m.virtual_size as usize) == Some(&new[..]) {
        return Ok(d.to_vec());
    }
    let last_in_file = m_off as u64 + m.size_of_raw_data as u64 == d.len() as u64;
    let last_in_memory =
        mi + 1 == l.sections.len() && l.sections.iter().all(|s| s.virtual_address <= m_rva);
    if !last_in_file || !last_in_memory {
        return Err(refuse(format!(
            "cannot replace the marker: {MARKER_SECTION} is not the last section \
             (only the layout kpack writes is handled)"
        )));
    }
    let m_len = new.len() as u32;
    let m_raw = align(m_len as u64, l.file_alignment) as u32;
    let mut out = Vec::with_capacity(m_off + m_raw as usize);
    out.extend_from_slice(&d[..m_off]);
    out.extend_from_slice(&new);
    out.resize(m_off + m_raw as usize, 0);
    let o = l.table + mi * 40;
    put_u32(&mut out, o + 8, m_len);
    put_u32(&mut out, o + 16, m_raw);
    let size_of_image = align(m_rva as u64 + m_len as u64, l.section_alignment) as u32;
    put_u32(&mut out, l.opt + 56, size_of_image);
    let init = u32_at(d, l.opt + 8)?;
    put_u32(
        &mut out,
        l.opt + 8,
        init.saturating_sub(m.size_of_raw_data)
            .saturating_add(m_raw),
    );
    if l.checksum != 0 {
        let c = checksum(&out, l.opt + 64);
        put_u32(&mut out, l.opt + 64, c);
    }
    let faults = verify_rewritten(&out);
    if !faults.is_empty() {
        return Err(bad(format!(
            "the image with its new marker does not check: {}",
            faults.join("; ")
        )));
    }
    Ok(out)
}

/// Check a rewritten image: headers and sections consistent (inside the file and the
/// image, aligned, not overlapping), `.hip_fat` zero-paged, `.kpackrf` a marker,
/// every wrapper `HIPK` pointing at it, base relocations inside the image and none
/// in or into `.hip_fat`, the checksum right when set. Returns the faults.
pub fn verify_rewritten(d: &[u8]) -> Vec<String> {
    let mut f = Vec::new();
    let l = match parse_layout(d) {
        Ok(l) => l,
        Err(e) => return vec![e.to_string()],
    };
    if l.size_of_headers % l.file_alignment != 0 {
        f.push("SizeOfHeaders is not a multiple of FileAlignment".into());
    }
    if l.table + l.sections.len() * 40 > l.size_of_headers as usize {
        f.push("the section table runs past SizeOfHeaders".into());
    }
    let mut raws: Vec<(u64, u64, &str)> = Vec::new();
    let mut prev_end = 0u64;
    for s in &l.sections {
        if s.virtual_address % l.section_alignment != 0 {
            f.push(format!(
                "{}: RVA {:#x} is not section-aligned",
                s.name, s.virtual_address
            ));
        }
        if (s.virtual_address as u64) < prev_end {
            f.push(format!(
                "{}: overlaps the previous section in memory",
                s.name
            ));
        }
        prev_end = s.virtual_address as u64 + s.virtual_size.max(s.size_of_raw_data) as u64;
        if s.size_of_raw_data > 0 {
            if s.pointer_to_raw_data % l.file_alignment != 0
                || s.size_of_raw_data % l.file_alignment != 0
            {
                f.push(format!("{}: raw data not file-aligned", s.name));
            }
            if (s.pointer_to_raw_data as u64) < l.size_of_headers as u64 {
                f.push(format!("{}: raw data inside the headers", s.name));
            }
            raws.push((
                s.pointer_to_raw_data as u64,
                s.pointer_to_raw_data as u64 + s.size_of_raw_data as u64,
                &s.name,
            ));
        }
    }
    raws.sort();
    for w in raws.windows(2) {
        if w[1].0 < w[0].1 {
            f.push(format!("{} and {} overlap in the file", w[0].2, w[1].2));
        }
    }
    if align(prev_end, l.section_alignment) != l.size_of_image as u64 {
        f.push(format!(
            "SizeOfImage {:#x} is not the end of the last section ({:#x})",
            l.size_of_image,
            align(prev_end, l.section_alignment)
        ));
    }
    let Some((_, m)) = l.section(MARKER_SECTION) else {
        f.push(format!("no {MARKER_SECTION} section"));
        return f;
    };
    let mo = m.pointer_to_raw_data as usize;
    match d.get(mo..mo + m.virtual_size as usize).map(Marker::decode) {
        Some(Ok(_)) => {}
        Some(Err(e)) => f.push(format!("{MARKER_SECTION}: {e}")),
        None => f.push(format!("{MARKER_SECTION} passes the end of the file")),
    }
    let marker_va = l.image_base.wrapping_add(m.virtual_address as u64);
    match l.section(FATBIN_SECTION) {
        Some((_, s)) if s.size_of_raw_data >= s.virtual_size => {
            f.push(format!("{FATBIN_SECTION} still holds its raw data"))
        }
        _ => {}
    }
    if let Some((_, w)) = l.section(WRAPPER_SECTION) {
        let n = w.virtual_size.min(w.size_of_raw_data) as usize / 24;
        for i in 0..n {
            let o = w.pointer_to_raw_data as usize + i * 24;
            if u32_at(d, o).ok() != Some(MAGIC_HIPK) {
                f.push(format!("wrapper {i}: magic is not HIPK"));
            }
            if u64_at(d, o + 8).ok() != Some(marker_va) {
                f.push(format!("wrapper {i}: pointer is not the marker's address"));
            }
        }
    } else {
        f.push(format!("no {WRAPPER_SECTION} section"));
    }
    match dir64_slots(d, &l) {
        Ok(slots) => {
            if let Some((_, fat)) = l.section(FATBIN_SECTION) {
                let (lo, hi) = (
                    fat.virtual_address as u64,
                    fat.virtual_address as u64 + fat.virtual_size as u64,
                );
                let (vlo, vhi) = (l.image_base.wrapping_add(lo), l.image_base.wrapping_add(hi));
                for s in slots {
                    if (s as u64) >= lo && (s as u64) < hi {
                        f.push(format!(
                            "a base relocation patches RVA {s:#x} inside {FATBIN_SECTION}"
                        ));
                    } else if let Some(o) = l.offset_of(s)
                        && let Ok(v) = u64_at(d, o)
                        && v >= vlo
                        && v < vhi
                    {
                        f.push(format!(
                            "the pointer at RVA {s:#x} points into {FATBIN_SECTION}"
                        ));
                    }
                }
            }
        }
        Err(e) => f.push(e.to_string()),
    }
    if l.checksum != 0 && checksum(d, l.opt + 64) != l.checksum {
        f.push("the PE checksum does not match".into());
    }
    f
}
