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
//!
//! Every reader takes bytes (callers map files with [`fsutil`] or [`mapped`]) and
//! returns typed errors with the byte offset of the problem; sizes read from files are
//! bounded before they are trusted. The operations on trees ([`scan`], [`pack`],
//! [`artifacts`], [`wheel`]) report progress through [`event`] and stop when their
//! [`event::CancelToken`] is cancelled; the library installs no signal handler.
//!
//! # Examples
//!
//! The device code of a fat binary, ELF or PE, bundle by bundle:
//!
//! ```
//! let bytes = std::fs::read("../../tests/fixtures/bin/libvadd.so")?;
//! let fat = kpack::fatbin::read(&bytes)?.expect("a fat binary");
//! for bundle in &fat.bundles {
//!     let plain = bundle.uncompressed(fat.section, 1 << 30)?;
//!     for (entry, code) in bundle.code_objects(&plain)? {
//!         let info = kpack::codeobj::read(code)?;
//!         println!("{}: {} kernels", entry.id.triple, info.kernels.len());
//!         assert!(info.kernels.iter().any(|k| k.name.contains("vadd")));
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A `.kpack` archive, written and read back (nothing appears at the path until
//! `finish`; the reader maps the file and decodes one kernel at a time):
//!
//! ```
//! use kpack::kpack::archive::{Archive, ArchiveMeta, ArchiveWriter, Scheme};
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("demo_gfx90a.kpack");
//! let meta = ArchiveMeta {
//!     group_name: "demo".into(),
//!     gfx_arch_family: "gfx90a".into(),
//!     gfx_arches: vec!["gfx90a".into()],
//! };
//! let writer = ArchiveWriter::create(&path, meta, Scheme::ZstdPerKernel, 3)?;
//! let code = std::fs::read("../../tests/fixtures/bin/vadd-gfx90a.co")?;
//! writer.add("lib/libvadd.so#0", "gfx90a", &code)?;
//! writer.finish()?;
//!
//! let archive = Archive::open(&path)?;
//! let entry = archive.entry("lib/libvadd.so#0", "gfx90a").expect("listed");
//! assert_eq!(&archive.kernel(entry)?[..], &code[..]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A ninja or phc trace, every job with its duration:
//!
//! ```
//! let bytes = std::fs::read("../../tests/fixtures/traces/phc-make-j2.trace")?;
//! let trace = kpack::trace::parse(&bytes);
//! assert!(trace.diagnostics.is_empty());
//! for build in &trace.builds {
//!     for job in &build.jobs {
//!         println!("{:>6} ms  {}", job.duration(), build.label(job));
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
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
pub mod intern;
pub mod kerneldb;
pub mod kernels;
pub mod kpack;
pub mod mapped;
pub mod natural;
pub mod occupancy;
pub mod pack;
pub mod parallel;
pub mod pathstore;
pub mod phc;
pub mod place;
pub mod relpath;
pub mod scan;
pub mod spill;
#[cfg(test)]
mod testdata;
pub mod trace;
pub mod wheel;
pub mod wheel_split;
pub mod zip;

pub use error::{Error, FormatError, Result};
