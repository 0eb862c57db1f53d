//! `preview`, `rewrite` and `normalize` in batch mode.

use super::{EXIT_FINDINGS, EXIT_OK, size, write_json};
use anyhow::{Context, Result, bail};
use kpack::elf::rewrite::{self, RewriteError};
use kpack::kpack::Marker;
use std::io::Write;
use std::path::Path;

/// Map a refusal to exit status 1 with its message; other errors propagate (2).
fn refusal(binary: &Path, e: RewriteError) -> Result<i32> {
    match e {
        RewriteError::NotFatBinary
        | RewriteError::AlreadyHostOnly(_)
        | RewriteError::Unsupported(_)
        | RewriteError::Refused(_) => {
            eprintln!("kpack-tui: {}: {e}", binary.display());
            Ok(EXIT_FINDINGS)
        }
        other => bail!("{}: {other}", binary.display()),
    }
}

/// A PE image's rewrite: plan (printed) and bytes, or the refusal (exit 1).
fn pe(
    binary: &Path,
    data: &[u8],
    marker: &Marker,
) -> Result<std::result::Result<kpack::coff::rewrite::PeRewritten, i32>> {
    use kpack::coff::rewrite::{PeRewriteError, plan_rewrite};
    match plan_rewrite(data, marker) {
        Ok(r) => Ok(Ok(r)),
        Err(PeRewriteError::Refused(why)) => {
            eprintln!("kpack-tui: {}: {why}", binary.display());
            Ok(Err(EXIT_FINDINGS))
        }
        Err(e) => bail!("{}: {e}", binary.display()),
    }
}

/// Print the plan of a rewrite.
pub fn preview(binary: &Path, marker: &Marker, json: bool, out: &mut dyn Write) -> Result<i32> {
    let data = kpack::fsutil::read_input(binary)
        .with_context(|| format!("cannot read {}", binary.display()))?;
    if kpack::coff::is_pe(&data) {
        let r = match pe(binary, &data, marker)? {
            Ok(r) => r,
            Err(code) => return Ok(code),
        };
        if json {
            super::write_json(out, "kpack-tui.preview-pe/1", &r.plan)?;
        } else {
            crate::text::pe_rewrite_plan(out, binary, &r.plan)?;
        }
        return Ok(EXIT_OK);
    }
    let r = match rewrite::plan_rewrite(&data, marker) {
        Ok(r) => r,
        Err(e) => return refusal(binary, e),
    };
    if json {
        super::write_json(out, "kpack-tui.preview/1", &r.plan)?;
    } else {
        crate::text::rewrite_plan(out, binary, &r.plan)?;
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
    // Both planners verify the image they return before anything is written.
    let (bytes, input, written, removed) = if kpack::coff::is_pe(&data) {
        match pe(binary, &data, marker)? {
            Ok(r) => (
                r.bytes,
                r.plan.input_size,
                r.plan.output_size,
                r.plan.removed,
            ),
            Err(code) => return Ok(code),
        }
    } else {
        match rewrite::plan_rewrite_with(&data, marker, phdrs) {
            Ok(r) => (
                r.bytes,
                r.plan.input_size,
                r.plan.output_size,
                r.plan.bytes_removed,
            ),
            Err(e) => return refusal(binary, e),
        }
    };
    let mode = std::fs::metadata(binary)?.permissions();
    kpack::fsutil::write_atomic(output, &bytes, Some(mode))?;
    eprintln!(
        "{} -> {}: {} -> {} ({} of device code removed; verified)",
        binary.display(),
        output.display(),
        size(input),
        size(written),
        size(removed)
    );
    Ok(EXIT_OK)
}

/// `kpack-tui normalize`: one line per file that needed attention, then a summary.
pub fn normalize(
    paths: &[std::path::PathBuf],
    check: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<i32> {
    use kpack::elf::normalize::PhdrState;
    let r = kpack::elf::normalize::normalize_paths(paths, check)?;
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    if json {
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
