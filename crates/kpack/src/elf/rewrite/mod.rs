//! The host-only rewrite of an ELF fat binary (spec §5).
//!
//! A packed binary keeps its host code and loses its device code. The rewrite:
//!
//! 1. adds the `.rocm_kpack_ref` marker (MessagePack `{kpack_search_paths,
//!    kernel_name}`), mapped by one new read-only `PT_LOAD` at a fresh page-aligned
//!    address above every segment; when the program-header table has no room to grow
//!    in place it moves into that same segment (`PT_PHDR` follows it, `PT_INTERP`
//!    data never moves);
//! 2. points every `.hipFatBinSegment` wrapper at the marker (RELA addend for PIE
//!    executables and shared libraries, converting a symbol-based `R_X86_64_64` to
//!    `R_X86_64_RELATIVE` (their aarch64 and ppc64le equivalents on those hosts:
//!    `machine.rs`); the stored pointer for non-PIE executables, never zeroed),
//!    writes magic `HIPK` and stores in the reserved field the index of the bundle the
//!    wrapper pointed to (its co_index; `-fgpu-rdc` wrappers share one);
//! 3. checks that no relocation still targets `.hip_fatbin`;
//! 4. removes the whole pages of `.hip_fatbin` from the file, splitting its `PT_LOAD`
//!    into head / prefix / hole (no file bytes) / tail pieces and marking the section
//!    `SHT_NOBITS`; when the section ends on a page boundary one page is kept so the
//!    hole and the tail never share a file offset;
//! 5. verifies the result before anything is written.
//!
//! Everything happens on an in-memory image: [`plan_rewrite`] computes the output
//! bytes and a [`RewritePlan`] describing them (read back from those bytes), which
//! both the preview and the TUI show; [`apply_rewrite`] writes the same bytes
//! atomically with the input's mode.
//!
//! `layout.rs` reads the program and section headers ([`parse_layout`]), `room.rs`
//! makes room for the program headers in place, `verify.rs` checks an image against
//! its input ([`verify_rewritten`]).

mod build;
mod checks;
mod image;
mod layout;
mod room;
mod verify;

pub use image::Image;

pub use layout::{ElfLayout, PHDRS_SECTION, Section, Segment, parse_layout};
pub(crate) use layout::{PHENT, SHENT, range, rd_u32, rd_u64, wr_u64};
pub use verify::{Compared, structural_faults, verify_rewritten, verify_rewritten_releasing};

const DT_RELR: u64 = 36;
const SHT_RELR: u32 = 19;

use crate::error::FormatError;
use crate::kpack::marker::Marker;
use serde::Serialize;
use std::path::Path;

/// Why a binary cannot be rewritten.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    /// Not an ELF file.
    #[error("not an ELF file")]
    NotElf,
    /// A valid ELF of a kind the rewrite does not handle.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// No `.hip_fatbin` section.
    #[error("not a fat binary (no .hip_fatbin section)")]
    NotFatBinary,
    /// The device code was already moved out.
    #[error("already host-only ({0})")]
    AlreadyHostOnly(String),
    /// Headers or tables are malformed.
    #[error("malformed ELF: {0}")]
    Malformed(FormatError),
    /// The binary is well-formed, but the rewrite could not be done faithfully.
    #[error("cannot rewrite: {0}")]
    Refused(String),
    /// The computed output failed verification (nothing was written).
    #[error("the rewritten image fails verification: {}", .0.join("; "))]
    VerifyFailed(Vec<String>),
}

pub(crate) type Result<T> = std::result::Result<T, RewriteError>;

fn malformed(offset: u64, what: impl Into<String>) -> RewriteError {
    RewriteError::Malformed(FormatError::new(offset, what.into()))
}

/// What happens to one wrapper.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WrapperChange {
    /// Position in `.hipFatBinSegment`.
    pub index: usize,
    /// Where its pointer pointed (a bundle start in `.hip_fatbin`).
    pub old_pointer: u64,
    /// The marker's address.
    pub new_pointer: u64,
    /// The bundle it pointed to: stored as co_index.
    pub co_index: u32,
    /// How the pointer is set.
    pub via: PointerVia,
}

/// How a wrapper's pointer to its bundle is set, and so how the rewrite re-points
/// it at the marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum PointerVia {
    /// An `R_*_RELATIVE` relocation's addend (shared libraries, PIE).
    #[serde(rename = "rela-relative")]
    RelaRelative,
    /// An absolute 64-bit relocation against a symbol, turned into a relative one.
    #[serde(rename = "rela-abs64→relative")]
    RelaAbs64ToRelative,
    /// The value in the wrapper itself (executables that are not PIE).
    #[serde(rename = "in-place")]
    InPlace,
}

impl PointerVia {
    /// The spelling reports use (`rela-relative`, `rela-abs64→relative`,
    /// `in-place`).
    pub fn name(self) -> &'static str {
        match self {
            PointerVia::RelaRelative => "rela-relative",
            PointerVia::RelaAbs64ToRelative => "rela-abs64→relative",
            PointerVia::InPlace => "in-place",
        }
    }
}

/// The rewrite, computed: what changes, and the bytes to write.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RewritePlan {
    /// The host CPU.
    pub machine: crate::elf::machine::HostMachine,
    /// The page size the file is laid out for (whole pages of it are removed).
    pub page: u64,
    /// Input size.
    pub input_size: u64,
    /// Output size.
    pub output_size: u64,
    /// Bytes of `.hip_fatbin` removed from the file (whole pages).
    pub bytes_removed: u64,
    /// Size of `.hip_fatbin`.
    pub fatbin_size: u64,
    /// Number of bundles in `.hip_fatbin`.
    pub bundles: usize,
    /// The marker written.
    pub marker: Marker,
    /// Its encoded size.
    pub marker_size: u64,
    /// Its virtual address.
    pub marker_vaddr: u64,
    /// Whether the program-header table moved into the new segment.
    pub phdr_relocated: bool,
    /// Zero bytes added so that an executable's moved program-header table is mapped
    /// where the kernel looks for it (address = offset + load bias; EL8 kernels).
    pub phdr_padding: u64,
    /// Sections that followed the program-header table and moved beside the marker,
    /// so that the table grows in place (empty when it had room, or was relocated).
    pub moved_sections: Vec<String>,
    /// The wrappers redirected.
    pub wrappers: Vec<WrapperChange>,
    /// Program headers before.
    pub segments_before: Vec<Segment>,
    /// Program headers after.
    pub segments_after: Vec<Segment>,
    /// Sections before.
    pub sections_before: Vec<Section>,
    /// Sections after.
    pub sections_after: Vec<Section>,
}

/// A computed rewrite: the plan and the output bytes.
pub struct Rewritten {
    /// What changes.
    pub plan: RewritePlan,
    /// The output image.
    pub bytes: Vec<u8>,
}

fn round_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a).saturating_mul(a)
}

/// Where a grown program-header table goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PhdrLayout {
    /// In place: the sections after the table move beside the marker when it has no
    /// room (what GNU strip and objcopy keep; the default).
    #[default]
    InPlace,
    /// Into the new segment, as the reference transform does (kept to produce that
    /// layout in tests of `normalize` and `verify`; GNU strip breaks it).
    Reference,
}

/// Compute the host-only rewrite of `data` with `marker`. Nothing is written.
pub fn plan_rewrite(data: &[u8], marker: &Marker) -> Result<Rewritten> {
    plan_rewrite_with(data, marker, PhdrLayout::InPlace)
}

/// [`plan_rewrite`] with the program-header table placed as `phdrs` says.
pub fn plan_rewrite_with(data: &[u8], marker: &Marker, phdrs: PhdrLayout) -> Result<Rewritten> {
    let prepared = prepare_rewrite_with(data, marker, phdrs, &|_, _| {})?;
    let bytes = prepared.image.to_vec();
    let plan = prepared.verify(data, &bytes, &|_, _| {})?;
    Ok(Rewritten { plan, bytes })
}

/// The host-only rewrite of `data` with `marker`, up to its bytes: nothing is built
/// or verified yet ([`Prepared::verify`] does that on the bytes, however they are
/// kept). Each bundle's bytes are handed to `release` (offset in `data`, length)
/// once its header is read: a file map's pages of a section of many bundles leave
/// the resident set as they are read (one 2 MiB folio mapped for each header).
pub fn prepare_rewrite<'a>(
    data: &'a [u8],
    marker: &Marker,
    release: &dyn Fn(usize, usize),
) -> Result<Prepared<'a>> {
    prepare_rewrite_with(data, marker, PhdrLayout::InPlace, release)
}

/// [`prepare_rewrite`] with the program-header table placed as `phdrs` says.
pub fn prepare_rewrite_with<'a>(
    data: &'a [u8],
    marker: &Marker,
    phdrs: PhdrLayout,
    release: &dyn Fn(usize, usize),
) -> Result<Prepared<'a>> {
    // --- What the binary is, its relocations, where its wrappers point.
    let site = checks::Site::read(data, release)?;
    let relocs = checks::Relocs::index(&site)?;
    let targets = checks::wrapper_targets(&site, &relocs)?;
    // --- Zero-paging: which file bytes go, and the program headers around them.
    let cut = checks::Cut::find(&site)?;
    let mut segs = build::split_segments(&site, &cut);
    // --- Where the table, a moved block and the marker go.
    let marker_bytes = marker.encode();
    let marker_len = marker_bytes.len() as u64;
    let place = build::Place::choose(&site, &relocs, &cut, phdrs, segs.len())?;
    // --- Output image: the input without the removed pages, then the patches at
    // their shifted offsets (one copy of the bytes kept; removed pages never read).
    let cut_range = cut.range.start as usize..cut.range.end as usize;
    let mut out = Image::new(data, cut_range);
    let changes =
        build::patch_wrappers(&mut out, &site, &relocs, &cut, &targets, place.marker_vaddr);
    let app = build::append_segment(&mut out, &place, &marker_bytes);
    let e_phoff = build::final_segments(&mut segs, &site, &place, &app, marker_len);
    let (sections, e_shstrndx) =
        build::final_sections(&mut out, &site, &cut, &place, &app, &mut segs, marker_len)?;
    build::write_headers(&mut out, &segs, &sections, e_phoff, e_shstrndx);

    let lay = &site.lay;
    let moved = (place.room.as_ref())
        .filter(|_| place.block_at.is_some())
        .map(|r| {
            (
                r.vaddr..r.vaddr + r.len(),
                place.block_shift(r, app.new_off),
            )
        });
    let plan = RewritePlan {
        machine: site.machine,
        page: site.page(),
        input_size: data.len() as u64,
        output_size: out.len() as u64,
        bytes_removed: cut.removed,
        fatbin_size: site.fb.sh_size,
        bundles: site.bundle_offsets.len(),
        marker: marker.clone(),
        marker_size: marker_len,
        marker_vaddr: place.marker_vaddr,
        phdr_relocated: !place.fits_in_place,
        phdr_padding: app.phdr_padding,
        moved_sections: place
            .room
            .as_ref()
            .map(|r| {
                let mut v: Vec<&Section> = r.sections.iter().map(|&i| &lay.sections[i]).collect();
                v.sort_by_key(|s| s.sh_offset);
                v.iter().map(|s| s.name.clone()).collect()
            })
            .unwrap_or_default(),
        wrappers: changes,
        segments_before: lay.segments.clone(),
        segments_after: Vec::new(),
        sections_before: lay.sections.clone(),
        sections_after: Vec::new(),
    };
    Ok(Prepared {
        image: out,
        plan,
        moved,
    })
}

/// A rewrite computed up to its bytes, which are not built yet: the output
/// [`Image`] over the input and the plan, to be completed by [`Prepared::verify`]
/// once the bytes exist (in memory or written to a file).
pub struct Prepared<'a> {
    /// The output.
    pub image: Image<'a>,
    plan: RewritePlan,
    moved: Option<(std::ops::Range<u64>, u64)>,
}

impl Prepared<'_> {
    /// Verify `out`, this image's bytes as built or as written and read back, against
    /// `input`, and complete the plan with the headers read from them. `done` is told
    /// the ranges of input and output whose contents were compared (see
    /// [`verify_rewritten_releasing`]).
    pub fn verify(self, input: &[u8], out: &[u8], done: &dyn Compared) -> Result<RewritePlan> {
        if out.len() != self.image.len() {
            return Err(RewriteError::VerifyFailed(vec![format!(
                "{} bytes were written of {}",
                out.len(),
                self.image.len()
            )]));
        }
        let mut plan = self.plan;
        let mut faults =
            verify_rewritten_releasing(input, out, &plan.marker, plan.bundles, self.moved, done);
        match crate::elf::loaded::loaded_view(out) {
            Ok(Some(view)) => faults.extend(view.faults),
            Ok(None) => faults.push("no wrapper section in the loaded image".into()),
            Err(e) => faults.push(format!("the loader cannot read it: {e}")),
        }
        if !faults.is_empty() {
            return Err(RewriteError::VerifyFailed(faults));
        }
        let after = parse_layout(out)?;
        plan.segments_after = after.segments;
        plan.sections_after = after.sections;
        Ok(plan)
    }
}

/// Rewrite `input` to `output` atomically (temp file in the output's directory, then
/// rename), with the input's permission bits. Returns the plan.
pub fn apply_rewrite(input: &Path, output: &Path, marker: &Marker) -> crate::Result<RewritePlan> {
    crate::fsutil::check_apart(input, output)?;
    let map = crate::fsutil::map_file(input).map_err(|e| crate::Error::io(input, e))?;
    let data: &[u8] = map.as_deref().unwrap_or_default();
    let rewritten = plan_rewrite(data, marker).map_err(|e| crate::Error::Unsupported {
        path: input.to_path_buf(),
        what: e.to_string(),
    })?;
    let mode = std::fs::metadata(input)
        .map_err(|e| crate::Error::io(input, e))?
        .permissions();
    crate::fsutil::write_atomic(output, &rewritten.bytes, Some(mode))?;
    Ok(rewritten.plan)
}
