//! `pack` and `verify TREE` in batch mode: progress on stderr, summary on stdout.

use super::{EXIT_FINDINGS, EXIT_OK, pct, size};
use crate::cli::{Common, CompressionArg, LayoutArg, PackArgs, UnassignedArg};
use anyhow::Result;
use kpack::event::{CancelToken, EventSink};
use kpack::family::Families;
use kpack::kpack::Scheme;
use kpack::pack::{self, Layout, PackEvent, PackOptions, PackPlan, Unassigned};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

struct Progress {
    tty: bool,
    start: Instant,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    tally: pack::PackTally,
    last: Option<Instant>,
    drew: bool,
}

impl Progress {
    fn new() -> Self {
        Progress {
            tty: std::io::stderr().is_terminal(),
            start: Instant::now(),
            state: Mutex::new(State::default()),
        }
    }
    fn clear(&self) {
        if let Ok(s) = self.state.lock()
            && self.tty
            && s.drew
        {
            eprint!("\r\x1b[2K");
        }
    }
}

impl EventSink<PackEvent> for Progress {
    fn event(&self, e: PackEvent) {
        let Ok(mut s) = self.state.lock() else { return };
        if let PackEvent::Warning(w) = &e {
            if self.tty && s.drew {
                eprint!("\r\x1b[2K");
            }
            eprintln!("warning: {w}");
        }
        s.tally.apply(e);
        let now = Instant::now();
        let every = if self.tty {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(5)
        };
        if now - self.start < Duration::from_millis(300) || s.last.is_some_and(|l| now - l < every)
        {
            return;
        }
        s.last = Some(now);
        let secs = (now - self.start).as_secs_f64().max(0.001);
        let rate = s.tally.done_bytes as f64 / secs;
        let eta = if rate > 0.0 && s.tally.bytes > s.tally.done_bytes {
            format!(
                ", ETA {:.0} s",
                (s.tally.bytes - s.tally.done_bytes) as f64 / rate
            )
        } else {
            String::new()
        };
        let fams: Vec<String> = s
            .tally
            .families
            .iter()
            .map(|(f, (k, b))| format!("{f} {k} kernels {}", size(*b)))
            .collect();
        let line = if s.tally.stage.is_empty() {
            format!(
                "packing: {}/{} files, {} / {} ({}/s{eta}) | {}",
                s.tally.done,
                s.tally.files,
                size(s.tally.done_bytes),
                size(s.tally.bytes),
                size(rate as u64),
                fams.join(", ")
            )
        } else {
            format!("packing: {}", s.tally.stage)
        };
        if self.tty {
            eprint!("\r\x1b[2K{line}");
            s.drew = true;
        } else {
            eprintln!("{line}");
        }
    }
}

fn options(args: &PackArgs, common: &Common) -> Result<PackOptions> {
    Ok(PackOptions {
        group: args.group.clone(),
        families: Families::parse(&args.families)?,
        layout: match args.layout {
            LayoutArg::Combined => Layout::Combined,
            LayoutArg::Split => Layout::Split,
        },
        unassigned: match args.unassigned {
            UnassignedArg::Error => Unassigned::Error,
            UnassignedArg::Drop => Unassigned::Drop,
        },
        scheme: match args.compression {
            CompressionArg::None => Scheme::None,
            CompressionArg::Zstd => Scheme::ZstdPerKernel,
        },
        level: args.level,
        threads: common.jobs,
        force: args.force,
        verify: !args.no_verify,
    })
}

fn print_plan(out: &mut dyn Write, plan: &PackPlan) -> std::io::Result<()> {
    writeln!(
        out,
        "plan: {} -> {} ({:?} layout)",
        plan.tree, plan.output, plan.layout
    )?;
    writeln!(
        out,
        "  {} binaries to rewrite, {} of device code in them",
        plan.binaries,
        size(plan.device_bytes)
    )?;
    for f in &plan.families {
        writeln!(
            out,
            "  {:<10} {:<32} {:>5} kernels  {:>11} raw  ~{:>11}  arches {}{}",
            f.name,
            f.archive,
            f.kernels,
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
    for c in &plan.copied_fat {
        writeln!(
            out,
            "  copied with device code (not an executable or shared library): {c}"
        )?;
    }
    writeln!(
        out,
        "  input {} -> projected output ~{} ({})",
        size(plan.input_bytes),
        size(plan.projected_bytes),
        pct(plan.projected_bytes, plan.input_bytes)
    )
}

/// `kpack-tui pack`.
pub fn run(args: &PackArgs, common: &Common) -> Result<i32> {
    let opts = options(args, common)?;
    let mut plan = pack::plan_pack(&args.tree, &args.output, &opts)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.dry_run {
        pack::estimate(&mut plan, &args.tree, &opts);
        if common.json {
            serde_json::to_writer_pretty(&mut out, &plan)?;
            writeln!(out)?;
        } else {
            print_plan(&mut out, &plan)?;
        }
        return Ok(EXIT_OK);
    }
    let progress = Progress::new();
    let report = pack::execute_pack(
        plan,
        &args.tree,
        &args.output,
        &opts,
        &progress,
        &CancelToken::new(),
    );
    progress.clear();
    let report = report?;
    if common.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
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
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    writeln!(out, "  files: {}", files.join(", "))?;
    writeln!(
        out,
        "  bytes: {} -> {} ({})",
        size(report.bytes_in),
        size(report.bytes_out),
        pct(report.bytes_out, report.bytes_in)
    )?;
    for (path, kernels, bytes) in &report.archives {
        let raw = report
            .plan
            .families
            .iter()
            .find(|f| &f.archive == path)
            .map_or(0, |f| f.raw_bytes);
        writeln!(
            out,
            "  archive {path}: {kernels} kernels, {} ({} raw, {:.2}×)",
            size(*bytes),
            size(raw),
            raw as f64 / (*bytes).max(1) as f64
        )?;
    }
    if !report.plan.unassigned.is_empty() {
        let list: Vec<String> = report
            .plan
            .unassigned
            .iter()
            .map(|(a, n)| format!("{a} ({n})"))
            .collect();
        writeln!(out, "  dropped (no family): {}", list.join(", "))?;
    }
    writeln!(
        out,
        "  verify: {}",
        if report.verified {
            "sound"
        } else {
            "skipped (--no-verify)"
        }
    )?;
    if !report.warnings.is_empty() {
        writeln!(out, "  warnings: {}", report.warnings.len())?;
    }
    Ok(EXIT_OK)
}

/// `kpack-tui verify TREE`.
pub fn verify(root: &Path, json: bool, out: &mut dyn Write) -> Result<i32> {
    let layout = if root.join("generic").is_dir() && !root.join(".kpack").exists() {
        Layout::Split
    } else {
        Layout::Combined
    };
    let verdict = pack::verify_tree(root, None, layout);
    let faults = &verdict.faults;
    if json {
        serde_json::to_writer_pretty(
            &mut *out,
            &serde_json::json!({"path": root.display().to_string(), "sound": faults.is_empty(), "faults": faults, "notes": verdict.notes}),
        )?;
        writeln!(out)?;
        return Ok(if faults.is_empty() {
            EXIT_OK
        } else {
            EXIT_FINDINGS
        });
    }
    for n in &verdict.notes {
        writeln!(out, "note: {n}")?;
    }
    if faults.is_empty() {
        writeln!(
            out,
            "{}: sound (archives verified, every marker resolves to archives holding its kernels)",
            root.display()
        )?;
    } else {
        writeln!(out, "{}: {} fault(s)", root.display(), faults.len())?;
        for f in faults {
            writeln!(out, "  {f}")?;
        }
    }
    Ok(if faults.is_empty() {
        EXIT_OK
    } else {
        EXIT_FINDINGS
    })
}
