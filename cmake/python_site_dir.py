"""Prints where the package ddl installs under a prefix, relative to it, for this interpreter.

The interpreter's own search path decides when it reads a site directory under the prefix
(Debian's python3: /usr/local/lib/python3.11/dist-packages for /usr/local,
/usr/lib/python3/dist-packages for /usr); otherwise sysconfig's posix_prefix layout
(lib/pythonX.Y/site-packages), which the interpreter reads only through PYTHONPATH.
    python3 cmake/python_site_dir.py PREFIX
"""
import os
import sys
import sysconfig


def site_dir(prefix):
    for path in sys.path:
        if os.path.basename(path) not in ("dist-packages", "site-packages"):
            continue
        if path.startswith(prefix + "/"):
            relative = os.path.relpath(path, prefix)
            if relative.startswith("lib"):
                return relative, True
    fallback = sysconfig.get_path("platlib", "posix_prefix",
                                  vars={"base": prefix, "platbase": prefix})
    return os.path.relpath(fallback, prefix), False


if __name__ == "__main__":
    relative, read = site_dir(os.path.normpath(sys.argv[1]))
    print(f"{relative};{'TRUE' if read else 'FALSE'}")
