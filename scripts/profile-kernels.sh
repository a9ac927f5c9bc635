#!/usr/bin/env bash
# Nsight Compute on the two FP8 kernels at the prefill shape (what bench/NOTES.md cites as the bounds).
# Run from the repository root on the GPU machine after a build (scripts/device-check.sh STEPS=build).
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
sizes="(4096,4096,7168,1),(4096,4096,7168,1),(4096,4096,7168,1),(4096,4096,7168,1)"
for recipe in fp8-block128 mxfp8; do
  timeout 150 ncu --clock-control none --kernel-name regex:grouped_fp8 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis \
    ./build/bsgemm run --recipe "$recipe" --layout contiguous --problem-sizes-mnkl "$sizes" --backend cuda \
    --skip-ref-check --iterations 1 >"$OUT/ncu-$recipe.txt" 2>&1
  echo "ncu $recipe: rc=$?"
done
