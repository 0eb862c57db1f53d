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
mod builds;
pub mod chrome;
pub mod follow;
mod parse;

pub use parse::TraceParser;

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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
mod tests;
