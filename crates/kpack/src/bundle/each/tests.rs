//! Tests of [`super`]: code objects one at a time, streamed, released, read from a file.

use super::super::testutil::plain_bundle;
use super::super::walk_section;
use super::*;

#[test]
fn wanted_names_the_target_of_a_wanted_entry_only() {
    let entry = |triple: &str| BundleEntry {
        id: super::super::EntryId::parse(triple),
        offset: 0,
        size: 1,
    };
    let w = Wanted::new([(0, "gfx90a:xnack+"), (1, "gfx906")]);
    let arch = |b, triple| w.arch(b, &entry(triple));
    assert_eq!(
        arch(0, "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+").as_deref(),
        Some("gfx90a:xnack+")
    );
    assert_eq!(
        arch(1, "hipv4-amdgcn-amd-amdhsa--gfx906").as_deref(),
        Some("gfx906")
    );
    assert_eq!(
        arch(0, "hipv4-amdgcn-amd-amdhsa--gfx906"),
        None,
        "another bundle's"
    );
    assert_eq!(
        arch(0, "hipv4-amdgcn-amd-amdhsa--gfx90a"),
        None,
        "no feature"
    );
    assert_eq!(arch(0, "host-x86_64-unknown-linux-gnu"), None, "the host");
}

/// A bundle of a host entry and three targets, one larger than [`HEAP_MAX`] (its
/// buffer is a map), with bytes that differ along each payload.
fn sample() -> Vec<u8> {
    let pattern = |n: usize, k: u8| (0..n).map(|i| (i / 7) as u8 ^ k).collect::<Vec<u8>>();
    let (a, b, c) = (
        pattern(5000, 1),
        pattern(HEAP_MAX + 4321, 2),
        pattern(3000, 3),
    );
    plain_bundle(
        &[
            ("host-x86_64-unknown-linux-gnu-", b""),
            ("hipv4-amdgcn-amd-amdhsa--gfx1100", &a),
            ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", &b),
            ("hipv4-amdgcn-amd-amdhsa--gfx942", &c),
        ],
        4096,
    )
}

fn section(method: Compression) -> Vec<u8> {
    match method {
        Compression::None => sample(),
        m => ccob::encode(&sample(), 3, m),
    }
}

/// Every code object of a bundle, plain and compressed with zstd and zlib,
/// streamed one at a time: the same bytes in the same order as decoding it whole
/// gives.
#[test]
fn streamed_code_objects_are_those_of_the_whole_bundle() {
    for method in [Compression::None, Compression::Zstd, Compression::Zlib] {
        let sec = section(method);
        let b = &walk_section(&sec).unwrap()[0];
        let un = b.uncompressed(&sec, u64::MAX).unwrap();
        let whole: Vec<(String, Vec<u8>)> = (b.code_objects(&un).unwrap().into_iter())
            .map(|(e, d)| (e.id.triple.clone(), d.to_vec()))
            .collect();
        assert_eq!(whole.len(), 3, "{method:?}");
        let mut streamed = Vec::new();
        b.each_code_object(&sec, u64::MAX, |e, d| {
            streamed.push((e.id.triple.clone(), d.to_vec()));
            Ok::<(), ()>(())
        })
        .unwrap()
        .unwrap();
        assert_eq!(streamed, whole, "{method:?}");
    }
}

/// The bundle of `sec` and its code objects, decoded whole.
fn bundle_and_code_objects(sec: &[u8]) -> (BundleInfo, Vec<Vec<u8>>) {
    let b = walk_section(sec).unwrap().remove(0);
    let un = b.uncompressed(sec, u64::MAX).unwrap();
    let whole = (b.code_objects(&un).unwrap().into_iter())
        .map(|(_, d)| d.to_vec())
        .collect();
    (b, whole)
}

/// A section read from its file ([`FileSection`]): the bytes handed on are the
/// file's, read with positioned reads, not the slice's (here another file's map
/// of different bytes), for plain and compressed bundles; a file cut short is
/// the bundle's error, not a panic or bytes of the slice.
#[test]
fn a_file_section_is_read_from_the_file_not_the_map() {
    use std::io::{Read, Write};
    for method in [Compression::None, Compression::Zstd, Compression::Zlib] {
        let sec = section(method);
        let (b, whole) = bundle_and_code_objects(&sec);
        let b = &b;
        // The map holds the section with every code object's bytes flipped (the
        // headers kept); the file holds the section as it is, 100 bytes in.
        let mut other = sec.clone();
        let payload = if method == Compression::None {
            4096
        } else {
            64
        };
        other[payload..].iter_mut().for_each(|x| *x ^= 0x5a);
        let mut mapped = tempfile::tempfile().unwrap();
        mapped.write_all(&[0; 100]).unwrap();
        mapped.write_all(&other).unwrap();
        let map = crate::fsutil::map_open_file(&mapped).unwrap();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&[0; 100]).unwrap();
        file.write_all(&sec).unwrap();
        let input = FileSection {
            map: &map,
            file: &file,
            at: 100,
        };
        let read = |input: &FileSection| {
            let mut got = Vec::new();
            let r = b.each_code_object_streamed(&map[100..], u64::MAX, input, |_, r| {
                assert!(r.in_place().is_none(), "{method:?}");
                let mut v = Vec::new();
                Ok(r.read_to_end(&mut v).map(|_| got.push(v)))
            });
            (r, got)
        };
        let (r, got) = read(&input);
        assert!(matches!(r, Ok(Ok(()))), "{method:?}");
        assert_eq!(got, whole, "{method:?}");
        // Cut short in the middle of the third code object's bytes.
        file.set_len(100 + sec.len() as u64 - 2000).unwrap();
        let (r, got) = read(&input);
        assert!(r.is_err() || matches!(r, Ok(Err(_))), "{method:?}");
        assert!(got.len() < 3 && got[..] == whole[..got.len()], "{method:?}");
    }
}

/// The first error `f` returns ends the walk.
#[test]
fn an_error_of_the_callback_stops_the_walk() {
    let sec = section(Compression::Zstd);
    let b = &walk_section(&sec).unwrap()[0];
    let mut calls = 0;
    let r = b.each_code_object(&sec, u64::MAX, |_, _| {
        calls += 1;
        Err("stop")
    });
    assert_eq!(r.unwrap(), Err("stop"));
    assert_eq!(calls, 1);
}

/// Code objects read as streams, in odd-sized pieces, some left unread: the
/// bytes of the whole bundle for those read, for plain and compressed bundles.
#[test]
fn code_objects_read_as_streams_are_those_of_the_whole_bundle() {
    use std::io::Read;
    for method in [Compression::None, Compression::Zstd, Compression::Zlib] {
        let sec = section(method);
        let (b, whole) = bundle_and_code_objects(&sec);
        let b = &b;
        let mut got = Vec::new();
        let mut n = 0;
        b.each_code_object_streamed(&sec, u64::MAX, &|_, _| {}, |_, r| {
            n += 1;
            if n == 2 && method != Compression::None {
                // Left unread: skipped.
                assert!(r.in_place().is_none());
                return Ok(Ok::<(), ()>(()));
            }
            let mut v = Vec::new();
            let mut piece = [0u8; 777];
            loop {
                let k = r.read(&mut piece).unwrap();
                if k == 0 {
                    break;
                }
                v.extend_from_slice(&piece[..k]);
            }
            assert_eq!(r.remaining(), 0);
            got.push(v);
            Ok(Ok(()))
        })
        .unwrap()
        .unwrap();
        let want: Vec<Vec<u8>> = match method {
            Compression::None => whole,
            _ => vec![whole[0].clone(), whole[2].clone()],
        };
        assert_eq!(got, want, "{method:?}");
    }
}

/// A code object read as a stream is released behind the reading, in steps of
/// [`STEP`], never ahead of it: a plain bundle's code object in place, a CCOB's
/// payload as it is decoded; all of it is released once read.
#[test]
fn what_a_stream_has_read_is_released_behind_it() {
    use std::cell::RefCell;
    use std::io::Read;
    // Bytes that do not compress, so that the payload is as long.
    let big = crate::testdata::noise(3 * STEP + 12_345);
    let plain = plain_bundle(
        &[
            ("host-x86_64-unknown-linux-gnu-", b""),
            ("hipv4-amdgcn-amd-amdhsa--gfx942", &big),
        ],
        4096,
    );
    for method in [Compression::None, Compression::Zstd] {
        let sec = match method {
            Compression::None => plain.clone(),
            m => ccob::encode(&plain, 1, m),
        };
        let b = &walk_section(&sec).unwrap()[0];
        let released = RefCell::new(Vec::<(usize, usize)>::new());
        let record = |o: usize, l: usize| released.borrow_mut().push((o, l));
        let mut read_all = 0u64;
        b.each_code_object_streamed(&sec, u64::MAX, &record, |e, r| {
            // Where this stream's bytes lie in the section: the code object's
            // (plain), the payload after the CCOB header (compressed).
            let start = match method {
                Compression::None => e.offset as usize,
                _ => ccob::parse_header(&sec).unwrap().header_len,
            };
            let mut piece = vec![0u8; 100_000];
            loop {
                let k = r.read(&mut piece).unwrap();
                if k == 0 {
                    break;
                }
                read_all += k as u64;
                let rel = released.borrow();
                let end = rel.iter().map(|&(o, l)| o + l).max().unwrap_or(start);
                assert!(rel.iter().all(|&(o, _)| o >= start), "{method:?}");
                if method == Compression::None {
                    let at = start + read_all as usize;
                    assert!(end <= at, "{method:?}: released ahead of the reading");
                    assert!(at - end < STEP, "{method:?}: {} behind", at - end);
                }
            }
            Ok(Ok::<(), ()>(()))
        })
        .unwrap()
        .unwrap();
        assert_eq!(read_all, big.len() as u64);
        // Stepwise while reading (not one release at the end), and all of it (a
        // payload's last step is the caller's, with the bundle).
        let rel = released.into_inner();
        assert!(rel.len() >= 2, "{method:?}: {rel:?}");
        let mut covered: Vec<(usize, usize)> = rel.iter().map(|&(o, l)| (o, o + l)).collect();
        covered.sort();
        let first = covered[0].0;
        let reach = covered.iter().fold(first, |reach, &(a, b)| {
            assert!(a <= reach, "{method:?}: a gap at {reach}");
            reach.max(b)
        });
        let want = match method {
            Compression::None => first + big.len(),
            _ => sec.len() - STEP,
        };
        assert!(
            reach >= want,
            "{method:?}: released up to {reach} of {want}"
        );
    }
}

/// A decoder failing under a stream: an I/O error to the reader, kept as the
/// bundle's error (which the walk returns whatever the reader made of it).
#[test]
fn a_decoder_failing_under_a_stream_is_kept_as_the_bundles_error() {
    use std::io::Read;
    struct Failing;
    impl Pull for Failing {
        fn pull(&mut self, _: &mut [u8]) -> FormatResult<usize> {
            Err(FormatError::new(
                7,
                "corrupt zstd payload: test".to_string(),
            ))
        }
    }
    let mut d = Failing;
    let mut r = CodeObject {
        from: From::Stream(&mut d),
        left: 10,
        error: None,
    };
    assert!(r.in_place().is_none());
    let e = r.read(&mut [0u8; 4]).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert!(e.to_string().contains("corrupt zstd payload"), "{e}");
    assert!(
        r.error
            .take()
            .is_some_and(|k| k.to_string().contains("test"))
    );
    assert_eq!(r.remaining(), 10);
}

/// A CCOB whose header declares more bytes than its payload holds: an error
/// naming both sizes, as decoding it whole gives; a limit below the declared
/// size is refused before any call.
#[test]
fn a_short_payload_is_an_error_and_a_limit_is_kept() {
    let raw = sample();
    let mut sec = ccob::encode(&raw, 3, Compression::Zstd);
    sec[16..24].copy_from_slice(&(raw.len() as u64 + 100).to_le_bytes());
    let b = &walk_section(&sec).unwrap()[0];
    assert!(b.uncompressed(&sec, u64::MAX).is_err());
    let mut calls = 0;
    let e = (b.each_code_object(&sec, u64::MAX, |_, _| {
        calls += 1;
        Ok::<(), ()>(())
    }))
    .unwrap_err();
    let want = format!(
        "decompresses to {} bytes, header says {}",
        raw.len(),
        raw.len() + 100
    );
    assert!(e.to_string().contains(&want), "{e}");
    assert_eq!(calls, 3, "the code objects before the end were handed on");

    let sec = section(Compression::Zlib);
    let b = &walk_section(&sec).unwrap()[0];
    let mut calls = 0;
    let e = (b.each_code_object(&sec, b.uncompressed_size - 1, |_, _| {
        calls += 1;
        Ok::<(), ()>(())
    }))
    .unwrap_err();
    assert!(e.to_string().contains("above the limit"), "{e}");
    assert_eq!(calls, 0);
}
