"""ddl._binaries: the extensions built against a framework's C++ ABI (the torch backend
ddl._torch_pg and the TensorFlow ops _tf_ops.so), chosen for the framework this process imports.

How it works: a source build (cmake, or `pip install .`) holds one of each beside this file, built
for the torch and TensorFlow of the interpreter it was built for; _torch_build.TORCH_VERSION
names that torch, and another one is refused before the extension is loaded. A binary wheel
(scripts/build_wheel) holds one per framework version it was built for instead, in
_variants/torch-X.Y/ and _variants/tf-X.Y/: the one whose X.Y is the version of the framework
imported here is loaded, and any other version gets one error naming the versions the wheel
serves and what to do. Loading an extension into another version's ABI would crash the process
or fail in obscure ways: it is never tried.
"""

import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_VARIANTS = os.path.join(_HERE, "_variants")


def _minor(version):
    """'2.13' for '2.13.0+cpu'."""
    return ".".join(version.split("+")[0].split(".")[:2])


def built_for(framework):
    """The X.Y versions of `framework` ("torch" or "tf") this wheel has an extension for, sorted
    ([] in a source build, which has no _variants/)."""
    prefix = framework + "-"
    names = os.listdir(_VARIANTS) if os.path.isdir(_VARIANTS) else []
    found = [n[len(prefix):] for n in names if n.startswith(prefix)]
    return sorted(found, key=lambda v: tuple(int(p) for p in v.split(".")))


def _variant_dir(framework, label, version, install):
    """The folder of the wheel's extension for `version`, or RuntimeError saying what to do."""
    have = built_for(framework)
    if _minor(version) in have:
        return os.path.join(_VARIANTS, f"{framework}-{_minor(version)}")
    served = f"{label} {', '.join(have)}" if have else f"no {label} version"
    raise RuntimeError(
        f"ddl: this ddlrun wheel was built for {served}, not for "
        f"{label} {version} of {sys.executable}: install one of those ({install}), or "
        "install ddlrun from its source into this environment (`pip install .` in a checkout of "
        "ddlrun, with the compiler and -dev packages its scripts/setup installs)")


def torch_backend(version):
    """The module ddl._torch_pg for torch `version` (torch.__version__), loaded; RuntimeError
    (one line saying what to do) when there is none for it."""
    if "ddl._torch_pg" in sys.modules:
        return sys.modules["ddl._torch_pg"]
    if not os.path.isdir(_VARIANTS):
        return _source_build_torch_backend(version)
    folder = _variant_dir("torch", "torch", version,
                          f"pip install 'torch=={built_for('torch')[-1]}.*'"
                          if built_for("torch") else "pip install torch")
    path = next(os.path.join(folder, n) for n in os.listdir(folder) if n.startswith("_torch_pg"))
    spec = importlib.util.spec_from_file_location("ddl._torch_pg", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["ddl._torch_pg"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["ddl._torch_pg"]
        raise
    return module


def _source_build_torch_backend(version):
    """A source build's ddl._torch_pg, after checking the torch it was built against."""
    try:
        from ._torch_build import TORCH_VERSION as built
    except ImportError:
        built = ""  # not built at all: the import below says so
    this = version.split("+")[0]
    if built and built.split(".")[:2] != this.split(".")[:2]:
        raise RuntimeError(
            f"ddl backend: the extension ddl._torch_pg was built against torch {built}, but "
            f"this Python ({sys.executable}) has torch {this}: run the job with the Python the "
            "package was built for, or build it for this one (cmake -DPython3_EXECUTABLE="
            f"{sys.executable}, or pip install . in its environment)")
    try:
        from . import _torch_pg
    except ImportError as e:
        raise RuntimeError(not_built_text(version, e)) from None
    return _torch_pg


def not_built_text(version, error):
    """The error of a package whose extension ddl._torch_pg is missing for torch `version`
    (`error`, the import's), with the step that builds it where this package came from."""
    return ("ddl backend: the extension ddl._torch_pg was not built for this torch "
            f"({version}; it needs torch, and its C++ headers, when ddlrun is built): "
            f"{_rebuild_hint()}: {error}")


def _rebuild_hint():
    """How to build ddl's extensions for this environment's torch: pip's reinstall when pip
    installed this package (its dist-info, ddlrun, lists this very file), from the source it
    was installed from (direct_url.json); the build tree's steps otherwise."""
    import importlib.metadata
    import json

    try:
        dist = importlib.metadata.distribution("ddlrun")
        mine = os.path.realpath(dist.locate_file("ddl/__init__.py")) == \
            os.path.realpath(os.path.join(os.path.dirname(__file__), "__init__.py"))
    except importlib.metadata.PackageNotFoundError:
        mine = False
    if not mine:
        return "run scripts/setup, then rebuild"
    source = "ddlrun"
    try:
        url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
    except ValueError:
        url = ""
    if url.startswith("file://"):
        source = url[len("file://"):]
    return ("pip built this ddlrun without torch: reinstall it in this environment, now that "
            f"torch is here: {sys.executable} -m pip install --force-reinstall --no-deps "
            f"{source}")


def tf_ops_path(version):
    """The path of the op library _tf_ops.so for TensorFlow `version` (tf.__version__);
    ImportError (one line saying what to do) when this ddl has none for it."""
    if not os.path.isdir(_VARIANTS):
        path = os.path.join(_HERE, "_tf_ops.so")
        if not os.path.exists(path):
            raise ImportError(f"ddl.tensorflow: {path} is missing: this ddl was built without "
                              "TensorFlow (its build found no tensorflow in the Python it was "
                              f"built for); build or install it for {sys.executable}")
        return path
    have = built_for("tf")
    try:
        folder = _variant_dir("tf", "TensorFlow", version,
                              f"pip install 'tensorflow-cpu=={have[-1]}.*'" if have
                              else "pip install tensorflow-cpu")
    except RuntimeError as e:
        raise ImportError(str(e)) from None
    return os.path.join(folder, "_tf_ops.so")
