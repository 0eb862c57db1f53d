#!/usr/bin/env bash
# Builds libembed.so and libembed.a in OUT_DIR (default tests/fixtures/bin, the last
# step of scripts/make-fixtures.sh): device code embedded outside
# .hip_fatbin (a code object in .rodata, an offload bundle in .aot_kernels), loaded by
# the library with hipModuleLoadData. The blobs are the committed hipcc-built
# fixtures vadd-gfx90a.co and kernels.hipfb found in OUT_DIR.
#
#   scripts/make-embedded.sh [OUT_DIR]
# Needs: gcc, binutils (ar), libamdhip64 (Debian's hipcc pulls it in).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$here/tests/fixtures/bin}" && pwd)
src=$here/tests/fixtures/src
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$bin"
gcc -c -fPIC "$src/embed.S" -o "$work/embed.o"
gcc -c -fPIC -O2 "$src/embed_loader.c" -o "$work/embed_loader.o"
gcc -shared -Wl,--build-id=none "$work/embed.o" "$work/embed_loader.o" \
  -L/usr/lib/x86_64-linux-gnu -lamdhip64 -o "$bin/libembed.so"
rm -f "$bin/libembed.a"
ar rcD "$bin/libembed.a" "$work/embed.o" "$work/embed_loader.o"
echo "make-embedded: wrote $bin/libembed.so and $bin/libembed.a"
