#!/usr/bin/env bash
# `pip install .` as a new user types it, into a fresh, empty venv of the PATH's python3 (no
# torch): it must build (in a build directory of its own, build/pip-test/, so the venv of
# scripts/setup keeps its torch backend in build/wheel/), say that the torch backend was
# skipped, install no torch backend, and give a ddlrun whose 2 ranks import ddl and allreduce,
# with no PYTHONPATH and no LD_LIBRARY_PATH. pip reaches scikit-build-core and numpy through
# its index (PyPI) or its cache.
#   fresh_venv.sh SOURCE_DIR BUILD_DIR [PYTHON]
set -uo pipefail
source=$1 build=$2 python=${3:-python3}
fail() {
  echo "fresh_venv: $*" >&2
  exit 1
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddl-fresh-venv.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
venv=$tmp/venv
"$python" -m venv "$venv" || fail "$python -m venv failed"
# The same depth below the source as build/wheel/TAG: with CCACHE_BASEDIR the compiles hit the
# cache that scripts/setup's wheel build filled.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$source}
if command -v ccache >/dev/null && [[ -z ${CMAKE_CXX_COMPILER_LAUNCHER:-} ]]; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
start=$SECONDS
out=$(cd "$source" && env -u PYTHONPATH "$venv/bin/pip" install -v \
  -C build-dir="$build/pip-test/wheel" . 2>&1)
status=$?
echo "== pip install . into an empty venv: $status after $((SECONDS - start)) s"
grep -E '^ *-- ddlrun:|Successfully installed|ERROR|CMake Error' <<<"$out"
((status == 0)) || {
  printf '%s\n' "$out" | tail -n 40 >&2
  fail "pip install . failed"
}
grep -q -- "-- ddlrun: torch backend ddl: skipped" <<<"$out" ||
  fail "pip install . did not say that the torch backend was skipped"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
[[ -f $site/ddl/__init__.py ]] || fail "no package ddl in $site"
if compgen -G "$site/ddl/_torch_pg*" >/dev/null; then
  fail "a torch backend was installed into a venv without torch"
fi

echo "== $venv/bin/ddlrun -H localhost:2 $venv/bin/python -c 'import ddl ...'"
out=$(cd "$tmp" && env -u PYTHONPATH -u LD_LIBRARY_PATH "$venv/bin/ddlrun" -H localhost:2 \
  --no-probe --tag-output none "$venv/bin/python" -c 'import numpy, ddl
x = numpy.arange(4.0) * (ddl.rank() + 1); ddl.allreduce(x)
print(f"rank {ddl.rank()} of {ddl.size()}: {x.tolist()}")' 2>&1) || {
  printf '%s\n' "$out" >&2
  fail "the job failed"
}
echo "$out"
for r in 0 1; do
  grep -qxF "rank $r of 2: [0.0, 3.0, 6.0, 9.0]" <<<"$out" || fail "rank $r did not allreduce"
done
echo "fresh_venv: ok"
