"""horovod.tensorflow.keras on libddl: Horovod's Keras API for tf.keras, under ddlrun: Keras 3
(tf.keras in TensorFlow 2.16+; Horovod itself stops at Keras 2) and Keras 2 (tf-keras, which
tf.keras is under TF_USE_LEGACY_KERAS=1, its legacy optimizers included).

    import horovod.tensorflow.keras as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * hvd.size()))
    model.compile(optimizer=opt, loss=...)
    model.fit(..., callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                              hvd.callbacks.MetricAverageCallback(),
                              hvd.callbacks.LearningRateWarmupCallback(0.01 * hvd.size())])

How it works: DistributedOptimizer returns the optimizer itself with its apply() (which Keras 3's
training step calls with the step's gradients; tf-keras: apply_gradients()) reducing the
gradients first, one fused ddl op per dtype inside the compiled step
(ddl.tensorflow.distribute_optimizer); the callbacks are in
horovod.tensorflow.keras.callbacks. Keras 3 compiles the step with XLA by default, which cannot
run ddl's ops: the callbacks turn it off (model.jit_compile = False); without them compile with
jit_compile=False (the step otherwise fails with a message saying so).
backward_passes_per_step > 1 is refused (Keras 3 optimizers accumulate gradients themselves:
gradient_accumulation_steps=).
"""

import ddl.tensorflow as _dtf

from .. import (Adasum, Average, Compression, Max, Min, Product, Sum, allgather,
                allgather_object, allreduce, alltoall, broadcast, broadcast_object,
                broadcast_variables, cross_rank, cross_size, ddl_built, global_process_set,
                grouped_allreduce, init, is_initialized, local_rank, local_size, rank, shutdown,
                size, ProcessSet, add_process_set, remove_process_set)
from .. import _reducer, reduce_but_local
from . import callbacks, elastic

__all__ = [
    "Adasum", "Average", "Compression", "Max", "Min", "Product", "Sum", "allgather",
    "allgather_object", "allreduce", "alltoall", "broadcast", "broadcast_object",
    "broadcast_variables", "cross_rank", "cross_size", "ddl_built", "global_process_set",
    "grouped_allreduce", "init", "is_initialized", "local_rank", "local_size", "rank",
    "shutdown", "size", "callbacks", "elastic", "DistributedOptimizer", "ProcessSet",
    "add_process_set", "remove_process_set",
    "PartialDistributedOptimizer", "broadcast_global_variables",
]


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",  # noqa: N802
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """The Keras optimizer (Keras 3, or tf-keras), made to reduce (op) its gradients over
    every rank of process_set before it applies them; returns it."""
    del name, device_dense, device_sparse, num_groups, groups, scale_local_gradients
    reduce = _reducer(compression, sparse_as_dense, op, gradient_predivide_factor,
                      "DistributedOptimizer", process_set)
    return _distribute(optimizer, lambda grads, variables: reduce(grads),
                       backward_passes_per_step, average_aggregated_gradients)


def _distribute(optimizer, reduce, passes, average):
    """The optimizer with reduce(grads, variables) applied to its gradients: tf-keras ones as
    Horovod's subclass (_keras2, passes > 1 too), Keras 3's in place."""
    if _dtf.keras_of(optimizer) == "tf_keras":
        from ._keras2 import distributed_optimizer  # noqa: PLC0415

        return distributed_optimizer(optimizer, reduce, passes, average)
    if passes != 1:
        raise ValueError(f"hvd.DistributedOptimizer(backward_passes_per_step={passes}): not "
                         "supported on Keras 3 by horovod.tensorflow.keras on libddl; give the "
                         "Keras optimizer gradient_accumulation_steps= instead (its accumulated "
                         "gradients are averaged over the ranks at every step)")
    reduce.with_variables = True
    return _dtf.distribute_optimizer(optimizer, reduce=reduce)


def broadcast_global_variables(root_rank, model=None):
    """Assigns root_rank's values of the model's (and its optimizer's) variables everywhere."""
    if model is None:
        raise ValueError("hvd.broadcast_global_variables: TensorFlow 2's Keras has no global "
                         "variable collection: pass model=, or use "
                         "hvd.callbacks.BroadcastGlobalVariablesCallback")
    from ddl.keras import model_variables

    broadcast_variables(model_variables(model), root_rank)


def PartialDistributedOptimizer(optimizer, name=None, device_dense="",  # noqa: N802
                                device_sparse="", compression=Compression.none,
                                sparse_as_dense=False, gradient_predivide_factor=1.0, op=Average,
                                backward_passes_per_step=1, average_aggregated_gradients=False,
                                groups=None, process_set=global_process_set, local_layers=None,
                                scale_local_gradients=True):
    """DistributedOptimizer whose gradients of the variables of `local_layers` (a layer or a
    list of them) stay this rank's own (divided by size() when scale_local_gradients)."""
    layers = [] if local_layers is None else (
        list(local_layers) if isinstance(local_layers, (list, tuple)) else [local_layers])
    local = {id(v) for layer in layers for v in layer.trainable_weights}
    members = len(process_set.ranks)
    reduce = _reducer(compression, sparse_as_dense, op, gradient_predivide_factor,
                      "PartialDistributedOptimizer", process_set)
    del name, device_dense, device_sparse, groups
    return _distribute(optimizer, _partial(reduce, local, scale_local_gradients, members),
                       backward_passes_per_step, average_aggregated_gradients)


def _partial(reduce, local, scale, members):
    """A reduction of (gradient, variable) lists that leaves the local variables' own."""
    return lambda grads, variables: reduce_but_local(lambda g, v: reduce(g), grads, variables,
                                                     local, scale, members)
