//! PE/COFF DLLs with HIP device code: section `.hip_fat` (bundles) and `.hipFatB`
//! (wrappers), names truncated to 8 characters. Headers read with `object`'s PE
//! reader ([`headers`]); the rewrite reads and writes them itself (`rewrite.rs`).

use crate::bundle::{self, BundleInfo};
use crate::error::{FormatError, FormatResult};

/// The PE section holding the bundles.
pub const FATBIN_SECTION: &str = ".hip_fat";
/// The PE section holding the wrappers.
pub const WRAPPER_SECTION: &str = ".hipFatB";
/// The PE marker section.
pub const MARKER_SECTION: &str = ".kpackrf";

/// Device code of a PE image.
#[derive(Debug, Clone)]
pub struct PeFatBinary {
    /// Bundles of `.hip_fat`.
    pub bundles: Vec<BundleInfo>,
    /// Bytes of `.hip_fat` in the file.
    pub fatbin_bytes: u64,
    /// Number of wrapper records in `.hipFatB`.
    pub wrapper_count: usize,
    /// Has a `.kpackrf` marker (already host-only).
    pub host_only: bool,
    /// Where `.hip_fat`'s bytes are in the file (offset, length).
    pub fatbin: Option<(u64, u64)>,
    /// The marker of a host-only image.
    pub marker: Option<crate::kpack::Marker>,
    /// The wrappers of `.hipFatB`.
    pub wrappers: Vec<crate::elf::WrapperInfo>,
    /// Problems that did not stop the inspection.
    pub problems: Vec<String>,
}

/// Whether `data` starts like a PE image (`MZ`).
pub fn is_pe(data: &[u8]) -> bool {
    data.starts_with(b"MZ")
}

/// The preferred load address and the section headers of a PE32+ or PE32 image.
#[derive(Debug, Clone)]
pub struct Headers {
    /// `ImageBase`.
    pub image_base: u64,
    /// The section table, in order.
    pub sections: Vec<rewrite::PeSection>,
}

/// Read a PE image's headers (`object`'s PE reader: PE32+, else PE32).
pub fn headers(data: &[u8]) -> Result<Headers, object::read::Error> {
    use object::pe::{ImageNtHeaders32, ImageNtHeaders64};
    use object::read::pe::{ImageNtHeaders, PeFile};
    fn of<H: ImageNtHeaders>(pe: &PeFile<'_, H>) -> Headers {
        use object::LittleEndian as LE;
        use object::Object;
        let sections = (pe.section_table().iter())
            .map(|h| rewrite::PeSection {
                name: String::from_utf8_lossy(h.raw_name()).into_owned(),
                virtual_size: h.virtual_size.get(LE),
                virtual_address: h.virtual_address.get(LE),
                size_of_raw_data: h.size_of_raw_data.get(LE),
                pointer_to_raw_data: h.pointer_to_raw_data.get(LE),
                characteristics: h.characteristics.get(LE),
            })
            .collect();
        Headers {
            image_base: pe.relative_address_base(),
            sections,
        }
    }
    match PeFile::<ImageNtHeaders64>::parse(data) {
        Ok(pe) => Ok(of(&pe)),
        Err(e64) => PeFile::<ImageNtHeaders32>::parse(data)
            .map(|pe| of(&pe))
            .map_err(|_| e64),
    }
}

/// Inspect a PE image; `Ok(None)` when it has no `.hip_fat` section.
pub fn inspect(data: &[u8]) -> FormatResult<Option<PeFatBinary>> {
    let pe = headers(data).map_err(|e| FormatError::new(0, format!("malformed PE image: {e}")))?;
    let mut fat = None;
    let mut wrapper_count = 0;
    let mut host_only = false;
    let mut marker = None;
    let mut wrap_at = None;
    for s in &pe.sections {
        let name = s.name.as_str();
        let start = s.pointer_to_raw_data as usize;
        // Raw data is padded to FileAlignment; the virtual size is the real content.
        let len = if s.virtual_size == 0 {
            s.size_of_raw_data
        } else {
            s.virtual_size.min(s.size_of_raw_data)
        } as usize;
        match name {
            FATBIN_SECTION => fat = Some((start, len)),
            WRAPPER_SECTION => {
                wrapper_count = s.virtual_size.min(s.size_of_raw_data) as usize / 24;
                wrap_at = Some(start);
            }
            MARKER_SECTION => {
                host_only = true;
                marker = start
                    .checked_add(s.virtual_size as usize)
                    .and_then(|e| data.get(start..e))
                    .and_then(|b| crate::kpack::Marker::decode(b).ok());
            }
            _ => {}
        }
    }
    let Some((start, len)) = fat else {
        return Ok(None);
    };
    let mut problems = Vec::new();
    let bytes = start
        .checked_add(len)
        .and_then(|end| data.get(start..end))
        .ok_or_else(|| {
            FormatError::new(
                start as u64,
                format!("{FATBIN_SECTION} section passes the end of the file"),
            )
        })?;
    let bundles = if host_only && bytes.iter().all(|&b| b == 0) {
        Vec::new()
    } else {
        match bundle::walk_section(bytes) {
            Ok(b) => b,
            Err(e) => {
                problems.push(format!("{FATBIN_SECTION}: {}", e.shifted(start as u64)));
                Vec::new()
            }
        }
    };
    // Wrappers: magic, pointer (absolute), reserved; for HIPF the bundle pointed at.
    let fat_va = pe
        .sections
        .iter()
        .find(|s| s.name == FATBIN_SECTION)
        .map(|s| pe.image_base + s.virtual_address as u64);
    let mut wrappers = Vec::new();
    if let Some(at) = wrap_at {
        for i in 0..wrapper_count {
            let o = at + i * 24;
            let Some(w) = data.get(o..o + 24) else { break };
            let word = |k: usize| u64::from_le_bytes(w[k..k + 8].try_into().unwrap_or([0; 8]));
            let magic_value = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            let magic = match magic_value {
                crate::elf::MAGIC_HIPF => crate::elf::WrapperMagic::Hipf,
                crate::elf::MAGIC_HIPK => crate::elf::WrapperMagic::Hipk,
                _ => crate::elf::WrapperMagic::Unknown,
            };
            let pointer = word(8);
            let bundle = (magic == crate::elf::WrapperMagic::Hipf)
                .then(|| fat_va.and_then(|va| pointer.checked_sub(va)))
                .flatten()
                .and_then(|off| bundles.iter().position(|b| b.offset == off));
            wrappers.push(crate::elf::WrapperInfo {
                index: i,
                magic,
                magic_value,
                version: u32::from_le_bytes([w[4], w[5], w[6], w[7]]),
                pointer: Some(pointer),
                reserved: word(16),
                bundle,
            });
        }
    }
    Ok(Some(PeFatBinary {
        bundles,
        fatbin_bytes: if host_only { 0 } else { len as u64 },
        wrapper_count,
        host_only,
        fatbin: Some((start as u64, len as u64)),
        marker,
        wrappers,
        problems,
    }))
}

pub mod loaded;
pub mod rewrite;
