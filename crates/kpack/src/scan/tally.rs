//! The totals of a scan, counted one report at a time: a streamed scan
//! ([`super::scan_each`]) counts each file as it passes and holds none of them.

use super::{ArchTotal, Diagnostic, FileKind, FileReport, Severity, Totals, TreeReport};
use std::collections::BTreeMap;

/// Totals, per-arch figures and diagnostics over the reports added so far.
pub(super) struct Tally {
    totals: Totals,
    arch_totals: BTreeMap<String, ArchTotal>,
    diagnostics: Vec<Diagnostic>,
}

impl Tally {
    /// A tally starting with the walk's own diagnostics and directory count.
    pub(super) fn new(diagnostics: Vec<Diagnostic>, directories: u64) -> Self {
        Tally {
            totals: Totals {
                directories,
                ..Totals::default()
            },
            arch_totals: BTreeMap::new(),
            diagnostics,
        }
    }

    /// A problem of the walk itself (a directory that cannot be read).
    pub(super) fn diagnostic(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }

    /// A directory seen by the walk.
    pub(super) fn directory(&mut self) {
        self.totals.directories += 1;
    }

    /// Count one entry.
    pub(super) fn add(&mut self, f: &FileReport) {
        let totals = &mut self.totals;
        totals.entries += 1;
        let counted = f.hard_link_of.is_none() && f.kind != FileKind::Symlink;
        let kt = totals.by_kind.entry(f.kind).or_default();
        kt.count += 1;
        if counted {
            kt.bytes += f.size;
            totals.bytes += if f.kind == FileKind::Other { 0 } else { f.size };
            totals.fatbin_bytes += f.fatbin_bytes;
            self.add_device(f);
        }
        for p in &f.problems {
            self.diagnostics.push(Diagnostic {
                path: f.path.clone(),
                severity: if f.kind == FileKind::Other || p.starts_with("unsupported") {
                    Severity::Warning
                } else {
                    Severity::Error
                },
                message: p.clone(),
                unreadable: false,
            });
        }
    }

    /// A counted file's device code, by arch.
    fn add_device(&mut self, f: &FileReport) {
        let m = &mut self.arch_totals;
        for b in f.all_bundles() {
            for t in &b.targets {
                let a = slot(m, &t.arch);
                a.raw += t.size;
                a.compressed += t.compressed_size;
                a.code_objects += 1;
            }
        }
        if f.kind == FileKind::CodeObject
            && let Some(name) = &f.arch
        {
            let a = slot(m, name);
            a.raw += f.size;
            a.compressed += f.size;
            a.code_objects += 1;
        }
        if f.kind == FileKind::KernelDatabase
            && f.bundles.is_empty()
            && let Some(name) = &f.arch
        {
            slot(m, name).kernel_database += f.size;
        }
        for e in &f.embedded {
            for t in &e.targets {
                let a = slot(m, &t.arch);
                a.embedded += t.size;
                a.embedded_code_objects += 1;
            }
        }
        if let Some(k) = &f.kpack {
            for (name, c) in &k.by_arch {
                let a = slot(m, name);
                a.archived += c.raw;
                a.archived_code_objects += c.code_objects;
                a.archived_stored += c.stored;
            }
        }
    }

    /// The report: `files` (sorted by path; empty for a streamed scan) with what was
    /// counted, diagnostics sorted by path.
    pub(super) fn finish(self, root: String, files: Vec<FileReport>) -> TreeReport {
        let Tally {
            totals: mut t,
            arch_totals,
            mut diagnostics,
        } = self;
        diagnostics.sort_by(|a, b| a.path.cmp(&b.path).then(a.message.cmp(&b.message)));
        t.device_raw = arch_totals.values().map(|a| a.raw + a.archived).sum();
        t.device_stored = (arch_totals.values())
            .map(|a| a.compressed + a.archived_stored)
            .sum();
        // Code per target, in binaries and in the archives host-only binaries use.
        let archs = arch_totals
            .iter()
            .filter(|(_, a)| a.raw + a.archived > 0)
            .map(|(name, a)| (name.clone(), a.raw + a.archived))
            .collect();
        TreeReport {
            root,
            files,
            archs,
            arch_totals,
            totals: t,
            diagnostics,
            wheel: None,
        }
    }
}

/// The totals of `arch`, made when first seen.
fn slot<'a>(m: &'a mut BTreeMap<String, ArchTotal>, arch: &str) -> &'a mut ArchTotal {
    m.entry(arch.to_string()).or_default()
}
