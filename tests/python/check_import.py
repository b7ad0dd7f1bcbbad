"""`import ddl` outside a job: the package imports, the first call raises ddl.Error with the
runtime's "run it with ddlrun" message, and DDL_ALLOW_SINGLE=1 makes a job of one rank.

How it works: each case runs a child /usr/bin/python3 (this interpreter) with the launchers'
variables removed from its environment, so it is not part of any job, and checks its output.
Exits 0 when every case holds.
"""

import os
import subprocess
import sys

LAUNCHER_VARIABLES = ("DDL_RANK", "OMPI_COMM_WORLD_RANK", "JSM_NAMESPACE_RANK", "SLURM_PROCID",
                      "PMI_RANK", "PMIX_NAMESPACE", "PMIX_SERVER_URI2", "PMIX_SERVER_URI3",
                      "PMIX_SERVER_URI4", "PMIX_SERVER_URI41", "PMIX_SERVER_URI21",
                      "DDL_ALLOW_SINGLE")


def run(code, **extra):
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    env.update(extra)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)
    return done.returncode, done.stdout + done.stderr


NOT_LAUNCHED = """
import ddl
assert not ddl.initialized()
try:
    ddl.rank()
except ddl.Error as e:
    assert isinstance(e, RuntimeError)
    print("status", e.status)
    print("message", e)
else:
    print("no error")
"""

SINGLE = """
import numpy as np
import ddl
print(ddl.rank(), ddl.size(), ddl.local_rank(), ddl.local_size(), ddl.local_gpuid())
x = np.arange(5, dtype=np.float32)
ddl.allreduce(x, op="avg")
assert list(x) == [0, 1, 2, 3, 4]
assert list(ddl.allgather(x)) == [0, 1, 2, 3, 4]
assert list(ddl.reduce_scatter(x)) == [0, 1, 2, 3, 4]
ddl.barrier()
ddl.finalize()
assert not ddl.initialized()
ddl.init()
assert ddl.initialized() and ddl.size() == 1
print("single ok")
"""


def main():
    failures = []
    status, out = run(NOT_LAUNCHED)
    print(out, end="")
    if status != 0 or "status 3" not in out or "run it with ddlrun" not in out or \
            "DDL_ALLOW_SINGLE=1" not in out:
        failures.append("not launched: want ddl.Error (status 3) naming ddlrun and "
                        "DDL_ALLOW_SINGLE=1")
    status, out = run(SINGLE, DDL_ALLOW_SINGLE="1")
    print(out, end="")
    if status != 0 or "0 1 0 1 -1" not in out or "single ok" not in out:
        failures.append("DDL_ALLOW_SINGLE=1: want a working job of one rank")
    for failure in failures:
        print("check_import:", failure, file=sys.stderr)
    sys.exit(1 if failures else 0)


main()
