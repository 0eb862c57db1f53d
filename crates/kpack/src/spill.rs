//! State of a run kept on disk rather than in memory: bytes appended to an unnamed
//! temporary file (gone with its last handle, whatever ends the process), read back
//! by offset. What a run keeps per file of a tree grows with the tree; kept here it
//! costs page cache, which the kernel can drop, not resident memory (#32).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Bytes being appended to a spill file.
pub struct SpillWriter {
    out: BufWriter<File>,
    len: u64,
}

impl SpillWriter {
    /// A new spill file in `dir` (unnamed: nothing appears in `dir`).
    pub fn new_in(dir: &Path) -> io::Result<SpillWriter> {
        Ok(SpillWriter {
            out: BufWriter::with_capacity(64 << 10, tempfile::tempfile_in(dir)?),
            len: 0,
        })
    }

    /// Append `bytes`; returns where they start.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<u64> {
        let at = self.len;
        self.out.write_all(bytes)?;
        self.len += bytes.len() as u64;
        Ok(at)
    }

    /// Bytes appended so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Nothing appended yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Done appending: the file to read from.
    pub fn finish(self) -> io::Result<Spill> {
        let len = self.len;
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        Ok(Spill { file, len })
    }
}

/// A spill file written, read by offset (from any thread).
pub struct Spill {
    file: File,
    len: u64,
}

impl Spill {
    /// Fill `buf` from offset `at`; a range past what was written is an error.
    pub fn read_at(&self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        if at
            .checked_add(buf.len() as u64)
            .is_none_or(|end| end > self.len)
        {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "spill read of {} bytes at {at} is past its end ({})",
                    buf.len(),
                    self.len
                ),
            ));
        }
        self.file.read_exact_at(buf, at)
    }

    /// `len` bytes from offset `at`.
    pub fn read_vec(&self, at: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut v = vec![0; len];
        self.read_at(at, &mut v)?;
        Ok(v)
    }

    /// Bytes written.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Nothing written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Records of any length being appended: their bytes to one spill file, where each
/// starts to another (eight bytes a record).
pub struct RecordsWriter {
    data: SpillWriter,
    starts: SpillWriter,
    len: usize,
}

impl RecordsWriter {
    /// New spill files in `dir`.
    pub fn new_in(dir: &Path) -> io::Result<RecordsWriter> {
        Ok(RecordsWriter {
            data: SpillWriter::new_in(dir)?,
            starts: SpillWriter::new_in(dir)?,
            len: 0,
        })
    }

    /// Append a record.
    pub fn push(&mut self, record: &[u8]) -> io::Result<()> {
        self.starts.append(&self.data.len().to_le_bytes())?;
        self.data.append(record)?;
        self.len += 1;
        Ok(())
    }

    /// Done appending: the records to read.
    pub fn finish(mut self) -> io::Result<Records> {
        self.starts.append(&self.data.len().to_le_bytes())?;
        Ok(Records {
            data: self.data.finish()?,
            starts: self.starts.finish()?,
            len: self.len,
        })
    }
}

/// Records written by a [`RecordsWriter`], read by number (from any thread).
pub struct Records {
    data: Spill,
    starts: Spill,
    len: usize,
}

impl Records {
    /// How many.
    pub fn len(&self) -> usize {
        self.len
    }

    /// None at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `k`th record.
    pub fn get(&self, k: usize) -> io::Result<Vec<u8>> {
        let mut b = [0u8; 16];
        self.starts.read_at(k as u64 * 8, &mut b)?;
        let [
            s0,
            s1,
            s2,
            s3,
            s4,
            s5,
            s6,
            s7,
            e0,
            e1,
            e2,
            e3,
            e4,
            e5,
            e6,
            e7,
        ] = b;
        let start = u64::from_le_bytes([s0, s1, s2, s3, s4, s5, s6, s7]);
        let end = u64::from_le_bytes([e0, e1, e2, e3, e4, e5, e6, e7]);
        let len = end.checked_sub(start).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "spilled record ends before it starts",
            )
        })?;
        self.data.read_vec(start, len as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records of any length, empty ones too, come back by number; a number past
    /// the last is an error.
    #[test]
    fn records_come_back_by_number() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = RecordsWriter::new_in(dir.path()).unwrap();
        let recs: Vec<Vec<u8>> = (0..300u32)
            .map(|i| (0..(i * 37) % 1000).map(|j| (i ^ j) as u8).collect())
            .collect();
        for r in &recs {
            w.push(r).unwrap();
        }
        let r = w.finish().unwrap();
        assert_eq!(r.len(), 300);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        for k in [299, 0, 27, 28, 150] {
            assert_eq!(r.get(k).unwrap(), recs[k], "record {k}");
        }
        assert!(r.get(300).is_err());
        let empty = RecordsWriter::new_in(dir.path()).unwrap().finish().unwrap();
        assert!(empty.is_empty());
        assert!(empty.get(0).is_err());
    }

    /// What goes in comes back by offset, from a file that leaves nothing in its
    /// directory; a read past the end is an error, not a short read.
    #[test]
    fn bytes_come_back_by_offset_and_leave_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = SpillWriter::new_in(dir.path()).unwrap();
        assert!(w.is_empty());
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let a = w.append(b"first").unwrap();
        let b = w.append(&big).unwrap();
        let c = w.append(b"").unwrap();
        let d = w.append("é/ü".as_bytes()).unwrap();
        assert_eq!((a, b, c, d), (0, 5, 200_005, 200_005));
        let s = w.finish().unwrap();
        assert_eq!(s.len(), 200_005 + "é/ü".len() as u64);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_eq!(s.read_vec(a, 5).unwrap(), b"first");
        assert_eq!(s.read_vec(b, big.len()).unwrap(), big);
        assert_eq!(s.read_vec(d, 5).unwrap(), "é/ü".as_bytes());
        let e = s.read_vec(d, 6).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(e.to_string().contains("past its end"), "{e}");
        assert!(s.read_vec(u64::MAX, 1).is_err());
    }
}
