//! What a wheel split checks before and after its workers run, and how its output
//! is placed: the wheel and the options ([`check_wheel`], [`Selection::of`]), the
//! output directory and names ([`output_dir`], [`refuse_present`]), that something
//! was split ([`require_split`]), the archives and wheels written read back
//! ([`finish_archives`], [`check_written`]), then placed in one switch
//! ([`place_wheels`], [`placed_sizes`]).

use super::WheelOut;
use super::WheelSplitOptions;
use crate::error::{Error, Result};
use crate::event::EventSink;
use crate::kpack::archive::{Archive, ArchiveWriter};
use crate::pack::PackEvent;
use crate::wheel::Wheel;
use crate::wheel::bootstrap;
use crate::zip;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::Path;
use std::path::PathBuf;

/// `input: what`, a wheel that holds nothing to split.
fn nothing(input: &Path, what: String) -> Error {
    Error::NothingToDo(format!("{}: {what}", input.display()))
}

/// What pip would install must be what was built: a RECORD that does not match is
/// not laundered into a fresh one (unless `--ignore-record`, with a warning).
/// `known`: the digests of the members the split read (by name), so that no member
/// is inflated twice; the others are hashed here. Nothing is placed before this
/// check: the split's outputs are still in their stage.
pub(super) fn check_wheel(
    input: &Path,
    wheel: &Wheel,
    known: &dyn Fn(usize) -> Option<[u8; 32]>,
    opts: &WheelSplitOptions,
    sink: &dyn EventSink<PackEvent>,
) -> Result<()> {
    let record_faults = super::assemble::check_record_with(wheel, known);
    if record_faults.is_empty() {
        return Ok(());
    }
    let what = format!(
        "its RECORD does not match its contents ({} problem(s)): {}",
        record_faults.len(),
        record_faults
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ")
    );
    if !opts.ignore_record {
        return Err(Error::Damaged {
            path: input.to_path_buf(),
            what: format!("{what}; pass --ignore-record to split it anyway"),
        });
    }
    sink.event(PackEvent::Warning(format!(
        "{}: {what} (split anyway: --ignore-record)",
        input.display()
    )));
    Ok(())
}

/// What the options select: the overlay root (checked to be in the wheel), the
/// targets and the rocm-bootstrap bundle keys kept.
pub(super) struct Selection {
    pub overlay: String,
    pub wanted: Option<BTreeSet<String>>,
    pub families: Option<BTreeSet<String>>,
}

impl Selection {
    /// Check the options against the wheel.
    pub fn of(input: &Path, wheel: &Wheel, opts: &WheelSplitOptions) -> Result<Self> {
        let prefix = opts.device_package_prefix.as_str();
        if !valid_dist_name(prefix) {
            return Err(Error::Usage(format!(
                "--device-package-prefix {prefix:?} is not a distribution name (lowercase \
                 letters, digits, '.', '_', '-')"
            )));
        }
        let overlay = opts.overlay_root.trim_matches('/').to_string();
        if overlay.is_empty() || zip::read::check_name(&overlay).is_err() {
            return Err(Error::Usage(format!(
                "--overlay-root {:?} is not a directory path inside a wheel",
                opts.overlay_root
            )));
        }
        let under = format!("{overlay}/");
        if !wheel
            .index
            .members
            .iter()
            .any(|m| m.name.starts_with(&under))
        {
            return Err(Error::Usage(format!(
                "{}: overlay root '{overlay}' does not exist in wheel",
                input.display()
            )));
        }
        if let Some(ts) = &opts.targets {
            crate::pack::units::check_targets(ts)?;
        }
        let wanted = opts.targets.as_ref().map(|ts| ts.iter().cloned().collect());
        let families = match &opts.families {
            None => None,
            Some(fs) => Some(bundle_keys(fs)?),
        };
        Ok(Selection {
            overlay,
            wanted,
            families,
        })
    }
}

/// The rocm-bootstrap bundle keys `--family` names.
fn bundle_keys(fs: &[String]) -> Result<BTreeSet<String>> {
    let mut set = BTreeSet::new();
    for f in fs {
        let b = bootstrap::bundle(f).ok_or_else(|| {
            Error::Usage(format!(
                "--family {f:?} is not a rocm-bootstrap bundle key (gfx9, gfx9_4, gfx11, \
                 gfx110x, gfx942…)"
            ))
        })?;
        set.insert(b.key.clone());
    }
    Ok(set)
}

/// PEP 508 distribution-name characters (rocm-bootstrap's check).
fn valid_dist_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"._-".contains(c))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// Create the output directory: never the input's own (the host wheel keeps its
/// name). Returns the input's file name.
pub(super) fn output_dir(input: &Path, out: &Path) -> Result<String> {
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let input_name = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| Error::Usage(format!("{}: no file name", input.display())))?;
    if let (Ok(a), Ok(b)) = (
        std::fs::canonicalize(out.join(&input_name)),
        std::fs::canonicalize(input),
    ) && a == b
    {
        return Err(Error::Usage(format!(
            "{}: the output directory holds the input wheel, and the host wheel keeps its \
             name; choose another -o",
            input.display()
        )));
    }
    Ok(input_name)
}

/// A split that rewrote no binary, or archived nothing because every code object
/// was left out, is refused (with where the fat binaries are, when the overlay root
/// missed them: auditwheel puts libraries under `<name>.libs/`).
pub(super) fn require_split(
    input: &Path,
    rewritten: u64,
    archives: usize,
    skipped_kernels: u64,
    elsewhere: impl FnOnce() -> Vec<String>,
    overlay: &str,
) -> Result<()> {
    if rewritten == 0 {
        let elsewhere = elsewhere();
        let hint = match elsewhere.split_first() {
            None => String::new(),
            Some((first, rest)) => format!(
                "; the wheel's fat binaries are elsewhere: {first}{} (--overlay-root \
                 names the directory that receives .kpack/; only binaries under it are split)",
                if rest.is_empty() {
                    String::new()
                } else {
                    format!(" and {} more", rest.len())
                }
            ),
        };
        return Err(nothing(
            input,
            format!("no fat binaries under '{overlay}' (nothing to split){hint}"),
        ));
    }
    if archives == 0 && skipped_kernels > 0 {
        return Err(nothing(
            input,
            format!(
                "none of the {skipped_kernels} code objects is of a target kept by \
                 --target/--family (every one would be left out); nothing written"
            ),
        ));
    }
    Ok(())
}

/// Every wheel written, read back with its RECORD checked, before it is placed.
/// The wheels are read back in parallel (on `threads`, as the split ran); the first
/// failing one in `names` order is reported.
pub(super) fn check_written(stage: &Path, names: &[String], threads: usize) -> Result<()> {
    use rayon::prelude::*;
    let one = |n: &String| -> Result<()> {
        let w = Wheel::open(&stage.join(n)).map_err(|e| Error::NotAsWritten {
            path: n.into(),
            what: format!("the wheel just written does not read back: {e}"),
        })?;
        match super::check_record(&w).into_iter().next() {
            Some(f) => Err(Error::NotAsWritten {
                path: n.into(),
                what: format!("the wheel just written is inconsistent: {f}"),
            }),
            None => Ok(()),
        }
    };
    let all = || names.par_iter().map(one).collect::<Vec<_>>();
    crate::parallel::on_threads(threads, all)?
        .into_iter()
        .collect()
}

/// The host wheel's entry, and every wheel's size as placed in `out`.
pub(super) fn placed_sizes(
    out: &Path,
    input_name: &str,
    dist: &str,
    members: u64,
    devices: &mut [WheelOut],
) -> WheelOut {
    let size = |f: &str| std::fs::metadata(out.join(f)).map_or(0, |m| m.len());
    for d in devices.iter_mut() {
        d.bytes = size(&d.file);
    }
    WheelOut {
        file: input_name.to_string(),
        dist: dist.to_string(),
        bundle_key: None,
        level: None,
        members,
        bytes: size(input_name),
        archives: Vec::new(),
        database_files: 0,
    }
}

/// Output names already present are refused (unless `--force`), before anything
/// is written.
pub(super) fn refuse_present(out: &Path, names: &[String], force: bool) -> Result<()> {
    for n in names {
        if !force && std::fs::symlink_metadata(out.join(n)).is_ok() {
            return Err(Error::OutputTaken {
                path: out.to_path_buf(),
                what: format!("already holds {n} (--force replaces it)"),
            });
        }
    }
    Ok(())
}

/// The host wheel and its device wheels appear together, in one switch: never a
/// new host wheel beside old device wheels. Returns the bytes placed.
pub(super) fn place_wheels(
    stage: &Path,
    out: &Path,
    names: &[String],
    force: bool,
    warnings: &mut Vec<String>,
) -> Result<u64> {
    let bytes_out = names
        .iter()
        .map(|n| std::fs::metadata(stage.join(n)).map_or(0, |m| m.len()))
        .sum();
    let change = crate::place::Change {
        staged: names,
        gone: &[],
        guarded: names,
        replace: force,
    };
    if let crate::place::Placed::OneByOne(why) =
        crate::place::place_set(stage, out, &change, "wheel")?
    {
        warnings.push(format!(
            "{}: wheels placed one by one, not in one switch ({why})",
            out.display()
        ));
    }
    Ok(bytes_out)
}

/// Every archive finished and read back: by target, its path and summary.
pub(super) fn finish_archives(
    writers: BTreeMap<String, std::sync::Arc<ArchiveWriter>>,
) -> Result<BTreeMap<String, (PathBuf, crate::kpack::archive::ArchiveSummary)>> {
    let mut archives = BTreeMap::new();
    for (t, w) in writers {
        let w = std::sync::Arc::try_unwrap(w)
            .map_err(|_| Error::Internal("archive writer still in use".into()))?;
        let s = w.finish()?;
        let faults = Archive::open(&s.path)?.verify();
        if !faults.is_empty() {
            return Err(Error::NotAsWritten {
                path: s.path.clone(),
                what: format!(
                    "the archive just written does not read back: {}",
                    faults.join("; ")
                ),
            });
        }
        archives.insert(t, (s.path.clone(), s));
    }
    Ok(archives)
}
