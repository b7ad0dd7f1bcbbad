"""horovod.torch's differentiable collectives, with Horovod's gradients.

How it works: each is a torch.autograd.Function whose forward is the synchronous collective of
mpi_ops (on a copy: the input is left alone) and whose backward is another collective over the
same process set: of an allreduce (grouped or not) the allreduce of the gradient with the same
op and factors; of an allgather this rank's rows of the averaged gradient; of a broadcast the
averaged gradient on the root and zeros elsewhere; of an alltoall the alltoall back with the
counts received; of a reducescatter the allgather of the gradient, times the set's size for Sum
(Horovod's convention: the gradients of the ranks' losses added up, as an allreduce's are).
"""

import torch

from . import mpi_ops as ops
from ..common.process_sets import root_of
from .compression import Compression
from .mpi_ops import Average, Sum, global_process_set


class _Allreduce(torch.autograd.Function):
    """allreduce (grouped: grouped_allreduce) of copies of the tensors, and of their gradients."""

    @staticmethod
    def forward(ctx, grouped, name, op, pre, post, process_set, *tensors):
        ctx.args = (grouped, op, pre, post, process_set)
        return _allreduced(grouped, tensors, name, op, pre, post, process_set)

    @staticmethod
    def backward(ctx, *grads):
        grouped, op, pre, post, ps = ctx.args
        return (None,) * 6 + _allreduced(grouped, grads, None, op, pre, post, ps)


def _allreduced(grouped, tensors, name, op, pre, post, process_set):
    copies = [ops._copy(t) for t in tensors]
    if grouped:
        return tuple(ops.grouped_allreduce_(copies, None, name, op, pre, post, process_set))
    return (ops.allreduce_(copies[0], None, name, op, pre, post, process_set),)


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """A new tensor: tensor reduced over the process set (differentiable); compression=
    Compression.fp16 sends it as float16."""
    op = ops.resolve_op(op, average)
    ops._check([tensor], process_set, "allreduce")
    compressed, cctx = compression.compress(tensor)
    out = _Allreduce.apply(False, name, op, prescale_factor, postscale_factor, process_set,
                           compressed)[0]
    return compression.decompress(out, cctx)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """New tensors: each of `tensors` reduced over the process set, in one fused call
    (differentiable)."""
    op = ops.resolve_op(op, average, "grouped_allreduce")
    packed = [compression.compress(t) for t in tensors]
    outs = _Allreduce.apply(True, name, op, prescale_factor, postscale_factor, process_set,
                            *[t for t, _ in packed])
    return [compression.decompress(t, c) for t, (_, c) in zip(outs, packed)]


def _my_rows(grad, rows, me):
    start = sum(rows[:me])
    return grad.narrow(0, start, rows[me])


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.process_set, ctx.shapes = process_set, [t.shape for t in tensors]
        outs, ctx.rows = [], []
        for t in tensors:
            gathered, rows = ops.gathered_rows(t, name if len(tensors) == 1 else None,
                                               process_set)
            outs.append(gathered)
            ctx.rows.append(rows)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        ps = ctx.process_set
        me = ps.ranks.index(ops.rank())
        summed = ops.grouped_allreduce_([ops._copy(g) for g in grads], op=Average,
                                        process_set=ps)
        return (None, None) + tuple(_my_rows(g, rows, me).reshape(shape)
                                    for g, rows, shape in zip(summed, ctx.rows, ctx.shapes))


def allgather(tensor, name=None, process_set=global_process_set):
    """Every member's tensor concatenated on dimension 0 (first dimensions may differ;
    differentiable)."""
    ops._check([tensor], process_set, "allgather")
    return _Allgather.apply(name, process_set, tensor)[0]


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather of each tensor of the list (differentiable)."""
    ops._check(tensors, process_set, "grouped_allgather")
    return list(_Allgather.apply(name, process_set, *tensors))


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return ops.broadcast_(ops._copy(tensor), root_rank, name, process_set)

    @staticmethod
    def backward(ctx, grad):
        total = ops.allreduce_(ops._copy(grad), op=Average, process_set=ctx.process_set)
        if ops.rank() != ctx.root_rank:
            total.zero_()
        return total, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """A new tensor holding root_rank's tensor (differentiable)."""
    ops._check([tensor], process_set, "broadcast")
    root_of(root_rank, process_set, "broadcast")
    return _Broadcast.apply(tensor, root_rank, name, process_set)


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        ctx.process_set = process_set
        out, received = ops._now(ops.alltoall_async, tensor, splits, name, process_set)
        ctx.received = received
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, unused):
        del unused
        back, _ = ops._now(ops.alltoall_async, grad.contiguous(), ctx.received,
                           process_set=ctx.process_set)
        return back, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[r] rows of tensor (dimension 0, in order) to member r; returns the rows
    received from every member, by member, and when splits is given the counts received too
    (differentiable)."""
    output, received = _Alltoall.apply(tensor, splits, name, process_set)
    return output if splits is None else (output, received)


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, pre, post, process_set, *tensors):
        ctx.op, ctx.process_set = op, process_set
        return tuple(ops._now(ops.grouped_reducescatter_async, list(tensors), name, op,
                              process_set, pre, post))

    @staticmethod
    def backward(ctx, *grads):
        ps = ctx.process_set
        gathered = ops._now(ops.grouped_allgather_async, [g.contiguous() for g in grads],
                            process_set=ps)
        if ctx.op == Sum:
            gathered = [g * len(ps.ranks) for g in gathered]
        return (None,) * 5 + tuple(gathered)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """This member's share (dimension 0, by member; the first rows % size members get one row
    more) of tensor reduced over the process set (differentiable)."""
    return grouped_reducescatter([tensor], name, compression, op, process_set, prescale_factor,
                                 postscale_factor)[0]


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of each tensor of the list, in one call (differentiable)."""
    ops._scatter_args(list(tensors), op, process_set, "reducescatter")
    packed = [compression.compress(t) for t in tensors]
    outs = _Reducescatter.apply(name, op, prescale_factor, postscale_factor, process_set,
                                *[t for t, _ in packed])
    return [compression.decompress(t, c) for t, (_, c) in zip(outs, packed)]
