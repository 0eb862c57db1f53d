//! Verifying a packed tree: would the runtime find every kernel?
//!
//! With a ledger (trees kpack-tui packed), every promised (binary, bundle, target) is
//! looked up exactly as the runtime does (marker → search paths, `@GFXARCH@`
//! expanded over the archives present, bundle index, feature-flag matching) and must
//! reach bytes of the recorded size and SHA-256. Without one (trees packed by other
//! tools), what can be checked is checked, and the verdict says what could not be
//! proven.

use super::installed::Installed;
use super::reach::{self, Reach};
use super::{Layout, PackPlan};
use crate::kpack::Archive;
use crate::kpack::ledger::Sha256Digest;
use crate::kpack::marker::Marker;
use crate::kpack::resolve::{Loader, TreeArchives, reachable_archives};
use crate::scan::{self, FileKind};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// By archive path: whether its kernels were hashed, and the SHA-256 of each (index-aligned
/// with its TOC).
pub(super) type Hashes = BTreeMap<String, (bool, Vec<Option<[u8; 32]>>)>;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The verdict on a packed tree.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TreeVerdict {
    /// Problems that break loading (non-empty = not sound).
    pub faults: Vec<String>,
    /// Things worth knowing that break nothing.
    pub notes: Vec<String>,
    /// The ledger the promises came from (relative to the tree), if any.
    pub ledger: Option<String>,
    /// Kernels proved reachable through the runtime's lookup, with the recorded size
    /// and hash when a ledger is present.
    pub proved: u64,
    /// What could not be proven (no ledger, binaries outside it).
    pub unproven: Vec<String>,
    /// Kernel-database files of the ledger found byte-identical.
    #[serde(skip_serializing_if = "is_zero")]
    pub proved_files: u64,
}

/// A path of a packed tree as it is in the merged install: in the split layout,
/// binaries live under `generic/` and archives under `<unit>/`.
pub(super) fn merged_path(layout: Layout, p: &str) -> String {
    match layout {
        Layout::Combined => p.to_string(),
        Layout::Split => p
            .split_once('/')
            .map_or(p.to_string(), |(_, rest)| rest.to_string()),
    }
}

/// Check a packed tree. `plan` (when verifying a pack's own staging output) adds:
/// every planned kernel is in its family's archive, and `gfx_arches` is exactly the
/// arches packed.
pub fn verify_tree(
    root: &Path,
    plan: Option<&PackPlan>,
    layout: Layout,
    loaders: &[Loader],
) -> TreeVerdict {
    match Installed::open(root, layout) {
        Ok(inst) => super::verify_tree::verify_installed(&inst, plan, layout, loaders),
        Err(e) => TreeVerdict {
            faults: vec![e.to_string()],
            ..TreeVerdict::default()
        },
    }
}

/// The checks of one binary of the ledger: every bundle, on every device that can
/// run one of its kernels, by every loader of `loaders`, reaches a frame built for
/// a target the device accepts, and that frame holds the bytes the ledger recorded
/// for that (bundle, target).
pub(super) fn check_ledgered(
    v: &mut TreeVerdict,
    lb: &crate::kpack::ledger::LedgerBinary,
    m: &Marker,
    archives: &TreeArchives,
    hashes: &Hashes,
    not_installed: &BTreeSet<&str>,
    loaders: &[Loader],
) {
    let mut reach = Reach::new(archives, m, &lb.path);
    let mut by_bundle: BTreeMap<u32, BTreeMap<&str, &crate::kpack::ledger::LedgerKernel>> =
        BTreeMap::new();
    for k in &lb.kernels {
        by_bundle.entry(k.bundle).or_default().insert(&*k.target, k);
    }
    let key_of = |co: u32| format!("{}#{co}", lb.kernel_name);
    let mut all_misses = Vec::new();
    for (co, kernels) in &by_bundle {
        // Devices whose every acceptable target is in an overlay not installed are
        // reported by the archive note, not per bundle.
        let installed: Vec<&str> = kernels
            .keys()
            .copied()
            .filter(|t| !not_installed.contains(t))
            .collect();
        let devices = reach::devices_for(installed.iter().copied());
        let (hits, misses) = reach::resolve_everywhere(&mut reach, *co, &devices, loaders);
        let missed = !misses.is_empty();
        all_misses.extend(misses.into_iter().map(|m| (*co, m)));
        let mut proved: BTreeSet<(&str, &str)> = BTreeSet::new();
        let mut bad: BTreeSet<(&str, &str)> = BTreeSet::new();
        for (device, _, hit) in &hits {
            let ct = hit.code_target();
            if proved.contains(&(hit.archive, ct)) || bad.contains(&(hit.archive, ct)) {
                continue;
            }
            let Some(k) = kernels.get(ct) else {
                bad.insert((hit.archive, ct));
                v.faults.push(format!(
                    "{}: bundle #{co} on {device}: {} holds code for {ct}, which the ledger \
                     does not list for this bundle",
                    lb.path, hit.archive
                ));
                continue;
            };
            let a = &archives[hit.archive];
            let idx = a.entry_index(&key_of(*co), &hit.entry.arch);
            let (hashed, h) = &hashes[hit.archive];
            let got = idx.and_then(|i| h[i].as_ref());
            // Unhashed (checksummed frames in the pack's own check): a frame that
            // fails to decode is already an archive fault.
            let hash_ok = !*hashed || got.is_some_and(|g| Sha256Digest(*g) == k.sha256);
            if hit.entry.size != k.size || !hash_ok {
                bad.insert((hit.archive, ct));
                v.faults.push(format!(
                    "{}: bundle #{co} for {ct}: {} holds {} bytes{} where the ledger recorded \
                     {} bytes with SHA-256 {}",
                    lb.path,
                    hit.archive,
                    hit.entry.size,
                    got.map_or_else(
                        || " that do not decode".to_string(),
                        |h| format!(" with SHA-256 {}", Sha256Digest(*h))
                    ),
                    k.size,
                    k.sha256
                ));
                continue;
            }
            proved.insert((hit.archive, ct));
        }
        let reached: BTreeSet<&str> = proved.iter().map(|(_, t)| *t).collect();
        v.proved += reached.len() as u64;
        // A kernel no device reaches by any loader is lost even when every device
        // loads something.
        for t in installed {
            if !reached.contains(t) && !bad.iter().any(|(_, b)| *b == t) && !missed {
                v.faults.push(format!(
                    "{}: bundle #{co} for {t}: no device reaches this kernel (another \
                     target's code is found first everywhere)",
                    lb.path
                ));
            }
        }
    }
    v.faults
        .extend(reach::describe(&lb.path, &all_misses, loaders));
}

/// Checks of a host-only binary with no ledger entry: some reachable archive holds
/// kernels for it, and each bundle loads, on every device that can run the code the
/// archives hold for it, by every loader of `loaders`, code the device can run.
pub(super) fn check_unledgered(
    v: &mut TreeVerdict,
    path: &str,
    m: &Marker,
    cos: &BTreeSet<u32>,
    archives: &TreeArchives,
    loaders: &[Loader],
) {
    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
    let reach_list = reachable_archives(m, dir, archives);
    let keys: BTreeMap<String, u32> = cos
        .iter()
        .map(|c| (format!("{}#{c}", m.kernel_name), *c))
        .collect();
    // Targets with code per bundle, over every archive it can reach.
    let mut targets: BTreeMap<u32, BTreeSet<&str>> = BTreeMap::new();
    for ap in &reach_list {
        for e in archives[*ap].index.kernels.iter() {
            if let Some(co) = keys.get(&*e.key) {
                targets
                    .entry(*co)
                    .or_default()
                    .insert(e.alias_of.as_deref().unwrap_or(&e.arch));
            }
        }
    }
    if targets.is_empty() {
        v.faults.push(format!(
            "{path}: no archive reachable from its marker holds any code object for it ({})",
            m.kpack_search_paths.join(", ")
        ));
        return;
    }
    let all: BTreeSet<&str> = targets.values().flatten().copied().collect();
    let mut reach = Reach::new(archives, m, path);
    let mut all_misses = Vec::new();
    for co in cos {
        let has = targets.get(co).cloned().unwrap_or_default();
        // The devices that can run the bundle's code; a bundle with no code at all
        // where its siblings have some: every device that runs the siblings.
        let devices = if has.is_empty() {
            reach::devices_for(all.iter().copied())
        } else {
            reach::devices_for(has.iter().copied())
        };
        let (hits, misses) = reach::resolve_everywhere(&mut reach, *co, &devices, loaders);
        all_misses.extend(misses.into_iter().map(|m| (*co, m)));
        let mut reached = BTreeSet::new();
        for (_, _, hit) in &hits {
            if has.contains(hit.code_target()) {
                reached.insert(hit.code_target().to_string());
            }
        }
        v.proved += reached.len() as u64;
    }
    v.faults.extend(reach::describe(path, &all_misses, loaders));
}

/// What a process on one device would find: every bundle of every host-only binary,
/// looked up as CLR asks (the device's ISA, then its generic ISA), by the newest
/// loader's rules.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceVerdict {
    /// The device ISA asked about (`amdgcn-amd-amdhsa--` stripped).
    pub device: String,
    /// The arch list the runtime is given for it.
    pub arch_list: Vec<String>,
    /// Bundles that resolve: binary, bundle, archive, target.
    pub found: Vec<DeviceHit>,
    /// Why bundles would not load (or what could not be read), in the runtime's
    /// terms; bundles missed alike share a line.
    pub missing: Vec<String>,
    /// Bundles that would not load by some loader generation checked.
    pub unloadable: u64,
    /// The loader generations checked.
    pub loaders: Vec<Loader>,
}

/// One bundle resolved for a device.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeviceHit {
    /// Binary path.
    pub path: String,
    /// Bundle index.
    pub bundle: u32,
    /// Archive it comes from.
    pub archive: String,
    /// The target that matched.
    pub target: String,
}

/// Would a process on `device` (e.g. `gfx90a:sramecc+:xnack-`) find every kernel of
/// every host-only binary of the tree at `root`?
pub fn verify_device(
    root: &Path,
    layout: Layout,
    device: &str,
    loaders: &[Loader],
) -> crate::Result<DeviceVerdict> {
    let inst = Installed::open(root, layout)?;
    let device = device.strip_prefix("amdgcn-amd-amdhsa--").unwrap_or(device);
    let processor = crate::bundle::target::base_processor(device);
    if !crate::family::known_processor(processor) {
        return Err(crate::Error::Usage(format!(
            "unknown device {device:?}; known processors: {}",
            crate::family::known_processors().join(" ")
        )));
    }
    let arch_list = crate::kpack::resolve::device_arch_list(device);
    let mut v = DeviceVerdict {
        device: device.to_string(),
        arch_list: arch_list.clone(),
        loaders: loaders.to_vec(),
        ..DeviceVerdict::default()
    };
    // What cannot be read is a fault, never a silent "0 found": damaged files, and
    // archives that do not open.
    for d in inst
        .diagnostics
        .iter()
        .filter(|d| d.severity == scan::Severity::Error)
    {
        v.missing.push(format!("{}: {}", d.path, d.message));
    }
    let mut archives = TreeArchives::new();
    for (i, f) in inst.files.iter().filter(|(_, f)| f.kind == FileKind::Kpack) {
        match Archive::open(&inst.real(*i, &f.path)) {
            Ok(a) => {
                archives.insert(f.path.clone(), a);
            }
            Err(e) => v.missing.push(format!("{}: cannot be read: {e}", f.path)),
        }
    }
    let ledger = inst.ledgers().ok().flatten().map(|m| m.ledger);
    // The ledger's kernels by (binary, bundle, target), looked up once each.
    let by_kernel: BTreeMap<(&str, u32, &str), &crate::kpack::ledger::LedgerKernel> = ledger
        .iter()
        .flat_map(|l| &l.binaries)
        .flat_map(|b| {
            b.kernels
                .iter()
                .map(move |k| ((b.path.as_str(), k.bundle, &*k.target), k))
        })
        .collect();
    let promised = |path: &str, co: u32, target: &str| by_kernel.get(&(path, co, target)).copied();
    let mut hosts = 0usize;
    for (_, f) in inst
        .files
        .iter()
        .filter(|(_, f)| f.kind == FileKind::HostOnlyBinary && f.hard_link_of.is_none())
    {
        let path = f.path.clone();
        hosts += 1;
        let Some(m) = &f.marker else {
            v.missing.push(format!("{path}: no readable marker"));
            continue;
        };
        let cos: BTreeSet<u32> = f
            .wrappers
            .iter()
            .map(|w| (w.reserved & 0xffff_ffff) as u32)
            .collect();
        let mut reach = Reach::new(&archives, m, &path);
        let device_list = [device.to_string()];
        let mut device_misses = Vec::new();
        for co in cos {
            let (hits, misses) = reach::resolve_everywhere(&mut reach, co, &device_list, loaders);
            device_misses.extend(misses.iter().cloned().map(|m| (co, m)));
            let mut checked_frames = BTreeSet::new();
            let mut first = None;
            let mut bad = false;
            for (_, loader, hit) in &hits {
                if !checked_frames.insert((hit.archive, hit.entry.ordinal)) {
                    continue;
                }
                let ct = hit.code_target();
                let what = format!(
                    "{path}: bundle #{co} from {} ({}, {} loaders)",
                    hit.archive,
                    hit.entry.arch,
                    loader.name()
                );
                // The bytes the runtime would get: decoded (a flipped byte inside a
                // frame is the runtime's DECOMPRESSION_FAILED), then the ledger's
                // hash, or without one, a code object for that target.
                let checked = {
                    let a = &archives[hit.archive];
                    match promised(&path, co, ct) {
                        // With a ledger: decoded as a stream into its hash.
                        Some(k) => match a.digest(hit.entry) {
                            Err(e) => Err(format!("{what}: does not decode: {e}")),
                            Ok(h) if h != k.sha256 => Err(format!(
                                "{what}: its bytes are not the ones the ledger recorded \
                                 (SHA-256 {})",
                                k.sha256
                            )),
                            Ok(_) => Ok(()),
                        },
                        None => a
                            .kernel(hit.entry)
                            .map_err(|e| format!("{what}: does not decode: {e}"))
                            .and_then(|bytes| match crate::elf::inspect(&bytes) {
                                Ok(crate::elf::ElfContent::CodeObject(_)) => Ok(()),
                                _ => Err(format!("{what}: not an AMDGPU code object")),
                            }),
                    }
                };
                match checked {
                    Ok(()) => {
                        first.get_or_insert(*hit);
                    }
                    Err(e) => {
                        bad = true;
                        v.missing.push(e);
                    }
                }
            }
            if let (Some(hit), false, true) = (first, bad, misses.is_empty()) {
                v.found.push(DeviceHit {
                    path: path.clone(),
                    bundle: co,
                    archive: hit.archive.to_string(),
                    target: hit.entry.arch.to_string(),
                });
            } else {
                v.unloadable += 1;
            }
        }
        v.missing
            .extend(reach::describe(&path, &device_misses, loaders));
    }
    if hosts == 0 && v.missing.is_empty() {
        v.missing.push(format!(
            "no host-only binary under {}: nothing was checked",
            root.display()
        ));
    }
    Ok(v)
}
