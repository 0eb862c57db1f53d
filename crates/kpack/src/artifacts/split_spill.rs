//! A split's jobs on disk ([`crate::spill`]) in the order they run, largest file
//! first: gathered in memory while the artifact is scanned, written out before the
//! first file is split and dropped, so that the run holds none of them (40,000 jobs,
//! their paths and their order took 4.9 MB of an 8 GiB split's heap at its peak;
//! #32).

use super::split_jobs::{FileJob, Job, KeptCode};
use crate::pathstore::PathStore;
use crate::spill::{Records, RecordsWriter};
use std::io;
use std::path::Path;
use std::sync::Arc;

/// A job as the run reads it back.
pub(super) struct RunJob {
    pub prefix: Arc<str>,
    /// Relative to the prefix, `/`-separated.
    pub path: String,
    pub size: u64,
    pub identity: Option<(u64, u64)>,
    pub job: Job,
}

/// The jobs of a split, in the order they run.
pub(super) struct SpilledJobs {
    records: Records,
    /// The prefixes the jobs name by number.
    prefixes: Vec<Arc<str>>,
}

impl SpilledJobs {
    /// `jobs` (their paths in `paths`) written to unnamed files in `dir`, largest
    /// first (then by prefix, then in the order gathered: within a prefix, their
    /// paths').
    pub fn write(jobs: Vec<FileJob>, paths: &PathStore, dir: &Path) -> io::Result<SpilledJobs> {
        let mut order: Vec<u32> = (0..jobs.len() as u32).collect();
        order.sort_by(|&i, &k| {
            let (a, b) = (&jobs[i as usize], &jobs[k as usize]);
            (b.report.size.cmp(&a.report.size)).then_with(|| (&a.prefix, i).cmp(&(&b.prefix, k)))
        });
        let mut prefixes: Vec<Arc<str>> = Vec::new();
        let mut w = RecordsWriter::new_in(dir)?;
        let mut rec = Vec::new();
        for i in order {
            let j = &jobs[i as usize];
            let p = match prefixes.iter().position(|p| *p == j.prefix) {
                Some(p) => p,
                None => {
                    prefixes.push(j.prefix.clone());
                    prefixes.len() - 1
                }
            };
            rec.clear();
            encode(&mut rec, p as u32, j, &paths.get(j.report.path));
            w.push(&rec)?;
        }
        Ok(SpilledJobs {
            records: w.finish()?,
            prefixes,
        })
    }

    /// How many jobs.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// The `k`th job to run.
    pub fn get(&self, k: usize) -> io::Result<RunJob> {
        let rec = self.records.get(k)?;
        decode(&rec, &self.prefixes).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("spilled job {k} is corrupt"),
            )
        })
    }
}

const COPY: u8 = 0;
const SYMLINK: u8 = 1;
const SPECIAL: u8 = 2;
const SPECIAL_TYPED: u8 = 3;
const DATABASE: u8 = 4;
const BINARY: u8 = 5;

/// Little-endian: prefix number, size, identity (a flag, device, inode), path; the
/// job's tag and what it holds (strings as a u32 length and their bytes).
fn encode(out: &mut Vec<u8>, prefix: u32, j: &FileJob, path: &str) {
    let put_str = |out: &mut Vec<u8>, s: &str| {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    out.extend_from_slice(&prefix.to_le_bytes());
    out.extend_from_slice(&j.report.size.to_le_bytes());
    let (known, (dev, ino)) = (
        j.report.identity.is_some(),
        j.report.identity.unwrap_or_default(),
    );
    out.push(u8::from(known));
    out.extend_from_slice(&dev.to_le_bytes());
    out.extend_from_slice(&ino.to_le_bytes());
    put_str(out, path);
    match &j.job {
        Job::Copy => out.push(COPY),
        Job::Symlink => out.push(SYMLINK),
        Job::Special(None) => out.push(SPECIAL),
        Job::Special(Some(t)) => {
            out.push(SPECIAL_TYPED);
            put_str(out, t);
        }
        Job::Database(arch) => {
            out.push(DATABASE);
            put_str(out, arch);
        }
        Job::Binary(kept) => {
            out.push(BINARY);
            out.extend_from_slice(&(kept.len() as u32).to_le_bytes());
            for (bundle, arch, triple) in kept.iter() {
                out.extend_from_slice(&bundle.to_le_bytes());
                put_str(out, arch);
                put_str(out, triple);
            }
        }
    }
}

/// Reads what [`encode`] wrote.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4)?.try_into().ok().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8)?.try_into().ok().map(u64::from_le_bytes)
    }

    fn str(&mut self) -> Option<&'a str> {
        let n = self.u32()? as usize;
        std::str::from_utf8(self.take(n)?).ok()
    }
}

fn decode(rec: &[u8], prefixes: &[Arc<str>]) -> Option<RunJob> {
    let mut c = Cursor(rec);
    let prefix = prefixes.get(c.u32()? as usize)?.clone();
    let size = c.u64()?;
    let known = c.u8()? != 0;
    let (dev, ino) = (c.u64()?, c.u64()?);
    let path = c.str()?.to_string();
    let job = match c.u8()? {
        COPY => Job::Copy,
        SYMLINK => Job::Symlink,
        SPECIAL => Job::Special(None),
        SPECIAL_TYPED => Job::Special(Some(c.str()?.into())),
        DATABASE => Job::Database(c.str()?.into()),
        BINARY => {
            let n = c.u32()? as usize;
            // Each takes 12 bytes at least: a count past the record is corrupt.
            if n > c.0.len() / 12 {
                return None;
            }
            let mut kept: Vec<KeptCode> = Vec::with_capacity(n);
            for _ in 0..n {
                let bundle = c.u32()?;
                let arch = crate::intern::interned(c.str()?);
                let triple = crate::intern::interned(c.str()?);
                kept.push((bundle, arch, triple));
            }
            Job::Binary(kept.into())
        }
        _ => return None,
    };
    (c.0.is_empty()).then_some(RunJob {
        prefix,
        path,
        size,
        identity: known.then_some((dev, ino)),
        job,
    })
}

#[cfg(test)]
mod tests {
    use super::super::split_jobs::JobFile;
    use super::*;

    /// Every kind of job comes back as it was gathered, largest first (equal sizes
    /// by prefix, then as gathered); a record cut short or with bytes left over is
    /// refused.
    #[test]
    fn jobs_come_back_in_running_order() {
        let mut paths = PathStore::default();
        let (a, b): (Arc<str>, Arc<str>) = ("lib".into(), "bin".into());
        let code = |n: u32, arch: &str| -> KeptCode {
            (
                n,
                arch.into(),
                format!("hipv4-amdgcn-amd-amdhsa--{arch}").into(),
            )
        };
        let jobs_of = [
            (&a, "x/copy", 10, Some((1, 2)), Job::Copy),
            (&a, "link", 5, None, Job::Symlink),
            (&b, "fifo", 0, None, Job::Special(Some("fifo".into()))),
            (&b, "odd", 0, None, Job::Special(None)),
            (
                &a,
                "db/é.co",
                30,
                Some((3, 4)),
                Job::Database("gfx90a:xnack+".into()),
            ),
            (
                &b,
                "libbig.so",
                30,
                Some((5, 6)),
                Job::Binary(vec![code(0, "gfx1100"), code(2, "gfx90a:xnack-")].into()),
            ),
            (
                &a,
                "empty.so",
                7,
                Some((7, 8)),
                Job::Binary(Vec::new().into()),
            ),
        ];
        let jobs: Vec<FileJob> = (jobs_of.iter())
            .map(|(p, path, size, identity, job)| FileJob {
                prefix: Arc::clone(p),
                report: JobFile {
                    path: paths.push(path),
                    size: *size,
                    identity: *identity,
                },
                job: match job {
                    Job::Copy => Job::Copy,
                    Job::Symlink => Job::Symlink,
                    Job::Special(t) => Job::Special(t.clone()),
                    Job::Database(t) => Job::Database(t.clone()),
                    Job::Binary(k) => Job::Binary(k.clone()),
                },
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let s = SpilledJobs::write(jobs, &paths, dir.path()).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let order: Vec<String> = (0..s.len())
            .map(|k| {
                let j = s.get(k).unwrap();
                format!("{}/{}", j.prefix, j.path)
            })
            .collect();
        assert_eq!(
            order,
            [
                "bin/libbig.so",
                "lib/db/é.co",
                "lib/x/copy",
                "lib/empty.so",
                "lib/link",
                "bin/fifo",
                "bin/odd"
            ]
        );
        let big = s.get(0).unwrap();
        assert_eq!((big.size, big.identity), (30, Some((5, 6))));
        let Job::Binary(k) = &big.job else {
            panic!("not a binary job")
        };
        assert_eq!(&*k[1].1, "gfx90a:xnack-");
        assert_eq!(&*k[1].2, "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-");
        assert!(matches!(&s.get(1).unwrap().job, Job::Database(t) if &**t == "gfx90a:xnack+"));
        assert!(matches!(&s.get(5).unwrap().job, Job::Special(Some(t)) if &**t == "fifo"));
        assert!(matches!(s.get(6).unwrap().job, Job::Special(None)));
        assert_eq!(s.get(4).unwrap().identity, None);

        let mut rec = Vec::new();
        let j = FileJob {
            prefix: a.clone(),
            report: JobFile {
                path: paths.push("p"),
                size: 1,
                identity: None,
            },
            job: Job::Binary(vec![code(1, "gfx942")].into()),
        };
        encode(&mut rec, 0, &j, "p");
        let prefixes = [a.clone()];
        assert!(decode(&rec, &prefixes).is_some());
        assert!(decode(&rec[..rec.len() - 1], &prefixes).is_none());
        let mut longer = rec.clone();
        longer.push(0);
        assert!(decode(&longer, &prefixes).is_none());
        assert!(
            decode(&rec, &[]).is_none(),
            "a prefix number past the table"
        );
    }
}
