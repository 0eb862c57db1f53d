//! Packing a tree: device code into per-family `.kpack` archives, binaries rewritten
//! host-only, everything else copied faithfully, in one parallel pass.
//!
//! 1. **Plan** ([`plan_pack`]): scan the tree, list every kernel `(relpath#k, arch)`,
//!    assign each arch to a family, find what no family takes. Nothing is written.
//! 2. **Execute** ([`execute_pack`]): into a temporary sibling of the output, every fat
//!    binary is mapped once; each of its kernels goes (compressed on the worker
//!    thread, spooled to disk) to its family's archive writer; then the binary is
//!    rewritten host-only with a marker listing every family archive. Other files
//!    are copied with mode and mtime; symlinks stay symlinks; hard links stay hard
//!    links; empty directories are kept; special files are skipped and reported.
//! 3. **Finish**: archives are laid out (sorted, so output does not depend on thread
//!    count), the result is verified, and the temporary directory is renamed to the
//!    output. A cancelled or killed run leaves no output; a later run removes the
//!    temporary directory of a dead run.

use crate::bundle::BundleInfo;
use crate::elf::{self, ElfContent, ElfKind};
use crate::error::{Error, Result};
use crate::event::{CancelToken, EventSink};
use crate::family::Families;
use crate::kpack::Marker;
use crate::kpack::archive::{Archive, ArchiveMeta, ArchiveWriter, Scheme};
use crate::fsutil;
use crate::scan::{self, FileKind, FileReport, ScanOptions, TreeReport};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// How the output is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// One tree with `.kpack/<group>_<family>.kpack` at its root.
    Combined,
    /// `OUT/generic/…` plus one overlay `OUT/<family>/…` per family.
    Split,
}

/// What to do with code for archs outside every selected family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unassigned {
    /// Stop before writing anything.
    Error,
    /// Leave it out and report it.
    Drop,
}

/// Options of a pack.
#[derive(Debug, Clone)]
pub struct PackOptions {
    /// Group (product) name.
    pub group: String,
    /// Selected families.
    pub families: Families,
    /// Layout.
    pub layout: Layout,
    /// Policy for unassigned code.
    pub unassigned: Unassigned,
    /// Archive scheme.
    pub scheme: Scheme,
    /// zstd level.
    pub level: i32,
    /// Worker threads (0 = all cores).
    pub threads: usize,
    /// Replace an existing non-empty output.
    pub force: bool,
    /// Verify the output before renaming it into place.
    pub verify: bool,
}

/// A phase of one file's processing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Extracting and compressing kernels.
    Kernels,
    /// Rewriting host-only.
    Rewrite,
    /// Copying.
    Copy,
}

impl Phase {
    /// `kernels`, `rewrite`, `copy`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Kernels => "kernels",
            Phase::Rewrite => "rewrite",
            Phase::Copy => "copy",
        }
    }
}

/// Running totals of a pack, folded from its events: what the batch progress line
/// and the TUI panes both show.
#[derive(Debug, Clone, Default)]
pub struct PackTally {
    /// Entries to process.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Files done.
    pub done: u64,
    /// Bytes of the files done.
    pub done_bytes: u64,
    /// Per worker: the file it is on and the phase.
    pub workers: BTreeMap<usize, (String, Phase)>,
    /// Per family: kernels and stored bytes so far.
    pub families: BTreeMap<String, (u64, u64)>,
    /// Warnings so far.
    pub warnings: Vec<String>,
    /// The finishing stage, once the files are done.
    pub stage: &'static str,
}

impl PackTally {
    /// Fold one event in.
    pub fn apply(&mut self, e: PackEvent) {
        match e {
            PackEvent::Started { files, bytes } => {
                self.files = files;
                self.bytes = bytes;
            }
            PackEvent::Phase {
                worker,
                path,
                phase,
            } => {
                self.workers.insert(worker, (path, phase));
            }
            PackEvent::FileDone { bytes_in, .. } => {
                self.done += 1;
                self.done_bytes += bytes_in;
            }
            PackEvent::Family {
                family,
                kernels,
                stored,
            } => {
                self.families.insert(family, (kernels, stored));
            }
            PackEvent::Warning(w) => self.warnings.push(w),
            PackEvent::Finishing(stage) => self.stage = stage,
        }
    }
}

/// Progress of a pack, for the TUI and the batch reporter.
#[derive(Debug, Clone)]
pub enum PackEvent {
    /// The plan is ready: work to do.
    Started {
        /// Entries to process.
        files: u64,
        /// Their bytes.
        bytes: u64,
    },
    /// A worker began a phase on a file.
    Phase {
        /// Worker index.
        worker: usize,
        /// Relative path.
        path: String,
        /// What it does.
        phase: Phase,
    },
    /// A file is done.
    FileDone {
        /// Relative path.
        path: String,
        /// Bytes read.
        bytes_in: u64,
        /// Bytes written for it (archived kernels counted in their family).
        bytes_out: u64,
    },
    /// A family archive grew.
    Family {
        /// Family name.
        family: String,
        /// Kernels so far.
        kernels: u64,
        /// Stored bytes so far.
        stored: u64,
    },
    /// Something worth telling.
    Warning(String),
    /// Writing archives, verifying, renaming.
    Finishing(&'static str),
}

/// One kernel to archive.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedKernel {
    /// `relpath#k`.
    pub key: String,
    /// Target ID.
    pub arch: String,
    /// Uncompressed size.
    pub size: u64,
}

/// Per-family figures of a plan.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FamilyPlan {
    /// Family name.
    pub name: String,
    /// Archive path relative to the output.
    pub archive: String,
    /// Target IDs with code in the tree (the archive's `gfx_arches`).
    pub gfx_arches: Vec<String>,
    /// Kernels.
    pub kernels: u64,
    /// Raw bytes.
    pub raw_bytes: u64,
    /// Estimated archive size (from compressing a sample).
    pub estimated_bytes: u64,
    /// Kernel-database files of this family (split layout moves them to the overlay).
    pub database_files: u64,
}

/// What a pack will do.
#[derive(Debug, Clone, Serialize)]
pub struct PackPlan {
    /// Input tree.
    pub tree: String,
    /// Output.
    pub output: String,
    /// Layout.
    pub layout: Layout,
    /// Families.
    pub families: Vec<FamilyPlan>,
    /// Arch → number of kernels for archs no family takes.
    pub unassigned: BTreeMap<String, u64>,
    /// Fat binaries to rewrite.
    pub binaries: u64,
    /// Fat files that are copied unchanged (objects, archives, PE, refused).
    pub copied_fat: Vec<String>,
    /// Bytes of `.hip_fatbin` in the binaries (about what leaves them).
    pub device_bytes: u64,
    /// Input bytes.
    pub input_bytes: u64,
    /// Projected output bytes (host files + archive estimates).
    pub projected_bytes: u64,
    /// Problems found while scanning.
    pub diagnostics: Vec<String>,
    /// Kernels, by family index (not serialised).
    #[serde(skip)]
    kernels: Vec<Vec<PlannedKernel>>,
    #[serde(skip)]
    report: Option<TreeReport>,
}

/// What a pack did.
#[derive(Debug, Clone, Serialize)]
pub struct PackReport {
    /// The plan it carried out.
    pub plan: PackPlan,
    /// Archives written: path relative to the output, kernels, bytes.
    pub archives: Vec<(String, u64, u64)>,
    /// Files by class: count.
    pub files: BTreeMap<String, u64>,
    /// Bytes read.
    pub bytes_in: u64,
    /// Bytes in the output.
    pub bytes_out: u64,
    /// Seconds.
    pub seconds: f64,
    /// Warnings.
    pub warnings: Vec<String>,
    /// Verification faults (empty when verified or not asked).
    pub verify_faults: Vec<String>,
    /// Whether verification ran.
    pub verified: bool,
}

fn canonical_or_self(p: &Path) -> PathBuf {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
}

/// Where a kernel-database file goes in the split layout: `None` for files that are
/// not arch-specific (they stay generic), `Some(Some(i))` for family `i`,
/// `Some(None)` for an arch no selected family takes.
fn database_family(f: &FileReport, fams: &Families) -> Option<Option<usize>> {
    if f.kind != FileKind::KernelDatabase {
        return None;
    }
    f.arch.as_deref().map(|a| fams.assign(a))
}

/// Whether a scanned file is packed (rewritten with its kernels archived).
fn packable(f: &FileReport) -> bool {
    f.kind == FileKind::FatBinary
        && f.container.is_none()
        && matches!(
            f.elf_kind,
            Some(ElfKind::SharedLibrary | ElfKind::PieExecutable | ElfKind::Executable)
        )
        && !f.rdc_object
        && f.hard_link_of.is_none()
        && !f.bundles.is_empty()
}

/// The marker a binary at `rel` gets: one search path per family archive.
fn marker_for(rel: &str, opts: &PackOptions) -> Marker {
    let depth = rel.matches('/').count();
    let up = "../".repeat(depth);
    Marker {
        kpack_search_paths: opts
            .families
            .0
            .iter()
            .map(|f| format!("{up}.kpack/{}_{}.kpack", opts.group, f.name))
            .collect(),
        kernel_name: rel.to_string(),
    }
}

/// Compute what a pack will do (scans the tree; writes nothing).
pub fn plan_pack(tree: &Path, out: &Path, opts: &PackOptions) -> Result<PackPlan> {
    if opts.group.is_empty() || opts.group.contains(['/', '\\', '\0']) {
        return Err(Error::Invalid(format!(
            "group name {:?} cannot be used in a file name",
            opts.group
        )));
    }
    let tree_c = canonical_or_self(tree);
    let out_c = canonical_or_self(out);
    if out_c.starts_with(&tree_c) {
        return Err(Error::Invalid(format!(
            "the output {} is inside the input tree {}; choose a directory outside it",
            out.display(),
            tree.display()
        )));
    }
    if tree_c.starts_with(&out_c) {
        return Err(Error::Invalid(format!(
            "the input {} is inside the output {}",
            tree.display(),
            out.display()
        )));
    }
    let report = scan::scan(
        tree,
        &ScanOptions {
            threads: opts.threads,
        },
        &crate::event::NoEvents,
    )?;
    if !std::fs::metadata(tree).map(|m| m.is_dir()).unwrap_or(false) {
        return Err(Error::Invalid(format!(
            "{} is not a directory",
            tree.display()
        )));
    }
    let n = opts.families.0.len();
    let mut kernels: Vec<Vec<PlannedKernel>> = vec![Vec::new(); n];
    let mut unassigned: BTreeMap<String, u64> = BTreeMap::new();
    let mut copied_fat = Vec::new();
    let mut binaries = 0;
    let mut device_bytes = 0;
    let mut db_files = vec![0u64; n];
    for f in &report.files {
        if let Some(fam) = database_family(f, &opts.families) {
            match fam {
                Some(i) => db_files[i] += 1,
                None if opts.layout == Layout::Split => {
                    *unassigned
                        .entry(format!(
                            "{} (kernel database)",
                            f.arch.clone().unwrap_or_default()
                        ))
                        .or_default() += 1;
                }
                None => {}
            }
        }
        if f.kind == FileKind::FatBinary && f.hard_link_of.is_none() && !packable(f) {
            copied_fat.push(f.path.clone());
            continue;
        }
        if !packable(f) {
            continue;
        }
        binaries += 1;
        device_bytes += f.device_bytes;
        for b in &f.bundles {
            for t in &b.targets {
                match opts.families.assign(&t.arch) {
                    Some(i) => kernels[i].push(PlannedKernel {
                        key: format!("{}#{}", f.path, b.index),
                        arch: t.arch.clone(),
                        size: t.size,
                    }),
                    None => *unassigned.entry(t.arch.clone()).or_default() += 1,
                }
            }
        }
    }
    let families = opts
        .families
        .0
        .iter()
        .enumerate()
        .map(|(i, fam)| {
            let arches: BTreeSet<String> = kernels[i].iter().map(|k| k.arch.clone()).collect();
            FamilyPlan {
                name: fam.name.clone(),
                archive: archive_rel(opts, &fam.name),
                gfx_arches: arches.into_iter().collect(),
                kernels: kernels[i].len() as u64,
                raw_bytes: kernels[i].iter().map(|k| k.size).sum(),
                estimated_bytes: 0,
                database_files: db_files[i],
            }
        })
        .collect();
    let diagnostics = report
        .diagnostics
        .iter()
        .map(|d| format!("{}: {}", d.path, d.message))
        .collect();
    Ok(PackPlan {
        tree: tree.display().to_string(),
        output: out.display().to_string(),
        layout: opts.layout,
        families,
        unassigned,
        binaries,
        copied_fat,
        device_bytes,
        input_bytes: report.totals.bytes,
        projected_bytes: 0,
        diagnostics,
        kernels,
        report: Some(report),
    })
}

fn archive_rel(opts: &PackOptions, family: &str) -> String {
    let name = format!(".kpack/{}_{}.kpack", opts.group, family);
    match opts.layout {
        Layout::Combined => name,
        Layout::Split => format!("{family}/{name}"),
    }
}

/// Fill in the size estimates of a plan by compressing a sample of its kernels
/// (up to about 16 MiB spread over the tree) at the chosen level.
pub fn estimate(plan: &mut PackPlan, tree: &Path, opts: &PackOptions) {
    let Some(report) = &plan.report else { return };
    let by_path: BTreeMap<&str, &FileReport> =
        report.files.iter().map(|f| (f.path.as_str(), f)).collect();
    for (i, fp) in plan.families.iter_mut().enumerate() {
        if opts.scheme == Scheme::None || plan.kernels[i].is_empty() {
            fp.estimated_bytes = fp.raw_bytes + 64 * fp.kernels + 1024;
            continue;
        }
        let ks = &plan.kernels[i];
        let step = (ks.len() / 32).max(1);
        let (mut raw, mut packed) = (0u64, 0u64);
        for k in ks.iter().step_by(step) {
            if raw > 16 << 20 {
                break;
            }
            let (path, tu) = k.key.rsplit_once('#').unwrap_or((&k.key, "0"));
            let Some(f) = by_path.get(path) else { continue };
            let Ok(Some(map)) = fsutil::map_file(&tree.join(path)) else {
                continue;
            };
            let Ok(ElfContent::Fat(fat)) = elf::inspect(&map) else {
                continue;
            };
            let Some(span) = &fat.fatbin else { continue };
            let sec = &map[span.offset as usize..(span.offset + span.size) as usize];
            let Some(b) = fat.bundles.iter().find(|b| b.index.to_string() == tu) else {
                continue;
            };
            let _ = f;
            let Ok(un) = b.uncompressed(sec, 1 << 32) else {
                continue;
            };
            let Ok(cos) = b.code_objects(&un) else {
                continue;
            };
            if let Some((_, bytes)) = cos
                .iter()
                .find(|(e, _)| e.id.arch().as_deref() == Some(&k.arch))
                && let Ok(z) = crate::kpack::archive::encode_kernel(bytes, opts.scheme, opts.level)
            {
                raw += bytes.len() as u64;
                packed += z.len() as u64;
            }
        }
        let ratio = if raw == 0 {
            1.0
        } else {
            packed as f64 / raw as f64
        };
        fp.estimated_bytes = (fp.raw_bytes as f64 * ratio) as u64 + 8 * fp.kernels + 1024;
    }
    let archives: u64 = plan.families.iter().map(|f| f.estimated_bytes).sum();
    // Whole pages of .hip_fatbin leave the binaries; unassigned code is dropped too.
    plan.projected_bytes = plan
        .input_bytes
        .saturating_sub(plan.device_bytes / 4096 * 4096)
        + archives;
}

fn set_mtime(path: &Path, meta: &std::fs::Metadata) {
    if let (Ok(f), Ok(m)) = (
        std::fs::File::options().write(true).open(path),
        meta.modified(),
    ) {
        let _ = f.set_times(std::fs::FileTimes::new().set_modified(m));
    }
}

fn set_dir_mtime(path: &Path, meta: &std::fs::Metadata) {
    if let (Ok(f), Ok(m)) = (std::fs::File::open(path), meta.modified()) {
        let _ = f.set_times(std::fs::FileTimes::new().set_modified(m));
    }
}

/// Temporary output directories are named `.<out name>.kpack-tmp-<pid>` next to it.
fn tmp_prefix(out: &Path) -> Result<(PathBuf, String)> {
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let name = out
        .file_name()
        .ok_or_else(|| Error::Invalid(format!("{} has no file name", out.display())))?
        .to_string_lossy()
        .into_owned();
    Ok((parent, format!(".{name}.kpack-tmp-")))
}

/// Remove temporary directories left by runs that were killed (their pid is gone).
fn clean_stale(out: &Path, sink: &dyn EventSink<PackEvent>) -> Result<()> {
    let (parent, prefix) = tmp_prefix(out)?;
    let Ok(rd) = std::fs::read_dir(&parent) else {
        return Ok(());
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(&prefix)
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            sink.event(PackEvent::Warning(format!(
                "removing {} left by an interrupted run",
                e.path().display()
            )));
            std::fs::remove_dir_all(e.path()).map_err(|x| Error::io(e.path(), x))?;
        }
    }
    Ok(())
}

struct Worker<'a> {
    tree: &'a Path,
    stage: &'a Path,
    opts: &'a PackOptions,
    writers: &'a [ArchiveWriter],
    sink: &'a dyn EventSink<PackEvent>,
    warnings: &'a Mutex<Vec<String>>,
    bytes_out: &'a AtomicU64,
    kernel_counts: &'a [AtomicU64],
}

impl Worker<'_> {
    fn warn(&self, w: String) {
        self.sink.event(PackEvent::Warning(w.clone()));
        if let Ok(mut v) = self.warnings.lock() {
            v.push(w);
        }
    }

    fn dest(&self, rel: &str, db_family: Option<Option<usize>>) -> Option<PathBuf> {
        match (self.opts.layout, db_family) {
            (Layout::Combined, _) => Some(self.stage.join(rel)),
            (Layout::Split, Some(Some(i))) => {
                Some(self.stage.join(&self.opts.families.0[i].name).join(rel))
            }
            (Layout::Split, Some(None)) => None,
            (Layout::Split, None) => Some(self.stage.join("generic").join(rel)),
        }
    }

    fn copy(&self, src: &Path, dst: &Path, meta: &std::fs::Metadata) -> Result<u64> {
        let n = std::fs::copy(src, dst).map_err(|e| Error::io(src, e))?;
        std::fs::set_permissions(dst, meta.permissions()).map_err(|e| Error::io(dst, e))?;
        set_mtime(dst, meta);
        Ok(n)
    }

    fn process(&self, worker: usize, f: &FileReport, fams: &Families) -> Result<()> {
        let src = self.tree.join(&f.path);
        let db = database_family(f, fams);
        let Some(dst) = self.dest(&f.path, db) else {
            self.warn(format!(
                "{}: kernel database for {} left out (no selected family)",
                f.path,
                f.arch.clone().unwrap_or_default()
            ));
            return Ok(());
        };
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        match f.kind {
            FileKind::Symlink => {
                let target = std::fs::read_link(&src).map_err(|e| Error::io(&src, e))?;
                std::os::unix::fs::symlink(&target, &dst).map_err(|e| Error::io(&dst, e))?;
            }
            FileKind::Other => {
                self.warn(format!(
                    "{}: special file ({}) skipped",
                    f.path,
                    f.file_type.unwrap_or("unknown")
                ));
            }
            _ if f.hard_link_of.is_some() => {} // second pass
            _ => {
                let meta = std::fs::metadata(&src).map_err(|e| Error::io(&src, e))?;
                let out = if packable(f) {
                    self.pack_binary(worker, f, &src, &dst, &meta)?
                } else {
                    self.sink.event(PackEvent::Phase {
                        worker,
                        path: f.path.clone(),
                        phase: Phase::Copy,
                    });
                    self.copy(&src, &dst, &meta)?
                };
                self.bytes_out.fetch_add(out, Ordering::Relaxed);
                self.sink.event(PackEvent::FileDone {
                    path: f.path.clone(),
                    bytes_in: f.size,
                    bytes_out: out,
                });
            }
        }
        Ok(())
    }

    fn pack_binary(
        &self,
        worker: usize,
        f: &FileReport,
        src: &Path,
        dst: &Path,
        meta: &std::fs::Metadata,
    ) -> Result<u64> {
        self.sink.event(PackEvent::Phase {
            worker,
            path: f.path.clone(),
            phase: Phase::Kernels,
        });
        let map = fsutil::map_file(src)
            .map_err(|e| Error::io(src, e))?
            .ok_or_else(|| Error::Invalid(format!("{}: empty", f.path)))?;
        let data: &[u8] = &map;
        let ElfContent::Fat(fat) = elf::inspect(data).map_err(|e| Error::format(src, e))? else {
            return Err(Error::Invalid(format!(
                "{}: no longer a fat binary",
                f.path
            )));
        };
        // Rewrite first (in memory): a binary that cannot be rewritten is copied
        // whole and none of its kernels is archived.
        self.sink.event(PackEvent::Phase {
            worker,
            path: f.path.clone(),
            phase: Phase::Rewrite,
        });
        let rewritten = match elf::rewrite::plan_rewrite(data, &marker_for(&f.path, self.opts)) {
            Ok(r) => r,
            Err(e) => {
                self.warn(format!(
                    "{}: not packed, copied with its device code: {e}",
                    f.path
                ));
                return self.copy(src, dst, meta);
            }
        };
        self.sink.event(PackEvent::Phase {
            worker,
            path: f.path.clone(),
            phase: Phase::Kernels,
        });
        let span = fat
            .fatbin
            .clone()
            .ok_or_else(|| Error::Invalid(format!("{}: no .hip_fatbin", f.path)))?;
        let sec = &data[span.offset as usize..(span.offset + span.size) as usize];
        for b in &fat.bundles {
            self.archive_bundle(f, b, sec)?;
            // Its pages are consumed: let them leave the resident set.
            fsutil::release_range(
                &map,
                span.offset as usize + b.offset as usize,
                b.stored_size as usize,
            );
        }
        crate::fsutil::write_new(dst, &rewritten.bytes, meta)?;
        Ok(rewritten.bytes.len() as u64)
    }

    fn archive_bundle(&self, f: &FileReport, b: &BundleInfo, sec: &[u8]) -> Result<()> {
        let un = b
            .uncompressed(sec, 1 << 34)
            .map_err(|e| Error::format(self.tree.join(&f.path), e))?;
        let cos = b
            .code_objects(&un)
            .map_err(|e| Error::format(self.tree.join(&f.path), e))?;
        for (entry, bytes) in cos {
            let Some(arch) = entry.id.arch() else {
                continue;
            };
            let Some(i) = self.opts.families.assign(&arch) else {
                continue;
            };
            let key = format!("{}#{}", f.path, b.index);
            let mut meta = BTreeMap::new();
            meta.insert("target".to_string(), entry.id.triple.clone());
            self.writers[i].add_with_metadata(&key, &arch, bytes, meta)?;
            let n = self.kernel_counts[i].fetch_add(1, Ordering::Relaxed) + 1;
            let (_, stored) = self.writers[i].progress();
            self.sink.event(PackEvent::Family {
                family: self.opts.families.0[i].name.clone(),
                kernels: n,
                stored,
            });
        }
        Ok(())
    }
}

/// Carry out a plan. On any error or cancellation the temporary output is removed
/// and the output is left as it was.
pub fn execute_pack(
    plan: PackPlan,
    tree: &Path,
    out: &Path,
    opts: &PackOptions,
    sink: &dyn EventSink<PackEvent>,
    cancel: &CancelToken,
) -> Result<PackReport> {
    if !plan.unassigned.is_empty() && opts.unassigned == Unassigned::Error {
        let list: Vec<String> = plan
            .unassigned
            .iter()
            .map(|(a, n)| format!("{a} ({n})"))
            .collect();
        return Err(Error::Invalid(format!(
            "code for archs outside the selected families: {}; add a --family for them or pass --unassigned drop",
            list.join(", ")
        )));
    }
    if out.exists() {
        let empty = std::fs::read_dir(out)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !empty && !opts.force {
            return Err(Error::Invalid(format!(
                "{} exists and is not empty; pass --force to replace it",
                out.display()
            )));
        }
    }
    clean_stale(out, sink)?;
    let start = Instant::now();
    let (parent, prefix) = tmp_prefix(out)?;
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let stage = parent.join(format!("{prefix}{}", std::process::id()));
    if stage.exists() {
        std::fs::remove_dir_all(&stage).map_err(|e| Error::io(&stage, e))?;
    }
    std::fs::create_dir(&stage).map_err(|e| Error::io(&stage, e))?;
    let result = run_stage(&plan, tree, &stage, opts, sink, cancel);
    let (archives, warnings, bytes_out, files) = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&stage);
            return Err(e);
        }
    };
    let mut verify_faults = Vec::new();
    if opts.verify {
        sink.event(PackEvent::Finishing("verifying"));
        verify_faults = verify_tree(&stage, Some(&plan), opts.layout).faults;
        if !verify_faults.is_empty() {
            let _ = std::fs::remove_dir_all(&stage);
            return Err(Error::Invalid(format!(
                "the packed tree fails verification, nothing was written:\n  {}",
                verify_faults.join("\n  ")
            )));
        }
    }
    if cancel.is_cancelled() {
        let _ = std::fs::remove_dir_all(&stage);
        return Err(Error::Invalid("cancelled".into()));
    }
    sink.event(PackEvent::Finishing("renaming into place"));
    let placed = if out.exists() && opts.force {
        let old = parent.join(format!("{prefix}{}-old", std::process::id()));
        std::fs::rename(out, &old)
            .and_then(|()| std::fs::rename(&stage, out))
            .map(|()| {
                let _ = std::fs::remove_dir_all(&old);
            })
    } else {
        // rename(2) replaces only an empty directory: another pack that finished
        // first keeps its output.
        std::fs::rename(&stage, out)
    };
    if let Err(e) = placed {
        let _ = std::fs::remove_dir_all(&stage);
        if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY) | Some(libc::EEXIST)) {
            return Err(Error::Invalid(format!(
                "{} appeared while packing (another pack finished first) and is kept; \
                 pass --force to replace it",
                out.display()
            )));
        }
        return Err(Error::io(out, e));
    }
    Ok(PackReport {
        bytes_in: plan.input_bytes,
        plan,
        archives,
        files,
        bytes_out,
        seconds: start.elapsed().as_secs_f64(),
        warnings,
        verify_faults,
        verified: opts.verify,
    })
}

type StageResult = (
    Vec<(String, u64, u64)>,
    Vec<String>,
    u64,
    BTreeMap<String, u64>,
);

fn run_stage(
    plan: &PackPlan,
    tree: &Path,
    stage: &Path,
    opts: &PackOptions,
    sink: &dyn EventSink<PackEvent>,
    cancel: &CancelToken,
) -> Result<StageResult> {
    let report = plan
        .report
        .as_ref()
        .ok_or_else(|| Error::Invalid("plan has no scan".into()))?;
    let fams = &opts.families;
    // Directories first (empty ones kept), in the layout's place.
    let dirs: Vec<PathBuf> = walk_dirs(tree)?;
    let roots: Vec<PathBuf> = match opts.layout {
        Layout::Combined => vec![stage.to_path_buf()],
        Layout::Split => vec![stage.join("generic")],
    };
    for r in &roots {
        for d in &dirs {
            std::fs::create_dir_all(r.join(d)).map_err(|e| Error::io(r.join(d), e))?;
        }
    }
    let mut writers = Vec::new();
    for (i, fam) in fams.0.iter().enumerate() {
        let p = stage.join(&plan.families[i].archive);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
        }
        let meta = ArchiveMeta {
            group_name: opts.group.clone(),
            gfx_arch_family: fam.name.clone(),
            gfx_arches: plan.families[i].gfx_arches.clone(),
        };
        writers.push(ArchiveWriter::create(&p, meta, opts.scheme, opts.level)?);
    }
    let total_bytes: u64 = report
        .files
        .iter()
        .filter(|f| f.hard_link_of.is_none() && f.kind != FileKind::Symlink)
        .map(|f| f.size)
        .sum();
    sink.event(PackEvent::Started {
        files: report.files.len() as u64,
        bytes: total_bytes,
    });
    let warnings = Mutex::new(Vec::new());
    let bytes_out = AtomicU64::new(0);
    let kernel_counts: Vec<AtomicU64> = fams.0.iter().map(|_| AtomicU64::new(0)).collect();
    let w = Worker {
        tree,
        stage,
        opts,
        writers: &writers,
        sink,
        warnings: &warnings,
        bytes_out: &bytes_out,
        kernel_counts: &kernel_counts,
    };
    // Largest files first, one per task, so the long ones start early and the cores
    // stay busy to the end. (No nested parallel loops: a worker waiting on one would
    // steal other files, and the binaries in flight would grow with the tree.)
    let mut order: Vec<&FileReport> = report.files.iter().collect();
    order.sort_by(|a, b| b.size.cmp(&a.size).then(a.path.cmp(&b.path)));
    let run = || -> Result<()> {
        order.par_iter().with_max_len(1).try_for_each(|f| {
            if cancel.is_cancelled() {
                return Err(Error::Invalid("cancelled".into()));
            }
            let worker = rayon::current_thread_index().unwrap_or(0);
            w.process(worker, f, fams).map_err(|e| match e {
                Error::Invalid(m) if m == "cancelled" => Error::Invalid(m),
                other => Error::Invalid(format!("{}: {other}", f.path)),
            })
        })
    };
    if opts.threads > 0 {
        rayon::ThreadPoolBuilder::new()
            .num_threads(opts.threads)
            .build()
            .map_err(|e| Error::Invalid(format!("cannot start {} threads: {e}", opts.threads)))?
            .install(run)?;
    } else {
        run()?;
    }
    // Hard links: to the copy of the first path of the inode.
    for f in report.files.iter().filter(|f| f.hard_link_of.is_some()) {
        let first = f.hard_link_of.as_deref().unwrap_or_default();
        let (Some(a), Some(b)) = (
            w.dest(first, database_family(f, fams)),
            w.dest(&f.path, database_family(f, fams)),
        ) else {
            continue;
        };
        if a.exists() {
            std::fs::hard_link(&a, &b).map_err(|e| Error::io(&b, e))?;
        }
    }
    sink.event(PackEvent::Finishing("writing archives"));
    let mut archives = Vec::new();
    for (i, wr) in writers.into_iter().enumerate() {
        let s = wr.finish()?;
        archives.push((plan.families[i].archive.clone(), s.kernels, s.file_size));
        bytes_out.fetch_add(s.file_size, Ordering::Relaxed);
    }
    // Directory mtimes last (writing into them changed them).
    for r in &roots {
        for d in dirs.iter().rev() {
            if let Ok(m) = std::fs::metadata(tree.join(d)) {
                set_dir_mtime(&r.join(d), &m);
            }
        }
    }
    let mut files = BTreeMap::new();
    for f in &report.files {
        *files
            .entry(if packable(f) {
                "packed binary".to_string()
            } else {
                f.kind.name().to_string()
            })
            .or_default() += 1;
    }
    let warnings = warnings.into_inner().unwrap_or_default();
    Ok((archives, warnings, bytes_out.load(Ordering::Relaxed), files))
}

fn walk_dirs(tree: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(tree)
        .follow_links(false)
        .sort_by_file_name()
        .min_depth(1)
    {
        let e = e.map_err(|e| Error::Invalid(format!("{}: {e}", tree.display())))?;
        if e.file_type().is_dir() {
            out.push(
                e.path()
                    .strip_prefix(tree)
                    .unwrap_or(e.path())
                    .to_path_buf(),
            );
        }
    }
    Ok(out)
}

/// The verdict on a packed tree.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TreeVerdict {
    /// Problems that break loading (non-empty = not sound).
    pub faults: Vec<String>,
    /// Things worth knowing that break nothing.
    pub notes: Vec<String>,
}

/// Check a packed tree: archives sound; every host-only binary's marker resolves to
/// an existing archive; for every archive and arch where a binary has kernels, it
/// has all of its TUs. With the plan, every planned kernel must be in its family
/// archive and every archive's `gfx_arches` must be exactly the arches packed.
pub fn verify_tree(root: &Path, plan: Option<&PackPlan>, layout: Layout) -> TreeVerdict {
    let mut faults = Vec::new();
    let mut notes = Vec::new();
    let report = match scan::scan(root, &ScanOptions::default(), &crate::event::NoEvents) {
        Ok(r) => r,
        Err(e) => {
            return TreeVerdict {
                faults: vec![e.to_string()],
                notes,
            };
        }
    };
    let mut archives: BTreeMap<String, Archive> = BTreeMap::new();
    for f in report.files.iter().filter(|f| f.kind == FileKind::Kpack) {
        match Archive::open(&root.join(&f.path)) {
            Ok(a) => {
                for fault in a.verify() {
                    faults.push(format!("{}: {fault}", f.path));
                }
                archives.insert(f.path.clone(), a);
            }
            Err(e) => faults.push(e.to_string()),
        }
    }
    // In the split layout, binaries live under generic/ and archives under <family>/:
    // resolve markers as in the merged install.
    let norm = |p: &str| -> String {
        match layout {
            Layout::Combined => p.to_string(),
            Layout::Split => p
                .split_once('/')
                .map_or(p.to_string(), |(_, rest)| rest.to_string()),
        }
    };
    let merged: BTreeMap<String, &Archive> = archives.iter().map(|(p, a)| (norm(p), a)).collect();
    for f in report
        .files
        .iter()
        .filter(|f| f.kind == FileKind::HostOnlyBinary && f.hard_link_of.is_none())
    {
        let Some(m) = &f.marker else {
            faults.push(format!(
                "{}: host-only binary without a readable marker",
                f.path
            ));
            continue;
        };
        let rel = norm(&f.path);
        let dir = Path::new(&rel)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let mut reachable = Vec::new();
        for sp in &m.kpack_search_paths {
            if sp.contains("@GFXARCH@") || sp.starts_with('/') {
                continue;
            }
            let joined = normalize(&dir.join(sp));
            if let Some(a) = merged.get(&joined) {
                reachable.push((joined, *a));
            }
        }
        if reachable.is_empty() {
            faults.push(format!(
                "{}: no archive of its marker exists ({:?})",
                f.path, m.kpack_search_paths
            ));
            continue;
        }
        // For every archive and arch where the binary has any kernel, it must have
        // them all (the runtime fails hard on a missing key once an archive matched).
        let co: BTreeSet<u64> = f
            .wrappers
            .iter()
            .map(|w| w.reserved & 0xffff_ffff)
            .collect();
        let keys: Vec<String> = co
            .iter()
            .map(|c| format!("{}#{c}", m.kernel_name))
            .collect();
        let mut any = false;
        for (path, a) in &reachable {
            let archs: BTreeSet<&str> = a
                .index
                .kernels
                .iter()
                .filter(|k| keys.contains(&k.key))
                .map(|k| k.arch.as_str())
                .collect();
            any |= !archs.is_empty();
            for arch in archs {
                for key in &keys {
                    if a.entry(key, arch).is_none() {
                        faults.push(format!(
                            "{}: {path} has kernels for {arch} but not {key}",
                            f.path
                        ));
                    }
                }
            }
        }
        if !any {
            notes.push(format!(
                "{}: no reachable archive holds kernels for it (its archs were dropped?)",
                f.path
            ));
        }
    }
    if let Some(plan) = plan {
        for (i, fp) in plan.families.iter().enumerate() {
            let Some(a) = archives.get(&fp.archive) else {
                faults.push(format!("archive {} is missing", fp.archive));
                continue;
            };
            for k in &plan.kernels[i] {
                if a.entry(&k.key, &k.arch).is_none_or(|e| e.size != k.size) {
                    faults.push(format!(
                        "{}: {} @ {} missing or of the wrong size",
                        fp.archive, k.key, k.arch
                    ));
                }
            }
            if a.index.meta.gfx_arches != fp.gfx_arches {
                faults.push(format!(
                    "{}: gfx_arches {:?}, expected {:?}",
                    fp.archive, a.index.meta.gfx_arches, fp.gfx_arches
                ));
            }
        }
        // Binaries whose code all went to dropped archs are expected to have none.
        let planned: BTreeSet<&str> = plan
            .kernels
            .iter()
            .flatten()
            .filter_map(|k| k.key.rsplit_once('#').map(|(p, _)| p))
            .collect();
        notes.retain(|n| {
            n.split_once(':')
                .is_some_and(|(p, _)| planned.contains(norm(p).as_str()))
        });
    }
    TreeVerdict { faults, notes }
}

fn normalize(p: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_folds_events() {
        let mut t = PackTally::default();
        for e in [
            PackEvent::Started {
                files: 3,
                bytes: 300,
            },
            PackEvent::Phase {
                worker: 1,
                path: "a".into(),
                phase: Phase::Kernels,
            },
            PackEvent::FileDone {
                path: "a".into(),
                bytes_in: 100,
                bytes_out: 10,
            },
            PackEvent::FileDone {
                path: "b".into(),
                bytes_in: 50,
                bytes_out: 50,
            },
            PackEvent::Family {
                family: "gfx90X".into(),
                kernels: 2,
                stored: 70,
            },
            PackEvent::Family {
                family: "gfx90X".into(),
                kernels: 3,
                stored: 90,
            },
            PackEvent::Warning("w".into()),
            PackEvent::Finishing("verifying"),
        ] {
            t.apply(e);
        }
        assert_eq!((t.files, t.bytes, t.done, t.done_bytes), (3, 300, 2, 150));
        assert_eq!(t.families["gfx90X"], (3, 90));
        assert_eq!(t.workers[&1], ("a".to_string(), Phase::Kernels));
        assert_eq!(t.warnings, vec!["w"]);
        assert_eq!(t.stage, "verifying");
    }
}
