//! Fat binaries whatever their container: ELF (`.hip_fatbin`) or PE/COFF (`.hip_fat`).
//! The operations that pack, split, the wheel split and the kernel reader share: the
//! bundles and the bytes they sit in, and the host-only rewrite, each dispatched to
//! the container's own module ([`crate::elf`], [`crate::coff`]).

use crate::bundle::BundleInfo;
use crate::elf::{self, ElfContent};
use crate::error::FormatResult;
use crate::kpack::Marker;

/// The device code of a fat binary.
pub struct Fat<'a> {
    /// The section holding the bundles.
    pub section: &'a [u8],
    /// Its bundles, in order (index = the TU index of archive keys `#k`).
    pub bundles: Vec<BundleInfo>,
}

/// The bundles of an ELF or PE fat binary; `Ok(None)` for anything else (host-only
/// binaries included: their device code is in archives).
pub fn read(data: &[u8]) -> FormatResult<Option<Fat<'_>>> {
    if elf::is_elf(data) {
        return match elf::inspect(data)? {
            ElfContent::Fat(fat) if !fat.host_only => {
                let fat = *fat;
                let Some(span) = fat.fatbin else {
                    return Ok(None);
                };
                let end = span.offset.saturating_add(span.size) as usize;
                let bundles = fat.bundles;
                Ok(data
                    .get(span.offset as usize..end)
                    .map(|section| Fat { section, bundles }))
            }
            _ => Ok(None),
        };
    }
    if crate::coff::is_pe(data) {
        return match crate::coff::inspect(data)? {
            Some(pe) if !pe.host_only => {
                let Some((off, len)) = pe.fatbin else {
                    return Ok(None);
                };
                let bundles = pe.bundles;
                Ok(data
                    .get(off as usize..(off + len) as usize)
                    .map(|section| Fat { section, bundles }))
            }
            _ => Ok(None),
        };
    }
    Ok(None)
}

/// The host-only rewrite of an ELF or PE fat binary with `marker`: the new bytes, or
/// why not.
pub fn rewrite_host_only(data: &[u8], marker: &Marker) -> Result<Vec<u8>, String> {
    if crate::coff::is_pe(data) && !elf::is_elf(data) {
        return crate::coff::rewrite::plan_rewrite(data, marker)
            .map(|r| r.bytes)
            .map_err(|e| e.to_string());
    }
    elf::rewrite::plan_rewrite(data, marker)
        .map(|r| r.bytes)
        .map_err(|e| e.to_string())
}

/// The host-only rewrite of a fat binary, computed (nothing written): what changes,
/// in the terms of its container.
#[derive(Debug, Clone)]
pub enum Plan {
    /// An ELF binary's plan: program headers and sections before and after.
    Elf(Box<elf::rewrite::RewritePlan>),
    /// A PE image's plan: the raw data removed, the `.kpackrf` section, the wrappers.
    Pe(Box<crate::coff::rewrite::PeRewritePlan>),
}

/// The plan of [`rewrite_host_only`] (the preview of the CLI and the TUI), or why
/// the binary cannot be rewritten.
pub fn plan_host_only(data: &[u8], marker: &Marker) -> Result<Plan, String> {
    if crate::coff::is_pe(data) && !elf::is_elf(data) {
        return crate::coff::rewrite::plan_rewrite(data, marker)
            .map(|r| Plan::Pe(Box::new(r.plan)))
            .map_err(|e| e.to_string());
    }
    elf::rewrite::plan_rewrite(data, marker)
        .map(|r| Plan::Elf(Box::new(r.plan)))
        .map_err(|e| e.to_string())
}

/// A host-only ELF or PE binary pointed at other archives (its marker replaced): the
/// new bytes, or why not.
pub fn replace_marker(data: &[u8], marker: &Marker) -> Result<Vec<u8>, String> {
    if crate::coff::is_pe(data) && !elf::is_elf(data) {
        return crate::coff::rewrite::replace_marker(data, marker).map_err(|e| e.to_string());
    }
    elf::remark::replace_marker(data, marker).map_err(|e| e.to_string())
}

/// A host-only ELF or PE binary read as its loader maps it: the faults that would
/// keep the runtime from its marker (empty: every wrapper reaches it), or `None`
/// when it has no HIP wrappers.
pub fn loaded_faults(data: &[u8]) -> Result<Option<Vec<String>>, String> {
    if crate::coff::is_pe(data) && !elf::is_elf(data) {
        return crate::coff::loaded::loaded_faults(data);
    }
    elf::loaded::loaded_view(data).map(|v| v.map(|v| v.faults))
}
