"""ddl._autoload: the `torch.backends` entry point of an installed ddl.

torch 2.x calls every `torch.backends` entry point while `import torch` runs (unless
TORCH_DEVICE_BACKEND_AUTOLOAD=0), so where ddl is installed with one naming register() below,
init_process_group("ddl") works in any script, under ddlrun, torchrun or alone, with no import
of ddl. It runs ddlrun's sitecustomize hook (ddl/_site/sitecustomize.py, loaded by path under
another name, so the system's sitecustomize is not run again): the backend is registered once
torch.distributed has been imported. A failure here never breaks `import torch`: it is printed.
"""

import importlib.util
import os
import sys


def register():
    """Registers the torch.distributed backend "ddl" (when torch.distributed is imported)."""
    try:
        path = os.path.join(os.path.dirname(os.path.realpath(__file__)), "_site",
                            "sitecustomize.py")
        spec = importlib.util.spec_from_file_location("ddl._site_hook", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.install()
    except Exception as e:  # torch turns an entry point's exception into a failed import
        print(f"ddl: the torch.distributed backend ddl was not registered: "
              f"{type(e).__name__}: {e}", file=sys.stderr)
