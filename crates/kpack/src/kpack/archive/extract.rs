//! Writing kernels out under a directory (paths never leave it).

use super::*;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Check that an arch can be a file name.
pub fn safe_arch(arch: &str) -> std::result::Result<&str, UnsafePath> {
    if arch.is_empty() || arch == "." || arch == ".." || arch.contains(['/', '\\', '\0']) {
        return Err(UnsafePath::Arch(arch.to_string()));
    }
    Ok(arch)
}

/// Where [`Archive::extract_to`] writes a kernel under `root`:
/// `<key path>#<tu>/<arch>.hsaco`, or why the key or arch is unsafe.
pub fn extract_path(root: &Path, k: &KernelEntry) -> std::result::Result<PathBuf, UnsafeKey> {
    let unsafe_key = |why| UnsafeKey {
        key: k.key.to_string(),
        why,
    };
    let rel = safe_relative_path(&k.key).map_err(unsafe_key)?;
    let arch = safe_arch(&k.arch).map_err(unsafe_key)?;
    let tu = k.key.rsplit_once('#').map_or("0", |(_, n)| n);
    let mut dir = rel;
    // The name's own bytes (it may not be UTF-8), then `#<tu>`.
    let mut name = dir
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(format!("#{tu}"));
    dir.set_file_name(name);
    Ok(root.join(dir).join(format!("{arch}.hsaco")))
}

impl Archive {
    /// Extract the kernels `want` selects under `root` (see [`extract_path`]). Every
    /// destination is planned first: nothing is written if any key would leave
    /// `root`; a symlink inside `root` cannot lead a write elsewhere; each file is
    /// written atomically. Returns the number of kernels written.
    pub fn extract_to(&self, root: &Path, want: impl Fn(&KernelEntry) -> bool) -> Result<usize> {
        let mut plan = Vec::new();
        let mut refused = Vec::new();
        for k in self.index.kernels.iter().filter(|k| want(k)) {
            match extract_path(root, k) {
                Ok(p) => plan.push((p, k)),
                Err(e) => refused.push(format!("key {e}")),
            }
        }
        if !refused.is_empty() {
            return Err(Error::Refused {
                path: self.path.clone(),
                what: format!(
                    "refusing to extract, {} key(s) would write outside {}:\n  {}",
                    refused.len(),
                    root.display(),
                    refused.join("\n  ")
                ),
            });
        }
        // Every kernel is checked (decoded, its size and zstd checksum) before
        // anything is written: bad bytes are never extracted.
        let bad: Vec<String> = {
            use rayon::prelude::*;
            plan.par_iter()
                .filter_map(|(_, k)| match self.kernel(k) {
                    Ok(b) if b.len() as u64 == k.size => None,
                    Ok(b) => Some(format!(
                        "{} @ {}: decodes to {} bytes, the TOC says {}",
                        k.key,
                        k.arch,
                        b.len(),
                        k.size
                    )),
                    Err(e) => Some(e.to_string()),
                })
                .collect()
        };
        if !bad.is_empty() {
            return Err(Error::Findings(format!(
                "{}: refusing to extract, {} code object(s) fail their checks (nothing written):\n  {}",
                self.path.display(),
                bad.len(),
                bad.join("\n  ")
            )));
        }
        crate::fsutil::write_below(root, &self.path, &plan, |k| self.kernel(k))?;
        Ok(plan.len())
    }
}

/// Check that an archive key names a path that stays inside a directory: relative,
/// no `..`, no empty components, no NUL, no backslash. A key spelling a name that
/// is not UTF-8 ([`crate::relpath`]: `lib/libv\xff.so#0`) is checked, and
/// returned, as the bytes it stands for.
pub fn safe_relative_path(key: &str) -> std::result::Result<PathBuf, UnsafePath> {
    let path = key.rsplit_once('#').map_or(key, |(p, _)| p);
    if path.is_empty() {
        return Err(UnsafePath::Empty);
    }
    let bytes = crate::relpath::decode(path);
    if bytes.contains(&0) {
        return Err(UnsafePath::Nul);
    }
    if bytes.starts_with(b"/") {
        return Err(UnsafePath::Absolute);
    }
    if bytes.contains(&b'\\') {
        return Err(UnsafePath::Backslash);
    }
    for c in bytes.split(|&b| b == b'/') {
        match c {
            b"" | b"." => return Err(UnsafePath::EmptyComponent(path.to_string())),
            b".." => return Err(UnsafePath::Escapes(path.to_string())),
            _ => {}
        }
    }
    Ok(crate::relpath::to_path(path))
}
