//! Reading the code objects of one file, whatever it is: a fat binary's bundles
//! (compressed ones left for a second pass), a bundle, a code object, an archive, a
//! static archive's members, code embedded in data sections, a wheel member.

use super::*;

/// Rows and diagnostics of one file.
pub(super) type FileRows = (Vec<CodeObjectRow>, Vec<Box<KernelRow>>, Vec<String>);

pub(super) fn push_code_object(
    out: &mut FileRows,
    (path, key, bundle): (&str, Option<&str>, Option<u32>),
    (target, stored): (&str, u64),
    data: &[u8],
    opts: &KernelsOptions,
) {
    let (binary, tu) = binary_and_tu(path, key, bundle);
    let mut row = CodeObjectRow {
        path: path.to_string(),
        binary,
        bundle: tu,
        target: target.to_string(),
        size: data.len() as u64,
        stored,
        bytes: None,
    };
    if opts.keep.as_ref().is_some_and(|k| k.contains(&row.id())) {
        row.bytes = Some(data.to_vec());
    }
    out.0.push(row);
    match read_code_object(data, opts.cache) {
        Ok(info) => {
            for k in info.kernels {
                out.1.push(Box::new(KernelRow {
                    path: path.to_string(),
                    key: key.map(str::to_string),
                    bundle,
                    target: target.to_string(),
                    code_object_version: info.version,
                    occupancy: crate::occupancy::occupancy(target, &k),
                    kernel: k,
                }));
            }
        }
        Err(e) => {
            let at = match (key, bundle) {
                (Some(k), _) => format!(" {k}"),
                (None, Some(b)) => format!(" bundle #{b}"),
                _ => String::new(),
            };
            out.2.push(format!("{path}:{at} {target}: {e}"));
        }
    }
}

/// A compressed bundle left for the second pass of [`list_kernels_scanned`]: every
/// such bundle of the tree is decoded in one parallel pass, largest first, so that no
/// core waits on one library's last bundle while others are queued behind it.
pub(super) struct Deferred {
    pub(super) path: String,
    pub(super) map: Arc<memmap2::Mmap>,
    pub(super) sec: std::ops::Range<usize>,
    pub(super) bundle: BundleInfo,
}

/// Where [`from_bundles`] may leave compressed bundles: the map the section lies in
/// and the list to add them to.
pub(super) type Defer<'d> = Option<(&'d Arc<memmap2::Mmap>, &'d mut Vec<Deferred>)>;

pub(super) fn from_bundles(
    out: &mut FileRows,
    path: &str,
    sec: &[u8],
    bundles: &[BundleInfo],
    opts: &KernelsOptions,
    defer: Defer<'_>,
) {
    let skip = opts.skip_bundles.get(path);
    let mut bundles: Vec<&BundleInfo> = bundles
        .iter()
        .filter(|b| !skip.is_some_and(|s| s.contains(&(b.index as u32))))
        .collect();
    let mut mapped: Option<(&memmap2::Mmap, usize)> = None;
    if let Some((map, later)) = defer {
        // The section's place in the map (it is a sub-slice of it).
        let start = (sec.as_ptr() as usize).wrapping_sub(map.as_ptr() as usize);
        if start <= map.len() && sec.len() <= map.len() - start {
            mapped = Some((map, start));
            bundles.retain(|b| {
                if b.compression == bundle::Compression::None {
                    return true;
                }
                later.push(Deferred {
                    path: path.to_string(),
                    map: Arc::clone(map),
                    sec: start..start + sec.len(),
                    bundle: (*b).clone(),
                });
                false
            });
        }
    }
    // Bundles in parallel (a wheel member's compressed bundles decode on every core),
    // merged in bundle order.
    let parts: Vec<FileRows> = bundles
        .par_iter()
        .with_max_len(1)
        .map(|b| {
            // What reading touched leaves the resident set as it goes, and the rest
            // of the bundle after it (a large library's bundles would otherwise stay
            // mapped until the file is done).
            let release = |off: usize, len: usize| {
                if let Some((map, start)) = mapped {
                    crate::fsutil::release_range(map, start.saturating_add(off), len);
                }
            };
            let rows = bundle_rows(path, sec, b, opts, &release);
            release(b.offset as usize, b.stored_size as usize);
            rows
        })
        .collect();
    for part in parts {
        append(out, part);
    }
}

pub(super) fn append(out: &mut FileRows, (n, rows, diags): FileRows) {
    out.0.extend(n);
    out.1.extend(rows);
    out.2.extend(diags);
}

/// The code objects and kernels of one bundle.
pub(super) fn bundle_rows(
    path: &str,
    sec: &[u8],
    b: &BundleInfo,
    opts: &KernelsOptions,
    release: crate::bundle::Release<'_>,
) -> FileRows {
    let mut part: FileRows = (Vec::new(), Vec::new(), Vec::new());
    // One code object at a time (a compressed bundle is never decoded whole); a
    // bundle that does not read to its end gives its error and no rows, as when it
    // was decoded whole first.
    let each = |e: &crate::bundle::BundleEntry, bytes: &[u8]| {
        let Some(arch) = e.id.arch() else {
            return Ok::<(), std::convert::Infallible>(());
        };
        if wanted(opts, &arch) && codeobj::is_code_object(bytes) {
            push_code_object(
                &mut part,
                (path, None, Some(b.index as u32)),
                (&arch, b.apportioned_size(e)),
                bytes,
                opts,
            );
        }
        Ok(())
    };
    if let Err(e) = b.each_code_object_releasing(sec, 1 << 34, release, each) {
        return (
            Vec::new(),
            Vec::new(),
            vec![format!("{path}: bundle #{}: {e}", b.index)],
        );
    }
    part
}

pub(super) fn from_archive(
    out: &mut FileRows,
    path: &str,
    a: &Archive,
    prefix: Option<&str>,
    opts: &KernelsOptions,
) {
    // A TOC alias repeats a frame under another target: its kernels are listed once.
    for e in a.index.kernels.iter().filter(|e| !e.is_alias()) {
        let base = e.key.rsplit_once('#').map(|(n, _)| n);
        if prefix.is_some_and(|p| base != Some(p)) {
            continue;
        }
        if let Some(set) = &opts.binaries
            && !base.is_some_and(|b| set.contains(b))
        {
            continue;
        }
        if !wanted(opts, &e.arch) {
            continue;
        }
        match a.kernel(e) {
            Ok(bytes) => push_code_object(
                out,
                (path, Some(&e.key), None),
                (&e.arch, e.compressed_size),
                &bytes,
                opts,
            ),
            Err(err) => out.2.push(format!("{path}: {} {}: {err}", e.key, e.arch)),
        }
    }
}

/// The rows of one file; its compressed bundles go to `later`.
pub(super) fn one_file(
    abs: &Path,
    f: &FileReport,
    follow_marker: bool,
    opts: &KernelsOptions,
    later: &mut Vec<Deferred>,
) -> FileRows {
    let mut out: FileRows = (Vec::new(), Vec::new(), Vec::new());
    let path = f.path.as_str();
    if f.hard_link_of.is_some() {
        return out;
    }
    let skip_file = opts
        .binaries
        .as_ref()
        .is_some_and(|set| !set.contains(path));
    if skip_file && !matches!(f.kind, FileKind::Kpack | FileKind::HostOnlyBinary) {
        return out;
    }
    match f.kind {
        FileKind::Kpack => match Archive::open(abs) {
            Ok(a) => from_archive(&mut out, path, &a, None, opts),
            Err(e) => out.2.push(e.to_string()),
        },
        FileKind::HostOnlyBinary if follow_marker => {
            if let Some(m) = &f.marker {
                let archives = marker_archives(abs, m);
                if archives.is_empty() {
                    // Said, not a silent "0 kernels": the code is elsewhere.
                    out.2.push(format!(
                        "{path}: a host-only binary whose marker reaches no archive here \
                         (it names {}); its kernels are not listed",
                        m.kpack_search_paths.join(", ")
                    ));
                }
                for a in archives {
                    match Archive::open(&a) {
                        Ok(arch) => {
                            let shown = a.display().to_string();
                            from_archive(&mut out, &shown, &arch, Some(&m.kernel_name), opts)
                        }
                        Err(e) => out.2.push(e.to_string()),
                    }
                }
            }
        }
        FileKind::FatBinary
        | FileKind::Bundle
        | FileKind::CodeObject
        | FileKind::EmbeddedCode
        | FileKind::KernelDatabase => {
            let map = match crate::fsutil::map_file(abs) {
                Ok(Some(m)) => Arc::new(m),
                Ok(None) => return out,
                Err(e) => {
                    out.2.push(format!("{path}: {e}"));
                    return out;
                }
            };
            from_bytes(
                &mut out,
                path,
                &map,
                opts,
                Some((&map, later)),
                Some(&f.embedded),
            );
            // The map lives on while its compressed bundles wait for the second
            // pass: what this pass touched (headers, tables, data searched) leaves
            // the resident set now, or every binary of the tree would stay in it.
            crate::fsutil::release_range(&map, 0, map.len());
            if follow_marker {
                thin_members(&mut out, f, opts, later);
            }
        }
        _ => {}
    }
    out
}

/// The members of a thin archive given alone (in a tree they are its files, listed
/// under their own paths): read from the files the scan resolved them to.
pub(super) fn thin_members(
    out: &mut FileRows,
    f: &FileReport,
    opts: &KernelsOptions,
    later: &mut Vec<Deferred>,
) {
    for m in &f.members {
        let Some(p) = &m.resolved else { continue };
        let label = format!("{}({})", f.path, m.name);
        match crate::fsutil::map_file(p) {
            Ok(Some(map)) => {
                let map = Arc::new(map);
                from_bytes(out, &label, &map, opts, Some((&map, later)), None);
                crate::fsutil::release_range(&map, 0, map.len());
            }
            Ok(None) => {}
            Err(e) => out.2.push(format!("{label}: {}: {e}", p.display())),
        }
    }
}

/// Kernels of one file's bytes: a raw code object, a fat ELF or a bundle file.
/// `known`: the embedded objects the scan already found in these bytes (`None`:
/// search them here).
pub(super) fn from_bytes(
    out: &mut FileRows,
    path: &str,
    data: &[u8],
    opts: &KernelsOptions,
    defer: Defer<'_>,
    known: Option<&[crate::embedded::Embedded]>,
) {
    if codeobj::is_code_object(data) {
        let target = codeobj::read(data)
            .ok()
            .and_then(|i| i.target)
            .unwrap_or_else(|| "unknown".into());
        if wanted(opts, &target) {
            push_code_object(
                out,
                (path, None, None),
                (&target, data.len() as u64),
                data,
                opts,
            );
        }
    } else if elf::is_static_archive(data) {
        from_static_archive(out, path, data, opts, defer);
    } else if elf::is_elf(data) {
        let mut defer = defer;
        match elf::inspect(data) {
            Ok(ElfContent::Fat(fat)) => {
                if let Some(span) = &fat.fatbin {
                    let end = span.offset.saturating_add(span.size) as usize;
                    if let Some(sec) = data.get(span.offset as usize..end) {
                        let d = defer.as_mut().map(|(m, l)| (*m, &mut **l));
                        from_bundles(out, path, sec, &fat.bundles, opts, d);
                    }
                }
            }
            Ok(_) => {}
            Err(e) => out.2.push(format!("{path}: {e}")),
        }
        from_embedded(out, path, data, opts, defer, known);
    } else if crate::coff::is_pe(data) {
        let mut defer = defer;
        match crate::fatbin::read(data) {
            Ok(Some(f)) => {
                let d = defer.as_mut().map(|(m, l)| (*m, &mut **l));
                from_bundles(out, path, f.section, &f.bundles, opts, d)
            }
            Ok(None) => {}
            Err(e) => out.2.push(format!("{path}: {e}")),
        }
        from_embedded(out, path, data, opts, defer, known);
    } else if bundle::looks_like_bundle(data) {
        match bundle::walk_section(data) {
            Ok(bs) => from_bundles(out, path, data, &bs, opts, defer),
            Err(e) => out.2.push(format!("{path}: {e}")),
        }
    }
}

/// Kernels of the device code embedded in a binary's data outside `.hip_fatbin`
/// (`crate::embedded`), each object named `path@section[n]`.
pub(super) fn from_embedded(
    out: &mut FileRows,
    path: &str,
    data: &[u8],
    opts: &KernelsOptions,
    mut defer: Defer<'_>,
    known: Option<&[crate::embedded::Embedded]>,
) {
    let searched;
    let found = match known {
        Some(k) => k,
        None => {
            let ranges = crate::embedded::data_ranges(data);
            let (f, note) = match &defer {
                // A file of its own: the searched pages leave the resident set.
                Some((map, _)) if std::ptr::eq(map.as_ptr(), data.as_ptr()) => {
                    let release = |o: usize, l: usize| crate::fsutil::release_range(map, o, l);
                    crate::embedded::find_releasing(data, &ranges, &release)
                }
                _ => crate::embedded::find(data, &ranges),
            };
            if let Some(n) = note {
                out.2.push(format!("{path}: {n}"));
            }
            searched = f;
            &searched[..]
        }
    };
    for e in found {
        let label = e.label(path);
        match &e.bundle {
            Some(b) => {
                let d = defer.as_mut().map(|(m, l)| (*m, &mut **l));
                from_bundles(out, &label, data, std::slice::from_ref(b), opts, d);
            }
            None => {
                let (start, end) = (e.offset as usize, (e.offset + e.size) as usize);
                let target = &e.targets[0].arch;
                if wanted(opts, target) {
                    push_code_object(
                        out,
                        (&label, None, None),
                        (target, e.size),
                        &data[start..end],
                        opts,
                    );
                }
            }
        }
    }
}

/// Kernels of every member of a static archive (`.a`, GNU or BSD names, thin
/// archives' members are not in the file and are skipped): each ELF member is read
/// like a file of its own, named `archive(member)` as binutils names them.
pub(super) fn from_static_archive(
    out: &mut FileRows,
    path: &str,
    data: &[u8],
    opts: &KernelsOptions,
    mut defer: Defer<'_>,
) {
    let ar = match object::read::archive::ArchiveFile::parse(data) {
        Ok(ar) => ar,
        Err(e) => {
            out.2.push(format!("{path}: malformed static archive: {e}"));
            return;
        }
    };
    for m in ar.members() {
        let m = match m {
            Ok(m) => m,
            Err(e) => {
                out.2.push(format!("{path}: member list: {e}"));
                return;
            }
        };
        let name = String::from_utf8_lossy(m.name()).into_owned();
        if m.is_thin() {
            continue;
        }
        let Ok(bytes) = m.data(data) else {
            out.2.push(format!(
                "{path}: member {name}: data passes the end of the archive"
            ));
            continue;
        };
        if elf::is_elf(bytes) || bundle::looks_like_bundle(bytes) {
            let member = format!("{path}({name})");
            let defer = defer.as_mut().map(|(map, later)| (*map, &mut **later));
            from_bytes(out, &member, bytes, opts, defer, None);
        }
    }
}

/// Kernels of one member of a wheel (read from the zip, bounded memory).
pub(super) fn one_member(
    w: &crate::wheel::Wheel,
    f: &FileReport,
    opts: &KernelsOptions,
) -> FileRows {
    let mut out: FileRows = (Vec::new(), Vec::new(), Vec::new());
    let path = f.path.as_str();
    if opts
        .binaries
        .as_ref()
        .is_some_and(|set| !set.contains(path))
        && f.kind != FileKind::Kpack
    {
        return out;
    }
    if !matches!(
        f.kind,
        FileKind::Kpack
            | FileKind::FatBinary
            | FileKind::Bundle
            | FileKind::CodeObject
            | FileKind::EmbeddedCode
            | FileKind::KernelDatabase
    ) {
        return out;
    }
    let Some(m) = w.member(path) else { return out };
    let data = match w.contents(m, &std::env::temp_dir()) {
        Ok(d) => d,
        Err(e) => {
            out.2.push(e.to_string());
            return out;
        }
    };
    if f.kind == FileKind::Kpack {
        match Archive::from_bytes(Path::new(path), data.to_vec()) {
            Ok(a) => from_archive(&mut out, path, &a, None, opts),
            Err(e) => out.2.push(e.to_string()),
        }
    } else {
        from_bytes(&mut out, path, &data, opts, None, Some(&f.embedded));
    }
    w.release(m);
    out
}
