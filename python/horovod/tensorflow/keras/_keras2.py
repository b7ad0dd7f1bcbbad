"""Horovod's DistributedOptimizer for Keras 2 (tf-keras) optimizers, new and legacy, on libddl,
with backward_passes_per_step.

How it works: the optimizer becomes an instance of a subclass of its own class, made from its
config (so get_config/from_config, isinstance and the training step are the optimizer's own).
The gradients are reduced where Keras 2 makes them: compute_gradients (what minimize() and
model.fit's step call on the new optimizers), _compute_gradients (the legacy ones; Horovod's
spelling) and get_gradients; apply_gradients reduces gradients that did not come through them
(a custom loop's tape.gradient). Gradients of variables given to register_local_var are not
reduced (divided by size(), as Horovod's). With backward_passes_per_step = n > 1 the gradients are
accumulated here in one variable per trainable variable (the helper `_agg_helper`, whose
`counter` counts the passes since the last reduction): every n-th pass reduces the sum (divided
by n with average_aggregated_gradients) over the ranks and apply_gradients applies it, then
zeroes the sums; the other passes apply nothing but still count an iteration. The decision is
a tf.cond on the counter, the same on every rank, so the reduction's ops run on every rank
together.
"""

import tensorflow as tf

__all__ = ["distributed_optimizer"]


class _Aggregation:
    """The passes since the last reduction (counter) and the gradient sums."""

    def __init__(self, passes, average):
        self.passes, self.average = passes, average
        self.counter = tf.Variable(0, dtype=tf.int32, trainable=False, name="hvd_agg_counter")
        self.sums = None

    def add(self, grads, variables):
        """Adds this pass's gradients; True (a tensor) when this pass completes n."""
        if self.sums is None:
            self.sums = [tf.Variable(tf.zeros_like(v), trainable=False) for v in variables]
        for total, g in zip(self.sums, grads):
            if g is not None:
                total.assign_add(tf.convert_to_tensor(g))
        return tf.equal(self.counter.assign_add(1), self.passes)

    def reduced(self, reduce, grads):
        """The sums reduced over the ranks (None where the pass had no gradient)."""
        scale = 1.0 / self.passes if self.average else 1.0
        present = [i for i, g in enumerate(grads) if g is not None]
        values = reduce([self.sums[i] * tf.constant(scale, self.sums[i].dtype) for i in present])
        out = [None] * len(grads)
        for i, v in zip(present, values):
            out[i] = v
        return out

    def reset(self):
        self.counter.assign(0)
        for total in self.sums or []:
            total.assign(tf.zeros_like(total))


def _dense(grads):
    return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]


def _methods(base, reduce, passes, average):
    """The overriding methods of the distributed subclass of `base`."""

    def _hvd_reduce(self, grads, variables):
        self._hvd_reduced = True
        if passes == 1:
            return _reduce_shared(self, reduce, grads, variables)
        complete = self._agg_helper.add(_dense(grads), variables)
        present = [v for v, g in zip(variables, grads) if g is not None]
        return tf.cond(complete, lambda: self._agg_helper.reduced(
            lambda g: _reduce_shared(self, reduce, g, present), grads),
            lambda: [None if g is None else tf.zeros_like(tf.convert_to_tensor(g))
                     for g in grads])

    def register_local_var(self, var):
        """var's gradient stays this rank's own (divided by size())."""
        self._hvd_local = getattr(self, "_hvd_local", set()) | {id(var)}

    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        tape = tf.GradientTape() if tape is None else tape
        if callable(loss):
            with tape:
                tape.watch(var_list)
                loss = loss()
        grads = tape.gradient(loss, var_list, grad_loss)
        return list(zip(self._hvd_reduce(list(grads), list(var_list)), var_list))

    def compute_gradients(self, loss, var_list, tape=None):
        return _compute_gradients(self, loss, var_list, tape=tape)

    def get_gradients(self, loss, params):
        return self._hvd_reduce(list(base.get_gradients(self, loss, params)), list(params))

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        pairs = list(grads_and_vars)
        if not getattr(self, "_hvd_reduced", False):
            grads = self._hvd_reduce([g for g, _ in pairs], [v for _, v in pairs])
            pairs = list(zip(grads, [v for _, v in pairs]))
        self._hvd_reduced = False
        if passes == 1:
            return base.apply_gradients(self, pairs, *args, **kwargs)
        return tf.cond(tf.equal(self._agg_helper.counter, passes),
                       lambda: _apply_and_reset(self, base, pairs, args, kwargs),
                       lambda: _skip(self))

    return {"_hvd_reduce": _hvd_reduce, "register_local_var": register_local_var,
            "_compute_gradients": _compute_gradients,
            "compute_gradients": compute_gradients, "get_gradients": get_gradients,
            "apply_gradients": apply_gradients}


def _reduce_shared(optimizer, reduce, grads, variables):
    """The gradients of the variables not registered local reduced; the local ones divided by
    size()."""
    from .. import reduce_but_local  # noqa: PLC0415 (horovod.tensorflow imports Keras late)

    return reduce_but_local(reduce, grads, variables, getattr(optimizer, "_hvd_local", set()),
                            True)


def _apply_and_reset(optimizer, base, pairs, args, kwargs):
    with tf.control_dependencies([base.apply_gradients(optimizer, pairs, *args, **kwargs)]):
        optimizer._agg_helper.reset()
    return tf.constant(True)


def _skip(optimizer):
    optimizer.iterations.assign_add(1)
    return tf.constant(False)


def distributed_optimizer(optimizer, reduce, backward_passes_per_step=1,
                          average_aggregated_gradients=False):
    """A tf-keras optimizer like `optimizer` (its class, its config) whose gradients are
    reduce(grads, variables)d over the ranks, every backward_passes_per_step passes."""
    base = type(optimizer)
    cls = type(base.__name__, (base,), _methods(base, reduce, backward_passes_per_step,
                                                 average_aggregated_gradients))
    distributed = cls.from_config(optimizer.get_config())
    if backward_passes_per_step > 1:
        distributed._agg_helper = _Aggregation(backward_passes_per_step,
                                               average_aggregated_gradients)
    return distributed
