#!/usr/bin/env bash
# Build one shard's artifact directory the way a ROCm build machine does for its
# targets: the fixture HIP sources (tests/fixtures/src) compiled for TARGETs into
# a shared library (two TUs) and a PIE executable, under one stage prefix, with
# artifact_manifest.txt. Used by the three-shard test and by docs/ci-matrix.md.
#
#   scripts/make-shard.sh ART_DIR TARGET [TARGET...]     e.g. out/art gfx906 gfx908
#
# Needs hipcc and c++ (apt-get install hipcc g++). No GPU is needed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { echo "usage: make-shard.sh ART_DIR TARGET [TARGET...]" >&2; exit 2; }
art=$1
shift
archs=()
for t in "$@"; do archs+=("--offload-arch=$t"); done
prefix=kpack/test/stage
mkdir -p "$art/$prefix/lib" "$art/$prefix/bin"
art=$(cd "$art" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cp "$here"/tests/fixtures/src/{vadd.hip,saxpy.hip,main.cpp} .
# hipcc's link step chatters (GPU probing): show it only on failure.
quiet() { "$@" >log 2>&1 || { cat log >&2; return 1; }; }
quiet hipcc -O2 -g0 -fPIC -c "${archs[@]}" vadd.hip -o vadd.o
quiet hipcc -O2 -g0 -fPIC -c "${archs[@]}" saxpy.hip -o saxpy.o
c++ -O2 -g0 -fPIC -c main.cpp -o main.o
quiet hipcc -O2 -g0 -fPIC -Wl,--build-id=none -shared vadd.o saxpy.o -o "$art/$prefix/lib/libvadd.so"
quiet hipcc -O2 -g0 -fPIC -Wl,--build-id=none -pie main.o vadd.o saxpy.o -o "$art/$prefix/bin/app"
printf '%s\n' "$prefix" > "$art/artifact_manifest.txt"
echo "make-shard: $art ($*)"
