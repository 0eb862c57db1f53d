//! What the run stage keeps of the scan: per file its path (in a
//! [`PathStore`]), size, identity, kind and place, and nothing else. The scan's reports
//! (a record of 80 bytes, a path allocated on its own, the details of every binary
//! and database) are dropped before the first file is packed: 40,000 of them took
//! 5.7 MB of the heap at the peak of an 8 GiB tree's pack, 0.7 MB of a 1 GiB one
//! (#32).

use super::super::PackPlan;
use super::super::plan::{Place, place_of};
use crate::kpack::ledger::LEDGER_PATH;
use crate::pathstore::{PathRef, PathStore};
use crate::scan::{FileKind, TreeReport};
use std::collections::BTreeMap;

/// The files of a pack's input, in the scan's order (their paths' order).
pub(super) struct WorkList {
    paths: PathStore,
    files: Vec<WorkFile>,
    /// Files passed over with a warning (special files; in the split layout,
    /// databases of a target no unit takes), by index.
    skipped: BTreeMap<usize, String>,
    /// Later names of a hard-linked inode (by index) and the first name, linked to
    /// its copy once every file is done.
    links: Vec<(usize, String)>,
    /// Files by what becomes of them (see [`WorkList::of`]).
    pub classes: BTreeMap<String, u64>,
}

/// 48 bytes a file.
struct WorkFile {
    size: u64,
    /// The (device, inode) the scan read, if it read one.
    identity: [u64; 2],
    path: PathRef,
    place: u32,
    kind: FileKind,
    /// Bit 0: `identity` is known; bit 1: a later name of a hard-linked inode.
    flags: u8,
}

const KNOWN: u8 = 1;
const LINKED: u8 = 2;

/// [`Place`] in four bytes (the record has room for them): 0 generic, 1
/// unselected, 2 + n unit n (a plan has a unit per family or target, a few dozen).
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
}

impl WorkList {
    /// What the run stage needs of `report`, the scan of `plan`'s input, and the
    /// count of files by what becomes of them (packed binaries, archives packed
    /// again, else their kind; the ledger not counted).
    pub fn of(report: TreeReport, plan: &PackPlan, layout_split: bool) -> WorkList {
        let mut list = WorkList {
            paths: PathStore::default(),
            files: Vec::with_capacity(report.files.len()),
            skipped: BTreeMap::new(),
            links: Vec::new(),
            classes: BTreeMap::new(),
        };
        for f in report.files {
            let i = list.files.len();
            let place = place_of(&f, &plan.unit_of);
            if f.path != LEDGER_PATH {
                let class = if plan.binaries_planned.contains_key(&f.path) {
                    "packed_binary"
                } else if f.kind == FileKind::Kpack && plan.consumed_archives.contains(&f.path) {
                    "repacked_archive"
                } else {
                    f.kind.name()
                };
                *list.classes.entry(class.to_string()).or_default() += 1;
            }
            if f.kind == FileKind::Other {
                let what = f.file_type.unwrap_or("unknown");
                let why = format!("{}: special file ({what}) skipped", f.path);
                list.skipped.insert(i, why);
            } else if layout_split && place == Place::Unselected {
                let arch = f.arch.as_deref().unwrap_or_default();
                let why = format!(
                    "{}: kernel database for {arch} left out (no selected family)",
                    f.path
                );
                list.skipped.insert(i, why);
            }
            if let Some(first) = &f.hard_link_of {
                list.links.push((i, first.clone()));
            }
            let flags = u8::from(f.identity.is_some()) * KNOWN
                + u8::from(f.hard_link_of.is_some()) * LINKED;
            let (dev, ino) = f.identity.unwrap_or_default();
            list.files.push(WorkFile {
                size: f.size,
                identity: [dev, ino],
                path: list.paths.push(&f.path),
                place: place_code(place),
                kind: f.kind,
                flags,
            });
        }
        list.paths.shrink_to_fit();
        list
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// The `i`th file.
    pub fn get(&self, i: usize) -> Work {
        let f = &self.files[i];
        Work {
            path: self.paths.get(f.path),
            kind: f.kind,
            linked: f.flags & LINKED != 0,
            size: f.size,
            identity: (f.flags & KNOWN != 0).then_some((f.identity[0], f.identity[1])),
            place: place_of_code(f.place),
        }
    }

    /// The bytes of the files read (neither symlinks nor later names of a
    /// hard-linked inode), without building their paths.
    pub fn bytes_read(&self) -> u64 {
        (self.files.iter())
            .filter(|f| f.flags & LINKED == 0 && f.kind != FileKind::Symlink)
            .map(|f| f.size)
            .sum()
    }

    /// Why the `i`th file is passed over, if it is.
    pub fn skipped(&self, i: usize) -> Option<&str> {
        self.skipped.get(&i).map(String::as_str)
    }

    /// Later names of hard-linked inodes and their first names.
    pub fn links(&self) -> impl Iterator<Item = (Work, &str)> {
        self.links
            .iter()
            .map(|(i, first)| (self.get(*i), first.as_str()))
    }

    /// The files to process, largest first (then in path order, the list's): the
    /// long ones start early and the cores stay busy to the end.
    pub fn largest_first(&self) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.files.len() as u32).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(self.files[i as usize].size), i));
        order
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
        assert_eq!(std::mem::size_of::<WorkFile>(), 48);
    }
}
