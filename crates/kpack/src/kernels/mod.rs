//! Every kernel of every code object under a path: fat binaries (plain and CCOB
//! bundles), standalone bundles, raw code objects and kernel-database code objects,
//! `.kpack` archives, and — for a host-only binary given alone — the archives its
//! marker reaches. Files are read in parallel (rayon) from an mmap; rows come out
//! sorted by path, then bundle/key, target and kernel name, whatever the thread count.

use crate::bundle::{self, BundleInfo};
use crate::codeobj::{self, Kernel};
use crate::elf::{self, ElfContent};
use crate::error::{Error, Result};
use crate::kpack::archive::Archive;
use crate::kpack::resolve::GFXARCH;
use crate::scan::{self, FileKind, FileReport, ScanOptions};
use rayon::prelude::*;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod extract;
pub use extract::{destination, extract_code_objects};

/// One kernel where it lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KernelRow {
    /// The file holding the code object, relative to the root (the file name for a
    /// single file).
    pub path: String,
    /// The archive entry key (`lib/libfoo.so#0`), for kernels read from a `.kpack`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The bundle (TU) index, for kernels read from bundles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle: Option<u32>,
    /// The target ID the code object is for.
    pub target: String,
    /// Code-object version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_object_version: Option<u8>,
    /// The kernel.
    #[serde(flatten)]
    pub kernel: Kernel,
    /// Waves per SIMD its registers (and LDS) allow, where the target's numbers are
    /// known (see `occupancy`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub occupancy: Option<crate::occupancy::Occupancy>,
}

/// One code object where it lives (the unit of device bytes a diff compares).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CodeObjectRow {
    /// The file holding it.
    pub path: String,
    /// The binary it belongs to: `path`, or for an archive entry its key without `#TU`.
    pub binary: String,
    /// Bundle (TU) index, or the key's `#TU`.
    pub bundle: Option<u32>,
    /// Target ID.
    pub target: String,
    /// Bytes of the code object.
    pub size: u64,
    /// Bytes it takes on disk (its share of a compressed bundle, its archive frame).
    pub stored: u64,
    /// Its bytes, when [`KernelsOptions::keep`] asked for them.
    #[serde(skip)]
    pub bytes: Option<Vec<u8>>,
}

/// A code object by where it lives: the file, the binary (the file, or an archive
/// entry's key without `#TU`), the bundle (or the key's `#TU`) and the target.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CodeObjectRef {
    /// The file holding it.
    pub path: String,
    /// The binary it belongs to.
    pub binary: String,
    /// Bundle (TU) index.
    pub bundle: Option<u32>,
    /// Target ID.
    pub target: String,
}

impl CodeObjectRow {
    /// Where it lives.
    pub fn id(&self) -> CodeObjectRef {
        CodeObjectRef {
            path: self.path.clone(),
            binary: self.binary.clone(),
            bundle: self.bundle,
            target: self.target.clone(),
        }
    }
}

impl KernelRow {
    /// The code object holding the kernel.
    pub fn code_object(&self) -> CodeObjectRef {
        let (binary, bundle) = binary_and_tu(&self.path, self.key.as_deref(), self.bundle);
        CodeObjectRef {
            path: self.path.clone(),
            binary,
            bundle,
            target: self.target.clone(),
        }
    }
}

/// The binary and bundle of a code object: an archive entry's key split at `#TU`, or
/// the file itself and its bundle.
fn binary_and_tu(path: &str, key: Option<&str>, bundle: Option<u32>) -> (String, Option<u32>) {
    match key.and_then(|k| k.rsplit_once('#')) {
        Some((b, n)) => (b.to_string(), n.parse().ok()),
        None => (path.to_string(), bundle),
    }
}

/// Every kernel found.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KernelsReport {
    /// What was read.
    pub root: PathBuf,
    /// Code objects read.
    pub code_objects: u64,
    /// The kernels.
    pub kernels: Vec<Box<KernelRow>>,
    /// Code objects or files that could not be read, with why.
    pub diagnostics: Vec<String>,
    /// Every code object read (for diffs; not in the JSON document).
    #[serde(skip)]
    pub objects: Vec<CodeObjectRow>,
}

/// What to list.
#[derive(Debug, Clone, Default)]
pub struct KernelsOptions {
    /// Only these targets: exact target IDs, or processors (every variant).
    pub targets: Vec<String>,
    /// Worker threads (0 = all cores).
    pub threads: usize,
    /// Keep what each code object held, by a hash of its bytes, for the life of the
    /// process (the TUI: the same code object met again is not parsed again).
    pub cache: bool,
    /// Only the code objects of these binaries (file paths, or archive keys without
    /// `#TU`); `None`: all.
    pub binaries: Option<std::collections::BTreeSet<String>>,
    /// Bundles not to read, by file path and bundle index (a diff's bundles that
    /// hold the same bytes on both sides: their kernels cannot differ).
    pub skip_bundles: std::collections::BTreeMap<String, std::collections::BTreeSet<u32>>,
    /// Keep the bytes of these code objects ([`CodeObjectRow::bytes`]).
    pub keep: Option<std::collections::BTreeSet<CodeObjectRef>>,
}

/// Parsed code objects by content hash (bounded: cleared when it grows past this).
static CACHE: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<(u64, usize), crate::codeobj::CodeObjectInfo>>,
> = std::sync::LazyLock::new(Default::default);
const CACHE_MAX: usize = 1 << 16;

fn read_code_object(
    data: &[u8],
    cache: bool,
) -> crate::error::FormatResult<crate::codeobj::CodeObjectInfo> {
    if !cache {
        return codeobj::read(data);
    }
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    data.hash(&mut h);
    let key = (h.finish(), data.len());
    if let Some(hit) = CACHE.lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(hit);
    }
    let info = codeobj::read(data)?;
    if let Ok(mut c) = CACHE.lock() {
        if c.len() >= CACHE_MAX {
            c.clear();
        }
        c.insert(key, info.clone());
    }
    Ok(info)
}

fn wanted(opts: &KernelsOptions, target: &str) -> bool {
    target_selected(&opts.targets, target)
}

/// Whether `target` is among `selection` (exact target IDs, or processors taking
/// every variant); an empty selection takes everything.
pub fn target_selected(selection: &[String], target: &str) -> bool {
    selection.is_empty()
        || selection.iter().any(|t| {
            t == target || (!t.contains(':') && bundle::target::base_processor(target) == t)
        })
}

mod read;
use read::{Deferred, FileRows, bundle_rows, one_file, one_member};
mod spool;
pub use spool::{SpooledKernels, list_kernels_spooled};

/// The archive files a host-only binary's marker reaches on disk (`@GFXARCH@`
/// expanded over the files present).
pub fn marker_archives(binary: &Path, m: &crate::kpack::Marker) -> Vec<PathBuf> {
    let dir = binary.parent().unwrap_or(Path::new("."));
    let mut out = Vec::new();
    for sp in &m.kpack_search_paths {
        let p = dir.join(sp);
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match name.split_once(GFXARCH) {
            None => {
                if p.is_file() && !out.contains(&p) {
                    out.push(p);
                }
            }
            Some((pre, post)) => {
                let parent = p.parent().unwrap_or(Path::new("."));
                let mut hits: Vec<PathBuf> = std::fs::read_dir(parent)
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.ok())
                    .filter(|e| {
                        let n = e.file_name().to_string_lossy().into_owned();
                        n.len() > pre.len() + post.len() && n.starts_with(pre) && n.ends_with(post)
                    })
                    .map(|e| e.path())
                    .collect();
                hits.sort();
                for h in hits {
                    if !out.contains(&h) {
                        out.push(h);
                    }
                }
            }
        }
    }
    out
}

/// Refuse a zip that is not read as a wheel (not named `.whl`): a silent
/// "0 kernels" would mislead.
pub fn refuse_zip(root: &Path) -> Result<()> {
    use std::io::Read;
    if crate::wheel::is_wheel_path(root) {
        return Ok(());
    }
    let mut head = [0u8; 4];
    let is_zip = std::fs::metadata(root).is_ok_and(|m| m.is_file())
        && std::fs::File::open(root)
            .and_then(|mut f| f.read_exact(&mut head))
            .is_ok()
        && head == *b"PK\x03\x04";
    if is_zip {
        return Err(Error::Unsupported {
            path: root.to_path_buf(),
            what: "a zip archive that is not read as a wheel (name it .whl if it is one, or \
                   unzip it and give the directory)"
                .into(),
        });
    }
    Ok(())
}

/// List every kernel under `root` (a tree or one file).
pub fn list_kernels(root: &Path, opts: &KernelsOptions) -> Result<KernelsReport> {
    let report = scan_kernel_files(root, opts)?;
    list_kernels_scanned(root, &report, opts)
}

/// The scan of `root` with only the files that can hold kernels kept: streamed (a
/// tree's headers and data are most of its files, and hold none).
fn scan_kernel_files(root: &Path, opts: &KernelsOptions) -> Result<scan::TreeReport> {
    refuse_zip(root)?;
    let mut kept = Vec::new();
    let mut report = scan::scan_each(
        root,
        &ScanOptions {
            threads: opts.threads,
            ..Default::default()
        },
        &crate::event::NoEvents,
        &mut |mut f| {
            if may_hold_kernels(&f) {
                // The bundles are read again from the file: their reports (a target
                // list each) would be most of what is kept.
                // (`DerefMut` would allocate the details of a file without them.)
                if !f.bundles.is_empty() {
                    f.bundles = Vec::new();
                }
                kept.push(f)
            }
        },
    )?;
    report.files = kept;
    Ok(report)
}

/// Whether [`list_kernels_scanned`] reads anything of `f`: its first name, of a kind
/// with device code or a way to it.
fn may_hold_kernels(f: &FileReport) -> bool {
    f.hard_link_of.is_none()
        && matches!(
            f.kind,
            FileKind::Kpack
                | FileKind::HostOnlyBinary
                | FileKind::FatBinary
                | FileKind::Bundle
                | FileKind::CodeObject
                | FileKind::EmbeddedCode
                | FileKind::KernelDatabase
        )
}

/// [`list_kernels`] of a tree already scanned.
pub fn list_kernels_scanned(
    root: &Path,
    report: &scan::TreeReport,
    opts: &KernelsOptions,
) -> Result<KernelsReport> {
    let per_file = gather(root, report, opts, &InMemory)?;
    let mut out = KernelsReport {
        root: root.to_path_buf(),
        diagnostics: scan_errors(report),
        ..Default::default()
    };
    // Reserved whole: grown by doubling, up to half of it went unused.
    out.kernels.reserve_exact(
        per_file
            .iter()
            .flatten()
            .map(|(_, rows, _)| rows.len())
            .sum(),
    );
    for (n, rows, diags) in per_file.into_iter().flatten() {
        out.code_objects += n.len() as u64;
        out.objects.extend(n);
        out.kernels.extend(rows);
        out.diagnostics.extend(diags);
    }
    dedup(&mut out.diagnostics);
    sort_in_place(&mut out.kernels, |a, b| path_order(a, b));
    Ok(out)
}

/// The scan's errors: a file that looks like device code but cannot be read is a
/// finding, never a silent "0 kernels".
fn scan_errors(report: &scan::TreeReport) -> Vec<String> {
    report
        .diagnostics
        .iter()
        .filter(|d| d.severity == scan::Severity::Error)
        .map(|d| format!("{}: {}", d.path, d.message))
        .collect()
}

/// Drop repeated diagnostics, keeping the first of each.
fn dedup(diagnostics: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    diagnostics.retain(|d| seen.insert(d.clone()));
}

/// The order rows are listed in before [`sort_rows`]: paths and keys with numbers in
/// number order (`#2` before `#10`), then bundle, targets by processor number, name.
fn path_order(a: &KernelRow, b: &KernelRow) -> std::cmp::Ordering {
    use crate::natural::{natural_cmp, target_cmp};
    natural_cmp(&a.path, &b.path)
        .then_with(|| {
            natural_cmp(
                a.key.as_deref().unwrap_or(""),
                b.key.as_deref().unwrap_or(""),
            )
        })
        .then(a.bundle.cmp(&b.bundle))
        .then_with(|| target_cmp(&a.target, &b.target))
        .then_with(|| a.kernel.name.cmp(&b.kernel.name))
}

/// Where the rows of each piece of work go as it is done: kept as they are, or
/// written out ([`spool`]).
trait Keep: Sync {
    /// What is kept of one piece.
    type Part: Send;
    fn keep(&self, rows: FileRows) -> Self::Part;
}

/// The rows themselves.
struct InMemory;

impl Keep for InMemory {
    type Part = FileRows;
    fn keep(&self, rows: FileRows) -> FileRows {
        rows
    }
}

/// Every file's rows, as `keep` kept them: per file of `report`, its first pass, then
/// its compressed bundles in bundle order, whatever the thread count.
fn gather<K: Keep>(
    root: &Path,
    report: &scan::TreeReport,
    opts: &KernelsOptions,
    keep: &K,
) -> Result<Vec<Vec<K::Part>>> {
    let single = std::fs::metadata(root)
        .map_err(|e| Error::io(root, e))?
        .is_file();
    let wheel = match &report.wheel {
        Some(_) => Some(crate::wheel::Wheel::open(root)?),
        None => None,
    };
    let work = |f: &FileReport| -> (K::Part, Vec<Deferred>) {
        if let Some(w) = &wheel {
            return (keep.keep(one_member(w, f, opts)), Vec::new());
        }
        let abs = if single {
            root.to_path_buf()
        } else {
            root.join(crate::relpath::to_path(&f.path))
        };
        let mut later = Vec::new();
        let rows = one_file(&abs, f, single, opts, &mut later);
        (keep.keep(rows), later)
    };
    // Two passes: every file (uncompressed bundles, archives, code objects), then every
    // compressed bundle of the tree, largest first.
    crate::parallel::on_threads(opts.threads, || {
        let first: Vec<(K::Part, Vec<Deferred>)> = report.files.par_iter().map(work).collect();
        let mut parts = Vec::with_capacity(first.len());
        let mut later: Vec<(usize, Deferred)> = Vec::new();
        for (i, (r, d)) in first.into_iter().enumerate() {
            parts.push(vec![r]);
            later.extend(d.into_iter().map(|d| (i, d)));
        }
        later.sort_by_key(|(i, d)| (std::cmp::Reverse(d.bundle.stored_size), *i, d.bundle.index));
        // Consumed: a file's map goes once its last bundle is read, and each bundle's
        // pages leave the resident set after it, so memory stays flat in tree size.
        let mut decoded = crate::parallel::largest_first(later, |(i, d)| {
            let release = |off: usize, len: usize| {
                crate::fsutil::release_range(&d.map, d.sec.start.saturating_add(off), len)
            };
            let rows = bundle_rows(&d.path, &d.map[d.sec.clone()], &d.bundle, opts, &release);
            let off = d.sec.start.saturating_add(d.bundle.offset as usize);
            crate::fsutil::release_range(&d.map, off, d.bundle.stored_size as usize);
            (i, d.bundle.index, keep.keep(rows))
        });
        decoded.sort_by_key(|(i, b, _)| (*i, *b));
        for (i, _, part) in decoded {
            parts[i].push(part);
        }
        parts
    })
}

/// Sort orders for [`sort_rows`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    /// Code size, largest first.
    Size,
    /// VGPRs, most first.
    Vgpr,
    /// SGPRs, most first.
    Sgpr,
    /// LDS bytes, most first.
    Lds,
    /// Scratch bytes, most first.
    Scratch,
    /// Spilled registers, most first.
    Spills,
    /// Name (demangled), A-Z, numbers as numbers.
    Name,
    /// Target by processor number, then name.
    Target,
}

/// Sort rows (stable; ties keep the path order).
pub fn sort_rows(rows: &mut [Box<KernelRow>], by: SortBy) {
    use crate::natural::{natural_cmp, target_cmp};
    if by == SortBy::Name {
        sort_in_place(rows, |a, b| {
            natural_cmp(a.kernel.display_name(), b.kernel.display_name())
        });
    } else if by == SortBy::Target {
        sort_in_place(rows, |a, b| {
            target_cmp(&a.target, &b.target)
                .then_with(|| natural_cmp(a.kernel.display_name(), b.kernel.display_name()))
        });
    } else {
        sort_in_place(rows, |a, b| number_key(b, by).cmp(&number_key(a, by)));
    }
}

/// What a row sorts by, largest first, in a numeric order (0 for the others).
fn number_key(r: &KernelRow, by: SortBy) -> u64 {
    let k = &r.kernel;
    match by {
        SortBy::Size => k.code_size,
        SortBy::Vgpr => k.vgpr,
        SortBy::Sgpr => k.sgpr,
        SortBy::Lds => k.lds,
        SortBy::Scratch => k.scratch,
        SortBy::Spills => k.spills(),
        SortBy::Name | SortBy::Target => None,
    }
    .unwrap_or(0)
}

/// A stable sort of `rows` by `cmp` that allocates 4 bytes a row, not half the
/// rows: their order is sorted as numbers, then the rows are moved into it by
/// following its cycles (a stable `sort_by` of 40,000 rows took an 8 MiB buffer
/// beside the rows themselves).
fn sort_in_place<T>(rows: &mut [T], cmp: impl Fn(&T, &T) -> std::cmp::Ordering) {
    let Ok(n) = u32::try_from(rows.len()) else {
        rows.sort_by(cmp);
        return;
    };
    let mut order: Vec<u32> = (0..n).collect();
    order.sort_by(|&a, &b| cmp(&rows[a as usize], &rows[b as usize]));
    // Row `order[i]` goes to `i`; a place whose row is in is marked `order[i] == i`.
    for start in 0..rows.len() {
        let mut at = start;
        loop {
            let from = order[at] as usize;
            order[at] = at as u32;
            if from == start || from == at {
                break;
            }
            rows.swap(at, from);
            at = from;
        }
    }
}

/// One code object unbundled from a fat binary or bundle file.
#[derive(Debug, Clone)]
pub struct Unbundled {
    /// Bundle (TU) index.
    pub bundle: u32,
    /// Target ID.
    pub target: String,
    /// The bundle entry ID (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+`).
    pub entry_id: String,
    /// The code object, exactly as `clang-offload-bundler --unbundle` writes it.
    pub bytes: Vec<u8>,
}

/// Every device code object of a fat binary (ELF with `.hip_fatbin`) or a bundle
/// file, in bundle order.
pub fn unbundle(data: &[u8]) -> std::result::Result<Vec<Unbundled>, String> {
    let (sec, bundles): (&[u8], Vec<BundleInfo>) = if elf::is_elf(data) {
        match elf::inspect(data).map_err(|e| e.to_string())? {
            ElfContent::Fat(fat) => {
                let span = fat.fatbin.ok_or(
                    "no .hip_fatbin section (a host-only binary? its kernels are in archives)",
                )?;
                let end = span.offset.saturating_add(span.size) as usize;
                let sec = data
                    .get(span.offset as usize..end)
                    .ok_or(".hip_fatbin runs past the end of the file")?;
                if fat.host_only {
                    return Err("a host-only binary: its kernels are in its archives".into());
                }
                (sec, fat.bundles)
            }
            _ => return Err("not a fat binary (no device code bundles)".into()),
        }
    } else if crate::coff::is_pe(data) {
        match crate::fatbin::read(data).map_err(|e| e.to_string())? {
            Some(f) => (f.section, f.bundles),
            None => return Err("a PE image without device code (or host-only)".into()),
        }
    } else if bundle::looks_like_bundle(data) {
        (data, bundle::walk_section(data).map_err(|e| e.to_string())?)
    } else {
        return Err("neither a fat binary (ELF or PE) nor an offload bundle".into());
    };
    let mut out = Vec::new();
    for b in &bundles {
        let un = b.uncompressed(sec, 1 << 34).map_err(|e| e.to_string())?;
        for (e, bytes) in b.code_objects(&un).map_err(|e| e.to_string())? {
            if let Some(target) = e.id.arch() {
                out.push(Unbundled {
                    bundle: b.index as u32,
                    target,
                    entry_id: e.id.triple.clone(),
                    bytes: bytes.to_vec(),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_sort_in_place_is_a_stable_sort() {
        // Pseudo-random keys with many ties; the second field records the input
        // order, which ties must keep.
        for n in [0usize, 1, 2, 3, 17, 1000] {
            let mut x = 12345u64;
            let rows: Vec<(u64, usize)> = (0..n)
                .map(|i| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((x >> 33) % 7, i)
                })
                .collect();
            let mut want = rows.clone();
            want.sort_by_key(|r| r.0);
            let mut got = rows;
            super::sort_in_place(&mut got, |a, b| a.0.cmp(&b.0));
            assert_eq!(got, want, "{n} rows");
        }
    }
}
