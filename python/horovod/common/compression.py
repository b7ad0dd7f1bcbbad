"""What Horovod's gradient compression is for every framework: the Compressor interface and
Compression.none. horovod.torch.compression and horovod.tensorflow.compression add fp16 in
their framework's terms."""


class Compressor:
    """compress(tensor) -> (tensor to send, context); decompress(tensor, context) -> tensor."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        del ctx
        return tensor


class NoneCompressor(Compressor):
    """Sends tensors unchanged."""
