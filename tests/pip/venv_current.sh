#!/usr/bin/env bash
# The fixture of the venv tests (tests/pip/venv.cmake): re-installs the project into the venv of
# scripts/setup, `pip install .` with the venv's own scikit-build-core and no dependencies, so
# the tests run the package of the sources as they are now. Incremental: the persistent build
# directory (pyproject.toml: build/wheel/) rebuilds only what changed. Skipped (77) without the
# venv.
#   venv_current.sh VENV SOURCE_DIR
set -uo pipefail
venv=$1 source=$2
if [[ ! -x $venv/bin/python ]]; then
  echo "venv_current: no venv at $venv (scripts/setup makes it): skipped"
  exit 77
fi
isolation=(--no-build-isolation)
"$venv/bin/python" -c 'import scikit_build_core' 2>/dev/null || isolation=()
if command -v ccache >/dev/null && [[ -z ${CMAKE_CXX_COMPILER_LAUNCHER:-} ]]; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
start=$SECONDS
if ! out=$(cd "$source" && "$venv/bin/pip" install --no-deps "${isolation[@]}" . 2>&1); then
  printf '%s\n' "$out"
  echo "venv_current: pip install . into $venv failed" >&2
  exit 1
fi
echo "venv_current: $venv has the package of $source ($((SECONDS - start)) s)"
