//! The scan report in text.

use super::{pct, size};
use crate::text::csv_field;
use kpack::elf::WrapperMagic;
use kpack::scan::{FileKind, FileReport, Severity, TreeReport};
use std::io::{self, Write};

/// How many binaries the "top" list shows.
const TOP: usize = 10;

/// A report of `root` with nothing in it: the fields a streamed `--json` writes
/// before its files.
pub fn empty_report(root: String) -> TreeReport {
    TreeReport {
        root,
        files: Vec::new(),
        archs: Default::default(),
        arch_totals: Default::default(),
        totals: Default::default(),
        diagnostics: Vec::new(),
        wheel: None,
    }
}

/// Whether [`print_text`] shows anything of `f` beyond the totals: the binaries it
/// ranks and counts, and with `long` every file with details. A streamed scan keeps
/// only these.
pub fn shown(f: &FileReport, long: bool) -> bool {
    f.fatbin_bytes > 0 || !f.embedded.is_empty() || (long && has_details(f))
}

fn has_details(f: &FileReport) -> bool {
    !f.bundles.is_empty()
        || !f.embedded.is_empty()
        || !f.members.is_empty()
        || f.marker.is_some()
        || f.kpack.is_some()
        || f.database.is_some()
}

/// Print the text report of a scan. `long` prints every file with device code and
/// every kernel-database file (with the rule that attributed it).
pub fn print_text(out: &mut dyn Write, r: &TreeReport, long: bool) -> io::Result<()> {
    let single =
        r.files.len() == 1 && r.totals.directories == 0 && !std::path::Path::new(&r.root).is_dir();
    if single {
        print_file(out, &r.files[0])?;
        return print_diagnostics(out, r);
    }
    let t = &r.totals;
    writeln!(out, "{}", r.root)?;
    if let Some(w) = &r.wheel {
        writeln!(
            out,
            "  wheel {} {} ({}), {} stored in the zip",
            w.name,
            w.version,
            w.tags.join(", "),
            size(w.stored_bytes)
        )?;
    }
    // Two measures, named the same everywhere: raw = code-object bytes (what a GPU
    // loads, the same before and after a pack), stored = bytes they take on disk.
    let archived: u64 = r.arch_totals.values().map(|a| a.archived).sum();
    writeln!(
        out,
        "  {} in {}, {} in files",
        crate::text::count(t.entries, "entry", "entries"),
        crate::text::count(t.directories, "directory", "directories"),
        size(t.bytes),
    )?;
    write!(
        out,
        "  device code {} raw, {} stored",
        size(t.device_raw),
        size(t.device_stored)
    )?;
    if archived > 0 {
        let a: u64 = r.arch_totals.values().map(|a| a.archived_stored).sum();
        write!(out, " ({} of it in archives)", size(a))?;
    }
    writeln!(
        out,
        "; fat-binary sections {} ({} of the bytes)",
        size(t.fatbin_bytes),
        pct(t.fatbin_bytes, t.bytes)
    )?;
    writeln!(out)?;
    writeln!(out, "Files by class")?;
    for (kind, kt) in &t.by_kind {
        writeln!(
            out,
            "  {:<18} {:>6}  {:>11}",
            kind.name(),
            kt.count,
            size(kt.bytes)
        )?;
    }
    if !r.arch_totals.is_empty() {
        // Embedded code (loaded by the binaries themselves) gets its own column, shown
        // only when there is some.
        let embedded = r.arch_totals.values().any(|a| a.embedded > 0);
        let dash = |n: u64| if n > 0 { size(n) } else { "-".into() };
        writeln!(out)?;
        write!(
            out,
            "Device code by target   {:>11}  {:>11}  {:>12}  {:>11}",
            "raw", "stored", "code objects", "kernel DBs"
        )?;
        if archived > 0 {
            write!(out, "  {:>11}  {:>12}", "archived", "code objects")?;
        }
        if embedded {
            write!(out, "  {:>11}", "embedded")?;
        }
        writeln!(out)?;
        let mut by_target: Vec<_> = r.arch_totals.iter().collect();
        by_target.sort_by(|a, b| kpack::natural::target_cmp(a.0, b.0));
        for (arch, a) in by_target {
            write!(
                out,
                "  {:<21} {:>11}  {:>11}  {:>12}  {:>11}",
                arch,
                size(a.raw),
                size(a.compressed),
                a.code_objects,
                dash(a.kernel_database)
            )?;
            if archived > 0 {
                write!(
                    out,
                    "  {:>11}  {:>12}",
                    size(a.archived),
                    a.archived_code_objects
                )?;
            }
            if embedded {
                write!(out, "  {:>11}", dash(a.embedded))?;
            }
            writeln!(out)?;
        }
        if archived > 0 {
            writeln!(
                out,
                "  archived: raw code in .kpack archives, reached by host-only binaries"
            )?;
        }
        if embedded {
            let files = r.files.iter().filter(|f| !f.embedded.is_empty()).count();
            writeln!(
                out,
                "  embedded: code objects and bundles in {} data (outside .hip_fatbin): \
                 loaded by the binaries themselves, not packable",
                crate::text::count(files as u64, "file's", "files'")
            )?;
        }
    }
    let mut fat: Vec<&FileReport> = r
        .files
        .iter()
        .filter(|f| f.fatbin_bytes > 0 && f.hard_link_of.is_none() && f.kind != FileKind::Symlink)
        .collect();
    if !fat.is_empty() {
        fat.sort_by(|a, b| {
            b.fatbin_bytes
                .cmp(&a.fatbin_bytes)
                .then(a.path.cmp(&b.path))
        });
        writeln!(out)?;
        writeln!(out, "Top files by fat-binary section")?;
        for f in fat.iter().take(TOP) {
            let mut archs: Vec<&str> = f
                .all_bundles()
                .flat_map(|b| b.targets.iter().map(|t| &*t.arch))
                .chain(f.arch.as_deref())
                .collect();
            archs.sort_by(|a, b| kpack::natural::target_cmp(a, b));
            archs.dedup();
            let n = f.all_bundles().count();
            writeln!(
                out,
                "  {:>11} of {:>11} ({:>4})  {:<16} {:>2} bundle{}  {}  {}",
                size(f.fatbin_bytes),
                size(f.size),
                pct(f.fatbin_bytes, f.size),
                f.kind.name(),
                n,
                if n == 1 { " " } else { "s" },
                f.path,
                archs.join(" ")
            )?;
        }
        if fat.len() > TOP {
            writeln!(out, "  … and {} more", fat.len() - TOP)?;
        }
    }
    if long {
        for f in r.files.iter().filter(|f| has_details(f)) {
            writeln!(out)?;
            print_file(out, f)?;
        }
    }
    print_diagnostics(out, r)
}

fn print_diagnostics(out: &mut dyn Write, r: &TreeReport) -> io::Result<()> {
    if r.diagnostics.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "Diagnostics ({})", r.diagnostics.len())?;
    for d in &r.diagnostics {
        let sev = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        writeln!(out, "  {sev}: {}: {}", d.path, d.message)?;
    }
    Ok(())
}

/// Print one file with its bundles, wrappers and marker.
pub fn print_file(out: &mut dyn Write, f: &FileReport) -> io::Result<()> {
    let what = match (f.kind, f.elf_kind, f.container) {
        (_, _, Some(c)) => format!("{} ({})", f.kind.name(), c.describe()),
        (k, Some(e), _) => match f.other_machine() {
            Some(m) => format!("{} ({}, {m})", k.name(), e.name()),
            None => format!("{} ({})", k.name(), e.name()),
        },
        (k, None, _) => k.name().to_string(),
    };
    write!(out, "{}: {what}, {}", f.path, size(f.size))?;
    if let Some(h) = f.host_bytes {
        write!(
            out,
            " (host {}, fat-binary section {})",
            size(h),
            size(f.fatbin_bytes)
        )?;
    }
    if let Some(a) = &f.arch {
        write!(out, ", arch {a}")?;
    }
    if let Some(d) = f.database {
        write!(out, ", {} database", d.name())?;
        if let Some(rule) = f.database_rule {
            match f.database_key.as_deref() {
                Some(k) if Some(k) != f.arch.as_deref() => {
                    write!(out, " ({k}, {})", rule.describe())?
                }
                _ => write!(out, " ({})", rule.describe())?,
            }
        }
    }
    if let Some(t) = &f.target {
        write!(out, " -> {t}")?;
    }
    if let Some(h) = &f.hard_link_of {
        write!(out, ", hard link of {h}")?;
    }
    writeln!(out)?;
    if f.rdc_object {
        writeln!(
            out,
            "  -fgpu-rdc object: device bitcode in __CLANG_OFFLOAD_BUNDLE__ sections"
        )?;
    }
    let print_bundles = |out: &mut dyn Write,
                         bundles: &[kpack::scan::BundleReport],
                         indent: &str|
     -> io::Result<()> {
        for b in bundles {
            let comp = match b.ccob_version {
                Some(v) => format!("{} (CCOB v{v})", b.compression.name()),
                None => b.compression.name().to_string(),
            };
            writeln!(
                out,
                "{indent}bundle {} at {:#x}: {comp}, {} stored, {} uncompressed",
                b.index,
                b.offset,
                size(b.stored_size),
                size(b.uncompressed_size)
            )?;
            if let Some(h) = &b.host_triple {
                writeln!(out, "{indent}  {:<24} {h}", "host")?;
            }
            for t in &b.targets {
                let ratio = if t.compressed_size > 0 && t.compressed_size != t.size {
                    format!(
                        "  (≈{} compressed, ≈{:.1}×: its share of the bundle)",
                        size(t.compressed_size),
                        t.size as f64 / t.compressed_size as f64
                    )
                } else {
                    String::new()
                };
                writeln!(
                    out,
                    "{indent}  {:<24} {:>11}  {}{ratio}",
                    t.arch,
                    size(t.size),
                    t.triple
                )?;
            }
        }
        Ok(())
    };
    print_bundles(out, &f.bundles, "  ")?;
    for m in &f.members {
        match &m.file {
            // A thin archive's member: another file, whose code is counted there.
            Some(p) => writeln!(
                out,
                "  member {} ({}, thin: the file {p})",
                m.name,
                size(m.size)
            )?,
            None => writeln!(out, "  member {} ({})", m.name, size(m.size))?,
        }
        print_bundles(out, &m.bundles, "    ")?;
    }
    if !f.wrappers.is_empty() {
        let desc: Vec<String> = f
            .wrappers
            .iter()
            .map(|w| match (w.magic, w.bundle) {
                (WrapperMagic::Hipf, Some(b)) => format!("HIPF→bundle {b}"),
                (WrapperMagic::Hipf, None) => "HIPF→?".to_string(),
                (WrapperMagic::Hipk, _) => format!("HIPK co_index {}", w.reserved & 0xffff_ffff),
                (WrapperMagic::Unknown, _) => format!("unknown magic {:#010x}", w.magic_value),
            })
            .collect();
        writeln!(
            out,
            "  wrappers ({}): {}",
            f.wrappers.len(),
            desc.join(", ")
        )?;
    }
    if !f.embedded.is_empty() {
        let bytes: u64 = f.embedded.iter().map(|e| e.size).sum();
        writeln!(
            out,
            "  embedded device code ({}, {} stored): loaded by the binary itself, not packable",
            crate::text::count(
                f.embedded.len() as u64,
                "embedded object",
                "embedded objects"
            ),
            size(bytes)
        )?;
        for e in &f.embedded {
            let what = match e.format {
                kpack::embedded::EmbeddedFormat::CodeObject => "code object",
                kpack::embedded::EmbeddedFormat::Bundle => "bundle",
                kpack::embedded::EmbeddedFormat::CompressedBundle => "compressed bundle",
            };
            let targets: Vec<String> = e
                .targets
                .iter()
                .map(|t| format!("{} {}", t.arch, size(t.size)))
                .collect();
            writeln!(
                out,
                "    {}[{}] at {:#x}: {what}, {}: {}",
                e.section,
                e.index,
                e.offset,
                size(e.size),
                targets.join(", ")
            )?;
        }
    }
    if let Some(k) = &f.kpack {
        writeln!(
            out,
            "  archive: group {}, family {}, arches {}, {}, {} ({} raw)",
            k.group_name,
            k.gfx_arch_family,
            k.gfx_arches.join(" "),
            k.compression_scheme,
            crate::text::count(k.code_objects, "code object", "code objects"),
            size(k.raw_bytes)
        )?;
    }
    if let Some(m) = &f.marker {
        writeln!(out, "  marker: kernel_name {:?}", m.kernel_name)?;
        for p in &m.kpack_search_paths {
            writeln!(out, "    search {p}")?;
        }
    }
    Ok(())
}

/// `scan --csv targets`: one row per target.
pub fn csv_targets(out: &mut dyn Write, r: &TreeReport) -> io::Result<()> {
    writeln!(
        out,
        "target,raw_bytes,stored_bytes,code_objects,kernel_database_bytes"
    )?;
    for (t, a) in &r.arch_totals {
        writeln!(
            out,
            "{},{},{},{},{}",
            csv_field(t),
            a.raw,
            a.compressed,
            a.code_objects,
            a.kernel_database
        )?;
    }
    Ok(())
}

/// `scan --csv matrix`: code-object bytes per file (rows) and target (columns), for
/// every file with device code.
pub fn csv_matrix(out: &mut dyn Write, r: &TreeReport) -> io::Result<()> {
    let targets: Vec<&String> = r.archs.keys().collect();
    write!(out, "path")?;
    for t in &targets {
        write!(out, ",{}", csv_field(t))?;
    }
    writeln!(out)?;
    for f in &r.files {
        let mut row: std::collections::BTreeMap<&str, u64> = Default::default();
        for b in f.all_bundles() {
            for t in &b.targets {
                *row.entry(&*t.arch).or_default() += t.size;
            }
        }
        if f.kind == kpack::scan::FileKind::CodeObject
            && let Some(a) = &f.arch
        {
            *row.entry(a.as_str()).or_default() += f.size;
        }
        if row.is_empty() {
            continue;
        }
        write!(out, "{}", csv_field(&f.path))?;
        for t in &targets {
            write!(out, ",{}", row.get(t.as_str()).copied().unwrap_or(0))?;
        }
        writeln!(out)?;
    }
    Ok(())
}
