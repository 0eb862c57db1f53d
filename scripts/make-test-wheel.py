#!/usr/bin/env python3
"""Build a wheel from files, with Python's own zipfile (an independent writer).

    make-test-wheel.py OUT.whl --name torch --version 2.10.0+rocm7.1 \\
        --tag cp311-cp311-linux_x86_64 torch/lib/libx.so=path/to/libx.so:755 ...

Each member is NAME=SOURCE[:OCTAL MODE] (mode 644 by default); SOURCE may be
`text:<content>`. The dist-info (METADATA, WHEEL, top_level.txt, RECORD with
urlsafe base64 SHA-256) is generated. Used by the wheel tests and benchmarks.
"""
import argparse
import base64
import csv
import hashlib
import io
import os
import zipfile
from pathlib import Path


def contents(d):
    """A member's bytes: given, or read from the file named."""
    return d.read_bytes() if isinstance(d, Path) else d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--name", default="pkg")
    ap.add_argument("--version", default="1.0")
    ap.add_argument("--tag", default="py3-none-any")
    ap.add_argument("--level", type=int, default=6)
    ap.add_argument("--stored", action="append", default=[], help="member names to store uncompressed")
    ap.add_argument("--no-dist-info", action="store_true")
    ap.add_argument("--tree", action="append", default=[], metavar="DIR=PREFIX",
                    help="add every regular file under DIR as PREFIX/<path>, with its mode")
    ap.add_argument("--dist-info-mode", default="644", help="octal mode of the dist-info files")
    ap.add_argument("--wheel-tag", action="append", default=[],
                    help="a Tag line of WHEEL (default: every tag of --tag's compressed set)")
    ap.add_argument("--tamper", action="append", default=[], metavar="NAME",
                    help="give member NAME a wrong hash in RECORD")
    ap.add_argument("members", nargs="*")
    a = ap.parse_intermixed_args()
    files = []
    for spec in a.members:
        name, src = spec.split("=", 1)
        mode = 0o644
        if "@" in name:
            name, m = name.rsplit("@", 1)
            mode = int(m, 8)
        if src.startswith("text:"):
            data = src[5:].encode()
        else:
            with open(src, "rb") as f:
                data = f.read()
        files.append((name, data, mode))
    for spec in a.tree:
        root, prefix = spec.split("=", 1)
        for dirpath, dirs, names in os.walk(root):
            dirs.sort()
            for n in sorted(names):
                p = os.path.join(dirpath, n)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                rel = os.path.relpath(p, root).replace(os.sep, "/")
                # Read when written (and once before, for RECORD): a tree of GBs is
                # never held in memory whole.
                files.append((f"{prefix}/{rel}", Path(p), os.stat(p).st_mode & 0o7777))
    di = f"{a.name.replace('-', '_')}-{a.version}.dist-info"
    dm = int(a.dist_info_mode, 8)
    parts = [p.split(".") for p in a.tag.split("-")]
    if a.wheel_tag:
        tags = a.wheel_tag
    elif len(parts) == 3:
        tags = [f"{x}-{y}-{z}" for x in parts[0] for y in parts[1] for z in parts[2]]
    else:
        tags = [a.tag]  # malformed on purpose (the refusal tests): written as given
    tag_lines = "".join(f"Tag: {t}\n" for t in tags)
    if not a.no_dist_info:
        top = sorted({n.split("/")[0] for n, _, _ in files if "/" in n})
        files.append((f"{di}/METADATA", f"Metadata-Version: 2.1\nName: {a.name}\nVersion: {a.version}\nSummary: test wheel\n\nA test wheel.\n".encode(), dm))
        files.append((f"{di}/WHEEL", f"Wheel-Version: 1.0\nGenerator: make-test-wheel\nRoot-Is-Purelib: false\n{tag_lines}".encode(), dm))
        files.append((f"{di}/top_level.txt", ("\n".join(top) + "\n").encode(), dm))
        # RECORD is CSV, written by the csv module as pip and wheel write it (names
        # with commas, quotes or newlines are quoted).
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        for n, d, _ in files:
            d = contents(d)
            digest = hashlib.sha256(d + (b"x" if n in a.tamper else b"")).digest()
            h = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
            w.writerow([n, f"sha256={h}", len(d)])
        w.writerow([f"{di}/RECORD", "", ""])
        files.append((f"{di}/RECORD", buf.getvalue().encode(), dm))
    with zipfile.ZipFile(a.out, "w") as z:
        for n, d, mode in files:
            d = contents(d)
            zi = zipfile.ZipInfo(n, date_time=(2026, 1, 1, 0, 0, 0))
            zi.create_system = 3
            zi.external_attr = (0o100000 | mode) << 16
            if n in a.stored:
                zi.compress_type = zipfile.ZIP_STORED
                z.writestr(zi, d)
            else:
                zi.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(zi, d, compresslevel=a.level)


if __name__ == "__main__":
    main()
