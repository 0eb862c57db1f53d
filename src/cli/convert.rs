//! The command line's arguments turned into the core's options and the batch
//! reporters' settings: the one place that knows both, so neither the core nor
//! `batch/` depends on clap.

use super::{
    ArchivePerArg, CombineArgs, Common, CompressionArg, DiffByArg, LayoutArg, MarkerArgs, PackArgs,
    SplitArgs, UnassignedArg, WheelSplitArgs,
};
use crate::batch::{Output, diff::Table};
use anyhow::{Context, Result, bail};
use kpack::artifacts::SplitOptions;
use kpack::artifacts::combine::{CombineConfig, CombineOptions};
use kpack::family::Families;
use kpack::kerneldb::Database;
use kpack::kpack::{Marker, Scheme};
use kpack::pack::{ArchivePer, Layout, PackOptions, Unassigned};
use kpack::wheel_split::WheelSplitOptions;
use std::path::Path;

impl Common {
    /// What `--json` asks of a command without CSV or tables: text, or the document.
    pub fn format(&self) -> crate::batch::Format {
        crate::batch::Format::from_flags(self.json, false, 0)
    }

    /// How the batch reporters print.
    pub fn output(&self) -> Output {
        Output {
            format: self.format(),
            long: self.long,
            strict: self.strict,
        }
    }
}

impl From<DiffByArg> for Table {
    fn from(by: DiffByArg) -> Table {
        match by {
            DiffByArg::All => Table::All,
            DiffByArg::Target => Table::Target,
            DiffByArg::File => Table::File,
            DiffByArg::Kernel => Table::Kernel,
            DiffByArg::Class => Table::Class,
        }
    }
}

impl PackArgs {
    /// The pack's options.
    pub fn options(&self, common: &Common) -> Result<PackOptions> {
        // pack_tree's one family archive: --gfx-arch-family F --gfx-arches a,b.
        let mut families = self.families.clone();
        let reference_family = match (&self.reference.gfx_arch_family, &self.reference.gfx_arches) {
            (Some(f), Some(a)) => {
                families.push(format!("{f}={a}"));
                true
            }
            _ => false,
        };
        let families = if families.is_empty() {
            Families::default()
        } else {
            Families::parse(&families)?
        };
        let mut o = PackOptions::new(&self.group, families);
        o.targets = self.targets.iter().map(|t| t.trim().to_string()).collect();
        o.all = self.all;
        o.archive_per = match self.archive_per {
            _ if reference_family => ArchivePer::Family,
            ArchivePerArg::Target => ArchivePer::Target,
            ArchivePerArg::Family => ArchivePer::Family,
        };
        o.layout = match self.layout {
            LayoutArg::Combined => Layout::Combined,
            LayoutArg::Split => Layout::Split,
        };
        o.unassigned = match self.unassigned {
            UnassignedArg::Error => Unassigned::Error,
            UnassignedArg::Drop => Unassigned::Drop,
        };
        o.scheme = match self.compression {
            CompressionArg::None => Scheme::None,
            CompressionArg::Zstd => Scheme::ZstdPerKernel,
        };
        o.level = self.level;
        o.threads = self.reference.max_workers.unwrap_or(common.jobs);
        o.force = self.force;
        o.verify = !self.no_verify;
        o.archives = self.archives.clone();
        o.copy_damaged = self.copy_damaged;
        o.strict = common.strict;
        Ok(o)
    }
}

impl SplitArgs {
    /// The split's options, for the artifact prefix `prefix`.
    pub fn options(&self, jobs: usize, prefix: &str) -> Result<SplitOptions> {
        Ok(SplitOptions {
            artifact_prefix: prefix.to_string(),
            gpu_targets: (!self.gpu_targets.is_empty()).then(|| {
                self.gpu_targets
                    .iter()
                    .map(|t| t.trim().to_string())
                    .filter(|t| !t.is_empty())
                    .collect()
            }),
            databases: handlers(&self.split_databases)?,
            level: self.level,
            threads: jobs,
            force: self.force,
        })
    }
}

impl PackArgs {
    /// TREE, or pack_tree's `--input`.
    pub fn tree(&self) -> std::path::PathBuf {
        super::reference::either(&self.tree, &self.reference.input)
    }
}

impl WheelSplitArgs {
    /// WHEEL, or split_python_wheels's `--input`.
    pub fn wheel(&self) -> std::path::PathBuf {
        super::reference::either(&self.wheel, &self.reference.input)
    }
}

impl CombineArgs {
    /// SHARD..., or every subdirectory of recombine_artifacts's `--input-shards-dir`.
    pub fn shards(&self) -> Result<Vec<std::path::PathBuf>> {
        let mut shards = self.shards.clone();
        shards.extend(self.reference.shards()?);
        if shards.is_empty() {
            bail!("no shards: --input-shards-dir holds no directories");
        }
        Ok(shards)
    }

    /// The combine's options (the config file read).
    pub fn options(&self) -> Result<CombineOptions> {
        let config = self
            .config
            .as_deref()
            .map(CombineConfig::read)
            .transpose()?;
        Ok(CombineOptions {
            config,
            prefer: self.prefer.clone(),
            force: self.force,
        })
    }
}

impl WheelSplitArgs {
    /// The wheel split's options.
    pub fn options(&self, jobs: usize) -> Result<WheelSplitOptions> {
        let mut opts = WheelSplitOptions::new(&self.device_package_prefix, &self.overlay_root);
        let torch_fat = self.reference.wheel_type.is_some()
            || self.databases.iter().any(|d| d.trim() == "torch-fat");
        opts.device_requires = self.device_requires_dist.clone();
        opts.targets = list(&self.target);
        opts.families = list(&self.family);
        // An explicit handler list wins over the preset, as in the reference.
        let explicit: Vec<String> = self
            .databases
            .iter()
            .filter(|d| d.trim() != "torch-fat")
            .cloned()
            .collect();
        opts.databases = if torch_fat && explicit.is_empty() {
            TORCH_FAT.to_vec()
        } else {
            handlers(&explicit)?
        };
        opts.level = self.level;
        opts.zip_level = self.zip_level;
        opts.ignore_record = self.ignore_record;
        opts.threads = jobs;
        opts.force = self.force;
        Ok(opts)
    }
}

impl MarkerArgs {
    /// The marker for `binary` (`require_paths`: at least one `--search-path`).
    pub fn marker(&self, binary: &Path, require_paths: bool) -> Result<Marker> {
        if require_paths && self.search_paths.is_empty() {
            bail!(
                "give at least one --search-path (where the archives will be, relative to the binary)"
            );
        }
        let kernel_name = match &self.kernel_name {
            Some(k) => k.clone(),
            None => binary
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .context("cannot derive --kernel-name from the path")?,
        };
        let paths = if self.search_paths.is_empty() {
            vec![".kpack/preview_@GFXARCH@.kpack".to_string()]
        } else {
            self.search_paths.clone()
        };
        Ok(Marker {
            kpack_search_paths: paths,
            kernel_name,
        })
    }
}

/// Handler names from `--split-databases` (`all` = the whole registry).
fn handlers(names: &[String]) -> Result<Vec<Database>> {
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
