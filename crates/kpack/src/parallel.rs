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

/// Map `items` through `f` on `threads` threads (0: rayon's global pool), at most
/// `in_flight` items taken and not yet handed on at a time, handing each result to
/// `emit` on the calling thread in item order. Memory stays at the window whatever
/// the number of items: a streamed scan of a tree of any size holds `in_flight`
/// reports. Items are pulled from `items` on the calling thread, as the window
/// allows. Call it from outside the pool (the calling thread waits for results).
pub fn map_ordered<T: Send, R: Send>(
    threads: usize,
    items: impl Iterator<Item = T>,
    in_flight: usize,
    f: impl Fn(T) -> R + Sync,
    mut emit: impl FnMut(R),
) -> Result<()> {
    if threads == 1 {
        items.for_each(|t| emit(f(t)));
        return Ok(());
    }
    let f = &f;
    if threads == 0 {
        rayon::in_place_scope_fifo(|s| window(s, items, in_flight, f, emit));
        return Ok(());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Internal(format!("cannot start {threads} threads: {e}")))?;
    pool.in_place_scope_fifo(|s| window(s, items, in_flight, f, emit));
    Ok(())
}

/// Items a task of [`map_ordered`] maps at a time: one hand-over per item (a wake-up
/// of a worker, then of the caller) cost more than reading a small file.
const CHUNK: usize = 16;

/// [`map_ordered`]'s loop: spawn a chunk of items while the window has room, then
/// hand on what is next in order once it is back.
fn window<'scope, T: Send + 'scope, R: Send + 'scope>(
    s: &rayon::ScopeFifo<'scope>,
    mut items: impl Iterator<Item = T>,
    in_flight: usize,
    f: &'scope (impl Fn(T) -> R + Sync),
    mut emit: impl FnMut(R),
) {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut pending = std::collections::BTreeMap::new();
    let (mut taken, mut handed) = (0usize, 0usize);
    let (mut chunks, mut next_chunk) = (0usize, 0usize);
    let chunk = CHUNK.min(in_flight.max(1));
    loop {
        while taken - handed + chunk <= in_flight.max(chunk) {
            let part: Vec<T> = items.by_ref().take(chunk).collect();
            if part.is_empty() {
                break;
            }
            let (tx, i) = (tx.clone(), chunks);
            taken += part.len();
            chunks += 1;
            s.spawn_fifo(move |_| {
                // A panic is carried to the calling thread, which would otherwise wait
                // for this result forever.
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    part.into_iter().map(f).collect::<Vec<R>>()
                }));
                let _ = tx.send((i, r));
            });
        }
        if next_chunk == chunks {
            break;
        }
        // Every task sends once, and `tx` is held here: a result always comes.
        let Ok((i, r)) = rx.recv() else { break };
        match r {
            Ok(r) => pending.insert(i, r),
            Err(panic) => std::panic::resume_unwind(panic),
        };
        while let Some(rs) = pending.remove(&next_chunk) {
            handed += rs.len();
            rs.into_iter().for_each(&mut emit);
            next_chunk += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_ordered_hands_results_on_in_item_order_within_the_window() {
        for threads in [0, 1, 2, 4] {
            let live = std::sync::atomic::AtomicUsize::new(0);
            let most = std::sync::atomic::AtomicUsize::new(0);
            let mut out = Vec::new();
            map_ordered(
                threads,
                (0..500u64).inspect(|_| {
                    let now = live.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    most.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                }),
                8,
                // Two threads finish items out of order: the order must come out whole.
                |x| {
                    std::thread::yield_now();
                    x * 3
                },
                |r| {
                    live.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    out.push(r)
                },
            )
            .unwrap();
            assert_eq!(out, (0..500u64).map(|x| x * 3).collect::<Vec<_>>());
            assert!(
                most.into_inner() <= 8,
                "{threads} threads: more than 8 in flight"
            );
        }
    }

    #[test]
    fn a_panic_in_map_ordered_reaches_the_caller() {
        let r = std::panic::catch_unwind(|| {
            map_ordered(
                2,
                0..100u32,
                4,
                |x| if x == 37 { panic!("item 37") } else { x },
                |_| {},
            )
        });
        assert!(r.is_err());
    }

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
