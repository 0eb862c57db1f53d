//! One left-to-right reading of a compiler command line: what phc must know to decide
//! whether to split it, and the device and host command lines of a split.
//!
//! Every test is an exact match on whole argv tokens (spec §1.2-1.3). Options that
//! consume the next argument are known here so that their values are never mistaken
//! for inputs or flags.

use std::path::Path;

/// Options whose value may be the next argument (`-o x.o`) or joined (`-ox.o`). clang
/// renders both spellings as `-o x.o` when it hashes the command line for the cuid.
const JOINED_OR_SEPARATE: &[&str] = &[
    "-o", "-x", "-D", "-U", "-I", "-L", "-l", "-MF", "-MT", "-MQ", "-MJ", "-F", "-T", "-u",
];

/// Options whose value is always the next argument.
const SEPARATE: &[&str] = &[
    "-Xclang",
    "-mllvm",
    "-isystem",
    "-idirafter",
    "-iquote",
    "-include",
    "-imacros",
    "-isysroot",
    "-iprefix",
    "-iwithprefix",
    "-iwithprefixbefore",
    "-include-pch",
    "-ivfsoverlay",
    "-Xlinker",
    "-Xassembler",
    "-Xpreprocessor",
    "-Xarch_device",
    "-Xarch_host",
    "-Xoffload-linker",
    "-Xcuda-ptxas",
    "-Xcuda-fatbinary",
    "-Xopenmp-target",
    "-arch",
    "-target",
    "-z",
    "-e",
    "-working-directory",
    "--output",
    "-Xanalyzer",
    "-dependency-file",
    "-dependency-dot",
];

/// One argument as the clang driver sees it: an option with its value, or an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    /// Index of the first argv token of this argument.
    pub first: usize,
    /// Number of argv tokens (1 or 2).
    pub len: usize,
    /// Option spelling (`-o`, `-DFOO` for flags), empty for inputs.
    pub opt: String,
    /// The value of a valued option; for inputs, the input itself.
    pub value: Option<String>,
    /// Whether this is an input file.
    pub input: bool,
}

impl Arg {
    /// The string clang hashes for this argument (`Arg::getAsString`): a valued
    /// option as `opt value` whatever its spelling, anything else verbatim.
    pub fn rendered(&self) -> String {
        match (&self.value, self.input) {
            (_, true) => self.value.clone().unwrap_or_default(),
            (Some(v), false) => format!("{} {v}", self.opt),
            (None, false) => self.opt.clone(),
        }
    }
}

/// Split argv (without the compiler) into driver arguments.
pub fn split_args(argv: &[String]) -> Vec<Arg> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let tok = &argv[i];
        if tok == "-" || !tok.starts_with('-') {
            out.push(Arg {
                first: i,
                len: 1,
                opt: String::new(),
                value: Some(tok.clone()),
                input: true,
            });
            i += 1;
            continue;
        }
        if SEPARATE.contains(&tok.as_str()) || JOINED_OR_SEPARATE.contains(&tok.as_str()) {
            let value = argv.get(i + 1).cloned();
            let len = if value.is_some() { 2 } else { 1 };
            out.push(Arg {
                first: i,
                len,
                opt: tok.clone(),
                value,
                input: false,
            });
            i += len;
            continue;
        }
        // Joined form of a joined-or-separate option. The longest prefix wins, and a
        // few real options merely start with `-o` or `-x`.
        let joined = JOINED_OR_SEPARATE
            .iter()
            .filter(|p| tok.len() > p.len() && tok.starts_with(**p))
            .max_by_key(|p| p.len())
            .filter(|p| !is_lookalike(p, tok));
        if let Some(p) = joined {
            out.push(Arg {
                first: i,
                len: 1,
                opt: (*p).to_string(),
                value: Some(tok[p.len()..].to_string()),
                input: false,
            });
        } else {
            out.push(Arg {
                first: i,
                len: 1,
                opt: tok.clone(),
                value: None,
                input: false,
            });
        }
        i += 1;
    }
    out
}

/// Options that begin like a joined-or-separate option but are different options.
fn is_lookalike(prefix: &str, tok: &str) -> bool {
    match prefix {
        "-o" => tok.starts_with("-obj") || tok.starts_with("-output"),
        "-x" => tok.starts_with("-xarch") || tok.starts_with("-x86"),
        "-l" => tok.starts_with("-lazy"),
        "-T" => tok.starts_with("-Tbss") || tok.starts_with("-Tdata") || tok.starts_with("-Ttext"),
        "-u" => tok.starts_with("-undef") || tok.starts_with("-unwind"),
        "-F" => false,
        "-D" | "-U" | "-I" | "-L" | "-MF" | "-MT" | "-MQ" | "-MJ" => false,
        _ => false,
    }
}

/// Why a command is not split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PassReason {
    /// `-E` (or `-M`/`-MM`, which imply it): the preprocess path.
    Preprocess,
    /// No `-c`: a link, a probe, `-S`…
    NoCompile,
    /// Device-only or host-only compile.
    OneSide(String),
    /// Fewer than two distinct `--offload-arch` values.
    FewArchs(usize),
    /// A shape phc does not split faithfully (reason given).
    Unsupported(String),
}

impl std::fmt::Display for PassReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PassReason::Preprocess => f.write_str("preprocessing (-E)"),
            PassReason::NoCompile => f.write_str("no -c"),
            PassReason::OneSide(o) => write!(f, "{o} given"),
            PassReason::FewArchs(n) => write!(f, "{n} distinct --offload-arch (need 2)"),
            PassReason::Unsupported(why) => f.write_str(why),
        }
    }
}

/// What phc reads from a command line it may split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileLine {
    /// The compiler (`cmd[0]`).
    pub compiler: String,
    /// Its arguments (`cmd[1..]`).
    pub args: Vec<String>,
    /// Distinct archs in first-appearance order, spelled as given.
    pub archs: Vec<String>,
    /// The `-o` value, else `<input stem>.o`.
    pub output: String,
    /// Whether `-o` was given.
    pub explicit_output: bool,
    /// The single input file.
    pub input: String,
    /// A user `-cuid=`.
    pub user_cuid: Option<String>,
    /// Relocatable device code (the last of `-fgpu-rdc`/`-fno-gpu-rdc` is on).
    pub rdc: bool,
}

/// Read a command line: `Ok` when it is a multi-arch compile phc may split, else why not.
pub fn analyse(cmd: &[String]) -> Result<CompileLine, PassReason> {
    let Some((compiler, args)) = cmd.split_first() else {
        return Err(PassReason::Unsupported("empty command".into()));
    };
    let has = |t: &str| args.iter().any(|a| a == t);
    if has("-E") || has("-M") || has("-MM") {
        return Err(PassReason::Preprocess);
    }
    if !has("-c") {
        return Err(PassReason::NoCompile);
    }
    for one in [
        "--cuda-device-only",
        "--offload-device-only",
        "--cuda-host-only",
        "--offload-host-only",
    ] {
        if has(one) {
            return Err(PassReason::OneSide(one.to_string()));
        }
    }
    let mut archs: Vec<String> = Vec::new();
    for a in args {
        if let Some(v) = a.strip_prefix("--offload-arch=") {
            if v.is_empty() || v.contains(',') || v == "native" {
                return Err(PassReason::Unsupported(format!(
                    "--offload-arch={v} needs the driver's expansion"
                )));
            }
            if !archs.iter().any(|x| x == v) {
                archs.push(v.to_string());
            }
        }
    }
    if archs.len() < 2 {
        return Err(PassReason::FewArchs(archs.len()));
    }
    let unsupported = |why: &str| Err(PassReason::Unsupported(why.to_string()));
    // Last of each on/off pair wins.
    let last_of = |on: &str, off: &str| {
        args.iter()
            .rev()
            .find(|a| *a == on || *a == off)
            .is_some_and(|a| a == on)
    };
    let rdc = last_of("-fgpu-rdc", "-fno-gpu-rdc");
    if rdc && (has("-S") || has("-emit-llvm")) {
        return unsupported("relocatable device code written as assembly or bitcode");
    }
    if last_of("--offload-new-driver", "--no-offload-new-driver") {
        return unsupported("the new offload driver");
    }
    for a in args {
        if a.starts_with('@') {
            return unsupported("a response file hides flags");
        }
        if a.starts_with("--cuda-gpu-arch") || a.starts_with("--no-offload-arch") {
            return unsupported("--cuda-gpu-arch/--no-offload-arch");
        }
        if a.starts_with("-save-temps") {
            return unsupported("-save-temps (parallel compiles would share temp names)");
        }
        // phc embeds the bundle it makes; a line that names its own (through
        // -Xclang) would embed two, or pass one on to every device compile.
        if a.starts_with("-fcuda-include-gpubinary") {
            return unsupported("-fcuda-include-gpubinary (the line embeds its own GPU binary)");
        }
    }
    let parsed = split_args(args);
    let mut output = None;
    let mut inputs = Vec::new();
    let mut user_cuid = None;
    for a in &parsed {
        if a.input {
            inputs.push(a.value.clone().unwrap_or_default());
            continue;
        }
        match a.opt.as_str() {
            "-o" | "--output" => match &a.value {
                Some(v) => output = Some(v.clone()),
                None => return unsupported("-o without a value"),
            },
            o if o.starts_with("--output=") => output = Some(o["--output=".len()..].to_string()),
            o if o.starts_with("-cuid=") => user_cuid = Some(o["-cuid=".len()..].to_string()),
            _ => {}
        }
    }
    if let Some(last) = parsed.last()
        && !last.input
        && last.value.is_none()
        && (SEPARATE.contains(&last.opt.as_str())
            || JOINED_OR_SEPARATE.contains(&last.opt.as_str()))
    {
        return unsupported("an option at the end is missing its value");
    }
    let input = match inputs.as_slice() {
        [one] if one == "-" => return unsupported("input from stdin"),
        [one] => one.clone(),
        [] => return unsupported("no input file"),
        _ => return unsupported("several inputs"),
    };
    if output.as_deref() == Some("-") {
        return unsupported("output to stdout (-o -)");
    }
    let explicit_output = output.is_some();
    let output = output.unwrap_or_else(|| {
        let stem = Path::new(&input)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "a".into());
        format!("{stem}.o")
    });
    Ok(CompileLine {
        compiler: compiler.clone(),
        args: args.to_vec(),
        archs,
        output,
        explicit_output,
        input,
        user_cuid,
        rdc,
    })
}

/// Whether an argument is dropped from both the device and the host compiles.
fn offload_only(tok: &str) -> bool {
    tok.starts_with("--offload-arch=")
        || tok.starts_with("--offload-jobs=")
        || tok == "--offload-compress"
        || tok.starts_with("--offload-compression-level")
}

/// The device compile for one arch (spec §1.8): outputs, dependency files and the
/// compression flags dropped, then `--offload-arch=<arch> --offload-device-only`, the
/// cuid, and `--no-gpu-bundle-output -o <out>`.
pub fn device_args(line: &CompileLine, arch: &str, cuid: &[String], out: &Path) -> Vec<String> {
    let mut v = Vec::with_capacity(line.args.len() + 8);
    for a in split_args(&line.args) {
        let toks = &line.args[a.first..a.first + a.len];
        let drop = offload_only(&toks[0])
            || matches!(
                a.opt.as_str(),
                "-MD" | "-MMD" | "-MF" | "-MT" | "-MQ" | "-MJ" | "-o" | "--output"
            )
            || a.opt.starts_with("--output=");
        if !drop {
            v.extend(toks.iter().cloned());
        }
    }
    v.push(format!("--offload-arch={arch}"));
    v.push("--offload-device-only".into());
    v.extend(cuid.iter().cloned());
    v.push("--no-gpu-bundle-output".into());
    v.push("-o".into());
    v.push(out.to_string_lossy().into_owned());
    v
}

/// The host compile (spec §1.10): compression and `--offload-jobs` dropped, `-o` and
/// the dependency flags kept, the bundle embedded, then the cuid. With relocatable
/// device code (spec §1.17) there is no bundle to embed (`None`): the object it writes
/// to the user's `-o` (so that dependency files name it as the plain command's do) is
/// bundled with the device bitcode after.
///
/// Unlike the reference, the `--offload-arch` values stay: with `--offload-host-only`
/// they do not change the object (checked byte for byte with clang 15 and 19), and
/// without them ROCm's `hipcc` runs GPU detection (`rocm_agent_enumerator`) for every
/// host compile, which is slow and prints errors on machines without a GPU.
pub fn host_args(line: &CompileLine, bundle: Option<&Path>, cuid: &[String]) -> Vec<String> {
    let mut v: Vec<String> = line
        .args
        .iter()
        .filter(|a| a.starts_with("--offload-arch=") || !offload_only(a))
        .cloned()
        .collect();
    v.push("--offload-host-only".into());
    if let Some(bundle) = bundle {
        v.extend([
            "-Xclang".to_string(),
            "-fcuda-include-gpubinary".into(),
            "-Xclang".into(),
            bundle.to_string_lossy().into_owned(),
        ]);
    }
    v.extend(cuid.iter().cloned());
    v
}

/// clang's default compilation-unit id (`-fuse-cuid=hash`): the low 64 bits of MD5
/// over the input's real path and every non-input argument as the driver renders it,
/// in lowercase hex without padding. `implicit` are the arguments the driver adds
/// before the command line (`--driver-mode=g++` for `clang++`).
pub fn clang_hash_cuid(input_realpath: &str, implicit: &[&str], args: &[String]) -> String {
    use md5::{Digest, Md5};
    let mut h = Md5::new();
    h.update(input_realpath.as_bytes());
    for a in implicit {
        h.update(a.as_bytes());
    }
    for a in split_args(args) {
        if !a.input {
            h.update(a.rendered().as_bytes());
        }
    }
    let d = h.finalize();
    let mut low = [0u8; 8];
    low.copy_from_slice(&d[..8]);
    format!("{:x}", u64::from_le_bytes(low))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn decisions_follow_the_spec_order() {
        let base = ["clang", "-x", "hip", "-c", "a.hip", "-o", "a.o"];
        let mut two = s(&base);
        two.extend(s(&["--offload-arch=gfx900", "--offload-arch=gfx906"]));
        assert!(analyse(&two).is_ok());
        let mut e = two.clone();
        e.push("-E".into());
        assert_eq!(analyse(&e), Err(PassReason::Preprocess));
        let no_c: Vec<String> = two.iter().filter(|a| *a != "-c").cloned().collect();
        assert_eq!(analyse(&no_c), Err(PassReason::NoCompile));
        let mut dev = two.clone();
        dev.push("--offload-device-only".into());
        assert!(matches!(analyse(&dev), Err(PassReason::OneSide(_))));
        let mut dup = s(&base);
        dup.extend(s(&["--offload-arch=gfx900"; 3]));
        assert_eq!(analyse(&dup), Err(PassReason::FewArchs(1)));
        let mut rdc = two.clone();
        rdc.push("-fgpu-rdc".into());
        assert!(analyse(&rdc).unwrap().rdc);
        let mut rdc_asm = rdc.clone();
        rdc_asm.push("-S".into());
        assert!(matches!(analyse(&rdc_asm), Err(PassReason::Unsupported(_))));
        rdc.push("-fno-gpu-rdc".into());
        assert!(
            !analyse(&rdc).unwrap().rdc,
            "the last of -fgpu-rdc/-fno-gpu-rdc wins"
        );
        let mut own = two.clone();
        own.extend(s(&[
            "-Xclang",
            "-fcuda-include-gpubinary",
            "-Xclang",
            "g.hipfb",
        ]));
        assert!(matches!(analyse(&own), Err(PassReason::Unsupported(_))));
        let mut trailing = two.clone();
        trailing.push("-o".into());
        assert!(matches!(
            analyse(&trailing),
            Err(PassReason::Unsupported(_))
        ));
    }

    #[test]
    fn archs_keep_first_appearance_order() {
        let cmd = s(&[
            "clang",
            "-c",
            "a.hip",
            "--offload-arch=gfx942",
            "--offload-arch=gfx900",
            "--offload-arch=gfx942",
            "--offload-arch=gfx90a:xnack-",
        ]);
        let l = analyse(&cmd).unwrap();
        assert_eq!(l.archs, ["gfx942", "gfx900", "gfx90a:xnack-"]);
        assert_eq!(l.output, "a.o", "default output is <stem>.o");
        assert!(!l.explicit_output);
    }

    #[test]
    fn output_forms_and_lookalikes() {
        let base = s(&[
            "clang",
            "-c",
            "k.hip",
            "--offload-arch=gfx900",
            "--offload-arch=gfx906",
        ]);
        for (extra, want) in [
            (vec!["-ox.o"], "x.o"),
            (vec!["-o", "y.o", "-o", "z.o"], "z.o"),
            (vec!["--output=w.o"], "w.o"),
            (vec!["-objcmt-migrate-literals", "-o", "v.o"], "v.o"),
        ] {
            let mut c = base.clone();
            c.extend(s(&extra));
            assert_eq!(analyse(&c).unwrap().output, want, "{extra:?}");
        }
    }

    #[test]
    fn device_line_drops_outputs_and_depfiles() {
        let cmd = s(&[
            "clang",
            "-c",
            "k.hip",
            "-MD",
            "-MF",
            "k.d",
            "-MT",
            "t",
            "-MQ",
            "q",
            "-MFj.d",
            "-MMD",
            "-o",
            "k.o",
            "--offload-arch=gfx900",
            "--offload-arch=gfx906",
            "--offload-compress",
            "--offload-compression-level=9",
            "-O2",
            "-DX=1",
            "-MJ",
            "cdb.json",
        ]);
        let l = analyse(&cmd).unwrap();
        let d = device_args(&l, "gfx906", &s(&["-cuid=abc"]), Path::new("/t/1.out"));
        assert_eq!(
            d,
            s(&[
                "-c",
                "k.hip",
                "-O2",
                "-DX=1",
                "--offload-arch=gfx906",
                "--offload-device-only",
                "-cuid=abc",
                "--no-gpu-bundle-output",
                "-o",
                "/t/1.out"
            ])
        );
        let h = host_args(&l, Some(Path::new("/t/b.hipfb")), &s(&["-cuid=abc"]));
        assert!(h.contains(&"k.d".to_string()) && h.contains(&"k.o".to_string()));
        assert!(h.contains(&"--offload-arch=gfx906".to_string()));
        assert!(!h.iter().any(|a| a.starts_with("--offload-comp")));
        assert_eq!(
            &h[h.len() - 6..],
            &s(&[
                "--offload-host-only",
                "-Xclang",
                "-fcuda-include-gpubinary",
                "-Xclang",
                "/t/b.hipfb",
                "-cuid=abc"
            ])[..]
        );
        // Relocatable device code: nothing embedded, the rest the same.
        let r = host_args(&l, None, &s(&["-cuid=abc"]));
        assert_eq!(r[..r.len() - 2], h[..h.len() - 6]);
        assert_eq!(
            &r[r.len() - 2..],
            &s(&["--offload-host-only", "-cuid=abc"])[..]
        );
    }

    #[test]
    fn cuid_model_matches_values_read_from_clang() {
        // Values printed by clang 15 and 19 (`-###`) for these exact command lines in a
        // directory whose `vadd.hip` resolves to /tmp/phcx/vadd.hip.
        let args = s(&[
            "-x",
            "hip",
            "-nogpulib",
            "--offload-arch=gfx900",
            "--offload-arch=gfx906",
            "-c",
            "vadd.hip",
            "-o",
            "x.o",
            "-###",
        ]);
        assert_eq!(
            clang_hash_cuid("/tmp/phcx/vadd.hip", &[], &args),
            "160e698d47398814"
        );
        assert_eq!(
            clang_hash_cuid("/tmp/phcx/vadd.hip", &["--driver-mode=g++"], &args),
            "c5d02d87221c22a5"
        );
        // Joined and separate spellings hash alike.
        let joined = s(&["-ox.o", "-DFOO", "a.hip"]);
        let sep = s(&["-o", "x.o", "-D", "FOO", "a.hip"]);
        assert_eq!(
            clang_hash_cuid("/a", &[], &joined),
            clang_hash_cuid("/a", &[], &sep)
        );
    }
}
