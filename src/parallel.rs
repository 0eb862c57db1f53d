//! Running work on a given number of threads.

use crate::error::{Error, Result};

/// Run `f` on a pool of `threads` threads (0: rayon's global pool, all cores), so
/// that the `par_iter`s inside it use that many.
pub fn on_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> Result<R> {
    if threads == 0 {
        return Ok(f());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Invalid(format!("cannot start {threads} threads: {e}")))?;
    Ok(pool.install(f))
}
