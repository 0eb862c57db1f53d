//! The checks `verify` runs on an installed packed tree ([`verify_installed`]), in
//! order: what shards left to others, the ledger, damaged files, every archive's
//! frames, every host-only binary as its loader maps it, the ledger's promises
//! (archives, binaries, kernel-database files), the binaries outside it, and a
//! pack's own plan.

use super::installed::Installed;
use super::verify::{Hashes, TreeVerdict, check_ledgered, check_unledgered, merged_path};
use super::{Layout, PackPlan};
use crate::kpack::Archive;
use crate::kpack::ledger::{LEDGER_PATH, Ledger, sha256_file};
use crate::kpack::resolve::{Loader, TreeArchives};
use crate::scan::{self, FileKind, FileReport};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// What the checks share: the install's files where they really are, its host-only
/// binaries, its archives and their hashes.
struct Tree<'a> {
    inst: &'a Installed,
    real_of: BTreeMap<&'a str, PathBuf>,
    hosts: BTreeMap<String, &'a FileReport>,
    archives: TreeArchives,
    hashes: Hashes,
    loaders: &'a [Loader],
}

/// Verify the install `inst` (see [`super::verify_tree`]).
pub(super) fn verify_installed(
    inst: &Installed,
    plan: Option<&PackPlan>,
    layout: Layout,
    loaders: &[Loader],
) -> TreeVerdict {
    let mut v = TreeVerdict::default();
    note_left(&mut v, inst);
    // A pack's ledger, and those `split` wrote for each target artifact installed.
    let (ledger, unreadable) = match read_ledger(&mut v, inst) {
        Ok(l) => (l, false),
        Err(()) => (None, true),
    };
    damaged(&mut v, inst, ledger.as_ref());
    let real_of: BTreeMap<&str, PathBuf> = inst
        .files
        .iter()
        .map(|(i, f)| (f.path.as_str(), inst.real(*i, &f.path)))
        .collect();
    let hosts: BTreeMap<String, &FileReport> = inst
        .files
        .iter()
        .map(|(_, f)| f)
        .filter(|f| f.kind == FileKind::HostOnlyBinary && f.hard_link_of.is_none())
        .map(|f| (f.path.clone(), f))
        .collect();
    let mut t = Tree {
        inst,
        real_of,
        hosts,
        archives: TreeArchives::new(),
        hashes: Hashes::new(),
        loaders,
    };
    // The pack's own check trusts the frame checksums (zstd's XXH64 of the bytes
    // hashed for the ledger a moment earlier) instead of hashing everything twice;
    // `verify TREE` recomputes every SHA-256, and archives without checksums are
    // always hashed.
    t.open_archives(&mut v, inst, ledger.is_some(), plan.is_none());
    t.check_loaded(&mut v);
    let mut in_ledger = BTreeSet::new();
    if let Some(l) = &ledger {
        in_ledger = t.check_ledger(&mut v, l);
    } else if unreadable && !t.hosts.is_empty() {
        v.unproven.push(
            "the ledger cannot be read (above), so which kernels each binary had is unknown; \
             a kernel missing from every archive cannot be detected"
                .to_string(),
        );
    } else if !t.hosts.is_empty() {
        v.unproven.push(format!(
            "no ledger ({LEDGER_PATH}): the tree was not packed by kpack-tui, so which kernels \
             each binary had is unknown; a kernel missing from every archive cannot be detected"
        ));
    }
    t.check_outside_ledger(&mut v, ledger.as_ref(), &in_ledger);
    if let Some(plan) = plan {
        t.check_plan(&mut v, plan, layout);
    }
    v
}

/// A shard's output: what its split left to the shards building other targets is
/// named, not proven here.
fn note_left(v: &mut TreeVerdict, inst: &Installed) {
    for (file, l) in &inst.left {
        const SHOWN: usize = 4;
        let more = l.left.len().saturating_sub(SHOWN);
        v.notes.push(format!(
            "{file}: {} {} left to the shards building other targets (--gpu-targets {}): {}{}",
            l.left.len(),
            if l.left.len() == 1 { "item" } else { "items" },
            l.gpu_targets.join(","),
            l.left[..l.left.len().min(SHOWN)].join("; "),
            if more > 0 {
                format!("; … and {more} more, every one in {file}")
            } else {
                String::new()
            }
        ));
    }
}

/// The install's ledgers merged into one (their conflicts are faults). `Err` when
/// one cannot be read (a fault, named).
fn read_ledger(v: &mut TreeVerdict, inst: &Installed) -> Result<Option<Ledger>, ()> {
    match inst.ledgers() {
        Ok(Some(crate::kpack::ledger::Merged {
            paths,
            ledger: l,
            conflicts,
        })) => {
            v.faults.extend(conflicts);
            v.ledger = Some(paths.join(", "));
            Ok(Some(l))
        }
        Ok(None) => Ok(None),
        Err(e) => {
            v.faults.push(e.to_string());
            Err(())
        }
    }
}

/// Damaged files are faults, but those the pack copied as they were on purpose.
fn damaged(v: &mut TreeVerdict, inst: &Installed, ledger: Option<&Ledger>) {
    let copied_on_purpose =
        |p: &str| ledger.is_some_and(|l| l.unpacked.iter().any(|u| u.path == p));
    for d in inst
        .diagnostics
        .iter()
        .filter(|d| d.severity == scan::Severity::Error)
    {
        if copied_on_purpose(&d.path) {
            v.unproven.push(format!(
                "{}: damaged, copied as it was by the pack: {}",
                d.path, d.message
            ));
        } else {
            v.faults.push(format!("{}: {}", d.path, d.message));
        }
    }
}

/// The bundles a host-only binary's wrappers name.
fn co_indices(f: &FileReport) -> BTreeSet<u32> {
    f.wrappers
        .iter()
        .map(|w| (w.reserved & 0xffff_ffff) as u32)
        .collect()
}

impl Tree<'_> {
    /// Open every archive and check its frames (hashed with a ledger to compare
    /// with, unless the pack's own check trusts the checksums).
    fn open_archives(&mut self, v: &mut TreeVerdict, inst: &Installed, ledger: bool, whole: bool) {
        for (_, f) in inst.files.iter().filter(|(_, f)| f.kind == FileKind::Kpack) {
            match Archive::open(&self.real_of[f.path.as_str()]) {
                Ok(a) => {
                    let hashed = ledger && (whole || !a.checksummed());
                    let (faults, h) = a.verify_hashed(hashed);
                    for fault in faults {
                        v.faults.push(format!("{}: {fault}", f.path));
                    }
                    self.hashes.insert(f.path.clone(), (hashed, h));
                    self.archives.insert(f.path.clone(), a);
                }
                Err(e) => v.faults.push(e.to_string()),
            }
        }
    }

    /// Every host-only ELF or PE image is read as its loader maps it: each wrapper's
    /// pointer must reach the marker in the loaded image (a strip after packing can
    /// move the segment that maps it while the section headers still look right).
    /// Executables must keep their program headers where EL8 kernels look (a strip
    /// after packing moves them: `kpack-tui normalize` puts them back).
    fn check_loaded(&self, v: &mut TreeVerdict) {
        let mut misloaded = BTreeSet::new();
        for f in self.hosts.values() {
            let Ok(Some(map)) = crate::fsutil::map_file(&self.real_of[f.path.as_str()]) else {
                continue;
            };
            match crate::fatbin::loaded_faults(&map) {
                Ok(Some(faults)) => {
                    if !faults.is_empty() {
                        misloaded.insert(f.path.clone());
                    }
                    for fault in faults {
                        v.faults.push(format!("{}: {fault}", f.path));
                    }
                }
                Ok(None) => {}
                Err(e) => v.faults.push(format!(
                    "{}: cannot be read as the loader maps it: {e}",
                    f.path
                )),
            }
        }
        for f in self.hosts.values() {
            if !matches!(
                f.elf_kind,
                Some(crate::elf::ElfKind::PieExecutable | crate::elf::ElfKind::Executable)
            ) {
                continue;
            }
            let Ok(Some(map)) = crate::fsutil::map_file(&self.real_of[f.path.as_str()]) else {
                continue;
            };
            use crate::elf::normalize::PhdrState;
            match crate::elf::normalize::check(&map) {
                Ok(PhdrState::Noncompliant { offset, vaddr, .. }) => v.faults.push(format!(
                    "{}: program headers at offset {offset:#x} but address {vaddr:#x}: \
                     Linux 4.18 (EL8) kernels crash running it (moved after packing, e.g. \
                     by llvm-strip; run kpack-tui normalize)",
                    f.path
                )),
                // Reported above, as the loader sees it.
                Ok(PhdrState::Damaged { .. }) if misloaded.contains(&f.path) => {}
                Ok(PhdrState::Damaged { why }) => v.faults.push(format!("{}: {why}", f.path)),
                _ => {}
            }
        }
    }

    /// The ledger's promises: its archives, its binaries (each bundle through every
    /// loader), its kernel-database files, and archives it does not know. Returns
    /// the binaries it lists.
    fn check_ledger(&self, v: &mut TreeVerdict, l: &Ledger) -> BTreeSet<String> {
        let not_installed = self.check_ledger_archives(v, l);
        let mut in_ledger = BTreeSet::new();
        for lb in &l.binaries {
            in_ledger.insert(lb.path.clone());
            self.check_ledger_binary(v, lb, &not_installed);
        }
        self.check_ledger_databases(v, l);
        // Archives the ledger does not know: an extra overlay, a foreign archive
        // matching a marker's pattern. A fault when it shadows a ledgered one.
        for p in self.archives.keys() {
            if l.archives.iter().any(|la| la.path == *p) {
                continue;
            }
            let shadows = format!("{p} lists");
            if v.faults
                .iter()
                .any(|f| f.contains(&shadows) && f.contains("shadows"))
            {
                v.faults.push(format!(
                    "{p}: not in the ledger, and it shadows archives of the ledger for the \
                     devices named above"
                ));
            } else {
                v.notes.push(format!(
                    "{p}: not in the ledger (no pack of this tree wrote it); it shadows no \
                     archive of the ledger"
                ));
            }
        }
        in_ledger
    }

    /// Every archive of the ledger is there with the targets it was written for. In
    /// a split layout's install, an overlay not installed is not a fault: returns
    /// its targets, reported as not installed.
    fn check_ledger_archives<'l>(&self, v: &mut TreeVerdict, l: &'l Ledger) -> BTreeSet<&'l str> {
        let mut not_installed: BTreeSet<&str> = BTreeSet::new();
        for la in &l.archives {
            match self.archives.get(&la.path) {
                None if l.layout == Layout::Split => {
                    v.notes.push(format!(
                        "{}: not installed (its overlay is not in this tree): {} {} for {} \
                         unavailable",
                        la.path,
                        la.kernels,
                        if la.kernels == 1 {
                            "code object"
                        } else {
                            "code objects"
                        },
                        la.gfx_arches.join(" ")
                    ));
                    not_installed.extend(la.gfx_arches.iter().map(String::as_str));
                }
                None => v.faults.push(format!(
                    "{}: archive in the ledger is missing from the tree",
                    la.path
                )),
                Some(a) if a.index.meta.gfx_arches != la.gfx_arches => v.faults.push(format!(
                    "{}: gfx_arches {:?}, the ledger says {:?} (replaced by another archive?)",
                    la.path, a.index.meta.gfx_arches, la.gfx_arches
                )),
                Some(_) => {}
            }
        }
        not_installed
    }

    /// One binary of the ledger: the host-only binary it was written for, its
    /// marker and wrappers as recorded, and every promised code object reachable.
    fn check_ledger_binary(
        &self,
        v: &mut TreeVerdict,
        lb: &crate::kpack::ledger::LedgerBinary,
        not_installed: &BTreeSet<&str>,
    ) {
        let Some(f) = self.hosts.get(&lb.path) else {
            v.faults.push(format!(
                "{}: in the ledger, but not a host-only binary in the tree",
                lb.path
            ));
            return;
        };
        let Some(m) = &f.marker else {
            v.faults.push(format!(
                "{}: host-only binary without a readable marker",
                lb.path
            ));
            return;
        };
        if let Some(want) = &lb.host_sha256
            && let Ok(got) = sha256_file(&self.real_of[f.path.as_str()])
            && got != *want
        {
            v.faults.push(format!(
                "{}: not the host-only binary the ledger was written for (SHA-256 {want}): \
                 its archives may be another build's",
                lb.path
            ));
        }
        if m.kernel_name != lb.kernel_name {
            v.faults.push(format!(
                "{}: marker names {:?}, the ledger {:?}",
                lb.path, m.kernel_name, lb.kernel_name
            ));
        }
        let cos: Vec<u32> = co_indices(f).into_iter().collect();
        if cos != lb.bundles {
            v.faults.push(format!(
                "{}: wrappers name bundles {cos:?}, the ledger {:?}",
                lb.path, lb.bundles
            ));
        }
        check_ledgered(
            v,
            lb,
            m,
            &self.archives,
            &self.hashes,
            not_installed,
            self.loaders,
        );
    }

    /// Kernel-database files the ledger lists (split's target artifacts): each in
    /// the install, byte-identical (rocBLAS's xnack Tensile files went missing from
    /// the gfx90a artifact in 2026).
    fn check_ledger_databases(&self, v: &mut TreeVerdict, l: &Ledger) {
        for df in &l.database_files {
            match self.inst.locate(&df.path) {
                None => v.faults.push(format!(
                    "{}: kernel-database file for {} in the ledger is missing from the tree",
                    df.path, df.target
                )),
                Some(real) => {
                    let got = sha256_file(&real).ok();
                    if got.as_deref() != Some(df.sha256.as_str()) {
                        v.faults.push(format!(
                            "{}: kernel-database file for {} differs from the one the ledger \
                             recorded ({} bytes, SHA-256 {})",
                            df.path, df.target, df.size, df.sha256
                        ));
                    } else {
                        v.proved_files += 1;
                    }
                }
            }
        }
    }

    /// Every host-only binary outside the ledger: what its reachable archives hold
    /// for it must load, and consistently across its bundles.
    fn check_outside_ledger(
        &self,
        v: &mut TreeVerdict,
        ledger: Option<&Ledger>,
        in_ledger: &BTreeSet<String>,
    ) {
        for (path, f) in &self.hosts {
            let Some(m) = &f.marker else {
                if !in_ledger.contains(path) {
                    v.faults.push(format!(
                        "{path}: host-only binary without a readable marker"
                    ));
                }
                continue;
            };
            if in_ledger.contains(path) {
                continue;
            }
            if let Some(u) = ledger.and_then(|l| l.unpacked.iter().find(|u| u.path == *path)) {
                v.unproven.push(format!(
                    "{path}: copied as it was by the pack ({}); its code objects are not proven here",
                    u.reason
                ));
                continue;
            }
            if ledger.is_some() {
                v.unproven.push(format!(
                    "{path}: host-only binary not in the ledger (copied as it was by the pack)"
                ));
            }
            check_unledgered(v, path, m, &co_indices(f), &self.archives, self.loaders);
        }
    }

    /// A pack's own output: every planned kernel is in its family's archive, and
    /// `gfx_arches` is exactly the arches packed (plan paths are the output's).
    fn check_plan(&self, v: &mut TreeVerdict, plan: &PackPlan, layout: Layout) {
        let unit_kernels = plan.unit_kernels();
        for (i, fp) in plan.units.iter().enumerate() {
            let Some(rel) = &fp.archive else { continue };
            let Some(a) = self.archives.get(&merged_path(layout, rel)) else {
                v.faults.push(format!("archive {rel} is missing"));
                continue;
            };
            for k in &unit_kernels[i] {
                if a.entry(&k.key, &k.arch).is_none_or(|e| e.size != k.size) {
                    v.faults.push(format!(
                        "{rel}: {} @ {} missing or of the wrong size",
                        k.key, k.arch
                    ));
                }
            }
            if a.index.meta.gfx_arches != fp.gfx_arches {
                v.faults.push(format!(
                    "{rel}: gfx_arches {:?}, expected {:?}",
                    a.index.meta.gfx_arches, fp.gfx_arches
                ));
            }
        }
    }
}
