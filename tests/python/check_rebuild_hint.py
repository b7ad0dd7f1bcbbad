"""The error of a torch backend whose extension ddl._torch_pg was not built names the step that
builds it where the package came from: pip's reinstall from the source pip installed it from
(a pip user has no scripts/setup), the build tree's steps otherwise.

How it works: runs a child of this interpreter with ddl (argument 1's package) in a directory
that holds, the second time, a dist-info of ddlrun listing ddl/__init__.py and a
direct_url.json, as pip writes them, and prints the text ddl._binaries gives for a missing
extension. Exits 0 when both texts are the expected ones; 77 when the interpreter has no torch.
    check_rebuild_hint.py BUILD_PYTHON_DIR
"""

import json
import os
import subprocess
import sys
import tempfile

PROBE = """
import torch
import ddl._binaries as b
print(b.not_built_text(torch.__version__, ImportError("No module named 'ddl._torch_pg'")))
"""


def text(site):
    env = dict(os.environ, PYTHONPATH=site)
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                          timeout=120)
    if done.returncode != 0:
        sys.exit(f"the probe failed:\n{done.stderr}")
    return done.stdout.strip()


def main():
    try:
        import torch
    except ImportError:
        print("check_rebuild_hint: no torch: skipped")
        sys.exit(77)
    pydir = os.path.abspath(sys.argv[1])
    start = ("ddl backend: the extension ddl._torch_pg was not built for this torch "
             f"({torch.__version__}; it needs torch, and its C++ headers, when ddlrun is built): ")
    end = ": No module named 'ddl._torch_pg'"
    with tempfile.TemporaryDirectory() as site:
        os.symlink(os.path.join(pydir, "ddl"), os.path.join(site, "ddl"))
        expected = start + "run scripts/setup, then rebuild" + end
        if text(site) != expected:
            sys.exit(f"from a build tree: {text(site)!r}, expected {expected!r}")
        info = os.path.join(site, "ddlrun-0.9.0.dist-info")
        os.mkdir(info)
        with open(os.path.join(info, "METADATA"), "w") as f:
            f.write("Metadata-Version: 2.1\nName: ddlrun\nVersion: 0.9.0\n")
        with open(os.path.join(info, "RECORD"), "w") as f:
            f.write("ddl/__init__.py,,\n")
        with open(os.path.join(info, "direct_url.json"), "w") as f:
            json.dump({"url": "file:///src/ddlrun", "dir_info": {}}, f)
        expected = (start + "pip built this ddlrun without torch: reinstall it in this "
                    f"environment, now that torch is here: {sys.executable} -m pip install "
                    "--force-reinstall --no-deps /src/ddlrun" + end)
        if text(site) != expected:
            sys.exit(f"from pip: {text(site)!r}, expected {expected!r}")
    print("check_rebuild_hint: ok")


main()
