//! The runtime's question, answered offline: given a host-only binary's marker, the
//! bundle index of one of its wrappers and a device, which archive and which of its
//! kernels would the loader return? (`kpack-formats.md` §4.4-4.5 and `workflows.md`
//! §6.2: search paths resolved against the binary's directory, `@GFXARCH@` expanded
//! once per compatible target of each arch in the device's list, feature-flag
//! matching, and the newest loader's fall-through to the next candidate.)
//!
//! Archives are looked up in a [`TreeArchives`] map keyed by path relative to the
//! tree root, so a tree can be checked where it lies (or as its split parts would
//! be merged).

use crate::kpack::archive::{Archive, KernelEntry};
use crate::kpack::marker::Marker;
use serde::Serialize;
use std::collections::BTreeMap;

/// The placeholder the loader replaces by each candidate target.
pub const GFXARCH: &str = "@GFXARCH@";

/// Archives of a tree, by `/`-separated path relative to its root.
pub type TreeArchives = BTreeMap<String, Archive>;

/// The targets a device ISA accepts, most specific first: every subset of its
/// feature flags in the loader's order (all features first, the bare processor
/// last). `amdgcn-amd-amdhsa--` is stripped.
pub fn compatible_targets(isa: &str) -> Vec<String> {
    let isa = isa.strip_prefix("amdgcn-amd-amdhsa--").unwrap_or(isa);
    if isa.is_empty() {
        return Vec::new();
    }
    let mut parts = isa.split(':');
    let processor = parts.next().unwrap_or_default();
    let features: Vec<&str> = parts.filter(|f| !f.is_empty()).collect();
    let n = features.len().min(8);
    (0..1u32 << n)
        .rev()
        .map(|mask| {
            let mut t = processor.to_string();
            for (j, f) in features.iter().enumerate().take(n) {
                if mask & (1 << (n - 1 - j)) != 0 {
                    t.push(':');
                    t.push_str(f);
                }
            }
            t
        })
        .collect()
}

/// The generic ISA CLR adds after a processor in the device's arch list (`None` for
/// processors without one: gfx908, gfx90a, gfx1250…).
pub fn generic_of(processor: &str) -> Option<&'static str> {
    Some(match processor {
        "gfx900" | "gfx902" | "gfx904" | "gfx906" | "gfx909" | "gfx90c" => "gfx9-generic",
        "gfx942" | "gfx950" => "gfx9-4-generic",
        "gfx1010" | "gfx1011" | "gfx1012" | "gfx1013" => "gfx10-1-generic",
        "gfx1030" | "gfx1031" | "gfx1032" | "gfx1033" | "gfx1034" | "gfx1035" | "gfx1036" => {
            "gfx10-3-generic"
        }
        "gfx1100" | "gfx1101" | "gfx1102" | "gfx1103" | "gfx1150" | "gfx1151" | "gfx1152"
        | "gfx1153" => "gfx11-generic",
        "gfx1200" | "gfx1201" => "gfx12-generic",
        _ => return None,
    })
}

/// The arch list CLR passes for a device: its ISA, then its generic ISA with the same
/// features when one exists.
pub fn device_arch_list(isa: &str) -> Vec<String> {
    let isa = isa.strip_prefix("amdgcn-amd-amdhsa--").unwrap_or(isa);
    let (processor, features) = isa.split_once(':').map_or((isa, ""), |(p, f)| (p, f));
    let mut list = vec![isa.to_string()];
    if let Some(g) = generic_of(processor) {
        list.push(if features.is_empty() {
            g.to_string()
        } else {
            format!("{g}:{features}")
        });
    }
    list
}

/// Join `rel` onto `dir` (both `/`-separated, relative to the tree root) and fold
/// `.` and `..`. `None` when the result leaves the tree or `rel` is absolute.
pub fn join_in_tree(dir: &str, rel: &str) -> Option<String> {
    if rel.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for c in rel.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

/// The candidate archive paths of a marker for an arch list, in the loader's order
/// (relative to the tree root; paths leaving the tree are left out).
pub fn candidate_paths(marker: &Marker, binary_dir: &str, arch_list: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |p: String| {
        if !out.contains(&p) {
            out.push(p);
        }
    };
    for sp in &marker.kpack_search_paths {
        let Some(resolved) = join_in_tree(binary_dir, sp) else {
            continue;
        };
        if resolved.contains(GFXARCH) {
            for a in arch_list {
                for t in compatible_targets(a) {
                    push(resolved.replacen(GFXARCH, &t, 1));
                }
            }
        } else {
            push(resolved);
        }
    }
    out
}

/// The archives of `archives` a marker can reach whatever the device, in search
/// order: its direct paths that exist, and for a `@GFXARCH@` pattern every archive
/// whose path is the pattern with one of its own `gfx_arches`, or a feature subset
/// of one, in place of the token.
pub fn reachable_archives<'a>(
    marker: &Marker,
    binary_dir: &str,
    archives: &'a TreeArchives,
) -> Vec<&'a str> {
    let mut out: Vec<&'a str> = Vec::new();
    for sp in &marker.kpack_search_paths {
        let Some(p) = join_in_tree(binary_dir, sp) else {
            continue;
        };
        for (path, a) in archives {
            let hit = if p.contains(GFXARCH) {
                // A device that accepts a listed target probes the pattern with each
                // of that target's feature subsets (`x_gfx90a.kpack` listing
                // `gfx90a:xnack+` is found by an xnack+ device).
                a.index.meta.gfx_arches.iter().any(|t| {
                    compatible_targets(t)
                        .iter()
                        .any(|c| p.replacen(GFXARCH, c, 1) == *path)
                })
            } else {
                p == *path
            };
            if hit && !out.contains(&path.as_str()) {
                out.push(path);
            }
        }
    }
    out
}

/// Where a lookup ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup<'a> {
    /// Found: the archive's path, the target that matched, the TOC entry.
    Found {
        /// Archive path relative to the tree.
        archive: &'a str,
        /// The `gfx_arches` entry that matched.
        target: String,
        /// The kernel.
        entry: &'a KernelEntry,
    },
    /// No candidate archive exists (the runtime's ARCHIVE_NOT_FOUND).
    NoArchive {
        /// The paths probed.
        probed: Vec<String>,
    },
    /// Archives exist, but none lists a target the device accepts (ARCH_NOT_FOUND).
    NoArch,
    /// An archive lists a matching target but has no kernel under the key
    /// (KERNEL_NOT_FOUND), for the last candidate tried.
    NoKernel {
        /// The archive.
        archive: &'a str,
        /// The target.
        target: String,
        /// The key looked up.
        key: String,
    },
}

/// Which loader's rules to follow: the generations deployed in 2026.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Loader {
    /// ROCm up to 7.14 and the reference runtime in `shared/oracles` (Feb 2026,
    /// commit e348328): the first archive whose `gfx_arches` holds a compatible
    /// target decides; a missing kernel there is the answer.
    FirstMatch,
    /// Aug 2026 and later (rocm-systems #9953): a failed candidate falls through to
    /// the next archive, target and arch.
    FallThrough,
    /// Resolvers that look for the key in each archive's TOC instead of trusting
    /// `gfx_arches` (embedded readers): the first archive whose TOC has the key
    /// under a compatible target.
    TocScan,
}

impl Loader {
    /// Every generation, strictest first.
    pub const ALL: [Loader; 3] = [Loader::FirstMatch, Loader::FallThrough, Loader::TocScan];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Loader::FirstMatch => "first-match",
            Loader::FallThrough => "fall-through",
            Loader::TocScan => "toc-scan",
        }
    }

    /// Which releases follow these rules (for messages and the README).
    pub fn releases(self) -> &'static str {
        match self {
            Loader::FirstMatch => "ROCm up to 7.14 and the reference runtime",
            Loader::FallThrough => "ROCm after Aug 2026",
            Loader::TocScan => "TOC-scanning resolvers",
        }
    }
}

/// The archives a marker reaches for one arch list, in the loader's candidate order.
pub fn usable_archives<'a>(
    archives: &'a TreeArchives,
    marker: &Marker,
    binary_dir: &str,
    arch_list: &[String],
) -> Result<Vec<(&'a str, &'a Archive)>, Vec<String>> {
    let probed = candidate_paths(marker, binary_dir, arch_list);
    let usable: Vec<(&'a str, &'a Archive)> = probed
        .iter()
        .filter_map(|p| archives.get_key_value(p).map(|(k, a)| (k.as_str(), a)))
        .collect();
    if usable.is_empty() {
        Err(probed)
    } else {
        Ok(usable)
    }
}

/// Resolve `key` among `usable` archives (from [`usable_archives`]) for a device
/// given by its arch list.
pub fn lookup_in<'a>(
    usable: &[(&'a str, &'a Archive)],
    key: &str,
    arch_list: &[String],
    loader: Loader,
) -> Lookup<'a> {
    let mut last = None;
    for a in arch_list {
        for t in compatible_targets(a) {
            for (path, archive) in usable {
                let listed = archive.index.meta.gfx_arches.contains(&t);
                // Only the TOC-scanning loader looks past gfx_arches.
                if !listed && loader != Loader::TocScan {
                    continue;
                }
                if let Some(entry) = archive.entry(key, &t) {
                    return Lookup::Found {
                        archive: path,
                        target: t,
                        entry,
                    };
                }
                if !listed {
                    continue;
                }
                let miss = Lookup::NoKernel {
                    archive: path,
                    target: t.clone(),
                    key: key.to_string(),
                };
                match loader {
                    Loader::FirstMatch => return miss,
                    Loader::FallThrough => last = Some(miss),
                    // Nothing anywhere: the miss is the first archive listing it.
                    Loader::TocScan => {
                        last.get_or_insert(miss);
                    }
                }
            }
        }
    }
    last.unwrap_or(Lookup::NoArch)
}

/// Resolve `kernel_name#co_index` for a device given by its arch list.
pub fn lookup<'a>(
    archives: &'a TreeArchives,
    marker: &Marker,
    binary_dir: &str,
    co_index: u32,
    arch_list: &[String],
    loader: Loader,
) -> Lookup<'a> {
    match usable_archives(archives, marker, binary_dir, arch_list) {
        Err(probed) => Lookup::NoArchive { probed },
        Ok(usable) => lookup_in(
            &usable,
            &format!("{}#{co_index}", marker.kernel_name),
            arch_list,
            loader,
        ),
    }
}

/// Feature flags a processor's devices report (LLVM's AMDGPUUsage processor table):
/// the device ISAs that exist for it are every combination of these set, cleared or
/// left out.
pub fn device_features(processor: &str) -> &'static [&'static str] {
    match processor {
        "gfx906" | "gfx908" | "gfx90a" | "gfx940" | "gfx941" | "gfx942" | "gfx950"
        | "gfx9-4-generic" => &["sramecc", "xnack"],
        "gfx900" | "gfx902" | "gfx904" | "gfx909" | "gfx90c" | "gfx9-generic" | "gfx1010"
        | "gfx1011" | "gfx1012" | "gfx1013" | "gfx10-1-generic" => &["xnack"],
        _ => &[],
    }
}

/// Every device ISA of `processor`: each of its features set, cleared or left out
/// (3^n ISAs, features in name order).
pub fn device_isas(processor: &str) -> Vec<String> {
    let mut out = vec![processor.to_string()];
    for f in device_features(processor) {
        out = out
            .into_iter()
            .flat_map(|t| [t.clone(), format!("{t}:{f}+"), format!("{t}:{f}-")])
            .collect();
    }
    out
}

/// The device ISAs that accept code built for `target` (a processor with features,
/// or a generic ISA, which every processor of its generation accepts through CLR's
/// arch list).
pub fn accepting_devices(target: &str) -> Vec<String> {
    let processor = crate::bundle::target::base_processor(target);
    let processors: Vec<&str> = if processor.ends_with("-generic") {
        crate::family::known_processors()
            .into_iter()
            .filter(|p| generic_of(p) == Some(processor))
            .collect()
    } else {
        vec![processor]
    };
    processors
        .into_iter()
        .flat_map(device_isas)
        // The device's ISA, or the generic ISA CLR passes after it.
        .filter(|d| {
            device_arch_list(d)
                .iter()
                .any(|a| crate::kpack::alias::runs_on(target, a))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kpack::archive::{ArchiveMeta, ArchiveWriter, Scheme};

    #[test]
    fn feature_subsets_in_loader_order() {
        assert_eq!(
            compatible_targets("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"),
            [
                "gfx942:sramecc+:xnack-",
                "gfx942:sramecc+",
                "gfx942:xnack-",
                "gfx942"
            ]
        );
        assert_eq!(compatible_targets("gfx1201"), ["gfx1201"]);
        assert_eq!(
            compatible_targets("gfx90a:xnack+"),
            ["gfx90a:xnack+", "gfx90a"]
        );
        assert!(compatible_targets("").is_empty());
        assert_eq!(
            device_arch_list("gfx942:xnack+"),
            ["gfx942:xnack+", "gfx9-4-generic:xnack+"]
        );
        assert_eq!(device_arch_list("gfx90a"), ["gfx90a"]);
    }

    #[test]
    fn paths_fold_and_stay_inside() {
        assert_eq!(
            join_in_tree("lib/x", "../../.kpack/a.kpack").as_deref(),
            Some(".kpack/a.kpack")
        );
        assert_eq!(join_in_tree("lib", "../../a"), None);
        assert_eq!(join_in_tree("lib", "/abs/a"), None);
        let m = Marker {
            kpack_search_paths: vec!["../.kpack/r_@GFXARCH@.kpack".into()],
            kernel_name: "lib/a.so".into(),
        };
        assert_eq!(
            candidate_paths(&m, "lib", &device_arch_list("gfx906:xnack-")),
            [
                ".kpack/r_gfx906:xnack-.kpack",
                ".kpack/r_gfx906.kpack",
                ".kpack/r_gfx9-generic:xnack-.kpack",
                ".kpack/r_gfx9-generic.kpack"
            ]
        );
    }

    fn archive(
        dir: &std::path::Path,
        name: &str,
        arches: &[&str],
        keys: &[(&str, &str)],
    ) -> Archive {
        let p = dir.join(name);
        let w = ArchiveWriter::create(
            &p,
            ArchiveMeta {
                group_name: "g".into(),
                gfx_arch_family: "f".into(),
                gfx_arches: arches.iter().map(|s| s.to_string()).collect(),
            },
            Scheme::ZstdPerKernel,
            3,
        )
        .unwrap();
        for (k, a) in keys {
            w.add(k, a, b"code").unwrap();
        }
        w.finish().unwrap();
        Archive::open(&p).unwrap()
    }

    #[test]
    fn newest_falls_through_first_match_stops() {
        // workflows.md §6.2: a small xnack- overlay listed before the complete archive.
        let d = tempfile::tempdir().unwrap();
        let mut t = TreeArchives::new();
        t.insert(
            ".kpack/x.kpack".into(),
            archive(
                d.path(),
                "x.kpack",
                &["gfx90a:xnack-"],
                &[("lib/other.so#0", "gfx90a:xnack-")],
            ),
        );
        t.insert(
            ".kpack/g.kpack".into(),
            archive(
                d.path(),
                "g.kpack",
                &["gfx90a"],
                &[("lib/a.so#0", "gfx90a")],
            ),
        );
        let m = Marker {
            kpack_search_paths: vec!["../.kpack/x.kpack".into(), "../.kpack/g.kpack".into()],
            kernel_name: "lib/a.so".into(),
        };
        let dev = device_arch_list("gfx90a:xnack-");
        match lookup(&t, &m, "lib", 0, &dev, Loader::FallThrough) {
            Lookup::Found {
                archive, target, ..
            } => {
                assert_eq!((archive, target.as_str()), (".kpack/g.kpack", "gfx90a"))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            lookup(&t, &m, "lib", 0, &dev, Loader::FirstMatch),
            Lookup::NoKernel { .. }
        ));
        assert_eq!(
            lookup(
                &t,
                &m,
                "lib",
                0,
                &device_arch_list("gfx1100"),
                Loader::FallThrough
            ),
            Lookup::NoArch
        );
        let gone = Marker {
            kpack_search_paths: vec!["../.kpack/none.kpack".into()],
            kernel_name: "lib/a.so".into(),
        };
        assert!(matches!(
            lookup(&t, &gone, "lib", 0, &dev, Loader::FallThrough),
            Lookup::NoArchive { .. }
        ));
        // An xnack+ device never takes an xnack- kernel.
        assert!(matches!(
            lookup(
                &t,
                &m,
                "lib",
                5,
                &device_arch_list("gfx90a:xnack+"),
                Loader::FallThrough
            ),
            Lookup::NoKernel { .. }
        ));
    }
}
