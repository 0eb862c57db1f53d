//! A wheel scanned as a tree: every member classified as a file of a tree is.

use super::{FileKind, FileReport, ScanEvent, ScanOptions, TreeReport};
use crate::error::Result;
use crate::event::EventSink;
use crate::kerneldb::{self, Database};
use crate::wheel::Wheel;
use crate::zip::Member;
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// Scan a wheel as a tree: every member classified as `scan` classifies files
/// (fat binaries with their bundles, kernel databases, archives…), read from the
/// zip with bounded memory. Directory members are counted, not listed.
pub fn scan_wheel(
    path: &Path,
    opts: &ScanOptions,
    sink: &dyn EventSink<ScanEvent>,
) -> Result<TreeReport> {
    let w = Wheel::open(path)?;
    let spill = std::env::temp_dir();
    let handlers: &[Database] = opts.databases.as_deref().unwrap_or(&Database::ALL);
    let files: Vec<&Member> = w.index.members.iter().filter(|m| !m.is_dir()).collect();
    let mut dirs: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    for m in &w.index.members {
        let mut p = m.name.trim_end_matches('/');
        if m.is_dir() {
            dirs.insert(p);
        }
        while let Some((parent, _)) = p.rsplit_once('/') {
            dirs.insert(parent);
            p = parent;
        }
    }
    sink.event(ScanEvent::Discovered {
        files: files.len() as u64,
        bytes: files.iter().map(|m| m.size).sum(),
    });
    let work = |m: &&Member| -> FileReport {
        let r = inspect_member(&w, m, handlers, &spill, opts.deep);
        w.release(m);
        sink.event(ScanEvent::Inspected(Box::new(r.clone())));
        sink.event(ScanEvent::FileDone {
            path: PathBuf::from(&m.name),
            bytes: m.size,
        });
        r
    };
    let reports: Vec<FileReport> =
        crate::parallel::on_threads(opts.threads, || files.par_iter().map(work).collect())?;
    let mut report = super::partial_report(&path.display().to_string(), reports);
    report.totals.directories = dirs.len() as u64;
    report.wheel = Some(w.info.clone());
    Ok(report)
}

/// Classify one member (what `scan` does for a file), embedded device code
/// included (`deep`: searched in every byte).
fn inspect_member(
    w: &Wheel,
    m: &Member,
    handlers: &[Database],
    spill: &Path,
    deep: bool,
) -> FileReport {
    let mut r = FileReport::new(m.name.clone(), FileKind::Opaque, m.size, m.permissions());
    r.stored_size = Some(m.compressed_size);
    if m.is_symlink() {
        r.kind = FileKind::Symlink;
        // The size is checked before anything is inflated: a "symlink" member may
        // be a deflate bomb.
        if m.size > 4096 {
            r.problems
                .push("symlink member with a target over 4 KiB".into());
            return r;
        }
        match m.read_all(w.bytes()) {
            Ok(t) => r.target = Some(String::from_utf8_lossy(&t).into_owned()),
            Err(e) => r.problems.push(e.to_string()),
        }
        return r;
    }
    let db = kerneldb::classify_with(&m.name, handlers);
    if let Some(d) = &db {
        r.set_database(d);
    }
    let head = match m.head(w.bytes(), 64) {
        Ok(h) => h,
        Err(e) => {
            r.problems.push(e.to_string());
            return r;
        }
    };
    if head.is_empty() || !(deep || super::worth_mapping(&head)) {
        // Still prove the member reads (size and CRC) so a damaged wheel shows.
        if let Err(e) = std::io::copy(&mut w.member_reader(m), &mut std::io::sink()) {
            r.problems.push(e.to_string());
        }
        return r;
    }
    match w.contents(m, spill) {
        Ok(c) => {
            super::classify_bytes(&mut r, &c, db.is_some());
            super::find_embedded(&mut r, &c, deep, &|_, _| {});
        }
        // The scan's root is the wheel: a member's problem does not name it again.
        Err(crate::Error::Format { error, .. }) => r.problems.push(error.to_string()),
        Err(e) => r.problems.push(e.to_string()),
    }
    r
}
