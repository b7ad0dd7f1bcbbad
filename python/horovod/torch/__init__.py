"""horovod.torch on libddl: Horovod's PyTorch API for scripts run unchanged under ddlrun.

    import horovod.torch as hvd
    hvd.init()
    model = torchvision.models.resnet50(norm_layer=hvd.SyncBatchNorm)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1 * hvd.size()),
                                         named_parameters=model.named_parameters(),
                                         compression=hvd.Compression.fp16)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

How it works: the calls are Horovod's (mpi_ops: init, rank, size, the collectives and their
asynchronous handles; optimizer: DistributedOptimizer, whose gradient allreduces overlap the
backward pass; functions: broadcast_parameters, broadcast_optimizer_state, broadcast_object,
allgather_object; sync_batch_norm: SyncBatchNorm; compression: Compression.none/fp16), built on
the package ddl's zero-copy collectives over libddl, on CPU tensors. Every rank must make the
same calls in the same order (libddl matches calls by order, not by name); where they differ,
every rank fails with ddl.MismatchError. Not provided: Adasum, process sets other than the
global one, elastic training, join() for uneven data, timelines.
"""

from .compression import Compression
from .functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                        broadcast_parameters)
from .mpi_ops import (Adasum, Average, Max, Min, Product, Sum, allgather, allgather_async,
                      allreduce, allreduce_, allreduce_async, allreduce_async_, alltoall,
                      alltoall_async, barrier, broadcast, broadcast_, broadcast_async,
                      broadcast_async_, ccl_built, cross_rank, cross_size, cuda_built,
                      ddl_built, gloo_built, gloo_enabled, global_process_set, grouped_allreduce,
                      grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_, init,
                      is_homogeneous, is_initialized, join, local_rank, local_size, mpi_built,
                      mpi_enabled, mpi_threads_supported, nccl_built, poll, rank, reducescatter,
                      rocm_built, shutdown, size, synchronize)
from .optimizer import DistributedOptimizer
from .sync_batch_norm import SyncBatchNorm

__all__ = [
    "Compression", "allgather_object", "broadcast_object", "broadcast_optimizer_state",
    "broadcast_parameters", "Adasum", "Average", "Max", "Min", "Product", "Sum", "allgather",
    "allgather_async", "allreduce", "allreduce_", "allreduce_async", "allreduce_async_", "alltoall",
    "alltoall_async", "barrier", "broadcast", "broadcast_", "broadcast_async", "broadcast_async_",
    "ccl_built", "cross_rank", "cross_size", "cuda_built", "ddl_built", "gloo_built",
    "gloo_enabled", "global_process_set", "grouped_allreduce", "grouped_allreduce_",
    "grouped_allreduce_async", "grouped_allreduce_async_", "init", "is_homogeneous",
    "is_initialized", "join", "local_rank", "local_size", "mpi_built", "mpi_enabled",
    "mpi_threads_supported", "nccl_built", "poll", "rank", "reducescatter", "rocm_built",
    "shutdown", "size", "synchronize", "DistributedOptimizer", "SyncBatchNorm"
]
