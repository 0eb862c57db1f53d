//! The phases of [`super::plan_rewrite`]: what the image is made of, checked
//! ([`Site::read`]), where its wrappers point ([`Site::wrappers`]), that no other
//! relocated pointer reaches the device code ([`Site::check_relocations`]), then
//! the new layout ([`Moved`]): the image without `.hip_fat`'s raw data, the marker
//! section appended, headers, debug entries and wrappers patched.

use super::*;

/// The image and its two HIP sections, checked to be what the rewrite handles.
pub(super) struct Site<'a> {
    pub d: &'a [u8],
    pub l: PeLayout,
    /// `.hip_fat`: its index and header; `.hipFatBinSegment`'s header.
    pub fi: usize,
    pub fat: PeSection,
    pub wrap: PeSection,
}

impl<'a> Site<'a> {
    /// Read the headers; refuse a host-only, signed or overlaid image, and one
    /// whose headers have no room for another section header.
    pub fn read(d: &'a [u8]) -> R<Self> {
        let l = parse_layout(d)?;
        if l.section(MARKER_SECTION).is_some() {
            return Err(refuse(format!("already host-only (has {MARKER_SECTION})")));
        }
        let fat = l.section(FATBIN_SECTION);
        let wrap = l.section(WRAPPER_SECTION);
        let ((fi, fat), (_, wrap)) = match (fat, wrap) {
            (Some(f), Some(w)) => (f, w),
            (None, None) => {
                return Err(refuse(format!(
                    "no {FATBIN_SECTION} section: not a fat binary"
                )));
            }
            (Some(_), None) => {
                return Err(bad(format!("{FATBIN_SECTION} without {WRAPPER_SECTION}")));
            }
            (None, Some(_)) => {
                return Err(bad(format!("{WRAPPER_SECTION} without {FATBIN_SECTION}")));
            }
        };
        let (fat, wrap) = (fat.clone(), wrap.clone());
        if l.dirs.get(DIR_SECURITY).is_some_and(|&(_, s)| s != 0) {
            return Err(refuse(
                "signed image: rewriting would break its signature (strip the certificate first)",
            ));
        }
        let raw_end = l
            .sections
            .iter()
            .map(|s| s.pointer_to_raw_data as u64 + s.size_of_raw_data as u64)
            .max()
            .unwrap_or(0)
            .max(l.size_of_headers as u64);
        if (d.len() as u64) > raw_end {
            return Err(refuse(format!(
                "{} bytes after the last section (an overlay, e.g. debug data) are not handled",
                d.len() as u64 - raw_end
            )));
        }
        // Room for one more section header.
        let table_end = l.table + (l.sections.len() + 1) * 40;
        let first_raw = l
            .sections
            .iter()
            .filter(|s| s.size_of_raw_data > 0)
            .map(|s| s.pointer_to_raw_data as usize)
            .min()
            .unwrap_or(usize::MAX);
        if l.size_of_headers as usize > d.len() {
            return Err(bad("SizeOfHeaders passes the end of the file"));
        }
        if table_end > l.size_of_headers as usize || table_end > first_raw {
            return Err(refuse(
                "no room in the headers for the marker's section header",
            ));
        }
        Ok(Site {
            d,
            l,
            fi,
            fat,
            wrap,
        })
    }

    /// `.hip_fat`'s addresses when the image loads at its preferred base.
    fn fat_range(&self) -> (u64, u64) {
        let lo = self
            .l
            .image_base
            .wrapping_add(self.fat.virtual_address as u64);
        (lo, lo.wrapping_add(self.fat.virtual_size as u64))
    }

    /// Each wrapper's RVA and the bundle it points to (its start, checked).
    pub fn wrappers(&self) -> R<Vec<(u32, u32)>> {
        let (d, fat, wrap) = (self.d, &self.fat, &self.wrap);
        let fat_off = fat.pointer_to_raw_data as usize;
        let fat_len = fat.virtual_size.min(fat.size_of_raw_data) as usize;
        let fat_bytes = d
            .get(fat_off..fat_off + fat_len)
            .ok_or_else(|| bad(format!("{FATBIN_SECTION} passes the end of the file")))?;
        let bundles =
            bundle::walk_section(fat_bytes).map_err(|e| bad(format!("{FATBIN_SECTION}: {e}")))?;
        let wrap_off = wrap.pointer_to_raw_data as usize;
        let n_wrappers = wrap.virtual_size.min(wrap.size_of_raw_data) as usize / 24;
        if n_wrappers == 0 {
            return Err(bad(format!("{WRAPPER_SECTION} holds no wrapper")));
        }
        let (fat_lo, fat_hi) = self.fat_range();
        let mut wrappers = Vec::new();
        for i in 0..n_wrappers {
            let o = wrap_off + i * 24;
            if u32_at(d, o)? != MAGIC_HIPF {
                return Err(bad(format!("wrapper {i}: magic is not HIPF")));
            }
            let ptr = u64_at(d, o + 8)?;
            if ptr < fat_lo || ptr >= fat_hi {
                return Err(bad(format!(
                    "wrapper {i}: pointer {ptr:#x} is not in {FATBIN_SECTION}"
                )));
            }
            let off = ptr - fat_lo;
            let idx = bundles
                .iter()
                .position(|b| b.offset == off)
                .ok_or_else(|| {
                    bad(format!(
                        "wrapper {i}: pointer {ptr:#x} is not the start of a bundle"
                    ))
                })?;
            let rva = wrap
                .virtual_address
                .checked_add((i * 24) as u32)
                .ok_or_else(|| bad("wrapper RVA overflows"))?;
            wrappers.push((rva, idx as u32));
        }
        Ok(wrappers)
    }

    /// Base relocations: none inside `.hip_fat`, and no relocated pointer other
    /// than the wrappers' into it.
    pub fn check_relocations(&self, wrappers: &[(u32, u32)]) -> R<()> {
        let (d, l, fat) = (self.d, &self.l, &self.fat);
        let slots = dir64_slots(d, l)?;
        let wrapper_slots: Vec<u32> = wrappers.iter().map(|(r, _)| r.wrapping_add(8)).collect();
        let fat_rva_end = fat.virtual_address as u64 + fat.virtual_size as u64;
        let (fat_lo, fat_hi) = self.fat_range();
        for &s in &slots {
            if s >= fat.virtual_address && (s as u64) < fat_rva_end {
                return Err(refuse(format!(
                    "a base relocation patches RVA {s:#x} inside {FATBIN_SECTION}"
                )));
            }
            if wrapper_slots.contains(&s) {
                continue;
            }
            if let Some(o) = l.offset_of(s) {
                let v = u64_at(d, o)?;
                if v >= fat_lo && v < fat_hi {
                    return Err(refuse(format!(
                        "the pointer at RVA {s:#x} points into {FATBIN_SECTION}; only the wrappers may"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// The new layout: `.hip_fat` without raw data, later raw data moved down by its
/// size, the marker's section after the last raw data and the last section in
/// memory.
pub(super) struct Moved {
    /// Bytes removed, from `fat_raw` on.
    pub removed: u64,
    fat_raw: u64,
    /// The section headers after the move.
    sections: Vec<PeSection>,
    /// The encoded marker; its length, raw size, file offset and RVA.
    marker: Vec<u8>,
    pub m_len: u32,
    m_raw: u32,
    pub m_off: u32,
    pub m_rva: u32,
    size_of_image: u32,
}

impl Moved {
    /// The layout for `marker` (its encoded bytes).
    pub fn new(site: &Site, marker: Vec<u8>) -> R<Self> {
        let l = &site.l;
        let removed = site.fat.size_of_raw_data as u64;
        let fat_raw = site.fat.pointer_to_raw_data as u64;
        let mut m = Moved {
            removed,
            fat_raw,
            sections: Vec::new(),
            m_len: marker.len() as u32,
            marker,
            m_raw: 0,
            m_off: 0,
            m_rva: 0,
            size_of_image: 0,
        };
        let mut sections = l.sections.clone();
        for (i, s) in sections.iter_mut().enumerate() {
            if i == site.fi {
                s.size_of_raw_data = 0;
                s.pointer_to_raw_data = 0;
            } else if s.size_of_raw_data > 0 {
                s.pointer_to_raw_data = m.shift(s.pointer_to_raw_data)?;
            }
        }
        m.m_raw = align(m.m_len as u64, l.file_alignment) as u32;
        // After the last raw data: a section without any (uninitialised data) has no
        // place in the file, whatever its PointerToRawData says.
        m.m_off = align(
            sections
                .iter()
                .filter(|s| s.size_of_raw_data > 0)
                .map(|s| s.pointer_to_raw_data as u64 + s.size_of_raw_data as u64)
                .max()
                .unwrap_or(0)
                .max(l.size_of_headers as u64),
            l.file_alignment,
        ) as u32;
        m.m_rva = align(
            sections
                .iter()
                .map(|s| s.virtual_address as u64 + s.virtual_size.max(s.size_of_raw_data) as u64)
                .max()
                .unwrap_or(0),
            l.section_alignment,
        ) as u32;
        m.size_of_image = align(m.m_rva as u64 + m.m_len as u64, l.section_alignment) as u32;
        m.sections = sections;
        Ok(m)
    }

    /// A file offset after the move. One inside the removed bytes (overlapping raw
    /// data, a debug entry pointing into .hip_fat) has no place in the output.
    fn shift(&self, p: u32) -> R<u32> {
        let p64 = p as u64;
        if self.removed == 0 || p64 <= self.fat_raw {
            Ok(p)
        } else if p64 < self.fat_raw + self.removed {
            Err(bad(format!(
                "file offset {p:#x} lies inside the raw data of {FATBIN_SECTION}, which is removed"
            )))
        } else {
            Ok((p64 - self.removed) as u32)
        }
    }

    /// The headers, then each section's raw data at its new place, then the
    /// marker.
    pub fn image(&self, site: &Site) -> R<Vec<u8>> {
        let (d, l) = (site.d, &site.l);
        let out_len = self.m_off as usize + self.m_raw as usize;
        let mut out = vec![0u8; out_len];
        out[..l.size_of_headers as usize].copy_from_slice(&d[..l.size_of_headers as usize]);
        for (old, new) in l.sections.iter().zip(&self.sections) {
            if new.size_of_raw_data == 0 {
                continue;
            }
            let start = old.pointer_to_raw_data as usize;
            let src = d
                .get(start..start + old.size_of_raw_data as usize)
                .ok_or_else(|| bad(format!("section {} passes the end of the file", old.name)))?;
            let at = new.pointer_to_raw_data as usize;
            out[at..at + src.len()].copy_from_slice(src);
        }
        let m = self.m_off as usize;
        out[m..m + self.marker.len()].copy_from_slice(&self.marker);
        Ok(out)
    }

    /// Patch the copied headers (section table with the marker's header, section
    /// count, image and initialised-data sizes), the debug entries' file offsets,
    /// the wrappers (HIPK, pointer at the marker, reserved1 the bundle) and the
    /// checksum.
    pub fn patch(&self, site: &Site, wrappers: &[(u32, u32)], out: &mut [u8]) -> R<()> {
        let (d, l, fat) = (site.d, &site.l, &site.fat);
        for (i, s) in self.sections.iter().enumerate() {
            let o = l.table + i * 40;
            put_u32(out, o + 16, s.size_of_raw_data);
            put_u32(out, o + 20, s.pointer_to_raw_data);
        }
        let o = l.table + self.sections.len() * 40;
        out[o..o + 40].fill(0);
        out[o..o + 8].copy_from_slice(b".kpackrf");
        put_u32(out, o + 8, self.m_len);
        put_u32(out, o + 12, self.m_rva);
        put_u32(out, o + 16, self.m_raw);
        put_u32(out, o + 20, self.m_off);
        put_u32(out, o + 36, SCN_CNT_INITIALIZED_DATA | SCN_MEM_READ);
        put_u16(out, l.coff + 2, (self.sections.len() + 1) as u16);
        // Optional header: image size, initialized data.
        put_u32(out, l.opt + 56, self.size_of_image);
        let init = u32_at(d, l.opt + 8)?;
        let fat_init = if fat.characteristics & SCN_CNT_INITIALIZED_DATA != 0 {
            fat.size_of_raw_data
        } else {
            0
        };
        put_u32(
            out,
            l.opt + 8,
            init.saturating_sub(fat_init).saturating_add(self.m_raw),
        );
        // Debug directory entries hold file offsets of their data.
        if let Some(&(rva, size)) = l.dirs.get(DIR_DEBUG)
            && size > 0
            && let Some(old) = l.offset_of(rva)
        {
            let new_base = self.shift(old as u32)? as usize;
            for e in 0..(size as usize / 28) {
                let at = new_base + e * 28 + 24;
                let p = u32_at(out, at)?;
                if p != 0 {
                    put_u32(out, at, self.shift(p)?);
                }
            }
        }
        let wrap_new = self.shift(site.wrap.pointer_to_raw_data)? as usize;
        for (i, (_, idx)) in wrappers.iter().enumerate() {
            let o = wrap_new + i * 24;
            put_u32(out, o, MAGIC_HIPK);
            put_u64(out, o + 8, l.image_base.wrapping_add(self.m_rva as u64));
            put_u64(out, o + 16, *idx as u64);
        }
        if l.checksum != 0 {
            let c = checksum(out, l.opt + 64);
            put_u32(out, l.opt + 64, c);
        }
        Ok(())
    }
}
