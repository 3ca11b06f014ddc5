"""rnn_dp and word_lm with --tensorboard and --profile, read back by TensorBoard's own reader and
json: every per-step tag at every step, the epoch figures equal to the metrics file's, a trace
whose spans nest per track, and under `ember-run --nproc-per-node 2 rnn_dp --ddp` one event file
(rank 0's) and one trace holding both ranks with their DDP bucket spans.

usage: examples_observe_test.py RNN_DP WORD_LM EMBER_RUN WORK_DIR
"""
import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np
from tensorboard.backend.event_processing import event_accumulator

from checks import check, finish

rnn_dp, word_lm, ember_run, work = sys.argv[1:5]


def run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        print(p.stdout, p.stderr, file=sys.stderr)
        raise SystemExit("FAIL: %s exited %d" % (cmd[0], p.returncode))
    return p.stdout + p.stderr


def scalars(logdir):
    acc = event_accumulator.EventAccumulator(logdir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def f32(x):
    return float(np.float32(x))


def check_trace(path, ranks, what):
    trace = json.load(open(path))  # valid JSON, or this raises
    ev = trace["traceEvents"]
    spans = [e for e in ev if e["ph"] == "X"]
    named = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    check({e["pid"] for e in ev} == set(ranks), "%s: pids %s, expected %s" % (what, sorted({e["pid"] for e in ev}), ranks))
    check(all((e["pid"], e["tid"]) in named for e in spans), "%s: a span's track has no thread_name" % what)
    cats = {e["cat"] for e in spans}
    for c in ("op", "autograd", "dataloader"):
        check(c in cats, "%s: no %s spans (categories %s)" % (what, c, sorted(cats)))
    # Spans on one thread's track nest: any two are disjoint or one holds the other.
    by_track = {}
    for e in spans:
        if e["tid"] != 1000000:  # the communication track's spans end on other threads
            by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    bad = 0
    for track, s in by_track.items():
        s.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for a, b, name in s:
            while stack and stack[-1][1] <= a + 1e-3:
                stack.pop()
            if stack and b > stack[-1][1] + 1e-3:
                bad += 1
            stack.append((a, b, name))
    check(bad == 0, "%s: %d spans cross their parent instead of nesting" % (what, bad))
    return spans


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
common = ["--epochs", "2", "--limit", "200", "--workers", "1", "--progress", "none", "--batch-size", "64"]

# ---- rnn_dp under DataParallel -----------------------------------------------------------
d = os.path.join(work, "dp")
os.makedirs(d)
out = run([rnn_dp] + common + ["--tensorboard", "tb", "--profile", "trace.json", "--profile-steps", "5",
                               "--metrics", "m.jsonl", "--checkpoint-dir", "ck"], d)
metrics = [json.loads(l) for l in open(os.path.join(d, "m.jsonl"))]
s = scalars(os.path.join(d, "tb"))
steps_per_epoch = math.ceil(200 * 6 / 64)
n = 2 * steps_per_epoch
for tag in ("train/loss", "train/lr", "train/grad_norm", "memory/peak_allocated_bytes"):
    check([st for st, _ in s.get(tag, [])] == list(range(1, n + 1)), "rnn_dp %s: steps %s, expected 1..%d" % (tag, [st for st, _ in s.get(tag, [])][:5], n))
check([st for st, _ in s.get("train/samples_per_s", [])] == list(range(2, n + 1)), "rnn_dp train/samples_per_s steps")
check(all(v == f32(0.003) for _, v in s.get("train/lr", [])), "rnn_dp train/lr is not 0.003 throughout")
check(all(math.isfinite(v) and v > 0 for _, v in s.get("train/grad_norm", [])), "rnn_dp train/grad_norm not finite and positive")
check(all(v > 0 for _, v in s.get("memory/peak_allocated_bytes", [])), "rnn_dp peak bytes not positive")
check(all(0 < v < 3 for _, v in s.get("train/loss", [])), "rnn_dp train/loss out of (0, 3) for 6 classes")
for key, tag in (("loss", "epoch/loss"), ("test_acc", "epoch/test_accuracy")):
    want = [(steps_per_epoch * (i + 1), f32(m[key])) for i, m in enumerate(metrics)]
    check(s.get(tag) == want, "rnn_dp %s %s, metrics file %s" % (tag, s.get(tag), want))
spans = check_trace(os.path.join(d, "trace.json"), [0], "rnn_dp trace")
check(any(e["cat"] == "data_parallel" and e["name"] == "DataParallel.replicate" for e in spans), "rnn_dp trace: no DataParallel.replicate span")
check(re.search(r"profiled steps 2-6 into trace.json", out) is not None, "rnn_dp did not report the profiled steps: " + out[-500:])

# ---- rnn_dp --ddp on two ranks -----------------------------------------------------------
d = os.path.join(work, "ddp")
os.makedirs(d)
out = run([ember_run, "--nproc-per-node", "2", rnn_dp, "--ddp", "--threads", "1"] + common +
          ["--tensorboard", "tb", "--profile", "trace.json", "--profile-steps", "4", "--metrics", "m.jsonl",
           "--checkpoint-dir", "ck"], d)
files = glob.glob(os.path.join(d, "tb", "**", "events.out.tfevents.*"), recursive=True)
check(len(files) == 1, "rnn_dp --ddp: %d event files, expected rank 0's only" % len(files))
s = scalars(os.path.join(d, "tb"))
check([st for st, _ in s.get("train/loss", [])] == list(range(1, n + 1)), "rnn_dp --ddp train/loss steps")
spans = check_trace(os.path.join(d, "trace.json"), [0, 1], "rnn_dp --ddp trace")
param_bytes = 91942 * 4
for r in (0, 1):
    b = [e for e in spans if e["pid"] == r and e["name"] == "DDP.bucket_all_reduce"]
    check(len(b) >= 4 and all(e["tid"] == 1000000 and "bucket" in e["args"] for e in b),
          "rank %d: %d bucket spans on the communication track" % (r, len(b)))
    check(sum(e["args"]["bytes"] for e in b) == 4 * param_bytes,
          "rank %d: bucket bytes %d over 4 steps, expected 4 x %d" % (r, sum(e["args"]["bytes"] for e in b), param_bytes))
m = re.search(r"communication overlapped with computation: rank 0 ([0-9.]+)%, rank 1 ([0-9.]+)%", out)
check(m is not None and all(0 <= float(x) <= 100 for x in m.groups()), "rnn_dp --ddp overlap line: " + out[-400:])

# ---- word_lm -------------------------------------------------------------------------------
d = os.path.join(work, "word_lm")
os.makedirs(d)
run([word_lm, "--train-tokens", "12000", "--vocab-size", "500", "--emsize", "24", "--nhid", "24", "--epochs", "2",
     "--threads", "1", "--progress", "none", "--tensorboard", "tb", "--metrics", "m.jsonl", "--checkpoint-dir", "ck"], d)
metrics = [json.loads(l) for l in open(os.path.join(d, "m.jsonl"))]
s = scalars(os.path.join(d, "tb"))
steps = [st for st, _ in s.get("train/loss", [])]
check(len(steps) > 0 and steps == list(range(1, len(steps) + 1)), "word_lm train/loss steps %s" % steps[:5])
check([st for st, _ in s.get("train/tokens_per_s", [])] == steps[1:], "word_lm train/tokens_per_s steps")
for key, tag in (("val_ppl", "epoch/val_perplexity"), ("test_ppl", "epoch/test_perplexity"), ("lr", "epoch/lr")):
    got = [v for _, v in s.get(tag, [])]
    want = [f32(m[key]) for m in metrics]
    check(np.allclose(got, want, rtol=1e-6), "word_lm %s %s, metrics file %s" % (tag, got, want))

finish("examples: rnn_dp (DataParallel and 2-rank DDP) and word_lm curves read back by TensorBoard; traces nest, "
       "hold both ranks and their bucket spans")
