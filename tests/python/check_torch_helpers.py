"""ddl.torch's helpers in a real job: scale_lr, DistributedSampler, allreduce_metric,
broadcast_parameters, broadcast_object and broadcast_optimizer_state.

How it works: run as an N-rank job; each rank checks what it got against what it can compute
(the sampler's shards gathered from every rank cover the data set once; rank 0's momentum
buffers arrive everywhere), then prints "rank R of N ok".
"""

import torch

import ddl
import ddl.torch as dt


def check_sampler(rank, n):
    for length in (10, 13, 1):
        sampler = dt.DistributedSampler(length, seed=3)
        sampler.set_epoch(2)
        mine = torch.tensor(list(sampler), dtype=torch.int64)
        assert len(mine) == len(sampler) == -(-length // n), (len(mine), length)
        everyone = ddl.allgather(mine)
        assert set(everyone.tolist()) == set(range(length)), everyone
        assert len(everyone) - length < n
        assert len(set(mine.tolist()) & set(range(length))) == len(set(mine.tolist()))
    first, second = dt.DistributedSampler(13, seed=3), dt.DistributedSampler(13, seed=3)
    second.set_epoch(1)
    assert list(first) == list(dt.DistributedSampler(13, seed=3))  # the same order each time
    assert ddl.allgather(torch.tensor(list(first))).tolist() != \
        ddl.allgather(torch.tensor(list(second))).tolist()  # a new order each epoch


def main():
    rank, n = ddl.rank(), ddl.size()
    assert dt.scale_lr(0.5) == 0.5 * n
    assert dt.allreduce_metric(rank) == (n - 1) / 2
    assert dt.allreduce_metric(rank, op="max") == n - 1
    metric = dt.allreduce_metric(torch.tensor([float(rank), 1.0]), op="sum")
    assert metric.tolist() == [n * (n - 1) / 2, n], metric
    check_sampler(rank, n)

    torch.manual_seed(rank)  # different weights on each rank until the broadcast
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if rank == 0:  # only rank 0 has momentum buffers and a running mean
        model(torch.randn(5, 4)).sum().backward()
        optimizer.step()
    dt.broadcast_parameters(model.state_dict(), root_rank=0)
    dt.broadcast_optimizer_state(optimizer, root_rank=0)
    state = torch.cat([p.detach().reshape(-1) for p in model.state_dict().values()
                       if p.is_floating_point()])
    buffers = torch.cat([optimizer.state[p]["momentum_buffer"].reshape(-1)
                         for p in model.parameters()])
    for tensor in (state, buffers):
        assert torch.equal(ddl.allreduce(tensor.clone(), op="max"), tensor)
        assert torch.equal(ddl.allreduce(tensor.clone(), op="min"), tensor)
    assert dt.broadcast_object({"epoch": 3 + rank}, root_rank=n - 1) == {"epoch": 2 + n}
    print(f"rank {rank} of {n} ok", flush=True)


main()
