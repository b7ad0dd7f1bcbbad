"""An unmodified DistributedDataParallel script on the torch.distributed backend "ddl"
(`import ddl.torch` registers it), and the same steps on gloo for a comparison of step times.

How it works: run as an N-rank job with the backend's name as argument. The script checks
all_reduce, broadcast, all_gather and reduce_scatter, then trains a small model with DDP for a
few steps on per-rank batches: the weights must end bitwise identical on every rank. Rank 0
prints the mean DDP step time; each rank prints "rank R of N ok".
"""

import sys
import time

import torch
import torch.distributed as dist

import ddl.torch  # noqa: F401  (registers the backend "ddl")


def main():
    torch.set_num_threads(1)
    dist.init_process_group(sys.argv[1] if len(sys.argv) > 1 else "ddl")
    rank, n = dist.get_rank(), dist.get_world_size()
    if sys.argv[1:] == ["ddl"]:  # the C++ ProcessGroup (ddl._torch_pg), not a Python one
        from ddl import _torch_pg

        group = dist.distributed_c10d._get_default_group()
        assert type(group) is _torch_pg.ProcessGroupDdl, type(group)
        assert group.name() == "ddl", group.name()

    x = torch.full((1000,), float(rank + 1))
    dist.all_reduce(x)
    assert torch.all(x == n * (n + 1) / 2), x[:4]
    y = torch.full((3,), float(rank))
    dist.broadcast(y, src=n - 1)
    assert torch.all(y == n - 1), y
    parts = [torch.zeros(2) for _ in range(n)]
    dist.all_gather(parts, torch.full((2,), float(rank)))
    assert all(torch.all(p == r) for r, p in enumerate(parts)), parts
    if sys.argv[1:] == ["ddl"]:  # gloo has no reduce_scatter
        out = torch.zeros(2)
        dist.reduce_scatter(out, [torch.full((2,), float(r)) for r in range(n)])
        assert torch.all(out == n * rank), out

    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    torch.manual_seed(100 + rank)  # each rank its own batches
    steps = 20
    for step in range(steps + 1):
        if step == 1:
            dist.barrier()
            started = time.perf_counter()
        optimizer.zero_grad()
        model(torch.randn(32, 256)).square().mean().backward()
        optimizer.step()
    step_ms = 1000 * (time.perf_counter() - started) / steps
    weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    highest = weights.clone()
    dist.all_reduce(highest, op=dist.ReduceOp.MAX)
    if not torch.equal(highest, weights):
        sys.exit(f"rank {rank}: DDP left different weights on the ranks")
    dist.barrier()
    if rank == 0:
        print(f"backend {dist.get_backend()}: {n} ranks, DDP step {step_ms:.2f} ms", flush=True)
    print(f"rank {rank} of {n} ok", flush=True)
    dist.destroy_process_group()


main()
