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
use super::split_jobs::{Job, KeptCode, Targets, check_input, gather, wanted_targets};
use super::split_spill::{RunJob, SpilledJobs};
use crate::bundle::Wanted;
use crate::error::{Error, FormatResult, Result};
use crate::event::EventSink;
use crate::event::{PackEvent, Phase};
use crate::fsutil;
use crate::kerneldb::Database;
use crate::kpack::Marker;
use crate::kpack::archive::{Archive, ArchiveMeta, ArchiveWriter, Scheme, Source};
use crate::kpack::ledger::{LedgerBinary, LedgerFile, LedgerKernel, Sha256Hasher};
use crate::kpack::resolve::GFXARCH;
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
        return Err(Error::Usage(format!(
            "{what} {name:?} cannot be used in a file name (empty, leading '.', '/', '\\', \
             NUL or longer than 200 bytes)"
        )));
    }
    Ok(())
}

/// Split `artifact_dir` into `out` (created if needed).
pub fn split(
    artifact_dir: &Path,
    out: &Path,
    opts: &SplitOptions,
    sink: &dyn EventSink<PackEvent>,
) -> Result<SplitReport> {
    let ap = opts.artifact_prefix.as_str();
    check_input(artifact_dir, out, opts)?;
    let wanted = wanted_targets(opts)?;
    let manifest = read_manifest(artifact_dir)?;
    let mut g = gather(artifact_dir, &manifest, wanted.as_ref(), opts)?;
    let t = Targets::of(&g.jobs, opts)?;
    let mut warnings = g.warnings;

    // Output: refuse to merge into existing artifacts of this prefix.
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let generic_name = format!("{ap}_generic");
    let names: Vec<String> = std::iter::once(generic_name.clone())
        .chain(t.artifact_prefixes.keys().map(|t| format!("{ap}_{t}")))
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

    let total_bytes: u64 = (g.jobs.iter())
        .filter(|j| matches!(j.job, Job::Copy | Job::Database(_) | Job::Binary(_)))
        .map(|j| j.report.size)
        .sum();
    sink.event(PackEvent::Started {
        files: g.jobs.len() as u64,
        bytes: total_bytes,
    });
    // The jobs go to unnamed files of the stage (nothing of them is placed), in the
    // order they run.
    let jobs = SpilledJobs::write(std::mem::take(&mut g.jobs), &g.paths, st)
        .map_err(|e| Error::io(st, e))?;
    g.paths = Default::default();
    let writers = open_writers(st, &t, opts)?;
    let ctx = Ctx {
        ap,
        units: &t.units,
        src: artifact_dir,
        stage: st,
        writers: &writers,
        rewrite: !t.kernel_prefixes.is_empty(),
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
    let run = || -> Result<()> {
        (0..jobs.len())
            .into_par_iter()
            .with_max_len(1)
            .try_for_each(|k| {
                let j = jobs.get(k).map_err(|e| Error::io(st, e))?;
                ctx.process(rayon::current_thread_index().unwrap_or(0), &j)
            })
    };
    crate::parallel::on_threads(opts.threads, run)??;
    let done = Done::of(ctx);
    warnings.extend(done.warnings.iter().cloned());

    sink.event(PackEvent::Finishing("writing archives"));
    let mut summaries = BTreeMap::new();
    for (t, (w, rel)) in writers {
        let s = w.finish()?;
        summaries.insert(t, (rel, s));
    }
    // Manifests, then the check of every archive written.
    std::fs::create_dir_all(st.join(&generic_name))
        .map_err(|e| Error::io(st.join(&generic_name), e))?;
    write_manifest(&st.join(&generic_name), &g.prefixes)?;
    let (gf, gdb) = done.counts.get(&None).copied().unwrap_or_default();
    let mut artifacts = vec![SplitArtifact {
        name: generic_name.clone(),
        target: None,
        prefixes: g.prefixes.clone(),
        files: gf,
        database_files: gdb,
        archive: None,
        code_objects: 0,
        raw_bytes: 0,
        archive_bytes: 0,
    }];
    let mut bytes_out = done.bytes_out;
    sink.event(PackEvent::Finishing("checking archives"));
    for (target, ps) in &t.artifact_prefixes {
        let (a, bytes) = target_artifact(st, ap, target, ps, &summaries, &t, &done)?;
        bytes_out += bytes;
        artifacts.push(a);
    }

    // Into place, in one switch with the record of what other shards build: replaced
    // artifacts go only now, after everything was written.
    sink.event(PackEvent::Finishing("renaming into place"));
    let record = super::ledger::write_left(st, ap, opts.gpu_targets.as_deref(), &g.left)?;
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
        prefixes: g.prefixes,
        missing_prefixes: g.missing,
        artifacts,
        fat_binaries: t.fat_binaries,
        rewritten: done.rewritten,
        code_objects: done.kernels,
        skipped_code_objects: g.skipped_kernels,
        skipped_databases: g.skipped_databases,
        left_to_other_shards: g.left,
        bytes_in: total_bytes,
        bytes_out,
        warnings,
    })
}

/// One archive writer per unit with kernels, in its artifact under the first prefix
/// that contributed them: the writer and the archive's path in the artifact.
fn open_writers(
    st: &Path,
    t: &Targets,
    opts: &SplitOptions,
) -> Result<BTreeMap<String, (ArchiveWriter, String)>> {
    let ap = opts.artifact_prefix.as_str();
    let mut writers = BTreeMap::new();
    for (unit, ps) in &t.kernel_prefixes {
        let first = ps.iter().next().cloned().unwrap_or_default();
        let rel = format!("{first}/.kpack/{}", archive_name(ap, unit));
        let path = st.join(format!("{ap}_{unit}")).join(&rel);
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
        }
        // A processor's archive lists what its variants hold, settled at the end.
        let merged = t
            .units
            .iter()
            .any(|(target, u)| u == unit && target != unit);
        let meta = ArchiveMeta {
            group_name: ap.to_string(),
            gfx_arch_family: unit.clone(),
            gfx_arches: if merged {
                Vec::new()
            } else {
                vec![unit.clone()]
            },
        };
        let w = ArchiveWriter::create(&path, meta, Scheme::ZstdPerKernel, opts.level)?.resolving();
        writers.insert(unit.clone(), (w, rel));
    }
    Ok(writers)
}

/// What the workers did, once they are done.
struct Done {
    bytes_out: u64,
    kernels: u64,
    rewritten: u64,
    warnings: Vec<String>,
    ledger: Vec<LedgerBinary>,
    db_files: Vec<(String, LedgerFile)>,
    counts: BTreeMap<Option<String>, (u64, u64)>,
}

impl Done {
    fn of(ctx: Ctx) -> Self {
        Done {
            bytes_out: ctx.bytes_out.into_inner(),
            kernels: ctx.kernels.into_inner(),
            rewritten: ctx.rewritten.into_inner(),
            warnings: ctx.warnings.into_inner().unwrap_or_default(),
            ledger: ctx.ledger.into_inner().unwrap_or_default(),
            db_files: ctx.db_files.into_inner().unwrap_or_default(),
            counts: ctx.counts.into_inner().unwrap_or_default(),
        }
    }
}

/// A target's artifact, its manifest written: the archive just written read back
/// and checked, its ledger beside it. Returns it and the bytes it adds.
fn target_artifact(
    st: &Path,
    ap: &str,
    t: &str,
    ps: &BTreeSet<String>,
    summaries: &BTreeMap<String, (String, crate::kpack::archive::ArchiveSummary)>,
    targets: &Targets,
    done: &Done,
) -> Result<(SplitArtifact, u64)> {
    let name = format!("{ap}_{t}");
    let ps: Vec<String> = ps.iter().cloned().collect();
    write_manifest(&st.join(&name), &ps)?;
    let (files, dbs) = done
        .counts
        .get(&Some(t.to_string()))
        .copied()
        .unwrap_or_default();
    let mut a = SplitArtifact {
        name: name.clone(),
        target: Some(t.to_string()),
        prefixes: ps,
        files,
        database_files: dbs,
        archive: None,
        code_objects: 0,
        raw_bytes: 0,
        archive_bytes: 0,
    };
    let mut bytes_out = 0;
    let mut gfx_arches = None;
    let mut ledger_dir = a.prefixes.first().cloned().unwrap_or_default();
    if let Some((rel, s)) = summaries.get(t) {
        let written = Archive::open(&st.join(&name).join(rel))?;
        let faults = written.verify();
        if !faults.is_empty() {
            return Err(Error::NotAsWritten {
                path: format!("{name}/{rel}").into(),
                what: format!(
                    "the archive just written does not read back: {}",
                    faults.join("; ")
                ),
            });
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
    let files: Vec<LedgerFile> = (done.db_files.iter())
        .filter(|(u, _)| u == t)
        .map(|(_, f)| f.clone())
        .collect();
    if gfx_arches.is_some() || !files.is_empty() {
        let l = super::ledger::unit_ledger(ap, t, gfx_arches, &targets.units, &done.ledger, files);
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
    Ok((a, bytes_out))
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

    fn process(&self, worker: usize, j: &RunJob) -> Result<()> {
        let path = &j.path;
        let src = self
            .src
            .join(&*j.prefix)
            .join(crate::relpath::to_path(path));
        let artifact = match &j.job {
            Job::Database(t) => format!("{}_{}", self.ap, self.unit(t)),
            _ => format!("{}_generic", self.ap),
        };
        let dst = self
            .stage
            .join(&artifact)
            .join(&*j.prefix)
            .join(crate::relpath::to_path(path));
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        let out = match &j.job {
            Job::Special(file_type) => {
                if let Ok(mut w) = self.warnings.lock() {
                    w.push(format!(
                        "{}/{}: special file ({}) skipped",
                        j.prefix,
                        path,
                        file_type.as_deref().unwrap_or("unknown")
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
                self.phase(worker, j, path, Phase::Copy);
                self.count(None, false);
                copy(&src, &dst, j.identity)?
            }
            Job::Database(t) => {
                self.phase(worker, j, path, Phase::Copy);
                self.count(Some(self.unit(t)), true);
                let n = copy(&src, &dst, j.identity)?;
                let data =
                    crate::kpack::ledger::sha256_file(&dst).map_err(|e| Error::io(&dst, e))?;
                if let Ok(mut l) = self.db_files.lock() {
                    l.push((
                        self.unit(t).to_string(),
                        LedgerFile {
                            path: path.clone(),
                            target: t.to_string(),
                            size: n,
                            sha256: data,
                        },
                    ));
                }
                n
            }
            Job::Binary(kernels) => {
                self.count(None, false);
                self.binary(worker, (j, path), kernels, &src, &dst)?
            }
        };
        self.bytes_out.fetch_add(out, Ordering::Relaxed);
        self.sink.event(PackEvent::FileDone {
            path: format!("{}/{path}", j.prefix),
            bytes_in: j.size,
            bytes_out: out,
        });
        Ok(())
    }

    fn phase(&self, worker: usize, j: &RunJob, path: &str, phase: Phase) {
        self.sink.event(PackEvent::Phase {
            worker,
            path: format!("{}/{path}", j.prefix),
            phase,
            bytes: j.size,
        });
    }

    fn binary(
        &self,
        worker: usize,
        (j, path): (&RunJob, &str),
        kernels: &[KeptCode],
        src: &Path,
        dst: &Path,
    ) -> Result<u64> {
        if !self.rewrite {
            // No archive is written at all (no device code kept): the binary stays.
            return copy(src, dst, j.identity);
        }
        self.phase(worker, j, path, Phase::Rewrite);
        let (file, meta) = fsutil::open_scanned(src, j.identity).map_err(|e| changed(src, e))?;
        if meta.len() == 0 {
            return Err(Error::Changed {
                path: src.to_path_buf(),
                what: "empty, where the scan saw a fat binary".into(),
            });
        }
        let map = fsutil::map_open_file(&file).map_err(|e| Error::io(src, e))?;
        crate::mapped::note(&map, src);
        let data: &[u8] = &map;
        let marker = marker_for(self.ap, &j.prefix, path);
        // The host part is streamed to the artifact (see `fatbin::write_host_only`).
        let (host, host_sha) =
            crate::fatbin::write_host_only((&file, &map), &marker, dst, &meta, true).map_err(
                |e| match e {
                    crate::fatbin::WriteError::Refused(e) => Error::Unsupported {
                        path: src.to_path_buf(),
                        what: format!("cannot be rewritten: {e}"),
                    },
                    crate::fatbin::WriteError::Io(e) => e,
                },
            )?;
        self.phase(worker, j, path, Phase::Compress);
        let read = crate::fatbin::read_releasing(data, &|o, l| fsutil::release_range(&map, o, l));
        let Some(fat) = read.map_err(|e| Error::format(src, e))? else {
            return Err(Error::Changed {
                path: src.to_path_buf(),
                what: "no longer a fat binary (changed while splitting?)".into(),
            });
        };
        // What the headers' reading mapped (a 2 MiB folio each) leaves the
        // resident set before the code objects are read.
        fsutil::release_range(&map, 0, map.len());
        let span_offset = fat.section.as_ptr() as usize - data.as_ptr() as usize;
        let sec = fat.section;
        let wanted = Wanted::new(kernels.iter().map(|k| (k.0, &*k.1)));
        let mut found = 0usize;
        let mut promised = Vec::new();
        for b in &fat.bundles {
            // One code object at a time, compressed as it is read: a compressed
            // bundle's code object is decoded piece by piece into the compressor,
            // never held whole; one read in place leaves the resident set once
            // archived.
            let mut each = |e: &crate::bundle::BundleEntry,
                            r: &mut crate::bundle::CodeObject<'_>|
             -> FormatResult<Result<()>> {
                let Some(arch) = wanted.arch(b.index as u32, e) else {
                    return Ok(Ok(()));
                };
                let mut hash = Sha256Hasher::default();
                let size = r.remaining();
                let from = Source::from(r);
                if let Some((w, _)) = self.writers.get(self.unit(&arch)) {
                    let key = format!("{}#{}", marker.kernel_name, b.index);
                    let encoded = match w.encode(&key, &arch, from, &mut |p| hash.update(p)) {
                        Ok(e) => e,
                        Err(e) => return Ok(Err(e)),
                    };
                    let mut md = BTreeMap::new();
                    md.insert("target".to_string(), e.id.triple.to_string());
                    md.insert("source_prefix".to_string(), j.prefix.to_string());
                    if let Err(e) = w.commit(encoded, md) {
                        return Ok(Err(e));
                    }
                    found += 1;
                    self.kernels.fetch_add(1, Ordering::Relaxed);
                    let (n, stored) = w.progress();
                    self.sink.event(PackEvent::Family {
                        family: self.unit(&arch).to_string(),
                        code_objects: n,
                        stored,
                    });
                } else {
                    // No archive takes it here: only its hash, for the ledger.
                    let hashed = from.pieces(&mut |p| {
                        hash.update(p);
                        Ok(true)
                    });
                    if let Err(e) = hashed {
                        return Ok(Err(Error::io(src, e)));
                    }
                }
                // For the ledger of the artifact it goes to.
                promised.push(LedgerKernel {
                    bundle: b.index as u32,
                    target: crate::intern::interned(&arch),
                    size,
                    sha256: hash.finish(),
                });
                Ok(Ok(()))
            };
            // Code objects and CCOB payloads are read from the file, not the map
            // (nothing of them is mapped); what the walk mapped is released.
            let input = crate::bundle::FileSection {
                map: &map,
                file: &file,
                at: span_offset,
            };
            b.each_code_object_streamed(sec, 1 << 34, &input, &mut each)
                .map_err(|e| Error::format(src, e))??;
            fsutil::release_range(
                &map,
                span_offset + b.offset as usize,
                b.stored_size as usize,
            );
        }
        if found != kernels.len() {
            return Err(Error::Changed {
                path: src.to_path_buf(),
                what: format!(
                    "{} code object(s) planned, {found} found (the file changed while splitting?)",
                    kernels.len()
                ),
            });
        }
        if let Ok(mut l) = self.ledger.lock() {
            l.push(LedgerBinary {
                path: path.to_string(),
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
    let (from, meta) = fsutil::open_scanned(src, identity).map_err(|e| changed(src, e))?;
    fsutil::copy_opened(from, src, dst, &meta)
}

fn changed(src: &Path, e: std::io::Error) -> Error {
    Error::Changed {
        path: src.to_path_buf(),
        what: format!(
            "no longer the regular file the scan saw ({e}); not read (changed while splitting?)"
        ),
    }
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
