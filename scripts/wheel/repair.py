#!/usr/bin/python3
"""Turns the wheel `pip wheel .` builds (it loads Debian's libraries from /usr) into a binary
wheel that carries them, for scripts/build_wheel.

How it works, auditwheel-style:
  1. The wheel is unpacked. The extensions built against a framework's ABI move into
     ddl/_variants/torch-X.Y/ and ddl/_variants/tf-X.Y/ (ddl._binaries picks one at import),
     with the extra torch backends given (--torch-extension, built for other torch versions).
  2. From every ELF file (ddlrun, ddlrun-keeper, libddl, the extensions) the libraries it needs
     (DT_NEEDED) are followed, and each that is neither the C/C++ runtime (glibc, libstdc++,
     libgcc_s: the manylinux rule) nor a framework's own (libtorch, libc10, libtensorflow,
     loaded by `import torch` or `import tensorflow`) is copied into ddl/lib, and its own needs
     followed in turn. PMIx's and hwloc's plugins, which they open themselves, go into
     ddl/lib/pmix and ddl/lib/hwloc (those needing X, OpenCL or libxml2 left out), followed too.
  3. libddl_plugin_paths.so (scripts/wheel/plugin_paths.c) is compiled into ddl/lib and added to
     the copied libpmix's and libhwloc's DT_NEEDED: it points them at those plugin folders.
  4. Every ELF file is stripped and gets a run path relative to itself only ($ORIGIN, DT_RPATH so
     that it covers the libraries' own needs): ddl/lib from the package's files, itself in
     ddl/lib, `..` for the plugins; the scripts keep theirs (bin -> site-packages/ddl/lib).
  5. The tag: manylinux_2_Y for this host's glibc 2.Y (the copied libraries and libstdc++'s
     symbol versions are this Debian's), checked against the highest GLIBC_ symbol any file
     needs. RECORD is rewritten, the wheel zipped again under its new name, and its size said.

  repair.py WHEEL OUTDIR --torch-version X.Y.Z [--tf-version X.Y.Z]
            [--torch-extension PATH=X.Y.Z ...] [--cc CC]
"""

import argparse
import base64
import csv
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

SYSTEM = re.compile(r"^(ld-linux.*|linux-vdso.*|libc|libm|libdl|libpthread|librt|libresolv|"
                    r"libutil|libstdc\+\+|libgcc_s)\.so")
FRAMEWORK = re.compile(r"^(libtorch|libc10|libshm|libtensorflow|libpython)")
# hwloc plugins that need X, OpenCL or libxml2 (33 MB with ICU; hwloc reads XML without it).
SKIPPED_PLUGINS = {"hwloc_gl.so", "hwloc_opencl.so", "hwloc_xml_libxml.so"}
HERE = os.path.dirname(os.path.abspath(__file__))


def die(message):
    sys.exit(f"build_wheel: error: {message}")


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def is_elf(path):
    with open(path, "rb") as f:
        return not os.path.islink(path) and f.read(4) == b"\x7fELF"


def needed(path):
    """The DT_NEEDED names and absolute run path entries of ELF file `path`."""
    out = run("readelf", "-d", path)
    names = re.findall(r"\(NEEDED\).*\[(.*)\]", out)
    paths = re.findall(r"\((?:RPATH|RUNPATH)\).*\[(.*)\]", out)
    dirs = [d for p in paths for d in p.split(":") if d.startswith("/")]
    return names, dirs


def ldconfig_cache():
    """{soname: path} of the dynamic linker's cache (x86-64 entries)."""
    cache = {}
    for line in run("ldconfig", "-p").splitlines():
        m = re.match(r"\s*(\S+) \((.*)\) => (\S+)", line)
        if m and "x86-64" in m.group(2):
            cache.setdefault(m.group(1), m.group(3))
    return cache


class Bundle:
    """The unpacked wheel: its ELF files and the libraries copied into ddl/lib."""

    def __init__(self, root, cc):
        self.root, self.cc = root, cc
        self.lib = os.path.join(root, "ddl", "lib")
        self.cache = ldconfig_cache()
        self.copied = {}  # soname -> where it came from
        self.moved = {}  # staged path -> the folder its $ORIGIN entries were written for

    def resolve(self, name, dirs):
        """Where `name` (a DT_NEEDED entry) is found: ddl/lib, an absolute run path, the cache."""
        for d in [self.lib] + dirs:
            if os.path.exists(os.path.join(d, name)):
                return os.path.join(d, name)
        return self.cache.get(name)

    def follow(self, path):
        """Copies into ddl/lib what ELF file `path` needs, and what that needs, once each."""
        names, dirs = needed(path)
        for name in names:
            if SYSTEM.match(name) or FRAMEWORK.match(name) or name in self.copied:
                continue
            if os.path.exists(os.path.join(self.lib, name)):
                continue  # the wheel's own (libddl)
            source = self.resolve(name, dirs)
            if source is None:
                die(f"{os.path.relpath(path, self.root)} needs {name}, which is not found here")
            self.copied[name] = source
            target = os.path.join(self.lib, name)
            shutil.copyfile(source, target)
            os.chmod(target, 0o755)
            self.follow(target)

    def copy_plugins(self, library, folder):
        """Copies the plugins beside `library`'s real file in `folder` into ddl/lib/`folder`."""
        source = os.path.join(os.path.dirname(os.path.realpath(self.copied[library])), folder)
        if not os.path.isdir(source):
            die(f"{self.copied[library]} has no plugin folder {source}")
        target = os.path.join(self.lib, folder)
        os.makedirs(target, exist_ok=True)
        for name in sorted(os.listdir(source)):
            if name.endswith(".so") and name not in SKIPPED_PLUGINS:
                shutil.copyfile(os.path.join(source, name), os.path.join(target, name))
                self.follow(os.path.join(target, name))

    def add_plugin_paths(self):
        """Compiles plugin_paths.c into ddl/lib and makes libpmix and libhwloc need it."""
        lib = os.path.join(self.lib, "libddl_plugin_paths.so")
        run(self.cc, "-O2", "-shared", "-fPIC", "-Wall", "-Werror", "-o", lib,
            os.path.join(HERE, "plugin_paths.c"))
        for name in self.copied:
            if name.startswith(("libpmix.so", "libhwloc.so")):
                run("patchelf", "--add-needed", "libddl_plugin_paths.so",
                    os.path.join(self.lib, name))

    def elves(self):
        return sorted(os.path.join(d, n) for d, _, files in os.walk(self.root) for n in files
                      if is_elf(os.path.join(d, n)))

    def run_path(self, path):
        """The run path ELF file `path` gets (step 4 of the outline)."""
        folder = os.path.dirname(path)
        if folder == self.lib:
            return "$ORIGIN"
        if os.path.dirname(folder) == self.lib:
            return "$ORIGIN/.."
        out = run("readelf", "-d", path)
        old = [e for p in re.findall(r"\((?:RPATH|RUNPATH)\).*\[(.*)\]", out)
               for e in p.split(":") if e.startswith("$ORIGIN")]
        if not path.startswith(os.path.join(self.root, "ddl") + os.sep):
            return ":".join(old)  # the scripts: bin -> site-packages/ddl/lib
        written_for = self.moved.get(path, folder)
        entries = ["$ORIGIN/" + os.path.relpath(self.lib, folder)]
        for e in old:  # re-aimed from where the file was (tensorflow's, beside ddl)
            target = os.path.normpath(os.path.join(written_for, e[len("$ORIGIN/"):]))
            if not target.startswith(os.path.join(self.root, "ddl")):
                entries.append("$ORIGIN/" + os.path.relpath(target, folder))
        return ":".join(entries)

    def finish_elves(self):
        """Strips every ELF file and sets its run path."""
        for path in self.elves():
            rpath = self.run_path(path)
            run("strip", "--strip-unneeded", path)
            if rpath:
                run("patchelf", "--force-rpath", "--set-rpath", rpath, path)
            else:
                run("patchelf", "--remove-rpath", path)


def place_variants(bundle, args):
    """Step 1: the framework extensions into ddl/_variants/<framework>-X.Y/."""
    pkg = os.path.join(bundle.root, "ddl")
    variants = os.path.join(pkg, "_variants")

    def put(source, framework, version, keep=False):
        folder = os.path.join(variants, f"{framework}-{'.'.join(version.split('.')[:2])}")
        os.makedirs(folder, exist_ok=True)
        target = os.path.join(folder, os.path.basename(source))
        (shutil.copyfile if keep else shutil.move)(source, target)
        bundle.moved[target] = pkg
        print(f"build_wheel: {framework} {version}: ddl/{os.path.relpath(target, pkg)}")

    for name in sorted(os.listdir(pkg)):
        if name.startswith("_torch_pg") and name.endswith(".so"):
            put(os.path.join(pkg, name), "torch", args.torch_version)
        elif name == "_tf_ops.so" and args.tf_version:
            put(os.path.join(pkg, name), "tf", args.tf_version)
    for spec in args.torch_extension:
        path, _, version = spec.partition("=")
        put(path, "torch", version, keep=True)
    if not os.path.isdir(variants) or not os.listdir(variants):
        die("the wheel has no torch backend nor TensorFlow ops: build it with a Python that has "
            "torch (scripts/setup's build/venv)")
    if os.path.exists(os.path.join(pkg, "_torch_build.py")):
        os.remove(os.path.join(pkg, "_torch_build.py"))


def highest(bundle, prefix):
    """The highest `prefix`_X.Y symbol version any ELF file of the wheel needs."""
    found = set()
    for path in bundle.elves():
        found.update(re.findall(prefix + r"_([0-9.]+)", run("objdump", "-T", path)))
    return max(found, key=lambda v: tuple(int(p) for p in v.split(".")), default="0")


def retag(bundle, dist_info, wheel_name):
    """Step 5: the platform tag from this host's glibc; returns the new file name."""
    host = platform.libc_ver()[1]
    need = highest(bundle, "GLIBC")
    if tuple(map(int, need.split("."))) > tuple(map(int, host.split("."))):
        die(f"the files need GLIBC_{need}, newer than this host's glibc {host}")
    tag = f"manylinux_{host.replace('.', '_')}_x86_64"
    print(f"build_wheel: needs GLIBC_{need}, GLIBCXX_{highest(bundle, 'GLIBCXX')}: tagged {tag}")
    wheel_file = os.path.join(bundle.root, dist_info, "WHEEL")
    lines = open(wheel_file).read().splitlines()
    lines = [re.sub(r"^(Tag: \w+-\w+)-linux_x86_64$", rf"\1-{tag}", x) for x in lines]
    lines = [re.sub(r"^Root-Is-Purelib: .*", "Root-Is-Purelib: false", x) for x in lines]
    open(wheel_file, "w").write("\n".join(lines) + "\n")
    return re.sub(r"-linux_x86_64\.whl$", f"-{tag}.whl", wheel_name)


def zip_wheel(root, dist_info, target):
    """Writes RECORD (sha256 of every file) and zips the tree into `target`."""
    files = sorted(os.path.relpath(os.path.join(d, n), root)
                   for d, _, names in os.walk(root) for n in names)
    record = os.path.join(dist_info, "RECORD")
    rows = []
    for rel in files:
        if rel == record:
            continue
        data = open(os.path.join(root, rel), "rb").read()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append([rel, f"sha256={digest}", str(len(data))])
    rows.append([record, "", ""])
    with open(os.path.join(root, record), "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for rel in [f for f in files if f != record] + [record]:
            z.write(os.path.join(root, rel), rel)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("wheel")
    p.add_argument("outdir")
    p.add_argument("--torch-version", required=True)
    p.add_argument("--tf-version", default="")
    p.add_argument("--torch-extension", action="append", default=[])
    p.add_argument("--cc", default="cc")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="ddl-wheel.") as root:
        with zipfile.ZipFile(args.wheel) as z:
            z.extractall(root)
            for info in z.infolist():  # extractall drops the modes (ddlrun's executable bit)
                if info.external_attr >> 16:
                    os.chmod(os.path.join(root, info.filename), (info.external_attr >> 16) & 0o777)
        dist_info = next(n for n in os.listdir(root) if n.endswith(".dist-info"))
        bundle = Bundle(root, args.cc)
        place_variants(bundle, args)
        for path in bundle.elves():
            bundle.follow(path)
        for library, folder in (("libpmix.so.2", "pmix"), ("libhwloc.so.15", "hwloc")):
            if library in bundle.copied:
                bundle.copy_plugins(library, folder)
        bundle.add_plugin_paths()
        bundle.finish_elves()
        print("build_wheel: carries " + " ".join(sorted(bundle.copied)))
        name = retag(bundle, dist_info, os.path.basename(args.wheel))
        os.makedirs(args.outdir, exist_ok=True)
        target = os.path.join(args.outdir, name)
        zip_wheel(root, dist_info, target)
        unpacked = sum(os.path.getsize(os.path.join(d, n))
                       for d, _, names in os.walk(root) for n in names)
    print(f"build_wheel: {target}: {os.path.getsize(target) // 1024} KiB "
          f"({unpacked // 1024} KiB installed)")


if __name__ == "__main__":
    main()
