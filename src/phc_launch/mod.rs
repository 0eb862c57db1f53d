//! The phc launcher: runs one compile as [`kpack::phc`] plans it. A process of its
//! own (it `exec`s, forwards signals, exits with its children's status), so it lives
//! with the binaries (`kpack-tui phc` and `phc`), not in the library.
//!
//! Exit paths: pass-through and serial fallback `exec` the original command (exact
//! status, signals, tty); a failing device compile exits with its status; the host
//! compile's status is phc's; INT/TERM/HUP are forwarded to the children, every token
//! is returned, the temp directory is removed and the signal is re-raised.

use kpack::phc::args::{self, CompileLine};
use kpack::phc::jobserver::{self, Pool, Take, Token};
use kpack::phc::trace::{Stamp, TraceFile};
use kpack::phc::{Env, probe};
use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
mod driver;
use driver::{choose_cuid, resolve_hipcc};

const USAGE: &str = "usage: phc <compiler> <args...>   (or PHC_COMPILER=<compiler> phc <args...>)\n\
       phc --generate complete-bash|complete-zsh|complete-fish|complete-powershell|man\n\
Splits a multi-arch HIP compile (-c with two or more --offload-arch) into parallel\n\
per-arch device compiles under the make jobserver; anything else runs unchanged.\n\
Environment: PHC_NINJA_TRACE=file, PHC_DEBUG=1 (decisions; 2: also the driver's\nplan), PHC_JOBSERVER=0, PHC_JOBS=n (device\ncompiles at once without a jobserver; default: the cores), PHC_COMPILER.";

/// Run phc on `argv` (everything after phc's own name). Returns the exit status;
/// pass-through and fallbacks replace the process and do not return on success.
pub fn main(argv: Vec<String>, env: &Env) -> i32 {
    if argv.len() == 1 && matches!(argv[0].as_str(), "--help" | "-h") {
        println!("{USAGE}");
        return 0;
    }
    if argv.len() == 1 && matches!(argv[0].as_str(), "--version" | "-V") {
        println!("phc (kpack-tui) {}", crate::version::VERSION);
        return 0;
    }
    let mut cmd = argv;
    if let Some(c) = &env.compiler {
        cmd.insert(0, c.clone());
    }
    if cmd.is_empty() {
        eprintln!("phc: no compiler command given\n{USAGE}");
        return 2;
    }
    let log = |msg: &str| {
        if env.debug {
            eprintln!("phc: {msg}");
        }
    };
    if cmd[1..].iter().any(|a| a == "-E") {
        if is_hip_compile(&cmd[1..]) {
            log("preprocess path: --offload-compress dropped, --no-offload-new-driver added");
            let mut v: Vec<String> = cmd
                .iter()
                .filter(|a| *a != "--offload-compress" && *a != "--offload-new-driver")
                .cloned()
                .collect();
            v.push("--no-offload-new-driver".into());
            return exec(&v);
        }
        log("pass-through: -E on a non-HIP command");
        return exec(&cmd);
    }
    let line = match args::analyse(&cmd) {
        Ok(l) => l,
        Err(why) => {
            log(&format!("pass-through: {why}"));
            return exec(&cmd);
        }
    };
    // The jobserver first, before any other descriptor is opened (spec §2.2).
    let pool = match open_pool(env, line.archs.len(), &log) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            log(&format!("serial: cannot create a token pipe: {e}"));
            return exec(&cmd);
        }
    };
    let mut trace = env.trace.as_ref().and_then(|p| match TraceFile::open(p) {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!(
                "phc: cannot open trace {}: {e} (continuing without a trace)",
                p.display()
            );
            None
        }
    });
    match parallel(&cmd, &line, env, &pool, trace.as_mut(), &log) {
        Flow::Exit(code) => code,
        Flow::Fallback(why) => {
            pool.release_all();
            log(&format!("serial fallback: {why}"));
            exec(&cmd)
        }
    }
}

/// Whether a command is a clang HIP compile (`-x hip`, a `.hip` input or an offload arch).
fn is_hip_compile(args: &[String]) -> bool {
    args.windows(2).any(|w| w[0] == "-x" && w[1] == "hip")
        || args
            .iter()
            .any(|a| a == "-xhip" || a.ends_with(".hip") || a.starts_with("--offload-arch="))
}

/// Replace this process with `cmd`. Returns only when that fails.
fn exec(cmd: &[String]) -> i32 {
    let err = Command::new(&cmd[0]).args(&cmd[1..]).exec();
    eprintln!("phc: cannot run {}: {err}", cmd[0]);
    if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

fn open_pool(env: &Env, archs: usize, log: &dyn Fn(&str)) -> std::io::Result<Pool> {
    let local = || {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let n = jobserver::local_slots(&env.makeflags, archs, env.jobs.unwrap_or(cores));
        log(&format!("no jobserver: {n} local slots"));
        Pool::local(n, env.debug)
    };
    if !env.jobserver {
        log("jobserver disabled by PHC_JOBSERVER");
        return local();
    }
    let Some(src) = jobserver::advertised(&env.makeflags) else {
        log("no jobserver advertised in MAKEFLAGS");
        return local();
    };
    let mut why = String::new();
    match Pool::open(src.clone(), env.debug, &mut why) {
        Some(p) => {
            log(&format!("jobserver: {src:?}"));
            Ok(p)
        }
        None => {
            log(&format!("jobserver unusable: {why}"));
            local()
        }
    }
}

enum Flow {
    Exit(i32),
    Fallback(String),
}

/// The exit code the shell would report for a child's status.
fn code_of(s: &ExitStatus) -> i32 {
    s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))
}

/// Events the scheduler waits for.
enum Ev {
    Token(Token),
    TokensGone,
    Done {
        job: usize,
        result: std::io::Result<Output>,
        end: Stamp,
    },
    Signal(i32),
}

/// Running children, so a signal can be forwarded to them.
type Pids = Arc<Mutex<Vec<u32>>>;

/// The temporary directory of this compile: every child runs with `TMPDIR` there,
/// so the driver's own temporary directories (clang leaves empty ones behind) go
/// when phc removes it. One compile per process: set once.
static CHILD_TMP: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

fn child(program: &str) -> Command {
    let mut c = Command::new(program);
    if let Some(t) = CHILD_TMP.get() {
        c.env("TMPDIR", t);
    }
    c
}

fn spawn(job: usize, program: &str, args: &[String], tx: &Sender<Ev>, pids: &Pids) {
    let child = child(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let tx = tx.clone();
    match child {
        Err(e) => {
            let _ = tx.send(Ev::Done {
                job,
                result: Err(e),
                end: Stamp::now(),
            });
        }
        Ok(child) => {
            let pid = child.id();
            lock(pids).push(pid);
            let pids = pids.clone();
            std::thread::spawn(move || {
                let result = child.wait_with_output();
                lock(&pids).retain(|p| *p != pid);
                let _ = tx.send(Ev::Done {
                    job,
                    result,
                    end: Stamp::now(),
                });
            });
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn forward(pids: &Pids, sig: i32) {
    let Ok(s) = nix::sys::signal::Signal::try_from(sig) else {
        return;
    };
    for p in lock(pids).iter() {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*p as i32), s);
    }
}

/// A finished child.
struct Finished {
    job: usize,
    start: Stamp,
    end: Stamp,
    result: std::io::Result<Output>,
}

impl Finished {
    fn status(&self) -> i32 {
        match &self.result {
            Ok(o) => code_of(&o.status),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 127,
            Err(_) => 126,
        }
    }

    fn emit(&self, what: &str) {
        match &self.result {
            Ok(o) => {
                let _ = std::io::stdout().write_all(&o.stdout);
                let _ = std::io::stdout().flush();
                let _ = std::io::stderr().write_all(&o.stderr);
            }
            Err(e) => eprintln!("phc: cannot run the {what}: {e}"),
        }
    }
}

/// The token helper: asks the pool for tokens while `want` is set.
struct Helper {
    stop: Arc<AtomicBool>,
    want: Arc<AtomicBool>,
    wake: File,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Helper {
    fn start(pool: Arc<Pool>, tx: Sender<Ev>) -> std::io::Result<Helper> {
        let (r, w) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
                .map_err(std::io::Error::from)?;
        let (wake_r, wake) = (File::from(r), File::from(w));
        let stop = Arc::new(AtomicBool::new(false));
        let want = Arc::new(AtomicBool::new(false));
        let (s2, w2) = (stop.clone(), want.clone());
        let thread = std::thread::spawn(move || {
            while !s2.load(Ordering::SeqCst) {
                if !w2.load(Ordering::SeqCst) {
                    std::thread::park_timeout(std::time::Duration::from_millis(50));
                    continue;
                }
                match pool.take(Some(&wake_r), 50) {
                    Take::Got(t) => {
                        if tx.send(Ev::Token(t)).is_err() {
                            pool.release(t);
                            break;
                        }
                    }
                    Take::NotNow => {}
                    Take::Gone => {
                        let _ = tx.send(Ev::TokensGone);
                        break;
                    }
                }
            }
        });
        Ok(Helper {
            stop,
            want,
            wake,
            thread: Some(thread),
        })
    }

    fn want(&self, yes: bool) {
        self.want.store(yes, Ordering::SeqCst);
        if yes && let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = (&self.wake).write(&[1]);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Slot a running device compile occupies.
#[derive(Clone, Copy)]
enum Slot {
    Implicit,
    Held(Token),
}

/// The device phase's outcome.
struct DevicePhase {
    done: Vec<Finished>,
    first_failure: Option<i32>,
    signal: Option<i32>,
}

#[allow(clippy::too_many_arguments)]
fn device_phase(
    compiler: &str,
    lines: &[Vec<String>],
    pool: &Arc<Pool>,
    rx: &Receiver<Ev>,
    tx: &Sender<Ev>,
    pids: &Pids,
    mut on_done: impl FnMut(&Finished),
) -> DevicePhase {
    let mut queue: VecDeque<usize> = (0..lines.len()).collect();
    let mut running: Vec<(usize, Slot, Stamp)> = Vec::new();
    let mut implicit_free = true;
    let mut out = DevicePhase {
        done: Vec::new(),
        first_failure: None,
        signal: None,
    };
    let mut helper = Helper::start(pool.clone(), tx.clone()).ok();
    let stopping = |o: &DevicePhase| o.first_failure.is_some() || o.signal.is_some();
    let launch = |j: usize| spawn(j, compiler, &lines[j], tx, pids);
    loop {
        // I2/I4: the implicit slot always runs a job when one is queued.
        if implicit_free
            && !stopping(&out)
            && let Some(j) = queue.pop_front()
        {
            implicit_free = false;
            running.push((j, Slot::Implicit, Stamp::now()));
            launch(j);
        }
        // I3: ask for tokens only while work is queued.
        if let Some(h) = &helper {
            h.want(!queue.is_empty() && !stopping(&out));
        }
        if running.is_empty() && (queue.is_empty() || stopping(&out)) {
            break;
        }
        let Ok(ev) = rx.recv() else { break };
        match ev {
            Ev::Token(t) => {
                let next = (!stopping(&out)).then(|| queue.pop_front()).flatten();
                hand_token(t, next, &mut running, pool, launch);
            }
            Ev::TokensGone => helper = None,
            Ev::Signal(s) => {
                out.signal.get_or_insert(s);
                forward(pids, s);
            }
            Ev::Done { job, result, end } => {
                let Some(pos) = running.iter().position(|r| r.0 == job) else {
                    continue;
                };
                let (_, slot, start) = running.swap_remove(pos);
                let f = Finished {
                    job,
                    start,
                    end,
                    result,
                };
                on_done(&f);
                let ok = matches!(&f.result, Ok(o) if o.status.success());
                if !ok && out.first_failure.is_none() {
                    out.first_failure = Some(f.status());
                }
                out.done.push(f);
                match slot {
                    Slot::Implicit => implicit_free = true,
                    Slot::Held(t) => {
                        // I4: pass the token straight to the next queued job.
                        let next = (!stopping(&out)).then(|| queue.pop_front()).flatten();
                        hand_token(t, next, &mut running, pool, launch);
                    }
                }
            }
        }
    }
    if let Some(mut h) = helper {
        h.stop();
    }
    // I5/I6: nothing held after the device phase, whatever happened.
    pool.release_all();
    out
}

/// A token held: it runs job `next`, or goes back to the pool when there is none to
/// run (nothing queued, or the phase is stopping).
fn hand_token(
    t: Token,
    next: Option<usize>,
    running: &mut Vec<(usize, Slot, Stamp)>,
    pool: &Pool,
    start: impl Fn(usize),
) {
    match next {
        Some(j) => {
            running.push((j, Slot::Held(t), Stamp::now()));
            start(j);
        }
        None => pool.release(t),
    }
}

/// Run one child on the implicit slot, forwarding signals to it.
fn serial_step(
    program: &str,
    args: &[String],
    rx: &Receiver<Ev>,
    tx: &Sender<Ev>,
    pids: &Pids,
    start: Stamp,
) -> (Finished, Option<i32>) {
    spawn(usize::MAX, program, args, tx, pids);
    let mut signal = None;
    let (end, result) = loop {
        match rx.recv() {
            Ok(Ev::Done { job, result, end }) if job == usize::MAX => break (end, result),
            Ok(Ev::Signal(s)) => {
                signal.get_or_insert(s);
                forward(pids, s);
            }
            // Tokens still queued from the device phase were returned by release_all.
            Ok(_) => {}
            Err(_) => {
                break (
                    Stamp::now(),
                    Err(std::io::Error::other("scheduler channel closed")),
                );
            }
        }
    };
    let done = Finished {
        job: usize::MAX,
        start,
        end,
        result,
    };
    (done, signal)
}

/// Re-raise a signal after cleanup so the parent sees death by that signal.
fn die_by(sig: i32, tmp: tempfile::TempDir) -> i32 {
    drop(tmp);
    let _ = signal_hook::low_level::emulate_default_handler(sig);
    128 + sig
}

fn parallel(
    cmd: &[String],
    line: &CompileLine,
    env: &Env,
    pool: &Arc<Pool>,
    mut trace: Option<&mut TraceFile>,
    log: &dyn Fn(&str),
) -> Flow {
    let tmp = match tempfile::Builder::new().prefix("phc-").tempdir() {
        Ok(t) => t,
        Err(e) => return Flow::Fallback(format!("no temporary directory: {e}")),
    };
    let _ = CHILD_TMP.set(tmp.path().to_path_buf());
    // Ask the driver for its plan (a Perl hipcc also prints the clang command it runs).
    let mut probe_cmd = cmd.to_vec();
    probe_cmd.push("-###".into());
    let probe = match child(&cmd[0])
        .args(&probe_cmd[1..])
        .env("HIPCC_VERBOSE", "1")
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) => o,
        Err(e) => return Flow::Fallback(format!("the probe did not start: {e}")),
    };
    if env.debug_plan {
        let _ = std::io::stderr().write_all(&probe.stderr);
    }
    if !probe.status.success() {
        return Flow::Fallback("the driver's -### probe failed".into());
    }
    let stdout = String::from_utf8_lossy(&probe.stdout);
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&probe.stderr),
        stdout
            .lines()
            .filter(|l| !l.starts_with(probe::HIPCC_CMD))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let plan = match probe::read_plan(&text, |p| p.is_file()) {
        Ok(p) => p,
        Err(probe::Unfit(why)) => return Flow::Fallback(why),
    };
    // Behind a Perl hipcc, run the clang command it runs: the same compiles without a
    // Perl start for each step, and a cuid phc can reproduce.
    let direct = resolve_hipcc(&stdout, line, log);
    let (line, probe_args) = match &direct {
        Some((l, probe_args)) => (l, &probe_args[..]),
        None => (line, &probe_cmd[1..]),
    };
    let compiler = &line.compiler;
    match (line.rdc, plan.embedded) {
        (false, false) => {
            return Flow::Fallback(
                "no host compile embeds the bundle (the new offload driver?)".into(),
            );
        }
        (true, true) => return Flow::Fallback("-fgpu-rdc, but the driver embeds a bundle".into()),
        (true, false) if plan.output != line.output => {
            return Flow::Fallback(format!(
                "the driver bundles into {} rather than {}",
                plan.output, line.output
            ));
        }
        _ => {}
    }
    let order = match probe::match_targets(&plan.targets, &line.archs) {
        Ok(o) => o,
        Err(probe::Unfit(why)) => return Flow::Fallback(why),
    };
    let (cuid, exact) = choose_cuid(line, &plan, probe_args, log);
    if line.rdc && !exact {
        // Relocatable device code names symbols after the cuid: a different one would
        // give a different object.
        return Flow::Fallback("-fgpu-rdc needs the driver's own cuid".into());
    }
    log(&format!(
        "bundler {} targets {} extras {:?} cuid {}",
        plan.bundler.display(),
        plan.targets.join(","),
        plan.extras,
        cuid.as_deref().unwrap_or("(user's or none)")
    ));
    let cuid_args: Vec<String> = cuid.iter().map(|c| format!("-cuid={c}")).collect();
    let (tx, rx) = channel::<Ev>();
    let pids: Pids = Arc::new(Mutex::new(Vec::new()));
    // Signals go through the scheduler's channel: forward, clean up, re-raise.
    if let Ok(mut signals) = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ]) {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for s in signals.forever() {
                if tx.send(Ev::Signal(s)).is_err() {
                    break;
                }
            }
        });
    }

    let outs: Vec<PathBuf> = (0..line.archs.len())
        .map(|i| tmp.path().join(format!("dev{i}.out")))
        .collect();
    let bundle = tmp.path().join("bundle.hipfb");
    let dev_lines: Vec<Vec<String>> = line
        .archs
        .iter()
        .zip(&outs)
        .map(|(a, o)| args::device_args(line, a, &cuid_args, o))
        .collect();
    // The driver drops -cuid on host-only compiles (clang 15 and 19), so the host cc1
    // gets it directly too; when the driver does pass it, it is the same value.
    let embed = (!line.rdc).then_some(bundle.as_path());
    let mut host = args::host_args(line, embed, &cuid_args);
    if let Some(c) = &cuid {
        host.extend(["-Xclang".to_string(), format!("-cuid={c}")]);
    }
    // With relocatable device code the host compile needs no bundle: it runs with the
    // device compiles, and the bundler writes the object last.
    let mut jobs = dev_lines;
    if line.rdc {
        jobs.push(host.clone());
    }

    let name = line.output.clone();
    let dev = device_phase(compiler, &jobs, pool, &rx, &tx, &pids, |f| {
        if let Some(t) = trace.as_deref_mut() {
            match line.archs.get(f.job) {
                Some(arch) => t.record(&f.start, &f.end, &format!("{name}::{arch}")),
                None => t.record(&f.start, &f.end, &name),
            }
        }
    });
    // With relocatable device code the host compile wrote the user's -o: a host-only
    // object must not stay there when the compile as a whole fails (clang, too, removes
    // its outputs on failure).
    let unfinished = || {
        if line.rdc {
            let _ = std::fs::remove_file(&line.output);
        }
    };
    if let Some(sig) = dev.signal {
        unfinished();
        return Flow::Exit(die_by(sig, tmp));
    }
    if let Some(code) = dev.first_failure {
        unfinished();
        // As the plain driver: the first failure's messages once (an error in the
        // source fails every arch alike; its copies are not repeated), naming the arch.
        if let Some(f) = dev
            .done
            .iter()
            .find(|f| !matches!(&f.result, Ok(o) if o.status.success()))
        {
            f.emit(step(f, line));
            let what = match line.archs.get(f.job) {
                Some(a) => format!("the {a} device compile"),
                None => "the host compile".to_string(),
            };
            let others = dev.done.len() - 1;
            eprintln!(
                "phc: stopped: {what} exited with status {}{}",
                f.status(),
                if others > 0 {
                    format!(" (the output of {others} other compile(s) is not repeated)")
                } else {
                    String::new()
                }
            );
        }
        return Flow::Exit(code);
    }
    // The bundle. With relocatable device code the bundler writes the object itself,
    // from the device bitcode and the host object, which is first moved aside from the
    // user's -o in its own directory; otherwise the host entry is empty and the bundle
    // is embedded by the host compile after.
    let (host_input, bundle_out, aside) = if line.rdc {
        let out = PathBuf::from(&line.output);
        let aside = out.with_file_name(format!(
            ".{}.phc-host-{}",
            out.file_name().map_or("o".into(), |n| n.to_string_lossy()),
            std::process::id()
        ));
        if let Err(e) = std::fs::rename(&out, &aside) {
            return Flow::Fallback(format!("cannot move the host object aside: {e}"));
        }
        (aside.clone(), out, Some(aside))
    } else {
        (PathBuf::from("/dev/null"), bundle.clone(), None)
    };
    let mut bargs = vec!["-type=o".to_string()];
    bargs.extend(plan.extras.iter().cloned());
    bargs.push(format!("-targets={}", plan.targets.join(",")));
    for o in &order {
        let input = match o {
            None => &host_input,
            Some(i) => &outs[*i],
        };
        bargs.push(format!("-input={}", input.display()));
    }
    bargs.push(format!("-output={}", bundle_out.display()));
    // On the implicit slot, with no token held.
    let bstart = dev
        .done
        .iter()
        .map(|f| f.end)
        .max_by_key(|s| s.wall_ms())
        .unwrap_or_else(Stamp::now);
    let bundler = plan.bundler.to_string_lossy().into_owned();
    let (b, sig) = serial_step(&bundler, &bargs, &rx, &tx, &pids, bstart);
    if let Some(a) = &aside {
        let _ = std::fs::remove_file(a);
    }
    if let Some(sig) = sig {
        unfinished();
        return Flow::Exit(die_by(sig, tmp));
    }
    if let Some(t) = trace.as_deref_mut() {
        t.record(&b.start, &b.end, &format!("{name}::bundle"));
    }
    if b.status() != 0 {
        if env.debug {
            b.emit("bundler");
        }
        drop(tmp);
        return Flow::Fallback(format!("the bundler exited with {}", b.status()));
    }
    for f in &dev.done {
        f.emit(step(f, line));
    }
    b.emit("bundler");
    if line.rdc {
        return Flow::Exit(0);
    }
    // Host compile, starting exactly where the bundle ended.
    let (h, sig) = serial_step(compiler, &host, &rx, &tx, &pids, b.end);
    if let Some(t) = trace {
        t.record(&h.start, &h.end, &name);
    }
    if let Some(sig) = sig {
        return Flow::Exit(die_by(sig, tmp));
    }
    h.emit("host compile");
    Flow::Exit(h.status())
}

/// What a job of the parallel phase compiled: one job per arch, then (RDC) the host.
fn step(f: &Finished, line: &CompileLine) -> &'static str {
    if f.job < line.archs.len() {
        "device compile"
    } else {
        "host compile"
    }
}
