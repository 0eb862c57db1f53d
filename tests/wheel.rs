//! Python wheels built by Python's zipfile from the fixture binaries: scanned as
//! trees, split into host and device wheels (names, METADATA, WHEEL, RECORD checked
//! by Python, modes, archives byte-exact against the fat binaries' code objects,
//! determinism across thread counts), and every bad input refused with exit 2 and
//! nothing left in the output. Installing with pip and loading through the
//! reference runtime is in `runtime_oracle.rs`.

mod common;

use common::*;
use kpack::kpack::archive::Archive;
use kpack::wheel::Wheel;
use std::path::Path;
use std::process::Command;

const HOST: &str = "torch-2.10.0+rocm7.1-cp311-cp311-linux_x86_64.whl";

fn dev(key: &str) -> String {
    format!("amd_torch_device_{key}-2.10.0+rocm7.1-cp311-cp311-linux_x86_64.whl")
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn member_text(w: &Wheel, name: &str) -> String {
    let m = w.member(name).unwrap_or_else(|| panic!("{name} missing"));
    String::from_utf8(m.read_all(w.bytes()).unwrap()).unwrap()
}

/// Python's view of a wheel: every RECORD line recomputed (urlsafe base64 SHA-256
/// and size), the member list, and modes. Prints `ok` or the faults.
const PY_CHECK: &str = r#"
import base64, hashlib, sys, zipfile
for path in sys.argv[1:]:
    z = zipfile.ZipFile(path)
    assert z.testzip() is None, path
    names = [i.filename for i in z.infolist()]
    rec = [n for n in names if n.endswith(".dist-info/RECORD")]
    assert len(rec) == 1, (path, rec)
    listed = {}
    for line in z.read(rec[0]).decode().splitlines():
        p, h, s = line.rsplit(",", 2)
        listed[p] = (h, s)
    assert set(listed) == set(names), (path, set(listed) ^ set(names))
    for n in names:
        h, s = listed[n]
        if n == rec[0]:
            assert h == "" and s == "", n
            continue
        d = z.read(n)
        want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
        assert h == want and s == str(len(d)), (path, n, h, want, s, len(d))
print("ok")
"#;

#[test]
fn a_wheel_scans_as_a_tree_of_members_with_bundles_and_identity() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(whl) = fixture_wheel(tmp.path()) else {
        return;
    };
    let o = kpack(&["--no-tui", "--json", whl.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["wheel"]["name"], "torch");
    assert_eq!(v["wheel"]["version"], "2.10.0+rocm7.1");
    assert_eq!(v["wheel"]["tag"][2], "linux_x86_64");
    let files = v["files"].as_array().unwrap();
    let get = |p: &str| files.iter().find(|f| f["path"] == p).unwrap().clone();
    // The same bundles as a scan of the fixture file itself.
    for (member, fixture) in [
        ("torch/lib/libkernels.so", "libkernels.so"),
        ("torch/lib/libkernels_z.so", "libkernels_z.so"),
    ] {
        let f = get(member);
        assert_eq!(f["kind"], "fat_binary");
        let o = kpack(&[
            "--no-tui",
            "--json",
            fixtures().join(fixture).to_str().unwrap(),
        ]);
        let direct: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(f["bundles"], direct["files"][0]["bundles"], "{member}");
        assert_eq!(f["fatbin_bytes"], direct["files"][0]["fatbin_bytes"]);
    }
    assert_eq!(get("torch/lib/libplain.so")["kind"], "opaque");
    assert_eq!(get("torch/bin/run.sh")["mode"], 0o751);
    assert_eq!(get("torch/share/data.txt")["mode"], 0o640);
    assert!(v["arch_totals"]["gfx90a:xnack+"]["code_objects"] == 1);
    // Text mode names the wheel.
    let o = kpack(&["--no-tui", whl.to_str().unwrap()]);
    assert!(
        stdout(&o).contains("wheel torch 2.10.0+rocm7.1"),
        "{}",
        stdout(&o)
    );
    // A wheel inside a tree is a wheel, not an opaque file.
    let o = kpack(&["--no-tui", "--json", tmp.path().to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["files"][0]["kind"], "wheel");
    assert_eq!(v["files"][0]["wheel"]["name"], "torch");
}

#[test]
fn split_writes_the_host_and_device_wheels_the_spec_describes() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(whl) = fixture_wheel(tmp.path()) else {
        return;
    };
    let before = std::fs::read(&whl).unwrap();
    let out = tmp.path().join("dist");
    let o = split_wheel(
        &whl,
        &out,
        &[
            "--device-requires-dist",
            "rocm-sdk-device-@GFXARCH@ == 7.1",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&whl).unwrap(), before, "input modified");
    assert_eq!(
        names(&out),
        [
            dev("gfx1030"),
            dev("gfx900"),
            dev("gfx90a"),
            HOST.to_string()
        ]
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["code_objects"], 4);
    assert_eq!(v["rewritten"], 2);

    // Host wheel: METADATA headers inserted before the body, binaries host-only.
    let host = Wheel::open(&out.join(HOST)).unwrap();
    let md = member_text(&host, "torch-2.10.0+rocm7.1.dist-info/METADATA");
    let want = "Summary: test wheel\nRequires-Dist: rocm-bootstrap\n\
        Provides-Extra: device-gfx1030\n\
        Requires-Dist: amd-torch-device-gfx1030 == 2.10.0+rocm7.1; extra == \"device-gfx1030\"\n\
        Provides-Extra: device-gfx900\n\
        Requires-Dist: amd-torch-device-gfx900 == 2.10.0+rocm7.1; extra == \"device-gfx900\"\n\
        Provides-Extra: device-gfx90a\n\
        Requires-Dist: amd-torch-device-gfx90a == 2.10.0+rocm7.1; extra == \"device-gfx90a\"\n\
        Provides-Extra: device-all\n\
        Requires-Dist: amd-torch-device-gfx1030 == 2.10.0+rocm7.1; extra == \"device-all\"\n\
        Requires-Dist: amd-torch-device-gfx900 == 2.10.0+rocm7.1; extra == \"device-all\"\n\
        Requires-Dist: amd-torch-device-gfx90a == 2.10.0+rocm7.1; extra == \"device-all\"\n\
        \nA test wheel.\n";
    assert!(md.ends_with(want), "{md}");
    let o = kpack(&["--no-tui", "--json", out.join(HOST).to_str().unwrap()]);
    let scan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for (p, depth_marker) in [
        ("torch/lib/libkernels.so", "../.kpack/torch_@GFXARCH@.kpack"),
        (
            "torch/lib/libkernels_z.so",
            "../.kpack/torch_@GFXARCH@.kpack",
        ),
    ] {
        let f = scan["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == p)
            .unwrap();
        assert_eq!(f["kind"], "host_only_binary", "{p}");
        assert_eq!(f["marker"]["kpack_search_paths"][0], depth_marker);
        assert_eq!(
            f["marker"]["kernel_name"],
            p.strip_prefix("torch/").unwrap()
        );
    }
    // Modes kept, executables included.
    let mode = |w: &Wheel, n: &str| w.member(n).unwrap().permissions();
    assert_eq!(mode(&host, "torch/bin/run.sh"), 0o751);
    assert_eq!(mode(&host, "torch/share/data.txt"), 0o640);
    assert_eq!(mode(&host, "torch/lib/libkernels.so"), 0o755);

    // Device wheel gfx90a: both gfx90a archives, exact METADATA, WHEEL, top_level.
    let d = Wheel::open(&out.join(dev("gfx90a"))).unwrap();
    let di = "amd_torch_device_gfx90a-2.10.0+rocm7.1.dist-info";
    assert_eq!(
        member_text(&d, &format!("{di}/METADATA")),
        "Metadata-Version: 2.4\nName: amd-torch-device-gfx90a\nVersion: 2.10.0+rocm7.1\n\
         Summary: AMD device kernels (gfx90a) for torch\nRequires-Dist: torch == \
         2.10.0+rocm7.1\nRequires-Dist: rocm-sdk-device-gfx90a == 7.1\n"
    );
    assert_eq!(
        member_text(&d, &format!("{di}/WHEEL")),
        "Wheel-Version: 1.0\nGenerator: rocm-kpack-split-python-wheels\nRoot-Is-Purelib: \
         false\nTag: cp311-cp311-linux_x86_64\n"
    );
    assert_eq!(member_text(&d, &format!("{di}/top_level.txt")), "torch\n");
    let members: Vec<&str> = d.index.members.iter().map(|m| m.name.as_str()).collect();
    // One archive for gfx90a's variants (plain and xnack+ code from two binaries): a
    // first-match loader on an xnack+ device stops at the first archive listing a
    // target it accepts, so side by side the xnack+ one would hide the plain one.
    assert_eq!(members[0], "torch/.kpack/torch_gfx90a.kpack");
    assert!(members[1].ends_with(".dist-info/METADATA"), "{members:?}");
    // Archives hold exactly the fat binaries' code objects, keyed overlay-relative.
    let original = fat_code_objects(&fixtures());
    for w in names(&out).iter().filter(|n| n.starts_with("amd_")) {
        let d = Wheel::open(&out.join(w)).unwrap();
        for m in d
            .index
            .members
            .iter()
            .filter(|m| m.name.ends_with(".kpack"))
        {
            let a =
                Archive::from_bytes(Path::new(&m.name), m.read_all(d.bytes()).unwrap()).unwrap();
            assert!(a.verify().is_empty());
            assert_eq!(a.index.meta.group_name, "torch");
            for k in &a.index.kernels {
                assert!(a.index.meta.gfx_arches.iter().any(|g| **g == *k.arch));
                let (bin, co) = k.key.rsplit_once('#').unwrap();
                let file = bin.strip_prefix("lib/").unwrap();
                // An alias holds the code of the target it repeats.
                let code = k.alias_of.as_deref().unwrap_or(&k.arch).to_string();
                let want = &original[&(file.to_string(), co.parse().unwrap(), code)];
                assert_eq!(a.kernel(k).unwrap().as_ref(), want.as_slice(), "{}", k.key);
            }
        }
    }
    // Python recomputes every RECORD.
    if let Some(py) = tool("python3") {
        let o = Command::new(py)
            .args(["-c", PY_CHECK])
            .args(names(&out).iter().map(|n| out.join(n)))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}

#[test]
fn split_output_is_byte_identical_for_any_thread_count() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(whl) = fixture_wheel(tmp.path()) else {
        return;
    };
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    assert!(split_wheel(&whl, &a, &["-j", "1"]).status.success());
    assert!(split_wheel(&whl, &b, &["-j", "2"]).status.success());
    assert_eq!(names(&a), names(&b));
    for n in names(&a) {
        assert!(
            std::fs::read(a.join(&n)).unwrap() == std::fs::read(b.join(&n)).unwrap(),
            "{n} differs between -j1 and -j2"
        );
    }
}

#[test]
fn target_and_family_filters_choose_the_device_wheels() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(whl) = fixture_wheel(tmp.path()) else {
        return;
    };
    let out = tmp.path().join("t");
    let o = split_wheel(&whl, &out, &["--target", "gfx90a", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(names(&out), [dev("gfx90a"), HOST.to_string()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["skipped_code_objects"], 2);
    assert!(stderr(&o).contains("left out"), "{}", stderr(&o));
    let out = tmp.path().join("f");
    let o = split_wheel(&whl, &out, &["--family", "gfx10"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(names(&out), [dev("gfx1030"), HOST.to_string()]);
    let o = split_wheel(&whl, &tmp.path().join("x"), &["--target", "gfx1100"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("left out"), "{}", stderr(&o));
}

/// Run a split expected to fail: exit 2, the wheel named, the output dir empty of
/// anything new.
/// Refused with `says` (and the wheel's name), nothing written; returns the message.
fn refused(whl: &Path, out: &Path, extra: &[&str], says: &str) -> String {
    let before = names(out);
    let o = split_wheel(whl, out, extra);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{says}: {e}");
    assert!(e.contains(says), "expected {says:?} in: {e}");
    assert!(
        e.contains(&whl.file_name().unwrap().to_string_lossy().to_string()),
        "the message names the wheel: {e}"
    );
    assert_eq!(names(out), before, "{says}: output left behind");
    e
}

fn py_wheel(dir: &Path, name: &str, args: &[&str]) -> std::path::PathBuf {
    let out = dir.join(name);
    let o = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/make-test-wheel.py"))
        .arg(&out)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

#[test]
fn bad_wheels_and_bad_requests_are_refused_with_nothing_written() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(whl) = fixture_wheel(tmp.path()) else {
        return;
    };
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let t = tmp.path();
    // Not a zip.
    let not = t.join("junk-1.0-py3-none-any.whl");
    std::fs::write(&not, b"this is not a zip at all, just text").unwrap();
    refused(&not, &out, &[], "not a zip archive");
    // A damaged central directory (truncated wheel).
    let bytes = std::fs::read(&whl).unwrap();
    let cut = t.join("cut-1.0-py3-none-any.whl");
    std::fs::write(&cut, &bytes[..bytes.len() - 30]).unwrap();
    refused(&cut, &out, &[], "cut-1.0");
    let lib = fixtures().join("libkernels.so").display().to_string();
    let fat = format!("torch/lib/libk.so@755={lib}");
    let common = [
        "--name",
        "torch",
        "--version",
        "1.0",
        "--tag",
        "py3-none-any",
    ];
    // Zero and two dist-info directories; missing METADATA fields; a bad tag.
    let w = py_wheel(t, "none-1.0-py3-none-any.whl", &[&fat, "--no-dist-info"]);
    refused(&w, &out, &[], "no *.dist-info");
    let w = py_wheel(
        t,
        "two-1.0-py3-none-any.whl",
        &[
            &common[..],
            &[&fat, "other-1.0.dist-info/METADATA=text:Name: o\n"],
        ]
        .concat(),
    );
    refused(&w, &out, &[], "2 *.dist-info");
    let w = py_wheel(
        t,
        "nometa-1.0-py3-none-any.whl",
        &[
            &fat,
            "--no-dist-info",
            "x-1.dist-info/WHEEL=text:Tag: py3-none-any\n",
        ],
    );
    refused(&w, &out, &[], "METADATA is missing");
    let w = py_wheel(
        t,
        "noname-1.0-py3-none-any.whl",
        &[
            &fat,
            "--no-dist-info",
            "x-1.dist-info/METADATA=text:Version: 1\n",
            "x-1.dist-info/WHEEL=text:Tag: py3-none-any\n",
        ],
    );
    refused(&w, &out, &[], "no Name");
    let w = py_wheel(
        t,
        "nowheel-1.0-py3-none-any.whl",
        &[
            &fat,
            "--no-dist-info",
            "x-1.dist-info/METADATA=text:Name: x\nVersion: 1\n",
        ],
    );
    refused(&w, &out, &[], "WHEEL is missing");
    let w = py_wheel(
        t,
        "tag-1.0-py3-none.whl",
        &["--name", "t", "--version", "1", "--tag", "py3-none", &fat],
    );
    refused(&w, &out, &[], "is not <python>-<abi>-<platform>");
    // Overlay root absent; no fat binaries under it.
    let o = kpack(&[
        "wheel",
        "split",
        whl.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--device-package-prefix",
        "amd-torch-device",
        "--overlay-root",
        "nonexistent/",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("overlay root 'nonexistent' does not exist"),
        "{}",
        stderr(&o)
    );
    let plain = py_wheel(
        t,
        "plain-1.0-py3-none-any.whl",
        &[
            &common[..],
            &[&format!(
                "torch/lib/libp.so={}",
                fixtures().join("libplain.so").display()
            )],
        ]
        .concat(),
    );
    refused(&plain, &out, &[], "no fat binaries under 'torch'");
    // A target rocm-bootstrap does not know (a database file for gfx940).
    let w = py_wheel(
        t,
        "unk-1.0-py3-none-any.whl",
        &[
            &common[..],
            &[
                &fat,
                "torch/lib/rocblas/library/TensileLibrary_gfx940.dat=text:x",
            ],
        ]
        .concat(),
    );
    refused(
        &w,
        &out,
        &["--databases", "rocblas"],
        "target gfx940 has no package",
    );
    // An escaping member name.
    let w = py_wheel(
        t,
        "evil-1.0-py3-none-any.whl",
        &[&common[..], &[&fat, "../evil.txt=text:x"]].concat(),
    );
    refused(&w, &out, &[], "'..' part");
    // The output directory holds the input; existing wheels of the same names.
    let inside = out.join(whl.file_name().unwrap());
    std::fs::copy(&whl, &inside).unwrap();
    refused(&inside, &out, &[], "holds the input wheel");
    std::fs::remove_file(&inside).unwrap();
    std::fs::write(out.join(dev("gfx900")), b"old").unwrap();
    refused(&whl, &out, &[], "already holds");
    std::fs::remove_file(out.join(dev("gfx900"))).unwrap();
}

/// Issue #27 item 1: METADATA `Name` (and Version, and WHEEL tags) are data, never
/// paths: a wheel naming itself `/abs/dir/x` or `../../x` is refused before anything is
/// written, and nothing appears where those names point.
#[test]
fn hostile_wheel_names_write_nothing_anywhere() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    if tool("python3").is_none() {
        return;
    }
    let out = t.join("deep/a/b/out");
    std::fs::create_dir_all(&out).unwrap();
    let lib = fixtures().join("libkernels.so").display().to_string();
    let abs = t.join("abs");
    std::fs::create_dir(&abs).unwrap();
    let abs_name = format!("{}/x", abs.display());
    for (i, (name, version, tag, says)) in [
        (
            abs_name.as_str(),
            "1.0",
            "py3-none-any",
            "is not a valid distribution name",
        ),
        (
            "../../x",
            "1.0",
            "py3-none-any",
            "is not a valid distribution name",
        ),
        (
            "..",
            "1.0",
            "py3-none-any",
            "is not a valid distribution name",
        ),
        (
            "torch",
            "1.0/../../y",
            "py3-none-any",
            "is not a valid version",
        ),
        ("torch", "1.0", "py3-none-../../z", "is not a valid tag"),
    ]
    .into_iter()
    .enumerate()
    {
        // A well-formed dist-info directory whose METADATA and WHEEL lie.
        let w = py_wheel(
            t,
            &format!("evil{i}-1.0-py3-none-any.whl"),
            &[
                "--no-dist-info",
                &format!("torch-1.0.dist-info/METADATA=text:Name: {name}\nVersion: {version}\n"),
                &format!("torch-1.0.dist-info/WHEEL=text:Tag: {tag}\n"),
                &format!("torch/lib/libk.so@755={lib}"),
            ],
        );
        refused(&w, &out, &[], says);
    }
    // Nothing beside or above the output, nor in the absolute directory.
    let listing = |d: &Path| -> Vec<String> {
        walkdir::WalkDir::new(d)
            .min_depth(1)
            .into_iter()
            .map(|e| {
                e.unwrap()
                    .path()
                    .strip_prefix(t)
                    .unwrap()
                    .display()
                    .to_string()
            })
            .filter(|p| !p.ends_with(".whl"))
            .collect()
    };
    assert_eq!(listing(&abs), Vec::<String>::new());
    assert_eq!(
        listing(t),
        ["abs", "deep", "deep/a", "deep/a/b", "deep/a/b/out"]
    );
}

/// Issue #27 items 20 and 23: a wheel whose RECORD does not match its contents is
/// refused (it would get a fresh, matching RECORD), or split with a warning under
/// `--ignore-record`; member names holding `"`, `,` or a newline (quoted in RECORD by
/// Python's csv module) are split, and the output's RECORD lists them again.
#[test]
fn record_is_checked_and_read_as_csv() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    if tool("python3").is_none() {
        return;
    }
    let lib = fixtures().join("libkernels.so").display().to_string();
    let fat = format!("torch/lib/libk.so@755={lib}");
    let common = [
        "--name",
        "torch",
        "--version",
        "1.0",
        "--tag",
        "py3-none-any",
    ];
    let odd = [
        "torch/data/a \"quoted\" name.txt=text:q",
        "torch/data/with,comma.txt=text:c",
        "torch/data/two\nlines.txt=text:n",
    ];
    let w = py_wheel(
        t,
        "torch-1.0-py3-none-any.whl",
        &[&common[..], &[&fat], &odd].concat(),
    );
    let out = t.join("out");
    std::fs::create_dir(&out).unwrap();
    let o = split_wheel(&w, &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let host = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("torch-1.0")
        })
        .unwrap();
    // Python reads the host wheel's RECORD back with the csv module: every odd name
    // is there, with three fields.
    let check = "import csv,io,sys,zipfile\n\
        z=zipfile.ZipFile(sys.argv[1]); r=[n for n in z.namelist() if n.endswith('/RECORD')][0]\n\
        rows=list(csv.reader(io.StringIO(z.read(r).decode())))\n\
        names={x[0] for x in rows}; assert all(len(x)==3 for x in rows), rows\n\
        missing=[n for n in z.namelist() if n not in names]; assert not missing, missing\n\
        print(len(rows))";
    let o = Command::new("python3")
        .args(["-c", check])
        .arg(&host)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // The split hashes each member as it reads it: a tampered hash is found on a
    // rewritten binary and on a member copied as it is, each named.
    for (i, (tampered, name)) in [
        ("torch/lib/libk.so", "tampered"),
        ("torch/data/with,comma.txt", "tamperedtext"),
    ]
    .into_iter()
    .enumerate()
    {
        let bad = py_wheel(
            t,
            &format!("{name}-1.0-py3-none-any.whl"),
            &[&common[..], &[&fat], &odd, &["--tamper", tampered]].concat(),
        );
        let dir = t.join(format!("refused{i}"));
        std::fs::create_dir(&dir).unwrap();
        let msg = refused(&bad, &dir, &[], "its RECORD does not match its contents");
        assert!(
            msg.contains(&format!("{tampered}: RECORD hash")) && msg.contains("(1 problem(s))"),
            "{msg}"
        );
    }
    let bad = py_wheel(
        t,
        "tampered-1.0-py3-none-any.whl",
        &[&common[..], &[&fat, "--tamper", "torch/lib/libk.so"]].concat(),
    );
    let out2 = t.join("out2");
    std::fs::create_dir(&out2).unwrap();
    let o = split_wheel(&bad, &out2, &["--ignore-record"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("split anyway: --ignore-record"),
        "{}",
        stderr(&o)
    );
}

/// Issue #29 item 6: `wheel split --target gfx9999` names the unknown target instead
/// of splitting nothing.
#[test]
fn an_unknown_target_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(whl) = fixture_wheel(tmp.path()) else {
        return;
    };
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    refused(
        &whl,
        &out,
        &["--target", "gfx9999"],
        "unknown target(s) gfx9999",
    );
}

/// #30 item 4: a wheel split stops when cancelled (Esc in the TUI, Ctrl-C on the
/// command line): nothing is written, the output directory it would have created is
/// not left behind, and the result says cancelled.
#[test]
fn a_cancelled_wheel_split_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(whl) = fixture_wheel(tmp.path()) else {
        return;
    };
    let out = tmp.path().join("dist");
    let opts = kpack::wheel_split::WheelSplitOptions::new("amd-torch-device", "torch/");
    opts.cancel.cancel();
    let r = kpack::wheel_split::split_wheel(&whl, &out, &opts, &kpack::event::NoEvents);
    assert!(matches!(r, Err(kpack::Error::Cancelled)), "{r:?}");
    assert!(!out.exists());
}

/// #29 item 5: the device wheels of a manylinux wheel carry its tags (the file name's
/// compressed set, every tag a WHEEL Tag line), as pip's own parser reads them; the
/// regenerated dist-info files keep the input's modes; WHEEL disagreeing with the
/// file name is a warning.
#[test]
fn device_wheels_carry_the_host_wheels_tags_and_modes() {
    let Some(py) = tool("python3") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let tag = "cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64";
    let lib = fixtures().join("libkernels.so");
    let whl = py_wheel(
        tmp.path(),
        &format!("torch-2.10.0-{tag}.whl"),
        &[
            "--name",
            "torch",
            "--version",
            "2.10.0",
            "--tag",
            tag,
            "--dist-info-mode",
            "664",
            &format!("torch/lib/libkernels.so@755={}", lib.display()),
        ],
    );
    let out = tmp.path().join("dist");
    let o = split_wheel(&whl, &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("disagree"), "{}", stderr(&o));
    let device: Vec<String> = names(&out)
        .into_iter()
        .filter(|n| n.starts_with("amd_torch_device_"))
        .collect();
    assert!(!device.is_empty());
    // pip's parser: each device wheel's file-name tags = its WHEEL Tag lines = the
    // input's file-name tags.
    let check = r#"
import sys, zipfile
from pip._vendor.packaging.utils import parse_wheel_filename
want = sorted(str(t) for t in parse_wheel_filename(sys.argv[1])[3])
for p in sys.argv[2:]:
    name = p.rsplit("/", 1)[-1]
    tags = sorted(str(t) for t in parse_wheel_filename(name)[3])
    z = zipfile.ZipFile(p)
    wheel = next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))
    lines = sorted(l[5:] for l in z.read(wheel).decode().splitlines() if l.startswith("Tag: "))
    assert tags == want == lines, (name, tags, want, lines)
    for i in z.infolist():
        if ".dist-info/" in i.filename:
            assert (i.external_attr >> 16) & 0o777 == 0o664, (name, i.filename, oct(i.external_attr >> 16))
print("ok", len(sys.argv) - 2)
"#;
    let mut args = vec![
        "-c".to_string(),
        check.to_string(),
        whl.file_name().unwrap().to_string_lossy().into_owned(),
    ];
    args.extend(device.iter().map(|n| out.join(n).display().to_string()));
    let o = Command::new(&py).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // The host wheel's regenerated METADATA and RECORD keep 0664 too.
    let host = Wheel::open(&out.join(whl.file_name().unwrap())).unwrap();
    for f in ["METADATA", "RECORD"] {
        let m = host.member(&format!("torch-2.10.0.dist-info/{f}")).unwrap();
        assert_eq!(m.permissions(), 0o664, "{f}");
    }

    // WHEEL says linux_x86_64 while the name says manylinux: warned, and the device
    // wheels take the name's tags (the host wheel keeps the name).
    let odd = tmp.path().join("odd");
    std::fs::create_dir(&odd).unwrap();
    let whl = py_wheel(
        &odd,
        &format!("torch-2.10.0-{tag}.whl"),
        &[
            "--name",
            "torch",
            "--version",
            "2.10.0",
            "--tag",
            tag,
            "--wheel-tag",
            "cp311-cp311-linux_x86_64",
            &format!("torch/lib/libkernels.so@755={}", lib.display()),
        ],
    );
    let out = odd.join("dist");
    let o = split_wheel(&whl, &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("WHEEL's Tag lines (cp311-cp311-linux_x86_64) disagree"),
        "{}",
        stderr(&o)
    );
    assert!(
        names(&out).iter().all(|n| n.contains(tag)),
        "{:?}",
        names(&out)
    );
}

/// #29 item 6: a wheel whose fat binaries sit outside the overlay root (auditwheel's
/// `<name>.libs/`) is refused with where they are; an output larger than its input
/// says why.
#[test]
fn wheel_split_says_where_the_fat_binaries_are_and_why_output_grew() {
    if tool("python3").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let fx = fixtures();
    let whl = py_wheel(
        tmp.path(),
        "libs-1.0-py3-none-any.whl",
        &[
            "--name",
            "libs",
            "--version",
            "1.0",
            &format!(
                "libs.libs/libkernels.so@755={}",
                fx.join("libkernels.so").display()
            ),
            "libs/__init__.py=text:x",
        ],
    );
    let out = tmp.path().join("out");
    let o = kpack(&[
        "wheel",
        "split",
        whl.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--device-package-prefix",
        "p",
        "--overlay-root",
        "libs",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(
            "no fat binaries under 'libs' (nothing to split); the wheel's fat binaries are \
             elsewhere: libs.libs/libkernels.so"
        ),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists(), "an output directory was left");
    // Only compressed bundles: one zstd frame per code object takes more room.
    let whl = py_wheel(
        tmp.path(),
        "z-1.0-py3-none-any.whl",
        &[
            "--name",
            "z",
            "--version",
            "1.0",
            &format!(
                "z/lib/libkernels_z.so@755={}",
                fx.join("libkernels_z.so").display()
            ),
        ],
    );
    let o = kpack(&[
        "wheel",
        "split",
        whl.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--device-package-prefix",
        "p",
        "--overlay-root",
        "z",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o)
            .contains("the wheels together are larger than the input: bundles stored compressed"),
        "{}",
        stdout(&o)
    );
}

/// #30 item 4: a member's inflation looks at the stop flag as it goes (a cancel does
/// not wait for a gigabyte library to be inflated): cancelled at once, or the same
/// bytes as without the flag.
#[test]
fn a_members_inflation_stops_when_told() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(whl) = fixture_wheel(tmp.path()) else {
        return;
    };
    let w = kpack::wheel::Wheel::open(&whl).unwrap();
    let m = w.member("torch/lib/libkernels_z.so").unwrap();
    let r = w.contents_until(m, tmp.path(), &|| true);
    assert!(matches!(r, Err(kpack::Error::Cancelled)), "{:?}", r.err());
    let whole = w.contents(m, tmp.path()).unwrap();
    let seen = std::cell::Cell::new(0);
    let again = w
        .contents_until(m, tmp.path(), &|| {
            seen.set(seen.get() + 1);
            false
        })
        .unwrap();
    assert_eq!(&*whole, &*again);
    assert!(seen.get() >= 1);
    assert_eq!(
        &*whole,
        std::fs::read(fixtures().join("libkernels_z.so"))
            .unwrap()
            .as_slice()
    );
}
