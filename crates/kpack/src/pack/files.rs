//! What a pack plans for each file of the tree ([`plan_files`]): a fat binary's
//! kernels come from its bundles, a host-only binary's from the archives it (or
//! `--archives`) names, and anything that cannot be rewritten is copied as it is,
//! with the reason.

use super::{CopiedFile, KernelFrom, PlannedBinary, RepackedBinary};
use crate::error::{Error, Result};
use crate::kpack::Archive;
use crate::kpack::ledger::Ledger;
use crate::kpack::marker::Marker;
use crate::kpack::resolve::{TreeArchives, reachable_archives};
use crate::scan::{FileKind, FileReport, TreeReport};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The archives a pack may read kernels from, and the previous pack's ledger.
pub(super) struct Inputs {
    /// Every readable archive: the tree's (by relative path) and `--archives`.
    pub archives: TreeArchives,
    /// The tree's own archives.
    pub in_tree: BTreeSet<String>,
    /// The `--archives` ones, in the order given.
    pub user_keys: Vec<String>,
    /// A previous pack's ledger in the input: its hashes check what is re-read.
    pub ledger: Option<Ledger>,
}

impl Inputs {
    /// Open the tree's archives (but damaged ones) and the user's; an archive of the
    /// tree that cannot be read is a warning, one the user named an error.
    pub fn open(
        tree: &Path,
        report: &TreeReport,
        damaged: &BTreeSet<&str>,
        user: &[PathBuf],
        warnings: &mut Vec<String>,
    ) -> Result<Self> {
        let mut archives = TreeArchives::new();
        for f in report.files.iter().filter(|f| f.kind == FileKind::Kpack) {
            if damaged.contains(f.path.as_str()) {
                continue;
            }
            match Archive::open(&tree.join(crate::relpath::to_path(&f.path))) {
                Ok(a) => {
                    archives.insert(f.path.clone(), a);
                }
                Err(e) => warnings.push(format!("{}: archive not readable: {e}", f.path)),
            }
        }
        let in_tree: BTreeSet<String> = archives.keys().cloned().collect();
        let user = user_archives(user)?;
        let user_keys: Vec<String> = user.iter().map(|(k, _)| k.clone()).collect();
        for (k, a) in user {
            archives.insert(k, a);
        }
        let ledger = match Ledger::read(tree) {
            Ok(l) => l.map(|(_, l)| l),
            Err(e) => {
                warnings.push(format!("{e}; its hashes are not used"));
                None
            }
        };
        Ok(Inputs {
            archives,
            in_tree,
            user_keys,
            ledger,
        })
    }
}

/// Archives named with `--archives`: files, or every `*.kpack` below a directory
/// (sorted), in the order given.
fn user_archives(paths: &[PathBuf]) -> Result<Vec<(String, Archive)>> {
    let mut out = Vec::new();
    for p in paths {
        let mut files = Vec::new();
        if p.is_dir() {
            for e in walkdir::WalkDir::new(p)
                .follow_links(false)
                .sort_by_file_name()
            {
                let e = e.map_err(|e| {
                    let at = e.path().unwrap_or(p).to_path_buf();
                    Error::io(at, e.into())
                })?;
                if e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "kpack") {
                    files.push(e.path().to_path_buf());
                }
            }
            if files.is_empty() {
                return Err(Error::Usage(format!(
                    "--archives {}: no .kpack file in it",
                    p.display()
                )));
            }
        } else {
            files.push(p.clone());
        }
        for f in files {
            let a = Archive::open(&f)?;
            out.push((f.display().to_string(), a));
        }
    }
    Ok(out)
}

/// What the plan makes of the tree's files.
#[derive(Default)]
pub(super) struct FilePlans {
    /// The binaries whose kernels are packed, by path.
    pub planned: BTreeMap<String, PlannedBinary>,
    /// Files copied as they are, with the reason.
    pub copied: Vec<CopiedFile>,
    /// Host-only binaries whose kernels are packed again.
    pub repacked: Vec<RepackedBinary>,
    /// The tree's archives those kernels come from (packed again, never copied).
    pub consumed: BTreeSet<String>,
    /// Fat binaries rewritten, and the size of their device code.
    pub binaries: u64,
    pub fatbin_bytes: u64,
}

impl FilePlans {
    fn copy(&mut self, f: &FileReport, reason: impl Into<String>) {
        self.copied.push(CopiedFile {
            path: f.path.clone(),
            reason: reason.into(),
            host_only: f.kind == FileKind::HostOnlyBinary,
        });
    }
}

/// Plan every file of `report`: `damaged` ones (by path) are copied as they are.
pub(super) fn plan_files(
    report: &TreeReport,
    damaged: &BTreeSet<&str>,
    inputs: &Inputs,
    warnings: &mut Vec<String>,
) -> Result<FilePlans> {
    let mut plans = FilePlans::default();
    for f in &report.files {
        if f.hard_link_of.is_some() {
            continue;
        }
        if !f.embedded.is_empty() {
            // Once per file: what stays where it is, and why.
            warnings.push(crate::embedded::stays_in_place(&f.path, &f.embedded));
        }
        let damaged = damaged.contains(f.path.as_str());
        let pb = match f.kind {
            FileKind::FatBinary if damaged => {
                warnings.push(format!(
                    "{}: damaged, copied as it is with its device code (--copy-damaged)",
                    f.path
                ));
                plans.copy(f, "damaged (--copy-damaged): copied with its device code");
                continue;
            }
            FileKind::FatBinary if f.rewritable() && other_host(f).is_some() => {
                let why = format!(
                    "{} host code: only {} fat binaries are rewritten; copied with its device code",
                    other_host(f).unwrap_or_default(),
                    crate::elf::machine::handled_list()
                );
                warnings.push(format!("{}: {why}", f.path));
                plans.copy(f, why);
                continue;
            }
            FileKind::FatBinary if !f.rewritable() || f.bundles.is_empty() => {
                plans.copy(
                    f,
                    "not an executable or shared library: copied with its device code",
                );
                continue;
            }
            FileKind::FatBinary => {
                plans.binaries += 1;
                plans.fatbin_bytes += f.fatbin_bytes;
                fat_binary(f)
            }
            FileKind::HostOnlyBinary if !damaged && f.rewritable() => {
                let Some(m) = &f.marker else {
                    plans.copy(
                        f,
                        "host-only binary without a readable marker: copied as it is",
                    );
                    continue;
                };
                match host_only_binary(f, m, inputs, warnings)? {
                    Some((pb, used)) => {
                        plans.consumed.extend(
                            (used.iter())
                                .filter(|p| inputs.in_tree.contains(*p))
                                .cloned(),
                        );
                        plans.repacked.push(RepackedBinary {
                            path: f.path.clone(),
                            code_objects: pb.kernels.len() as u64,
                            archives: used,
                        });
                        pb
                    }
                    None => {
                        plans.copy(f, "host-only binary whose archives were not found");
                        continue;
                    }
                }
            }
            _ => continue,
        };
        plans.planned.insert(f.path.clone(), pb);
    }
    Ok(plans)
}

/// The name of an ELF binary's host CPU when the rewrite does not handle it.
fn other_host(f: &FileReport) -> Option<String> {
    f.machine
        .filter(|&m| crate::elf::machine::HostMachine::of(m).is_none())
        .map(crate::elf::machine::machine_name)
}

/// A fat binary: every code object of its bundles.
fn fat_binary(f: &FileReport) -> PlannedBinary {
    let mut pb = PlannedBinary {
        kernel_name: f.path.clone(),
        bundles: f.bundles.iter().map(|b| b.index as u32).collect(),
        kernels: Vec::new(),
        dropped: Vec::new(),
        host_only: false,
    };
    for b in &f.bundles {
        for t in &b.targets {
            pb.kernels
                .push((b.index as u32, t.arch.clone(), t.size, KernelFrom::Bundle));
        }
    }
    pb
}

/// A host-only binary with marker `m`: its code objects from the archives it
/// reaches (or `--archives`), and the archives used; `None` (with a warning) when
/// none holds any. A code object the input's ledger promises and no archive holds
/// is an error: the input tree is damaged.
fn host_only_binary(
    f: &FileReport,
    m: &Marker,
    inputs: &Inputs,
    warnings: &mut Vec<String>,
) -> Result<Option<(PlannedBinary, Vec<String>)>> {
    let mut from: Vec<String> = inputs.user_keys.clone();
    let dir = f.path.rsplit_once('/').map_or("", |(d, _)| d);
    for p in reachable_archives(m, dir, &inputs.archives) {
        if inputs.in_tree.contains(p) && !from.iter().any(|x| x == p) {
            from.push(p.to_string());
        }
    }
    let bundles: BTreeSet<u32> = f
        .wrappers
        .iter()
        .map(|w| (w.reserved & 0xffff_ffff) as u32)
        .collect();
    let mut pb = PlannedBinary {
        kernel_name: m.kernel_name.clone(),
        bundles: bundles.iter().copied().collect(),
        kernels: Vec::new(),
        dropped: Vec::new(),
        host_only: true,
    };
    let mut seen: BTreeSet<(u32, String)> = BTreeSet::new();
    let mut used: Vec<String> = Vec::new();
    for co in &bundles {
        let key = format!("{}#{co}", m.kernel_name);
        for p in &from {
            let a = &inputs.archives[p];
            // Aliases are listed again by the new archive's own plan.
            for e in a
                .index
                .kernels
                .iter()
                .filter(|e| *e.key == *key && !e.is_alias())
            {
                if seen.insert((*co, e.arch.to_string())) {
                    pb.kernels.push((
                        *co,
                        crate::intern::interned(&e.arch),
                        e.size,
                        KernelFrom::Archive(p.clone()),
                    ));
                    if !used.contains(p) {
                        used.push(p.clone());
                    }
                }
            }
        }
    }
    if pb.kernels.is_empty() {
        warnings.push(format!(
            "{}: host-only binary whose archives are not here ({}); copied as it \
             is (name them with --archives to pack its kernels again)",
            f.path,
            m.kpack_search_paths.join(", ")
        ));
        return Ok(None);
    }
    for co in &bundles {
        if !pb.kernels.iter().any(|k| k.0 == *co) {
            warnings.push(format!(
                "{}: no archive holds any code object of bundle #{co}",
                f.path
            ));
        }
    }
    if let Some(l) = &inputs.ledger
        && let Some(lb) = l.binaries.iter().find(|b| b.path == f.path)
    {
        for k in &lb.kernels {
            if !seen.contains(&(k.bundle, k.target.to_string())) {
                return Err(Error::Damaged {
                    path: f.path.clone().into(),
                    what: format!(
                        "the input's ledger promises bundle #{} for {}, and no archive \
                         holds it (the input tree is damaged: run verify on it)",
                        k.bundle, k.target
                    ),
                });
            }
        }
    }
    Ok(Some((pb, used)))
}
