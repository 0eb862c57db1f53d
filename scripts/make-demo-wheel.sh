#!/usr/bin/env bash
# Lays out assets/wheels/torch-2.10.0+rocm7.1-cp311-cp311-linux_x86_64.whl, the fat
# wheel the README's tour splits, from the fixture libraries (hipcc: gfx900 and
# gfx90a; clang-19 with compressed bundles: gfx1030 and gfx90a:xnack+), with
# Python's own zipfile (scripts/make-test-wheel.py).
set -euo pipefail
cd "$(dirname "$0")/.."
f=tests/fixtures/bin
mkdir -p assets/wheels
python3 scripts/make-test-wheel.py assets/wheels/torch-2.10.0+rocm7.1-cp311-cp311-linux_x86_64.whl \
  --name torch --version 2.10.0+rocm7.1 --tag cp311-cp311-linux_x86_64 \
  --stored torch/lib/libkernels.so \
  "torch/__init__.py=text:import os
" \
  "torch/lib/libkernels.so@755=$f/libkernels.so" \
  "torch/lib/libkernels_z.so@755=$f/libkernels_z.so" \
  "torch/lib/libplain.so@755=$f/libplain.so" \
  "torch/share/data.txt@640=text:hello
"
