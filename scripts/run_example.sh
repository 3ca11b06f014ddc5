#!/usr/bin/env bash
# The main job: installs what it needs (./scripts/setup.sh build example: compiler, libraries,
# Debian's word lists; not what only the tests use), builds examples/rnn_dp and trains it (3
# epochs by default, DataParallel over cpu:0,cpu:1, 2 forked DataLoader workers). Extra
# arguments go to rnn_dp, e.g. ./scripts/run_example.sh --epochs 1 --batch-first false
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh build example
# A build/cpu that ./scripts/test.sh configured keeps its settings; a fresh one builds no tests
# or benchmarks, whose libraries (GoogleTest, Google Benchmark) this job does not install.
if [ ! -f build/cpu/CMakeCache.txt ]; then
  cmake --preset cpu -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_BENCH=OFF >/dev/null
fi
cmake --build build/cpu -j "$(nproc)" --target rnn_dp
exec ./build/cpu/examples/rnn_dp/rnn_dp "$@"
