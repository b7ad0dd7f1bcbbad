"""The synthetic benchmark of bench/pytorch_synthetic_benchmark.py with DistributedDataParallel
instead of Horovod: the same torchvision model, batch and SGD step, on the torch.distributed
backend --backend (ddl: libddl's C++ ProcessGroup; gloo), started by ddlrun (which sets RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT). Prints the same "Total img/sec" line.

    ddlrun -H localhost:4 python3 bench/ddp_synthetic_benchmark.py --backend ddl --model resnet18
"""

import argparse
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torchvision import models


def options():
    parser = argparse.ArgumentParser(description="DDP synthetic benchmark")
    parser.add_argument("--backend", default="ddl", choices=("ddl", "gloo"))
    parser.add_argument("--model", default="resnet50")
    for name, default in (("batch-size", 32), ("num-warmup-batches", 10),
                          ("num-batches-per-iter", 10), ("num-iters", 10), ("image-size", 224),
                          ("num-classes", 1000)):
        parser.add_argument("--" + name, type=int, default=default)
    return parser.parse_args()


def main():
    args = options()
    if args.backend == "ddl":
        import ddl.torch  # noqa: F401 (registers the backend "ddl")
    dist.init_process_group(args.backend, init_method="env://")
    torch.set_num_threads(1)
    torch.manual_seed(dist.get_rank())
    net = getattr(models, args.model)(num_classes=args.num_classes)
    ddp = torch.nn.parallel.DistributedDataParallel(net)  # broadcasts rank 0's weights
    sgd = torch.optim.SGD(ddp.parameters(), lr=0.01 * dist.get_world_size())
    images = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    labels = torch.randint(0, args.num_classes, (args.batch_size,))

    def run(count):
        start = time.perf_counter()
        for _ in range(count):
            sgd.zero_grad()
            F.cross_entropy(ddp(images), labels).backward()
            sgd.step()
        return time.perf_counter() - start

    run(args.num_warmup_batches)
    images_per_iter = args.batch_size * args.num_batches_per_iter
    rates = torch.tensor([images_per_iter / run(args.num_batches_per_iter)
                          for _ in range(args.num_iters)])
    n = dist.get_world_size()
    if dist.get_rank() == 0:
        spread = 1.96 * rates.std(unbiased=False).item()
        print(f"DDP {args.backend}: Img/sec per CPU: {rates.mean():.1f} +-{spread:.1f}")
        print(f"Total img/sec on {n} CPU(s): {n * rates.mean():.1f} +-{n * spread:.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
