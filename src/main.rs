//! `kpack-tui`: the command-line edge. Parses arguments, runs a core operation,
//! reports it (terminal UI or batch), turns the outcome into an exit status.

mod batch;
mod cli;
mod demo;
mod phc_launch;
mod sigbus;
mod text;
mod tui;
mod version;

use anyhow::{Context, Result};
use batch::{EXIT_ERROR, EXIT_FINDINGS, EXIT_OK};
use cli::{Cli, Command, Common};
use kpack::scan::{self, ScanOptions};
use std::io::{self, IsTerminal, Write};
use std::path::Path;

fn main() {
    sigbus::install();
    let cli = Cli::parse_args();
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            // A closed pipe (`| head`) is not an error.
            if e.chain().any(|c| {
                c.downcast_ref::<io::Error>()
                    .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            }) {
                EXIT_OK
            } else if e.chain().any(|c| {
                matches!(
                    c.downcast_ref::<kpack::Error>().map(kpack::Error::cause),
                    Some(kpack::Error::Cancelled)
                )
            }) {
                // Interrupted (Ctrl-C): what was staged is gone; the shell's status.
                eprintln!("kpack-tui: cancelled; nothing was written");
                130
            } else if e.chain().any(|c| {
                matches!(
                    c.downcast_ref::<kpack::Error>().map(kpack::Error::cause),
                    Some(kpack::Error::Findings(_))
                )
            }) {
                // The run completed and found what the user asked to be fatal.
                eprintln!("kpack-tui: {e:#}");
                EXIT_FINDINGS
            } else {
                eprintln!("kpack-tui: error: {e:#}");
                EXIT_ERROR
            }
        }
    };
    std::process::exit(code);
}

fn run(cli: Cli) -> Result<i32> {
    if cli.generate == Some(cli::generate::GenerateKind::Schemas) {
        let Some(dir) = &cli.path else {
            anyhow::bail!("--generate schemas writes into a directory: give it as PATH");
        };
        let n = batch::schemas::write_all(dir)
            .with_context(|| format!("cannot write the schemas into {}", dir.display()))?;
        eprintln!("{n} schemas written to {}", dir.display());
        return Ok(EXIT_OK);
    }
    if let Some(kind) = cli.generate {
        return with_stdout(|out| {
            cli::generate::generate(kind, <Cli as clap::CommandFactory>::command(), out)?;
            Ok(EXIT_OK)
        });
    }
    let common = cli.effective_common();
    match cli.command {
        // A compile trace is shown as `kpack-tui PATH` shows it (the help says so).
        Some(Command::Scan {
            path, csv: None, ..
        }) if is_trace(&path) => {
            if wants_tui(&common) {
                tui::run_timeline(path, false)?;
                return Ok(EXIT_OK);
            }
            batch::trace::run(&path, false, None, &common.output())
        }
        Some(Command::Scan {
            path, csv: None, ..
        }) => run_scan(&path, &common),
        Some(Command::Scan {
            path,
            csv: Some(which),
            ..
        }) => {
            let opts = ScanOptions {
                threads: common.jobs,
                deep: common.deep,
                ..Default::default()
            };
            let report = scan::scan(&path, &opts, &kpack::event::NoEvents)
                .with_context(|| format!("cannot scan {}", path.display()))?;
            with_stdout(|out| {
                match which {
                    cli::ScanCsvArg::Targets => batch::scan::csv_targets(out, &report)?,
                    cli::ScanCsvArg::Matrix => batch::scan::csv_matrix(out, &report)?,
                }
                Ok(EXIT_OK)
            })
        }
        Some(Command::Extract {
            input,
            key,
            arch,
            target,
            bundle,
            all,
            output,
        }) => batch::archive::extract(
            &input,
            &batch::archive::ExtractWhat {
                key: key.as_deref(),
                arch: arch.as_deref(),
                target: target.as_deref(),
                bundle,
                all,
            },
            &output,
        ),
        Some(Command::Preview { binary, marker }) => {
            let marker = marker.marker(&binary, false)?;
            with_stdout(|out| batch::rewrite::preview(&binary, &marker, common.format(), out))
        }
        Some(Command::Rewrite {
            binary,
            output,
            marker,
            phdr_layout,
        }) => batch::rewrite::rewrite(
            &binary,
            &output,
            &marker.marker(&binary, true)?,
            phdr_layout.into(),
        ),
        Some(Command::Pack(args)) => batch::pack::run(
            &{
                args.ignored.note();
                args.tree()
            },
            &args.output,
            args.dry_run,
            &args.options(&common)?,
            &common.output(),
        ),
        Some(Command::Split(args)) => run_split(&args, &common),
        Some(Command::Combine(args)) => batch::artifacts::combine(
            &{
                args.ignored.note();
                args.shards()?
            },
            &args.output,
            &args.options()?,
            &common.output(),
        ),
        Some(Command::Wheel {
            command: cli::WheelCommand::Split(args),
        }) => batch::wheel::split(
            &{
                args.ignored.note();
                args.wheel()
            },
            &args.output,
            &args.options(common.jobs)?,
            &common.output(),
        ),
        Some(Command::Kernels {
            path,
            targets,
            sort,
            csv,
            top,
        }) => {
            let opts = kpack::kernels::KernelsOptions {
                targets,
                threads: common.jobs,
                ..Default::default()
            };
            let format = batch::Format::from_flags(common.json, csv, top);
            with_stdout(|out| batch::kernels::list(&path, &opts, sort.core(), format, out))
        }
        Some(Command::Diff {
            old,
            new,
            by,
            targets,
            top,
            csv,
            budgets,
            shrink_budgets,
            removed,
            ..
        }) => {
            let gates = batch::diff::Gates {
                grows: budgets,
                shrinks: shrink_budgets,
                removed: removed.into_iter().map(Into::into).collect(),
            };
            run_diff(&old, &new, by, targets, (top, csv), &gates, &common)
        }
        Some(Command::FindKernel {
            pattern,
            path,
            regex,
            targets,
        }) => {
            let opts = kpack::kernels::KernelsOptions {
                targets,
                threads: common.jobs,
                ..Default::default()
            };
            with_stdout(|out| {
                batch::kernels::find(&pattern, regex, &path, &opts, common.format(), out)
            })
        }
        Some(Command::Normalize {
            paths,
            check,
            ignored,
        }) => {
            ignored.note();
            with_stdout(|out| batch::rewrite::normalize(&paths, check, common.format(), out))
        }
        Some(Command::Trace {
            file,
            export,
            output,
            ..
        }) => {
            if export.is_none() && wants_tui(&common) {
                tui::run_timeline(file, common.follow)?;
                return Ok(EXIT_OK);
            }
            batch::trace::run(&file, export.is_some(), output.as_deref(), &common.output())
        }
        Some(Command::Phc { command }) => {
            Ok(phc_launch::main(command, &kpack::phc::Env::from_process()))
        }
        Some(Command::BenchFrames {
            files,
            jobs,
            frames,
        }) => with_stdout(|out| tui::bench::run(files, jobs, frames, out)),
        Some(Command::Verify {
            path,
            reference,
            devices,
            loader,
        }) => {
            let path = cli::reference::either(&path, &reference.artifacts_dir);
            run_verify(&path, &devices, &loader.loaders(), common.format())
        }
        None => {
            // No argument: the demo tree compiled into the binary, unpacked to a
            // temporary directory that lives until we exit.
            let _demo_dir;
            let is_demo = cli.path.is_none();
            let path = match cli.path {
                Some(p) => {
                    not_a_command(&p)?;
                    p
                }
                None => {
                    _demo_dir = demo::unpack()?;
                    _demo_dir.path().join("demo")
                }
            };
            if let Some(new) = cli.new {
                return run_diff(
                    &path,
                    &new,
                    cli::DiffByArg::All,
                    Vec::new(),
                    (20, false),
                    &batch::diff::Gates::default(),
                    &common,
                );
            }
            if is_kpack(&path) {
                if wants_tui(&common) {
                    // A damaged archive opens too, with the reason in its pane.
                    let a = kpack::kpack::Archive::open(&path)
                        .map(|a| a.index)
                        .map_err(|e| e.to_string());
                    tui::run(path, Some(a))?;
                    return Ok(EXIT_OK);
                }
                return with_stdout(|out| batch::archive::inspect(&path, common.format(), out));
            }
            if is_trace(&path) || (common.follow && !path.is_dir()) {
                if wants_tui(&common) {
                    tui::run_timeline(path, common.follow)?;
                    return Ok(EXIT_OK);
                }
                return batch::trace::run(&path, false, None, &common.output());
            }
            run_scan_titled(&path, &common, is_demo.then_some("demo"))
        }
    }
}

/// A bare word that is no file (`kpack-tui inspect x`) is most likely a mistyped
/// command: say so, with the commands, rather than "cannot scan inspect".
fn not_a_command(path: &Path) -> Result<()> {
    let word = path.to_string_lossy();
    if path.exists() || word.contains(['/', '.', '\\']) {
        return Ok(());
    }
    use clap::CommandFactory;
    let commands: Vec<String> = Cli::command()
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .filter(|n| n != "help")
        .collect();
    anyhow::bail!(
        "`{word}` is neither a file nor a command (commands: {}; see --help)",
        commands.join(", ")
    )
}

/// `diff` (and `kpack-tui OLD NEW`): the diff view in a terminal, else a report.
fn run_diff(
    old: &Path,
    new: &Path,
    by: cli::DiffByArg,
    targets: Vec<String>,
    (top, csv): (usize, bool),
    gates: &batch::diff::Gates,
    common: &Common,
) -> Result<i32> {
    let opts = kpack::diff::DiffOptions {
        targets,
        threads: common.jobs,
        // The kernel table needs the code objects of the binaries that differ.
        kernels: matches!(by, cli::DiffByArg::All | cli::DiffByArg::Kernel),
    };
    if !csv && gates.is_empty() && wants_tui(common) {
        let report = kpack::diff::diff(old, new, &opts)
            .with_context(|| format!("cannot compare {} with {}", old.display(), new.display()))?;
        tui::run_diff(report)?;
        return Ok(EXIT_OK);
    }
    let format = batch::Format::from_flags(common.json, csv, top);
    with_stdout(|out| batch::diff::run(old, new, &opts, by.into(), format, gates, out))
}

/// Whether `path` is a file that starts with the `.kpack` magic.
fn is_kpack(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    path.is_file()
        && kpack::fsutil::open_input(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && &magic == kpack::kpack::archive::MAGIC
}

/// Whether `path` is a file that looks like a ninja log or phc trace.
fn is_trace(path: &Path) -> bool {
    use std::io::Read;
    let mut head = vec![0u8; 4096];
    let n = kpack::fsutil::open_input(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    path.is_file() && kpack::trace::looks_like_trace(&head[..n])
}

/// Whether to open the terminal UI: a terminal on both ends and no batch flag.
fn wants_tui(common: &Common) -> bool {
    !common.tui.no_tui && !common.json && io::stdout().is_terminal() && io::stdin().is_terminal()
}

/// Run `f` with a buffered stdout, flushing at the end.
fn run_verify(
    path: &Path,
    devices: &[String],
    loaders: &[kpack::kpack::resolve::Loader],
    format: batch::Format,
) -> Result<i32> {
    match (path.is_dir(), devices.is_empty()) {
        (true, false) => {
            with_stdout(|out| batch::pack::verify_devices(path, devices, loaders, format, out))
        }
        (false, false) => anyhow::bail!(
            "{}: --device needs a packed tree ({} given)",
            path.display(),
            devices.join(", ")
        ),
        (true, true) => with_stdout(|out| batch::pack::verify(path, loaders, format, out)),
        (false, true) => with_stdout(|out| batch::archive::verify(path, format, out)),
    }
}

/// `split`: one artifact, or every artifact under `--batch-artifact-parent-dir`.
fn run_split(args: &cli::SplitArgs, common: &Common) -> Result<i32> {
    args.ignored.note();
    let Some(parent) = &args.batch_artifact_parent_dir else {
        let dir = cli::reference::either(&args.artifact_dir, &args.reference.artifact_dir_flag);
        let prefix = args.artifact_prefix.as_deref().unwrap_or_default();
        return batch::artifacts::split(
            &dir,
            &args.output,
            &args.options(common.jobs, prefix)?,
            &common.output(),
        );
    };
    if common.json {
        anyhow::bail!(
            "--json reports one artifact: split each with --artifact-dir, or leave out --json"
        );
    }
    let (found, skipped) = kpack::artifacts::manifest::batch_artifacts(parent)?;
    for s in &skipped {
        eprintln!("note: skipped {s}");
    }
    let mut failed = Vec::new();
    for a in &found {
        let done = args
            .options(common.jobs, &a.prefix)
            .and_then(|o| batch::artifacts::split(&a.dir, &args.output, &o, &common.output()));
        if let Err(e) = done {
            eprintln!("kpack-tui: error: {e:#}");
            failed.push(a.dir.display().to_string());
        }
    }
    if !failed.is_empty() {
        anyhow::bail!(
            "{} artifact(s) failed to split: {}",
            failed.len(),
            failed.join(", ")
        );
    }
    if found.is_empty() {
        anyhow::bail!("{}: no artifact to split in it", parent.display());
    }
    Ok(EXIT_OK)
}

fn with_stdout(f: impl FnOnce(&mut dyn Write) -> Result<i32>) -> Result<i32> {
    let out = io::stdout();
    let mut out = io::BufWriter::new(out.lock());
    let code = f(&mut out)?;
    out.flush()?;
    Ok(code)
}

fn run_scan(path: &Path, common: &Common) -> Result<i32> {
    run_scan_titled(path, common, None)
}

/// A scan whose root is reported as `title` (the demo, unpacked to a temporary
/// directory, is `demo`, not that directory).
fn run_scan_titled(path: &Path, common: &Common, title: Option<&str>) -> Result<i32> {
    if wants_tui(common) {
        if !path.exists() {
            anyhow::bail!("{}: no such file or directory", path.display());
        }
        tui::run_titled(path.to_path_buf(), None, title.map(str::to_string))?;
        return Ok(EXIT_OK);
    }
    let progress = batch::progress::ScanProgress::new();
    let opts = ScanOptions {
        threads: common.jobs,
        deep: common.deep,
        ..Default::default()
    };
    let root = title.map_or_else(|| path.display().to_string(), str::to_string);
    // Streamed: each report is written (JSON) or dropped (text keeps the binaries it
    // lists) as it comes, so a tree of any size takes the memory of a window of it.
    let report = if common.json {
        let out = io::stdout();
        let mut out = io::BufWriter::new(out.lock());
        let head = batch::scan::empty_report(root.clone());
        let mut doc =
            batch::jsonstream::JsonArrayStream::new(&mut out, "kpack-tui.scan/2", "files", &head)?;
        let mut failed = None;
        let mut report = scan::scan_each(path, &opts, &progress, &mut |f| {
            if failed.is_none() {
                failed = doc.item(&f).err();
            }
        })
        .with_context(|| format!("cannot scan {}", path.display()))?;
        progress.finish();
        if let Some(e) = failed {
            return Err(e.into());
        }
        report.root = root;
        doc.finish(&report)?;
        out.flush()?;
        report
    } else {
        let keep_all = !path.is_dir();
        let mut kept = Vec::new();
        let mut report = scan::scan_each(path, &opts, &progress, &mut |f| {
            if keep_all || batch::scan::shown(&f, common.long) {
                kept.push(f)
            }
        })
        .with_context(|| format!("cannot scan {}", path.display()))?;
        progress.finish();
        report.root = root;
        report.files = kept;
        let out = io::stdout();
        let mut out = io::BufWriter::new(out.lock());
        batch::scan::print_text(&mut out, &report, common.long)?;
        out.flush()?;
        report
    };
    Ok(if common.strict && report.has_diagnostics() {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}
