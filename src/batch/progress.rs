//! Progress on stderr: a redrawn line on a terminal, a plain line every few seconds
//! otherwise (CI logs), nothing when quiet.

use super::size;
use kpack::event::EventSink;
use kpack::pack::{self, PackEvent};
use kpack::scan::ScanEvent;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

struct State {
    files: u64,
    bytes: u64,
    done_files: u64,
    done_bytes: u64,
    last: Option<Instant>,
    drew: bool,
}

/// A scan progress reporter.
pub struct ScanProgress {
    tty: bool,
    start: Instant,
    state: Mutex<State>,
}

impl ScanProgress {
    /// A reporter for stderr.
    pub fn new() -> Self {
        ScanProgress {
            tty: std::io::stderr().is_terminal(),
            start: Instant::now(),
            state: Mutex::new(State {
                files: 0,
                bytes: 0,
                done_files: 0,
                done_bytes: 0,
                last: None,
                drew: false,
            }),
        }
    }

    /// Clear the progress line.
    pub fn finish(&self) {
        if let Ok(s) = self.state.lock()
            && self.tty
            && s.drew
        {
            eprint!("\r\x1b[2K");
        }
    }
}

impl EventSink<ScanEvent> for ScanProgress {
    fn event(&self, event: ScanEvent) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        match event {
            ScanEvent::Discovered { files, bytes } => {
                s.files = files;
                s.bytes = bytes;
            }
            ScanEvent::FileDone { bytes, .. } => {
                s.done_files += 1;
                s.done_bytes += bytes;
            }
            ScanEvent::Inspected(_) | ScanEvent::Listed { .. } => return,
        }
        let every = if self.tty {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(5)
        };
        let now = Instant::now();
        // Nothing for quick scans; then at most one line per period.
        if now - self.start < Duration::from_millis(300) || s.last.is_some_and(|l| now - l < every)
        {
            return;
        }
        s.last = Some(now);
        // A streamed scan learns the totals only when its walk is over.
        let line = if s.files == 0 {
            format!(
                "scanning: {} files, {}",
                s.done_files,
                super::size(s.done_bytes)
            )
        } else {
            format!(
                "scanning: {}/{} files, {} / {}",
                s.done_files,
                s.files,
                super::size(s.done_bytes),
                super::size(s.bytes)
            )
        };
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}");
            s.drew = true;
        } else {
            let _ = writeln!(err, "{line}");
        }
    }
}

/// Files at least this large get a line of their own on a pipe as each phase of
/// theirs begins (`packing: compress lib/librocblas.so (1.2 GiB)`).
pub const LARGE_FILE: u64 = 64 << 20;

/// Progress of a pack or split on stderr.
pub struct PackProgress {
    verb: &'static str,
    tty: bool,
    start: Instant,
    state: Mutex<PackState>,
}

#[derive(Default)]
struct PackState {
    tally: pack::PackTally,
    last: Option<Instant>,
    drew: bool,
}

impl PackProgress {
    /// A reporter whose lines start with `verb` (`packing`, `splitting`).
    pub fn new(verb: &'static str) -> Self {
        PackProgress {
            verb,
            tty: std::io::stderr().is_terminal(),
            start: Instant::now(),
            state: Mutex::new(PackState::default()),
        }
    }
    /// Clear the progress line.
    pub fn clear(&self) {
        if let Ok(s) = self.state.lock()
            && self.tty
            && s.drew
        {
            eprint!("\r\x1b[2K");
        }
    }
}

impl EventSink<PackEvent> for PackProgress {
    fn event(&self, e: PackEvent) {
        let Ok(mut s) = self.state.lock() else { return };
        if let PackEvent::Warning(w) = &e {
            if self.tty && s.drew {
                eprint!("\r\x1b[2K");
            }
            eprintln!("warning: {w}");
        }
        if !self.tty
            && let PackEvent::Phase {
                path, phase, bytes, ..
            } = &e
            && *bytes >= LARGE_FILE
        {
            // On a pipe (a CI log) the periodic line comes every 5 s; a large file
            // may take longer than that, so it is named as it begins.
            eprintln!("{}: {} {path} ({})", self.verb, phase.name(), size(*bytes));
        }
        s.tally.apply(e);
        let now = Instant::now();
        let every = if self.tty {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(5)
        };
        if now - self.start < Duration::from_millis(300) || s.last.is_some_and(|l| now - l < every)
        {
            return;
        }
        s.last = Some(now);
        let secs = (now - self.start).as_secs_f64().max(0.001);
        let rate = s.tally.done_bytes as f64 / secs;
        let eta = if rate > 0.0 && s.tally.bytes > s.tally.done_bytes {
            format!(
                ", ETA {:.0} s",
                (s.tally.bytes - s.tally.done_bytes) as f64 / rate
            )
        } else {
            String::new()
        };
        let fams: Vec<String> = s
            .tally
            .families
            .iter()
            .map(|(f, (k, b))| format!("{f} {k} code objects {}", size(*b)))
            .collect();
        let line = if s.tally.stage.is_empty() {
            format!(
                "{}: {}/{} files, {} / {} ({}/s{eta}) | {}",
                self.verb,
                s.tally.done,
                s.tally.files,
                size(s.tally.done_bytes),
                size(s.tally.bytes),
                size(rate as u64),
                fams.join(", ")
            )
        } else {
            format!("{}: {}", self.verb, s.tally.stage)
        };
        if self.tty {
            eprint!("\r\x1b[2K{line}");
            s.drew = true;
        } else {
            eprintln!("{line}");
        }
    }
}
