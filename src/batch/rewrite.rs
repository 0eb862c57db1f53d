//! `preview`, `rewrite` and `normalize` in batch mode.

use super::{EXIT_FINDINGS, EXIT_OK, Format, size, write_json};
use anyhow::{Context, Result, bail};
use kpack::elf::rewrite;
use kpack::fatbin::{self, Plan};
use kpack::kpack::Marker;
use std::io::Write;
use std::path::Path;

/// The verified host-only rewrite of an ELF or PE binary, or the exit status of a
/// refusal (1, with its message); damage propagates (2).
fn planned(
    binary: &Path,
    data: &[u8],
    marker: &Marker,
    phdrs: rewrite::PhdrLayout,
) -> Result<std::result::Result<fatbin::Rewritten, i32>> {
    match fatbin::rewrite_with(data, marker, phdrs) {
        Ok(r) => Ok(Ok(r)),
        Err(e) if e.is_refusal() => {
            eprintln!("kpack-tui: {}: {e}", binary.display());
            Ok(Err(EXIT_FINDINGS))
        }
        Err(e) => bail!("{}: {e}", binary.display()),
    }
}

/// Print the plan of a rewrite.
pub fn preview(binary: &Path, marker: &Marker, format: Format, out: &mut dyn Write) -> Result<i32> {
    let data = kpack::fsutil::read_input(binary)
        .with_context(|| format!("cannot read {}", binary.display()))?;
    let r = match planned(binary, &data, marker, Default::default())? {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    match (&r.plan, format.is_json()) {
        (Plan::Pe(p), true) => write_json(out, "kpack-tui.preview-pe/1", p)?,
        (Plan::Pe(p), false) => crate::text::pe_rewrite_plan(out, binary, p)?,
        (Plan::Elf(p), true) => write_json(out, "kpack-tui.preview/1", p)?,
        (Plan::Elf(p), false) => crate::text::rewrite_plan(out, binary, p)?,
    }
    Ok(EXIT_OK)
}

/// Rewrite a binary to `output`.
pub fn rewrite(
    binary: &Path,
    output: &Path,
    marker: &Marker,
    phdrs: rewrite::PhdrLayout,
) -> Result<i32> {
    kpack::fsutil::check_apart(binary, output)?;
    let data = kpack::fsutil::read_input(binary)
        .with_context(|| format!("cannot read {}", binary.display()))?;
    // The planner verifies the image it returns before anything is written.
    let r = match planned(binary, &data, marker, phdrs)? {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    let mode = std::fs::metadata(binary)?.permissions();
    kpack::fsutil::write_atomic(output, &r.bytes, Some(mode))?;
    eprintln!(
        "{} -> {}: {} -> {} ({} of device code removed; verified)",
        binary.display(),
        output.display(),
        size(r.plan.input_size()),
        size(r.plan.output_size()),
        size(r.plan.removed())
    );
    Ok(EXIT_OK)
}

/// `kpack-tui normalize`: one line per file that needed attention, then a summary.
pub fn normalize(
    paths: &[std::path::PathBuf],
    check: bool,
    format: Format,
    out: &mut dyn Write,
) -> Result<i32> {
    use kpack::elf::normalize::PhdrState;
    let r = kpack::elf::normalize::normalize_paths(paths, check)?;
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    if format.is_json() {
        write_json(out, "kpack-tui.normalize/1", &r)?;
    } else {
        for f in &r.files {
            let p = f.path.display();
            match &f.state {
                _ if f.fixed => writeln!(out, "FIXED {p}")?,
                PhdrState::Noncompliant { offset, vaddr, .. } => writeln!(
                    out,
                    "NONCOMPLIANT {p} (program headers at offset {offset:#x}, address \
                     {vaddr:#x}: EL8 kernels crash running it)"
                )?,
                PhdrState::Moved { why } => writeln!(out, "MOVED {p} ({why})")?,
                PhdrState::Damaged { why } => writeln!(out, "DAMAGED {p} ({why})")?,
                _ => {}
            }
        }
        if check {
            writeln!(
                out,
                "Scanned {} ELF file(s); {} non-compliant.",
                r.scanned,
                r.remaining()
            )?;
        } else {
            writeln!(
                out,
                "Scanned {} ELF file(s); fixed {}{}.",
                r.scanned,
                r.fixed(),
                match r.remaining() {
                    0 => String::new(),
                    n => format!("; {n} could not be fixed (re-pack from the unstripped tree)"),
                }
            )?;
        }
    }
    Ok(if r.remaining() > 0 {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}
