"""init_process_group('ddl', timeout=...) is honoured: the group's timeout becomes libddl's
DDL_TIMEOUT, so a collective that a rank does not join within it fails on the others with
libddl's timeout error instead of waiting for ever; torch's default timeout leaves DDL_TIMEOUT
alone. Run as an N-rank job: rank 1 sleeps past the timeout before its all_reduce; the
others' all_reduce must fail after about the timeout (rank 1's may fail or, its peers' data
being there already, succeed). Each rank prints "rank R of N ok".
"""

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

TIMEOUT = 6.0


def main():
    dist.init_process_group('ddl', init_method='env://',
                            timeout=datetime.timedelta(seconds=TIMEOUT))
    rank, n = dist.get_rank(), dist.get_world_size()
    if os.environ.get("DDL_TIMEOUT") != f"{TIMEOUT:g}":
        sys.exit(f"rank {rank}: DDL_TIMEOUT is {os.environ.get('DDL_TIMEOUT')}")
    t = torch.ones(4)
    dist.all_reduce(t)  # every rank is there: no timeout
    if rank == 1:
        time.sleep(TIMEOUT + 6)
    started = time.monotonic()
    try:
        dist.all_reduce(t)
        if rank != 1:
            sys.exit(f"rank {rank}: an all_reduce that rank 1 joined {TIMEOUT + 6:g}s late "
                     "succeeded")
    except RuntimeError as e:
        took = time.monotonic() - started
        if rank != 1 and not TIMEOUT - 1 <= took <= TIMEOUT + 5:
            sys.exit(f"rank {rank}: failed after {took:.1f}s, not about {TIMEOUT:g}s: {e}")
        print(f"rank {rank}: {took:.1f}s: {e}", flush=True)
    print(f"rank {rank} of {n} ok", flush=True)


main()
