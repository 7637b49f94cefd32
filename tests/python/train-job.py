# SPDX-License-Identifier: LGPL-2.1-or-later
"""A data-parallel training job (one rank of it): PyTorch DDP over gloo
(CPU), a DataLoader with worker processes whose __getitem__ does its data
work in Python (augment), and train_step doing forward, backward (DDP's
gradient all-reduce) and the optimizer step. Started by launch-ranks.py,
which sets RANK, WORLD_SIZE, MASTER_ADDR, ... as torchrun does.

train-job.py [--seconds S] [--workers N] [--slow-rank R] [--fail-rank R]:
trains for S seconds of wall time (the ranks agree when to stop);
--slow-rank: that rank's data path does extra work (slow_augment), so it
is the straggler; --fail-rank: that rank exits with status 3 at the end,
after the others. Prints "steps N" and, with --steps-file, writes the
steps per second there (bench/overhead's training row)."""

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset


def augment(x):
    acc = 0
    for i in range(1500):
        acc = (acc * 31 + i) & 0xFFFF
    return x * (1 + acc % 3)


def slow_augment(x):
    acc = 0
    for i in range(6000):
        acc = (acc * 17 + i) & 0xFFFF
    return x + (acc % 2)


class Synthetic(Dataset):
    def __init__(self, slow):
        self.slow = slow

    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        x = augment(torch.randn(32))
        if self.slow:
            x = slow_augment(x)
        return x, i % 4


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--fail-rank", type=int, default=-1)
    ap.add_argument("--steps-file")
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Synthetic(rank == a.slow_rank), batch_size=16, num_workers=a.workers,
                        persistent_workers=a.workers > 0)
    start = time.monotonic()
    end = start + a.seconds
    steps = 0
    stop = torch.zeros(1)
    for x, y in loader:
        train_step(model, opt, x, y)
        steps += 1
        # Every rank stops at the same step: the first past its time says so.
        stop[0] = 1.0 if time.monotonic() >= end else 0.0
        dist.all_reduce(stop, op=dist.ReduceOp.MAX)
        if stop[0] > 0:
            break
    elapsed = time.monotonic() - start
    print(f"rank {rank} steps {steps} in {elapsed:.2f} s", file=sys.stderr, flush=True)
    if a.steps_file and rank == 0:
        with open(a.steps_file, "w") as f:
            f.write(f"{steps / elapsed:.3f}\n")
    dist.barrier()
    dist.destroy_process_group()
    if rank == a.fail_rank:
        sys.exit(3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
