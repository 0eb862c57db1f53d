//! `kpack-tui trace FILE`: summary, top lists, JSON, Chrome export.

use super::Output;
use super::{EXIT_FINDINGS, EXIT_OK};
use anyhow::{Context, Result, bail};
use kpack::trace::{self, analysis};
use serde::Serialize;
use std::io::{Read, Write};
use std::path::Path;

/// Largest trace read (the parser streams; this bounds a mistaken argument).
const MAX_TRACE: u64 = 8 << 30;

/// `trace FILE --json`: every build of the log, analysed.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Json<'a> {
    /// The trace file.
    pub file: String,
    /// Its `# ninja log vN` version.
    pub version: u32,
    /// Whether it had that header line.
    pub header: bool,
    /// Whether times are epoch-based (phc) rather than build-relative (ninja).
    pub epoch: bool,
    /// Lines read.
    pub lines: u64,
    /// One per build (a restart of the times starts a new one).
    pub builds: Vec<analysis::BuildAnalysis>,
    /// Lines that could not be read (the first ones).
    pub diagnostics: &'a [trace::LineDiagnostic],
    /// How many there were.
    pub diagnostic_count: u64,
}

fn ms(v: i64) -> String {
    if v >= 10_000 {
        format!("{:.1} s", v as f64 / 1000.0)
    } else {
        format!("{v} ms")
    }
}

/// Read, analyse, print or export.
pub fn run(file: &Path, export: bool, output: Option<&Path>, how: &Output) -> Result<i32> {
    let f = kpack::fsutil::open_input(file)
        .with_context(|| format!("cannot open {}", file.display()))?;
    let size = f.metadata()?.len();
    if size > MAX_TRACE {
        bail!(
            "{}: {} bytes is more than a trace should be",
            file.display(),
            size
        );
    }
    // Stream in chunks: memory holds the parsed jobs, not the file.
    let mut parser = trace::TraceParser::new();
    let mut r = std::io::BufReader::with_capacity(1 << 20, f);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = r
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", file.display()))?;
        if n == 0 {
            break;
        }
        parser.feed(&buf[..n]);
    }
    parser.finish();
    // The process exits after this report: freeing a million jobs one by one would
    // only slow the exit (the memory goes back with the process).
    let t = std::mem::ManuallyDrop::new(parser.into_trace());
    if !t.header && t.builds.iter().all(|b| b.jobs.is_empty()) {
        let seen: Vec<String> = t
            .diagnostics
            .iter()
            .take(3)
            .map(|d| format!("line {}: {}", d.line, d.message))
            .collect();
        bail!(
            "{}: no trace lines{}: expected a ninja log (\"# ninja log v5\" to v7: start, end, \
             mtime, name and hash, tab-separated, one job a line) or a phc trace (the same \
             lines without the header)",
            file.display(),
            if seen.is_empty() {
                String::new()
            } else {
                format!(" ({})", seen.join("; "))
            }
        );
    }
    if export {
        let out = output.context("give -o FILE for the export")?;
        let doc = trace::chrome::export(&t);
        let bytes = serde_json::to_vec(&doc)?;
        kpack::fsutil::write_atomic(out, &bytes, None)?;
        eprintln!(
            "wrote {} events to {}",
            doc.trace_events.len(),
            out.display()
        );
        return Ok(EXIT_OK);
    }
    let builds: Vec<analysis::BuildAnalysis> = t.builds.iter().map(analysis::analyse).collect();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if how.format.is_json() {
        let j = Json {
            file: file.display().to_string(),
            version: t.version,
            header: t.header,
            epoch: t.epoch,
            lines: t.lines,
            builds,
            diagnostics: &t.diagnostics,
            diagnostic_count: t.diagnostic_count,
        };
        super::write_json(&mut out, "kpack-tui.trace/1", &j)?;
    } else {
        writeln!(
            out,
            "{}: ninja log v{}{}, {} lines, {} build{}",
            file.display(),
            t.version,
            if t.header {
                ""
            } else {
                " (headerless, as phc writes)"
            },
            t.lines,
            builds.len(),
            if builds.len() == 1 { "" } else { "s" }
        )?;
        for (i, a) in builds.iter().enumerate() {
            writeln!(
                out,
                "\nbuild {}: {} jobs, wall {}, job time {}",
                i + 1,
                a.jobs,
                ms(a.wall_ms),
                ms(a.job_ms)
            )?;
            writeln!(
                out,
                "  parallelism: average {:.2}, peak {}; idle capacity {} slot-time below the peak",
                a.average_parallelism,
                a.peak_parallelism,
                ms(a.idle_capacity_ms)
            )?;
            let crit = a
                .critical_object
                .as_deref()
                .map(|o| format!(" ({o})"))
                .unwrap_or_default();
            writeln!(out, "  critical path {}{crit}", ms(a.critical_path_ms))?;
            writeln!(
                out,
                "  a plain driver (device compiles one after another): {} of work, about {} wall on {} slots",
                ms(a.serial_driver_ms),
                ms(a.estimated_plain_wall_ms),
                a.peak_parallelism.max(1)
            )?;
            if !a.per_arch_detail.is_empty() {
                writeln!(out, "  device compile time per arch:")?;
                for (arch, t) in &a.per_arch_detail {
                    writeln!(
                        out,
                        "    {arch:<16} {:>10}  {:>4} compiles, mean {}",
                        ms(t.total_ms),
                        t.compiles,
                        ms(t.mean_ms as i64)
                    )?;
                }
            }
            if !a.objects.is_empty() {
                writeln!(out, "  slowest objects (slowest device + bundle + host):")?;
                for o in a.objects.iter().take(analysis::TOP) {
                    writeln!(
                        out,
                        "    {:>10}  {}  (device {} on {}, bundle {}, host {})",
                        ms(o.critical_path_ms),
                        o.object,
                        ms(o.slowest_device_ms),
                        o.slowest_arch,
                        ms(o.bundle_ms),
                        ms(o.host_ms)
                    )?;
                }
            }
            writeln!(out, "  slowest steps:")?;
            for s in &a.slowest_steps {
                writeln!(
                    out,
                    "    {:>10}  {:<6}  {}",
                    ms(s.ms),
                    s.kind.category(),
                    s.name
                )?;
            }
        }
        if t.diagnostic_count > 0 {
            writeln!(out, "\n{} line(s) skipped:", t.diagnostic_count)?;
            for d in &t.diagnostics {
                writeln!(out, "  line {}: {}", d.line, d.message)?;
            }
            if t.diagnostic_count as usize > t.diagnostics.len() {
                writeln!(
                    out,
                    "  … and {} more",
                    t.diagnostic_count as usize - t.diagnostics.len()
                )?;
            }
        }
    }
    out.flush()?;
    Ok(if how.strict && t.diagnostic_count > 0 {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}
