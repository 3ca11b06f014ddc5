"""PyTorch side of ember-bench-loss: the same loss and norm work, driven over stdin/stdout.

Started by bench/bench_loss.cpp as `python3 bench_loss_torch.py ROWS CLASSES`. Commands, one
per line: `threads N` (torch.set_num_threads), `time CASE` (one timed run of CASE; replies with
its wall time in ms), `quit`. CASE is log_softmax (forward), log_softmax_nll (log_softmax +
nll_loss forward and backward), cross_entropy (forward and backward), clip_grad_norm (over the
word LM's parameter shapes, max_norm 0.25), clip_grad_norm_many (over 120 x [256, 256] and
120 x [256]).
"""
import sys

import torch
import torch_peer


def main():
    rows, classes = int(sys.argv[1]), int(sys.argv[2])
    torch.manual_seed(0)
    x = torch.randn(rows, classes)
    xg = x.clone().requires_grad_(True)
    target = torch.randint(0, classes, (rows,))
    shapes = [(10000, 200)] + [(800, 200), (800, 200), (800,), (800,)] * 2 + [(10000, 200), (10000,)]
    params = [torch.zeros(s, requires_grad=True) for s in shapes]
    for p in params:
        p.grad = torch.randn(p.shape)
    many_params = [torch.zeros(s, requires_grad=True) for s in [(256, 256), (256,)] * 120]
    for p in many_params:
        p.grad = torch.randn(p.shape)

    def log_softmax():
        torch.log_softmax(x, 1)

    def log_softmax_nll():
        xg.grad = None
        torch.nn.functional.nll_loss(torch.log_softmax(xg, 1), target).backward()

    def cross_entropy():
        xg.grad = None
        torch.nn.functional.cross_entropy(xg, target).backward()

    def clip():
        torch.nn.utils.clip_grad_norm_(params, 0.25)

    def clip_many():
        torch.nn.utils.clip_grad_norm_(many_params, 0.25)

    cases = {"log_softmax": log_softmax, "log_softmax_nll": log_softmax_nll, "cross_entropy": cross_entropy,
             "clip_grad_norm": clip, "clip_grad_norm_many": clip_many}
    def handle(cmd):
        if cmd[0] == "time" and len(cmd) == 2 and cmd[1] in cases:
            return torch_peer.timed_ms(cases[cmd[1]])
        return None

    torch_peer.serve(handle)

if __name__ == "__main__":
    main()
