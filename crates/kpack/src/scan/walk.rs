//! A directory walk in path order for the streamed scan ([`SortedWalk`]): each
//! directory being walked is held as its entries' names in one buffer, 16 bytes of
//! index and the name's own bytes per entry. (walkdir's sorted walk held a full path
//! and a `DirEntry` for each, about 230 bytes: 590 KiB for the two large directories
//! of the 8 GiB bench tree, on each side of a diff, more than anything else the
//! scan held.)

use std::borrow::Cow;
use std::cmp::Ordering;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What the walk finds.
pub(super) enum Item {
    /// An entry: its path, and what `lstat` says of it.
    Entry(PathBuf, std::io::Result<std::fs::Metadata>),
    /// A directory that could not be listed (its path), or an entry of one that could
    /// not be read.
    Unreadable(Option<PathBuf>, std::io::Error),
}

impl From<walkdir::Result<walkdir::DirEntry>> for Item {
    /// An item of a walkdir walk that does not follow symlinks.
    fn from(item: walkdir::Result<walkdir::DirEntry>) -> Item {
        let io = |e: walkdir::Error| std::io::Error::other(e.to_string());
        match item {
            Ok(e) => {
                let meta = e.metadata().map_err(io);
                Item::Entry(e.into_path(), meta)
            }
            Err(e) => {
                let (path, text) = (e.path().map(Path::to_path_buf), e.to_string());
                let e = e
                    .into_io_error()
                    .unwrap_or_else(|| std::io::Error::other(text));
                Item::Unreadable(path, e)
            }
        }
    }
}

/// The entries under a root, depth first, without following symlinks, each
/// directory's entries in [`path_order`]: a directory comes before its entries,
/// which are listed (and a listing error given) when the walk goes on past it, as
/// walkdir's sorted walk does. The root itself is not an entry.
pub(super) struct SortedWalk {
    /// The directories being walked, outermost first.
    levels: Vec<Level>,
    /// The directory to list before going on.
    open: Option<PathBuf>,
}

/// One directory being walked.
struct Level {
    dir: PathBuf,
    /// Every entry's name, one after the other.
    names: Vec<u8>,
    /// Sorted; the walk is at `next`.
    entries: Vec<Name>,
    next: usize,
    /// Entries that could not be read, given first.
    errors: Vec<(Option<PathBuf>, std::io::Error)>,
}

/// An entry of a [`Level`]: its name at `names[start..start + len]`.
#[derive(Clone, Copy)]
struct Name {
    start: usize,
    len: u32,
    dir: bool,
}

impl SortedWalk {
    pub(super) fn new(root: &Path) -> SortedWalk {
        SortedWalk {
            levels: Vec::new(),
            open: Some(root.to_path_buf()),
        }
    }
}

impl Iterator for SortedWalk {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        loop {
            if let Some(dir) = self.open.take() {
                match Level::read(dir) {
                    Ok(level) => self.levels.push(level),
                    Err((dir, e)) => return Some(Item::Unreadable(Some(dir), e)),
                }
            }
            let level = self.levels.last_mut()?;
            if let Some((path, e)) = level.errors.pop() {
                return Some(Item::Unreadable(path, e));
            }
            let Some(&n) = level.entries.get(level.next) else {
                self.levels.pop();
                continue;
            };
            level.next += 1;
            let path = level.dir.join(OsStr::from_bytes(level.name(n)));
            // As walkdir says it, so that a report reads the same either way.
            let meta = std::fs::symlink_metadata(&path).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("IO error for operation on {}: {e}", path.display()),
                )
            });
            if n.dir {
                self.open = Some(path.clone());
            }
            return Some(Item::Entry(path, meta));
        }
    }
}

impl Level {
    /// List directory `dir`, sorted.
    fn read(dir: PathBuf) -> Result<Level, (PathBuf, std::io::Error)> {
        let list = match std::fs::read_dir(&dir) {
            Ok(list) => list,
            Err(e) => return Err((dir, e)),
        };
        let mut level = Level {
            dir,
            names: Vec::new(),
            entries: Vec::new(),
            next: 0,
            errors: Vec::new(),
        };
        for e in list {
            let e = match e {
                Ok(e) => e,
                Err(e) => {
                    level.errors.push((None, e));
                    continue;
                }
            };
            let dir = match e.file_type() {
                Ok(t) => t.is_dir(),
                Err(err) => {
                    level.errors.push((Some(e.path()), err));
                    continue;
                }
            };
            let name = e.file_name();
            let bytes = name.as_bytes();
            let Ok(len) = u32::try_from(bytes.len()) else {
                continue;
            };
            level.entries.push(Name {
                start: level.names.len(),
                len,
                dir,
            });
            level.names.extend_from_slice(bytes);
        }
        let names = &level.names;
        let key = |n: &Name| (text(&names[n.start..][..n.len as usize]), n.dir);
        level.entries.sort_by(|a, b| path_order(key(a), key(b)));
        level.names.shrink_to_fit();
        level.entries.shrink_to_fit();
        // Given from the end: in the order they were met, as walkdir gives them.
        level.errors.reverse();
        Ok(level)
    }

    fn name(&self, n: Name) -> &[u8] {
        &self.names[n.start..][..n.len as usize]
    }
}

/// The order of a directory's entries that makes the walk's order that of their
/// paths' text (as a full scan sorts them): a directory's entries follow it as
/// `name/...`, so it sorts as its name with a `/` after it (`a-b` comes before
/// `a/x`). Each side is a name's text ([`text`]) and whether it is a directory's.
pub(super) fn path_order(
    (a, a_dir): (Cow<'_, [u8]>, bool),
    (b, b_dir): (Cow<'_, [u8]>, bool),
) -> Ordering {
    let slash = |dir: bool| dir.then_some(b'/');
    (a.iter().copied().chain(slash(a_dir))).cmp(b.iter().copied().chain(slash(b_dir)))
}

/// A name's text ([`crate::relpath`]): borrowed when UTF-8 (a sort compares each
/// name many times).
pub(super) fn text(raw: &[u8]) -> Cow<'_, [u8]> {
    match std::str::from_utf8(raw) {
        Ok(_) => Cow::Borrowed(raw),
        Err(_) => crate::relpath::encode_bytes(raw)
            .map_or_else(|_| raw.to_vec(), String::into_bytes)
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a walk yields, as text: each entry's path under `root` (`!` when lstat
    /// failed), each error's path.
    fn listed(items: impl Iterator<Item = Item>, root: &Path) -> Vec<String> {
        let rel = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
        items
            .map(|i| match i {
                Item::Entry(p, m) => format!("{}{}", rel(&p), if m.is_ok() { "" } else { "!" }),
                Item::Unreadable(p, _) => {
                    format!("error {}", p.as_deref().map(rel).unwrap_or_default())
                }
            })
            .collect()
    }

    #[test]
    fn the_walk_is_walkdirs_sorted_walk() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        for dir in ["a", "a/x", "a-b", "b/c/d", "empty"] {
            std::fs::create_dir_all(r.join(dir)).unwrap();
        }
        for f in ["a/1", "a/x/2", "a-b/3", "a.c", "b/c/d/4", "z", "Z", "a0"] {
            std::fs::write(r.join(f), f).unwrap();
        }
        std::fs::write(r.join(OsStr::from_bytes(b"n\xffm")), "x").unwrap();
        std::os::unix::fs::symlink("a", r.join("link-to-a")).unwrap();
        std::os::unix::fs::symlink("gone", r.join("dangling")).unwrap();
        let ours = listed(SortedWalk::new(r), r);
        fn key(e: &walkdir::DirEntry) -> (Cow<'_, [u8]>, bool) {
            (
                text(e.file_name().as_encoded_bytes()),
                e.file_type().is_dir(),
            )
        }
        let theirs = walkdir::WalkDir::new(r)
            .follow_links(false)
            .sort_by(|a, b| path_order(key(a), key(b)))
            .min_depth(1)
            .into_iter()
            .map(Item::from);
        assert_eq!(ours, listed(theirs, r));
        // A directory sorts as its name and a slash: `a-b` and `a.c` before `a/`.
        let at = |p: &str| ours.iter().position(|x| x == p).unwrap();
        assert!(at("a-b") < at("a") && at("a.c") < at("a") && at("a/x/2") < at("a0"));
        assert!(
            !ours.iter().any(|p| p.starts_with("link-to-a/")),
            "{ours:?}"
        );
    }

    #[test]
    fn an_unreadable_root_is_one_error() {
        let d = tempfile::tempdir().unwrap();
        let gone = d.path().join("gone");
        let items: Vec<Item> = SortedWalk::new(&gone).collect();
        assert!(
            matches!(&items[..], [Item::Unreadable(Some(p), e)] if *p == gone && e.kind() == std::io::ErrorKind::NotFound)
        );
    }
}
