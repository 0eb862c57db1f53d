//! `wheel split`: one fat wheel becomes a host wheel (same name, version and tags;
//! fat binaries under the overlay root rewritten host-only with the `@GFXARCH@`
//! marker; kernel-database files removed; METADATA with `rocm-bootstrap` and the
//! `device-<target>` extras) and one device wheel per bundle key (its archives
//! `<overlay>/.kpack/<group>_<target>.kpack` and database files), as
//! `workflows.md` §4.3-4.6 specify.
//!
//! Better than the reference (§4.11): RECORD in urlsafe base64; every target ID
//! mapped to a bundle key (features, owners, generic ISAs: see [`bootstrap`]); keys
//! are overlay-relative paths, so binaries with one base name never collide; the
//! output is byte-identical for any thread count (sorted members, fixed timestamps,
//! input modes kept); a target filter; nothing is unpacked to disk (members are read
//! from the mapped wheel; members that are only copied keep their compressed bytes),
//! and nothing appears in the output until every wheel is written and read back.

use super::bootstrap;
use super::metadata;
use super::{Contents, Wheel};
use crate::elf::{self, ElfContent, ElfKind};
use crate::error::{Error, Result};
use crate::event::EventSink;
use crate::kerneldb::{self, Database, base_arch};
use crate::kpack::Marker;
use crate::kpack::archive::{Archive, ArchiveMeta, ArchiveWriter, Scheme};
use crate::kpack::resolve::GFXARCH;
use crate::pack::{PackEvent, Phase};
use crate::zip::{self, Member, Stored, ZipWriter};
use rayon::prelude::*;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What to split, and how.
#[derive(Debug, Clone)]
pub struct WheelSplitOptions {
    /// Device wheels are `<prefix>-<bundle key>` (`amd-torch-device`).
    pub device_package_prefix: String,
    /// Directory inside the wheel that receives `.kpack/` (`torch`).
    pub overlay_root: String,
    /// Extra `Requires-Dist` of every device wheel; `@GFXARCH@` becomes the key.
    pub device_requires: Vec<String>,
    /// Keep only these targets (target IDs or processors, compared by base arch).
    pub targets: Option<Vec<String>>,
    /// Keep only targets whose rocm-bootstrap chain holds one of these bundle keys
    /// (`gfx11`, `gfx9_4`, `gfx942`).
    pub families: Option<Vec<String>>,
    /// Kernel-database handlers, in precedence order.
    pub databases: Vec<Database>,
    /// zstd level of the archives.
    pub level: i32,
    /// Deflate level of rewritten binaries and dist-info texts.
    pub zip_level: u32,
    /// Worker threads (0 = all cores).
    pub threads: usize,
    /// Replace wheels of the same names in the output directory.
    pub force: bool,
}

impl WheelSplitOptions {
    /// Options with the reference's defaults (zstd 3, deflate 6, all cores).
    pub fn new(prefix: &str, overlay_root: &str) -> Self {
        WheelSplitOptions {
            device_package_prefix: prefix.to_string(),
            overlay_root: overlay_root.to_string(),
            device_requires: Vec::new(),
            targets: None,
            families: None,
            databases: Vec::new(),
            level: 3,
            zip_level: 6,
            threads: 0,
            force: false,
        }
    }
}

/// One archive of a device wheel.
#[derive(Debug, Clone, Serialize)]
pub struct WheelArchive {
    /// Member path (`torch/.kpack/torch_gfx90a.kpack`).
    pub path: String,
    /// Its target.
    pub target: String,
    /// Kernels.
    pub kernels: u64,
    /// Uncompressed code-object bytes.
    pub raw_bytes: u64,
    /// Archive size.
    pub bytes: u64,
}

/// One wheel written.
#[derive(Debug, Clone, Serialize)]
pub struct WheelOut {
    /// File name.
    pub file: String,
    /// Distribution name.
    pub dist: String,
    /// Bundle key (device wheels).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle_key: Option<String>,
    /// `target`, `sub_family` or `family` (device wheels).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<&'static str>,
    /// Members (RECORD included).
    pub members: u64,
    /// File size.
    pub bytes: u64,
    /// Archives (device wheels).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub archives: Vec<WheelArchive>,
    /// Kernel-database files (device wheels).
    #[serde(skip_serializing_if = "is_zero")]
    pub database_files: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// What a split did.
#[derive(Debug, Clone, Serialize)]
pub struct WheelSplitReport {
    /// Input wheel.
    pub input: PathBuf,
    /// Output directory.
    pub output: PathBuf,
    /// Name and version of the package.
    pub name: String,
    /// Version.
    pub version: String,
    /// Archive group (`torch`).
    pub group: String,
    /// The host wheel.
    pub host: WheelOut,
    /// Device wheels, by bundle key.
    pub devices: Vec<WheelOut>,
    /// `device-<target>` extras of the host wheel.
    pub extras: Vec<String>,
    /// Fat binaries rewritten host-only.
    pub rewritten: u64,
    /// Code objects archived.
    pub kernels: u64,
    /// Code objects of targets left out by `--target`/`--family`.
    pub skipped_kernels: u64,
    /// Kernel-database files moved to device wheels.
    pub database_files: u64,
    /// Database files of targets left out.
    pub skipped_databases: u64,
    /// Input wheel size.
    pub bytes_in: u64,
    /// Sum of the output wheels' sizes.
    pub bytes_out: u64,
    /// Things worth telling.
    pub warnings: Vec<String>,
}

/// What becomes of one member.
enum Out {
    /// Dropped (directories, the old RECORD, filtered database files).
    Drop,
    /// Copied with its compressed bytes as they are.
    Raw { sha: [u8; 32] },
    /// A database file going to a device wheel (raw copy).
    Database { target: String, sha: [u8; 32] },
    /// Rewritten host-only: deflated bytes in a spill file of the stage.
    Rewritten {
        spill: PathBuf,
        stored: Stored,
        sha: [u8; 32],
    },
}

struct Ctx<'a> {
    wheel: &'a Wheel,
    opts: &'a WheelSplitOptions,
    stage: &'a Path,
    group: String,
    overlay: String,
    wanted: Option<BTreeSet<String>>,
    families: Option<BTreeSet<String>>,
    writers: Mutex<BTreeMap<String, std::sync::Arc<ArchiveWriter>>>,
    sink: &'a dyn EventSink<PackEvent>,
    skipped: Mutex<(u64, u64)>,
    warnings: Mutex<Vec<String>>,
}

/// Split `input` into `out` (created if needed). See the module text.
pub fn split_wheel(
    input: &Path,
    out: &Path,
    opts: &WheelSplitOptions,
    sink: &dyn EventSink<PackEvent>,
) -> Result<WheelSplitReport> {
    let wheel = Wheel::open(input)?;
    let info = wheel.info.clone();
    let bad = |what: String| Error::Invalid(format!("{}: {what}", input.display()));
    let prefix = opts.device_package_prefix.as_str();
    if !valid_dist_name(prefix) {
        return Err(Error::Invalid(format!(
            "--device-package-prefix {prefix:?} is not a distribution name (lowercase \
             letters, digits, '.', '_', '-')"
        )));
    }
    let overlay = opts.overlay_root.trim_matches('/').to_string();
    if overlay.is_empty() || zip::read::check_name(&overlay).is_err() {
        return Err(Error::Invalid(format!(
            "--overlay-root {:?} is not a directory path inside a wheel",
            opts.overlay_root
        )));
    }
    let under = format!("{overlay}/");
    if !wheel
        .index
        .members
        .iter()
        .any(|m| m.name.starts_with(&under))
    {
        return Err(bad(format!(
            "overlay root '{overlay}' does not exist in wheel"
        )));
    }
    let wanted = opts.targets.as_ref().map(|ts| ts.iter().cloned().collect());
    let families = match &opts.families {
        None => None,
        Some(fs) => {
            let mut set = BTreeSet::new();
            for f in fs {
                let b = bootstrap::bundle(f).ok_or_else(|| {
                    Error::Invalid(format!(
                        "--family {f:?} is not a rocm-bootstrap bundle key (gfx9, gfx9_4, gfx11, \
                         gfx110x, gfx942…)"
                    ))
                })?;
                set.insert(b.key.clone());
            }
            Some(set)
        }
    };

    // Output directory: never the input's own, never over wheels without --force.
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let input_name = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| bad("no file name".into()))?;
    if let (Ok(a), Ok(b)) = (
        std::fs::canonicalize(out.join(&input_name)),
        std::fs::canonicalize(input),
    ) && a == b
    {
        return Err(Error::Invalid(format!(
            "{}: the output directory holds the input wheel, and the host wheel keeps its \
             name; choose another -o",
            input.display()
        )));
    }
    let stage = tempfile::Builder::new()
        .prefix(".kpack-tui-wheel-")
        .tempdir_in(out)
        .map_err(|e| Error::io(out, e))?;
    let ctx = Ctx {
        wheel: &wheel,
        opts,
        stage: stage.path(),
        group: info.name.to_lowercase().replace('-', "_"),
        overlay: overlay.clone(),
        wanted,
        families,
        writers: Mutex::new(BTreeMap::new()),
        sink,
        skipped: Mutex::new((0, 0)),
        warnings: Mutex::new(Vec::new()),
    };
    let members: Vec<(usize, &Member)> = wheel.index.members.iter().enumerate().collect();
    sink.event(PackEvent::Started {
        files: members.len() as u64,
        bytes: members.iter().map(|(_, m)| m.size).sum(),
    });
    // Largest first so the big binaries start at once; results by member index.
    let mut order = members.clone();
    order.sort_by(|a, b| b.1.size.cmp(&a.1.size).then(a.0.cmp(&b.0)));
    let results: Mutex<BTreeMap<usize, Out>> = Mutex::new(BTreeMap::new());
    let run = || -> Result<()> {
        order.par_iter().with_max_len(1).try_for_each(|(i, m)| {
            let o = ctx.process(rayon::current_thread_index().unwrap_or(0), m)?;
            if let Ok(mut r) = results.lock() {
                r.insert(*i, o);
            }
            Ok(())
        })
    };
    if opts.threads > 0 {
        rayon::ThreadPoolBuilder::new()
            .num_threads(opts.threads)
            .build()
            .map_err(|e| Error::Invalid(format!("thread pool: {e}")))?
            .install(run)?;
    } else {
        run()?;
    }
    let results = results.into_inner().unwrap_or_default();
    let mut warnings = ctx.warnings.into_inner().unwrap_or_default();
    let (skipped_kernels, skipped_databases) = ctx.skipped.into_inner().unwrap_or_default();
    let writers = ctx.writers.into_inner().unwrap_or_default();
    let group = ctx.group.clone();

    // Bundle keys: every archive target and database target must have one.
    let mut targets: BTreeSet<String> = writers.keys().cloned().collect();
    for o in results.values() {
        if let Out::Database { target, .. } = o {
            targets.insert(target.clone());
        }
    }
    let rewritten = results
        .values()
        .filter(|o| matches!(o, Out::Rewritten { .. }))
        .count() as u64;
    if rewritten == 0 {
        return Err(bad(format!(
            "no fat binaries under '{overlay}' (nothing to split)"
        )));
    }
    if writers.is_empty() && skipped_kernels > 0 {
        return Err(bad(format!(
            "none of the {skipped_kernels} code objects is of a target kept by \
             --target/--family (every one would be left out); nothing written"
        )));
    }
    let mut key_of: BTreeMap<String, String> = BTreeMap::new();
    for t in &targets {
        let k = bootstrap::bundle_key(t).map_err(&bad)?;
        key_of.insert(t.clone(), k);
    }
    let keys: BTreeSet<String> = key_of.values().cloned().collect();

    // Output names, refused if present (unless --force) before anything is written.
    let tag = info.tag.clone();
    let mut names = vec![input_name.clone()];
    for k in &keys {
        names.push(metadata::wheel_file_name(
            &bootstrap::dist_name(prefix, k),
            &info.version,
            &tag,
        ));
    }
    for n in &names {
        if !opts.force && std::fs::symlink_metadata(out.join(n)).is_ok() {
            return Err(Error::Invalid(format!(
                "{}: {n} already exists (--force replaces it)",
                out.display()
            )));
        }
    }

    sink.event(PackEvent::Finishing("writing archives"));
    let mut archives: BTreeMap<String, (PathBuf, crate::kpack::archive::ArchiveSummary)> =
        BTreeMap::new();
    for (t, w) in writers {
        let w = std::sync::Arc::try_unwrap(w)
            .map_err(|_| Error::Invalid("archive writer still in use".into()))?;
        let s = w.finish()?;
        let faults = Archive::open(&s.path)?.verify();
        if !faults.is_empty() {
            return Err(Error::Invalid(format!(
                "{}: the archive just written does not read back: {}",
                s.path.display(),
                faults.join("; ")
            )));
        }
        archives.insert(t, (s.path.clone(), s));
    }

    // The host wheel.
    sink.event(PackEvent::Finishing("writing the host wheel"));
    let host_path = stage.path().join(&input_name);
    let extras: Vec<String> = keys
        .iter()
        .filter(|k| metadata::is_target_key(k))
        .map(|k| format!("device-{k}"))
        .collect();
    let host_members = write_host(&wheel, &results, &host_path, prefix, &keys, opts.zip_level)?;

    // Device wheels, one per key (in parallel: each is its own file).
    sink.event(PackEvent::Finishing("writing device wheels"));
    let dev_files: Vec<(String, String)> = keys
        .iter()
        .map(|k| {
            let dist = bootstrap::dist_name(prefix, k);
            (
                k.clone(),
                metadata::wheel_file_name(&dist, &info.version, &tag),
            )
        })
        .collect();
    let build = || -> Result<Vec<WheelOut>> {
        dev_files
            .par_iter()
            .map(|(k, file)| {
                let ts: Vec<&String> = key_of
                    .iter()
                    .filter(|(_, v)| *v == k)
                    .map(|(t, _)| t)
                    .collect();
                write_device(&DeviceWheel {
                    wheel: &wheel,
                    results: &results,
                    path: &stage.path().join(file),
                    key: k,
                    targets: &ts,
                    archives: &archives,
                    keys: &keys,
                    overlay: &overlay,
                    group: &group,
                    opts,
                })
            })
            .collect()
    };
    let mut devices = if opts.threads > 0 {
        rayon::ThreadPoolBuilder::new()
            .num_threads(opts.threads)
            .build()
            .map_err(|e| Error::Invalid(format!("thread pool: {e}")))?
            .install(build)?
    } else {
        build()?
    };
    for (d, (_, file)) in devices.iter_mut().zip(&dev_files) {
        d.file = file.clone();
    }

    // Read every wheel back before it is placed.
    sink.event(PackEvent::Finishing("checking wheels"));
    for n in &names {
        let p = stage.path().join(n);
        let w = Wheel::open(&p).map_err(|e| {
            Error::Invalid(format!("the wheel just written does not read back: {e}"))
        })?;
        if let Some(f) = check_record(&w).into_iter().next() {
            return Err(Error::Invalid(format!(
                "{n}: the wheel just written is inconsistent: {f}"
            )));
        }
    }
    sink.event(PackEvent::Finishing("renaming into place"));
    let mut bytes_out = 0;
    for n in &names {
        let from = stage.path().join(n);
        bytes_out += std::fs::metadata(&from).map(|m| m.len()).unwrap_or(0);
        std::fs::rename(&from, out.join(n)).map_err(|e| Error::io(out.join(n), e))?;
    }
    let host = WheelOut {
        file: input_name.clone(),
        dist: info.name.clone(),
        bundle_key: None,
        level: None,
        members: host_members,
        bytes: std::fs::metadata(out.join(&input_name))
            .map(|m| m.len())
            .unwrap_or(0),
        archives: Vec::new(),
        database_files: 0,
    };
    for d in &mut devices {
        d.bytes = std::fs::metadata(out.join(&d.file))
            .map(|m| m.len())
            .unwrap_or(0);
    }
    let database_files = results
        .values()
        .filter(|o| matches!(o, Out::Database { .. }))
        .count() as u64;
    let kernels = archives.values().map(|(_, s)| s.kernels).sum();
    if skipped_kernels > 0 {
        warnings.push(format!(
            "{skipped_kernels} code object(s) of targets left out by --target/--family are in \
             no wheel"
        ));
    }
    drop(stage);
    Ok(WheelSplitReport {
        input: input.to_path_buf(),
        output: out.to_path_buf(),
        name: info.name.clone(),
        version: info.version.clone(),
        group,
        host,
        devices,
        extras,
        rewritten,
        kernels,
        skipped_kernels,
        database_files,
        skipped_databases,
        bytes_in: std::fs::metadata(input).map(|m| m.len()).unwrap_or(0),
        bytes_out,
        warnings,
    })
}

/// Whether a target (or a database file's arch) is kept by a target list (exact
/// target IDs, or processors meaning all their variants) and by bundle keys.
/// A family-level asset (`gfx11`) is kept when a wanted target's chain holds it.
fn keeps(
    wanted: Option<&BTreeSet<String>>,
    families: Option<&BTreeSet<String>>,
    target: &str,
) -> bool {
    let base = base_arch(target);
    if let Some(w) = wanted
        && !w.contains(target)
        && !w.contains(&base)
    {
        let Ok(key) = bootstrap::bundle_key(target) else {
            return false;
        };
        let needed = !metadata::is_target_key(&key)
            && w.iter().any(|t| {
                bootstrap::bundle_key(t).is_ok_and(|k| bootstrap::chain(&k).contains(&key))
            });
        if !needed {
            return false;
        }
    }
    match families {
        None => true,
        Some(fs) => bootstrap::bundle_key(target)
            .map(|k| bootstrap::chain(&k).iter().any(|c| fs.contains(c)))
            .unwrap_or(false),
    }
}

/// A device wheel as projected before splitting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProjectedWheel {
    /// Bundle key.
    pub key: String,
    /// Targets in it.
    pub targets: Vec<String>,
    /// Uncompressed code-object bytes going to its archives.
    pub raw: u64,
    /// Kernel-database bytes (uncompressed).
    pub databases: u64,
    /// A guess of its size: low and high (zstd keeps 25-40% of code objects).
    pub low: u64,
    /// High end of the guess.
    pub high: u64,
}

/// What a split would write, from a scan of the wheel (nothing compressed yet).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WheelProjection {
    /// The host wheel, low end of the guess: members kept as they are (their stored
    /// bytes) plus the host part of the rewritten binaries deflated to 25%.
    pub host: u64,
    /// High end (host parts deflated to 60%).
    pub host_high: u64,
    /// One per bundle key.
    pub devices: Vec<ProjectedWheel>,
    /// Kept targets with no rocm-bootstrap package (the split would refuse them).
    pub unknown: Vec<String>,
    /// Code objects of targets left out.
    pub left_out: u64,
}

/// Project a split of the scanned wheel `report` keeping `targets` (exact target
/// IDs or processors; `None`: all), with database files found by `databases`.
pub fn project(
    report: &crate::scan::TreeReport,
    overlay: &str,
    targets: Option<&[String]>,
    databases: &[Database],
) -> WheelProjection {
    use crate::scan::FileKind;
    let wanted: Option<BTreeSet<String>> = targets.map(|t| t.iter().cloned().collect());
    let under = format!("{}/", overlay.trim_matches('/'));
    let ratio = report.wheel.as_ref().map_or(1.0, |w| {
        if w.bytes == 0 {
            1.0
        } else {
            w.stored_bytes as f64 / w.bytes as f64
        }
    });
    let mut p = WheelProjection::default();
    let mut kept = 0u64;
    let mut host_parts = 0u64;
    let mut per_key: BTreeMap<String, ProjectedWheel> = BTreeMap::new();
    let mut add =
        |target: &str, raw: u64, db: u64, p: &mut WheelProjection| match bootstrap::bundle_key(
            target,
        ) {
            Ok(k) => {
                let e = per_key.entry(k.clone()).or_insert_with(|| ProjectedWheel {
                    key: k,
                    targets: Vec::new(),
                    raw: 0,
                    databases: 0,
                    low: 0,
                    high: 0,
                });
                if !e.targets.iter().any(|t| t == target) {
                    e.targets.push(target.to_string());
                }
                e.raw += raw;
                e.databases += db;
            }
            Err(_) => {
                if !p.unknown.iter().any(|t| t == target) {
                    p.unknown.push(target.to_string());
                }
            }
        };
    for f in &report.files {
        let stored = f.stored_size.unwrap_or((f.size as f64 * ratio) as u64);
        let Some(rel) = f.path.strip_prefix(&under) else {
            kept += stored;
            continue;
        };
        if let Some(d) = kerneldb::classify_with(rel, databases) {
            if keeps(wanted.as_ref(), None, &d.arch) {
                add(&d.arch, 0, f.size, &mut p);
            }
            continue;
        }
        if f.kind != FileKind::FatBinary || !crate::pack::packable(f) {
            kept += stored;
            continue;
        }
        host_parts += f.size.saturating_sub(f.device_bytes);
        for t in f.bundles.iter().flat_map(|b| &b.targets) {
            if keeps(wanted.as_ref(), None, &t.arch) {
                add(&t.arch, t.size, 0, &mut p);
            } else {
                p.left_out += 1;
            }
        }
    }
    p.host = kept + host_parts / 4;
    p.host_high = kept + host_parts * 3 / 5;
    for (_, mut d) in per_key {
        let db = (d.databases as f64 * ratio) as u64;
        d.low = d.raw / 4 + db;
        d.high = d.raw * 2 / 5 + db;
        d.targets.sort();
        p.devices.push(d);
    }
    p
}

/// PEP 508 distribution-name characters (rocm-bootstrap's check).
fn valid_dist_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"._-".contains(c))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

fn sha_of(zip: &[u8], m: &Member) -> std::io::Result<[u8; 32]> {
    let mut h = Sha256::new();
    let mut r = m.reader(zip);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            return Ok(h.finalize().into());
        }
        h.update(&buf[..n]);
    }
}

impl Ctx<'_> {
    fn keep(&self, target: &str) -> bool {
        keeps(self.wanted.as_ref(), self.families.as_ref(), target)
    }

    fn warn(&self, w: String) {
        if let Ok(mut v) = self.warnings.lock() {
            v.push(w);
        }
    }

    fn phase(&self, worker: usize, m: &Member, phase: Phase) {
        self.sink.event(PackEvent::Phase {
            worker,
            path: m.name.clone(),
            phase,
        });
    }

    fn process(&self, worker: usize, m: &Member) -> Result<Out> {
        let w = self.wheel;
        let path = w.path();
        let ferr = |e: std::io::Error| {
            Error::format(
                path,
                crate::FormatError::new(m.data_offset, format!("member {}: {e}", m.name)),
            )
        };
        let record = format!("{}/RECORD", w.info.dist_info);
        if m.is_dir() || m.name == record {
            return Ok(Out::Drop);
        }
        let out = self.classify(worker, m, &ferr);
        w.release(m);
        let out = out?;
        self.sink.event(PackEvent::FileDone {
            path: m.name.clone(),
            bytes_in: m.size,
            bytes_out: match &out {
                Out::Rewritten { stored, .. } => stored.size,
                _ => m.size,
            },
        });
        Ok(out)
    }

    fn classify(
        &self,
        worker: usize,
        m: &Member,
        ferr: &dyn Fn(std::io::Error) -> Error,
    ) -> Result<Out> {
        let w = self.wheel;
        let Some(rel) = m.name.strip_prefix(&format!("{}/", self.overlay)) else {
            self.phase(worker, m, Phase::Copy);
            return Ok(Out::Raw {
                sha: sha_of(w.bytes(), m).map_err(ferr)?,
            });
        };
        if let Some(d) = kerneldb::classify_with(rel, &self.opts.databases) {
            if !self.keep(&d.arch) {
                if let Ok(mut s) = self.skipped.lock() {
                    s.1 += 1;
                }
                return Ok(Out::Drop);
            }
            self.phase(worker, m, Phase::Copy);
            return Ok(Out::Database {
                target: d.arch,
                sha: sha_of(w.bytes(), m).map_err(ferr)?,
            });
        }
        let head = m
            .head(w.bytes(), 64)
            .map_err(|e| Error::format(w.path(), e))?;
        let pe = crate::coff::is_pe(&head) && !elf::is_elf(&head);
        if !(elf::is_elf(&head) || pe) || m.is_symlink() {
            self.phase(worker, m, Phase::Copy);
            return Ok(Out::Raw {
                sha: sha_of(w.bytes(), m).map_err(ferr)?,
            });
        }
        self.phase(worker, m, Phase::Rewrite);
        let data = w.contents(m, self.stage)?;
        // Which fat binaries are split: ELF executables and shared libraries (not
        // objects or -fgpu-rdc ones), and PE images (.pyd, .dll).
        let splittable = if pe {
            true
        } else {
            match elf::inspect(&data) {
                Ok(ElfContent::Fat(fat)) if !fat.host_only => {
                    let ok = !fat.rdc_object
                        && matches!(
                            fat.elf_kind,
                            ElfKind::SharedLibrary | ElfKind::PieExecutable | ElfKind::Executable
                        );
                    if !ok {
                        self.warn(format!(
                            "{}: {} kept whole in the host wheel (only executables and shared \
                             libraries are split)",
                            m.name,
                            fat.elf_kind.name()
                        ));
                        return Ok(Out::Raw {
                            sha: sha_of(w.bytes(), m).map_err(ferr)?,
                        });
                    }
                    true
                }
                Ok(_) => false,
                Err(e) => {
                    return Err(Error::format(
                        w.path(),
                        e.context(&format!("member {}: ", m.name)),
                    ));
                }
            }
        };
        match crate::fatbin::read(&data) {
            Ok(Some(fat)) if splittable && !fat.bundles.is_empty() => {
                self.binary(worker, m, rel, &data, &fat)
            }
            Ok(_) => Ok(Out::Raw {
                sha: metadata::sha256(&data),
            }),
            Err(e) => Err(Error::format(
                w.path(),
                e.context(&format!("member {}: ", m.name)),
            )),
        }
    }

    fn writer(&self, arch: &str) -> Result<std::sync::Arc<ArchiveWriter>> {
        let mut ws = self
            .writers
            .lock()
            .map_err(|_| Error::Invalid("archive writers poisoned".into()))?;
        if let Some(w) = ws.get(arch) {
            return Ok(w.clone());
        }
        crate::kpack::archive::safe_arch(arch)
            .map_err(|e| Error::Invalid(format!("{}: {e}", self.wheel.path().display())))?;
        let dir = self.stage.join("archives");
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let w = std::sync::Arc::new(ArchiveWriter::create(
            &dir.join(format!("{}_{arch}.kpack", self.group)),
            ArchiveMeta {
                group_name: self.group.clone(),
                gfx_arch_family: arch.to_string(),
                gfx_arches: vec![arch.to_string()],
            },
            Scheme::ZstdPerKernel,
            self.opts.level,
        )?);
        ws.insert(arch.to_string(), w.clone());
        Ok(w)
    }

    fn binary(
        &self,
        worker: usize,
        m: &Member,
        rel: &str,
        data: &Contents<'_>,
        fat: &crate::fatbin::Fat<'_>,
    ) -> Result<Out> {
        let path = self.wheel.path();
        let ctx =
            |what: String| Error::Invalid(format!("{}: member {}: {what}", path.display(), m.name));
        let marker = Marker {
            kpack_search_paths: vec![format!(
                "{}.kpack/{}_{GFXARCH}.kpack",
                "../".repeat(rel.matches('/').count()),
                self.group
            )],
            kernel_name: rel.to_string(),
        };
        let rewritten = crate::fatbin::rewrite_host_only(data, &marker)
            .map_err(|e| ctx(format!("cannot be rewritten: {e}")))?;
        self.phase(worker, m, Phase::Kernels);
        let sec = fat.section;
        let span_offset = (sec.as_ptr() as usize - data.as_ptr() as usize) as u64;
        for b in &fat.bundles {
            let un = b
                .uncompressed(sec, 1 << 34)
                .map_err(|e| ctx(e.to_string()))?;
            for (e, bytes) in b.code_objects(&un).map_err(|e| ctx(e.to_string()))? {
                let Some(arch) = e.id.arch() else { continue };
                if !self.keep(&arch) {
                    if let Ok(mut s) = self.skipped.lock() {
                        s.0 += 1;
                    }
                    continue;
                }
                let w = self.writer(&arch)?;
                w.add(&format!("{rel}#{}", b.index), &arch, bytes)?;
                let (n, stored) = w.progress();
                self.sink.event(PackEvent::Family {
                    family: arch.clone(),
                    kernels: n,
                    stored,
                });
            }
            data.release(span_offset + b.offset, b.stored_size);
        }
        // Deflate the host-only binary into a spill file now, in parallel with the
        // other members; the writer only concatenates.
        let sha = metadata::sha256(&rewritten);
        let spill = self.stage.join(format!("host-{:016x}.z", m.header_offset));
        let stored = deflate_to(&spill, &rewritten, self.opts.zip_level)?;
        drop(rewritten);
        Ok(Out::Rewritten { spill, stored, sha })
    }
}

/// Deflate `data` straight into the file `path` (the compressed bytes are never all
/// in memory); returns the member record.
fn deflate_to(path: &Path, data: &[u8], level: u32) -> Result<Stored> {
    let io = |e| Error::io(path, e);
    let f = std::fs::File::create(path).map_err(io)?;
    let mut enc = flate2::write::DeflateEncoder::new(
        BufWriter::with_capacity(1 << 20, f),
        flate2::Compression::new(level.min(9)),
    );
    enc.write_all(data).map_err(io)?;
    let f = enc
        .finish()
        .map_err(io)?
        .into_inner()
        .map_err(|e| io(e.into_error()))?;
    let compressed_size = f.metadata().map_err(io)?.len();
    Ok(Stored {
        method: zip::Method::Deflated,
        crc32: zip::write::crc32(data),
        size: data.len() as u64,
        compressed_size,
    })
}

/// Copy a member's stored bytes from the input as they are.
fn add_raw<W: Write>(z: &mut ZipWriter<W>, wheel: &Wheel, m: &Member, name: &str) -> Result<()> {
    let stored = Stored {
        method: m.method,
        crc32: m.crc32,
        size: m.size,
        compressed_size: m.compressed_size,
    };
    let mut r = m.stored(wheel.bytes());
    z.add(name, m.permissions(), stored, &mut r)
        .map_err(|e| Error::io(wheel.path(), e))?;
    wheel.release(m);
    Ok(())
}

fn add_text<W: Write>(
    z: &mut ZipWriter<W>,
    name: &str,
    text: &[u8],
    level: u32,
    at: &Path,
) -> Result<(String, [u8; 32], u64)> {
    let (c, s) = zip::write::deflate(text, level).map_err(|e| Error::io(at, e))?;
    z.add_bytes(name, 0o644, s, &c)
        .map_err(|e| Error::io(at, e))?;
    Ok((name.to_string(), metadata::sha256(text), text.len() as u64))
}

fn create(path: &Path) -> Result<ZipWriter<BufWriter<std::fs::File>>> {
    let f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    Ok(ZipWriter::new(BufWriter::with_capacity(1 << 20, f)))
}

fn finish(z: ZipWriter<BufWriter<std::fs::File>>, path: &Path) -> Result<()> {
    let w = z.finish().map_err(|e| Error::io(path, e))?;
    let f = w
        .into_inner()
        .map_err(|e| Error::io(path, e.into_error()))?;
    f.sync_all().map_err(|e| Error::io(path, e))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
        .map_err(|e| Error::io(path, e))
}

fn write_host(
    wheel: &Wheel,
    results: &BTreeMap<usize, Out>,
    path: &Path,
    prefix: &str,
    keys: &BTreeSet<String>,
    level: u32,
) -> Result<u64> {
    let info = &wheel.info;
    let md_name = format!("{}/METADATA", info.dist_info);
    let record_name = format!("{}/RECORD", info.dist_info);
    let mut z = create(path)?;
    let mut record = Vec::new();
    let mut order: Vec<(usize, &Member)> = wheel.index.members.iter().enumerate().collect();
    order.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    for (i, m) in order {
        match results.get(&i) {
            Some(Out::Raw { sha }) if m.name == md_name => {
                let _ = sha;
                let text = String::from_utf8(
                    m.read_all(wheel.bytes())
                        .map_err(|e| Error::format(wheel.path(), e))?,
                )
                .map_err(|_| {
                    Error::Invalid(format!("{}: METADATA is not UTF-8", wheel.path().display()))
                })?;
                let lines = metadata::host_requirements(prefix, &info.version, keys);
                let new = metadata::insert_headers(&text, &lines);
                record.push(add_text(&mut z, &m.name, new.as_bytes(), level, path)?);
            }
            Some(Out::Raw { sha }) => {
                add_raw(&mut z, wheel, m, &m.name)?;
                record.push((m.name.clone(), *sha, m.size));
            }
            Some(Out::Rewritten { spill, stored, sha }) => {
                let mut f = std::fs::File::open(spill).map_err(|e| Error::io(spill, e))?;
                z.add(&m.name, m.permissions(), *stored, &mut f)
                    .map_err(|e| Error::io(path, e))?;
                let _ = std::fs::remove_file(spill);
                record.push((m.name.clone(), *sha, stored.size));
            }
            _ => {}
        }
    }
    let text = metadata::record(&record, &record_name);
    add_text(&mut z, &record_name, text.as_bytes(), level, path)?;
    finish(z, path)?;
    Ok(record.len() as u64 + 1)
}

struct DeviceWheel<'a> {
    wheel: &'a Wheel,
    results: &'a BTreeMap<usize, Out>,
    path: &'a Path,
    key: &'a str,
    targets: &'a [&'a String],
    archives: &'a BTreeMap<String, (PathBuf, crate::kpack::archive::ArchiveSummary)>,
    keys: &'a BTreeSet<String>,
    overlay: &'a str,
    group: &'a str,
    opts: &'a WheelSplitOptions,
}

fn write_device(d: &DeviceWheel<'_>) -> Result<WheelOut> {
    let info = &d.wheel.info;
    let prefix = d.opts.device_package_prefix.as_str();
    let dist = bootstrap::dist_name(prefix, d.key);
    let dist_info = metadata::dist_info_name(&dist, &info.version);
    // Members: archives and database files, sorted by name; then the dist-info.
    enum Src<'m> {
        Archive(&'m Path),
        Db(&'m Member, [u8; 32]),
    }
    let mut members: BTreeMap<String, Src<'_>> = BTreeMap::new();
    let mut archives = Vec::new();
    for t in d.targets {
        if let Some((p, s)) = d.archives.get(*t) {
            let name = format!("{}/.kpack/{}_{t}.kpack", d.overlay, d.group);
            archives.push(WheelArchive {
                path: name.clone(),
                target: (*t).clone(),
                kernels: s.kernels,
                raw_bytes: s.raw_bytes,
                bytes: s.file_size,
            });
            members.insert(name, Src::Archive(p));
        }
    }
    let mut dbs = 0;
    for (i, o) in d.results {
        if let Out::Database { target, sha } = o
            && d.targets.contains(&target)
        {
            let m = &d.wheel.index.members[*i];
            members.insert(m.name.clone(), Src::Db(m, *sha));
            dbs += 1;
        }
    }
    let mut z = create(d.path)?;
    let mut record = Vec::new();
    for (name, src) in &members {
        match src {
            Src::Archive(p) => {
                let bytes = std::fs::read(p).map_err(|e| Error::io(p, e))?;
                // zstd frames do not deflate: stored.
                let stored = zip::write::stored(&bytes);
                z.add_bytes(name, 0o644, stored, &bytes)
                    .map_err(|e| Error::io(d.path, e))?;
                record.push((name.clone(), metadata::sha256(&bytes), bytes.len() as u64));
            }
            Src::Db(m, sha) => {
                add_raw(&mut z, d.wheel, m, name)?;
                record.push((name.clone(), *sha, m.size));
            }
        }
    }
    let lvl = d.opts.zip_level;
    let md = metadata::device_metadata(
        prefix,
        d.key,
        &info.name,
        &info.version,
        &d.opts.device_requires,
        d.keys,
    );
    record.push(add_text(
        &mut z,
        &format!("{dist_info}/METADATA"),
        md.as_bytes(),
        lvl,
        d.path,
    )?);
    record.push(add_text(
        &mut z,
        &format!("{dist_info}/WHEEL"),
        metadata::device_wheel(&info.tag).as_bytes(),
        lvl,
        d.path,
    )?);
    record.push(add_text(
        &mut z,
        &format!("{dist_info}/top_level.txt"),
        format!("{}\n", d.overlay).as_bytes(),
        lvl,
        d.path,
    )?);
    let record_name = format!("{dist_info}/RECORD");
    let text = metadata::record(&record, &record_name);
    add_text(&mut z, &record_name, text.as_bytes(), lvl, d.path)?;
    finish(z, d.path)?;
    Ok(WheelOut {
        file: String::new(),
        dist,
        bundle_key: Some(d.key.to_string()),
        level: bootstrap::bundle(d.key).map(|b| match b.level {
            bootstrap::Level::Target => "target",
            bootstrap::Level::SubFamily => "sub_family",
            bootstrap::Level::Family => "family",
        }),
        members: record.len() as u64 + 1,
        bytes: 0,
        archives,
        database_files: dbs,
    })
}

/// Check a wheel's RECORD against its members: every file listed once with the
/// right SHA-256 (urlsafe base64 or hex) and size, RECORD itself listed without
/// a hash, nothing listed that is absent. Returns the faults.
pub fn check_record(w: &Wheel) -> Vec<String> {
    let name = format!("{}/RECORD", w.info.dist_info);
    let Some(rm) = w.member(&name) else {
        return vec![format!("{name} is missing")];
    };
    let text = match rm.read_all(w.bytes()) {
        Ok(t) => String::from_utf8_lossy(&t).into_owned(),
        Err(e) => return vec![e.to_string()],
    };
    let mut listed: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut faults = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let mut parts = line.rsplitn(3, ',');
        let (size, hash, path) = (
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
        );
        let path = path.trim_matches('"').to_string();
        if listed
            .insert(path.clone(), (hash.to_string(), size.to_string()))
            .is_some()
        {
            faults.push(format!("{path} listed twice in RECORD"));
        }
    }
    for m in w.index.members.iter().filter(|m| !m.is_dir()) {
        let Some((hash, size)) = listed.remove(&m.name) else {
            faults.push(format!("{} is not in RECORD", m.name));
            continue;
        };
        if m.name == name {
            if !hash.is_empty() || !size.is_empty() {
                faults.push("RECORD lists a hash for itself".into());
            }
            continue;
        }
        match sha_of(w.bytes(), m) {
            Ok(d) => {
                let b64 = metadata::record_hash(&d);
                if hash != b64 {
                    faults.push(format!(
                        "{}: RECORD hash {hash} differs from the content's {b64}",
                        m.name
                    ));
                }
                if size != m.size.to_string() {
                    faults.push(format!(
                        "{}: RECORD size {size} differs from {}",
                        m.name, m.size
                    ));
                }
            }
            Err(e) => faults.push(format!("{}: {e}", m.name)),
        }
    }
    faults.extend(
        listed
            .keys()
            .map(|p| format!("{p} is in RECORD but not in the wheel")),
    );
    faults
}
