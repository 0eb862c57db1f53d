//! ROCm build artifacts (TheRock): an artifact directory is an
//! `artifact_manifest.txt` listing stage prefixes, and one directory per prefix.
//! [`split`](mod@split) is the map step (one build machine: generic + per-target artifacts),
//! [`combine`](mod@combine) the reduce step (the shards of several machines into one set).

pub mod combine;
mod combine_plan;
pub mod ledger;
pub mod manifest;
pub mod split;
mod split_jobs;
mod split_spill;

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
        return Err(Error::OutputTaken {
            path: out.to_path_buf(),
            what: format!(
                "already holds {} (pass --force to replace them)",
                existing.join(", ")
            ),
        });
    }
    Ok(())
}

/// Move the staged artifacts `names` (and the staged `records`, always replaced)
/// from `stage` into `out` in one switch ([`crate::place`]), refusing artifacts that
/// appeared meanwhile unless `force`; `gone` are entries the new set drops. Returns
/// a warning when the switch could not be made in one step.
pub(crate) fn place(
    stage: &Path,
    out: &Path,
    (names, records, gone): (&[String], &[String], &[String]),
    kind: &str,
    force: bool,
) -> Result<Option<String>> {
    let staged: Vec<String> = names.iter().chain(records).cloned().collect();
    let change = crate::place::Change {
        staged: &staged,
        gone,
        guarded: names,
        replace: force,
    };
    Ok(match crate::place::place_set(stage, out, &change, kind)? {
        crate::place::Placed::Atomic => None,
        crate::place::Placed::OneByOne(why) => Some(format!(
            "{}: outputs placed one by one, not in one switch ({why})",
            out.display()
        )),
    })
}
