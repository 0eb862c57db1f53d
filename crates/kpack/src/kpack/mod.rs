//! The `.kpack` archive, the `.rocm_kpack_ref` marker, the runtime's lookup through
//! them, and the ledger a pack leaves beside its archives.

pub mod alias;
pub mod archive;
pub mod ledger;
pub mod marker;
pub mod msgpack;
pub mod resolve;

pub use archive::{Archive, ArchiveMeta, ArchiveWriter, Scheme};
pub use marker::Marker;
