"""PyTorch peer of ember-bench-data: the same dataset (batches of 64 int64 sequences, lengths
10-50, trivial per-sample work) padded by the same collate, through torch's DataLoader with
2 workers. Prints `torch_loader_batches_per_s_w2 <median> batches/s`, the first-batch time and
`torch <version>`."""
import argparse
import statistics
import sys
import time

try:
    import torch
    from torch.nn.utils.rnn import pad_sequence
    from torch.utils.data import DataLoader, Dataset
except ImportError as e:  # the C++ side prints that the peer is missing
    print(f"torch unavailable: {e}")
    sys.exit(2)

BATCH = 64


class VarSeq(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        length = 10 + (i * 2654435761) % 41
        return torch.full((length,), i % 1000, dtype=torch.int64)


def pad_collate(batch):
    lengths = torch.tensor([len(s) for s in batch], dtype=torch.int64)
    return pad_sequence(batch, batch_first=True, padding_value=0), lengths


def run(num_batches):
    loader = DataLoader(VarSeq(num_batches * BATCH), batch_size=BATCH, num_workers=2, collate_fn=pad_collate)
    t0 = time.perf_counter()
    n = 0
    t1 = None
    for padded, lengths in loader:
        if n == 0:
            t1 = time.perf_counter()
        n += 1
    t2 = time.perf_counter()
    assert n == num_batches, (n, num_batches)
    return (n - 1) / (t2 - t1), (t1 - t0) * 1000.0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batches", type=int, default=1000)
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args()
    torch.set_num_threads(1)
    rates, firsts = [], []
    for _ in range(a.reps):
        r, f = run(a.batches)
        rates.append(r)
        firsts.append(f)
    print(f"torch_loader_batches_per_s_w2 {statistics.median(rates):.0f} batches/s")
    print(f"torch_loader_first_batch_ms_w2 {statistics.median(firsts):.2f} ms")
    print(f"torch {torch.__version__}")


if __name__ == "__main__":
    main()
