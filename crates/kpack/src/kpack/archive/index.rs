//! Reading an archive's header, TOC and frame list.

use super::super::msgpack;
use super::*;
use crate::error::{FormatError, FormatResult};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::os::unix::fs::FileExt;
pub(crate) fn err(offset: u64, what: impl Into<Cow<'static, str>>) -> FormatError {
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

pub(crate) struct FileAt {
    pub(crate) file: File,
    pub(crate) size: u64,
}

impl ReadAt for FileAt {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
}

pub(crate) fn read_vec(
    src: &(impl ReadAt + ?Sized),
    offset: u64,
    len: u64,
) -> FormatResult<Vec<u8>> {
    let mut v = vec![0u8; len as usize];
    src.read_at(offset, &mut v)
        .map_err(|e| err(offset, format!("cannot read {len} bytes: {e}")))?;
    Ok(v)
}

/// A TOC entry read before the blob ranges are known.
pub(crate) struct PendingEntry {
    key_index: usize,
    arch: Arc<str>,
    ordinal: u64,
    original: Option<u64>,
    metadata: super::TocMetadata,
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
    let (version, toc_offset, file_size) = read_header(src)?;
    let toc_bytes = read_vec(src, toc_offset, file_size - toc_offset)?;
    let at = toc_offset;
    let raw = RawToc::read(&mut msgpack::Reader::new(&toc_bytes, toc_offset), at)?;
    let required = |v: Option<String>, k: &str| v.ok_or_else(|| err(at, format!("TOC has no {k}")));
    let group_name = required(raw.group_name, "group_name")?;
    let gfx_arch_family = required(raw.gfx_arch_family, "gfx_arch_family")?;
    let gfx_arches = raw
        .gfx_arches
        .ok_or_else(|| err(at, "TOC has no gfx_arches"))?;
    if !raw.seen_toc {
        return Err(err(at, "TOC has no toc"));
    }
    let scheme = match raw.scheme_name.as_deref() {
        None | Some("none") => Scheme::None,
        Some("zstd-per-kernel") => Scheme::ZstdPerKernel,
        Some(other) => return Err(err(at, format!("unknown compression_scheme {other:?}"))),
    };
    let ranges = stored_ranges(src, scheme, raw.blobs, raw.zstd_range, toc_offset)?;
    check_key_budget(&raw.pending, &raw.keys, file_size, toc_offset)?;
    let mut kernels = entries(raw.pending, &raw.keys, &ranges, scheme, at)?;
    if !kernels.is_sorted_by(|a, b| (&a.key, &a.arch) <= (&b.key, &b.arch)) {
        kernels.sort_by(|a, b| a.key.cmp(&b.key).then(a.arch.cmp(&b.arch)));
    }
    // The same (key, arch) twice (a MessagePack map may repeat a key): readers
    // disagree on which entry they return, so the archive says two things at once.
    if let Some(w) = kernels
        .windows(2)
        .find(|w| w[0].key == w[1].key && w[0].arch == w[1].arch)
    {
        return Err(err(
            at,
            format!(
                "toc[{:?}][{:?}] appears twice (ordinals {} and {}): readers would not agree \
                 on which kernel it is",
                w[0].key, w[0].arch, w[0].ordinal, w[1].ordinal
            ),
        ));
    }
    mark_aliases(&mut kernels);
    Ok(ArchiveIndex {
        version,
        toc_offset,
        format_version: raw.format_version,
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

/// The 16-byte header: magic, version and a TOC offset inside the file, the TOC
/// bounded. Returns (version, TOC offset, file size).
fn read_header(src: &(impl ReadAt + ?Sized)) -> FormatResult<(u32, u64, u64)> {
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
    Ok((version, toc_offset, file_size))
}

/// Strings a TOC repeats on every entry (targets, metadata), each held once, and
/// each entry's set of metadata pairs.
#[derive(Default)]
struct Interned(BTreeSet<Arc<str>>, super::tocmeta::MetadataSets);

impl Interned {
    /// The shared copy of `s`.
    fn get(&mut self, s: &str) -> Arc<str> {
        crate::intern::shared(&mut self.0, s)
    }
}

/// The TOC's fields as read, before they are checked against each other.
#[derive(Default)]
struct RawToc {
    format_version: Option<u64>,
    group_name: Option<String>,
    gfx_arch_family: Option<String>,
    gfx_arches: Option<Vec<String>>,
    scheme_name: Option<String>,
    blobs: Option<Vec<(u64, u64)>>,
    zstd_range: (Option<u64>, Option<u64>),
    /// (key, arch, ordinal, original_size, metadata), resolved against the ranges
    /// once they are known (the TOC map's key order is free, so `toc` may come
    /// before `blobs`).
    pending: Vec<PendingEntry>,
    /// Each key once, shared by its entries.
    keys: Vec<Arc<str>>,
    /// Each target and metadata string once, shared by the entries.
    strings: Interned,
    seen_toc: bool,
}

impl RawToc {
    /// Read the TOC map (`at`: its offset, for errors).
    fn read(r: &mut msgpack::Reader, at: u64) -> FormatResult<Self> {
        let mut t = RawToc::default();
        for _ in 0..r.map_len("TOC")? {
            let name = r.str("TOC key")?;
            match name {
                "format_version" => t.format_version = Some(r.uint("format_version")?),
                "group_name" => t.group_name = Some(r.str("group_name")?.to_string()),
                "gfx_arch_family" => {
                    t.gfx_arch_family = Some(r.str("gfx_arch_family")?.to_string())
                }
                "gfx_arches" => {
                    let n = r.array_len("gfx_arches")?;
                    let mut v = Vec::with_capacity(n);
                    for _ in 0..n {
                        v.push(r.str("gfx_arches[]")?.to_string());
                    }
                    t.gfx_arches = Some(v);
                }
                "compression_scheme" => {
                    t.scheme_name = Some(r.str("compression_scheme")?.to_string())
                }
                "blobs" => t.blobs = Some(read_blobs(r, at)?),
                "zstd_offset" => t.zstd_range.0 = Some(r.uint("zstd_offset")?),
                "zstd_size" => t.zstd_range.1 = Some(r.uint("zstd_size")?),
                "toc" => {
                    t.seen_toc = true;
                    t.read_toc(r, at)?;
                }
                _ => r.skip()?,
            }
        }
        Ok(t)
    }

    /// The `toc` map: key → arch → entry.
    fn read_toc(&mut self, r: &mut msgpack::Reader, at: u64) -> FormatResult<()> {
        for _ in 0..r.map_len("toc")? {
            let key: Arc<str> = r.str("toc key")?.into();
            let key_index = self.keys.len();
            let n_arch = r
                .map_len("arch map")
                .map_err(|e| e.context(&format!("toc[{key:?}]: ")))?;
            for _ in 0..n_arch {
                let arch = r
                    .str("arch key")
                    .map_err(|e| e.context(&format!("toc[{key:?}]: ")))?;
                let arch = self.strings.get(arch);
                let ctx = |e: FormatError| e.context(&format!("toc[{key:?}][{arch:?}]: "));
                let (ordinal, original, metadata) =
                    read_entry(r, at, &mut self.strings).map_err(ctx)?;
                let ordinal = ordinal.ok_or_else(|| ctx(err(at, "no ordinal")))?;
                self.pending.push(PendingEntry {
                    key_index,
                    arch,
                    ordinal,
                    original,
                    metadata,
                });
            }
            self.keys.push(key);
        }
        Ok(())
    }
}

/// The `blobs` array of scheme `none`: (offset, size) per ordinal, bounded.
fn read_blobs(r: &mut msgpack::Reader, at: u64) -> FormatResult<Vec<(u64, u64)>> {
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
    Ok(v)
}

/// One TOC entry: its ordinal, original size and string metadata (type `hsaco`).
type RawEntry = (Option<u64>, Option<u64>, super::TocMetadata);

/// Read one TOC entry.
fn read_entry(r: &mut msgpack::Reader, at: u64, strings: &mut Interned) -> FormatResult<RawEntry> {
    let (mut ordinal, mut original, mut metadata) = (None, None, BTreeMap::new());
    for _ in 0..r.map_len("entry")? {
        match r.str("entry key")? {
            "type" => {
                let t = r.str("type")?;
                if t != "hsaco" {
                    return Err(err(at, format!("type is {t:?}, expected \"hsaco\"")));
                }
            }
            "ordinal" => ordinal = Some(r.uint("ordinal")?),
            "original_size" => original = Some(r.uint("original_size")?),
            "metadata" if r.peek()? == msgpack::Kind::Map => {
                for _ in 0..r.map_len("metadata")? {
                    let mk = strings.get(r.str("metadata key")?);
                    if r.peek()? == msgpack::Kind::Str {
                        metadata.insert(mk, strings.get(r.str("metadata value")?));
                    } else {
                        r.skip()?;
                    }
                }
            }
            _ => r.skip()?,
        }
    }
    Ok((
        ordinal,
        original,
        super::TocMetadata::shared(metadata, &mut strings.1),
    ))
}

/// Stored ranges per ordinal: the `blobs` of scheme `none`, or the frames of the
/// zstd blob, each inside the blob area (before the TOC).
fn stored_ranges(
    src: &(impl ReadAt + ?Sized),
    scheme: Scheme,
    blobs: Option<Vec<(u64, u64)>>,
    zstd_range: (Option<u64>, Option<u64>),
    toc_offset: u64,
) -> FormatResult<Vec<(u64, u64)>> {
    let at = toc_offset;
    match scheme {
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
            Ok(blobs)
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
            Ok(frame_index(src, zoff, zsize)
                .map_err(|e| e.shifted(zoff))?
                .into_iter()
                .map(|(o, l)| (o + zoff, l))
                .collect())
        }
    }
}

/// Every entry carries its key: a TOC of one huge key under many arches would
/// multiply it (a 1 MB archive took 2 GB). Keys as entries hold them are bounded
/// by what a real TOC of this size can hold (a key under at most a few dozen
/// targets).
fn check_key_budget(
    pending: &[PendingEntry],
    keys: &[Arc<str>],
    file_size: u64,
    toc_offset: u64,
) -> FormatResult<()> {
    let toc_len = file_size.saturating_sub(toc_offset);
    let key_budget = toc_len.saturating_mul(64).max(1 << 20);
    let key_bytes: u64 = pending
        .iter()
        .map(|p| keys.get(p.key_index).map_or(0, |k| k.len() as u64))
        .sum();
    if key_bytes > key_budget {
        return Err(err(
            toc_offset,
            format!(
                "TOC keys add up to {key_bytes} bytes over {} entries, more than a {toc_len}-byte \
                 TOC can describe (a key repeated under thousands of targets?)",
                pending.len()
            ),
        ));
    }
    Ok(())
}

/// The entries, each resolved against its stored range, its size bounded.
fn entries(
    pending: Vec<PendingEntry>,
    keys: &[Arc<str>],
    ranges: &[(u64, u64)],
    scheme: Scheme,
    at: u64,
) -> FormatResult<Vec<KernelEntry>> {
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
            alias_of: None,
        });
    }
    Ok(kernels)
}

/// The frame list of the zstd blob at `base` (`len` bytes): `(offset within blob,
/// length)` per ordinal. Reads only the count and the 4-byte frame lengths.
pub(crate) fn frame_index(
    src: &(impl ReadAt + ?Sized),
    base: u64,
    len: u64,
) -> FormatResult<Vec<(u64, u64)>> {
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

/// Entries sharing an ordinal are TOC aliases when they have one key and one size and
/// one of them (the primary, with the fewest feature flags) is code that runs under
/// every other's target; the others get `alias_of`. Any other sharing is left for
/// [`Archive::verify`](super::Archive::verify) to report.
fn mark_aliases(kernels: &mut [KernelEntry]) {
    let mut by_ordinal: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
    for (i, k) in kernels.iter().enumerate() {
        by_ordinal.entry(k.ordinal).or_default().push(i);
    }
    // More targets per frame than any processor has feature combinations is no alias
    // set (and would make the check below quadratic in a hostile TOC).
    for group in by_ordinal.values().filter(|g| g.len() > 1 && g.len() <= 64) {
        let first = &kernels[group[0]];
        if group
            .iter()
            .any(|&i| kernels[i].key != first.key || kernels[i].size != first.size)
        {
            continue;
        }
        let primary = group
            .iter()
            .copied()
            .filter(|&p| {
                group
                    .iter()
                    .all(|&i| crate::kpack::alias::runs_on(&kernels[p].arch, &kernels[i].arch))
            })
            .min_by_key(|&p| kernels[p].arch.matches(':').count());
        if let Some(p) = primary {
            let of = kernels[p].arch.clone();
            for &i in group.iter().filter(|&&i| i != p) {
                kernels[i].alias_of = Some(of.clone());
            }
        }
    }
}
