//! What the run stage keeps of the scan: per file its path, size, identity, kind
//! and place, and nothing else, on disk ([`crate::spill`]), in the order the files
//! are packed. The scan's reports (a record of 80 bytes, a path allocated on its
//! own, the details of every binary and database) are dropped before the first file
//! is packed: 40,000 of them took 5.7 MB of the heap at the peak of an 8 GiB tree's
//! pack, 0.7 MB of a 1 GiB one; the same list in memory took 2.6 MB (#32).

use super::super::PackPlan;
use super::super::plan::{Place, place_of};
use crate::kpack::ledger::LEDGER_PATH;
use crate::pathstore::{PathRef, SpilledPaths};
use crate::scan::{FileKind, TreeReport};
use crate::spill::{Spill, SpillWriter};
use std::collections::BTreeMap;
use std::path::Path;

/// The files of a pack's input, largest first (then in the scan's order, their
/// paths'): the long ones start early and the cores stay busy to the end.
pub(super) struct WorkList {
    paths: SpilledPaths,
    /// A [`RECORD`]-byte record per file, in that order.
    records: Spill,
    len: usize,
    /// The bytes of the files read (neither symlinks nor later names of a
    /// hard-linked inode).
    bytes_read: u64,
    /// Files passed over with a warning (special files; in the split layout,
    /// databases of a target no unit takes), by their index in the scan.
    skipped: BTreeMap<u32, String>,
    /// Later names of a hard-linked inode and the first name, linked to its copy
    /// once every file is done.
    links: Vec<(Work, String)>,
    /// Files by what becomes of them (see [`WorkList::of`]).
    pub classes: BTreeMap<String, u64>,
}

/// What a file's record holds, as built (the scan's order) before it is written.
struct WorkFile {
    size: u64,
    /// The (device, inode) the scan read, if it read one.
    identity: [u64; 2],
    path: PathRef,
    place: u32,
    /// Its index in the scan.
    index: u32,
    kind: FileKind,
    /// Bit 0: `identity` is known; bit 1: a later name of a hard-linked inode.
    flags: u8,
}

const KNOWN: u8 = 1;
const LINKED: u8 = 2;

/// Bytes of a file's record on disk (see [`WorkFile::to_bytes`]).
const RECORD: usize = 56;

impl WorkFile {
    /// Little-endian: size, device, inode, path reference (16), place, index, kind,
    /// flags, 6 bytes of padding.
    fn to_bytes(&self) -> [u8; RECORD] {
        let mut b = [0u8; RECORD];
        b[0..8].copy_from_slice(&self.size.to_le_bytes());
        b[8..16].copy_from_slice(&self.identity[0].to_le_bytes());
        b[16..24].copy_from_slice(&self.identity[1].to_le_bytes());
        b[24..40].copy_from_slice(&self.path.to_bytes());
        b[40..44].copy_from_slice(&self.place.to_le_bytes());
        b[44..48].copy_from_slice(&self.index.to_le_bytes());
        b[48] = kind_code(self.kind);
        b[49] = self.flags;
        b
    }

    fn from_bytes(b: &[u8; RECORD]) -> WorkFile {
        let u64_at = |i: usize| {
            let mut n = [0u8; 8];
            n.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(n)
        };
        let u32_at = |i: usize| {
            let mut n = [0u8; 4];
            n.copy_from_slice(&b[i..i + 4]);
            u32::from_le_bytes(n)
        };
        let mut path = [0u8; 16];
        path.copy_from_slice(&b[24..40]);
        WorkFile {
            size: u64_at(0),
            identity: [u64_at(8), u64_at(16)],
            path: PathRef::from_bytes(path),
            place: u32_at(40),
            index: u32_at(44),
            kind: kind_of_code(b[48]),
            flags: b[49],
        }
    }

    fn work(&self, path: String) -> Work {
        Work {
            path,
            kind: self.kind,
            linked: self.flags & LINKED != 0,
            size: self.size,
            identity: (self.flags & KNOWN != 0).then_some((self.identity[0], self.identity[1])),
            place: place_of_code(self.place),
            index: self.index,
        }
    }
}

/// A kind as its place in [`FileKind::ALL`].
fn kind_code(k: FileKind) -> u8 {
    FileKind::ALL.iter().position(|&x| x == k).unwrap_or(0) as u8
}

fn kind_of_code(c: u8) -> FileKind {
    FileKind::ALL
        .get(c as usize)
        .copied()
        .unwrap_or(FileKind::Other)
}

/// [`Place`] in four bytes: 0 generic, 1 unselected, 2 + n unit n (a plan has a
/// unit per family or target, a few dozen).
fn place_code(p: Place) -> u32 {
    match p {
        Place::Generic => 0,
        Place::Unselected => 1,
        Place::Unit(n) => u32::try_from(n).map_or(u32::MAX, |n| n.saturating_add(2)),
    }
}

fn place_of_code(c: u32) -> Place {
    match c {
        0 => Place::Generic,
        1 => Place::Unselected,
        n => Place::Unit((n - 2) as usize),
    }
}

/// One file of a [`WorkList`].
pub(super) struct Work {
    /// Relative, `/`-separated.
    pub path: String,
    pub kind: FileKind,
    /// A later name of a hard-linked inode (done by [`WorkList::links`]).
    pub linked: bool,
    pub size: u64,
    /// The (device, inode) the scan read.
    pub identity: Option<(u64, u64)>,
    pub place: Place,
    /// Its index in the scan.
    index: u32,
}

impl WorkList {
    /// What the run stage needs of `report`, the scan of `plan`'s input, kept in
    /// unnamed files in `dir`, and the count of files by what becomes of them
    /// (packed binaries, archives packed again, else their kind; the ledger not
    /// counted).
    pub fn of(
        report: TreeReport,
        plan: &PackPlan,
        layout_split: bool,
        dir: &Path,
    ) -> std::io::Result<WorkList> {
        let mut paths = SpilledPaths::new_in(dir)?;
        let mut files = Vec::with_capacity(report.files.len());
        let mut skipped = BTreeMap::new();
        let mut links = Vec::new();
        let mut classes = BTreeMap::new();
        for (i, f) in report.files.into_iter().enumerate() {
            let index = u32::try_from(i)
                .map_err(|_| std::io::Error::other("more than 4 billion files in one tree"))?;
            let place = place_of(&f, &plan.unit_of);
            if f.path != LEDGER_PATH {
                let class = if plan.binaries_planned.contains_key(&f.path) {
                    "packed_binary"
                } else if f.kind == FileKind::Kpack && plan.consumed_archives.contains(&f.path) {
                    "repacked_archive"
                } else {
                    f.kind.name()
                };
                *classes.entry(class.to_string()).or_default() += 1;
            }
            if f.kind == FileKind::Other {
                let what = f.file_type.unwrap_or("unknown");
                let why = format!("{}: special file ({what}) skipped", f.path);
                skipped.insert(index, why);
            } else if layout_split && place == Place::Unselected {
                let arch = f.arch.as_deref().unwrap_or_default();
                let why = format!(
                    "{}: kernel database for {arch} left out (no selected family)",
                    f.path
                );
                skipped.insert(index, why);
            }
            let flags = u8::from(f.identity.is_some()) * KNOWN
                + u8::from(f.hard_link_of.is_some()) * LINKED;
            let (dev, ino) = f.identity.unwrap_or_default();
            let file = WorkFile {
                size: f.size,
                identity: [dev, ino],
                path: paths.push(&f.path)?,
                place: place_code(place),
                index,
                kind: f.kind,
                flags,
            };
            if let Some(first) = &f.hard_link_of {
                links.push((file.work(f.path.clone()), first.clone()));
            }
            files.push(file);
        }
        paths.seal()?;
        let bytes_read = (files.iter())
            .filter(|f| f.flags & LINKED == 0 && f.kind != FileKind::Symlink)
            .map(|f| f.size)
            .sum();
        files.sort_by_key(|f| (std::cmp::Reverse(f.size), f.index));
        let mut records = SpillWriter::new_in(dir)?;
        for f in &files {
            records.append(&f.to_bytes())?;
        }
        Ok(WorkList {
            paths,
            records: records.finish()?,
            len: files.len(),
            bytes_read,
            skipped,
            links,
            classes,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The `k`th file to pack (largest first).
    pub fn get(&self, k: usize) -> std::io::Result<Work> {
        let mut b = [0u8; RECORD];
        self.records.read_at((k * RECORD) as u64, &mut b)?;
        let f = WorkFile::from_bytes(&b);
        Ok(f.work(self.paths.get(f.path)?))
    }

    /// The bytes of the files read (neither symlinks nor later names of a
    /// hard-linked inode).
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Why `f` is passed over, if it is.
    pub fn skipped(&self, f: &Work) -> Option<&str> {
        self.skipped.get(&f.index).map(String::as_str)
    }

    /// Later names of hard-linked inodes and their first names.
    pub fn links(&self) -> impl Iterator<Item = (&Work, &str)> {
        self.links.iter().map(|(w, first)| (w, first.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_is_its_code_and_back() {
        for p in [
            Place::Generic,
            Place::Unselected,
            Place::Unit(0),
            Place::Unit(70_000),
        ] {
            assert_eq!(place_of_code(place_code(p)), p);
        }
    }

    /// A record on disk is the file it was made from, for every kind and both
    /// flags.
    #[test]
    fn a_record_is_its_file_and_back() {
        for (n, &kind) in FileKind::ALL.iter().enumerate() {
            let f = WorkFile {
                size: u64::MAX - n as u64,
                identity: [n as u64 + 1, u64::MAX / 3],
                path: PathRef::from_bytes([n as u8; 16]),
                place: place_code(Place::Unit(n)),
                index: u32::MAX - n as u32,
                kind,
                flags: (n % 4) as u8,
            };
            let back = WorkFile::from_bytes(&f.to_bytes());
            assert_eq!(back.to_bytes(), f.to_bytes());
            assert_eq!(back.kind, kind);
            let w = back.work("p".into());
            assert_eq!(w.place, Place::Unit(n));
            assert_eq!(w.linked, n % 4 >= 2);
            assert_eq!(w.identity.is_some(), n % 2 == 1);
        }
    }
}
