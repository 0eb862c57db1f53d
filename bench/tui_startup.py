"""Time until the explorer shows a tree (and until the scan is complete) on a big
tree, from the outside: the release binary runs in tmux, the pane is polled every
10 ms. Prints one JSON line per run for bench/run.sh.

    python3 bench/tui_startup.py KPACK_TUI TREE RUNS"""
import json, subprocess, sys, time

kp, tree, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
sock = f"kpack-start-{time.time_ns()}"
tm = lambda *a: subprocess.run(["tmux", "-L", sock, *a], capture_output=True, text=True).stdout
first, full = [], []
for _ in range(runs):
    tm("new-session", "-d", "-s", "s", "-x", "120", "-y", "30", f"{kp} {tree}; sleep 30")
    t0 = time.time(); got = {}
    while time.time() - t0 < 60:
        s = tm("capture-pane", "-t", "s", "-p")
        if "entries so far" in s and "first" not in got: got["first"] = time.time() - t0
        if " entries ·" in s:
            got["full"] = time.time() - t0
            got.setdefault("first", got["full"])
            break
        time.sleep(0.01)
    tm("kill-server"); time.sleep(0.3)
    first.append(got["first"]); full.append(got["full"])
med = lambda v: sorted(v)[len(v) // 2]
files = int(subprocess.run(f"find {tree} -type f | wc -l", shell=True, capture_output=True, text=True).stdout)
print(json.dumps({"bench": "tui_startup", "files": files, "first_ms": med(first) * 1000, "full_ms": med(full) * 1000}))
