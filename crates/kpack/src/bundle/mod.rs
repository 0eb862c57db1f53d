//! Clang offload bundles: the device code inside `.hip_fatbin`.
//!
//! * [`parse_table`] reads an uncompressed `__CLANG_OFFLOAD_BUNDLE__` header and entry
//!   table from any sequential reader (a slice, or a streaming decompressor).
//! * [`ccob`] reads compressed `CCOB` v1/v2/v3 headers (zstd and zlib).
//! * [`walk_section`] walks a whole `.hip_fatbin` (one bundle per translation unit,
//!   zero padded) and numbers the bundles: the bundle index is the TU index `k` of
//!   TOC keys `path#k`.
//!
//! Listing never decompresses device payloads: for a CCOB only the prefix holding the
//! entry table is stream-decoded. [`BundleInfo::each_code_object`] hands the code
//! objects on one at a time (a CCOB decoded as a stream, never whole);
//! [`BundleInfo::uncompressed`] and [`BundleInfo::code_objects`] do the full, bounded
//! decompression when the whole bundle is needed.

pub mod ccob;
mod each;
pub mod target;
mod walk;

use crate::error::{FormatError, FormatResult};
use serde::Serialize;
use std::io::{BufRead, BufReader, Read};

pub use ccob::{CcobHeader, Compression};
pub use each::{CodeObject, FileSection, Input, Release, Wanted};
pub use target::{EntryId, TargetId};
pub use walk::walk_section_in_file;

/// The 24-byte magic of an uncompressed bundle (no NUL).
pub const BUNDLE_MAGIC: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";
/// Upper bound on the entry count of one bundle (real bundles have ≤ ~40).
pub const MAX_ENTRIES: u64 = 4096;
/// Upper bound on one entry ID's length.
pub const MAX_ID_LEN: u64 = 1024;

/// One entry of a bundle's descriptor table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BundleEntry {
    /// The entry ID (target triple), parsed.
    pub id: EntryId,
    /// Payload offset from the start of the (uncompressed) bundle bytes.
    pub offset: u64,
    /// Payload size in bytes: the exact code-object size.
    pub size: u64,
}

/// A parsed descriptor table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleTable {
    /// Entries in descriptor order (host entry included).
    pub entries: Vec<BundleEntry>,
    /// Offset just past the descriptor table.
    pub table_end: u64,
    /// The bundle's logical end: max(offset + size), at least `table_end`.
    pub logical_end: u64,
}

/// Sequential reader that counts how many bytes it has handed out.
struct Counted<R> {
    inner: R,
    pos: u64,
}

impl<R: Read> Counted<R> {
    fn exact(&mut self, buf: &mut [u8], what: &'static str) -> FormatResult<()> {
        let at = self.pos;
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                FormatError::new(at, format!("truncated: {what} runs past the end"))
            }
            _ => FormatError::new(at, format!("cannot decode {what}: {e}")),
        })?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn u64(&mut self, what: &'static str) -> FormatResult<u64> {
        let mut b = [0u8; 8];
        self.exact(&mut b, what)?;
        Ok(u64::from_le_bytes(b))
    }
}

/// Parse an uncompressed bundle's header and descriptor table from `reader`, which
/// must start at the magic. `available` is the number of bytes the bundle may span
/// (entries whose `offset + size` pass it are rejected). Offsets in the result are
/// relative to the magic. Reads only the table, never the payloads.
pub fn parse_table<R: Read>(reader: R, available: u64) -> FormatResult<BundleTable> {
    let mut r = Counted {
        inner: reader,
        pos: 0,
    };
    let mut magic = [0u8; 24];
    r.exact(&mut magic, "bundle magic")?;
    if &magic != BUNDLE_MAGIC {
        return Err(FormatError::new(0, "not an offload bundle (bad magic)"));
    }
    let count = r.u64("entry count")?;
    // Each descriptor takes at least 24 bytes.
    if count > MAX_ENTRIES || count > available.saturating_sub(32) / 24 {
        return Err(FormatError::new(
            24,
            format!("entry count {count} is larger than the bundle can hold"),
        ));
    }
    let mut entries = Vec::with_capacity(count as usize);
    for i in 0..count {
        let at = r.pos;
        let offset = r.u64("entry offset")?;
        let size = r.u64("entry size")?;
        let id_len = r.u64("entry ID length")?;
        if id_len > MAX_ID_LEN {
            return Err(FormatError::new(
                at + 16,
                format!("entry {i}: ID length {id_len} is implausible"),
            ));
        }
        let mut id = vec![0u8; id_len as usize];
        r.exact(&mut id, "entry ID")?;
        let id = String::from_utf8_lossy(&id).into_owned();
        let end = offset.checked_add(size).filter(|&e| e <= available);
        if end.is_none() {
            return Err(FormatError::new(
                at,
                format!(
                    "entry {i} ({id}): offset {offset:#x} + size {size:#x} passes the end of the bundle ({available:#x} bytes)"
                ),
            ));
        }
        entries.push(BundleEntry {
            id: EntryId::parse(&id),
            offset,
            size,
        });
    }
    let table_end = r.pos;
    let logical_end = entries
        .iter()
        .map(|e| e.offset + e.size)
        .fold(table_end, u64::max);
    Ok(BundleTable {
        entries,
        table_end,
        logical_end,
    })
}

/// One bundle (one translation unit) found in a `.hip_fatbin` section or a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BundleInfo {
    /// Position in the section: the TU index `k` of keys `path#k`.
    pub index: usize,
    /// Offset of the bundle within the section (or file).
    pub offset: u64,
    /// Bytes the bundle occupies there (compressed size for a CCOB).
    pub stored_size: u64,
    /// `none`, `zstd` or `zlib`.
    pub compression: Compression,
    /// CCOB header version, for compressed bundles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ccob_version: Option<u16>,
    /// Size of the uncompressed bundle bytes.
    pub uncompressed_size: u64,
    /// Entries of every bundle in the uncompressed bytes (usually one), host entries
    /// included; offsets are relative to the start of the uncompressed bytes.
    pub entries: Vec<BundleEntry>,
}

impl BundleInfo {
    /// Device entries only (host entries dropped), in descriptor order.
    pub fn device_entries(&self) -> impl Iterator<Item = &BundleEntry> {
        self.entries.iter().filter(|e| !e.id.is_host())
    }

    /// Compressed bytes attributed to an entry: its share of the stored size in
    /// proportion to its uncompressed size (exact for uncompressed bundles).
    pub fn apportioned_size(&self, entry: &BundleEntry) -> u64 {
        if self.compression == Compression::None || self.uncompressed_size == 0 {
            return entry.size;
        }
        ((entry.size as u128 * self.stored_size as u128) / self.uncompressed_size as u128) as u64
    }

    /// The uncompressed bundle bytes: borrowed for plain bundles, decompressed (bounded
    /// by the declared size and `limit`) for CCOB. `section` is the bytes the walk ran on.
    pub fn uncompressed<'a>(&self, section: &'a [u8], limit: u64) -> FormatResult<BundleBytes<'a>> {
        let stored = slice(section, self.offset, self.stored_size)?;
        if self.compression == Compression::None {
            return Ok(BundleBytes::Stored(stored));
        }
        let header = ccob::parse_header(stored).map_err(|e| e.shifted(self.offset))?;
        ccob::decompress(stored, &header, limit)
            .map(BundleBytes::Decoded)
            .map_err(|e| e.shifted(self.offset))
    }

    /// The device code objects of this bundle, as `(entry, bytes)` in descriptor order.
    pub fn code_objects<'s>(
        &'s self,
        uncompressed: &'s [u8],
    ) -> FormatResult<Vec<(&'s BundleEntry, &'s [u8])>> {
        self.device_entries()
            .map(|e| Ok((e, slice(uncompressed, e.offset, e.size)?)))
            .collect()
    }
}

/// A bundle's uncompressed bytes: in the section when stored plainly, decoded otherwise.
#[derive(Debug)]
pub enum BundleBytes<'a> {
    /// Stored uncompressed: the section's bytes.
    Stored(&'a [u8]),
    /// A CCOB, decompressed.
    Decoded(ccob::Decoded),
}

impl std::ops::Deref for BundleBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            BundleBytes::Stored(s) => s,
            BundleBytes::Decoded(d) => d,
        }
    }
}

fn slice(data: &[u8], offset: u64, len: u64) -> FormatResult<&[u8]> {
    let start = usize::try_from(offset).ok();
    let end = offset
        .checked_add(len)
        .and_then(|e| usize::try_from(e).ok());
    match (start, end) {
        (Some(s), Some(e)) if e <= data.len() => Ok(&data[s..e]),
        _ => Err(FormatError::new(
            offset,
            format!("range of {len:#x} bytes passes the end of the data"),
        )),
    }
}

/// Read every bundle table packed in an uncompressed byte stream of `total` bytes
/// (one bundle, or rarely several back to back, zero padded). Reads only tables;
/// payload bytes between them are skipped without being kept.
pub(crate) fn tables_in_stream<R: Read>(reader: R, total: u64) -> FormatResult<Vec<BundleEntry>> {
    let mut r = BufReader::with_capacity(16 * 1024, reader);
    let mut pos = 0u64;
    let mut entries = Vec::new();
    loop {
        // Skip zero padding.
        loop {
            let buf = r
                .fill_buf()
                .map_err(|e| FormatError::new(pos, format!("cannot decode: {e}")))?;
            if buf.is_empty() {
                if entries.is_empty() {
                    return Err(FormatError::new(pos, "no offload bundle in the data"));
                }
                return Ok(entries);
            }
            let zeros = buf.iter().take_while(|&&b| b == 0).count();
            let done = zeros < buf.len();
            r.consume(zeros);
            pos += zeros as u64;
            if done {
                break;
            }
        }
        let start = pos;
        let mut counted = (&mut r).take(total - start);
        let table = parse_table(&mut counted, total - start).map_err(|e| e.shifted(start))?;
        entries.extend(table.entries.into_iter().map(|mut e| {
            e.offset += start;
            e
        }));
        pos = start + table.table_end;
        if start + table.logical_end == total {
            // The table accounts for every byte: nothing can follow, and the payloads
            // need not be decoded (this is what keeps listing cheap).
            return Ok(entries);
        }
        // Skip this bundle's payloads to look for another bundle behind them.
        let skip = table.logical_end - table.table_end;
        let copied = std::io::copy(&mut (&mut r).take(skip), &mut std::io::sink())
            .map_err(|e| FormatError::new(pos, format!("cannot decode payload: {e}")))?;
        if copied != skip {
            return Err(FormatError::new(
                pos,
                "truncated: payloads run past the end",
            ));
        }
        pos += skip;
    }
}

/// Walk a `.hip_fatbin` section (or a standalone bundle file): every bundle, in order,
/// numbered from 0. Zero padding between bundles is skipped; anything else that is not
/// a bundle is an error naming its offset.
pub fn walk_section(data: &[u8]) -> FormatResult<Vec<BundleInfo>> {
    walk_section_releasing(data, &|_, _| {})
}

/// [`walk_section`] of a file map, handing each bundle's range of `data` (offset,
/// length) to `release` once read: a section of many bundles keeps one bundle's
/// pages resident at a time (`fsutil::release_range`).
pub fn walk_section_releasing(
    data: &[u8],
    release: &dyn Fn(usize, usize),
) -> FormatResult<Vec<BundleInfo>> {
    walk::walk(&walk::Slice(data), release)
}

/// The bundle (plain or CCOB) at the start of `rest`, numbered `index`, found at
/// `pos` of the data (offsets and errors are given there). Its `stored_size` is the
/// bytes it occupies, whatever follows it.
pub fn read_one(rest: &[u8], index: usize, pos: u64) -> FormatResult<BundleInfo> {
    // Read at 0 of `rest`: what is named there is at `pos`.
    let info = walk::read_one(&walk::Slice(rest), index, 0).map_err(|e| e.shifted(pos))?;
    Ok(BundleInfo {
        offset: pos,
        ..info
    })
}

/// Whether `data` starts like a bundle (plain or compressed).
pub fn looks_like_bundle(data: &[u8]) -> bool {
    data.starts_with(BUNDLE_MAGIC) || data.starts_with(ccob::CCOB_MAGIC)
}

/// Build an uncompressed bundle from `(entry ID, payload)` pairs, payloads aligned
/// to `align` bytes from the bundle start as clang does (`-bundle-align`, 4096 for HIP).
pub fn write_plain(entries: &[(&str, &[u8])], align: usize) -> Vec<u8> {
    let table_len: usize = 32 + entries.iter().map(|(id, _)| 24 + id.len()).sum::<usize>();
    let mut offsets = Vec::with_capacity(entries.len());
    let mut pos = table_len;
    for (_, p) in entries {
        pos = pos.next_multiple_of(align.max(1));
        offsets.push(pos);
        pos += p.len();
    }
    let mut out = Vec::with_capacity(pos);
    out.extend_from_slice(BUNDLE_MAGIC);
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for ((id, p), off) in entries.iter().zip(&offsets) {
        out.extend_from_slice(&(*off as u64).to_le_bytes());
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
        out.extend_from_slice(&(id.len() as u64).to_le_bytes());
        out.extend_from_slice(id.as_bytes());
    }
    for ((_, p), off) in entries.iter().zip(&offsets) {
        out.resize(*off, 0);
        out.extend_from_slice(p);
    }
    out
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Builders for synthetic bundles used by unit tests across the crate.
    pub use super::write_plain as plain_bundle;
}

#[cfg(test)]
mod tests {
    use super::testutil::plain_bundle;
    use super::*;

    const HOST: &str = "host-x86_64-unknown-linux-gnu-";
    const G900: &str = "hipv4-amdgcn-amd-amdhsa--gfx900";
    const G90A: &str = "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+";

    #[test]
    fn plain_bundle_lists_entries_and_extracts_exact_bytes() {
        let b = plain_bundle(&[(HOST, b""), (G900, b"AAAA"), (G90A, b"BBBBBB")], 4096);
        let bundles = walk_section(&b).unwrap();
        assert_eq!(bundles.len(), 1);
        let bi = &bundles[0];
        assert_eq!(bi.entries.len(), 3);
        assert_eq!(bi.device_entries().count(), 2);
        assert_eq!(bi.stored_size, b.len() as u64);
        let un = bi.uncompressed(&b, u64::MAX).unwrap();
        let cos = bi.code_objects(&un).unwrap();
        assert_eq!(cos[0].0.id.arch().unwrap(), "gfx900");
        assert_eq!(cos[0].1, b"AAAA");
        assert_eq!(cos[1].0.id.arch().unwrap(), "gfx90a:xnack+");
        assert_eq!(cos[1].1, b"BBBBBB");
    }

    #[test]
    fn several_padded_bundles_are_numbered_in_order() {
        let mut sec = plain_bundle(&[(HOST, b""), (G900, b"one")], 64);
        sec.resize(4096, 0);
        sec.extend(plain_bundle(&[(HOST, b""), (G900, b"two")], 64));
        sec.resize(8192 + 10, 0);
        let bundles = walk_section(&sec).unwrap();
        assert_eq!(bundles.len(), 2);
        assert_eq!(bundles[1].index, 1);
        assert_eq!(bundles[1].offset, 4096);
    }

    #[test]
    fn magic_inside_a_payload_does_not_split_the_bundle() {
        let mut payload = b"xx".to_vec();
        payload.extend_from_slice(BUNDLE_MAGIC);
        payload.extend_from_slice(b"CCOByy");
        let b = plain_bundle(&[(HOST, b""), (G900, &payload)], 8);
        let bundles = walk_section(&b).unwrap();
        assert_eq!(bundles.len(), 1);
        assert_eq!(bundles[0].entries[1].size, payload.len() as u64);
    }

    #[test]
    fn entry_past_the_end_is_rejected_with_offset() {
        let mut b = plain_bundle(&[(G900, b"AAAA")], 8);
        let len = b.len();
        b.truncate(len - 2);
        let err = walk_section(&b).unwrap_err();
        assert!(err.what.contains("passes the end"), "{err}");
        assert_eq!(err.offset, 32);
    }

    #[test]
    fn truncations_at_every_byte_never_panic() {
        let b = plain_bundle(&[(HOST, b""), (G900, b"AAAA"), (G90A, b"BBBB")], 16);
        for n in 0..b.len() {
            let _ = walk_section(&b[..n]);
        }
        assert!(walk_section(&b[..40]).is_err());
    }

    #[test]
    fn garbage_and_empty_inputs_are_errors() {
        assert!(walk_section(&[]).is_err());
        assert!(walk_section(&[0u8; 100]).is_err());
        let err = walk_section(b"\0\0\0garbage").unwrap_err();
        assert_eq!(err.offset, 3);
        let mut b = plain_bundle(&[(G900, b"A")], 8);
        b[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(walk_section(&b).unwrap_err().what.contains("entry count"));
    }

    #[test]
    fn zero_size_host_entry_may_share_an_offset() {
        let mut b = plain_bundle(&[(HOST, b""), (G900, b"AAAA")], 8);
        // Point the host entry at the gfx900 payload offset.
        let g900_off = u64::from_le_bytes(b[32 + 24 + HOST.len()..][..8].try_into().unwrap());
        b[32..40].copy_from_slice(&g900_off.to_le_bytes());
        let bi = walk_section(&b).unwrap();
        assert_eq!(bi[0].entries[0].offset, bi[0].entries[1].offset);
    }
}
