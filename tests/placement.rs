//! #27 item 15: `split`, `combine` and `wheel split` place their outputs in one
//! switch. Killed at any point of the placement (the suite's kill points end the
//! process with SIGABRT where it stands, no destructor runs: what SIGKILL leaves),
//! the output holds exactly the old set or exactly the new one; the next run removes
//! what the killed one left. Two runs into one output without `--force`: one places
//! its set, the other refuses.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

/// Every file and symlink under `dir` (temporaries excluded) with its bytes.
fn visible(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .min_depth(1)
        .into_iter()
        .filter_entry(|e| {
            // Temporaries; split's record of what it left to other shards is an output.
            let n = e.file_name().to_string_lossy();
            !n.starts_with(".kpack-tui-") || n.ends_with(".json")
        })
        .flatten()
        .filter(|e| !e.file_type().is_dir())
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            let bytes = if e.file_type().is_symlink() {
                std::fs::read_link(e.path())
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else {
                std::fs::read(e.path()).unwrap()
            };
            (rel, bytes)
        })
        .collect()
}

/// What kpack-tui left beside and inside `dir` (temporaries of any run).
fn leftovers(dir: &Path) -> Vec<String> {
    let mut v = Vec::new();
    for d in [dir, dir.parent().unwrap()] {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(".kpack-tui-") && !n.ends_with(".json") {
                v.push(n);
            }
        }
    }
    v
}

fn killed_at(step: &str, args: &[&str]) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_kpack-tui"))
        .args(args)
        .env("KPACK_TUI_TEST_ABORT_AT", step)
        .output()
        .unwrap();
    assert!(
        o.status.code().is_none(),
        "{args:?} was to end at {step}: {:?} {}",
        o.status,
        stderr(&o)
    );
    o
}

const STEPS: [&str; 3] = ["locked", "assembled", "switched"];

#[test]
fn a_wheel_split_killed_while_placing_leaves_the_old_wheels_or_the_new_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let whl = fixture_wheel(tmp.path()).expect("python3 is needed (.ci/run installs it)");
    // The new set, as a run that is not killed writes it.
    let reference = tmp.path().join("reference");
    assert!(split_wheel(&whl, &reference, &[]).status.success());
    let new = visible(&reference);
    for step in STEPS {
        let dist = tmp.path().join(format!("dist-{step}"));
        // The old set: one device wheel, and a wheel of another project.
        std::fs::create_dir_all(&dist).unwrap();
        std::fs::write(dist.join("other-1.0-py3-none-any.whl"), "not ours").unwrap();
        assert!(
            split_wheel(&whl, &dist, &["--target", "gfx90a"])
                .status
                .success()
        );
        let old = visible(&dist);
        assert_ne!(old.len(), new.len() + 1);
        let dist_s = dist.to_str().unwrap();
        let whl_s = whl.to_str().unwrap();
        killed_at(
            step,
            &[
                "wheel",
                "split",
                whl_s,
                "-o",
                dist_s,
                "--device-package-prefix",
                "amd-torch-device",
                "--overlay-root",
                "torch/",
                "--force",
            ],
        );
        let mut want = if step == "switched" {
            new.clone()
        } else {
            old.clone()
        };
        want.insert("other-1.0-py3-none-any.whl".into(), b"not ours".to_vec());
        if step == "switched" {
            // The old set's device wheel of gfx90a was replaced by the new one.
            assert_eq!(visible(&dist), want, "killed after the switch");
        } else {
            assert_eq!(visible(&dist), old, "killed at {step}");
        }
        // The next run removes what was left and places its set.
        let o = split_wheel(&whl, &dist, &["--force"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let mut after = new.clone();
        after.insert("other-1.0-py3-none-any.whl".into(), b"not ours".to_vec());
        assert_eq!(visible(&dist), after);
        assert_eq!(leftovers(&dist), Vec::<String>::new(), "after {step}");
    }
}

#[test]
fn a_split_killed_while_placing_leaves_the_old_artifacts_or_the_new_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let art = fixture_artifact(tmp.path());
    let reference = tmp.path().join("reference");
    split_blas(&art, &reference, &[]);
    let new = visible(&reference);
    for step in STEPS {
        let out = tmp.path().join(format!("out-{step}"));
        // The old set: the gfx90a shard's artifacts, with its record of what it left.
        split_shard(&art, &out, "gfx90a");
        let old = visible(&out);
        assert!(
            old.keys().any(|k| k.starts_with(".kpack-tui-split-")),
            "{:?}",
            old.keys()
        );
        killed_at(
            step,
            &[
                "split",
                art.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
                "--artifact-prefix",
                "blas_lib",
                "--force",
            ],
        );
        let seen = visible(&out);
        if step == "switched" {
            // The new set: every artifact, and no record of anything left out.
            for (k, v) in &new {
                assert_eq!(seen.get(k), Some(v), "{k} after the switch");
            }
            assert!(!seen.keys().any(|k| k.starts_with(".kpack-tui-split-")));
            // The shard's gfx900 artifact is gone only if the new set lacks it too.
            assert_eq!(seen.len(), new.len(), "{:?}", seen.keys());
        } else {
            assert_eq!(seen, old, "killed at {step}");
        }
        split_blas(&art, &out, &["--force"]);
        assert_eq!(visible(&out), new);
        assert_eq!(leftovers(&out), Vec::<String>::new(), "after {step}");
    }
}

#[test]
fn two_wheel_splits_into_one_dist_place_one_set_and_the_other_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let whl = fixture_wheel(tmp.path()).expect("python3 is needed (.ci/run installs it)");
    let reference = tmp.path().join("reference");
    assert!(split_wheel(&whl, &reference, &[]).status.success());
    let dist = tmp.path().join("dist");
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_kpack-tui"))
            .args([
                "wheel",
                "split",
                whl.to_str().unwrap(),
                "-o",
                dist.to_str().unwrap(),
            ])
            .args([
                "--device-package-prefix",
                "amd-torch-device",
                "--overlay-root",
                "torch/",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let ok: Vec<&Output> = [&a, &b]
        .into_iter()
        .filter(|o| o.status.success())
        .collect();
    assert_eq!(ok.len(), 1, "{}\n---\n{}", stderr(&a), stderr(&b));
    let refused = if a.status.success() { &b } else { &a };
    assert!(stderr(refused).contains("--force"), "{}", stderr(refused));
    assert_eq!(visible(&dist), visible(&reference));
    assert_eq!(leftovers(&dist), Vec::<String>::new());
}
