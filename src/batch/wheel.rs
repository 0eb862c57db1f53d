//! `wheel split` in batch mode: progress on stderr, the wheels written on stdout.

use super::Output;
use super::pack::plural;
use super::progress::PackProgress;
use super::{EXIT_OK, print_json, size};
use anyhow::Result;
use kpack::wheel_split::{WheelSplitOptions, WheelSplitReport, split_wheel};
use std::io::Write;
use std::path::Path;

/// `kpack-tui wheel split`.
pub fn split(wheel: &Path, output: &Path, opts: &WheelSplitOptions, how: &Output) -> Result<i32> {
    // Ctrl-C stops the split cleanly: the stage is removed, the output is as it was.
    super::cancel_on_signals(&opts.cancel)?;
    let progress = PackProgress::new("splitting");
    let report = split_wheel(wheel, output, opts, &progress);
    progress.clear();
    // The core's errors name the wheel already; say it once.
    let report = report.map_err(|e| {
        let named = e.to_string().contains(&*wheel.to_string_lossy());
        let e = anyhow::Error::new(e);
        if named {
            e
        } else {
            e.context(format!("cannot split {}", wheel.display()))
        }
    })?;
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    if how.format.is_json() {
        print_json("kpack-tui.wheel-split/2", &report)?;
    } else {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        print_text(&mut out, &report)?;
        out.flush()?;
    }
    Ok(EXIT_OK)
}

fn print_text(out: &mut dyn Write, r: &WheelSplitReport) -> std::io::Result<()> {
    let archives = r.devices.iter().map(|d| d.archives.len()).sum::<usize>();
    writeln!(
        out,
        "split {} {} ({}) into {}: {} {} rewritten host-only, {} {} in {} {}",
        r.name,
        r.version,
        r.input.display(),
        r.output.display(),
        r.rewritten,
        plural(r.rewritten, "binary", "binaries"),
        r.code_objects,
        plural(r.code_objects, "code object", "code objects"),
        archives,
        plural(archives as u64, "archive", "archives"),
    )?;
    writeln!(
        out,
        "  host    {:<58} {:>10}  {} members",
        r.host.file,
        size(r.host.bytes),
        r.host.members
    )?;
    for d in &r.devices {
        let what: Vec<String> = d
            .archives
            .iter()
            .map(|a| {
                let n = plural(a.code_objects, "code object", "code objects");
                format!("{} ({} {n})", a.target, a.code_objects)
            })
            .collect();
        let dbs = if d.database_files > 0 {
            format!(", {} database files", d.database_files)
        } else {
            String::new()
        };
        writeln!(
            out,
            "  device  {:<58} {:>10}  {}{dbs}",
            d.file,
            size(d.bytes),
            if what.is_empty() {
                "-".to_string()
            } else {
                what.join(", ")
            }
        )?;
    }
    if !r.extras.is_empty() {
        let name = r.name.to_lowercase();
        writeln!(
            out,
            "extras: {} (pip install '{name}[{}]')",
            r.extras.join(", "),
            r.extras[0]
        )?;
    }
    writeln!(out, "{} in, {} out", size(r.bytes_in), size(r.bytes_out))?;
    if r.bytes_out > r.bytes_in {
        // As pack explains it: the wheels hold the same code, stored differently.
        let why = if r.compressed_input {
            "bundles stored compressed (CCOB) compress less as one zstd frame per code \
             object, and each wheel carries its own dist-info; --level max narrows the gap"
        } else {
            "each wheel carries its own dist-info, RECORD and zip headers, which a small \
             wheel feels most"
        };
        writeln!(out, "the wheels together are larger than the input: {why}")?;
    }
    Ok(())
}
