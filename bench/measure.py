#!/usr/bin/env python3
"""Run a command RUNS times; print one JSON object: the median wall time, the largest
peak RSS of the process (wait4's ru_maxrss, KiB) and its exit status (with the end of
its stderr, `error`, when a run failed: a failed run's figures are no measurement).

    bench/measure.py RUNS [--prepare 'SHELL COMMAND'] [--warm PATH]... [--sync] -- COMMAND ARGS...

stdout of COMMAND is discarded, stderr kept only for a failed run; `--prepare` runs before each run, untimed
(to remove the previous run's output). `--warm PATH` reads PATH, or every file under it,
before each run, untimed, so that every run starts with its input in the page cache
whatever earlier runs evicted; `--sync` times a `sync` after COMMAND, so that a run's
time includes writing its output to disk whether or not it fit in the kernel's budget
of dirty pages. (Without them, an 8 GiB tree's runs read their input from disk and
wait on writeback where a 1 GiB tree's do neither: the limit itself took 1.72 times
as long per GiB.)

The peak RSS is GNU time's (`/usr/bin/time -f %M`), which starts COMMAND from its own
small process: a process this script starts itself inherits the script's memory
until it runs COMMAND, and the kernel counts that in its peak (`wait4`'s ru_maxrss
of `true` started from here read 15 MiB, the floor of every figure below it).
"""
import json, os, statistics, subprocess, sys, tempfile, time

args = sys.argv[1:]
runs = int(args.pop(0))
prepare, warm, sync = None, [], False
while args and args[0] in ("--prepare", "--warm", "--sync"):
    flag = args.pop(0)
    if flag == "--prepare":
        prepare = args.pop(0)
    elif flag == "--warm":
        warm.append(args.pop(0))
    else:
        sync = True


def read_all(top):
    buf = bytearray(1 << 20)
    paths = [top] if os.path.isfile(top) else (
        os.path.join(d, n) for d, _, names in os.walk(top) for n in names)
    for p in paths:
        if os.path.islink(p) or not os.path.isfile(p):
            continue
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass

if args and args[0] == "--":
    args = args[1:]
TIME = "/usr/bin/time"
if not os.access(TIME, os.X_OK):
    sys.exit("measure.py: GNU time (/usr/bin/time, Debian package time) is needed for the peak RSS")
times, rss, codes, error = [], 0, set(), None
for _ in range(runs):
    if prepare:
        subprocess.run(prepare, shell=True, check=True)
    if sync:
        os.sync()
    for top in warm:
        read_all(top)
    t0 = time.monotonic()
    err = tempfile.TemporaryFile()
    peak = tempfile.NamedTemporaryFile(mode="r")
    p = subprocess.Popen([TIME, "-f", "%M", "-o", peak.name, "--", *args],
                         stdout=subprocess.DEVNULL, stderr=err)
    _, status, _ = os.wait4(p.pid, 0)
    if sync:
        os.sync()
    times.append(time.monotonic() - t0)
    # The last line (a failed command's status comes before it).
    rss = max(rss, int(peak.read().split()[-1]))
    peak.close()
    code = os.waitstatus_to_exitcode(status)
    codes.add(code)
    if code != 0 and error is None:
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
        error = " / ".join(lines[-3:])[-400:]
    err.close()
out = {"s": statistics.median(times), "rss_kb": rss, "exit": sorted(codes), "runs": runs, "warm": bool(warm), "sync": sync}
if error is not None:
    out["error"] = error
print(json.dumps(out))
