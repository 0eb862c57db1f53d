//! `$PAGER` and `$EDITOR` from the UI: the terminal is handed over to the program
//! (the input thread stops reading it first, so no key goes astray) and taken back
//! when it exits.

use std::path::PathBuf;
use std::sync::{Condvar, Mutex};

/// What to open, and with which program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct External {
    /// The environment variable naming the program (`PAGER`, `EDITOR`).
    pub var: &'static str,
    /// The program when the variable is unset or empty (or not named), as a shell
    /// word.
    pub default: String,
    /// What to open.
    pub what: Open,
}

/// A file, or text written to a temporary file first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Open {
    /// This file as it is.
    File(PathBuf),
    /// This text (a preview, the message log, a detail).
    Text(String),
}

/// Stops the input thread between its reads, and says when it has stopped.
#[derive(Debug, Default)]
pub struct InputGate {
    state: Mutex<(bool, bool)>, // (paused, the reader is waiting)
    cv: Condvar,
}

impl InputGate {
    /// The input thread calls this before each read: it waits here while paused.
    pub fn wait_open(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while s.0 {
            s.1 = true;
            self.cv.notify_all();
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.1 = false;
    }

    /// Pause the reader and wait until it has stopped reading (it finishes the
    /// read under way, at most its poll interval).
    pub fn pause(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.0 = true;
        while !s.1 {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Let it read again.
    pub fn resume(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.0 = false;
        self.cv.notify_all();
    }
}

/// `s` as one word for `sh` (single-quoted).
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Run the program on what to open, in the foreground, and wait for it. The
/// program is run by `sh` so that `PAGER="less -R"` works as in a shell.
pub fn run(e: &External) -> Result<(), String> {
    let program = (!e.var.is_empty())
        .then(|| std::env::var(e.var).ok())
        .flatten()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| e.default.clone());
    // Text goes to a temporary file that lives until the program exits.
    let mut _keep = None;
    let path = match &e.what {
        Open::File(p) => p.clone(),
        Open::Text(t) => {
            let mut f = tempfile::Builder::new()
                .prefix("kpack-tui-")
                .suffix(".txt")
                .tempfile()
                .map_err(|err| format!("a temporary file: {err}"))?;
            std::io::Write::write_all(&mut f, t.as_bytes())
                .map_err(|err| format!("a temporary file: {err}"))?;
            let p = f.path().to_path_buf();
            _keep = Some(f);
            p
        }
    };
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{program} \"$1\""))
        .arg("sh")
        .arg(&path)
        .status()
        .map_err(|err| format!("{program}: {err}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{program} exited with {status}"))
    }
}
