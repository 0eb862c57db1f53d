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

//!
//! | file | what |
//! |---|---|
//! | `index.rs` | reading the header, the TOC and the frame list (bounded, typed) |
//! | `reader.rs` | [`Archive`]: open over an mmap, fetch and decode one kernel |
//! | `verify.rs` | [`Archive::verify`]: every range, ordinal and frame checked |
//! | `extract.rs` | writing kernels out under a directory, paths kept inside it |
//! | `write.rs` | [`ArchiveWriter`]: kernels in any order, one deterministic file |

mod extract;
mod index;
mod reader;
mod tocmeta;
mod verify;
pub use tocmeta::TocMetadata;
mod write;

pub use crate::error::{UnsafeKey, UnsafePath, WriteError};
pub use extract::{extract_path, safe_arch, safe_relative_path};
pub use index::{ReadAt, parse_index, parse_index_at, parse_index_file};
pub use reader::{Archive, decompress_frame};
pub use write::{
    ArchiveSummary, ArchiveWriter, ENCODE_CHUNK, Encoded, Source, archive_size, encode_kernel,
    encode_kernel_until,
};

use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

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
/// The level `--level max` stands for: zstd's highest (22), with long-distance
/// matching and a window as large as each kernel (up to the largest window the
/// reference C++ reader accepts without being told: 2^27 bytes).
pub const LEVEL_MAX: i32 = 22;
/// From this level on (zstd's "ultra" range begins at 20; 19 is the highest ordinary
/// level) the window is fitted to each kernel instead of zstd's default for the level.
pub const LEVEL_FIT_WINDOW: i32 = 19;
/// The largest window log a frame may use: what `ZSTD_decompressDCtx` accepts by
/// default (`ZSTD_WINDOWLOG_LIMIT_DEFAULT`), as the reference runtime calls it.
pub const MAX_WINDOW_LOG: u32 = 27;

/// How kernels are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KernelEntry {
    /// Binary key, `relative/path#TU-index`.
    // Shared by the key's entries, and the target by the archive's entries of that
    // target: an index of a whole tree's archives holds one of each.
    pub key: Arc<str>,
    /// Full target ID.
    pub arch: Arc<str>,
    /// Index into the blob list.
    pub ordinal: u32,
    /// Uncompressed size (`original_size`; for scheme none, the blob size).
    #[serde(rename = "raw_size")]
    pub size: u64,
    /// Bytes stored in the file.
    #[serde(rename = "stored_size")]
    pub compressed_size: u64,
    /// File offset of the stored bytes.
    pub offset: u64,
    /// String-valued metadata entries, if any.
    #[serde(skip_serializing_if = "TocMetadata::is_empty")]
    #[cfg_attr(feature = "schema", schemars(with = "BTreeMap<String, String>"))]
    pub metadata: TocMetadata,
    /// For a TOC alias (the same frame listed again under another target of the
    /// same key, see [`crate::kpack::alias`]), the target of the entry it repeats.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias_of: Option<Arc<str>>,
}

impl KernelEntry {
    /// Whether this entry repeats another's frame (count it once).
    pub fn is_alias(&self) -> bool {
        self.alias_of.is_some()
    }
}

/// The parsed header and TOC.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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

#[cfg(test)]
mod tests;
