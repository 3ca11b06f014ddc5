"""PyTorch peer of ember-bench-store: the rendezvous of N clients on PyTorch's TCPStore.

Started by bench/bench_store.cpp as `python bench_store_torch.py <N> <processes> <timeout s>`.
The server is torch.distributed.TCPStore(is_master=True, use_libuv=True) in this process; the
clients are TCPStore connections spread over <processes> spawned processes, each emulating its
clients phase by phase, the pattern of Note [Store rendezvous pattern] in bench_store.cpp:
set "rank/<i>"; wait for every rank's key, get the two ring neighbours'; add("barrier", 1), the
client that brings it to N sets "barrier/done", every client waits for it. The clock runs from
telling the processes to go (each has imported torch and said so) to the last one reporting.
Prints `torch_store_rendezvous_ms <ms>` and `torch <version>`.
"""
import ctypes
import datetime
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def client_main(port, first, last, n, timeout_s, ready, go, done):
    try:  # PR_SET_PDEATHSIG = 1, SIGKILL = 9: die with this script
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 9, 0, 0, 0)
    except OSError:
        pass
    timeout = datetime.timedelta(seconds=timeout_s)
    ready.put(1)
    go.get()
    address = b"a" * 32
    clients = []
    for i in range(first, last):
        s = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timeout)
        s.set(f"rank/{i}", address)
        clients.append(s)
    keys = [f"rank/{i}" for i in range(n)]
    for i, s in zip(range(first, last), clients):
        s.wait(keys)
        for peer in ((i + n - 1) % n, (i + 1) % n):
            if len(s.get(f"rank/{peer}")) != len(address):
                raise RuntimeError("wrong value")
    for s in clients:
        if s.add("barrier", 1) == n:
            s.set("barrier/done", b"1")
    for s in clients:
        s.wait(["barrier/done"])
    done.put(last - first)


def main():
    n, procs, timeout_s = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    timeout = datetime.timedelta(seconds=timeout_s)
    try:
        server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, use_libuv=True,
                               timeout=timeout)
    except TypeError:  # PyTorch before 2.2 has no libuv server: its one server
        server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timeout)
    ctx = mp.get_context("spawn")
    ready, go, done = ctx.Queue(), ctx.Queue(), ctx.Queue()
    ps = [ctx.Process(target=client_main,
                      args=(server.port, n * p // procs, n * (p + 1) // procs, n, timeout_s, ready, go, done))
          for p in range(procs)]
    for p in ps:
        p.start()
    for _ in ps:  # every process has imported torch
        ready.get(timeout=timeout_s)
    t0 = time.perf_counter()
    for _ in ps:
        go.put(1)
    total = 0
    for _ in ps:
        total += done.get(timeout=timeout_s)
    ms = (time.perf_counter() - t0) * 1000.0
    for p in ps:
        p.join(timeout=timeout_s)
    if total != n or any(p.exitcode != 0 for p in ps):
        print(f"rendezvous failed: {total} of {n} clients", flush=True)
        return 1
    print(f"torch_store_rendezvous_ms {ms:.2f}", flush=True)
    print(f"torch {torch.__version__}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
