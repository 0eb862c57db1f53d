//! The ledger `split` leaves in each target artifact, beside its archive: every
//! host-only binary of the input with the SHA-256 it was written with, and the code
//! objects of this artifact's target(s) for it. Installed artifacts bring their
//! ledgers into one `.kpack/`; `verify` merges them and proves every kernel in its
//! archive, byte-identical, and that every ledger was made for the host binaries
//! present (an artifact from another build is a ledger that does not know them).

use crate::error::Result;
use crate::kpack::ledger::{Ledger, LedgerArchive, LedgerBinary, LedgerFile, Selection};
use std::collections::BTreeMap;
use std::path::Path;

/// The ledger of the artifact of `unit` (component `ap`), whose archive (if it has
/// one) lists `gfx_arches`; `units` maps each target to its unit, `binaries` holds
/// every code object of every host-only binary written, `files` the kernel-database
/// files of this artifact.
pub(super) fn unit_ledger(
    ap: &str,
    unit: &str,
    gfx_arches: Option<Vec<String>>,
    units: &BTreeMap<String, String>,
    binaries: &[LedgerBinary],
    files: Vec<LedgerFile>,
) -> Ledger {
    let mut l = Ledger::new(ap);
    // An install may hold some targets' artifacts only.
    l.layout = crate::kpack::ledger::Layout::Split;
    l.selection = Selection {
        archive_per: crate::kpack::ledger::ArchivePer::Target,
        targets: vec![unit.to_string()],
        unassigned: crate::kpack::ledger::Unassigned::Drop,
        ..Selection::default()
    };
    let of_unit = |t: &str| units.get(t).map_or(t, String::as_str) == unit;
    l.binaries = binaries
        .iter()
        .map(|b| LedgerBinary {
            kernels: b
                .kernels
                .iter()
                .filter(|k| of_unit(&k.target))
                .cloned()
                .collect(),
            ..b.clone()
        })
        .collect();
    if let Some(gfx_arches) = gfx_arches {
        l.archives.push(LedgerArchive {
            path: format!(".kpack/{}", super::split::archive_name(ap, unit)),
            gfx_arches,
            kernels: l.binaries.iter().map(|b| b.kernels.len() as u64).sum(),
        });
    }
    l.database_files = files;
    l.normalise();
    l
}

/// Where a shard's split names what it left to other shards: beside its artifacts,
/// in no artifact (a target artifact is the same whichever shard wrote it).
pub fn left_path(out: &Path, ap: &str) -> std::path::PathBuf {
    out.join(format!(".kpack-tui-split-{ap}.json"))
}

/// What a split with `--gpu-targets` left to the shards building the other targets.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LeftToOthers {
    /// Always `kpack-tui.split-left/1`.
    pub schema: String,
    /// The component.
    pub artifact_prefix: String,
    /// The shard's `--gpu-targets`.
    pub gpu_targets: Vec<String>,
    /// Each code object (`prefix/path: bundle #N for target`) and database file
    /// (`prefix/path: database file for target`) left out.
    pub left: Vec<String>,
}

/// Write into `dir` the record of what this split left to other shards; `None`
/// (nothing written) when nothing was left out. Returns the file's name.
pub(super) fn write_left(
    dir: &Path,
    ap: &str,
    gpu_targets: Option<&[String]>,
    left: &[String],
) -> Result<Option<String>> {
    if left.is_empty() {
        return Ok(None);
    }
    let path = left_path(dir, ap);
    let l = LeftToOthers {
        schema: "kpack-tui.split-left/1".into(),
        artifact_prefix: ap.into(),
        gpu_targets: gpu_targets.map(<[String]>::to_vec).unwrap_or_default(),
        left: left.to_vec(),
    };
    let mut json = serde_json::to_vec_pretty(&l).unwrap_or_default();
    json.push(b'\n');
    crate::fsutil::write_atomic(&path, &json, None)?;
    Ok(path.file_name().map(|n| n.to_string_lossy().into_owned()))
}

/// The records of what splits left to other shards under `dir`.
pub fn read_left(dir: &Path) -> Vec<(String, LeftToOthers)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, LeftToOthers)> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".kpack-tui-split-") && n.ends_with(".json"))
        .filter_map(|n| {
            let data = std::fs::read(dir.join(&n)).ok()?;
            if data.len() > 1 << 30 {
                return None;
            }
            serde_json::from_slice(&data).ok().map(|l| (n, l))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}
