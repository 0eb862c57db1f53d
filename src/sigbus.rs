//! A file that shrinks while it is mapped faults on the next read past its new end
//! (SIGBUS), which no `Result` can carry. This handler names the file
//! ([`kpack::mapped::file_at`]), says that nothing was placed (outputs are placed only
//! after every input was read; the stage a killed run leaves is removed by the next),
//! gives the terminal back if the UI had it, and ends the process with status 2.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set while the terminal UI owns the screen (alternate screen, hidden cursor).
pub static TUI_ACTIVE: AtomicBool = AtomicBool::new(false);

/// Install the handler (once, at start).
pub fn install() {
    // SAFETY: `sigaction` with a zeroed struct, an empty mask and SA_SIGINFO installs
    // `on_sigbus` for SIGBUS only; the handler below does only async-signal-safe
    // work (atomic loads, write(2), tcgetattr/tcsetattr, _exit(2)).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
    }
}

fn put(bytes: &[u8]) {
    // SAFETY: write(2) on stderr from a buffer that lives for the call.
    unsafe {
        libc::write(2, bytes.as_ptr().cast(), bytes.len());
    }
}

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    if TUI_ACTIVE.load(Ordering::Relaxed) {
        // Leave the alternate screen, show the cursor, and cooked mode back.
        put(b"\x1b[?1049l\x1b[?25h\r\n");
        // SAFETY: tcgetattr/tcsetattr are async-signal-safe; `t` is a local.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut t) == 0 {
                t.c_lflag |= libc::ICANON | libc::ECHO | libc::ISIG | libc::IEXTEN;
                t.c_oflag |= libc::OPOST;
                t.c_iflag |= libc::ICRNL;
                libc::tcsetattr(0, libc::TCSANOW, &t);
            }
        }
    }
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler; for
    // SIGBUS its si_addr is the faulting address.
    let addr = unsafe { (*info).si_addr() } as usize;
    let mut name = [0u8; kpack::mapped::NAME];
    let n = kpack::mapped::file_at(addr, &mut name);
    put(b"kpack-tui: error: ");
    if n > 0 {
        put(&name[..n]);
        put(b": the file changed while being read (it shrank while mapped)");
    } else {
        put(b"an input file changed while being read (it shrank while mapped)");
    }
    put(b"; nothing was written\n");
    // SAFETY: _exit(2) ends the process without running anything else.
    unsafe { libc::_exit(2) }
}
