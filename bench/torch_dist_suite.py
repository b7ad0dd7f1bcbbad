"""PyTorch's own distributed test class (DistributedTest._DistTestBase, from the installed torch
wheel) on one backend, as torch's test/distributed/test_distributed_spawn.py drives it, with the
backend "ddl" known to the suite as a CPU backend with DDP.

How it works: the suite decides what runs from its module-level tables and name checks
(DistTestCases.backend_feature, require_backend_is_available({...}), `BACKEND != "gloo"`): they
know gloo, nccl, ucc and mpi only. This driver reads torch's distributed_test.py, rewrites its
gloo name checks to accept "ddl" as well (so every test that runs on gloo runs on ddl), compiles
the rewritten text under the module's own name and file (tracebacks point into torch's file,
which stays untouched), and adds "ddl" to the "ddp", "subgroup" and "plugin" features. Then it
builds TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase) as
test_distributed_spawn.py does: each test starts WORLD_SIZE new processes (forked from a server
that imported this file once, or spawned as torch's driver does: _start_ranks), which join a
group on $BACKEND through INIT_METHOD=file://$TEMP_DIR/... Results go to a JSON file, one entry
per test: passed, failed (with the first line of the error), or skipped (with the reason).

    BACKEND=ddl WORLD_SIZE=2 python bench/torch_dist_suite.py --out ddl.json [-k pattern]
    bench/torch_dist_suite.sh   # both backends, 2 and 3 ranks, and the comparison
"""

import argparse
import importlib.util
import json
import os
import re
import sys
import tempfile
import time
import unittest

_SUITE = "torch.testing._internal.distributed.distributed_test"

# The suite's gloo-only name checks, and what they become: gloo or ddl.
_REWRITES = [
    (re.compile(r'BACKEND != "gloo"'), 'BACKEND not in ("gloo", "ddl")'),
    (re.compile(r'BACKEND == "gloo"'), 'BACKEND in ("gloo", "ddl")'),
    (re.compile(r'require_backend_is_available\(\{"gloo"\}\)'),
     'require_backend_is_available({"gloo", "ddl"})'),
    (re.compile(r'require_backend_is_available\(DistTestCases\.backend_feature\["gpu"\]\)'),
     'require_backend_is_available(DistTestCases.backend_feature["gpu"] | {"ddl"})'),
]


def _environment():
    """The variables run_test.py sets for test_distributed_spawn.py: TEMP_DIR (shared by the
    parent and its spawned ranks, made once by the parent) and INIT_METHOD."""
    if "TEMP_DIR" not in os.environ:
        os.environ["TEMP_DIR"] = tempfile.mkdtemp(prefix="torch_dist_suite.")
        os.makedirs(os.path.join(os.environ["TEMP_DIR"], "barrier"), exist_ok=True)
    os.environ.setdefault("INIT_METHOD", "file://" + os.path.join(os.environ["TEMP_DIR"], "init"))


def _load_suite():
    """torch's distributed_test module, its gloo name checks rewritten to take ddl as well (the
    one already loaded, in a rank forked from the server that preloaded it)."""
    import ddl.torch  # noqa: F401  (registers the backend "ddl")
    from torch.testing._internal.common_distributed import DistTestCases

    for feature in ("ddp", "subgroup", "plugin"):
        DistTestCases.backend_feature[feature].add("ddl")
    if getattr(sys.modules.get(_SUITE), "ddl_rewritten", False):
        return sys.modules[_SUITE]
    spec = importlib.util.find_spec(_SUITE)
    with open(spec.origin, encoding="utf-8") as f:
        text = f.read()
    for pattern, replacement in _REWRITES:
        text = pattern.sub(replacement, text)
    module = importlib.util.module_from_spec(spec)
    sys.modules[_SUITE] = module
    exec(compile(text, spec.origin, "exec"), module.__dict__)
    module.ddl_rewritten = True
    return module


if "--compare" not in sys.argv:  # the parent's run, its ranks and their fork server
    _environment()
    _suite = _load_suite()
    if __name__ not in ("__main__", "__mp_main__"):  # the fork server's preload
        import gc

        gc.freeze()  # the forked ranks' collections leave the imported objects (and pages) alone

    class TestDistBackendWithSpawn(_suite.TestDistBackend, _suite.DistributedTest._DistTestBase):
        """test_distributed_spawn.py's class: each test in WORLD_SIZE new processes, started
        as $TORCH_DIST_SUITE_START says (_start_ranks)."""

        def setUp(self):
            super().setUp()
            _start_ranks(self)

        @classmethod
        def _run(cls, rank, test_name, file_name, pipe, environ=None, **kwargs):
            if environ is not None:  # a forked rank: the parent's environment of this test
                os.environ.clear()
                os.environ.update(environ)
                _suite.INIT_METHOD = os.getenv("INIT_METHOD", "env://")
            super()._run(rank, test_name, file_name, pipe, **kwargs)


def _start_ranks(test):
    """Starts `test`'s WORLD_SIZE ranks. "spawn" (torch's own way): each rank a new interpreter
    that imports torch, ddl and the suite again (seconds of CPU each, per test). "forkserver"
    (the default): one server process imports this file as a module (so torch, ddl and the
    rewritten suite) once, and each rank of each test is a fresh fork of it, given the parent's
    environment of the moment (a spawned rank reads it at its start: TEMP_DIR and INIT_METHOD
    change per test); nothing of an earlier test is in it, as the server never runs one. (The
    server imports this file by its module name, its folder put on PYTHONPATH: Python 3.11
    gives the server neither the main script's path nor sys.path, so a preload of "__main__"
    would preload nothing.)"""
    import torch.multiprocessing as mp

    method = os.environ.get("TORCH_DIST_SUITE_START", "forkserver")
    if method == "spawn":
        test._spawn_processes()
        return
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if here not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([here] + paths)
    context = mp.get_context("forkserver")
    context.set_forkserver_preload([os.path.splitext(os.path.basename(__file__))[0]])
    environ = dict(os.environ)
    test.processes = []
    for rank in range(int(test.world_size)):
        parent_conn, child_conn = mp.Pipe()
        process = context.Process(
            target=type(test)._run, name=f"process {rank}",
            args=(rank, test._current_test_name(), test.file_name, child_conn),
            kwargs={"fake_pg": getattr(test, "fake_pg", False), "environ": environ})
        process.start()
        test.pid_to_pipe[process.pid] = parent_conn
        test.processes.append(process)


class _Recorder(unittest.TextTestResult):
    """A TextTestResult that also keeps each test's outcome and seconds."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}
        self._started = 0.0

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome, detail=""):
        lines = [ln.strip() for ln in detail.strip().splitlines() if ln.strip()]
        errors = [ln for ln in lines if re.search(r"(Error|Exception|Skip\w*):", ln)]
        line = (errors or lines or [""])[-1]
        self.outcomes[test.id().rsplit(".", 1)[-1]] = {
            "outcome": outcome, "detail": line[:300],
            "seconds": round(time.monotonic() - self._started, 2)}

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "passed")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")


def compare(paths):
    """Prints each run's counts (passed, failed, skipped) and the tests whose outcome differs
    between the first run (gloo) and each other, with the other's detail."""
    runs = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            runs.append(json.load(f))
    for run in runs:
        counts = {k: 0 for k in ("passed", "failed", "skipped")}
        for outcome in run["tests"].values():
            counts[outcome["outcome"]] += 1
        print(f"{run['backend']:5} {run['world_size']} ranks: {len(run['tests'])} tests, "
              f"passed {counts['passed']}, failed {counts['failed']}, "
              f"skipped {counts['skipped']}")
    base = runs[0]
    for run in runs[1:]:
        for name in sorted(set(base["tests"]) | set(run["tests"])):
            a = base["tests"].get(name, {"outcome": "absent"})
            b = run["tests"].get(name, {"outcome": "absent"})
            if a["outcome"] != b["outcome"]:
                print(f"  {name}: {base['backend']} {a['outcome']}, {run['backend']} "
                      f"{b['outcome']}: {b.get('detail', '')}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="JSON file of the outcomes")
    parser.add_argument("--compare", nargs="+", metavar="JSON",
                        help="print the counts of these runs and what differs from the first")
    parser.add_argument("-k", action="append", default=[],
                        help="run only tests whose name contains this (repeatable)")
    args = parser.parse_args()
    if args.compare:
        return compare(args.compare)
    loader = unittest.TestLoader()
    if args.k:
        loader.testNamePatterns = [f"*{k}*" for k in args.k]
    tests = loader.loadTestsFromTestCase(TestDistBackendWithSpawn)
    runner = unittest.TextTestRunner(resultclass=_Recorder, verbosity=2, stream=sys.stderr)
    result = runner.run(tests)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"backend": os.environ["BACKEND"], "world_size": int(os.environ["WORLD_SIZE"]),
                   "debug": os.environ.get("TORCH_DISTRIBUTED_DEBUG", "OFF"),
                   "tests": result.outcomes}, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
