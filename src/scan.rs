//! Scanning an install (or build) tree: every file classified, every bundle listed.
//!
//! The walk never follows symlinks (they are reported with their target text), counts
//! hard links once, and never opens fifos, sockets or devices. Regular files are
//! inspected in parallel (rayon) from an mmap, reading only headers and entry tables.
//! A file that cannot be read or parsed becomes a diagnostic; the scan goes on.

use crate::bundle::{self, BundleInfo, Compression};
use crate::coff;
use crate::elf::{self, ElfContent, ElfKind, FatBinary, WrapperInfo};
use crate::error::{Error, Result};
use crate::event::{EventSink, ScanEvent};
use crate::fsutil::{map_open_file, open_regular};
use crate::kerneldb::{self, Database, Rule};
use crate::kpack::Marker;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, Metadata};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::kpack::archive::MAGIC as KPACK_MAGIC;

/// The class of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// ELF executable, shared library, object or static archive with device code, or
    /// a PE DLL with `.hip_fat`.
    FatBinary,
    /// A binary already rewritten by kpack (device code moved to archives).
    HostOnlyBinary,
    /// A standalone offload bundle file (`*.co`, `*.hsaco`…).
    Bundle,
    /// A per-arch kernel-database file (Tensile, MIOpen, CK, AOTriton, … see `kerneldb`).
    KernelDatabase,
    /// A `.kpack` archive.
    Kpack,
    /// A Python wheel (`.whl`): open it to see its members.
    Wheel,
    /// A raw AMDGPU code object (ELF, `e_machine` 224).
    CodeObject,
    /// Anything else that is a regular file.
    Opaque,
    /// A symbolic link (never followed).
    Symlink,
    /// A fifo, socket or device (never opened).
    Other,
}

impl FileKind {
    /// All kinds, in display order.
    pub const ALL: [FileKind; 10] = [
        FileKind::FatBinary,
        FileKind::HostOnlyBinary,
        FileKind::Bundle,
        FileKind::KernelDatabase,
        FileKind::Kpack,
        FileKind::Wheel,
        FileKind::CodeObject,
        FileKind::Opaque,
        FileKind::Symlink,
        FileKind::Other,
    ];

    /// The JSON name (`fat_binary`, …).
    pub fn name(self) -> &'static str {
        match self {
            FileKind::FatBinary => "fat_binary",
            FileKind::HostOnlyBinary => "host_only_binary",
            FileKind::Bundle => "bundle",
            FileKind::KernelDatabase => "kernel_database",
            FileKind::Kpack => "kpack",
            FileKind::Wheel => "wheel",
            FileKind::CodeObject => "code_object",
            FileKind::Opaque => "opaque",
            FileKind::Symlink => "symlink",
            FileKind::Other => "other",
        }
    }
}

/// One device target of a bundle, as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetReport {
    /// Entry ID exactly as stored.
    pub triple: String,
    /// Target ID with feature flags (`gfx90a:xnack+`).
    pub arch: String,
    /// Uncompressed code-object size.
    pub size: u64,
    /// Compressed bytes attributed to it (its share of the CCOB; `size` if uncompressed).
    pub compressed_size: u64,
}

/// One bundle (TU), as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BundleReport {
    /// TU index (position in the section).
    pub index: usize,
    /// `none`, `zstd`, `zlib`.
    pub compression: Compression,
    /// CCOB version for compressed bundles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ccob_version: Option<u16>,
    /// Offset within the section.
    pub offset: u64,
    /// Bytes occupied in the section.
    pub stored_size: u64,
    /// Uncompressed bundle size.
    pub uncompressed_size: u64,
    /// The host entry's ID, if present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_triple: Option<String>,
    /// Device targets in descriptor order.
    pub targets: Vec<TargetReport>,
}

impl BundleReport {
    /// Report form of a parsed bundle.
    pub fn from_info(b: &BundleInfo) -> BundleReport {
        BundleReport {
            index: b.index,
            compression: b.compression,
            ccob_version: b.ccob_version,
            offset: b.offset,
            stored_size: b.stored_size,
            uncompressed_size: b.uncompressed_size,
            host_triple: b
                .entries
                .iter()
                .find(|e| e.id.is_host())
                .map(|e| e.id.triple.clone()),
            targets: b
                .device_entries()
                .map(|e| TargetReport {
                    triple: e.id.triple.clone(),
                    arch: e.id.arch().unwrap_or_else(|| e.id.triple.clone()),
                    size: e.size,
                    compressed_size: b.apportioned_size(e),
                })
                .collect(),
        }
    }
}

/// A static-archive member with device code.
#[derive(Debug, Clone, Serialize)]
pub struct MemberReport {
    /// Member name.
    pub name: String,
    /// Member size.
    pub size: u64,
    /// Its bundles.
    pub bundles: Vec<BundleReport>,
}

/// One entry of the tree.
#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    /// Path relative to the scanned root, `/`-separated (the file name for a single file).
    pub path: String,
    /// Class.
    pub kind: FileKind,
    /// Size in bytes (of the link itself for symlinks).
    pub size: u64,
    /// Unix permission bits.
    pub mode: u32,
    /// ELF type, for ELF binaries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elf_kind: Option<ElfKind>,
    /// `pe` for PE images, `ar` for static archives.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<&'static str>,
    /// Device-code bytes in the file.
    #[serde(skip_serializing_if = "is_zero")]
    pub device_bytes: u64,
    /// Host bytes (size − device bytes) for binaries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_bytes: Option<u64>,
    /// Bundles, for fat binaries and bundle files (and database files that are bundles).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bundles: Vec<BundleReport>,
    /// Static-archive members with device code.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberReport>,
    /// Wrapper records (`.hipFatBinSegment`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub wrappers: Vec<WrapperInfo>,
    /// `.hip_fatbin` section placement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fatbin: Option<elf::SectionSpan>,
    /// Marker of a host-only binary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub marker: Option<Marker>,
    /// `-fgpu-rdc` object (device bitcode sections).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub rdc_object: bool,
    /// Kernel-database library.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<Database>,
    /// What the database handler read from the path (`gfx90a-xnack+`, `gfx12_0`);
    /// `arch` is its base arch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_key: Option<String>,
    /// The handler rule that attributed the database file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_rule: Option<Rule>,
    /// Arch of a kernel-database file or raw code object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    /// Target text of a symlink.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// For a hard link seen before: the first path with the same inode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hard_link_of: Option<String>,
    /// `fifo`, `socket`, `char_device`, `block_device` for kind `other`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_type: Option<&'static str>,
    /// Summary of a `.kpack` archive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kpack: Option<KpackSummary>,
    /// Identity of a Python wheel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wheel: Option<crate::wheel::WheelInfo>,
    /// For a member of a scanned wheel: the bytes it occupies in the zip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored_size: Option<u64>,
    /// Problems found in this file.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// What the scan reports of a `.kpack` archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KpackSummary {
    /// Group name.
    pub group_name: String,
    /// Family.
    pub gfx_arch_family: String,
    /// Arches served.
    pub gfx_arches: Vec<String>,
    /// `none` or `zstd-per-kernel`.
    pub compression_scheme: &'static str,
    /// Number of kernels.
    pub kernels: u64,
    /// Sum of kernel sizes.
    pub raw_bytes: u64,
}

fn kpack_summary(idx: crate::kpack::archive::ArchiveIndex) -> KpackSummary {
    KpackSummary {
        compression_scheme: idx.compression_scheme.name(),
        kernels: idx.kernels.len() as u64,
        raw_bytes: idx.kernels.iter().map(|k| k.size).sum(),
        group_name: idx.meta.group_name,
        gfx_arch_family: idx.meta.gfx_arch_family,
        gfx_arches: idx.meta.gfx_arches,
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl FileReport {
    /// A report with only the basics filled in (the rest empty).
    pub fn new(path: String, kind: FileKind, size: u64, mode: u32) -> Self {
        FileReport {
            path,
            kind,
            size,
            mode,
            elf_kind: None,
            container: None,
            device_bytes: 0,
            host_bytes: None,
            bundles: Vec::new(),
            members: Vec::new(),
            wrappers: Vec::new(),
            fatbin: None,
            marker: None,
            rdc_object: false,
            database: None,
            database_key: None,
            database_rule: None,
            arch: None,
            target: None,
            hard_link_of: None,
            file_type: None,
            kpack: None,
            wheel: None,
            stored_size: None,
            problems: Vec::new(),
        }
    }

    /// An empty report for bytes that did not come from a tree (fuzzing, tests).
    pub fn for_bytes(name: &str, size: u64) -> Self {
        FileReport::new(name.to_string(), FileKind::Opaque, size, 0o644)
    }

    /// Every bundle of the file, members included.
    pub fn all_bundles(&self) -> impl Iterator<Item = &BundleReport> {
        self.bundles
            .iter()
            .chain(self.members.iter().flat_map(|m| m.bundles.iter()))
    }

    /// Whether a problem of this file is an error (it could not be read or is
    /// malformed), not a note on something unsupported or a special file.
    pub fn is_damaged(&self) -> bool {
        self.kind != FileKind::Other && self.problems.iter().any(|p| !p.starts_with("unsupported"))
    }

    /// Mark the file as a kernel-database file as a handler attributed it.
    pub fn set_database(&mut self, d: &kerneldb::DatabaseFile) {
        self.kind = FileKind::KernelDatabase;
        self.database = Some(d.database);
        self.arch = Some(d.arch.clone());
        self.database_key = Some(d.key.clone());
        self.database_rule = Some(d.rule);
    }

    fn set_fat(&mut self, fat: &FatBinary) {
        self.kind = if fat.host_only {
            FileKind::HostOnlyBinary
        } else {
            FileKind::FatBinary
        };
        self.elf_kind = Some(fat.elf_kind);
        self.device_bytes = fat.device_bytes;
        self.host_bytes = Some(self.size.saturating_sub(fat.device_bytes));
        self.bundles = fat.bundles.iter().map(BundleReport::from_info).collect();
        self.wrappers = fat.wrappers.clone();
        self.fatbin = fat.fatbin.clone();
        self.marker = fat.marker.clone();
        self.rdc_object = fat.rdc_object;
        self.problems.extend(fat.problems.iter().cloned());
    }
}

/// Severity of a diagnostic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Something could not be read or is malformed.
    Error,
    /// Something was skipped or looks odd.
    Warning,
}

/// A problem with one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Path relative to the root.
    pub path: String,
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong.
    pub message: String,
}

/// Count and bytes of one class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KindTotal {
    /// Number of files.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Device bytes of one arch over the tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ArchTotal {
    /// Uncompressed code-object bytes in bundles and raw code objects.
    pub raw: u64,
    /// Bytes they occupy on disk (compressed share for CCOBs).
    pub compressed: u64,
    /// Number of code objects.
    pub code_objects: u64,
    /// Bytes of kernel-database files attributed to this arch (name-based, no features).
    pub kernel_database: u64,
}

/// Totals over the tree.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    /// Entries listed (all kinds).
    pub entries: u64,
    /// Regular-file bytes (hard links once).
    pub bytes: u64,
    /// Device-code bytes in binaries and bundle files.
    pub device_bytes: u64,
    /// Directories seen (the root excluded).
    pub directories: u64,
    /// Per class.
    pub by_kind: BTreeMap<FileKind, KindTotal>,
}

/// The result of a scan.
#[derive(Debug, Clone, Serialize)]
pub struct TreeReport {
    /// The scanned path as given.
    pub root: String,
    /// Every entry, sorted by path.
    pub files: Vec<FileReport>,
    /// Arch → total uncompressed device bytes (bundles and code objects).
    pub archs: BTreeMap<String, u64>,
    /// Arch → detailed totals.
    pub arch_totals: BTreeMap<String, ArchTotal>,
    /// Totals.
    pub totals: Totals,
    /// Problems, sorted by path.
    pub diagnostics: Vec<Diagnostic>,
    /// When the scanned path is a Python wheel: its identity (the files are its members).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wheel: Option<crate::wheel::WheelInfo>,
}

/// Options of a scan.
#[derive(Debug, Clone, Default)]
pub struct ScanOptions {
    /// Threads to use (0 = rayon's default).
    pub threads: usize,
    /// Kernel-database handlers to try, in precedence order; `None` = all of them.
    /// (The artifact split takes only the handlers it is given, like ROCm's build.)
    pub databases: Option<Vec<Database>>,
}

struct Entry {
    rel: String,
    abs: PathBuf,
    meta: Metadata,
}

fn rel_string(p: &Path) -> String {
    p.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Scan a directory tree, or a single file.
pub fn scan(
    root: &Path,
    opts: &ScanOptions,
    sink: &dyn EventSink<ScanEvent>,
) -> Result<TreeReport> {
    let root_meta = std::fs::metadata(root).map_err(|e| Error::io(root, e))?;
    if root_meta.is_file() && crate::wheel::is_wheel_path(root) {
        return crate::wheel::scan_wheel(root, opts, sink);
    }
    let mut diagnostics = Vec::new();
    let mut entries = Vec::new();
    let mut directories = 0u64;
    if root_meta.is_dir() {
        for item in walkdir::WalkDir::new(root)
            .follow_links(false)
            .sort_by_file_name()
            .min_depth(1)
        {
            match item {
                Ok(item) => {
                    let rel = rel_string(item.path().strip_prefix(root).unwrap_or(item.path()));
                    match item.metadata() {
                        Ok(meta) if meta.is_dir() => directories += 1,
                        Ok(meta) => {
                            sink.event(ScanEvent::Listed {
                                path: rel.clone(),
                                bytes: meta.len(),
                            });
                            entries.push(Entry {
                                rel,
                                abs: item.path().to_path_buf(),
                                meta,
                            })
                        }
                        Err(e) => diagnostics.push(Diagnostic {
                            path: rel,
                            severity: Severity::Error,
                            message: format!("cannot stat: {e}"),
                        }),
                    }
                }
                Err(e) => {
                    let path = e
                        .path()
                        .map(|p| rel_string(p.strip_prefix(root).unwrap_or(p)))
                        .unwrap_or_default();
                    let msg = e
                        .io_error()
                        .map_or_else(|| e.to_string(), ToString::to_string);
                    diagnostics.push(Diagnostic {
                        path,
                        severity: Severity::Error,
                        message: format!("cannot read directory: {msg}"),
                    });
                }
            }
        }
    } else {
        let name = root.file_name().map_or_else(
            || root.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let meta = std::fs::symlink_metadata(root).map_err(|e| Error::io(root, e))?;
        entries.push(Entry {
            rel: name,
            abs: root.to_path_buf(),
            meta,
        });
    }
    entries.sort_by(|a, b| a.rel.cmp(&b.rel));

    // Hard links: the first path (in sorted order) of an inode is inspected, later
    // ones refer to it.
    let mut first_of_inode: HashMap<(u64, u64), usize> = HashMap::new();
    let mut link_of: Vec<Option<usize>> = vec![None; entries.len()];
    for (i, e) in entries.iter().enumerate() {
        if e.meta.file_type().is_file() && e.meta.nlink() > 1 {
            let key = (e.meta.dev(), e.meta.ino());
            match first_of_inode.get(&key) {
                Some(&first) => link_of[i] = Some(first),
                None => {
                    first_of_inode.insert(key, i);
                }
            }
        }
    }
    let (files, bytes) = entries
        .iter()
        .zip(&link_of)
        .filter(|(e, l)| e.meta.file_type().is_file() && l.is_none())
        .fold((0u64, 0u64), |(n, b), (e, _)| (n + 1, b + e.meta.len()));
    sink.event(ScanEvent::Discovered { files, bytes });

    let handlers: &[Database] = opts.databases.as_deref().unwrap_or(&Database::ALL);
    let work = |(i, e): (usize, &Entry)| -> FileReport {
        let r = match link_of[i] {
            Some(first) => {
                let mut r = FileReport::new(
                    e.rel.clone(),
                    FileKind::Opaque,
                    e.meta.len(),
                    e.meta.mode() & 0o7777,
                );
                r.hard_link_of = Some(entries[first].rel.clone());
                r
            }
            None => inspect_entry(e, handlers),
        };
        sink.event(ScanEvent::Inspected(Box::new(r.clone())));
        if e.meta.file_type().is_file() && link_of[i].is_none() {
            sink.event(ScanEvent::FileDone {
                path: PathBuf::from(&e.rel),
                bytes: e.meta.len(),
            });
        }
        r
    };
    let mut reports: Vec<FileReport> = if opts.threads == 1 {
        entries.iter().enumerate().map(work).collect()
    } else if opts.threads > 1 {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(opts.threads)
            .build()
            .map_err(|e| Error::Invalid(format!("cannot start {} threads: {e}", opts.threads)))?;
        pool.install(|| entries.par_iter().enumerate().map(work).collect())
    } else {
        entries.par_iter().enumerate().map(work).collect()
    };
    // A hard link has the class of the file it links to.
    for i in 0..reports.len() {
        if let Some(first) = link_of[i] {
            reports[i].kind = reports[first].kind;
        }
    }
    Ok(build_report(
        root.display().to_string(),
        reports,
        diagnostics,
        directories,
    ))
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
    mut diagnostics: Vec<Diagnostic>,
    directories: u64,
) -> TreeReport {
    let mut totals = Totals {
        directories,
        ..Totals::default()
    };
    let mut arch_totals: BTreeMap<String, ArchTotal> = BTreeMap::new();
    for f in &files {
        totals.entries += 1;
        let counted = f.hard_link_of.is_none() && f.kind != FileKind::Symlink;
        let kt = totals.by_kind.entry(f.kind).or_default();
        kt.count += 1;
        if counted {
            kt.bytes += f.size;
            totals.bytes += if f.kind == FileKind::Other { 0 } else { f.size };
            totals.device_bytes += f.device_bytes;
            for b in f.all_bundles() {
                for t in &b.targets {
                    let a = arch_totals.entry(t.arch.clone()).or_default();
                    a.raw += t.size;
                    a.compressed += t.compressed_size;
                    a.code_objects += 1;
                }
            }
            if f.kind == FileKind::CodeObject
                && let Some(arch) = &f.arch
            {
                let a = arch_totals.entry(arch.clone()).or_default();
                a.raw += f.size;
                a.compressed += f.size;
                a.code_objects += 1;
            }
            if f.kind == FileKind::KernelDatabase
                && f.bundles.is_empty()
                && let Some(arch) = &f.arch
            {
                arch_totals.entry(arch.clone()).or_default().kernel_database += f.size;
            }
        }
        for p in &f.problems {
            diagnostics.push(Diagnostic {
                path: f.path.clone(),
                severity: if f.kind == FileKind::Other || p.starts_with("unsupported") {
                    Severity::Warning
                } else {
                    Severity::Error
                },
                message: p.clone(),
            });
        }
    }
    diagnostics.sort_by(|a, b| a.path.cmp(&b.path).then(a.message.cmp(&b.message)));
    let archs = arch_totals
        .iter()
        .filter(|(_, t)| t.raw > 0)
        .map(|(a, t)| (a.clone(), t.raw))
        .collect();
    TreeReport {
        root,
        files,
        archs,
        arch_totals,
        totals,
        diagnostics,
        wheel: None,
    }
}

fn inspect_entry(e: &Entry, handlers: &[Database]) -> FileReport {
    let ft = e.meta.file_type();
    let mode = e.meta.mode() & 0o7777;
    if ft.is_symlink() {
        let mut r = FileReport::new(e.rel.clone(), FileKind::Symlink, e.meta.len(), mode);
        match std::fs::read_link(&e.abs) {
            Ok(t) => r.target = Some(t.to_string_lossy().into_owned()),
            Err(err) => r.problems.push(format!("cannot read link: {err}")),
        }
        return r;
    }
    if !ft.is_file() {
        let mut r = FileReport::new(e.rel.clone(), FileKind::Other, 0, mode);
        let t = if ft.is_fifo() {
            "fifo"
        } else if ft.is_socket() {
            "socket"
        } else if ft.is_char_device() {
            "char_device"
        } else if ft.is_block_device() {
            "block_device"
        } else {
            "unknown"
        };
        r.file_type = Some(t);
        r.problems.push(format!("special file ({t}): not opened"));
        return r;
    }
    inspect_file_with(&e.abs, &e.rel, e.meta.len(), mode, handlers)
}

/// Inspect one regular file (`rel` is the name used in the report).
pub fn inspect_file(abs: &Path, rel: &str, size: u64, mode: u32) -> FileReport {
    inspect_file_with(abs, rel, size, mode, &Database::ALL)
}

/// [`inspect_file`] with the given kernel-database handlers.
pub fn inspect_file_with(
    abs: &Path,
    rel: &str,
    size: u64,
    mode: u32,
    handlers: &[Database],
) -> FileReport {
    let mut r = FileReport::new(rel.to_string(), FileKind::Opaque, size, mode);
    let db = kerneldb::classify_with(rel, handlers);
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
    if db.is_none() && crate::zip::is_zip(&head[..n]) && rel.ends_with(".whl") {
        r.kind = FileKind::Wheel;
        match crate::wheel::Wheel::open(abs) {
            Ok(w) => r.wheel = Some(w.info),
            Err(e) => r.problems.push(e.to_string()),
        }
        return r;
    }
    if n == 0 || !worth_mapping(&head[..n]) {
        return r;
    }
    if head.starts_with(KPACK_MAGIC) {
        // Archives can be large: read their index with positioned reads instead of
        // mapping them (a mapped frame walk faults in far more than the lengths).
        r.kind = FileKind::Kpack;
        match crate::kpack::archive::parse_index_file(&file) {
            Ok(idx) => r.kpack = Some(kpack_summary(idx)),
            Err(e) => r.problems.push(e.to_string()),
        }
        return r;
    }
    match map_open_file(&file) {
        Ok(map) => classify_bytes(&mut r, &map, db.is_some()),
        Err(e) => r.problems.push(format!("cannot map: {e}")),
    }
    r
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
    if elf::is_elf(data) {
        match elf::inspect(data) {
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
                    r.device_bytes = r.size;
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
                    r.container = Some("ar");
                    r.kind = if ar.members.iter().all(|m| m.fat.host_only) {
                        FileKind::HostOnlyBinary
                    } else {
                        FileKind::FatBinary
                    };
                    r.device_bytes = ar.members.iter().map(|m| m.fat.device_bytes).sum();
                    r.host_bytes = Some(r.size.saturating_sub(r.device_bytes));
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
                        });
                    }
                }
            }
            Err(e) => r.problems.push(e.to_string()),
        }
    } else if bundle::looks_like_bundle(data) {
        if !is_db {
            r.kind = FileKind::Bundle;
            r.device_bytes = r.size;
        }
        match bundle::walk_section(data) {
            Ok(b) => r.bundles = b.iter().map(BundleReport::from_info).collect(),
            Err(e) => r.problems.push(e.to_string()),
        }
    } else if data.starts_with(KPACK_MAGIC) {
        r.kind = FileKind::Kpack;
        match crate::kpack::archive::parse_index(data) {
            Ok(idx) => r.kpack = Some(kpack_summary(idx)),
            Err(e) => r.problems.push(e.to_string()),
        }
    } else if coff::is_pe(data) && data.len() >= 0x40 {
        // Many files start with "MZ" by chance; only a real PE header counts.
        let lfanew = u32::from_le_bytes([data[0x3c], data[0x3d], data[0x3e], data[0x3f]]) as usize;
        if data.get(lfanew..lfanew + 4) == Some(b"PE\0\0") {
            match coff::inspect(data) {
                Ok(Some(pe)) if !is_db => {
                    r.container = Some("pe");
                    r.kind = if pe.host_only {
                        FileKind::HostOnlyBinary
                    } else {
                        FileKind::FatBinary
                    };
                    r.device_bytes = pe.device_bytes;
                    r.host_bytes = Some(r.size.saturating_sub(pe.device_bytes));
                    r.bundles = pe.bundles.iter().map(BundleReport::from_info).collect();
                    r.marker = pe.marker;
                    r.wrappers = pe.wrappers;
                    r.problems.extend(pe.problems);
                }
                Ok(_) => {}
                Err(e) => r.problems.push(e.to_string()),
            }
        }
    }
}

impl TreeReport {
    /// Whether any diagnostic was raised.
    pub fn has_diagnostics(&self) -> bool {
        !self.diagnostics.is_empty()
    }
}
