//! Compile traces: a trace recorded from real hipcc steps, JSON analysis, Chrome
//! export checked against the trace-event schema, and bad inputs.

mod common;

use common::*;
use serde_json::Value;
use std::path::PathBuf;

fn fixture() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/traces/hipcc-2obj-4arch.trace")
}

/// The fixture's steps as the log has them: (start ms, end ms, name). The expected
/// figures below are computed from these, not taken from our output.
fn steps() -> Vec<(i64, i64, String)> {
    std::fs::read_to_string(fixture())
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[3].to_string(),
            )
        })
        .collect()
}

/// Milliseconds during which exactly `n` steps ran, for every `n` seen (a sweep
/// over the start and end points).
fn time_at_parallelism(steps: &[(i64, i64, String)]) -> std::collections::BTreeMap<usize, i64> {
    let mut points: Vec<(i64, i32)> = steps
        .iter()
        .flat_map(|(s, e, _)| [(*s, 1), (*e, -1)])
        .collect();
    points.sort();
    let mut at = std::collections::BTreeMap::new();
    let (mut running, mut last) = (0i32, points[0].0);
    for (t, d) in points {
        *at.entry(running as usize).or_insert(0) += t - last;
        running += d;
        last = t;
    }
    at.retain(|_, ms| *ms > 0);
    at
}

#[test]
fn recorded_trace_analysis_json() {
    let o = kpack(&["trace", fixture().to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let b = &v["builds"][0];
    assert_eq!(v["builds"].as_array().unwrap().len(), 1);
    // Exact figures, computed from the log's lines.
    let steps = steps();
    let first = steps.iter().map(|s| s.0).min().unwrap();
    let last = steps.iter().map(|s| s.1).max().unwrap();
    let dur = |s: &(i64, i64, String)| s.1 - s.0;
    assert_eq!(b["jobs"], steps.len() as u64);
    assert_eq!(b["wall_ms"], last - first);
    assert_eq!(b["job_ms"], steps.iter().map(dur).sum::<i64>());
    let at = time_at_parallelism(&steps);
    assert_eq!(b["peak_parallelism"], *at.keys().max().unwrap() as u64);
    let reported: std::collections::BTreeMap<usize, i64> = b["time_at_parallelism"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.parse().unwrap(), v.as_i64().unwrap()))
        .filter(|(_, ms)| *ms > 0)
        .collect();
    assert_eq!(reported, at);
    assert!(b["critical_path_ms"].as_i64().unwrap() <= b["wall_ms"].as_i64().unwrap());
    // Per arch: the device steps `object::gfxNNN` summed.
    let mut per_arch = std::collections::BTreeMap::new();
    for s in &steps {
        if let Some((_, arch)) = s.2.split_once("::")
            && arch.starts_with("gfx")
        {
            *per_arch.entry(arch.to_string()).or_insert(0) += dur(s);
        }
    }
    let reported: std::collections::BTreeMap<String, i64> = b["per_arch"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_i64().unwrap()))
        .collect();
    assert_eq!(reported, per_arch);
    // Per object: its device steps, its bundle step and its host compile.
    let objects = b["objects"].as_array().unwrap();
    assert_eq!(objects.len(), 2);
    for o in objects {
        let name = o["object"].as_str().unwrap();
        let of = |suffix: &str| {
            steps
                .iter()
                .filter(|s| s.2 == format!("{name}{suffix}"))
                .map(dur)
                .sum::<i64>()
        };
        let device: Vec<i64> = steps
            .iter()
            .filter(|s| s.2.starts_with(&format!("{name}::gfx")))
            .map(dur)
            .collect();
        assert_eq!(o["device_total_ms"], device.iter().sum::<i64>(), "{name}");
        assert_eq!(
            o["slowest_device_ms"],
            *device.iter().max().unwrap(),
            "{name}"
        );
        assert_eq!(o["bundle_ms"], of("::bundle"), "{name}");
        assert_eq!(o["host_ms"], of(""), "{name}");
    }
    // The same analysis is what `kpack-tui FILE --no-tui` prints.
    let o = kpack(&[fixture().to_str().unwrap(), "--no-tui"]);
    assert!(
        stdout(&o).contains("device compile time per arch"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn chrome_export_matches_the_trace_event_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t.json");
    let o = kpack(&[
        "trace",
        fixture().to_str().unwrap(),
        "--export",
        "chrome",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["displayTimeUnit"], "ms");
    let events = v["traceEvents"].as_array().unwrap();
    let complete: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(complete.len(), 13);
    for e in &complete {
        assert!(e["name"].is_string() && e["cat"].is_string());
        assert!(e["ts"].as_i64().unwrap() >= 0 && e["dur"].as_i64().unwrap() >= 0);
        assert!(e["pid"].is_u64() && e["tid"].is_u64());
        assert!(e["args"].is_object());
    }
    for e in events.iter().filter(|e| e["ph"] == "M") {
        assert!(["process_name", "thread_name"].contains(&e["name"].as_str().unwrap()));
        assert!(e["args"]["name"].is_string());
    }
    let dev = complete
        .iter()
        .find(|e| e["name"] == "vadd.o::gfx906")
        .unwrap();
    assert_eq!(dev["args"]["step"], "device");
    assert_eq!(dev["args"]["arch"], "gfx906");
    assert_eq!(dev["cat"], "device,gfx906");
    // Slices on one (pid, tid) never overlap (Perfetto needs them disjoint).
    for a in &complete {
        for b in &complete {
            if std::ptr::eq(*a, *b) || a["tid"] != b["tid"] {
                continue;
            }
            let (sa, ea) = (
                a["ts"].as_i64().unwrap(),
                a["ts"].as_i64().unwrap() + a["dur"].as_i64().unwrap(),
            );
            let (sb, eb) = (
                b["ts"].as_i64().unwrap(),
                b["ts"].as_i64().unwrap() + b["dur"].as_i64().unwrap(),
            );
            assert!(ea <= sb || eb <= sa, "overlap in lane {}", a["tid"]);
        }
    }
    // One slice per step of the log, at its own time (microseconds from the first
    // start) and of its own length.
    let steps = steps();
    let first = steps.iter().map(|s| s.0).min().unwrap();
    let mut want: Vec<(String, i64, i64)> = steps
        .iter()
        .map(|(s, e, n)| (n.clone(), (s - first) * 1000, (e - s) * 1000))
        .collect();
    let mut got: Vec<(String, i64, i64)> = complete
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["ts"].as_i64().unwrap(),
                e["dur"].as_i64().unwrap(),
            )
        })
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
}

#[test]
fn bad_inputs_are_line_diagnostics_and_the_rest_is_analysed() {
    let tmp = tempfile::tempdir().unwrap();
    let good = std::fs::read(fixture()).unwrap();
    let check = |name: &str, bytes: &[u8], jobs: u64, needle: &str| {
        let p = tmp.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let o = kpack(&["trace", p.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        let got: u64 = v["builds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["jobs"].as_u64().unwrap())
            .sum();
        assert_eq!(got, jobs, "{name}");
        let msgs = v["diagnostics"].to_string();
        assert!(msgs.contains(needle), "{name}: {msgs}");
    };
    let mut garbage = good.clone();
    garbage.extend_from_slice(b"\x00\x01\x02garbage\xff\xfe\n");
    check("garbage.trace", &garbage, 13, "not UTF-8");
    let mut bad = good.clone();
    bad.extend_from_slice(b"12\tabc\t0\tx\th\n1795979080000\t1795979070000\t0\ty\th\n1\t2\n");
    check("fields.trace", &bad, 13, "before it starts");
    let mut mixed = b"# ninja log v5\n".to_vec();
    mixed.extend_from_slice(b"1\t2\t0\ta\th\n# ninja log v6\n3\t4\t0\tb\th\n");
    check("mixed.trace", &mixed, 2, "mixed versions");
    // Truncated mid-line: the complete lines are analysed.
    let cut = &good[..good.len() - 20];
    let p = tmp.path().join("cut.trace");
    std::fs::write(&p, cut).unwrap();
    let o = kpack(&["trace", p.to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["builds"][0]["jobs"].as_u64().unwrap() >= 12);
}

#[test]
fn a_two_gigabyte_file_is_read_in_bounded_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("huge.trace");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(2 << 30).unwrap(); // sparse: 2 GiB of zero bytes, no newline
    let Some((o, rss_kb)) = kpack_peak_rss(&["trace", p.to_str().unwrap(), "--json"]) else {
        return;
    };
    // Not a trace (no line in 2 GiB): an error that says what it saw, in bounded memory.
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("longer than"), "{}", stderr(&o));
    assert!(rss_kb < 64 * 1024, "peak RSS {rss_kb} KiB");
}

#[test]
fn a_file_without_trace_lines_is_an_error_naming_the_format() {
    let readme = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let o = kpack(&["trace", readme.to_str().unwrap(), "--no-tui"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no trace lines (line 3: expected 5 tab-separated fields"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("expected a ninja log"),
        "{}",
        stderr(&o)
    );
    // An empty log with its header (a fresh build directory) is a trace of nothing.
    let tmp = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tmp.path(), "# ninja log v5\n").unwrap();
    let o = kpack(&["trace", tmp.path().to_str().unwrap(), "--no-tui"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}
