#!/usr/bin/env python3
"""Run a command RUNS times; print one JSON object: the median wall time, the largest
peak RSS of the process (wait4's ru_maxrss, KiB) and its exit status.

    bench/measure.py RUNS [--prepare 'SHELL COMMAND'] -- COMMAND ARGS...

stdout and stderr of COMMAND are discarded; `--prepare` runs before each run, untimed
(to remove the previous run's output).
"""
import json, os, statistics, subprocess, sys, time

args = sys.argv[1:]
runs = int(args.pop(0))
prepare = None
if args and args[0] == "--prepare":
    prepare = args[1]
    args = args[2:]
if args and args[0] == "--":
    args = args[1:]
times, rss, codes = [], 0, set()
for _ in range(runs):
    if prepare:
        subprocess.run(prepare, shell=True, check=True)
    t0 = time.monotonic()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    times.append(time.monotonic() - t0)
    rss = max(rss, usage.ru_maxrss)
    codes.add(os.waitstatus_to_exitcode(status))
print(json.dumps({"s": statistics.median(times), "rss_kb": rss, "exit": sorted(codes), "runs": runs}))
