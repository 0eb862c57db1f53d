//! Writing the wheels of a split: the host wheel (members copied with their
//! compressed bytes, rewritten binaries from their spill files, METADATA with the
//! extras, RECORD), the device wheels (archives stored, database files, dist-info),
//! and the RECORD check every written wheel passes.

use super::{Out, WheelArchive, WheelOut, WheelSplitOptions, sha_of};
use crate::error::{Error, Result};
use crate::wheel::Wheel;
use crate::wheel::bootstrap;
use crate::wheel::metadata;
use crate::zip::{self, Member, Stored, ZipWriter};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Deflate the file `src` straight into the file `path`, read in chunks (neither is
/// ever in memory whole); returns the member record and the SHA-256 of `src`.
pub(crate) fn deflate_file_to(path: &Path, src: &Path, level: u32) -> Result<(Stored, [u8; 32])> {
    let io = |e| Error::io(path, e);
    let f = std::fs::File::create(path).map_err(io)?;
    let mut enc = flate2::write::DeflateEncoder::new(
        BufWriter::with_capacity(1 << 20, f),
        flate2::Compression::new(level.min(9)),
    );
    let (crc32, size, sha) = read_chunks(src, &mut |c| enc.write_all(c).map_err(io))?;
    let f = enc
        .finish()
        .map_err(io)?
        .into_inner()
        .map_err(|e| io(e.into_error()))?;
    let compressed_size = f.metadata().map_err(io)?.len();
    let stored = Stored {
        method: zip::Method::Deflated,
        crc32,
        size,
        compressed_size,
    };
    Ok((stored, sha))
}

/// The member record of the file `src` stored as it is, and its SHA-256, read in
/// chunks.
fn digest_file(src: &Path) -> Result<(Stored, [u8; 32])> {
    let (crc32, size, sha) = read_chunks(src, &mut |_| Ok(()))?;
    let stored = Stored {
        method: zip::Method::Stored,
        crc32,
        size,
        compressed_size: size,
    };
    Ok((stored, sha))
}

/// Read the file `src` in chunks of 1 MiB, handing each to `each`: its CRC-32, size
/// and SHA-256.
fn read_chunks(
    src: &Path,
    each: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<(u32, u64, [u8; 32])> {
    use sha2::Digest;
    let mut input = std::fs::File::open(src).map_err(|e| Error::io(src, e))?;
    let (mut crc, mut sha, mut size) = (flate2::Crc::new(), sha2::Sha256::new(), 0u64);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = std::io::Read::read(&mut input, &mut buf).map_err(|e| Error::io(src, e))?;
        if n == 0 {
            return Ok((crc.sum(), size, sha.finalize().into()));
        }
        crc.update(&buf[..n]);
        sha.update(&buf[..n]);
        size += n as u64;
        each(&buf[..n])?;
    }
}

/// Copy a member's stored bytes from the input as they are.
pub(crate) fn add_raw<W: Write>(
    z: &mut ZipWriter<W>,
    wheel: &Wheel,
    m: &Member,
    name: &str,
) -> Result<()> {
    let stored = Stored {
        method: m.method,
        crc32: m.crc32,
        size: m.size,
        compressed_size: m.compressed_size,
    };
    let mut r = m.stored(wheel.bytes());
    z.add(name, m.permissions(), stored, &mut r)
        .map_err(|e| Error::io(wheel.path(), e))?;
    wheel.release(m);
    Ok(())
}

pub(crate) fn add_text<W: Write>(
    z: &mut ZipWriter<W>,
    (name, mode): (&str, u32),
    text: &[u8],
    level: u32,
    at: &Path,
) -> Result<(String, [u8; 32], u64)> {
    let (c, s) = zip::write::deflate(text, level).map_err(|e| Error::io(at, e))?;
    z.add_bytes(name, mode, s, &c)
        .map_err(|e| Error::io(at, e))?;
    Ok((name.to_string(), metadata::sha256(text), text.len() as u64))
}

pub(crate) fn create(path: &Path) -> Result<ZipWriter<BufWriter<std::fs::File>>> {
    let f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    Ok(ZipWriter::new(BufWriter::with_capacity(1 << 20, f)))
}

pub(crate) fn finish(z: ZipWriter<BufWriter<std::fs::File>>, path: &Path) -> Result<()> {
    let w = z.finish().map_err(|e| Error::io(path, e))?;
    let f = w
        .into_inner()
        .map_err(|e| Error::io(path, e.into_error()))?;
    f.sync_all().map_err(|e| Error::io(path, e))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
        .map_err(|e| Error::io(path, e))
}

pub(crate) fn write_host(
    wheel: &Wheel,
    results: &[Out],
    path: &Path,
    prefix: &str,
    keys: &BTreeSet<String>,
    level: u32,
) -> Result<u64> {
    let info = &wheel.info;
    let md_name = format!("{}/METADATA", info.dist_info);
    let record_name = format!("{}/RECORD", info.dist_info);
    let mut z = create(path)?;
    // Names borrowed from the index: RECORD's rows of 40,000 members are not copied.
    let mut record: Vec<(Cow<str>, [u8; 32], u64)> = Vec::new();
    let mut order: Vec<(usize, &Member)> = wheel.index.members.iter().enumerate().collect();
    order.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    for (i, m) in order {
        match results.get(i) {
            Some(Out::Raw { .. }) if m.name == md_name => {
                let text = String::from_utf8(
                    m.read_all(wheel.bytes())
                        .map_err(|e| Error::format(wheel.path(), e))?,
                )
                .map_err(|_| {
                    Error::format(
                        wheel.path(),
                        crate::FormatError::new(0, "METADATA is not UTF-8".to_string()),
                    )
                })?;
                let lines = metadata::host_requirements(prefix, &info.version, keys);
                let new = metadata::insert_headers(&text, &lines);
                let (name, sha, size) = add_text(
                    &mut z,
                    (&m.name, m.permissions()),
                    new.as_bytes(),
                    level,
                    path,
                )?;
                record.push((Cow::Owned(name), sha, size));
            }
            Some(Out::Raw { sha }) => {
                add_raw(&mut z, wheel, m, &m.name)?;
                record.push((Cow::Borrowed(&m.name), *sha, m.size));
            }
            Some(Out::Rewritten { spill, stored, sha }) => {
                let mut f = std::fs::File::open(spill).map_err(|e| Error::io(spill, e))?;
                z.add(&m.name, m.permissions(), *stored, &mut f)
                    .map_err(|e| Error::io(path, e))?;
                let _ = std::fs::remove_file(spill);
                record.push((Cow::Borrowed(&m.name), *sha, stored.size));
            }
            _ => {}
        }
    }
    let text = metadata::record(&record, &record_name);
    let mode = wheel.mode_of(&record_name);
    add_text(&mut z, (&record_name, mode), text.as_bytes(), level, path)?;
    finish(z, path)?;
    Ok(record.len() as u64 + 1)
}

pub(crate) struct DeviceWheel<'a> {
    pub(crate) wheel: &'a Wheel,
    pub(crate) tags: &'a metadata::TagSet,
    pub(crate) results: &'a [Out],
    pub(crate) path: &'a Path,
    pub(crate) key: &'a str,
    pub(crate) targets: &'a [&'a String],
    pub(crate) archives: &'a BTreeMap<String, (PathBuf, crate::kpack::archive::ArchiveSummary)>,
    pub(crate) keys: &'a BTreeSet<String>,
    pub(crate) overlay: &'a str,
    pub(crate) group: &'a str,
    pub(crate) opts: &'a WheelSplitOptions,
}

pub(crate) fn write_device(d: &DeviceWheel<'_>) -> Result<WheelOut> {
    let info = &d.wheel.info;
    let prefix = d.opts.device_package_prefix.as_str();
    let dist = bootstrap::dist_name(prefix, d.key);
    let dist_info = metadata::dist_info_name(&dist, &info.version);
    // Members: archives and database files, sorted by name; then the dist-info.
    enum Src<'m> {
        Archive(&'m Path),
        Db(&'m Member, [u8; 32]),
    }
    let mut members: BTreeMap<String, Src<'_>> = BTreeMap::new();
    let mut archives = Vec::new();
    // One archive per processor, holding its variants.
    let mut processors: Vec<&str> = d
        .targets
        .iter()
        .map(|t| crate::bundle::target::base_processor(t))
        .collect();
    processors.sort_unstable();
    processors.dedup();
    for t in processors {
        if let Some((p, s)) = d.archives.get(t) {
            let name = format!("{}/.kpack/{}_{t}.kpack", d.overlay, d.group);
            archives.push(WheelArchive {
                path: name.clone(),
                target: t.to_string(),
                targets: d
                    .targets
                    .iter()
                    .filter(|x| crate::bundle::target::base_processor(x) == t)
                    .map(|x| x.to_string())
                    .collect(),
                code_objects: s.code_objects,
                raw_bytes: s.raw_bytes,
                bytes: s.file_size,
            });
            members.insert(name, Src::Archive(p));
        }
    }
    let mut dbs = 0;
    for (i, o) in d.results.iter().enumerate() {
        if let Out::Database { target, sha } = o
            && d.targets.contains(&target)
        {
            let m = &d.wheel.index.members[i];
            members.insert(m.name.clone(), Src::Db(m, *sha));
            dbs += 1;
        }
    }
    let mut z = create(d.path)?;
    let mut record = Vec::new();
    for (name, src) in &members {
        match src {
            Src::Archive(p) => {
                // zstd frames do not deflate: stored. Read twice (its CRC first, for
                // the local header), in chunks: an archive of a large tree is GBs.
                let (stored, sha) = digest_file(p)?;
                let mut f = std::fs::File::open(p).map_err(|e| Error::io(p, e))?;
                z.add(name, 0o644, stored, &mut f)
                    .map_err(|e| Error::io(d.path, e))?;
                record.push((name.clone(), sha, stored.size));
            }
            Src::Db(m, sha) => {
                add_raw(&mut z, d.wheel, m, name)?;
                record.push((name.clone(), *sha, m.size));
            }
        }
    }
    let lvl = d.opts.zip_level;
    let md = metadata::device_metadata(
        prefix,
        d.key,
        &info.name,
        &info.version,
        &d.opts.device_requires,
        d.keys,
    );
    // The regenerated dist-info files take the modes of the input's.
    let mode = |f: &str| d.wheel.mode_of(&format!("{}/{f}", info.dist_info));
    let wheel_text = metadata::device_wheel(d.tags);
    let top_level = format!("{}\n", d.overlay);
    for (f, text) in [
        ("METADATA", md.as_bytes()),
        ("WHEEL", wheel_text.as_bytes()),
        ("top_level.txt", top_level.as_bytes()),
    ] {
        let name = format!("{dist_info}/{f}");
        record.push(add_text(&mut z, (&name, mode(f)), text, lvl, d.path)?);
    }
    let record_name = format!("{dist_info}/RECORD");
    let text = metadata::record(&record, &record_name);
    add_text(
        &mut z,
        (&record_name, mode("RECORD")),
        text.as_bytes(),
        lvl,
        d.path,
    )?;
    finish(z, d.path)?;
    Ok(WheelOut {
        file: String::new(),
        dist,
        bundle_key: Some(d.key.to_string()),
        level: bootstrap::bundle(d.key).map(|b| b.level),
        members: record.len() as u64 + 1,
        bytes: 0,
        archives,
        database_files: dbs,
    })
}

/// Check a wheel's RECORD against its members: every file listed once with the
/// right SHA-256 (urlsafe base64 or hex) and size, RECORD itself listed without
/// a hash, nothing listed that is absent. Returns the faults.
pub fn check_record(w: &Wheel) -> Vec<String> {
    check_record_with(w, &|_| None)
}

/// [`check_record`], with the digests of the members already hashed (by name): the
/// split hashes each member as it reads it, so only the others are inflated here.
pub(crate) fn check_record_with(
    w: &Wheel,
    known: &dyn Fn(usize) -> Option<[u8; 32]>,
) -> Vec<String> {
    let name = format!("{}/RECORD", w.info.dist_info);
    let Some(rm) = w.member(&name) else {
        return vec![format!("{name} is missing")];
    };
    // The text is taken once and its rows borrow from it, sorted by path (a RECORD of
    // 40,000 members is MBs; a map of owned rows was three times that again).
    let text = match rm.read_all(w.bytes()) {
        Ok(t) => String::from_utf8(t)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        Err(e) => return vec![e.to_string()],
    };
    let mut rows: Vec<[Cow<str>; 3]> = Vec::new();
    let mut faults = Vec::new();
    metadata::each_record_row(&text, |row| match <[Cow<str>; 3]>::try_from(row) {
        Ok(r) if r[0].is_empty() => {}
        Ok(r) => rows.push(r),
        Err(row) => faults.push(format!("RECORD row {row:?} does not have 3 fields")),
    });
    let listed = last_of_each(rows, &mut faults);
    let mut found = vec![false; listed.len()];
    for (i, m) in w
        .index
        .members
        .iter()
        .enumerate()
        .filter(|(_, m)| !m.is_dir())
    {
        let Ok(at) = listed.binary_search_by(|r| r[0].as_ref().cmp(m.name.as_str())) else {
            faults.push(format!("{} is not in RECORD", m.name));
            continue;
        };
        found[at] = true;
        let [_, hash, size] = &listed[at];
        if m.name == name {
            if !hash.is_empty() || !size.is_empty() {
                faults.push("RECORD lists a hash for itself".into());
            }
            continue;
        }
        let digest = match known(i) {
            Some(d) => Ok(d),
            None => {
                let d = sha_of(w, m);
                // Each member's pages go once hashed: a whole wheel can be read here
                // (every output wheel after the split), and the map kept it all
                // resident (667 MiB peak splitting a 603 MiB wheel; 229 MiB with this).
                w.release(m);
                d
            }
        };
        match digest {
            Ok(d) => {
                let b64 = metadata::record_hash(&d);
                if hash.as_ref() != b64 {
                    faults.push(format!(
                        "{}: RECORD hash {hash} differs from the content's {b64}",
                        m.name
                    ));
                }
                if size.as_ref() != m.size.to_string() {
                    faults.push(format!(
                        "{}: RECORD size {size} differs from {}",
                        m.name, m.size
                    ));
                }
            }
            Err(e) => faults.push(format!("{}: {e}", m.name)),
        }
    }
    faults.extend(
        (listed.iter().zip(&found))
            .filter(|(_, found)| !**found)
            .map(|(r, _)| format!("{} is in RECORD but not in the wheel", r[0])),
    );
    faults
}

/// RECORD's rows sorted by path, each path once: the last row of a path listed
/// twice stands, and each repeat is a fault.
fn last_of_each<'a>(
    mut rows: Vec<[Cow<'a, str>; 3]>,
    faults: &mut Vec<String>,
) -> Vec<[Cow<'a, str>; 3]> {
    // Stable: rows of one path stay in the order they are listed.
    rows.sort_by(|a, b| a[0].cmp(&b[0]));
    let mut out: Vec<[Cow<str>; 3]> = Vec::with_capacity(rows.len());
    for r in rows {
        match out.last_mut() {
            Some(last) if last[0] == r[0] => {
                faults.push(format!("{} listed twice in RECORD", r[0]));
                *last = r;
            }
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A RECORD with a short row, a wrong hash and a member it does not list: each is
    /// a fault, the short row quoted as it was read; a member listed right is not.
    #[test]
    fn record_faults_name_each_row() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("pkg-1.0-py3-none-any.whl");
        let di = "pkg-1.0.dist-info";
        let ok = b"right";
        let (md, wh): (&[u8], &[u8]) = (
            b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
            b"Wheel-Version: 1.0\nTag: py3-none-any\n",
        );
        let row = |n: &str, b: &[u8]| {
            format!(
                "{n},{},{}\n",
                metadata::record_hash(&metadata::sha256(b)),
                b.len()
            )
        };
        let record = row("pkg/ok.txt", ok)
            + "pkg/short.txt,sha256=x\n"
            + &row("pkg/wrong.txt", b"other")
            + &row(&format!("{di}/METADATA"), md)
            + &row(&format!("{di}/WHEEL"), wh)
            + &format!("{di}/RECORD,,\n");
        let members: [(String, &[u8]); 6] = [
            ("pkg/ok.txt".into(), ok),
            ("pkg/wrong.txt".into(), b"wrong"),
            ("pkg/unlisted.txt".into(), b"u"),
            (format!("{di}/METADATA"), md),
            (format!("{di}/WHEEL"), wh),
            (format!("{di}/RECORD"), record.as_bytes()),
        ];
        let mut z = create(&path).unwrap();
        for (name, bytes) in &members {
            z.add_bytes(name, 0o644, zip::write::stored(bytes), bytes)
                .unwrap();
        }
        finish(z, &path).unwrap();
        let faults = check_record(&Wheel::open(&path).unwrap());
        assert_eq!(
            faults,
            [
                "RECORD row [\"pkg/short.txt\", \"sha256=x\"] does not have 3 fields".to_string(),
                "pkg/wrong.txt: RECORD hash ".to_string()
                    + &metadata::record_hash(&metadata::sha256(b"other"))
                    + " differs from the content's "
                    + &metadata::record_hash(&metadata::sha256(b"wrong")),
                "pkg/unlisted.txt is not in RECORD".to_string(),
            ],
            "{faults:#?}"
        );
    }
}
