//! Shipping: completions and man pages of both programs (#31 item 3), the version
//! (item 6) and the licence (item 4).

mod common;
use common::{in_ci, kpack, stderr, stdout, tool};
use std::path::Path;
use std::process::Command;

/// The subcommands `kpack-tui --help` lists (hidden ones are not offered).
fn subcommands() -> Vec<String> {
    let help = stdout(&kpack(&["--help"]));
    let list: Vec<String> = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(list.len() >= 15, "{help}");
    list
}

fn generated(program: &str, kind: &str) -> String {
    let exe = match program {
        "phc" => env!("CARGO_BIN_EXE_phc"),
        _ => env!("CARGO_BIN_EXE_kpack-tui"),
    };
    let o = Command::new(exe)
        .args(["--generate", kind])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{program} --generate {kind}: {}",
        stderr(&o)
    );
    assert!(!o.stdout.is_empty());
    String::from_utf8(o.stdout).unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

fn run(program: &str, args: &[&str]) -> std::process::Output {
    Command::new(program).args(args).output().unwrap()
}

#[test]
fn bash_completion_parses_and_offers_every_subcommand() {
    let tmp = tempfile::tempdir().unwrap();
    let text = generated("kpack-tui", "complete-bash");
    let f = write(tmp.path(), "kpack-tui.bash", &text);
    let o = run("bash", &["-n", &f]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The function the script registers for `kpack-tui`.
    let func = text
        .lines()
        .find_map(|l| {
            let l = l.trim();
            (l.starts_with("complete -F ") && l.ends_with(" kpack-tui"))
                .then(|| l.split_whitespace().nth(2).unwrap().to_string())
        })
        .expect("a completion registered for kpack-tui");
    // What Tab after `kpack-tui ` offers, by the completion function itself.
    let script = format!(
        "source {f}; COMP_WORDS=(kpack-tui ''); COMP_CWORD=1; \
         {func} kpack-tui '' kpack-tui; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    );
    let o = run("bash", &["-c", &script]);
    let offered = stdout(&o);
    for c in subcommands() {
        assert!(
            offered.lines().any(|l| l == c),
            "{c} not offered:\n{offered}"
        );
    }
    // And after `kpack-tui pack --`, pack's own options.
    let script = format!(
        "source {f}; COMP_WORDS=(kpack-tui pack --); COMP_CWORD=2; \
         {func} kpack-tui -- pack; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    );
    let offered = stdout(&run("bash", &["-c", &script]));
    for flag in [
        "--group",
        "--family",
        "--target",
        "--unassigned",
        "--dry-run",
    ] {
        assert!(offered.lines().any(|l| l == flag), "{flag}:\n{offered}");
    }
    let f = write(tmp.path(), "phc.bash", &generated("phc", "complete-bash"));
    let o = run("bash", &["-n", &f]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn zsh_completion_parses_and_names_every_subcommand() {
    let text = generated("kpack-tui", "complete-zsh");
    assert!(text.starts_with("#compdef kpack-tui"), "{}", &text[..80]);
    for c in subcommands() {
        assert!(
            text.contains(&format!("'{c}:")),
            "{c} missing from the zsh completion"
        );
    }
    let Some(zsh) = tool("zsh") else { return };
    let tmp = tempfile::tempdir().unwrap();
    for (program, text) in [
        ("kpack-tui", text.clone()),
        ("phc", generated("phc", "complete-zsh")),
    ] {
        let f = write(tmp.path(), &format!("_{program}"), &text);
        let o = run(zsh.to_str().unwrap(), &["-n", &f]);
        assert!(o.status.success(), "zsh -n _{program}: {}", stderr(&o));
    }
}

#[test]
fn fish_completion_offers_every_subcommand() {
    let Some(fish) = tool("fish") else { return };
    let tmp = tempfile::tempdir().unwrap();
    let f = write(
        tmp.path(),
        "kpack-tui.fish",
        &generated("kpack-tui", "complete-fish"),
    );
    let o = run(fish.to_str().unwrap(), &["--no-execute", &f]);
    assert!(o.status.success(), "{}", stderr(&o));
    // fish's own completer, as Tab would call it.
    let o = run(
        fish.to_str().unwrap(),
        &[
            "--no-config",
            "-c",
            &format!("source {f}; complete -C 'kpack-tui '"),
        ],
    );
    let offered: Vec<String> = stdout(&o)
        .lines()
        .filter_map(|l| l.split('\t').next().map(str::to_string))
        .collect();
    for c in subcommands() {
        assert!(
            offered.contains(&c),
            "{c} not offered: {offered:?} {}",
            stderr(&o)
        );
    }
    let f = write(tmp.path(), "phc.fish", &generated("phc", "complete-fish"));
    let o = run(fish.to_str().unwrap(), &["--no-execute", &f]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// No PowerShell here (not a Debian package): the script is checked for the
/// completer registration and every subcommand, not run.
#[test]
fn powershell_completion_registers_every_subcommand() {
    eprintln!("note: pwsh is not installed here; the PowerShell script is checked, not run");
    for program in ["kpack-tui", "phc"] {
        let text = generated(program, "complete-powershell");
        assert!(
            text.contains(&format!(
                "Register-ArgumentCompleter -Native -CommandName '{program}'"
            )),
            "{program}"
        );
    }
    let text = generated("kpack-tui", "complete-powershell");
    for c in subcommands() {
        assert!(text.contains(&format!("'{c}'")), "{c}");
    }
}

#[test]
fn man_pages_render_without_warnings_and_document_every_subcommand() {
    let Some(groff) = tool("groff") else { return };
    let tmp = tempfile::tempdir().unwrap();
    for program in ["kpack-tui", "phc"] {
        let f = write(
            tmp.path(),
            &format!("{program}.1"),
            &generated(program, "man"),
        );
        // -k: the input is UTF-8 (what man's preconv does); -ww: every warning.
        let o = run(groff.to_str().unwrap(), &["-k", "-man", "-ww", "-z", &f]);
        assert!(
            o.status.success() && o.stderr.is_empty(),
            "{program}: {}",
            stderr(&o)
        );
        let o = run(
            groff.to_str().unwrap(),
            &["-k", "-man", "-Tutf8", "-P-cbou", &f],
        );
        let page = stdout(&o);
        assert!(
            page.contains("SYNOPSIS") && page.contains("--generate"),
            "{page}"
        );
        if program == "kpack-tui" {
            for c in subcommands() {
                let heading = format!("KPACK-TUI {}", c.to_uppercase());
                assert!(page.lines().any(|l| l == heading), "no section {heading}");
            }
            for flag in [
                "--unassigned",
                "--split-databases",
                "--fail-if-grows",
                "--loader",
            ] {
                assert!(page.contains(flag), "{flag} undocumented");
            }
        } else {
            assert!(page.contains("PHC_NINJA_TRACE"), "{page}");
        }
    }
    if let Some(man) = tool("man") {
        let f = tmp.path().join("kpack-tui.1");
        let o = Command::new(man)
            .args(["-l", "-P", "cat"])
            .arg(&f)
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stdout(&o).contains("kpack-tui pack"), "{}", stdout(&o));
    }
}

#[test]
fn version_names_the_git_revision() {
    let v = stdout(&kpack(&["--version"]));
    let rev = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| stdout(&o).trim().to_string());
    let want = format!(
        "kpack-tui {} (git {})\n",
        env!("CARGO_PKG_VERSION"),
        rev.clone().unwrap_or_else(|| "unknown".into())
    );
    assert_eq!(v, want);
    if rev.is_none() {
        assert!(!in_ci(), "CI runs in a git clone");
    }
    let o = Command::new(env!("CARGO_BIN_EXE_phc"))
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(
        stdout(&o),
        format!("phc (kpack-tui) {}", &want["kpack-tui ".len()..])
    );
}

#[test]
fn both_licence_texts_are_at_the_root_and_declared() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mit = std::fs::read_to_string(root.join("LICENSE-MIT")).unwrap();
    let apache = std::fs::read_to_string(root.join("LICENSE-APACHE")).unwrap();
    assert!(mit.contains("Permission is hereby granted, free of charge"));
    assert!(apache.contains("Apache License") && apache.contains("Version 2.0, January 2004"));
    let cargo = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(cargo.contains("license = \"MIT OR Apache-2.0\""));
    let py = std::fs::read_to_string(root.join("pyproject.toml")).unwrap();
    assert!(py.contains("license = \"MIT OR Apache-2.0\""));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme
            .lines()
            .take(5)
            .any(|l| l.contains("MIT OR Apache-2.0"))
    );
}
