"""`import ddl` outside a job: the package imports, the first call raises ddl.Error with the
runtime's "run it with ddlrun" message, and DDL_ALLOW_SINGLE=1 makes a job of one rank. The
same for init_process_group("ddl") (when torch and ddl._torch_pg are there), and a group whose
size is not the job's is refused with both sizes named. Where Keras is missing (Debian's
python3), ddl.DDLCallback says what to install instead of a bare ModuleNotFoundError.

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

TORCH_GROUP = """
import sys
import torch, torch.distributed as dist
import ddl.torch
size = int(sys.argv[1]) if len(sys.argv) > 1 else 1
try:
    dist.init_process_group("ddl", store=dist.HashStore(), rank=0, world_size=size)
except RuntimeError as e:
    print("error", e)
    sys.exit(0)
group = dist.distributed_c10d._get_default_group()
print(type(group).__name__, group.size())
t = torch.arange(5.0)
dist.all_reduce(t, op=dist.ReduceOp.AVG)
assert t.tolist() == [0, 1, 2, 3, 4]
work = dist.broadcast(t, src=0, async_op=True)
work.wait()
assert work.is_completed()
dist.barrier()
dist.destroy_process_group()
print("torch single ok")
"""


def has_torch_backend():
    code = "import torch.distributed, ddl._torch_pg"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def check_torch(failures):
    if not has_torch_backend():
        print("check_import: no torch or no ddl._torch_pg: the ddl backend's cases skipped")
        return
    status, out = run(TORCH_GROUP)
    print(out, end="")
    # No launcher: the ranks meet through the store torch hands the backend (as under torchrun),
    # so a world of one with its own store works, as gloo's does.
    if status != 0 or "ProcessGroupDdl 1" not in out or "torch single ok" not in out:
        failures.append('init_process_group("ddl") not launched, with a store: want a working '
                        "group of one")
    status, out = run(TORCH_GROUP, DDL_ALLOW_SINGLE="1")
    print(out, end="")
    if status != 0 or "ProcessGroupDdl 1" not in out or "torch single ok" not in out:
        failures.append('init_process_group("ddl") with DDL_ALLOW_SINGLE=1: want a working '
                        "group of one")
    status, out = run(TORCH_GROUP.replace("int(sys.argv[1]) if len(sys.argv) > 1 else 1", "2"),
                      DDL_ALLOW_SINGLE="1")
    print(out, end="")
    want = ("error ddl backend: torch asks for rank 0 of 2 but the job is rank 0 of 1; the "
            "default group is the whole job (new_group makes smaller ones)")
    if status != 0 or want not in out:
        failures.append(f"a group of 2 in a job of 1: want {want!r}")
    late = TORCH_GROUP.replace(
        "world_size=size)",
        "world_size=size, timeout=__import__('datetime').timedelta(seconds=5))").replace(
        "import ddl.torch", "import ddl.torch; ddl.init()")
    status, out = run(late, DDL_ALLOW_SINGLE="1")
    print(out, end="")
    # A timeout other than DDL_TIMEOUT once libddl runs is the group's own (a libddl group of
    # every rank with that timeout), not an error.
    if status != 0 or "ProcessGroupDdl 1" not in out or "torch single ok" not in out:
        failures.append("a timeout once libddl runs: want a working group with its own timeout")


NO_KERAS = """
import ddl
try:
    ddl.DDLCallback
except ModuleNotFoundError as e:
    print("missing:", e.name, "|", e)
"""


def check_keras_missing(failures):
    """Where keras does not import, the lazy ddl.DDLCallback names what to install."""
    if run("import keras")[0] == 0:
        print("check_import: keras imports here; the missing-Keras case is not tried")
        return
    status, out = run(NO_KERAS)
    print(out, end="")
    want = (f"ddl.DDLCallback needs TensorFlow and Keras, and this Python ({sys.executable}) "
            "has no ")
    if status != 0 or want not in out or "pip install tensorflow" not in out:
        failures.append(f"no keras: want '{want}...pip install tensorflow'")


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
    check_torch(failures)
    check_keras_missing(failures)
    for failure in failures:
        print("check_import:", failure, file=sys.stderr)
    sys.exit(1 if failures else 0)


main()
