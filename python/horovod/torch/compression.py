"""Gradient compression for allreduce and DistributedOptimizer, as Horovod's: Compression.none
sends tensors as they are, Compression.fp16 sends floating-point tensors as float16 (half the
bytes; libddl sums float16 rounding to nearest even) and restores their dtype afterwards."""

import torch

from ..common.compression import Compressor, NoneCompressor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point:
            return tensor.type(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.type(ctx)


class Compression:
    """The compressors by name: Compression.none, Compression.fp16."""

    none = NoneCompressor
    fp16 = FP16Compressor
