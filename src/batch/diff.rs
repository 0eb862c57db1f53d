//! `diff` in batch mode: tables, CSV or JSON on stdout; the growth gate's verdict on
//! stderr and in the exit status.

use super::{EXIT_FINDINGS, EXIT_OK, Format, size, write_json};
use crate::text::csv_field;
use crate::text::signed;
use anyhow::{Context, Result};
use kpack::diff::{Budget, Change, DiffOptions, DiffReport, diff, gate};
use std::io::Write;
use std::path::Path;

/// Which table to print (`--by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// Every table.
    All,
    /// Per target.
    Target,
    /// Per file.
    File,
    /// Per kernel.
    Kernel,
    /// Per class of file.
    Class,
}

fn csv(out: &mut dyn Write, r: &DiffReport, by: Table) -> std::io::Result<()> {
    match by {
        Table::All | Table::Target => {
            writeln!(
                out,
                "target,old_raw,new_raw,old_stored,new_stored,old_code_objects,new_code_objects"
            )?;
            for t in &r.targets {
                writeln!(
                    out,
                    "{},{},{},{},{},{},{}",
                    csv_field(&t.target),
                    t.old_bytes,
                    t.new_bytes,
                    t.old_stored,
                    t.new_stored,
                    t.old_code_objects,
                    t.new_code_objects
                )?;
            }
        }
        Table::File => {
            writeln!(
                out,
                "path,old_path,change,old_size,new_size,old_device_raw,new_device_raw"
            )?;
            for f in &r.files {
                writeln!(
                    out,
                    "{},{},{},{},{},{},{}",
                    csv_field(&f.path),
                    csv_field(f.old_path.as_deref().unwrap_or("")),
                    change_name(f.change),
                    f.old_size,
                    f.new_size,
                    f.old_device_raw,
                    f.new_device_raw
                )?;
            }
        }
        Table::Kernel => {
            writeln!(out, "binary,target,name,demangled,old_size,new_size")?;
            for k in &r.kernels {
                let n = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
                writeln!(
                    out,
                    "{},{},{},{},{},{}",
                    csv_field(&k.binary),
                    csv_field(&k.target),
                    csv_field(&k.name),
                    csv_field(k.demangled.as_deref().unwrap_or("")),
                    n(k.old_size),
                    n(k.new_size)
                )?;
            }
        }
        Table::Class => {
            writeln!(out, "class,old_count,new_count,old_bytes,new_bytes")?;
            for c in &r.classes {
                writeln!(
                    out,
                    "{},{},{},{},{}",
                    c.class, c.old_count, c.new_count, c.old_bytes, c.new_bytes
                )?;
            }
        }
    }
    Ok(())
}

fn change_name(c: Change) -> &'static str {
    match c {
        Change::Added => "added",
        Change::Removed => "removed",
        Change::Grown => "grown",
        Change::Shrunk => "shrunk",
        Change::Same => "same",
    }
}

fn text(out: &mut dyn Write, r: &DiffReport, by: Table, top: usize) -> std::io::Result<()> {
    let take = |n: usize| if top == 0 { n } else { top.min(n) };
    writeln!(out, "{} -> {}", r.old.display(), r.new.display())?;
    writeln!(
        out,
        "device code: {} -> {} raw ({}, {}); {} -> {} stored",
        size(r.old_device_raw),
        size(r.new_device_raw),
        signed(r.old_device_raw, r.new_device_raw),
        crate::text::delta_pct(r.old_device_raw, r.new_device_raw),
        size(r.targets.iter().map(|t| t.old_stored).sum()),
        size(r.targets.iter().map(|t| t.new_stored).sum()),
    )?;
    let count = |c: Change| r.files.iter().filter(|f| f.change == c).count();
    writeln!(
        out,
        "files: {} added, {} removed, {} grown, {} shrunk",
        count(Change::Added),
        count(Change::Removed),
        count(Change::Grown),
        count(Change::Shrunk)
    )?;
    let all = by == Table::All;
    if all || by == Table::Target {
        writeln!(out)?;
        writeln!(
            out,
            "{:<16} {:>12} {:>12} {:>12} {:>8}",
            "target (raw)", "old", "new", "delta", ""
        )?;
        for t in &r.targets {
            writeln!(
                out,
                "{:<16} {:>12} {:>12} {:>12} {:>8}",
                t.target,
                size(t.old_bytes),
                size(t.new_bytes),
                signed(t.old_bytes, t.new_bytes),
                crate::text::delta_pct(t.old_bytes, t.new_bytes)
            )?;
        }
    }
    if (all || by == Table::File) && !r.files.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "files (largest change first; size, then raw device code)"
        )?;
        for f in &r.files[..take(r.files.len())] {
            let mark = match f.change {
                Change::Added => '+',
                Change::Removed => '-',
                Change::Grown => '>',
                Change::Shrunk => '<',
                Change::Same => '=',
            };
            let was = f
                .old_path
                .as_deref()
                .map(|p| format!(" (was {p})"))
                .unwrap_or_default();
            writeln!(
                out,
                "  {mark} {}{was}: {} -> {} ({}), device code {} -> {} ({})",
                f.path,
                size(f.old_size),
                size(f.new_size),
                signed(f.old_size, f.new_size),
                size(f.old_device_raw),
                size(f.new_device_raw),
                signed(f.old_device_raw, f.new_device_raw)
            )?;
        }
        if take(r.files.len()) < r.files.len() {
            writeln!(
                out,
                "  … and {} more (--top 0 shows all)",
                r.files.len() - take(r.files.len())
            )?;
        }
    }
    if (all || by == Table::Kernel) && !r.kernels.is_empty() {
        writeln!(out)?;
        writeln!(out, "kernels (largest change first)")?;
        for k in &r.kernels[..take(r.kernels.len())] {
            let mark = match (k.old_size, k.new_size) {
                (None, _) => '+',
                (_, None) => '-',
                _ => '~',
            };
            writeln!(
                out,
                "  {mark} {:>10}  {:<14} {}  {}",
                signed(k.old_size.unwrap_or(0), k.new_size.unwrap_or(0)),
                k.target,
                k.binary,
                k.demangled.as_deref().unwrap_or(&k.name)
            )?;
        }
        if take(r.kernels.len()) < r.kernels.len() {
            writeln!(
                out,
                "  … and {} more (--top 0 shows all)",
                r.kernels.len() - take(r.kernels.len())
            )?;
        }
    }
    if all || by == Table::Class {
        writeln!(out)?;
        writeln!(
            out,
            "{:<18} {:>7} {:>7} {:>12} {:>12}",
            "class", "old", "new", "old bytes", "new bytes"
        )?;
        for c in &r.classes {
            writeln!(
                out,
                "{:<18} {:>7} {:>7} {:>12} {:>12}",
                c.class,
                c.old_count,
                c.new_count,
                size(c.old_bytes),
                size(c.new_bytes)
            )?;
        }
    }
    Ok(())
}

/// The CI gates of a diff: growth and shrink budgets, and what may not go missing.
#[derive(Debug, Clone, Default)]
pub struct Gates {
    /// `--fail-if-grows`.
    pub grows: Vec<Budget>,
    /// `--fail-if-shrinks`.
    pub shrinks: Vec<Budget>,
    /// `--fail-if-removed`.
    pub removed: Vec<kpack::diff::Removal>,
}

impl Gates {
    /// No gate asked for.
    pub fn is_empty(&self) -> bool {
        self.grows.is_empty() && self.shrinks.is_empty() && self.removed.is_empty()
    }
}

/// `kpack-tui diff OLD NEW`.
pub fn run(
    old: &Path,
    new: &Path,
    opts: &DiffOptions,
    by: Table,
    format: Format,
    gates: &Gates,
    out: &mut dyn Write,
) -> Result<i32> {
    let r = diff(old, new, opts)
        .with_context(|| format!("cannot compare {} with {}", old.display(), new.display()))?;
    for d in &r.diagnostics {
        eprintln!("warning: {d}");
    }
    match format {
        Format::Json => write_json(out, "kpack-tui.diff/2", &r)?,
        Format::Csv => csv(out, &r, by)?,
        Format::Text { top } => text(out, &r, by, top)?,
    }
    let mut broken = gate(&r, &gates.grows);
    broken.extend(kpack::diff::shrink_gate(&r, &gates.shrinks));
    for b in &broken {
        eprintln!("kpack-tui: budget exceeded: {b}");
    }
    let lost = kpack::diff::removals(&r, &gates.removed);
    for l in &lost {
        eprintln!("kpack-tui: lost: {l}");
    }
    broken.extend(lost);
    Ok(if broken.is_empty() {
        EXIT_OK
    } else {
        EXIT_FINDINGS
    })
}
