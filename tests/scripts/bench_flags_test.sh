#!/usr/bin/env bash
# bench_flags_test.sh BENCH_DIR WORK_DIR: the benchmarks' command lines (CLI11, through
# bench::parse_flags). A malformed or unknown flag exits 2 before anything runs, naming the flag,
# with the usage; --help exits 0 and leaves the hidden re-launch flags out; the flags that
# gpu_check.sh and the benchmarks' own re-launches pass (--backend, --min/--max-bytes, --mpi-child
# under mpirun, --worker under ember-run, --repeats) still do what they did.
set -uo pipefail
bin=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# refused BINARY EXPECTED_TEXT ARGS...: exits 2, stderr has EXPECTED_TEXT and the usage, and
# nothing was benchmarked (the load-average line bench::start prints is not on stdout).
refused() {
  local b=$1 want=$2
  shift 2
  "$bin/$b" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [ "$rc" = 2 ] || fail "$b $*: exit $rc, expected 2 ($(head -c 300 "$work/err"))"
  grep -qF -- "$want" "$work/err" || fail "$b $*: stderr does not say '$want': $(head -c 300 "$work/err")"
  grep -q "^usage: $b " "$work/err" || fail "$b $*: no usage on stderr"
  [ ! -s "$work/out" ] || fail "$b $*: printed on stdout: $(head -c 200 "$work/out")"
}

refused ember-bench-allreduce "--max-bytes: expected an integer, got 'abc'" --max-bytes abc
refused ember-bench-allreduce "--min-bytes: expected at least 1, got 0" --min-bytes 0
refused ember-bench-allreduce "--backend: expected tcp, mpi, gloo or nccl, got 'udp'" --backend udp
refused ember-bench-allreduce "--backend: expected tcp, mpi, gloo or nccl, got 'udp'" --only udp
refused ember-bench-allreduce "--bogus" --bogus
refused ember-bench-allreduce "--max-bytes" --max-bytes
refused ember-bench-allreduce "Could not convert" --nccl-child 0 x "$work"
refused ember-bench-ft "--repeats: expected an integer, got 'abc'" --repeats abc
refused ember-bench-ft "--repeats: expected at least 1, got 0" --repeats 0
refused ember-bench-dp "--devices: expected CUDA devices" --devices cpu:0
refused ember-bench-lstm "--device: Device: expected a device string" --device gpu
refused ember-bench-restart "--repeats: expected an integer, got '2x'" --repeats 2x
refused ember-bench-serialization "tensors: expected an integer, got 'abc'" abc
refused ember-bench-serialization "not expected: 5" 10 3 5
# Environment knobs go through core/env.h: garbage is refused, naming the variable, not read as 0.
EMBER_BENCH_FT_REPEATS=3x "$bin/ember-bench-ft" >"$work/out" 2>"$work/err"
rc=$?
[ "$rc" = 2 ] || fail "EMBER_BENCH_FT_REPEATS=3x ember-bench-ft: exit $rc, expected 2"
grep -q "EMBER_BENCH_FT_REPEATS" "$work/err" || fail "EMBER_BENCH_FT_REPEATS=3x: stderr does not name it: $(head -c 300 "$work/err")"
for b in ember-bench-autograd ember-bench-core ember-bench-data ember-bench-ddp ember-bench-loss \
         ember-bench-store ember-bench-wordlm; do
  refused "$b" "not expected: --steps" --steps
done

# --help: the usage on stdout, generated from the flags; the re-launch flags are not in it.
"$bin/ember-bench-allreduce" --help >"$work/help" 2>&1 || fail "ember-bench-allreduce --help: exit $?"
for f in --backend --min-bytes --max-bytes --segment-bytes --block-bytes --shm-bytes --socket-buffer-bytes \
         --cma-min-bytes; do
  grep -q -- "$f" "$work/help" || fail "ember-bench-allreduce --help does not list $f"
done
! grep -q -- "-child" "$work/help" || fail "ember-bench-allreduce --help lists a hidden re-launch flag"
"$bin/ember-bench-restart" --help >"$work/help" 2>&1 || fail "ember-bench-restart --help: exit $?"
! grep -q -- "--worker" "$work/help" || fail "ember-bench-restart --help lists --worker"

# The flags still reach the benchmark: one 4 KiB all_reduce over tcp, nothing larger.
"$bin/ember-bench-allreduce" --backend tcp --min-bytes 4096 --max-bytes 4096 >"$work/tcp" 2>&1 ||
  fail "ember-bench-allreduce --backend tcp: exit $?: $(tail -c 300 "$work/tcp")"
grep -q '^tcp_allreduce_4kib_busbw_gbps ' "$work/tcp" || fail "no 4 KiB tcp figure: $(tail -c 300 "$work/tcp")"
! grep -q '16kib\|^mpi_\|^gloo_' "$work/tcp" || fail "the sweep went past --max-bytes or --backend tcp"
# mpirun re-launches this binary with --mpi-child --min-bytes --max-bytes.
"$bin/ember-bench-allreduce" --backend mpi --min-bytes 4096 --max-bytes 4096 >"$work/mpi" 2>&1 ||
  fail "ember-bench-allreduce --backend mpi: exit $?: $(tail -c 300 "$work/mpi")"
if ! grep -q '^# mpi_allreduce skipped' "$work/mpi"; then
  grep -q '^mpi_allreduce_4kib_busbw_gbps ' "$work/mpi" || fail "no 4 KiB mpi figure: $(tail -c 300 "$work/mpi")"
fi
# ember-run starts this binary's workers with --worker DIR.
timeout 120 "$bin/ember-bench-restart" --repeats 1 >"$work/restart" 2>&1 ||
  fail "ember-bench-restart --repeats 1: exit $?: $(tail -c 300 "$work/restart")"
grep -q '^restart_to_first_step_ms ' "$work/restart" || fail "no restart figure: $(tail -c 300 "$work/restart")"

[ "$failures" = 0 ] || exit 1
echo "bench flags: every refusal exited 2 naming its flag; --backend/--min-bytes/--max-bytes, --mpi-child, --worker work"
