#!/usr/bin/env bash
# Build the kpack-tui wheel (both programs) for glibc 2.28 (EL8, manylinux_2_28) with
# maturin and zig as the linker, check its tag with auditwheel, install it into a
# fresh venv without an index and run it there: --version, a pack of the demo tree
# and a verify of the result.
#
#   scripts/build-wheel.sh              # maturin, ziglang, auditwheel from PyPI (cached)
#   KPACK_WHEELHOUSE=DIR scripts/build-wheel.sh   # ... from DIR only (offline)
#
# The wheel is left in target/wheels/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
wheelhouse=${KPACK_WHEELHOUSE:-$root/target/ci-wheelhouse}
mkdir -p "$wheelhouse"
tools=(maturin==1.16.0 ziglang==0.17.1 auditwheel==6.8.2 pipx==1.18.4 uv==0.13.9)
if ! python3 -m pip download -q --disable-pip-version-check --no-index --find-links "$wheelhouse" \
       -d "$wheelhouse" "${tools[@]}" >/dev/null 2>&1; then
  python3 -m pip download -q --disable-pip-version-check -d "$wheelhouse" "${tools[@]}" \
    || { echo "build-wheel: cannot download ${tools[*]} from PyPI" >&2; exit 1; }
fi
buildenv=$root/target/wheel-build-venv
[ -x "$buildenv/bin/maturin" ] && [ -x "$buildenv/bin/uv" ] && [ -x "$buildenv/bin/pipx" ] || {
  python3 -m venv "$buildenv"
  "$buildenv/bin/pip" install -q --disable-pip-version-check --no-index --find-links "$wheelhouse" "${tools[@]}"
}
out=$root/target/wheels
rm -rf "$out"
echo "build-wheel: maturin build --release --zig --compatibility manylinux_2_28"
PATH="$buildenv/bin:$PATH" "$buildenv/bin/maturin" build --release --zig \
  --compatibility manylinux_2_28 --out "$out" --quiet
wheel=$(ls "$out"/kpack_tui-*.whl)
echo "build-wheel: $(basename "$wheel")"
case "$(basename "$wheel")" in
  *manylinux_2_28_x86_64*) ;;
  *) echo "build-wheel: not tagged manylinux_2_28: $wheel" >&2; exit 1 ;;
esac
# auditwheel: the highest glibc symbol version the binaries need must be <= 2.28.
audit=$("$buildenv/bin/auditwheel" show "$wheel")
echo "$audit"
echo "$audit" | tr -d '\n' | grep -q '"manylinux_2_28_x86_64"' \
  || { echo "build-wheel: auditwheel does not find the wheel manylinux_2_28 compatible" >&2; exit 1; }
# Installed into a fresh venv, from the wheel alone.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check --no-index "$wheel"
for p in kpack-tui phc; do
  [ -x "$tmp/venv/bin/$p" ] || { echo "build-wheel: $p is not in the venv's bin/" >&2; exit 1; }
done
"$tmp/venv/bin/kpack-tui" --version
"$tmp/venv/bin/phc" --version
"$tmp/venv/bin/python" - "$wheel" <<'PY'
import sys, zipfile
meta = next(n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.endswith(".dist-info/METADATA"))
text = zipfile.ZipFile(sys.argv[1]).read(meta).decode()
head = dict(l.split(": ", 1) for l in text.split("\n\n", 1)[0].splitlines() if ": " in l)
for field, want in [("Name", "kpack-tui"), ("License-Expression", "MIT OR Apache-2.0")]:
    assert head.get(field) == want, (field, head.get(field))
assert "Summary" in head and text.count("Classifier: ") >= 5, "summary and classifiers"
print("build-wheel: METADATA", head["Name"], head["Version"], head["License-Expression"])
PY
"$tmp/venv/bin/kpack-tui" pack assets/demo -o "$tmp/packed" --group demo --all -j 2 > "$tmp/pack.txt"
tail -n 3 "$tmp/pack.txt"
"$tmp/venv/bin/kpack-tui" verify "$tmp/packed" | tail -n 1
# pip install . from the checkout (the PEP 517 path through maturin), with the same
# build flags, so cargo reuses the build above.
python3 -m venv "$tmp/src-venv"
"$tmp/src-venv/bin/pip" install -q --disable-pip-version-check --no-index --find-links "$wheelhouse" \
  "${tools[0]}" "${tools[1]}"
echo "build-wheel: pip install . (maturin's PEP 517 backend)"
PATH="$tmp/src-venv/bin:$PATH" MATURIN_PEP517_ARGS="--zig --compatibility manylinux_2_28" \
  "$tmp/src-venv/bin/pip" install -q --disable-pip-version-check --no-index --no-build-isolation "$root"
"$tmp/src-venv/bin/kpack-tui" --version
"$tmp/src-venv/bin/phc" --version
echo "build-wheel: pip wheel ."
PATH="$tmp/src-venv/bin:$PATH" MATURIN_PEP517_ARGS="--zig --compatibility manylinux_2_28" \
  "$tmp/src-venv/bin/pip" wheel -q --disable-pip-version-check --no-index --no-build-isolation --no-deps \
  -w "$tmp/pipwheel" "$root"
ls "$tmp/pipwheel"/kpack_tui-*manylinux_2_28_x86_64.whl
# pipx and uv tool install of the wheel, offline, into throw-away homes.
echo "build-wheel: pipx install, uv tool install"
PIP_NO_INDEX=1 PIP_FIND_LINKS="$wheelhouse" PIPX_HOME="$tmp/pipx" PIPX_BIN_DIR="$tmp/pipx-bin" \
  PIPX_MAN_DIR="$tmp/pipx-man" "$buildenv/bin/pipx" install "$wheel" >/dev/null
"$tmp/pipx-bin/kpack-tui" --version
UV_TOOL_DIR="$tmp/uv" UV_TOOL_BIN_DIR="$tmp/uv-bin" UV_CACHE_DIR="$tmp/uv-cache" \
  "$buildenv/bin/uv" tool install -q --offline --no-index --python python3 "$wheel"
"$tmp/uv-bin/kpack-tui" --version
"$tmp/uv-bin/phc" --version
echo "build-wheel: ok"
