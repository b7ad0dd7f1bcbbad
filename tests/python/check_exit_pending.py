"""A rank that ends while a collective it queued is still running ends cleanly: the
interpreter waits for ddl's worker at exit (without that, libddl was torn down under the running
allreduce and the rank died of std::terminate, SIGABRT).

How it works: run as an N-rank job; each rank queues a 64 MiB allreduce (hvd.allreduce_async),
prints "rank R of N ok" and returns at once, never calling synchronize(). run_job.sh checks that
the job exits 0.
"""

import torch

import horovod.torch as hvd

hvd.init()
handle = hvd.allreduce_async(torch.ones(16 << 20), op=hvd.Sum)
print(f"rank {hvd.rank()} of {hvd.size()} ok", flush=True)
