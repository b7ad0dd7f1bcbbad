"""Data-parallel training of a small CNN on synthetic MNIST-shaped data, with ddl.torch.

    PYTHONPATH=build/python build/ddlrun/ddlrun -H localhost:4 \
        /usr/bin/python3 examples/train_mnist_synthetic.py [--epochs 4]

How it works: every rank builds the same synthetic data set (seeded: 10 classes, each a fixed
random 28x28 pattern plus noise, so there is something to learn and nothing to download), takes
its own shard of each epoch with DistributedSampler, starts from rank 0's weights
(broadcast_parameters) and trains with DistributedOptimizer, which averages the gradients over
the ranks before every step; the learning rate is scaled by the number of ranks. Rank 0 prints
the mean loss of each epoch (over every rank). At the end each rank checks that the loss fell
and that its weights are bitwise identical to every other rank's (the element-wise max and min
over the ranks both equal its own), prints its host and a digest of its weights, then prints
"rank R of N ok".
"""

import argparse
import hashlib
import socket
import sys
import time

import torch
import torch.nn.functional as F

import ddl
import ddl.torch as dt


def synthetic_mnist(samples, seed=1234):
    """`samples` 1x28x28 images and labels 0..9, the same on every rank."""
    generator = torch.Generator().manual_seed(seed)
    patterns = torch.randn(10, 1, 28, 28, generator=generator)
    labels = torch.randint(0, 10, (samples,), generator=generator)
    images = 0.15 * patterns[labels] + torch.randn(samples, 1, 28, 28, generator=generator)
    return torch.utils.data.TensorDataset(images, labels)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 8, 3, stride=2)  # 8x13x13
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2)  # 16x6x6
        self.fc = torch.nn.Linear(16 * 6 * 6, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        return self.fc(x.flatten(1))


def flat_weights(model):
    return torch.cat([p.detach().reshape(-1) for p in model.state_dict().values()
                      if p.is_floating_point()])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--samples", type=int, default=4096)
    parser.add_argument("--lr", type=float, default=0.01, help="for one rank; scaled by size")
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(ddl.rank())  # different on each rank: broadcast_parameters must fix it
    rank, size = ddl.rank(), ddl.size()
    data = synthetic_mnist(args.samples)
    sampler = dt.DistributedSampler(data, seed=42)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, sampler=sampler)

    model = Net()
    optimizer = dt.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=dt.scale_lr(args.lr), momentum=0.9))
    dt.broadcast_parameters(model.state_dict(), root_rank=0)
    dt.broadcast_optimizer_state(optimizer, root_rank=0)

    losses = []
    steps, started = 0, time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total, batches = 0.0, 0
        for images, labels in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            total, batches, steps = total + loss.item(), batches + 1, steps + 1
        losses.append(dt.allreduce_metric(total / batches))
        if rank == 0:
            print(f"epoch {epoch}: loss {losses[-1]:.4f}", flush=True)
    step_ms = 1000 * (time.perf_counter() - started) / steps
    if rank == 0:
        print(f"{size} ranks, {args.batch_size} per rank: {step_ms:.1f} ms per step", flush=True)

    weights = flat_weights(model)
    highest = ddl.allreduce(weights.clone(), op="max")
    lowest = ddl.allreduce(weights.clone(), op="min")
    same = torch.equal(highest, weights) and torch.equal(lowest, weights)
    if not same:
        sys.exit(f"rank {rank}: weights differ from another rank's")
    if len(losses) > 1 and not losses[-1] < 0.5 * losses[0]:
        sys.exit(f"rank {rank}: the loss did not fall enough: {losses}")
    digest = hashlib.sha256(weights.numpy().tobytes()).hexdigest()[:16]
    print(f"rank {rank} on {socket.gethostname()}: weights sha256 {digest}", flush=True)
    print(f"rank {rank} of {size} ok", flush=True)


main()
