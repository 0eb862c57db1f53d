//! `split`: the map step of ROCm's build (workflows §1). One artifact directory
//! (`artifact_manifest.txt` plus one directory per stage prefix) becomes
//! `<ap>_generic/` (host code, host-only binaries, everything not arch-specific) and
//! one `<ap>_<target>/` per target ID (its archive under the first prefix that
//! contributed kernels, and its kernel-database files).
//!
//! Like the reference: database handlers take precedence over fat-binary detection,
//! `--gpu-targets` filters code objects (by processor) and database files (by base
//! arch), TOC keys are `<prefix>/<rel>#<TU>`, every archive holds one target ID with
//! `zstd-per-kernel`, and every binary's marker is
//! `("../" × depth) + ".kpack/<ap>_@GFXARCH@.kpack"`, identical in every shard.
//! Better than it: output is deterministic (sorted keys, whatever the walk order or
//! thread count), built in a staging directory, checked, and only then renamed into
//! place; existing artifacts are never merged into silently.

use super::manifest::{MANIFEST, manifest_text, read_manifest};
use crate::bundle;
use crate::error::{Error, Result};
use crate::event::EventSink;
use crate::fsutil;
use crate::kerneldb::{Database, base_arch};
use crate::kpack::Marker;
use crate::kpack::archive::{Archive, ArchiveMeta, ArchiveWriter, Scheme, safe_arch};
use crate::kpack::ledger::{LedgerBinary, LedgerFile, LedgerKernel};
use crate::kpack::resolve::GFXARCH;
use crate::pack::{PackEvent, Phase};
use crate::scan::{self, FileKind, FileReport, ScanOptions, Severity};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// What to split, and how.
#[derive(Debug, Clone)]
pub struct SplitOptions {
    /// `<artifact>_<component>`: names the artifacts and archives (`blas_lib`).
    pub artifact_prefix: String,
    /// Keep only these targets (processors, features ignored); `None` keeps all.
    pub gpu_targets: Option<Vec<String>>,
    /// Kernel-database handlers in precedence order (none: no database splitting).
    pub databases: Vec<Database>,
    /// zstd level of the archives.
    pub level: i32,
    /// Worker threads (0 = all cores).
    pub threads: usize,
    /// Replace artifacts of this prefix that already exist in the output.
    pub force: bool,
}

/// One artifact written.
#[derive(Debug, Clone, Serialize)]
pub struct SplitArtifact {
    /// Directory name (`blas_lib_gfx942`).
    pub name: String,
    /// Its target (`None` for the generic artifact).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Its manifest.
    pub prefixes: Vec<String>,
    /// Files and symlinks in it (the archive included).
    pub files: u64,
    /// Kernel-database files.
    pub database_files: u64,
    /// The archive, relative to the artifact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,
    /// Code objects in the archive.
    pub code_objects: u64,
    /// Their uncompressed bytes.
    pub raw_bytes: u64,
    /// Archive file size.
    pub archive_bytes: u64,
}

/// What a split did.
#[derive(Debug, Clone, Serialize)]
pub struct SplitReport {
    /// Input.
    pub artifact_dir: PathBuf,
    /// Output directory (holding the artifacts).
    pub output: PathBuf,
    /// The artifact prefix.
    pub artifact_prefix: String,
    /// Prefixes processed, in manifest order.
    pub prefixes: Vec<String>,
    /// Manifest prefixes without a directory (skipped, as the reference does).
    pub missing_prefixes: Vec<String>,
    /// Artifacts written: generic first, then targets in name order.
    pub artifacts: Vec<SplitArtifact>,
    /// Fat binaries found.
    pub fat_binaries: u64,
    /// Fat binaries rewritten host-only.
    pub rewritten: u64,
    /// Code objects archived.
    pub code_objects: u64,
    /// Code objects of targets not in `--gpu-targets` (left to the shard building them).
    pub skipped_code_objects: u64,
    /// What `--gpu-targets` left to other shards, by name: `prefix/path: bundle #N for
    /// target` and `prefix/path: database file for target`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_to_other_shards: Vec<String>,
    /// Database files of targets not in `--gpu-targets`.
    pub skipped_databases: u64,
    /// Input bytes (regular files).
    pub bytes_in: u64,
    /// Output bytes.
    pub bytes_out: u64,
    /// Things worth telling.
    pub warnings: Vec<String>,
}

/// The `.kpack` file name of a target's archive.
pub fn archive_name(ap: &str, target: &str) -> String {
    format!("{ap}_{target}.kpack")
}

/// The marker of a binary at `rel` (relative to its prefix `prefix`).
pub fn marker_for(ap: &str, prefix: &str, rel: &str) -> Marker {
    let up = "../".repeat(rel.matches('/').count());
    Marker {
        kpack_search_paths: vec![format!("{up}.kpack/{ap}_{GFXARCH}.kpack")],
        kernel_name: format!("{prefix}/{rel}"),
    }
}

/// Check a name that becomes a directory or file name.
pub(crate) fn check_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty()
        || name.starts_with('.')
        || name.contains(['/', '\\', '\0'])
        || name.len() > 200
    {
        return Err(Error::Invalid(format!(
            "{what} {name:?} cannot be used in a file name (empty, leading '.', '/', '\\', \
             NUL or longer than 200 bytes)"
        )));
    }
    Ok(())
}

enum Job {
    Copy,
    Symlink,
    Special,
    Database(String),
    Binary(Vec<(u32, String, String)>),
}

struct FileJob {
    prefix: String,
    report: FileReport,
    job: Job,
}

/// Split `artifact_dir` into `out` (created if needed).
pub fn split(
    artifact_dir: &Path,
    out: &Path,
    opts: &SplitOptions,
    sink: &dyn EventSink<PackEvent>,
) -> Result<SplitReport> {
    let ap = opts.artifact_prefix.as_str();
    check_name("artifact prefix", ap)?;
    let meta = std::fs::metadata(artifact_dir).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::Invalid(format!("{} does not exist", artifact_dir.display()))
        } else {
            Error::io(artifact_dir, e)
        }
    })?;
    if !meta.is_dir() {
        return Err(Error::Invalid(format!(
            "{} is not a directory",
            artifact_dir.display()
        )));
    }
    crate::fsutil::check_apart(artifact_dir, out)?;
    let wanted: Option<BTreeSet<String>> = match &opts.gpu_targets {
        None => None,
        Some(ts) => {
            let mut set = BTreeSet::new();
            for t in ts {
                if !t.starts_with("gfx") {
                    return Err(Error::Invalid(format!(
                        "--gpu-targets: {t:?} is not a target (gfx…)"
                    )));
                }
                set.insert(base_arch(t));
            }
            Some(set)
        }
    };
    let manifest = read_manifest(artifact_dir)?;
    let mut warnings = Vec::new();
    let mut prefixes = Vec::new();
    let mut missing = Vec::new();
    let mut jobs: Vec<FileJob> = Vec::new();
    let mut skipped_kernels = 0u64;
    let mut skipped_databases = 0u64;
    // What --gpu-targets leaves to the shards building those targets, by name (in
    // the report only: a target artifact is the same whichever shard wrote it, so
    // that combined shards equal one whole split).
    let mut left: Vec<String> = Vec::new();
    for p in &manifest {
        let dir = artifact_dir.join(p);
        // The prefix is data: it names a directory inside the artifact, never one a
        // symlink on the way leads to.
        crate::fsutil::real_dirs_below(artifact_dir, &dir).map_err(|why| {
            Error::Invalid(format!(
                "{}: prefix {p} of {MANIFEST} does not stay inside the artifact: {why}",
                artifact_dir.display()
            ))
        })?;
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::Invalid(format!(
                    "{}: prefix {p} of {MANIFEST} is not a directory",
                    artifact_dir.display()
                )));
            }
            Err(_) => {
                warnings.push(format!("prefix {p}: no such directory, skipped"));
                missing.push(p.clone());
                continue;
            }
        }
        prefixes.push(p.clone());
        let report = scan::scan(
            &dir,
            &ScanOptions {
                threads: opts.threads,
                databases: Some(opts.databases.clone()),
                deep: false,
            },
            &crate::event::NoEvents,
        )?;
        let damaged: Vec<String> = report
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| format!("{p}/{}: {}", d.path, d.message))
            .collect();
        if !damaged.is_empty() {
            return Err(Error::Invalid(format!(
                "{} damaged file(s) in the artifact; nothing written:\n  {}",
                damaged.len(),
                damaged.join("\n  ")
            )));
        }
        let by_path: BTreeMap<&str, &FileReport> =
            report.files.iter().map(|f| (f.path.as_str(), f)).collect();
        for f in &report.files {
            // A second name of a hard link is a file of its own in the output (as a
            // copy would make it), classified like the first.
            let src = f
                .hard_link_of
                .as_deref()
                .and_then(|first| by_path.get(first).copied())
                .unwrap_or(f);
            let job = match src.kind {
                FileKind::Symlink => Job::Symlink,
                FileKind::Other => Job::Special,
                FileKind::KernelDatabase => {
                    let arch = src.arch.clone().unwrap_or_default();
                    if wanted.as_ref().is_some_and(|w| !w.contains(&arch)) {
                        skipped_databases += 1;
                        left.push(format!("{p}/{}: database file for {arch}", f.path));
                        continue;
                    }
                    Job::Database(arch)
                }
                FileKind::FatBinary if crate::pack::rewritable(src) => {
                    let mut kernels = Vec::new();
                    for b in &src.bundles {
                        for t in &b.targets {
                            let keep = wanted.as_ref().is_none_or(|w| {
                                w.contains(bundle::target::base_processor(&t.arch))
                            });
                            if keep {
                                kernels.push((b.index as u32, t.arch.clone(), t.triple.clone()));
                            } else {
                                skipped_kernels += 1;
                                left.push(format!(
                                    "{p}/{}: bundle #{} for {}",
                                    f.path, b.index, t.arch
                                ));
                            }
                        }
                    }
                    Job::Binary(kernels)
                }
                FileKind::FatBinary => {
                    warnings.push(format!(
                        "{p}/{}: {} kept whole in the generic artifact (only ELF executables \
                         and shared libraries are split)",
                        f.path,
                        src.container.map_or("fat binary", |c| c.describe())
                    ));
                    Job::Copy
                }
                _ => Job::Copy,
            };
            let mut report = f.clone();
            if f.hard_link_of.is_some() {
                report.kind = src.kind;
                report.hard_link_of = None;
            }
            jobs.push(FileJob {
                prefix: p.clone(),
                report,
                job,
            });
        }
    }

    // Targets, their artifacts and where their archives go.
    let mut kernel_prefixes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut artifact_prefixes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut fat_binaries = 0u64;
    for j in &jobs {
        match &j.job {
            Job::Binary(ks) => {
                fat_binaries += 1;
                for (_, arch, _) in ks {
                    kernel_prefixes
                        .entry(arch.clone())
                        .or_default()
                        .insert(j.prefix.clone());
                    artifact_prefixes
                        .entry(arch.clone())
                        .or_default()
                        .insert(j.prefix.clone());
                }
            }
            Job::Database(arch) => {
                artifact_prefixes
                    .entry(arch.clone())
                    .or_default()
                    .insert(j.prefix.clone());
            }
            _ => {}
        }
    }
    // Feature variants of one processor share one artifact and one archive, named by
    // the processor: side by side, `x_gfx90a:xnack-` would shadow `x_gfx90a` for
    // first-match loaders on xnack- devices (ROCm 7.14); in one archive, TOC aliases
    // list plain code under every variant.
    let units = crate::kpack::alias::variant_units(artifact_prefixes.keys().map(String::as_str));
    let rekey = |m: BTreeMap<String, BTreeSet<String>>| {
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (t, ps) in m {
            out.entry(units[&t].clone()).or_default().extend(ps);
        }
        out
    };
    let kernel_prefixes = rekey(kernel_prefixes);
    let artifact_prefixes = rekey(artifact_prefixes);
    for t in artifact_prefixes.keys() {
        safe_arch(t).map_err(|e| Error::Invalid(format!("artifact {ap}_{t}: {e}")))?;
        check_name("artifact", &format!("{ap}_{t}"))?;
    }
    if fat_binaries > 0
        && kernel_prefixes.is_empty()
        && let Some(ts) = &opts.gpu_targets
    {
        return Err(Error::Invalid(format!(
            "found {fat_binaries} fat binaries, but no device code objects matched \
             --gpu-targets ({}); refusing to emit an untransformed generic artifact",
            ts.join(", ")
        )));
    }
    let rewrite = !kernel_prefixes.is_empty();

    // Output: refuse to merge into existing artifacts of this prefix.
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let generic_name = format!("{ap}_generic");
    let names: Vec<String> = std::iter::once(generic_name.clone())
        .chain(artifact_prefixes.keys().map(|t| format!("{ap}_{t}")))
        .collect();
    super::check_free(out, &names, opts.force)?;
    let (stage, stale) = crate::fsutil::stage_for(out, "split")?;
    for p in stale {
        sink.event(PackEvent::Warning(format!(
            "removed {} left by an interrupted run",
            p.display()
        )));
    }
    let st = &stage.path().to_path_buf();

    let total_bytes: u64 = jobs
        .iter()
        .filter(|j| matches!(j.job, Job::Copy | Job::Database(_) | Job::Binary(_)))
        .map(|j| j.report.size)
        .sum();
    sink.event(PackEvent::Started {
        files: jobs.len() as u64,
        bytes: total_bytes,
    });

    let mut writers: BTreeMap<String, (ArchiveWriter, String)> = BTreeMap::new();
    for (t, ps) in &kernel_prefixes {
        let first = ps.iter().next().cloned().unwrap_or_default();
        let rel = format!("{first}/.kpack/{}", archive_name(ap, t));
        let path = st.join(format!("{ap}_{t}")).join(&rel);
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
        }
        // A processor's archive lists what its variants hold, settled at the end.
        let merged = units.iter().any(|(target, u)| u == t && target != t);
        let meta = ArchiveMeta {
            group_name: ap.to_string(),
            gfx_arch_family: t.clone(),
            gfx_arches: if merged { Vec::new() } else { vec![t.clone()] },
        };
        let w = ArchiveWriter::create(&path, meta, Scheme::ZstdPerKernel, opts.level)?.resolving();
        writers.insert(t.clone(), (w, rel));
    }

    let ctx = Ctx {
        ap,
        units: &units,
        src: artifact_dir,
        stage: st,
        writers: &writers,
        rewrite,
        sink,
        bytes_out: AtomicU64::new(0),
        kernels: AtomicU64::new(0),
        rewritten: AtomicU64::new(0),
        warnings: Mutex::new(Vec::new()),
        ledger: Mutex::new(Vec::new()),
        db_files: Mutex::new(Vec::new()),
        counts: Mutex::new(BTreeMap::new()),
    };
    // Largest first, one file per task: the big binaries start at once and the small
    // files fill the gaps (as pack does).
    let mut order: Vec<&FileJob> = jobs.iter().collect();
    order.sort_by(|a, b| {
        b.report
            .size
            .cmp(&a.report.size)
            .then_with(|| (&a.prefix, &a.report.path).cmp(&(&b.prefix, &b.report.path)))
    });
    let run = || -> Result<()> {
        order
            .par_iter()
            .with_max_len(1)
            .try_for_each(|j| ctx.process(rayon::current_thread_index().unwrap_or(0), j))
    };
    crate::parallel::on_threads(opts.threads, run)??;
    let Ctx {
        bytes_out,
        kernels,
        rewritten,
        warnings: worker_warnings,
        ledger: ledger_bins,
        db_files,
        counts,
        ..
    } = ctx;
    warnings.extend(worker_warnings.into_inner().unwrap_or_default());
    let counts = counts.into_inner().unwrap_or_default();
    let mut bytes_out = bytes_out.into_inner();

    sink.event(PackEvent::Finishing("writing archives"));
    let mut artifacts = Vec::new();
    let mut summaries = BTreeMap::new();
    for (t, (w, rel)) in writers {
        let s = w.finish()?;
        summaries.insert(t, (rel, s));
    }

    let ledger_bins = ledger_bins.into_inner().unwrap_or_default();
    let db_files = db_files.into_inner().unwrap_or_default();

    // Manifests, then the check of every archive written.
    std::fs::create_dir_all(st.join(&generic_name))
        .map_err(|e| Error::io(st.join(&generic_name), e))?;
    write_manifest(&st.join(&generic_name), &prefixes)?;
    let (gf, gdb) = counts.get(&None).copied().unwrap_or_default();
    artifacts.push(SplitArtifact {
        name: generic_name.clone(),
        target: None,
        prefixes: prefixes.clone(),
        files: gf,
        database_files: gdb,
        archive: None,
        code_objects: 0,
        raw_bytes: 0,
        archive_bytes: 0,
    });
    sink.event(PackEvent::Finishing("checking archives"));
    for (t, ps) in &artifact_prefixes {
        let name = format!("{ap}_{t}");
        let ps: Vec<String> = ps.iter().cloned().collect();
        write_manifest(&st.join(&name), &ps)?;
        let (files, dbs) = counts.get(&Some(t.clone())).copied().unwrap_or_default();
        let mut a = SplitArtifact {
            name: name.clone(),
            target: Some(t.clone()),
            prefixes: ps,
            files,
            database_files: dbs,
            archive: None,
            code_objects: 0,
            raw_bytes: 0,
            archive_bytes: 0,
        };
        let mut gfx_arches = None;
        let mut ledger_dir = a.prefixes.first().cloned().unwrap_or_default();
        if let Some((rel, s)) = summaries.get(t) {
            let written = Archive::open(&st.join(&name).join(rel))?;
            let faults = written.verify();
            if !faults.is_empty() {
                return Err(Error::Invalid(format!(
                    "{name}/{rel}: the archive just written does not read back: {}",
                    faults.join("; ")
                )));
            }
            gfx_arches = Some(written.index.meta.gfx_arches.clone());
            ledger_dir = rel
                .rsplit_once("/.kpack/")
                .map_or(String::new(), |(p, _)| p.to_string());
            a.archive = Some(rel.clone());
            a.files += 1;
            a.code_objects = s.code_objects;
            a.raw_bytes = s.raw_bytes;
            a.archive_bytes = s.file_size;
            bytes_out += s.file_size;
        }
        // Its ledger, beside the archive: what this output holds (per host-only
        // binary of the input, and the host binary it was made for; its
        // kernel-database files).
        let files: Vec<LedgerFile> = db_files
            .iter()
            .filter(|(u, _)| u == t)
            .map(|(_, f)| f.clone())
            .collect();
        if gfx_arches.is_some() || !files.is_empty() {
            let l = super::ledger::unit_ledger(ap, t, gfx_arches, &units, &ledger_bins, files);
            let lp = st
                .join(&name)
                .join(&ledger_dir)
                .join(crate::kpack::ledger::split_ledger_path(&name));
            if let Some(d) = lp.parent() {
                std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
            }
            let json = l.to_json();
            std::fs::write(&lp, &json).map_err(|e| Error::io(&lp, e))?;
            bytes_out += json.len() as u64;
            a.files += 1;
        }
        artifacts.push(a);
    }

    // Into place, in one switch with the record of what other shards build: replaced
    // artifacts go only now, after everything was written.
    sink.event(PackEvent::Finishing("renaming into place"));
    let record = super::ledger::write_left(st, ap, opts.gpu_targets.as_deref(), &left)?;
    let left_name = super::ledger::left_path(Path::new(""), ap)
        .display()
        .to_string();
    let (records, gone) = match record {
        Some(r) => (vec![r], Vec::new()),
        None => (Vec::new(), vec![left_name]),
    };
    if let Some(w) = super::place(st, out, (&names, &records, &gone), "split", opts.force)? {
        sink.event(PackEvent::Warning(w));
    }
    drop(stage);
    Ok(SplitReport {
        artifact_dir: artifact_dir.to_path_buf(),
        output: out.to_path_buf(),
        artifact_prefix: ap.to_string(),
        prefixes,
        missing_prefixes: missing,
        artifacts,
        fat_binaries,
        rewritten: rewritten.into_inner(),
        code_objects: kernels.into_inner(),
        skipped_code_objects: skipped_kernels,
        skipped_databases,
        left_to_other_shards: left,
        bytes_in: total_bytes,
        bytes_out,
        warnings,
    })
}

fn write_manifest(dir: &Path, prefixes: &[String]) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    fsutil::write_atomic(
        &dir.join(MANIFEST),
        manifest_text(prefixes).as_bytes(),
        None,
    )
}

struct Ctx<'a> {
    ap: &'a str,
    src: &'a Path,
    stage: &'a Path,
    writers: &'a BTreeMap<String, (ArchiveWriter, String)>,
    rewrite: bool,
    /// Target → the artifact (and archive) it goes to.
    units: &'a BTreeMap<String, String>,
    sink: &'a dyn EventSink<PackEvent>,
    bytes_out: AtomicU64,
    kernels: AtomicU64,
    rewritten: AtomicU64,
    warnings: Mutex<Vec<String>>,
    /// Every code object of every binary rewritten, for the ledger.
    ledger: Mutex<Vec<LedgerBinary>>,
    /// Kernel-database files copied: (artifact unit, the file).
    db_files: Mutex<Vec<(String, LedgerFile)>>,
    /// Files and database files per artifact (`None` = generic).
    counts: Mutex<BTreeMap<Option<String>, (u64, u64)>>,
}

impl Ctx<'_> {
    fn unit<'s>(&'s self, target: &'s str) -> &'s str {
        self.units.get(target).map_or(target, String::as_str)
    }

    fn count(&self, artifact: Option<&str>, db: bool) {
        if let Ok(mut c) = self.counts.lock() {
            let e = c.entry(artifact.map(str::to_string)).or_default();
            e.0 += 1;
            e.1 += u64::from(db);
        }
    }

    fn process(&self, worker: usize, j: &FileJob) -> Result<()> {
        let f = &j.report;
        let src = self
            .src
            .join(&j.prefix)
            .join(crate::relpath::to_path(&f.path));
        let artifact = match &j.job {
            Job::Database(t) => format!("{}_{}", self.ap, self.unit(t)),
            _ => format!("{}_generic", self.ap),
        };
        let dst = self
            .stage
            .join(&artifact)
            .join(&j.prefix)
            .join(crate::relpath::to_path(&f.path));
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        let out = match &j.job {
            Job::Special => {
                if let Ok(mut w) = self.warnings.lock() {
                    w.push(format!(
                        "{}/{}: special file ({}) skipped",
                        j.prefix,
                        f.path,
                        f.file_type.unwrap_or("unknown")
                    ));
                }
                return Ok(());
            }
            Job::Symlink => {
                let target = std::fs::read_link(&src).map_err(|e| Error::io(&src, e))?;
                std::os::unix::fs::symlink(&target, &dst).map_err(|e| Error::io(&dst, e))?;
                self.count(None, false);
                return Ok(());
            }
            Job::Copy => {
                self.phase(worker, j, Phase::Copy);
                self.count(None, false);
                copy(&src, &dst, f.identity)?
            }
            Job::Database(t) => {
                self.phase(worker, j, Phase::Copy);
                self.count(Some(self.unit(t)), true);
                let n = copy(&src, &dst, f.identity)?;
                let data =
                    crate::kpack::ledger::sha256_file(&dst).map_err(|e| Error::io(&dst, e))?;
                if let Ok(mut l) = self.db_files.lock() {
                    l.push((
                        self.unit(t).to_string(),
                        LedgerFile {
                            path: f.path.clone(),
                            target: t.clone(),
                            size: n,
                            sha256: data,
                        },
                    ));
                }
                n
            }
            Job::Binary(kernels) => {
                self.count(None, false);
                self.binary(worker, j, kernels, &src, &dst)?
            }
        };
        self.bytes_out.fetch_add(out, Ordering::Relaxed);
        self.sink.event(PackEvent::FileDone {
            path: format!("{}/{}", j.prefix, f.path),
            bytes_in: f.size,
            bytes_out: out,
        });
        Ok(())
    }

    fn phase(&self, worker: usize, j: &FileJob, phase: Phase) {
        self.sink.event(PackEvent::Phase {
            worker,
            path: format!("{}/{}", j.prefix, j.report.path),
            phase,
        });
    }

    fn binary(
        &self,
        worker: usize,
        j: &FileJob,
        kernels: &[(u32, String, String)],
        src: &Path,
        dst: &Path,
    ) -> Result<u64> {
        if !self.rewrite {
            // No archive is written at all (no device code kept): the binary stays.
            return copy(src, dst, j.report.identity);
        }
        self.phase(worker, j, Phase::Rewrite);
        let (file, meta) =
            fsutil::open_scanned(src, j.report.identity).map_err(|e| changed(src, e))?;
        if meta.len() == 0 {
            return Err(Error::Invalid(format!("{}: empty", src.display())));
        }
        let map = fsutil::map_open_file(&file).map_err(|e| Error::io(src, e))?;
        crate::mapped::note(&map, src);
        let data: &[u8] = &map;
        let marker = marker_for(self.ap, &j.prefix, &j.report.path);
        // The host part is streamed to the artifact (see `fatbin::write_host_only`).
        let (host, host_sha) = crate::fatbin::write_host_only(&map, &marker, dst, &meta, true)
            .map_err(|e| match e {
                crate::fatbin::WriteError::Refused(e) => {
                    Error::Invalid(format!("{}: cannot be rewritten: {e}", src.display()))
                }
                crate::fatbin::WriteError::Io(e) => e,
            })?;
        self.phase(worker, j, Phase::Compress);
        let Some(fat) = crate::fatbin::read(data).map_err(|e| Error::format(src, e))? else {
            return Err(Error::Invalid(format!(
                "{}: no longer a fat binary (changed while splitting?)",
                src.display()
            )));
        };
        let span_offset = fat.section.as_ptr() as usize - data.as_ptr() as usize;
        let sec = fat.section;
        let wanted: BTreeSet<(u32, &str)> = kernels.iter().map(|k| (k.0, k.1.as_str())).collect();
        let mut found = 0usize;
        let mut promised = Vec::new();
        for b in &fat.bundles {
            let un = b
                .uncompressed(sec, 1 << 34)
                .map_err(|e| Error::format(src, e))?;
            for (e, bytes) in b.code_objects(&un).map_err(|e| Error::format(src, e))? {
                let Some(arch) = e.id.arch() else { continue };
                if !wanted.contains(&(b.index as u32, arch.as_str())) {
                    continue;
                }
                // For the ledger of the artifact it goes to.
                promised.push(LedgerKernel {
                    bundle: b.index as u32,
                    target: arch.clone(),
                    size: bytes.len() as u64,
                    sha256: crate::kpack::ledger::sha256_hex(bytes),
                });
                let Some((w, _)) = self.writers.get(self.unit(&arch)) else {
                    continue;
                };
                let mut md = BTreeMap::new();
                md.insert("target".to_string(), e.id.triple.clone());
                md.insert("source_prefix".to_string(), j.prefix.clone());
                w.add_with_metadata(
                    &format!("{}#{}", marker.kernel_name, b.index),
                    &arch,
                    bytes,
                    md,
                )?;
                found += 1;
                self.kernels.fetch_add(1, Ordering::Relaxed);
                let (n, stored) = w.progress();
                self.sink.event(PackEvent::Family {
                    family: self.unit(&arch).to_string(),
                    code_objects: n,
                    stored,
                });
            }
            fsutil::release_range(
                &map,
                span_offset + b.offset as usize,
                b.stored_size as usize,
            );
        }
        if found != kernels.len() {
            return Err(Error::Invalid(format!(
                "{}: {} code object(s) planned, {found} found (the file changed while splitting?)",
                src.display(),
                kernels.len()
            )));
        }
        if let Ok(mut l) = self.ledger.lock() {
            l.push(LedgerBinary {
                path: j.report.path.clone(),
                kernel_name: marker.kernel_name.clone(),
                bundles: fat.bundles.iter().map(|b| b.index as u32).collect(),
                kernels: promised,
                host_sha256: host_sha,
            });
        }
        self.rewritten.fetch_add(1, Ordering::Relaxed);
        Ok(host)
    }
}

/// Copy a regular input file the scan read (`identity`): not through a symlink, and
/// only the very file the scan saw.
fn copy(src: &Path, dst: &Path, identity: Option<(u64, u64)>) -> Result<u64> {
    let (mut from, meta) = fsutil::open_scanned(src, identity).map_err(|e| changed(src, e))?;
    let mut to = std::fs::File::create_new(dst).map_err(|e| Error::io(dst, e))?;
    let n = std::io::copy(&mut from, &mut to).map_err(|e| {
        if matches!(
            e.raw_os_error(),
            Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG)
        ) {
            Error::io(dst, e)
        } else {
            Error::io(src, e)
        }
    })?;
    drop(to);
    std::fs::set_permissions(dst, meta.permissions()).map_err(|e| Error::io(dst, e))?;
    if let (Ok(f), Ok(m)) = (
        std::fs::File::options().write(true).open(dst),
        meta.modified(),
    ) {
        let _ = f.set_times(std::fs::FileTimes::new().set_modified(m));
    }
    Ok(n)
}

fn changed(src: &Path, e: std::io::Error) -> Error {
    Error::Invalid(format!(
        "{}: no longer the regular file the scan saw ({e}); not read (changed while splitting?)",
        src.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_depth_is_relative_to_the_prefix() {
        let m = marker_for(
            "blas_lib",
            "math-libs/BLAS/rocBLAS/stage",
            "lib/librocblas.so.5",
        );
        assert_eq!(m.kpack_search_paths, ["../.kpack/blas_lib_@GFXARCH@.kpack"]);
        assert_eq!(
            m.kernel_name,
            "math-libs/BLAS/rocBLAS/stage/lib/librocblas.so.5"
        );
        let m = marker_for("t", "p", "app");
        assert_eq!(m.kpack_search_paths, [".kpack/t_@GFXARCH@.kpack"]);
        assert!(check_name("x", "blas_lib").is_ok());
        for bad in ["", ".hidden", "a/b", "a\0b"] {
            assert!(check_name("x", bad).is_err());
        }
    }
}
