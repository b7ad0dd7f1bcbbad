"""horovod.tensorflow on libddl: Horovod's TensorFlow 2 API for scripts run unchanged under
ddlrun, eagerly and inside tf.function.

    import horovod.tensorflow as hvd
    hvd.init()
    with tf.GradientTape() as tape:
        loss = ...
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    if first_batch:
        hvd.broadcast_variables(model.variables, root_rank=0)

How it works: the collectives are ddl's TensorFlow ops (ddl.tensorflow: asynchronous, with
Horovod's gradients), matched across ranks by name as Horovod's controller matches them (the
op's node name in a graph, name=, or the kind run eagerly) and checked before any data moves:
a call the ranks make differently (shape, dtype, op, root) fails with
tf.errors.FailedPreconditionError on every rank, naming two ranks and their calls, and later
calls run as usual, in graph mode (a Session starts independent ops in any order), eagerly and
inside tf.function. allreduce of a list of tensors (grouped_allreduce, DistributedGradientTape,
DistributedOptimizer) is one fused op per dtype. Ops map to libddl's (Average: avg, Sum, Min,
Max, Product); Adasum is refused. prescale_factor/postscale_factor scale as Horovod does
(integers in float64, float16 in float32). An IndexedSlices gradient is allgathered (values and
indices, values divided by size() for Average) unless sparse_as_dense. join() serves uneven
data (a joined rank stands in with zeros in the others' allreduces). Process sets
(add_process_set, horovod.common.process_sets) are libddl groups: a collective given
process_set= runs the ops on the set's group, matched by name among its members only, with
roots mapped to set ranks and Average, gradient scaling and reducescatter's rows by the set's
size. horovod.tensorflow.keras (and horovod.keras) hold the Keras pieces, for Keras
3 and tf-keras.
"""

import pickle

import tensorflow as tf

import ddl
import ddl.tensorflow as _dtf

from .compression import Compression
from .util import _executing_eagerly  # noqa: F401 (Horovod's tests read hvd._executing_eagerly)

from ..common import basics as _basics
from ..common.controller import gather_objects
from ..common.process_sets import (ProcessSet, add_process_set, group_of,  # noqa: F401
                                   outside, remove_process_set, root_of)
from ..common.basics import (DDL_OPS, NOT_INITIALIZED, Adasum, Average, Max, Min, Product, Sum,
                             _job, ccl_built, cross_rank, cross_size, cuda_built, ddl_built,
                             gloo_built, gloo_enabled, global_process_set, is_homogeneous,
                             is_initialized, local_rank, local_size, mpi_built, mpi_enabled,
                             mpi_threads_supported, nccl_built, rank, resolve_op, rocm_built,
                             shutdown, size)

_API = "horovod.tensorflow"  # the API named in the errors


def init(comm=None, process_sets=None):
    """Joins the job ddlrun started (ddl.init()); a second call does nothing."""
    _basics.init(_API, comm, process_sets)


def _group(process_set, what):
    """The ddl group of a call on process_set (None: the job); naming `what`,
    tf.errors.InvalidArgumentError (as Horovod's ops) when this rank is not in the set,
    ValueError when the set is not registered."""
    _job(lambda: None)
    if outside(process_set):
        raise tf.errors.InvalidArgumentError(
            None, None, f"hvd.{what}: this rank ({ddl.rank()}) is not in {process_set!r}: call "
            "it on the set's members only")
    return group_of(process_set, what)


def _scale(tensor, factor, what=None):
    """tensor * factor in tensor's dtype, computed as Horovod does: in float64 for integers
    (truncated back), float32 for float16."""
    del what
    if isinstance(factor, (int, float)) and factor == 1.0:
        return tensor
    dtype = tensor.dtype
    wide = tf.float64 if dtype.is_integer or dtype == tf.bool else (
        tf.float32 if dtype in (tf.float16, tf.bfloat16) else dtype)
    factor = tf.cast(factor, wide) if isinstance(factor, (tf.Tensor, tf.Variable)) else \
        tf.constant(factor, wide)  # a Python float kept in full (tf.cast would go by float32)
    return tf.cast(tf.cast(tensor, wide) * factor, dtype)


def _reduce_dense(tensors, op, compression, prescale, postscale, what, name=None, group=None):
    """Dense tensors reduced with Horovod's op over group's members: one fused ddl op per
    dtype."""
    packed = [compression.compress(tf.convert_to_tensor(t)) for t in tensors]
    values = [_scale(t, prescale, what) for t, _ in packed]
    reduced = _dtf.allreduce_n(values, DDL_OPS[op], name=name, group=group)
    return [compression.decompress(_scale(r, postscale, what), ctx)
            for r, (_, ctx) in zip(reduced, packed)]


def _reduce_sparse(slices, op, name=None, group=None):
    """An IndexedSlices reduced as Horovod does: values and indices allgathered (values
    divided by the members' number for Average), each op matched across ranks by its own
    name."""
    if op not in (Average, Sum):
        raise NotImplementedError("hvd.allreduce: IndexedSlices are reduced with Average or Sum "
                                  "only (they are allgathered)")
    values = _dtf.allgather(slices.values, name=name and f"{name}.values", grad_op="avg",
                            group=group)
    if op == Average:
        values = values / tf.cast(ddl._size(group), values.dtype)
    indices = _dtf.allgather(slices.indices, name=name and f"{name}.indices", grad_op="avg",
                             group=group)
    return tf.IndexedSlices(values, indices, slices.dense_shape)


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="",
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set, name=None):
    """Every tensor of the list reduced over every rank of process_set (one fused op per
    dtype); None stays None, IndexedSlices are allgathered."""
    del device_dense, device_sparse
    group = _group(process_set, "grouped_allreduce")
    op = resolve_op(op, average, "grouped_allreduce", _API)
    out = list(tensors)
    dense = [i for i, t in enumerate(out) if t is not None and not isinstance(t, tf.IndexedSlices)]
    reduced = _reduce_dense([out[i] for i in dense], op, compression, prescale_factor,
                            postscale_factor, "grouped_allreduce", name, group) if dense else []
    for i, r in zip(dense, reduced):
        out[i] = r
    for i, t in enumerate(out):
        if isinstance(t, tf.IndexedSlices):
            if prescale_factor != 1.0 or postscale_factor != 1.0:
                raise NotImplementedError("hvd.allreduce: prescale_factor/postscale_factor are "
                                          "not supported with IndexedSlices")
            out[i] = _reduce_sparse(t, op, name and f"{name}.{i}", group)
    return out


def allreduce(tensor, average=None, device_dense="", device_sparse="",
              compression=Compression.none, op=None, prescale_factor=1.0, postscale_factor=1.0,
              name=None, process_set=global_process_set, ignore_name_scope=False):
    """tensor reduced over every rank of process_set with op (Average by default): a new
    tensor."""
    del ignore_name_scope
    return grouped_allreduce([tensor], average, device_dense, device_sparse, compression, op,
                             prescale_factor, postscale_factor, process_set, name)[0]


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Every rank's (of process_set) tensor concatenated on dimension 0 by rank (first
    dimensions may differ)."""
    del ignore_name_scope
    group = _group(process_set, "allgather")
    return _dtf.allgather(tensor, name=name, grad_op="avg", group=group)


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """root_rank's (a job rank in process_set) tensor on every rank of the set: a new
    tensor."""
    del ignore_name_scope
    group = _group(process_set, "broadcast")
    root = root_of(root_rank, process_set, "broadcast")
    return _dtf.broadcast(tf.convert_to_tensor(tensor), root, name=name, grad_op="avg",
                          group=group)


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """splits[r] rows of tensor (dimension 0, in order; equal blocks without splits) to rank r
    of process_set; returns the rows received from every rank, by rank, and when splits is
    given the counts received too."""
    del ignore_name_scope
    group = _group(process_set, "alltoall")
    output, received = _dtf.alltoall(tensor, splits, with_splits=True, name=name, group=group)
    return output if splits is None else (output, received)


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns root_rank's values to the variables on every rank of process_set (one op per
    dtype); in a graph, returns the op that does it."""
    del inplace
    group = _group(process_set, "broadcast_variables")
    root = root_of(root_rank, process_set, "broadcast_variables")
    return _dtf.broadcast_variables(variables, root, group)


def broadcast_global_variables(root_rank):
    """In a graph (tf.compat.v1): the op that assigns root_rank's values to every global
    variable on every rank."""
    if tf.executing_eagerly():
        raise RuntimeError("hvd.broadcast_global_variables() does not support eager execution "
                           "(TensorFlow 2 has no global variables): use "
                           "hvd.broadcast_variables(<model/optimizer variables>, root_rank)")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function that broadcasts its picklable argument from root_rank (broadcast_object)."""
    return lambda obj: broadcast_object(obj, root_rank, session, name, process_set)


def broadcast_object(obj, root_rank=0, session=None, name=None,
                     process_set=global_process_set):
    """root_rank's picklable obj on every rank of process_set."""
    del session, name
    group = _group(process_set, "broadcast_object")
    root = root_of(root_rank, process_set, "broadcast_object")
    data = pickle.dumps(obj) if ddl.rank() == root_rank else b""
    return pickle.loads(ddl._broadcast_bytes(data, root, group))


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every rank's (of process_set) picklable obj, in rank order."""
    del name
    return gather_objects(obj, _group(process_set, "allgather_object"))


def _reducer(compression, sparse_as_dense, op, gradient_predivide_factor, what,
             process_set=global_process_set):
    """The gradient reduction of DistributedGradientTape and DistributedOptimizer over
    process_set."""
    op = resolve_op(op, None, what, _API)
    if outside(process_set):  # Horovod's: a rank outside the set keeps its own gradients
        return list
    group = _group(process_set, what)
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError(f"hvd.{what}: gradient_predivide_factor needs op=hvd.Average")
    pre, post, inner = 1.0, 1.0, op
    if gradient_predivide_factor != 1.0:
        pre, inner = 1.0 / gradient_predivide_factor, Sum
        post = gradient_predivide_factor / ddl._size(group)

    def reduce(grads):
        if sparse_as_dense:
            grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                     for g in grads]
        return grouped_allreduce(grads, compression=compression, op=inner,
                                 prescale_factor=pre, postscale_factor=post,
                                 process_set=process_set)

    return reduce


def DistributedGradientTape(gradtape, device_dense="", device_sparse="",  # noqa: N802
                            compression=Compression.none, sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0, groups=None,
                            process_set=global_process_set, scale_local_gradients=True):
    """A tape whose gradient() returns gradients reduced (op) over every rank of process_set."""
    del device_dense, device_sparse, num_groups, groups
    reduce = _reducer(compression, sparse_as_dense, op, gradient_predivide_factor,
                      "DistributedGradientTape", process_set)
    return _PartialTape(gradtape, reduce, [], scale_local_gradients, len(process_set.ranks))


def DistributedOptimizer(optimizer, name=None, use_locking=False,  # noqa: N802
                         device_dense="", device_sparse="", compression=Compression.none,
                         sparse_as_dense=False, backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0, average_aggregated_gradients=False,
                         num_groups=0, groups=None, process_set=global_process_set,
                         scale_local_gradients=True):
    """A Keras 3 optimizer (what tf.keras and tf.optimizers hold in TensorFlow 2.16+) that
    reduces its gradients over every rank before applying them."""
    from . import keras

    del name, use_locking
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        optimizer._optimizer = optimizer  # Horovod's wrapper's name for the optimizer it wraps
    return keras.DistributedOptimizer(
        optimizer, device_dense=device_dense, device_sparse=device_sparse,
        compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor, op=op,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients, num_groups=num_groups,
        groups=groups, process_set=process_set, scale_local_gradients=scale_local_gradients)


def join():
    """This rank has no more data: until every rank has joined, it takes part in the others'
    allreduces with zeros (other collectives fail on every rank meanwhile). Returns the rank
    that joined last (an int32 scalar tensor)."""
    _job(lambda: None)
    return _dtf.join()


class HorovodInternalError(RuntimeError):
    """A collective failed because the job broke (a rank was lost): Horovod's name for it."""


class _PartialTape(_dtf.DistributedGradientTape):
    """A DistributedGradientTape that leaves the gradients of some variables (local sources)
    unreduced, divided by the set's size (`members`) when scale_local_gradients."""

    def __init__(self, tape, reduce, local_sources, scale, members):
        super().__init__(tape, reduce=lambda grads: grads)
        self._hvd_reduce, self._hvd_scale, self._hvd_members = reduce, scale, members
        self._hvd_local = {id(v) for v in local_sources}

    def register_local_source(self, var):
        """The gradient of var stays this rank's own."""
        self._hvd_local.add(id(var))

    def gradient(self, target, sources, output_gradients=None, **kwargs):
        grads = super().gradient(target, sources, output_gradients, **kwargs)
        flat = reduce_but_local(lambda g, v: self._hvd_reduce(g), tf.nest.flatten(grads),
                                tf.nest.flatten(sources), self._hvd_local, self._hvd_scale,
                                self._hvd_members)
        return tf.nest.pack_sequence_as(grads, _dtf.mark_reduced(flat))

    def get_local_and_global_gradients(self, target, sources, output_gradients=None):
        """([(local variable, gradient)...], [(other variable, gradient)...])."""
        grads = self.gradient(target, sources, output_gradients)
        pairs = list(zip(tf.nest.flatten(sources), tf.nest.flatten(grads)))
        return ([p for p in pairs if id(p[0]) in self._hvd_local],
                [p for p in pairs if id(p[0]) not in self._hvd_local])


def reduce_but_local(reduce, grads, variables, local, scale, members=None):
    """grads, those of the variables whose ids are not in `local` reduced by reduce(grads,
    variables); the local ones this rank's own, divided by `members` (the process set's size;
    None: size()) when scale (Horovod's scale_local_gradients). Partial tapes and optimizers,
    Keras 2 and 3, share it."""
    shared = [i for i, v in enumerate(variables) if id(v) not in local]
    out = list(grads)
    for i, g in zip(shared, reduce([grads[i] for i in shared], [variables[i] for i in shared])):
        out[i] = g
    members = ddl.size() if members is None else members
    return [_divided(g, members) if scale and id(v) in local and g is not None else g
            for g, v in zip(out, variables)]


def _divided(grad, n):
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values / n, grad.indices, grad.dense_shape)
    return grad / tf.cast(n, grad.dtype)


def PartialDistributedGradientTape(gradtape, device_dense="", device_sparse="",  # noqa: N802
                                   compression=Compression.none, sparse_as_dense=False,
                                   op=Average, gradient_predivide_factor=1.0,
                                   local_layers=None, process_set=global_process_set,
                                   scale_local_gradients=True):
    """DistributedGradientTape whose gradients of the variables of `local_layers` (a Keras
    layer or a list of them) stay this rank's own (divided by size() when
    scale_local_gradients); the others are reduced (op)."""
    del device_dense, device_sparse
    layers = [] if local_layers is None else (
        list(local_layers) if isinstance(local_layers, (list, tuple)) else [local_layers])
    reduce = _reducer(compression, sparse_as_dense, op, gradient_predivide_factor,
                      "PartialDistributedGradientTape", process_set)
    return _PartialTape(gradtape, reduce, [v for layer in layers for v in layer.trainable_weights],
                        scale_local_gradients, len(process_set.ranks))


from .mpi_ops import (broadcast_, grouped_allgather, grouped_reducescatter,  # noqa: E402
                      local_rank_op, local_size_op, process_set_included_op, rank_op,
                      reducescatter, size_op)
from . import elastic, util  # noqa: E402,F401


def __getattr__(name):
    """SyncBatchNormalization, loaded when first named (it imports Keras)."""
    if name == "SyncBatchNormalization":
        from .sync_batch_norm import SyncBatchNormalization  # noqa: PLC0415

        return SyncBatchNormalization
    raise AttributeError(f"module 'horovod.tensorflow' has no attribute {name!r}")
