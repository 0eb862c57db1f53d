//! The reference tools' spellings (`rocm_kpack.tools`: `split_artifacts`,
//! `recombine_artifacts`, `split_python_wheels`, `normalize_phdr_tree`,
//! `verify_artifacts`, `pack_tree`), accepted as hidden flags so that a build script
//! switches by changing the program name (docs/migrating-from-rocm-kpack.md).
//! Where an option of ours has an obvious equivalent it carries the reference's
//! name as a hidden `alias`; what is here are the reference's spellings of our
//! positional arguments, and its flags that have no effect here.

use clap::Args;
use std::path::{Path, PathBuf};

/// Reference flags kpack-tui does not need. Accepted, and each named on stderr as
/// ignored (with why), so nothing is silently different.
#[derive(Debug, Args, Clone, Default)]
pub struct Ignored {
    /// The reference's `--verbose`/`-v` (kpack-tui's reports already name every
    /// change; `--long` prints more).
    #[arg(short = 'v', long = "verbose", hide = true)]
    pub verbose: bool,
    /// The reference's `--tmp-dir` (kpack-tui stages inside the output directory).
    #[arg(long = "tmp-dir", value_name = "DIR", hide = true)]
    pub tmp_dir: Option<PathBuf>,
    /// The reference's `--clang-offload-bundler` (kpack-tui reads and writes offload
    /// bundles itself).
    #[arg(long = "clang-offload-bundler", value_name = "PATH", hide = true)]
    pub clang_offload_bundler: Option<PathBuf>,
}

impl Ignored {
    /// A note on stderr for each reference flag given.
    pub fn note(&self) {
        if self.verbose {
            eprintln!(
                "note: --verbose is accepted for the reference tools' sake and ignored (--long prints more)"
            );
        }
        if self.tmp_dir.is_some() {
            eprintln!(
                "note: --tmp-dir is ignored: kpack-tui stages its output inside the output directory and renames it into place"
            );
        }
        if self.clang_offload_bundler.is_some() {
            eprintln!(
                "note: --clang-offload-bundler is ignored: kpack-tui reads and writes offload bundles itself"
            );
        }
    }
}

/// `split_artifacts --artifact-dir DIR`, for `split`'s ARTIFACT_DIR.
#[derive(Debug, Args, Clone, Default)]
pub struct SplitInput {
    /// The reference splitter's spelling of ARTIFACT_DIR.
    #[arg(long = "artifact-dir", value_name = "DIR", hide = true)]
    pub artifact_dir_flag: Option<PathBuf>,
}

/// `recombine_artifacts --input-shards-dir DIR`: the shards are its subdirectories.
#[derive(Debug, Args, Clone, Default)]
pub struct CombineInput {
    /// The reference's spelling: every immediate subdirectory of DIR is a shard
    /// (sorted by name).
    #[arg(long = "input-shards-dir", value_name = "DIR", hide = true)]
    pub input_shards_dir: Option<PathBuf>,
}

impl CombineInput {
    /// The shards under `--input-shards-dir`, sorted.
    pub fn shards(&self) -> anyhow::Result<Vec<PathBuf>> {
        let Some(dir) = &self.input_shards_dir else {
            return Ok(Vec::new());
        };
        subdirectories(dir)
    }
}

/// `split_python_wheels --input PATH --wheel-type torch-fat`.
#[derive(Debug, Args, Clone, Default)]
pub struct WheelInput {
    /// The reference's spelling of WHEEL.
    #[arg(long = "input", value_name = "PATH", hide = true)]
    pub input: Option<PathBuf>,
    /// The reference's handler preset (`torch-fat`), the same as `--databases torch-fat`.
    #[arg(long = "wheel-type", value_name = "TYPE", hide = true, value_parser = ["torch-fat"])]
    pub wheel_type: Option<String>,
}

/// `pack_tree --input DIR --gfx-arch-family F --gfx-arches a,b --max-workers N`.
#[derive(Debug, Args, Clone, Default)]
pub struct PackInput {
    /// The reference's spelling of TREE.
    #[arg(long = "input", value_name = "DIR", hide = true)]
    pub input: Option<PathBuf>,
    /// The reference's one family archive: `--gfx-arch-family F --gfx-arches a,b` is
    /// `--family F=a,b --archive-per family`.
    #[arg(
        long = "gfx-arch-family",
        value_name = "FAMILY",
        hide = true,
        requires = "gfx_arches"
    )]
    pub gfx_arch_family: Option<String>,
    /// See `--gfx-arch-family`.
    #[arg(
        long = "gfx-arches",
        value_name = "ARCHES",
        hide = true,
        requires = "gfx_arch_family"
    )]
    pub gfx_arches: Option<String>,
    /// The reference's spelling of `-j`.
    #[arg(long = "max-workers", value_name = "N", hide = true)]
    pub max_workers: Option<usize>,
}

/// `verify_artifacts --artifacts-dir DIR`.
#[derive(Debug, Args, Clone, Default)]
pub struct VerifyInput {
    /// The reference's spelling of PATH.
    #[arg(long = "artifacts-dir", value_name = "DIR", hide = true)]
    pub artifacts_dir: Option<PathBuf>,
}

/// The immediate subdirectories of `dir` (symlinks not followed), sorted.
pub fn subdirectories(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    use anyhow::Context;
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let e = e.with_context(|| format!("cannot read {}", dir.display()))?;
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.push(e.path());
        }
    }
    out.sort();
    Ok(out)
}

/// One of two spellings of a required path (clap makes sure one is given).
pub fn either(positional: &Option<PathBuf>, flag: &Option<PathBuf>) -> PathBuf {
    positional
        .clone()
        .or_else(|| flag.clone())
        .expect("clap requires one spelling")
}
