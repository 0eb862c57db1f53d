#!/usr/bin/env python3
"""Print rocm-bootstrap's packaging tables as the JSON kept in crates/kpack/data/rocm-bootstrap.json.

`wheel split` reads that file (bundle keys, target -> sub-family -> family chains,
display names, owners). CI installs rocm-bootstrap from PyPI and compares:

    python3 scripts/rocm-bootstrap-table.py | diff - crates/kpack/data/rocm-bootstrap.json

Only the package's public API is used.
"""
import json
import sys
from importlib.metadata import version

import rocm_bootstrap as rb


def bundle(b):
    return {
        "key": b.key,
        "level": b.level.value,
        "display_name": b.display_name,
        "llvm_generic": b.llvm_generic,
        "members": [t.name for t in b.members],
    }


def main():
    targets = sorted(t.name for t in rb.ALL_TARGETS)
    chains = {}
    for t in targets:
        chains[t] = [b.key for b in rb.packaging_chain(t)]
    bundles = {b.key: bundle(b) for b in rb.all_bundles()}
    # Keys lookup_bundle accepts beyond the canonical ones (aliases such as gfx11_0).
    probes = set()
    for t in targets:
        digits = t[3:]
        for n in range(2, len(digits) + 1):
            stem = "gfx" + digits[:n]
            probes.update({stem, stem + "x", stem + "_0", stem + "_5"})
            probes.update({"gfx" + digits[: n - 1] + "_" + digits[n - 1 : n]})
    aliases = {}
    for p in sorted(probes):
        if p in bundles:
            continue
        try:
            aliases[p] = rb.lookup_bundle(p).key
        except ValueError:
            pass
    out = {
        "source": "rocm-bootstrap " + version("rocm-bootstrap"),
        "targets": targets,
        "chains": chains,
        "bundles": dict(sorted(bundles.items())),
        "aliases": aliases,
    }
    json.dump(out, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
