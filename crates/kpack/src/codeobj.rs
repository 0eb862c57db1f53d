//! AMDGPU code objects: the kernels inside. From one code object (an ELF for
//! `e_machine` 224, wherever it came from: a bundle, an archive, a file) this reads
//! the target ID (`e_flags`), the code-object version (`EI_ABIVERSION`), and per
//! kernel the `NT_AMDGPU_METADATA` note fields (MessagePack) and the code size of its
//! function symbol. Fields a code object does not carry are `None`, never guessed.
//!
//! Bounded: the note is read from the mapped bytes (its size checked against the
//! file), MessagePack arrays are decoded into at most what the note's bytes can hold,
//! and names are limited in length.

use crate::bundle::target::{TargetId, target_from_elf_flags};
use crate::error::{FormatError, FormatResult};
use object::LittleEndian as LE;
use object::elf;
use object::read::elf::{FileHeader, SectionHeader, Sym};
use serde::{Deserialize, Serialize};

/// `e_machine` of AMDGPU.
pub const EM_AMDGPU: u16 = 224;
/// The note type of the metadata (owner `AMDGPU`).
pub const NT_AMDGPU_METADATA: u32 = 32;

/// One kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Kernel {
    /// The (mangled) name.
    pub name: String,
    /// The demangled C++ name, when the name is a mangled one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub demangled: Option<String>,
    /// The kernel descriptor's symbol (`<name>.kd`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Bytes of machine code (the size of the kernel's function symbol).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_size: Option<u64>,
    /// `.kernarg_segment_size`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernarg_size: Option<u64>,
    /// `.group_segment_fixed_size`: LDS bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lds: Option<u64>,
    /// `.private_segment_fixed_size`: scratch bytes per work-item.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scratch: Option<u64>,
    /// `.sgpr_count`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sgpr: Option<u64>,
    /// `.vgpr_count`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vgpr: Option<u64>,
    /// `.agpr_count`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agpr: Option<u64>,
    /// `.sgpr_spill_count`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sgpr_spills: Option<u64>,
    /// `.vgpr_spill_count`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vgpr_spills: Option<u64>,
    /// `.wavefront_size`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wavefront_size: Option<u64>,
    /// `.max_flat_workgroup_size`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_flat_workgroup_size: Option<u64>,
    /// `.uses_dynamic_stack`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uses_dynamic_stack: Option<bool>,
}

impl Kernel {
    /// Spilled registers (SGPR + VGPR), when the metadata says.
    pub fn spills(&self) -> Option<u64> {
        match (self.sgpr_spills, self.vgpr_spills) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        }
    }

    /// The name to show: demangled when possible.
    pub fn display_name(&self) -> &str {
        self.demangled.as_deref().unwrap_or(&self.name)
    }
}

/// What a code object holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CodeObjectInfo {
    /// Target ID from `e_flags` (`None` for an unknown processor).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Code-object version (4, 5, 6…) from `EI_ABIVERSION`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u8>,
    /// `amdhsa.target` from the metadata.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata_target: Option<String>,
    /// The kernels, in metadata order.
    pub kernels: Vec<Kernel>,
}

/// The metadata map, as far as we read it (unknown keys ignored).
#[derive(Debug, Deserialize)]
struct Metadata {
    #[serde(rename = "amdhsa.target")]
    target: Option<String>,
    #[serde(rename = "amdhsa.kernels", default)]
    kernels: Vec<KernelMeta>,
}

#[derive(Debug, Deserialize)]
struct KernelMeta {
    #[serde(rename = ".name")]
    name: Option<String>,
    #[serde(rename = ".symbol")]
    symbol: Option<String>,
    #[serde(rename = ".kernarg_segment_size")]
    kernarg_segment_size: Option<u64>,
    #[serde(rename = ".group_segment_fixed_size")]
    group_segment_fixed_size: Option<u64>,
    #[serde(rename = ".private_segment_fixed_size")]
    private_segment_fixed_size: Option<u64>,
    #[serde(rename = ".sgpr_count")]
    sgpr_count: Option<u64>,
    #[serde(rename = ".vgpr_count")]
    vgpr_count: Option<u64>,
    #[serde(rename = ".agpr_count")]
    agpr_count: Option<u64>,
    #[serde(rename = ".sgpr_spill_count")]
    sgpr_spill_count: Option<u64>,
    #[serde(rename = ".vgpr_spill_count")]
    vgpr_spill_count: Option<u64>,
    #[serde(rename = ".wavefront_size")]
    wavefront_size: Option<u64>,
    #[serde(rename = ".max_flat_workgroup_size")]
    max_flat_workgroup_size: Option<u64>,
    #[serde(rename = ".uses_dynamic_stack")]
    uses_dynamic_stack: Option<bool>,
}

/// Longest kernel name kept (longer ones are cut, with a note in the name).
const MAX_NAME: usize = 64 << 10;

fn ferr(e: object::read::Error) -> FormatError {
    FormatError::new(0, format!("code object: {e}"))
}

/// Whether `data` is an AMDGPU ELF code object.
pub fn is_code_object(data: &[u8]) -> bool {
    data.len() >= 20
        && data.starts_with(b"\x7fELF")
        && u16::from_le_bytes([data[18], data[19]]) == EM_AMDGPU
}

/// Read a code object.
pub fn read(data: &[u8]) -> FormatResult<CodeObjectInfo> {
    read_in(data, true)
}

/// [`read`] of a code object behind any [`object::ReadRef`] (a file read with
/// positioned reads, not only bytes in memory); `sizes`: whether the kernels' code
/// sizes are read from the symbol table (without, each is `None`, and the table is
/// not read). Fails exactly where [`read`] does.
pub fn read_in<'d, R: object::ReadRef<'d>>(data: R, sizes: bool) -> FormatResult<CodeObjectInfo> {
    if !data.read_bytes_at(0, 20).is_ok_and(is_code_object) {
        return Err(FormatError::new(0, "not an AMDGPU ELF code object"));
    }
    let hdr = elf::FileHeader64::<LE>::parse(data).map_err(ferr)?;
    let endian = hdr.endian().map_err(ferr)?;
    let abi = hdr.e_ident().abi_version;
    let target = target_from_elf_flags(hdr.e_flags(endian), abi).map(|t: TargetId| t.to_string());
    let version = match abi {
        1 => Some(3),
        2 => Some(4),
        3 => Some(5),
        4 => Some(6),
        _ => None,
    };
    let sections = hdr.sections(endian, data).map_err(ferr)?;
    // The metadata note: the first NT_AMDGPU_METADATA of owner AMDGPU.
    let mut meta: Option<Metadata> = None;
    for s in sections.iter() {
        let Some(mut notes) = s.notes(endian, data).map_err(ferr)? else {
            continue;
        };
        while let Some(n) = notes.next().map_err(ferr)? {
            if n.name() == b"AMDGPU" && n.n_type(endian) == NT_AMDGPU_METADATA {
                let desc = n.desc();
                let m: Metadata = rmp_serde::from_slice(desc).map_err(|e| {
                    FormatError::new(
                        s.sh_offset(endian),
                        format!("NT_AMDGPU_METADATA is not the expected MessagePack map: {e}"),
                    )
                })?;
                meta = Some(m);
                break;
            }
        }
        if meta.is_some() {
            break;
        }
    }
    // Function symbols: their sizes are the kernels' code sizes.
    let mut sizes_of: std::collections::HashMap<&[u8], u64> = std::collections::HashMap::new();
    if sizes && let Ok(symtab) = sections.symbols(endian, data, elf::SHT_SYMTAB) {
        for sym in symtab.iter() {
            if sym.st_type() == elf::STT_FUNC
                && let Ok(name) = sym.name(endian, symtab.strings())
            {
                sizes_of.insert(name, sym.st_size(endian));
            }
        }
    }
    let Some(meta) = meta else {
        return Ok(CodeObjectInfo {
            target,
            version,
            metadata_target: None,
            kernels: Vec::new(),
        });
    };
    let kernels = meta
        .kernels
        .into_iter()
        .map(|k| {
            let mut name = k.name.unwrap_or_default();
            if name.len() > MAX_NAME {
                let mut cut = MAX_NAME;
                while !name.is_char_boundary(cut) {
                    cut -= 1;
                }
                name.truncate(cut);
            }
            Kernel {
                demangled: demangle(&name),
                code_size: sizes_of.get(name.as_bytes()).copied(),
                symbol: k.symbol,
                kernarg_size: k.kernarg_segment_size,
                lds: k.group_segment_fixed_size,
                scratch: k.private_segment_fixed_size,
                sgpr: k.sgpr_count,
                vgpr: k.vgpr_count,
                agpr: k.agpr_count,
                sgpr_spills: k.sgpr_spill_count,
                vgpr_spills: k.vgpr_spill_count,
                wavefront_size: k.wavefront_size,
                max_flat_workgroup_size: k.max_flat_workgroup_size,
                uses_dynamic_stack: k.uses_dynamic_stack,
                name,
            }
        })
        .collect();
    Ok(CodeObjectInfo {
        target,
        version,
        metadata_target: meta.target,
        kernels,
    })
}

/// The demangled form of an Itanium C++ name (`None` for other names).
pub fn demangle(name: &str) -> Option<String> {
    if !name.starts_with("_Z") {
        return None;
    }
    let sym = cpp_demangle::Symbol::new(name).ok()?;
    let opts = cpp_demangle::DemangleOptions::new();
    sym.demangle(&opts).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_what_is_mangled() {
        assert_eq!(
            demangle("_Z5scaleIfEvPT_S0_i").as_deref(),
            Some("void scale<float>(float*, float, int)")
        );
        assert_eq!(demangle("plain_c_kernel"), None);
        assert_eq!(demangle("_Zgarbage"), None);
    }

    #[test]
    fn refuses_what_is_not_a_code_object() {
        assert!(read(b"not elf").is_err());
        assert!(read(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0\xe0\0").is_err());
    }
}
