//! kpack: the core of kpack-tui.
//!
//! Reads HIP fat binaries and the formats around them, with no terminal code:
//! the TUI and the batch mode are two consumers of the same operations.
//!
//! | module | what |
//! |---|---|
//! | [`bundle`] | clang offload bundles (plain and CCOB) inside `.hip_fatbin` |
//! | [`elf`] | ELF fat binaries, objects and static archives: bundles, wrappers, markers |
//! | [`codeobj`] | AMDGPU code objects: target, version, kernels (metadata note, code sizes) |
//! | [`diff`] | two builds compared: per target, file, kernel and class; growth budgets |
//! | [`coff`] | PE/COFF images with `.hip_fat` sections: inspection and the host-only rewrite |
//! | [`embedded`] | device code linked into a binary's data outside `.hip_fatbin` (loaded by the library itself) |
//! | [`fatbin`] | fat binaries whatever the container (ELF or PE): bundles and the host-only rewrite |
//! | [`kpack`] | the `.rocm_kpack_ref` marker |
//! | [`relpath`] | relative paths carried as exact text (names that are not UTF-8 escaped) |
//! | [`scan`] | walking an install tree and classifying every file |
//! | [`phc`] | the parallel per-arch HIP compile launcher and its jobserver client |
//! | [`pack`] | packing a tree: archives, host-only rewrites, the ledger, `verify` |
//! | [`artifacts`] | ROCm build artifacts: `split` (map) and `combine` (reduce) |
//! | [`kernels`] | every kernel under a path (binaries, bundles, archives, code objects) |
//! | [`occupancy`] | waves per SIMD a kernel's registers and LDS allow, per generation |
//! | [`zip`] | zip archives: a checked central-directory reader and a deterministic writer |
//! | [`wheel`] | Python wheels: identity, contents, and the split into host and device wheels |
//! | [`kerneldb`] | kernel-database handlers (Tensile, MIOpen, CK, AOTriton, hipkernelprovider, RocJitsu) |
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::panic)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::panic))]

pub mod artifacts;
pub mod bundle;
pub mod codeobj;
pub mod coff;
pub mod diff;
pub mod elf;
pub mod embedded;
pub mod error;
pub mod event;
pub mod family;
pub mod fatbin;
pub mod fsutil;
#[doc(hidden)]
pub mod fuzzing;
pub mod kerneldb;
pub mod kernels;
pub mod kpack;
pub mod mapped;
pub mod natural;
pub mod occupancy;
pub mod pack;
pub mod parallel;
pub mod phc;
pub mod place;
pub mod relpath;
pub mod scan;
pub mod trace;
pub mod wheel;
pub mod zip;

pub use error::{Error, FormatError, Result};
