#!/usr/bin/python3
"""PyTorch side of tests/nn/parity_test.cpp.

Usage: nn_parity.py IN.safetensors OUT.safetensors

IN holds the inputs the C++ test generated (tensors named "<case>.<name>") and, in the
metadata entry "cases", a JSON list of {"name", "kind", ...options}. For each case this script
runs the same computation through PyTorch (float32) and writes outputs and gradients to OUT
as "<case>.<output>". The safetensors format is read and written with json + struct +
torch.frombuffer, so only torch is needed.
"""
import json
import sys

import torch
import torch.nn.functional as F

from safetensors_io import read_safetensors, write_safetensors


def leaf(t):
    return t.clone().requires_grad_(True)


def backward_with(out, up):
    (out * up).sum().backward()


def run_linear(c, T, R):
    x, w, b = leaf(T["x"]), leaf(T["w"]), leaf(T["b"])
    y = F.linear(x, w, b)
    backward_with(y, T["up"])
    R.update(y=y, grad_x=x.grad, grad_w=w.grad, grad_b=b.grad)


def run_embedding(c, T, R):
    w = leaf(T["w"])
    y = F.embedding(T["idx"], w, padding_idx=c["padding_idx"])
    backward_with(y, T["up"])
    R.update(y=y, grad_w=w.grad)
    # The module path too: nn.Embedding's own init zeroes the padding row; with our weights loaded
    # it must give the same output.
    m = torch.nn.Embedding(w.shape[0], w.shape[1], padding_idx=c["padding_idx"])
    with torch.no_grad():
        m.weight.copy_(T["w"])
    R.update(y_module=m(T["idx"]))


def reduction(c):
    return c.get("reduction", "mean")


def run_cross_entropy(c, T, R):
    x = leaf(T["x"])
    y = F.cross_entropy(x, T["target"], weight=T.get("weight"), ignore_index=c.get("ignore_index", -100),
                        reduction=reduction(c), label_smoothing=c.get("label_smoothing", 0.0))
    backward_with(y, T["up"])
    R.update(loss=y, grad_x=x.grad)


def run_nll_loss(c, T, R):
    x = leaf(T["x"])
    y = F.nll_loss(x, T["target"], weight=T.get("weight"), ignore_index=c.get("ignore_index", -100),
                   reduction=reduction(c))
    backward_with(y, T["up"])
    R.update(loss=y, grad_x=x.grad)


def run_mse_loss(c, T, R):
    x, t = leaf(T["x"]), leaf(T["target"])
    y = F.mse_loss(x, t, reduction=reduction(c))
    backward_with(y, T["up"])
    R.update(loss=y, grad_x=x.grad, grad_target=t.grad)


def run_bce_with_logits(c, T, R):
    x = leaf(T["x"])
    y = F.binary_cross_entropy_with_logits(x, T["target"], weight=T.get("weight"), pos_weight=T.get("pos_weight"),
                                           reduction=reduction(c))
    backward_with(y, T["up"])
    R.update(loss=y, grad_x=x.grad)


def run_layer_norm(c, T, R):
    x, w, b = leaf(T["x"]), leaf(T["w"]), leaf(T["b"])
    y = F.layer_norm(x, c["normalized_shape"], w, b, c["eps"])
    backward_with(y, T["up"])
    R.update(y=y, grad_x=x.grad, grad_w=w.grad, grad_b=b.grad)


def run_optimizer(c, T, R):
    p = leaf(T["p"])
    o = c["options"]
    if c["optimizer"] == "SGD":
        opt = torch.optim.SGD([p], lr=o["lr"], momentum=o["momentum"], dampening=o["dampening"],
                              weight_decay=o["weight_decay"], nesterov=o["nesterov"])
    elif c["optimizer"] == "Adam":
        opt = torch.optim.Adam([p], lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"],
                               weight_decay=o["weight_decay"], amsgrad=o["amsgrad"])
    else:
        opt = torch.optim.AdamW([p], lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"],
                                weight_decay=o["weight_decay"], amsgrad=o["amsgrad"])
    for k in range(c["steps"]):
        p.grad = T["grad%d" % k].clone()
        opt.step()
    R.update(p=p)
    for key, v in opt.state[p].items():
        if torch.is_tensor(v) and v.dim() > 0:
            R[key] = v


RUNNERS = {
    "linear": run_linear,
    "embedding": run_embedding,
    "cross_entropy": run_cross_entropy,
    "nll_loss": run_nll_loss,
    "mse_loss": run_mse_loss,
    "bce_with_logits": run_bce_with_logits,
    "layer_norm": run_layer_norm,
    "optimizer": run_optimizer,
}


def main():
    tensors, meta = read_safetensors(sys.argv[1])
    torch.set_num_threads(1)
    out = {}
    for c in json.loads(meta["cases"]):
        prefix = c["name"] + "."
        T = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
        R = {}
        RUNNERS[c["kind"]](c, T, R)
        for k, v in R.items():
            out[prefix + k] = v
    write_safetensors(sys.argv[2], out)


if __name__ == "__main__":
    main()
