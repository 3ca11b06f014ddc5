#!/usr/bin/python3
"""PyTorch peer of examples/rnn_dp: the same data recipe, model, batch, optimizer and epoch
timing, for the side-by-side epoch-time comparison in docs/EXAMPLES.md.

Run with Debian's PyTorch (python3-torch), not a pyenv/venv python:

    /usr/bin/python3 examples/rnn_dp/torch_reference.py --epochs 3 --threads 2

Prints one line per epoch in the format of the rnn_dp binary:
    epoch=1 loss=0.6123 test_acc=0.8412 epoch_s=41.27 samples_per_s=2617
epoch_s is the wall time of the training pass (data loading included; the test pass and
checkpointing are not), exactly as rnn_dp measures it.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

LANGUAGES = [  # (file in /usr/share/dict, Debian package)
    ("american-english", "wamerican"),
    ("ngerman", "wngerman"),
    ("french", "wfrench"),
    ("italian", "witalian"),
    ("spanish", "wspanish"),
    ("dutch", "wdutch"),
]
WORDS_PER_LANGUAGE = 20000
MIN_BYTES, MAX_BYTES = 2, 24


def evenly_spaced(words, limit):
    n = len(words)
    return words if limit >= n else [words[i * n // limit] for i in range(limit)]


def load_words(dict_dir, limit=None):
    """The recipe (keep in step with wordlang_dataset.cpp): lines stripped; words with "'"
    dropped; kept when 2..24 bytes of UTF-8; every k-th word, k = max(1, n // 20000), the
    first 20,000 of those; word i is test when i % 10 == 0. Returns (train, test) lists of
    (bytes, label); with `limit`, `limit` train and `limit` test words per language, spread
    evenly over each split (word i * n // limit of n)."""
    train, test = [], []
    for label, (name, package) in enumerate(LANGUAGES):
        path = os.path.join(dict_dir, name)
        if not os.path.exists(path):
            sys.exit(f"torch_reference: word list {path} is missing; install Debian package {package} "
                     f"(scripts/setup.sh installs all of them)")
        with open(path, "rb") as f:
            words = [w for w in (line.strip() for line in f)
                     if b"'" not in w and MIN_BYTES <= len(w) <= MAX_BYTES]
        k = max(1, len(words) // WORDS_PER_LANGUAGE)
        chosen = words[::k][:WORDS_PER_LANGUAGE]
        tr = [(w, label) for i, w in enumerate(chosen) if i % 10 != 0]
        te = [(w, label) for i, w in enumerate(chosen) if i % 10 == 0]
        if limit is not None:
            tr, te = evenly_spaced(tr, limit), evenly_spaced(te, limit)
        train += tr
        test += te
    return train, test


class Words(torch.utils.data.Dataset):
    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        w, label = self.items[i]
        return torch.tensor(list(w), dtype=torch.long) + 1, label  # tokens = bytes + 1; 0 = padding


def make_collate(batch_first):
    def collate(samples):
        lengths = torch.tensor([len(s) for s, _ in samples], dtype=torch.long)
        padded = nn.utils.rnn.pad_sequence([s for s, _ in samples], batch_first=batch_first, padding_value=0)
        labels = torch.tensor([y for _, y in samples], dtype=torch.long)
        return padded, lengths, labels
    return collate


class MyModule(nn.Module):
    """The FAQ's module: embed -> pack -> LSTM -> unpack(total_length), then the mean over valid
    positions and a linear classifier."""

    def __init__(self, batch_first):
        super().__init__()
        self.batch_first = batch_first
        self.embedding = nn.Embedding(257, 32, padding_idx=0)
        self.lstm = nn.LSTM(32, 128, batch_first=batch_first)
        self.classifier = nn.Linear(128, len(LANGUAGES))

    def forward(self, padded, lengths):
        total_length = padded.size(1 if self.batch_first else 0)
        packed = pack_padded_sequence(self.embedding(padded), lengths, batch_first=self.batch_first,
                                      enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=self.batch_first, total_length=total_length)
        time_dim = 1 if self.batch_first else 0
        pooled = out.sum(time_dim) / lengths.unsqueeze(1).to(out.dtype)  # padding rows are zeros
        return self.classifier(pooled)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (match rnn_dp's total)")
    p.add_argument("--workers", type=int, default=0, help="DataLoader num_workers (0: in-process)")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--batch-first", choices=["true", "false"], default="true")
    p.add_argument("--dict-dir", default="/usr/share/dict")
    p.add_argument("--metrics", default=None, help="append one JSON line per epoch here")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    batch_first = a.batch_first == "true"
    train, test = load_words(a.dict_dir, a.limit)
    print(f"data: train={len(train)} test={len(test)} languages={len(LANGUAGES)}", flush=True)
    if a.limit is None:
        assert (len(train), len(test)) == (108000, 12000), (len(train), len(test))

    collate = make_collate(batch_first)
    g = torch.Generator()
    g.manual_seed(a.seed)
    train_loader = torch.utils.data.DataLoader(Words(train), batch_size=a.batch_size, shuffle=True,
                                               collate_fn=collate, num_workers=a.workers, generator=g)
    test_loader = torch.utils.data.DataLoader(Words(test), batch_size=256, collate_fn=collate)
    model = MyModule(batch_first)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    print(f"torch {torch.__version__} threads={torch.get_num_threads()} workers={a.workers} "
          f"batch_first={a.batch_first}", flush=True)

    for epoch in range(1, a.epochs + 1):
        model.train()
        total, n = 0.0, 0
        t0 = time.perf_counter()
        for padded, lengths, labels in train_loader:
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(padded, lengths), labels)
            loss.backward()
            opt.step()
            total += float(loss) * labels.numel()
            n += labels.numel()
        epoch_s = time.perf_counter() - t0
        model.eval()
        correct = 0
        with torch.no_grad():
            for padded, lengths, labels in test_loader:
                correct += int((model(padded, lengths).argmax(1) == labels).sum())
        acc = correct / len(test)
        print(f"epoch={epoch} loss={total / n:.4f} test_acc={acc:.4f} epoch_s={epoch_s:.2f} "
              f"samples_per_s={n / epoch_s:.0f}", flush=True)
        if a.metrics:
            with open(a.metrics, "a") as f:
                f.write(json.dumps({"framework": "torch", "epoch": epoch, "loss": total / n, "test_acc": acc,
                                    "epoch_s": epoch_s, "threads": a.threads, "workers": a.workers}) + "\n")


if __name__ == "__main__":
    main()
