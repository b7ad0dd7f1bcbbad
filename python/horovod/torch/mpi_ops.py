"""horovod.torch's job shape and collectives, on the package ddl (libddl).

How it works: every collective, synchronous or not, is submitted to horovod.common.controller
under Horovod's name for it ("allreduce.<name>", or "allreduce.noname.<N>") with a signature of
what every member's call must agree on (dtype, shape or the dimensions after the first, op,
scale factors, root), in its process set's ddl group. It runs on ddl's worker thread once every
member has called it (the ranks may call them in different orders); a call whose signatures
differ runs nowhere and raises ddl.MismatchError on every member, and the job goes on. An
asynchronous call returns an integer handle for poll() and synchronize(); a synchronous call
waits for it (_now: the negotiation then runs on the calling thread where ddl offers
_negotiate.submit_now). allreduce, grouped_allreduce, allgather, grouped_allgather, broadcast,
alltoall, reducescatter and grouped_reducescatter are autograd functions (autograd.py). What
travels and how: wire.py. Ops map to libddl's (Average: avg, Sum, Min, Max, Product); Adasum is refused.
"""

import itertools
import threading

import torch

import ddl

from ..common import basics as _basics
from ..common import controller as _controller
from ..common.basics import (DDL_OPS, NOT_INITIALIZED, Adasum, Average, Max, Min, Product, Sum,
                             ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built,
                             gloo_enabled, is_homogeneous, is_initialized, local_rank, local_size,
                             mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, rank,
                             rocm_built, size)
from ..common.exceptions import HorovodInternalError
from ..common.process_sets import (ProcessSet, add_process_set, global_process_set, group_of,
                                   remove_process_set, root_of)
from . import wire

__all__ = [
    "Adasum", "Average", "Max", "Min", "Product", "Sum", "ccl_built", "cross_rank", "cross_size",
    "cuda_built", "ddl_built", "gloo_built", "gloo_enabled", "is_homogeneous", "is_initialized",
    "local_rank", "local_size", "mpi_built", "mpi_enabled", "mpi_threads_supported",
    "nccl_built", "rank", "rocm_built", "size", "HorovodInternalError", "ProcessSet",
    "add_process_set", "global_process_set", "remove_process_set", "NOT_INITIALIZED",
]

_API = "horovod.torch"  # the API named in the errors
mlsl_built = _basics._no
_handles = {}  # integer handle -> (controller handle, function of its result)
_handle_ids = itertools.count(1)
_here = threading.local()  # .now: the caller of _submit waits for it at once (_now)


def init(comm=None, process_sets=None):
    """Joins the job ddlrun started (ddl.init()); a second call does nothing."""
    _basics.init(_API, comm, process_sets)


def shutdown():
    """Leaves Horovod's API (handles dropped, process sets removed); init() may follow."""
    _handles.clear()
    _basics.shutdown()


def resolve_op(op, average=None, what="allreduce"):
    """Horovod's op for op= (or the deprecated average=), Average when neither (basics)."""
    return _basics.resolve_op(op, average, what, _API)


def _check(tensors, process_set, what):
    """Horovod's checks: initialised, contiguous CPU tensors; the process set's ddl group."""
    if not is_initialized():
        raise ValueError(NOT_INITIALIZED)
    for t in tensors:
        if not t.is_contiguous():
            raise ValueError("Tensor is required to be contiguous.")
        if t.device.type != "cpu":
            raise ValueError(f"hvd.{what}: a {t.device.type} tensor; horovod.torch on libddl "
                             "takes CPU tensors (move it with .cpu())")
    return group_of(process_set, what)


def _copy(tensor):
    """A contiguous copy outside autograd (the output of a call that keeps its input)."""
    return tensor.detach().clone(memory_format=torch.contiguous_format)


def _submit(kind, name, fn, sig, group, finish=None):
    """An integer handle of the collective fn (controller.run); synchronize() returns
    finish(fn's result) (fn's result when finish is None)."""
    handle = next(_handle_ids)
    now = getattr(_here, "now", False)
    _handles[handle] = (_controller.run(kind, name, fn, sig, group, now), finish)
    return handle


def _now(call, *args, **kwargs):
    """The output of the asynchronous `call`, waited for at once (the negotiation may then
    run on this thread: no hand-off to ddl's worker and back)."""
    _here.now = True
    try:
        handle = call(*args, **kwargs)
    finally:
        _here.now = False
    return synchronize(handle)


def poll(handle):
    """True when the operation of `handle` has finished (synchronize() will not block)."""
    if handle not in _handles:
        raise ValueError(f"hvd.poll: handle {handle} was not created or has been cleared "
                         "(synchronize() clears it)")
    return _handles[handle][0].done()


def synchronize(handle):
    """Waits for the operation of `handle`; its output (None for a handle not known)."""
    if handle not in _handles:
        return None
    work, finish = _handles.pop(handle)
    result = work.wait()
    return result if finish is None else finish(result)


def _sig(kind, tensors, *rest):
    return (kind, tuple((wire.dtype_name(t.dtype), tuple(t.shape)) for t in tensors)) + rest


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """Reduces every tensor of the list in place in one fused call; a handle (output: the
    list)."""
    return _allreduce_async("grouped_allreduce", list(tensors), average, name, op,
                            prescale_factor, postscale_factor, process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Reduces tensor in place over the process set (op: Average by default); a handle."""
    return _allreduce_async("allreduce", [tensor], average, name, op, prescale_factor,
                            postscale_factor, process_set, lambda out: out[0])


def _allreduce_async(kind, tensors, average, name, op, pre, post, process_set, finish=None):
    """allreduce_async_ (kind "allreduce") or grouped_allreduce_async_ of `tensors`."""
    code = DDL_OPS[resolve_op(op, average, kind)]
    group = _check(tensors, process_set, kind)
    for t in tensors:
        wire.reduce_dtype(t.dtype, kind)
    fn = wire.allreduce_fn(tensors, code, pre, post, group)
    sig = _sig("allreduce", tensors, code, float(pre), float(post))
    return _submit(kind, name, fn, sig, group, finish)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Reduces a copy of tensor (tensor is left alone); a handle whose output is the copy."""
    return allreduce_async_(_copy(tensor), average, name, op, prescale_factor,
                            postscale_factor, process_set)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces tensor in place; returns it."""
    return _now(allreduce_async_, tensor, average, name, op, prescale_factor, postscale_factor,
                process_set)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """grouped_allreduce_async_ on copies (the tensors are left alone)."""
    return grouped_allreduce_async_([_copy(t) for t in tensors], average, name, op,
                                    prescale_factor, postscale_factor, process_set)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return _now(grouped_allreduce_async_, tensors, average, name, op, prescale_factor,
                postscale_factor, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """A handle whose output is, for each tensor, every member's tensor concatenated on
    dimension 0 (first dimensions may differ between ranks)."""
    tensors = [_copy(t) for t in tensors]
    group = _check(tensors, process_set, "grouped_allgather")
    sig = ("allgather",) + tuple(_rows_sig(t) for t in tensors)
    return _submit("grouped_allgather", name, wire.gather_fn(tensors, group), sig, group,
                   finish=lambda out: [g for g, _ in out])


def allgather_async(tensor, name=None, process_set=global_process_set):
    """A handle whose output is every member's tensor concatenated on dimension 0."""
    return _allgather_async(tensor, name, process_set, lambda out: out[0][0])


def gathered_rows(tensor, name=None, process_set=global_process_set):
    """(every member's tensor concatenated, the members' first dimensions): allgather's
    forward, which its gradient needs."""
    return _now(_allgather_async, tensor, name, process_set, lambda out: out[0])


def _rows_sig(tensor):
    """What the members' tensors of an allgather agree on: dtype, dimensions, rows' shape."""
    return wire.dtype_name(tensor.dtype), max(tensor.dim(), 1), tuple(tensor.shape[1:])


def _allgather_async(tensor, name, process_set, finish):
    """The allgather of a copy of `tensor`; a handle whose output is finish([(gathered, rows)])."""
    tensor = _copy(tensor)
    group = _check([tensor], process_set, "allgather")
    return _submit("allgather", name, wire.gather_fn([tensor], group),
                   ("allgather",) + _rows_sig(tensor), group, finish)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Copies root_rank's tensor into every member's, in place; a handle."""
    group = _check([tensor], process_set, "broadcast")
    root = root_of(root_rank, process_set, "broadcast")
    sig = ("broadcast", wire.dtype_name(tensor.dtype), tuple(tensor.shape), root_rank)
    return _submit("broadcast", name, wire.broadcast_fn(tensor, root, group), sig, group)


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """broadcast_async_ on a copy (tensor is left alone)."""
    return broadcast_async_(_copy(tensor), root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Copies root_rank's tensor into every member's, in place; returns it."""
    return _now(broadcast_async_, tensor, root_rank, name, process_set)


def _alltoall_splits(x, splits, n):
    """splits as a list of n row counts (equal shares when None); ValueError otherwise."""
    if splits is None:
        if x.shape[0] % n:
            raise ValueError(f"hvd.alltoall: the first dimension ({x.shape[0]}) does not divide "
                             f"among {n} ranks: give splits=")
        return [x.shape[0] // n] * n
    if isinstance(splits, torch.Tensor) and splits.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"hvd.alltoall: splits must hold integers (int32), not "
                         f"{wire.dtype_name(splits.dtype)}")
    splits = [int(s) for s in torch.as_tensor(splits).reshape(-1).tolist()]
    if len(splits) != n or min(splits) < 0 or sum(splits) != x.shape[0]:
        raise ValueError(f"hvd.alltoall: splits {splits} must be {n} counts >= 0 that add up to "
                         f"the first dimension ({x.shape[0]})")
    return splits


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """A handle whose output is (the rows every member sent this one, the counts by member)."""
    group = _check([tensor], process_set, "alltoall")
    if tensor.dim() == 0:
        raise ValueError("hvd.alltoall: a tensor of at least one dimension is needed")
    splits = _alltoall_splits(tensor, splits, len(process_set.ranks))
    tensor = _copy(tensor)
    sig = ("alltoall", wire.dtype_name(tensor.dtype), tuple(tensor.shape[1:]))
    return _submit("alltoall", name, wire.alltoall_fn(tensor, splits, group), sig, group)


def _scatter_args(tensors, op, process_set, what):
    code = DDL_OPS[resolve_op(op, None, what)]
    group = _check(tensors, process_set, what)
    for t in tensors:
        if t.dim() == 0:
            raise ValueError(f"hvd.{what}: a tensor of at least one dimension is needed")
        wire.reduce_dtype(t.dtype, what)
    return code, group


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """A handle whose output is this member's share (dimension 0, by member; the first
    rows % size members get one more row) of each tensor reduced over the set."""
    return _reducescatter_async("grouped_reducescatter", tensors, name, op, process_set,
                                prescale_factor, postscale_factor)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """A handle whose output is this member's share of tensor reduced over the set."""
    return _reducescatter_async("reducescatter", [tensor], name, op, process_set,
                                prescale_factor, postscale_factor, lambda out: out[0])


def _reducescatter_async(kind, tensors, name, op, process_set, pre, post, finish=None):
    """reducescatter_async (kind "reducescatter") or grouped_reducescatter_async on copies."""
    tensors = [_copy(t) for t in tensors]
    code, group = _scatter_args(tensors, op, process_set, kind)
    ps_rank, n = process_set.ranks.index(rank()), len(process_set.ranks)
    fn = wire.reducescatter_fn(tensors, code, pre, post, group, ps_rank, n)
    sig = _sig("reducescatter", tensors, code, float(pre), float(post))
    return _submit(kind, name, fn, sig, group, finish)


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Reduces a sparse COO tensor by allgathering its indices and values; returns a function
    that waits and gives the reduced sparse tensor (Sum or Average)."""
    if op not in (Sum, Average):
        raise ValueError("hvd.sparse_allreduce_async: op must be hvd.Sum or hvd.Average")
    t = tensor.coalesce()
    indices = allgather_async(t.indices().t().contiguous(), f"{name}.indices", process_set)
    values = allgather_async(t.values().contiguous(), f"{name}.values", process_set)
    n = len(process_set.ranks)

    def finish():
        idx, vals = synchronize(indices), synchronize(values)
        if op == Average:
            vals = vals / n
        return torch.sparse_coo_tensor(idx.t(), vals, t.size())

    return finish


def join(device=-1):
    """Waits until every rank has called join(), taking part in the allreduces the others
    still make (with zeros) meanwhile; returns the rank that joined last."""
    del device
    _check([], global_process_set, "join")
    return _controller.join()


def barrier(process_set=global_process_set):
    """Returns once every member of the set has entered."""
    group = _check([], process_set, "barrier")
    _now(_submit, "barrier", "all", lambda: ddl.barrier(group=group), ("barrier",), group)
