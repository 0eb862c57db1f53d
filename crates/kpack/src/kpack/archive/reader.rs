//! An open archive: one kernel fetched and decoded at a time.

use super::index::{FileAt, err, parse_index_at};
use super::*;
use crate::error::{Error, FormatResult, Result};
use std::borrow::Cow;
use std::io::Read;
use std::path::{Path, PathBuf};
pub(crate) enum Bytes {
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
    pub(crate) path: PathBuf,
    pub(crate) bytes: Bytes,
    /// Header and TOC.
    pub index: ArchiveIndex,
    /// Stored bytes handed out since the map's pages were last released.
    touched: std::sync::atomic::AtomicU64,
}

/// Stored bytes read from an archive's map before all of its pages leave the
/// resident set again: however many frames a reader goes through, in whatever order
/// and on however many threads, an archive holds at most about this much (plus the
/// pages the kernel maps around the last faults) instead of every frame it read.
/// (At 32 MiB, the verify that ends a pack held a whole archive of a 1 GiB tree and
/// 32 MiB of each of an 8 GiB one: 8 MiB more at the peak for the larger tree; at
/// 8 MiB the peak of a pack of 8 GiB was that verify, with 5 MiB of one archive.)
/// One folio of the page cache: a frame read maps whole folios anyway.
const RELEASE_EVERY: u64 = crate::fsutil::FAULT_SPAN as u64;

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
            crate::mapped::note(&m, path);
            let _ = m.advise(memmap2::Advice::Random);
            Bytes::Map(m)
        };
        Ok(Archive {
            path: path.to_path_buf(),
            bytes,
            index,
            touched: Default::default(),
        })
    }

    /// Index archive bytes already in memory.
    pub fn from_bytes(path: &Path, data: Vec<u8>) -> Result<Archive> {
        let index = parse_index(&data).map_err(|e| Error::format(path, e))?;
        Ok(Archive {
            path: path.to_path_buf(),
            bytes: Bytes::Owned(data),
            index,
            touched: Default::default(),
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
            .binary_search_by(|k| (*k.key).cmp(key).then((*k.arch).cmp(arch)))
            .ok()
    }

    /// The stored bytes of a kernel (a zstd frame, or the raw kernel).
    pub fn stored(&self, e: &KernelEntry) -> &[u8] {
        if let Bytes::Map(m) = &self.bytes {
            use std::sync::atomic::Ordering;
            let t = self.touched.fetch_add(e.compressed_size, Ordering::Relaxed);
            if t.saturating_add(e.compressed_size) > RELEASE_EVERY {
                // Frames released one by one stay mapped where the kernel maps pages
                // around a fault (the neighbours of the next frame read): drop them
                // all. A frame another thread is reading is read back from the file.
                self.touched.store(0, Ordering::Relaxed);
                crate::fsutil::release_range(m, 0, m.len());
            }
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

    /// A kernel's length and SHA-256, decoded as a stream: memory stays at one buffer
    /// whatever its `original_size` claims (a frame of zeros may decode to GiBs), and
    /// the frame must decode to exactly that size.
    pub fn digest(&self, e: &KernelEntry) -> Result<crate::kpack::ledger::Sha256Digest> {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        self.decode_into(e, |b| h.update(b))?;
        Ok(crate::kpack::ledger::Sha256Digest(h.finalize().into()))
    }

    /// A kernel's bytes handed to `sink` a buffer at a time (stored bytes as they
    /// are; a zstd frame decoded as a stream to exactly its `original_size`).
    pub fn decode_into(&self, e: &KernelEntry, mut sink: impl FnMut(&[u8])) -> Result<()> {
        let stored = self.stored(e);
        match self.index.compression_scheme {
            Scheme::None => {
                sink(stored);
                Ok(())
            }
            Scheme::ZstdPerKernel => decode_stream(stored, e.size, sink).map_err(|x| {
                Error::format(
                    &self.path,
                    x.shifted(e.offset)
                        .context(&format!("{} @ {}: ", e.key, e.arch)),
                )
            }),
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
}

/// Largest compression ratio for which a frame is decoded in one shot into a buffer
/// of its declared size; above it the TOC's size is not trusted for an allocation
/// and the frame is streamed instead (it still stops at the declared size).
pub(crate) const MAX_TRUSTED_RATIO: u64 = 64;

/// A zstd failure, told apart: memory the decoder could not get is not a corrupt
/// frame.
fn frame_error(e: &dyn std::fmt::Display) -> crate::error::FormatError {
    let text = e.to_string();
    if text.to_ascii_lowercase().contains("memory") {
        err(
            0,
            format!("not enough memory to decode the zstd frame: {text}"),
        )
    } else {
        err(0, format!("corrupt zstd frame: {text}"))
    }
}

/// Decode one zstd frame of exactly `size` bytes, handing them to `sink` a buffer at
/// a time (no more than `size` are ever produced).
pub fn decode_stream(frame: &[u8], size: u64, mut sink: impl FnMut(&[u8])) -> FormatResult<()> {
    let mut dec = zstd::stream::read::Decoder::with_buffer(frame)
        .and_then(|mut d| d.window_log_max(31).map(|()| d))
        .map_err(|e| err(0, format!("cannot start zstd: {e}")))?
        .single_frame();
    let mut buf = vec![0u8; (size as usize).clamp(1, 1 << 20)];
    let mut got = 0u64;
    while got < size {
        let want = buf.len().min((size - got) as usize);
        let n = dec.read(&mut buf[..want]).map_err(|e| frame_error(&e))?;
        if n == 0 {
            return Err(err(
                0,
                format!("zstd frame decodes to {got} bytes, original_size is {size}"),
            ));
        }
        sink(&buf[..n]);
        got += n as u64;
    }
    let mut probe = [0u8; 1];
    if matches!(dec.read(&mut probe), Ok(1)) {
        return Err(err(
            0,
            format!("zstd frame holds more than original_size ({size}) bytes"),
        ));
    }
    Ok(())
}

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
                    frame_error(&e)
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
    decode_stream(frame, size, |b| out.extend_from_slice(b))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decoder_out_of_memory_is_not_called_a_corrupt_frame() {
        // zstd's wording when an allocation fails (#27 item 24: it was reported as
        // "corrupt zstd frame" under a memory limit).
        let e = frame_error(&"Allocation error : not enough memory");
        assert!(
            e.to_string()
                .contains("not enough memory to decode the zstd frame"),
            "{e}"
        );
        let e = frame_error(&"Unknown frame descriptor");
        assert!(e.to_string().contains("corrupt zstd frame"), "{e}");
    }
}
