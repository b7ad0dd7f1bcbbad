"""The cost of one small synchronous horovod.torch call, beside libddl's own, in one job.

How it works: every rank times R rounds of N back-to-back calls on a tensor of --bytes bytes
(float32): ddl.allreduce (libddl alone), hvd.allreduce_ (in place), hvd.allreduce (the
differentiable one, a new tensor) and hvd.allreduce_async_ + synchronize; each round's time per
call is the round's time over N, and rank 0 prints each kind's median over the rounds in
microseconds, checking every result. Run it as

    build/venv/bin/ddlrun -H localhost:2 build/venv/bin/python bench/hvd_call_cost.py

(PYTHONPATH=<source>/python in front, through -x, to time a source tree's horovod).
"""

import argparse
import statistics
import time

import torch

import ddl
import horovod.torch as hvd


def timed(call, rounds, per_round):
    times = []
    for _ in range(rounds):
        hvd.barrier()
        start = time.perf_counter()
        for _ in range(per_round):
            call()
        times.append((time.perf_counter() - start) / per_round * 1e6)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bytes", type=int, default=4096)
    parser.add_argument("--calls", type=int, default=200, help="calls per round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    hvd.init()
    n = hvd.size()
    x = torch.ones(args.bytes // 4)
    kinds = {
        "ddl.allreduce": lambda: ddl.allreduce(x.fill_(1.0)),
        "hvd.allreduce_": lambda: hvd.allreduce_(x.fill_(1.0), op=hvd.Sum),
        "hvd.allreduce": lambda: hvd.allreduce(x.fill_(1.0), op=hvd.Sum),
        "hvd.allreduce_async_": lambda: hvd.synchronize(hvd.allreduce_async_(x.fill_(1.0),
                                                                             op=hvd.Sum)),
    }
    results = {}
    for kind, call in kinds.items():
        results[kind] = timed(call, args.rounds, args.calls)
        out = call()
        assert float((out if out is not None else x)[0]) == n, (kind, out)
    if hvd.rank() == 0:
        for kind, us in results.items():
            print(f"{kind:22s} {args.bytes} B, {n} ranks: {us:8.1f} us per call", flush=True)


if __name__ == "__main__":
    main()
