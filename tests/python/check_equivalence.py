"""Data parallelism changes nothing but speed: N ranks with per-rank batch b and plain SGD end
with the same weights as one process with batch N*b on the same data.

How it works: run as an N-rank job. Every rank builds the same data, model and initial weights
(seeded). The distributed run: at step s, rank r trains on rows [s*N*b + r*b, s*N*b + (r+1)*b)
through ddl.torch.DistributedOptimizer, which averages the gradients (the mean over the N*b
rows, as the loss is a mean). Then rank 0 alone replays the same steps with batch N*b and a
plain optimizer and compares: every weight within 1e-5 (and the ranks' weights bitwise equal).
Each rank prints "rank R of N ok".
"""

import sys

import torch
import torch.nn.functional as F

import ddl
import ddl.torch as dt

STEPS, B, LR, TOLERANCE = 20, 8, 0.05, 1e-5


def model_and_data(n):
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.Tanh(), torch.nn.Linear(32, 5))
    x = torch.randn(STEPS * n * B, 20)
    y = torch.randint(0, 5, (STEPS * n * B,))
    return model, x, y


def train(model, optimizer, x, y, rows):
    for s in range(STEPS):
        chunk = rows(s)
        optimizer.zero_grad()
        F.cross_entropy(model(x[chunk]), y[chunk]).backward()
        optimizer.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def main():
    torch.set_num_threads(1)
    rank, n = ddl.rank(), ddl.size()
    model, x, y = model_and_data(n)
    optimizer = dt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=LR))
    ours = train(model, optimizer, x, y, lambda s: slice(s * n * B + rank * B,
                                                       s * n * B + (rank + 1) * B))
    highest = ddl.allreduce(ours.clone(), op="max")
    if not torch.equal(highest, ours):
        sys.exit(f"rank {rank}: the ranks' weights differ")
    if rank == 0:
        model, x, y = model_and_data(n)
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        alone = train(model, optimizer, x, y, lambda s: slice(s * n * B, (s + 1) * n * B))
        diff = (alone - ours).abs().max().item()
        print(f"{n} ranks x batch {B} vs 1 process x batch {n * B}, {STEPS} SGD steps: "
              f"max weight difference {diff:.3g}", flush=True)
        ok = diff <= TOLERANCE
    else:
        ok = True
    verdict = ddl.allreduce(torch.tensor([1 if ok else 0], dtype=torch.int32), op="min")
    if verdict.item() != 1:
        sys.exit(f"rank {rank}: the weights differ from one process's by more than {TOLERANCE}")
    print(f"rank {rank} of {n} ok", flush=True)


main()
