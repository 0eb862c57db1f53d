//! `phc <compiler> <args…>`: the parallel HIP compile launcher (see `kpack::phc`).

use std::os::unix::process::CommandExt;

fn main() {
    let env = kpack::phc::Env::from_process();
    let raw: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    match raw
        .iter()
        .map(|a| a.to_str().map(str::to_string))
        .collect::<Option<Vec<String>>>()
    {
        Some(argv) => std::process::exit(kpack::phc::main(argv, &env)),
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
