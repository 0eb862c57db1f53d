//! `kpack-tui`: the command-line edge. Parses arguments, runs a core operation,
//! reports it (terminal UI or batch), turns the outcome into an exit status.

mod batch;
mod cli;

use anyhow::{Context, Result};
use batch::{EXIT_ERROR, EXIT_FINDINGS, EXIT_OK};
use clap::Parser;
use cli::{Cli, Command, Common};
use kpack::scan::{self, ScanOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

fn main() {
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            // A closed pipe (`| head`) is not an error.
            if e.chain().any(|c| {
                c.downcast_ref::<io::Error>()
                    .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            }) {
                EXIT_OK
            } else {
                eprintln!("kpack-tui: error: {e:#}");
                EXIT_ERROR
            }
        }
    };
    std::process::exit(code);
}

/// The bundled demo tree (the embedded copy arrives with the terminal UI).
fn demo_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo")
}

fn run(cli: Cli) -> Result<i32> {
    let common = cli.common.clone();
    match cli.command {
        Some(Command::Scan { path }) => run_scan(&path, &common),
        None => {
            let path = cli.path.unwrap_or_else(demo_path);
            run_scan(&path, &common)
        }
    }
}

fn run_scan(path: &Path, common: &Common) -> Result<i32> {
    if !common.no_tui && !common.json {
        eprintln!(
            "kpack-tui: the terminal UI is not built yet; printing the batch report (--no-tui)"
        );
    }
    let progress = batch::progress::ScanProgress::new();
    let opts = ScanOptions {
        threads: common.jobs,
    };
    let report = scan::scan(path, &opts, &progress)
        .with_context(|| format!("cannot scan {}", path.display()))?;
    progress.finish();
    if common.json {
        batch::print_json(&report)?;
    } else {
        let out = io::stdout();
        let mut out = io::BufWriter::new(out.lock());
        batch::scan::print_text(&mut out, &report, common.long)?;
        out.flush()?;
    }
    Ok(if common.strict && report.has_diagnostics() {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}
