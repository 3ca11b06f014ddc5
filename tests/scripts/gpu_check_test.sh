#!/usr/bin/env bash
# gpu_check_test.sh SRC_DIR WORK_DIR -- scripts/gpu_check.sh on a machine without a GPU, against
# fake bundles: stand-in gtest binaries (cases that pass, skip, fail with a message, fail only
# through cuDNN, hang), a fake nvidia-smi, ember-gpu-info, rnn_dp, ember-run, mpirun and
# compute-sanitizer. Checks: with no GPU every step is a SKIP and the exit status 0; with one GPU
# what runs with which arguments and environment (NCCL_DEBUG INFO for the first NCCL binary, WARN
# after; the abort-during-init case left out of its binary and run alone last; memcheck only over
# the kernel tests, a memcheck timeout a SKIP), per-binary logs, XML and wall times, the example
# on cuda:0 and cpu:0 compared; a failing binary's [  FAILED  ] lines and messages kept, a
# hanging one killed at its own limit with the run going on, the failed cases rerun with
# CUDA_LAUNCH_BLOCKING=1 and EMBER_CUDNN=0 and read, a version mismatch flagged, and on a
# borrowed machine ($OUT set) exactly the files that come back; a phase's deadline cutting a
# hanging binary (a SKIP) without starving the benchmarks; two GPUs; mpirun's default backend.
set -uo pipefail
src=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
fails=0
check() {  # check DESCRIPTION COMMAND...
  if "${@:2}"; then echo "ok   $1"; else echo "FAIL $1"; fails=$((fails + 1)); fi
}
has() { grep -qE -- "$2" "$1"; }
hasnt() { ! grep -qE -- "$2" "$1"; }
row() { grep -E "^\| $2 \| " "$1" | head -1; }  # row SUMMARY NAME: the first table row of NAME
result_is() { [[ "$(row "$1" "$2")" == "| $2 | $3 |"* ]] || { echo "     $2: $(row "$1" "$2")"; false; }; }
# before FILE A B: the first line matching A comes before the first matching B.
before() {
  local a b
  a=$(grep -nE -- "$2" "$1" | head -1 | cut -d: -f1)
  b=$(grep -nE -- "$3" "$1" | head -1 | cut -d: -f1)
  [ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ]
}

check "gpu_check.sh parses" bash -n "$src/scripts/gpu_check.sh"
check "gpu_bundle.sh parses" bash -n "$src/scripts/gpu_bundle.sh"

# ---- stand-ins -------------------------------------------------------------------------------
fake=$work/fake
mkdir -p "$fake/path" "$fake/bin" "$fake/spec"
cat >"$fake/path/nvidia-smi" <<'SH'
#!/usr/bin/env bash
[ "${FAKE_GPUS:-0}" -gt 0 ] || { echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"; exit 9; }
[ "${1:-}" = -L ] || exit 0
for i in $(seq 0 $((FAKE_GPUS - 1))); do echo "GPU $i: NVIDIA H200 (UUID: GPU-fake-$i)"; done
SH
# Every stand-in logs "name args" to $FAKE_CALLS and fails when "name args" matches $FAKE_FAIL.
preamble='echo "$(basename "$0") $*" >>"$FAKE_CALLS"
if [ -n "${FAKE_FAIL:-}" ] && [[ "$(basename "$0") $*" =~ $FAKE_FAIL ]]; then echo "failing on purpose"; exit 3; fi'

# A gtest binary: its cases and their outcomes in $FAKE_SPECS/NAME ("Suite.Case outcome"):
# ok, skip, fail (fails where FAKE_FAILING is set), cudnn (fails where FAKE_FAILING is set and
# EMBER_CUDNN is not 0), hang (sleeps where FAKE_HANG is set). Honours --gtest_filter (names and
# '*', POSITIVE[-NEGATIVE]) and --gtest_output=xml:PATH; logs its environment with its call.
cat >"$fake/gtest" <<'SH'
#!/usr/bin/env bash
name=$(basename "$0")
echo "$name $* [NCCL_DEBUG=${NCCL_DEBUG:-} NCCL_DEBUG_FILE=${NCCL_DEBUG_FILE:-} CUDA_LAUNCH_BLOCKING=${CUDA_LAUNCH_BLOCKING:-} EMBER_CUDNN=${EMBER_CUDNN:-}]" >>"$FAKE_CALLS"
echo "test LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
filter='*' xml=''
for a in "$@"; do
  case $a in --gtest_filter=*) filter=${a#*=} ;; --gtest_output=xml:*) xml=${a#--gtest_output=xml:} ;; esac
done
pos=${filter%%-*} neg=""
[[ "$filter" == *-* ]] && neg=${filter#*-}
[ -n "$pos" ] || pos='*'
selected() {
  local p ok=0
  IFS=: read -ra ps <<<"$pos"; for p in "${ps[@]}"; do [[ $1 == $p ]] && ok=1; done
  IFS=: read -ra ns <<<"$neg"; for p in "${ns[@]}"; do [[ $1 == $p ]] && ok=0; done
  [ $ok = 1 ]
}
cases=() passed=0 skipped=() failed=()
while read -r c o; do selected "$c" && cases+=("$c:$o"); done <"$FAKE_SPECS/$name"
echo "[==========] Running ${#cases[@]} tests from 1 test suite."
for co in "${cases[@]}"; do
  c=${co%%:*} o=${co#*:}
  echo "[ RUN      ] $c"
  [ "$o" = hang ] && [ -n "${FAKE_HANG:-}" ] && { echo $$ >>"$FAKE_CALLS.pids"; exec sleep 30; }
  if { [ "$o" = fail ] || { [ "$o" = cudnn ] && [ "${EMBER_CUDNN:-1}" != 0 ]; }; } && [ -n "${FAKE_FAILING:-}" ]; then
    printf '%s\n' "tests/fake/$name.cpp:42: Failure" "Expected equality of these values:" "  got_$c" "    Which is: 3" \
      "  want" "    Which is: 4" "[  FAILED  ] $c (2 ms)"
    failed+=("$c")
  elif [ "$o" = skip ]; then
    printf '%s\n' "tests/fake/$name.cpp:7: Skipped" "needs two CUDA devices" "[  SKIPPED ] $c (0 ms)"
    skipped+=("$c")
  else
    echo "[       OK ] $c (1 ms)"
    passed=$((passed + 1))
  fi
done
echo "[==========] ${#cases[@]} tests from 1 test suite ran. (5 ms total)"
echo "[  PASSED  ] $passed tests."
[ ${#skipped[@]} = 0 ] || { echo "[  SKIPPED ] ${#skipped[@]} tests, listed below:"; printf '[  SKIPPED ] %s\n' "${skipped[@]}"; }
[ ${#failed[@]} = 0 ] || { echo "[  FAILED  ] ${#failed[@]} tests, listed below:"; printf '[  FAILED  ] %s\n' "${failed[@]}"; }
[ -z "$xml" ] || echo "<testsuites tests=\"${#cases[@]}\" failures=\"${#failed[@]}\"/>" >"$xml"
[ ${#failed[@]} = 0 ]
SH
printf 'CudaOps.Add ok\nCudaOps.TwoDevices skip\n' >"$fake/spec/cuda_ops_test"
printf 'Model.Forward ok\nModel.Gradients fail\nModel.Loss fail\n' >"$fake/spec/fake_fail_test"
printf 'Rnn.Outputs ok\nRnn.CudnnGradients cudnn\n' >"$fake/spec/fake_cudnn_test"
printf 'Streams.Hangs hang\nStreams.After ok\n' >"$fake/spec/fake_hung_test"
printf 'Adam.Step ok\n' >"$fake/spec/cuda_optim_test"
printf 'ProcessGroupNCCL.OneRank ok\nProcessGroupNCCL.MissingRankFailsRendezvousWithinTheTimeout ok\n' \
  >"$fake/spec/process_group_nccl_test"
printf 'After.All ok\n' >"$fake/spec/fake_after_test"
gpu_tests=(cuda_ops_test fake_fail_test fake_cudnn_test fake_hung_test cuda_optim_test process_group_nccl_test
  fake_after_test)
for t in "${gpu_tests[@]}"; do cp "$fake/gtest" "$fake/bin/$t"; done

cat >"$fake/bin/ember-gpu-info" <<SH
#!/usr/bin/env bash
$preamble
echo "library driver loaded 13.0.0 built 0.0.0"
echo "library runtime loaded 13.0.88 built 13.0.88"
if [ -n "\${FAKE_MISMATCH:-}" ]; then echo "library cudnn loaded 8.9.7 built 9.19.0 MISMATCH"; else echo "library cudnn loaded 9.17.0 built 9.19.0 older-than-built"; fi
echo 'device cuda:0 name="NVIDIA H200" sm_90 memory_mib=143771'
echo "file /usr/lib/x86_64-linux-gnu/libc.so.6"
echo "file /site/nvidia/cudnn/lib/libcudnn_adv.so.9"
[ -z "\${FAKE_MISMATCH:-}" ]
SH
# rnn_dp: its metrics line's loss from FAKE_GPU_LOSS on a CUDA device (FAKE_NOCUDNN_LOSS under
# EMBER_CUDNN=0), FAKE_CPU_LOSS on the CPU.
cat >"$fake/bin/rnn_dp" <<SH
#!/usr/bin/env bash
$preamble
backend=""; ddp=0; prev=""; devices=""; epochs=1
for a in "\$@"; do
  [ "\$prev" = --backend ] && backend=\$a
  [ "\$prev" = --devices ] && devices=\$a
  [ "\$prev" = --epochs ] && epochs=\$a
  [ "\$prev" = --checkpoint-dir ] && mkdir -p "\$a"
  [ "\$a" = --ddp ] && ddp=1
  prev=\$a
done
[ "\$ddp" = 1 ] && echo "rnn_dp: rank \${LOCAL_RANK:-0} of 1 (local rank 0, pid \$\$), \${backend:-\${FAKE_DEFAULT_BACKEND:-nccl}} backend"
loss=\${FAKE_CPU_LOSS:-1.2000}
[[ "\$devices" == cuda* || -z "\$devices" ]] && loss=\${FAKE_GPU_LOSS:-1.2000}
[[ "\$devices" == cuda* ]] && [ "\${EMBER_CUDNN:-1}" = 0 ] && loss=\${FAKE_NOCUDNN_LOSS:-\$loss}
echo "epoch=\$epochs loss=\$loss test_acc=0.5100 epoch_s=1.00 samples_per_s=1000"
SH
cat >"$fake/bin/ember-run" <<SH
#!/usr/bin/env bash
$preamble
[ "\$1" = --nproc-per-node ] || exit 2
n=\$2; shift 2
rc=0
for r in \$(seq 0 \$((n - 1))); do LOCAL_RANK=\$r "\$@" | sed "s/^/[rank \$r] /" || rc=1; done
exit \$rc
SH
cat >"$fake/path/mpirun" <<SH
#!/usr/bin/env bash
$preamble
[ "\$1" = --version ] && { echo "mpirun (Open MPI) 4.1.4"; exit 0; }
while [ "\$1" != -np ]; do shift; done
n=\$2; shift 2
for r in \$(seq 0 \$((n - 1))); do LOCAL_RANK=\$r "\$@" || exit 1; done
SH
# compute-sanitizer: runs the binary after its six option words; hangs on the binary that
# FAKE_SAN_HANG names.
cat >"$fake/path/compute-sanitizer" <<SH
#!/usr/bin/env bash
$preamble
shift 6
[ "\$(basename "\$1")" = "\${FAKE_SAN_HANG:-}" ] && exec sleep 30
"\$@"
rc=\$?
echo "========= ERROR SUMMARY: 0 errors"
exit \$rc
SH
for b in ember-bench-lstm ember-bench-allreduce ember-bench-dp; do
  printf '#!/usr/bin/env bash\n%s\necho "%s_figure 1.5 GB/s"\n' "$preamble" "${b//-/_}" >"$fake/bin/$b"
done
echo 'echo "# torch_gpu_lstm skipped: python3 has no CUDA torch"' >>"$fake/bin/ember-bench-lstm"
cat >>"$fake/bin/ember-bench-lstm" <<'SH'
"$EMBER_BENCH_PYTHON" -c 'import os; print("peer LD_LIBRARY_PATH=" + os.environ.get("LD_LIBRARY_PATH", "<unset>"))'
SH
chmod +x "$fake/path"/* "$fake/bin"/*

# The bundle, laid out as scripts/gpu_bundle.sh makes it.
bundle=$work/bundle
mkdir -p "$bundle" "$fake/payload/bin" "$fake/payload/lib" "$fake/payload/dict" "$fake/payload/bench"
cp "$fake/bin"/* "$fake/payload/bin/"
echo "hello" >"$fake/payload/dict/words"
touch "$fake/payload/bench/bench_lstm_torch.py"
tar -C "$fake/payload" -cJf "$bundle/payload.tar.xz" bin lib dict bench
echo "ember test-bundle, CUDA architectures 90" >"$bundle/BUNDLE"
printf '%s\n' "${gpu_tests[@]}" >"$bundle/gpu_tests.txt"
# The machine's Python packages: nvidia/ folders holding the CUDA libraries, as the CUDA 13 pip
# packages lay them out (found through PYTHONPATH by the real python3 here).
pyroot=$work/site-packages
mkdir -p "$pyroot/nvidia/cu13/lib" "$pyroot/nvidia/cudnn/lib" "$pyroot/nvidia/nccl/lib"
touch "$pyroot/nvidia/cu13/lib/libcublas.so.13" "$pyroot/nvidia/cudnn/lib/libcudnn_adv.so.9" \
  "$pyroot/nvidia/nccl/lib/libnccl.so.2"
cp "$src/scripts/gpu_check.sh" "$bundle/gpu_check.sh"

# start NAME [VAR=VALUE...]: runs the bundle's gpu_check.sh into $work/NAME in the background
# (the scenarios run side by side); finish NAME waits for it and sets rc, sum, calls, o.
declare -A pids=()
start() {
  local name=$1
  shift
  : >"$work/$name.calls"
  env PATH="$fake/path:$PATH" FAKE_CALLS="$work/$name.calls" FAKE_SPECS="$fake/spec" EMBER_GPU_CHECK_MPIRUN="" \
    EMBER_GPU_CHECK_SANITIZER="$fake/path/compute-sanitizer" EMBER_GPU_CHECK_KERNEL_TESTS="cuda_ops_test cuda_optim_test" \
    EMBER_GPU_CHECK_TEST_LIMIT=3 EMBER_GPU_CHECK_SANITIZER_LIMIT=2 "$@" \
    bash "$bundle/gpu_check.sh" "$work/$name" >"$work/$name.out" 2>&1 &
  pids[$name]=$!
}
finish() {
  wait "${pids[$1]}"
  rc=$?
  o=$work/$1
  sum=$o/summary.md
  calls=$work/$1.calls
}

start nogpu FAKE_GPUS=0
start gpu1 FAKE_GPUS=1 FAKE_SAN_HANG=cuda_optim_test
start budget FAKE_GPUS=1 EMBER_GPU_CHECK_BUDGET_S=3
start budget-cut FAKE_GPUS=1 FAKE_HANG=1 EMBER_GPU_CHECK_TEST_LIMIT=60 EMBER_GPU_CHECK_BUDGET_S=30 \
  EMBER_GPU_CHECK_LAST_LIMIT=3
start gpu2 FAKE_GPUS=2 EMBER_GPU_CHECK_MPIRUN="$fake/path/mpirun" FAKE_FAIL='^ember-bench-dp ' \
  FAKE_GPU_LOSS=1.9000 FAKE_CPU_LOSS=1.9000
start wrong-default FAKE_GPUS=1 EMBER_GPU_CHECK_MPIRUN="$fake/path/mpirun" FAKE_DEFAULT_BACKEND=tcp
# On a borrowed machine: $OUT set, no OUT_DIR; failing, hanging and cuDNN-only cases, a version
# mismatch, the example disagreeing with the CPU unless cuDNN is off.
devout=$work/devout
mkdir -p "$devout" "$work/tmp"
: >"$work/failing.calls"
env PATH="$fake/path:$PATH" FAKE_CALLS="$work/failing.calls" FAKE_SPECS="$fake/spec" EMBER_GPU_CHECK_MPIRUN="" \
  EMBER_GPU_CHECK_SANITIZER="$fake/path/compute-sanitizer" EMBER_GPU_CHECK_KERNEL_TESTS="cuda_ops_test cuda_optim_test" \
  EMBER_GPU_CHECK_TEST_LIMIT=3 EMBER_GPU_CHECK_SANITIZER_LIMIT=2 FAKE_GPUS=1 FAKE_FAILING=1 FAKE_HANG=1 FAKE_MISMATCH=1 \
  FAKE_GPU_LOSS=1.5000 FAKE_NOCUDNN_LOSS=1.2000 OUT="$devout" TMPDIR="$work/tmp" PYTHONPATH="$pyroot" \
  LD_LIBRARY_PATH=/machine/lib bash "$bundle/gpu_check.sh" >"$work/failing.out" 2>&1 &
pids[failing]=$!
: >"$work/mpi-path.calls"
env -u EMBER_GPU_CHECK_MPIRUN PATH="$fake/path:$PATH" FAKE_CALLS="$work/mpi-path.calls" FAKE_SPECS="$fake/spec" \
  EMBER_GPU_CHECK_SANITIZER="" FAKE_GPUS=1 bash "$bundle/gpu_check.sh" "$work/mpi-path" >"$work/mpi-path.out" 2>&1 &
pids[mpi-path]=$!

# ---- no GPU ------------------------------------------------------------------------------------
finish nogpu
check "no GPU: exit status 0" [ "$rc" = 0 ]
for s in build versions gpu-tests reruns example-1gpu example-cpu-same-seed example-compare example-resume-cpu \
  example-1gpu-amp-bf16 example-dp example-ddp-nccl example-ddp-tcp-cuda bench bench-allreduce bench-dp sanitizer last; do
  check "no GPU: $s is a SKIP" result_is "$sum" "$s" SKIP
done
check "no GPU: nothing ran" [ ! -s "$calls" ]

# ---- one GPU, everything passing but one binary under memcheck ---------------------------------
finish gpu1
check "1 GPU: exit status 0" [ "$rc" = 0 ]
check "1 GPU: summary names the GPU" has "$sum" 'GPUs: 1 NVIDIA H200'
check "1 GPU: summary states the budget" has "$sum" '^budget: 420 s \(phase deadlines: tests 168, reruns 218, examples 302, benchmarks 369, sanitizer 395, last 420\)'
for s in versions gpu-tests example-1gpu example-cpu-same-seed example-compare example-resume-cpu example-1gpu-amp-bf16 \
  example-dp example-ddp-nccl example-ddp-tcp-cuda bench bench-allreduce sanitizer last; do
  check "1 GPU: $s passes" result_is "$sum" "$s" PASS
done
check "1 GPU: versions in the summary" has "$sum" '^    library cudnn loaded 9.17.0 built 9.19.0 older-than-built$'
check "1 GPU: versions.log lists the files loaded" has "$o/versions.log" '^file /site/nvidia/cudnn/lib/libcudnn_adv.so.9$'
check "1 GPU: nothing to rerun" result_is "$sum" reruns SKIP
for t in "${gpu_tests[@]}"; do
  check "1 GPU: $t: its own log" has "$o/tests/$t.log" '^\[==========\] [0-9]+ tests from 1 test suite ran'
  check "1 GPU: $t: its XML" [ -s "$o/tests/$t.xml" ]
  check "1 GPU: $t: a row with its wall time and counts" has "$sum" "^\| $t \| PASS \| [0-9]+\.[0-9] \| [0-9]+ passed, [0-9]+ skipped, 0 failed \|"
done
check "1 GPU: skipped cases counted" has "$sum" '^\| cuda_ops_test \| PASS \| [0-9.]+ \| 1 passed, 1 skipped, 0 failed \|'
check "1 GPU: the abort-during-init case left out of its binary's run" \
  has "$calls" '^process_group_nccl_test --gtest_output=xml:[^ ]* --gtest_filter=-ProcessGroupNCCL\.MissingRankFailsRendezvousWithinTheTimeout '
check "1 GPU: ... and run alone, last of all" \
  bash -c "tail -1 '$calls' | grep -qE '^process_group_nccl_test --gtest_filter=ProcessGroupNCCL\.MissingRankFailsRendezvousWithinTheTimeout '"
check "1 GPU: ... in its own row" has "$sum" '^\| process_group_nccl_test \(last\) \| PASS \| [0-9.]+ \| 1 passed, 0 skipped, 0 failed \| ProcessGroupNCCL.MissingRank'
check "1 GPU: NCCL_DEBUG=WARN for a test binary" has "$calls" "^cuda_ops_test .*\[NCCL_DEBUG=WARN NCCL_DEBUG_FILE=$o/nccl/cuda_ops_test\.%h\.%p\.log "
check "1 GPU: INFO for the first NCCL binary" has "$calls" '^process_group_nccl_test --gtest_output.*\[NCCL_DEBUG=INFO '
check "1 GPU: ... and for it alone" [ "$(grep -c 'NCCL_DEBUG=INFO' "$calls")" = 1 ]
check "1 GPU: NCCL's log for the examples too" has "$o/example-ddp-nccl.log" "NCCL_DEBUG=WARN NCCL_DEBUG_FILE=$o/nccl/example-ddp-nccl"
check "1 GPU: memcheck over the kernel tests" has "$calls" '^compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 .*/cuda_ops_test$'
check "1 GPU: ... and no other binary" [ "$(grep -c '^compute-sanitizer' "$calls")" = 2 ]
check "1 GPU: memcheck passing" has "$sum" '^\| cuda_ops_test \(memcheck\) \| PASS \| .* ERROR SUMMARY: 0 errors \|$'
check "1 GPU: a memcheck timeout is a SKIP" has "$sum" '^\| cuda_optim_test \(memcheck\) \| SKIP \| [0-9.]+ \| .*\| memcheck did not finish within 2 s \|$'
check "1 GPU: ... not a failure" hasnt "$o/failed.log" 'memcheck'
check "1 GPU: example on cuda:0 from the bundle's word lists" \
  has "$calls" '^rnn_dp --epochs 1 --limit 2000 --seed 0 --dict-dir [^ ]*/bundle-run/dict .*--devices cuda:0 --single-device$'
check "1 GPU: the same on cpu:0" has "$calls" '^rnn_dp --epochs 1 --limit 2000 --seed 0 --dict-dir .*--devices cpu:0 --single-device$'
check "1 GPU: the comparison in the summary" has "$sum" '^example, seed 0, one epoch \(loss test_acc\): cuda:0 1.2000 0.5100; cpu:0 1.2000 0.5100;'
check "1 GPU: no GPU run without cuDNN when they agree" hasnt "$calls" 'example-1gpu-nocudnn'
check "1 GPU: the GPU checkpoint resumes on cpu:0" \
  has "$calls" "^rnn_dp --epochs 2 --limit 2000 --seed 0 .*--checkpoint-dir $o/example-1gpu-checkpoints .*--resume --devices cpu:0"
check "1 GPU: bf16 autocast run" has "$calls" '^rnn_dp .*--devices cuda:0 --single-device --amp bf16$'
check "1 GPU: DataParallel on cuda:0,cpu:0" has "$calls" '^rnn_dp .*--devices cuda:0,cpu:0$'
check "1 GPU: DataParallel over all GPUs skipped with one" result_is "$sum" example-dp-all-gpus SKIP
check "1 GPU: DDP over nccl, one rank" has "$calls" '^ember-run --nproc-per-node 1 .*/rnn_dp .*--ddp --backend nccl --batch-size 32 '
check "1 GPU: DDP over tcp, two ranks" has "$calls" '^ember-run --nproc-per-node 2 .*/rnn_dp .*--ddp --backend tcp '
check "1 GPU: mpirun step skipped, saying why" has "$sum" '\| example-ddp-mpirun \| SKIP \| 0 \| no mpirun'
check "1 GPU: LSTM benchmark on cuda:0" has "$calls" '^ember-bench-lstm --device cuda:0$'
check "1 GPU: allreduce benchmark over nccl" has "$calls" '^ember-bench-allreduce --backend nccl$'
check "1 GPU: benchmark figures in the summary" has "$sum" '^    ember_bench_allreduce_figure 1.5 GB/s$'
check "1 GPU: a benchmark's skip line in the summary" has "$sum" '^    # torch_gpu_lstm skipped: python3 has no CUDA torch$'
check "1 GPU: the benchmark's command in the summary" has "$sum" '^benchmark ember-bench-allreduce --backend nccl \(name value unit\):$'
check "1 GPU: bench-dp skipped, not run" bash -c "grep -qE '^\| bench-dp \| SKIP ' '$sum' && ! grep -q '^ember-bench-dp' '$calls'"
check "1 GPU: the benchmarks before the sanitizer" before "$calls" '^ember-bench-allreduce' '^compute-sanitizer'
all_under_out() { ! grep -E '^rnn_dp ' "$calls" | grep -qv -- "--checkpoint-dir $o/.* --metrics $o/"; }
check "1 GPU: every example writes its checkpoints and metrics under OUT_DIR" all_under_out
check "1 GPU: no failure listed" [ ! -s "$o/failed.log" ]

# ---- failing, hanging, cuDNN-only, a mismatch; on a borrowed machine ($OUT) --------------------
finish failing
calls=$work/failing.calls
dsum=$devout/gpu-check-summary.md
dfail=$devout/gpu-check-failed.log
check "failures: exit status 1" [ "$rc" = 1 ]
check "\$OUT: exactly the four files come back" \
  [ "$(cd "$devout" && find . -mindepth 1 | sort | paste -sd' ')" = "./gpu-check-failed.log ./gpu-check-logs.tar.gz ./gpu-check-summary.md ./gpu-check-versions.log" ]
check "version mismatch: versions fails, naming the library" \
  has "$dsum" '^\| versions \| FAIL \| [0-9.]+ \| library version mismatch: cudnn loaded 8.9.7 built 9.19.0 MISMATCH;'
check "version mismatch: the versions come back" has "$devout/gpu-check-versions.log" 'MISMATCH'
check "failing binary: its row" has "$dsum" '^\| fake_fail_test \| FAIL \| [0-9.]+ \| 1 passed, 0 skipped, 2 failed \| exit 1 \|'
check "failing binary: its FAILED line kept" has "$dfail" '^\[  FAILED  \] Model\.Loss \(2 ms\)$'
check "failing binary: ... with its message" has "$dfail" '^    Which is: 3$'
check "failing binary: ... under the case's RUN line" before "$dfail" '^\[ RUN      \] Model\.Gradients' '^  got_Model\.Gradients$'
check "failing binary: passing cases left out" hasnt "$dfail" 'Model\.Forward'
check "failing binary: gpu-tests fails" result_is "$dsum" gpu-tests FAIL
check "hanging binary: killed at its own limit" has "$dsum" '^\| fake_hung_test \| FAIL \| [0-9.]+ \| did not finish \| timed out after 3 s \(its own limit\) inside Streams\.Hangs \|$'
check "hanging binary: ... in failed.log, naming the case" has "$dfail" 'the binary stopped inside this case'
check "hanging binary: the run goes on" has "$dsum" '^\| cuda_optim_test \| PASS \| '
check "hanging binary: ... to the last binary" has "$dsum" '^\| fake_after_test \| PASS \| '
check "hanging binary: ... and to the benchmarks" result_is "$dsum" bench-allreduce PASS
check "reruns: with CUDA_LAUNCH_BLOCKING=1" \
  has "$calls" '^fake_fail_test --gtest_filter=Model\.Gradients:Model\.Loss --gtest_output=xml:[^ ]*/reruns/fake_fail_test\.blocking\.xml \[.*CUDA_LAUNCH_BLOCKING=1 EMBER_CUDNN=\]$'
check "reruns: then with EMBER_CUDNN=0" \
  has "$calls" '^fake_fail_test --gtest_filter=Model\.Gradients:Model\.Loss .*CUDA_LAUNCH_BLOCKING=1 EMBER_CUDNN=0\]$'
check "reruns: failing either way" has "$dsum" '^\| fake_fail_test \| Model\.Gradients:Model\.Loss \| FAIL \| FAIL \| fails either way'
check "reruns: failing through cuDNN only" has "$dsum" '^\| fake_cudnn_test \| Rnn\.CudnnGradients \| FAIL \| PASS \| fails through cuDNN only'
check "reruns: the hung case" has "$dsum" '^\| fake_hung_test \| Streams\.Hangs \| timeout \(3 s\) \| timeout \(3 s\) \| hangs either way'
check "reruns: passing binaries not rerun" hasnt "$calls" '^cuda_ops_test --gtest_filter'
check "example disagreeing: a failure naming both runs" \
  has "$dsum" '^\| example-compare \| FAIL \| 0 \| cuda:0 1.5000 0.5100, cpu:0 1.2000 0.5100'
check "example disagreeing: the GPU run again without cuDNN" \
  has "$calls" '^rnn_dp --epochs 1 .*example-1gpu-nocudnn-checkpoints .*--devices cuda:0 --single-device$'
check "example disagreeing: ... which agrees" has "$dsum" 'cuda:0 with EMBER_CUDNN=0: 1.2000 0.5100 \(agrees with cpu:0\)'
check "\$OUT: a passed step is not in the failures" hasnt "$dfail" '^==== example-1gpu:'
tar -tzf "$devout/gpu-check-logs.tar.gz" >"$work/failing.tar-list"
check "\$OUT: every log in the archive" has "$work/failing.tar-list" '^\./tests/fake_fail_test\.log$'
check "\$OUT: ... the XML too" has "$work/failing.tar-list" '^\./tests/fake_fail_test\.xml$'
check "\$OUT: ... the reruns' logs" has "$work/failing.tar-list" '^\./reruns/fake_cudnn_test\.nocudnn\.log$'
check "\$OUT: ... without checkpoints" hasnt "$work/failing.tar-list" 'checkpoints'
check "\$OUT: the bundle is unpacked outside \$OUT" has "$calls" "^rnn_dp .*--dict-dir $work/tmp/[^ ]*/bundle-run/dict "
check "\$OUT: ... and removed at exit" [ -z "$(find "$work/tmp" -name bundle-run)" ]
tar -xzf "$devout/gpu-check-logs.tar.gz" -C "$work/tmp" ./tests/cuda_ops_test.log ./bench.log 2>/dev/null
check "nvidia/ library folders on the loader's path" \
  has "$work/tmp/tests/cuda_ops_test.log" "^test LD_LIBRARY_PATH=.*/bundle-run/lib:/machine/lib:.*$pyroot/nvidia/cu13/lib:$pyroot/nvidia/cudnn/lib:$pyroot/nvidia/nccl/lib"
check "the PyTorch peer runs under the machine's library path" has "$work/tmp/bench.log" '^peer LD_LIBRARY_PATH=/machine/lib$'

# ---- the time budget ---------------------------------------------------------------------------
finish budget
check "budget spent: exit status 0" [ "$rc" = 0 ]
check "budget spent: steps skip, saying why" has "$sum" '\| example-1gpu \| SKIP \| 0 \| no time left in its phase'
check "budget spent: no binary ran" hasnt "$calls" '^(rnn_dp|ember-run|ember-bench|cuda_ops_test|ember-gpu-info)'
finish budget-cut
check "deadline cuts a binary: exit status 0" [ "$rc" = 0 ]
check "deadline cuts a binary: a SKIP saying so, not a FAIL" \
  has "$sum" '^\| fake_hung_test \| SKIP \| [0-9.]+ \| did not finish \| cut short by the tests. deadline \(12 s\) after [0-9]+ s \|$'
check "deadline cuts a binary: it is stopped" bash -c "! kill -0 $(head -1 "$calls.pids" 2>/dev/null || echo 999999) 2>/dev/null"
check "deadline cuts a binary: the benchmarks still run" result_is "$sum" bench PASS
check "deadline cuts a binary: ... and the last case" has "$calls" '^process_group_nccl_test --gtest_filter=ProcessGroupNCCL\.Missing'

# ---- two GPUs, mpirun, the loss above ln 6 -----------------------------------------------------
finish gpu2
check "2 GPUs: a failed step makes exit status 1" [ "$rc" = 1 ]
check "2 GPUs: bench-dp over both GPUs, failing" \
  bash -c "grep -qE '^ember-bench-dp --devices cuda:0,cuda:1$' '$calls' && grep -qE '^\| bench-dp \| FAIL ' '$sum'"
check "2 GPUs: DataParallel over both GPUs" has "$calls" '^rnn_dp .*--devices cuda:0,cuda:1$'
check "2 GPUs: DDP over nccl, two ranks" has "$calls" '^ember-run --nproc-per-node 2 .*--backend nccl --batch-size 64 '
check "2 GPUs: mpirun, two ranks, backend left to the default" \
  has "$calls" '^mpirun --allow-run-as-root --oversubscribe -np 2 .*/rnn_dp .*--ddp --batch-size 64 '
check "2 GPUs: ... no --backend under mpirun" hasnt "$calls" '^mpirun .*--backend'
check "2 GPUs: mpirun step passes" result_is "$sum" example-ddp-mpirun PASS
check "loss not below ln 6: the comparison fails though the runs agree" result_is "$sum" example-compare FAIL
check "loss not below ln 6: bf16 run fails" has "$sum" '^\| example-1gpu-amp-bf16 \| FAIL \| 0 \| ran, but its loss \(1.9000\) is not below ln 6'

finish wrong-default
check "mpirun default not nccl: the step fails, naming what is missing" \
  has "$sum" '\| example-ddp-mpirun \| FAIL \| 0 \| ran, but its log does not show the nccl backend'
check "mpirun default not nccl: the step is listed once" [ "$(grep -c '^| example-ddp-mpirun ' "$sum")" = 1 ]

finish mpi-path
check "bundle, mpirun on the PATH: not used" hasnt "$calls" '^mpirun .*-np'
check "bundle, mpirun on the PATH: a SKIP saying why" \
  has "$sum" '\| example-ddp-mpirun \| SKIP \| 0 \| .*/mpirun not used: a bundle carries Open MPI'
check "no compute-sanitizer: a SKIP" has "$sum" '^\| sanitizer \| SKIP \| 0 \| compute-sanitizer is not installed'

if [ "$fails" != 0 ]; then
  echo "gpu_check_test: $fails check(s) failed; outputs under $work"
  exit 1
fi
echo "gpu_check_test: all checks passed"
