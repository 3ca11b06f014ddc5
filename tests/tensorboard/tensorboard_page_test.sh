#!/usr/bin/env bash
# tensorboard_page_test.sh SOURCE_DIR FIXTURE WORK_DIR: `tensorboard --logdir` on loopback and
# headless Chromium over ember's event files (tensorboard_page_test.py); the screenshot is left
# at WORK_DIR/scalars.png. Exit 77 (skipped) when PyPI is unreachable and no environment exists
# yet, or Chromium is not installed.
set -euo pipefail
src=$1 fixture=$2 work=$3
rc=0; venv=$("$src/scripts/tensorboard_venv.sh") || rc=$?
[ "$rc" = 0 ] || exit "$rc"
mkdir -p "$work"
exec "$venv/bin/python" "$src/tests/tensorboard/tensorboard_page_test.py" "$fixture" "$work" "$work/scalars.png"
