//! Packing a tree: device code into per-family `.kpack` archives, binaries rewritten
//! host-only, everything else copied faithfully, in one parallel pass.
//!
//! 1. **Plan** ([`plan_pack`], `plan.rs`): scan the tree, list every kernel
//!    `(relpath#k, arch)`, assign each arch to a family, find what no family takes.
//!    A tree that is already packed is a normal input: host-only binaries whose
//!    archives are in the tree (or named with [`PackOptions::archives`]) have their
//!    kernels read from those archives and packed again under the new selection.
//!    Nothing is written.
//! 2. **Execute** ([`execute_pack`]): into a temporary sibling of the output, every fat
//!    binary is mapped once; each of its kernels goes (compressed on the worker
//!    thread, spooled to disk) to its family's archive writer; then the binary is
//!    rewritten host-only with a marker listing every family archive. Other files
//!    are copied with mode and mtime; symlinks stay symlinks; hard links stay hard
//!    links; empty directories are kept; special files are skipped and reported.
//! 3. **Finish**: archives are laid out (sorted, so output does not depend on thread
//!    count), the ledger of what was packed is written (`kpack::ledger`), the result
//!    is verified against it (`verify.rs`, the runtime's lookup for every kernel),
//!    and the temporary directory is renamed to the output. A cancelled or killed run
//!    leaves no output; a later run removes the temporary directory of a dead run.

mod files;
pub mod installed;
mod plan;
mod reach;
mod record;
mod run;
pub mod units;
mod verify;
mod verify_tree;

pub use plan::{estimate, plan_pack};

pub use crate::event::{PackEvent, Phase};
pub use run::{check_plan, execute_pack};
pub use verify::{DeviceHit, DeviceVerdict, TreeVerdict, verify_device, verify_tree};

use crate::family::Families;
use crate::kpack::archive::Scheme;
use crate::scan::TreeReport;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

pub use crate::kpack::ledger::{ArchivePer, Layout, Unassigned};

/// Options of a pack.
#[derive(Debug, Clone)]
pub struct PackOptions {
    /// Group (product) name.
    pub group: String,
    /// Selected families (presets or custom).
    pub families: Families,
    /// Selected target IDs or processors (`gfx90a` takes its feature variants too).
    pub targets: Vec<String>,
    /// Select every target in the tree.
    pub all: bool,
    /// One archive per target (default) or per family.
    pub archive_per: ArchivePer,
    /// Layout.
    pub layout: Layout,
    /// Policy for unassigned code.
    pub unassigned: Unassigned,
    /// Archive scheme.
    pub scheme: Scheme,
    /// zstd level.
    pub level: i32,
    /// Worker threads (0 = all cores).
    pub threads: usize,
    /// Replace an existing non-empty output.
    pub force: bool,
    /// Verify the output before renaming it into place.
    pub verify: bool,
    /// Archives (files or directories of `*.kpack`) holding the kernels of host-only
    /// binaries in the tree, searched before the archives their markers name (like
    /// the runtime's `ROCM_KPACK_PATH_PREFIX`).
    pub archives: Vec<PathBuf>,
    /// Copy damaged fat binaries as they are instead of refusing to pack.
    pub copy_damaged: bool,
    /// Warnings are fatal: nothing is written when there is any.
    pub strict: bool,
}

impl PackOptions {
    /// Options with the defaults of the command line for `group` and `families`.
    pub fn new(group: &str, families: Families) -> PackOptions {
        PackOptions {
            group: group.into(),
            families,
            targets: Vec::new(),
            all: false,
            archive_per: ArchivePer::Target,
            layout: Layout::Combined,
            unassigned: Unassigned::Error,
            scheme: Scheme::ZstdPerKernel,
            level: crate::kpack::archive::DEFAULT_LEVEL,
            threads: 0,
            force: false,
            verify: true,
            archives: Vec::new(),
            copy_damaged: false,
            strict: false,
        }
    }
}

/// Running totals of a pack, folded from its events: what the batch progress line
/// and the TUI panes both show.
#[derive(Debug, Clone, Default)]
pub struct PackTally {
    /// Entries to process.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Files done.
    pub done: u64,
    /// Bytes of the files done.
    pub done_bytes: u64,
    /// Per worker: the file it is on and the phase.
    pub workers: BTreeMap<usize, (String, Phase)>,
    /// Per family: kernels and stored bytes so far.
    pub families: BTreeMap<String, (u64, u64)>,
    /// Warnings so far.
    pub warnings: Vec<String>,
    /// The finishing stage, once the files are done.
    pub stage: &'static str,
}

impl PackTally {
    /// Fold one event in.
    pub fn apply(&mut self, e: PackEvent) {
        match e {
            PackEvent::Started { files, bytes } => {
                self.files = files;
                self.bytes = bytes;
            }
            PackEvent::Phase {
                worker,
                path,
                phase,
                ..
            } => {
                self.workers.insert(worker, (path, phase));
            }
            PackEvent::FileDone { bytes_in, .. } => {
                self.done += 1;
                self.done_bytes += bytes_in;
            }
            PackEvent::Family {
                family,
                code_objects,
                stored,
            } => {
                self.families.insert(family, (code_objects, stored));
            }
            PackEvent::Warning(w) => self.warnings.push(w),
            PackEvent::Finishing(stage) => self.stage = stage,
        }
    }
}

/// How a plan's output size was projected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Projection {
    /// Not yet ([`estimate`] fills it in).
    #[default]
    None,
    /// Every kernel compressed: the archives' sizes are exact.
    Exact,
    /// Extrapolated from a sample of kernels.
    Estimate,
}

/// One kernel to archive.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PlannedKernel {
    /// `relpath#k`.
    pub key: String,
    /// Target ID (shared with the scan's, [`crate::intern::interned`]).
    pub arch: std::sync::Arc<str>,
    /// Uncompressed size.
    pub size: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One archive of a plan: a target ID (per-target archives) or a family.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ArchivePlan {
    /// The target ID, or the family's name.
    pub name: String,
    /// Archive path relative to the output; none when no kernel is for this family
    /// (no archive is written and markers do not name one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,
    /// The archive's `gfx_arches`: target IDs with code in the tree, and the union of
    /// any two compatible ones of a processor (see [`crate::kpack::alias`]).
    pub gfx_arches: Vec<String>,
    /// Code objects.
    pub code_objects: u64,
    /// TOC entries that list a kernel's frame again under another target a device
    /// may match first (no bytes stored twice).
    #[serde(skip_serializing_if = "is_zero")]
    pub toc_aliases: u64,
    /// Those entries.
    #[serde(skip)]
    pub aliases: Vec<crate::kpack::alias::Alias>,
    /// Raw bytes.
    pub raw_bytes: u64,
    /// Estimated archive size (from compressing a sample).
    pub estimated_bytes: u64,
    /// Kernel-database files of this family (split layout moves them to the overlay).
    pub database_files: u64,
}

/// A host-only binary of the input whose kernels are packed again from archives.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RepackedBinary {
    /// Relative path.
    pub path: String,
    /// Code objects found for it.
    pub code_objects: u64,
    /// Archives they come from (relative to the tree, or as given).
    pub archives: Vec<String>,
}

/// A file copied as it is, and why.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CopiedFile {
    /// Relative path.
    pub path: String,
    /// Why it is not packed.
    pub reason: String,
    /// A host-only binary (the ledger lists it as unpacked).
    #[serde(skip)]
    pub host_only: bool,
}

/// A scan diagnostic, as the plan reports it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PlanDiagnostic {
    /// Relative path.
    pub path: String,
    /// How bad.
    pub severity: crate::scan::Severity,
    /// What is wrong.
    pub message: String,
}

/// Where a planned kernel's bytes come from.
#[derive(Debug, Clone)]
pub(crate) enum KernelFrom {
    /// The binary's own `.hip_fatbin`.
    Bundle,
    /// An input archive (key in [`PackPlan::inputs`]).
    Archive(String),
}

/// A binary the pack writes host-only, with the kernels it takes from it.
#[derive(Debug, Clone)]
pub(crate) struct PlannedBinary {
    /// The name its kernels are keyed under in input archives (its path for fat
    /// binaries, its marker's `kernel_name` for host-only ones).
    pub kernel_name: String,
    /// Bundle indices (the wrappers' co_index values).
    pub bundles: Vec<u32>,
    /// (bundle, target, size, source) for every kernel of a selected family.
    pub kernels: Vec<(u32, std::sync::Arc<str>, u64, KernelFrom)>,
    /// (bundle, target, size) of kernels left out (unassigned, `--unassigned drop`).
    pub dropped: Vec<(u32, String, u64)>,
    /// Already host-only: its marker is replaced, its kernels come from archives.
    pub host_only: bool,
}

/// What a pack will do.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PackPlan {
    /// Input tree.
    pub tree: String,
    /// Output.
    pub output: String,
    /// Layout.
    pub layout: Layout,
    /// One archive per target or per family.
    pub archive_per: ArchivePer,
    /// The archives (units): one per target ID with code in the tree, or one per
    /// selected family.
    pub units: Vec<ArchivePlan>,
    /// Arch → number of kernels for archs no family takes.
    pub unassigned: BTreeMap<String, u64>,
    /// Fat binaries to rewrite.
    pub binaries: u64,
    /// Host-only binaries whose kernels are packed again from archives.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repacked: Vec<RepackedBinary>,
    /// Input archives whose kernels are packed again; they are not copied.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub consumed_archives: Vec<String>,
    /// Fat files copied unchanged (objects, archives, PE, damaged with
    /// `--copy-damaged`), and host-only binaries whose archives were not found.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub copied: Vec<CopiedFile>,
    /// Damaged files (scan errors); packing refuses unless `--copy-damaged`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub damaged: Vec<PlanDiagnostic>,
    /// Bytes of `.hip_fatbin` in the binaries (about what leaves them).
    pub fatbin_bytes: u64,
    /// Input bytes.
    pub input_bytes: u64,
    /// Projected output bytes (host files + archive estimates); 0 until estimated.
    pub projected_bytes: u64,
    /// Whether the projection is exact for the archives (every kernel compressed)
    /// or an estimate from a sample.
    pub projection: Projection,
    /// Problems found while scanning.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub diagnostics: Vec<PlanDiagnostic>,
    /// Things worth knowing found while planning (fatal with `--strict`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Target ID → unit index, for every target that is packed.
    #[serde(skip)]
    pub(crate) unit_of: BTreeMap<String, usize>,
    /// Binaries to write host-only, by path.
    #[serde(skip)]
    pub(crate) binaries_planned: BTreeMap<String, PlannedBinary>,
    /// Archives read by re-packing: tree-relative path (or the path as given).
    #[serde(skip)]
    pub(crate) inputs: Arc<crate::kpack::resolve::TreeArchives>,
    #[serde(skip)]
    pub(crate) report: Option<TreeReport>,
}

impl PackPlan {
    /// The kernels of each unit (by index), from the planned binaries in path order
    /// (built when asked: a pack keeps them per binary, not twice; #32).
    pub(crate) fn unit_kernels(&self) -> Vec<Vec<PlannedKernel>> {
        let mut out = vec![Vec::new(); self.units.len()];
        for (path, pb) in &self.binaries_planned {
            for k in &pb.kernels {
                if let Some(list) = self.unit_of.get(&*k.1).and_then(|&i| out.get_mut(i)) {
                    list.push(PlannedKernel {
                        key: format!("{path}#{}", k.0),
                        arch: k.1.clone(),
                        size: k.2,
                    });
                }
            }
        }
        out
    }
}

/// An archive a pack wrote.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WrittenArchive {
    /// Path relative to the output.
    pub path: String,
    /// The target ID or family it holds.
    pub unit: String,
    /// Code objects.
    pub code_objects: u64,
    /// Sum of their sizes.
    pub raw_bytes: u64,
    /// File size.
    pub bytes: u64,
}

/// A binary whose output is larger than its input would suggest: its device code was
/// stored compressed (CCOB) and compresses less per kernel.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Growth {
    /// Relative path.
    pub path: String,
    /// The binary's size.
    pub bytes_in: u64,
    /// Host-only binary plus the archived bytes of its kernels.
    pub bytes_out: u64,
    /// Why.
    pub reason: String,
}

/// What a pack did.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PackReport {
    /// The plan it carried out.
    pub plan: PackPlan,
    /// Archives written.
    pub archives: Vec<WrittenArchive>,
    /// Files by class: count (`packed_binary` for binaries written host-only).
    pub files: BTreeMap<String, u64>,
    /// Bytes read.
    pub bytes_in: u64,
    /// Bytes in the output.
    pub bytes_out: u64,
    /// Binaries whose packed form is larger than the input.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub grown: Vec<Growth>,
    /// Seconds.
    pub seconds: f64,
    /// Warnings.
    pub warnings: Vec<String>,
    /// Verification faults (empty when verified or not asked).
    pub verify_faults: Vec<String>,
    /// Whether verification ran.
    pub verified: bool,
    /// Code objects proved reachable with their recorded hashes by the verification.
    pub verified_code_objects: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_folds_events() {
        let mut t = PackTally::default();
        for e in [
            PackEvent::Started {
                files: 3,
                bytes: 300,
            },
            PackEvent::Phase {
                worker: 1,
                path: "a".into(),
                phase: Phase::Compress,
                bytes: 100,
            },
            PackEvent::FileDone {
                path: "a".into(),
                bytes_in: 100,
                bytes_out: 10,
            },
            PackEvent::FileDone {
                path: "b".into(),
                bytes_in: 50,
                bytes_out: 50,
            },
            PackEvent::Family {
                family: "gfx90X".into(),
                code_objects: 2,
                stored: 70,
            },
            PackEvent::Family {
                family: "gfx90X".into(),
                code_objects: 3,
                stored: 90,
            },
            PackEvent::Warning("w".into()),
            PackEvent::Finishing("verifying"),
        ] {
            t.apply(e);
        }
        assert_eq!((t.files, t.bytes, t.done, t.done_bytes), (3, 300, 2, 150));
        assert_eq!(t.families["gfx90X"], (3, 90));
        assert_eq!(t.workers[&1], ("a".to_string(), Phase::Compress));
        assert_eq!(t.warnings, vec!["w"]);
        assert_eq!(t.stage, "verifying");
    }
}
