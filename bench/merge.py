#!/usr/bin/env python3
"""Merge a partial report into the committed one: rows of the benchmarks NEW has
replace OLD's rows of the same name (at the place of OLD's first such row); rows of
benchmarks NEW does not have stay as they were, under OLD's machine line (NEW's is
added, naming its rows, when it differs). Prints the merged report.

    bench/merge.py OLD.md NEW.md > RESULTS.md
"""
import sys

def row_name(line):
    """A table row's first cell, or None for other lines (headers, separators)."""
    if not line.startswith("| ") or line.startswith("| benchmark ") or line.startswith("| command "):
        return None
    return line.split("|")[1].strip()

old = open(sys.argv[1]).read().splitlines()
new = open(sys.argv[2]).read().splitlines()
new_rows = {}
for line in new:
    n = row_name(line)
    if n is not None:
        new_rows.setdefault(n, []).append(line)
out, placed = [], set()
for line in old:
    n = row_name(line)
    if line.startswith("Machine:"):
        # The rows kept were measured on the old machine: a different one is named
        # with the rows measured on it.
        out.append(line)
        now = next((l for l in new if l.startswith("Machine:")), line)
        if now != line:
            names = ", ".join(n for n in new_rows)
            out.append("")
            out.append(f"Rows re-measured later ({names}): {now[0].lower()}{now[1:]}")
    elif line.startswith("Rows re-measured later ("):
        # An earlier partial run's machine: dropped once all its rows are re-measured.
        names = line[len("Rows re-measured later ("):].split(")")[0].split(", ")
        if not all(x in new_rows for x in names):
            out.append(line)
        elif out and out[-1] == "":
            out.pop()
    elif n is None:
        out.append(line)
    elif n in new_rows:
        if n not in placed:
            out.extend(new_rows[n])
            placed.add(n)
    else:
        out.append(line)
# Benchmarks OLD never had go after the last row of its first table.
missing = [l for n, ls in new_rows.items() if n not in placed for l in ls]
if missing:
    last = max(i for i, l in enumerate(out) if row_name(l) is not None and not l.startswith("| limit"))
    first_table_end = next((i for i in range(len(out)) if out[i].startswith("## ")), len(out))
    at = min(last, first_table_end - 1)
    while at > 0 and row_name(out[at]) is None:
        at -= 1
    out[at + 1:at + 1] = missing
print("\n".join(out))
