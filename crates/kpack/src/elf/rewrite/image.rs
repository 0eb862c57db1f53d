//! The rewritten image without a copy of the input: the input's bytes before and
//! after the removed pages, the edited spans over them, then the bytes appended
//! (headers, marker, moved sections). A host part of hundreds of MB costs the edits
//! and the appended bytes, not its size: [`Image::write_to`] streams it out, and
//! [`Image::to_vec`] builds the bytes for a preview.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::ops::Range;

/// How many input bytes [`Image::write_to`] copies before it reports them read (and
/// the caller releases their pages): one folio, as the check after it compares.
pub const COPY_CHUNK: usize = crate::fsutil::FAULT_SPAN;

/// Visits consecutive pieces of output, each with the input range it was copied
/// from unedited (`None` for edited or appended bytes).
type Visit<'v> = dyn FnMut(&[u8], Option<Range<usize>>) -> io::Result<()> + 'v;

/// An output image over `input` with `cut` removed.
pub struct Image<'a> {
    input: &'a [u8],
    /// Where the removed bytes began (output and input offsets agree before it).
    cut_at: usize,
    /// How many bytes were removed there.
    removed: usize,
    /// The bytes before this output offset come from the input (or `spans`).
    base_len: usize,
    /// Edited copies of base bytes, keyed by their output offset; never overlapping.
    spans: BTreeMap<usize, Vec<u8>>,
    /// The bytes after `base_len`.
    tail: Vec<u8>,
}

impl<'a> Image<'a> {
    /// `input` without the bytes of `cut`.
    pub fn new(input: &'a [u8], cut: Range<usize>) -> Self {
        let removed = cut.end.saturating_sub(cut.start);
        Image {
            input,
            cut_at: cut.start,
            removed,
            base_len: input.len() - removed,
            spans: BTreeMap::new(),
            tail: Vec::new(),
        }
    }

    /// The output's length.
    pub fn len(&self) -> usize {
        self.base_len + self.tail.len()
    }

    /// Whether the output is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Append bytes.
    pub fn extend_from_slice(&mut self, b: &[u8]) {
        self.tail.extend_from_slice(b);
    }

    /// Grow to `len` bytes with zeros (never shrinks).
    pub fn grow_to(&mut self, len: usize) {
        if len > self.len() {
            self.tail.resize(len - self.base_len, 0);
        }
    }

    /// The input bytes behind output range `r` of the base (`r` inside it).
    fn input_parts(&self, r: Range<usize>) -> [&'a [u8]; 2] {
        let inp = self.input;
        let at = self.cut_at;
        let shift = |o: usize| if o < at { o } else { o + self.removed };
        if r.end <= at || r.start >= at {
            [&inp[shift(r.start)..shift(r.end - 1) + 1], &[]]
        } else {
            [
                &inp[r.start..at],
                &inp[at + self.removed..r.end + self.removed],
            ]
        }
    }

    /// Output bytes `r` (inside the image), edits applied.
    pub fn read(&self, r: Range<usize>) -> Vec<u8> {
        let mut v = Vec::with_capacity(r.len());
        self.for_each_piece(r, &mut |p, _| {
            v.extend_from_slice(p);
            Ok(())
        })
        .unwrap_or_default();
        v
    }

    /// Visit output range `r` as consecutive pieces, each with whether it came from
    /// the input unedited.
    fn for_each_piece(&self, r: Range<usize>, f: &mut Visit<'_>) -> io::Result<()> {
        let mut at = r.start;
        let base_end = r.end.min(self.base_len);
        // The span that may hold `at`, then every span that starts before the end.
        let first = self.span_before(at);
        let spans = if at < base_end {
            self.spans.range(first..base_end)
        } else {
            self.spans.range(0..0)
        };
        for (&s, span) in spans {
            let e = s + span.len();
            if e <= at {
                continue;
            }
            if s > at {
                self.input_pieces(at..s, f)?;
            }
            let (lo, hi) = (at.max(s), e.min(base_end));
            f(&span[lo - s..hi - s], None)?;
            at = hi;
        }
        if at < base_end {
            self.input_pieces(at..base_end, f)?;
            at = base_end;
        }
        if r.end > self.base_len {
            let from = at.max(self.base_len) - self.base_len;
            f(&self.tail[from..r.end - self.base_len], None)?;
        }
        Ok(())
    }

    /// The start of the last span starting at or before `at` (`at` when none does).
    fn span_before(&self, at: usize) -> usize {
        self.spans.range(..=at).next_back().map_or(at, |(&s, _)| s)
    }

    /// Unedited input bytes behind output range `r`, in pieces of at most
    /// [`COPY_CHUNK`], each with its input range.
    fn input_pieces(&self, r: Range<usize>, f: &mut Visit<'_>) -> io::Result<()> {
        for part in self.input_parts(r) {
            if part.is_empty() {
                continue;
            }
            let off = part.as_ptr() as usize - self.input.as_ptr() as usize;
            for (i, c) in part.chunks(COPY_CHUNK).enumerate() {
                let o = off + i * COPY_CHUNK;
                f(c, Some(o..o + c.len()))?;
            }
        }
        Ok(())
    }

    /// Output bytes `r` to change: a contiguous copy is made of the base bytes it
    /// covers (merged with earlier edits), or the appended bytes are handed out.
    pub fn edit(&mut self, r: Range<usize>) -> &mut [u8] {
        if r.is_empty() {
            // Nothing to change: an empty span kept at `r.start` would shadow the
            // next edit there.
            return &mut [];
        }
        if r.start >= self.base_len {
            let b = self.base_len;
            return &mut self.tail[r.start - b..r.end - b];
        }
        if r.end > self.base_len {
            // Across the end of the base: what of the base it covers becomes appended
            // bytes, so that the range is one slice.
            let moved = self.read(r.start..self.base_len);
            self.spans.retain(|&s, _| s < r.start);
            if let Some((&s, span)) = self.spans.iter_mut().next_back()
                && s + span.len() > r.start
            {
                span.truncate(r.start - s);
            }
            let mut tail = moved;
            tail.append(&mut self.tail);
            self.tail = tail;
            self.base_len = r.start;
            return &mut self.tail[..r.len()];
        }
        // The spans it touches, merged into one.
        let touching: Vec<usize> = self
            .spans
            .range(self.span_before(r.start)..r.end)
            .filter(|(s, span)| *s + span.len() > r.start || **s == r.start)
            .map(|(&s, _)| s)
            .collect();
        let lo = touching.first().map_or(r.start, |&s| s.min(r.start));
        let hi = touching
            .iter()
            .map(|s| s + self.spans[s].len())
            .max()
            .map_or(r.end, |e| e.max(r.end));
        let merged = self.read(lo..hi);
        for s in &touching {
            self.spans.remove(s);
        }
        let span = self.spans.entry(lo).or_insert(merged);
        &mut span[r.start - lo..r.end - lo]
    }

    /// Write `v` little-endian at output offset `o`.
    pub fn put(&mut self, o: usize, v: &[u8]) {
        self.edit(o..o + v.len()).copy_from_slice(v);
    }

    /// The whole output.
    pub fn to_vec(&self) -> Vec<u8> {
        self.read(0..self.len())
    }

    /// [`Image::write_to`], with the unedited input bytes read from `file` (the
    /// input this image is over) with positioned reads of `fsutil::READ_PIECE` bytes, not
    /// through the slice: nothing of them is mapped (through a map, Linux 6.18 makes
    /// each 2 MiB folio read resident). A file shorter than the input is an error.
    pub fn write_reading(
        &self,
        w: &mut dyn Write,
        file: &std::fs::File,
        read: &dyn Fn(Range<usize>),
    ) -> io::Result<()> {
        let mut buf = Vec::new();
        self.for_each_piece(0..self.len(), &mut |p, from| {
            let Some(r) = from else {
                return w.write_all(p);
            };
            let mut at = r.start;
            while at < r.end {
                let n = (r.end - at).min(crate::fsutil::READ_PIECE);
                buf.resize(n, 0);
                std::os::unix::fs::FileExt::read_exact_at(file, &mut buf, at as u64)?;
                w.write_all(&buf)?;
                at += n;
            }
            read(r);
            Ok(())
        })
    }

    /// Stream the output to `w`. `read` is told each input range after its bytes
    /// were written, so that the caller can release its pages.
    pub fn write_to(&self, w: &mut dyn Write, read: &dyn Fn(Range<usize>)) -> io::Result<()> {
        self.for_each_piece(0..self.len(), &mut |p, from| {
            w.write_all(p)?;
            if let Some(r) = from {
                read(r);
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same edits on a plain vector.
    fn model(input: &[u8], cut: Range<usize>) -> Vec<u8> {
        let mut v = input[..cut.start].to_vec();
        v.extend_from_slice(&input[cut.end..]);
        v
    }

    #[test]
    fn edits_reads_and_streams_agree_with_a_plain_copy() {
        let input: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let cut = 12_288..20_480;
        let mut img = Image::new(&input, cut.clone());
        let mut want = model(&input, cut);
        assert_eq!(img.to_vec(), want);
        // Edits before, across and after the cut, overlapping ones merged, then
        // appended bytes and an edit across the end of the base.
        let edits: [(usize, &[u8]); 7] = [
            (10, b"abcd"),
            (12_280, b"0123456789abcdef"),
            (12, b"XYZW"),
            (12_270, b"wide edit over two spans"),
            (30_000, b"q"),
            (41_800, b"near the end"),
            (41_805, b"across the end of the base"),
        ];
        img.extend_from_slice(b"tail!");
        want.extend_from_slice(b"tail!");
        for (o, b) in edits {
            if o + b.len() > want.len() {
                img.grow_to(o + b.len());
                want.resize(o + b.len(), 0);
            }
            img.put(o, b);
            want[o..o + b.len()].copy_from_slice(b);
            assert_eq!(img.to_vec(), want, "after the edit at {o}");
        }
        img.grow_to(want.len() + 100);
        want.resize(want.len() + 100, 0);
        assert_eq!(img.len(), want.len());
        for r in [
            0..1,
            5..40,
            12_270..12_300,
            41_790..want.len(),
            0..want.len(),
        ] {
            assert_eq!(img.read(r.clone()), want[r.clone()], "{r:?}");
        }
        let mut streamed = Vec::new();
        let read = std::cell::RefCell::new(Vec::new());
        img.write_to(&mut streamed, &|r| read.borrow_mut().push(r))
            .unwrap();
        assert_eq!(streamed, want);
        // Every input byte kept was reported read, each once, none removed.
        let mut got: Vec<usize> = read.into_inner().into_iter().flatten().collect();
        got.sort_unstable();
        assert!(got.windows(2).all(|w| w[0] < w[1]));
        assert!(got.iter().all(|&o| !(12_288..20_480).contains(&o)));
    }

    #[test]
    fn an_empty_edit_does_not_hide_a_later_one_at_the_same_offset() {
        // The fuzz crash of stop 45: an empty write kept an empty span at 100, and
        // the next edit there was handed that span (index out of range).
        let input = vec![7u8; 4096];
        let mut img = Image::new(&input, 1024..2048);
        img.put(100, &[]);
        img.put(100, &[1; 64]);
        let mut want = model(&input, 1024..2048);
        want[100..164].fill(1);
        assert_eq!(img.to_vec(), want);
    }

    #[test]
    fn random_edits_agree_with_a_plain_copy() {
        // A small deterministic generator: edits of 0..40 bytes anywhere, some
        // empty, some past the end (grown first), checked after each one.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let input: Vec<u8> = (0..3000u32).map(|i| (i % 253) as u8).collect();
        for round in 0..50 {
            let a = next(input.len());
            let cut = a..a + next(input.len() - a);
            let mut img = Image::new(&input, cut.clone());
            let mut want = model(&input, cut.clone());
            for step in 0..40 {
                let o = next(want.len() + 20);
                let b: Vec<u8> = (0..next(40)).map(|_| next(256) as u8).collect();
                if o + b.len() > want.len() {
                    img.grow_to(o + b.len());
                    want.resize(o + b.len(), 0);
                }
                img.put(o, &b);
                want[o..o + b.len()].copy_from_slice(&b);
                assert_eq!(img.to_vec(), want, "round {round} step {step}, cut {cut:?}");
            }
        }
    }

    #[test]
    fn a_large_input_is_read_in_chunks() {
        let input = vec![1u8; 2 * COPY_CHUNK + 5];
        let img = Image::new(&input, 4096..8192);
        let read = std::cell::RefCell::new(Vec::new());
        let mut sink = io::sink();
        img.write_to(&mut sink, &|r| read.borrow_mut().push(r))
            .unwrap();
        let read = read.into_inner();
        assert!(read.iter().all(|r| r.len() <= COPY_CHUNK));
        assert_eq!(
            read.iter().map(|r| r.len()).sum::<usize>(),
            input.len() - 4096
        );
    }
}
