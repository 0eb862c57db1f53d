//! phc end to end: scheduling and the jobserver with a scripted compiler (fast,
//! exact timing), then byte identity with the real compilers and a real `make -j2`.

mod common;

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const PHC: &str = env!("CARGO_BIN_EXE_phc");

/// A fake compiler that answers `-###` like clang, sleeps in device compiles (logging
/// start and end with nanosecond times), and a fake bundler that concatenates.
const FAKECC: &str = r#"#!/bin/bash
out=""; archs=(); dev=0; host=0; probe=0; prev=""; bundle=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out="$a"
  case "$a" in
    "-###") probe=1;;
    --offload-arch=*) archs+=("${a#--offload-arch=}");;
    --offload-device-only) dev=1;;
    --offload-host-only) host=1;;
    *.hipfb) bundle="$a";;
  esac
  prev="$a"
done
if [ $probe = 1 ]; then
  t="host-x86_64-unknown-linux"; for x in "${archs[@]}"; do t="$t,hipv4-amdgcn-amd-amdhsa--$x"; done
  echo "\"$FAKE_DIR/clang-offload-bundler\" \"-type=o\" \"-targets=$t\" \"-input=/dev/null\" \"-output=/tmp/x.hipfb\"" >&2
  echo "\"$FAKE_DIR/fakecc\" \"-cc1\" \"-fcuda-include-gpubinary\" \"/tmp/x.hipfb\" \"-cuid=1234\"" >&2
  exit 0
fi
if [ $dev = 1 ]; then
  arch="${archs[-1]}"
  echo "start $arch $(date +%s%N)" >> "$FAKE_LOG"
  trap 'kill $! 2>/dev/null; echo "killed $arch" >> "$FAKE_LOG"; exit 130' INT TERM
  sleep "${FAKE_SLEEP:-0.3}" & wait $!
  echo "end $arch $(date +%s%N)" >> "$FAKE_LOG"
  if [ "$arch" = "$FAKE_FAIL" ]; then echo "error: $arch failed" >&2; exit 3; fi
  echo "code for $arch" > "$out"; exit 0
fi
if [ $host = 1 ]; then { echo host; cat "$bundle"; } > "$out"; exit 0; fi
exit 0
"#;

const FAKE_BUNDLER: &str = r#"#!/bin/bash
ins=(); out=""
for a in "$@"; do case "$a" in -input=*) ins+=("${a#-input=}");; -output=*) out="${a#-output=}";; esac; done
cat "${ins[@]}" > "$out"
"#;

struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn new() -> Fake {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [("fakecc", FAKECC), ("clang-offload-bundler", FAKE_BUNDLER)] {
            let p = dir.path().join(name);
            fs::write(&p, text).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        }
        fs::create_dir(dir.path().join("tmp")).unwrap();
        Fake { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    fn command(&self, archs: &[&str]) -> Command {
        let mut c = Command::new(PHC);
        c.arg(self.path("fakecc"))
            .args(["-c", "k.hip", "-o"])
            .arg(self.path("k.o"))
            .args(archs.iter().map(|a| format!("--offload-arch={a}")))
            .current_dir(self.dir.path())
            .env("FAKE_DIR", self.dir.path())
            .env("FAKE_LOG", self.path("log"))
            .env("TMPDIR", self.path("tmp"))
            .env_remove("MAKEFLAGS")
            .env_remove("CARGO_MAKEFLAGS")
            .env_remove("MFLAGS")
            .env_remove("PHC_DEBUG");
        c
    }

    /// (arch, start ns, end ns) of each device compile.
    fn spans(&self) -> Vec<(String, u128, u128)> {
        let log = fs::read_to_string(self.path("log")).unwrap_or_default();
        let mut starts = std::collections::HashMap::new();
        let mut out = Vec::new();
        for l in log.lines() {
            let f: Vec<&str> = l.split(' ').collect();
            match f.as_slice() {
                ["start", a, t] => {
                    starts.insert(a.to_string(), t.parse::<u128>().unwrap());
                }
                ["end", a, t] => out.push((a.to_string(), starts[*a], t.parse().unwrap())),
                _ => {}
            }
        }
        out
    }

    fn max_parallel(&self) -> usize {
        let spans = self.spans();
        let mut ev: Vec<(u128, i32)> = spans
            .iter()
            .flat_map(|(_, s, e)| [(*s, 1), (*e, -1)])
            .collect();
        ev.sort_by_key(|&(t, d)| (t, d));
        let (mut cur, mut max) = (0i32, 0i32);
        for (_, d) in ev {
            cur += d;
            max = max.max(cur);
        }
        max as usize
    }

    fn tmp_is_empty(&self) -> bool {
        fs::read_dir(self.path("tmp")).unwrap().next().is_none()
    }
}

/// A test jobserver: a fifo holding `tokens` tokens (the `-j` of make minus one).
struct FifoServer {
    path: PathBuf,
    keep: File,
}

impl FifoServer {
    fn new(dir: &Path, tokens: usize) -> FifoServer {
        let path = dir.join("jobserver.fifo");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // Read-write and non-blocking: the test never hangs on the fifo.
        let keep = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .unwrap();
        use std::io::Write;
        (&keep).write_all(&vec![b'+'; tokens]).unwrap();
        FifoServer { path, keep }
    }

    fn makeflags(&self, j: usize) -> String {
        format!(" -j{j} --jobserver-auth=fifo:{}", self.path.display())
    }

    /// Drain and count the tokens in the pipe.
    fn count(&self) -> usize {
        let mut n = 0;
        let mut buf = [0u8; 64];
        loop {
            match (&self.keep).read(&mut buf) {
                Ok(0) => break,
                Ok(k) => {
                    assert!(buf[..k].iter().all(|b| *b == b'+'), "a token byte changed");
                    n += k
                }
                Err(_) => break,
            }
        }
        n
    }
}

fn run(mut c: Command) -> Output {
    c.output().unwrap()
}

#[test]
fn fifo_jobserver_caps_concurrency_and_every_token_comes_back() {
    let f = Fake::new();
    let server = FifoServer::new(f.dir.path(), 2);
    let mut c = f.command(&["gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030", "gfx1100"]);
    c.env("MAKEFLAGS", server.makeflags(3));
    let o = run(c);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(f.spans().len(), 6);
    let max = f.max_parallel();
    assert!(max <= 3, "2 tokens + the implicit slot allow 3, saw {max}");
    assert!(max >= 2, "tokens were used: {max}");
    assert_eq!(server.count(), 2, "every token back, none invented");
    let obj = fs::read_to_string(f.path("k.o")).unwrap();
    // Host first, then the bundle's inputs in the driver's target order.
    assert!(
        obj.starts_with("host\ncode for gfx900\ncode for gfx906\n"),
        "{obj}"
    );
    assert!(f.tmp_is_empty(), "temp directory removed");
}

#[test]
fn without_a_jobserver_j_limits_locally() {
    let f = Fake::new();
    let mut c = f.command(&["gfx900", "gfx906", "gfx908"]);
    c.env("MAKEFLAGS", "-j1");
    assert!(run(c).status.success());
    assert_eq!(
        f.max_parallel(),
        1,
        "make -j1: one device compile at a time"
    );

    // No -j: PHC_JOBS, else the cores (at most one job per arch).
    let f = Fake::new();
    let mut c = f.command(&["gfx900", "gfx906", "gfx908"]);
    c.env("PHC_JOBS", "3");
    assert!(run(c).status.success());
    assert_eq!(f.max_parallel(), 3, "PHC_JOBS=3: three at once");
    let f = Fake::new();
    let mut c = f.command(&["gfx900", "gfx906", "gfx908"]);
    c.env_remove("PHC_JOBS");
    assert!(run(c).status.success());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        f.max_parallel() <= cores.min(3),
        "no -j: at most the cores ({cores}), saw {}",
        f.max_parallel()
    );

    // Advertised descriptors that are not open (a recipe without `+`): local limit.
    let f = Fake::new();
    let mut c = f.command(&["gfx900", "gfx906"]);
    c.env("MAKEFLAGS", "-j2 --jobserver-auth=57,58")
        .env("PHC_DEBUG", "1");
    let o = run(c);
    assert!(o.status.success());
    assert!(
        common::stderr(&o).contains("not open"),
        "{}",
        common::stderr(&o)
    );
}

#[test]
fn a_failing_arch_gives_its_status_once_and_no_object() {
    let f = Fake::new();
    let server = FifoServer::new(f.dir.path(), 3);
    let mut c = f.command(&["gfx900", "gfx906", "gfx908", "gfx90a"]);
    c.env("MAKEFLAGS", server.makeflags(4))
        .env("FAKE_FAIL", "gfx906");
    let o = run(c);
    assert_eq!(o.status.code(), Some(3), "the failing compile's status");
    assert_eq!(common::stderr(&o).matches("gfx906 failed").count(), 1);
    assert!(!f.path("k.o").exists(), "no object");
    assert_eq!(server.count(), 3);
    assert!(f.tmp_is_empty());
}

#[test]
fn sigint_stops_children_returns_tokens_and_reraises() {
    let f = Fake::new();
    let server = FifoServer::new(f.dir.path(), 2);
    let mut c = f.command(&["gfx900", "gfx906", "gfx908", "gfx90a"]);
    c.env("MAKEFLAGS", server.makeflags(3))
        .env("FAKE_SLEEP", "30")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let t0 = Instant::now();
    while fs::read_to_string(f.path("log"))
        .unwrap_or_default()
        .matches("start")
        .count()
        < 3
    {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "compiles did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "phc did not stop promptly"
    );
    assert_eq!(
        status.signal(),
        Some(libc::SIGINT),
        "died by the signal: {status:?}"
    );
    assert_eq!(server.count(), 2, "all tokens back after SIGINT");
    let log = fs::read_to_string(f.path("log")).unwrap();
    assert_eq!(log.matches("killed").count(), 3, "children stopped: {log}");
    assert!(!log.contains("end "), "{log}");
    assert!(f.tmp_is_empty(), "temp directory removed");
}

#[test]
fn pass_through_keeps_status_and_errors_are_clear() {
    let o = Command::new(PHC)
        .args(["sh", "-c", "exit 7"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(7));
    let o = Command::new(PHC).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(common::stderr(&o).contains("usage: phc"));
    // Its own --version and --help, not a compiler's.
    let o = Command::new(PHC).arg("--version").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(
        common::stdout(&o).starts_with("phc (kpack-tui) "),
        "{}",
        common::stdout(&o)
    );
    let o = Command::new(PHC).arg("--help").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(common::stdout(&o).contains("usage: phc"));
    let o = Command::new(PHC)
        .args(["/nonexistent/hipcc", "-c", "a.hip"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(127));
    assert!(common::stderr(&o).contains("phc: cannot run /nonexistent/hipcc"));
    // PHC_COMPILER supplies cmd[0].
    let o = Command::new(PHC)
        .env("PHC_COMPILER", "sh")
        .args(["-c", "exit 4"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4));
}

#[test]
fn an_unwritable_trace_warns_and_the_compile_goes_on() {
    let f = Fake::new();
    let mut c = f.command(&["gfx900", "gfx906"]);
    c.env("PHC_NINJA_TRACE", f.dir.path()); // a directory
    let o = run(c);
    assert!(o.status.success());
    assert!(common::stderr(&o).contains("continuing without a trace"));
    assert!(f.path("k.o").exists());
}

// ---- real compilers ----

fn src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/src")
        .join(name)
}

/// Compile `args` plainly and through phc in the same directory with the same `-o`,
/// and return both objects (and depfiles when `dep` is given), plus the trace.
fn both_ways(
    compiler: &str,
    args: &[&str],
    out: &str,
    dep: Option<&str>,
    env: &[(&str, &str)],
) -> (Vec<u8>, Vec<u8>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    for s in ["vadd.hip", "saxpy.hip", "counter.hip"] {
        fs::copy(src(s), dir.path().join(s)).unwrap();
    }
    let plain = Command::new(compiler)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        plain.status.success(),
        "{compiler} {args:?}: {}",
        common::stderr(&plain)
    );
    let want = fs::read(dir.path().join(out)).unwrap();
    let want_dep = dep.map(|d| fs::read_to_string(dir.path().join(d)).unwrap());
    fs::remove_file(dir.path().join(out)).unwrap();
    let trace = dir.path().join("phc.trace");
    let o = Command::new(PHC)
        .arg(compiler)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir.path())
        .env("PHC_NINJA_TRACE", &trace)
        .env("PHC_DEBUG", "1")
        .env_remove("MAKEFLAGS")
        .output()
        .unwrap();
    assert!(o.status.success(), "phc {args:?}: {}", common::stderr(&o));
    let got = fs::read(dir.path().join(out)).unwrap();
    if let (Some(d), Some(w)) = (dep, want_dep) {
        assert_eq!(
            fs::read_to_string(dir.path().join(d)).unwrap(),
            w,
            "depfile"
        );
    }
    let log = common::stderr(&o);
    (
        want,
        got,
        fs::read_to_string(trace).unwrap_or_default(),
        log,
    )
}

#[test]
fn hipcc_objects_are_byte_identical() {
    if common::tool("hipcc").is_none() {
        return;
    }
    let cases: &[(&[&str], &str, Option<&str>)] = &[
        (
            &[
                "-O2",
                "-c",
                "vadd.hip",
                "--offload-arch=gfx900",
                "--offload-arch=gfx906",
                "-o",
                "v.o",
            ],
            "v.o",
            None,
        ),
        (
            &[
                "-c",
                "counter.hip",
                "-MD",
                "-MF",
                "c.d",
                "--offload-arch=gfx906",
                "--offload-arch=gfx900",
                "--offload-arch=gfx906",
                "--offload-arch=gfx90a:xnack+",
                "-oc.o",
            ],
            "c.o",
            Some("c.d"),
        ),
        (
            &[
                "-O2",
                "-fPIC",
                "-c",
                "saxpy.hip",
                "--offload-arch=gfx1030",
                "--offload-arch=gfx908",
            ],
            "saxpy.o",
            None,
        ),
    ];
    for (args, out, dep) in cases {
        let (want, got, trace, log) = both_ways("hipcc", args, out, *dep, &[]);
        assert!(want == got, "phc object differs from hipcc's for {args:?}");
        // Behind the Perl wrapper phc runs its clang command itself, with the cuid
        // the plain command gets.
        assert!(log.contains("running it directly"), "{log}");
        assert!(log.contains("the driver's hash, reproduced"), "{log}");
        assert!(
            trace.contains(&format!("{out}::bundle")),
            "phc split the compile: {trace}"
        );
    }
}

#[test]
fn relocatable_device_code_is_split_and_byte_identical() {
    // -fgpu-rdc: device compiles write bitcode, the host compile runs beside them, and
    // the driver's bundler writes the object (spec §1.17). Symbols are named after the
    // cuid, so this also proves the cuid is the plain command's.
    let mut cases: Vec<(&str, Vec<&str>, &str, Option<&str>)> = Vec::new();
    if common::tool("clang++-19").is_some() {
        cases.push((
            "clang++-19",
            vec![
                "-x",
                "hip",
                "--rocm-path=/usr",
                "--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
                "-fgpu-rdc",
                "-O2",
                "-c",
                "counter.hip",
                "--offload-arch=gfx900",
                "--offload-arch=gfx90a:xnack+",
                "-MD",
                "-o",
                "r.o",
            ],
            "r.o",
            Some("r.d"),
        ));
    }
    if common::tool("hipcc").is_some() {
        cases.push((
            "hipcc",
            vec![
                "-fgpu-rdc",
                "-c",
                "vadd.hip",
                "--offload-arch=gfx906",
                "--offload-arch=gfx1030",
                "-MD",
                "-MF",
                "v.d",
                "-o",
                "v.o",
            ],
            "v.o",
            Some("v.d"),
        ));
    }
    for (compiler, args, out, dep) in &cases {
        let (want, got, trace, log) = both_ways(compiler, args, out, *dep, &[]);
        assert!(
            want == got,
            "phc object differs from {compiler}'s for {args:?}"
        );
        assert!(trace.contains(&format!("{out}::bundle")), "{trace}");
        assert!(
            trace.lines().any(|l| l.split('\t').nth(3) == Some(*out)),
            "the host compile is traced: {trace}"
        );
        assert!(log.contains("the driver's hash, reproduced"), "{log}");
        assert!(!log.contains("fallback"), "{log}");
    }
    // A random cuid cannot be reproduced: the plain command runs instead.
    if let Some((compiler, args, out, _)) = cases.first() {
        let dir = tempfile::tempdir().unwrap();
        for s in ["vadd.hip", "counter.hip"] {
            fs::copy(src(s), dir.path().join(s)).unwrap();
        }
        let args: Vec<&str> = args
            .iter()
            .copied()
            .filter(|a| *a != "-MD")
            .chain(["-fuse-cuid=random"])
            .collect();
        let o = Command::new(PHC)
            .arg(compiler)
            .args(&args)
            .current_dir(dir.path())
            .env("PHC_DEBUG", "1")
            .env_remove("MAKEFLAGS")
            .output()
            .unwrap();
        let log = common::stderr(&o);
        assert!(o.status.success(), "{log}");
        assert!(
            log.contains("-fgpu-rdc needs the driver's own cuid"),
            "{log}"
        );
        assert!(dir.path().join(out).exists());
    }
}

#[test]
fn hipcc_with_flags_for_the_shell_is_run_as_hipcc_for_each_step() {
    if common::tool("hipcc").is_none() {
        return;
    }
    // hipcc pastes HIPCC_COMPILE_FLAGS_APPEND into the command it gives the shell, which
    // expands the variable: phc cannot run that command itself, so it runs hipcc.
    let args = [
        "-O2",
        "-c",
        "vadd.hip",
        "--offload-arch=gfx900",
        "--offload-arch=gfx906",
        "-o",
        "v.o",
    ];
    let env = [
        (
            "HIPCC_COMPILE_FLAGS_APPEND",
            "-DPHC_FROM_SHELL=$PHC_TEST_VALUE",
        ),
        ("PHC_TEST_VALUE", "7"),
    ];
    let (want, got, trace, log) = both_ways("hipcc", &args, "v.o", None, &env);
    assert!(want == got, "phc object differs from hipcc's");
    assert!(trace.contains("v.o::bundle"), "{trace}");
    assert!(log.contains("running hipcc for each step"), "{log}");
}

#[test]
fn clang19_compressed_objects_are_byte_identical() {
    if common::tool("clang++-19").is_none() {
        return;
    }
    let base = [
        "-x",
        "hip",
        "--rocm-path=/usr",
        "--rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
        "-O2",
        "-c",
    ];
    let cases: &[&[&str]] = &[
        &[
            "counter.hip",
            "--offload-compress",
            "--offload-arch=gfx900",
            "--offload-arch=gfx1030",
            "-o",
            "z.o",
        ],
        &[
            "vadd.hip",
            "--offload-compress",
            "--offload-compression-level=9",
            "--offload-arch=gfx90a:xnack-",
            "--offload-arch=gfx1030",
            "--offload-arch=gfx900",
            "-o",
            "z.o",
        ],
        &[
            "saxpy.hip",
            "--offload-arch=gfx906",
            "--offload-arch=gfx1030",
            "-o",
            "z.o",
        ],
    ];
    for extra in cases {
        let args: Vec<&str> = base.iter().chain(extra.iter()).copied().collect();
        let (want, got, trace, log) = both_ways("clang++-19", &args, "z.o", None, &[]);
        assert!(
            want == got,
            "phc object differs from clang-19's for {extra:?}"
        );
        assert!(trace.contains("z.o::bundle"), "{trace}");
        assert!(log.contains("the driver's hash, reproduced"), "{log}");
        assert!(
            !log.contains("running it directly"),
            "no wrapper here: {log}"
        );
    }
}

#[test]
fn a_real_failing_arch_fails_the_compile() {
    if common::tool("hipcc").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("bad.hip"),
        "#include <hip/hip_runtime.h>\n#if defined(__gfx906__)\n#error no gfx906 here\n#endif\n\
         __global__ void k(int *p) { *p = 1; }\n",
    )
    .unwrap();
    // With -fgpu-rdc the host compile runs beside the device compiles and writes
    // bad.o before the gfx906 compile fails: that host-only object must not stay.
    for extra in [None, Some("-fgpu-rdc")] {
        let o = Command::new(PHC)
            .args([
                "hipcc",
                "-c",
                "bad.hip",
                "--offload-arch=gfx900",
                "--offload-arch=gfx906",
                "-o",
                "bad.o",
            ])
            .args(extra)
            .current_dir(dir.path())
            // Slots for all three at once, so the host compile does finish.
            .env("MAKEFLAGS", "-j4")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", common::stderr(&o));
        assert_eq!(
            common::stderr(&o).matches("error: no gfx906 here").count(),
            1,
            "{}",
            common::stderr(&o)
        );
        assert!(!dir.path().join("bad.o").exists(), "{extra:?}");
    }
}

#[test]
fn make_j2_builds_through_phc_and_the_trace_loads() {
    if common::tool("hipcc").is_none() || common::tool("make").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for s in ["vadd.hip", "saxpy.hip", "counter.hip"] {
        fs::copy(src(s), dir.path().join(s)).unwrap();
    }
    fs::write(
        dir.path().join("Makefile"),
        format!(
            "ARCHS := --offload-arch=gfx900 --offload-arch=gfx906\n\
             all: vadd.o saxpy.o counter.o\n\
             %.o: %.hip\n\t+{PHC} hipcc -O2 -c $< $(ARCHS) -o $@\n"
        ),
    )
    .unwrap();
    let trace = dir.path().join("build.trace");
    let o = Command::new("make")
        .args(["-j2", "--no-print-directory"])
        .current_dir(dir.path())
        .env("PHC_NINJA_TRACE", &trace)
        .env("PHC_DEBUG", "1")
        .env_remove("MAKEFLAGS")
        .output()
        .unwrap();
    let err = common::stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("jobserver: Fifo") || err.contains("jobserver: Fds"),
        "{err}"
    );
    let t = kpack::trace::parse(&fs::read(&trace).unwrap());
    assert_eq!(t.diagnostic_count, 0);
    assert_eq!(t.builds.len(), 1);
    let a = kpack::trace::analysis::analyse(&t.builds[0]);
    assert_eq!(a.jobs, 3 * 4, "2 device + bundle + host per object");
    assert_eq!(a.per_arch.len(), 2);
    assert!(a.peak_parallelism >= 2);
}

/// Issue #19 item 25: a real hipcc compile through phc leaves no temporary
/// directory behind (plain hipcc leaves clang's empty ones; phc runs its children
/// with TMPDIR in its own temporary directory and removes it).
#[test]
fn a_compile_through_phc_leaves_no_temporary_directories() {
    if common::tool("hipcc").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fs::copy(src("vadd.hip"), dir.path().join("vadd.hip")).unwrap();
    let tmp = dir.path().join("tmp");
    fs::create_dir(&tmp).unwrap();
    let o = Command::new(PHC)
        .args([
            "hipcc",
            "-c",
            "--offload-arch=gfx900",
            "--offload-arch=gfx906",
            "vadd.hip",
            "-o",
            "v.o",
        ])
        .current_dir(dir.path())
        .env("TMPDIR", &tmp)
        .env_remove("MAKEFLAGS")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(dir.path().join("v.o").is_file());
    let left: Vec<_> = fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind in TMPDIR: {left:?}");
}

/// Issue #19 item 26: PHC_DEBUG=1 is a readable summary of the decisions (the plan
/// in one line); the driver's whole -### plan only at PHC_DEBUG=2.
#[test]
fn phc_debug_levels() {
    let f = Fake::new();
    let mut c = f.command(&["gfx900", "gfx906"]);
    c.env("PHC_DEBUG", "1");
    let o = run(c);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let e = common::stderr(&o);
    assert!(e.contains("phc: bundler ") && e.contains("targets "), "{e}");
    assert!(!e.contains("\"-cc1\""), "the raw plan at level 1:\n{e}");
    assert!(e.lines().count() <= 10, "{e}");
    let mut c = f.command(&["gfx900", "gfx906"]);
    c.env("PHC_DEBUG", "2");
    let e = common::stderr(&run(c));
    assert!(e.contains("\"-cc1\""), "{e}");
}

/// Issue #19 item 23: an error in the source fails every arch; it is printed once,
/// as the plain driver prints it, with the failing arch named.
#[test]
fn a_source_error_is_printed_once() {
    if common::tool("hipcc").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("broken.hip"),
        "#include <hip/hip_runtime.h>\n__global__ void k(int *p) { *p = undefined_name; }\n",
    )
    .unwrap();
    let o = Command::new(PHC)
        .args([
            "hipcc",
            "-c",
            "broken.hip",
            "--offload-arch=gfx900",
            "--offload-arch=gfx906",
            "--offload-arch=gfx908",
            "-o",
            "broken.o",
        ])
        .current_dir(dir.path())
        .env("MAKEFLAGS", "-j4")
        .output()
        .unwrap();
    let e = common::stderr(&o);
    assert_ne!(o.status.code(), Some(0));
    assert_eq!(e.matches("use of undeclared identifier").count(), 1, "{e}");
    assert!(e.contains("phc: stopped: the gfx9"), "{e}");
}
