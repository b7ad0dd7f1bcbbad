"""init_process_group("ddl") in a Python whose torch is not the one ddl._torch_pg was built
against (Debian's 1.13 build run by a torch 2.x venv, or the other way round): one clear error
naming both versions and what to do, never the crash that loading the extension would be.

    PYTHON check_torch_mismatch.py PYDIR     (a single process; 77 when the torches match)
"""

import os
import sys
import tempfile

sys.path.insert(0, sys.argv[1])

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from ddl import _torch_build  # noqa: E402

built, this = _torch_build.TORCH_VERSION, torch.__version__.split("+")[0]
if not built or built.split(".")[:2] == this.split(".")[:2]:
    print(f"check_torch_mismatch: built against torch {built or 'the system'}'s, this is {this}: "
          "skipped")
    sys.exit(77)

import ddl.torch  # noqa: E402,F401  (registers the backend)

want = (f"ddl backend: the extension ddl._torch_pg was built against torch {built}, but this "
        f"Python ({sys.executable}) has torch {this}: run the job with the Python the package was "
        f"built for, or build it for this one (cmake -DPython3_EXECUTABLE={sys.executable}, or "
        "pip install . in its environment)")
with tempfile.TemporaryDirectory() as tmp:
    try:
        dist.init_process_group("ddl", init_method=f"file://{os.path.join(tmp, 'store')}",
                                rank=0, world_size=1)
    except RuntimeError as e:
        if str(e) != want:
            sys.exit(f"check_torch_mismatch: error {str(e)!r}, want {want!r}")
        print("check_torch_mismatch: ok")
        sys.exit(0)
sys.exit("check_torch_mismatch: init_process_group('ddl') did not fail")
