"""A peer lost in the middle of a job: the ddl backend's work fails with libddl's error.

How it works: run as an N-rank job (N >= 2). After one all_reduce that works, the last rank
prints "rank R of N ok" and leaves at once (os._exit(0), as a process killed mid-training
would, without finalising); ddlrun lets the others go on, since it ended with status 0. Their
next all_reduce must fail, through work.wait(), with a RuntimeError (ddl.Error, status
DDL_ERR_TRANSPORT) whose text is libddl's and names the peer that failed it (the lost rank, or
a rank that failed before this one's turn came: "rank 3 (host): the process has exited"); then
they print "rank R of N ok" and leave the same way (the job's links are broken).
"""

import os
import re
import sys

import torch
import torch.distributed as dist

import ddl
import ddl.torch  # noqa: F401  (registers the backend "ddl")


def main():
    dist.init_process_group("ddl")
    rank, n = dist.get_rank(), dist.get_world_size()
    t = torch.ones(1 << 20)
    dist.all_reduce(t)
    assert torch.all(t == n)
    if rank == n - 1:
        print(f"rank {rank} of {n} ok", flush=True)
        os._exit(0)
    work = dist.all_reduce(t, async_op=True)
    try:
        work.wait()
    except RuntimeError as e:
        text = str(e)
        if not isinstance(e, ddl.Error) or e.status != 4:  # DDL_ERR_TRANSPORT
            sys.exit(f"rank {rank}: {type(e).__name__} status {getattr(e, 'status', None)}: "
                     f"{text}")
        named = re.match(r"ddl backend: allreduce: rank (\d+) \(", text)
        if not named or not 0 <= int(named[1]) < n or int(named[1]) == rank:
            sys.exit(f"rank {rank}: the error does not name the peer: {text}")
        if rank == 0:
            print(f"libddl's error as Python sees it: {text}", flush=True)
    else:
        sys.exit(f"rank {rank}: all_reduce with rank {n - 1} gone did not fail")
    print(f"rank {rank} of {n} ok", flush=True)
    os._exit(0)


main()
