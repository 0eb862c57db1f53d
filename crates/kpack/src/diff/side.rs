//! One side of a diff: its scan and every code object from entry tables and archive
//! indexes (nothing decompressed).

use super::DiffOptions;
use crate::error::Result;
use crate::kernels::KernelsReport;
use crate::scan::{self, FileKind, FileReport, ScanOptions, TreeReport};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(super) struct Side {
    pub(super) root: PathBuf,
    pub(super) scan: TreeReport,
    /// Every code object, from bundle entry tables and archive indexes (nothing
    /// decompressed).
    pub(super) objects: Objects,
    pub(super) kernels: KernelsReport,
    pub(super) root_is_file: bool,
    pub(super) diagnostics: Vec<String>,
}

/// A side's code objects: 32 bytes each, their binaries' and targets' names held
/// once (a tree of 10,000 code objects named them 10,000 times each, in three
/// strings per object).
#[derive(Default)]
pub(super) struct Objects {
    list: Chunked,
    binaries: Interned,
    targets: Interned,
    /// Bytes on disk per target (by its number): only their sums are compared, so
    /// not held per object (8 of its 32 bytes).
    stored: Vec<u64>,
}

/// Code objects kept in chunks of [`CHUNK`]: a list grown by doubling held up to
/// twice what it used (both sides of the 8 GiB bench tree, 9,500 code objects each,
/// 1 MiB of lists for 0.6 MiB of objects), a chunked one one chunk more at most.
#[derive(Default)]
struct Chunked {
    chunks: Vec<Vec<Object>>,
}

/// Code objects per chunk (64 KiB).
const CHUNK: usize = 2048;

impl Chunked {
    fn push(&mut self, o: Object) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < CHUNK => c.push(o),
            _ => {
                let mut c = Vec::with_capacity(CHUNK);
                c.push(o);
                self.chunks.push(c);
            }
        }
    }

    fn len(&self) -> usize {
        self.chunks
            .last()
            .map_or(0, |c| (self.chunks.len() - 1) * CHUNK + c.len())
    }

    fn iter(&self) -> impl Iterator<Item = &Object> {
        self.chunks.iter().flatten()
    }
}

impl std::ops::Index<usize> for Chunked {
    type Output = Object;

    fn index(&self, i: usize) -> &Object {
        &self.chunks[i / CHUNK][i % CHUNK]
    }
}

/// 24 bytes.
#[derive(Clone, Copy)]
struct Object {
    binary: u32,
    bundle: Option<u32>,
    target: u32,
    size: u64,
}

/// One code object as the comparisons read it.
pub(super) struct ObjectRef<'a> {
    pub(super) target: &'a str,
    pub(super) size: u64,
}

impl Objects {
    fn push(
        &mut self,
        binary: &str,
        bundle: Option<u32>,
        target: &str,
        (size, stored): (u64, u64),
    ) {
        let (binary, target) = (self.binaries.of(binary), self.targets.of(target));
        self.list.push(Object {
            binary,
            bundle,
            target,
            size,
        });
        let t = target as usize;
        if self.stored.len() <= t {
            self.stored.resize(t + 1, 0);
        }
        self.stored[t] += stored;
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = ObjectRef<'_>> {
        self.list.iter().map(|o| ObjectRef {
            target: &self.targets.names[o.target as usize],
            size: o.size,
        })
    }

    /// Bytes the code objects take on disk, per target.
    pub(super) fn stored(&self) -> impl Iterator<Item = (&str, u64)> {
        (self.targets.names.iter().map(String::as_str)).zip(self.stored.iter().copied())
    }

    /// Device bytes per binary and target, summed over repeats, under the names
    /// `name` gives the binaries (binaries given one name are one): rows sorted by
    /// binary, then target, looked up by binary search. (A map of targets per binary
    /// held 400 bytes for each of the 8 GiB bench tree's 535 binaries on each side,
    /// at the end of the run, when memory peaks.)
    pub(super) fn device_bytes<'a>(&'a self, name: impl Fn(&'a str) -> &'a str) -> DeviceBytes<'a> {
        let names: Vec<&str> = self.binaries.names.iter().map(|n| name(n)).collect();
        let targets = self.targets.names.as_slice();
        let mut rows: Vec<Row> = (self.list.iter())
            .map(|o| Row {
                binary: o.binary,
                target: o.target,
                size: o.size,
            })
            .collect();
        let key = |r: &Row| {
            (
                names[r.binary as usize],
                targets[r.target as usize].as_str(),
            )
        };
        rows.sort_unstable_by(|x, y| key(x).cmp(&key(y)));
        rows.dedup_by(|r, kept| {
            let same = key(r) == key(kept);
            if same {
                kept.size += r.size;
            }
            same
        });
        rows.shrink_to_fit();
        DeviceBytes {
            names,
            targets,
            rows,
        }
    }

    /// The binaries' names.
    pub(super) fn binaries(&self) -> impl Iterator<Item = &String> {
        self.binaries.names.iter()
    }

    /// What each binary holds: its code objects' (bundle, target, size summed over
    /// repeats), in order, as one SHA-256 digest per binary, under the name `name`
    /// gives it (binaries given one name are one). Two sides hold the same code
    /// objects for a binary when its digests are equal: a tree of 500 binaries and
    /// 17,000 code objects is compared without a map of them per side.
    pub(super) fn shapes(&self, name: impl Fn(&str) -> String) -> BTreeMap<String, [u8; 32]> {
        use sha2::Digest;
        let names: Vec<String> = self.binaries.names.iter().map(|n| name(n)).collect();
        let key = |i: u32| {
            let o = &self.list[i as usize];
            let target = self.targets.names[o.target as usize].as_str();
            (names[o.binary as usize].as_str(), o.bundle, target)
        };
        let mut order: Vec<u32> = (0..self.list.len() as u32).collect();
        order.sort_unstable_by(|&x, &y| key(x).cmp(&key(y)));
        let mut out = BTreeMap::new();
        let mut rest = &order[..];
        while let Some(&first) = rest.first() {
            let binary = key(first).0;
            let mut h = sha2::Sha256::new();
            while let Some(&i) = rest.first().filter(|&&i| key(i).0 == binary) {
                let (_, bundle, target) = key(i);
                let same = rest.iter().take_while(|&&j| key(j) == key(i)).count();
                let size: u64 = rest[..same]
                    .iter()
                    .map(|&j| self.list[j as usize].size)
                    .sum();
                rest = &rest[same..];
                h.update([u8::from(bundle.is_some())]);
                h.update(bundle.unwrap_or(0).to_le_bytes());
                h.update((target.len() as u64).to_le_bytes());
                h.update(target.as_bytes());
                h.update(size.to_le_bytes());
            }
            out.insert(binary.to_string(), h.finalize().into());
        }
        out
    }

    /// Name binary `from` `to` instead.
    fn rename_binary(&mut self, from: &str, to: &str) {
        for n in self.binaries.names.iter_mut().filter(|n| *n == from) {
            *n = to.to_string();
        }
    }
}

/// A side's device bytes per binary and target ([`Objects::device_bytes`]).
pub(super) struct DeviceBytes<'a> {
    /// Binary names by number.
    names: Vec<&'a str>,
    /// Target names by number.
    targets: &'a [String],
    /// Sorted by binary name, then target name; one per pair.
    rows: Vec<Row>,
}

/// 16 bytes.
struct Row {
    binary: u32,
    target: u32,
    size: u64,
}

impl<'a> DeviceBytes<'a> {
    /// The targets of binary `binary`, by name, with its bytes for each.
    pub(super) fn of<'s>(&'s self, binary: &'s str) -> impl Iterator<Item = (&'a str, u64)> + 's {
        let name = |r: &Row| self.names[r.binary as usize];
        let start = self.rows.partition_point(|r| name(r) < binary);
        (self.rows[start..].iter())
            .take_while(move |r| name(r) == binary)
            .map(|r| (self.targets[r.target as usize].as_str(), r.size))
    }

    /// The bytes of binary `binary` over its targets.
    pub(super) fn total(&self, binary: &str) -> u64 {
        self.of(binary).map(|(_, size)| size).sum()
    }
}

/// Names numbered in the order first seen.
#[derive(Default)]
struct Interned {
    names: Vec<String>,
    numbers: std::collections::HashMap<String, u32>,
}

impl Interned {
    fn of(&mut self, name: &str) -> u32 {
        if let Some(&n) = self.numbers.get(name) {
            return n;
        }
        let n = self.names.len() as u32;
        self.names.push(name.to_string());
        self.numbers.insert(name.to_string(), n);
        n
    }
}

/// Code objects found from entry tables and archive indexes.
struct Inventory<'a> {
    targets: &'a [String],
    objects: Objects,
    diagnostics: Vec<String>,
}

impl Inventory<'_> {
    fn push(&mut self, binary: &str, bundle: Option<u32>, t: &str, sizes: (u64, u64)) {
        if crate::kernels::target_selected(self.targets, t) {
            self.objects.push(binary, bundle, t, sizes);
        }
    }

    /// The entries of an archive (only those of binary `only`, if given).
    fn archive(&mut self, path: &str, file: &Path, only: Option<&str>) {
        let idx = std::fs::File::open(file)
            .map_err(|e| e.to_string())
            .and_then(|f| crate::kpack::archive::parse_index_file(&f).map_err(|e| e.to_string()));
        self.archive_index(path, idx, only);
    }

    /// The entries of an archive member of a wheel.
    fn wheel_archive(&mut self, w: &crate::wheel::Wheel, path: &str) {
        let idx = match w.member(path) {
            Some(m) => w
                .contents(m, &std::env::temp_dir())
                .map_err(|e| e.to_string())
                .and_then(|d| crate::kpack::archive::parse_index(&d).map_err(|e| e.to_string())),
            None => Err("not in the wheel".to_string()),
        };
        self.archive_index(path, idx, None);
    }

    fn archive_index(
        &mut self,
        path: &str,
        idx: std::result::Result<crate::kpack::archive::ArchiveIndex, String>,
        only: Option<&str>,
    ) {
        match idx {
            Ok(idx) => {
                // A TOC alias repeats a frame under another target: counted once.
                for e in idx.kernels.iter().filter(|e| !e.is_alias()) {
                    let (b, n) = e.key.rsplit_once('#').unwrap_or((&e.key, ""));
                    if only.is_some_and(|o| o != b) {
                        continue;
                    }
                    self.push(b, n.parse().ok(), &e.arch, (e.size, e.compressed_size));
                }
            }
            Err(e) => self.diagnostics.push(format!("{path}: {e}")),
        }
    }
}

/// Both sides of a diff. Two directories are scanned together, streamed, their
/// files met in path order: a plain file (not a binary, archive or code) at the
/// same path with the same size and class on both sides is left out at once, as
/// comparing would leave it out, so two builds of 40,000 files hold what differs and
/// what has device code, not a report per file.
pub(super) fn read_sides(old: &Path, new: &Path, opts: &DiffOptions) -> Result<(Side, Side)> {
    crate::kernels::refuse_zip(old)?;
    crate::kernels::refuse_zip(new)?;
    if !(old.is_dir() && new.is_dir()) {
        let (a, b) = rayon::join(|| read_side(old, opts), || read_side(new, opts));
        return Ok((a?, b?));
    }
    let sopts = ScanOptions {
        threads: opts.threads,
        ..Default::default()
    };
    let (mut kept_a, mut kept_b) = (Vec::new(), Vec::new());
    // Each kept file's code objects are listed as it arrives, and its report keeps
    // only what reading it again needs from then on.
    let (mut inv_a, mut inv_b) = (Inventory::new(opts), Inventory::new(opts));
    let at = |root| Place {
        root,
        root_is_file: false,
        wheel: None,
    };
    let (at_a, at_b) = (at(old), at(new));
    let keep = |inv: &mut Inventory<'_>, at: &Place<'_>, kept: &mut Vec<FileReport>, f| {
        let mut f: FileReport = f;
        inv.add(at, &f);
        f.keep_for_reading();
        kept.push(f);
    };
    let (ra, rb) = std::thread::scope(|s| {
        // Reports cross in batches: a hand-over per file woke the other thread 80,000
        // times for two trees of 40,000 files.
        let streamed = |dir: &Path| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<FileReport>>(4);
            let sopts = &sopts;
            let dir = dir.to_path_buf();
            let h = s.spawn(move || {
                let mut batch = Vec::with_capacity(BATCH);
                let r = scan::scan_each(&dir, sopts, &crate::event::NoEvents, &mut |f| {
                    batch.push(f);
                    if batch.len() == BATCH {
                        let _ = tx.send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)));
                    }
                });
                let _ = tx.send(batch);
                r
            });
            (h, rx.into_iter().flatten())
        };
        let (ha, rx_a) = streamed(old);
        let (hb, rx_b) = streamed(new);
        let (mut a, mut b) = (rx_a.peekable(), rx_b.peekable());
        loop {
            let order = match (a.peek(), b.peek()) {
                (Some(fa), Some(fb)) => fa.path.cmp(&fb.path),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => break,
            };
            match order {
                std::cmp::Ordering::Less => {
                    if let Some(f) = a.next() {
                        keep(&mut inv_a, &at_a, &mut kept_a, f);
                    }
                }
                std::cmp::Ordering::Greater => {
                    if let Some(f) = b.next() {
                        keep(&mut inv_b, &at_b, &mut kept_b, f);
                    }
                }
                std::cmp::Ordering::Equal => {
                    if let (Some(fa), Some(fb)) = (a.next(), b.next())
                        && !(plain(&fa) && fa.kind == fb.kind && fa.size == fb.size)
                    {
                        keep(&mut inv_a, &at_a, &mut kept_a, fa);
                        keep(&mut inv_b, &at_b, &mut kept_b, fb);
                    }
                }
            }
        }
        let join = |h: std::thread::ScopedJoinHandle<'_, Result<scan::TreeReport>>| {
            h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
        };
        (join(ha), join(hb))
    });
    let (mut ra, mut rb) = (ra?, rb?);
    ra.files = kept_a;
    rb.files = kept_b;
    Ok((inv_a.side(old, false, ra), inv_b.side(new, false, rb)))
}

/// Reports handed from a side's scan to the comparison at a time.
const BATCH: usize = 64;

/// A file the comparison reads only its size and class of: not a binary, archive or
/// code object, nor a database holding bundles or embedded code (the 8 GiB bench
/// tree's 1,144 kernel databases are code objects, counted by their class, which the
/// scan tallies: both sides held a report of each of them). (An archive's code is
/// counted for the binary its key names; a key naming a plain file, which no pack
/// writes, would not be compared.)
fn plain(f: &FileReport) -> bool {
    match f.kind {
        FileKind::Opaque | FileKind::Symlink | FileKind::Other => true,
        FileKind::KernelDatabase => f.all_bundles().next().is_none() && f.embedded.is_empty(),
        _ => false,
    }
}

fn read_side(root: &Path, opts: &DiffOptions) -> Result<Side> {
    crate::kernels::refuse_zip(root)?;
    let scan = scan::scan(
        root,
        &ScanOptions {
            threads: opts.threads,
            ..Default::default()
        },
        &crate::event::NoEvents,
    )?;
    read_scanned(root, opts, scan)
}

/// A side from its scan (every file the comparison needs).
fn read_scanned(root: &Path, opts: &DiffOptions, scan: scan::TreeReport) -> Result<Side> {
    // A wheel is a tree of members, not one file.
    let root_is_file = std::fs::metadata(root).is_ok_and(|m| m.is_file()) && scan.wheel.is_none();
    let wheel = match &scan.wheel {
        Some(_) => Some(crate::wheel::Wheel::open(root)?),
        None => None,
    };
    let mut inv = Inventory::new(opts);
    let place = Place {
        root,
        root_is_file,
        wheel: wheel.as_ref(),
    };
    for f in &scan.files {
        inv.add(&place, f);
    }
    Ok(inv.side(root, root_is_file, scan))
}

/// Where a side's files are read from.
struct Place<'a> {
    root: &'a Path,
    /// The side is one file (its reports' paths name the root).
    root_is_file: bool,
    /// The side is this wheel (its files are members).
    wheel: Option<&'a crate::wheel::Wheel>,
}

impl<'a> Inventory<'a> {
    fn new(opts: &'a DiffOptions) -> Self {
        Inventory {
            targets: &opts.targets,
            objects: Objects::default(),
            diagnostics: Vec::new(),
        }
    }

    /// The code objects of file `f` (none for a second hard link).
    fn add(&mut self, at: &Place<'_>, f: &FileReport) {
        if f.hard_link_of.is_some() {
            return;
        }
        if let Some(w) = at.wheel {
            // A wheel's members are its files; host-only members are not followed
            // (their archives are members too, or in the device wheels).
            match f.kind {
                FileKind::Kpack => self.wheel_archive(w, &f.path),
                FileKind::HostOnlyBinary => {}
                _ => {
                    self.bundles(f);
                    if f.kind == FileKind::CodeObject
                        && let Some(t) = &f.arch
                    {
                        self.push(&f.path, None, t, (f.size, f.size));
                    }
                }
            }
            return;
        }
        let abs = if at.root_is_file {
            at.root.to_path_buf()
        } else {
            at.root.join(crate::relpath::to_path(&f.path))
        };
        match f.kind {
            FileKind::Kpack => self.archive(&f.path, &abs, None),
            FileKind::HostOnlyBinary if at.root_is_file => {
                if let Some(m) = &f.marker {
                    for a in crate::kernels::marker_archives(&abs, m) {
                        self.archive(&a.display().to_string(), &a, Some(&m.kernel_name));
                    }
                }
            }
            FileKind::CodeObject => {
                if let Some(t) = &f.arch {
                    self.push(&f.path, None, t, (f.size, f.size));
                }
            }
            _ => self.bundles(f),
        }
        // Device code the binary loads itself: counted for the binary (its kernels
        // are read with the binary's, named `path@section[n]`).
        for e in &f.embedded {
            for t in &e.targets {
                self.push(&f.path, None, &t.arch, (t.size, t.size));
            }
        }
    }

    /// The code objects of a file's bundles.
    fn bundles(&mut self, f: &FileReport) {
        for b in f.all_bundles() {
            for t in &b.targets {
                let sizes = (t.size, t.compressed_size);
                self.push(&f.path, Some(b.index as u32), &t.arch, sizes);
            }
        }
    }

    /// The side: its scan and the code objects found in it.
    fn side(self, root: &Path, root_is_file: bool, mut scan: scan::TreeReport) -> Side {
        let Inventory {
            mut objects,
            diagnostics,
            ..
        } = self;
        // A host-only binary given alone: its device code is its archives', under
        // its own name.
        if root_is_file && let Some(m) = scan.files.first().and_then(|f| f.marker.as_ref()) {
            objects.rename_binary(&m.kernel_name, &scan.files[0].path);
        }
        // The code objects are listed: what the comparison reads of each file from
        // now on is its path, class and size, and what reading its kernels again
        // needs.
        scan.files.iter_mut().for_each(FileReport::keep_for_reading);
        Side {
            root: root.to_path_buf(),
            scan,
            objects,
            kernels: KernelsReport::default(),
            root_is_file,
            diagnostics,
        }
    }
}

impl Side {
    /// The file of a binary by the names it may have here (the first that exists).
    fn file<'a>(&'a self, names: &[String]) -> Option<&'a FileReport> {
        if self.scan.wheel.is_some() {
            return None;
        }
        if self.root_is_file {
            return self.scan.files.first();
        }
        names
            .iter()
            .find_map(|n| self.scan.files.iter().find(|f| f.path == *n))
    }

    fn abs(&self, f: &FileReport) -> PathBuf {
        if self.root_is_file {
            self.root.clone()
        } else {
            self.root.join(crate::relpath::to_path(&f.path))
        }
    }
}

/// Bundles stored byte for byte the same in a binary on both sides.
pub(super) struct SameBundles {
    /// The binary's path on A.
    pub a_path: String,
    /// On B.
    pub b_path: String,
    /// Bundle indexes (the same on both sides).
    pub indexes: Vec<u32>,
}

/// The compressed bundles of each binary (given by its names on A and on B) that hold
/// the same bytes on both sides. A rebuild that touched one translation unit leaves the
/// other bundles byte for byte the same, and with them their kernels: they need to be
/// decompressed on one side only. Anything unreadable is simply not matched (the
/// kernels reader reports it).
pub(super) fn same_bundles(
    a: &Side,
    b: &Side,
    binaries: &[(Vec<String>, Vec<String>)],
) -> Vec<SameBundles> {
    binaries
        .par_iter()
        .filter_map(|(na, nb)| {
            let (fa, fb) = (a.file(na)?, b.file(nb)?);
            let indexes = identical_bundles((&a.abs(fa), fa.kind), (&b.abs(fb), fb.kind))?;
            (!indexes.is_empty()).then(|| SameBundles {
                a_path: fa.path.clone(),
                b_path: fb.path.clone(),
                indexes,
            })
        })
        .collect()
}

/// Indexes of the compressed bundles stored identically in two fat binaries or bundle
/// files.
fn identical_bundles(a: (&Path, FileKind), b: (&Path, FileKind)) -> Option<Vec<u32>> {
    let (ma, mb) = (map_bundles(a.0, a.1)?, map_bundles(b.0, b.1)?);
    let (ba, bb) = (ma.bundles()?, mb.bundles()?);
    // Only compressed bundles: an uncompressed one costs less to read again than to
    // compare.
    Some(
        ba.1.iter()
            .filter(|x| x.compression != crate::bundle::Compression::None)
            .filter(|x| stored(&ba, x.index).is_some_and(|s| Some(s) == stored(&bb, x.index)))
            .map(|x| x.index as u32)
            .collect(),
    )
}

/// The stored bytes of bundle `i`.
fn stored<'a>(
    (sec, bundles): &(&'a [u8], Vec<crate::bundle::BundleInfo>),
    i: usize,
) -> Option<&'a [u8]> {
    let x = bundles.iter().find(|x| x.index == i)?;
    let start = usize::try_from(x.offset).ok()?;
    sec.get(start..start.checked_add(usize::try_from(x.stored_size).ok()?)?)
}

/// A mapped fat binary or bundle file.
struct Mapped {
    map: memmap2::Mmap,
    kind: FileKind,
}

fn map_bundles(path: &Path, kind: FileKind) -> Option<Mapped> {
    if !matches!(kind, FileKind::FatBinary | FileKind::Bundle) {
        return None;
    }
    let map = crate::fsutil::map_file(path).ok()??;
    Some(Mapped { map, kind })
}

impl Mapped {
    /// The section holding the bundles and the bundles.
    fn bundles(&self) -> Option<(&[u8], Vec<crate::bundle::BundleInfo>)> {
        match self.kind {
            FileKind::Bundle => Some((&self.map, crate::bundle::walk_section(&self.map).ok()?)),
            _ => crate::fatbin::read(&self.map)
                .ok()?
                .map(|f| (f.section, f.bundles)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/bin")
            .join(name)
    }

    /// A binary's digest is its code objects' (bundle, target, size) whatever the
    /// order they were found in, repeats summed; any change of one is another
    /// digest; binaries given one name are one.
    #[test]
    fn shapes_are_equal_exactly_when_binaries_hold_the_same_code_objects() {
        let side = |objects: &[(&str, Option<u32>, &str, u64)]| {
            let mut o = Objects::default();
            for &(b, n, t, size) in objects {
                o.push(b, n, t, (size, 0));
            }
            o
        };
        let same = |o: &Objects| o.shapes(|b| b.to_string());
        let base = side(&[
            ("lib/a.so", Some(0), "gfx90a", 100),
            ("lib/a.so", Some(1), "gfx90a", 50),
            ("lib/a.so", Some(0), "gfx942", 70),
            ("lib/b.so", None, "gfx906", 9),
        ]);
        let s = same(&base);
        assert_eq!(s.len(), 2);
        // Found in another order, and one code object found as two halves.
        let shuffled = side(&[
            ("lib/b.so", None, "gfx906", 9),
            ("lib/a.so", Some(0), "gfx942", 70),
            ("lib/a.so", Some(1), "gfx90a", 20),
            ("lib/a.so", Some(0), "gfx90a", 100),
            ("lib/a.so", Some(1), "gfx90a", 30),
        ]);
        assert_eq!(same(&shuffled), s);
        for changed in [
            side(&[("lib/a.so", Some(0), "gfx90a", 101)]),
            side(&[("lib/a.so", Some(2), "gfx90a", 100)]),
            side(&[("lib/a.so", None, "gfx90a", 100)]),
            side(&[("lib/a.so", Some(0), "gfx90a:xnack+", 100)]),
        ] {
            let mut o = side(&[
                ("lib/a.so", Some(1), "gfx90a", 50),
                ("lib/a.so", Some(0), "gfx942", 70),
                ("lib/b.so", None, "gfx906", 9),
            ]);
            for x in changed.list.iter() {
                let (b, t) = (
                    &changed.binaries.names[x.binary as usize],
                    &changed.targets.names[x.target as usize],
                );
                o.push(b, x.bundle, t, (x.size, 0));
            }
            let d = same(&o);
            assert_ne!(d["lib/a.so"], s["lib/a.so"]);
            assert_eq!(d["lib/b.so"], s["lib/b.so"]);
        }
        // Two files named as one binary (a rename) are one.
        let split = side(&[
            ("lib/a.so.1", Some(0), "gfx90a", 100),
            ("lib/a.so.1", Some(0), "gfx942", 70),
            ("lib/a.so.2", Some(1), "gfx90a", 50),
            ("lib/b.so", None, "gfx906", 9),
        ]);
        let named = split.shapes(|b| b.trim_end_matches(['.', '1', '2']).to_string());
        assert_eq!(named, s);
    }

    #[test]
    fn identical_compressed_bundles_are_found_and_nothing_else() {
        let z = fixture("libzkern.so");
        // Two CCOB bundles (clang-19 --offload-compress, two TUs): both the same.
        assert_eq!(
            identical_bundles((&z, FileKind::FatBinary), (&z, FileKind::FatBinary)),
            Some(vec![0, 1])
        );
        // Another library's CCOB bundle is not the same bytes.
        let other = fixture("libkernels_z.so");
        assert_eq!(
            identical_bundles((&z, FileKind::FatBinary), (&other, FileKind::FatBinary)),
            Some(vec![])
        );
        // Uncompressed bundles are never compared (reading them again is cheaper).
        let plain = fixture("libvadd.so");
        assert_eq!(
            identical_bundles((&plain, FileKind::FatBinary), (&plain, FileKind::FatBinary)),
            Some(vec![])
        );
        // Not a fat binary: nothing to compare.
        assert_eq!(
            identical_bundles((&z, FileKind::Opaque), (&z, FileKind::FatBinary)),
            None
        );
    }
}
