//! What the UI remembers of a path between runs: the view, the Explorer's order,
//! filter, open folders and selection. Kept in `$XDG_STATE_HOME/kpack-tui/state.json`
//! (`~/.local/state/...`), or where `KPACK_TUI_STATE` says (`off` keeps nothing).
//! The families selection is not remembered: it is always preselected from the code
//! the tree holds, so a re-opened tree never packs with an old, narrower choice.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Paths remembered at most (the least recently used are forgotten).
const KEEP: usize = 100;
/// A state file larger than this is not read (it is ours: it never grows so).
const MAX_BYTES: u64 = 4 << 20;

/// One path's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Remembered {
    /// The view's title (`Explorer`, `Kernels`).
    pub view: String,
    /// The Explorer's order (`size`, `name`, `device share`) and its direction.
    pub sort: String,
    /// Reversed.
    pub reverse: bool,
    /// The Explorer's filter.
    pub filter: String,
    /// Open folders, as paths relative to the root.
    pub expanded: Vec<String>,
    /// The selected entry.
    pub selected: Option<String>,
    /// When it was saved (seconds since the epoch), for forgetting the oldest.
    #[serde(default)]
    pub used: u64,
}

/// Where the state is kept, or `None` when nothing is to be kept.
pub fn file() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KPACK_TUI_STATE") {
        return (!p.is_empty() && p != "off").then(|| PathBuf::from(p));
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(base.join("kpack-tui/state.json"))
}

fn key(root: &Path) -> String {
    std::fs::canonicalize(root)
        .unwrap_or_else(|_| root.to_path_buf())
        .display()
        .to_string()
}

fn read_all(file: &Path) -> BTreeMap<String, Remembered> {
    let fits = std::fs::metadata(file).is_ok_and(|m| m.len() <= MAX_BYTES);
    // A missing, unreadable or damaged file is a fresh start, never an error.
    fits.then(|| std::fs::read(file).ok())
        .flatten()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// What was remembered of `root`.
pub fn load(file: &Path, root: &Path) -> Option<Remembered> {
    read_all(file).remove(&key(root))
}

/// Remember `r` for `root` (staged beside the file, then renamed into place).
pub fn save(file: &Path, root: &Path, mut r: Remembered) -> Result<(), String> {
    let mut all = read_all(file);
    r.used = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    all.insert(key(root), r);
    while all.len() > KEEP {
        let oldest = all
            .iter()
            .min_by_key(|(_, v)| v.used)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            all.remove(&k);
        }
    }
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut staged =
        tempfile::NamedTempFile::new_in(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    serde_json::to_writer_pretty(&mut staged, &all).map_err(|e| e.to_string())?;
    staged
        .persist(file)
        .map_err(|e| format!("{}: {}", file.display(), e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_state_comes_back_and_the_oldest_are_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s/state.json");
        let r = Remembered {
            view: "Kernels".into(),
            sort: "name".into(),
            filter: "gfx".into(),
            ..Default::default()
        };
        save(&file, Path::new("/a/b"), r.clone()).unwrap();
        let got = load(&file, Path::new("/a/b")).unwrap();
        assert_eq!(got.filter, "gfx");
        assert_eq!(got.view, "Kernels");
        assert!(load(&file, Path::new("/a/c")).is_none());
        for i in 0..KEEP + 5 {
            save(&file, Path::new(&format!("/t/{i}")), r.clone()).unwrap();
        }
        assert_eq!(read_all(&file).len(), KEEP);
        // Damaged: a fresh start.
        std::fs::write(&file, b"{not json").unwrap();
        assert!(load(&file, Path::new("/a/b")).is_none());
        save(&file, Path::new("/a/b"), r).unwrap();
        assert!(load(&file, Path::new("/a/b")).is_some());
    }
}
