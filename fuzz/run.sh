#!/usr/bin/env bash
# Run every fuzz target from the committed seeds.
#
#   fuzz/run.sh [RUNS]        deterministic: -seed=1, RUNS executions each (default 100000)
#   fuzz/run.sh --time SECS   exploratory: SECS seconds each, random seed
#
# Needs a nightly toolchain and cargo-fuzz (cargo install cargo-fuzz). A crash is
# saved under fuzz/artifacts/<target>/; copy it to fuzz/regressions/<target>/ so
# tests/fuzz_replay.rs keeps checking it on stable.
set -euo pipefail
cd "$(dirname "$0")"
if [ "${1:-}" = "--time" ]; then
  limit=(-max_total_time="${2:-60}")
else
  limit=(-seed=1 -runs="${1:-100000}")
fi
for t in $(ls fuzz_targets | sed 's/\.rs$//'); do
  mkdir -p "corpus/$t"
  echo "fuzz: $t (${limit[*]})"
  # pipefail: the pipeline fails when cargo fuzz does (the filter never fails it).
  if ! cargo +nightly fuzz run "$t" "corpus/$t" "seeds/$t" -- "${limit[@]}" -rss_limit_mb=2048 -max_len=65536 2>&1 |
    { grep -E "^#[0-9]+ +DONE|^Done [0-9]+ runs|ERROR|panicked|SUMMARY|Test unit" || true; }; then
    echo "fuzz: $t found a crash (see fuzz/artifacts/$t)" >&2
    exit 1
  fi
done
