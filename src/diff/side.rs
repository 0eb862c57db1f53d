//! One side of a diff: its scan and every code object from entry tables and archive
//! indexes (nothing decompressed).

use super::DiffOptions;
use crate::error::Result;
use crate::kernels::{CodeObjectRow, KernelsReport};
use crate::scan::{self, FileKind, ScanOptions, TreeReport};
use std::path::{Path, PathBuf};

pub(super) struct Side {
    pub(super) root: PathBuf,
    pub(super) scan: TreeReport,
    /// Every code object, from bundle entry tables and archive indexes (nothing
    /// decompressed).
    pub(super) objects: Vec<CodeObjectRow>,
    pub(super) kernels: KernelsReport,
    pub(super) root_is_file: bool,
    pub(super) diagnostics: Vec<String>,
}

/// Code objects found from entry tables and archive indexes.
struct Inventory<'a> {
    targets: &'a [String],
    objects: Vec<CodeObjectRow>,
    diagnostics: Vec<String>,
}

impl Inventory<'_> {
    fn push(
        &mut self,
        path: &str,
        binary: &str,
        bundle: Option<u32>,
        t: &str,
        (size, stored): (u64, u64),
    ) {
        if crate::kernels::target_selected(self.targets, t) {
            self.objects.push(CodeObjectRow {
                path: path.to_string(),
                binary: binary.to_string(),
                bundle,
                target: t.to_string(),
                size,
                stored,
            });
        }
    }

    /// The entries of an archive (only those of binary `only`, if given).
    fn archive(&mut self, path: &str, file: &Path, only: Option<&str>) {
        let idx = std::fs::File::open(file)
            .map_err(|e| e.to_string())
            .and_then(|f| crate::kpack::archive::parse_index_file(&f).map_err(|e| e.to_string()));
        self.archive_index(path, idx, only);
    }

    /// The entries of an archive member of a wheel.
    fn wheel_archive(&mut self, w: &crate::wheel::Wheel, path: &str) {
        let idx = match w.member(path) {
            Some(m) => w
                .contents(m, &std::env::temp_dir())
                .map_err(|e| e.to_string())
                .and_then(|d| crate::kpack::archive::parse_index(&d).map_err(|e| e.to_string())),
            None => Err("not in the wheel".to_string()),
        };
        self.archive_index(path, idx, None);
    }

    fn archive_index(
        &mut self,
        path: &str,
        idx: std::result::Result<crate::kpack::archive::ArchiveIndex, String>,
        only: Option<&str>,
    ) {
        match idx {
            Ok(idx) => {
                for e in &idx.kernels {
                    let (b, n) = e.key.rsplit_once('#').unwrap_or((&e.key, ""));
                    if only.is_some_and(|o| o != b) {
                        continue;
                    }
                    self.push(
                        path,
                        b,
                        n.parse().ok(),
                        &e.arch,
                        (e.size, e.compressed_size),
                    );
                }
            }
            Err(e) => self.diagnostics.push(format!("{path}: {e}")),
        }
    }
}

pub(super) fn read_side(root: &Path, opts: &DiffOptions) -> Result<Side> {
    crate::kernels::refuse_zip(root)?;
    let scan = scan::scan(
        root,
        &ScanOptions {
            threads: opts.threads,
            ..Default::default()
        },
        &crate::event::NoEvents,
    )?;
    // A wheel is a tree of members, not one file.
    let root_is_file = std::fs::metadata(root).is_ok_and(|m| m.is_file()) && scan.wheel.is_none();
    let mut inv = Inventory {
        targets: &opts.targets,
        objects: Vec::new(),
        diagnostics: Vec::new(),
    };
    let wheel = match &scan.wheel {
        Some(_) => Some(crate::wheel::Wheel::open(root)?),
        None => None,
    };
    for f in scan.files.iter().filter(|f| f.hard_link_of.is_none()) {
        if let Some(w) = &wheel {
            // A wheel's members are its files; host-only members are not followed
            // (their archives are members too, or in the device wheels).
            match f.kind {
                FileKind::Kpack => inv.wheel_archive(w, &f.path),
                FileKind::HostOnlyBinary => {}
                _ => {
                    for b in f.all_bundles() {
                        for t in &b.targets {
                            let sizes = (t.size, t.compressed_size);
                            inv.push(&f.path, &f.path, Some(b.index as u32), &t.arch, sizes);
                        }
                    }
                    if f.kind == FileKind::CodeObject
                        && let Some(t) = &f.arch
                    {
                        inv.push(&f.path, &f.path, None, t, (f.size, f.size));
                    }
                }
            }
            continue;
        }
        let abs = if root_is_file {
            root.to_path_buf()
        } else {
            root.join(&f.path)
        };
        match f.kind {
            FileKind::Kpack => inv.archive(&f.path, &abs, None),
            FileKind::HostOnlyBinary if root_is_file => {
                if let Some(m) = &f.marker {
                    for a in crate::kernels::marker_archives(&abs, m) {
                        inv.archive(&a.display().to_string(), &a, Some(&m.kernel_name));
                    }
                }
            }
            FileKind::CodeObject => {
                if let Some(t) = &f.arch {
                    inv.push(&f.path, &f.path, None, t, (f.size, f.size));
                }
            }
            _ => {
                for b in f.all_bundles() {
                    for t in &b.targets {
                        inv.push(
                            &f.path,
                            &f.path,
                            Some(b.index as u32),
                            &t.arch,
                            (t.size, t.compressed_size),
                        );
                    }
                }
            }
        }
    }
    let Inventory {
        mut objects,
        diagnostics,
        ..
    } = inv;
    // A host-only binary given alone: its device code is its archives', under its
    // own name.
    if root_is_file && let Some(m) = scan.files.first().and_then(|f| f.marker.as_ref()) {
        let name = scan.files[0].path.clone();
        for o in objects.iter_mut().filter(|o| o.binary == m.kernel_name) {
            o.binary = name.clone();
        }
    }
    Ok(Side {
        root: root.to_path_buf(),
        scan,
        objects,
        kernels: KernelsReport::default(),
        root_is_file,
        diagnostics,
    })
}
