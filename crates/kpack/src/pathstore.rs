//! The relative paths of a whole tree held compactly for a run over it: each file's
//! name once in one buffer, each directory once per run of files in it, and a
//! 16-byte [`PathRef`] per file (40,000 paths allocated one by one took 1.5 MB of an
//! 8 GiB tree's pack, with an allocation's overhead each; #32). [`SpilledPaths`]
//! keeps the names on disk, only the directories in memory.

use crate::spill::{Spill, SpillWriter};

/// Where a path is in a [`PathStore`] or [`SpilledPaths`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathRef {
    /// Where the name starts in the store's names.
    at: u64,
    len: u32,
    /// Its directory in the store's, or [`TOP`].
    dir: u32,
}

impl PathRef {
    /// The reference in 16 bytes (little-endian), to keep it on disk.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.at.to_le_bytes());
        b[8..12].copy_from_slice(&self.len.to_le_bytes());
        b[12..].copy_from_slice(&self.dir.to_le_bytes());
        b
    }

    /// Back from [`PathRef::to_bytes`].
    pub fn from_bytes(b: [u8; 16]) -> PathRef {
        let [
            a0,
            a1,
            a2,
            a3,
            a4,
            a5,
            a6,
            a7,
            l0,
            l1,
            l2,
            l3,
            d0,
            d1,
            d2,
            d3,
        ] = b;
        PathRef {
            at: u64::from_le_bytes([a0, a1, a2, a3, a4, a5, a6, a7]),
            len: u32::from_le_bytes([l0, l1, l2, l3]),
            dir: u32::from_le_bytes([d0, d1, d2, d3]),
        }
    }
}

/// The `dir` of a path without a `/`.
const TOP: u32 = u32::MAX;

/// The directories of paths added one after the other: each once per run of its
/// files.
#[derive(Debug, Default)]
struct Dirs(Vec<Box<str>>);

impl Dirs {
    /// `path`'s directory (added unless it is the last one's) and its name.
    fn split<'p>(&mut self, path: &'p str) -> (u32, &'p str) {
        match path.rsplit_once('/') {
            Some((dir, name)) => {
                if self.0.last().is_none_or(|d| **d != *dir) {
                    self.0.push(dir.into());
                }
                ((self.0.len() - 1) as u32, name)
            }
            None => (TOP, path),
        }
    }

    fn join(&self, dir: u32, name: &str) -> String {
        match self.0.get(dir as usize) {
            None => name.to_string(),
            Some(dir) => format!("{dir}/{name}"),
        }
    }
}

/// Paths, `/`-separated, added in any order (files of one directory added one after
/// the other share it).
#[derive(Debug, Default)]
pub struct PathStore {
    dirs: Dirs,
    /// Every name, one after the other.
    names: String,
}

impl PathStore {
    /// Keep `path`.
    pub fn push(&mut self, path: &str) -> PathRef {
        let (dir, name) = self.dirs.split(path);
        let r = PathRef {
            at: self.names.len() as u64,
            len: name.len() as u32,
            dir,
        };
        self.names.push_str(name);
        r
    }

    /// Give back what was reserved beyond what is held (once every path is in).
    pub fn shrink_to_fit(&mut self) {
        self.names.shrink_to_fit();
        self.dirs.0.shrink_to_fit();
    }

    /// The path `r` refers to (a `PathRef` of this store).
    pub fn get(&self, r: PathRef) -> String {
        let name = self
            .names
            .get(r.at as usize..r.at as usize + r.len as usize)
            .unwrap_or_default();
        self.dirs.join(r.dir, name)
    }
}

/// A [`PathStore`] whose names are on disk (a [`Spill`]): only the directories are
/// held, so a tree of any number of files costs the same memory.
pub struct SpilledPaths {
    dirs: Dirs,
    /// Names being added, until [`SpilledPaths::seal`].
    writing: Option<SpillWriter>,
    /// Then read from here.
    names: Option<Spill>,
}

impl SpilledPaths {
    /// Names spilled to an unnamed file in `dir`.
    pub fn new_in(dir: &std::path::Path) -> std::io::Result<SpilledPaths> {
        Ok(SpilledPaths {
            dirs: Dirs::default(),
            writing: Some(SpillWriter::new_in(dir)?),
            names: None,
        })
    }

    /// Keep `path` (before [`SpilledPaths::seal`]).
    pub fn push(&mut self, path: &str) -> std::io::Result<PathRef> {
        let (dir, name) = self.dirs.split(path);
        let Some(w) = &mut self.writing else {
            return Err(std::io::Error::other("path added to a sealed store"));
        };
        let at = w.append(name.as_bytes())?;
        Ok(PathRef {
            at,
            len: name.len() as u32,
            dir,
        })
    }

    /// Every path is in: from now on they are read.
    pub fn seal(&mut self) -> std::io::Result<()> {
        self.dirs.0.shrink_to_fit();
        if let Some(w) = self.writing.take() {
            self.names = Some(w.finish()?);
        }
        Ok(())
    }

    /// The path `r` refers to (a `PathRef` of this store, once sealed).
    pub fn get(&self, r: PathRef) -> std::io::Result<String> {
        let Some(s) = &self.names else {
            return Err(std::io::Error::other(
                "path read before the store is sealed",
            ));
        };
        let name = String::from_utf8(s.read_vec(r.at, r.len as usize)?)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        Ok(self.dirs.join(r.dir, &name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_comes_back_as_it_went_in() {
        let paths = [
            "top",
            "a/b/c.so",
            "a/b/d.so",
            "a/x",
            "a/b/e",
            "",
            "é/ü/名前",
            "a//b",
            "/abs",
        ];
        let mut s = PathStore::default();
        let refs: Vec<PathRef> = paths.iter().map(|p| s.push(p)).collect();
        s.shrink_to_fit();
        for (p, r) in paths.iter().zip(&refs) {
            assert_eq!(s.get(*r), *p);
        }
        // `a/b` is named twice (a file of `a` came between).
        let dirs: Vec<&str> = s.dirs.0.iter().map(|d| &**d).collect();
        assert_eq!(dirs, ["a/b", "a", "a/b", "é/ü", "a/", ""]);
        assert_eq!(std::mem::size_of::<PathRef>(), 16);

        // The same paths with their names on disk: the same paths back, nothing
        // in the directory, no read before the seal and no push after it.
        let dir = tempfile::tempdir().unwrap();
        let mut d = SpilledPaths::new_in(dir.path()).unwrap();
        let refs: Vec<PathRef> = paths.iter().map(|p| d.push(p).unwrap()).collect();
        assert!(d.get(refs[0]).is_err());
        d.seal().unwrap();
        assert!(d.push("late").is_err());
        for (p, r) in paths.iter().zip(&refs) {
            assert_eq!(d.get(PathRef::from_bytes(r.to_bytes())).unwrap(), *p);
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
