//! Comparing two builds: device bytes per target, files (added, removed, grown,
//! shrunk; versioned shared libraries matched across versions), kernels (by binary,
//! target and name) and classes, each side a tree, a binary or an archive. Device
//! code is read through the kernels reader, so a fat tree compares with its packed
//! form (archive entries count for the binary their key names).
//!
//! `side.rs` reads one side (scan, code-object inventory), `gate.rs` holds the CI
//! gates ([`gate()`], [`shrink_gate`], [`removals`]).

mod gate;
mod side;

pub use gate::{Budget, Limit, Removal, gate, removals, shrink_gate};
use side::{Side, read_side};

use crate::error::Result;
use crate::kernels::{KernelsOptions, KernelsReport, list_kernels_scanned};
use crate::scan::FileKind;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What to compare.
#[derive(Debug, Clone, Default)]
pub struct DiffOptions {
    /// Only these targets (exact IDs, or processors with every variant).
    pub targets: Vec<String>,
    /// Worker threads (0 = all cores).
    pub threads: usize,
    /// Compare kernels too (reads the code objects of the binaries that differ).
    pub kernels: bool,
}

/// Device bytes of one target on both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetDelta {
    /// Target ID.
    pub target: String,
    /// Raw device code (code-object bytes) before.
    #[serde(rename = "old_raw")]
    pub old_bytes: u64,
    /// After.
    #[serde(rename = "new_raw")]
    pub new_bytes: u64,
    /// Bytes on disk before (compressed shares, archive frames).
    pub old_stored: u64,
    /// After.
    pub new_stored: u64,
    /// Code objects before / after.
    pub old_code_objects: u64,
    /// After.
    pub new_code_objects: u64,
}

/// What happened to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Only in NEW.
    Added,
    /// Only in OLD.
    Removed,
    /// Bigger in NEW (file or device bytes).
    Grown,
    /// Smaller in NEW.
    Shrunk,
    /// Same sizes (content may differ).
    Same,
}

/// One file on both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileDelta {
    /// Path in NEW (in OLD for a removed file).
    pub path: String,
    /// Path in OLD when it differs (a versioned library renamed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    /// What happened.
    pub change: Change,
    /// File bytes before / after.
    pub old_size: u64,
    /// After.
    pub new_size: u64,
    /// Device code-object bytes before (the file's bundles, or its archives' entries).
    pub old_device_raw: u64,
    /// After.
    pub new_device_raw: u64,
    /// Device bytes per target on either side, in target order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<FileTargetDelta>,
}

/// One target of one file on both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileTargetDelta {
    /// Target ID.
    pub target: String,
    /// Raw device code (code-object bytes) before.
    #[serde(rename = "old_raw")]
    pub old_bytes: u64,
    /// After.
    #[serde(rename = "new_raw")]
    pub new_bytes: u64,
}

/// One kernel on both sides (code sizes summed over the binary's bundles).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelDelta {
    /// The binary (NEW's path).
    pub binary: String,
    /// Target ID.
    pub target: String,
    /// Mangled name.
    pub name: String,
    /// Demangled name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub demangled: Option<String>,
    /// Code bytes before (`None`: added).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_size: Option<u64>,
    /// After (`None`: removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_size: Option<u64>,
}

impl KernelDelta {
    /// New minus old code bytes.
    pub fn delta(&self) -> i64 {
        self.new_size.unwrap_or(0) as i64 - self.old_size.unwrap_or(0) as i64
    }
}

/// A file class on both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassDelta {
    /// `fat_binary`, `host_only_binary`, `kernel_database`, …
    pub class: String,
    /// Files before / after.
    pub old_count: u64,
    /// After.
    pub new_count: u64,
    /// Bytes before / after.
    pub old_bytes: u64,
    /// After.
    pub new_bytes: u64,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct DiffReport {
    /// OLD.
    pub old: PathBuf,
    /// NEW.
    pub new: PathBuf,
    /// Device code bytes before / after (all targets, or the selected ones).
    pub old_device_raw: u64,
    /// After.
    pub new_device_raw: u64,
    /// Per target, in target order.
    pub targets: Vec<TargetDelta>,
    /// Files that changed (and renamed versioned libraries), largest change first.
    pub files: Vec<FileDelta>,
    /// Kernels added, removed or resized, largest change first.
    pub kernels: Vec<KernelDelta>,
    /// Per class.
    pub classes: Vec<ClassDelta>,
    /// What could not be read.
    pub diagnostics: Vec<String>,
}

/// The name a versioned shared library is matched by: `lib/libfoo.so.6.1` →
/// `lib/libfoo.so`.
pub fn library_key(path: &str) -> &str {
    match path.find(".so.") {
        Some(i)
            if path[i + 4..]
                .split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) =>
        {
            &path[..i + 3]
        }
        _ => path,
    }
}

/// The name a file is matched by when its path changed between builds: a versioned
/// shared library by its unversioned name ([`library_key`]), a wheel's
/// `NAME-VERSION.dist-info/…` and `NAME-VERSION.data/…` members without the version.
pub fn rename_key(path: &str) -> String {
    let path = library_key(path);
    if let Some((dir, rest)) = path.split_once('/')
        && let Some((stem, ext)) = dir.rsplit_once('.')
        && matches!(ext, "dist-info" | "data")
        && let Some((name, _version)) = stem.split_once('-')
    {
        return format!("{name}.{ext}/{rest}");
    }
    path.to_string()
}

/// Compare two builds.
pub fn diff(old: &Path, new: &Path, opts: &DiffOptions) -> Result<DiffReport> {
    let (a, b) = rayon::join(|| read_side(old, opts), || read_side(new, opts));
    let (mut a, mut b) = (a?, b?);
    // A single binary on each side compares as one file whatever their names.
    let single = a.root_is_file && b.root_is_file;
    let name = |s: &Side, p: &str| -> String {
        if single && s.root_is_file {
            "binary".to_string()
        } else {
            p.to_string()
        }
    };

    // Targets.
    let mut targets: BTreeMap<String, TargetDelta> = BTreeMap::new();
    for (side, objects) in [(0, &a.objects), (1, &b.objects)] {
        for o in objects {
            let t = targets
                .entry(o.target.clone())
                .or_insert_with(|| TargetDelta {
                    target: o.target.clone(),
                    old_bytes: 0,
                    new_bytes: 0,
                    old_stored: 0,
                    new_stored: 0,
                    old_code_objects: 0,
                    new_code_objects: 0,
                });
            if side == 0 {
                t.old_bytes += o.size;
                t.old_stored += o.stored;
                t.old_code_objects += 1;
            } else {
                t.new_bytes += o.size;
                t.new_stored += o.stored;
                t.new_code_objects += 1;
            }
        }
    }
    let mut targets: Vec<TargetDelta> = targets.into_values().collect();
    targets.sort_by(|x, y| crate::pack::units::target_order(&x.target, &y.target));

    // Device bytes per binary.
    let device = |s: &Side| -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for o in &s.objects {
            *m.entry(name(s, &o.binary)).or_insert(0) += o.size;
        }
        m
    };
    let (dev_a, dev_b) = (device(&a), device(&b));
    // And per binary and target.
    let per_target = |s: &Side| -> BTreeMap<String, BTreeMap<String, u64>> {
        let mut m: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for o in &s.objects {
            *m.entry(name(s, &o.binary))
                .or_default()
                .entry(o.target.clone())
                .or_insert(0) += o.size;
        }
        m
    };
    let (pt_a, pt_b) = (per_target(&a), per_target(&b));

    // Files: regular files and symlinks, by path, then versioned libraries by key.
    let files = |s: &Side| -> BTreeMap<String, u64> {
        s.scan
            .files
            .iter()
            .filter(|f| f.kind != FileKind::Other)
            .map(|f| (name(s, &f.path), f.size))
            .collect()
    };
    let (fa, fb) = (files(&a), files(&b));
    // Both maps are sorted: one merge pass. A file at the same path with the same
    // sizes is left out now (it would be `Same` without a rename).
    let mut pairs: Vec<(Option<String>, Option<String>)> = Vec::new();
    let (mut only_a, mut only_b): (Vec<&String>, Vec<&String>) = (Vec::new(), Vec::new());
    let (mut ia, mut ib) = (fa.iter().peekable(), fb.iter().peekable());
    loop {
        let order = match (ia.peek(), ib.peek()) {
            (Some((pa, _)), Some((pb, _))) => pa.cmp(pb),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => break,
        };
        match order {
            std::cmp::Ordering::Less => only_a.extend(ia.next().map(|e| e.0)),
            std::cmp::Ordering::Greater => only_b.extend(ib.next().map(|e| e.0)),
            std::cmp::Ordering::Equal => {
                if let (Some((p, sa)), Some((_, sb))) = (ia.next(), ib.next())
                    && (sa, dev_a.get(p)) != (sb, dev_b.get(p))
                {
                    pairs.push((Some(p.clone()), Some(p.clone())));
                }
            }
        }
    }
    let keys = |v: &[&String]| -> BTreeMap<String, Vec<String>> {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for p in v {
            m.entry(rename_key(p)).or_default().push((*p).clone());
        }
        m
    };
    let (ka, kb) = (keys(&only_a), keys(&only_b));
    let mut renamed: BTreeSet<String> = BTreeSet::new();
    for (k, va) in &ka {
        if let Some(vb) = kb.get(k)
            && va.len() == 1
            && vb.len() == 1
            && k != &va[0]
        {
            pairs.push((Some(va[0].clone()), Some(vb[0].clone())));
            renamed.insert(va[0].clone());
            renamed.insert(vb[0].clone());
        }
    }
    only_a.retain(|p| !renamed.contains(*p));
    only_b.retain(|p| !renamed.contains(*p));
    pairs.extend(only_a.into_iter().map(|p| (Some(p.clone()), None)));
    pairs.extend(only_b.into_iter().map(|p| (None, Some(p.clone()))));
    let mut file_deltas: Vec<FileDelta> = pairs
        .into_iter()
        .map(|(pa, pb)| {
            let os = pa.as_ref().and_then(|p| fa.get(p)).copied().unwrap_or(0);
            let ns = pb.as_ref().and_then(|p| fb.get(p)).copied().unwrap_or(0);
            let od = pa.as_ref().and_then(|p| dev_a.get(p)).copied().unwrap_or(0);
            let nd = pb.as_ref().and_then(|p| dev_b.get(p)).copied().unwrap_or(0);
            let change = match (&pa, &pb) {
                (None, _) => Change::Added,
                (_, None) => Change::Removed,
                _ if (ns, nd) == (os, od) => Change::Same,
                _ if ns + nd > os + od => Change::Grown,
                _ => Change::Shrunk,
            };
            let path = pb.clone().or(pa.clone()).unwrap_or_default();
            let empty = BTreeMap::new();
            let ta = pa.as_ref().and_then(|p| pt_a.get(p)).unwrap_or(&empty);
            let tb = pb.as_ref().and_then(|p| pt_b.get(p)).unwrap_or(&empty);
            let mut targets: Vec<FileTargetDelta> = ta
                .keys()
                .chain(tb.keys())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .map(|t| FileTargetDelta {
                    target: t.clone(),
                    old_bytes: ta.get(t).copied().unwrap_or(0),
                    new_bytes: tb.get(t).copied().unwrap_or(0),
                })
                .collect();
            targets.sort_by(|x, y| crate::pack::units::target_order(&x.target, &y.target));
            FileDelta {
                targets,
                old_path: pa.filter(|p| *p != path),
                path,
                change,
                old_size: os,
                new_size: ns,
                old_device_raw: od,
                new_device_raw: nd,
            }
        })
        .filter(|f| f.change != Change::Same || f.old_path.is_some())
        .collect();
    let mag = |f: &FileDelta| {
        ((f.new_size + f.new_device_raw) as i64 - (f.old_size + f.old_device_raw) as i64)
            .unsigned_abs()
    };
    file_deltas.sort_by(|x, y| mag(y).cmp(&mag(x)).then(x.path.cmp(&y.path)));

    // Kernels: (binary, target, name), binaries matched as files were (renames).
    let rename: BTreeMap<String, String> = file_deltas
        .iter()
        .filter_map(|f| f.old_path.clone().map(|o| (o, f.path.clone())))
        .collect();
    // Only binaries whose code objects differ (sizes per bundle and target) can have
    // kernels that differ: only theirs are decompressed and read.
    let shape = |s: &Side, renames: Option<&BTreeMap<String, String>>| {
        let mut m: BTreeMap<String, BTreeMap<(Option<u32>, String), u64>> = BTreeMap::new();
        for o in &s.objects {
            let mut bin = name(s, &o.binary);
            if let Some(r) = renames.and_then(|r| r.get(&bin)) {
                bin = r.clone();
            }
            *m.entry(bin)
                .or_default()
                .entry((o.bundle, o.target.clone()))
                .or_insert(0) += o.size;
        }
        m
    };
    let (sa, sb) = (shape(&a, Some(&rename)), shape(&b, None));
    let changed: BTreeSet<String> = sa
        .keys()
        .chain(sb.keys())
        .filter(|k| sa.get(*k) != sb.get(*k))
        .cloned()
        .collect();
    let back: BTreeMap<&String, &String> = rename.iter().map(|(o, n)| (n, o)).collect();
    let real = |s: &Side, n: &String| -> Vec<String> {
        // The names the side's files and archive keys use for binary `n`.
        let mut v = vec![n.clone()];
        if let Some(o) = back.get(n) {
            v.push((*o).clone());
        }
        if single && s.root_is_file {
            v.extend(s.objects.iter().map(|o| o.binary.clone()));
            v.extend(
                s.scan
                    .files
                    .iter()
                    .filter_map(|f| f.marker.as_ref().map(|m| m.kernel_name.clone())),
            );
        }
        v
    };
    // Bundles identical on both sides are read on A only; B gets a copy of their rows.
    let read = |s: &Side, skip: BTreeMap<String, BTreeSet<u32>>| -> Result<KernelsReport> {
        let set: BTreeSet<String> = changed.iter().flat_map(|c| real(s, c)).collect();
        if set.is_empty() || !opts.kernels {
            return Ok(KernelsReport::default());
        }
        list_kernels_scanned(
            &s.root,
            &s.scan,
            &KernelsOptions {
                targets: opts.targets.clone(),
                threads: opts.threads,
                binaries: Some(set),
                skip_bundles: skip,
                ..Default::default()
            },
        )
    };
    // A reads everything while B first looks for the bundles it can skip.
    let (ka, (same, kb)) = rayon::join(
        || read(&a, BTreeMap::new()),
        || {
            if !opts.kernels {
                return (Vec::new(), Ok(KernelsReport::default()));
            }
            let names: Vec<(Vec<String>, Vec<String>)> =
                changed.iter().map(|c| (real(&a, c), real(&b, c))).collect();
            let same = side::same_bundles(&a, &b, &names);
            let skip = same
                .iter()
                .map(|m| (m.b_path.clone(), m.indexes.iter().copied().collect()))
                .collect();
            let kb = read(&b, skip);
            (same, kb)
        },
    );
    a.kernels = ka?;
    b.kernels = kb?;
    for m in &same {
        let copies: Vec<_> = a
            .kernels
            .kernels
            .iter()
            .filter(|r| r.path == m.a_path && r.bundle.is_some_and(|i| m.indexes.contains(&i)))
            .map(|r| crate::kernels::KernelRow {
                path: m.b_path.clone(),
                ..r.clone()
            })
            .collect();
        b.kernels.kernels.extend(copies);
    }
    let mut kern: BTreeMap<(String, String, String), KernelDelta> = BTreeMap::new();
    for (side, s) in [(0, &a), (1, &b)] {
        for r in &s.kernels.kernels {
            let bin = r
                .key
                .as_deref()
                .and_then(|k| k.rsplit_once('#'))
                .map_or(r.path.as_str(), |(b, _)| b);
            let mut bin = name(s, bin);
            if single && s.root_is_file {
                bin = "binary".to_string();
            }
            if side == 0
                && let Some(n) = rename.get(&bin)
            {
                bin = n.clone();
            }
            let e = kern
                .entry((bin.clone(), r.target.clone(), r.kernel.name.clone()))
                .or_insert_with(|| KernelDelta {
                    binary: bin,
                    target: r.target.clone(),
                    name: r.kernel.name.clone(),
                    demangled: r.kernel.demangled.clone(),
                    old_size: None,
                    new_size: None,
                });
            let size = r.kernel.code_size.unwrap_or(0);
            let slot = if side == 0 {
                &mut e.old_size
            } else {
                &mut e.new_size
            };
            *slot = Some(slot.unwrap_or(0) + size);
        }
    }
    let mut kernels: Vec<KernelDelta> = kern
        .into_values()
        .filter(|k| k.old_size != k.new_size)
        .collect();
    kernels.sort_by(|x, y| {
        y.delta()
            .unsigned_abs()
            .cmp(&x.delta().unsigned_abs())
            .then((&x.binary, &x.target, &x.name).cmp(&(&y.binary, &y.target, &y.name)))
    });

    // Classes.
    let mut classes = Vec::new();
    for k in FileKind::ALL {
        let get = |s: &Side| {
            s.scan
                .totals
                .by_kind
                .get(&k)
                .map_or((0, 0), |t| (t.count, t.bytes))
        };
        let ((oc, ob), (nc, nb)) = (get(&a), get(&b));
        if oc + nc > 0 {
            classes.push(ClassDelta {
                class: k.name().to_string(),
                old_count: oc,
                new_count: nc,
                old_bytes: ob,
                new_bytes: nb,
            });
        }
    }
    let mut diagnostics = a.diagnostics.clone();
    diagnostics.extend(b.diagnostics.iter().cloned());
    diagnostics.extend(a.kernels.diagnostics.iter().cloned());
    diagnostics.extend(b.kernels.diagnostics.iter().cloned());
    Ok(DiffReport {
        old: old.to_path_buf(),
        new: new.to_path_buf(),
        old_device_raw: targets.iter().map(|t| t.old_bytes).sum(),
        new_device_raw: targets.iter().map(|t| t.new_bytes).sum(),
        targets,
        files: file_deltas,
        kernels,
        classes,
        diagnostics,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioned_libraries_share_a_key() {
        assert_eq!(library_key("lib/libfoo.so.6.1"), "lib/libfoo.so");
        assert_eq!(library_key("lib/libfoo.so.6"), "lib/libfoo.so");
        assert_eq!(library_key("lib/libfoo.so"), "lib/libfoo.so");
        assert_eq!(library_key("lib/libfoo.so.bak"), "lib/libfoo.so.bak");
        assert_eq!(library_key("lib/libfoo.so.6.x"), "lib/libfoo.so.6.x");
    }

    #[test]
    fn wheel_metadata_directories_match_across_versions() {
        assert_eq!(
            rename_key("torch-2.10.0.dist-info/RECORD"),
            "torch.dist-info/RECORD"
        );
        assert_eq!(
            rename_key("torch-2.10.0+rocm7.1.data/purelib/x.py"),
            "torch.data/purelib/x.py"
        );
        assert_eq!(rename_key("torch/lib/libc10.so.2.1"), "torch/lib/libc10.so");
        // Only the top directory, and only these two suffixes.
        assert_eq!(rename_key("share/a-1.dist-info/x"), "share/a-1.dist-info/x");
        assert_eq!(rename_key("foo-1.0.d/x"), "foo-1.0.d/x");
        assert_eq!(rename_key("README"), "README");
    }
}
