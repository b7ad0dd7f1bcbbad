"""ddl.tensorflow: libddl's collectives as TensorFlow ops, and data-parallel training for
TensorFlow 2 and Keras 3 (IBM's `import ddl` recipe; horovod.tensorflow is built on it).

    import tensorflow as tf, ddl
    x = ddl.allreduce(tf.ones([4]), op="avg")      # the same as ddl.tensorflow.allreduce
    with tf.GradientTape() as tape:
        loss = ...
    grads = ddl.tensorflow.reduce_gradients(tape.gradient(loss, model.trainable_variables))

How it works: the ops come from ddl/_tf_ops.so (python/ext/tensorflow/tf_ops.cc, built against the
TensorFlow the package was built for): DdlAllreduce reduces a list of tensors of one dtype with
one fused libddl call (allreduce_n), DdlAllgather (first dimensions may differ), DdlBroadcast
and DdlAlltoall. Each function takes group= (a ddl.Group, as ddl's numpy and torch functions
do; None: the whole job): the op's `group` attr is the group's libddl handle, its roots and
sizes are group ranks and sizes, and the request thread hands its calls to ddl._negotiate with
that group, so they are matched among its members only. They run asynchronously on a worker
thread, and they are stateful, so inside a
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

import ctypes
import functools
import re
import threading

import tensorflow as tf

from . import _NUMPY_NAMES, _OPS, _TYPES, _binaries, _negotiate, _op, init, rank, size
from ._ddl import MismatchError

__all__ = [
    "allreduce", "allreduce_n", "broadcast", "allgather", "alltoall", "reduce_gradients",
    "broadcast_variables", "DistributedGradientTape", "distribute_optimizer", "allreduce_metrics",
    "is_tensorflow", "join", "ibm_init", "bcast", "all_reduce_n",
]

_DTYPES = tuple(tf.as_dtype(t) for t in _TYPES)  # libddl's, in ddl_datatype_t's order
_DTYPE_NAMES = ", ".join(_TYPES)


def _load():
    """The op library _tf_ops.so for this TensorFlow (ddl._binaries), or ImportError saying why
    it cannot be had."""
    path = _binaries.tf_ops_path(tf.__version__)
    try:
        return tf.load_op_library(path)
    except tf.errors.NotFoundError as e:
        raise ImportError(f"ddl.tensorflow: {path} does not load into TensorFlow "
                          f"{tf.__version__} (built for another version? rebuild ddl for "
                          f"it): {e}") from None


_lib = _load()


class _Bridge:
    """The thread that takes the ops' requests (python/ext/tensorflow/tf_ops.cc: Requests) and
    hands them to ddl._negotiate, which runs each on ddl's worker thread once every rank has
    made the op of its name with the same signature, or fails it on every rank."""

    def __init__(self):
        c = ctypes.CDLL(_binaries.tf_ops_path(tf.__version__))
        c.ddl_tf_next.restype = ctypes.c_int64
        c.ddl_tf_group.restype, c.ddl_tf_group.argtypes = ctypes.c_int64, [ctypes.c_int64]
        for f in (c.ddl_tf_name, c.ddl_tf_signature):
            f.restype, f.argtypes = ctypes.c_char_p, [ctypes.c_int64]
        c.ddl_tf_run.argtypes = [ctypes.c_int64]
        c.ddl_tf_fail.argtypes = [ctypes.c_int64, ctypes.c_int, ctypes.c_char_p]
        self._c = c
        threading.Thread(target=self._run, name="ddl-tf-requests", daemon=True).start()

    def _run(self):
        c = self._c
        while True:
            rid = c.ddl_tf_next()
            name = c.ddl_tf_name(rid).decode(errors="replace")
            sig = tuple(c.ddl_tf_signature(rid).decode(errors="replace").split("|"))
            handle = c.ddl_tf_group(rid)
            group = _groups.get(handle)
            if handle and (group is None or group._handle is None):
                c.ddl_tf_fail(rid, 1, b"ddl: the op's group was destroyed (or was never made by "
                                      b"ddl.new_group in this process)")
                continue
            try:
                _negotiate.submit(name, functools.partial(c.ddl_tf_run, rid), sig=sig,
                                  group=group, failed=functools.partial(self._failed, rid))
            except ValueError as e:  # a name still pending
                c.ddl_tf_fail(rid, 1, f"ddl: {e}".encode())

    def _failed(self, rid, error):
        mismatch = isinstance(error, (MismatchError, _negotiate.NameMismatch))
        self._c.ddl_tf_fail(rid, 0 if mismatch else 3, f"ddl: {error}".encode())


_bridge = None
_bridge_lock = threading.Lock()
_groups = {}  # libddl group handle -> the ddl.Group whose ops carry it (the bridge's lookup)


def _group_attr(group):
    """The `group` attr of an op on `group` (a ddl.Group; None: the job, 0)."""
    if group is None:
        return 0
    handle = group._live_handle()
    _groups[handle] = group
    return handle


def _group_of(op):
    """The ddl.Group (None: the job) of a ddl op (a gradient's forward op)."""
    return _groups.get(op.get_attr("group"))


def _members(group):
    """(this rank's rank in group, its size); the job's for None."""
    return (rank(), size()) if group is None else (group.rank(), group.size())


def _named(kind, name=None):
    """The ddl_name attr of a new op of `kind`: in a graph, "" (the node's name, alike on every
    rank, pairs it); run eagerly, `name` or "<kind>.eager" (an eager op runs to its end before
    the thread's next one starts, so the ranks' unnamed eager ops of a kind pair in the order
    they run, however many each rank ran before: a rank that joined, or whose call failed
    before it was made, does not shift them); starts the request thread."""
    global _bridge
    if _bridge is None:
        with _bridge_lock:
            if _bridge is None:
                _bridge = _Bridge()
    if not tf.executing_eagerly():
        return ""
    return str(name) if name else f"{kind}.eager"


def is_tensorflow(obj):
    """True for a tf.Tensor, tf.Variable, tf.IndexedSlices or Keras variable."""
    return isinstance(obj, (tf.Tensor, tf.Variable, tf.IndexedSlices)) or (
        type(obj).__module__.startswith("keras") and hasattr(obj, "value")
        and hasattr(obj, "assign"))


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


def _check_root(root, what, group=None):
    _, n = _members(group)
    if not 0 <= int(root) < n:
        where = "this job" if group is None else "this group"
        raise ValueError(f"{what}: root {root} is not a rank of {where} of {n} (0..{n - 1})")


def _node(name, kind=None, group=None):
    """`name` as a valid op name for a graph (None: TensorFlow names the op, after `kind` and
    the group's ranks for an op of a group, so that the ops of a group are numbered apart from
    the others: ranks outside it do not build them)."""
    if not name and group is not None:
        name = f"ddl_{kind}_group_" + "_".join(str(r) for r in group.ranks)
    return None if not name else re.sub(r"[^A-Za-z0-9_.\-/]", "_", str(name)).lstrip("_-/.") or None


def allreduce_n(tensors, op="sum", name=None, group=None):
    """op over every rank's (of `group`) tensors (sum, avg, min, max, prod): a list of new
    tensors, one fused op per dtype (in a fixed dtype order). The ops are matched across ranks
    by name (`name`, else the op's name in a graph, else the eager call's kind)."""
    code = _op(op)
    values = [_tensor(t, f"ddl.tensorflow.allreduce_n: item {i}") for i, t in enumerate(tensors)]
    init()
    out = [None] * len(values)
    dtypes = sorted({v.dtype for v in values}, key=_DTYPES.index)
    for dtype in dtypes:
        places = [i for i, v in enumerate(values) if v.dtype == dtype]
        each = name if not name or len(dtypes) == 1 else f"{name}.{dtype.name}"
        reduced = _lib.ddl_allreduce([values[i] for i in places], reduce_op=code,
                                     ddl_name=_named("allreduce", each),
                                     name=_node(each, "allreduce", group),
                                     group=_group_attr(group))
        for i, r in zip(places, reduced):
            out[i] = r
    return out


def allreduce(x, op="sum", name=None, group=None):
    """op over every rank's (of `group`) x (sum, avg, min, max, prod): a new tensor; a
    variable is assigned the result (and returned)."""
    return _assign_back(x, allreduce_n([_tensor(x, "ddl.tensorflow.allreduce")], op, name,
                                       group)[0])


def broadcast(x, root=0, name=None, grad_op="sum", group=None):
    """Rank root's (a group rank with `group`) x on every rank of the job or group: a new
    tensor; a variable is assigned it (and returned). Its gradient is the gradients reduced
    with grad_op (sum; Horovod's is avg) on root, zeros elsewhere."""
    value = _tensor(x, "ddl.tensorflow.broadcast")
    init()
    _check_root(root, "ddl.tensorflow.broadcast", group)
    return _assign_back(x, _lib.ddl_broadcast(value, root_rank=int(root),
                                              name=_node(name, "broadcast", group),
                                              ddl_name=_named("broadcast", name),
                                              grad_op=_op(grad_op), group=_group_attr(group)))


def allgather(x, name=None, grad_op="sum", group=None):
    """Every rank's (of `group`) x concatenated on the first axis, by rank (the first
    dimension may differ between ranks; the others must match); a scalar counts as a vector of
    one. Its gradient is this rank's rows of the gradients reduced with grad_op (sum; Horovod's
    is avg)."""
    value = _tensor(x, "ddl.tensorflow.allgather")
    init()
    return _lib.ddl_allgather(value, name=_node(name, "allgather", group),
                              ddl_name=_named("allgather", name), grad_op=_op(grad_op),
                              group=_group_attr(group))


def alltoall(x, splits=None, with_splits=False, name=None, group=None):
    """splits[j] rows (first-axis slices) of x to rank j (of `group`), in order (equal blocks
    when splits is None); returns what every rank sent here concatenated by rank, and with
    with_splits=True also the rows received from each rank (an int64 vector)."""
    value = _tensor(x, "ddl.tensorflow.alltoall")
    init()
    splits = tf.zeros([0], tf.int64) if splits is None else tf.cast(splits, tf.int64)
    out, received = _lib.ddl_alltoall(value, splits, name=_node(name, "alltoall", group),
                                      ddl_name=_named("alltoall", name),
                                      group=_group_attr(group))
    return (out, received) if with_splits else out


@tf.RegisterGradient("DdlAllreduce")
def _allreduce_grad(op, *grads):
    code = op.get_attr("reduce_op")
    if code not in (_OPS["sum"], _OPS["avg"]):
        name = next(k for k, v in _OPS.items() if v == code)
        raise LookupError(f"ddl.tensorflow: an allreduce with op {name!r} has no gradient "
                          "(sum and avg have)")
    grads = [tf.zeros_like(out) if g is None else g for g, out in zip(grads, op.outputs)]
    return _lib.ddl_allreduce(grads, reduce_op=code, ddl_name=_named("allreduce"),
                              group=op.get_attr("group"))


@tf.RegisterGradient("DdlBroadcast")
def _broadcast_grad(op, grad):
    reduced = _lib.ddl_allreduce([grad], reduce_op=op.get_attr("grad_op"),
                                 ddl_name=_named("allreduce"), group=op.get_attr("group"))[0]
    me, _ = _members(_group_of(op))
    return reduced if me == op.get_attr("root_rank") else reduced * 0


@tf.RegisterGradient("DdlAllgather")
def _allgather_grad(op, grad):
    group = op.get_attr("group")
    reduced = _lib.ddl_allreduce([grad], reduce_op=op.get_attr("grad_op"),
                                 ddl_name=_named("allreduce"), group=group)[0]
    x = op.inputs[0]
    rows = tf.reshape(tf.size(x, out_type=tf.int64), [1]) if x.shape.rank == 0 else \
        tf.shape(x, out_type=tf.int64)[:1]
    every = _lib.ddl_allgather(rows, ddl_name=_named("allgather"), group=group)
    me, _ = _members(_group_of(op))
    start = tf.reduce_sum(every[:me])
    mine = reduced[start:start + every[me]]
    return tf.reshape(mine, tf.shape(x))


@tf.RegisterGradient("DdlAlltoall")
def _alltoall_grad(op, grad, unused_splits_grad):
    del unused_splits_grad
    back, _ = _lib.ddl_alltoall(grad, op.outputs[1], ddl_name=_named("alltoall"),
                                group=op.get_attr("group"))
    return [tf.reshape(back, tf.shape(op.inputs[0])), None]


def reduce_gradients(grads, op="avg", group=None):
    """The gradients (a list; None entries stay None, IndexedSlices become dense) reduced over
    every rank (of `group`) with op, one fused allreduce per dtype."""
    grads = list(grads)
    places = [i for i, g in enumerate(grads) if g is not None]
    reduced = allreduce_n([grads[i] for i in places], op, group=group) if places else []
    out = list(grads)
    for i, r in zip(places, reduced):
        out[i] = r
    return out


def broadcast_variables(variables, root=0, group=None):
    """Assigns rank root's (a group rank with `group`) values to the variables (tf or Keras)
    on every rank of the job or group: one broadcast per dtype of all the variables packed
    flat. In a tf.compat.v1 graph, returns the op that does it."""
    assigns = broadcast_assigns(variables, root, group)
    return None if tf.executing_eagerly() or tf.inside_function() else tf.group(*assigns)


def broadcast_assigns(variables, root=0, group=None):
    """broadcast_variables' assignments (ops or values to depend on, in a graph)."""
    variables = list(variables)
    init()
    _check_root(root, "ddl.tensorflow.broadcast_variables", group)
    values = [_tensor(v, f"ddl.tensorflow.broadcast_variables: {getattr(v, 'name', i)}")
              for i, v in enumerate(variables)]
    assigns = []
    for dtype in sorted({v.dtype for v in values}, key=_DTYPES.index):
        places = [i for i, v in enumerate(values) if v.dtype == dtype]
        flat = tf.concat([tf.reshape(values[i], [-1]) for i in places], 0)
        flat = _lib.ddl_broadcast(flat, root_rank=int(root), ddl_name=_named("broadcast"),
                                  name=_node(None, "broadcast", group),
                                  group=_group_attr(group))
        sizes = [int(values[i].shape.num_elements()) for i in places]
        for i, part in zip(places, tf.split(flat, sizes)):
            assigns.append(variables[i].assign(tf.reshape(part, values[i].shape)))
    return [a for a in assigns if a is not None]


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
        return tf.nest.pack_sequence_as(grads, mark_reduced(self._ddl_reduce(flat)))


def mark_reduced(grads):
    """grads, noted as reduced already, so that `import ddl`'s optimizers (ddl._autowrap) do
    not reduce them again."""
    from . import _autowrap  # noqa: PLC0415

    if _autowrap.installed:
        _autowrap.reduced_by_tape.update(id(g) for g in grads if g is not None)
    return grads


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
    """Makes an optimizer reduce (op) its gradients over every rank before it applies them;
    returns it. Keras 3: its apply(), which every other path calls; tf-keras (Keras 2, also its
    legacy optimizers): apply_gradients(), which minimize() and the training step call;
    tf.compat.v1.train optimizers: compute_gradients(), as Horovod's. `reduce(grads) -> grads`
    replaces the reduction (Horovod's options). Applying it twice is harmless."""
    if getattr(optimizer, "_ddl_original", None) is not None:
        return optimizer
    _op(op)
    reducer = reduce or (lambda grads: reduce_gradients(grads, op))
    kind = _optimizer_kind(optimizer)
    if kind is None:
        raise TypeError(f"ddl: a {type(optimizer).__module__}.{type(optimizer).__name__} is not "
                        "an optimizer ddl can distribute: one of Keras 3 (keras.optimizers), "
                        "tf-keras (TF_USE_LEGACY_KERAS=1) or tf.compat.v1.train")
    original = getattr(optimizer, kind)
    optimizer._ddl_original = (kind, original)
    setattr(optimizer, kind, _WRAPPERS[kind](original, reducer))
    return optimizer


def _optimizer_kind(optimizer):
    """The method distribute_optimizer wraps: "apply", "apply_gradients", "compute_gradients"."""
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        return "compute_gradients"
    if keras_of(optimizer) == "keras" and hasattr(optimizer, "apply"):
        return "apply"
    if hasattr(optimizer, "apply_gradients"):
        return "apply_gradients"
    return None


def _reduced(reducer, grads, variables):
    """reducer's gradients; a reducer marked with_variables also takes the variables."""
    if getattr(reducer, "with_variables", False):
        return reducer(list(grads), list(variables))
    return reducer(list(grads))


def keras_of(obj):
    """"keras" (Keras 3) or "tf_keras" (Keras 2) for an object of a class of theirs or of a
    subclass of one (a user's optimizer); None otherwise."""
    for cls in type(obj).__mro__:
        root = cls.__module__.split(".")[0]
        if root in ("keras", "tf_keras"):
            return root
    return None


def _wrap_apply(original, reducer):
    def apply(grads, trainable_variables=None):
        if _in_xla():
            raise ValueError(XLA_MESSAGE)
        grads = list(grads)
        variables = trainable_variables if trainable_variables is not None else \
            getattr(original.__self__, "_trainable_variables", [None] * len(grads))
        return original(_reduced(reducer, grads, variables), trainable_variables)

    return apply


def _wrap_apply_gradients(original, reducer):
    def apply_gradients(grads_and_vars, *args, **kwargs):
        if _in_xla():
            raise ValueError(XLA_MESSAGE)
        pairs = list(grads_and_vars)
        grads = _reduced(reducer, [g for g, _ in pairs], [v for _, v in pairs])
        return original(list(zip(grads, [v for _, v in pairs])), *args, **kwargs)

    return apply_gradients


def _wrap_compute_gradients(original, reducer):
    def compute_gradients(*args, **kwargs):
        pairs = original(*args, **kwargs)
        grads = _reduced(reducer, [g for g, _ in pairs], [v for _, v in pairs])
        return list(zip(grads, [v for _, v in pairs]))

    return compute_gradients


_WRAPPERS = {"apply": _wrap_apply, "apply_gradients": _wrap_apply_gradients,
             "compute_gradients": _wrap_compute_gradients}


def no_xla(model):
    """Turns off XLA for the model's training step (an XLA-compiled step cannot call ddl's
    ops), rebuilding a training function already made."""
    if getattr(model, "jit_compile", False):
        made = getattr(model, "train_function", None) is not None
        model.jit_compile = False  # tf-keras drops the training function it made here
        if made:
            model.train_function = None
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


def _stand_in(sig):
    """A joined rank's part in an allreduce op of signature `sig` (tf_ops.cc: "allreduce",
    dtype, op, shapes): the same libddl call on zeros."""
    import numpy as np  # noqa: PLC0415

    from . import allreduce_n as ddl_allreduce_n  # noqa: PLC0415

    _, dtype, op, shapes = sig
    if dtype not in _NUMPY_NAMES.split(", "):
        raise TypeError(f"ddl.tensorflow.join: a joined rank cannot stand in for an allreduce "
                        f"of {dtype}")
    arrays = [np.zeros([int(d) for d in s.strip("[]").split(",") if d], dtype)
              for s in shapes.split(" ")]
    return lambda: ddl_allreduce_n(arrays, op)


def join():
    """This rank has no more data: until every rank has joined, it takes part in the other
    ranks' allreduces with zeros. Returns (an int32 scalar tensor; in a graph, when the op runs)
    the rank that joined last, the same on every rank."""
    import numpy as np  # noqa: PLC0415

    init()
    _named("join")  # the request thread serves the other ranks' ops meanwhile

    def run():
        return np.int32(_negotiate.join(_stand_in).wait())

    if tf.executing_eagerly():
        return tf.constant(run())
    return tf.reshape(tf.numpy_function(run, [], tf.int32, stateful=True), [])


# IBM PowerAI DDL's TensorFlow ops, under their names and arguments (the seeds' scripts).


def ibm_init(user_gpuid=-1, mode="", pci=""):
    """IBM's `init` op: joins the job and returns (rank, size, local_rank, local_size,
    local_gpuid) as int32 scalar tensors. user_gpuid >= 0 is the GPU the script chose (returned
    as local_gpuid); mode and pci are accepted: ddlrun's plan (-mode, the topology file) already
    decided the rings and devices."""
    del mode, pci
    from . import local_gpuid, local_rank, local_size  # noqa: PLC0415

    init()
    gpu = int(user_gpuid) if int(user_gpuid) >= 0 else local_gpuid()
    return tuple(tf.constant(v, tf.int32) for v in (rank(), size(), local_rank(),
                                                    local_size(), gpu))


def bcast(x, root=0, name=None):
    """IBM's `bcast`: rank root's x on every rank (broadcast)."""
    return broadcast(x, root, name)


def all_reduce_n(tensors, op="avg", mpi=False, check=None, name=None):
    """IBM's `all_reduce_n`: the tensors reduced over every rank (op sum or avg), one fused op
    per dtype. mpi=True reduces each tensor on its own instead (the plain, unfused baseline);
    check=tol runs both and raises ValueError when an element of the fused result is further
    than tol (relative to max(1, |baseline|)) from the baseline's."""
    if op not in ("sum", "avg"):
        raise ValueError(f"ddl.tensorflow.all_reduce_n: op {op!r}: IBM's all_reduce_n takes "
                         "'sum' or 'avg'")
    tensors = list(tensors)
    if mpi and check is None:
        return [allreduce(t, op, name and f"{name}.{i}") for i, t in enumerate(tensors)]
    fused = allreduce_n(tensors, op, name)
    if check is None:
        return fused
    baseline = [allreduce(t, op, name and f"{name}.baseline.{i}") for i, t in enumerate(tensors)]
    checks = [tf.debugging.assert_less_equal(
        tf.abs(tf.cast(f, tf.float64) - tf.cast(b, tf.float64)),
        float(check) * tf.maximum(1.0, tf.abs(tf.cast(b, tf.float64))),
        message=f"ddl.tensorflow.all_reduce_n: item {i}: the fused result is further than "
                f"check={check} from the unfused baseline") for i, (f, b) in
        enumerate(zip(fused, baseline))]
    with tf.control_dependencies(checks):
        return [tf.identity(b) if mpi else tf.identity(f) for f, b in zip(fused, baseline)]
