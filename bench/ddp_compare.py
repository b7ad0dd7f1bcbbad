"""One rank of bench/ddp_compare.sh: torch.distributed's "ddl" backend against "gloo" in one job.

How it works: every rank joins the default group on gloo (init_process_group) and a second
group of the same ranks on ddl (new_group(backend="ddl")), so both backends run in the same
processes on the same ranks, one after the other, round by round (ddl, gloo, ddl, gloo, ...)
so that neither gets a quieter machine. Two measurements:
  1. all_reduce (SUM, float32) from Python on each message size: the median time of the timed
     calls, and nccl-tests' bus bandwidth, busbw = bytes / time x 2 (n - 1) / n. Rank r's
     tensor holds r + 1, so every result is checked: it must hold n (n + 1) / 2 everywhere.
  2. A DistributedDataParallel training step (forward, backward with DDP's bucketed
     allreduces, SGD step) of the same MLP on the same per-rank batches: the median step time.
     After the timed steps each backend's weights must be bitwise identical on every rank, and
     the two backends' weights equal within float tolerance (same data, same steps).
Rank 0 prints one table per measurement with ddl's time or bandwidth over gloo's; the last line
is "ddp_compare: ok" when every check passed (exit status 1 otherwise).

Usage (through ddlrun; see ddp_compare.sh): ddp_compare.py [--quick] [--sizes 1K,1M,...]
    [--iters N] [--steps N] [--rounds N] [--hidden N] [--batch N]
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import ddl.torch  # noqa: F401  (registers the backend "ddl")

BACKENDS = ("ddl", "gloo")


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text[-1:].upper() in units:
        return int(text[:-1]) * units[text[-1:].upper()]
    return int(text)


def human(nbytes):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return str(nbytes)


def time_allreduce(group, tensor, iters, rank, n):
    """Median seconds of `iters` synchronous all_reduces of tensor; False if a result is wrong."""
    want = n * (n + 1) / 2
    times = []
    ok = True
    for _ in range(iters + 1):  # the first is a warm-up
        tensor.fill_(rank + 1)
        dist.barrier(group=group)
        start = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        times.append(time.perf_counter() - start)
        ok = ok and bool(torch.all(tensor == want))
    # Every rank's slowest decides how long the collective took.
    worst = torch.tensor(times[1:], dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=group)
    return statistics.median(worst.tolist()), ok


def make_model(hidden):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(784, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, 10))


def time_ddp(group, model, optimizer, batches, group_of):
    """Median seconds of one DDP step over `batches` (the first one is a warm-up)."""
    times = []
    for x, y in batches:
        dist.barrier(group=group_of)
        start = time.perf_counter()
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    worst = torch.tensor(times[1:], dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=group_of)
    return worst.tolist()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true",
                        help="sizes 4K,256K,4M, 3 iterations, 4 steps, 1 round")
    parser.add_argument("--sizes", default="4K,64K,1M,4M,16M,64M")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.iters, args.steps, args.rounds = "4K,256K,4M", 3, 4, 1

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    groups = {"gloo": dist.group.WORLD, "ddl": dist.new_group(backend="ddl")}
    # torch 1.x: the group is ddl's ProcessGroup; 2.x: torch's, holding ddl's Backend.
    ddl_backend = groups["ddl"]
    if hasattr(ddl_backend, "_get_backend"):
        ddl_backend = ddl_backend._get_backend(torch.device("cpu"))
    assert type(ddl_backend).__name__ == "ProcessGroupDdl", type(ddl_backend)
    if rank == 0:
        # torch's gloo has only its TCP transport (libtorch_cpu holds gloo::transport::tcp and
        # no shared-memory one, up to 2.13 at least): on one host it runs over loopback.
        print(f"torch {torch.__version__}; gloo transport "
              f"{os.environ.get('GLOO_DEVICE_TRANSPORT', 'TCP')}", flush=True)
    ok = True

    sizes = [parse_size(s) for s in args.sizes.split(",")]
    times = {(b, s): [] for b in BACKENDS for s in sizes}
    for _ in range(args.rounds):
        for size in sizes:
            tensor = torch.empty(size // 4, dtype=torch.float32)
            for backend in BACKENDS:
                seconds, right = time_allreduce(groups[backend], tensor, args.iters, rank, n)
                times[backend, size].append(seconds)
                if not right:
                    print(f"rank {rank}: {backend} all_reduce of {human(size)} gave a wrong "
                          "result", flush=True)
                    ok = False

    generator = torch.Generator().manual_seed(1000 + rank)  # each rank its own batches
    batches = [(torch.randn(args.batch, 784, generator=generator),
                torch.randint(0, 10, (args.batch,), generator=generator))
               for _ in range(args.steps + 1)]
    models, optimizers, steps = {}, {}, {b: [] for b in BACKENDS}
    for backend in BACKENDS:
        models[backend] = torch.nn.parallel.DistributedDataParallel(
            make_model(args.hidden), process_group=groups[backend])
        optimizers[backend] = torch.optim.SGD(models[backend].parameters(), lr=0.01)
    for _ in range(args.rounds):
        for backend in BACKENDS:
            steps[backend] += time_ddp(groups[backend], models[backend], optimizers[backend],
                                       batches, groups["gloo"])
    weights = {b: torch.cat([p.detach().reshape(-1) for p in models[b].parameters()])
               for b in BACKENDS}
    for backend in BACKENDS:
        highest = weights[backend].clone()
        dist.all_reduce(highest, op=dist.ReduceOp.MAX)
        if not torch.equal(highest, weights[backend]):
            print(f"rank {rank}: DDP on {backend} left different weights on the ranks", flush=True)
            ok = False
    if not torch.allclose(weights["ddl"], weights["gloo"], rtol=1e-4, atol=1e-6):
        worst = (weights["ddl"] - weights["gloo"]).abs().max().item()
        print(f"rank {rank}: DDP weights differ between ddl and gloo by up to {worst:g}",
              flush=True)
        ok = False

    flag = torch.tensor([0 if ok else 1])
    dist.all_reduce(flag)
    if rank == 0:
        params = sum(p.numel() for p in models["ddl"].parameters())
        print(f"ddp_compare: {n} ranks, torch {torch.__version__}, {args.rounds} rounds")
        print(f"\nall_reduce float32 SUM from Python (median of {args.iters} calls x "
              f"{args.rounds} rounds; busbw GB/s as nccl-tests)")
        print(f"{'size':>8} {'ddl us':>10} {'gloo us':>10} {'ddl busbw':>10} {'gloo busbw':>10} "
              f"{'ddl/gloo':>9}")
        factor = 2 * (n - 1) / n
        for size in sizes:
            t = {b: statistics.median(times[b, size]) for b in BACKENDS}
            bw = {b: size / t[b] * factor / 1e9 for b in BACKENDS}
            print(f"{human(size):>8} {t['ddl'] * 1e6:10.1f} {t['gloo'] * 1e6:10.1f} "
                  f"{bw['ddl']:10.3f} {bw['gloo']:10.3f} {bw['ddl'] / bw['gloo']:8.2f}x")
        print(f"\nDDP step, MLP 784-{args.hidden}-{args.hidden}-10 ({params} parameters, "
              f"{params * 4 / 2**20:.1f} MiB of gradients), batch {args.batch} per rank "
              f"(median of {args.steps} steps x {args.rounds} rounds)")
        print(f"{'backend':>8} {'step ms':>10} {'min ms':>10}")
        for backend in BACKENDS:
            print(f"{backend:>8} {statistics.median(steps[backend]) * 1e3:10.2f} "
                  f"{min(steps[backend]) * 1e3:10.2f}")
        speedup = statistics.median(steps["gloo"]) / statistics.median(steps["ddl"])
        print(f"gloo step / ddl step: {speedup:.2f}x")
        print("ddp_compare: ok" if flag.item() == 0 else
              f"ddp_compare: FAILED on {flag.item()} ranks", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    # Leave without running destructors: torch 1.13 can deadlock at interpreter exit when a DDP
    # reducer's gloo group is destroyed while gloo's worker threads free tensors (they wait for
    # the GIL that the exiting thread holds while it joins them; seen in CI). Every check is done.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if flag.item() == 0 else 1)


main()
