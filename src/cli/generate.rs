//! `--generate KIND`: shell completions and the man page, rendered from the clap
//! definition of the program (shared by `kpack-tui` and `phc`, as ripgrep does).

use clap::ValueEnum;
use std::io::{self, Write};

/// What `--generate` writes to stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GenerateKind {
    /// Bash completion (source it, or put it in bash-completion's completions dir).
    CompleteBash,
    /// Zsh completion (save as `_<program>` in a directory on `$fpath`).
    CompleteZsh,
    /// Fish completion (`~/.config/fish/completions/`).
    CompleteFish,
    /// PowerShell completion (dot-source it from the profile).
    CompletePowershell,
    /// The man page (roff): `man -l -` reads it.
    Man,
    /// The JSON Schemas of every `--json` output and of the ledger, written into
    /// the directory given as PATH (what `docs/schema/` holds).
    Schemas,
}

/// Write `kind` for `cmd` (the program's full clap command) to `out`.
pub fn generate(kind: GenerateKind, mut cmd: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    use clap_complete::{Shell, generate as complete};
    let name = cmd.get_name().to_string();
    let shell = match kind {
        GenerateKind::CompleteBash => Shell::Bash,
        GenerateKind::CompleteZsh => Shell::Zsh,
        GenerateKind::CompleteFish => Shell::Fish,
        GenerateKind::CompletePowershell => Shell::PowerShell,
        GenerateKind::Man => return man(cmd, out),
        GenerateKind::Schemas => {
            return Err(io::Error::other(
                "--generate schemas writes files: give the directory as PATH",
            ));
        }
    };
    if shell == Shell::Bash && name.contains('-') {
        return bash_hyphenated(cmd, &name, out);
    }
    complete(shell, &mut cmd, name, out);
    Ok(())
}

/// clap_complete's bash script completes nothing after a subcommand when the program
/// name has a hyphen (its dispatch loop and its case labels escape the name
/// differently: clap-rs/clap#6421, open). Generate for the name with `_` instead,
/// which both spell alike, and register the completion for the real name.
fn bash_hyphenated(cmd: clap::Command, name: &str, out: &mut dyn Write) -> io::Result<()> {
    let plain: &'static str = Box::leak(name.replace('-', "_").into_boxed_str());
    let mut cmd = cmd.name(plain).bin_name(plain);
    let mut script = Vec::new();
    clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, plain, &mut script);
    let script = String::from_utf8_lossy(&script);
    for line in script.lines() {
        let registration = line.trim_start().starts_with("complete -F ");
        match line.strip_suffix(&format!(" {plain}")) {
            Some(head) if registration => writeln!(out, "{head} {name}")?,
            _ => writeln!(out, "{line}")?,
        }
    }
    Ok(())
}

/// One page for the whole program: the top level, then a section per subcommand
/// (and per nested subcommand) with its description and options.
fn man(cmd: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    let mut cmd = cmd;
    cmd.build();
    clap_mangen::Man::new(cmd.clone()).render(out)?;
    let mut stack: Vec<(String, clap::Command)> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .map(|s| (format!("{} {}", cmd.get_name(), s.get_name()), s.clone()))
        .collect();
    stack.reverse();
    while let Some((title, sub)) = stack.pop() {
        writeln!(out, ".SH \"{}\"", title.to_uppercase())?;
        let page = clap_mangen::Man::new(sub.clone());
        let mut section = Vec::new();
        page.render_synopsis_section(&mut section)?;
        page.render_description_section(&mut section)?;
        if sub.get_arguments().any(|a| !a.is_hide_set()) {
            page.render_options_section(&mut section)?;
        }
        // The subcommand's own headings become subsections of its section.
        for line in String::from_utf8_lossy(&section).lines() {
            match line.strip_prefix(".SH ") {
                Some(heading) => writeln!(out, ".SS {heading}")?,
                None => writeln!(out, "{line}")?,
            }
        }
        let mut nested: Vec<(String, clap::Command)> = sub
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
            .map(|s| (format!("{title} {}", s.get_name()), s.clone()))
            .collect();
        nested.reverse();
        stack.extend(nested);
    }
    Ok(())
}
