"""A collective matched by name (ddl._negotiate, under Horovod's and TensorFlow's calls) that
another rank has not called yet is named on standard error after DDL_STALL_SECONDS, once, and
still runs when that rank comes. Each rank prints "rank R of N ok".

How it works: rank 0 submits "late" at once, every other rank 2.5 s later; with
DDL_STALL_SECONDS=1 rank 0's standard error (a temporary file in its place) must name the
call, and the sum must be right on every rank.
"""

import os
import sys
import tempfile
import time

os.environ["DDL_STALL_SECONDS"] = "1"

import numpy as np  # noqa: E402

import ddl  # noqa: E402
from ddl import _negotiate  # noqa: E402

rank, n = ddl.rank(), ddl.size()
saved = os.dup(2)
with tempfile.TemporaryFile() as err:
    os.dup2(err.fileno(), 2)
    try:
        if rank:
            time.sleep(2.5)
        x = np.array([rank + 1.0])
        _negotiate.submit("late", lambda: ddl.allreduce(x)).wait()
    finally:
        os.dup2(saved, 2)
    err.seek(0)
    said = err.read().decode()
if x[0] != n * (n + 1) / 2:
    sys.exit(f"rank {rank}: 'late' gave {x[0]}")
want = f"ddl: rank 0 has waited 1 s for the collective 'late', which another rank has not"
if rank == 0 and (want not in said or said.count("'late'") != 1):
    sys.exit(f"rank 0: standard error {said!r} does not name 'late' once ({want!r})")
print(f"rank {rank} of {n} ok", flush=True)
