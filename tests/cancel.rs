//! Issue #32: a cancel lands at once, even inside one large kernel at the highest
//! level. The pack compresses a kernel in chunks and looks at the cancel token
//! between them; without that, the signal would wait for the 64 MiB kernel below
//! (about a minute at `--level max` in the release build, longer here).

mod common;

use common::assert_only_tree_left;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A generous bound for a loaded 2-core machine; the bench measures the real figure
/// (`bench/run.sh scale`, the Ctrl-C row).
const DEADLINE: Duration = Duration::from_secs(3);

#[test]
fn sigint_inside_a_64_mib_kernel_at_level_max_lands_within_the_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("tree");
    std::fs::create_dir_all(tree.join("lib")).unwrap();
    // One real linked shared library with one code object of 64.8 MiB (one arch, one
    // translation unit: 90% of the 72 MiB file), made from the fixtures' machine code.
    let gen_tree = Path::new(env!("CARGO_BIN_EXE_kpack-tui"))
        .with_file_name("examples")
        .join("gen_tree");
    assert!(gen_tree.is_file(), "{} is missing", gen_tree.display());
    let o = Command::new(&gen_tree)
        .arg("--single")
        .arg(tree.join("lib/libbig.so"))
        .args([
            "--tus",
            "1",
            "--archs",
            "1",
            "--size-mb",
            "72",
            "--seed",
            "5",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // What the bundler sees: one code object of over 64 MiB.
    let scan = Command::new(env!("CARGO_BIN_EXE_kpack-tui"))
        .args(["scan", "--json"])
        .arg(&tree)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&scan.stdout).unwrap();
    let sizes: Vec<u64> = report["files"][0]["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["targets"].as_array().unwrap())
        .map(|t| t["raw_size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes.len(), 1, "{sizes:?}");
    assert!(sizes[0] >= 64 << 20, "{sizes:?}");

    let out = tmp.path().join("out");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kpack-tui"))
        .arg("pack")
        .arg(&tree)
        .arg("-o")
        .arg(&out)
        .args(["--group", "g", "--all", "--level", "max", "-j", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    // On a pipe, a file of 64 MiB or more gets a line as each of its phases begins:
    // `compress` is the kernel's compression starting. No sleep.
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            let status = child.wait().unwrap();
            panic!("the pack ended ({status}) before compressing the kernel: {seen}");
        }
        seen.push_str(&line);
        if line.starts_with("packing: compress lib/libbig.so") {
            break;
        }
    }
    let sent = Instant::now();
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    let took = sent.elapsed();
    let all = format!("{seen}{rest}");
    eprintln!("cancel inside a 64 MiB kernel at --level max: {took:.2?}");
    assert_eq!(status.code(), Some(130), "{all}");
    assert!(all.contains("cancelled"), "{all}");
    assert!(
        took < DEADLINE,
        "the cancel took {took:.2?} (deadline {DEADLINE:?}): {all}"
    );
    assert!(!out.exists(), "no output");
    assert_only_tree_left(tmp.path());
}
