#!/usr/bin/env python3
"""Merge a partial report into the committed one: rows of the benchmarks NEW has
replace OLD's rows of the same name in the same section (at the place of OLD's first
such row; the main table and each `## ` section name their rows apart: `pack` of the
scale table is not the main table's `pack`); a section's `Ctrl-C during …` line is
replaced by NEW's. Rows of benchmarks NEW does not have stay as they were, under
OLD's machine line (NEW's is added, naming its rows, when it differs). Prints the
merged report.

    bench/merge.py OLD.md NEW.md > RESULTS.md
"""
import sys


def row_name(line):
    """A table row's first cell, or None for other lines (headers, separators)."""
    if not line.startswith("| ") or line.startswith("| benchmark ") or line.startswith("| command "):
        return None
    return line.split("|")[1].strip()


def keyed(lines):
    """Each line with its section (the last `## ` heading, None before any) and its
    key: (section, row name) for a table row, (section, "Ctrl-C") for a cancel
    line, else None."""
    section = None
    for line in lines:
        if line.startswith("## "):
            section = line[3:].strip()
        n = row_name(line)
        if n is not None:
            yield line, (section, n)
        elif line.startswith("Ctrl-C during "):
            yield line, (section, "Ctrl-C")
        else:
            yield line, None


def label(key):
    section, name = key
    return name if section is None else f"{section.split(' (')[0].lower()}: {name}"


old = open(sys.argv[1]).read().splitlines()
new = open(sys.argv[2]).read().splitlines()
new_rows = {}
for line, key in keyed(new):
    if key is not None:
        new_rows.setdefault(key, []).append(line)
labels = [label(k) for k in new_rows]
out, placed = [], set()
for line, key in keyed(old):
    if line.startswith("Machine:"):
        # The rows kept were measured on the old machine: a different one is named
        # with the rows measured on it.
        out.append(line)
        now = next((l for l in new if l.startswith("Machine:")), line)
        if now != line:
            out.append("")
            out.append(f"Rows re-measured later ({', '.join(labels)}): {now[0].lower()}{now[1:]}")
    elif line.startswith("Rows re-measured later ("):
        # An earlier partial run's machine: dropped once all its rows are re-measured.
        names = line[len("Rows re-measured later ("):].split(")")[0].split(", ")
        if not all(x in labels for x in names):
            out.append(line)
        elif out and out[-1] == "":
            out.pop()
    elif key is None:
        out.append(line)
    elif key in new_rows:
        if key not in placed:
            out.extend(new_rows[key])
            placed.add(key)
    else:
        out.append(line)
# Benchmarks OLD never had go after the last row of their section's table (the
# first table's for rows of the main table).
for key, lines in new_rows.items():
    if key in placed:
        continue
    section = key[0]
    cur, at = None, None
    for i, l in enumerate(out):
        if l.startswith("## "):
            cur = l[3:].strip()
        if cur == section and row_name(l) is not None:
            at = i
    if at is None:
        out.extend([""] + lines)
    else:
        out[at + 1:at + 1] = lines
    placed.add(key)
print("\n".join(out))
