//! File helpers: reading inputs without copying them (regular files only, mapped
//! read-only) and atomic output files.
//!
//! Atomic output files: written to a temporary sibling, then renamed into place, so
//! a reader never sees a half-written file and a failure leaves nothing behind.
//! (No fsync: the rename is atomic against a crashed or killed process; durability
//! against power loss is the packaging system's business, as for `cp` or `cargo`.)

use crate::error::{Error, Result};
use std::fs::{File, Permissions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Write `bytes` to `path` atomically, with `mode` (default 0644).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: Option<Permissions>) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".kpack-tmp-")
        .tempfile_in(dir)
        .map_err(|e| Error::io(dir, e))?;
    tmp.write_all(bytes).map_err(|e| Error::io(path, e))?;
    let mode = mode.unwrap_or_else(|| std::os::unix::fs::PermissionsExt::from_mode(0o644));
    tmp.as_file()
        .set_permissions(mode)
        .map_err(|e| Error::io(path, e))?;
    tmp.persist(path).map_err(|e| Error::io(path, e.error))?;
    Ok(())
}

/// Create a new file at `path` (inside a staging directory that is renamed as a
/// whole later) with `bytes`, the permissions and the modification time of `like`.
/// Aligned 64 KiB runs of zeros (an executable's padding) are left as holes where
/// the file system supports them: same content, less disk.
pub fn write_new(path: &Path, bytes: &[u8], like: &std::fs::Metadata) -> Result<()> {
    write_new_with(path, like, &mut |w| w.write_all(bytes))
}

/// [`write_new`] of the bytes `fill` writes, streamed (a file of any size costs a
/// 64 KiB buffer). On an error the new file is removed.
pub fn write_new_with(
    path: &Path,
    like: &std::fs::Metadata,
    fill: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let mut f = File::create(path).map_err(|e| Error::io(path, e))?;
    let written = (|| {
        let mut w = SparseWriter::new(&mut f);
        fill(&mut w)?;
        w.finish()
    })();
    if let Err(e) = written {
        drop(f);
        let _ = std::fs::remove_file(path);
        return Err(Error::io(path, e));
    }
    f.set_permissions(like.permissions())
        .map_err(|e| Error::io(path, e))?;
    if let Ok(m) = like.modified() {
        let _ = f.set_times(std::fs::FileTimes::new().set_modified(m));
    }
    Ok(())
}

/// Writes a new, empty file, seeking over aligned 64 KiB runs of zeros instead of
/// writing them (holes where the file system has them). [`SparseWriter::finish`]
/// sets the length, so a file that ends in zeros has it too.
pub struct SparseWriter<'f> {
    f: &'f mut File,
    /// The block being filled (output offset `len - block.len()`).
    block: Vec<u8>,
    /// Whole non-zero blocks not written yet (written together).
    run: Vec<u8>,
    len: u64,
}

impl<'f> SparseWriter<'f> {
    const BLOCK: usize = 64 << 10;
    const RUN: usize = 16 * Self::BLOCK;

    /// A writer at the start of `f`, which must be empty.
    pub fn new(f: &'f mut File) -> Self {
        SparseWriter {
            f,
            block: Vec::with_capacity(Self::BLOCK),
            run: Vec::with_capacity(Self::RUN),
            len: 0,
        }
    }

    fn flush_run(&mut self) -> std::io::Result<()> {
        self.f.write_all(&self.run)?;
        self.run.clear();
        Ok(())
    }

    fn block_done(&mut self) -> std::io::Result<()> {
        use std::io::{Seek, SeekFrom};
        if self.block.iter().all(|&b| b == 0) {
            self.flush_run()?;
            self.f.seek(SeekFrom::Current(Self::BLOCK as i64))?;
        } else {
            self.run.extend_from_slice(&self.block);
            if self.run.len() >= Self::RUN {
                self.flush_run()?;
            }
        }
        self.block.clear();
        Ok(())
    }

    /// Write what is left and set the file's length.
    pub fn finish(mut self) -> std::io::Result<()> {
        self.flush_run()?;
        self.f.write_all(&self.block)?;
        self.f.set_len(self.len)
    }
}

impl Write for SparseWriter<'_> {
    fn write(&mut self, mut buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len();
        while !buf.is_empty() {
            let take = (Self::BLOCK - self.block.len()).min(buf.len());
            self.block.extend_from_slice(&buf[..take]);
            buf = &buf[take..];
            if self.block.len() == Self::BLOCK {
                self.block_done()?;
            }
        }
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Copy the opened input `from` (at `src`) to the new file `dst`, with the mode and
/// modification time of `meta`. A full disk is the output's problem and names
/// `dst`; any other read error names `src`. Returns the bytes copied.
pub fn copy_opened(
    mut from: File,
    src: &Path,
    dst: &Path,
    meta: &std::fs::Metadata,
) -> Result<u64> {
    let mut to = File::create_new(dst).map_err(|e| Error::io(dst, e))?;
    let n = std::io::copy(&mut from, &mut to).map_err(|e| {
        if matches!(
            e.raw_os_error(),
            Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG)
        ) {
            Error::io(dst, e)
        } else {
            Error::io(src, e)
        }
    })?;
    drop(to);
    std::fs::set_permissions(dst, meta.permissions()).map_err(|e| Error::io(dst, e))?;
    if let (Ok(f), Ok(m)) = (File::options().write(true).open(dst), meta.modified()) {
        let _ = f.set_times(std::fs::FileTimes::new().set_modified(m));
    }
    Ok(n)
}

/// Open a regular file for reading without following a symlink or blocking on a
/// fifo swapped in after the walk.
pub fn open_regular(path: &Path) -> std::io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// Open a file a scan read, as [`open_regular`] does, and check that it is the very
/// inode the scan saw when that is known (`identity`, device and inode): a file or a
/// directory on its path swapped after the scan is not taken for it
/// (`ErrorKind::Other`, "another file now").
pub fn open_scanned(
    path: &Path,
    identity: Option<(u64, u64)>,
) -> std::io::Result<(File, std::fs::Metadata)> {
    use std::os::unix::fs::MetadataExt;
    let file = open_regular(path)?;
    let meta = file.metadata()?;
    if identity.is_some_and(|id| id != (meta.dev(), meta.ino())) {
        return Err(std::io::Error::other("another file now"));
    }
    Ok((file, meta))
}

/// Open a regular file as [`open_regular`] does and map it (`None` when empty).
pub fn map_file(path: &Path) -> std::io::Result<Option<memmap2::Mmap>> {
    let file = open_regular(path)?;
    if file.metadata()?.len() == 0 {
        return Ok(None);
    }
    let map = map_open_file(&file)?;
    crate::mapped::note(&map, path);
    Ok(Some(map))
}

/// How much of a file the kernel may map on one read fault: the page cache holds a
/// large file in folios of up to 2 MiB (ext4 and xfs, PMD size on x86-64), and Linux
/// 6.18 maps the whole folio holding a faulting page (measured here: a read of one
/// byte of a generated binary made 2,048 KiB resident, with or without
/// `MADV_RANDOM`); older kernels map `fault_around_bytes` (64 KiB) around it. A
/// folio starts at a multiple of its size in the file, so a release widened to
/// multiples of this covers whatever a read inside it mapped.
pub const FAULT_SPAN: usize = 2 << 20;

/// The most a reader of a file's bytes with positioned reads (instead of through its
/// map, see [`FAULT_SPAN`]) reads at a time.
pub const READ_PIECE: usize = 256 << 10;

/// A mapped file's headers read with positioned reads, as the `object` crate's
/// parsers ask for them (`object::ReadRef`): a read of up to [`SMALL_READ`] bytes is
/// copied from the file and kept until this is dropped (the `object` crate's
/// `ReadCache`), so that a header never makes the folio around it resident (see
/// [`FAULT_SPAN`]); a larger one (the relocations or symbols of a large library) is
/// the map's bytes, released by whoever reads them, not a copy on the heap.
pub struct SmallReads<'a> {
    cache: object::ReadCache<&'a File>,
    map: &'a [u8],
}

/// The most [`SmallReads`] copies from its file at a time.
pub const SMALL_READ: u64 = 1 << 20;

impl<'a> SmallReads<'a> {
    /// Reads of `file`, whose map is `map`.
    pub fn new(file: &'a File, map: &'a [u8]) -> SmallReads<'a> {
        SmallReads {
            cache: object::ReadCache::new(file),
            map,
        }
    }
}

impl<'a> object::ReadRef<'a> for &'a SmallReads<'a> {
    fn len(self) -> std::result::Result<u64, ()> {
        Ok(self.map.len() as u64)
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> std::result::Result<&'a [u8], ()> {
        if size > SMALL_READ {
            self.map.read_bytes_at(offset, size)
        } else {
            (&self.cache).read_bytes_at(offset, size)
        }
    }

    fn read_bytes_at_until(
        self,
        range: std::ops::Range<u64>,
        delimiter: u8,
    ) -> std::result::Result<&'a [u8], ()> {
        (&self.cache).read_bytes_at_until(range, delimiter)
    }
}

/// Tell the kernel this process no longer needs the pages of `len` bytes at
/// `offset` of a read-only file map: they leave the process's resident set (and are
/// read again from the page cache if touched later). Used after consuming large
/// inputs so that peak memory does not grow with the files processed.
///
/// The range is widened to multiples of [`FAULT_SPAN`]: what the kernel mapped
/// around the bytes read goes too (releasing exactly the frames of a packed 8 GiB
/// tree left 36 MiB of their neighbours' pages resident in verify). Another thread
/// still reading a neighbour loses nothing: the page is read back from the page
/// cache on its next access.
pub fn release_range(map: &memmap2::Mmap, offset: usize, len: usize) {
    let start = offset / FAULT_SPAN * FAULT_SPAN;
    let end = offset
        .saturating_add(len)
        .div_ceil(FAULT_SPAN)
        .saturating_mul(FAULT_SPAN)
        .min(map.len());
    if end > start {
        // SAFETY: `map` is a read-only, shared, file-backed mapping (memmap2's
        // Mmap): dropping its pages loses nothing, any later access (by this caller
        // or another thread reading a neighbouring range) faults them back in from
        // the file with the same bytes. The range lies inside the map (memmap2
        // rounds the start down to its page; the kernel rounds the length up).
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}

/// A reader of `map[start..end]` that releases the folios it has read past
/// ([`release_range`]): reading a member of hundreds of MB from a mapped zip keeps
/// one folio of it resident, not all it has read.
pub struct ReleasingReader<'a> {
    map: &'a memmap2::Mmap,
    pos: usize,
    end: usize,
    /// Everything before this is released.
    released: usize,
}

impl<'a> ReleasingReader<'a> {
    /// A reader of `len` bytes of `map` at `start` (clamped to the map).
    pub fn new(map: &'a memmap2::Mmap, start: usize, len: usize) -> Self {
        let end = start.saturating_add(len).min(map.len());
        let pos = start.min(end);
        ReleasingReader {
            map,
            pos,
            end,
            released: pos / FAULT_SPAN * FAULT_SPAN,
        }
    }
}

impl std::io::Read for ReleasingReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.end - self.pos);
        buf[..n].copy_from_slice(&self.map[self.pos..self.pos + n]);
        self.pos += n;
        let behind = self.pos / FAULT_SPAN * FAULT_SPAN;
        if behind > self.released {
            release_range(self.map, self.released, behind - self.released);
            self.released = behind;
        }
        Ok(n)
    }
}

/// Where `part` lies in `map`, when it is a slice of it (not a copy).
pub fn offset_in(map: &[u8], part: &[u8]) -> Option<usize> {
    let (m, p) = (map.as_ptr() as usize, part.as_ptr() as usize);
    (p >= m && p + part.len() <= m + map.len()).then(|| p - m)
}

/// Map an open file read-only.
pub fn map_open_file(file: &File) -> std::io::Result<memmap2::Mmap> {
    // SAFETY: the map is read-only and private to this process. kpack never writes
    // to its inputs; if another process truncates the file while it is mapped, reads
    // past the new end fault (SIGBUS) — the same risk every mmap-based reader takes,
    // accepted for zero-copy reading of multi-GB trees.
    unsafe { memmap2::Mmap::map(file) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_reads_are_copies_and_large_ones_the_map() {
        use object::ReadRef;
        let mut file = tempfile::tempfile().unwrap();
        let data: Vec<u8> = (0..3 * SMALL_READ as usize)
            .map(|i| (i % 251) as u8)
            .collect();
        file.write_all(&data).unwrap();
        let map = map_open_file(&file).unwrap();
        let reads = SmallReads::new(&file, &map);
        let in_map = |b: &[u8]| map.as_ptr_range().contains(&b.as_ptr());
        let small = (&reads).read_bytes_at(5000, 64).unwrap();
        assert_eq!(small, &data[5000..5064]);
        assert!(!in_map(small));
        let large = (&reads).read_bytes_at(10, SMALL_READ + 1).unwrap();
        assert_eq!(large, &data[10..10 + SMALL_READ as usize + 1]);
        assert!(in_map(large));
        // Past the end, either way: an error, not a short read or a fault.
        assert!((&reads).read_bytes_at(data.len() as u64 - 10, 64).is_err());
        assert!((&reads).read_bytes_at(1, 3 * SMALL_READ).is_err());
        assert_eq!((&reads).len(), Ok(data.len() as u64));
    }

    #[test]
    fn a_slice_is_found_in_its_map_and_a_copy_is_not() {
        let map = vec![7u8; 100];
        assert_eq!(offset_in(&map, &map[30..40]), Some(30));
        assert_eq!(offset_in(&map, &map[..]), Some(0));
        assert_eq!(offset_in(&map, &map[100..]), Some(100));
        let copy = map[30..40].to_vec();
        assert_eq!(offset_in(&map, &copy), None);
    }

    #[test]
    fn streamed_writes_keep_every_byte_and_leave_zero_blocks_as_holes() {
        use std::os::unix::fs::MetadataExt;
        const B: usize = 64 << 10;
        // Data, 40 zero blocks, data across a block boundary, and zeros at the end.
        let mut want = vec![7u8; B + 100];
        want.resize(want.len() + 40 * B + (B - 100), 0);
        want.extend(std::iter::repeat_n(9u8, B + 3));
        want.resize(want.len() + 3 * B, 0);
        let dir = tempfile::tempdir().unwrap();
        let like = std::fs::metadata(dir.path()).unwrap();
        let path = dir.path().join("f");
        // Written in uneven pieces.
        write_new_with(&path, &like, &mut |w| {
            want.chunks(12_345).try_for_each(|c| w.write_all(c))
        })
        .unwrap();
        assert!(std::fs::read(&path).unwrap() == want);
        let blocks = std::fs::metadata(&path).unwrap().blocks() * 512;
        assert!(
            blocks < want.len() as u64 / 2,
            "no holes: {blocks} bytes allocated"
        );
        // A failed fill leaves no file.
        let failed = write_new_with(&path, &like, &mut |w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("disk full"))
        });
        assert!(failed.is_err());
        assert!(!path.exists());
    }

    #[test]
    fn temporaries_are_told_from_outputs_named_like_them() {
        assert!(is_temporary(".kpack-tui-wheel-123-abc"));
        assert!(is_temporary(".kpack-tui-split-place-77-dist"));
        assert!(!is_temporary(".kpack-tui-split-blas_lib.json"));
        assert!(!is_temporary(".kpack-tui-split-blas-lib.json"));
        assert!(!is_temporary("kpack-tui-wheel-123-abc"));
        assert!(!is_temporary(".kpack-tui-123"));
    }
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn sparse_writes_keep_the_content_and_leave_holes() {
        let d = tempfile::tempdir().unwrap();
        let like = std::fs::metadata(d.path()).unwrap();
        let mut gap = vec![7u8; 5000];
        gap.resize(5000 + (4 << 20), 0);
        gap.extend_from_slice(&[9; 300]);
        let mut tail = vec![3u8; 70 << 10];
        tail.resize(512 << 10, 0);
        let shapes = [Vec::new(), vec![1u8; 10], vec![0u8; 200 << 10], gap, tail];
        for (i, b) in shapes.iter().enumerate() {
            let p = d.path().join(format!("f{i}"));
            write_new(&p, b, &like).unwrap();
            assert_eq!(std::fs::read(&p).unwrap(), *b, "shape {i}");
        }
        // Where the file system makes holes (a probe says so), the 4 MiB gap is one.
        let probe = d.path().join("probe");
        File::create(&probe).unwrap().set_len(4 << 20).unwrap();
        if std::fs::metadata(&probe).unwrap().blocks() * 512 < 1 << 20 {
            let m = std::fs::metadata(d.path().join("f3")).unwrap();
            assert!(m.blocks() * 512 < 1 << 20, "{} blocks", m.blocks());
        }
    }
}

/// Where `p` will be once it exists: the deepest ancestor that exists now, with
/// every symlink resolved (`canonicalize`), then the components that do not exist
/// yet, with `.` and `..` folded as directory creation will fold them. Comparing
/// these catches an output reached through a symlink or `..` that lands in the input.
pub fn prospective_path(p: &Path) -> PathBuf {
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut base = abs.as_path();
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    let canon = loop {
        if let Ok(c) = std::fs::canonicalize(base) {
            break c;
        }
        match (base.parent(), base.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                base = parent;
            }
            (Some(parent), None) => {
                // A trailing `..` (file_name is None): keep it and go up.
                rest.push(std::ffi::OsStr::new(".."));
                base = parent;
            }
            (None, _) => break base.to_path_buf(),
        }
    };
    let mut out = canon;
    for c in rest.into_iter().rev() {
        match c.to_str() {
            Some("..") => {
                out.pop();
            }
            Some(".") => {}
            _ => out.push(c),
        }
    }
    out
}

/// How an output relates to an input, both resolved as [`prospective_path`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// Neither holds the other.
    Apart,
    /// The same file or directory (by path, or by device and inode).
    Same,
    /// The output lies inside the input.
    OutputInInput,
    /// The input lies inside the output.
    InputInOutput,
}

/// Whether writing `output` could touch `input`.
pub fn overlap(input: &Path, output: &Path) -> Overlap {
    use std::os::unix::fs::MetadataExt;
    let (i, o) = (prospective_path(input), prospective_path(output));
    let same_inode = match (std::fs::metadata(input), std::fs::metadata(output)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    };
    if i == o || same_inode {
        Overlap::Same
    } else if o.starts_with(&i) {
        Overlap::OutputInInput
    } else if i.starts_with(&o) {
        Overlap::InputInOutput
    } else {
        Overlap::Apart
    }
}

/// Refuse an output that is its input, lies inside it, or (for a directory input)
/// holds it. An output directory that holds an input *file* is fine (`extract
/// A.kpack --all -o .`, `wheel split x.whl -o .`): what is written there is checked
/// against the input by [`Overlap::Same`] file by file where it matters.
pub fn check_apart(input: &Path, output: &Path) -> Result<()> {
    let input_is_dir = std::fs::metadata(input).is_ok_and(|m| m.is_dir());
    let msg = match overlap(input, output) {
        Overlap::Apart => return Ok(()),
        Overlap::InputInOutput if !input_is_dir => return Ok(()),
        Overlap::Same => "is the input",
        Overlap::OutputInInput => "is inside the input",
        Overlap::InputInOutput => "holds the input",
    };
    Err(crate::Error::Usage(format!(
        "the output {} {msg} {}; choose one outside it",
        output.display(),
        input.display()
    )))
}

/// Why a directory is no place to write below a root.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotBelow {
    /// The directory is not under the root at all.
    #[error("{} is not under {}", dir.display(), root.display())]
    Outside {
        /// The directory.
        dir: PathBuf,
        /// The root.
        root: PathBuf,
    },
    /// A component on the way is a symlink (it could lead a write elsewhere).
    #[error("{} is a symlink", .0.display())]
    Symlink(PathBuf),
    /// A component on the way is a file.
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
}

/// Check the directories from `root` down to `dir` that exist already: each must be
/// a real directory, not a symlink (which could lead a write elsewhere) nor a file.
/// Components that do not exist yet are fine: they will be created as directories.
pub fn real_dirs_below(root: &Path, dir: &Path) -> std::result::Result<(), NotBelow> {
    let Ok(rel) = dir.strip_prefix(root) else {
        return Err(NotBelow::Outside {
            dir: dir.to_path_buf(),
            root: root.to_path_buf(),
        });
    };
    let mut at = root.to_path_buf();
    for c in rel.components() {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => return Err(NotBelow::Symlink(at)),
            Ok(m) if !m.is_dir() => return Err(NotBelow::NotADirectory(at)),
            Ok(_) => {}
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

/// Write each of `plan`'s files below `root`, atomically, with the bytes `bytes`
/// gives for it. The directories of every destination are checked first
/// ([`real_dirs_below`]), so a refusal writes nothing, inside or outside; each
/// file's directory is checked again, once created, to resolve inside `root`.
/// `what` names the source in the errors.
pub fn write_below<T>(
    root: &Path,
    what: &Path,
    plan: &[(PathBuf, T)],
    bytes: impl Fn(&T) -> Result<std::borrow::Cow<'_, [u8]>>,
) -> Result<()> {
    let blocked: std::collections::BTreeSet<String> = plan
        .iter()
        .filter_map(|(dest, _)| real_dirs_below(root, dest.parent().unwrap_or(root)).err())
        .map(|e| e.to_string())
        .collect();
    if !blocked.is_empty() {
        return Err(Error::Refused {
            path: what.to_path_buf(),
            what: format!(
                "refusing to extract into {}, nothing written:\n  {}",
                root.display(),
                blocked.into_iter().collect::<Vec<_>>().join("\n  ")
            ),
        });
    }
    std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
    let canon_root = root.canonicalize().map_err(|e| Error::io(root, e))?;
    for (dest, item) in plan {
        let parent = dest.parent().unwrap_or(root);
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        let canon = parent.canonicalize().map_err(|e| Error::io(parent, e))?;
        if !canon.starts_with(&canon_root) {
            return Err(Error::Refused {
                path: parent.to_path_buf(),
                what: format!(
                    "leads outside {} (through a symlink); not writing",
                    root.display()
                ),
            });
        }
        write_atomic(dest, &bytes(item)?, None)?;
    }
    Ok(())
}

#[cfg(test)]
mod prospective_tests {
    use super::*;

    #[test]
    fn symlinks_and_dotdot_in_a_path_that_does_not_exist_yet() {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir(root.join("tree")).unwrap();
        std::os::unix::fs::symlink(root.join("tree"), root.join("link")).unwrap();
        assert_eq!(
            prospective_path(&root.join("link/new/out")),
            root.join("tree/new/out")
        );
        assert_eq!(
            prospective_path(&root.join("tree/a/../b")),
            root.join("tree/b")
        );
        assert_eq!(
            prospective_path(&root.join("tree/a/../../x")),
            root.join("x")
        );
        let tree = root.join("tree");
        assert_eq!(
            overlap(&tree, &root.join("link/new")),
            Overlap::OutputInInput
        );
        assert_eq!(
            overlap(&tree, &root.join("other/../tree/sub")),
            Overlap::OutputInInput
        );
        assert_eq!(overlap(&tree, &root.join("out")), Overlap::Apart);
        assert_eq!(
            overlap(&tree.join("sub"), &root.join("link")),
            Overlap::InputInOutput
        );
        std::fs::write(tree.join("f"), b"x").unwrap();
        std::fs::hard_link(tree.join("f"), root.join("g")).unwrap();
        assert_eq!(overlap(&tree.join("f"), &root.join("g")), Overlap::Same);
        assert_eq!(
            overlap(&tree.join("f"), &root.join("link/f")),
            Overlap::Same
        );
    }
}

/// Open a file named by the user for reading (symlinks followed, as asked): never
/// blocking on a FIFO or device, and refused unless it is a regular file.
pub fn open_input(path: &Path) -> std::io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let ft = file.metadata()?.file_type();
    if !ft.is_file() {
        use std::os::unix::fs::FileTypeExt;
        let what = if ft.is_fifo() {
            "a FIFO"
        } else if ft.is_dir() {
            "a directory"
        } else if ft.is_socket() {
            "a socket"
        } else {
            "a device or special file"
        };
        return Err(std::io::Error::other(format!("{what}, not a regular file")));
    }
    Ok(file)
}

/// Read a whole file named by the user, as [`open_input`] opens it.
pub fn read_input(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = open_input(path)?;
    let mut v = Vec::new();
    f.read_to_end(&mut v)?;
    Ok(v)
}

/// The name prefix of temporary files and directories this process makes for
/// `kind` (`split`, `combine`, `wheel`, `normalize`…): `.kpack-tui-<kind>-<pid>-`.
/// The pid lets a later run tell what a killed one left ([`remove_stale`]).
pub fn stage_prefix(kind: &str) -> String {
    format!(".kpack-tui-{kind}-{}-", std::process::id())
}

/// A temporary directory for `kind` inside `dir`, named with [`stage_prefix`].
pub fn stage_dir(dir: &Path, kind: &str) -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&stage_prefix(kind))
        .tempdir_in(dir)
        .map_err(|e| Error::io(dir, e))
}

/// The staging directory of an output set placed into `out` by [`crate::place`]:
/// beside `out` (so that switching `out` leaves every run's stage alone), or inside
/// it when its parent is not writable or is another file system (a mount point).
/// What killed runs left in either place is removed first; returns those paths too.
pub fn stage_for(out: &Path, kind: &str) -> Result<(tempfile::TempDir, Vec<PathBuf>)> {
    use std::os::unix::fs::MetadataExt;
    let mut removed = remove_stale(out, kind);
    let abs = std::path::absolute(out).map_err(|e| Error::io(out, e))?;
    if let Some(parent) = abs.parent() {
        let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
        if dev(parent).is_some() && dev(parent) == dev(out) {
            removed.extend(remove_stale(parent, kind));
            if let Ok(t) = tempfile::Builder::new()
                .prefix(&stage_prefix(kind))
                .tempdir_in(parent)
            {
                return Ok((t, removed));
            }
        }
    }
    Ok((stage_dir(out, kind)?, removed))
}

/// Whether `name` is a temporary of `kind` made by a process that no longer runs.
pub fn is_stale(name: &str, kind: &str) -> bool {
    let Some(rest) = name.strip_prefix(&format!(".kpack-tui-{kind}-")) else {
        return false;
    };
    let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
        return false;
    };
    pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether `name` is a temporary of any kind ([`stage_prefix`]: `.kpack-tui-<kind>-<pid>-…`),
/// live or stale. Outputs named `.kpack-tui-…` without a pid (split's records of
/// what it left to other shards) are not.
pub fn is_temporary(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(".kpack-tui-") else {
        return false;
    };
    let parts: Vec<&str> = rest.split('-').collect();
    parts.len() > 2
        && parts[1..parts.len() - 1]
            .iter()
            .any(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Remove what killed runs left in `dir` for `kind` (files or directories named by
/// [`stage_prefix`] whose process is gone). Returns what was removed.
pub fn remove_stale(dir: &Path, kind: &str) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name();
        if !is_stale(&name.to_string_lossy(), kind) {
            continue;
        }
        let p = e.path();
        let gone = match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p),
            Ok(_) => std::fs::remove_file(&p),
            Err(e) => Err(e),
        };
        if gone.is_ok() {
            removed.push(p);
        }
    }
    removed
}
