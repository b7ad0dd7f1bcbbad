"""Builds the torch backend `ddl` (ddl._torch_pg) on the machine that runs it, against the torch
installed there, with torch's own cpp_extension: for a GPU machine whose torch differs from the
one this build saw (bench/gpu_check.sh runs it on the lent device, whose PyTorch 2.11 headers
are several GB of wheel away from here).

    python3 bench/gpu_build_torch_pg.py BUNDLE

BUNDLE is scripts/gpu_bundle's folder: lib/libddl.so, include/ (ddl_config.h, and Python's
headers when this Python has none), torch_pg.txt (the extension's sources and -D flags, read
off the build's compile commands), python/ddl/ (where the module goes). The sources are read
from this checkout. Prints the module's path; exits 1 with the compiler's last lines otherwise.

How it works: torch.utils.cpp_extension.load() compiles the sources with ninja into a private
folder, with the checkout, comm/include and python/ on the include path, links libddl from the
bundle (rpath: the bundle's lib/, absolute: the module is built where it runs), loads the
result once;
the module is then copied next to the package's other extension, and ddl/_torch_build.py is
rewritten to name this torch (the bundle's names the build machine's, which ddl.torch's version
check would refuse).
"""
import glob
import os
import shutil
import sys
import sysconfig
import tempfile


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    bundle = os.path.abspath(sys.argv[1])
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(bundle, "torch_pg.txt")) as f:
        words = f.read().split()
    sources = [os.path.join(repo, w) for w in words if not w.startswith("-D")]
    defines = [w for w in words if w.startswith("-D")]
    includes = [repo, os.path.join(repo, "comm", "include"), os.path.join(repo, "python"),
                os.path.join(bundle, "include")]
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        carried = glob.glob(os.path.join(bundle, "include", "python3*"))
        includes += carried
        print(f"gpu_build_torch_pg: this Python has no Python.h; using {carried}", flush=True)
    from torch.utils import cpp_extension

    build = tempfile.mkdtemp(prefix="ddl-torch-pg-")
    try:
        cpp_extension.load(
            name="_torch_pg", sources=sources, extra_include_paths=includes,
            extra_cflags=["-O2", "-std=c++20"] + defines,
            extra_ldflags=[f"-L{bundle}/lib", "-lddl", f"-Wl,-rpath,{bundle}/lib"],
            build_directory=build, is_python_module=False, verbose=False)
        built = os.path.join(build, "_torch_pg.so")
        out = os.path.join(bundle, "python", "ddl", "_torch_pg.so")
        shutil.copy2(built, out)
        import torch
        with open(os.path.join(bundle, "python", "ddl", "_torch_build.py"), "w") as f:
            f.write("# Written by bench/gpu_build_torch_pg.py: the torch ddl._torch_pg is built "
                    f"against.\nTORCH_VERSION = {torch.__version__.split('+')[0]!r}\n")
    finally:
        shutil.rmtree(build, ignore_errors=True)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
