//! The program and section headers of an ELF image, as plain numbers.

use super::{Result, RewriteError, SHT_RELR, malformed};
use crate::elf::machine::{HostMachine, MIN_PAGE};
use object::elf;
use serde::Serialize;

pub(crate) const PHENT: u64 = 56;
pub(crate) const SHENT: u64 = 64;
/// The section covering a relocated program-header table. Section-based tools see
/// the table's bytes as content to keep: without it eu-strip drops every program
/// header of a packed binary ("no loadable segments").
pub const PHDRS_SECTION: &str = ".kpack_phdrs";
pub(crate) const EHDR: usize = 64;

/// A program header, as plain numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Segment {
    /// `p_type`.
    pub p_type: u32,
    /// `p_flags` (PF_R = 4, PF_W = 2, PF_X = 1).
    pub p_flags: u32,
    /// File offset.
    pub p_offset: u64,
    /// Virtual address.
    pub p_vaddr: u64,
    /// Physical address.
    pub p_paddr: u64,
    /// Bytes in the file.
    pub p_filesz: u64,
    /// Bytes in memory.
    pub p_memsz: u64,
    /// Alignment.
    pub p_align: u64,
}

impl Segment {
    /// `PT_LOAD`, `PT_PHDR`… or the number.
    pub fn type_name(&self) -> String {
        match self.p_type {
            elf::PT_NULL => "NULL".into(),
            elf::PT_LOAD => "LOAD".into(),
            elf::PT_DYNAMIC => "DYNAMIC".into(),
            elf::PT_INTERP => "INTERP".into(),
            elf::PT_NOTE => "NOTE".into(),
            elf::PT_PHDR => "PHDR".into(),
            elf::PT_TLS => "TLS".into(),
            elf::PT_GNU_EH_FRAME => "GNU_EH_FRAME".into(),
            elf::PT_GNU_STACK => "GNU_STACK".into(),
            elf::PT_GNU_RELRO => "GNU_RELRO".into(),
            elf::PT_GNU_PROPERTY => "GNU_PROPERTY".into(),
            t => format!("{t:#x}"),
        }
    }

    /// `R`, `RW`, `R E`…
    pub fn flags_name(&self) -> String {
        let f = self.p_flags;
        format!(
            "{}{}{}",
            if f & elf::PF_R != 0 { "R" } else { " " },
            if f & elf::PF_W != 0 { "W" } else { " " },
            if f & elf::PF_X != 0 { "E" } else { " " }
        )
        .trim_end()
        .to_string()
    }

    pub(crate) fn file_end(&self) -> u64 {
        self.p_offset.saturating_add(self.p_filesz)
    }

    pub(crate) fn mem_end(&self) -> u64 {
        self.p_vaddr.saturating_add(self.p_memsz)
    }
}

/// A section header, as plain numbers, with its name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Section {
    /// Name from `.shstrtab`.
    pub name: String,
    /// `sh_name`.
    pub sh_name: u32,
    /// `sh_type`.
    pub sh_type: u32,
    /// `sh_flags`.
    pub sh_flags: u64,
    /// `sh_addr`.
    pub sh_addr: u64,
    /// `sh_offset`.
    pub sh_offset: u64,
    /// `sh_size`.
    pub sh_size: u64,
    /// `sh_link`.
    pub sh_link: u32,
    /// `sh_info`.
    pub sh_info: u32,
    /// `sh_addralign`.
    pub sh_addralign: u64,
    /// `sh_entsize`.
    pub sh_entsize: u64,
}

impl Section {
    pub(crate) fn nobits(&self) -> bool {
        self.sh_type == elf::SHT_NOBITS
    }
    pub(crate) fn alloc(&self) -> bool {
        self.sh_flags & u64::from(elf::SHF_ALLOC) != 0
    }
    /// Bytes the section occupies in the file.
    pub fn file_size(&self) -> u64 {
        if self.nobits() { 0 } else { self.sh_size }
    }
    /// `PROGBITS`, `NOBITS`…
    pub fn type_name(&self) -> String {
        match self.sh_type {
            elf::SHT_NULL => "NULL".into(),
            elf::SHT_PROGBITS => "PROGBITS".into(),
            elf::SHT_SYMTAB => "SYMTAB".into(),
            elf::SHT_STRTAB => "STRTAB".into(),
            elf::SHT_RELA => "RELA".into(),
            elf::SHT_HASH => "HASH".into(),
            elf::SHT_DYNAMIC => "DYNAMIC".into(),
            elf::SHT_NOTE => "NOTE".into(),
            elf::SHT_NOBITS => "NOBITS".into(),
            elf::SHT_REL => "REL".into(),
            elf::SHT_DYNSYM => "DYNSYM".into(),
            elf::SHT_INIT_ARRAY => "INIT_ARRAY".into(),
            elf::SHT_FINI_ARRAY => "FINI_ARRAY".into(),
            elf::SHT_GNU_HASH => "GNU_HASH".into(),
            elf::SHT_GNU_VERSYM => "VERSYM".into(),
            elf::SHT_GNU_VERNEED => "VERNEED".into(),
            elf::SHT_GNU_VERDEF => "VERDEF".into(),
            SHT_RELR => "RELR".into(),
            t => format!("{t:#x}"),
        }
    }
}

/// The parsed headers of an ELF64 little-endian image.
#[derive(Debug, Clone)]
pub struct ElfLayout {
    /// `e_type`.
    pub e_type: u16,
    /// `e_machine`.
    pub e_machine: u16,
    /// The host machine, when it is one the rewrite handles.
    pub machine: Option<HostMachine>,
    /// The page size file offsets stay congruent to ([`HostMachine::page`]; 4 KiB
    /// for machines not handled).
    pub page: u64,
    /// `e_phoff`.
    pub e_phoff: u64,
    /// `e_shoff`.
    pub e_shoff: u64,
    /// `e_shstrndx`.
    pub e_shstrndx: u16,
    /// Program headers.
    pub segments: Vec<Segment>,
    /// Section headers (names resolved).
    pub sections: Vec<Section>,
}

pub(crate) fn rd_u16(d: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([d[o], d[o + 1]])
}
pub(crate) fn rd_u32(d: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]])
}
pub(crate) fn rd_u64(d: &[u8], o: usize) -> u64 {
    u64::from(rd_u32(d, o)) | (u64::from(rd_u32(d, o + 4)) << 32)
}
pub(crate) fn wr_u32(d: &mut [u8], o: usize, v: u32) {
    d[o..o + 4].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn wr_u64(d: &mut [u8], o: usize, v: u64) {
    d[o..o + 8].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn wr_u16(d: &mut [u8], o: usize, v: u16) {
    d[o..o + 2].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn range(data: &[u8], off: u64, len: u64, what: &str) -> Result<std::ops::Range<usize>> {
    let end = off.checked_add(len).filter(|&e| e <= data.len() as u64);
    match end {
        Some(e) => Ok(off as usize..e as usize),
        None => Err(malformed(
            off,
            format!("{what} ({len:#x} bytes at {off:#x}) passes the end of the file"),
        )),
    }
}

/// Parse the headers of an ELF64 little-endian executable, shared object or object.
pub fn parse_layout(data: &[u8]) -> Result<ElfLayout> {
    if !data.starts_with(b"\x7fELF") {
        return Err(RewriteError::NotElf);
    }
    if data.len() < EHDR {
        return Err(malformed(data.len() as u64, "truncated ELF header"));
    }
    check_ident(data)?;
    let e_type = rd_u16(data, 16);
    let e_machine = rd_u16(data, 18);
    let e_phoff = rd_u64(data, 32);
    let e_shoff = rd_u64(data, 40);
    let e_phentsize = u64::from(rd_u16(data, 54));
    let e_phnum = u64::from(rd_u16(data, 56));
    let e_shentsize = u64::from(rd_u16(data, 58));
    let e_shnum = u64::from(rd_u16(data, 60));
    let e_shstrndx = rd_u16(data, 62);
    if e_phnum > 0 && e_phentsize != PHENT {
        return Err(malformed(
            54,
            format!("program header size {e_phentsize}, expected {PHENT}"),
        ));
    }
    if e_shnum > 0 && e_shentsize != SHENT {
        return Err(malformed(
            58,
            format!("section header size {e_shentsize}, expected {SHENT}"),
        ));
    }
    if e_shnum == 0 && e_shoff != 0 {
        return Err(RewriteError::Unsupported(
            "extended section numbering (e_shnum = 0)".into(),
        ));
    }
    if e_phnum == 0xffff {
        return Err(RewriteError::Unsupported(
            "extended program header numbering (PN_XNUM)".into(),
        ));
    }
    let ph = range(data, e_phoff, e_phnum * PHENT, "program header table")?;
    let segments: Vec<Segment> = ph
        .clone()
        .step_by(PHENT as usize)
        .map(|o| Segment {
            p_type: rd_u32(data, o),
            p_flags: rd_u32(data, o + 4),
            p_offset: rd_u64(data, o + 8),
            p_vaddr: rd_u64(data, o + 16),
            p_paddr: rd_u64(data, o + 24),
            p_filesz: rd_u64(data, o + 32),
            p_memsz: rd_u64(data, o + 40),
            p_align: rd_u64(data, o + 48),
        })
        .collect();
    let sh = range(data, e_shoff, e_shnum * SHENT, "section header table")?;
    let mut sections: Vec<Section> = sh
        .step_by(SHENT as usize)
        .map(|o| Section {
            name: String::new(),
            sh_name: rd_u32(data, o),
            sh_type: rd_u32(data, o + 4),
            sh_flags: rd_u64(data, o + 8),
            sh_addr: rd_u64(data, o + 16),
            sh_offset: rd_u64(data, o + 24),
            sh_size: rd_u64(data, o + 32),
            sh_link: rd_u32(data, o + 40),
            sh_info: rd_u32(data, o + 44),
            sh_addralign: rd_u64(data, o + 48),
            sh_entsize: rd_u64(data, o + 56),
        })
        .collect();
    check_bounds(data, &segments, &sections, e_phoff, e_shoff)?;
    name_sections(data, &mut sections, e_shoff, e_shstrndx)?;
    let machine = HostMachine::of(e_machine);
    let page = machine.map_or(MIN_PAGE, |m| {
        m.page(
            segments
                .iter()
                .filter(|p| p.p_type == elf::PT_LOAD)
                .map(|p| p.p_align),
        )
    });
    Ok(ElfLayout {
        e_type,
        e_machine,
        machine,
        page,
        e_phoff,
        e_shoff,
        e_shstrndx,
        segments,
        sections,
    })
}

/// A 64-bit little-endian ELF of identification version 1, or why not.
fn check_ident(data: &[u8]) -> Result<()> {
    match (data[4], data[5]) {
        (2, 1) => {}
        (1, _) => return Err(RewriteError::Unsupported("32-bit ELF".into())),
        (_, 2) => {
            let m = u16::from_be_bytes([data[18], data[19]]);
            let name = match m {
                elf::EM_PPC64 => "ppc64".to_string(),
                elf::EM_AARCH64 => "aarch64_be".to_string(),
                m => crate::elf::machine::machine_name(m),
            };
            return Err(RewriteError::Unsupported(format!(
                "big-endian ELF ({name}): only little-endian {} fat binaries are rewritten",
                crate::elf::machine::handled_list()
            )));
        }
        (c, d) => {
            return Err(RewriteError::Unsupported(format!(
                "ELF class {c}, data encoding {d}"
            )));
        }
    }
    if data[6] != 1 {
        return Err(malformed(
            6,
            format!("ELF identification version {} (expected 1)", data[6]),
        ));
    }
    Ok(())
}

/// Bound every offset, address and size here, so that no later sum can overflow:
/// addresses stay in the 47-bit user space (x86-64's; aarch64 and ppc64le have 48),
/// file ranges inside the file.
fn check_bounds(
    data: &[u8],
    segments: &[Segment],
    sections: &[Section],
    e_phoff: u64,
    e_shoff: u64,
) -> Result<()> {
    const ADDR_LIMIT: u64 = 1 << 47;
    let len = data.len() as u64;
    for (i, p) in segments.iter().enumerate() {
        let at = e_phoff + i as u64 * PHENT;
        if p.p_vaddr.saturating_add(p.p_memsz.max(p.p_filesz)) > ADDR_LIMIT {
            return Err(malformed(
                at,
                format!("program header {i}: address range beyond the 47-bit user space"),
            ));
        }
        if p.p_filesz > 0 && p.p_offset.saturating_add(p.p_filesz) > len {
            return Err(malformed(
                at,
                format!("program header {i}: file range passes the end of the file"),
            ));
        }
        if (p.p_filesz > 0 && p.p_offset > len) || p.p_offset > ADDR_LIMIT || p.p_align > ADDR_LIMIT
        {
            return Err(malformed(
                at,
                format!("program header {i}: offset or alignment out of range"),
            ));
        }
    }
    for (i, s) in sections.iter().enumerate() {
        let at = e_shoff + i as u64 * SHENT;
        if s.sh_addr.saturating_add(s.sh_size) > ADDR_LIMIT
            || s.sh_offset > ADDR_LIMIT
            || s.sh_size > ADDR_LIMIT
        {
            return Err(malformed(
                at,
                format!("section header {i}: address or size out of range"),
            ));
        }
        if s.file_size() > 0 && s.sh_type != elf::SHT_NULL && s.sh_offset + s.sh_size > len {
            return Err(malformed(
                at,
                format!("section header {i}: file range passes the end of the file"),
            ));
        }
    }
    Ok(())
}

/// Every section's name, from the section-name table.
fn name_sections(
    data: &[u8],
    sections: &mut [Section],
    e_shoff: u64,
    e_shstrndx: u16,
) -> Result<()> {
    if sections.is_empty() {
        return Ok(());
    }
    let strtab = sections
        .get(usize::from(e_shstrndx))
        .filter(|_| e_shstrndx != elf::SHN_XINDEX)
        .ok_or_else(|| malformed(62, format!("e_shstrndx {e_shstrndx} is out of range")))?;
    let strs = range(data, strtab.sh_offset, strtab.file_size(), ".shstrtab")?;
    let strs = &data[strs];
    for s in sections.iter_mut() {
        let start = s.sh_name as usize;
        if start >= strs.len() && s.sh_type != elf::SHT_NULL {
            return Err(malformed(
                e_shoff,
                format!("section name offset {start} is outside .shstrtab"),
            ));
        }
        let bytes = strs.get(start..).unwrap_or_default();
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        s.name = String::from_utf8_lossy(&bytes[..end]).into_owned();
    }
    Ok(())
}

impl ElfLayout {
    pub(crate) fn section(&self, name: &str) -> Option<(usize, &Section)> {
        self.sections
            .iter()
            .enumerate()
            .find(|(_, s)| s.name == name)
    }

    /// The end of the highest address any `PT_LOAD` maps (0 without one).
    pub fn load_end(&self) -> u64 {
        self.segments
            .iter()
            .filter(|p| p.p_type == elf::PT_LOAD)
            .map(|p| p.mem_end())
            .max()
            .unwrap_or(0)
    }

    /// File offset of a virtual address, through the `PT_LOAD` that maps it from the file.
    pub fn vaddr_to_offset(&self, vaddr: u64) -> Option<u64> {
        self.segments
            .iter()
            .filter(|p| p.p_type == elf::PT_LOAD)
            .find(|p| vaddr >= p.p_vaddr && vaddr < p.p_vaddr + p.p_filesz)
            .map(|p| p.p_offset + (vaddr - p.p_vaddr))
    }
}
