//! `phc <compiler> <args…>`: the parallel HIP compile launcher (see `kpack::phc` and `phc_launch`).

use std::io::Write;
use std::os::unix::process::CommandExt;

#[path = "../cli/generate.rs"]
mod generate;
#[path = "../phc_launch/mod.rs"]
mod phc_launch;
#[path = "../version.rs"]
mod version;

/// phc's command line as clap sees it, for its completions and man page only: phc
/// itself reads its arguments as a compiler command (`phc_launch::main`).
fn command() -> clap::Command {
    use clap::{Arg, ValueHint};
    clap::Command::new("phc")
        .version(version::VERSION)
        .about("Parallel per-architecture HIP compiles under the make jobserver")
        .long_about(
            "Splits a multi-arch HIP compile (-c with two or more --offload-arch) into \
             parallel per-arch device compiles under GNU make's jobserver, then bundles \
             and compiles the host side; the object is byte-identical to the plain \
             command's. Anything it cannot split faithfully runs unchanged.",
        )
        .override_usage("phc <COMPILER> <ARGS>...\n       PHC_COMPILER=<COMPILER> phc <ARGS>...")
        .arg(
            Arg::new("command")
                .value_name("COMPILER ARGS")
                .help("The compile command: hipcc or clang++ and its arguments")
                .num_args(1..)
                .trailing_var_arg(true)
                .value_hint(ValueHint::CommandWithArguments),
        )
        .arg(
            Arg::new("generate")
                .long("generate")
                .value_name("KIND")
                .value_parser(clap::value_parser!(generate::GenerateKind))
                .help("Print a shell completion script or the man page to stdout and exit"),
        )
        .after_long_help(
            "Environment: PHC_NINJA_TRACE=FILE appends one ninja-log line per step; \
             PHC_DEBUG=1 explains every decision (2: also the driver's -### plan); \
             PHC_JOBSERVER=0 ignores the jobserver; PHC_JOBS=N device compiles at once \
             without one (default: the cores); PHC_COMPILER supplies the compiler.",
        )
}

fn main() {
    let raw: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if raw.first().is_some_and(|a| a == "--generate") {
        let m = command().get_matches();
        let kind = *m
            .get_one::<generate::GenerateKind>("generate")
            .expect("given");
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        if let Err(e) = generate::generate(kind, command(), &mut out).and_then(|()| out.flush()) {
            eprintln!("phc: cannot write: {e}");
            std::process::exit(2);
        }
        return;
    }
    let env = kpack::phc::Env::from_process();
    match raw
        .iter()
        .map(|a| a.to_str().map(str::to_string))
        .collect::<Option<Vec<String>>>()
    {
        Some(argv) => std::process::exit(phc_launch::main(argv, &env)),
        None => {
            // A non-UTF-8 argument: phc cannot reason about it, so run the command as is.
            let mut cmd: Vec<std::ffi::OsString> = raw;
            if let Some(c) = env.compiler {
                cmd.insert(0, c.into());
            }
            let err = std::process::Command::new(&cmd[0]).args(&cmd[1..]).exec();
            eprintln!("phc: cannot run {}: {err}", cmd[0].to_string_lossy());
            std::process::exit(127);
        }
    }
}
