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

use crate::error::{Error, FormatError, FormatResult, Result};
use rmpv::Value;
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

fn get<'v>(map: &'v [(Value, Value)], key: &str) -> Option<&'v Value> {
    map.iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

fn as_uint(v: &Value, what: &str, at: u64) -> FormatResult<u64> {
    v.as_u64()
        .ok_or_else(|| err(at, format!("TOC field {what} is not an unsigned integer")))
}

fn as_string(v: &Value, what: &str, at: u64) -> FormatResult<String> {
    match v {
        Value::String(s) => s
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| err(at, format!("TOC field {what} is not valid UTF-8"))),
        Value::Binary(_) => Err(err(at, format!("TOC field {what} is binary, not a string"))),
        _ => Err(err(at, format!("TOC field {what} is not a string"))),
    }
}

fn as_map<'v>(v: &'v Value, what: &str, at: u64) -> FormatResult<&'v [(Value, Value)]> {
    v.as_map()
        .map(Vec::as_slice)
        .ok_or_else(|| err(at, format!("TOC field {what} is not a map")))
}

fn key_string(k: &Value, what: &str, at: u64) -> FormatResult<String> {
    match k {
        Value::String(s) => s
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| err(at, format!("{what} key is not valid UTF-8"))),
        Value::Binary(_) => Err(err(at, format!("{what} key is binary, not a string"))),
        _ => Err(err(at, format!("{what} key is not a string"))),
    }
}

/// Parse an archive's header, TOC and frame index from its bytes.
pub fn parse_index(data: &[u8]) -> FormatResult<ArchiveIndex> {
    let file_size = data.len() as u64;
    if data.is_empty() {
        return Err(err(0, "empty file"));
    }
    if data.len() < 16 {
        return Err(err(
            0,
            format!("truncated header ({} of 16 bytes)", data.len()),
        ));
    }
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
    let mut rd = &data[toc_offset as usize..];
    let toc = rmpv::decode::read_value(&mut rd)
        .map_err(|e| err(toc_offset, format!("TOC is not valid MessagePack: {e}")))?;
    let at = toc_offset;
    let top = toc
        .as_map()
        .ok_or_else(|| err(at, "TOC is not a MessagePack map"))?;
    let required = |k: &str| get(top, k).ok_or_else(|| err(at, format!("TOC has no {k}")));
    let format_version = get(top, "format_version")
        .map(|v| as_uint(v, "format_version", at))
        .transpose()?;
    let group_name = as_string(required("group_name")?, "group_name", at)?;
    let gfx_arch_family = as_string(required("gfx_arch_family")?, "gfx_arch_family", at)?;
    let gfx_arches = required("gfx_arches")?
        .as_array()
        .ok_or_else(|| err(at, "TOC field gfx_arches is not an array"))?
        .iter()
        .map(|a| as_string(a, "gfx_arches[]", at))
        .collect::<FormatResult<Vec<_>>>()?;
    let scheme = match get(top, "compression_scheme") {
        None => Scheme::None,
        Some(v) => match as_string(v, "compression_scheme", at)?.as_str() {
            "none" => Scheme::None,
            "zstd-per-kernel" => Scheme::ZstdPerKernel,
            other => return Err(err(at, format!("unknown compression_scheme {other:?}"))),
        },
    };

    // Stored ranges per ordinal.
    let ranges: Vec<(u64, u64)> = match scheme {
        Scheme::None => {
            let blobs = get(top, "blobs")
                .ok_or_else(|| err(at, "TOC has no blobs (scheme none)"))?
                .as_array()
                .ok_or_else(|| err(at, "TOC field blobs is not an array"))?;
            if blobs.len() as u64 > MAX_KERNELS {
                return Err(err(
                    at,
                    format!("{} blobs is above the {MAX_KERNELS} bound", blobs.len()),
                ));
            }
            blobs
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let m = as_map(b, "blobs[]", at)?;
                    let off = as_uint(
                        get(m, "offset")
                            .ok_or_else(|| err(at, format!("blobs[{i}] has no offset")))?,
                        "blobs[].offset",
                        at,
                    )?;
                    let size = as_uint(
                        get(m, "size").ok_or_else(|| err(at, format!("blobs[{i}] has no size")))?,
                        "blobs[].size",
                        at,
                    )?;
                    if off.checked_add(size).is_none_or(|e| e > toc_offset) {
                        return Err(err(
                            at,
                            format!("blobs[{i}] ({off:#x} + {size:#x}) runs past the blob area"),
                        ));
                    }
                    Ok((off, size))
                })
                .collect::<FormatResult<_>>()?
        }
        Scheme::ZstdPerKernel => {
            let zoff = as_uint(
                get(top, "zstd_offset").ok_or_else(|| err(at, "TOC has no zstd_offset"))?,
                "zstd_offset",
                at,
            )?;
            let zsize = as_uint(
                get(top, "zstd_size").ok_or_else(|| err(at, "TOC has no zstd_size"))?,
                "zstd_size",
                at,
            )?;
            if zoff.checked_add(zsize).is_none_or(|e| e > toc_offset) || zsize < 4 {
                return Err(err(
                    at,
                    format!("zstd blob ({zoff:#x} + {zsize:#x}) runs past the blob area"),
                ));
            }
            frame_index(&data[zoff as usize..(zoff + zsize) as usize])
                .map_err(|e| e.shifted(zoff))?
                .into_iter()
                .map(|(o, l)| (o + zoff, l))
                .collect()
        }
    };

    let toc_map = as_map(required("toc")?, "toc", at)?;
    let mut kernels = Vec::new();
    for (k, arches) in toc_map {
        let key = key_string(k, "toc", at)?;
        for (a, entry) in as_map(arches, &format!("toc[{key:?}]"), at)? {
            let arch = key_string(a, &format!("toc[{key:?}]"), at)?;
            let where_ = format!("toc[{key:?}][{arch:?}]");
            let e = as_map(entry, &where_, at)?;
            if let Some(t) = get(e, "type") {
                let t = as_string(t, &format!("{where_}.type"), at)?;
                if t != "hsaco" {
                    return Err(err(
                        at,
                        format!("{where_}.type is {t:?}, expected \"hsaco\""),
                    ));
                }
            }
            let ordinal = as_uint(
                get(e, "ordinal").ok_or_else(|| err(at, format!("{where_} has no ordinal")))?,
                "ordinal",
                at,
            )?;
            let Some(&(offset, stored)) = usize::try_from(ordinal).ok().and_then(|o| ranges.get(o))
            else {
                return Err(err(
                    at,
                    format!(
                        "{where_}: ordinal {ordinal} is out of range ({} blobs)",
                        ranges.len()
                    ),
                ));
            };
            let size = match (get(e, "original_size"), scheme) {
                (Some(v), _) => as_uint(v, "original_size", at)?,
                (None, Scheme::None) => stored,
                (None, Scheme::ZstdPerKernel) => {
                    return Err(err(
                        at,
                        format!("{where_} has no original_size (required for zstd-per-kernel)"),
                    ));
                }
            };
            if size > MAX_KERNEL_SIZE {
                return Err(err(
                    at,
                    format!(
                        "{where_}: original_size {size} is above the {MAX_KERNEL_SIZE}-byte bound"
                    ),
                ));
            }
            let mut metadata = BTreeMap::new();
            if let Some(m) = get(e, "metadata").and_then(Value::as_map) {
                for (mk, mv) in m {
                    if let (Some(mk), Some(mv)) = (mk.as_str(), mv.as_str()) {
                        metadata.insert(mk.to_string(), mv.to_string());
                    }
                }
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
    }
    kernels.sort_by(|a, b| a.key.cmp(&b.key).then(a.arch.cmp(&b.arch)));
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

/// The frame list of a zstd blob: `(offset within blob, length)` per ordinal.
fn frame_index(blob: &[u8]) -> FormatResult<Vec<(u64, u64)>> {
    let n = u64::from(u32::from_le_bytes([blob[0], blob[1], blob[2], blob[3]]));
    if n > MAX_KERNELS {
        return Err(err(
            0,
            format!("{n} frames is above the {MAX_KERNELS} bound"),
        ));
    }
    let mut pos = 4u64;
    let mut out = Vec::with_capacity(n.min(blob.len() as u64 / 4) as usize);
    for i in 0..n {
        let p = pos as usize;
        let Some(len) = blob.get(p..p + 4) else {
            return Err(err(
                pos,
                format!("frame {i}: length runs past the zstd blob"),
            ));
        };
        let len = u64::from(u32::from_le_bytes([len[0], len[1], len[2], len[3]]));
        pos += 4;
        if pos + len > blob.len() as u64 {
            return Err(err(
                pos - 4,
                format!("frame {i}: {len} bytes run past the zstd blob"),
            ));
        }
        out.push((pos, len));
        pos += len;
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

impl Archive {
    /// Open and index an archive (mmap; reads the header, TOC and frame lengths only).
    pub fn open(path: &Path) -> Result<Archive> {
        let map = crate::scan::map_file(path).map_err(|e| Error::io(path, e))?;
        let bytes = match map {
            Some(m) => Bytes::Map(m),
            None => Bytes::Owned(Vec::new()),
        };
        let index = parse_index(&bytes).map_err(|e| Error::format(path, e))?;
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
        self.index
            .kernels
            .binary_search_by(|k| k.key.as_str().cmp(key).then(k.arch.as_str().cmp(arch)))
            .ok()
            .map(|i| &self.index.kernels[i])
    }

    /// The stored bytes of a kernel (a zstd frame, or the raw kernel).
    pub fn stored(&self, e: &KernelEntry) -> &[u8] {
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

    /// Check everything: ranges, ordinals, arch lists, and that every frame decodes to
    /// its size. Returns the faults found (empty when sound).
    pub fn verify(&self) -> Vec<String> {
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
            if let Err(e) = self.kernel(k).map(|b| b.len() as u64).and_then(|len| {
                if len == k.size {
                    Ok(())
                } else {
                    Err(Error::Invalid(format!(
                        "is {len} bytes, TOC says {}",
                        k.size
                    )))
                }
            }) {
                faults.push(format!("{} @ {}: {e}", k.key, k.arch));
            }
        }
        faults
    }
}

/// Decode one zstd frame into exactly `size` bytes (no more are ever produced).
pub fn decompress_frame(frame: &[u8], size: u64) -> FormatResult<Vec<u8>> {
    let mut out = Vec::with_capacity(
        (size as usize)
            .min(frame.len().saturating_mul(16))
            .min(256 << 20),
    );
    let mut dec = zstd::stream::read::Decoder::with_buffer(frame)
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
            let mut c = zstd::bulk::Compressor::new(level)?;
            c.include_contentsize(true)?;
            c.include_checksum(false)?;
            c.compress(data)
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
    pub fn add(&self, key: &str, arch: &str, data: &[u8]) -> Result<()> {
        self.add_with_metadata(key, arch, data, BTreeMap::new())
    }

    /// Add a kernel with string metadata (e.g. `target`, the full entry ID).
    pub fn add_with_metadata(
        &self,
        key: &str,
        arch: &str,
        data: &[u8],
        metadata: BTreeMap<String, String>,
    ) -> Result<()> {
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
        Ok(())
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
        check(&b, "not a MessagePack map");
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
            .contains("unsigned")
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
        assert!(e(serde_json::json!({"group_name": 3, "gfx_arch_family": "f", "gfx_arches": [], "toc": {}})).contains("not a string"));
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
