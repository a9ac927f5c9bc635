#!/usr/bin/env bash
# Nsight Compute on the grouped GEMM kernels at the prefill shape: throughput, warp states and, per SASS
# instruction, where the warps stall (scripts/stall_summary.py reads the source page). bench/NOTES.md
# quotes these. Run from the repository root on the GPU machine after a build (scripts/device-check.sh
# STEPS=build):
#     RECIPES="mxfp8 nvfp4" KERNEL_PATH=auto OUT=/some/dir bash scripts/profile-kernels.sh
# RECIPES: recipes or A:B pairs (default fp8-block128 mxfp8 mxfp8:mxfp4 nvfp4); KERNEL_PATH: passed to
# --kernel-path (default auto). Results: $OUT/ncu-<recipe>.txt (details) and $OUT/stalls-<recipe>.txt.
set -uo pipefail
OUT=${OUT:-$PWD/out}
RECIPES=${RECIPES:-fp8-block128 mxfp8 mxfp8:mxfp4 nvfp4}
KERNEL_PATH=${KERNEL_PATH:-auto}
BSGEMM=${BSGEMM:-./build/bsgemm}
mkdir -p "$OUT"
# SIZES: the problem sizes (default: four 4096x4096x7168 groups, the prefill shape); LABEL names the files.
SIZES=${SIZES:-"(4096,4096,7168,1),(4096,4096,7168,1),(4096,4096,7168,1),(4096,4096,7168,1)"}
LABEL=${LABEL:-}
# KERNELS: ncu's kernel-name regex (default grouped_, the GEMM kernels; "prepare" for the prepare kernel).
# SAMPLING: --warp-sampling-interval (default auto; 0 samples every 32 cycles, which the one-CTA prepare
# kernel needs for more than a handful of samples). EXAMPLE=1: the reference system's example (pointer
# array) instead of SIZES, e.g. EXAMPLE=1 KERNELS=prepare SAMPLING=0 RECIPES=fp8-block128 LABEL=-prepare.
KERNELS=${KERNELS:-grouped_}
SAMPLING=${SAMPLING:-auto}
EXAMPLE=${EXAMPLE:-0}
# RUN_ARGS: further options of `bsgemm run`, e.g. "--mma-tiler-mn 32,384" (a tile against another; LABEL
# keeps their files apart).
read -r -a run_args <<<"${RUN_ARGS:-}"
for recipe in $RECIPES; do
  a=${recipe%%:*} b=${recipe##*:} name=${recipe/:/-}$LABEL
  # lts__t_bytes: L2 traffic per second (the L2-bandwidth bound bench/NOTES.md discusses for fp8-block128).
  problem=(--layout contiguous --problem-sizes-mnkl "$SIZES")
  [ "$EXAMPLE" = 1 ] && problem=()
  # The example's kernels are profiled warm (the third call), like scripts/example-kernels.sh times them.
  skip=0
  [ "$EXAMPLE" = 1 ] && skip=2
  timeout 150 ncu --clock-control none --kernel-name regex:"$KERNELS" --launch-skip "$skip" --launch-count 1 \
    --warp-sampling-interval "$SAMPLING" \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section SourceCounters --metrics lts__t_bytes.sum.per_second \
    -o "$OUT/ncu-$name" -f \
    "$BSGEMM" run --a-recipe "$a" --b-recipe "$b" "${problem[@]}" --backend cuda \
    --kernel-path "$KERNEL_PATH" "${run_args[@]}" --skip-ref-check --iterations 4 >"$OUT/ncu-$name.log" 2>&1
  echo "ncu $recipe: rc=$?"
  ncu -i "$OUT/ncu-$name.ncu-rep" --page details >"$OUT/ncu-$name.txt" 2>&1
  ncu -i "$OUT/ncu-$name.ncu-rep" --page source --csv --print-source=sass >"$OUT/source-$name.csv" 2>/dev/null &&
    python3 scripts/stall_summary.py "$OUT/source-$name.csv" >"$OUT/stalls-$name.txt" 2>&1
  head -3 "$OUT/stalls-$name.txt"
  rm -f "$OUT/ncu-$name.ncu-rep"
done
