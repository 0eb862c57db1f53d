//! `split` and `combine` in batch mode: progress on stderr, a summary on stdout.

use super::progress::PackProgress;
use super::{EXIT_OK, print_json, size};
use crate::cli::{CombineArgs, Common, SplitArgs};
use anyhow::{Context, Result, bail};
use kpack::artifacts::combine::{
    CombineConfig, CombineOptions, CombineReport, combine as combine_shards,
};
use kpack::artifacts::{SplitOptions, SplitReport, split as split_artifact};
use kpack::kerneldb::Database;
use std::io::Write;

/// Handler names from `--split-databases` (`all` = the whole registry).
pub(crate) fn handlers(names: &[String]) -> Result<Vec<Database>> {
    let mut out = Vec::new();
    for n in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        if n == "all" {
            for d in Database::ALL {
                if !out.contains(&d) {
                    out.push(d);
                }
            }
            continue;
        }
        let Some(d) = Database::from_name(n) else {
            let known: Vec<&str> = Database::ALL.iter().map(|d| d.name()).collect();
            bail!(
                "--split-databases: unknown database handler {n:?} (known: {}, all)",
                known.join(", ")
            );
        };
        if !out.contains(&d) {
            out.push(d);
        }
    }
    Ok(out)
}

/// `kpack-tui split`.
pub fn split(args: &SplitArgs, common: &Common) -> Result<i32> {
    let opts = SplitOptions {
        artifact_prefix: args.artifact_prefix.clone(),
        gpu_targets: (!args.gpu_targets.is_empty()).then(|| {
            args.gpu_targets
                .iter()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .collect()
        }),
        databases: handlers(&args.split_databases)?,
        level: args.level,
        threads: common.jobs,
        force: args.force,
    };
    let progress = PackProgress::new("splitting");
    let report = split_artifact(&args.artifact_dir, &args.output, &opts, &progress);
    progress.clear();
    let report = report.with_context(|| format!("cannot split {}", args.artifact_dir.display()))?;
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    if common.json {
        print_json("kpack-tui.split/1", &report)?;
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
        "split {} ({} prefix(es)) into {}: {} fat binaries, {} rewritten host-only, {} kernels",
        r.artifact_dir.display(),
        r.prefixes.len(),
        r.output.display(),
        r.fat_binaries,
        r.rewritten,
        r.kernels
    )?;
    if r.skipped_kernels + r.skipped_databases > 0 {
        writeln!(
            out,
            "left to other shards (--gpu-targets): {} code objects, {} database files",
            r.skipped_kernels, r.skipped_databases
        )?;
    }
    for a in &r.artifacts {
        let what = match &a.archive {
            Some(p) => format!(
                "{} kernels, {} -> {} in {p}",
                a.kernels,
                size(a.raw_bytes),
                size(a.archive_bytes)
            ),
            None if a.target.is_none() => format!("{} files", a.files),
            None => String::from("no archive"),
        };
        let dbs = if a.database_files > 0 {
            format!(", {} database files", a.database_files)
        } else {
            String::new()
        };
        writeln!(out, "  {:<32} {what}{dbs}", a.name)?;
    }
    writeln!(out, "{} in, {} out", size(r.bytes_in), size(r.bytes_out))
}

/// `kpack-tui combine`.
pub fn combine(args: &CombineArgs, common: &Common) -> Result<i32> {
    let config = args
        .config
        .as_deref()
        .map(CombineConfig::read)
        .transpose()?;
    let opts = CombineOptions {
        config,
        prefer: args.prefer.clone(),
        force: args.force,
    };
    if !common.json {
        eprintln!("combining {} shard(s)…", args.shards.len());
    }
    let report = combine_shards(&args.shards, &args.output, &opts)?;
    if common.json {
        print_json("kpack-tui.combine/1", &report)?;
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
        "combined {} shard(s) into {}: {} component(s), {} archive(s) with {} kernels checked",
        r.shards.len(),
        r.output.display(),
        r.components.len(),
        r.archives,
        r.kernels
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
