#!/usr/bin/env python3
"""Map FILE and read one byte, then a second 16 MiB on: print how much RssFile grew.
Shows how much of a file the kernel maps on one read fault (a whole page-cache
folio, up to 2 MiB, on Linux 6.18). Optional advice: random, seq, nohuge.

    bench/fault_span.py FILE [random|seq|nohuge]
"""
import mmap, os, sys
path = sys.argv[1]; adv = sys.argv[2] if len(sys.argv) > 2 else None
f = open(path, 'rb'); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
if adv == 'random': m.madvise(mmap.MADV_RANDOM)
if adv == 'nohuge': m.madvise(mmap.MADV_NOHUGEPAGE)
if adv == 'seq': m.madvise(mmap.MADV_SEQUENTIAL)
def rss():
    for l in open('/proc/self/status'):
        if l.startswith('RssFile'): return int(l.split()[1])
r0 = rss(); x = m[64*2**20 + 12345]; r1 = rss()
x = m[80*2**20 + 999]; r2 = rss()
print(adv, "after 1 touch +%d KB, after 2 +%d KB" % (r1 - r0, r2 - r0))
