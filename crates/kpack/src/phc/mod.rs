//! phc's core: how to split one multi-arch HIP compile into a device compile per
//! arch, run in parallel under a make jobserver, bundled with the driver's own
//! `clang-offload-bundler`, with the host compile embedding the bundle (with
//! `-fgpu-rdc`: the host compile runs beside the device compiles and the bundler
//! writes the object last). The object is byte-identical to the plain command's.
//! Behind ROCm's Perl `hipcc`, the steps run the clang command hipcc itself runs
//! (read from the probe, see [`probe::hipcc_command`]), saving a Perl start per step.
//!
//! Spec: `shared/spec/phc-and-traces.md` §1-3. Layout: [`args`] reads command lines,
//! [`probe`] reads the driver's `-###` plan, [`jobserver`] is the token client,
//! [`trace`] writes `PHC_NINJA_TRACE`. The launcher that schedules, runs, forwards
//! signals and `exec`s lives with the binaries (`kpack-tui phc` and `phc`): it is a
//! process of its own, and the library installs no signal handler.

pub mod args;
pub mod jobserver;
pub mod probe;
pub mod trace;

use jobserver::Source;
use std::path::PathBuf;

/// phc's environment, read once.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `PHC_COMPILER`, inserted as `cmd[0]` when non-empty.
    pub compiler: Option<String>,
    /// `PHC_NINJA_TRACE`.
    pub trace: Option<PathBuf>,
    /// `PHC_DEBUG` set and not `0`: one line per decision (the plan in summary).
    pub debug: bool,
    /// `PHC_DEBUG=2` or more: also the driver's whole `-###` plan.
    pub debug_plan: bool,
    /// `PHC_JOBSERVER` not set to empty or `0`.
    pub jobserver: bool,
    /// `MAKEFLAGS` or, when that is empty, `CARGO_MAKEFLAGS`.
    pub makeflags: String,
    /// `PHC_JOBS`: device compiles at once without a jobserver (default: the cores).
    pub jobs: Option<usize>,
}

impl Env {
    /// Read the process environment.
    pub fn from_process() -> Env {
        let var = |k: &str| std::env::var(k).ok();
        let non_empty = |v: Option<String>| v.filter(|s| !s.is_empty());
        Env {
            compiler: non_empty(var("PHC_COMPILER")),
            trace: non_empty(var("PHC_NINJA_TRACE")).map(PathBuf::from),
            debug: var("PHC_DEBUG").is_some_and(|v| !v.is_empty() && v != "0"),
            debug_plan: var("PHC_DEBUG")
                .and_then(|v| v.trim().parse::<u32>().ok())
                .is_some_and(|l| l >= 2),
            jobserver: var("PHC_JOBSERVER").is_none_or(|v| !v.is_empty() && v != "0"),
            makeflags: jobserver::flags(
                var("MAKEFLAGS").as_deref(),
                var("CARGO_MAKEFLAGS").as_deref(),
            ),
            jobs: var("PHC_JOBS")
                .and_then(|v| v.trim().parse().ok())
                .filter(|&n: &usize| n > 0),
        }
    }
}

/// Where phc's source of tokens is, for reports.
pub fn describe(source: &Source) -> String {
    match source {
        Source::Fifo(p) => format!("fifo {p}"),
        Source::Fds(r, w) => format!("descriptors {r},{w}"),
        Source::Local(n) => format!("{n} local slots"),
    }
}
