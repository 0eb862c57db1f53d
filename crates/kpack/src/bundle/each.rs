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
                    release(at, bytes.len());
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
        let behind = Behind {
            data: payload,
            pos: 0,
            released: 0,
            base: self.offset as usize + header.header_len,
            release,
        };
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

impl<'a> CodeObject<'a> {
    /// `bytes`, released behind the reading at their offset in the section with
    /// `release` when given.
    fn of_slice(bytes: &'a [u8], release: Option<(usize, Release<'a>)>) -> CodeObject<'a> {
        let (base, release) = release.unwrap_or((0, &keep));
        CodeObject {
            from: From::Slice(Behind {
                data: bytes,
                pos: 0,
                released: 0,
                base,
                release,
            }),
            left: bytes.len() as u64,
            error: None,
        }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> u64 {
        self.left
    }

    /// The whole code object, when it lies in place and none of it was read.
    pub fn in_place(&self) -> Option<&'a [u8]> {
        match &self.from {
            From::Slice(b) if b.pos == 0 => Some(b.data),
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

/// Told which bytes of a section (offset, length) are read and not needed again.
pub type Release<'r> = &'r dyn Fn(usize, usize);

/// Bytes of a section read as a stream (a CCOB's payload, a plain bundle's code
/// object), released behind the reading in steps of [`STEP`], up to where it is:
/// the release is rounded out to whole folios (2 MiB), so the one being read may go
/// too and is mapped again by the next read (one fault), and at most two folios of
/// it are mapped at a time.
struct Behind<'a> {
    data: &'a [u8],
    pos: usize,
    released: usize,
    /// The payload's offset in the section.
    base: usize,
    release: Release<'a>,
}

const STEP: usize = 1 << 20;

impl Behind<'_> {
    fn advance(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.data.len());
        if self.pos - self.released >= STEP {
            (self.release)(self.base + self.released, self.pos - self.released);
            self.released = self.pos;
        }
    }
}

impl Read for Behind<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (&self.data[self.pos..]).read(buf)?;
        self.advance(n);
        Ok(n)
    }
}

/// Read in place: the decoder takes the payload from the section, not a copy.
impl std::io::BufRead for Behind<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        Ok(&self.data[self.pos..])
    }

    fn consume(&mut self, n: usize) {
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
mod tests {
    use super::super::testutil::plain_bundle;
    use super::super::walk_section;
    use super::*;

    #[test]
    fn wanted_names_the_target_of_a_wanted_entry_only() {
        let entry = |triple: &str| BundleEntry {
            id: super::super::EntryId::parse(triple),
            offset: 0,
            size: 1,
        };
        let w = Wanted::new([(0, "gfx90a:xnack+"), (1, "gfx906")]);
        let arch = |b, triple| w.arch(b, &entry(triple));
        assert_eq!(
            arch(0, "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+").as_deref(),
            Some("gfx90a:xnack+")
        );
        assert_eq!(
            arch(1, "hipv4-amdgcn-amd-amdhsa--gfx906").as_deref(),
            Some("gfx906")
        );
        assert_eq!(
            arch(0, "hipv4-amdgcn-amd-amdhsa--gfx906"),
            None,
            "another bundle's"
        );
        assert_eq!(
            arch(0, "hipv4-amdgcn-amd-amdhsa--gfx90a"),
            None,
            "no feature"
        );
        assert_eq!(arch(0, "host-x86_64-unknown-linux-gnu"), None, "the host");
    }

    /// A bundle of a host entry and three targets, one larger than [`HEAP_MAX`] (its
    /// buffer is a map), with bytes that differ along each payload.
    fn sample() -> Vec<u8> {
        let pattern = |n: usize, k: u8| (0..n).map(|i| (i / 7) as u8 ^ k).collect::<Vec<u8>>();
        let (a, b, c) = (
            pattern(5000, 1),
            pattern(HEAP_MAX + 4321, 2),
            pattern(3000, 3),
        );
        plain_bundle(
            &[
                ("host-x86_64-unknown-linux-gnu-", b""),
                ("hipv4-amdgcn-amd-amdhsa--gfx1100", &a),
                ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", &b),
                ("hipv4-amdgcn-amd-amdhsa--gfx942", &c),
            ],
            4096,
        )
    }

    fn section(method: Compression) -> Vec<u8> {
        match method {
            Compression::None => sample(),
            m => ccob::encode(&sample(), 3, m),
        }
    }

    /// Every code object of a bundle, plain and compressed with zstd and zlib,
    /// streamed one at a time: the same bytes in the same order as decoding it whole
    /// gives.
    #[test]
    fn streamed_code_objects_are_those_of_the_whole_bundle() {
        for method in [Compression::None, Compression::Zstd, Compression::Zlib] {
            let sec = section(method);
            let b = &walk_section(&sec).unwrap()[0];
            let un = b.uncompressed(&sec, u64::MAX).unwrap();
            let whole: Vec<(String, Vec<u8>)> = (b.code_objects(&un).unwrap().into_iter())
                .map(|(e, d)| (e.id.triple.clone(), d.to_vec()))
                .collect();
            assert_eq!(whole.len(), 3, "{method:?}");
            let mut streamed = Vec::new();
            b.each_code_object(&sec, u64::MAX, |e, d| {
                streamed.push((e.id.triple.clone(), d.to_vec()));
                Ok::<(), ()>(())
            })
            .unwrap()
            .unwrap();
            assert_eq!(streamed, whole, "{method:?}");
        }
    }

    /// The first error `f` returns ends the walk.
    #[test]
    fn an_error_of_the_callback_stops_the_walk() {
        let sec = section(Compression::Zstd);
        let b = &walk_section(&sec).unwrap()[0];
        let mut calls = 0;
        let r = b.each_code_object(&sec, u64::MAX, |_, _| {
            calls += 1;
            Err("stop")
        });
        assert_eq!(r.unwrap(), Err("stop"));
        assert_eq!(calls, 1);
    }

    /// Code objects read as streams, in odd-sized pieces, some left unread: the
    /// bytes of the whole bundle for those read, for plain and compressed bundles.
    #[test]
    fn code_objects_read_as_streams_are_those_of_the_whole_bundle() {
        use std::io::Read;
        for method in [Compression::None, Compression::Zstd, Compression::Zlib] {
            let sec = section(method);
            let b = &walk_section(&sec).unwrap()[0];
            let un = b.uncompressed(&sec, u64::MAX).unwrap();
            let whole: Vec<Vec<u8>> = (b.code_objects(&un).unwrap().into_iter())
                .map(|(_, d)| d.to_vec())
                .collect();
            let mut got = Vec::new();
            let mut n = 0;
            b.each_code_object_streamed(&sec, u64::MAX, &|_, _| {}, |_, r| {
                n += 1;
                if n == 2 && method != Compression::None {
                    // Left unread: skipped.
                    assert!(r.in_place().is_none());
                    return Ok(Ok::<(), ()>(()));
                }
                let mut v = Vec::new();
                let mut piece = [0u8; 777];
                loop {
                    let k = r.read(&mut piece).unwrap();
                    if k == 0 {
                        break;
                    }
                    v.extend_from_slice(&piece[..k]);
                }
                assert_eq!(r.remaining(), 0);
                got.push(v);
                Ok(Ok(()))
            })
            .unwrap()
            .unwrap();
            let want: Vec<Vec<u8>> = match method {
                Compression::None => whole,
                _ => vec![whole[0].clone(), whole[2].clone()],
            };
            assert_eq!(got, want, "{method:?}");
        }
    }

    /// A code object read as a stream is released behind the reading, in steps of
    /// [`STEP`], never ahead of it: a plain bundle's code object in place, a CCOB's
    /// payload as it is decoded; all of it is released once read.
    #[test]
    fn what_a_stream_has_read_is_released_behind_it() {
        use std::cell::RefCell;
        use std::io::Read;
        // Bytes that do not compress, so that the payload is as long.
        let big = crate::testdata::noise(3 * STEP + 12_345);
        let plain = plain_bundle(
            &[
                ("host-x86_64-unknown-linux-gnu-", b""),
                ("hipv4-amdgcn-amd-amdhsa--gfx942", &big),
            ],
            4096,
        );
        for method in [Compression::None, Compression::Zstd] {
            let sec = match method {
                Compression::None => plain.clone(),
                m => ccob::encode(&plain, 1, m),
            };
            let b = &walk_section(&sec).unwrap()[0];
            let released = RefCell::new(Vec::<(usize, usize)>::new());
            let record = |o: usize, l: usize| released.borrow_mut().push((o, l));
            let mut read_all = 0u64;
            b.each_code_object_streamed(&sec, u64::MAX, &record, |e, r| {
                // Where this stream's bytes lie in the section: the code object's
                // (plain), the payload after the CCOB header (compressed).
                let start = match method {
                    Compression::None => e.offset as usize,
                    _ => ccob::parse_header(&sec).unwrap().header_len,
                };
                let mut piece = vec![0u8; 100_000];
                loop {
                    let k = r.read(&mut piece).unwrap();
                    if k == 0 {
                        break;
                    }
                    read_all += k as u64;
                    let rel = released.borrow();
                    let end = rel.iter().map(|&(o, l)| o + l).max().unwrap_or(start);
                    assert!(rel.iter().all(|&(o, _)| o >= start), "{method:?}");
                    if method == Compression::None {
                        let at = start + read_all as usize;
                        assert!(end <= at, "{method:?}: released ahead of the reading");
                        assert!(at - end < STEP, "{method:?}: {} behind", at - end);
                    }
                }
                Ok(Ok::<(), ()>(()))
            })
            .unwrap()
            .unwrap();
            assert_eq!(read_all, big.len() as u64);
            // Stepwise while reading (not one release at the end), and all of it (a
            // payload's last step is the caller's, with the bundle).
            let rel = released.into_inner();
            assert!(rel.len() >= 2, "{method:?}: {rel:?}");
            let mut covered: Vec<(usize, usize)> = rel.iter().map(|&(o, l)| (o, o + l)).collect();
            covered.sort();
            let first = covered[0].0;
            let reach = covered.iter().fold(first, |reach, &(a, b)| {
                assert!(a <= reach, "{method:?}: a gap at {reach}");
                reach.max(b)
            });
            let want = match method {
                Compression::None => first + big.len(),
                _ => sec.len() - STEP,
            };
            assert!(
                reach >= want,
                "{method:?}: released up to {reach} of {want}"
            );
        }
    }

    /// A decoder failing under a stream: an I/O error to the reader, kept as the
    /// bundle's error (which the walk returns whatever the reader made of it).
    #[test]
    fn a_decoder_failing_under_a_stream_is_kept_as_the_bundles_error() {
        use std::io::Read;
        struct Failing;
        impl Pull for Failing {
            fn pull(&mut self, _: &mut [u8]) -> FormatResult<usize> {
                Err(FormatError::new(
                    7,
                    "corrupt zstd payload: test".to_string(),
                ))
            }
        }
        let mut d = Failing;
        let mut r = CodeObject {
            from: From::Stream(&mut d),
            left: 10,
            error: None,
        };
        assert!(r.in_place().is_none());
        let e = r.read(&mut [0u8; 4]).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("corrupt zstd payload"), "{e}");
        assert!(
            r.error
                .take()
                .is_some_and(|k| k.to_string().contains("test"))
        );
        assert_eq!(r.remaining(), 10);
    }

    /// A CCOB whose header declares more bytes than its payload holds: an error
    /// naming both sizes, as decoding it whole gives; a limit below the declared
    /// size is refused before any call.
    #[test]
    fn a_short_payload_is_an_error_and_a_limit_is_kept() {
        let raw = sample();
        let mut sec = ccob::encode(&raw, 3, Compression::Zstd);
        sec[16..24].copy_from_slice(&(raw.len() as u64 + 100).to_le_bytes());
        let b = &walk_section(&sec).unwrap()[0];
        assert!(b.uncompressed(&sec, u64::MAX).is_err());
        let mut calls = 0;
        let e = (b.each_code_object(&sec, u64::MAX, |_, _| {
            calls += 1;
            Ok::<(), ()>(())
        }))
        .unwrap_err();
        let want = format!(
            "decompresses to {} bytes, header says {}",
            raw.len(),
            raw.len() + 100
        );
        assert!(e.to_string().contains(&want), "{e}");
        assert_eq!(calls, 3, "the code objects before the end were handed on");

        let sec = section(Compression::Zlib);
        let b = &walk_section(&sec).unwrap()[0];
        let mut calls = 0;
        let e = (b.each_code_object(&sec, b.uncompressed_size - 1, |_, _| {
            calls += 1;
            Ok::<(), ()>(())
        }))
        .unwrap_err();
        assert!(e.to_string().contains("above the limit"), "{e}");
        assert_eq!(calls, 0);
    }
}
