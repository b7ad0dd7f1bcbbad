"""Gradient compression for horovod.tensorflow's allreduce, DistributedGradientTape and
DistributedOptimizer, as Horovod's: Compression.none sends tensors as they are,
Compression.fp16 sends floating-point tensors as float16 and restores their dtype afterwards."""

import tensorflow as tf

from ..common.compression import Compressor, NoneCompressor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating and tensor.dtype != tf.float16:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tf.cast(tensor, ctx)


class Compression:
    """The compressors by name: Compression.none, Compression.fp16."""

    none = NoneCompressor
    fp16 = FP16Compressor
