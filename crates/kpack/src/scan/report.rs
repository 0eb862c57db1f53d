//! What a scan finds: files, bundles, targets, totals (serialised as `--json`).

use crate::bundle::{BundleInfo, Compression};
use crate::elf::{self, ElfKind, FatBinary, WrapperInfo};
use crate::intern::interned;
use crate::kerneldb::{self, Database, Rule};
use crate::kpack::Marker;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The class of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// A binary without HIP fat-binary code whose data holds offload bundles or code
    /// objects it loads itself (`hipModuleLoadData`): not packable.
    EmbeddedCode,
    /// Anything else that is a regular file.
    Opaque,
    /// A symbolic link (never followed).
    Symlink,
    /// A fifo, socket or device (never opened).
    Other,
}

impl FileKind {
    /// All kinds, in display order.
    pub const ALL: [FileKind; 11] = [
        FileKind::FatBinary,
        FileKind::HostOnlyBinary,
        FileKind::Bundle,
        FileKind::KernelDatabase,
        FileKind::Kpack,
        FileKind::Wheel,
        FileKind::CodeObject,
        FileKind::EmbeddedCode,
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
            FileKind::EmbeddedCode => "embedded_code",
            FileKind::Opaque => "opaque",
            FileKind::Symlink => "symlink",
            FileKind::Other => "other",
        }
    }
}

/// One device target of a bundle, as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TargetReport {
    /// Entry ID exactly as stored.
    // Both shared with every report of the same ID (`intern::interned`): a tree's scan
    // names a dozen targets tens of thousands of times.
    pub triple: Arc<str>,
    /// Target ID with feature flags (`gfx90a:xnack+`).
    pub arch: Arc<str>,
    /// Uncompressed code-object size (raw device code).
    #[serde(rename = "raw_size")]
    pub size: u64,
    /// Bytes stored for it (its share of the CCOB; `size` if uncompressed).
    #[serde(rename = "stored_size")]
    pub compressed_size: u64,
}

/// One bundle (TU), as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    pub host_triple: Option<Arc<str>>,
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
                .map(|e| interned(&e.id.triple)),
            targets: b
                .device_entries()
                .map(|e| TargetReport {
                    triple: interned(&e.id.triple),
                    arch: interned(&e.id.arch().unwrap_or_else(|| e.id.triple.clone())),
                    size: e.size,
                    compressed_size: b.apportioned_size(e),
                })
                .collect(),
        }
    }
}

/// A static-archive member with device code.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MemberReport {
    /// Member name.
    pub name: String,
    /// Member size.
    pub size: u64,
    /// Its bundles.
    pub bundles: Vec<BundleReport>,
    /// A thin archive's member: the file it is, relative to the scanned directory
    /// (its bytes are that file's, not the archive's, and are counted there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Where that file was found (resolved, inside the scanned directory).
    #[serde(skip)]
    pub resolved: Option<std::path::PathBuf>,
}

/// A binary's container when it is not a plain ELF file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Container {
    /// A PE/COFF image (DLL or EXE) with a `.hip_fat` section.
    Pe,
    /// A static archive (`ar`, thin or not) of objects.
    Ar,
}

impl Container {
    /// How reports name it: `PE image`, `static archive`.
    pub fn describe(self) -> &'static str {
        match self {
            Container::Pe => "PE image",
            Container::Ar => "static archive",
        }
    }
}

/// One entry of the tree.
// What only some files have (a binary's bundles and marker, an archive's summary, a
// symlink's target, problems) is in `FileDetails`, reached through `Deref`: most
// files of a tree (headers, text, data) have none of it and pay a pointer for it,
// not its 300 bytes (every operation holds one report per file, 40,000 in an 8 GiB
// tree). Writing a detail gives the report its details. (Not in the doc comment:
// that is the JSON schema's description.)
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FileReport {
    /// Path relative to the scanned root, `/`-separated (the file name for a single file).
    pub path: String,
    /// Class.
    pub kind: FileKind,
    /// Size in bytes (of the link itself for symlinks).
    pub size: u64,
    /// Unix permission bits.
    pub mode: u32,
    /// The (device, inode) the scan read, for operations that open the file again
    /// later: a file (or a directory on its path) swapped after the scan is not
    /// taken for it. `None` for files not on a file system (wheel members).
    #[serde(skip)]
    pub identity: Option<(u64, u64)>,
    /// The rest, when the file has any of it.
    #[serde(flatten)]
    details: Option<Box<FileDetails>>,
}

/// What only some files of a tree have: a [`FileReport`] reads as one (`Deref`),
/// and holds one only once something of it is set.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FileDetails {
    /// ELF type, for ELF binaries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elf_kind: Option<ElfKind>,
    /// The host CPU (`e_machine`) of a fat or host-only ELF binary, serialised as its
    /// name (`x86-64`, `aarch64`, `ppc64le`, or another machine's).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_machine"
    )]
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    pub machine: Option<u16>,
    /// The container when it is not a plain ELF file: a PE image or a static archive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<Container>,
    /// Bytes of the file's `.hip_fatbin` section (the whole file for bundle and
    /// code-object files): what a pack takes out of it.
    #[serde(skip_serializing_if = "is_zero")]
    pub fatbin_bytes: u64,
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
    /// Summary of a `.kpack` archive (boxed, as the other rare parts: a tree of
    /// 40,000 reports holds them all).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kpack: Option<Box<KpackSummary>>,
    /// Identity of a Python wheel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wheel: Option<Box<crate::wheel::WheelInfo>>,
    /// For a member of a scanned wheel: the bytes it occupies in the zip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored_size: Option<u64>,
    /// Device code in the binary's data outside `.hip_fatbin` (or, with `--deep`,
    /// anywhere in the file): loaded by the binary itself, not packable.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub embedded: Vec<crate::embedded::Embedded>,
    /// Problems found in this file.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// The details of a file that has none.
static NO_DETAILS: std::sync::LazyLock<FileDetails> =
    std::sync::LazyLock::new(FileDetails::default);

impl std::ops::Deref for FileReport {
    type Target = FileDetails;
    fn deref(&self) -> &FileDetails {
        self.details.as_deref().unwrap_or(&NO_DETAILS)
    }
}

impl std::ops::DerefMut for FileReport {
    fn deref_mut(&mut self) -> &mut FileDetails {
        self.details.get_or_insert_with(Box::default)
    }
}

/// What the scan reports of a `.kpack` archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KpackSummary {
    /// Group name.
    pub group_name: String,
    /// Family.
    pub gfx_arch_family: String,
    /// Arches served.
    pub gfx_arches: Vec<String>,
    /// `none` or `zstd-per-kernel`.
    pub compression_scheme: &'static str,
    /// Number of code objects.
    pub code_objects: u64,
    /// Sum of kernel sizes.
    pub raw_bytes: u64,
    /// Per target: kernels and their uncompressed bytes (aliases counted once).
    #[serde(skip)]
    pub by_arch: std::collections::BTreeMap<String, ArchivedCode>,
}

/// One target's code in an archive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArchivedCode {
    /// Code objects (TOC aliases not counted).
    pub code_objects: u64,
    /// Their raw bytes.
    pub raw: u64,
    /// Their frames' bytes.
    pub stored: u64,
}

pub(super) fn kpack_summary(idx: crate::kpack::archive::ArchiveIndex) -> KpackSummary {
    KpackSummary {
        compression_scheme: idx.compression_scheme.name(),
        // A TOC alias repeats a frame: counted once.
        code_objects: idx.kernels.iter().filter(|k| !k.is_alias()).count() as u64,
        raw_bytes: idx
            .kernels
            .iter()
            .filter(|k| !k.is_alias())
            .map(|k| k.size)
            .sum(),
        by_arch: {
            let mut m: std::collections::BTreeMap<String, ArchivedCode> = Default::default();
            for k in idx.kernels.iter().filter(|k| !k.is_alias()) {
                let e = m.entry(k.arch.to_string()).or_default();
                e.code_objects += 1;
                e.raw += k.size;
                e.stored += k.compressed_size;
            }
            m
        },
        group_name: idx.meta.group_name,
        gfx_arch_family: idx.meta.gfx_arch_family,
        gfx_arches: idx.meta.gfx_arches,
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn serialize_machine<S: serde::Serializer>(m: &Option<u16>, s: S) -> Result<S::Ok, S::Error> {
    match m {
        Some(m) => s.serialize_str(&crate::elf::machine::machine_name(*m)),
        None => s.serialize_none(),
    }
}

impl FileReport {
    /// Keep only what reading the file again needs (its class, size and path, and of
    /// its details the marker, embedded code, container, archive members without
    /// their bundles, hard link and link target); drop what the scan read of its
    /// contents (bundles, wrappers, section placement, database attribution,
    /// problems). An operation that holds a report per file until it reads some of
    /// them again (diff: 3,600 of an 8 GiB tree's binaries and databases, on two
    /// sides) holds a few bytes for most of them, not their details.
    pub fn keep_for_reading(&mut self) {
        let Some(d) = self.details.take() else {
            return;
        };
        let d = *d;
        let kept = FileDetails {
            marker: d.marker,
            embedded: d.embedded,
            container: d.container,
            members: (d.members.into_iter())
                .map(|m| MemberReport {
                    bundles: Vec::new(),
                    ..m
                })
                .collect(),
            hard_link_of: d.hard_link_of,
            target: d.target,
            ..FileDetails::default()
        };
        let any = kept.marker.is_some()
            || !kept.embedded.is_empty()
            || kept.container.is_some()
            || !kept.members.is_empty()
            || kept.hard_link_of.is_some()
            || kept.target.is_some();
        if any {
            self.details = Some(Box::new(kept));
        }
    }

    /// Whether this fat file can be rewritten host-only: an ELF executable or
    /// shared library, or a PE image, that is not an RDC object nor a second hard
    /// link.
    pub fn rewritable(&self) -> bool {
        // PE images (DLLs and EXEs) are rewritten by the PE transform.
        if self.container == Some(Container::Pe) {
            return self.hard_link_of.is_none();
        }
        self.container.is_none()
            && matches!(
                self.elf_kind,
                Some(ElfKind::SharedLibrary | ElfKind::PieExecutable | ElfKind::Executable)
            )
            && !self.rdc_object
            && self.hard_link_of.is_none()
    }

    /// Whether this is a fat binary a pack rewrites host-only (a
    /// [`rewritable`](Self::rewritable) one with bundles; not an object, static
    /// archive or second hard link).
    pub fn packable(&self) -> bool {
        self.kind == FileKind::FatBinary && self.rewritable() && !self.bundles.is_empty()
    }

    /// The host CPU's name when it is not x86-64 (what listings add to the ELF kind).
    pub fn other_machine(&self) -> Option<String> {
        self.machine
            .filter(|&m| m != object::elf::EM_X86_64)
            .map(crate::elf::machine::machine_name)
    }

    /// A report with only the basics filled in (the rest empty).
    pub fn new(path: String, kind: FileKind, size: u64, mode: u32) -> Self {
        FileReport {
            path,
            kind,
            size,
            mode,
            identity: None,
            details: None,
        }
    }

    /// An empty report for bytes that did not come from a tree (fuzzing, tests).
    pub fn for_bytes(name: &str, size: u64) -> Self {
        FileReport::new(name.to_string(), FileKind::Opaque, size, 0o644)
    }

    /// Raw device code stored in this file (what [`Totals::device_raw`] counts of
    /// it): its bundles' code objects, the file itself for a code object, an
    /// archive's code objects (TOC aliases once).
    pub fn device_raw(&self) -> u64 {
        let bundled: u64 = self
            .all_bundles()
            .flat_map(|b| &b.targets)
            .map(|t| t.size)
            .sum();
        let own = match self.kind {
            FileKind::CodeObject if self.arch.is_some() => self.size,
            _ => 0,
        };
        bundled + own + self.kpack.as_ref().map_or(0, |k| k.raw_bytes)
    }

    /// Bundles stored in this file: its own and its archive members' (a thin
    /// archive's members are other files, not counted here).
    pub fn all_bundles(&self) -> impl Iterator<Item = &BundleReport> {
        self.bundles.iter().chain(
            self.members
                .iter()
                .filter(|m| m.file.is_none())
                .flat_map(|m| m.bundles.iter()),
        )
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

    pub(super) fn set_fat(&mut self, fat: &FatBinary) {
        self.kind = if fat.host_only {
            FileKind::HostOnlyBinary
        } else {
            FileKind::FatBinary
        };
        self.elf_kind = Some(fat.elf_kind);
        self.machine = Some(fat.machine);
        self.fatbin_bytes = fat.fatbin_bytes;
        self.host_bytes = Some(self.size.saturating_sub(fat.fatbin_bytes));
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Something could not be read or is malformed.
    Error,
    /// Something was skipped or looks odd.
    Warning,
}

/// A problem with one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Diagnostic {
    /// Path relative to the root.
    pub path: String,
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong.
    pub message: String,
    /// The path itself could not be read (a directory that does not list, a name too
    /// long for the file system): nothing, not even a copy, can be made of it.
    #[serde(skip)]
    pub unreadable: bool,
}

/// Count and bytes of one class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KindTotal {
    /// Number of files.
    pub count: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// Device bytes of one arch over the tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ArchTotal {
    /// Uncompressed code-object bytes in bundles and raw code objects.
    pub raw: u64,
    /// Bytes they occupy on disk (compressed share for CCOBs): stored device code.
    #[serde(rename = "stored")]
    pub compressed: u64,
    /// Number of code objects.
    pub code_objects: u64,
    /// Bytes of kernel-database files attributed to this arch (name-based, no features).
    pub kernel_database: u64,
    /// Uncompressed bytes of this target's kernels in `.kpack` archives (a packed
    /// tree's host-only binaries reach their code there; TOC aliases counted once).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub archived: u64,
    /// Number of those code objects.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub archived_code_objects: u64,
    /// Bytes of their frames in the archives.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub archived_stored: u64,
    /// Code-object bytes embedded in binaries' data outside `.hip_fatbin` (not
    /// packable; not in `raw`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub embedded: u64,
    /// Number of those code objects.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub embedded_code_objects: u64,
}

/// Totals over the tree.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Totals {
    /// Entries listed (all kinds).
    pub entries: u64,
    /// Regular-file bytes (hard links once).
    pub bytes: u64,
    /// Bytes of `.hip_fatbin` sections, bundle and code-object files: what a pack
    /// takes out of the binaries.
    pub fatbin_bytes: u64,
    /// Raw device code: code-object bytes in binaries, bundle and code-object files,
    /// and archives (TOC aliases once); embedded code not included.
    pub device_raw: u64,
    /// Stored device code: the bytes those code objects take on disk (a compressed
    /// bundle's share, an archive's frames).
    pub device_stored: u64,
    /// Directories seen (the root excluded).
    pub directories: u64,
    /// Per class.
    pub by_kind: BTreeMap<FileKind, KindTotal>,
}

/// The result of a scan.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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

impl TreeReport {
    /// Whether any diagnostic was raised.
    pub fn has_diagnostics(&self) -> bool {
        !self.diagnostics.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_report_stays_small() {
        // Every operation on a tree holds one report per file (40,000 in an 8 GiB
        // tree) for its whole run: a field that is rare (a binary's marker, its
        // section) is boxed, so that the text files and headers that make most of a
        // tree do not pay for it.
        let size = std::mem::size_of::<FileReport>();
        assert!(size <= 80, "FileReport grew to {size} bytes");
    }

    /// What reading a file again needs stays, what the scan read of it goes: a fat
    /// binary keeps no details; a marker, members (without bundles) and a hard link
    /// stay.
    #[test]
    fn a_report_kept_for_reading_holds_what_reading_needs() {
        let fixtures =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/bin");
        let opts = crate::scan::ScanOptions::default();
        let r = crate::scan::scan(&fixtures.join("libvadd.so"), &opts, &crate::event::NoEvents)
            .unwrap();
        let mut fat = r.files[0].clone();
        assert_eq!(fat.kind, FileKind::FatBinary);
        assert!(!fat.bundles.is_empty() && fat.details.is_some());
        let (path, size) = (fat.path.clone(), fat.size);
        fat.keep_for_reading();
        assert!(fat.details.is_none(), "{fat:?}");
        assert_eq!(
            (fat.path.as_str(), fat.kind, fat.size),
            (path.as_str(), FileKind::FatBinary, size)
        );

        let mut f = FileReport::new("lib/x.so".into(), FileKind::HostOnlyBinary, 10, 0o755);
        let marker = Marker {
            kpack_search_paths: vec![".kpack/x_@GFXARCH@.kpack".into()],
            kernel_name: "lib/x.so".into(),
        };
        f.marker = Some(marker.clone());
        f.bundles = r.files[0].bundles.clone();
        f.database_key = Some("gfx90a".into());
        f.problems.push("a problem".into());
        f.hard_link_of = Some("lib/y.so".into());
        f.members.push(MemberReport {
            name: "a.o".into(),
            size: 3,
            bundles: r.files[0].bundles.clone(),
            file: Some("a.o".into()),
            resolved: Some("/t/a.o".into()),
        });
        f.keep_for_reading();
        assert_eq!(f.marker.as_ref(), Some(&marker));
        assert_eq!(f.hard_link_of.as_deref(), Some("lib/y.so"));
        assert!(f.bundles.is_empty() && f.problems.is_empty() && f.database_key.is_none());
        let m = &f.members[0];
        assert_eq!((m.name.as_str(), m.size, m.bundles.len()), ("a.o", 3, 0));
        assert_eq!(m.resolved.as_deref(), Some(std::path::Path::new("/t/a.o")));
    }

    #[test]
    fn plain_files_have_no_details() {
        // Headers, text and data (most of a tree) hold no FileDetails, with --deep
        // too; a symlink holds its target.
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.h"), "int x;\n").unwrap();
        std::fs::write(d.path().join("b.bin"), vec![0x42u8; 100_000]).unwrap();
        std::os::unix::fs::symlink("a.h", d.path().join("c.h")).unwrap();
        for deep in [false, true] {
            let opts = crate::scan::ScanOptions {
                deep,
                ..Default::default()
            };
            let r = crate::scan::scan(d.path(), &opts, &crate::event::NoEvents).unwrap();
            let names: Vec<(&str, bool)> = (r.files.iter())
                .map(|f| (f.path.as_str(), f.details.is_some()))
                .collect();
            assert_eq!(
                names,
                [("a.h", false), ("b.bin", false), ("c.h", true)],
                "deep: {deep}"
            );
            assert_eq!(r.files[2].target.as_deref(), Some("a.h"));
        }
    }
}
