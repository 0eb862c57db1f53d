//! One binary of a pack ([`Worker::pack_binary`]): mapped once, its host part
//! written (a fat binary's rewritten host-only and streamed, a host-only one
//! re-pointed at the new archives), its code objects compressed into their units'
//! archives, from its bundles or from the input archives that hold them.

use super::*;
use crate::bundle::Wanted;
use crate::error::FormatResult;
use crate::fatbin::Fat;
use crate::kpack::archive::Source;
use crate::kpack::ledger::Sha256Hasher;

impl Worker<'_> {
    pub(super) fn pack_binary(
        &self,
        worker: usize,
        f: &Work,
        pb: &PlannedBinary,
        src: &Path,
        dst: &Path,
        meta: &std::fs::Metadata,
    ) -> Result<u64> {
        self.sink.event(PackEvent::Phase {
            worker,
            path: f.path.clone(),
            phase: Phase::Rewrite,
            bytes: f.size,
        });
        let (file, map) = map_input(f, src, meta)?;
        let data: &[u8] = &map;
        let marker = marker_for(
            &f.path,
            &self.opts.group,
            self.plan.archive_per,
            &self.plan.units,
        );
        // Rewrite first: the plan has its code objects in the archives already, so a
        // binary the rewrite refuses stops the pack (nothing is placed), with the
        // reason. A fat binary's host part is streamed to the stage (its pages and the
        // output's leave memory as they are done); a host-only one is re-pointed in
        // memory (it is small) and written once its code objects are archived.
        let (repointed, host) = if pb.host_only {
            let bytes =
                crate::fatbin::replace_marker(data, &marker).map_err(|e| Error::Unsupported {
                    path: f.path.clone().into(),
                    what: format!("cannot point the host-only binary at the new archives: {e}"),
                })?;
            let n = bytes.len() as u64;
            (Some(bytes), n)
        } else {
            let n = crate::fatbin::write_host_only((&file, &map), &marker, dst, meta, false)
                .map_err(|e| match e {
                    crate::fatbin::WriteError::Refused(e) => Error::Unsupported {
                        path: f.path.clone().into(),
                        what: format!("cannot be rewritten host-only: {e}; nothing was written"),
                    },
                    crate::fatbin::WriteError::Io(e) => e,
                })?;
            (None, n.0)
        };
        self.sink.event(PackEvent::Phase {
            worker,
            path: f.path.clone(),
            phase: Phase::Compress,
            bytes: f.size,
        });
        let mut entry = LedgerBinary {
            path: f.path.clone(),
            kernel_name: marker.kernel_name.clone(),
            bundles: pb.bundles.clone(),
            kernels: Vec::with_capacity(pb.kernels.len()),
            host_sha256: None,
        };
        if pb.host_only {
            self.archive_from_inputs(f, pb, &mut entry)?;
        } else {
            let release = |o: usize, l: usize| fsutil::release_range(&map, o, l);
            let read = crate::fatbin::read_releasing(data, &release);
            let Some(fat) = read.map_err(|e| Error::format(src, e))? else {
                return Err(Error::Changed {
                    path: f.path.clone().into(),
                    what: "no longer a fat binary".into(),
                });
            };
            // What the rewrite and the reading of the headers mapped (a 2 MiB folio
            // each) leaves the resident set before the code objects are read.
            release(0, map.len());
            let input = (&file, &map);
            let stored = self.archive_from_bundles(f, pb, src, input, &fat, &mut entry)?;
            if host + stored > f.size {
                self.note_growth(f, host, stored, &fat);
            }
        }
        if entry.kernels.len() != pb.kernels.len() {
            return Err(Error::Changed {
                path: f.path.clone().into(),
                what: format!(
                    "{} code object(s) planned, {} found while packing (the file changed?)",
                    pb.kernels.len(),
                    entry.kernels.len()
                ),
            });
        }
        if let Ok(mut l) = self.ledger.lock() {
            l.push(entry);
        }
        if let Some(bytes) = &repointed {
            fsutil::write_new(dst, bytes, meta)?;
        }
        Ok(host)
    }

    /// A host-only binary's code objects, from the input archives the plan found
    /// them in.
    fn archive_from_inputs(
        &self,
        f: &Work,
        pb: &PlannedBinary,
        entry: &mut LedgerBinary,
    ) -> Result<()> {
        for (co, arch, _, from) in &pb.kernels {
            let KernelFrom::Archive(p) = from else {
                continue;
            };
            let a = self.plan.inputs.get(p).ok_or_else(|| Error::Changed {
                path: f.path.clone().into(),
                what: format!("input archive {p} went away"),
            })?;
            let key = format!("{}#{co}", pb.kernel_name);
            let e = a.entry(&key, arch).ok_or_else(|| Error::Changed {
                path: p.into(),
                what: format!("{key} @ {arch} went away while packing"),
            })?;
            let bytes = a.kernel(e)?;
            let triple = e.metadata.get("target");
            self.archive_kernel(&f.path, *co, arch, Source::Bytes(&bytes), triple, entry)?;
        }
        Ok(())
    }

    /// A fat binary's planned code objects, from its bundles: read from the file
    /// (positioned reads: nothing of them is mapped), each bundle's pages released
    /// once consumed. Returns the bytes stored.
    fn archive_from_bundles(
        &self,
        f: &Work,
        pb: &PlannedBinary,
        src: &Path,
        (file, map): (&std::fs::File, &memmap2::Mmap),
        fat: &Fat,
        entry: &mut LedgerBinary,
    ) -> Result<u64> {
        let sec = fat.section;
        let span_offset = sec.as_ptr() as usize - map.as_ptr() as usize;
        let mut stored = 0u64;
        let wanted = Wanted::new(pb.kernels.iter().map(|k| (k.0, &*k.1)));
        for b in &fat.bundles {
            let bundle_at = span_offset + b.offset as usize;
            // One code object at a time, compressed as it is read: a compressed
            // bundle's code object is decoded piece by piece into the compressor,
            // never held whole.
            let mut each = |e: &crate::bundle::BundleEntry,
                            r: &mut crate::bundle::CodeObject<'_>|
             -> FormatResult<Result<()>> {
                let Some(arch) = wanted.arch(b.index as u32, e) else {
                    return Ok(Ok(()));
                };
                let from = Source::from(r);
                let co = b.index as u32;
                let triple = Some(e.id.triple.as_ref());
                Ok(self
                    .archive_kernel(&f.path, co, &arch, from, triple, entry)
                    .map(|n| stored += n))
            };
            // Code objects and CCOB payloads are read from the file, not the map: a
            // bundle of 30 targets is not held whole, nor the folios it is read
            // through.
            let input = crate::bundle::FileSection {
                map,
                file,
                at: span_offset,
            };
            b.each_code_object_streamed(sec, 1 << 34, &input, &mut each)
                .map_err(|e| Error::format(src, e))??;
            // Its pages are consumed: let them leave the resident set.
            fsutil::release_range(map, bundle_at, b.stored_size as usize);
        }
        Ok(stored)
    }

    /// A binary whose host part and archived code take more than the fat binary
    /// did: recorded with why.
    fn note_growth(&self, f: &Work, host: u64, stored: u64, fat: &Fat) {
        let compressed = fat
            .bundles
            .iter()
            .any(|b| b.compression != Compression::None);
        let in_bundles: u64 = fat.bundles.iter().map(|b| b.stored_size).sum();
        let mut why = Vec::new();
        if compressed && stored > in_bundles {
            why.push(format!(
                "its bundles were stored compressed (CCOB, {in_bundles} bytes); one zstd \
                 frame per kernel at level {} takes {stored} bytes{}",
                self.opts.level,
                if self.opts.level < crate::kpack::archive::LEVEL_MAX {
                    " (--level max narrows this)"
                } else {
                    ""
                }
            ));
        }
        if host >= f.size {
            // Nothing left the file: no whole page of .hip_fatbin to drop.
            why.push(format!(
                "the host-only file is {host} bytes, {} more than the fat binary \
                 ({}): its .hip_fatbin spans no whole page to remove, and the marker \
                 takes a page of its own",
                host - f.size,
                f.size
            ));
        } else if host + in_bundles > f.size {
            why.push(format!(
                "the host-only file keeps {host} of {} bytes (only whole pages of \
                 .hip_fatbin leave it, and the marker takes a page of its own)",
                f.size
            ));
        }
        if let Ok(mut g) = self.grown.lock() {
            g.push(Growth {
                path: f.path.clone(),
                bytes_in: f.size,
                bytes_out: host + stored,
                reason: why.join("; "),
            });
        }
    }

    /// Compress a code object into its unit's archive, hashing it as it goes;
    /// recorded in `entry` once its hash is checked against the input ledger's.
    fn archive_kernel(
        &self,
        path: &str,
        co: u32,
        arch: &str,
        from: Source<'_>,
        triple: Option<&str>,
        entry: &mut LedgerBinary,
    ) -> Result<u64> {
        let Some(&i) = self.plan.unit_of.get(arch) else {
            return Ok(0);
        };
        let Some(w) = &self.writers[i] else {
            return Ok(0);
        };
        let key = format!("{path}#{co}");
        let mut hash = Sha256Hasher::default();
        let mut size = 0u64;
        let encoded = w.encode(&key, arch, from, &mut |piece| {
            hash.update(piece);
            size += piece.len() as u64;
        })?;
        let sha256 = hash.finish();
        if let Some(h) = self
            .input_hashes
            .get(&(path.to_string(), co, arch.to_string()))
            && *h != sha256
        {
            return Err(Error::Damaged {
                path: path.into(),
                what: format!(
                    "bundle #{co} for {arch} differs from the input ledger's hash (the input \
                     tree is damaged: run verify on it)"
                ),
            });
        }
        let mut meta = BTreeMap::new();
        meta.insert(
            "target".to_string(),
            triple.map_or_else(
                || format!("hipv4-amdgcn-amd-amdhsa--{arch}"),
                str::to_string,
            ),
        );
        let stored = w.commit(encoded, meta)?;
        entry.kernels.push(LedgerKernel {
            bundle: co,
            target: crate::intern::interned(arch),
            size,
            sha256,
        });
        let n = self.kernel_counts[i].fetch_add(1, Ordering::Relaxed) + 1;
        let (_, total) = w.progress();
        self.sink.event(PackEvent::Family {
            family: self.plan.units[i].name.clone(),
            code_objects: n,
            stored: total,
        });
        Ok(stored)
    }
}

/// The input mapped from a fresh open that must still be the file `meta`
/// describes.
fn map_input(
    f: &Work,
    src: &Path,
    meta: &std::fs::Metadata,
) -> Result<(std::fs::File, memmap2::Mmap)> {
    let (file, now) =
        fsutil::open_scanned(src, Some((meta.dev(), meta.ino()))).map_err(|e| changed(src, e))?;
    if now.len() == 0 {
        return Err(Error::Changed {
            path: f.path.clone().into(),
            what: "empty, where the scan saw a fat binary".into(),
        });
    }
    let map = fsutil::map_open_file(&file).map_err(|e| Error::io(src, e))?;
    crate::mapped::note(&map, src);
    Ok((file, map))
}
