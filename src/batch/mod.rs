//! Batch mode: text and JSON reporters over the core's results, progress on stderr,
//! exit codes (0 clean, 1 checks or `--strict` diagnostics, 2 errors).

pub mod archive;
pub mod artifacts;
pub mod diff;
pub mod jsonstream;
pub mod kernels;
pub mod pack;
pub mod progress;
pub mod rewrite;
pub mod scan;
pub mod schemas;
pub mod trace;
pub mod wheel;

/// Cancel `token` on SIGINT or SIGTERM: the operation stops at its next check,
/// removes what it staged, and returns [`kpack::Error::Cancelled`]. A second signal
/// exits at once (status 130), for an operation that does not check often enough.
pub fn cancel_on_signals(token: &kpack::event::CancelToken) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, token.flag())?;
        signal_hook::flag::register(sig, token.flag())?;
    }
    Ok(())
}

use std::io::{self, Write};

/// Exit status: success.
pub const EXIT_OK: i32 = 0;
/// Exit status: a check failed, or `--strict` saw diagnostics.
pub const EXIT_FINDINGS: i32 = 1;
/// Exit status: the operation could not be carried out.
pub const EXIT_ERROR: i32 = 2;

pub use crate::text::{pct, size};

/// What a batch command prints on stdout: the command line's `--json`, a command's
/// `--csv` and `--top`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Text for a person: tables of at most `top` rows where the command has them
    /// (0: every row).
    Text {
        /// Rows per table.
        top: usize,
    },
    /// The command's table as CSV (RFC 4180).
    Csv,
    /// The `--json` document, with its schema under `docs/schema/`.
    Json,
}

impl Default for Format {
    fn default() -> Self {
        Format::Text { top: 0 }
    }
}

impl Format {
    /// From the flags: `--json` wins over `--csv`, which wins over text.
    pub fn from_flags(json: bool, csv: bool, top: usize) -> Self {
        match (json, csv) {
            (true, _) => Format::Json,
            (false, true) => Format::Csv,
            (false, false) => Format::Text { top },
        }
    }

    /// Whether the `--json` document is printed.
    pub fn is_json(self) -> bool {
        self == Format::Json
    }
}

/// How a batch command reports: the command line's `--json`, `--long`, `--strict`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Output {
    /// Text, or a `--json` document on stdout.
    pub format: Format,
    /// Every file's details, not only the summary.
    pub long: bool,
    /// Exit 1 when any diagnostic was raised.
    pub strict: bool,
}

/// A `--json` document: `{"schema": "kpack-tui.<command>/<version>", ...value}`.
/// Every `--json` output has a schema under `docs/schema/` (tests validate them).
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct Versioned<'a, T: serde::Serialize> {
    /// `kpack-tui.<command>/<version>`.
    pub schema: &'static str,
    /// The document.
    #[serde(flatten)]
    pub value: &'a T,
}

/// Write a `--json` document (pretty, trailing newline) to `out`.
pub fn write_json<T: serde::Serialize>(
    out: &mut dyn Write,
    schema: &'static str,
    value: &T,
) -> io::Result<()> {
    // An I/O failure keeps its kind (a closed pipe under `| head` is not an error).
    serde_json::to_writer_pretty(&mut *out, &Versioned { schema, value }).map_err(|e| {
        match e.io_error_kind() {
            Some(kind) => io::Error::new(kind, e),
            None => io::Error::other(e),
        }
    })?;
    writeln!(out)
}

/// Write a `--json` document to stdout.
pub fn print_json<T: serde::Serialize>(schema: &'static str, value: &T) -> io::Result<()> {
    let out = io::stdout();
    let mut out = io::BufWriter::new(out.lock());
    write_json(&mut out, schema, value)?;
    out.flush()
}
