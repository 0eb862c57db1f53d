//! `kernels` and `find-kernel` in batch mode: a table, CSV or JSON on stdout.

use super::jsonstream::JsonArrayStream;
use super::{EXIT_FINDINGS, EXIT_OK, Format, size, write_json};
use anyhow::{Context, Result, bail};
use kpack::kernels::{
    KernelRow, KernelsOptions, KernelsReport, SortBy, SpooledKernels, list_kernels,
    list_kernels_spooled,
};
use std::io::Write;
use std::path::Path;

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// Where a row's code object lives: `lib/libfoo.so#0 gfx942`.
fn location(r: &KernelRow) -> String {
    match (&r.key, r.bundle) {
        (Some(k), _) => format!("{} [{k}]", r.path),
        (None, Some(b)) => format!("{}#{b}", r.path),
        _ => r.path.clone(),
    }
}

fn table(out: &mut dyn Write, rows: &[Box<KernelRow>]) -> std::io::Result<()> {
    let w = rows
        .iter()
        .map(|r| location(r).chars().count())
        .max()
        .unwrap_or(5)
        .clamp(5, 60);
    let t = rows
        .iter()
        .map(|r| r.target.len())
        .max()
        .unwrap_or(6)
        // Longer targets overflow their column (a width past 65535 would panic).
        .clamp(6, 64);
    writeln!(
        out,
        "{:>10} {:>5} {:>5} {:>5} {:>7} {:>7} {:>6} {:>5}  {:<t$} {:<w$} kernel",
        "code", "vgpr", "agpr", "sgpr", "lds", "scratch", "spills", "waves", "target", "where"
    )?;
    for r in rows {
        let k = &r.kernel;
        let spill = k.spills().map_or_else(
            || "-".into(),
            |s| if s > 0 { format!("{s}!") } else { "0".into() },
        );
        writeln!(
            out,
            "{:>10} {:>5} {:>5} {:>5} {:>7} {:>7} {:>6} {:>5}  {:<t$} {:<w$} {}",
            k.code_size.map_or_else(|| "-".into(), size),
            opt(k.vgpr),
            opt(k.agpr),
            opt(k.sgpr),
            opt(k.lds),
            opt(k.scratch),
            spill,
            r.occupancy
                .map_or_else(|| "-".into(), |o| format!("{}/{}", o.waves, o.max_waves)),
            r.target,
            location(r),
            k.display_name()
        )?;
    }
    Ok(())
}

/// `kpack-tui kernels PATH`: the rows are written out as they are read and come
/// back one at a time, so a tree of any size is listed in the same memory.
pub fn list(
    path: &Path,
    opts: &KernelsOptions,
    sort: SortBy,
    format: Format,
    out: &mut dyn Write,
) -> Result<i32> {
    let cannot = || format!("cannot read {}", path.display());
    let r = list_kernels_spooled(path, opts, sort).with_context(cannot)?;
    for d in &r.diagnostics {
        eprintln!("warning: {d}");
    }
    match format {
        Format::Json => {
            // The document `write_json` writes of the whole report, row by row.
            let head = KernelsReport {
                root: r.root.clone(),
                code_objects: r.code_objects,
                diagnostics: r.diagnostics.clone(),
                ..Default::default()
            };
            let mut doc = JsonArrayStream::new(out, "kpack-tui.kernels/1", "kernels", &head)?;
            for row in r.rows() {
                doc.item(&row.with_context(cannot)?)?;
            }
            doc.finish(&head)?;
        }
        Format::Csv => {
            writeln!(out, "{}", crate::text::KERNEL_CSV_COLUMNS)?;
            for row in r.rows() {
                writeln!(
                    out,
                    "{}",
                    crate::text::kernel_csv_row(&row.with_context(cannot)?)
                )?;
            }
        }
        Format::Text { top } => text(path, &r, top, out)?,
    }
    Ok(if r.diagnostics.is_empty() {
        EXIT_OK
    } else {
        EXIT_FINDINGS
    })
}

/// The text of `kernels`: a summary line, then the first `top` rows (0: all).
fn text(path: &Path, r: &SpooledKernels, top: usize, out: &mut dyn Write) -> Result<()> {
    let cannot = || format!("cannot read {}", path.display());
    let n = r.len();
    writeln!(
        out,
        "{}: {} kernel{} in {} code object{}, {} of machine code{}",
        path.display(),
        n,
        if n == 1 { "" } else { "s" },
        r.code_objects,
        if r.code_objects == 1 { "" } else { "s" },
        size(r.code_bytes),
        match r.spilling {
            0 => String::new(),
            1 => "; 1 kernel spills registers (marked !)".to_string(),
            s => format!("; {s} kernels spill registers (marked !)"),
        }
    )?;
    let shown = if top == 0 { n } else { top.min(n) };
    if shown > 0 {
        let rows = r
            .rows()
            .take(shown)
            .map(|row| row.map(Box::new))
            .collect::<kpack::Result<Vec<_>>>()
            .with_context(cannot)?;
        writeln!(out)?;
        table(out, &rows)?;
    }
    if shown < n {
        writeln!(out, "… and {} more (--top 0 shows all)", n - shown)?;
    }
    Ok(())
}

/// `kpack-tui find-kernel PATTERN PATH`.
pub fn find(
    pattern: &str,
    regex: bool,
    path: &Path,
    opts: &KernelsOptions,
    format: Format,
    out: &mut dyn Write,
) -> Result<i32> {
    let re = if regex {
        Some(regex::Regex::new(pattern).with_context(|| format!("--regex {pattern:?}"))?)
    } else {
        None
    };
    if pattern.is_empty() {
        bail!("give a (part of a) kernel name to find");
    }
    let mut r =
        list_kernels(path, opts).with_context(|| format!("cannot read {}", path.display()))?;
    for d in &r.diagnostics {
        eprintln!("warning: {d}");
    }
    let hit = |s: &str| {
        re.as_ref()
            .map_or_else(|| s.contains(pattern), |re| re.is_match(s))
    };
    r.kernels
        .retain(|k| hit(&k.kernel.name) || k.kernel.demangled.as_deref().is_some_and(hit));
    if format.is_json() {
        write_json(out, "kpack-tui.kernels/1", &r)?;
    } else if r.kernels.is_empty() {
        writeln!(
            out,
            "no kernel matching {pattern:?} under {}",
            path.display()
        )?;
    } else {
        writeln!(
            out,
            "{} kernel{} matching {pattern:?} under {}:",
            r.kernels.len(),
            if r.kernels.len() == 1 { "" } else { "s" },
            path.display()
        )?;
        writeln!(out)?;
        table(out, &r.kernels)?;
    }
    Ok(if r.kernels.is_empty() {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}
