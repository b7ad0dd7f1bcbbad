"""Runs inside the bare root of bare_root_test.sh, as user nobody: a fresh venv, `pip install`
of the wheel in /tmp with torch 2.13 and tensorflow-cpu from /wheelhouse (read-only, no index),
then 2-rank jobs through the venv's ddlrun, each checked by its output. Prints "bare_jobs: ok".

    /usr/bin/python3 /tmp/bare_jobs.py TF_VERSION     (X.Y: the wheel's TensorFlow ops are for it)
"""

import glob
import os
import subprocess
import sys
import time

VENV = "/home/user/venv"
ENV = {"HOME": "/home/user", "PATH": f"{VENV}/bin:/usr/bin", "PIP_NO_CACHE_DIR": "1",
       "TF_CPP_MIN_LOG_LEVEL": "3"}


def fail(message):
    sys.exit(f"bare_jobs: {message}")


def run(what, *args):
    """Runs args, prints and returns its output; fails naming `what` when it fails."""
    start = time.monotonic()
    print(f"== {what}", flush=True)
    p = subprocess.run(args, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(p.stdout, end="", flush=True)
    print(f"-- {time.monotonic() - start:.0f} s", flush=True)
    if p.returncode != 0:
        fail(f"{what}: exit status {p.returncode}")
    return p.stdout.splitlines()


def expect(lines, *wanted):
    for w in wanted:
        if w not in lines:
            fail(f"expected the line {w!r}")


def install(tf):
    """The venv, and the wheel into it with pip from Debian's pip wheel: nothing built."""
    for tool in ("cc", "gcc", "g++", "c++", "sh", "cmake"):
        if any(os.path.exists(os.path.join(d, tool)) for d in ("/usr/bin", "/bin")):
            fail(f"the bare root has {tool}")
    if os.getuid() == 0:
        fail("running as root")
    run("python3 -m venv", "/usr/bin/python3", "-m", "venv", "--without-pip", VENV)
    wheel = glob.glob("/tmp/ddlrun-*.whl")[0]
    pip = glob.glob("/tmp/pip-*.whl")[0] + "/pip"
    run("pip install " + os.path.basename(wheel), f"{VENV}/bin/python", pip, "install", "-q",
        "--no-compile", "--no-index", "--find-links", "/wheelhouse", "--only-binary", ":all:",
        wheel, "torch==2.13.0", f"tensorflow-cpu=={tf}.*")


NUMPY_JOB = """import numpy, ddl
x = numpy.full(3, ddl.rank() + 1.0); ddl.allreduce(x)
maps = open("/proc/self/maps").read().split()
pmix = sorted({os.path.dirname(p) for p in maps if "/pmix" in p and p.endswith(".so")})
print(f"rank {ddl.rank()} of {ddl.size()}: {x.tolist()} pmix from {pmix}")"""

TORCH_JOB = """import torch, torch.distributed as dist
dist.init_process_group("ddl")
t = torch.full((4,), float(dist.get_rank() + 1)); dist.all_reduce(t)
print(f"rank {dist.get_rank()} torch {torch.__version__}: {t.tolist()}")
dist.destroy_process_group()"""

TF_JOB = """import tensorflow as tf, ddl, ddl.tensorflow as dt
x = dt.allreduce(tf.fill([4], float(ddl.rank() + 1)), op="sum")
v = ".".join(tf.__version__.split(".")[:2])
print(f"rank {ddl.rank()} tf {v}: {x.numpy().tolist()}")"""

OTHER_VERSIONS = """import sys
import time
from ddl import _binaries
for what, call in (("torch", lambda: _binaries.torch_backend("2.99.0")),
                   ("tf", lambda: _binaries.tf_ops_path("2.99.0"))):
    try:
        call()
    except (ImportError, RuntimeError) as e:
        print(f"{what}: {type(e).__name__}: {e}")"""


def jobs(tf):
    site = f"{VENV}/lib/python3.11/site-packages"
    ddlrun = [f"{VENV}/bin/ddlrun", "-H", "localhost:2", "--tag-output", "none", "python", "-c"]
    out = run("numpy job", *ddlrun, "import os\n" + NUMPY_JOB)
    expect(out, *(f"rank {r} of 2: [3.0, 3.0, 3.0] pmix from ['{site}/ddl/lib/pmix']"
                  for r in (0, 1)))
    out = run("torch job", *ddlrun, TORCH_JOB)
    expect(out, *(f"rank {r} torch 2.13.0+cpu: [3.0, 3.0, 3.0, 3.0]" for r in (0, 1)))
    out = run("TensorFlow job", *ddlrun, TF_JOB)
    expect(out, *(f"rank {r} tf {tf}: [3.0, 3.0, 3.0, 3.0]" for r in (0, 1)))
    out = run("versions the wheel was not built for", "python", "-c", OTHER_VERSIONS)
    python = f"{VENV}/bin/python"
    torches = sorted((n[len("torch-"):] for n in os.listdir(f"{site}/ddl/_variants")
                      if n.startswith("torch-")), key=lambda v: [int(p) for p in v.split(".")])
    todo = ("or install ddlrun from its source into this environment (`pip install .` in a "
            "checkout of ddlrun, with the compiler and -dev packages its scripts/setup installs)")
    expect(out, f"torch: RuntimeError: ddl: this ddlrun wheel was built for torch "
           f"{', '.join(torches)}, not for torch 2.99.0 of {python}: install one of those (pip "
           f"install 'torch==2.13.*'), {todo}",
           f"tf: ImportError: ddl: this ddlrun wheel was built for TensorFlow {tf}, not for "
           f"TensorFlow 2.99.0 of {python}: install one of those (pip install "
           f"'tensorflow-cpu=={tf}.*'), {todo}")


if __name__ == "__main__":
    install(sys.argv[1])
    jobs(sys.argv[1])
    print("bare_jobs: ok")
