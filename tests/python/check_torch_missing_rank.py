"""A rank that never calls init_process_group("ddl"): the others' init names it and its host.

How it works: run as an N-rank job of ddlrun on localhost (N >= 2; run_job.sh). The last rank
never joins: it waits until the others have given up (their files "gave_up.R" in a directory
of the job's own under $TMPDIR, at most 40 s), prints "rank R of N ok" and leaves. Every other
rank calls init_process_group("ddl") with a 3 s timeout, which must fail within 20 s with an
error naming the missing rank and its host as libddl does ("rank 1 (localhost) did not reach
ddl_init within 3 s"), not torch's store's count ("Timed out after 3 seconds waiting for
clients. 1/2 clients joined."); then it prints "rank R of N ok".
"""

import datetime
import os
import re
import shutil
import sys
import tempfile
import time

import torch.distributed as dist


def main():
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    missing = n - 1
    check_dir = os.path.join(tempfile.gettempdir(), f"check-missing-rank-{os.environ['DDL_JOB_ID']}")
    os.makedirs(check_dir, exist_ok=True)
    if rank == missing:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            if all(os.path.exists(os.path.join(check_dir, f"gave_up.{r}")) for r in range(missing)):
                break
            time.sleep(0.1)
        shutil.rmtree(check_dir, ignore_errors=True)
        print(f"rank {rank} of {n} ok", flush=True)
        return
    start = time.monotonic()
    try:
        dist.init_process_group("ddl", timeout=datetime.timedelta(seconds=3))
    except Exception as e:  # torch's errors differ in type across versions: the text decides
        text = str(e)
    else:
        sys.exit(f"rank {rank}: init_process_group succeeded without rank {missing}")
    finally:
        open(os.path.join(check_dir, f"gave_up.{rank}"), "w").close()
    took = time.monotonic() - start
    host = "localhost"
    if not re.search(rf"\brank {missing} \({re.escape(host)}\)", text):
        sys.exit(f"rank {rank}: the error does not name rank {missing} on {host}: {text}")
    if "clients joined" in text:
        sys.exit(f"rank {rank}: torch's store count instead of the rank's name: {text}")
    if took > 20:
        sys.exit(f"rank {rank}: init took {took:.1f} s to fail")
    print(f"rank {rank} of {n} ok", flush=True)


if __name__ == "__main__":
    main()
