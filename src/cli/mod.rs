//! Command-line arguments.

mod args;
mod convert;
pub mod generate;
pub mod reference;

pub use args::*;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Inspect ROCm fat binaries and install trees; pack device code into .kpack archives.
///
/// `kpack-tui PATH` inspects PATH: a directory (every file classified, bundles,
/// architectures, sizes), a single binary or bundle file, a Python wheel, a .kpack
/// archive or a compile trace; `kpack-tui OLD NEW` compares two builds (as `diff`).
/// `--no-tui` prints a report instead of opening the terminal UI; `--json` prints the
/// full model.
#[derive(Debug, Parser)]
#[command(
    name = "kpack-tui",
    version = crate::version::VERSION,
    override_usage = "kpack-tui [OPTIONS] [PATH] [NEW]\n       kpack-tui [OPTIONS] <COMMAND>"
)]
pub struct Cli {
    /// Print a shell completion script or the man page to stdout, or write the JSON
    /// Schemas of every `--json` output into PATH, and exit.
    #[arg(long, value_enum, value_name = "KIND")]
    pub generate: Option<generate::GenerateKind>,

    /// What to open: an install tree, a binary, a bundle file, a wheel, an archive, a
    /// trace. Default: the bundled demo tree.
    pub path: Option<PathBuf>,

    /// A second path: compare PATH (old) with it (new), as `kpack-tui diff PATH NEW`.
    #[arg(value_name = "NEW")]
    pub new: Option<PathBuf>,

    #[command(flatten)]
    pub common: Common,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Options of every command.
#[derive(Debug, Args, Clone)]
pub struct Common {
    /// `--no-tui`.
    #[command(flatten)]
    pub tui: NoTuiFlag,

    /// Print machine-readable JSON on stdout (no terminal UI).
    #[arg(long, global = true)]
    pub json: bool,

    /// Exit with status 1 when any diagnostic was raised.
    #[arg(long)]
    pub strict: bool,

    /// Worker threads (default: all cores).
    #[arg(
        short = 'j',
        long,
        global = true,
        env = "KPACK_JOBS",
        default_value_t = 0
    )]
    pub jobs: usize,

    /// Print every file's bundles, not only the summary.
    #[arg(short, long)]
    pub long: bool,

    /// Trace timeline: keep reading a trace that a running build is still writing
    /// (the file may not exist yet).
    #[arg(long)]
    pub follow: bool,

    /// Search every byte of every file for embedded device code (offload bundles,
    /// AMDGPU code objects), not only binaries' data sections.
    #[arg(long)]
    pub deep: bool,
}

/// `--no-tui`, for the commands that open the terminal UI in a terminal.
#[derive(Debug, Args, Clone, Default)]
pub struct NoTuiFlag {
    /// Print a report instead of opening the terminal UI (env KPACK_NO_TUI:
    /// 1/0, true/false, yes/no, on/off).
    #[arg(
        long,
        env = "KPACK_NO_TUI",
        value_parser = clap::builder::BoolishValueParser::new(),
        action = clap::ArgAction::SetTrue,
        hide_env_values = true
    )]
    pub no_tui: bool,
}

/// `--strict`, for the commands that report diagnostics.
#[derive(Debug, Args, Clone, Default)]
pub struct StrictFlag {
    /// Exit with status 1 when any diagnostic was raised (for pack: any warning is
    /// fatal and nothing is written).
    #[arg(long)]
    pub strict: bool,
}

/// `--long`, for the commands with a longer report.
#[derive(Debug, Args, Clone, Default)]
pub struct LongFlag {
    /// Print every file's bundles (or every planned file), not only the summary.
    #[arg(short, long)]
    pub long: bool,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Scan a tree or file (the same as `kpack-tui PATH`).
    Scan {
        /// Directory or file to scan.
        path: PathBuf,
        /// Print a table as comma-separated values instead of the report: `targets`
        /// (device bytes per target) or `matrix` (bytes per file per target).
        #[arg(long, value_enum)]
        csv: Option<ScanCsvArg>,
        #[command(flatten)]
        no_tui: NoTuiFlag,
        #[command(flatten)]
        long: LongFlag,
        #[command(flatten)]
        strict: StrictFlag,
        /// Search every byte of every file for embedded device code, not only
        /// binaries' data sections.
        #[arg(long)]
        deep: bool,
    },
    /// Extract code objects: from a .kpack archive (KEY ARCH, or --all), or from a fat
    /// binary or bundle file (--target T [--bundle K], or --all), byte-identical to
    /// what clang-offload-bundler --unbundle writes.
    Extract {
        /// The archive, fat binary or bundle file.
        input: PathBuf,
        /// Archive: the binary key, e.g. `lib/libfoo.so#0`.
        key: Option<String>,
        /// Archive: the target ID, e.g. `gfx90a:xnack+`.
        arch: Option<String>,
        /// Fat binary: the target ID to extract.
        #[arg(long, conflicts_with_all = ["key", "arch"])]
        target: Option<String>,
        /// Fat binary: the bundle (translation unit) index (default 0).
        #[arg(long, requires = "target")]
        bundle: Option<u32>,
        /// Extract every code object to DIR (archive: DIR/<key path>#<TU>/<arch>.hsaco;
        /// binary: DIR/<file name>#<bundle>/<target>.hsaco).
        #[arg(long, conflicts_with_all = ["key", "arch", "target"])]
        all: bool,
        /// Output file (one code object) or directory (--all).
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Show the host-only rewrite of a binary without writing anything: sections and
    /// program headers before and after, bytes removed, the marker, the wrappers.
    Preview {
        /// The fat binary.
        binary: PathBuf,
        #[command(flatten)]
        marker: MarkerArgs,
    },
    /// Rewrite a fat binary host-only: device code removed, wrappers pointed at a
    /// .rocm_kpack_ref marker naming where the kernels are.
    Rewrite {
        /// The fat binary.
        binary: PathBuf,
        /// Output file (written atomically, with the input's mode).
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        marker: MarkerArgs,
        /// Where a grown program-header table goes: `in-place` (the default, which
        /// GNU strip keeps) or `reference` (a new segment, as ROCm's transform writes
        /// it; for testing what packaging tools do to such binaries).
        #[arg(long, value_enum, default_value = "in-place", hide = true)]
        phdr_layout: PhdrLayoutArg,
    },
    /// Analyse a compile trace (ninja log v5-v7, or a phc trace): wall time,
    /// parallelism, per-arch device time, critical paths; or export it for Perfetto.
    Trace {
        /// The trace file.
        file: PathBuf,
        /// Export format.
        #[arg(long, value_enum)]
        export: Option<ExportArg>,
        /// Output file of the export.
        #[arg(short, long, requires = "export")]
        output: Option<PathBuf>,
        /// Keep reading a trace that a running build is still writing (the file may
        /// not exist yet).
        #[arg(long)]
        follow: bool,
        #[command(flatten)]
        no_tui: NoTuiFlag,
        #[command(flatten)]
        strict: StrictFlag,
    },
    /// Run the phc compile launcher (the same as the `phc` binary):
    /// `kpack-tui phc -- hipcc -c a.hip --offload-arch=gfx942 --offload-arch=gfx90a -o a.o`.
    Phc {
        /// The compiler and its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
    /// Time drawing every view on synthetic models (for bench/run.sh).
    #[command(hide = true)]
    BenchFrames {
        /// Files in the synthetic tree model.
        #[arg(long, default_value_t = 100_000)]
        files: usize,
        /// Jobs in the synthetic trace.
        #[arg(long, default_value_t = 100_000)]
        jobs: usize,
        /// Frames per view.
        #[arg(long, default_value_t = 50)]
        frames: usize,
    },
    /// Pack a tree: device code into .kpack archives (one per target ID, or per family),
    /// binaries rewritten host-only, everything else copied; written to a temporary
    /// directory, verified, then renamed to OUT.
    Pack(PackArgs),
    /// Split one ROCm build artifact (artifact_manifest.txt + stage prefixes) as the
    /// ROCm build does: OUT/<AP>_generic (host-only binaries, everything not
    /// arch-specific) and OUT/<AP>_<target> per target ID (its archive and its
    /// kernel-database files), each with its manifest.
    Split(SplitArgs),
    /// Python wheels: `wheel split` turns a fat wheel into a host wheel and one
    /// device wheel per rocm-bootstrap bundle key, installable with stock pip.
    /// (To look inside a wheel: `kpack-tui WHEEL`.)
    Wheel {
        /// What to do.
        #[command(subcommand)]
        command: WheelCommand,
    },
    /// Combine the split outputs of several build shards into one set of artifacts,
    /// after proving they fit together: generic files identical (host-only binaries:
    /// same marker and bundle indices), a target delivered twice identical both
    /// times. Differences are listed and refused unless --prefer names a shard.
    Combine(CombineArgs),
    /// Put the program headers of packed executables back where EL8 (Linux 4.18)
    /// kernels look for them, after llvm-strip or another tool moved them: every
    /// ELF file under PATHs is checked and repaired in place (atomically, mode
    /// kept). With --check nothing is written and the exit status is 1 when a file
    /// is not compliant.
    Normalize {
        /// Files or directories (recursive; symlinks are not followed).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Report only; exit 1 when any file is not compliant.
        #[arg(long)]
        check: bool,
        #[command(flatten)]
        ignored: reference::Ignored,
    },
    /// List every kernel of every code object under PATH (a tree, a binary, a bundle,
    /// a .kpack archive, a code object; a host-only binary given alone follows its
    /// marker to its archives): code size, registers, LDS, scratch, spills.
    Kernels {
        /// What to read.
        path: PathBuf,
        /// Only these targets (exact IDs, or processors with all their variants).
        /// Comma lists or repeated.
        #[arg(long = "target", value_delimiter = ',')]
        targets: Vec<String>,
        /// Sort order (largest first, names A-Z).
        #[arg(long, value_enum, default_value = "size")]
        sort: KernelSortArg,
        /// Comma-separated values (one row per kernel) instead of text.
        #[arg(long, conflicts_with = "json")]
        csv: bool,
        /// Show at most N rows in the text output (0: all).
        #[arg(long, default_value_t = 50)]
        top: usize,
    },
    /// Find kernels by name (substring of the mangled or demangled name, or a regex
    /// with --regex) under PATH: every binary, bundle and target holding a match.
    FindKernel {
        /// The name, or part of it.
        pattern: String,
        /// What to search.
        path: PathBuf,
        /// PATTERN is a regular expression.
        #[arg(long)]
        regex: bool,
        /// Only these targets.
        #[arg(long = "target", value_delimiter = ',')]
        targets: Vec<String>,
    },
    /// Compare two builds (trees, binaries or archives, of any kind against any):
    /// device bytes per target, files added/removed/grown/shrunk, kernels, classes.
    /// With --fail-if-grows, exit 1 when device code grew past a budget.
    Diff {
        /// The old build.
        old: PathBuf,
        /// The new build.
        new: PathBuf,
        #[command(flatten)]
        no_tui: NoTuiFlag,
        /// Which table to print (all by default).
        #[arg(long, value_enum, default_value = "all")]
        by: DiffByArg,
        /// Only these targets (exact IDs, or processors). Comma lists or repeated.
        #[arg(long = "target", value_delimiter = ',')]
        targets: Vec<String>,
        /// Rows per table in the text output (0: all).
        #[arg(long, default_value_t = 20)]
        top: usize,
        /// The chosen table (--by; target by default) as comma-separated values.
        #[arg(long, conflicts_with = "json")]
        csv: bool,
        /// Fail (exit 1) when device code grows more than this: `5%`, `10MiB`, or per
        /// target `gfx942=2%`. Repeat for several budgets.
        #[arg(long = "fail-if-grows", value_name = "BUDGET", value_parser = parse_budget)]
        budgets: Vec<kpack::diff::Budget>,
        /// Fail (exit 1) when device code shrinks more than this: `5%`, `10MiB`, or
        /// per target `gfx90a=2%` (a target losing code is a release that lost
        /// kernels). Repeat for several budgets.
        #[arg(long = "fail-if-shrinks", value_name = "BUDGET", value_parser = parse_budget)]
        shrink_budgets: Vec<kpack::diff::Budget>,
        /// Fail (exit 1) when any of these went missing: targets, libraries,
        /// kernel-database files, kernels, files. Comma lists or repeated.
        #[arg(
            long = "fail-if-removed",
            value_enum,
            value_delimiter = ',',
            value_name = "WHAT"
        )]
        removed: Vec<RemovalArg>,
    },
    /// Check a .kpack archive (every frame decodes to its size, ordinals dense, ranges
    /// inside the file) or a packed tree (archives sound, every host-only binary's
    /// marker resolves to archives holding its kernels). Exit 0 when sound, 1 with
    /// the list of faults.
    Verify {
        /// An archive or a packed tree.
        #[arg(required_unless_present = "artifacts_dir")]
        path: Option<PathBuf>,
        #[command(flatten)]
        reference: reference::VerifyInput,
        /// Answer for one device instead: would a process on this GPU (an ISA such
        /// as `gfx90a:sramecc+:xnack-`) find every kernel of every binary? Lists what
        /// it would not. Repeat for several devices.
        #[arg(long = "device", value_name = "ISA")]
        devices: Vec<String>,
        /// Which loader generations a kernel must resolve through, on every device
        /// ISA that can run it: `first-match` (ROCm up to 7.14 and the reference
        /// runtime: the first archive listing a target the device accepts decides),
        /// `fall-through` (ROCm after Aug 2026: a miss tries the next archive),
        /// `toc-scan` (resolvers that look for the key in each TOC), or `all`.
        #[arg(
            long = "loader",
            value_enum,
            default_value = "all",
            value_name = "GENERATION"
        )]
        loader: LoaderArg,
    },
}

/// `verify --loader`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LoaderArg {
    /// ROCm up to 7.14 and the reference runtime.
    FirstMatch,
    /// ROCm after Aug 2026.
    FallThrough,
    /// TOC-scanning resolvers.
    TocScan,
    /// Every generation.
    All,
}

impl LoaderArg {
    /// The generations to check.
    pub fn loaders(self) -> Vec<kpack::kpack::resolve::Loader> {
        use kpack::kpack::resolve::Loader;
        match self {
            LoaderArg::FirstMatch => vec![Loader::FirstMatch],
            LoaderArg::FallThrough => vec![Loader::FallThrough],
            LoaderArg::TocScan => vec![Loader::TocScan],
            LoaderArg::All => Loader::ALL.to_vec(),
        }
    }
}

/// `scan --csv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScanCsvArg {
    /// Device bytes per target.
    Targets,
    /// Code-object bytes per file (rows) and target (columns).
    Matrix,
}

/// `diff --by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DiffByArg {
    /// Every table.
    All,
    /// Per target.
    Target,
    /// Per file.
    File,
    /// Per kernel.
    Kernel,
    /// Per class of file.
    Class,
}

fn parse_budget(s: &str) -> Result<kpack::diff::Budget, String> {
    kpack::diff::Budget::parse(s)
}

/// `kernels --sort`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KernelSortArg {
    /// Code size.
    Size,
    /// VGPRs.
    Vgpr,
    /// SGPRs.
    Sgpr,
    /// LDS bytes.
    Lds,
    /// Scratch bytes.
    Scratch,
    /// Spilled registers.
    Spills,
    /// Name.
    Name,
    /// Target (by processor number), then name.
    Target,
}

impl KernelSortArg {
    /// The core's sort order.
    pub fn core(self) -> kpack::kernels::SortBy {
        use kpack::kernels::SortBy;
        match self {
            KernelSortArg::Size => SortBy::Size,
            KernelSortArg::Vgpr => SortBy::Vgpr,
            KernelSortArg::Sgpr => SortBy::Sgpr,
            KernelSortArg::Lds => SortBy::Lds,
            KernelSortArg::Scratch => SortBy::Scratch,
            KernelSortArg::Spills => SortBy::Spills,
            KernelSortArg::Name => SortBy::Name,
            KernelSortArg::Target => SortBy::Target,
        }
    }
}

impl Cli {
    /// Parse the process arguments. `--no-tui` is listed only by the commands that
    /// can open the terminal UI; the others accept it silently (scripts pass it
    /// everywhere, as `KPACK_NO_TUI` is).
    pub fn parse_args() -> Cli {
        use clap::{CommandFactory, FromArgMatches};
        let mut cmd = Cli::command();
        let names: Vec<String> = cmd
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .filter(|n| !["scan", "trace", "diff"].contains(&n.as_str()))
            .collect();
        for n in names {
            cmd = cmd.mut_subcommand(n, |sc| {
                sc.arg(
                    clap::Arg::new("no_tui_accepted")
                        .long("no-tui")
                        .hide(true)
                        .action(clap::ArgAction::SetTrue),
                )
            });
        }
        let matches = cmd.get_matches();
        let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        if let (Some(path), Some(_)) = (&cli.path, &cli.command) {
            Cli::command()
                .error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!(
                        "give a PATH or a command, not both ('{}' came before the command)",
                        path.display()
                    ),
                )
                .exit();
        }
        cli
    }

    /// The options every command reads, with the per-command flags (`--no-tui`,
    /// `--long`, `--strict`, `--follow` given after a subcommand) folded in.
    pub fn effective_common(&self) -> Common {
        let mut c = self.common.clone();
        match &self.command {
            Some(Command::Scan {
                no_tui,
                long,
                strict,
                deep,
                ..
            }) => {
                c.tui.no_tui |= no_tui.no_tui;
                c.long |= long.long;
                c.strict |= strict.strict;
                c.deep |= *deep;
            }
            Some(Command::Trace {
                follow,
                no_tui,
                strict,
                ..
            }) => {
                c.follow |= *follow;
                c.tui.no_tui |= no_tui.no_tui;
                c.strict |= strict.strict;
            }
            Some(Command::Diff { no_tui, .. }) => c.tui.no_tui |= no_tui.no_tui,
            Some(Command::Pack(p)) => {
                c.long |= p.long.long;
                c.strict |= p.strict.strict;
            }
            _ => {}
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn no_tui_env_takes_boolish_values_and_level_takes_max() {
        for (v, want) in [
            ("1", true),
            ("yes", true),
            ("true", true),
            ("0", false),
            ("no", false),
        ] {
            // The environment is process-wide (tests/cli_scan.rs sets it on a child);
            // here the flag's own value parser.
            let p = clap::builder::BoolishValueParser::new();
            let cmd = clap::Command::new("t");
            let arg = clap::Arg::new("a");
            let got = clap::builder::TypedValueParser::parse_ref(&p, &cmd, Some(&arg), v.as_ref());
            assert_eq!(got.unwrap(), want, "{v}");
        }
        assert_eq!(
            parse_level("max").unwrap(),
            kpack::kpack::archive::LEVEL_MAX
        );
        assert_eq!(parse_level("7").unwrap(), 7);
        assert!(parse_level("0").is_err() && parse_level("fast").is_err());
    }

    #[test]
    fn path_and_flags_parse() {
        let c = Cli::try_parse_from(["kpack-tui", "assets/demo", "--no-tui", "--json"]).unwrap();
        assert_eq!(c.path.unwrap(), PathBuf::from("assets/demo"));
        assert!(c.common.tui.no_tui && c.common.json);
        let c = Cli::try_parse_from(["kpack-tui", "scan", "x", "--strict"]).unwrap();
        assert!(matches!(c.command, Some(Command::Scan { .. })));
        assert!(c.effective_common().strict);
        let c =
            Cli::try_parse_from(["kpack-tui", "extract", "a.kpack", "--all", "-o", "d"]).unwrap();
        assert!(matches!(
            c.command,
            Some(Command::Extract { all: true, .. })
        ));
        // KEY ARCH (archive) and --target (binary) are two forms, never mixed.
        assert!(
            Cli::try_parse_from([
                "kpack-tui",
                "extract",
                "a.kpack",
                "k#0",
                "gfx900",
                "--target",
                "gfx900",
                "-o",
                "d"
            ])
            .is_err()
        );
        assert!(
            Cli::try_parse_from(["kpack-tui", "extract", "b.so", "--bundle", "1", "-o", "d"])
                .is_err()
        );
        let c = Cli::try_parse_from([
            "kpack-tui",
            "extract",
            "a.kpack",
            "k#0",
            "gfx900",
            "-o",
            "f",
        ])
        .unwrap();
        assert!(matches!(
            c.command,
            Some(Command::Extract { all: false, .. })
        ));
    }
}
