//! Python wheels as a format: a wheel's identity (dist-info, METADATA, WHEEL), its
//! members read from the zip without unpacking it, RECORD and METADATA text, and
//! the rocm-bootstrap bundle keys. `scan` classifies the members like the files of a
//! tree; [`crate::wheel_split`] splits a wheel into a host wheel and per-target
//! device wheels (`workflows.md` §4).

pub mod bootstrap;
pub mod metadata;

use crate::error::{Error, Result};
use crate::fsutil;
use crate::zip::{self, Member, ZipIndex};
use serde::Serialize;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Members up to this size are inflated in memory; larger ones go to an unlinked
/// temporary file that is mapped (memory stays bounded whatever the wheel holds).
pub const IN_MEMORY: u64 = 16 << 20;
/// METADATA, WHEEL and RECORD larger than this are refused.
const MAX_TEXT: u64 = 64 << 20;

/// Who a wheel is: from its dist-info.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WheelInfo {
    /// `Name` from METADATA, as written.
    pub name: String,
    /// `Version` from METADATA.
    pub version: String,
    /// The first `Tag` of WHEEL, split in three (`cp313`, `cp313`, `manylinux_2_28_x86_64`).
    pub tag: [String; 3],
    /// Every `Tag` line of WHEEL.
    pub tags: Vec<String>,
    /// The `*.dist-info` directory.
    pub dist_info: String,
    /// File members (directories excluded).
    pub members: u64,
    /// Their uncompressed bytes.
    pub bytes: u64,
    /// Their stored bytes.
    pub stored_bytes: u64,
}

/// A wheel opened: its mapping, central directory and identity.
pub struct Wheel {
    path: PathBuf,
    map: memmap2::Mmap,
    /// The central directory, checked.
    pub index: ZipIndex,
    /// Identity.
    pub info: WheelInfo,
}

/// Whether `path` names a file that looks like a wheel (`.whl` and zip magic).
pub fn is_wheel_path(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("whl"))
        && path.is_file()
}

impl Wheel {
    /// Open and check a wheel: a readable zip with one dist-info, METADATA with
    /// Name and Version, WHEEL with a three-part Tag.
    pub fn open(path: &Path) -> Result<Wheel> {
        let map = fsutil::map_file(path)
            .map_err(|e| Error::io(path, e))?
            .ok_or_else(|| invalid(path, "empty file, not a wheel"))?;
        let release = |at: usize, len: usize| fsutil::release_range(&map, at, len);
        let index =
            zip::read_index_releasing(&map, &release).map_err(|e| Error::format(path, e))?;
        let info = identity(&map, &index).map_err(|e| invalid(path, &e.to_string()))?;
        Ok(Wheel {
            path: path.to_path_buf(),
            map,
            index,
            info,
        })
    }

    /// The wheel's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// A reader of member `m`'s uncompressed bytes, checked as [`Member::reader`]'s
    /// are, releasing the wheel's pages behind it ([`fsutil::ReleasingReader`]).
    pub fn member_reader<'a>(&'a self, m: &'a Member) -> zip::MemberReader<'a> {
        releasing_reader(&self.map, m)
    }

    /// A member by name.
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.index.members.iter().find(|m| m.name == name)
    }

    /// The permission bits of member `name` (0644 when it is absent or has none): a
    /// file a split regenerates keeps the mode of the one it replaces.
    pub fn mode_of(&self, name: &str) -> u32 {
        self.member(name).map_or(0o644, Member::permissions)
    }

    /// A member's uncompressed bytes, 8-byte aligned for the ELF readers: borrowed
    /// when stored aligned, in memory up to [`IN_MEMORY`], else in a mapped unlinked
    /// temporary file under `spill`.
    pub fn contents(&self, m: &Member, spill: &Path) -> Result<Contents<'_>> {
        contents(&self.path, &self.map, m, (spill, &|| false))
    }

    /// [`Wheel::contents`], looking at `stop` every [`STOP_CHUNK`] bytes inflated:
    /// [`Error::Cancelled`] once it says stop (a gigabyte member is not inflated
    /// whole after a cancel).
    pub fn contents_until(
        &self,
        m: &Member,
        spill: &Path,
        stop: &dyn Fn() -> bool,
    ) -> Result<Contents<'_>> {
        contents(&self.path, &self.map, m, (spill, stop))
    }

    /// Let the kernel drop the pages of a member read (keeps RSS flat).
    pub fn release(&self, m: &Member) {
        fsutil::release_range(
            &self.map,
            m.header_offset as usize,
            (m.data_offset - m.header_offset + m.compressed_size) as usize,
        );
    }
}

fn invalid(path: &Path, what: &str) -> Error {
    Error::Unsupported {
        path: path.to_path_buf(),
        what: format!("not a valid wheel: {what}"),
    }
}

/// A member's bytes, however they had to be obtained.
pub enum Contents<'a> {
    /// In place in the wheel (stored and aligned).
    Borrowed(&'a [u8]),
    /// Inflated into aligned memory.
    Owned(crate::elf::AlignedBytes),
    /// Inflated into a temporary file, mapped.
    Mapped(memmap2::Mmap),
}

impl Contents<'_> {
    /// Let the kernel drop the pages of `len` bytes at `offset` once they are no longer
    /// needed (contents spilled to a temporary file; a no-op otherwise).
    pub fn release(&self, offset: u64, len: u64) {
        if let Contents::Mapped(m) = self {
            fsutil::release_range(m, offset as usize, len as usize);
        }
    }
}

impl std::ops::Deref for Contents<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Contents::Borrowed(b) => b,
            Contents::Owned(a) => a.as_slice(),
            Contents::Mapped(m) => m,
        }
    }
}

/// Free space a spill file must leave on its disk.
const SPILL_RESERVE: u64 = 256 << 20;

/// Bytes inflated between two looks at [`Wheel::contents_until`]'s stop.
pub const STOP_CHUNK: usize = 1 << 20;

/// A reader that fails once `stop` says so, looking before every read of at most
/// [`STOP_CHUNK`] bytes.
struct Stoppable<'s, R> {
    inner: R,
    stop: &'s dyn Fn() -> bool,
}

impl<R: std::io::Read> std::io::Read for Stoppable<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if (self.stop)() {
            return Err(std::io::Error::other("cancelled"));
        }
        let n = buf.len().min(STOP_CHUNK);
        self.inner.read(&mut buf[..n])
    }
}

/// See [`Wheel::member_reader`].
fn releasing_reader<'a>(zip: &'a memmap2::Mmap, m: &'a Member) -> zip::MemberReader<'a> {
    m.reader_over(fsutil::ReleasingReader::new(
        zip,
        m.data_offset as usize,
        m.compressed_size as usize,
    ))
}

/// See [`Wheel::contents`] and [`Wheel::contents_until`].
pub fn contents<'a>(
    path: &Path,
    zip: &'a memmap2::Mmap,
    m: &Member,
    (spill, stop): (&Path, &dyn Fn() -> bool),
) -> Result<Contents<'a>> {
    let ferr = |e: std::io::Error| {
        if stop() {
            return Error::Cancelled;
        }
        Error::format(path, m.io_error(&e))
    };
    if m.method == zip::Method::Stored {
        let s = m.stored(zip);
        // The CRC is checked on the way, as for deflated members.
        let mut r = Stoppable {
            inner: releasing_reader(zip, m),
            stop,
        };
        std::io::copy(&mut r, &mut std::io::sink()).map_err(ferr)?;
        if (s.as_ptr() as usize).is_multiple_of(8) {
            return Ok(Contents::Borrowed(s));
        }
    }
    let mut r = Stoppable {
        inner: releasing_reader(zip, m),
        stop,
    };
    if m.size <= IN_MEMORY {
        let a = crate::elf::AlignedBytes::read_from(&mut r, m.size as usize).map_err(ferr)?;
        return Ok(Contents::Owned(a));
    }
    // The member goes to a spill file: only if the disk can take it with room to
    // spare (a deflate bomb within the ratio bound would otherwise fill it).
    if let Ok(st) = nix::sys::statvfs::statvfs(spill) {
        let free = st.blocks_available().saturating_mul(st.fragment_size());
        if m.size > free.saturating_sub(SPILL_RESERVE) {
            return Err(Error::format(
                path,
                crate::FormatError::new(
                    m.data_offset,
                    format!(
                        "member {}: {} bytes inflated cannot be spilled to {} ({} free, {} kept \
                         in reserve): not inspected",
                        m.name,
                        m.size,
                        spill.display(),
                        free,
                        SPILL_RESERVE
                    ),
                ),
            ));
        }
    }
    let mut f = tempfile::tempfile_in(spill).map_err(|e| Error::io(spill, e))?;
    std::io::copy(&mut r, &mut f).map_err(ferr)?;
    let map = fsutil::map_open_file(&f).map_err(|e| Error::io(spill, e))?;
    Ok(Contents::Mapped(map))
}

/// Why a wheel's identity (its dist-info, METADATA and WHEEL) cannot be read: the
/// wheel is refused with this reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// No `*.dist-info` directory.
    #[error("no *.dist-info directory")]
    NoDistInfo,
    /// More than one.
    #[error("{} *.dist-info directories ({})", .0.len(), .0.join(", "))]
    ManyDistInfo(Vec<String>),
    /// A dist-info member missing (`METADATA`, `WHEEL`).
    #[error("{0} is missing")]
    Missing(String),
    /// A dist-info text larger than the bound.
    #[error("{member} is {size} bytes, too large")]
    TooLarge {
        /// The member.
        member: String,
        /// Its declared size.
        size: u64,
    },
    /// A dist-info member that does not inflate (the zip reader's reason).
    #[error("{0}")]
    Unreadable(String),
    /// A dist-info text that is not UTF-8.
    #[error("{0} is not UTF-8")]
    NotUtf8(String),
    /// A METADATA field missing or empty (`Name`, `Version`).
    #[error("METADATA has no {0}")]
    NoField(&'static str),
    /// WHEEL without a `Tag`.
    #[error("WHEEL has no Tag")]
    NoTag,
    /// The first tag not in three parts.
    #[error("WHEEL Tag {0:?} is not <python>-<abi>-<platform>")]
    TagShape(String),
    /// The first tag with an empty part.
    #[error("WHEEL Tag {0:?} has an empty part")]
    TagEmptyPart(String),
    /// A Name that is not a distribution name (it becomes part of file names).
    #[error(
        "METADATA Name {0:?} is not a valid distribution name (PEP 508: letters, digits, \
         '.', '_', '-', starting and ending with a letter or digit)"
    )]
    BadName(String),
    /// A Version with characters PEP 440 does not allow.
    #[error("METADATA Version {0:?} is not a valid version (PEP 440)")]
    BadVersion(String),
    /// A tag with characters PEP 425 does not allow.
    #[error("WHEEL Tag {0:?} is not a valid tag (PEP 425)")]
    BadTag(String),
}

/// Read the identity of a wheel from its members (reference §4.3 step 2).
pub fn identity(zip: &[u8], index: &ZipIndex) -> std::result::Result<WheelInfo, IdentityError> {
    let mut dist_infos: Vec<&str> = index
        .members
        .iter()
        .filter_map(|m| {
            m.name
                .split('/')
                .next()
                .filter(|d| d.ends_with(".dist-info") && m.name.len() > d.len())
        })
        .collect();
    dist_infos.sort_unstable();
    dist_infos.dedup();
    let dist_info = match dist_infos.as_slice() {
        [one] => one.to_string(),
        [] => return Err(IdentityError::NoDistInfo),
        many => {
            return Err(IdentityError::ManyDistInfo(
                many.iter().map(|d| d.to_string()).collect(),
            ));
        }
    };
    let text = |name: &str| -> std::result::Result<String, IdentityError> {
        let full = format!("{dist_info}/{name}");
        let Some(m) = index.members.iter().find(|m| m.name == full) else {
            return Err(IdentityError::Missing(full));
        };
        if m.size > MAX_TEXT {
            return Err(IdentityError::TooLarge {
                member: full,
                size: m.size,
            });
        }
        let bytes = m
            .read_all(zip)
            .map_err(|e| IdentityError::Unreadable(e.to_string()))?;
        String::from_utf8(bytes).map_err(|_| IdentityError::NotUtf8(full))
    };
    let md = text("METADATA")?;
    let headers = metadata::headers(&md);
    let field = |k: &str| {
        headers
            .iter()
            .find(|(h, _)| h.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.to_string())
    };
    let name = field("Name")
        .filter(|s| !s.is_empty())
        .ok_or(IdentityError::NoField("Name"))?;
    let version = field("Version")
        .filter(|s| !s.is_empty())
        .ok_or(IdentityError::NoField("Version"))?;
    let wheel = text("WHEEL")?;
    let tags: Vec<String> = metadata::headers(&wheel)
        .into_iter()
        .filter(|(h, _)| h.eq_ignore_ascii_case("Tag"))
        .map(|(_, v)| v.to_string())
        .collect();
    let first = tags.first().ok_or(IdentityError::NoTag)?;
    let parts: Vec<&str> = first.split('-').collect();
    let [py, abi, plat] = parts.as_slice() else {
        return Err(IdentityError::TagShape(first.clone()));
    };
    if [py, abi, plat].iter().any(|p| p.is_empty()) {
        return Err(IdentityError::TagEmptyPart(first.clone()));
    }
    check_identity(&name, &version, &tags)?;
    let files = index.members.iter().filter(|m| !m.is_dir());
    Ok(WheelInfo {
        tag: [py.to_string(), abi.to_string(), plat.to_string()],
        name,
        version,
        dist_info,
        members: files.clone().count() as u64,
        bytes: files.clone().map(|m| m.size).sum(),
        stored_bytes: files.map(|m| m.compressed_size).sum(),
        tags,
    })
}

/// Names read from a wheel are data: a split builds file names (`<name>_<arch>.kpack`,
/// `<name>-<version>.dist-info/`, the wheels' file names) from them, so each must be
/// what the packaging specifications allow before it is used. Distribution names as
/// PEP 508 says (letters, digits, `.`, `_`, `-`, starting and ending with a letter
/// or digit), versions as PEP 440's characters, tags as PEP 425's.
fn check_identity(
    name: &str,
    version: &str,
    tags: &[String],
) -> std::result::Result<(), IdentityError> {
    let word = |s: &str, extra: &[char]| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || extra.contains(&c))
    };
    let ends_alnum = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && s.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
    };
    if !word(name, &['.', '_', '-']) || !ends_alnum(name) {
        return Err(IdentityError::BadName(name.to_string()));
    }
    if !word(version, &['.', '_', '-', '+', '!']) || !ends_alnum(version) {
        return Err(IdentityError::BadVersion(version.to_string()));
    }
    for t in tags {
        if !t.split('-').all(|part| word(part, &['.', '_'])) {
            return Err(IdentityError::BadTag(t.clone()));
        }
    }
    Ok(())
}

/// Read a member fully through its checks, into `out`.
pub fn copy_member(zip: &[u8], m: &Member, out: &mut dyn std::io::Write) -> std::io::Result<u64> {
    let mut r = m.reader(zip);
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        let k = r.read(&mut buf)?;
        if k == 0 {
            return Ok(n);
        }
        out.write_all(&buf[..k])?;
        n += k as u64;
    }
}
