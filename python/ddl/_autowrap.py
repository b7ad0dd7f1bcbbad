"""ddl._autowrap: IBM's `import ddl` makes a TensorFlow script data-parallel ("overrides the
optimizer to call AllReduceN"): in a rank of a job, every optimizer of Keras 3, tf-keras (new
and legacy) and tf.compat.v1.train averages its gradients over the ranks before it applies
them, and every rank starts from rank 0's variables.

How it works: install() (ddl/__init__.py calls it when a script, not ddl's own Horovod package,
imports ddl in a rank) patches the one method each family's training goes through — Keras 3's
BaseOptimizer.apply (apply_gradients and model.fit's step call it), tf-keras' Optimizer and
OptimizerV2 apply_gradients, tf.compat.v1's Optimizer.compute_gradients — in the modules already
imported, and through an import hook in those imported later, so `import ddl` alone never
imports TensorFlow. A patched call first checks that the optimizer is not distributed already
(ddl.tensorflow.distribute_optimizer, DDLCallback, Horovod's DistributedOptimizer) and that the
gradients did not come out of a DistributedGradientTape: then it leaves them alone, so they are
averaged once. Otherwise, on the optimizer's first step it broadcasts the variables from rank 0
(a tf.cond on a flag of the optimizer, so inside a compiled step only the first run does),
averages the gradients with one fused allreduce per dtype, and applies them. Keras 3's compile
turns jit_compile="auto" off (XLA cannot run ddl's ops). Rank 0 says once on standard error
what was wrapped.
"""

import importlib.abc
import importlib.util
import os
import sys
import threading

__all__ = ["install"]

# module -> (class, method, family): the methods patched when their module is imported.
_TARGETS = {
    "keras.src.optimizers.base_optimizer": ("BaseOptimizer", "apply", "Keras 3"),
    "keras.src.trainers.trainer": ("Trainer", "compile", "Keras 3"),
    "tf_keras.src.optimizers.optimizer": ("Optimizer", "apply_gradients", "tf-keras"),
    "tf_keras.src.optimizers.legacy.optimizer_v2": ("OptimizerV2", "apply_gradients",
                                                    "tf-keras legacy"),
    "tensorflow.python.training.optimizer": ("Optimizer", "compute_gradients",
                                             "tf.compat.v1.train"),
}
_said = set()
_lock = threading.Lock()
reduced_by_tape = set()  # ids of gradients a DistributedGradientTape reduced (not to redo)
installed = False


def install():
    """Patches the targets loaded now and hooks the imports of the others."""
    global installed
    installed = True
    for module in _TARGETS:
        if module in sys.modules:
            _patch(sys.modules[module], module)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the loader of a target module so that it is patched once executed."""

    def find_spec(self, name, path, target=None):
        if name not in _TARGETS:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            _patch(module, name)

        spec.loader.exec_module = exec_module
        return spec


def _patch(module, name):
    cls_name, method, family = _TARGETS[name]
    cls = getattr(module, cls_name, None)
    if cls is None or getattr(getattr(cls, method, None), "_ddl_auto", False):
        return
    wrapper = {"apply": _apply, "apply_gradients": _apply_gradients,
               "compute_gradients": _compute_gradients, "compile": _compile}[method]
    patched = wrapper(getattr(cls, method), family)
    patched._ddl_auto = True
    setattr(cls, method, patched)


def _distributed(optimizer, grads):
    """True when the gradients are reduced elsewhere: a distributed optimizer, or a tape's."""
    if getattr(optimizer, "_ddl_original", None) is not None or hasattr(optimizer, "_hvd_reduce"):
        return True
    present = [id(g) for g in grads if g is not None]
    if present and all(i in reduced_by_tape for i in present):
        reduced_by_tape.difference_update(present)
        return True
    return False


def _averaged(optimizer, grads, variables, family):
    """The gradients averaged over the ranks, after rank 0's variables on the first step."""
    import tensorflow as tf  # noqa: PLC0415 (only once TensorFlow is in use)

    from . import tensorflow as ddl_tf  # noqa: PLC0415

    _say(optimizer, family)
    synced = _first_step_sync(optimizer, [v for v in variables if v is not None], tf, ddl_tf)
    with tf.control_dependencies([synced] if synced is not None else []):
        return [None if g is None else tf.identity(g)
                for g in ddl_tf.reduce_gradients(list(grads), "avg")]


def _first_step_sync(optimizer, variables, tf, ddl_tf):
    """Broadcasts the variables from rank 0 the first time this optimizer applies."""
    flag = getattr(optimizer, "_ddl_synced", None)
    if flag is None:
        with tf.init_scope():
            flag = tf.Variable(False, trainable=False, name="ddl_synced")
        object.__setattr__(optimizer, "_ddl_synced", flag)

    def sync():
        done = ddl_tf.broadcast_assigns(variables, 0) + [flag.assign(True)]
        with tf.control_dependencies([d for d in done if d is not None]):
            return tf.constant(True)

    if tf.executing_eagerly():
        return None if bool(flag.numpy()) else sync()
    return tf.cond(flag.read_value(), lambda: tf.constant(True), sync)


def _say(optimizer, family):
    from . import rank, size  # noqa: PLC0415

    key = type(optimizer).__name__
    with _lock:
        if key in _said:
            return
        _said.add(key)
    if rank() == 0:
        print(f"ddl: import ddl: {type(optimizer).__name__} ({family}) averages its gradients "
              f"over the {size()} ranks before it applies them, and every rank starts from "
              "rank 0's variables", file=sys.stderr, flush=True)


def _apply(original, family):
    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        variables = trainable_variables if trainable_variables is not None else \
            getattr(self, "_trainable_variables", [])
        if not _distributed(self, grads):
            grads = _averaged(self, grads, list(variables), family)
        return original(self, grads, trainable_variables)

    return apply


def _apply_gradients(original, family):
    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        pairs = list(grads_and_vars)
        grads, variables = [g for g, _ in pairs], [v for _, v in pairs]
        if not _distributed(self, grads):
            grads = _averaged(self, grads, variables, family)
        return original(self, list(zip(grads, variables)), *args, **kwargs)

    return apply_gradients


def _compute_gradients(original, family):
    def compute_gradients(self, *args, **kwargs):
        pairs = original(self, *args, **kwargs)
        grads, variables = [g for g, _ in pairs], [v for _, v in pairs]
        if _distributed(self, grads):
            return pairs
        return list(zip(_averaged(self, grads, variables, family), variables))

    return compute_gradients


def _compile(original, family):
    del family

    def compile(self, *args, **kwargs):  # noqa: A001 (Keras' name)
        if kwargs.get("jit_compile", "auto") == "auto":
            kwargs["jit_compile"] = False  # XLA cannot run ddl's ops
        return original(self, *args, **kwargs)

    return compile


def wanted():
    """True in a rank of a job (DDL_RANK and DDL_SIZE set) unless DDL_AUTOWRAP=0."""
    return ("DDL_RANK" in os.environ and "DDL_SIZE" in os.environ
            and os.environ.get("DDL_AUTOWRAP", "1") != "0")
