//! `kpack-tui PATH --no-tui [--json]` end to end, including bad inputs.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;

fn json(args: &[&str]) -> Value {
    let o = kpack(args);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn json_has_the_documented_minimum() {
    let demo = demo();
    let v = json(&[demo.to_str().unwrap(), "--no-tui", "--json"]);
    let files = v["files"].as_array().unwrap();
    assert!(!files.is_empty());
    let kinds = [
        "fat_binary",
        "host_only_binary",
        "bundle",
        "kernel_database",
        "kpack",
        "code_object",
        "opaque",
        "symlink",
        "other",
    ];
    for f in files {
        assert!(f["path"].is_string());
        assert!(!f["path"].as_str().unwrap().contains('\\'));
        assert!(kinds.contains(&f["kind"].as_str().unwrap()), "{f}");
        assert!(f["size"].is_u64());
    }
    let lib = files
        .iter()
        .find(|f| f["path"] == "lib/libvadd.so.1.0")
        .unwrap();
    assert_eq!(lib["kind"], "fat_binary");
    let b = &lib["bundles"][0];
    assert_eq!(b["index"], 0);
    assert_eq!(b["compression"], "none");
    let t = &b["targets"][1];
    assert_eq!(t["arch"], "gfx90a:xnack+");
    assert_eq!(t["triple"], "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+");
    assert!(t["raw_size"].as_u64().unwrap() > 1000);
    let z = files
        .iter()
        .find(|f| f["path"] == "lib/libzkern.so")
        .unwrap();
    assert_eq!(z["bundles"][1]["compression"], "zstd");
    // archs: arch -> total uncompressed device bytes, equal to the sum over targets.
    let mut sum = std::collections::BTreeMap::<String, u64>::new();
    for f in files.iter().filter(|f| f["kind"] != "symlink") {
        let bundles = f["bundles"].as_array().into_iter().flatten().chain(
            f["members"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|m| m["bundles"].as_array().unwrap()),
        );
        for b in bundles {
            for t in b["targets"].as_array().unwrap() {
                *sum.entry(t["arch"].as_str().unwrap().to_string())
                    .or_default() += t["raw_size"].as_u64().unwrap();
            }
        }
        if f["kind"] == "code_object" {
            *sum.entry(f["arch"].as_str().unwrap().to_string())
                .or_default() += f["size"].as_u64().unwrap();
        }
    }
    let archs: std::collections::BTreeMap<String, u64> =
        serde_json::from_value(v["archs"].clone()).unwrap();
    assert_eq!(archs, sum);
}

#[test]
fn single_binary_lists_its_bundles() {
    let p = fixtures().join("app_pie");
    let v = json(&[p.to_str().unwrap(), "--no-tui", "--json"]);
    assert_eq!(v["files"].as_array().unwrap().len(), 1);
    assert_eq!(v["files"][0]["path"], "app_pie");
    assert_eq!(v["files"][0]["bundles"].as_array().unwrap().len(), 2);
    let o = kpack(&[p.to_str().unwrap(), "--no-tui"]);
    let text = stdout(&o);
    assert!(text.contains("bundle 1 at 0x"), "{text}");
    assert!(
        text.contains("wrappers (2): HIPF→bundle 0, HIPF→bundle 1"),
        "{text}"
    );
}

#[test]
fn text_summary_on_the_demo() {
    let demo = demo();
    let o = kpack(&[demo.to_str().unwrap(), "--no-tui"]);
    assert!(o.status.success());
    let t = stdout(&o);
    for s in [
        "Files by class",
        "Device code by target",
        "Top files by fat-binary section",
        "gfx90a:xnack+",
        "bin/vadd_app",
    ] {
        assert!(t.contains(s), "missing {s:?} in\n{t}");
    }
}

#[test]
fn missing_path_is_a_clear_error_with_status_2() {
    let o = kpack(&["/nonexistent/tree", "--no-tui"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/tree"), "{}", stderr(&o));
}

/// A tree of every bad input of the scan's catalogue.
fn bad_tree(dir: &Path) {
    let fx = fixtures();
    let lib = std::fs::read(fx.join("libvadd.so")).unwrap();
    let fb = std::fs::read(fx.join("kernels.hipfb")).unwrap();
    let w = |name: &str, bytes: &[u8]| std::fs::write(dir.join(name), bytes).unwrap();
    w("empty.so", b"");
    w("not-elf.so", b"this is a text file, not a shared library\n");
    w("truncated-elf.so", &lib[..lib.len() / 3]);
    w("truncated-bundle.hipfb", &fb[..200]);
    // Entry whose offset + size passes the end.
    let mut lying = fb.clone();
    lying.truncate(fb.len() - 100);
    w("lying-entry.hipfb", &lying);
    // Garbage inside .hip_fatbin (first bytes of the section overwritten).
    let mut garbage = lib.clone();
    let off = find(&lib, b"__CLANG_OFFLOAD_BUNDLE__");
    garbage[off..off + 8].copy_from_slice(b"GARBAGE!");
    w("garbage-fatbin.so", &garbage);
    // 32-bit and big-endian ELF identification.
    let mut e32 = lib.clone();
    e32[4] = 1;
    w("elf32.so", &e32);
    let mut ebe = lib.clone();
    ebe[5] = 2;
    w("bigendian.so", &ebe);
    // CCOB whose uncompressed size lies, and one above the sanity bound.
    let z = std::fs::read(fx.join("libzkern.so")).unwrap();
    let zoff = find(&z, b"CCOB");
    let mut zlie = z.clone();
    zlie[zoff + 12..zoff + 16].copy_from_slice(&10u32.to_le_bytes());
    w("ccob-lying-size.so", &zlie);
    let mut ccob_v3 = b"CCOB\x03\x00\x01\x00".to_vec();
    ccob_v3.extend_from_slice(&64u64.to_le_bytes());
    ccob_v3.extend_from_slice(&(1u64 << 50).to_le_bytes());
    ccob_v3.extend_from_slice(&[0u8; 40]);
    w("ccob-bomb.co", &ccob_v3);
    // Symlink loop and a dangling link.
    std::os::unix::fs::symlink("loop-b", dir.join("loop-a")).unwrap();
    std::os::unix::fs::symlink("loop-a", dir.join("loop-b")).unwrap();
    std::os::unix::fs::symlink("/nonexistent", dir.join("dangling")).unwrap();
    // A fifo: must not hang the scan.
    let fifo = dir.join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    // Hard link counted once.
    std::fs::copy(fx.join("libvadd.so"), dir.join("hl-a.so")).unwrap();
    std::fs::hard_link(dir.join("hl-a.so"), dir.join("hl-b.so")).unwrap();
}

fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).position(|w| w == needle).unwrap()
}

#[test]
fn bad_inputs_become_diagnostics_and_strict_fails() {
    let tmp = tempfile::tempdir().unwrap();
    bad_tree(tmp.path());
    let before = tree_hashes(tmp.path());
    let p = tmp.path().to_str().unwrap();
    let o = kpack(&[p, "--no-tui", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let diags = v["diagnostics"].as_array().unwrap();
    let msg = |path: &str| -> String {
        diags
            .iter()
            .filter(|d| d["path"] == path)
            .map(|d| d["message"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
            .join(" | ")
    };
    assert!(
        msg("truncated-elf.so").contains("malformed ELF"),
        "{}",
        msg("truncated-elf.so")
    );
    assert!(
        msg("truncated-bundle.hipfb").contains("passes the end")
            || msg("truncated-bundle.hipfb").contains("truncated")
    );
    assert!(
        msg("lying-entry.hipfb").contains("passes the end of the bundle"),
        "{}",
        msg("lying-entry.hipfb")
    );
    assert!(
        msg("garbage-fatbin.so").contains("unexpected bytes"),
        "{}",
        msg("garbage-fatbin.so")
    );
    assert!(msg("elf32.so").contains("32-bit"), "{}", msg("elf32.so"));
    assert!(
        msg("bigendian.so").contains("big-endian"),
        "{}",
        msg("bigendian.so")
    );
    assert!(
        msg("ccob-lying-size.so").contains("bundle 0"),
        "{}",
        msg("ccob-lying-size.so")
    );
    assert!(
        msg("ccob-bomb.co").contains("bound"),
        "{}",
        msg("ccob-bomb.co")
    );
    assert!(msg("pipe").contains("fifo"), "{}", msg("pipe"));
    assert_eq!(msg("empty.so"), "");
    assert_eq!(msg("not-elf.so"), "");
    let files = v["files"].as_array().unwrap();
    let f = |p: &str| files.iter().find(|f| f["path"] == p).unwrap().clone();
    assert_eq!(f("loop-a")["kind"], "symlink");
    assert_eq!(f("dangling")["target"], "/nonexistent");
    assert_eq!(f("pipe")["kind"], "other");
    assert_eq!(f("hl-b.so")["hard_link_of"], "hl-a.so");
    assert_eq!(f("hl-b.so")["kind"], "fat_binary");
    // Hard link counted once in the bytes.
    let fat = &v["totals"]["by_kind"]["fat_binary"];
    assert_eq!(
        fat["bytes"],
        f("hl-a.so")["size"].as_u64().unwrap()
            + f("garbage-fatbin.so")["size"].as_u64().unwrap()
            + f("ccob-lying-size.so")["size"].as_u64().unwrap()
    );

    let o = kpack(&[p, "--no-tui", "--strict"]);
    assert_eq!(o.status.code(), Some(1));
    let text = stdout(&o);
    assert!(
        text.contains("error: elf32.so") || text.contains("warning: elf32.so"),
        "{text}"
    );
    // Packing the bad tree and listing it again change nothing in it.
    let out = tempfile::tempdir().unwrap();
    let _ = kpack(&[
        "pack",
        p,
        "-o",
        out.path().join("o").to_str().unwrap(),
        "--group",
        "g",
        "--family",
        "gfx90X",
        "--unassigned",
        "drop",
    ]);
    let _ = kpack(&[p, "--no-tui", "--long"]);
    assert_eq!(
        tree_hashes(tmp.path()),
        before,
        "the input tree was modified"
    );
}

/// The built-in demo is reported as `demo`, not as the temporary directory it is
/// unpacked to (#19 item 3).
#[test]
fn the_demo_is_called_demo() {
    let o = kpack(&["--no-tui", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["root"], "demo");
    let o = kpack(&["--no-tui"]);
    assert_eq!(stdout(&o).lines().next(), Some("demo"));
}

/// Issue #19 item 17: each subcommand's help lists its own options only; `--no-tui`
/// is still accepted everywhere (scripts pass it, as they set KPACK_NO_TUI).
#[test]
fn subcommand_help_lists_only_its_options() {
    let help = |c: &str| stdout(&kpack(&[c, "--help"]));
    for c in [
        "pack", "extract", "rewrite", "split", "wheel", "verify", "kernels",
    ] {
        let h = help(c);
        for flag in ["--no-tui", "--follow"] {
            assert!(!h.contains(flag), "{c} --help lists {flag}:\n{h}");
        }
    }
    for c in ["extract", "rewrite", "verify", "kernels"] {
        assert!(!help(c).contains("--long"), "{c}");
    }
    assert!(help("scan").contains("--no-tui") && help("scan").contains("--long"));
    assert!(help("trace").contains("--follow"));
    assert!(help("pack").contains("--strict"));
    let o = kpack(&["verify", "--no-tui", "/nonexistent/x"]);
    assert!(
        !stderr(&o).contains("unexpected argument"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_mistyped_command_is_named_as_such() {
    let o = kpack(&["inspect", "x.so"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("`inspect` is neither a file nor a command"),
        "{e}"
    );
    assert!(
        e.contains("find-kernel") && !e.contains("bench-frames"),
        "{e}"
    );
    // A path that does not exist is still reported as a path.
    let o = kpack(&["no/such/tree", "--no-tui"]);
    assert!(stderr(&o).contains("No such file"), "{}", stderr(&o));
}

#[test]
fn options_may_come_before_the_command() {
    let demo = demo();
    let demo = demo.to_str().unwrap();
    // Each gives the same output as with the options after the command (#28 item 5:
    // the exit status alone proved nothing).
    for (before, after) in [
        (
            &["--no-tui", "scan", demo][..],
            &["scan", demo, "--no-tui"][..],
        ),
        (&["--json", "scan", demo], &["scan", demo, "--json"]),
        (
            &["-j", "1", "--no-tui", "kernels", demo],
            &["kernels", demo, "-j", "1", "--no-tui"],
        ),
    ] {
        let (a, b) = (kpack(before), kpack(after));
        assert!(a.status.success(), "{before:?}: {}", stderr(&a));
        assert!(!a.stdout.is_empty(), "{before:?}");
        assert_eq!(stdout(&a), stdout(&b), "{before:?} vs {after:?}");
    }
    let o = kpack(&["--json", "scan", demo]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["schema"], "kpack-tui.scan/2");
    // A path and a command together is refused, not half-ignored.
    let o = kpack(&[demo, "scan", demo]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not both"), "{}", stderr(&o));
}

/// `scan` is "the same as `kpack-tui PATH`", compile traces too (#28 item 6: it
/// called a trace an opaque file).
#[test]
fn scan_of_a_trace_is_what_the_bare_path_shows() {
    let t = fixtures()
        .parent()
        .unwrap()
        .join("traces/phc-make-j2.trace");
    let t = t.to_str().unwrap();
    for extra in [&["--no-tui"][..], &["--json"][..]] {
        let bare = kpack(&[&[t][..], extra].concat());
        let scan = kpack(&[&["scan", t][..], extra].concat());
        assert!(
            bare.status.success() && scan.status.success(),
            "{}",
            stderr(&scan)
        );
        assert_eq!(stdout(&scan), stdout(&bare), "{extra:?}");
        assert!(stdout(&scan).contains("ninja log") || stdout(&scan).contains("kpack-tui.trace/1"));
    }
}

/// A reader that went away (`kpack-tui … --json | head -1`) is not an error: the
/// JSON writers kept the I/O error's kind, so `preview --json` said "Broken pipe".
#[test]
fn a_closed_pipe_on_stdout_is_not_an_error() {
    let lib = fixtures().join("libvadd.so");
    for args in [
        vec!["preview", lib.to_str().unwrap(), "--json"],
        vec!["preview", lib.to_str().unwrap(), "--no-tui"],
        vec!["scan", lib.to_str().unwrap(), "--json"],
    ] {
        // The read end is closed before the program starts: its first write fails.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_kpack-tui"))
            .args(&args)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert!(o.stderr.is_empty(), "{args:?}: {}", stderr(&o));
    }
}
