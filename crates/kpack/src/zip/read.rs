//! Reading a zip archive from its bytes (an mmap): the central directory, checked
//! before anything is trusted, and members read in place (stored) or streamed
//! (deflated) with their declared size and CRC enforced.

use crate::error::{FormatError, FormatResult};
use flate2::read::DeflateDecoder;
use std::io::Read;

const EOCD_SIG: u32 = 0x0605_4b50;
const EOCD64_SIG: u32 = 0x0606_4b50;
const EOCD64_LOCATOR_SIG: u32 = 0x0706_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const LOCAL_SIG: u32 = 0x0403_4b50;
/// Deflate cannot expand by more than about 1032:1; more is a bomb or a lie.
const MAX_RATIO: u64 = 1100;
/// Members this large are refused outright (no wheel member comes close).
pub const MAX_MEMBER: u64 = 1 << 36;

/// How a member's bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// As is.
    Stored,
    /// Raw deflate (RFC 1951).
    Deflated,
}

/// One member, from the central directory (checked against its local header).
#[derive(Debug, Clone)]
pub struct Member {
    /// Name, `/`-separated (checked: relative, no `..`, no NUL or backslash).
    pub name: String,
    /// Storage method.
    pub method: Method,
    /// CRC-32 of the uncompressed bytes.
    pub crc32: u32,
    /// Stored bytes.
    pub compressed_size: u64,
    /// Uncompressed bytes.
    pub size: u64,
    /// Offset of the local header.
    pub header_offset: u64,
    /// Offset of the stored bytes.
    pub data_offset: u64,
    /// Unix mode (type and permission bits) when the archive was made on Unix.
    pub unix_mode: Option<u32>,
    /// MS-DOS date and time, as stored.
    pub dos_time: u32,
}

impl Member {
    /// A directory entry (name ending in `/`).
    pub fn is_dir(&self) -> bool {
        self.name.ends_with('/')
    }

    /// A symbolic link (Unix mode `S_IFLNK`).
    pub fn is_symlink(&self) -> bool {
        self.unix_mode.is_some_and(|m| m & 0o170000 == 0o120000)
    }

    /// Permission bits (0o644 when the archive did not record them).
    pub fn permissions(&self) -> u32 {
        match self.unix_mode {
            Some(m) if m & 0o7777 != 0 => m & 0o7777,
            _ => 0o644,
        }
    }

    /// The stored bytes.
    pub fn stored<'a>(&self, zip: &'a [u8]) -> &'a [u8] {
        // In bounds: checked when the directory was read.
        &zip[self.data_offset as usize..(self.data_offset + self.compressed_size) as usize]
    }

    /// A reader of the uncompressed bytes that fails on a wrong size or CRC.
    pub fn reader<'a>(&'a self, zip: &'a [u8]) -> MemberReader<'a> {
        self.reader_over(self.stored(zip))
    }

    /// [`Member::reader`] of the stored bytes read from `raw` (its
    /// `compressed_size` bytes at `data_offset`, however the caller reads them).
    pub fn reader_over<'a>(&'a self, raw: impl Read + Send + 'a) -> MemberReader<'a> {
        let inner: Box<dyn Read + Send + 'a> = match self.method {
            Method::Stored => Box::new(raw),
            Method::Deflated => Box::new(DeflateDecoder::new(raw)),
        };
        MemberReader {
            inner,
            member: self,
            crc: flate2::Crc::new(),
            read: 0,
        }
    }

    /// The first `n` uncompressed bytes (fewer if the member is shorter).
    pub fn head(&self, zip: &[u8], n: usize) -> FormatResult<Vec<u8>> {
        let want = n.min(self.size as usize);
        if self.method == Method::Stored {
            return Ok(self.stored(zip)[..want].to_vec());
        }
        let mut out = vec![0u8; want];
        let mut d = DeflateDecoder::new(self.stored(zip));
        d.read_exact(&mut out).map_err(|e| self.io_error(&e))?;
        Ok(out)
    }

    /// A read error of this member, naming it once: the checked reader's own
    /// faults name it already; others (the inflater's, a spill file's) do not.
    pub fn io_error(&self, e: &std::io::Error) -> FormatError {
        let what = if e.get_ref().is_some_and(|i| i.is::<MemberFault>()) {
            e.to_string()
        } else {
            format!("member {}: {e}", self.name)
        };
        FormatError::new(self.data_offset, what)
    }

    /// All uncompressed bytes, checked (for members known to be small).
    pub fn read_all(&self, zip: &[u8]) -> FormatResult<Vec<u8>> {
        let mut out = Vec::with_capacity(self.size as usize);
        self.reader(zip)
            .read_to_end(&mut out)
            .map_err(|e| FormatError::new(self.data_offset, e.to_string()))?;
        Ok(out)
    }
}

/// Uncompressed bytes of a member; a size or CRC that differs from the directory's
/// is an error (`InvalidData`), so a member can never yield more than it declared.
pub struct MemberReader<'a> {
    inner: Box<dyn Read + Send + 'a>,
    member: &'a Member,
    crc: flate2::Crc,
    read: u64,
}

impl Read for MemberReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.member.size - self.read;
        // Ask for one byte more than declared at the end, to notice overlong data.
        let cap = buf
            .len()
            .min(usize::try_from(left + 1).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..cap])?;
        self.read += n as u64;
        if self.read > self.member.size {
            return Err(bad(format!(
                "member {} inflates to more than its declared {} bytes",
                self.member.name, self.member.size
            )));
        }
        self.crc.update(&buf[..n]);
        if n == 0 && !buf.is_empty() {
            if self.read != self.member.size {
                return Err(bad(format!(
                    "member {} ends after {} of its declared {} bytes",
                    self.member.name, self.read, self.member.size
                )));
            }
            if self.crc.sum() != self.member.crc32 {
                return Err(bad(format!(
                    "member {}: CRC-32 {:08x} does not match the directory's {:08x}",
                    self.member.name,
                    self.crc.sum(),
                    self.member.crc32
                )));
            }
        }
        Ok(n)
    }
}

/// A member that does not read as the directory says; the message names it.
#[derive(Debug)]
struct MemberFault(String);

impl std::fmt::Display for MemberFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MemberFault {}

fn bad(msg: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, MemberFault(msg))
}

/// A zip's members, in central-directory order.
#[derive(Debug, Clone)]
pub struct ZipIndex {
    /// Members.
    pub members: Vec<Member>,
}

fn u16_at(d: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([d[o], d[o + 1]])
}
fn u32_at(d: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]])
}
fn u64_at(d: &[u8], o: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&d[o..o + 8]);
    u64::from_le_bytes(b)
}

/// Whether `data` starts like a zip archive.
pub fn is_zip(data: &[u8]) -> bool {
    data.len() >= 4 && (u32_at(data, 0) == LOCAL_SIG || u32_at(data, 0) == EOCD_SIG)
}

/// Why a member name cannot be a path below the directory a wheel is installed to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadName {
    /// Empty (or only `/`).
    #[error("empty member name")]
    Empty,
    /// Starts at `/`, or holds a backslash or NUL.
    #[error("member name {0:?} is absolute or holds '\\' or NUL")]
    Absolute(String),
    /// `C:…`.
    #[error("member name {0:?} starts with a drive letter")]
    DriveLetter(String),
    /// An empty, `.` or `..` part.
    #[error(
        "member name {0:?} has an empty, '.' or '..' part (it could escape the \
         directory it is extracted to)"
    )]
    Escapes(String),
}

/// Check a member name: relative, `/`-separated, no `..`, no empty or odd parts.
pub fn check_name(name: &str) -> Result<(), BadName> {
    let trimmed = name.strip_suffix('/').unwrap_or(name);
    if name.is_empty() || trimmed.is_empty() {
        return Err(BadName::Empty);
    }
    if name.starts_with('/') || name.contains('\\') || name.contains('\0') {
        return Err(BadName::Absolute(name.to_string()));
    }
    if name.len() > 1 && name.as_bytes()[1] == b':' {
        return Err(BadName::DriveLetter(name.to_string()));
    }
    for part in trimmed.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Err(BadName::Escapes(name.to_string()));
        }
    }
    Ok(())
}

/// Read and check the central directory of the zip in `data`.
///
/// Refused: no end record, a directory outside the file, encrypted or
/// non-deflate members, names that are absolute or hold `..`, duplicate names,
/// members overlapping each other or the directory, local headers that disagree
/// with the directory, and declared sizes deflate cannot produce.
pub fn read_index(data: &[u8]) -> FormatResult<ZipIndex> {
    read_index_releasing(data, &|_, _| {})
}

/// [`read_index`] of a file map, handing the pages of local headers read (offset,
/// length) to `release` as the directory moves on to another folio
/// (`fsutil::FAULT_SPAN`): checking the local headers of a wheel of thousands of
/// members does not leave every folio of it resident.
pub fn read_index_releasing(data: &[u8], release: &dyn Fn(usize, usize)) -> FormatResult<ZipIndex> {
    const SPAN: usize = crate::fsutil::FAULT_SPAN;
    let dir = find_directory(data)?;
    let mut members = Vec::with_capacity(dir.count as usize);
    let mut o = dir.offset as usize;
    let mut folio = None;
    for i in 0..dir.count {
        let (m, end) = read_entry(data, o, i, &dir)?;
        let here = m.header_offset as usize / SPAN;
        if let Some(last) = folio.filter(|&l| l != here) {
            release(last * SPAN, SPAN);
        }
        folio = Some(here);
        members.push(m);
        o = end;
    }
    if let Some(last) = folio {
        release(last * SPAN, SPAN);
    }
    // No two members may share bytes (overlapping members are how bombs multiply).
    let mut spans: Vec<(u64, u64, usize)> = members
        .iter()
        .enumerate()
        .map(|(i, m)| (m.header_offset, m.data_offset + m.compressed_size, i))
        .collect();
    spans.sort_unstable();
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            return Err(FormatError::new(
                w[1].0,
                format!(
                    "members {} and {} overlap (a zip bomb or a damaged archive)",
                    members[w[0].2].name, members[w[1].2].name
                ),
            ));
        }
    }
    let mut names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(FormatError::new(
            dir.offset,
            format!("member {} appears twice", w[0]),
        ));
    }
    Ok(ZipIndex { members })
}

/// Where the central directory is, as the end record (or zip64's) says.
struct Directory {
    /// Its members, offset and end (checked to lie in the file, before the end
    /// records).
    count: u64,
    offset: u64,
    end: usize,
}

/// Find the end record (in the last 22 + 65535 bytes: its comment is at most 64
/// KiB) and, for zip64, its locator and record; check the directory they name.
fn find_directory(data: &[u8]) -> FormatResult<Directory> {
    let len = data.len();
    if len < 22 {
        return Err(FormatError::new(0, "not a zip archive: too short"));
    }
    let lo = len.saturating_sub(22 + 0xffff);
    let eocd = (lo..=len - 22)
        .rev()
        .find(|&o| u32_at(data, o) == EOCD_SIG && o + 22 + u16_at(data, o + 20) as usize == len)
        .or_else(|| (lo..=len - 22).rev().find(|&o| u32_at(data, o) == EOCD_SIG))
        .ok_or_else(|| {
            FormatError::new(
                0,
                "not a zip archive (no end-of-central-directory record; truncated?)",
            )
        })?;
    if u16_at(data, eocd + 4) != 0 || u16_at(data, eocd + 6) != 0 {
        return Err(FormatError::new(
            eocd as u64,
            "multi-disk zip archives are not supported",
        ));
    }
    let mut count = u64::from(u16_at(data, eocd + 10));
    let mut cd_size = u64::from(u32_at(data, eocd + 12));
    let mut cd_off = u64::from(u32_at(data, eocd + 16));
    let mut cd_end_limit = eocd as u64;
    if count == 0xffff || cd_size == 0xffff_ffff || cd_off == 0xffff_ffff {
        // Zip64: the locator sits just before the end record.
        let loc = eocd
            .checked_sub(20)
            .filter(|&l| u32_at(data, l) == EOCD64_LOCATOR_SIG)
            .ok_or_else(|| FormatError::new(eocd as u64, "zip64 end locator missing"))?;
        let rec = u64_at(data, loc + 8);
        if rec.checked_add(56).is_none_or(|e| e > loc as u64)
            || u32_at(data, rec as usize) != EOCD64_SIG
        {
            return Err(FormatError::new(
                loc as u64,
                "zip64 end record missing or out of bounds",
            ));
        }
        let r = rec as usize;
        count = u64_at(data, r + 32);
        cd_size = u64_at(data, r + 40);
        cd_off = u64_at(data, r + 48);
        cd_end_limit = rec;
    }
    let cd_end = cd_off
        .checked_add(cd_size)
        .filter(|&e| e <= cd_end_limit)
        .ok_or_else(|| {
            FormatError::new(
                eocd as u64,
                format!(
                    "central directory ({cd_size} bytes at {cd_off:#x}) lies outside the file \
                     (damaged or truncated)"
                ),
            )
        })?;
    if count > cd_size / 46 {
        return Err(FormatError::new(
            eocd as u64,
            format!("{count} members cannot fit in a {cd_size}-byte central directory"),
        ));
    }
    Ok(Directory {
        count,
        offset: cd_off,
        end: cd_end as usize,
    })
}

/// Central directory entry `i` at `o`, checked against its local header: the
/// member and where the next entry starts.
fn read_entry(data: &[u8], o: usize, i: u64, dir: &Directory) -> FormatResult<(Member, usize)> {
    let (cd_off, cd_end) = (dir.offset, dir.end);
    if o + 46 > cd_end || u32_at(data, o) != CENTRAL_SIG {
        return Err(FormatError::new(
            o as u64,
            format!("central directory entry {i}: bad signature (damaged directory)"),
        ));
    }
    let made_by = u16_at(data, o + 4) >> 8;
    let flags = u16_at(data, o + 8);
    let method = u16_at(data, o + 10);
    let dos_time = u32_at(data, o + 12);
    let crc32 = u32_at(data, o + 16);
    let mut sizes = [
        u64::from(u32_at(data, o + 24)),
        u64::from(u32_at(data, o + 20)),
        u64::from(u32_at(data, o + 42)),
    ];
    let nlen = u16_at(data, o + 28) as usize;
    let xlen = u16_at(data, o + 30) as usize;
    let clen = u16_at(data, o + 32) as usize;
    let ext_attr = u32_at(data, o + 38);
    let end = o + 46 + nlen + xlen + clen;
    if end > cd_end {
        return Err(FormatError::new(
            o as u64,
            format!("central directory entry {i} runs past the directory"),
        ));
    }
    let name = std::str::from_utf8(&data[o + 46..o + 46 + nlen])
        .map_err(|_| FormatError::new(o as u64 + 46, "member name is not UTF-8"))?
        .to_string();
    zip64_sizes(data, o + 46 + nlen, xlen, &name, &mut sizes)?;
    let [usize_, csize, hoff] = sizes;
    let at = |what: String| FormatError::new(o as u64, format!("member {name}: {what}"));
    check_name(&name).map_err(|e| FormatError::new(o as u64, e.to_string()))?;
    if flags & 1 != 0 {
        return Err(at("encrypted members are not supported".into()));
    }
    let method = match method {
        0 => Method::Stored,
        8 => Method::Deflated,
        m => {
            return Err(at(format!(
                "compression method {m} is not supported (only stored and deflate)"
            )));
        }
    };
    if method == Method::Stored && csize != usize_ {
        return Err(at(format!(
            "stored member with compressed size {csize} but size {usize_}"
        )));
    }
    if usize_ > MAX_MEMBER || usize_ > csize.saturating_mul(MAX_RATIO).saturating_add(1024) {
        return Err(at(format!(
            "declares {usize_} bytes from {csize} stored bytes: more than deflate can \
             produce (a zip bomb?)"
        )));
    }
    // The local header must be where the directory says, and agree with it.
    let h = hoff as usize;
    if hoff.checked_add(30).is_none_or(|e| e > cd_off) || u32_at(data, h) != LOCAL_SIG {
        return Err(at(format!("no local header at {hoff:#x}")));
    }
    let lnlen = u16_at(data, h + 26) as usize;
    let lxlen = u16_at(data, h + 28) as usize;
    if h + 30 + lnlen > cd_off as usize || &data[h + 30..h + 30 + lnlen] != name.as_bytes() {
        return Err(at(
            "local header names another member than the central directory".into(),
        ));
    }
    let data_offset = hoff + 30 + (lnlen + lxlen) as u64;
    if data_offset.checked_add(csize).is_none_or(|e| e > cd_off) {
        return Err(at(format!(
            "{csize} stored bytes at {data_offset:#x} run into the central directory"
        )));
    }
    let m = Member {
        name,
        method,
        crc32,
        compressed_size: csize,
        size: usize_,
        header_offset: hoff,
        data_offset,
        unix_mode: (made_by == 3 && ext_attr >> 16 != 0).then_some(ext_attr >> 16),
        dos_time,
    };
    Ok((m, end))
}

/// The zip64 extra field of an entry (`xlen` bytes at `x`): the fields of
/// `sizes` (size, compressed size, header offset) that say 0xffffffff, in order.
fn zip64_sizes(
    data: &[u8],
    mut x: usize,
    xlen: usize,
    name: &str,
    sizes: &mut [u64; 3],
) -> FormatResult<()> {
    let xend = x + xlen;
    while x + 4 <= xend {
        let id = u16_at(data, x);
        let sz = u16_at(data, x + 2) as usize;
        if x + 4 + sz > xend {
            break;
        }
        if id == 1 {
            let mut p = x + 4;
            for field in sizes.iter_mut() {
                if *field == 0xffff_ffff {
                    if p + 8 > x + 4 + sz {
                        return Err(FormatError::new(
                            x as u64,
                            format!("member {name}: zip64 extra field too short"),
                        ));
                    }
                    *field = u64_at(data, p);
                    p += 8;
                }
            }
        }
        x += 4 + sz;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::write::{ZipWriter, stored};
    use super::*;

    fn two_members() -> Vec<u8> {
        let mut w = ZipWriter::new(Vec::new());
        let a = vec![b'a'; 100];
        w.add_bytes("a", 0o644, stored(&a), &a).unwrap();
        w.add_bytes("b", 0o644, stored(b"bbbb"), b"bbbb").unwrap();
        w.finish().unwrap()
    }

    /// Offset of the n-th central directory entry.
    fn central(zip: &[u8], n: usize) -> usize {
        let mut o = zip.len() - 22;
        o = u32_at(zip, o + 16) as usize;
        for _ in 0..n {
            o += 46 + u16_at(zip, o + 28) as usize + u16_at(zip, o + 30) as usize;
        }
        o
    }

    #[test]
    fn bombs_overlaps_and_duplicates_are_refused() {
        let zip = two_members();
        assert_eq!(read_index(&zip).unwrap().members.len(), 2);
        // A stored member claiming more bytes than it has runs into the next member.
        let mut z = zip.clone();
        let c = central(&z, 0);
        z[c + 20..c + 24].copy_from_slice(&120u32.to_le_bytes());
        z[c + 24..c + 28].copy_from_slice(&120u32.to_le_bytes());
        let e = read_index(&z).unwrap_err().to_string();
        assert!(e.contains("overlap"), "{e}");
        // Deflate cannot turn 100 bytes into 1 GB.
        let mut z = zip.clone();
        z[c + 10..c + 12].copy_from_slice(&8u16.to_le_bytes());
        z[c + 24..c + 28].copy_from_slice(&(1u32 << 30).to_le_bytes());
        let e = read_index(&z).unwrap_err().to_string();
        assert!(e.contains("zip bomb"), "{e}");
        // Two directory entries for one name (and one local header).
        let mut z = zip.clone();
        let c1 = central(&z, 1);
        let (h0, n0) = (u32_at(&z, c + 42), z[c + 46]);
        z[c1 + 42..c1 + 46].copy_from_slice(&h0.to_le_bytes());
        z[c1 + 46] = n0;
        z[c1 + 20..c1 + 28].copy_from_slice(&[100, 0, 0, 0, 100, 0, 0, 0]);
        assert!(read_index(&z).is_err());
        // A directory that points outside the file.
        let mut z = zip.clone();
        let e = z.len() - 22;
        z[e + 16..e + 20].copy_from_slice(&u32::MAX.to_le_bytes());
        z[e + 12..e + 16].copy_from_slice(&10u32.to_le_bytes());
        assert!(read_index(&z).is_err());
        // A deflated member that inflates to more than it declares.
        let mut w = ZipWriter::new(Vec::new());
        let body = vec![0u8; 10_000];
        let (c, mut s) = super::super::write::deflate(&body, 6).unwrap();
        s.size = 100;
        w.add_bytes("z", 0o644, s, &c).unwrap();
        let z = w.finish().unwrap();
        let idx = read_index(&z).unwrap();
        let e = idx.members[0].read_all(&z).unwrap_err().to_string();
        assert!(e.contains("more than its declared"), "{e}");
        // The member is named once, whether or not the reader's error named it.
        let m = &idx.members[0];
        let mut sink = Vec::new();
        let io = m.reader(&z).read_to_end(&mut sink).unwrap_err();
        assert_eq!(m.io_error(&io).to_string().matches("member z").count(), 1);
        let other = std::io::Error::other("corrupt deflate stream");
        let e = m.io_error(&other).to_string();
        assert!(e.contains("member z: corrupt deflate stream"), "{e}");
    }

    #[test]
    fn names_that_escape_are_refused() {
        for bad in [
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a//b",
            "C:/x",
            "a\\b",
            "./a",
            "",
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        for good in ["a", "a/b.so", "pkg/.kpack/x_gfx90a:xnack+.kpack", "dir/"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
    }
}
