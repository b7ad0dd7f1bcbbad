"""ddl.tensorflow: libddl's collectives as TensorFlow ops, and data-parallel training for
TensorFlow 2 and Keras 3 (IBM's `import ddl` recipe; horovod.tensorflow is built on it).

    import tensorflow as tf, ddl
    x = ddl.allreduce(tf.ones([4]), op="avg")      # the same as ddl.tensorflow.allreduce
    with tf.GradientTape() as tape:
        loss = ...
    grads = ddl.tensorflow.reduce_gradients(tape.gradient(loss, model.trainable_variables))

How it works: the ops come from ddl/_tf_ops.so (python/tensorflow/tf_ops.cc, built against the
TensorFlow the package was built for): DdlAllreduce reduces a list of tensors of one dtype with
one fused libddl call (allreduce_n), DdlAllgather (first dimensions may differ), DdlBroadcast
and DdlAlltoall. They run asynchronously on a worker thread, and they are stateful, so inside a
tf.function they keep program order, the same on every rank. Each function here checks the
dtype, joins the job (ddl.init()) when it builds the op, and returns new tensors (a tf.Variable
is assigned the result as well, so allreduce and broadcast work on variables "in place").
Gradients are registered for all four ops (as Horovod's: the gradient of an allreduce is the
allreduce of the gradient, of an allgather this rank's rows of the summed gradient, of a
broadcast the summed gradient on the root and zeros elsewhere, of an alltoall the reverse
alltoall). reduce_gradients() averages a list of gradients with one op per dtype
(IndexedSlices become dense; None stays None), the core of DistributedGradientTape and of the
Keras optimizer wrapper distribute_optimizer(). Importing ddl does not import this module:
ddl's functions load it when they are given a TensorFlow tensor.
"""

import os
import sys

import tensorflow as tf

from . import init, rank, size

__all__ = [
    "allreduce", "allreduce_n", "broadcast", "allgather", "alltoall", "reduce_gradients",
    "broadcast_variables", "DistributedGradientTape", "distribute_optimizer", "allreduce_metrics",
    "is_tensorflow",
]

_OPS = {"sum": 0, "avg": 1, "min": 2, "max": 3, "prod": 4}
_DTYPES = (tf.float32, tf.float64, tf.float16, tf.bfloat16, tf.int32, tf.int64, tf.uint8)
_DTYPE_NAMES = "float32, float64, float16, bfloat16, int32, int64, uint8"


def _load():
    """The op library ddl/_tf_ops.so, or ImportError saying why it cannot be had."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_tf_ops.so")
    if not os.path.exists(path):
        raise ImportError(f"ddl.tensorflow: {path} is missing: this ddl was built without "
                          "TensorFlow (its build found no tensorflow in the Python it was built "
                          f"for); build or install it for {sys.executable}")
    try:
        return tf.load_op_library(path)
    except tf.errors.NotFoundError as e:
        raise ImportError(f"ddl.tensorflow: {path} does not load into TensorFlow "
                          f"{tf.__version__} (built for another version? rebuild ddl for "
                          f"it): {e}") from None


_lib = _load()


def is_tensorflow(obj):
    """True for a tf.Tensor, tf.Variable, tf.IndexedSlices or Keras variable."""
    return isinstance(obj, (tf.Tensor, tf.Variable, tf.IndexedSlices)) or (
        type(obj).__module__.startswith("keras") and hasattr(obj, "value")
        and hasattr(obj, "assign"))


def _op(op):
    if op not in _OPS:
        raise ValueError(f"unknown op {op!r}: one of {', '.join(_OPS)}")
    return _OPS[op]


def _tensor(x, what):
    """x as a tf.Tensor of a dtype libddl reduces; TypeError naming `what` otherwise."""
    if isinstance(x, tf.IndexedSlices):
        x = tf.convert_to_tensor(x)
    elif hasattr(x, "value") and not isinstance(x, tf.Tensor) and callable(x.value):
        x = x.value()  # tf.Variable
    elif hasattr(x, "value") and not isinstance(x, tf.Tensor):
        x = x.value  # a Keras 3 variable
    x = tf.convert_to_tensor(x)
    if x.dtype not in _DTYPES:
        raise TypeError(f"{what}: dtype {x.dtype.name} is not one of {_DTYPE_NAMES}")
    return x


def _assign_back(x, result):
    """Assigns result to x when x is a variable; returns result, or x for a variable."""
    if isinstance(x, tf.Variable) or (hasattr(x, "assign") and not isinstance(x, tf.Tensor)):
        x.assign(result)
        return x
    return result


def allreduce_n(tensors, op="sum"):
    """op over every rank's tensors (sum, avg, min, max, prod): a list of new tensors, one
    fused op per dtype (in a fixed dtype order, so every rank makes the same calls)."""
    code = _op(op)
    values = [_tensor(t, f"ddl.tensorflow.allreduce_n: item {i}") for i, t in enumerate(tensors)]
    init()
    out = [None] * len(values)
    for dtype in sorted({v.dtype for v in values}, key=_DTYPES.index):
        places = [i for i, v in enumerate(values) if v.dtype == dtype]
        for i, r in zip(places, _lib.ddl_allreduce([values[i] for i in places], reduce_op=code)):
            out[i] = r
    return out


def allreduce(x, op="sum"):
    """op over every rank's x (sum, avg, min, max, prod): a new tensor; a variable is assigned
    the result (and returned)."""
    return _assign_back(x, allreduce_n([_tensor(x, "ddl.tensorflow.allreduce")], op)[0])


def broadcast(x, root=0):
    """Rank root's x on every rank: a new tensor; a variable is assigned it (and returned)."""
    value = _tensor(x, "ddl.tensorflow.broadcast")
    if not 0 <= int(root) < size():
        raise ValueError(f"ddl.tensorflow.broadcast: root {root} is not a rank of this job of "
                         f"{size()} (0..{size() - 1})")
    return _assign_back(x, _lib.ddl_broadcast(value, root_rank=int(root)))


def allgather(x):
    """Every rank's x concatenated on the first axis, by rank (the first dimension may differ
    between ranks; the others must match); a scalar counts as a vector of one."""
    value = _tensor(x, "ddl.tensorflow.allgather")
    init()
    return _lib.ddl_allgather(value)


def alltoall(x, splits=None, with_splits=False):
    """splits[j] rows (first-axis slices) of x to rank j, in order (equal blocks when splits is
    None); returns what every rank sent here concatenated by rank, and with with_splits=True
    also the rows received from each rank (an int64 vector)."""
    value = _tensor(x, "ddl.tensorflow.alltoall")
    init()
    splits = tf.zeros([0], tf.int64) if splits is None else tf.cast(splits, tf.int64)
    out, received = _lib.ddl_alltoall(value, splits)
    return (out, received) if with_splits else out


@tf.RegisterGradient("DdlAllreduce")
def _allreduce_grad(op, *grads):
    code = op.get_attr("reduce_op")
    if code not in (_OPS["sum"], _OPS["avg"]):
        name = next(k for k, v in _OPS.items() if v == code)
        raise LookupError(f"ddl.tensorflow: an allreduce with op {name!r} has no gradient "
                          "(sum and avg have)")
    grads = [tf.zeros_like(out) if g is None else g for g, out in zip(grads, op.outputs)]
    return _lib.ddl_allreduce(grads, reduce_op=code)


@tf.RegisterGradient("DdlBroadcast")
def _broadcast_grad(op, grad):
    reduced = _lib.ddl_allreduce([grad], reduce_op=_OPS["sum"])[0]
    return reduced if rank() == op.get_attr("root_rank") else reduced * 0


@tf.RegisterGradient("DdlAllgather")
def _allgather_grad(op, grad):
    reduced = _lib.ddl_allreduce([grad], reduce_op=_OPS["sum"])[0]
    x = op.inputs[0]
    rows = tf.reshape(tf.size(x, out_type=tf.int64), [1]) if x.shape.rank == 0 else \
        tf.shape(x, out_type=tf.int64)[:1]
    every = _lib.ddl_allgather(rows)
    start = tf.reduce_sum(every[:rank()])
    mine = reduced[start:start + every[rank()]]
    return tf.reshape(mine, tf.shape(x))


@tf.RegisterGradient("DdlAlltoall")
def _alltoall_grad(op, grad, unused_splits_grad):
    del unused_splits_grad
    back, _ = _lib.ddl_alltoall(grad, op.outputs[1])
    return [tf.reshape(back, tf.shape(op.inputs[0])), None]


def reduce_gradients(grads, op="avg"):
    """The gradients (a list; None entries stay None, IndexedSlices become dense) reduced over
    every rank with op, one fused allreduce per dtype."""
    grads = list(grads)
    places = [i for i, g in enumerate(grads) if g is not None]
    reduced = allreduce_n([grads[i] for i in places], op) if places else []
    out = list(grads)
    for i, r in zip(places, reduced):
        out[i] = r
    return out


def broadcast_variables(variables, root=0):
    """Assigns rank root's values to the variables (tf or Keras) on every rank: one broadcast
    per dtype of all the variables packed flat."""
    variables = list(variables)
    if not 0 <= int(root) < size():
        raise ValueError(f"ddl.tensorflow.broadcast_variables: root {root} is not a rank of "
                         f"this job of {size()} (0..{size() - 1})")
    values = [_tensor(v, f"ddl.tensorflow.broadcast_variables: {getattr(v, 'name', i)}")
              for i, v in enumerate(variables)]
    for dtype in sorted({v.dtype for v in values}, key=_DTYPES.index):
        places = [i for i, v in enumerate(values) if v.dtype == dtype]
        flat = tf.concat([tf.reshape(values[i], [-1]) for i in places], 0)
        flat = _lib.ddl_broadcast(flat, root_rank=int(root))
        sizes = [int(values[i].shape.num_elements()) for i in places]
        for i, part in zip(places, tf.split(flat, sizes)):
            variables[i].assign(tf.reshape(part, values[i].shape))


class DistributedGradientTape(tf.GradientTape):
    """A tf.GradientTape whose gradient() returns the gradients averaged (op) over every rank:
    wrap an existing tape (DistributedGradientTape(tape)) or use it as the tape itself.
    `reduce(grads) -> grads` (a flat list, None entries included) replaces the reduction."""

    def __init__(self, tape=None, op="avg", persistent=False, watch_accessed_variables=True,
                 reduce=None):
        if tape is not None:
            persistent = tape._persistent
            watch_accessed_variables = tape._watch_accessed_variables
        super().__init__(persistent=persistent,
                         watch_accessed_variables=watch_accessed_variables)
        _op(op)
        self._ddl_reduce = reduce or (lambda grads: reduce_gradients(grads, op))
        if tape is not None:
            self._tape = tape._tape

    def gradient(self, target, sources, output_gradients=None, **kwargs):
        grads = super().gradient(target, sources, output_gradients, **kwargs)
        flat = tf.nest.flatten(grads)
        return tf.nest.pack_sequence_as(grads, self._ddl_reduce(flat))


def _in_xla():
    """True while tracing an XLA-compiled function (whose ops need XLA kernels)."""
    from tensorflow.python.framework import ops
    from tensorflow.python.ops import control_flow_util

    return control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph())


XLA_MESSAGE = ("ddl: the training step is being compiled with XLA (Keras' jit_compile), which "
               "cannot run ddl's collectives: compile the model with jit_compile=False (the "
               "callbacks ddl.DDLCallback and horovod's BroadcastGlobalVariablesCallback and "
               "MetricAverageCallback set it for you)")


def distribute_optimizer(optimizer, op="avg", reduce=None):
    """Makes a Keras 3 optimizer reduce (op) its gradients over every rank before it applies
    them; returns it. `reduce(grads) -> grads` replaces the reduction (Horovod's options).
    Applying it twice is harmless."""
    if getattr(optimizer, "_ddl_original_apply", None) is not None:
        return optimizer
    _op(op)
    original = optimizer.apply
    reducer = reduce or (lambda grads: reduce_gradients(grads, op))

    def apply(grads, trainable_variables=None):
        if _in_xla():
            raise ValueError(XLA_MESSAGE)
        return original(reducer(list(grads)), trainable_variables)

    optimizer._ddl_original_apply = original
    optimizer.apply = apply
    return optimizer


def no_xla(model):
    """Turns off XLA for the model's training step (an XLA-compiled step cannot call ddl's
    ops), rebuilding a training function already made."""
    if getattr(model, "jit_compile", False):
        model.jit_compile = False
        if getattr(model, "train_function", None) is not None:
            model.make_train_function(force=True)


def prepare_model(model):
    """Before training: gives the model's optimizer the gradient reduction and turns off XLA."""
    if getattr(model, "optimizer", None) is not None:
        distribute_optimizer(model.optimizer)
    no_xla(model)


def allreduce_metrics(logs, op="avg"):
    """Averages (op) the numeric values of a Keras logs dict over every rank, in place, with
    one allreduce (keys in sorted order: every rank must have the same keys)."""
    import numpy

    from . import allreduce as ddl_allreduce

    if not logs:
        return logs
    keys = sorted(k for k, v in logs.items() if isinstance(v, (int, float, numpy.number))
                  or (hasattr(v, "shape") and not getattr(v, "shape", (1,))))
    values = numpy.array([float(logs[k]) for k in keys], dtype=numpy.float64)
    ddl_allreduce(values, op=op)
    for k, v in zip(keys, values):
        logs[k] = float(v)
    return logs
