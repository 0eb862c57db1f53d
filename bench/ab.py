#!/usr/bin/env python3
"""Compare builds (or commands) run alternately in one session: the median wall time
and user CPU time of each, relative to the first.

    bench/ab.py RUNS PREP 'COMMAND A' 'COMMAND B' ...

PREP (a shell command, untimed, '' for none) runs before every run; `{i}` in PREP and
the commands is the command's index (so each writes its own output). Each command
runs once untimed first; then the order alternates every round, so that a drift of
the machine (page cache, writeback) falls on both. Used for the figures against the
build before #28 in bench/RESULTS.md, e.g. with a worktree of the old revision:

    bench/ab.py 8 'rm -rf /dev/shm/c{i}' \\
      '/old/kpack-tui combine a b -o /dev/shm/c{i}' 'target/release/kpack-tui combine a b -o /dev/shm/c{i}'
"""
import os, shlex, statistics, subprocess, sys, time

n, prep, cmds = int(sys.argv[1]), sys.argv[2], sys.argv[3:]


def run(j):
    if prep:
        subprocess.run(prep.replace("{i}", str(j)), shell=True, check=True)
    t0 = time.perf_counter()
    p = subprocess.Popen(shlex.split(cmds[j].replace("{i}", str(j))),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, ru = os.wait4(p.pid, 0)
    return time.perf_counter() - t0, ru.ru_utime


wall = [[] for _ in cmds]
user = [[] for _ in cmds]
for j in range(len(cmds)):
    run(j)
for i in range(n):
    for j in (range(len(cmds)) if i % 2 == 0 else reversed(range(len(cmds)))):
        w, u = run(j)
        wall[j].append(w)
        user[j].append(u)
m = [statistics.median(x) for x in wall]
c = [statistics.median(x) for x in user]
for j, cmd in enumerate(cmds):
    print(f"{m[j] * 1000:9.1f} ms (min {min(wall[j]) * 1000:.1f}) {m[j] / m[0]:.3f}x"
          f"  user {c[j] * 1000:.0f} ms {c[j] / max(c[0], 1e-9):.3f}x  {cmd}")
