//! ROCm build artifacts (TheRock): an artifact directory is an
//! `artifact_manifest.txt` listing stage prefixes, and one directory per prefix.
//! [`split`] is the map step (one build machine: generic + per-target artifacts),
//! [`combine`] the reduce step (the shards of several machines into one set).

pub mod combine;
pub mod manifest;
pub mod split;

pub use manifest::{MANIFEST, read_manifest};
pub use split::{SplitOptions, SplitReport, split};
