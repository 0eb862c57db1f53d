#!/usr/bin/env bash
# Record the trace of a real `make -j2` build through phc: three HIP files for four
# archs, each recipe marked `+` so phc shares make's jobserver, PHC_NINJA_TRACE set.
#
#   scripts/record-phc-trace.sh [OUT]   (default tests/fixtures/traces/phc-make-j2.trace)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/tests/fixtures/traces/phc-make-j2.trace}
for t in hipcc make cargo; do command -v "$t" >/dev/null || { echo "record-phc-trace: missing $t" >&2; exit 3; }; done
(cd "$here" && cargo build --quiet --bin phc)
phc=$here/target/debug/phc
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here"/tests/fixtures/src/{vadd,saxpy,counter}.hip "$work"/
cat > "$work/Makefile" <<MAKE
ARCHS := --offload-arch=gfx900 --offload-arch=gfx906 --offload-arch=gfx908 --offload-arch=gfx1030
all: vadd.o saxpy.o counter.o
%.o: %.hip
	+$phc hipcc -O2 -c \$< \$(ARCHS) -o \$@
MAKE
PHC_NINJA_TRACE=$work/build.trace make -s -j2 -C "$work"
mkdir -p "$(dirname "$out")"
cp "$work/build.trace" "$out"
echo "record-phc-trace: $(grep -vc '^#' "$out") steps in $out"
