//! `bench/merge.py`: a partial bench run replaces only its own rows of the committed
//! report. A scale run once replaced the main table's `pack`, `split`, `verify`…
//! rows (same first cell) with its own, and left its cancel line stale.

mod common;

use std::process::Command;

const OLD: &str = "# Benchmark results

Machine: 2 cores (A), 23 GiB RAM.

| benchmark | what | ours | reference | ratio (ours/ref) | goal | peak RSS |
|---|---|---|---|---|---|---|
| pack | 1.0 GiB tree | 7.80 s | 8.41 s | 0.93 | <= 1.2 | 119.7 MiB |
| split | 1.0 GiB artifact | 3.50 s | 3.99 s | 0.88 | <= 1.2 | 118.8 MiB |

## Scale (#32)

| command | 1 GiB: s (s/GiB) | RSS | 8 GiB: s (s/GiB) | RSS | RSS 8/1 | s/GiB 8/1 |
|---|---|---|---|---|---|---|
| pack | 5.84 (6.39) | 88.7 MiB | 46.11 (6.62) | 184.9 MiB | 2.09 | 1.04 |
| split | 6.13 (6.70) | 84.4 MiB | 49.82 (7.15) | 185.6 MiB | 2.20 | 1.07 |

Ctrl-C during `pack --level max` of the 7.0 GiB tree: 0.79 s to exit.

Notes:
- kept
";

const NEW: &str = "# Benchmark results

Machine: 2 cores (B), 23 GiB RAM.

## Scale (#32)

| command | 1 GiB: s (s/GiB) | RSS | 8 GiB: s (s/GiB) | RSS | RSS 8/1 | s/GiB 8/1 |
|---|---|---|---|---|---|---|
| pack | 5.11 (5.59) | 69.1 MiB | 33.79 (4.85) | 140.0 MiB | 2.03 | 0.87 |
| split | 7.31 (8.00) | 60.0 MiB | 35.91 (5.16) | 109.6 MiB | 1.83 | 0.64 |
| combine | 2.64 (2.89) | 21.5 MiB | 26.57 (3.81) | 69.5 MiB | 3.23 | 1.32 |

Ctrl-C during `pack --level max` of the 7.0 GiB tree: 0.70 s to exit.
";

#[test]
fn a_scale_run_replaces_the_scale_rows_and_no_main_row() {
    let Some(py) = common::tool("python3") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (dir.path().join("old.md"), dir.path().join("new.md"));
    std::fs::write(&old, OLD).unwrap();
    std::fs::write(&new, NEW).unwrap();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/merge.py");
    let o = Command::new(py)
        .arg(script)
        .arg(&old)
        .arg(&new)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = String::from_utf8(o.stdout).unwrap();
    let (main, scale) = got.split_once("## Scale").unwrap();
    // The main table is as it was.
    assert!(main.contains("| pack | 1.0 GiB tree | 7.80 s |"), "{got}");
    assert!(
        main.contains("| split | 1.0 GiB artifact | 3.50 s |"),
        "{got}"
    );
    let main_rows: Vec<&str> = main.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(main_rows.len(), 3, "{got}");
    // The scale table has the new rows, the one it lacked after its last row, and
    // the new cancel line; the notes stay.
    let rows: Vec<&str> = scale.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(rows.len(), 4, "{got}");
    assert!(rows[1].starts_with("| pack | 5.11 (5.59)"), "{got}");
    assert!(rows[2].starts_with("| split | 7.31 (8.00)"), "{got}");
    assert!(rows[3].starts_with("| combine | 2.64"), "{got}");
    assert!(
        scale.contains("0.70 s to exit") && !scale.contains("0.79 s"),
        "{got}"
    );
    assert!(scale.contains("- kept"), "{got}");
    // The new machine names the rows measured on it.
    assert!(got.contains("Rows re-measured later (scale: pack, scale: split, scale: combine, scale: Ctrl-C): machine: 2 cores (B)"), "{got}");
}

/// Every row `bench/run.sh` records has a line in `bench/report.py`: a full run once
/// dropped the wheel split row, which report.py did not render (it had been added by
/// a partial run's merge and survived until the whole report was rewritten).
#[test]
fn every_recorded_bench_is_reported() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let run = std::fs::read_to_string(root.join("bench/run.sh")).unwrap();
    let report = std::fs::read_to_string(root.join("bench/report.py")).unwrap();
    let key = "record \"{\\\"bench\\\":\\\"";
    let recorded: std::collections::BTreeSet<&str> = run
        .match_indices(key)
        .map(|(i, _)| {
            let rest = &run[i + key.len()..];
            &rest[..rest.find('\\').unwrap()]
        })
        .collect();
    assert!(recorded.len() >= 15, "{recorded:?}");
    let missing: Vec<&&str> = recorded
        .iter()
        .filter(|b| !report.contains(&format!("b == \"{b}\"")) && **b != "scale")
        .collect();
    assert!(
        missing.is_empty(),
        "recorded but never reported: {missing:?}"
    );
    // The scale rows are reported as a table of their own.
    assert!(report.contains("\"scale\""), "scale rows");
}

/// A failed run measured nothing: `bench/measure.py` records its exit status and the
/// end of its stderr, and `bench/report.py` shows the row as failed, without a figure
/// or a ratio (a scale run once reported a `wheel split` refused in 0.03 s as 27.6
/// MiB, 0.33 × the 1 GiB figure).
#[test]
fn a_failed_scale_run_is_reported_as_failed_not_as_figures() {
    let Some(py) = common::tool("python3") else {
        return;
    };
    // measure.py reads the peak RSS from GNU time.
    if common::tool("time").is_none() {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = Command::new(&py)
        .arg(root.join("bench/measure.py"))
        .args([
            "2",
            "--",
            "sh",
            "-c",
            "echo first >&2; echo 'no room left' >&2; exit 3",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(run["exit"], serde_json::json!([3]), "{run}");
    assert_eq!(run["error"], "first / no room left", "{run}");
    let ok = Command::new(&py)
        .arg(root.join("bench/measure.py"))
        .args(["1", "--", "true"])
        .output()
        .unwrap();
    let ok: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert!(ok.get("error").is_none(), "{ok}");
    // The peak is the command's, not the measuring script's: `true` started by the
    // script itself read 15 MiB (the script's memory until the exec), the floor of
    // every figure below it.
    assert!(
        ok["rss_kb"].as_u64().is_some_and(|kb| kb < 8 << 10),
        "the peak RSS of `true`: {ok}"
    );

    let row = |mb: u64, run: &serde_json::Value| {
        serde_json::json!({"bench": "scale", "cmd": "wheel split", "tree_mb": mb,
            "tree_bytes": mb << 20, "files": 5, "device_bytes": 1, "run": run})
    };
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.jsonl");
    std::fs::write(
        &results,
        format!("{}\n{}\n", row(1024, &ok), row(8192, &run)),
    )
    .unwrap();
    let o = Command::new(&py)
        .arg(root.join("bench/report.py"))
        .arg(&results)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = String::from_utf8(o.stdout).unwrap();
    let line = got
        .lines()
        .find(|l| l.starts_with("| wheel split |"))
        .unwrap_or_else(|| panic!("{got}"));
    assert!(
        line.ends_with("| failed (exit [3]: first / no room left) |  |  |  |"),
        "{line}"
    );
}
