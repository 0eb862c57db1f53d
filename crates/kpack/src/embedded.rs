//! Device code embedded outside `.hip_fatbin`: offload bundles and AMDGPU code
//! objects linked into a binary's data (`.rodata`, `.data.rel.ro`, custom sections)
//! that the library loads itself (`hipModuleLoadData`), as AOT kernel libraries,
//! assembly kernels and Triton/CK-style bundles do. The HIP fat-binary wrapper does
//! not reach them, so they cannot be packed; they are found, bounded like any bundle,
//! and reported as what they are.
//!
//! Where to look: every allocated, non-executable section with file bytes of an ELF
//! or PE image except the ones HIP itself owns (`.hip_fatbin`, the wrappers, the
//! marker); with `deep`, every byte of any file (bar the `.hip_fatbin` already read).

use crate::bundle::{self, BundleInfo};
use crate::codeobj;
use object::LittleEndian as LE;
use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
use serde::Serialize;

/// More embedded objects than this in one file are not listed (a note says so).
pub const MAX_OBJECTS: usize = 100_000;

/// Sections HIP itself owns: read by the fat-binary reader, never searched.
const HIP_SECTIONS: [&str; 6] = [
    ".hip_fatbin",
    ".hipFatBinSegment",
    ".rocm_kpack_ref",
    ".hip_fat",
    ".hipFatB",
    ".kpackrf",
];

/// Where to search a file: (section name, file offset, size).
pub type Range = (String, u64, u64);

/// What an embedded object is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum EmbeddedFormat {
    /// An AMDGPU ELF code object.
    CodeObject,
    /// An uncompressed offload bundle (`__CLANG_OFFLOAD_BUNDLE__`).
    Bundle,
    /// A compressed offload bundle (`CCOB`).
    CompressedBundle,
}

/// A target of an embedded object and the bytes of its code object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EmbeddedTarget {
    /// Target ID (`gfx942`, `gfx90a:xnack+`; `unknown` for an unknown processor).
    pub arch: String,
    /// Uncompressed code-object bytes (raw device code).
    #[serde(rename = "raw_size")]
    pub size: u64,
}

/// One device-code object found in a file's data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Embedded {
    /// The section it lies in (`file` when searched outside any section).
    pub section: String,
    /// Its number among the objects of that section (stable when offsets move).
    pub index: usize,
    /// File offset.
    pub offset: u64,
    /// Bytes it occupies.
    #[serde(rename = "stored_size")]
    pub size: u64,
    /// What it is.
    pub format: EmbeddedFormat,
    /// Its targets with their code-object sizes (one for a code object).
    pub targets: Vec<EmbeddedTarget>,
    /// For bundles: the bundle as the bundle reader sees it (offset in the file).
    #[serde(skip)]
    pub bundle: Option<BundleInfo>,
}

impl Embedded {
    /// Where it is, for reports and kernel rows: `lib/x.so@.rodata[3]`.
    pub fn label(&self, path: &str) -> String {
        format!("{path}@{}[{}]", self.section, self.index)
    }
}

/// What a pack (or a wheel split) says, once per file, of the embedded objects it
/// leaves where they are.
pub fn stays_in_place(path: &str, found: &[Embedded]) -> String {
    let mut targets: Vec<&str> = found
        .iter()
        .flat_map(|e| e.targets.iter().map(|t| t.arch.as_str()))
        .collect();
    targets.sort_by(|a, b| crate::natural::target_cmp(a, b));
    targets.dedup();
    format!(
        "{path}: {} embedded in its data ({}) stay in place: the binary loads them \
         itself, the HIP fat-binary wrapper does not reach them, so they are not packable",
        match found.len() {
            1 => "1 device-code object".to_string(),
            n => format!("{n} device-code objects"),
        },
        targets.join(", ")
    )
}

/// The data sections of an ELF or PE file worth searching (none for other files).
pub fn data_ranges(data: &[u8]) -> Vec<Range> {
    data_ranges_in(data, data)
}

/// [`data_ranges`] of a file map `data` with an ELF's headers read from `read` (an
/// `object::ReadCache` over the file reads them without mapping their folios).
pub fn data_ranges_in<'r, R: object::ReadRef<'r>>(read: R, data: &[u8]) -> Vec<Range> {
    if crate::elf::is_elf(read.read_bytes_at(0, 4).unwrap_or_default()) {
        elf_ranges(read).unwrap_or_default()
    } else if crate::coff::is_pe(data) {
        pe_ranges(data)
    } else {
        Vec::new()
    }
}

/// Every byte of the file, less the sections HIP owns.
pub fn deep_ranges(data: &[u8]) -> Vec<Range> {
    let mut owned: Vec<(u64, u64)> = if crate::elf::is_elf(data) {
        elf_sections(data)
            .unwrap_or_default()
            .into_iter()
            .filter(|s| HIP_SECTIONS.contains(&s.0.as_str()))
            .map(|s| (s.1, s.1 + s.2))
            .collect()
    } else {
        Vec::new()
    };
    owned.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0u64;
    for (a, b) in owned {
        if a > at {
            out.push(("file".to_string(), at, a - at));
        }
        at = at.max(b);
    }
    let len = data.len() as u64;
    if at < len {
        out.push(("file".to_string(), at, len - at));
    }
    out
}

/// (name, offset, size, allocated and not executable with file bytes).
fn elf_sections<'r, R: object::ReadRef<'r>>(data: R) -> Option<Vec<(String, u64, u64, bool)>> {
    let hdr = elf::FileHeader64::<LE>::parse(data).ok()?;
    let e = hdr.endian().ok()?;
    if hdr.e_machine(e) == elf::EM_AMDGPU {
        return None;
    }
    let sections = hdr.sections(e, data).ok()?;
    let mut out = Vec::new();
    for s in sections.iter() {
        let name = String::from_utf8_lossy(sections.section_name(e, s).unwrap_or_default());
        let flags = s.sh_flags(e);
        let data_sec = s.sh_type(e) != elf::SHT_NOBITS
            && flags & u64::from(elf::SHF_ALLOC) != 0
            && flags & u64::from(elf::SHF_EXECINSTR) == 0;
        out.push((name.into_owned(), s.sh_offset(e), s.sh_size(e), data_sec));
    }
    Some(out)
}

fn elf_ranges<'r, R: object::ReadRef<'r>>(data: R) -> Option<Vec<Range>> {
    let sections = elf_sections(data)?;
    if sections.is_empty() {
        // No section headers (`llvm-objcopy --strip-sections`, `sstrip`): the loader
        // and HIP still find the code through the segments, so do we.
        return segment_ranges(data);
    }
    Some(
        sections
            .into_iter()
            .filter(|s| s.3 && s.2 > 0 && !HIP_SECTIONS.contains(&s.0.as_str()))
            .map(|s| (s.0, s.1, s.2))
            .collect(),
    )
}

/// The loaded, non-executable segments' file bytes, named `PT_LOAD[i]` by their
/// program-header index.
fn segment_ranges<'r, R: object::ReadRef<'r>>(data: R) -> Option<Vec<Range>> {
    let hdr = elf::FileHeader64::<LE>::parse(data).ok()?;
    let e = hdr.endian().ok()?;
    let segments = hdr.program_headers(e, data).ok()?;
    Some(
        segments
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                p.p_type(e) == elf::PT_LOAD && p.p_flags(e) & elf::PF_X == 0 && p.p_filesz(e) > 0
            })
            .map(|(i, p)| (format!("PT_LOAD[{i}]"), p.p_offset(e), p.p_filesz(e)))
            .collect(),
    )
}

fn pe_ranges(data: &[u8]) -> Vec<Range> {
    const EXECUTE: u32 = 0x2000_0000;
    const INITIALIZED: u32 = 0x0000_0040;
    let Ok(pe) = crate::coff::headers(data) else {
        return Vec::new();
    };
    pe.sections
        .into_iter()
        .filter(|s| s.characteristics & EXECUTE == 0 && s.characteristics & INITIALIZED != 0)
        .filter(|s| !HIP_SECTIONS.contains(&s.name.as_str()) && s.size_of_raw_data > 0)
        .map(|s| {
            (
                s.name,
                u64::from(s.pointer_to_raw_data),
                u64::from(s.size_of_raw_data),
            )
        })
        .collect()
}

/// The embedded objects of a static archive's ELF members: each member's data
/// sections searched like a binary's, offsets given in the archive, sections named
/// `member:section`.
pub fn find_in_archive(data: &[u8]) -> (Vec<Embedded>, Option<String>) {
    let mut out = Vec::new();
    let Ok(ar) = object::read::archive::ArchiveFile::parse(data) else {
        return (out, None);
    };
    for m in ar.members().flatten() {
        let Ok(bytes) = m.data(data) else { continue };
        if !crate::elf::is_elf(bytes) {
            continue;
        }
        let at = (bytes.as_ptr() as usize - data.as_ptr() as usize) as u64;
        let name = String::from_utf8_lossy(m.name()).into_owned();
        let (found, note) = find(bytes, &data_ranges(bytes));
        for mut e in found {
            e.offset += at;
            if let Some(b) = &mut e.bundle {
                b.offset += at;
            }
            e.section = format!("{name}:{}", e.section);
            out.push(e);
        }
        if note.is_some() || out.len() >= MAX_OBJECTS {
            return (out, note);
        }
    }
    (out, None)
}

/// Every bundle and code object in `ranges` of `data`, in file order. Returns the
/// objects and a note when more than [`MAX_OBJECTS`] were found.
pub fn find(data: &[u8], ranges: &[Range]) -> (Vec<Embedded>, Option<String>) {
    find_at_most(data, ranges, MAX_OBJECTS, &|_: usize, _: usize| {})
}

/// [`find`] over a read-only file map, handing each searched window of
/// [`SEARCH_WINDOW`] bytes to `input`'s release (offset, length) once its hits are
/// known, so that a search of a large `.rodata` keeps a window of its pages
/// resident, not the whole section (`fsutil::release_range`). When `input` names the
/// file `data` maps ([`bundle::Input::file`], at offset 0), large sections are
/// searched from the file with positioned reads instead and none of their pages is
/// mapped: only the candidates are read through the map.
pub fn find_releasing(
    data: &[u8],
    ranges: &[Range],
    input: &dyn bundle::Input,
) -> (Vec<Embedded>, Option<String>) {
    // Searched in place, the ranges came from the headers read through the map (the
    // section header table is at its end): the folio they were read from goes
    // before the search, or each searching thread holds it and a window, two folios
    // of a large file, not one. (A caller with the file reads its headers with
    // positioned reads: nothing of them is mapped.)
    if input.file().is_none() && ranges.iter().any(|r| r.2 >= RELEASE_MIN as u64) {
        input.release(0, data.len());
    }
    find_at_most(data, ranges, MAX_OBJECTS, input)
}

/// How much of a section is searched before its pages are released: one folio of
/// the page cache (`fsutil::FAULT_SPAN`), the windows ending where the file's folios
/// do, so a thread searching keeps one folio resident (at 8 MiB, a scan of a tree
/// with larger data sections took 8 MiB more; 1 MiB windows across folio boundaries
/// kept two folios of each thread).
pub const SEARCH_WINDOW: usize = crate::fsutil::FAULT_SPAN;

/// How much of a section's candidates are read before their pages are released.
const RELEASE_STEP: usize = crate::fsutil::FAULT_SPAN;

/// Sections smaller than this are not released: their pages go with the caller's
/// map (dropped after the file, or released whole). A release costs a TLB flush on
/// every core running the process, and the small data sections of a tree's many
/// binaries made 1,500 of them in a scan of 1 GiB (4% of `find-kernel`'s time), to
/// free at most this much per section in flight.
const RELEASE_MIN: usize = 1 << 20;

/// The longest magic searched for (the bundle's; the ELF one is 7 bytes with its
/// `0x7f`).
const LONGEST_MAGIC: usize = 24;

/// How much of a section searched from its file is read at a time (on the stack: a
/// buffer of 256 KiB on the heap of each thread stayed resident after the search).
const SEARCH_PIECE: usize = 64 << 10;

/// Where the magics start in the `len` bytes at `at` of `file`, in order, read a
/// piece of [`SEARCH_PIECE`] at a time: each piece is read with the bytes that
/// start the next, so a magic across the seam is found whole in the first.
fn hits_in_file(file: &std::fs::File, at: u64, len: usize) -> std::io::Result<Vec<usize>> {
    use std::os::unix::fs::FileExt;
    let piece = SEARCH_PIECE;
    let mut buf = [0u8; SEARCH_PIECE + LONGEST_MAGIC - 1];
    let mut hits = Vec::new();
    let mut from = 0usize;
    while from < len {
        let n = (len - from).min(buf.len());
        file.read_exact_at(&mut buf[..n], at + from as u64)?;
        // Only magics starting in this piece: one starting in the bytes read ahead is
        // the next piece's.
        let mine = piece.min(n);
        hits.extend(magics_in(&buf[..n]).filter(|&h| h < mine).map(|h| from + h));
        from += mine;
    }
    hits.sort_unstable();
    hits.dedup();
    Ok(hits)
}

/// Where the magics start in `hay` (at `base` of the file), in order, searched window
/// by window. Each window is released before the next is touched: a magic across
/// the boundary is found in a copy of the bytes either side of it.
fn hits_in(hay: &[u8], base: usize, release: &dyn Fn(usize, usize)) -> Vec<usize> {
    const _: () = assert!(bundle::BUNDLE_MAGIC.len() == LONGEST_MAGIC);
    let mut hits = Vec::new();
    let mut from = 0usize;
    while from < hay.len() {
        let end = (base + from) / SEARCH_WINDOW * SEARCH_WINDOW + SEARCH_WINDOW;
        let to = (end - base).min(hay.len());
        let win = &hay[from..to];
        hits.extend(magics_in(win).map(|at| from + at));
        // The seam: what ends this window and starts the next, copied.
        let keep = (to - from).min(LONGEST_MAGIC - 1);
        let mut seam = [0u8; 2 * (LONGEST_MAGIC - 1)];
        seam[..keep].copy_from_slice(&hay[to - keep..to]);
        release(base + from, to - from);
        if to == hay.len() {
            break;
        }
        let next = (hay.len() - to).min(LONGEST_MAGIC - 1);
        seam[keep..keep + next].copy_from_slice(&hay[to..to + next]);
        // Only magics that start in this window and end in the next: the others are
        // found whole in one of them.
        hits.extend(
            magics_in(&seam[..keep + next])
                .filter(|&at| at < keep)
                .map(|at| to - keep + at),
        );
        from = to;
    }
    hits.sort_unstable();
    hits.dedup();
    hits
}

/// Where the magics start in `win`, whole in it, in no order.
fn magics_in(win: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let f = finders();
    // The ELF magic is found by its `ELF` (a 0x7f is common in machine code and
    // would make a poor prefilter), then checked whole.
    let elf = f[0]
        .find_iter(win)
        .filter(|&at| at > 0 && win[at - 1] == 0x7f)
        .map(|at| at - 1);
    let others = f[1..].iter().flat_map(|f| f.find_iter(win));
    elf.chain(others)
}

fn find_at_most(
    data: &[u8],
    ranges: &[Range],
    limit: usize,
    input: &dyn bundle::Input,
) -> (Vec<Embedded>, Option<String>) {
    let mut out = Vec::new();
    for (section, off, size) in ranges {
        let Some(end) = off.checked_add(*size).filter(|e| *e <= data.len() as u64) else {
            continue;
        };
        let (start, end) = (*off as usize, end as usize);
        let hay = &data[start..end];
        // A small section's pages go with the map; a file's are read from it
        // whatever their size (through the map, a section of a few bytes makes the
        // folio around it resident).
        let small = hay.len() < RELEASE_MIN;
        let release = |o: usize, l: usize| {
            if !small {
                input.release(o, l)
            }
        };
        let mut covered = 0usize;
        let mut index = 0usize;
        let mut clean = 0usize;
        let mut ahead = Ahead::default();
        let hits = match input.file() {
            Some((file, at)) => hits_in_file(file, at + start as u64, hay.len()),
            None => Ok(hits_in(hay, start, &release)),
        };
        let hits = match hits {
            Ok(h) => h,
            Err(e) => {
                return (
                    without_overlaps(out),
                    Some(format!("{section}: cannot be read: {e}")),
                );
            }
        };
        // Whether a candidate was read through the map (all of them, without a file).
        let mut mapped = input.file().is_none();
        for at in hits {
            if at < covered {
                continue;
            }
            let offset = (start + at) as u64;
            let found = match input.file() {
                // Read from the file: a code object's headers and metadata with
                // positioned reads, nothing of the map; a bundle (rare) through it.
                Some((file, base)) => match code_object_in_file(file, base + offset, &hay[at..]) {
                    Read::Object(e, touched) => {
                        if let Some((from, to)) = touched {
                            release(start + at + from as usize, (to - from) as usize);
                        }
                        e.map(|e| e.at(offset))
                    }
                    Read::NotElf => {
                        mapped = true;
                        let found = object_at(&hay[at..], offset);
                        release(start + at, hay.len() - at);
                        found
                    }
                },
                None => {
                    let span = (hay, start, &release as &dyn Fn(usize, usize));
                    object_in_map(span, at, (&mut clean, &mut ahead))
                }
            };
            let Some(mut e) = found else {
                continue;
            };
            if out.len() >= limit {
                return (
                    without_overlaps(out),
                    Some(format!(
                        "more than {limit} embedded objects; the rest are not listed"
                    )),
                );
            }
            covered = at + e.size.max(1) as usize;
            e.section = section.clone();
            e.index = index;
            index += 1;
            out.push(e);
        }
        // The rest, and what a false start read far from it (a section header table
        // its header pointed at).
        if mapped {
            release(start, hay.len());
        }
    }
    (without_overlaps(out), None)
}

/// The object at `at` of the section `hay` (at `start` of the file), read through
/// the map: what reading it faulted in leaves the resident set too (the search's
/// windows were released before it), its header or whole code object, with the
/// pages the kernel mapped around them. A section of random data has thousands of
/// false starts: released a step at a time behind the one being read (up to the
/// start of its folio: a release reaches to the next multiple of FAULT_SPAN), not
/// one call each. `clean`: how much of the section is released so far.
fn object_in_map(
    (hay, start, release): (&[u8], usize, &dyn Fn(usize, usize)),
    at: usize,
    (clean, ahead): (&mut usize, &mut Ahead),
) -> Option<Embedded> {
    let span = crate::fsutil::FAULT_SPAN;
    let behind = ((start + at) / span * span).saturating_sub(start);
    if behind >= *clean + RELEASE_STEP {
        release(start + *clean, behind - *clean);
        *clean = behind;
    }
    let far = ahead.reads(start + at, table_reach(&hay[at..]));
    let found = object_at(&hay[at..], (start + at) as u64);
    if far {
        let next = ((start + at) / span + 1) * span - start;
        if next < hay.len() {
            release(start + next, hay.len() - next);
        }
    }
    found
}

/// What a candidate read from its file is.
enum Read {
    /// It starts as an ELF file does: the code object it is, if it is one, and the
    /// bytes of it read through the map (from, to), if any.
    Object(Option<Embedded>, Option<(u64, u64)>),
    /// Another magic (a bundle's): to be read through the map.
    NotElf,
}

/// The candidate at `at` of `file`, whose bytes to the end of its section are
/// `rest` (of the file's map), read as [`object_at`] reads a code object but with
/// positioned reads: its header, section header table, section names and notes are
/// copied from the file, a few KiB, and dropped after it. Through the map, each
/// thread's candidate made the 2 MiB page-cache folio holding it resident
/// ([`crate::fsutil::FAULT_SPAN`]).
fn code_object_in_file(file: &std::fs::File, at: u64, rest: &[u8]) -> Read {
    let cache = object::ReadCache::new(file);
    let (copied, mapped) = (std::cell::Cell::new(0), std::cell::Cell::new(None));
    let whole = FileWindow {
        cache: &cache,
        map: rest,
        at,
        copied: &copied,
        mapped: &mapped,
    };
    let magic = object::ReadRef::read_bytes_at(whole, 0, 4.min(rest.len() as u64));
    if magic != Ok(b"\x7fELF") {
        return Read::NotElf;
    }
    let Some(size) = code_object_size(whole) else {
        return Read::Object(None, mapped.get());
    };
    let co = FileWindow {
        map: &rest[..size as usize],
        ..whole
    };
    let found = code_object_found(co, size);
    Read::Object(found, mapped.get())
}

/// The most of one candidate copied from its file (its headers and notes are a few
/// KiB). Past it, reads are the map's: a false start's header can name thousands
/// of sections over the same bytes, each read a copy (one of the bench's trees
/// held 900 KiB of copies of one such candidate at once).
const CANDIDATE_COPIES: u64 = 256 << 10;

/// In file order, each byte in at most one object: sections of a damaged header
/// table may overlap, and an object must not be counted once per section.
fn without_overlaps(mut found: Vec<Embedded>) -> Vec<Embedded> {
    found.sort_by_key(|e| e.offset);
    let mut end = 0u64;
    found.retain(|e| {
        let keep = e.offset >= end;
        if keep {
            end = e.offset + e.size.max(1);
        }
        keep
    });
    found
}

/// The magics an object starts with, each searched with a SIMD substring finder
/// built once.
fn finders() -> &'static [memchr::memmem::Finder<'static>; 3] {
    static F: std::sync::OnceLock<[memchr::memmem::Finder<'static>; 3]> =
        std::sync::OnceLock::new();
    F.get_or_init(|| {
        [
            memchr::memmem::Finder::new(b"ELF\x02\x01\x01"),
            memchr::memmem::Finder::new(bundle::BUNDLE_MAGIC),
            memchr::memmem::Finder::new(b"CCOB"),
        ]
    })
}

/// The folios of a section ahead of its candidates that reading their section
/// header tables mapped. A header in a data section can say its table is anywhere
/// further on: 1,541 candidates of a generated 48 MiB `.rodata` pointed up to 32 MiB
/// ahead, and kept 10 MiB of it resident until the search moved past. One folio
/// ahead is kept (most tables are near their headers); reading a second one
/// releases everything ahead of the candidate's folio, about 100 releases there.
#[derive(Default)]
struct Ahead {
    /// The one folio ahead mapped, by index in the file.
    folio: Option<usize>,
}

impl Ahead {
    /// Whether everything ahead of the folio of a candidate at `at` (of the file)
    /// should go once it is read, given where its table lies (from it).
    fn reads(&mut self, at: usize, table: Option<(usize, usize)>) -> bool {
        let span = crate::fsutil::FAULT_SPAN;
        let here = at / span;
        self.folio = self.folio.filter(|&f| f > here);
        let Some((off, len)) = table else {
            return false;
        };
        let (first, last) = ((at + off) / span, (at + off + len.max(1) - 1) / span);
        let first = first.max(here + 1);
        if last < first {
            return false;
        }
        match self.folio {
            Some(f) if f == first && last == first => false,
            None if last == first => {
                self.folio = Some(first);
                false
            }
            // A second folio, or a table across folios: all ahead goes.
            _ => {
                self.folio = None;
                true
            }
        }
    }
}

/// Where the section header table of a code object header at the start of `rest`
/// lies (offset from it, length), when its header says it lies inside `rest`.
fn table_reach<'r, R: object::ReadRef<'r>>(rest: R) -> Option<(usize, usize)> {
    if !rest.read_bytes_at(0, 20).is_ok_and(codeobj::is_code_object) {
        return None;
    }
    let hdr = elf::FileHeader64::<LE>::parse(rest).ok()?;
    let e = hdr.endian().ok()?;
    let (shnum, off) = (hdr.e_shnum(e), hdr.e_shoff(e));
    // A table of entries of another size, of more than MAX_SECTIONS or with the count
    // elsewhere (extended numbering) is no code object's: read whole, a false start's
    // table (a byte of its count changed) was MiBs of the data section, every time.
    if shnum > MAX_SECTIONS
        || (shnum == 0 && off != 0)
        || (shnum > 0 && usize::from(hdr.e_shentsize(e)) != size_of::<elf::SectionHeader64<LE>>())
    {
        return None;
    }
    let len = u64::from(shnum) * u64::from(hdr.e_shentsize(e));
    (off.checked_add(len)? <= rest.len().ok()?).then_some((off as usize, len as usize))
}

/// The most sections an embedded code object is read with: loaded code objects
/// have a few dozen. (1,449 of the 8,565 candidates in a generated 48 MiB `.rodata`
/// had a count 300 to 65,535 with a table inside the section: each was up to 4 MiB
/// of reads, through the map past [`CANDIDATE_COPIES`], resident until the candidate
/// was done, two threads at a time.)
const MAX_SECTIONS: u16 = 4096;

/// The object starting at `rest` (found at `offset` of the file), if it is a
/// complete one.
fn object_at(rest: &[u8], offset: u64) -> Option<Embedded> {
    if rest.starts_with(b"\x7fELF") {
        let size = code_object_size(rest)?;
        return code_object_found(&rest[..size as usize], size).map(|e| e.at(offset));
    }
    let mut b = bundle::read_one(rest, 0, 0).ok()?;
    let targets: Vec<EmbeddedTarget> = b
        .device_entries()
        .filter_map(|e| {
            e.id.arch()
                .map(|arch| EmbeddedTarget { arch, size: e.size })
        })
        .collect();
    if targets.is_empty() {
        return None;
    }
    let format = if b.compression == bundle::Compression::None {
        EmbeddedFormat::Bundle
    } else {
        EmbeddedFormat::CompressedBundle
    };
    b.offset = offset;
    Some(Embedded {
        section: String::new(),
        index: 0,
        offset,
        size: b.stored_size,
        format,
        targets,
        bundle: Some(b),
    })
}

/// The code object `co` (its `size` bytes), if it is device code, found at offset 0
/// (the caller places it).
fn code_object_found<'r, R: object::ReadRef<'r>>(co: R, size: u64) -> Option<Embedded> {
    // A code object for no processor (EF_AMDGPU_MACH_NONE) loads nowhere: not
    // device code. Decided from the header, before the metadata is read.
    let hdr = elf::FileHeader64::<LE>::parse(co).ok()?;
    let e = hdr.endian().ok()?;
    bundle::target::target_from_elf_flags(hdr.e_flags(e), hdr.e_ident().abi_version)?;
    // Read as `codeobj::read` reads it (the same failures), but for the kernels'
    // sizes: only the target is kept.
    let target = codeobj::read_in(co, false).ok()?.target?;
    Some(Embedded {
        section: String::new(),
        index: 0,
        offset: 0,
        size,
        format: EmbeddedFormat::CodeObject,
        targets: vec![EmbeddedTarget { arch: target, size }],
        bundle: None,
    })
}

impl Embedded {
    fn at(self, offset: u64) -> Embedded {
        Embedded { offset, ..self }
    }
}

/// The bytes an AMDGPU code object at the start of `rest` spans: to the end of its
/// last section or header table; `None` unless it is a complete 64-bit LE code object.
fn code_object_size<'r, R: object::ReadRef<'r>>(rest: R) -> Option<u64> {
    let (shoff, shlen) = table_reach(rest)?;
    let hdr = elf::FileHeader64::<LE>::parse(rest).ok()?;
    let e = hdr.endian().ok()?;
    let len = rest.len().ok()?;
    let mut end = 64u64.max((shoff + shlen) as u64);
    let phoff = hdr.e_phoff(e);
    let phnum = u64::from(hdr.e_phnum(e));
    end = end.max(phoff.checked_add(phnum.checked_mul(u64::from(hdr.e_phentsize(e)))?)?);
    if end > len {
        return None;
    }
    for s in hdr.section_headers(e, rest).ok()? {
        if s.sh_type(e) != elf::SHT_NOBITS {
            end = end.max(s.sh_offset(e).checked_add(s.sh_size(e))?);
        }
    }
    (end <= len).then_some(end)
}

mod window;
use window::FileWindow;

#[cfg(test)]
mod tests;
