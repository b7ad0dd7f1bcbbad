"""The part of Horovod's API that does not depend on the framework, on libddl: the reduction
ops, the global process set, joining and leaving the job, and the ranks. horovod.torch and
horovod.tensorflow re-export it; init() takes the framework's module name for its errors.
Collectives go through horovod.common.controller (matched by name, checked before they run);
process sets: horovod.common.process_sets."""

import os

import numpy as np

import ddl

from . import controller, timeline
from . import process_sets as _sets
from .process_sets import global_process_set  # noqa: F401 (horovod.tensorflow imports it here)

Average, Sum, Adasum, Min, Max, Product = 0, 1, 2, 3, 4, 5
NOT_INITIALIZED = "Horovod has not been initialized; use hvd.init()."
DDL_OPS = {Average: "avg", Sum: "sum", Min: "min", Max: "max", Product: "prod"}

_cross = {}  # this rank's place among the ranks of its local_rank: {"rank": ..., "size": ...}
_state = {"initialized": False}


def init(framework, comm=None, process_sets=None):
    """Joins the job ddlrun started (ddl.init()); a second call does nothing. `framework`
    ("horovod.torch", ...) names the API in the errors. process_sets: ProcessSets (or lists of
    ranks) to add, the same on every rank. HOROVOD_TIMELINE=path records a timeline into path
until shutdown() (HOROVOD_TIMELINE_MARK_CYCLES=1: with cycle marks; DYNAMIC: none until
start_timeline())."""
    if comm is not None:
        raise ValueError(f"hvd.init(comm=...): {framework} on libddl takes no MPI communicator; "
                         "run the script with ddlrun, which gives every rank its place")
    ddl.init()
    if not _cross:
        mine = np.array([[ddl.local_rank()]], dtype=np.int64)
        local = controller.run("init", None, lambda: ddl.allgather(mine), ("init",)).wait()
        peers = [r for r, lr in enumerate(local.reshape(-1).tolist()) if lr == ddl.local_rank()]
        _cross.update(rank=peers.index(ddl.rank()), size=len(peers))
    _state["initialized"] = True
    path = os.environ.get("HOROVOD_TIMELINE", "")
    if path and path != "DYNAMIC":
        timeline.start_timeline(path, os.environ.get("HOROVOD_TIMELINE_MARK_CYCLES", "0") == "1")
    if process_sets not in (None, "dynamic"):
        _sets.add_process_sets(process_sets)


def _get_process_set_ids_and_ranks():
    """{id: ranks} of every registered process set (Horovod's internal, read by its tests)."""
    return _sets.ids_and_ranks()


def resolve_op(op, average, what, framework):
    """Horovod's op from op= and the deprecated average= (Average when neither), as Horovod's
    handle_average_backwards_compatibility; Adasum (refused by `framework`, e.g.
    "horovod.torch": libddl has none) and unknown ops raise, naming hvd.<what>."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if op is None:
        op = Average if average is None or average else Sum
    if op == Adasum:
        raise NotImplementedError(f"hvd.{what}: op Adasum is not supported by {framework} on "
                                  "libddl (libddl has no Adasum reduction): use hvd.Average or "
                                  "hvd.Sum")
    if op not in DDL_OPS:
        raise ValueError(f"hvd.{what}: unknown op {op!r}: one of hvd.Average, hvd.Sum, hvd.Min, "
                         "hvd.Max, hvd.Product")
    return op


def shutdown():
    """Leaves Horovod's API: forgets the calls in flight and removes the process sets; init()
    may be called again. The process stays in libddl's job (it leaves at exit), so a
    shutdown followed by init() costs nothing and cannot race with the other ranks."""
    if not _state["initialized"]:
        return
    _state["initialized"] = False
    timeline.stop_timeline()
    controller.reset()
    _sets.reset()


def is_initialized():
    return _state["initialized"]


def _job(what):
    if not is_initialized():
        raise ValueError(NOT_INITIALIZED)
    return what()


def rank():
    return _job(ddl.rank)


def size():
    return _job(ddl.size)


def local_rank():
    return _job(ddl.local_rank)


def local_size():
    return _job(ddl.local_size)


def cross_rank():
    """This rank's index among the ranks with its local_rank (its host's index, one per host)."""
    return _job(lambda: _cross["rank"])


def cross_size():
    """The number of ranks with this rank's local_rank (the number of hosts)."""
    return _job(lambda: _cross["size"])


def is_homogeneous():
    return _job(lambda: ddl.size() == _cross["size"] * ddl.local_size())


def _no():
    return False


mpi_threads_supported = mpi_built = mpi_enabled = gloo_built = gloo_enabled = _no
nccl_built = cuda_built = rocm_built = ccl_built = _no


def ddl_built():
    return True
