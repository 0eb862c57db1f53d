//! `PHC_NINJA_TRACE`: one ninja-v7 line per step, appended with one `write` per line
//! on an `O_APPEND` descriptor so that concurrent phc processes never interleave, and
//! a `# ninja log v7` header written under an exclusive lock when the file is new.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// An open trace file. Tracing never fails a compile: errors are reported once.
pub struct TraceFile {
    file: File,
    warned: bool,
}

/// A moment with both a wall-clock time (for the file) and a monotonic one (so that
/// durations are never negative).
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    wall_ms: i64,
    mono: Instant,
}

impl Stamp {
    /// Now.
    pub fn now() -> Stamp {
        let wall_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        Stamp {
            wall_ms,
            mono: Instant::now(),
        }
    }

    /// This moment's wall time plus the monotonic time elapsed until `later`.
    pub fn end_ms(&self, later: &Stamp) -> i64 {
        self.wall_ms + later.mono.saturating_duration_since(self.mono).as_millis() as i64
    }

    /// Wall-clock milliseconds.
    pub fn wall_ms(&self) -> i64 {
        self.wall_ms
    }
}

/// The 16-hex-digit hash phc writes: the first 8 bytes of MD5 of the name.
pub fn name_hash(name: &str) -> String {
    use md5::{Digest, Md5};
    let d = Md5::digest(name.as_bytes());
    d[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// One trace line (tabs and newlines in the name replaced by spaces).
pub fn line(start_ms: i64, end_ms: i64, name: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| {
            if matches!(c, '\t' | '\n' | '\r') {
                ' '
            } else {
                c
            }
        })
        .collect();
    let hash = name_hash(&name);
    format!("{start_ms}\t{end_ms}\t{end_ms}\t{name}\t{hash}\n")
}

impl TraceFile {
    /// Open `path` for append, writing the header if the file is empty.
    pub fn open(path: &Path) -> std::io::Result<TraceFile> {
        let file = OpenOptions::new().append(true).create(true).open(path)?;
        if file.lock().is_ok() {
            let empty = file.metadata().map(|m| m.len() == 0).unwrap_or(false);
            if empty {
                let _ = (&file).write_all(b"# ninja log v7\n");
            }
            let _ = file.unlock();
        }
        Ok(TraceFile {
            file,
            warned: false,
        })
    }

    /// Append one step.
    pub fn record(&mut self, start: &Stamp, end: &Stamp, name: &str) {
        let l = line(start.wall_ms(), start.end_ms(end), name);
        if let Err(e) = (&self.file).write_all(l.as_bytes())
            && !self.warned
        {
            self.warned = true;
            eprintln!("phc: cannot write the trace: {e} (continuing without it)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_back_with_the_trace_reader() {
        let l = line(
            1_700_000_000_000,
            1_700_000_000_250,
            "obj/a.o::gfx90a:xnack+",
        );
        let two = format!(
            "{l}{}",
            line(1_700_000_000_250, 1_700_000_000_300, "obj/a.o::bundle")
        );
        let t = crate::trace::parse(two.as_bytes());
        assert_eq!(t.builds.len(), 1);
        assert_eq!(t.builds[0].jobs.len(), 2);
        assert_eq!(t.diagnostic_count, 0);
        assert_eq!(name_hash("x").len(), 16);
        assert!(!line(0, 1, "a\tb\nc").contains("a\tb"));
    }

    #[test]
    fn header_once_and_concurrent_appends_stay_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.log");
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let p = p.clone();
                std::thread::spawn(move || {
                    let mut t = TraceFile::open(&p).unwrap();
                    for j in 0..200 {
                        let s = Stamp::now();
                        t.record(&s, &Stamp::now(), &format!("obj{i}.o::gfx{j}"));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.matches("# ninja log v7").count(), 1);
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(lines.len(), 800);
        assert!(lines.iter().all(|l| l.split('\t').count() == 5));
    }
}
