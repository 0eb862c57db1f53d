//! Scanning an install (or build) tree: every file classified, every bundle listed.
//!
//! The walk never follows symlinks (they are reported with their target text), counts
//! hard links once, and never opens fifos, sockets or devices. Regular files are
//! inspected in parallel (rayon) from an mmap, reading only headers and entry tables.
//! A file that cannot be read or parsed becomes a diagnostic; the scan goes on.

//!
//! `report.rs` holds what a scan finds (the report types, serialised as `--json`).

mod links;
mod report;
mod stream;
mod tally;
mod thin;
mod walk;
mod wheel;

mod event;
pub use event::ScanEvent;
pub use report::*;
pub use stream::scan_each;
use tally::Tally;

use crate::bundle::{self};
use crate::coff;
use crate::elf::{self, ElfContent};
use crate::error::{Error, Result};
use crate::event::EventSink;
use crate::fsutil::{map_open_file, open_regular};
use crate::kerneldb::{self, Database};
use rayon::prelude::*;
use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::kpack::archive::MAGIC as KPACK_MAGIC;

/// Options of a scan.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    /// Threads to use (0 = rayon's default).
    pub threads: usize,
    /// Kernel-database handlers to try, in precedence order; `None` = all of them.
    /// (The artifact split takes only the handlers it is given, like ROCm's build.)
    pub databases: Option<Vec<Database>>,
    /// Search every byte of every file for embedded device code, not only binaries'
    /// data sections (`--deep`).
    pub deep: bool,
}

/// The report a listed path starts as, from what its `lstat` said: a regular file
/// is `Opaque` until inspected, a symlink's target is read by the inspection, and a
/// fifo, socket or device is reported whole here (it is never opened). The scan
/// fills these reports in place: a tree of 40,000 files holds one 72-byte report
/// each, not a listing entry beside it.
fn listed(rel: String, meta: &Metadata) -> FileReport {
    let ft = meta.file_type();
    let mode = meta.mode() & 0o7777;
    let special = if ft.is_file() || ft.is_symlink() {
        None
    } else if ft.is_fifo() {
        Some("fifo")
    } else if ft.is_socket() {
        Some("socket")
    } else if ft.is_char_device() {
        Some("char_device")
    } else if ft.is_block_device() {
        Some("block_device")
    } else {
        Some("unknown")
    };
    let mut r = match special {
        Some(t) => {
            let mut r = FileReport::new(rel, FileKind::Other, 0, mode);
            r.file_type = Some(t);
            r.problems.push(format!("special file ({t}): not opened"));
            r
        }
        None if ft.is_symlink() => FileReport::new(rel, FileKind::Symlink, meta.len(), mode),
        None => FileReport::new(rel, FileKind::Opaque, meta.len(), mode),
    };
    r.identity = Some((meta.dev(), meta.ino()));
    r
}

/// A listed regular file not yet inspected.
fn is_listed_file(r: &FileReport) -> bool {
    r.kind == FileKind::Opaque
}

/// A relative path's exact text ([`crate::relpath`]), or its lossy spelling when it
/// cannot have one (only for messages: such a file is refused, never addressed).
fn rel_string(p: &Path) -> String {
    crate::relpath::encode(p).unwrap_or_else(|_| {
        p.components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/")
    })
}

/// Scan a directory tree, or a single file.
pub fn scan(
    root: &Path,
    opts: &ScanOptions,
    sink: &dyn EventSink<ScanEvent>,
) -> Result<TreeReport> {
    let root_meta = std::fs::metadata(root).map_err(|e| Error::io(root, e))?;
    if root_meta.is_file() && crate::wheel::is_wheel_path(root) {
        return wheel::scan_wheel(root, opts, sink);
    }
    let Listing {
        mut reports,
        linked,
        diagnostics,
        directories,
    } = if root_meta.is_dir() {
        list_tree(root, sink)
    } else {
        let name = root
            .file_name()
            .map_or_else(|| root.display().to_string(), |n| rel_string(Path::new(n)));
        let meta = std::fs::symlink_metadata(root).map_err(|e| Error::io(root, e))?;
        Listing {
            reports: vec![listed(name, &meta)],
            ..Listing::default()
        }
    };
    reports.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    reports.shrink_to_fit();
    // A file given alone is its own path; a tree's entries are below the root.
    let abs = |rel: &str| -> PathBuf {
        if root_meta.is_dir() {
            root.join(crate::relpath::to_path(rel))
        } else {
            root.to_path_buf()
        }
    };

    // Hard links: the first path (in sorted order) of an inode is inspected, later
    // ones name it.
    let link_of = hard_links(&reports, &linked);
    let (files, bytes) = (reports.iter().enumerate())
        .filter(|(i, r)| is_listed_file(r) && !link_of.contains_key(i))
        .fold((0u64, 0u64), |(n, b), (_, r)| (n + 1, b + r.size));
    sink.event(ScanEvent::Discovered { files, bytes });

    let handlers: &[Database] = opts.databases.as_deref().unwrap_or(&Database::ALL);
    // Thin archives' members must lie in the scanned directory; an archive given
    // alone has its members followed where they lead, as the linker does.
    let boundary = root_meta.is_dir().then_some(root);
    let first_names: HashMap<usize, String> = (link_of.iter())
        .map(|(&i, &first)| (i, reports[first].path.clone()))
        .collect();
    let work = |(i, r): (usize, &mut FileReport)| {
        let counted = is_listed_file(r) && !link_of.contains_key(&i);
        match first_names.get(&i) {
            Some(first) => r.hard_link_of = Some(first.clone()),
            None => inspect_listed(r, &abs(&r.path), handlers, opts.deep, boundary),
        }
        sink.event(ScanEvent::Inspected(Box::new(r.clone())));
        if counted {
            sink.event(ScanEvent::FileDone {
                path: PathBuf::from(&r.path),
                bytes: r.size,
            });
        }
    };
    if opts.threads == 1 {
        reports.iter_mut().enumerate().for_each(work);
    } else if opts.threads > 1 {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(opts.threads)
            .build()
            .map_err(|e| Error::Internal(format!("cannot start {} threads: {e}", opts.threads)))?;
        pool.install(|| reports.par_iter_mut().enumerate().for_each(work));
    } else {
        reports.par_iter_mut().enumerate().for_each(work);
    }
    // A hard link has the class of the file it links to.
    for (&i, &first) in &link_of {
        reports[i].kind = reports[first].kind;
    }
    Ok(build_report(
        root.display().to_string(),
        reports,
        diagnostics,
        directories,
    ))
}

/// What a walk of a directory found: its files (not sorted, each a report to fill
/// in), the identities of files with more than one name, what could not be read,
/// and how many directories.
#[derive(Default)]
struct Listing {
    reports: Vec<FileReport>,
    linked: std::collections::HashSet<(u64, u64)>,
    diagnostics: Vec<Diagnostic>,
    directories: u64,
}

/// Walk `root` without following symlinks, each file listed as it is found.
fn list_tree(root: &Path, sink: &dyn EventSink<ScanEvent>) -> Listing {
    let mut l = Listing::default();
    let walk = walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .min_depth(1);
    for item in walk {
        match walked(root, walk::Item::from(item)) {
            Walked::Directory => l.directories += 1,
            Walked::Problem(d) => l.diagnostics.push(d),
            Walked::Entry(r, linked) => {
                sink.event(ScanEvent::Listed {
                    path: r.path.clone(),
                    bytes: r.size,
                });
                if linked && let Some(id) = r.identity {
                    l.linked.insert(id);
                }
                l.reports.push(r)
            }
        }
    }
    l
}

/// What the walk makes of one item.
enum Walked {
    /// A directory (counted, its entries walked).
    Directory,
    /// What cannot be read or addressed.
    Problem(Diagnostic),
    /// An entry listed ([`listed`]), and whether it is a regular file with more than
    /// one name.
    Entry(FileReport, bool),
}

fn walked(root: &Path, item: walk::Item) -> Walked {
    let (path, meta) = match item {
        walk::Item::Entry(path, meta) => (path, meta),
        walk::Item::Unreadable(path, e) => {
            let path = path
                .map(|p| rel_string(p.strip_prefix(root).unwrap_or(&p)))
                .unwrap_or_default();
            return Walked::Problem(Diagnostic {
                path,
                severity: Severity::Error,
                message: format!("cannot read directory: {e}"),
                unreadable: true,
            });
        }
    };
    let rel_path = path.strip_prefix(root).unwrap_or(&path);
    // Reports, ledgers and archive keys name files by text: a name that is not
    // UTF-8 is carried escaped, exactly; one that cannot be told from such a
    // spelling is not addressed at all, and said.
    let rel = match crate::relpath::encode(rel_path) {
        Ok(rel) => rel,
        Err(why) => {
            return Walked::Problem(Diagnostic {
                path: rel_string(rel_path),
                severity: Severity::Error,
                message: format!("{why}; not read"),
                unreadable: true,
            });
        }
    };
    match meta {
        Ok(meta) if meta.is_dir() => Walked::Directory,
        Ok(meta) => {
            let linked = meta.is_file() && meta.nlink() > 1;
            Walked::Entry(listed(rel, &meta), linked)
        }
        Err(e) => Walked::Problem(Diagnostic {
            path: rel,
            severity: Severity::Error,
            message: format!("cannot stat: {e}"),
            unreadable: true,
        }),
    }
}

/// For each later name of a hard-linked file (`reports` sorted), the index of its
/// first name. Only files whose identity is in `linked` can be one.
fn hard_links(
    reports: &[FileReport],
    linked: &std::collections::HashSet<(u64, u64)>,
) -> HashMap<usize, usize> {
    let mut first_of_inode: HashMap<(u64, u64), usize> = HashMap::new();
    let mut link_of = HashMap::new();
    if linked.is_empty() {
        return link_of;
    }
    for (i, r) in reports.iter().enumerate() {
        let Some(id) = r
            .identity
            .filter(|id| is_listed_file(r) && linked.contains(id))
        else {
            continue;
        };
        match first_of_inode.get(&id) {
            Some(&first) => {
                link_of.insert(i, first);
            }
            None => {
                first_of_inode.insert(id, i);
            }
        }
    }
    link_of
}

/// A report from entries inspected so far (a scan in progress): sorted by path,
/// with totals and per-arch figures over those entries.
pub fn partial_report(root: &str, mut files: Vec<FileReport>) -> TreeReport {
    files.sort_by(|a, b| a.path.cmp(&b.path));
    build_report(root.to_string(), files, Vec::new(), 0)
}

fn build_report(
    root: String,
    files: Vec<FileReport>,
    diagnostics: Vec<Diagnostic>,
    directories: u64,
) -> TreeReport {
    let mut tally = Tally::new(diagnostics, directories);
    files.iter().for_each(|f| tally.add(f));
    tally.finish(root, files)
}

/// Fill in a listed report: a symlink's target, a regular file's inspection (its
/// path moved into the new report, its identity kept).
fn inspect_listed(
    r: &mut FileReport,
    abs: &Path,
    handlers: &[Database],
    deep: bool,
    boundary: Option<&Path>,
) {
    match r.kind {
        FileKind::Symlink => match std::fs::read_link(abs) {
            Ok(t) => {
                let b = t.as_os_str().as_encoded_bytes();
                r.target = Some(
                    crate::relpath::encode_bytes(b)
                        .unwrap_or_else(|_| String::from_utf8_lossy(b).into_owned()),
                )
            }
            Err(err) => r.problems.push(format!("cannot read link: {err}")),
        },
        FileKind::Opaque => {
            let (rel, identity) = (std::mem::take(&mut r.path), r.identity);
            *r = inspect_owned(abs, rel, r.size, r.mode, handlers, (deep, boundary));
            r.identity = identity;
        }
        // A special file is reported whole when listed.
        _ => {}
    }
}

/// Inspect one regular file (`rel` is the name used in the report).
pub fn inspect_file(abs: &Path, rel: &str, size: u64, mode: u32) -> FileReport {
    let dir = abs.parent().unwrap_or(Path::new("."));
    inspect_file_with(abs, rel, size, mode, &Database::ALL, (false, Some(dir)))
}

/// [`inspect_file`] with the given kernel-database handlers, `deep` search, and the
/// directory a thin archive's members must lie in (`None`: anywhere).
pub fn inspect_file_with(
    abs: &Path,
    rel: &str,
    size: u64,
    mode: u32,
    handlers: &[Database],
    (deep, boundary): (bool, Option<&Path>),
) -> FileReport {
    inspect_owned(abs, rel.to_string(), size, mode, handlers, (deep, boundary))
}

/// [`inspect_file_with`], the path moved into the report.
fn inspect_owned(
    abs: &Path,
    rel: String,
    size: u64,
    mode: u32,
    handlers: &[Database],
    (deep, boundary): (bool, Option<&Path>),
) -> FileReport {
    let db = kerneldb::classify_with(&rel, handlers);
    let wheel_name = rel.ends_with(".whl");
    let mut r = FileReport::new(rel, FileKind::Opaque, size, mode);
    if let Some(d) = &db {
        r.set_database(d);
    }
    let file = match open_regular(abs) {
        Ok(f) => f,
        Err(e) => {
            r.problems.push(format!("cannot read: {e}"));
            return r;
        }
    };
    // Sniff the magic with one small read: most files of a tree (headers, docs,
    // data) are settled by it and never mapped.
    let mut head = [0u8; 64];
    let n = match read_head(&file, &mut head) {
        Ok(n) => n,
        Err(e) => {
            r.problems.push(format!("cannot read: {e}"));
            return r;
        }
    };
    if db.is_none() && crate::zip::is_zip(&head[..n]) && wheel_name {
        r.kind = FileKind::Wheel;
        match crate::wheel::Wheel::open(abs) {
            Ok(w) => r.wheel = Some(Box::new(w.info)),
            Err(e) => r.problems.push(e.to_string()),
        }
        return r;
    }
    if n == 0 || !(deep || worth_mapping(&head[..n])) {
        return r;
    }
    if head.starts_with(KPACK_MAGIC) {
        // Archives can be large: read their index with positioned reads instead of
        // mapping them (a mapped frame walk faults in far more than the lengths).
        r.kind = FileKind::Kpack;
        match crate::kpack::archive::parse_index_file(&file) {
            Ok(idx) => r.kpack = Some(Box::new(kpack_summary(idx))),
            Err(e) => r.problems.push(e.to_string()),
        }
        return r;
    }
    match map_open_file(&file) {
        Ok(map) => {
            crate::mapped::note(&map, abs);
            // Its headers and data sections are read with positioned reads: one
            // byte read through the map makes the 2 MiB folio around it resident
            // (see `bundle::Input`). What the map is read for (bundle tables, the
            // embedded objects found) leaves the resident set as it goes when the
            // file is large: a release costs a TLB flush on every core, not worth it
            // for a small one, whose pages go with its map.
            let input = Positioned {
                section: bundle::FileSection {
                    map: &map,
                    file: &file,
                    at: 0,
                },
                release: map.len() > 2 * crate::fsutil::FAULT_SPAN,
            };
            let release = |o: usize, l: usize| bundle::Input::release(&input, o, l);
            let reads = crate::fsutil::SmallReads::new(&file, &map);
            classify_releasing(&mut r, (&reads, &map, Some(&file)), db.is_some(), &release);
            if r.kind == FileKind::Opaque && db.is_none() && head[..n].starts_with(b"!<thin>\n") {
                let names = elf::inspect_static_archive(&map).map(|a| a.thin);
                thin::resolve(&mut r, &names.unwrap_or_default(), abs, boundary);
            }
            // What classifying read through the map (bundle tables, an archive's
            // members) goes before the search, which reads the data sections from
            // the file and only its candidates through the map.
            release(0, map.len());
            find_embedded_in(&mut r, (&reads, &map), deep, &input);
            if let Some(now) = crate::mapped::read_past_a_shrink(&map, &file) {
                r.problems.push(format!(
                    "the file changed while being read (it shrank from {} to {now} bytes)",
                    map.len()
                ));
            }
        }
        Err(e) => r.problems.push(format!("cannot map: {e}")),
    }
    r
}

/// A mapped file read with positioned reads, its map released only when `release`.
struct Positioned<'a> {
    section: bundle::FileSection<'a>,
    release: bool,
}

impl bundle::Input for Positioned<'_> {
    fn release(&self, offset: usize, len: usize) {
        if self.release {
            self.section.release(offset, len)
        }
    }

    fn file(&self) -> Option<(&File, u64)> {
        self.section.file()
    }
}

/// Device code in the file's data outside what HIP reads (`embedded`): in the data
/// sections of binaries, or with `deep` anywhere in a file that is not itself a
/// bundle, code object or archive. A binary without HIP device code that has some
/// becomes `embedded_code`. What is read of `data` is handed to `input`'s release
/// (offset, length), and large sections are read from its file when it names one
/// (`crate::embedded::find_releasing`).
pub fn find_embedded(r: &mut FileReport, data: &[u8], deep: bool, input: &dyn bundle::Input) {
    find_embedded_in(r, (data, data), deep, input)
}

/// [`find_embedded`] with the headers read from `read` (see [`classify_releasing`]).
fn find_embedded_in<'r, R: object::ReadRef<'r>>(
    r: &mut FileReport,
    (read, data): (R, &[u8]),
    deep: bool,
    input: &dyn bundle::Input,
) {
    if matches!(
        r.kind,
        FileKind::Bundle | FileKind::CodeObject | FileKind::Kpack | FileKind::Wheel
    ) {
        return;
    }
    let (found, note) = if elf::is_static_archive(read.read_bytes_at(0, 8).unwrap_or_default()) {
        crate::embedded::find_in_archive(data)
    } else {
        let ranges = if deep {
            crate::embedded::deep_ranges(data)
        } else {
            crate::embedded::data_ranges_in(read, data)
        };
        crate::embedded::find_releasing(data, &ranges, input)
    };
    // (Written only when there is something: a write gives the report its details.)
    if let Some(note) = note {
        r.problems.push(note);
    }
    if found.is_empty() {
        return;
    }
    if found.iter().any(|e| e.section.starts_with("PT_LOAD[")) {
        r.problems.push(
            "unsupported: no section headers (as `llvm-objcopy --strip-sections` leaves a \
             binary): its device code, found in the loaded segments, is listed but cannot \
             be packed"
                .into(),
        );
    }
    if r.kind == FileKind::Opaque {
        r.kind = FileKind::EmbeddedCode;
    }
    r.embedded = found;
}

fn read_head(file: &File, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Whether a file starting with `head` can be anything but opaque.
pub fn worth_mapping(head: &[u8]) -> bool {
    elf::is_elf(head)
        || elf::is_static_archive(head)
        || head.starts_with(&bundle::BUNDLE_MAGIC[..head.len().min(24)])
        || head.starts_with(b"CCOB")
        || head.starts_with(KPACK_MAGIC)
        || coff::is_pe(head)
}

/// Classify a file from its bytes (exposed for the fuzz targets and tests).
pub fn classify_bytes(r: &mut FileReport, data: &[u8], is_db: bool) {
    classify_releasing(r, (data, data, None), is_db, &|_, _| {})
}

/// [`classify_bytes`] of a file map `data`, an ELF's headers, wrappers and marker
/// read from `read` (`elf::inspect_in`), its bundles from `file` (the file `data`
/// maps) with positioned reads when given, else from `data`, handing what it has
/// read to `release` (offset, length) as it goes.
fn classify_releasing<'r, R: object::ReadRef<'r>>(
    r: &mut FileReport,
    (read, data, file): (R, &[u8], Option<&File>),
    is_db: bool,
    release: &dyn Fn(usize, usize),
) {
    if elf::is_elf(read.read_bytes_at(0, 4).unwrap_or_default()) {
        match elf::inspect_in(read, (data, file), release) {
            Ok(ElfContent::Fat(fat)) => {
                if is_db {
                    r.bundles = fat.bundles.iter().map(BundleReport::from_info).collect();
                } else {
                    r.set_fat(&fat);
                }
            }
            Ok(ElfContent::CodeObject(t)) => {
                if !is_db {
                    r.kind = FileKind::CodeObject;
                    r.arch = t.as_ref().map(ToString::to_string);
                    r.fatbin_bytes = r.size;
                }
                if t.is_none() {
                    r.problems
                        .push("AMDGPU code object for an unknown processor".into());
                }
            }
            Ok(ElfContent::Plain(kind)) => r.elf_kind = Some(kind),
            Ok(ElfContent::Unsupported(why)) => r.problems.push(why),
            Err(e) => r.problems.push(e.to_string()),
        }
    } else if elf::is_static_archive(data) {
        match elf::inspect_static_archive(data) {
            Ok(ar) => {
                r.problems.extend(ar.problems);
                if !ar.members.is_empty() && !is_db {
                    r.container = Some(Container::Ar);
                    r.kind = if ar.members.iter().all(|m| m.fat.host_only) {
                        FileKind::HostOnlyBinary
                    } else {
                        FileKind::FatBinary
                    };
                    r.fatbin_bytes = ar.members.iter().map(|m| m.fat.fatbin_bytes).sum();
                    r.host_bytes = Some(r.size.saturating_sub(r.fatbin_bytes));
                    for m in ar.members {
                        r.problems.extend(
                            m.fat
                                .problems
                                .iter()
                                .map(|p| format!("member {}: {p}", m.name)),
                        );
                        r.members.push(MemberReport {
                            name: m.name,
                            size: m.size,
                            bundles: m.fat.bundles.iter().map(BundleReport::from_info).collect(),
                            file: None,
                            resolved: None,
                        });
                    }
                }
            }
            Err(e) => r.problems.push(e.to_string()),
        }
    } else if bundle::looks_like_bundle(data) {
        if !is_db {
            r.kind = FileKind::Bundle;
            r.fatbin_bytes = r.size;
        }
        match bundle::walk_section(data) {
            Ok(b) => r.bundles = b.iter().map(BundleReport::from_info).collect(),
            Err(e) => r.problems.push(e.to_string()),
        }
    } else if data.starts_with(KPACK_MAGIC) {
        r.kind = FileKind::Kpack;
        match crate::kpack::archive::parse_index(data) {
            Ok(idx) => r.kpack = Some(Box::new(kpack_summary(idx))),
            Err(e) => r.problems.push(e.to_string()),
        }
    } else if coff::is_pe(data) && data.len() >= 0x40 {
        // Many files start with "MZ" by chance; only a real PE header counts.
        let lfanew = u32::from_le_bytes([data[0x3c], data[0x3d], data[0x3e], data[0x3f]]) as usize;
        if data.get(lfanew..lfanew + 4) == Some(b"PE\0\0") {
            match coff::inspect(data) {
                Ok(Some(pe)) if !is_db => {
                    r.container = Some(Container::Pe);
                    r.kind = if pe.host_only {
                        FileKind::HostOnlyBinary
                    } else {
                        FileKind::FatBinary
                    };
                    r.fatbin_bytes = pe.fatbin_bytes;
                    r.host_bytes = Some(r.size.saturating_sub(pe.fatbin_bytes));
                    r.bundles = pe.bundles.iter().map(BundleReport::from_info).collect();
                    r.marker = pe.marker;
                    r.wrappers = pe.wrappers;
                    r.problems.extend(pe.problems);
                }
                // A PE image without HIP code (it may still hold embedded code).
                Ok(_) => r.container = Some(Container::Pe),
                Err(e) => r.problems.push(e.to_string()),
            }
        }
    }
}
