"""torchft side of ember-bench-ft: the same kill against torchft's fault-tolerant DDP over Gloo.

Started by bench/bench_ft.cpp as `python bench_ft_torchft.py [--ranks N] [--steps S] [--kill-at K]
[--timeout-s T]` with the peer environment's python (scripts/setup_peers.sh). It hosts a torchft
LighthouseServer, starts N replica groups of one process each (this script with --worker I), and
trains the rnn_dp model (Embedding(257, 32) -> packed LSTM(32, 128) -> the mean over each word's
positions -> dropout 0.3 -> Linear(128, 6), cross_entropy, Adam, one intra-op thread) on a global
batch of 96 random words of 2..24 bytes split over the live replica groups, as ember-bench-ft's
rnn_dp runs do. Replica group 1 raises SIGKILL on itself in the backward of step K, printing the
time first. Every committed step prints `commit step=S slot=I t_ms=T` (wall-clock ms). Output, one
line each, as ember's benchmarks print them (the caller relays them):
  torchft_step_ms                  slot 0's median commit interval before the kill
  torchft_kill_to_next_commit_ms   the kill -> slot 0's commit of step K, minus one step
  # torchft V, ...                 the installed torchft's version and the lighthouse settings
On a failure the script prints `# torchft peer: <reason>` and exits 1.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from datetime import timedelta

GLOBAL_BATCH = 96
# The lighthouse as torchft's own examples start it (torchft_lighthouse --min_replicas 1
# --quorum_tick_ms 100 --join_timeout_ms 10000); its heartbeat timeout is torchft's default.
LIGHTHOUSE = {"min_replicas": 1, "quorum_tick_ms": 100, "join_timeout_ms": 10000}


def wall_ms():
    return time.time() * 1000.0


def worker(args):
    import torch
    from torch import nn
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    import torchft

    torch.set_num_threads(1)
    slot = args.worker
    store = torch.distributed.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)

    torch.manual_seed(0)  # every replica group starts from the same weights

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(257, 32, padding_idx=0)
            self.lstm = nn.LSTM(32, 128)
            self.drop = nn.Dropout(0.3)
            self.fc = nn.Linear(128, 6)

        def forward(self, padded, lengths):
            packed = pack_padded_sequence(self.emb(padded), lengths, enforce_sorted=False)
            out, _ = self.lstm(packed)
            unpacked, _ = pad_packed_sequence(out, total_length=padded.size(0))
            pooled = unpacked.sum(0) / lengths.unsqueeze(1).to(unpacked.dtype)
            return self.fc(self.drop(pooled))

    model = Net()
    adam = torch.optim.Adam(model.parameters(), lr=1e-3)

    def state_dict():
        return {"model": model.state_dict(), "optim": adam.state_dict()}

    def load_state_dict(sd):
        model.load_state_dict(sd["model"])
        adam.load_state_dict(sd["optim"])

    timeout = timedelta(seconds=args.timeout_s)
    manager = torchft.Manager(pg=torchft.ProcessGroupGloo(timeout=timeout), min_replica_size=1,
                              load_state_dict=load_state_dict, state_dict=state_dict, rank=0, world_size=1,
                              store_addr="127.0.0.1", store_port=store.port, lighthouse_addr=args.lighthouse,
                              replica_id=f"slot{slot}", timeout=timeout)
    params = list(model.parameters())

    def all_reduce_gradients():
        # One flat buffer through Manager.allreduce (the mean over the quorum), the gradient sync
        # torchft.DistributedDataParallel makes; that wrapper (0.2.0) is not used because its comm
        # hook fails an assertion on the survivors once a peer's all_reduce errored.
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        manager.allreduce(flat).wait()
        at = 0
        for p in params:
            p.grad.copy_(flat[at:at + p.numel()].view_as(p.grad))
            at += p.numel()
    dies = slot == 1 and args.kill_at >= 0

    def die(grad):
        if dies and manager.current_step() == args.kill_at:
            print(f"fault: slot 1 raising SIGKILL at step {args.kill_at} (backward) at {wall_ms():.3f} ms",
                  flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return grad

    model.fc.weight.register_hook(die)
    loss_fn = nn.CrossEntropyLoss()
    while manager.current_step() < args.steps:
        manager.start_quorum()
        adam.zero_grad()
        step = manager.current_step()
        # This group's share of the step's global batch: a function of the step and the quorum.
        n = max(1, GLOBAL_BATCH // max(1, manager.num_participants()))
        g = torch.Generator().manual_seed(step * 1000 + (manager.participating_rank() or 0))
        lengths = torch.randint(2, 25, (n,), generator=g)
        padded = torch.randint(1, 257, (24, n), generator=g)
        padded = padded * (torch.arange(24).unsqueeze(1) < lengths.unsqueeze(0))
        labels = torch.randint(0, 6, (n,), generator=g)
        loss = loss_fn(model(padded, lengths), labels)
        loss.backward()
        all_reduce_gradients()
        if manager.should_commit():
            adam.step()
            print(f"commit step={step} slot={slot} t_ms={wall_ms():.3f}", flush=True)
    manager.shutdown(wait=False)
    return 0


def parent(args):
    from importlib.metadata import version
    from torchft.coordination import LighthouseServer

    lighthouse = LighthouseServer(bind="[::]:0", **LIGHTHOUSE)
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    cmd = [sys.executable, os.path.abspath(__file__), "--lighthouse", lighthouse.address(), "--steps",
           str(args.steps), "--kill-at", str(args.kill_at), "--timeout-s", str(args.timeout_s), "--worker"]
    procs = [subprocess.Popen(cmd + [str(i)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(args.ranks)]
    outputs = []
    deadline = time.time() + args.bound_s
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            print(f"# torchft peer: a replica group did not finish within {args.bound_s} s", flush=True)
        outputs.append(out)
    lighthouse.shutdown()
    text = "".join(outputs)
    if args.log:
        with open(args.log, "w") as f:
            f.write(text)
    commits = [(int(m[1]), int(m[2]), float(m[3]))
               for m in re.finditer(r"commit step=(\d+) slot=(\d+) t_ms=([0-9.]+)", text)]
    slot0 = {s: t for s, slot, t in commits if slot == 0}
    killed = re.search(r"raising SIGKILL at step \d+ \(backward\) at ([0-9.]+) ms", text)
    before = [slot0[s + 1] - slot0[s] for s in sorted(slot0) if s + 1 in slot0 and s + 1 < args.kill_at]
    print(f"# torchft {version('torchft')}, {args.ranks} replica groups of 1 rank, Gloo, lighthouse "
          f"{LIGHTHOUSE}, Manager timeout {args.timeout_s} s", flush=True)
    if not before or killed is None or args.kill_at not in slot0:
        tail = " | ".join(text.strip().splitlines()[-6:])
        print(f"# torchft peer: no commit of step {args.kill_at} after the kill was seen: {tail}", flush=True)
        return 1
    step_ms = statistics.median(before)
    print(f"torchft_step_ms {step_ms:.3f} ms")
    print(f"torchft_kill_to_next_commit_ms {slot0[args.kill_at] - float(killed[1]) - step_ms:.1f} ms", flush=True)
    return 0


def main():
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("--ranks", type=int, default=4)
    a.add_argument("--steps", type=int, default=40)
    a.add_argument("--kill-at", type=int, default=20)
    a.add_argument("--timeout-s", type=int, default=10)
    a.add_argument("--bound-s", type=int, default=240)
    a.add_argument("--log", help="write the replica groups' output to this file")
    a.add_argument("--lighthouse")
    a.add_argument("--worker", type=int)
    args = a.parse_args()
    return worker(args) if args.worker is not None else parent(args)


if __name__ == "__main__":
    sys.exit(main())
