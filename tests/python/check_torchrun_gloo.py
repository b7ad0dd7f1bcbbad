"""A script written for torchrun and the gloo backend, run unchanged under ddlrun.

How it works: ddlrun sets the variables torchrun would (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so init_process_group("gloo") with its default
env:// rendezvous finds the other ranks. Nothing here imports ddl. The script checks an
all_reduce, a broadcast, an all_gather and one DistributedDataParallel step (weights equal on
every rank afterwards), then prints "rank R of N ok".
"""

import os
import sys

import torch
import torch.distributed as dist


def main():
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["RANK"]) and n == int(os.environ["WORLD_SIZE"])
    assert 0 <= int(os.environ["LOCAL_RANK"]) < int(os.environ["LOCAL_WORLD_SIZE"])

    x = torch.full((1000,), float(rank + 1))
    dist.all_reduce(x)
    assert torch.all(x == n * (n + 1) / 2), x[:4]
    y = torch.full((3,), float(rank))
    dist.broadcast(y, src=n - 1)
    assert torch.all(y == n - 1), y
    parts = [torch.zeros(2) for _ in range(n)]
    dist.all_gather(parts, torch.full((2,), float(rank)))
    assert all(torch.all(p == r) for r, p in enumerate(parts)), parts

    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(10, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(100 + rank)  # each rank its own batch
    model(torch.randn(4, 10)).sum().backward()
    optimizer.step()
    weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    highest = weights.clone()
    dist.all_reduce(highest, op=dist.ReduceOp.MAX)
    if not torch.equal(highest, weights):
        sys.exit(f"rank {rank}: DDP left different weights on the ranks")
    dist.barrier()
    print(f"rank {rank} of {n} ok", flush=True)
    dist.destroy_process_group()


main()
