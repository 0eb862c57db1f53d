//! The first names of files with more than one, for a streamed scan. Every regular
//! file of a tree staged with `cp -al` has two names, the other one outside the
//! tree: so a scan first keeps only a 64-bit fingerprint of each such file's
//! identity ([`FirstNames`]). Only when a fingerprint comes again (a second name in
//! the tree, or a collision) does it read the walk so far again and keep the names
//! themselves ([`Names`]), front-coded: names come in path order, so each is stored
//! as what it does not share with the one before it, a full name every [`BLOCK`].

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash};

/// Names per block: a lookup decodes at most this many.
const BLOCK: usize = 32;

/// Identity (device, inode) of each file with more than one name seen so far.
pub(super) enum FirstNames {
    /// Fingerprints only: no file has been seen twice.
    Fingerprints(Fingerprints, std::collections::hash_map::RandomState),
    /// The first names themselves.
    Names(Names),
}

impl Default for FirstNames {
    fn default() -> Self {
        FirstNames::Fingerprints(Fingerprints::default(), Default::default())
    }
}

impl FirstNames {
    /// The first name of `id` when it was seen before under another; otherwise
    /// `name` becomes it. `earlier` lists the identities and names of the files with
    /// more than one name before `name` in path order (the walk again): called at
    /// most once, when a fingerprint comes again.
    pub(super) fn first_or_insert(
        &mut self,
        id: (u64, u64),
        name: &str,
        earlier: impl FnOnce() -> Vec<((u64, u64), String)>,
    ) -> Option<String> {
        if let FirstNames::Fingerprints(seen, hasher) = self {
            let mut h = hasher.build_hasher();
            id.hash(&mut h);
            if seen.insert(std::hash::Hasher::finish(&h)) {
                return None;
            }
            let mut names = Names::default();
            for (id, name) in earlier() {
                names.first_or_insert(id, &name);
            }
            *self = FirstNames::Names(names);
        }
        match self {
            FirstNames::Names(names) => names.first_or_insert(id, name),
            FirstNames::Fingerprints(..) => None,
        }
    }
}

/// A set of 64-bit fingerprints in about 10 bytes each: a sorted run, and the newest
/// ones in a hash set merged into the run when they pass an eighth of it. (A hash set
/// of them all held 16 to 20 bytes each: 590 KiB for the 30,000 hard-linked files of
/// the bench's 8 GiB tree, all resident, in every command that scans it.)
#[derive(Default)]
pub(super) struct Fingerprints {
    sorted: Vec<u64>,
    recent: HashSet<u64>,
}

impl Fingerprints {
    /// Fingerprints kept in the hash set at least (merging a smaller one costs more
    /// than it saves).
    const RECENT: usize = 1024;

    /// Add `fp`; whether it was new.
    fn insert(&mut self, fp: u64) -> bool {
        if self.sorted.binary_search(&fp).is_ok() || !self.recent.insert(fp) {
            return false;
        }
        if self.recent.len() >= Self::RECENT.max(self.sorted.len() / 8) {
            self.merge();
        }
        true
    }

    /// The newest fingerprints into the run, merged from its end (no second buffer).
    fn merge(&mut self) {
        let mut new: Vec<u64> = self.recent.drain().collect();
        new.sort_unstable();
        let old = self.sorted.len();
        self.sorted.reserve_exact(new.len());
        self.sorted.resize(old + new.len(), 0);
        let (mut i, mut j) = (old, new.len());
        while j > 0 {
            let k = i + j - 1;
            if i > 0 && self.sorted[i - 1] > new[j - 1] {
                self.sorted[k] = self.sorted[i - 1];
                i -= 1;
            } else {
                self.sorted[k] = new[j - 1];
                j -= 1;
            }
        }
    }
}

/// File identity (device, inode) → the first name it was seen under.
#[derive(Default)]
pub(super) struct Names {
    ids: HashMap<(u64, u64), u32>,
    /// Each name: the length it shares with the one before (LEB128), the rest's
    /// length (LEB128), the rest.
    text: Vec<u8>,
    /// Where each block's first name starts in `text` (stored whole).
    blocks: Vec<usize>,
    count: usize,
    last: String,
}

impl Names {
    /// The first name of `id` when it was seen before; otherwise `name` becomes it.
    fn first_or_insert(&mut self, id: (u64, u64), name: &str) -> Option<String> {
        if let Some(&n) = self.ids.get(&id) {
            return Some(self.name(n as usize));
        }
        // More names than a u32 counts cannot be listed in memory anyway: those are
        // not remembered (their later names are inspected as files of their own).
        let n = u32::try_from(self.count).ok()?;
        self.ids.insert(id, n);
        let shared = if self.count.is_multiple_of(BLOCK) {
            self.blocks.push(self.text.len());
            0
        } else {
            common_prefix(&self.last, name)
        };
        leb128(&mut self.text, shared);
        leb128(&mut self.text, name.len() - shared);
        self.text.extend_from_slice(&name.as_bytes()[shared..]);
        self.last.clear();
        self.last.push_str(name);
        self.count += 1;
        None
    }

    /// Name number `n`, decoded from the start of its block.
    fn name(&self, n: usize) -> String {
        let mut at = self.blocks[n / BLOCK];
        let mut name: Vec<u8> = Vec::new();
        for _ in 0..=n % BLOCK {
            let shared = read_leb128(&self.text, &mut at);
            let rest = read_leb128(&self.text, &mut at);
            name.truncate(shared);
            name.extend_from_slice(&self.text[at..at + rest]);
            at += rest;
        }
        // Whole names were stored, each cut at a shared prefix of whole characters.
        String::from_utf8(name).unwrap_or_default()
    }
}

/// The length of the longest common prefix of `a` and `b`, at a character boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    let mut n = (a.bytes().zip(b.bytes()))
        .take_while(|(x, y)| x == y)
        .count();
    while !b.is_char_boundary(n) {
        n -= 1;
    }
    n
}

fn leb128(out: &mut Vec<u8>, mut v: usize) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn read_leb128(text: &[u8], at: &mut usize) -> usize {
    let (mut v, mut shift) = (0usize, 0);
    loop {
        let byte = text[*at];
        *at += 1;
        v |= usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_first_name_comes_back() {
        let mut f = Names::default();
        let names: Vec<String> = (0..1000)
            .map(|i| format!("include/sub{:03}/h\u{e9}ader_{i:05}.h", i / 7))
            .chain(["a", "ab", "a\u{e9}", "a\u{ea}", ""].map(String::from))
            .collect();
        for (i, n) in names.iter().enumerate() {
            assert_eq!(f.first_or_insert((1, i as u64), n), None);
        }
        for (i, n) in names.iter().enumerate() {
            assert_eq!(f.first_or_insert((1, i as u64), "later"), Some(n.clone()));
        }
        assert_eq!(f.first_or_insert((2, 0), "other device"), None);
        // Front coding keeps far less than the names' text.
        let whole: usize = names.iter().map(String::len).sum();
        assert!(f.text.len() < whole / 2, "{} of {whole}", f.text.len());
    }

    #[test]
    fn fingerprints_say_new_once_and_stay_near_eight_bytes_each() {
        let mut f = Fingerprints::default();
        let mut all = HashSet::new();
        // A scrambled sequence with repeats, across many merges.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..50_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let fp = if i % 5 == 4 { x % 4000 } else { x };
            assert_eq!(f.insert(fp), all.insert(fp), "{i}: {fp}");
        }
        for fp in &all {
            assert!(!f.insert(*fp));
        }
        assert_eq!(f.sorted.len() + f.recent.len(), all.len());
        assert!(f.sorted.is_sorted());
        assert!(f.sorted.capacity() <= all.len());
        // The newest fingerprints never pass an eighth of the run, or 1024.
        assert!(f.recent.len() < Fingerprints::RECENT.max(f.sorted.len() / 8));
    }

    #[test]
    fn names_are_kept_only_once_a_file_is_met_again() {
        let mut f = FirstNames::default();
        let never = || -> Vec<((u64, u64), String)> { panic!("no second name yet") };
        for i in 0..100u64 {
            assert_eq!(f.first_or_insert((7, i), &format!("f{i:03}"), never), None);
        }
        assert!(matches!(f, FirstNames::Fingerprints(..)));
        // The walk so far, read again: every earlier name of a linked file.
        let earlier = || (0..100u64).map(|i| ((7, i), format!("f{i:03}"))).collect();
        assert_eq!(
            f.first_or_insert((7, 42), "g", earlier).as_deref(),
            Some("f042")
        );
        assert!(matches!(f, FirstNames::Names(_)));
        assert_eq!(
            f.first_or_insert((7, 3), "h", never).as_deref(),
            Some("f003")
        );
        assert_eq!(f.first_or_insert((8, 3), "i", never), None);
        assert_eq!(f.first_or_insert((8, 3), "j", never).as_deref(), Some("i"));
    }
}
