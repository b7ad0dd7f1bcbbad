"""The torch.distributed backend "ddl": init_process_group("ddl") runs on libddl.

How it works: torch 1.13 lets Python subclass c10d's ProcessGroup (its pybind11 trampoline sends
the C++ virtual calls, DistributedDataParallel's included, to these methods). Each method runs
the collective at once through ddl's zero-copy calls on CPU tensors (the GIL released while
libddl communicates) and returns a Work that is already complete, with a completed future (what
DDP's reducer waits on). The store and addresses init_process_group hands over are not needed:
ddl.init() finds the job from the launcher's variables, and its rank and size must agree.
Registered by `import ddl.torch`.
"""

import collections

import torch
import torch.distributed as dist

import ddl

_OPS = {
    dist.ReduceOp.SUM: "sum", dist.ReduceOp.PRODUCT: "prod", dist.ReduceOp.MIN: "min",
    dist.ReduceOp.MAX: "max",
}
if hasattr(dist.ReduceOp, "AVG"):
    _OPS[dist.ReduceOp.AVG] = "avg"


class _DoneWork(dist._Work):
    """A collective that has already finished; result() and get_future() give its tensors."""

    # torch 1.13's trampoline finds wait() only while the Python object lives; c10d keeps just
    # the C++ side, so the last works are kept alive here (else wait() would block forever).
    _alive = collections.deque(maxlen=1024)

    def __init__(self, result):
        super().__init__()
        _DoneWork._alive.append(self)
        self._result = result
        self._future = torch.futures.Future()
        self._future.set_result(result)

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def is_success(self):
        return True

    def result(self):
        return self._result

    def get_future(self):
        return self._future


def _op(opts):
    try:
        return _OPS[opts.reduceOp]
    except KeyError:
        raise ValueError(f"ddl backend: reduce op {opts.reduceOp} is not supported") from None


def _in_place(tensor, call):
    """call(t) on a contiguous CPU tensor sharing tensor's data, or on a copy written back."""
    if tensor.device.type != "cpu":
        raise ValueError(f"ddl backend: a {tensor.device.type} tensor; it takes CPU tensors")
    if tensor.is_contiguous():
        call(tensor)
    else:
        copy = tensor.contiguous()
        call(copy)
        tensor.copy_(copy)


class ProcessGroupDdl(dist.ProcessGroup):
    """c10d's ProcessGroup over libddl (CPU tensors)."""

    def __init__(self, rank, size):
        super().__init__(rank, size)
        if ddl.rank() != rank or ddl.size() != size:
            raise ddl.Error(f"ddl backend: torch asks for rank {rank} of {size} but the job "
                            f"is rank {ddl.rank()} of {ddl.size()}")

    def getBackendName(self):
        return "ddl"

    def allreduce(self, tensors, opts=None):
        op = _op(opts) if opts is not None else "sum"
        for tensor in tensors:
            _in_place(tensor, lambda t: ddl.allreduce(t, op=op))
        return _DoneWork(tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors, opts):
        for tensor in tensors:
            _in_place(tensor, lambda t: ddl.broadcast(t, opts.rootRank))
        return _DoneWork(tensors)

    def allgather(self, output_lists, inputs, opts=None):
        for outputs, tensor in zip(output_lists, inputs):
            gathered = ddl.allgather(tensor.contiguous().reshape(-1))
            for piece, out in zip(gathered.chunk(len(outputs)), outputs):
                out.copy_(piece.reshape(out.shape))
        return _DoneWork(output_lists)

    def _allgather_base(self, output, tensor, opts=None):
        output.copy_(ddl.allgather(tensor.contiguous().reshape(-1)).reshape(output.shape))
        return _DoneWork([output])

    def reduce_scatter(self, outputs, input_lists, opts=None):
        op = _op(opts) if opts is not None else "sum"
        for out, inputs in zip(outputs, input_lists):
            flat = torch.cat([t.reshape(-1) for t in inputs])
            out.copy_(ddl.reduce_scatter(flat, op=op).reshape(out.shape))
        return _DoneWork(outputs)

    def _reduce_scatter_base(self, output, tensor, opts=None):
        op = _op(opts) if opts is not None else "sum"
        output.copy_(ddl.reduce_scatter(tensor.contiguous().reshape(-1), op=op)
                     .reshape(output.shape))
        return _DoneWork([output])

    def barrier(self, opts=None):
        ddl.barrier()
        return _DoneWork([])


def _create(store, rank, size, timeout):
    del store, timeout  # ddl finds the job itself; $DDL_TIMEOUT bounds its start
    return ProcessGroupDdl(rank, size)


def register():
    """Makes init_process_group("ddl") use ProcessGroupDdl (once per process)."""
    if not hasattr(dist.Backend, "DDL"):
        dist.Backend.register_backend("ddl", _create)
