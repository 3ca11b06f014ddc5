#!/usr/bin/env bash
# tensorboard_reader_test.sh SOURCE_DIR FIXTURE WORK_DIR: TensorBoard's own reader (from the
# project's .venv-tb, made on first use) reads what tensorboard_fixture wrote. Exit 77 (skipped)
# only when PyPI is unreachable and no environment exists yet.
set -euo pipefail
src=$1 fixture=$2 work=$3
rc=0; venv=$("$src/scripts/tensorboard_venv.sh") || rc=$?
[ "$rc" = 0 ] || exit "$rc"
mkdir -p "$work"
exec "$venv/bin/python" "$src/tests/tensorboard/tensorboard_reader_test.py" "$fixture" "$work"
