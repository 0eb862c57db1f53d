//! ELF fat binaries: executables, shared libraries, relocatable objects and static
//! archives carrying HIP device code.
//!
//! A fat binary has a `.hip_fatbin` section (the bundles, one per TU) and a
//! `.hipFatBinSegment` section (24-byte `__CudaFatBinaryWrapper` records, one per TU,
//! each pointing at its bundle). After the kpack host-only rewrite, `.hip_fatbin` is
//! `SHT_NOBITS`, wrappers say `HIPK` and point at a `.rocm_kpack_ref` marker.
//!
//! Only little-endian ELF64 is inspected; 32-bit and big-endian files are reported
//! as unsupported rather than guessed at. Parsing is zero-copy over the caller's
//! bytes (usually an mmap) and reads headers, entry tables and wrappers only.

pub mod loaded;
pub mod machine;
pub mod normalize;
pub mod remark;
pub mod rewrite;

use crate::bundle::{self, BundleEntry, BundleInfo, Compression, EntryId, TargetId};
use crate::error::{FormatError, FormatResult};
use crate::kpack::marker::{MARKER_SECTION, Marker};
use object::LittleEndian as LE;
use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, Rela, SectionHeader, Sym};
use serde::Serialize;
use std::collections::HashMap;

/// Section holding the bundles.
pub const FATBIN_SECTION: &str = ".hip_fatbin";
/// Section holding the wrappers.
pub const WRAPPER_SECTION: &str = ".hipFatBinSegment";
/// Size of one wrapper record.
pub const WRAPPER_SIZE: usize = 24;
/// Wrapper magic of a fat binary ("HIPF" as a little-endian u32).
pub const MAGIC_HIPF: u32 = 0x4849_5046;
/// Wrapper magic after the host-only rewrite.
pub const MAGIC_HIPK: u32 = 0x4B50_4948;
/// `e_machine` of AMDGPU code objects.
pub const EM_AMDGPU: u16 = 224;
/// Prefix of the per-target sections in `-fgpu-rdc` relocatable objects.
pub const OBJECT_BUNDLE_PREFIX: &str = "__CLANG_OFFLOAD_BUNDLE__";

/// What sort of ELF file this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ElfKind {
    /// `ET_EXEC`: a non-PIE executable.
    Executable,
    /// `ET_DYN` with `PT_INTERP`: a PIE executable.
    PieExecutable,
    /// `ET_DYN` without `PT_INTERP`.
    SharedLibrary,
    /// `ET_REL`: an object file.
    Relocatable,
    /// Separate debug info of a binary (`objcopy --only-keep-debug`, `eu-strip -f`,
    /// the `.debug` files of `find-debuginfo`): its loaded sections have no bytes.
    DebugInfo,
    /// Anything else (core files…).
    Other,
}

impl ElfKind {
    /// Short human name.
    pub fn name(self) -> &'static str {
        match self {
            ElfKind::Executable => "executable (non-PIE)",
            ElfKind::PieExecutable => "PIE executable",
            ElfKind::SharedLibrary => "shared library",
            ElfKind::Relocatable => "relocatable object",
            ElfKind::DebugInfo => "separate debug info",
            ElfKind::Other => "other ELF",
        }
    }
}

/// Where a section sits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SectionSpan {
    /// Section header index.
    pub index: usize,
    /// File offset.
    pub offset: u64,
    /// Size in bytes (in memory; in the file too unless `nobits`).
    pub size: u64,
    /// Virtual address (0 in objects).
    pub addr: u64,
    /// `SHT_NOBITS`: occupies no file bytes.
    pub nobits: bool,
}

/// The wrapper's magic, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum WrapperMagic {
    /// Fat binary: points at a bundle.
    #[serde(rename = "HIPF")]
    Hipf,
    /// Host-only: points at the marker.
    #[serde(rename = "HIPK")]
    Hipk,
    /// Something else.
    #[serde(rename = "unknown")]
    Unknown,
}

/// One `__CudaFatBinaryWrapper` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WrapperInfo {
    /// Position in `.hipFatBinSegment`.
    pub index: usize,
    /// Decoded magic.
    pub magic: WrapperMagic,
    /// Raw magic value.
    pub magic_value: u32,
    /// Version field (1).
    pub version: u32,
    /// The pointer's run-time target: relocation addend (PIE, DSO, object) or stored
    /// value (non-PIE), as a virtual address (section offset in objects).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pointer: Option<u64>,
    /// The reserved field; for HIPK its low 32 bits are the co_index.
    pub reserved: u64,
    /// For HIPF: the bundle this wrapper points at (its TU index).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle: Option<usize>,
}

/// The device-code facts of an ELF fat (or host-only) binary.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FatBinary {
    /// ELF type.
    pub elf_kind: ElfKind,
    /// `e_machine`.
    pub machine: u16,
    /// The `.hip_fatbin` section (absent in `-fgpu-rdc` objects).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fatbin: Option<SectionSpan>,
    /// Bundles in section order (empty for host-only binaries).
    pub bundles: Vec<BundleInfo>,
    /// Wrapper records.
    pub wrappers: Vec<WrapperInfo>,
    /// The marker of a host-only binary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marker: Option<Marker>,
    /// Already rewritten by kpack (NOBITS `.hip_fatbin`, HIPK wrappers or a marker).
    pub host_only: bool,
    /// Device bytes in the file (`.hip_fatbin` file bytes, or rdc bundle sections).
    pub fatbin_bytes: u64,
    /// `-fgpu-rdc` object: device bitcode in `__CLANG_OFFLOAD_BUNDLE__*` sections.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub rdc_object: bool,
    /// Problems found that did not stop the inspection.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// The result of inspecting an ELF file.
#[derive(Debug, Clone)]
pub enum ElfContent {
    /// A HIP fat binary or a host-only (kpack'd) binary.
    Fat(Box<FatBinary>),
    /// A raw AMDGPU code object; the target when `e_flags` names a known processor.
    CodeObject(Option<TargetId>),
    /// An ELF with no device code.
    Plain(ElfKind),
    /// An ELF this tool does not inspect (32-bit, big-endian), with the reason.
    Unsupported(String),
}

/// Whether `data` starts with the ELF magic.
pub fn is_elf(data: &[u8]) -> bool {
    data.starts_with(b"\x7fELF")
}

fn ferr(e: object::read::Error) -> FormatError {
    FormatError::new(0, format!("malformed ELF: {e}"))
}

/// Inspect an ELF file's device code. Errors are structural problems that stop the
/// reading of headers; problems inside the device code are in `FatBinary::problems`.
pub fn inspect(data: &[u8]) -> FormatResult<ElfContent> {
    inspect_releasing(data, &|_, _| {})
}

/// [`inspect`] of a file map, handing each bundle's range of `data` (offset,
/// length) to `release` once its entry table is read
/// (`bundle::walk_section_releasing`).
pub fn inspect_releasing(data: &[u8], release: &dyn Fn(usize, usize)) -> FormatResult<ElfContent> {
    inspect_in(data, (data, None), release)
}

/// [`inspect_releasing`] reading the file's headers, wrappers and marker from
/// `read` (an `object::ReadCache` over the file reads them with positioned reads,
/// never mapping the folios they lie in), and only the bundles of `.hip_fatbin`
/// from `data`, the file's map, or from `file` (the file `data` maps) with
/// positioned reads when given (`bundle::walk_section_in_file`).
pub fn inspect_in<'r, R: object::ReadRef<'r>>(
    read: R,
    (data, file): (&[u8], Option<&std::fs::File>),
    release: &dyn Fn(usize, usize),
) -> FormatResult<ElfContent> {
    let len = read.len().unwrap_or(0);
    let ident = read.read_bytes_at(0, len.min(16)).unwrap_or_default();
    if !is_elf(ident) {
        return Err(FormatError::new(0, "not an ELF file"));
    }
    if let Some(why) = unsupported_ident(ident)? {
        return Ok(ElfContent::Unsupported(why));
    }
    let header = elf::FileHeader64::<LE>::parse(read).map_err(ferr)?;
    let endian = header.endian().map_err(ferr)?;
    let machine = header.e_machine(endian);
    if machine == EM_AMDGPU {
        return Ok(ElfContent::CodeObject(
            bundle::target::target_from_elf_flags(header.e_flags(endian), ident[8]),
        ));
    }
    let sections = header.sections(endian, read).map_err(ferr)?;
    let segments = header.program_headers(endian, read).map_err(ferr)?;
    let kind = match header.e_type(endian) {
        elf::ET_EXEC => ElfKind::Executable,
        elf::ET_DYN if segments.iter().any(|p| p.p_type(endian) == elf::PT_INTERP) => {
            ElfKind::PieExecutable
        }
        elf::ET_DYN => ElfKind::SharedLibrary,
        elf::ET_REL => ElfKind::Relocatable,
        _ => ElfKind::Other,
    };

    let find = |name: &str| sections.section_by_name(endian, name.as_bytes());
    let fatbin_sec = find(FATBIN_SECTION);
    let marker_sec = find(MARKER_SECTION);
    // A debug-info companion keeps the section headers of its binary with the loaded
    // sections' bytes gone (NOBITS): it holds no device code and loads nothing.
    let gone = |s: Option<(object::SectionIndex, &elf::SectionHeader64<LE>)>| {
        s.is_some_and(|(_, h)| h.sh_type(endian) == elf::SHT_NOBITS)
    };
    if gone(find(WRAPPER_SECTION)) || gone(marker_sec) {
        return Ok(ElfContent::Plain(ElfKind::DebugInfo));
    }
    let mut problems = Vec::new();

    let Some((fb_index, fb)) = fatbin_sec else {
        return Ok(without_fatbin(
            (read, data.len() as u64),
            &sections,
            kind,
            machine,
            marker_sec,
            problems,
        ));
    };

    let span = SectionSpan {
        index: fb_index.0,
        offset: fb.sh_offset(endian),
        size: fb.sh_size(endian),
        addr: fb.sh_addr(endian),
        nobits: fb.sh_type(endian) == elf::SHT_NOBITS,
    };
    let mut bundles = Vec::new();
    if !span.nobits {
        // The headers read so far (the file's first and last folios, 2 MiB each on
        // Linux 6.18) leave the resident set before the bundles' are read: a large
        // binary holds one folio at a time, not three.
        release(0, data.len());
        let walk = |sec: &[u8]| match file {
            Some(f) => bundle::walk_section_in_file(f, span.offset, sec.len() as u64),
            None => bundle::walk_section_releasing(sec, &|o, l| {
                release((span.offset as usize).saturating_add(o), l)
            }),
        };
        match fb.data(endian, data) {
            Ok(sec) => match walk(sec) {
                Ok(b) => bundles = b,
                Err(e) => problems.push(format!("{FATBIN_SECTION}: {}", e.shifted(span.offset))),
            },
            Err(_) => problems.push(format!(
                "{FATBIN_SECTION}: section of {:#x} bytes at {:#x} passes the end of the file",
                span.size, span.offset
            )),
        }
    }

    let mut wrappers = read_wrappers(
        read,
        endian,
        header,
        &sections,
        kind,
        &span,
        &bundles,
        &mut problems,
    );
    let marker = read_marker(read, endian, marker_sec, &mut problems);
    let host_only =
        span.nobits || marker.is_some() || wrappers.iter().any(|w| w.magic == WrapperMagic::Hipk);
    if host_only {
        // A `.hip_fatbin` with no whole page to remove stays PROGBITS after the
        // rewrite (common on 64 KiB pages): its bytes are still in the file, but no
        // wrapper reaches them any more; the code objects are the archives'. A HIPF
        // wrapper left beside a marker or a HIPK one points at none of them either.
        bundles.clear();
        for w in &mut wrappers {
            w.bundle = None;
        }
    }
    Ok(ElfContent::Fat(Box::new(FatBinary {
        elf_kind: kind,
        machine,
        // A section that passes the end of the file holds no readable device code.
        fatbin_bytes: if span.nobits
            || span
                .offset
                .checked_add(span.size)
                .is_none_or(|e| e > data.len() as u64)
        {
            0
        } else {
            span.size
        },
        fatbin: Some(span),
        bundles,
        wrappers,
        marker,
        host_only,
        rdc_object: false,
        problems,
    })))
}

/// Why an ELF is not inspected (not 64-bit little-endian), or `None`.
fn unsupported_ident(data: &[u8]) -> FormatResult<Option<String>> {
    if data.len() < 16 {
        return Err(FormatError::new(
            data.len() as u64,
            "truncated ELF identification",
        ));
    }
    match (data[4], data[5]) {
        (2, 1) => Ok(None),
        (c, d) => {
            let class = match c {
                1 => "32-bit",
                2 => "64-bit",
                _ => "unknown-class",
            };
            let endian = match d {
                1 => "little-endian",
                2 => "big-endian",
                _ => "unknown-endian",
            };
            Ok(Some(format!(
                "unsupported ELF ({class} {endian}): only 64-bit little-endian ELF is inspected"
            )))
        }
    }
}

/// An ELF without `.hip_fatbin`: an `-fgpu-rdc` object (one section per target,
/// named after the entry ID), a marker without device code, or a plain binary.
fn without_fatbin<'r, R: object::ReadRef<'r>>(
    (read, len): (R, u64),
    sections: &object::read::elf::SectionTable<'r, elf::FileHeader64<LE>, R>,
    kind: ElfKind,
    machine: u16,
    marker_sec: Option<(object::SectionIndex, &elf::SectionHeader64<LE>)>,
    mut problems: Vec<String>,
) -> ElfContent {
    let endian = LE;
    // -fgpu-rdc objects: one section per target, named after the entry ID.
    let mut entries = Vec::new();
    let mut total = 0u64;
    for (i, s) in sections.iter().enumerate() {
        let name = sections.section_name(endian, s).unwrap_or_default();
        let Some(id) = name.strip_prefix(OBJECT_BUNDLE_PREFIX.as_bytes()) else {
            continue;
        };
        let id = String::from_utf8_lossy(id);
        let (off, size) = (s.sh_offset(endian), s.sh_size(endian));
        if s.sh_type(endian) == elf::SHT_NOBITS || off.checked_add(size).is_none_or(|e| e > len) {
            problems.push(format!(
                "section {i} ({OBJECT_BUNDLE_PREFIX}{id}) lies outside the file"
            ));
            continue;
        }
        total += size;
        entries.push(BundleEntry {
            id: EntryId::parse(&id),
            offset: off,
            size,
        });
    }
    if entries.iter().any(|e| !e.id.is_host()) {
        return ElfContent::Fat(Box::new(FatBinary {
            elf_kind: kind,
            machine,
            fatbin: None,
            bundles: vec![BundleInfo {
                index: 0,
                offset: 0,
                stored_size: total,
                compression: Compression::None,
                ccob_version: None,
                uncompressed_size: total,
                entries,
            }],
            wrappers: Vec::new(),
            marker: None,
            host_only: false,
            fatbin_bytes: total,
            rdc_object: true,
            problems,
        }));
    }
    if marker_sec.is_none() {
        return ElfContent::Plain(kind);
    }
    problems.push("has a .rocm_kpack_ref marker but no .hip_fatbin section".into());
    ElfContent::Fat(Box::new(FatBinary {
        elf_kind: kind,
        machine,
        fatbin: None,
        bundles: Vec::new(),
        wrappers: Vec::new(),
        marker: read_marker(read, endian, marker_sec, &mut problems),
        host_only: true,
        fatbin_bytes: 0,
        rdc_object: false,
        problems,
    }))
}

fn read_marker<'r, R: object::ReadRef<'r>>(
    data: R,
    endian: LE,
    sec: Option<(object::SectionIndex, &elf::SectionHeader64<LE>)>,
    problems: &mut Vec<String>,
) -> Option<Marker> {
    let (_, s) = sec?;
    match s.data(endian, data) {
        Ok(bytes) => match Marker::decode(bytes) {
            Ok(m) => Some(m),
            Err(e) => {
                problems.push(format!("{MARKER_SECTION}: {e}"));
                None
            }
        },
        Err(_) => {
            problems.push(format!(
                "{MARKER_SECTION}: section passes the end of the file"
            ));
            None
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn read_wrappers<'r, R: object::ReadRef<'r>>(
    data: R,
    endian: LE,
    header: &elf::FileHeader64<LE>,
    sections: &object::read::elf::SectionTable<'r, elf::FileHeader64<LE>, R>,
    kind: ElfKind,
    fatbin: &SectionSpan,
    bundles: &[BundleInfo],
    problems: &mut Vec<String>,
) -> Vec<WrapperInfo> {
    let Some((seg_index, seg)) = sections.section_by_name(endian, WRAPPER_SECTION.as_bytes())
    else {
        problems.push(format!(
            "no {WRAPPER_SECTION} section: nothing registers the device code"
        ));
        return Vec::new();
    };
    let size = seg.sh_size(endian);
    if size % WRAPPER_SIZE as u64 != 0 {
        problems.push(format!(
            "{WRAPPER_SECTION}: size {size} is not a multiple of {WRAPPER_SIZE}"
        ));
    }
    let Ok(bytes) = seg.data(endian, data) else {
        problems.push(format!(
            "{WRAPPER_SECTION}: section passes the end of the file"
        ));
        return Vec::new();
    };
    let seg_addr = seg.sh_addr(endian);
    // Relocation targets of each wrapper's pointer slot, indexed by slot offset.
    let mut reloc_targets: HashMap<u64, u64> = HashMap::new();
    let is_mips = header.is_mips64el(endian);
    let machine = machine::HostMachine::of(header.e_machine(endian));
    for s in sections.iter() {
        let Ok(Some((relas, link))) = s.rela(endian, data) else {
            continue;
        };
        // In objects, only the relocations applying to the wrapper section matter,
        // and offsets are section-relative; in linked files they are vaddrs.
        let rel_obj = kind == ElfKind::Relocatable;
        if rel_obj && s.sh_info(endian) as usize != seg_index.0 {
            continue;
        }
        let symbols = sections.symbol_table_by_index(endian, data, link).ok();
        for r in relas {
            let off = r.r_offset(endian);
            let slot = if rel_obj {
                off
            } else if off >= seg_addr && off < seg_addr + size {
                off - seg_addr
            } else {
                continue;
            };
            let addend = r.r_addend(endian) as u64;
            let r_type = r.r_type(endian, is_mips);
            let target = match machine {
                Some(m) if r_type == m.relative() => addend,
                // Absolute: symbol value + addend (`__hip_fatbin + 0` in -fgpu-rdc links).
                Some(m) if r_type == m.abs64() => {
                    let Some(sym) = symbols.as_ref().and_then(|t| {
                        t.symbol(object::SymbolIndex(r.r_sym(endian, is_mips) as usize))
                            .ok()
                    }) else {
                        continue;
                    };
                    if rel_obj {
                        // Section-relative value; only pointers into .hip_fatbin count.
                        if sym.st_shndx(endian) as usize != fatbin.index {
                            continue;
                        }
                        fatbin
                            .addr
                            .wrapping_add(sym.st_value(endian))
                            .wrapping_add(addend)
                    } else {
                        sym.st_value(endian).wrapping_add(addend)
                    }
                }
                _ => continue,
            };
            reloc_targets.insert(slot, target);
        }
    }
    let mut out = Vec::new();
    for (i, w) in bytes.chunks_exact(WRAPPER_SIZE).enumerate() {
        let u32_at = |o: usize| u32::from_le_bytes([w[o], w[o + 1], w[o + 2], w[o + 3]]);
        let u64_at = |o: usize| u64::from(u32_at(o)) | (u64::from(u32_at(o + 4)) << 32);
        let magic_value = u32_at(0);
        let magic = match magic_value {
            MAGIC_HIPF => WrapperMagic::Hipf,
            MAGIC_HIPK => WrapperMagic::Hipk,
            _ => WrapperMagic::Unknown,
        };
        let slot = (i * WRAPPER_SIZE + 8) as u64;
        // Keys are section-relative slot offsets for every ELF type.
        let pointer = match reloc_targets.get(&slot) {
            Some(&t) => Some(t),
            None if kind == ElfKind::Executable => Some(u64_at(8)),
            None => None,
        };
        let bundle = match (magic, pointer) {
            (WrapperMagic::Hipf, Some(p)) => {
                let found = p
                    .checked_sub(fatbin.addr)
                    .and_then(|o| bundles.iter().find(|b| b.offset == o))
                    .map(|b| b.index);
                if found.is_none() && !bundles.is_empty() {
                    problems.push(format!(
                        "wrapper {i}: pointer {p:#x} is not the start of a bundle in {FATBIN_SECTION}"
                    ));
                }
                found
            }
            _ => None,
        };
        if magic == WrapperMagic::Unknown {
            problems.push(format!("wrapper {i}: unknown magic {magic_value:#010x}"));
        }
        out.push(WrapperInfo {
            index: i,
            magic,
            magic_value,
            version: u32_at(4),
            pointer,
            reserved: u64_at(16),
            bundle,
        });
    }
    out
}

/// A member of a static archive that carries device code.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ArchiveMember {
    /// Member name.
    pub name: String,
    /// Member size in bytes.
    pub size: u64,
    /// Its device code.
    pub fat: FatBinary,
}

/// A static archive (`.a`): its members with device code, and problems with others.
#[derive(Debug, Clone, Default)]
pub struct StaticArchive {
    /// Members that carry device code, in archive order.
    pub members: Vec<ArchiveMember>,
    /// Number of members.
    pub member_count: usize,
    /// Members that could not be read.
    pub problems: Vec<String>,
    /// A thin archive's members: names of the files they are (relative to the
    /// archive's directory as `ar` wrote them), not stored in the archive. Data only:
    /// whoever reads them checks where they lead.
    pub thin: Vec<String>,
}

/// Whether `data` starts like a static archive.
pub fn is_static_archive(data: &[u8]) -> bool {
    data.starts_with(b"!<arch>\n") || data.starts_with(b"!<thin>\n")
}

/// Inspect every member of a static archive.
pub fn inspect_static_archive(data: &[u8]) -> FormatResult<StaticArchive> {
    let ar = object::read::archive::ArchiveFile::parse(data)
        .map_err(|e| FormatError::new(0, format!("malformed static archive: {e}")))?;
    let mut out = StaticArchive::default();
    for m in ar.members() {
        let m = match m {
            Ok(m) => m,
            Err(e) => {
                out.problems.push(format!("member list: {e}"));
                break;
            }
        };
        out.member_count += 1;
        let name = String::from_utf8_lossy(m.name()).into_owned();
        if m.is_thin() {
            out.thin.push(name);
            continue;
        }
        let Ok(bytes) = m.data(data) else {
            out.problems
                .push(format!("member {name}: data passes the end of the archive"));
            continue;
        };
        if !is_elf(bytes) {
            continue;
        }
        // Members are only 2-byte aligned in the archive: read in place (object's
        // `unaligned` types).
        match inspect(bytes) {
            Ok(ElfContent::Fat(fat)) => out.members.push(ArchiveMember {
                name,
                size: bytes.len() as u64,
                fat: *fat,
            }),
            Ok(_) => {}
            Err(e) => out.problems.push(format!("member {name}: {e}")),
        }
    }
    Ok(out)
}

/// An 8-byte-aligned copy of some bytes (for ELF headers found at odd offsets).
pub struct AlignedBytes {
    words: Vec<u64>,
    len: usize,
}

impl AlignedBytes {
    /// Copy `bytes` into aligned storage.
    pub fn copy_of(bytes: &[u8]) -> Self {
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        for (w, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            *w = u64::from_ne_bytes(b);
        }
        AlignedBytes {
            words,
            len: bytes.len(),
        }
    }

    /// Read exactly `len` bytes from `r` into aligned storage, then require the
    /// reader to end there (a checking reader verifies its CRC at that point).
    pub fn read_from(r: &mut dyn std::io::Read, len: usize) -> std::io::Result<Self> {
        let mut words = vec![0u64; len.div_ceil(8)];
        r.read_exact(&mut object::pod::bytes_of_slice_mut(&mut words)[..len])?;
        let mut more = [0u8; 1];
        if r.read(&mut more)? != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("more than the {len} bytes expected"),
            ));
        }
        Ok(AlignedBytes { words, len })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &object::pod::bytes_of_slice(&self.words)[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_read_with_positioned_reads_say_what_the_map_says() {
        use std::io::Write;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/bin");
        let names = [
            "libkernels.so",
            "libkernels_z.so",
            "hostonly",
            "app_pie",
            "librdc.so",
            "vadd.o",
            "vadd-gfx90a.co",
            "libembed.so",
            "libplain.so",
        ];
        for name in names {
            let whole = std::fs::read(dir.join(name)).unwrap();
            // Whole, and cut short in its identification, its headers, its middle.
            for len in [whole.len(), 10, 100, whole.len() / 2] {
                let data = &whole[..len];
                let mut file = tempfile::tempfile().unwrap();
                file.write_all(data).unwrap();
                let map = crate::fsutil::map_open_file(&file).unwrap();
                let reads = crate::fsutil::SmallReads::new(&file, &map);
                let by_reads = inspect_in(&reads, (&map, None), &|_, _| {});
                assert_eq!(
                    format!("{by_reads:?}"),
                    format!("{:?}", inspect(data)),
                    "{name} cut at {len}"
                );
            }
        }
    }
}
