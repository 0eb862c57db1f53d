#!/usr/bin/env python3
"""Run COMMAND and sample /proc/PID/smaps and pagemap: at the largest resident part of
one input file (paths containing /bench/work/ or /tmp/s/), print which MiB of it
were mapped. Finds what a reader keeps resident.

    bench/resident.py COMMAND ARGS...
"""
import subprocess, sys, re, struct
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
best = (0, None)
while p.poll() is None:
    try:
        txt = open(f"/proc/{p.pid}/smaps").read()
    except Exception:
        break
    cur = None; top = None
    for line in txt.splitlines():
        m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) \S+ \d+\s*(.*)$", line)
        if m: cur = (int(m.group(1),16), int(m.group(2),16), int(m.group(3),16), m.group(4)); continue
        if line.startswith("Rss:") and cur and ("/bench/work/" in cur[3] or "/tmp/s/" in cur[3]):
            kb = int(line.split()[1])
            if kb > best[0]:
                # read pagemap now
                try:
                    f = open(f"/proc/{p.pid}/pagemap", "rb"); f.seek(cur[0]//4096*8)
                    data = f.read((cur[1]-cur[0])//4096*8)
                    present = [i for i in range(len(data)//8) if struct.unpack_from("<Q", data, i*8)[0] >> 63]
                    best = (kb, cur, present)
                except Exception as e:
                    pass
kb, cur, present = best
print(kb, "KB in", cur[3], "map offset", cur[2])
# group runs
runs=[]; 
for i in present:
    if runs and runs[-1][1]==i-1: runs[-1][1]=i
    else: runs.append([i,i])
for a,b in runs[:40]: print("  MiB %.2f-%.2f (%d pages)" % (a*4096/2**20, (b+1)*4096/2**20, b-a+1))
print(len(runs), "runs")
