"""The part of Horovod's API that does not depend on the framework, on libddl: the reduction
ops, the global process set, joining and leaving the job, and the ranks. horovod.torch and
horovod.tensorflow re-export it; init() takes the framework's module name for its errors."""

import numpy as np

import ddl

Average, Sum, Adasum, Min, Max, Product = 0, 1, 2, 3, 4, 5
NOT_INITIALIZED = "Horovod has not been initialized; use hvd.init()."


class _GlobalProcessSet:
    """The only process set: every rank of the job."""

    process_set_id = 0

    def __repr__(self):
        return "global_process_set"


global_process_set = _GlobalProcessSet()
_cross = {}  # this rank's place among the ranks of its local_rank: {"rank": ..., "size": ...}


def init(framework, comm=None, process_sets=None):
    """Joins the job ddlrun started (ddl.init()); a second call does nothing. `framework`
    ("horovod.torch", ...) names the API in the errors."""
    if comm is not None:
        raise ValueError(f"hvd.init(comm=...): {framework} on libddl takes no MPI communicator; "
                         "run the script with ddlrun, which gives every rank its place")
    if process_sets not in (None, [], "dynamic"):
        raise ValueError(f"hvd.init(process_sets=...): {framework} on libddl has only the "
                         "global process set")
    ddl.init()
    if not _cross:
        local = ddl.allgather(np.array([ddl.local_rank()], dtype=np.int64)).tolist()
        peers = [r for r, lr in enumerate(local) if lr == ddl.local_rank()]
        _cross.update(rank=peers.index(ddl.rank()), size=len(peers))


def shutdown():
    """Leaves the job; init() may be called again."""
    _cross.clear()
    ddl.finalize()


def is_initialized():
    return ddl.initialized() and bool(_cross)


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
