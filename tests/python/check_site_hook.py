"""ddl/_site/sitecustomize.py, the hook ddlrun puts first on its ranks' PYTHONPATH: it registers
the torch.distributed backend "ddl" when torch.distributed is imported in a rank of a job (and
imports nothing of ours until a group is made), does nothing outside jobs, and runs the
sitecustomize it shadows; when ddl lies in a site-packages that is not on sys.path, it serves
ddl alone from there.

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


SITE_PROBE = """
import numpy, os
print("numpy of the environment", getattr(numpy, "FROM_THE_ENVIRONMENT", False))
import ddl
print("ddl", os.path.realpath(os.path.dirname(ddl.__file__)))
"""


def run_from_site_packages(pydir):
    """A pip-installed ddlrun's package lies in its environment's site-packages, which ddlrun
    leaves off the ranks' PYTHONPATH (only ddl/_site goes there): the hook serves ddl from it,
    and nothing else of that environment (here a numpy of its own) shadows the interpreter's."""
    with tempfile.TemporaryDirectory() as env_dir:
        site = os.path.join(env_dir, "lib", "python3.11", "site-packages")
        os.makedirs(os.path.join(site, "numpy"))
        with open(os.path.join(site, "numpy", "__init__.py"), "w") as f:
            f.write("FROM_THE_ENVIRONMENT = True\n")
        os.symlink(os.path.join(pydir, "ddl"), os.path.join(site, "ddl"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("DDL_")}
        env.update(PYTHONPATH=f"{site}/ddl/_site", DDL_RANK="0", DDL_SIZE="1")
        done = subprocess.run([sys.executable, "-c", SITE_PROBE], env=env, capture_output=True,
                              text=True, timeout=120)
    if done.returncode != 0:
        sys.exit(f"the probe failed with ddl in a site-packages:\n{done.stderr}")
    expected = ["numpy of the environment False", "ddl " + os.path.realpath(pydir + "/ddl")]
    if done.stdout.splitlines() != expected:
        sys.exit(f"with ddl in a site-packages: {done.stdout.splitlines()}, expected {expected}")


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
    run_from_site_packages(pydir)
    print("check_site_hook: ok")


main()
