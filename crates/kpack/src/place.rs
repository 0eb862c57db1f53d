//! Placing a set of outputs into a directory others read (`split`'s artifacts,
//! `combine`'s, `wheel split`'s wheels in a `dist/`): whoever looks at the directory
//! sees the old set or the new one, never a mix, even if the process is killed at any
//! point.
//!
//! The new directory is assembled beside the output (`.kpack-tui-<kind>-<pid>-place`
//! in its parent): hard links to what the output holds now, less the entries being
//! replaced, plus the staged entries moved in. One `renameat2(RENAME_EXCHANGE)` then
//! switches it with the output, and the old directory, now at the assembled one's
//! name, is removed. A run killed before the switch left the output as it was, after
//! it the new set; either way the next run removes what is left ([`remove_stale`]).
//! Placements into one parent are serialised by a lock on that directory, so a second
//! run sees the first's outputs (and without `--force` refuses to replace them).
//!
//! Where the file system cannot exchange (or the parent is not writable) the entries
//! are renamed one by one, as before, and the caller is told.

use crate::error::{Error, Result};
use crate::fsutil::{remove_stale, stage_prefix};
use std::path::Path;

/// How a set was placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// In one switch.
    Atomic,
    /// Entry by entry (the file system or the parent did not allow one switch); the
    /// text says why.
    OneByOne(&'static str),
}

/// The points of a placement, for tests that stop it where a kill would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Lock held, names checked.
    Locked,
    /// The new directory is assembled beside the output.
    Assembled,
    /// The switch is done; the old set is at the assembled directory's name.
    Switched,
}

/// What a placement changes in the output.
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    /// Entries staged, placed under the same names (over namesakes).
    pub staged: &'a [String],
    /// Entries of the output the new set does not have.
    pub gone: &'a [String],
    /// Of `staged`, those that must not be there already, unless `replace`.
    pub guarded: &'a [String],
    /// Replace guarded entries.
    pub replace: bool,
}

/// Place the change staged in `stage` into `out` (which exists). `kind` names the
/// temporaries (`split`, `combine`, `wheel`).
pub fn place_set(stage: &Path, out: &Path, change: &Change<'_>, kind: &str) -> Result<Placed> {
    // The suite's kill points: `KPACK_TUI_TEST_ABORT_AT=locked|assembled|switched`
    // ends the process there as SIGKILL would (no destructor runs), so that tests can
    // show what a killed run leaves without racing a signal against the work.
    let abort_at = std::env::var("KPACK_TUI_TEST_ABORT_AT").ok();
    place_set_with(stage, out, change, kind, &mut |s| {
        if abort_at.as_deref() == Some(s.name()) {
            std::process::abort();
        }
        true
    })
}

impl Step {
    /// `locked`, `assembled`, `switched`.
    pub fn name(self) -> &'static str {
        match self {
            Step::Locked => "locked",
            Step::Assembled => "assembled",
            Step::Switched => "switched",
        }
    }
}

/// [`place_set`], calling `go` at each [`Step`]; `false` stops there as a kill would
/// (nothing is cleaned up).
pub fn place_set_with(
    stage: &Path,
    out: &Path,
    change: &Change<'_>,
    kind: &str,
    go: &mut dyn FnMut(Step) -> bool,
) -> Result<Placed> {
    let names = change.staged;
    let out_abs = std::path::absolute(out).map_err(|e| Error::io(out, e))?;
    let parent = out_abs.parent().unwrap_or(Path::new("/")).to_path_buf();
    let lock = lock_dir(&parent);
    for n in change.guarded {
        if !change.replace && std::fs::symlink_metadata(out.join(n)).is_ok() {
            return Err(Error::OutputTaken {
                path: out.to_path_buf(),
                what: format!(
                    "already holds {n} (another run placed it first?); pass --force to \
                     replace it"
                ),
            });
        }
    }
    if !go(Step::Locked) {
        return Ok(Placed::Atomic);
    }
    let Ok(_lock) = lock else {
        return one_by_one(stage, out, change, "the output's parent cannot be locked");
    };
    {
        use std::os::unix::fs::MetadataExt;
        let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
        if dev(out) != dev(&parent) {
            return one_by_one(stage, out, change, "the output is a mount point");
        }
    }
    let place_kind = format!("{kind}-place");
    remove_stale(&parent, &place_kind);
    let new = parent.join(format!(
        "{}{}",
        stage_prefix(&place_kind),
        out_abs
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    if let Err(e) = assemble(out, &new, change, stage) {
        let _ = unassemble(&new, stage, names);
        let _ = std::fs::remove_dir_all(&new);
        use std::io::ErrorKind as K;
        match e.kind() {
            K::PermissionDenied | K::ReadOnlyFilesystem => {
                return one_by_one(stage, out, change, "the output's parent is not writable");
            }
            K::CrossesDevices => {
                return one_by_one(stage, out, change, "the output is a mount point");
            }
            _ => {}
        }
        return Err(Error::io(&new, e));
    }
    if !go(Step::Assembled) {
        return Ok(Placed::Atomic);
    }
    match exchange(&new, out) {
        Ok(()) => {}
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EBUSY) | Some(libc::EXDEV)
            ) =>
        {
            // The staged entries are in `new` now: take them from there.
            let r = one_by_one(
                &new,
                out,
                change,
                "the file system cannot exchange directories",
            );
            let _ = std::fs::remove_dir_all(&new);
            return r;
        }
        Err(e) => {
            let _ = unassemble(&new, stage, names);
            let _ = std::fs::remove_dir_all(&new);
            return Err(Error::io(out, e));
        }
    }
    if !go(Step::Switched) {
        return Ok(Placed::Atomic);
    }
    // The old set; its files are still linked from the new one where kept.
    let _ = std::fs::remove_dir_all(&new);
    Ok(Placed::Atomic)
}

/// An exclusive lock on a directory, held while the value lives.
fn lock_dir(dir: &Path) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    let f = std::fs::File::open(dir)?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| std::io::Error::from(e))
}

/// Swap two directory entries in one step.
pub fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    renameat2(AT_FDCWD, a, AT_FDCWD, b, RenameFlags::RENAME_EXCHANGE).map_err(std::io::Error::from)
}

/// The new directory: what `out` keeps (hard links), then the staged entries.
fn assemble(out: &Path, new: &Path, change: &Change<'_>, stage: &Path) -> std::io::Result<()> {
    std::fs::create_dir(new)?;
    let m = std::fs::metadata(out)?;
    std::fs::set_permissions(new, m.permissions())?;
    {
        use std::os::unix::fs::MetadataExt;
        // Keep the owner where allowed (root running for a user); else it is ours.
        let _ = std::os::unix::fs::chown(new, Some(m.uid()), Some(m.gid()));
    }
    for e in std::fs::read_dir(out)? {
        let e = e?;
        let name = e.file_name();
        let s = name.to_string_lossy();
        // Replaced and removed entries, and temporaries (stages of this run and others).
        let replaced = change.staged.iter().chain(change.gone).any(|n| *n == s);
        if replaced || crate::fsutil::is_temporary(&s) {
            continue;
        }
        link_tree(&e.path(), &new.join(&name))?;
    }
    for n in change.staged {
        std::fs::rename(stage.join(n), new.join(n))?;
    }
    Ok(())
}

/// Put the staged entries back where they were (a switch that failed).
fn unassemble(new: &Path, stage: &Path, names: &[String]) -> std::io::Result<()> {
    for n in names {
        if new.join(n).exists() {
            std::fs::rename(new.join(n), stage.join(n))?;
        }
    }
    Ok(())
}

/// `dst` as a copy of `src` made of hard links (directories recreated with their
/// modes, symlinks recreated, files linked or copied where a link is refused).
fn link_tree(src: &Path, dst: &Path) -> std::io::Result<()> {
    let m = std::fs::symlink_metadata(src)?;
    let ft = m.file_type();
    if ft.is_dir() {
        std::fs::create_dir(dst)?;
        for e in std::fs::read_dir(src)? {
            let e = e?;
            link_tree(&e.path(), &dst.join(e.file_name()))?;
        }
        std::fs::set_permissions(dst, m.permissions())
    } else if ft.is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(src)?, dst)
    } else if ft.is_file() {
        std::fs::hard_link(src, dst).or_else(|_| std::fs::copy(src, dst).map(|_| ()))
    } else {
        Err(std::io::Error::other(format!(
            "{}: not a file, directory or symlink",
            src.display()
        )))
    }
}

/// The old way: each entry renamed over its namesake.
fn one_by_one(stage: &Path, out: &Path, change: &Change<'_>, why: &'static str) -> Result<Placed> {
    for n in change.staged.iter().chain(change.gone) {
        let dst = out.join(n);
        let staged = change.staged.contains(n);
        match std::fs::symlink_metadata(&dst) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&dst).map_err(|e| Error::io(&dst, e))?,
            Ok(_) if !staged => std::fs::remove_file(&dst).map_err(|e| Error::io(&dst, e))?,
            _ => {}
        }
        if staged {
            std::fs::rename(stage.join(n), &dst).map_err(|e| Error::io(&dst, e))?;
        }
    }
    Ok(Placed::OneByOne(why))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn set(dir: &Path) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = walkdir::WalkDir::new(dir)
            .min_depth(1)
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_file())
            .map(|e| {
                (
                    e.path().strip_prefix(dir).unwrap().display().to_string(),
                    std::fs::read_to_string(e.path()).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    }

    fn fixture(root: &Path) -> (PathBuf, PathBuf) {
        let out = root.join("dist");
        std::fs::create_dir_all(out.join("art_a")).unwrap();
        std::fs::write(out.join("art_a/x"), "old a").unwrap();
        std::fs::write(out.join("w.whl"), "old w").unwrap();
        std::fs::write(out.join("other.whl"), "someone else's").unwrap();
        let stage = out.join(".kpack-tui-test-1-stage");
        std::fs::create_dir_all(stage.join("art_a")).unwrap();
        std::fs::write(stage.join("art_a/x"), "new a").unwrap();
        std::fs::write(stage.join("w.whl"), "new w").unwrap();
        (out, stage)
    }

    fn names() -> Vec<String> {
        vec!["art_a".into(), "w.whl".into()]
    }

    fn change(n: &[String], replace: bool) -> Change<'_> {
        Change {
            staged: n,
            gone: &[],
            guarded: n,
            replace,
        }
    }

    #[test]
    fn the_output_holds_the_old_set_or_the_new_one_at_every_step() {
        let old = vec![
            ("art_a/x".to_string(), "old a".to_string()),
            ("other.whl".into(), "someone else's".into()),
            ("w.whl".into(), "old w".into()),
        ];
        let new = vec![
            ("art_a/x".to_string(), "new a".to_string()),
            ("other.whl".into(), "someone else's".into()),
            ("w.whl".into(), "new w".into()),
        ];
        let n = names();
        for stop in [Step::Locked, Step::Assembled, Step::Switched] {
            let tmp = tempfile::tempdir().unwrap();
            let (out, stage) = fixture(tmp.path());
            let visible = |out: &Path| -> Vec<(String, String)> {
                set(out)
                    .into_iter()
                    .filter(|(p, _)| !p.starts_with(".kpack-tui-"))
                    .collect()
            };
            place_set_with(&stage, &out, &change(&n, true), "test", &mut |s| s != stop).unwrap();
            let seen = visible(&out);
            let want = if stop == Step::Switched { &new } else { &old };
            assert_eq!(&seen, want, "stopped at {stop:?}");
        }
        // Uninterrupted: the new set, nothing left beside it.
        let tmp = tempfile::tempdir().unwrap();
        let (out, stage) = fixture(tmp.path());
        assert_eq!(
            place_set(&stage, &out, &change(&n, true), "test").unwrap(),
            Placed::Atomic
        );
        assert_eq!(
            set(&out)
                .into_iter()
                .filter(|(p, _)| !p.starts_with('.'))
                .collect::<Vec<_>>(),
            new
        );
        let beside: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(beside, ["dist"]);
    }

    #[test]
    fn without_replace_an_entry_already_there_is_refused_and_nothing_moves() {
        let tmp = tempfile::tempdir().unwrap();
        let (out, stage) = fixture(tmp.path());
        let n = names();
        let e = place_set(&stage, &out, &change(&n, false), "test").unwrap_err();
        assert!(e.to_string().contains("already holds art_a"), "{e}");
        assert_eq!(std::fs::read_to_string(out.join("w.whl")).unwrap(), "old w");
        assert!(stage.join("w.whl").exists());
    }
}
