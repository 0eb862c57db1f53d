//! kpack's own formats: `.kpack` archives and the `.rocm_kpack_ref` marker.

pub mod archive;
pub mod marker;
pub mod msgpack;

pub use archive::{Archive, ArchiveMeta, ArchiveWriter, Scheme};
pub use marker::Marker;
