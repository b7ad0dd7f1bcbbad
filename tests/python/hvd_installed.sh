#!/usr/bin/env bash
# python.hvd_installed_4: horovod.torch from an installed prefix. `cmake --install` into a
# temporary prefix must put the package horovod into <site>/ddl/_horovod/ only (never a top-level
# horovod an interpreter would find by itself), and check_hvd_api.py must pass as 4 ranks of the
# installed ddlrun with no PYTHONPATH (ddl and its horovod come from the installed ddlrun).
#   hvd_installed.sh CMAKE BUILD_DIR PYTHON
set -uo pipefail
source "$(dirname "$0")/../lib/python.sh"
cmake=$1 build=$2 python=$3
here=$(cd "$(dirname "$0")" && pwd)
if ! python_has "$python" torch; then
  echo "hvd_installed: $python has no torch: skipped"
  exit 77
fi
prefix=$(mktemp -d /tmp/hvd_installed.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
"$cmake" --install "$build" --prefix "$prefix" >/dev/null || {
  echo "hvd_installed: cmake --install failed" >&2
  exit 1
}
mapfile -t found < <(find "$prefix" -type d -name horovod)
if ((${#found[@]} != 1)) || [[ ${found[0]} != */ddl/_horovod/horovod ]]; then
  echo "hvd_installed: the package horovod is at '${found[*]}', not only in .../ddl/_horovod" >&2
  exit 1
fi
exec "$here/run_job.sh" --torch --plain "$prefix/bin/ddlrun" - "$python" 4 \
  "$here/check_hvd_api.py"
