#!/usr/bin/env bash
# examples_observe_test.sh SOURCE_DIR RNN_DP WORD_LM EMBER_RUN WORK_DIR: the examples'
# --tensorboard and --profile, read by TensorBoard's reader (examples_observe_test.py). Exit 77
# (skipped) only when PyPI is unreachable and no environment exists yet.
set -euo pipefail
src=$1; shift
rc=0; venv=$("$src/scripts/tensorboard_venv.sh") || rc=$?
[ "$rc" = 0 ] || exit "$rc"
exec "$venv/bin/python" "$src/tests/tensorboard/examples_observe_test.py" "$@"
