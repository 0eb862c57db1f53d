//! Reading the driver's own plan (`-###`): the cuid it picked, the bundler it would run
//! with which targets and options, and the whole-program shape (spec §1.5, §1.7).

use crate::bundle::target::{EntryId, TargetId};
use std::path::{Path, PathBuf};

/// The sub-commands of one `-###` run, each as its unquoted argument list.
pub fn parse_commands(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(quoted_tokens)
        .filter(|t| !t.is_empty())
        .collect()
}

/// The double-quoted tokens of one line, with `\"`, `\\` and `\$` unescaped (LLVM
/// `printArg`).
fn quoted_tokens(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut tok = String::new();
        let mut closed = false;
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    if let Some(n) = chars.next() {
                        tok.push(n);
                    }
                }
                '"' => {
                    closed = true;
                    break;
                }
                c => tok.push(c),
            }
        }
        if closed {
            out.push(tok);
        }
    }
    out
}

/// The prefix of the line where ROCm's Perl `hipcc` prints the command it runs
/// (`HIPCC_VERBOSE=1`, on standard output).
pub const HIPCC_CMD: &str = "hipcc-cmd: ";

/// The clang command a Perl `hipcc` runs, from its `hipcc-cmd:` line, or `None` when
/// there is no such line or it is not plain enough to split exactly as the shell would.
pub fn hipcc_command(stdout: &str) -> Option<Vec<String>> {
    let line = stdout.lines().find_map(|l| l.strip_prefix(HIPCC_CMD))?;
    let words = shell_words(line)?;
    // The first word is the compiler, not an environment assignment (`NAME=value`).
    let first = words.first()?;
    if first.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric())
    }) {
        return None;
    }
    Some(words)
}

/// The words of a command string as `/bin/sh` splits it, for the plain subset `hipcc`
/// writes: blanks between words, backslash escapes, single and double quotes. `None`
/// for anything the shell would expand or interpret instead (variables, command
/// substitution, globs, tildes, comments, pipes, redirections, separators), so a
/// `Some` is exactly the argument list the shell would have passed.
pub fn shell_words(s: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\\' => match chars.next()? {
                '\n' => return None,
                n => word.push(n),
            },
            '\'' => loop {
                match chars.next()? {
                    '\'' => break,
                    c => word.push(c),
                }
            },
            '"' => loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => match chars.next()? {
                        n @ ('"' | '\\' | '$' | '`') => word.push(n),
                        '\n' => return None,
                        n => word.extend(['\\', n]),
                    },
                    '$' | '`' => return None,
                    c => word.push(c),
                }
            },
            '$' | '`' | '*' | '?' | '[' | ';' | '&' | '|' | '<' | '>' | '(' | ')' | '\n' | '{'
            | '}' => return None,
            '~' | '#' if !in_word => return None,
            c => word.push(c),
        }
        if c != ' ' && c != '\t' {
            in_word = true;
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

/// What phc takes from the probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The first `-cuid=` value on any line.
    pub cuid: Option<String>,
    /// The bundler executable.
    pub bundler: PathBuf,
    /// `-targets=` entries in the driver's order.
    pub targets: Vec<String>,
    /// Every other bundler argument, verbatim and in order, without `-input=`,
    /// `-output=` and `-type=`.
    pub extras: Vec<String>,
    /// The bundler's `-output=`.
    pub output: String,
    /// Whether a host compile embeds the bundle (whole-program compile); when none
    /// does, the bundler writes the object itself (relocatable device code, or the new
    /// offload driver).
    pub embedded: bool,
}

/// Why the probe's plan cannot be reproduced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfit(pub String);

/// Read the plan from the probe's stderr then stdout. `exists` decides whether a
/// bundler path names a regular file (injected for tests).
pub fn read_plan(text: &str, exists: impl Fn(&Path) -> bool) -> Result<Plan, Unfit> {
    let cmds = parse_commands(text);
    let cuid = cmds
        .iter()
        .flatten()
        .find_map(|t| t.strip_prefix("-cuid=").map(str::to_string));
    let bundlers: Vec<&Vec<String>> = cmds
        .iter()
        .filter(|c| {
            Path::new(&c[0])
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("clang-offload-bundler"))
        })
        .collect();
    let line = match bundlers.as_slice() {
        [] => return Err(Unfit("the driver runs no clang-offload-bundler".into())),
        [one] => *one,
        _ => return Err(Unfit("the driver runs the bundler more than once".into())),
    };
    let bundler = PathBuf::from(&line[0]);
    if !exists(&bundler) {
        return Err(Unfit(format!(
            "bundler {} does not exist",
            bundler.display()
        )));
    }
    let mut targets = None;
    let mut output = None;
    let mut extras = Vec::new();
    for a in &line[1..] {
        if let Some(t) = a.strip_prefix("-targets=") {
            targets = Some(t.split(',').map(str::to_string).collect::<Vec<_>>());
        } else if let Some(o) = a.strip_prefix("-output=") {
            output = Some(o.to_string());
        } else if a.starts_with("-input=") || a.starts_with("-type=") {
        } else {
            extras.push(a.clone());
        }
    }
    let targets = targets.ok_or_else(|| Unfit("the bundler line has no -targets=".into()))?;
    let output = output.ok_or_else(|| Unfit("the bundler line has no -output=".into()))?;
    // Whole-program shape: a host compile embeds exactly that bundle.
    let embedded = cmds.iter().any(|c| {
        c.windows(2)
            .any(|w| w[0] == "-fcuda-include-gpubinary" && w[1] == output)
    });
    Ok(Plan {
        cuid,
        bundler,
        targets,
        extras,
        output,
        embedded,
    })
}

/// A target ID with its features sorted by name, for comparing spellings
/// (`gfx90a:xnack+:sramecc-` = `gfx90a:sramecc-:xnack+`).
pub fn canonical(arch: &str) -> String {
    let mut t = TargetId::parse(arch);
    t.features.sort_by(|a, b| {
        a.trim_end_matches(['+', '-'])
            .cmp(b.trim_end_matches(['+', '-']))
    });
    t.to_string()
}

/// The bundler inputs in the driver's target order: `None` for the host entry
/// (`-input=/dev/null`), else the index of the arch whose device output goes there.
/// Each arch must be matched exactly once and there must be one target more than archs.
pub fn match_targets(targets: &[String], archs: &[String]) -> Result<Vec<Option<usize>>, Unfit> {
    if targets.len() != archs.len() + 1 {
        return Err(Unfit(format!(
            "{} bundle targets for {} archs",
            targets.len(),
            archs.len()
        )));
    }
    let wanted: Vec<String> = archs.iter().map(|a| canonical(a)).collect();
    let mut used = vec![false; archs.len()];
    let mut order = Vec::with_capacity(targets.len());
    let mut hosts = 0;
    for t in targets {
        if t.starts_with("host-") {
            hosts += 1;
            order.push(None);
            continue;
        }
        let id = EntryId::parse(t);
        let Some(arch) = id.arch() else {
            return Err(Unfit(format!("cannot read the target ID of {t}")));
        };
        let c = canonical(&arch);
        match wanted.iter().position(|w| *w == c) {
            Some(i) if !used[i] => {
                used[i] = true;
                order.push(Some(i));
            }
            Some(_) => return Err(Unfit(format!("{t} matches an arch twice"))),
            None => return Err(Unfit(format!("{t} matches no --offload-arch"))),
        }
    }
    if hosts != 1 || used.iter().any(|u| !u) {
        return Err(Unfit("targets and archs do not pair one to one".into()));
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_split_as_sh_does_or_refuse() {
        let w = |s: &str| shell_words(s).map(|v| v.join("|"));
        assert_eq!(
            w(r#"/usr/bin/clang++-15  -isystem "/usr/lib/x/.." --hip-device-lib-path="/a b" -o "v.o" -\#\#\#"#),
            Some(r#"/usr/bin/clang++-15|-isystem|/usr/lib/x/..|--hip-device-lib-path=/a b|-o|v.o|-###"#.into())
        );
        assert_eq!(
            w(r#"a 'b c' "d\"e" f\ g "" x"#),
            Some(r#"a|b c|d"e|f g||x"#.into())
        );
        assert_eq!(
            w(r#"a "\x" b#c"#),
            Some(r#"a|\x|b#c"#.into()),
            "\\x stays in double quotes"
        );
        assert_eq!(w("  "), Some(String::new()));
        for bad in [
            "a $HOME", "a `id`", "a \"$x\"", "a *.o", "a b?", "a [ab]", "a; b", "a | b", "a > f",
            "a & b", "a ~/x", "a #c", "a 'open", "a \"open", "a \\", "a (b)", "a {b,c}",
        ] {
            assert_eq!(shell_words(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn hipcc_command_line() {
        let out = "something\nhipcc-cmd: /usr/bin/clang++-15 -O2 -c a.hip -o \"a.o\" -\\#\\#\\#\n";
        assert_eq!(
            hipcc_command(out),
            Some(vec![
                "/usr/bin/clang++-15".to_string(),
                "-O2".into(),
                "-c".into(),
                "a.hip".into(),
                "-o".into(),
                "a.o".into(),
                "-###".into()
            ])
        );
        assert_eq!(hipcc_command("no line"), None);
        assert_eq!(hipcc_command("hipcc-cmd: CC=x clang -c a.hip"), None);
        assert_eq!(hipcc_command("hipcc-cmd: clang -c $SRC"), None);
    }

    const CLANG15: &str = r#"Debian clang version 15.0.6
Target: x86_64-pc-linux-gnu
 "/usr/lib/llvm-15/bin/clang" "-cc1" "-triple" "amdgcn-amd-amdhsa" "-cuid=c572681010fe0309" "-o" "/tmp/v-1.o" "-x" "hip" "vadd.hip"
 "/usr/lib/llvm-15/bin/clang-offload-bundler" "-type=o" "-bundle-align=4096" "-targets=host-x86_64-unknown-linux,hipv4-amdgcn-amd-amdhsa--gfx906,hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+" "-input=/dev/null" "-input=/tmp/a.out" "-input=/tmp/b.out" "-output=/tmp/v-5f.hipfb" "-compress"
 "/usr/lib/llvm-15/bin/clang" "-cc1" "-triple" "x86_64-pc-linux-gnu" "-fcuda-include-gpubinary" "/tmp/v-5f.hipfb" "-cuid=c572681010fe0309" "-D" "Q=\"a\\b\$\"" "-o" "vadd.o"
"#;

    #[test]
    fn reads_the_bundler_line() {
        let p = read_plan(CLANG15, |_| true).unwrap();
        assert_eq!(p.cuid.as_deref(), Some("c572681010fe0309"));
        assert_eq!(
            p.bundler,
            Path::new("/usr/lib/llvm-15/bin/clang-offload-bundler")
        );
        assert_eq!(p.targets[0], "host-x86_64-unknown-linux");
        assert_eq!(p.extras, ["-bundle-align=4096", "-compress"]);
        let cmds = parse_commands(CLANG15);
        assert!(
            cmds[2].contains(&"Q=\"a\\b$\"".to_string()),
            "{:?}",
            cmds[2]
        );
    }

    #[test]
    fn unfit_shapes() {
        assert!(read_plan(CLANG15, |_| false).is_err(), "missing bundler");
        let two = format!("{CLANG15}{}", CLANG15.lines().nth(3).unwrap());
        assert!(read_plan(&two, |_| true).is_err(), "two bundler lines");
        let rdc = CLANG15.replace("-fcuda-include-gpubinary", "-fgpu-rdc");
        assert!(
            !read_plan(&rdc, |_| true).unwrap().embedded,
            "no embedding host compile"
        );
        assert!(read_plan(CLANG15, |_| true).unwrap().embedded);
        assert!(read_plan("", |_| true).is_err());
    }

    #[test]
    fn targets_pair_with_archs_by_canonical_id() {
        let t: Vec<String> = [
            "hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-",
            "hipv4-amdgcn-amd-amdhsa--gfx1100",
            "host-x86_64-unknown-linux-gnu",
        ]
        .map(String::from)
        .to_vec();
        let archs = ["gfx1100".to_string(), "gfx90a:xnack-:sramecc+".to_string()];
        assert_eq!(match_targets(&t, &archs).unwrap(), [Some(1), Some(0), None]);
        assert!(match_targets(&t[..2], &archs).is_err());
        let other = ["gfx1100".to_string(), "gfx942".to_string()];
        assert!(match_targets(&t, &other).is_err());
    }
}
