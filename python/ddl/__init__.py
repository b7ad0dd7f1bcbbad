"""ddl: libddl's collectives for Python, on numpy arrays and torch CPU tensors.

How it works: each call checks its arrays (C-contiguous, one supported dtype, writable where it is
written, the right sizes), takes their data pointers and calls libddl through the extension
``ddl._ddl`` with the GIL released, so nothing is copied: ``allreduce(x)`` works on ``x`` in
place, ``allreduce(x, out=y)`` writes ``y``. The first call of anything initialises the runtime
(``init()``), which finds the job from the launcher's variables; a script not started by ddlrun
(or mpirun, srun, ...) gets ``ddl.Error`` with the runtime's message, unless DDL_ALLOW_SINGLE=1
makes it a job of one rank. Every rank must make the same calls in the same order with the same
sizes, as with the C API (libddl(3)): when they do not, the call raises ``ddl.MismatchError`` (a
``ddl.Error``, status ``ERR_MISMATCH``) on every rank, naming two ranks and their calls, and so
does every later one. Collectives queued on ddl's worker thread (the asynchronous calls of
ddl.torch and horovod.torch) run first: a direct call waits for them (ddl._worker).

    import numpy as np, ddl
    grad = np.ones(1000, dtype=np.float32)
    ddl.allreduce(grad, op="avg")        # in place, on every rank
    print(ddl.rank(), ddl.size(), grad[0])
"""

import sys

from . import _ddl, _worker
from ._ddl import ERR_MISMATCH, Error, MismatchError

__all__ = [
    "Error", "MismatchError", "ERR_MISMATCH", "init", "finalize", "initialized", "rank", "size",
    "local_rank", "local_size", "local_gpuid", "allreduce", "allreduce_n", "broadcast",
    "allgather", "reduce_scatter", "barrier",
]

# ddl_datatype_t and ddl_op_t (ddl/ddl.h).
_NUMPY_TYPES = {"f4": 0, "f8": 1, "f2": 2, "i4": 4, "i8": 5, "u1": 6}
_TORCH_TYPES = {
    "torch.float32": 0, "torch.float64": 1, "torch.float16": 2, "torch.bfloat16": 3,
    "torch.int32": 4, "torch.int64": 5, "torch.uint8": 6,
}
_OPS = {"sum": 0, "avg": 1, "min": 2, "max": 3, "prod": 4}


def init():
    """Joins the job (ddl_init); does nothing when already initialised.

    Also makes an uncaught KeyboardInterrupt (Ctrl-C, which ddlrun passes to every rank) end
    the rank with one line, "rank R: interrupted (KeyboardInterrupt)", instead of a traceback
    from every rank, unless the program set its own sys.excepthook. The exit is still by SIGINT
    (status 130 under ddlrun), and ``except KeyboardInterrupt`` works as always.
    """
    if not _ddl.initialized():
        _ddl.init()
        if sys.excepthook is sys.__excepthook__:
            sys.excepthook = _one_line_interrupt(_ddl.rank(), sys.excepthook)


def _one_line_interrupt(rank, previous):
    """An excepthook that reports an uncaught KeyboardInterrupt in one line."""

    def hook(kind, value, tb):
        if issubclass(kind, KeyboardInterrupt):
            try:
                print(f"rank {rank}: interrupted (KeyboardInterrupt)", file=sys.stderr,
                      flush=True)
            except (OSError, ValueError):
                pass  # stderr closed: nothing to say it on
            return
        previous(kind, value, tb)

    return hook


def finalize():
    """Leaves the job (ddl_finalize); init() may be called again afterwards."""
    if _ddl.initialized():
        _worker.drain()
        _ddl.finalize()


def initialized():
    """True between init() and finalize()."""
    return _ddl.initialized()


def rank():
    """This process's rank, 0..size()-1."""
    init()
    return _ddl.rank()


def size():
    """The number of ranks in the job."""
    init()
    return _ddl.size()


def local_rank():
    """This rank among the ranks on its host."""
    init()
    return _ddl.local_rank()


def local_size():
    """The number of ranks on this host."""
    init()
    return _ddl.local_size()


def local_gpuid():
    """The CUDA index (on this host) the mapper gave this rank, -1 for none."""
    init()
    return _ddl.local_gpu()


class _View:
    """One array or tensor as libddl sees it: address, element count, ddl type."""

    __slots__ = ("obj", "address", "count", "type", "is_torch")

    def __init__(self, obj, what, writable):
        if _is_torch(obj):
            if obj.device.type != "cpu":
                raise TypeError(f"{what}: a {obj.device.type} tensor; ddl takes CPU tensors")
            if not obj.is_contiguous():
                raise ValueError(f"{what}: the tensor is not contiguous (use .contiguous())")
            key = str(obj.dtype)
            if key not in _TORCH_TYPES:
                raise TypeError(f"{what}: dtype {key} is not one of {', '.join(_TORCH_TYPES)}")
            self.address, self.count, self.type = obj.data_ptr(), obj.numel(), _TORCH_TYPES[key]
            self.is_torch = True
        else:
            import numpy

            if not isinstance(obj, numpy.ndarray):
                raise TypeError(f"{what}: a {type(obj).__name__}; ddl takes numpy arrays and "
                                "torch tensors")
            if not obj.flags.c_contiguous:
                raise ValueError(f"{what}: the array is not C-contiguous "
                                 "(use numpy.ascontiguousarray)")
            if writable and not obj.flags.writeable:
                raise ValueError(f"{what}: the array is read-only")
            key = obj.dtype.str[1:]
            if key not in _NUMPY_TYPES:
                raise TypeError(f"{what}: dtype {obj.dtype} is not one of float32, float64, "
                                "float16, int32, int64, uint8")
            self.address = obj.__array_interface__["data"][0]
            self.count, self.type = obj.size, _NUMPY_TYPES[key]
            self.is_torch = False
        self.obj = obj


def _is_torch(obj):
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


def _op(op):
    try:
        return _OPS[op]
    except KeyError:
        raise ValueError(f"unknown op {op!r}: one of {', '.join(_OPS)}") from None


def _empty_like(view, shape):
    """A new array (or tensor) of `view`'s kind and dtype."""
    if view.is_torch:
        import torch

        return torch.empty(shape, dtype=view.obj.dtype)
    import numpy

    return numpy.empty(shape, dtype=view.obj.dtype)


def allreduce(x, op="sum", out=None):
    """Reduces x over every rank with op (sum, avg, min, max, prod).

    In place (returns x) unless out is given: then x is only read and out (same dtype and
    number of elements) receives the result and is returned."""
    init()
    _worker.drain()
    send = _View(x, "allreduce", writable=out is None)
    recv = send if out is None else _View(out, "allreduce: out", writable=True)
    if recv.type != send.type or recv.count != send.count:
        raise ValueError("allreduce: out must have x's dtype and number of elements")
    if send.count:
        _ddl.allreduce(send.address, recv.address, send.count, send.type, _op(op))
    return recv.obj


def allreduce_n(tensors, op="sum"):
    """Reduces every array or tensor of the list in place, fused into large buckets.

    Mixed dtypes are reduced one dtype at a time, in ddl type order. Returns the list."""
    init()
    _worker.drain()
    views = [_View(t, f"allreduce_n: item {i}", writable=True) for i, t in enumerate(tensors)]
    code = _op(op)
    for type_code in sorted({v.type for v in views}):
        group = [v for v in views if v.type == type_code and v.count]
        if group:
            _ddl.allreduce_n([v.address for v in group], [v.count for v in group], type_code,
                             code)
    return tensors


def broadcast(x, root=0):
    """Copies root's x into every rank's x (in place); returns x."""
    init()
    _worker.drain()
    view = _View(x, "broadcast", writable=True)
    if view.count:
        _ddl.bcast(view.address, view.count, view.type, root)
    return x


def allgather(x):
    """A new array holding every rank's x by rank, stacked on the first axis.

    Shape (size * n, ...) for x of shape (n, ...); (size,) for a scalar array."""
    init()
    _worker.drain()
    send = _View(x, "allgather", writable=False)
    shape = tuple(x.shape)
    out_shape = (_ddl.size() * shape[0],) + shape[1:] if shape else (_ddl.size(),)
    out = _empty_like(send, out_shape)
    if send.count:
        _ddl.allgather(send.address, _View(out, "allgather", True).address, send.count, send.type)
    return out


def reduce_scatter(x, op="sum"):
    """This rank's share of op over every rank's x, as a new array.

    x's element count must divide by size(); rank r gets chunk r. Shape (n / size, ...) when x's
    first axis n divides by size(), else flat."""
    init()
    _worker.drain()
    send = _View(x, "reduce_scatter", writable=False)
    n = _ddl.size()
    if send.count % n:
        raise ValueError(f"reduce_scatter: {send.count} elements do not divide among {n} ranks")
    shape = tuple(x.shape)
    if shape and shape[0] % n == 0:
        out_shape = (shape[0] // n,) + shape[1:]
    else:
        out_shape = (send.count // n,)
    out = _empty_like(send, out_shape)
    if send.count:
        _ddl.reduce_scatter(send.address, _View(out, "reduce_scatter", True).address,
                            send.count // n, send.type, _op(op))
    return out


def barrier():
    """Returns once every rank has entered."""
    init()
    _worker.drain()
    _ddl.barrier()
