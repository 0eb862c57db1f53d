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

mod assemble;
mod project;
mod split_checks;

use crate::elf::{self, ElfContent, ElfKind};
use crate::error::{Error, Result};
use crate::event::EventSink;
use crate::event::{PackEvent, Phase};
use crate::kerneldb::{self, Database};
use crate::kpack::Marker;
use crate::kpack::archive::{ArchiveMeta, ArchiveWriter, Scheme};
use crate::kpack::resolve::GFXARCH;
use crate::wheel::bootstrap;
use crate::wheel::metadata;
use crate::wheel::{Contents, Wheel};
use crate::zip::{Member, Stored};
pub use assemble::check_record;
use assemble::{DeviceWheel, deflate_file_to, write_device, write_host};
use project::keeps;
pub use project::{ProjectedWheel, WheelProjection, project};
use rayon::prelude::*;
use serde::Serialize;
use sha2::{Digest, Sha256};
use split_checks::{
    Selection, check_wheel, check_written, finish_archives, output_dir, place_wheels, placed_sizes,
    refuse_present, require_split,
};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
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
    /// Split a wheel whose RECORD does not match its contents (with a warning);
    /// otherwise it is refused (the split would give it a fresh, matching RECORD).
    pub ignore_record: bool,
    /// Stop at the next member (or before anything is placed) when cancelled: what
    /// was staged is removed and [`Error::Cancelled`] returned.
    pub cancel: crate::event::CancelToken,
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
            ignore_record: false,
            cancel: crate::event::CancelToken::new(),
        }
    }
}

/// One archive of a device wheel.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WheelArchive {
    /// Member path (`torch/.kpack/torch_gfx90a.kpack`).
    pub path: String,
    /// Its processor (the archive holds the processor's feature variants).
    pub target: String,
    /// The target IDs of the code in it.
    pub targets: Vec<String>,
    /// Code objects.
    pub code_objects: u64,
    /// Uncompressed code-object bytes.
    pub raw_bytes: u64,
    /// Archive size.
    pub bytes: u64,
}

/// One wheel written.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WheelOut {
    /// File name.
    pub file: String,
    /// Distribution name.
    pub dist: String,
    /// Bundle key (device wheels).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle_key: Option<String>,
    /// What the bundle key covers (device wheels).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<crate::wheel::bootstrap::Level>,
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    pub code_objects: u64,
    /// Code objects of targets left out by `--target`/`--family`.
    pub skipped_code_objects: u64,
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
    /// Whether any bundle of the input was stored compressed (CCOB): why the output
    /// can be larger.
    #[serde(skip)]
    pub compressed_input: bool,
}

/// What becomes of one member.
pub(crate) enum Out {
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
    /// One writer per processor.
    writers: Mutex<BTreeMap<String, std::sync::Arc<ArchiveWriter>>>,
    /// The targets of the code objects archived.
    code_targets: Mutex<BTreeSet<String>>,
    sink: &'a dyn EventSink<PackEvent>,
    skipped: Mutex<(u64, u64)>,
    warnings: Mutex<Vec<String>>,
    compressed_input: std::sync::atomic::AtomicBool,
    /// The SHA-256 of each member read, as it is in the input (for its RECORD check).
    /// The SHA-256 of each member rewritten, as it is in the input, by its local
    /// header's offset (those copied are in their [`Out`]).
    input_shas: Mutex<BTreeMap<u64, [u8; 32]>>,
}

/// Split `input` into `out` (created if needed). See the module text.
pub fn split_wheel(
    input: &Path,
    out: &Path,
    opts: &WheelSplitOptions,
    sink: &dyn EventSink<PackEvent>,
) -> Result<WheelSplitReport> {
    // An output directory this run creates is removed again when it fails (it is
    // empty then: wheels are staged inside it and placed only at the end).
    let created = std::fs::symlink_metadata(out).is_err();
    let r = split_wheel_into(input, out, opts, sink);
    if r.is_err() && created {
        let _ = std::fs::remove_dir(out);
    }
    r
}

fn split_wheel_into(
    input: &Path,
    out: &Path,
    opts: &WheelSplitOptions,
    sink: &dyn EventSink<PackEvent>,
) -> Result<WheelSplitReport> {
    crate::fsutil::check_apart(input, out)?;
    let wheel = Wheel::open(input)?;
    let info = wheel.info.clone();
    let sel = Selection::of(input, &wheel, opts)?;
    let prefix = opts.device_package_prefix.as_str();
    // Output directory: never the input's own, never over wheels without --force.
    let input_name = output_dir(input, out)?;
    let (stage, stale) = crate::fsutil::stage_for(out, "wheel")?;
    for p in stale {
        sink.event(PackEvent::Warning(format!(
            "removed {} left by an interrupted run",
            p.display()
        )));
    }
    let overlay = sel.overlay.clone();
    let ctx = Ctx {
        wheel: &wheel,
        opts,
        stage: stage.path(),
        group: info.name.to_lowercase().replace('-', "_"),
        overlay: sel.overlay,
        wanted: sel.wanted,
        families: sel.families,
        writers: Mutex::new(BTreeMap::new()),
        code_targets: Mutex::new(BTreeSet::new()),
        sink,
        skipped: Mutex::new((0, 0)),
        warnings: Mutex::new(Vec::new()),
        compressed_input: std::sync::atomic::AtomicBool::new(false),
        input_shas: Mutex::new(BTreeMap::new()),
    };
    let results = ctx.run()?;
    // The input's RECORD, against the digests taken as the members were read (one
    // inflate per member, not two); nothing is placed yet.
    let input_shas = ctx.input_shas.into_inner().unwrap_or_default();
    let known = |i: usize| match results.get(i) {
        Some(Out::Raw { sha } | Out::Database { sha, .. }) => Some(*sha),
        _ => (wheel.index.members.get(i)).and_then(|m| input_shas.get(&m.header_offset).copied()),
    };
    check_wheel(input, &wheel, &known, opts, sink)?;
    drop(input_shas);
    let mut warnings = ctx.warnings.into_inner().unwrap_or_default();
    let compressed_input = ctx.compressed_input.into_inner();
    let (skipped_kernels, skipped_databases) = ctx.skipped.into_inner().unwrap_or_default();
    let writers = ctx.writers.into_inner().unwrap_or_default();
    let group = ctx.group.clone();

    let code_targets: BTreeSet<String> = ctx.code_targets.into_inner().unwrap_or_default();
    let count = |f: fn(&Out) -> bool| results.iter().filter(|o| f(o)).count() as u64;
    let rewritten = count(|o| matches!(o, Out::Rewritten { .. }));
    let database_files = count(|o| matches!(o, Out::Database { .. }));
    let elsewhere = || fat_members_outside(&wheel, &overlay, stage.path());
    require_split(
        input,
        rewritten,
        writers.len(),
        skipped_kernels,
        elsewhere,
        &overlay,
    )?;
    let key_of = bundle_keys(input, code_targets, &results)?;
    let keys: BTreeSet<String> = key_of.values().cloned().collect();

    // Device wheels carry the host wheel's tags: the file name's (the host wheel
    // keeps it), which WHEEL's Tag lines should agree with.
    let tag_set = wheel_tags(&input_name, &info.tags, &mut warnings);
    let tag = tag_set.compressed.clone();
    let dev_files: Vec<(String, String)> = (keys.iter())
        .map(|k| {
            (
                k.clone(),
                metadata::wheel_file_name(&bootstrap::dist_name(prefix, k), &info.version, &tag),
            )
        })
        .collect();
    // Output names, refused if present (unless --force) before anything is written.
    let names: Vec<String> = std::iter::once(input_name.clone())
        .chain(dev_files.iter().map(|(_, f)| f.clone()))
        .collect();
    refuse_present(out, &names, opts.force)?;

    sink.event(PackEvent::Finishing("writing archives"));
    let archives = finish_archives(writers)?;
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
    let base = DeviceWheel {
        wheel: &wheel,
        tags: &tag_set,
        results: &results,
        path: stage.path(),
        key: "",
        targets: &[],
        archives: &archives,
        keys: &keys,
        overlay: &overlay,
        group: &group,
        opts,
    };
    let mut devices = write_devices(&base, &key_of, &dev_files)?;
    // What was read of the input goes before the wheels are read back (the index and
    // the results of 40,000 members are MBs each).
    drop((results, key_of, wheel));

    // Read every wheel back before it is placed.
    sink.event(PackEvent::Finishing("checking wheels"));
    check_written(stage.path(), &names, opts.threads)?;
    // The last moment a cancel keeps the output as it was.
    if opts.cancel.is_cancelled() {
        return Err(Error::Cancelled);
    }
    sink.event(PackEvent::Finishing("renaming into place"));
    let bytes_out = place_wheels(stage.path(), out, &names, opts.force, &mut warnings)?;
    let host = placed_sizes(out, &input_name, &info.name, host_members, &mut devices);
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
        code_objects: archives.values().map(|(_, s)| s.code_objects).sum(),
        skipped_code_objects: skipped_kernels,
        database_files,
        skipped_databases,
        bytes_in: std::fs::metadata(input).map(|m| m.len()).unwrap_or(0),
        bytes_out,
        warnings,
        compressed_input,
    })
}

/// The bundle key of every target a device wheel carries: the archives' (`targets`)
/// and the database files'. A target without one is refused.
fn bundle_keys(
    input: &Path,
    mut targets: BTreeSet<String>,
    results: &[Out],
) -> Result<BTreeMap<String, String>> {
    for o in results {
        if let Out::Database { target, .. } = o {
            targets.insert(target.clone());
        }
    }
    (targets.into_iter())
        .map(|t| {
            let key = bootstrap::bundle_key(&t).map_err(|e| Error::Refused {
                path: input.to_path_buf(),
                what: e.to_string(),
            })?;
            Ok((t, key))
        })
        .collect()
}

/// The device wheels, one per (key, file name), in parallel (each is its own file):
/// `base` with its path the stage, each written there with its targets.
fn write_devices(
    base: &DeviceWheel,
    key_of: &BTreeMap<String, String>,
    dev_files: &[(String, String)],
) -> Result<Vec<WheelOut>> {
    let device = |k: &String, file: &String| {
        let ts: Vec<&String> = key_of
            .iter()
            .filter(|(_, v)| *v == k)
            .map(|(t, _)| t)
            .collect();
        let path = base.path.join(file);
        let mut out = write_device(&DeviceWheel {
            path: &path,
            key: k,
            targets: &ts,
            ..*base
        })?;
        out.file = file.clone();
        Ok(out)
    };
    let build =
        || -> Result<Vec<WheelOut>> { dev_files.par_iter().map(|(k, f)| device(k, f)).collect() };
    crate::parallel::on_threads(base.opts.threads, build)?
}

/// The SHA-256 of a member's contents, each folio released once hashed.
fn sha256_releasing(data: &[u8], release: &dyn Fn(usize, usize)) -> [u8; 32] {
    let mut h = Sha256::new();
    for (i, c) in data.chunks(crate::fsutil::FAULT_SPAN).enumerate() {
        h.update(c);
        release(i * crate::fsutil::FAULT_SPAN, c.len());
    }
    h.finalize().into()
}

pub(crate) fn sha_of(w: &Wheel, m: &Member) -> std::io::Result<[u8; 32]> {
    let mut h = Sha256::new();
    let mut r = w.member_reader(m);
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
    /// Process every member, largest first so the big binaries start at once: the
    /// results by member index.
    fn run(&self) -> Result<Vec<Out>> {
        let members: Vec<(usize, &Member)> = self.wheel.index.members.iter().enumerate().collect();
        self.sink.event(PackEvent::Started {
            files: members.len() as u64,
            bytes: members.iter().map(|(_, m)| m.size).sum(),
        });
        let mut order = members;
        order.sort_by(|a, b| b.1.size.cmp(&a.1.size).then(a.0.cmp(&b.0)));
        // One place per member, taken here: the workers allocate nothing that lives
        // on (a map's nodes, allocated between their large buffers, kept the
        // allocator from giving those back).
        let results: Mutex<Vec<Out>> = Mutex::new(
            std::iter::repeat_with(|| Out::Drop)
                .take(order.len())
                .collect(),
        );
        let run = || -> Result<()> {
            order.par_iter().with_max_len(1).try_for_each(|(i, m)| {
                if self.opts.cancel.is_cancelled() {
                    return Err(Error::Cancelled);
                }
                let o = self.process(rayon::current_thread_index().unwrap_or(0), m)?;
                if let Ok(mut r) = results.lock() {
                    r[*i] = o;
                }
                Ok(())
            })
        };
        crate::parallel::on_threads(self.opts.threads, run)??;
        Ok(results.into_inner().unwrap_or_default())
    }

    /// Note the SHA-256 of member `m` as it is in the input.
    fn read_as(&self, m: &Member, sha: [u8; 32]) {
        if let Ok(mut s) = self.input_shas.lock() {
            s.insert(m.header_offset, sha);
        }
    }

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
            bytes: m.size,
        });
    }

    fn process(&self, worker: usize, m: &Member) -> Result<Out> {
        let w = self.wheel;
        let path = w.path();
        let ferr = |e: std::io::Error| Error::format(path, m.io_error(&e));
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
                sha: sha_of(w, m).map_err(ferr)?,
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
                sha: sha_of(w, m).map_err(ferr)?,
            });
        }
        let head = m
            .head(w.bytes(), 64)
            .map_err(|e| Error::format(w.path(), e))?;
        let pe = crate::coff::is_pe(&head) && !elf::is_elf(&head);
        if !(elf::is_elf(&head) || pe) || m.is_symlink() {
            self.phase(worker, m, Phase::Copy);
            return Ok(Out::Raw {
                sha: sha_of(w, m).map_err(ferr)?,
            });
        }
        self.phase(worker, m, Phase::Rewrite);
        let data = w.contents_until(m, self.stage, &|| self.opts.cancel.is_cancelled())?;
        // Every pass over a large member lets its pages go behind it: a member of
        // hundreds of MB is never resident whole.
        let drop_pages = |at: usize, len: usize| data.release(at as u64, len as u64);
        let ranges = crate::embedded::data_ranges(&data);
        let (found, _) = crate::embedded::find_releasing(&data, &ranges, &drop_pages);
        if !found.is_empty() {
            self.warn(crate::embedded::stays_in_place(&m.name, &found));
        }
        // Which fat binaries are split: ELF executables and shared libraries (not
        // objects or -fgpu-rdc ones), and PE images (.pyd, .dll).
        let splittable = if pe {
            true
        } else {
            match elf::inspect_releasing(&data, &drop_pages) {
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
                            sha: sha_of(w, m).map_err(ferr)?,
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
                self.read_as(m, sha256_releasing(&data, &drop_pages));
                self.binary(worker, m, rel, &data, &fat)
            }
            Ok(_) => Ok(Out::Raw {
                sha: sha256_releasing(&data, &drop_pages),
            }),
            Err(e) => Err(Error::format(
                w.path(),
                e.context(&format!("member {}: ", m.name)),
            )),
        }
    }

    /// The archive `arch`'s code goes to: one per processor, holding its feature
    /// variants, so that a first-match loader on any device of the processor finds
    /// every bundle (`gfx_arches` and TOC aliases are settled when it is finished).
    fn writer(&self, arch: &str) -> Result<std::sync::Arc<ArchiveWriter>> {
        let mut ws = self
            .writers
            .lock()
            .map_err(|_| Error::Internal("archive writers poisoned".into()))?;
        crate::kpack::archive::safe_arch(arch).map_err(|e| Error::Refused {
            path: self.wheel.path().to_path_buf(),
            what: e.to_string(),
        })?;
        if let Ok(mut t) = self.code_targets.lock() {
            t.insert(arch.to_string());
        }
        let processor = crate::bundle::target::base_processor(arch);
        if let Some(w) = ws.get(processor) {
            return Ok(w.clone());
        }
        let dir = self.stage.join("archives");
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let w = std::sync::Arc::new(
            ArchiveWriter::create(
                &dir.join(format!("{}_{processor}.kpack", self.group)),
                ArchiveMeta {
                    group_name: self.group.clone(),
                    gfx_arch_family: processor.to_string(),
                    gfx_arches: Vec::new(),
                },
                Scheme::ZstdPerKernel,
                self.opts.level,
            )?
            .resolving()
            .cancelled_by(self.opts.cancel.clone()),
        );
        ws.insert(processor.to_string(), w.clone());
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
        let ctx = |what: String| {
            Error::format(
                path,
                crate::FormatError::new(m.data_offset, format!("member {}: {what}", m.name)),
            )
        };
        let marker = Marker {
            kpack_search_paths: vec![format!(
                "{}.kpack/{}_{GFXARCH}.kpack",
                "../".repeat(rel.matches('/').count()),
                self.group
            )],
            kernel_name: rel.to_string(),
        };
        // The host-only image is written to the stage as it is rewritten (streamed from
        // the member, whose pages go as they are copied and verified), deflated below.
        let raw = self.stage.join(format!("host-{:016x}", m.header_offset));
        let like = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        let drop_pages = |at: usize, len: usize| data.release(at as u64, len as u64);
        crate::fatbin::write_host_only_releasing(data, &drop_pages, &marker, &raw, (&like, false))
            .map_err(|e| match e {
                crate::fatbin::WriteError::Refused(e) => ctx(format!("cannot be rewritten: {e}")),
                crate::fatbin::WriteError::Io(e) => e,
            })?;
        self.phase(worker, m, Phase::Compress);
        let sec = fat.section;
        let span_offset = (sec.as_ptr() as usize - data.as_ptr() as usize) as u64;
        for b in &fat.bundles {
            if b.compression != crate::bundle::Compression::None {
                self.compressed_input
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
            // One code object at a time (a compressed bundle is never decoded whole),
            // each one's pages released once archived when it is read in place.
            let add = |e: &crate::bundle::BundleEntry, bytes: &[u8]| -> Result<()> {
                let Some(arch) = e.id.arch() else {
                    return Ok(());
                };
                if !self.keep(&arch) {
                    if let Ok(mut s) = self.skipped.lock() {
                        s.0 += 1;
                    }
                    return Ok(());
                }
                let w = self.writer(&arch)?;
                w.add(&format!("{rel}#{}", b.index), &arch, bytes)?;
                let (n, stored) = w.progress();
                self.sink.event(PackEvent::Family {
                    family: arch.clone(),
                    code_objects: n,
                    stored,
                });
                Ok(())
            };
            let release =
                |off: usize, len: usize| data.release(span_offset + off as u64, len as u64);
            b.each_code_object_releasing(sec, 1 << 34, &release, add)
                .map_err(|e| ctx(e.to_string()))??;
            data.release(span_offset + b.offset, b.stored_size);
        }
        // Deflate the host-only binary into a spill file now, in parallel with the
        // other members; the writer only concatenates.
        let spill = self.stage.join(format!("host-{:016x}.z", m.header_offset));
        let (stored, sha) = deflate_file_to(&spill, &raw, self.opts.zip_level)?;
        std::fs::remove_file(&raw).map_err(|e| Error::io(&raw, e))?;
        Ok(Out::Rewritten { spill, stored, sha })
    }
}

/// The tag set of the wheels a split writes: the input file name's (the host wheel
/// keeps that name), else WHEEL's Tag lines; a disagreement is a warning.
fn wheel_tags(file: &str, tags: &[String], warnings: &mut Vec<String>) -> metadata::TagSet {
    let from_wheel = metadata::TagSet::from_tags(tags);
    let Some(from_name) = metadata::TagSet::from_file_name(file) else {
        return from_wheel.unwrap_or_else(|| metadata::TagSet {
            compressed: tags
                .first()
                .map(|t| {
                    let v: Vec<&str> = t.splitn(3, '-').collect();
                    [0, 1, 2].map(|i| v.get(i).copied().unwrap_or_default().to_string())
                })
                .unwrap_or_default(),
        });
    };
    let named: BTreeSet<String> = from_name.expand().into_iter().collect();
    let listed: BTreeSet<String> = tags.iter().cloned().collect();
    if named != listed {
        warnings.push(format!(
            "{file}: WHEEL's Tag lines ({}) disagree with the file name's tags ({}); the \
             device wheels carry the file name's, as the host wheel keeps the name",
            tags.join(", "),
            named.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    from_name
}

/// The members outside `overlay` that hold device code (read again: only on the way
/// to an error).
fn fat_members_outside(wheel: &Wheel, overlay: &str, spill: &Path) -> Vec<String> {
    let inside = format!("{overlay}/");
    let mut out = Vec::new();
    for m in &wheel.index.members {
        if m.is_dir() || m.name.starts_with(&inside) {
            continue;
        }
        let Ok(data) = wheel.contents(m, spill) else {
            continue;
        };
        if matches!(crate::fatbin::read(&data), Ok(Some(f)) if !f.bundles.is_empty()) {
            out.push(m.name.clone());
        }
        wheel.release(m);
    }
    out
}
