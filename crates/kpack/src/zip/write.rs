//! Writing a zip archive member by member, deterministically: members are added in
//! the caller's order with a fixed timestamp (1980-01-01 00:00, the earliest a zip
//! can hold), their Unix mode, and zip64 records only where sizes or offsets need
//! them. Members arrive already compressed (see [`deflate`]), so the expensive part
//! can run in parallel while this writer only concatenates.

use super::read::Method;
use std::io::{self, Read, Write};

/// DOS date of 1980-01-01 (day 1, month 1, year 0), time 00:00:00.
const FIXED_DOS_DATE: u16 = (1 << 5) | 1;
const MAX32: u64 = 0xffff_ffff;

/// A member's bytes as they will be stored.
#[derive(Debug, Clone, Copy)]
pub struct Stored {
    /// Stored or deflated.
    pub method: Method,
    /// CRC-32 of the uncompressed bytes.
    pub crc32: u32,
    /// Uncompressed size.
    pub size: u64,
    /// Stored size.
    pub compressed_size: u64,
}

struct Central {
    name: String,
    mode: u32,
    stored: Stored,
    offset: u64,
}

/// A zip being written to `W`.
pub struct ZipWriter<W: Write> {
    out: W,
    offset: u64,
    entries: Vec<Central>,
}

/// Deflate `data` (level 0-9); returns the compressed bytes and the member record.
pub fn deflate(data: &[u8], level: u32) -> io::Result<(Vec<u8>, Stored)> {
    let mut enc = flate2::write::DeflateEncoder::new(
        Vec::with_capacity(data.len() / 3 + 64),
        flate2::Compression::new(level.min(9)),
    );
    enc.write_all(data)?;
    let out = enc.finish()?;
    Ok((
        out,
        Stored {
            method: Method::Deflated,
            crc32: crc32(data),
            size: data.len() as u64,
            compressed_size: 0,
        },
    ))
    .map(|(out, mut s)| {
        s.compressed_size = out.len() as u64;
        (out, s)
    })
}

/// CRC-32 (the zip polynomial) of `data`.
pub fn crc32(data: &[u8]) -> u32 {
    let mut c = flate2::Crc::new();
    c.update(data);
    c.sum()
}

impl<W: Write> ZipWriter<W> {
    /// Start a zip on `out`.
    pub fn new(out: W) -> Self {
        ZipWriter {
            out,
            offset: 0,
            entries: Vec::new(),
        }
    }

    /// Add a member whose stored bytes (`stored.compressed_size` of them) come from
    /// `data`. `mode` is the Unix permission bits.
    pub fn add(
        &mut self,
        name: &str,
        mode: u32,
        stored: Stored,
        data: &mut dyn Read,
    ) -> io::Result<()> {
        let zip64 = stored.size >= MAX32 || stored.compressed_size >= MAX32;
        let mut h = Vec::with_capacity(30 + name.len() + 20);
        h.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        h.extend_from_slice(&(if zip64 { 45u16 } else { 20 }).to_le_bytes());
        h.extend_from_slice(&flags(name).to_le_bytes());
        h.extend_from_slice(&method_code(stored.method).to_le_bytes());
        h.extend_from_slice(&0u16.to_le_bytes());
        h.extend_from_slice(&FIXED_DOS_DATE.to_le_bytes());
        h.extend_from_slice(&stored.crc32.to_le_bytes());
        if zip64 {
            h.extend_from_slice(&(MAX32 as u32).to_le_bytes());
            h.extend_from_slice(&(MAX32 as u32).to_le_bytes());
        } else {
            h.extend_from_slice(&(stored.compressed_size as u32).to_le_bytes());
            h.extend_from_slice(&(stored.size as u32).to_le_bytes());
        }
        h.extend_from_slice(&(name.len() as u16).to_le_bytes());
        h.extend_from_slice(&(if zip64 { 20u16 } else { 0 }).to_le_bytes());
        h.extend_from_slice(name.as_bytes());
        if zip64 {
            h.extend_from_slice(&1u16.to_le_bytes());
            h.extend_from_slice(&16u16.to_le_bytes());
            h.extend_from_slice(&stored.size.to_le_bytes());
            h.extend_from_slice(&stored.compressed_size.to_le_bytes());
        }
        self.out.write_all(&h)?;
        let copied = io::copy(&mut data.take(stored.compressed_size), &mut self.out)?;
        if copied != stored.compressed_size {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "member {name}: {copied} of {} bytes",
                    stored.compressed_size
                ),
            ));
        }
        self.entries.push(Central {
            name: name.to_string(),
            mode,
            stored,
            offset: self.offset,
        });
        self.offset += h.len() as u64 + copied;
        Ok(())
    }

    /// Add a member from bytes already compressed as `stored` says.
    pub fn add_bytes(
        &mut self,
        name: &str,
        mode: u32,
        stored: Stored,
        bytes: &[u8],
    ) -> io::Result<()> {
        let mut r = bytes;
        self.add(name, mode, stored, &mut r)
    }

    /// Write the central directory and end records; returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        let cd_start = self.offset;
        let mut cd = Vec::new();
        for e in &self.entries {
            let s = &e.stored;
            let mut extra = Vec::new();
            if s.size >= MAX32 {
                extra.extend_from_slice(&s.size.to_le_bytes());
            }
            if s.compressed_size >= MAX32 {
                extra.extend_from_slice(&s.compressed_size.to_le_bytes());
            }
            if e.offset >= MAX32 {
                extra.extend_from_slice(&e.offset.to_le_bytes());
            }
            let zip64 = !extra.is_empty();
            cd.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
            cd.extend_from_slice(&((3u16 << 8) | if zip64 { 45 } else { 20 }).to_le_bytes());
            cd.extend_from_slice(&(if zip64 { 45u16 } else { 20 }).to_le_bytes());
            cd.extend_from_slice(&flags(&e.name).to_le_bytes());
            cd.extend_from_slice(&method_code(s.method).to_le_bytes());
            cd.extend_from_slice(&0u16.to_le_bytes());
            cd.extend_from_slice(&FIXED_DOS_DATE.to_le_bytes());
            cd.extend_from_slice(&s.crc32.to_le_bytes());
            cd.extend_from_slice(&(s.compressed_size.min(MAX32) as u32).to_le_bytes());
            cd.extend_from_slice(&(s.size.min(MAX32) as u32).to_le_bytes());
            cd.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
            cd.extend_from_slice(&(if zip64 { extra.len() as u16 + 4 } else { 0 }).to_le_bytes());
            cd.extend_from_slice(&0u16.to_le_bytes()); // comment
            cd.extend_from_slice(&0u16.to_le_bytes()); // disk
            cd.extend_from_slice(&0u16.to_le_bytes()); // internal attributes
            cd.extend_from_slice(&((0o100000 | (e.mode & 0o7777)) << 16).to_le_bytes());
            cd.extend_from_slice(&(e.offset.min(MAX32) as u32).to_le_bytes());
            cd.extend_from_slice(e.name.as_bytes());
            if zip64 {
                cd.extend_from_slice(&1u16.to_le_bytes());
                cd.extend_from_slice(&(extra.len() as u16).to_le_bytes());
                cd.extend_from_slice(&extra);
            }
        }
        self.out.write_all(&cd)?;
        let cd_size = cd.len() as u64;
        let count = self.entries.len() as u64;
        let end64 = cd_start + cd_size;
        if count >= 0xffff || cd_start >= MAX32 || cd_size >= MAX32 {
            let mut r = Vec::new();
            r.extend_from_slice(&0x0606_4b50u32.to_le_bytes());
            r.extend_from_slice(&44u64.to_le_bytes());
            r.extend_from_slice(&((3u16 << 8) | 45).to_le_bytes());
            r.extend_from_slice(&45u16.to_le_bytes());
            r.extend_from_slice(&0u32.to_le_bytes());
            r.extend_from_slice(&0u32.to_le_bytes());
            r.extend_from_slice(&count.to_le_bytes());
            r.extend_from_slice(&count.to_le_bytes());
            r.extend_from_slice(&cd_size.to_le_bytes());
            r.extend_from_slice(&cd_start.to_le_bytes());
            r.extend_from_slice(&0x0706_4b50u32.to_le_bytes());
            r.extend_from_slice(&0u32.to_le_bytes());
            r.extend_from_slice(&end64.to_le_bytes());
            r.extend_from_slice(&1u32.to_le_bytes());
            self.out.write_all(&r)?;
        }
        let mut e = Vec::with_capacity(22);
        e.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
        e.extend_from_slice(&0u32.to_le_bytes());
        e.extend_from_slice(&(count.min(0xffff) as u16).to_le_bytes());
        e.extend_from_slice(&(count.min(0xffff) as u16).to_le_bytes());
        e.extend_from_slice(&(cd_size.min(MAX32) as u32).to_le_bytes());
        e.extend_from_slice(&(cd_start.min(MAX32) as u32).to_le_bytes());
        e.extend_from_slice(&0u16.to_le_bytes());
        self.out.write_all(&e)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

fn flags(name: &str) -> u16 {
    if name.is_ascii() { 0 } else { 1 << 11 }
}

fn method_code(m: Method) -> u16 {
    match m {
        Method::Stored => 0,
        Method::Deflated => 8,
    }
}

/// The record of bytes stored as they are.
pub fn stored(data: &[u8]) -> Stored {
    Stored {
        method: Method::Stored,
        crc32: crc32(data),
        size: data.len() as u64,
        compressed_size: data.len() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::super::read::read_index;
    use super::*;

    #[test]
    fn written_zips_read_back_with_modes_and_contents() {
        let mut w = ZipWriter::new(Vec::new());
        let body = b"hello hello hello hello".repeat(50);
        let (z, s) = deflate(&body, 6).unwrap();
        w.add_bytes("pkg/a.txt", 0o640, s, &z).unwrap();
        w.add_bytes("pkg/run", 0o751, stored(b"#!/bin/sh\n"), b"#!/bin/sh\n")
            .unwrap();
        let zip = w.finish().unwrap();
        let idx = read_index(&zip).unwrap();
        assert_eq!(idx.members.len(), 2);
        assert_eq!(idx.members[0].read_all(&zip).unwrap(), body);
        assert_eq!(idx.members[0].permissions(), 0o640);
        assert_eq!(idx.members[1].permissions(), 0o751);
        assert_eq!(idx.members[1].read_all(&zip).unwrap(), b"#!/bin/sh\n");
        // A changed byte fails the CRC.
        let mut bad = zip.clone();
        let off = idx.members[1].data_offset as usize;
        bad[off] ^= 1;
        let idx2 = read_index(&bad).unwrap();
        assert!(idx2.members[1].read_all(&bad).is_err());
    }
}
