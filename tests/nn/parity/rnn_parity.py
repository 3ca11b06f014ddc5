#!/usr/bin/python3
"""PyTorch side of tests/nn/rnn_parity_test.cpp.

Usage: rnn_parity.py IN.safetensors OUT.safetensors

IN holds, per case, the module's parameters ("<case>.param.<name>"), the padded input "x",
the lengths, optional initial states "h0"/"c0" and the upstream gradients "gy", "gh", "gc";
the metadata entry "cases" is a JSON list of {"name", "mode", "input_size", "hidden_size",
"num_layers", "bidirectional", "batch_first", "total_length", "enforce_sorted", "has_h0"}.
For each case this script runs pack_padded_sequence -> module -> pad_packed_sequence in
float32, backpropagates sum(out * gy) + sum(h_n * gh) [+ sum(c_n * gc)] and writes the
outputs and every gradient to OUT as "<case>.<name>". Only json, struct and torch are used.
"""
import json
import sys

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from safetensors_io import read_safetensors, write_safetensors


def run_case(c, t):
    p = c["name"] + "."
    cls = {"LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU, "RNN_TANH": torch.nn.RNN, "RNN_RELU": torch.nn.RNN}[c["mode"]]
    kwargs = dict(num_layers=c["num_layers"], bidirectional=c["bidirectional"], batch_first=c["batch_first"],
                  bias=c["bias"])
    if c["mode"].startswith("RNN_"):
        kwargs["nonlinearity"] = c["mode"][4:].lower()
    m = cls(c["input_size"], c["hidden_size"], **kwargs)
    state = {k[len(p) + 6:]: v for k, v in t.items() if k.startswith(p + "param.")}
    m.load_state_dict(state, strict=True)
    x = t[p + "x"].requires_grad_(True)
    lstm = c["mode"] == "LSTM"
    hx = None
    if c["has_h0"]:
        h0 = t[p + "h0"].requires_grad_(True)
        if lstm:
            c0 = t[p + "c0"].requires_grad_(True)
            hx = (h0, c0)
        else:
            hx = h0
    packed = pack_padded_sequence(x, t[p + "lengths"], batch_first=c["batch_first"],
                                  enforce_sorted=c["enforce_sorted"])
    out, state_n = m(packed, hx)
    y, lens = pad_packed_sequence(out, batch_first=c["batch_first"], total_length=c["total_length"])
    h_n, c_n = state_n if lstm else (state_n, None)
    loss = (y * t[p + "gy"]).sum() + (h_n * t[p + "gh"]).sum()
    if lstm:
        loss = loss + (c_n * t[p + "gc"]).sum()
    loss.backward()
    res = {p + "output": y, p + "h_n": h_n, p + "lengths_out": lens, p + "grad.x": x.grad}
    if lstm:
        res[p + "c_n"] = c_n
    if c["has_h0"]:
        res[p + "grad.h0"] = hx[0].grad if lstm else hx.grad
        if lstm:
            res[p + "grad.c0"] = hx[1].grad
    for name, param in m.named_parameters():
        res[p + "grad.param." + name] = param.grad
    return res


def main():
    tensors, meta = read_safetensors(sys.argv[1])
    out = {}
    for c in json.loads(meta["cases"]):
        out.update(run_case(c, tensors))
    write_safetensors(sys.argv[2], out)


if __name__ == "__main__":
    main()
