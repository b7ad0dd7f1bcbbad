"""A Horovod PyTorch training script as Horovod's own examples write it (pytorch_imagenet_resnet50
style: SyncBatchNorm, fp16 allreduce, several batches per allreduce, lr scaled by size, warm
start from rank 0), on synthetic CIFAR-sized data; then a check that every rank ends with the
weights one process computes from the same data.

How it works: each rank trains a torchvision ResNet-18 (norm_layer=hvd.SyncBatchNorm) on its
own rows of one seeded data set: at step s, sub-batch j, rank r takes `batch_size` rows
(s, j, r). The check replays the training on rank 0 alone with torch's BatchNorm2d: sub-batch j
of step s is the rows of every rank together (what SyncBatchNorm normalises over) and the loss is
scaled the same way, so the updates agree up to float rounding and the fp16 allreduce. Every
rank prints "rank R of N ok" when its weights equal every other rank's bitwise and rank 0's
reference within --tolerance (BatchNorm over 8 images amplifies rounding: on 4 ranks the float32
run ends about 2e-4 from the reference, the fp16 one 7e-4, while summing instead of averaging
ends 0.13 away and a local BatchNorm2d 0.33).

    ddlrun -H localhost:4 python3 hvd_train_resnet.py --fp16-allreduce --batches-per-allreduce 2
"""

import argparse
import sys

import torch
import torch.nn.functional as F
import torchvision.models as models

import horovod.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch synthetic ResNet training with Horovod")
parser.add_argument("--batch-size", type=int, default=2, help="input batch size per rank")
parser.add_argument("--batches-per-allreduce", type=int, default=2,
                    help="number of batches processed locally before executing allreduce")
parser.add_argument("--steps", type=int, default=3, help="optimizer steps")
parser.add_argument("--base-lr", type=float, default=0.001, help="learning rate for one worker")
parser.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="use fp16 compression during allreduce")
parser.add_argument("--image-size", type=int, default=64)
parser.add_argument("--tolerance", type=float, default=2e-3)
args = parser.parse_args()


def synthetic_data(world):
    """Images and labels for every (step, sub-batch, rank), the same on every rank."""
    generator = torch.Generator().manual_seed(42)
    shape = (args.steps, args.batches_per_allreduce, world, args.batch_size)
    images = torch.randn(shape + (3, args.image_size, args.image_size), generator=generator)
    labels = torch.randint(0, 10, shape, generator=generator)
    return images, labels


def make_model(norm_layer):
    torch.manual_seed(hvd.rank())  # different on every rank: broadcast_parameters fixes that
    return models.resnet18(num_classes=10, norm_layer=norm_layer)


def train(model, optimizer, batches):
    """batches(s, j) -> (images, labels); the loss of each is divided by the batch count."""
    model.train()
    for step in range(args.steps):
        optimizer.zero_grad()
        for j in range(args.batches_per_allreduce):
            data, target = batches(step, j)
            loss = F.cross_entropy(model(data), target)
            loss.div_(args.batches_per_allreduce)
            loss.backward()
        optimizer.step()
        if hvd.rank() == 0:
            print(f"step {step}: loss {loss.item() * args.batches_per_allreduce:.4f}", flush=True)


def weights(model):
    return torch.cat([t.detach().reshape(-1).double() for t in model.state_dict().values()
                      if t.is_floating_point()])


def reference(initial, images, labels):
    """The same training in one process: every rank's rows at once, plain BatchNorm2d."""
    model = models.resnet18(num_classes=10)
    model.load_state_dict(initial)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.base_lr * hvd.size(),
                                momentum=args.momentum)
    train(model, optimizer, lambda s, j: (images[s, j].flatten(0, 1), labels[s, j].flatten(0, 1)))
    return weights(model)


def main():
    hvd.init()
    torch.set_num_threads(1)
    images, labels = synthetic_data(hvd.size())
    model = make_model(hvd.SyncBatchNorm)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.base_lr * hvd.size(),
                                momentum=args.momentum)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(), compression=compression,
        backward_passes_per_step=args.batches_per_allreduce)
    r = hvd.rank()
    train(model, optimizer, lambda s, j: (images[s, j, r], labels[s, j, r]))

    ours = weights(model)
    same = torch.equal(hvd.allreduce(ours, op=hvd.Max), ours)
    diff = 0.0
    if r == 0:
        diff = (reference(initial, images, labels) - ours).abs().max().item()
        print(f"{hvd.size()} ranks vs one process: max weight difference {diff:.3g}", flush=True)
    diff = hvd.broadcast(torch.tensor([diff]), root_rank=0).item()
    if not same or diff > args.tolerance:
        sys.exit(f"rank {r}: weights differ between ranks ({not same}) or from one process's by "
                 f"{diff:.3g} > {args.tolerance}")
    print(f"rank {r} of {hvd.size()} ok", flush=True)


if __name__ == "__main__":
    main()
