//! What a scan tells as it goes ([`ScanEvent`]), to a front end's
//! [`crate::event::EventSink`].

use super::FileReport;
use std::path::PathBuf;

/// An event of the tree scan.
#[derive(Debug, Clone)]
pub enum ScanEvent {
    /// The walk finished listing entries: `files` regular files, `bytes` in total.
    Discovered {
        /// Regular files to inspect.
        files: u64,
        /// Their total size.
        bytes: u64,
    },
    /// One file was inspected.
    FileDone {
        /// Path relative to the root.
        path: PathBuf,
        /// Its size.
        bytes: u64,
    },
    /// An entry was found by the walk (before it is inspected): a front end can show
    /// the tree's shape at once.
    Listed {
        /// Path relative to the root.
        path: String,
        /// Its size.
        bytes: u64,
    },
    /// The report of one entry, as soon as it is ready (a front end can show the tree
    /// filling in). Reports arrive in any order.
    Inspected(Box<FileReport>),
}
