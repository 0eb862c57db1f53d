//! Which input file a mapped address belongs to, for the one failure a mapped read
//! cannot return as an error: a file that shrinks while it is mapped makes the next
//! read past its new end fault (SIGBUS). The program's SIGBUS handler (at the binary
//! edge) asks [`file_at`] which file that was, so the user reads "FILE changed while
//! being read" instead of a bare exit 135.
//!
//! The last [`SLOTS`] mappings are kept in a ring of atomics: recording one is a few
//! stores, looking one up reads atomics only (safe inside a signal handler). A live
//! mapping is always among the most recent ones covering its addresses, so the newest
//! slot that contains the address names it.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// Mappings remembered.
pub const SLOTS: usize = 512;
/// Bytes of a path kept (longer ones keep their end, which names the file).
pub const NAME: usize = 240;

static NEXT: AtomicUsize = AtomicUsize::new(0);
static START: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static LEN: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static NAME_LEN: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static NAMES: [[AtomicU8; NAME]; SLOTS] = [const { [const { AtomicU8::new(0) }; NAME] }; SLOTS];

/// Remember that `bytes` (a file map) are the contents of `path`.
pub fn note(bytes: &[u8], path: &std::path::Path) {
    let slot = NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS;
    START[slot].store(0, Ordering::Release);
    let name = path.as_os_str().as_encoded_bytes();
    let name = &name[name.len().saturating_sub(NAME)..];
    for (d, s) in NAMES[slot].iter().zip(name) {
        d.store(*s, Ordering::Relaxed);
    }
    NAME_LEN[slot].store(name.len(), Ordering::Relaxed);
    LEN[slot].store(bytes.len(), Ordering::Relaxed);
    START[slot].store(bytes.as_ptr() as usize, Ordering::Release);
    test_hook(path);
}

/// The path of the most recent mapping holding `addr`, copied into `out`; its length
/// (0 when none). Reads atomics only: callable from a signal handler.
pub fn file_at(addr: usize, out: &mut [u8; NAME]) -> usize {
    let next = NEXT.load(Ordering::Relaxed);
    for k in 1..=SLOTS.min(next) {
        let slot = (next - k) % SLOTS;
        let start = START[slot].load(Ordering::Acquire);
        let len = LEN[slot].load(Ordering::Relaxed);
        if start != 0 && addr >= start && addr - start < len.max(1) {
            let n = NAME_LEN[slot].load(Ordering::Relaxed).min(NAME);
            for (d, s) in out.iter_mut().zip(&NAMES[slot][..n]) {
                *d = s.load(Ordering::Relaxed);
            }
            return n;
        }
    }
    0
}

/// After `map` (of `file`) was read partly with positioned reads, which a shrink
/// makes fail as malformed data instead of faulting: a file now shorter than its map
/// is read through the map past its new end, which faults as any such read of the
/// map would, and the program's handler names the file. Returns the new length when
/// the file shrank and the read could not fault (the new end lies in the map's last
/// page), for the caller to report.
pub fn read_past_a_shrink(map: &[u8], file: &std::fs::File) -> Option<u64> {
    let now = file.metadata().ok()?.len();
    if now >= map.len() as u64 {
        return None;
    }
    // A page wholly past the end faults; the page size is 4 KiB or, on some hosts,
    // up to 64 KiB.
    for page in [4096u64, 65536] {
        let at = now.next_multiple_of(page);
        if let Some(b) = usize::try_from(at).ok().and_then(|at| map.get(at)) {
            std::hint::black_box(*b);
        }
    }
    Some(now)
}

/// The suite's way to shrink an input at the worst moment, just after it was mapped:
/// `KPACK_TUI_TEST_SHRINK_MAPPED=PATH` truncates that file (a copy the test owns) to
/// zero when it is first mapped, `PATH@N` when it is mapped the N-th time (a pack maps
/// a file in its scan, then again to pack it); with `KPACK_TUI_TEST_SHRINK_HALF` set,
/// to half its length instead of zero. Nothing else reads the variables.
fn test_hook(path: &std::path::Path) {
    static WANT: std::sync::OnceLock<Option<(std::ffi::OsString, usize)>> =
        std::sync::OnceLock::new();
    static SEEN: AtomicUsize = AtomicUsize::new(0);
    let want = WANT.get_or_init(|| {
        let v = std::env::var("KPACK_TUI_TEST_SHRINK_MAPPED").ok()?;
        Some(match v.rsplit_once('@') {
            Some((p, n)) if n.parse::<usize>().is_ok() => (p.into(), n.parse().unwrap_or(1)),
            _ => (v.into(), 1),
        })
    });
    if let Some((p, n)) = want
        && p.as_os_str() == path.as_os_str()
        && SEEN.fetch_add(1, Ordering::Relaxed) + 1 == *n
    {
        let half = std::env::var_os("KPACK_TUI_TEST_SHRINK_HALF").is_some();
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(if half { f.metadata()?.len() / 2 } else { 0 }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_mapping_holding_an_address_names_it() {
        let a = vec![0u8; 100];
        let b = vec![0u8; 10];
        note(&a, std::path::Path::new("/x/a.so"));
        note(&b, std::path::Path::new("/x/b.so"));
        let mut out = [0u8; NAME];
        let n = file_at(a.as_ptr() as usize + 50, &mut out);
        assert_eq!(&out[..n], b"/x/a.so");
        let n = file_at(b.as_ptr() as usize, &mut out);
        assert_eq!(&out[..n], b"/x/b.so");
        // A long path keeps its end.
        let long = format!("/{}/lib.so", "d".repeat(400));
        note(&a, std::path::Path::new(&long));
        let n = file_at(a.as_ptr() as usize, &mut out);
        assert!(
            std::str::from_utf8(&out[..n])
                .unwrap()
                .ends_with("d/lib.so")
        );
        assert_eq!(n, NAME);
    }
}
