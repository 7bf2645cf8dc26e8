"""Forward+backward time of mha_lib.MultiHeadAttention vs torch.nn.MultiheadAttention (float32, CPU).

The two modules hold the same weights and are timed interleaved in one run (alternating which
goes first), so machine noise hits both alike. Prints the median time of each and their ratio.

    .venv/bin/python bench/bench_mha.py [--repeats 15]
"""
import argparse
import statistics
import time

import torch
from torch import nn

from mha_lib import MultiHeadAttention

SHAPES = [(8, 128, 512, 8), (1, 1024, 1024, 16)]  # (B, T, d, h)


def step(module, x, need_weights):
    """One self-attention forward + backward, returning seconds."""
    start = time.perf_counter()
    out, weights = module(x, x, x, need_weights=need_weights)
    loss = out.sum() if weights is None else out.sum() + weights.sum()
    loss.backward()
    return time.perf_counter() - start


def compare(batch, length, width, heads, need_weights, repeats):
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(width, heads, batch_first=True)
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(batch, length, width, requires_grad=True)
    times = {"ours": [], "torch": []}
    pair = [("ours", ours), ("torch", theirs)]
    for i in range(repeats + 2):
        for name, module in (pair if i % 2 == 0 else pair[::-1]):
            seconds = step(module, x, need_weights)
            if i >= 2:  # the first two rounds warm up allocators and thread pools
                times[name].append(seconds)
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, forward+backward, "
          f"median of {args.repeats}")
    print(f"| B | T | d | h | weights | mha_lib (ms) | torch (ms) | ratio |\n|---|---|---|---|---|---|---|---|")
    for batch, length, width, heads in SHAPES:
        for need_weights in (False, True):
            t = compare(batch, length, width, heads, need_weights, args.repeats)
            print(f"| {batch} | {length} | {width} | {heads} | {'yes' if need_weights else 'no'} | "
                  f"{1e3 * t['ours']:.1f} | {1e3 * t['torch']:.1f} | {t['ours'] / t['torch']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
