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
the package ddl's zero-copy collectives over libddl, on CPU tensors. The ranks' calls are
matched by name (not order) and checked before they run: where they differ, every rank
raises ddl.MismatchError and the job goes on. Process sets (add_process_set) are libddl
groups; join() lets ranks with less data stand in with zeros. Not provided: Adasum, elastic
training.
"""

from .autograd import (allgather, allreduce, alltoall, broadcast, grouped_allgather,
                       grouped_allreduce, grouped_reducescatter, reducescatter)
from .compression import Compression
from .functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                        broadcast_parameters)
from .mpi_ops import *  # noqa: F403 (the job's shape, ops, process sets: mpi_ops.__all__)
from .mpi_ops import __all__ as _mpi_ops_all
from .mpi_ops import (allgather_async, allreduce_, allreduce_async, allreduce_async_,
                      alltoall_async, barrier, broadcast_, broadcast_async, broadcast_async_,
                      grouped_allgather_async, grouped_allreduce_, grouped_allreduce_async,
                      grouped_allreduce_async_, grouped_reducescatter_async, init, join, poll,
                      reducescatter_async, shutdown, sparse_allreduce_async, synchronize)
from .optimizer import DistributedOptimizer
from .sync_batch_norm import SyncBatchNorm
from .timeline import start_timeline, stop_timeline

__all__ = [
    "allgather", "allreduce", "alltoall", "broadcast", "grouped_allgather", "grouped_allreduce",
    "grouped_reducescatter", "reducescatter", "Compression", "allgather_object",
    "broadcast_object", "broadcast_optimizer_state", "broadcast_parameters", "allgather_async",
    "allreduce_", "allreduce_async", "allreduce_async_", "alltoall_async", "barrier",
    "broadcast_", "broadcast_async", "broadcast_async_", "grouped_allgather_async",
    "grouped_allreduce_", "grouped_allreduce_async", "grouped_allreduce_async_",
    "grouped_reducescatter_async", "init", "join", "poll", "reducescatter_async", "shutdown",
    "sparse_allreduce_async", "synchronize", "DistributedOptimizer", "SyncBatchNorm",
    "start_timeline", "stop_timeline",
] + _mpi_ops_all
