//! Atomic output files: written to a temporary sibling, then renamed into place, so
//! a reader never sees a half-written file and a failure leaves nothing behind.
//! (No fsync: the rename is atomic against a crashed or killed process; durability
//! against power loss is the packaging system's business, as for `cp` or `cargo`.)

use crate::error::{Error, Result};
use std::fs::Permissions;
use std::io::Write;
use std::path::Path;

/// Write `bytes` to `path` atomically, with `mode` (default 0644).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: Option<Permissions>) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".kpack-tmp-")
        .tempfile_in(dir)
        .map_err(|e| Error::io(dir, e))?;
    tmp.write_all(bytes).map_err(|e| Error::io(path, e))?;
    let mode = mode.unwrap_or_else(|| std::os::unix::fs::PermissionsExt::from_mode(0o644));
    tmp.as_file()
        .set_permissions(mode)
        .map_err(|e| Error::io(path, e))?;
    tmp.persist(path).map_err(|e| Error::io(path, e.error))?;
    Ok(())
}

/// Create a new file at `path` (inside a staging directory that is renamed as a
/// whole later) with `bytes`, the permissions and the modification time of `like`.
pub fn write_new(path: &Path, bytes: &[u8], like: &std::fs::Metadata) -> Result<()> {
    let mut f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    f.write_all(bytes).map_err(|e| Error::io(path, e))?;
    f.set_permissions(like.permissions())
        .map_err(|e| Error::io(path, e))?;
    if let Ok(m) = like.modified() {
        let _ = f.set_times(std::fs::FileTimes::new().set_modified(m));
    }
    Ok(())
}
