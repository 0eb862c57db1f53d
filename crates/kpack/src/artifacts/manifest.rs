//! `artifact_manifest.txt`: one stage prefix per line (workflows §1.1). Read with
//! each line trimmed and empty lines dropped; written as each prefix plus `\n`.
//!
//! Stricter than the reference, because the prefixes become paths we write to: a
//! prefix must be a relative `/`-separated path without `.`/`..` components, NUL or
//! backslashes, listed once, and the file is bounded in size.

use crate::error::{Error, ManifestError, Result};
use std::path::Path;

/// The file name inside an artifact directory.
pub const MANIFEST: &str = "artifact_manifest.txt";

/// Larger manifests are refused (real ones hold a few dozen prefixes).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// Read `dir/artifact_manifest.txt`.
pub fn read_manifest(dir: &Path) -> Result<Vec<String>> {
    let path = dir.join(MANIFEST);
    let bad = |path: &Path, error| Error::Manifest {
        path: path.to_path_buf(),
        error,
    };
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(bad(dir, ManifestError::Missing));
        }
        Err(e) => return Err(Error::io(&path, e)),
    };
    if !meta.is_file() {
        return Err(bad(&path, ManifestError::NotAFile));
    }
    if meta.len() > MAX_MANIFEST_BYTES {
        return Err(bad(
            &path,
            ManifestError::TooLarge {
                size: meta.len(),
                bound: MAX_MANIFEST_BYTES,
            },
        ));
    }
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    parse_manifest(&bytes).map_err(|e| bad(&path, e))
}

/// Parse manifest text.
pub fn parse_manifest(bytes: &[u8]) -> std::result::Result<Vec<String>, ManifestError> {
    let text = std::str::from_utf8(bytes).map_err(|e| ManifestError::NotUtf8(e.to_string()))?;
    let mut out: Vec<String> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let raw = line.trim();
        if raw.is_empty() {
            continue;
        }
        // The canonical form: no trailing '/' or blanks (so writing and reading it
        // again gives the same prefix).
        let mut p = raw;
        loop {
            let q = p.trim_end_matches('/').trim_end();
            if q == p {
                break;
            }
            p = q;
        }
        let shown = if p.is_empty() { raw } else { p };
        if raw.starts_with('/') {
            return Err(ManifestError::BadPrefix {
                line: n + 1,
                prefix: raw.to_string(),
                why: "is absolute",
            });
        }
        check_prefix(shown).map_err(|why| ManifestError::BadPrefix {
            line: n + 1,
            prefix: shown.to_string(),
            why,
        })?;
        let p = p.to_string();
        if out.contains(&p) {
            return Err(ManifestError::Twice {
                line: n + 1,
                prefix: p,
            });
        }
        out.push(p);
    }
    Ok(out)
}

fn check_prefix(p: &str) -> std::result::Result<(), &'static str> {
    if p.starts_with('/') {
        return Err("is absolute");
    }
    if p.contains(['\\', '\0']) {
        return Err("holds a backslash or NUL");
    }
    if p.trim_end_matches('/')
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err("has an empty, '.' or '..' component");
    }
    Ok(())
}

/// Manifest text for `prefixes`.
pub fn manifest_text(prefixes: &[String]) -> String {
    prefixes.iter().map(|p| format!("{p}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_like_the_reference_and_refuses_escapes() {
        let m = parse_manifest(b"  a/b/stage \n\n\nc/stage/\n").unwrap();
        assert_eq!(m, ["a/b/stage", "c/stage"]);
        assert_eq!(manifest_text(&m), "a/b/stage\nc/stage\n");
        assert!(parse_manifest(b"").unwrap().is_empty());
        // Trailing slashes and blanks go, whatever their order (fuzz regression).
        assert_eq!(parse_manifest(b"a/b{ /\n").unwrap(), ["a/b{"]);
        assert_eq!(parse_manifest(b"a/ / \n").unwrap(), ["a"]);
        for bad in [
            &b"/abs"[..],
            b"a/../b",
            b"./a",
            b"a//b",
            b"a\\b",
            b"a\0",
            b"a\na",
            b"\xff",
            b"/",
        ] {
            assert!(parse_manifest(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse_manifest(b"a\na/b\n../x\n"),
            Err(ManifestError::BadPrefix {
                line: 3,
                prefix: "../x".into(),
                why: "has an empty, '.' or '..' component"
            })
        );
        assert_eq!(
            parse_manifest(b"a\nb\na/\n"),
            Err(ManifestError::Twice {
                line: 3,
                prefix: "a".into()
            })
        );
        let d = tempfile::tempdir().unwrap();
        match read_manifest(d.path()) {
            Err(Error::Manifest { path, error }) => {
                assert_eq!((path.as_path(), error), (d.path(), ManifestError::Missing))
            }
            other => panic!("{other:?}"),
        }
    }
}

/// One artifact directory of a batch (`split --batch-artifact-parent-dir`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchArtifact {
    /// The artifact directory.
    pub dir: std::path::PathBuf,
    /// The artifact prefix its name gives (`blas_lib_gfx110X-dgpu` → `blas_lib`).
    pub prefix: String,
}

/// The artifact directories under `parent` as the reference's batch mode takes them
/// (workflows §1.2): every immediate subdirectory in name order that holds a
/// manifest and whose name, split on `_`, has at least two parts, the last not
/// `generic`; the prefix is every part but the last. The others are returned as
/// skipped, with why. No subdirectory at all is an error.
pub fn batch_artifacts(parent: &Path) -> Result<(Vec<BatchArtifact>, Vec<String>)> {
    let entries = std::fs::read_dir(parent).map_err(|e| Error::io(parent, e))?;
    let mut dirs = Vec::new();
    for e in entries {
        let e = e.map_err(|e| Error::io(parent, e))?;
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            dirs.push(e.path());
        }
    }
    if dirs.is_empty() {
        return Err(Error::NothingToDo(format!(
            "{}: no artifact directories in it",
            parent.display()
        )));
    }
    dirs.sort();
    let (mut found, mut skipped) = (Vec::new(), Vec::new());
    for dir in dirs {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        let parts: Vec<&str> = name.split('_').collect();
        if !dir.join(MANIFEST).is_file() {
            skipped.push(format!("{name}: no {MANIFEST}"));
        } else if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
            skipped.push(format!("{name}: not named <prefix>_<target or family>"));
        } else if parts.last() == Some(&"generic") {
            skipped.push(format!("{name}: a generic artifact (split already)"));
        } else {
            let prefix = parts[..parts.len() - 1].join("_");
            found.push(BatchArtifact { dir, prefix });
        }
    }
    Ok((found, skipped))
}

#[cfg(test)]
mod batch_tests {
    use super::*;

    #[test]
    fn batch_artifacts_take_the_prefix_from_the_name_and_skip_the_rest() {
        let t = tempfile::tempdir().unwrap();
        for (d, manifest) in [
            ("blas_lib_gfx110X-dgpu", true),
            ("rand_lib_generic", true),
            ("nomanifest_gfx942", false),
            ("single", true),
            ("core-runtime_run_gfx94X-dcgpu", true),
        ] {
            std::fs::create_dir(t.path().join(d)).unwrap();
            if manifest {
                std::fs::write(t.path().join(d).join(MANIFEST), "x/stage\n").unwrap();
            }
        }
        std::fs::write(t.path().join("a_file_gfx942"), "").unwrap();
        let (found, skipped) = batch_artifacts(t.path()).unwrap();
        let got: Vec<(String, &str)> = found
            .iter()
            .map(|b| {
                (
                    b.dir.file_name().unwrap().to_string_lossy().into_owned(),
                    b.prefix.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("blas_lib_gfx110X-dgpu".to_string(), "blas_lib"),
                (
                    "core-runtime_run_gfx94X-dcgpu".to_string(),
                    "core-runtime_run"
                ),
            ]
        );
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        let empty = tempfile::tempdir().unwrap();
        assert!(batch_artifacts(empty.path()).is_err());
    }
}
