//! `kernels` of a tree of any size: the rows of each piece of work are written to an
//! unnamed temporary file as it is done (one JSON line each), and only a small entry
//! per row stays in memory (where its line lies and what it sorts by). The rows come
//! back one at a time, in the order [`list_kernels`] then [`sort_rows`] give them.

use super::*;
use crate::natural::{natural_cmp, target_cmp};
use std::cmp::Ordering;
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::sync::Mutex;

/// Every kernel under a path, written out: [`SpooledKernels::rows`] reads them back.
#[derive(Debug)]
pub struct SpooledKernels {
    /// What was read.
    pub root: PathBuf,
    /// Code objects read.
    pub code_objects: u64,
    /// Bytes of machine code of every kernel (`code_size`, where known).
    pub code_bytes: u64,
    /// Kernels that spill registers.
    pub spilling: u64,
    /// Code objects or files that could not be read, with why.
    pub diagnostics: Vec<String>,
    file: File,
    /// The rows, in their order.
    entries: Vec<Entry>,
}

/// One row: where its line lies in the spool.
#[derive(Debug)]
struct Entry {
    at: u64,
    len: u32,
}

impl SpooledKernels {
    /// How many kernels.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The rows, read back one at a time (it can be called again).
    pub fn rows(&self) -> impl Iterator<Item = Result<KernelRow>> + '_ {
        let mut line = Vec::new();
        self.entries.iter().map(move |e| {
            line.resize(e.len as usize, 0);
            let mut f = &self.file;
            f.seek(SeekFrom::Start(e.at))
                .and_then(|_| f.read_exact(&mut line))
                .map_err(spool_error)?;
            parse(&line)
        })
    }
}

/// [`list_kernels`] then [`sort_rows`] by `by`, with the rows written out as they are
/// read: memory holds the work in flight and, per row, where it lies (16 bytes) and
/// while sorting what it sorts by (a number, or its name for a sort by name or
/// target), whatever the tree.
pub fn list_kernels_spooled(
    root: &Path,
    opts: &KernelsOptions,
    by: SortBy,
) -> Result<SpooledKernels> {
    let report = scan_kernel_files(root, opts)?;
    let spool = Spool {
        out: Mutex::new((
            BufWriter::new(tempfile::tempfile().map_err(spool_error)?),
            0,
        )),
    };
    let per_file = gather(root, &report, opts, &spool)?;
    let mut diagnostics = scan_errors(&report);
    drop(report);
    let (out, _) = spool.out.into_inner().unwrap_or_else(|e| e.into_inner());
    let file = out.into_inner().map_err(|e| spool_error(e.into_error()))?;
    let (mut code_objects, mut code_bytes, mut spilling) = (0, 0, 0);
    let mut groups: Vec<Group> = Vec::new();
    for parts in per_file {
        let mut group: Option<Group> = None;
        for p in parts {
            let p = p.map_err(spool_error)?;
            code_objects += p.objects;
            code_bytes += p.code_bytes;
            spilling += p.spilling;
            diagnostics.extend(p.diagnostics);
            let Some((lo, hi)) = p.span else { continue };
            let g = group.get_or_insert_with(|| Group {
                parts: Vec::new(),
                lo: lo.clone(),
                hi: hi.clone(),
            });
            g.widen(lo, hi);
            g.parts.push((p.at, p.len));
        }
        groups.extend(group);
    }
    dedup(&mut diagnostics);
    let mut entries = Vec::new();
    for g in coalesce(groups) {
        path_ordered(&file, &g, by, &mut entries)?;
    }
    // Stable: ties keep the path order, as `sort_rows` does.
    entries.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(SpooledKernels {
        root: root.to_path_buf(),
        code_objects,
        code_bytes,
        spilling,
        diagnostics,
        file,
        entries: entries.into_iter().map(|(e, _)| e).collect(),
    })
}

/// The rows of one piece of work, where they lie in the spool.
struct SpoolPart {
    at: u64,
    len: u64,
    objects: u64,
    code_bytes: u64,
    spilling: u64,
    /// The first and last of its rows' paths (natural order), when it has rows.
    span: Option<(String, String)>,
    diagnostics: Vec<String>,
}

/// The spool being written, and its length.
struct Spool {
    out: Mutex<(BufWriter<File>, u64)>,
}

impl Keep for Spool {
    type Part = io::Result<SpoolPart>;
    fn keep(&self, (objects, rows, diagnostics): FileRows) -> Self::Part {
        let mut text = Vec::new();
        let mut span: Option<(&str, &str)> = None;
        let (mut code_bytes, mut spilling) = (0, 0);
        for r in &rows {
            code_bytes += r.kernel.code_size.unwrap_or(0);
            spilling += u64::from(r.kernel.spills().unwrap_or(0) > 0);
            serde_json::to_writer(&mut text, &**r).map_err(io::Error::other)?;
            text.push(b'\n');
            let p = r.path.as_str();
            span = Some(match span {
                None => (p, p),
                Some((lo, hi)) => (
                    if natural_cmp(p, lo).is_lt() { p } else { lo },
                    if natural_cmp(p, hi).is_gt() { p } else { hi },
                ),
            });
        }
        let span = span.map(|(lo, hi)| (lo.to_string(), hi.to_string()));
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let at = out.1;
        out.0.write_all(&text)?;
        out.1 += text.len() as u64;
        Ok(SpoolPart {
            at,
            len: text.len() as u64,
            objects: objects.len() as u64,
            code_bytes,
            spilling,
            span,
            diagnostics,
        })
    }
}

/// The parts whose rows are sorted together: one file's, or those of files whose
/// row paths interleave.
struct Group {
    parts: Vec<(u64, u64)>,
    lo: String,
    hi: String,
}

impl Group {
    fn widen(&mut self, lo: String, hi: String) {
        if natural_cmp(&lo, &self.lo).is_lt() {
            self.lo = lo;
        }
        if natural_cmp(&hi, &self.hi).is_gt() {
            self.hi = hi;
        }
    }
}

/// Groups in path order, those whose paths overlap merged: each then holds every row
/// of its paths, so sorting each alone sorts them all.
fn coalesce(mut groups: Vec<Group>) -> Vec<Group> {
    groups.sort_by(|a, b| natural_cmp(&a.lo, &b.lo));
    let mut out: Vec<Group> = Vec::with_capacity(groups.len());
    for g in groups {
        match out.last_mut() {
            Some(cur) if natural_cmp(&g.lo, &cur.hi).is_le() => {
                cur.parts.extend(g.parts);
                cur.widen(g.lo, g.hi);
            }
            _ => out.push(g),
        }
    }
    out
}

/// The entries of one group's rows in path order, each with its sort key.
fn path_ordered(
    file: &File,
    g: &Group,
    by: SortBy,
    entries: &mut Vec<(Entry, RowKey)>,
) -> Result<()> {
    let mut rows = Vec::new();
    for &(at, len) in &g.parts {
        let mut text = vec![
            0;
            usize::try_from(len)
                .map_err(io::Error::other)
                .map_err(spool_error)?
        ];
        let mut f = file;
        f.seek(SeekFrom::Start(at))
            .and_then(|_| f.read_exact(&mut text))
            .map_err(spool_error)?;
        let mut start = 0;
        for line in text.split_inclusive(|&b| b == b'\n') {
            let row = parse(line)?;
            let len = u32::try_from(line.len())
                .map_err(|_| spool_error(io::Error::other("a row past 4 GiB")))?;
            rows.push((
                row,
                Entry {
                    at: at + start as u64,
                    len,
                },
            ));
            start += line.len();
        }
    }
    rows.sort_by(|a, b| path_order(&a.0, &b.0));
    entries.extend(rows.into_iter().map(|(r, e)| {
        let key = RowKey::of(&r, by);
        (e, key)
    }));
    Ok(())
}

fn parse(line: &[u8]) -> Result<KernelRow> {
    serde_json::from_slice(line).map_err(|e| spool_error(io::Error::other(e)))
}

fn spool_error(e: io::Error) -> Error {
    Error::io(std::env::temp_dir().join("(kernels spool)"), e)
}

/// What a row sorts by in [`sort_rows`].
enum RowKey {
    Number(u64),
    Name(Box<str>),
    Target(Box<str>, Box<str>),
}

impl RowKey {
    fn of(r: &KernelRow, by: SortBy) -> RowKey {
        match by {
            SortBy::Name => RowKey::Name(r.kernel.display_name().into()),
            SortBy::Target => {
                RowKey::Target(r.target.as_str().into(), r.kernel.display_name().into())
            }
            _ => RowKey::Number(number_key(r, by)),
        }
    }

    fn cmp(&self, other: &RowKey) -> Ordering {
        match (self, other) {
            (RowKey::Number(a), RowKey::Number(b)) => b.cmp(a),
            (RowKey::Name(a), RowKey::Name(b)) => natural_cmp(a, b),
            (RowKey::Target(ta, na), RowKey::Target(tb, nb)) => {
                target_cmp(ta, tb).then_with(|| natural_cmp(na, nb))
            }
            _ => Ordering::Equal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(lo: &str, hi: &str, at: u64) -> Group {
        Group {
            parts: vec![(at, 1)],
            lo: lo.into(),
            hi: hi.into(),
        }
    }

    /// A binary's embedded code objects are named `path@section[n]`, which sorts
    /// after a file named `path.1`: the two files' rows interleave, so they are
    /// sorted together; a file apart from both stays alone.
    #[test]
    fn files_whose_rows_interleave_are_sorted_together() {
        let groups = vec![
            group("lib/b.so", "lib/b.so", 3),
            group("lib/a.so", "lib/a.so@.rodata[0]", 1),
            group("lib/a.so.1", "lib/a.so.1", 2),
        ];
        let out = coalesce(groups);
        let parts: Vec<Vec<u64>> = out
            .iter()
            .map(|g| g.parts.iter().map(|p| p.0).collect())
            .collect();
        assert_eq!(parts, vec![vec![1, 2], vec![3]]);
        assert_eq!(
            (out[0].lo.as_str(), out[0].hi.as_str()),
            ("lib/a.so", "lib/a.so@.rodata[0]")
        );
    }

    /// Rows come back from the spool as they went in (every field, the optional
    /// ones absent or present).
    #[test]
    fn a_row_reads_back_as_written() {
        let full = KernelRow {
            path: "lib/x.so".into(),
            key: Some("lib/x.so#2".into()),
            bundle: Some(2),
            target: "gfx90a:xnack+".into(),
            code_object_version: Some(5),
            kernel: Kernel {
                name: "_Z4axpyPfS_f".into(),
                demangled: Some("axpy(float*, float*, float)".into()),
                symbol: Some("_Z4axpyPfS_f.kd".into()),
                code_size: Some(1234),
                vgpr: Some(32),
                agpr: Some(0),
                uses_dynamic_stack: Some(false),
                ..Default::default()
            },
            occupancy: crate::occupancy::occupancy(
                "gfx90a:xnack+",
                &Kernel {
                    vgpr: Some(32),
                    sgpr: Some(16),
                    ..Default::default()
                },
            ),
        };
        let bare = KernelRow {
            path: "k.co".into(),
            key: None,
            bundle: None,
            target: "gfx1100".into(),
            code_object_version: None,
            kernel: Kernel {
                name: "k".into(),
                ..Default::default()
            },
            occupancy: None,
        };
        for row in [full, bare] {
            let line = serde_json::to_vec(&row).unwrap();
            assert_eq!(parse(&line).unwrap(), row);
        }
    }
}
