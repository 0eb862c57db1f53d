//! The relative paths of a whole tree held compactly for a run over it: each file's
//! name once in one buffer, each directory once per run of files in it, and a
//! 16-byte [`PathRef`] per file (40,000 paths allocated one by one took 1.5 MB of an
//! 8 GiB tree's pack, with an allocation's overhead each; #32).

/// Where a path is in a [`PathStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathRef {
    /// Where the name starts in the store's names.
    at: u64,
    len: u32,
    /// Its directory in the store's, or [`TOP`].
    dir: u32,
}

/// The `dir` of a path without a `/`.
const TOP: u32 = u32::MAX;

/// Paths, `/`-separated, added in any order (files of one directory added one after
/// the other share it).
#[derive(Debug, Default)]
pub struct PathStore {
    /// Directories (what comes before a path's last `/`).
    dirs: Vec<Box<str>>,
    /// Every name, one after the other.
    names: String,
}

impl PathStore {
    /// Keep `path`.
    pub fn push(&mut self, path: &str) -> PathRef {
        let (dir, name) = match path.rsplit_once('/') {
            Some((dir, name)) => {
                if self.dirs.last().is_none_or(|d| **d != *dir) {
                    self.dirs.push(dir.into());
                }
                ((self.dirs.len() - 1) as u32, name)
            }
            None => (TOP, path),
        };
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
        self.dirs.shrink_to_fit();
    }

    /// The path `r` refers to (a `PathRef` of this store).
    pub fn get(&self, r: PathRef) -> String {
        let name = self
            .names
            .get(r.at as usize..r.at as usize + r.len as usize)
            .unwrap_or_default();
        match self.dirs.get(r.dir as usize) {
            None => name.to_string(),
            Some(dir) => format!("{dir}/{name}"),
        }
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
        let dirs: Vec<&str> = s.dirs.iter().map(|d| &**d).collect();
        assert_eq!(dirs, ["a/b", "a", "a/b", "é/ü", "a/", ""]);
        assert_eq!(std::mem::size_of::<PathRef>(), 16);
    }
}
