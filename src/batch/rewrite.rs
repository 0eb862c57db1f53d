//! `preview`, `rewrite` and `normalize` in batch mode.

use super::{EXIT_FINDINGS, EXIT_OK, size, write_json};
use crate::cli::MarkerArgs;
use anyhow::{Context, Result, bail};
use kpack::elf::rewrite::{self, RewriteError, RewritePlan};
use kpack::kpack::Marker;
use std::io::Write;
use std::path::Path;

fn marker_for(binary: &Path, args: &MarkerArgs, require_paths: bool) -> Result<Marker> {
    if require_paths && args.search_paths.is_empty() {
        bail!(
            "give at least one --search-path (where the archives will be, relative to the binary)"
        );
    }
    let kernel_name = match &args.kernel_name {
        Some(k) => k.clone(),
        None => binary
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .context("cannot derive --kernel-name from the path")?,
    };
    let paths = if args.search_paths.is_empty() {
        vec![".kpack/preview_@GFXARCH@.kpack".to_string()]
    } else {
        args.search_paths.clone()
    };
    Ok(Marker {
        kpack_search_paths: paths,
        kernel_name,
    })
}

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

/// Print the plan of a rewrite.
pub fn preview(binary: &Path, args: &MarkerArgs, json: bool, out: &mut dyn Write) -> Result<i32> {
    let data =
        std::fs::read(binary).with_context(|| format!("cannot read {}", binary.display()))?;
    let marker = marker_for(binary, args, false)?;
    let r = match rewrite::plan_rewrite(&data, &marker) {
        Ok(r) => r,
        Err(e) => return refusal(binary, e),
    };
    if json {
        super::write_json(out, "kpack-tui.preview/1", &r.plan)?;
    } else {
        print_plan(out, binary, &r.plan)?;
    }
    Ok(EXIT_OK)
}

/// Print a plan as before/after tables.
pub fn print_plan(out: &mut dyn Write, binary: &Path, p: &RewritePlan) -> std::io::Result<()> {
    writeln!(
        out,
        "{}: {} -> {} ({} of .hip_fatbin removed, {} bundles; marker {} at {:#x}{})",
        binary.display(),
        size(p.input_size),
        size(p.output_size),
        size(p.bytes_removed),
        p.bundles,
        size(p.marker_size),
        p.marker_vaddr,
        match (p.phdr_relocated, p.phdr_padding) {
            (false, _) => String::new(),
            (true, 0) => "; program headers moved into the new segment".into(),
            (true, n) => format!(
                "; program headers moved into the new segment, {} of zeros before it so that \
                 its address is its offset (EL8 kernels)",
                size(n)
            ),
        }
    )?;
    writeln!(
        out,
        "  marker: kernel_name {:?}, search paths {:?}",
        p.marker.kernel_name, p.marker.kpack_search_paths
    )?;
    for w in &p.wrappers {
        writeln!(
            out,
            "  wrapper {}: HIPF -> HIPK, pointer {:#x} -> {:#x} ({}), co_index {}",
            w.index, w.old_pointer, w.new_pointer, w.via, w.co_index
        )?;
    }
    let seg = |s: &rewrite::Segment| {
        format!(
            "{:<12} off {:#08x} vaddr {:#010x} filesz {:#08x} memsz {:#08x} {:<3} align {:#x}",
            s.type_name(),
            s.p_offset,
            s.p_vaddr,
            s.p_filesz,
            s.p_memsz,
            s.flags_name(),
            s.p_align
        )
    };
    writeln!(
        out,
        "\n  program headers before ({})",
        p.segments_before.len()
    )?;
    for s in &p.segments_before {
        writeln!(out, "    {}", seg(s))?;
    }
    writeln!(out, "  program headers after ({})", p.segments_after.len())?;
    for s in &p.segments_after {
        let new = !p.segments_before.contains(s);
        writeln!(out, "  {} {}", if new { "*" } else { " " }, seg(s))?;
    }
    let sec = |s: &rewrite::Section| {
        format!(
            "{:<20} {:<9} addr {:#010x} off {:#08x} size {:#08x}",
            s.name,
            s.type_name(),
            s.sh_addr,
            s.sh_offset,
            s.sh_size
        )
    };
    writeln!(out, "\n  sections that change")?;
    for a in &p.sections_after {
        match p
            .sections_before
            .iter()
            .find(|b| b.name == a.name && b.sh_addr == a.sh_addr)
        {
            Some(b) if b == a => {}
            Some(b) => {
                writeln!(out, "    - {}", sec(b))?;
                writeln!(out, "    + {}", sec(a))?;
            }
            None => writeln!(out, "    + {}", sec(a))?,
        }
    }
    Ok(())
}

/// Rewrite a binary to `output`.
pub fn rewrite(binary: &Path, output: &Path, args: &MarkerArgs) -> Result<i32> {
    let marker = marker_for(binary, args, true)?;
    let data =
        std::fs::read(binary).with_context(|| format!("cannot read {}", binary.display()))?;
    let r = match rewrite::plan_rewrite(&data, &marker) {
        Ok(r) => r,
        Err(e) => return refusal(binary, e),
    };
    let mode = std::fs::metadata(binary)?.permissions();
    kpack::fsutil::write_atomic(output, &r.bytes, Some(mode))?;
    eprintln!(
        "{} -> {}: {} -> {} ({} of device code removed)",
        binary.display(),
        output.display(),
        size(r.plan.input_size),
        size(r.plan.output_size),
        size(r.plan.bytes_removed)
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
