//! Zip archives (Python wheels are zips): a reader that checks the central directory
//! before trusting it and reads members in place, and a deterministic writer.
//!
//! Written here rather than taken from the `zip` crate because the wheel split needs
//! what that crate's `Read + Seek` model hides: members read zero-copy from an mmap,
//! overlap checks between members, and members compressed in parallel beforehand
//! and only concatenated by the writer.

pub mod read;
pub mod write;

pub use read::{Member, MemberReader, Method, ZipIndex, is_zip, read_index, read_index_releasing};
pub use write::{Stored, ZipWriter};
