//! Progress on stderr: a redrawn line on a terminal, a plain line every few seconds
//! otherwise (CI logs), nothing when quiet.

use kpack::event::{EventSink, ScanEvent};
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
        let line = format!(
            "scanning: {}/{} files, {} / {}",
            s.done_files,
            s.files,
            super::size(s.done_bytes),
            super::size(s.bytes)
        );
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}");
            s.drew = true;
        } else {
            let _ = writeln!(err, "{line}");
        }
    }
}
