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
        .map_err(|e| Error::Internal(format!("cannot start {threads} threads: {e}")))?;
    Ok(pool.install(f))
}

/// Run `f` over `items` on the current pool, each idle worker taking the next item in
/// order: put the largest first for longest-processing-time scheduling. (A parallel
/// iterator hands a thief the far half of the list, so the two largest items can end
/// up one after the other on one thread while the other thread finishes the small
/// ones.) Results come back in item order.
pub fn largest_first<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    use std::sync::{Mutex, PoisonError};
    let n = items.len();
    let queue = Mutex::new(items.into_iter().enumerate());
    let done = Mutex::new(Vec::with_capacity(n));
    let workers = rayon::current_num_threads().clamp(1, n.max(1));
    rayon::scope(|s| {
        for _ in 0..workers {
            s.spawn(|_| {
                loop {
                    let next = queue.lock().unwrap_or_else(PoisonError::into_inner).next();
                    let Some((i, item)) = next else { break };
                    let r = f(item);
                    done.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((i, r));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(PoisonError::into_inner);
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_first_keeps_item_order_and_runs_everything() {
        for threads in [1, 2, 4] {
            let out = on_threads(threads, || {
                largest_first((0..100u64).rev().collect(), |x| x * 2)
            })
            .unwrap();
            assert_eq!(out, (0..100u64).rev().map(|x| x * 2).collect::<Vec<_>>());
        }
        assert!(largest_first(Vec::<u8>::new(), |x| x).is_empty());
    }

    #[test]
    fn largest_first_spreads_the_two_largest_over_two_threads() {
        // Two long items first, then short ones: each long item gets its own thread.
        let ids = on_threads(2, || {
            largest_first(vec![150u64, 150, 1, 1, 1, 1], |ms| {
                std::thread::sleep(std::time::Duration::from_millis(ms));
                std::thread::current().id()
            })
        })
        .unwrap();
        assert_ne!(ids[0], ids[1]);
    }
}
