#!/usr/bin/env bash
# gpu_check.sh [OUT_DIR] -- proves ember's GPU path on a machine with a GPU, in one command.
#
# From a source tree it builds the CUDA configuration with all cores (build/gpu-check); from a
# bundle made by scripts/gpu_bundle.sh (this script sits next to its BUNDLE and payload.tar.xz)
# it unpacks the prebuilt binaries into OUT_DIR/bundle-run and runs them without compiling. Then,
# each step with its own time limit, in this order:
#   gpu-tests            every test labelled `gpu` (ctest -L gpu; in a bundle the same binaries)
#                        (cudnn_rnn_test among them: the cuDNN RNN against the fallback and CPU)
#   example-1gpu         one epoch of examples/rnn_dp on cuda:0 (--single-device)
#   example-resume-cpu   that run's checkpoint continues for an epoch on cpu:0 (a GPU checkpoint
#                        loads on the CPU)
#   example-1gpu-amp-bf16  example-1gpu under --amp bf16
#   example-dp           one epoch under DataParallel on cuda:0,cpu:0
#   example-dp-all-gpus  DataParallel over every GPU present (SKIP with one GPU)
#   example-ddp-nccl     rnn_dp --ddp --backend nccl under ember-run, one rank per GPU
#   example-ddp-mpirun   rnn_dp --ddp under mpirun, one rank per GPU, backend left to its
#                        default (must pick nccl); SKIP where no mpirun exists (the GPU machine
#                        need not have OpenMPI and a bundle carries none) and, in a bundle, for
#                        an mpirun on the PATH (see EMBER_GPU_CHECK_MPIRUN below)
#   example-ddp-tcp-cuda rnn_dp --ddp --backend tcp, two ranks under ember-run on the GPUs
#                        (cuda:(local_rank % GPUs): both on cuda:0 with one GPU, which NCCL
#                        refuses), CUDA tensors staged through the host
#   bench                ember-bench-lstm --device cuda:0 (with cuDNN, gpu_lstm_vs_cudnn_ratio
#                        against cuDNN called directly; with PyTorch's step on the GPU where
#                        the machine's python3, or $EMBER_BENCH_PYTHON, imports a CUDA torch)
#   bench-allreduce      ember-bench-allreduce --backend nccl (one rank per GPU)
#   bench-dp             ember-bench-dp --devices <every GPU> (SKIP with one GPU)
#   sanitizer            compute-sanitizer (memcheck) over the GPU tests, where it is installed
# Logs go to OUT_DIR (default ./gpu-check-<date>), one per step, and OUT_DIR/summary.md gets a
# table of step, result (PASS / FAIL / SKIP) and seconds, then the benchmarks' figures, also
# printed at the end. Without a GPU it says so, writes a summary of SKIP lines and exits 0
# (EMBER_GPU_CHECK_FORCE=1 runs the steps anyway, e.g. to check the script itself: the GPU tests
# then skip). Exit status: 1 when a step failed.
# Where $OUT is set (a borrowed GPU machine whose $OUT folder comes back, at most 8 files, two
# folders deep) and OUT_DIR is not inside it, the default OUT_DIR is under ${TMPDIR:-/tmp}, and
# after every step $OUT gets three files: gpu-check-summary.md, gpu-check-failed.log (the last
# lines of each failed step's log) and gpu-check-logs.tar.gz (every log, without checkpoints); so
# what ran so far comes back even when the run is cut short. A bundle's binaries are unpacked
# under ${TMPDIR:-/tmp} (about 260 MiB), never into OUT_DIR, and removed at exit.
# Budget: ends within 10 minutes on a 16-core machine with one GPU: every step's limit is cut to
# what is left of EMBER_GPU_CHECK_BUDGET_S (default 540, so that with the 10 s each step may take
# to be killed the whole run stays inside a 600 s limit) and a step that finds less than 5 s left
# is a SKIP ("time budget spent"); one that its cut limit stops is a SKIP too ("cut short by the
# time budget"), one that its own limit stops a FAIL. Each GPU test binary gets at most EMBER_GPU_CHECK_TEST_LIMIT s
# (default 120), so one that hangs does not stop the others.
# Overrides (tests/scripts/gpu_check_test.sh uses them): EMBER_GPU_CHECK_MPIRUN (the mpirun to
# use; set and empty: none), EMBER_GPU_CHECK_SANITIZER (likewise for compute-sanitizer),
# EMBER_GPU_CHECK_EXAMPLE_LIMIT (words per language, default 2000). In a bundle an mpirun found
# on the PATH is not used (SKIP): the bundle carries Open MPI's libraries but not its plugins,
# so MPI_Init would fail there; EMBER_GPU_CHECK_MPIRUN names one to use anyway.
# Libraries in a bundle: NCCL and cuDNN from the pip packages of the machine's Python with a CUDA
# torch (python3, else $EMBER_GPU_CHECK_PYTHON or /opt/torch/.venv/bin/python3), whose nvidia/
# folders go on the loader's path; OUT_DIR/libraries.log says which file each library resolved
# to and the packages' versions. The PyTorch side of the LSTM benchmark runs under the machine's
# own library path, not the bundle's.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
stamp=$(date -u +%Y%m%dT%H%M%SZ)
if [ $# -ge 1 ]; then
  out=$1
elif [ -n "${OUT:-}" ]; then
  out=${TMPDIR:-/tmp}/gpu-check-$stamp
else
  out=$PWD/gpu-check-$stamp
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
summary=$out/summary.md
# $OUT (see the header): where copies of the summary and the logs go after every step.
publish=""
if [ -n "${OUT:-}" ] && mkdir -p "$OUT" 2>/dev/null; then
  publish=$(cd "$OUT" && pwd)
  [[ "$out/" == "$publish/"* ]] && publish=""  # OUT_DIR inside $OUT: the logs are there already
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/ember-gpu-check.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
results=()
failed=0
budget=${EMBER_GPU_CHECK_BUDGET_S:-540}
t_start=$SECONDS
all_steps=(build gpu-tests example-1gpu example-resume-cpu example-1gpu-amp-bf16 example-dp example-dp-all-gpus
  example-ddp-nccl example-ddp-mpirun example-ddp-tcp-cuda bench bench-allreduce bench-dp sanitizer)

record() {  # record STEP RESULT SECONDS NOTE
  results+=("| $1 | $2 | $3 | $4 |")
  [ "$2" = FAIL ] && failed=1
  echo "== $1: $2 ($3 s) $4"
  publish_results
}

# run_step STEP TIMEOUT_S COMMAND...: runs with a time limit (cut to the budget left), logs to
# OUT_DIR/STEP.log.
run_step() {
  local step=$1 limit=$2
  shift 2
  local left=$((budget - (SECONDS - t_start)))
  if [ "$left" -lt 5 ]; then
    record "$step" SKIP 0 "time budget spent (EMBER_GPU_CHECK_BUDGET_S=$budget)"
    return
  fi
  local own=$limit
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$SECONDS rc
  echo "== $step ..."
  printf '%q ' "$@" >"$out/$step.log"
  echo >>"$out/$step.log"
  timeout --kill-after=10 "$limit" "$@" >>"$out/$step.log" 2>&1
  rc=$?
  local note="log: $step.log"
  if { [ $rc = 124 ] || [ $rc = 137 ]; } && [ "$limit" -lt "$own" ]; then
    # Stopped by what was left of the budget, not by its own limit: not a verdict on the step.
    record "$step" SKIP $((SECONDS - t0)) "cut short by the time budget after ${limit} s (its own limit is ${own} s; EMBER_GPU_CHECK_BUDGET_S=$budget); log: $step.log"
    return
  fi
  { [ $rc = 124 ] || [ $rc = 137 ]; } && note="timed out after ${limit} s; log: $step.log"
  if [ $rc = 0 ]; then record "$step" PASS $((SECONDS - t0)) "$note"; else record "$step" FAIL $((SECONDS - t0)) "$note (exit $rc)"; fi
}

# expect_in_log STEP PATTERN WHAT: a passed step whose log lacks PATTERN becomes a failure.
expect_in_log() {
  [ "${results[-1]}" != "${results[-1]/| $1 | PASS |/}" ] || return 0
  grep -qE "$2" "$out/$1.log" && return 0
  unset 'results[-1]'
  record "$1" FAIL 0 "ran, but its log does not show $3; log: $1.log"
}

summary_file() {
  {
    echo "# ember gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo
    echo "host: $(hostname); GPUs: ${gpu_desc:-none}"
    echo "mode: $mode"
    echo
    echo "| step | result | seconds | note |"
    echo "|---|---|---|---|"
    printf '%s\n' "${results[@]}"
    local log
    for log in bench bench-allreduce bench-dp; do
      if [ -s "$out/$log.log" ] && grep -qE '^(# .*skipped|[a-z_0-9]+ [-0-9.eE+]+ )' "$out/$log.log"; then
        echo
        echo "benchmark $(head -1 "$out/$log.log" | sed "${bin:+s|$bin/||g; }s|^env [A-Z_]*=[^ ]* ||; s| *$||") (name value unit):"
        echo
        grep -E '^(# (torch|.*skipped)|[a-z_0-9]+ [-0-9.eE+]+ )' "$out/$log.log" | sed 's/^/    /'
      fi
    done
  } >"$summary"
}

# Copies of the summary, the failed steps' last lines and every log into $OUT (see the header).
publish_results() {
  [ -n "$publish" ] || return 0
  summary_file
  cp "$summary" "$publish/gpu-check-summary.md"
  local row step
  for row in "${results[@]}"; do
    [[ "$row" == *"| FAIL |"* ]] || continue
    step=$(echo "$row" | cut -d'|' -f2 | tr -d ' ')
    echo "==== $step: $row"
    [ -f "$out/$step.log" ] && tail -n 60 "$out/$step.log"
  done >"$publish/gpu-check-failed.log"
  tar -C "$out" -czf "$publish/gpu-check-logs.tar.gz" --exclude='*-checkpoints' --exclude='bundle-run' . 2>/dev/null ||
    true
}

write_summary() {
  summary_file
  publish_results
  echo
  cat "$summary"
}

# ---- where the binaries come from --------------------------------------------------------------
if [ -f "$here/BUNDLE" ]; then
  mode="bundle ($here, $(head -1 "$here/BUNDLE"))"
  run_dir=$scratch/bundle-run  # the payload unpacked: bin/, lib/, dict/, bench/ (~260 MiB, not in OUT_DIR)
  mkdir -p "$run_dir"
  # payload.tar.xz (scripts/gpu_bundle.sh); Python's lzma where the machine has no xz.
  if command -v xz >/dev/null 2>&1; then
    tar -xJf "$here/payload.tar.xz" -C "$run_dir"
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$here/payload.tar.xz" "$run_dir"
  fi || { echo "gpu_check: cannot unpack $here/payload.tar.xz" >&2; exit 1; }
  bin=$run_dir/bin
  # NCCL and cuDNN do not travel (hundreds of MiB): the CUDA toolkit has neither, but a CUDA
  # build of PyTorch brings both as pip packages (nvidia/*/lib); the toolkit's own libraries
  # come first.
  # The first Python that has them: the folders of nvidia/ holding shared libraries (the CUDA 13
  # packages put theirs in nvidia/cu13/lib, cuDNN in nvidia/cudnn/lib, NCCL in nvidia/nccl/lib).
  py_nvidia=""
  machine_python=""
  for py in python3 ${EMBER_GPU_CHECK_PYTHON:-} /opt/torch/.venv/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    py_nvidia=$("$py" -c 'import glob, os, nvidia
print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/**/lib*.so*", recursive=True)})))' 2>/dev/null || true)
    if [ -n "$py_nvidia" ]; then
      machine_python=$(command -v "$py")
      "$py" -c 'import importlib.metadata as m
for d in sorted(m.distributions(), key=lambda d: d.metadata["Name"].lower()):
    n = d.metadata["Name"]
    if n.lower().startswith(("nvidia-", "torch")): print(n, d.version)' >"$out/python-packages.log" 2>&1 || true
      break
    fi
  done
  machine_ld_path=${LD_LIBRARY_PATH-}
  machine_ld_set=${LD_LIBRARY_PATH+set}
  export LD_LIBRARY_PATH="$run_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}:/usr/local/cuda/lib64${py_nvidia:+:$py_nvidia}"
  # ember-bench-lstm's PyTorch peer inherits the environment: give it the machine's own library
  # path back, or it would load the bundle's (Debian's) libstdc++, zlib and CUDA runtime.
  peer=$scratch/python-peer
  {
    echo '#!/usr/bin/env bash'
    if [ -n "$machine_ld_set" ]; then
      echo "export LD_LIBRARY_PATH=$(printf '%q' "$machine_ld_path")"
    else
      echo 'unset LD_LIBRARY_PATH'
    fi
    echo "exec $(printf '%q' "${EMBER_BENCH_PYTHON:-${machine_python:-$(command -v python3 || echo /usr/bin/python3)}}") \"\$@\""
  } >"$peer"
  chmod +x "$peer"
  export EMBER_BENCH_PYTHON=$peer
  gpu_tests=$(cat "$here/gpu_tests.txt")
  export EMBER_BENCH_LSTM_TORCH_SCRIPT=$run_dir/bench/bench_lstm_torch.py
else
  src=$(cd "$here/.." && pwd)
  mode="source ($src)"
  build=${EMBER_GPU_CHECK_BUILD_DIR:-$src/build/gpu-check}
  bin=""
fi
binaries="rnn_dp ember-run ember-bench-lstm ember-bench-allreduce ember-bench-dp"

# ---- is there a GPU? ---------------------------------------------------------------------------
ngpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >"$out/nvidia-smi.log" 2>&1; then
  ngpu=$(grep -c '^GPU ' "$out/nvidia-smi.log")
  gpu_desc=$(sed -n 's/^GPU [0-9]*: \([^(]*\).*/\1/p' "$out/nvidia-smi.log" | sed 's/ *$//' | sort | uniq -c | sed 's/^ *//' | paste -sd, -)  # Driver and memory, for the record (gpu-info.log; nvidia-smi.log is what the GPUs are counted from).
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv >"$out/gpu-info.log" 2>&1 || true
fi
if [ "$ngpu" = 0 ]; then
  echo "gpu_check: no GPU found (nvidia-smi is missing or lists no GPU; see $out/nvidia-smi.log)"
  if [ "${EMBER_GPU_CHECK_FORCE:-0}" != 1 ]; then
    for step in "${all_steps[@]}"; do record "$step" SKIP 0 "no GPU found"; done
    write_summary
    exit 0
  fi
  echo "gpu_check: EMBER_GPU_CHECK_FORCE=1: running the steps anyway (GPU tests skip)"
fi
ranks=$((ngpu > 0 ? ngpu : 1))
echo "gpu_check: $ngpu GPU(s); logs in $out${publish:+, copies of the summary and logs in $publish}"

# ---- build (source tree only) ------------------------------------------------------------------
if [ -z "$bin" ]; then
  archs=${EMBER_CUDA_ARCHITECTURES:-native}
  [ "$ngpu" = 0 ] && archs=${EMBER_CUDA_ARCHITECTURES:-90}
  run_step build 420 bash -c "cmake -S '$src' -B '$build' -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES='$archs' -DEMBER_BUILD_TESTS=ON -DEMBER_BUILD_BENCH=ON -DEMBER_BUILD_EXAMPLES=ON \
      && cmake --build '$build' -j '$(nproc)'"
  if [ "$failed" = 1 ]; then
    for step in "${all_steps[@]:1}"; do record "$step" SKIP 0 "build failed"; done
    write_summary
    exit 1
  fi
  bin=$build/bin-gpu-check
  mkdir -p "$bin"
  # The binaries the steps run, found by their ctest names and target names.
  gpu_tests=$(ctest --test-dir "$build" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *//p')
  for name in $gpu_tests $binaries; do
    f=$(find "$build" -name "$name" -type f -perm -u+x -not -path '*/CMakeFiles/*' | head -1)
    [ -n "$f" ] && ln -sf "$f" "$bin/$name"
  done
else
  record build SKIP 0 "prebuilt bundle"
fi

# ---- steps -------------------------------------------------------------------------------------
gpu_tests_cmd() {
  # Each binary under its own limit; timeout puts it in a process group of its own, which the
  # step's timeout would not reach: when the step is stopped, stop the binary running then too.
  local rc=0 pid=""
  trap '[ -n "$pid" ] && kill -TERM -- "-$pid" 2>/dev/null; exit 143' TERM
  for t in $gpu_tests; do
    echo "-- $t"
    timeout --kill-after=5 "${EMBER_GPU_CHECK_TEST_LIMIT:-120}" "$bin/$t" --gtest_output="xml:$out/$t.xml" &
    pid=$!
    wait "$pid" || rc=1
  done
  return $rc
}
# Shared-library check first: a missing CUDA library is named, not a cryptic loader error.
for t in $gpu_tests $binaries; do
  [ -x "$bin/$t" ] && ldd "$bin/$t" 2>/dev/null | grep 'not found' | sed "s|^|$t: |"
done | sort -u >"$out/missing-libs.log"
# What the CUDA libraries resolve to; cuDNN's shim opens its sub-libraries (libcudnn_adv, ...)
# only when first called, so ldd cannot see them: look for them on the loader's path here.
for t in $gpu_tests $binaries; do
  [ -x "$bin/$t" ] && ldd "$bin/$t" 2>/dev/null
done | awk '/=>/ && $1 ~ /^lib(cudnn|nccl|cublas|cublasLt|cudart)\./ {print $1, "=>", $3}' | sort -u >"$out/libraries.log"
if grep -q '^libcudnn\.so' "$out/libraries.log"; then
  cudnn_dir=$(awk '$1 ~ /^libcudnn\.so/ && $3 != "not" {print $3; exit}' "$out/libraries.log")
  cudnn_dir=${cudnn_dir%/*}
  for sub in libcudnn_adv.so.9 libcudnn_ops.so.9 libcudnn_graph.so.9 libcudnn_engines_precompiled.so.9; do
    found=""
    IFS=: read -ra dirs <<<"${LD_LIBRARY_PATH:-}:$cudnn_dir"
    for d in "${dirs[@]}"; do
      [ -n "$d" ] && [ -e "$d/$sub" ] && { found=$d/$sub; break; }
    done
    [ -z "$found" ] && found=$(ldconfig -p 2>/dev/null | awk -v l="$sub" '$1 == l {print $NF; exit}')
    echo "$sub => ${found:-not found}" >>"$out/libraries.log"
    [ -n "$found" ] || echo "cuDNN: $sub not found (opened by libcudnn.so.9 at its first use)" >>"$out/missing-libs.log"
  done
fi
[ -s "$out/python-packages.log" ] && sed 's/^/package /' "$out/python-packages.log" >>"$out/libraries.log"
if [ -s "$out/missing-libs.log" ]; then
  record libraries FAIL 0 "missing shared libraries (install the CUDA 13 runtime: cuBLAS, cudart; NCCL and cuDNN, e.g. with a CUDA build of PyTorch): $(awk '{print $2}' "$out/missing-libs.log" | sort -u | paste -sd' ')"
fi

run_step gpu-tests 240 bash -c "$(declare -f gpu_tests_cmd); out='$out' bin='$bin' gpu_tests='$gpu_tests' gpu_tests_cmd"

# example STEP ARGS...: one epoch of rnn_dp with its checkpoints and metrics under OUT_DIR.
example_args=(--epochs 1 --limit "${EMBER_GPU_CHECK_EXAMPLE_LIMIT:-2000}")
[ -f "$here/BUNDLE" ] && example_args+=(--dict-dir "$run_dir/dict")
files_of() { files=(--checkpoint-dir "$out/$1-checkpoints" --metrics "$out/$1-metrics.jsonl"); }
all_gpus=$(seq -s, -f 'cuda:%g' 0 $((ranks - 1)))
mpirun_note="no mpirun on this machine (a bundle carries no MPI launcher)"
if [ -n "${EMBER_GPU_CHECK_MPIRUN+set}" ]; then
  mpirun=$EMBER_GPU_CHECK_MPIRUN
else
  mpirun=$(command -v mpirun || true)
  if [ -n "$mpirun" ] && [ -f "$here/BUNDLE" ]; then
    mpirun_note="$mpirun not used: a bundle carries Open MPI's libraries but not its plugins, so MPI_Init would fail (EMBER_GPU_CHECK_MPIRUN=$mpirun to try it)"
    mpirun=""
  fi
fi
if [ -x "$bin/rnn_dp" ]; then
  files_of example-1gpu
  run_step example-1gpu 120 "$bin/rnn_dp" "${example_args[@]}" "${files[@]}" --devices cuda:0 --single-device
  # The GPU run's checkpoint, one more epoch on the CPU (checkpoints load on either device).
  if [ -d "$out/example-1gpu-checkpoints" ]; then
    files_of example-1gpu
    run_step example-resume-cpu 120 "$bin/rnn_dp" --epochs 2 "${example_args[@]:2}" "${files[@]}" \
      --resume --devices cpu:0 --single-device
  else
    record example-resume-cpu SKIP 0 "example-1gpu wrote no checkpoint"
  fi
  files_of example-1gpu-amp-bf16
  run_step example-1gpu-amp-bf16 120 "$bin/rnn_dp" "${example_args[@]}" "${files[@]}" \
    --devices cuda:0 --single-device --amp bf16
  files_of example-dp
  run_step example-dp 120 "$bin/rnn_dp" "${example_args[@]}" "${files[@]}" --devices cuda:0,cpu:0
  if [ "$ngpu" -ge 2 ]; then
    files_of example-dp-all-gpus
    run_step example-dp-all-gpus 120 "$bin/rnn_dp" "${example_args[@]}" "${files[@]}" --devices "$all_gpus"
  else
    record example-dp-all-gpus SKIP 0 "one GPU: DataParallel over GPUs needs two (example-dp covers cuda:0,cpu:0)"
  fi
  # DDP, one rank per GPU (each on cuda:LOCAL_RANK); the global batch splits evenly.
  if [ -x "$bin/ember-run" ]; then
    files_of example-ddp-nccl
    run_step example-ddp-nccl 120 "$bin/ember-run" --nproc-per-node "$ranks" "$bin/rnn_dp" "${example_args[@]}" \
      --ddp --backend nccl --batch-size $((32 * ranks)) "${files[@]}"
    expect_in_log example-ddp-nccl 'nccl backend' "the nccl backend"
    # Two ranks over tcp on the GPUs: CUDA tensors staged through the host.
    files_of example-ddp-tcp-cuda
    run_step example-ddp-tcp-cuda 180 "$bin/ember-run" --nproc-per-node 2 "$bin/rnn_dp" "${example_args[@]}" \
      --ddp --backend tcp --batch-size 64 "${files[@]}"
    expect_in_log example-ddp-tcp-cuda 'tcp backend' "the tcp backend"
  else
    record example-ddp-nccl FAIL 0 "ember-run binary not found"
    record example-ddp-tcp-cuda FAIL 0 "ember-run binary not found"
  fi
  if [ -n "$mpirun" ]; then
    mpi_flags=()
    "$mpirun" --version 2>/dev/null | grep -q 'Open MPI' && mpi_flags=(--allow-run-as-root --oversubscribe)
    files_of example-ddp-mpirun
    run_step example-ddp-mpirun 150 "$mpirun" "${mpi_flags[@]}" -np "$ranks" "$bin/rnn_dp" "${example_args[@]}" \
      --ddp --batch-size $((32 * ranks)) "${files[@]}"
    expect_in_log example-ddp-mpirun 'nccl backend' "the nccl backend (the default under mpirun with GPUs)"
  else
    record example-ddp-mpirun SKIP 0 "$mpirun_note"
  fi
else
  record example-1gpu FAIL 0 "rnn_dp binary not found"
fi

if [ -x "$bin/ember-bench-lstm" ]; then
  if [ -z "${EMBER_BENCH_PYTHON:-}" ]; then
    EMBER_BENCH_PYTHON=$(command -v python3 || echo /usr/bin/python3)
    export EMBER_BENCH_PYTHON
  fi
  run_step bench 120 env EMBER_BENCH_LSTM_STEPS=20 "$bin/ember-bench-lstm" --device cuda:0
else
  record bench FAIL 0 "ember-bench-lstm binary not found"
fi
if [ -x "$bin/ember-bench-allreduce" ]; then
  run_step bench-allreduce 120 "$bin/ember-bench-allreduce" --backend nccl
else
  record bench-allreduce FAIL 0 "ember-bench-allreduce binary not found"
fi
if [ "$ngpu" -lt 2 ]; then
  record bench-dp SKIP 0 "one GPU: dp_scaling needs two or more"
elif [ -x "$bin/ember-bench-dp" ]; then
  run_step bench-dp 120 "$bin/ember-bench-dp" --devices "$all_gpus"
else
  record bench-dp FAIL 0 "ember-bench-dp binary not found"
fi

sanitizer=${EMBER_GPU_CHECK_SANITIZER-$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)}
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

write_summary
exit $failed
