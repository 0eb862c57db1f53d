//! The `.kpack` archive, format version 1 (spec §3).
//!
//! ```text
//! 0x00  "KPAK"   u32 version = 1   u64 toc_offset   48 zero bytes
//! 0x40  blob area: kernels (scheme `none`) or a length-prefixed zstd frame list
//! toc   one MessagePack map; the file ends right after it
//! ```
//!
//! [`ArchiveWriter`] takes kernels in any order from any thread, compresses each one
//! on the caller's thread and spools the frame to a temporary file, so memory does not
//! grow with the archive. [`ArchiveWriter::finish`] lays the frames out in sorted
//! `(key, arch)` order — ordinals are dense in that order — writes the TOC and renames
//! the file into place: the output is byte-identical whatever the arrival order.
//!
//! [`Archive`] opens an archive in O(TOC) over an mmap; fetching one kernel touches
//! only its own frame, and decoding stops at its `original_size`.

use super::msgpack;
use crate::error::{Error, FormatError, FormatResult, Result};
use serde::Serialize;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// File magic.
pub const MAGIC: &[u8; 4] = b"KPAK";
/// The only format version.
pub const VERSION: u32 = 1;
/// Where the blob area starts.
pub const BLOB_START: u64 = 0x40;
/// Most kernels an archive may hold (the runtime's bound).
pub const MAX_KERNELS: u64 = 1_048_576;
/// Largest kernel accepted (original size), against lying TOCs.
pub const MAX_KERNEL_SIZE: u64 = 4 << 30;
/// Largest TOC accepted.
pub const MAX_TOC_SIZE: u64 = 1 << 30;
/// Default zstd level.
pub const DEFAULT_LEVEL: i32 = 3;
/// The level `--level max` stands for: zstd 19 with a window as large as each kernel.
pub const LEVEL_MAX: i32 = 19;

/// How kernels are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Scheme {
    /// Raw bytes, concatenated.
    #[serde(rename = "none")]
    None,
    /// One independent zstd frame per kernel.
    #[serde(rename = "zstd-per-kernel")]
    ZstdPerKernel,
}

impl Scheme {
    /// The TOC spelling.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::None => "none",
            Scheme::ZstdPerKernel => "zstd-per-kernel",
        }
    }
}

/// Archive-level metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArchiveMeta {
    /// Group (product) name.
    pub group_name: String,
    /// Architecture family name (`gfx90X`).
    pub gfx_arch_family: String,
    /// Target IDs the archive serves; the runtime selects archives by this list.
    pub gfx_arches: Vec<String>,
}

/// One kernel of an archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelEntry {
    /// Binary key, `relative/path#TU-index`.
    pub key: String,
    /// Full target ID.
    pub arch: String,
    /// Index into the blob list.
    pub ordinal: u32,
    /// Uncompressed size (`original_size`; for scheme none, the blob size).
    pub size: u64,
    /// Bytes stored in the file.
    pub compressed_size: u64,
    /// File offset of the stored bytes.
    pub offset: u64,
    /// String-valued metadata entries, if any.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

/// The parsed header and TOC.
#[derive(Debug, Clone, Serialize)]
pub struct ArchiveIndex {
    /// Format version from the header.
    pub version: u32,
    /// TOC offset from the header.
    pub toc_offset: u64,
    /// TOC `format_version`, if present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format_version: Option<u64>,
    /// Group, family, arches.
    #[serde(flatten)]
    pub meta: ArchiveMeta,
    /// Storage scheme.
    pub compression_scheme: Scheme,
    /// Kernels sorted by (key, arch).
    pub kernels: Vec<KernelEntry>,
    /// Size of the file.
    pub file_size: u64,
}

fn err(offset: u64, what: impl Into<Cow<'static, str>>) -> FormatError {
    FormatError::new(offset, what)
}

/// Positioned reads: archive bytes in memory, or a file read with `pread` (opening an
/// archive reads its header, TOC and one 4-byte length per frame, scattered over the
/// file; `pread` avoids a page fault and a mapping per frame).
pub trait ReadAt {
    /// Total size.
    fn size(&self) -> u64;
    /// Fill `buf` from `offset`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
}

impl ReadAt for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let start = usize::try_from(offset).map_err(std::io::Error::other)?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| self.get(start..end))
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

struct FileAt {
    file: File,
    size: u64,
}

impl ReadAt for FileAt {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
}

fn read_vec(src: &(impl ReadAt + ?Sized), offset: u64, len: u64) -> FormatResult<Vec<u8>> {
    let mut v = vec![0u8; len as usize];
    src.read_at(offset, &mut v)
        .map_err(|e| err(offset, format!("cannot read {len} bytes: {e}")))?;
    Ok(v)
}

/// A TOC entry read before the blob ranges are known.
struct PendingEntry {
    key_index: usize,
    arch: String,
    ordinal: u64,
    original: Option<u64>,
    metadata: BTreeMap<String, String>,
}

/// Parse an archive's index from an open file with positioned reads (no mapping:
/// only the header, the TOC and the frame lengths are read).
pub fn parse_index_file(file: &File) -> FormatResult<ArchiveIndex> {
    let size = file
        .metadata()
        .map_err(|e| err(0, format!("cannot stat: {e}")))?
        .len();
    let f = file
        .try_clone()
        .map_err(|e| err(0, format!("cannot read: {e}")))?;
    parse_index_at(&FileAt { file: f, size })
}

/// Parse an archive's header, TOC and frame index from its bytes.
pub fn parse_index(data: &[u8]) -> FormatResult<ArchiveIndex> {
    parse_index_at(data)
}

/// Parse an archive's header, TOC and frame index from any positioned source.
pub fn parse_index_at(src: &(impl ReadAt + ?Sized)) -> FormatResult<ArchiveIndex> {
    let file_size = src.size();
    if file_size == 0 {
        return Err(err(0, "empty file"));
    }
    if file_size < 16 {
        return Err(err(
            0,
            format!("truncated header ({file_size} of 16 bytes)"),
        ));
    }
    let data = read_vec(src, 0, 16)?;
    if &data[..4] != MAGIC {
        return Err(err(0, "not a .kpack archive (bad magic)"));
    }
    let version = u32::from_le_bytes([data[4], data[5], data[6], data[7]]);
    if version != VERSION {
        return Err(err(
            4,
            format!("unsupported .kpack version {version} (only 1 is known)"),
        ));
    }
    let mut toc_offset_bytes = [0u8; 8];
    toc_offset_bytes.copy_from_slice(&data[8..16]);
    let toc_offset = u64::from_le_bytes(toc_offset_bytes);
    if toc_offset >= file_size || toc_offset < 16 {
        return Err(err(
            8,
            format!("TOC offset {toc_offset:#x} is outside the file ({file_size} bytes)"),
        ));
    }
    if file_size - toc_offset > MAX_TOC_SIZE {
        return Err(err(8, "TOC is larger than 1 GiB"));
    }
    let toc_bytes = read_vec(src, toc_offset, file_size - toc_offset)?;
    let at = toc_offset;
    let mut r = msgpack::Reader::new(&toc_bytes, toc_offset);
    let top_len = r.map_len("TOC")?;
    let (mut format_version, mut group_name, mut gfx_arch_family, mut gfx_arches) =
        (None, None, None, None);
    let (mut scheme_name, mut blobs, mut zstd_range) = (None, None, (None, None));
    // (key, arch, ordinal, original_size, metadata), resolved against the ranges below
    // (the TOC map's key order is free, so `toc` may come before `blobs`).
    let mut pending: Vec<PendingEntry> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    let mut seen_toc = false;
    for _ in 0..top_len {
        let name = r.str("TOC key")?;
        match name {
            "format_version" => format_version = Some(r.uint("format_version")?),
            "group_name" => group_name = Some(r.str("group_name")?.to_string()),
            "gfx_arch_family" => gfx_arch_family = Some(r.str("gfx_arch_family")?.to_string()),
            "gfx_arches" => {
                let n = r.array_len("gfx_arches")?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(r.str("gfx_arches[]")?.to_string());
                }
                gfx_arches = Some(v);
            }
            "compression_scheme" => scheme_name = Some(r.str("compression_scheme")?.to_string()),
            "blobs" => {
                let n = r.array_len("blobs")?;
                if n as u64 > MAX_KERNELS {
                    return Err(err(
                        at,
                        format!("{n} blobs is above the {MAX_KERNELS} bound"),
                    ));
                }
                let mut v = Vec::with_capacity(n);
                for i in 0..n {
                    let (mut off, mut size) = (None, None);
                    for _ in 0..r.map_len("blobs[]")? {
                        match r.str("blobs[] key")? {
                            "offset" => off = Some(r.uint("blobs[].offset")?),
                            "size" => size = Some(r.uint("blobs[].size")?),
                            _ => r.skip()?,
                        }
                    }
                    let off = off.ok_or_else(|| err(at, format!("blobs[{i}] has no offset")))?;
                    let size = size.ok_or_else(|| err(at, format!("blobs[{i}] has no size")))?;
                    v.push((off, size));
                }
                blobs = Some(v);
            }
            "zstd_offset" => zstd_range.0 = Some(r.uint("zstd_offset")?),
            "zstd_size" => zstd_range.1 = Some(r.uint("zstd_size")?),
            "toc" => {
                seen_toc = true;
                for _ in 0..r.map_len("toc")? {
                    let key = r.str("toc key")?.to_string();
                    let key_index = keys.len();
                    let n_arch = r
                        .map_len("arch map")
                        .map_err(|e| e.context(&format!("toc[{key:?}]: ")))?;
                    for _ in 0..n_arch {
                        let arch = r
                            .str("arch key")
                            .map_err(|e| e.context(&format!("toc[{key:?}]: ")))?
                            .to_string();
                        let ctx = |e: FormatError| e.context(&format!("toc[{key:?}][{arch:?}]: "));
                        let (mut ordinal, mut original, mut metadata) =
                            (None, None, BTreeMap::new());
                        for _ in 0..r.map_len("entry").map_err(ctx)? {
                            match r.str("entry key").map_err(ctx)? {
                                "type" => {
                                    let t = r.str("type").map_err(ctx)?;
                                    if t != "hsaco" {
                                        return Err(ctx(err(
                                            at,
                                            format!("type is {t:?}, expected \"hsaco\""),
                                        )));
                                    }
                                }
                                "ordinal" => ordinal = Some(r.uint("ordinal").map_err(ctx)?),
                                "original_size" => {
                                    original = Some(r.uint("original_size").map_err(ctx)?)
                                }
                                "metadata" if r.peek()? == msgpack::Kind::Map => {
                                    for _ in 0..r.map_len("metadata").map_err(ctx)? {
                                        let mk = r.str("metadata key").map_err(ctx)?.to_string();
                                        if r.peek()? == msgpack::Kind::Str {
                                            metadata
                                                .insert(mk, r.str("metadata value")?.to_string());
                                        } else {
                                            r.skip()?;
                                        }
                                    }
                                }
                                _ => r.skip()?,
                            }
                        }
                        let ordinal = ordinal.ok_or_else(|| ctx(err(at, "no ordinal")))?;
                        pending.push(PendingEntry {
                            key_index,
                            arch,
                            ordinal,
                            original,
                            metadata,
                        });
                    }
                    keys.push(key);
                }
            }
            _ => r.skip()?,
        }
    }
    let required = |v: Option<String>, k: &str| v.ok_or_else(|| err(at, format!("TOC has no {k}")));
    let group_name = required(group_name, "group_name")?;
    let gfx_arch_family = required(gfx_arch_family, "gfx_arch_family")?;
    let gfx_arches = gfx_arches.ok_or_else(|| err(at, "TOC has no gfx_arches"))?;
    if !seen_toc {
        return Err(err(at, "TOC has no toc"));
    }
    let scheme = match scheme_name.as_deref() {
        None | Some("none") => Scheme::None,
        Some("zstd-per-kernel") => Scheme::ZstdPerKernel,
        Some(other) => return Err(err(at, format!("unknown compression_scheme {other:?}"))),
    };
    // Stored ranges per ordinal.
    let ranges: Vec<(u64, u64)> = match scheme {
        Scheme::None => {
            let blobs = blobs.ok_or_else(|| err(at, "TOC has no blobs (scheme none)"))?;
            for (i, &(off, size)) in blobs.iter().enumerate() {
                if off.checked_add(size).is_none_or(|e| e > toc_offset) {
                    return Err(err(
                        at,
                        format!("blobs[{i}] ({off:#x} + {size:#x}) runs past the blob area"),
                    ));
                }
            }
            blobs
        }
        Scheme::ZstdPerKernel => {
            let zoff = zstd_range
                .0
                .ok_or_else(|| err(at, "TOC has no zstd_offset"))?;
            let zsize = zstd_range
                .1
                .ok_or_else(|| err(at, "TOC has no zstd_size"))?;
            if zoff.checked_add(zsize).is_none_or(|e| e > toc_offset) || zsize < 4 {
                return Err(err(
                    at,
                    format!("zstd blob ({zoff:#x} + {zsize:#x}) runs past the blob area"),
                ));
            }
            frame_index(src, zoff, zsize)
                .map_err(|e| e.shifted(zoff))?
                .into_iter()
                .map(|(o, l)| (o + zoff, l))
                .collect()
        }
    };
    let mut kernels = Vec::with_capacity(pending.len());
    for PendingEntry {
        key_index,
        arch,
        ordinal,
        original,
        metadata,
    } in pending
    {
        let key = &keys[key_index];
        let ctx = |e: FormatError| e.context(&format!("toc[{key:?}][{arch:?}]: "));
        let Some(&(offset, stored)) = usize::try_from(ordinal).ok().and_then(|o| ranges.get(o))
        else {
            return Err(ctx(err(
                at,
                format!("ordinal {ordinal} is out of range ({} blobs)", ranges.len()),
            )));
        };
        let size = match (original, scheme) {
            (Some(v), _) => v,
            (None, Scheme::None) => stored,
            (None, Scheme::ZstdPerKernel) => {
                return Err(ctx(err(
                    at,
                    "no original_size (required for zstd-per-kernel)",
                )));
            }
        };
        if size > MAX_KERNEL_SIZE {
            return Err(ctx(err(
                at,
                format!("original_size {size} is above the {MAX_KERNEL_SIZE}-byte bound"),
            )));
        }
        kernels.push(KernelEntry {
            key: key.clone(),
            arch,
            ordinal: ordinal as u32,
            size,
            compressed_size: stored,
            offset,
            metadata,
        });
    }
    if !kernels.is_sorted_by(|a, b| (&a.key, &a.arch) <= (&b.key, &b.arch)) {
        kernels.sort_by(|a, b| a.key.cmp(&b.key).then(a.arch.cmp(&b.arch)));
    }
    Ok(ArchiveIndex {
        version,
        toc_offset,
        format_version,
        meta: ArchiveMeta {
            group_name,
            gfx_arch_family,
            gfx_arches,
        },
        compression_scheme: scheme,
        kernels,
        file_size,
    })
}

/// The frame list of the zstd blob at `base` (`len` bytes): `(offset within blob,
/// length)` per ordinal. Reads only the count and the 4-byte frame lengths.
fn frame_index(src: &(impl ReadAt + ?Sized), base: u64, len: u64) -> FormatResult<Vec<(u64, u64)>> {
    let mut word = [0u8; 4];
    let mut u32_at = |pos: u64, what: &str| -> FormatResult<u64> {
        src.read_at(base + pos, &mut word)
            .map_err(|e| err(pos, format!("cannot read {what}: {e}")))?;
        Ok(u64::from(u32::from_le_bytes(word)))
    };
    let n = u32_at(0, "frame count")?;
    if n > MAX_KERNELS {
        return Err(err(
            0,
            format!("{n} frames is above the {MAX_KERNELS} bound"),
        ));
    }
    let mut pos = 4u64;
    let mut out = Vec::with_capacity(n.min(len / 4) as usize);
    for i in 0..n {
        if pos + 4 > len {
            return Err(err(
                pos,
                format!("frame {i}: length runs past the zstd blob"),
            ));
        }
        let flen = u32_at(pos, "frame length")?;
        pos += 4;
        if pos + flen > len {
            return Err(err(
                pos - 4,
                format!("frame {i}: {flen} bytes run past the zstd blob"),
            ));
        }
        out.push((pos, flen));
        pos += flen;
    }
    Ok(out)
}

enum Bytes {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// An open archive.
pub struct Archive {
    path: PathBuf,
    bytes: Bytes,
    /// Header and TOC.
    pub index: ArchiveIndex,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive")
            .field("path", &self.path)
            .field("kernels", &self.index.kernels.len())
            .finish()
    }
}

impl Archive {
    /// Open and index an archive (mmap; reads the header, TOC and frame lengths only).
    pub fn open(path: &Path) -> Result<Archive> {
        let file = crate::fsutil::open_regular(path).map_err(|e| Error::io(path, e))?;
        let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let src = FileAt { file, size };
        let index = parse_index_at(&src).map_err(|e| Error::format(path, e))?;
        // Kernels are read through a map; only the frames fetched are touched, and
        // without read-ahead beyond them.
        let bytes = if size == 0 {
            Bytes::Owned(Vec::new())
        } else {
            let m = crate::fsutil::map_open_file(&src.file).map_err(|e| Error::io(path, e))?;
            let _ = m.advise(memmap2::Advice::Random);
            Bytes::Map(m)
        };
        Ok(Archive {
            path: path.to_path_buf(),
            bytes,
            index,
        })
    }

    /// Index archive bytes already in memory.
    pub fn from_bytes(path: &Path, data: Vec<u8>) -> Result<Archive> {
        let index = parse_index(&data).map_err(|e| Error::format(path, e))?;
        Ok(Archive {
            path: path.to_path_buf(),
            bytes: Bytes::Owned(data),
            index,
        })
    }

    /// The archive's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Look up a kernel.
    pub fn entry(&self, key: &str, arch: &str) -> Option<&KernelEntry> {
        self.entry_index(key, arch).map(|i| &self.index.kernels[i])
    }

    /// Where a kernel is in `index.kernels`.
    pub fn entry_index(&self, key: &str, arch: &str) -> Option<usize> {
        self.index
            .kernels
            .binary_search_by(|k| k.key.as_str().cmp(key).then(k.arch.as_str().cmp(arch)))
            .ok()
    }

    /// The stored bytes of a kernel (a zstd frame, or the raw kernel).
    pub fn stored(&self, e: &KernelEntry) -> &[u8] {
        if let Bytes::Map(m) = &self.bytes {
            // One sequential read of this frame rather than a fault per page.
            let _ = m.advise_range(
                memmap2::Advice::WillNeed,
                e.offset as usize,
                e.compressed_size as usize,
            );
        }
        &self.bytes[e.offset as usize..(e.offset + e.compressed_size) as usize]
    }

    /// A kernel's bytes; decompression stops at its `original_size`.
    pub fn kernel(&self, e: &KernelEntry) -> Result<Cow<'_, [u8]>> {
        let stored = self.stored(e);
        match self.index.compression_scheme {
            Scheme::None => Ok(Cow::Borrowed(stored)),
            Scheme::ZstdPerKernel => {
                decompress_frame(stored, e.size)
                    .map(Cow::Owned)
                    .map_err(|x| {
                        Error::format(
                            &self.path,
                            x.shifted(e.offset)
                                .context(&format!("{} @ {}: ", e.key, e.arch)),
                        )
                    })
            }
        }
    }

    /// Whether every stored kernel carries a checksum (zstd frames with the content
    /// checksum flag), so that a changed byte is detected without a ledger.
    pub fn checksummed(&self) -> bool {
        self.index.compression_scheme == Scheme::ZstdPerKernel
            && self.index.kernels.iter().all(|k| {
                let s = self.stored(k);
                s.len() > 4 && s[..4] == [0x28, 0xb5, 0x2f, 0xfd] && s[4] & 0x04 != 0
            })
    }

    /// Check everything: ranges, ordinals, arch lists, and that every frame decodes to
    /// its size (and, for zstd frames written with one, matches its checksum). Returns
    /// the faults found (empty when sound).
    pub fn verify(&self) -> Vec<String> {
        self.verify_hashed(false).0
    }

    /// [`verify`](Self::verify), also returning the SHA-256 of every kernel that
    /// decoded (index-aligned with `index.kernels`) when `hash` is set, from the same
    /// single decode.
    pub fn verify_hashed(&self, hash: bool) -> (Vec<String>, Vec<Option<String>>) {
        let mut faults = Vec::new();
        let idx = &self.index;
        let n_ranges = match idx.compression_scheme {
            Scheme::None => idx.kernels.len(),
            Scheme::ZstdPerKernel => idx.kernels.len(),
        };
        let mut seen = vec![
            false;
            n_ranges.max(
                idx.kernels
                    .iter()
                    .map(|k| k.ordinal as usize + 1)
                    .max()
                    .unwrap_or(0)
            )
        ];
        for k in &idx.kernels {
            let o = k.ordinal as usize;
            if seen[o] {
                faults.push(format!(
                    "ordinal {o} is used twice (again by {} @ {})",
                    k.key, k.arch
                ));
            }
            seen[o] = true;
        }
        for (o, s) in seen.iter().enumerate() {
            if !s {
                faults.push(format!(
                    "ordinal {o} is not used by any kernel (ordinals must be dense)"
                ));
            }
        }
        let mut by_off: Vec<&KernelEntry> = idx.kernels.iter().collect();
        by_off.sort_by_key(|k| (k.offset, k.compressed_size));
        for w in by_off.windows(2) {
            if w[0].offset + w[0].compressed_size > w[1].offset && w[0].ordinal != w[1].ordinal {
                faults.push(format!(
                    "{} @ {} and {} @ {} overlap in the file",
                    w[0].key, w[0].arch, w[1].key, w[1].arch
                ));
            }
        }
        // Decoding every frame is the expensive part: do it in parallel.
        let decoded: Vec<(Option<String>, Option<String>)> = {
            use rayon::prelude::*;
            idx.kernels
                .par_iter()
                .map(|k| {
                    let verdict = match self.kernel(k) {
                        Ok(b) if b.len() as u64 == k.size => {
                            (None, hash.then(|| crate::kpack::ledger::sha256_hex(&b)))
                        }
                        Ok(b) => (
                            Some(format!(
                                "{} @ {}: is {} bytes, TOC says {}",
                                k.key,
                                k.arch,
                                b.len(),
                                k.size
                            )),
                            None,
                        ),
                        // The error names the key and arch already; the file is the
                        // caller's to name.
                        Err(Error::Format { error, .. }) => (Some(error.to_string()), None),
                        Err(e) => (Some(format!("{} @ {}: {e}", k.key, k.arch)), None),
                    };
                    if let Bytes::Map(m) = &self.bytes {
                        crate::fsutil::release_range(
                            m,
                            k.offset as usize,
                            k.compressed_size as usize,
                        );
                    }
                    verdict
                })
                .collect()
        };
        let mut hashes = Vec::with_capacity(decoded.len());
        for (fault, h) in decoded {
            faults.extend(fault);
            hashes.push(h);
        }
        for k in &idx.kernels {
            if k.offset < BLOB_START {
                faults.push(format!(
                    "{} @ {}: stored in the header ({:#x})",
                    k.key, k.arch, k.offset
                ));
            }
            if !idx.meta.gfx_arches.contains(&k.arch) {
                faults.push(format!(
                    "{} @ {}: arch {} is not in gfx_arches, so the runtime never selects it",
                    k.key, k.arch, k.arch
                ));
            }
            if let Some(n) = k.key.rsplit_once('#').map(|(_, n)| n) {
                if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                    faults.push(format!("{}: key does not end in #<TU index>", k.key));
                }
            } else {
                faults.push(format!(
                    "{}: key has no #<TU index> suffix (the runtime always looks one up)",
                    k.key
                ));
            }
            if let Err(e) = safe_relative_path(&k.key) {
                faults.push(format!("{}: {e}", k.key));
            }
        }
        (faults, hashes)
    }
}

/// Largest compression ratio for which a frame is decoded in one shot into a buffer
/// of its declared size; above it the TOC's size is not trusted for an allocation
/// and the frame is streamed instead (it still stops at the declared size).
const MAX_TRUSTED_RATIO: u64 = 64;

/// Decode one zstd frame into exactly `size` bytes (no more are ever produced).
pub fn decompress_frame(frame: &[u8], size: u64) -> FormatResult<Vec<u8>> {
    if size
        <= (frame.len() as u64)
            .saturating_mul(MAX_TRUSTED_RATIO)
            .max(1 << 20)
    {
        // One shot into an exactly-sized buffer: a frame that holds more fails with
        // "destination too small", one that holds less is caught below.
        let mut out = vec![0u8; size as usize];
        let n = zstd::bulk::Decompressor::new()
            .and_then(|mut d| d.decompress_to_buffer(frame, &mut out))
            .map_err(|e| {
                if e.to_string().contains("Destination buffer is too small") {
                    err(
                        0,
                        format!("zstd frame holds more than original_size ({size}) bytes"),
                    )
                } else {
                    err(0, format!("corrupt zstd frame: {e}"))
                }
            })?;
        if n as u64 != size {
            return Err(err(
                0,
                format!("zstd frame decodes to {n} bytes, original_size is {size}"),
            ));
        }
        return Ok(out);
    }
    let mut out = Vec::with_capacity(
        (size as usize)
            .min(frame.len().saturating_mul(16))
            .min(256 << 20),
    );
    let mut dec = zstd::stream::read::Decoder::with_buffer(frame)
        .and_then(|mut d| d.window_log_max(31).map(|()| d))
        .map_err(|e| err(0, format!("cannot start zstd: {e}")))?
        .single_frame();
    (&mut dec)
        .take(size)
        .read_to_end(&mut out)
        .map_err(|e| err(0, format!("corrupt zstd frame: {e}")))?;
    if (out.len() as u64) < size {
        return Err(err(
            0,
            format!(
                "zstd frame decodes to {} bytes, original_size is {size}",
                out.len()
            ),
        ));
    }
    // One more byte means the frame holds more than it claims.
    let mut probe = [0u8; 1];
    if matches!(dec.read(&mut probe), Ok(1)) {
        return Err(err(
            0,
            format!("zstd frame holds more than original_size ({size}) bytes"),
        ));
    }
    Ok(out)
}

/// Check that an arch can be a file name.
pub fn safe_arch(arch: &str) -> std::result::Result<&str, String> {
    if arch.is_empty() || arch == "." || arch == ".." || arch.contains(['/', '\\', '\0']) {
        return Err(format!("arch {arch:?} cannot be used as a file name"));
    }
    Ok(arch)
}

/// Where [`Archive::extract_to`] writes a kernel under `root`:
/// `<key path>#<tu>/<arch>.hsaco`, or why the key or arch is unsafe.
pub fn extract_path(root: &Path, k: &KernelEntry) -> std::result::Result<PathBuf, String> {
    let rel = safe_relative_path(&k.key).map_err(|e| format!("key {:?}: {e}", k.key))?;
    let arch = safe_arch(&k.arch).map_err(|e| format!("key {:?}: {e}", k.key))?;
    let tu = k.key.rsplit_once('#').map_or("0", |(_, n)| n);
    let mut dir = rel;
    let name = format!(
        "{}#{tu}",
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    dir.set_file_name(name);
    Ok(root.join(dir).join(format!("{arch}.hsaco")))
}

impl Archive {
    /// Extract the kernels `want` selects under `root` (see [`extract_path`]). Every
    /// destination is planned first: nothing is written if any key would leave
    /// `root`; a symlink inside `root` cannot lead a write elsewhere; each file is
    /// written atomically. Returns the number of kernels written.
    pub fn extract_to(&self, root: &Path, want: impl Fn(&KernelEntry) -> bool) -> Result<usize> {
        let mut plan = Vec::new();
        let mut refused = Vec::new();
        for k in self.index.kernels.iter().filter(|k| want(k)) {
            match extract_path(root, k) {
                Ok(p) => plan.push((p, k)),
                Err(e) => refused.push(e),
            }
        }
        if !refused.is_empty() {
            return Err(Error::Invalid(format!(
                "{}: refusing to extract, {} key(s) would write outside {}:\n  {}",
                self.path.display(),
                refused.len(),
                root.display(),
                refused.join("\n  ")
            )));
        }
        // Every kernel is checked (decoded, its size and zstd checksum) before
        // anything is written: bad bytes are never extracted.
        let bad: Vec<String> = {
            use rayon::prelude::*;
            plan.par_iter()
                .filter_map(|(_, k)| match self.kernel(k) {
                    Ok(b) if b.len() as u64 == k.size => None,
                    Ok(b) => Some(format!(
                        "{} @ {}: decodes to {} bytes, the TOC says {}",
                        k.key,
                        k.arch,
                        b.len(),
                        k.size
                    )),
                    Err(e) => Some(e.to_string()),
                })
                .collect()
        };
        if !bad.is_empty() {
            return Err(Error::Findings(format!(
                "{}: refusing to extract, {} kernel(s) fail their checks (nothing written):\n  {}",
                self.path.display(),
                bad.len(),
                bad.join("\n  ")
            )));
        }
        std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
        let canon_root = root.canonicalize().map_err(|e| Error::io(root, e))?;
        for (dest, k) in &plan {
            let parent = dest.parent().unwrap_or(root);
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            let canon = parent.canonicalize().map_err(|e| Error::io(parent, e))?;
            if !canon.starts_with(&canon_root) {
                return Err(Error::Invalid(format!(
                    "{} leads outside {} (through a symlink); not writing",
                    parent.display(),
                    root.display()
                )));
            }
            let bytes = self.kernel(k)?;
            crate::fsutil::write_atomic(dest, &bytes, None)?;
        }
        Ok(plan.len())
    }
}

/// Check that an archive key names a path that stays inside a directory: relative,
/// no `..`, no empty components, no NUL, no backslash.
pub fn safe_relative_path(key: &str) -> std::result::Result<PathBuf, String> {
    let path = key.rsplit_once('#').map_or(key, |(p, _)| p);
    if path.is_empty() {
        return Err("empty path".into());
    }
    if path.contains('\0') {
        return Err("path contains NUL".into());
    }
    if path.starts_with('/') {
        return Err("absolute path".into());
    }
    if path.contains('\\') {
        return Err("path contains a backslash".into());
    }
    let mut out = PathBuf::new();
    for c in path.split('/') {
        match c {
            "" | "." => return Err(format!("path has an empty or '.' component: {path:?}")),
            ".." => return Err(format!("path escapes with '..': {path:?}")),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Compress one kernel as stored by `scheme` (pure; call from any thread).
pub fn encode_kernel(data: &[u8], scheme: Scheme, level: i32) -> std::io::Result<Vec<u8>> {
    match scheme {
        Scheme::None => Ok(data.to_vec()),
        Scheme::ZstdPerKernel => {
            // One compression context per thread and level, reused across kernels.
            thread_local! {
                static CTX: std::cell::RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
                    const { std::cell::RefCell::new(None) };
            }
            CTX.with(|cell| {
                let mut slot = cell.borrow_mut();
                if slot.as_ref().is_none_or(|(l, _)| *l != level) {
                    let mut c = zstd::bulk::Compressor::new(level)?;
                    c.include_contentsize(true)?;
                    // The frame checksum (XXH64 of the content, 4 bytes) lets every
                    // reader - ours, the reference runtime's ZSTD_decompressDCtx, the
                    // Python zstandard module - detect a changed byte.
                    c.include_checksum(true)?;
                    *slot = Some((level, c));
                }
                match slot.as_mut() {
                    Some((_, c)) => {
                        if level >= LEVEL_MAX {
                            // The window spans the whole kernel (one frame per kernel
                            // still; one-shot decoders need no window buffer).
                            let w = (usize::BITS - data.len().max(1 << 10).leading_zeros())
                                .clamp(10, 27);
                            c.set_parameter(zstd::zstd_safe::CParameter::WindowLog(w))?;
                        }
                        c.compress(data)
                    }
                    None => Err(std::io::Error::other("no zstd context")),
                }
            })
        }
    }
}

struct Spooled {
    offset: u64,
    len: u64,
    original_size: u64,
    metadata: BTreeMap<String, String>,
}

struct SpoolState {
    file: BufWriter<File>,
    len: u64,
    entries: BTreeMap<(String, String), Spooled>,
}

/// Writes an archive: add kernels (from any thread), then [`finish`](Self::finish).
pub struct ArchiveWriter {
    path: PathBuf,
    meta: ArchiveMeta,
    scheme: Scheme,
    level: i32,
    spool: Mutex<SpoolState>,
    spool_file: tempfile::NamedTempFile,
}

/// What [`ArchiveWriter::finish`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct ArchiveSummary {
    /// Where.
    pub path: PathBuf,
    /// Kernels.
    pub kernels: u64,
    /// Sum of original sizes.
    pub raw_bytes: u64,
    /// File size.
    pub file_size: u64,
}

impl ArchiveWriter {
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
        Ok(ArchiveWriter {
            path: path.to_path_buf(),
            meta,
            scheme,
            level,
            spool: Mutex::new(SpoolState {
                file: BufWriter::with_capacity(1 << 20, file),
                len: 0,
                entries: BTreeMap::new(),
            }),
            spool_file,
        })
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
        let key = key.replace('\\', "/");
        let tu_ok = key
            .rsplit_once('#')
            .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !tu_ok {
            return Err(Error::Invalid(format!(
                "kernel key {key:?} must end in #<TU index>"
            )));
        }
        safe_relative_path(&key).map_err(|e| Error::Invalid(format!("kernel key {key:?}: {e}")))?;
        if arch.is_empty() || arch.contains(['/', '\\', '\0']) {
            return Err(Error::Invalid(format!("arch {arch:?} is not a target ID")));
        }
        let stored =
            encode_kernel(data, self.scheme, self.level).map_err(|e| Error::io(&self.path, e))?;
        let mut s = self
            .spool
            .lock()
            .map_err(|_| Error::Invalid("archive writer poisoned by a panic".into()))?;
        if s.entries.contains_key(&(key.clone(), arch.to_string())) {
            return Err(Error::Invalid(format!(
                "{}: kernel {key} @ {arch} added twice",
                self.path.display()
            )));
        }
        if s.entries.len() as u64 >= MAX_KERNELS {
            return Err(Error::Invalid(format!(
                "{}: more than {MAX_KERNELS} kernels",
                self.path.display()
            )));
        }
        let offset = s.len;
        let stored_len = stored.len() as u64;
        s.file
            .write_all(&stored)
            .map_err(|e| Error::io(self.spool_file.path(), e))?;
        s.len += stored.len() as u64;
        s.entries.insert(
            (key, arch.to_string()),
            Spooled {
                offset,
                len: stored.len() as u64,
                original_size: data.len() as u64,
                metadata,
            },
        );
        Ok(stored_len)
    }

    /// Number of kernels added so far and their stored bytes.
    pub fn progress(&self) -> (u64, u64) {
        self.spool
            .lock()
            .map(|s| (s.entries.len() as u64, s.len))
            .unwrap_or((0, 0))
    }

    /// Lay out the archive, write the TOC, and rename it into place atomically.
    pub fn finish(self) -> Result<ArchiveSummary> {
        let state = self
            .spool
            .into_inner()
            .map_err(|_| Error::Invalid("archive writer poisoned by a panic".into()))?;
        let spool = state
            .file
            .into_inner()
            .map_err(|e| Error::io(self.spool_file.path(), e.into_error()))?;
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
        let n = state.entries.len();
        let mut pos = BLOB_START;
        if self.scheme == Scheme::ZstdPerKernel {
            w.write_all(&(n as u32).to_le_bytes()).map_err(io)?;
            pos += 4;
        }
        let mut blobs = Vec::with_capacity(n);
        let mut buf = Vec::new();
        let mut raw_bytes = 0u64;
        for s in state.entries.values() {
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
        let toc = encode_toc(&self.meta, self.scheme, &state.entries, &blobs, toc_offset);
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
            kernels: n as u64,
            raw_bytes,
            file_size,
        })
    }
}

/// The size of the archive [`ArchiveWriter::finish`] lays out for these kernels
/// (key, arch, original size, stored size, metadata): header, frame lengths, blobs
/// and the TOC, exactly. Used to project pack outputs without writing them.
pub fn archive_size(
    meta: &ArchiveMeta,
    scheme: Scheme,
    kernels: impl IntoIterator<Item = (String, String, u64, u64, BTreeMap<String, String>)>,
) -> u64 {
    let entries: BTreeMap<(String, String), Spooled> = kernels
        .into_iter()
        .map(|(k, a, original_size, len, metadata)| {
            (
                (k, a),
                Spooled {
                    offset: 0,
                    len,
                    original_size,
                    metadata,
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
    pos + encode_toc(meta, scheme, &entries, &blobs, pos).len() as u64
}

/// The TOC in the reference writer's key order, every string in the str family.
fn encode_toc(
    meta: &ArchiveMeta,
    scheme: Scheme,
    entries: &BTreeMap<(String, String), Spooled>,
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
        let mut by_key: BTreeMap<&str, Vec<(&str, usize, &Spooled)>> = BTreeMap::new();
        for (ordinal, ((k, a), sp)) in entries.iter().enumerate() {
            by_key.entry(k).or_default().push((a, ordinal, sp));
        }
        let _ = e::write_map_len(&mut t, by_key.len() as u32);
        for (k, arches) in &by_key {
            s(&mut t, k);
            let _ = e::write_map_len(&mut t, arches.len() as u32);
            for (a, ordinal, sp) in arches {
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
                    for (mk, mv) in &sp.metadata {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn meta() -> ArchiveMeta {
        ArchiveMeta {
            group_name: "test".into(),
            gfx_arch_family: "gfx90X".into(),
            gfx_arches: vec!["gfx900".into(), "gfx90a:xnack+".into()],
        }
    }

    fn write(dir: &Path, scheme: Scheme, kernels: &[(&str, &str, Vec<u8>)]) -> PathBuf {
        let p = dir.join("a.kpack");
        let w = ArchiveWriter::create(&p, meta(), scheme, 3).unwrap();
        for (k, a, d) in kernels {
            w.add(k, a, d).unwrap();
        }
        w.finish().unwrap();
        p
    }

    fn sample() -> Vec<(&'static str, &'static str, Vec<u8>)> {
        vec![
            ("lib/libx.so#1", "gfx900", vec![1u8; 5000]),
            ("lib/libx.so#0", "gfx90a:xnack+", b"hello".repeat(300)),
            (
                "bin/app#0",
                "gfx900",
                (0..=255u8).cycle().take(3000).collect(),
            ),
            ("lib/libx.so#0", "gfx900", vec![]),
        ]
    }

    #[test]
    fn round_trip_both_schemes_with_sorted_dense_ordinals() {
        for scheme in [Scheme::None, Scheme::ZstdPerKernel] {
            let d = tempfile::tempdir().unwrap();
            let p = write(d.path(), scheme, &sample());
            let a = Archive::open(&p).unwrap();
            assert_eq!(a.index.meta, meta());
            assert_eq!(a.index.compression_scheme, scheme);
            let keys: Vec<(&str, &str, u32)> = a
                .index
                .kernels
                .iter()
                .map(|k| (k.key.as_str(), k.arch.as_str(), k.ordinal))
                .collect();
            assert_eq!(
                keys,
                vec![
                    ("bin/app#0", "gfx900", 0),
                    ("lib/libx.so#0", "gfx900", 1),
                    ("lib/libx.so#0", "gfx90a:xnack+", 2),
                    ("lib/libx.so#1", "gfx900", 3)
                ]
            );
            for (k, ar, data) in sample() {
                let e = a.entry(k, ar).unwrap();
                assert_eq!(&*a.kernel(e).unwrap(), &data[..]);
            }
            assert!(a.entry("lib/libx.so#2", "gfx900").is_none());
            assert_eq!(a.verify(), Vec::<String>::new());
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
                0o644
            );
            // Only spool files could be left behind: none are.
            let left: Vec<_> = std::fs::read_dir(d.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(left.len(), 1, "{left:?}");
        }
    }

    #[test]
    fn output_does_not_depend_on_insertion_order() {
        let d = tempfile::tempdir().unwrap();
        let mut s = sample();
        let a = std::fs::read(write(d.path(), Scheme::ZstdPerKernel, &s)).unwrap();
        s.reverse();
        let b = std::fs::read(write(d.path(), Scheme::ZstdPerKernel, &s)).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn duplicate_kernel_is_rejected() {
        let d = tempfile::tempdir().unwrap();
        let w = ArchiveWriter::create(&d.path().join("x.kpack"), meta(), Scheme::None, 3).unwrap();
        w.add("a#0", "gfx900", b"x").unwrap();
        assert!(
            w.add("a#0", "gfx900", b"y")
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
        assert!(
            w.add("a", "gfx900", b"y")
                .unwrap_err()
                .to_string()
                .contains("#<TU index>")
        );
        assert!(
            w.add("../a#0", "gfx900", b"y")
                .unwrap_err()
                .to_string()
                .contains("..")
        );
        assert!(w.add("b#0", "gfx/900", b"y").is_err());
        assert_eq!(
            w.add("bin\\x#0", "gfx900", b"y")
                .map(|_| w.progress().0)
                .unwrap(),
            2
        );
    }

    #[test]
    fn empty_archive_is_valid() {
        for scheme in [Scheme::None, Scheme::ZstdPerKernel] {
            let d = tempfile::tempdir().unwrap();
            let p = write(d.path(), scheme, &[]);
            let a = Archive::open(&p).unwrap();
            assert!(a.index.kernels.is_empty());
            assert!(a.verify().is_empty());
        }
    }

    #[test]
    fn higher_levels_are_not_larger_and_compressible_data_shrinks() {
        let d = tempfile::tempdir().unwrap();
        let data = b"ABCDEFGH".repeat(20_000);
        let sizes: Vec<u64> = [1, 19]
            .iter()
            .map(|&lvl| {
                let p = d.path().join(format!("l{lvl}.kpack"));
                let w = ArchiveWriter::create(&p, meta(), Scheme::ZstdPerKernel, lvl).unwrap();
                w.add("k#0", "gfx900", &data).unwrap();
                w.finish().unwrap().file_size
            })
            .collect();
        assert!(sizes[1] <= sizes[0]);
        assert!(sizes[0] * 5 < data.len() as u64);
    }

    #[test]
    fn path_safety() {
        assert!(safe_relative_path("lib/a.so#0").is_ok());
        for bad in [
            "../x#0",
            "/etc/passwd#0",
            "a/../../b#0",
            "a\0b#0",
            "a//b#0",
            "#0",
            "a\\b#0",
            "./a#0",
        ] {
            assert!(safe_relative_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn corrupt_headers_and_tocs_are_clear_errors() {
        let d = tempfile::tempdir().unwrap();
        let good = std::fs::read(write(d.path(), Scheme::ZstdPerKernel, &sample())).unwrap();
        let check = |bytes: &[u8], needle: &str| {
            let e = parse_index(bytes).unwrap_err();
            assert!(e.to_string().contains(needle), "{e} (wanted {needle:?})");
        };
        check(b"", "empty");
        check(&good[..8], "truncated header");
        let mut b = good.clone();
        b[0] = b'X';
        check(&b, "bad magic");
        let mut b = good.clone();
        b[4] = 99;
        check(&b, "version 99");
        let mut b = good.clone();
        b[8..16].copy_from_slice(&(good.len() as u64 + 5).to_le_bytes());
        check(&b, "outside the file");
        let mut b = good.clone();
        let toc = u64::from_le_bytes(good[8..16].try_into().unwrap()) as usize;
        b[toc] = 0xc1; // never-used msgpack byte
        check(&b, "MessagePack");
        let mut b = good.clone();
        b[toc] = 0x93; // array, not map
        check(&b, "TOC is an array, expected a map");
        // Frame count above the bound.
        let mut b = good.clone();
        b[0x40..0x44].copy_from_slice(&2_000_000u32.to_le_bytes());
        check(&b, "bound");
        // Frame length past the blob.
        let mut b = good.clone();
        b[0x44..0x48].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
        check(&b, "run past");
        // Every truncation: an error, never a panic.
        for n in 0..good.len() {
            let _ = parse_index(&good[..n]);
        }
    }

    fn toc_bytes(v: serde_json::Value) -> Vec<u8> {
        let toc = rmp_serde::to_vec_named(&v).unwrap();
        let mut f = Vec::new();
        f.extend_from_slice(MAGIC);
        f.extend_from_slice(&1u32.to_le_bytes());
        f.extend_from_slice(&0x44u64.to_le_bytes());
        f.resize(0x40, 0);
        f.extend_from_slice(b"DATA");
        f.extend_from_slice(&toc);
        f
    }

    #[test]
    fn toc_field_rules() {
        let base = |toc: serde_json::Value, scheme: &str| {
            serde_json::json!({"group_name": "g", "gfx_arch_family": "f", "gfx_arches": ["gfx900"],
                "compression_scheme": scheme, "toc": toc, "blobs": [{"offset": 0x40, "size": 4}],
                "zstd_offset": 0x40, "zstd_size": 4})
        };
        let ok = toc_bytes(base(
            serde_json::json!({"a#0": {"gfx900": {"type": "hsaco", "ordinal": 0}}}),
            "none",
        ));
        let idx = parse_index(&ok).unwrap();
        assert_eq!(idx.kernels[0].size, 4);
        let e = |v| parse_index(&toc_bytes(v)).unwrap_err().to_string();
        assert!(
            e(base(
                serde_json::json!({"a#0": {"gfx900": {"ordinal": 5}}}),
                "none"
            ))
            .contains("out of range")
        );
        assert!(
            e(base(
                serde_json::json!({"a#0": {"gfx900": {"ordinal": -1}}}),
                "none"
            ))
            .contains("negative")
        );
        assert!(
            e(base(
                serde_json::json!({"a#0": {"gfx900": {"ordinal": 0}}}),
                "lz4"
            ))
            .contains("unknown compression_scheme")
        );
        assert!(
            e(base(
                serde_json::json!({"a#0": {"gfx900": {"ordinal": 0}}}),
                "zstd-per-kernel"
            ))
            .contains("bound")
        );
        assert!(
            e(base(
                serde_json::json!({"a#0": {"gfx900": {"type": "elf", "ordinal": 0}}}),
                "none"
            ))
            .contains("hsaco")
        );
        assert!(e(serde_json::json!({"group_name": "g"})).contains("no gfx_arch_family"));
        assert!(e(serde_json::json!({"group_name": 3, "gfx_arch_family": "f", "gfx_arches": [], "toc": {}})).contains("group_name is an integer, expected a string"));
    }

    #[test]
    fn zstd_frame_larger_than_original_size_is_caught() {
        let frame = encode_kernel(&[7u8; 10_000], Scheme::ZstdPerKernel, 3).unwrap();
        assert!(
            decompress_frame(&frame, 100)
                .unwrap_err()
                .what
                .contains("more than")
        );
        assert!(
            decompress_frame(&frame, 20_000)
                .unwrap_err()
                .what
                .contains("decodes to")
        );
        assert_eq!(decompress_frame(&frame, 10_000).unwrap().len(), 10_000);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn random_kernel_sets_round_trip(
            set in proptest::collection::btree_map(
                ("[a-z]{1,6}(/[a-z]{1,6}){0,2}#[0-9]", prop_oneof!["gfx900", "gfx90a:xnack\\+", "gfx1100"]),
                proptest::collection::vec(any::<u8>(), 0..2000),
                0..12),
            zstd in any::<bool>(),
        ) {
            let scheme = if zstd { Scheme::ZstdPerKernel } else { Scheme::None };
            let d = tempfile::tempdir().unwrap();
            let p = d.path().join("p.kpack");
            let w = ArchiveWriter::create(&p, meta(), scheme, 1).unwrap();
            for ((k, a), data) in &set {
                w.add(k, a, data).unwrap();
            }
            w.finish().unwrap();
            let ar = Archive::open(&p).unwrap();
            prop_assert_eq!(ar.index.kernels.len(), set.len());
            for ((k, a), data) in &set {
                let e = ar.entry(k, a).unwrap();
                prop_assert_eq!(&*ar.kernel(e).unwrap(), &data[..]);
            }
        }
    }
}
