//! What a split will do, found before anything is written: the input checked
//! ([`wanted_targets`], [`check_input`]), one job per file of every prefix
//! ([`gather`]), and the targets with the prefixes their artifacts come from
//! ([`Targets::of`]).

use super::split::{SplitOptions, check_name};
use crate::bundle;
use crate::error::{Error, Result};
use crate::kerneldb::base_arch;
use crate::kpack::archive::safe_arch;
use crate::pathstore::{PathRef, PathStore};
use crate::scan::{self, FileKind, FileReport, ScanOptions, Severity};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

/// What becomes of one file.
pub(super) enum Job {
    /// Copied into the generic artifact.
    Copy,
    /// Re-created as a symlink.
    Symlink,
    /// A special file (device, FIFO, socket; its type): named, not copied.
    Special(Option<Box<str>>),
    /// A kernel-database file of a target: into that target's artifact.
    Database(Box<str>),
    /// A fat binary: its kept code objects (bundle, target, triple) archived, its
    /// host part rewritten into the generic artifact.
    Binary(Box<[KeptCode]>),
}

/// A code object a split keeps: bundle, target, triple.
pub(super) type KeptCode = (u32, Arc<str>, Arc<str>);

/// A file of a prefix and its job.
pub(super) struct FileJob {
    /// Shared by the prefix's files.
    pub prefix: Arc<str>,
    pub report: JobFile,
    pub job: Job,
}

/// What a job reads of a file's report: a few fields, not the whole report (40,000
/// reports of 700 bytes and more were held through an 8 GiB split, 8.4 MiB at its
/// peak), and its path in [`Gathered::paths`] (one allocation each was 1.4 MB).
pub(super) struct JobFile {
    pub path: PathRef,
    pub size: u64,
    pub identity: Option<(u64, u64)>,
}

/// The processors `--gpu-targets` keeps (`None`: all).
pub(super) fn wanted_targets(opts: &SplitOptions) -> Result<Option<BTreeSet<String>>> {
    let Some(ts) = &opts.gpu_targets else {
        return Ok(None);
    };
    let mut set = BTreeSet::new();
    for t in ts {
        if !t.starts_with("gfx") {
            return Err(Error::Usage(format!(
                "--gpu-targets: {t:?} is not a target (gfx…)"
            )));
        }
        set.insert(base_arch(t));
    }
    Ok(Some(set))
}

/// The artifact prefix makes names, the artifact is a directory, the output apart
/// from it.
pub(super) fn check_input(artifact_dir: &Path, out: &Path, opts: &SplitOptions) -> Result<()> {
    check_name("artifact prefix", &opts.artifact_prefix)?;
    let meta = std::fs::metadata(artifact_dir).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::Usage(format!("{} does not exist", artifact_dir.display()))
        } else {
            Error::io(artifact_dir, e)
        }
    })?;
    if !meta.is_dir() {
        return Err(Error::Usage(format!(
            "{} is not a directory",
            artifact_dir.display()
        )));
    }
    crate::fsutil::check_apart(artifact_dir, out)
}

/// Every file of the artifact's prefixes with its job, and what was left out.
#[derive(Default)]
pub(super) struct Gathered {
    /// Prefixes processed, and those of the manifest without a directory.
    pub prefixes: Vec<String>,
    pub missing: Vec<String>,
    pub jobs: Vec<FileJob>,
    /// The jobs' paths.
    pub paths: PathStore,
    /// Code objects and database files of targets `--gpu-targets` does not keep.
    pub skipped_kernels: u64,
    pub skipped_databases: u64,
    /// What --gpu-targets leaves to the shards building those targets, by name (in
    /// the report only: a target artifact is the same whichever shard wrote it, so
    /// that combined shards equal one whole split).
    pub left: Vec<String>,
    pub warnings: Vec<String>,
}

/// Scan each prefix of `manifest` and give every file its job; a damaged file
/// refuses the split.
pub(super) fn gather(
    artifact_dir: &Path,
    manifest: &[String],
    wanted: Option<&BTreeSet<String>>,
    opts: &SplitOptions,
) -> Result<Gathered> {
    let mut g = Gathered::default();
    for p in manifest {
        let dir = artifact_dir.join(p);
        // The prefix is data: it names a directory inside the artifact, never one a
        // symlink on the way leads to.
        crate::fsutil::real_dirs_below(artifact_dir, &dir).map_err(|why| Error::Refused {
            path: artifact_dir.to_path_buf(),
            what: format!(
                "prefix {p} of {} does not stay inside the artifact: {why}",
                super::MANIFEST
            ),
        })?;
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::Unsupported {
                    path: artifact_dir.to_path_buf(),
                    what: format!("prefix {p} of {} is not a directory", super::MANIFEST),
                });
            }
            Err(_) => {
                g.warnings
                    .push(format!("prefix {p}: no such directory, skipped"));
                g.missing.push(p.clone());
                continue;
            }
        }
        g.prefixes.push(p.clone());
        // Streamed: each file becomes its job as the scan hands it on. A first name
        // whose job reads more than its kind (fat binaries, databases) is kept for
        // the later names of the same file.
        let prefix: Arc<str> = Arc::from(p.as_str());
        let mut firsts = HashMap::new();
        let report = scan::scan_each(
            &dir,
            &ScanOptions {
                threads: opts.threads,
                databases: Some(opts.databases.clone()),
                deep: false,
            },
            &crate::event::NoEvents,
            &mut |f| g.take(&prefix, f, &mut firsts, wanted),
        )?;
        let damaged: Vec<String> = report
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| format!("{p}/{}: {}", d.path, d.message))
            .collect();
        if !damaged.is_empty() {
            return Err(Error::Damaged {
                path: artifact_dir.to_path_buf(),
                what: format!(
                    "{} damaged file(s) in the artifact; nothing written:\n  {}",
                    damaged.len(),
                    damaged.join("\n  ")
                ),
            });
        }
    }
    // Grown by doubling: up to half of it was never used (8 MiB held for 40,000
    // jobs through an 8 GiB split).
    g.jobs.shrink_to_fit();
    g.paths.shrink_to_fit();
    Ok(g)
}

impl Gathered {
    /// The job of file `f` of prefix `p`, if it has one here. `firsts` holds the
    /// first names seen of fat binaries and databases, by path.
    fn take(
        &mut self,
        p: &Arc<str>,
        f: FileReport,
        firsts: &mut HashMap<String, FileReport>,
        wanted: Option<&BTreeSet<String>>,
    ) {
        // A second name of a hard link is a file of its own in the output (as a
        // copy would make it), classified like the first.
        let src = f
            .hard_link_of
            .as_deref()
            .and_then(|first| firsts.get(first))
            .unwrap_or(&f);
        let job = self.job_of(p, &f, src, wanted);
        let keep = f.hard_link_of.is_none()
            && matches!(f.kind, FileKind::FatBinary | FileKind::KernelDatabase);
        if let Some(job) = job {
            let file = JobFile {
                path: self.paths.push(&f.path),
                size: f.size,
                identity: f.identity,
            };
            self.jobs.push(FileJob {
                prefix: p.clone(),
                report: file,
                job,
            });
        }
        if keep {
            firsts.insert(f.path.clone(), f);
        }
    }

    /// The job of `f` (classified as `src`), or `None` when it is left to another
    /// shard.
    fn job_of(
        &mut self,
        p: &str,
        f: &FileReport,
        src: &FileReport,
        wanted: Option<&BTreeSet<String>>,
    ) -> Option<Job> {
        Some(match src.kind {
            FileKind::Symlink => Job::Symlink,
            FileKind::Other => Job::Special(f.file_type.map(Into::into)),
            FileKind::KernelDatabase => {
                let arch = src.arch.clone().unwrap_or_default();
                if wanted.is_some_and(|w| !w.contains(&arch)) {
                    self.skipped_databases += 1;
                    self.left
                        .push(format!("{p}/{}: database file for {arch}", f.path));
                    return None;
                }
                Job::Database(arch.into())
            }
            FileKind::FatBinary if src.rewritable() => {
                let mut kernels = Vec::new();
                for b in &src.bundles {
                    for t in &b.targets {
                        let keep = wanted
                            .is_none_or(|w| w.contains(bundle::target::base_processor(&t.arch)));
                        if keep {
                            kernels.push((b.index as u32, t.arch.clone(), t.triple.clone()));
                        } else {
                            self.skipped_kernels += 1;
                            self.left.push(format!(
                                "{p}/{}: bundle #{} for {}",
                                f.path, b.index, t.arch
                            ));
                        }
                    }
                }
                Job::Binary(kernels.into())
            }
            FileKind::FatBinary => {
                self.warnings.push(format!(
                    "{p}/{}: {} kept whole in the generic artifact (only ELF executables \
                     and shared libraries are split)",
                    f.path,
                    src.container.map_or("fat binary", |c| c.describe())
                ));
                Job::Copy
            }
            _ => Job::Copy,
        })
    }
}

/// The targets of a split: the unit each target ID goes to, and per unit the
/// prefixes its kernels and its artifact come from.
pub(super) struct Targets {
    pub units: BTreeMap<String, String>,
    pub kernel_prefixes: BTreeMap<String, BTreeSet<String>>,
    pub artifact_prefixes: BTreeMap<String, BTreeSet<String>>,
    pub fat_binaries: u64,
}

impl Targets {
    /// From the jobs; an artifact name that cannot be made, or (with
    /// `--gpu-targets`) fat binaries none of whose code objects is kept, refuse.
    pub fn of(jobs: &[FileJob], opts: &SplitOptions) -> Result<Self> {
        let ap = opts.artifact_prefix.as_str();
        let mut kernel_prefixes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut artifact_prefixes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut fat_binaries = 0u64;
        let add = |m: &mut BTreeMap<String, BTreeSet<String>>, arch: &str, p: &str| {
            m.entry(arch.to_string()).or_default().insert(p.to_string());
        };
        for j in jobs {
            match &j.job {
                Job::Binary(ks) => {
                    fat_binaries += 1;
                    for (_, arch, _) in ks.iter() {
                        add(&mut kernel_prefixes, arch, &j.prefix);
                        add(&mut artifact_prefixes, arch, &j.prefix);
                    }
                }
                Job::Database(arch) => add(&mut artifact_prefixes, arch, &j.prefix),
                _ => {}
            }
        }
        // Feature variants of one processor share one artifact and one archive, named
        // by the processor: side by side, `x_gfx90a:xnack-` would shadow `x_gfx90a`
        // for first-match loaders on xnack- devices (ROCm 7.14); in one archive, TOC
        // aliases list plain code under every variant.
        let units =
            crate::kpack::alias::variant_units(artifact_prefixes.keys().map(String::as_str));
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
            safe_arch(t).map_err(|e| Error::Usage(format!("artifact {ap}_{t}: {e}")))?;
            check_name("artifact", &format!("{ap}_{t}"))?;
        }
        if fat_binaries > 0
            && kernel_prefixes.is_empty()
            && let Some(ts) = &opts.gpu_targets
        {
            return Err(Error::NothingToDo(format!(
                "found {fat_binaries} fat binaries, but no device code objects matched \
                 --gpu-targets ({}); refusing to emit an untransformed generic artifact",
                ts.join(", ")
            )));
        }
        Ok(Targets {
            units,
            kernel_prefixes,
            artifact_prefixes,
            fat_binaries,
        })
    }
}
