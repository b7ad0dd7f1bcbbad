"""Horovod's PyTorch synthetic benchmark, as the Horovod community runs it: a torchvision model
trained on one random batch per rank, images per second reported per rank and in total.

    ddlrun -H localhost:4 python3 bench/pytorch_synthetic_benchmark.py --model resnet18 \
        --batch-size 8 --image-size 64 --fp16-allreduce --sync-batch-norm

Beyond Horovod's script: --image-size and --num-classes (CPU-sized runs), --sync-batch-norm
(norm_layer=hvd.SyncBatchNorm), --batches-per-allreduce, and --check: at the end rank 0 trains
the same model in one process on every rank's batch at once for the same steps, and every rank
checks that its weights equal the others' bitwise and that reference within --tolerance (each
rank prints "rank R of N ok").
"""

import argparse
import sys
import timeit

import numpy as np
import torch
import torch.nn.functional as F
import torch.optim as optim
from torchvision import models

import horovod.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch Synthetic Benchmark",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="use fp16 compression during allreduce")
parser.add_argument("--model", type=str, default="resnet50", help="model to benchmark")
parser.add_argument("--batch-size", type=int, default=32, help="input batch size")
parser.add_argument("--num-warmup-batches", type=int, default=10,
                    help="number of warm-up batches that don't count towards benchmark")
parser.add_argument("--num-batches-per-iter", type=int, default=10,
                    help="number of batches per benchmark iteration")
parser.add_argument("--num-iters", type=int, default=10, help="number of benchmark iterations")
parser.add_argument("--image-size", type=int, default=224, help="image height and width")
parser.add_argument("--num-classes", type=int, default=1000, help="number of classes")
parser.add_argument("--sync-batch-norm", action="store_true", default=False,
                    help="norm_layer=hvd.SyncBatchNorm")
parser.add_argument("--batches-per-allreduce", type=int, default=1,
                    help="backward passes per optimizer step")
parser.add_argument("--check", action="store_true", default=False,
                    help="compare the weights with one process's training at the end")
parser.add_argument("--tolerance", type=float, default=2e-3)
args = parser.parse_args()

hvd.init()
torch.set_num_threads(1)
torch.manual_seed(hvd.rank())

norm_layer = hvd.SyncBatchNorm if args.sync_batch_norm else None
model = getattr(models, args.model)(num_classes=args.num_classes, norm_layer=norm_layer)
lr_scaler = hvd.size()
optimizer = optim.SGD(model.parameters(), lr=0.01 * lr_scaler)
compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
initial = {k: v.clone() for k, v in model.state_dict().items()}
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     compression=compression,
                                     backward_passes_per_step=args.batches_per_allreduce)

data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
target = torch.LongTensor(args.batch_size).random_() % args.num_classes
steps = 0


def benchmark_step():
    global steps
    optimizer.zero_grad()
    for _ in range(args.batches_per_allreduce):
        loss = F.cross_entropy(model(data), target)
        loss.div_(args.batches_per_allreduce).backward()
    optimizer.step()
    steps += 1


def log(s, nl=True):
    if hvd.rank() != 0:
        return
    print(s, end="\n" if nl else "", flush=True)


def weights(net):
    return torch.cat([t.detach().reshape(-1).double() for t in net.state_dict().values()
                      if t.is_floating_point()])


def check():
    """Every rank's weights equal; rank 0's equal one process's on all the batches at once."""
    ours = weights(model)
    same = torch.equal(hvd.allreduce(ours, op=hvd.Max), ours)
    everyone = (hvd.allgather(data), hvd.allgather(target))
    diff = 0.0
    if hvd.rank() == 0:
        alone = getattr(models, args.model)(num_classes=args.num_classes)
        alone.load_state_dict(initial)
        sgd = optim.SGD(alone.parameters(), lr=0.01 * lr_scaler)
        for _ in range(steps):
            sgd.zero_grad()
            for _ in range(args.batches_per_allreduce):
                loss = F.cross_entropy(alone(everyone[0]), everyone[1])
                loss.div_(args.batches_per_allreduce).backward()
            sgd.step()
        diff = (weights(alone) - ours).abs().max().item()
        log(f"{hvd.size()} ranks vs one process, {steps} steps: max weight difference {diff:.3g}")
    diff = hvd.broadcast(torch.tensor([diff]), root_rank=0).item()
    if not same or diff > args.tolerance:
        sys.exit(f"rank {hvd.rank()}: weights differ between ranks ({not same}) or from one "
                 f"process's by {diff:.3g} > {args.tolerance}")
    print(f"rank {hvd.rank()} of {hvd.size()} ok", flush=True)


log(f"Model: {args.model}")
log(f"Batch size: {args.batch_size}")
device = "CPU"
log(f"Number of {device}s: {hvd.size()}")

# Warm-up
log("Running warmup...")
timeit.timeit(benchmark_step, number=args.num_warmup_batches)

# Benchmark
log("Running benchmark...")
img_secs = []
for x in range(args.num_iters):
    time = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
    img_sec = args.batch_size * args.num_batches_per_iter / time
    log(f"Iter #{x}: {img_sec:.1f} img/sec per {device}")
    img_secs.append(img_sec)

# Results
img_sec_mean = np.mean(img_secs)
img_sec_conf = 1.96 * np.std(img_secs)
log(f"Img/sec per {device}: {img_sec_mean:.1f} +-{img_sec_conf:.1f}")
log(f"Total img/sec on {hvd.size()} {device}(s): {hvd.size() * img_sec_mean:.1f} "
    f"+-{hvd.size() * img_sec_conf:.1f}")
if args.check:
    check()
