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
        error: crate::kpack::archive::WriteError,
    },
    /// A request that cannot be carried out as asked (bad argument, existing output…).
    #[error("{0}")]
    Invalid(String),
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

    /// Wrap a format error with the path it concerns.
    pub fn format(path: impl Into<PathBuf>, source: FormatError) -> Self {
        Error::Format {
            path: path.into(),
            error: source,
        }
    }
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
}
