//! What `verify` looks at: the install a packed tree makes up, read where it lies.
//! One directory (a combined pack, an installed tree), a pack's split layout
//! (`generic/` and one overlay per unit, copied onto each other when installed), or
//! the artifacts of `split` and `combine` (each artifact's stage prefixes copied to
//! one root): in every case the overlays are read in place, later ones over earlier
//! ones, and every file is known by its path in the install.

use crate::error::Result;
use crate::kpack::ledger::{Ledger, Merged};
use crate::scan::{self, Diagnostic, FileKind, FileReport, ScanOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The files of an install, read from its overlays.
pub struct Installed {
    /// The directory given (messages name ledgers relative to it).
    root: PathBuf,
    /// Overlay directories, in install order.
    dirs: Vec<PathBuf>,
    /// Every archive and host-only binary by install path, with the overlay it comes
    /// from (its report's `path` is the install path).
    pub files: Vec<(usize, FileReport)>,
    /// Scan diagnostics, by install path.
    pub diagnostics: Vec<Diagnostic>,
    /// Read from the artifacts of split or combine.
    from_artifacts: bool,
    /// What the splits that wrote these artifacts left to other shards (the
    /// records beside the artifacts), by file name.
    pub left: Vec<(String, crate::artifacts::ledger::LeftToOthers)>,
}

impl Installed {
    /// Read the overlays `dirs` (install order) of the install given as `root`. Only
    /// the files `verify` reads are kept (archives and host-only binaries): each
    /// report is looked at as the scan streams it, so a tree of 40,000 headers holds
    /// the few thousand binaries and archives in it, not a report per file.
    pub fn scan(root: &Path, dirs: Vec<PathBuf>) -> Result<Installed> {
        let mut files: Vec<(usize, FileReport)> = Vec::new();
        let mut diagnostics = Vec::new();
        for (i, d) in dirs.iter().enumerate() {
            let later = &dirs[i + 1..];
            let mut keep = |f: FileReport| {
                // A file of a later overlay at the same path is the one installed.
                if verified(&f) && !shadowed(later, &f.path) {
                    files.push((i, f))
                }
            };
            let r = scan::scan_each(
                d,
                &ScanOptions::default(),
                &crate::event::NoEvents,
                &mut keep,
            )?;
            diagnostics.extend(r.diagnostics);
        }
        // By install path (each overlay's files come sorted; a path is kept from one
        // overlay only, the last that has it).
        files.sort_by(|a, b| a.1.path.cmp(&b.1.path).then(b.0.cmp(&a.0)));
        files.dedup_by(|earlier, kept| earlier.1.path == kept.1.path);
        files.shrink_to_fit();
        Ok(Installed {
            root: root.to_path_buf(),
            dirs,
            files,
            diagnostics,
            from_artifacts: false,
            left: Vec::new(),
        })
    }

    /// Where the file installed at `path` really is: in the last overlay that has a
    /// file (not a directory) there.
    pub fn locate(&self, path: &str) -> Option<PathBuf> {
        let rel = crate::relpath::to_path(path);
        (self.dirs.iter().rev())
            .map(|d| d.join(&rel))
            .find(|p| std::fs::symlink_metadata(p).is_ok_and(|m| !m.is_dir()))
    }

    /// The install a packed tree at `root` in `layout` makes up: a pack's split
    /// layout, the artifacts of split or combine (a directory of artifacts and no
    /// `.kpack/` of its own), or the directory itself.
    pub fn open(root: &Path, layout: super::Layout) -> Result<Installed> {
        match layout {
            super::Layout::Split => Installed::split_layout(root),
            super::Layout::Combined if !root.join(".kpack").exists() => {
                match Installed::artifacts(root)? {
                    Some(i) => Ok(i),
                    None => Installed::single(root),
                }
            }
            super::Layout::Combined => Installed::single(root),
        }
    }

    /// Whether the install is read from artifacts of split or combine.
    pub fn is_artifacts(&self) -> bool {
        self.from_artifacts
    }

    /// One directory.
    pub fn single(root: &Path) -> Result<Installed> {
        Installed::scan(root, vec![root.to_path_buf()])
    }

    /// A pack's split layout at `root`: `generic/`, then every other directory.
    pub fn split_layout(root: &Path) -> Result<Installed> {
        let mut dirs = vec![root.join("generic")];
        let mut others: Vec<PathBuf> = std::fs::read_dir(root)
            .map_err(|e| crate::Error::io(root, e))?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .filter(|p| p.file_name().is_some_and(|n| n != "generic"))
            .collect();
        others.sort();
        dirs.extend(others);
        Installed::scan(root, dirs)
    }

    /// The artifacts of `split` or `combine` under `root` (generic ones first), as
    /// flattening them would install them: `None` when `root` holds none.
    pub fn artifacts(root: &Path) -> Result<Option<Installed>> {
        let mut arts = artifact_dirs(root);
        if arts.is_empty() {
            return Ok(None);
        }
        arts.sort_by_key(|a| {
            let generic = a
                .file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("_generic"));
            (!generic, a.clone())
        });
        let mut dirs = Vec::new();
        for a in &arts {
            for p in crate::artifacts::manifest::read_manifest(a)? {
                let d = a.join(&p);
                // A prefix of the manifest that stays inside the artifact, as split
                // and combine check when they write it.
                if crate::fsutil::real_dirs_below(a, &d).is_ok() && d.is_dir() {
                    dirs.push(d);
                }
            }
        }
        let mut i = Installed::scan(root, dirs)?;
        i.from_artifacts = true;
        i.left = crate::artifacts::ledger::read_left(root);
        Ok(Some(i))
    }

    /// Where the file at install path `path` (from overlay `i`) really is.
    pub fn real(&self, i: usize, path: &str) -> PathBuf {
        self.dirs[i].join(crate::relpath::to_path(path))
    }

    /// Every ledger the overlays carry, merged; their paths relative to the root.
    pub fn ledgers(&self) -> Result<Option<Merged>> {
        // By install path: a later overlay's ledger replaces an earlier one's, as
        // copying them onto each other would.
        let mut found: BTreeMap<String, (String, Ledger)> = BTreeMap::new();
        for d in &self.dirs {
            for (p, l) in Ledger::read_found(d)? {
                let real = d.join(&p);
                let shown = real
                    .strip_prefix(&self.root)
                    .map_or(p.clone(), |r| r.to_string_lossy().into_owned());
                found.insert(p, (shown, l));
            }
        }
        let found: Vec<(String, Ledger)> = found.into_values().collect();
        Ok((!found.is_empty()).then(|| crate::kpack::ledger::merge(found)))
    }
}

/// What `verify` reads of an install: its archives and host-only binaries (the rest
/// it reaches by path: [`Installed::locate`]).
fn verified(f: &FileReport) -> bool {
    matches!(f.kind, FileKind::Kpack | FileKind::HostOnlyBinary)
}

/// Whether one of the `later` overlays has a file at install path `path` (copied
/// over the earlier one when installed).
fn shadowed(later: &[PathBuf], path: &str) -> bool {
    let rel = crate::relpath::to_path(path);
    (later.iter()).any(|d| std::fs::symlink_metadata(d.join(&rel)).is_ok_and(|m| !m.is_dir()))
}

/// The artifact directories (holding a manifest) right under `root`.
pub fn artifact_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| p.join(crate::artifacts::manifest::MANIFEST).is_file())
        .collect()
}
