"""The per-call cost of a small all_reduce from Python: torch.distributed's "ddl" backend beside
"gloo" and beside libddl called directly (ddl.allreduce), in one job.

How it works: every rank joins the default group on gloo and a second group of the same ranks
on ddl (as bench/ddp_compare.py does). For each size, round by round (so that no backend gets
a quieter machine), each way runs `iters` back-to-back synchronous all_reduces (SUM, float32;
rank r's tensor holds r + 1, every result checked) and the per-call time is the slowest rank's
total over `iters`, the median over the rounds. The ways:
  libddl      ddl.allreduce(tensor): the extension, no queue, no work object
  ddl         dist.all_reduce(tensor, group=ddl group): the C++ ProcessGroupDdl
  ddl-async   all_reduce(async_op=True) of `iters` tensors, then wait() on each
  gloo        dist.all_reduce(tensor) on the default group
Rank 0 prints a table in microseconds per call, then "torch_call_cost: ok" when every result
was right; each rank whose results were right prints "rank R of N ok".

    ddlrun -H localhost:4 /usr/bin/python3 bench/torch_call_cost.py [--sizes 8,4K,64K]
        [--iters N] [--rounds N]
"""

import argparse
import statistics
import sys
import time

import torch
import torch.distributed as dist

import ddl


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20}
    if text[-1:].upper() in units:
        return int(text[:-1]) * units[text[-1:].upper()]
    return int(text)


def run_sync(call, tensor, iters, value):
    start = time.perf_counter()
    for _ in range(iters):
        tensor.fill_(value)
        call(tensor)
    return time.perf_counter() - start


def run_async(group, tensors):
    start = time.perf_counter()
    works = [dist.all_reduce(t, group=group, async_op=True) for t in tensors]
    for work in works:
        work.wait()
    return time.perf_counter() - start


def one_way(name, groups, tensors, iters, value):
    """Seconds for `iters` calls of way `name` on this rank (tensors hold `value`; the
    synchronous ways refill theirs before each call)."""
    if name == "libddl":
        return run_sync(ddl.allreduce, tensors[0], iters, value)
    if name == "ddl-async":
        return run_async(groups["ddl"], tensors)
    group = groups[name]
    return run_sync(lambda t: dist.all_reduce(t, group=group), tensors[0], iters, value)


def measure(groups, nbytes, iters, rounds, rank, n):
    """{way: median microseconds per call}, and whether every result was right."""
    ways = ("libddl", "ddl", "ddl-async", "gloo")
    count = max(1, nbytes // 4)
    samples = {way: [] for way in ways}
    ok = True
    want = float(n * (n + 1) // 2)
    for _ in range(rounds + 1):  # the first round is a warm-up
        for way in ways:
            tensors = [torch.full((count,), float(rank + 1))
                       for _ in range(iters if way == "ddl-async" else 1)]
            dist.barrier(group=groups["gloo"])
            seconds = one_way(way, groups, tensors, iters, rank + 1)
            worst = torch.tensor([seconds], dtype=torch.float64)
            dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=groups["gloo"])
            samples[way].append(worst.item() / iters * 1e6)
            ok = ok and all(bool(torch.all(t == want)) for t in tensors)
    return {way: statistics.median(s[1:]) for way, s in samples.items()}, ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,4K,64K")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    groups = {"gloo": dist.group.WORLD, "ddl": dist.new_group(backend="ddl")}
    ok = True
    if rank == 0:
        print(f"{n} ranks; microseconds per all_reduce (float32 SUM), median of {args.rounds} "
              f"rounds of {args.iters} calls")
        print(f"{'bytes':>8} {'libddl':>9} {'ddl':>9} {'ddl-async':>10} {'gloo':>9} {'gloo/ddl':>9}")
    for text in args.sizes.split(","):
        nbytes = parse_size(text)
        times, good = measure(groups, nbytes, args.iters, args.rounds, rank, n)
        ok = ok and good
        if rank == 0:
            print(f"{nbytes:>8} {times['libddl']:>9.1f} {times['ddl']:>9.1f} "
                  f"{times['ddl-async']:>10.1f} {times['gloo']:>9.1f} "
                  f"{times['gloo'] / times['ddl']:>8.1f}x", flush=True)
    dist.barrier()
    if rank == 0:
        print("torch_call_cost: ok" if ok else "torch_call_cost: WRONG RESULTS", flush=True)
    if ok:
        print(f"rank {rank} of {n} ok", flush=True)
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


main()
