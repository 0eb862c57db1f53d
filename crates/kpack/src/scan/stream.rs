//! A scan that hands each file's report on as soon as it and every path before it
//! are inspected, in path order, and keeps none: memory stays at the reports in
//! flight (a window of [`IN_FLIGHT`]) and the directories being walked, whatever the
//! size of the tree. `scan --json` writes each report as it comes.

use super::links::FirstNames;
use super::walk::SortedWalk;
use super::{
    FileKind, FileReport, ScanEvent, ScanOptions, Tally, TreeReport, Walked, inspect_listed,
    is_listed_file, scan, walked,
};
use crate::error::{Error, Result};
use crate::event::EventSink;
use crate::kerneldb::Database;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Reports inspected ahead of the one being handed on: enough that a large binary
/// at the head of the window does not leave the other threads idle behind it.
pub const IN_FLIGHT: usize = 256;

/// Scan `root` as [`scan`] does, handing each entry's report to `each` in path order
/// (the order of [`TreeReport::files`]). Returns the report without its files: the
/// totals, per-target figures and diagnostics over all of them. The sink gets
/// `FileDone` for each file inspected, and `Discovered` once the walk has listed
/// everything (not before: nothing is held to count ahead); no `Listed` or
/// `Inspected`. A single file or a wheel is scanned whole, then handed on.
pub fn scan_each(
    root: &Path,
    opts: &ScanOptions,
    sink: &dyn EventSink<ScanEvent>,
    each: &mut dyn FnMut(FileReport),
) -> Result<TreeReport> {
    let root_meta = std::fs::metadata(root).map_err(|e| Error::io(root, e))?;
    if !root_meta.is_dir() {
        let mut report = scan(root, opts, sink)?;
        std::mem::take(&mut report.files).into_iter().for_each(each);
        return Ok(report);
    }
    let walk = Listing {
        walk: SortedWalk::new(root),
        root,
        sink,
        first_names: FirstNames::default(),
        files: 0,
        bytes: 0,
        said: false,
    };
    let handlers: &[Database] = opts.databases.as_deref().unwrap_or(&Database::ALL);
    let inspect = |w: Walked| {
        let Walked::Entry(mut r, linked) = w else {
            return w;
        };
        // A later name is not read: it has the class of its first (below).
        if r.hard_link_of.is_none() {
            let counted = is_listed_file(&r);
            let abs = root.join(crate::relpath::to_path(&r.path));
            inspect_listed(&mut r, &abs, handlers, opts.deep, Some(root));
            if counted {
                sink.event(ScanEvent::FileDone {
                    path: PathBuf::from(&r.path),
                    bytes: r.size,
                });
            }
        }
        Walked::Entry(r, linked)
    };
    let mut tally = Tally::new(Vec::new(), 0);
    // The class of each file with more than one name whose first name is not plain
    // data (its binaries: a few per hundred files), for its later names, which come
    // after it in path order; any other is `Opaque`.
    let mut classes: HashMap<(u64, u64), FileKind> = HashMap::new();
    let hand_on = |w: Walked| match w {
        Walked::Directory => tally.directory(),
        Walked::Problem(d) => tally.diagnostic(d),
        Walked::Entry(mut r, linked) => {
            if linked && let Some(id) = r.identity {
                match r.hard_link_of {
                    Some(_) => r.kind = classes.get(&id).copied().unwrap_or(FileKind::Opaque),
                    None if r.kind != FileKind::Opaque => {
                        classes.insert(id, r.kind);
                    }
                    None => {}
                }
            }
            tally.add(&r);
            each(r);
        }
    };
    crate::parallel::map_ordered(opts.threads, walk, IN_FLIGHT, inspect, hand_on)?;
    Ok(tally.finish(root.display().to_string(), Vec::new()))
}

/// The walk's side of a streamed scan: later names of hard-linked files marked as
/// such before they are inspected, and the count for `Discovered`.
struct Listing<'a> {
    walk: SortedWalk,
    root: &'a Path,
    sink: &'a dyn EventSink<ScanEvent>,
    /// The first name of each file with more than one (identities only of those).
    first_names: FirstNames,
    files: u64,
    bytes: u64,
    said: bool,
}

impl Iterator for Listing<'_> {
    type Item = Walked;

    fn next(&mut self) -> Option<Self::Item> {
        match self.walk.next() {
            Some(item) => Some(self.take(walked(self.root, item))),
            None => {
                if !std::mem::replace(&mut self.said, true) {
                    self.sink.event(ScanEvent::Discovered {
                        files: self.files,
                        bytes: self.bytes,
                    });
                }
                None
            }
        }
    }
}

impl Listing<'_> {
    fn take(&mut self, mut w: Walked) -> Walked {
        if let Walked::Entry(r, linked) = &mut w {
            let id = r.identity.filter(|_| *linked);
            let root = self.root;
            let earlier = || linked_before(root, &r.path);
            match id.and_then(|id| self.first_names.first_or_insert(id, &r.path, earlier)) {
                Some(first) => r.hard_link_of = Some(first),
                None if is_listed_file(r) => {
                    self.files += 1;
                    self.bytes += r.size;
                }
                None => {}
            }
        }
        w
    }
}

/// The identities and names of the files with more than one name before `name` in
/// path order, walked again.
fn linked_before(root: &Path, name: &str) -> Vec<((u64, u64), String)> {
    let mut found = Vec::new();
    for item in SortedWalk::new(root) {
        if let Walked::Entry(r, linked) = walked(root, item) {
            if r.path.as_str() >= name {
                break;
            }
            if linked && let Some(id) = r.identity {
                found.push((id, r.path));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    /// A tree whose names sort differently by name and by path text, with every kind
    /// of entry, the fixtures' binaries and hard links across directories.
    fn tricky_tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/bin");
        for dir in ["a", "a/b", "a-c", "a.b", "z"] {
            std::fs::create_dir_all(p.join(dir)).unwrap();
        }
        for (i, f) in std::fs::read_dir(&fixtures).unwrap().enumerate() {
            let f = f.unwrap().path();
            let dir = ["a", "a/b", "a-c", "a.b", "z", ""][i % 6];
            std::fs::copy(&f, p.join(dir).join(f.file_name().unwrap())).unwrap();
        }
        for name in ["a0", "a-", "a/x", "a-c/x", "a.b.h", "a.b/x"] {
            std::fs::write(p.join(name), name).unwrap();
        }
        std::fs::write(p.join(std::ffi::OsStr::from_bytes(b"a\xffb")), "x").unwrap();
        std::fs::write(p.join(std::ffi::OsStr::from_bytes(b"a\\x41")), "x").unwrap();
        std::os::unix::fs::symlink("a/x", p.join("a/link")).unwrap();
        // The first name in path order is in `a-c`, not in `z` where it was made.
        std::fs::copy(fixtures.join("libvadd.so"), p.join("z/lib.so")).unwrap();
        std::fs::hard_link(p.join("z/lib.so"), p.join("a-c/lib.so")).unwrap();
        std::fs::hard_link(p.join("z/lib.so"), p.join("a/b/lib.so")).unwrap();
        // Met after the first second name.
        std::fs::copy(fixtures.join("libkernels.so"), p.join("z/m1.so")).unwrap();
        std::fs::hard_link(p.join("z/m1.so"), p.join("z/m2.so")).unwrap();
        let _ = std::process::Command::new("mkfifo")
            .arg(p.join("a/fifo"))
            .status();
        d
    }

    #[test]
    fn a_streamed_scan_equals_the_full_scan_for_any_thread_count() {
        let d = tricky_tree();
        for threads in [1, 2, 0] {
            let opts = ScanOptions {
                threads,
                ..Default::default()
            };
            let full = scan(d.path(), &opts, &crate::event::NoEvents).unwrap();
            let mut files = Vec::new();
            let mut streamed = scan_each(d.path(), &opts, &crate::event::NoEvents, &mut |r| {
                files.push(r)
            })
            .unwrap();
            assert!(streamed.files.is_empty());
            streamed.files = files;
            let json = |r: &TreeReport| serde_json::to_string_pretty(r).unwrap();
            assert_eq!(json(&streamed), json(&full), "{threads} threads");
            let links: Vec<_> = (streamed.files.iter())
                .filter_map(|f| Some((f.path.as_str(), f.hard_link_of.as_deref()?, f.kind)))
                .collect();
            assert_eq!(
                links,
                [
                    ("a/b/lib.so", "a-c/lib.so", FileKind::FatBinary),
                    ("z/lib.so", "a-c/lib.so", FileKind::FatBinary),
                    ("z/m2.so", "z/m1.so", FileKind::FatBinary)
                ]
            );
        }
    }

    #[test]
    fn a_streamed_scan_of_one_file_hands_it_on() {
        let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/bin/libvadd.so");
        let mut seen = Vec::new();
        let r = scan_each(
            &f,
            &ScanOptions::default(),
            &crate::event::NoEvents,
            &mut |r| seen.push((r.path, r.kind)),
        )
        .unwrap();
        assert_eq!(seen, [("libvadd.so".to_string(), FileKind::FatBinary)]);
        assert_eq!(r.totals.entries, 1);
    }

    #[test]
    fn discovered_comes_once_with_the_files_to_inspect() {
        let d = tricky_tree();
        let said = std::sync::Mutex::new(Vec::new());
        let sink = |e: ScanEvent| {
            if let ScanEvent::Discovered { files, .. } = e {
                said.lock().unwrap().push(files)
            }
        };
        let full = scan(d.path(), &ScanOptions::default(), &sink).unwrap();
        scan_each(d.path(), &ScanOptions::default(), &sink, &mut |_| {}).unwrap();
        let said = said.into_inner().unwrap();
        assert_eq!(said.len(), 2);
        assert_eq!(said[0], said[1]);
        assert!(full.files.len() as u64 > said[1]);
    }
}
