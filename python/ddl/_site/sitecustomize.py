"""ddlrun's sitecustomize: registers the torch.distributed backend "ddl" in the ranks of a job.

How it works: ddlrun puts this directory (ddl/_site of its package) first on every rank's
PYTHONPATH (and the directory holding ddl after it, unless that is a whole site-packages: then
a finder here serves ddl alone from it, first), so Python's `site` imports this module at start-up instead of the system's
sitecustomize, which it then runs (Debian's installs apport's hook), so nothing is lost. In a
rank of a ddlrun job (DDL_RANK and DDL_SIZE set), or of torchrun (TORCHELASTIC_RUN_ID set, this
directory on its PYTHONPATH), it adds a finder to sys.meta_path that watches for one import,
torch.distributed: when that module has run, the backend "ddl" is registered, so `init_process_group("ddl")` works in scripts that never import ddl (IBM's). Its creator
imports ddl.torch only when a group is made. In a ddlrun rank, init_process_group("ddl") has
libddl's ranks meet first (_meet_first), so that a rank that never calls it is named. Outside a job this module runs the system's
sitecustomize and does nothing else; it never imports torch or ddl itself.
"""

import os
import sys


def _run_next_sitecustomize():
    """Runs the sitecustomize this one shadows (the next one on sys.path), if any."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.realpath(__file__))
    rest = [p for p in sys.path if os.path.realpath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # as site.py does for a failing sitecustomize
        print(f"Error in sitecustomize ({spec.origin}); set PYTHONVERBOSE for traceback:\n"
              f"{type(e).__name__}: {e}", file=sys.stderr)


def _create_process_group(options, pg_options):
    """The backend's creator (torch's extended API): ddl.torch's, imported now."""
    from ddl.torch import _create_process_group as create

    return create(options, pg_options)


def _register(dist):
    """Registers the backend "ddl" with torch.distributed (`dist`), once."""
    try:
        if dist.is_available() and not hasattr(dist.Backend, "DDL"):
            register_backend(dist, _create_process_group)
    except Exception as e:  # an unknown torch: say so, never break the import
        print(f"ddl: the torch.distributed backend ddl was not registered: "
              f"{type(e).__name__}: {e}", file=sys.stderr)
    if _in_ddlrun_job() and hasattr(dist, "init_process_group"):
        _meet_first(dist)


def register_backend(dist, creator):
    """Registers `creator` as the backend "ddl" of torch.distributed (`dist`): for CPU and CUDA
    tensors on torch 2.x (whose register_backend takes the devices), as the process group on 1.x
    (ddl.torch uses it too)."""
    import inspect

    register = dist.Backend.register_backend
    if "devices" in inspect.signature(register).parameters:  # torch 2.x
        register("ddl", creator, extended_api=True, devices=["cpu", "cuda"])
    else:
        register("ddl", creator, extended_api=True)


def _in_ddlrun_job():
    """A rank ddlrun started (not torchrun's worker, whose ranks meet through torch's store)."""
    return _in_job() and not os.environ.get("TORCHELASTIC_RUN_ID")


def _meet_first(dist):
    """Wraps init_process_group (in torch.distributed and distributed_c10d) so that, for the
    backend "ddl", libddl's ranks meet before torch's store waits for them: a rank that never
    calls init is then named with its host by libddl's rendezvous ("rank 1 (node2) has not
    joined the rendezvous in time"), not counted by the store ("1/2 clients joined"). Other
    backends go straight to torch's."""
    import functools

    original = dist.init_process_group
    if getattr(original, "_ddl_meets_first", False):
        return

    @functools.wraps(original)
    def init_process_group(backend=None, *args, **kwargs):
        if str(backend).lower() == "ddl":
            timeout = kwargs.get("timeout", args[1] if len(args) > 1 else None)
            from ddl.torch import meet_before_store

            meet_before_store(timeout)
        return original(backend, *args, **kwargs)

    init_process_group._ddl_meets_first = True
    dist.init_process_group = init_process_group
    c10d = getattr(dist, "distributed_c10d", None)
    if c10d is not None and c10d.init_process_group is original:
        c10d.init_process_group = init_process_group


class _Loader:
    """torch.distributed's own loader, and _register once the module has run."""

    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        _register(module)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _TorchDistributedFinder:
    """Finds torch.distributed through the other finders and gives it a _Loader."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch.distributed":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


def _in_job():
    """A rank of a ddlrun job, or a worker torchrun started (TORCHELASTIC_RUN_ID)."""
    if os.environ.get("TORCHELASTIC_RUN_ID"):
        return True
    return bool(os.environ.get("DDL_RANK")) and bool(os.environ.get("DDL_SIZE"))


def _add_horovod():
    """Makes libddl's horovod (ddl/_horovod beside this directory) importable: last on
    sys.path, so that an installed Horovod wins, or first under ddlrun --horovod ddl
    (DDL_HOROVOD=ddl)."""
    here = os.path.dirname(os.path.realpath(__file__))
    horovod = os.path.join(os.path.dirname(here), "_horovod")
    if not os.path.isdir(horovod) or horovod in sys.path:
        return
    if os.environ.get("DDL_HOROVOD") == "ddl":
        sys.path.insert(0, horovod)
    else:
        sys.path.append(horovod)


class _DdlOnlyFinder:
    """Finds the package ddl, and nothing else, in `directory`: the site-packages of the
    environment whose ddlrun started the job, which ddlrun does not put on PYTHONPATH (another
    interpreter, Debian's /usr/bin/python3, would import that environment's torch and numpy
    instead of its own)."""

    def __init__(self, directory):
        self._directory = directory

    def find_spec(self, name, path=None, target=None):
        del path, target
        if name != "ddl":
            return None
        import importlib.machinery

        return importlib.machinery.PathFinder.find_spec(name, [self._directory])


def _add_ddl():
    """The package ddl this directory belongs to, first, when its directory is not on
    sys.path: that of a pip-installed ddlrun is a whole site-packages, of which the ranks get
    ddl alone (see _DdlOnlyFinder)."""
    here = os.path.dirname(os.path.realpath(__file__))
    directory = os.path.dirname(os.path.dirname(here))
    if directory not in {os.path.realpath(p or ".") for p in sys.path}:
        sys.meta_path.insert(0, _DdlOnlyFinder(directory))


def install():
    """Registers the backend now if torch.distributed is imported, else once it is (the
    entry point of an installed ddl calls this too: ddl/_autoload.py)."""
    if "torch.distributed" in sys.modules:
        _register(sys.modules["torch.distributed"])
    elif not any(isinstance(f, _TorchDistributedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchDistributedFinder())


if __name__ == "sitecustomize":  # imported by site at start-up, not by ddl/_autoload.py
    _run_next_sitecustomize()
    if _in_job():
        _add_ddl()
        _add_horovod()
        install()
