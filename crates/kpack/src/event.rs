//! The sink that receives progress events from long operations, and the token that
//! cancels them. An operation's own events live with it (`scan::ScanEvent`); the
//! events of the operations that write trees of host-only binaries and archives
//! (pack, artifact split, wheel split: [`PackEvent`]) live here, so that none of
//! them imports another for its progress. This module imports no operation.
//!
//! The core pushes events into a `&dyn EventSink`; the TUI forwards them to its
//! channel, the batch mode prints them. Events are small and `Send`.

use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Receiver of progress events. Must be cheap: it is called from worker threads.
pub trait EventSink<E>: Sync {
    /// Handle one event.
    fn event(&self, event: E);
}

/// A sink that drops everything.
pub struct NoEvents;

impl<E> EventSink<E> for NoEvents {
    fn event(&self, _: E) {}
}

impl<E, F: Fn(E) + Sync> EventSink<E> for F {
    fn event(&self, event: E) {
        self(event)
    }
}

/// A cancellation flag shared between a caller and a running operation.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }
    /// Ask the operation to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    /// Whether cancellation was asked.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// The flag itself, for a signal handler to set (the binaries cancel on SIGINT
    /// and SIGTERM this way; the library installs no handler of its own).
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
}

/// A phase of one file's processing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Extracting and compressing code objects.
    Compress,
    /// Rewriting host-only.
    Rewrite,
    /// Copying.
    Copy,
}

impl Phase {
    /// `compress`, `rewrite`, `copy`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Compress => "compress",
            Phase::Rewrite => "rewrite",
            Phase::Copy => "copy",
        }
    }
}

/// Progress of a pack, an artifact split or a wheel split, for the TUI and the
/// batch reporter.
#[derive(Debug, Clone)]
pub enum PackEvent {
    /// The plan is ready: work to do.
    Started {
        /// Entries to process.
        files: u64,
        /// Their bytes.
        bytes: u64,
    },
    /// A worker began a phase on a file.
    Phase {
        /// Worker index.
        worker: usize,
        /// Relative path.
        path: String,
        /// What it does.
        phase: Phase,
        /// The file's size (a reporter may name large files as they begin).
        bytes: u64,
    },
    /// A file is done.
    FileDone {
        /// Relative path.
        path: String,
        /// Bytes read.
        bytes_in: u64,
        /// Bytes written for it (archived kernels counted in their family).
        bytes_out: u64,
    },
    /// A family archive grew.
    Family {
        /// Family name.
        family: String,
        /// Code objects so far.
        code_objects: u64,
        /// Stored bytes so far.
        stored: u64,
    },
    /// Something worth telling.
    Warning(String),
    /// Writing archives, verifying, renaming.
    Finishing(&'static str),
}
