"""The command loop of a PyTorch peer that an ember benchmark drives over pipes (bench::TorchPeer).

serve(handle) prints `ready <torch version>`, then answers each command line on stdin with one
line: `threads N` (torch.set_num_threads; replies `ok <threads now>`), `quit` (replies `bye` and
returns), and anything else through handle(words), which returns the reply line, or None for an
unknown command (replied `error unknown command <line>`).
"""
import sys
import time

import torch


def serve(handle):
    print("ready", torch.__version__, flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "threads":
            torch.set_num_threads(int(cmd[1]))
            print("ok", torch.get_num_threads(), flush=True)
        elif cmd[0] == "quit":
            print("bye", flush=True)
            return
        else:
            reply = handle(cmd)
            print(reply if reply is not None else "error unknown command " + " ".join(cmd), flush=True)


def timed_ms(f):
    """Runs f once; its wall time in milliseconds, as the reply line "%.6f"."""
    t0 = time.perf_counter()
    f()
    return "%.6f" % ((time.perf_counter() - t0) * 1e3)

