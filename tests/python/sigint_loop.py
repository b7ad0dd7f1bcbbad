"""A collective loop that runs until interrupted, for check_sigint.sh.

How it works: joins the job (through `import ddl` on numpy arrays, on ddl's worker thread, or
the torch.distributed backend "ddl" on tensors, as the argument says: numpy, worker or torch),
prints "rank R started", then allreduces in a loop for ever. Ctrl-C (SIGINT from ddlrun) must end it with at most one line.
"""

import sys


def main():
    if sys.argv[1] == "torch":
        try:
            import torch
            import torch.distributed as dist
        except ImportError:
            print("sigint_loop: torch cannot be imported: skipped")
            sys.exit(77)
        import ddl.torch  # noqa: F401  (registers the backend "ddl")

        dist.init_process_group("ddl")
        t = torch.ones(1000)
        print(f"rank {dist.get_rank()} started", flush=True)
        while True:
            dist.all_reduce(t)
            t.fill_(1)
    import numpy

    import ddl

    x = numpy.ones(1000, dtype=numpy.float32)
    print(f"rank {ddl.rank()} started", flush=True)
    if sys.argv[1] == "worker":  # on ddl's worker thread, as DistributedOptimizer's calls run
        from ddl import _worker

        while True:
            _worker.submit(lambda: ddl.allreduce(x)).wait()
    while True:
        ddl.allreduce(x)
        x[:] = 1


main()
