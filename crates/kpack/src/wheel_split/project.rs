//! What a wheel split would write, from a scan of the wheel (nothing compressed),
//! and which targets a `--target`/`--family` choice keeps.

use crate::kerneldb::{self, Database, base_arch};
use crate::wheel::bootstrap;
use crate::wheel::metadata;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Whether a target (or a database file's arch) is kept by a target list (exact
/// target IDs, or processors meaning all their variants) and by bundle keys.
/// A family-level asset (`gfx11`) is kept when a wanted target's chain holds it.
pub(crate) fn keeps(
    wanted: Option<&BTreeSet<String>>,
    families: Option<&BTreeSet<String>>,
    target: &str,
) -> bool {
    let base = base_arch(target);
    if let Some(w) = wanted
        && !w.contains(target)
        && !w.contains(&base)
    {
        let Ok(key) = bootstrap::bundle_key(target) else {
            return false;
        };
        let needed = !metadata::is_target_key(&key)
            && w.iter().any(|t| {
                bootstrap::bundle_key(t).is_ok_and(|k| bootstrap::chain(&k).contains(&key))
            });
        if !needed {
            return false;
        }
    }
    match families {
        None => true,
        Some(fs) => bootstrap::bundle_key(target)
            .map(|k| bootstrap::chain(&k).iter().any(|c| fs.contains(c)))
            .unwrap_or(false),
    }
}

/// A device wheel as projected before splitting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProjectedWheel {
    /// Bundle key.
    pub key: String,
    /// Targets in it.
    pub targets: Vec<String>,
    /// Uncompressed code-object bytes going to its archives.
    pub raw: u64,
    /// Kernel-database bytes (uncompressed).
    pub databases: u64,
    /// A guess of its size: low and high (zstd keeps 25-40% of code objects).
    pub low: u64,
    /// High end of the guess.
    pub high: u64,
}

/// What a split would write, from a scan of the wheel (nothing compressed yet).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WheelProjection {
    /// The host wheel, low end of the guess: members kept as they are (their stored
    /// bytes) plus the host part of the rewritten binaries deflated to 25%.
    pub host: u64,
    /// High end (host parts deflated to 60%).
    pub host_high: u64,
    /// One per bundle key.
    pub devices: Vec<ProjectedWheel>,
    /// Kept targets with no rocm-bootstrap package (the split would refuse them).
    pub unknown: Vec<String>,
    /// Code objects of targets left out.
    pub left_out: u64,
}

/// Project a split of the scanned wheel `report` keeping `targets` (exact target
/// IDs or processors; `None`: all), with database files found by `databases`.
pub fn project(
    report: &crate::scan::TreeReport,
    overlay: &str,
    targets: Option<&[String]>,
    databases: &[Database],
) -> WheelProjection {
    use crate::scan::FileKind;
    let wanted: Option<BTreeSet<String>> = targets.map(|t| t.iter().cloned().collect());
    let under = format!("{}/", overlay.trim_matches('/'));
    let ratio = report.wheel.as_ref().map_or(1.0, |w| {
        if w.bytes == 0 {
            1.0
        } else {
            w.stored_bytes as f64 / w.bytes as f64
        }
    });
    let mut p = WheelProjection::default();
    let mut kept = 0u64;
    let mut host_parts = 0u64;
    let mut per_key: BTreeMap<String, ProjectedWheel> = BTreeMap::new();
    let mut add =
        |target: &str, raw: u64, db: u64, p: &mut WheelProjection| match bootstrap::bundle_key(
            target,
        ) {
            Ok(k) => {
                let e = per_key.entry(k.clone()).or_insert_with(|| ProjectedWheel {
                    key: k,
                    targets: Vec::new(),
                    raw: 0,
                    databases: 0,
                    low: 0,
                    high: 0,
                });
                if !e.targets.iter().any(|t| t == target) {
                    e.targets.push(target.to_string());
                }
                e.raw += raw;
                e.databases += db;
            }
            Err(_) => {
                if !p.unknown.iter().any(|t| t == target) {
                    p.unknown.push(target.to_string());
                }
            }
        };
    for f in &report.files {
        let stored = f.stored_size.unwrap_or((f.size as f64 * ratio) as u64);
        let Some(rel) = f.path.strip_prefix(&under) else {
            kept += stored;
            continue;
        };
        if let Some(d) = kerneldb::classify_with(rel, databases) {
            if keeps(wanted.as_ref(), None, &d.arch) {
                add(&d.arch, 0, f.size, &mut p);
            }
            continue;
        }
        if f.kind != FileKind::FatBinary || !f.packable() {
            kept += stored;
            continue;
        }
        host_parts += f.size.saturating_sub(f.fatbin_bytes);
        for t in f.bundles.iter().flat_map(|b| &b.targets) {
            if keeps(wanted.as_ref(), None, &t.arch) {
                add(&t.arch, t.size, 0, &mut p);
            } else {
                p.left_out += 1;
            }
        }
    }
    p.host = kept + host_parts / 4;
    p.host_high = kept + host_parts * 3 / 5;
    for (_, mut d) in per_key {
        let db = (d.databases as f64 * ratio) as u64;
        d.low = d.raw / 4 + db;
        d.high = d.raw * 2 / 5 + db;
        d.targets.sort();
        p.devices.push(d);
    }
    p
}
