#!/usr/bin/env bash
# Runs the whole test suite: installs what is missing, builds the CPU configuration (and, when
# the CUDA toolkit is present, compiles the EMBER_CUDA=ON configuration too), then ctest; then
# every fuzz target for a bounded time (preset fuzz, fuzz/run.sh). Prints each step's wall time
# at the end ("ci_time_<step> N s").
#   EMBER_SKIP_CUDA_BUILD=1  skip the CUDA compile check
#   EMBER_SKIP_FUZZ=1        skip the fuzz targets
#   EMBER_FUZZ_SECONDS=N     seconds per fuzz target (default 30)
#   EMBER_BUILD_JOBS=N       parallel build jobs (default: number of cores)
set -euo pipefail
cd "$(dirname "$0")/.."
EMBER_SETUP_TORCH=1 ./scripts/setup.sh
jobs=${EMBER_BUILD_JOBS:-$(nproc)}
times=()
step_start=$(date +%s)
step_done() { times+=("ci_time_$1 $(( $(date +%s) - step_start )) s"); step_start=$(date +%s); }
cmake --preset cpu -DEMBER_BUILD_TESTS=ON -DEMBER_BUILD_BENCH=ON -DEMBER_BUILD_EXAMPLES=ON >/dev/null
cmake --build build/cpu -j "$jobs"
step_done release_build
if [ -x /usr/local/cuda/bin/nvcc ] && [ "${EMBER_SKIP_CUDA_BUILD:-0}" != 1 ]; then
  echo "== compiling the EMBER_CUDA=ON configuration: every target and test (GPU tests skip without a GPU) =="
  # CI compiles for sm_90 only (users get the preset's default list, ~5x the nvcc time).
  cmake --preset cuda -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DEMBER_BUILD_TESTS=ON -DEMBER_BUILD_BENCH=ON -DEMBER_BUILD_EXAMPLES=ON >/dev/null
  cmake --build build/cuda -j "$jobs"
  step_done cuda_compile
fi
ctest --test-dir build/cpu --output-on-failure -j "$jobs" --timeout 600
if [ -d build/cuda ] && [ "${EMBER_SKIP_CUDA_BUILD:-0}" != 1 ]; then
  # The GPU tests (label gpu) of the CUDA build: they skip, naming the reason, without a GPU.
  ctest --test-dir build/cuda --output-on-failure --timeout 600 -L gpu
fi
step_done release_tests
if [ "${EMBER_SKIP_FUZZ:-0}" != 1 ]; then
  echo "== fuzz targets under ASan + UBSan, ${EMBER_FUZZ_SECONDS:-30} s each (preset fuzz, fuzz/run.sh) =="
  cmake --preset fuzz >/dev/null
  cmake --build build/fuzz -j "$jobs" --target ember_fuzz
  ctest --test-dir build/fuzz --output-on-failure -L fuzz   # every corpus file (seeds, past crashes) once
  step_done fuzz_build
  ./fuzz/run.sh build/fuzz
  step_done fuzz_run
fi
printf '%s\n' "${times[@]}"
