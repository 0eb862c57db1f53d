//! `artifact_manifest.txt`: one stage prefix per line (workflows §1.1). Read with
//! each line trimmed and empty lines dropped; written as each prefix plus `\n`.
//!
//! Stricter than the reference, because the prefixes become paths we write to: a
//! prefix must be a relative `/`-separated path without `.`/`..` components, NUL or
//! backslashes, listed once, and the file is bounded in size.

use crate::error::{Error, Result};
use std::path::Path;

/// The file name inside an artifact directory.
pub const MANIFEST: &str = "artifact_manifest.txt";

/// Larger manifests are refused (real ones hold a few dozen prefixes).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// Read `dir/artifact_manifest.txt`.
pub fn read_manifest(dir: &Path) -> Result<Vec<String>> {
    let path = dir.join(MANIFEST);
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::Invalid(format!(
                "{MANIFEST} not found in {}",
                dir.display()
            )));
        }
        Err(e) => return Err(Error::io(&path, e)),
    };
    if !meta.is_file() {
        return Err(Error::Invalid(format!(
            "{}: not a regular file",
            path.display()
        )));
    }
    if meta.len() > MAX_MANIFEST_BYTES {
        return Err(Error::Invalid(format!(
            "{}: {} bytes, more than a manifest can hold ({MAX_MANIFEST_BYTES})",
            path.display(),
            meta.len()
        )));
    }
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    parse_manifest(&bytes).map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))
}

/// Parse manifest text.
pub fn parse_manifest(bytes: &[u8]) -> std::result::Result<Vec<String>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8 text ({e})"))?;
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
            return Err(format!("line {}: prefix {raw:?} is absolute", n + 1));
        }
        check_prefix(shown).map_err(|e| format!("line {}: prefix {shown:?} {e}", n + 1))?;
        let p = p.to_string();
        if out.contains(&p) {
            return Err(format!("line {}: prefix {p:?} is listed twice", n + 1));
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
    }
}
