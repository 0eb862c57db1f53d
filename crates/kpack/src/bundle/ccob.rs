//! Compressed offload bundles (`CCOB`), versions 1, 2 and 3, zstd and zlib.
//!
//! | field             | v1 (20 B) | v2 (24 B) | v3 (32 B) |
//! |-------------------|-----------|-----------|-----------|
//! | total size        | —         | u32 @8    | u64 @8    |
//! | uncompressed size | u32 @8    | u32 @12   | u64 @16   |
//! | hash (MD5 low)    | u64 @12   | u64 @16   | u64 @24   |
//!
//! Method 0 = zlib, 1 = zstd. The payload decompresses to exactly the uncompressed
//! size; it is one (rarely several) plain bundle(s).

use crate::error::{FormatError, FormatResult};
use serde::Serialize;
use std::io::{BufRead, Read};

/// The 4-byte CCOB magic.
pub const CCOB_MAGIC: &[u8; 4] = b"CCOB";

/// Compression of a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// Uncompressed `__CLANG_OFFLOAD_BUNDLE__`.
    None,
    /// CCOB with method 0.
    Zlib,
    /// CCOB with method 1.
    Zstd,
}

impl Compression {
    /// The name used in JSON and text output.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Zlib => "zlib",
            Compression::Zstd => "zstd",
        }
    }
}

/// A parsed CCOB header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CcobHeader {
    /// 1, 2 or 3.
    pub version: u16,
    /// zlib or zstd.
    pub method: Compression,
    /// Header plus payload (absent in v1).
    pub total_size: Option<u64>,
    /// Exact size of the decompressed bytes.
    pub uncompressed_size: u64,
    /// Low 64 bits of the MD5 of the uncompressed bytes.
    pub hash: u64,
    /// 20, 24 or 32.
    pub header_len: usize,
}

fn u16_at(d: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([d[o], d[o + 1]])
}
fn u32_at(d: &[u8], o: usize) -> u64 {
    u64::from(u32::from_le_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]]))
}
fn u64_at(d: &[u8], o: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[o..o + 8]);
    u64::from_le_bytes(b)
}

/// Largest uncompressed size accepted for one bundle (a sanity bound against lying
/// headers; real bundles are at most a few hundred MB).
pub const MAX_UNCOMPRESSED: u64 = 8 << 30;

/// Parse the CCOB header at the start of `data`, checking it against the bytes present.
pub fn parse_header(data: &[u8]) -> FormatResult<CcobHeader> {
    parse_header_of(&data[..data.len().min(HEADER_MAX)], data.len() as u64)
}

/// The longest CCOB header (v3).
pub const HEADER_MAX: usize = 32;

/// [`parse_header`] of data of `len` bytes whose first ones are `head` (all of it,
/// or [`HEADER_MAX`] bytes at least): a header read from a file, not the data.
pub fn parse_header_of(head: &[u8], len: u64) -> FormatResult<CcobHeader> {
    let data = head;
    if data.len() < 8 || &data[..4] != CCOB_MAGIC {
        return Err(FormatError::new(
            0,
            "not a compressed bundle (bad CCOB magic)",
        ));
    }
    let version = u16_at(data, 4);
    let method = match u16_at(data, 6) {
        0 => Compression::Zlib,
        1 => Compression::Zstd,
        m => {
            return Err(FormatError::new(
                6,
                format!("unknown CCOB compression method {m}"),
            ));
        }
    };
    let header_len = match version {
        1 => 20,
        2 => 24,
        3 => 32,
        v => return Err(FormatError::new(4, format!("unsupported CCOB version {v}"))),
    };
    if data.len() < header_len {
        return Err(FormatError::new(
            data.len() as u64,
            format!(
                "truncated CCOB v{version} header ({} of {header_len} bytes)",
                data.len()
            ),
        ));
    }
    let (total_size, uncompressed_size, hash) = match version {
        1 => (None, u32_at(data, 8), u64_at(data, 12)),
        2 => (Some(u32_at(data, 8)), u32_at(data, 12), u64_at(data, 16)),
        _ => (Some(u64_at(data, 8)), u64_at(data, 16), u64_at(data, 24)),
    };
    if let Some(t) = total_size {
        if t < header_len as u64 {
            return Err(FormatError::new(
                8,
                format!("CCOB total size {t} is smaller than its header"),
            ));
        }
        if t > len {
            return Err(FormatError::new(
                8,
                format!("CCOB total size {t} passes the end of the data ({len} bytes)"),
            ));
        }
    }
    if uncompressed_size > MAX_UNCOMPRESSED {
        return Err(FormatError::new(
            if version == 3 { 16 } else { 12 },
            format!(
                "CCOB uncompressed size {uncompressed_size} is above the {MAX_UNCOMPRESSED}-byte bound"
            ),
        ));
    }
    Ok(CcobHeader {
        version,
        method,
        total_size,
        uncompressed_size,
        hash,
        header_len,
    })
}

impl CcobHeader {
    /// Bytes this CCOB occupies in `data` (which starts at its magic): the total size
    /// for v2/v3; for v1, up to the next `CCOB` magic or the end, as LLVM does (the
    /// plain-bundle magic cannot serve: zstd keeps the small entry table as literals,
    /// so it occurs inside compressed payloads).
    pub fn stored_size(&self, data: &[u8]) -> u64 {
        if let Some(t) = self.total_size {
            return t;
        }
        let from = self.header_len;
        let next = data[from..]
            .windows(4)
            .position(|w| w == CCOB_MAGIC)
            .map_or(data.len(), |p| p + from);
        next as u64
    }
}

/// A streaming decoder over a CCOB payload.
pub fn decoder<'a>(method: Compression, payload: &'a [u8]) -> Box<dyn Read + 'a> {
    decoder_of(method, payload)
}

/// [`decoder`] of a payload read from `r` (buffered by the caller: a slice is read in
/// place).
pub fn decoder_of<'a>(method: Compression, r: impl BufRead + 'a) -> Box<dyn Read + 'a> {
    match method {
        Compression::Zstd => match zstd::stream::read::Decoder::with_buffer(r) {
            Ok(d) => Box::new(d.single_frame()),
            Err(e) => Box::new(FailingReader(Some(e))),
        },
        Compression::Zlib => Box::new(flate2::bufread::ZlibDecoder::new(r)),
        Compression::None => Box::new(r),
    }
}

/// Call `f` with a [`decoder_of`] `r`: a zstd payload through this thread's one
/// decompression context, reused from payload to payload (its window, 2.5 MB for a
/// payload of many MB, is allocated once per thread, not once per bundle).
pub fn with_decoder<T>(
    method: Compression,
    r: impl BufRead,
    f: impl FnOnce(&mut dyn Read) -> T,
) -> T {
    thread_local! {
        static DCTX: std::cell::RefCell<Option<zstd::zstd_safe::DCtx<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    if method != Compression::Zstd {
        return f(&mut decoder_of(method, r));
    }
    DCTX.with(|cell| {
        // Taken already (a payload decoded inside another's `f`): a context of its own.
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return f(&mut decoder_of(method, r));
        };
        let ctx = slot.get_or_insert_with(zstd::zstd_safe::DCtx::create);
        let mut d = zstd::stream::read::Decoder::with_context(r, ctx).single_frame();
        f(&mut d)
    })
}

struct FailingReader(Option<std::io::Error>);
impl Read for FailingReader {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        Err(self
            .0
            .take()
            .unwrap_or_else(|| std::io::Error::other("decoder failed")))
    }
}

/// Payloads up to this size, at most [`BULK_RATIO`] times their compressed size, are
/// decoded in one allocation.
const BULK_MAX: u64 = 512 << 20;
/// See [`BULK_MAX`].
const BULK_RATIO: u64 = 32;

/// A decompressed CCOB payload.
pub enum Decoded {
    /// Grown on the heap (streamed, or empty).
    Heap(Vec<u8>),
    /// Decoded in one pass into an anonymous map of the declared size.
    Map(memmap2::MmapMut),
}

impl std::ops::Deref for Decoded {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Decoded::Heap(v) => v,
            Decoded::Map(m) => m,
        }
    }
}

impl std::fmt::Debug for Decoded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Decoded({} bytes)", self.len())
    }
}

/// Decompress a whole CCOB (`data` starts at its magic). Stops at the declared
/// uncompressed size (no bombs), fails if the payload yields fewer bytes, or if the
/// declared size is above `limit`.
pub fn decompress(data: &[u8], header: &CcobHeader, limit: u64) -> FormatResult<Decoded> {
    let want = header.uncompressed_size;
    if want > limit {
        return Err(FormatError::new(
            0,
            format!("CCOB uncompressed size {want} is above the limit of {limit} bytes"),
        ));
    }
    let stored = header.stored_size(data) as usize;
    let payload = &data[header.header_len..stored];
    // A zstd payload of a plausible ratio (code objects compress 3-6x) is decoded in
    // one pass straight into a buffer of the declared size: no window copies, no
    // regrowth. Anything else streams, so a lying header cannot make us allocate.
    if header.method == Compression::Zstd
        && want > 0
        && want <= BULK_MAX
        && want <= (payload.len() as u64).saturating_mul(BULK_RATIO)
    {
        // Into a map of its own: unmapped when dropped, where a heap block of this size
        // would stay in the allocator and add up over a tree's bundles.
        let mut out = memmap2::MmapMut::map_anon(want as usize).map_err(|e| {
            FormatError::new(
                0,
                format!("cannot allocate {want} bytes to decompress: {e}"),
            )
        })?;
        let n = zstd::bulk::Decompressor::new()
            .and_then(|mut d| d.decompress_to_buffer(payload, &mut out[..]))
            .map_err(|e| {
                FormatError::new(
                    header.header_len as u64,
                    format!("corrupt {} payload: {e}", header.method.name()),
                )
            })?;
        if n as u64 != want {
            return Err(FormatError::new(
                header.header_len as u64,
                format!("CCOB payload decompresses to {n} bytes, header says {want}"),
            ));
        }
        return Ok(Decoded::Map(out));
    }
    // Grow as data arrives rather than trusting the declared size for one allocation.
    let mut out = Vec::with_capacity(
        (want as usize)
            .min(payload.len().saturating_mul(8))
            .min(64 << 20),
    );
    decoder(header.method, payload)
        .take(want)
        .read_to_end(&mut out)
        .map_err(|e| {
            FormatError::new(
                header.header_len as u64,
                format!("corrupt {} payload: {e}", header.method.name()),
            )
        })?;
    if (out.len() as u64) != want {
        return Err(FormatError::new(
            header.header_len as u64,
            format!(
                "CCOB payload decompresses to {} bytes, header says {want}",
                out.len()
            ),
        ));
    }
    Ok(Decoded::Heap(out))
}

/// Build a CCOB around `uncompressed` (for tests and synthetic fixtures).
pub fn encode(uncompressed: &[u8], version: u16, method: Compression) -> Vec<u8> {
    let payload = match method {
        Compression::Zstd => zstd::bulk::compress(uncompressed, 3).unwrap_or_default(),
        Compression::Zlib => {
            use std::io::Write;
            let mut enc =
                flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            let _ = enc.write_all(uncompressed);
            enc.finish().unwrap_or_default()
        }
        Compression::None => uncompressed.to_vec(),
    };
    let method_id: u16 = if method == Compression::Zlib { 0 } else { 1 };
    let mut out = Vec::new();
    out.extend_from_slice(CCOB_MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&method_id.to_le_bytes());
    let n = uncompressed.len() as u64;
    match version {
        1 => {
            out.extend_from_slice(&(n as u32).to_le_bytes());
            out.extend_from_slice(&0u64.to_le_bytes());
        }
        2 => {
            out.extend_from_slice(&((24 + payload.len()) as u32).to_le_bytes());
            out.extend_from_slice(&(n as u32).to_le_bytes());
            out.extend_from_slice(&0u64.to_le_bytes());
        }
        _ => {
            out.extend_from_slice(&((32 + payload.len()) as u64).to_le_bytes());
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(&0u64.to_le_bytes());
        }
    }
    out.extend_from_slice(&payload);
    out
}

#[cfg(test)]
mod tests {
    use super::super::testutil::plain_bundle;
    use super::super::walk_section;
    use super::*;

    fn inner() -> Vec<u8> {
        plain_bundle(
            &[
                ("host-x86_64-unknown-linux-gnu-", b""),
                ("hipv4-amdgcn-amd-amdhsa--gfx1100", &[7u8; 5000]),
                ("hipv4-amdgcn-amd-amdhsa--gfx942:xnack+", &[9u8; 3000]),
            ],
            4096,
        )
    }

    #[test]
    fn spec_v3_header_example() {
        let bytes: [u8; 32] = [
            b'C', b'C', b'O', b'B', 3, 0, 1, 0, 0x0c, 0x8b, 0x12, 0, 0, 0, 0, 0, 0x38, 0x7f, 0xc6,
            0, 0, 0, 0, 0, 0xde, 0x30, 0xdc, 0xec, 0xea, 0x03, 0x74, 0xc3,
        ];
        let mut data = bytes.to_vec();
        data.resize(1_215_244, 0);
        let h = parse_header(&data).unwrap();
        assert_eq!(h.version, 3);
        assert_eq!(h.method, Compression::Zstd);
        assert_eq!(h.total_size, Some(1_215_244));
        assert_eq!(h.uncompressed_size, 13_008_696);
    }

    #[test]
    fn every_version_and_method_round_trips() {
        let raw = inner();
        for version in [1u16, 2, 3] {
            for method in [Compression::Zstd, Compression::Zlib] {
                let c = encode(&raw, version, method);
                let b = walk_section(&c).unwrap();
                assert_eq!(b.len(), 1, "v{version} {method:?}");
                assert_eq!(b[0].compression, method);
                assert_eq!(b[0].ccob_version, Some(version));
                assert_eq!(b[0].uncompressed_size, raw.len() as u64);
                let sizes: Vec<u64> = b[0].device_entries().map(|e| e.size).collect();
                assert_eq!(sizes, vec![5000, 3000]);
                let un = b[0].uncompressed(&c, u64::MAX).unwrap();
                assert_eq!(&*un, &raw[..]);
                let cos = b[0].code_objects(&un).unwrap();
                assert_eq!(cos[1].1, &[9u8; 3000][..]);
            }
        }
    }

    #[test]
    fn back_to_back_and_padded_ccobs_and_mixed_sequences() {
        let raw = inner();
        let mut sec = encode(&raw, 3, Compression::Zstd);
        sec.extend(encode(&raw, 2, Compression::Zlib));
        sec.resize(sec.len().next_multiple_of(4096), 0);
        sec.extend(plain_bundle(
            &[("hipv4-amdgcn-amd-amdhsa--gfx900", b"abc")],
            8,
        ));
        sec.resize(sec.len().next_multiple_of(4096), 0);
        sec.extend(encode(&raw, 1, Compression::Zstd));
        let b = walk_section(&sec).unwrap();
        assert_eq!(b.len(), 4);
        assert_eq!(
            b.iter().map(|x| x.compression).collect::<Vec<_>>(),
            vec![
                Compression::Zstd,
                Compression::Zlib,
                Compression::None,
                Compression::Zstd
            ]
        );
        assert_eq!(b[3].ccob_version, Some(1));
    }

    #[test]
    fn lying_sizes_are_errors_not_panics() {
        let raw = inner();
        // Uncompressed size larger than the payload really holds.
        let mut c = encode(&raw, 3, Compression::Zstd);
        c[16..24].copy_from_slice(&(raw.len() as u64 + 100).to_le_bytes());
        let bi = walk_section(&c).unwrap();
        assert!(bi[0].uncompressed(&c, u64::MAX).is_err());
        // Smaller: stops at the bound, listing still works, full decode reports it.
        let mut c = encode(&raw, 3, Compression::Zstd);
        c[16..24].copy_from_slice(&100u64.to_le_bytes());
        assert!(walk_section(&c).is_err());
        // Huge: rejected up front.
        let mut c = encode(&raw, 3, Compression::Zstd);
        c[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(walk_section(&c).unwrap_err().what.contains("bound"));
        // Total size past the end.
        let mut c = encode(&raw, 3, Compression::Zstd);
        c[8..16].copy_from_slice(&(1u64 << 20).to_le_bytes());
        assert!(walk_section(&c).unwrap_err().what.contains("total size"));
        // Corrupt payload.
        let mut c = encode(&raw, 2, Compression::Zstd);
        for b in &mut c[30..60] {
            *b ^= 0x5a;
        }
        assert!(walk_section(&c).is_err());
        // Unknown method / version.
        let mut c = encode(&raw, 3, Compression::Zstd);
        c[6] = 7;
        assert!(walk_section(&c).unwrap_err().what.contains("method"));
        c[6] = 1;
        c[4] = 9;
        assert!(walk_section(&c).unwrap_err().what.contains("version"));
    }

    #[test]
    fn limit_refuses_large_decompression() {
        let raw = inner();
        let c = encode(&raw, 3, Compression::Zstd);
        let h = parse_header(&c).unwrap();
        assert!(decompress(&c, &h, 100).unwrap_err().what.contains("limit"));
    }

    #[test]
    fn truncated_ccob_never_panics() {
        let c = encode(&inner(), 3, Compression::Zstd);
        for n in 0..c.len() {
            let _ = walk_section(&c[..n]);
        }
    }

    /// One thread's decompression context serves payload after payload, a payload
    /// decoded inside another's reading gets one of its own, and a payload cut
    /// short does not spoil the next one.
    #[test]
    fn the_threads_decoder_is_reused_and_never_shared() {
        let a: Vec<u8> = (0..300_000u32).map(|i| (i / 5) as u8).collect();
        let b: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8 ^ 0x33).collect();
        let (za, zb) = (
            zstd::encode_all(&a[..], 3).unwrap(),
            zstd::encode_all(&b[..], 3).unwrap(),
        );
        let read = |z: &[u8]| {
            with_decoder(Compression::Zstd, z, |d| {
                let mut v = Vec::new();
                d.read_to_end(&mut v).map(|_| v)
            })
        };
        // Half of `a` read, then dropped: its session is reset for the next.
        let half = with_decoder(Compression::Zstd, &za[..], |d| {
            let mut v = vec![0; a.len() / 2];
            d.read_exact(&mut v).map(|_| v)
        });
        assert_eq!(half.unwrap(), a[..a.len() / 2]);
        assert_eq!(read(&zb).unwrap(), b);
        assert_eq!(read(&za).unwrap(), a);
        let nested = with_decoder(Compression::Zstd, &za[..], |outer| {
            let inner = read(&zb).unwrap();
            let mut v = Vec::new();
            outer.read_to_end(&mut v).map(|_| (v, inner))
        });
        assert_eq!(nested.unwrap(), (a.clone(), b.clone()));
        assert!(read(&za[..za.len() / 2]).is_err());
        assert_eq!(read(&zb).unwrap(), b);
        let zlib = with_decoder(Compression::Zlib, &za[..], |d| d.read(&mut [0; 4]));
        assert!(zlib.is_err(), "a zstd payload is not zlib");
    }
}
