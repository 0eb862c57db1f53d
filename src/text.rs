//! Formatting shared by the batch reports and the terminal UI (neither takes the
//! other's printers): sizes, percentages, counted nouns, the rewrite plan's tables.

use kpack::elf::rewrite::{self, RewritePlan};
use std::io::Write;
use std::path::Path;

/// Human-readable size (IEC units).
pub fn size(n: u64) -> String {
    humansize::format_size(n, humansize::BINARY)
}

/// Percentage of `part` in `whole`, "0%" for an empty whole.
pub fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "0%".into();
    }
    format!("{:.0}%", part as f64 * 100.0 / whole as f64)
}

/// A CSV field (RFC 4180: quoted when it holds a comma, a quote or a line break).
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `new - old` as a signed size: `+1.2 KiB`, `-3 B`, `0`.
pub fn signed(old: u64, new: u64) -> String {
    let d = new as i64 - old as i64;
    match d.signum() {
        1 => format!("+{}", size(d.unsigned_abs())),
        -1 => format!("-{}", size(d.unsigned_abs())),
        _ => "0".into(),
    }
}

/// The change from `old` to `new` in percent (`+18.3%`), `new` when `old` is 0.
pub fn delta_pct(old: u64, new: u64) -> String {
    match old {
        0 if new > 0 => "new".into(),
        0 => String::new(),
        // Gone, as "new" says the opposite (trial 24: `-100.0%` beside `new`).
        _ if new == 0 => "removed".into(),
        _ => format!("{:+.1}%", (new as f64 - old as f64) * 100.0 / old as f64),
    }
}

/// `1 kernel`, `2 kernels`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Print a plan as before/after tables.
pub fn rewrite_plan(out: &mut dyn Write, binary: &Path, p: &RewritePlan) -> std::io::Result<()> {
    writeln!(
        out,
        "{}{}: {} -> {} ({} of .hip_fatbin removed, {} bundles; marker {} at {:#x}{})",
        binary.display(),
        match p.machine {
            kpack::elf::machine::HostMachine::X86_64 => String::new(),
            m => format!(" ({m}, {} pages)", size(p.page)),
        },
        size(p.input_size),
        size(p.output_size),
        size(p.bytes_removed),
        p.bundles,
        size(p.marker_size),
        p.marker_vaddr,
        match (p.phdr_relocated, p.phdr_padding) {
            (false, _) if !p.moved_sections.is_empty() => format!(
                "; program headers grown in place, {} moved beside the marker",
                p.moved_sections.join(" ")
            ),
            (false, _) => String::new(),
            (true, 0) => "; program headers moved into the new segment".into(),
            (true, n) => format!(
                "; program headers moved into the new segment, {} of zeros before it so that \
                 its address is its offset (EL8 kernels)",
                size(n)
            ),
        }
    )?;
    writeln!(
        out,
        "  marker: kernel_name {:?}, search paths {:?}",
        p.marker.kernel_name, p.marker.kpack_search_paths
    )?;
    for w in &p.wrappers {
        writeln!(
            out,
            "  wrapper {}: HIPF -> HIPK, pointer {:#x} -> {:#x} ({}), co_index {}",
            w.index,
            w.old_pointer,
            w.new_pointer,
            w.via.name(),
            w.co_index
        )?;
    }
    let seg = |s: &rewrite::Segment| {
        format!(
            "{:<12} off {:#08x} vaddr {:#010x} filesz {:#08x} memsz {:#08x} {:<3} align {:#x}",
            s.type_name(),
            s.p_offset,
            s.p_vaddr,
            s.p_filesz,
            s.p_memsz,
            s.flags_name(),
            s.p_align
        )
    };
    writeln!(
        out,
        "\n  program headers before ({})",
        p.segments_before.len()
    )?;
    for s in &p.segments_before {
        writeln!(out, "    {}", seg(s))?;
    }
    writeln!(out, "  program headers after ({})", p.segments_after.len())?;
    for s in &p.segments_after {
        let new = !p.segments_before.contains(s);
        writeln!(out, "  {} {}", if new { "*" } else { " " }, seg(s))?;
    }
    let sec = |s: &rewrite::Section| {
        format!(
            "{:<20} {:<9} addr {:#010x} off {:#08x} size {:#08x}",
            s.name,
            s.type_name(),
            s.sh_addr,
            s.sh_offset,
            s.sh_size
        )
    };
    writeln!(out, "\n  sections that change")?;
    for a in &p.sections_after {
        match p
            .sections_before
            .iter()
            .find(|b| b.name == a.name && b.sh_addr == a.sh_addr)
        {
            Some(b) if b == a => {}
            Some(b) => {
                writeln!(out, "    - {}", sec(b))?;
                writeln!(out, "    + {}", sec(a))?;
            }
            None => writeln!(out, "    + {}", sec(a))?,
        }
    }
    Ok(())
}

/// Print a PE image's rewrite plan.
pub fn pe_rewrite_plan(
    out: &mut dyn Write,
    binary: &Path,
    p: &kpack::coff::rewrite::PeRewritePlan,
) -> std::io::Result<()> {
    writeln!(
        out,
        "{}: {} -> {} ({} of .hip_fat raw data removed; the section keeps its virtual size)",
        binary.display(),
        size(p.input_size),
        size(p.output_size),
        size(p.removed)
    )?;
    writeln!(
        out,
        "  marker: section .kpackrf at RVA {:#x} (file {:#x}, {} bytes): kernel_name {:?}, search paths {:?}",
        p.marker_rva,
        p.marker_offset,
        p.marker_len,
        p.marker.kernel_name,
        p.marker.kpack_search_paths
    )?;
    for (i, (rva, b)) in p.wrappers.iter().enumerate() {
        writeln!(
            out,
            "  wrapper {i} at RVA {rva:#x}: HIPF -> HIPK, pointer -> marker, co_index {b}"
        )?;
    }
    Ok(())
}

/// The columns of `kernels --csv` (and of the TUI's Kernels export).
pub const KERNEL_CSV_COLUMNS: &str = "path,key,bundle,target,code_object_version,name,demangled,code_size,\
vgpr,agpr,sgpr,lds,scratch,vgpr_spills,sgpr_spills,wavefront_size,kernarg_size,max_flat_workgroup_size,\
waves_per_simd";

/// One kernel's `kernels --csv` fields, unquoted.
pub fn kernel_fields(r: &kpack::kernels::KernelRow) -> Vec<String> {
    let k = &r.kernel;
    let n = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    vec![
        r.path.clone(),
        r.key.clone().unwrap_or_default(),
        r.bundle.map(|b| b.to_string()).unwrap_or_default(),
        r.target.clone(),
        r.code_object_version
            .map(|v| v.to_string())
            .unwrap_or_default(),
        k.name.clone(),
        k.demangled.clone().unwrap_or_default(),
        n(k.code_size),
        n(k.vgpr),
        n(k.agpr),
        n(k.sgpr),
        n(k.lds),
        n(k.scratch),
        n(k.vgpr_spills),
        n(k.sgpr_spills),
        n(k.wavefront_size),
        n(k.kernarg_size),
        n(k.max_flat_workgroup_size),
        n(r.occupancy.map(|o| o.waves)),
    ]
}

/// One kernel as a `kernels --csv` row.
pub fn kernel_csv_row(r: &kpack::kernels::KernelRow) -> String {
    kernel_fields(r)
        .iter()
        .map(|f| csv_field(f))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    #[test]
    fn counted_nouns() {
        assert_eq!(super::count(1, "entry", "entries"), "1 entry");
        assert_eq!(super::count(0, "entry", "entries"), "0 entries");
        assert_eq!(super::count(2, "kernel", "kernels"), "2 kernels");
    }
}
