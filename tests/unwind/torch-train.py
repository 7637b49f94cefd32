# SPDX-License-Identifier: LGPL-2.1-or-later
"""The native-unwinding-at-scale fixture: a real PyTorch training loop
(Debian's python3-torch, CPU build), run by Debian's /usr/bin/python3.11.
An MLP, mse_loss, loss.backward() and SGD: the samples land in BLAS
(sgemm_), reached from Python through libtorch_python and libtorch_cpu's
dispatcher, ATen kernels and the autograd engine, none built with frame
pointers.

torch-train.py [--seconds S]: trains for S seconds of wall time; prints
"ready <pid>" once the model is built, then "steps N" at the end.
torch-train.py --iterations N (bench/overhead's PyTorch rows): N training
steps after a warm-up, then "elapsed E cpu C" in seconds.

One intra-op thread (torch.set_num_threads(1)): the work stays on the
Python thread, so every BLAS sample has the Python frames above it."""

import os
import sys
import time

import torch


def build(width=512):
    torch.manual_seed(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 256)
    y = torch.randn(64, 10)
    return model, opt, x, y


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


def main():
    seconds, iterations = 5.0, None
    args = sys.argv[1:]
    while args:
        if args[0] == "--seconds" and len(args) > 1:
            seconds = float(args[1])
        elif args[0] == "--iterations" and len(args) > 1:
            iterations = int(args[1])
        else:
            print(f"usage: {sys.argv[0]} [--seconds S] | --iterations N", file=sys.stderr)
            return 2
        args = args[2:]
    torch.set_num_threads(1)
    model, opt, x, y = build()
    for _ in range(5):  # warm-up: the allocator, the dispatcher's caches
        train_step(model, opt, x, y)
    if iterations is not None:
        t0, c0 = time.monotonic(), time.process_time()
        for _ in range(iterations):
            train_step(model, opt, x, y)
        print(f"elapsed {time.monotonic() - t0:.6f} cpu {time.process_time() - c0:.6f}", flush=True)
        return 0
    print(f"ready {os.getpid()}", flush=True)
    steps, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        train_step(model, opt, x, y)
        steps += 1
    print(f"steps {steps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
