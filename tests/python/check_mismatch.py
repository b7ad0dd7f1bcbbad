"""Ranks that disagree on a collective: the call raises, on every rank, instead of corrupting.

How it works: run as an N-rank job (N >= 2) with one argument. Every rank allreduces 10 float32
elements except rank 1, which passes 11 elements ("numpy-count", "torch-count") or float64
("torch-dtype"): through `import ddl` on numpy arrays, or through the torch.distributed backend
"ddl" (dist.all_reduce). Every rank must get a RuntimeError (ddl.MismatchError, status
DDL_ERR_MISMATCH) whose text names rank 0's and rank 1's calls with the same call number, and
the next, matching, call must fail with the same text. Each rank then prints "rank R of N ok".
"""

import os
import re
import sys

import numpy

import ddl

TAIL = (" (every rank must make the same calls in the same order; this communicator now fails "
        "every call)")


def expect_mismatch(rank, what, call, prefix, theirs):
    """Runs call(); it must raise ddl.MismatchError naming rank 0's and rank 1's calls."""
    try:
        call()
    except RuntimeError as e:
        text = str(e)
        if not isinstance(e, ddl.MismatchError) or e.status != ddl.ERR_MISMATCH:
            sys.exit(f"rank {rank}: {what}: {type(e).__name__} status "
                     f"{getattr(e, 'status', None)}: {text}")
        pattern = (re.escape(prefix + "collective mismatch: rank 0 called "
                             "allreduce(count=10, float32, sum) #") + r"(\d+)" +
                   re.escape(f" but rank 1 called {theirs} #") + r"(\d+)" + re.escape(TAIL))
        m = re.fullmatch(pattern, text)
        if not m or m[1] != m[2]:
            sys.exit(f"rank {rank}: {what}: not the mismatch expected: {text}")
        return text
    sys.exit(f"rank {rank}: {what}: no error")


def numpy_count():
    rank, n = ddl.rank(), ddl.size()
    x = numpy.ones(11 if rank == 1 else 10, dtype=numpy.float32)
    first = expect_mismatch(rank, "allreduce", lambda: ddl.allreduce(x), "",
                            "allreduce(count=11, float32, sum)")
    if "#1 but" not in first:
        sys.exit(f"rank {rank}: the first call is not #1: {first}")
    y = numpy.ones(10, dtype=numpy.float32)
    again = expect_mismatch(rank, "next allreduce", lambda: ddl.allreduce(y), "",
                            "allreduce(count=11, float32, sum)")
    if again != first:
        sys.exit(f"rank {rank}: the next call failed otherwise: {again}")
    print(f"rank {rank} of {n} ok", flush=True)
    ddl.finalize()


def torch_mismatch(dtype_differs):
    import torch
    import torch.distributed as dist

    import ddl.torch  # noqa: F401  (registers the backend "ddl")

    dist.init_process_group("ddl")
    rank, n = dist.get_rank(), dist.get_world_size()
    t = torch.ones(4)
    dist.all_reduce(t)  # a matching call first: the group works
    if not torch.all(t == n):
        sys.exit(f"rank {rank}: wrong sum {t.tolist()}")
    if dtype_differs:
        x = torch.ones(10, dtype=torch.float64 if rank == 1 else torch.float32)
        theirs = "allreduce(count=10, float64, sum)"
    else:
        x = torch.ones(11 if rank == 1 else 10)
        theirs = "allreduce(count=11, float32, sum)"
    prefix = "ddl backend: allreduce: "
    first = expect_mismatch(rank, "all_reduce", lambda: dist.all_reduce(x), prefix, theirs)
    y = torch.ones(10)
    again = expect_mismatch(rank, "next all_reduce", lambda: dist.all_reduce(y), prefix, theirs)
    if again != first:
        sys.exit(f"rank {rank}: the next call failed otherwise: {again}")
    if rank == 0:
        print(f"as Python sees it: {first}", flush=True)
    print(f"rank {rank} of {n} ok", flush=True)
    os._exit(0)  # torch's teardown of a group whose communicator is unusable is not the point


def main():
    what = sys.argv[1]
    if what == "numpy-count":
        numpy_count()
    elif what.startswith("torch-"):
        try:
            import torch  # noqa: F401
        except ImportError:
            print("check_mismatch: torch cannot be imported: skipped")
            sys.exit(77)
        torch_mismatch(what == "torch-dtype")
    else:
        sys.exit(f"check_mismatch: unknown case {what}")


main()
