use super::*;
use std::path::Path;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/bin")
            .join(name),
    )
    .unwrap()
}

#[test]
fn objects_across_search_windows_are_found_and_every_window_is_released() {
    let co = fixture("vadd-gfx90a.co");
    let b = fixture("kernels.hipfb");
    // A range starting at 4096: windows end where the file's folios do. The code
    // object's 0x7f ends the first window (its `ELF` starts the second), the
    // bundle's magic straddles the end of the second.
    let start = 4096;
    let mut data = vec![0x11u8; SEARCH_WINDOW - 1];
    let co_at = data.len();
    data.extend_from_slice(&co);
    data.resize(2 * SEARCH_WINDOW - 10, 0x22);
    let b_at = data.len();
    data.extend_from_slice(&b);
    data.resize(data.len() + 5000, 0x33);
    let ranges = vec![(
        ".rodata".to_string(),
        start as u64,
        (data.len() - start) as u64,
    )];
    let windows = std::cell::RefCell::new(Vec::new());
    let (found, note) = find_releasing(&data, &ranges, &|o, l| windows.borrow_mut().push((o, l)));
    assert!(note.is_none());
    let at: Vec<u64> = found.iter().map(|e| e.offset).collect();
    assert_eq!(at, [co_at as u64, b_at as u64]);
    assert_eq!(found, find(&data, &ranges).0);
    // What reading the headers mapped goes first; the search's windows cover the
    // range once, in order, none larger than the bound; then what reading the
    // candidates touched goes, the range once more.
    let w = windows.into_inner();
    assert_eq!(w[0], (0, data.len()));
    let (search, after) = w[1..].split_at(3);
    assert_eq!(search[0].0, start);
    assert!(search.windows(2).all(|p| p[0].0 + p[0].1 == p[1].0));
    assert_eq!(search.last().map(|l| l.0 + l.1), Some(data.len()));
    assert!(search.iter().all(|l| l.1 <= SEARCH_WINDOW));
    assert_eq!(after.last(), Some(&(start, data.len() - start)));
}

#[test]
fn a_file_is_searched_with_positioned_reads_across_their_seams() {
    use std::io::Write;
    let co = fixture("vadd-gfx90a.co");
    let b = fixture("kernels.hipfb");
    let piece = SEARCH_PIECE;
    // A range at 4096 of the file: the code object's 0x7f ends the first piece
    // (its `ELF` starts the second), the bundle's magic straddles the end of the
    // second, a second code object starts the fourth.
    let start = 4096;
    let mut data = vec![0x11u8; start + piece - 1];
    let co_at = data.len();
    data.extend_from_slice(&co);
    data.resize(start + 2 * piece - 10, 0x22);
    let b_at = data.len();
    data.extend_from_slice(&b);
    data.resize(start + 3 * piece, 0x33);
    let co2_at = data.len();
    data.extend_from_slice(&co);
    data.resize(data.len() + 5000, 0x44);
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(&data).unwrap();
    let map = crate::fsutil::map_open_file(&file).unwrap();
    let ranges = vec![(
        ".rodata".to_string(),
        start as u64,
        (data.len() - start) as u64,
    )];
    let input = bundle::FileSection {
        map: &map,
        file: &file,
        at: 0,
    };
    let (found, note) = find_releasing(&map, &ranges, &input);
    assert!(note.is_none(), "{note:?}");
    let at: Vec<u64> = found.iter().map(|e| e.offset).collect();
    assert_eq!(at, [co_at as u64, b_at as u64, co2_at as u64]);
    assert_eq!(found, find(&data, &ranges).0);
    // The file cut short since it was mapped: the section cannot be read, and
    // says so (nothing of the map past the end is read).
    file.set_len((start + piece) as u64).unwrap();
    let (found, note) = find_releasing(&map, &ranges, &input);
    assert!(found.is_empty());
    assert!(note.is_some_and(|n| n.starts_with(".rodata: cannot be read")));
}

#[test]
fn tables_far_ahead_are_released_once_a_second_folio_is_read() {
    let span = crate::fsutil::FAULT_SPAN;
    let mut a = Ahead::default();
    // No table, or one in the candidate's own folio: nothing to release.
    assert!(!a.reads(10, None));
    assert!(!a.reads(10, Some((100, 64))));
    // The first folio ahead is kept, and again for a table in it.
    assert!(!a.reads(20, Some((3 * span, 64))));
    assert!(!a.reads(30, Some((3 * span + 100, 64))));
    // A second one: everything ahead goes, and nothing is kept.
    assert!(a.reads(40, Some((5 * span, 64))));
    assert!(!a.reads(50, Some((5 * span, 64))));
    // A table across two folios goes at once.
    assert!(a.reads(60, Some((2 * span - 10, 64))));
    // A folio kept ahead is forgotten once the candidates reach it.
    let mut a = Ahead::default();
    assert!(!a.reads(0, Some((span, 64))));
    assert!(!a.reads(span + 8, Some((2 * span, 64))));
}

#[test]
fn a_false_start_pointing_far_ahead_releases_what_it_read() {
    // Two headers of code objects (AMDGPU) whose section header tables lie in two
    // different folios far ahead, in a section of 12 MiB: after the second, all
    // ahead of it is released.
    let span = crate::fsutil::FAULT_SPAN;
    let mut data = vec![0u8; 6 * span];
    for (at, shoff) in [(4096usize, 4 * span), (8192, 5 * span)] {
        data[at..at + 7].copy_from_slice(b"\x7fELF\x02\x01\x01");
        data[at + 18..at + 20].copy_from_slice(&crate::codeobj::EM_AMDGPU.to_le_bytes());
        data[at + 40..at + 48].copy_from_slice(&(shoff as u64).to_le_bytes());
        data[at + 58..at + 60].copy_from_slice(&64u16.to_le_bytes());
        data[at + 60..at + 62].copy_from_slice(&1u16.to_le_bytes());
    }
    let ranges = vec![(".rodata".to_string(), 0, data.len() as u64)];
    let calls = std::cell::RefCell::new(Vec::new());
    let (found, _) = find_releasing(&data, &ranges, &|o, l| calls.borrow_mut().push((o, l)));
    assert!(found.is_empty());
    assert!(
        calls.borrow().contains(&(span, data.len() - span)),
        "{calls:?}"
    );
}

#[test]
fn false_starts_are_released_a_step_at_a_time() {
    // 4 MiB of data with a "CCOB" that is no bundle every KiB: thousands of
    // candidates read, their pages released behind the reader in a few calls.
    let mut data = vec![0u8; 4 << 20];
    for at in (0..data.len() - 4).step_by(1024) {
        data[at..at + 4].copy_from_slice(b"CCOB");
    }
    let ranges = vec![(".rodata".to_string(), 0, data.len() as u64)];
    let calls = std::cell::RefCell::new(Vec::new());
    let (found, _) = find_releasing(&data, &ranges, &|o, l| calls.borrow_mut().push((o, l)));
    assert!(found.is_empty());
    let calls = calls.into_inner();
    // The headers' pages, the search windows, a release per step behind the
    // candidates, the section.
    assert_eq!(calls[0], (0, data.len()));
    let calls = &calls[1..];
    let windows = data.len().div_ceil(SEARCH_WINDOW);
    assert!(calls[..windows].iter().all(|c| c.1 <= SEARCH_WINDOW));
    let steps = &calls[windows..calls.len() - 1];
    assert_eq!(steps.len(), (4 << 20) / RELEASE_STEP - 1, "{calls:?}");
    assert!(steps.windows(2).all(|p| p[0].0 + p[0].1 == p[1].0));
    assert_eq!(calls.last(), Some(&(0, data.len())));
}

#[test]
fn objects_are_found_anywhere_in_the_bytes_and_bounded() {
    let co = fixture("vadd-gfx90a.co");
    let b = fixture("kernels.hipfb");
    let mut data = vec![0x55u8; 100];
    data.extend_from_slice(&co);
    data.extend_from_slice(b"\x7fELF\x02\x01junk that is not a code object");
    let at = data.len();
    data.extend_from_slice(&b);
    data.extend_from_slice(b"CCOB and not a bundle");
    let ranges = vec![("file".to_string(), 0, data.len() as u64)];
    let (found, note) = find(&data, &ranges);
    assert!(note.is_none());
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!((found[0].offset, found[0].size), (100, co.len() as u64));
    assert_eq!(found[0].format, EmbeddedFormat::CodeObject);
    assert_eq!(found[0].targets[0].arch, "gfx90a:xnack+");
    assert_eq!(found[1].offset, at as u64);
    assert_eq!(found[1].format, EmbeddedFormat::Bundle);
    assert_eq!(found[1].index, 1);
    // The code objects inside the bundle are not counted again.
    assert!(found[1].targets.len() >= 2);
    // Past the bound: listed up to it, and said.
    let (some, note) = find_at_most(&data, &ranges, 1, &|_, _| {});
    assert_eq!(some.len(), 1);
    assert_eq!(
        note.as_deref(),
        Some("more than 1 embedded objects; the rest are not listed")
    );
    // A truncated object is not an object.
    let cut = &data[..100 + co.len() / 2];
    assert!(
        find(cut, &[("file".into(), 0, cut.len() as u64)])
            .0
            .is_empty()
    );
}

#[test]
fn ranges_skip_what_hip_owns() {
    let lib = fixture("libvadd.so");
    let r = data_ranges(&lib);
    assert!(r.iter().any(|(n, ..)| n == ".rodata"), "{r:?}");
    assert!(r.iter().all(|(n, ..)| !HIP_SECTIONS.contains(&n.as_str())));
    // The fat binary's own bundles are not "embedded".
    assert!(find(&lib, &r).0.is_empty());
    assert!(find(&lib, &deep_ranges(&lib)).0.is_empty());
}

/// A false start whose header names hundreds of note sections over the same bytes,
/// each of another size: read from the file, its copies stop at
/// `CANDIDATE_COPIES` and the rest is read through the map (and said, for its
/// release), with the same answer as the search of the bytes in memory.
#[test]
fn a_candidate_read_from_its_file_copies_a_bounded_amount() {
    use std::io::Write;
    let n: u64 = 300;
    let notes_at = 64 + n * 64;
    let mut data = vec![0u8; 64];
    data[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x40");
    data[8] = 2; // code object v4
    data[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
    data[18..20].copy_from_slice(&224u16.to_le_bytes()); // EM_AMDGPU
    data[20..24].copy_from_slice(&1u32.to_le_bytes());
    data[40..48].copy_from_slice(&64u64.to_le_bytes()); // e_shoff
    data[48..52].copy_from_slice(&0x3fu32.to_le_bytes()); // gfx90a
    data[52..54].copy_from_slice(&64u16.to_le_bytes());
    data[54..56].copy_from_slice(&56u16.to_le_bytes());
    data[58..60].copy_from_slice(&64u16.to_le_bytes());
    data[60..62].copy_from_slice(&(n as u16).to_le_bytes());
    data[62..64].copy_from_slice(&1u16.to_le_bytes()); // names: zeros
    for i in 1..=n {
        // SHT_NOTE at `notes_at`, 12 * i bytes: i empty notes.
        let mut sh = [0u8; 64];
        sh[4..8].copy_from_slice(&7u32.to_le_bytes());
        sh[24..32].copy_from_slice(&notes_at.to_le_bytes());
        sh[32..40].copy_from_slice(&(12 * i).to_le_bytes());
        sh[48..56].copy_from_slice(&4u64.to_le_bytes());
        data.extend_from_slice(&sh);
    }
    data.resize((notes_at + 12 * n) as usize, 0);
    assert!(
        (1..=n).map(|i| 12 * i).sum::<u64>() > super::CANDIDATE_COPIES,
        "the sections must ask for more than the bound"
    );
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(&data).unwrap();
    let map = crate::fsutil::map_open_file(&file).unwrap();
    let in_memory = super::object_at(&data, 0);
    assert!(
        in_memory.is_some(),
        "a code object for gfx90a without metadata"
    );
    match super::code_object_in_file(&file, 0, &map) {
        super::Read::Object(found, mapped) => {
            assert_eq!(found, in_memory);
            let (from, to) = mapped.expect("reads past the bound are the map's");
            assert!(from >= notes_at && to <= data.len() as u64, "{from}..{to}");
        }
        super::Read::NotElf => panic!("an ELF candidate"),
    }
}

#[test]
fn a_header_whose_table_no_code_object_has_is_no_candidate() {
    // A gfx90a header whose table lies inside the data: read with a few sections or
    // as many as the bound, not with more, nor with entries of another size or the
    // count elsewhere.
    let header = |shnum: u16, shentsize: u16, shoff: u64| {
        let mut d = vec![0u8; 64];
        d[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x40");
        d[8] = 2;
        d[16..18].copy_from_slice(&3u16.to_le_bytes());
        d[18..20].copy_from_slice(&224u16.to_le_bytes());
        d[20..24].copy_from_slice(&1u32.to_le_bytes());
        d[40..48].copy_from_slice(&shoff.to_le_bytes());
        d[48..52].copy_from_slice(&0x3fu32.to_le_bytes());
        d[52..54].copy_from_slice(&64u16.to_le_bytes());
        d[54..56].copy_from_slice(&56u16.to_le_bytes());
        d[58..60].copy_from_slice(&shentsize.to_le_bytes());
        d[60..62].copy_from_slice(&shnum.to_le_bytes());
        d.resize(
            64 + usize::from(shnum) * usize::from(shentsize.max(64)) + 64,
            0,
        );
        d
    };
    let reach = |d: Vec<u8>| table_reach(d.as_slice());
    assert_eq!(reach(header(4, 64, 64)), Some((64, 4 * 64)));
    let most = usize::from(MAX_SECTIONS);
    assert_eq!(reach(header(MAX_SECTIONS, 64, 64)), Some((64, most * 64)));
    assert_eq!(reach(header(MAX_SECTIONS + 1, 64, 64)), None);
    assert_eq!(reach(header(4, 768, 64)), None);
    assert_eq!(reach(header(0, 64, 64)), None, "the count elsewhere");
    assert_eq!(reach(header(0, 64, 0)), Some((0, 0)), "no table at all");
    // And so no object: the search does not read such a table.
    assert!(object_at(&header(MAX_SECTIONS + 1, 64, 64), 0).is_none());
}
