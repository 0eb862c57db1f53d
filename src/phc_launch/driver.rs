//! What phc learns of the compiler driver: the clang command behind a Perl
//! `hipcc` ([`resolve_hipcc`]) and the cuid the plain command would get
//! ([`choose_cuid`]).

use super::*;

/// The clang command behind a Perl `hipcc` (its `hipcc-cmd:` line in the probe's
/// output, which ends in the probe's `-###`), read as a compile line, with the
/// arguments clang got in the probe; `None` when there is none or it does not compile
/// the same input to the same output for the same archs (phc then runs the command's
/// own compiler for each step).
pub(super) fn resolve_hipcc(
    stdout: &str,
    line: &CompileLine,
    log: &dyn Fn(&str),
) -> Option<(CompileLine, Vec<String>)> {
    let Some(mut words) = probe::hipcc_command(stdout) else {
        if stdout.lines().any(|l| l.starts_with(probe::HIPCC_CMD)) {
            log("hipcc's clang command needs the shell: running hipcc for each step");
        }
        return None;
    };
    if words.last().map(String::as_str) != Some("-###") {
        log("hipcc-cmd line does not end in the probe's -###: running hipcc for each step");
        return None;
    }
    let probe_args = words[1..].to_vec();
    words.pop();
    let direct = match args::analyse(&words) {
        Ok(d) => d,
        Err(why) => {
            log(&format!(
                "hipcc's clang command is not split ({why}): running hipcc"
            ));
            return None;
        }
    };
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        v
    };
    let same = direct.input == line.input
        && direct.output == line.output
        && direct.explicit_output == line.explicit_output
        && sorted(&direct.archs) == sorted(&line.archs)
        && direct.user_cuid == line.user_cuid
        && direct.rdc == line.rdc;
    if !same {
        log("hipcc's clang command compiles something else: running hipcc for each step");
        return None;
    }
    log(&format!(
        "hipcc runs {}: running it directly",
        direct.compiler
    ));
    Some((direct, probe_args))
}

/// The cuid to pass: none when the user gave one or the driver uses none; else the
/// one the plain command gets. clang hashes its command line (which the probe's extra
/// `-###` changes), so the driver's hash is recomputed: when the model reproduces the
/// probe's own cuid it is trusted for the plain command too, else the probe's value
/// is used (consistent halves, but possibly not the plain command's bytes).
pub(super) fn choose_cuid(
    line: &CompileLine,
    plan: &probe::Plan,
    probe_args: &[String],
    log: &dyn Fn(&str),
) -> (Option<String>, bool) {
    if line.user_cuid.is_some() {
        return (None, true);
    }
    let Some(p) = plan.cuid.clone() else {
        return (None, true);
    };
    let real = std::fs::canonicalize(&line.input)
        .map(|r| r.to_string_lossy().into_owned())
        .unwrap_or_else(|_| line.input.clone());
    for implicit in [
        &[][..],
        &["--driver-mode=g++"][..],
        &["--driver-mode=cpp"][..],
    ] {
        if args::clang_hash_cuid(&real, implicit, probe_args) == p {
            let c = args::clang_hash_cuid(&real, implicit, &line.args);
            log(&format!("cuid {c}: the driver's hash, reproduced"));
            return (Some(c), true);
        }
    }
    log(&format!(
        "cuid {p}: the probe's (could not reproduce the driver's hash; objects with \
         cuid-named symbols may differ from the plain command's)"
    ));
    (Some(p), false)
}
