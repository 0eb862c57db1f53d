//! `pack` and `verify TREE` in batch mode: progress on stderr, summary on stdout.

use super::progress::PackProgress;
use super::{EXIT_FINDINGS, EXIT_OK, pct, size, write_json};
use super::{Format, Output};
use anyhow::Result;
use kpack::event::CancelToken;
use kpack::kpack::resolve::Loader;
use kpack::pack::{self, Layout, PackOptions, PackPlan};
use std::io::Write;
use std::path::Path;

fn print_plan(out: &mut dyn Write, plan: &PackPlan) -> std::io::Result<()> {
    writeln!(
        out,
        "plan: {} -> {} ({:?} layout)",
        plan.tree, plan.output, plan.layout
    )?;
    writeln!(
        out,
        "  {} binaries to rewrite, {} of fat-binary sections in them",
        plan.binaries,
        size(plan.fatbin_bytes)
    )?;
    if !plan.repacked.is_empty() {
        let kernels: u64 = plan.repacked.iter().map(|r| r.code_objects).sum();
        writeln!(
            out,
            "  {} host-only binaries packed again from their archives ({kernels} code objects from {})",
            plan.repacked.len(),
            plan.consumed_archives.join(", ")
        )?;
    }
    let approx = if plan.projection == pack::Projection::Exact {
        ""
    } else {
        "~"
    };
    for f in &plan.units {
        writeln!(
            out,
            "  {:<14} {:<40} {:>5} {:<12}  {:>11} raw  {approx}{:>11}  arches {}{}",
            f.name,
            f.archive
                .as_deref()
                .unwrap_or("(no archive: no code object)"),
            f.code_objects,
            plural(f.code_objects, "code object", "code objects"),
            size(f.raw_bytes),
            size(f.estimated_bytes),
            f.gfx_arches.join(" "),
            if f.database_files > 0 {
                format!("  (+{} kernel-database files)", f.database_files)
            } else {
                String::new()
            }
        )?;
    }
    if !plan.unassigned.is_empty() {
        let list: Vec<String> = plan
            .unassigned
            .iter()
            .map(|(a, n)| format!("{a} ({n})"))
            .collect();
        writeln!(out, "  unassigned: {}", list.join(", "))?;
    }
    for c in &plan.copied {
        writeln!(out, "  copied as it is: {} ({})", c.path, c.reason)?;
    }
    for w in &plan.warnings {
        writeln!(out, "  warning: {w}")?;
    }
    let what = match plan.projection {
        pack::Projection::Exact => {
            "projected output (archives exact: every code object compressed)"
        }
        _ => "projected output (archives estimated from a sample)",
    };
    writeln!(
        out,
        "  input {} -> {what} {approx}{} ({})",
        size(plan.input_bytes),
        size(plan.projected_bytes),
        pct(plan.projected_bytes, plan.input_bytes)
    )
}

/// `1 kernel`, `2 kernels`.
pub fn plural(n: u64, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

/// `kpack-tui pack TREE -o OUTPUT` (`dry_run`: the plan and the estimate only).
pub fn run(
    tree: &Path,
    output: &Path,
    dry_run: bool,
    opts: &PackOptions,
    how: &Output,
) -> Result<i32> {
    // Ctrl-C stops the pack cleanly: the staging directory is removed, nothing
    // appears at OUT. The handler is installed before any work, so a signal during
    // the scan cancels too instead of killing the process half-way.
    let cancel = CancelToken::new();
    if !dry_run {
        super::cancel_on_signals(&cancel)?;
    }
    let mut plan = pack::plan_pack(tree, output, opts)?;
    if cancel.is_cancelled() {
        return Err(kpack::Error::Cancelled.into());
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if dry_run {
        pack::estimate(&mut plan, tree, opts);
        if how.format.is_json() {
            write_json(&mut out, "kpack-tui.pack-plan/2", &plan)?;
        } else {
            print_plan(&mut out, &plan)?;
        }
        out.flush()?;
        // The status the real run would end with.
        pack::check_plan(&plan, output, opts)?;
        return Ok(EXIT_OK);
    }
    let progress = PackProgress::new("packing");
    let report = pack::execute_pack(plan, tree, output, opts, &progress, &cancel);
    progress.clear();
    let report = report?;
    if how.format.is_json() {
        write_json(&mut out, "kpack-tui.pack/2", &report)?;
        return Ok(EXIT_OK);
    }
    writeln!(
        out,
        "packed {} -> {} in {:.2} s ({}/s)",
        report.plan.tree,
        report.plan.output,
        report.seconds,
        size((report.bytes_in as f64 / report.seconds.max(0.001)) as u64)
    )?;
    let files: Vec<String> = report
        .files
        .iter()
        .map(|(k, n)| format!("{n} {}", k.replace('_', " ")))
        .collect();
    writeln!(out, "  files: {}", files.join(", "))?;
    writeln!(
        out,
        "  bytes: {} -> {} ({}){}",
        size(report.bytes_in),
        size(report.bytes_out),
        pct(report.bytes_out, report.bytes_in),
        if report.archives.is_empty() {
            "  - nothing to pack: no selected device code, the tree was copied (with the ledger)"
        } else if report.bytes_out > report.bytes_in {
            "  - the output is LARGER than the input"
        } else {
            ""
        }
    )?;
    for a in &report.archives {
        writeln!(
            out,
            "  archive {}: {} {}, {} ({} raw, {:.2}×)",
            a.path,
            a.code_objects,
            plural(a.code_objects, "code object", "code objects"),
            size(a.bytes),
            size(a.raw_bytes),
            a.raw_bytes as f64 / a.bytes.max(1) as f64
        )?;
    }
    if !report.grown.is_empty() {
        let extra: u64 = report
            .grown
            .iter()
            .map(|g| g.bytes_out.saturating_sub(g.bytes_in))
            .sum();
        writeln!(
            out,
            "  {} {} grew by {} in all (host-only binary + its archived code objects vs the fat binary){}",
            report.grown.len(),
            plural(report.grown.len() as u64, "binary", "binaries"),
            size(extra),
            if how.long { ":" } else { "; --long lists them" }
        )?;
        if how.long {
            for g in &report.grown {
                writeln!(
                    out,
                    "    {}: {} -> {}: {}",
                    g.path,
                    size(g.bytes_in),
                    size(g.bytes_out),
                    g.reason
                )?;
            }
        }
    }
    if !report.plan.unassigned.is_empty() {
        let list: Vec<String> = report
            .plan
            .unassigned
            .iter()
            .map(|(a, n)| format!("{a} ({n})"))
            .collect();
        writeln!(
            out,
            "  dropped (not selected by --family, --target or --all): {}",
            list.join(", ")
        )?;
    }
    writeln!(
        out,
        "  verify: {}",
        if report.verified {
            format!(
                "sound ({} {} proved reachable with {} recorded {})",
                report.verified_code_objects,
                plural(report.verified_code_objects, "code object", "code objects"),
                plural(report.verified_code_objects, "its", "their"),
                plural(report.verified_code_objects, "hash", "hashes")
            )
        } else {
            "skipped (--no-verify)".into()
        }
    )?;
    if !report.warnings.is_empty() {
        writeln!(out, "  warnings: {}", report.warnings.len())?;
    }
    Ok(EXIT_OK)
}

/// The layout of a packed tree: split when it has `generic/` and no `.kpack/`.
fn layout_of(root: &Path) -> Layout {
    if root.join("generic").is_dir() && !root.join(".kpack").exists() {
        Layout::Split
    } else {
        Layout::Combined
    }
}

/// `verify --device --json`: one verdict per device asked about.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct VerifyDeviceJson<'a> {
    /// The tree verified.
    pub path: String,
    /// Every device finds every code object it needs.
    pub sound: bool,
    /// Per device.
    pub devices: &'a [pack::DeviceVerdict],
}

/// What `verify TREE` found at the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum VerifiedKind {
    /// An install tree (or a pack's output).
    Tree,
    /// The artifact directories of `split` or `combine`, checked where they lie.
    Artifacts,
}

/// `verify TREE --json`.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct VerifyTreeJson<'a> {
    /// The tree verified.
    pub path: String,
    /// What it is.
    pub kind: VerifiedKind,
    /// No fault.
    pub sound: bool,
    /// The verdict.
    #[serde(flatten)]
    pub verdict: &'a pack::TreeVerdict,
}

/// `kpack-tui verify TREE --device ISA...`: 0 when every bundle of every binary loads
/// on every device, 1 with what would not.
pub fn verify_devices(
    root: &Path,
    devices: &[String],
    loaders: &[Loader],
    format: Format,
    out: &mut dyn Write,
) -> Result<i32> {
    let layout = layout_of(root);
    let verdicts: Vec<pack::DeviceVerdict> = devices
        .iter()
        .map(|d| pack::verify_device(root, layout, d, loaders))
        .collect::<std::result::Result<_, _>>()?;
    let ok = verdicts.iter().all(|v| v.missing.is_empty());
    if format.is_json() {
        write_json(
            out,
            "kpack-tui.verify-device/1",
            &VerifyDeviceJson {
                path: root.display().to_string(),
                sound: ok,
                devices: &verdicts,
            },
        )?;
    } else {
        for v in &verdicts {
            if v.missing.is_empty() {
                writeln!(
                    out,
                    "{}: on {} every bundle of every binary loads ({} found; the runtime asks for {})",
                    root.display(),
                    v.device,
                    v.found.len(),
                    v.arch_list.join(", ")
                )?;
            } else {
                writeln!(
                    out,
                    "{}: on {} {} of {} bundles would not load (the runtime asks for {}):",
                    root.display(),
                    v.device,
                    v.unloadable,
                    v.unloadable + v.found.len() as u64,
                    v.arch_list.join(", ")
                )?;
                for m in &v.missing {
                    writeln!(out, "  {m}")?;
                }
            }
        }
    }
    Ok(if ok { EXIT_OK } else { EXIT_FINDINGS })
}

/// `kpack-tui verify TREE`.
pub fn verify(root: &Path, loaders: &[Loader], format: Format, out: &mut dyn Write) -> Result<i32> {
    let layout = layout_of(root);
    // The artifacts of split or combine are checked where they lie, as flattening
    // them would install them.
    let kind = if layout == Layout::Combined
        && !root.join(".kpack").exists()
        && !pack::installed::artifact_dirs(root).is_empty()
    {
        VerifiedKind::Artifacts
    } else {
        VerifiedKind::Tree
    };
    let verdict = pack::verify_tree(root, None, layout, loaders);
    let sound = verdict.faults.is_empty();
    let code = if sound { EXIT_OK } else { EXIT_FINDINGS };
    if format.is_json() {
        write_json(
            out,
            "kpack-tui.verify-tree/1",
            &VerifyTreeJson {
                path: root.display().to_string(),
                kind,
                sound,
                verdict: &verdict,
            },
        )?;
        return Ok(code);
    }
    for n in &verdict.notes {
        writeln!(out, "note: {n}")?;
    }
    for u in &verdict.unproven {
        writeln!(out, "not proven: {u}")?;
    }
    if sound {
        let how = match &verdict.ledger {
            Some(l) => format!(
                "every code object of the ledger ({l}) resolves through the runtime's lookup to its \
                 recorded bytes: {} {}{}",
                verdict.proved,
                plural(verdict.proved, "code object", "code objects"),
                if verdict.proved_files > 0 {
                    format!(
                        ", and {} kernel-database {} byte-identical",
                        verdict.proved_files,
                        plural(verdict.proved_files, "file", "files")
                    )
                } else {
                    String::new()
                }
            ),
            None => format!(
                "archives verified; {} {} found through the markers (without a ledger, \
                 missing code objects cannot be detected)",
                verdict.proved,
                plural(verdict.proved, "code object", "code objects")
            ),
        };
        writeln!(out, "{}: sound ({how})", root.display())?;
    } else {
        writeln!(
            out,
            "{}: {} {}",
            root.display(),
            verdict.faults.len(),
            plural(verdict.faults.len() as u64, "fault", "faults")
        )?;
        for f in &verdict.faults {
            writeln!(out, "  {f}")?;
        }
    }
    Ok(code)
}
