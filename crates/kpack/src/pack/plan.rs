//! Planning a pack: what each file becomes, where each kernel comes from and goes,
//! and every reason to refuse, found before anything is written.

use super::files::{FilePlans, Inputs, plan_files};
use super::units::{Units, archive_rel, check_targets, check_unit_name};
use super::{
    ArchivePer, ArchivePlan, CopiedFile, KernelFrom, Layout, PackOptions, PackPlan, PlanDiagnostic,
    PlannedBinary, PlannedKernel,
};
use crate::error::{Error, Result};
use crate::fsutil;
use crate::kpack::ledger::LEDGER_PATH;
use crate::kpack::marker::Marker;
use crate::kpack::resolve::{GFXARCH, TreeArchives};
use crate::scan::{self, FileKind, FileReport, ScanOptions, Severity, TreeReport};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a file goes in the split layout, by what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Not arch-specific: the generic tree.
    Generic,
    /// A kernel-database file of a selected arch: that unit's overlay.
    Unit(usize),
    /// A kernel-database file of an arch nothing selected takes: left out.
    Unselected,
}

/// Where `f` goes in the split layout (see [`Place`]).
pub(crate) fn place_of(f: &FileReport, unit_of: &BTreeMap<String, usize>) -> Place {
    match f.arch.as_deref() {
        Some(a) if f.kind == FileKind::KernelDatabase => unit_of
            .get(a)
            .map_or(Place::Unselected, |&i| Place::Unit(i)),
        _ => Place::Generic,
    }
}

/// The marker a binary at `rel` gets: per target, the one pattern
/// `../.kpack/<group>_@GFXARCH@.kpack` (the same whatever is installed); per family,
/// one search path per archive written.
pub(crate) fn marker_for(rel: &str, group: &str, per: ArchivePer, units: &[ArchivePlan]) -> Marker {
    let depth = rel.matches('/').count();
    let up = "../".repeat(depth);
    Marker {
        kpack_search_paths: match per {
            ArchivePer::Target => vec![format!("{up}.kpack/{group}_{GFXARCH}.kpack")],
            ArchivePer::Family => units
                .iter()
                .filter(|f| f.archive.is_some())
                .map(|f| format!("{up}.kpack/{group}_{}.kpack", f.name))
                .collect(),
        },
        kernel_name: rel.to_string(),
    }
}

/// The ledger of a previous pack in `out` (combined or split layout), if any.
/// The ledger of a previous pack's output at `out`, if there is one that proves it:
/// it parses as a ledger, and the archives it lists are there (an empty or foreign
/// file named like a ledger does not make a directory `--force` may replace).
pub(crate) fn ledger_in(out: &Path) -> Option<PathBuf> {
    [out.to_path_buf(), out.join("generic")]
        .into_iter()
        .find_map(|root| {
            let (path, l) = crate::kpack::ledger::Ledger::read(&root).ok()??;
            // Archives sit at OUT/<path> (combined) or OUT/<unit>/<path> (split).
            let units: Vec<PathBuf> = std::fs::read_dir(out)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .collect();
            let there =
                |rel: &str| out.join(rel).is_file() || units.iter().any(|u| u.join(rel).is_file());
            l.archives.iter().all(|a| there(&a.path)).then_some(path)
        })
}

/// Compute what a pack will do (scans the tree, reads archive indexes; writes
/// nothing). Errors here are refusals: nothing was written.
pub fn plan_pack(tree: &Path, out: &Path, opts: &PackOptions) -> Result<PackPlan> {
    check_options(tree, out, opts)?;
    let report = scan::scan(
        tree,
        &ScanOptions {
            threads: opts.threads,
            ..Default::default()
        },
        &crate::event::NoEvents,
    )?;
    refuse_unreadable(&report)?;
    let mut warnings = Vec::new();
    let diagnostics: Vec<PlanDiagnostic> = report
        .diagnostics
        .iter()
        .map(|d| PlanDiagnostic {
            path: d.path.clone(),
            severity: d.severity,
            message: d.message.clone(),
        })
        .collect();
    let damaged: Vec<PlanDiagnostic> = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .cloned()
        .collect();
    let damaged_paths: BTreeSet<&str> = damaged.iter().map(|d| d.path.as_str()).collect();

    // Archives in the tree and those the user named, then what each file becomes.
    let inputs = Inputs::open(tree, &report, &damaged_paths, &opts.archives, &mut warnings)?;
    let mut files = plan_files(&report, &damaged_paths, &inputs, &mut warnings)?;
    // The units (archives): from every target with code in the tree.
    let archs: BTreeSet<&str> = files
        .planned
        .values()
        .flat_map(|pb| pb.kernels.iter().map(|k| &*k.1))
        .chain(
            report
                .files
                .iter()
                .filter(|f| f.kind == FileKind::KernelDatabase)
                .filter_map(|f| f.arch.as_deref()),
        )
        .collect();
    let units = Units::new(archs.iter().copied(), opts);
    for u in &units.names {
        check_unit_name(u)?;
    }
    let mut unassigned: BTreeMap<String, u64> = BTreeMap::new();
    let db_files = database_files(&report, &units, opts, &mut unassigned);
    let kernels = assign_kernels(&mut files.planned, &units, &mut unassigned);
    copy_damaged(&report, &damaged, &mut files.copied, &mut warnings);
    if !damaged.is_empty() && !opts.copy_damaged {
        let list: Vec<String> = damaged
            .iter()
            .map(|d| format!("{}: {}", d.path, d.message))
            .collect();
        return Err(Error::Damaged {
            path: tree.to_path_buf(),
            what: format!(
                "the scan found {} damaged file(s); pass --copy-damaged to copy them as they \
                 are:\n  {}",
                damaged.len(),
                list.join("\n  ")
            ),
        });
    }
    // Input archives: consumed ones are packed again, never copied; any other whose
    // name an output archive takes would be lost.
    for (i, name) in units.names.iter().enumerate() {
        let out_rel = archive_rel(opts, name);
        if kernels[i].is_empty() {
            continue;
        }
        if inputs.in_tree.contains(&out_rel) && !files.consumed.contains(&out_rel) {
            return Err(Error::Conflict(format!(
                "the input archive {out_rel} would be replaced by the output archive of the \
                 same name, and no binary in the tree uses its kernels; move it out of the \
                 tree or choose another --group"
            )));
        }
    }
    warn_orphans(&report, &files, &inputs, &mut warnings);
    let unit_plans = unit_plans(&units, &kernels, &db_files, opts);
    warn_empty_selection(&unit_plans, &units, opts, &mut warnings);
    if unit_plans.iter().all(|f| f.archive.is_none()) && !files.planned.is_empty() {
        return Err(Error::NothingToDo(
            "no code object in the tree is for a selected target; nothing to pack".into(),
        ));
    }
    Ok(PackPlan {
        tree: tree.display().to_string(),
        output: out.display().to_string(),
        layout: opts.layout,
        archive_per: opts.archive_per,
        units: unit_plans,
        unassigned,
        binaries: files.binaries,
        repacked: files.repacked,
        consumed_archives: files.consumed.into_iter().collect(),
        copied: files.copied,
        damaged,
        fatbin_bytes: files.fatbin_bytes,
        input_bytes: report.totals.bytes,
        projected_bytes: 0,
        projection: super::Projection::None,
        diagnostics,
        warnings,
        unit_of: units.of,
        binaries_planned: files.planned,
        inputs: Arc::new(inputs.archives),
        report: Some(report),
    })
}

/// The options make a pack: a group usable in a file name, something selected,
/// known targets, an output apart from the tree, and a tree that is a directory.
fn check_options(tree: &Path, out: &Path, opts: &PackOptions) -> Result<()> {
    if opts.group.is_empty() || opts.group.contains(['/', '\\', '\0']) {
        return Err(Error::Usage(format!(
            "group name {:?} cannot be used in a file name",
            opts.group
        )));
    }
    if opts.families.0.is_empty() && opts.targets.is_empty() && !opts.all {
        return Err(Error::Usage(
            "choose what to pack: --family, --target or --all".into(),
        ));
    }
    check_targets(&opts.targets)?;
    // Through symlinks and `..`, also in the parts of OUT that do not exist yet.
    crate::fsutil::check_apart(tree, out)?;
    if !std::fs::metadata(tree).map(|m| m.is_dir()).unwrap_or(false) {
        return Err(Error::Usage(format!(
            "{} is not a directory",
            tree.display()
        )));
    }
    Ok(())
}

/// Paths that cannot even be read (a directory that does not list, a name too long
/// for the file system): no copy can be made of them, so --copy-damaged is no way
/// out; say what they are, before anything else.
fn refuse_unreadable(report: &TreeReport) -> Result<()> {
    let unreadable: Vec<String> = report
        .diagnostics
        .iter()
        .filter(|d| d.unreadable)
        .map(|d| format!("{}: {}", shorten(&d.path), shorten(&d.message)))
        .collect();
    if unreadable.is_empty() {
        return Ok(());
    }
    Err(Error::Damaged {
        path: PathBuf::from(&report.root),
        what: format!(
            "{} path(s) of the tree cannot be read or named exactly, so nothing of them \
             can be packed or copied (permissions, a directory nested past what the file \
             system can name, a name that is not UTF-8?); nothing written:\n  {}",
            unreadable.len(),
            unreadable.join("\n  ")
        ),
    })
}

/// Kernel-database files per unit; in the split layout, those of targets nothing
/// selected are counted as left out.
fn database_files(
    report: &TreeReport,
    units: &Units,
    opts: &PackOptions,
    unassigned: &mut BTreeMap<String, u64>,
) -> Vec<u64> {
    let mut db_files = vec![0u64; units.names.len()];
    for f in &report.files {
        match place_of(f, &units.of) {
            Place::Unit(i) => db_files[i] += 1,
            Place::Unselected if opts.layout == Layout::Split => {
                *unassigned
                    .entry(format!(
                        "{} (kernel database)",
                        f.arch.clone().unwrap_or_default()
                    ))
                    .or_default() += 1;
            }
            _ => {}
        }
    }
    db_files
}

/// Assign every kernel to its unit, or to what is left out (the binary's dropped
/// ones): the kernels of each unit.
fn assign_kernels(
    planned: &mut BTreeMap<String, PlannedBinary>,
    units: &Units,
    unassigned: &mut BTreeMap<String, u64>,
) -> Vec<Vec<PlannedKernel>> {
    let mut kernels: Vec<Vec<PlannedKernel>> = vec![Vec::new(); units.names.len()];
    for (path, pb) in planned.iter_mut() {
        let mut keep = Vec::with_capacity(pb.kernels.len());
        for k in pb.kernels.drain(..) {
            match units.of.get(&*k.1) {
                Some(&i) => {
                    kernels[i].push(PlannedKernel {
                        key: format!("{path}#{}", k.0),
                        arch: k.1.clone(),
                        size: k.2,
                    });
                    keep.push(k);
                }
                None => {
                    *unassigned.entry(k.1.to_string()).or_default() += 1;
                    pb.dropped.push((k.0, k.1.to_string(), k.2));
                }
            }
        }
        pb.kernels = keep;
    }
    kernels
}

/// Every damaged file not copied yet is copied as it is (with `--copy-damaged`).
fn copy_damaged(
    report: &TreeReport,
    damaged: &[PlanDiagnostic],
    copied: &mut Vec<CopiedFile>,
    warnings: &mut Vec<String>,
) {
    for d in damaged {
        if !copied.iter().any(|c| c.path == d.path) {
            warnings.push(format!(
                "{}: damaged ({}), copied as it is (--copy-damaged)",
                d.path, d.message
            ));
            let host_only = (report.files.iter())
                .any(|f| f.path == d.path && f.kind == FileKind::HostOnlyBinary);
            copied.push(CopiedFile {
                path: d.path.clone(),
                reason: "damaged (--copy-damaged): copied as it is".into(),
                host_only,
            });
        }
    }
}

/// Code objects of the consumed archives that no binary of the tree uses (by its
/// path or its marker's name) are not carried over: said once per archive.
fn warn_orphans(
    report: &TreeReport,
    files: &FilePlans,
    inputs: &Inputs,
    warnings: &mut Vec<String>,
) {
    let claimed: BTreeSet<String> = files
        .planned
        .iter()
        .filter(|(_, b)| b.host_only)
        .flat_map(|(path, b)| b.bundles.iter().map(move |co| format!("{path}#{co}")))
        .collect();
    let names: BTreeSet<String> = report
        .files
        .iter()
        .filter_map(|f| f.marker.as_ref().map(|m| (f, m)))
        .flat_map(|(f, m)| {
            f.wrappers
                .iter()
                .map(move |w| format!("{}#{}", m.kernel_name, w.reserved & 0xffff_ffff))
        })
        .collect();
    for p in &files.consumed {
        let a = &inputs.archives[p];
        let orphans = a
            .index
            .kernels
            .iter()
            .filter(|e| !names.contains(&*e.key) && !claimed.contains(&*e.key))
            .count();
        if orphans > 0 {
            warnings.push(format!(
                "{p}: {orphans} code object(s) belong to no binary in the tree and are not carried over"
            ));
        }
    }
}

/// Each unit's archive: its targets (with the TOC aliases every loader resolves),
/// code objects and raw size.
fn unit_plans(
    units: &Units,
    kernels: &[Vec<PlannedKernel>],
    db_files: &[u64],
    opts: &PackOptions,
) -> Vec<ArchivePlan> {
    units
        .names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            // Every target a device may match first lists the code the newest loader
            // would pick (TOC aliases): first-match loaders resolve it too.
            let (mut gfx_arches, aliases) =
                crate::kpack::alias::plan(kernels[i].iter().map(|k| (k.key.as_str(), &*k.arch)));
            gfx_arches.sort_by(|a, b| super::units::target_order(a, b));
            ArchivePlan {
                name: name.clone(),
                archive: (!kernels[i].is_empty()).then(|| archive_rel(opts, name)),
                gfx_arches,
                code_objects: kernels[i].len() as u64,
                toc_aliases: aliases.len() as u64,
                aliases,
                raw_bytes: kernels[i].iter().map(|k| k.size).sum(),
                estimated_bytes: 0,
                database_files: db_files[i],
            }
        })
        .collect()
}

/// Families and targets the user selected that receive no code object.
fn warn_empty_selection(
    unit_plans: &[ArchivePlan],
    units: &Units,
    opts: &PackOptions,
    warnings: &mut Vec<String>,
) {
    for f in unit_plans
        .iter()
        .filter(|f| f.archive.is_none() && f.database_files == 0)
    {
        warnings.push(format!(
            "family {} receives no code object: no archive is written and no marker names one",
            f.name
        ));
    }
    if opts.archive_per == ArchivePer::Target {
        for f in &opts.families.0 {
            if !units.of.keys().any(|a| f.contains(a)) {
                warnings.push(format!(
                    "family {} receives no code object: no target of it has code in the tree",
                    f.name
                ));
            }
        }
    }
    for t in &opts.targets {
        if !units
            .of
            .keys()
            .any(|a| a == t || (!t.contains(':') && a.split(':').next() == Some(t)))
        {
            warnings.push(format!("target {t} has no code in the tree"));
        }
    }
}

/// Largest sample of device code compressed for an estimate.
const SAMPLE_BYTES: u64 = 32 << 20;

/// A kernel as the estimate sees it: key, arch, raw size, stored size, TOC metadata.
type Projected = (String, String, u64, u64, BTreeMap<String, String>);

/// The `target` metadata the archive records for a kernel.
fn target_meta(triple: Option<&str>, arch: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert(
        "target".to_string(),
        triple.map_or_else(
            || format!("hipv4-amdgcn-amd-amdhsa--{arch}"),
            str::to_string,
        ),
    );
    m
}

/// Compress the kernels of one planned binary: (key, arch, raw, stored, metadata).
fn sample_binary(
    map: &[u8],
    path: &str,
    pb: &PlannedBinary,
    inputs: &TreeArchives,
    opts: &PackOptions,
) -> Vec<Projected> {
    let mut out = Vec::new();
    let mut push = |co: u32, arch: &str, bytes: &[u8], triple: Option<&str>| {
        if let Ok(z) = crate::kpack::archive::encode_kernel(bytes, opts.scheme, opts.level) {
            out.push((
                format!("{path}#{co}"),
                arch.to_string(),
                bytes.len() as u64,
                z.len() as u64,
                target_meta(triple, arch),
            ));
        }
    };
    if pb.host_only {
        for (co, arch, _, from) in &pb.kernels {
            let KernelFrom::Archive(p) = from else {
                continue;
            };
            let Some(a) = inputs.get(p) else { continue };
            let key = format!("{}#{co}", pb.kernel_name);
            if let Some(e) = a.entry(&key, arch)
                && let Ok(b) = a.kernel(e)
            {
                push(*co, arch, &b, e.metadata.get("target"));
            }
        }
        return out;
    }
    let Ok(Some(fat)) = crate::fatbin::read(map) else {
        return out;
    };
    let sec = fat.section;
    let wanted: BTreeSet<(u32, &str)> = pb.kernels.iter().map(|k| (k.0, &*k.1)).collect();
    for b in &fat.bundles {
        let Ok(un) = b.uncompressed(sec, 1 << 34) else {
            continue;
        };
        for (e, bytes) in b.code_objects(&un).unwrap_or_default() {
            if let Some(arch) = e.id.arch()
                && wanted.contains(&(b.index as u32, arch.as_str()))
            {
                push(b.index as u32, &arch, bytes, Some(&e.id.triple));
            }
        }
    }
    out
}

/// Fill in the size projection. When the device code to pack is at most 32 MiB every
/// kernel is compressed and the projection is exact (archives laid out as the writer
/// lays them out, host-only binaries by planning their rewrite, the ledger by
/// building it); above that, binaries are sampled evenly up to about 32 MiB and the
/// rest is scaled by each family's measured ratio (`projection` says `estimate`).
pub fn estimate(plan: &mut PackPlan, tree: &Path, opts: &PackOptions) {
    use rayon::prelude::*;
    let total_raw: u64 = plan.units.iter().map(|f| f.raw_bytes).sum();
    let exact = total_raw <= SAMPLE_BYTES;
    let paths: Vec<&String> = plan.binaries_planned.keys().collect();
    let stride = if exact {
        1
    } else {
        (total_raw / SAMPLE_BYTES).max(1) as usize + 1
    };
    let inputs = plan.inputs.clone();
    let units = plan.units.clone();
    // Per binary: its host-only size, and the kernels compressed.
    let results: Vec<(u64, Vec<Projected>)> = paths
        .par_iter()
        .enumerate()
        .map(|(i, path)| {
            let pb = &plan.binaries_planned[*path];
            let Ok(Some(map)) = fsutil::map_file(&tree.join(crate::relpath::to_path(path))) else {
                return (0, Vec::new());
            };
            let marker = marker_for(path, &opts.group, plan.archive_per, &units);
            let host = if pb.host_only {
                crate::fatbin::replace_marker(&map, &marker)
                    .map(|b| b.len() as u64)
                    .unwrap_or(map.len() as u64)
            } else {
                crate::fatbin::rewrite_host_only(&map, &marker)
                    .map(|b| b.len() as u64)
                    .unwrap_or(map.len() as u64)
            };
            if i % stride != 0 {
                return (host, Vec::new());
            }
            (host, sample_binary(&map, path, pb, &inputs, opts))
        })
        .collect();
    let host_written: u64 = results.iter().map(|r| r.0).sum();
    let mut by_kernel: BTreeMap<(String, String), Projected> = BTreeMap::new();
    for (_, s) in results {
        for p in s {
            by_kernel.insert((p.0.clone(), p.1.clone()), p);
        }
    }
    let unit_kernels = plan.unit_kernels();
    for (i, fp) in plan.units.iter_mut().enumerate() {
        if fp.archive.is_none() {
            fp.estimated_bytes = 0;
            continue;
        }
        let ks = &unit_kernels[i];
        let (raw, z): (u64, u64) = ks
            .iter()
            .filter_map(|k| by_kernel.get(&(k.key.clone(), k.arch.to_string())))
            .fold((0, 0), |(r, c), p| (r + p.2, c + p.3));
        let ratio = if raw == 0 {
            0.35
        } else {
            z as f64 / raw as f64
        };
        let projected = ks.iter().map(|k| {
            by_kernel
                .get(&(k.key.clone(), k.arch.to_string()))
                .cloned()
                .unwrap_or_else(|| {
                    (
                        k.key.clone(),
                        k.arch.to_string(),
                        k.size,
                        (k.size as f64 * ratio) as u64,
                        target_meta(None, &k.arch),
                    )
                })
        });
        let meta = crate::kpack::ArchiveMeta {
            group_name: opts.group.clone(),
            gfx_arch_family: fp.name.clone(),
            gfx_arches: fp.gfx_arches.clone(),
        };
        fp.estimated_bytes =
            crate::kpack::archive::archive_size(&meta, opts.scheme, projected, &fp.aliases);
    }
    let archives: u64 = plan.units.iter().map(|f| f.estimated_bytes).sum();
    // Binaries are replaced by their host-only forms; consumed archives and a previous
    // ledger leave; kernel-database files of no family leave the split layout.
    let files = plan
        .report
        .as_ref()
        .map(|r| r.files.as_slice())
        .unwrap_or_default();
    let leaving: u64 = files
        .iter()
        .filter(|f| {
            plan.binaries_planned.contains_key(&f.path)
                || plan.consumed_archives.contains(&f.path)
                || f.path == LEDGER_PATH
                || (opts.layout == Layout::Split && place_of(f, &plan.unit_of) == Place::Unselected)
        })
        .map(|f| f.size)
        .sum();
    plan.projected_bytes = plan.input_bytes.saturating_sub(leaving)
        + host_written
        + archives
        + super::record::ledger_size(plan, opts);
    plan.projection = if exact {
        super::Projection::Exact
    } else {
        super::Projection::Estimate
    };
}

/// A path of at most about 160 characters: its start and end, `…` between (a path
/// 30,000 directories deep is not printed whole).
fn shorten(p: &str) -> String {
    let n = p.chars().count();
    if n <= 160 {
        return p.to_string();
    }
    let head: String = p.chars().take(60).collect();
    let tail: String = p.chars().skip(n - 96).collect();
    format!("{head}…{tail} ({n} characters)")
}
