#!/usr/bin/env bash
# Builds several source trees (e.g. git worktrees of branches, carried to the GPU machine) side by side and
# runs the same benchmark on each in one call, so that before/after numbers share a machine and a clock
# (METHOD.md). Run from the repository root on the GPU machine:
#     BENCH_ARGS="--recipes mxfp8,nvfp4 --cases-filter prefill-uniform" \
#       bash scripts/compare-builds.sh main=. ilp=.wt/decode-ilp
# Each LABEL=DIR is built into /tmp/compare-LABEL (the tool only); output lines are "LABEL <bench line>".
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
JOBS=${JOBS:-$(nproc)}
BENCH_ARGS=${BENCH_ARGS:---recipes fp8-block128,mxfp8}
CASES=${CASES:-.shared/bench/cases.json}
for spec in "$@"; do
  label=${spec%%=*} dir=${spec#*=}
  build=/tmp/compare-$label
  cmake -S "$dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBSGEMM_BUILD_TESTS=OFF >/dev/null &&
    cmake --build "$build" -j "$JOBS" --target bsgemm_tool >"$build.log" 2>&1
  echo "build $label: rc=$? ($(grep -c ' 0 bytes spill stores' "$build.log") kernels without spills)"
done
for spec in "$@"; do
  label=${spec%%=*}
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of options
  timeout 200 "/tmp/compare-$label/bsgemm" bench --cases "$CASES" --backend cuda $BENCH_ARGS 2>/dev/null |
    grep -E '^[a-z]+-' | sed "s/^/$label /"
done
