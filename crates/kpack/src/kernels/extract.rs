//! Writing chosen code objects out under a directory: the batch action behind the
//! TUI's marked kernels. The code objects are found by the same reading as the
//! listing (every kind of file the listing reads), so whatever was listed can be
//! extracted.

use super::{CodeObjectRef, KernelsOptions, list_kernels};
use crate::error::{Error, Result};
use crate::kpack::archive::{UnsafeKey, safe_arch, safe_relative_path};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Where [`extract_code_objects`] writes a code object under `root`:
/// `<binary>#<bundle>/<target>.hsaco` (the layout of `extract --all`), or why the
/// binary's name or the target cannot be a path below `root`.
pub fn destination(root: &Path, id: &CodeObjectRef) -> std::result::Result<PathBuf, UnsafeKey> {
    let unsafe_name = |why| UnsafeKey {
        key: id.binary.clone(),
        why,
    };
    // The check takes a key (`name#TU`): a `#` of the name itself stays in it.
    let rel = safe_relative_path(&format!("{}#0", id.binary)).map_err(unsafe_name)?;
    let target = safe_arch(&id.target).map_err(unsafe_name)?;
    let mut name = rel
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(format!("#{}", id.bundle.unwrap_or(0)));
    Ok(root
        .join(rel.with_file_name(name))
        .join(format!("{target}.hsaco")))
}

/// Extract the code objects `wanted` of `source` (a tree, one file, or a wheel) to
/// `dest` (see [`destination`]), each byte for byte as it was read. Nothing is
/// written unless every one is found and every destination is safe; two different
/// code objects with one destination are refused. Returns how many were written.
pub fn extract_code_objects(
    source: &Path,
    wanted: &BTreeSet<CodeObjectRef>,
    dest: &Path,
) -> Result<usize> {
    crate::fsutil::check_apart(source, dest)?;
    // Only the files that hold them are read: the binary, or the static archive
    // whose member it is (listed as `archive(member)`).
    let files = wanted.iter().flat_map(|w| {
        let container = w
            .path
            .strip_suffix(')')
            .and_then(|p| p.rsplit_once('('))
            .map(|(a, _)| a.to_string());
        [w.binary.clone(), w.path.clone()]
            .into_iter()
            .chain(container)
    });
    let opts = KernelsOptions {
        binaries: Some(files.collect()),
        keep: Some(wanted.clone()),
        ..Default::default()
    };
    let report = list_kernels(source, &opts)?;
    let mut found: BTreeMap<CodeObjectRef, Vec<u8>> = BTreeMap::new();
    for o in report.objects {
        let id = o.id();
        if let Some(b) = o.bytes {
            found.entry(id).or_insert(b);
        }
    }
    let missing: Vec<String> = wanted
        .iter()
        .filter(|w| !found.contains_key(*w))
        .map(|w| format!("{} {} ({})", w.binary, w.target, w.path))
        .collect();
    if !missing.is_empty() {
        let why = report
            .diagnostics
            .first()
            .map_or(String::new(), |d| format!("; {d}"));
        return Err(Error::Changed {
            path: source.to_path_buf(),
            what: format!(
                "{} code object(s) not found, nothing written (did the tree change?){why}:\n  {}",
                missing.len(),
                missing.join("\n  ")
            ),
        });
    }
    let mut plan: BTreeMap<PathBuf, (&CodeObjectRef, &[u8])> = BTreeMap::new();
    let mut refused = Vec::new();
    for (id, bytes) in &found {
        match destination(dest, id) {
            Ok(p) => match plan.get(&p) {
                Some((other, b)) if *b != bytes.as_slice() => refused.push(format!(
                    "{} and {} would both be {}",
                    other.path,
                    id.path,
                    p.display()
                )),
                Some(_) => {}
                None => {
                    plan.insert(p, (id, bytes));
                }
            },
            Err(e) => refused.push(e.to_string()),
        }
    }
    if !refused.is_empty() {
        return Err(Error::Refused {
            path: source.to_path_buf(),
            what: format!(
                "refusing to extract, nothing written:\n  {}",
                refused.join("\n  ")
            ),
        });
    }
    let plan: Vec<(PathBuf, &[u8])> = plan.into_iter().map(|(p, (_, b))| (p, b)).collect();
    crate::fsutil::write_below(dest, source, &plan, |b| Ok((*b).into()))?;
    Ok(plan.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(binary: &str, bundle: Option<u32>, target: &str) -> CodeObjectRef {
        CodeObjectRef {
            path: binary.into(),
            binary: binary.into(),
            bundle,
            target: target.into(),
        }
    }

    #[test]
    fn destinations_stay_below_the_root() {
        let root = Path::new("/out");
        assert_eq!(
            destination(root, &id("lib/libx.so", Some(2), "gfx90a:xnack+")).unwrap(),
            Path::new("/out/lib/libx.so#2/gfx90a:xnack+.hsaco")
        );
        assert_eq!(
            destination(root, &id("x.hsaco", None, "gfx900")).unwrap(),
            Path::new("/out/x.hsaco#0/gfx900.hsaco")
        );
        assert_eq!(
            destination(root, &id("a#b.so", Some(1), "gfx900")).unwrap(),
            Path::new("/out/a#b.so#1/gfx900.hsaco")
        );
        for bad in [
            id("../x", Some(0), "gfx900"),
            id("/etc/x", Some(0), "gfx900"),
            id("x", Some(0), "../gfx900"),
        ] {
            assert!(destination(root, &bad).is_err(), "{bad:?}");
        }
    }
}
