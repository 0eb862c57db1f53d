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
    read_releasing(data, &|_, _| {})
}

/// [`read`] of a file map, handing each bundle's range of `data` (offset, length)
/// to `release` once its header is read (an ELF binary's: a PE image's headers are
/// read in place).
pub fn read_releasing<'d>(
    data: &'d [u8],
    release: &dyn Fn(usize, usize),
) -> FormatResult<Option<Fat<'d>>> {
    let (span, bundles) = match Format::of(data) {
        Some(Format::Elf) => match elf::inspect_releasing(data, release)? {
            ElfContent::Fat(fat) if !fat.host_only => {
                let fat = *fat;
                let Some(span) = fat.fatbin else {
                    return Ok(None);
                };
                ((span.offset, span.size), fat.bundles)
            }
            _ => return Ok(None),
        },
        Some(Format::Pe) => match crate::coff::inspect(data)? {
            Some(pe) if !pe.host_only => {
                let Some(span) = pe.fatbin else {
                    return Ok(None);
                };
                (span, pe.bundles)
            }
            _ => return Ok(None),
        },
        None => return Ok(None),
    };
    let (off, len) = span;
    let end = off.saturating_add(len) as usize;
    Ok(data
        .get(off as usize..end)
        .map(|section| Fat { section, bundles }))
}

/// The executable format a fat binary's host code is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// ELF (Linux): the bundles in `.hip_fatbin`.
    Elf,
    /// PE/COFF (Windows DLL or EXE): the bundles in `.hip_fat`.
    Pe,
}

impl Format {
    /// The format of `data` by its magic; `None` for anything else.
    pub fn of(data: &[u8]) -> Option<Self> {
        if elf::is_elf(data) {
            Some(Format::Elf)
        } else if crate::coff::is_pe(data) {
            Some(Format::Pe)
        } else {
            None
        }
    }

    /// The format the operations below read `data` as: what is not a PE image goes
    /// to the ELF reader, which says what is wrong with it ("not an ELF file").
    fn dispatch(data: &[u8]) -> Self {
        Self::of(data).unwrap_or(Format::Elf)
    }
}

/// Why a fat binary was not rewritten, re-pointed or read as its loader maps it, in
/// the terms of its format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FatbinError {
    /// An ELF binary's reason.
    #[error(transparent)]
    Elf(#[from] elf::rewrite::RewriteError),
    /// A PE image's reason.
    #[error(transparent)]
    Pe(#[from] crate::coff::rewrite::PeRewriteError),
    /// The image could not be read as its loader maps it.
    #[error("{0}")]
    Loaded(String),
}

impl FatbinError {
    /// Whether the binary is well-formed and the operation declined it (not a fat
    /// binary, already host-only, of a kind not handled, refused): a finding, where
    /// anything else is damage.
    pub fn is_refusal(&self) -> bool {
        use elf::rewrite::RewriteError as E;
        match self {
            FatbinError::Elf(e) => matches!(
                e,
                E::NotFatBinary | E::AlreadyHostOnly(_) | E::Unsupported(_) | E::Refused(_)
            ),
            FatbinError::Pe(e) => matches!(e, crate::coff::rewrite::PeRewriteError::Refused(_)),
            FatbinError::Loaded(_) => false,
        }
    }
}

/// A computed host-only rewrite, verified: what changes and the bytes.
pub struct Rewritten {
    /// What changes, in the terms of the format.
    pub plan: Plan,
    /// The output image.
    pub bytes: Vec<u8>,
}

/// The host-only rewrite of an ELF or PE fat binary with `marker`, an ELF binary's
/// program-header table placed as `phdrs` says. Nothing is written.
pub fn rewrite_with(
    data: &[u8],
    marker: &Marker,
    phdrs: elf::rewrite::PhdrLayout,
) -> Result<Rewritten, FatbinError> {
    Ok(match Format::dispatch(data) {
        Format::Pe => {
            let r = crate::coff::rewrite::plan_rewrite(data, marker)?;
            Rewritten {
                plan: Plan::Pe(Box::new(r.plan)),
                bytes: r.bytes,
            }
        }
        Format::Elf => {
            let r = elf::rewrite::plan_rewrite_with(data, marker, phdrs)?;
            Rewritten {
                plan: Plan::Elf(Box::new(r.plan)),
                bytes: r.bytes,
            }
        }
    })
}

/// The host-only rewrite of an ELF or PE fat binary with `marker`: the new bytes, or
/// why not.
pub fn rewrite_host_only(data: &[u8], marker: &Marker) -> Result<Vec<u8>, FatbinError> {
    rewrite_with(data, marker, Default::default()).map(|r| r.bytes)
}

/// Why [`write_host_only`] wrote nothing.
#[derive(Debug)]
pub enum WriteError {
    /// The binary cannot be rewritten (or its output failed verification).
    Refused(FatbinError),
    /// The output could not be written or read back.
    Io(crate::Error),
}

/// [`rewrite_host_only`] written to the new file `dst` (the permissions and the
/// modification time of `like`) without the output in memory: an ELF image is
/// streamed from the input's map, then verified as written, read back through a map
/// of `dst`; the pages of both leave the resident set as they are done. Returns the
/// size written and, with `hash`, the SHA-256 of the bytes (hex, as the ledger keeps
/// it). On an error `dst` is removed.
///
/// The input's bytes are read from `file` (the file `input` maps) with positioned
/// reads, and so is the output's check: what is copied and compared is not mapped.
pub fn write_host_only(
    (file, input): (&std::fs::File, &memmap2::Mmap),
    marker: &Marker,
    dst: &std::path::Path,
    like: &std::fs::Metadata,
    hash: bool,
) -> Result<(u64, Option<String>), WriteError> {
    let release = |at: usize, len: usize| crate::fsutil::release_range(input, at, len);
    write_host_only_from((input, Some(file)), &release, marker, dst, (like, hash))
}

/// [`write_host_only`] of `data` (a map of the caller's, or memory), handing each
/// range of it (offset, length) to `release` once it is copied and once it is
/// verified.
pub fn write_host_only_releasing(
    data: &[u8],
    release: &dyn Fn(usize, usize),
    marker: &Marker,
    dst: &std::path::Path,
    (like, hash): (&std::fs::Metadata, bool),
) -> Result<(u64, Option<String>), WriteError> {
    write_host_only_from((data, None), release, marker, dst, (like, hash))
}

/// [`write_host_only_releasing`], reading the input's bytes from `file` when given
/// (the file `data` maps), and the output's from the file written.
fn write_host_only_from(
    (data, file): (&[u8], Option<&std::fs::File>),
    release: &dyn Fn(usize, usize),
    marker: &Marker,
    dst: &std::path::Path,
    (like, hash): (&std::fs::Metadata, bool),
) -> Result<(u64, Option<String>), WriteError> {
    use crate::fsutil::{map_file, release_range, write_new, write_new_with};
    use sha2::Digest;
    if Format::dispatch(data) != Format::Elf {
        let bytes = rewrite_host_only(data, marker).map_err(WriteError::Refused)?;
        write_new(dst, &bytes, like).map_err(WriteError::Io)?;
        let sha = hash.then(|| crate::kpack::ledger::sha256_hex(&bytes));
        return Ok((bytes.len() as u64, sha));
    }
    let prepared = elf::rewrite::prepare_rewrite(data, marker, release)
        .map_err(|e| WriteError::Refused(e.into()))?;
    let copied = |r: std::ops::Range<usize>| release(r.start, r.len());
    let mut sha = hash.then(sha2::Sha256::new);
    write_new_with(dst, like, &mut |w| {
        let mut hashed = Hashed {
            w,
            sha: sha.as_mut(),
        };
        match file {
            Some(f) => prepared.image.write_reading(&mut hashed, f, &copied),
            None => prepared.image.write_to(&mut hashed, &copied),
        }
    })
    .map_err(WriteError::Io)?;
    let sha = sha.map(|h| format!("{:x}", h.finalize()));
    let verified = map_file(dst)
        .map_err(|e| WriteError::Io(crate::Error::io(dst, e)))
        .and_then(|out| {
            let out = out.ok_or_else(|| {
                let e =
                    elf::rewrite::RewriteError::VerifyFailed(vec!["nothing was written".into()]);
                WriteError::Refused(e.into())
            })?;
            let written = match file {
                Some(_) => Some(
                    std::fs::File::open(dst)
                        .map_err(|e| WriteError::Io(crate::Error::io(dst, e)))?,
                ),
                None => None,
            };
            let done = Checked {
                release,
                out: &out,
                files: file.zip(written.as_ref()),
            };
            let plan = prepared.verify(data, &out, &done);
            release_range(&out, 0, out.len());
            plan.map_err(|e| WriteError::Refused(e.into()))
        });
    match verified {
        Ok(plan) => Ok((plan.output_size, sha)),
        Err(e) => {
            let _ = std::fs::remove_file(dst);
            Err(e)
        }
    }
}

/// How the written host part is checked against the input: through the maps,
/// released as compared, or read from the files.
struct Checked<'a> {
    release: &'a dyn Fn(usize, usize),
    out: &'a memmap2::Mmap,
    files: Option<(&'a std::fs::File, &'a std::fs::File)>,
}

impl elf::rewrite::Compared for Checked<'_> {
    fn done(&self, a: std::ops::Range<usize>, b: std::ops::Range<usize>) {
        (self.release)(a.start, a.len());
        crate::fsutil::release_range(self.out, b.start, b.len());
    }

    fn files(&self) -> Option<(&std::fs::File, &std::fs::File)> {
        self.files
    }
}

/// A writer that hashes what passes through it.
struct Hashed<'w> {
    w: &'w mut dyn std::io::Write,
    sha: Option<&'w mut sha2::Sha256>,
}

impl std::io::Write for Hashed<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.w.write(buf)?;
        if let Some(h) = self.sha.as_mut() {
            sha2::Digest::update(&mut **h, &buf[..n]);
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }
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

impl Plan {
    /// The input's size.
    pub fn input_size(&self) -> u64 {
        match self {
            Plan::Elf(p) => p.input_size,
            Plan::Pe(p) => p.input_size,
        }
    }

    /// The output's size.
    pub fn output_size(&self) -> u64 {
        match self {
            Plan::Elf(p) => p.output_size,
            Plan::Pe(p) => p.output_size,
        }
    }

    /// Bytes of device code removed from the file.
    pub fn removed(&self) -> u64 {
        match self {
            Plan::Elf(p) => p.bytes_removed,
            Plan::Pe(p) => p.removed,
        }
    }
}

/// The plan of [`rewrite_host_only`] (the preview of the CLI and the TUI), or why
/// the binary cannot be rewritten.
pub fn plan_host_only(data: &[u8], marker: &Marker) -> Result<Plan, FatbinError> {
    rewrite_with(data, marker, Default::default()).map(|r| r.plan)
}

/// A host-only ELF or PE binary pointed at other archives (its marker replaced): the
/// new bytes, or why not.
pub fn replace_marker(data: &[u8], marker: &Marker) -> Result<Vec<u8>, FatbinError> {
    Ok(match Format::dispatch(data) {
        Format::Pe => crate::coff::rewrite::replace_marker(data, marker)?,
        Format::Elf => elf::remark::replace_marker(data, marker)?,
    })
}

/// A host-only ELF or PE binary read as its loader maps it: the faults that would
/// keep the runtime from its marker (empty: every wrapper reaches it), or `None`
/// when it has no HIP wrappers.
pub fn loaded_faults(data: &[u8]) -> Result<Option<Vec<String>>, FatbinError> {
    match Format::dispatch(data) {
        Format::Pe => crate::coff::loaded::loaded_faults(data),
        Format::Elf => elf::loaded::loaded_view(data).map(|v| v.map(|v| v.faults)),
    }
    .map_err(FatbinError::Loaded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn fixture(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/bin")
            .join(name)
    }

    fn marker() -> Marker {
        Marker {
            kpack_search_paths: vec!["../.kpack/t.kpack".into()],
            kernel_name: "lib/x".into(),
        }
    }

    #[test]
    fn a_streamed_host_only_file_is_the_in_memory_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let names = [
            "app_nopie",
            "app_pie",
            "libkernels.so",
            "libkernels_z.so",
            "librdc.so",
            "libvadd.so",
            "libzkern.so",
            "libkpe.dll",
        ];
        for name in names {
            let src = fixture(name);
            let like = std::fs::metadata(&src).unwrap();
            let file = std::fs::File::open(&src).unwrap();
            let map = crate::fsutil::map_open_file(&file).unwrap();
            let want = rewrite_host_only(&map, &marker()).unwrap();
            let dst = dir.path().join(name);
            let (size, sha) = write_host_only((&file, &map), &marker(), &dst, &like, true).unwrap();
            let got = std::fs::read(&dst).unwrap();
            assert!(got == want, "{name}: the streamed bytes differ");
            assert_eq!(size, want.len() as u64, "{name}");
            assert_eq!(sha, Some(crate::kpack::ledger::sha256_hex(&want)), "{name}");
            let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode();
            assert_eq!(mode(&dst), mode(&src), "{name}");
        }
    }

    /// The written host part is checked against the input read from the files,
    /// not through the slices: a byte of `.text` that differs in the output file
    /// only (the slice given for it holds the rewrite's bytes) is a fault; the same
    /// check of the file as written finds none.
    #[test]
    fn the_check_of_a_written_host_part_reads_the_files() {
        use object::{Object, ObjectSection};
        let src = fixture("libvadd.so");
        let input = std::fs::read(&src).unwrap();
        let prepare = || elf::rewrite::prepare_rewrite(&input, &marker(), &|_, _| {}).unwrap();
        let bytes = prepare().image.to_vec();
        let dir = tempfile::tempdir().unwrap();
        let dst = dir.path().join("out");
        std::fs::write(&dst, &bytes).unwrap();
        let out = crate::fsutil::map_file(&dst).unwrap().unwrap();
        let (infile, outfile) = (
            std::fs::File::open(&src).unwrap(),
            std::fs::File::open(&dst).unwrap(),
        );
        let check = Checked {
            release: &|_, _| {},
            out: &out,
            files: Some((&infile, &outfile)),
        };
        assert!(prepare().verify(&input, &bytes, &check).is_ok());
        let parsed = object::File::parse(&*bytes).unwrap();
        let (at, _) = parsed
            .section_by_name(".text")
            .unwrap()
            .file_range()
            .unwrap();
        let mut changed = bytes.clone();
        changed[at as usize + 3] ^= 0xff;
        std::fs::write(&dst, &changed).unwrap();
        let outfile = std::fs::File::open(&dst).unwrap();
        let check = Checked {
            files: Some((&infile, &outfile)),
            ..check
        };
        match prepare().verify(&input, &bytes, &check) {
            Err(elf::rewrite::RewriteError::VerifyFailed(f)) => assert!(
                f.iter().any(|f| f == "section .text changed content"),
                "{f:?}"
            ),
            other => panic!("{:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn a_binary_that_cannot_be_rewritten_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["libplain.so", "hostonly"] {
            let src = fixture(name);
            let like = std::fs::metadata(&src).unwrap();
            let file = std::fs::File::open(&src).unwrap();
            let map = crate::fsutil::map_open_file(&file).unwrap();
            let dst = dir.path().join(name);
            let got = write_host_only((&file, &map), &marker(), &dst, &like, false);
            assert!(
                matches!(got, Err(WriteError::Refused(_))),
                "{name}: {got:?}"
            );
            assert!(!dst.exists(), "{name}: a file was left");
        }
    }
}
