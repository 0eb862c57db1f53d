//! Comparing two builds: device bytes per target, files (added, removed, grown,
//! shrunk; versioned shared libraries matched across versions), kernels (by binary,
//! target and name) and classes, each side a tree, a binary or an archive. Device
//! code is read through the kernels reader, so a fat tree compares with its packed
//! form (archive entries count for the binary their key names).
//!
//! `side.rs` reads one side (scan, code-object inventory), `gate.rs` holds the CI
//! gates ([`gate()`], [`shrink_gate`], [`removals`]).

mod compare;
mod gate;
mod side;

pub use gate::{Budget, Limit, Removal, gate, removals, shrink_gate};
use side::read_sides;

use crate::error::Result;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What to compare.
#[derive(Debug, Clone, Default)]
pub struct DiffOptions {
    /// Only these targets (exact IDs, or processors with every variant).
    pub targets: Vec<String>,
    /// Worker threads (0 = all cores).
    pub threads: usize,
    /// Compare kernels too (reads the code objects of the binaries that differ).
    pub kernels: bool,
}

/// Device bytes of one target on both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TargetDelta {
    /// Target ID.
    pub target: String,
    /// Raw device code (code-object bytes) before.
    #[serde(rename = "old_raw")]
    pub old_bytes: u64,
    /// After.
    #[serde(rename = "new_raw")]
    pub new_bytes: u64,
    /// Bytes on disk before (compressed shares, archive frames).
    pub old_stored: u64,
    /// After.
    pub new_stored: u64,
    /// Code objects before / after.
    pub old_code_objects: u64,
    /// After.
    pub new_code_objects: u64,
}

/// What happened to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Only in NEW.
    Added,
    /// Only in OLD.
    Removed,
    /// Bigger in NEW (file or device bytes).
    Grown,
    /// Smaller in NEW.
    Shrunk,
    /// Same sizes (content may differ).
    Same,
}

/// One file on both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FileDelta {
    /// Path in NEW (in OLD for a removed file).
    pub path: String,
    /// Path in OLD when it differs (a versioned library renamed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    /// What happened.
    pub change: Change,
    /// File bytes before / after.
    pub old_size: u64,
    /// After.
    pub new_size: u64,
    /// Device code-object bytes before (the file's bundles, or its archives' entries).
    pub old_device_raw: u64,
    /// After.
    pub new_device_raw: u64,
    /// Device bytes per target on either side, in target order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<FileTargetDelta>,
}

/// One target of one file on both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FileTargetDelta {
    // Held once for all the files (`intern::interned`).
    /// Target ID.
    pub target: std::sync::Arc<str>,
    /// Raw device code (code-object bytes) before.
    #[serde(rename = "old_raw")]
    pub old_bytes: u64,
    /// After.
    #[serde(rename = "new_raw")]
    pub new_bytes: u64,
}

/// One kernel on both sides (code sizes summed over the binary's bundles).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KernelDelta {
    /// The binary (NEW's path).
    pub binary: String,
    /// Target ID.
    pub target: String,
    /// Mangled name.
    pub name: String,
    /// Demangled name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub demangled: Option<String>,
    /// Code bytes before (`None`: added).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_size: Option<u64>,
    /// After (`None`: removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_size: Option<u64>,
}

impl KernelDelta {
    /// New minus old code bytes.
    pub fn delta(&self) -> i64 {
        self.new_size.unwrap_or(0) as i64 - self.old_size.unwrap_or(0) as i64
    }
}

/// A file class on both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ClassDelta {
    /// `fat_binary`, `host_only_binary`, `kernel_database`, …
    pub class: String,
    /// Files before / after.
    pub old_count: u64,
    /// After.
    pub new_count: u64,
    /// Bytes before / after.
    pub old_bytes: u64,
    /// After.
    pub new_bytes: u64,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DiffReport {
    /// OLD.
    pub old: PathBuf,
    /// NEW.
    pub new: PathBuf,
    /// Device code bytes before / after (all targets, or the selected ones).
    pub old_device_raw: u64,
    /// After.
    pub new_device_raw: u64,
    /// Per target, in target order.
    pub targets: Vec<TargetDelta>,
    /// Files that changed (and renamed versioned libraries), largest change first.
    pub files: Vec<FileDelta>,
    /// Kernels added, removed or resized, largest change first.
    pub kernels: Vec<KernelDelta>,
    /// Per class.
    pub classes: Vec<ClassDelta>,
    /// What could not be read.
    pub diagnostics: Vec<String>,
}

/// The name a versioned shared library is matched by: `lib/libfoo.so.6.1` →
/// `lib/libfoo.so`.
pub fn library_key(path: &str) -> &str {
    match path.find(".so.") {
        Some(i)
            if path[i + 4..]
                .split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) =>
        {
            &path[..i + 3]
        }
        _ => path,
    }
}

/// The name a file is matched by when its path changed between builds: a versioned
/// shared library by its unversioned name ([`library_key`]), a wheel's
/// `NAME-VERSION.dist-info/…` and `NAME-VERSION.data/…` members without the version.
pub fn rename_key(path: &str) -> String {
    let path = library_key(path);
    if let Some((dir, rest)) = path.split_once('/')
        && let Some((stem, ext)) = dir.rsplit_once('.')
        && matches!(ext, "dist-info" | "data")
        && let Some((name, _version)) = stem.split_once('-')
    {
        return format!("{name}.{ext}/{rest}");
    }
    path.to_string()
}

/// Compare two builds.
pub fn diff(old: &Path, new: &Path, opts: &DiffOptions) -> Result<DiffReport> {
    let (mut a, mut b) = read_sides(old, new, opts)?;
    // A single binary on each side compares as one file whatever their names.
    let names = compare::Names {
        single: a.root_is_file && b.root_is_file,
    };
    let targets = compare::target_deltas(&a, &b);
    let files = compare::file_deltas(&a, &b, names);
    // Kernels: (binary, target, name), binaries matched as files were (renames).
    let rename: BTreeMap<String, String> = files
        .iter()
        .filter_map(|f| f.old_path.clone().map(|o| (o, f.path.clone())))
        .collect();
    compare::read_kernels(&mut a, &mut b, &rename, names, opts)?;
    let kernels = compare::kernel_deltas(&a, &b, &rename, names);
    let classes = compare::class_deltas(&a, &b);
    let mut diagnostics = a.diagnostics.clone();
    diagnostics.extend(b.diagnostics.iter().cloned());
    diagnostics.extend(a.kernels.diagnostics.iter().cloned());
    diagnostics.extend(b.kernels.diagnostics.iter().cloned());
    Ok(DiffReport {
        old: old.to_path_buf(),
        new: new.to_path_buf(),
        old_device_raw: targets.iter().map(|t| t.old_bytes).sum(),
        new_device_raw: targets.iter().map(|t| t.new_bytes).sum(),
        targets,
        files,
        kernels,
        classes,
        diagnostics,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioned_libraries_share_a_key() {
        assert_eq!(library_key("lib/libfoo.so.6.1"), "lib/libfoo.so");
        assert_eq!(library_key("lib/libfoo.so.6"), "lib/libfoo.so");
        assert_eq!(library_key("lib/libfoo.so"), "lib/libfoo.so");
        assert_eq!(library_key("lib/libfoo.so.bak"), "lib/libfoo.so.bak");
        assert_eq!(library_key("lib/libfoo.so.6.x"), "lib/libfoo.so.6.x");
    }

    #[test]
    fn wheel_metadata_directories_match_across_versions() {
        assert_eq!(
            rename_key("torch-2.10.0.dist-info/RECORD"),
            "torch.dist-info/RECORD"
        );
        assert_eq!(
            rename_key("torch-2.10.0+rocm7.1.data/purelib/x.py"),
            "torch.data/purelib/x.py"
        );
        assert_eq!(rename_key("torch/lib/libc10.so.2.1"), "torch/lib/libc10.so");
        // Only the top directory, and only these two suffixes.
        assert_eq!(rename_key("share/a-1.dist-info/x"), "share/a-1.dist-info/x");
        assert_eq!(rename_key("foo-1.0.d/x"), "foo-1.0.d/x");
        assert_eq!(rename_key("README"), "README");
    }
}
