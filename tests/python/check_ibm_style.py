"""An IBM PowerAI-style script, unmodified: init_process_group('ddl', init_method='env://') and
DistributedDataParallel, with no import of ours. ddlrun's ranks find the backend "ddl" because
the sitecustomize ddlrun puts on their PYTHONPATH registers it when torch.distributed is
imported.

How it works: every rank trains the same model with DDP for a few steps on its slice of one
global batch; the same model trained by this process alone on the whole batch is the
reference: every rank's weights must end within 1e-5 of it and bitwise identical to the other
ranks'. Each rank prints "rank R of N ok".
"""

import copy
import sys

import torch
import torch.distributed as dist


def train(model, batches, lr=0.05):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for x, y in batches:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()


def main():
    torch.set_num_threads(1)
    dist.init_process_group('ddl', init_method='env://')
    rank, n = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == 'ddl', dist.get_backend()

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    reference = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(1)
    per_rank = 8
    batches = [(torch.randn(n * per_rank, 16, generator=generator),
                torch.randn(n * per_rank, 4, generator=generator)) for _ in range(10)]
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    train(torch.nn.parallel.DistributedDataParallel(model), [(x[mine], y[mine]) for x, y in batches])
    train(reference, batches)

    weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    expected = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])
    highest = weights.clone()
    dist.all_reduce(highest, op=dist.ReduceOp.MAX)
    if not torch.equal(highest, weights):
        sys.exit(f"rank {rank}: the ranks' weights differ")
    if not torch.allclose(weights, expected, atol=1e-5):
        sys.exit(f"rank {rank}: weights differ from the single-process reference by "
                 f"{(weights - expected).abs().max().item():g}")
    print(f"rank {rank} of {n} ok", flush=True)
    dist.destroy_process_group()


main()
