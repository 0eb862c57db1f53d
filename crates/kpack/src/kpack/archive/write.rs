//! Writing an archive deterministically from kernels added in any order.

use super::*;
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
/// Bytes compressed between two looks at the stop flag: at the highest levels (about
/// 1-2 MB/s per core here) a cancel lands within a fraction of a second, not at the
/// end of a 50 MB kernel.
pub const ENCODE_CHUNK: usize = 256 << 10;

/// Compress one kernel as stored by `scheme` (pure; call from any thread).
pub fn encode_kernel(data: &[u8], scheme: Scheme, level: i32) -> std::io::Result<Vec<u8>> {
    encode_kernel_until(data, scheme, level, &|| false).map(Option::unwrap_or_default)
}

/// [`encode_kernel`], looking at `stop` every [`ENCODE_CHUNK`] bytes: `None` when it
/// said stop. The frame is the same whatever `stop` is (it only decides whether the
/// frame is finished).
pub fn encode_kernel_until(
    data: &[u8],
    scheme: Scheme,
    level: i32,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<Option<Vec<u8>>> {
    Ok(encode_chunked(data, scheme, level, stop)?.map(|c| c.0.concat()))
}

/// A compressed kernel as written, in pieces of at most [`ENCODE_CHUNK`] bytes: it
/// holds what the frame takes, not zstd's worst-case bound for the kernel (a MiB
/// more per MiB of kernel on each thread), and no piece is large enough to move
/// the allocator's mapping threshold.
#[derive(Default)]
pub(crate) struct Chunks(pub(crate) Vec<Vec<u8>>);

impl Chunks {
    pub(crate) fn len(&self) -> u64 {
        self.0.iter().map(|c| c.len() as u64).sum()
    }
}

impl Write for Chunks {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.last().is_none_or(|c| c.len() == ENCODE_CHUNK) {
            self.0.push(Vec::with_capacity(ENCODE_CHUNK));
        }
        let Some(last) = self.0.last_mut() else {
            return Ok(0);
        };
        let take = (ENCODE_CHUNK - last.len()).min(buf.len());
        last.extend_from_slice(&buf[..take]);
        Ok(take)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A kernel to compress: bytes at hand, or a reader of exactly so many bytes.
pub enum Source<'a> {
    /// The kernel's bytes.
    Bytes(&'a [u8]),
    /// A reader of the kernel, and its length (exactly that many bytes are read).
    Reader(&'a mut dyn std::io::Read, u64),
}

impl<'a> std::convert::From<&'a mut crate::bundle::CodeObject<'_>> for Source<'a> {
    /// A code object of one piece as it lies in place; otherwise the reader it is
    /// (what is left of it): one read in place releases what it has read as it goes,
    /// so that a code object of tens of MB is not mapped whole while it is
    /// compressed (each piece is copied once, beside compressing it).
    fn from(r: &'a mut crate::bundle::CodeObject<'_>) -> Source<'a> {
        let size = r.remaining();
        match r.in_place() {
            Some(bytes) if bytes.len() <= ENCODE_CHUNK => Source::Bytes(bytes),
            _ => Source::Reader(r, size),
        }
    }
}

impl Source<'_> {
    fn len(&self) -> u64 {
        match self {
            Source::Bytes(b) => b.len() as u64,
            Source::Reader(_, n) => *n,
        }
    }

    /// Hand each piece of at most [`ENCODE_CHUNK`] bytes to `f` (all but the last
    /// that long: the same pieces whether read or at hand, so the same frames),
    /// until `f` says stop (`false`).
    pub(crate) fn pieces(
        self,
        f: &mut dyn FnMut(&[u8]) -> std::io::Result<bool>,
    ) -> std::io::Result<()> {
        match self {
            Source::Bytes(b) => {
                for piece in b.chunks(ENCODE_CHUNK) {
                    if !f(piece)? {
                        break;
                    }
                }
            }
            Source::Reader(r, mut left) => {
                thread_local! {
                    static PIECE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
                }
                return PIECE.with(|cell| {
                    let mut buf = cell.borrow_mut();
                    buf.resize(ENCODE_CHUNK, 0);
                    while left > 0 {
                        let n = ENCODE_CHUNK.min(usize::try_from(left).unwrap_or(ENCODE_CHUNK));
                        r.read_exact(&mut buf[..n])?;
                        left -= n as u64;
                        if !f(&buf[..n])? {
                            break;
                        }
                    }
                    Ok(())
                });
            }
        }
        Ok(())
    }
}

/// [`encode_kernel_until`] into [`Chunks`].
pub(crate) fn encode_chunked(
    data: &[u8],
    scheme: Scheme,
    level: i32,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<Option<Chunks>> {
    encode_source(Source::Bytes(data), scheme, level, stop, &mut |_| {})
}

/// [`encode_chunked`] from a [`Source`], showing `seen` each piece compressed.
pub(crate) fn encode_source(
    src: Source<'_>,
    scheme: Scheme,
    level: i32,
    stop: &dyn Fn() -> bool,
    seen: &mut dyn FnMut(&[u8]),
) -> std::io::Result<Option<Chunks>> {
    use zstd::zstd_safe::{CCtx, CParameter};
    let zerr = |c: usize| std::io::Error::other(zstd::zstd_safe::get_error_name(c));
    let len = src.len();
    match scheme {
        Scheme::None => {
            let mut c = Chunks::default();
            src.pieces(&mut |p| {
                seen(p);
                c.write_all(p).map(|_| true)
            })?;
            Ok(Some(c))
        }
        Scheme::ZstdPerKernel => {
            // One compression context per thread and level, reused across kernels.
            thread_local! {
                static CTX: std::cell::RefCell<Option<(i32, CCtx<'static>)>> =
                    const { std::cell::RefCell::new(None) };
            }
            CTX.with(|cell| {
                let mut slot = cell.borrow_mut();
                if slot.as_ref().is_none_or(|(l, _)| *l != level) {
                    let mut c = CCtx::create();
                    c.set_parameter(CParameter::CompressionLevel(level))
                        .map_err(zerr)?;
                    c.set_parameter(CParameter::ContentSizeFlag(true))
                        .map_err(zerr)?;
                    // The frame checksum (XXH64 of the content, 4 bytes) lets every
                    // reader - ours, the reference runtime's ZSTD_decompressDCtx, the
                    // Python zstandard module - detect a changed byte.
                    c.set_parameter(CParameter::ChecksumFlag(true))
                        .map_err(zerr)?;
                    *slot = Some((level, c));
                }
                let Some((_, c)) = slot.as_mut() else {
                    return Err(std::io::Error::other("no zstd context"));
                };
                // A frame a stop left unfinished is thrown away before parameters
                // change (zstd refuses them mid-frame).
                c.reset(zstd::zstd_safe::ResetDirective::SessionOnly)
                    .map_err(zerr)?;
                if level >= LEVEL_FIT_WINDOW {
                    // The window spans the whole kernel (one frame per kernel still;
                    // one-shot decoders need no window buffer).
                    let w =
                        (u64::BITS - len.max(1 << 10).leading_zeros()).clamp(10, MAX_WINDOW_LOG);
                    c.set_parameter(CParameter::WindowLog(w)).map_err(zerr)?;
                }
                // Long-distance matching at the highest level only (it changes the
                // frames, not what a decoder needs).
                c.set_parameter(CParameter::EnableLongDistanceMatching(level >= LEVEL_MAX))
                    .map_err(zerr)?;
                let mut enc = zstd::stream::write::Encoder::with_context(Chunks::default(), c);
                enc.set_pledged_src_size(Some(len))?;
                let mut stopped = false;
                src.pieces(&mut |piece| {
                    if stop() {
                        // The frame is dropped unfinished; the next kernel's encoder
                        // resets the context's session.
                        stopped = true;
                        return Ok(false);
                    }
                    seen(piece);
                    enc.write_all(piece).map(|_| true)
                })?;
                if stopped {
                    return Ok(None);
                }
                enc.finish().map(Some)
            })
        }
    }
}

pub(crate) struct Spooled {
    offset: u64,
    len: u64,
    original_size: u64,
    metadata: super::TocMetadata,
}

pub(crate) struct SpoolState {
    file: BufWriter<File>,
    len: u64,
    /// Each entry's TOC record, written as it is added (every kernel of a pack
    /// waits until its archive is finished: held in memory, the TOCs of a large
    /// tree were MBs); read back by `finish`.
    records: BufWriter<File>,
    /// A digest of each `(key, arch)` added, to refuse one added twice.
    added: std::collections::HashSet<[u8; 16]>,
    /// `(key, arch)` → the arch of the same key whose frame it shares.
    aliases: Aliases,
}

/// What tells one `(key, arch)` from another in [`SpoolState::added`]: 128 bits of
/// a SHA-256 of both (two pairs share it with a chance of 2^-128 per pair of pairs).
fn digest(key: &str, arch: &str) -> [u8; 16] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update((key.len() as u64).to_le_bytes());
    h.update(key.as_bytes());
    h.update(arch.as_bytes());
    let d = h.finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    out
}

/// One entry's record in the spool of records: key, arch, where its frame lies in
/// the spool of frames, its original size and metadata (lengths as u32, numbers as
/// u64, little-endian).
fn write_record(w: &mut impl Write, (key, arch): (&str, &str), s: &Spooled) -> std::io::Result<()> {
    let mut put = |b: &[u8]| -> std::io::Result<()> {
        w.write_all(&(b.len() as u32).to_le_bytes())?;
        w.write_all(b)
    };
    put(key.as_bytes())?;
    put(arch.as_bytes())?;
    let mut nums = Vec::with_capacity(32);
    for n in [s.offset, s.len, s.original_size, s.metadata.len() as u64] {
        nums.extend_from_slice(&n.to_le_bytes());
    }
    put(&nums)?;
    for (k, v) in s.metadata.iter() {
        put(k.as_bytes())?;
        put(v.as_bytes())?;
    }
    Ok(())
}

/// Every record [`write_record`] wrote to `r`, by `(key, arch)`.
fn read_records(r: impl std::io::Read) -> std::io::Result<BTreeMap<(String, String), Spooled>> {
    use std::io::Read;
    let mut r = std::io::BufReader::new(r);
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let get = |r: &mut std::io::BufReader<_>| -> std::io::Result<Option<Vec<u8>>> {
        let mut n = [0u8; 4];
        match r.read_exact(&mut n) {
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            other => other?,
        }
        let mut b = vec![0u8; u32::from_le_bytes(n) as usize];
        r.read_exact(&mut b)?;
        Ok(Some(b))
    };
    let text = |b: Vec<u8>| String::from_utf8(b).map_err(|_| bad("a record that is not UTF-8"));
    let mut out = BTreeMap::new();
    while let Some(key) = get(&mut r)? {
        let (Some(arch), Some(nums)) = (get(&mut r)?, get(&mut r)?) else {
            return Err(bad("a record cut short"));
        };
        let n: Vec<u64> = nums
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        let [offset, len, original_size, pairs] = n[..] else {
            return Err(bad("a record of the wrong size"));
        };
        let mut metadata = BTreeMap::new();
        for _ in 0..pairs {
            let (Some(k), Some(v)) = (get(&mut r)?, get(&mut r)?) else {
                return Err(bad("a record cut short"));
            };
            metadata.insert(text(k)?, text(v)?);
        }
        out.insert(
            (text(key)?, text(arch)?),
            Spooled {
                offset,
                len,
                original_size,
                metadata: metadata.into(),
            },
        );
    }
    Ok(out)
}

/// TOC aliases: `(key, arch)` → the arch of the same key whose frame it lists again.
pub(crate) type Aliases = BTreeMap<(String, String), String>;

/// Writes an archive: add kernels (from any thread), then [`finish`](Self::finish).
pub struct ArchiveWriter {
    path: PathBuf,
    meta: ArchiveMeta,
    scheme: Scheme,
    level: i32,
    spool: Mutex<SpoolState>,
    spool_file: tempfile::NamedTempFile,
    /// List every frame under every target a device may match first (see
    /// [`ArchiveWriter::resolving`]).
    resolving: bool,
    /// Stops a kernel's compression within [`ENCODE_CHUNK`] bytes when cancelled.
    cancel: Option<crate::event::CancelToken>,
}

/// What [`ArchiveWriter::finish`] wrote.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ArchiveSummary {
    /// Where.
    pub path: PathBuf,
    /// Code objects.
    pub code_objects: u64,
    /// Sum of original sizes.
    pub raw_bytes: u64,
    /// File size.
    pub file_size: u64,
}

/// A kernel compressed for an archive, not added yet ([`ArchiveWriter::encode`]).
pub struct Encoded {
    key: String,
    arch: String,
    stored: Chunks,
    original_size: u64,
}

impl ArchiveWriter {
    fn refused(&self, error: WriteError) -> Error {
        Error::Archive {
            path: self.path.clone(),
            error,
        }
    }

    fn check_arch(&self, arch: &str) -> Result<()> {
        if arch.is_empty() || arch.contains(['/', '\\', '\0']) {
            return Err(self.refused(WriteError::NotTargetId(arch.to_string())));
        }
        Ok(())
    }

    /// Start an archive at `path` (nothing appears there until `finish`).
    pub fn create(
        path: &Path,
        meta: ArchiveMeta,
        scheme: Scheme,
        level: i32,
    ) -> Result<ArchiveWriter> {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let spool_file = tempfile::Builder::new()
            .prefix(".kpack-spool-")
            .tempfile_in(dir)
            .map_err(|e| Error::io(dir, e))?;
        let file = spool_file
            .reopen()
            .map_err(|e| Error::io(spool_file.path(), e))?;
        let records = tempfile::tempfile_in(dir).map_err(|e| Error::io(dir, e))?;
        Ok(ArchiveWriter {
            path: path.to_path_buf(),
            meta,
            scheme,
            level,
            spool: Mutex::new(SpoolState {
                file: BufWriter::with_capacity(1 << 20, file),
                len: 0,
                records: BufWriter::with_capacity(64 << 10, records),
                added: Default::default(),
                aliases: BTreeMap::new(),
            }),
            spool_file,
            resolving: false,
            cancel: None,
        })
    }

    /// Stop adding (an `add` in progress ends with [`Error::Cancelled`] within
    /// [`ENCODE_CHUNK`] bytes of compression) once `cancel` is cancelled.
    pub fn cancelled_by(mut self, cancel: crate::event::CancelToken) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Make the archive resolve for every loader generation whatever the targets
    /// added: at [`finish`](Self::finish), `gfx_arches` becomes the targets of the
    /// kernels plus their joins, and TOC aliases list each frame under every listed
    /// target a device may match first ([`crate::kpack::alias::plan`]).
    pub fn resolving(mut self) -> Self {
        self.resolving = true;
        self
    }

    /// Add a kernel. Compression happens on the calling thread, outside the lock.
    /// Returns the bytes stored for it.
    pub fn add(&self, key: &str, arch: &str, data: &[u8]) -> Result<u64> {
        self.add_with_metadata(key, arch, data, BTreeMap::new())
    }

    /// Add a kernel with string metadata (e.g. `target`, the full entry ID).
    /// Returns the bytes stored for it.
    pub fn add_with_metadata(
        &self,
        key: &str,
        arch: &str,
        data: &[u8],
        metadata: BTreeMap<String, String>,
    ) -> Result<u64> {
        let e = self.encode(key, arch, Source::Bytes(data), &mut |_| {})?;
        self.commit(e, metadata)
    }

    /// Compress a kernel for `(key, arch)` (checked first) from `src`, showing
    /// `seen` each piece as it goes, on the calling thread: added by
    /// [`ArchiveWriter::commit`] (a caller can check what it saw in between).
    pub fn encode(
        &self,
        key: &str,
        arch: &str,
        src: Source<'_>,
        seen: &mut dyn FnMut(&[u8]),
    ) -> Result<Encoded> {
        let key = normal_key(key);
        let tu_ok = key
            .rsplit_once('#')
            .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !tu_ok {
            return Err(self.refused(WriteError::KeyWithoutTu(key)));
        }
        if let Err(why) = safe_relative_path(&key) {
            return Err(self.refused(WriteError::UnsafeKey { key, why }));
        }
        self.check_arch(arch)?;
        let stop = || self.cancel.as_ref().is_some_and(|c| c.is_cancelled());
        let original_size = src.len();
        let stored = encode_source(src, self.scheme, self.level, &stop, seen)
            .map_err(|e| Error::io(&self.path, e))?
            .ok_or(Error::Cancelled)?;
        Ok(Encoded {
            key,
            arch: arch.to_string(),
            stored,
            original_size,
        })
    }

    /// Add a kernel [`ArchiveWriter::encode`] compressed. Returns the bytes stored
    /// for it.
    pub fn commit(&self, e: Encoded, metadata: BTreeMap<String, String>) -> Result<u64> {
        let Encoded {
            key,
            arch,
            stored,
            original_size,
        } = e;
        let mut s = self
            .spool
            .lock()
            .map_err(|_| self.refused(WriteError::Poisoned))?;
        let d = digest(&key, &arch);
        if s.added.contains(&d) {
            return Err(self.refused(WriteError::AddedTwice { key, arch }));
        }
        if s.added.len() as u64 >= MAX_KERNELS {
            return Err(self.refused(WriteError::TooMany(MAX_KERNELS)));
        }
        let offset = s.len;
        let stored_len = stored.len();
        let spooled = Spooled {
            offset,
            len: stored_len,
            original_size,
            metadata: metadata.into(),
        };
        let SpoolState { file, records, .. } = &mut *s;
        (stored.0.iter().try_for_each(|c| file.write_all(c)))
            .and_then(|_| write_record(records, (&key, &arch), &spooled))
            .map_err(|e| Error::io(self.spool_file.path(), e))?;
        s.len += stored_len;
        s.added.insert(d);
        Ok(stored_len)
    }

    /// List the frame of `toc[key][of]` again under `toc[key][arch]` (same ordinal,
    /// no byte stored twice; see [`crate::kpack::alias`]). `of` must be added by the
    /// time [`finish`](Self::finish) runs.
    pub fn alias(&self, key: &str, arch: &str, of: &str) -> Result<()> {
        let key = normal_key(key);
        self.check_arch(arch)?;
        let mut s = self
            .spool
            .lock()
            .map_err(|_| self.refused(WriteError::Poisoned))?;
        let added = s.added.contains(&digest(&key, arch));
        let k = (key, arch.to_string());
        if added || s.aliases.contains_key(&k) {
            let (key, arch) = k;
            return Err(self.refused(WriteError::AddedTwice { key, arch }));
        }
        s.aliases.insert(k, of.to_string());
        Ok(())
    }

    /// Number of kernels added so far and their stored bytes.
    pub fn progress(&self) -> (u64, u64) {
        self.spool
            .lock()
            .map(|s| (s.added.len() as u64, s.len))
            .unwrap_or((0, 0))
    }

    /// Lay out the archive, write the TOC, and rename it into place atomically.
    pub fn finish(self) -> Result<ArchiveSummary> {
        let SpoolState {
            file,
            records,
            aliases,
            ..
        } = self.spool.into_inner().map_err(|_| Error::Archive {
            path: self.path.clone(),
            error: WriteError::Poisoned,
        })?;
        let mut aliases = aliases;
        let spool = file
            .into_inner()
            .map_err(|e| Error::io(self.spool_file.path(), e.into_error()))?;
        let entries = records
            .into_inner()
            .map_err(|e| e.into_error())
            .and_then(|mut f| {
                f.seek(SeekFrom::Start(0))?;
                read_records(f)
            })
            .map_err(|e| Error::io(self.spool_file.path(), e))?;
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let tmp = tempfile::Builder::new()
            .prefix(".kpack-tmp-")
            .tempfile_in(dir)
            .map_err(|e| Error::io(dir, e))?;
        let io = |e| Error::io(tmp.path(), e);
        let mut w = BufWriter::with_capacity(1 << 20, tmp.as_file());
        let mut header = [0u8; BLOB_START as usize];
        header[..4].copy_from_slice(MAGIC);
        header[4..8].copy_from_slice(&VERSION.to_le_bytes());
        w.write_all(&header).map_err(io)?;
        let n = entries.len();
        let mut pos = BLOB_START;
        if self.scheme == Scheme::ZstdPerKernel {
            w.write_all(&(n as u32).to_le_bytes()).map_err(io)?;
            pos += 4;
        }
        let mut blobs = Vec::with_capacity(n);
        let mut buf = Vec::new();
        let mut raw_bytes = 0u64;
        for s in entries.values() {
            buf.resize(s.len as usize, 0);
            spool
                .read_exact_at(&mut buf, s.offset)
                .map_err(|e| Error::io(self.spool_file.path(), e))?;
            if self.scheme == Scheme::ZstdPerKernel {
                w.write_all(&(s.len as u32).to_le_bytes()).map_err(io)?;
                pos += 4;
            }
            blobs.push((pos, s.len));
            w.write_all(&buf).map_err(io)?;
            pos += s.len;
            raw_bytes += s.original_size;
        }
        let toc_offset = pos;
        let mut meta = self.meta.clone();
        if self.resolving {
            let (listed, planned) =
                crate::kpack::alias::plan(entries.keys().map(|(k, a)| (k.as_str(), a.as_str())));
            for a in planned {
                aliases.entry((a.key, a.arch)).or_insert(a.of);
            }
            for t in listed {
                if !meta.gfx_arches.contains(&t) {
                    meta.gfx_arches.push(t);
                }
            }
            meta.gfx_arches
                .sort_by(|a, b| crate::bundle::target::target_order(a, b));
        }
        for ((k, a), of) in &aliases {
            if !entries.contains_key(&(k.clone(), of.clone())) {
                return Err(Error::Archive {
                    path: self.path.clone(),
                    error: WriteError::DanglingAlias {
                        key: k.clone(),
                        arch: a.clone(),
                        of: of.clone(),
                    },
                });
            }
        }
        let toc = encode_toc(&meta, self.scheme, &entries, &aliases, &blobs, toc_offset);
        w.write_all(&toc).map_err(io)?;
        let mut f = w.into_inner().map_err(|e| io(e.into_error()))?;
        f.seek(SeekFrom::Start(8)).map_err(io)?;
        f.write_all(&toc_offset.to_le_bytes()).map_err(io)?;
        // Temp files are created 0600; an archive is ordinary package content.
        f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .map_err(io)?;
        f.sync_all().map_err(io)?;
        let file_size = toc_offset + toc.len() as u64;
        tmp.persist(&self.path)
            .map_err(|e| Error::io(&self.path, e.error))?;
        Ok(ArchiveSummary {
            path: self.path.clone(),
            code_objects: n as u64,
            raw_bytes,
            file_size,
        })
    }
}

/// The size of the archive [`ArchiveWriter::finish`] lays out for these kernels
/// (key, arch, original size, stored size, metadata) and aliases: header, frame
/// lengths, blobs and the TOC, exactly. Used to project pack outputs without writing
/// them.
pub fn archive_size(
    meta: &ArchiveMeta,
    scheme: Scheme,
    kernels: impl IntoIterator<Item = (String, String, u64, u64, BTreeMap<String, String>)>,
    aliases: &[crate::kpack::alias::Alias],
) -> u64 {
    let aliases: Aliases = aliases
        .iter()
        .map(|a| ((a.key.clone(), a.arch.clone()), a.of.clone()))
        .collect();
    let entries: BTreeMap<(String, String), Spooled> = kernels
        .into_iter()
        .map(|(k, a, original_size, len, metadata)| {
            (
                (k, a),
                Spooled {
                    offset: 0,
                    len,
                    original_size,
                    metadata: metadata.into(),
                },
            )
        })
        .collect();
    let mut pos = BLOB_START;
    if scheme == Scheme::ZstdPerKernel {
        pos += 4;
    }
    let mut blobs = Vec::with_capacity(entries.len());
    for s in entries.values() {
        if scheme == Scheme::ZstdPerKernel {
            pos += 4;
        }
        blobs.push((pos, s.len));
        pos += s.len;
    }
    pos + encode_toc(meta, scheme, &entries, &aliases, &blobs, pos).len() as u64
}

/// The TOC in the reference writer's key order, every string in the str family.
pub(crate) fn encode_toc(
    meta: &ArchiveMeta,
    scheme: Scheme,
    entries: &BTreeMap<(String, String), Spooled>,
    aliases: &Aliases,
    blobs: &[(u64, u64)],
    toc_offset: u64,
) -> Vec<u8> {
    {
        use rmp::encode as e;
        let mut t: Vec<u8> = Vec::new();
        // Writes into a Vec cannot fail.
        let s = |t: &mut Vec<u8>, v: &str| {
            let _ = e::write_str(t, v);
        };
        let u = |t: &mut Vec<u8>, v: u64| {
            let _ = e::write_uint(t, v);
        };
        let _ = e::write_map_len(&mut t, if scheme == Scheme::None { 7 } else { 8 });
        s(&mut t, "format_version");
        u(&mut t, 1);
        s(&mut t, "group_name");
        s(&mut t, &meta.group_name);
        s(&mut t, "gfx_arch_family");
        s(&mut t, &meta.gfx_arch_family);
        s(&mut t, "gfx_arches");
        let _ = e::write_array_len(&mut t, meta.gfx_arches.len() as u32);
        for a in &meta.gfx_arches {
            s(&mut t, a);
        }
        s(&mut t, "toc");
        let mut by_key: BTreeMap<&str, BTreeMap<&str, (usize, &Spooled)>> = BTreeMap::new();
        let mut ordinals: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for (ordinal, ((k, a), sp)) in entries.iter().enumerate() {
            by_key.entry(k).or_default().insert(a, (ordinal, sp));
            ordinals.insert((k, a), ordinal);
        }
        // Aliases share their source's ordinal, size and metadata (the writer checked
        // that every source exists).
        for ((k, a), of) in aliases {
            if let Some(&o) = ordinals.get(&(k.as_str(), of.as_str())) {
                let sp = &entries[&(k.clone(), of.clone())];
                by_key.entry(k).or_default().insert(a, (o, sp));
            }
        }
        let _ = e::write_map_len(&mut t, by_key.len() as u32);
        for (k, arches) in &by_key {
            s(&mut t, k);
            let _ = e::write_map_len(&mut t, arches.len() as u32);
            for (a, (ordinal, sp)) in arches {
                s(&mut t, a);
                let _ = e::write_map_len(&mut t, if sp.metadata.is_empty() { 3 } else { 4 });
                s(&mut t, "type");
                s(&mut t, "hsaco");
                s(&mut t, "ordinal");
                u(&mut t, *ordinal as u64);
                s(&mut t, "original_size");
                u(&mut t, sp.original_size);
                if !sp.metadata.is_empty() {
                    s(&mut t, "metadata");
                    let _ = e::write_map_len(&mut t, sp.metadata.len() as u32);
                    for (mk, mv) in sp.metadata.iter() {
                        s(&mut t, mk);
                        s(&mut t, mv);
                    }
                }
            }
        }
        s(&mut t, "compression_scheme");
        s(&mut t, scheme.name());
        match scheme {
            Scheme::None => {
                s(&mut t, "blobs");
                let _ = e::write_array_len(&mut t, blobs.len() as u32);
                for (off, len) in blobs {
                    let _ = e::write_map_len(&mut t, 2);
                    s(&mut t, "offset");
                    u(&mut t, *off);
                    s(&mut t, "size");
                    u(&mut t, *len);
                }
            }
            Scheme::ZstdPerKernel => {
                s(&mut t, "zstd_offset");
                u(&mut t, BLOB_START);
                s(&mut t, "zstd_size");
                u(&mut t, toc_offset - BLOB_START);
            }
        }
        t
    }
}

/// A key with Windows separators turned into `/`, except in the exact spelling of
/// a name that is not UTF-8 ([`crate::relpath`]), whose backslashes are escapes.
fn normal_key(key: &str) -> String {
    if crate::relpath::is_escaped(key) {
        key.to_string()
    } else {
        key.replace('\\', "/")
    }
}
