"""DistributedOptimizer (horovod.torch's and ddl.torch's) overlaps communication with the
backward pass: the allreduce of the last layers' gradients is finished while autograd is still
computing the first layers.

How it works: run as an N-rank job. The model is Linear layers with a slow layer in the middle
(its backward sleeps SLOW seconds, as a heavy layer computes). HOROVOD_FUSION_THRESHOLD=0 makes
one bucket per tensor. A hook on the input's gradient, which autograd calls at the very end of
the backward pass, records which buckets had started and finished by then. Overlap means: the
buckets of the layers after the slow one (started by their gradient hooks before the slow
backward began) were finished before the backward pass ended; an optimizer that reduced after
backward would have started none. Then step() gives every rank the average gradient (checked
against allgather). Each rank prints "rank R of N ok".
"""

import os
import sys
import time

import torch

import ddl
import ddl.torch as dt
import horovod.torch as hvd

SLOW = 1.0
os.environ["HOROVOD_FUSION_THRESHOLD"] = "0"


class _Slow(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        time.sleep(SLOW)  # a layer that takes SLOW seconds to differentiate (GIL released)
        return grad


class Slow(torch.nn.Module):
    def forward(self, x):
        return _Slow.apply(x)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), Slow(),
                               torch.nn.Linear(16, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def inputs(r):
    return torch.full((3, 8), float(r + 1), requires_grad=True)


def local_gradients(net, r):
    """This rank's own gradients (torch.autograd.grad runs no accumulator hooks)."""
    loss = net(inputs(r)).pow(2).sum()
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, list(net.parameters()))])


def backward_with_record(net, reducer, r):
    """One backward pass; how many buckets had started and finished when autograd reached
    the input (the end of the pass)."""
    x = inputs(r)
    seen = {}

    def at_end(grad):
        seen["started"] = len(reducer.handles)
        seen["done"] = sum(h.done() for h in reducer.handles)
        return grad

    x.register_hook(at_end)
    net(x).pow(2).sum().backward()
    return seen["started"], seen["done"]


def check(name, net, optimizer, reducer, r):
    """Overlap happened, and step() left every rank the average of the ranks' gradients."""
    mean = ddl.allgather(local_gradients(net, r).unsqueeze(0)).mean(0)
    started, done = backward_with_record(net, reducer, r)
    optimizer.step()
    late = 4  # the weights and biases of the two Linear layers after the slow one
    print(f"rank {r}: {name}: at the end of backward {started} of {len(reducer.buckets)} "
          f"buckets had started, {done} finished", flush=True)
    if done < late:
        sys.exit(f"rank {r}: {name}: {done} buckets finished before the end of backward, "
                 f"{late} expected: no overlap")
    averaged = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
    assert torch.allclose(averaged, mean, rtol=1e-6, atol=1e-6), (averaged - mean).abs().max()


def main():
    hvd.init()
    r, n = hvd.rank(), hvd.size()
    for name in ("hvd.DistributedOptimizer", "ddl.torch.DistributedOptimizer"):
        net = model()
        sgd = torch.optim.SGD(net.parameters(), lr=0.0)  # lr 0: the gradients stay to be read
        if name.startswith("hvd"):
            optimizer = hvd.DistributedOptimizer(sgd, named_parameters=net.named_parameters())
            reducer = optimizer._reducer
        else:
            optimizer = dt.DistributedOptimizer(sgd)
            reducer = optimizer.reducer
        assert len(reducer.buckets) == 6, [len(b) for b in reducer.buckets]
        check(name, net, optimizer, reducer, r)
    print(f"rank {r} of {n} ok", flush=True)


main()
