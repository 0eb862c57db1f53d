//! Carrying out a plan: into a staging directory beside the output, every binary is
//! mapped once, its kernels compressed on the worker thread into their family's
//! archive, the binary written host-only; every other file copied; then archives and
//! the ledger are written, the result verified and renamed into place.

use super::plan::{Place, ledger_in, marker_for};
use super::record::ledger_of;
use super::{
    Growth, KernelFrom, Layout, PackEvent, PackOptions, PackPlan, PackReport, Phase, PlannedBinary,
    Unassigned, WrittenArchive, verify_tree,
};
use crate::bundle::Compression;
use crate::error::{Error, Result};
use crate::event::{CancelToken, EventSink};
use crate::fsutil;
use crate::kpack::archive::{ArchiveMeta, ArchiveWriter};
use crate::kpack::ledger::{LEDGER_PATH, LedgerBinary, LedgerKernel, Sha256Digest};
use crate::kpack::resolve::Loader;
use crate::scan::FileKind;
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

mod binary;
mod work;

use work::{Work, WorkList};

/// An input that is no longer the regular file the scan saw.
fn changed(src: &Path, e: std::io::Error) -> Error {
    Error::Changed {
        path: src.to_path_buf(),
        what: format!(
            "no longer the regular file the scan saw ({e}); not read (changed while packing?)"
        ),
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
        .ok_or_else(|| Error::Usage(format!("{} has no file name", out.display())))?
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
        let Some(rest) = name.strip_prefix(&prefix) else {
            continue;
        };
        // `<pid>` is a staging directory, `<pid>-old` the previous output a
        // `--force` run moved aside before placing its own.
        let (pid, old) = match rest.strip_suffix("-old") {
            Some(p) => (p, true),
            None => (rest, false),
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = e.path();
        if old && std::fs::symlink_metadata(out).is_err() {
            // Killed between its two renames: OUT is absent and this is the last
            // complete output. Put it back.
            sink.event(PackEvent::Warning(format!(
                "restoring {} from {} (a --force run was interrupted while replacing it)",
                out.display(),
                path.display()
            )));
            std::fs::rename(&path, out).map_err(|x| Error::io(&path, x))?;
            continue;
        }
        sink.event(PackEvent::Warning(format!(
            "removing {} left by an interrupted run",
            path.display()
        )));
        let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
        if is_dir {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        }
        .map_err(|x| Error::io(&path, x))?;
    }
    Ok(())
}

/// The refusals a plan carries before anything is written (also what `--dry-run`
/// reports as its exit status): unassigned code under `--unassigned error`, an output
/// that is not a previous pack's, warnings under `--strict`.
pub fn check_plan(plan: &PackPlan, out: &Path, opts: &PackOptions) -> Result<()> {
    if !plan.unassigned.is_empty() && opts.unassigned == Unassigned::Error {
        let list: Vec<String> = plan
            .unassigned
            .iter()
            .map(|(a, n)| format!("{a} ({n})"))
            .collect();
        return Err(Error::Usage(format!(
            "code for targets nothing selects: {}; select them (--family, --target, --all) or pass --unassigned drop",
            list.join(", ")
        )));
    }
    if let Ok(m) = std::fs::symlink_metadata(out)
        && m.file_type().is_symlink()
    {
        return Err(Error::Usage(format!(
            "{} is a symlink{}; give the directory itself, or another output",
            out.display(),
            if out.exists() {
                ""
            } else {
                " that points nowhere"
            }
        )));
    }
    if let Some(a) = out
        .ancestors()
        .skip(1)
        .find(|a| !a.as_os_str().is_empty() && std::fs::symlink_metadata(a).is_ok())
        && !a.is_dir()
    {
        return Err(Error::Usage(format!(
            "{} cannot be created: {} is not a directory",
            out.display(),
            a.display()
        )));
    }
    if out.exists() {
        let empty = std::fs::read_dir(out)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !empty {
            match (ledger_in(out), opts.force) {
                (Some(_), true) => {}
                (Some(l), false) => {
                    return Err(Error::OutputTaken {
                        path: out.to_path_buf(),
                        what: format!(
                            "holds a previous pack (ledger {}); pass --force to replace it",
                            l.display()
                        ),
                    });
                }
                (None, _) => {
                    return Err(Error::OutputTaken {
                        path: out.to_path_buf(),
                        what: format!(
                            "exists, is not empty and is not a previous pack's output (no \
                             {LEDGER_PATH}); it is left alone even with --force: remove it or \
                             choose another output"
                        ),
                    });
                }
            }
        }
    }
    if opts.strict && !plan.warnings.is_empty() {
        return Err(Error::Findings(format!(
            "--strict: {} warning(s), nothing written:\n  {}",
            plan.warnings.len(),
            plan.warnings.join("\n  ")
        )));
    }
    Ok(())
}

struct Worker<'a> {
    tree: &'a Path,
    stage: &'a Path,
    plan: &'a PackPlan,
    opts: &'a PackOptions,
    /// Writer per family (None: no kernel for it, no archive).
    writers: &'a [Option<ArchiveWriter>],
    sink: &'a dyn EventSink<PackEvent>,
    warnings: &'a Mutex<Vec<String>>,
    ledger: &'a Mutex<Vec<LedgerBinary>>,
    grown: &'a Mutex<Vec<Growth>>,
    input_hashes: &'a BTreeMap<(String, u32, String), Sha256Digest>,
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

    /// Where `rel` is staged; `None` for a file left out.
    fn dest(&self, rel: &str, place: Place) -> Option<PathBuf> {
        let rel = crate::relpath::to_path(rel);
        match (self.opts.layout, place) {
            (Layout::Combined, _) => Some(self.stage.join(rel)),
            (Layout::Split, Place::Unit(i)) => {
                Some(self.stage.join(&self.plan.units[i].name).join(rel))
            }
            (Layout::Split, Place::Unselected) => None,
            (Layout::Split, Place::Generic) => Some(self.stage.join("generic").join(rel)),
        }
    }

    /// Copy a regular input file: opened without following a symlink, and only if it
    /// is still the file `meta` describes (a file swapped for a symlink or another
    /// file after the scan is not followed out of the tree).
    fn copy(&self, src: &Path, dst: &Path, meta: &std::fs::Metadata) -> Result<u64> {
        let (from, _) = fsutil::open_scanned(src, Some((meta.dev(), meta.ino())))
            .map_err(|e| changed(src, e))?;
        fsutil::copy_opened(from, src, dst, meta)
    }

    fn process(&self, worker: usize, files: &WorkList, f: &Work) -> Result<()> {
        // Consumed input archives are packed again, and a previous ledger replaced.
        if (f.kind == FileKind::Kpack && self.plan.consumed_archives.contains(&f.path))
            || f.path == LEDGER_PATH
        {
            return Ok(());
        }
        if let Some(why) = files.skipped(f) {
            self.warn(why.to_string());
            return Ok(());
        }
        let src = self.tree.join(crate::relpath::to_path(&f.path));
        let Some(dst) = self.dest(&f.path, f.place) else {
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
            FileKind::Other => {} // skipped above
            _ if f.linked => {}   // second pass
            _ => {
                // The file as it is now, not through a symlink swapped in after the
                // scan, and the very file the scan read: a directory on its path
                // swapped for a symlink leads to another inode.
                let (_, meta) =
                    fsutil::open_scanned(&src, f.identity).map_err(|e| changed(&src, e))?;
                let out = if let Some(pb) = self.plan.binaries_planned.get(&f.path) {
                    self.pack_binary(worker, f, pb, &src, &dst, &meta)?
                } else {
                    self.sink.event(PackEvent::Phase {
                        worker,
                        path: f.path.clone(),
                        phase: Phase::Copy,
                        bytes: f.size,
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
}

/// Carry out a plan. On any error or cancellation the temporary output is removed
/// and the output is left as it was.
pub fn execute_pack(
    mut plan: PackPlan,
    tree: &Path,
    out: &Path,
    opts: &PackOptions,
    sink: &dyn EventSink<PackEvent>,
    cancel: &CancelToken,
) -> Result<PackReport> {
    // What interrupted runs left goes first (a previous output a killed --force run
    // moved aside is put back), so that the checks see OUT as it really is.
    clean_stale(out, sink)?;
    check_plan(&plan, out, opts)?;
    // The plan lists every code object to pack: of the scan, the workers need a few
    // fields of each file (see `work`), and the verify scans the output.
    let report = plan
        .report
        .take()
        .ok_or_else(|| Error::Internal("plan has no scan".into()))?;
    let start = Instant::now();
    let (parent, prefix) = tmp_prefix(out)?;
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let stage = parent.join(format!("{prefix}{}", std::process::id()));
    match std::fs::symlink_metadata(&stage) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(&stage),
        Ok(_) => std::fs::remove_file(&stage),
        Err(_) => Ok(()),
    }
    .map_err(|e| Error::io(&stage, e))?;
    std::fs::create_dir(&stage).map_err(|e| Error::io(&stage, e))?;
    // Kept in unnamed files of the stage: nothing of them is placed.
    let files = WorkList::of(report, &plan, opts.layout == Layout::Split, &stage)
        .map_err(|e| Error::io(&stage, e));
    let staged = files.and_then(|files| run_stage(&plan, &files, tree, &stage, opts, sink, cancel));
    let staged = staged.and_then(|s| {
        if opts.strict && !s.warnings.is_empty() {
            return Err(Error::Findings(format!(
                "--strict: {} warning(s) while packing, nothing written:\n  {}",
                s.warnings.len(),
                s.warnings.join("\n  ")
            )));
        }
        Ok(s)
    });
    let staged = match staged {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&stage);
            return Err(e);
        }
    };
    let mut verify_faults = Vec::new();
    let mut verified_kernels = 0;
    if opts.verify {
        sink.event(PackEvent::Finishing("verifying"));
        let v = verify_tree(&stage, Some(&plan), opts.layout, &Loader::ALL);
        verify_faults = v.faults;
        verified_kernels = v.proved;
        if !verify_faults.is_empty() {
            let _ = std::fs::remove_dir_all(&stage);
            return Err(Error::NotAsWritten {
                path: out.to_path_buf(),
                what: format!(
                    "the packed tree fails verification, nothing was written:\n  {}",
                    verify_faults.join("\n  ")
                ),
            });
        }
    }
    if cancel.is_cancelled() {
        let _ = std::fs::remove_dir_all(&stage);
        return Err(Error::Cancelled);
    }
    sink.event(PackEvent::Finishing("renaming into place"));
    let placed = if out.exists() && opts.force && ledger_in(out).is_some() {
        // One exchange: OUT is the old output or the new one, never absent; the old
        // one, now at the stage's name, goes after (or with the next run, if killed).
        match crate::place::exchange(&stage, out) {
            Ok(()) => {
                let _ = std::fs::remove_dir_all(&stage);
                Ok(())
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS)) => {
                // A file system without RENAME_EXCHANGE: two renames (a killed run is
                // put back by the next, see `clean_stale`).
                let old = parent.join(format!("{prefix}{}-old", std::process::id()));
                std::fs::rename(out, &old)
                    .and_then(|()| std::fs::rename(&stage, out))
                    .map(|()| {
                        let _ = std::fs::remove_dir_all(&old);
                    })
            }
            Err(e) => Err(e),
        }
    } else {
        // rename(2) replaces only an empty directory: another pack that finished
        // first keeps its output.
        std::fs::rename(&stage, out)
    };
    if let Err(e) = placed {
        let _ = std::fs::remove_dir_all(&stage);
        if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY) | Some(libc::EEXIST)) {
            return Err(Error::OutputTaken {
                path: out.to_path_buf(),
                what: "appeared while packing (another pack finished first) and is kept; pass \
                       --force to replace it"
                    .into(),
            });
        }
        return Err(Error::io(out, e));
    }
    Ok(PackReport {
        bytes_in: plan.input_bytes,
        plan,
        archives: staged.archives,
        files: staged.files,
        bytes_out: staged.bytes_out,
        grown: staged.grown,
        seconds: start.elapsed().as_secs_f64(),
        warnings: staged.warnings,
        verify_faults,
        verified: opts.verify,
        verified_code_objects: verified_kernels,
    })
}

struct Staged {
    archives: Vec<WrittenArchive>,
    warnings: Vec<String>,
    bytes_out: u64,
    files: BTreeMap<String, u64>,
    grown: Vec<Growth>,
}

fn run_stage(
    plan: &PackPlan,
    files: &WorkList,
    tree: &Path,
    stage: &Path,
    opts: &PackOptions,
    sink: &dyn EventSink<PackEvent>,
    cancel: &CancelToken,
) -> Result<Staged> {
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
    let writers = open_writers(plan, stage, opts, cancel)?;
    let total_bytes = files.bytes_read();
    sink.event(PackEvent::Started {
        files: files.len() as u64,
        bytes: total_bytes,
    });
    for w in &plan.warnings {
        sink.event(PackEvent::Warning(w.clone()));
    }
    let input_hashes = input_hashes(tree);
    let warnings = Mutex::new(plan.warnings.clone());
    let ledger_bins = Mutex::new(Vec::new());
    let grown = Mutex::new(Vec::new());
    let bytes_out = AtomicU64::new(0);
    let kernel_counts: Vec<AtomicU64> = plan.units.iter().map(|_| AtomicU64::new(0)).collect();
    let w = Worker {
        tree,
        stage,
        plan,
        opts,
        writers: &writers,
        sink,
        warnings: &warnings,
        ledger: &ledger_bins,
        grown: &grown,
        input_hashes: &input_hashes,
        bytes_out: &bytes_out,
        kernel_counts: &kernel_counts,
    };
    // Largest files first, one per task. (No nested parallel loops: a worker waiting
    // on one would steal other files, and the binaries in flight would grow with the
    // tree.)
    let run = || -> Result<()> {
        (0..files.len())
            .into_par_iter()
            .with_max_len(1)
            .try_for_each(|k| {
                if cancel.is_cancelled() {
                    return Err(Error::Cancelled);
                }
                let worker = rayon::current_thread_index().unwrap_or(0);
                let f = files.get(k).map_err(|e| Error::io(stage, e))?;
                w.process(worker, files, &f).map_err(|e| match e {
                    Error::Cancelled => Error::Cancelled,
                    other => Error::in_file(&f.path, other),
                })
            })
    };
    crate::parallel::on_threads(opts.threads, run)??;
    link_hard_links(&w, files)?;
    sink.event(PackEvent::Finishing("writing archives"));
    let archives = finish_archives(plan, writers)?;
    bytes_out.fetch_add(archives.iter().map(|a| a.bytes).sum(), Ordering::Relaxed);
    let ledger = ledger_of(plan, opts, ledger_bins.into_inner().unwrap_or_default());
    let ledger_path = roots[0].join(LEDGER_PATH);
    if let Some(d) = ledger_path.parent() {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    let json = ledger.to_json();
    fsutil::write_atomic(&ledger_path, &json, None)?;
    bytes_out.fetch_add(json.len() as u64, Ordering::Relaxed);
    // Directory mtimes last (writing into them changed them).
    for r in &roots {
        for d in dirs.iter().rev() {
            if let Ok(m) = std::fs::metadata(tree.join(d)) {
                set_dir_mtime(&r.join(d), &m);
            }
        }
    }
    let mut grown = grown.into_inner().unwrap_or_default();
    grown.sort_by(|a, b| a.path.cmp(&b.path));
    let mut warnings = warnings.into_inner().unwrap_or_default();
    let planned = plan.warnings.len();
    warnings[planned..].sort();
    Ok(Staged {
        archives,
        warnings,
        bytes_out: bytes_out.load(Ordering::Relaxed),
        files: files.classes.clone(),
        grown,
    })
}

/// One archive writer per unit with an archive (its TOC aliases added).
fn open_writers(
    plan: &PackPlan,
    stage: &Path,
    opts: &PackOptions,
    cancel: &CancelToken,
) -> Result<Vec<Option<ArchiveWriter>>> {
    let mut writers = Vec::new();
    for unit in &plan.units {
        let Some(rel) = &unit.archive else {
            writers.push(None);
            continue;
        };
        let p = stage.join(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
        }
        let meta = ArchiveMeta {
            group_name: opts.group.clone(),
            gfx_arch_family: unit.name.clone(),
            gfx_arches: unit.gfx_arches.clone(),
        };
        let w =
            ArchiveWriter::create(&p, meta, opts.scheme, opts.level)?.cancelled_by(cancel.clone());
        for a in &unit.aliases {
            w.alias(&a.key, &a.arch, &a.of)?;
        }
        writers.push(Some(w));
    }
    Ok(writers)
}

/// The input ledger's hash of every (binary, bundle, target): what is re-read from
/// input archives must be what was packed.
fn input_hashes(tree: &Path) -> BTreeMap<(String, u32, String), Sha256Digest> {
    crate::kpack::ledger::Ledger::read(tree)
        .ok()
        .flatten()
        .map(|(_, l)| {
            l.binaries
                .into_iter()
                .flat_map(|b| {
                    let path = b.path;
                    b.kernels
                        .into_iter()
                        .map(move |k| ((path.clone(), k.bundle, k.target.to_string()), k.sha256))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Hard links: to the copy of the first path of the inode.
fn link_hard_links(w: &Worker, files: &WorkList) -> Result<()> {
    for (f, first) in files.links() {
        let place = f.place;
        let (Some(a), Some(b)) = (w.dest(first, place), w.dest(&f.path, place)) else {
            continue;
        };
        if a.exists() {
            std::fs::hard_link(&a, &b).map_err(|e| Error::io(&b, e))?;
        }
    }
    Ok(())
}

/// Every archive finished: what it holds and its size.
fn finish_archives(
    plan: &PackPlan,
    writers: Vec<Option<ArchiveWriter>>,
) -> Result<Vec<WrittenArchive>> {
    let mut archives = Vec::new();
    for (i, wr) in writers.into_iter().enumerate() {
        let Some(wr) = wr else { continue };
        let s = wr.finish()?;
        archives.push(WrittenArchive {
            path: plan.units[i].archive.clone().unwrap_or_default(),
            unit: plan.units[i].name.clone(),
            code_objects: s.code_objects,
            raw_bytes: s.raw_bytes,
            bytes: s.file_size,
        });
    }
    Ok(archives)
}

fn walk_dirs(tree: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(tree)
        .follow_links(false)
        .sort_by_file_name()
        .min_depth(1)
    {
        let e = e.map_err(|e| {
            let at = e.path().unwrap_or(tree).to_path_buf();
            Error::io(at, e.into())
        })?;
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
