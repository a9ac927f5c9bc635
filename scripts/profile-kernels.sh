#!/usr/bin/env bash
# Nsight Compute on the FP8 kernels (and FP8 x FP4) at the prefill shape (what bench/NOTES.md cites as the bounds).
# Run from the repository root on the GPU machine after a build (scripts/device-check.sh STEPS=build).
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
sizes="(4096,4096,7168,1),(4096,4096,7168,1),(4096,4096,7168,1),(4096,4096,7168,1)"
# lts__t_bytes: the L2 traffic in bytes per second, to test the L2-bandwidth bound bench/NOTES.md infers for
# fp8-block128 (~6.6 TB/s at 859 TFLOP/s).
for recipe in fp8-block128 mxfp8 mxfp8:mxfp4; do
  a=${recipe%%:*} b=${recipe##*:}
  timeout 150 ncu --clock-control none --kernel-name regex:grouped_fp8 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --metrics lts__t_bytes.sum.per_second \
    ./build/bsgemm run --a-recipe "$a" --b-recipe "$b" --layout contiguous --problem-sizes-mnkl "$sizes" --backend cuda \
    --skip-ref-check --iterations 1 >"$OUT/ncu-${recipe/:/-}.txt" 2>&1
  echo "ncu $recipe: rc=$?"
done
