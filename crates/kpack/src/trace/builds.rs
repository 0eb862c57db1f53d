//! Raw lines into builds: epoch traces split where a name is built again, jobs
//! grouped by hash, objects and archs numbered.

use super::*;

/// `name` split at its last `::` (a byte search from the end: the step is short).
fn split_step(name: &str) -> Option<(&str, &str)> {
    let b = name.as_bytes();
    let mut i = b.len();
    while i >= 2 {
        i -= 1;
        if b[i] == b':' && b[i - 1] == b':' {
            return Some((&name[..i - 1], &name[i + 1..]));
        }
    }
    None
}

/// A 64-bit hash of a string (for sets and maps keyed by names).
fn hash64(s: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = FxHasher::default();
    s.hash(&mut h);
    h.finish()
}

/// For each line, the previous line whose name has the same 64-bit hash (or
/// `u32::MAX`). The lines are scattered by the hash's top bits into buckets that each
/// fit in cache, then each bucket is walked in line order with a small map: a
/// million-entry set probed at random was a third of the parse time.
fn previous_same_name(rb: &RawBuild) -> Vec<u32> {
    let n = rb.lines.len();
    let hashes: Vec<u64> = rb
        .lines
        .iter()
        .map(|l| hash64(l.text.name(&rb.text)))
        .collect();
    let bits = (n / 4096)
        .max(1)
        .next_power_of_two()
        .trailing_zeros()
        .min(10);
    let bucket = |h: u64| {
        if bits == 0 {
            0
        } else {
            (h >> (64 - bits)) as usize
        }
    };
    let mut offsets = vec![0usize; (1 << bits) + 1];
    for &h in &hashes {
        offsets[bucket(h) + 1] += 1;
    }
    for b in 1..offsets.len() {
        offsets[b] += offsets[b - 1];
    }
    let mut fill = offsets.clone();
    let mut order = vec![0u32; n];
    for (i, &h) in hashes.iter().enumerate() {
        let b = bucket(h);
        order[fill[b]] = i as u32;
        fill[b] += 1;
    }
    let mut prev = vec![u32::MAX; n];
    let mut last: FxHashMap<u64, u32> = FxHashMap::default();
    for w in offsets.windows(2) {
        last.clear();
        for &i in &order[w[0]..w[1]] {
            if let Some(p) = last.insert(hashes[i as usize], i) {
                prev[i as usize] = p;
            }
        }
    }
    prev
}

/// Epoch logs: a new build starts at a line whose name was already built in the
/// current build (phc appends out of order, so end order says nothing).
pub(super) fn split_epoch(rb: RawBuild) -> Vec<RawBuild> {
    // More lines than u32 indices hold cannot come from a trace of at most MAX_TRACE
    // bytes; keep such a build whole rather than guess.
    if rb.lines.len() < 2 || rb.lines.len() >= u32::MAX as usize {
        return vec![rb];
    }
    let prev = previous_same_name(&rb);
    let name = |i: usize| rb.lines[i].text.name(&rb.text);
    let mut starts = vec![0usize];
    for i in 1..rb.lines.len() {
        let from = starts[starts.len() - 1];
        // Walk back along equal hashes while still in this build; names are compared
        // so a hash collision cannot split a build.
        let mut p = prev[i];
        while p != u32::MAX && p as usize >= from {
            if name(p as usize) == name(i) {
                starts.push(i);
                break;
            }
            p = prev[p as usize];
        }
    }
    if starts.len() == 1 {
        return vec![rb];
    }
    starts.push(rb.lines.len());
    starts
        .windows(2)
        .map(|w| {
            let part = &rb.lines[w[0]..w[1]];
            let t0 = part[0].text.at;
            let last = part[part.len() - 1].text;
            let t1 = last.at + last.name_len as usize + last.hash_len as usize;
            RawBuild {
                lines: part
                    .iter()
                    .map(|l| Job {
                        text: Text {
                            at: l.text.at - t0,
                            ..l.text
                        },
                        ..*l
                    })
                    .collect(),
                text: rb.text[t0..t1].to_string(),
            }
        })
        .collect()
}

pub(super) fn build_from(rb: RawBuild, epoch: bool) -> Build {
    let RawBuild {
        lines: mut jobs,
        text,
    } = rb;
    let base = if epoch {
        jobs.iter().map(|j| j.start).min().unwrap_or(0)
    } else {
        0
    };
    if base != 0 {
        for j in &mut jobs {
            j.start -= base;
            j.end -= base;
        }
    }
    // Lines with the same hash, start and end are one multi-output job: sort by time
    // (line numbers are unique, so the order is total) and merge within each group of
    // equal times, in place.
    let key = |j: &Job| (j.start, j.end, j.line);
    if !jobs.is_sorted_by_key(key) {
        jobs.sort_unstable_by_key(key);
    }
    let mut more_names: Vec<Vec<Text>> = Vec::new();
    let mut kept = 0;
    let mut group_from = 0;
    let mut big: (usize, FxHashMap<u64, usize>) = (usize::MAX, FxHashMap::default());
    for r in 0..jobs.len() {
        let l = jobs[r];
        let hash = l.text.hash(&text);
        if kept == 0 || (jobs[kept - 1].start, jobs[kept - 1].end) != (l.start, l.end) {
            group_from = kept;
        }
        let same = if hash.is_empty() {
            None
        } else if kept - group_from <= 16 {
            jobs[group_from..kept]
                .iter()
                .position(|j| j.text.hash(&text) == hash)
                .map(|k| group_from + k)
        } else {
            // A big group of equal times (a recompacted or synthetic log): index it.
            if big.0 != group_from {
                big = (group_from, FxHashMap::default());
                for (k, j) in jobs[group_from..kept].iter().enumerate() {
                    big.1
                        .entry(hash64(j.text.hash(&text)))
                        .or_insert(group_from + k);
                }
            }
            big.1
                .get(&hash64(hash))
                .copied()
                .filter(|&k| jobs[k].text.hash(&text) == hash)
        };
        match same {
            Some(k) => {
                let j = &mut jobs[k];
                if j.more == NO_MORE {
                    j.more = u32::try_from(more_names.len()).unwrap_or(NO_MORE - 1);
                    more_names.push(Vec::new());
                }
                if let Some(m) = more_names.get_mut(j.more as usize) {
                    m.push(l.text);
                }
            }
            None => {
                if big.0 == group_from && kept - group_from > 16 {
                    big.1.entry(hash64(hash)).or_insert(kept);
                }
                jobs[kept] = l;
                kept += 1;
            }
        }
    }
    jobs.truncate(kept);
    // Steps name their object; objects with device steps make their plain-named job
    // the host compile. Objects and archs are numbered here, once, so readers index
    // instead of hashing names.
    let mut object_at: FxHashMap<&str, u32> = FxHashMap::default();
    let mut objects: Vec<(usize, usize)> = Vec::new();
    let mut arch_at: FxHashMap<&str, u32> = FxHashMap::default();
    let mut archs: Vec<(usize, usize)> = Vec::new();
    let mut last: (&str, u32) = ("", NONE);
    let mut plain = false;
    for j in &mut jobs {
        let name = j.text.name(&text);
        let Some((o, step)) = split_step(name) else {
            plain = true;
            continue;
        };
        // Steps of one object are usually neighbours: look it up once per run.
        if o != last.0 || last.1 == NONE {
            let id = match object_at.get(o) {
                Some(&id) => id,
                None => {
                    let id = u32::try_from(objects.len()).unwrap_or(NONE);
                    if id != NONE {
                        objects.push((j.text.at, o.len()));
                        object_at.insert(o, id);
                    }
                    id
                }
            };
            last = (o, id);
        }
        j.object = last.1;
        if step == "bundle" {
            j.kind = JobKind::Bundle;
        } else {
            j.kind = JobKind::Device;
            j.arch = match arch_at.get(step) {
                Some(&id) => id,
                None => {
                    let id = u32::try_from(archs.len()).unwrap_or(NONE);
                    if id != NONE {
                        archs.push((j.text.at + o.len() + 2, step.len()));
                        arch_at.insert(step, id);
                    }
                    id
                }
            };
        }
    }
    if plain {
        for j in &mut jobs {
            if j.kind == JobKind::Other
                && let Some(&id) = object_at.get(j.text.name(&text))
            {
                j.kind = JobKind::Host;
                j.object = id;
            }
        }
    }
    drop((object_at, arch_at));
    Build {
        jobs,
        epoch_base_ms: base,
        text,
        more_names,
        objects,
        archs,
    }
}
