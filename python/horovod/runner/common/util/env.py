"""A rank's place in the job read from the variables its launcher set, as Horovod's suites read
it before hvd.init(): ddlrun's ranks carry HOROVOD_RANK/HOROVOD_SIZE when started for Horovod
(bench/horovod_suite.sh), and Open MPI's or a PMI launcher's otherwise."""

import os

# (rank variable, size variable) of each launcher, in the order they are looked for.
_LAUNCHERS = (("HOROVOD_RANK", "HOROVOD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
              ("PMI_RANK", "PMI_SIZE"))


def get_env_rank_and_size():
    """(rank, size) from the first launcher whose two variables are set; None when none is.
    RuntimeError when only one of a launcher's two is set."""
    for rank_var, size_var in _LAUNCHERS:
        rank, size = os.environ.get(rank_var), os.environ.get(size_var)
        if rank is not None and size is not None:
            return int(rank), int(size)
        if rank is not None or size is not None:
            raise RuntimeError(f"{rank_var} is {rank!r} but {size_var} is {size!r}: the "
                               "launcher sets both or neither")
    return None
