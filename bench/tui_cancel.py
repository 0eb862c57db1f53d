"""Esc during a TUI pack at the highest level: the release binary runs in tmux on
TREE, packs it from the dialog with the level at max, and 2 s into the compression
Esc is sent; the time until the pane says the pack was cancelled is measured
(polled every 10 ms). Prints one JSON line: the median over RUNS, the worst, and
whether every run left nothing behind (no output, no staging directory).

    python3 bench/tui_cancel.py KPACK_TUI TREE WORKDIR RUNS"""
import json, os, statistics, subprocess, sys, time

kp, tree, work, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# A server of its own per run: a new session on a server still shutting down dies.
sock = None
tm = lambda *a: subprocess.run(["tmux", "-L", sock, *a], capture_output=True, text=True).stdout

def wait(text, limit=120):
    t0 = time.time()
    while time.time() - t0 < limit:
        s = tm("capture-pane", "-t", "s", "-p")
        if text in s:
            return time.time()
        time.sleep(0.01)
    sessions = tm("list-sessions")
    sys.exit(f"tui_cancel: no {text!r} after {limit} s (tmux sessions: {sessions!r}); the pane:\n{s}")

out = os.path.join(work, "tui-cancel-out")
lat, clean = [], True
for run in range(runs):
    sock = f"kpack-cancel-{os.getpid()}-{run}"
    before = set(os.listdir(work))
    started = subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "s", "-x", "160", "-y", "48",
                              f"TERM=xterm-256color KPACK_TUI_STATE=off {kp} {tree}; echo EXIT=$?; sleep 30"],
                             capture_output=True, text=True)
    if started.returncode != 0:
        sys.exit(f"tui_cancel: tmux new-session: {started.stderr}")
    wait(" entries ·")
    for keys in (["2"], ["P"]):
        tm("send-keys", "-t", "s", *keys)
        wait("[x]" if keys == ["2"] else "Pack this tree")
    tm("send-keys", "-t", "s", "Down", "C-u")
    tm("send-keys", "-t", "s", "-l", out)
    tm("send-keys", "-t", "s", "Down", "End")
    wait("22 (max")
    tm("send-keys", "-t", "s", "Enter")
    wait(": compress ")
    time.sleep(2.0)
    t0 = time.time()
    tm("send-keys", "-t", "s", "Escape")
    lat.append(wait("pack cancelled") - t0)
    tm("kill-server")
    left = set(os.listdir(work)) - before
    clean = clean and not left and not os.path.exists(out)
print(json.dumps({"bench": "tui_cancel", "tree_bytes": int(subprocess.check_output(["du", "-sb", tree]).split()[0]),
                  "median_s": statistics.median(lat), "max_s": max(lat), "runs": runs, "clean": clean}))
