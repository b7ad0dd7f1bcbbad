"""horovod.tensorflow's collectives beyond allreduce, allgather, broadcast and alltoall, on
ddl's TensorFlow ops: reducescatter (and grouped), grouped_allgather, broadcast_ (variables in
place), and the ops that read the job's shape when the graph runs (rank_op, size_op, ...).

How it works: reducescatter is an allreduce of the whole tensor (ddl's op, matched across ranks
by name like every other) followed by this rank's rows: the first dimension is split among
the ranks (of the process set), the first (rows % size) ranks taking one row more, as Horovod
splits it. Its
gradient is Horovod's: the allgather of the output's gradient (times size() for Sum, times
the pre- and postscale factors). The grouped forms make one named op per tensor (name.i).
"""

import numpy as np
import tensorflow as tf

import ddl
import ddl.tensorflow as _dtf

from ..common import basics as _basics  # noqa: F401 (Horovod's tests read mpi_ops._basics)
from ..common import process_sets as _sets
from ..common.basics import DDL_OPS, Average, Sum, global_process_set

__all__ = ["reducescatter", "grouped_reducescatter", "grouped_allgather", "broadcast_",
           "rank_op", "size_op", "local_rank_op", "local_size_op", "process_set_included_op"]


def _rows(total, size, rank):
    """(start, count) of `rank`'s rows of `total`: the first total % size ranks take one more."""
    base, extra = divmod(total, size)
    return rank * base + min(rank, extra), base + (1 if rank < extra else 0)


def _factor(tensor, factor):
    from . import _scale  # noqa: PLC0415 (the package imports this module)

    return _scale(tensor, factor)


def reducescatter(tensor, device_dense="", compression=None, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False,
                  prescale_factor=1.0, postscale_factor=1.0):
    """This rank's rows (dimension 0, split by rank) of tensor reduced over every rank of
    process_set with op (Average or Sum)."""
    del device_dense, ignore_name_scope
    from . import _group  # noqa: PLC0415 (the package imports this module)

    group = _group(process_set, "reducescatter")
    if op not in (Average, Sum):
        raise NotImplementedError("hvd.reducescatter: only hvd.Average and hvd.Sum are "
                                  "supported")
    tensor = tf.convert_to_tensor(tensor)
    if tensor.shape.rank == 0:
        raise ValueError("hvd.reducescatter: a scalar cannot be scattered: give a tensor of at "
                         "least one dimension")
    compressed, ctx = (tensor, None) if compression is None else compression.compress(tensor)
    out = _reducescatter(compressed, op, name, prescale_factor, postscale_factor, group)
    return out if compression is None else compression.decompress(out, ctx)


def _reducescatter(tensor, op, name, pre, post, group):
    rank, size = _dtf._members(group)

    @tf.custom_gradient
    def scatter(x):
        reduced = _dtf.allreduce(_factor(x, pre), DDL_OPS[op], name=name, group=group)
        start, count = _rows(int(x.shape[0]) if x.shape[0] is not None else tf.shape(x)[0],
                             size, rank)
        out = _factor(reduced[start:start + count], post)

        def grad(upstream):
            scale = (size if op == Sum else 1.0) * pre * post
            return _dtf.allgather(_factor(upstream, scale), grad_op="avg", group=group)

        return out, grad

    return scatter(tensor)


def grouped_reducescatter(tensors, device_dense="", compression=None, op=Average, name=None,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of each tensor of the list (one op each, named name.i when named)."""
    return [reducescatter(t, device_dense, compression, op,
                          None if name is None else f"{name}.{i}", process_set,
                          prescale_factor=prescale_factor, postscale_factor=postscale_factor)
            for i, t in enumerate(tensors)]


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather of each tensor of the list (one op each, named name.i when named)."""
    from . import allgather  # noqa: PLC0415 (the package imports this module)

    return [allgather(t, None if name is None else f"{name}.{i}", process_set=process_set)
            for i, t in enumerate(tensors)]


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Assigns root_rank's values to the variables, in place; returns their new values."""
    from . import broadcast  # noqa: PLC0415 (the package imports this module)

    out = []
    for i, var in enumerate(variables):
        value = broadcast(var, root_rank, None if name is None else f"{name}.{i}",
                          process_set=process_set)
        out.append(var.assign(value))
    return out


def _job_op(read, name, join=True):
    """An int32 scalar that reads the job's shape when the graph runs (read(): an int, after
    ddl.init() unless join is False)."""

    def value():
        if join:
            ddl.init()
        return np.int64(read())

    with tf.name_scope(name or "ddl_job"):
        out = tf.numpy_function(value, [], tf.int64, stateful=True)
        return tf.cast(tf.reshape(out, []), tf.int32)


def rank_op(name=None):
    return _job_op(ddl.rank, name)


def size_op(process_set_id=0, name=None):
    """The number of ranks of the process set of that id (0: the job)."""
    ps = _sets.by_id(process_set_id, "size_op")
    return _job_op(lambda: len(ps.ranks), name)


def local_rank_op(name=None):
    return _job_op(ddl.local_rank, name)


def local_size_op(name=None):
    return _job_op(ddl.local_size, name)


def process_set_included_op(process_set_id=0, name=None):
    """1: this rank belongs to the process set of that id, else 0."""
    ps = _sets.by_id(process_set_id, "process_set_included_op")
    return _job_op(lambda: 1 if ps is _sets.global_process_set or ps.included() else 0, name,
                   join=False)
