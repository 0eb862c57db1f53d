//! Compile traces: ninja logs (v5, v6, v7, with or without the header) and the
//! headerless v7 lines `phc` writes (`PHC_NINJA_TRACE`).
//!
//! A line is `start \t end \t mtime \t name \t hash`. Times are integer milliseconds:
//! relative to the build start in real ninja logs, Unix epoch in phc traces (values
//! ≥ 10¹¹; normalised to the earliest start). Lines are parsed streaming; a bad line
//! becomes a diagnostic with its line number and the rest is still read; an
//! unterminated last line (a file still being written) is held back until its newline
//! arrives ([`TraceParser::finish`] takes it when the file is complete).
//!
//! Builds: in build-relative logs a line whose end is smaller than the previous end
//! starts a new build (ninja's restart); in epoch logs, whose writers append out of
//! order, that heuristic is wrong, so a new build starts when a name already built in
//! the current build appears again. Lines with the same hash, start and end are one
//! job with several outputs. Names `obj::gfx942` are device compiles, `obj::bundle`
//! bundling, and `obj` the host compile of an object that has device steps.

pub mod analysis;
pub mod chrome;
pub mod follow;

use rustc_hash::{FxHashMap, FxHashSet, FxHasher};
use serde::Serialize;

/// Epoch-millisecond times are at least this large.
pub const EPOCH_THRESHOLD: i64 = 100_000_000_000;
/// Largest time accepted, ms (about 8,900 years: epoch values are far below).
pub const MAX_TIME: i64 = 1 << 48;
/// Longest line accepted (as ninja's loader).
pub const MAX_LINE: usize = 256 * 1024;
/// Diagnostics kept in full (the rest are counted).
pub const MAX_DIAGNOSTICS: usize = 50;

/// What a job did. The object and arch are read from the name
/// ([`Job::object`], [`Job::arch`]), so a job holds no copies of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    /// Device compile of an object for one arch (`obj::gfx942`).
    Device,
    /// Bundling of an object's device code (`obj::bundle`).
    Bundle,
    /// Host compile of an object that has device steps (`obj`).
    Host,
    /// Any other build step.
    Other,
}

impl JobKind {
    /// `device`, `bundle`, `host`, `other`.
    pub fn category(self) -> &'static str {
        match self {
            JobKind::Device => "device",
            JobKind::Bundle => "bundle",
            JobKind::Host => "host",
            JobKind::Other => "other",
        }
    }
}

/// One job: one line, or several lines of a multi-output edge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Job {
    /// Output name (the first, for a multi-output edge).
    pub name: String,
    /// Further outputs of a multi-output edge (usually none: no allocation).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub more_names: Vec<String>,
    /// Start, ms (normalised: the build's first start is 0 for epoch logs).
    pub start: i64,
    /// End, ms.
    pub end: i64,
    /// The log's hash field.
    pub hash: String,
    /// What it did.
    pub kind: JobKind,
    /// Line number of its first line.
    pub line: u64,
}

impl Job {
    /// Every output name, the first one first.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.name.as_str()).chain(self.more_names.iter().map(String::as_str))
    }

    /// The output names joined with `, ` (ninjatracing's event name).
    pub fn label(&self) -> String {
        self.names().collect::<Vec<_>>().join(", ")
    }

    /// The object this step belongs to (device, bundle and host steps).
    pub fn object(&self) -> Option<&str> {
        let name = &self.name;
        match self.kind {
            JobKind::Device | JobKind::Bundle => split_step(name).map(|(o, _)| o),
            JobKind::Host => Some(name),
            JobKind::Other => None,
        }
    }

    /// The arch of a device compile.
    pub fn arch(&self) -> Option<&str> {
        match self.kind {
            JobKind::Device => split_step(&self.name).map(|(_, a)| a),
            _ => None,
        }
    }

    /// Duration in ms.
    pub fn duration(&self) -> i64 {
        self.end - self.start
    }
}

/// One build (a ninja run, or a phc build session).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Build {
    /// Jobs sorted by start, then end, then line number.
    pub jobs: Vec<Job>,
    /// Offset subtracted from epoch times (0 for build-relative logs).
    pub epoch_base_ms: i64,
}

/// A problem with one line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LineDiagnostic {
    /// 1-based line number.
    pub line: u64,
    /// What is wrong.
    pub message: String,
}

/// The parsed trace.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Trace {
    /// Log version from the header (7 for headerless phc files).
    pub version: u32,
    /// Whether the file had a header.
    pub header: bool,
    /// Whether times are epoch milliseconds.
    pub epoch: bool,
    /// Builds in file order.
    pub builds: Vec<Build>,
    /// The first [`MAX_DIAGNOSTICS`] problems.
    pub diagnostics: Vec<LineDiagnostic>,
    /// Number of problems in all.
    pub diagnostic_count: u64,
    /// Lines read.
    pub lines: u64,
    /// Bytes of an unterminated last line held back.
    pub pending_bytes: usize,
}

/// One parsed line; its name and hash live in the build's text arena (no allocation
/// per line).
struct RawLine {
    start: i64,
    end: i64,
    line: u64,
    name: (usize, usize),
    hash: (usize, usize),
}

/// The lines of one build and the text of their names and hashes.
#[derive(Default)]
struct RawBuild {
    lines: Vec<RawLine>,
    text: String,
}

impl RawBuild {
    fn str(&self, (at, len): (usize, usize)) -> &str {
        &self.text[at..at + len]
    }

    fn push(&mut self, start: i64, end: i64, line: u64, name: &str, hash: &str) {
        let n = (self.text.len(), name.len());
        self.text.push_str(name);
        let h = (self.text.len(), hash.len());
        self.text.push_str(hash);
        self.lines.push(RawLine {
            start,
            end,
            line,
            name: n,
            hash: h,
        });
    }
}

/// A streaming parser: feed bytes as they arrive, read the trace at any time.
#[derive(Default)]
pub struct TraceParser {
    carry: Vec<u8>,
    line_no: u64,
    version: Option<u32>,
    header: bool,
    raw_builds: Vec<RawBuild>,
    seen_names: FxHashSet<u64>,
    last_end: Option<i64>,
    epoch: Option<bool>,
    diagnostics: Vec<LineDiagnostic>,
    diagnostic_count: u64,
    skipping_long: bool,
    expect_lines: usize,
}

impl TraceParser {
    /// A new parser.
    pub fn new() -> Self {
        Self::default()
    }

    fn diag(&mut self, line: u64, message: String) {
        self.diagnostic_count += 1;
        if self.diagnostics.len() < MAX_DIAGNOSTICS {
            self.diagnostics.push(LineDiagnostic { line, message });
        }
    }

    /// Feed more bytes of the file.
    pub fn feed(&mut self, bytes: &[u8]) {
        // About one line per 60 bytes: reserve once per chunk instead of growing per line.
        let lines = bytes.len() / 60;
        self.expect_lines = self.expect_lines.saturating_add(lines);
        if let Some(b) = self.raw_builds.last_mut() {
            b.lines.reserve(lines.min(1 << 24));
            b.text.reserve(bytes.len().min(1 << 30) / 2);
        }
        self.seen_names.reserve(lines.min(1 << 24));
        let mut rest = bytes;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            let (piece, tail) = rest.split_at(nl);
            rest = &tail[1..];
            if self.skipping_long {
                self.skipping_long = false;
                self.carry.clear();
                continue;
            }
            if self.carry.is_empty() {
                self.line(piece);
            } else {
                let mut l = std::mem::take(&mut self.carry);
                l.extend_from_slice(piece);
                self.line(&l);
            }
        }
        if !self.skipping_long {
            self.carry.extend_from_slice(rest);
            if self.carry.len() > MAX_LINE {
                self.line_no += 1;
                let n = self.line_no;
                self.diag(n, format!("line longer than {MAX_LINE} bytes, skipped"));
                self.carry.clear();
                self.skipping_long = true;
            }
        }
    }

    /// The file is complete: an unterminated last line is parsed too.
    pub fn finish(&mut self) {
        if !self.carry.is_empty() && !self.skipping_long {
            let l = std::mem::take(&mut self.carry);
            self.line(&l);
        }
    }

    fn line(&mut self, raw: &[u8]) {
        self.line_no += 1;
        let n = self.line_no;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let Ok(text) = std::str::from_utf8(raw) else {
            self.diag(n, "not UTF-8 text".into());
            return;
        };
        if text.trim().is_empty() {
            return;
        }
        if let Some(h) = text.strip_prefix('#') {
            if let Some(v) = h.trim().strip_prefix("ninja log v") {
                match v.trim().parse::<u32>() {
                    Ok(v @ 5..=7) => {
                        if self.version.is_some_and(|old| old != v) {
                            self.diag(
                                n,
                                format!(
                                    "header says v{v} after v{}: mixed versions",
                                    self.version.unwrap_or(0)
                                ),
                            );
                        }
                        self.version = Some(v);
                        self.header = true;
                    }
                    _ => self.diag(
                        n,
                        format!("unsupported log version {:?} (5 to 7 are read)", v.trim()),
                    ),
                }
            }
            return;
        }
        let mut fields = [""; 5];
        let mut count = 0;
        for f in text.split('\t') {
            if count < 5 {
                fields[count] = f;
            }
            count += 1;
        }
        if count != 5 {
            self.diag(n, format!("expected 5 tab-separated fields, found {count}"));
            return;
        }
        let num = |s: &str| s.trim().parse::<i64>();
        let (start, end) = match (num(fields[0]), num(fields[1])) {
            (Ok(s), Ok(e)) => (s, e),
            _ => {
                self.diag(
                    n,
                    format!(
                        "start {:?} or end {:?} is not an integer",
                        fields[0], fields[1]
                    ),
                );
                return;
            }
        };
        if end < start {
            self.diag(n, format!("ends ({end}) before it starts ({start})"));
            return;
        }
        if start < 0 {
            self.diag(n, format!("negative start {start}"));
            return;
        }
        if end > MAX_TIME {
            self.diag(n, format!("time {end} is out of range"));
            return;
        }
        if num(fields[2]).is_err() {
            self.diag(n, format!("mtime {:?} is not an integer", fields[2]));
            return;
        }
        let name = fields[3];
        if name.is_empty() {
            self.diag(n, "empty output name".into());
            return;
        }
        let is_epoch = start >= EPOCH_THRESHOLD;
        match self.epoch {
            None => self.epoch = Some(is_epoch),
            Some(e) if e != is_epoch => {
                self.diag(n, "mixes epoch and build-relative times; skipped".into());
                return;
            }
            _ => {}
        }
        // New build?
        let name_hash = hash64(name);
        let restart = if is_epoch {
            self.seen_names.contains(&name_hash)
        } else {
            self.last_end.is_some_and(|last| end < last)
        };
        if restart || self.raw_builds.is_empty() {
            self.raw_builds.push(RawBuild {
                lines: Vec::with_capacity(self.expect_lines.min(1 << 24)),
                text: String::new(),
            });
            self.seen_names.clear();
        }
        self.seen_names.insert(name_hash);
        self.last_end = Some(
            self.last_end
                .map_or(end, |l| if restart { end } else { l.max(end) }),
        );
        if let Some(b) = self.raw_builds.last_mut() {
            b.push(start, end, n, name, fields[4].trim());
        }
    }

    /// The trace, consuming the parser (no copies of the lines).
    pub fn into_trace(mut self) -> Trace {
        let epoch = self.epoch.unwrap_or(false);
        let raw = std::mem::take(&mut self.raw_builds);
        self.assemble(raw.iter().map(|r| build_from(r, epoch)).collect())
    }

    /// The trace as parsed so far.
    pub fn trace(&self) -> Trace {
        let epoch = self.epoch.unwrap_or(false);
        self.assemble(
            self.raw_builds
                .iter()
                .map(|raw| build_from(raw, epoch))
                .collect(),
        )
    }

    fn assemble(&self, builds: Vec<Build>) -> Trace {
        Trace {
            version: self.version.unwrap_or(7),
            header: self.header,
            epoch: self.epoch.unwrap_or(false),
            builds,
            diagnostics: self.diagnostics.clone(),
            diagnostic_count: self.diagnostic_count,
            lines: self.line_no,
            pending_bytes: self.carry.len(),
        }
    }
}

/// `name` split at its last `::` (a byte search: this runs once or twice per line).
fn split_step(name: &str) -> Option<(&str, &str)> {
    let b = name.as_bytes();
    let mut i = b.len();
    while i >= 2 {
        i -= 1;
        if b[i] == b':' && b[i - 1] == b':' {
            return Some((&name[..i - 1], &name[i + 1..]));
        }
    }
    None
}

/// A 64-bit hash of a string (for sets and maps keyed by names).
fn hash64(s: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = FxHasher::default();
    s.hash(&mut h);
    h.finish()
}

fn build_from(rb: &RawBuild, epoch: bool) -> Build {
    let raw = &rb.lines;
    let base = if epoch {
        raw.iter().map(|l| l.start).min().unwrap_or(0)
    } else {
        0
    };
    // Lines with the same hash, start and end are one multi-output job: sort by time
    // (line numbers are unique, so the order is total) and merge within each group of
    // equal times.
    let mut keys: Vec<(i64, i64, u64, usize)> = raw
        .iter()
        .enumerate()
        .map(|(i, l)| (l.start, l.end, l.line, i))
        .collect();
    if !keys.is_sorted() {
        keys.sort_unstable();
    }
    let mut jobs: Vec<Job> = Vec::with_capacity(raw.len());
    let ordered = keys.into_iter().map(|k| &raw[k.3]);
    let mut group_from = 0;
    let mut big: (usize, FxHashMap<u64, usize>) = (usize::MAX, FxHashMap::default());
    for l in ordered {
        let (name, hash) = (rb.str(l.name), rb.str(l.hash));
        if jobs
            .last()
            .is_none_or(|j: &Job| (j.start, j.end) != (l.start - base, l.end - base))
        {
            group_from = jobs.len();
        }
        let same = if hash.is_empty() {
            None
        } else if jobs.len() - group_from <= 16 {
            jobs[group_from..]
                .iter()
                .position(|j| j.hash == hash)
                .map(|k| group_from + k)
        } else {
            // A big group of equal times (a recompacted or synthetic log): index it.
            if big.0 != group_from {
                big = (group_from, FxHashMap::default());
                for (k, j) in jobs[group_from..].iter().enumerate() {
                    big.1.entry(hash64(&j.hash)).or_insert(group_from + k);
                }
            }
            big.1
                .get(&hash64(hash))
                .copied()
                .filter(|&k| jobs[k].hash == hash)
        };
        match same {
            Some(k) => jobs[k].more_names.push(name.to_string()),
            None => {
                if big.0 == group_from && jobs.len() - group_from > 16 {
                    big.1.entry(hash64(hash)).or_insert(jobs.len());
                }
                jobs.push(Job {
                    name: name.to_string(),
                    more_names: Vec::new(),
                    start: l.start - base,
                    end: l.end - base,
                    hash: hash.to_string(),
                    kind: JobKind::Other,
                    line: l.line,
                })
            }
        }
    }
    // Objects with device steps make their plain-named job the host compile.
    let mut objects: FxHashSet<&str> = FxHashSet::default();
    objects.reserve(jobs.len() / 4);
    let mut last = "";
    for j in &jobs {
        // Steps of one object are usually neighbours: skip re-inserting them.
        if let Some((o, _)) = split_step(&j.name)
            && o != last
        {
            objects.insert(o);
            last = o;
        }
    }
    let kinds: Vec<JobKind> = jobs
        .iter()
        .map(|j| {
            let name = &j.name;
            match split_step(name) {
                Some((_, "bundle")) => JobKind::Bundle,
                Some(_) => JobKind::Device,
                None if objects.contains(name.as_str()) => JobKind::Host,
                None => JobKind::Other,
            }
        })
        .collect();
    for (j, k) in jobs.iter_mut().zip(kinds) {
        j.kind = k;
    }
    Build {
        jobs,
        epoch_base_ms: base,
    }
}

/// Parse a whole file's bytes.
pub fn parse(bytes: &[u8]) -> Trace {
    let mut p = TraceParser::new();
    p.feed(bytes);
    p.finish();
    p.into_trace()
}

/// Whether `head` (the first bytes of a file) looks like a ninja log or phc trace.
pub fn looks_like_trace(head: &[u8]) -> bool {
    if head.starts_with(b"# ninja log v") {
        return true;
    }
    let text = String::from_utf8_lossy(head);
    let Some(first) = text
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
    else {
        return false;
    };
    let f: Vec<&str> = first.split('\t').collect();
    f.len() == 5 && f[..3].iter().all(|x| x.trim().parse::<i64>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headerless_phc_lines_with_epoch_times_and_kinds() {
        let t = parse(
            b"1700000000000\t1700000002000\t1700000002000\ta.o::gfx900\th1\n\
              1700000000000\t1700000003000\t1700000003000\ta.o::gfx942\th2\n\
              1700000003000\t1700000003100\t1700000003100\ta.o::bundle\th3\n\
              1700000003100\t1700000004000\t1700000004000\ta.o\th4\n\
              1700000000500\t1700000001500\t1700000001500\tlink.exe\th5\n",
        );
        assert!(t.epoch && !t.header && t.version == 7);
        assert_eq!(t.builds.len(), 1);
        let b = &t.builds[0];
        assert_eq!(b.jobs[0].start, 0);
        let kinds: Vec<&str> = b.jobs.iter().map(|j| j.kind.category()).collect();
        assert_eq!(kinds, vec!["device", "device", "other", "bundle", "host"]);
        assert_eq!(b.jobs[1].kind, JobKind::Device);
        assert_eq!(b.jobs[1].object(), Some("a.o"));
        assert_eq!(b.jobs[1].arch(), Some("gfx942"));
        assert_eq!(b.jobs[4].object(), Some("a.o"), "host compile of a.o");
        assert_eq!(b.jobs[2].object(), None);
    }

    #[test]
    fn ninjatracing_vectors_restart_and_multi_output() {
        // end goes backwards in a build-relative log: a new build.
        let t = parse(b"# ninja log v5\n100\t200\t0\tmy_output\tdeadbeef\n50\t120\t0\tmy_first_output\t0afef\n");
        assert_eq!(t.builds.len(), 2);
        assert_eq!(
            t.builds[1].jobs[0].names().collect::<Vec<_>>(),
            vec!["my_first_output"]
        );
        let t =
            parse(b"# ninja log v6\n1\t5\t0\toutput\tab\n1\t5\t0\tother_output\tab\n# comment\n");
        assert_eq!(t.builds[0].jobs.len(), 1);
        assert_eq!(
            t.builds[0].jobs[0].names().collect::<Vec<_>>(),
            vec!["output", "other_output"]
        );
    }

    #[test]
    fn epoch_logs_split_builds_on_repeated_names_not_on_end_order() {
        let t = parse(
            b"1700000000000\t1700000005000\t0\ta.o\th\n\
              1700000000000\t1700000004000\t0\tb.o\th2\n\
              1700000100000\t1700000105000\t0\ta.o\th\n",
        );
        assert_eq!(
            t.builds.len(),
            2,
            "out-of-order ends stay one build; a repeated name starts another"
        );
        assert_eq!(t.builds[1].jobs[0].start, 0);
    }

    #[test]
    fn bad_lines_are_numbered_diagnostics_and_the_rest_is_read() {
        let t = parse(b"# ninja log v7\n1\t2\t0\ta\th\nx\t2\t0\tb\th\n5\t3\t0\tc\th\n1\t2\t0\n\xff\xfe\n7\t9\t0\td\th\r\n# ninja log v9\n");
        assert_eq!(t.builds[0].jobs.len(), 2);
        let lines: Vec<u64> = t.diagnostics.iter().map(|d| d.line).collect();
        assert_eq!(lines, vec![3, 4, 5, 6, 8]);
        assert!(t.diagnostics[1].message.contains("before it starts"));
        assert!(t.diagnostics[4].message.contains("unsupported log version"));
    }

    #[test]
    fn partial_last_line_waits_for_its_newline() {
        let mut p = TraceParser::new();
        p.feed(b"1\t2\t0\ta\th\n3\t4\t0\tb");
        assert_eq!(p.trace().builds[0].jobs.len(), 1);
        assert!(p.trace().pending_bytes > 0);
        p.feed(b"b\th\n");
        let t = p.trace();
        assert_eq!(t.builds[0].jobs[1].names().collect::<Vec<_>>(), vec!["bb"]);
        assert_eq!(t.pending_bytes, 0);
    }

    #[test]
    fn detection() {
        assert!(looks_like_trace(b"# ninja log v5\n"));
        assert!(looks_like_trace(
            b"1700000000000\t1700000002000\t1700000002000\ta.o::gfx900\th1\n"
        ));
        assert!(!looks_like_trace(b"hello\tworld\n"));
        assert!(!looks_like_trace(b"\x7fELF"));
    }
}
