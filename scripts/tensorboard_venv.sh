#!/usr/bin/env bash
# tensorboard_venv.sh [DIR]: makes the project's TensorBoard virtual environment (default
# <repo>/.venv-tb, git-ignored) with the tensorboard package from PyPI, and prints its path.
# Idempotent and safe to run from parallel tests (a lock file beside DIR). Exit 77 when PyPI
# cannot be reached (the tests that call it skip then), 1 on any other failure.
# Needs python3 with venv (scripts/setup.sh tests installs python3-venv).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/.venv-tb}
spec=${EMBER_TENSORBOARD_SPEC:-tensorboard>=2.14,<3}
exec 9>"$dir.lock"
flock 9
if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c 'import tensorboard' 2>/dev/null; then
  echo "$dir"; exit 0
fi
if ! python3 -c 'import urllib.request; urllib.request.urlopen("https://pypi.org/simple/tensorboard/", timeout=15)' 2>/dev/null; then
  echo "SKIP: PyPI (https://pypi.org) is unreachable; cannot install tensorboard into $dir" >&2
  exit 77
fi
rm -rf "$dir"
python3 -m venv "$dir" >&2 || { echo "tensorboard_venv.sh: python3 -m venv failed (./scripts/setup.sh tests installs python3-venv)" >&2; exit 1; }
"$dir/bin/pip" install -q --disable-pip-version-check "$spec" >&2
echo "$dir"
