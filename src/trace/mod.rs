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
//! the current build appears again (decided when the trace is read, see
//! `split_epoch`). Lines with the same hash, start and end are one job with several
//! outputs. Names `obj::gfx942` are device compiles, `obj::bundle` bundling, and `obj`
//! the host compile of an object that has device steps.
//!
//! Memory: a job is 56 bytes and holds no allocation; names and hashes live in one
//! text per [`Build`], which also numbers the objects and archs
//! ([`Build::object_index`], [`Build::arch_index`]) so readers index instead of hash.

pub mod analysis;
pub mod chrome;
pub mod follow;

use rustc_hash::{FxHashMap, FxHasher};
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
/// ([`Build::object`], [`Build::arch`]), so a job holds no copies of them.
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

/// Where a line's name and hash are in its build's text: the name at `at`, the hash
/// right after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Text {
    at: usize,
    name_len: u32,
    hash_len: u32,
}

impl Text {
    fn name(self, text: &str) -> &str {
        &text[self.at..self.at + self.name_len as usize]
    }

    fn hash(self, text: &str) -> &str {
        let h = self.at + self.name_len as usize;
        &text[h..h + self.hash_len as usize]
    }
}

/// No further outputs.
const NO_MORE: u32 = u32::MAX;
/// Not a step of an object, or not a device compile.
const NONE: u32 = u32::MAX;

/// One job: one line, or several lines of a multi-output edge. Its name and hash live
/// in the build's text (read them with [`Build::name`], [`Build::names`],
/// [`Build::hash`]): a million jobs make no allocation each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    /// Start, ms (normalised: the build's first start is 0 for epoch logs).
    pub start: i64,
    /// End, ms.
    pub end: i64,
    /// Line number of its first line.
    pub line: u64,
    /// What it did.
    pub kind: JobKind,
    text: Text,
    /// Index of its further outputs in [`Build`]'s list, or [`NO_MORE`].
    more: u32,
    /// Its object's index in [`Build::objects`], or [`NONE`].
    object: u32,
    /// A device compile's arch index in [`Build::archs`], or [`NONE`].
    arch: u32,
}

impl Job {
    /// Duration in ms.
    pub fn duration(&self) -> i64 {
        self.end - self.start
    }
}

/// One build (a ninja run, or a phc build session).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Build {
    /// Jobs sorted by start, then end, then line number.
    pub jobs: Vec<Job>,
    /// Offset subtracted from epoch times (0 for build-relative logs).
    pub epoch_base_ms: i64,
    /// Names and hashes of the jobs.
    text: String,
    /// Further outputs of multi-output edges (rare).
    more_names: Vec<Vec<Text>>,
    /// Objects with device steps (start and length in `text`), in order of appearance.
    objects: Vec<(usize, usize)>,
    /// Archs of the device compiles, in order of appearance.
    archs: Vec<(usize, usize)>,
}

impl Build {
    /// A build without jobs.
    pub const EMPTY: Build = Build {
        jobs: Vec::new(),
        epoch_base_ms: 0,
        text: String::new(),
        more_names: Vec::new(),
        objects: Vec::new(),
        archs: Vec::new(),
    };

    /// A job's output name (the first, for a multi-output edge).
    pub fn name<'a>(&'a self, j: &Job) -> &'a str {
        j.text.name(&self.text)
    }

    /// A job's hash field.
    pub fn hash<'a>(&'a self, j: &Job) -> &'a str {
        j.text.hash(&self.text)
    }

    /// Every output name of a job, the first one first.
    pub fn names<'a>(&'a self, j: &Job) -> impl Iterator<Item = &'a str> + use<'a> {
        let more: &'a [Text] = match j.more {
            NO_MORE => &[],
            k => self.more_names.get(k as usize).map_or(&[], Vec::as_slice),
        };
        std::iter::once(j.text.name(&self.text)).chain(more.iter().map(|t| t.name(&self.text)))
    }

    /// The output names joined with `, ` (ninjatracing's event name).
    pub fn label(&self, j: &Job) -> String {
        self.names(j).collect::<Vec<_>>().join(", ")
    }

    fn span(&self, (at, len): (usize, usize)) -> &str {
        &self.text[at..at + len]
    }

    /// The object a step belongs to (device, bundle and host steps).
    pub fn object<'a>(&'a self, j: &Job) -> Option<&'a str> {
        self.objects.get(j.object as usize).map(|&o| self.span(o))
    }

    /// The arch of a device compile.
    pub fn arch<'a>(&'a self, j: &Job) -> Option<&'a str> {
        self.archs.get(j.arch as usize).map(|&a| self.span(a))
    }

    /// The index of a job's object (below [`Build::object_count`]): steps of one object
    /// share it.
    pub fn object_index(&self, j: &Job) -> Option<usize> {
        (j.object != NONE).then_some(j.object as usize)
    }

    /// The number of objects with device steps.
    pub fn object_count(&self) -> usize {
        self.objects.len()
    }

    /// An object by index.
    pub fn object_name(&self, index: usize) -> &str {
        self.objects.get(index).map_or("", |&o| self.span(o))
    }

    /// The index of a device compile's arch (below [`Build::arch_count`]).
    pub fn arch_index(&self, j: &Job) -> Option<usize> {
        (j.arch != NONE).then_some(j.arch as usize)
    }

    /// The number of archs compiled for.
    pub fn arch_count(&self) -> usize {
        self.archs.len()
    }

    /// An arch by index.
    pub fn arch_name(&self, index: usize) -> &str {
        self.archs.get(index).map_or("", |&a| self.span(a))
    }
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
#[derive(Debug, Clone, Default)]
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

/// The lines of one build as read (a job each, in file order, not yet merged or
/// sorted) and the text of their names and hashes.
#[derive(Default)]
struct RawBuild {
    lines: Vec<Job>,
    text: String,
}

impl RawBuild {
    fn push(&mut self, start: i64, end: i64, line: u64, name: &str, hash: &str) {
        let text = Text {
            at: self.text.len(),
            // Both are parts of a line of at most MAX_LINE bytes.
            name_len: name.len() as u32,
            hash_len: hash.len() as u32,
        };
        self.text.push_str(name);
        self.text.push_str(hash);
        self.lines.push(Job {
            start,
            end,
            line,
            kind: JobKind::Other,
            text,
            more: NO_MORE,
            object: NONE,
            arch: NONE,
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
    /// Build-relative logs: one per build. Epoch logs: all lines in one, split into
    /// builds when the trace is read ([`split_epoch`]).
    raw_builds: Vec<RawBuild>,
    last_end: Option<i64>,
    epoch: Option<bool>,
    diagnostics: Vec<LineDiagnostic>,
    diagnostic_count: u64,
    skipping_long: bool,
    expect_lines: usize,
}

/// A decimal integer with optional surrounding spaces and sign (as `str::parse` after
/// `trim`), read from bytes without a UTF-8 check.
fn int(b: &[u8]) -> Option<i64> {
    let b = b.trim_ascii();
    let (neg, digits) = match b.split_first() {
        Some((b'-', d)) => (true, d),
        Some((b'+', d)) => (false, d),
        _ => (false, b),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(i64::from(d))?;
    }
    Some(if neg { -v } else { v })
}

/// A line's times, and its name and hash: `rest` is `name \t hash`, the tab at `tab`.
struct Fields<'a> {
    start: i64,
    end: i64,
    rest: &'a [u8],
    tab: usize,
}

/// The common line in one pass: three unsigned integers, each followed by a tab, then
/// the name, a tab and a hash without tabs. `None` for anything else.
fn plain_fields(raw: &[u8]) -> Option<Fields<'_>> {
    let mut at = 0;
    let mut v = [0i64; 3];
    for x in &mut v {
        let from = at;
        while let Some(&c) = raw.get(at)
            && c.is_ascii_digit()
        {
            *x = x.checked_mul(10)?.checked_add(i64::from(c - b'0'))?;
            at += 1;
        }
        if at == from || raw.get(at) != Some(&b'\t') {
            return None;
        }
        at += 1;
    }
    let rest = &raw[at..];
    let tab = memchr::memchr(b'\t', rest)?;
    if memchr::memchr(b'\t', &rest[tab + 1..]).is_some() {
        return None;
    }
    Some(Fields {
        start: v[0],
        end: v[1],
        rest,
        tab,
    })
}

/// `bytes` for a message: lossy text, quoted.
fn shown(b: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
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
        let mut from = 0;
        for nl in memchr::memchr_iter(b'\n', bytes) {
            let piece = &bytes[from..nl];
            from = nl + 1;
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
        let rest = &bytes[from..];
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

    fn header_line(&mut self, n: u64, raw: &[u8]) {
        let text = String::from_utf8_lossy(&raw[1..]);
        let Some(v) = text.trim().strip_prefix("ninja log v") else {
            return;
        };
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

    fn line(&mut self, raw: &[u8]) {
        self.line_no += 1;
        let n = self.line_no;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.len() > MAX_LINE {
            // Also when a whole long line arrives in one piece.
            return self.diag(n, format!("line longer than {MAX_LINE} bytes, skipped"));
        }
        match raw.first() {
            None => return,
            Some(b'#') => return self.header_line(n, raw),
            Some(c) if c.is_ascii_whitespace() && raw.trim_ascii().is_empty() => return,
            _ => {}
        }
        // The usual line, `digits \t digits \t digits \t name \t hash`, is read in one
        // pass; anything else takes the general path with its precise diagnostics.
        let Some(Fields {
            start,
            end,
            rest,
            tab,
        }) = plain_fields(raw).or_else(|| self.general_fields(n, raw))
        else {
            return;
        };
        if end < start {
            return self.diag(n, format!("ends ({end}) before it starts ({start})"));
        }
        if start < 0 {
            return self.diag(n, format!("negative start {start}"));
        }
        if end > MAX_TIME {
            return self.diag(n, format!("time {end} is out of range"));
        }
        // Name and hash in one UTF-8 check (they are neighbours in the line).
        let Ok(text) = std::str::from_utf8(rest) else {
            return self.diag(n, "not UTF-8 text".into());
        };
        let (name, hash) = (&text[..tab], text[tab + 1..].trim_ascii());
        if name.is_empty() {
            return self.diag(n, "empty output name".into());
        }
        let is_epoch = start >= EPOCH_THRESHOLD;
        match self.epoch {
            None => self.epoch = Some(is_epoch),
            Some(e) if e != is_epoch => {
                return self.diag(n, "mixes epoch and build-relative times; skipped".into());
            }
            _ => {}
        }
        // New build? Build-relative logs: an end before the latest end. Epoch logs are
        // split when read (a repeated name; see `split_epoch`).
        let restart = !is_epoch && self.last_end.is_some_and(|last| end < last);
        if restart || self.raw_builds.is_empty() {
            self.raw_builds.push(RawBuild {
                lines: Vec::with_capacity(self.expect_lines.min(1 << 24)),
                text: String::new(),
            });
        }
        self.last_end = Some(
            self.last_end
                .map_or(end, |l| if restart { end } else { l.max(end) }),
        );
        if let Some(b) = self.raw_builds.last_mut() {
            b.push(start, end, n, name, hash);
        }
    }

    /// The fields of any line, or a diagnostic.
    fn general_fields<'a>(&mut self, n: u64, raw: &'a [u8]) -> Option<Fields<'a>> {
        let mut fields: [&[u8]; 4] = [&[]; 4];
        let mut from = 0;
        let mut tabs = memchr::memchr_iter(b'\t', raw);
        for f in &mut fields {
            let Some(t) = tabs.next() else {
                self.bad_shape(n, raw);
                return None;
            };
            *f = &raw[from..t];
            from = t + 1;
        }
        let name_at = from - fields[3].len() - 1;
        if tabs.next().is_some() {
            self.bad_shape(n, raw);
            return None;
        }
        let (Some(start), Some(end)) = (int(fields[0]), int(fields[1])) else {
            let msg = format!(
                "start {} or end {} is not an integer",
                shown(fields[0]),
                shown(fields[1])
            );
            self.diag(n, msg);
            return None;
        };
        if int(fields[2]).is_none() {
            let msg = format!("mtime {} is not an integer", shown(fields[2]));
            self.diag(n, msg);
            return None;
        }
        Some(Fields {
            start,
            end,
            rest: &raw[name_at..],
            tab: fields[3].len(),
        })
    }

    /// A line without exactly five fields (or not text at all).
    fn bad_shape(&mut self, n: u64, raw: &[u8]) {
        let msg = if std::str::from_utf8(raw).is_err() {
            "not UTF-8 text".to_string()
        } else {
            let count = memchr::memchr_iter(b'\t', raw).count() + 1;
            format!("expected 5 tab-separated fields, found {count}")
        };
        self.diag(n, msg)
    }

    /// The trace, consuming the parser (no copies of the lines or their text).
    pub fn into_trace(mut self) -> Trace {
        let epoch = self.epoch.unwrap_or(false);
        let raw = std::mem::take(&mut self.raw_builds);
        self.assemble(
            raw.into_iter()
                .flat_map(|r| if epoch { split_epoch(r) } else { vec![r] })
                .map(|r| build_from(r, epoch))
                .collect(),
        )
    }

    /// The trace as parsed so far.
    pub fn trace(&self) -> Trace {
        let epoch = self.epoch.unwrap_or(false);
        self.assemble(
            self.raw_builds
                .iter()
                .flat_map(|raw| {
                    let copy = RawBuild {
                        lines: raw.lines.clone(),
                        text: raw.text.clone(),
                    };
                    if epoch { split_epoch(copy) } else { vec![copy] }
                })
                .map(|r| build_from(r, epoch))
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

/// `name` split at its last `::` (a byte search from the end: the step is short).
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

/// For each line, the previous line whose name has the same 64-bit hash (or
/// `u32::MAX`). The lines are scattered by the hash's top bits into buckets that each
/// fit in cache, then each bucket is walked in line order with a small map: a
/// million-entry set probed at random was a third of the parse time.
fn previous_same_name(rb: &RawBuild) -> Vec<u32> {
    let n = rb.lines.len();
    let hashes: Vec<u64> = rb
        .lines
        .iter()
        .map(|l| hash64(l.text.name(&rb.text)))
        .collect();
    let bits = (n / 4096)
        .max(1)
        .next_power_of_two()
        .trailing_zeros()
        .min(10);
    let bucket = |h: u64| {
        if bits == 0 {
            0
        } else {
            (h >> (64 - bits)) as usize
        }
    };
    let mut offsets = vec![0usize; (1 << bits) + 1];
    for &h in &hashes {
        offsets[bucket(h) + 1] += 1;
    }
    for b in 1..offsets.len() {
        offsets[b] += offsets[b - 1];
    }
    let mut fill = offsets.clone();
    let mut order = vec![0u32; n];
    for (i, &h) in hashes.iter().enumerate() {
        let b = bucket(h);
        order[fill[b]] = i as u32;
        fill[b] += 1;
    }
    let mut prev = vec![u32::MAX; n];
    let mut last: FxHashMap<u64, u32> = FxHashMap::default();
    for w in offsets.windows(2) {
        last.clear();
        for &i in &order[w[0]..w[1]] {
            if let Some(p) = last.insert(hashes[i as usize], i) {
                prev[i as usize] = p;
            }
        }
    }
    prev
}

/// Epoch logs: a new build starts at a line whose name was already built in the
/// current build (phc appends out of order, so end order says nothing).
fn split_epoch(rb: RawBuild) -> Vec<RawBuild> {
    // More lines than u32 indices hold cannot come from a trace of at most MAX_TRACE
    // bytes; keep such a build whole rather than guess.
    if rb.lines.len() < 2 || rb.lines.len() >= u32::MAX as usize {
        return vec![rb];
    }
    let prev = previous_same_name(&rb);
    let name = |i: usize| rb.lines[i].text.name(&rb.text);
    let mut starts = vec![0usize];
    for i in 1..rb.lines.len() {
        let from = starts[starts.len() - 1];
        // Walk back along equal hashes while still in this build; names are compared
        // so a hash collision cannot split a build.
        let mut p = prev[i];
        while p != u32::MAX && p as usize >= from {
            if name(p as usize) == name(i) {
                starts.push(i);
                break;
            }
            p = prev[p as usize];
        }
    }
    if starts.len() == 1 {
        return vec![rb];
    }
    starts.push(rb.lines.len());
    starts
        .windows(2)
        .map(|w| {
            let part = &rb.lines[w[0]..w[1]];
            let t0 = part[0].text.at;
            let last = part[part.len() - 1].text;
            let t1 = last.at + last.name_len as usize + last.hash_len as usize;
            RawBuild {
                lines: part
                    .iter()
                    .map(|l| Job {
                        text: Text {
                            at: l.text.at - t0,
                            ..l.text
                        },
                        ..*l
                    })
                    .collect(),
                text: rb.text[t0..t1].to_string(),
            }
        })
        .collect()
}

fn build_from(rb: RawBuild, epoch: bool) -> Build {
    let RawBuild {
        lines: mut jobs,
        text,
    } = rb;
    let base = if epoch {
        jobs.iter().map(|j| j.start).min().unwrap_or(0)
    } else {
        0
    };
    if base != 0 {
        for j in &mut jobs {
            j.start -= base;
            j.end -= base;
        }
    }
    // Lines with the same hash, start and end are one multi-output job: sort by time
    // (line numbers are unique, so the order is total) and merge within each group of
    // equal times, in place.
    let key = |j: &Job| (j.start, j.end, j.line);
    if !jobs.is_sorted_by_key(key) {
        jobs.sort_unstable_by_key(key);
    }
    let mut more_names: Vec<Vec<Text>> = Vec::new();
    let mut kept = 0;
    let mut group_from = 0;
    let mut big: (usize, FxHashMap<u64, usize>) = (usize::MAX, FxHashMap::default());
    for r in 0..jobs.len() {
        let l = jobs[r];
        let hash = l.text.hash(&text);
        if kept == 0 || (jobs[kept - 1].start, jobs[kept - 1].end) != (l.start, l.end) {
            group_from = kept;
        }
        let same = if hash.is_empty() {
            None
        } else if kept - group_from <= 16 {
            jobs[group_from..kept]
                .iter()
                .position(|j| j.text.hash(&text) == hash)
                .map(|k| group_from + k)
        } else {
            // A big group of equal times (a recompacted or synthetic log): index it.
            if big.0 != group_from {
                big = (group_from, FxHashMap::default());
                for (k, j) in jobs[group_from..kept].iter().enumerate() {
                    big.1
                        .entry(hash64(j.text.hash(&text)))
                        .or_insert(group_from + k);
                }
            }
            big.1
                .get(&hash64(hash))
                .copied()
                .filter(|&k| jobs[k].text.hash(&text) == hash)
        };
        match same {
            Some(k) => {
                let j = &mut jobs[k];
                if j.more == NO_MORE {
                    j.more = u32::try_from(more_names.len()).unwrap_or(NO_MORE - 1);
                    more_names.push(Vec::new());
                }
                if let Some(m) = more_names.get_mut(j.more as usize) {
                    m.push(l.text);
                }
            }
            None => {
                if big.0 == group_from && kept - group_from > 16 {
                    big.1.entry(hash64(hash)).or_insert(kept);
                }
                jobs[kept] = l;
                kept += 1;
            }
        }
    }
    jobs.truncate(kept);
    // Steps name their object; objects with device steps make their plain-named job
    // the host compile. Objects and archs are numbered here, once, so readers index
    // instead of hashing names.
    let mut object_at: FxHashMap<&str, u32> = FxHashMap::default();
    let mut objects: Vec<(usize, usize)> = Vec::new();
    let mut arch_at: FxHashMap<&str, u32> = FxHashMap::default();
    let mut archs: Vec<(usize, usize)> = Vec::new();
    let mut last: (&str, u32) = ("", NONE);
    let mut plain = false;
    for j in &mut jobs {
        let name = j.text.name(&text);
        let Some((o, step)) = split_step(name) else {
            plain = true;
            continue;
        };
        // Steps of one object are usually neighbours: look it up once per run.
        if o != last.0 || last.1 == NONE {
            let id = match object_at.get(o) {
                Some(&id) => id,
                None => {
                    let id = u32::try_from(objects.len()).unwrap_or(NONE);
                    if id != NONE {
                        objects.push((j.text.at, o.len()));
                        object_at.insert(o, id);
                    }
                    id
                }
            };
            last = (o, id);
        }
        j.object = last.1;
        if step == "bundle" {
            j.kind = JobKind::Bundle;
        } else {
            j.kind = JobKind::Device;
            j.arch = match arch_at.get(step) {
                Some(&id) => id,
                None => {
                    let id = u32::try_from(archs.len()).unwrap_or(NONE);
                    if id != NONE {
                        archs.push((j.text.at + o.len() + 2, step.len()));
                        arch_at.insert(step, id);
                    }
                    id
                }
            };
        }
    }
    if plain {
        for j in &mut jobs {
            if j.kind == JobKind::Other
                && let Some(&id) = object_at.get(j.text.name(&text))
            {
                j.kind = JobKind::Host;
                j.object = id;
            }
        }
    }
    drop((object_at, arch_at));
    Build {
        jobs,
        epoch_base_ms: base,
        text,
        more_names,
        objects,
        archs,
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
        assert_eq!(b.object(&b.jobs[1]), Some("a.o"));
        assert_eq!(b.arch(&b.jobs[1]), Some("gfx942"));
        assert_eq!(b.object(&b.jobs[4]), Some("a.o"), "host compile of a.o");
        assert_eq!(b.object(&b.jobs[2]), None);
    }

    #[test]
    fn ninjatracing_vectors_restart_and_multi_output() {
        // end goes backwards in a build-relative log: a new build.
        let t = parse(b"# ninja log v5\n100\t200\t0\tmy_output\tdeadbeef\n50\t120\t0\tmy_first_output\t0afef\n");
        assert_eq!(t.builds.len(), 2);
        assert_eq!(
            t.builds[1].names(&t.builds[1].jobs[0]).collect::<Vec<_>>(),
            vec!["my_first_output"]
        );
        let t =
            parse(b"# ninja log v6\n1\t5\t0\toutput\tab\n1\t5\t0\tother_output\tab\n# comment\n");
        assert_eq!(t.builds[0].jobs.len(), 1);
        assert_eq!(
            t.builds[0].names(&t.builds[0].jobs[0]).collect::<Vec<_>>(),
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
        assert_eq!(
            t.builds[0].names(&t.builds[0].jobs[1]).collect::<Vec<_>>(),
            vec!["bb"]
        );
        assert_eq!(t.pending_bytes, 0);
    }

    /// The builds of an epoch log the plain way: a set of the names of the current
    /// build, cleared at each repeat.
    fn naive_epoch_builds(names: &[String]) -> Vec<Vec<String>> {
        let mut builds: Vec<Vec<String>> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for n in names {
            if builds.is_empty() || !seen.insert(n.clone()) {
                builds.push(Vec::new());
                seen.clear();
                seen.insert(n.clone());
            }
            builds.last_mut().unwrap().push(n.clone());
        }
        builds
    }

    proptest::proptest! {
        #[test]
        fn epoch_builds_split_where_a_name_repeats(
            picks in proptest::collection::vec(0u8..40, 0..300),
            chunk in 1usize..200,
        ) {
            let names: Vec<String> = picks.iter().map(|p| format!("o{p}.o::gfx90{}", p % 3)).collect();
            let mut file = Vec::new();
            for (i, n) in names.iter().enumerate() {
                let t = 1_700_000_000_000i64 + i as i64;
                file.extend_from_slice(format!("{t}\t{}\t0\t{n}\th{i}\n", t + 5).as_bytes());
            }
            // Fed in pieces, as a followed file arrives.
            let mut p = TraceParser::new();
            for c in file.chunks(chunk) {
                p.feed(c);
            }
            let t = p.into_trace();
            let got: Vec<Vec<String>> = t
                .builds
                .iter()
                .map(|b| {
                    let mut js: Vec<&Job> = b.jobs.iter().collect();
                    js.sort_by_key(|j| j.line);
                    js.iter().map(|j| b.name(j).to_string()).collect()
                })
                .collect();
            proptest::prop_assert_eq!(got, naive_epoch_builds(&names));
        }
    }

    #[test]
    fn later_epoch_builds_keep_their_own_names_and_hashes() {
        let t = parse(
            b"1700000000000\t1700000000010\t0\ta.o::gfx900\tA1\n\
              1700000000000\t1700000000020\t0\ta.o\tA2\n\
              1700000001000\t1700000001010\t0\ta.o::gfx900\tB1\n\
              1700000002000\t1700000002010\t0\ta.o::gfx900\tC1\n\
              1700000002000\t1700000002030\t0\tb.o::bundle\tC2\n",
        );
        assert_eq!(t.builds.len(), 3);
        let b = &t.builds[2];
        assert_eq!(b.epoch_base_ms, 1_700_000_002_000);
        let got: Vec<(&str, &str, Option<&str>)> = b
            .jobs
            .iter()
            .map(|j| (b.name(j), b.hash(j), b.object(j)))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a.o::gfx900", "C1", Some("a.o")),
                ("b.o::bundle", "C2", Some("b.o"))
            ]
        );
        assert_eq!(t.builds[0].jobs[1].kind, JobKind::Host);
    }

    #[test]
    fn many_outputs_of_one_edge_merge_through_the_index() {
        // 40 lines with equal times: 20 edges of two outputs each, the second output of
        // each edge listed after all the first ones (the indexed path past 16).
        let mut file = String::new();
        for k in 0..20 {
            file.push_str(&format!("1\t9\t0\tfirst{k}\th{k}\n"));
        }
        for k in 0..20 {
            file.push_str(&format!("1\t9\t0\tsecond{k}\th{k}\n"));
        }
        let t = parse(file.as_bytes());
        let b = &t.builds[0];
        assert_eq!(b.jobs.len(), 20);
        for (k, j) in b.jobs.iter().enumerate() {
            assert_eq!(
                b.names(j).collect::<Vec<_>>(),
                vec![format!("first{k}"), format!("second{k}")]
            );
            assert_eq!(b.label(j), format!("first{k}, second{k}"));
        }
    }

    proptest::proptest! {
        /// The one-pass reader of common lines agrees with the general one.
        #[test]
        fn plain_lines_read_as_the_general_path_reads_them(
            line in "[0-9 +-]{0,4}\t[0-9 ]{0,4}\t[0-9x-]{0,3}\t[a-z:\t]{0,6}\t[a-z\t ]{0,4}",
        ) {
            let raw = line.as_bytes();
            let mut p = TraceParser::new();
            if let Some(f) = plain_fields(raw) {
                let g = p.general_fields(1, raw);
                proptest::prop_assert!(g.is_some(), "general path refused {line:?}");
                let g = g.unwrap();
                proptest::prop_assert_eq!((f.start, f.end, f.rest, f.tab), (g.start, g.end, g.rest, g.tab));
            }
        }
    }

    #[test]
    fn objects_and_archs_are_numbered_once_per_build() {
        let t = parse(
            b"1\t5\t0\ta.o::gfx900\th1\n1\t6\t0\tb.o::gfx942\th2\n2\t7\t0\ta.o::gfx942\th3\n\
              7\t8\t0\ta.o::bundle\th4\n8\t9\t0\ta.o\th5\n9\t10\t0\tlink\th6\n",
        );
        let b = &t.builds[0];
        assert_eq!(b.object_count(), 2);
        assert_eq!(b.arch_count(), 2);
        let idx: Vec<(Option<usize>, Option<usize>)> = b
            .jobs
            .iter()
            .map(|j| (b.object_index(j), b.arch_index(j)))
            .collect();
        assert_eq!(
            idx,
            vec![
                (Some(0), Some(0)),
                (Some(1), Some(1)),
                (Some(0), Some(1)),
                (Some(0), None),
                (Some(0), None),
                (None, None)
            ]
        );
        assert_eq!((b.object_name(1), b.arch_name(1)), ("b.o", "gfx942"));
        assert_eq!(b.object_name(9), "", "out of range reads as empty");
    }

    #[test]
    fn a_long_line_is_skipped_whether_it_arrives_whole_or_in_pieces() {
        let mut file = b"1\t2\t0\ta\th\n3\t4\t0\t".to_vec();
        file.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
        file.extend_from_slice(b"\th\n5\t6\t0\tb\th\n");
        let whole = parse(&file);
        let mut p = TraceParser::new();
        for c in file.chunks(4096) {
            p.feed(c);
        }
        p.finish();
        for t in [whole, p.into_trace()] {
            let b = &t.builds[0];
            let names: Vec<&str> = b.jobs.iter().map(|j| b.name(j)).collect();
            assert_eq!(names, vec!["a", "b"]);
            assert_eq!(t.diagnostics.len(), 1);
            assert_eq!(t.diagnostics[0].line, 2);
            assert!(t.diagnostics[0].message.contains("longer than"));
        }
    }

    #[test]
    fn a_job_stays_small() {
        // A million-line trace holds a million of these (the module doc says 56).
        assert!(
            std::mem::size_of::<Job>() <= 56,
            "{}",
            std::mem::size_of::<Job>()
        );
    }

    #[test]
    fn integers_as_str_parse_reads_them() {
        for s in ["0", "17", " 42 ", "+5", "-3", "9223372036854775807"] {
            assert_eq!(int(s.as_bytes()), s.trim().parse::<i64>().ok(), "{s:?}");
        }
        for s in [
            "",
            " ",
            "-",
            "+",
            "1x",
            "x1",
            "1 2",
            "9223372036854775808",
            "0x10",
            "１",
        ] {
            assert_eq!(int(s.as_bytes()), None, "{s:?}");
        }
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
