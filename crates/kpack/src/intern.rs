//! Names a tree repeats thousands of times (targets, entry IDs, TOC keys and
//! metadata), held once: each reader keeps a set of what it has seen ([`shared`]),
//! and bundle targets go through one set for the process ([`interned`]).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// The copy of `v` in `seen`, added when it is not there yet.
pub fn shared<T>(seen: &mut BTreeSet<Arc<T>>, v: &T) -> Arc<T>
where
    T: Ord + ?Sized,
    for<'a> Arc<T>: From<&'a T>,
{
    if let Some(a) = seen.get(v) {
        return a.clone();
    }
    let a = Arc::<T>::from(v);
    seen.insert(a.clone());
    a
}

/// The process's one copy of the bundle-entry ID or target `s`. Never emptied: it
/// holds each distinct ID seen once (a few dozen in a real tree; a tree of made-up
/// IDs costs here what its reports would hold anyway).
pub fn interned(s: &str) -> Arc<str> {
    static SEEN: Mutex<BTreeSet<Arc<str>>> = Mutex::new(BTreeSet::new());
    shared(&mut SEEN.lock().unwrap_or_else(|p| p.into_inner()), s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_copy_of_each_value() {
        let mut seen = BTreeSet::new();
        let a = shared(&mut seen, "gfx90a");
        let b = shared(&mut seen, "gfx90a");
        let c = shared(&mut seen, "gfx942");
        assert!(Arc::ptr_eq(&a, &b) && !Arc::ptr_eq(&a, &c));
        assert_eq!(seen.len(), 2);
        let pairs: &[(u8, u8)] = &[(1, 2)];
        let mut lists = BTreeSet::new();
        assert!(Arc::ptr_eq(
            &shared(&mut lists, pairs),
            &shared(&mut lists, pairs)
        ));
        assert!(Arc::ptr_eq(&interned("gfx1100"), &interned("gfx1100")));
    }
}
