"""Reads the event files ember's SummaryWriter wrote with TensorBoard's own reader (the
tensorboard package of scripts/tensorboard_venv.sh) and checks every tag, step and value, the
file's first event, and that a torn, corrupted or killed writer's file is read up to its last
whole record.

usage: tensorboard_reader_test.py FIXTURE WORK_DIR
"""
import glob
import json
import os
import shutil
import signal
import struct
import subprocess
import sys

import numpy as np
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

from checks import check, finish

fixture, work = sys.argv[1], sys.argv[2]


def events(path):
    return list(EventFileLoader(path).Load())


def record_offsets(data):
    """Start offsets of the records (our own walk of the framing, to know where to cut)."""
    out, at = [], 0
    while at + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, at)
        out.append(at)
        at += 12 + n + 4
    return out, at


def expected_histogram(values, bins):
    v = np.asarray(values, dtype=np.float64)
    lo, hi = v.min(), v.max()
    width = (hi - lo) / bins
    limits = [lo + width * (i + 1) for i in range(bins)]
    limits[-1] = hi
    counts = [0.0] * bins
    for x in v:
        i = int(np.searchsorted(limits, x, side="left"))
        counts[min(i, bins - 1)] += 1
    return lo, hi, float(len(v)), float(v.sum()), float((v * v).sum()), limits, counts


# ---- every tag, step and value ------------------------------------------------------------
run = os.path.join(work, "all")
shutil.rmtree(run, ignore_errors=True)
subprocess.run([fixture, "all", run], check=True)
exp = json.load(open(os.path.join(run, "expected.json")))

main = exp["file"]
evs = events(main)
check(evs[0].file_version == "brain.Event:2", "first event's file_version is %r" % evs[0].file_version)
check(not evs[0].HasField("summary"), "the first event carries a summary")

by_run = {}
for s in exp["scalars"]:
    by_run.setdefault(s["run"], []).append(s)
for name, want in by_run.items():
    d = run if name == "." else os.path.join(run, name)
    files = glob.glob(os.path.join(d, "events.out.tfevents.*"))
    check(len(files) == 1, "run %s has %d event files" % (name, len(files)))
    acc = event_accumulator.EventAccumulator(d, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = sorted({s["tag"] for s in want})
    check(sorted(acc.Tags()["scalars"]) == tags, "run %s scalar tags %s, expected %s" % (name, acc.Tags()["scalars"], tags))
    for tag in tags:
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        w = [(s["step"], float(np.float32(s["value"]))) for s in want if s["tag"] == tag]
        check(got == w, "run %s tag %s: read %s..., expected %s..." % (name, tag, got[:3], w[:3]))

acc = event_accumulator.EventAccumulator(run, size_guidance={event_accumulator.HISTOGRAMS: 0, event_accumulator.TENSORS: 0})
acc.Reload()
check(acc.Tags()["histograms"] == ["weights/fc"], "histogram tags %s" % acc.Tags()["histograms"])
hists = acc.Histograms("weights/fc")
check([h.step for h in hists] == [h["step"] for h in exp["histograms"]], "histogram steps %s" % [h.step for h in hists])
for h, want in zip(hists, exp["histograms"]):
    v = h.histogram_value
    lo, hi, num, total, sq, limits, counts = expected_histogram(want["values"], want["bins"])
    check((v.min, v.max, v.num) == (lo, hi, num), "histogram step %d min/max/num %s" % (h.step, (v.min, v.max, v.num)))
    check(abs(v.sum - total) <= 1e-9 * max(1, abs(total)) and abs(v.sum_squares - sq) <= 1e-9 * sq,
          "histogram step %d sum %r sum_squares %r, expected %r %r" % (h.step, v.sum, v.sum_squares, total, sq))
    check(np.allclose(list(v.bucket_limit), limits, rtol=0, atol=1e-12), "histogram step %d bucket limits" % h.step)
    check(list(v.bucket) == counts, "histogram step %d buckets %s, expected %s" % (h.step, list(v.bucket), counts))

# Text: the text plugin's metadata and a string tensor, as TensorBoard's text tab reads it.
check(acc.Tags()["tensors"] == ["notes"], "tensor tags %s" % acc.Tags()["tensors"])
texts = [(t.step, t.tensor_proto.string_val[0].decode()) for t in acc.Tensors("notes")]
check(texts == [(t["step"], t["text"]) for t in exp["texts"]], "texts %s" % texts)
check(acc.SummaryMetadata("notes").plugin_data.plugin_name == "text", "text's plugin is %r" % acc.SummaryMetadata("notes").plugin_data.plugin_name)
n_main = len(evs)
check(n_main == 1 + 100 + 3 + 2, "main file holds %d events" % n_main)

# ---- torn and corrupted files: read up to the last whole record ----------------------------
data = open(main, "rb").read()
offsets, end = record_offsets(data)
check(end == len(data) and len(offsets) == n_main, "framing walk: %d records, end %d of %d" % (len(offsets), end, len(data)))
cut_dir = os.path.join(work, "cut")
os.makedirs(cut_dir, exist_ok=True)
cut = os.path.join(cut_dir, os.path.basename(main))
last = offsets[-1]
for at in sorted({last + 1, last + 8, last + 11, last + 12, last + 13, (last + len(data)) // 2, len(data) - 4, len(data) - 1}):
    open(cut, "wb").write(data[:at])
    got = events(cut)
    check(len(got) == n_main - 1, "cut at byte %d of %d: %d events, expected %d" % (at, len(data), len(got), n_main - 1))
for k in (1, 10, n_main // 2, n_main - 1):
    for where, delta in (("length", 3), ("data", 14)):
        bad = bytearray(data)
        bad[offsets[k] + delta] ^= 0x40
        open(cut, "wb").write(bytes(bad))
        got = events(cut)
        check(len(got) == k, "%s of record %d corrupted: %d events, expected %d" % (where, k, len(got), k))
        check([e.step for e in got] == [e.step for e in evs[:k]], "%s of record %d corrupted: records before it changed" % (where, k))

# ---- a writer killed with SIGKILL ---------------------------------------------------------
crash_dir = os.path.join(work, "crash")
shutil.rmtree(crash_dir, ignore_errors=True)
p = subprocess.Popen([fixture, "crash", crash_dir], stdout=subprocess.PIPE, text=True)
flushed = 0
for line in p.stdout:
    flushed = int(line.split()[1])
    if flushed >= 2000:
        break
p.send_signal(signal.SIGKILL)
p.wait()
(crash_file,) = glob.glob(os.path.join(crash_dir, "events.out.tfevents.*"))
got = events(crash_file)
steps = [e.step for e in got[1:]]
check(got[0].file_version == "brain.Event:2", "killed writer's file lacks its file_version event")
check(len(steps) >= flushed, "killed writer: %d events read, %d were flushed" % (len(steps), flushed))
check(steps == list(range(len(steps))), "killed writer: steps are not 0..%d in order" % (len(steps) - 1))
# EventFileLoader hands scalars over as TensorBoard stores them: a float tensor of one value.
check(all(e.summary.value[0].tensor.float_val[0] == e.step for e in got[1:]), "killed writer: a value differs from its step")

finish("tensorboard reader: %d events of every kind, %d runs, torn/corrupted files, and a SIGKILLed writer (%d events, %d flushed) read as written"
       % (n_main, len(by_run), len(steps), flushed))
