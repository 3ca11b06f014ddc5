"""PyTorch peer of ember-bench-allreduce: torch.distributed's gloo all_reduce, 2 ranks on loopback.

Started by bench/bench_allreduce.cpp as
`python bench_allreduce_torch.py <min bytes> <max bytes> <timeout s>`.
The same sweep as ember's: float32 tensors of 4 KiB .. 64 MiB (powers of 4), the same repetition
counts, each repetition after a barrier and timed on rank 0 from the call to its return, every
element checked to be the rank count afterwards. Prints `gloo_allreduce_<size>_busbw_gbps X`
(bytes * 2(n-1)/n / median time, 10^9 bytes per second) per size and `torch <version>`.
Every wait is bounded by the timeout (the caller kills this script's process group at that
point); each rank dies with this script (PR_SET_PDEATHSIG).
"""
import ctypes
import datetime
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

KIB, MIB = 1024, 1024 * 1024


def reps_for(nbytes):  # as bench_allreduce.cpp's reps_for
    if nbytes <= 256 * KIB:
        return 200
    if nbytes <= MIB:
        return 60
    if nbytes <= 4 * MIB:
        return 30
    if nbytes <= 16 * MIB:
        return 15
    return 9


def size_name(nbytes):
    return f"{nbytes // MIB}mib" if nbytes >= MIB else f"{nbytes // KIB}kib"


def rank_main(rank, world, port, min_bytes, max_bytes, timeout_s, queue):
    try:  # PR_SET_PDEATHSIG = 1, SIGKILL = 9
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 9, 0, 0, 0)
    except OSError:
        pass
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=timeout_s))
    nbytes = 4 * KIB
    while nbytes <= 64 * MIB:
        if min_bytes <= nbytes <= max_bytes:
            t = torch.ones(nbytes // 4)
            for _ in range(3):
                dist.all_reduce(t)
            seconds = []
            for _ in range(reps_for(nbytes)):
                t.fill_(1.0)
                dist.barrier()
                start = time.perf_counter()
                dist.all_reduce(t)
                seconds.append(time.perf_counter() - start)
            if t.min().item() != world or t.max().item() != world:
                raise RuntimeError(f"gloo all_reduce of {size_name(nbytes)}: elements not all {world}")
            if rank == 0:
                busbw = nbytes / statistics.median(seconds) / 1e9 * 2 * (world - 1) / world
                queue.put(f"gloo_allreduce_{size_name(nbytes)}_busbw_gbps {busbw:.3f} GB/s")
        nbytes *= 4
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        queue.put(None)


def main():
    min_bytes, max_bytes, timeout_s = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    world = 2
    procs = [ctx.Process(target=rank_main, args=(r, world, port, min_bytes, max_bytes, timeout_s, queue))
             for r in range(world)]
    for p in procs:
        p.start()
    while True:
        line = queue.get()
        if line is None:
            break
        print(line, flush=True)
    for p in procs:
        p.join(timeout=timeout_s)
    print(f"torch {torch.__version__}", flush=True)
    return 0 if all(p.exitcode == 0 for p in procs) else 1


if __name__ == "__main__":
    sys.exit(main())
