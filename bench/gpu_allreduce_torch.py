"""torch.distributed's all_reduce on one backend, in nccl-tests' columns; and the side-by-side
table of several such runs and ddl-bench's (bench/gpu_check.sh uses both).

Every rank runs the measuring form (under ddlrun, which sets RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT):

    python3 bench/gpu_allreduce_torch.py --backend nccl --device cuda -b 8 -e 256M --out nccl.txt

and rank 0 prints (and writes to --out) one row per size: size (bytes), count, time (us, mean
of the timed calls, the slowest rank's), algbw (GB/s), busbw (algbw x 2(n-1)/n: 0 on one rank)
and #wrong. The merging form reads such files and ddl-bench's output and prints one table:

    python3 bench/gpu_allreduce_torch.py --merge libddl=bench.txt ddl=ddl.txt nccl=nccl.txt

How it works: init_process_group(backend) from the environment; float32 tensors on `device`
(cuda: GPU LOCAL_RANK, or 0 with --gpu0). For each size from -b to -e (times -f, 2): fill the tensor with this rank's
pattern (element i of rank r is 2((i + r) mod n) + (i mod 3), as bench/bench_common.h, whose
sum over the ranks is exact in float32), run -w all_reduce calls, a barrier, then -n timed
calls, synchronising the device before reading the clock; then refill, all_reduce once and count
the elements that differ from n(n-1) + n(i mod 3). all_reduce works in place, so the timed calls
reduce already-reduced data: only the refilled check looks at the values.
"""
import argparse
import os
import sys
import time


def parse_size(text):
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    unit = text[-1] if text and text[-1] in "KMG" else ""
    return int(text[:-1] if unit else text) * units[unit]


def sizes(low, high, factor=2):
    s = low
    while s <= high:
        yield s
        s *= factor


def pattern(torch, n, rank, count, device):
    i = torch.arange(count, device=device, dtype=torch.int64)
    return (2 * ((i + rank) % n) + (i % 3)).to(torch.float32)


def expected(torch, n, count, device):
    i = torch.arange(count, device=device, dtype=torch.int64)
    return (n * (n - 1) + n * (i % 3)).to(torch.float32)


def synchronize(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(args, torch, dist, device, rank, n):
    """One row per size: (bytes, count, time_us, algbw, busbw, wrong)."""
    rows = []
    for size in sizes(args.b, args.e, args.f):
        count = size // 4
        if count == 0:
            continue
        t = pattern(torch, n, rank, count, device)
        for _ in range(args.w):
            dist.all_reduce(t)
        synchronize(torch, device)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.n):
            dist.all_reduce(t)
        synchronize(torch, device)
        # The bookkeeping tensors live on the tensor's device: nccl takes no CPU tensors.
        took = torch.tensor([(time.perf_counter() - start) / args.n * 1e6], dtype=torch.float64,
                            device=device)
        dist.all_reduce(took, op=dist.ReduceOp.MAX)
        t.copy_(pattern(torch, n, rank, count, device))
        dist.all_reduce(t)
        wrong = torch.tensor([float((t != expected(torch, n, count, device)).sum().item())],
                             dtype=torch.float64, device=device)
        dist.all_reduce(wrong)
        us = took.item()
        algbw = count * 4 / us / 1e3
        rows.append((count * 4, count, us, algbw, algbw * 2 * (n - 1) / n, int(wrong.item())))
    return rows


def run(args):
    import torch
    import torch.distributed as dist

    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = 0 if args.gpu0 else int(os.environ.get("LOCAL_RANK", "0"))
    if args.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit(f"gpu_allreduce_torch: rank {rank}: torch {torch.__version__} sees no GPU")
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=args.backend)
    rows = measure(args, torch, dist, device, rank, n)
    dist.destroy_process_group()
    if rank != 0:
        return 0
    lines = [f"# torch {torch.__version__} {args.backend}: all_reduce float32 sum on {device.type}, "
             f"{n} ranks, warmup {args.w}, iters {args.n}",
             f"# {'size(B)':>10} {'count':>12} {'time(us)':>12} {'algbw(GB/s)':>12} "
             f"{'busbw(GB/s)':>12} {'#wrong':>8}"]
    lines += [f"  {b:>10} {c:>12} {us:>12.2f} {alg:>12.4f} {bus:>12.4f} {w:>8}"
              for b, c, us, alg, bus, w in rows]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 1 if any(r[5] for r in rows) else 0


def read_rows(path):
    """size -> (time_us, busbw, wrong) from this script's or ddl-bench's output."""
    rows = {}
    with open(path) as f:
        for line in f:
            cols = line.split()
            if not cols or not cols[0].isdigit():
                continue  # comments, and whatever else the ranks printed (warnings)
            if len(cols) == 6:  # this script: size count time algbw busbw wrong
                rows[int(cols[0])] = (float(cols[2]), float(cols[4]), cols[5])
            elif len(cols) == 8:  # ddl-bench: size count type redop time algbw busbw wrong
                rows[int(cols[0])] = (float(cols[4]), float(cols[6]), cols[7])
    return rows


def merge(specs):
    runs = []
    for spec in specs:
        name, _, path = spec.partition("=")
        runs.append((name, read_rows(path) if path and os.path.exists(path) else {}))
    all_sizes = sorted({s for _, rows in runs for s in rows})
    head = f"{'size(B)':>10}" + "".join(
        f" | {name + ' us':>12} {'busbw':>8} {'#wrong':>6}" for name, _ in runs)
    print("# all_reduce float32 sum: time (us, mean, slowest rank), busbw (GB/s), wrong elements;"
          " '-' where that run has no row")
    print("# " + head)
    for s in all_sizes:
        line = f"  {s:>10}"
        for _, rows in runs:
            if s in rows:
                us, bus, wrong = rows[s]
                line += f" | {us:>12.2f} {bus:>8.3f} {wrong:>6}"
            else:
                line += f" | {'-':>12} {'-':>8} {'-':>6}"
        print(line)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="nccl")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("-b", type=parse_size, default=8, help="smallest message in bytes (8)")
    p.add_argument("-e", type=parse_size, default=256 << 20, help="largest (256M)")
    p.add_argument("-f", type=int, default=2, help="each size is the last times this (2)")
    p.add_argument("-w", type=int, default=5, help="untimed calls per size (5)")
    p.add_argument("-n", type=int, default=20, help="timed calls per size (20)")
    p.add_argument("--gpu0", action="store_true",
                   help="every rank on GPU 0 (to see what the backend does with 2 ranks on one)")
    p.add_argument("--out", help="rank 0 also writes its table here")
    p.add_argument("--merge", nargs="+", metavar="NAME=FILE",
                   help="print these runs' tables side by side instead")
    args = p.parse_args()
    return merge(args.merge) if args.merge else run(args)


if __name__ == "__main__":
    sys.exit(main())
