#!/usr/bin/env bash
# Runs the whole test suite: installs what is missing (every group of scripts/setup.sh), checks
# the API reference of the public headers (scripts/api_docs.sh: Doxygen, failing on any warning),
# builds the CPU configuration (and, when the CUDA toolkit is present, compiles the
# EMBER_CUDA=ON configuration too), then ctest; then
# the suite under ASan + UBSan (preset asan-ubsan); then every fuzz target for a bounded time
# (preset fuzz, fuzz/run.sh). Prints each step's wall time at the end ("ci_time_<step> N s").
#   EMBER_SKIP_CUDA_BUILD=1  skip the CUDA compile check
#   EMBER_SKIP_SANITIZERS=1  skip the asan-ubsan build and suite
#   EMBER_SANITIZE_ALL_TESTS=1  also run the two launcher end-to-end tests under ASan (+8 min)
#   EMBER_SKIP_FUZZ=1        skip the fuzz targets
#   EMBER_SKIP_API_DOCS=1    skip the Doxygen step
#   EMBER_FUZZ_SECONDS=N     seconds per fuzz target (default 30)
#   EMBER_BUILD_JOBS=N       parallel build jobs (default: number of cores)
set -euo pipefail
cd "$(dirname "$0")/.."
EMBER_SETUP_TORCH=1 ./scripts/setup.sh
jobs=${EMBER_BUILD_JOBS:-$(nproc)}
times=()
step_start=$(date +%s)
step_done() { times+=("ci_time_$1 $(( $(date +%s) - step_start )) s"); step_start=$(date +%s); }
if [ "${EMBER_SKIP_API_DOCS:-0}" != 1 ]; then
  echo "== the API reference of the public headers (scripts/api_docs.sh; fails on Doxygen warnings) =="
  ./scripts/api_docs.sh build/api
  step_done api_docs
fi
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
  # The GPU bundle of this build: gpu_bundle.sh fails when it exceeds 64 MiB or a binary would
  # load a library from outside it that a GPU machine without our packages lacks.
  ./scripts/gpu_bundle.sh build/cuda build/gpu-bundle
fi
step_done release_tests
if [ "${EMBER_SKIP_SANITIZERS:-0}" != 1 ]; then
  # Preset asan-ubsan: -O1, CUDA and benchmarks off; examples on (rnn_dp_test runs rnn_dp);
  # shared libraries, so that its install_consumer_test checks the shared package while the
  # release suite's checks the static one (Note [Install test kinds]).
  # rnn_dp_ddp_test and rnn_dp_launchers_test (rnn_dp under ember-run/mpirun/torchrun/srun,
  # 500 s of the 617 s this suite took under ASan) run in the release suite only, unless
  # EMBER_SANITIZE_ALL_TESTS=1: their library code runs under ASan in the other tests.
  # word_lm_test runs in the release suite only: its memory test counts glibc's heap bytes
  # (mallinfo2), which ASan's allocator replaces, and its resume test first checks that the
  # release build's numbers anneal the lr after epoch 3, which -O1 rounding changes.
  echo "== the suite under AddressSanitizer + UndefinedBehaviorSanitizer (preset asan-ubsan) =="
  cmake --preset asan-ubsan >/dev/null
  cmake --build build/asan-ubsan -j "$jobs"
  step_done asan_build
  skip=()
  [ "${EMBER_SANITIZE_ALL_TESTS:-0}" = 1 ] || skip=(-E '^(rnn_dp_ddp_test|rnn_dp_launchers_test|word_lm_test)$')
  ctest --test-dir build/asan-ubsan --output-on-failure -j "$jobs" --timeout 900 "${skip[@]}"
  step_done asan_tests
fi
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
