#!/usr/bin/env bash
# The main job: installs what is missing, builds examples/rnn_dp and trains it (3 epochs by
# default, DataParallel over cpu:0,cpu:1, 2 forked DataLoader workers). Extra arguments go to
# rnn_dp, e.g. ./scripts/run_example.sh --epochs 1 --batch-first false
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake --preset cpu >/dev/null
cmake --build build/cpu -j "$(nproc)" --target rnn_dp
exec ./build/cpu/examples/rnn_dp/rnn_dp "$@"
