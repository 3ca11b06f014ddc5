#!/usr/bin/env bash
# gpu_check.sh [OUT_DIR] -- proves ember's GPU path on a machine with a GPU, in one command that
# fits one 10-minute call with time to spare (docs/GPU.md).
#
# From a source tree it builds the CUDA configuration with all cores (build/gpu-check; the build
# is not counted in the budget); from a bundle made by scripts/gpu_bundle.sh (this script sits
# next to its BUNDLE and payload.tar.xz) it unpacks the prebuilt binaries under ${TMPDIR:-/tmp}
# and runs them without compiling. Then, in phases, each ending at its own deadline (seconds
# after the start, as shares of the budget B = EMBER_GPU_CHECK_BUDGET_S, default 420), so that
# a slow early phase cannot starve a later one:
#   versions     ember-gpu-info: driver, runtime, cuBLAS, cuDNN, NCCL (loaded and built), the
#                device, the shared objects it mapped (versions.log); exit 1 (a library of
#                another major version) is a FAIL; plus libraries.log (what ldd resolves)
#   gpu-tests    every test binary labelled `gpu`, one after another, each under its own limit
#                (EMBER_GPU_CHECK_TEST_LIMIT, default 45 s; cuda_model_test twice that), until
#                0.40 B: log, gtest XML and wall time per binary (tests/), and each failed case's
#                lines from [ RUN ] to [  FAILED  ], its messages included (failed.log)
#   reruns       until 0.52 B: the failed cases of each binary again, with CUDA_LAUNCH_BLOCKING=1
#                (and EMBER_CUDA_LAUNCH_BLOCKING=1), then also with EMBER_CUDNN=0, so one run
#                tells a cuDNN failure from the fallback's and an ordering race from a wrong result
#   examples     until 0.72 B: one epoch of examples/rnn_dp on cuda:0 and, same seed, on cpu:0:
#                their metrics lines must agree (loss within EMBER_GPU_CHECK_LOSS_RTOL, default
#                0.01 relative; test accuracy within EMBER_GPU_CHECK_ACC_ATOL, default 0.01) and
#                the loss be below ln 6 (chance over the six languages); on a disagreement the
#                GPU run again with EMBER_CUDNN=0. The GPU checkpoint resumed on cpu:0; --amp bf16;
#                DataParallel on cuda:0,cpu:0 (and over every GPU with two or more); DDP over
#                nccl under ember-run (one rank per GPU) and under mpirun where one is named;
#                two ranks over tcp on the GPU(s)
#   benchmarks   until 0.88 B: ember-bench-lstm --device cuda:0 (gpu_lstm_vs_cudnn_ratio,
#                and PyTorch's step where the machine's python3 or $EMBER_BENCH_PYTHON imports
#                a CUDA torch), ember-bench-allreduce --backend nccl, ember-bench-dp over every
#                GPU (two or more)
#   sanitizer    compute-sanitizer memcheck over the kernel tests only (EMBER_GPU_CHECK_KERNEL_TESTS,
#                default cuda_test cuda_ops_test cuda_optim_test cuda_nn_ops_test), each bound
#                by EMBER_GPU_CHECK_SANITIZER_LIMIT (default 60 s); one that does not finish is a
#                SKIP (memcheck is slow), an error a FAIL
#   last         the NCCL abort-during-init case (EMBER_GPU_CHECK_LAST, BINARY:CASE, left out of
#                its binary's run), alone, bound by EMBER_GPU_CHECK_LAST_LIMIT (default 20 s),
#                ending by B
# NCCL: every command runs with NCCL_DEBUG=WARN, the first whose name holds "nccl" with INFO,
# each into nccl/STEP.HOST.PID.log. A step stopped by its own limit is a FAIL; one stopped by its
# phase's deadline, or not started for lack of time, a SKIP saying so.
# Logs go to OUT_DIR (default ./gpu-check-<date>): versions.log, libraries.log, tests/BINARY.log
# and .xml, reruns/, sanitizer/, nccl/, a log per step, failed.log, and summary.md (steps, test
# binaries with seconds and counts, reruns, the example comparison, benchmark figures), also
# printed at the end. Exit status 1 when something failed.
# Where $OUT is set (a borrowed GPU machine whose $OUT comes back: at most 8 files) and OUT_DIR is
# not inside it, OUT_DIR defaults to ${TMPDIR:-/tmp}/gpu-check-<date> and after every step $OUT
# gets gpu-check-summary.md, gpu-check-failed.log, gpu-check-versions.log and
# gpu-check-logs.tar.gz (all of OUT_DIR but checkpoints), so what ran comes back even when the
# call is cut short.
# Without a GPU it says so, writes a summary of SKIP lines and exits 0 (EMBER_GPU_CHECK_FORCE=1
# runs everything anyway: the GPU tests then skip).
# Overrides (tests/scripts/gpu_check_test.sh uses them): EMBER_GPU_CHECK_MPIRUN (the mpirun to
# use; set and empty: none; from a bundle an mpirun on the PATH is not used, since the bundle
# carries Open MPI's libraries but not its plugins), EMBER_GPU_CHECK_SANITIZER (likewise for
# compute-sanitizer), EMBER_GPU_CHECK_EXAMPLE_LIMIT (words per language, default 2000).
# Libraries in a bundle: NCCL and cuDNN from the pip packages of the machine's Python with a CUDA
# torch (python3, else $EMBER_GPU_CHECK_PYTHON or /opt/torch/.venv/bin/python3), whose nvidia/
# folders go on the loader's path after the bundle's own; the PyTorch side of the LSTM benchmark
# runs under the machine's own library path.
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
mkdir -p "$out/tests" "$out/reruns" "$out/sanitizer" "$out/nccl"
summary=$out/summary.md
publish=""
if [ -n "${OUT:-}" ] && mkdir -p "$OUT" 2>/dev/null; then
  publish=$(cd "$OUT" && pwd)
  [[ "$out/" == "$publish/"* ]] && publish=""  # OUT_DIR inside $OUT: the logs are there already
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/ember-gpu-check.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

budget=${EMBER_GPU_CHECK_BUDGET_S:-420}
test_limit=${EMBER_GPU_CHECK_TEST_LIMIT:-45}
san_limit=${EMBER_GPU_CHECK_SANITIZER_LIMIT:-60}
last_limit=${EMBER_GPU_CHECK_LAST_LIMIT:-20}
last_case=${EMBER_GPU_CHECK_LAST-process_group_nccl_test:ProcessGroupNCCL.MissingRankFailsRendezvousWithinTheTimeout}
kernel_tests=${EMBER_GPU_CHECK_KERNEL_TESTS-cuda_test cuda_ops_test cuda_optim_test cuda_nn_ops_test}
loss_rtol=${EMBER_GPU_CHECK_LOSS_RTOL:-0.01}
acc_atol=${EMBER_GPU_CHECK_ACC_ATOL:-0.01}
# Phase deadlines, seconds after the start (Budget in the header).
d_tests=$((budget * 40 / 100))
d_reruns=$((budget * 52 / 100))
d_examples=$((budget * 72 / 100))
d_bench=$((budget * 88 / 100))
d_sanitizer=$((budget - last_limit - 5))
t_start=$SECONDS

steps=()      # rows of the steps table
tests=()      # rows of the test binaries table
reruns=()     # rows of the reruns table
compare=""    # the example comparison, a paragraph
failed=0
nccl_info_given=0
all_steps=(build versions gpu-tests reruns example-1gpu example-cpu-same-seed example-compare example-resume-cpu
  example-1gpu-amp-bf16 example-dp example-dp-all-gpus example-ddp-nccl example-ddp-mpirun example-ddp-tcp-cuda
  bench bench-allreduce bench-dp sanitizer last)

now_ms() { local t=${EPOCHREALTIME:-}; if [ -n "$t" ]; then t=${t/[.,]/}; echo $((10#$t / 1000)); else date +%s%3N; fi; }
secs() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }  # milliseconds as seconds, one decimal

record() {  # record STEP RESULT SECONDS NOTE
  steps+=("| $1 | $2 | $3 | $4 |")
  [ "$2" = FAIL ] && failed=1
  echo "== $1: $2 ($3 s) $4"
  publish_results
}

# nccl_vars NAME: the NCCL environment for the command NAME (NCCL in the header).
nccl_vars() {
  local level=WARN
  if [[ "$1" == *nccl* ]] && [ "$nccl_info_given" = 0 ]; then
    level=INFO
    nccl_info_given=1
  fi
  nccl=(NCCL_DEBUG=$level "NCCL_DEBUG_FILE=$out/nccl/${1//\//-}.%h.%p.log")
}

# bounded LOG OWN_LIMIT DEADLINE COMMAND...: runs COMMAND into LOG under OWN_LIMIT seconds, cut to
# what is left before DEADLINE. Sets how: ran, cut (stopped by the deadline), limit (stopped by
# its own limit) or nottime (under 3 s left: not started); rc; ms (wall time); bound (the limit
# applied).
bounded() {
  local log=$1 own=$2 deadline=$3
  shift 3
  local left=$((deadline - (SECONDS - t_start)))
  rc=0 ms=0 bound=$own
  if [ "$left" -lt 3 ]; then
    how=nottime
    return
  fi
  [ "$own" -gt "$left" ] && bound=$left
  { printf '%q ' "$@"; echo; } >"$log"
  local t0
  t0=$(now_ms)
  timeout --kill-after=5 "$bound" "$@" >>"$log" 2>&1
  rc=$?
  ms=$(($(now_ms) - t0))
  how=ran
  if [ $rc = 124 ] || [ $rc = 137 ]; then
    if [ "$bound" -lt "$own" ]; then how=cut; else how=limit; fi
  fi
}

# step STEP OWN_LIMIT DEADLINE COMMAND...: a bounded command logged to STEP.log, recorded.
step() {
  local name=$1 own=$2 deadline=$3
  shift 3
  nccl_vars "$name"
  echo "== $name ..."
  bounded "$out/$name.log" "$own" "$deadline" env "${nccl[@]}" "$@"
  case $how in
    nottime) record "$name" SKIP 0 "no time left in its phase (deadline ${deadline} s of EMBER_GPU_CHECK_BUDGET_S=$budget)" ;;
    cut) record "$name" SKIP "$(secs "$ms")" "cut short by its phase's deadline after ${bound} s (its own limit is ${own} s); log: $name.log" ;;
    limit) record "$name" FAIL "$(secs "$ms")" "timed out after ${bound} s; log: $name.log" ;;
    *) if [ "$rc" = 0 ]; then record "$name" PASS "$(secs "$ms")" "log: $name.log"; else record "$name" FAIL "$(secs "$ms")" "exit $rc; log: $name.log"; fi ;;
  esac
}

# expect_in_log STEP PATTERN WHAT: a passed step whose log lacks PATTERN becomes a failure.
expect_in_log() {
  [[ "${steps[-1]}" == "| $1 | PASS |"* ]] || return 0
  grep -qE "$2" "$out/$1.log" && return 0
  unset 'steps[-1]'
  record "$1" FAIL 0 "ran, but its log does not show $3; log: $1.log"
}

# failed_cases LOG: each failed case's lines, from its [ RUN ] to its [  FAILED  ] line (at most 60
# lines a case), and the case a binary stopped inside, if it did.
failed_cases() {
  awk '
    function flush(tail) {
      if (n > 60) {
        for (i = 1; i <= 30; i++) print buf[i]
        print "    ... (" n - 60 " lines)"
        for (i = n - 29; i <= n; i++) print buf[i]
      } else {
        for (i = 1; i <= n; i++) print buf[i]
      }
      if (tail != "") print tail
      n = 0
    }
    /^\[ RUN      \] / { n = 0; inrun = 1 }
    inrun { buf[++n] = $0 }
    /^\[       OK \] / || /^\[  SKIPPED \] .*\([0-9]+ ms\)$/ { inrun = 0; n = 0 }
    /^\[  FAILED  \] .*\([0-9]+ ms\)$/ { if (inrun) flush(""); inrun = 0 }
    END { if (inrun) flush("    (the binary stopped inside this case: no [ OK ] or [ FAILED ] line follows)") }
  ' "$1"
}
# case_names LOG: the names of the failed cases, and of the case the binary stopped inside.
case_names() {
  awk '
    /^\[ RUN      \] / { cur = $4; inrun = 1 }
    /^\[       OK \] / || /^\[  SKIPPED \] .*\([0-9]+ ms\)$/ { inrun = 0 }
    /^\[  FAILED  \] .*\([0-9]+ ms\)$/ { name = $4; sub(/,$/, "", name); print name; inrun = 0 }
    END { if (inrun) print cur }
  ' "$1" | sort -u | paste -sd: -
}
# counts LOG: "P passed, S skipped, F failed" from gtest's closing lines.
counts() {
  [ -f "$1" ] || { printf -- -; return; }
  awk '
    /^\[  PASSED  \] [0-9]+ test/ { p = $4 }
    /^\[  SKIPPED \] [0-9]+ test/ { s = $4 }
    /^\[  FAILED  \] [0-9]+ test/ { f = $4 }
    /^\[==========\] [0-9]+ tests? from [0-9]+ test suites? ran/ { done = 1 }
    END { if (done) printf "%d passed, %d skipped, %d failed", p, s, f; else printf "did not finish" }
  ' "$1"
}

summary_file() {
  {
    echo "# ember gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo
    echo "host: $(hostname); GPUs: ${gpu_desc:-none}"
    echo "mode: $mode"
    echo "budget: ${budget} s (phase deadlines: tests ${d_tests}, reruns ${d_reruns}, examples ${d_examples}," \
      "benchmarks ${d_bench}, sanitizer ${d_sanitizer}, last ${budget}); ran $((SECONDS - t_start)) s"
    if [ -s "$out/versions.log" ]; then
      echo
      echo "versions (ember-gpu-info):"
      echo
      grep -E '^(library|device) ' "$out/versions.log" | sed 's/^/    /'
    fi
    echo
    echo "| step | result | seconds | note |"
    echo "|---|---|---|---|"
    printf '%s\n' "${steps[@]}"
    if [ ${#tests[@]} -gt 0 ]; then
      echo
      echo "| test binary | result | seconds | cases | note |"
      echo "|---|---|---|---|---|"
      printf '%s\n' "${tests[@]}"
    fi
    if [ ${#reruns[@]} -gt 0 ]; then
      echo
      echo "| rerun of | cases | CUDA_LAUNCH_BLOCKING=1 | + EMBER_CUDNN=0 | reading |"
      echo "|---|---|---|---|---|"
      printf '%s\n' "${reruns[@]}"
    fi
    if [ -n "$compare" ]; then
      echo
      echo "$compare"
    fi
    local log
    for log in bench bench-allreduce bench-dp; do
      if [ -s "$out/$log.log" ] && grep -qE '^(# .*skipped|[a-z_0-9]+ [-0-9.eE+]+ )' "$out/$log.log"; then
        echo
        echo "benchmark $(head -1 "$out/$log.log" | sed "${bin:+s|$bin/||g; }s|^env ||; s|NCCL_DEBUG[A-Z_]*=[^ ]* ||g; s|^EMBER_[A-Z_]*=[^ ]* ||; s| *$||") (name value unit):"
        echo
        grep -E '^(# (torch|.*skipped)|[a-z_0-9]+ [-0-9.eE+]+ )' "$out/$log.log" | sed 's/^/    /'
      fi
    done
  } >"$summary"
}

# failed.log: every failed step's and binary's cases with their messages (or its last lines).
failed_file() {
  local row name log
  {
    for row in "${steps[@]}"; do
      [[ "$row" == *"| FAIL |"* ]] || continue
      name=$(echo "$row" | cut -d'|' -f2 | tr -d ' ')
      [ "$name" = gpu-tests ] || [ "$name" = sanitizer ] && continue  # their binaries below
      echo "==== $name: $row"
      [ -f "$out/$name.log" ] && tail -n 40 "$out/$name.log"
    done
    for row in "${tests[@]}"; do
      [[ "$row" == *"| FAIL |"* ]] || continue
      name=$(echo "$row" | cut -d'|' -f2 | sed 's/^ *//; s/ *$//')
      case $name in
        *" (memcheck)") log=$out/sanitizer/${name% (memcheck)}.log ;;
        *" (last)") log=$out/tests/${name% (last)}.last.log ;;
        *) log=$out/tests/$name.log ;;
      esac
      echo "==== $name: $row"
      [ -f "$log" ] || continue
      if [[ "$name" == *"(memcheck)" ]]; then
        grep -E '^========= ' "$log" | head -n 80
      elif [ -n "$(failed_cases "$log")" ]; then
        failed_cases "$log"
      else
        tail -n 30 "$log"
      fi
    done
    for log in "$out"/reruns/*.log; do
      [ -f "$log" ] || continue
      [ -n "$(failed_cases "$log")" ] || continue
      echo "==== rerun ${log##*/}"
      failed_cases "$log"
    done
  } >"$out/failed.log"
}

# Copies of the summary, the failures, the versions and every log into $OUT (see the header).
publish_results() {
  summary_file
  failed_file
  [ -n "$publish" ] || return 0
  cp "$summary" "$publish/gpu-check-summary.md"
  cp "$out/failed.log" "$publish/gpu-check-failed.log"
  [ -f "$out/versions.log" ] && cp "$out/versions.log" "$publish/gpu-check-versions.log"
  tar -C "$out" -czf "$publish/gpu-check-logs.tar.gz" --exclude='*-checkpoints' . 2>/dev/null || true
}

write_summary() {
  find "$out/nccl" -type f -empty -delete 2>/dev/null
  publish_results
  echo
  cat "$summary"
}

# ---- where the binaries come from --------------------------------------------------------------
binaries="rnn_dp ember-run ember-bench-lstm ember-bench-allreduce ember-bench-dp ember-gpu-info"
if [ -f "$here/BUNDLE" ]; then
  mode="bundle ($here, $(head -1 "$here/BUNDLE"))"
  run_dir=$scratch/bundle-run  # the payload unpacked: bin/, lib/, dict/, bench/ (not in OUT_DIR)
  mkdir -p "$run_dir"
  if command -v xz >/dev/null 2>&1; then
    tar -xJf "$here/payload.tar.xz" -C "$run_dir"
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$here/payload.tar.xz" "$run_dir"
  fi || { echo "gpu_check: cannot unpack $here/payload.tar.xz" >&2; exit 1; }
  bin=$run_dir/bin
  # NCCL and cuDNN do not travel (hundreds of MiB): a CUDA build of PyTorch brings both as pip
  # packages (the CUDA 13 ones in nvidia/cu13/lib, nvidia/cudnn/lib, nvidia/nccl/lib); the
  # toolkit's own libraries come first.
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

# ---- is there a GPU? ---------------------------------------------------------------------------
ngpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >"$out/nvidia-smi.log" 2>&1; then
  ngpu=$(grep -c '^GPU ' "$out/nvidia-smi.log")
  gpu_desc=$(sed -n 's/^GPU [0-9]*: \([^(]*\).*/\1/p' "$out/nvidia-smi.log" | sed 's/ *$//' | sort | uniq -c | sed 's/^ *//' | paste -sd, -)
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv >"$out/gpu-info.log" 2>&1 || true
fi
if [ "$ngpu" = 0 ]; then
  echo "gpu_check: no GPU found (nvidia-smi is missing or lists no GPU; see $out/nvidia-smi.log)"
  if [ "${EMBER_GPU_CHECK_FORCE:-0}" != 1 ]; then
    for s in "${all_steps[@]}"; do record "$s" SKIP 0 "no GPU found"; done
    write_summary
    exit 0
  fi
  echo "gpu_check: EMBER_GPU_CHECK_FORCE=1: running the steps anyway (GPU tests skip)"
fi
ranks=$((ngpu > 0 ? ngpu : 1))
echo "gpu_check: $ngpu GPU(s); logs in $out${publish:+, copies of the summary and logs in $publish}"

# ---- build (source tree only; not counted in the budget) ---------------------------------------
if [ -z "$bin" ]; then
  archs=${EMBER_CUDA_ARCHITECTURES:-native}
  [ "$ngpu" = 0 ] && archs=${EMBER_CUDA_ARCHITECTURES:-90}
  echo "== build ..."
  t0=$SECONDS
  if cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES="$archs" -DEMBER_BUILD_TESTS=ON -DEMBER_BUILD_BENCH=ON -DEMBER_BUILD_EXAMPLES=ON \
      >"$out/build.log" 2>&1 && cmake --build "$build" -j "$(nproc)" >>"$out/build.log" 2>&1; then
    record build PASS $((SECONDS - t0)) "log: build.log"
  else
    record build FAIL $((SECONDS - t0)) "log: build.log"
    for s in "${all_steps[@]:1}"; do record "$s" SKIP 0 "build failed"; done
    write_summary
    exit 1
  fi
  bin=$build/bin-gpu-check
  mkdir -p "$bin"
  gpu_tests=$(ctest --test-dir "$build" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: *//p')
  for name in $gpu_tests $binaries; do
    f=$(find "$build" -name "$name" -type f -perm -u+x -not -path '*/CMakeFiles/*' -not -path "$bin/*" | head -1)
    [ -n "$f" ] && ln -sf "$f" "$bin/$name"
  done
  t_start=$SECONDS
else
  record build SKIP 0 "prebuilt bundle"
fi

# ---- versions and libraries --------------------------------------------------------------------
# A missing library is named here, not left to a cryptic loader error in every step.
for t in $gpu_tests $binaries; do
  [ -x "$bin/$t" ] && ldd "$bin/$t" 2>/dev/null | grep 'not found' | sed "s|^|$t: |"
done | sort -u >"$out/missing-libs.log"
for t in $gpu_tests $binaries; do
  [ -x "$bin/$t" ] && ldd "$bin/$t" 2>/dev/null
done | awk '/=>/ && $1 ~ /^lib(cudnn|nccl|cublas|cublasLt|cudart)/ {print $1, "=>", $3}' | sort -u >"$out/libraries.log"
[ -s "$out/python-packages.log" ] && sed 's/^/package /' "$out/python-packages.log" >>"$out/libraries.log"
if [ -s "$out/missing-libs.log" ]; then
  record libraries FAIL 0 "missing shared libraries (install the CUDA 13 runtime: cuBLAS, cudart; NCCL and cuDNN, e.g. with a CUDA build of PyTorch): $(awk '{print $2}' "$out/missing-libs.log" | sort -u | paste -sd' ')"
fi
if [ -x "$bin/ember-gpu-info" ]; then
  bounded "$out/versions.log" 30 "$d_tests" "$bin/ember-gpu-info"
  if [ "$how" = ran ] && [ "$rc" = 0 ]; then
    record versions PASS "$(secs "$ms")" "log: versions.log ($(grep -c '^file ' "$out/versions.log") shared objects loaded)"
  elif [ "$how" = nottime ] || [ "$how" = cut ]; then
    record versions SKIP "$(secs "$ms")" "no time left in the first phase (deadline ${d_tests} s)"
  elif [ "$how" = ran ] && [ "$rc" = 1 ] && grep -q 'MISMATCH' "$out/versions.log"; then
    record versions FAIL "$(secs "$ms")" "library version mismatch: $(grep 'MISMATCH' "$out/versions.log" | sed 's/^library //' | paste -sd';' -); log: versions.log"
  else
    record versions FAIL "$(secs "$ms")" "ember-gpu-info: ${how}, exit $rc; log: versions.log"
  fi
else
  record versions FAIL 0 "ember-gpu-info binary not found"
fi

# ---- the GPU test binaries ---------------------------------------------------------------------
last_bin=${last_case%%:*}
last_filter=${last_case#*:}
declare -A base_filter=()
rerun_list=()
tests_failed=0
tests_skipped=0
t_tests=$(now_ms)
echo "== gpu-tests ..."
for t in $gpu_tests; do
  if [ ! -x "$bin/$t" ]; then
    tests+=("| $t | FAIL | 0 | - | binary not found |")
    tests_failed=1
    continue
  fi
  args=(--gtest_output="xml:$out/tests/$t.xml")
  if [ -n "$last_case" ] && [ "$t" = "$last_bin" ]; then
    base_filter[$t]="-$last_filter"
    args+=(--gtest_filter="-$last_filter")
  fi
  own=$test_limit
  [ "$t" = cuda_model_test ] && own=$((2 * test_limit))
  nccl_vars "$t"
  bounded "$out/tests/$t.log" "$own" "$d_tests" env "${nccl[@]}" "$bin/$t" "${args[@]}"
  c=$(counts "$out/tests/$t.log")
  case $how in
    nottime) tests+=("| $t | SKIP | 0 | - | no time left before the tests' deadline (${d_tests} s) |"); tests_skipped=1 ;;
    cut) tests+=("| $t | SKIP | $(secs "$ms") | $c | cut short by the tests' deadline (${d_tests} s) after ${bound} s |"); tests_skipped=1 ;;
    limit)
      tests+=("| $t | FAIL | $(secs "$ms") | $c | timed out after ${bound} s (its own limit) inside $(case_names "$out/tests/$t.log" | tr : ' ') |")
      tests_failed=1
      rerun_list+=("$t") ;;
    *)
      if [ "$rc" = 0 ]; then
        tests+=("| $t | PASS | $(secs "$ms") | $c | |")
      else
        tests+=("| $t | FAIL | $(secs "$ms") | $c | exit $rc |")
        tests_failed=1
        rerun_list+=("$t")
      fi ;;
  esac
  echo "   $t: ${tests[-1]}"
done
t_ms=$(($(now_ms) - t_tests))
if [ "$tests_failed" = 1 ]; then
  record gpu-tests FAIL "$(secs "$t_ms")" "binaries failed (see the test binaries' table and failed.log); logs: tests/"
elif [ "$tests_skipped" = 1 ]; then
  record gpu-tests SKIP "$(secs "$t_ms")" "not every binary ran before the deadline; logs: tests/"
else
  record gpu-tests PASS "$(secs "$t_ms")" "logs: tests/"
fi

# ---- reruns of the failed cases ----------------------------------------------------------------
# rerun_once LOG T FILTER VAR=VALUE...: sets res to PASS, FAIL, timeout or not run.
rerun_once() {
  local log=$1 t=$2 filter=$3
  shift 3
  nccl_vars "$t"
  bounded "$log" "$test_limit" "$d_reruns" env "${nccl[@]}" "$@" "$bin/$t" --gtest_filter="$filter" \
    --gtest_output="xml:${log%.log}.xml"
  case $how in
    nottime) res="not run (no time)" ;;
    cut | limit) res="timeout (${bound} s)" ;;
    *) if [ "$rc" = 0 ]; then res=PASS; else res=FAIL; fi ;;
  esac
}
if [ ${#rerun_list[@]} = 0 ]; then
  record reruns SKIP 0 "no failed case to rerun"
else
  t0=$(now_ms)
  for t in "${rerun_list[@]}"; do
    cases=$(case_names "$out/tests/$t.log")
    filter=${cases:-${base_filter[$t]:-*}}
    [ -z "$cases" ] && [ -n "${base_filter[$t]:-}" ] && filter="*${base_filter[$t]}"
    rerun_once "$out/reruns/$t.blocking.log" "$t" "$filter" CUDA_LAUNCH_BLOCKING=1 EMBER_CUDA_LAUNCH_BLOCKING=1
    blocking=$res
    rerun_once "$out/reruns/$t.nocudnn.log" "$t" "$filter" CUDA_LAUNCH_BLOCKING=1 EMBER_CUDA_LAUNCH_BLOCKING=1 EMBER_CUDNN=0
    nocudnn=$res
    case "$blocking/$nocudnn" in
      PASS/PASS) reading="passes when launches are synchronous: an ordering race (streams, events)" ;;
      FAIL/PASS) reading="fails through cuDNN only: the cuDNN path" ;;
      PASS/*) reading="passes with cuDNN, not without: the fallback layers (the first failure was a race)" ;;
      FAIL/FAIL) reading="fails either way: not cuDNN, not timing" ;;
      timeout*/timeout*) reading="hangs either way: not cuDNN" ;;
      *) reading="inconclusive" ;;
    esac
    reruns+=("| $t | ${cases:-whole binary ($filter)} | $blocking | $nocudnn | $reading |")
  done
  record reruns RAN "$(secs $(($(now_ms) - t0)))" "a verdict on the failures, not on the code: see the reruns' table; logs: reruns/"
fi

# ---- examples ----------------------------------------------------------------------------------
example_args=(--epochs 1 --limit "${EMBER_GPU_CHECK_EXAMPLE_LIMIT:-2000}" --seed 0)
[ -f "$here/BUNDLE" ] && example_args+=(--dict-dir "$run_dir/dict")
files_of() { files=(--checkpoint-dir "$out/$1-checkpoints" --metrics "$out/$1-metrics.jsonl"); }
all_gpus=$(seq -s, -f 'cuda:%g' 0 $((ranks - 1)))
# metrics STEP: "LOSS ACC" from the step's last epoch=1 line.
metrics() { sed -n 's/.*epoch=1 loss=\([-0-9.naif]*\) test_acc=\([-0-9.naif]*\).*/\1 \2/p' "$out/$1.log" 2>/dev/null | tail -1; }
# agree "LOSS ACC" "LOSS ACC": the two runs within the tolerances, both losses below ln 6.
agree() {
  awk -v a="$1" -v b="$2" -v rt="$loss_rtol" -v at="$acc_atol" 'BEGIN {
    split(a, x, " "); split(b, y, " "); ln6 = log(6)
    d = x[1] - y[1]; if (d < 0) d = -d; da = x[2] - y[2]; if (da < 0) da = -da
    ok = (x[1] + 0 == x[1] && y[1] + 0 == y[1] && d <= rt * y[1] && da <= at && x[1] < ln6 && y[1] < ln6)
    exit ok ? 0 : 1 }'
}
loss_below_ln6() { awk -v l="$1" 'BEGIN { exit (l != "" && l + 0 == l && l < log(6)) ? 0 : 1 }'; }
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
  step example-1gpu 60 "$d_examples" "$bin/rnn_dp" "${example_args[@]}" "${files[@]}" --devices cuda:0 --single-device
  files_of example-cpu-same-seed
  step example-cpu-same-seed 60 "$d_examples" "$bin/rnn_dp" "${example_args[@]}" "${files[@]}" --devices cpu:0 --single-device
  # The comparison: the example has no dropout, so the two runs differ by rounding alone.
  gm=$(metrics example-1gpu)
  cm=$(metrics example-cpu-same-seed)
  compare="example, seed 0, one epoch (loss test_acc): cuda:0 ${gm:-none}; cpu:0 ${cm:-none}; tolerances: loss ${loss_rtol} relative, test_acc ${acc_atol}; loss below ln 6 = 1.7918"
  if [ -z "$gm" ] || [ -z "$cm" ]; then
    record example-compare SKIP 0 "no metrics line from $( ([ -n "$gm" ] || echo example-1gpu; [ -n "$cm" ] || echo example-cpu-same-seed) | paste -sd, -)"
  elif agree "$gm" "$cm"; then
    record example-compare PASS 0 "cuda:0 $gm, cpu:0 $cm (loss test_acc)"
  else
    record example-compare FAIL 0 "cuda:0 $gm, cpu:0 $cm (loss test_acc): beyond loss ${loss_rtol} relative / test_acc ${acc_atol}, or not below ln 6"
    # The same GPU run through the fallback layers: does cuDNN make the difference?
    files_of example-1gpu-nocudnn
    step example-1gpu-nocudnn 60 "$d_examples" env EMBER_CUDNN=0 "$bin/rnn_dp" "${example_args[@]}" "${files[@]}" \
      --devices cuda:0 --single-device
    nm=$(metrics example-1gpu-nocudnn)
    compare+="; cuda:0 with EMBER_CUDNN=0: ${nm:-none} ($([ -n "$nm" ] && agree "$nm" "$cm" && echo agrees || echo disagrees) with cpu:0)"
  fi
  # The GPU run's checkpoint, one more epoch on the CPU (checkpoints load on either device).
  if [ -d "$out/example-1gpu-checkpoints" ]; then
    files_of example-1gpu
    step example-resume-cpu 60 "$d_examples" "$bin/rnn_dp" --epochs 2 "${example_args[@]:2}" "${files[@]}" \
      --resume --devices cpu:0 --single-device
  else
    record example-resume-cpu SKIP 0 "example-1gpu wrote no checkpoint"
  fi
  files_of example-1gpu-amp-bf16
  step example-1gpu-amp-bf16 60 "$d_examples" "$bin/rnn_dp" "${example_args[@]}" "${files[@]}" \
    --devices cuda:0 --single-device --amp bf16
  if [[ "${steps[-1]}" == "| example-1gpu-amp-bf16 | PASS |"* ]] && ! loss_below_ln6 "$(metrics example-1gpu-amp-bf16 | cut -d' ' -f1)"; then
    unset 'steps[-1]'
    record example-1gpu-amp-bf16 FAIL 0 "ran, but its loss ($(metrics example-1gpu-amp-bf16 | cut -d' ' -f1)) is not below ln 6; log: example-1gpu-amp-bf16.log"
  fi
  files_of example-dp
  step example-dp 60 "$d_examples" "$bin/rnn_dp" "${example_args[@]}" "${files[@]}" --devices cuda:0,cpu:0
  if [ "$ngpu" -ge 2 ]; then
    files_of example-dp-all-gpus
    step example-dp-all-gpus 60 "$d_examples" "$bin/rnn_dp" "${example_args[@]}" "${files[@]}" --devices "$all_gpus"
  else
    record example-dp-all-gpus SKIP 0 "one GPU: DataParallel over GPUs needs two (example-dp covers cuda:0,cpu:0)"
  fi
  # DDP, one rank per GPU (each on cuda:LOCAL_RANK); the global batch splits evenly.
  if [ -x "$bin/ember-run" ]; then
    files_of example-ddp-nccl
    step example-ddp-nccl 60 "$d_examples" "$bin/ember-run" --nproc-per-node "$ranks" "$bin/rnn_dp" "${example_args[@]}" \
      --ddp --backend nccl --batch-size $((32 * ranks)) "${files[@]}"
    expect_in_log example-ddp-nccl 'nccl backend' "the nccl backend"
    # Two ranks over tcp on the GPUs: CUDA tensors staged through the host.
    files_of example-ddp-tcp-cuda
    step example-ddp-tcp-cuda 60 "$d_examples" "$bin/ember-run" --nproc-per-node 2 "$bin/rnn_dp" "${example_args[@]}" \
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
    step example-ddp-mpirun 60 "$d_examples" "$mpirun" "${mpi_flags[@]}" -np "$ranks" "$bin/rnn_dp" "${example_args[@]}" \
      --ddp --batch-size $((32 * ranks)) "${files[@]}"
    expect_in_log example-ddp-mpirun 'nccl backend' "the nccl backend (the default under mpirun with GPUs)"
  else
    record example-ddp-mpirun SKIP 0 "$mpirun_note"
  fi
else
  record example-1gpu FAIL 0 "rnn_dp binary not found"
fi

# ---- benchmarks --------------------------------------------------------------------------------
if [ -x "$bin/ember-bench-lstm" ]; then
  if [ -z "${EMBER_BENCH_PYTHON:-}" ]; then
    EMBER_BENCH_PYTHON=$(command -v python3 || echo /usr/bin/python3)
    export EMBER_BENCH_PYTHON
  fi
  step bench 90 "$d_bench" env EMBER_BENCH_LSTM_STEPS=20 "$bin/ember-bench-lstm" --device cuda:0
else
  record bench FAIL 0 "ember-bench-lstm binary not found"
fi
if [ -x "$bin/ember-bench-allreduce" ]; then
  step bench-allreduce 45 "$d_bench" "$bin/ember-bench-allreduce" --backend nccl
else
  record bench-allreduce FAIL 0 "ember-bench-allreduce binary not found"
fi
if [ "$ngpu" -lt 2 ]; then
  record bench-dp SKIP 0 "one GPU: dp_scaling needs two or more"
elif [ -x "$bin/ember-bench-dp" ]; then
  step bench-dp 60 "$d_bench" "$bin/ember-bench-dp" --devices "$all_gpus"
else
  record bench-dp FAIL 0 "ember-bench-dp binary not found"
fi

# ---- compute-sanitizer over the kernel tests ---------------------------------------------------
sanitizer=${EMBER_GPU_CHECK_SANITIZER-$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)}
if [ -z "$sanitizer" ]; then
  record sanitizer SKIP 0 "compute-sanitizer is not installed"
else
  t0=$(now_ms)
  san_fail=0 san_skip=0 san_ran=0
  for t in $kernel_tests; do
    [[ " $(echo $gpu_tests) " == *" $t "* ]] && [ -x "$bin/$t" ] || continue
    bounded "$out/sanitizer/$t.log" "$san_limit" "$d_sanitizer" "$sanitizer" --tool memcheck --report-api-errors no \
      --error-exitcode 1 "$bin/$t"
    case $how in
      nottime) tests+=("| $t (memcheck) | SKIP | 0 | - | no time left before the sanitizer's deadline (${d_sanitizer} s) |"); san_skip=1 ;;
      cut | limit) tests+=("| $t (memcheck) | SKIP | $(secs "$ms") | $(counts "$out/sanitizer/$t.log") | memcheck did not finish within ${bound} s |"); san_skip=1 ;;
      *)
        san_ran=1
        summary_line=$(grep -E '^========= ERROR SUMMARY' "$out/sanitizer/$t.log" | tail -1 | sed 's/^========= //')
        if [ "$rc" = 0 ]; then
          tests+=("| $t (memcheck) | PASS | $(secs "$ms") | $(counts "$out/sanitizer/$t.log") | ${summary_line} |")
        else
          tests+=("| $t (memcheck) | FAIL | $(secs "$ms") | $(counts "$out/sanitizer/$t.log") | exit $rc ${summary_line} |")
          san_fail=1
        fi ;;
    esac
  done
  if [ "$san_fail" = 1 ]; then
    record sanitizer FAIL "$(secs $(($(now_ms) - t0)))" "memcheck found errors (see the test binaries' table); logs: sanitizer/"
  elif [ "$san_ran" = 0 ]; then
    record sanitizer SKIP "$(secs $(($(now_ms) - t0)))" "no kernel test finished under memcheck (${kernel_tests:-none named})"
  else
    record sanitizer PASS "$(secs $(($(now_ms) - t0)))" "$([ "$san_skip" = 1 ] && echo "some binaries did not finish (SKIP); ")logs: sanitizer/"
  fi
fi

# ---- last: the NCCL abort-during-init case -----------------------------------------------------
if [ -z "$last_case" ]; then
  record last SKIP 0 "no case named (EMBER_GPU_CHECK_LAST is empty)"
elif [ ! -x "$bin/$last_bin" ]; then
  record last SKIP 0 "$last_bin not found"
else
  nccl_vars "$last_bin"
  bounded "$out/tests/$last_bin.last.log" "$last_limit" "$budget" env "${nccl[@]}" "$bin/$last_bin" \
    --gtest_filter="$last_filter" --gtest_output="xml:$out/tests/$last_bin.last.xml"
  c=$(counts "$out/tests/$last_bin.last.log")
  case $how in
    nottime) r=SKIP n="no time left" ;;
    cut) r=SKIP n="cut short by the budget after ${bound} s" ;;
    limit) r=FAIL n="timed out after ${bound} s (its own limit)" ;;
    *) if [ "$rc" = 0 ]; then r=PASS n=""; else r=FAIL n="exit $rc"; fi ;;
  esac
  tests+=("| $last_bin (last) | $r | $(secs "$ms") | $c | $last_filter${n:+: $n} |")
  record last "$r" "$(secs "$ms")" "$last_case${n:+: $n}; log: tests/$last_bin.last.log"
fi

write_summary
exit $failed
