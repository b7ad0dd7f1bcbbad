"""horovod.torch's job shape and collectives, on the package ddl (libddl).

How it works: init() joins the job through ddl.init() (ddlrun's variables say where this rank
is) and learns cross_rank/cross_size from one allgather of every rank's local_rank. An
asynchronous call (allreduce_async, broadcast_async_, ...) queues its collective on ddl's
worker thread (ddl._worker), which runs them in issue order, the same on every rank, and
returns an integer handle for poll() and synchronize(); the synchronous calls run the same
collective on the calling thread once the queue is empty (no hand-off: ddl's latency). allreduce, allgather and broadcast are autograd functions, as in
Horovod. Tensors are CPU tensors of the dtypes ddl takes; ops map to libddl's (Average: avg,
Sum, Min, Max, Product); Adasum is refused. Asynchronous calls are matched across ranks by
name, as in Horovod (ddl._negotiate: each rank may call them in its own order; an unnamed call
is named "<kind>.noname.<N>", its N-th unnamed call of that kind); differently named calls
that every rank waits for raise ddl._negotiate.NameMismatch on every rank. Synchronous calls
are matched by order. Only the global process set exists.
"""

import itertools
import math
import threading
import time

import torch

import ddl
from ddl import _negotiate, _worker

from .compression import Compression

from ..common import basics as _basics
from ..common.basics import (NOT_INITIALIZED, Adasum, Average, Max, Min, Product, Sum, ccl_built,
                             cross_rank, cross_size, cuda_built, ddl_built, gloo_built,
                             gloo_enabled, global_process_set, is_homogeneous, is_initialized,
                             local_rank, local_size, mpi_built, mpi_enabled, mpi_threads_supported,
                             nccl_built, rank, rocm_built, size)

_DDL_OPS = {Average: "avg", Sum: "sum", Min: "min", Max: "max", Product: "prod"}
ADASUM = ("op Adasum is not supported by horovod.torch on libddl (libddl has no Adasum "
          "reduction): use hvd.Average or hvd.Sum")
mlsl_built = _basics._no
_handles = {}
_handle_ids = itertools.count(1)
_unnamed = {}  # kind -> count of unnamed asynchronous calls
_here = threading.local()  # .active: _submit runs here (_now)


def init(comm=None, process_sets=None):
    """Joins the job ddlrun started (ddl.init()); a second call does nothing."""
    _basics.init("horovod.torch", comm, process_sets)


def shutdown():
    """Waits for queued collectives and leaves the job; init() may be called again."""
    _handles.clear()
    _basics.shutdown()


def resolve_op(op, average=None, what="allreduce"):
    """The ddl op for Horovod's op (or the deprecated average=); Average when neither."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if average is not None:
        op = Average if average else Sum
    if op is None:
        op = Average
    if op == Adasum:
        raise NotImplementedError(f"hvd.{what}: {ADASUM}")
    if op not in _DDL_OPS:
        raise ValueError(f"hvd.{what}: unknown op {op!r}: one of hvd.Average, hvd.Sum, hvd.Min, "
                         "hvd.Max, hvd.Product")
    return _DDL_OPS[op]


def _check(tensor, process_set, what):
    """Horovod's checks: initialised, a contiguous tensor, the global process set."""
    if not is_initialized():
        raise ValueError(NOT_INITIALIZED)
    if process_set is not global_process_set:
        raise ValueError(f"hvd.{what}: only the global process set exists on libddl")
    if tensor is not None and not tensor.is_contiguous():
        raise ValueError("Tensor is required to be contiguous.")


def _copy(tensor):
    """A contiguous copy outside autograd (the output of a call that keeps its input)."""
    return tensor.detach().clone(memory_format=torch.contiguous_format)


class _Done:
    """The handle of a call run on the calling thread."""

    __slots__ = ("result",)

    def __init__(self, result):
        self.result = result

    def done(self):
        return True

    def wait(self):
        return self.result


def _submit(fn, kind="collective", name=None):
    """fn run once every rank has called the collective `kind` named `name` (ddl._negotiate;
    unnamed: "<kind>.noname.<N>"): a handle. Under _now(), fn runs on this thread once the
    worker's queue is empty instead (no hand-off: a synchronous call's latency)."""
    handle = next(_handle_ids)
    if getattr(_here, "active", False):
        _worker.drain()
        _handles[handle] = _Done(fn())
        return handle
    if name is None:
        _unnamed[kind] = _unnamed.get(kind, -1) + 1
        name = f"{kind}.noname.{_unnamed[kind]}"
    _handles[handle] = _negotiate.submit(str(name), fn)
    return handle


def _now(call, *args):
    """The output of `call` (an asynchronous call) run on this thread."""
    _here.active = True
    try:
        handle = call(*args)
    finally:
        _here.active = False
    return synchronize(handle)


def poll(handle):
    """True when the operation of `handle` has finished (synchronize() will not block)."""
    if handle not in _handles:
        raise ValueError(f"hvd.poll: handle {handle} was not created or has been cleared "
                         "(synchronize() clears it)")
    return _handles[handle].done()


def synchronize(handle):
    """Waits for the operation of `handle`; its output (None for a handle not known)."""
    work = _handles.pop(handle, None)
    return None if work is None else work.wait()


def _scaled(fn, tensors, pre, post):
    """fn() between multiplying `tensors` by pre and by post; returns what fn returned."""
    if pre != 1.0:
        for t in tensors:
            t.mul_(pre)
    result = fn()
    if post != 1.0:
        for t in tensors:
            t.mul_(post)
    return result


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Reduces tensor in place over every rank (op: Average by default); a handle."""
    code = resolve_op(op, average)
    _check(tensor, process_set, "allreduce")
    return _submit(lambda: _scaled(lambda: ddl.allreduce(tensor, op=code), [tensor],
                                   prescale_factor, postscale_factor), "allreduce", name)


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


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, op, pre, post):
        ctx.args = (op, pre, post)
        return allreduce_(_copy(tensor), None, None, op, pre, post)

    @staticmethod
    def backward(ctx, grad):
        return (allreduce_(_copy(grad), None, None, *ctx.args),) + (None,) * 3


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """A new tensor: tensor reduced over every rank (differentiable); compression=
    Compression.fp16 sends it as float16."""
    del name
    resolve_op(op, average)
    _check(tensor, process_set, "allreduce")
    op = op if average is None else (Average if average else Sum)
    compressed, ctx = compression.compress(tensor)
    out = _Allreduce.apply(compressed, op, prescale_factor, postscale_factor)
    return compression.decompress(out, ctx)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """Reduces every tensor of the list in place in one fused call; a handle (output: the
    list)."""
    code = resolve_op(op, average, "grouped_allreduce")
    for t in tensors:
        _check(t, process_set, "grouped_allreduce")
    tensors = list(tensors)
    return _submit(lambda: _scaled(lambda: ddl.allreduce_n(tensors, op=code), tensors,
                                   prescale_factor, postscale_factor), "grouped_allreduce", name)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """grouped_allreduce_async_ on copies (the tensors are left alone)."""
    return grouped_allreduce_async_([_copy(t) for t in tensors], average, name, op,
                                    prescale_factor, postscale_factor, process_set)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return _now(grouped_allreduce_async_, tensors, average, name, op, prescale_factor,
                postscale_factor, process_set)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """New tensors: each of `tensors` reduced over every rank, in one fused call."""
    packed = [compression.compress(t) for t in tensors]
    outs = _now(grouped_allreduce_async, [t for t, _ in packed], average, name, op,
                prescale_factor, postscale_factor, process_set)
    return [compression.decompress(t, ctx) for t, (_, ctx) in zip(outs, packed)]


def gather_rows(tensor):
    """Every rank's tensor concatenated on dimension 0 (first dimensions may differ), and
    the ranks' first dimensions."""
    x = tensor.detach().contiguous()
    if x.dim() == 0:
        x = x.reshape(1)
    rows = ddl.allgather(torch.tensor([x.shape[0]], dtype=torch.int64)).tolist()
    most = max(rows)
    if min(rows) == most:
        return ddl.allgather(x), rows
    padded = x.new_zeros((most,) + tuple(x.shape[1:]))
    padded[:x.shape[0]] = x
    everyone = ddl.allgather(padded).reshape((len(rows), most) + tuple(x.shape[1:]))
    return torch.cat([everyone[r, :n] for r, n in enumerate(rows)]), rows


def allgather_async(tensor, name=None, process_set=global_process_set):
    """A handle whose output is every rank's tensor concatenated on dimension 0."""
    _check(tensor, process_set, "allgather")
    tensor = _copy(tensor)
    return _submit(lambda: gather_rows(tensor)[0], "allgather", name)


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor):
        ctx.shape, ctx.rows = tensor.shape, tensor.shape[0] if tensor.dim() else 1
        return _now(allgather_async, tensor)

    @staticmethod
    def backward(ctx, grad):
        total = allreduce_(_copy(grad), op=Average)
        rows = ddl.allgather(torch.tensor([ctx.rows], dtype=torch.int64)).tolist()
        start = sum(rows[:ddl.rank()])
        return total.narrow(0, start, ctx.rows).reshape(ctx.shape)


def allgather(tensor, name=None, process_set=global_process_set):
    """Every rank's tensor concatenated on dimension 0 (first dimensions may differ)."""
    del name
    _check(tensor, process_set, "allgather")
    return _Allgather.apply(tensor)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Copies root_rank's tensor into every rank's, in place; a handle."""
    _check(tensor, process_set, "broadcast")
    _check_root(root_rank, "broadcast")
    return _submit(lambda: ddl.broadcast(tensor, root_rank), "broadcast", name)


def _check_root(root_rank, what):
    if not 0 <= root_rank < ddl.size():
        raise ValueError(f"hvd.{what}: root_rank {root_rank} is not a rank of this job "
                         f"(0..{ddl.size() - 1})")


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """broadcast_async_ on a copy (tensor is left alone)."""
    return broadcast_async_(_copy(tensor), root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return _now(broadcast_async_, tensor, root_rank, name, process_set)


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank):
        ctx.root_rank = root_rank
        return broadcast_(_copy(tensor), root_rank)

    @staticmethod
    def backward(ctx, grad):
        total = allreduce_(_copy(grad), op=Average)
        if ddl.rank() != ctx.root_rank:
            total.zero_()
        return total, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """A new tensor holding root_rank's tensor (differentiable)."""
    del name
    _check(tensor, process_set, "broadcast")
    _check_root(root_rank, "broadcast")
    return _Broadcast.apply(tensor, root_rank)


def _alltoall_splits(x, splits, n):
    """splits as a list of n row counts (equal shares when None); ValueError otherwise."""
    if splits is None:
        if x.shape[0] % n:
            raise ValueError(f"hvd.alltoall: the first dimension ({x.shape[0]}) does not divide "
                             f"among {n} ranks: give splits=")
        return [x.shape[0] // n] * n
    splits = [int(s) for s in torch.as_tensor(splits).reshape(-1).tolist()]
    if len(splits) != n or min(splits) < 0 or sum(splits) != x.shape[0]:
        raise ValueError(f"hvd.alltoall: splits {splits} must be {n} counts >= 0 that add up to "
                         f"the first dimension ({x.shape[0]})")
    return splits


def _alltoall(x, splits):
    """The rows every rank sends this one, by rank, and their counts: the counts travel by
    ddl.alltoall, the rows by ddl.alltoallv (libddl's alltoall)."""
    received = ddl.alltoall(torch.tensor(splits, dtype=torch.int64)).tolist()
    row = math.prod(x.shape[1:])
    out = ddl.alltoallv(x, [s * row for s in splits], [c * row for c in received])
    return out.reshape((sum(received),) + tuple(x.shape[1:])), torch.tensor(received,
                                                                           dtype=torch.int32)


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """A handle whose output is (the rows every rank sent this one, the counts by rank)."""
    _check(tensor, process_set, "alltoall")
    if tensor.dim() == 0:
        raise ValueError("hvd.alltoall: a tensor of at least one dimension is needed")
    splits = _alltoall_splits(tensor, splits, ddl.size())
    tensor = _copy(tensor)
    return _submit(lambda: _alltoall(tensor, splits), "alltoall", name)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[r] rows of tensor (dimension 0, in order) to rank r; returns the rows
    received from every rank, by rank, and when splits is given the counts received too."""
    output, received = _now(alltoall_async, tensor, splits, name, process_set)
    return output if splits is None else (output, received)


def _reducescatter(x, code, pre, post):
    """This rank's rows of op over every rank's x; the first (rows % size) ranks get one more."""
    n, me = ddl.size(), ddl.rank()
    counts = [x.shape[0] // n + (1 if r < x.shape[0] % n else 0) for r in range(n)]
    if pre != 1.0:
        x.mul_(pre)
    if x.shape[0] % n == 0:
        out = ddl.reduce_scatter(x, op=code)
    else:
        start = sum(counts[:me])
        out = ddl.allreduce(x, op=code)[start:start + counts[me]].clone()
    return out.mul_(post) if post != 1.0 else out


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """This rank's share (dimension 0, by rank) of tensor reduced over every rank."""
    del name
    code = resolve_op(op, None, "reducescatter")
    _check(tensor, process_set, "reducescatter")
    if tensor.dim() == 0:
        raise ValueError("hvd.reducescatter: a tensor of at least one dimension is needed")
    compressed, ctx = compression.compress(tensor)
    x = _copy(compressed)
    out = _now(_submit, lambda: _reducescatter(x, code, prescale_factor, postscale_factor))
    return compression.decompress(out, ctx)


def join(device=-1):
    """Waits until every rank has called join(); returns the rank that came last (by the
    ranks' clocks). Every rank must have made the same collectives before it: ranks with less
    data are not stood in for (Horovod's uneven-data join is not provided)."""
    del device
    _check(None, global_process_set, "join")
    arrival = ddl.allgather(torch.tensor([time.time()], dtype=torch.float64))
    return int(torch.argmax(arrival).item())


def barrier(process_set=global_process_set):
    """Returns once every rank has entered."""
    _check(None, process_set, "barrier")
    ddl.barrier()
