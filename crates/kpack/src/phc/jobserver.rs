//! A GNU make jobserver client (spec §2): detection from `MAKEFLAGS`, private
//! non-blocking descriptors, a held-token set that never returns a token twice, and a
//! local pipe of `slots - 1` tokens when there is no jobserver, so one code path caps
//! concurrency either way.
//!
//! Why not the `jobserver` crate (which cargo uses): it can only be built from the
//! environment, and reads `CARGO_MAKEFLAGS` before `MAKEFLAGS` (spec §2.2 wants
//! `MAKEFLAGS` unless it is empty: under make inside cargo the two differ, and an
//! empty but present `CARGO_MAKEFLAGS` hides make's pool from it); it cannot be
//! handed the source we detected, so the detection before every other open
//! (§2.2: the trace file must not land on descriptor 3) and its diagnostics would
//! be two code paths. What it would replace here, the token read and write-back, is
//! the small part; the held set (§2.5) stays ours either way.

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::sync::Mutex;

/// Where the token pool comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--jobserver-auth=fifo:PATH`.
    Fifo(String),
    /// `--jobserver-auth=R,W` or `--jobserver-fds=R,W`.
    Fds(i32, i32),
    /// No jobserver: a private pipe with `slots - 1` tokens.
    Local(usize),
}

/// The flags phc reads: `MAKEFLAGS` when non-empty, else `CARGO_MAKEFLAGS`.
pub fn flags(makeflags: Option<&str>, cargo_makeflags: Option<&str>) -> String {
    match makeflags {
        Some(m) if !m.trim().is_empty() => m.to_string(),
        _ => cargo_makeflags.unwrap_or_default().to_string(),
    }
}

/// The advertised jobserver: the last `--jobserver-auth=` or `--jobserver-fds=` word.
pub fn advertised(flags: &str) -> Option<Source> {
    let word = flags.split_whitespace().rev().find_map(|w| {
        w.strip_prefix("--jobserver-auth=")
            .or_else(|| w.strip_prefix("--jobserver-fds="))
    })?;
    if let Some(path) = word.strip_prefix("fifo:") {
        return (!path.is_empty()).then(|| Source::Fifo(path.to_string()));
    }
    let (r, w) = word.split_once(',')?;
    let (r, w) = (r.parse::<i32>().ok()?, w.parse::<i32>().ok()?);
    (r >= 0 && w >= 0).then_some(Source::Fds(r, w))
}

/// The local slot count without a jobserver: `min(archs, N)` for `-jN` (at least 1),
/// all archs for a bare `-j`, and `min(archs, default)` without `-j` (`default`: the
/// cores, or `PHC_JOBS`).
pub fn local_slots(flags: &str, archs: usize, default: usize) -> usize {
    let words: Vec<&str> = flags.split_whitespace().collect();
    for (i, w) in words.iter().enumerate() {
        // `-j8`, `-j 8`, or letter flags such as `ks -j8` (GNU make puts -j on its own).
        let Some(rest) = w.strip_prefix("-j") else {
            continue;
        };
        let digits = if rest.is_empty() {
            words
                .get(i + 1)
                .filter(|n| n.chars().all(|c| c.is_ascii_digit()))
                .copied()
                .unwrap_or("")
        } else {
            rest
        };
        if digits.is_empty() {
            return archs.max(1);
        }
        if let Ok(n) = digits.parse::<usize>() {
            return n.min(archs).max(1);
        }
    }
    archs.min(default).max(1)
}

/// One token taken from the pool: an id (so it is returned at most once) and the byte
/// read (written back unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    id: u64,
    byte: u8,
}

/// The pool: private descriptors and the held set.
pub struct Pool {
    reader: File,
    writer: File,
    held: Mutex<Held>,
    /// What the pool is, for diagnostics.
    pub source: Source,
    debug: bool,
}

#[derive(Default)]
struct Held {
    next: u64,
    tokens: Vec<Token>,
}

/// Outcome of one attempt to take a token.
#[derive(Debug, PartialEq, Eq)]
pub enum Take {
    /// A token, now held.
    Got(Token),
    /// None free now (EAGAIN, EINTR, or nothing to read yet).
    NotNow,
    /// The server is gone or the descriptor failed: stop asking.
    Gone,
}

fn nonblocking(read: bool) -> OpenOptions {
    let mut o = OpenOptions::new();
    if read {
        o.read(true);
    } else {
        o.write(true);
    }
    o.custom_flags(libc::O_NONBLOCK);
    o
}

impl Pool {
    /// Open the pool described by `source`. `None` when the advertised jobserver is not
    /// usable (the caller then limits locally); the reason goes to `why`.
    pub fn open(source: Source, debug: bool, why: &mut String) -> Option<Pool> {
        let (reader, writer) = match &source {
            Source::Fifo(path) => {
                match std::fs::metadata(path) {
                    Ok(m) if m.file_type().is_fifo() => {}
                    Ok(_) => {
                        *why = format!("jobserver fifo {path} is not a fifo");
                        return None;
                    }
                    Err(e) => {
                        *why = format!("jobserver fifo {path}: {e}");
                        return None;
                    }
                }
                // Reader first: a non-blocking write-only open of a fifo without a
                // reader fails with ENXIO.
                let r = nonblocking(true).open(path).ok()?;
                let w = nonblocking(false).open(path).ok()?;
                (r, w)
            }
            Source::Fds(r, w) => {
                // Never touch the inherited descriptors themselves: check them through
                // /proc and open private non-blocking ones on the same pipe.
                for fd in [r, w] {
                    let p = format!("/proc/self/fd/{fd}");
                    match std::fs::metadata(&p) {
                        Ok(m) if m.file_type().is_fifo() => {}
                        Ok(_) => {
                            *why = format!(
                                "jobserver descriptor {fd} is not a pipe (recipe not marked +?)"
                            );
                            return None;
                        }
                        Err(_) => {
                            *why = format!(
                                "jobserver descriptor {fd} is not open (recipe not marked +?)"
                            );
                            return None;
                        }
                    }
                }
                let r = nonblocking(true).open(format!("/proc/self/fd/{r}")).ok()?;
                let w = nonblocking(false).open(format!("/proc/self/fd/{w}")).ok()?;
                (r, w)
            }
            Source::Local(slots) => {
                let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK).ok()?;
                let (r, mut w) = (File::from(r), File::from(w));
                let fill = vec![b'+'; slots.saturating_sub(1)];
                w.write_all(&fill).ok()?;
                (r, w)
            }
        };
        Some(Pool {
            reader,
            writer,
            held: Mutex::new(Held::default()),
            source,
            debug,
        })
    }

    /// A local pool of `slots` (never fails short of running out of descriptors).
    pub fn local(slots: usize, debug: bool) -> io::Result<Pool> {
        let mut why = String::new();
        Pool::open(Source::Local(slots), debug, &mut why)
            .ok_or_else(|| io::Error::other("cannot create a pipe"))
    }

    /// Wait up to `timeout_ms` for the pool (or `wake`) to become readable, then try
    /// one raw one-byte read. Returns `NotNow` when `wake` fired.
    pub fn take(&self, wake: Option<&File>, timeout_ms: u16) -> Take {
        let mut fds = vec![PollFd::new(self.reader.as_fd(), PollFlags::POLLIN)];
        if let Some(w) = wake {
            fds.push(PollFd::new(w.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::from(timeout_ms)) {
            Ok(0) => return Take::NotNow,
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => return Take::NotNow,
            Err(_) => return Take::Gone,
        }
        if fds.len() > 1
            && fds[1]
                .revents()
                .is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP))
        {
            return Take::NotNow;
        }
        let mut b = [0u8; 1];
        // Hold the lock across the read so that a release-all racing with it cannot
        // miss the token: the byte is recorded before anyone can look.
        let mut held = self.lock();
        match (&self.reader).read(&mut b) {
            Ok(1) => {
                held.next += 1;
                let t = Token {
                    id: held.next,
                    byte: b[0],
                };
                held.tokens.push(t);
                if self.debug {
                    eprintln!("phc: token acquired ({} held)", held.tokens.len());
                }
                Take::Got(t)
            }
            Ok(_) => Take::Gone,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                Take::NotNow
            }
            Err(_) => Take::Gone,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Return a token if it is still held; a token already returned is ignored, so no
    /// token is ever invented.
    pub fn release(&self, t: Token) {
        let mut held = self.lock();
        let Some(pos) = held.tokens.iter().position(|h| h.id == t.id) else {
            return;
        };
        held.tokens.swap_remove(pos);
        self.write_back(t.byte);
        if self.debug {
            eprintln!("phc: token returned ({} held)", held.tokens.len());
        }
    }

    /// Return every held token.
    pub fn release_all(&self) {
        let mut held = self.lock();
        let n = held.tokens.len();
        for t in std::mem::take(&mut held.tokens) {
            self.write_back(t.byte);
        }
        if self.debug && n > 0 {
            eprintln!("phc: returned all {n} held tokens");
        }
    }

    /// Tokens held now.
    pub fn held(&self) -> usize {
        self.lock().tokens.len()
    }

    fn write_back(&self, byte: u8) {
        loop {
            match (&self.writer).write(&[byte]) {
                Ok(1) => return,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let mut fds = [PollFd::new(self.writer.as_fd(), PollFlags::POLLOUT)];
                    let _ = poll(&mut fds, PollTimeout::from(100u16));
                }
                Err(e) => {
                    eprintln!("phc: failed to return a jobserver token: {e}");
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_uses_the_last_word() {
        assert_eq!(
            advertised(" -j8 --jobserver-auth=3,4 --jobserver-auth=fifo:/tmp/f"),
            Some(Source::Fifo("/tmp/f".into()))
        );
        assert_eq!(
            advertised("-j2 --jobserver-fds=5,6 --jobserver-auth=7,8"),
            Some(Source::Fds(7, 8))
        );
        assert_eq!(advertised("--jobserver-auth=-2,-2"), None);
        assert_eq!(advertised("--jobserver-auth=sem_name"), None);
        assert_eq!(advertised("-j4"), None);
        assert_eq!(flags(Some(""), Some("-j3")), "-j3");
        assert_eq!(
            flags(Some(" "), Some("-j3")),
            "-j3",
            "an empty MAKEFLAGS falls through"
        );
        assert_eq!(flags(Some("-j2"), Some("-j3")), "-j2");
    }

    #[test]
    fn local_slots_from_j() {
        // Without -j: the cores (or PHC_JOBS), at most one slot per arch.
        assert_eq!(local_slots("", 4, 2), 2);
        assert_eq!(local_slots("", 4, 8), 4);
        assert_eq!(local_slots(" -j1", 4, 2), 1);
        assert_eq!(local_slots("ks -j2", 4, 1), 2);
        assert_eq!(local_slots("-j 8", 4, 1), 4);
        assert_eq!(local_slots("-j", 3, 1), 3);
        assert_eq!(local_slots("-j0", 3, 2), 1);
    }

    #[test]
    fn local_pool_hands_out_slots_minus_one_and_never_invents() {
        let p = Pool::local(3, false).unwrap();
        let a = match p.take(None, 10) {
            Take::Got(t) => t,
            o => panic!("{o:?}"),
        };
        let b = match p.take(None, 10) {
            Take::Got(t) => t,
            o => panic!("{o:?}"),
        };
        assert_eq!(p.take(None, 10), Take::NotNow, "only slots-1 tokens");
        assert_eq!(p.held(), 2);
        p.release(a);
        p.release(a); // a second return of the same token is ignored
        p.release_all();
        p.release(b); // already returned by release_all
        assert_eq!(p.held(), 0);
        let mut got = 0;
        while let Take::Got(_) = p.take(None, 10) {
            got += 1;
        }
        assert_eq!(got, 2, "exactly the two tokens are back");
    }
}
