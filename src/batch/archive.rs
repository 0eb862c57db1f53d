//! `.kpack` inspect, extract and verify in batch mode.

use super::{EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, Format, size};
use anyhow::{Context, Result, bail};
use kpack::kpack::archive::{Archive, KernelEntry};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// `archive FILE --json`: an archive's header and TOC.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ArchiveJson<'a> {
    /// The archive.
    pub path: String,
    /// Format version.
    pub version: u32,
    /// Bytes.
    pub file_size: u64,
    /// Where the TOC starts.
    pub toc_offset: u64,
    /// The group (product) name.
    pub group_name: &'a str,
    /// The family name the archive was written for.
    pub gfx_arch_family: &'a str,
    /// The target IDs it holds.
    pub gfx_arches: &'a [String],
    /// How code objects are stored.
    pub compression_scheme: &'static str,
    /// Every TOC entry.
    pub code_objects: &'a [KernelEntry],
    /// Sums.
    pub totals: Totals,
}

/// Sums over an archive's code objects.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Totals {
    /// Code objects.
    pub code_objects: u64,
    /// Their uncompressed bytes.
    pub raw_size: u64,
    /// Their stored bytes.
    pub stored_size: u64,
}

/// `verify FILE.kpack --json`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct VerifyArchiveJson {
    /// The archive.
    pub path: String,
    /// Always `archive`.
    pub kind: ArchiveKind,
    /// No fault.
    pub sound: bool,
    /// Code objects in the TOC.
    pub code_objects: usize,
    /// Whether its frames carry a checksum.
    pub checksummed: bool,
    /// What is wrong.
    pub faults: Vec<String>,
    /// What is worth knowing.
    pub notes: Vec<String>,
}

/// The kind of thing `verify` looked at, for an archive.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ArchiveKind {
    /// A `.kpack` file.
    Archive,
}

fn ratio(raw: u64, stored: u64) -> String {
    if stored == 0 {
        "-".into()
    } else {
        format!("{:.2}×", raw as f64 / stored as f64)
    }
}

/// Print an archive's header and TOC.
pub fn inspect(path: &Path, format: Format, out: &mut dyn Write) -> Result<i32> {
    let a = Archive::open(path)?;
    let idx = &a.index;
    let totals = Totals {
        // A TOC alias repeats a frame: counted once.
        code_objects: idx.kernels.iter().filter(|k| !k.is_alias()).count() as u64,
        raw_size: idx
            .kernels
            .iter()
            .filter(|k| !k.is_alias())
            .map(|k| k.size)
            .sum(),
        stored_size: idx
            .kernels
            .iter()
            .filter(|k| !k.is_alias())
            .map(|k| k.compressed_size)
            .sum(),
    };
    if format.is_json() {
        let j = ArchiveJson {
            path: path.display().to_string(),
            version: idx.version,
            file_size: idx.file_size,
            toc_offset: idx.toc_offset,
            group_name: &idx.meta.group_name,
            gfx_arch_family: &idx.meta.gfx_arch_family,
            gfx_arches: &idx.meta.gfx_arches,
            compression_scheme: idx.compression_scheme.name(),
            code_objects: &idx.kernels,
            totals,
        };
        super::write_json(out, "kpack-tui.archive/2", &j)?;
        return Ok(EXIT_OK);
    }
    writeln!(
        out,
        "{}: kpack v{}, {}",
        path.display(),
        idx.version,
        size(idx.file_size)
    )?;
    writeln!(out, "  group     {}", idx.meta.group_name)?;
    writeln!(out, "  family    {}", idx.meta.gfx_arch_family)?;
    writeln!(out, "  arches    {}", idx.meta.gfx_arches.join(" "))?;
    writeln!(out, "  scheme    {}", idx.compression_scheme.name())?;
    writeln!(
        out,
        "  TOC       at {:#x}, {}",
        idx.toc_offset,
        size(idx.file_size - idx.toc_offset)
    )?;
    writeln!(out)?;
    let kw = idx
        .kernels
        .iter()
        .map(|k| k.key.len())
        .max()
        .unwrap_or(3)
        // Longer keys overflow their column (a width past 65535 would panic).
        .clamp(3, 120);
    let aw = idx
        .kernels
        .iter()
        .map(|k| k.arch.len())
        .max()
        .unwrap_or(4)
        .clamp(4, 64);
    writeln!(
        out,
        "  {:<kw$}  {:<aw$}  {:>7}  {:>11}  {:>11}  {:>7}",
        "key", "arch", "ordinal", "raw", "stored", "ratio"
    )?;
    for k in &idx.kernels {
        if let Some(of) = &k.alias_of {
            // A TOC alias: listed under another target, the same frame.
            writeln!(
                out,
                "  {:<kw$}  {:<aw$}  {:>7}  = {of} (the same frame)",
                k.key, k.arch, k.ordinal
            )?;
            continue;
        }
        writeln!(
            out,
            "  {:<kw$}  {:<aw$}  {:>7}  {:>11}  {:>11}  {:>7}",
            k.key,
            k.arch,
            k.ordinal,
            size(k.size),
            size(k.compressed_size),
            ratio(k.size, k.compressed_size)
        )?;
    }
    writeln!(
        out,
        "  {:<kw$}  {:<aw$}  {:>7}  {:>11}  {:>11}  {:>7}",
        crate::text::count(totals.code_objects, "code object", "code objects"),
        "",
        "",
        size(totals.raw_size),
        size(totals.stored_size),
        ratio(totals.raw_size, totals.stored_size)
    )?;
    Ok(EXIT_OK)
}

/// Verify an archive: 0 sound, 1 faults (listed), 2 cannot read at all.
pub fn verify(path: &Path, format: Format, out: &mut dyn Write) -> Result<i32> {
    if !path.exists() {
        bail!("{}: no such file", path.display());
    }
    let (faults, kernels, checksummed) = match Archive::open(path) {
        Ok(a) => (a.verify(), a.index.kernels.len(), a.checksummed()),
        Err(e) => (vec![e.to_string()], 0, false),
    };
    let mut notes = Vec::new();
    if !checksummed && kernels > 0 {
        notes.push(
            "its code objects carry no checksum (raw, or zstd frames written without one, as by \
             other tools): a changed byte inside one cannot be detected from the archive \
             alone; verify the packed tree, whose ledger holds a hash of every code object"
                .to_string(),
        );
    }
    if format.is_json() {
        super::write_json(
            out,
            "kpack-tui.verify-archive/2",
            &VerifyArchiveJson {
                path: path.display().to_string(),
                kind: ArchiveKind::Archive,
                sound: faults.is_empty(),
                code_objects: kernels,
                checksummed,
                faults: faults.clone(),
                notes,
            },
        )?;
        return Ok(if faults.is_empty() {
            EXIT_OK
        } else {
            EXIT_FINDINGS
        });
    }
    for n in &notes {
        writeln!(out, "note: {n}")?;
    }
    if faults.is_empty() {
        writeln!(
            out,
            "{}: sound ({kernels} {}, every frame decodes to its size{})",
            path.display(),
            super::pack::plural(kernels as u64, "code object", "code objects"),
            if checksummed {
                " and matches its checksum"
            } else {
                ""
            }
        )?;
    } else {
        writeln!(
            out,
            "{}: {} fault{}",
            path.display(),
            faults.len(),
            if faults.len() == 1 { "" } else { "s" }
        )?;
        for f in &faults {
            writeln!(out, "  {f}")?;
        }
    }
    Ok(if faults.is_empty() {
        EXIT_OK
    } else {
        EXIT_FINDINGS
    })
}

/// Extract one kernel (`key`, `arch`) or all of them (`all`).
/// What `extract` was asked for.
pub struct ExtractWhat<'a> {
    /// Archive key.
    pub key: Option<&'a str>,
    /// Archive arch.
    pub arch: Option<&'a str>,
    /// Fat binary target.
    pub target: Option<&'a str>,
    /// Fat binary bundle index.
    pub bundle: Option<u32>,
    /// Everything.
    pub all: bool,
}

/// Up to `n` of `candidates` closest to `want` (edit distance), closest first.
fn closest<'a>(want: &str, candidates: &'a [String], n: usize) -> Vec<&'a str> {
    fn distance(a: &str, b: &str) -> usize {
        let b: Vec<char> = b.chars().collect();
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut prev = row[0];
            row[0] = i + 1;
            for (j, cb) in b.iter().enumerate() {
                let cur = row[j + 1];
                row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
                prev = cur;
            }
        }
        row[b.len()]
    }
    let mut v: Vec<(usize, &str)> = candidates
        .iter()
        .map(|c| (distance(want, c), c.as_str()))
        .collect();
    v.sort();
    v.into_iter().take(n).map(|(_, c)| c).collect()
}

/// `kpack-tui extract`: from an archive, or from a fat binary / bundle file.
pub fn extract(path: &Path, what: &ExtractWhat, out_path: &Path) -> Result<i32> {
    kpack::fsutil::check_apart(path, out_path)?;
    let head = {
        use std::io::Read;
        let mut h = [0u8; 4];
        let n = kpack::fsutil::open_input(path)
            .and_then(|mut f| f.read(&mut h))
            .with_context(|| format!("cannot read {}", path.display()))?;
        h[..n].to_vec()
    };
    if head != kpack::kpack::archive::MAGIC[..4] {
        return extract_from_binary(path, what, out_path);
    }
    if what.target.is_some() {
        bail!(
            "{}: an archive: give KEY and ARCH (or --all), not --target",
            path.display()
        );
    }
    let (key, arch, all) = (what.key, what.arch, what.all);
    let a = Archive::open(path)?;
    if all {
        let n = a.extract_to(out_path, |_| true)?;
        eprintln!(
            "extracted {} to {}",
            crate::text::count(n as u64, "code object", "code objects"),
            out_path.display()
        );
        return Ok(EXIT_OK);
    }
    let (Some(key), Some(arch)) = (key, arch) else {
        bail!("give KEY and ARCH, or --all");
    };
    let key = key.strip_prefix("./").unwrap_or(key);
    let Some(e) = a.entry(key, arch) else {
        let keys: Vec<String> = a
            .index
            .kernels
            .iter()
            .map(|k| format!("{} {}", k.key, k.arch))
            .collect();
        let near = closest(&format!("{key} {arch}"), &keys, 5);
        eprintln!(
            "kpack-tui: {}: no code object {key} @ {arch} among its {}; the closest:\n  {}",
            path.display(),
            keys.len(),
            near.join("\n  ")
        );
        return Ok(EXIT_ERROR);
    };
    let bytes = a.kernel(e).map_err(|e| {
        kpack::Error::Findings(format!("refusing to extract (nothing written): {e}"))
    })?;
    if bytes.len() as u64 != e.size {
        return Err(kpack::Error::Findings(format!(
            "{}: {key} @ {arch} decodes to {} bytes, the TOC says {}; nothing written",
            path.display(),
            bytes.len(),
            e.size
        ))
        .into());
    }
    kpack::fsutil::write_atomic(out_path, &bytes, None)?;
    eprintln!(
        "extracted {key} @ {arch} ({}) to {}",
        size(bytes.len() as u64),
        out_path.display()
    );
    Ok(EXIT_OK)
}

fn extract_from_binary(path: &Path, what: &ExtractWhat, out_path: &Path) -> Result<i32> {
    if what.key.is_some() || what.arch.is_some() {
        bail!(
            "{}: not a .kpack archive: for a fat binary give --target T [--bundle K], or --all",
            path.display()
        );
    }
    let data = kpack::fsutil::read_input(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let cos =
        kpack::kernels::unbundle(&data).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if what.all {
        let name = path
            .file_name()
            .map_or("binary".into(), |n| n.to_string_lossy().into_owned());
        for c in &cos {
            let safe =
                kpack::kpack::archive::safe_arch(&c.target).map_err(|e| anyhow::anyhow!(e))?;
            let dir = out_path.join(format!("{name}#{}", c.bundle));
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            kpack::fsutil::write_atomic(&dir.join(format!("{safe}.hsaco")), &c.bytes, None)?;
        }
        eprintln!(
            "extracted {} code objects to {}",
            cos.len(),
            out_path.display()
        );
        return Ok(EXIT_OK);
    }
    let Some(target) = what.target else {
        bail!("give --target T (and --bundle K), or --all");
    };
    let bundle = what.bundle.unwrap_or(0);
    let Some(c) = cos
        .iter()
        .find(|c| c.bundle == bundle && c.target == target)
    else {
        // One line per bundle, its targets together, and at most a screenful.
        let mut by_bundle: std::collections::BTreeMap<u32, Vec<&str>> = Default::default();
        for c in &cos {
            by_bundle.entry(c.bundle).or_default().push(&c.target);
        }
        let n = by_bundle.len();
        let mut lines: Vec<String> = by_bundle
            .iter()
            .take(20)
            .map(|(b, ts)| format!("  --bundle {b}: {}", ts.join(" ")))
            .collect();
        if n > 20 {
            lines.push(format!("  … and {} more bundles", n - 20));
        }
        bail!(
            "{}: no code object for {target} in bundle {bundle}; it has:\n{}",
            path.display(),
            lines.join("\n")
        );
    };
    kpack::fsutil::write_atomic(out_path, &c.bytes, None)?;
    eprintln!(
        "extracted bundle {bundle} {target} ({}) to {}",
        size(c.bytes.len() as u64),
        out_path.display()
    );
    Ok(EXIT_OK)
}
