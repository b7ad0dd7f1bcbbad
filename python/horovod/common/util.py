"""horovod.common.util: the helpers of Horovod's horovod.common.util that programs and test
suites import: version comparison, list splitting, environment variables set for a block, and
what was built (on libddl: no MPI, Gloo, NCCL, CUDA or ROCm; ddl)."""

import contextlib
import os
import re

from .basics import (ccl_built, cuda_built, ddl_built, gloo_built, mpi_built, nccl_built,
                     rocm_built)

__all__ = ["is_version_greater_equal_than", "split_list", "env", "ccl_built", "cuda_built",
           "ddl_built", "gloo_built", "mpi_built", "nccl_built", "rocm_built"]


def _numbers(version):
    """The leading dotted numbers of a version string, e.g. "2.13.0+cpu" -> [2, 13, 0]."""
    match = re.match(r"\s*(\d+(?:\.\d+)*)", str(version))
    if match is None:
        raise ValueError(f"version {version!r} does not start with numbers such as 2.13.0")
    return [int(p) for p in match.group(1).split(".")]


def is_version_greater_equal_than(ver, target):
    """True when version string `ver` is at least `target` (both like "2.13.0")."""
    a, b = _numbers(ver), _numbers(target)
    width = max(len(a), len(b))
    return a + [0] * (width - len(a)) >= b + [0] * (width - len(b))


def split_list(items, parts):
    """items cut into `parts` consecutive lists whose lengths differ by at most one."""
    if parts < 1:
        raise ValueError(f"split_list: parts must be at least 1, not {parts}")
    step, extra = divmod(len(items), parts)
    return [items[i * step + min(i, extra):(i + 1) * step + min(i + 1, extra)]
            for i in range(parts)]


@contextlib.contextmanager
def env(**variables):
    """Sets the environment variables `variables` (names to string values) for the block, then
    gives each back its value from before (or unsets it), whatever the block raised."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update({name: str(value) for name, value in variables.items()})
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
