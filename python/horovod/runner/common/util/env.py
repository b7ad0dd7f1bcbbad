"""A rank's place in the job read from the variables its launcher set, as Horovod's suites read
it before hvd.init(): Horovod's own HOROVOD_RANK/HOROVOD_SIZE (ddlrun's ranks carry them when
started for Horovod, bench/horovod_suite.sh), else the launchers' variables libddl itself reads
(ddl._ddl.rank_variables: comm/bootstrap/rank_variables.h, the one table of them)."""

import os

from ddl import _ddl


def _launchers():
    """(rank variable, size variable) of each launcher, in the order they are looked for."""
    return [("HOROVOD_RANK", "HOROVOD_SIZE")] + [tuple(p) for p in _ddl.rank_variables()]


def get_env_rank_and_size():
    """(rank, size) from the first launcher whose two variables are set; None when none is.
    RuntimeError when only one of a launcher's two is set."""
    for rank_var, size_var in _launchers():
        rank, size = os.environ.get(rank_var), os.environ.get(size_var)
        if rank is not None and size is not None:
            return int(rank), int(size)
        if rank is not None or size is not None:
            raise RuntimeError(f"{rank_var} is {rank!r} but {size_var} is {size!r}: the "
                               "launcher sets both or neither")
    return None
