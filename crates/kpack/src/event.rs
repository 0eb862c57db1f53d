//! The sink that receives progress events from long operations, and the token that
//! cancels them. Each operation's events live with it (`scan::ScanEvent`,
//! `pack::PackEvent`), so this module imports none of them.
//!
//! The core pushes events into a `&dyn EventSink`; the TUI forwards them to its
//! channel, the batch mode prints them. Events are small and `Send`.

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
