"""horovod.tensorflow.SyncBatchNormalization on libddl: batch normalization whose batch
statistics are those of every rank's batch together, for tf.keras (Keras 3, or tf-keras under
TF_USE_LEGACY_KERAS=1).

How it works: the layer is tf.keras' BatchNormalization with its batch moments replaced (_moments,
which both Keras 3 and tf-keras call): each rank sums its inputs, their squares and
its count over the reduced axes, the three are summed over the ranks in one fused allreduce
(ddl's op, matched by name like every other), and mean = sum / count, variance = sum of squares
/ count - mean^2, so every rank normalizes with the global batch's moments and updates its
moving averages alike.
"""

import tensorflow as tf

import ddl.tensorflow as _dtf

__all__ = ["SyncBatchNormalization"]


def _global_moments(x, axes, keep_dims):
    """Mean and variance of x over `axes` on every rank's x together."""
    x = tf.cast(x, tf.float32) if x.dtype in (tf.float16, tf.bfloat16) else x
    count = tf.cast(tf.reduce_prod(tf.gather(tf.shape(x), axes)), x.dtype)
    local_sum = tf.reduce_sum(x, axis=axes, keepdims=True)
    local_squares = tf.reduce_sum(tf.square(x), axis=axes, keepdims=True)
    total, squares, n = _dtf.allreduce_n([local_sum, local_squares, tf.reshape(count, [1])],
                                         "sum")
    mean = total / n
    variance = squares / n - tf.square(mean)
    if not keep_dims:
        mean, variance = tf.squeeze(mean, axes), tf.squeeze(variance, axes)
    return mean, variance


class SyncBatchNormalization(tf.keras.layers.BatchNormalization):
    """BatchNormalization over the batches of every rank (the same arguments)."""

    def __init__(self, *args, **kwargs):
        kwargs.pop("fused", None)  # the moments come from the ranks, not a fused kernel
        super().__init__(*args, **kwargs)
        if hasattr(self, "fused"):
            self.fused = False

    def _moments(self, inputs, *args, **kwargs):
        """Keras 3: (inputs, mask), its build having set _reduction_axes; tf-keras: (inputs,
        reduction_axes, keep_dims)."""
        if "keep_dims" in kwargs or len(args) == 2:
            axes = args[0] if args else kwargs["reduction_axes"]
            keep_dims = kwargs["keep_dims"] if "keep_dims" in kwargs else args[1]
        else:
            axes, keep_dims = self._reduction_axes, False
        mean, variance = _global_moments(inputs, list(axes), keep_dims)
        return tf.cast(mean, inputs.dtype), tf.cast(variance, inputs.dtype)
