"""ddl/_site/sitecustomize.py, the hook ddlrun puts first on its ranks' PYTHONPATH: it registers
the torch.distributed backend "ddl" when torch.distributed is imported in a rank of a job (and
imports nothing of ours until a group is made), does nothing outside jobs, and runs the
sitecustomize it shadows.

How it works: each case runs a child of this interpreter with PYTHONPATH = the hook directory,
the package directory (argument 1) and a directory holding another sitecustomize.py, with or
without the rank variables, and checks what it prints. Exits 0 when every case holds; 77 when
the interpreter has no torch.
    check_site_hook.py BUILD_PYTHON_DIR
"""

import os
import subprocess
import sys
import tempfile

PROBE = """
import builtins, sys
import torch.distributed as dist
print("other", getattr(builtins, "other_sitecustomize_ran", False))
print("registered", hasattr(dist.Backend, "DDL"))
print("ddl imported", "ddl" in sys.modules)
"""


def run(pydir, other, job):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDL_")}
    env["PYTHONPATH"] = f"{pydir}/ddl/_site:{pydir}:{other}"
    if job:
        env.update(DDL_RANK="0", DDL_SIZE="1")
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                          timeout=120)
    if done.returncode != 0:
        sys.exit(f"the probe failed ({'in' if job else 'outside'} a job):\n{done.stderr}")
    return done.stdout.splitlines()


def main():
    try:
        import torch.distributed  # noqa: F401
    except ImportError:
        print("check_site_hook: no torch: skipped")
        sys.exit(77)
    pydir = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as other:
        with open(os.path.join(other, "sitecustomize.py"), "w") as f:
            f.write("import builtins\nbuiltins.other_sitecustomize_ran = True\n")
        outside = run(pydir, other, job=False)
        inside = run(pydir, other, job=True)
    expected_outside = ["other True", "registered False", "ddl imported False"]
    expected_inside = ["other True", "registered True", "ddl imported False"]
    if outside != expected_outside:
        sys.exit(f"outside a job: {outside}, expected {expected_outside}")
    if inside != expected_inside:
        sys.exit(f"in a job: {inside}, expected {expected_inside}")
    print("check_site_hook: ok")


main()
