//! Kernel-database files: per-architecture data that libraries load at run time
//! (rocBLAS/Tensile, hipBLASLt, MIOpen, AOTriton). Recognised from the path, and
//! attributed to an arch from the file name (or the AOTriton directory), as the
//! reference splitter does (spec §6.3), with two improvements: path components are
//! matched exactly (`foo_rocblas/library` is not rocBLAS) and a generic ISA keeps its
//! full name (`gfx9-4-generic`, not `gfx9`).

use serde::Serialize;

/// Which library a database file belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Database {
    /// `…/rocblas/library/*.{co,hsaco,dat}`
    Rocblas,
    /// `…/hipblaslt/library/*.{co,hsaco,dat}`
    Hipblaslt,
    /// `…/miopen/db/*.model`
    Miopen,
    /// `…/aotriton/kernels/<gfx…>/…`
    Aotriton,
}

impl Database {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Database::Rocblas => "rocblas",
            Database::Hipblaslt => "hipblaslt",
            Database::Miopen => "miopen",
            Database::Aotriton => "aotriton",
        }
    }
}

/// A recognised database file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DatabaseFile {
    /// The library.
    pub database: Database,
    /// The arch it belongs to; `None` for arch-independent files (e.g. `TensileLibrary.dat`).
    pub arch: Option<String>,
}

fn has_pair(components: &[&str], a: &str, b: &str) -> bool {
    components.windows(2).any(|w| w[0] == a && w[1] == b)
}

/// The first `gfx<digits><letters>` (or generic ISA `gfxN[-N]-generic`) in a name.
pub fn arch_in_name(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    let mut from = 0;
    while let Some(p) = name[from..].find("gfx") {
        let start = from + p;
        let mut i = start + 3;
        let digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            from = start + 3;
            continue;
        }
        i += digits;
        // Generic ISA: gfx9-generic, gfx9-4-generic, gfx10-3-generic.
        let rest = &name[i..];
        for generic in ["-generic"] {
            if rest.starts_with(generic) {
                return Some(name[start..i + generic.len()].to_string());
            }
        }
        if let Some(r) = rest.strip_prefix('-') {
            let d2 = r.bytes().take_while(u8::is_ascii_digit).count();
            if d2 > 0 && r[d2..].starts_with("-generic") {
                return Some(name[start..i + 1 + d2 + 8].to_string());
            }
        }
        i += bytes[i..]
            .iter()
            .take_while(|b| b.is_ascii_lowercase())
            .count();
        return Some(name[start..i].to_string());
    }
    None
}

/// Classify a path relative to the tree root (`/`-separated).
pub fn classify(rel_path: &str) -> Option<DatabaseFile> {
    let components: Vec<&str> = rel_path.split('/').collect();
    let name = *components.last()?;
    let dirs = &components[..components.len() - 1];
    let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    let blas_ext = matches!(ext, "co" | "hsaco" | "dat");
    if has_pair(dirs, "rocblas", "library") && blas_ext {
        return Some(DatabaseFile {
            database: Database::Rocblas,
            arch: arch_in_name(name),
        });
    }
    if has_pair(dirs, "hipblaslt", "library") && blas_ext {
        return Some(DatabaseFile {
            database: Database::Hipblaslt,
            arch: arch_in_name(name),
        });
    }
    if has_pair(dirs, "miopen", "db") && name.ends_with(".model") {
        return Some(DatabaseFile {
            database: Database::Miopen,
            arch: arch_in_name(name),
        });
    }
    if let Some(p) = dirs
        .windows(2)
        .position(|w| w[0] == "aotriton" && w[1] == "kernels")
        && let Some(dir) = dirs.get(p + 2)
    {
        return Some(DatabaseFile {
            database: Database::Aotriton,
            arch: dir.starts_with("gfx").then(|| dir.to_string()),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arch(p: &str) -> Option<Option<String>> {
        classify(p).map(|d| d.arch)
    }

    #[test]
    fn spec_examples() {
        assert_eq!(
            arch("lib/rocblas/library/TensileLibrary_gfx90a.dat"),
            Some(Some("gfx90a".into()))
        );
        assert_eq!(arch("lib/rocblas/library/TensileLibrary.dat"), Some(None));
        assert_eq!(
            arch("lib/aotriton/kernels/gfx942/sub/x.hsaco"),
            Some(Some("gfx942".into()))
        );
        assert_eq!(arch("lib/aotriton/gfx1100/x"), None);
        assert_eq!(
            arch("share/miopen/db/gfx950_3d.tn.model"),
            Some(Some("gfx950".into()))
        );
        assert_eq!(arch("share/miopen/db/generic.tn.model"), Some(None));
        assert_eq!(
            arch("lib/hipblaslt/library/extop_gfx1100.co"),
            Some(Some("gfx1100".into()))
        );
    }

    #[test]
    fn negatives_and_edges() {
        assert_eq!(classify("lib/rocblas/library/readme.txt"), None);
        assert_eq!(classify("lib/foo_rocblas/library/x_gfx90a.co"), None);
        assert_eq!(
            classify("rocblas/library/x_gfx90a.co").unwrap().database,
            Database::Rocblas
        );
        assert_eq!(arch("lib/aotriton/kernels/common/x.bin"), Some(None));
        assert_eq!(classify("lib/aotriton/kernels"), None);
        assert_eq!(classify("share/miopen/db/gfx950.txt"), None);
        assert_eq!(
            arch_in_name("Kernels_gfx9-4-generic.co").as_deref(),
            Some("gfx9-4-generic")
        );
        assert_eq!(
            arch_in_name("k_gfx11-generic.co").as_deref(),
            Some("gfx11-generic")
        );
        assert_eq!(arch_in_name("gfxgfx1030x.co").as_deref(), Some("gfx1030x"));
        assert_eq!(arch_in_name("nothing"), None);
    }
}
