//! How a section's bundles are read ([`walk`], [`read_one`]), from its map
//! ([`Slice`]) or, for [`walk_section_in_file`], from its file with positioned
//! reads, never through a map. Read through the map, each bundle's table
//! made the page-cache folio holding it resident (up to 2 MiB on Linux 6.18, see
//! `fsutil::FAULT_SPAN`) until its release, on every scanning thread at once: the
//! largest of what the scan of a large tree held for a moment.

use super::{BUNDLE_MAGIC, BundleInfo, Compression, ccob, parse_table, tables_in_stream};
use crate::error::{FormatError, FormatResult};
use std::borrow::Cow;
use std::fs::File;
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;

/// How much of the file a bundle's table or payload is read at a time.
const PIECE: usize = 16 << 10;

/// [`super::walk_section`] of the `len` bytes at `at` of `file`: the same bundles,
/// the same errors at the same offsets (of the section).
pub fn walk_section_in_file(file: &File, at: u64, len: u64) -> FormatResult<Vec<BundleInfo>> {
    walk(&Section { file, at, len }, &|_, _| {})
}

/// Where a walk reads a section's bytes: its map ([`Slice`]) or its file
/// ([`Section`]). Positions are the section's.
pub(super) trait Source {
    type Reader<'a>: std::io::BufRead
    where
        Self: 'a;
    fn len(&self) -> u64;
    /// `n` bytes at `pos` (inside the section).
    fn head(&self, pos: u64, n: usize) -> FormatResult<Cow<'_, [u8]>>;
    /// The first byte at or after `pos` that is not zero (the end, if none).
    fn past_zeros(&self, pos: u64) -> FormatResult<u64>;
    /// Where `magic` first starts at or after `from`, whole in the section.
    fn find(&self, magic: &[u8], from: u64) -> FormatResult<Option<u64>>;
    /// The bytes from `from` to `to`.
    fn reader(&self, from: u64, to: u64) -> Self::Reader<'_>;
}

/// Every bundle of the section `s`, handing each one's range to `release` once read.
pub(super) fn walk<S: Source>(
    s: &S,
    release: &dyn Fn(usize, usize),
) -> FormatResult<Vec<BundleInfo>> {
    let mut bundles = Vec::new();
    let mut pos = 0u64;
    loop {
        pos = s.past_zeros(pos)?;
        if pos >= s.len() {
            break;
        }
        let info = read_one(s, bundles.len(), pos)?;
        let stored = info.stored_size.max(1);
        release(pos as usize, stored as usize);
        pos += stored;
        bundles.push(info);
    }
    if bundles.is_empty() {
        return Err(FormatError::new(
            0,
            "no offload bundle found (empty or all zero)",
        ));
    }
    Ok(bundles)
}

/// The bundle (plain or CCOB) at `pos` of the section `s`, numbered `index`
/// (offsets and errors are given in the section). Its `stored_size` is the bytes it
/// occupies, whatever follows it.
pub(super) fn read_one<S: Source>(s: &S, index: usize, pos: u64) -> FormatResult<BundleInfo> {
    let ctx = |e: FormatError| e.shifted(pos).context(&format!("bundle {index}: "));
    let rest = s.len() - pos;
    let head = s.head(pos, rest.min(ccob::HEADER_MAX as u64) as usize)?;
    if head.starts_with(BUNDLE_MAGIC) {
        let table = parse_table(s.reader(pos, s.len()), rest).map_err(ctx)?;
        return Ok(BundleInfo {
            index,
            offset: pos,
            stored_size: table.logical_end,
            compression: Compression::None,
            ccob_version: None,
            uncompressed_size: table.logical_end,
            entries: table.entries,
        });
    }
    if !head.starts_with(ccob::CCOB_MAGIC) {
        return Err(FormatError::new(
            pos,
            format!(
                "unexpected bytes {:02x?} where a bundle or zero padding should be",
                &head[..head.len().min(4)]
            ),
        ));
    }
    let header = ccob::parse_header_of(&head, rest).map_err(ctx)?;
    // v1 has no size: up to the next CCOB magic, as `CcobHeader::stored_size` finds.
    let stored = match header.total_size {
        Some(t) => t,
        None => s
            .find(ccob::CCOB_MAGIC, pos + header.header_len as u64)?
            .map_or(rest, |at| at - pos),
    };
    // Through the thread's decompression context (its window is allocated once per
    // thread, not once per bundle read).
    let payload = s.reader(pos + header.header_len as u64, pos + stored);
    let want = header.uncompressed_size;
    let entries = ccob::with_decoder(header.method, payload, |d| {
        tables_in_stream(d.take(want), want)
    })
    .map_err(|e| ctx(e.shifted(header.header_len as u64)).context("compressed payload: "))?;
    Ok(BundleInfo {
        index,
        offset: pos,
        stored_size: stored,
        compression: header.method,
        ccob_version: Some(header.version),
        uncompressed_size: header.uncompressed_size,
        entries,
    })
}

/// A section in memory (a map's bytes).
pub(super) struct Slice<'a>(pub(super) &'a [u8]);

impl Source for Slice<'_> {
    type Reader<'a>
        = &'a [u8]
    where
        Self: 'a;

    fn len(&self) -> u64 {
        self.0.len() as u64
    }

    fn head(&self, pos: u64, n: usize) -> FormatResult<Cow<'_, [u8]>> {
        Ok(Cow::Borrowed(&self.0[pos as usize..][..n]))
    }

    fn past_zeros(&self, pos: u64) -> FormatResult<u64> {
        let rest = &self.0[pos as usize..];
        Ok(pos + rest.iter().position(|&b| b != 0).unwrap_or(rest.len()) as u64)
    }

    fn find(&self, magic: &[u8], from: u64) -> FormatResult<Option<u64>> {
        let found = memchr::memmem::find(&self.0[from as usize..], magic);
        Ok(found.map(|i| from + i as u64))
    }

    fn reader(&self, from: u64, to: u64) -> &[u8] {
        &self.0[from as usize..to as usize]
    }
}

/// The `len` bytes at `at` of `file`.
struct Section<'a> {
    file: &'a File,
    at: u64,
    len: u64,
}

impl Source for Section<'_> {
    type Reader<'a>
        = BufReader<Range<'a>>
    where
        Self: 'a;

    fn len(&self) -> u64 {
        self.len
    }

    fn head(&self, pos: u64, n: usize) -> FormatResult<Cow<'_, [u8]>> {
        let mut buf = vec![0u8; n];
        (self.file.read_exact_at(&mut buf, self.at + pos)).map_err(|e| unreadable(pos, e))?;
        Ok(Cow::Owned(buf))
    }

    fn past_zeros(&self, mut pos: u64) -> FormatResult<u64> {
        let mut buf = [0u8; 4096];
        while pos < self.len {
            let n = (self.len - pos).min(buf.len() as u64) as usize;
            (self.file.read_exact_at(&mut buf[..n], self.at + pos))
                .map_err(|e| unreadable(pos, e))?;
            match buf[..n].iter().position(|&b| b != 0) {
                Some(i) => return Ok(pos + i as u64),
                None => pos += n as u64,
            }
        }
        Ok(self.len)
    }

    fn find(&self, magic: &[u8], from: u64) -> FormatResult<Option<u64>> {
        let finder = memchr::memmem::Finder::new(magic);
        let mut buf = vec![0u8; PIECE + magic.len() - 1];
        let mut pos = from;
        while pos < self.len {
            let n = (self.len - pos).min(buf.len() as u64) as usize;
            (self.file.read_exact_at(&mut buf[..n], self.at + pos))
                .map_err(|e| unreadable(pos, e))?;
            if let Some(i) = finder.find(&buf[..n]) {
                return Ok(Some(pos + i as u64));
            }
            // The last bytes again: a magic across the seam starts in them.
            if n < buf.len() {
                break;
            }
            pos += PIECE as u64;
        }
        Ok(None)
    }

    fn reader(&self, from: u64, to: u64) -> BufReader<Range<'_>> {
        BufReader::with_capacity(
            PIECE,
            Range {
                file: self.file,
                pos: self.at + from,
                end: self.at + to.max(from),
            },
        )
    }
}

/// A range of a file read with positioned reads.
pub(super) struct Range<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for Range<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.end - self.pos).min(buf.len() as u64) as usize;
        let n = self.file.read_at(&mut buf[..n], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

fn unreadable(pos: u64, e: std::io::Error) -> FormatError {
    FormatError::new(pos, format!("cannot be read: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// The section of `data` at 100 of a file: whatever `walk_section` makes of it.
    fn both(data: &[u8]) -> (String, String) {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&[7u8; 100]).unwrap();
        f.write_all(data).unwrap();
        f.write_all(&[9u8; 50]).unwrap();
        let text = |r: FormatResult<Vec<BundleInfo>>| format!("{r:?}");
        (
            text(super::super::walk_section(data)),
            text(walk_section_in_file(&f, 100, data.len() as u64)),
        )
    }

    fn fixture(name: &str) -> Vec<u8> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/bin");
        std::fs::read(p.join(name)).unwrap()
    }

    #[test]
    fn a_section_read_from_its_file_is_the_same_as_from_memory() {
        let plain = fixture("kernels.hipfb");
        let mut cases: Vec<Vec<u8>> = vec![plain.clone(), Vec::new(), vec![0; 5000]];
        // Padding, two bundles, a stray byte after them.
        let mut two = vec![0u8; 3000];
        two.extend_from_slice(&plain);
        two.resize(two.len() + 4096, 0);
        two.extend_from_slice(&plain);
        cases.push(two.clone());
        two.push(0x42);
        cases.push(two);
        // Compressed bundles of every version (the fixtures' and ones made here).
        for v in [1u16, 2, 3] {
            let c = ccob::encode(&plain, v, Compression::Zstd);
            let mut d = c.clone();
            d.extend_from_slice(&c);
            cases.push(d);
        }
        // Every truncation of a small bundle and of a compressed one.
        let small = cases[3].clone();
        for cut in (0..small.len()).step_by(97) {
            cases.push(small[..cut].to_vec());
        }
        let c = ccob::encode(&plain, 2, Compression::Zlib);
        for cut in (0..c.len()).step_by(53) {
            cases.push(c[..cut].to_vec());
        }
        for (i, data) in cases.iter().enumerate() {
            let (mem, file) = both(data);
            assert_eq!(mem, file, "case {i}");
        }
    }
}
