#!/usr/bin/env bash
# The one GPU check: build, the whole test suite (GPU tier included), compute-sanitizer, the tool on
# every recipe the CUDA back end runs, and the public benchmark next to the peers, all in one call on
# the H200.
#
# Run from the repository root on the GPU machine, with ../shared copied to .shared and GoogleTest's
# sources to .deps/googletest (both carried; see bench/NOTES.md):
#     STEPS=all OUT=/some/dir bash scripts/device-check.sh
# STEPS is a comma list of: build, cpu-tests, gpu-tests, sanitize, tool, bench, ab, probes (default: all), or pack.
# BENCH_RECIPES picks the recipes of the public benchmark (default: every recipe the CUDA back end runs).
# AB_BASE=PATH: a bsgemm binary of another commit (carried; PATH.xz is unpacked first). After the floor's rows, the
# FP4-weight recipes' masked decode cases and fp8-block128's contiguous cases are timed by it and by this build in
# turn, AB_REPS times (default 2), the least median of each and their ratio in the summary (a change's A/B in the
# same call as its checks, METHOD.md); with the bench step, or alone as the step `ab`.
# PREBUILT=PATH: a build packed on the CPU machine (`STEPS=pack`, which writes PACK, default out/prebuilt.tar.xz: the
# GPU tier's tests and ctest files, bsgemm, the library and the ptxas log), carried; the build step unpacks it instead
# of building, which leaves a short lease its ~100 s. It has no CPU tier (CI runs it) and no probes.
# Every step has a time limit so that the summary at the end always prints. Logs go to $OUT.
set -uo pipefail

OUT=${OUT:-$PWD/out}
STEPS=${STEPS:-all}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT"
SUMMARY=()
note() { SUMMARY+=("$*"); echo "== $*"; }
want() { [[ "$STEPS" == all || ",$STEPS," == *",$1,"* ]]; }
# The whole script stays inside one device call (10 minutes): every step is cut at its own limit or at
# what is left of DEADLINE seconds, whichever comes first, so that the summary always prints.
DEADLINE=${DEADLINE:-570}
# step NAME LIMIT_SECONDS COMMAND...: runs with a time limit, logs to $OUT/NAME.log, records the outcome.
step() {
  local name=$1 limit=$2; shift 2
  local left=$((DEADLINE - SECONDS - 10))
  if [ "$left" -lt 15 ]; then
    note "$name: skipped, out of time"
    return 124
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local start=$SECONDS
  timeout --signal=KILL "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  note "$name: rc=$rc in $((SECONDS - start)) s"
  return $rc
}

export PATH=/usr/local/cuda/bin:$PATH
GTEST_ARGS=()
[ -d .deps/googletest ] && GTEST_ARGS=(-DBSGEMM_GTEST_SOURCE_DIR="$PWD/.deps/googletest")

# The build step's configure and build; the build's limit as the argument. Its outcome is the build's.
configure_and_build() {
  step configure 120 cmake -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${GTEST_ARGS[@]}"
  step build "$1" cmake --build build -j "$JOBS"
}

if [[ ",$STEPS," == *",pack,"* ]]; then
  # On the CPU machine (no GPU needed): a clean build as the build step's (the ptxas log must name every kernel), then
  # the pack: what the GPU steps other than the probes run. ctest's file for tests/ includes only the GPU tier's list
  # of tests, as discovered here: ctest on the GPU machine then needs no other test binary and runs no discovery
  # (whose CMake module path is this machine's). ctest's files name this tree, rewritten to that one on unpacking.
  PACK=${PACK:-out/prebuilt.tar.xz}
  rm -rf build
  DEADLINE=$((SECONDS + 7200)) configure_and_build 3600 || { tail -20 "$OUT/build.log"; exit 1; }
  ctest --test-dir build -N -R '^Gpu' >/dev/null || exit 1
  cp "$OUT/build.log" build/ptxas.log
  echo "$PWD" >build/packed-root
  echo "$(git rev-parse HEAD)$(git diff --quiet HEAD -- src include tests tools CMakeLists.txt || echo ' with local changes')" \
    >build/packed-commit
  echo "include(\"$PWD/build/tests/test_gpu[1]_tests.cmake\")" >build/tests/CTestTestfile.cmake
  mkdir -p "$(dirname "$PACK")"
  tar -cJf "$PACK" build/bsgemm build/libbsgemm.a build/tests/test_gpu "build/tests/test_gpu[1]_tests.cmake" \
    build/CTestTestfile.cmake build/tests/CTestTestfile.cmake build/packed-root build/packed-commit build/ptxas.log
  note "pack: $PACK ($(du -h "$PACK" | cut -f1)), $(grep -c 'add_test' "build/tests/test_gpu[1]_tests.cmake") GPU tests, of $(cat build/packed-commit)"
  printf '%s\n' "${SUMMARY[@]}"
  exit 0
fi

if want build; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$OUT/gpu.txt" 2>&1
  if [ -n "${PREBUILT:-}" ]; then
    rm -rf build
    step unpack 60 tar -xJf "$PREBUILT" || exit 1
    sed -i "s#$(cat build/packed-root)#$PWD#g" build/CTestTestfile.cmake build/tests/CTestTestfile.cmake \
      "build/tests/test_gpu[1]_tests.cmake"
    cp build/ptxas.log "$OUT/build.log"
    note "build: prebuilt on the CPU machine from $(cat build/packed-commit)"
  else
    configure_and_build 420
  fi
  grep -E "spill stores" "$OUT/build.log" | sort | uniq -c >"$OUT/spills.txt"
  note "ptxas: $(grep -c ' 0 bytes spill stores' "$OUT/build.log") kernels without spills, $(grep -E 'spill stores' "$OUT/build.log" | grep -vc ' 0 bytes spill stores') with"
  cuobjdump --dump-sass build/libbsgemm.a >"$OUT/sass.txt" 2>/dev/null
  note "SASS: $(grep -c QGMMA "$OUT/sass.txt") QGMMA, $(grep -c HGMMA "$OUT/sass.txt") HGMMA, $(grep -cE '\bSTL\b|\bLDL\b' "$OUT/sass.txt") local-memory accesses"
fi

SMOKE_OK=1
if want gpu-tests || want sanitize || want tool || want bench || want probes; then
  # A small case of every recipe and layout first: when it fails, the memcheck log says why, and the
  # long steps are skipped instead of timing out one by one.
  step gpu-smoke 90 build/tests/test_gpu --gtest_color=no --gtest_filter="GpuSanitize.*"
  rc=$?
  if [ $rc != 0 ]; then
    SMOKE_OK=0
    tail -3 "$OUT/gpu-smoke.log"
    # memcheck explains a failure; a hang (killed) would only hang again under it.
    [ $rc != 137 ] && step smoke-memcheck 100 compute-sanitizer --tool memcheck --error-exitcode 3 build/tests/test_gpu \
      --gtest_color=no --gtest_filter="GpuSanitize.*"
  fi
  note "gpu-smoke: $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUT/gpu-smoke.log" | tr '\n' ' ')"
fi

# The sanitizers run beside the GPU tier: both check correctness and neither is timed, so the benchmark and the peers
# after them still fit in the call (on run 213's H200 the bench step alone took 229 s). Their notes join the summary
# after the tier's.
SANITIZE_PID=
if want sanitize && [ $SMOKE_OK = 1 ]; then
  (
    SUMMARY=()
    for tool in memcheck racecheck synccheck; do
      step "sanitize-$tool" 120 compute-sanitizer --tool "$tool" --error-exitcode 3 build/tests/test_gpu \
        --gtest_color=no --gtest_filter="GpuSanitize.*"
      note "compute-sanitizer $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-$tool.log" | tail -1)"
    done
    printf '%s\n' "${SUMMARY[@]}" >"$OUT/sanitize-summary.txt"
  ) >"$OUT/sanitize-steps.log" 2>&1 &
  SANITIZE_PID=$!
fi

if want gpu-tests && [ $SMOKE_OK = 1 ]; then
  # One process per test (ctest), so that a hang costs one test's time limit, not the call; several at
  # once, since their CPU work (inputs, the fp64 reference, the check) is most of their time.
  step gpu-tests 300 ctest --test-dir build -R "^Gpu" --timeout 250 -j 8 -V
  note "gpu-tests: $(grep -E 'tests passed|tests failed' "$OUT/gpu-tests.log" | tail -1)"
  # The largest normalised error seen per recipe variant and output type (README "Accuracy").
  sed -n 's/^[0-9]*: max_rel_err \(.*\) \([^ ]*\)$/\1 \2/p' "$OUT/gpu-tests.log" |
    awk '{v=$NF; $NF=""; if (!($0 in m) || v+0 > m[$0]+0) m[$0]=v} END {for (k in m) print k m[k]}' | sort >"$OUT/error-bounds.txt"
  grep -E "FAIL|Failed" "$OUT/gpu-tests.log" | sed 's/^[0-9]*: //' | sort | uniq >"$OUT/gpu-findings.txt"
  # The register-operand kernel's staged-token shapes in four processes at once, three times over: the load
  # and the repetitions found a race that one pass of the tier above had passed and the next failed
  # (bench/NOTES.md session 27).
  step gpu-stress 120 bash -c 'for i in 1 2 3 4; do
      build/tests/test_gpu --gtest_color=no --gtest_repeat=3 --gtest_filter="Gpu/GpuStagedTokens.EveryShape/*" \
        >"$1/gpu-stress$i.log" 2>&1 &
    done; wait' gpu-stress "$OUT"
  note "gpu-stress: $(cat "$OUT"/gpu-stress?.log | grep -c '^\[       OK') passed, $(cat "$OUT"/gpu-stress?.log |
    grep -c '^\[  FAILED  \].*ms)') failed (4 processes x 3 repetitions)"
fi

if [ -n "$SANITIZE_PID" ]; then
  wait "$SANITIZE_PID"
  [ -f "$OUT/sanitize-summary.txt" ] && while read -r line; do note "$line"; done <"$OUT/sanitize-summary.txt"
fi

if want tool && [ $SMOKE_OK = 1 ]; then
  # The reference system's example and variants through the tool; --backend auto must pick the GPU.
  step tool 150 bash -c '
    for recipe in fp8-block128 mxfp8 mxfp4 nvfp4; do
      ./build/bsgemm run --recipe "$recipe" --backend auto --c-dtype bf16 --iterations 20 --json "$1/run-$recipe-seed.json" \
        2>&1 | sed "s/^/[$recipe] /"
    done
    for pair in mxfp8:mxfp4 mxfp8:nvfp4 fp8-block128:mxfp4 fp8-block128:nvfp4; do
      ./build/bsgemm run --a-recipe "${pair%%:*}" --b-recipe "${pair##*:}" --backend auto --c-dtype bf16 --iterations 20 \
        --json "$1/run-${pair/:/-}-seed.json" 2>&1 | sed "s/^/[${pair/:/-}] /"
    done
    ./build/bsgemm run --recipe mxfp8 --a-dtype e5m2 --b-dtype e4m3 --backend cuda --iterations 5
    ./build/bsgemm run --recipe fp8-block128 --sf-dtype ue8m0 --backend cuda --layout contiguous \
      --problem-sizes-mnkl "(129,4096,7168,1),(0,4096,7168,1),(1,4096,7168,1),(4097,4096,7168,1)" --iterations 5
  ' tool "$OUT"
  note "tool: $(grep -cE '^(\[[a-z0-9-]*\] )?PASS$' "$OUT/tool.log") PASS, $(grep -cE '^(\[[a-z0-9-]*\] )?FAIL$' "$OUT/tool.log") FAIL; back end: $(grep -m1 -E 'back end ' "$OUT/tool.log")"
fi

# The A/B of AB_BASE against this build: run after the floor's rows and before the contiguous cases' long checks, so
# that a deadline cuts those, not the comparison that decides whether a kernel change lands. Nothing without AB_BASE.
run_ab() {
  [ -n "${AB_BASE:-}" ] || return 0
  base=$AB_BASE
  if [[ "$base" == *.xz ]]; then xz -dkf "$base" && base=${base%.xz}; fi
  chmod +x "$base" && base=$(realpath "$base")
  step ab 200 bash -c 'fp4=mxfp4,nvfp4,mxfp8:mxfp4,mxfp8:nvfp4,fp8-block128:mxfp4,fp8-block128:nvfp4
    cases="--cases .shared/bench/cases.json --backend cuda"
    for rep in $(seq "$3"); do for build in base this; do
      bin=$1; [ $build = this ] && bin=./build/bsgemm
      $bin bench $cases --cases-filter decode --recipes $fp4 --layouts masked --iterations 30 | grep "^decode" | sed "s/^/$build /"
      $bin bench $cases --recipes fp8-block128 --layouts contiguous --iterations 10 | grep -E "^(prefill|down|decode)" |
        sed "s/^/$build /"
    done; done >"$2/ab.txt"' ab "$base" "$OUT" "${AB_REPS:-2}"
  while read -r line; do note "ab $line"; done < <(python3 - "$OUT/ab.txt" <<'PY'
import collections, sys
least = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    build, case, recipe, layout, ms = line.split()[:5]
    key = (case, recipe, layout)
    least[key][build] = min(float(ms), least[key].get(build, float("inf")))
for (case, recipe, layout), ms in least.items():
    if "base" in ms and "this" in ms:
        print(f"{case} {recipe} {layout}: base {ms['base']:.4f} this {ms['this']:.4f} ms, {ms['this'] / ms['base']:.3f}x")
PY
  )
}

if want bench && [ $SMOKE_OK = 1 ]; then
  # Contiguous for every case; masked (DeepGEMM's decode form) for the decode cases.
  RECIPES=${BENCH_RECIPES:-fp8-block128,mxfp8,mxfp4,nvfp4,mxfp8:mxfp4,mxfp8:nvfp4,fp8-block128:mxfp4,fp8-block128:nvfp4}
  # The peers first and the decode cases next: they are short, and the other cases' checks are long (most of the bench
  # step's 229 s on run 213's H200), so a deadline cuts those, never the peers or the floor's rows (bench/NOTES.md
  # session 45). Each run draws a case's values once for all its recipes and layouts, so the decode cases run their
  # two forms together.
  step peers 300 env PYTHONUNBUFFERED=1 python3 .shared/bench/peers.py --cases .shared/bench/cases.json --json "$OUT/peers.json"
  step bench-decode 150 ./build/bsgemm bench --cases .shared/bench/cases.json --cases-filter decode --backend cuda \
    --recipes "$RECIPES" --layouts masked,contiguous --check --json "$OUT/bench-decode.json"
  # The floor of issue 4: each recipe's masked decode time against DeepGEMM's (bench/NOTES.md).
  while read -r line; do note "masked $line"; done < <(awk '/^decode.* masked / {print $1, $2, $4, $NF}' "$OUT/bench-decode.log")
  run_ab
  step bench 300 bash -c 'rc=0
    for c in seed prefill down; do
      ./build/bsgemm bench --cases .shared/bench/cases.json --cases-filter $c --backend cuda --recipes "$1" \
        --layouts contiguous --check --json "$2/bench-$c.json" || rc=1
    done; exit $rc' bench "$RECIPES" "$OUT"
  python3 -c 'import json,os,sys; print(json.dumps(sum((json.load(open(f)) for f in sys.argv[1:] if os.path.exists(f)), []), indent=1))' \
    "$OUT"/bench-{seed,prefill,down,decode}.json >"$OUT/bench.json"
  python3 bench/compare.py "$OUT/bench.json" "$OUT/peers.json" --gpu "$(head -2 "$OUT/gpu.txt" | tail -1)" >"$OUT/h200.md" 2>"$OUT/compare.err"
  note "bench table: $OUT/h200.md"
  cat "$OUT/h200.md"
  # The pointer-array form at decode sizes runs the register-operand kernel that decodes its own tokens, whose race
  # (found in bench/NOTES.md session 39, mended in session 40) only showed at these sizes: checked apart from the
  # table, its outcome in the summary.
  step bench-ptr-array 90 ./build/bsgemm bench --cases .shared/bench/cases.json --cases-filter decode --backend cuda \
    --recipes nvfp4,mxfp4,mxfp8:nvfp4,mxfp8:mxfp4 --layouts ptr-array --iterations 3 --check
  note "bench-ptr-array: $(grep -cE ' PASS$' "$OUT/bench-ptr-array.log") PASS, $(grep -cE ' FAIL$' "$OUT/bench-ptr-array.log") FAIL (decode cases)"
  # cuBLAS's own error on inputs drawn like bsgemm's (issue 3: both bounds side by side).
  step cublas-error 60 python3 bench/cublas_error.py --json "$OUT/cublas-error.json"
  while read -r line; do note "$line"; done < <(grep '^cuBLAS' "$OUT/cublas-error.log")
fi

if want ab && ! want bench && [ $SMOKE_OK = 1 ]; then
  run_ab
fi

if want cpu-tests && [ -n "${PREBUILT:-}" ]; then
  note "cpu-tests: not run, the packed build has only the GPU tier (CI runs the CPU tier)"
elif want cpu-tests; then
  step cpu-tests 300 ctest --test-dir build -j "$JOBS" -E "^Gpu" --output-on-failure
  note "cpu-tests: $(grep -E 'tests passed|tests failed' "$OUT/cpu-tests.log" | tail -1)"
fi

# Probes last: they inform bench/NOTES.md, and the deadline may cut them, never the checks above.
if want probes && [ -n "${PREBUILT:-}" ]; then
  note "probes: not run, the packed build has no probe binaries"
elif want probes && [ $SMOKE_OK = 1 ]; then
  # How much of the FP4 decode hides under wgmma on one SM, without memory traffic (bench/NOTES.md session 15).
  step wgmma-overlap 60 ./build/bsgemm_probe_wgmma_overlap
  while read -r line; do note "overlap $line"; done < <(grep "^|" "$OUT/wgmma-overlap.log")
  # Configurations other than the planner's on the largest case (bench/NOTES.md): a narrower tile.
  step bench-probes 90 bash -c 'for rt in fp8-block128:128,64 mxfp8:128,64 fp8-block128:64,256; do
      ./build/bsgemm bench --cases .shared/bench/cases.json --cases-filter prefill-uniform --backend cuda \
        --recipes ${rt%%:*} --mma-tiler-mn ${rt##*:} --iterations 10 | sed -n "s/^prefill/tile ${rt##*:} prefill/p"; done'
  # Where the reference system's example spends its time: each kernel's duration (warm caches, as in a
  # loop of calls), the prepare kernel against the GEMM kernel.
  step example-kernels 150 bash scripts/example-kernels.sh ./build/bsgemm
  note "probes: $(grep -c prefill "$OUT/bench-probes.log") lines in bench-probes.log"
  while read -r line; do note "example $line"; done < <(grep -E "\] (kernels|time)" "$OUT/example-kernels.log")
  # The kernel paths the planner does not take, for the recipes that have them (bench/NOTES.md versions 7
  # and 14): at prefill the planner stages the MX and NV recipes, so their unstaged kernels are timed here.
  step bench-paths 150 bash -c 'for rp in mxfp8:fp8 mxfp4:fp8 mxfp4:bf16 nvfp4:bf16 mxfp8:mxfp4:bf16; do
      ./build/bsgemm bench --cases .shared/bench/cases.json --backend cuda --recipes ${rp%:*} --kernel-path ${rp##*:} \
        --iterations 10 | sed -n "/^\(prefill-uniform\|down\|decode\)/s/^/path ${rp##*:} /p"; done'
  note "paths: $(grep -c path "$OUT/bench-paths.log") lines in bench-paths.log"
  # DeepSeek's MN-major fp32 scales for A (the layout its quantizers write), for comparison.
  step bench-mn-major 90 ./build/bsgemm bench --cases .shared/bench/cases.json --cases-filter prefill --backend cuda \
    --recipes fp8-block128 --scale-layout mn-major --json "$OUT/bench-mn-major.json"
fi

# At most a few files come back from the device: the tables, and everything else in one archive.
printf '%s\n' "${SUMMARY[@]}" >"$OUT/summary.txt"
(cd "$OUT" && tar czf logs.tar.gz --exclude=logs.tar.gz --exclude=sass.txt ./*.log ./*.txt ./*.json 2>/dev/null &&
  find . -maxdepth 1 -type f ! -name logs.tar.gz ! -name summary.txt ! -name h200.md ! -name bench.json \
    ! -name peers.json ! -name error-bounds.txt -delete)
echo
echo "==================== summary ===================="
printf '%s\n' "${SUMMARY[@]}"
