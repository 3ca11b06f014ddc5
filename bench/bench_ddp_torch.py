"""PyTorch side of ember-bench-ddp: the same LSTM tagger step under PyTorch's DDP (gloo), two ranks.

Started by bench/bench_ddp.cpp (rank 0, after ember's figures) as
`python3 bench_ddp_torch.py <comma-separated lengths> <timed steps> <warm-up steps> [<timeout s>]`.
Two spawned ranks, one intra-op thread each, each bound to its own CPU as ember's ranks are.
Each repetition times, after a barrier, one plain step on rank 0 alone, then one DDP step on
both ranks (the slower rank's time counts). Prints `torch_ddp_step_ms_1r X`,
`torch_ddp_step_ms_2r Y` (medians) and `torch <version>`.
Every wait is bounded by the timeout (default 300 s; the caller kills this script's process
group at that point, so the script gives up a little sooner and says why): the group's
rendezvous and collectives, the result queue, and the ranks' join (then they are terminated).
Each rank dies with this script (PR_SET_PDEATHSIG).
"""
import ctypes
import datetime
import queue as queue_module
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

VOCAB, EMBED, HIDDEN, LAYERS, T = 64, 32, 256, 2, 50


class Tagger(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, EMBED)
        self.lstm = torch.nn.LSTM(EMBED, HIDDEN, num_layers=LAYERS, batch_first=True)
        self.lin = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens, lengths):
        packed = pack_padded_sequence(self.emb(tokens), lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        y, _ = pad_packed_sequence(out, batch_first=True, total_length=T)
        return self.lin(y)


def die_with_parent():
    try:  # PR_SET_PDEATHSIG = 1, SIGKILL = 9
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 9, 0, 0, 0)
    except OSError:
        pass


def rank_main(rank, world, port, lengths, steps, warmup, queue, timeout_s):
    die_with_parent()
    torch.set_num_threads(1)
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=timeout_s))
    torch.manual_seed(0)
    single = Tagger()
    replica = Tagger()
    replica.load_state_dict(single.state_dict())
    ddp = torch.nn.parallel.DistributedDataParallel(replica)
    opt1 = torch.optim.Adam(single.parameters(), lr=1e-3)
    opt2 = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    batch = lengths.numel()
    g = torch.Generator().manual_seed(1000 + rank)
    tokens = torch.randint(0, VOCAB, (batch, T), generator=g)
    targets = torch.randint(0, VOCAB, (batch, T), generator=g)
    targets[torch.arange(T)[None, :] >= lengths[:, None]] = -100

    def step(model, opt):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(tokens, lengths)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=-100)
        loss.backward()
        opt.step()
        return (time.perf_counter() - t0) * 1e3

    one, two = [], []
    for i in range(warmup + steps):
        dist.barrier()
        t1 = step(single, opt1) if rank == 0 else 0.0
        dist.barrier()
        t2 = step(ddp, opt2)
        if i >= warmup:
            one.append(t1)
            two.append(t2)
    gathered = [None] * world
    dist.all_gather_object(gathered, two)
    if rank == 0:
        slower = [max(ts) for ts in zip(*gathered)]
        queue.put((statistics.median(one), statistics.median(slower)))
    dist.destroy_process_group()


def main():
    lengths = torch.tensor([int(v) for v in sys.argv[1].split(",")], dtype=torch.int64)
    steps, warmup = int(sys.argv[2]), int(sys.argv[3])
    # A little less than the caller's bound, so that this script reports and cleans up itself.
    timeout_s = float(sys.argv[4]) if len(sys.argv) > 4 else 300.0
    deadline = time.monotonic() + max(1.0, timeout_s - max(2.0, 0.05 * timeout_s))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:  # ember's rank 0 starts this script bound to one CPU: give the ranks every CPU back
        os.sched_setaffinity(0, range(os.cpu_count()))
    except OSError:
        pass
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    group_timeout_s = max(1.0, deadline - time.monotonic())
    procs = mp.spawn(rank_main, args=(2, port, lengths, steps, warmup, queue, group_timeout_s), nprocs=2, join=False)
    result = None
    try:
        result = queue.get(timeout=max(0.1, deadline - time.monotonic()))
        while not procs.join(timeout=max(0.1, deadline - time.monotonic())):
            if time.monotonic() >= deadline:
                break
    except queue_module.Empty:
        pass
    except Exception as e:  # a rank failed: mp's ProcessRaisedException names it
        print("torch DDP peer: a rank failed: %s" % e, flush=True)
    finally:
        for p in procs.processes:
            if p.is_alive():
                p.terminate()
        for p in procs.processes:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
    if result is None:
        print("torch DDP peer: no result within %.0f s; ranks terminated" % timeout_s, flush=True)
        sys.exit(1)
    m1, m2 = result
    print("torch", torch.__version__, flush=True)
    print("torch_ddp_step_ms_1r %.3f" % m1, flush=True)
    print("torch_ddp_step_ms_2r %.3f" % m2, flush=True)


if __name__ == "__main__":
    main()
