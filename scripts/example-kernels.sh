#!/usr/bin/env bash
# The reference system's example, per recipe: the tool's median time over 50 calls, then each kernel's
# duration under ncu with warm caches (the GEMM kernel; the prepare kernel too where one runs, which the
# tool's host-resident descriptions no longer need), one line each:
#     bash scripts/example-kernels.sh BSGEMM_BINARY [RECIPE or A:B ...]   (default: fp8-block128 mxfp8 nvfp4)
# scripts/device-check.sh (probes) and scripts/compare-builds.sh (EXAMPLE=1) call it on the GPU machine.
set -uo pipefail
bin=$1
shift
recipes=("$@")
[ ${#recipes[@]} -gt 0 ] || recipes=(fp8-block128 mxfp8 nvfp4)
for recipe in "${recipes[@]}"; do
  # A:B names a mixed pair (FP8 activations, FP4 weights), e.g. mxfp8:mxfp4.
  pair=(--a-recipe "${recipe%%:*}" --b-recipe "${recipe##*:}")
  echo "[$recipe] $("$bin" run "${pair[@]}" --backend cuda --iterations 50 2>&1 | grep -E '^time:|^PASS|^FAIL' | tr '\n' ' ')"
  timeout 60 ncu --cache-control none --clock-control none --kernel-name regex:"prepare|grouped_" --launch-skip 4 \
    --launch-count 2 --metrics gpu__time_duration.sum "$bin" run "${pair[@]}" --backend cuda --iterations 4 \
    --skip-ref-check 2>&1 | grep -E "_kernel|gpu__time_duration" |
    sed -E 's/.*(prepare_groups_kernel|grouped_[a-z0-9]*_kernel).*/\1/; s/^ *gpu__time_duration.sum *([a-z]*) *([0-9.,]*)/ \2 \1/' |
    paste -sd' ' | sed "s/^/[$recipe] kernels: /"
done
