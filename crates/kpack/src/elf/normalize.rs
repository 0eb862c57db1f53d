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

use super::rewrite::{ElfLayout, PHENT, SHENT, parse_layout, wr_u64};
use crate::elf::rewrite::RewriteError;
use crate::kpack::marker::MARKER_SECTION;
use serde::Serialize;

type Result<T> = std::result::Result<T, RewriteError>;

const PT_LOAD: u32 = 1;
const PT_INTERP: u32 = 3;
const PT_PHDR: u32 = 6;

/// Where a file stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// The segment that maps the marker was moved away from its sections (GNU strip
    /// re-laying out the reference layout's trailing segment), so the wrappers point
    /// at other bytes; the bytes are all there: [`normalize`] maps them back at the
    /// address their sections (and the segment's physical address) give.
    Moved {
        /// What moved.
        why: String,
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
    // A host-only binary must reach its marker as the loader maps it (what verify
    // checks about its layout): GNU strip can move the marker's segment.
    if lay.sections.iter().any(|s| s.name == MARKER_SECTION)
        && let Ok(Some(view)) = crate::elf::loaded::loaded_view(data)
        && !view.faults.is_empty()
    {
        let why = match view.faults.len() {
            1 => view.faults[0].clone(),
            n => format!("{} (and {} more like it)", view.faults[0], n - 1),
        };
        return Ok(match plan_remap(data, &lay) {
            Ok(_) => PhdrState::Moved { why },
            Err(e) => PhdrState::Damaged {
                why: format!("{why}; cannot map it back: {e}"),
            },
        });
    }
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

/// How to repair a noncompliant image: the output is the input, zero-padded to
/// `target` (a hole on disk), then a copy of the segment `[offset, end)`, with
/// 8-byte little-endian `patches` (output offset, value) written over both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// Where the segment goes.
    pub target: u64,
    /// The segment's current file range.
    pub offset: u64,
    /// End of that range.
    pub end: u64,
    /// Header fields to change, at their offsets in the output.
    pub patches: Vec<(u64, u64)>,
}

impl Repair {
    /// Output size.
    pub fn len(&self) -> u64 {
        self.target + (self.end - self.offset)
    }

    /// Never empty (the segment holds the program headers).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The output in memory.
    pub fn apply(&self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len() as usize);
        out.extend_from_slice(data);
        out.resize(self.target as usize, 0);
        out.extend_from_slice(&data[self.offset as usize..self.end as usize]);
        for &(at, v) in &self.patches {
            wr_u64(&mut out, at as usize, v);
        }
        out
    }

    /// Write the output to a new file, streaming: the input, a hole, the segment.
    pub fn write_to(&self, data: &[u8], f: &mut std::fs::File) -> std::io::Result<()> {
        use std::io::{Seek, SeekFrom, Write};
        use std::os::unix::fs::FileExt;
        f.write_all(data)?;
        f.set_len(self.target)?;
        f.seek(SeekFrom::Start(self.target))?;
        f.write_all(&data[self.offset as usize..self.end as usize])?;
        for &(at, v) in &self.patches {
            f.write_all_at(&v.to_le_bytes(), at)?;
        }
        Ok(())
    }
}

/// Plan putting the segment that holds the marker back where its sections are: a
/// copy of the sections' bytes at the end of the file, at an offset congruent with
/// their address, and the segment pointed at it. Only for shared libraries (an
/// executable's program headers moved with that segment, and the kernel maps them).
fn plan_remap(data: &[u8], lay: &ElfLayout) -> Result<Repair> {
    let no = |why: &str| Err(RewriteError::Unsupported(why.to_string()));
    if lay.segments.iter().any(|p| p.p_type == PT_INTERP) {
        return no("an executable's moved program headers are not repaired here");
    }
    let Some(m) = lay.sections.iter().find(|s| s.name == MARKER_SECTION) else {
        return no("no marker section");
    };
    let Some((li, l)) = lay.segments.iter().enumerate().find(|(_, p)| {
        p.p_type == PT_LOAD && m.sh_offset >= p.p_offset && m.sh_offset < p.file_end()
    }) else {
        return no("no PT_LOAD maps the marker's bytes");
    };
    // The loaded sections whose bytes the segment holds, in file order.
    let mut secs: Vec<(usize, &crate::elf::rewrite::Section)> = lay
        .sections
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.sh_flags & 2 != 0
                && s.sh_type != 8
                && s.sh_size > 0
                && s.sh_offset >= l.p_offset
                && s.sh_offset + s.sh_size <= l.file_end()
        })
        .collect();
    secs.sort_by_key(|(_, s)| s.sh_offset);
    let (Some(&(_, first)), Some(&(_, last))) = (secs.first(), secs.last()) else {
        return no("the marker's segment holds no loaded section");
    };
    let base = first.sh_addr;
    if secs
        .iter()
        .any(|(_, s)| s.sh_addr.wrapping_sub(base) != s.sh_offset - first.sh_offset)
    {
        return no("the segment's sections no longer keep their relative places");
    }
    if l.p_paddr != l.p_vaddr && l.p_paddr != base {
        return no("the segment's physical address is not its sections' address");
    }
    let end = last.sh_offset + last.sh_size;
    let size = end - first.sh_offset;
    // It must not share a page with any other segment (the moved one overlapped the
    // page of the data segment's .bss).
    let page = lay.page;
    let page_lo = base / page * page;
    let page_hi = (base + size).div_ceil(page) * page;
    if lay.segments.iter().enumerate().any(|(i, p)| {
        i != li
            && p.p_type == PT_LOAD
            && p.p_memsz > 0
            && p.p_vaddr < page_hi
            && page_lo < (p.p_vaddr + p.p_memsz).div_ceil(page) * page
    }) {
        return no("its sections' addresses share a page with another segment");
    }
    let len = data.len() as u64;
    let target = len.div_ceil(page) * page + base % page;
    let at = lay.e_phoff + li as u64 * PHENT;
    let mut patches = vec![
        (at + 8, target),
        (at + 16, base),
        (at + 24, base),
        (at + 32, size),
        (at + 40, size),
    ];
    for &(i, s) in &secs {
        patches.push((
            lay.e_shoff + i as u64 * SHENT + 24,
            target + (s.sh_offset - first.sh_offset),
        ));
    }
    // GNU strip also puts the device range's file-less segment at offset 0, away
    // from its NOBITS section: give it the section's (congruent) offset back, so
    // that tools placing NOBITS sections by offset find it there.
    for (i, p) in lay.segments.iter().enumerate() {
        if p.p_type != PT_LOAD || p.p_filesz != 0 || p.p_memsz == 0 {
            continue;
        }
        let held = lay
            .sections
            .iter()
            .find(|s| s.sh_type == 8 && s.sh_addr == p.p_vaddr && s.sh_size == p.p_memsz);
        if let Some(s) = held
            && s.sh_offset != p.p_offset
            && s.sh_offset % page == p.p_vaddr % page
            && !lay
                .segments
                .iter()
                .any(|q| q.p_type == PT_LOAD && q.p_offset == s.sh_offset)
        {
            patches.push((lay.e_phoff + i as u64 * PHENT + 8, s.sh_offset));
        }
    }
    Ok(Repair {
        target,
        offset: first.sh_offset,
        end,
        patches,
    })
}

/// Plan the repair of a noncompliant image: `Ok(None)` when there is nothing to do.
pub fn plan_normalize(data: &[u8]) -> Result<Option<Repair>> {
    let (offset, vaddr, bias) = match check(data)? {
        PhdrState::Noncompliant {
            offset,
            vaddr,
            bias,
        } => (offset, vaddr, bias),
        PhdrState::Moved { .. } => return plan_remap(data, &parse_layout(data)?).map(Some),
        PhdrState::Damaged { why } => return Err(RewriteError::Unsupported(why)),
        _ => return Ok(None),
    };
    let lay = parse_layout(data)?;
    let seg = lay
        .segments
        .iter()
        .find(|p| p.p_type == PT_LOAD && p.p_offset == offset && p.p_vaddr == vaddr)
        .copied()
        .ok_or_else(|| RewriteError::Unsupported("program-header segment vanished".into()))?;
    let target = vaddr.wrapping_sub(bias);
    let len = data.len() as u64;
    // The hole is at most what was removed before the table; an offset far beyond
    // the file is not a strip's doing.
    if target < len || target % lay.page != vaddr % lay.page || target - len > len.max(1 << 20) * 64
    {
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
    // The ELF header's e_phoff; in the table's new copy, the segment's and PT_PHDR's
    // p_offset; the offsets of sections inside the segment (.kpack_phdrs, the marker).
    let mut patches = vec![(32, target)];
    for (i, p) in lay.segments.iter().enumerate() {
        if (p.p_type == PT_LOAD && p.p_offset == offset && p.p_vaddr == vaddr)
            || p.p_type == PT_PHDR
        {
            patches.push((target + i as u64 * PHENT + 8, p.p_offset + delta));
        }
    }
    for (i, sec) in lay.sections.iter().enumerate() {
        if sec.sh_type != 8 && sec.sh_offset >= offset && sec.sh_offset < end && sec.sh_size > 0 {
            patches.push((lay.e_shoff + i as u64 * SHENT + 24, sec.sh_offset + delta));
        }
    }
    Ok(Some(Repair {
        target,
        offset,
        end,
        patches,
    }))
}

/// Repair a noncompliant or moved image in memory: `Ok(None)` when there is nothing
/// to do.
pub fn normalize(data: &[u8]) -> Result<Option<Vec<u8>>> {
    let Some(r) = plan_normalize(data)? else {
        return Ok(None);
    };
    let out = r.apply(data);
    match check(&out)? {
        PhdrState::Compliant | PhdrState::NotApplicable => Ok(Some(out)),
        other => Err(RewriteError::Unsupported(format!(
            "normalising did not repair it ({other:?})"
        ))),
    }
}

/// One file's outcome in a tree run.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
        // A root given as a symlink (as /opt/rocm usually is) is followed; links
        // below it are not.
        let meta = std::fs::metadata(root).map_err(|e| Error::io(root, e))?;
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
            // A repair a killed run left half-written: removed, not checked.
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            if let Some(n) = &name
                && n.starts_with(".kpack-tui-normalize-")
            {
                if crate::fsutil::is_stale(n, "normalize") && std::fs::remove_file(&path).is_ok() {
                    report.warnings.push(format!(
                        "{}: removed, left by an interrupted run",
                        path.display()
                    ));
                }
                continue;
            }
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
                PhdrState::Noncompliant { .. } | PhdrState::Moved { .. } => {
                    let mut fixed = false;
                    if !check_only {
                        match plan_normalize(&map) {
                            Ok(Some(repair)) => match write_repaired(&path, &map, &repair) {
                                Ok(()) => fixed = true,
                                Err(e) => report.warnings.push(e.to_string()),
                            },
                            Ok(None) => {}
                            Err(e) => report.warnings.push(format!("{}: {e}", path.display())),
                        }
                    }
                    report.files.push(NormalizeEntry { path, state, fixed });
                }
            }
        }
    }
    // A check that checked nothing is not a pass.
    if report.scanned == 0 {
        return Err(Error::NothingToDo(format!(
            "no ELF file under {}: nothing was checked",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(report)
}

/// Replace `path` by its repaired image: a temporary sibling (sparse), checked, then
/// renamed over it with the original's permissions.
fn write_repaired(path: &std::path::Path, data: &[u8], repair: &Repair) -> crate::Result<()> {
    use crate::error::Error;
    use std::os::unix::fs::MetadataExt;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    // In-place semantics or nothing: a rename would split hard links.
    if meta.nlink() > 1 {
        return Err(Error::Refused {
            path: path.to_path_buf(),
            what: format!(
                "has {} hard links, which a repair would split; left as it was",
                meta.nlink()
            ),
        });
    }
    let attrs: Vec<(std::ffi::OsString, Vec<u8>)> = xattr::list(path)
        .map_err(|e| Error::io(path, e))?
        .filter_map(|n| {
            let v = xattr::get(path, &n).ok().flatten()?;
            Some((n, v))
        })
        .collect();
    let mut tmp = tempfile::Builder::new()
        .prefix(&crate::fsutil::stage_prefix("normalize"))
        .tempfile_in(dir)
        .map_err(|e| Error::io(dir, e))?;
    repair
        .write_to(data, tmp.as_file_mut())
        .map_err(|e| Error::io(path, e))?;
    let written = crate::fsutil::map_file(tmp.path())
        .map_err(|e| Error::io(path, e))?
        .ok_or_else(|| Error::NotAsWritten {
            path: path.to_path_buf(),
            what: "repaired image is empty".into(),
        })?;
    if !matches!(
        check(&written),
        Ok(PhdrState::Compliant | PhdrState::NotApplicable)
    ) {
        return Err(Error::NotAsWritten {
            path: path.to_path_buf(),
            what: "the repaired image is not compliant; left as it was".into(),
        });
    }
    drop(written);
    // Owner first (a chown clears set-id bits and file capabilities), then the mode
    // with its set-id bits, then every extended attribute (security.capability…).
    let keep = |what: &str, r: std::io::Result<()>| {
        r.map_err(|e| Error::Io {
            path: path.to_path_buf(),
            error: std::io::Error::new(
                e.kind(),
                format!("cannot keep its {what} ({e}); left as it was"),
            ),
        })
    };
    keep(
        "owner",
        std::os::unix::fs::fchown(tmp.as_file(), Some(meta.uid()), Some(meta.gid())),
    )?;
    keep("mode", tmp.as_file().set_permissions(meta.permissions()))?;
    for (name, value) in &attrs {
        keep(
            &format!("extended attribute {}", name.to_string_lossy()),
            xattr::set(tmp.path(), name, value),
        )?;
    }
    tmp.persist(path).map_err(|e| Error::io(path, e.error))?;
    Ok(())
}
