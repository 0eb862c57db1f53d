#!/usr/bin/env python3
"""Ctrl-C latency of a pack at the highest level: start `pack --level max`, wait for
its first progress line and then 2 s more (so a large kernel is being compressed),
send SIGINT, and time until the process is gone. Prints one JSON line: the median
over RUNS, the worst, whether every run exited 130 and left nothing behind.

    bench/cancel.py KPACK_TUI TREE WORKDIR [RUNS]
"""
import json, os, signal, statistics, subprocess, sys, time

kp, tree, work = sys.argv[1:4]
runs = int(sys.argv[4]) if len(sys.argv) > 4 else 5
out = os.path.join(work, "cancel-out")
lat, clean = [], True
for _ in range(runs):
    p = subprocess.Popen([kp, "pack", tree, "-o", out, "--group", "bench", "--all",
                          "--level", "max", "--force"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if line.startswith("packing:"):
            break
    time.sleep(2.0)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    # Keep reading stderr so the child never blocks on a full pipe.
    p.stderr.read()
    code = p.wait()
    lat.append(time.monotonic() - t0)
    left = [n for n in os.listdir(work) if "cancel-out" in n]
    clean = clean and code == 130 and not left
print(json.dumps({"bench": "cancel", "tree_bytes": int(subprocess.check_output(["du", "-sb", tree]).split()[0]),
                  "median_s": statistics.median(lat), "max_s": max(lat), "runs": runs, "clean": clean}))
