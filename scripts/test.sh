#!/usr/bin/env bash
# Runs the whole test suite: installs what is missing, builds the CPU configuration (and, when
# the CUDA toolkit is present, compiles the EMBER_CUDA=ON configuration too), then ctest.
#   EMBER_SKIP_CUDA_BUILD=1  skip the CUDA compile check
#   EMBER_BUILD_JOBS=N       parallel build jobs (default: number of cores)
set -euo pipefail
cd "$(dirname "$0")/.."
EMBER_SETUP_TORCH=1 ./scripts/setup.sh
jobs=${EMBER_BUILD_JOBS:-$(nproc)}
cmake --preset cpu -DEMBER_BUILD_TESTS=ON -DEMBER_BUILD_BENCH=ON -DEMBER_BUILD_EXAMPLES=ON >/dev/null
cmake --build build/cpu -j "$jobs"
if [ -x /usr/local/cuda/bin/nvcc ] && [ "${EMBER_SKIP_CUDA_BUILD:-0}" != 1 ]; then
  echo "== compiling the EMBER_CUDA=ON configuration (tests skip without a GPU) =="
  cmake --preset cuda -DEMBER_BUILD_BENCH=OFF -DEMBER_BUILD_EXAMPLES=OFF >/dev/null
  # The CUDA-specific code: core kernels (nvcc), the nccl backend, and the libraries above them.
  cmake --build build/cuda -j "$jobs" --target ember_parallel cuda_test
fi
ctest --test-dir build/cpu --output-on-failure -j "$jobs" --timeout 600
if [ -d build/cuda ] && [ "${EMBER_SKIP_CUDA_BUILD:-0}" != 1 ]; then
  ctest --test-dir build/cuda --output-on-failure --timeout 600 -R '^cuda_test$'
fi
