//! Following a trace that a running build is still writing: read what was appended
//! since the last poll, keep an unterminated last line for later, and notice when the
//! file was truncated or replaced (a new build started over).

use super::{Trace, TraceParser};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Bytes read per poll at most, so one poll of a huge file stays short.
pub const MAX_READ_PER_POLL: u64 = 64 << 20;

/// What changed since the last poll.
#[derive(Debug, Clone)]
pub struct FollowUpdate {
    /// The whole trace as read so far.
    pub trace: Trace,
    /// The file was truncated or replaced: everything was read again from the start.
    pub restarted: bool,
}

/// Tails one trace file.
pub struct Follower {
    path: PathBuf,
    parser: TraceParser,
    offset: u64,
    inode: Option<(u64, u64)>,
    /// Times the file was found truncated or replaced.
    pub restarts: u64,
}

impl Follower {
    /// Follow `path` (which need not exist yet).
    pub fn new(path: &Path) -> Follower {
        Follower {
            path: path.to_path_buf(),
            parser: TraceParser::new(),
            offset: 0,
            inode: None,
            restarts: 0,
        }
    }

    /// Read what was appended. `Ok(None)` when nothing changed (or the file does not
    /// exist yet).
    pub fn poll(&mut self) -> std::io::Result<Option<FollowUpdate>> {
        Ok(self.read_available()?.map(|restarted| FollowUpdate {
            trace: self.parser.trace(),
            restarted,
        }))
    }

    /// The whole file read once, to its end, the unterminated last line included
    /// (for a finished trace).
    pub fn read_to_end(&mut self) -> std::io::Result<Trace> {
        while self.read_available()?.is_some_and(|_| self.offset > 0) {
            if std::fs::metadata(&self.path)?.len() <= self.offset {
                break;
            }
        }
        let mut p = std::mem::take(&mut self.parser);
        p.finish();
        Ok(p.into_trace())
    }

    /// Feed the parser what was appended: `Some(restarted)` when anything changed.
    fn read_available(&mut self) -> std::io::Result<Option<bool>> {
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let id = (meta.dev(), meta.ino());
        let mut restarted = false;
        if self.inode.is_some_and(|old| old != id) || meta.len() < self.offset {
            self.parser = TraceParser::new();
            self.offset = 0;
            self.restarts += 1;
            restarted = true;
        }
        self.inode = Some(id);
        if meta.len() == self.offset {
            return Ok(restarted.then_some(true));
        }
        let mut f = std::fs::File::open(&self.path)?;
        f.seek(SeekFrom::Start(self.offset))?;
        let want = (meta.len() - self.offset).min(MAX_READ_PER_POLL);
        let mut buf = Vec::with_capacity(want as usize);
        f.take(want).read_to_end(&mut buf)?;
        self.offset += buf.len() as u64;
        self.parser.feed(&buf);
        Ok(Some(restarted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn growing_partial_and_truncated_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.log");
        let mut fl = Follower::new(&p);
        assert!(fl.poll().unwrap().is_none(), "no file yet");
        let mut f = std::fs::File::create(&p).unwrap();
        f.write_all(
            b"1700000000000\t1700000000100\t1700000000100\ta.o::gfx900\t1\n1700000000000\t17000",
        )
        .unwrap();
        let u = fl.poll().unwrap().unwrap();
        assert_eq!(u.trace.builds[0].jobs.len(), 1, "the partial line waits");
        assert!(!u.restarted);
        assert!(fl.poll().unwrap().is_none(), "nothing new");
        f.write_all(b"00000200\t1700000000200\ta.o::gfx906\t2\n")
            .unwrap();
        let u = fl.poll().unwrap().unwrap();
        assert_eq!(u.trace.builds[0].jobs.len(), 2);
        // A new build truncates the file.
        std::fs::write(&p, b"5\t9\t9\tx.o\t3\n").unwrap();
        let u = fl.poll().unwrap().unwrap();
        assert!(u.restarted);
        assert_eq!(u.trace.builds.len(), 1);
        assert_eq!(u.trace.builds[0].name(&u.trace.builds[0].jobs[0]), "x.o");
        assert_eq!(fl.restarts, 1);
        // Read to the end: the unterminated last line counts.
        std::fs::write(&p, b"5\t9\t9\tx.o\t3\n6\t12\t12\ty.o\t4").unwrap();
        let t = Follower::new(&p).read_to_end().unwrap();
        assert_eq!(t.builds[0].jobs.len(), 2);
    }
}
