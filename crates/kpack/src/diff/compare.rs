//! The tables of a diff, each from the two sides ([`super::diff`] runs them in
//! order): targets, files (renames matched), the kernels of the binaries whose code
//! objects differ, and classes.

use super::side::{self, Side};
use super::{
    Change, ClassDelta, DiffOptions, FileDelta, FileTargetDelta, KernelDelta, TargetDelta,
    rename_key,
};
use crate::error::Result;
use crate::kernels::{KernelsOptions, KernelsReport, list_kernels_scanned};
use crate::scan::FileKind;
use std::collections::{BTreeMap, BTreeSet};

/// How a side's paths are named in the tables.
#[derive(Debug, Clone, Copy)]
pub(super) struct Names {
    /// A single binary on each side: it compares as one file whatever its name.
    pub single: bool,
}

impl Names {
    /// The name of path `p` of side `s`.
    fn of(self, s: &Side, p: &str) -> String {
        self.of_ref(s, p).to_string()
    }

    /// The same, borrowed (a tree's 40,000 paths are not copied to be compared).
    fn of_ref<'a>(self, s: &Side, p: &'a str) -> &'a str {
        if self.single && s.root_is_file {
            "binary"
        } else {
            p
        }
    }
}

/// Device bytes and code objects per target, in processor order.
pub(super) fn target_deltas(a: &Side, b: &Side) -> Vec<TargetDelta> {
    let mut targets: BTreeMap<String, TargetDelta> = BTreeMap::new();
    fn of<'m>(targets: &'m mut BTreeMap<String, TargetDelta>, t: &str) -> &'m mut TargetDelta {
        targets.entry(t.to_string()).or_insert_with(|| TargetDelta {
            target: t.to_string(),
            old_bytes: 0,
            new_bytes: 0,
            old_stored: 0,
            new_stored: 0,
            old_code_objects: 0,
            new_code_objects: 0,
        })
    }
    for (side, objects) in [(0, &a.objects), (1, &b.objects)] {
        for o in objects.iter() {
            let t = of(&mut targets, o.target);
            if side == 0 {
                t.old_bytes += o.size;
                t.old_code_objects += 1;
            } else {
                t.new_bytes += o.size;
                t.new_code_objects += 1;
            }
        }
        for (target, stored) in objects.stored() {
            let t = of(&mut targets, target);
            if side == 0 {
                t.old_stored += stored;
            } else {
                t.new_stored += stored;
            }
        }
    }
    let mut targets: Vec<TargetDelta> = targets.into_values().collect();
    targets.sort_by(|x, y| crate::bundle::target::target_order(&x.target, &y.target));
    targets
}

/// A side's files by name, with their sizes, and its device bytes per binary and
/// target (names borrowed from the side).
struct Sizes<'a> {
    /// Regular files and symlinks, sorted by name.
    files: Vec<(&'a str, u64)>,
    device: side::DeviceBytes<'a>,
}

impl<'a> Sizes<'a> {
    fn of(s: &'a Side, names: Names) -> Self {
        let mut files: Vec<(&str, u64)> = (s.scan.files.iter())
            .filter(|f| f.kind != FileKind::Other)
            .map(|f| (names.of_ref(s, &f.path), f.size))
            .collect();
        files.sort_by(|x, y| x.0.cmp(y.0));
        Sizes {
            files,
            device: s.objects.device_bytes(|b| names.of_ref(s, b)),
        }
    }

    /// The size of file `p`.
    fn size(&self, p: &str) -> Option<u64> {
        let i = self.files.binary_search_by(|(n, _)| (*n).cmp(p)).ok()?;
        Some(self.files[i].1)
    }
}

/// Files that changed: by path, then versioned libraries and dist-info by key
/// ([`rename_key`]); largest change first.
pub(super) fn file_deltas(a: &Side, b: &Side, names: Names) -> Vec<FileDelta> {
    let (sa, sb) = (Sizes::of(a, names), Sizes::of(b, names));
    let mut deltas: Vec<FileDelta> = pair_files(&sa, &sb)
        .into_iter()
        .map(|(pa, pb)| file_delta(&sa, &sb, pa, pb))
        .filter(|f| f.change != Change::Same || f.old_path.is_some())
        .collect();
    let mag = |f: &FileDelta| {
        ((f.new_size + f.new_device_raw) as i64 - (f.old_size + f.old_device_raw) as i64)
            .unsigned_abs()
    };
    deltas.sort_by(|x, y| mag(y).cmp(&mag(x)).then(x.path.cmp(&y.path)));
    deltas
}

/// The pairs of files to compare: one merge pass over the sorted maps (a file at
/// the same path with the same sizes is left out: it would be `Same` without a
/// rename), then the files of one side matched by key, then the rest.
fn pair_files(sa: &Sizes, sb: &Sizes) -> Vec<(Option<String>, Option<String>)> {
    let mut pairs: Vec<(Option<String>, Option<String>)> = Vec::new();
    let (mut only_a, mut only_b): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    let (mut ia, mut ib) = (sa.files.iter().peekable(), sb.files.iter().peekable());
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
                if let (Some((p, za)), Some((_, zb))) = (ia.next(), ib.next())
                    && (za, sa.device.total(p)) != (zb, sb.device.total(p))
                {
                    pairs.push((Some(p.to_string()), Some(p.to_string())));
                }
            }
        }
    }
    let keys = |v: &[&str]| -> BTreeMap<String, Vec<String>> {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for p in v {
            m.entry(rename_key(p)).or_default().push(p.to_string());
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
    pairs.extend(only_a.into_iter().map(|p| (Some(p.to_string()), None)));
    pairs.extend(only_b.into_iter().map(|p| (None, Some(p.to_string()))));
    pairs
}

/// The delta of one pair of files (either may be missing).
fn file_delta(sa: &Sizes, sb: &Sizes, pa: Option<String>, pb: Option<String>) -> FileDelta {
    let size = |s: &Sizes, p: &Option<String>| p.as_deref().and_then(|p| s.size(p)).unwrap_or(0);
    let (os, ns) = (size(sa, &pa), size(sb, &pb));
    fn device<'a>(s: &Sizes<'a>, p: &Option<String>) -> Vec<(&'a str, u64)> {
        p.as_deref()
            .map(|p| s.device.of(p).collect())
            .unwrap_or_default()
    }
    let (ta, tb) = (device(sa, &pa), device(sb, &pb));
    let (od, nd): (u64, u64) = (ta.iter().map(|t| t.1).sum(), tb.iter().map(|t| t.1).sum());
    let change = match (&pa, &pb) {
        (None, _) => Change::Added,
        (_, None) => Change::Removed,
        _ if (ns, nd) == (os, od) => Change::Same,
        _ if ns + nd > os + od => Change::Grown,
        _ => Change::Shrunk,
    };
    let path = pb.clone().or(pa.clone()).unwrap_or_default();
    let bytes =
        |t: &[(&str, u64)], target: &str| t.iter().find(|x| x.0 == target).map_or(0, |x| x.1);
    let mut targets: Vec<FileTargetDelta> = (ta.iter().chain(&tb))
        .map(|t| t.0)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|t| FileTargetDelta {
            target: crate::intern::interned(t),
            old_bytes: bytes(&ta, t),
            new_bytes: bytes(&tb, t),
        })
        .collect();
    targets.sort_by(|x, y| crate::bundle::target::target_order(&x.target, &y.target));
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
}

/// Read the kernels of the binaries whose code objects differ (sizes per bundle and
/// target) into each side: only theirs are decompressed and read. Bundles identical
/// on both sides are read on A only; B gets a copy of their rows.
pub(super) fn read_kernels(
    a: &mut Side,
    b: &mut Side,
    rename: &BTreeMap<String, String>,
    names: Names,
    opts: &DiffOptions,
) -> Result<()> {
    // What each binary holds on each side, as a digest of its code objects' sizes
    // per bundle and target.
    let shape = |s: &Side, renames: Option<&BTreeMap<String, String>>| {
        s.objects.shapes(|b| {
            let bin = names.of(s, b);
            match renames.and_then(|r| r.get(&bin)) {
                Some(r) => r.clone(),
                None => bin,
            }
        })
    };
    let (sa, sb) = (shape(a, Some(rename)), shape(b, None));
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
        if names.single && s.root_is_file {
            v.extend(s.objects.binaries().cloned());
            v.extend(
                s.scan
                    .files
                    .iter()
                    .filter_map(|f| f.marker.as_ref().map(|m| m.kernel_name.clone())),
            );
        }
        v
    };
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
        || read(a, BTreeMap::new()),
        || {
            if !opts.kernels {
                return (Vec::new(), Ok(KernelsReport::default()));
            }
            let pairs: Vec<(Vec<String>, Vec<String>)> =
                changed.iter().map(|c| (real(a, c), real(b, c))).collect();
            let same = side::same_bundles(a, b, &pairs);
            let skip = same
                .iter()
                .map(|m| (m.b_path.clone(), m.indexes.iter().copied().collect()))
                .collect();
            let kb = read(b, skip);
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
            .map(|r| {
                Box::new(crate::kernels::KernelRow {
                    path: m.b_path.clone(),
                    ..(**r).clone()
                })
            })
            .collect();
        b.kernels.kernels.extend(copies);
    }
    Ok(())
}

/// Kernels whose code size differs, by (binary, target, name); largest change first.
pub(super) fn kernel_deltas(
    a: &Side,
    b: &Side,
    rename: &BTreeMap<String, String>,
    names: Names,
) -> Vec<KernelDelta> {
    let mut kern: BTreeMap<(String, String, String), KernelDelta> = BTreeMap::new();
    for (side, s) in [(0, a), (1, b)] {
        for r in &s.kernels.kernels {
            let bin = r
                .key
                .as_deref()
                .and_then(|k| k.rsplit_once('#'))
                .map_or(r.path.as_str(), |(b, _)| b);
            let mut bin = names.of(s, bin);
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
    kernels
}

/// Files and bytes of every class either side has.
pub(super) fn class_deltas(a: &Side, b: &Side) -> Vec<ClassDelta> {
    let mut classes = Vec::new();
    for k in FileKind::ALL {
        let get = |s: &Side| {
            s.scan
                .totals
                .by_kind
                .get(&k)
                .map_or((0, 0), |t| (t.count, t.bytes))
        };
        let ((oc, ob), (nc, nb)) = (get(a), get(b));
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
    classes
}
