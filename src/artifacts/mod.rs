//! ROCm build artifacts (TheRock): an artifact directory is an
//! `artifact_manifest.txt` listing stage prefixes, and one directory per prefix.
//! [`split`](mod@split) is the map step (one build machine: generic + per-target artifacts),
//! [`combine`](mod@combine) the reduce step (the shards of several machines into one set).

pub mod combine;
pub mod ledger;
pub mod manifest;
pub mod split;

pub use manifest::{MANIFEST, read_manifest};
pub use split::{SplitOptions, SplitReport, split};

use crate::error::{Error, Result};
use std::path::Path;

/// Refuse to write over artifacts `names` in `out` unless `force`.
pub(crate) fn check_free(out: &Path, names: &[String], force: bool) -> Result<()> {
    let existing: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| std::fs::symlink_metadata(out.join(n)).is_ok())
        .collect();
    if !existing.is_empty() && !force {
        return Err(Error::Invalid(format!(
            "{} already holds {} (pass --force to replace them)",
            out.display(),
            existing.join(", ")
        )));
    }
    Ok(())
}

/// Move the staged artifacts `names` from `stage` into `out`, replacing what is
/// there only now, after everything was written and checked.
pub(crate) fn place(stage: &Path, out: &Path, names: &[String]) -> Result<()> {
    for n in names {
        let dst = out.join(n);
        if let Ok(m) = std::fs::symlink_metadata(&dst) {
            let r = if m.is_dir() {
                std::fs::remove_dir_all(&dst)
            } else {
                std::fs::remove_file(&dst)
            };
            r.map_err(|e| Error::io(&dst, e))?;
        }
        std::fs::rename(stage.join(n), &dst).map_err(|e| Error::io(&dst, e))?;
    }
    Ok(())
}
