//! Program headers where old kernels look for them (workflows §5).
//!
//! Linux 4.18 (EL8) computes `AT_PHDR` as the load address plus `e_phoff`, without
//! mapping `e_phoff` through its segment: a directly run executable whose relocated
//! table sits at an address other than load address + file offset crashes in ld.so.
//! The rewrite places the table right; tools run afterwards can move it again —
//! `llvm-strip` removes bytes before the table and shifts its file offset but not its
//! address. [`normalize`] puts the table's segment back at the file offset its
//! address implies (zero padding, written sparse, then a copy of the segment), so
//! every address — the marker's, which the wrappers point at, included — stays.
//!
//! The reference instead moves the segment's address to its offset, which for our
//! layout would move the marker away from the wrappers' pointers; for
//! position-independent executables (load bias 0) both rules agree on what is
//! compliant: `p_vaddr == p_offset`. For non-PIE executables "compliant" is
//! `p_vaddr == p_offset + load bias`, what the kernel actually computes.

use super::rewrite::{PAGE, PHENT, SHENT, parse_layout, rd_u64, wr_u64};
use crate::elf::rewrite::RewriteError;
use serde::Serialize;

type Result<T> = std::result::Result<T, RewriteError>;

const PT_LOAD: u32 = 1;
const PT_INTERP: u32 = 3;
const PT_PHDR: u32 = 6;

/// Where a file stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum PhdrState {
    /// Not an executable with an interpreter, or its table is where the linker put
    /// it: nothing to check.
    NotApplicable,
    /// The relocated table is where EL8 kernels look.
    Compliant,
    /// The table's segment has `p_vaddr != p_offset + load bias`; [`normalize`]
    /// repairs it.
    Noncompliant {
        /// The segment's file offset.
        offset: u64,
        /// Its address.
        vaddr: u64,
        /// The load bias (0 for PIE).
        bias: u64,
    },
    /// Re-laid out beyond repair here (e.g. by GNU strip, which moves the segment's
    /// address away from its physical address and from the marker the wrappers
    /// point at): re-pack from the unstripped tree.
    Damaged {
        /// What is wrong.
        why: String,
    },
}

/// Examine an ELF image.
pub fn check(data: &[u8]) -> Result<PhdrState> {
    let lay = parse_layout(data)?;
    if !lay.segments.iter().any(|p| p.p_type == PT_INTERP) {
        return Ok(PhdrState::NotApplicable);
    }
    let bias = lay
        .segments
        .iter()
        .find(|p| p.p_type == PT_LOAD)
        .map_or(0, |p| p.p_vaddr.wrapping_sub(p.p_offset));
    let phoff = lay.e_phoff;
    let Some(c) = lay
        .segments
        .iter()
        .find(|p| p.p_type == PT_LOAD && p.p_offset <= phoff && phoff < p.file_end())
    else {
        return Ok(if lay.segments.iter().any(|p| p.p_type == PT_PHDR) {
            PhdrState::Damaged {
                why: format!("no PT_LOAD covers the program headers at offset {phoff:#x}"),
            }
        } else {
            PhdrState::NotApplicable
        });
    };
    if c.p_offset != phoff {
        return Ok(PhdrState::NotApplicable);
    }
    if c.p_vaddr == c.p_offset.wrapping_add(bias) {
        return Ok(PhdrState::Compliant);
    }
    if c.p_vaddr != c.p_paddr {
        return Ok(PhdrState::Damaged {
            why: format!(
                "the program-header segment's address {:#x} differs from its physical \
                 address {:#x} (re-laid out by GNU strip or objcopy?)",
                c.p_vaddr, c.p_paddr
            ),
        });
    }
    Ok(PhdrState::Noncompliant {
        offset: c.p_offset,
        vaddr: c.p_vaddr,
        bias,
    })
}

/// Repair a noncompliant image: `Ok(None)` when there is nothing to do.
pub fn normalize(data: &[u8]) -> Result<Option<Vec<u8>>> {
    let (offset, vaddr, bias) = match check(data)? {
        PhdrState::Noncompliant {
            offset,
            vaddr,
            bias,
        } => (offset, vaddr, bias),
        PhdrState::Damaged { why } => return Err(RewriteError::Unsupported(why)),
        _ => return Ok(None),
    };
    let lay = parse_layout(data)?;
    let c = lay
        .segments
        .iter()
        .position(|p| p.p_type == PT_LOAD && p.p_offset == offset && p.p_vaddr == vaddr)
        .ok_or_else(|| RewriteError::Unsupported("program-header segment vanished".into()))?;
    let seg = lay.segments[c];
    let target = vaddr.wrapping_sub(bias);
    let len = data.len() as u64;
    if target < len || target % PAGE != vaddr % PAGE || target > 1 << 40 {
        return Err(RewriteError::Unsupported(format!(
            "the program-header segment cannot go back to offset {target:#x} (the file is \
             {len:#x} bytes): re-pack from the unstripped tree"
        )));
    }
    let end = seg.file_end();
    if end > len {
        return Err(RewriteError::Unsupported(format!(
            "the program-header segment ends at {end:#x}, past the end of the file"
        )));
    }
    let n = lay.segments.len() as u64;
    if offset + n * PHENT > end {
        return Err(RewriteError::Unsupported(
            "the program headers overrun their segment".into(),
        ));
    }
    let delta = target - offset;
    let mut out = Vec::with_capacity((target + seg.p_filesz) as usize);
    out.extend_from_slice(data);
    out.resize(target as usize, 0);
    out.extend_from_slice(&data[offset as usize..end as usize]);
    // The ELF header: e_phoff.
    wr_u64(&mut out, 32, target);
    // The program headers, in their new copy: the segment and PT_PHDR follow.
    for i in 0..n {
        let at = (target + i * PHENT) as usize;
        let p_type = u32::from_le_bytes([out[at], out[at + 1], out[at + 2], out[at + 3]]);
        let p_offset = rd_u64(&out, at + 8);
        let p_vaddr = rd_u64(&out, at + 16);
        if (p_type == PT_LOAD && p_offset == offset && p_vaddr == vaddr) || p_type == PT_PHDR {
            wr_u64(&mut out, at + 8, p_offset + delta);
        }
    }
    // Sections inside the segment (.kpack_phdrs, .rocm_kpack_ref) follow it.
    for (i, s) in lay.sections.iter().enumerate() {
        if s.sh_type != 8 && s.sh_offset >= offset && s.sh_offset < end && s.sh_size > 0 {
            let at = (lay.e_shoff + i as u64 * SHENT + 24) as usize;
            wr_u64(&mut out, at, s.sh_offset + delta);
        }
    }
    match check(&out)? {
        PhdrState::Compliant => Ok(Some(out)),
        other => Err(RewriteError::Unsupported(format!(
            "normalising did not make the table compliant ({other:?})"
        ))),
    }
}

/// One file's outcome in a tree run.
#[derive(Debug, Clone, Serialize)]
pub struct NormalizeEntry {
    /// The path.
    pub path: std::path::PathBuf,
    /// Its state before.
    #[serde(flatten)]
    pub state: PhdrState,
    /// Whether it was rewritten.
    pub fixed: bool,
}

/// A tree run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NormalizeReport {
    /// ELF files examined.
    pub scanned: u64,
    /// Files that needed or need attention (noncompliant, damaged).
    pub files: Vec<NormalizeEntry>,
    /// Files that could not be read or parsed (not counted as ELF).
    pub warnings: Vec<String>,
}

impl NormalizeReport {
    /// Files repaired.
    pub fn fixed(&self) -> usize {
        self.files.iter().filter(|f| f.fixed).count()
    }
    /// Files still not compliant (unrepaired noncompliant ones, damaged ones).
    pub fn remaining(&self) -> usize {
        self.files.iter().filter(|f| !f.fixed).count()
    }
}

/// Check (and unless `check_only`, repair in place, atomically, mode kept) every
/// ELF file under `paths` (files or directories, recursive, sorted, symlinks not
/// followed).
pub fn normalize_paths(
    paths: &[std::path::PathBuf],
    check_only: bool,
) -> crate::Result<NormalizeReport> {
    use crate::error::Error;
    let mut report = NormalizeReport::default();
    for root in paths {
        let meta = std::fs::symlink_metadata(root).map_err(|e| Error::io(root, e))?;
        let files: Vec<std::path::PathBuf> = if meta.is_dir() {
            walkdir::WalkDir::new(root)
                .sort_by_file_name()
                .into_iter()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_file())
                .map(|e| e.into_path())
                .collect()
        } else if meta.is_file() {
            vec![root.clone()]
        } else {
            continue;
        };
        for path in files {
            let map = match crate::fsutil::map_file(&path) {
                Ok(Some(m)) => m,
                Ok(None) => continue,
                Err(e) => {
                    report.warnings.push(format!("{}: {e}", path.display()));
                    continue;
                }
            };
            if !map.starts_with(b"\x7fELF") {
                continue;
            }
            report.scanned += 1;
            let state = match check(&map) {
                Ok(s) => s,
                Err(e) => {
                    report.warnings.push(format!("{}: {e}", path.display()));
                    continue;
                }
            };
            match state {
                PhdrState::NotApplicable | PhdrState::Compliant => {}
                PhdrState::Damaged { .. } => report.files.push(NormalizeEntry {
                    path,
                    state,
                    fixed: false,
                }),
                PhdrState::Noncompliant { .. } => {
                    let mut fixed = false;
                    if !check_only {
                        match normalize(&map) {
                            Ok(Some(bytes)) => {
                                let mode = std::fs::metadata(&path)
                                    .map_err(|e| Error::io(&path, e))?
                                    .permissions();
                                drop(map);
                                crate::fsutil::write_atomic(&path, &bytes, Some(mode))?;
                                fixed = true;
                            }
                            Ok(None) => {}
                            Err(e) => report.warnings.push(format!("{}: {e}", path.display())),
                        }
                    }
                    report.files.push(NormalizeEntry { path, state, fixed });
                }
            }
        }
    }
    Ok(report)
}
