use super::parse::{int, plain_fields};
use super::*;

#[test]
fn headerless_phc_lines_with_epoch_times_and_kinds() {
    let t = parse(
        b"1700000000000\t1700000002000\t1700000002000\ta.o::gfx900\th1\n\
          1700000000000\t1700000003000\t1700000003000\ta.o::gfx942\th2\n\
          1700000003000\t1700000003100\t1700000003100\ta.o::bundle\th3\n\
          1700000003100\t1700000004000\t1700000004000\ta.o\th4\n\
          1700000000500\t1700000001500\t1700000001500\tlink.exe\th5\n",
    );
    assert!(t.epoch && !t.header && t.version == 7);
    assert_eq!(t.builds.len(), 1);
    let b = &t.builds[0];
    assert_eq!(b.jobs[0].start, 0);
    let kinds: Vec<&str> = b.jobs.iter().map(|j| j.kind.category()).collect();
    assert_eq!(kinds, vec!["device", "device", "other", "bundle", "host"]);
    assert_eq!(b.jobs[1].kind, JobKind::Device);
    assert_eq!(b.object(&b.jobs[1]), Some("a.o"));
    assert_eq!(b.arch(&b.jobs[1]), Some("gfx942"));
    assert_eq!(b.object(&b.jobs[4]), Some("a.o"), "host compile of a.o");
    assert_eq!(b.object(&b.jobs[2]), None);
}

#[test]
fn ninjatracing_vectors_restart_and_multi_output() {
    // end goes backwards in a build-relative log: a new build.
    let t = parse(
        b"# ninja log v5\n100\t200\t0\tmy_output\tdeadbeef\n50\t120\t0\tmy_first_output\t0afef\n",
    );
    assert_eq!(t.builds.len(), 2);
    assert_eq!(
        t.builds[1].names(&t.builds[1].jobs[0]).collect::<Vec<_>>(),
        vec!["my_first_output"]
    );
    let t = parse(b"# ninja log v6\n1\t5\t0\toutput\tab\n1\t5\t0\tother_output\tab\n# comment\n");
    assert_eq!(t.builds[0].jobs.len(), 1);
    assert_eq!(
        t.builds[0].names(&t.builds[0].jobs[0]).collect::<Vec<_>>(),
        vec!["output", "other_output"]
    );
}

#[test]
fn epoch_logs_split_builds_on_repeated_names_not_on_end_order() {
    let t = parse(
        b"1700000000000\t1700000005000\t0\ta.o\th\n\
          1700000000000\t1700000004000\t0\tb.o\th2\n\
          1700000100000\t1700000105000\t0\ta.o\th\n",
    );
    assert_eq!(
        t.builds.len(),
        2,
        "out-of-order ends stay one build; a repeated name starts another"
    );
    assert_eq!(t.builds[1].jobs[0].start, 0);
}

#[test]
fn bad_lines_are_numbered_diagnostics_and_the_rest_is_read() {
    let t = parse(b"# ninja log v7\n1\t2\t0\ta\th\nx\t2\t0\tb\th\n5\t3\t0\tc\th\n1\t2\t0\n\xff\xfe\n7\t9\t0\td\th\r\n# ninja log v9\n");
    assert_eq!(t.builds[0].jobs.len(), 2);
    let lines: Vec<u64> = t.diagnostics.iter().map(|d| d.line).collect();
    assert_eq!(lines, vec![3, 4, 5, 6, 8]);
    assert!(t.diagnostics[1].message.contains("before it starts"));
    assert!(t.diagnostics[4].message.contains("unsupported log version"));
}

#[test]
fn partial_last_line_waits_for_its_newline() {
    let mut p = TraceParser::new();
    p.feed(b"1\t2\t0\ta\th\n3\t4\t0\tb");
    assert_eq!(p.trace().builds[0].jobs.len(), 1);
    assert!(p.trace().pending_bytes > 0);
    p.feed(b"b\th\n");
    let t = p.trace();
    assert_eq!(
        t.builds[0].names(&t.builds[0].jobs[1]).collect::<Vec<_>>(),
        vec!["bb"]
    );
    assert_eq!(t.pending_bytes, 0);
}

/// The builds of an epoch log the plain way: a set of the names of the current
/// build, cleared at each repeat.
fn naive_epoch_builds(names: &[String]) -> Vec<Vec<String>> {
    let mut builds: Vec<Vec<String>> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for n in names {
        if builds.is_empty() || !seen.insert(n.clone()) {
            builds.push(Vec::new());
            seen.clear();
            seen.insert(n.clone());
        }
        builds.last_mut().unwrap().push(n.clone());
    }
    builds
}

proptest::proptest! {
    #[test]
    fn epoch_builds_split_where_a_name_repeats(
        picks in proptest::collection::vec(0u8..40, 0..300),
        chunk in 1usize..200,
    ) {
        let names: Vec<String> = picks.iter().map(|p| format!("o{p}.o::gfx90{}", p % 3)).collect();
        let mut file = Vec::new();
        for (i, n) in names.iter().enumerate() {
            let t = 1_700_000_000_000i64 + i as i64;
            file.extend_from_slice(format!("{t}\t{}\t0\t{n}\th{i}\n", t + 5).as_bytes());
        }
        // Fed in pieces, as a followed file arrives.
        let mut p = TraceParser::new();
        for c in file.chunks(chunk) {
            p.feed(c);
        }
        let t = p.into_trace();
        let got: Vec<Vec<String>> = t
            .builds
            .iter()
            .map(|b| {
                let mut js: Vec<&Job> = b.jobs.iter().collect();
                js.sort_by_key(|j| j.line);
                js.iter().map(|j| b.name(j).to_string()).collect()
            })
            .collect();
        proptest::prop_assert_eq!(got, naive_epoch_builds(&names));
    }
}

#[test]
fn later_epoch_builds_keep_their_own_names_and_hashes() {
    let t = parse(
        b"1700000000000\t1700000000010\t0\ta.o::gfx900\tA1\n\
          1700000000000\t1700000000020\t0\ta.o\tA2\n\
          1700000001000\t1700000001010\t0\ta.o::gfx900\tB1\n\
          1700000002000\t1700000002010\t0\ta.o::gfx900\tC1\n\
          1700000002000\t1700000002030\t0\tb.o::bundle\tC2\n",
    );
    assert_eq!(t.builds.len(), 3);
    let b = &t.builds[2];
    assert_eq!(b.epoch_base_ms, 1_700_000_002_000);
    let got: Vec<(&str, &str, Option<&str>)> = b
        .jobs
        .iter()
        .map(|j| (b.name(j), b.hash(j), b.object(j)))
        .collect();
    assert_eq!(
        got,
        vec![
            ("a.o::gfx900", "C1", Some("a.o")),
            ("b.o::bundle", "C2", Some("b.o"))
        ]
    );
    assert_eq!(t.builds[0].jobs[1].kind, JobKind::Host);
}

#[test]
fn many_outputs_of_one_edge_merge_through_the_index() {
    // 40 lines with equal times: 20 edges of two outputs each, the second output of
    // each edge listed after all the first ones (the indexed path past 16).
    let mut file = String::new();
    for k in 0..20 {
        file.push_str(&format!("1\t9\t0\tfirst{k}\th{k}\n"));
    }
    for k in 0..20 {
        file.push_str(&format!("1\t9\t0\tsecond{k}\th{k}\n"));
    }
    let t = parse(file.as_bytes());
    let b = &t.builds[0];
    assert_eq!(b.jobs.len(), 20);
    for (k, j) in b.jobs.iter().enumerate() {
        assert_eq!(
            b.names(j).collect::<Vec<_>>(),
            vec![format!("first{k}"), format!("second{k}")]
        );
        assert_eq!(b.label(j), format!("first{k}, second{k}"));
    }
}

proptest::proptest! {
    /// The one-pass reader of common lines agrees with the general one.
    #[test]
    fn plain_lines_read_as_the_general_path_reads_them(
        line in "[0-9 +-]{0,4}\t[0-9 ]{0,4}\t[0-9x-]{0,3}\t[a-z:\t]{0,6}\t[a-z\t ]{0,4}",
    ) {
        let raw = line.as_bytes();
        let mut p = TraceParser::new();
        if let Some(f) = plain_fields(raw) {
            let g = p.general_fields(1, raw);
            proptest::prop_assert!(g.is_some(), "general path refused {line:?}");
            let g = g.unwrap();
            proptest::prop_assert_eq!((f.start, f.end, f.rest, f.tab), (g.start, g.end, g.rest, g.tab));
        }
    }
}

#[test]
fn objects_and_archs_are_numbered_once_per_build() {
    let t = parse(
        b"1\t5\t0\ta.o::gfx900\th1\n1\t6\t0\tb.o::gfx942\th2\n2\t7\t0\ta.o::gfx942\th3\n\
          7\t8\t0\ta.o::bundle\th4\n8\t9\t0\ta.o\th5\n9\t10\t0\tlink\th6\n",
    );
    let b = &t.builds[0];
    assert_eq!(b.object_count(), 2);
    assert_eq!(b.arch_count(), 2);
    let idx: Vec<(Option<usize>, Option<usize>)> = b
        .jobs
        .iter()
        .map(|j| (b.object_index(j), b.arch_index(j)))
        .collect();
    assert_eq!(
        idx,
        vec![
            (Some(0), Some(0)),
            (Some(1), Some(1)),
            (Some(0), Some(1)),
            (Some(0), None),
            (Some(0), None),
            (None, None)
        ]
    );
    assert_eq!((b.object_name(1), b.arch_name(1)), ("b.o", "gfx942"));
    assert_eq!(b.object_name(9), "", "out of range reads as empty");
}

#[test]
fn a_long_line_is_skipped_whether_it_arrives_whole_or_in_pieces() {
    let mut file = b"1\t2\t0\ta\th\n3\t4\t0\t".to_vec();
    file.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
    file.extend_from_slice(b"\th\n5\t6\t0\tb\th\n");
    let whole = parse(&file);
    let mut p = TraceParser::new();
    for c in file.chunks(4096) {
        p.feed(c);
    }
    p.finish();
    for t in [whole, p.into_trace()] {
        let b = &t.builds[0];
        let names: Vec<&str> = b.jobs.iter().map(|j| b.name(j)).collect();
        assert_eq!(names, vec!["a", "b"]);
        assert_eq!(t.diagnostics.len(), 1);
        assert_eq!(t.diagnostics[0].line, 2);
        assert!(t.diagnostics[0].message.contains("longer than"));
    }
}

#[test]
fn a_job_stays_small() {
    // A million-line trace holds a million of these (the module doc says 56).
    assert!(
        std::mem::size_of::<Job>() <= 56,
        "{}",
        std::mem::size_of::<Job>()
    );
}

#[test]
fn integers_as_str_parse_reads_them() {
    for s in ["0", "17", " 42 ", "+5", "-3", "9223372036854775807"] {
        assert_eq!(int(s.as_bytes()), s.trim().parse::<i64>().ok(), "{s:?}");
    }
    for s in [
        "",
        " ",
        "-",
        "+",
        "1x",
        "x1",
        "1 2",
        "9223372036854775808",
        "0x10",
        "１",
    ] {
        assert_eq!(int(s.as_bytes()), None, "{s:?}");
    }
}

#[test]
fn detection() {
    assert!(looks_like_trace(b"# ninja log v5\n"));
    assert!(looks_like_trace(
        b"1700000000000\t1700000002000\t1700000002000\ta.o::gfx900\th1\n"
    ));
    assert!(!looks_like_trace(b"hello\tworld\n"));
    assert!(!looks_like_trace(b"\x7fELF"));
}
