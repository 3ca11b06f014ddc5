#!/usr/bin/env bash
# gpu_check.sh [OUT_DIR] -- proves ember's GPU path on a machine with a GPU, in one command.
#
# From a source tree it builds the CUDA configuration with all cores (build/gpu-check); from a
# bundle made by scripts/gpu_bundle.sh (this script sits next to its BUNDLE and payload.tar.gz)
# it unpacks the prebuilt binaries into OUT_DIR/bundle-run and runs them without compiling. Then, each step with its own time limit:
#   gpu-tests       every test labelled `gpu` (ctest -L gpu; in a bundle the same binaries)
#   example-1gpu    one epoch of examples/rnn_dp on cuda:0 (--single-device)
#   example-dp      one epoch under DataParallel on cuda:0,cpu:0, and on all GPUs when >= 2
#   example-ddp-nccl one epoch of rnn_dp --ddp --backend nccl under ember-run, one rank per GPU
#   sanitizer       compute-sanitizer (memcheck) over the GPU tests, where it is installed
#   bench           ember-bench-lstm --device cuda:0 (with PyTorch's step on the GPU where the
#                   machine's python3, or $EMBER_BENCH_PYTHON, imports a CUDA torch)
# Logs go to OUT_DIR (default ./gpu-check-<date>), one per step, and OUT_DIR/summary.md gets a
# table of step, result (PASS / FAIL / SKIP) and seconds, then the benchmark's figures, also
# printed at the end. Without a GPU
# it says so, writes a summary of SKIP lines and exits 0 (EMBER_GPU_CHECK_FORCE=1 runs the steps
# anyway, e.g. to check the script itself: the GPU tests then skip). Exit status: 1 when a step
# failed. Budget: ends within 10 minutes on a 16-core machine with one GPU.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$PWD/gpu-check-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
summary=$out/summary.md
results=()
failed=0

record() {  # record STEP RESULT SECONDS NOTE
  results+=("| $1 | $2 | $3 | $4 |")
  [ "$2" = FAIL ] && failed=1
  echo "== $1: $2 ($3 s) $4"
}

# run_step STEP TIMEOUT_S COMMAND...: runs with a time limit, logs to OUT_DIR/STEP.log.
run_step() {
  local step=$1 limit=$2
  shift 2
  local t0=$SECONDS rc
  echo "== $step ..."
  printf '%q ' "$@" >"$out/$step.log"
  echo >>"$out/$step.log"
  timeout --kill-after=10 "$limit" "$@" >>"$out/$step.log" 2>&1
  rc=$?
  local note="log: $step.log"
  [ $rc = 124 ] || [ $rc = 137 ] && note="timed out after ${limit} s; log: $step.log"
  if [ $rc = 0 ]; then record "$step" PASS $((SECONDS - t0)) "$note"; else record "$step" FAIL $((SECONDS - t0)) "$note (exit $rc)"; fi
}

write_summary() {
  {
    echo "# ember gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo
    echo "host: $(hostname); GPUs: ${gpu_desc:-none}"
    echo "mode: $mode"
    echo
    echo "| step | result | seconds | note |"
    echo "|---|---|---|---|"
    printf '%s\n' "${results[@]}"
    if [ -s "$out/bench.log" ] && grep -qE '^[a-z_0-9]+ [-0-9.eE+]+ ' "$out/bench.log"; then
      echo
      echo "benchmark (ember-bench-lstm --device cuda:0; name value unit):"
      echo
      grep -E '^(# torch|[a-z_0-9]+ [-0-9.eE+]+ )' "$out/bench.log" | sed 's/^/    /'
    fi
  } >"$summary"
  echo
  cat "$summary"
}

# ---- where the binaries come from --------------------------------------------------------------
if [ -f "$here/BUNDLE" ]; then
  mode="bundle ($here, $(head -1 "$here/BUNDLE"))"
  run_dir=$out/bundle-run  # the payload unpacked: bin/, lib/, dict/
  rm -rf "$run_dir" && mkdir -p "$run_dir"
  tar -xzf "$here/payload.tar.gz" -C "$run_dir" || { echo "gpu_check: cannot unpack $here/payload.tar.gz" >&2; exit 1; }
  bin=$run_dir/bin
  export LD_LIBRARY_PATH="$run_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:/usr/local/cuda/lib64"
  gpu_tests=$(cat "$here/gpu_tests.txt")
  export EMBER_BENCH_LSTM_TORCH_SCRIPT=$run_dir/bench/bench_lstm_torch.py
else
  src=$(cd "$here/.." && pwd)
  mode="source ($src)"
  build=${EMBER_GPU_CHECK_BUILD_DIR:-$src/build/gpu-check}
  bin=""
fi

# ---- is there a GPU? ---------------------------------------------------------------------------
ngpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >"$out/nvidia-smi.log" 2>&1; then
  ngpu=$(grep -c '^GPU ' "$out/nvidia-smi.log")
  gpu_desc=$(sed -n 's/^GPU [0-9]*: \([^(]*\).*/\1/p' "$out/nvidia-smi.log" | sort | uniq -c | sed 's/^ *//' | paste -sd, -)
fi
if [ "$ngpu" = 0 ]; then
  echo "gpu_check: no GPU found (nvidia-smi is missing or lists no GPU; see $out/nvidia-smi.log)"
  if [ "${EMBER_GPU_CHECK_FORCE:-0}" != 1 ]; then
    for step in build gpu-tests example-1gpu example-dp sanitizer bench; do record "$step" SKIP 0 "no GPU found"; done
    write_summary
    exit 0
  fi
  echo "gpu_check: EMBER_GPU_CHECK_FORCE=1: running the steps anyway (GPU tests skip)"
fi

# ---- build (source tree only) ------------------------------------------------------------------
if [ -z "$bin" ]; then
  archs=${EMBER_CUDA_ARCHITECTURES:-native}
  [ "$ngpu" = 0 ] && archs=${EMBER_CUDA_ARCHITECTURES:-90}
  run_step build 420 bash -c "cmake -S '$src' -B '$build' -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES='$archs' -DEMBER_BUILD_TESTS=ON -DEMBER_BUILD_BENCH=ON -DEMBER_BUILD_EXAMPLES=ON \
      && cmake --build '$build' -j '$(nproc)'"
  if [ "$failed" = 1 ]; then
    for step in gpu-tests example-1gpu example-dp sanitizer bench; do record "$step" SKIP 0 "build failed"; done
    write_summary
    exit 1
  fi
  bin=$build/bin-gpu-check
  mkdir -p "$bin"
  # The binaries the steps run, found by their ctest names and target names.
  gpu_tests=$(ctest --test-dir "$build" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *//p')
  for name in $gpu_tests rnn_dp ember-run ember-bench-lstm; do
    f=$(find "$build" -name "$name" -type f -perm -u+x -not -path '*/CMakeFiles/*' | head -1)
    [ -n "$f" ] && ln -sf "$f" "$bin/$name"
  done
else
  record build SKIP 0 "prebuilt bundle"
fi

# ---- steps -------------------------------------------------------------------------------------
gpu_tests_cmd() {
  local rc=0
  for t in $gpu_tests; do
    echo "-- $t"
    "$bin/$t" --gtest_output="xml:$out/$t.xml" || rc=1
  done
  return $rc
}
# Shared-library check first: a missing CUDA runtime library is named, not a cryptic loader error.
for t in $gpu_tests rnn_dp ember-run ember-bench-lstm; do
  [ -x "$bin/$t" ] && ldd "$bin/$t" | grep 'not found' | sed "s|^|$t: |"
done | sort -u >"$out/missing-libs.log"
if [ -s "$out/missing-libs.log" ]; then
  record libraries FAIL 0 "missing shared libraries (install the CUDA 13 runtime: cuBLAS, cudart): $(awk '{print $2}' "$out/missing-libs.log" | sort -u | paste -sd' ')"
fi

run_step gpu-tests 240 bash -c "$(declare -f gpu_tests_cmd); out='$out' bin='$bin' gpu_tests='$gpu_tests' gpu_tests_cmd"

example_args=(--epochs 1 --limit "${EMBER_GPU_CHECK_EXAMPLE_LIMIT:-2000}")
[ -f "$here/BUNDLE" ] && example_args+=(--dict-dir "$run_dir/dict")
if [ -x "$bin/rnn_dp" ]; then
  run_step example-1gpu 120 "$bin/rnn_dp" "${example_args[@]}" --devices cuda:0 --single-device
  run_step example-dp 120 "$bin/rnn_dp" "${example_args[@]}" --devices cuda:0,cpu:0
  if [ "$ngpu" -ge 2 ]; then
    all=$(seq -s, -f 'cuda:%g' 0 $((ngpu - 1)))
    run_step example-dp-all-gpus 120 "$bin/rnn_dp" "${example_args[@]}" --devices "$all"
  fi
  # DDP over nccl, one rank per GPU (each on cuda:LOCAL_RANK); the global batch splits evenly.
  if [ -x "$bin/ember-run" ]; then
    run_step example-ddp-nccl 120 "$bin/ember-run" --nproc-per-node "$ngpu" "$bin/rnn_dp" "${example_args[@]}" \
      --ddp --backend nccl --batch-size $((32 * ngpu)) --checkpoint-dir "$out/ddp-nccl-checkpoints" \
      --metrics "$out/ddp-nccl-metrics.jsonl"
  else
    record example-ddp-nccl FAIL 0 "ember-run binary not found"
  fi
else
  record example-1gpu FAIL 0 "rnn_dp binary not found"
fi

sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ -n "$sanitizer" ]; then
  san_cmd() {
    local rc=0
    for t in $gpu_tests; do "$sanitizer" --tool memcheck --error-exitcode 1 "$bin/$t" || rc=1; done
    return $rc
  }
  run_step sanitizer 150 bash -c "$(declare -f san_cmd); sanitizer='$sanitizer' bin='$bin' gpu_tests='$gpu_tests' san_cmd"
else
  record sanitizer SKIP 0 "compute-sanitizer is not installed"
fi

if [ -x "$bin/ember-bench-lstm" ]; then
  [ -n "${EMBER_BENCH_PYTHON:-}" ] || export EMBER_BENCH_PYTHON=$(command -v python3 || echo /usr/bin/python3)
  run_step bench 120 env EMBER_BENCH_LSTM_STEPS=20 "$bin/ember-bench-lstm" --device cuda:0
else
  record bench FAIL 0 "ember-bench-lstm binary not found"
fi

write_summary
exit $failed
