#!/usr/bin/env bash
# Builds several source trees (e.g. git worktrees of branches, carried to the GPU machine) side by side and
# runs the same measurements on each in one call, so that before/after numbers share a machine and a clock
# (METHOD.md; the same build measures up to 3% apart between calls). Run from the repository root on the
# GPU machine:
#     BENCH_ARGS="--recipes mxfp8,nvfp4 --cases-filter prefill-uniform" \
#       bash scripts/compare-builds.sh main=. ilp=.wt/decode-ilp
# Each LABEL=DIR is built into /tmp/compare-LABEL, the builds in parallel. Output lines are "LABEL <line>".
#   BENCH_ARGS   options of `bsgemm bench` (default: fp8-block128 and mxfp8 on every case); empty: no bench
#   CHECK_LABEL  these builds' bench outputs are checked (--check; labels separated by commas); the others are
#                only timed
#   EXAMPLE=1    the reference system's example per recipe in EXAMPLE_RECIPES: the tool's median time and
#                each kernel's duration (ncu, warm caches: prepare against GEMM)
#   REPS=N       the timings N times over, the builds alternating (default 1; --check the first time only)
#   GPU_TIER=LABEL  that build gets the tests too and runs the GPU tier (ctest -R ^Gpu) after the timings
#   GPU_TIER_FILTER  ctest's -R for that tier instead of ^Gpu (a few tests of a change, when time is short)
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
JOBS=${JOBS:-$(nproc)}
BENCH_ARGS=${BENCH_ARGS---recipes fp8-block128,mxfp8}
CASES=${CASES:-.shared/bench/cases.json}
CHECK_LABEL=${CHECK_LABEL:-}
EXAMPLE=${EXAMPLE:-0}
EXAMPLE_RECIPES=${EXAMPLE_RECIPES:-fp8-block128 mxfp8 nvfp4}
GPU_TIER=${GPU_TIER:-}
GPU_TIER_FILTER=${GPU_TIER_FILTER:-^Gpu}
REPS=${REPS:-1}
GTEST_ARGS=()
[ -d .deps/googletest ] && GTEST_ARGS=(-DBSGEMM_GTEST_SOURCE_DIR="$PWD/.deps/googletest")

jobs_each=$(( JOBS / $# > 1 ? JOBS / $# : 1 ))
for spec in "$@"; do
  label=${spec%%=*} dir=${spec#*=}
  build=/tmp/compare-$label
  (
    if [ "$label" = "$GPU_TIER" ]; then
      cmake -S "$dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${GTEST_ARGS[@]}" >/dev/null &&
        cmake --build "$build" -j "$jobs_each" >"$build.log" 2>&1
    else
      cmake -S "$dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBSGEMM_BUILD_TESTS=OFF >/dev/null &&
        cmake --build "$build" -j "$jobs_each" --target bsgemm_tool >"$build.log" 2>&1
    fi
    echo "build $label: rc=$? ($(grep -c ' 0 bytes spill stores' "$build.log") kernels without spills," \
      "$(grep 'spill stores' "$build.log" | grep -vc ' 0 bytes spill stores') with)"
  ) &
done
wait

for round in $(seq "$REPS"); do
for spec in "$@"; do
  label=${spec%%=*}
  bin=/tmp/compare-$label/bsgemm
  if [ -n "$BENCH_ARGS" ]; then
    check=()
    [[ ",$CHECK_LABEL," == *",$label,"* ]] && [ "$round" = 1 ] && check=(--check)
    # shellcheck disable=SC2086  # BENCH_ARGS is a list of options
    timeout 200 "$bin" bench --cases "$CASES" --backend cuda $BENCH_ARGS "${check[@]}" 2>/dev/null |
      grep -E '^[a-z]+-' | sed "s/^/$label /"
  fi
  if [ "$EXAMPLE" = 1 ]; then
    # shellcheck disable=SC2086  # EXAMPLE_RECIPES is a list of recipes
    bash scripts/example-kernels.sh "$bin" $EXAMPLE_RECIPES | sed "s/^/$label /"
  fi
done
done

if [ -n "$GPU_TIER" ]; then
  timeout 300 ctest --test-dir "/tmp/compare-$GPU_TIER" -R "$GPU_TIER_FILTER" --timeout 250 -j 8 --output-on-failure \
    >"/tmp/compare-$GPU_TIER-gpu.log" 2>&1
  echo "$GPU_TIER GPU tier: rc=$? $(grep -E 'tests passed|tests failed' "/tmp/compare-$GPU_TIER-gpu.log" | tail -1)"
  grep -E "\*\*\*Failed|Timeout" "/tmp/compare-$GPU_TIER-gpu.log" | head -10
fi
