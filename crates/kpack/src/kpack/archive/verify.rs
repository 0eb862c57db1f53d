//! Checking a whole archive.

use super::reader::Bytes;
use super::*;
use crate::error::Error;
impl Archive {
    /// Check everything: ranges, ordinals, arch lists, and that every frame decodes to
    /// its size (and, for zstd frames written with one, matches its checksum). Returns
    /// the faults found (empty when sound).
    pub fn verify(&self) -> Vec<String> {
        self.verify_hashed(false).0
    }

    /// [`verify`](Self::verify), also returning the SHA-256 of every kernel that
    /// decoded (index-aligned with `index.kernels`) when `hash` is set, from the same
    /// single decode (32 bytes each, as `ledger::Sha256Digest` holds them).
    pub fn verify_hashed(&self, hash: bool) -> (Vec<String>, Vec<Option<[u8; 32]>>) {
        let mut faults = Vec::new();
        let idx = &self.index;
        let n_ranges = idx.kernels.iter().filter(|k| !k.is_alias()).count();
        let mut seen = vec![
            false;
            n_ranges.max(
                idx.kernels
                    .iter()
                    .map(|k| k.ordinal as usize + 1)
                    .max()
                    .unwrap_or(0)
            )
        ];
        for k in &idx.kernels {
            let o = k.ordinal as usize;
            // A TOC alias repeats its primary's ordinal on purpose.
            if seen[o] && !k.is_alias() {
                faults.push(format!(
                    "ordinal {o} is used twice (again by {} @ {}), and not as an alias of \
                     code for the same binary that runs under both targets",
                    k.key, k.arch
                ));
            }
            seen[o] = true;
        }
        for (o, s) in seen.iter().enumerate() {
            if !s {
                faults.push(format!(
                    "ordinal {o} is not used by any code object (ordinals must be dense)"
                ));
            }
        }
        let mut by_off: Vec<&KernelEntry> = idx.kernels.iter().collect();
        by_off.sort_by_key(|k| (k.offset, k.compressed_size));
        for w in by_off.windows(2) {
            if w[0].offset + w[0].compressed_size > w[1].offset && w[0].ordinal != w[1].ordinal {
                faults.push(format!(
                    "{} @ {} and {} @ {} overlap in the file",
                    w[0].key, w[0].arch, w[1].key, w[1].arch
                ));
            }
        }
        // Decoding every frame is the expensive part: do it in parallel.
        let decoded: Vec<(Option<String>, Option<[u8; 32]>)> = {
            use rayon::prelude::*;
            idx.kernels
                .par_iter()
                .map(|k| {
                    // An alias's frame is its primary's: decoded once, below.
                    if k.is_alias() {
                        return (None, None);
                    }
                    // Streamed: memory stays at one buffer whatever original_size
                    // claims (a frame of zeros can decode to GiBs).
                    let stored_len = self.stored(k).len() as u64;
                    let verdict =
                        if self.index.compression_scheme == Scheme::None && stored_len != k.size {
                            (
                                Some(format!(
                                    "{} @ {}: is {stored_len} bytes, TOC says {}",
                                    k.key, k.arch, k.size
                                )),
                                None,
                            )
                        } else {
                            use sha2::Digest;
                            let mut h = hash.then(sha2::Sha256::new);
                            match self.decode_into(k, |b| {
                                if let Some(h) = &mut h {
                                    h.update(b);
                                }
                            }) {
                                Ok(()) => (None, h.map(|h| h.finalize().into())),
                                // The error names the key and arch already; the file is
                                // the caller's to name.
                                Err(Error::Format { error, .. }) => (Some(error.to_string()), None),
                                Err(e) => (Some(format!("{} @ {}: {e}", k.key, k.arch)), None),
                            }
                        };
                    if let Bytes::Map(m) = &self.bytes {
                        crate::fsutil::release_range(
                            m,
                            k.offset as usize,
                            k.compressed_size as usize,
                        );
                    }
                    verdict
                })
                .collect()
        };
        if let Bytes::Map(m) = &self.bytes {
            crate::fsutil::release_range(m, 0, m.len());
        }
        let mut hashes = Vec::with_capacity(decoded.len());
        for (fault, h) in decoded {
            faults.extend(fault);
            hashes.push(h);
        }
        let by_ordinal: BTreeMap<u32, usize> = idx
            .kernels
            .iter()
            .enumerate()
            .filter(|(_, k)| !k.is_alias())
            .map(|(i, k)| (k.ordinal, i))
            .collect();
        for (i, k) in idx.kernels.iter().enumerate().filter(|(_, k)| k.is_alias()) {
            hashes[i] = by_ordinal.get(&k.ordinal).and_then(|&p| hashes[p]);
        }
        for k in &idx.kernels {
            if k.offset < BLOB_START {
                faults.push(format!(
                    "{} @ {}: stored in the header ({:#x})",
                    k.key, k.arch, k.offset
                ));
            }
            if !idx.meta.gfx_arches.iter().any(|g| **g == *k.arch) {
                faults.push(format!(
                    "{} @ {}: arch {} is not in gfx_arches, so the runtime never selects it",
                    k.key, k.arch, k.arch
                ));
            }
            if let Some(n) = k.key.rsplit_once('#').map(|(_, n)| n) {
                if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                    faults.push(format!("{}: key does not end in #<TU index>", k.key));
                }
            } else {
                faults.push(format!(
                    "{}: key has no #<TU index> suffix (the runtime always looks one up)",
                    k.key
                ));
            }
            if let Err(e) = safe_relative_path(&k.key) {
                faults.push(format!("{}: {e}", k.key));
            }
        }
        (faults, hashes)
    }
}
