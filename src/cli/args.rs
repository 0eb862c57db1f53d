//! The arguments of the commands that write (`pack`, `split`, `combine`, `wheel
//! split`, `rewrite`'s layout, `diff`'s gates) and the value sets of their options.

use super::*;

/// Arguments of `split`.
#[derive(Debug, Args, Clone)]
pub struct SplitArgs {
    /// The artifact directory (holds artifact_manifest.txt).
    #[arg(required_unless_present_any = ["artifact_dir_flag", "batch_artifact_parent_dir"])]
    pub artifact_dir: Option<PathBuf>,
    #[command(flatten)]
    pub reference: reference::SplitInput,
    /// Split every artifact directory under DIR instead: each immediate
    /// subdirectory with a manifest, named <prefix>_<target or family> (those
    /// ending _generic are skipped), with the prefix its name gives, into one OUT.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with_all = ["artifact_dir", "artifact_dir_flag", "artifact_prefix"]
    )]
    pub batch_artifact_parent_dir: Option<PathBuf>,
    /// Output directory (created; artifacts of other prefixes in it are left alone).
    #[arg(short, long, alias = "output-dir")]
    pub output: PathBuf,
    /// `<artifact>_<component>` (e.g. blas_lib): names the artifacts and archives.
    #[arg(long, required_unless_present = "batch_artifact_parent_dir")]
    pub artifact_prefix: Option<String>,
    /// Keep only these targets' code objects and database files (processor names;
    /// features ignored, gfx942:xnack+ is gfx942). Comma lists or repeated. Default:
    /// every target found.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    pub gpu_targets: Vec<String>,
    /// Kernel-database handlers, in precedence order: rocblas, hipblaslt, hipsparselt,
    /// aotriton, miopen, composablekernel, hipkernelprovider, hotswap_cache, or `all`.
    /// Default: none (database files stay generic), as in the ROCm build.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    pub split_databases: Vec<String>,
    /// zstd level of the archives: 1-22, or `max`.
    #[arg(long, alias = "compression-level", default_value = "3", value_parser = parse_level)]
    pub level: i32,
    /// Replace this prefix's artifacts if OUT already holds them.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub ignored: reference::Ignored,
}

/// `wheel` subcommands.
#[derive(Debug, Subcommand, Clone)]
pub enum WheelCommand {
    /// Split WHEEL into OUT/<its own name> (host-only binaries with the
    /// `@GFXARCH@` marker, METADATA with `device-<target>` extras) and
    /// OUT/<prefix>_<key>-<version>-<tag>.whl per bundle key (the archives
    /// <overlay>/.kpack/<group>_<target>.kpack and database files).
    /// Example: `kpack-tui wheel split torch-2.10.0-cp313-cp313-linux_x86_64.whl -o dist
    /// --device-package-prefix amd-torch-device --overlay-root torch`.
    Split(WheelSplitArgs),
}

/// Arguments of `wheel split`.
#[derive(Debug, Args, Clone)]
pub struct WheelSplitArgs {
    /// The fat wheel (never modified).
    #[arg(required_unless_present = "input")]
    pub wheel: Option<PathBuf>,
    #[command(flatten)]
    pub reference: reference::WheelInput,
    /// Output directory (created; must not hold the input wheel).
    #[arg(short, long, alias = "output-dir")]
    pub output: PathBuf,
    /// Device wheels are named <prefix>-<bundle key> (amd-torch-device-gfx942).
    #[arg(long)]
    pub device_package_prefix: String,
    /// Directory inside the wheel that receives .kpack/ (e.g. torch); only fat
    /// binaries under it are split.
    #[arg(long)]
    pub overlay_root: String,
    /// Extra Requires-Dist of every device wheel; @GFXARCH@ becomes the bundle key
    /// (such lines are left out of family and sub-family wheels). Repeatable.
    #[arg(long, value_name = "REQUIREMENT", num_args = 1..)]
    pub device_requires_dist: Vec<String>,
    /// Keep only these targets (target IDs or processors; gfx90a keeps
    /// gfx90a:xnack+ too). Comma lists or repeated. Default: every target.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    pub target: Vec<String>,
    /// Keep only targets under these rocm-bootstrap bundle keys (gfx9, gfx9_4,
    /// gfx11, gfx110x, gfx942…). Comma lists or repeated.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    pub family: Vec<String>,
    /// Kernel-database handlers, in precedence order (as for `split`), or
    /// `torch-fat` (the reference's preset: aotriton). Default: none.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    pub databases: Vec<String>,
    /// zstd level of the archives: 1-22, or `max`.
    #[arg(long, alias = "compression-level", default_value = "3", value_parser = parse_level)]
    pub level: i32,
    /// Deflate level (0-9) of rewritten binaries inside the host wheel.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(0..=9))]
    pub zip_level: u32,
    /// Split a wheel whose RECORD does not match its contents (warned); without it
    /// such a wheel is refused.
    #[arg(long)]
    pub ignore_record: bool,
    /// Replace wheels of the same names in OUT.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub ignored: reference::Ignored,
}

/// Arguments of `combine`.
#[derive(Debug, Args, Clone)]
pub struct CombineArgs {
    /// The shards: each a `split` output directory (<component>_generic,
    /// <component>_<target>, …).
    #[arg(required_unless_present = "input_shards_dir")]
    pub shards: Vec<PathBuf>,
    #[command(flatten)]
    pub reference: reference::CombineInput,
    /// Output directory (created; other artifacts in it are left alone).
    #[arg(short, long, alias = "output-dir")]
    pub output: PathBuf,
    /// Target groups (the reference's JSON: architecture_groups): one output
    /// artifact <component>_<group> per group instead of one per target.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Where shards differ, take this shard's copy (its directory name or path)
    /// instead of refusing.
    #[arg(long, value_name = "SHARD")]
    pub prefer: Option<String>,
    /// Replace output artifacts that already exist.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub ignored: reference::Ignored,
}

/// Arguments of `pack`.
#[derive(Debug, Args, Clone)]
pub struct PackArgs {
    /// The install tree to pack.
    #[arg(required_unless_present = "input")]
    pub tree: Option<PathBuf>,
    #[command(flatten)]
    pub reference: reference::PackInput,
    #[command(flatten)]
    pub ignored: reference::Ignored,
    #[command(flatten)]
    pub long: LongFlag,
    #[command(flatten)]
    pub strict: StrictFlag,
    /// Output directory (must not be inside TREE).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Group name: archives are `.kpack/<group>_<target>.kpack` (or `_<family>`).
    #[arg(long, alias = "group-name")]
    pub group: String,
    /// Select a family preset (gfx90X, gfx94X, gfx950, gfx101X, gfx103X, gfx110X,
    /// gfx115X, gfx120X, gfx125X) or NAME=arch,arch. Repeat, or list presets with commas.
    #[arg(long = "family")]
    pub families: Vec<String>,
    /// Select a target ID (`gfx90a:xnack+`, only that ID) or a processor (`gfx90a`,
    /// with its feature variants). Repeat, or list with commas.
    #[arg(long = "target", value_delimiter = ',')]
    pub targets: Vec<String>,
    /// Select every target with code in the tree.
    #[arg(long)]
    pub all: bool,
    /// One archive per target ID (the default: markers hold one @GFXARCH@ pattern, as
    /// ROCm ships) or one per family (markers list each archive).
    #[arg(long, value_enum, default_value_t = ArchivePerArg::Target)]
    pub archive_per: ArchivePerArg,
    /// combined: one tree with .kpack/ at its root; split: OUT/generic plus one overlay
    /// per archive (OUT/<target>, or OUT/<family> with --archive-per family).
    #[arg(long, value_enum, default_value_t = LayoutArg::Combined)]
    pub layout: LayoutArg,
    /// Code for archs outside every family: error (stop before writing) or drop.
    #[arg(long, value_enum, default_value_t = UnassignedArg::Error)]
    pub unassigned: UnassignedArg,
    /// Kernel compression in the archives.
    #[arg(long, value_enum, default_value_t = CompressionArg::Zstd)]
    pub compression: CompressionArg,
    /// zstd level: 1-22, or `max` (22 with long-distance matching and a window as large as each kernel;
    /// slower, for bundles that were stored compressed).
    #[arg(long, alias = "compression-level", default_value = "3", value_parser = parse_level)]
    pub level: i32,
    /// Archives holding the kernels of host-only binaries in TREE (files, or
    /// directories of .kpack files); searched before those their markers name.
    /// Repeat for several.
    #[arg(long = "archives", value_name = "PATH")]
    pub archives: Vec<PathBuf>,
    /// Copy damaged fat binaries as they are (with their device code) instead of
    /// refusing to pack.
    #[arg(long)]
    pub copy_damaged: bool,
    /// Print the plan without writing anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Skip verifying the output.
    #[arg(long)]
    pub no_verify: bool,
    /// Replace OUT when it holds a previous pack's output (its ledger); any other
    /// non-empty OUT is refused.
    #[arg(long)]
    pub force: bool,
}

/// `--level`: 1-22 or `max`.
pub(super) fn parse_level(s: &str) -> Result<i32, String> {
    if s.eq_ignore_ascii_case("max") {
        return Ok(kpack::kpack::archive::LEVEL_MAX);
    }
    match s.parse::<i32>() {
        Ok(n) if (1..=22).contains(&n) => Ok(n),
        _ => Err(format!("{s:?} is not a zstd level: write 1-22 or max")),
    }
}

/// `--export` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ExportArg {
    /// Chrome trace-event JSON (Perfetto, chrome://tracing).
    Chrome,
}

/// `--archive-per` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ArchivePerArg {
    /// `.kpack/<group>_<target>.kpack`, one per target ID.
    Target,
    /// `.kpack/<group>_<family>.kpack`, one per selected family.
    Family,
}

/// `--layout` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LayoutArg {
    /// One tree.
    Combined,
    /// Generic tree plus one overlay per archive (per target, or per family).
    Split,
}

/// `--unassigned` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum UnassignedArg {
    /// Stop before writing anything.
    Error,
    /// Leave such code out and report it.
    Drop,
}

/// `--compression` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CompressionArg {
    /// Raw kernels.
    None,
    /// One zstd frame per kernel.
    Zstd,
}

/// The marker written by preview and rewrite.
#[derive(Debug, Args, Clone)]
pub struct MarkerArgs {
    /// TOC key of the binary without `#N` (default: the binary's file name).
    #[arg(long)]
    pub kernel_name: Option<String>,
    /// Archive path or pattern, relative to the binary or absolute; `@GFXARCH@` is
    /// replaced by the device's target ID at run time. Repeat for several.
    #[arg(long = "search-path")]
    pub search_paths: Vec<String>,
}

/// `rewrite --phdr-layout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PhdrLayoutArg {
    /// Grown in place (sections after it move beside the marker).
    InPlace,
    /// Moved into the new segment, as the reference transform does.
    Reference,
}

impl From<PhdrLayoutArg> for kpack::elf::rewrite::PhdrLayout {
    fn from(a: PhdrLayoutArg) -> Self {
        match a {
            PhdrLayoutArg::InPlace => Self::InPlace,
            PhdrLayoutArg::Reference => Self::Reference,
        }
    }
}

/// `diff --fail-if-removed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RemovalArg {
    /// A target whose device code is gone.
    Targets,
    /// A shared library (`.so`, `.so.N`, `.dll`).
    Libraries,
    /// A kernel-database file (Tensile, MIOpen, hipBLASLt…).
    Databases,
    /// A kernel.
    Kernels,
    /// Any file.
    Files,
}

impl From<RemovalArg> for kpack::diff::Removal {
    fn from(a: RemovalArg) -> Self {
        match a {
            RemovalArg::Targets => Self::Targets,
            RemovalArg::Libraries => Self::Libraries,
            RemovalArg::Databases => Self::Databases,
            RemovalArg::Kernels => Self::Kernels,
            RemovalArg::Files => Self::Files,
        }
    }
}
