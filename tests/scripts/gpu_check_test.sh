#!/usr/bin/env bash
# gpu_check_test.sh SRC_DIR WORK_DIR -- scripts/gpu_check.sh's logic on a machine without a GPU:
# both scripts parse (bash -n); with no GPU every step is a SKIP and the exit status 0; then a
# fake bundle (stand-in binaries that log their arguments, a fake nvidia-smi, mpirun and
# compute-sanitizer) with one GPU and with two: which steps run with which arguments, which skip
# and why, a failing step making the exit status 1, a DDP run under mpirun that does not report
# the nccl backend failing, the time budget, and the benchmarks' figures in summary.md; on a
# borrowed machine ($OUT set) the three files that come back and nothing big under $OUT; the
# nvidia/ library folders of the machine's Python on the loader's path; the PyTorch peer under
# the machine's own library path; a hanging test binary not stopping the next; an mpirun found
# on the PATH not used from a bundle.
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
row() { grep -E "^\| $2 \| " "$1" | head -1; }  # row SUMMARY STEP: the step's table row
result_is() { [[ "$(row "$1" "$2")" == "| $2 | $3 |"* ]] || { echo "     $2: $(row "$1" "$2")"; false; }; }

check "gpu_check.sh parses" bash -n "$src/scripts/gpu_check.sh"
check "gpu_bundle.sh parses" bash -n "$src/scripts/gpu_bundle.sh"

# ---- stand-ins -------------------------------------------------------------------------------
fake=$work/fake
mkdir -p "$fake/path" "$fake/bin"
cat >"$fake/path/nvidia-smi" <<'SH'
#!/usr/bin/env bash
[ "${FAKE_GPUS:-0}" -gt 0 ] || { echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"; exit 9; }
for i in $(seq 0 $((FAKE_GPUS - 1))); do echo "GPU $i: NVIDIA H200 (UUID: GPU-fake-$i)"; done
SH
# Every stand-in logs "name args" to $FAKE_CALLS and fails when "name args" matches $FAKE_FAIL.
preamble='echo "$(basename "$0") $*" >>"$FAKE_CALLS"
if [ -n "${FAKE_FAIL:-}" ] && [[ "$(basename "$0") $*" =~ $FAKE_FAIL ]]; then echo "failing on purpose"; exit 3; fi'
cat >"$fake/bin/rnn_dp" <<SH
#!/usr/bin/env bash
$preamble
backend=""; ddp=0; prev=""
for a in "\$@"; do
  [ "\$prev" = --backend ] && backend=\$a
  [ "\$prev" = --checkpoint-dir ] && mkdir -p "\$a"
  [ "\$a" = --ddp ] && ddp=1
  prev=\$a
done
[ "\$ddp" = 1 ] && echo "rnn_dp: rank \${LOCAL_RANK:-0} of 1 (local rank 0, pid \$\$), \${backend:-\${FAKE_DEFAULT_BACKEND:-nccl}} backend"
echo "epoch 1 done"
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
cat >"$fake/path/compute-sanitizer" <<SH
#!/usr/bin/env bash
$preamble
shift 4
exec "\$@"
SH
for b in ember-bench-lstm ember-bench-allreduce ember-bench-dp fake_gpu_test; do
  printf '#!/usr/bin/env bash\n%s\necho "%s_figure 1.5 GB/s"\n' "$preamble" "${b//-/_}" >"$fake/bin/$b"
done
echo 'echo "# torch_gpu_lstm skipped: python3 has no CUDA torch"' >>"$fake/bin/ember-bench-lstm"
# The PyTorch peer's library path, as ember-bench-lstm's child sees it.
cat >>"$fake/bin/ember-bench-lstm" <<'SH'
"$EMBER_BENCH_PYTHON" -c 'import os; print("peer LD_LIBRARY_PATH=" + os.environ.get("LD_LIBRARY_PATH", "<unset>"))'
SH
echo 'echo "test LD_LIBRARY_PATH=$LD_LIBRARY_PATH"' >>"$fake/bin/fake_gpu_test"
# A test binary that hangs when FAKE_HANG is set (listed before fake_gpu_test).
printf '#!/usr/bin/env bash\n%s\n[ -n "${FAKE_HANG:-}" ] && { echo $$ >>"$FAKE_CALLS.pids"; exec sleep 30; }\necho hung_test done\n' "$preamble" >"$fake/bin/fake_hung_test"
chmod +x "$fake/path"/* "$fake/bin"/*

# The bundle, laid out as scripts/gpu_bundle.sh makes it.
bundle=$work/bundle
mkdir -p "$bundle" "$fake/payload/bin" "$fake/payload/lib" "$fake/payload/dict" "$fake/payload/bench"
cp "$fake/bin"/* "$fake/payload/bin/"
echo "hello" >"$fake/payload/dict/words"
touch "$fake/payload/bench/bench_lstm_torch.py"
tar -C "$fake/payload" -cJf "$bundle/payload.tar.xz" bin lib dict bench
echo "ember test-bundle, CUDA architectures 90" >"$bundle/BUNDLE"
printf 'fake_hung_test\nfake_gpu_test\n' >"$bundle/gpu_tests.txt"
# The machine's Python packages: nvidia/ folders holding the CUDA libraries, as the CUDA 13 pip
# packages lay them out (found through PYTHONPATH by the real python3 here).
pyroot=$work/site-packages
mkdir -p "$pyroot/nvidia/cu13/lib" "$pyroot/nvidia/cudnn/lib" "$pyroot/nvidia/nccl/lib" "$pyroot/nvidia/cudnn/include"
touch "$pyroot/nvidia/cu13/lib/libcublas.so.13" "$pyroot/nvidia/cudnn/lib/libcudnn_adv.so.9" \
  "$pyroot/nvidia/nccl/lib/libnccl.so.2" "$pyroot/nvidia/cudnn/include/cudnn.h"
cp "$src/scripts/gpu_check.sh" "$bundle/gpu_check.sh"

# run_check NAME [VAR=VALUE...]: runs the bundle's gpu_check.sh into $work/NAME; sets rc, sum, calls.
run_check() {
  local name=$1
  shift
  calls=$work/$name.calls
  : >"$calls"
  env PATH="$fake/path:$PATH" FAKE_CALLS="$calls" EMBER_GPU_CHECK_MPIRUN="" EMBER_GPU_CHECK_SANITIZER="" "$@" \
    bash "$bundle/gpu_check.sh" "$work/$name" >"$work/$name.out" 2>&1
  rc=$?
  sum=$work/$name/summary.md
}

# ---- no GPU ------------------------------------------------------------------------------------
run_check nogpu FAKE_GPUS=0
check "no GPU: exit status 0" [ "$rc" = 0 ]
for step in build gpu-tests example-1gpu example-resume-cpu example-1gpu-amp-bf16 example-dp example-dp-all-gpus \
  example-ddp-nccl example-ddp-mpirun example-ddp-tcp-cuda bench bench-allreduce bench-dp sanitizer; do
  check "no GPU: $step is a SKIP" result_is "$sum" "$step" SKIP
done
check "no GPU: nothing ran" [ ! -s "$calls" ]

# ---- one GPU, no mpirun, no compute-sanitizer ---------------------------------------------------
run_check gpu1 FAKE_GPUS=1
check "1 GPU: exit status 0" [ "$rc" = 0 ]
check "1 GPU: summary names the GPU" has "$sum" 'GPUs: 1 NVIDIA H200'
for step in gpu-tests example-1gpu example-resume-cpu example-1gpu-amp-bf16 example-dp example-ddp-nccl \
  example-ddp-tcp-cuda bench bench-allreduce; do
  check "1 GPU: $step passes" result_is "$sum" "$step" PASS
done
check "1 GPU: build skipped (prebuilt bundle)" result_is "$sum" build SKIP
check "1 GPU: DataParallel over all GPUs skipped with one" result_is "$sum" example-dp-all-gpus SKIP
check "1 GPU: mpirun step skipped, saying why" has "$sum" '\| example-ddp-mpirun \| SKIP \| 0 \| no mpirun'
check "1 GPU: bench-dp skipped" result_is "$sum" bench-dp SKIP
check "1 GPU: sanitizer skipped" result_is "$sum" sanitizer SKIP
check "1 GPU: the GPU test binary ran" has "$calls" '^fake_gpu_test --gtest_output=xml:'
check "1 GPU: example on cuda:0 from the bundle's word lists" \
  has "$calls" '^rnn_dp --epochs 1 --limit 2000 --dict-dir [^ ]*/bundle-run/dict .*--devices cuda:0 --single-device$'
check "1 GPU: the GPU checkpoint resumes on cpu:0" \
  has "$calls" "^rnn_dp --epochs 2 --limit 2000 .*--checkpoint-dir $work/gpu1/example-1gpu-checkpoints .*--resume --devices cpu:0"
check "1 GPU: bf16 autocast run" has "$calls" '^rnn_dp .*--devices cuda:0 --single-device --amp bf16$'
check "1 GPU: DataParallel on cuda:0,cpu:0" has "$calls" '^rnn_dp .*--devices cuda:0,cpu:0$'
check "1 GPU: DDP over nccl, one rank" has "$calls" '^ember-run --nproc-per-node 1 .*/rnn_dp .*--ddp --backend nccl --batch-size 32 '
check "1 GPU: DDP over tcp, two ranks" has "$calls" '^ember-run --nproc-per-node 2 .*/rnn_dp .*--ddp --backend tcp '
check "1 GPU: allreduce benchmark over nccl" has "$calls" '^ember-bench-allreduce --backend nccl$'
check "1 GPU: LSTM benchmark on cuda:0" has "$calls" '^ember-bench-lstm --device cuda:0$'
check "1 GPU: benchmark figures in the summary" has "$sum" '^    ember_bench_allreduce_figure 1.5 GB/s$'
check "1 GPU: a benchmark's skip line in the summary" has "$sum" '^    # torch_gpu_lstm skipped: python3 has no CUDA torch$'
check "1 GPU: the benchmark's command in the summary" has "$sum" '^benchmark ember-bench-allreduce --backend nccl \(name value unit\):$'
check "1 GPU: bench-dp not run" hasnt "$calls" '^ember-bench-dp'
all_under_out() { ! grep -E '^rnn_dp ' "$calls" | grep -qv -- "--checkpoint-dir $work/gpu1/.* --metrics $work/gpu1/"; }
check "1 GPU: every example writes its checkpoints and metrics under OUT_DIR" all_under_out

# ---- two GPUs, mpirun and compute-sanitizer present, one benchmark failing -----------------------
run_check gpu2 FAKE_GPUS=2 EMBER_GPU_CHECK_MPIRUN="$fake/path/mpirun" \
  EMBER_GPU_CHECK_SANITIZER="$fake/path/compute-sanitizer" FAKE_FAIL='^ember-bench-dp '
check "2 GPUs: a failed step makes exit status 1" [ "$rc" = 1 ]
check "2 GPUs: bench-dp failed" result_is "$sum" bench-dp FAIL
check "2 GPUs: bench-dp over both GPUs" has "$calls" '^ember-bench-dp --devices cuda:0,cuda:1$'
check "2 GPUs: DataParallel over both GPUs" result_is "$sum" example-dp-all-gpus PASS
check "2 GPUs: ... with --devices cuda:0,cuda:1" has "$calls" '^rnn_dp .*--devices cuda:0,cuda:1$'
check "2 GPUs: DDP over nccl, two ranks" has "$calls" '^ember-run --nproc-per-node 2 .*--backend nccl --batch-size 64 '
check "2 GPUs: mpirun, two ranks, backend left to the default" \
  has "$calls" '^mpirun --allow-run-as-root --oversubscribe -np 2 .*/rnn_dp .*--ddp --batch-size 64 '
check "2 GPUs: ... no --backend under mpirun" hasnt "$calls" '^mpirun .*--backend'
check "2 GPUs: mpirun step passes" result_is "$sum" example-ddp-mpirun PASS
check "2 GPUs: sanitizer runs the GPU tests" has "$calls" '^compute-sanitizer --tool memcheck --error-exitcode 1 .*/fake_gpu_test$'
check "2 GPUs: sanitizer passes" result_is "$sum" sanitizer PASS
check "2 GPUs: the other steps pass" result_is "$sum" example-ddp-tcp-cuda PASS

# ---- a DDP run under mpirun that picks another backend fails -------------------------------------
run_check wrong-default FAKE_GPUS=1 EMBER_GPU_CHECK_MPIRUN="$fake/path/mpirun" FAKE_DEFAULT_BACKEND=tcp
check "mpirun default not nccl: exit status 1" [ "$rc" = 1 ]
check "mpirun default not nccl: the step fails, naming what is missing" \
  has "$sum" '\| example-ddp-mpirun \| FAIL \| 0 \| ran, but its log does not show the nccl backend'
check "mpirun default not nccl: the step is listed once" [ "$(grep -c '^| example-ddp-mpirun ' "$sum")" = 1 ]

# ---- the time budget ---------------------------------------------------------------------------
run_check budget FAKE_GPUS=1 EMBER_GPU_CHECK_BUDGET_S=3
check "budget spent: exit status 0" [ "$rc" = 0 ]
check "budget spent: steps skip, saying why" has "$sum" '\| gpu-tests \| SKIP \| 0 \| time budget spent'
check "budget spent: nothing ran" hasnt "$calls" '^(rnn_dp|ember-run|ember-bench|fake_gpu_test)'
run_check budget-cut FAKE_GPUS=1 FAKE_HANG=1 EMBER_GPU_CHECK_TEST_LIMIT=60 EMBER_GPU_CHECK_BUDGET_S=7
check "budget cuts a step: exit status 0" [ "$rc" = 0 ]
check "budget cuts a step: a SKIP saying so, not a FAIL" \
  has "$sum" '\| gpu-tests \| SKIP \| [0-9]+ \| cut short by the time budget after [0-9]+ s \(its own limit is 240 s'
check "budget cuts a step: the rest skip" result_is "$sum" example-1gpu SKIP
check "budget cuts a step: the test binary running then is stopped too" \
  bash -c "! kill -0 $(head -1 "$calls.pids") 2>/dev/null"

# ---- on a borrowed machine: $OUT set, no OUT_DIR ------------------------------------------------
devout=$work/devout
mkdir -p "$devout" "$work/tmp"
calls=$work/devout.calls
: >"$calls"
env PATH="$fake/path:$PATH" FAKE_CALLS="$calls" EMBER_GPU_CHECK_MPIRUN="" EMBER_GPU_CHECK_SANITIZER="" FAKE_GPUS=1 \
  OUT="$devout" TMPDIR="$work/tmp" PYTHONPATH="$pyroot" LD_LIBRARY_PATH=/machine/lib FAKE_FAIL='^rnn_dp .*--amp' \
  bash "$bundle/gpu_check.sh" >"$work/devout.out" 2>&1
rc=$?
check "\$OUT: exit status 1 (a step failed)" [ "$rc" = 1 ]
check "\$OUT: exactly the three files come back" \
  [ "$(cd "$devout" && find . -mindepth 1 | sort | paste -sd' ')" = "./gpu-check-failed.log ./gpu-check-logs.tar.gz ./gpu-check-summary.md" ]
check "\$OUT: the summary has the steps" result_is "$devout/gpu-check-summary.md" example-1gpu PASS
check "\$OUT: ... and the failed one" result_is "$devout/gpu-check-summary.md" example-1gpu-amp-bf16 FAIL
check "\$OUT: the failed step named" has "$devout/gpu-check-failed.log" '^==== example-1gpu-amp-bf16: \| example-1gpu-amp-bf16 \| FAIL'
check "\$OUT: ... with its log's last lines" has "$devout/gpu-check-failed.log" '^failing on purpose$'
check "\$OUT: a passed step is not in the failures" hasnt "$devout/gpu-check-failed.log" '^==== example-1gpu:'
check "\$OUT: every log in the archive" has <(tar -tzf "$devout/gpu-check-logs.tar.gz") '^\./gpu-tests\.log$'
check "\$OUT: ... without checkpoints" hasnt <(tar -tzf "$devout/gpu-check-logs.tar.gz") 'checkpoints'
check "\$OUT: the bundle is unpacked outside \$OUT" has "$calls" "^rnn_dp .*--dict-dir $work/tmp/[^ ]*/bundle-run/dict "
check "\$OUT: ... and removed at exit" [ -z "$(find "$work/tmp" -name bundle-run)" ]
check "\$OUT: the checkpoints are outside \$OUT" hasnt "$calls" "--checkpoint-dir $devout"
tar -xzf "$devout/gpu-check-logs.tar.gz" -C "$work/tmp" ./gpu-tests.log ./bench.log ./libraries.log 2>/dev/null
check "nvidia/ library folders on the loader's path" \
  has "$work/tmp/gpu-tests.log" "^test LD_LIBRARY_PATH=.*/bundle-run/lib:/machine/lib:.*$pyroot/nvidia/cu13/lib:$pyroot/nvidia/cudnn/lib:$pyroot/nvidia/nccl/lib"
check "the PyTorch peer runs under the machine's library path" has "$work/tmp/bench.log" '^peer LD_LIBRARY_PATH=/machine/lib$'

# ---- a hanging test binary; an mpirun on the PATH of a bundle ---------------------------------
run_check hang FAKE_GPUS=1 FAKE_HANG=1 EMBER_GPU_CHECK_TEST_LIMIT=1
check "hanging test: gpu-tests fails" result_is "$sum" gpu-tests FAIL
check "hanging test: the next test binary still ran" has "$calls" '^fake_gpu_test --gtest_output=xml:'
check "hanging test: cut at its own limit, not the step's" [ "$(row "$sum" gpu-tests | cut -d'|' -f4 | tr -d ' ')" -lt 30 ]
calls=$work/mpi-path.calls
: >"$calls"
env -u EMBER_GPU_CHECK_MPIRUN PATH="$fake/path:$PATH" FAKE_CALLS="$calls" EMBER_GPU_CHECK_SANITIZER="" FAKE_GPUS=1 \
  bash "$bundle/gpu_check.sh" "$work/mpi-path" >"$work/mpi-path.out" 2>&1
check "bundle, mpirun on the PATH: not used" hasnt "$calls" '^mpirun .*-np'
check "bundle, mpirun on the PATH: a SKIP saying why" \
  has "$work/mpi-path/summary.md" '\| example-ddp-mpirun \| SKIP \| 0 \| .*/mpirun not used: a bundle carries Open MPI'

if [ "$fails" != 0 ]; then
  echo "gpu_check_test: $fails check(s) failed; outputs under $work"
  exit 1
fi
echo "gpu_check_test: all checks passed"
