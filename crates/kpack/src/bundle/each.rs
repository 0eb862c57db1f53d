//! A bundle's code objects one at a time ([`BundleInfo::each_code_object`]): a
//! compressed bundle is decoded as a stream into one buffer the size of its largest
//! code object, so that a bundle of 30 targets is never held decoded whole (a tree's
//! largest bundles, two threads at a time, were most of what `kernels`, `split` and
//! `wheel split` kept resident).

use super::{BundleEntry, BundleInfo, Compression, ccob};
use crate::error::{FormatError, FormatResult};
use std::collections::BTreeSet;
use std::io::Read;

/// Code objects below this size are decoded into the heap; larger ones into an
/// anonymous map of their own, unmapped when the bundle is done (a heap block of
/// this size would stay in the allocator).
const HEAP_MAX: usize = 256 << 10;

/// The code objects a pass over a fat binary wants: (bundle index, target).
pub struct Wanted<'a>(BTreeSet<(u32, &'a str)>);

impl<'a> Wanted<'a> {
    /// The set of these (bundle, target) pairs.
    pub fn new(pairs: impl IntoIterator<Item = (u32, &'a str)>) -> Wanted<'a> {
        Wanted(pairs.into_iter().collect())
    }

    /// The target of `e` in bundle `bundle`, when it is wanted (an entry without a
    /// target never is).
    pub fn arch(&self, bundle: u32, e: &BundleEntry) -> Option<String> {
        let arch = e.id.arch()?;
        self.0.contains(&(bundle, arch.as_str())).then_some(arch)
    }
}

impl BundleInfo {
    /// Hand each device code object of this bundle to `f`, `(entry, bytes)` in
    /// descriptor order: a plain bundle's in place in `section`, a CCOB's decoded as
    /// a stream (bounded by the declared size and `limit`, as
    /// [`BundleInfo::uncompressed`] is). The entries are checked to lie within the
    /// bundle before the first call; a payload that is corrupt further on is an error
    /// after the calls for the code objects before it. A bundle whose entries are
    /// not in offset order, or overlap, is decoded whole first.
    ///
    /// The outer error is the bundle's; the inner one is the first `f` returned (no
    /// call follows it).
    pub fn each_code_object<E>(
        &self,
        section: &[u8],
        limit: u64,
        f: impl FnMut(&BundleEntry, &[u8]) -> Result<(), E>,
    ) -> FormatResult<Result<(), E>> {
        self.each_code_object_releasing(section, limit, &|_, _| {}, f)
    }

    /// [`BundleInfo::each_code_object`], telling `release` which bytes of `section`
    /// (offset, length) are read and not needed again: each code object read in place
    /// once `f` is done with it, and a CCOB's payload as it is decoded. The caller
    /// drops their pages from the resident set, so a bundle of hundreds of MB keeps
    /// a few MB of it resident.
    pub fn each_code_object_releasing<E>(
        &self,
        section: &[u8],
        limit: u64,
        release: Release<'_>,
        mut f: impl FnMut(&BundleEntry, &[u8]) -> Result<(), E>,
    ) -> FormatResult<Result<(), E>> {
        // A decoded code object goes into one buffer the size of the bundle's
        // largest, made when the first one is decoded.
        let mut buf: Option<Buffer> = None;
        let largest = self.device_entries().map(|e| e.size as usize).max();
        self.each_code_object_streamed(section, limit, release, |e, r| {
            if let Some(bytes) = r.in_place() {
                return Ok(f(e, bytes));
            }
            let b = match &mut buf {
                Some(b) => b,
                None => buf.insert(Buffer::new(largest.unwrap_or(0))?),
            };
            let bytes = &mut b.as_mut()[..e.size as usize];
            r.fill(bytes)?;
            Ok(f(e, bytes))
        })
    }

    /// Hand each device code object of this bundle to `f` as a [`CodeObject`] to
    /// read (in descriptor order): in place for a plain bundle, decoded as it is read
    /// for a CCOB, so that no code object is held whole. What `f` leaves unread is
    /// skipped. A payload that is corrupt where `f` reads it is the outer error
    /// (whatever `f` returned); otherwise as
    /// [`BundleInfo::each_code_object_releasing`].
    pub fn each_code_object_streamed<E>(
        &self,
        section: &[u8],
        limit: u64,
        release: Release<'_>,
        mut f: impl FnMut(&BundleEntry, &mut CodeObject<'_>) -> FormatResult<Result<(), E>>,
    ) -> FormatResult<Result<(), E>> {
        let entries: Vec<&BundleEntry> = self.device_entries().collect();
        let in_order = entries
            .windows(2)
            .all(|w| w[0].offset.saturating_add(w[0].size) <= w[1].offset);
        if self.compression == Compression::None || !in_order {
            let un = self.uncompressed(section, limit)?;
            for (e, bytes) in self.code_objects(&un)? {
                // Released behind the reading too, when it lies in the section (a
                // code object of tens of MB is not mapped whole while it is read).
                let at = crate::fsutil::offset_in(section, bytes);
                let mut r = CodeObject::of_slice(bytes, at.map(|at| (at, release)));
                if let Err(e) = f(e, &mut r)? {
                    return Ok(Err(e));
                }
                if let Some(at) = at {
                    release.release(at, bytes.len());
                }
            }
            return Ok(Ok(()));
        }
        let stored = super::slice(section, self.offset, self.stored_size)?;
        let header = ccob::parse_header(stored).map_err(|e| e.shifted(self.offset))?;
        let want = header.uncompressed_size;
        if want > limit {
            return Err(FormatError::new(
                self.offset,
                format!("CCOB uncompressed size {want} is above the limit of {limit} bytes"),
            ));
        }
        for e in &entries {
            if e.offset.checked_add(e.size).is_none_or(|end| end > want) {
                return Err(FormatError::new(
                    self.offset,
                    format!(
                        "entry at {} of {} bytes lies outside the {want} bytes decoded",
                        e.offset, e.size
                    ),
                ));
            }
        }
        let payload = &stored[header.header_len..header.stored_size(stored) as usize];
        let behind = Behind::new(payload, self.offset as usize + header.header_len, release);
        ccob::with_decoder(header.method, behind, |decoder| {
            let mut stream = Decoding {
                r: decoder.take(want),
                pos: 0,
                header: &header,
                at: self.offset,
            };
            for e in entries {
                stream.skip_to(e.offset)?;
                let mut r = CodeObject {
                    from: From::Stream(&mut stream),
                    left: e.size,
                    error: None,
                };
                let out = f(e, &mut r);
                if let Some(err) = r.error.take() {
                    return Err(err);
                }
                if let Err(err) = out? {
                    return Ok(Err(err));
                }
            }
            // The rest (the host entry, padding): a payload shorter than declared is
            // as corrupt here as when it is decoded whole.
            stream.skip_to(want)?;
            Ok(Ok(()))
        })
    }
}

/// One code object of a bundle, read as a stream of its bytes ([`std::io::Read`]):
/// in place, or decoded from a CCOB as it is read. A corrupt payload is an I/O
/// error here and the bundle's error of
/// [`BundleInfo::each_code_object_streamed`].
pub struct CodeObject<'a> {
    from: From<'a>,
    /// Bytes not read yet.
    left: u64,
    error: Option<FormatError>,
}

enum From<'a> {
    Slice(Behind<'a>),
    Stream(&'a mut dyn Pull),
}

/// Releases nothing (bytes that do not lie in a mapped section).
fn keep(_: usize, _: usize) {}

/// Where a section's bytes are read from: a section of a file can be read with
/// positioned reads rather than through its map, so that what is read never enters
/// the resident set (on Linux 6.18 one byte read through a map makes the whole 2
/// MiB page-cache folio holding it resident; a positioned read copies only what it
/// asks for).
pub trait Input {
    /// `len` bytes at `offset` of the section are read and not needed again.
    fn release(&self, offset: usize, len: usize);

    /// The file the section lies in and the section's offset in it, when its bytes
    /// are to be read from the file (with positioned reads) rather than the slice.
    fn file(&self) -> Option<(&std::fs::File, u64)> {
        None
    }
}

/// A function told what is released: the section is read from its slice.
impl<F: Fn(usize, usize)> Input for F {
    fn release(&self, offset: usize, len: usize) {
        self(offset, len)
    }
}

/// A section at `at` of a mapped file: read from the file with positioned reads,
/// released from the map (what the walk of its headers mapped).
pub struct FileSection<'a> {
    /// The file's map (the section's slice is in it).
    pub map: &'a memmap2::Mmap,
    /// The file mapped.
    pub file: &'a std::fs::File,
    /// The section's offset in the file.
    pub at: usize,
}

impl Input for FileSection<'_> {
    fn release(&self, offset: usize, len: usize) {
        crate::fsutil::release_range(self.map, self.at.saturating_add(offset), len)
    }

    fn file(&self) -> Option<(&std::fs::File, u64)> {
        Some((self.file, self.at as u64))
    }
}

impl<'a> CodeObject<'a> {
    /// `bytes`, released behind the reading at their offset in the section with
    /// `release` when given.
    fn of_slice(bytes: &'a [u8], release: Option<(usize, Release<'a>)>) -> CodeObject<'a> {
        let (base, release) = release.unwrap_or((0, &keep));
        CodeObject {
            from: From::Slice(Behind::new(bytes, base, release)),
            left: bytes.len() as u64,
            error: None,
        }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> u64 {
        self.left
    }

    /// The whole code object, when it lies in place, is read from its slice (not
    /// from the file, see [`Input::file`]) and none of it was read.
    pub fn in_place(&self) -> Option<&'a [u8]> {
        match &self.from {
            From::Slice(b) if b.pos == 0 && b.release.file().is_none() => Some(b.data),
            _ => None,
        }
    }

    /// Read exactly `out.len()` bytes (a corrupt or short payload is the bundle's
    /// error).
    fn fill(&mut self, out: &mut [u8]) -> FormatResult<()> {
        if let Err(e) = std::io::Read::read_exact(self, out) {
            return Err(self
                .error
                .take()
                .unwrap_or_else(|| FormatError::new(0, format!("code object cut short: {e}"))));
        }
        Ok(())
    }
}

impl std::io::Read for CodeObject<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        if n == 0 {
            return Ok(0);
        }
        let got = match &mut self.from {
            From::Slice(b) => b.read(&mut buf[..n])?,
            From::Stream(p) => match p.pull(&mut buf[..n]) {
                Ok(k) => k,
                Err(e) => {
                    let msg = e.to_string();
                    self.error = Some(e);
                    return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, msg));
                }
            },
        };
        self.left -= got as u64;
        Ok(got)
    }
}

/// A decoder handing on what it decodes.
trait Pull {
    /// Decode at least one byte into `out` (non-empty), up to its length.
    fn pull(&mut self, out: &mut [u8]) -> FormatResult<usize>;
}

/// Told which bytes of a section (offset, length) are read and not needed again,
/// and where to read them from ([`Input`]).
pub type Release<'r> = &'r dyn Input;

/// Bytes of a section read as a stream (a CCOB's payload, a plain bundle's code
/// object), released behind the reading in steps of [`STEP`], up to where it is:
/// the release is rounded out to whole folios (2 MiB), so the one being read may go
/// too and is mapped again by the next read (one fault), and at most two folios of
/// it are mapped at a time. When the section lies in a file ([`Input::file`]) the
/// bytes are read from it in pieces of `fsutil::READ_PIECE` instead, and none is
/// mapped (nor released: nothing of them was).
struct Behind<'a> {
    data: &'a [u8],
    pos: usize,
    released: usize,
    /// The payload's offset in the section.
    base: usize,
    release: Release<'a>,
    /// Read from the file: `data[pos..]` starts with `piece[lo..hi]`.
    piece: Vec<u8>,
    lo: usize,
    hi: usize,
}

const STEP: usize = 1 << 20;

impl<'a> Behind<'a> {
    fn new(data: &'a [u8], base: usize, release: Release<'a>) -> Behind<'a> {
        Behind {
            data,
            pos: 0,
            released: 0,
            base,
            release,
            piece: Vec::new(),
            lo: 0,
            hi: 0,
        }
    }

    fn advance(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.data.len());
        if self.pos - self.released >= STEP && self.release.file().is_none() {
            self.release
                .release(self.base + self.released, self.pos - self.released);
            self.released = self.pos;
        }
    }

    /// The next bytes, read from the file into the piece when the section lies in
    /// one (a file cut short since it was mapped is an error), else in place.
    fn next_bytes(&mut self) -> std::io::Result<&[u8]> {
        let Some((file, at)) = self.release.file() else {
            return Ok(&self.data[self.pos..]);
        };
        if self.lo == self.hi && self.pos < self.data.len() {
            let n = (self.data.len() - self.pos).min(crate::fsutil::READ_PIECE);
            self.piece.resize(n, 0);
            let offset = at + (self.base + self.pos) as u64;
            std::os::unix::fs::FileExt::read_exact_at(file, &mut self.piece, offset)?;
            (self.lo, self.hi) = (0, n);
        }
        Ok(&self.piece[self.lo..self.hi])
    }
}

impl Read for Behind<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.next_bytes()?.read(buf)?;
        std::io::BufRead::consume(self, n);
        Ok(n)
    }
}

/// Read in place (the decoder takes the payload from the section, not a copy), or
/// a piece at a time from the file.
impl std::io::BufRead for Behind<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.next_bytes()
    }

    fn consume(&mut self, n: usize) {
        if self.hi > self.lo {
            self.lo = (self.lo + n).min(self.hi);
        }
        self.advance(n);
    }
}

/// A CCOB payload being decoded, and how far.
struct Decoding<'h, R> {
    r: R,
    pos: u64,
    header: &'h ccob::CcobHeader,
    /// The bundle's offset in the section (errors are placed there).
    at: u64,
}

impl<R: Read> Decoding<'_, R> {
    fn fault(&self, e: std::io::Error) -> FormatError {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            return self.short();
        }
        FormatError::new(
            self.header.header_len as u64,
            format!("corrupt {} payload: {e}", self.header.method.name()),
        )
        .shifted(self.at)
    }

    fn short(&self) -> FormatError {
        FormatError::new(
            self.header.header_len as u64,
            format!(
                "CCOB payload decompresses to {} bytes, header says {}",
                self.pos, self.header.uncompressed_size
            ),
        )
        .shifted(self.at)
    }

    /// Decode and drop the bytes up to offset `to`.
    fn skip_to(&mut self, to: u64) -> FormatResult<()> {
        let n = std::io::copy(&mut (&mut self.r).take(to - self.pos), &mut std::io::sink())
            .map_err(|e| self.fault(e))?;
        self.pos += n;
        if self.pos < to {
            return Err(self.short());
        }
        Ok(())
    }
}

impl<R: Read> Pull for Decoding<'_, R> {
    fn pull(&mut self, out: &mut [u8]) -> FormatResult<usize> {
        loop {
            match self.r.read(out) {
                Ok(0) => return Err(self.short()),
                Ok(n) => {
                    self.pos += n as u64;
                    return Ok(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.fault(e)),
            }
        }
    }
}

/// Where one code object is decoded.
enum Buffer {
    Heap(Vec<u8>),
    Map(memmap2::MmapMut),
}

impl Buffer {
    fn new(len: usize) -> FormatResult<Buffer> {
        if len <= HEAP_MAX {
            return Ok(Buffer::Heap(vec![0; len]));
        }
        memmap2::MmapMut::map_anon(len)
            .map(Buffer::Map)
            .map_err(|e| {
                FormatError::new(0, format!("cannot allocate {len} bytes to decompress: {e}"))
            })
    }

    fn as_mut(&mut self) -> &mut [u8] {
        match self {
            Buffer::Heap(v) => v,
            Buffer::Map(m) => m,
        }
    }
}

#[cfg(test)]
mod tests;
