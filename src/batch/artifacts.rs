//! `split` and `combine` in batch mode: progress on stderr, a summary on stdout.

use super::Output;
use super::progress::PackProgress;
use super::{EXIT_OK, print_json, size};
use anyhow::{Context, Result};
use kpack::artifacts::combine::{CombineOptions, CombineReport, combine as combine_shards};
use kpack::artifacts::{SplitOptions, SplitReport, split as split_artifact};
use std::io::Write;
use std::path::{Path, PathBuf};

/// `kpack-tui split`.
pub fn split(artifact_dir: &Path, output: &Path, opts: &SplitOptions, how: &Output) -> Result<i32> {
    let progress = PackProgress::new("splitting");
    let report = split_artifact(artifact_dir, output, opts, &progress);
    progress.clear();
    let report = report.with_context(|| format!("cannot split {}", artifact_dir.display()))?;
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    if how.format.is_json() {
        print_json("kpack-tui.split/2", &report)?;
    } else {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        print_split(&mut out, &report)?;
        out.flush()?;
    }
    Ok(EXIT_OK)
}

fn print_split(out: &mut dyn Write, r: &SplitReport) -> std::io::Result<()> {
    writeln!(
        out,
        "split {} ({} prefix(es)) into {}: {} fat binaries, {} rewritten host-only, {} code objects",
        r.artifact_dir.display(),
        r.prefixes.len(),
        r.output.display(),
        r.fat_binaries,
        r.rewritten,
        r.code_objects
    )?;
    if r.skipped_code_objects + r.skipped_databases > 0 {
        writeln!(
            out,
            "left to other shards (--gpu-targets): {} code objects, {} database files",
            r.skipped_code_objects, r.skipped_databases
        )?;
        // Named, a few here and every one in --json.
        const SHOWN: usize = 8;
        for l in r.left_to_other_shards.iter().take(SHOWN) {
            writeln!(out, "  {l}")?;
        }
        if r.left_to_other_shards.len() > SHOWN {
            writeln!(
                out,
                "  … and {} more (--json lists every one)",
                r.left_to_other_shards.len() - SHOWN
            )?;
        }
    }
    for a in &r.artifacts {
        let what = match &a.archive {
            Some(p) => format!(
                "{}, {} -> {} in {p}",
                crate::text::count(a.code_objects, "code object", "code objects"),
                size(a.raw_bytes),
                size(a.archive_bytes)
            ),
            None if a.target.is_none() => crate::text::count(a.files, "file", "files"),
            None => String::from("no archive"),
        };
        let dbs = if a.database_files > 0 {
            format!(
                ", {}",
                crate::text::count(a.database_files, "database file", "database files")
            )
        } else {
            String::new()
        };
        writeln!(out, "  {:<32} {what}{dbs}", a.name)?;
    }
    writeln!(out, "{} in, {} out", size(r.bytes_in), size(r.bytes_out))
}

/// `kpack-tui combine`.
pub fn combine(
    shards: &[PathBuf],
    output: &Path,
    opts: &CombineOptions,
    how: &Output,
) -> Result<i32> {
    if !how.format.is_json() {
        eprintln!("combining {} shard(s)…", shards.len());
    }
    let report = combine_shards(shards, output, opts)?;
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    if how.format.is_json() {
        print_json("kpack-tui.combine/2", &report)?;
    } else {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        print_combine(&mut out, &report)?;
        out.flush()?;
    }
    Ok(EXIT_OK)
}

fn print_combine(out: &mut dyn Write, r: &CombineReport) -> std::io::Result<()> {
    writeln!(
        out,
        "combined {} shard(s) into {}: {} component(s), {} archive(s) with {} code objects checked",
        r.shards.len(),
        r.output.display(),
        r.components.len(),
        r.archives,
        r.code_objects
    )?;
    for d in &r.differences {
        writeln!(out, "  taken from the preferred shard: {d}")?;
    }
    for a in &r.artifacts {
        let from: Vec<String> = a
            .targets
            .iter()
            .map(|(t, s)| format!("{t} ({s})"))
            .collect();
        if from.is_empty() {
            writeln!(out, "  {:<32} {} files", a.name, a.files)?;
        } else {
            writeln!(
                out,
                "  {:<32} {} files: {}",
                a.name,
                a.files,
                from.join(", ")
            )?;
        }
    }
    for (a, ts) in &r.missing {
        writeln!(out, "  {a}: no shard delivered {}", ts.join(", "))?;
    }
    writeln!(out, "{} written", size(r.bytes_out))
}
