#!/usr/bin/env bash
# Runs every fuzz target for a bounded time and prints its executions; fails on a finding.
#   fuzz/run.sh [BUILD_DIR] [SECONDS]     (defaults: build/fuzz, $EMBER_FUZZ_SECONDS or 30)
# The repository's corpus (fuzz/corpus/<target>) is read, never written: new inputs go to a
# scratch directory. A crash, leak, timeout or out-of-memory input is copied to
# BUILD_DIR/findings/<target>/ and its report printed; add it to fuzz/corpus/<target>/ with
# the fix (see fuzz/README.md).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/fuzz}
secs=${2:-${EMBER_FUZZ_SECONDS:-30}}
targets=(safetensors checkpoint store_frame tcp_op_header dataloader_wire)
work=$(mktemp -d /tmp/ember_fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
failed=()
for name in "${targets[@]}"; do
  bin="$build/fuzz/${name}_fuzz"
  [ -x "$bin" ] || { echo "fuzz/run.sh: $bin is missing (build the 'fuzz' preset's ember_fuzz target)"; exit 2; }
  mkdir -p "$work/$name" "$work/artifacts/$name"
  log="$work/$name.log"
  start=$(date +%s)
  # -timeout: one input running 20 s is a hang; -rss_limit_mb / -malloc_limit_mb: an input
  # that makes the code allocate 2 GB is a finding (a length field trusted without a bound).
  "$bin" "$work/$name" "$root/fuzz/corpus/$name" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/$name/" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  echo "fuzz_${name}_execs ${execs:-0} executions ($(( $(date +%s) - start )) s, coverage ${cov:-?} edges)"
  if [ "$rc" != 0 ]; then
    failed+=("$name")
    mkdir -p "$build/findings/$name"
    cp "$work/artifacts/$name/"* "$build/findings/$name/" 2>/dev/null
    echo "---- ${name}_fuzz failed (exit $rc); its report:"
    grep -v '^#[0-9]' "$log" | tail -60
    echo "---- input(s) kept in $build/findings/$name/: $(ls "$build/findings/$name" 2>/dev/null | tr '\n' ' ')"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz/run.sh: findings in: ${failed[*]}"
  exit 1
fi
