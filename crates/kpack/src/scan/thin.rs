//! Thin static archives (`ar --thin`, `!<thin>`): their members are not stored in
//! them but name other files, relative to the archive's directory. A member's name is
//! data read from a file: in a directory scan it becomes a path only when it leads,
//! once symlinks are resolved, to a regular file inside the scanned directory (and
//! there it is counted as that file, never twice); an archive given alone has its
//! members followed where they lead, as the linker would. Only regular files are
//! opened, without following a final symlink swapped in.

use super::report::{BundleReport, FileKind, FileReport, MemberReport};
use crate::elf::{self, ElfContent};
use crate::fsutil::map_file;
use std::path::Path;

/// At most this many members are followed (a thin archive of millions of names is
/// not a build product).
const MAX_THIN_MEMBERS: usize = 100_000;

/// Read the members a thin archive names and add those with device code to `r`.
/// `abs` is the archive, `boundary` the directory members must lie in (`None`:
/// anywhere).
pub fn resolve(r: &mut FileReport, names: &[String], abs: &Path, boundary: Option<&Path>) {
    let inside = match boundary.map(Path::canonicalize) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            r.problems
                .push(format!("thin archive: cannot resolve its directory: {e}"));
            return;
        }
    };
    let dir = abs.parent().unwrap_or(Path::new("."));
    let mut outside = Vec::new();
    for name in names.iter().take(MAX_THIN_MEMBERS) {
        match member_path(dir, name, inside.as_deref()) {
            Ok(Some((p, rel))) => read_member(r, name, &p, rel),
            Ok(None) => outside.push(name.as_str()),
            Err(why) => r
                .problems
                .push(format!("thin archive member {name:?}: {why}")),
        }
    }
    if names.len() > MAX_THIN_MEMBERS {
        r.problems.push(format!(
            "thin archive: {} members, only the first {MAX_THIN_MEMBERS} read",
            names.len()
        ));
    }
    if !outside.is_empty() {
        let shown: Vec<&str> = outside.iter().copied().take(5).collect();
        r.problems.push(format!(
            "unsupported: thin archive members outside the scanned directory not read \
             ({}{}); scan a directory that holds them, or the archive alone",
            shown.join(", "),
            if outside.len() > shown.len() {
                format!(" and {} more", outside.len() - shown.len())
            } else {
                String::new()
            }
        ));
    }
    if r.members.iter().any(|m| m.file.is_some()) {
        r.container = Some(super::Container::Ar);
        r.kind = FileKind::FatBinary;
    }
}

/// Where a member name leads: `Ok(None)` when outside `inside` (or missing),
/// `Err` when the name cannot be a member path at all.
fn member_path(
    dir: &Path,
    name: &str,
    inside: Option<&Path>,
) -> Result<Option<(std::path::PathBuf, String)>, String> {
    let p = Path::new(name);
    if name.is_empty() || name.contains('\0') {
        return Err("not a file name".into());
    }
    let Ok(real) = dir.join(p).canonicalize() else {
        return Err("names a file that is not there".into());
    };
    match inside {
        // Reported as the archive names it.
        None => Ok(Some((real, name.to_string()))),
        Some(inside) => match real.strip_prefix(inside) {
            Ok(rel) => {
                let rel = super::rel_string(rel);
                Ok(Some((real, rel)))
            }
            Err(_) => Ok(None),
        },
    }
}

fn read_member(r: &mut FileReport, name: &str, p: &Path, rel: String) {
    let map = match map_file(p) {
        Ok(Some(m)) => m,
        Ok(None) => return,
        Err(e) => {
            r.problems.push(format!(
                "thin archive member {name}: cannot read {rel}: {e}"
            ));
            return;
        }
    };
    if !elf::is_elf(&map) {
        return;
    }
    match elf::inspect(&map) {
        Ok(ElfContent::Fat(fat)) => {
            r.problems.extend(
                fat.problems
                    .iter()
                    .map(|x| format!("member {name} ({rel}): {x}")),
            );
            r.members.push(MemberReport {
                name: name.to_string(),
                size: map.len() as u64,
                bundles: fat.bundles.iter().map(BundleReport::from_info).collect(),
                file: Some(rel),
                resolved: Some(p.to_path_buf()),
            });
        }
        Ok(_) => {}
        Err(e) => r.problems.push(format!("member {name} ({rel}): {e}")),
    }
}
