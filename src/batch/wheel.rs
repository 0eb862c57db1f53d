//! `wheel split` in batch mode: progress on stderr, the wheels written on stdout.

use super::pack::plural;
use super::progress::PackProgress;
use super::{EXIT_OK, print_json, size};
use crate::cli::{Common, WheelSplitArgs};
use anyhow::{Context, Result};
use kpack::kerneldb::Database;
use kpack::wheel::split::{WheelSplitOptions, WheelSplitReport, split_wheel};
use std::io::Write;

/// The reference's `--wheel-type torch-fat` handler preset.
const TORCH_FAT: [Database; 5] = [
    Database::Rocblas,
    Database::Hipblaslt,
    Database::Hipsparselt,
    Database::Aotriton,
    Database::Miopen,
];

fn list(v: &[String]) -> Option<Vec<String>> {
    let v: Vec<String> = v
        .iter()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect();
    (!v.is_empty()).then_some(v)
}

/// `kpack-tui wheel split`.
pub fn split(args: &WheelSplitArgs, common: &Common) -> Result<i32> {
    let mut opts = WheelSplitOptions::new(&args.device_package_prefix, &args.overlay_root);
    opts.device_requires = args.device_requires_dist.clone();
    opts.targets = list(&args.target);
    opts.families = list(&args.family);
    opts.databases = if args.databases.iter().any(|d| d.trim() == "torch-fat") {
        TORCH_FAT.to_vec()
    } else {
        super::artifacts::handlers(&args.databases)?
    };
    opts.level = args.level;
    opts.zip_level = args.zip_level;
    opts.threads = common.jobs;
    opts.force = args.force;
    let progress = PackProgress::new("splitting");
    let report = split_wheel(&args.wheel, &args.output, &opts, &progress);
    progress.clear();
    let report = report.with_context(|| format!("cannot split {}", args.wheel.display()))?;
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    if common.json {
        print_json("kpack-tui.wheel-split/1", &report)?;
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
        r.kernels,
        plural(r.kernels, "code object", "code objects"),
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
                let n = plural(a.kernels, "code object", "code objects");
                format!("{} ({} {n})", a.target, a.kernels)
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
    writeln!(out, "{} in, {} out", size(r.bytes_in), size(r.bytes_out))
}
