//! Error types of the core.
//!
//! Parsers return [`FormatError`]: what was wrong and at which byte offset. The
//! scan and the commands attach the file path ([`Error::Format`]), so every message a
//! user sees names the file, the problem and the place.

use std::borrow::Cow;
use std::path::PathBuf;

/// A structural problem in some bytes: what is wrong and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} (at byte {offset:#x})")]
pub struct FormatError {
    /// Byte offset of the problem, relative to the start of the parsed buffer
    /// (the file for file-level parsers, the section for section parsers).
    pub offset: u64,
    /// Human-readable description naming the field.
    pub what: Cow<'static, str>,
}

impl FormatError {
    /// A new error at `offset`.
    pub fn new(offset: u64, what: impl Into<Cow<'static, str>>) -> Self {
        FormatError {
            offset,
            what: what.into(),
        }
    }

    /// The same error moved by `base` bytes (to report file offsets for a
    /// section parser's error).
    #[must_use]
    pub fn shifted(mut self, base: u64) -> Self {
        self.offset = self.offset.saturating_add(base);
        self
    }

    /// The same error with a context prefix such as `"bundle 3: "`.
    #[must_use]
    pub fn context(mut self, prefix: &str) -> Self {
        self.what = Cow::Owned(format!("{prefix}{}", self.what));
        self
    }
}

/// Result alias for byte-level parsers.
pub type FormatResult<T> = std::result::Result<T, FormatError>;

/// Any failure of a core operation, always naming the file involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be read or written.
    // The OS error is part of the message (not a `#[source]`), so a report that
    // prints the chain does not repeat it.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
    /// The file's content is malformed.
    #[error("{}: {error}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        error: FormatError,
    },
    /// The file is valid but not something this operation handles.
    #[error("{}: {what}", path.display())]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is unsupported.
        what: String,
    },
    /// The archive writer refused a code object, or could not finish the archive.
    #[error("{}: {error}", path.display())]
    Archive {
        /// The archive being written.
        path: PathBuf,
        /// What it refused.
        error: WriteError,
    },
    /// A ledger (`.kpack/kpack-tui-ledger*.json`) that cannot be read.
    #[error("{}: {error}", path.display())]
    Ledger {
        /// The ledger file.
        path: PathBuf,
        /// What is wrong with it.
        error: LedgerError,
    },
    /// An artifact directory whose `artifact_manifest.txt` cannot be used.
    #[error("{}: {error}", path.display())]
    Manifest {
        /// The manifest (or the directory that lacks one).
        path: PathBuf,
        /// What is wrong.
        error: ManifestError,
    },
    /// The input changed while the operation read it: a file swapped, shortened or
    /// gone, a binary no longer what the scan saw. Nothing was written; running the
    /// operation again on the settled input is the remedy.
    #[error("{}: {what}", path.display())]
    Changed {
        /// The file (or the archive) that changed.
        path: PathBuf,
        /// What was seen.
        what: String,
    },
    /// What the operation just wrote does not read back as it was written (an
    /// archive, a wheel, a repaired image, a packed tree): nothing was placed. A
    /// fault of this tool or of the disk, never of the input.
    #[error("{}: {what}", path.display())]
    NotAsWritten {
        /// What was written (in its stage).
        path: PathBuf,
        /// What its read-back found.
        what: String,
    },
    /// The output is taken: a previous output, files of the same names, or what
    /// another run placed first. Nothing was written (`--force` replaces what this
    /// tool wrote, never a directory it did not).
    #[error("{} {what}", path.display())]
    OutputTaken {
        /// The output directory.
        path: PathBuf,
        /// What it holds, and what to do.
        what: String,
    },
    /// An option or argument that cannot be used as given (an unknown family or
    /// target, a name that cannot become a file name, nothing chosen).
    #[error("{0}")]
    Usage(String),
    /// The process could not do what any operation needs (start its threads, use a
    /// lock a panicking thread left): not about the input.
    #[error("{0}")]
    Internal(String),
    /// The operation refuses to do what the input asks, because doing it would be
    /// unsafe: a name that leads outside the output, a link a repair would split.
    /// Nothing was written.
    #[error("{}: {what}", path.display())]
    Refused {
        /// The input that asks it.
        path: PathBuf,
        /// What it asks, and why not.
        what: String,
    },
    /// The input is damaged in a way the operation will not carry through (files the
    /// scan could not read, an archive a ledger promises that is not there).
    #[error("{}: {what}", path.display())]
    Damaged {
        /// The input (a tree, a file in it).
        path: PathBuf,
        /// What is damaged, and the remedy.
        what: String,
    },
    /// Two inputs claim one output (two shards of one name, two artifacts holding
    /// one path): nothing was written.
    #[error("{0}")]
    Conflict(String),
    /// The input holds nothing the operation could act on (no ELF file, no code
    /// object of a selected target): a run that checked or packed nothing does not
    /// pass.
    #[error("{0}")]
    NothingToDo(String),
    /// A failure while one file of a larger operation was handled: the file's name
    /// in the operation, and the failure as it was ([`Error::cause`]).
    // Not a `#[source]`: the message holds it, and a report of the chain would
    // repeat it.
    #[error("{path}: {error}")]
    InFile {
        /// The file, as the operation names it (relative to its tree).
        path: String,
        /// What went wrong.
        error: Box<Error>,
    },
    /// The operation ran, and found what the caller asked to be fatal (warnings under
    /// `--strict`, a failed check): exit status 1 at the command line.
    #[error("{0}")]
    Findings(String),
    /// The user cancelled; nothing was written.
    #[error("cancelled")]
    Cancelled,
}

impl Error {
    /// Wrap an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            error: source,
        }
    }

    /// The failure itself, through the files of an operation it happened in
    /// ([`Error::InFile`]).
    pub fn cause(&self) -> &Error {
        match self {
            Error::InFile { error, .. } => error.cause(),
            e => e,
        }
    }

    /// `error`, met while the file `path` of a larger operation was handled: as it
    /// is when it names its file already, else [`Error::InFile`].
    pub fn in_file(path: &str, error: Error) -> Error {
        match error {
            Error::Usage(_)
            | Error::Internal(_)
            | Error::Conflict(_)
            | Error::NothingToDo(_)
            | Error::Findings(_) => Error::InFile {
                path: path.to_string(),
                error: Box::new(error),
            },
            named => named,
        }
    }

    /// Wrap a format error with the path it concerns.
    pub fn format(path: impl Into<PathBuf>, source: FormatError) -> Self {
        Error::Format {
            path: path.into(),
            error: source,
        }
    }
}

/// Why a name read from a file (an archive key, a target ID, a binary's name) cannot
/// become a path below a directory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnsafePath {
    /// Nothing before the `#`.
    #[error("empty path")]
    Empty,
    /// A NUL byte.
    #[error("path contains NUL")]
    Nul,
    /// Starts at `/`.
    #[error("absolute path")]
    Absolute,
    /// A backslash (a separator on Windows).
    #[error("path contains a backslash")]
    Backslash,
    /// `a//b` or `a/./b`.
    #[error("path has an empty or '.' component: {0:?}")]
    EmptyComponent(String),
    /// A `..` component.
    #[error("path escapes with '..': {0:?}")]
    Escapes(String),
    /// A target ID that cannot be a file name.
    #[error("arch {0:?} cannot be used as a file name")]
    Arch(String),
}

/// A name whose path or target ID is unsafe: what it was, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key:?}: {why}")]
pub struct UnsafeKey {
    /// The key (or the binary's name) as read.
    pub key: String,
    /// What is wrong with it.
    pub why: UnsafePath,
}

/// Why the archive writer refused a code object, or could not finish (reported
/// with the archive's path as [`Error::Archive`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// A key must name its translation unit: `path#<index>`.
    #[error("code-object key {0:?} must end in #<TU index>")]
    KeyWithoutTu(String),
    /// A key is not a safe relative path (`..`, absolute, NUL…).
    #[error("code-object key {key:?}: {why}")]
    UnsafeKey {
        /// The key.
        key: String,
        /// What is wrong with it.
        why: UnsafePath,
    },
    /// An arch that cannot be a target ID (empty, or holding `/`, `\` or NUL).
    #[error("arch {0:?} is not a target ID")]
    NotTargetId(String),
    /// The same (key, arch) given twice.
    #[error("code object {key} @ {arch} added twice")]
    AddedTwice {
        /// The key.
        key: String,
        /// The target ID.
        arch: String,
    },
    /// More code objects than an archive may hold (the limit).
    #[error("more than {0} code objects")]
    TooMany(u64),
    /// An alias naming a target of the key that holds no frame.
    #[error("alias {key} @ {arch} names {of}, which holds no code object")]
    DanglingAlias {
        /// The key.
        key: String,
        /// The aliased target ID.
        arch: String,
        /// The target ID whose frame it should share.
        of: String,
    },
    /// A thread panicked while adding (the spool's lock is poisoned).
    #[error("archive writer poisoned by a panic")]
    Poisoned,
}

/// Why a ledger cannot be read (reported with its path as [`Error::Ledger`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// Not JSON of the ledger's shape (serde's reason).
    #[error("not a kpack-tui ledger: {0}")]
    NotALedger(String),
    /// Another version's ledger.
    #[error("ledger schema {found:?}, this version reads {reads:?}")]
    Schema {
        /// The `schema` it has.
        found: String,
        /// The one this version reads.
        reads: &'static str,
    },
    /// A hash other than SHA-256.
    #[error("ledger hash {0:?} is not sha256")]
    Hash(String),
    /// A directory, a symlink, a device.
    #[error("the ledger is not a regular file")]
    NotAFile,
    /// Larger than any ledger is read.
    #[error("ledger of {size} bytes is above the {bound}-byte bound")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The bound.
        bound: u64,
    },
}

/// Why an `artifact_manifest.txt` cannot be used (its prefixes become paths that
/// are written to).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The artifact directory has none.
    #[error("no artifact_manifest.txt in it")]
    Missing,
    /// A directory or a device.
    #[error("not a regular file")]
    NotAFile,
    /// Larger than a manifest may be.
    #[error("{size} bytes, more than a manifest can hold ({bound})")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The bound.
        bound: u64,
    },
    /// Not UTF-8.
    #[error("not UTF-8 text ({0})")]
    NotUtf8(String),
    /// A prefix that cannot be a relative path below the output.
    #[error("line {line}: prefix {prefix:?} {why}")]
    BadPrefix {
        /// 1-based line.
        line: usize,
        /// The prefix as written.
        prefix: String,
        /// What is wrong (`is absolute`, `holds a backslash or NUL`, `has an empty,
        /// '.' or '..' component`).
        why: &'static str,
    },
    /// A prefix listed twice.
    #[error("line {line}: prefix {prefix:?} is listed twice")]
    Twice {
        /// 1-based line.
        line: usize,
        /// The prefix.
        prefix: String,
    },
}

/// Result alias for core operations.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_file_problem_and_offset() {
        let e = Error::format(
            "lib/libx.so",
            FormatError::new(0x18, "entry count too large"),
        );
        assert_eq!(
            e.to_string(),
            "lib/libx.so: entry count too large (at byte 0x18)"
        );
        let e = FormatError::new(4, "bad magic")
            .shifted(0x1000)
            .context("bundle 2: ");
        assert_eq!(e.to_string(), "bundle 2: bad magic (at byte 0x1004)");
    }

    #[test]
    fn operation_refusals_keep_their_path_apart() {
        let changed = Error::Changed {
            path: "lib/libx.so".into(),
            what: "no longer a fat binary".into(),
        };
        assert_eq!(changed.to_string(), "lib/libx.so: no longer a fat binary");
        let taken = Error::OutputTaken {
            path: "out".into(),
            what: "already holds a.whl (--force replaces it)".into(),
        };
        assert_eq!(
            taken.to_string(),
            "out already holds a.whl (--force replaces it)"
        );
        assert!(
            matches!(&taken, Error::OutputTaken { path, .. } if path == std::path::Path::new("out")),
            "a caller can tell what is taken without parsing the message"
        );
        let written = Error::NotAsWritten {
            path: "stage/x.kpack".into(),
            what: "the archive just written does not read back: bad TOC".into(),
        };
        assert!(
            written
                .to_string()
                .starts_with("stage/x.kpack: the archive")
        );
        assert_eq!(
            Error::Usage("choose at least one --family".into()).to_string(),
            "choose at least one --family"
        );
    }
    #[test]
    fn a_file_of_an_operation_is_named_once() {
        // An error that names its file stays as it is...
        let named = Error::in_file(
            "lib/a.so",
            Error::Changed {
                path: "lib/a.so".into(),
                what: "empty".into(),
            },
        );
        assert_eq!(named.to_string(), "lib/a.so: empty");
        // ...one that does not is given the file, and keeps its kind.
        let bare = Error::in_file("lib/a.so", Error::Conflict("two names".into()));
        assert_eq!(bare.to_string(), "lib/a.so: two names");
        assert!(matches!(bare.cause(), Error::Conflict(_)));
        let findings = Error::in_file("x", Error::Findings("warnings".into()));
        assert!(matches!(findings.cause(), Error::Findings(_)));
    }
}
