"""PyTorch side of ember-bench-lstm: the same training step, driven over stdin/stdout.

Started by bench/bench_lstm.cpp as `python3 bench_lstm_torch.py <comma-separated lengths> [device]`
(device: cpu, the default, or cuda:N; a step on CUDA ends with torch.cuda.synchronize(), and
without a CUDA torch the script prints `unavailable <reason>` instead of `ready` and exits 1).
Commands, one per line: `threads N` (torch.set_num_threads), `warmup K` (K untimed steps),
`step` (one timed step; replies with its wall time in ms), `quit`. Every command is answered
with one line so the caller can alternate ember and torch steps on a loaded host.
"""
import sys

import torch
import torch_peer
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

VOCAB, EMBED, HIDDEN, LAYERS, T = 64, 32, 256, 2, 50


def main():
    lengths = torch.tensor([int(v) for v in sys.argv[1].split(",")], dtype=torch.int64)
    device = torch.device(sys.argv[2] if len(sys.argv) > 2 else "cpu")
    if device.type == "cuda" and not torch.cuda.is_available():
        print("unavailable torch", torch.__version__, "has no CUDA device", flush=True)
        sys.exit(1)
    batch = lengths.numel()
    torch.manual_seed(0)
    emb = torch.nn.Embedding(VOCAB, EMBED).to(device)
    lstm = torch.nn.LSTM(EMBED, HIDDEN, num_layers=LAYERS, batch_first=True).to(device)
    lin = torch.nn.Linear(HIDDEN, VOCAB).to(device)
    params = list(emb.parameters()) + list(lstm.parameters()) + list(lin.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    tokens = torch.randint(0, VOCAB, (batch, T))
    targets = torch.randint(0, VOCAB, (batch, T))
    targets[torch.arange(T)[None, :] >= lengths[:, None]] = -100
    tokens, targets = tokens.to(device), targets.to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        x = emb(tokens)
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = lstm(packed)
        y, _ = pad_packed_sequence(out, batch_first=True, total_length=T)
        logits = lin(y)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=-100)
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def handle(cmd):
        if cmd[0] == "warmup":
            for _ in range(int(cmd[1])):
                step()
            return "ok"
        if cmd[0] == "step":
            return torch_peer.timed_ms(step)
        return None

    torch_peer.serve(handle)

if __name__ == "__main__":
    main()
